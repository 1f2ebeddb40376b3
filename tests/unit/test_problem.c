/* test_problem.c -- problem+json (RFC 9457): the table of codes, the one
 * function that builds error bodies, and the reply_* family on a request
 * without a connection (reply_* then completes the request in place). */
#include "server/http.h"
#include "server/reply.h"
#include "tests/check.h"

#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

/* The contract's list of codes (openapi.yaml, Problem), with the status
 * each is sent with. */
static const struct {
    enum gw_code code;
    const char *name;
    int status;
} expected[] = {
    {CODE_INVALID_NAME,        "invalid_name",        400},
    {CODE_INVALID_FIELD,       "invalid_field",       400},
    {CODE_INVALID_JSON,        "invalid_json",        400},
    {CODE_INVALID_ID,          "invalid_id",          400},
    {CODE_INVALID_TOKEN,       "invalid_token",       400},
    {CODE_MISSING_TOKEN,       "missing_token",       400},
    {CODE_LOCK_BUSY,           "lock_busy",           409},
    {CODE_MODE_MISMATCH,       "mode_mismatch",       409},
    {CODE_LIMIT_MISMATCH,      "limit_mismatch",      409},
    {CODE_NOT_HELD,            "not_held",            404},
    {CODE_NOT_OWNER,           "not_owner",           409},
    {CODE_NOT_FOUND,           "not_found",           404},
    {CODE_METHOD_NOT_ALLOWED,  "method_not_allowed",  405},
    {CODE_PAYLOAD_TOO_LARGE,   "payload_too_large",   413},
    {CODE_BACKEND_UNAVAILABLE, "backend_unavailable", 503},
    {CODE_SHUTTING_DOWN,       "shutting_down",       503},
    {CODE_UNAUTHORIZED,        "unauthorized",        401},
    {CODE_NOT_IMPLEMENTED,     "not_implemented",     501},
    {CODE_TOO_MANY_NAMESPACES, "too_many_namespaces", 503},
    {CODE_INVALID_REQUEST,     "invalid_request",     400},
    {CODE_NOT_ACCEPTABLE,      "not_acceptable",      406},
    {CODE_SESSION_NOT_FOUND,   "session_not_found",   404},
    {CODE_SESSION_BOUND,       "session_bound",       409},
    {CODE_SESSION_MISMATCH,    "session_mismatch",    409},
    {CODE_UNAUTHENTICATED,     "unauthenticated",     401},
    {CODE_FORBIDDEN,           "forbidden",           403},
    {CODE_IDS_BEHIND,          "ids_behind",          503},
    {CODE_ID_EPOCH_MISMATCH,   "id_epoch_mismatch",   503},
    {CODE_REDIS_OUT_OF_MEMORY, "redis_out_of_memory", 503},
    {CODE_REDIS_MAY_EVICT,     "redis_may_evict",     503},
    {CODE_REDIS_DATA_LOST,     "redis_data_lost",     503},
    {CODE_LAYOUT_UNSUPPORTED,  "layout_unsupported",  503},
    {CODE_ORIGIN_FORBIDDEN,    "origin_forbidden",    403},
    {CODE_RATE_LIMITED,        "rate_limited",        429},
    {CODE_QUOTA_EXCEEDED,      "quota_exceeded",      429},
    {CODE_URI_TOO_LONG,        "uri_too_long",        414},
    {CODE_HEADERS_TOO_LARGE,   "headers_too_large",   431},
    {CODE_TOO_MANY_PREFIXES,   "too_many_prefixes",   503},
};
#define NEXPECTED (sizeof expected / sizeof expected[0])

static struct gw_request *fake(void) {
    struct gw_request *req = calloc(1, sizeof *req);
    req->route = -1;
    return req;
}

static void fake_free(struct gw_request *req) {
    for (int i = 0; i < req->nheaders; i++) free(req->headers[i].value);
    free(req->headers);
    free(req->resp);
    free(req);
}

static const char *hdr(struct gw_request *req, const char *name) {
    for (int i = 0; i < req->nheaders; i++)
        if (strcmp(req->headers[i].name, name) == 0) return req->headers[i].value;
    return NULL;
}

/* ============================================================================
 * The table
 * ========================================================================= */

static void test_table(void) {
    CHECK_EQ_INT(CODE_COUNT, 38);
    CHECK_EQ_INT(NEXPECTED, CODE_COUNT);
    for (size_t i = 0; i < NEXPECTED; i++) {
        const struct problem_info *pi = problem_info(expected[i].code);
        CHECK(pi != NULL);
        if (!pi) continue;
        CHECK_EQ_STR(pi->code, expected[i].name);
        CHECK_EQ_INT(pi->status, expected[i].status);
        CHECK(pi->title && strlen(pi->title) > 0 && strlen(pi->title) < 80);
    }
    /* Every code is distinct and of [a-z_]. */
    for (int a = 0; a < CODE_COUNT; a++) {
        const char *ca = problem_info((enum gw_code)a)->code;
        for (const char *p = ca; p && *p; p++) CHECK((*p >= 'a' && *p <= 'z') || *p == '_');
        for (int b = 0; b < a; b++) CHECK(strcmp(ca, problem_info((enum gw_code)b)->code) != 0);
    }
}

/* ============================================================================
 * problem_body
 * ========================================================================= */

/* Parses a body and checks the five members RFC 9457 and openapi.yaml ask for. */
static cJSON *check_shape(const char *body, enum gw_code code, const char *detail) {
    cJSON *o = cJSON_Parse(body);
    CHECK(cJSON_IsObject(o));
    if (!o) return NULL;
    const struct problem_info *pi = problem_info(code);
    cJSON *type = cJSON_GetObjectItemCaseSensitive(o, "type");
    cJSON *title = cJSON_GetObjectItemCaseSensitive(o, "title");
    cJSON *status = cJSON_GetObjectItemCaseSensitive(o, "status");
    cJSON *det = cJSON_GetObjectItemCaseSensitive(o, "detail");
    cJSON *c = cJSON_GetObjectItemCaseSensitive(o, "code");
    /* type: a URI reference (here an absolute URI with a scheme). */
    CHECK(cJSON_IsString(type) && strlen(type->valuestring) > 0);
    if (cJSON_IsString(type)) {
        CHECK(strchr(type->valuestring, ':') != NULL);
        CHECK(strchr(type->valuestring, ' ') == NULL);
    }
    CHECK(cJSON_IsString(title));
    if (cJSON_IsString(title)) CHECK_EQ_STR(title->valuestring, pi->title);
    /* status: a JSON number, equal to the HTTP status. */
    CHECK(cJSON_IsNumber(status));
    if (cJSON_IsNumber(status)) CHECK_EQ_INT(status->valueint, pi->status);
    CHECK(cJSON_IsString(det));
    if (cJSON_IsString(det)) CHECK_EQ_STR(det->valuestring, detail);
    CHECK(cJSON_IsString(c));
    if (cJSON_IsString(c)) CHECK_EQ_STR(c->valuestring, pi->code);
    return o;
}

static int members(cJSON *o) {
    int n = 0;
    for (cJSON *it = o ? o->child : NULL; it; it = it->next) n++;
    return n;
}

/* Each member name appears once. */
static int unique_members(cJSON *o) {
    for (cJSON *a = o ? o->child : NULL; a; a = a->next)
        for (cJSON *b = a->next; b; b = b->next)
            if (strcmp(a->string, b->string) == 0) return 0;
    return 1;
}

static void test_body_every_code(void) {
    for (int c = 0; c < CODE_COUNT; c++) {
        char *s = problem_body((enum gw_code)c, NULL, "something went wrong");
        CHECK(s != NULL);
        cJSON *o = check_shape(s, (enum gw_code)c, "something went wrong");
        CHECK_EQ_INT(members(o), 5);
        CHECK(unique_members(o));
        cJSON_Delete(o);
        free(s);
    }
}

static void test_body_escaping(void) {
    const char *detail = "lock 'a\"b' \\ held\n\ttab \x01 caf\xc3\xa9 </script>";
    char *s = problem_body(CODE_LOCK_BUSY, NULL, detail);
    cJSON *o = check_shape(s, CODE_LOCK_BUSY, detail);
    /* No raw control character in the text. */
    for (const char *p = s; *p; p++) CHECK((unsigned char)*p >= 0x20);
    cJSON_Delete(o);
    free(s);
    s = problem_body(CODE_NOT_FOUND, NULL, "");
    o = check_shape(s, CODE_NOT_FOUND, "");
    cJSON_Delete(o);
    free(s);
}

static void test_body_extra_members(void) {
    cJSON *extra = cJSON_CreateObject();
    json_add_int(extra, "retry_after_ms", 1200);
    cJSON_AddStringToObject(extra, "name", "orders");
    cJSON_AddBoolToObject(extra, "fair", 1);
    cJSON *arr = cJSON_AddArrayToObject(extra, "holders");
    cJSON_AddItemToArray(arr, cJSON_CreateNumber(1));
    char *s = problem_body(CODE_LOCK_BUSY, extra, "lock 'orders' is held"); /* frees extra */
    cJSON *o = check_shape(s, CODE_LOCK_BUSY, "lock 'orders' is held");
    CHECK_EQ_INT(members(o), 9);
    CHECK(unique_members(o));
    cJSON *ra = cJSON_GetObjectItemCaseSensitive(o, "retry_after_ms");
    CHECK(cJSON_IsNumber(ra) && ra->valueint == 1200);
    CHECK_EQ_STR(cJSON_GetStringValue(cJSON_GetObjectItem(o, "name")), "orders");
    CHECK(cJSON_IsTrue(cJSON_GetObjectItem(o, "fair")));
    CHECK_EQ_INT(cJSON_GetArraySize(cJSON_GetObjectItem(o, "holders")), 1);
    cJSON_Delete(o);
    free(s);

    /* An empty extra object adds nothing. */
    s = problem_body(CODE_NOT_HELD, cJSON_CreateObject(), "d");
    o = check_shape(s, CODE_NOT_HELD, "d");
    CHECK_EQ_INT(members(o), 5);
    cJSON_Delete(o);
    free(s);
}

static void test_json_add_int_exact(void) {
    cJSON *o = cJSON_CreateObject();
    json_add_int(o, "fence", 9007199254740993LL); /* 2^53 + 1 */
    json_add_int(o, "max", 9223372036854775807LL);
    json_add_int(o, "neg", -5);
    json_add_int(o, "zero", 0);
    char *s = cJSON_PrintUnformatted(o);
    CHECK(strstr(s, "\"fence\":9007199254740993") != NULL);
    CHECK(strstr(s, "\"max\":9223372036854775807") != NULL);
    CHECK(strstr(s, "\"neg\":-5") != NULL);
    CHECK(strstr(s, "\"zero\":0") != NULL);
    cJSON *back = cJSON_Parse(s);
    CHECK(cJSON_IsObject(back));
    cJSON_Delete(back);
    cJSON_free(s);
    cJSON_Delete(o);
}

/* ============================================================================
 * reply_* on a request without a connection
 * ========================================================================= */

static void test_reply_problem(void) {
    for (int c = 0; c < CODE_COUNT; c++) {
        struct gw_request *req = fake();
        reply_problem(req, (enum gw_code)c, "detail %d of %s", 7, "x");
        const struct problem_info *pi = problem_info((enum gw_code)c);
        CHECK_EQ_INT(req->status, pi->status);
        CHECK_EQ_INT(req->done, 1);
        CHECK_EQ_STR(req->content_type, "application/problem+json");
        CHECK(req->resp != NULL && req->resp_len == strlen(req->resp));
        cJSON *o = check_shape(req->resp, (enum gw_code)c, "detail 7 of x");
        cJSON_Delete(o);
        /* 503s say when to come back; nothing else does. */
        if (pi->status == 503)
            CHECK_EQ_STR(hdr(req, "Retry-After"), "1");
        else
            CHECK(hdr(req, "Retry-After") == NULL);
        fake_free(req);
    }
}

/* Redis's OOM error, whatever handler meets it, has its own code (#28). */
static void test_reply_redis_oom(void) {
    struct gw_request *req = fake();
    reply_problem(req, CODE_BACKEND_UNAVAILABLE, "Redis: %s",
                  "OOM command not allowed when used memory > 'maxmemory'.");
    CHECK_EQ_INT(req->status, 503);
    CHECK(strstr(req->resp, "\"code\":\"redis_out_of_memory\"") != NULL);
    CHECK_EQ_STR(hdr(req, "Retry-After"), "1");
    fake_free(req);
    req = fake();
    reply_problem(req, CODE_BACKEND_UNAVAILABLE, "Redis: %s", "connection lost");
    CHECK(strstr(req->resp, "\"code\":\"backend_unavailable\"") != NULL);
    fake_free(req);
    /* A Retry-After set before is kept (redis_data_lost's own). */
    req = fake();
    reply_header(req, "Retry-After", "7");
    reply_problem(req, CODE_REDIS_DATA_LOST, "lost");
    CHECK_EQ_STR(hdr(req, "Retry-After"), "7");
    int n = 0;
    for (int i = 0; i < req->nheaders; i++) n += strcmp(req->headers[i].name, "Retry-After") == 0;
    CHECK_EQ_INT(n, 1);
    fake_free(req);
}

static void test_reply_problem_with_extra_and_headers(void) {
    struct gw_request *req = fake();
    reply_header(req, "Retry-After", "3");
    cJSON *extra = cJSON_CreateObject();
    json_add_int(extra, "retry_after_ms", 2500);
    reply_problem_with(req, CODE_LOCK_BUSY, extra, "lock '%s' is held", "busy1");
    CHECK_EQ_INT(req->status, 409);
    CHECK_EQ_STR(hdr(req, "Retry-After"), "3");
    cJSON *o = check_shape(req->resp, CODE_LOCK_BUSY, "lock 'busy1' is held");
    CHECK_EQ_INT(members(o), 6);
    CHECK_EQ_INT(cJSON_GetObjectItem(o, "retry_after_ms")->valueint, 2500);
    cJSON_Delete(o);
    fake_free(req);
}

/* A detail longer than the formatting buffer is cut, never overrun. */
static void test_reply_long_detail(void) {
    struct gw_request *req = fake();
    char *big = malloc(100001);
    memset(big, 'd', 100000);
    big[100000] = '\0';
    reply_problem(req, CODE_NOT_FOUND, "no route for %s", big);
    CHECK_EQ_INT(req->status, 404);
    cJSON *o = cJSON_Parse(req->resp);
    CHECK(cJSON_IsObject(o));
    cJSON *d = cJSON_GetObjectItem(o, "detail");
    CHECK(cJSON_IsString(d) && strlen(d->valuestring) > 100 && strlen(d->valuestring) < 100000);
    cJSON_Delete(o);
    free(big);
    fake_free(req);
}

/* Headers beyond HTTP_MAX_HEADERS are dropped; values are kept whole (a
 * Location holds a 200-byte name). */
static void test_reply_header_limits(void) {
    struct gw_request *req = fake();
    char value[1000];
    memset(value, 'v', sizeof value - 1);
    value[sizeof value - 1] = '\0';
    for (int i = 0; i < HTTP_MAX_HEADERS + 3; i++) reply_header(req, "X-Many", value);
    CHECK_EQ_INT(req->nheaders, HTTP_MAX_HEADERS);
    CHECK_EQ_INT(strlen(req->headers[0].value), sizeof value - 1);
    reply_header(req, "X-Too-Many-Headers-With-A-Very-Long-Name", "v");
    CHECK_EQ_INT(req->nheaders, HTTP_MAX_HEADERS);
    fake_free(req);
}

static void test_reply_json(void) {
    struct gw_request *req = fake();
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "name", "a");
    json_add_int(o, "fence", 17);
    reply_json(req, 201, o); /* takes o */
    CHECK_EQ_INT(req->status, 201);
    CHECK_EQ_STR(req->content_type, "application/json");
    CHECK_EQ_STR(req->resp, "{\"name\":\"a\",\"fence\":17}");
    CHECK_EQ_INT(req->resp_len, strlen(req->resp));
    fake_free(req);
}

int main(void) {
    RUN(test_table);
    RUN(test_body_every_code);
    RUN(test_body_escaping);
    RUN(test_body_extra_members);
    RUN(test_json_add_int_exact);
    RUN(test_reply_problem);
    RUN(test_reply_redis_oom);
    RUN(test_reply_problem_with_extra_and_headers);
    RUN(test_reply_long_detail);
    RUN(test_reply_header_limits);
    RUN(test_reply_json);
    return check_summary("problem");
}
