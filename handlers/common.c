/* common.c -- what every handler needs: settings, names and tokens. */
#include "handlers/handlers.h"
#include "common/alloc.h"
#include "server/body.h"
#include "server/http.h"
#include "server/loop.h"
#include "server/redis.h"
#include "server/reply.h"
#include "server/waiters.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct gw_config *config;

void handlers_set_config(const struct gw_config *cfg) { config = cfg; }
const struct gw_config *handlers_config(void) { return config; }

static char *copy_string(const char *s) { return alloc_copy(s, strlen(s)); }

int name_param_or_reply(struct gw_request *req, int i) {
    char name[NAME_MAX_LEN + 1];
    if (name_decode(req->match.param[i], req->match.param_len[i], name) < 0) {
        reply_problem(req, CODE_INVALID_NAME,
                      "a name is 1-%d bytes of [A-Za-z0-9._:-] after percent-decoding",
                      NAME_MAX_LEN);
        return GW_REPLIED;
    }
    req->name = copy_string(name);
    return GW_OK;
}

void token_issue(struct gw_request *req) {
    char tok[TOKEN_NEW_LEN + 1];
    token_new(tok);
    req->token = copy_string(tok);
}

int token_header_or_reply(struct gw_request *req, int required, int *present) {
    const char *tok = http_header(req, "Lock-Token");
    if (present) *present = tok != NULL;
    if (!tok) {
        if (!required) return GW_OK;
        reply_problem(req, CODE_MISSING_TOKEN, "this request needs a Lock-Token header");
        return GW_REPLIED;
    }
    if (!token_valid(tok)) {
        reply_problem(req, CODE_INVALID_TOKEN, "a Lock-Token is %d-%d characters of [A-Za-z0-9_-]",
                      TOKEN_MIN_LEN, TOKEN_MAX_LEN);
        return GW_REPLIED;
    }
    req->token = copy_string(tok);
    return GW_OK;
}

struct cJSON *busy_extra(struct gw_request *req, long long retry_after_ms) {
    if (retry_after_ms < 1) retry_after_ms = 1;
    char secs[24];
    snprintf(secs, sizeof secs, "%lld", (retry_after_ms + 999) / 1000);
    reply_header(req, "Retry-After", secs);
    cJSON *extra = cJSON_CreateObject();
    json_add_int(extra, "retry_after_ms", retry_after_ms);
    return extra;
}

int64_t outage_retry_at(struct gw_request *req, const char *why, int waited, int64_t deadline_ms,
                        int *backoff_ms) {
    int64_t now = loop_now_ms();
    if (!waited || redis_error_is_final(why) || now >= deadline_ms || http_shutting_down() ||
        http_client_gone(req))
        return 0;
    *backoff_ms = *backoff_ms ? *backoff_ms * 2 : 50;
    if (*backoff_ms > 1000) *backoff_ms = 1000;
    return now + *backoff_ms < deadline_ms ? now + *backoff_ms : deadline_ms;
}

int park_request(struct gw_request *req, struct waiter *w, int64_t wake_ms) {
    if (http_client_gone(req)) return -1;
    w->fd = http_client_fd(req);
    waiters_park(w, wake_ms);
    return 0;
}
