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
/* An observer's mark lasts this long; it is set again before it ends. */
#define OBSERVE_MARK_MS  60000
#define OBSERVE_REARM_MS 50000
#define OBSERVE_RETRY_MS 1000

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

static long long int_at(const struct redis_result *res, size_t i) {
    const redisReply *r = res->reply;
    return r->elements > i && r->element[i]->type == REDIS_REPLY_INTEGER ? r->element[i]->integer
                                                                         : 0;
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
    add_leader(o, (const char *)req->ctx, int_at(res, 1));
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
        char t[24];
        snprintf(t, sizeof t, "%lld", ttl);
        const char *argv[] = {k.hash, req->token, t};
        size_t lens[3] = {strlen(argv[0]), strlen(argv[1]), strlen(argv[2])};
        backend->extend(3, argv, lens, req->start_ns, renewed, req);
        return;
    }
    req->ctx = alloc_check(strdup(value));
    req->ctx_free = free;
    const char *argv[] = {k.hash, req->token, value};
    size_t lens[3] = {strlen(argv[0]), strlen(argv[1]), strlen(argv[2])};
    backend->eval(SCRIPT_PROCLAIM, 1, 3, argv, lens, proclaimed, proclaimed_all, req);
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
    s.term = int_at(res, 3);
    s.left_ms = int_at(res, 4);
    s.index = int_at(res, 9);
    if (r->elements > 5 && r->element[5]->type == REDIS_REPLY_STRING) {
        s.value = r->element[5]->str;
        s.value_len = r->element[5]->len;
    }
    return s;
}

/* Quorum mode: a leader when a quorum of masters says so (the highest
 * fence's answer stands), else none; too few answers: a failure. */
static const struct redis_result *pick_quorum(const struct redis_result *res, int n) {
    const struct redis_result *held = NULL, *free_ = NULL, *failed = NULL;
    int nheld = 0, answered = 0;
    for (int i = 0; i < n; i++) {
        long long v = first_int(&res[i]);
        if (v == -100) {
            failed = &res[i];
            continue;
        }
        answered++;
        if (v == 1) {
            nheld++;
            if (!held || int_at(&res[i], 3) > int_at(held, 3)) held = &res[i];
        } else {
            free_ = &res[i];
        }
    }
    if (answered < redis_quorum()) return failed;
    return nheld >= redis_quorum() ? held : free_ ? free_ : held;
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
    leader_done(arg, pick_quorum(res, n));
}

struct observer {
    struct waiter w;         /* watches the name (first) */
    struct gw_request *req;  /* the stream's request */
    char hash[HOLD_KEY_MAX]; /* the election's lock hash */
    char key[HOLD_KEY_MAX];  /* "lock:election:<name>", as published */
    long long after;         /* the index last read (-1: none yet) */
    int have;                /* an event was sent */
    long long term;          /* what it said: the term (0: no leader) */
    char *value;             /* and the value */
    int calls;               /* watch.lua calls under way */
    int orphan;              /* the request was freed: the answer frees this */
    int ended;               /* the request is completed */
};

static void observe_attempt(struct observer *ob);
static void observer_gone(struct gw_request *req);

static void observer_end(struct observer *ob) {
    if (ob->ended) return;
    ob->ended = 1;
    waiters_unpark(&ob->w);
    if (http_stream_opened(ob->req))
        http_stream_end(ob->req);
    else
        reply_problem(ob->req, CODE_LOCK_BUSY, "the client went away while observing");
}

/* Parked until a change is announced, or wake_ms, or the next heartbeat
 * (a comment line, then a read: an observer costs one watch.lua call per
 * --stream-heartbeat-ms besides its changes). */
static void observe_park(struct observer *ob, int64_t wake_ms) {
    int64_t beat = loop_now_ms() + handlers_config()->stream_heartbeat_ms;
    if (beat < wake_ms) wake_ms = beat;
    ob->w.seen_seq = waiters_release_seq();
    if (park_request(ob->req, &ob->w, wake_ms) < 0) observer_end(ob);
}

/* Sends the leader when it differs from what was sent last. */
static void observe_send(struct observer *ob, const struct leader_state *s) {
    long long term = s->verdict == 1 ? s->term : 0;
    int same = ob->have && term == ob->term &&
               (term == 0 || (ob->value && strlen(ob->value) == s->value_len &&
                              memcmp(ob->value, s->value, s->value_len) == 0));
    if (same) return;
    ob->have = 1;
    ob->term = term;
    free(ob->value);
    ob->value = alloc_check(malloc(s->value_len + 1));
    memcpy(ob->value, s->value, s->value_len);
    ob->value[s->value_len] = '\0';
    if (!http_stream_opened(ob->req))
        http_stream_open(ob->req, observer_gone, handlers_config()->stream_user_timeout_ms);
    cJSON *o = leader_json(ob->req, s);
    char *json = alloc_check(cJSON_PrintUnformatted(o));
    cJSON_Delete(o);
    const char *head = term ? "event: leader\ndata: " : "event: vacant\ndata: ";
    http_stream_write(ob->req, head, strlen(head));
    http_stream_write(ob->req, json, strlen(json));
    http_stream_write(ob->req, "\n\n", 2);
    free(json);
}

static void observe_done(void *arg, const struct redis_result *res) {
    struct observer *ob = arg;
    ob->calls--;
    if (ob->orphan) {
        if (!ob->calls) {
            free(ob->value);
            free(ob);
        }
        return;
    }
    if (ob->ended) return;
    if (http_client_gone(ob->req)) {
        observer_end(ob);
        return;
    }
    struct leader_state s = read_state(res);
    int64_t now = loop_now_ms();
    if (s.verdict == -100) {
        if (!http_stream_opened(ob->req)) {
            ob->ended = 1;
            reply_problem(ob->req, CODE_BACKEND_UNAVAILABLE, "Redis: %s",
                          res && !res->ok ? res->error : "an unexpected answer");
            return;
        }
        observe_park(ob, now + OBSERVE_RETRY_MS); /* Redis away: try again */
        return;
    }
    observe_send(ob, &s);
    long long index = s.verdict == 1 ? s.index : 0;
    if (index != ob->after) { /* changed since the last read: no mark was set */
        ob->after = index;
        observe_attempt(ob);
        return;
    }
    /* Marked: a change is announced and wakes it; an expiry is not, so
     * its timer is set to the lease's end. */
    int64_t wake = now + OBSERVE_REARM_MS;
    if (s.verdict == 1 && now + s.left_ms + 2 < wake) wake = now + s.left_ms + 2;
    observe_park(ob, wake);
}

static void observe_all_done(void *arg, const struct redis_result *res, int n) {
    struct redis_result failed = {.ok = 0, .reply = NULL, .error = "too few masters answered"};
    const struct redis_result *r = pick_quorum(res, n);
    observe_done(arg, r ? r : &failed);
}

static void observe_attempt(struct observer *ob) {
    char after[24], left[24];
    snprintf(after, sizeof after, "%lld", ob->after);
    snprintf(left, sizeof left, "%d", OBSERVE_MARK_MS);
    const char *argv[] = {ob->hash, after, left};
    size_t lens[3] = {strlen(ob->hash), strlen(after), strlen(left)};
    ob->calls++;
    backend->eval(SCRIPT_WATCH, 1, 3, argv, lens, observe_done, observe_all_done, ob);
}

static void observe_wake(struct waiter *w) {
    struct observer *ob = (struct observer *)w;
    if (http_client_gone(ob->req)) {
        observer_end(ob);
        return;
    }
    if (http_stream_opened(ob->req)) http_stream_write(ob->req, ":\n", 2);
    observe_attempt(ob);
}

/* libmicrohttpd closed the connection (a write failed): as a hang-up. */
static void observer_gone(struct gw_request *req) {
    struct observer *ob = req->ctx;
    if (ob->ended || !waiters_parked(&ob->w)) return; /* an answer under way ends it */
    observer_end(ob);
}

static void observe_give_up(struct waiter *w, int client_gone) {
    observer_end((struct observer *)w);
}

static void observer_free(void *ctx) {
    struct observer *ob = ctx;
    waiters_unpark(&ob->w);
    if (ob->calls) {
        ob->orphan = 1;
        return;
    }
    free(ob->value);
    free(ob);
}

static void observe(struct gw_request *req) {
    struct observer *ob = alloc_check(calloc(1, sizeof *ob));
    struct hold_keys k;
    hold_keys(req->name, 0, &k);
    snprintf(ob->hash, sizeof ob->hash, "%s", k.hash);
    snprintf(ob->key, sizeof ob->key, "%s", k.message);
    ob->req = req;
    ob->after = -1;
    ob->w.key = ob->key;
    ob->w.watch = 1;
    ob->w.retry = observe_wake;
    ob->w.give_up = observe_give_up;
    req->ctx = ob;
    req->ctx_free = observer_free;
    observe_attempt(ob);
}

void elections_leader(struct gw_request *req) {
    if (election_name_or_reply(req)) return;
    if (stream_asked(req)) {
        if (backend->per_slot) {
            reply_problem(req, CODE_NOT_IMPLEMENTED,
                          "observing an election (text/event-stream) is not available in Redis "
                          "Cluster mode");
            return;
        }
        observe(req);
        return;
    }
    struct hold_keys k;
    hold_keys(req->name, 0, &k);
    const char *argv[] = {k.hash};
    size_t lens[1] = {strlen(k.hash)};
    backend->eval(SCRIPT_INSPECT, 1, 1, argv, lens, leader_done, leader_all_done, req);
}
