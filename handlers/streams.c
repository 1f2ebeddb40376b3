/* streams.c -- see streams.h.
 *
 * A stream hold is an ordinary acquisition (holds.c) bound to its
 * worker's session for its ttl (stream_session.c), whose waiting and grant
 * holds.c hands here instead of answering (hold_stream_ops).  Once granted,
 * the acquisition and the request are freed (detach): what the stream
 * still needs of them is in its struct stream_hold (its waiter, kind,
 * ttl, token, key id, quota entry, and the name in its waiter key), and
 * the stream goes on through the HTTP layer's detached handle
 * (http_stream_detach), since a stream hold lives as long as its
 * connection and 10,000 of them kept 10,000 acquisitions and requests of
 * about 400 and 480 bytes each (bench/RESULTS.md, "Stream holds:
 * memory").  The stream's own waiter is then parked as a watcher of
 * the name (waiters.h): it watches the client's socket for a hang-up, and is woken
 * by each announced change of the name (a forced release announces itself
 * always: lua/force.lua), when it asks Redis whether its token still
 * holds (extend.lua answers "bound to a session" for a live bound hold,
 * and changes nothing).  Nothing is sent to Redis per stream while nothing
 * happens: heartbeats are written by the gateway, renewal is the
 * session's. */
#include "handlers/streams.h"
#include "common/alloc.h"
#include "handlers/backend.h"
#include "handlers/handlers.h"
#include "handlers/holds.h"
#include "handlers/quota_holds.h"
#include "handlers/stream_session.h"
#include "handlers/verdict.h"
#include "server/http.h"
#include "server/log.h"
#include "server/loop.h"
#include "server/metrics.h"
#include "server/reply.h"
#include "server/waiters.h"

#include <cjson/cJSON.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char SSE[] = "text/event-stream";

/* A held stream's watcher wakes for announcements only: its timer is this
 * far off (re-armed when it comes). */
#define STREAM_WATCH_MS (3600 * 1000)
/* A probe Redis did not answer is tried again after this. */
#define STREAM_PROBE_RETRY_MS 1000

struct stream_hold {
    struct ss_member m;              /* its place in its session (first) */
    struct hold_call *hc;            /* the acquisition until the grant, then NULL
                                        (freed by detach) */
    struct gw_request *req;          /* the request it answers, NULL once detached */
    struct gw_stream *st;            /* its stream once detached (http.h), else NULL */
    char *token;                     /* once detached: the request's token, taken over */
    char *key_id;                    /* once detached: the request's key id, or NULL */
    struct waiter w;                 /* once granted: watches the hold (its client's
                                        hang-up, its name's changes) */
    struct stream_hold *prev, *next; /* the worker's open streams (heartbeats) */
    const char *granted_event;       /* "granted", or "elected" */
    char *quota_member;              /* its holds_at_once entry (quota_holds.h), taken
                                        from hc at the grant; NULL: none */
    long long ttl_ms;                /* hc's lease length, for the probes */
    int calls;                       /* Redis calls under way that name it */
    unsigned short name_skip;        /* bytes of req->name the events leave out */
    char kind;                       /* hc's (enum hold_kind) */
    char held;                       /* granted: the hold lives while the stream does */
    char ended;                      /* the request is completed (or being) */
    char orphan;                     /* freed (stream_hold_free) with calls under
                                        way: the last call's answer frees it */
    char listed;                     /* in the worker's list */
    char quota_left;                 /* its holds_at_once entry was dropped */
    char key[];                      /* w.key: "lock:NAME" or "sem:NAME" */
};

static struct stream_hold *hold_of_waiter(struct waiter *w) {
    return (struct stream_hold *)((char *)w - offsetof(struct stream_hold, w));
}

/* What it holds: the name (its waiter key's, after "lock:" or "sem:"),
 * the token and the API key's id, from its request until detached. */
static const char *hold_name(const struct stream_hold *sh) { return strchr(sh->key, ':') + 1; }
static const char *hold_token(const struct stream_hold *sh) {
    return sh->req ? sh->req->token : sh->token;
}
static const char *hold_key_id(const struct stream_hold *sh) {
    return sh->req ? sh->req->key_id : sh->key_id;
}

static int client_gone(struct stream_hold *sh) {
    return sh->req ? http_client_gone(sh->req) : http_detached_gone(sh->st);
}

/* ---- heartbeats: one timer per worker for all its streams ------------------------- */

struct ticker {
    struct waiter w;          /* its timer (first) */
    struct stream_hold *head; /* the worker's open streams */
};

static _Thread_local struct ticker ticker;
static const char TICKER_KEY[] = "~stream-heartbeat";

static void tick(struct waiter *w);
static void tick_give_up(struct waiter *w, int client_gone) {}

static void ticker_arm(void) {
    if (waiters_parked(&ticker.w) || !ticker.head) return;
    ticker.w.key = TICKER_KEY;
    ticker.w.watch = 1;
    ticker.w.fd = -1;
    ticker.w.retry = tick;
    ticker.w.give_up = tick_give_up;
    ticker.w.seen_seq = waiters_release_seq();
    waiters_park(&ticker.w, loop_now_ms() + handlers_config()->stream_heartbeat_ms);
}

/* A comment line on every open stream: proxies see bytes, and a host that
 * no longer acknowledges them meets its socket's TCP_USER_TIMEOUT. */
static void tick(struct waiter *w) {
    for (struct stream_hold *sh = ticker.head; sh; sh = sh->next) {
        if (sh->req)
            http_stream_comment(sh->req);
        else
            http_detached_comment(sh->st);
    }
    ticker_arm();
}

static void list_add(struct stream_hold *sh) {
    if (sh->listed) return;
    sh->listed = 1;
    sh->prev = NULL;
    sh->next = ticker.head;
    if (sh->next) sh->next->prev = sh;
    ticker.head = sh;
    ticker_arm();
}

static void list_remove(struct stream_hold *sh) {
    if (!sh->listed) return;
    sh->listed = 0;
    if (sh->prev)
        sh->prev->next = sh->next;
    else
        ticker.head = sh->next;
    if (sh->next) sh->next->prev = sh->prev;
    if (!ticker.head) waiters_unpark(&ticker.w);
}

/* ---- events ------------------------------------------------------------------------ */

static void on_gone(struct gw_request *req);
static void quota_leave(struct stream_hold *sh);

static void event(struct stream_hold *sh, const char *name, cJSON *data) {
    if (sh->req && !http_stream_opened(sh->req)) {
        http_stream_open(sh->req, on_gone, handlers_config()->stream_user_timeout_ms);
        list_add(sh);
    }
    char *json = alloc_check(cJSON_PrintUnformatted(data));
    cJSON_Delete(data);
    if (sh->req)
        http_stream_event(sh->req, NULL, name, json);
    else
        http_detached_event(sh->st, name, json);
    free(json);
}

/* The request is completed; sh may be freed by the time this returns. */
static void end_stream(struct stream_hold *sh) {
    if (sh->ended) return;
    sh->ended = 1;
    list_remove(sh);
    stream_session_leave(&sh->m);
    if (sh->hc) waiters_unpark(&sh->hc->w);
    waiters_unpark(&sh->w);
    if (!sh->req)
        http_detached_end(sh->st);
    else if (http_stream_opened(sh->req))
        http_stream_end(sh->req);
    else
        reply_problem(sh->req, CODE_LOCK_BUSY, "the client went away");
}

static void lose(struct stream_hold *sh, const char *reason) {
    if (sh->ended) return;
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "name", hold_name(sh) + sh->name_skip);
    cJSON_AddStringToObject(o, "token", hold_token(sh));
    cJSON_AddStringToObject(o, "reason", reason);
    event(sh, "lost", o);
    if (sh->held) quota_leave(sh);
    metrics_inc(M_STREAM_LOST, 1);
    log_info("streams: '%s' lost: %s", hold_name(sh), reason);
    end_stream(sh);
}

/* ---- the held phase ------------------------------------------------------------------ */

/* Its key's holds_at_once ledger (quota_holds.h) no longer counts it. */
static void quota_leave(struct stream_hold *sh) {
    if (!sh->quota_member || sh->quota_left) return;
    sh->quota_left = 1;
    const char *m[1] = {sh->quota_member};
    quota_holds_drop(hold_key_id(sh), 1, m);
}

/* release.lua with its token: the next waiter is woken. */
static void give_back(struct stream_hold *sh) {
    hold_give_back_token(hold_name(sh), hold_token(sh), sh->kind == HOLD_PERMIT);
}

static void release_hold(struct stream_hold *sh) {
    give_back(sh);
    metrics_inc(M_LOCK_RELEASED, 1);
    quota_leave(sh);
}

/* The client left (client_gone), or the gateway stops. */
static void held_give_up(struct waiter *w, int client_gone) {
    struct stream_hold *sh = hold_of_waiter(w);
    if (sh->ended) return;
    release_hold(sh);
    if (client_gone)
        end_stream(sh);
    else
        lose(sh, "shutting_down: the gateway is stopping; the hold was released");
}

static void held_wake(struct waiter *w);

static void watch_hold(struct stream_hold *sh, int64_t wake_ms) {
    sh->w.key = sh->key;
    sh->w.watch = 1;
    sh->w.retry = held_wake;
    sh->w.give_up = held_give_up;
    sh->w.seen_seq = waiters_release_seq();
    if (http_detached_gone(sh->st)) {
        held_give_up(&sh->w, 1);
        return;
    }
    sh->w.fd = http_detached_fd(sh->st);
    waiters_park(&sh->w, wake_ms);
}

static void free_hold(struct stream_hold *sh) {
    free(sh->quota_member);
    free(sh->token);
    free(sh->key_id);
    free(sh);
}

static void probe_done(void *arg, const struct redis_result *res) {
    struct stream_hold *sh = arg;
    sh->calls--;
    if (sh->orphan) {
        if (!sh->calls) free_hold(sh);
        return;
    }
    if (sh->ended) return;
    if (client_gone(sh)) {
        held_give_up(&sh->w, 1);
        return;
    }
    long long v[6] = {0};
    const char *err;
    long long verdict = verdict_parse(res, v, 6, &err);
    if (verdict == VERDICT_SESSION_BOUND) { /* still held, by its session */
        watch_hold(sh, loop_now_ms() + STREAM_WATCH_MS);
    } else if (verdict == VERDICT_ERROR) {
        watch_hold(sh, loop_now_ms() + STREAM_PROBE_RETRY_MS);
    } else {
        lose(sh, "released: the hold ended without this stream (a forced release, a release "
                 "or resignation with its token, or its lease ran out)");
    }
}

/* Its name changed (or its timer came): does its token still hold? */
static void held_wake(struct waiter *w) {
    struct stream_hold *sh = hold_of_waiter(w);
    if (sh->ended) return;
    struct hold_keys k;
    hold_keys(hold_name(sh), sh->kind == HOLD_PERMIT, &k);
    char ttl[24];
    snprintf(ttl, sizeof ttl, "%lld", sh->ttl_ms);
    const char *argv[] = {k.hash, hold_token(sh), ttl};
    size_t lens[3] = {strlen(argv[0]), strlen(argv[1]), strlen(argv[2])};
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    sh->calls++;
    backend->extend(3, argv, lens, (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec, probe_done, sh);
}

/* ---- holds.c's hooks ------------------------------------------------------------------ */

static const char *busy_state(long long why) {
    return why == 3 ? "queued" : why == 2 ? "lock_delay" : "held";
}

static void on_waiting(struct hold_call *hc, long long retry_after_ms, long long why) {
    struct stream_hold *sh = hc->stream_arg;
    int64_t now = loop_now_ms();
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "name", sh->req->name + sh->name_skip);
    cJSON_AddStringToObject(o, "state", busy_state(why));
    json_add_int(o, "waited_ms", now - hc->start_ms);
    json_add_int(o, "wait_left_ms", hc->deadline_ms > now ? hc->deadline_ms - now : 0);
    json_add_int(o, "retry_after_ms", retry_after_ms);
    event(sh, "waiting", o);
}

/* It is freed with its request (hold_call_free calls on_free) until
 * detached, then with its stream (http_stream_detach's on_end). */
static void stream_hold_free(void *arg) {
    struct stream_hold *sh = arg;
    if (sh->hc) waiters_unpark(&sh->hc->w);
    waiters_unpark(&sh->w);
    list_remove(sh);
    stream_session_leave(&sh->m);
    if (sh->calls)
        sh->orphan = 1;
    else
        free_hold(sh);
}

/* libmicrohttpd closed a detached stream's connection: as a hang-up. */
static void detached_gone(void *arg) {
    struct stream_hold *sh = arg;
    if (sh->ended || !waiters_parked(&sh->w)) return; /* an answer under way acts on it */
    waiters_unpark(&sh->w);
    sh->w.give_up(&sh->w, 1);
}

/* Granted: the acquisition and the request are done with, and are freed
 * now (the request once the stream's head is out: http_stream_detach)
 * instead of living as long as the connection; sh takes over the token
 * and the key id.  holds.c reads nothing of hc after its granted hook
 * returns (nor do the backends after hold_attempt_done), which is what
 * makes this safe inside that hook. */
static void detach(struct stream_hold *sh) {
    struct hold_call *hc = sh->hc;
    struct gw_request *req = sh->req;
    waiters_unpark(&hc->w);
    hc->stream = NULL; /* hold_call_free leaves sh alone */
    hc->req = NULL;
    sh->hc = NULL;
    sh->token = req->token;
    req->token = NULL;
    sh->key_id = req->key_id;
    req->key_id = NULL;
    sh->req = NULL;
    sh->st = http_stream_detach(req, detached_gone, stream_hold_free, sh); /* req may be freed */
    hold_call_free(hc);
}

static void on_granted(struct hold_call *hc, long long verdict, cJSON *body) {
    struct stream_hold *sh = hc->stream_arg;
    sh->quota_member = hc->quota_member; /* dropped by quota_leave, freed with sh */
    hc->quota_member = NULL;
    if (http_client_gone(sh->req)) { /* nobody to hold it for */
        cJSON_Delete(body);
        if (hold_gives_back(hc, verdict)) release_hold(sh);
        end_stream(sh);
        return;
    }
    sh->held = 1;
    event(sh, sh->granted_event, body);
    detach(sh);
    watch_hold(sh, loop_now_ms() + STREAM_WATCH_MS);
}

static void on_free(struct hold_call *hc) { stream_hold_free(hc->stream_arg); }

static const struct hold_stream_ops ops = {
    .waiting = on_waiting,
    .granted = on_granted,
    .free = on_free,
};

/* libmicrohttpd closed the connection (a write failed) before the grant:
 * as a hang-up.  (Once granted, detached_gone.) */
static void on_gone(struct gw_request *req) {
    struct hold_call *hc = req->ctx;
    struct stream_hold *sh = hc->stream_arg;
    if (sh->ended || !waiters_parked(&hc->w)) return; /* an answer under way acts on it */
    waiters_unpark(&hc->w);
    hc->w.give_up(&hc->w, 1);
}

/* ---- the session, then the acquisition ----------------------------------------------- */

/* Its session ended under it: the gateway stops, or Redis lost the session
 * or no renewal reached it in time.  The hold carries its session's lease
 * in its own hash (key layout 2), so the session's end does not end it: it
 * is given back here, or it would outlive its stream by up to ttl_ms (at
 * a stop, the session's timer, due sooner, is given up before the hold's
 * own watcher, which lose() then unparks).  A give-back that finds it gone
 * changes nothing.  Still waiting: its next attempt finds the session
 * ended and says so. */
static void session_lost(struct ss_member *m, const char *reason) {
    struct stream_hold *sh = (struct stream_hold *)m;
    if (!sh->held) return;
    give_back(sh);
    lose(sh, reason);
}

static void session_ready(struct ss_member *m, const char *token, const char *why) {
    struct stream_hold *sh = (struct stream_hold *)m;
    struct gw_request *req = sh->req;
    if (!token) {
        reply_problem(req, CODE_BACKEND_UNAVAILABLE, "Redis: the stream session: %s", why);
        return;
    }
    if (http_client_gone(req)) {
        sh->ended = 1;
        stream_session_leave(&sh->m);
        reply_problem(req, CODE_LOCK_BUSY, "the client went away");
        return;
    }
    sh->hc->session = alloc_check(strdup(token));
    hold_acquire(req, sh->hc);
}

int stream_asked(const struct gw_request *req) { return req->media && !strcmp(req->media, SSE); }

void stream_hold_start(struct gw_request *req, struct hold_call *hc) {
    stream_hold_start_as(req, hc, "granted", 0);
}

void stream_hold_start_as(struct gw_request *req, struct hold_call *hc, const char *granted_event,
                          size_t name_skip) {
    req->ctx = hc;
    req->ctx_free = hold_call_free;
    if (http_header(req, "Session")) {
        reply_problem(req, CODE_INVALID_REQUEST,
                      "a hold bound to its connection (text/event-stream) cannot also be bound "
                      "to a session");
        return;
    }
    size_t key_len = strlen(hc->w.key);
    struct stream_hold *sh =
        alloc_check(calloc(1, offsetof(struct stream_hold, key) + key_len + 1));
    memcpy(sh->key, hc->w.key, key_len + 1);
    sh->w.fd = -1;
    sh->kind = hc->kind;
    sh->ttl_ms = hc->ttl_ms;
    sh->hc = hc;
    sh->req = req;
    sh->granted_event = granted_event;
    sh->name_skip = (unsigned short)name_skip; /* a prefix of a name: short */
    sh->m.ready = session_ready;
    sh->m.lost = session_lost;
    hc->stream = &ops;
    hc->stream_arg = sh;
    metrics_inc(M_STREAM_HOLDS, 1);
    stream_session_join(&sh->m, hc->ttl_ms);
}
