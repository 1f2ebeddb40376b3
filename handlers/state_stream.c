/* state_stream.c -- see state_stream.h. */
#include "handlers/state_stream.h"
#include "common/alloc.h"
#include "handlers/backend.h"
#include "handlers/handlers.h"
#include "handlers/holds.h"
#include "server/http.h"
#include "server/loop.h"
#include "server/redis.h"
#include "server/reply.h"
#include "server/waiters.h"

#include <cjson/cJSON.h>
#include <hiredis/hiredis.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The stream's mark lasts this long; it is set again before it ends. */
#define MARK_MS  60000
#define REARM_MS 50000
#define RETRY_MS 1000

struct state_stream {
    struct waiter w;         /* watches the name (first) */
    struct gw_request *req;  /* the stream's request */
    char hash[HOLD_KEY_MAX]; /* the name's hash */
    char key[HOLD_KEY_MAX];  /* "lock:NAME", as published */
    long long after;         /* the index last read (-1: none yet) */
    state_stream_fn fn;      /* what to send for a state */
    void *arg;               /* fn's */
    void (*free_arg)(void *);
    int calls;  /* watch.lua calls under way */
    int orphan; /* the request was freed: the answer frees this */
    int ended;  /* the request is completed */
};

static void attempt(struct state_stream *s);
static void gone(struct gw_request *req);

static void stream_free(struct state_stream *s) {
    if (s->free_arg) s->free_arg(s->arg);
    free(s);
}

static long long elem(const struct redis_result *res, size_t i) {
    const redisReply *r = res && res->ok ? res->reply : NULL;
    return r && r->type == REDIS_REPLY_ARRAY && r->elements > i &&
                   r->element[i]->type == REDIS_REPLY_INTEGER
               ? r->element[i]->integer
               : -100;
}

void state_stream_event(struct gw_request *req, const char *id, const char *name, cJSON *data) {
    if (!http_stream_opened(req))
        http_stream_open(req, gone, handlers_config()->stream_user_timeout_ms);
    char *json = alloc_check(cJSON_PrintUnformatted(data));
    cJSON_Delete(data);
    char head[96];
    int n = id ? snprintf(head, sizeof head, "id: %s\nevent: %s\ndata: ", id, name)
               : snprintf(head, sizeof head, "event: %s\ndata: ", name);
    http_stream_write(req, head, (size_t)n);
    http_stream_write(req, json, strlen(json));
    http_stream_write(req, "\n\n", 2);
    free(json);
}

static void end(struct state_stream *s) {
    if (s->ended) return;
    s->ended = 1;
    waiters_unpark(&s->w);
    if (http_stream_opened(s->req))
        http_stream_end(s->req);
    else
        reply_problem(s->req, CODE_LOCK_BUSY, "the client went away while watching");
}

/* Parked until a change is announced, wake_ms, or the next heartbeat. */
static void park(struct state_stream *s, int64_t wake_ms) {
    int64_t beat = loop_now_ms() + handlers_config()->stream_heartbeat_ms;
    if (beat < wake_ms) wake_ms = beat;
    s->w.seen_seq = waiters_release_seq();
    if (park_request(s->req, &s->w, wake_ms) < 0) end(s);
}

static void read_done(void *arg, const struct redis_result *res) {
    struct state_stream *s = arg;
    s->calls--;
    if (s->orphan) {
        if (!s->calls) stream_free(s);
        return;
    }
    if (s->ended) return;
    if (http_client_gone(s->req)) {
        end(s);
        return;
    }
    long long verdict = elem(res, 0);
    int64_t now = loop_now_ms();
    if (verdict == -100) {
        if (!http_stream_opened(s->req)) {
            s->ended = 1;
            reply_problem(s->req, CODE_BACKEND_UNAVAILABLE, "Redis: %s",
                          res && !res->ok ? res->error : "an unexpected answer");
            return;
        }
        park(s, now + RETRY_MS); /* Redis away: try again */
        return;
    }
    long long index = verdict == 1 ? elem(res, 9) : 0;
    s->fn(s->req, res, index, s->arg);
    /* Open once Redis answered, even when fn sent nothing (a resume at the
     * current id): the client, or a proxy, sees the stream start. */
    if (!http_stream_opened(s->req))
        http_stream_open(s->req, gone, handlers_config()->stream_user_timeout_ms);
    if (index != s->after) { /* changed since the last read: no mark was set */
        s->after = index;
        attempt(s);
        return;
    }
    /* Marked: a change is announced and wakes it; an expiry is not, so
     * its timer is set to the lease's end. */
    int64_t wake = now + REARM_MS;
    if (verdict == 1 && now + elem(res, 4) + 2 < wake) wake = now + elem(res, 4) + 2;
    park(s, wake);
}

/* Quorum mode: held when a quorum of masters says so (the highest fence's
 * answer stands), else free; too few answers: a failure. */
static void read_all_done(void *arg, const struct redis_result *res, int n) {
    const struct redis_result *held = NULL, *free_ = NULL;
    int nheld = 0, answered = 0;
    for (int i = 0; i < n; i++) {
        long long v = elem(&res[i], 0);
        if (v == -100) continue;
        answered++;
        if (v == 1) {
            nheld++;
            if (!held || elem(&res[i], 3) > elem(held, 3)) held = &res[i];
        } else {
            free_ = &res[i];
        }
    }
    struct redis_result failed = {.ok = 0, .reply = NULL, .error = "too few masters answered"};
    if (answered < redis_quorum())
        read_done(arg, &failed);
    else
        read_done(arg, nheld >= redis_quorum() ? held : free_ ? free_ : held);
}

static void attempt(struct state_stream *s) {
    char after[24], left[24];
    snprintf(after, sizeof after, "%lld", s->after);
    snprintf(left, sizeof left, "%d", MARK_MS);
    const char *argv[] = {s->hash, after, left};
    size_t lens[3] = {strlen(s->hash), strlen(after), strlen(left)};
    s->calls++;
    backend->eval(SCRIPT_WATCH, 1, 3, argv, lens, read_done, read_all_done, s);
}

static void on_wake(struct waiter *w) {
    struct state_stream *s = (struct state_stream *)w;
    if (http_client_gone(s->req)) {
        end(s);
        return;
    }
    if (http_stream_opened(s->req)) http_stream_write(s->req, ":\n", 2);
    attempt(s);
}

static void on_give_up(struct waiter *w, int client_gone) { end((struct state_stream *)w); }

/* libmicrohttpd closed the connection (a write failed): as a hang-up. */
static void gone(struct gw_request *req) {
    struct state_stream *s = req->ctx;
    if (s->ended || !waiters_parked(&s->w)) return; /* an answer under way ends it */
    end(s);
}

static void ctx_free(void *ctx) {
    struct state_stream *s = ctx;
    waiters_unpark(&s->w);
    if (s->calls) {
        s->orphan = 1;
        return;
    }
    stream_free(s);
}

void state_stream_start(struct gw_request *req, const char *hash, const char *key,
                        state_stream_fn fn, void *arg, void (*free_arg)(void *)) {
    struct state_stream *s = alloc_check(calloc(1, sizeof *s));
    snprintf(s->hash, sizeof s->hash, "%s", hash);
    snprintf(s->key, sizeof s->key, "%s", key);
    s->req = req;
    s->after = -1;
    s->fn = fn;
    s->arg = arg;
    s->free_arg = free_arg;
    s->w.key = s->key;
    s->w.watch = 1;
    s->w.retry = on_wake;
    s->w.give_up = on_give_up;
    req->ctx = s;
    req->ctx_free = ctx_free;
    attempt(s);
}
