/* http.c -- libmicrohttpd glue: accumulate, route, dispatch, suspend,
 * resume, send.  See http.h for the contract.
 *
 * Each worker runs its own daemon in external-epoll mode: the daemon's
 * epoll descriptor is one source of the worker's loop, and MHD_run is
 * called when it is ready, when libmicrohttpd's own timeout is due, and at
 * the end of a turn that resumed a connection.  A request is read, handled,
 * sent to Redis, resumed and answered on that one thread, so the request
 * needs no lock.  If the reply is already there when the handler returns,
 * the response is queued at once; if not, the connection is suspended and
 * the reply resumes it -- except in the one turn described at on_request's
 * end, which is why on_completed leaves a request whose reply is still owed
 * to http_reply_ready (orphaned).
 *
 * An answer that grants a hold and cannot be delivered is given back
 * (req->on_undelivered): when libmicrohttpd ends the request with an error,
 * and when the client had sent its FIN before the answer was handed to
 * libmicrohttpd and its TCP then resets the connection (delivery.h). */
#include "server/http.h"
#include "server/accept.h"
#include "server/answer_room.h"
#include "server/mhd_errors.h"
#include "server/body.h"
#include "server/conns.h"
#include "server/delivery.h"
#include "server/drain.h"
#include "server/log.h"
#include "server/loop.h"
#include "common/alloc.h"
#include "common/fatal.h"
#include "server/metrics.h"
#include "server/origin.h"
#include "server/peers.h"
#include "server/reply.h"
#include "server/tls.h"

#include <arpa/inet.h>
#include <errno.h>
#include <cjson/cJSON.h>
#include <microhttpd.h>
#include <netdb.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <linux/sockios.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

/* One worker's daemon and its state. */
struct http_worker {
    struct MHD_Daemon *daemon; /* external-epoll mode, on this worker's loop */
    struct loop *loop;         /* the worker's loop */
    int mhd_fd;                /* the daemon's epoll descriptor */
    int resumed;               /* a connection was resumed in this turn */
    int64_t run_at_ms;         /* libmicrohttpd wants MHD_run by then */
    atomic_long in_flight;     /* requests dispatched and not ended */
    struct conn_set conns;     /* its connections under a deadline (conns.h) */
    int64_t sweep_at_ms;       /* the earliest of those deadlines */
    long nconns;               /* connections open */
    long conn_limit;           /* at most (connection_limit) */
};


/* A connection silent this long is closed (libmicrohttpd), and the next
 * request on a kept-alive one must be in by then (conns.h); a connection
 * held back because its client does not read (HTTP_OUTPUT_MAX) is closed
 * after as long. */
#define HTTP_IDLE_TIMEOUT_S 60

/* Answers a client has not taken yet, in the socket's send queue, past
 * which its next pipelined request waits (suspended, not read further)
 * until it reads: libmicrohttpd answers one request at a time, but writes
 * each answer into the kernel's buffer and goes on to the next, so a
 * client that pipelines and never reads had megabytes queued for it. */
#define HTTP_OUTPUT_MAX (256 * 1024)

/* Who may call what (http_set_gate): asked after routing, before the
 * handler. */
static int (*gate)(struct gw_request *req);

void http_set_gate(int (*fn)(struct gw_request *req)) { gate = fn; }
static _Thread_local struct http_worker *self;
static struct http_worker *workers[HTTP_MAX_WORKERS];
static atomic_int nworkers;
static atomic_int shutting_down;
static atomic_int leaving; /* http_leave: /readyz fails, connections close after an answer */

static int64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

int http_shutting_down(void) { return atomic_load(&shutting_down); }

void http_leave(void) { atomic_store(&leaving, 1); }

int http_leaving(void) { return atomic_load(&leaving) || atomic_load(&shutting_down); }

long http_in_flight(void) {
    long n = 0;
    for (int i = 0; i < atomic_load(&nworkers); i++)
        n += atomic_load_explicit(&workers[i]->in_flight, memory_order_relaxed);
    return n;
}

static void in_flight_add(long d) {
    atomic_fetch_add_explicit(&self->in_flight, d, memory_order_relaxed);
}

/* The in-flight gauge for /metrics: read by the metrics layer through
 * its source hook, so that it needs nothing from this file. */
static uint64_t in_flight_gauge(void) {
    long n = http_in_flight();
    return n > 0 ? (uint64_t)n : 0;
}

const char *http_header(struct gw_request *req, const char *name) {
    return MHD_lookup_connection_value(req->conn, MHD_HEADER_KIND, name);
}

/* libmicrohttpd applies keep_escaped to query arguments too, so values
 * arrive percent-encoded ("prefix=a%3A").  Each value is decoded once, in
 * place (where libmicrohttpd's own unescaping writes too; decoding only
 * shortens it), the first time the handler asks for any.  Argument names
 * stay as sent: libmicrohttpd keeps their lengths for lookups. */
static enum MHD_Result unescape_value(void *cls, enum MHD_ValueKind kind, const char *key,
                                      const char *value) {
    if (value && strchr(value, '%')) MHD_http_unescape((char *)value);
    return MHD_YES;
}

const char *http_query(struct gw_request *req, const char *name) {
    if (!req->query_decoded) {
        req->query_decoded = 1;
        MHD_get_connection_values(req->conn, MHD_GET_ARGUMENT_KIND, unescape_value, NULL);
    }
    return MHD_lookup_connection_value(req->conn, MHD_GET_ARGUMENT_KIND, name);
}

/* The CORS headers of an answer to a page of a --cors-origin origin
 * (req->cors): the origin named back, with credentials (the page sends
 * Authorization), and the headers it may read; a preflight's answer also
 * says which methods and request headers the API takes. */
static void add_cors_headers(struct gw_request *req, struct MHD_Response *r) {
    const char *origin = http_header(req, "Origin");
    if (!origin) return;
    MHD_add_response_header(r, "Access-Control-Allow-Origin", origin);
    MHD_add_response_header(r, "Access-Control-Allow-Credentials", "true");
    MHD_add_response_header(r, "Vary", "Origin");
    MHD_add_response_header(r, "Access-Control-Expose-Headers",
                            "Lock-Token, Session, Location, Retry-After, WWW-Authenticate");
    if (req->cors != 2) return;
    MHD_add_response_header(r, "Access-Control-Allow-Methods", "GET, POST, PATCH, DELETE");
    MHD_add_response_header(r, "Access-Control-Allow-Headers",
                            "Authorization, Content-Type, Lock-Token, Session");
    MHD_add_response_header(r, "Access-Control-Max-Age", "600");
}

/* The gateway's state for a request's connection (conns.h), or NULL. */
static struct conn *conn_of(struct MHD_Connection *conn) {
    const union MHD_ConnectionInfo *ci =
        conn ? MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT) : NULL;
    return ci ? ci->socket_context : NULL;
}

/* Puts conn's connection under phase's deadline (conns.h), from now. */
static void conn_phase(struct MHD_Connection *conn, enum conn_phase phase) {
    struct conn *c = conn_of(conn);
    if (!c) return;
    conns_enter(&self->conns, c, phase, loop_now_ms());
    if (c->phase != CONN_HANDLING && c->due_ms < self->sweep_at_ms) self->sweep_at_ms = c->due_ms;
}

/* Queues the reply req holds.  Returns MHD_NO only when libmicrohttpd
 * cannot take it (out of memory): the connection is then closed. */
static enum MHD_Result send_reply(struct gw_request *req) {
    char *body = req->resp;
    req->resp = NULL;
    req->sent = 1;
    /* Whether the client hung up (or half-closed) before its answer, seen
     * now, not at the request's end: a FIN or reset that comes after the
     * answer went out answers our own close (Connection: close), and
     * HAProxy closes its server connections with a reset once it has read
     * the answer, which the delivery watch took for a lost one and gave
     * back a grant its client held (#31, tests/rolling). */
    req->shut_before_reply = req->on_undelivered && delivery_peer_shut(http_client_fd(req));
    struct MHD_Response *r =
        MHD_create_response_from_buffer(req->resp_len, body, MHD_RESPMEM_MUST_FREE);
    if (!r) {
        free(body);
        return MHD_NO;
    }
    if (req->content_type) MHD_add_response_header(r, "Content-Type", req->content_type);
    for (int i = 0; i < req->nheaders; i++)
        MHD_add_response_header(r, req->headers[i].name, req->headers[i].value);
    if (req->cors) add_cors_headers(req, r);
    /* Leaving (http_leave): a proxy's kept-alive connection ends with this
     * answer instead of staying idle until the stop closes it, when a
     * request the proxy sends on it at that moment would meet the close
     * (docs/operations.md, "Rolling restarts"). */
    int has_connection = 0;
    for (int i = 0; i < req->nheaders; i++)
        has_connection |= strcasecmp(req->headers[i].name, "Connection") == 0;
    if (http_leaving() && !has_connection) MHD_add_response_header(r, "Connection", "close");
    enum MHD_Result ret = MHD_queue_response(req->conn, (unsigned)req->status, r);
    MHD_destroy_response(r);
    return ret;
}

static void request_end(struct gw_request *req, int delivered, int fd);

static void stream_final_event(struct gw_request *req);
static void stream_wake(struct gw_stream *st);

/* req->on_ready: the reply is complete. */
static void reply_ready(struct gw_request *req) {
    if (req->stream) {
        stream_final_event(req);
        stream_wake(req->stream); /* the request, or the stream, is suspended */
    } else if (req->suspended) {
        req->suspended = 0;
        MHD_resume_connection(req->conn);
        self->resumed = 1;
    }
    if (req->orphaned) request_end(req, 0, -1);
}

static struct gw_request *request_new(struct MHD_Connection *conn, const char *url) {
    struct gw_request *req = calloc(1, sizeof *req);
    if (!req) return NULL;
    req->conn = conn;
    req->route = -1;
    req->on_ready = reply_ready;
    req->start_ns = now_ns();
    req->path = strdup(url);
    if (!req->path) {
        free(req);
        return NULL;
    }
    return req;
}

static void stream_free(struct gw_stream *st);

static void request_free(struct gw_request *req) {
    if (req->ctx_free) req->ctx_free(req->ctx);
    if (req->stream) stream_free(req->stream);
    for (int i = 0; i < req->nheaders; i++) free(req->headers[i].value);
    free(req->headers);
    cJSON_Delete(req->json);
    free(req->body);
    free(req->resp);
    free(req->path);
    free(req->name);
    free(req->token);
    free(req->key_id);
    free(req);
}

/* ---- the end of a request ----------------------------------------------------- */

static void give_back(struct gw_request *req, const char *why) {
    log_info("http: giving back '%s': %s", req->name ? req->name : "?", why);
    metrics_inc(M_GIVEN_BACK, 1);
    req->on_undelivered(req);
}

static void on_delivery(void *arg, int delivered) {
    struct gw_request *req = arg;
    if (!delivered) give_back(req, "the client's TCP reset the answer");
    request_free(req);
}

/* The request is over for libmicrohttpd (delivered: it wrote the whole
 * reply).  A grant the client cannot have got is given back; one written
 * after the client's FIN is watched until its TCP takes it or resets. */
static void request_end(struct gw_request *req, int delivered, int fd) {
    /* An event stream's life is no request latency: it is left out of the
     * histogram (its own counters: lockgate_stream_holds_total). */
    if (req->status && !req->stream)
        metrics_observe_request(req->route, req->status, (now_ns() - req->start_ns) / 1000);
    if (req->dispatched) in_flight_add(-1);
    req->conn = NULL;
    if (req->on_undelivered && !delivered) {
        give_back(req,
                  req->sent ? "the answer could not be sent" : "the client left before the answer");
    } else if (req->on_undelivered && !tls_enabled() && req->shut_before_reply) {
        /* Not over TLS: after the answer GnuTLS writes its close_notify,
         * which a client that already left resets, and the watch would take
         * that for a lost answer (test_tls found grants given back).  Over
         * TLS a written answer counts as delivered. */
        delivery_watch(fd, on_delivery, req);
        return;
    }
    request_free(req);
}

/* Picks the route's media type the client's Accept prefers into
 * req->media, or answers 406 when it accepts none (before the handler
 * acts: nothing is acquired for an answer the client refuses). */
static int media_or_reply(struct gw_request *req) {
    static const char *const json[] = {"application/json", NULL};
    const char *const *types = router_routes[req->route].produces;
    if (!types) types = json;
    int i = accept_choose(http_header(req, MHD_HTTP_HEADER_ACCEPT), types);
    if (i >= 0) {
        req->media = types[i];
        return GW_OK;
    }
    char offered[128] = "";
    for (int k = 0; types[k]; k++)
        snprintf(offered + strlen(offered), sizeof offered - strlen(offered), "%s%s", k ? ", " : "",
                 types[k]);
    reply_problem(req, CODE_NOT_ACCEPTABLE, "%.200s answers in %s only", req->path, offered);
    return GW_REPLIED;
}

/* Browsers (origin.h), before routing and before any handler: an Origin
 * that is neither the gateway's own nor listed is refused 403; a listed
 * one's answer carries the CORS headers (send_reply), and its preflight
 * (OPTIONS with Access-Control-Request-Method, for a route that takes that
 * method) is answered 204 here.  GW_OK: go on. */
static int origin_or_reply(struct gw_request *req, const char *method) {
    enum origin_verdict v = origin_check(http_header(req, "Origin"),
                                         http_header(req, MHD_HTTP_HEADER_HOST), tls_enabled());
    if (v == ORIGIN_REFUSED) {
        metrics_inc(M_ORIGIN_REFUSED, 1);
        reply_problem(req, CODE_ORIGIN_FORBIDDEN,
                      "requests from this Origin are refused: only the gateway's own pages and "
                      "origins named by --cors-origin may call it from a browser");
        return GW_REPLIED;
    }
    if (v != ORIGIN_LISTED) return GW_OK;
    req->cors = 1;
    const char *want = http_header(req, "Access-Control-Request-Method");
    struct route_match m;
    if (strcmp(method, "OPTIONS") != 0 || !want ||
        router_match(router_routes, router_routes_count, want, req->path, &m) < 0)
        return GW_OK; /* a preflight for no route: 404 or 405 as any OPTIONS */
    req->cors = 2;
    reply_raw(req, 204, NULL, NULL, 0);
    return GW_REPLIED;
}

/* Finds req's route (req->route) and keeps its parameters (req->match),
 * or answers 404 or 405. */
static int route_or_reply(struct gw_request *req, const char *method) {
    struct route_match m;
    req->route = router_match(router_routes, router_routes_count, method, req->path, &m);
    if (req->route == ROUTER_NOT_FOUND) {
        reply_problem(req, CODE_NOT_FOUND, "no route for %.200s", req->path);
        return GW_REPLIED;
    }
    if (req->route == ROUTER_BAD_METHOD) {
        reply_header(req, "Allow", m.allow);
        reply_problem(req, CODE_METHOD_NOT_ALLOWED, "%.200s allows %s", req->path, m.allow);
        return GW_REPLIED;
    }
    memcpy(req->match.param, m.param, sizeof m.param);
    memcpy(req->match.param_len, m.param_len, sizeof m.param_len);
    return GW_OK;
}

/* Routes req and runs its handler, or answers 403 (origin), 404, 405, 406
 * or 413 itself. */
static void dispatch(struct gw_request *req, const char *method) {
    req->dispatched = 1;
    in_flight_add(1);
    conn_phase(req->conn, CONN_HANDLING); /* the body is in: no deadline now */
    if (origin_or_reply(req, method) != GW_OK) {
        /* refused, or a preflight answered */
    } else if (route_or_reply(req, method) != GW_OK) {
        /* 404 or 405 */
    } else if (gate && gate(req) != GW_OK) {
        /* refused: 401 or 403 */
    } else if (req->body_too_large) {
        reply_problem(req, CODE_PAYLOAD_TOO_LARGE, "the body is over %d bytes", HTTP_BODY_MAX);
    } else if (media_or_reply(req) == GW_OK) {
        router_routes[req->route].handler(req);
    }
    /* Handlers copy what they need out of the body while they run: a
     * request that now waits for Redis, or for a lock, need not keep it. */
    cJSON_Delete(req->json);
    req->json = NULL;
    free(req->body);
    req->body = NULL;
}

/* What the request's header fields say about its framing and Host, read
 * once when the headers are in.  libmicrohttpd 0.9.75 frames a body by
 * Transfer-Encoding when one is present (ignoring Content-Length), reads a
 * coding list like "gzip, chunked" as a body without end, and takes the
 * first Host; RFC 9112 wants these refused instead (see framing_problem). */
struct header_scan {
    int cl_count;        /* Content-Length fields */
    int cl_differ;       /* two of them disagree */
    int cl_too_large;    /* the first passes the cap */
    char cl_first[32];   /* the first, without leading zeros */
    int te_count;        /* Transfer-Encoding fields */
    char te[256];        /* their values, joined with ", " (cut when long) */
    int host_count;      /* Host fields */
    int host_bad;        /* a Host value with bytes no uri-host has */
    int name_whitespace; /* a field name with whitespace ("Host : x") */
};

static enum MHD_Result scan_header(void *cls, enum MHD_ValueKind kind, const char *key,
                                   const char *value) {
    struct header_scan *h = cls;
    if (!value) value = "";
    if (strpbrk(key, " \t")) h->name_whitespace = 1;
    if (strcasecmp(key, MHD_HTTP_HEADER_CONTENT_LENGTH) == 0) {
        while (*value == '0' && value[1]) value++; /* leading zeros mean nothing */
        if (h->cl_count++ == 0) {
            snprintf(h->cl_first, sizeof h->cl_first, "%s", value);
            h->cl_too_large = strspn(value, "0123456789") == strlen(value) &&
                              (strlen(value) > 9 || atol(value) > HTTP_BODY_MAX);
        } else if (strcmp(h->cl_first, value) != 0) {
            h->cl_differ = 1;
        }
    } else if (strcasecmp(key, MHD_HTTP_HEADER_TRANSFER_ENCODING) == 0) {
        size_t used = strlen(h->te);
        snprintf(h->te + used, sizeof h->te - used, "%s%s", h->te_count++ ? ", " : "", value);
    } else if (strcasecmp(key, MHD_HTTP_HEADER_HOST) == 0) {
        h->host_count++;
        /* uri-host [":" port]: unreserved, sub-delims, '%', ':', '[', ']' */
        for (const unsigned char *p = (const unsigned char *)value; *p; p++)
            if (*p <= ' ' || *p >= 0x7f || strchr("\"#/<>?@\\^`{|}", *p)) h->host_bad = 1;
    }
    return MHD_YES;
}

/* 1 when the comma-separated coding list is exactly "chunked". */
static int te_is_chunked(const char *te, int *last_chunked) {
    const char *last = strrchr(te, ',');
    last = last ? last + 1 : te;
    last += strspn(last, " \t");
    size_t n = strcspn(last, " \t;");
    *last_chunked =
        n == 7 && strncasecmp(last, "chunked", 7) == 0 && !last[n + strspn(last + n, " \t")];
    const char *first = te + strspn(te, " \t");
    return *last_chunked && first == last;
}

/* The status a request with these fields gets before anything runs, or 0.
 * Framing errors close the connection after the answer (the caller adds
 * Connection: close): what follows on it cannot be told from the body. */
static int framing_problem(const struct header_scan *h, const char *version, char *why,
                           size_t why_len, int *close_after) {
    int http11 = strcmp(version, MHD_HTTP_VERSION_1_1) == 0;
    *close_after = 1;
    if (h->te_count) {
        int last_chunked;
        int chunked = te_is_chunked(h->te, &last_chunked);
        if (!http11) {
            snprintf(why, why_len, "Transfer-Encoding in an %.16s request", version);
            return 400;
        }
        if (h->cl_count) {
            snprintf(why, why_len, "both Content-Length and Transfer-Encoding frame this body");
            return 400;
        }
        if (!last_chunked) {
            snprintf(why, why_len, "Transfer-Encoding '%.100s' does not end in chunked", h->te);
            return 400;
        }
        if (!chunked) {
            snprintf(why, why_len, "transfer coding '%.100s' is not supported (only chunked)",
                     h->te);
            return 501;
        }
    }
    if (h->cl_count > 1 && h->cl_differ) {
        snprintf(why, why_len, "conflicting Content-Length headers");
        return 400;
    }
    *close_after = 0;
    if (h->name_whitespace) {
        snprintf(why, why_len, "whitespace between a header field name and its colon");
        return 400;
    }
    if (http11 && h->host_count != 1) {
        snprintf(why, why_len,
                 h->host_count ? "more than one Host header"
                               : "an HTTP/1.1 request needs a Host header");
        return 400;
    }
    if (h->host_bad) {
        snprintf(why, why_len, "the Host header is not a host[:port]");
        return 400;
    }
    return 0;
}

/* A reply made before the body is read counts as dispatched. */
static void dispatch_early(struct gw_request *req) {
    req->dispatched = 1;
    in_flight_add(1);
}

/* Bytes of answers written to conn's socket and not yet taken by the
 * client (its send queue), 0 when unknown. */
static int output_queued(struct MHD_Connection *conn) {
    struct conn *c = conn_of(conn);
    int outq = 0;
    if (!c || c->fd < 0 || ioctl(c->fd, SIOCOUTQ, &outq) < 0) return 0;
    return outq;
}

/* The head of an answer written past libmicrohttpd (status: e.g. "413
 * Payload Too Large"), with Connection: close, into head; its length. */
static int head_past_mhd(char *head, size_t cap, const char *status, const char *content_type,
                         size_t len) {
    return snprintf(head, cap,
                    "HTTP/1.1 %s\r\nContent-Type: %s\r\n"
                    "Content-Length: %zu\r\nConnection: close\r\n\r\n",
                    status, content_type, len);
}

/* Writes an answer to fd past libmicrohttpd; 1 when all of it went. */
static int write_past_mhd(int fd, const char *status, const char *content_type, const char *body,
                          size_t len) {
    char head[256];
    int n = head_past_mhd(head, sizeof head, status, content_type, len);
    struct iovec iov[2] = {
        {head,         (size_t)n},
        {(char *)body, len      }
    };
    struct msghdr msg = {.msg_iov = iov, .msg_iovlen = 2};
    return sendmsg(fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT) == (ssize_t)(n + len);
}

/* A body without a Content-Length (chunked) passed the cap while it was
 * being read.  libmicrohttpd 0.9.75 cannot queue an answer in the middle
 * of a body, and reading it to its end is what let a client make the
 * gateway read megabytes: so, over plain HTTP, the 413 is written to the
 * socket here, and the connection is closed and drained (drain.h).  Over
 * TLS the bytes would have to go through the session, which this path
 * does not do (tls_write_past_mhd could): the connection is only closed. */
static enum MHD_Result too_large_midway(struct gw_request *req) {
    req->body_too_large = 1;
    dispatch_early(req);
    reply_problem(req, CODE_PAYLOAD_TOO_LARGE, "the body is over %d bytes", HTTP_BODY_MAX);
    int fd = http_client_fd(req);
    if (tls_enabled() || fd < 0) return MHD_NO;
    if (write_past_mhd(fd, "413 Payload Too Large", req->content_type, req->resp, req->resp_len)) {
        req->sent = 1;
        req->drain = 1;
    }
    return MHD_NO;
}

/* libmicrohttpd said it could not write an answer's headers into what the
 * request left of the connection's buffer (mhd_log), and is closing the
 * connection: set on its thread, read by on_completed, which it calls
 * next for that connection. */
static _Thread_local int head_did_not_fit;

/* The last resort when an answer's headers did not fit after all
 * (answer_room's estimate fell short, or a pipelined request's bytes took
 * the room): instead of a close without a word, the 431 goes to the
 * socket past libmicrohttpd, and the connection is drained.  A grant in
 * the unsent answer is given back as for any undelivered one.  Over TLS
 * it goes through the connection's session, as one record (tls.h), and
 * the connection is closed without a drain.  1 when the connection is
 * being drained. */
static int answer_head_did_not_fit(struct MHD_Connection *conn) {
    static const char status[] = "431 Request Header Fields Too Large";
    static const char type[] = "application/problem+json";
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (!ci) return 0;
    int drained = 0;
    char *body = problem_body(CODE_HEADERS_TOO_LARGE, NULL,
                              "the answer's headers do not fit what the request's line and "
                              "headers left of the connection's buffer (--connection-memory-kib)");
    size_t len = strlen(body);
    if (tls_enabled()) {
        char answer[1024];
        int n = head_past_mhd(answer, sizeof answer, status, type, len);
        if (n > 0 && (size_t)n + len <= sizeof answer) {
            memcpy(answer + n, body, len);
            tls_write_past_mhd(conn, answer, (size_t)n + len);
        }
    } else if (write_past_mhd(ci->connect_fd, status, type, body, len)) {
        drain_start(ci->connect_fd);
        drained = 1;
    }
    free(body);
    return drained;
}

/* ---- answers that go on (http.h, http_stream_open) ------------------------------- */

/* A stream's state.  While it has its request (req), the request's
 * callbacks and completion apply as to any answer.  Detached
 * (http_stream_detach), the request is freed and the stream is the
 * connection's (struct conn's stream), until on_completed or its end
 * frees it. */
struct gw_stream {
    char *buf;                   /* bytes written, not yet given to MHD */
    size_t off, len, cap;        /* given up to off, written up to len */
    struct gw_request *req;      /* its request, NULL once detached */
    struct MHD_Connection *conn; /* its connection */
    void **con_cls;              /* where libmicrohttpd keeps req (once queued) */
    struct MHD_Response *resp;   /* its response once queued (drop_head) */
    /* libmicrohttpd closed it first: the owner is told through on_gone
     * (http_stream_open's) or, once end_cb is set, gone_cb
     * (http_stream_detach's). */
    union {
        void (*on_gone)(struct gw_request *req);
        void (*gone_cb)(void *arg);
    };
    void (*end_cb)(void *arg); /* it is freed: the owner frees arg */
    void *arg;                 /* the owner's, for gone_cb and end_cb */
    int comments;              /* ":\n" lines owed before buf's (http_stream_comment) */
    char queued;               /* its response is queued */
    char read_from;            /* the head went out: libmicrohttpd asked for bytes */
    char ended;                /* nothing follows buf */
    char suspended;            /* stream_read suspended the connection */
    char orphaned;             /* libmicrohttpd closed the connection */
    char detach;               /* detach once the head is out */
    char counted;              /* detached: counts in in_flight */
};

static void stream_free(struct gw_stream *st) {
    if (st->end_cb) st->end_cb(st->arg);
    free(st->buf);
    free(st);
}

static void stream_append(struct gw_stream *st, const char *data, size_t len) {
    if (st->comments) { /* they came first */
        int n = st->comments;
        st->comments = 0;
        while (n--) stream_append(st, ":\n", 2);
    }
    if (st->off == st->len) st->off = st->len = 0;
    if (st->len + len > st->cap) {
        if (st->off) { /* room at the front first */
            memmove(st->buf, st->buf + st->off, st->len - st->off);
            st->len -= st->off;
            st->off = 0;
        }
        size_t cap = st->cap ? st->cap : 64;
        while (cap < st->len + len) cap *= 2;
        if (cap != st->cap) st->buf = alloc_check(realloc(st->buf, cap));
        st->cap = cap;
    }
    memcpy(st->buf + st->len, data, len);
    st->len += len;
}

/* A header of a response, as MHD_get_response_headers gives it. */
struct head_field {
    const char *name, *value;
};
struct head_fields {
    struct head_field f[16];
    int n;
};

static enum MHD_Result collect_field(void *cls, enum MHD_ValueKind kind, const char *key,
                                     const char *value) {
    struct head_fields *h = cls;
    if (h->n == (int)(sizeof h->f / sizeof h->f[0])) return MHD_NO;
    h->f[h->n++] = (struct head_field){key, value};
    return MHD_YES;
}

/* The stream's head went out: its header fields are dropped from its
 * response.  libmicrohttpd 0.9.75 copies each field into the response (an
 * entry and two strings, about 65 bytes a field) and reads them only to
 * write the head, before it first asks for the body (connection.c: the
 * head is built in MHD_CONNECTION_START_REPLY, the body asked for from
 * MHD_CONNECTION_HEADERS_SENT on), and then only for footers at a chunked
 * end, which a stream has none of: with 10,000 stream holds the five
 * fields were about 6.5 MB (bench/RESULTS.md, "Stream holds: memory").
 * Each deletion frees only its own field, so the pointers collected first
 * stay valid. */
static void drop_head(struct MHD_Response *r) {
    struct head_fields h = {.n = 0};
    MHD_get_response_headers(r, collect_field, &h);
    for (int i = 0; i < h.n; i++) MHD_del_response_header(r, h.f[i].name, h.f[i].value);
}

static void detach_now(struct gw_stream *st);

/* libmicrohttpd asks for the next bytes: those written, the end, or none
 * yet, and then the connection is suspended (libmicrohttpd would ask again
 * at once) until a write or the end resumes it.  The first call means the
 * head is out: its fields are dropped, and a stream asked to detach does. */
static ssize_t stream_read(void *cls, uint64_t pos, char *buf, size_t max) {
    struct gw_stream *st = cls;
    if (!st->read_from) {
        st->read_from = 1;
        if (st->resp) drop_head(st->resp);
        if (st->detach) detach_now(st);
    }
    if (st->off < st->len) {
        size_t n = st->len - st->off < max ? st->len - st->off : max;
        memcpy(buf, st->buf + st->off, n);
        st->off += n;
        if (st->off == st->len) { /* a stream mostly idles: it keeps no buffer */
            free(st->buf);
            st->buf = NULL;
            st->off = st->len = st->cap = 0;
        }
        return (ssize_t)n;
    }
    if (st->comments) { /* buf is empty: only comment lines wait */
        size_t n = 0;
        for (; st->comments && n + 2 <= max; st->comments--, n += 2) memcpy(buf + n, ":\n", 2);
        return (ssize_t)n;
    }
    if (st->ended) return MHD_CONTENT_READER_END_OF_STREAM;
    st->suspended = 1;
    MHD_suspend_connection(st->conn);
    return 0;
}

/* The stream's response lives as long as the stream, so what it holds
 * counts 10,000 times with 10,000 stream holds (bench/RESULTS.md, "Stream
 * holds").  Its block: to an HTTP/1.1 client the stream goes chunked, and
 * libmicrohttpd then has stream_read write straight into the connection's
 * own buffer, never into the block; only an HTTP/1.0 client (no chunks:
 * the stream ends with the connection) is read through it, 128 bytes at
 * a time.  The request's extra headers (Lock-Token, Location) are copied
 * into the response: they are freed here, nothing reads them after; the
 * response's copies go once the head is out (drop_head). */
static enum MHD_Result stream_queue(struct gw_request *req, const char *version, void **con_cls) {
    struct gw_stream *st = req->stream;
    st->queued = 1;
    st->con_cls = con_cls;
    req->sent = 1;
    size_t block = strcmp(version, MHD_HTTP_VERSION_1_1) == 0 ? 1 : 128;
    struct MHD_Response *r =
        MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, block, stream_read, st, NULL);
    if (!r) return MHD_NO;
    MHD_add_response_header(r, "Content-Type", "text/event-stream");
    MHD_add_response_header(r, "Cache-Control", "no-cache");
    MHD_add_response_header(r, "X-Accel-Buffering", "no");
    for (int i = 0; i < req->nheaders; i++) {
        MHD_add_response_header(r, req->headers[i].name, req->headers[i].value);
        free(req->headers[i].value);
    }
    free(req->headers);
    req->headers = NULL;
    req->nheaders = 0;
    if (req->cors) add_cors_headers(req, r);
    enum MHD_Result ret = MHD_queue_response(req->conn, 200, r);
    if (ret == MHD_YES) st->resp = r; /* the connection keeps it */
    MHD_destroy_response(r);
    return ret;
}

/* Its bytes are there: libmicrohttpd takes them on its next run.  Before
 * its response is queued the request is suspended (on_request), after it
 * the stream (stream_read). */
static void stream_wake(struct gw_stream *st) {
    if (st->orphaned) return;
    if (st->suspended) {
        st->suspended = 0;
    } else if (st->req && st->req->suspended) {
        st->req->suspended = 0;
    } else {
        return;
    }
    MHD_resume_connection(st->conn);
    self->resumed = 1;
}

void http_stream_open(struct gw_request *req, void (*on_gone)(struct gw_request *req),
                      int user_timeout_ms) {
    if (req->stream) return;
    struct gw_stream *st = alloc_check(calloc(1, sizeof *st));
    req->stream = st;
    st->req = req;
    st->conn = req->conn;
    st->on_gone = on_gone;
    int fd = http_client_fd(req);
    unsigned ut = (unsigned)user_timeout_ms;
    if (fd >= 0) setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &ut, sizeof ut);
    stream_wake(st); /* suspended in on_request: called again, it queues the stream */
}

int http_stream_opened(const struct gw_request *req) { return req->stream != NULL; }

static void stream_write(struct gw_stream *st, const char *data, size_t len) {
    if (st->ended || st->orphaned) return;
    stream_append(st, data, len);
    stream_wake(st);
}

void http_stream_write(struct gw_request *req, const char *data, size_t len) {
    if (req->stream) stream_write(req->stream, data, len);
}

static void stream_event(struct gw_stream *st, const char *id, const char *event,
                         const char *data) {
    char head[160]; /* ids are at most 48 bytes, event names a word */
    int n = id ? snprintf(head, sizeof head, "id: %.48s\nevent: %.32s\ndata: ", id, event)
               : snprintf(head, sizeof head, "event: %.32s\ndata: ", event);
    stream_write(st, head, (size_t)n);
    stream_write(st, data, strlen(data));
    stream_write(st, "\n\n", 2);
}

void http_stream_event(struct gw_request *req, const char *id, const char *event,
                       const char *data) {
    if (req->stream) stream_event(req->stream, id, event, data);
}

static void stream_comment(struct gw_stream *st) {
    if (st->ended || st->orphaned) return;
    if (st->off < st->len)
        stream_append(st, ":\n", 2);
    else
        st->comments++;
    stream_wake(st);
}

void http_stream_comment(struct gw_request *req) {
    if (req->stream) stream_comment(req->stream);
}

void http_stream_end(struct gw_request *req) {
    struct gw_stream *st = req->stream;
    if (!st || req->done) return;
    st->ended = 1;
    st->on_gone = NULL;
    st->gone_cb = NULL;
    req->done = 1;
    if (!req->status) req->status = 200;
    stream_wake(st);
    if (req->orphaned) request_end(req, 0, -1);
}

/* A reply after the stream opened: its last event. */
static void stream_final_event(struct gw_request *req) {
    struct gw_stream *st = req->stream;
    if (st->ended) return;
    static const char head[] = "event: error\ndata: ";
    if (!req->orphaned) {
        stream_append(st, head, sizeof head - 1);
        for (size_t i = 0; i < req->resp_len; i++) /* one line: SSE data ends at a newline */
            stream_append(st, req->resp[i] == '\n' ? " " : &req->resp[i], 1);
        stream_append(st, "\n\n", 2);
    }
    st->ended = 1;
    st->on_gone = NULL;
    st->gone_cb = NULL;
}

/* ---- streams that outlive their request (http.h, http_stream_detach) ------------- */

/* The head is out: the request is freed, and the connection's struct conn
 * keeps the stream for on_completed.  It still counts in in_flight (a
 * daemon is not stopped under a suspended connection: http_stop). */
static void detach_now(struct gw_stream *st) {
    struct gw_request *req = st->req;
    struct conn *c = conn_of(st->conn);
    if (!c || st->orphaned || st->ended) return; /* it ends with its request */
    st->detach = 0;
    c->stream = st;
    *st->con_cls = NULL;
    st->req = NULL;
    st->counted = req->dispatched;
    if (req->suspended) { /* not while libmicrohttpd reads it; kept for safety */
        req->suspended = 0;
        st->suspended = 1;
    }
    req->stream = NULL;
    req->conn = NULL;
    request_free(req);
}

struct gw_stream *http_stream_detach(struct gw_request *req, void (*on_gone)(void *arg),
                                     void (*on_end)(void *arg), void *arg) {
    struct gw_stream *st = req->stream;
    st->on_gone = NULL;
    st->gone_cb = on_gone;
    st->end_cb = on_end;
    st->arg = arg;
    req->ctx = NULL; /* the owner's now: on_end frees it */
    req->ctx_free = NULL;
    st->detach = 1;
    if (st->read_from) detach_now(st);
    return st;
}

/* A detached stream is over: its owner is told (end_cb), it is freed. */
static void detached_free(struct gw_stream *st) {
    if (st->counted) in_flight_add(-1);
    stream_free(st);
}

/* libmicrohttpd completed a detached stream's connection (on_completed):
 * after its end, or closed first, when the owner is told (gone_cb) and
 * ends it now or later (http_detached_end frees it then). */
static void detached_closed(struct gw_stream *st) {
    st->orphaned = 1;
    st->suspended = 0;
    st->conn = NULL;
    if (st->ended) {
        detached_free(st);
        return;
    }
    if (st->gone_cb) {
        void (*gone)(void *) = st->gone_cb;
        st->gone_cb = NULL;
        gone(st->arg); /* may end, and so free, st */
    }
}

void http_detached_event(struct gw_stream *st, const char *event, const char *data) {
    stream_event(st, NULL, event, data);
}

void http_detached_comment(struct gw_stream *st) { stream_comment(st); }

void http_detached_end(struct gw_stream *st) {
    if (st->req) {
        http_stream_end(st->req);
        return;
    }
    if (st->ended) return;
    st->ended = 1;
    st->gone_cb = NULL;
    if (st->orphaned) {
        detached_free(st);
        return;
    }
    stream_wake(st); /* libmicrohttpd reads the end, then completes it */
}

int http_detached_fd(struct gw_stream *st) {
    if (st->req) return http_client_fd(st->req);
    const union MHD_ConnectionInfo *ci =
        st->orphaned ? NULL : MHD_get_connection_info(st->conn, MHD_CONNECTION_INFO_CONNECTION_FD);
    return ci ? ci->connect_fd : -1;
}

int http_detached_gone(struct gw_stream *st) {
    if (st->req) return http_client_gone(st->req);
    return st->orphaned || delivery_peer_shut(http_detached_fd(st));
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url,
                                  const char *method, const char *version, const char *upload_data,
                                  size_t *upload_data_size, void **con_cls) {
    struct gw_request *req = *con_cls;

    if (!req) {               /* headers are in */
        head_did_not_fit = 0; /* libmicrohttpd's note is about the answer to come */
        req = request_new(conn, url);
        if (!req) return MHD_NO;
        *con_cls = req;
        size_t left, need;
        if (answer_room_short(conn, url, &left, &need)) {
            /* Answered now, before any work: once handled, its answer's
             * headers would not fit and libmicrohttpd would close the
             * connection unanswered (answer_room.h).  A 431's own head is
             * about 170 bytes; if even that does not fit, on_completed
             * writes it (answer_head_did_not_fit). */
            dispatch_early(req);
            req->drain = 1; /* a body it sends is not read: an orderly close */
            reply_header(req, "Connection", "close");
            reply_problem(req, CODE_HEADERS_TOO_LARGE,
                          "the request's line and headers leave %zu bytes of the connection's "
                          "buffer (--connection-memory-kib) and its answer's headers need %zu",
                          left, need);
            return send_reply(req);
        }
        struct header_scan h = {0};
        MHD_get_connection_values(conn, MHD_HEADER_KIND, scan_header, &h);
        char why[200];
        int close_after, status = framing_problem(&h, version, why, sizeof why, &close_after);
        if (status) {
            dispatch_early(req);
            if (close_after) reply_header(req, "Connection", "close");
            reply_problem(req, status == 501 ? CODE_NOT_IMPLEMENTED : CODE_INVALID_REQUEST, "%s",
                          why);
            return send_reply(req);
        }
        /* The headers are in; a body, if one comes, has its own deadline. */
        int has_body = h.te_count || (h.cl_count && strcmp(h.cl_first, "0") != 0);
        conn_phase(conn, has_body ? CONN_BODY : CONN_HANDLING);
        if (h.cl_count && h.cl_too_large) {
            /* Answered before reading it, then the connection is closed
             * and drained (drain.h), so that a proxy still sending the
             * body gets the 413, not a reset. */
            req->body_too_large = 1;
            req->drain = 1;
            dispatch_early(req);
            reply_header(req, "Connection", "close");
            reply_problem(req, CODE_PAYLOAD_TOO_LARGE, "the body is over %d bytes", HTTP_BODY_MAX);
            return send_reply(req);
        }
        return MHD_YES;
    }

    if (req->throttled == 2) return MHD_NO; /* held back past its deadline */

    if (*upload_data_size) { /* a piece of the body */
        size_t n = *upload_data_size;
        *upload_data_size = 0;
        if (req->body_too_large || req->dispatched) return MHD_YES;
        if (req->body_len + n > HTTP_BODY_MAX) return too_large_midway(req);
        if (req->body_len + n + 1 > req->body_cap) {
            /* Grown as the body comes, not HTTP_BODY_MAX at once: a waiting
             * request keeps its body for as long as it waits. */
            size_t cap = req->body_cap ? req->body_cap : 256;
            while (cap < req->body_len + n + 1) cap *= 2;
            if (cap > HTTP_BODY_MAX + 1) cap = HTTP_BODY_MAX + 1;
            char *grown = realloc(req->body, cap);
            if (!grown) return MHD_NO;
            req->body = grown;
            req->body_cap = (uint32_t)cap;
        }
        memcpy(req->body + req->body_len, upload_data, n);
        req->body_len += (uint32_t)n;
        req->body[req->body_len] = '\0';
        return MHD_YES;
    }

    if (!req->dispatched && !req->throttled && output_queued(conn) > HTTP_OUTPUT_MAX) {
        /* Held back until the client reads (HTTP_OUTPUT_MAX): suspended
         * like a request whose reply is owed, with the same two steps
         * below; resume_readers resumes it, and it is handled then. */
        req->throttled = 1;
        conn_phase(conn, CONN_THROTTLED);
        conn_of(conn)->held = req;
    }
    if (!req->dispatched && !req->throttled) dispatch(req, method); /* the body is complete */

    if (req->stream) {
        if (req->stream->queued) return MHD_YES;
        return stream_queue(req, version, con_cls);
    }
    if (req->done) {
        if (req->sent) return MHD_YES; /* already sent (413) */
        return send_reply(req);
    }
    if (!req->deferred) {
        /* Not suspended on the first return without a reply, but on the
         * next.  libmicrohttpd 0.9.75 leaves a suspended connection's poll
         * interest as it was when it was suspended, and uses it again on
         * resume.  Suspended now, that is "read" (left from reading the
         * request): on resume a client's FIN (a half-close, or the end of
         * a pipelined batch) is read first, and in this state a read of
         * EOF closes the connection with the reply unsent -- the lock
         * granted, nobody told.  Returning without a reply makes it record
         * "block" (no read), and marks data pending, so it calls again at
         * once, without waiting in poll; suspended on that call, the
         * connection is resumed into "block", the reply goes out, and only
         * then is the FIN read.  Between the two calls the request is not
         * suspended: see on_completed. */
        req->deferred = 1;
        return MHD_YES;
    }
    req->suspended = 1;
    MHD_suspend_connection(conn);
    return MHD_YES;
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                         enum MHD_RequestTerminationCode toe) {
    struct gw_request *req = *con_cls;
    if (head_did_not_fit) {
        head_did_not_fit = 0;
        /* Only an answer whose head never went out: never into a stream
         * that has begun (a flag left by a connection libmicrohttpd closed
         * without calling here would otherwise corrupt it). */
        if (req && toe == MHD_REQUEST_TERMINATED_WITH_ERROR &&
            !(req->stream && req->stream->read_from) && answer_head_did_not_fit(conn))
            req->drain = 0; /* drained there: one reader of the socket */
    }
    conn_phase(conn, CONN_NEXT); /* a kept-alive connection's next request */
    if (!req) {
        struct conn *c = conn_of(conn);
        struct gw_stream *st = c ? c->stream : NULL;
        if (st) { /* detached (http_stream_detach) */
            c->stream = NULL;
            detached_closed(st);
        }
        return;
    }
    *con_cls = NULL;
    /* Closed (the client reset, the gateway stopping) while its reply is
     * still owed, between on_request's two calls: the callback still has
     * it, so http_reply_ready ends it. */
    if (req->dispatched && !req->done) {
        req->orphaned = 1;
        struct gw_stream *st = req->stream;
        if (!st) return;
        /* A stream's owner is told: nobody else will see this client go. */
        st->orphaned = 1;
        if (st->on_gone && !st->end_cb) {
            void (*gone)(struct gw_request *) = st->on_gone;
            st->on_gone = NULL;
            gone(req);            /* may complete, and so free, req */
        } else if (st->gone_cb) { /* detach was asked (end_cb set): the owner's */
            void (*gone)(void *) = st->gone_cb;
            st->gone_cb = NULL;
            gone(st->arg); /* may complete, and so free, req */
        }
        return;
    }
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (req->drain && ci) drain_start(ci->connect_fd);
    request_end(req, req->sent && toe == MHD_REQUEST_TERMINATED_COMPLETED_OK,
                ci ? ci->connect_fd : -1);
}

/* The path arrives percent-encoded: names are decoded segment by segment
 * (names.c), so that "%2F" can never split a name in two.  (Query values
 * too: http_query decodes them.) */
static size_t keep_escaped(void *cls, struct MHD_Connection *c, char *s) { return strlen(s); }

/* A connection not accepted (no descriptor left, or the connection
 * limit): counted, and logged as a warning at most once a second with the
 * number since the last line (a flood must not fill the log). */
static void not_accepted(const char *why) {
    static atomic_long last_ms, unlogged;
    metrics_inc(M_ACCEPT_REFUSED, 1);
    long now = (long)loop_now_ms(), last = atomic_load(&last_ms);
    long n = atomic_fetch_add(&unlogged, 1) + 1;
    if (now - last >= 1000 && atomic_compare_exchange_strong(&last_ms, &last, now)) {
        atomic_fetch_sub(&unlogged, n);
        log_warn("http: %ld connection(s) not accepted in the last second: %s", n, why);
    }
}

/* libmicrohttpd's messages, at debug level, except an accept() that
 * failed (descriptors). */
static void mhd_log(void *cls, const char *fmt, va_list ap) {
    char buf[256];
    vsnprintf(buf, sizeof buf, fmt, ap);
    buf[strcspn(buf, "\n")] = '\0';
    if (strstr(buf, "Error accepting connection") || strstr(buf, "reached connection limit") ||
        strstr(buf, "resource limit"))
        not_accepted(buf);
    else if (strstr(buf, "failed to create") && strstr(buf, "response header"))
        head_did_not_fit = 1; /* connection.c, MHD_CONNECTION_START_REPLY */
    else
        log_debug("http: %s", buf);
}

/* Who gets a connection: none past the worker's connection limit
 * (connection_limit), refused at once, counted and logged -- at its own
 * limit libmicrohttpd stops accepting, and clients hang unseen in the
 * listen backlog -- and --max-connections-per-ip, counted for the whole
 * gateway (peers.h). */
static enum MHD_Result on_accept(void *cls, const struct sockaddr *addr, socklen_t len) {
    if (self->nconns >= self->conn_limit) {
        not_accepted("the connection limit is reached");
        return MHD_NO;
    }
    return !*(const int *)cls || peers_admit(addr, len) ? MHD_YES : MHD_NO;
}

/* A connection's start and end: its deadlines (conns.h), its hold on a
 * TLS pair (tls.h) and its place in --max-connections-per-ip's count. */
static void on_connection(void *cls, struct MHD_Connection *conn, void **socket_context,
                          enum MHD_ConnectionNotificationCode code) {
    int per_ip = *(const int *)cls;
    if (code == MHD_CONNECTION_NOTIFY_STARTED) {
        const union MHD_ConnectionInfo *ci =
            MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
        struct conn *c = conns_start(&self->conns, ci ? ci->connect_fd : -1,
                                     tls_connection_started(), loop_now_ms());
        c->mhd = conn;
        self->nconns++;
        if (c->due_ms < self->sweep_at_ms) self->sweep_at_ms = c->due_ms;
        *socket_context = c;
        return;
    }
    struct conn *c = *socket_context;
    *socket_context = NULL;
    if (c) {
        self->nconns--;
        conns_forget(&self->conns, c);
        tls_connection_closed(c->tls);
        free(c);
    }
    const union MHD_ConnectionInfo *ci =
        per_ip ? MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS) : NULL;
    if (ci) peers_leave(ci->client_addr);
}

/* Descriptors kept back from HTTP connections: the Redis connections
 * (one per master a worker talks to, pub/sub, reconnections), the loops'
 * epoll, event and timer descriptors, the log, drains and delivery
 * watches.  With the connection limit under what is left, accept() meets
 * the descriptor limit only when something else took descriptors, and a
 * Redis reconnection never finds none (#30). */
#define FDS_HELD_BACK            64
#define FDS_HELD_BACK_PER_WORKER 32

/* The connections one worker may hold: --max-connections, or less when
 * the descriptor limit (raised to its hard limit first) cannot give every
 * worker that many besides those held back. */
static unsigned connection_limit(const struct gw_config *cfg) {
    static atomic_int logged;
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) < 0) return (unsigned)cfg->max_connections;
    if (rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
        getrlimit(RLIMIT_NOFILE, &rl);
    }
    long held = FDS_HELD_BACK + FDS_HELD_BACK_PER_WORKER * (long)cfg->threads;
    long room = rl.rlim_cur == RLIM_INFINITY ? cfg->max_connections
                                             : ((long)rl.rlim_cur - held) / cfg->threads;
    if (room < 16) room = 16;
    long limit = room < cfg->max_connections ? room : cfg->max_connections;
#define LIMIT_FMT                                                                            \
    "http: at most %ld connections per worker (--max-connections %d; descriptor limit %ld, " \
    "%ld held back for Redis and the gateway's own files)"
    if (atomic_exchange(&logged, 1))
        ;
    else if (limit < cfg->max_connections)
        log_warn(LIMIT_FMT, limit, cfg->max_connections, (long)rl.rlim_cur, held);
    else
        log_info(LIMIT_FMT, limit, cfg->max_connections, (long)rl.rlim_cur, held);
    return (unsigned)limit;
}

/* Starts one worker's daemon: the one place the daemon's options are set.
 * External-epoll mode (MHD_USE_EPOLL without an internal thread): the
 * worker's loop drives it.  Each daemon binds its own listening socket to
 * the same address (SO_REUSEPORT, MHD_OPTION_LISTENING_ADDRESS_REUSE), and
 * the kernel spreads new connections over them.
 *
 * epoll, not poll(): poll() walks every open connection on every turn, so
 * 10,000 idle keep-alive connections took locks to 0.11x and /healthz to
 * 0.07x of their throughput without them; with epoll an idle connection
 * costs memory only (bench/fleet.sh, bench/RESULTS.md).
 *
 * Each connection has one memory pool of --connection-memory-kib for its
 * request line, headers and response headers.  A waiting request keeps its
 * pool, and the pool's first page is always written (the request is read
 * into it): at 16 KiB 10,000 waiters took 73 MiB, at 4 KiB 64
 * (bench/RESULTS.md); 4 KiB still holds request headers of ~3.2 KiB, with
 * room kept for the answer's headers (answer_room.h). */
static struct MHD_Daemon *daemon_start(const struct gw_config *cfg, const struct addrinfo *ai,
                                       unsigned limit) {
    unsigned flags =
        MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ERROR_LOG | tls_daemon_flags();
    if (ai->ai_family == AF_INET6) flags |= MHD_USE_IPv6;
    static int per_ip; /* on_connection's cls: the same for every worker */
    per_ip = cfg->max_connections_per_ip > 0;
    peers_init(cfg->max_connections_per_ip);
    origin_init(cfg->cors_origins, cfg->ncors_origins);
    mhd_errors_init((unsigned)cfg->connection_memory_kib * 1024);
    answer_room_init((size_t)cfg->connection_memory_kib * 1024);
    return MHD_start_daemon(
        flags, (uint16_t)cfg->listen_port, on_accept, &per_ip, on_request, NULL,
        MHD_OPTION_EXTERNAL_LOGGER, mhd_log, NULL, MHD_OPTION_SOCK_ADDR, ai->ai_addr,
        /* above on_accept's: libmicrohttpd's own limit is never reached */
        MHD_OPTION_CONNECTION_LIMIT, limit + 16, MHD_OPTION_CONNECTION_TIMEOUT,
        (unsigned)HTTP_IDLE_TIMEOUT_S, MHD_OPTION_CONNECTION_MEMORY_LIMIT,
        (size_t)cfg->connection_memory_kib * 1024, MHD_OPTION_LISTENING_ADDRESS_REUSE, (unsigned)1,
        MHD_OPTION_NOTIFY_COMPLETED, on_completed, NULL, MHD_OPTION_NOTIFY_CONNECTION,
        on_connection, &per_ip, MHD_OPTION_UNESCAPE_CALLBACK, keep_escaped, NULL, MHD_OPTION_ARRAY,
        tls_daemon_options(), MHD_OPTION_END);
}

/* MHD_run, then again while libmicrohttpd says it has work ready now
 * (timeout 0): a connection resumed or answered in one pass may need the
 * next (the half-closed client's end of file read after its answer). */
static void run_daemon(struct http_worker *w) {
    MHD_UNSIGNED_LONG_LONG t = 0;
    for (int i = 0; i < 4; i++) {
        MHD_run(w->daemon);
        if (MHD_get_timeout(w->daemon, &t) != MHD_YES || t > 0) break;
    }
}

static void on_daemon_ready(void *arg, uint32_t events) {
    struct http_worker *w = arg;
    w->resumed = 0;
    run_daemon(w);
}

int http_timeout_hook(void *arg, int64_t now_ms) {
    struct http_worker *w = arg;
    MHD_UNSIGNED_LONG_LONG t;
    if (!w->daemon || MHD_get_timeout(w->daemon, &t) != MHD_YES) {
        w->run_at_ms = INT64_MAX;
        return -1;
    }
    if (t > 1000000) t = 1000000;
    w->run_at_ms = now_ms + (int64_t)t;
    return (int)t;
}

/* The connections held back for their unread answers: each whose client
 * has read enough goes on with its request; one held back past its
 * deadline is shut down and its request answers MHD_NO on resume, which
 * closes it (a suspended connection is not watched by libmicrohttpd). */
static void resume_readers(struct http_worker *w, int64_t now_ms) {
    struct conn *c = w->conns.head[CONN_THROTTLED], *next;
    for (; c; c = next) {
        next = c->next;
        struct gw_request *req = c->held;
        int late = c->due_ms <= now_ms;
        if (!late && output_queued(c->mhd) > HTTP_OUTPUT_MAX) continue;
        c->held = NULL;
        conns_enter(&w->conns, c, CONN_HANDLING, now_ms); /* its body is in */
        req->throttled = late ? 2 : 0;
        if (late) {
            shutdown(c->fd, SHUT_RDWR);
            metrics_inc(M_SLOW_CLOSED, 1);
        }
        if (!req->suspended) continue; /* between its two steps: handled on the next */
        req->suspended = 0;
        req->deferred = 0; /* handled now: the two steps again if it waits */
        MHD_resume_connection(c->mhd);
        w->resumed = 1;
    }
}

/* Cuts off the connections past their deadline (conns.h); libmicrohttpd
 * closes them on its next run, which the shutdown's event brings. */
static void sweep(struct http_worker *w, int64_t now_ms) {
    if (w->conns.head[CONN_THROTTLED]) resume_readers(w, now_ms);
    if (now_ms < w->sweep_at_ms) return;
    static _Thread_local int64_t logged_ms;
    static _Thread_local long unlogged;
    int n = conns_sweep(&w->conns, now_ms, &w->sweep_at_ms);
    if (!n) return;
    metrics_inc(M_SLOW_CLOSED, (uint64_t)n);
    unlogged += n;
    if (now_ms - logged_ms >= 1000) {
        log_info("http: cut off %ld connection(s) too slow to send their request", unlogged);
        logged_ms = now_ms;
        unlogged = 0;
    }
}

void http_turn_hook(void *arg, int64_t now_ms) {
    struct http_worker *w = arg;
    if (w->daemon) sweep(w, now_ms);
    if (!w->daemon || (!w->resumed && now_ms < w->run_at_ms)) return;
    w->resumed = 0;
    w->run_at_ms = INT64_MAX;
    run_daemon(w);
}

void http_bind(struct http_worker *w) { self = w; }

struct http_worker *http_worker_new(const struct gw_config *cfg, struct loop *l) {
    if (atomic_load(&nworkers) == 0)
        metrics_add_source("lockgate_http_in_flight", "Requests being served", "gauge",
                           in_flight_gauge);
    if (atomic_load(&nworkers) == HTTP_MAX_WORKERS) {
        log_error("http: more than %d workers", HTTP_MAX_WORKERS);
        return NULL;
    }
    struct addrinfo hints = {.ai_family = AF_UNSPEC,
                             .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_PASSIVE | AI_NUMERICSERV};
    struct addrinfo *ai;
    char port[8];
    snprintf(port, sizeof port, "%d", cfg->listen_port);
    int rc = getaddrinfo(cfg->listen_host, port, &hints, &ai);
    if (rc != 0) {
        log_error("http: cannot resolve %s: %s", cfg->listen_host, gai_strerror(rc));
        return NULL;
    }
    unsigned limit = connection_limit(cfg);
    struct MHD_Daemon *d = daemon_start(cfg, ai, limit);
    freeaddrinfo(ai);
    if (!d) {
        log_error("http: cannot listen on %s:%d", cfg->listen_host, cfg->listen_port);
        return NULL;
    }
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(d, MHD_DAEMON_INFO_EPOLL_FD);
    if (!di) {
        log_error("http: libmicrohttpd has no epoll descriptor");
        MHD_stop_daemon(d);
        return NULL;
    }
    struct http_worker *w = alloc_check(calloc(1, sizeof *w));
    conns_init(&w->conns, cfg->header_timeout_ms, cfg->body_timeout_ms, HTTP_IDLE_TIMEOUT_S * 1000,
               HTTP_IDLE_TIMEOUT_S * 1000);
    w->sweep_at_ms = INT64_MAX;
    w->conn_limit = limit;
    w->daemon = d;
    w->loop = l;
    w->mhd_fd = di->epoll_fd;
    w->run_at_ms = 0;
    if (loop_fd(l, w->mhd_fd, EPOLLIN, on_daemon_ready, w) < 0)
        fatal("http: cannot watch the daemon's epoll: %s", strerror(errno));
    workers[atomic_load(&nworkers)] = w;
    atomic_fetch_add(&nworkers, 1);
    return w;
}
int http_client_fd(struct gw_request *req) {
    const union MHD_ConnectionInfo *ci =
        req->orphaned ? NULL
                      : MHD_get_connection_info(req->conn, MHD_CONNECTION_INFO_CONNECTION_FD);
    return ci ? ci->connect_fd : -1;
}

int http_client_gone(struct gw_request *req) {
    return req->orphaned || delivery_peer_shut(http_client_fd(req));
}

void http_quiesce(void) {
    atomic_store(&shutting_down, 1);
    if (self && self->daemon) {
        MHD_socket sock = MHD_quiesce_daemon(self->daemon);
        if (sock != MHD_INVALID_SOCKET) close(sock);
    }
}

void http_drain(int timeout_ms) {
    for (int waited = 0; http_in_flight() > 0 && waited < timeout_ms; waited += 10)
        usleep(10 * 1000);
}

/* libmicrohttpd 0.9.75 aborts the process (MHD_PANIC) when a daemon is
 * stopped with a connection still suspended.  Held-back connections are
 * resumed (they only wait for their client to read).  A request still
 * owed an answer after workers_stop's drains (seen once in CI: an id
 * request under load when a gateway restarted) keeps its connection
 * suspended: the daemon is then left to the process's exit, which closes
 * every socket, rather than aborting it. */
void http_stop(void) {
    if (!self || !self->daemon) return;
    loop_fd(self->loop, self->mhd_fd, 0, NULL, NULL);
    for (struct conn *c = self->conns.head[CONN_THROTTLED]; c; c = c->next) {
        struct gw_request *req = c->held;
        if (!req || !req->suspended) continue;
        req->suspended = 0;
        MHD_resume_connection(c->mhd);
    }
    long owed = atomic_load(&self->in_flight);
    if (owed > 0)
        log_warn("http: %ld requests still owed an answer at the stop: their connections close "
                 "with the process",
                 owed);
    else
        MHD_stop_daemon(self->daemon);
    self->daemon = NULL;
}
