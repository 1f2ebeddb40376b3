/* guard.c -- see guard.h. */
#include "handlers/guard.h"
#include "server/memguard.h"
#include "server/reply.h"

static int refuse(struct gw_request *req, const char *what) {
    char why[256] = "a Redis master may evict";
    memguard_describe(why, sizeof why);
    reply_problem(req, CODE_REDIS_MAY_EVICT,
                  "%s: it may evict held locks, so no %s is granted until it is noeviction", why,
                  what);
    return 1;
}

int guard_grant_or_reply(struct gw_request *req) {
    return memguard_refusing() ? refuse(req, "lock, permit or session") : 0;
}

int guard_ids_or_reply(struct gw_request *req) {
    return memguard_ids_refusing() ? refuse(req, "id") : 0;
}
