/* holds.c -- see holds.h.
 *
 * An acquisition is an attempt (one acquire.lua call) followed, while the
 * answer is "busy" and the request may still wait, by parking it with
 * waiters.c until a release is announced, the holder's lease runs out, or
 * its own deadline comes; then another attempt.  No polling: between
 * attempts the request costs a parked struct and a suspended connection. */
#include "handlers/holds.h"
#include "common/alloc.h"
#include "handlers/handlers.h"
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

#define FENCE_KEEP_MS "10000" /* as in _holders.lua: the last fence outlives use */
#define KEY_MAX       (GW_PREFIX_MAX + NAME_MAX_LEN + 16)

_Static_assert(sizeof((struct hold_call *)0)->waiter_id >= LIVENESS_WAITER_ID_MAX,
               "a waiter id fits");

struct hold_keys {
    char hash[KEY_MAX];             /* <prefix>lock:{name} or <prefix>sem:{name} */
    char queue[KEY_MAX + 8];        /* ...:q, fair waiters by arrival */
    char qdead[KEY_MAX + 8];        /* ...:qd, their deadlines */
    char message[NAME_MAX_LEN + 8]; /* "lock:NAME", published on release */
};

/* The name sits in a hash tag, so all keys of one lock share a Redis
 * Cluster slot; locks and semaphores of the same name never meet. */
static void hold_keys(const char *name, int semaphore, struct hold_keys *k) {
    const char *p = handlers_config()->key_prefix, *kind = semaphore ? "sem" : "lock";
    snprintf(k->hash, KEY_MAX, "%s%s:{%s}", p, kind, name);
    snprintf(k->queue, KEY_MAX + 8, "%s:q", k->hash);
    snprintf(k->qdead, KEY_MAX + 8, "%s:qd", k->hash);
    snprintf(k->message, sizeof k->message, "%s:%s", kind, name);
}

static const char *kind_name(long long code) {
    return code == 2 ? "shared" : code == 3 ? "permit" : "exclusive";
}

static void ignore_reply(void *arg, const struct redis_result *res) {}
static void ignore_all(void *arg, const struct redis_result *res, int n) {}

/* A script whose answer nobody waits for, on every master. */
static void eval_everywhere(enum script_id id, int nkeys, int nargs, const char *const *argv,
                            const size_t *lens) {
    if (redis_nodes() > 1)
        redis_eval_all(id, nkeys, nargs, argv, lens, ignore_all, NULL);
    else
        redis_eval(id, nkeys, nargs, argv, lens, ignore_reply, NULL);
}

/* Quorum mode sends one command to every master, or one in single mode. */
#define QUORUM (redis_nodes() > 1)

/* Reads the script's reply: an array whose first n elements are integers
 * (fewer when the first is negative), or a bare integer, which stands for
 * an array of it and zeros (a fast path's answer: building a Lua table
 * costs Redis more than the rest of a release).  Returns the first, or
 * -100 with *err set when Redis failed or the reply has another shape. */
static long long parse_verdict(const struct redis_result *res, long long *v, size_t n,
                               const char **err) {
    *err = "Redis gave an unexpected answer";
    if (!res->ok) {
        *err = res->error;
        return -100;
    }
    const redisReply *r = res->reply;
    if (r->type == REDIS_REPLY_INTEGER) {
        for (size_t i = 0; i < n; i++) v[i] = i == 0 ? r->integer : 0;
        return r->integer;
    }
    if (r->type != REDIS_REPLY_ARRAY || r->elements < 1) return -100;
    for (size_t i = 0; i < n; i++) {
        if (i >= r->elements || r->element[i]->type != REDIS_REPLY_INTEGER) {
            if (i > 0 && v[0] < 0) break;
            return -100;
        }
        v[i] = r->element[i]->integer;
    }
    return v[0];
}

/* Element i of a script's array reply when it is an integer, else 0. */
static long long reply_int(const struct redis_result *res, size_t i) {
    const redisReply *r = res->ok ? res->reply : NULL;
    return r && r->type == REDIS_REPLY_ARRAY && r->elements > i &&
                   r->element[i]->type == REDIS_REPLY_INTEGER
               ? r->element[i]->integer
               : 0;
}

/* How many queue entries of dead gateways an acquire.lua answer says it
 * dropped (after the grant's five values, or the busy answer's three). */
static long long acquire_dropped(const struct redis_result *res) {
    long long verdict = reply_int(res, 0);
    return verdict == 1 ? reply_int(res, 5) : verdict == 0 ? reply_int(res, 3) : 0;
}

/* parse_verdict, answering 503 itself on -100. */
static long long script_verdict(struct gw_request *req, const struct redis_result *res,
                                long long *v, size_t n) {
    const char *err;
    long long verdict = parse_verdict(res, v, n, &err);
    if (verdict == -100) reply_problem(req, CODE_BACKEND_UNAVAILABLE, "Redis: %s", err);
    return verdict;
}

static void reply_not_held_or_owner(struct gw_request *req, int semaphore, long long verdict) {
    const char *what = semaphore ? "semaphore" : "lock";
    if (verdict == -1)
        reply_problem(req, CODE_NOT_HELD, "nobody holds %s '%s'", what, req->name);
    else
        reply_problem(req, CODE_NOT_OWNER, "%s '%s' is held, but not by this token", what,
                      req->name);
}

/* ---- acquire -------------------------------------------------------------------- */

static void attempt(struct hold_call *hc);

/* dequeue.lua answers {removed, dropped}.  In quorum mode every master
 * holds its own copy of a dead waiter's entry: the most any master dropped
 * counts, so one waiter counts once. */
static void dequeued(void *arg, const struct redis_result *res) {
    metrics_inc(M_DEAD_WAITERS, (uint64_t)reply_int(res, 1));
}
static void dequeued_all(void *arg, const struct redis_result *res, int n) {
    long long most = 0;
    for (int i = 0; i < n; i++)
        if (reply_int(&res[i], 1) > most) most = reply_int(&res[i], 1);
    metrics_inc(M_DEAD_WAITERS, (uint64_t)most);
}

/* A fair waiter that stops waiting leaves the queue at once, so the next
 * one never waits for its deadline. */
static void leave_queue(struct hold_call *hc) {
    if (!hc->queued) return;
    struct hold_keys k;
    hold_keys(hc->req->name, hc->kind == HOLD_PERMIT, &k);
    const char *argv[] = {k.hash,   k.queue, k.qdead, hc->waiter_id, redis_release_channel(),
                          k.message};
    size_t lens[6];
    for (int i = 0; i < 6; i++) lens[i] = strlen(argv[i]);
    if (QUORUM)
        redis_eval_all(SCRIPT_DEQUEUE, 3, 6, argv, lens, dequeued_all, NULL);
    else
        redis_eval(SCRIPT_DEQUEUE, 3, 6, argv, lens, dequeued, NULL);
}

/* why is acquire.lua's: 1 held (or full), 2 lock-delay, 3 nobody holds it
 * (or permits are free) but fair waiters are queued ahead; or 4: the wait
 * ended while this gateway was stalled (on_wake), state unknown. */
static void reply_busy(struct hold_call *hc, long long retry_after_ms, long long why) {
    struct gw_request *req = hc->req;
    if (retry_after_ms < 1) retry_after_ms = 1;
    char secs[24];
    snprintf(secs, sizeof secs, "%lld", (retry_after_ms + 999) / 1000);
    reply_header(req, "Retry-After", secs);
    cJSON *extra = cJSON_CreateObject();
    json_add_int(extra, "retry_after_ms", retry_after_ms);
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
static int gives_back(const struct hold_call *hc, long long verdict) {
    return verdict == 1 || (verdict == 2 && hc->kind != HOLD_PERMIT && !QUORUM);
}

/* The client will never learn it got the lock: give it back. */
static void release_undelivered(struct gw_request *req) {
    struct hold_call *hc = req->ctx;
    struct hold_keys k;
    hold_keys(req->name, hc->kind == HOLD_PERMIT, &k);
    const char *argv[] = {k.hash, req->token, redis_release_channel(), k.message};
    size_t lens[4];
    for (int i = 0; i < 4; i++) lens[i] = strlen(argv[i]);
    eval_everywhere(SCRIPT_RELEASE, 1, 4, argv, lens);
}

static void reply_granted(struct hold_call *hc, long long verdict, const long long *v) {
    struct gw_request *req = hc->req;
    int sem = hc->kind == HOLD_PERMIT;
    char location[NAME_MAX_LEN + 24];
    snprintf(location, sizeof location, "/v1/%s/%s", sem ? "semaphores" : "locks", req->name);
    reply_header(req, "Lock-Token", req->token);
    reply_header(req, "Location", location);
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
    metrics_inc(verdict == 1 ? M_LOCK_ACQUIRED : M_LOCK_REENTERED, 1);
    if (gives_back(hc, verdict)) req->on_undelivered = release_undelivered;
    reply_json(req, verdict == 1 ? 201 : 200, o);
}

/* Acts on one attempt's outcome: reply, or park the request to try again. */
static void on_verdict(struct hold_call *hc, long long verdict, const long long *v,
                       const char *err) {
    struct gw_request *req = hc->req;
    if (verdict == -100) {
        leave_queue(hc);
        reply_problem(req, CODE_BACKEND_UNAVAILABLE, "Redis: %s", err);
        return;
    }
    int64_t now = loop_now_ms();
    if (hc->waited && verdict != 0) metrics_observe_wait((now - hc->start_ms) * 1000);
    if (verdict == -3 || verdict == -4 || verdict == -6)
        leave_queue(hc); /* other masters may have queued it */
    if (verdict == -6) {
        reply_problem(req, CODE_SESSION_NOT_FOUND, "session '%s' has ended", hc->session);
        return;
    }
    if (verdict == -3) {
        reply_problem(req, CODE_MODE_MISMATCH, "this token holds lock '%s' in the other mode",
                      req->name);
        return;
    }
    if (verdict == -4) {
        reply_problem(req, CODE_LIMIT_MISMATCH, "semaphore '%s' is in use with limit %lld",
                      req->name, v[1]);
        return;
    }
    if (verdict == 0) {
        if (http_shutting_down() && hc->wait_ms > 0) {
            leave_queue(hc);
            reply_problem(req, CODE_SHUTTING_DOWN, "the gateway is stopping");
            return;
        }
        if (hc->wait_ms > 0 && now < hc->deadline_ms) {
            if (!hc->waited) metrics_inc(M_WAIT_STARTED, 1);
            hc->waited = 1;
            int64_t wake = now + v[1];
            if (wake > hc->deadline_ms) wake = hc->deadline_ms;
            waiters_park(&hc->w, wake);
            return;
        }
        if (hc->waited) {
            metrics_inc(M_WAIT_TIMEOUTS, 1);
            metrics_observe_wait((now - hc->start_ms) * 1000);
            leave_queue(hc);
        }
        reply_busy(hc, v[1], v[2]);
        return;
    }
    if (hc->waited && http_client_gone(req)) {
        /* It left while this attempt was on its way: it must not hold. */
        if (gives_back(hc, verdict)) {
            release_undelivered(req);
            metrics_inc(M_GIVEN_BACK, 1);
        }
        metrics_inc(M_WAIT_TIMEOUTS, 1);
        reply_problem(req, CODE_LOCK_BUSY, "the client went away while waiting");
        return;
    }
    reply_granted(hc, verdict, v);
}

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

static void ack_finish(struct hold_call *hc) {
    struct hold_ack *a = hc->ack;
    a->got_script = a->got_ack = 0;
    long long verdict = a->sverdict;
    if ((verdict == 1 || verdict == 2) && a->acked < hc->acks_wanted) {
        release_undelivered(hc->req);
        reply_problem(hc->req, CODE_BACKEND_UNAVAILABLE,
                      "only %lld of %d replicas acknowledged the lock in time; it was given back",
                      a->acked < 0 ? 0 : a->acked, hc->acks_wanted);
        return;
    }
    on_verdict(hc, verdict, a->sv, a->serr);
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
    redis_command(3, argv, lens, ack_done, hc);
}

/* acquire.lua's answer in v[0..4]: {verdict, fence, count, ttl, holders},
 * or its fast path's bare fence, which means {1, fence, 1, ttl asked, 1}. */
static long long acquire_verdict(const struct hold_call *hc, const struct redis_result *res,
                                 long long *v, const char **err) {
    if (res->ok && res->reply->type == REDIS_REPLY_INTEGER && res->reply->integer > 0) {
        v[0] = 1, v[1] = res->reply->integer, v[2] = 1, v[3] = hc->ttl_ms, v[4] = 1;
        return 1;
    }
    long long verdict = parse_verdict(res, v, 2, err);
    if (verdict > 0) verdict = parse_verdict(res, v, 5, err);
    return verdict;
}

static void acquire_done(void *arg, const struct redis_result *res) {
    struct hold_call *hc = arg;
    long long v[5] = {0};
    const char *err = NULL;
    long long verdict = acquire_verdict(hc, res, v, &err);
    if (verdict == 0) v[2] = reply_int(res, 2);
    metrics_inc(M_DEAD_WAITERS, (uint64_t)acquire_dropped(res));
    if (!hc->acks_wanted) {
        on_verdict(hc, verdict, v, err);
        return;
    }
    struct hold_ack *a = hc->ack;
    a->got_script = 1;
    a->sverdict = verdict;
    memcpy(a->sv, v, sizeof v);
    snprintf(a->serr, sizeof a->serr, "%s", err ? err : "");
    if (!a->got_ack) return; /* the usual order: WAIT answers next */
    a->got_ack = 0;
    if (verdict == 1 || verdict == 2) {
        send_wait(hc); /* that WAIT ran before this write */
        return;
    }
    ack_finish(hc);
}

/* ---- quorum mode (the Redlock algorithm) -------------------------------------------
 *
 * Every operation runs on every master at once (pipelined per master, in
 * parallel across them).  An acquisition counts when a quorum granted it
 * within the lease's validity: the shortest granted lease, minus the time
 * the round took, minus a clock-drift allowance of 1% of the lease plus
 * 2 ms; the answer's ttl_ms is that validity.  A failed acquisition gives
 * back what it got.  The fence is the highest the quorum answered, and
 * every master's last fence is raised to it, so any later quorum (which
 * shares a master with this one) answers a higher one. */

#define DRIFT_MS(ttl) ((ttl) / 100 + 2)

static int cmp_ll(const void *a, const void *b) {
    long long x = *(const long long *)a, y = *(const long long *)b;
    return x < y ? -1 : x > y;
}

static void quorum_acquire_done(void *arg, const struct redis_result *res, int n) {
    struct hold_call *hc = arg;
    int q = redis_quorum(), granted = 0, answered = 0, reentered = 0, mismatch = 0, limits = 0;
    long long fence = 0, count = 0, ttl = -1, holders = 0, limit = 0, busy[GW_MAX_NODES];
    long long cause = 3, dropped = 0; /* held beats queued; one waiter counts once */
    int nbusy = 0, ended = 0;
    const char *err = "no Redis master answered";
    for (int i = 0; i < n; i++) {
        long long v[5] = {0};
        const char *e;
        long long verdict = acquire_verdict(hc, &res[i], v, &e);
        if (verdict == -100) {
            err = e;
            continue;
        }
        answered++;
        if (acquire_dropped(&res[i]) > dropped) dropped = acquire_dropped(&res[i]);
        if (verdict > 0) {
            granted++;
            reentered |= verdict == 2;
            if (v[1] > fence) fence = v[1];
            if (v[2] > count) count = v[2];
            if (ttl < 0 || v[3] < ttl) ttl = v[3];
            if (v[4] > holders) holders = v[4];
        } else if (verdict == 0) {
            busy[nbusy++] = v[1];
            if (reply_int(&res[i], 2) > 0 && reply_int(&res[i], 2) < cause)
                cause = reply_int(&res[i], 2);
        } else if (verdict == -3) {
            mismatch++;
        } else if (verdict == -4) {
            limits++;
            limit = v[1];
        } else if (verdict == -6) {
            ended++;
        }
    }
    metrics_inc(M_DEAD_WAITERS, (uint64_t)dropped);
    long long validity = ttl - (loop_now_ms() - hc->attempt_ms) - DRIFT_MS(hc->ttl_ms);
    struct hold_keys k;
    hold_keys(hc->req->name, hc->kind == HOLD_PERMIT, &k);
    if (granted >= q && validity > 0) {
        if (hc->kind != HOLD_PERMIT) {
            char f[24];
            snprintf(f, sizeof f, "%lld", fence);
            const char *argv[] = {k.hash, f, FENCE_KEEP_MS};
            size_t lens[3] = {strlen(argv[0]), strlen(f), strlen(FENCE_KEEP_MS)};
            eval_everywhere(SCRIPT_FENCE_RAISE, 1, 3, argv, lens);
        }
        /* A master that said busy kept this waiter's queue entry: it would
         * hold up that master's queue until its deadline. */
        if (granted < n) leave_queue(hc);
        long long v[5] = {reentered ? 2 : 1, fence, count, validity, holders};
        on_verdict(hc, v[0], v, NULL);
        return;
    }
    /* Give back what we got (a re-entry's level is left, as in gives_back). */
    if (granted > 0 && !reentered) release_undelivered(hc->req);
    if (answered < q) {
        char why[160];
        snprintf(why, sizeof why, "only %d of %d Redis masters answered (%s)", answered, n, err);
        on_verdict(hc, -100, NULL, why);
        return;
    }
    if (mismatch >= q) {
        on_verdict(hc, -3, NULL, NULL);
        return;
    }
    if (ended >= q) {
        on_verdict(hc, -6, NULL, NULL);
        return;
    }
    if (limits >= q) {
        long long v[2] = {-4, limit};
        on_verdict(hc, -4, v, NULL);
        return;
    }
    /* Busy: it could succeed once enough of the busy masters free up. */
    long long retry = 1;
    if (nbusy > 0) {
        qsort(busy, (size_t)nbusy, sizeof busy[0], cmp_ll);
        int need = q - (answered - nbusy);
        if (need < 1) need = 1;
        if (need > nbusy) need = nbusy;
        retry = busy[need - 1];
    }
    long long v[3] = {0, retry, nbusy > 0 ? cause : 1};
    on_verdict(hc, 0, v, NULL);
}

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
        long long verdict = parse_verdict(&res[i], v, 1, &e);
        if (verdict == -100) continue;
        answered++;
        if (verdict > 0) {
            ok++;
            if (!best || better(res[i].reply, best->reply)) best = &res[i];
        } else if (verdict >= -5) {
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

static void attempt(struct hold_call *hc) {
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
    char skey[KEY_MAX];
    if (hc->session) session_key(hc->session, skey, sizeof skey);
    const char *argv[] = {k.hash,
                          k.queue,
                          k.qdead,
                          hc->session ? skey : NULL,
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
                          redis_release_channel(),
                          k.message,
                          hc->session ? hc->session : "",
                          req->key_id ? req->key_id : ""};
    /* The common case (exclusive, no owner, max-hold, lock-delay, waiting,
     * session or API key) sends the script's short form, token and ttl
     * only: every argument costs Redis time (bench/RESULTS.md, "Redis fast
     * path").  A session-bound hold declares its session's key as KEYS[4];
     * the others leave it out (argv[3] is skipped).  The session token and
     * the key id go last, only when one is set. */
    int extra = hc->session || req->key_id ? 2 : 0;
    int nargs = hc->kind == HOLD_EXCLUSIVE && hc->owner[0] == '\0' && hc->max_hold_ms == 0 &&
                        hc->lock_delay_ms == 0 && wait_left == 0 && !extra
                    ? 5
                    : 15 + (hc->session ? 1 : 0) + extra;
    int nkeys = hc->session ? 4 : 3;
    const char *av[18];
    size_t lens[18];
    for (int i = 0, j = 0; i < 18 && j < nargs; i++) {
        if (i == 3 && !hc->session) continue;
        av[j] = argv[i];
        lens[j] = strlen(av[j]);
        j++;
    }
    hc->w.seen_seq = waiters_release_seq();
    hc->attempt_ms = loop_now_ms();
    if (QUORUM) {
        redis_eval_all(SCRIPT_ACQUIRE, nkeys, nargs, av, lens, quorum_acquire_done, hc);
        return;
    }
    if (hc->wait_ms == 0)
        redis_eval_here(SCRIPT_ACQUIRE, nkeys, nargs, av, lens, acquire_done, hc);
    else
        redis_eval(SCRIPT_ACQUIRE, nkeys, nargs, av, lens, acquire_done, hc);
    if (hc->acks_wanted) send_wait(hc);
}

static void on_give_up(struct waiter *w, int client_gone);

/* A client that hung up while parked is not tried for: its hang-up and
 * the wake-up can arrive in the same turn, the wake-up first.  A waiter
 * woken later than its deadline plus the liveness TTL was frozen with its
 * gateway (SIGSTOP, a stalled host): the others may have counted it dead
 * and moved on, and its client asked for an answer long ago, so it times
 * out without another attempt rather than take a lock that late. */
static void on_wake(struct waiter *w) {
    struct hold_call *hc = (struct hold_call *)w;
    if (http_client_gone(hc->req)) {
        on_give_up(w, 1);
        return;
    }
    int64_t now = loop_now_ms();
    if (now > hc->deadline_ms + handlers_config()->liveness_ttl_ms) {
        metrics_inc(M_WAIT_TIMEOUTS, 1);
        metrics_observe_wait((now - hc->start_ms) * 1000);
        leave_queue(hc);
        reply_busy(hc, 1, 4);
        return;
    }
    attempt(hc);
}

static void on_give_up(struct waiter *w, int client_gone) {
    struct hold_call *hc = (struct hold_call *)w;
    leave_queue(hc);
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

static void hold_call_free(void *ctx) {
    struct hold_call *hc = ctx;
    free(hc->session);
    free(hc->ack);
    free(hc);
}

void hold_acquire(struct gw_request *req, struct hold_call *hc) {
    hc->req = req;
    req->ctx = hc;
    req->ctx_free = hold_call_free;
    hc->start_ms = loop_now_ms();
    hc->acks_wanted = QUORUM ? 0 : handlers_config()->min_replicas_ack;
    if (hc->acks_wanted) hc->ack = alloc_check(calloc(1, sizeof *hc->ack));
    hc->deadline_ms = hc->start_ms + hc->wait_ms;
    hc->w.fd = http_client_fd(req);
    hc->w.fair = hc->fair;
    hc->w.retry = on_wake;
    hc->w.give_up = on_give_up;
    if (session_header_or_reply(req, &hc->session)) return;
    if (hc->fair && hc->wait_ms > 0) liveness_waiter_id(hc->waiter_id); /* its place in the queue */
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
    if (verdict == -100) return;
    if (verdict == -5) {
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
    redis_command(3, argv, lens, extend_ack_done, req);
}

/* The shortest extended lease stands for the quorum, less the round's time
 * and the drift allowance, like an acquisition's validity. */
static void quorum_extend_done(void *arg, const struct redis_result *res, int n) {
    struct gw_request *req = arg;
    struct redis_result slot;
    char why[96];
    const struct redis_result *r =
        quorum_pick(res, n, redis_quorum(), shorter_lease, &slot, why, sizeof why);
    if (r->ok && elem(r->reply, 0) > 0 && r->reply->elements > 3) {
        /* The fence is the quorum's: the highest, as the acquisition said. */
        for (int i = 0; i < n; i++)
            if (res[i].ok && elem(res[i].reply, 0) > 0 && elem(res[i].reply, 1) > elem(r->reply, 1))
                r->reply->element[1]->integer = elem(res[i].reply, 1);
        long long elapsed = (loop_now_ms() * 1000000 - req->start_ns) / 1000000;
        if (elapsed < 0) elapsed = 0;
        redisReply *ttl = r->reply->element[3]; /* our own copy (redis_eval_all) */
        ttl->integer -= elapsed + DRIFT_MS(ttl->integer);
        if (ttl->integer < 1) ttl->integer = 1;
    }
    extend_done(req, r);
}

void hold_extend(struct gw_request *req, int semaphore) {
    long long ttl_ms;
    if (name_param_or_reply(req, 0) || token_header_or_reply(req, 1, NULL) ||
        body_parse_or_reply(req) ||
        body_int_or_reply(req, "ttl_ms", 0, 100, 86400000, &ttl_ms, NULL))
        return;
    struct hold_keys k;
    hold_keys(req->name, semaphore, &k);
    char ttl[24];
    snprintf(ttl, sizeof ttl, "%lld", ttl_ms);
    const char *argv[] = {k.hash, req->token, ttl};
    size_t lens[3] = {strlen(argv[0]), strlen(argv[1]), strlen(argv[2])};
    req->aux = semaphore;
    if (QUORUM)
        redis_eval_all(SCRIPT_EXTEND, 1, 3, argv, lens, quorum_extend_done, req);
    else
        redis_eval_here(SCRIPT_EXTEND, 1, 3, argv, lens, extend_done, req);
}

/* ---- release ------------------------------------------------------------------- */

static void release_done(void *arg, const struct redis_result *res) {
    struct gw_request *req = arg;
    int sem = req->aux;
    long long v[3] = {0};
    long long verdict = script_verdict(req, res, v, 3);
    if (verdict == -100) return;
    if (verdict < 0) {
        reply_not_held_or_owner(req, sem, verdict);
        return;
    }
    metrics_inc(M_LOCK_RELEASED, 1);
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "name", req->name);
    cJSON_AddBoolToObject(o, "released", v[1] == 0);
    if (!sem) json_add_int(o, "count", v[1]);
    reply_json(req, 200, o);
}

/* A release goes to every master; one that released stands for them all. */
static void quorum_release_done(void *arg, const struct redis_result *res, int n) {
    struct redis_result slot;
    char why[96];
    release_done(arg, quorum_pick(res, n, 1, fewer_left, &slot, why, sizeof why));
}

void hold_release(struct gw_request *req, int semaphore) {
    if (name_param_or_reply(req, 0) || token_header_or_reply(req, 1, NULL)) return;
    struct hold_keys k;
    hold_keys(req->name, semaphore, &k);
    req->aux = semaphore;
    const char *argv[] = {k.hash, req->token, redis_release_channel(), k.message};
    size_t lens[4];
    for (int i = 0; i < 4; i++) lens[i] = strlen(argv[i]);
    if (QUORUM)
        redis_eval_all(SCRIPT_RELEASE, 1, 4, argv, lens, quorum_release_done, req);
    else
        redis_eval_here(SCRIPT_RELEASE, 1, 4, argv, lens, release_done, req);
}

/* ---- inspect ------------------------------------------------------------------- */

void hold_inspect_done(void *arg, const struct redis_result *res) {
    struct gw_request *req = arg;
    int sem = req->aux;
    long long v[5] = {0};
    long long verdict = script_verdict(req, res, v, 5);
    if (verdict == -100) return;
    if (verdict < 0) {
        reply_not_held_or_owner(req, sem, -1);
        return;
    }
    const redisReply *r = res->reply;
    long long kind = r->elements > 6 ? r->element[6]->integer : 1;
    long long limit = r->elements > 7 ? r->element[7]->integer : 0;
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "name", req->name);
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
    reply_json(req, 200, o);
}

/* Held when a quorum says so; the highest fence stands for them. */
static void quorum_inspect_done(void *arg, const struct redis_result *res, int n) {
    struct redis_result slot;
    char why[96];
    hold_inspect_done(arg,
                      quorum_pick(res, n, redis_quorum(), higher_fence, &slot, why, sizeof why));
}

void hold_inspect(struct gw_request *req, int semaphore) {
    if (name_param_or_reply(req, 0)) return;
    struct hold_keys k;
    hold_keys(req->name, semaphore, &k);
    req->aux = semaphore;
    const char *argv[] = {k.hash};
    size_t lens[1] = {strlen(k.hash)};
    if (QUORUM)
        redis_eval_all(SCRIPT_INSPECT, 1, 1, argv, lens, quorum_inspect_done, req);
    else
        redis_eval_here(SCRIPT_INSPECT, 1, 1, argv, lens, hold_inspect_done, req);
}
