/* sessions.c -- /v1/sessions: one lease that many holds share.
 *
 * A session is one Redis hash (lua/_holders.lua, "sessions"): its end, ttl,
 * lock-delay and owner, and one field per hold bound to it.  A hold taken
 * with `Session: <token>` (holds.c) carries the session's lease in its own
 * hash, so an expired session's holds are free for the next acquire
 * without anyone releasing them, and no script reads a key it did not
 * declare.  A renewal, end or read acts on the session's key, then goes on
 * to its holds (sessions_fan.c), the same in every mode.
 *
 * Quorum mode keeps a copy of the session on every master, like any hold:
 * a create or renew counts when a quorum did it, an end when any master
 * ended it (as a release), a read when a quorum knows the session.
 *
 * Redis Cluster keeps the session's key and its holds in different slots:
 * there a session-bound acquire takes three calls (sessions_cluster.c). */
#include "common/alloc.h"
#include "common/token.h"
#include "handlers/access.h"
#include "handlers/backend.h"
#include "handlers/quota_holds.h"
#include "server/auth.h"
#include "handlers/guard.h"
#include "handlers/handlers.h"
#include "handlers/session_ref.h"
#include "handlers/sessions_fan.h"
#include "server/body.h"
#include "server/http.h"
#include "server/redis.h"
#include "server/reply.h"

#include <cjson/cJSON.h>
#include <hiredis/hiredis.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The {token} path parameter into req->token, or 404 session_not_found
 * (a malformed token names no session). */
static int path_token_or_reply(struct gw_request *req) {
    size_t len = req->match.param_len[0];
    char tok[TOKEN_MAX_LEN + 1];
    if (len > TOKEN_MAX_LEN) len = TOKEN_MAX_LEN + 1;
    if (len <= TOKEN_MAX_LEN) {
        memcpy(tok, req->match.param[0], len);
        tok[len] = '\0';
    }
    if (len > TOKEN_MAX_LEN || !token_valid(tok)) {
        reply_problem(req, CODE_SESSION_NOT_FOUND,
                      "a session token is %d-%d characters of [A-Za-z0-9_-]", TOKEN_MIN_LEN,
                      TOKEN_MAX_LEN);
        return GW_REPLIED;
    }
    req->token = alloc_copy(tok, len);
    return GW_OK;
}

/* A script's verdict other than 1: -2 another key's session (403), else
 * none by that token (404). */
static void reply_gone(struct gw_request *req, long long verdict) {
    if (verdict == -2) {
        access_refuse_session(req);
        return;
    }
    reply_problem(req, CODE_SESSION_NOT_FOUND, "no session '%s' (ended or expired)", req->token);
}

/* The first integer of a script's array reply, -100 when Redis failed. */
static long long verdict_of(const struct redis_result *res) {
    if (!res->ok || res->reply->type != REDIS_REPLY_ARRAY || res->reply->elements < 1 ||
        res->reply->element[0]->type != REDIS_REPLY_INTEGER)
        return -100;
    return res->reply->element[0]->integer;
}

/* Quorum mode: the answer that stands for all: one with verdict 1 when at
 * least `want` masters gave 1, else a -1 when a quorum answered, else a
 * failure (ok 0). */
static const struct redis_result *pick(const struct redis_result *res, int n, int want,
                                       struct redis_result *slot) {
    int ok = 0, answered = 0;
    const struct redis_result *good = NULL, *gone = NULL;
    for (int i = 0; i < n; i++) {
        long long v = verdict_of(&res[i]);
        if (v == -100) continue;
        answered++;
        if (v == 1) {
            ok++;
            if (!good) good = &res[i];
        } else if (!gone) {
            gone = &res[i];
        }
    }
    if (ok >= want) return good;
    if (answered >= redis_quorum() && gone) return gone;
    *slot =
        (struct redis_result){.ok = 0, .reply = NULL, .error = "too few Redis masters answered"};
    return slot;
}


/* Runs script id (at most 4 args) on the session's key, on every master in quorum mode,
 * and calls done with the result that stands for them (pick: `want`
 * masters must succeed; 0 means a quorum). */
struct session_call {
    /* res: the answer that stands for all; all[0..n): every master's (res
     * alone outside quorum mode), for the lists of holds (sessions_fan.h). */
    void (*done)(struct gw_request *req, const struct redis_result *res,
                 const struct redis_result *all, int n);
    struct gw_request *req;
    int want;
};

static void answered(struct session_call *sc, const struct redis_result *res,
                     const struct redis_result *all, int n) {
    if (!res->ok) {
        reply_problem(sc->req, CODE_BACKEND_UNAVAILABLE, "Redis: %s", res->error);
    } else if (verdict_of(res) == -100) {
        reply_problem(sc->req, CODE_BACKEND_UNAVAILABLE, "Redis gave an unexpected answer");
    } else {
        sc->done(sc->req, res, all, n);
    }
    free(sc);
}

static void one_done(void *arg, const struct redis_result *res) { answered(arg, res, res, 1); }

static void all_done(void *arg, const struct redis_result *res, int n) {
    struct session_call *sc = arg;
    struct redis_result slot;
    answered(sc, pick(res, n, sc->want ? sc->want : redis_quorum(), &slot), res, n);
}

static void session_run(struct gw_request *req, enum script_id id, int nargs,
                        const char *const *args, int want,
                        void (*done)(struct gw_request *, const struct redis_result *,
                                     const struct redis_result *, int)) {
    char key[GW_PREFIX_MAX + TOKEN_MAX_LEN + 16];
    session_key(req->token, key, sizeof key);
    const char *argv[5] = {key};
    size_t lens[5] = {strlen(key)};
    for (int i = 0; i < nargs; i++) {
        argv[i + 1] = args[i];
        lens[i + 1] = strlen(args[i]);
    }
    struct session_call *sc = alloc_check(calloc(1, sizeof *sc));
    sc->done = done;
    sc->req = req;
    sc->want = want;
    backend->eval(id, 1, nargs + 1, argv, lens, one_done, all_done, sc);
}

/* ---- replica acknowledgement ----------------------------------------------------
 * With --min-replicas-ack a created or renewed session is answered once
 * WAIT says enough replicas have it, else 503: after a failover the
 * session could otherwise be gone, or end sooner, with its holds. */

struct acked_reply {
    int status;  /* the answer to give when acknowledged */
    cJSON *body; /* its body */
};

static void acked_free(void *ctx) {
    struct acked_reply *a = ctx;
    cJSON_Delete(a->body);
    free(a);
}

static void ack_done(void *arg, const struct redis_result *res) {
    struct gw_request *req = arg;
    struct acked_reply *a = req->ctx;
    long long acked = res->ok && res->reply->type == REDIS_REPLY_INTEGER ? res->reply->integer : -1;
    int wanted = handlers_config()->min_replicas_ack;
    if (acked < wanted) {
        reply_problem(req, CODE_BACKEND_UNAVAILABLE,
                      "the session was written, but only %lld of %d replicas acknowledged it",
                      acked < 0 ? 0 : acked, wanted);
        return;
    }
    cJSON *body = a->body;
    a->body = NULL;
    reply_json(req, a->status, body);
}

static void reply_acked(struct gw_request *req, int status, cJSON *body) {
    int wanted = handlers_config()->min_replicas_ack; /* refused with quorum (config.c) */
    if (!wanted) {
        reply_json(req, status, body);
        return;
    }
    struct acked_reply *a = alloc_check(calloc(1, sizeof *a));
    a->status = status;
    a->body = body;
    req->ctx = a;
    req->ctx_free = acked_free;
    char n[16], timeout[16];
    snprintf(n, sizeof n, "%d", wanted);
    snprintf(timeout, sizeof timeout, "%d", handlers_config()->replica_ack_timeout_ms);
    const char *argv[3] = {"WAIT", n, timeout};
    size_t lens[3] = {4, strlen(n), strlen(timeout)};
    char key[GW_PREFIX_MAX + TOKEN_MAX_LEN + 16];
    session_key(req->token, key, sizeof key); /* in cluster mode, its master's */
    redis_command_for(key, 3, argv, lens, ack_done, req);
}

/* ---- POST /v1/sessions ------------------------------------------------------------ */

static void created(struct gw_request *req, const struct redis_result *res,
                    const struct redis_result *all, int n) {
    if (verdict_of(res) != 1) {
        reply_problem(req, CODE_INVALID_TOKEN, "a session with this token exists");
        return;
    }
    cJSON *o = req->ctx;
    req->ctx = NULL; /* reply_acked takes it over */
    char location[TOKEN_MAX_LEN + 24];
    snprintf(location, sizeof location, "/v1/sessions/%s", req->token);
    reply_header(req, "Session", req->token);
    reply_header(req, "Location", location);
    reply_acked(req, 201, o);
}

static void json_free(void *ctx) { cJSON_Delete(ctx); }

void sessions_create(struct gw_request *req) {
    long long ttl, delay;
    const char *owner;
    if (body_parse_or_reply(req) ||
        body_int_or_reply(req, "ttl_ms", guard_default_lease_ms(), 100, guard_max_lease_ms(), &ttl,
                          NULL) ||
        body_int_or_reply(req, "lock_delay_ms", 0, 0, 60000, &delay, NULL) ||
        body_string_or_reply(req, "owner", NAME_MAX_LEN, &owner) || guard_grant_or_reply(req))
        return;
    token_issue(req);
    char t[24], d[24];
    snprintf(t, sizeof t, "%lld", ttl);
    snprintf(d, sizeof d, "%lld", delay);
    /* The answer's body, kept until Redis has answered. */
    cJSON *o = alloc_check(cJSON_CreateObject());
    cJSON_AddStringToObject(o, "token", req->token);
    json_add_int(o, "ttl_ms", ttl);
    json_add_int(o, "lock_delay_ms", delay);
    if (owner && owner[0]) cJSON_AddStringToObject(o, "owner", owner);
    req->ctx = o;
    req->ctx_free = json_free;
    const char *args[4] = {t, d, owner ? owner : "", req->key_id ? req->key_id : ""};
    session_run(req, SCRIPT_SESSION_CREATE, 4, args, 0, created);
}

/* ---- PATCH /v1/sessions/{token} ----------------------------------------------------- */

/* The session moved, then its holds. */
static void renew_pushed(struct gw_request *req, const struct session_fan *f, cJSON *o) {
    if (session_fan_failed(f)) {
        cJSON_Delete(o);
        reply_problem(req, CODE_BACKEND_UNAVAILABLE,
                      "the session was renewed, but %d call(s) to its holds failed "
                      "(Redis: %s): holds there may expire at the session's previous end",
                      session_fan_failed(f), session_fan_error(f));
        return;
    }
    json_add_int(o, "holds", session_fan_acted(f));
    reply_acked(req, 200, o);
}

static void renewed(struct gw_request *req, const struct redis_result *res,
                    const struct redis_result *all, int n) {
    if (verdict_of(res) != 1) {
        reply_gone(req, verdict_of(res));
        return;
    }
    /* Its holds' entries in their keys' ledgers move with it (quota_holds.h). */
    if (auth_holds_any())
        quota_holds_session_then(req->token,
                                 redis_reply_int(REDIS_ANSWER(res), 1, 0) + quota_holds_margin_ms(),
                                 NULL, NULL);
    cJSON *o = alloc_check(cJSON_CreateObject());
    cJSON_AddStringToObject(o, "token", req->token);
    json_add_int(o, "ttl_ms", redis_reply_int(REDIS_ANSWER(res), 1, 0));
    sessions_fan(req, all, n, 3, 'p', redis_reply_int(REDIS_ANSWER(res), 1, 0), o, renew_pushed);
}

void sessions_renew(struct gw_request *req) {
    long long ttl;
    if (path_token_or_reply(req) || body_parse_or_reply(req) ||
        body_int_or_reply(req, "ttl_ms", 0, 100, guard_max_lease_ms(), &ttl, NULL))
        return;
    char t[24];
    snprintf(t, sizeof t, "%lld", ttl);
    const char *args[2] = {t, access_session_who(req)};
    session_run(req, SCRIPT_SESSION_RENEW, 2, args, 0, renewed);
}

/* ---- DELETE /v1/sessions/{token} ---------------------------------------------------- */

/* The session's holds leave their keys' ledgers (quota_holds.h), then the
 * answer goes out: the client's next acquisition finds the room. */
static void reply_ended(struct gw_request *req, cJSON *o) {
    if (!auth_holds_any()) {
        reply_json(req, 200, o);
        return;
    }
    quota_holds_session_then(req->token, -1, quota_reply_done, quota_reply_new(req, 200, o));
}

/* The session is gone, then its holds. */
static void end_released(struct gw_request *req, const struct session_fan *f, cJSON *o) {
    if (session_fan_failed(f)) {
        cJSON_Delete(o);
        reply_problem(req, CODE_BACKEND_UNAVAILABLE,
                      "the session has ended, but %d call(s) to its holds failed "
                      "(Redis: %s): holds there stay until their lease, the session's last end",
                      session_fan_failed(f), session_fan_error(f));
        return;
    }
    json_add_int(o, "released", session_fan_acted(f));
    reply_ended(req, o);
}

static void ended(struct gw_request *req, const struct redis_result *res,
                  const struct redis_result *all, int n) {
    if (verdict_of(res) != 1) {
        reply_gone(req, verdict_of(res));
        return;
    }
    cJSON *o = alloc_check(cJSON_CreateObject());
    cJSON_AddStringToObject(o, "token", req->token);
    sessions_fan(req, all, n, 2, 'r', 0, o, end_released);
}

void sessions_end(struct gw_request *req) {
    if (path_token_or_reply(req)) return;
    const char *args[1] = {access_session_who(req)};
    session_run(req, SCRIPT_SESSION_END, 1, args, 1, ended);
}

/* ---- GET /v1/sessions/{token} ------------------------------------------------------- */

/* The holds the session lists that are still held. */
static void read_checked(struct gw_request *req, const struct session_fan *f, cJSON *o) {
    if (session_fan_failed(f)) {
        cJSON_Delete(o);
        reply_problem(req, CODE_BACKEND_UNAVAILABLE,
                      "%d call(s) to the session's holds failed (Redis: %s)", session_fan_failed(f),
                      session_fan_error(f));
        return;
    }
    session_fan_list(f, alloc_check(cJSON_AddArrayToObject(o, "holds")));
    reply_json(req, 200, o);
}

static void read_done(struct gw_request *req, const struct redis_result *res,
                      const struct redis_result *all, int n) {
    if (verdict_of(res) != 1) {
        reply_gone(req, verdict_of(res));
        return;
    }
    const redisReply *r = res->reply;
    cJSON *o = alloc_check(cJSON_CreateObject());
    cJSON_AddStringToObject(o, "token", req->token);
    json_add_int(o, "ttl_ms", redis_reply_int(REDIS_ANSWER(res), 1, 0));
    json_add_int(o, "ttl_left_ms", redis_reply_int(REDIS_ANSWER(res), 4, 0));
    json_add_int(o, "lock_delay_ms", redis_reply_int(REDIS_ANSWER(res), 2, 0));
    if (r->elements > 3 && r->element[3]->type == REDIS_REPLY_STRING && r->element[3]->len > 0)
        cJSON_AddStringToObject(o, "owner", r->element[3]->str);
    sessions_fan(req, all, n, 5, 'c', 0, o, read_checked);
}

void sessions_inspect(struct gw_request *req) {
    if (path_token_or_reply(req)) return;
    const char *args[1] = {access_session_who(req)};
    session_run(req, SCRIPT_SESSION_READ, 1, args, 0, read_done);
}
