/* locks.c -- /v1/locks/{name}: acquire, extend, release, inspect.
 *
 * Each handler is parse-or-reply, one script call, and a callback that
 * turns the script's answer into the reply.  Every decision (who holds,
 * counts, fences, lock-delay) is made by the script, never here. */
#include "handlers/handlers.h"
#include "server/body.h"
#include "server/http.h"
#include "server/metrics.h"
#include "server/redis.h"
#include "server/reply.h"

#include <cjson/cJSON.h>
#include <hiredis/hiredis.h>
#include <stdio.h>
#include <string.h>

#define FENCE_KEEP_MS "604800000" /* a name's last fence is kept 7 days */

struct lock_keys {
    char hash[GW_PREFIX_MAX + NAME_MAX_LEN + 16];   /* <prefix>lock:{name} */
    char fence[GW_PREFIX_MAX + NAME_MAX_LEN + 16];  /* <prefix>lock:{name}:fence */
    char channel[GW_PREFIX_MAX + 16];               /* <prefix>released */
};

/* The name sits in a hash tag, so all keys of one lock share a Redis
 * Cluster slot. */
static void lock_keys(const char *name, struct lock_keys *k) {
    const char *p = handlers_config()->key_prefix;
    snprintf(k->hash, sizeof k->hash, "%slock:{%s}", p, name);
    snprintf(k->fence, sizeof k->fence, "%slock:{%s}:fence", p, name);
    snprintf(k->channel, sizeof k->channel, "%sreleased", p);
}

/* Reads the script's reply: an array whose first n elements are integers.
 * Returns the first (the script's verdict), or answers 503 and returns
 * -100 when Redis failed or the reply has another shape. */
static long long script_verdict(struct gw_request *req, const struct redis_result *res,
                                long long *v, size_t n) {
    if (!res->ok) {
        reply_problem(req, CODE_BACKEND_UNAVAILABLE, "Redis: %s", res->error);
        return -100;
    }
    const redisReply *r = res->reply;
    if (r->type != REDIS_REPLY_ARRAY || r->elements < 1) goto bad;
    for (size_t i = 0; i < n; i++) {
        if (i >= r->elements || r->element[i]->type != REDIS_REPLY_INTEGER) {
            if (i > 0 && v[0] < 0) break; /* short answers: not held, not owner */
            goto bad;
        }
        v[i] = r->element[i]->integer;
    }
    return v[0];
bad:
    reply_problem(req, CODE_BACKEND_UNAVAILABLE, "Redis gave an unexpected answer");
    return -100;
}

static void reply_not_held_or_owner(struct gw_request *req, long long verdict) {
    if (verdict == -1)
        reply_problem(req, CODE_NOT_HELD, "nobody holds lock '%s'", req->name);
    else
        reply_problem(req, CODE_NOT_OWNER, "lock '%s' is held by another token", req->name);
}

static cJSON *lock_object(struct gw_request *req, long long fence, long long count,
                          long long ttl) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "name", req->name);
    json_add_int(o, "fence", fence);
    cJSON_AddStringToObject(o, "mode", "exclusive");
    json_add_int(o, "count", count);
    json_add_int(o, "ttl_ms", ttl);
    return o;
}

/* ---- POST: acquire or re-enter -------------------------------------------- */

static void acquire_done(void *arg, const struct redis_result *res) {
    struct gw_request *req = arg;
    long long v[4] = {0};
    long long verdict = script_verdict(req, res, v, 2);
    if (verdict == -100) return;
    if (verdict == 0) {
        long long wait = v[1] > 0 ? v[1] : 1;
        char secs[24];
        snprintf(secs, sizeof secs, "%lld", (wait + 999) / 1000);
        reply_header(req, "Retry-After", secs);
        cJSON *extra = cJSON_CreateObject();
        json_add_int(extra, "retry_after_ms", wait);
        metrics_inc(M_LOCK_BUSY, 1);
        reply_problem_with(req, CODE_LOCK_BUSY, extra, "lock '%s' is held", req->name);
        return;
    }
    if (script_verdict(req, res, v, 4) == -100) return;
    char location[NAME_MAX_LEN + 16];
    snprintf(location, sizeof location, "/v1/locks/%s", req->name);
    reply_header(req, "Lock-Token", req->token);
    reply_header(req, "Location", location);
    cJSON *o = lock_object(req, v[1], v[2], v[3]);
    cJSON_AddStringToObject(o, "token", req->token);
    metrics_inc(verdict == 1 ? M_LOCK_ACQUIRED : M_LOCK_REENTERED, 1);
    reply_json(req, verdict == 1 ? 201 : 200, o);
}

void locks_acquire(struct gw_request *req) {
    long long ttl, wait, max_hold, delay;
    int fair, has_token, has_max_hold;
    const char *mode, *owner;
    if (name_param_or_reply(req, 0) || token_header_or_reply(req, 0, &has_token) ||
        body_parse_or_reply(req) ||
        body_int_or_reply(req, "ttl_ms", 30000, 100, 86400000, &ttl, NULL) ||
        body_int_or_reply(req, "wait_ms", 0, 0, 300000, &wait, NULL) ||
        body_string_or_reply(req, "mode", 16, &mode) ||
        body_bool_or_reply(req, "fair", 0, &fair) ||
        body_string_or_reply(req, "owner", 200, &owner) ||
        body_int_or_reply(req, "max_hold_ms", 0, 100, 1000000000000LL, &max_hold,
                          &has_max_hold) ||
        body_int_or_reply(req, "lock_delay_ms", 0, 0, 60000, &delay, NULL))
        return;
    if (mode && strcmp(mode, "exclusive") != 0 && strcmp(mode, "shared") != 0) {
        reply_problem(req, CODE_INVALID_FIELD, "mode must be \"exclusive\" or \"shared\"");
        return;
    }
    if (has_max_hold && max_hold < ttl) {
        reply_problem(req, CODE_INVALID_FIELD, "max_hold_ms must be at least ttl_ms");
        return;
    }
    if ((mode && strcmp(mode, "shared") == 0) || fair) {
        reply_problem(req, CODE_NOT_IMPLEMENTED, "shared mode and fair queues are not offered yet");
        return;
    }
    if (!has_token) token_new(req->token);

    struct lock_keys k;
    lock_keys(req->name, &k);
    char ttl_s[24], hold_s[24], delay_s[24];
    snprintf(ttl_s, sizeof ttl_s, "%lld", ttl);
    snprintf(hold_s, sizeof hold_s, "%lld", max_hold);
    snprintf(delay_s, sizeof delay_s, "%lld", delay);
    const char *argv[] = {k.hash, k.fence, req->token, ttl_s, owner ? owner : "",
                          hold_s, delay_s, FENCE_KEEP_MS};
    size_t lens[8];
    for (int i = 0; i < 8; i++) lens[i] = strlen(argv[i]);
    redis_eval(SCRIPT_LOCK_ACQUIRE, 2, 8, argv, lens, acquire_done, req);
}

/* ---- PATCH: extend ----------------------------------------------------------- */

static void extend_done(void *arg, const struct redis_result *res) {
    struct gw_request *req = arg;
    long long v[4] = {0};
    long long verdict = script_verdict(req, res, v, 4);
    if (verdict == -100) return;
    if (verdict < 0) {
        reply_not_held_or_owner(req, verdict);
        return;
    }
    metrics_inc(M_LOCK_EXTENDED, 1);
    reply_json(req, 200, lock_object(req, v[1], v[2], v[3]));
}

void locks_extend(struct gw_request *req) {
    long long ttl;
    if (name_param_or_reply(req, 0) || token_header_or_reply(req, 1, NULL) ||
        body_parse_or_reply(req) ||
        body_int_or_reply(req, "ttl_ms", 0, 100, 86400000, &ttl, NULL))
        return;
    struct lock_keys k;
    lock_keys(req->name, &k);
    char ttl_s[24];
    snprintf(ttl_s, sizeof ttl_s, "%lld", ttl);
    const char *argv[] = {k.hash, req->token, ttl_s};
    size_t lens[3] = {strlen(argv[0]), strlen(argv[1]), strlen(argv[2])};
    redis_eval(SCRIPT_LOCK_EXTEND, 1, 3, argv, lens, extend_done, req);
}

/* ---- DELETE: release one level ------------------------------------------------- */

static void release_done(void *arg, const struct redis_result *res) {
    struct gw_request *req = arg;
    long long v[2] = {0};
    long long verdict = script_verdict(req, res, v, 2);
    if (verdict == -100) return;
    if (verdict < 0) {
        reply_not_held_or_owner(req, verdict);
        return;
    }
    metrics_inc(M_LOCK_RELEASED, 1);
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "name", req->name);
    cJSON_AddBoolToObject(o, "released", v[1] == 0);
    json_add_int(o, "count", v[1]);
    reply_json(req, 200, o);
}

void locks_release(struct gw_request *req) {
    if (name_param_or_reply(req, 0) || token_header_or_reply(req, 1, NULL)) return;
    struct lock_keys k;
    lock_keys(req->name, &k);
    const char *argv[] = {k.hash, req->token, k.channel, req->name};
    size_t lens[4];
    for (int i = 0; i < 4; i++) lens[i] = strlen(argv[i]);
    redis_eval(SCRIPT_LOCK_RELEASE, 1, 4, argv, lens, release_done, req);
}

/* ---- GET: inspect ------------------------------------------------------------- */

static void inspect_done(void *arg, const struct redis_result *res) {
    struct gw_request *req = arg;
    long long v[4] = {0};
    long long verdict = script_verdict(req, res, v, 4);
    if (verdict == -100) return;
    if (verdict < 0) {
        reply_not_held_or_owner(req, -1);
        return;
    }
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "name", req->name);
    cJSON_AddStringToObject(o, "mode", "exclusive");
    json_add_int(o, "holders", 1);
    json_add_int(o, "count", v[1]);
    json_add_int(o, "fence", v[2]);
    json_add_int(o, "ttl_ms", v[3]);
    const redisReply *r = res->reply;
    if (r->elements > 4 && r->element[4]->type == REDIS_REPLY_STRING && r->element[4]->len > 0)
        cJSON_AddStringToObject(o, "owner", r->element[4]->str);
    reply_json(req, 200, o);
}

void locks_inspect(struct gw_request *req) {
    if (name_param_or_reply(req, 0)) return;
    struct lock_keys k;
    lock_keys(req->name, &k);
    const char *argv[] = {k.hash};
    size_t lens[1] = {strlen(k.hash)};
    redis_eval(SCRIPT_LOCK_INSPECT, 1, 1, argv, lens, inspect_done, req);
}
