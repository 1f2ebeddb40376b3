/* backend.h -- the Redis mode as one table the handlers call through.
 *
 * A backend is chosen once, at start (handlers_init, wiring.c), from the settings:
 *   single  -- one master (found directly, or through Sentinel);
 *   quorum  -- the same call on every master, a majority decides (Redlock);
 *   cluster -- Redis Cluster: each call goes to the master of its key's
 *              slot (server/cluster.c), so it reads like single.
 * Replica acknowledgement (--min-replicas-ack) wraps single and cluster:
 * each write's WAIT goes to the master that took the write.
 *
 * Every entry answers exactly once, on the loop thread (or, for id_lease,
 * on the calling thread), whatever Redis does.  Handlers build the keys and
 * arguments, call the entry, and read one answer shaped like a single
 * master's: the backend has already reduced a quorum's answers to it. */
#ifndef LOCKGATE_BACKEND_H
#define LOCKGATE_BACKEND_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "server/config.h"
#include "server/redis.h"
#include "server/scripts.h"

struct hold_call;
struct idgen_block_lease;

struct backend {
    const char *name; /* "single", "quorum", "cluster" */

    /* acquire.lua for hc (argv as holds.c built it); answers once through
     * hold_attempt_done (holds.h) with verdict (verdict.h) and v[0..4] =
     * {verdict, fence, count, ttl_ms, holders} on a grant, {0,
     * retry_after_ms, cause} when busy, {-4, limit} on a limit mismatch. */
    void (*acquire)(struct hold_call *hc, int nkeys, int nargs, const char *const *argv,
                    const size_t *lens);
    /* extend.lua, release.lua, inspect.lua on one hold: cb gets the answer
     * that stands for the backend's.  req_start_ns: when the request came
     * (a quorum's lease is shortened by the round's time). */
    void (*extend)(int nargs, const char *const *argv, const size_t *lens, int64_t req_start_ns,
                   redis_cb cb, void *arg);
    void (*release)(int nargs, const char *const *argv, const size_t *lens, redis_cb cb, void *arg);
    void (*inspect)(int nargs, const char *const *argv, const size_t *lens, redis_cb cb, void *arg);
    /* A script nobody waits for, everywhere the hold may live (a give-back,
     * a fence raise, a fair waiter leaving): dropped is told, once, how many
     * dead waiters dequeue.lua dropped (may be NULL). */
    void (*forget)(enum script_id id, int nkeys, int nargs, const char *const *argv,
                   const size_t *lens, void (*dropped)(long long n));
    /* Any other script on one name's keys (multi.c, sessions.c, watch.c,
     * force.c), for callers that reduce a quorum's answers themselves: one
     * gets the answer when there is one master to ask, all gets every
     * master's when the backend fans out. */
    void (*eval)(enum script_id id, int nkeys, int nargs, const char *const *argv,
                 const size_t *lens, redis_cb one, redis_all_cb all, void *arg);
    /* Leases a block of ids for namespace key (idgen's slow path; blocks the
     * calling thread for at most a few command timeouts): 0, or -1. */
    int (*id_lease)(const char *key, const char *epoch, uint32_t want,
                    struct idgen_block_lease *out);
    /* Ready to serve: ok when every part of the keyspace has a master that
     * answers (single: the master; quorum: a quorum; cluster: every slot). */
    void (*ready)(redis_cb cb, void *arg);

    int undoes_reentry; /* an undelivered re-entry can be given back: its
                           release reaches exactly the masters that took it */
    int per_slot;       /* one script call may touch one hash slot's keys only
                           (cluster): a multi-lock goes group by group in slot
                           order (multi.c), sessions slot by slot
                           (sessions_cluster.c) */
    int fans_out;       /* calls go to every master (multi.c, sessions.c,
                           watch.c and force.c still reduce for themselves) */
};

/* The one that runs; set by handlers_init (wiring.c) before any request. */
extern const struct backend *backend;

/* The three backends (backend_single.c, backend_quorum.c, backend_cluster.c). */
extern const struct backend backend_single, backend_quorum, backend_cluster;

/* ---- shared by the backends (backend.c) ---------------------------------------- */

/* An HTTP thread waiting for a Redis answer the loop thread delivers. */
struct lease_wait {
    pthread_mutex_t mu;            /* guards done and ok */
    pthread_cond_t cond;           /* signalled when done */
    int done;                      /* the callback ran */
    int ok;                        /* the answer is in out */
    struct idgen_block_lease *out; /* where to put it */
};
void backend_lease_finish(struct lease_wait *lw, int ok);
void backend_lease_wait_for(struct lease_wait *lw);
/* Reads id_lease.lua's {second, first, last}; returns 1 when it is one. */
int backend_parse_lease(const struct redis_result *res, struct idgen_block_lease *out);
/* One id_lease.lua call, waited for: single and cluster's id_lease. */
int backend_lease_one(const char *key, const char *epoch, uint32_t want,
                      struct idgen_block_lease *out);

#endif
