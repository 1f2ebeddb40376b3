/* fuzz_route.c -- request routing with name and token validation: input
 * "METHOD PATH\nTOKEN".  The router must answer a route index, 404 or 405
 * for any bytes; a matched {param} must decode to a valid name or be
 * refused; token_valid must agree with its own rule. */
#include "common/names.h"
#include "common/token.h"
#include "handlers/routes.h"
#include "server/router.h"
#include "tests/fuzz/fuzz.h"

#include <assert.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *s = fuzz_cstr(data, size);
    char *token = strchr(s, '\n');
    if (token) *token++ = '\0';
    char *path = strchr(s, ' ');
    if (path) *path++ = '\0';
    struct route_match m;
    int r = router_match(gw_routes, gw_routes_count, s, path ? path : "/", &m);
    assert(r == ROUTER_NOT_FOUND || r == ROUTER_BAD_METHOD ||
           (r >= 0 && (size_t)r < gw_routes_count));
    if (r == ROUTER_BAD_METHOD) assert(m.allow[0] != '\0');
    /* The router fills the {param}s its route has, no more. */
    int nparams = 0;
    for (const char *p = r >= 0 ? gw_routes[r].path : ""; (p = strchr(p, '{')); p++) nparams++;
    for (int i = 0; i < nparams; i++) {
        char name[NAME_MAX_LEN + 1];
        int n = name_decode(m.param[i], m.param_len[i], name);
        if (n >= 0) assert((size_t)n == strlen(name) && name_valid(name, (size_t)n));
    }
    if (token) {
        size_t len = strlen(token);
        int ok = token_valid(token);
        assert(!ok || (len >= TOKEN_MIN_LEN && len <= TOKEN_MAX_LEN));
    }
    free(s);
    return 0;
}
