/* routes.c -- the whole API on one screen.  openapi.yaml documents each of
 * these paths; tests/unit/test_routes_spec.c checks that it does. */
#include "handlers/routes.h"
#include "handlers/handlers.h"

const struct gw_route gw_routes[] = {
    {.method = "POST",   .path = "/v1/locks/{name}",         .handler = locks_acquire     },
    {.method = "PATCH",  .path = "/v1/locks/{name}",         .handler = locks_extend      },
    {.method = "DELETE", .path = "/v1/locks/{name}",         .handler = locks_release     },
    {.method = "GET",    .path = "/v1/locks/{name}",         .handler = locks_inspect     },

    {.method = "POST",   .path = "/v1/semaphores/{name}",    .handler = semaphores_acquire},
    {.method = "PATCH",  .path = "/v1/semaphores/{name}",    .handler = semaphores_extend },
    {.method = "DELETE", .path = "/v1/semaphores/{name}",    .handler = semaphores_release},
    {.method = "GET",    .path = "/v1/semaphores/{name}",    .handler = semaphores_inspect},

    {.method = "POST",   .path = "/v1/ids/{namespace}",      .handler = ids_next          },
    {.method = "GET",    .path = "/v1/ids/{namespace}",      .handler = ids_next          },
    {.method = "GET",    .path = "/v1/ids/{namespace}/{id}", .handler = ids_decode        },

    {.method = "GET",    .path = "/healthz",                 .handler = ops_healthz       },
    {.method = "GET",    .path = "/readyz",                  .handler = ops_readyz        },
    {.method = "GET",    .path = "/metrics",                 .handler = ops_metrics       },
    {.method = "GET",    .path = "/openapi.yaml",            .handler = ops_openapi       },
};

const size_t gw_routes_count = sizeof gw_routes / sizeof gw_routes[0];
