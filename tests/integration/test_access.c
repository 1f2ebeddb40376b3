/* test_access.c -- API keys against the real binary (docs/security.md, "Access
 * control"): the auth matrix over every route, key_id on holders, the
 * operator routes (listings filtered by the key's read grants, forced
 * release needing admin, watch refused before it parks), the denial
 * metrics, SIGHUP reload with a held lock and a parked waiter, invalid
 * files at start and at reload, the warning when listening beyond loopback
 * without keys, and no secret in any log the gateway wrote. */
#include "tests/integration/harness.h"

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static struct h_redis redis;
static struct h_gw gw;
static char dir[64], auth_path[128];

/* Secrets: 43 characters like keygen's; their SHA-256 is computed by the
 * test with sha256sum so the file is built as a user would. */
#define SECRET_RIGHT  "rightRIGHTrightRIGHTrightRIGHTrightRIGHT123"
#define SECRET_OTHER  "otherOTHERotherOTHERotherOTHERotherOTHER123"
#define SECRET_RO     "readonlyREADONLYreadonlyREADONLYreadonly123"
#define SECRET_DENY   "denyDENYdenyDENYdenyDENYdenyDENYdenyDENY123"
#define SECRET_NEW    "newNEWnewNEWnewNEWnewNEWnewNEWnewNEWnewNE123"
#define SECRET_WRONG  "wrongWRONGwrongWRONGwrongWRONGwrongWRONG123"
#define SECRET_NONE   "noneNONEnoneNONEnoneNONEnoneNONEnoneNONE123"
#define SECRET_LOCKS  "locksLOCKSlocksLOCKSlocksLOCKSlocksLOCKS123"
#define SECRET_ONCALL "oncallONCALLoncallONCALLoncallONCALLonca123"
#define SECRET_RATED  "ratedRATEDratedRATEDratedRATEDratedRATED123"

static const char *const all_secrets[] = {SECRET_RIGHT,  SECRET_OTHER, SECRET_RO,   SECRET_DENY,
                                          SECRET_NEW,    SECRET_WRONG, SECRET_NONE, SECRET_LOCKS,
                                          SECRET_ONCALL, SECRET_RATED};

static void sha256_hex(const char *s, char out[65]) {
    char cmd[256];
    snprintf(cmd, sizeof cmd, "printf %%s '%s' | sha256sum", s);
    FILE *p = popen(cmd, "r");
    out[0] = '\0';
    if (p) {
        if (fscanf(p, "%64s", out) != 1) out[0] = '\0';
        pclose(p);
    }
}

/* One key entry whose grants give `access` on prefix for the four kinds a
 * route may need (ops: on ops_prefix), plus `extra` grants (may be ""). */
static void key_entry(char *out, size_t cap, const char *id, const char *secret, const char *prefix,
                      const char *access, const char *ops_prefix, const char *extra) {
    char sha[65];
    sha256_hex(secret, sha);
    snprintf(out, cap,
             "{\"id\":\"%s\",\"sha256\":\"%s\",\"grants\":["
             "{\"kind\":\"locks\",\"prefix\":\"%s\",\"access\":\"%s\"},"
             "{\"kind\":\"semaphores\",\"prefix\":\"%s\",\"access\":\"%s\"},"
             "{\"kind\":\"ids\",\"prefix\":\"%s\",\"access\":\"%s\"},"
             "{\"kind\":\"ops\",\"prefix\":\"%s\",\"access\":\"%s\"}%s]}",
             id, sha, prefix, access, prefix, access, prefix, access, ops_prefix, access, extra);
}

static void write_file(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    if (!f) return;
    fputs(text, f);
    fclose(f);
}

/* A key entry with exactly these grants (a JSON array's members, may be ""). */
static void raw_entry(char *out, size_t cap, const char *id, const char *secret,
                      const char *grants) {
    char sha[65];
    sha256_hex(secret, sha);
    snprintf(out, cap, "{\"id\":\"%s\",\"sha256\":\"%s\",\"grants\":[%s]}", id, sha, grants);
}

/* The file every test starts from: right (write on job-), other (write on
 * other-), ro (read on job-), deny (write on everything, deny on job-),
 * none (no grant at all), lockonly (read on every lock, nothing else),
 * oncall (admin on everything, nothing else). */
static void write_keys(int with_new, int with_other) {
    char right[1024], other[1024], ro[1024], deny[2048], fresh[1024], text[16384];
    char none[512], lockonly[512], oncall[512], rated[512];
    raw_entry(none, sizeof none, "none", SECRET_NONE, "");
    raw_entry(lockonly, sizeof lockonly, "lockonly", SECRET_LOCKS,
              "{\"kind\":\"locks\",\"prefix\":\"\",\"access\":\"read\"}");
    raw_entry(oncall, sizeof oncall, "oncall", SECRET_ONCALL,
              "{\"kind\":\"admin\",\"prefix\":\"\",\"access\":\"write\"}");
    raw_entry(rated, sizeof rated, "rated", SECRET_RATED,
              "{\"kind\":\"locks\",\"prefix\":\"rate-\",\"access\":\"write\"}");
    /* its limit: raw_entry ends with the grants' "]}", the entry's own */
    snprintf(rated + strlen(rated) - 1, sizeof rated - strlen(rated) + 1,
             ",\"limits\":{\"requests_per_second\":5}}");
    key_entry(right, sizeof right, "right", SECRET_RIGHT, "job-", "write", "",
              ",{\"kind\":\"admin\",\"prefix\":\"job-f\",\"access\":\"write\"}");
    key_entry(other, sizeof other, "other", SECRET_OTHER, "other-", "write", "other-", "");
    key_entry(ro, sizeof ro, "ro", SECRET_RO, "job-", "read", "", "");
    key_entry(deny, sizeof deny, "deny", SECRET_DENY, "", "write", "",
              ",{\"kind\":\"locks\",\"prefix\":\"job-\",\"access\":\"deny\"}"
              ",{\"kind\":\"semaphores\",\"prefix\":\"job-\",\"access\":\"deny\"}"
              ",{\"kind\":\"ids\",\"prefix\":\"job-\",\"access\":\"deny\"}"
              ",{\"kind\":\"ops\",\"prefix\":\"\",\"access\":\"deny\"}");
    key_entry(fresh, sizeof fresh, "fresh", SECRET_NEW, "job-", "write", "", "");
    snprintf(text, sizeof text, "{\"keys\": [%s,%s%s%s,%s,%s,%s,%s,%s%s%s]}\n", right,
             with_other ? other : "", with_other ? "," : "", ro, deny, none, lockonly, oncall,
             rated, with_new ? "," : "", with_new ? fresh : "");
    write_file(auth_path, text);
}

static int log_count(const char *needle);

/* Every lock and session token an answer handed out, for the check that
 * none reached a log (test_access_no_secret_in_logs). */
#define SEEN_MAX 512
static char seen_tokens[SEEN_MAX][130];
static int nseen;

static void remember_token(const char *t) {
    if (t && strlen(t) >= 22 && strlen(t) < sizeof seen_tokens[0] && nseen < SEEN_MAX)
        snprintf(seen_tokens[nseen++], sizeof seen_tokens[0], "%s", t);
}

static struct h_resp call(const char *method, const char *path, const char *token, const char *body,
                          const char *auth) {
    char h[256];
    if (auth) snprintf(h, sizeof h, "Authorization: %s", auth);
    struct h_resp r = h_http(method, gw.port, path, token, body, auth ? h : NULL);
    remember_token(h_header(&r, "Lock-Token"));
    remember_token(h_header(&r, "Session"));
    return r;
}

#define BEARER(id, secret) "Bearer " id "." secret

/* ---- the matrix ------------------------------------------------------------- */

#define TOK "AAAAAAAAAAAAAAAAAAAAAA"

static const struct route_case {
    const char *method, *path, *token, *body;
    int is_read;         /* a read-only grant lets it through */
    int ok_status;       /* what the right key gets */
    const char *ok_code; /* and its problem code, or NULL for a success */
} routes[] = {
    {"POST",   "/v1/locks/job-m",          NULL, "{\"ttl_ms\": 60000}", 0, 201, NULL       },
    {"PATCH",  "/v1/locks/job-m",          TOK,  "{}",                  0, 409, "not_owner"},
    {"DELETE", "/v1/locks/job-m",          TOK,  NULL,                  0, 409, "not_owner"},
    {"GET",    "/v1/locks/job-m",          NULL, NULL,                  1, 200, NULL       },
    {"POST",   "/v1/semaphores/job-m",     NULL, "{\"limit\": 2}",      0, 201, NULL       },
    {"PATCH",  "/v1/semaphores/job-n",     TOK,  "{}",                  0, 404, "not_held" },
    {"DELETE", "/v1/semaphores/job-n",     TOK,  NULL,                  0, 404, "not_held" },
    {"GET",    "/v1/semaphores/job-m",     NULL, NULL,                  1, 200, NULL       },
    {"POST",   "/v1/ids/job-m",            NULL, NULL,                  0, 200, NULL       },
    {"GET",    "/v1/ids/job-m",            NULL, NULL,                  0, 200, NULL       },
    {"GET",    "/v1/ids/job-m/4294967297", NULL, NULL,                  1, 200, NULL       },
    {"GET",    "/readyz",                  NULL, NULL,                  1, 200, NULL       },
    {"GET",    "/metrics",                 NULL, NULL,                  1, 200, NULL       },
};

static int is_status(struct h_resp *r, long status, const char *code) {
    if (r->status != status) return 0;
    if (!code) return 1;
    const char *c = h_jcode(r);
    return c && strcmp(c, code) == 0;
}

static void test_access_matrix(void) {
    static const struct {
        const char *name, *auth;
    } who[] = {
        {"no header",     NULL},
        {              "malformed", "Bearer right"    },
        {   "unknown id",  BEARER("nobody",      SECRET_RIGHT)},
        { "wrong secret",  BEARER("right",      SECRET_WRONG)},
        { "other prefix",  BEARER("other",      SECRET_OTHER)},
        {    "read-only",     BEARER("ro",         SECRET_RO)},
        {         "deny",   BEARER("deny",       SECRET_DENY)},
        {        "right",  BEARER("right",      SECRET_RIGHT)},
    };
    for (size_t r = 0; r < sizeof routes / sizeof routes[0]; r++) {
        for (size_t w = 0; w < sizeof who / sizeof who[0]; w++) {
            const struct route_case *rc = &routes[r];
            struct h_resp resp = call(rc->method, rc->path, rc->token, rc->body, who[w].auth);
            int ok;
            if (w <= 3) {
                ok = is_status(&resp, 401, "unauthenticated") &&
                     h_header(&resp, "WWW-Authenticate") &&
                     strcmp(h_header(&resp, "WWW-Authenticate"), "Bearer realm=\"lockgate\"") == 0;
            } else if (w == 4 || w == 6 || (w == 5 && !rc->is_read)) {
                ok = is_status(&resp, 403, "forbidden");
            } else if (w == 5) { /* read-only on a read route: served */
                ok = is_status(&resp, rc->ok_status, rc->ok_code);
            } else {
                ok = is_status(&resp, rc->ok_status, rc->ok_code);
            }
            if (!ok)
                fprintf(stderr, "  %s %s with %s: got %ld %s\n", rc->method, rc->path, who[w].name,
                        resp.status, resp.body ? resp.body : "");
            CHECK(ok);
            h_resp_free(&resp);
        }
    }
    /* Open routes need no key, and a bad one does not matter there. */
    struct h_resp r = call("GET", "/healthz", NULL, NULL, NULL);
    CHECK_EQ_INT(r.status, 200);
    h_resp_free(&r);
    r = call("GET", "/openapi.yaml", NULL, NULL, "Bearer nope");
    CHECK_EQ_INT(r.status, 200);
    h_resp_free(&r);
    /* A key in the query string is never accepted. */
    r = call("GET", "/v1/locks/job-m?access_token=right." SECRET_RIGHT, NULL, NULL, NULL);
    CHECK_EQ_INT(r.status, 401);
    h_resp_free(&r);
}

/* ---- operator routes: what a key may see and do ------------------------------ */

/* One listing followed to its end: every page's entries, distinct, as
 * ",a,b," (a name may come twice across pages; SCAN's rule). */
struct listing {
    long status;      /* the first page's status, or the first that was not 200 */
    int pages;        /* pages fetched */
    int max_page;     /* most entries on one page */
    int entries;      /* entries over all pages, repeats included */
    char names[8192]; /* the distinct names, ",a,b," (",": none) */
};

/* GET /v1/<what>?prefix=P&limit=N with auth, following cursor until it is
 * empty (pages may be short, even empty, before that); field is the
 * entry's name member ("name", or "namespace" for ids). */
static void list_all(const char *what, const char *field, const char *prefix, int limit,
                     const char *auth, struct listing *l) {
    static const char *const members[][2] = {
        {"locks",      "locks"     },
        {"semaphores", "semaphores"},
        {"ids",        "namespaces"}
    };
    const char *member = what;
    for (size_t i = 0; i < 3; i++)
        if (strcmp(members[i][0], what) == 0) member = members[i][1];
    char path[600], cursor[400] = "";
    memset(l, 0, sizeof *l);
    snprintf(l->names, sizeof l->names, ",");
    for (; l->pages < 2000;) {
        snprintf(path, sizeof path, "/v1/%s?prefix=%s&limit=%d&cursor=%s", what, prefix, limit,
                 cursor);
        struct h_resp r = call("GET", path, NULL, NULL, auth);
        l->pages++;
        if (!l->status || (l->status == 200 && r.status != 200)) l->status = r.status;
        cJSON *items = r.json ? cJSON_GetObjectItem(r.json, member) : NULL;
        int n = cJSON_GetArraySize(items);
        if (n > l->max_page) l->max_page = n;
        l->entries += n;
        for (int i = 0; i < n; i++) {
            const char *v =
                cJSON_GetStringValue(cJSON_GetObjectItem(cJSON_GetArrayItem(items, i), field));
            char item[300];
            snprintf(item, sizeof item, ",%s,", v ? v : "?");
            size_t used = strlen(l->names);
            if (!strstr(l->names, item))
                snprintf(l->names + used, sizeof l->names - used, "%s", item + 1);
        }
        const char *c = r.status == 200 ? h_jstr(&r, "cursor") : NULL;
        snprintf(cursor, sizeof cursor, "%s", c ? c : "");
        h_resp_free(&r);
        if (!cursor[0]) break;
    }
}

static int listed(const struct listing *l, const char *name) {
    char item[300];
    snprintf(item, sizeof item, ",%s,", name);
    return strstr(l->names, item) != NULL;
}

/* How many distinct names listed start with prefix. */
static int listed_with(const struct listing *l, const char *prefix) {
    int n = 0;
    for (const char *p = l->names; (p = strchr(p, ',')) && p[1]; p++)
        if (strncmp(p + 1, prefix, strlen(prefix)) == 0) n++;
    return n;
}

/* 1 when every name listed starts with one of the prefixes (NULL-ended). */
static int listed_only(const struct listing *l, const char *const *prefixes) {
    for (const char *p = l->names; (p = strchr(p, ',')) && p[1]; p++) {
        int ok = 0;
        for (const char *const *x = prefixes; *x; x++)
            if (strncmp(p + 1, *x, strlen(*x)) == 0) ok = 1;
        if (!ok) {
            fprintf(stderr, "  listed outside the grant: %.60s\n", p + 1);
            return 0;
        }
    }
    return 1;
}

/* The routes that check names themselves: a listing shows only what the
 * key may read; forced release needs admin on the name; a multi-lock
 * needs write on every name (all or nothing); sessions need a valid key;
 * the status page's files are open. */
static void test_access_operator_and_session_routes(void) {
    struct h_resp r = call("POST", "/v1/locks/job-l1", NULL, "{\"ttl_ms\": 60000}",
                           BEARER("right", SECRET_RIGHT));
    CHECK_EQ_INT(r.status, 201);
    h_resp_free(&r);
    r = call("POST", "/v1/locks/other-l1", NULL, "{\"ttl_ms\": 60000}",
             BEARER("other", SECRET_OTHER));
    CHECK_EQ_INT(r.status, 201);
    h_resp_free(&r);
    struct listing l;
    list_all("locks", "name", "", 100, BEARER("right", SECRET_RIGHT), &l);
    CHECK(l.status == 200 && listed(&l, "job-l1") && listed_with(&l, "other-") == 0);
    list_all("locks", "name", "", 100, BEARER("ro", SECRET_RO), &l);
    CHECK(l.status == 200 && listed(&l, "job-l1") && listed_with(&l, "other-") == 0);
    list_all("locks", "name", "", 100, BEARER("other", SECRET_OTHER), &l);
    CHECK(l.status == 200 && listed(&l, "other-l1") && listed_with(&l, "job-") == 0);
    list_all("locks", "name", "", 100, NULL, &l);
    CHECK_EQ_INT(l.status, 401);
    list_all("locks", "name", "", 100, BEARER("right", SECRET_WRONG), &l);
    CHECK_EQ_INT(l.status, 401);

    /* Forced release: write on job- is not enough; admin on job-f is. */
    r = call("DELETE", "/v1/locks/job-l1?force=true", NULL, NULL, BEARER("right", SECRET_RIGHT));
    CHECK_EQ_INT(r.status, 403);
    CHECK_EQ_STR(h_jcode(&r), "forbidden");
    h_resp_free(&r);
    r = call("POST", "/v1/locks/job-f1", NULL, "{\"ttl_ms\": 60000}",
             BEARER("right", SECRET_RIGHT));
    CHECK_EQ_INT(r.status, 201);
    h_resp_free(&r);
    r = call("DELETE", "/v1/locks/job-f1?force=true", NULL, NULL, BEARER("right", SECRET_RIGHT));
    CHECK_EQ_INT(r.status, 200);
    h_resp_free(&r);
    r = call("DELETE", "/v1/locks/job-f1?force=true", NULL, NULL, NULL);
    CHECK_EQ_INT(r.status, 401);
    h_resp_free(&r);
    CHECK(log_count("forced release of lock 'job-f1'") == 1 &&
          log_count("key id right") >= 1); /* logged with who did it */

    /* Multi-lock: one name without the grant refuses the whole request. */
    r = call("POST", "/v1/locks", NULL, "{\"names\":[\"job-ma\",\"other-ma\"],\"ttl_ms\":60000}",
             BEARER("right", SECRET_RIGHT));
    CHECK_EQ_INT(r.status, 403);
    CHECK_EQ_STR(h_jcode(&r), "forbidden");
    h_resp_free(&r);
    r = call("GET", "/v1/locks/job-ma", NULL, NULL, BEARER("right", SECRET_RIGHT));
    CHECK_EQ_INT(r.status, 404); /* nothing taken */
    h_resp_free(&r);
    r = call("POST", "/v1/locks", NULL, "{\"names\":[\"job-ma\",\"job-mb\"],\"ttl_ms\":60000}",
             BEARER("right", SECRET_RIGHT));
    CHECK_EQ_INT(r.status, 201);
    h_resp_free(&r);
    r = call("POST", "/v1/locks", NULL, "{\"names\":[\"job-mc\"],\"ttl_ms\":60000}",
             BEARER("ro", SECRET_RO));
    CHECK_EQ_INT(r.status, 403);
    h_resp_free(&r);

    /* Sessions need a key; the status page does not. */
    r = call("POST", "/v1/sessions", NULL, "{\"ttl_ms\":5000}", NULL);
    CHECK_EQ_INT(r.status, 401);
    h_resp_free(&r);
    r = call("POST", "/v1/sessions", NULL, "{\"ttl_ms\":5000}", BEARER("right", SECRET_RIGHT));
    CHECK_EQ_INT(r.status, 201);
    h_resp_free(&r);
    r = call("GET", "/ui/", NULL, NULL, NULL);
    CHECK_EQ_INT(r.status, 200);
    h_resp_free(&r);
}

static void post_ok(const char *path, const char *body, const char *auth, long want) {
    struct h_resp r = call("POST", path, NULL, body, auth);
    if (r.status != want)
        fprintf(stderr, "  POST %s: got %ld %s\n", path, r.status, r.body ? r.body : "");
    CHECK_EQ_INT(r.status, want);
    h_resp_free(&r);
}

/* GET /v1/semaphores shows a key only the semaphores it may read, page
 * after page: six readable and six hidden names, listed one a page. */
static void test_access_semaphore_listing_filtered(void) {
    char path[64];
    for (int i = 1; i <= 6; i++) {
        snprintf(path, sizeof path, "/v1/semaphores/job-ls-%d", i);
        post_ok(path, "{\"limit\": 2, \"ttl_ms\": 60000}", BEARER("right", SECRET_RIGHT), 201);
        snprintf(path, sizeof path, "/v1/semaphores/other-ls-%d", i);
        post_ok(path, "{\"limit\": 2, \"ttl_ms\": 60000}", BEARER("other", SECRET_OTHER), 201);
    }
    static const char *const job[] = {"job-", NULL}, *const other[] = {"other-", NULL};
    struct listing l;
    /* right (write on job-), one entry a page: all six of its, none other. */
    list_all("semaphores", "name", "", 1, BEARER("right", SECRET_RIGHT), &l);
    CHECK_EQ_INT(l.status, 200);
    CHECK(l.max_page <= 1);
    CHECK(l.pages >= 7); /* six entries of one, then the end */
    CHECK(listed_only(&l, job));
    CHECK_EQ_INT(listed_with(&l, "job-ls-"), 6);
    for (int i = 1; i <= 6; i++) {
        snprintf(path, sizeof path, "job-ls-%d", i);
        CHECK(listed(&l, path));
    }
    CHECK_EQ_INT(listed_with(&l, "other-"), 0);
    /* ro (read on job-) too, two a page, by its prefix. */
    list_all("semaphores", "name", "job-ls-", 2, BEARER("ro", SECRET_RO), &l);
    CHECK_EQ_INT(l.status, 200);
    CHECK(l.max_page <= 2);
    CHECK_EQ_INT(listed_with(&l, ""), 6);
    CHECK_EQ_INT(listed_with(&l, "job-ls-"), 6);
    /* other sees its six and nothing of job-. */
    list_all("semaphores", "name", "", 2, BEARER("other", SECRET_OTHER), &l);
    CHECK_EQ_INT(l.status, 200);
    CHECK(listed_only(&l, other));
    CHECK_EQ_INT(listed_with(&l, "other-ls-"), 6);
    /* deny (write on everything, deny on job-): other-'s, never job-'s. */
    list_all("semaphores", "name", "", 3, BEARER("deny", SECRET_DENY), &l);
    CHECK_EQ_INT(l.status, 200);
    CHECK_EQ_INT(listed_with(&l, "other-ls-"), 6);
    CHECK_EQ_INT(listed_with(&l, "job-"), 0);
    /* A prefix whose names are all hidden: 200 and no entry on any page. */
    list_all("semaphores", "name", "other-ls-", 1, BEARER("right", SECRET_RIGHT), &l);
    CHECK_EQ_INT(l.status, 200);
    CHECK_EQ_INT(l.entries, 0);
    /* lockonly may read every lock but no semaphore. */
    list_all("semaphores", "name", "", 100, BEARER("lockonly", SECRET_LOCKS), &l);
    CHECK_EQ_INT(l.status, 200);
    CHECK_EQ_INT(l.entries, 0);
}

/* GET /v1/ids shows a key only the namespaces it may read (read or write
 * on ids); a key without an ids grant sees none. */
static void test_access_ids_listing_filtered(void) {
    post_ok("/v1/ids/job-ns1", NULL, BEARER("right", SECRET_RIGHT), 200);
    post_ok("/v1/ids/job-ns2", NULL, BEARER("right", SECRET_RIGHT), 200);
    post_ok("/v1/ids/other-ns1", NULL, BEARER("other", SECRET_OTHER), 200);
    post_ok("/v1/ids/zz-ns1", NULL, BEARER("deny", SECRET_DENY), 200);
    static const char *const job[] = {"job-", NULL}, *const other[] = {"other-", NULL};
    struct listing l;
    list_all("ids", "namespace", "", 1, BEARER("right", SECRET_RIGHT), &l);
    CHECK_EQ_INT(l.status, 200);
    CHECK(l.max_page <= 1);
    CHECK(listed_only(&l, job));
    CHECK(listed(&l, "job-ns1") && listed(&l, "job-ns2"));
    CHECK(!listed(&l, "other-ns1") && !listed(&l, "zz-ns1"));
    /* Read (decoding) is enough to see a namespace listed. */
    list_all("ids", "namespace", "job-ns", 1, BEARER("ro", SECRET_RO), &l);
    CHECK_EQ_INT(l.status, 200);
    CHECK_EQ_INT(listed_with(&l, ""), 2);
    CHECK(listed(&l, "job-ns1") && listed(&l, "job-ns2"));
    list_all("ids", "namespace", "", 2, BEARER("other", SECRET_OTHER), &l);
    CHECK_EQ_INT(l.status, 200);
    CHECK(listed_only(&l, other));
    CHECK(listed(&l, "other-ns1"));
    list_all("ids", "namespace", "", 2, BEARER("deny", SECRET_DENY), &l);
    CHECK_EQ_INT(l.status, 200);
    CHECK(listed(&l, "other-ns1") && listed(&l, "zz-ns1"));
    CHECK_EQ_INT(listed_with(&l, "job-"), 0);
    /* No ids grant: 200 with no namespace, page after page. */
    list_all("ids", "namespace", "", 1, BEARER("lockonly", SECRET_LOCKS), &l);
    CHECK_EQ_INT(l.status, 200);
    CHECK_EQ_INT(l.entries, 0);
    /* Without a key, or with a wrong secret: 401 as everywhere. */
    list_all("ids", "namespace", "", 1, NULL, &l);
    CHECK_EQ_INT(l.status, 401);
    list_all("ids", "namespace", "", 1, BEARER("other", SECRET_WRONG), &l);
    CHECK_EQ_INT(l.status, 401);
}

/* A prefix stream (GET /v1/locks?prefix= as an event stream) shows only
 * the names the key may read, as a listing does: ro (read on job-) sees
 * job-ps's changes and not other-ps's; deny (deny on job-) the reverse. */
static void test_access_prefix_stream_filtered(void) {
    char cmd[768], file[2][160];
    const char *auth[2] = {BEARER("ro", SECRET_RO), BEARER("deny", SECRET_DENY)};
    pid_t pid[2];
    for (int k = 0; k < 2; k++) {
        snprintf(file[k], sizeof file[k], "%s/pfx-%d", dir, k);
        snprintf(cmd, sizeof cmd,
                 "exec curl -isN -H 'Accept: text/event-stream' -H 'Authorization: %s' "
                 "'http://127.0.0.1:%d/v1/locks?prefix=' > %s 2>&1",
                 auth[k], gw.port, file[k]);
        pid[k] = h_spawn(cmd, NULL);
    }
    /* A stream's headers come once its first read set the prefix's mark. */
    for (int k = 0; k < 2; k++) {
        long long t0 = h_now_ms();
        int up = 0;
        while (!up && h_now_ms() - t0 < 5000) {
            char head[512] = "";
            FILE *f = fopen(file[k], "r");
            size_t n = f ? fread(head, 1, sizeof head - 1, f) : 0;
            if (f) fclose(f);
            head[n] = '\0';
            up = strstr(head, "text/event-stream") != NULL;
            if (!up) h_sleep_ms(5);
            if (!up && h_now_ms() - t0 >= 5000) fprintf(stderr, "  stream %d: %s\n", k, head);
        }
        CHECK(up);
    }
    post_ok("/v1/locks/other-ps", "{\"ttl_ms\": 60000}", BEARER("other", SECRET_OTHER), 201);
    post_ok("/v1/locks/job-ps", "{\"ttl_ms\": 60000}", BEARER("right", SECRET_RIGHT), 201);
    post_ok("/v1/locks/zz-ps", "{\"ttl_ms\": 60000}", BEARER("deny", SECRET_DENY), 201);
    /* zz-ps comes last: once a stream has it (or, for ro, once the
     * others are logged), it has had every change before it. */
    char buf[2][8192];
    for (int k = 0; k < 2; k++) {
        long long t0 = h_now_ms();
        buf[k][0] = '\0';
        while (h_now_ms() - t0 < 3000) {
            FILE *f = fopen(file[k], "r");
            size_t n = f ? fread(buf[k], 1, sizeof buf[k] - 1, f) : 0;
            if (f) fclose(f);
            buf[k][n] = '\0';
            if (k == 1 ? strstr(buf[k], "\"zz-ps\"") != NULL : strstr(buf[k], "\"job-ps\"") != NULL)
                break;
            h_sleep_ms(5);
        }
    }
    /* ro's stream: job-ps only (after zz-ps was logged, which ro may not read). */
    CHECK(strstr(buf[0], "\"name\":\"job-ps\"") != NULL);
    CHECK(strstr(buf[0], "other-ps") == NULL);
    CHECK(strstr(buf[0], "zz-ps") == NULL);
    CHECK(strstr(buf[1], "\"name\":\"other-ps\"") != NULL);
    CHECK(strstr(buf[1], "\"name\":\"zz-ps\"") != NULL);
    CHECK(strstr(buf[1], "job-ps") == NULL);
    for (int k = 0; k < 2; k++) {
        kill(pid[k], SIGKILL);
        waitpid(pid[k], NULL, 0);
    }
}

/* A key that may read nothing lists nothing: 200 and empty pages to the
 * end, not 403 (docs/security.md, openapi listLocks). */
static void test_access_listing_with_no_read_grant(void) {
    post_ok("/v1/locks/job-nr", "{\"ttl_ms\": 60000}", BEARER("right", SECRET_RIGHT), 201);
    post_ok("/v1/semaphores/job-nr", "{\"limit\": 1, \"ttl_ms\": 60000}",
            BEARER("right", SECRET_RIGHT), 201);
    static const char *const what[][2] = {
        {"locks",      "name"     },
        {"semaphores", "name"     },
        {"ids",        "namespace"}
    };
    static const char *const keys[] = {BEARER("none", SECRET_NONE),
                                       BEARER("oncall", SECRET_ONCALL)};
    struct listing l;
    for (size_t k = 0; k < 2; k++)
        for (size_t w = 0; w < 3; w++) {
            list_all(what[w][0], what[w][1], "", 1000, keys[k], &l);
            if (l.status != 200 || l.entries != 0)
                fprintf(stderr, "  %s with key %zu: %ld, %d entries\n", what[w][0], k, l.status,
                        l.entries);
            CHECK_EQ_INT(l.status, 200);
            CHECK_EQ_INT(l.entries, 0);
        }
    /* The names are there: a key that may read them sees them. */
    list_all("locks", "name", "job-nr", 10, BEARER("lockonly", SECRET_LOCKS), &l);
    CHECK(l.status == 200 && listed(&l, "job-nr"));
    /* The key is valid: a named route says 403, not 401. */
    struct h_resp r = call("GET", "/v1/locks/job-nr", NULL, NULL, BEARER("none", SECRET_NONE));
    CHECK_EQ_INT(r.status, 403);
    CHECK_EQ_STR(h_jcode(&r), "forbidden");
    h_resp_free(&r);
}

/* Lines of the gateway's log holding both a and b. */
static int log_count_both(const char *a, const char *b) {
    FILE *f = fopen(gw.log, "r");
    if (!f) return -1;
    char line[4096];
    int n = 0;
    while (fgets(line, sizeof line, f))
        if (strstr(line, a) && strstr(line, b)) n++;
    fclose(f);
    return n;
}

/* DELETE /v1/semaphores/{name}?force=true needs admin write on the name:
 * the semaphore's own write grant is not enough, admin alone is. */
static void test_access_semaphore_force(void) {
    char tok1[160], tok2[160];
    struct h_resp r = call("POST", "/v1/semaphores/job-fsem", NULL,
                           "{\"limit\": 3, \"ttl_ms\": 60000}", BEARER("right", SECRET_RIGHT));
    CHECK_EQ_INT(r.status, 201);
    snprintf(tok1, sizeof tok1, "%s", h_token(&r));
    h_resp_free(&r);
    r = call("POST", "/v1/semaphores/job-fsem", NULL, "{\"limit\": 3, \"ttl_ms\": 60000}",
             BEARER("right", SECRET_RIGHT));
    CHECK_EQ_INT(r.status, 201);
    snprintf(tok2, sizeof tok2, "%s", h_token(&r));
    h_resp_free(&r);
    post_ok("/v1/semaphores/job-sx", "{\"limit\": 1, \"ttl_ms\": 60000}",
            BEARER("right", SECRET_RIGHT), 201);

    /* Without admin on the name: 403 forbidden, whatever else the key may
     * do there (right: write on job- but admin only on job-f; ro: read;
     * deny: write on every semaphore but no admin). No key: 401. */
    static const struct {
        const char *path, *auth;
    } refused[] = {
        {"/v1/semaphores/job-sx?force=true",   BEARER("right", SECRET_RIGHT)},
        {"/v1/semaphores/job-fsem?force=true", BEARER("ro",    SECRET_RO)   },
        {"/v1/semaphores/job-fsem?force=true", BEARER("deny",  SECRET_DENY) },
        {"/v1/semaphores/job-fsem?force=true", BEARER("none",  SECRET_NONE) },
    };
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        r = call("DELETE", refused[i].path, NULL, NULL, refused[i].auth);
        CHECK_EQ_INT(r.status, 403);
        CHECK_EQ_STR(h_jcode(&r), "forbidden");
        h_resp_free(&r);
    }
    r = call("DELETE", "/v1/semaphores/job-fsem?force=true", NULL, NULL, NULL);
    CHECK_EQ_INT(r.status, 401);
    CHECK_EQ_STR(h_jcode(&r), "unauthenticated");
    h_resp_free(&r);
    /* Nothing was ended, nothing logged as forced. */
    r = call("GET", "/v1/semaphores/job-fsem", NULL, NULL, BEARER("right", SECRET_RIGHT));
    CHECK_EQ_INT(r.status, 200);
    CHECK_EQ_INT(h_jint(&r, "holders"), 2);
    h_resp_free(&r);
    r = call("GET", "/v1/semaphores/job-sx", NULL, NULL, BEARER("right", SECRET_RIGHT));
    CHECK_EQ_INT(r.status, 200);
    h_resp_free(&r);
    CHECK_EQ_INT(log_count("forced release of semaphore"), 0);
    CHECK(log_count_both("auth: key 'right' refused", "'job-sx'") >= 1);

    /* With admin on job-f: 200, both permits ended, logged with the key. */
    r = call("DELETE", "/v1/semaphores/job-fsem?force=true", NULL, NULL,
             BEARER("right", SECRET_RIGHT));
    CHECK_EQ_INT(r.status, 200);
    CHECK_EQ_STR(h_jstr(&r, "name"), "job-fsem");
    CHECK_EQ_INT(h_jint(&r, "holders_ended"), 2);
    h_resp_free(&r);
    CHECK_EQ_INT(
        log_count_both("forced release of semaphore 'job-fsem': 2 hold(s) ended, key id right",
                       "key id right"), /* permits have no fence: none logged */
        1);
    r = call("GET", "/v1/semaphores/job-fsem", NULL, NULL, BEARER("right", SECRET_RIGHT));
    CHECK_EQ_INT(r.status, 404);
    h_resp_free(&r);
    r = call("PATCH", "/v1/semaphores/job-fsem", tok1, "{}", BEARER("right", SECRET_RIGHT));
    CHECK_EQ_INT(r.status, 404);
    CHECK_EQ_STR(h_jcode(&r), "not_held");
    h_resp_free(&r);
    r = call("DELETE", "/v1/semaphores/job-fsem", tok2, NULL, BEARER("right", SECRET_RIGHT));
    CHECK_EQ_INT(r.status, 404);
    h_resp_free(&r);

    /* admin alone (oncall: no semaphores grant) may force, on any name. */
    r = call("DELETE", "/v1/semaphores/job-sx?force=true", NULL, NULL,
             BEARER("oncall", SECRET_ONCALL));
    CHECK_EQ_INT(r.status, 200);
    CHECK_EQ_INT(h_jint(&r, "holders_ended"), 1);
    h_resp_free(&r);
    CHECK_EQ_INT(
        log_count_both("forced release of semaphore 'job-sx': 1 hold(s) ended", "key id oncall"),
        1);
    /* Nobody holds it now: 404 not_held, and no second log line. */
    r = call("DELETE", "/v1/semaphores/job-sx?force=true", NULL, NULL,
             BEARER("oncall", SECRET_ONCALL));
    CHECK_EQ_INT(r.status, 404);
    CHECK_EQ_STR(h_jcode(&r), "not_held");
    h_resp_free(&r);
    CHECK_EQ_INT(log_count("forced release of semaphore 'job-sx'"), 1);
}

/* A gauge of the gateway's, read with an ops key (h_metric has none). */
static long long gauge(const char *name) {
    struct h_resp r = call("GET", "/metrics", NULL, NULL, BEARER("right", SECRET_RIGHT));
    char key[96];
    snprintf(key, sizeof key, "\n%s ", name);
    const char *p = r.body ? strstr(r.body, key) : NULL;
    long long v = p ? atoll(p + strlen(key)) : -1;
    h_resp_free(&r);
    return v;
}

static long long watching(void) { return gauge("lockgate_watching_requests"); }

/* A watch (GET ?watch_ms=) without read on the name is refused at once
 * with 403, never parked for its watch_ms. */
static void test_access_watch_refused_at_once(void) {
    post_ok("/v1/locks/other-w", "{\"ttl_ms\": 60000}", BEARER("other", SECRET_OTHER), 201);
    post_ok("/v1/locks/job-w", "{\"ttl_ms\": 60000}", BEARER("right", SECRET_RIGHT), 201);
    post_ok("/v1/semaphores/other-w", "{\"limit\": 1, \"ttl_ms\": 60000}",
            BEARER("other", SECRET_OTHER), 201);
    /* A plain GET's index is its body's fence (a semaphore's: holders);
     * the Lockgate-Index header comes with a watch's answer. */
    char lock_idx[32], job_idx[32], sem_idx[32];
    struct h_resp r = call("GET", "/v1/locks/other-w", NULL, NULL, BEARER("other", SECRET_OTHER));
    CHECK_EQ_INT(r.status, 200);
    snprintf(lock_idx, sizeof lock_idx, "%lld", h_jint(&r, "fence"));
    h_resp_free(&r);
    r = call("GET", "/v1/locks/job-w", NULL, NULL, BEARER("right", SECRET_RIGHT));
    snprintf(job_idx, sizeof job_idx, "%lld", h_jint(&r, "fence"));
    h_resp_free(&r);
    r = call("GET", "/v1/semaphores/other-w", NULL, NULL, BEARER("other", SECRET_OTHER));
    snprintf(sem_idx, sizeof sem_idx, "%lld", h_jint(&r, "holders"));
    h_resp_free(&r);
    CHECK(atoll(lock_idx) > 0 && atoll(job_idx) > 0);
    CHECK_EQ_STR(sem_idx, "1");

    /* Each of these would park for 20 s if let in (after = the index now). */
    char path[4][128];
    snprintf(path[0], sizeof path[0], "/v1/locks/other-w?watch_ms=20000&after=%s", lock_idx);
    snprintf(path[1], sizeof path[1], "/v1/locks/job-w?watch_ms=20000&after=%s", job_idx);
    snprintf(path[2], sizeof path[2], "/v1/semaphores/other-w?watch_ms=20000&after=%s", sem_idx);
    const struct {
        const char *path, *auth;
        long status;
        const char *code;
    } cases[] = {
        {path[0],         BEARER("right",    SECRET_RIGHT), 403,               "forbidden"}, /* locks on job- only */
        {path[0],         BEARER("ro",       SECRET_RO),    403,               "forbidden"},
        {path[0],         BEARER("none",     SECRET_NONE),  403,               "forbidden"},
        {path[1],         BEARER("deny",     SECRET_DENY),  403,               "forbidden"}, /* deny on job- */
        {path[1],         BEARER("other",    SECRET_OTHER), 403,               "forbidden"},
        {path[2],         BEARER("lockonly", SECRET_LOCKS), 403,               "forbidden"}, /* locks, not semaphores */
        {path[0],         NULL,              401,           "unauthenticated"},
        {path[0], BEARER("other",     SECRET_WRONG),           401, "unauthenticated"           },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        r = call("GET", cases[i].path, NULL, NULL, cases[i].auth);
        if (r.status != cases[i].status || r.seconds >= 2.0)
            fprintf(stderr, "  case %zu: %ld after %.3f s\n", i, r.status, r.seconds);
        CHECK_EQ_INT(r.status, cases[i].status);
        CHECK_EQ_STR(h_jcode(&r), cases[i].code);
        CHECK(r.seconds < 2.0); /* at once, not after watch_ms */
        CHECK(h_header(&r, "Lockgate-Index") == NULL);
        h_resp_free(&r);
    }
    CHECK_EQ_INT(watching(), 0);

    /* The same watch with the grant parks: it answers only when its
     * watch_ms (1.5 s) runs out, with the unchanged index. */
    snprintf(path[3], sizeof path[3], "/v1/locks/other-w?watch_ms=1500&after=%s", lock_idx);
    r = call("GET", path[3], NULL, NULL, BEARER("other", SECRET_OTHER));
    CHECK_EQ_INT(r.status, 200);
    CHECK(r.seconds >= 1.2);
    CHECK_EQ_STR(h_header(&r, "Lockgate-Index") ? h_header(&r, "Lockgate-Index") : "", lock_idx);
    h_resp_free(&r);
}

/* The holder records the key that acquired it; GET shows it as key_id. */
static void test_access_key_id_on_holders(void) {
    struct h_resp r = call("POST", "/v1/locks/job-k", NULL,
                           "{\"ttl_ms\": 60000, \"owner\": \"me\"}", BEARER("right", SECRET_RIGHT));
    CHECK_EQ_INT(r.status, 201);
    h_resp_free(&r);
    r = call("GET", "/v1/locks/job-k", NULL, NULL, BEARER("ro", SECRET_RO));
    CHECK_EQ_INT(r.status, 200);
    CHECK_EQ_STR(h_jstr(&r, "key_id"), "right");
    CHECK_EQ_STR(h_jstr(&r, "owner"), "me");
    h_resp_free(&r);
    /* Shared holders and semaphore permits too; the first holder's shows. */
    r = call("POST", "/v1/semaphores/job-k", NULL, "{\"limit\": 3}", BEARER("right", SECRET_RIGHT));
    CHECK_EQ_INT(r.status, 201);
    char tok[160];
    snprintf(tok, sizeof tok, "%s", h_token(&r));
    h_resp_free(&r);
    r = call("GET", "/v1/semaphores/job-k", NULL, NULL, BEARER("right", SECRET_RIGHT));
    CHECK_EQ_STR(h_jstr(&r, "key_id"), "right");
    h_resp_free(&r);
    /* Extend and release keep working on a record with the attribute. */
    r = call("PATCH", "/v1/semaphores/job-k", tok, "{}", BEARER("right", SECRET_RIGHT));
    CHECK_EQ_INT(r.status, 200);
    h_resp_free(&r);
    r = call("GET", "/v1/semaphores/job-k", NULL, NULL, BEARER("right", SECRET_RIGHT));
    CHECK_EQ_STR(h_jstr(&r, "key_id"), "right");
    h_resp_free(&r);
    r = call("DELETE", "/v1/semaphores/job-k", tok, NULL, BEARER("right", SECRET_RIGHT));
    CHECK_EQ_INT(r.status, 200);
    h_resp_free(&r);
}

/* Denials are counted by reason. */
static void test_access_denial_metrics(void) {
    struct h_resp r = call("GET", "/metrics", NULL, NULL, BEARER("right", SECRET_RIGHT));
    CHECK_EQ_INT(r.status, 200);
    const char *reasons[] = {"missing", "malformed", "unknown_key", "wrong_secret", "forbidden"};
    for (size_t i = 0; i < 5; i++) {
        char key[128];
        snprintf(key, sizeof key, "lockgate_auth_denials_total{reason=\"%s\"} ", reasons[i]);
        const char *p = r.body ? strstr(r.body, key) : NULL;
        CHECK(p && atoll(p + strlen(key)) > 0);
    }
    CHECK(r.body && strstr(r.body, "status=\"403\""));
    h_resp_free(&r);
}

/* ---- reload ----------------------------------------------------------------- */

struct waiter_arg {
    struct h_resp resp;
};

static void *waiter(void *arg) {
    struct waiter_arg *w = arg;
    w->resp = call("POST", "/v1/locks/job-r", NULL, "{\"ttl_ms\": 60000, \"wait_ms\": 20000}",
                   BEARER("right", SECRET_RIGHT));
    return NULL;
}

static int log_count(const char *needle) {
    FILE *f = fopen(gw.log, "r");
    if (!f) return -1;
    char line[4096];
    int n = 0;
    while (fgets(line, sizeof line, f))
        if (strstr(line, needle)) n++;
    fclose(f);
    return n;
}

static void test_access_sighup_reload(void) {
    struct h_resp r =
        call("POST", "/v1/locks/job-r", NULL, "{\"ttl_ms\": 60000}", BEARER("right", SECRET_RIGHT));
    CHECK_EQ_INT(r.status, 201);
    char tok[160];
    snprintf(tok, sizeof tok, "%s", h_token(&r));
    h_resp_free(&r);

    struct waiter_arg w;
    pthread_t th;
    pthread_create(&th, NULL, waiter, &w);
    for (int i = 0; i < 200 && gauge("lockgate_waiting_requests") != 1; i++) h_sleep_ms(20);
    CHECK_EQ_INT(gauge("lockgate_waiting_requests"), 1); /* the waiter is parked */

    /* New key in, "other" out. */
    write_keys(1, 0);
    kill(gw.pid, SIGHUP);
    int seen = 0;
    for (int i = 0; i < 200 && !seen; i++) {
        r = call("GET", "/v1/locks/job-r", NULL, NULL, BEARER("fresh", SECRET_NEW));
        seen = r.status == 200;
        h_resp_free(&r);
        if (!seen) h_sleep_ms(20);
    }
    CHECK(seen);
    r = call("GET", "/v1/locks/other-1", NULL, NULL, BEARER("other", SECRET_OTHER));
    CHECK(is_status(&r, 401, "unauthenticated"));
    h_resp_free(&r);

    /* An invalid file keeps the keys in force and logs one error line. */
    write_file(auth_path, "{\"keys\": [ not json");
    kill(gw.pid, SIGHUP);
    for (int i = 0; i < 200 && log_count("auth: reload failed") < 1; i++) h_sleep_ms(20);
    CHECK_EQ_INT(log_count("auth: reload failed"), 1);
    r = call("GET", "/v1/locks/job-r", NULL, NULL, BEARER("fresh", SECRET_NEW));
    CHECK_EQ_INT(r.status, 200);
    h_resp_free(&r);

    /* The held lock is still held by its token; releasing it hands it to
     * the waiter, which was parked all along. */
    r = call("DELETE", "/v1/locks/job-r", tok, NULL, BEARER("right", SECRET_RIGHT));
    CHECK_EQ_INT(r.status, 200);
    h_resp_free(&r);
    pthread_join(th, NULL);
    CHECK_EQ_INT(w.resp.status, 201);
    h_resp_free(&w.resp);
    write_keys(0, 1);
    kill(gw.pid, SIGHUP);
    h_sleep_ms(200);
}

static void test_access_invalid_file_at_start(void) {
    char bad[160], flags[256], out[4096] = "";
    snprintf(bad, sizeof bad, "%s/bad.json", dir);
    write_file(bad, "{\"keys\": [{\"id\": \"x\"}]}");
    snprintf(flags, sizeof flags,
             "%s/lockgate --listen 127.0.0.1:%d --auth-file %s 2>&1; echo \"exit=$?\"",
             getenv("BUILD") ? getenv("BUILD") : "build", h_free_port(), bad);
    FILE *p = popen(flags, "r");
    size_t n = p ? fread(out, 1, sizeof out - 1, p) : 0;
    out[n] = '\0';
    if (p) pclose(p);
    CHECK(strstr(out, "exit=2") != NULL);
    CHECK(strstr(out, "lockgate: auth file") != NULL);
    /* One line, then the exit status. */
    int lines = 0;
    for (const char *c = out; *c; c++) lines += *c == '\n';
    CHECK_EQ_INT(lines, 2);
}

static void test_access_warning_beyond_loopback(void) {
    struct h_gw open_gw = {0};
    int port = h_free_port();
    char flags[128];
    snprintf(flags, sizeof flags, "--listen 0.0.0.0:%d", port);
    open_gw.port = port;
    CHECK_EQ_INT(h_gw_start(&open_gw, &redis, flags), 0);
    h_sleep_ms(100);
    FILE *f = fopen(open_gw.log, "r");
    char line[4096];
    int warned = 0;
    while (f && fgets(line, sizeof line, f))
        if (strstr(line, "no access control") && strstr(line, "--auth-file")) warned = 1;
    if (f) fclose(f);
    CHECK(warned);
    h_gw_stop(&open_gw, 5000);
}

/* --max-connections-per-ip 2: a third connection from 127.0.0.1 is not
 * served while two are open, and is once one closes. */
static void test_access_per_ip_limit(void) {
    struct h_gw lim = {0};
    CHECK_EQ_INT(h_gw_up(&lim, &redis, "--max-connections-per-ip 2"), 0);
    h_sleep_ms(200); /* the start-up probe's connection is gone */
    int a = h_connect(lim.port), b = h_connect(lim.port);
    CHECK(a >= 0 && b >= 0);
    h_sleep_ms(200);
    char out[512];
    const char req[] = "GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
    size_t n = h_raw(lim.port, req, sizeof req - 1, out, sizeof out, 1500);
    CHECK(n == 0 || !strstr(out, "200 OK"));
    close(a);
    h_sleep_ms(300);
    n = h_raw(lim.port, req, sizeof req - 1, out, sizeof out, 3000);
    CHECK(n > 0 && strstr(out, "200 OK"));
    close(b);
    h_gw_stop(&lim, 5000);
}

/* A session is its creator's: another key gets 403 forbidden on every
 * session route and changes nothing; a wrong secret gets 401; the creator
 * and a key with admin on every name may use it. */
static void test_access_sessions_owned(void) {
    struct h_resp r =
        call("POST", "/v1/sessions", NULL, "{\"ttl_ms\":60000}", BEARER("right", SECRET_RIGHT));
    CHECK_EQ_INT(r.status, 201);
    char stok[130], path[200];
    snprintf(stok, sizeof stok, "%s", h_header(&r, "Session"));
    h_resp_free(&r);
    snprintf(path, sizeof path, "/v1/sessions/%s", stok);
    char sh[200];
    snprintf(sh, sizeof sh, "Session: %s", stok);
    /* binding a hold to it without a key: 401, as for any lock */
    struct h_resp b = h_http("POST", gw.port, "/v1/locks/job-sess", NULL, "{}", sh);
    CHECK_EQ_INT(b.status, 401);
    h_resp_free(&b);
    static const struct {
        const char *method, *body;
    } routes_[] = {
        {"PATCH",  "{\"ttl_ms\":60000}"},
        {"GET",    NULL                },
        {"DELETE", NULL                }
    };
    for (size_t i = 0; i < sizeof routes_ / sizeof routes_[0]; i++) {
        r = call(routes_[i].method, path, NULL, routes_[i].body, BEARER("other", SECRET_OTHER));
        if (r.status != 403) fprintf(stderr, "  %s other key: %ld\n", routes_[i].method, r.status);
        CHECK(is_status(&r, 403, "forbidden"));
        CHECK(r.body && !strstr(r.body, "\"holds\""));
        h_resp_free(&r);
        r = call(routes_[i].method, path, NULL, routes_[i].body, BEARER("ro", SECRET_RO));
        CHECK(is_status(&r, 403, "forbidden"));
        h_resp_free(&r);
        r = call(routes_[i].method, path, NULL, routes_[i].body, BEARER("right", SECRET_WRONG));
        CHECK(is_status(&r, 401, "unauthenticated"));
        h_resp_free(&r);
    }
    /* still live, and the creator may use it */
    r = call("GET", path, NULL, NULL, BEARER("right", SECRET_RIGHT));
    CHECK_EQ_INT(r.status, 200);
    h_resp_free(&r);
    r = call("PATCH", path, NULL, "{\"ttl_ms\":60000}", BEARER("right", SECRET_RIGHT));
    CHECK_EQ_INT(r.status, 200);
    h_resp_free(&r);
    /* admin on every name may read and end it */
    r = call("GET", path, NULL, NULL, BEARER("oncall", SECRET_ONCALL));
    CHECK_EQ_INT(r.status, 200);
    h_resp_free(&r);
    r = call("DELETE", path, NULL, NULL, BEARER("oncall", SECRET_ONCALL));
    CHECK_EQ_INT(r.status, 200);
    h_resp_free(&r);
    r = call("GET", path, NULL, NULL, BEARER("right", SECRET_RIGHT));
    CHECK(is_status(&r, 404, "session_not_found"));
    h_resp_free(&r);
    /* a second session of right's: its creator ends it */
    r = call("POST", "/v1/sessions", NULL, "{\"ttl_ms\":60000}", BEARER("right", SECRET_RIGHT));
    CHECK_EQ_INT(r.status, 201);
    snprintf(path, sizeof path, "/v1/sessions/%s", h_header(&r, "Session"));
    h_resp_free(&r);
    r = call("DELETE", path, NULL, NULL, BEARER("right", SECRET_RIGHT));
    CHECK_EQ_INT(r.status, 200);
    h_resp_free(&r);
    CHECK(log_count("refused a session another key created (DELETE /v1/sessions/{token})") >= 1);
}

/* A hold bound to a session survives another key's attempt to end it. */
static void test_access_session_hold_survives_other_key(void) {
    struct h_resp r =
        call("POST", "/v1/sessions", NULL, "{\"ttl_ms\":60000}", BEARER("right", SECRET_RIGHT));
    CHECK_EQ_INT(r.status, 201);
    char stok[130], path[200], hdr[400];
    snprintf(stok, sizeof stok, "%s", h_header(&r, "Session"));
    h_resp_free(&r);
    snprintf(path, sizeof path, "/v1/sessions/%s", stok);
    snprintf(hdr, sizeof hdr, "Session: %s", stok);
    /* h_http takes one extra header, and this needs two (key, session) */
    char req[1024], out[4096];
    snprintf(req, sizeof req,
             "POST /v1/locks/job-sess HTTP/1.1\r\nHost: x\r\nAuthorization: %s\r\n%s\r\n"
             "Content-Length: 2\r\nConnection: close\r\n\r\n{}",
             BEARER("right", SECRET_RIGHT), hdr);
    h_raw(gw.port, req, strlen(req), out, sizeof out, 5000);
    CHECK(strncmp(out, "HTTP/1.1 201", 12) == 0);
    const char *lt = strstr(out, "Lock-Token: ");
    if (lt) {
        char t[130];
        sscanf(lt + 12, "%129[A-Za-z0-9_-]", t);
        remember_token(t);
    }
    r = call("DELETE", path, NULL, NULL, BEARER("deny", SECRET_DENY));
    CHECK(is_status(&r, 403, "forbidden"));
    h_resp_free(&r);
    r = call("GET", "/v1/locks/job-sess", NULL, NULL, BEARER("right", SECRET_RIGHT));
    CHECK_EQ_INT(r.status, 200); /* still held */
    h_resp_free(&r);
    r = call("DELETE", path, NULL, NULL, BEARER("right", SECRET_RIGHT));
    CHECK_EQ_INT(r.status, 200);
    CHECK_EQ_INT(h_jint(&r, "released"), 1);
    h_resp_free(&r);
}

/* A key with "limits": {"requests_per_second": 5}: a burst of 5 passes,
 * the next gets 429 rate_limited with Retry-After, counted by key id; a
 * key without limits is not slowed; after a fifth of a second one more
 * passes. */
static void test_access_rate_limit(void) {
    h_sleep_ms(1100); /* a quiet second: the whole burst */
    int ok = 0, limited = 0;
    char after[16] = "";
    long long t0 = h_now_ms();
    for (int i = 0; i < 20; i++) {
        struct h_resp r =
            call("GET", "/v1/locks/rate-a", NULL, NULL, BEARER("rated", SECRET_RATED));
        if (r.status == 404) ok++;
        if (r.status == 429 && strcmp(h_jcode(&r), "rate_limited") == 0) {
            limited++;
            snprintf(after, sizeof after, "%s", h_header(&r, "Retry-After"));
        }
        h_resp_free(&r);
    }
    long long took = h_now_ms() - t0;
    printf("  (20 requests in %lld ms with requests_per_second 5: %d served, %d refused)\n", took,
           ok, limited);
    /* the burst of 5, and one more for each fifth of a second they took */
    CHECK(ok >= 5 && ok <= 5 + (int)(took / 200) + 1 && ok + limited == 20);
    CHECK_EQ_STR(after, "1");
    for (int i = 0; i < 20; i++) {
        struct h_resp r =
            call("GET", "/v1/locks/job-rate", NULL, NULL, BEARER("right", SECRET_RIGHT));
        CHECK_EQ_INT(r.status, 404);
        h_resp_free(&r);
    }
    h_sleep_ms(250);
    struct h_resp r = call("GET", "/v1/locks/rate-a", NULL, NULL, BEARER("rated", SECRET_RATED));
    CHECK_EQ_INT(r.status, 404);
    h_resp_free(&r);
    r = call("GET", "/metrics", NULL, NULL, BEARER("right", SECRET_RIGHT));
    char line[128];
    snprintf(line, sizeof line,
             "lockgate_quota_refused_total{key_id=\"rated\",quota=\"requests_per_second\"} %d",
             limited);
    CHECK(r.body && strstr(r.body, line) != NULL);
    CHECK(r.body && !strstr(r.body, "key_id=\"right\"")); /* keys without limits: no series */
    h_resp_free(&r);
}

/* Last: nothing any of the above sent as a secret reached the log. */
static void test_access_no_secret_in_logs(void) {
    char cmd[256];
    snprintf(cmd, sizeof cmd, "cat %s/*.log 2>/dev/null", redis.dir);
    FILE *p = popen(cmd, "r");
    char line[8192];
    int leaks = 0, lines = 0;
    while (p && fgets(line, sizeof line, p)) {
        lines++;
        for (size_t i = 0; i < sizeof all_secrets / sizeof all_secrets[0]; i++)
            if (strstr(line, all_secrets[i])) leaks++;
        if (strstr(line, "Bearer ") || strstr(line, "Authorization:") ||
            strstr(line, "AAAAAAAAAAAAAAAAAAAAAA"))
            leaks++;
        for (int i = 0; i < nseen; i++)
            if (strstr(line, seen_tokens[i])) {
                fprintf(stderr, "  token in the log: %s", line);
                leaks++;
            }
    }
    if (p) pclose(p);
    CHECK(lines > 10);
    CHECK(nseen > 10); /* the suite did hand out tokens */
    CHECK_EQ_INT(leaks, 0);
}

int main(int argc, char **argv) {
    check_filter(argc > 1 ? argv[1] : NULL);
    snprintf(dir, sizeof dir, "/tmp/lockgate-access-XXXXXX");
    if (!mkdtemp(dir)) return 1;
    snprintf(auth_path, sizeof auth_path, "%s/keys.json", dir);
    write_keys(0, 1);
    if (h_redis_start(&redis, 0, NULL) < 0) return 1;
    char flags[256];
    snprintf(flags, sizeof flags, "--auth-file %s", auth_path);
    if (h_gw_up(&gw, &redis, flags) < 0) return 1;
    RUN_SOME(test_access_matrix);
    RUN_SOME(test_access_key_id_on_holders);
    RUN_SOME(test_access_operator_and_session_routes);
    RUN_SOME(test_access_semaphore_listing_filtered);
    RUN_SOME(test_access_ids_listing_filtered);
    RUN_SOME(test_access_listing_with_no_read_grant);
    RUN_SOME(test_access_prefix_stream_filtered);
    RUN_SOME(test_access_semaphore_force);
    RUN_SOME(test_access_watch_refused_at_once);
    RUN_SOME(test_access_denial_metrics);
    RUN_SOME(test_access_sighup_reload);
    RUN_SOME(test_access_invalid_file_at_start);
    RUN_SOME(test_access_warning_beyond_loopback);
    RUN_SOME(test_access_per_ip_limit);
    RUN_SOME(test_access_rate_limit);
    RUN_SOME(test_access_sessions_owned);
    RUN_SOME(test_access_session_hold_survives_other_key);
    RUN_SOME(test_access_no_secret_in_logs);
    h_gw_stop(&gw, 5000);
    h_redis_stop(&redis);
    char rm[128];
    snprintf(rm, sizeof rm, "rm -rf %s", dir);
    if (system(rm) != 0) fprintf(stderr, "could not remove %s\n", dir);
    return check_summary("access");
}
