/* guard.c -- see guard.h. */
#include "handlers/guard.h"
#include "server/layout.h"
#include "server/lossguard.h"
#include "server/memguard.h"
#include "server/reply.h"
#include "handlers/handlers.h"
#include "server/body.h"
#include "server/request.h"
#include "server/router.h"

#include <stdio.h>
#include <string.h>

static int refuse(struct gw_request *req, const char *what) {
    char why[256] = "a Redis master may evict";
    memguard_describe(why, sizeof why);
    reply_problem(req, CODE_REDIS_MAY_EVICT,
                  "%s: it may evict held locks, so no %s is granted until it is noeviction", why,
                  what);
    return 1;
}

/* A master lost its data: until the longest lease has run out since. */
static int lost(struct gw_request *req) {
    int64_t left;
    if (!lossguard_refusing(&left)) return 0;
    char why[300] = "a Redis master lost its data", secs[24];
    lossguard_describe(why, sizeof why);
    snprintf(secs, sizeof secs, "%lld", (long long)((left + 999) / 1000));
    reply_header(req, "Retry-After", secs);
    reply_problem(req, CODE_REDIS_DATA_LOST, "%s", why);
    return 1;
}

int guard_grant_or_reply(struct gw_request *req) {
    if (lost(req)) return 1;
    return memguard_refusing() ? refuse(req, "lock, permit or session") : 0;
}

/* Not after a data loss: ids have their own answer to it (an era and a
 * jump ahead, docs/ids.md), so they are served through it. */
int guard_ids_or_reply(struct gw_request *req) {
    return memguard_ids_refusing() ? refuse(req, "id") : 0;
}

int guard_layout_or_reply(struct gw_request *req) {
    if (strncmp(router_routes[req->route].path, "/v1/", 4) != 0) return GW_OK;
    char why[256];
    if (layout_refusing(why, sizeof why)) {
        reply_problem(req, CODE_LAYOUT_UNSUPPORTED, "%s", why);
        return GW_REPLIED;
    }
    return GW_OK;
}

long long guard_max_lease_ms(void) { return handlers_config()->max_lease_ms; }

long long guard_default_lease_ms(void) {
    return guard_max_lease_ms() < 30000 ? guard_max_lease_ms() : 30000;
}
