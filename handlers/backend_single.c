/* backend_single.c -- one Redis master (found directly or through
 * Sentinel, which the Redis layer handles), and Redis Cluster, which reads
 * the same: the Redis layer sends each call to the master of its first
 * key's slot (server/cluster.c) and follows redirects, so a script call
 * here is one call there.  The two tables differ in readiness only.
 *
 * Replica acknowledgement (--min-replicas-ack) wraps the acquisition: a
 * WAIT follows the script on the same connection (in cluster mode, to the
 * master of the hold's slot). */
#include "common/alloc.h"
#include "handlers/backend.h"
#include "handlers/handlers.h"
#include "handlers/holds.h"
#include "handlers/sessions_cluster.h"
#include "handlers/verdict.h"
#include "server/http.h"
#include "server/loop.h"
#include "server/metrics.h"

#include <hiredis/hiredis.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- replica acknowledgement (--min-replicas-ack) -------------------------------
 *
 * Each attempt is EVALSHA followed, in the same pipeline, by WAIT.  The
 * request acts only when both answers are in, so it is never replied to (and
 * freed) while one is outstanding.  A grant that too few replicas took is
 * given back and answered 503: a failover could otherwise hand the same lock
 * to someone else.  The WAIT normally answers second; it answers first only
 * when the script was re-sent after NOSCRIPT, and then it did not cover the
 * script's write, so another WAIT is sent. */

static void send_wait(struct hold_call *hc);

/* The 503 goes out once the give-back is done, so that whoever the client
 * tells next (or a GET through another worker) finds the lock free.  It is
 * final, also for a request that was waiting: trying again would take the
 * lock and meet the same replicas. */
static void given_back(void *arg, const struct redis_result *res) {
    struct hold_call *hc = arg;
    if (!res->ok) /* the hold stays until its lease ends */
        snprintf(hc->ack->serr, sizeof hc->ack->serr,
                 "only %lld of %d replicas acknowledged the lock in time, and giving it back "
                 "failed (Redis: %s): it is held until its lease ends",
                 hc->ack->acked < 0 ? 0 : hc->ack->acked, hc->acks_wanted, res->error);
    hold_fail(hc, hc->ack->serr);
}

static void ack_finish(struct hold_call *hc) {
    struct hold_ack *a = hc->ack;
    a->got_script = a->got_ack = 0;
    long long verdict = a->sverdict;
    if ((verdict == VERDICT_GRANTED || verdict == VERDICT_REENTERED) &&
        a->acked < hc->acks_wanted) {
        long long acked = a->acked < 0 ? 0 : a->acked;
        if (!hold_gives_back(hc, verdict)) { /* a permit's re-entry cannot be undone */
            snprintf(a->serr, sizeof a->serr,
                     "only %lld of %d replicas acknowledged the re-entry in time; it stands", acked,
                     hc->acks_wanted);
            hold_fail(hc, a->serr);
            return;
        }
        snprintf(a->serr, sizeof a->serr,
                 "only %lld of %d replicas acknowledged the lock in time; it was given back", acked,
                 hc->acks_wanted);
        hold_give_back_then(hc->req, given_back, hc);
        return;
    }
    hold_attempt_done(hc, verdict, a->sv, a->serr);
}

static void ack_done(void *arg, const struct redis_result *res) {
    struct hold_call *hc = arg;
    struct hold_ack *a = hc->ack;
    a->got_ack = 1;
    a->acked = res->ok && res->reply->type == REDIS_REPLY_INTEGER ? res->reply->integer : -1;
    if (a->got_script) ack_finish(hc);
}

static void send_wait(struct hold_call *hc) {
    char n[16], timeout[16];
    snprintf(n, sizeof n, "%d", hc->acks_wanted);
    snprintf(timeout, sizeof timeout, "%d", handlers_config()->replica_ack_timeout_ms);
    const char *argv[3] = {"WAIT", n, timeout};
    size_t lens[3] = {4, strlen(n), strlen(timeout)};
    struct hold_keys k;
    hold_keys(hc->req->name, hc->kind == HOLD_PERMIT, &k);
    redis_command_for(k.hash, 3, argv, lens, ack_done, hc);
}

static void acquire_done(void *arg, const struct redis_result *res) {
    struct hold_call *hc = arg;
    long long v[5] = {0};
    const char *err = NULL;
    long long verdict = verdict_parse_acquire(res, hc->ttl_ms, v, &err);
    if (verdict == VERDICT_BUSY) v[2] = hold_reply_int(res, 2);
    metrics_inc(M_DEAD_WAITERS, (uint64_t)hold_acquire_dropped(res));
    if (!hc->acks_wanted) {
        hold_attempt_done(hc, verdict, v, err);
        return;
    }
    struct hold_ack *a = hc->ack;
    a->got_script = 1;
    a->sverdict = verdict;
    memcpy(a->sv, v, sizeof v);
    snprintf(a->serr, sizeof a->serr, "%s", err ? err : "");
    if (!a->got_ack) return; /* the usual order: WAIT answers next */
    a->got_ack = 0;
    if (verdict == VERDICT_GRANTED || verdict == VERDICT_REENTERED) {
        send_wait(hc); /* that WAIT ran before this write */
        return;
    }
    ack_finish(hc);
}


/* ---- the table ------------------------------------------------------------------- */

static void single_acquire(struct hold_call *hc, int nkeys, int nargs, const char *const *argv,
                           const size_t *lens) {
    redis_eval(SCRIPT_ACQUIRE, nkeys, nargs, argv, lens, acquire_done, hc);
    if (hc->acks_wanted) send_wait(hc);
}

static void single_extend(int nargs, const char *const *argv, const size_t *lens, int64_t start_ns,
                          redis_cb cb, void *arg) {
    redis_eval(SCRIPT_EXTEND, 1, nargs, argv, lens, cb, arg);
}

static void single_release(int nargs, const char *const *argv, const size_t *lens, redis_cb cb,
                           void *arg) {
    redis_eval(SCRIPT_RELEASE, 1, nargs, argv, lens, cb, arg);
}

static void single_inspect(int nargs, const char *const *argv, const size_t *lens, redis_cb cb,
                           void *arg) {
    redis_eval(SCRIPT_INSPECT, 1, nargs, argv, lens, cb, arg);
}

/* dequeue.lua answers {removed, dropped}; the others' answers are dropped. */
struct forget_call {
    void (*dropped)(long long n); /* told how many dead waiters went */
};

static void forget_done(void *arg, const struct redis_result *res) {
    struct forget_call *fc = arg;
    if (!fc) return;
    fc->dropped(hold_reply_int(res, 1));
    free(fc);
}

static void single_forget(enum script_id id, int nkeys, int nargs, const char *const *argv,
                          const size_t *lens, void (*dropped)(long long n)) {
    struct forget_call *fc = NULL;
    if (dropped) {
        fc = alloc_check(malloc(sizeof *fc));
        fc->dropped = dropped;
    }
    redis_eval(id, nkeys, nargs, argv, lens, forget_done, fc);
}

static void single_eval(enum script_id id, int nkeys, int nargs, const char *const *argv,
                        const size_t *lens, redis_cb one, redis_all_cb all, void *arg) {
    redis_eval(id, nkeys, nargs, argv, lens, one, arg);
}

/* Ready when a PING makes the whole round trip through the Redis layer. */
static void single_ready(redis_cb cb, void *arg) {
    const char *argv[1] = {"PING"};
    size_t lens[1] = {4};
    redis_command(1, argv, lens, cb, arg);
}

/* A session-bound hold in cluster mode takes three calls in two slots
 * (sessions_cluster.c); any other, one. */
static void cluster_acquire(struct hold_call *hc, int nkeys, int nargs, const char *const *argv,
                            const size_t *lens) {
    if (hc->session)
        sessions_cluster_acquire(hc, nargs, argv, lens);
    else
        single_acquire(hc, nkeys, nargs, argv, lens);
}

const struct backend backend_single = {
    .name = "single",
    .acquire = single_acquire,
    .extend = single_extend,
    .release = single_release,
    .inspect = single_inspect,
    .forget = single_forget,
    .eval = single_eval,
    .id_lease = backend_lease_one,
    .ready = single_ready,
    .undoes_reentry = 1,
    .fans_out = 0,
};

const struct backend backend_cluster = {
    .name = "cluster",
    .acquire = cluster_acquire,
    .extend = single_extend,
    .release = single_release,
    .inspect = single_inspect,
    .forget = single_forget,
    .eval = single_eval,
    .id_lease = backend_lease_one,
    .ready = redis_cluster_ready, /* every slot has a master that answers */
    .undoes_reentry = 1,
    .per_slot = 1,
    .fans_out = 0,
};
