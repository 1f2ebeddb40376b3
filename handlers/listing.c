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

/* Digits only, 1 to max of them: a SCAN cursor, up to 2^64 - 1 (beyond
 * decimal_parse's long long). */
static int all_digits(const char *s, size_t len, size_t max) {
    if (len < 1 || len > max) return 0;
    for (size_t i = 0; i < len; i++)
        if (s[i] < '0' || s[i] > '9') return 0;
    return 1;
}

void listing_cursor_encode(const struct listing_cursor *c, char *out, size_t cap) {
    out[0] = '\0';
    if (c->master < 0 && strcmp(c->scan, "0") == 0 && !c->after[0]) return;
    char raw[LISTING_CURSOR_RAW_MAX + 1], master[16] = "";
    if (c->master >= 0) snprintf(master, sizeof master, "%d:", c->master);
    size_t len;
    if (c->after[0])
        len = (size_t)snprintf(raw, sizeof raw, "c%s%s %s %s", master, c->scan, c->next, c->after);
    else
        len = (size_t)snprintf(raw, sizeof raw, "c%s%s", master, c->scan);
    if (len >= sizeof raw) return;
    size_t o = 0;
    for (size_t i = 0; i < len && o + 4 < cap; i += 3) {
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

int listing_cursor_decode(const char *cursor, struct listing_cursor *c) {
    memset(c, 0, sizeof *c);
    c->master = -1;
    c->scan[0] = '0';
    if (!cursor || !*cursor) return 0;
    size_t len = strlen(cursor), o = 0;
    if (len > LISTING_CURSOR_MAX || len % 4 == 1) return -1;
    char raw[LISTING_CURSOR_RAW_MAX + 1];
    unsigned acc = 0;
    int bits = 0;
    for (size_t i = 0; i < len; i++) {
        const char *p = strchr(B64URL, cursor[i]);
        if (!p) return -1;
        acc = (acc << 6 | (unsigned)(p - B64URL)) & 0xffffff;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            if (o >= LISTING_CURSOR_RAW_MAX) return -1;
            raw[o++] = (char)(acc >> bits & 0xff);
        }
    }
    raw[o] = '\0';
    if (o < 2 || raw[0] != 'c') return -1;
    /* "c" [master ":"] scan [" " next " " after] */
    char *s = raw + 1, *colon = strchr(s, ':'), *sp = strchr(s, ' ');
    if (colon && (!sp || colon < sp)) {
        long long master;
        if (decimal_parse(s, (size_t)(colon - s), 0, 99999, &master) < 0) return -1;
        c->master = (int)master;
        s = colon + 1;
    }
    size_t n = sp ? (size_t)(sp - s) : strlen(s);
    if (!all_digits(s, n, 20)) return -1;
    memcpy(c->scan, s, n);
    c->scan[n] = '\0';
    if (!sp) return 0;
    s = sp + 1;
    sp = strchr(s, ' ');
    if (!sp || !all_digits(s, (size_t)(sp - s), 20)) return -1;
    memcpy(c->next, s, (size_t)(sp - s));
    c->next[sp - s] = '\0';
    s = sp + 1;
    if (!name_valid(s, strlen(s))) return -1;
    memcpy(c->after, s, strlen(s) + 1);
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

/* One held name: {name, kind, limit, queued, 7 values a holder...}:
 * owner, key id, fence, count, ms left, renewed at, acquired at (ms; 0
 * for a permit granted before permits kept their grant time). */
static cJSON *hold_entry(const redisReply *e, int semaphore) {
    static const char *const modes[] = {"exclusive", "exclusive", "shared", "permit"};
    long long kind = redis_reply_int(e, 1, 0);
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "name", redis_reply_str(e, 0));
    if (semaphore)
        json_add_int(o, "limit", redis_reply_int(e, 2, 0));
    else
        cJSON_AddStringToObject(o, "mode", modes[kind >= 1 && kind <= 3 ? kind : 1]);
    cJSON *holders = cJSON_AddArrayToObject(o, "holders");
    for (size_t i = 4; i + 7 <= e->elements; i += 7) {
        cJSON *h = cJSON_CreateObject();
        if (*redis_reply_str(e, i)) cJSON_AddStringToObject(h, "owner", redis_reply_str(e, i));
        if (*redis_reply_str(e, i + 1))
            cJSON_AddStringToObject(h, "key_id", redis_reply_str(e, i + 1));
        if (!semaphore) json_add_int(h, "fence", redis_reply_int(e, i + 2, 0));
        json_add_int(h, "count", redis_reply_int(e, i + 3, 0));
        json_add_int(h, "ttl_ms", redis_reply_int(e, i + 4, 0));
        if (redis_reply_int(e, i + 6, 0) > 0)
            add_time(h, "acquired_at", redis_reply_int(e, i + 6, 0));
        add_time(h, "renewed_at", redis_reply_int(e, i + 5, 0));
        cJSON_AddItemToArray(holders, h);
    }
    json_add_int(o, "fair_waiters", redis_reply_int(e, 3, 0));
    return o;
}

static cJSON *id_entry(const redisReply *e) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "namespace", redis_reply_str(e, 0));
    add_time(o, "last_used_at", (handlers_config()->id_epoch + redis_reply_int(e, 1, 0)) * 1000);
    json_add_int(o, "last_sequence", redis_reply_int(e, 2, 0));
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
    struct listing_cursor at;  /* the call to make: master, SCAN cursor, where to resume in it */
    char pattern[PATTERN_MAX]; /* the SCAN MATCH pattern (listing_pattern) */
};

static void list_call_free(void *ctx) {
    struct list_call *lc = ctx;
    cJSON_Delete(lc->page);
    free(lc);
}

static void list_next(struct gw_request *req);

static int by_name(const void *a, const void *b) {
    const redisReply *x = *(const redisReply *const *)a, *y = *(const redisReply *const *)b;
    return strcmp(x->element[0]->str, y->element[0]->str);
}

/* The call's entries (held names: arrays whose first element is the name),
 * sorted by name so that a page can end in the middle of them and the next
 * page go on after the last name shown.  Returns how many. */
static size_t sorted_entries(const redisReply *r, const redisReply **out) {
    size_t n = 0;
    for (size_t i = 1; i < r->elements; i++) {
        const redisReply *e = r->element[i];
        if (e->type == REDIS_REPLY_ARRAY && e->elements >= 1 &&
            e->element[0]->type == REDIS_REPLY_STRING)
            out[n++] = e;
    }
    qsort(out, n, sizeof *out, by_name);
    return n;
}

/* Where a SCAN cursor stands in Redis's scan order: its bits reversed
 * (Redis steps through the table in reverse-binary order, so this is a
 * position in the hash space whatever the table's size); "0", the end,
 * after everything. */
static int scan_position_cmp(const char *a, const char *b) {
    unsigned long long x = strtoull(a, NULL, 10), y = strtoull(b, NULL, 10), rx = 0, ry = 0;
    if (x == 0 || y == 0) return (x == 0) - (y == 0);
    for (int i = 0; i < 64; i++) {
        rx = rx << 1 | (x >> i & 1);
        ry = ry << 1 | (y >> i & 1);
    }
    return (rx > ry) - (rx < ry);
}

static void list_reply(struct gw_request *req) {
    struct list_call *lc = req->ctx;
    char cursor[LISTING_CURSOR_MAX + 1];
    listing_cursor_encode(&lc->at, cursor, sizeof cursor);
    cJSON_AddStringToObject(lc->page, "cursor", cursor);
    cJSON *page = lc->page;
    lc->page = NULL;
    reply_json(req, 200, page);
}

static void list_done(void *arg, const struct redis_result *res) {
    struct gw_request *req = arg;
    struct list_call *lc = req->ctx;
    const redisReply *r = res->ok ? res->reply : NULL;
    if (!res->ok || r->type != REDIS_REPLY_ARRAY || r->elements < 1 ||
        r->element[0]->type != REDIS_REPLY_STRING || strlen(r->element[0]->str) > 20) {
        reply_problem(req, CODE_BACKEND_UNAVAILABLE, "Redis: %s",
                      res->ok ? "an unexpected answer to list.lua" : res->error);
        return;
    }
    const char *next = r->element[0]->str;
    const redisReply **entries = alloc_check(malloc((r->elements + 1) * sizeof *entries));
    size_t n = sorted_entries(r, entries);
    /* at.after, when set, says: every name up to it whose key lies between
     * at.scan and at.next (in scan order) has been shown.  This call
     * covers at.scan up to next: its names up to at.after are skipped.  If
     * it went past at.next (keys of its range were deleted or expired, or
     * the table shrank: SCAN's COUNT counts keys, matching or not), names
     * up to at.after found past at.next may not have been shown: the
     * listing goes on from at.next, not next, and shows those (and again
     * the others past at.next: a name may be listed twice, never missed).
     * Every page either shows names past at.after or moves at.scan on. */
    int resuming = lc->at.after[0] != '\0';
    int past = resuming && scan_position_cmp(next, lc->at.next) > 0;
    const char *last = NULL;
    size_t i = 0;
    for (; i < n; i++) {
        const char *name = entries[i]->element[0]->str;
        if (resuming && strcmp(name, lc->at.after) <= 0) continue;
        /* With auth on, a page shows only the names the key may read. */
        if (!access_may(req, list_kind[lc->what], name, AUTH_READ)) continue;
        if (lc->nitems == lc->limit) break; /* full, with more in this call */
        cJSON_AddItemToArray(lc->items, lc->what == LIST_IDS
                                            ? id_entry(entries[i])
                                            : hold_entry(entries[i], lc->what == LIST_SEMAPHORES));
        lc->nitems++;
        last = name;
    }
    if (i < n) { /* the page ends in this call: the next page makes it again */
        if (!past) snprintf(lc->at.next, sizeof lc->at.next, "%s", next);
        snprintf(lc->at.after, sizeof lc->at.after, "%s", last ? last : lc->at.after);
        free(entries);
        list_reply(req);
        return;
    }
    free(entries);
    if (past) { /* go on from where the names up to at.after were known */
        memcpy(lc->at.scan, lc->at.next, sizeof lc->at.scan);
        lc->at.after[0] = '\0';
    } else {
        if (!resuming || scan_position_cmp(next, lc->at.next) == 0) lc->at.after[0] = '\0';
        snprintf(lc->at.scan, sizeof lc->at.scan, "%s", next);
    }
    /* Cluster mode: one master's SCAN done, the next one's from 0 (then
     * "0" means its start, not the end). */
    int done = strcmp(lc->at.scan, "0") == 0;
    if (done && lc->at.master >= 0 && lc->at.master + 1 < redis_cluster_masters()) {
        lc->at.master++;
        done = 0;
    }
    if (done) lc->at.master = -1;
    if (!done && lc->nitems < lc->limit && lc->calls < lc->max_calls) {
        list_next(req);
        return;
    }
    list_reply(req);
}

/* One more list.lua call, always of LISTING_COUNT keys, so that a page
 * ending in the middle of a call's keys can make the same call again.
 * Quorum mode: the first master (redis_eval's node), see listing.h.
 * Cluster mode: list_cluster.lua on the master being scanned, each in
 * turn. */
static void list_next(struct gw_request *req) {
    struct list_call *lc = req->ctx;
    char count[24];
    snprintf(count, sizeof count, "%d", LISTING_COUNT);
    const char *argv[] = {lc->at.scan, lc->pattern, count, lc->what == LIST_IDS ? "i" : "h"};
    size_t lens[4];
    for (int i = 0; i < 4; i++) lens[i] = strlen(argv[i]);
    lc->calls++;
    listing_scan(lc->at.master, argv, lens, list_done, req);
}

void listing_scan(int master, const char *const argv[4], const size_t lens[4], redis_cb cb,
                  void *arg) {
    if (backend->per_slot)
        redis_eval_at_master(master, SCRIPT_LIST_CLUSTER, 4, argv, lens, cb, arg);
    else
        redis_eval(SCRIPT_LIST, 0, 4, argv, lens, cb, arg);
}

const char *listing_prefix_or_reply(struct gw_request *req) {
    const char *prefix = http_query(req, "prefix");
    if (!prefix) return "";
    if (*prefix && !name_valid(prefix, strlen(prefix))) {
        reply_problem(req, CODE_INVALID_NAME,
                      "a prefix is up to %d bytes of [A-Za-z0-9._:-] after percent-decoding",
                      NAME_MAX_LEN);
        return NULL;
    }
    return prefix;
}

/* Reads prefix, limit and cursor, or answers 400. */
static void list(struct gw_request *req, enum listing_what what) {
    const char *prefix = listing_prefix_or_reply(req), *q_limit = http_query(req, "limit");
    const char *q_cursor = http_query(req, "cursor");
    if (!prefix) return;
    long long limit = LISTING_DEFAULT_LIMIT;
    if (q_limit && decimal_parse(q_limit, strlen(q_limit), 1, LISTING_MAX_LIMIT, &limit) < 0) {
        reply_problem(req, CODE_INVALID_FIELD, "limit must be an integer from 1 to %d",
                      LISTING_MAX_LIMIT);
        return;
    }
    struct list_call *lc = alloc_check(calloc(1, sizeof *lc));
    req->ctx = lc;
    req->ctx_free = list_call_free;
    /* A cursor names a master only in cluster mode, and one that exists. */
    if (listing_cursor_decode(q_cursor, &lc->at) < 0 ||
        (lc->at.master >= 0) != (backend->per_slot && q_cursor && *q_cursor) ||
        (lc->at.master >= 0 && lc->at.master >= redis_cluster_masters())) {
        reply_problem(req, CODE_INVALID_FIELD,
                      "cursor must be one a previous page of this listing gave");
        return;
    }
    if (backend->per_slot && lc->at.master < 0) lc->at.master = 0;
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
