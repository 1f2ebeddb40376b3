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
 * suspended, and libmicrohttpd never frees it under the callback's feet. */
#define _GNU_SOURCE /* POLLRDHUP */
#include "server/http.h"
#include "server/log.h"
#include "server/metrics.h"
#include "server/reply.h"
#include "handlers/routes.h"

#include <arpa/inet.h>
#include <cjson/cJSON.h>
#include <microhttpd.h>
#include <netdb.h>
#include <poll.h>
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

void http_reply_ready(struct gw_request *req) {
    pthread_mutex_lock(&req->mu);
    req->done = 1;
    int resume = req->suspended;
    req->suspended = 0;
    if (resume) MHD_resume_connection(req->conn);
    pthread_mutex_unlock(&req->mu);
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
    pthread_mutex_destroy(&req->mu);
    if (req->dispatched) atomic_fetch_sub(&in_flight, 1);
    free(req);
}

/* Routes req and runs its handler, or answers 404/405/413 itself. */
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
    } else if (req->body_too_large) {
        reply_problem(req, CODE_PAYLOAD_TOO_LARGE, "the body is over %d bytes", HTTP_BODY_MAX);
    } else {
        gw_routes[req->route].handler(req);
    }
    /* Handlers copy what they need out of the body while they run: a
     * request that now waits for Redis, or for a lock, need not keep it. */
    cJSON_Delete(req->json);
    req->json = NULL;
    free(req->body);
    req->body = NULL;
}

/* Content-Length headers seen on a request: how many, whether they
 * disagree, and whether the (first) one passes the cap.  libmicrohttpd
 * rejects non-numeric values itself. */
struct length_check {
    int count;
    int differ;
    int too_large;
    char first[32];
};

static enum MHD_Result count_lengths(void *cls, enum MHD_ValueKind kind, const char *key,
                                     const char *value) {
    struct length_check *lc = cls;
    if (strcasecmp(key, MHD_HTTP_HEADER_CONTENT_LENGTH) != 0 || !value) return MHD_YES;
    while (*value == '0' && value[1]) value++; /* leading zeros mean nothing */
    if (lc->count++ == 0) {
        snprintf(lc->first, sizeof lc->first, "%s", value);
        lc->too_large = strspn(value, "0123456789") == strlen(value) &&
                        (strlen(value) > 9 || atol(value) > HTTP_BODY_MAX);
    } else if (strcmp(lc->first, value) != 0) {
        lc->differ = 1;
    }
    return MHD_YES;
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
        struct length_check lc = {0};
        MHD_get_connection_values(conn, MHD_HEADER_KIND, count_lengths, &lc);
        if (lc.count > 1 && lc.differ) {
            /* Two framings of one body: refuse, and close (RFC 9112 6.3). */
            dispatch_early(req);
            reply_header(req, "Connection", "close");
            reply_problem(req, CODE_INVALID_FIELD, "conflicting Content-Length headers");
            return send_reply(req);
        }
        if (lc.count && lc.too_large) {
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
    if (req->sent && toe != MHD_REQUEST_TERMINATED_COMPLETED_OK && req->on_undelivered)
        req->on_undelivered(req);
    if (req->status)
        metrics_observe_request(req->route, req->status, (now_ns() - req->start_ns) / 1000);
    request_free(req);
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
                     MHD_USE_ERROR_LOG;
    if (ai->ai_family == AF_INET6) flags |= MHD_USE_IPv6;
    daemon_ = MHD_start_daemon(
        flags, (uint16_t)cfg->listen_port, NULL, NULL, on_request, NULL, MHD_OPTION_EXTERNAL_LOGGER,
        mhd_log, NULL, MHD_OPTION_SOCK_ADDR, ai->ai_addr, MHD_OPTION_THREAD_POOL_SIZE,
        (unsigned)cfg->threads, MHD_OPTION_CONNECTION_LIMIT, (unsigned)cfg->max_connections,
        MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)60, MHD_OPTION_CONNECTION_MEMORY_LIMIT,
        (size_t)cfg->connection_memory_kib * 1024, MHD_OPTION_LISTENING_ADDRESS_REUSE, (unsigned)1,
        MHD_OPTION_NOTIFY_COMPLETED, on_completed, NULL, MHD_OPTION_UNESCAPE_CALLBACK, keep_escaped,
        NULL, MHD_OPTION_END);
    freeaddrinfo(ai);
    if (!daemon_) {
        log_error("http: cannot listen on %s:%d", cfg->listen_host, cfg->listen_port);
        return -1;
    }
    return 0;
}

int http_client_fd(struct gw_request *req) {
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(req->conn, MHD_CONNECTION_INFO_CONNECTION_FD);
    return ci ? ci->connect_fd : -1;
}

int http_client_gone(struct gw_request *req) {
    int fd = http_client_fd(req);
    if (fd < 0) return 0;
    struct pollfd p = {.fd = fd, .events = POLLRDHUP};
    return poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR));
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
