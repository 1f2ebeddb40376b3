/* routes.c -- the whole API on one screen.  openapi.yaml documents each of
 * these paths; tests/unit/test_routes_spec.c checks that it does. */
#include "handlers/routes.h"
#include "handlers/handlers.h"
#include "handlers/listing.h"
#include "handlers/prefix_stream.h"
#include "handlers/ui.h"

/* The media types a route answers in (accept.h), preferred first. */
static const char *const JSON[] = {"application/json", NULL};
/* An acquire answers as an event stream when asked (handlers/streams.h). */
static const char *const JSON_SSE[] = {"application/json", "text/event-stream", NULL};
static const char *const JSON_TEXT[] = {"application/json", "text/plain", NULL};
static const char *const TEXT[] = {"text/plain", NULL};
static const char *const YAML[] = {"application/yaml", NULL};
static const char *const ANY[] = {"text/html", "text/css", "text/javascript", NULL};

/* One row a route; clang-format would break the rows over 100 columns. */
// clang-format off
const struct gw_route gw_routes[] = {
    {.method = "POST",   .path = "/v1/locks/{name}",         .handler = locks_acquire,      .produces = JSON_SSE},
    {.method = "PATCH",  .path = "/v1/locks/{name}",         .handler = locks_extend,       .produces = JSON},
    {.method = "DELETE", .path = "/v1/locks/{name}",         .handler = locks_release,      .produces = JSON},
    {.method = "GET",    .path = "/v1/locks/{name}",         .handler = locks_inspect,      .produces = JSON_SSE},

    {.method = "POST",   .path = "/v1/locks",                .handler = multi_acquire,      .produces = JSON},
    {.method = "PATCH",  .path = "/v1/locks",                .handler = multi_extend,       .produces = JSON},
    {.method = "DELETE", .path = "/v1/locks",                .handler = multi_release,      .produces = JSON},

    {.method = "POST",   .path = "/v1/sessions",             .handler = sessions_create,    .produces = JSON},
    {.method = "PATCH",  .path = "/v1/sessions/{token}",     .handler = sessions_renew,     .produces = JSON},
    {.method = "DELETE", .path = "/v1/sessions/{token}",     .handler = sessions_end,       .produces = JSON},
    {.method = "GET",    .path = "/v1/sessions/{token}",     .handler = sessions_inspect,   .produces = JSON},

    {.method = "POST",   .path = "/v1/elections/{name}",     .handler = elections_campaign, .produces = JSON_SSE},
    {.method = "PATCH",  .path = "/v1/elections/{name}",     .handler = elections_proclaim, .produces = JSON},
    {.method = "DELETE", .path = "/v1/elections/{name}",     .handler = elections_resign,   .produces = JSON},
    {.method = "GET",    .path = "/v1/elections/{name}",     .handler = elections_leader,   .produces = JSON_SSE},
    {.method = "POST",   .path = "/v1/semaphores/{name}",    .handler = semaphores_acquire, .produces = JSON_SSE},
    {.method = "PATCH",  .path = "/v1/semaphores/{name}",    .handler = semaphores_extend,  .produces = JSON},
    {.method = "DELETE", .path = "/v1/semaphores/{name}",    .handler = semaphores_release, .produces = JSON},
    {.method = "GET",    .path = "/v1/semaphores/{name}",    .handler = semaphores_inspect, .produces = JSON_SSE},

    {.method = "POST",   .path = "/v1/ids/{namespace}",      .handler = ids_next,           .produces = JSON_TEXT},
    {.method = "GET",    .path = "/v1/ids/{namespace}",      .handler = ids_next,           .produces = JSON_TEXT},
    {.method = "GET",    .path = "/v1/ids/{namespace}/{id}", .handler = ids_decode,         .produces = JSON},

    /* Operators (#21): listings, then the status page's files (ui.c). */
    {.method = "GET",    .path = "/v1/locks",                .handler = prefix_stream_or_list_locks, .produces = JSON_SSE},
    {.method = "GET",    .path = "/v1/semaphores",           .handler = prefix_stream_or_list_semaphores, .produces = JSON_SSE},
    {.method = "GET",    .path = "/v1/ids",                  .handler = listing_ids,        .produces = JSON},
    {.method = "GET",    .path = "/ui",                      .handler = ui_redirect,        .produces = ANY},
    {.method = "GET",    .path = "/ui/",                     .handler = ui_file,            .produces = ANY},
    {.method = "GET",    .path = "/ui/{file}",               .handler = ui_file,            .produces = ANY},

    {.method = "GET",    .path = "/healthz",                 .handler = ops_healthz,        .produces = JSON},
    {.method = "GET",    .path = "/readyz",                  .handler = ops_readyz,         .produces = JSON},
    {.method = "GET",    .path = "/metrics",                 .handler = ops_metrics,        .produces = TEXT},
    {.method = "GET",    .path = "/openapi.yaml",            .handler = ops_openapi,        .produces = YAML},
};
// clang-format on

const size_t gw_routes_count = sizeof gw_routes / sizeof gw_routes[0];
