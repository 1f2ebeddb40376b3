/* router.c -- see router.h. */
#include "server/router.h"

#include <string.h>

/* Matches one pattern against path, segment by segment, recording the
 * {param} segments.  Returns 1 on a match. */
static int path_matches(const char *pattern, const char *path, struct route_match *m) {
    int nparam = 0;
    const char *p = pattern, *s = path;
    while (*p && *s) {
        if (*p != '/' || *s != '/') return 0;
        p++, s++;
        const char *pend = strchr(p, '/');
        const char *send = strchr(s, '/');
        size_t plen = pend ? (size_t)(pend - p) : strlen(p);
        size_t slen = send ? (size_t)(send - s) : strlen(s);
        if (plen > 0 && p[0] == '{') {
            if (nparam == ROUTER_MAX_PARAMS) return 0;
            m->param[nparam] = s;
            m->param_len[nparam++] = slen;
        } else if (plen != slen || memcmp(p, s, plen) != 0) {
            return 0;
        }
        p += plen, s += slen;
    }
    return *p == '\0' && *s == '\0';
}

const struct gw_route *router_routes;
size_t router_routes_count;

void router_install(const struct gw_route *routes, size_t n) {
    router_routes = routes;
    router_routes_count = n;
}

int router_match(const struct gw_route *routes, size_t n, const char *method, const char *path,
                 struct route_match *m) {
    int path_seen = 0;
    m->allow[0] = '\0';
    if (strcmp(method, "HEAD") == 0) method = "GET";
    for (size_t i = 0; i < n; i++) {
        struct route_match tmp = {.param = {NULL}}; /* a route without {param}s leaves none */
        if (!path_matches(routes[i].path, path, &tmp)) continue;
        if (strcmp(routes[i].method, method) == 0) {
            memcpy(m->param, tmp.param, sizeof m->param);
            memcpy(m->param_len, tmp.param_len, sizeof m->param_len);
            return (int)i;
        }
        size_t used = strlen(m->allow);
        if (!strstr(m->allow, routes[i].method) &&
            used + strlen(routes[i].method) + 9 < sizeof m->allow) {
            if (path_seen) strcat(m->allow, ", ");
            strcat(m->allow, routes[i].method);
            if (strcmp(routes[i].method, "GET") == 0) strcat(m->allow, ", HEAD");
        }
        path_seen = 1;
    }
    return path_seen ? ROUTER_BAD_METHOD : ROUTER_NOT_FOUND;
}
