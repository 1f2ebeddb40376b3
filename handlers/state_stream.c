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
/* Entries read at once; a stream further behind reads again at once. */
#define READ_MAX 128
#define ID_MAX   48
struct state_stream {
    struct waiter w;         /* watches the name (first) */
    struct gw_request *req;  /* the stream's request */
    char hash[HOLD_KEY_MAX]; /* the name's hash */
    char key[HOLD_KEY_MAX];  /* "lock:NAME", as published */
    char after[ID_MAX];      /* the last entry sent ("": none yet) */
    state_stream_fn fn;      /* what to send for a state */
    void *arg;               /* fn's */
    void (*free_arg)(void *);
    int calls;  /* watch_log.lua calls under way */
    int orphan; /* the request was freed: the answer frees this */
    int ended;  /* the request is completed */
};

static void attempt(struct state_stream *s);
static void gone(struct gw_request *req);

static void stream_free(struct state_stream *s) {
    if (s->free_arg) s->free_arg(s->arg);
    free(s);
}

void state_stream_event(struct gw_request *req, const char *id, const char *name, cJSON *data) {
    if (!http_stream_opened(req))
        http_stream_open(req, gone, handlers_config()->stream_user_timeout_ms);
    char *json = alloc_check(cJSON_PrintUnformatted(data));
    cJSON_Delete(data);
    http_stream_event(req, id, name, json);
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

/* Parked until a change is announced, wake_ms, or the next heartbeat.
 * An announcement since the read began (w.seen_seq, set by attempt)
 * wakes it at once. */
static void park(struct state_stream *s, int64_t wake_ms) {
    int64_t beat = loop_now_ms() + handlers_config()->stream_heartbeat_ms;
    if (beat < wake_ms) wake_ms = beat;
    if (park_request(s->req, &s->w, wake_ms) < 0) end(s);
}

static void send_gap(struct state_stream *s) {
    cJSON *gap = cJSON_CreateObject();
    cJSON_AddStringToObject(gap, "name", s->req->name);
    cJSON_AddStringToObject(gap, "last_event_id", s->after);
    cJSON_AddStringToObject(gap, "detail",
                            "changes after last_event_id are no longer kept: the current state "
                            "follows");
    state_stream_event(s->req, NULL, "gap", gap);
}

/* watch_log.lua's answer: {contiguous, ttl_left, entry...}, each entry
 * {id, u, state}.  Each entry is sent in order, a gap event first when
 * the stream had a place in the log and the log lost what followed it. */
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
    long long contiguous = redis_reply_int(REDIS_ANSWER(res), 0, -100),
              left = redis_reply_int(REDIS_ANSWER(res), 1, -100);
    int64_t now = loop_now_ms();
    if (contiguous == -100 || left == -100) {
        if (!http_stream_opened(s->req)) {
            s->ended = 1;
            reply_problem(s->req, CODE_BACKEND_UNAVAILABLE, "Redis: %s",
                          res && !res->ok ? res->error : "an unexpected answer");
            return;
        }
        park(s, now + RETRY_MS); /* Redis away: try again */
        return;
    }
    const redisReply *r = res->reply;
    for (size_t i = 2; i < r->elements; i++) {
        const redisReply *e = r->element[i];
        if (e->type != REDIS_REPLY_ARRAY || e->elements < 2 ||
            e->element[0]->type != REDIS_REPLY_STRING || e->element[0]->len >= ID_MAX)
            continue;
        long long u = e->element[1]->type == REDIS_REPLY_INTEGER ? e->element[1]->integer : 0;
        if (s->after[0] && (!contiguous || u == 1)) send_gap(s);
        snprintf(s->after, sizeof s->after, "%s", e->element[0]->str);
        if (e->elements < 3) continue;
        struct redis_result state = {.ok = 1, .reply = e->element[2], .error = NULL};
        s->fn(s->req, &state, s->after, s->arg);
    }
    /* Open once Redis answered, even when nothing was sent (a resume at
     * the last entry): a comment line goes with the headers (libmicrohttpd
     * sends them with the first bytes), so that the client, or a proxy, sees it. */
    if (!http_stream_opened(s->req)) {
        http_stream_open(s->req, gone, handlers_config()->stream_user_timeout_ms);
        http_stream_write(s->req, ":\n", 2);
    }
    if (r->elements >= 2 + READ_MAX) { /* further behind: read on */
        attempt(s);
        return;
    }
    /* Marked: a change is logged and announced, which wakes it; an expiry
     * is not, so its timer is set to the lease's end. */
    int64_t wake = now + REARM_MS;
    if (left >= 0 && now + left + 2 < wake) wake = now + left + 2;
    park(s, wake);
}

/* Quorum mode: each master keeps its own log, whose ids are its own; the
 * first master (in --redis order) that answers stands for them, so that
 * ids stay those of one log while it answers.  When another one stands
 * in, the ids the stream sent are not in its log: a gap event says so and
 * its current state follows. */
static void read_all_done(void *arg, const struct redis_result *res, int n) {
    for (int i = 0; i < n; i++)
        if (redis_reply_int(REDIS_ANSWER(&res[i]), 0, -100) != -100) {
            read_done(arg, &res[i]);
            return;
        }
    struct redis_result failed = {.ok = 0, .reply = NULL, .error = "no master answered"};
    read_done(arg, &failed);
}

static void attempt(struct state_stream *s) {
    char mark[24], max[24];
    snprintf(mark, sizeof mark, "%d", MARK_MS);
    snprintf(max, sizeof max, "%d", READ_MAX);
    const char *argv[] = {s->hash, s->after, mark, max};
    size_t lens[4] = {strlen(s->hash), strlen(s->after), strlen(mark), strlen(max)};
    s->calls++;
    s->w.seen_seq = waiters_release_seq();
    backend->eval(SCRIPT_WATCH_LOG, 1, 4, argv, lens, read_done, read_all_done, s);
}

static void on_wake(struct waiter *w) {
    struct state_stream *s = (struct state_stream *)w;
    if (http_client_gone(s->req)) {
        end(s);
        return;
    }
    if (http_stream_opened(s->req)) http_stream_comment(s->req);
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

int state_stream_id_ok(const char *s) {
    size_t n = strlen(s), digits = strspn(s, "0123456789");
    if (!digits || digits > 20 || n >= ID_MAX) return 0;
    if (digits == n) return 1;
    size_t seq = strspn(s + digits + 1, "0123456789");
    return s[digits] == '-' && seq && seq <= 20 && digits + 1 + seq == n;
}

void state_stream_start(struct gw_request *req, const char *hash, const char *key,
                        const char *resume, state_stream_fn fn, void *arg,
                        void (*free_arg)(void *)) {
    struct state_stream *s = alloc_check(calloc(1, sizeof *s));
    snprintf(s->hash, sizeof s->hash, "%s", hash);
    snprintf(s->key, sizeof s->key, "%s", key);
    snprintf(s->after, sizeof s->after, "%s", resume ? resume : "");
    s->req = req;
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
