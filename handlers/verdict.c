/* verdict.c -- reading a lua/ script's answer into its verdict (verdict.h)
 * and values: one place for the shapes the scripts answer in. */
#include "handlers/verdict.h"
#include "server/redis.h"

#include <hiredis/hiredis.h>

_Static_assert(VERDICT_DATA_LOST == REDIS_MARKER_MOVED, "one answer, named twice");

/* Reads the script's reply: an array whose first n elements are integers
 * (fewer when the first is negative), or a bare integer, which stands for
 * an array of it and zeros (a fast path's answer: building a Lua table
 * costs Redis more than the rest of a release).  Returns the first, or
 * -100 with *err set when Redis failed or the reply has another shape. */
long long verdict_parse(const struct redis_result *res, long long *v, size_t n, const char **err) {
    *err = "Redis gave an unexpected answer";
    if (!res->ok) {
        *err = res->error;
        return VERDICT_ERROR;
    }
    const redisReply *r = res->reply;
    if (r->type == REDIS_REPLY_INTEGER) {
        for (size_t i = 0; i < n; i++) v[i] = i == 0 ? r->integer : 0;
        return r->integer;
    }
    if (r->type != REDIS_REPLY_ARRAY || r->elements < 1) return VERDICT_ERROR;
    for (size_t i = 0; i < n; i++) {
        if (i >= r->elements || r->element[i]->type != REDIS_REPLY_INTEGER) {
            if (i > 0 && v[0] < 0) break;
            return VERDICT_ERROR;
        }
        v[i] = r->element[i]->integer;
    }
    return v[0];
}

/* acquire.lua's answer in v[0..4]: {verdict, fence, count, ttl, holders},
 * or its fast path's bare fence, which means {1, fence, 1, ttl asked, 1}. */
long long verdict_parse_acquire(const struct redis_result *res, long long ttl_ms, long long *v,
                                const char **err) {
    if (res->ok && res->reply->type == REDIS_REPLY_INTEGER && res->reply->integer > 0) {
        v[0] = 1, v[1] = res->reply->integer, v[2] = 1, v[3] = ttl_ms, v[4] = 1;
        return VERDICT_GRANTED;
    }
    long long verdict = verdict_parse(res, v, 2, err);
    if (verdict > 0) verdict = verdict_parse(res, v, 5, err);
    return verdict;
}

static long long inspect_at(const struct redis_result *res, size_t i) {
    const redisReply *r = res->ok ? res->reply : NULL;
    return r && r->type == REDIS_REPLY_ARRAY && r->elements > i &&
                   r->element[i]->type == REDIS_REPLY_INTEGER
               ? r->element[i]->integer
               : VERDICT_ERROR;
}

const struct redis_result *verdict_pick_inspect(const struct redis_result *res, int n, int quorum) {
    const struct redis_result *held = NULL, *free_ = NULL, *failed = NULL;
    int nheld = 0, answered = 0;
    for (int i = 0; i < n; i++) {
        long long v = inspect_at(&res[i], 0);
        if (v == VERDICT_ERROR) {
            failed = &res[i];
            continue;
        }
        answered++;
        if (v == VERDICT_GRANTED) {
            nheld++;
            if (!held || inspect_at(&res[i], 3) > inspect_at(held, 3)) held = &res[i];
        } else {
            free_ = &res[i];
        }
    }
    if (answered < quorum) return failed;
    return nheld >= quorum ? held : free_ ? free_ : held;
}
