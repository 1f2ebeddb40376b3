/* test_ops.c -- issue 21 against the real binary and a real redis-server:
 * listing (paging, every allowed character, expiry between pages, prefix
 * filtering, semaphores, id namespaces), forced release with a waiter, and
 * watching (a change through another gateway, a timeout, an expiry, a new
 * holder, a watcher that hangs up).
 *
 * `build/tests/test_ops NAME` runs only the tests whose names contain NAME. */
#include "tests/integration/harness.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static struct h_redis redis;
static struct h_gw gw, gw2;

#define H(method, path, token, body) h_http(method, gw.port, path, token, body, NULL)

/* POSTs a lock (or semaphore when sem) with this body; returns its token
 * (malloc'd, "" on failure) and sets *fence. */
static char *take(const char *name, const char *body, long long *fence) {
    char path[300];
    snprintf(path, sizeof path, "/v1/locks/%s", name);
    struct h_resp r = H("POST", path, NULL, body);
    char *tok = strdup(r.status == 201 ? h_token(&r) : "");
    if (fence) *fence = r.status == 201 ? h_jint(&r, "fence") : -1;
    h_resp_free(&r);
    return tok;
}

/* ---- listing ------------------------------------------------------------------- */

/* Every page of GET path?prefix=..&limit=.., following cursors; calls
 * seen(entry) for each listed entry of member.  Returns pages read, or -1
 * on a failed page.  between(page) runs after each page, may be NULL. */
static int list_all(const char *what, const char *prefix, int limit, const char *member,
                    void (*seen)(cJSON *e, void *arg), void *arg, void (*between)(int page)) {
    char cursor[512] = "";
    int pages = 0;
    do {
        char path[1024];
        snprintf(path, sizeof path, "/v1/%s?prefix=%s&limit=%d&cursor=%s", what, prefix, limit,
                 cursor);
        struct h_resp r = H("GET", path, NULL, NULL);
        if (r.status != 200 || !r.json) {
            fprintf(stderr, "  page failed: %ld %s\n", r.status, r.body ? r.body : "");
            h_resp_free(&r);
            return -1;
        }
        cJSON *items = cJSON_GetObjectItem(r.json, member), *e;
        CHECK(cJSON_GetArraySize(items) <= limit); /* a page never holds more than limit */
        cJSON_ArrayForEach(e, items) seen(e, arg);
        snprintf(cursor, sizeof cursor, "%s", h_jstr(&r, "cursor"));
        h_resp_free(&r);
        if (between) between(pages);
        pages++;
    } while (cursor[0] && pages < 5000);
    return pages;
}

struct names {
    int n;
    char name[600][64];
    int bad;  /* entries without a live holder */
    int dups; /* entries listed again (SCAN may, when Redis resizes its table) */
};

static void collect(cJSON *e, void *arg) {
    struct names *ns = arg;
    const char *name = cJSON_GetStringValue(cJSON_GetObjectItem(e, "name"));
    cJSON *holders = cJSON_GetObjectItem(e, "holders"), *h;
    if (!name || cJSON_GetArraySize(holders) < 1) ns->bad++;
    cJSON_ArrayForEach(h, holders) {
        cJSON *ttl = cJSON_GetObjectItem(h, "ttl_ms");
        if (!ttl || ttl->valuedouble <= 0) ns->bad++;
    }
    for (int i = 0; i < ns->n; i++)
        if (name && strcmp(ns->name[i], name) == 0) {
            ns->dups++;
            return;
        }
    if (name && ns->n < 600) snprintf(ns->name[ns->n++], 64, "%s", name);
}

static int has(struct names *ns, const char *name) {
    for (int i = 0; i < ns->n; i++)
        if (strcmp(ns->name[i], name) == 0) return 1;
    return 0;
}

static void keep_first(cJSON *e, void *arg) {
    cJSON **first = arg;
    if (!*first) *first = cJSON_Duplicate(e, 1);
}

/* The first entry of a listing, following cursors (in cluster mode the
 * first pages may be other masters' and empty); NULL when none.  The
 * caller frees it (cJSON_Delete). */
static cJSON *first_listed(const char *what, const char *prefix, const char *member) {
    cJSON *first = NULL;
    list_all(what, prefix, 100, member, keep_first, &first, NULL);
    return first;
}

static void test_list_paging(void) {
    for (int i = 0; i < 250; i++) {
        char name[32];
        snprintf(name, sizeof name, "pg.%03d", i);
        free(take(name, "{\"ttl_ms\":60000,\"owner\":\"pager\"}", NULL));
    }
    free(take("pgx", "{\"ttl_ms\":60000}", NULL)); /* outside the prefix */
    static struct names ns;
    memset(&ns, 0, sizeof ns);
    int pages = list_all("locks", "pg.", 20, "locks", collect, &ns, NULL);
    CHECK(pages > 1); /* more names than one page */
    CHECK_EQ_INT(ns.n, 250);
    CHECK_EQ_INT(ns.bad, 0);
    CHECK(has(&ns, "pg.000") && has(&ns, "pg.249") && !has(&ns, "pgx"));

    /* A page's entry carries what the issue names. */
    cJSON *e = first_listed("locks", "pg.007", "locks");
    cJSON *h = cJSON_GetArrayItem(cJSON_GetObjectItem(e, "holders"), 0);
    CHECK_EQ_STR(cJSON_GetStringValue(cJSON_GetObjectItem(e, "mode")), "exclusive");
    CHECK_EQ_STR(cJSON_GetStringValue(cJSON_GetObjectItem(h, "owner")), "pager");
    CHECK(cJSON_GetObjectItem(h, "fence") && cJSON_GetObjectItem(h, "count") &&
          cJSON_GetObjectItem(h, "acquired_at") && cJSON_GetObjectItem(e, "fair_waiters"));
    char *text = e ? cJSON_PrintUnformatted(e) : NULL;
    CHECK(text && !strstr(text, "token")); /* a listing never shows a token */
    free(text);
    cJSON_Delete(e);
}

static int added_between;

/* Takes 20 more locks outside the prefix listed: keys added in the range
 * a page's call scanned make the repeated call stop sooner (SCAN's COUNT
 * counts keys, matching or not), which must miss nothing. */
static void add_between(int page) {
    for (int i = 0; i < 20; i++) {
        char name[32];
        snprintf(name, sizeof name, "limadd.%d", added_between++);
        free(take(name, "{\"ttl_ms\":60000}", NULL));
    }
}

static int deleted_between;

/* Deletes 15 keys outside the prefix listed: the repeated call then goes
 * further than before, and the listing must still miss nothing and end. */
static void delete_between(int page) {
    for (int i = 0; i < 15; i++) {
        char cmd[96];
        snprintf(cmd, sizeof cmd, "DEL lockgate:lock:{limdel.%d}", deleted_between++);
        h_redis_cli(&redis, cmd);
    }
}

/* limit caps a page, also where one SCAN call finds more names than the
 * page has room for: the next page goes on after the last name shown, so
 * every name is listed, whatever the limit, in about 25 / limit pages.  (A
 * name may be listed twice when keys are added to or deleted from the
 * range scanned between two pages, as SCAN may: repeats are bounded here,
 * not forbidden; a miss never is.) */
static void test_list_limit(void) {
    for (int i = 0; i < 25; i++) {
        char name[32];
        snprintf(name, sizeof name, "lim.%02d", i);
        free(take(name, "{\"ttl_ms\":60000}", NULL));
    }
    const int limits[] = {1, 3, 7, 25, 1000};
    for (int k = 0; k < 5; k++) {
        static struct names ns;
        memset(&ns, 0, sizeof ns);
        int pages = list_all("locks", "lim.", limits[k], "locks", collect, &ns, NULL);
        int least = (25 + limits[k] - 1) / limits[k];
        CHECK_EQ_INT(ns.n, 25);
        CHECK(ns.dups <= 25);
        CHECK(pages >= least && pages <= 2 * least + 3);
    }
    static struct names ns;
    memset(&ns, 0, sizeof ns);
    int pages = list_all("locks", "lim.", 3, "locks", collect, &ns, add_between);
    CHECK_EQ_INT(ns.n, 25);
    CHECK(ns.dups <= 25);
    CHECK(pages >= 9 && pages <= 40);
    for (int i = 0; i < 600; i++) {
        char name[32];
        snprintf(name, sizeof name, "limdel.%d", i);
        free(take(name, "{\"ttl_ms\":60000}", NULL));
    }
    memset(&ns, 0, sizeof ns);
    pages = list_all("locks", "lim.", 2, "locks", collect, &ns, delete_between);
    CHECK_EQ_INT(ns.n, 25);
    CHECK(ns.dups <= 25);
    CHECK(pages >= 13 && pages <= 40);
}

static void test_list_every_character(void) {
    const char *names[] = {"ch:AZaz09._:-", "ch:-_.:", "ch:x*", "ch:x", "ch:Q"};
    /* "ch:x*" is not a valid name: the gateway refuses it, nothing is listed. */
    for (int i = 0; i < 5; i++) free(take(names[i], "{\"ttl_ms\":60000}", NULL));
    static struct names ns;
    memset(&ns, 0, sizeof ns);
    CHECK(list_all("locks", "ch:", 2, "locks", collect, &ns, NULL) > 0);
    CHECK_EQ_INT(ns.n, 4);
    CHECK(has(&ns, "ch:AZaz09._:-") && has(&ns, "ch:-_.:") && has(&ns, "ch:x") && has(&ns, "ch:Q"));
    /* A prefix made of the characters a glob would read specially is not
     * a name; the ones a name may hold match literally. */
    memset(&ns, 0, sizeof ns);
    CHECK(list_all("locks", "ch:-_.", 10, "locks", collect, &ns, NULL) > 0);
    CHECK_EQ_INT(ns.n, 1);
    CHECK(has(&ns, "ch:-_.:"));
    struct h_resp r = H("GET", "/v1/locks?prefix=ch%3Ax%2A", NULL, NULL);
    CHECK_EQ_INT(r.status, 400);
    CHECK_EQ_STR(h_jcode(&r), "invalid_name");
    h_resp_free(&r);
    r = H("GET", "/v1/locks?prefix=ch%5B", NULL, NULL);
    CHECK_EQ_INT(r.status, 400);
    h_resp_free(&r);
}

static void test_list_prefix(void) {
    const char *names[] = {"pf.a", "pf.ab", "pfx.a", "zz.pf.a"};
    for (int i = 0; i < 4; i++) free(take(names[i], "{\"ttl_ms\":60000}", NULL));
    static struct names ns;
    memset(&ns, 0, sizeof ns);
    list_all("locks", "pf.", 100, "locks", collect, &ns, NULL);
    CHECK_EQ_INT(ns.n, 2);
    CHECK(has(&ns, "pf.a") && has(&ns, "pf.ab"));
    memset(&ns, 0, sizeof ns);
    list_all("locks", "pf.ab", 100, "locks", collect, &ns, NULL);
    CHECK_EQ_INT(ns.n, 1);
    /* A prefix sent percent-encoded (as a browser's encodeURIComponent
     * would ':') is decoded: "p%66%2E" is "pf.". */
    memset(&ns, 0, sizeof ns);
    list_all("locks", "p%66%2E", 100, "locks", collect, &ns, NULL);
    CHECK_EQ_INT(ns.n, 2);
    CHECK(has(&ns, "pf.a") && has(&ns, "pf.ab"));
}

static void sleep_after_first(int page) {
    if (page == 0) h_sleep_ms(2000);
}

static void test_list_expiry_between_pages(void) {
    for (int i = 0; i < 40; i++) {
        char name[32];
        snprintf(name, sizeof name, "ex.long.%02d", i);
        free(take(name, "{\"ttl_ms\":60000}", NULL));
        snprintf(name, sizeof name, "ex.short.%02d", i);
        free(take(name, "{\"ttl_ms\":1000}", NULL));
    }
    static struct names ns;
    memset(&ns, 0, sizeof ns);
    int pages = list_all("locks", "ex.", 5, "locks", collect, &ns, sleep_after_first);
    CHECK(pages > 2);
    int longs = 0, shorts = 0;
    for (int i = 0; i < ns.n; i++) {
        if (strncmp(ns.name[i], "ex.long.", 8) == 0) longs++;
        if (strncmp(ns.name[i], "ex.short.", 9) == 0) shorts++;
    }
    CHECK_EQ_INT(longs, 40);
    CHECK(shorts < 40); /* those read after the sleep had expired: not listed */
    CHECK_EQ_INT(ns.bad, 0);
}

static void test_list_semaphores_and_ids(void) {
    struct h_resp r = H("POST", "/v1/semaphores/ls.sem", NULL, "{\"limit\":3,\"ttl_ms\":60000}");
    CHECK_EQ_INT(r.status, 201);
    char token[64];
    snprintf(token, sizeof token, "%s", h_token(&r) ? h_token(&r) : "");
    h_resp_free(&r);
    r = H("POST", "/v1/semaphores/ls.sem", NULL, "{\"limit\":3,\"ttl_ms\":60000,\"owner\":\"o2\"}");
    h_resp_free(&r);
    /* A permit keeps when it was acquired: an extension later moves its
     * renewed_at, not its acquired_at. */
    h_sleep_ms(30);
    r = H("PATCH", "/v1/semaphores/ls.sem", token, "{\"ttl_ms\":60000}");
    CHECK_EQ_INT(r.status, 200);
    h_resp_free(&r);
    cJSON *e = first_listed("semaphores", "ls.", "semaphores");
    CHECK_EQ_STR(cJSON_GetStringValue(cJSON_GetObjectItem(e, "name")), "ls.sem");
    CHECK(cJSON_GetObjectItem(e, "limit") && cJSON_GetObjectItem(e, "limit")->valueint == 3);
    cJSON *holders = cJSON_GetObjectItem(e, "holders"), *h;
    CHECK_EQ_INT(cJSON_GetArraySize(holders), 2);
    int extended = 0;
    cJSON_ArrayForEach(h, holders) {
        const char *acquired = cJSON_GetStringValue(cJSON_GetObjectItem(h, "acquired_at"));
        const char *renewed = cJSON_GetStringValue(cJSON_GetObjectItem(h, "renewed_at"));
        CHECK(acquired && renewed && strlen(acquired) == 24 && !cJSON_GetObjectItem(h, "fence"));
        if (!acquired || !renewed) continue;
        if (!cJSON_GetObjectItem(h, "owner")) { /* the one extended */
            CHECK(strcmp(acquired, renewed) < 0);
            extended++;
        } else {
            CHECK_EQ_STR(acquired, renewed);
        }
    }
    CHECK_EQ_INT(extended, 1);
    cJSON_Delete(e);
    /* A permit's grant time (its record's fence field) is no fence: the
     * hash keeps no last fence (f) and, once its last permit is gone, holds
     * nothing but the marks of permits forced out (!<token>, until their
     * leases would have ended: lua/_holders.lua), where a lock's lingers
     * FENCE_KEEP_MS for its fence. */
    CHECK_EQ_STR(h_redis_cli(&redis, "HEXISTS lockgate:sem:{ls.sem} f"), "0");
    r = H("DELETE", "/v1/semaphores/ls.sem?force=true", NULL, NULL);
    CHECK_EQ_INT(r.status, 200);
    h_resp_free(&r);
    CHECK_EQ_STR(h_redis_cli(&redis, "EVAL \"local n = 0 for _, f in ipairs(redis.call('hkeys', "
                                     "KEYS[1])) do if string.sub(f, 1, 1) ~= '!' then n = n + 1 "
                                     "end end return n\" 1 lockgate:sem:{ls.sem}"),
                 "0");
    r = H("POST", "/v1/ids/ls.orders", NULL, NULL);
    h_resp_free(&r);
    e = first_listed("ids", "ls.", "namespaces");
    CHECK_EQ_STR(cJSON_GetStringValue(cJSON_GetObjectItem(e, "namespace")), "ls.orders");
    CHECK(cJSON_GetObjectItem(e, "last_used_at") != NULL);
    cJSON_Delete(e);
}

/* A holder record with attributes after the owner (the shared convention:
 * "\0k<key id>", written by auth, #19) lists its key_id; the owner stops
 * at the attributes.  Written here as an acquire with a key would. */
static void test_list_key_id(void) {
    const char *set =
        "EVAL \"local t = redis.call('TIME'); local now = t[1] * 1000 + math.floor(t[2] / 1000); "
        "redis.call('HSET', KEYS[1], 'x', struct.pack('<sI4I7I6I4', "
        "'tokentokentokentoken0123', 1, now * 1000, now + 60000, 60000) .. "
        "struct.pack('<I6I4', 0, 0) .. 'alice' .. string.char(0) .. 'kkey-7'); "
        "redis.call('PEXPIRE', KEYS[1], 70000); return 1\" 1 'lockgate:lock:{kid.a}'";
    CHECK_EQ_STR(h_redis_cli(&redis, set), "1");
    cJSON *e = first_listed("locks", "kid.", "locks");
    cJSON *h = cJSON_GetArrayItem(cJSON_GetObjectItem(e, "holders"), 0);
    CHECK_EQ_STR(cJSON_GetStringValue(cJSON_GetObjectItem(h, "owner")), "alice");
    CHECK_EQ_STR(cJSON_GetStringValue(cJSON_GetObjectItem(h, "key_id")), "key-7");
    cJSON_Delete(e);
    /* And the forced release ends it like any other. */
    struct h_resp r = H("DELETE", "/v1/locks/kid.a?force=true", NULL, NULL);
    CHECK_EQ_INT(r.status, 200);
    h_resp_free(&r);
}

static void test_list_bad_input(void) {
    /* ..., "c7:0" (a master that does not exist here, or a master at all
     * outside cluster mode), "c99999999999:1", "c0:5 6 a*" (not a name) */
    const char *bad[] = {"/v1/locks?limit=0",
                         "/v1/locks?limit=1001",
                         "/v1/locks?limit=x",
                         "/v1/locks?cursor=%21%21",
                         "/v1/locks?cursor=Zm9v",
                         "/v1/semaphores?prefix=a%20b",
                         "/v1/locks?cursor=Yzc6MA",
                         "/v1/locks?cursor=Yzk5OTk5OTk5OTk5OjE",
                         "/v1/locks?cursor=YzA6NSA2IGEq"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        struct h_resp r = H("GET", bad[i], NULL, NULL);
        CHECK_EQ_INT(r.status, 400);
        h_resp_free(&r);
    }
}

/* ---- forced release --------------------------------------------------------------- */

struct bg {
    pthread_t th;
    int port;
    char method[8], path[256], body[256];
    long status;
    long long fence, t_done;
    char index[32];
};

static void *bg_main(void *arg) {
    struct bg *b = arg;
    struct h_resp r = h_http(b->method, b->port, b->path, NULL, b->body[0] ? b->body : NULL, NULL);
    b->status = r.status;
    b->fence = r.json && cJSON_GetObjectItem(r.json, "fence") ? h_jint(&r, "fence") : -1;
    const char *idx = h_header(&r, "Lockgate-Index");
    snprintf(b->index, sizeof b->index, "%s", idx ? idx : "");
    b->t_done = h_now_ms();
    h_resp_free(&r);
    return NULL;
}

static void bg_start(struct bg *b, int port, const char *method, const char *path,
                     const char *body) {
    memset(b, 0, sizeof *b);
    b->port = port;
    snprintf(b->method, sizeof b->method, "%s", method);
    snprintf(b->path, sizeof b->path, "%s", path);
    snprintf(b->body, sizeof b->body, "%s", body ? body : "");
    pthread_create(&b->th, NULL, bg_main, b);
}

static void test_force_with_waiter(void) {
    long long fence;
    char *tok = take("fr.lock", "{\"ttl_ms\":60000}", &fence);
    CHECK(tok[0] != '\0');
    struct bg waiter;
    bg_start(&waiter, gw2.port, "POST", "/v1/locks/fr.lock",
             "{\"ttl_ms\":30000,\"wait_ms\":20000}");
    h_sleep_ms(300);
    long long t0 = h_now_ms();
    struct h_resp r = H("DELETE", "/v1/locks/fr.lock?force=true", NULL, NULL);
    CHECK_EQ_INT(r.status, 200);
    CHECK_EQ_INT(h_jint(&r, "holders_ended"), 1);
    h_resp_free(&r);
    pthread_join(waiter.th, NULL);
    CHECK_EQ_INT(waiter.status, 201); /* the waiter got it, at once */
    CHECK(waiter.t_done - t0 < 3000);
    CHECK(waiter.fence > fence); /* fences stay intact */
    /* The forced-out token holds nothing: extend and release say not_held. */
    r = H("PATCH", "/v1/locks/fr.lock", tok, "{\"ttl_ms\":5000}");
    CHECK_EQ_INT(r.status, 404);
    CHECK_EQ_STR(h_jcode(&r), "not_held");
    h_resp_free(&r);
    r = H("DELETE", "/v1/locks/fr.lock", tok, NULL);
    CHECK_EQ_INT(r.status, 404);
    h_resp_free(&r);
    /* Another token that never held it is still told someone else does. */
    r = H("PATCH", "/v1/locks/fr.lock", "neverheldneverheld0123", "{\"ttl_ms\":5000}");
    CHECK_EQ_INT(r.status, 409);
    h_resp_free(&r);
    free(tok);

    /* Semaphores: every permit ends and a waiter for a third gets one at
     * once; the forced-out permits' extend is not_held (even now that the
     * waiter holds one); force on nothing is 404; bad force 400. */
    char *permits[2];
    for (int i = 0; i < 2; i++) {
        r = H("POST", "/v1/semaphores/fr.sem", NULL, "{\"limit\":2,\"ttl_ms\":60000}");
        CHECK_EQ_INT(r.status, 201);
        permits[i] = strdup(r.status == 201 ? h_token(&r) : "");
        h_resp_free(&r);
    }
    bg_start(&waiter, gw2.port, "POST", "/v1/semaphores/fr.sem",
             "{\"limit\":2,\"ttl_ms\":30000,\"wait_ms\":20000}");
    h_sleep_ms(300);
    t0 = h_now_ms();
    r = H("DELETE", "/v1/semaphores/fr.sem?force=true", NULL, NULL);
    CHECK_EQ_INT(r.status, 200);
    CHECK_EQ_INT(h_jint(&r, "holders_ended"), 2);
    h_resp_free(&r);
    pthread_join(waiter.th, NULL);
    CHECK_EQ_INT(waiter.status, 201);
    CHECK(waiter.t_done - t0 < 3000);
    for (int i = 0; i < 2; i++) {
        r = H("PATCH", "/v1/semaphores/fr.sem", permits[i], "{\"ttl_ms\":5000}");
        CHECK_EQ_INT(r.status, 404);
        CHECK_EQ_STR(h_jcode(&r), "not_held");
        h_resp_free(&r);
        free(permits[i]);
    }
    r = H("DELETE", "/v1/semaphores/fr.sem?force=true", NULL, NULL); /* the waiter's */
    CHECK_EQ_INT(r.status, 200);
    CHECK_EQ_INT(h_jint(&r, "holders_ended"), 1);
    h_resp_free(&r);
    r = H("DELETE", "/v1/semaphores/fr.sem?force=true", NULL, NULL);
    CHECK_EQ_INT(r.status, 404);
    h_resp_free(&r);
    r = H("DELETE", "/v1/locks/fr.lock?force=yes", NULL, NULL);
    CHECK_EQ_INT(r.status, 400);
    h_resp_free(&r);
    CHECK(h_metric(&gw, "lockgate_forced_releases_total") >= 2);
}

/* ---- watch ------------------------------------------------------------------------ */

static void watch_path(char *out, size_t cap, const char *name, int ms, long long after) {
    snprintf(out, cap, "/v1/locks/%s?watch_ms=%d&after=%lld", name, ms, after);
}

static void test_watch_change_through_other_gateway(void) {
    long long fence;
    char *tok = take("wt.a", "{\"ttl_ms\":60000}", &fence);
    char path[256];
    watch_path(path, sizeof path, "wt.a", 20000, fence);
    struct bg w;
    bg_start(&w, gw.port, "GET", path, NULL);
    h_sleep_ms(500);
    CHECK_EQ_INT(w.status, 0); /* still watching */
    long long t0 = h_now_ms();
    struct h_resp r = h_http("DELETE", gw2.port, "/v1/locks/wt.a", tok, NULL, NULL);
    CHECK_EQ_INT(r.status, 200);
    h_resp_free(&r);
    pthread_join(w.th, NULL);
    CHECK_EQ_INT(w.status, 404); /* released: nobody holds it */
    CHECK_EQ_STR(w.index, "0");
    CHECK(w.t_done - t0 < 3000);

    /* A new holder through the other gateway wakes a watcher of "nobody". */
    watch_path(path, sizeof path, "wt.a", 20000, 0);
    bg_start(&w, gw.port, "GET", path, NULL);
    h_sleep_ms(500);
    CHECK_EQ_INT(w.status, 0);
    t0 = h_now_ms();
    r = h_http("POST", gw2.port, "/v1/locks/wt.a", NULL, "{\"ttl_ms\":60000}", NULL);
    CHECK_EQ_INT(r.status, 201);
    long long f2 = h_jint(&r, "fence");
    h_resp_free(&r);
    pthread_join(w.th, NULL);
    CHECK_EQ_INT(w.status, 200);
    CHECK_EQ_INT(w.fence, f2);
    CHECK_EQ_INT(atoll(w.index), f2);
    CHECK(w.t_done - t0 < 3000);

    /* Forced through the other gateway. */
    watch_path(path, sizeof path, "wt.a", 20000, f2);
    bg_start(&w, gw.port, "GET", path, NULL);
    h_sleep_ms(500);
    r = h_http("DELETE", gw2.port, "/v1/locks/wt.a?force=true", NULL, NULL, NULL);
    h_resp_free(&r);
    pthread_join(w.th, NULL);
    CHECK_EQ_INT(w.status, 404);
    free(tok);
}

static void test_watch_timeout_and_expiry(void) {
    long long fence;
    free(take("wt.b", "{\"ttl_ms\":60000}", &fence));
    char path[256];
    watch_path(path, sizeof path, "wt.b", 800, fence);
    long long t0 = h_now_ms();
    struct h_resp r = H("GET", path, NULL, NULL);
    long long took = h_now_ms() - t0;
    CHECK_EQ_INT(r.status, 200); /* the current state, unchanged */
    CHECK_EQ_INT(h_jint(&r, "fence"), fence);
    CHECK_EQ_INT(atoll(h_header(&r, "Lockgate-Index")), fence);
    CHECK(took >= 750 && took < 5000);
    h_resp_free(&r);

    /* A stale index answers at once. */
    watch_path(path, sizeof path, "wt.b", 20000, fence - 1);
    t0 = h_now_ms();
    r = H("GET", path, NULL, NULL);
    CHECK_EQ_INT(r.status, 200);
    CHECK(h_now_ms() - t0 < 2000);
    h_resp_free(&r);

    /* An expiry announces nothing: the watcher's timer at the lease end. */
    free(take("wt.c", "{\"ttl_ms\":1000}", &fence));
    watch_path(path, sizeof path, "wt.c", 20000, fence);
    t0 = h_now_ms();
    r = H("GET", path, NULL, NULL);
    took = h_now_ms() - t0;
    CHECK_EQ_INT(r.status, 404);
    CHECK(took >= 500 && took < 5000);
    h_resp_free(&r);

    const char *bad[] = {"/v1/locks/wt.b?watch_ms=0", "/v1/locks/wt.b?watch_ms=600001",
                         "/v1/locks/wt.b?watch_ms=10&after=-1",
                         "/v1/locks/wt.b?watch_ms=10&after=x"};
    for (int i = 0; i < 4; i++) {
        r = H("GET", bad[i], NULL, NULL);
        CHECK_EQ_INT(r.status, 400);
        h_resp_free(&r);
    }
}

/* The index a GET gives (Lockgate-Index, on every GET as Consul's). */
static long long index_of(int port, const char *path) {
    struct h_resp r = h_http("GET", port, path, NULL, NULL, NULL);
    const char *idx = h_header(&r, "Lockgate-Index");
    long long v = idx ? atoll(idx) : -1;
    h_resp_free(&r);
    return v;
}

/* Starts a watch of path from index after (on gw), and checks that it
 * parks: the index is still the name's. */
static void watch_parked(struct bg *w, const char *path, long long after) {
    char watch[256];
    snprintf(watch, sizeof watch, "%s?watch_ms=20000&after=%lld", path, after);
    bg_start(w, gw.port, "GET", watch, NULL);
    h_sleep_ms(500);
    CHECK_EQ_INT(w->status, 0);
}

/* A watch from an index that is no longer the name's answers at once. */
static void check_answers_at_once(const char *path, long long after, long long want_index) {
    char watch[256];
    snprintf(watch, sizeof watch, "%s?watch_ms=20000&after=%lld", path, after);
    long long t0 = h_now_ms();
    struct h_resp r = H("GET", watch, NULL, NULL);
    CHECK(h_now_ms() - t0 < 5000);
    const char *idx = h_header(&r, "Lockgate-Index");
    CHECK(idx && atoll(idx) == want_index && want_index != after);
    h_resp_free(&r);
}

/* Permits carry no fence: a semaphore's index sums its permits' grant
 * times, so another permit wakes a watcher, and a permit forced out and
 * another granted in its place is a change too (not one holder before and
 * after). */
static void test_watch_semaphore(void) {
    struct h_resp r = H("POST", "/v1/semaphores/wt.sem", NULL, "{\"limit\":3,\"ttl_ms\":60000}");
    CHECK_EQ_INT(r.status, 201);
    h_resp_free(&r);
    long long one = index_of(gw.port, "/v1/semaphores/wt.sem");
    CHECK(one > 1);
    struct bg w;
    watch_parked(&w, "/v1/semaphores/wt.sem", one);
    r = h_http("POST", gw2.port, "/v1/semaphores/wt.sem", NULL, "{\"limit\":3,\"ttl_ms\":60000}",
               NULL);
    h_resp_free(&r);
    pthread_join(w.th, NULL);
    CHECK_EQ_INT(w.status, 200);
    long long two = atoll(w.index);
    CHECK(two > 0 && two != one);
    CHECK_EQ_INT(index_of(gw.port, "/v1/semaphores/wt.sem"), two);

    /* limit 1: forced out, then another permit granted: still one holder,
     * a new index. */
    r = H("POST", "/v1/semaphores/wt.sem1", NULL, "{\"limit\":1,\"ttl_ms\":60000}");
    h_resp_free(&r);
    long long before = index_of(gw.port, "/v1/semaphores/wt.sem1");
    r = H("DELETE", "/v1/semaphores/wt.sem1?force=true", NULL, NULL);
    CHECK_EQ_INT(r.status, 200);
    h_resp_free(&r);
    r = h_http("POST", gw2.port, "/v1/semaphores/wt.sem1", NULL, "{\"limit\":1,\"ttl_ms\":60000}",
               NULL);
    CHECK_EQ_INT(r.status, 201);
    h_resp_free(&r);
    check_answers_at_once("/v1/semaphores/wt.sem1", before,
                          index_of(gw.port, "/v1/semaphores/wt.sem1"));
}

/* A shared lock: one of two holders leaving is a change, also when the
 * one who stays has the higher fence. */
static void test_watch_shared(void) {
    long long fa, fb;
    char *ta = take("wt.sh", "{\"ttl_ms\":60000,\"mode\":\"shared\"}", &fa);
    free(take("wt.sh", "{\"ttl_ms\":60000,\"mode\":\"shared\"}", &fb));
    CHECK(fb > fa);
    long long both = index_of(gw.port, "/v1/locks/wt.sh");
    CHECK(both > 0 && both != fa && both != fb);
    struct bg w;
    watch_parked(&w, "/v1/locks/wt.sh", both);
    struct h_resp r = h_http("DELETE", gw2.port, "/v1/locks/wt.sh", ta, NULL, NULL);
    CHECK_EQ_INT(r.status, 200);
    h_resp_free(&r);
    pthread_join(w.th, NULL);
    CHECK_EQ_INT(w.status, 200);
    CHECK_EQ_INT(atoll(w.index), fb); /* one holder: its fence */
    free(ta);
    /* The 404 of a name nobody holds carries index 0. */
    r = H("GET", "/v1/locks/wt.nobody", NULL, NULL);
    CHECK_EQ_INT(r.status, 404);
    CHECK_EQ_STR(h_header(&r, "Lockgate-Index"), "0");
    h_resp_free(&r);
}

static void test_watch_disconnect_forgotten(void) {
    long long fence;
    free(take("wt.d", "{\"ttl_ms\":60000}", &fence));
    int fds[5];
    char req[256];
    snprintf(req, sizeof req,
             "GET /v1/locks/wt.d?watch_ms=60000&after=%lld HTTP/1.1\r\nHost: x\r\n\r\n", fence);
    for (int i = 0; i < 5; i++) {
        fds[i] = h_connect(gw.port);
        CHECK(fds[i] >= 0 && write(fds[i], req, strlen(req)) == (ssize_t)strlen(req));
    }
    long long n = -1;
    for (int i = 0; i < 50 && n != 5; i++) {
        h_sleep_ms(100);
        n = h_metric(&gw, "lockgate_watching_requests");
    }
    CHECK_EQ_INT(n, 5);
    CHECK_EQ_INT(h_metric(&gw, "lockgate_waiting_requests"), 0); /* watchers are not waiters */
    for (int i = 0; i < 5; i++) close(fds[i]);
    for (int i = 0; i < 50 && n != 0; i++) {
        h_sleep_ms(100);
        n = h_metric(&gw, "lockgate_watching_requests");
    }
    CHECK_EQ_INT(n, 0);
}

/* A watcher and a waiter on the same lock: the release wakes both (the
 * watcher does not take the waiter's wake-up). */
static void test_watch_beside_waiter(void) {
    long long fence;
    char *tok = take("wt.e", "{\"ttl_ms\":60000}", &fence);
    char path[256];
    watch_path(path, sizeof path, "wt.e", 20000, fence);
    struct bg w, waiter;
    bg_start(&w, gw.port, "GET", path, NULL);
    h_sleep_ms(200);
    bg_start(&waiter, gw.port, "POST", "/v1/locks/wt.e", "{\"ttl_ms\":30000,\"wait_ms\":20000}");
    h_sleep_ms(400);
    long long t0 = h_now_ms();
    struct h_resp r = H("DELETE", "/v1/locks/wt.e", tok, NULL);
    h_resp_free(&r);
    pthread_join(waiter.th, NULL);
    pthread_join(w.th, NULL);
    CHECK_EQ_INT(waiter.status, 201);
    CHECK(waiter.t_done - t0 < 3000);
    CHECK(w.status == 200 || w.status == 404); /* released, or already the waiter's */
    CHECK(w.t_done - t0 < 3000);
    free(tok);
}

/* ---- lockctl ls, watch, release --force ---------------------------------------- */

/* Runs lockctl with args against gw; its stdout in out, its exit status. */
static int ctl(const char *args, char *out, size_t cap) {
    char cmd[1024];
    const char *b = getenv("BUILD") ? getenv("BUILD") : "build";
    snprintf(cmd, sizeof cmd, "%s/lockctl -u http://127.0.0.1:%d %s", b, gw.port, args);
    FILE *p = popen(cmd, "r");
    if (!p) return -1;
    size_t n = fread(out, 1, cap - 1, p);
    out[n] = '\0';
    int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void test_lockctl_operator(void) {
    static char out[65536];
    free(take("cl.one", "{\"ttl_ms\":60000,\"owner\":\"carol\"}", NULL));
    free(take("cl.two", "{\"ttl_ms\":60000}", NULL));
    CHECK_EQ_INT(ctl("ls cl.", out, sizeof out), 0);
    CHECK(strstr(out, "cl.one") && strstr(out, "carol") && strstr(out, "cl.two"));
    CHECK_EQ_INT(ctl("ls -q cl.t", out, sizeof out), 0);
    CHECK_EQ_STR(out, "cl.two\n");

    /* watch: its first line at once, then the forced release, then stopped. */
    char cmd[512];
    const char *b = getenv("BUILD") ? getenv("BUILD") : "build";
    snprintf(cmd, sizeof cmd, "timeout -s TERM 3 %s/lockctl -u http://127.0.0.1:%d watch cl.one", b,
             gw.port);
    FILE *w = popen(cmd, "r");
    CHECK(w != NULL);
    h_sleep_ms(700);
    CHECK_EQ_INT(ctl("release --force cl.one", out, sizeof out), 0);
    CHECK(strstr(out, "\"holders_ended\":1") != NULL);
    size_t n = w ? fread(out, 1, sizeof out - 1, w) : 0;
    out[n] = '\0';
    if (w) pclose(w);
    CHECK(strstr(out, "\"owner\":\"carol\"") != NULL);
    CHECK(strstr(out, "{\"name\":\"cl.one\",\"holders\":0}") != NULL);
    CHECK(strstr(out, "carol") < strstr(out, "\"holders\":0"));
    CHECK(ctl("release --force cl.one", out, sizeof out) != 0); /* nobody holds it */

    /* watch on a shared lock parks (its index is the holders' fences'
     * sum, read from Lockgate-Index), not one request after another. */
    free(take("cl.sh", "{\"ttl_ms\":60000,\"mode\":\"shared\"}", NULL));
    free(take("cl.sh", "{\"ttl_ms\":60000,\"mode\":\"shared\"}", NULL));
    snprintf(cmd, sizeof cmd, "timeout -s TERM 3 %s/lockctl -u http://127.0.0.1:%d watch cl.sh", b,
             gw.port);
    w = popen(cmd, "r");
    h_sleep_ms(800);
    int parked = 0;
    for (int i = 0; i < 5; i++, h_sleep_ms(200))
        parked += h_metric(&gw, "lockgate_watching_requests") == 1;
    CHECK_EQ_INT(parked, 5);
    n = w ? fread(out, 1, sizeof out - 1, w) : 0;
    out[n] = '\0';
    if (w) pclose(w);
    CHECK(strstr(out, "\"holders\":2") != NULL);

    /* ls over more than one page of long names: cursors that carry a name
     * (a page ending inside a call) are a few hundred characters. */
    char name[256];
    for (int i = 0; i < 520; i++) {
        snprintf(name, sizeof name, "cl.long.%0180d", i);
        free(take(name, "{\"ttl_ms\":60000}", NULL));
    }
    static char big[262144];
    CHECK_EQ_INT(ctl("ls -q cl.long.", big, sizeof big), 0);
    int lines = 0;
    for (const char *p = big; (p = strchr(p, '\n')) != NULL; p++) lines++;
    CHECK_EQ_INT(lines, 520);
}

/* ---- quorum mode ------------------------------------------------------------------ */

/* Three masters, two gateways: a listing reads the first master; a forced
 * release ends the hold on every master; a watcher on one gateway is woken
 * by a release through the other. */
static void test_quorum_mode(void) {
    struct h_redis m[3];
    struct h_gw q1, q2;
    memset(&q1, 0, sizeof q1);
    memset(&q2, 0, sizeof q2);
    for (int i = 0; i < 3; i++) CHECK(h_redis_start(&m[i], 0, NULL) == 0);
    char flags[256];
    snprintf(flags, sizeof flags, "--redis redis://127.0.0.1:%d --redis redis://127.0.0.1:%d",
             m[1].port, m[2].port);
    CHECK(h_gw_up(&q1, &m[0], flags) == 0);
    CHECK(h_gw_up(&q2, &m[0], flags) == 0);
    struct h_resp r = {0};
    for (int i = 0; i < 50; i++) { /* until every master is connected */
        h_resp_free(&r);
        r = h_http("POST", q1.port, "/v1/locks/qm.a", NULL, "{\"ttl_ms\":60000,\"owner\":\"q\"}",
                   NULL);
        if (r.status == 201) break;
        h_sleep_ms(100);
    }
    CHECK_EQ_INT(r.status, 201);
    long long fence = h_jint(&r, "fence");
    char tok[160];
    snprintf(tok, sizeof tok, "%s", h_token(&r));
    h_resp_free(&r);

    r = h_http("GET", q2.port, "/v1/locks?prefix=qm.", NULL, NULL, NULL);
    CHECK_EQ_INT(r.status, 200);
    CHECK(r.body && strstr(r.body, "\"name\":\"qm.a\"") && strstr(r.body, "\"owner\":\"q\""));
    h_resp_free(&r);

    char path[256];
    snprintf(path, sizeof path, "/v1/locks/qm.a?watch_ms=20000&after=%lld", fence);
    struct bg w;
    bg_start(&w, q1.port, "GET", path, NULL);
    h_sleep_ms(500);
    long long t0 = h_now_ms();
    r = h_http("DELETE", q2.port, "/v1/locks/qm.a?force=true", NULL, NULL, NULL);
    CHECK_EQ_INT(r.status, 200);
    h_resp_free(&r);
    pthread_join(w.th, NULL);
    CHECK_EQ_INT(w.status, 404);
    CHECK(w.t_done - t0 < 3000);
    r = h_http("PATCH", q1.port, "/v1/locks/qm.a", tok, "{\"ttl_ms\":5000}", NULL);
    CHECK_EQ_INT(r.status, 404);
    h_resp_free(&r);
    r = h_http("POST", q1.port, "/v1/locks/qm.a", NULL, "{\"ttl_ms\":5000}", NULL);
    CHECK_EQ_INT(r.status, 201);
    CHECK(h_jint(&r, "fence") > fence);
    h_resp_free(&r);
    CHECK_EQ_INT(h_gw_stop(&q1, 10000), 0);
    CHECK_EQ_INT(h_gw_stop(&q2, 10000), 0);
    for (int i = 0; i < 3; i++) h_redis_stop(&m[i]);
}

/* Both gateways exit 0 on SIGTERM (under sanitizers: no leak, no error). */
static void test_clean_stop(void) {
    CHECK_EQ_INT(h_gw_stop(&gw, 10000), 0);
    CHECK_EQ_INT(h_gw_stop(&gw2, 10000), 0);
}

int main(int argc, char **argv) {
    check_filter(argc > 1 ? argv[1] : NULL);
    if (h_redis_start(&redis, 0, NULL) < 0 || h_gw_up(&gw, &redis, NULL) < 0 ||
        h_gw_up(&gw2, &redis, NULL) < 0)
        return 2;
    RUN_SOME(test_list_paging);
    RUN_SOME(test_list_limit);
    RUN_SOME(test_list_every_character);
    RUN_SOME(test_list_prefix);
    RUN_SOME(test_list_expiry_between_pages);
    RUN_SOME(test_list_semaphores_and_ids);
    RUN_SOME(test_list_key_id);
    RUN_SOME(test_list_bad_input);
    RUN_SOME(test_force_with_waiter);
    RUN_SOME(test_watch_change_through_other_gateway);
    RUN_SOME(test_watch_timeout_and_expiry);
    RUN_SOME(test_watch_semaphore);
    RUN_SOME(test_watch_shared);
    RUN_SOME(test_watch_disconnect_forgotten);
    RUN_SOME(test_watch_beside_waiter);
    RUN_SOME(test_lockctl_operator);
    if (!h_cluster_mode()) RUN_SOME(test_quorum_mode); /* its own three masters */
    RUN(test_clean_stop);
    h_redis_stop(&redis);
    return check_summary("ops");
}
