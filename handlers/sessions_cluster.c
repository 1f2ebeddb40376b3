/* sessions_cluster.c -- a session-bound acquire in Redis Cluster mode.
 *
 * A session's key (<prefix>session:{token}) and its holds' hashes
 * (<prefix>lock:{name}) hash to different slots, and a script may touch
 * one slot.  A session-bound hold carries the session's lease itself, in
 * every mode (lua/_holders.lua, "sessions"); outside Cluster acquire.lua
 * reads the session's end and lock-delay from the session's key, which it
 * declares.  Here it cannot, so:
 *
 *   1. session_bind.lua r in the session's slot: live, and for how long
 *      (else 404 session_not_found);
 *   2. acquire.lua in the lock's slot, lease = that time left, lock-delay
 *      the session's or the hold's own, the longer;
 *   3. session_bind.lua b: list the hold in the session.  The session gone
 *      by then (a DELETE raced) gives the hold back.
 *
 * A crash between 2 and 3 leaves a hold the session does not list, whose
 * lease ends no later than the session would have without renewal, and
 * whose client never got an answer.  A renewal, end or read of the
 * session reaches its holds slot by slot (sessions_fan.c).
 *
 * Times cross masters as durations, never as clock readings: each master
 * computes an end from its own clock. */
#include "handlers/sessions_cluster.h"
#include "common/alloc.h"
#include "handlers/backend.h"
#include "handlers/handlers.h"
#include "handlers/holds.h"
#include "handlers/verdict.h"
#include "server/metrics.h"
#include "server/redis.h"
#include "server/request.h"

#include <hiredis/hiredis.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int verdict_ok(const struct redis_result *res) {
    return res->ok && res->reply->type == REDIS_REPLY_ARRAY && res->reply->elements >= 1 &&
           res->reply->element[0]->type == REDIS_REPLY_INTEGER;
}

/* ---- acquire ------------------------------------------------------------------- */

/* holds.c's argv for a session-bound acquire: KEYS hash, queue, qdead,
 * session, the slot's liveness hash; then ARGV token, ttl, owner,
 * max-hold, lock-delay, ...  */
enum { AV_HASH = 0, AV_SKEY = 3, AV_TOKEN = 5, AV_TTL = 6, AV_DELAY = 9, AV_MAX = 20 };

struct session_acquire {
    struct hold_call *hc; /* the acquisition this attempt is for */
    int nargs;            /* argv's count, the session's key included */
    char *argv[AV_MAX];   /* holds.c's argv, copied (the attempt's are on its stack) */
    long long verdict;    /* acquire.lua's, kept across the bind */
    long long v[5];       /* its values */
    long long outcome;    /* the verdict to answer once a give-back is done */
    char err[128];        /* its error text */
};

static void acquire_free(struct session_acquire *sa) {
    for (int i = 0; i < sa->nargs; i++) free(sa->argv[i]);
    free(sa);
}

static void acquire_finish(struct session_acquire *sa, long long verdict, const char *err) {
    hold_attempt_done(sa->hc, verdict, sa->v, err);
    acquire_free(sa);
}

static void given_back(void *arg, const struct redis_result *res) {
    struct session_acquire *sa = arg;
    (void)res;
    acquire_finish(sa, sa->outcome, sa->outcome == VERDICT_ERROR ? sa->err : NULL);
}

/* Gives the hold back, then answers outcome (so the client, told it holds
 * nothing, finds it so through any gateway). */
static void give_back(struct session_acquire *sa, long long outcome, const char *err) {
    sa->outcome = outcome;
    snprintf(sa->err, sizeof sa->err, "%s", err ? err : "");
    hold_give_back_then(sa->hc->req, given_back, sa);
}

/* --min-replicas-ack: the grant stands once enough replicas of the
 * lock's master have it (as backend_single.c's), else it is given back. */
static void acked(void *arg, const struct redis_result *res) {
    struct session_acquire *sa = arg;
    long long n = res->ok && res->reply->type == REDIS_REPLY_INTEGER ? res->reply->integer : -1;
    if (n >= sa->hc->acks_wanted) {
        acquire_finish(sa, sa->verdict, NULL);
        return;
    }
    give_back(sa, VERDICT_ERROR, "too few replicas acknowledged the lock; it was given back");
}

static void bound(void *arg, const struct redis_result *res) {
    struct session_acquire *sa = arg;
    if (verdict_ok(res) && redis_reply_int(REDIS_ANSWER(res), 0, 0) == 1) {
        if (!sa->hc->acks_wanted) {
            acquire_finish(sa, sa->verdict, NULL);
            return;
        }
        char n[16], timeout[16];
        snprintf(n, sizeof n, "%d", sa->hc->acks_wanted);
        snprintf(timeout, sizeof timeout, "%d", handlers_config()->replica_ack_timeout_ms);
        const char *argv[3] = {"WAIT", n, timeout};
        size_t lens[3] = {4, strlen(n), strlen(timeout)};
        redis_command_for(sa->argv[AV_HASH], 3, argv, lens, acked, sa);
        return;
    }
    /* Not listed in its session: nobody could renew or end it, so it goes. */
    if (verdict_ok(res))
        give_back(sa, VERDICT_SESSION_ENDED, NULL);
    else
        give_back(sa, VERDICT_ERROR, res->ok ? "unexpected answer" : res->error);
}

static void acquired(void *arg, const struct redis_result *res) {
    struct session_acquire *sa = arg;
    const char *err = NULL;
    sa->verdict = verdict_parse_acquire(res, sa->hc->ttl_ms, sa->v, &err);
    if (sa->verdict == VERDICT_BUSY) sa->v[2] = hold_reply_int(res, 2);
    metrics_inc(M_DEAD_WAITERS, (uint64_t)hold_acquire_dropped(res));
    if (sa->verdict != VERDICT_GRANTED && sa->verdict != VERDICT_REENTERED) {
        acquire_finish(sa, sa->verdict, err);
        return;
    }
    const char *argv[4] = {sa->argv[AV_SKEY], "b", sa->argv[AV_HASH], sa->argv[AV_TOKEN]};
    size_t lens[4];
    for (int i = 0; i < 4; i++) lens[i] = strlen(argv[i]);
    redis_eval(SCRIPT_SESSION_BIND, 1, 4, argv, lens, bound, sa);
}

static void session_read(void *arg, const struct redis_result *res) {
    struct session_acquire *sa = arg;
    if (!verdict_ok(res)) {
        acquire_finish(sa, VERDICT_ERROR, res->ok ? "unexpected answer" : res->error);
        return;
    }
    if (redis_reply_int(REDIS_ANSWER(res), 0, 0) != 1) {
        acquire_finish(sa, VERDICT_SESSION_ENDED, NULL);
        return;
    }
    /* The lease is the session's time left, the lock-delay the longer of
     * the request's and the session's (as load() does in one slot). */
    long long left = redis_reply_int(REDIS_ANSWER(res), 1, 0),
              sdelay = redis_reply_int(REDIS_ANSWER(res), 2, 0);
    char ttl[24], delay[24];
    snprintf(ttl, sizeof ttl, "%lld", left);
    long long own = strtoll(sa->argv[AV_DELAY], NULL, 10);
    snprintf(delay, sizeof delay, "%lld", sdelay > own ? sdelay : own);
    /* The session's key is in another slot: it goes, and the keys are the
     * lock's three and its slot's liveness hash (acquire.lua). */
    const char *av[AV_MAX];
    size_t lens[AV_MAX];
    int n = 0;
    for (int i = 0; i < sa->nargs; i++) {
        if (i == AV_SKEY) continue;
        av[n] = i == AV_TTL ? ttl : i == AV_DELAY ? delay : sa->argv[i];
        lens[n] = strlen(av[n]);
        n++;
    }
    redis_eval(SCRIPT_ACQUIRE, 4, n, av, lens, acquired, sa);
}

void sessions_cluster_acquire(struct hold_call *hc, int nargs, const char *const *argv,
                              const size_t *lens) {
    struct session_acquire *sa = alloc_check(calloc(1, sizeof *sa));
    sa->hc = hc;
    sa->nargs = nargs < AV_MAX ? nargs : AV_MAX;
    for (int i = 0; i < sa->nargs; i++) sa->argv[i] = alloc_copy(argv[i], lens[i]);
    const char *av[2] = {sa->argv[AV_SKEY], "r"};
    size_t l[2] = {strlen(av[0]), 1};
    redis_eval(SCRIPT_SESSION_BIND, 1, 2, av, l, session_read, sa);
}
