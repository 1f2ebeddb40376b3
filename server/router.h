/* router.h -- matches a method and path against the route table.
 *
 * A route's path is literal segments and "{param}" segments; a "{...}"
 * segment matches any one segment (possibly empty), which the handler
 * validates.  The router knows nothing of HTTP libraries or Redis. */
#ifndef LOCKGATE_ROUTER_H
#define LOCKGATE_ROUTER_H

#include <stddef.h>

struct gw_request;
typedef void (*gw_handler)(struct gw_request *req);

struct gw_route {
    const char *method; /* "GET", "POST", ... */
    const char *path;   /* e.g. "/v1/locks/{name}" */
    gw_handler handler; /* called with the whole body accumulated */
    /* The media types it answers in, preferred first, NULL-terminated
     * (accept.h); NULL: application/json only. */
    const char *const *produces;
};

#define ROUTER_MAX_PARAMS 2
#define ROUTER_NOT_FOUND  (-1)
#define ROUTER_BAD_METHOD (-2)

struct route_match {
    const char *param[ROUTER_MAX_PARAMS]; /* start of each {param} in path */
    size_t param_len[ROUTER_MAX_PARAMS];  /* its length, still percent-encoded */
    char allow[64];                       /* with ROUTER_BAD_METHOD: "GET, POST" */
};

/* What a request keeps of its route_match: the parameters, not the allow
 * list a 405 is answered from at once (a request lives as long as its
 * answer, a stream hold's as long as its connection: request.h). */
struct route_params {
    const char *param[ROUTER_MAX_PARAMS]; /* as route_match's */
    size_t param_len[ROUTER_MAX_PARAMS];  /* as route_match's */
};

/* Returns the index of the matching route, ROUTER_NOT_FOUND when no route
 * has this path, or ROUTER_BAD_METHOD (m->allow lists the methods the path
 * has).  path is the request path without the query string.  HEAD matches
 * the GET route of the path (RFC 9110 9.3.2), and "HEAD" follows "GET" in
 * m->allow. */
int router_match(const struct gw_route *routes, size_t n, const char *method, const char *path,
                 struct route_match *m);

/* The API the server serves, installed once at start by the layer that
 * owns it (handlers_init, handlers/wiring.c), so the HTTP layer and /metrics read the table
 * without naming the handlers. */
extern const struct gw_route *router_routes;
extern size_t router_routes_count;
void router_install(const struct gw_route *routes, size_t n);

#endif
