/* semaphores.c -- /v1/semaphores/{name}: up to `limit` holders, each with
 * its own server-made token and lease (no re-entry). */
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

void semaphores_acquire(struct gw_request *req) {
    long long limit, ttl, wait;
    int fair, has_limit;
    const char *owner;
    if (name_param_or_reply(req, 0) || body_parse_or_reply(req) ||
        body_int_or_reply(req, "limit", 0, 1, 100000, &limit, &has_limit) ||
        body_int_or_reply(req, "ttl_ms", guard_default_lease_ms(), 100, guard_max_lease_ms(), &ttl,
                          NULL) ||
        body_int_or_reply(req, "wait_ms", 0, 0, 300000, &wait, NULL) ||
        body_bool_or_reply(req, "fair", 0, &fair) ||
        body_string_or_reply(req, "owner", NAME_MAX_LEN, &owner))
        return;
    if (!has_limit) {
        reply_problem(req, CODE_INVALID_FIELD, "limit is required (1 to 100000)");
        return;
    }
    token_issue(req); /* every permit gets its own token */

    struct hold_call *hc = hold_call_new(req, HOLD_PERMIT, owner);
    hc->limit = limit;
    hc->ttl_ms = ttl;
    hc->wait_ms = wait;
    hc->fair = fair;
    hc->own_token = 1;
    if (stream_asked(req))
        stream_hold_start(req, hc);
    else
        hold_acquire(req, hc);
}

void semaphores_extend(struct gw_request *req) { hold_extend(req, 1); }

/* ?force=true: as locks_release (the admin grant with auth). */
void semaphores_release(struct gw_request *req) {
    int force = force_asked_or_reply(req);
    if (force > 0) force_release(req, 1);
    if (force == 0) hold_release(req, 1);
}

void semaphores_inspect(struct gw_request *req) {
    if (!watch_if_asked(req, 1)) hold_inspect(req, 1);
}
