/* memguard.h -- whether a Redis master the gateway uses may evict keys.
 *
 * A held lock is a hash in Redis.  A master with maxmemory set and a
 * maxmemory-policy other than noeviction may evict it while it is held,
 * and the next client is then granted the same lock.  volatile-* policies
 * are the worst case: the lock hashes are the keys with a TTL.  So every
 * master is checked with INFO memory (which works where CONFIG is renamed
 * or disabled, as on managed Redis) each time a command connection to it
 * is made (start, reconnect, a Sentinel failover, every Cluster node) and
 * every MEMGUARD_PERIOD_MS on it (redis.c sends it; this file reads it).
 *
 * While a master the gateway is connected to may evict, lock, semaphore,
 * session and multi-lock grants are refused with 503 redis_may_evict,
 * /readyz is 503 naming the master and its policy, and an error is logged
 * (once per change).  Ids are refused only under an allkeys-* policy:
 * their marks have no TTL, so volatile-* policies never evict them.  With
 * --accept-eviction-risk 1 nothing is refused (logged at start and with
 * each finding).
 *
 * Between a connection being made and its INFO answer (one round trip)
 * the master counts as not evicting. */
#ifndef LOCKGATE_MEMGUARD_H
#define LOCKGATE_MEMGUARD_H

#include <stddef.h>

#define MEMGUARD_PERIOD_MS 10000

/* What one connection last learnt of its master: none, or an evicting
 * policy (kept in the connection's node by redis.c, changed only here). */
struct memguard_seen {
    int evicting; /* 0 none, 1 volatile-*, 2 allkeys-* (or another policy) */
};

/* Before the workers start. */
void memguard_init(int accept_risk);

/* Reads an INFO memory answer for host:port; whether its maxmemory-policy
 * may evict (1 volatile-*, 2 any other) or not (0), and the policy's name in
 * policy.  Pure: for tests. */
int memguard_parse(const char *info, char *policy, size_t cap, long long *maxmemory);

/* A connection's INFO memory answer (any thread), and its loss. */
void memguard_note(struct memguard_seen *seen, const char *host, int port, const char *info);
void memguard_forget(struct memguard_seen *seen);

/* Grants of locks, semaphores, sessions and multi-locks are refused now;
 * ids are refused now. */
int memguard_refusing(void);
int memguard_ids_refusing(void);

/* "master 127.0.0.1:6379 has maxmemory-policy allkeys-lru (maxmemory
 * 2097152)" for the last master found evicting; 0, or 1 when there is one
 * (then the text is in out). */
int memguard_describe(char *out, size_t cap);

#endif
