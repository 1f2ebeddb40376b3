/* request.h -- one HTTP request as the handlers, reply.c and body.c see
 * it.  The HTTP layer (http.h) makes it and sends its reply; the layers that
 * build replies need nothing else from it, so they do not include http.h. */
#ifndef LOCKGATE_REQUEST_H
#define LOCKGATE_REQUEST_H

#include <stddef.h>
#include <stdint.h>

#include "server/router.h"

#define HTTP_BODY_MAX    (16 * 1024)
#define HTTP_MAX_HEADERS 4
#define HTTP_MAX_WORKERS 64

struct MHD_Connection;
struct gw_stream;
struct cJSON;

struct gw_header {
    const char *name; /* e.g. "Lock-Token": a static string (reply_header) */
    char *value;      /* its value, malloc'd: a waiting request
                                    should not carry room for replies */
};

/* A request lives as long as its answer, which for an event stream (a
 * stream hold) is as long as its connection: 10,000 stream holds keep
 * 10,000 of these (bench/RESULTS.md, "Stream holds: memory").  So its
 * flags are chars, grouped at the end, and it carries no buffers, not even
 * room for reply headers before it has one. */
struct gw_request {
    struct MHD_Connection *conn; /* the connection this request came on */
    int route;                   /* index in gw_routes, or -1 */
    int aux;                     /* a small handler value across a call (with ctx) */
    uint32_t body_len;           /* bytes in body (at most HTTP_BODY_MAX) */
    uint32_t body_cap;           /* bytes allocated for body */
    struct route_params match;   /* the path's {param} segments */
    char *path;                  /* copy of the request path (params point here) */
    char *body;                  /* accumulated body, NUL-terminated */
    struct cJSON *json;          /* parsed body (body_parse_or_reply) */
    int64_t start_ns;            /* arrival, for the latency histogram */
    const char *media;           /* the route's type the client accepts best
                                    (accept.h), chosen before the handler */

    /* Filled by handlers: what they copied out of the request, so that a
     * callback never needs the connection (it may be gone).  name and
     * token are malloc'd to fit (a waiting request keeps them), freed with
     * the request; NULL until set. */
    char *name;                  /* decoded {name} or {namespace} */
    char *token;                 /* Lock-Token in use */
    char *key_id;                /* the API key's id (auth.h), NULL without one */
    void *ctx;                   /* handler state across a Redis call */
    void (*ctx_free)(void *ctx); /* frees ctx at the end, may be NULL */
    /* Called when the reply could not be delivered (client gone), e.g. to
     * give back a lock the client will never know it got.  May be NULL.
     * It may run after the connection is gone: it reads only what the
     * request copied (name, token, ctx). */
    void (*on_undelivered)(struct gw_request *req);

    /* The reply, built by reply_* (reply.h). */
    int status;                /* HTTP status, 0 until replied */
    int nheaders;              /* used entries of headers */
    const char *content_type;  /* static string */
    char *resp;                /* malloc'd body, owned by the request */
    size_t resp_len;           /* bytes in resp */
    struct gw_header *headers; /* extra response headers: room for
                                                   HTTP_MAX_HEADERS made by the first
                                                   (reply_header), NULL before */
    struct gw_stream *stream;  /* an answer that goes on (http.h,
                                                   http_stream_open), NULL else */
    /* Set by the HTTP layer; reply.c calls it when the reply is complete
     * (it sends the reply now if the handler is still running, or resumes
     * the suspended connection).  NULL: nobody to tell (unit tests). */
    void (*on_ready)(struct gw_request *req);

    char body_too_large;    /* body passed HTTP_BODY_MAX */
    char sent;              /* the reply was handed to libmicrohttpd */
    char shut_before_reply; /* the client had sent its FIN (or reset)
                               when the reply was handed over */
    char query_decoded;     /* http_query decoded the arguments' values */
    char throttled;         /* suspended before its handler until
                               the client reads (http.c): 1, or 2
                               when it is to be closed instead */
    char drain;             /* answered with its body unread: the
                               connection is drained at the end (drain.h) */
    char cors;              /* from a --cors-origin page: 1, its
                               preflight: 2 (CORS headers go out) */

    /* Where the request is between the handler and the reply. */
    char dispatched; /* the handler was called */
    char done;       /* a reply is ready */
    char suspended;  /* the connection is suspended, waiting */
    char deferred;   /* the handler's first return found no reply */
    char orphaned;   /* libmicrohttpd closed the connection before the
                        reply was ready: http_reply_ready frees it */
};

#endif
