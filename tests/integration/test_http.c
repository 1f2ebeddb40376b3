/* test_http.c -- HTTP/1.1 as clients and proxies speak it, on raw sockets:
 * pipelining (in order, whatever the mix, a waiting acquire included, in
 * each Redis mode), half-close, hang-ups that must not leave a holder,
 * Content-Length with Transfer-Encoding (nothing smuggled runs), transfer
 * codings, HEAD, Host, and Accept with q-values.  Pipelining is run in
 * every Redis mode: single, quorum, and
 * Sentinel with --min-replicas-ack. */
#include "tests/integration/harness.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

static struct h_redis redis;
static struct h_gw gw;

/* ============================================================================
 * Raw connections and a small response reader
 * ========================================================================= */

/* Sends s and closes, the FIN in the same segment as the request's last
 * bytes (TCP_CORK holds the data until close flushes both): the client is
 * gone before the gateway can answer.  A client that closes after the
 * answer reached its TCP cannot be told from one that read it
 * (docs/clients.md), so the test does not leave that to the scheduler. */
static void send_and_hang_up(int fd, const char *s);

static void send_all(int fd, const char *s) {
    size_t len = strlen(s), sent = 0;
    while (sent < len) {
        ssize_t w = send(fd, s + sent, len - sent, MSG_NOSIGNAL);
        if (w <= 0) return;
        sent += (size_t)w;
    }
}

static void send_and_hang_up(int fd, const char *s) {
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_CORK, &one, sizeof one);
    send_all(fd, s);
    close(fd);
}

#define MAX_RESP 32

struct resp {
    int status;
    char head[1024]; /* status line and header fields */
    char body[1024]; /* body, NUL-terminated (cut when longer) */
};

struct batch {
    struct resp r[MAX_RESP];
    int n;   /* complete responses read */
    int eof; /* the server closed the connection */
};

/* A response header's value in r (static buffer), or NULL. */
static const char *hdr(const struct resp *r, const char *name) {
    static char out[256];
    const char *p = r->head;
    size_t nl = strlen(name);
    while ((p = strstr(p, "\r\n")) != NULL) {
        p += 2;
        if (strncasecmp(p, name, nl) == 0 && p[nl] == ':') {
            const char *v = p + nl + 1;
            v += strspn(v, " ");
            size_t len = strcspn(v, "\r");
            snprintf(out, sizeof out, "%.*s", (int)len, v);
            return out;
        }
    }
    return NULL;
}

/* Reads until `want` responses are complete, the server closes, or
 * timeout_ms passes.  head_mask bit i: response i answers a HEAD (no body
 * whatever its Content-Length). */
static void read_batch(int fd, int want, unsigned head_mask, int timeout_ms, struct batch *b) {
    static char buf[256 * 1024];
    size_t got = 0, used = 0;
    memset(b, 0, sizeof *b);
    long long end = h_now_ms() + timeout_ms;
    while (b->n < want) {
        /* Parse what is there. */
        char *start = buf + used, *hend;
        buf[got] = '\0';
        if ((hend = strstr(start, "\r\n\r\n")) != NULL) {
            struct resp *r = &b->r[b->n];
            size_t hlen = (size_t)(hend - start);
            snprintf(r->head, sizeof r->head, "%.*s", (int)hlen, start);
            r->status = atoi(start + 9);
            const char *cl = hdr(r, "Content-Length");
            size_t blen = (head_mask >> b->n) & 1 ? 0 : cl ? (size_t)atol(cl) : 0;
            if (got - used >= hlen + 4 + blen) {
                snprintf(r->body, sizeof r->body, "%.*s", (int)blen, hend + 4);
                used += hlen + 4 + blen;
                b->n++;
                continue;
            }
        }
        int left = (int)(end - h_now_ms());
        if (left <= 0) break;
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, left) <= 0) break;
        ssize_t n = recv(fd, buf + got, sizeof buf - 1 - got, 0);
        if (n <= 0) {
            b->eof = 1;
            break;
        }
        got += (size_t)n;
    }
    if (!b->eof && b->n == want) { /* anything more, or a close? */
        struct pollfd p = {.fd = fd, .events = POLLIN};
        char c;
        if (poll(&p, 1, 200) > 0 && recv(fd, &c, 1, MSG_PEEK) == 0) b->eof = 1;
    }
}

/* A request in raw bytes, appended to out. */
static void add_req(char *out, const char *method, const char *path, const char *extra,
                    const char *body) {
    char *p = out + strlen(out);
    p += sprintf(p, "%s %s HTTP/1.1\r\nHost: test\r\n%s", method, path, extra ? extra : "");
    if (body)
        sprintf(p, "Content-Type: application/json\r\nContent-Length: %zu\r\n\r\n%s", strlen(body),
                body);
    else
        sprintf(p, "\r\n");
}

static long long held(int port, const char *kind, const char *name) {
    char path[128];
    snprintf(path, sizeof path, "/v1/%s/%s", kind, name);
    struct h_resp r = h_http("GET", port, path, NULL, NULL, NULL);
    long long st = r.status;
    h_resp_free(&r);
    return st;
}

/* ============================================================================
 * Pipelining
 * ========================================================================= */

/* 14 requests at once, with a waiting acquire in the middle: every one is
 * answered, in order, on the open connection.  Half-closed after sending
 * when half_close is set: then the server closes only after the last. */
static void pipelined_mix(int port, const char *tag, int half_close) {
    char name[64], busy[64], path[96], busy_path[96], req[8192] = "";
    snprintf(name, sizeof name, "pipe-%s-%d", tag, half_close);
    snprintf(busy, sizeof busy, "pipe-busy-%s-%d", tag, half_close);
    snprintf(path, sizeof path, "/v1/locks/%s", name);
    snprintf(busy_path, sizeof busy_path, "/v1/locks/%s", busy);

    /* Someone else holds `busy` for 1.5 s: the waiting acquire below gets it
     * when that lease runs out. */
    struct h_resp pre = h_http("POST", port, busy_path, NULL, "{\"ttl_ms\":1500}", NULL);
    CHECK_EQ_INT(pre.status, 201);
    h_resp_free(&pre);

    const char *tok = "Lock-Token: pipelined-token-000000000001\r\n";
    add_req(req, "POST", path, tok, "{\"ttl_ms\":30000}");                           /* 0 201 */
    add_req(req, "GET", path, NULL, NULL);                                           /* 1 200 */
    add_req(req, "POST", "/v1/ids/pipe", NULL, "{}");                                /* 2 200 */
    add_req(req, "GET", "/healthz", NULL, NULL);                                     /* 3 200 */
    add_req(req, "POST", path, "Lock-Token: someone-else-token-00000001\r\n", "{}"); /* 4 409 */
    add_req(req, "GET", "/v1/ids/pipe", "Accept: text/plain\r\n", NULL);             /* 5 200 */
    add_req(req, "POST", busy_path, NULL, "{\"ttl_ms\":5000,\"wait_ms\":10000}");    /* 6 201 */
    add_req(req, "GET", busy_path, NULL, NULL);                                      /* 7 200 */
    add_req(req, "GET", "/readyz", NULL, NULL);                                      /* 8 200 */
    add_req(req, "PATCH", path, tok, "{\"ttl_ms\":20000}");                          /* 9 200 */
    add_req(req, "GET", "/nope", NULL, NULL);                                        /* 10 404 */
    add_req(req, "DELETE", path, tok, NULL);                                         /* 11 200 */
    add_req(req, "GET", path, NULL, NULL);                                           /* 12 404 */
    add_req(req, "POST", "/v1/semaphores/pipe-sem", NULL, "{\"ttl_ms\":500,\"limit\":3}"); /* 13 */
    /* Half-closed, the waiting acquire ends at once (docs/clients.md, "How the gateway speaks HTTP"). */
    int want[] = {201, 200, 200, 200, 409, 200, half_close ? 409 : 201,
                  200, 200, 200, 404, 200, 404, 201};
    enum { N = sizeof want / sizeof want[0] };

    int fd = h_connect(port);
    CHECK(fd >= 0);
    if (fd < 0) return;
    send_all(fd, req);
    if (half_close) shutdown(fd, SHUT_WR);
    struct batch b;
    read_batch(fd, N, 0, 15000, &b);
    close(fd);
    CHECK_EQ_INT(b.n, N);
    for (int i = 0; i < b.n && i < N; i++) {
        if (b.r[i].status != want[i])
            fprintf(stderr, "  [%s] response %d: %d, wanted %d: %s\n", tag, i, b.r[i].status,
                    want[i], b.r[i].body);
        CHECK_EQ_INT(b.r[i].status, want[i]);
    }
    if (b.n == N) {
        /* In order: each answer is the one to its own request. */
        CHECK(strstr(b.r[1].body, name) != NULL);
        CHECK(strstr(b.r[2].body, "\"namespace\":\"pipe\"") != NULL);
        CHECK(strstr(b.r[3].body, "\"ok\"") != NULL);
        CHECK(strstr(hdr(&b.r[5], "Content-Type"), "text/plain") != NULL);
        CHECK(strstr(b.r[6].body, half_close ? "went away" : busy) != NULL);
        CHECK(strstr(b.r[7].body, busy) != NULL);
        CHECK(strstr(b.r[9].body, "\"ttl_ms\":") != NULL);
        CHECK(strstr(b.r[11].body, "\"released\":true") != NULL);
    }
    /* Open connection: still open after the last answer; half-closed: closed. */
    CHECK_EQ_INT(b.eof, half_close);
}

static void test_pipelined_mix(void) {
    pipelined_mix(gw.port, "single", 0);
    pipelined_mix(gw.port, "single", 1);
}

/* 20 requests to Redis at once, nothing but the order to check. */
static void test_pipelined_twenty(void) {
    char req[16384] = "";
    for (int i = 0; i < 20; i++) {
        char path[64];
        snprintf(path, sizeof path, "/v1/locks/twenty-%d", i / 2);
        if (i % 2)
            add_req(req, "GET", path, NULL, NULL);
        else
            add_req(req, "POST", path, NULL, "{\"ttl_ms\":2000}");
    }
    int fd = h_connect(gw.port);
    send_all(fd, req);
    struct batch b;
    read_batch(fd, 20, 0, 10000, &b);
    close(fd);
    CHECK_EQ_INT(b.n, 20);
    for (int i = 0; i < b.n; i++) {
        char name[32];
        snprintf(name, sizeof name, "\"twenty-%d\"", i / 2);
        CHECK(strstr(b.r[i].body, name) != NULL);
        CHECK_EQ_INT(b.r[i].status, i % 2 ? 200 : 201);
    }
}

/* ============================================================================
 * Hang-ups and half-close
 * ========================================================================= */

/* 100 clients send an acquire and close at once: afterwards nobody holds
 * any of the locks, and /metrics counts 100 give-backs. */
static void test_hangups_leave_no_holder(void) {
    long long before = h_metric(&gw, "lockgate_given_back_total");
    CHECK(before >= 0);
    for (int i = 0; i < 100; i++) {
        char req[512] = "", path[64];
        snprintf(path, sizeof path, "/v1/locks/gone-%d", i);
        add_req(req, "POST", path, NULL, "{\"ttl_ms\":60000}");
        int fd = h_connect(gw.port);
        if (fd < 0) continue;
        send_and_hang_up(fd, req);
    }
    long long after = before;
    for (long long end = h_now_ms() + 15000; h_now_ms() < end && after < before + 100;) {
        h_sleep_ms(100);
        after = h_metric(&gw, "lockgate_given_back_total");
    }
    CHECK_EQ_INT(after - before, 100);
    int still = 0;
    for (int i = 0; i < 100; i++) {
        char name[32];
        snprintf(name, sizeof name, "gone-%d", i);
        still += held(gw.port, "locks", name) != 404;
    }
    CHECK_EQ_INT(still, 0);
}

/* The same for a shared lock, a semaphore, a client-chosen Lock-Token and
 * a re-entry (one level given back, the earlier hold kept). */
static void test_hangups_other_kinds(void) {
    struct h_resp r = h_http("POST", gw.port, "/v1/locks/gone-reenter",
                             "reenter-token-00000000000001", "{\"ttl_ms\":60000}", NULL);
    CHECK_EQ_INT(r.status, 201);
    h_resp_free(&r);
    long long before = h_metric(&gw, "lockgate_given_back_total");
    const char *reqs[][3] = {
        {"/v1/locks/gone-shared",    NULL,                                           "{\"ttl_ms\":60000,\"mode\":\"shared\"}"},
        {"/v1/semaphores/gone-sem",  NULL,                                           "{\"ttl_ms\":60000,\"limit\":2}"        },
        {"/v1/locks/gone-own-token", "Lock-Token: my-own-token-000000000000001\r\n",
         "{\"ttl_ms\":60000}"                                                                                                },
        {"/v1/locks/gone-reenter",   "Lock-Token: reenter-token-00000000000001\r\n",
         "{\"ttl_ms\":60000}"                                                                                                },
    };
    for (int i = 0; i < 4; i++) {
        char req[512] = "";
        add_req(req, "POST", reqs[i][0], reqs[i][1], reqs[i][2]);
        int fd = h_connect(gw.port);
        send_and_hang_up(fd, req);
    }
    long long after = before;
    for (long long end = h_now_ms() + 10000; h_now_ms() < end && after < before + 4;) {
        h_sleep_ms(100);
        after = h_metric(&gw, "lockgate_given_back_total");
    }
    CHECK_EQ_INT(after - before, 4);
    CHECK_EQ_INT(held(gw.port, "locks", "gone-shared"), 404);
    CHECK_EQ_INT(held(gw.port, "semaphores", "gone-sem"), 404);
    CHECK_EQ_INT(held(gw.port, "locks", "gone-own-token"), 404);
    /* The re-entry's level is given back; the first hold stays. */
    r = h_http("GET", gw.port, "/v1/locks/gone-reenter", NULL, NULL, NULL);
    CHECK_EQ_INT(r.status, 200);
    CHECK_EQ_INT(h_jint(&r, "count"), 1);
    h_resp_free(&r);
}

/* `printf 'POST ...' | nc -N`: the request, then a half-close.  It is
 * answered, and the lock it got stays held: the client has its token. */
static void test_half_close_answered(void) {
    long long before = h_metric(&gw, "lockgate_given_back_total");
    char req[512] = "";
    add_req(req, "POST", "/v1/locks/half", NULL, "{\"ttl_ms\":30000}");
    int fd = h_connect(gw.port);
    send_all(fd, req);
    shutdown(fd, SHUT_WR);
    struct batch b;
    read_batch(fd, 1, 0, 5000, &b);
    close(fd);
    CHECK_EQ_INT(b.n, 1);
    CHECK_EQ_INT(b.r[0].status, 201);
    CHECK(b.eof);
    h_sleep_ms(500); /* longer than the delivery watch needs on loopback */
    CHECK_EQ_INT(held(gw.port, "locks", "half"), 200);
    CHECK_EQ_INT(h_metric(&gw, "lockgate_given_back_total"), before);

    /* GET through a half-close too, and a waiting acquire: answered (a
     * half-closed client cannot be told from a gone one while it waits, so
     * the wait ends at once; docs/clients.md). */
    char req2[512] = "";
    add_req(req2, "GET", "/v1/locks/half", NULL, NULL);
    add_req(req2, "POST", "/v1/locks/half", NULL, "{\"ttl_ms\":1000,\"wait_ms\":5000}");
    fd = h_connect(gw.port);
    send_all(fd, req2);
    shutdown(fd, SHUT_WR);
    read_batch(fd, 2, 0, 8000, &b);
    close(fd);
    CHECK_EQ_INT(b.n, 2);
    CHECK_EQ_INT(b.r[0].status, 200);
    CHECK_EQ_INT(b.r[1].status, 409);
}

/* ============================================================================
 * Framing: no smuggling, transfer codings, Host
 * ========================================================================= */

static void test_cl_and_te_not_smuggled(void) {
    const char *req = "POST /v1/locks/smuggle-outer HTTP/1.1\r\nHost: test\r\n"
                      "Content-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n"
                      "0\r\n\r\n"
                      "POST /v1/locks/smuggled HTTP/1.1\r\nHost: test\r\n"
                      "Content-Length: 16\r\n\r\n{\"ttl_ms\":60000}";
    int fd = h_connect(gw.port);
    send_all(fd, req);
    struct batch b;
    read_batch(fd, 2, 0, 3000, &b);
    close(fd);
    CHECK_EQ_INT(b.n, 1);
    CHECK_EQ_INT(b.r[0].status, 400);
    CHECK(strstr(b.r[0].body, "\"invalid_request\"") != NULL);
    CHECK(hdr(&b.r[0], "Connection") && strcasecmp(hdr(&b.r[0], "Connection"), "close") == 0);
    CHECK(b.eof);
    h_sleep_ms(200);
    CHECK_EQ_INT(held(gw.port, "locks", "smuggled"), 404);
    CHECK_EQ_INT(held(gw.port, "locks", "smuggle-outer"), 404);
}

static void test_transfer_codings(void) {
    static const struct {
        const char *te;
        int status;
    } cases[] = {
        {"gzip, chunked", 501},
        {"gzip",          400}, /* not ending in chunked: no length can be known */
        {"chunked, gzip", 400},
        {"identity",      400},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char req[512];
        snprintf(req, sizeof req,
                 "POST /v1/locks/te-%zu HTTP/1.1\r\nHost: test\r\nTransfer-Encoding: %s\r\n\r\n"
                 "10\r\n{\"ttl_ms\":60000}\r\n0\r\n\r\n"
                 "GET /healthz HTTP/1.1\r\nHost: test\r\n\r\n",
                 i, cases[i].te);
        int fd = h_connect(gw.port);
        send_all(fd, req);
        struct batch b;
        read_batch(fd, 2, 0, 3000, &b);
        close(fd);
        CHECK_EQ_INT(b.n, 1);
        CHECK_EQ_INT(b.r[0].status, cases[i].status);
        CHECK(b.eof);
        char name[32];
        snprintf(name, sizeof name, "te-%zu", i);
        CHECK_EQ_INT(held(gw.port, "locks", name), 404);
    }
    /* chunked alone, any case, is read. */
    const char *ok =
        "POST /v1/locks/te-ok HTTP/1.1\r\nHost: test\r\nTransfer-Encoding: Chunked\r\n\r\n"
        "10\r\n{\"ttl_ms\":60000}\r\n0\r\n\r\n";
    int fd = h_connect(gw.port);
    send_all(fd, ok);
    struct batch b;
    read_batch(fd, 1, 0, 3000, &b);
    close(fd);
    CHECK_EQ_INT(b.r[0].status, 201);
    /* HTTP/1.0 has no Transfer-Encoding. */
    const char *old = "POST /v1/locks/te-10 HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n"
                      "10\r\n{\"ttl_ms\":60000}\r\n0\r\n\r\n";
    fd = h_connect(gw.port);
    send_all(fd, old);
    read_batch(fd, 1, 0, 3000, &b);
    close(fd);
    CHECK_EQ_INT(b.r[0].status, 400);
    CHECK_EQ_INT(held(gw.port, "locks", "te-10"), 404);
}

static void test_host(void) {
    static const struct {
        const char *req;
        int status;
    } cases[] = {
        {"GET /healthz HTTP/1.1\r\n\r\n",                           400},
        {"GET /healthz HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n",     400},
        {"GET /healthz HTTP/1.1\r\nHost: a b\r\n\r\n",              400},
        {"GET /healthz HTTP/1.1\r\nHost : a\r\n\r\n",               400},
        {"GET /healthz HTTP/1.1\r\nHost: example.com:8080\r\n\r\n", 200},
        {"GET /healthz HTTP/1.1\r\nHost: [::1]:80\r\n\r\n",         200},
        {"GET /healthz HTTP/1.1\r\nHost:\r\n\r\n",                  200}, /* empty is allowed */
        {"GET /healthz HTTP/1.0\r\n\r\n",                           200}, /* 1.0 needs none */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int fd = h_connect(gw.port);
        send_all(fd, cases[i].req);
        struct batch b;
        read_batch(fd, 1, 0, 3000, &b);
        close(fd);
        if (b.r[0].status != cases[i].status) fprintf(stderr, "  case %zu: %d\n", i, b.r[0].status);
        CHECK_EQ_INT(b.r[0].status, cases[i].status);
        if (cases[i].status == 400) CHECK(strstr(b.r[0].body, "\"invalid_request\"") != NULL);
    }
    /* A POST without Host acquires nothing. */
    const char *post = "POST /v1/locks/no-host HTTP/1.1\r\nContent-Length: 16\r\n\r\n"
                       "{\"ttl_ms\":60000}";
    int fd = h_connect(gw.port);
    send_all(fd, post);
    struct batch b;
    read_batch(fd, 1, 0, 3000, &b);
    close(fd);
    CHECK_EQ_INT(b.r[0].status, 400);
    CHECK_EQ_INT(held(gw.port, "locks", "no-host"), 404);
}

/* ============================================================================
 * HEAD and Accept
 * ========================================================================= */

static void test_head(void) {
    struct h_resp pre = h_http("POST", gw.port, "/v1/locks/head", NULL, "{\"ttl_ms\":30000}", NULL);
    CHECK_EQ_INT(pre.status, 201);
    h_resp_free(&pre);
    /* Each HEAD, then the same GET, pipelined: HEAD's answer has the GET's
     * status and headers and no body (else the next answer would not
     * parse). */
    static const char *paths[] = {
        "/healthz", "/v1/locks/head",          "/v1/locks/head-free",
        "/metrics", "/openapi.yaml",           "/v1/ids/head/392557725931798528",
        "/readyz",  "/v1/semaphores/head-free"};
    for (size_t i = 0; i < sizeof paths / sizeof paths[0]; i++) {
        char req[1024] = "";
        add_req(req, "HEAD", paths[i], NULL, NULL);
        add_req(req, "GET", paths[i], NULL, NULL);
        int fd = h_connect(gw.port);
        send_all(fd, req);
        struct batch b;
        read_batch(fd, 2, 1u, 5000, &b);
        close(fd);
        CHECK_EQ_INT(b.n, 2);
        CHECK_EQ_INT(b.r[0].status, b.r[1].status);
        CHECK(b.r[0].body[0] == '\0');
        const char *ct0 = hdr(&b.r[0], "Content-Type");
        char ct[128];
        snprintf(ct, sizeof ct, "%s", ct0 ? ct0 : "");
        CHECK_EQ_STR(ct, hdr(&b.r[1], "Content-Type") ? hdr(&b.r[1], "Content-Type") : "");
        /* /metrics changes between the two; the rest have equal lengths. */
        if (strcmp(paths[i], "/metrics") != 0) {
            char cl[32];
            snprintf(cl, sizeof cl, "%s", hdr(&b.r[0], "Content-Length") ?: "none");
            CHECK_EQ_STR(cl, hdr(&b.r[1], "Content-Length") ?: "none");
        }
    }
    /* Allow lists HEAD wherever GET is. */
    struct h_resp r = h_http("PUT", gw.port, "/healthz", NULL, NULL, NULL);
    CHECK_EQ_INT(r.status, 405);
    CHECK_EQ_STR(h_header(&r, "Allow"), "GET, HEAD");
    h_resp_free(&r);
    r = h_http("PUT", gw.port, "/v1/locks/x", NULL, NULL, NULL);
    CHECK_EQ_STR(h_header(&r, "Allow"), "POST, PATCH, DELETE, GET, HEAD");
    h_resp_free(&r);
}

static void test_accept(void) {
    struct h_resp r = h_http("GET", gw.port, "/v1/ids/acc", NULL, NULL,
                             "Accept: application/json;q=0.5, text/plain;q=0.9");
    CHECK_EQ_INT(r.status, 200);
    CHECK(strncmp(h_header(&r, "Content-Type"), "text/plain", 10) == 0);
    h_resp_free(&r);
    r = h_http("GET", gw.port, "/v1/ids/acc", NULL, NULL,
               "Accept: application/json;q=0.9, text/plain;q=0.5");
    CHECK_EQ_STR(h_header(&r, "Content-Type"), "application/json");
    h_resp_free(&r);
    r = h_http("GET", gw.port, "/v1/ids/acc", NULL, NULL, "Accept: text/*");
    CHECK(strncmp(h_header(&r, "Content-Type"), "text/plain", 10) == 0);
    h_resp_free(&r);
    r = h_http("GET", gw.port, "/v1/ids/acc", NULL, NULL, "Accept: text/html, */*;q=0.1");
    CHECK_EQ_STR(h_header(&r, "Content-Type"), "application/json");
    h_resp_free(&r);

    /* Nothing acceptable, said explicitly: 406, and nothing done. */
    long long issued = h_metric(&gw, "lockgate_ids_issued_total");
    r = h_http("GET", gw.port, "/v1/ids/acc", NULL, NULL, "Accept: text/html");
    CHECK_EQ_INT(r.status, 406);
    CHECK_EQ_STR(h_jcode(&r), "not_acceptable");
    h_resp_free(&r);
    r = h_http("POST", gw.port, "/v1/ids/acc", NULL, "{}",
               "Accept: text/plain;q=0, application/json;q=0");
    CHECK_EQ_INT(r.status, 406);
    h_resp_free(&r);
    CHECK_EQ_INT(h_metric(&gw, "lockgate_ids_issued_total"), issued);
    r = h_http("POST", gw.port, "/v1/locks/acc", NULL, "{\"ttl_ms\":30000}", "Accept: text/plain");
    CHECK_EQ_INT(r.status, 406);
    h_resp_free(&r);
    CHECK_EQ_INT(held(gw.port, "locks", "acc"), 404);
    r = h_http("POST", gw.port, "/v1/locks/acc", NULL, "{\"ttl_ms\":30000}",
               "Accept: application/*");
    CHECK_EQ_INT(r.status, 201);
    h_resp_free(&r);
}

/* ============================================================================
 * Another Redis mode: quorum
 * ========================================================================= */

static void test_pipelined_quorum_mode(void) {
    struct h_redis r[3];
    memset(r, 0, sizeof r);
    int up = 1;
    for (int i = 0; i < 3; i++) up = up && h_redis_start(&r[i], 0, NULL) == 0;
    CHECK(up);
    if (up) {
        struct h_gw g = {0};
        snprintf(g.redis_url, sizeof g.redis_url,
                 "redis://127.0.0.1:%d,redis://127.0.0.1:%d,redis://127.0.0.1:%d", r[0].port,
                 r[1].port, r[2].port);
        CHECK_EQ_INT(h_gw_up(&g, &redis, NULL), 0);
        pipelined_mix(g.port, "quorum", 0);
        pipelined_mix(g.port, "quorum", 1);
        /* A hang-up is given back on every master. */
        long long before = h_metric(&g, "lockgate_given_back_total");
        char req[512] = "";
        add_req(req, "POST", "/v1/locks/quorum-gone", NULL, "{\"ttl_ms\":60000}");
        int fd = h_connect(g.port);
        send_and_hang_up(fd, req);
        long long n = before;
        for (long long end = h_now_ms() + 5000; h_now_ms() < end && n < before + 1;) {
            h_sleep_ms(100);
            n = h_metric(&g, "lockgate_given_back_total");
        }
        CHECK_EQ_INT(n - before, 1);
        h_sleep_ms(200);
        CHECK_EQ_INT(held(g.port, "locks", "quorum-gone"), 404);
        CHECK_EQ_INT(h_gw_stop(&g, 8000), 0);
    }
    for (int i = 0; i < 3; i++) h_redis_stop(&r[i]);
}

/* Sentinel mode with replica acknowledgement: a master, a replica, one
 * sentinel; the gateway finds the master through it and WAITs for the
 * replica after each acquisition. */
static void test_pipelined_sentinel_acks(void) {
    struct h_redis m = {0}, rep = {0}, sen = {0};
    int up = h_redis_start(&m, 0, NULL) == 0 && h_replica_start(&rep, &m) == 0 &&
             h_sentinel_start(&sen, &m, "httpmaster", 1, 1000, 3000) == 0;
    CHECK(up);
    if (up) {
        struct h_gw g = {0};
        char flags[256];
        snprintf(flags, sizeof flags,
                 "--sentinel 127.0.0.1:%d --sentinel-master httpmaster --min-replicas-ack 1 "
                 "--replica-ack-timeout-ms 2000",
                 sen.port);
        CHECK_EQ_INT(h_gw_up(&g, &m, flags), 0);
        /* Ready once the sentinel has named the master and the replica
         * acknowledges: until then an acquire is 503. */
        long st = 0;
        for (long long end = h_now_ms() + 20000; st != 201 && h_now_ms() < end;) {
            struct h_resp r =
                h_http("POST", g.port, "/v1/locks/sentinel-ready", NULL, "{\"ttl_ms\":1000}", NULL);
            st = r.status;
            h_resp_free(&r);
            if (st != 201) h_sleep_ms(200);
        }
        CHECK_EQ_INT(st, 201);
        pipelined_mix(g.port, "sentinel", 0);
        pipelined_mix(g.port, "sentinel", 1);
        CHECK_EQ_INT(h_gw_stop(&g, 8000), 0);
    }
    h_redis_stop(&sen);
    h_redis_stop(&rep);
    h_redis_stop(&m);
}

/* Exit 0 on SIGTERM: under ASan and UBSan also no leak, no error. */
static void test_stops_clean(void) { CHECK_EQ_INT(h_gw_stop(&gw, 8000), 0); }

int main(void) {
    if (h_redis_start(&redis, 0, NULL) != 0 || h_gw_up(&gw, &redis, NULL) != 0) return 2;
    RUN(test_pipelined_mix);
    RUN(test_pipelined_twenty);
    RUN(test_hangups_leave_no_holder);
    RUN(test_hangups_other_kinds);
    RUN(test_half_close_answered);
    RUN(test_cl_and_te_not_smuggled);
    RUN(test_transfer_codings);
    RUN(test_host);
    RUN(test_head);
    RUN(test_accept);
    RUN(test_pipelined_quorum_mode);
    RUN(test_pipelined_sentinel_acks);
    RUN(test_stops_clean);
    h_redis_stop(&redis);
    return check_summary("http");
}
