/* force.c -- see force.h. */
#include "handlers/force.h"
#include "handlers/quota_holds.h"
#include "server/auth.h"
#include "handlers/backend.h"
#include "handlers/handlers.h"
#include "server/http.h"
#include "server/log.h"
#include "server/metrics.h"
#include "server/redis.h"
#include "server/reply.h"

#include <cjson/cJSON.h>
#include <stdatomic.h>
#include <hiredis/hiredis.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define KEY_MAX (GW_PREFIX_MAX + NAME_MAX_LEN + 16)

int force_asked_or_reply(struct gw_request *req) {
    const char *q = http_query(req, "force");
    if (!q || strcmp(q, "false") == 0) return 0;
    if (strcmp(q, "true") == 0) return 1;
    reply_problem(req, CODE_INVALID_FIELD, "force must be true or false");
    return -1;
}

static atomic_ulong forced; /* forced releases that ended a hold */

static uint64_t forced_total(void) { return atomic_load(&forced); }

void force_init(void) {
    metrics_add_source("lockgate_forced_releases_total",
                       "Forced releases (DELETE ?force=true) that ended at least one hold",
                       "counter", forced_total);
}

static long long elem_int(const struct redis_result *res, size_t i) {
    const redisReply *r = res->ok ? res->reply : NULL;
    return r && r->type == REDIS_REPLY_ARRAY && r->elements > i &&
                   r->element[i]->type == REDIS_REPLY_INTEGER
               ? r->element[i]->integer
               : -100;
}

/* The ended holds taken with a key that has a holds_at_once leave its
 * ledger (force.lua answers each one's key id and token after the fence);
 * qr's answer waits for each drop. */
static void force_unledger(struct gw_request *req, const struct redis_result *res,
                           struct quota_reply *qr) {
    const redisReply *r = res->ok ? res->reply : NULL;
    if (!r || r->type != REDIS_REPLY_ARRAY) return;
    char message[NAME_MAX_LEN + 8];
    snprintf(message, sizeof message, "%s:%s", req->aux ? "sem" : "lock", req->name);
    for (size_t i = 3; i + 1 < r->elements; i += 2) {
        const redisReply *k = r->element[i], *t = r->element[i + 1];
        if (k->type != REDIS_REPLY_STRING || t->type != REDIS_REPLY_STRING) continue;
        if (!auth_holds_limit(k->str)) continue;
        char *m = quota_holds_member(message, t->str);
        quota_reply_expect(qr);
        quota_holds_drop_then(k->str, 1, (const char *const *)&m, quota_reply_done, qr);
        free(m);
    }
}

/* holders: the answer whose ended holds leave their keys' ledgers, or NULL. */
static void force_reply(struct gw_request *req, long long ended, long long fence,
                        const struct redis_result *holders) {
    const char *what = req->aux ? "semaphore" : "lock";
    if (ended < 0) {
        reply_problem(req, CODE_NOT_HELD, "nobody holds %s '%s'", what, req->name);
        return;
    }
    /* Who did it: the API key's id, "-" with auth off.  (Permits carry
     * no fence.) */
    char fence_s[40] = "";
    if (!req->aux) snprintf(fence_s, sizeof fence_s, ", fence %lld", fence);
    log_warn("forced release of %s '%s': %lld hold(s) ended%s, key id %s", what, req->name, ended,
             fence_s, req->key_id ? req->key_id : "-");
    atomic_fetch_add(&forced, 1);
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "name", req->name);
    cJSON_AddBoolToObject(o, "released", 1);
    json_add_int(o, "holders_ended", ended);
    struct quota_reply *qr = quota_reply_new(req, 200, o);
    if (holders) force_unledger(req, holders, qr);
    quota_reply_done(qr);
}

static void force_done(void *arg, const struct redis_result *res) {
    struct gw_request *req = arg;
    long long verdict = elem_int(res, 0);
    if (verdict == -100) {
        reply_problem(req, CODE_BACKEND_UNAVAILABLE, "Redis: %s",
                      res->ok ? "an unexpected answer to force.lua" : res->error);
        return;
    }
    force_reply(req, verdict < 0 ? -1 : elem_int(res, 1), elem_int(res, 2), res);
}

/* Quorum mode: every master ends what it has; the name was held when any
 * master that answered had a holder, and the most holders one ended is
 * reported.  A master that did not answer keeps its holds until their
 * leases end: too few masters will then agree on them for a new grant to
 * be refused by them alone. */
static void force_all_done(void *arg, const struct redis_result *res, int n) {
    struct gw_request *req = arg;
    long long ended = -1, fence = 0;
    int answered = 0;
    const struct redis_result *holders = NULL;
    for (int i = 0; i < n; i++) {
        long long verdict = elem_int(&res[i], 0);
        if (verdict == -100) continue;
        answered++;
        if (verdict == 1 && elem_int(&res[i], 1) > ended) {
            ended = elem_int(&res[i], 1);
            holders = &res[i];
        }
        if (verdict == 1 && elem_int(&res[i], 2) > fence) fence = elem_int(&res[i], 2);
    }
    if (answered < redis_quorum()) {
        reply_problem(req, CODE_BACKEND_UNAVAILABLE, "only %d of %d Redis masters answered",
                      answered, n);
        return;
    }
    force_reply(req, ended, fence, holders);
}

void force_release(struct gw_request *req, int semaphore) {
    if (name_param_or_reply(req, 0)) return;
    char hash[KEY_MAX], message[NAME_MAX_LEN + 8];
    const char *kind = semaphore ? "sem" : "lock";
    snprintf(hash, sizeof hash, "%s%s:{%s}", handlers_config()->key_prefix, kind, req->name);
    snprintf(message, sizeof message, "%s:%s", kind, req->name);
    const char *argv[] = {hash, redis_release_channel_for(hash), message};
    size_t lens[3];
    for (int i = 0; i < 3; i++) lens[i] = strlen(argv[i]);
    req->aux = semaphore;
    backend->eval(SCRIPT_FORCE, 1, 3, argv, lens, force_done, force_all_done, req);
}
