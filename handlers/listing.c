/* listing.c -- see listing.h. */
#include "handlers/listing.h"
#include "common/alloc.h"
#include "common/decimal.h"
#include "handlers/backend.h"
#include "handlers/access.h"
#include "handlers/handlers.h"
#include "server/body.h"
#include "server/http.h"
#include "server/redis.h"
#include "server/reply.h"

#include <cjson/cJSON.h>
#include <hiredis/hiredis.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define PATTERN_MAX (2 * (GW_PREFIX_MAX + NAME_MAX_LEN) + 16)
#define CURSOR_MAX  48

/* ---- pattern and cursor (pure, unit-tested) --------------------------------------- */

static int glob_char(char c) { return c == '*' || c == '?' || c == '[' || c == ']' || c == '\\'; }

int listing_pattern(const char *key_prefix, const char *kind, const char *name_prefix, char *out,
                    size_t cap) {
    size_t n = 0;
    const char *parts[] = {key_prefix, kind, ":{", name_prefix};
    for (int p = 0; p < 4; p++)
        for (const char *s = parts[p]; *s; s++) {
            if (n + 3 >= cap) return -1;
            if (glob_char(*s)) out[n++] = '\\';
            out[n++] = *s;
        }
    if (n + 3 > cap) return -1;
    memcpy(out + n, "*}", 3);
    return (int)n + 2;
}

static const char B64URL[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

void listing_cursor_encode(const char *scan_cursor, char *out, size_t cap) {
    out[0] = '\0';
    if (strcmp(scan_cursor, "0") == 0) return;
    char raw[32];
    size_t len = (size_t)snprintf(raw, sizeof raw, "c%s", scan_cursor), o = 0;
    for (size_t i = 0; i < len && o + 5 < cap; i += 3) {
        unsigned v = (unsigned char)raw[i] << 16;
        if (i + 1 < len) v |= (unsigned char)raw[i + 1] << 8;
        if (i + 2 < len) v |= (unsigned char)raw[i + 2];
        out[o++] = B64URL[v >> 18 & 63];
        out[o++] = B64URL[v >> 12 & 63];
        if (i + 1 < len) out[o++] = B64URL[v >> 6 & 63];
        if (i + 2 < len) out[o++] = B64URL[v & 63];
    }
    out[o] = '\0';
}

int listing_cursor_decode(const char *cursor, char *scan_cursor, size_t cap) {
    snprintf(scan_cursor, cap, "0");
    if (!cursor || !*cursor) return 0;
    size_t len = strlen(cursor), o = 0;
    if (len > CURSOR_MAX || len % 4 == 1) return -1;
    char raw[CURSOR_MAX];
    unsigned acc = 0;
    int bits = 0;
    for (size_t i = 0; i < len; i++) {
        const char *p = strchr(B64URL, cursor[i]);
        if (!p || !cursor[i]) return -1;
        acc = (acc << 6 | (unsigned)(p - B64URL)) & 0xffffff;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            raw[o++] = (char)(acc >> bits & 0xff);
        }
    }
    if (o < 2 || raw[0] != 'c' || o - 1 >= cap || o - 1 > 24) return -1;
    /* Digits; in cluster mode "<master>:<scan>", one colon between digits. */
    int colons = 0;
    for (size_t i = 1; i < o; i++) {
        if (raw[i] == ':' && i > 1 && i + 1 < o && !colons++) continue;
        if (raw[i] < '0' || raw[i] > '9') return -1;
    }
    if (!colons && o - 1 > 20) return -1;
    memcpy(scan_cursor, raw + 1, o - 1);
    scan_cursor[o - 1] = '\0';
    return 0;
}

/* ---- the request -------------------------------------------------------------------- */

enum listing_what { LIST_LOCKS, LIST_SEMAPHORES, LIST_IDS };
static const enum auth_kind list_kind[] = {AUTH_LOCKS, AUTH_SEMAPHORES, AUTH_IDS};

/* Milliseconds since the epoch as RFC 3339 UTC, e.g. 2026-11-23T23:20:01.123Z. */
static void add_time(cJSON *o, const char *key, long long ms) {
    time_t secs = (time_t)(ms / 1000);
    struct tm tm;
    char buf[40];
    gmtime_r(&secs, &tm);
    size_t n = strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(buf + n, sizeof buf - n, ".%03lldZ", ms % 1000);
    cJSON_AddStringToObject(o, key, buf);
}

static long long int_at(const redisReply *r, size_t i) {
    return i < r->elements && r->element[i]->type == REDIS_REPLY_INTEGER ? r->element[i]->integer
                                                                         : 0;
}
static const char *str_at(const redisReply *r, size_t i) {
    return i < r->elements && r->element[i]->type == REDIS_REPLY_STRING ? r->element[i]->str : "";
}

/* One held name: {name, kind, limit, queued, 6 values a holder...}. */
static cJSON *hold_entry(const redisReply *e, int semaphore) {
    static const char *const modes[] = {"exclusive", "exclusive", "shared", "permit"};
    long long kind = int_at(e, 1);
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "name", str_at(e, 0));
    if (semaphore)
        json_add_int(o, "limit", int_at(e, 2));
    else
        cJSON_AddStringToObject(o, "mode", modes[kind >= 1 && kind <= 3 ? kind : 1]);
    cJSON *holders = cJSON_AddArrayToObject(o, "holders");
    for (size_t i = 4; i + 6 <= e->elements; i += 6) {
        cJSON *h = cJSON_CreateObject();
        if (*str_at(e, i)) cJSON_AddStringToObject(h, "owner", str_at(e, i));
        if (*str_at(e, i + 1)) cJSON_AddStringToObject(h, "key_id", str_at(e, i + 1));
        if (!semaphore) json_add_int(h, "fence", int_at(e, i + 2));
        json_add_int(h, "count", int_at(e, i + 3));
        json_add_int(h, "ttl_ms", int_at(e, i + 4));
        /* A fence is Redis's clock in microseconds at the grant (or one
         * above the name's last fence, when that was higher): the time a
         * lock was acquired.  Permits have no fence: their last grant or
         * extension is what there is. */
        if (!semaphore) add_time(h, "acquired_at", int_at(e, i + 2) / 1000);
        add_time(h, "renewed_at", int_at(e, i + 5));
        cJSON_AddItemToArray(holders, h);
    }
    json_add_int(o, "fair_waiters", int_at(e, 3));
    return o;
}

static cJSON *id_entry(const redisReply *e) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "namespace", str_at(e, 0));
    add_time(o, "last_used_at", (handlers_config()->id_epoch + int_at(e, 1)) * 1000);
    json_add_int(o, "last_sequence", int_at(e, 2));
    return o;
}

/* One page being gathered: list.lua calls of LISTING_COUNT keys each,
 * until the page holds limit entries, the SCAN ends, or max_calls. */
struct list_call {
    enum listing_what what;    /* locks, semaphores or ids */
    long long limit;           /* entries wanted on the page */
    int calls, max_calls;      /* list.lua calls made, and allowed */
    cJSON *page;               /* the answer being built */
    cJSON *items;              /* its array */
    int nitems;                /* entries in it */
    char cursor[24];           /* Redis's SCAN cursor to go on from */
    int master;                /* cluster mode: the master being scanned (ordinal) */
    char pattern[PATTERN_MAX]; /* the SCAN MATCH pattern (listing_pattern) */
};

static void list_call_free(void *ctx) {
    struct list_call *lc = ctx;
    cJSON_Delete(lc->page);
    free(lc);
}

static void list_next(struct gw_request *req);

static void list_done(void *arg, const struct redis_result *res) {
    struct gw_request *req = arg;
    struct list_call *lc = req->ctx;
    const redisReply *r = res->ok ? res->reply : NULL;
    if (!res->ok || r->type != REDIS_REPLY_ARRAY || r->elements < 1 ||
        r->element[0]->type != REDIS_REPLY_STRING) {
        reply_problem(req, CODE_BACKEND_UNAVAILABLE, "Redis: %s",
                      res->ok ? "an unexpected answer to list.lua" : res->error);
        return;
    }
    for (size_t i = 1; i < r->elements; i++) {
        const redisReply *e = r->element[i];
        if (e->type != REDIS_REPLY_ARRAY) continue;
        /* With auth on, a page shows only the names the key may read. */
        if (e->elements < 1 || e->element[0]->type != REDIS_REPLY_STRING ||
            !access_may(req, list_kind[lc->what], e->element[0]->str, AUTH_READ))
            continue;
        cJSON_AddItemToArray(lc->items, lc->what == LIST_IDS
                                            ? id_entry(e)
                                            : hold_entry(e, lc->what == LIST_SEMAPHORES));
        lc->nitems++;
    }
    snprintf(lc->cursor, sizeof lc->cursor, "%s", r->element[0]->str);
    /* Cluster mode: one master's SCAN done, the next one's from 0 (then
     * "0" means its start, not the end). */
    int fresh = 0;
    if (backend->per_slot && strcmp(lc->cursor, "0") == 0 &&
        lc->master + 1 < redis_cluster_masters()) {
        lc->master++;
        fresh = 1;
    }
    int done = strcmp(lc->cursor, "0") == 0 && !fresh;
    if (!done && lc->nitems < lc->limit && lc->calls < lc->max_calls) {
        list_next(req);
        return;
    }
    char cursor[CURSOR_MAX + 8], scan[48];
    if (backend->per_slot && !done)
        snprintf(scan, sizeof scan, "%d:%s", lc->master, lc->cursor);
    else
        snprintf(scan, sizeof scan, "%s", lc->cursor);
    listing_cursor_encode(scan, cursor, sizeof cursor);
    cJSON_AddStringToObject(lc->page, "cursor", cursor);
    cJSON *page = lc->page;
    lc->page = NULL;
    reply_json(req, 200, page);
}

/* One more list.lua call.  Quorum mode: the first master (redis_eval's
 * node), see listing.h.  Cluster mode: list_cluster.lua on the master
 * being scanned, each in turn. */
static void list_next(struct gw_request *req) {
    struct list_call *lc = req->ctx;
    char count[24];
    long long want = lc->limit - lc->nitems;
    snprintf(count, sizeof count, "%lld", want < LISTING_COUNT ? want : LISTING_COUNT);
    const char *argv[] = {lc->cursor, lc->pattern, count, lc->what == LIST_IDS ? "i" : "h"};
    size_t lens[4];
    for (int i = 0; i < 4; i++) lens[i] = strlen(argv[i]);
    lc->calls++;
    if (backend->per_slot)
        redis_eval_at_master(lc->master, SCRIPT_LIST_CLUSTER, 4, argv, lens, list_done, req);
    else
        redis_eval(SCRIPT_LIST, 0, 4, argv, lens, list_done, req);
}

/* Reads prefix, limit and cursor, or answers 400. */
static void list(struct gw_request *req, enum listing_what what) {
    const char *prefix = http_query(req, "prefix"), *q_limit = http_query(req, "limit");
    const char *q_cursor = http_query(req, "cursor");
    if (!prefix) prefix = "";
    if (*prefix && !name_valid(prefix, strlen(prefix))) {
        reply_problem(req, CODE_INVALID_NAME,
                      "a prefix is up to %d bytes of [A-Za-z0-9._:-] after percent-decoding",
                      NAME_MAX_LEN);
        return;
    }
    long long limit = LISTING_DEFAULT_LIMIT;
    if (q_limit && decimal_parse(q_limit, strlen(q_limit), 1, LISTING_MAX_LIMIT, &limit) < 0) {
        reply_problem(req, CODE_INVALID_FIELD, "limit must be an integer from 1 to %d",
                      LISTING_MAX_LIMIT);
        return;
    }
    struct list_call *lc = alloc_check(calloc(1, sizeof *lc));
    req->ctx = lc;
    req->ctx_free = list_call_free;
    char *colon;
    if (listing_cursor_decode(q_cursor, lc->cursor, sizeof lc->cursor) < 0 ||
        (colon = strchr(lc->cursor, ':'), colon && !backend->per_slot)) {
        reply_problem(req, CODE_INVALID_FIELD,
                      "cursor must be one a previous page of this listing gave");
        return;
    }
    if (colon) { /* cluster mode: "<master>:<scan>" */
        lc->master = atoi(lc->cursor);
        memmove(lc->cursor, colon + 1, strlen(colon + 1) + 1);
    }
    static const char *const kinds[] = {"lock", "sem", "id"};
    static const char *const member[] = {"locks", "semaphores", "namespaces"};
    listing_pattern(handlers_config()->key_prefix, kinds[what], prefix, lc->pattern,
                    sizeof lc->pattern);
    lc->what = what;
    lc->limit = limit;
    /* Enough calls to scan about twice the keys a page asks for: a page
     * over a sparse prefix ends early, with a cursor, rather than scan the
     * whole keyspace in one request. */
    lc->max_calls = (int)(2 * ((limit + LISTING_COUNT - 1) / LISTING_COUNT)) + 2;
    lc->page = alloc_check(cJSON_CreateObject());
    lc->items = cJSON_AddArrayToObject(lc->page, member[what]);
    list_next(req);
}

void listing_locks(struct gw_request *req) { list(req, LIST_LOCKS); }
void listing_semaphores(struct gw_request *req) { list(req, LIST_SEMAPHORES); }
void listing_ids(struct gw_request *req) { list(req, LIST_IDS); }
