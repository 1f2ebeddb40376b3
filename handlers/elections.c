/* elections.c -- /v1/elections/{name}: leader election on the lock
 * machinery, as etcd's Campaign, Proclaim, Resign, Leader and Observe.
 *
 * An election is the exclusive lock `election:<name>`: a candidate is a
 * fair waiter for it (first come, first elected), the leader its holder,
 * the leader's value the holder's owner, and the term the holder's fence
 * (it strictly increases with every new leader, also across expiry and
 * restarts: locks.md, "Fences").  A campaign streams (a hold bound to its
 * connection, streams.h: `event: elected`) or takes a lease it renews
 * with PATCH {"ttl_ms"}.  An observer (GET with Accept:
 * text/event-stream) is a watcher of the name (watch.lua's mark, so that
 * every change of holder is announced, and proclaim.lua announces a
 * change of value): woken by each announcement, it reads the leader and
 * sends an event when leader or value differ from what it last sent. */
#include "common/alloc.h"
#include "common/decimal.h"
#include "handlers/backend.h"
#include "handlers/guard.h"
#include "handlers/handlers.h"
#include "handlers/holds.h"
#include "handlers/quota_holds.h"
#include "server/auth.h"
#include "handlers/state_stream.h"
#include "handlers/streams.h"
#include "handlers/verdict.h"
#include "server/body.h"
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

#define ELECTION_PREFIX     "election:"
#define ELECTION_PREFIX_LEN (sizeof ELECTION_PREFIX - 1)
/* A campaign waits this long unless it says otherwise (the longest wait). */
#define CAMPAIGN_WAIT_MS 300000

/* The {name} parameter into req->name as the election's lock name
 * ("election:<name>"), or 400 invalid_name. */
static int election_name_or_reply(struct gw_request *req) {
    if (name_param_or_reply(req, 0)) return GW_REPLIED;
    size_t len = strlen(req->name);
    if (len + ELECTION_PREFIX_LEN > NAME_MAX_LEN) {
        reply_problem(req, CODE_INVALID_NAME, "an election's name is at most %d bytes",
                      (int)(NAME_MAX_LEN - ELECTION_PREFIX_LEN));
        return GW_REPLIED;
    }
    char *full = alloc_check(malloc(ELECTION_PREFIX_LEN + len + 1));
    memcpy(full, ELECTION_PREFIX, ELECTION_PREFIX_LEN);
    memcpy(full + ELECTION_PREFIX_LEN, req->name, len + 1);
    free(req->name);
    req->name = full;
    return GW_OK;
}

static const char *shown(const struct gw_request *req) { return req->name + ELECTION_PREFIX_LEN; }

/* A term is a fence: at least Redis's clock in microseconds when the
 * leader was elected, so it also says since when (milliseconds). */
static long long since_ms(long long term) { return term / 1000; }

static void add_leader(cJSON *o, const char *value, long long term) {
    cJSON_AddStringToObject(o, "value", value);
    json_add_int(o, "term", term);
    json_add_int(o, "since_ms", since_ms(term));
}

/* ---- campaign ------------------------------------------------------------------ */

/* A member json_add_int wrote (a raw number, for 64-bit precision). */
static long long raw_int(const cJSON *o, const char *key) {
    const cJSON *m = cJSON_GetObjectItemCaseSensitive(o, key);
    return m && cJSON_IsRaw(m) && m->valuestring ? atoll(m->valuestring) : 0;
}

static cJSON *elected_body(struct hold_call *hc, cJSON *grant) {
    struct gw_request *req = hc->req;
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "name", shown(req));
    add_leader(o, hc->owner, raw_int(grant, "fence"));
    cJSON_AddStringToObject(o, "token", req->token);
    json_add_int(o, "ttl_ms", raw_int(grant, "ttl_ms"));
    cJSON_Delete(grant);
    char location[NAME_MAX_LEN + 24];
    snprintf(location, sizeof location, "/v1/elections/%s", shown(req));
    reply_header(req, "Location", location);
    return o;
}

void elections_campaign(struct gw_request *req) {
    long long ttl, wait;
    const char *value;
    int has_token;
    if (election_name_or_reply(req) || token_header_or_reply(req, 0, &has_token) ||
        body_parse_or_reply(req) || body_string_or_reply(req, "value", NAME_MAX_LEN, &value) ||
        body_int_or_reply(req, "ttl_ms", guard_default_lease_ms(), 100, guard_max_lease_ms(), &ttl,
                          NULL) ||
        body_int_or_reply(req, "wait_ms", CAMPAIGN_WAIT_MS, 0, CAMPAIGN_WAIT_MS, &wait, NULL))
        return;
    if (!value) {
        reply_problem(req, CODE_INVALID_FIELD, "value is required (a string, the leader's value)");
        return;
    }
    /* A new candidate under a new token, or the client's own (lockctl
     * elect makes its token first, so that it can resign even a campaign
     * whose answer it never heard). */
    if (!has_token) token_issue(req);
    struct hold_call *hc = hold_call_new(req, HOLD_EXCLUSIVE, value);
    hc->ttl_ms = ttl;
    hc->wait_ms = wait;
    hc->fair = 1; /* first come, first elected */
    hc->own_token = !has_token;
    hc->reshape = elected_body;
    if (stream_asked(req))
        stream_hold_start_as(req, hc, "elected", ELECTION_PREFIX_LEN);
    else
        hold_acquire(req, hc);
}

/* ---- proclaim (and a lease's renewal) ------------------------------------------------ */

static long long first_int(const struct redis_result *res) {
    const redisReply *r = res && res->ok ? res->reply : NULL;
    return r && r->type == REDIS_REPLY_ARRAY && r->elements > 0 &&
                   r->element[0]->type == REDIS_REPLY_INTEGER
               ? r->element[0]->integer
               : -100;
}

static void reply_not_leader(struct gw_request *req, long long verdict) {
    if (verdict == VERDICT_NOT_OWNER)
        reply_problem(req, CODE_NOT_OWNER, "election '%s' is led, but not by this token",
                      shown(req));
    else
        reply_problem(req, CODE_NOT_HELD,
                      "this token leads no election '%s' (never did, resigned, or its term ended)",
                      shown(req));
}

static void proclaimed(void *arg, const struct redis_result *res) {
    struct gw_request *req = arg;
    long long verdict = first_int(res);
    if (verdict == -100) {
        reply_problem(req, CODE_BACKEND_UNAVAILABLE, "Redis: %s",
                      res && !res->ok ? res->error : "an unexpected answer");
        return;
    }
    if (verdict != 1) {
        reply_not_leader(req, verdict);
        return;
    }
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "name", shown(req));
    add_leader(o, (const char *)req->ctx, redis_reply_int(REDIS_ANSWER(res), 1, 0));
    reply_json(req, 200, o);
}

/* Quorum mode: proclaimed when a quorum of masters took it. */
static void proclaimed_all(void *arg, const struct redis_result *res, int n) {
    const struct redis_result *ok = NULL, *other = NULL;
    int nok = 0;
    for (int i = 0; i < n; i++) {
        long long v = first_int(&res[i]);
        if (v == 1) {
            nok++;
            if (!ok) ok = &res[i];
        } else if (v != -100 && !other) {
            other = &res[i];
        }
    }
    struct redis_result failed = {.ok = 0, .reply = NULL, .error = "too few masters answered"};
    proclaimed(arg, nok >= redis_quorum() ? ok : other ? other : &failed);
}

static void renewed(void *arg, const struct redis_result *res) {
    struct gw_request *req = arg;
    long long v[6] = {0};
    const char *err;
    long long verdict = verdict_parse(res, v, 6, &err);
    if (verdict == VERDICT_ERROR) {
        reply_problem(req, CODE_BACKEND_UNAVAILABLE, "Redis: %s", err);
        return;
    }
    if (verdict == VERDICT_SESSION_BOUND) {
        reply_problem(req, CODE_SESSION_BOUND,
                      "this leader's term lives by its connection (an event stream): the gateway "
                      "renews it");
        return;
    }
    if (verdict < 0) {
        reply_not_leader(req, verdict);
        return;
    }
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "name", shown(req));
    json_add_int(o, "term", v[1]);
    json_add_int(o, "ttl_ms", v[3]);
    reply_json(req, 200, o);
}

void elections_proclaim(struct gw_request *req) {
    const char *value;
    long long ttl;
    int has_ttl;
    if (election_name_or_reply(req) || token_header_or_reply(req, 1, NULL) ||
        body_parse_or_reply(req) || body_string_or_reply(req, "value", NAME_MAX_LEN, &value) ||
        body_int_or_reply(req, "ttl_ms", 0, 100, guard_max_lease_ms(), &ttl, &has_ttl))
        return;
    if (!value == !has_ttl) {
        reply_problem(req, CODE_INVALID_FIELD,
                      "give either value (proclaim a new value) or ttl_ms (renew a lease)");
        return;
    }
    struct hold_keys k;
    hold_keys(req->name, 0, &k);
    if (has_ttl) {
        if (auth_holds_limit(req->key_id)) { /* as hold_extend: the ledger counts the lease */
            char *m = quota_holds_member(k.message, req->token);
            quota_holds_set(req->key_id, ttl + quota_holds_margin_ms(), 1, (const char *const *)&m);
            free(m);
        }
        char t[24];
        snprintf(t, sizeof t, "%lld", ttl);
        const char *argv[] = {k.hash, req->token, t};
        size_t lens[3] = {strlen(argv[0]), strlen(argv[1]), strlen(argv[2])};
        backend->extend(3, argv, lens, req->start_ns, renewed, req);
        return;
    }
    req->ctx = alloc_check(strdup(value));
    req->ctx_free = free;
    const char *argv[] = {k.hash, req->token, value, redis_release_channel_for(k.hash)};
    size_t lens[4];
    for (int i = 0; i < 4; i++) lens[i] = strlen(argv[i]);
    backend->eval(SCRIPT_PROCLAIM, 1, 4, argv, lens, proclaimed, proclaimed_all, req);
}

/* ---- resign ---------------------------------------------------------------------- */

static void resigned(void *arg, const struct redis_result *res) {
    struct gw_request *req = arg;
    long long v[3] = {0};
    const char *err;
    long long verdict = verdict_parse(res, v, 3, &err);
    if (verdict == VERDICT_ERROR) {
        reply_problem(req, CODE_BACKEND_UNAVAILABLE, "Redis: %s", err);
        return;
    }
    if (verdict < 0) {
        reply_not_leader(req, verdict);
        return;
    }
    if (auth_holds_limit(req->key_id)) { /* its key's holds_at_once no longer counts it */
        struct hold_keys k;
        hold_keys(req->name, 0, &k);
        char *m = quota_holds_member(k.message, req->token);
        quota_holds_drop(req->key_id, 1, (const char *const *)&m);
        free(m);
    }
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "name", shown(req));
    cJSON_AddBoolToObject(o, "resigned", 1);
    reply_json(req, 200, o);
}

void elections_resign(struct gw_request *req) {
    if (election_name_or_reply(req) || token_header_or_reply(req, 1, NULL)) return;
    struct hold_keys k;
    hold_keys(req->name, 0, &k);
    const char *argv[] = {k.hash, req->token, redis_release_channel_for(k.hash), k.message};
    size_t lens[4];
    for (int i = 0; i < 4; i++) lens[i] = strlen(argv[i]);
    backend->release(4, argv, lens, resigned, req);
}

/* ---- leader, and observe ----------------------------------------------------------- */

/* An inspect.lua or watch.lua answer read: held (1) with value and term,
 * or not (0); -100 when Redis failed. */
struct leader_state {
    long long verdict; /* 1 a leader, -1 none, -100 failed */
    long long term;    /* its fence */
    long long left_ms; /* its remaining lease */
    long long index;   /* the watch index */
    const char *value; /* its owner (valid during the callback) */
    size_t value_len;
};

static struct leader_state read_state(const struct redis_result *res) {
    struct leader_state s = {.verdict = first_int(res), .value = ""};
    if (s.verdict != 1) return s;
    const redisReply *r = res->reply;
    s.term = redis_reply_int(REDIS_ANSWER(res), 3, 0);
    s.left_ms = redis_reply_int(REDIS_ANSWER(res), 4, 0);
    s.index = redis_reply_int(REDIS_ANSWER(res), 9, 0);
    if (r->elements > 5 && r->element[5]->type == REDIS_REPLY_STRING) {
        s.value = r->element[5]->str;
        s.value_len = r->element[5]->len;
    }
    return s;
}

static cJSON *leader_json(const struct gw_request *req, const struct leader_state *s) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "name", shown(req));
    if (s->verdict == 1) {
        char *v = alloc_check(malloc(s->value_len + 1));
        memcpy(v, s->value, s->value_len);
        v[s->value_len] = '\0';
        add_leader(o, v, s->term);
        free(v);
    } else {
        cJSON_AddNullToObject(o, "value");
    }
    return o;
}

static void leader_done(void *arg, const struct redis_result *res) {
    struct gw_request *req = arg;
    struct leader_state s = read_state(res);
    if (s.verdict == -100) {
        reply_problem(req, CODE_BACKEND_UNAVAILABLE, "Redis: %s",
                      res && !res->ok ? res->error : "an unexpected answer");
        return;
    }
    if (s.verdict != 1) {
        reply_problem(req, CODE_NOT_HELD, "election '%s' has no leader", shown(req));
        return;
    }
    reply_json(req, 200, leader_json(req, &s));
}

static void leader_all_done(void *arg, const struct redis_result *res, int n) {
    leader_done(arg, verdict_pick_inspect(res, n, redis_quorum()));
}

/* What an observer sent last (state_stream.h calls observed after each read). */
struct observed {
    int have;       /* an event was sent */
    long long term; /* its term (0: no leader) */
    char *value;    /* and value */
};

static void observed_free(void *arg) {
    struct observed *ob = arg;
    free(ob->value);
    free(ob);
}

/* Sends the leader when it differs from what was sent last. */
static void observed(struct gw_request *req, const struct redis_result *res, const char *id,
                     void *arg) {
    struct observed *ob = arg;
    struct leader_state s = read_state(res);
    long long term = s.verdict == 1 ? s.term : 0;
    int same = ob->have && term == ob->term &&
               (term == 0 || (ob->value && strlen(ob->value) == s.value_len &&
                              memcmp(ob->value, s.value, s.value_len) == 0));
    if (same) return;
    ob->have = 1;
    ob->term = term;
    free(ob->value);
    ob->value = alloc_check(malloc(s.value_len + 1));
    memcpy(ob->value, s.value, s.value_len);
    ob->value[s.value_len] = '\0';
    state_stream_event(req, id, term ? "leader" : "vacant", leader_json(req, &s));
}

static void observe(struct gw_request *req) {
    const char *last = http_header(req, "Last-Event-ID");
    if (last && !state_stream_id_ok(last)) {
        reply_problem(req, CODE_INVALID_FIELD, "Last-Event-ID must be an id this stream sent");
        return;
    }
    struct hold_keys k;
    hold_keys(req->name, 0, &k);
    state_stream_start(req, k.hash, k.message, last, observed,
                       alloc_check(calloc(1, sizeof(struct observed))), observed_free);
}

void elections_leader(struct gw_request *req) {
    if (election_name_or_reply(req)) return;
    if (stream_asked(req)) {
        observe(req);
        return;
    }
    struct hold_keys k;
    hold_keys(req->name, 0, &k);
    const char *argv[] = {k.hash};
    size_t lens[1] = {strlen(k.hash)};
    backend->eval(SCRIPT_INSPECT, 1, 1, argv, lens, leader_done, leader_all_done, req);
}
