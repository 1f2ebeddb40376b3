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
/* A prefix stream: names it saw held whose lease end it watches for, and
 * how many it reads at once when their leases end. */
#define EXPIRY_MAX   256
#define EXPIRY_BATCH 32
#define PFX_KEY_MAX  (GW_PREFIX_MAX + NAME_MAX_LEN + 16)

/* A name a prefix stream saw held, and when its lease ends at the latest. */
struct expiry {
    char name[NAME_MAX_LEN + 1];
    int64_t end_ms;
    int64_t ttl_ms;
};

struct state_stream {
    struct waiter w;            /* watches the name (first) */
    struct gw_request *req;     /* the stream's request */
    char hash[HOLD_KEY_MAX];    /* the name's hash */
    char log[HOLD_KEY_MAX + 8]; /* its change log, <hash>:log */
    char key[HOLD_KEY_MAX];     /* "lock:NAME", as published */
    char after[ID_MAX];         /* the last entry sent ("": none yet) */
    /* A prefix stream (prefix set): its mark "KIND:PREFIX" (key, as
     * published, is "pfx:" and it), its channel, kind and the names whose
     * lease end it watches for. */
    int prefix;
    int semaphore;
    char mark[NAME_MAX_LEN + 8];
    char channel[PFX_KEY_MAX];
    struct expiry *exp;
    int nexp;
    state_stream_fn fn; /* what to send for a state */
    void *arg;          /* fn's */
    void (*free_arg)(void *);
    int calls;  /* watch_log.lua calls under way */
    int orphan; /* the request was freed: the answer frees this */
    int ended;  /* the request is completed */
};

static void attempt(struct state_stream *s);
static void gone(struct gw_request *req);

static void stream_free(struct state_stream *s) {
    if (s->free_arg) s->free_arg(s->arg);
    free(s->exp);
    free(s);
}

/* A prefix stream: note name's lease end (ttl_ms from now; < 0: free). */
static void expiry_note(struct state_stream *s, const char *name, long long ttl_ms) {
    int i = 0;
    while (i < s->nexp && strcmp(s->exp[i].name, name) != 0) i++;
    if (ttl_ms < 0) {
        if (i < s->nexp) s->exp[i] = s->exp[--s->nexp];
        return;
    }
    if (i == s->nexp) {
        if (s->nexp == EXPIRY_MAX) return; /* found by the next script on it */
        if (!s->exp) s->exp = alloc_check(calloc(EXPIRY_MAX, sizeof *s->exp));
        snprintf(s->exp[s->nexp++].name, NAME_MAX_LEN + 1, "%s", name);
    }
    s->exp[i].ttl_ms = ttl_ms;
    s->exp[i].end_ms = loop_now_ms() + ttl_ms + 2;
}

static int64_t expiry_next(const struct state_stream *s, int64_t wake) {
    for (int i = 0; i < s->nexp; i++)
        if (s->exp[i].end_ms < wake) wake = s->exp[i].end_ms;
    return wake;
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
    if (s->prefix)
        cJSON_AddStringToObject(gap, "prefix", strchr(s->mark, ':') + 1);
    else
        cJSON_AddStringToObject(gap, "name", s->req->name);
    cJSON_AddStringToObject(gap, "last_event_id", s->after);
    cJSON_AddStringToObject(gap, "detail",
                            s->prefix ? "changes after last_event_id are no longer kept: list the "
                                        "prefix again (GET without text/event-stream)"
                                      : "changes after last_event_id are no longer kept: the "
                                        "current state follows");
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
    long long contiguous = elem(res, 0), left = elem(res, 1);
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
        if (u == 2 || e->elements < 3) continue; /* a place in the log, no change */
        struct redis_result state = {.ok = 1, .reply = e->element[2], .error = NULL};
        const char *name = s->req->name;
        if (s->prefix) {
            if (e->elements < 4 || e->element[3]->type != REDIS_REPLY_STRING) continue;
            name = e->element[3]->str;
            expiry_note(s, name, elem(&state, 0) == 1 ? elem(&state, 4) : -1);
        }
        s->fn(s->req, &state, s->after, name, s->arg);
    }
    /* Open once Redis answered, even when nothing was sent (a resume at
     * the last entry, a prefix stream): a comment line goes with the
     * headers, so that the client, or a proxy, sees the stream start. */
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
    park(s, expiry_next(s, wake));
}

/* Quorum mode: each master keeps its own log, whose ids are its own; the
 * first master (in --redis order) that answers stands for them, so that
 * ids stay those of one log while it answers.  When another one stands
 * in, the ids the stream sent are not in its log: a gap event says so and
 * its current state follows. */
static void read_all_done(void *arg, const struct redis_result *res, int n) {
    for (int i = 0; i < n; i++)
        if (elem(&res[i], 0) != -100) {
            read_done(arg, &res[i]);
            return;
        }
    struct redis_result failed = {.ok = 0, .reply = NULL, .error = "no master answered"};
    read_done(arg, &failed);
}

/* A prefix stream's read: its log, and the names whose lease has ended
 * since it saw them held (each read, so that its expiry is logged; a name
 * still held is looked at again one of its leases later). */
static void attempt_prefix(struct state_stream *s) {
    char mark[24], max[24];
    snprintf(mark, sizeof mark, "%d", MARK_MS);
    snprintf(max, sizeof max, "%d", READ_MAX);
    const char *cfg_prefix = handlers_config()->key_prefix;
    char keys[2 + EXPIRY_BATCH][PFX_KEY_MAX];
    snprintf(keys[0], PFX_KEY_MAX, "%spw", cfg_prefix);
    snprintf(keys[1], PFX_KEY_MAX, "%splog:%s", cfg_prefix, s->mark);
    int nkeys = 2;
    int64_t now = loop_now_ms();
    for (int i = 0; i < s->nexp && nkeys < 2 + EXPIRY_BATCH; i++)
        if (s->exp[i].end_ms <= now) {
            snprintf(keys[nkeys++], PFX_KEY_MAX, "%s%s:{%s}", cfg_prefix,
                     s->semaphore ? "sem" : "lock", s->exp[i].name);
            s->exp[i].end_ms = now + (s->exp[i].ttl_ms > 1000 ? s->exp[i].ttl_ms : 1000);
        }
    const char *argv[2 + EXPIRY_BATCH + 4];
    size_t lens[2 + EXPIRY_BATCH + 4];
    for (int i = 0; i < nkeys; i++) {
        argv[i] = keys[i];
        lens[i] = strlen(keys[i]);
    }
    const char *args[4] = {s->mark, s->after, mark, max};
    for (int i = 0; i < 4; i++) {
        argv[nkeys + i] = args[i];
        lens[nkeys + i] = strlen(args[i]);
    }
    s->calls++;
    s->w.seen_seq = waiters_release_seq();
    backend->eval(SCRIPT_WATCH_PREFIX, nkeys, nkeys + 4, argv, lens, read_done, read_all_done, s);
}

static void attempt(struct state_stream *s) {
    if (s->prefix) {
        attempt_prefix(s);
        return;
    }
    char mark[24], max[24];
    snprintf(mark, sizeof mark, "%d", MARK_MS);
    snprintf(max, sizeof max, "%d", READ_MAX);
    const char *argv[] = {s->hash, s->log, s->after, mark, max};
    size_t lens[5] = {strlen(s->hash), strlen(s->log), strlen(s->after), strlen(mark), strlen(max)};
    s->calls++;
    s->w.seen_seq = waiters_release_seq();
    backend->eval(SCRIPT_WATCH_LOG, 2, 5, argv, lens, read_done, read_all_done, s);
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
    if (s->prefix) redis_channel_hold(s->channel, 0);
    if (s->calls) {
        s->orphan = 1;
        return;
    }
    stream_free(s);
}

void state_stream_start_prefix(struct gw_request *req, int semaphore, const char *prefix,
                               const char *resume, state_stream_fn fn, void *arg,
                               void (*free_arg)(void *)) {
    struct state_stream *s = alloc_check(calloc(1, sizeof *s));
    s->prefix = 1;
    s->semaphore = semaphore;
    snprintf(s->mark, sizeof s->mark, "%s:%s", semaphore ? "sem" : "lock", prefix);
    snprintf(s->key, sizeof s->key, "pfx:%s", s->mark);
    snprintf(s->channel, sizeof s->channel, "%spfx:%s", handlers_config()->key_prefix, s->mark);
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
    redis_channel_hold(s->channel, 1);
    attempt(s);
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
    snprintf(s->log, sizeof s->log, "%s:log", hash);
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
