/* holds.c -- see holds.h.
 *
 * An acquisition is an attempt (one acquire.lua call) followed, while the
 * answer is "busy" and the request may still wait, by parking it with
 * waiters.c until a release is announced, the holder's lease runs out, or
 * its own deadline comes; then another attempt.  No polling: between
 * attempts the request costs a parked struct and a suspended connection. */
#include "handlers/holds.h"
#include "handlers/quota_holds.h"
#include "server/auth.h"
#include "common/alloc.h"
#include "handlers/backend.h"
#include "handlers/guard.h"
#include "handlers/undo.h"
#include "handlers/handlers.h"
#include "handlers/session_ref.h"
#include "handlers/verdict.h"
#include "server/body.h"
#include "server/http.h"
#include "server/liveness.h"
#include "server/loop.h"
#include "server/metrics.h"
#include "server/redis.h"
#include "server/reply.h"

#include <cjson/cJSON.h>
#include <hiredis/hiredis.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>


_Static_assert(sizeof((struct hold_call *)0)->waiter_id >= LIVENESS_WAITER_ID_MAX,
               "a waiter id fits");
_Static_assert(GW_MAX_NODES <= 32, "a quorum's masters fit hold_call's unsure");


/* The name sits in a hash tag, so all keys of one lock share a Redis
 * Cluster slot; locks and semaphores of the same name never meet. */
void hold_keys(const char *name, int semaphore, struct hold_keys *k) {
    const char *p = handlers_config()->key_prefix, *kind = semaphore ? "sem" : "lock";
    snprintf(k->hash, HOLD_KEY_MAX, "%s%s:{%s}", p, kind, name);
    snprintf(k->queue, HOLD_KEY_MAX + 8, "%s:q", k->hash);
    snprintf(k->qdead, HOLD_KEY_MAX + 8, "%s:qd", k->hash);
    snprintf(k->message, sizeof k->message, "%s:%s", kind, name);
}

static const char *kind_name(long long code) {
    return code == 2 ? "shared" : code == 3 ? "permit" : "exclusive";
}

/* Element i of a script's array reply when it is an integer, else 0. */
long long hold_reply_int(const struct redis_result *res, size_t i) {
    const redisReply *r = res->ok ? res->reply : NULL;
    return r && r->type == REDIS_REPLY_ARRAY && r->elements > i &&
                   r->element[i]->type == REDIS_REPLY_INTEGER
               ? r->element[i]->integer
               : 0;
}

/* How many queue entries of dead gateways an acquire.lua answer says it
 * dropped (after the grant's five values, or the busy answer's three). */
long long hold_acquire_dropped(const struct redis_result *res) {
    long long verdict = hold_reply_int(res, 0);
    return verdict == VERDICT_GRANTED ? hold_reply_int(res, 5)
           : verdict == VERDICT_BUSY  ? hold_reply_int(res, 3)
                                      : 0;
}

/* parse_verdict, answering 503 itself on -100. */
static long long script_verdict(struct gw_request *req, const struct redis_result *res,
                                long long *v, size_t n) {
    const char *err;
    long long verdict = verdict_parse(res, v, n, &err);
    if (verdict == VERDICT_ERROR) reply_problem(req, CODE_BACKEND_UNAVAILABLE, "Redis: %s", err);
    return verdict;
}

/* Extend and release: the token holds nothing (404), or another does (409).
 * A token whose hold was forced out is not held even once another holds
 * the name (force.lua), so the words do not say "nobody holds it". */
static void reply_not_held_or_owner(struct gw_request *req, int semaphore, long long verdict) {
    const char *what = semaphore ? "semaphore" : "lock";
    if (verdict == VERDICT_NOT_HELD)
        reply_problem(req, CODE_NOT_HELD,
                      "this token holds no %s '%s' (never did, or its hold ended: released, "
                      "expired or forced)",
                      what, req->name);
    else
        reply_problem(req, CODE_NOT_OWNER, "%s '%s' is held, but not by this token", what,
                      req->name);
}

/* ---- acquire -------------------------------------------------------------------- */

static void attempt(struct hold_call *hc);
static void quota_unreserve(struct hold_call *hc, long long verdict, const long long *v);
static void on_give_up(struct waiter *w, int client_gone);

/* dequeue.lua's count of dead waiters it dropped (the backend counts one
 * waiter once however many masters dropped it). */
static void dequeued(long long dropped) { metrics_inc(M_DEAD_WAITERS, (uint64_t)dropped); }

/* A fair waiter that stops waiting leaves the queue at once, so the next
 * one never waits for its deadline. */
void hold_leave_queue(struct hold_call *hc) {
    if (!hc->queued) return;
    struct hold_keys k;
    hold_keys(hc->req->name, hc->kind == HOLD_PERMIT, &k);
    char live[LIVENESS_HASH_MAX];
    liveness_hash_for(k.hash, live, sizeof live);
    int nkeys = 4;
    const char *argv[] = {k.hash,   k.queue,       k.qdead,
                          live,     hc->waiter_id, redis_release_channel_for(k.hash),
                          k.message};
    size_t lens[7];
    for (int i = 0; i < nkeys + 3; i++) lens[i] = strlen(argv[i]);
    backend->forget(SCRIPT_DEQUEUE, nkeys, nkeys + 3, argv, lens, dequeued);
}

/* why is acquire.lua's: 1 held (or full), 2 lock-delay, 3 nobody holds it
 * (or permits are free) but fair waiters are queued ahead; or 4: the wait
 * ended while this gateway was stalled (on_wake), state unknown. */
static void reply_busy(struct hold_call *hc, long long retry_after_ms, long long why) {
    struct gw_request *req = hc->req;
    cJSON *extra = busy_extra(req, retry_after_ms);
    metrics_inc(M_LOCK_BUSY, 1);
    int sem = hc->kind == HOLD_PERMIT;
    const char *state = why == 3   ? (sem ? "not full, but fair waiters are queued ahead"
                                          : "not held, but fair waiters are queued ahead")
                        : why == 2 ? "in its lock-delay after an expired holder"
                        : why == 4 ? "still busy as far as this gateway knows: it was stalled "
                                     "past the request's wait deadline"
                        : sem      ? "full"
                                   : "held";
    reply_problem_with(req, CODE_LOCK_BUSY, extra, "%s '%s' is %s", sem ? "semaphore" : "lock",
                       req->name, state);
}

/* What an undelivered grant undoes: a new hold, or one level of a lock's
 * re-entry (release.lua takes one level).  A permit's re-entry is not
 * undone: releasing a permit ends the whole hold, which an earlier,
 * delivered answer gave.  The same whether the server made the token or
 * the client chose it (openapi.yaml, Lock-Token): each undelivered grant
 * is undone exactly once, so a retry with the same token that arrives
 * before the give-back re-enters and is left holding one level.  In
 * quorum mode a re-entry is not undone either: the release would go to
 * every master, also to those that did not take the level, and end the
 * hold there. */
int hold_gives_back(const struct hold_call *hc, long long verdict) {
    return verdict == VERDICT_GRANTED ||
           (verdict == VERDICT_REENTERED && hc->kind != HOLD_PERMIT && backend->undoes_reentry);
}

/* release.lua's arguments for giving token's hold of name back; k holds
 * the keys. */
static void give_back_args(const char *name, const char *token, int semaphore, struct hold_keys *k,
                           const char *argv[4], size_t lens[4]) {
    hold_keys(name, semaphore, k);
    argv[0] = k->hash, argv[1] = token;
    argv[2] = redis_release_channel_for(k->hash), argv[3] = k->message;
    for (int i = 0; i < 4; i++) lens[i] = strlen(argv[i]);
}

void hold_give_back_token(const char *name, const char *token, int semaphore) {
    struct hold_keys k;
    const char *argv[4];
    size_t lens[4];
    give_back_args(name, token, semaphore, &k, argv, lens);
    backend->forget(SCRIPT_RELEASE, 1, 4, argv, lens, NULL);
}

/* The client will never learn it got the lock: give it back. */
void hold_give_back(struct gw_request *req) {
    struct hold_call *hc = req->ctx;
    hold_give_back_token(req->name, req->token, hc->kind == HOLD_PERMIT);
}

void hold_give_back_then(struct gw_request *req, redis_cb done, void *arg) {
    struct hold_call *hc = req->ctx;
    struct hold_keys k;
    const char *argv[4];
    size_t lens[4];
    give_back_args(req->name, req->token, hc->kind == HOLD_PERMIT, &k, argv, lens);
    redis_eval(SCRIPT_RELEASE, 1, 4, argv, lens, done, arg);
}

static void reply_granted(struct hold_call *hc, long long verdict, const long long *v) {
    struct gw_request *req = hc->req;
    int sem = hc->kind == HOLD_PERMIT;
    char location[NAME_MAX_LEN + 24];
    snprintf(location, sizeof location, "/v1/%s/%s", sem ? "semaphores" : "locks", req->name);
    reply_header(req, "Lock-Token", req->token);
    if (!hc->reshape) reply_header(req, "Location", location);
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "name", req->name);
    cJSON_AddStringToObject(o, "token", req->token);
    if (sem) {
        json_add_int(o, "limit", hc->limit);
        json_add_int(o, "holders", v[4]);
    } else {
        json_add_int(o, "fence", v[1]);
        cJSON_AddStringToObject(o, "mode", hc->kind == HOLD_SHARED ? "shared" : "exclusive");
        json_add_int(o, "count", v[2]);
    }
    json_add_int(o, "ttl_ms", v[3]);
    metrics_inc(verdict == VERDICT_GRANTED ? M_LOCK_ACQUIRED : M_LOCK_REENTERED, 1);
    if (hc->reshape) o = hc->reshape(hc, o);
    hc->unsure = 0;   /* what the masters that did not answer may grant is the client's */
    if (hc->stream) { /* its stream gives it back if its client is gone */
        hc->stream->granted(hc, verdict, o);
        return;
    }
    if (hold_gives_back(hc, verdict)) req->on_undelivered = hold_give_back;
    reply_json(req, verdict == VERDICT_GRANTED ? 201 : 200, o);
}

void hold_fail(struct hold_call *hc, const char *why) {
    hold_leave_queue(hc);
    reply_problem(hc->req, CODE_BACKEND_UNAVAILABLE, "Redis: %s", why);
}

/* Grants on the name are refused by a data loss (server/lossguard.h),
 * and this attempt holds nothing: a waiting request whose wait outlasts
 * the hold-off waits it out, any other is answered 503 redis_data_lost.
 * With no hold-off on the name (yet: a script's -8 comes before the loss
 * is noted; quorum: a master or two abstain, not more than the quorum can
 * spare) it tries again after retry_ms (a quorum round's hint, 0 at once,
 * as multi.c's): by then the loss is noted, so that attempt waits out the
 * hold-off if its wait allows.  why: the detail when nothing is held off. */
static void held_lost(struct hold_call *hc, int64_t now, int64_t retry_ms, const char *why) {
    struct gw_request *req = hc->req;
    int64_t again = retry_ms;
    if (!guard_lost_for(req->name, &again)) again = retry_ms;
    if (hc->wait_ms > 0 && now + again < hc->deadline_ms) {
        hc->waited = 1;
        if (park_request(req, &hc->w, now + again) < 0) on_give_up(&hc->w, 1);
        return;
    }
    hold_leave_queue(hc);
    guard_lost_reply(req, &req->name, 1, why);
}

/* How long an undo of hc's attempt may have to wait for Redis: its lease.
 * A session-bound hold lives by its session, not by ttl_ms: one that
 * Redis could not renew for the longest lease has ended. */
static long long undo_lease_ms(const struct hold_call *hc) {
    return hc->session ? guard_max_lease_ms() : hc->ttl_ms;
}

/* Acts on one attempt's outcome: reply, or park the request to try again. */
void hold_attempt_done(struct hold_call *hc, long long verdict, const long long *v,
                       const char *err) {
    struct gw_request *req = hc->req;
    if (verdict == VERDICT_ERROR) {
        int64_t again = outage_retry_at(req, err, hc->waited, hc->deadline_ms, &hc->backoff_ms);
        if (again) {
            if (park_request(req, &hc->w, again) < 0) on_give_up(&hc->w, 1);
            return;
        }
        hold_leave_queue(hc);
        /* The attempt may have run, or may still run: undo it (undo.h). */
        if ((hc->own_token || hc->attempt_id[0]) && !redis_error_is_reply(err)) {
            struct hold_keys k;
            hold_keys(req->name, hc->kind == HOLD_PERMIT, &k);
            undo_hold(k.hash, k.message, req->token, hc->attempt_id, undo_lease_ms(hc));
            hc->unsure = 0; /* undone on every master */
        }
        reply_problem(req, CODE_BACKEND_UNAVAILABLE, "Redis: %s", err);
        return;
    }
    hc->backoff_ms = 0;
    if (hc->quota_added && verdict != VERDICT_GRANTED && verdict != VERDICT_REENTERED) {
        quota_unreserve(hc, verdict, v);
        return;
    }
    int64_t now = loop_now_ms();
    if (hc->waited && verdict != VERDICT_BUSY) metrics_observe_wait((now - hc->start_ms) * 1000);
    if (verdict == VERDICT_MODE_MISMATCH || verdict == VERDICT_LIMIT_MISMATCH ||
        verdict == VERDICT_SESSION_ENDED || verdict == VERDICT_SESSION_MISMATCH)
        hold_leave_queue(hc); /* other masters may have queued it */
    if (verdict == VERDICT_SESSION_ENDED) {
        reply_problem(req, CODE_SESSION_NOT_FOUND, "session '%s' has ended", hc->session);
        return;
    }
    if (verdict == VERDICT_SESSION_MISMATCH) {
        reply_problem(req, CODE_SESSION_MISMATCH,
                      "this token holds %s '%s', but not in session '%s': a re-entry keeps the "
                      "binding the hold was acquired with (release it, then acquire it with the "
                      "Session header)",
                      hc->kind == HOLD_PERMIT ? "semaphore" : "lock", req->name, hc->session);
        return;
    }
    if (verdict == VERDICT_MODE_MISMATCH) {
        reply_problem(req, CODE_MODE_MISMATCH, "this token holds lock '%s' in the other mode",
                      req->name);
        return;
    }
    if (verdict == VERDICT_LIMIT_MISMATCH) {
        reply_problem(req, CODE_LIMIT_MISMATCH, "semaphore '%s' is in use with limit %lld",
                      req->name, v[1]);
        return;
    }
    /* The script refused a fresh grant on a master that lost its data
     * since this gateway last read its marker (a FLUSHALL on a connection
     * that stays up; the Redis layer has noted the loss).  Quorum mode: a
     * round that failed while more masters are held off than the quorum
     * can spare is that loss too, not a busy lock. */
    int64_t held_off;
    if (verdict == VERDICT_DATA_LOST ||
        (verdict == VERDICT_BUSY && backend->fans_out && guard_lost_for(req->name, &held_off))) {
        /* A master's -8 has no number after it (v[1] 0: at once); a
         * quorum round's carries its retry hint and its detail
         * (backend_quorum.c). */
        int round = verdict == VERDICT_DATA_LOST && backend->fans_out;
        held_lost(hc, now, round ? v[1] : 0, round ? err : NULL);
        return;
    }
    if (verdict == VERDICT_BUSY) {
        if (http_shutting_down() && hc->wait_ms > 0) {
            hold_leave_queue(hc);
            reply_problem(req, CODE_SHUTTING_DOWN, "the gateway is stopping");
            return;
        }
        if (hc->wait_ms > 0 && now < hc->deadline_ms) {
            if (!hc->waited) metrics_inc(M_WAIT_STARTED, 1);
            hc->waited = 1;
            int64_t wake = now + v[1];
            if (wake > hc->deadline_ms) wake = hc->deadline_ms;
            if (hc->stream) hc->stream->waiting(hc, v[1], v[2]);
            if (park_request(req, &hc->w, wake) < 0) on_give_up(&hc->w, 1);
            return;
        }
        if (hc->waited) {
            metrics_inc(M_WAIT_TIMEOUTS, 1);
            metrics_observe_wait((now - hc->start_ms) * 1000);
            hold_leave_queue(hc);
        }
        reply_busy(hc, v[1], v[2]);
        return;
    }
    if (hc->waited && http_client_gone(req)) {
        /* It left while this attempt was on its way: it must not hold. */
        if (hold_gives_back(hc, verdict)) {
            hold_give_back(req);
            metrics_inc(M_GIVEN_BACK, 1);
        }
        metrics_inc(M_WAIT_TIMEOUTS, 1);
        reply_problem(req, CODE_LOCK_BUSY, "the client went away while waiting");
        return;
    }
    /* A loss found after the request passed the guard: on a new
     * connection the marker's answer comes just before the answers of
     * what the connection carried (redis.c, cmd_up), so a grant that ran
     * on a master that had just forgotten every lease is given back here
     * rather than answered (quorum mode: its votes were judged).  A
     * waiting request whose wait outlasts the hold-off waits it out. */
    if (verdict == VERDICT_GRANTED && !backend->fans_out && guard_lost_for(req->name, &held_off)) {
        hold_give_back(req);
        metrics_inc(M_GIVEN_BACK, 1);
        held_lost(hc, now, 0, NULL);
        return;
    }
    if (hc->quota) { /* its entry counts as long as the lease (a session's: its end) */
        const char *m[1] = {hc->quota_member};
        /* A stream hold lives as long as its connection, its session
         * renewed without touching ledgers: its entry counts up to the
         * longest lease, and its stream drops it when the hold ends. */
        quota_holds_set(req->key_id, hc->stream ? guard_max_lease_ms() : v[3] + 1, 1, m);
    }
    reply_granted(hc, verdict, v);
}

/* An outcome kept while the ledger drops the attempt's entry. */
struct unreserve {
    struct hold_call *hc; /* the acquisition */
    long long verdict;    /* its attempt's verdict */
    long long v[5];       /* and values */
};

static void unreserved(void *arg) {
    struct unreserve *u = arg;
    hold_attempt_done(u->hc, u->verdict, u->v, NULL);
    free(u);
}

/* The attempt's entry in its key's ledger goes again: it granted nothing.
 * The outcome is acted on once the ledger has answered, so that the
 * client's next attempt (or this one's, after a wait) finds the place
 * free.  (After a Redis error the entry stays, to lapse at its score: the
 * attempt may have run.) */
static void quota_unreserve(struct hold_call *hc, long long verdict, const long long *v) {
    struct unreserve *u = alloc_check(malloc(sizeof *u));
    u->hc = hc, u->verdict = verdict;
    memcpy(u->v, v, sizeof u->v);
    hc->quota_added = 0;
    const char *m[1] = {hc->quota_member};
    quota_holds_drop_then(hc->req->key_id, 1, m, unreserved, u);
}

static void send_attempt(struct hold_call *hc);

/* The key's ledger said whether the hold fits its holds_at_once. */
static void quota_taken(void *arg, enum quota_verdict v, int added, long long retry_ms,
                        const char *err) {
    struct hold_call *hc = arg;
    struct gw_request *req = hc->req;
    if (v == QUOTA_ERROR) {
        hold_fail(hc, err ? err : "the key's ledger did not answer");
        return;
    }
    if (v == QUOTA_OVER) {
        hold_leave_queue(hc);
        auth_count_holds_refused(req->key_id);
        reply_problem_with(req, CODE_QUOTA_EXCEEDED, busy_extra(req, retry_ms),
                           "key '%s' has %u holds at once, its holds_at_once, across all gateways; "
                           "release one (or wait %lld ms, when the first lease ends)",
                           req->key_id, hc->quota, retry_ms);
        return;
    }
    /* An entry an earlier attempt made stays this request's to drop: that
     * attempt failed in Redis, and this one finds its grant if it had one. */
    hc->quota_added = hc->quota_added || added > 0;
    send_attempt(hc);
}

/* With a holds_at_once limit the attempt first takes its place in the
 * key's ledger (quota_holds.h), for the lease and a margin (a session-bound
 * hold, whose end is its session's: for the longest lease); once granted,
 * its entry is set to the lease the grant reports, counted from later
 * than the grant, so it never lapses before the hold does. */
static void attempt(struct hold_call *hc) {
    if (!hc->quota) {
        send_attempt(hc);
        return;
    }
    long long ms = (hc->session ? guard_max_lease_ms() : hc->ttl_ms) + quota_holds_margin_ms();
    const char *m[1] = {hc->quota_member};
    quota_holds_take(hc->req->key_id, hc->quota, ms, hc->session, 1, m, quota_taken, hc);
}

static void send_attempt(struct hold_call *hc) {
    struct gw_request *req = hc->req;
    struct hold_keys k;
    hold_keys(req->name, hc->kind == HOLD_PERMIT, &k);
    long long wait_left = 0;
    if (hc->wait_ms > 0) {
        wait_left = hc->deadline_ms - loop_now_ms();
        if (wait_left < 1) wait_left = 1;
    }
    char ttl[24], hold[24], delay[24], limit[24], left[24], kind[2] = {hc->kind, 0};
    snprintf(ttl, sizeof ttl, "%lld", hc->ttl_ms);
    snprintf(hold, sizeof hold, "%lld", hc->max_hold_ms);
    snprintf(delay, sizeof delay, "%lld", hc->lock_delay_ms);
    snprintf(limit, sizeof limit, "%lld", hc->limit);
    snprintf(left, sizeof left, "%lld", wait_left);
    /* Queued in Redis by this attempt if it finds the name busy; in quorum
     * mode some masters may queue it while others grant. */
    if (hc->fair && hc->wait_ms > 0) hc->queued = 1;
    /* Then a session-bound hold's session key, and last the liveness hash
     * the queue's head is judged by (acquire.lua; queue_head in
     * _holders.lua): every key the script may touch is declared.  In
     * cluster mode the session's key is in another slot, and
     * sessions_cluster.c takes it out before the call. */
    char skey[HOLD_KEY_MAX], live[LIVENESS_HASH_MAX];
    int with_session = hc->session != NULL;
    if (with_session) session_key(hc->session, skey, sizeof skey);
    liveness_hash_for(k.hash, live, sizeof live);
    const char *argv[] = {k.hash,
                          k.queue,
                          k.qdead,
                          with_session ? skey : NULL,
                          live,
                          req->token,
                          ttl,
                          hc->owner,
                          hold,
                          delay,
                          kind,
                          limit,
                          hc->fair && hc->wait_ms > 0 ? hc->waiter_id : "",
                          left,
                          hc->fair ? "1" : "0",
                          redis_release_channel_for(k.hash),
                          k.message,
                          hc->session ? hc->session : "",
                          req->key_id ? req->key_id : "",
                          hc->attempt_id};
    /* The common case (exclusive, no owner, max-hold, lock-delay, waiting,
     * session or API key) sends the script's short form, token and ttl
     * only: every argument costs Redis time (bench/RESULTS.md, "Redis fast
     * path").  Without a session argv[3] is skipped.  The session token,
     * the key id and a waiting request's attempt id go last, only as far as
     * one is set. */
    int extra = hc->attempt_id[0] ? 3 : hc->session || req->key_id ? 2 : 0;
    int nkeys = with_session ? 5 : 4;
    int shrt = hc->kind == HOLD_EXCLUSIVE && hc->owner[0] == '\0' && hc->max_hold_ms == 0 &&
               hc->lock_delay_ms == 0 && wait_left == 0 && !extra;
    int nargs = nkeys + (shrt ? 2 + backend->per_slot /* cluster: + the shard channel */
                              : 12 + extra);
    const char *av[20];
    size_t lens[20];
    for (int i = 0, j = 0; i < 20 && j < nargs; i++) {
        if (i == 3 && !with_session) continue;
        av[j] = argv[i];
        lens[j] = strlen(av[j]);
        j++;
    }
    if (shrt && backend->per_slot) { /* cluster's short form: token, ttl, shard channel */
        av[nargs - 1] = argv[15];
        lens[nargs - 1] = strlen(av[nargs - 1]);
    }
    hc->w.seen_seq = waiters_release_seq();
    hc->attempt_ms = loop_now_ms();
    backend->acquire(hc, nkeys, nargs, av, lens);
}

/* A client that hung up while parked is not tried for: its hang-up and
 * the wake-up can arrive in the same turn, the wake-up first.  A waiter
 * woken later than its deadline plus the liveness TTL was frozen with its
 * gateway (SIGSTOP, a stalled host): the others may have counted it dead
 * and moved on, and its client asked for an answer long ago, so it times
 * out without another attempt rather than take a lock that late. */
static void on_wake(struct waiter *w) {
    struct hold_call *hc = (struct hold_call *)w;
    if (http_client_gone(hc->req)) {
        waiters_pass_on(w); /* a release's wake-up is not lost with it */
        on_give_up(w, 1);
        return;
    }
    int64_t now = loop_now_ms();
    if (now > hc->deadline_ms + handlers_config()->liveness_ttl_ms) {
        waiters_pass_on(w);
        metrics_inc(M_WAIT_TIMEOUTS, 1);
        metrics_observe_wait((now - hc->start_ms) * 1000);
        hold_leave_queue(hc);
        reply_busy(hc, 1, 4);
        return;
    }
    attempt(hc);
}

static void on_give_up(struct waiter *w, int client_gone) {
    struct hold_call *hc = (struct hold_call *)w;
    hold_leave_queue(hc);
    if (client_gone) {
        metrics_inc(M_WAIT_TIMEOUTS, 1);
        reply_problem(hc->req, CODE_LOCK_BUSY, "the client went away while waiting");
    } else {
        reply_problem(hc->req, CODE_SHUTTING_DOWN, "the gateway is stopping");
    }
}

struct hold_call *hold_call_new(struct gw_request *req, enum hold_kind kind, const char *owner) {
    const char *prefix = kind == HOLD_PERMIT ? "sem:" : "lock:";
    if (!owner) owner = "";
    size_t owner_len = strlen(owner), key_len = strlen(prefix) + strlen(req->name);
    struct hold_call *hc = alloc_check(calloc(1, sizeof *hc + owner_len + 1 + key_len + 1));
    char *owner_copy = (char *)(hc + 1), *key = owner_copy + owner_len + 1;
    memcpy(owner_copy, owner, owner_len + 1);
    snprintf(key, key_len + 1, "%s%s", prefix, req->name);
    hc->kind = (char)kind;
    hc->owner = owner_copy;
    hc->w.key = key;
    return hc;
}

/* The request ends without a grant while some quorum masters never
 * answered its last attempt, though a quorum of others did (409, a
 * session or mode mismatch, the client gone): what those may have
 * granted, or grant once they resume, is undone there. */
static void undo_unsure(struct hold_call *hc) {
    struct gw_request *req = hc->req;
    if (!req || !req->token || !(hc->own_token || hc->attempt_id[0])) return;
    struct hold_keys k;
    hold_keys(req->name, hc->kind == HOLD_PERMIT, &k);
    for (int i = 0; i < GW_MAX_NODES; i++)
        if (hc->unsure & (1u << i))
            undo_hold_at(i, k.hash, k.message, req->token, hc->attempt_id, undo_lease_ms(hc));
}

void hold_call_free(void *ctx) {
    struct hold_call *hc = ctx;
    if (hc->unsure) undo_unsure(hc);
    if (hc->stream) hc->stream->free(hc);
    if (hc->waiter_id[0]) liveness_waiter_leave(hc->live_slot);
    free(hc->session);
    free(hc->quota_member);
    free(hc->ack);
    free(hc);
}

void hold_acquire(struct gw_request *req, struct hold_call *hc) {
    hc->req = req;
    req->ctx = hc;
    req->ctx_free = hold_call_free;
    hc->start_ms = loop_now_ms();
    hc->acks_wanted = handlers_config()->min_replicas_ack; /* refused with quorum (config.c) */
    if (hc->acks_wanted) hc->ack = alloc_check(calloc(1, sizeof *hc->ack));
    hc->deadline_ms = hc->start_ms + hc->wait_ms;
    hc->w.fair = hc->fair;
    hc->w.retry = on_wake;
    hc->w.give_up = on_give_up;
    if ((!hc->session && session_header_or_reply(req, &hc->session)) || guard_grant_or_reply(req))
        return;
    hc->quota = auth_holds_limit(req->key_id);
    if (hc->quota) {
        struct hold_keys k;
        hold_keys(req->name, hc->kind == HOLD_PERMIT, &k);
        hc->quota_member = quota_holds_member(k.message, req->token);
    }
    if (hc->fair && hc->wait_ms > 0) { /* its place in the queue */
        struct hold_keys k;
        hold_keys(req->name, hc->kind == HOLD_PERMIT, &k);
        liveness_waiter_id(hc->waiter_id);
        hc->live_slot = liveness_waiter_join(k.hash);
        memcpy(hc->attempt_id, hc->waiter_id, sizeof hc->attempt_id);
    } else if (hc->wait_ms > 0 || !hc->own_token) {
        liveness_waiter_id(hc->attempt_id);
    }
    attempt(hc);
}

/* ---- extend -------------------------------------------------------------------- */

static void extend_reply(struct gw_request *req, const long long *v) {
    metrics_inc(M_LOCK_EXTENDED, 1);
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "name", req->name);
    if (req->aux) {
        json_add_int(o, "limit", v[5]);
    } else {
        json_add_int(o, "fence", v[1]);
        cJSON_AddStringToObject(o, "mode", kind_name(v[4]));
        json_add_int(o, "count", v[2]);
    }
    json_add_int(o, "ttl_ms", v[3]);
    reply_json(req, 200, o);
}

/* With --min-replicas-ack an extension is answered once WAIT says enough
 * replicas have it (a second round trip: extensions are rare next to
 * acquisitions).  It cannot be undone, so too few acks is a 503 that tells
 * the holder its longer lease may not survive a failover. */
static void extend_ack_done(void *arg, const struct redis_result *res) {
    struct gw_request *req = arg;
    const long long *v = req->ctx;
    long long acked = res->ok && res->reply->type == REDIS_REPLY_INTEGER ? res->reply->integer : -1;
    int wanted = handlers_config()->min_replicas_ack;
    if (acked < wanted) {
        reply_problem(req, CODE_BACKEND_UNAVAILABLE,
                      "the lease was extended, but only %lld of %d replicas acknowledged it",
                      acked < 0 ? 0 : acked, wanted);
        return;
    }
    extend_reply(req, v);
}

static void extend_done(void *arg, const struct redis_result *res) {
    struct gw_request *req = arg;
    long long v[6] = {0};
    long long verdict = script_verdict(req, res, v, 6);
    if (verdict == VERDICT_ERROR) return;
    if (verdict == VERDICT_SESSION_BOUND) {
        reply_problem(req, CODE_SESSION_BOUND,
                      "%s '%s' is bound to a session: renew the session (PATCH "
                      "/v1/sessions/{token}) instead",
                      req->aux ? "semaphore" : "lock", req->name);
        return;
    }
    if (verdict < 0) {
        reply_not_held_or_owner(req, req->aux, verdict);
        return;
    }
    int wanted = handlers_config()->min_replicas_ack;
    if (!wanted) {
        extend_reply(req, v);
        return;
    }
    long long *kept = alloc_check(malloc(sizeof v));
    memcpy(kept, v, sizeof v);
    req->ctx = kept;
    req->ctx_free = free;
    char n[16], timeout[16];
    snprintf(n, sizeof n, "%d", wanted);
    snprintf(timeout, sizeof timeout, "%d", handlers_config()->replica_ack_timeout_ms);
    const char *argv[3] = {"WAIT", n, timeout};
    size_t lens[3] = {4, strlen(n), strlen(timeout)};
    struct hold_keys k;
    hold_keys(req->name, req->aux, &k); /* the master that took the write, in cluster mode */
    redis_command_for(k.hash, 3, argv, lens, extend_ack_done, req);
}

void hold_extend(struct gw_request *req, int semaphore) {
    long long ttl_ms;
    if (name_param_or_reply(req, 0) || token_header_or_reply(req, 1, NULL) ||
        body_parse_or_reply(req) ||
        body_int_or_reply(req, "ttl_ms", 0, 100, guard_max_lease_ms(), &ttl_ms, NULL))
        return;
    struct hold_keys k;
    hold_keys(req->name, semaphore, &k);
    char ttl[24];
    snprintf(ttl, sizeof ttl, "%lld", ttl_ms);
    const char *argv[] = {k.hash, req->token, ttl};
    size_t lens[3] = {strlen(argv[0]), strlen(argv[1]), strlen(argv[2])};
    req->aux = semaphore;
    if (auth_holds_limit(req->key_id)) { /* its entry counts at least as long as the lease */
        char *m = quota_holds_member(k.message, req->token);
        quota_holds_set(req->key_id, ttl_ms + quota_holds_margin_ms(), 1, (const char *const *)&m);
        free(m);
    }
    backend->extend(3, argv, lens, req->start_ns, extend_done, req);
}

/* ---- release ------------------------------------------------------------------- */

static void release_done(void *arg, const struct redis_result *res) {
    struct gw_request *req = arg;
    int sem = req->aux;
    long long v[3] = {0};
    long long verdict = script_verdict(req, res, v, 3);
    if (verdict == VERDICT_ERROR) return;
    if (verdict < 0) {
        reply_not_held_or_owner(req, sem, verdict);
        return;
    }
    metrics_inc(M_LOCK_RELEASED, 1);
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "name", req->name);
    cJSON_AddBoolToObject(o, "released", v[1] == 0);
    if (!sem) json_add_int(o, "count", v[1]);
    if (v[1] == 0 && auth_holds_limit(req->key_id)) { /* answered once its place is free */
        struct hold_keys k;
        hold_keys(req->name, sem, &k);
        char *m = quota_holds_member(k.message, req->token);
        quota_holds_drop_then(req->key_id, 1, (const char *const *)&m, quota_reply_done,
                              quota_reply_new(req, 200, o));
        free(m);
        return;
    }
    reply_json(req, 200, o);
}

void hold_release(struct gw_request *req, int semaphore) {
    if (name_param_or_reply(req, 0) || token_header_or_reply(req, 1, NULL)) return;
    struct hold_keys k;
    hold_keys(req->name, semaphore, &k);
    req->aux = semaphore;
    const char *argv[] = {k.hash, req->token, redis_release_channel_for(k.hash), k.message};
    size_t lens[4];
    for (int i = 0; i < 4; i++) lens[i] = strlen(argv[i]);
    backend->release(4, argv, lens, release_done, req);
}

/* ---- inspect ------------------------------------------------------------------- */

void hold_inspect_done(void *arg, const struct redis_result *res) {
    struct gw_request *req = arg;
    int sem = req->aux;
    long long v[5] = {0};
    long long verdict = script_verdict(req, res, v, 5);
    if (verdict == VERDICT_ERROR) return;
    /* The index a watch compares (GET ?watch_ms=&after=), on every GET as
     * Consul's X-Consul-Index: the first GET gives the index to watch from. */
    const redisReply *r = res->reply;
    char index[24];
    snprintf(index, sizeof index, "%lld",
             verdict > 0 && r->elements > 9 && r->element[9]->type == REDIS_REPLY_INTEGER
                 ? r->element[9]->integer
                 : 0);
    reply_header(req, "Lockgate-Index", index);
    if (verdict < 0) {
        reply_problem(req, CODE_NOT_HELD, "nobody holds %s '%s'", sem ? "semaphore" : "lock",
                      req->name);
        return;
    }
    reply_json(req, 200, hold_state_json(req->name, sem, res));
}

cJSON *hold_state_json(const char *name, int sem, const struct redis_result *res) {
    long long v[5] = {0};
    const char *err;
    if (verdict_parse(res, v, 5, &err) != 1) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "name", name);
        json_add_int(o, "holders", 0);
        return o;
    }
    const redisReply *r = res->reply;
    long long kind = r->elements > 6 ? r->element[6]->integer : 1;
    long long limit = r->elements > 7 ? r->element[7]->integer : 0;
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "name", name);
    if (sem) {
        json_add_int(o, "limit", limit);
        json_add_int(o, "holders", v[1]);
        json_add_int(o, "ttl_ms", v[4]);
    } else {
        cJSON_AddStringToObject(o, "mode", kind_name(kind));
        json_add_int(o, "holders", v[1]);
        json_add_int(o, "count", v[2]);
        json_add_int(o, "fence", v[3]);
        json_add_int(o, "ttl_ms", v[4]);
    }
    if (r->elements > 5 && r->element[5]->type == REDIS_REPLY_STRING && r->element[5]->len > 0)
        cJSON_AddStringToObject(o, "owner", r->element[5]->str);
    if (r->elements > 8 && r->element[8]->type == REDIS_REPLY_STRING && r->element[8]->len > 0)
        cJSON_AddStringToObject(o, "key_id", r->element[8]->str);
    return o;
}

void hold_inspect(struct gw_request *req, int semaphore) {
    if (name_param_or_reply(req, 0)) return;
    struct hold_keys k;
    hold_keys(req->name, semaphore, &k);
    req->aux = semaphore;
    const char *argv[] = {k.hash};
    size_t lens[1] = {strlen(k.hash)};
    backend->inspect(1, argv, lens, hold_inspect_done, req);
}
