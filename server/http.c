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
 * and when the client had sent its FIN before the answer went out and its
 * TCP then resets the connection (delivery.h). */
#include "server/http.h"
#include "server/accept.h"
#include "server/body.h"
#include "server/delivery.h"
#include "server/log.h"
#include "server/loop.h"
#include "common/alloc.h"
#include "common/fatal.h"
#include "server/metrics.h"
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
#include <sys/epoll.h>
#include <unistd.h>

/* One worker's daemon and its state. */
struct http_worker {
    struct MHD_Daemon *daemon; /* external-epoll mode, on this worker's loop */
    struct loop *loop;         /* the worker's loop */
    int mhd_fd;                /* the daemon's epoll descriptor */
    int resumed;               /* a connection was resumed in this turn */
    int64_t run_at_ms;         /* libmicrohttpd wants MHD_run by then */
    atomic_long in_flight;     /* requests dispatched and not ended */
};


/* Who may call what (http_set_gate): asked after routing, before the
 * handler. */
static int (*gate)(struct gw_request *req);

void http_set_gate(int (*fn)(struct gw_request *req)) { gate = fn; }
static _Thread_local struct http_worker *self;
static struct http_worker *workers[HTTP_MAX_WORKERS];
static atomic_int nworkers;
static atomic_int shutting_down;

static int64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

int http_shutting_down(void) { return atomic_load(&shutting_down); }

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

/* Queues the reply req holds.  Returns MHD_NO only when libmicrohttpd
 * cannot take it (out of memory): the connection is then closed. */
static enum MHD_Result send_reply(struct gw_request *req) {
    char *body = req->resp;
    req->resp = NULL;
    req->sent = 1;
    struct MHD_Response *r =
        MHD_create_response_from_buffer(req->resp_len, body, MHD_RESPMEM_MUST_FREE);
    if (!r) {
        free(body);
        return MHD_NO;
    }
    if (req->content_type) MHD_add_response_header(r, "Content-Type", req->content_type);
    for (int i = 0; i < req->nheaders; i++)
        MHD_add_response_header(r, req->headers[i].name, req->headers[i].value);
    enum MHD_Result ret = MHD_queue_response(req->conn, (unsigned)req->status, r);
    MHD_destroy_response(r);
    return ret;
}

static void request_end(struct gw_request *req, int delivered, int fd);

/* req->on_ready: the reply is complete. */
static void reply_ready(struct gw_request *req) {
    if (req->suspended) {
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

static void request_free(struct gw_request *req) {
    if (req->ctx_free) req->ctx_free(req->ctx);
    for (int i = 0; i < req->nheaders; i++) free(req->headers[i].value);
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
    if (req->status)
        metrics_observe_request(req->route, req->status, (now_ns() - req->start_ns) / 1000);
    if (req->dispatched) in_flight_add(-1);
    req->conn = NULL;
    if (req->on_undelivered && !delivered) {
        give_back(req,
                  req->sent ? "the answer could not be sent" : "the client left before the answer");
    } else if (req->on_undelivered && !tls_enabled() && delivery_peer_shut(fd)) {
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

/* Routes req and runs its handler, or answers 404/405/406/413 itself. */
static void dispatch(struct gw_request *req, const char *method) {
    req->dispatched = 1;
    in_flight_add(1);
    req->route = router_match(router_routes, router_routes_count, method, req->path, &req->match);
    if (req->route == ROUTER_NOT_FOUND) {
        reply_problem(req, CODE_NOT_FOUND, "no route for %.200s", req->path);
    } else if (req->route == ROUTER_BAD_METHOD) {
        reply_header(req, "Allow", req->match.allow);
        reply_problem(req, CODE_METHOD_NOT_ALLOWED, "%.200s allows %s", req->path,
                      req->match.allow);
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

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url,
                                  const char *method, const char *version, const char *upload_data,
                                  size_t *upload_data_size, void **con_cls) {
    struct gw_request *req = *con_cls;

    if (!req) { /* headers are in */
        req = request_new(conn, url);
        if (!req) return MHD_NO;
        *con_cls = req;
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
        if (h.cl_count && h.cl_too_large) {
            req->body_too_large = 1; /* answer before reading it */
            dispatch_early(req);
            reply_problem(req, CODE_PAYLOAD_TOO_LARGE, "the body is over %d bytes", HTTP_BODY_MAX);
            return send_reply(req);
        }
        return MHD_YES;
    }

    if (*upload_data_size) { /* a piece of the body */
        size_t n = *upload_data_size;
        *upload_data_size = 0;
        if (req->body_too_large || req->dispatched) return MHD_YES;
        if (req->body_len + n > HTTP_BODY_MAX) {
            req->body_too_large = 1;
            return MHD_YES;
        }
        if (req->body_len + n + 1 > req->body_cap) {
            /* Grown as the body comes, not HTTP_BODY_MAX at once: a waiting
             * request keeps its body for as long as it waits. */
            size_t cap = req->body_cap ? req->body_cap : 256;
            while (cap < req->body_len + n + 1) cap *= 2;
            if (cap > HTTP_BODY_MAX + 1) cap = HTTP_BODY_MAX + 1;
            char *grown = realloc(req->body, cap);
            if (!grown) return MHD_NO;
            req->body = grown;
            req->body_cap = cap;
        }
        memcpy(req->body + req->body_len, upload_data, n);
        req->body_len += n;
        req->body[req->body_len] = '\0';
        return MHD_YES;
    }

    if (!req->dispatched) dispatch(req, method); /* the body is complete */

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
    if (!req) return;
    *con_cls = NULL;
    /* Closed (the client reset, the gateway stopping) while its reply is
     * still owed, between on_request's two calls: the callback still has
     * it, so http_reply_ready ends it. */
    if (req->dispatched && !req->done) {
        req->orphaned = 1;
        return;
    }
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
    request_end(req, req->sent && toe == MHD_REQUEST_TERMINATED_COMPLETED_OK,
                ci ? ci->connect_fd : -1);
}

/* The path arrives percent-encoded: names are decoded segment by segment
 * (names.c), so that "%2F" can never split a name in two.  (Query values
 * too: http_query decodes them.) */
static size_t keep_escaped(void *cls, struct MHD_Connection *c, char *s) { return strlen(s); }

static void mhd_log(void *cls, const char *fmt, va_list ap) {
    char buf[256];
    vsnprintf(buf, sizeof buf, fmt, ap);
    buf[strcspn(buf, "\n")] = '\0';
    log_debug("http: %s", buf);
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
 * (bench/RESULTS.md); 4 KiB still holds request headers of ~3 KiB. */
/* --max-connections-per-ip, counted for the whole gateway (peers.h). */
static enum MHD_Result on_accept(void *cls, const struct sockaddr *addr, socklen_t len) {
    (void)cls;
    return peers_admit(addr, len) ? MHD_YES : MHD_NO;
}

static void on_connection(void *cls, struct MHD_Connection *conn, void **socket_context,
                          enum MHD_ConnectionNotificationCode code) {
    (void)cls;
    (void)socket_context;
    if (code != MHD_CONNECTION_NOTIFY_CLOSED) return;
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    if (ci) peers_leave(ci->client_addr);
}

static struct MHD_Daemon *daemon_start(const struct gw_config *cfg, const struct addrinfo *ai) {
    unsigned flags =
        MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ERROR_LOG | tls_daemon_flags();
    if (ai->ai_family == AF_INET6) flags |= MHD_USE_IPv6;
    int per_ip = cfg->max_connections_per_ip > 0;
    peers_init(cfg->max_connections_per_ip);
    return MHD_start_daemon(
        flags, (uint16_t)cfg->listen_port, per_ip ? on_accept : NULL, NULL, on_request, NULL,
        MHD_OPTION_EXTERNAL_LOGGER, mhd_log, NULL, MHD_OPTION_SOCK_ADDR, ai->ai_addr,
        MHD_OPTION_CONNECTION_LIMIT, (unsigned)cfg->max_connections, MHD_OPTION_CONNECTION_TIMEOUT,
        (unsigned)60, MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)cfg->connection_memory_kib * 1024,
        MHD_OPTION_LISTENING_ADDRESS_REUSE, (unsigned)1, MHD_OPTION_NOTIFY_COMPLETED, on_completed,
        NULL, MHD_OPTION_NOTIFY_CONNECTION, per_ip ? on_connection : NULL, NULL,
        MHD_OPTION_UNESCAPE_CALLBACK, keep_escaped, NULL, MHD_OPTION_ARRAY, tls_daemon_options(),
        MHD_OPTION_END);
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

void http_turn_hook(void *arg, int64_t now_ms) {
    struct http_worker *w = arg;
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
    struct MHD_Daemon *d = daemon_start(cfg, ai);
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

void http_stop(void) {
    if (!self || !self->daemon) return;
    loop_fd(self->loop, self->mhd_fd, 0, NULL, NULL);
    MHD_stop_daemon(self->daemon);
    self->daemon = NULL;
}
