/* test_router.c -- router_match: which route, which parameters, and the
 * difference between 404 (no such path) and 405 (path known, method not,
 * with the Allow list).  On a table of its own and on the real gw_routes. */
#include "handlers/routes.h"
#include "server/router.h"
#include "tests/check.h"

#include <stdlib.h>
#include <string.h>

static void h(struct gw_request *req) { (void)req; }

static const struct gw_route table[] = {
    {.method = "POST",   .path = "/v1/locks/{name}",         .handler = h}, /* 0 */
    {.method = "PATCH",  .path = "/v1/locks/{name}",         .handler = h}, /* 1 */
    {.method = "DELETE", .path = "/v1/locks/{name}",         .handler = h}, /* 2 */
    {.method = "GET",    .path = "/v1/locks/{name}",         .handler = h}, /* 3 */
    {.method = "POST",   .path = "/v1/ids/{namespace}",      .handler = h}, /* 4 */
    {.method = "GET",    .path = "/v1/ids/{namespace}",      .handler = h}, /* 5 */
    {.method = "GET",    .path = "/v1/ids/{namespace}/{id}", .handler = h}, /* 6 */
    {.method = "GET",    .path = "/healthz",                 .handler = h}, /* 7 */
    {.method = "GET",    .path = "/v1/locks",                .handler = h}, /* 8 */
};
#define NT (sizeof table / sizeof table[0])

static int match(const char *method, const char *path, struct route_match *m) {
    memset(m, 0x5a, sizeof *m);
    return router_match(table, NT, method, path, m);
}

/* The i-th parameter as a string (still percent-encoded). */
static const char *param(const struct route_match *m, int i) {
    static char buf[ROUTER_MAX_PARAMS][512];
    size_t n = m->param_len[i] < sizeof buf[i] ? m->param_len[i] : sizeof buf[i] - 1;
    memcpy(buf[i], m->param[i], n);
    buf[i][n] = '\0';
    return buf[i];
}

static void test_match_and_params(void) {
    struct route_match m;
    const char *path = "/v1/locks/orders";
    CHECK_EQ_INT(match("POST", path, &m), 0);
    CHECK(m.param[0] == path + 10); /* points into the path, no copy */
    CHECK_EQ_INT(m.param_len[0], 6);
    CHECK_EQ_STR(param(&m, 0), "orders");
    CHECK_EQ_INT(match("PATCH", path, &m), 1);
    CHECK_EQ_INT(match("DELETE", path, &m), 2);
    CHECK_EQ_INT(match("GET", path, &m), 3);

    CHECK_EQ_INT(match("GET", "/v1/ids/orders/7433226813092249601", &m), 6);
    CHECK_EQ_STR(param(&m, 0), "orders");
    CHECK_EQ_STR(param(&m, 1), "7433226813092249601");
    CHECK_EQ_INT(match("POST", "/v1/ids/orders", &m), 4);
    CHECK_EQ_STR(param(&m, 0), "orders");

    /* The parameter is handed over still encoded: decoding is names.c's. */
    CHECK_EQ_INT(match("GET", "/v1/locks/a%2Fb", &m), 3);
    CHECK_EQ_STR(param(&m, 0), "a%2Fb");
    CHECK_EQ_INT(match("GET", "/v1/locks/%00", &m), 3);
    CHECK_EQ_STR(param(&m, 0), "%00");
    /* An empty segment matches {param}: the handler calls it invalid. */
    CHECK_EQ_INT(match("GET", "/v1/locks/", &m), 3);
    CHECK_EQ_INT(m.param_len[0], 0);
    /* Literal routes next to parameter routes; a route without {param}s
     * leaves none set (the access check reads param[0]: it crashed on a
     * stale pointer once). */
    memset(&m, 0x5a, sizeof m);
    CHECK_EQ_INT(match("GET", "/v1/locks", &m), 8);
    CHECK(m.param[0] == NULL);
    CHECK_EQ_INT(match("GET", "/healthz", &m), 7);
    CHECK_EQ_STR(m.allow, "");
}

static void test_not_found(void) {
    struct route_match m;
    const char *paths[] = {
        "",
        "/",
        "/v1",
        "/v1/",
        "/v1/locks/a/b",
        "/v1/locks/a/",
        "/v1/locks//",
        "//v1/locks/a",
        "/v1//locks/a",
        "v1/locks/a",
        "/V1/locks/a",
        "/v1/Locks/a",
        "/v1/locksx/a",
        "/v1/lock/a",
        "/healthz/",
        "/healthzz",
        "/health",
        "/healthz/x",
        "/v1/ids/o/1/2",
        "/v1/ids/o/1/",
        "/x/v1/locks/a",
    };
    for (size_t i = 0; i < sizeof paths / sizeof paths[0]; i++) {
        int r = match("GET", paths[i], &m);
        if (r != ROUTER_NOT_FOUND) fprintf(stderr, "  '%s' matched %d\n", paths[i], r);
        CHECK_EQ_INT(r, ROUTER_NOT_FOUND);
        /* Whatever the method. */
        CHECK_EQ_INT(match("POST", paths[i], &m), ROUTER_NOT_FOUND);
        CHECK_EQ_INT(match("BREW", paths[i], &m), ROUTER_NOT_FOUND);
    }
}

static void test_bad_method(void) {
    struct route_match m;
    CHECK_EQ_INT(match("PUT", "/v1/locks/x", &m), ROUTER_BAD_METHOD);
    CHECK_EQ_STR(m.allow, "POST, PATCH, DELETE, GET, HEAD");
    CHECK_EQ_INT(match("get", "/v1/locks/x", &m),
                 ROUTER_BAD_METHOD); /* methods are case-sensitive */
    CHECK_EQ_INT(match("", "/v1/locks/x", &m), ROUTER_BAD_METHOD);
    CHECK_EQ_INT(match("POST", "/healthz", &m), ROUTER_BAD_METHOD);
    CHECK_EQ_STR(m.allow, "GET, HEAD");
    CHECK_EQ_INT(match("DELETE", "/v1/ids/orders", &m), ROUTER_BAD_METHOD);
    CHECK_EQ_STR(m.allow, "POST, GET, HEAD");
    CHECK_EQ_INT(match("POST", "/v1/ids/orders/12", &m), ROUTER_BAD_METHOD);
    CHECK_EQ_STR(m.allow, "GET, HEAD");
    /* HEAD is served by the path's GET route (RFC 9110 9.3.2). */
    CHECK_EQ_INT(match("HEAD", "/healthz", &m), match("GET", "/healthz", &m));
    CHECK(match("HEAD", "/v1/locks/x", &m) >= 0);
    CHECK_EQ_INT(match("HEAD", "/v1/locks/x", &m), match("GET", "/v1/locks/x", &m));
    /* A 400-byte method, and one that is a prefix of a real one. */
    char longm[401];
    memset(longm, 'X', 400);
    longm[400] = '\0';
    CHECK_EQ_INT(match(longm, "/v1/locks/x", &m), ROUTER_BAD_METHOD);
    CHECK_EQ_INT(match("GE", "/healthz", &m), ROUTER_BAD_METHOD);
    CHECK_EQ_INT(match("GETX", "/healthz", &m), ROUTER_BAD_METHOD);
}

/* The Allow list names each method once and never overruns its buffer,
 * however many routes share a path. */
static void test_allow_list_bounded(void) {
    static const char *methods[] = {
        "GET",   "GET",  "POST", "PUT",  "PATCH",  "DELETE", "OPTIONS", "PROPFIND", "PROPPATCH",
        "MKCOL", "COPY", "MOVE", "LOCK", "UNLOCK", "SEARCH", "REPORT",  "CHECKOUT", "MERGE"};
    enum { N = sizeof methods / sizeof methods[0] };
    struct gw_route many[N];
    for (int i = 0; i < N; i++)
        many[i] = (struct gw_route){.method = methods[i], .path = "/r/{x}", .handler = h};
    struct route_match m;
    memset(&m, 0x5a, sizeof m);
    CHECK_EQ_INT(router_match(many, N, "BREW", "/r/1", &m), ROUTER_BAD_METHOD);
    CHECK(strlen(m.allow) < sizeof m.allow);
    CHECK(strncmp(m.allow, "GET, HEAD, POST, PUT, PATCH", 27) == 0);
    CHECK(strstr(m.allow, ", GET") == NULL); /* GET is listed once */
    /* Whatever fits is a clean list: no dangling separator. */
    size_t n = strlen(m.allow);
    CHECK(n > 0 && m.allow[n - 1] != ' ' && m.allow[n - 1] != ',');
    CHECK_EQ_INT(router_match(many, N, "MERGE", "/r/1", &m), N - 1);
}

/* A table with nothing in it, and routes whose {param} count is at the limit. */
static void test_edges(void) {
    struct route_match m;
    CHECK_EQ_INT(router_match(table, 0, "GET", "/healthz", &m), ROUTER_NOT_FOUND);
    const struct gw_route two[] = {
        {.method = "GET", .path = "/{a}/{b}", .handler = h},
        {.method = "GET", .path = "/{a}",     .handler = h}
    };
    CHECK_EQ_INT(router_match(two, 2, "GET", "/x/y", &m), 0);
    CHECK_EQ_STR(param(&m, 0), "x");
    CHECK_EQ_STR(param(&m, 1), "y");
    CHECK_EQ_INT(router_match(two, 2, "GET", "/x", &m), 1);
    CHECK_EQ_INT(router_match(two, 2, "GET", "/x/y/z", &m), ROUTER_NOT_FOUND);
    /* A very long path is just not found. */
    size_t n = 100000;
    char *longp = malloc(n + 1);
    for (size_t i = 0; i < n; i++) longp[i] = i % 2 ? 'a' : '/';
    longp[n] = '\0';
    CHECK_EQ_INT(router_match(table, NT, "GET", longp, &m), ROUTER_NOT_FOUND);
    free(longp);
}

/* The real table: every route matches itself, and the lock path's Allow
 * list is the four lock methods. */
static void test_gw_routes(void) {
    struct route_match m;
    CHECK(gw_routes_count > 0);
    for (size_t i = 0; i < gw_routes_count; i++) {
        char path[256];
        /* Fill each {param} with a sample value. */
        const char *p = gw_routes[i].path;
        size_t o = 0;
        while (*p && o < sizeof path - 16) {
            if (*p == '{') {
                const char *end = strchr(p, '}');
                o += (size_t)snprintf(path + o, sizeof path - o, "sample1");
                p = end ? end + 1 : p + strlen(p);
            } else {
                path[o++] = *p++;
            }
        }
        path[o] = '\0';
        int r = router_match(gw_routes, gw_routes_count, gw_routes[i].method, path, &m);
        if (r != (int)i) fprintf(stderr, "  %s %s matched %d\n", gw_routes[i].method, path, r);
        CHECK_EQ_INT(r, (int)i);
        CHECK(gw_routes[i].handler != NULL);
        /* No two routes with the same method and path. */
        for (size_t j = 0; j < i; j++)
            CHECK(strcmp(gw_routes[i].method, gw_routes[j].method) != 0 ||
                  strcmp(gw_routes[i].path, gw_routes[j].path) != 0);
    }
    CHECK_EQ_INT(router_match(gw_routes, gw_routes_count, "PUT", "/v1/locks/x", &m),
                 ROUTER_BAD_METHOD);
    CHECK(strstr(m.allow, "POST") && strstr(m.allow, "PATCH") && strstr(m.allow, "DELETE") &&
          strstr(m.allow, "GET"));
    CHECK_EQ_INT(router_match(gw_routes, gw_routes_count, "POST", "/v1/locks/a/b", &m),
                 ROUTER_NOT_FOUND);
    CHECK_EQ_INT(router_match(gw_routes, gw_routes_count, "DELETE", "/healthz", &m),
                 ROUTER_BAD_METHOD);
    CHECK(strstr(m.allow, "GET") != NULL);
    CHECK_EQ_INT(router_match(gw_routes, gw_routes_count, "GET", "/nope", &m), ROUTER_NOT_FOUND);
}

int main(void) {
    RUN(test_match_and_params);
    RUN(test_not_found);
    RUN(test_bad_method);
    RUN(test_allow_list_bounded);
    RUN(test_edges);
    RUN(test_gw_routes);
    return check_summary("router");
}
