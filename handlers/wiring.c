/* wiring.c -- see wiring.h.
 *
 * The modules register themselves through tables filled here, once: the
 * router gets the route table (routes.c), the HTTP layer the access gate
 * (access.c), the handlers their backend (backend.h), /metrics each
 * module's sources.  So common.c, backend.c and the modules never name
 * each other to be wired, and no file calls back into one that calls it. */
#include "handlers/wiring.h"
#include "handlers/access.h"
#include "handlers/backend.h"
#include "handlers/force.h"
#include "handlers/guard.h"
#include "server/body.h"
#include "handlers/handlers.h"
#include "handlers/routes.h"
#include "handlers/watch.h"
#include "server/http.h"
#include "server/router.h"

#include <stddef.h>

/* Each module's start-up registration (its /metrics sources). */
static void (*const module_inits[])(void) = {watch_init, force_init};

/* The mode the settings name (config.c refuses the combinations that make
 * no sense): Redis Cluster, a quorum of masters, or one master. */
static const struct backend *backend_for(const struct gw_config *cfg) {
    if (cfg->ncluster) return &backend_cluster;
    if (cfg->nnodes > 1) return &backend_quorum;
    return &backend_single;
}

/* Before every handler: who may call it, then whether Redis holds a key
 * layout this gateway understands (guard.h). */
static int gate(struct gw_request *req) {
    if (access_or_reply(req) != GW_OK) return GW_REPLIED;
    return guard_layout_or_reply(req);
}

void handlers_init(const struct gw_config *cfg) {
    handlers_set_config(cfg);
    router_install(gw_routes, gw_routes_count);
    http_set_gate(gate);
    backend = backend_for(cfg);
    for (size_t i = 0; i < sizeof module_inits / sizeof module_inits[0]; i++) module_inits[i]();
}
