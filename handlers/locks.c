/* locks.c -- /v1/locks/{name}: parse, then hand over to holds.c. */
#include "handlers/handlers.h"
#include "handlers/force.h"
#include "handlers/guard.h"
#include "handlers/holds.h"
#include "handlers/streams.h"
#include "handlers/watch.h"
#include "server/body.h"
#include "server/http.h"
#include "server/reply.h"

#include <stdlib.h>
#include <string.h>

void locks_acquire(struct gw_request *req) {
    long long ttl, wait, max_hold, delay;
    int fair, has_token, has_max_hold;
    const char *mode, *owner;
    if (name_param_or_reply(req, 0) || token_header_or_reply(req, 0, &has_token) ||
        body_parse_or_reply(req) ||
        body_int_or_reply(req, "ttl_ms", guard_default_lease_ms(), 100, guard_max_lease_ms(), &ttl,
                          NULL) ||
        body_int_or_reply(req, "wait_ms", 0, 0, 300000, &wait, NULL) ||
        body_string_or_reply(req, "mode", 16, &mode) || body_bool_or_reply(req, "fair", 0, &fair) ||
        body_string_or_reply(req, "owner", NAME_MAX_LEN, &owner) ||
        body_int_or_reply(req, "max_hold_ms", 0, 100, 1000000000000LL, &max_hold, &has_max_hold) ||
        body_int_or_reply(req, "lock_delay_ms", 0, 0, 60000, &delay, NULL))
        return;
    int shared = mode && strcmp(mode, "shared") == 0;
    if (mode && !shared && strcmp(mode, "exclusive") != 0) {
        reply_problem(req, CODE_INVALID_FIELD, "mode must be \"exclusive\" or \"shared\"");
        return;
    }
    if (has_max_hold && max_hold < ttl) {
        reply_problem(req, CODE_INVALID_FIELD, "max_hold_ms must be at least ttl_ms");
        return;
    }
    if (!has_token) token_issue(req);

    struct hold_call *hc = hold_call_new(req, shared ? HOLD_SHARED : HOLD_EXCLUSIVE, owner);
    hc->ttl_ms = ttl;
    hc->wait_ms = wait;
    hc->max_hold_ms = max_hold;
    hc->lock_delay_ms = delay;
    hc->fair = fair;
    hc->own_token = !has_token;
    if (stream_asked(req))
        stream_hold_start(req, hc);
    else
        hold_acquire(req, hc);
}

void locks_extend(struct gw_request *req) { hold_extend(req, 0); }

/* ?force=true ends every hold whatever the token (the admin grant with
 * auth: handlers/access.c). */
void locks_release(struct gw_request *req) {
    int force = force_asked_or_reply(req);
    if (force > 0) force_release(req, 0);
    if (force == 0) hold_release(req, 0);
}

void locks_inspect(struct gw_request *req) {
    if (!watch_if_asked(req, 0)) hold_inspect(req, 0);
}
