/* http.c -- libmicrohttpd glue: accumulate, route, dispatch, suspend,
 * resume, send.  See http.h for the contract.
 *
 * The hand-over with the Redis thread is the one subtle part.  A handler
 * may start a Redis call whose reply arrives (on the Redis thread) before
 * the handler has even returned.  So the reply side and the dispatch side
 * meet under req->mu: whoever comes second acts.  If the reply is already
 * there when the handler returns, the response is queued at once; if not,
 * the connection is suspended *while holding mu*, and the reply side
 * resumes it.  A request with a Redis call outstanding is therefore always
 * suspended, and libmicrohttpd never frees it under the callback's feet
 * -- except in the one poll turn described at on_request's end, which is
 * why on_completed leaves a request whose reply is still owed to
 * http_reply_ready (orphaned).
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
#include "server/metrics.h"
#include "server/reply.h"
#include "server/tls.h"
#include "handlers/access.h"
#include "handlers/routes.h"

#include <arpa/inet.h>
#include <cjson/cJSON.h>
#include <microhttpd.h>
#include <netdb.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

static struct MHD_Daemon *daemon_;
static atomic_int shutting_down;
static atomic_long in_flight;

static int64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

int http_shutting_down(void) { return atomic_load(&shutting_down); }
long http_in_flight(void) { return atomic_load(&in_flight); }

/* The in-flight gauge for /metrics: read by the metrics layer through
 * its source hook, so that it needs nothing from this file. */
static uint64_t in_flight_gauge(void) {
    long n = http_in_flight();
    return n > 0 ? (uint64_t)n : 0;
}

const char *http_header(struct gw_request *req, const char *name) {
    return MHD_lookup_connection_value(req->conn, MHD_HEADER_KIND, name);
}

const char *http_query(struct gw_request *req, const char *name) {
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

void http_reply_ready(struct gw_request *req) {
    pthread_mutex_lock(&req->mu);
    req->done = 1;
    int resume = req->suspended, orphaned = req->orphaned;
    req->suspended = 0;
    if (resume) MHD_resume_connection(req->conn);
    pthread_mutex_unlock(&req->mu);
    if (orphaned) request_end(req, 0, -1);
}

static struct gw_request *request_new(struct MHD_Connection *conn, const char *url) {
    struct gw_request *req = calloc(1, sizeof *req);
    if (!req) return NULL;
    req->conn = conn;
    req->route = -1;
    req->start_ns = now_ns();
    req->path = strdup(url);
    if (!req->path) {
        free(req);
        return NULL;
    }
    pthread_mutex_init(&req->mu, NULL);
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
    pthread_mutex_destroy(&req->mu);
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
    if (req->dispatched) atomic_fetch_sub(&in_flight, 1);
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
    const char *const *types = gw_routes[req->route].produces;
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
    atomic_fetch_add(&in_flight, 1);
    req->route = router_match(gw_routes, gw_routes_count, method, req->path, &req->match);
    if (req->route == ROUTER_NOT_FOUND) {
        reply_problem(req, CODE_NOT_FOUND, "no route for %.200s", req->path);
    } else if (req->route == ROUTER_BAD_METHOD) {
        reply_header(req, "Allow", req->match.allow);
        reply_problem(req, CODE_METHOD_NOT_ALLOWED, "%.200s allows %s", req->path,
                      req->match.allow);
    } else if (access_or_reply(req) != GW_OK) {
        /* refused: 401 or 403 */
    } else if (req->body_too_large) {
        reply_problem(req, CODE_PAYLOAD_TOO_LARGE, "the body is over %d bytes", HTTP_BODY_MAX);
    } else if (media_or_reply(req) == GW_OK) {
        gw_routes[req->route].handler(req);
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
    atomic_fetch_add(&in_flight, 1);
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

    pthread_mutex_lock(&req->mu);
    if (req->done) {
        pthread_mutex_unlock(&req->mu);
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
        pthread_mutex_unlock(&req->mu);
        return MHD_YES;
    }
    req->suspended = 1;
    MHD_suspend_connection(conn);
    pthread_mutex_unlock(&req->mu);
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
    pthread_mutex_lock(&req->mu);
    int owed = req->dispatched && !req->done;
    if (owed) req->orphaned = 1;
    pthread_mutex_unlock(&req->mu);
    if (owed) return;
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
    request_end(req, req->sent && toe == MHD_REQUEST_TERMINATED_COMPLETED_OK,
                ci ? ci->connect_fd : -1);
}

/* The path arrives percent-encoded: names are decoded segment by segment
 * (names.c), so that "%2F" can never split a name in two. */
static size_t keep_escaped(void *cls, struct MHD_Connection *c, char *s) { return strlen(s); }

static void mhd_log(void *cls, const char *fmt, va_list ap) {
    char buf[256];
    vsnprintf(buf, sizeof buf, fmt, ap);
    buf[strcspn(buf, "\n")] = '\0';
    log_debug("http: %s", buf);
}

int http_start(const struct gw_config *cfg) {
    metrics_add_source("lockgate_http_in_flight", "Requests being served", "gauge",
                       in_flight_gauge);
    struct addrinfo hints = {.ai_family = AF_UNSPEC,
                             .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_PASSIVE | AI_NUMERICSERV};
    struct addrinfo *ai;
    char port[8];
    snprintf(port, sizeof port, "%d", cfg->listen_port);
    int rc = getaddrinfo(cfg->listen_host, port, &hints, &ai);
    if (rc != 0) {
        log_error("http: cannot resolve %s: %s", cfg->listen_host, gai_strerror(rc));
        return -1;
    }
    /* poll(), not epoll: in epoll mode libmicrohttpd takes a connection out
     * of its epoll set on every suspend and puts it back on resume (two
     * epoll_ctl per request) and reads each socket until EAGAIN (one failed
     * recv per request).  A suspended connection is simply left out of the
     * poll set.  Measured with bench/locks.lua at 50 connections: gateway
     * CPU per request 42-45 us with epoll, 32-33 us with poll; at 1000
     * connections 38 us against 29-30 us (bench/RESULTS.md).
     *
     * Each connection has one memory pool of --connection-memory-kib for its
     * request line, headers and response headers.  A waiting request keeps
     * its pool, and the pool's first page is always written (the request is
     * read into it): at 16 KiB 10,000 waiters took 73 MiB, at 4 KiB 64
     * (bench/RESULTS.md); 4 KiB still holds request headers of ~3 KiB. */
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL | MHD_ALLOW_SUSPEND_RESUME |
                     MHD_USE_ERROR_LOG | tls_daemon_flags();
    if (ai->ai_family == AF_INET6) flags |= MHD_USE_IPv6;
    daemon_ = MHD_start_daemon(
        flags, (uint16_t)cfg->listen_port, NULL, NULL, on_request, NULL, MHD_OPTION_EXTERNAL_LOGGER,
        mhd_log, NULL, MHD_OPTION_SOCK_ADDR, ai->ai_addr, MHD_OPTION_THREAD_POOL_SIZE,
        (unsigned)cfg->threads, MHD_OPTION_CONNECTION_LIMIT, (unsigned)cfg->max_connections,
        MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)60, MHD_OPTION_CONNECTION_MEMORY_LIMIT,
        (size_t)cfg->connection_memory_kib * 1024, MHD_OPTION_LISTENING_ADDRESS_REUSE, (unsigned)1,
        MHD_OPTION_NOTIFY_COMPLETED, on_completed, NULL, MHD_OPTION_UNESCAPE_CALLBACK, keep_escaped,
        NULL, MHD_OPTION_PER_IP_CONNECTION_LIMIT, (unsigned)cfg->max_connections_per_ip,
        MHD_OPTION_ARRAY, tls_daemon_options(), MHD_OPTION_END);
    freeaddrinfo(ai);
    if (!daemon_) {
        log_error("http: cannot listen on %s:%d", cfg->listen_host, cfg->listen_port);
        return -1;
    }
    return 0;
}

int http_client_fd(struct gw_request *req) {
    pthread_mutex_lock(&req->mu);
    const union MHD_ConnectionInfo *ci =
        req->orphaned ? NULL
                      : MHD_get_connection_info(req->conn, MHD_CONNECTION_INFO_CONNECTION_FD);
    int fd = ci ? ci->connect_fd : -1;
    pthread_mutex_unlock(&req->mu);
    return fd;
}

int http_client_gone(struct gw_request *req) {
    pthread_mutex_lock(&req->mu);
    int orphaned = req->orphaned;
    pthread_mutex_unlock(&req->mu);
    return orphaned || delivery_peer_shut(http_client_fd(req));
}

void http_quiesce(void) {
    atomic_store(&shutting_down, 1);
    if (daemon_) {
        MHD_socket s = MHD_quiesce_daemon(daemon_);
        if (s != MHD_INVALID_SOCKET) close(s);
    }
}

void http_drain(int timeout_ms) {
    for (int waited = 0; http_in_flight() > 0 && waited < timeout_ms; waited += 10)
        usleep(10 * 1000);
}

void http_stop(void) {
    if (!daemon_) return;
    MHD_stop_daemon(daemon_);
    daemon_ = NULL;
}
