/* lossguard.h -- a Redis master that lost its data is noticed, and no lock
 * is granted until every lease that could have been running has ended.
 *
 * Each master keeps a marker key, <prefix>marker, with no TTL: the first
 * gateway that finds it missing sets it (SETNX, a fresh random value each
 * time, so each loss leaves a value of its own), and every
 * gateway reads it on each new command connection and every
 * MEMGUARD_PERIOD_MS (redis.c sends, this file reads).  A connection that
 * has seen a master's marker and then finds it missing or changed knows
 * the master lost its data: a restart without persistence, FLUSHALL, a
 * failover to a replica that was empty.  (A failover that loses only the
 * last writes keeps the marker: that is what --min-replicas-ack is for.)
 * Not in Redis Cluster mode (a key without a hash tag lives on one master
 * only).
 *
 * On a loss: an error line and lockgate_redis_data_lost_total (once per
 * loss, whichever connection notices first), and for --max-lease-ms from
 * then (no lease, session or extension is granted for longer) lock,
 * semaphore, session and multi-lock grants are refused with 503
 * redis_data_lost and a Retry-After, and /readyz says so.  Not in quorum
 * mode: there a minority losing its data is what the others' votes are
 * for, and holding every grant off would turn one master's restart into
 * an outage; the loss is said and counted, and keeping that master out
 * for the longest lease (Redlock's delayed restart) stays the operator's.
 *
 * At start (each master's first INFO), a master with neither AOF nor a
 * replica gets a warning: a restart would forget every held lock. */
#ifndef LOCKGATE_LOSSGUARD_H
#define LOCKGATE_LOSSGUARD_H

#include <stddef.h>
#include <stdint.h>

#define LOSSGUARD_MARKER_LEN 24

/* What one connection's node last read of its marker. */
struct lossguard_seen {
    char marker[LOSSGUARD_MARKER_LEN + 1]; /* "" before the first read */
    int absent;                            /* the SETNX just set it */
};

/* Before the workers start: the longest lease, and whether a loss holds
 * grants off (1 with one master; 0 in quorum mode, where a loss is only
 * said and counted). */
void lossguard_init(long long max_lease_ms, int hold_off);

/* The marker read on a connection to host:port (absent: this read's SETNX
 * set it, so it had been missing). */
void lossguard_note(struct lossguard_seen *seen, const char *host, int port, const char *value);

/* A master's INFO persistence and replication: warns once per master
 * without AOF and without replicas. */
void lossguard_check_persistence(const char *host, int port, const char *info);

/* Grants refused now; *retry_after_ms is how long still. */
int lossguard_refusing(int64_t *retry_after_ms);
/* The last loss, for /readyz; 0 when none is in force. */
int lossguard_describe(char *out, size_t cap);

#endif
