/* liveness.h -- this gateway's liveness in Redis, so that fair queues can
 * drop the waiters of a gateway that died or lost Redis (lua/_holders.lua,
 * queue_head).
 *
 * A field per gateway, valued with the end of its liveness (ms, Redis's
 * clock), in a hash the scripts that judge a queue declare
 * (liveness_hash_for), so no script reads a key it did not declare, in any
 * mode (lua/liveness.lua sets the field and drops dead gateways' ones).
 *
 * Single, Sentinel, quorum: one hash, <prefix>gw, on every master in
 * quorum mode.  The field is renewed every third of --liveness-ttl-ms by
 * the workers' loops in turn, and first thing on every new command
 * connection, so a restarted or failed-over Redis has it before any
 * waiter's attempt.  Fair waiters' ids are "<id>.<n>", from which the
 * scripts find the field: the cost is one script call per gateway per
 * renewal, nothing per waiter.
 *
 * Redis Cluster: a queue's script can only read keys of its own slot, so
 * there is one such hash per slot, <prefix>gw{<slot tag>}, the tag being
 * the one of the slot's release channel (redis.h).  A worker sets its
 * field when its first fair waiter in that slot joins (on its connection
 * to the slot's master, ahead of the waiter's attempt) and renews it while
 * it has waiters there: one script call per slot with waiters per
 * renewal. */
#ifndef LOCKGATE_LIVENESS_H
#define LOCKGATE_LIVENESS_H

#include <stddef.h>
#include <stdint.h>

#include "server/config.h"

#define LIVENESS_ID_LEN        12 /* characters of a gateway id (72 random bits) */
#define LIVENESS_WAITER_ID_MAX 32 /* room for a waiter id and its NUL */

/* Makes this gateway's id and key, and registers the key's SET as the
 * first command of every new Redis connection.  Before the workers start. */
void liveness_init(const struct gw_config *cfg);

/* The loop turn-start hook (loop.h) that renews the key when due, on the
 * calling worker's Redis connections. */
void liveness_turn_hook(void *arg, int64_t now_ms);

/* Writes into out (cap bytes) the liveness hash that judges the fair
 * queue of key (a lock's or semaphore's hash), which a script that may
 * read that queue's head declares among its KEYS: in cluster mode the
 * slot's, <prefix>gw{<tag>}; in the other modes the one hash, <prefix>gw. */
#define LIVENESS_HASH_MAX 320 /* room for a liveness hash's name */
void liveness_hash_for(const char *key, char *out, size_t cap);

/* Writes a new waiter id, "<gateway id>.<n>", unique for this gateway's
 * life; any thread. */
void liveness_waiter_id(char out[LIVENESS_WAITER_ID_MAX]);

/* A fair waiter of the calling worker queues on the lock whose hash key is
 * key: in cluster mode the worker keeps its key in that slot while it has
 * waiters there (one join per slot a waiter queues in: a multi-lock joins
 * each of its slots).  Returns what to give liveness_waiter_leave when it
 * is done (answered or gone), on the same worker; -1 in the other modes. */
int liveness_waiter_join(const char *key);

/* Cluster mode: a command connection of the calling worker is being made
 * (redis_on_command_up): its slots' keys are set again at once, since a
 * restarted or failed-over master may not have them. */
void liveness_connection_up(void *arg);
void liveness_waiter_leave(int joined);
/* The calling worker's loop has ended: its per-slot table goes. */
void liveness_worker_done(void);

#endif
