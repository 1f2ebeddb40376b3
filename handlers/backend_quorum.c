/* backend_quorum.c -- quorum mode (the Redlock algorithm), backend.h's
 * second table.
 *
 * Every operation runs on every master at once (pipelined per master, in
 * parallel across them).  An acquisition counts when a quorum granted it
 * within the lease's validity: the shortest granted lease, minus the time
 * the round took, minus a clock-drift allowance of 1% of the lease plus
 * 2 ms; the answer's ttl_ms is that validity (quorum_math.c).  A failed
 * acquisition gives back what it got.  The fence is the highest the quorum
 * answered, and every master's last fence is raised to it before the grant
 * is answered, so any later quorum (which shares a master with the quorum
 * that took the raise) answers a higher one.
 *
 * Replica acknowledgement is refused with this backend at start
 * (config.c): a quorum of masters is already what survives losing one, and
 * a WAIT would have to run on every master of the quorum. */
#include "common/alloc.h"
#include "handlers/backend.h"
#include "handlers/holds.h"
#include "handlers/undo.h"
#include "handlers/quorum_math.h"
#include "handlers/verdict.h"
#include "idgen/idgen.h"
#include "server/http.h"
#include "server/loop.h"
#include "server/metrics.h"
#include "server/worker.h"

#include <hiredis/hiredis.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- fire and forget ------------------------------------------------------------- */

struct forget_call {
    void (*dropped)(long long n); /* told the most any master dropped, or NULL */
};

/* dequeue.lua answers {removed, dropped}.  Every master holds its own copy
 * of a dead waiter's entry: the most any master dropped counts, so one
 * waiter counts once. */
static void forget_done(void *arg, const struct redis_result *res, int n) {
    struct forget_call *fc = arg;
    if (!fc) return;
    long long most = 0;
    for (int i = 0; i < n; i++)
        if (hold_reply_int(&res[i], 1) > most) most = hold_reply_int(&res[i], 1);
    fc->dropped(most);
    free(fc);
}

static void quorum_forget(enum script_id id, int nkeys, int nargs, const char *const *argv,
                          const size_t *lens, void (*dropped)(long long n)) {
    struct forget_call *fc = NULL;
    if (dropped) {
        fc = alloc_check(malloc(sizeof *fc));
        fc->dropped = dropped;
    }
    redis_eval_all(id, nkeys, nargs, argv, lens, forget_done, fc);
}

/* ---- the fence raise, waited for ------------------------------------------------- */

struct raise_call {
    int pending;                     /* hashes whose masters have not all answered */
    int short_of_quorum;             /* a raise a quorum did not take */
    void (*done)(void *arg, int ok); /* the caller's */
    void *arg;                       /* its argument */
};

static void raised(void *arg, const struct redis_result *res, int n) {
    struct raise_call *rc = arg;
    int ok = 0;
    for (int i = 0; i < n; i++)
        ok += res[i].ok && res[i].reply->type == REDIS_REPLY_INTEGER && res[i].reply->integer == 1;
    if (ok < redis_quorum()) rc->short_of_quorum = 1;
    if (--rc->pending > 0) return;
    rc->done(rc->arg, !rc->short_of_quorum);
    free(rc);
}

void quorum_fences_raise(int n, const char *const *hashes, const long long *fences,
                         void (*done)(void *arg, int ok), void *arg) {
    struct raise_call *rc = alloc_check(calloc(1, sizeof *rc));
    rc->pending = n, rc->done = done, rc->arg = arg;
    for (int i = 0; i < n; i++) {
        char f[24];
        snprintf(f, sizeof f, "%lld", fences[i]);
        const char *argv[] = {hashes[i], f, HOLD_FENCE_KEEP_MS};
        size_t lens[3] = {strlen(argv[0]), strlen(f), strlen(HOLD_FENCE_KEEP_MS)};
        redis_eval_all(SCRIPT_FENCE_RAISE, 1, 3, argv, lens, raised, rc);
    }
}

/* ---- one answer for the quorum ----------------------------------------------------- */

/* Extend, release and inspect: the handler's callback, kept until every
 * master has answered. */
struct quorum_call {
    redis_cb cb;      /* the handler's */
    void *arg;        /* its argument */
    int64_t start_ns; /* the request's arrival (extend) */
};

static struct quorum_call *quorum_call_new(redis_cb cb, void *arg, int64_t start_ns) {
    struct quorum_call *qc = alloc_check(malloc(sizeof *qc));
    *qc = (struct quorum_call){cb, arg, start_ns};
    return qc;
}

static void quorum_call_done(struct quorum_call *qc, const struct redis_result *r) {
    qc->cb(qc->arg, r);
    free(qc);
}

/* ---- acquire ------------------------------------------------------------------------ */

/* A quorum's grant, kept while its fence is raised. */
struct quorum_grant {
    struct hold_call *hc; /* the request */
    long long v[5];       /* its answer, as hold_attempt_done takes it */
    int64_t judged_ms;    /* when its validity (v[3]) was reckoned */
};

/* The raise's outcome: the grant is answered, its validity less the raise's
 * round trip, or given back (a re-entry's level is left, as below). */
static void grant_raised(void *arg, int ok) {
    struct quorum_grant *qg = arg;
    struct hold_call *hc = qg->hc;
    long long left = qg->v[3] - (loop_now_ms() - qg->judged_ms);
    if (ok && left > 0) {
        qg->v[3] = left;
        hold_attempt_done(hc, qg->v[0], qg->v, NULL);
    } else {
        if (qg->v[0] == VERDICT_GRANTED) hold_give_back(hc->req);
        long long busy[3] = {VERDICT_BUSY, 1, BUSY_HELD};
        if (!ok)
            hold_attempt_done(hc, VERDICT_ERROR, NULL, QUORUM_RAISE_FAILED);
        else
            hold_attempt_done(hc, VERDICT_BUSY, busy, NULL); /* too late: try again */
    }
    free(qg);
}

/* A failed round's answer, given once its give-backs are answered. */
struct round_back {
    struct hold_call *hc;
    int left; /* give-backs not answered yet, +1 while they are being sent */
    long long verdict;
    long long v[3];
    char err[160];
};

static void round_given_back(void *arg, const struct redis_result *res) {
    struct round_back *rb = arg;
    if (--rb->left > 0) return;
    hold_attempt_done(rb->hc, rb->verdict, rb->v, rb->err[0] ? rb->err : NULL);
    free(rb);
}

static void quorum_acquire_done(void *arg, const struct redis_result *res, int n) {
    struct hold_call *hc = arg;
    int q = redis_quorum(), granted = 0, answered = 0, reentered = 0, mismatch = 0, limits = 0;
    long long fence = 0, count = 0, ttl = -1, holders = 0, limit = 0, busy[GW_MAX_NODES];
    long long cause = BUSY_QUEUED, dropped = 0; /* held beats queued; one waiter counts once */
    int nbusy = 0, ended = 0, unbound = 0, abstained = 0, refused = 0;
    long long holdoff = 0; /* the soonest end of a lost master's hold-off */
    const char *err = "no Redis master answered";
    for (int i = 0; i < n; i++) {
        long long v[5] = {0};
        const char *e;
        long long verdict = verdict_parse_acquire(&res[i], hc->ttl_ms, v, &e);
        /* A master whose answer did not come may grant yet: the request
         * undoes it there if it ends without a grant (a 409 from the
         * others).  A later attempt's answer there does not settle it:
         * the earlier one may still sit in the old connection's socket and
         * run after it.  The undo is the attempt id's, a no-op where it
         * holds nothing; a grant answered clears the mask (reply_granted). */
        if (res[i].maybe_ran) hc->unsure |= 1u << i;
        if (verdict == VERDICT_ERROR) {
            err = e;
            continue;
        }
        answered++;
        if (hold_acquire_dropped(&res[i]) > dropped) dropped = hold_acquire_dropped(&res[i]);
        int64_t left = 0;
        if ((verdict > 0 || verdict == VERDICT_DATA_LOST) && redis_node_lost(i, &left) &&
            (holdoff == 0 || left < holdoff))
            holdoff = left;
        if (verdict > 0 && redis_node_lost(i, NULL)) {
            /* It lost its data less than the longest lease ago: it may
             * grant what another still holds by a lease it forgot
             * (server/lossguard.h).  Its grant does not count; a failed
             * round gives it back with the others'. */
            abstained++;
        } else if (verdict > 0) {
            granted++;
            reentered |= verdict == VERDICT_REENTERED;
            if (v[1] > fence) fence = v[1];
            if (v[2] > count) count = v[2];
            if (ttl < 0 || v[3] < ttl) ttl = v[3];
            if (v[4] > holders) holders = v[4];
        } else if (verdict == VERDICT_DATA_LOST) {
            refused++; /* its marker moved: it lost its data (noted by the Redis layer) */
        } else if (verdict == VERDICT_BUSY) {
            busy[nbusy++] = v[1];
            if (hold_reply_int(&res[i], 2) > 0 && hold_reply_int(&res[i], 2) < cause)
                cause = hold_reply_int(&res[i], 2);
        } else if (verdict == VERDICT_MODE_MISMATCH) {
            mismatch++;
        } else if (verdict == VERDICT_LIMIT_MISMATCH) {
            limits++;
            limit = v[1];
        } else if (verdict == VERDICT_SESSION_ENDED) {
            ended++;
        } else if (verdict == VERDICT_SESSION_MISMATCH) {
            unbound++;
        }
    }
    metrics_inc(M_DEAD_WAITERS, (uint64_t)dropped);
    long long validity = quorum_validity(ttl, loop_now_ms() - hc->attempt_ms, hc->ttl_ms);
    struct hold_keys k;
    hold_keys(hc->req->name, hc->kind == HOLD_PERMIT, &k);
    if (quorum_granted(granted, q, validity)) {
        /* A master that said busy kept this waiter's queue entry: it would
         * hold up that master's queue until its deadline. */
        if (granted < n) hold_leave_queue(hc);
        struct quorum_grant *qg = alloc_check(malloc(sizeof *qg));
        *qg = (struct quorum_grant){
            hc,
            {reentered ? VERDICT_REENTERED : VERDICT_GRANTED, fence, count, validity, holders},
            loop_now_ms()
        };
        if (hc->kind == HOLD_PERMIT) { /* a permit has no fence */
            grant_raised(qg, 1);
            return;
        }
        const char *hash = k.hash;
        quorum_fences_raise(1, &hash, &fence, grant_raised, qg);
        return;
    }
    /* The round failed: what it answers. */
    struct round_back *rb = alloc_check(calloc(1, sizeof *rb));
    rb->hc = hc;
    if (answered < q) {
        rb->verdict = VERDICT_ERROR;
        snprintf(rb->err, sizeof rb->err, "only %d of %d Redis masters answered (%s)", answered, n,
                 err);
    } else if (mismatch >= q) {
        rb->verdict = VERDICT_MODE_MISMATCH;
    } else if (ended >= q) {
        rb->verdict = VERDICT_SESSION_ENDED;
    } else if (unbound >= q) {
        rb->verdict = VERDICT_SESSION_MISMATCH;
    } else if (limits >= q) {
        rb->verdict = rb->v[0] = VERDICT_LIMIT_MISMATCH;
        rb->v[1] = limit;
    } else {
        switch (quorum_failed_why(granted, nbusy, refused + abstained, q)) {
        case QUORUM_FAILED_BUSY: /* it could succeed once enough busy masters free up */
            rb->verdict = rb->v[0] = VERDICT_BUSY;
            rb->v[1] = quorum_retry_after(busy, nbusy, answered, q);
            rb->v[2] = nbusy > 0 ? cause : BUSY_HELD;
            break;
        case QUORUM_FAILED_DATA_LOST: /* 503 redis_data_lost (holds.c, held_lost) */
            rb->verdict = rb->v[0] = VERDICT_DATA_LOST;
            rb->v[1] = quorum_lost_retry_ms(holdoff);
            snprintf(rb->err, sizeof rb->err,
                     "%d of %d Redis masters granted and %d are held off after losing their "
                     "data: too few for a quorum of %d",
                     granted, n, refused + abstained, q);
            break;
        case QUORUM_FAILED_NO_COMMON:
            rb->verdict = VERDICT_ERROR;
            snprintf(rb->err, sizeof rb->err,
                     "the Redis masters gave no common answer (%d of %d granted, none busy)",
                     granted, n);
            break;
        }
    }
    /* Give back what each master granted, a new hold or a re-entry level,
     * on that master alone (a re-entry released everywhere would end the
     * hold on the masters that did not take the level), and answer once
     * they have: whoever the client tells next finds nothing of it.  A
     * master that did not answer may still grant: if it tries again, its
     * own attempt is found there (acquire.lua); if the request ends
     * without a grant (503, or 409 from the masters that answered),
     * holds.c undoes it there (undo.h, hc->unsure). */
    rb->left = 1;
    for (int i = 0; granted + abstained > 0 && i < n; i++) {
        long long v[5];
        const char *e;
        if (verdict_parse_acquire(&res[i], hc->ttl_ms, v, &e) > 0) {
            rb->left++;
            undo_give_back_at(i, k.hash, k.message, hc->req->token, hc->attempt_id,
                              round_given_back, rb);
        }
    }
    round_given_back(rb, NULL);
}

/* ---- extend, release, inspect ---------------------------------------------------- */

/* Extend, release and inspect: the answer one master gave that stands for
 * the quorum's.  `want` is how many masters must agree on success;
 * `better(a, b)` picks among the successes.  When too few succeeded, the
 * commonest failure among a quorum of answers; when too few answered, an
 * error.  *slot holds that error. */
static const struct redis_result *
quorum_pick(const struct redis_result *res, int n, int want,
            int (*better)(const redisReply *a, const redisReply *b), struct redis_result *slot,
            char *why, size_t why_len) {
    int answered = 0, ok = 0, votes[6] = {0};
    const struct redis_result *best = NULL, *fail[6] = {NULL};
    for (int i = 0; i < n; i++) {
        long long v[1];
        const char *e;
        long long verdict = verdict_parse(&res[i], v, 1, &e);
        if (verdict == VERDICT_ERROR) continue;
        answered++;
        if (verdict > 0) {
            ok++;
            if (!best || better(res[i].reply, best->reply)) best = &res[i];
        } else if (verdict >= VERDICT_SESSION_BOUND) {
            votes[-verdict]++;
            fail[-verdict] = &res[i];
        }
    }
    if (ok >= want) return best;
    int q = redis_quorum();
    if (answered >= q) {
        if (votes[5] >= q) return fail[5]; /* session-bound (extend) */
        if (fail[1] || fail[2]) return votes[2] > votes[1] ? fail[2] : fail[1] ? fail[1] : fail[2];
        for (int c = 3; c < 6; c++)
            if (fail[c]) return fail[c];
    }
    if (answered < q)
        snprintf(why, why_len, "only %d of %d Redis masters answered", answered, n);
    else
        snprintf(why, why_len, "the Redis masters gave no common answer");
    *slot = (struct redis_result){.ok = 0, .reply = NULL, .error = why};
    return slot;
}

static long long elem(const redisReply *r, size_t i) {
    if (r->type == REDIS_REPLY_INTEGER) return i == 0 ? r->integer : 0; /* see parse_verdict */
    return r->elements > i && r->element[i]->type == REDIS_REPLY_INTEGER ? r->element[i]->integer
                                                                         : 0;
}
static int shorter_lease(const redisReply *a, const redisReply *b) {
    return elem(a, 3) < elem(b, 3);
}
static int higher_fence(const redisReply *a, const redisReply *b) {
    return elem(a, 3) > elem(b, 3);
}
static int fewer_left(const redisReply *a, const redisReply *b) { return elem(a, 1) > elem(b, 1); }

/* The shortest extended lease stands for the quorum, less the round's time
 * and the drift allowance, like an acquisition's validity. */
static void quorum_extend_done(void *arg, const struct redis_result *res, int n) {
    struct quorum_call *qc = arg;
    struct redis_result slot;
    char why[96];
    const struct redis_result *r =
        quorum_pick(res, n, redis_quorum(), shorter_lease, &slot, why, sizeof why);
    if (r->ok && elem(r->reply, 0) > 0 && r->reply->elements > 3) {
        /* The fence is the quorum's: the highest, as the acquisition said. */
        for (int i = 0; i < n; i++)
            if (res[i].ok && elem(res[i].reply, 0) > 0 && elem(res[i].reply, 1) > elem(r->reply, 1))
                r->reply->element[1]->integer = elem(res[i].reply, 1);
        long long elapsed = (loop_now_ms() * 1000000 - qc->start_ns) / 1000000;
        if (elapsed < 0) elapsed = 0;
        redisReply *ttl = r->reply->element[3]; /* our own copy (redis_eval_all) */
        ttl->integer -= elapsed + quorum_drift_ms(ttl->integer);
        if (ttl->integer < 1) ttl->integer = 1;
    }
    quorum_call_done(qc, r);
}

/* A release goes to every master; one that released stands for them all. */
static void quorum_release_done(void *arg, const struct redis_result *res, int n) {
    struct redis_result slot;
    char why[96];
    quorum_call_done(arg, quorum_pick(res, n, 1, fewer_left, &slot, why, sizeof why));
}

/* Held when a quorum says so; the highest fence stands for them. */
static void quorum_inspect_done(void *arg, const struct redis_result *res, int n) {
    struct redis_result slot;
    char why[96];
    quorum_call_done(arg,
                     quorum_pick(res, n, redis_quorum(), higher_fence, &slot, why, sizeof why));
}

static void quorum_acquire(struct hold_call *hc, int nkeys, int nargs, const char *const *argv,
                           const size_t *lens) {
    redis_eval_all(SCRIPT_ACQUIRE, nkeys, nargs, argv, lens, quorum_acquire_done, hc);
}

static void quorum_extend(int nargs, const char *const *argv, const size_t *lens, int64_t start_ns,
                          redis_cb cb, void *arg) {
    redis_eval_all(SCRIPT_EXTEND, 1, nargs, argv, lens, quorum_extend_done,
                   quorum_call_new(cb, arg, start_ns));
}

static void quorum_release(int nargs, const char *const *argv, const size_t *lens, redis_cb cb,
                           void *arg) {
    redis_eval_all(SCRIPT_RELEASE, 1, nargs, argv, lens, quorum_release_done,
                   quorum_call_new(cb, arg, 0));
}

static void quorum_inspect(int nargs, const char *const *argv, const size_t *lens, redis_cb cb,
                           void *arg) {
    redis_eval_all(SCRIPT_INSPECT, 1, nargs, argv, lens, quorum_inspect_done,
                   quorum_call_new(cb, arg, 0));
}

static void quorum_eval(enum script_id id, int nkeys, int nargs, const char *const *argv,
                        const size_t *lens, redis_cb one, redis_all_cb all, void *arg) {
    redis_eval_all(id, nkeys, nargs, argv, lens, all, arg);
}

/* ---- ids ------------------------------------------------------------------------------ */

/* Quorum mode.  Phase 1 reads a quorum's marks and clocks; the block is
 * placed above the highest mark (in the latest second any of them reads).
 * Phase 2 (id_claim.lua) has every master take the block only if its mark
 * is still below the block's start; a quorum of takers makes the block
 * ours, since a competing claim would need a master of this quorum.  On a
 * lost race the gateway reads again (a few times, then gives up: 503). */
/* A master within the jump of a new era whose mark is missing or was
 * written by another Redis (a restart, a promotion) may have lost leases up
 * to its old clock: then the block is placed as id_lease.lua places it, at
 * the era's start plus the jump (the latest era of those masters), its
 * sequence from the era's start within its second, and above every mark. */
static int quorum_jumped_block(long long since_us, long long msec, const struct id_ask *ask,
                               struct idgen_block_lease *b) {
    long long sec = since_us / 1000000 - atoll(ask->epoch) + ask->jump_s;
    long long first = (long long)((double)(since_us % 1000000) * 2147.483648);
    if (msec >= sec) sec = msec + 1, first = 0;
    if (sec < 0 || sec > 0x7fffffffLL) return -1;
    long long last = first + ask->want - 1;
    b->second = (uint32_t)sec;
    b->first = (uint32_t)first;
    b->last = last > 0xffffffffLL ? 0xffffffffU : (uint32_t)last;
    metrics_inc(M_ID_JUMPS, 1);
    return 0;
}

static void quorum_read_done(void *arg, const struct redis_result *res, int n) {
    struct lease_wait *lw = arg;
    const struct id_ask *ask = lw->ask;
    int answered = 0;
    long long now = -1, msec = -1, mseq = -1, since_us = 0;
    for (int i = 0; i < n; i++) {
        const redisReply *r = res[i].reply;
        if (!res[i].ok || r->type != REDIS_REPLY_ARRAY || r->elements != 4) continue;
        long long t = r->element[0]->integer, s = r->element[1]->integer,
                  q = r->element[2]->integer;
        if (t == -2) { /* an earlier epoch's mark */
            backend_lease_refused(ask, IDGEN_EPOCH_MISMATCH, s, 0);
            backend_lease_finish(lw, IDGEN_EPOCH_MISMATCH);
            return;
        }
        answered++;
        if (r->element[3]->integer > since_us) since_us = r->element[3]->integer;
        if (t > now) now = t;
        if (s > msec || (s == msec && q > mseq)) msec = s, mseq = q;
    }
    if (answered < redis_quorum()) {
        backend_lease_finish(lw, -1);
        return;
    }
    struct idgen_block_lease *b = lw->out;
    if (since_us > 0
            ? quorum_jumped_block(since_us, msec, ask, b) != 0
            : quorum_id_block(now, msec, mseq, ask->want, &b->second, &b->first, &b->last) != 0) {
        backend_lease_finish(lw, -1);
        return;
    }
    /* At or below the floor: the quorum lost ids this gateway handed out.
     * Refused before the claim, so that no mark moves into that range;
     * placed above a floor that may be another namespace's (backend.h). */
    if (idgen_pack(b->second, b->first) <= ask->floor && ask->floor_soft) {
        long long s = (long long)(ask->floor >> 32), q = (long long)(ask->floor & 0xffffffffu);
        quorum_id_block(s, s, q, ask->want, &b->second, &b->first, &b->last); /* just above */
    } else if (idgen_pack(b->second, b->first) <= ask->floor) {
        backend_lease_refused(ask, IDGEN_BEHIND, b->second, b->first);
        backend_lease_finish(lw, IDGEN_BEHIND);
        return;
    }
    backend_lease_finish(lw, 0);
}

static void quorum_claim_done(void *arg, const struct redis_result *res, int n) {
    struct lease_wait *lw = arg;
    int took = 0;
    for (int i = 0; i < n; i++)
        took +=
            res[i].ok && res[i].reply->type == REDIS_REPLY_INTEGER && res[i].reply->integer == 1;
    backend_lease_finish(lw, took >= redis_quorum() ? 0 : -1);
}

static int quorum_lease(const struct id_ask *ask, struct idgen_block_lease *out) {
    for (int round = 0; round < 5; round++) {
        struct lease_wait rd = {
            PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, -1, out, ask};
        char jump[16];
        snprintf(jump, sizeof jump, "%d", ask->jump_s);
        const char *read[] = {ask->key, ask->era, ask->epoch, jump};
        size_t read_lens[4];
        for (int i = 0; i < 4; i++) read_lens[i] = strlen(read[i]);
        redis_eval_all_on(workers_aux_redis(), SCRIPT_ID_READ, 2, 4, read, read_lens,
                          quorum_read_done, &rd);
        backend_lease_wait_for(&rd);
        if (rd.rc != 0) return rd.rc;
        char sec[16], first[16], last[16];
        snprintf(sec, sizeof sec, "%u", out->second);
        snprintf(first, sizeof first, "%u", out->first);
        snprintf(last, sizeof last, "%u", out->last);
        const char *claim[] = {ask->key, ask->era, sec, first, last, ask->epoch};
        size_t claim_lens[6];
        for (int i = 0; i < 6; i++) claim_lens[i] = strlen(claim[i]);
        struct lease_wait lw = {
            PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, -1, out, ask};
        redis_eval_all_on(workers_aux_redis(), SCRIPT_ID_CLAIM, 2, 6, claim, claim_lens,
                          quorum_claim_done, &lw);
        backend_lease_wait_for(&lw);
        if (lw.rc == 0) return 0;
    }
    return -1;
}


/* ---- readiness ------------------------------------------------------------------------ */

/* Ready when a quorum of masters answers a PING. */
static void ready_all_done(void *arg, const struct redis_result *res, int n) {
    struct quorum_call *qc = arg;
    int ok = 0;
    for (int i = 0; i < n; i++) ok += res[i].ok;
    struct redis_result r = {.ok = ok >= redis_quorum(), .error = "too few Redis masters answer"};
    quorum_call_done(qc, &r);
}

static void quorum_ready(redis_cb cb, void *arg) {
    const char *argv[1] = {"PING"};
    size_t lens[1] = {4};
    redis_command_all(1, argv, lens, ready_all_done, quorum_call_new(cb, arg, 0));
}

const struct backend backend_quorum = {
    .name = "quorum",
    .acquire = quorum_acquire,
    .extend = quorum_extend,
    .release = quorum_release,
    .inspect = quorum_inspect,
    .forget = quorum_forget,
    .eval = quorum_eval,
    .id_lease = quorum_lease,
    .ready = quorum_ready,
    .undoes_reentry = 0, /* the release would reach masters that did not take the level */
    .fans_out = 1,
};
