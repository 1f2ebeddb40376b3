/* http.h -- the HTTP layer over libmicrohttpd.
 *
 * It accumulates the body (capped at HTTP_BODY_MAX), routes, calls the
 * handler, and sends the one reply the handler (or its Redis callback) built
 * with the reply_* functions.  A handler that starts a Redis call returns at
 * once; the connection is suspended until the reply is ready and resumed from
 * the Redis thread, so no HTTP thread ever waits on Redis. */
#ifndef LOCKGATE_HTTP_H
#define LOCKGATE_HTTP_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "server/config.h"
#include "common/names.h"
#include "server/router.h"
#include "common/token.h"

#define HTTP_BODY_MAX    (16 * 1024)
#define HTTP_MAX_HEADERS 4

struct MHD_Connection;
struct cJSON;

struct gw_header {
    char name[24]; /* e.g. "Lock-Token" */
    char *value;   /* its value, malloc'd: a waiting request
                                    should not carry room for replies */
};

struct gw_request {
    struct MHD_Connection *conn; /* the connection this request came on */
    int route;                   /* index in gw_routes, or -1 */
    struct route_match match;    /* the path's {param} segments */
    char *path;                  /* copy of the request path (params point here) */
    char *body;                  /* accumulated body, NUL-terminated */
    size_t body_len;             /* bytes in body */
    size_t body_cap;             /* bytes allocated for body */
    int body_too_large;          /* body passed HTTP_BODY_MAX */
    struct cJSON *json;          /* parsed body (body_parse_or_reply) */
    int64_t start_ns;            /* arrival, for the latency histogram */
    const char *media;           /* the route's type the client accepts best
                                    (accept.h), chosen before the handler */

    /* Filled by handlers: what they copied out of the request, so that a
     * callback on another thread never reads the connection.  name and
     * token are malloc'd to fit (a waiting request keeps them), freed with
     * the request; NULL until set. */
    char *name;                  /* decoded {name} or {namespace} */
    char *token;                 /* Lock-Token in use */
    char *key_id;                /* the API key's id (auth.h), NULL without one */
    void *ctx;                   /* handler state across a Redis call */
    int aux;                     /* a small handler value across a call */
    void (*ctx_free)(void *ctx); /* frees ctx at the end, may be NULL */
    /* Called when the reply could not be delivered (client gone), e.g. to
     * give back a lock the client will never know it got.  May be NULL.
     * It may run on any thread after the connection is gone: it reads
     * only what the request copied (name, token, ctx). */
    void (*on_undelivered)(struct gw_request *req);

    /* The reply, built by reply_* (reply.h). */
    int status;                                 /* HTTP status, 0 until replied */
    const char *content_type;                   /* static string */
    char *resp;                                 /* malloc'd body, owned by the request */
    size_t resp_len;                            /* bytes in resp */
    struct gw_header headers[HTTP_MAX_HEADERS]; /* extra response headers */
    int nheaders;                               /* used entries of headers */
    int sent;                                   /* the reply was handed to libmicrohttpd */

    /* Hand-over between the HTTP thread and the Redis thread. */
    pthread_mutex_t mu; /* guards done and suspended */
    int dispatched;     /* the handler was called */
    int done;           /* a reply is ready */
    int suspended;      /* the connection is suspended, waiting */
    int deferred;       /* the handler's first return found no reply */
    int orphaned;       /* libmicrohttpd closed the connection before the
                           reply was ready: http_reply_ready frees it */
};

/* Starts serving on cfg's address; returns 0 or -1 (logged). */
int http_start(const struct gw_config *cfg);

/* Stops accepting connections; requests in flight go on. */
void http_quiesce(void);

/* Waits up to timeout_ms for the requests being handled to finish.  A
 * request whose body never arrived is not waited for. */
void http_drain(int timeout_ms);

/* Stops serving.  No request may be suspended any more (see main.c). */
void http_stop(void);

/* 1 after http_quiesce: new waits are refused with 503 shutting_down. */
int http_shutting_down(void);

/* Number of requests between dispatch to a handler and their end. */
long http_in_flight(void);

/* A request header, or NULL.  Only from the handler, on the HTTP thread. */
const char *http_header(struct gw_request *req, const char *name);

/* A query-string argument, or NULL.  Only from the handler. */
const char *http_query(struct gw_request *req, const char *name);

/* The client's socket, to watch for hang-up while waiting; -1 if unknown. */
int http_client_fd(struct gw_request *req);

/* 1 when the client has hung up (checked without blocking), e.g. before a
 * lock is handed to a request that waited. */
int http_client_gone(struct gw_request *req);

/* Called by reply.c when req's reply is complete: sends it now if the
 * handler is still running, or resumes the suspended connection. */
void http_reply_ready(struct gw_request *req);

#endif
