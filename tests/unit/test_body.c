/* test_body.c -- the typed body helpers (body.h), on a fake request: no
 * connection, so reply_* completes the request in place and the test reads
 * the status and problem+json it left behind. */
#include "server/body.h"
#include "server/http.h"
#include "server/reply.h"
#include "tests/check.h"

#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

/* ============================================================================
 * A request without a connection
 * ========================================================================= */

static struct gw_request *fake_new(const char *body, size_t len) {
    struct gw_request *req = calloc(1, sizeof *req);
    req->route = -1;
    req->conn = NULL;
    req->suspended = 0;
    if (len) {
        req->body = malloc(len + 1);
        memcpy(req->body, body, len);
        req->body[len] = '\0';
        req->body_len = len;
    }
    return req;
}

static struct gw_request *fake(const char *body) { return fake_new(body, body ? strlen(body) : 0); }

static void fake_free(struct gw_request *req) {
    for (int i = 0; i < req->nheaders; i++) free(req->headers[i].value);
    free(req->headers);
    cJSON_Delete(req->json);
    free(req->body);
    free(req->resp);
    free(req);
}

/* The code of the problem req was answered with, or "" when it was not. */
static const char *problem_code(struct gw_request *req, char *buf, size_t cap) {
    buf[0] = '\0';
    if (!req->resp) return buf;
    cJSON *o = cJSON_ParseWithLength(req->resp, req->resp_len);
    cJSON *c = cJSON_GetObjectItemCaseSensitive(o, "code");
    if (cJSON_IsString(c)) snprintf(buf, cap, "%s", c->valuestring);
    cJSON_Delete(o);
    return buf;
}

static int detail_mentions(struct gw_request *req, const char *word) {
    if (!req->resp) return 0;
    cJSON *o = cJSON_ParseWithLength(req->resp, req->resp_len);
    cJSON *d = cJSON_GetObjectItemCaseSensitive(o, "detail");
    int yes = cJSON_IsString(d) && strstr(d->valuestring, word) != NULL;
    cJSON_Delete(o);
    return yes;
}

/* Expects req to have been answered 400 with code. */
#define CHECK_REPLIED(req, want_code)                                                \
    do {                                                                             \
        char code_buf_[64];                                                          \
        CHECK_EQ_INT((req)->status, 400);                                            \
        CHECK_EQ_INT((req)->done, 1);                                                \
        CHECK_EQ_STR((req)->content_type, "application/problem+json");               \
        CHECK_EQ_STR(problem_code((req), code_buf_, sizeof code_buf_), (want_code)); \
    } while (0)

#define CHECK_NOT_REPLIED(req)          \
    do {                                \
        CHECK_EQ_INT((req)->status, 0); \
        CHECK((req)->resp == NULL);     \
        CHECK_EQ_INT((req)->done, 0);   \
    } while (0)

/* ============================================================================
 * body_parse_or_reply
 * ========================================================================= */

static void parse_ok(const char *body) {
    struct gw_request *req = fake(body);
    int rc = body_parse_or_reply(req);
    if (rc != GW_OK) fprintf(stderr, "  refused body '%.60s'\n", body ? body : "(none)");
    CHECK_EQ_INT(rc, GW_OK);
    CHECK(cJSON_IsObject(req->json));
    CHECK_NOT_REPLIED(req);
    fake_free(req);
}

static void parse_bad_len(const char *body, size_t len) {
    struct gw_request *req = fake_new(body, len);
    int rc = body_parse_or_reply(req);
    if (rc != GW_REPLIED) fprintf(stderr, "  accepted body '%.60s'\n", body);
    CHECK_EQ_INT(rc, GW_REPLIED);
    CHECK_REPLIED(req, "invalid_json");
    fake_free(req);
}

static void parse_bad(const char *body) { parse_bad_len(body, strlen(body)); }

static void test_parse_objects(void) {
    parse_ok(NULL); /* empty body: all defaults */
    parse_ok("{}");
    parse_ok("  {}  ");
    parse_ok("{}\r\n\t ");
    parse_ok("{\"ttl_ms\":1000,\"owner\":\"x\"}");
    parse_ok("{\"nested\":{\"a\":[1,2,{\"b\":null}]},\"ttl_ms\":1000}");
    parse_ok("{\"owner\":\"caf\\u00e9 \\ud83d\\ude00\"}");
}

static void test_parse_not_objects(void) {
    const char *bad[] = {"[]",
                         "[1,2]",
                         "\"str\"",
                         "1",
                         "true",
                         "null",
                         "{",
                         "}",
                         "{\"a\"}",
                         "{\"a\":}",
                         "{\"a\":1,}",
                         "{'a':1}",
                         "{a:1}",
                         "{} {}",
                         "{} x",
                         "{}}",
                         " ",
                         "\n",
                         "{\"a\":\"\\ud800\"}",
                         "{\"a\":\"\\x41\"}",
                         "{\"a\":-}",
                         "{\"a\":NaN}",
                         "{\"a\":Infinity}",
                         "{\"a\":1}\xef\xbb\xbf"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) parse_bad(bad[i]);
}

static void test_parse_nul_bytes(void) {
    parse_bad_len("{}\0", 3);
    parse_bad_len("{}\0{}", 5);
    parse_bad_len("\0{}", 3);
    parse_bad_len("{\"ttl_ms\":1000}\0\0\0\0", 19);
}

/* openapi.yaml: bodies are JSON in UTF-8.  cJSON takes any bytes inside a string,
 * so a raw NUL silently cuts the string short and invalid UTF-8 is stored
 * and later echoed (GET's owner) as JSON that is not UTF-8.  Both must be
 * 400 invalid_json. */
static void test_parse_strict_strings(void) {
    parse_bad_len("{\"owner\":\"a\0b\"}", 15);
    parse_bad("{\"owner\":\"\xff\xfe\"}");
    parse_bad("{\"owner\":\"\xc3\"}");         /* truncated sequence */
    parse_bad("{\"owner\":\"\xc0\xaf\"}");     /* overlong '/' */
    parse_bad("{\"owner\":\"\xed\xa0\x80\"}"); /* a surrogate encoded in UTF-8 */
}

static char *nested(int depth, char open, char close) {
    char *s = malloc((size_t)depth * 2 + 1);
    memset(s, open, (size_t)depth);
    memset(s + depth, close, (size_t)depth);
    s[2 * depth] = '\0';
    return s;
}

static void test_parse_deep(void) {
    char *s = nested(10000, '[', ']');
    parse_bad(s);
    free(s);
    /* {"a":{"a":...{}}} 10000 deep: an object, so only the depth refuses it. */
    size_t n = 10000, len = 0;
    char *o = malloc(n * 6 + 3);
    for (size_t i = 0; i < n; i++) len += (size_t)sprintf(o + len, "{\"a\":");
    len += (size_t)sprintf(o + len, "{}");
    for (size_t i = 0; i < n; i++) o[len++] = '}';
    o[len] = '\0';
    parse_bad(o);
    free(o);
    /* Unbalanced, unclosed: 10000 '[' and nothing else. */
    s = nested(10000, '[', ']');
    s[10000] = '\0';
    parse_bad(s);
    free(s);
}

/* ============================================================================
 * Typed fields
 * ========================================================================= */

/* Parses body, reads one integer field, returns the helper's result. */
static int int_field(const char *body, const char *field, long long def, long long lo, long long hi,
                     long long *out, int *present, char *code, size_t cap) {
    struct gw_request *req = fake(body);
    CHECK_EQ_INT(body_parse_or_reply(req), GW_OK);
    int rc = body_int_or_reply(req, field, def, lo, hi, out, present);
    problem_code(req, code, cap);
    if (rc == GW_REPLIED) {
        CHECK_EQ_INT(req->status, 400);
        CHECK(detail_mentions(req, field));
    } else {
        CHECK_NOT_REPLIED(req);
    }
    fake_free(req);
    return rc;
}

static void test_int_field(void) {
    long long v = -7;
    int present = -1;
    char code[64];
    CHECK_EQ_INT(int_field("{}", "ttl_ms", 30000, 100, 86400000, &v, &present, code, sizeof code),
                 GW_OK);
    CHECK_EQ_INT(v, 30000);
    CHECK_EQ_INT(present, 0);
    CHECK_EQ_INT(int_field("{\"ttl_ms\":null}", "ttl_ms", 30000, 100, 86400000, &v, &present, code,
                           sizeof code),
                 GW_OK);
    CHECK_EQ_INT(v, 30000);
    CHECK_EQ_INT(present, 0);
    CHECK_EQ_INT(int_field("{\"ttl_ms\":5000}", "ttl_ms", 30000, 100, 86400000, &v, &present, code,
                           sizeof code),
                 GW_OK);
    CHECK_EQ_INT(v, 5000);
    CHECK_EQ_INT(present, 1);
    /* NULL present is allowed. */
    CHECK_EQ_INT(
        int_field("{\"ttl_ms\":5000}", "ttl_ms", 0, 100, 86400000, &v, NULL, code, sizeof code),
        GW_OK);
    /* Bounds are inclusive. */
    CHECK_EQ_INT(
        int_field("{\"ttl_ms\":100}", "ttl_ms", 0, 100, 86400000, &v, NULL, code, sizeof code),
        GW_OK);
    CHECK_EQ_INT(v, 100);
    CHECK_EQ_INT(
        int_field("{\"ttl_ms\":86400000}", "ttl_ms", 0, 100, 86400000, &v, NULL, code, sizeof code),
        GW_OK);
    CHECK_EQ_INT(v, 86400000);
    /* Integer-valued numbers in other spellings. */
    CHECK_EQ_INT(
        int_field("{\"ttl_ms\":1e3}", "ttl_ms", 0, 100, 86400000, &v, NULL, code, sizeof code),
        GW_OK);
    CHECK_EQ_INT(v, 1000);
    CHECK_EQ_INT(
        int_field("{\"ttl_ms\":1000.0}", "ttl_ms", 0, 100, 86400000, &v, NULL, code, sizeof code),
        GW_OK);
    CHECK_EQ_INT(v, 1000);
    CHECK_EQ_INT(
        int_field("{\"wait_ms\":-0}", "wait_ms", 5, 0, 300000, &v, NULL, code, sizeof code), GW_OK);
    CHECK_EQ_INT(v, 0);
    /* Field names are case-sensitive: TTL_MS is an unknown field. */
    CHECK_EQ_INT(int_field("{\"TTL_MS\":\"x\"}", "ttl_ms", 30000, 100, 86400000, &v, &present, code,
                           sizeof code),
                 GW_OK);
    CHECK_EQ_INT(present, 0);
    /* The largest bound a handler uses (max_hold_ms). */
    CHECK_EQ_INT(int_field("{\"max_hold_ms\":1000000000000}", "max_hold_ms", 0, 100,
                           1000000000000LL, &v, NULL, code, sizeof code),
                 GW_OK);
    CHECK_EQ_INT(v, 1000000000000LL);

    const char *bad[] = {
        "{\"ttl_ms\":99}",
        "{\"ttl_ms\":86400001}",
        "{\"ttl_ms\":-1}",
        "{\"ttl_ms\":1000.5}",
        "{\"ttl_ms\":\"5000\"}",
        "{\"ttl_ms\":true}",
        "{\"ttl_ms\":[1000]}",
        "{\"ttl_ms\":{}}",
        "{\"ttl_ms\":1e400}",
        "{\"ttl_ms\":-1e400}",
        "{\"ttl_ms\":1e-400}",
        "{\"ttl_ms\":99999999999999999999999}",
        "{\"ttl_ms\":-99999999999999999999999}",
        "{\"ttl_ms\":100.0000001}",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        v = -7;
        int rc = int_field(bad[i], "ttl_ms", 30000, 100, 86400000, &v, NULL, code, sizeof code);
        if (rc != GW_REPLIED) fprintf(stderr, "  accepted %s as %lld\n", bad[i], v);
        CHECK_EQ_INT(rc, GW_REPLIED);
        CHECK_EQ_STR(code, "invalid_field");
    }
    /* Past 2^53 a double cannot tell neighbours apart: the range check
     * must still hold at the edge of the largest bound. */
    CHECK_EQ_INT(int_field("{\"max_hold_ms\":1000000000001}", "max_hold_ms", 0, 100,
                           1000000000000LL, &v, NULL, code, sizeof code),
                 GW_REPLIED);
}

static void test_bool_field(void) {
    struct {
        const char *body;
        int rc;
        int out;
    } cases[] = {
        {"{}",                  GW_OK,      0},
        {"{\"fair\":null}",     GW_OK,      0},
        {"{\"fair\":true}",     GW_OK,      1},
        {"{\"fair\":false}",    GW_OK,      0},
        {"{\"fair\":1}",        GW_REPLIED, 0},
        {"{\"fair\":0}",        GW_REPLIED, 0},
        {"{\"fair\":\"true\"}", GW_REPLIED, 0},
        {"{\"fair\":[]}",       GW_REPLIED, 0},
        {"{\"fair\":{}}",       GW_REPLIED, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct gw_request *req = fake(cases[i].body);
        CHECK_EQ_INT(body_parse_or_reply(req), GW_OK);
        int out = -1;
        int rc = body_bool_or_reply(req, "fair", 0, &out);
        CHECK_EQ_INT(rc, cases[i].rc);
        if (rc == GW_OK) {
            CHECK_EQ_INT(out, cases[i].out);
            CHECK_NOT_REPLIED(req);
        } else {
            CHECK_REPLIED(req, "invalid_field");
            CHECK(detail_mentions(req, "fair"));
        }
        fake_free(req);
    }
    /* The default is the caller's. */
    struct gw_request *req = fake(NULL);
    CHECK_EQ_INT(body_parse_or_reply(req), GW_OK);
    int out = -1;
    CHECK_EQ_INT(body_bool_or_reply(req, "fair", 1, &out), GW_OK);
    CHECK_EQ_INT(out, 1);
    fake_free(req);
}

static void test_string_field(void) {
    struct gw_request *req = fake("{\"owner\":\"job 7\",\"mode\":\"shared\",\"empty\":\"\"}");
    CHECK_EQ_INT(body_parse_or_reply(req), GW_OK);
    const char *s = (const char *)1;
    CHECK_EQ_INT(body_string_or_reply(req, "owner", 200, &s), GW_OK);
    CHECK_EQ_STR(s, "job 7");
    CHECK_EQ_INT(body_string_or_reply(req, "mode", 16, &s), GW_OK);
    CHECK_EQ_STR(s, "shared");
    CHECK_EQ_INT(body_string_or_reply(req, "empty", 16, &s), GW_OK);
    CHECK_EQ_STR(s, "");
    CHECK_EQ_INT(body_string_or_reply(req, "absent", 16, &s), GW_OK);
    CHECK(s == NULL);
    CHECK_NOT_REPLIED(req);
    fake_free(req);

    req = fake("{\"owner\":null}");
    CHECK_EQ_INT(body_parse_or_reply(req), GW_OK);
    s = (const char *)1;
    CHECK_EQ_INT(body_string_or_reply(req, "owner", 200, &s), GW_OK);
    CHECK(s == NULL);
    fake_free(req);

    /* Exactly maxlen bytes pass, one more does not; the limit is bytes, so
     * a 2-byte character counts twice. */
    char body[600];
    char owner[260];
    memset(owner, 'o', 200);
    owner[200] = '\0';
    snprintf(body, sizeof body, "{\"owner\":\"%s\"}", owner);
    req = fake(body);
    CHECK_EQ_INT(body_parse_or_reply(req), GW_OK);
    CHECK_EQ_INT(body_string_or_reply(req, "owner", 200, &s), GW_OK);
    CHECK_EQ_INT((int)strlen(s), 200);
    fake_free(req);
    snprintf(body, sizeof body, "{\"owner\":\"%so\"}", owner);
    req = fake(body);
    CHECK_EQ_INT(body_parse_or_reply(req), GW_OK);
    CHECK_EQ_INT(body_string_or_reply(req, "owner", 200, &s), GW_REPLIED);
    CHECK_REPLIED(req, "invalid_field");
    CHECK(detail_mentions(req, "owner"));
    fake_free(req);
    memset(owner, 0, sizeof owner);
    for (int i = 0; i < 100; i++) memcpy(owner + 2 * i, "\xc3\xa9", 2); /* 200 bytes */
    snprintf(body, sizeof body, "{\"owner\":\"%s\\u00e9\"}", owner);    /* 202 bytes */
    req = fake(body);
    CHECK_EQ_INT(body_parse_or_reply(req), GW_OK);
    CHECK_EQ_INT(body_string_or_reply(req, "owner", 200, &s), GW_REPLIED);
    fake_free(req);

    const char *bad[] = {"{\"owner\":5}", "{\"owner\":true}", "{\"owner\":[\"a\"]}",
                         "{\"owner\":{\"a\":1}}"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        req = fake(bad[i]);
        CHECK_EQ_INT(body_parse_or_reply(req), GW_OK);
        CHECK_EQ_INT(body_string_or_reply(req, "owner", 200, &s), GW_REPLIED);
        CHECK_REPLIED(req, "invalid_field");
        CHECK(s == NULL);
        fake_free(req);
    }
}

/* Duplicate keys: the helpers read one of the values, consistently, and
 * never crash or leak; which one is cJSON's choice (the first). */
static void test_duplicate_keys(void) {
    struct gw_request *req = fake("{\"ttl_ms\":1000,\"ttl_ms\":2000}");
    CHECK_EQ_INT(body_parse_or_reply(req), GW_OK);
    long long v = 0;
    CHECK_EQ_INT(body_int_or_reply(req, "ttl_ms", 0, 100, 86400000, &v, NULL), GW_OK);
    CHECK(v == 1000 || v == 2000);
    fake_free(req);
}

int main(void) {
    RUN(test_parse_objects);
    RUN(test_parse_not_objects);
    RUN(test_parse_nul_bytes);
    RUN(test_parse_strict_strings);
    RUN(test_parse_deep);
    RUN(test_int_field);
    RUN(test_bool_field);
    RUN(test_string_field);
    RUN(test_duplicate_keys);
    return check_summary("body");
}
