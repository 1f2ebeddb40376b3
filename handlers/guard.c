/* guard.c -- see guard.h. */
#include "handlers/guard.h"
#include "server/layout.h"
#include "server/lossguard.h"
#include "server/memguard.h"
#include "server/redis.h"
#include "server/request.h"
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

static void refuse_lost(struct gw_request *req, int64_t left, const char *why) {
    char secs[24];
    snprintf(secs, sizeof secs, "%lld", (long long)((left + 999) / 1000));
    reply_header(req, "Retry-After", secs);
    reply_problem(req, CODE_REDIS_DATA_LOST, "%s", why);
}

/* A master lost its data: until the longest lease has run out since.
 * Every grant (one master, or too few quorum masters left), or in Cluster
 * mode those of name, whose master it was. */
static int lost(struct gw_request *req, const char *name) {
    int64_t left;
    char why[400] = "a Redis master lost its data", who[80];
    if (lossguard_refusing(&left)) {
        lossguard_describe(why, sizeof why);
        refuse_lost(req, left, why);
        return 1;
    }
    if (!redis_name_lost(name, &left, who, sizeof who)) return 0;
    snprintf(why, sizeof why,
             "Redis master %s, which serves '%s', lost its data: no lock is granted there for "
             "%lld ms more",
             who, name, (long long)left);
    refuse_lost(req, left, why);
    return 1;
}

int guard_lost_for(const char *name, int64_t *left_ms) {
    return lossguard_refusing(left_ms) || redis_name_lost(name, left_ms, NULL, 0);
}

void guard_lost_reply(struct gw_request *req, char *const *names, int n, const char *why) {
    for (int i = 0; i < n; i++)
        if (lost(req, names[i])) return;
    refuse_lost(req, 1000,
                why ? why
                    : "a Redis master's marker key changed since this gateway last read it: it "
                      "lost its data");
}

int guard_grant_or_reply(struct gw_request *req) {
    if (lost(req, req->name)) return 1;
    return memguard_refusing() ? refuse(req, "lock, permit or session") : 0;
}

int guard_names_or_reply(struct gw_request *req, char *const *names, int n) {
    for (int i = 0; i < n; i++)
        if (lost(req, names[i])) return 1;
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
