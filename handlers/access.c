/* access.c -- see access.h. */
#include "handlers/access.h"
#include "common/alloc.h"
#include "common/names.h"
#include "server/router.h"
#include "server/body.h"
#include "server/http.h"
#include "server/log.h"
#include "server/reply.h"
#include "server/tls.h"

#include <stdio.h>
#include <string.h>

/* One row a route (method and path as in routes.c); a route added there
 * needs its row here, or it is refused while auth is on
 * (tests/unit/test_access.c checks every route has one).  For locks and
 * semaphores read is GET and write the rest; for ids write is minting
 * and read decoding; ops covers /metrics and /readyz by their names. */
// clang-format off
static const struct access_rule rules[] = {
    {"POST",   "/v1/locks/{name}",         AUTH_LOCKS,      AUTH_WRITE},
    {"PATCH",  "/v1/locks/{name}",         AUTH_LOCKS,      AUTH_WRITE},
    {"DELETE", "/v1/locks/{name}",         AUTH_LOCKS,      AUTH_WRITE},
    {"GET",    "/v1/locks/{name}",         AUTH_LOCKS,      AUTH_READ},
    {"POST",   "/v1/semaphores/{name}",    AUTH_SEMAPHORES, AUTH_WRITE},
    {"PATCH",  "/v1/semaphores/{name}",    AUTH_SEMAPHORES, AUTH_WRITE},
    {"DELETE", "/v1/semaphores/{name}",    AUTH_SEMAPHORES, AUTH_WRITE},
    {"GET",    "/v1/semaphores/{name}",    AUTH_SEMAPHORES, AUTH_READ},
    {"POST",   "/v1/elections/{name}",     AUTH_ELECTIONS,  AUTH_WRITE},
    {"PATCH",  "/v1/elections/{name}",     AUTH_ELECTIONS,  AUTH_WRITE},
    {"DELETE", "/v1/elections/{name}",     AUTH_ELECTIONS,  AUTH_WRITE},
    {"GET",    "/v1/elections/{name}",     AUTH_ELECTIONS,  AUTH_READ},
    {"POST",   "/v1/ids/{namespace}",      AUTH_IDS,        AUTH_WRITE},
    {"GET",    "/v1/ids/{namespace}",      AUTH_IDS,        AUTH_WRITE},
    {"GET",    "/v1/ids/{namespace}/{id}", AUTH_IDS,        AUTH_READ},
    {"GET",    "/healthz",                 ACCESS_OPEN,     0},
    {"GET",    "/readyz",                  AUTH_OPS,        AUTH_READ},
    {"GET",    "/metrics",                 AUTH_OPS,        AUTH_READ},
    {"GET",    "/openapi.yaml",            ACCESS_OPEN,     0},
    {"GET",    "/ui",                      ACCESS_OPEN,     0},
    {"GET",    "/ui/",                     ACCESS_OPEN,     0},
    {"GET",    "/ui/{file}",               ACCESS_OPEN,     0},
    {"GET",    "/v1/locks",                ACCESS_KEY,      0},
    {"GET",    "/v1/semaphores",           ACCESS_KEY,      0},
    {"GET",    "/v1/ids",                  ACCESS_KEY,      0},
    {"POST",   "/v1/locks",                ACCESS_KEY,      0},
    {"PATCH",  "/v1/locks",                ACCESS_KEY,      0},
    {"DELETE", "/v1/locks",                ACCESS_KEY,      0},
    {"POST",   "/v1/sessions",             ACCESS_KEY,      0},
    {"PATCH",  "/v1/sessions/{token}",     ACCESS_KEY,      0},
    {"DELETE", "/v1/sessions/{token}",     ACCESS_KEY,      0},
    {"GET",    "/v1/sessions/{token}",     ACCESS_KEY,      0},
};
// clang-format on

const struct access_rule *access_rule_for(int route) {
    if (route < 0 || (size_t)route >= router_routes_count) return NULL;
    for (size_t i = 0; i < sizeof rules / sizeof rules[0]; i++)
        if (strcmp(rules[i].method, router_routes[route].method) == 0 &&
            strcmp(rules[i].path, router_routes[route].path) == 0)
            return &rules[i];
    return NULL;
}

/* The name a grant's prefix is matched against: the decoded {name} or
 * {namespace}, or for ops the path without its '/' ("metrics").  A name
 * that does not decode matches only the "" prefix; the handler answers
 * 400 invalid_name for it once the key may use the route at all. */
static void request_name(const struct gw_request *req, const struct access_rule *rule,
                         char out[NAME_MAX_LEN + 1]) {
    out[0] = '\0';
    if (rule->kind == AUTH_OPS) {
        snprintf(out, NAME_MAX_LEN + 1, "%s", router_routes[req->route].path + 1);
    } else if (req->match.param[0]) {
        if (name_decode(req->match.param[0], req->match.param_len[0], out) < 0) out[0] = '\0';
    }
}

static int refuse(struct gw_request *req, enum auth_verdict v, const char *key_id,
                  const struct access_rule *rule, const char *name) {
    auth_count_denial(v);
    if (v == AUTH_FORBIDDEN) {
        log_info("auth: key '%s' refused %s on %s '%s' (%s %s)", key_id,
                 auth_access_name(rule->access), auth_kind_name(rule->kind), name,
                 router_routes[req->route].method, router_routes[req->route].path);
        reply_problem(req, CODE_FORBIDDEN, "key '%s' has no %s grant for %s '%s'", key_id,
                      auth_access_name(rule->access), auth_kind_name(rule->kind), name);
        return GW_REPLIED;
    }
    /* Never the header's value: it carries the secret.  A known key's id
     * is named (a wrong secret for it), an unknown one is not echoed.  The
     * route's template, never the path: a session's path is its token. */
    log_info("auth: unauthenticated request refused: %s%s%s%s (%s %s)", auth_verdict_name(v),
             key_id && key_id[0] ? " for key '" : "", key_id ? key_id : "",
             key_id && key_id[0] ? "'" : "", router_routes[req->route].method,
             router_routes[req->route].path);
    reply_header(req, "WWW-Authenticate", "Bearer realm=\"lockgate\"");
    if (v == AUTH_CLIENT_CERT) {
        reply_header(req, "Connection", "close");
        reply_problem(req, CODE_UNAUTHENTICATED,
                      "this gateway needs a client certificate signed by its client CA");
    } else {
        reply_problem(req, CODE_UNAUTHENTICATED,
                      "this request needs 'Authorization: Bearer <key id>.<secret>' with a "
                      "valid key");
    }
    return GW_REPLIED;
}

/* The key's requests_per_second (auth.h): 429 rate_limited with
 * Retry-After (whole seconds, at least 1) once it is used up. */
static int rate_or_reply(struct gw_request *req) {
    int64_t wait_ms = auth_rate_take(req->key_id);
    if (wait_ms == 0) return GW_OK;
    char after[24];
    snprintf(after, sizeof after, "%lld", (long long)((wait_ms + 999) / 1000));
    reply_header(req, "Retry-After", after);
    reply_problem(req, CODE_RATE_LIMITED,
                  "key '%s' has used its requests_per_second; the next is let in after %lld ms",
                  req->key_id, (long long)wait_ms);
    return GW_REPLIED;
}

int access_or_reply(struct gw_request *req) {
    const struct access_rule *rule = access_rule_for(req->route);
    if (!tls_client_verified(req->conn)) return refuse(req, AUTH_CLIENT_CERT, NULL, rule, "");
    if (!auth_enabled() || (rule && rule->kind == ACCESS_OPEN)) return GW_OK;
    char name[NAME_MAX_LEN + 1] = "", key_id[AUTH_ID_MAX + 1] = "";
    static const struct access_rule closed = {"", "", AUTH_ADMIN, AUTH_WRITE};
    static const struct access_rule force = {"DELETE", "", AUTH_ADMIN, AUTH_WRITE};
    if (!rule) rule = &closed; /* a route without a rule: only admin write */
    request_name(req, rule, name);
    /* Ending other holders' holds (DELETE ...?force=true) is admin's. */
    const char *q = http_query(req, "force");
    if (strcmp(rule->method, "DELETE") == 0 && q && strcmp(q, "true") == 0) rule = &force;
    if (rule->kind == ACCESS_KEY) name[0] = '\0';
    enum auth_verdict v = auth_check(http_header(req, "Authorization"),
                                     rule->kind == ACCESS_KEY ? AUTH_LOCKS : rule->kind, name,
                                     rule->kind == ACCESS_KEY ? 0 : rule->access, key_id);
    if (v != AUTH_OK) return refuse(req, v, key_id, rule, name);
    req->key_id = alloc_copy(key_id, strlen(key_id));
    return rate_or_reply(req);
}

int access_may(const struct gw_request *req, enum auth_kind kind, const char *name,
               enum auth_access want) {
    return auth_key_may(req->key_id, kind, name, want);
}

int access_name_or_reply(struct gw_request *req, enum auth_kind kind, const char *name,
                         enum auth_access want) {
    if (auth_key_may(req->key_id, kind, name, want)) return GW_OK;
    const struct access_rule rule = {router_routes[req->route].method,
                                     router_routes[req->route].path, kind, want};
    return refuse(req, AUTH_FORBIDDEN, req->key_id ? req->key_id : "", &rule, name);
}

const char *access_session_who(const struct gw_request *req) {
    if (!auth_enabled() || !req->key_id || auth_key_may(req->key_id, AUTH_ADMIN, "", AUTH_WRITE))
        return "";
    return req->key_id;
}

void access_refuse_session(struct gw_request *req) {
    auth_count_denial(AUTH_FORBIDDEN);
    log_info("auth: key '%s' refused a session another key created (%s %s)",
             req->key_id ? req->key_id : "", router_routes[req->route].method,
             router_routes[req->route].path);
    reply_problem(req, CODE_FORBIDDEN,
                  "this session was created by another key; only that key, or a key with admin "
                  "write on every name, may use it");
}
