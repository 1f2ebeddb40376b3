/* watch.c -- see watch.h. */
#include "handlers/watch.h"
#include "handlers/verdict.h"
#include "common/alloc.h"
#include "common/decimal.h"
#include "handlers/backend.h"
#include "handlers/handlers.h"
#include "handlers/holds.h"
#include "handlers/state_stream.h"
#include "handlers/streams.h"
#include "server/http.h"
#include "server/loop.h"
#include "server/metrics.h"
#include "server/redis.h"
#include "server/reply.h"
#include "server/waiters.h"

#include <cjson/cJSON.h>
#include <hiredis/hiredis.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define KEY_MAX (GW_PREFIX_MAX + NAME_MAX_LEN + 16)

/* One watch request, alive from the handler to the reply. */
struct watch_call {
    struct waiter w;            /* parking state (first) */
    struct gw_request *req;     /* the request it answers */
    long long after;            /* the index the client saw */
    int64_t deadline_ms;        /* arrival + watch_ms (monotonic) */
    char hash[KEY_MAX];         /* <prefix>lock:{name} or <prefix>sem:{name} */
    char key[NAME_MAX_LEN + 8]; /* "lock:NAME", as published (w.key) */
};

static atomic_ulong in_progress;

uint64_t watch_in_progress(void) { return atomic_load(&in_progress); }

void watch_init(void) {
    metrics_add_source("lockgate_watching_requests", "Requests watching a lock or semaphore",
                       "gauge", watch_in_progress);
}

static void watch_call_free(void *ctx) {
    atomic_fetch_sub(&in_progress, 1);
    free(ctx);
}

static void attempt(struct watch_call *wc);

/* inspect.lua's shape: {1, holders, count, fence, ttl_ms, owner, kind,
 * limit, key_id, index} or {-1}. */
static long long elem(const struct redis_result *res, size_t i) {
    const redisReply *r = res->ok ? res->reply : NULL;
    return r && r->type == REDIS_REPLY_ARRAY && r->elements > i &&
                   r->element[i]->type == REDIS_REPLY_INTEGER
               ? r->element[i]->integer
               : -100;
}

static void watch_done(void *arg, const struct redis_result *res) {
    struct watch_call *wc = arg;
    long long verdict = elem(res, 0);
    if (verdict == -100) {
        hold_inspect_done(wc->req, res); /* the 503 GET gives */
        return;
    }
    /* The index watch.lua compared (the answer, GET's, carries it). */
    long long index = verdict != 1 ? 0 : elem(res, 9);
    int64_t now = loop_now_ms();
    if (index != wc->after || now >= wc->deadline_ms || http_shutting_down()) {
        hold_inspect_done(wc->req, res);
        return;
    }
    /* Unchanged: park until a change is announced, the lease's end (an
     * expiry announces nothing), or the deadline. */
    int64_t wake = wc->deadline_ms;
    if (verdict == 1 && now + elem(res, 4) + 2 < wake) wake = now + elem(res, 4) + 2;
    if (park_request(wc->req, &wc->w, wake) < 0) wc->w.give_up(&wc->w, 1);
}

/* Quorum mode: held when a quorum of masters says so; the answer of the
 * master with the highest fence stands for them, the first (in --redis
 * order) on a tie, as quorum_pick does for a plain GET: a semaphore's
 * permits have no fence and their grant times are each master's own, so
 * the same master's index is the one compared every time.  Too few
 * answers: GET's 503. */
static void watch_all_done(void *arg, const struct redis_result *res, int n) {
    watch_done(arg, verdict_pick_inspect(res, n, redis_quorum()));
}

static void attempt(struct watch_call *wc) {
    long long left = wc->deadline_ms - loop_now_ms();
    if (left < 1) left = 1;
    char after[24], left_s[24];
    snprintf(after, sizeof after, "%lld", wc->after);
    snprintf(left_s, sizeof left_s, "%lld", left);
    const char *argv[] = {wc->hash, after, left_s};
    size_t lens[3] = {strlen(wc->hash), strlen(after), strlen(left_s)};
    wc->w.seen_seq = waiters_release_seq();
    backend->eval(SCRIPT_WATCH, 1, 3, argv, lens, watch_done, watch_all_done, wc);
}

static void on_wake(struct waiter *w) {
    struct watch_call *wc = (struct watch_call *)w;
    if (http_client_gone(wc->req)) {
        w->give_up(w, 1);
        return;
    }
    attempt(wc);
}

/* A watcher that hung up is forgotten: answered (nobody reads it), freed. */
static void on_give_up(struct waiter *w, int client_gone) {
    struct watch_call *wc = (struct watch_call *)w;
    if (client_gone)
        reply_problem(wc->req, CODE_LOCK_BUSY, "the client went away while watching");
    else
        reply_problem(wc->req, CODE_SHUTTING_DOWN, "the gateway is stopping");
}

/* ---- as an event stream (Accept: text/event-stream) ---------------------------- */

/* A state event for each change, its id the change log entry's. */
static void watched(struct gw_request *req, const struct redis_result *res, const char *id,
                    void *arg) {
    int *semaphore = arg;
    state_stream_event(req, id, "state", hold_state_json(req->name, *semaphore, res));
}

static void watched_free(void *arg) {
    atomic_fetch_sub(&in_progress, 1);
    free(arg);
}

static int watch_stream(struct gw_request *req, int semaphore) {
    if (name_param_or_reply(req, 0)) return 1;
    const char *last = http_header(req, "Last-Event-ID");
    if (last && !state_stream_id_ok(last)) {
        reply_problem(req, CODE_INVALID_FIELD, "Last-Event-ID must be an id this stream sent");
        return 1;
    }
    int *w = alloc_check(malloc(sizeof *w));
    *w = semaphore;
    atomic_fetch_add(&in_progress, 1);
    char hash[KEY_MAX], key[NAME_MAX_LEN + 8];
    const char *kind = semaphore ? "sem" : "lock";
    snprintf(hash, sizeof hash, "%s%s:{%s}", handlers_config()->key_prefix, kind, req->name);
    snprintf(key, sizeof key, "%s:%s", kind, req->name);
    state_stream_start(req, hash, key, last, watched, w, watched_free);
    return 1;
}

int watch_if_asked(struct gw_request *req, int semaphore) {
    if (stream_asked(req)) return watch_stream(req, semaphore);
    const char *q_ms = http_query(req, "watch_ms"), *q_after = http_query(req, "after");
    if (!q_ms) return 0;
    long long ms, after = 0;
    if (decimal_parse(q_ms, strlen(q_ms), 1, WATCH_MAX_MS, &ms) < 0) {
        reply_problem(req, CODE_INVALID_FIELD, "watch_ms must be an integer from 1 to %d",
                      WATCH_MAX_MS);
        return 1;
    }
    if (q_after && decimal_parse(q_after, strlen(q_after), 0, 9007199254740991LL, &after) < 0) {
        reply_problem(req, CODE_INVALID_FIELD, "after must be an index (a Lockgate-Index, or 0)");
        return 1;
    }
    if (name_param_or_reply(req, 0)) return 1;
    struct watch_call *wc = alloc_check(calloc(1, sizeof *wc));
    atomic_fetch_add(&in_progress, 1);
    const char *kind = semaphore ? "sem" : "lock";
    snprintf(wc->hash, sizeof wc->hash, "%s%s:{%s}", handlers_config()->key_prefix, kind,
             req->name);
    snprintf(wc->key, sizeof wc->key, "%s:%s", kind, req->name);
    wc->req = req;
    wc->after = after;
    wc->deadline_ms = loop_now_ms() + ms;
    wc->w.key = wc->key;
    wc->w.watch = 1;
    wc->w.retry = on_wake;
    wc->w.give_up = on_give_up;
    req->aux = semaphore;
    req->ctx = wc;
    req->ctx_free = watch_call_free;
    attempt(wc);
    return 1;
}
