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

/* What an id lease asks Redis for (handlers/ids.c fills it in). */
struct id_ask {
    const char *key;    /* the namespace's mark, "<prefix>id:{<namespace>}" */
    const char *epoch;  /* --id-epoch, unix seconds in decimal */
    uint32_t want;      /* numbers wanted */
    const char *era;    /* the id era key in the mark's slot (id_lease.lua) */
    uint64_t floor;     /* the highest id the namespace leased here, 0: none */
    int floor_soft;     /* the floor may be another namespace's: go above it */
    int jump_s;         /* --id-jump-s: the step after a new or lost mark */
    int acks;           /* --min-replicas-ack: replicas that must have the lease */
    int ack_timeout_ms; /* how long to wait for them */
};

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
    /* Leases a block of ids (idgen's slow path; blocks the calling thread
     * for at most a few command timeouts): 0, or idgen_ops.lease's < 0. */
    int (*id_lease)(const struct id_ask *ask, struct idgen_block_lease *out);
    /* Ready to serve: ok when every part of the keyspace has a master that
     * answers (single: the master; quorum: a quorum; cluster: every slot). */
    void (*ready)(redis_cb cb, void *arg);

    int undoes_reentry; /* an undelivered re-entry can be given back: its
                           release reaches exactly the masters that took it */
    int per_slot;       /* one script call may touch one hash slot's keys only
                           (cluster): a multi-lock goes group by group in slot
                           order (multi.c), sessions slot by slot
                           (sessions_fan.c) */
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
    pthread_mutex_t mu;            /* guards done and rc */
    pthread_cond_t cond;           /* signalled when done */
    int done;                      /* the callback ran */
    int rc;                        /* 0: the answer is in out; else < 0 (idgen.h) */
    struct idgen_block_lease *out; /* where to put it */
    const struct id_ask *ask;      /* what was asked */
};
void backend_lease_finish(struct lease_wait *lw, int rc);
void backend_lease_wait_for(struct lease_wait *lw);
/* Quorum mode (backend_quorum.c): raises every master's last fence of each
 * of the n hashes to fences[i] (lua/fence_raise.lua) and calls done(arg,
 * ok) once every master has answered every raise: ok when a quorum of
 * masters took each one.  A grant is answered only then, so any later
 * quorum, which shares a master with that one, answers a higher fence
 * whatever raise is lost on the way. */
void quorum_fences_raise(int n, const char *const *hashes, const long long *fences,
                         void (*done)(void *arg, int ok), void *arg);
/* What quorum_fences_raise's refusal says. */
#define QUORUM_RAISE_FAILED \
    "the new fence did not reach a quorum of masters; the grant was given back"

/* Reads id_lease.lua's answer into *out: 0 for a block, IDGEN_BEHIND or
 * IDGEN_EPOCH_MISMATCH for a refusal (logged, counted), -1 when it is no
 * answer of the script's. */
int backend_parse_lease(const struct redis_result *res, const struct id_ask *ask,
                        struct idgen_block_lease *out);
/* Logs and counts a refused lease: ask's floor is above Redis's answer
 * (second, first), or the mark's epoch `mark_epoch` is earlier than ask's. */
void backend_lease_refused(const struct id_ask *ask, int rc, long long a, long long b);
/* One id_lease.lua call, waited for, and with --min-replicas-ack N used only
 * once N replicas have it: single and cluster's id_lease. */
int backend_lease_one(const struct id_ask *ask, struct idgen_block_lease *out);

#endif
