/* ops.c -- /healthz, /readyz, /metrics, /openapi.yaml. */
#include "handlers/backend.h"
#include "handlers/handlers.h"
#include "server/layout.h"
#include "server/lossguard.h"
#include "server/memguard.h"
#include "common/alloc.h"
#include "server/http.h"
#include "server/metrics.h"
#include "server/redis.h"
#include "server/redis_tls.h"
#include "server/reply.h"

#include <hiredis/hiredis.h>
#include <stdlib.h>
#include <string.h>

#include "openapi_yaml.h"

/* Alive while the process serves; says nothing of Redis on purpose, so an
 * orchestrator does not restart gateways for a Redis outage. */
void ops_healthz(struct gw_request *req) {
    static const char ok[] = "{\"status\":\"ok\"}";
    reply_raw(req, 200, "application/json", alloc_copy(ok, sizeof ok - 1), sizeof ok - 1);
}

static void readyz_done(void *arg, const struct redis_result *res) {
    struct gw_request *req = arg;
    char why[300];
    if (!res->ok) {
        char tls[800]; /* a TLS refusal says what to change (redis_tls.h) */
        int refused = redis_tls_refusal(tls, sizeof tls);
        if (refused && strstr(tls, res->error))
            reply_problem(req, CODE_BACKEND_UNAVAILABLE, "Redis: TLS to %s", tls);
        else if (refused)
            reply_problem(req, CODE_BACKEND_UNAVAILABLE, "Redis: %s; TLS to %s", res->error, tls);
        else
            reply_problem(req, CODE_BACKEND_UNAVAILABLE, "Redis: %s", res->error);
        return;
    }
    if (!layout_known()) {
        reply_problem(req, CODE_BACKEND_UNAVAILABLE,
                      "Redis: the key layout version is not read yet");
        return;
    }
    if (lossguard_describe(why, sizeof why)) {
        reply_problem(req, CODE_REDIS_DATA_LOST, "%s", why);
        return;
    }
    if (memguard_refusing() && memguard_describe(why, sizeof why)) {
        reply_problem(req, CODE_REDIS_MAY_EVICT, "%s: it may evict held locks", why);
        return;
    }
    if (!redis_all_instances_up()) { /* a request on another worker would still 503 */
        reply_problem(req, CODE_BACKEND_UNAVAILABLE,
                      "Redis: not every worker's connection is up yet");
        return;
    }
    static const char ready[] = "{\"status\":\"ready\"}";
    reply_raw(req, 200, "application/json", alloc_copy(ready, sizeof ready - 1), sizeof ready - 1);
}

/* Ready when the backend says every part of the keyspace has a master that
 * answers, through the whole Redis layer (backend.h, ready). */
void ops_readyz(struct gw_request *req) {
    char why[256];
    if (http_leaving()) {
        reply_problem(req, CODE_SHUTTING_DOWN, "the gateway is stopping");
        return;
    }
    if (layout_refusing(why, sizeof why)) { /* whatever else Redis says */
        reply_problem(req, CODE_LAYOUT_UNSUPPORTED, "%s", why);
        return;
    }
    backend->ready(readyz_done, req);
}

void ops_metrics(struct gw_request *req) {
    size_t len;
    char *text = metrics_render(&len);
    reply_raw(req, 200, "text/plain; version=0.0.4; charset=utf-8", text, len);
}

void ops_openapi(struct gw_request *req) {
    reply_raw(req, 200, "application/yaml", alloc_copy(openapi_yaml, openapi_yaml_len),
              openapi_yaml_len);
}
