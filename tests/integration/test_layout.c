/* test_layout.c -- two gateways with different key layout versions on one
 * Redis never both grant one name (#31, server/layout.h).
 *
 * Gateway A is this build (its LAYOUT_VERSION); gateway B is the same binary told by
 * the test hook LOCKGATE_TEST_LAYOUT_VERSION that its layout is 99, as a
 * later release with an incompatible change would be.  Whichever starts
 * first on an empty Redis writes its version (SETNX); the other must then
 * answer every /v1/ request 503 layout_unsupported naming both versions,
 * /readyz likewise, while /healthz stays 200, and must not touch the
 * names the first one holds: the holder's lock survives the other's
 * DELETE, and in a race of both on the same names only one ever grants. */
#include "tests/integration/harness.h"
#include "server/layout.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static struct h_redis redis;

/* Waits until port's /readyz answers with code (NULL: 200). */
static int wait_readyz(int port, const char *code) {
    for (long long end = h_now_ms() + 10000; h_now_ms() < end; h_sleep_ms(20)) {
        struct h_resp r = h_http("GET", port, "/readyz", NULL, NULL, NULL);
        int ok = code ? r.status == 503 && strcmp(h_jcode(&r), code) == 0 : r.status == 200;
        h_resp_free(&r);
        if (ok) return 0;
    }
    return -1;
}

static int post_status(int port, const char *path, char *code, size_t cap) {
    struct h_resp r = h_http("POST", port, path, NULL, "{\"ttl_ms\":60000}", NULL);
    int st = (int)r.status;
    if (code) snprintf(code, cap, "%s", r.json ? h_jcode(&r) : "");
    h_resp_free(&r);
    return st;
}

/* first starts on an empty Redis, then second; second must refuse. */
static void run_pair(const char *first_env, const char *second_env, const char *found,
                     const char *needs) {
    struct h_gw first = {0}, second = {0};
    if (redis.cn) /* a Redis Cluster (LOCKGATE_TEST_CLUSTER): every master */
        for (int i = 0; i < redis.cn; i++) {
            struct h_redis n = h_cluster_node(&redis, i);
            h_redis_cli(&n, "FLUSHALL");
        }
    else
        h_redis_cli(&redis, "FLUSHALL");
    CHECK_EQ_INT(h_gw_start_env(&first, &redis, "--workers 2", first_env), 0);
    CHECK_EQ_INT(wait_readyz(first.port, NULL), 0);
    CHECK_EQ_INT(h_gw_start_env(&second, &redis, "--workers 2", second_env), 0);
    CHECK_EQ_INT(wait_readyz(second.port, "layout_unsupported"), 0);

    /* /readyz names the version found and the one needed; /healthz is 200. */
    struct h_resp r = h_http("GET", second.port, "/readyz", NULL, NULL, NULL);
    const char *detail = r.json ? h_jstr(&r, "detail") : "";
    char want_found[64], want_needs[64];
    snprintf(want_found, sizeof want_found, "layout version %s", found);
    snprintf(want_needs, sizeof want_needs, "needs layout %s", needs);
    if (!strstr(detail, want_found)) fprintf(stderr, "  detail: %s\n", detail);
    CHECK(strstr(detail, want_found) != NULL);
    CHECK(strstr(detail, want_needs) != NULL);
    CHECK(h_header(&r, "Retry-After")[0] != '\0');
    h_resp_free(&r);
    r = h_http("GET", second.port, "/healthz", NULL, NULL, NULL);
    CHECK_EQ_INT(r.status, 200);
    h_resp_free(&r);
    CHECK_EQ_STR(h_redis_cli(&redis, "GET lockgate:layout"), found);

    /* The first holds a name; the second neither reads, takes nor
     * releases it. */
    r = h_http("POST", first.port, "/v1/locks/layout-held", NULL, "{\"ttl_ms\":60000}", NULL);
    CHECK_EQ_INT(r.status, 201);
    char token[64];
    snprintf(token, sizeof token, "%s", h_token(&r));
    h_resp_free(&r);
    char code[64];
    CHECK_EQ_INT(post_status(second.port, "/v1/locks/layout-held", code, sizeof code), 503);
    CHECK_EQ_STR(code, "layout_unsupported");
    static const char *const reads[][2] = {
        {"GET",    "/v1/locks/layout-held"},
        {"DELETE", "/v1/locks/layout-held"},
        {"GET",    "/v1/locks"            },
        {"POST",   "/v1/ids/layout"       },
        {"POST",   "/v1/semaphores/layout"},
    };
    for (size_t i = 0; i < sizeof reads / sizeof reads[0]; i++) {
        r = h_http(reads[i][0], second.port, reads[i][1], token,
                   strcmp(reads[i][0], "POST") == 0 ? "{\"limit\":2}" : NULL, NULL);
        CHECK_EQ_INT(r.status, 503);
        CHECK_EQ_STR(h_jcode(&r), "layout_unsupported");
        h_resp_free(&r);
    }
    r = h_http("GET", first.port, "/v1/locks/layout-held", NULL, NULL, NULL);
    CHECK_EQ_INT(r.status, 200); /* still held, by the first one's token */
    CHECK_EQ_STR(h_jstr(&r, "token") ? h_jstr(&r, "token") : token, token);
    h_resp_free(&r);

    /* Both race for the same free names: only the first ever grants. */
    int granted_first = 0, granted_second = 0;
    for (int i = 0; i < 40; i++) {
        char path[64];
        snprintf(path, sizeof path, "/v1/locks/layout-race-%d", i % 8);
        int a = post_status(i % 2 ? second.port : first.port, path, NULL, 0);
        int b = post_status(i % 2 ? first.port : second.port, path, NULL, 0);
        int on_first = i % 2 ? b : a, on_second = i % 2 ? a : b;
        granted_first += on_first == 201;
        granted_second += on_second == 201;
        CHECK(on_second == 503);
    }
    CHECK_EQ_INT(granted_first, 8);
    CHECK_EQ_INT(granted_second, 0);
    CHECK(h_log_count(&second, "layout: Redis master") >= 1);
    h_gw_stop(&first, 5000);
    h_gw_stop(&second, 5000);
}

/* This build's layout version, as text (server/layout.h). */
#define LAYOUT_TEXT(v) #v
#define LAYOUT_STR(v)  LAYOUT_TEXT(v)
#define THIS_LAYOUT    LAYOUT_STR(LAYOUT_VERSION)

/* This build first, then a later, incompatible one. */
static void test_newer_gateway_refuses_older_layout(void) {
    run_pair(NULL, "env LOCKGATE_TEST_LAYOUT_VERSION=99", THIS_LAYOUT, "99");
}

/* The later one first (a Redis already moved on), then this build. */
static void test_older_gateway_refuses_newer_layout(void) {
    run_pair("env LOCKGATE_TEST_LAYOUT_VERSION=99", NULL, "99", THIS_LAYOUT);
}

/* A layout-2 gateway set the Redis's version (a deployment being upgraded
 * to this build, layout 3).  Outside Redis Cluster this build refuses it:
 * its live holds would read to layout 2 as leases that never end.  In
 * Redis Cluster mode it writes what layout 2 writes and shares it: both
 * serve, one name granted once, and the version stays 2. */
static void test_layout2_shared_in_cluster_only(void) {
    if (!h_cluster_mode()) {
        run_pair("env LOCKGATE_TEST_LAYOUT_VERSION=2", NULL, "2", THIS_LAYOUT);
        return;
    }
    for (int i = 0; i < redis.cn; i++) {
        struct h_redis n = h_cluster_node(&redis, i);
        h_redis_cli(&n, "FLUSHALL");
    }
    struct h_gw older = {0}, newer = {0};
    CHECK_EQ_INT(
        h_gw_start_env(&older, &redis, "--workers 2", "env LOCKGATE_TEST_LAYOUT_VERSION=2"), 0);
    CHECK_EQ_INT(wait_readyz(older.port, NULL), 0);
    CHECK_EQ_INT(h_gw_start_env(&newer, &redis, "--workers 2", NULL), 0);
    CHECK_EQ_INT(wait_readyz(newer.port, NULL), 0);
    CHECK_EQ_STR(h_redis_cli(&redis, "GET lockgate:layout"), "2");
    CHECK_EQ_INT(post_status(older.port, "/v1/locks/layout-shared", NULL, 0), 201);
    CHECK_EQ_INT(post_status(newer.port, "/v1/locks/layout-shared", NULL, 0), 409);
    CHECK_EQ_INT(post_status(newer.port, "/v1/locks/layout-shared-2", NULL, 0), 201);
    CHECK_EQ_INT(post_status(older.port, "/v1/locks/layout-shared-2", NULL, 0), 409);
    h_gw_stop(&older, 5000);
    h_gw_stop(&newer, 5000);
}

int main(int argc, char **argv) {
    check_filter(argc > 1 ? argv[1] : NULL);
    if (h_redis_start(&redis, 0, NULL) < 0) return 2;
    RUN_SOME(test_newer_gateway_refuses_older_layout);
    RUN_SOME(test_older_gateway_refuses_newer_layout);
    RUN_SOME(test_layout2_shared_in_cluster_only);
    h_redis_stop(&redis);
    return check_summary("layout");
}
