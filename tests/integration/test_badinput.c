/* test_badinput.c -- ill-formed requests, on raw sockets and through
 * libcurl: garbage, broken request lines, huge and numerous headers, lying
 * Content-Lengths, oversized chunked bodies, bodies that are not JSON (NUL
 * bytes, invalid UTF-8, deep nesting, 1e400, duplicate keys), oversized
 * tokens, NUL in names, HTTP/1.0, pipelining, slow and vanishing clients.
 *
 * After every case the gateway must still answer /healthz 200, and at the
 * end its process must still be alive (and exit 0 on SIGTERM, which under
 * ASan also means no leak).  Where it answers, the answer is a 4xx; where
 * the answer is the gateway's own (not libmicrohttpd's HTML), it is
 * problem+json with the right code. */
#include "tests/integration/harness.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

static struct h_redis redis;
static struct h_gw gw;

/* ============================================================================
 * Raw connections
 * ========================================================================= */

static int conn_open(void) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_port = htons((uint16_t)gw.port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (connect(fd, (struct sockaddr *)&a, sizeof a) < 0) {
        close(fd);
        return -1;
    }
    return fd;
}

/* Sends all of p; returns 0, or -1 when the peer closed first. */
static int conn_send(int fd, const void *p, size_t n) {
    size_t off = 0;
    while (off < n) {
        ssize_t w = send(fd, (const char *)p + off, n - off, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return -1;
        off += (size_t)w;
    }
    return 0;
}

/* Closes with a reset (SO_LINGER 0): the client vanishes. */
static void conn_reset(int fd) {
    struct linger lg = {1, 0};
    setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
    close(fd);
}

struct raw_resp {
    int status;           /* HTTP status */
    int complete;         /* the whole body (per Content-Length) arrived */
    char ctype[96];       /* Content-Type */
    char allow[96];       /* Allow */
    char retry_after[16]; /* Retry-After */
    char location[160];   /* Location */
    char conn[32];        /* Connection */
    char code[48];        /* problem+json "code", "" when none */
    int problem_ok;       /* problem+json with type, title, status, detail, code */
    char body[512];       /* start of the body, NUL-terminated */
    size_t body_len;      /* full body length */
};

static void header_value(const char *hdrs, size_t len, const char *name, char *out, size_t cap) {
    size_t nlen = strlen(name);
    out[0] = '\0';
    for (const char *p = hdrs; p < hdrs + len;) {
        const char *eol = memchr(p, '\n', (size_t)(hdrs + len - p));
        if (!eol) eol = hdrs + len;
        if ((size_t)(eol - p) > nlen && strncasecmp(p, name, nlen) == 0 && p[nlen] == ':') {
            const char *v = p + nlen + 1;
            while (v < eol && *v == ' ') v++;
            size_t vl = (size_t)(eol - v);
            if (vl && v[vl - 1] == '\r') vl--;
            if (vl >= cap) vl = cap - 1;
            memcpy(out, v, vl);
            out[vl] = '\0';
            return;
        }
        p = eol + 1;
    }
}

/* Parses the responses in buf, skipping 1xx; returns how many (the last
 * may be incomplete). */
static int raw_parse(const char *buf, size_t len, struct raw_resp *rs, int max) {
    int n = 0;
    size_t pos = 0;
    while (pos < len && n < max) {
        const char *start = buf + pos;
        const char *end = NULL;
        for (const char *p = start; p + 3 < buf + len; p++)
            if (memcmp(p, "\r\n\r\n", 4) == 0) {
                end = p + 4;
                break;
            }
        if (!end) break;
        struct raw_resp *r = &rs[n];
        memset(r, 0, sizeof *r);
        if (sscanf(start, "HTTP/1.%*d %d", &r->status) != 1) break;
        size_t hlen = (size_t)(end - start);
        header_value(start, hlen, "Content-Type", r->ctype, sizeof r->ctype);
        header_value(start, hlen, "Allow", r->allow, sizeof r->allow);
        header_value(start, hlen, "Retry-After", r->retry_after, sizeof r->retry_after);
        header_value(start, hlen, "Location", r->location, sizeof r->location);
        header_value(start, hlen, "Connection", r->conn, sizeof r->conn);
        pos += hlen;
        if (r->status >= 100 && r->status < 200) continue;
        char cl[32];
        header_value(start, hlen, "Content-Length", cl, sizeof cl);
        size_t blen = cl[0] ? (size_t)strtoull(cl, NULL, 10) : len - pos;
        r->complete = pos + blen <= len;
        if (!r->complete) blen = len - pos;
        r->body_len = blen;
        size_t keep = blen < sizeof r->body ? blen : sizeof r->body - 1;
        memcpy(r->body, buf + pos, keep);
        r->body[keep] = '\0';
        if (strncmp(r->ctype, "application/problem+json", 24) == 0 && r->complete) {
            cJSON *o = cJSON_ParseWithLength(buf + pos, blen);
            cJSON *c = cJSON_GetObjectItemCaseSensitive(o, "code");
            cJSON *st = cJSON_GetObjectItemCaseSensitive(o, "status");
            if (cJSON_IsString(c)) snprintf(r->code, sizeof r->code, "%s", c->valuestring);
            r->problem_ok = cJSON_IsString(c) && cJSON_IsNumber(st) && st->valueint == r->status &&
                            cJSON_IsString(cJSON_GetObjectItemCaseSensitive(o, "type")) &&
                            cJSON_IsString(cJSON_GetObjectItemCaseSensitive(o, "title")) &&
                            cJSON_IsString(cJSON_GetObjectItemCaseSensitive(o, "detail"));
            cJSON_Delete(o);
        }
        pos += blen;
        n++;
    }
    return n;
}

static char rbuf[1 << 20];

/* Reads from fd until the peer closes, `want` complete responses are in,
 * or timeout_ms passes; parses them into rs.  Returns the count. */
static int conn_read(int fd, struct raw_resp *rs, int max, int want, int timeout_ms) {
    size_t got = 0;
    long long end = h_now_ms() + timeout_ms;
    int n = 0;
    for (;;) {
        int left = (int)(end - h_now_ms());
        if (left <= 0) break;
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, left) <= 0) break;
        ssize_t r = recv(fd, rbuf + got, sizeof rbuf - 1 - got, 0);
        if (r <= 0) break;
        got += (size_t)r;
        n = raw_parse(rbuf, got, rs, max);
        if (n >= want && rs[want - 1].complete) break;
        if (got == sizeof rbuf - 1) break;
    }
    rbuf[got] = '\0';
    return raw_parse(rbuf, got, rs, max);
}

/* One connection: send data, read up to `want` responses. */
static int exchange(const void *data, size_t len, struct raw_resp *rs, int max, int want,
                    int timeout_ms) {
    int fd = conn_open();
    CHECK(fd >= 0);
    if (fd < 0) return 0;
    conn_send(fd, data, len); /* the server may answer and close before all is sent */
    int n = conn_read(fd, rs, max, want, timeout_ms);
    close(fd);
    return n;
}

static int exchange_str(const char *s, struct raw_resp *r) {
    return exchange(s, strlen(s), r, 1, 1, 3000);
}

/* ============================================================================
 * What every case checks
 * ========================================================================= */

/* The gateway still serves: /healthz answers 200 promptly. */
static void still_serving(void) {
    struct h_resp r = h_http("GET", gw.port, "/healthz", NULL, NULL, NULL);
    if (r.status != 200) fprintf(stderr, "  /healthz answered %ld\n", r.status);
    CHECK_EQ_INT(r.status, 200);
    CHECK(r.seconds < 2.0);
    h_resp_free(&r);
}

/* A response to an ill-formed request: a 4xx; the gateway's own errors
 * (problem+json) carry want_code when given, or at least a valid problem.
 * libmicrohttpd's own rejections (HTML) only need the 4xx. */
static void check_4xx(const struct raw_resp *r, const char *want_code) {
    if (r->status < 400 || r->status > 499)
        fprintf(stderr, "  answered %d (%s)\n", r->status, r->body);
    CHECK(r->status >= 400 && r->status <= 499);
    if (strncmp(r->ctype, "application/problem+json", 24) == 0) {
        CHECK(r->problem_ok);
        if (want_code) CHECK_EQ_STR(r->code, want_code);
    } else if (want_code) {
        fprintf(stderr, "  expected problem+json %s, got '%s' %d\n", want_code, r->ctype,
                r->status);
        CHECK(0);
    }
}

/* Either no answer (the server closed) or a 4xx as above. */
static void check_closed_or_4xx(int n, const struct raw_resp *r, const char *want_code) {
    if (n > 0) check_4xx(r, want_code);
}

/* Through libcurl: status and problem code. */
static void check_http(struct h_resp *r, long status, const char *code) {
    if (r->status != status) fprintf(stderr, "  answered %ld: %.200s\n", r->status, r->body);
    CHECK_EQ_INT(r->status, status);
    if (code) {
        CHECK_EQ_STR(h_header(r, "Content-Type"), "application/problem+json");
        CHECK_EQ_STR(h_jcode(r), code);
        CHECK_EQ_INT(h_jint(r, "status"), status);
    }
}

static struct h_resp post(const char *path, const char *body) {
    return h_http("POST", gw.port, path, NULL, body, NULL);
}

/* A raw POST with a body of len bytes (may hold NULs). */
static int raw_post(const char *path, const void *body, size_t len, struct raw_resp *r) {
    char head[512];
    int hn = snprintf(head, sizeof head,
                      "POST %s HTTP/1.1\r\nHost: t\r\nConnection: close\r\n"
                      "Content-Length: %zu\r\n\r\n",
                      path, len);
    char *req = malloc((size_t)hn + len);
    memcpy(req, head, (size_t)hn);
    memcpy(req + hn, body, len);
    int n = exchange(req, (size_t)hn + len, r, 1, 1, 3000);
    free(req);
    return n;
}

/* ============================================================================
 * The socket level
 * ========================================================================= */

static void test_garbage_bytes(void) {
    struct raw_resp r[4];
    unsigned seed = 12345;
    char junk[4096];
    for (int round = 0; round < 5; round++) {
        for (size_t i = 0; i < sizeof junk; i++) {
            seed = seed * 1103515245u + 12345u;
            junk[i] = (char)(seed >> 16);
        }
        int n = exchange(junk, sizeof junk, r, 4, 1, 2000);
        check_closed_or_4xx(n, &r[0], NULL);
    }
    static const char zeros[1000];
    int n = exchange(zeros, sizeof zeros, r, 4, 1, 1000);
    check_closed_or_4xx(n, &r[0], NULL);
    /* A TLS ClientHello's first bytes on the plain-HTTP port. */
    static const unsigned char hello[] = {0x16, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00,
                                          0x01, 0xfc, 0x03, 0x03, 0xde, 0xad, 0xbe,
                                          0xef, '\r', '\n', '\r', '\n'};
    n = exchange(hello, sizeof hello, r, 4, 1, 1000);
    check_closed_or_4xx(n, &r[0], NULL);
    /* Only line ends, then nothing: no request ever starts. */
    char crlf[2000];
    for (size_t i = 0; i < sizeof crlf; i += 2) memcpy(crlf + i, "\r\n", 2);
    n = exchange(crlf, sizeof crlf, r, 4, 1, 300);
    check_closed_or_4xx(n, &r[0], NULL);
    still_serving();
}

static void test_request_line_without_version(void) {
    static const char *lines[] = {
        "GET /v1/locks/x\r\n\r\n",
        "GET /healthz\r\n\r\n",
        "GET\r\n\r\n",
        "/healthz HTTP/1.1\r\n\r\n",
        "GET  HTTP/1.1\r\nHost: t\r\n\r\n",
        "GET /healthz HTTP/\r\nHost: t\r\n\r\n",
        "GET /healthz HTTP/x.y\r\nHost: t\r\n\r\n",
        "GET /healthz FTP/1.1\r\nHost: t\r\n\r\n",
    };
    for (size_t i = 0; i < sizeof lines / sizeof lines[0]; i++) {
        struct raw_resp r;
        int n = exchange_str(lines[i], &r);
        check_closed_or_4xx(n, &r, NULL);
    }
    still_serving();
}

/* HTTP/2 and /3 on an HTTP/1.1 server: libmicrohttpd says 505, which is
 * the one 5xx that is right here (RFC 9110 15.6.6). */
static void test_unsupported_version(void) {
    static const char *lines[] = {
        "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n",
        "GET /healthz HTTP/3.0\r\nHost: t\r\n\r\n",
    };
    for (size_t i = 0; i < sizeof lines / sizeof lines[0]; i++) {
        struct raw_resp r;
        int n = exchange_str(lines[i], &r);
        if (n > 0) CHECK(r.status == 505 || (r.status >= 400 && r.status <= 499));
    }
    still_serving();
}

static void test_absurd_method(void) {
    struct raw_resp r;
    int n =
        exchange_str("FOOBARBAZ /v1/locks/x HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n", &r);
    CHECK_EQ_INT(n, 1);
    check_4xx(&r, "method_not_allowed");
    CHECK_EQ_INT(r.status, 405);
    CHECK(strstr(r.allow, "POST") && strstr(r.allow, "PATCH") && strstr(r.allow, "DELETE") &&
          strstr(r.allow, "GET"));
    n = exchange_str("FOOBARBAZ /nope HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n", &r);
    CHECK_EQ_INT(n, 1);
    check_4xx(&r, "not_found");
    n = exchange_str("G\x01T /v1/locks/x HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n", &r);
    check_closed_or_4xx(n, &r, NULL);
    /* A 4000-byte method. */
    char req[5000];
    memset(req, 'M', 4000);
    snprintf(req + 4000, sizeof req - 4000,
             " /v1/locks/x HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
    n = exchange_str(req, &r);
    check_closed_or_4xx(n, &r, NULL);
    still_serving();
}

static void test_huge_header(void) {
    size_t big = 70 * 1024;
    char *req = malloc(110 * 1024);
    int o = sprintf(req, "GET /nope HTTP/1.1\r\nHost: t\r\nX-Big: ");
    memset(req + o, 'a', big);
    o += (int)big;
    o += sprintf(req + o, "\r\nConnection: close\r\n\r\n");
    struct raw_resp r;
    int n = exchange(req, (size_t)o, &r, 1, 1, 3000);
    check_closed_or_4xx(n, &r, NULL);
    /* A huge Lock-Token header on a real route. */
    o = sprintf(req, "POST /v1/locks/hh HTTP/1.1\r\nHost: t\r\nLock-Token: ");
    memset(req + o, 'a', big);
    o += (int)big;
    o += sprintf(req + o, "\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
    n = exchange(req, (size_t)o, &r, 1, 1, 3000);
    check_closed_or_4xx(n, &r, NULL);
    /* A 100 KB path. */
    o = sprintf(req, "GET /");
    memset(req + o, 'p', 100 * 1024 - 100);
    o += 100 * 1024 - 100;
    o += sprintf(req + o, " HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
    n = exchange(req, (size_t)o, &r, 1, 1, 3000);
    check_closed_or_4xx(n, &r, NULL);
    free(req);
    still_serving();
}

/* Request headers live in libmicrohttpd's per-connection buffer,
 * --connection-memory-kib (default 4, kept small because every waiting
 * request keeps one): ~2.5 KiB of headers fit, 6 KiB get 431 and the
 * server goes on; with 16 KiB the same request is served. */
static int status_with_header(int port, size_t pad) {
    char *hdr = malloc(pad + 16);
    int o = sprintf(hdr, "X-Pad: ");
    memset(hdr + o, 'a', pad);
    hdr[o + (int)pad] = '\0';
    char path[64];
    snprintf(path, sizeof path, "/v1/locks/hdr%zu", pad);
    struct h_resp r = h_http("POST", port, path, NULL, NULL, hdr);
    int status = (int)r.status;
    h_resp_free(&r);
    free(hdr);
    return status;
}

static void test_connection_memory(void) {
    CHECK_EQ_INT(status_with_header(gw.port, 2500), 201);
    CHECK_EQ_INT(status_with_header(gw.port, 6000), 431);
    still_serving();
    /* Too large headers: 431 as problem+json (mhd_errors.h). */
    char *pad = malloc(6100);
    strcpy(pad, "X-Pad: ");
    memset(pad + 7, 'a', 6000);
    pad[6007] = '\0';
    struct h_resp big_hdr = h_http("GET", gw.port, "/healthz", NULL, NULL, pad);
    free(pad);
    check_http(&big_hdr, 431, "headers_too_large");
    h_resp_free(&big_hdr);
    /* A request line longer than the buffer: 414 (README and openapi.yaml
     * said 431), as problem+json with a stable code, not libmicrohttpd's
     * HTML; the connection is closed.  Also as the second request of a
     * kept-alive connection. */
    size_t len = 6000;
    char *line = malloc(len + 128), out[2048];
    int o = sprintf(line, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\nGET /v1/locks/");
    memset(line + o, 'a', len);
    strcpy(line + o + len, " HTTP/1.1\r\nHost: x\r\n\r\n");
    for (int second = 0; second < 2; second++) {
        const char *send = second ? line : strstr(line, "\r\n\r\n") + 4;
        h_raw(gw.port, send, strlen(send), out, sizeof out, 5000);
        const char *ans = second ? strstr(out + 1, "HTTP/1.1 ") : out;
        CHECK(ans && strncmp(ans, "HTTP/1.1 414 ", 13) == 0);
        CHECK(ans && strstr(ans, "Connection: close") != NULL);
        CHECK(ans && strstr(ans, "Content-Type: application/problem+json") != NULL);
        CHECK(ans && strstr(ans, "\"code\":\"uri_too_long\"") != NULL);
        CHECK(ans && strstr(ans, "<html>") == NULL);
    }
    free(line);
    still_serving();
    struct h_gw big = {0};
    if (h_gw_start(&big, &redis, "--connection-memory-kib 16") < 0) {
        CHECK(!"gateway with --connection-memory-kib 16 did not start");
        return;
    }
    CHECK_EQ_INT(status_with_header(big.port, 6000), 201);
    CHECK_EQ_INT(h_gw_stop(&big, 6000), 0);
    char cmd[512];
    const char *build = getenv("BUILD");
    snprintf(cmd, sizeof cmd, "%s/lockgate --connection-memory-kib 2 2>/dev/null",
             build ? build : "build");
    int rc = system(cmd);
    CHECK(WIFEXITED(rc) && WEXITSTATUS(rc) == 2);
}

/* What came back on a new connection after sending req, read until
 * needle arrives (or timeout_ms): for an answer that goes on (a stream). */
static void read_until(int port, const char *req, const char *needle, char *out, size_t cap,
                       int timeout_ms) {
    size_t got = 0;
    out[0] = '\0';
    int fd = h_connect(port);
    if (fd < 0) return;
    if (send(fd, req, strlen(req), MSG_NOSIGNAL) < 0) {
        close(fd);
        return;
    }
    long long end = h_now_ms() + timeout_ms;
    while (got + 1 < cap && !strstr(out, needle)) {
        int left = (int)(end - h_now_ms());
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (left <= 0 || poll(&p, 1, left) <= 0) break;
        ssize_t n = recv(fd, out + got, cap - 1 - got, 0);
        if (n <= 0) break;
        got += (size_t)n;
        out[got] = '\0';
    }
    close(fd);
}

/* --connection-memory-kib 3, its least: 1 KiB less per connection (10,000
 * stream holds under 64 MiB, bench/RESULTS.md).  Headers of 2,000 bytes
 * are served, 3,000 get 431 as problem+json, a stream hold (whose answer
 * headers carry Lock-Token and Location) opens, and the gateway serves on. */
static void test_connection_memory_least(void) {
    struct h_gw small = {0};
    if (h_gw_start(&small, &redis, "--connection-memory-kib 3") < 0) {
        CHECK(!"gateway with --connection-memory-kib 3 did not start");
        return;
    }
    CHECK_EQ_INT(status_with_header(small.port, 2000), 201);
    char *pad = malloc(3100);
    strcpy(pad, "X-Pad: ");
    memset(pad + 7, 'a', 3000);
    pad[3007] = '\0';
    struct h_resp big_hdr = h_http("GET", small.port, "/healthz", NULL, NULL, pad);
    free(pad);
    check_http(&big_hdr, 431, "headers_too_large");
    h_resp_free(&big_hdr);
    char out[4096];
    read_until(small.port,
               "POST /v1/locks/least-stream HTTP/1.1\r\nHost: x\r\n"
               "Accept: text/event-stream\r\nContent-Length: 2\r\n\r\n{}",
               "event: granted", out, sizeof out, 5000);
    CHECK(strncmp(out, "HTTP/1.1 200 ", 13) == 0);
    CHECK(strstr(out, "Lock-Token: ") != NULL);
    CHECK(strstr(out, "Location: /v1/locks/least-stream") != NULL);
    CHECK(strstr(out, "event: granted") != NULL);
    struct h_resp ok = h_http("GET", small.port, "/healthz", NULL, NULL, NULL);
    CHECK_EQ_INT(ok.status, 200);
    h_resp_free(&ok);
    CHECK_EQ_INT(h_gw_stop(&small, 6000), 0);
}

/* Between "served" and libmicrohttpd's own 431 lay a band of request
 * sizes that got no answer at all: the request fitted the connection's
 * buffer, its answer's headers no longer did, and libmicrohttpd closed the
 * connection (at 4 KiB: headers of 3,550 to 3,850 bytes for a plain
 * acquire, from 3,550 for a stream hold).  Every answer kind -- a plain
 * acquire and a stream hold, both with a listed Origin's CORS headers, a
 * preflight, a redirect (Location), a refused Origin (403) and a missing
 * key (401, WWW-Authenticate) -- is sent with an X-Pad header growing in
 * steps of 50 bytes over the band and past it, at the least buffer (3 KiB)
 * and the default (4 KiB): each must be answered, with its own status or
 * 431 problem+json, and the gateways must serve on. */
struct band_kind {
    const char *name;   /* what it is, for failures */
    int auth;           /* sent to the gateway with --auth-file */
    const char *head;   /* "METHOD PATH-PREFIX" up to the request's number */
    const char *fields; /* header fields before X-Pad */
    const char *body;   /* NULL: no body */
    const char *needle; /* read until this arrives (or the close) */
    int want;           /* its status when served */
};

static const struct band_kind band_kinds[] = {
    {"plain acquire",  0, "POST /v1/locks/band-plain-",  "Origin: http://app.example\r\n",       "{}",
     "\x01",                                                                                                      201},
    {"stream hold",    0, "POST /v1/locks/band-stream-",
     "Origin: http://app.example\r\nAccept: text/event-stream\r\n",                              "{}", "event: ", 200},
    {"preflight",      0, "OPTIONS /v1/locks/band-pre-",
     "Origin: http://app.example\r\nAccess-Control-Request-Method: POST\r\n"
     "Access-Control-Request-Headers: lock-token, content-type\r\n",                             NULL, "\x01",    204},
    {"redirect",       0, "GET /ui?n=",                  "",                                     NULL, "\x01",    301},
    {"refused origin", 0, "POST /v1/locks/band-origin-", "Origin: http://elsewhere.example\r\n",
     "{}",                                                                                             "\x01",    403},
    {"no key",         1, "POST /v1/locks/band-key-",    "Origin: http://app.example\r\n",       "{}", "\x01",    401},
};

/* One request of kind k with pad bytes of X-Pad on a new connection:
 * 1 when it was answered as it should be, else 0 (said on stderr). */
static int band_answered(int port, const struct band_kind *k, int kib, int pad) {
    size_t cap = (size_t)pad + 1024;
    char *req = malloc(cap), out[8192];
    int o =
        snprintf(req, cap, "%s%d-%d HTTP/1.1\r\nHost: x\r\nConnection: close\r\n%sX-Pad: ", k->head,
                 kib, pad, k->fields);
    memset(req + o, 'a', (size_t)pad);
    o += pad;
    if (k->body)
        snprintf(req + o, cap - (size_t)o,
                 "\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n\r\n%s",
                 strlen(k->body), k->body);
    else
        snprintf(req + o, cap - (size_t)o, "\r\n\r\n");
    read_until(port, req, k->needle, out, sizeof out, 3000);
    free(req);
    int status = strncmp(out, "HTTP/1.1 ", 9) == 0 ? atoi(out + 9) : 0;
    int ok = status == k->want ||
             (status == 431 && strstr(out, "Content-Type: application/problem+json") &&
              strstr(out, "\"code\":\"headers_too_large\""));
    if (!ok)
        fprintf(stderr, "  %d KiB, %s, X-Pad of %d bytes: %s\n", kib, k->name, pad,
                status ? "a wrong answer" : "no answer");
    return ok ? (status == 431 ? 2 : 1) : 0;
}

static void test_header_band(void) {
    char keys[] = "/tmp/lockgate-band-XXXXXX";
    int kfd = mkstemp(keys);
    CHECK(kfd >= 0 && write(kfd, "{\"keys\": []}\n", 13) == 13);
    if (kfd >= 0) close(kfd);
    static const int sizes[] = {3, 4};
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        int kib = sizes[s];
        struct h_gw g[2] = {{0}};
        char flags[256];
        snprintf(flags, sizeof flags, "--connection-memory-kib %d --cors-origin http://app.example",
                 kib);
        int up = h_gw_start(&g[0], &redis, flags) == 0;
        snprintf(flags + strlen(flags), sizeof flags - strlen(flags), " --auth-file %s", keys);
        up = up && h_gw_start(&g[1], &redis, flags) == 0;
        CHECK(up);
        for (size_t i = 0; up && i < sizeof band_kinds / sizeof band_kinds[0]; i++) {
            const struct band_kind *k = &band_kinds[i];
            int served = 0, refused = 0, missed = 0;
            /* from 1,400 bytes under the buffer (served) to past it (431) */
            for (int pad = kib * 1024 - 1400; pad <= kib * 1024; pad += 50) {
                int a = band_answered(g[k->auth].port, k, kib, pad);
                served += a == 1;
                refused += a == 2;
                missed += a == 0;
            }
            CHECK_EQ_INT(missed, 0);
            CHECK(served > 0);  /* the sweep starts where it is served */
            CHECK(refused > 0); /* and ends where it is not */
        }
        for (int i = 0; i < 2; i++) {
            struct h_resp ok = h_http("GET", g[i].port, "/healthz", NULL, NULL, NULL);
            CHECK_EQ_INT(ok.status, 200);
            h_resp_free(&ok);
            CHECK_EQ_INT(h_gw_stop(&g[i], 6000), 0);
        }
    }
    unlink(keys);
}

static void test_many_tiny_headers(void) {
    char *req = malloc(10000 * 16 + 200);
    int o = sprintf(req, "GET /nope HTTP/1.1\r\nHost: t\r\n");
    for (int i = 0; i < 10000; i++) o += sprintf(req + o, "a:b\r\n");
    o += sprintf(req + o, "Connection: close\r\n\r\n");
    struct raw_resp r;
    int n = exchange(req, (size_t)o, &r, 1, 1, 3000);
    check_closed_or_4xx(n, &r, NULL);
    o = sprintf(req, "POST /v1/locks/many HTTP/1.1\r\nHost: t\r\n");
    for (int i = 0; i < 10000; i++) o += sprintf(req + o, "X-%d: v\r\n", i);
    o += sprintf(req + o, "Content-Length: 0\r\nConnection: close\r\n\r\n");
    n = exchange(req, (size_t)o, &r, 1, 1, 3000);
    check_closed_or_4xx(n, &r, NULL);
    free(req);
    still_serving();
}

static void test_negative_content_length(void) {
    static const char *cls[] = {"-1", "-99999999999", "abc", "1 2", "0x10", "+2", "2,2", ""};
    for (size_t i = 0; i < sizeof cls / sizeof cls[0]; i++) {
        char req[256];
        snprintf(req, sizeof req,
                 "POST /v1/locks/negcl HTTP/1.1\r\nHost: t\r\nConnection: close\r\n"
                 "Content-Length: %s\r\n\r\n{}",
                 cls[i]);
        struct raw_resp r;
        int n = exchange_str(req, &r);
        if (i < 7) {
            check_closed_or_4xx(n, &r, NULL);
        } else if (n > 0) { /* an empty value: refused, or taken as no body */
            CHECK(r.status == 201 || (r.status >= 400 && r.status <= 499));
        }
    }
    struct h_resp g = h_http("GET", gw.port, "/v1/locks/negcl", NULL, NULL, NULL);
    CHECK(g.status == 404 || g.status == 200); /* never a 5xx */
    h_resp_free(&g);
    still_serving();
}

static void test_enormous_content_length(void) {
    static const char *cls[] = {"99999999999999999999",
                                "18446744073709551615",
                                "18446744073709551616",
                                "9223372036854775808",
                                "17000",
                                "16385"};
    for (size_t i = 0; i < sizeof cls / sizeof cls[0]; i++) {
        char req[256];
        snprintf(req, sizeof req,
                 "POST /v1/locks/hugecl HTTP/1.1\r\nHost: t\r\nConnection: close\r\n"
                 "Content-Length: %s\r\n\r\n{}",
                 cls[i]);
        struct raw_resp r;
        int n = exchange_str(req, &r);
        CHECK(n >= 1); /* answered at once, before any body */
        check_closed_or_4xx(n, &r, NULL);
        if (n > 0 && strncmp(r.ctype, "application/problem+json", 24) == 0) {
            CHECK_EQ_INT(r.status, 413);
            CHECK_EQ_STR(r.code, "payload_too_large");
        }
    }
    /* 17000 is a plain, valid Content-Length over the cap: the gateway's
     * own 413, also with Expect: 100-continue (no 100 is sent first). */
    struct raw_resp r;
    int n = exchange_str("POST /v1/locks/hugecl HTTP/1.1\r\nHost: t\r\nConnection: close\r\n"
                         "Expect: 100-continue\r\nContent-Length: 17000\r\n\r\n",
                         &r);
    CHECK_EQ_INT(n, 1);
    check_4xx(&r, "payload_too_large");
    CHECK_EQ_INT(r.status, 413);
    still_serving();
}

/* A Content-Length is 1*DIGIT (RFC 9110 8.6): leading zeros are allowed
 * and the value, not the number of digits, is what the cap is about. */
static void test_content_length_leading_zeros(void) {
    struct raw_resp r;
    int n = exchange_str("POST /v1/locks/zeros HTTP/1.1\r\nHost: t\r\nConnection: close\r\n"
                         "Content-Length: 0000000002\r\n\r\n{}",
                         &r);
    CHECK_EQ_INT(n, 1);
    if (r.status != 201) fprintf(stderr, "  answered %d: %s\n", r.status, r.body);
    CHECK_EQ_INT(r.status, 201);
    still_serving();
}

/* Content-Length promises more than comes, then the client goes: nothing
 * is dispatched on a partial body. */
static void test_content_length_longer_than_body(void) {
    const char *req = "POST /v1/locks/shortbody HTTP/1.1\r\nHost: t\r\n"
                      "Content-Length: 100\r\n\r\n{\"ttl_ms\":60000}";
    for (int mode = 0; mode < 3; mode++) {
        int fd = conn_open();
        CHECK(fd >= 0);
        if (fd < 0) continue;
        conn_send(fd, req, strlen(req));
        h_sleep_ms(50);
        if (mode == 0)
            close(fd);
        else if (mode == 1)
            conn_reset(fd);
        else {
            /* Half-close: the server may answer or close, but not dispatch. */
            shutdown(fd, SHUT_WR);
            struct raw_resp r;
            int n = conn_read(fd, &r, 1, 1, 1000);
            check_closed_or_4xx(n, &r, NULL);
            close(fd);
        }
    }
    h_sleep_ms(100);
    struct h_resp g = h_http("GET", gw.port, "/v1/locks/shortbody", NULL, NULL, NULL);
    check_http(&g, 404, "not_held");
    h_resp_free(&g);
    still_serving();
}

static void test_chunked(void) {
    /* Over 16 KiB in 1 KiB chunks: 413. */
    char *req = malloc(64 * 1024);
    int o = sprintf(req, "POST /v1/locks/chunky HTTP/1.1\r\nHost: t\r\nConnection: close\r\n"
                         "Transfer-Encoding: chunked\r\n\r\n");
    for (int i = 0; i < 20; i++) {
        o += sprintf(req + o, "400\r\n");
        memset(req + o, i == 0 ? '{' : ' ', 1024);
        o += 1024;
        o += sprintf(req + o, "\r\n");
    }
    o += sprintf(req + o, "1\r\n}\r\n0\r\n\r\n");
    struct raw_resp r;
    int n = exchange(req, (size_t)o, &r, 1, 1, 3000);
    CHECK_EQ_INT(n, 1);
    check_4xx(&r, "payload_too_large");
    CHECK_EQ_INT(r.status, 413);
    free(req);
    struct h_resp g = h_http("GET", gw.port, "/v1/locks/chunky", NULL, NULL, NULL);
    check_http(&g, 404, "not_held");
    h_resp_free(&g);

    /* A small chunked body in pieces is a body like any other. */
    n = exchange_str(
        "POST /v1/locks/chunked-ok HTTP/1.1\r\nHost: t\r\nConnection: close\r\n"
        "Transfer-Encoding: chunked\r\n\r\n5\r\n{\"ttl\r\nA\r\n_ms\":1500}\r\n0\r\n\r\n",
        &r);
    CHECK_EQ_INT(n, 1);
    CHECK_EQ_INT(r.status, 201);
    CHECK(strstr(r.body, "\"ttl_ms\":1500") != NULL);

    /* Broken chunk framing. */
    static const char *bad[] = {"zz\r\n{}\r\n0\r\n\r\n", "fffffffffffffffffffff\r\n{}\r\n0\r\n\r\n",
                                "2\r\n{}XX0\r\n\r\n", "-2\r\n{}\r\n0\r\n\r\n"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char b[512];
        snprintf(b, sizeof b,
                 "POST /v1/locks/chunkbad HTTP/1.1\r\nHost: t\r\nConnection: close\r\n"
                 "Transfer-Encoding: chunked\r\n\r\n%s",
                 bad[i]);
        int fd = conn_open();
        conn_send(fd, b, strlen(b));
        n = conn_read(fd, &r, 1, 1, 1000);
        check_closed_or_4xx(n, &r, NULL);
        close(fd);
    }
    still_serving();
}

/* ============================================================================
 * Bodies that are not JSON objects
 * ========================================================================= */

static void test_body_nul_bytes(void) {
    struct raw_resp r;
    int n = raw_post("/v1/locks/nul1", "{}\0\0", 4, &r);
    CHECK_EQ_INT(n, 1);
    check_4xx(&r, "invalid_json");
    n = raw_post("/v1/locks/nul2", "\0\0\0\0", 4, &r);
    CHECK_EQ_INT(n, 1);
    check_4xx(&r, "invalid_json");
    n = raw_post("/v1/locks/nul3",
                 "{\"ttl_ms\":1\0"
                 "000}",
                 16, &r);
    CHECK_EQ_INT(n, 1);
    check_4xx(&r, "invalid_json");
    still_serving();
}

/* A NUL before the value, or inside a string, is not JSON either (cJSON
 * skips the first as white space and cuts the string at the second:
 * owner "a\0b" would be stored as "a"). */
static void test_body_nul_bytes_strict(void) {
    struct raw_resp r;
    int n = raw_post("/v1/locks/nul4", "\0{}", 3, &r);
    CHECK_EQ_INT(n, 1);
    check_4xx(&r, "invalid_json");
    n = raw_post("/v1/locks/nul5", "{\"owner\":\"a\0b\"}", 15, &r);
    CHECK_EQ_INT(n, 1);
    check_4xx(&r, "invalid_json");
    still_serving();
}

/* An escaped U+0000 is valid JSON, but the gateway keeps strings as C
 * strings: "a\u0000b" must be refused, or kept whole -- never silently
 * stored as "a". */
static void test_escaped_nul_in_string(void) {
    struct h_resp r = post("/v1/locks/esc-nul", "{\"owner\":\"a\\u0000b\",\"ttl_ms\":5000}");
    CHECK(r.status == 201 || r.status == 400);
    if (r.status == 400)
        CHECK(strcmp(h_jcode(&r), "invalid_field") == 0 ||
              strcmp(h_jcode(&r), "invalid_json") == 0);
    h_resp_free(&r);
    r = h_http("GET", gw.port, "/v1/locks/esc-nul", NULL, NULL, NULL);
    if (r.status == 200) {
        if (!strstr(r.body, "\"owner\":\"a\\u0000b\""))
            fprintf(stderr, "  stored as: %.200s\n", r.body);
        CHECK(strstr(r.body, "\"owner\":\"a\\u0000b\"") != NULL);
    }
    h_resp_free(&r);
    still_serving();
}

/* Bodies are UTF-8 (openapi.yaml).  Invalid UTF-8 in a string is refused, so
 * it can never come back out of GET as JSON that is not UTF-8. */
static void test_invalid_utf8(void) {
    static const char *bodies[] = {
        "{\"owner\":\"\xff\xfe\"}",
        "{\"owner\":\"caf\xc3\"}",
        "{\"owner\":\"\xc0\xaf\"}",
        "{\"owner\":\"\xed\xa0\x80\"}",
        "{\"owner\":\"\xf8\x88\x80\x80\x80\"}",
        "{\"unknown\":\"\x80\",\"ttl_ms\":1000}",
    };
    for (size_t i = 0; i < sizeof bodies / sizeof bodies[0]; i++) {
        char path[64];
        snprintf(path, sizeof path, "/v1/locks/utf8-%zu", i);
        struct h_resp r = post(path, bodies[i]);
        if (r.status != 400) fprintf(stderr, "  case %zu answered %ld\n", i, r.status);
        CHECK_EQ_INT(r.status, 400);
        if (r.status == 400)
            CHECK(strcmp(h_jcode(&r), "invalid_json") == 0 ||
                  strcmp(h_jcode(&r), "invalid_field") == 0);
        h_resp_free(&r);
    }
    /* An escaped lone surrogate is not a character either. */
    struct h_resp r = post("/v1/locks/utf8-esc", "{\"owner\":\"\\udc00\"}");
    check_http(&r, 400, "invalid_json");
    h_resp_free(&r);
    /* Valid UTF-8 and escapes are fine, and come back the same. */
    r = post("/v1/locks/utf8-ok",
             "{\"owner\":\"caf\xc3\xa9 \\u00e9 \\ud83d\\ude00\",\"ttl_ms\":5000}");
    check_http(&r, 201, NULL);
    h_resp_free(&r);
    r = h_http("GET", gw.port, "/v1/locks/utf8-ok", NULL, NULL, NULL);
    CHECK_EQ_STR(h_jstr(&r, "owner"), "caf\xc3\xa9 \xc3\xa9 \xf0\x9f\x98\x80");
    h_resp_free(&r);
    still_serving();
}

static void test_deep_nesting(void) {
    /* 8000 deep fits under the 16 KiB cap: refused for what it is. */
    size_t d = 8000;
    char *b = malloc(2 * d + 1);
    memset(b, '[', d);
    memset(b + d, ']', d);
    b[2 * d] = '\0';
    struct h_resp r = post("/v1/locks/deep", b);
    check_http(&r, 400, "invalid_json");
    h_resp_free(&r);
    /* 10000 '[' and no end. */
    b = realloc(b, 10001);
    memset(b, '[', 10000);
    b[10000] = '\0';
    r = post("/v1/locks/deep", b);
    check_http(&r, 400, "invalid_json");
    h_resp_free(&r);
    /* [[[[... 10000 deep]]]] is 20000 bytes: over the cap first. */
    b = realloc(b, 20001);
    memset(b, '[', 10000);
    memset(b + 10000, ']', 10000);
    b[20000] = '\0';
    r = post("/v1/locks/deep", b);
    check_http(&r, 413, "payload_too_large");
    h_resp_free(&r);
    /* An object whose one member nests 2500 deep. */
    b = realloc(b, 16384);
    int o = sprintf(b, "{\"x\":");
    for (int i = 0; i < 2500; i++) o += sprintf(b + o, "{\"a\":");
    o += sprintf(b + o, "1");
    for (int i = 0; i < 2501; i++) b[o++] = '}';
    b[o] = '\0';
    r = post("/v1/locks/deep", b);
    check_http(&r, 400, "invalid_json");
    h_resp_free(&r);
    free(b);
    r = h_http("GET", gw.port, "/v1/locks/deep", NULL, NULL, NULL);
    check_http(&r, 404, "not_held");
    h_resp_free(&r);
    still_serving();
}

static void test_huge_numbers(void) {
    static const char *bodies[] = {"{\"ttl_ms\":1e400}",
                                   "{\"ttl_ms\":-1e400}",
                                   "{\"ttl_ms\":1e-400}",
                                   "{\"wait_ms\":1e400}",
                                   "{\"lock_delay_ms\":1e400}",
                                   "{\"max_hold_ms\":1e400}",
                                   "{\"ttl_ms\":123456789012345678901234567890}"};
    for (size_t i = 0; i < sizeof bodies / sizeof bodies[0]; i++) {
        struct h_resp r = post("/v1/locks/bignum", bodies[i]);
        check_http(&r, 400, "invalid_field");
        h_resp_free(&r);
    }
    /* In an unknown field it is ignored (or refused), never a 5xx. */
    struct h_resp r = post("/v1/locks/bignum", "{\"junk\":1e400,\"ttl_ms\":1000}");
    CHECK(r.status == 201 || r.status == 400);
    h_resp_free(&r);
    still_serving();
}

/* Duplicate keys: the gateway reads one value consistently (cJSON's
 * first) or refuses; either way a 2xx carries a value that was sent. */
static void test_duplicate_keys(void) {
    struct h_resp r = post("/v1/locks/dupkey", "{\"ttl_ms\":1000,\"ttl_ms\":\"x\"}");
    CHECK(r.status == 201 || r.status == 400);
    if (r.status == 201) CHECK_EQ_INT(h_jint(&r, "ttl_ms"), 1000);
    if (r.status == 400)
        CHECK(strcmp(h_jcode(&r), "invalid_json") == 0 ||
              strcmp(h_jcode(&r), "invalid_field") == 0);
    h_resp_free(&r);
    r = post("/v1/locks/dupkey2", "{\"ttl_ms\":\"x\",\"ttl_ms\":1000}");
    CHECK(r.status == 201 || r.status == 400);
    h_resp_free(&r);
    still_serving();
}

/* ============================================================================
 * Headers and names
 * ========================================================================= */

static void test_huge_lock_token(void) {
    char *tok = malloc(10 * 1024 + 1);
    memset(tok, 'a', 10 * 1024);
    tok[10 * 1024] = '\0';
    char *hdr = malloc(10 * 1024 + 32);
    sprintf(hdr, "Lock-Token: %s", tok);
    static const char *methods[] = {"POST", "PATCH", "DELETE"};
    for (int i = 0; i < 3; i++) {
        /* 10 KiB of headers do not fit the connection's buffer (4 KiB by
         * default): libmicrohttpd answers 431 itself.  1 KiB does fit and
         * is checked as a token. */
        struct h_resp r = h_http(methods[i], gw.port, "/v1/locks/bigtok", NULL, NULL, hdr);
        CHECK_EQ_INT(r.status, 431);
        h_resp_free(&r);
        tok[1024] = '\0';
        sprintf(hdr, "Lock-Token: %s", tok);
        r = h_http(methods[i], gw.port, "/v1/locks/bigtok", NULL, NULL, hdr);
        check_http(&r, 400, "invalid_token");
        h_resp_free(&r);
        tok[1024] = 'a';
        sprintf(hdr, "Lock-Token: %s", tok);
    }
    /* 129 is one too many; 128 is the most. */
    tok[129] = '\0';
    sprintf(hdr, "Lock-Token: %s", tok);
    struct h_resp r = h_http("POST", gw.port, "/v1/locks/bigtok", NULL, NULL, hdr);
    check_http(&r, 400, "invalid_token");
    h_resp_free(&r);
    tok[128] = '\0';
    sprintf(hdr, "Lock-Token: %s", tok);
    r = h_http("POST", gw.port, "/v1/locks/bigtok", NULL, NULL, hdr);
    check_http(&r, 201, NULL);
    CHECK_EQ_STR(h_header(&r, "Lock-Token"), tok);
    h_resp_free(&r);
    r = h_http("DELETE", gw.port, "/v1/locks/bigtok", NULL, NULL, hdr);
    check_http(&r, 200, NULL);
    h_resp_free(&r);
    /* Empty, non-ASCII and control characters. */
    struct raw_resp rr;
    static const char *vals[] = {"", "aaaaaaaaaaaaaaaaaaaaa\xc3\xa9", "aaaaaaaaaaaaaaaaaaaaaaa\x01",
                                 "aaaaaaaaaaa aaaaaaaaaaaaaa"};
    for (size_t i = 0; i < sizeof vals / sizeof vals[0]; i++) {
        char req[512];
        snprintf(req, sizeof req,
                 "POST /v1/locks/oddtok HTTP/1.1\r\nHost: t\r\nConnection: close\r\n"
                 "Lock-Token: %s\r\nContent-Length: 0\r\n\r\n",
                 vals[i]);
        int n = exchange_str(req, &rr);
        if (i == 2)
            check_closed_or_4xx(n, &rr, NULL);
        else {
            CHECK_EQ_INT(n, 1);
            check_4xx(&rr, "invalid_token");
        }
    }
    free(tok);
    free(hdr);
    still_serving();
}

static void test_names_in_path(void) {
    static const char *paths[] = {"/v1/locks/a%00b",  "/v1/locks/%00",   "/v1/locks/%2F",
                                  "/v1/locks/a%2",    "/v1/locks/%zz",   "/v1/locks/%",
                                  "/v1/locks/%C3%A9", "/v1/locks/a%20b", "/v1/locks/x%2e%2e%2fx"};
    static const char *methods[] = {"POST", "GET", "PATCH", "DELETE"};
    for (size_t i = 0; i < sizeof paths / sizeof paths[0]; i++)
        for (int m = 0; m < 4; m++) {
            struct h_resp r = h_http(methods[m], gw.port, paths[i],
                                     m >= 2 ? "aaaaaaaaaaaaaaaaaaaaaaaa" : NULL, NULL, NULL);
            check_http(&r, 400, "invalid_name");
            h_resp_free(&r);
        }
    /* Raw bytes libcurl would not send. */
    static const char *raw[] = {"GET /v1/locks/caf\xc3\xa9 HTTP/1.1",
                                "GET /v1/locks/a\x01 HTTP/1.1", "GET /v1/locks/a b HTTP/1.1",
                                "GET /v1/locks/\xff HTTP/1.1"};
    for (size_t i = 0; i < sizeof raw / sizeof raw[0]; i++) {
        char req[256];
        snprintf(req, sizeof req, "%s\r\nHost: t\r\nConnection: close\r\n\r\n", raw[i]);
        struct raw_resp r;
        int n = exchange_str(req, &r);
        check_closed_or_4xx(n, &r, NULL);
        if (n > 0 && r.problem_ok) CHECK_EQ_STR(r.code, "invalid_name");
    }
    /* Dots are name bytes, not path steps: ".." is a lock like any other. */
    struct raw_resp r;
    int n = exchange_str("GET /v1/locks/.. HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n", &r);
    CHECK_EQ_INT(n, 1);
    check_4xx(&r, "not_held");
    still_serving();
}

/* RFC 9112 6.3: differing Content-Length values make the framing invalid;
 * the server must answer 400 and close. */
static void test_conflicting_content_length(void) {
    struct raw_resp r[2];
    int n = exchange_str("POST /v1/locks/dupcl HTTP/1.1\r\nHost: t\r\nConnection: close\r\n"
                         "Content-Length: 2\r\nContent-Length: 5\r\n\r\n{}abc",
                         r);
    if (n > 0 && r[0].status != 400)
        fprintf(stderr, "  conflicting Content-Length answered %d\n", r[0].status);
    check_closed_or_4xx(n, r, NULL);
    struct h_resp g = h_http("GET", gw.port, "/v1/locks/dupcl", NULL, NULL, NULL);
    CHECK_EQ_INT(g.status, 404); /* nothing acquired on a body of unknown length */
    h_resp_free(&g);
    still_serving();
}

/* ============================================================================
 * Connections
 * ========================================================================= */

static void test_http10(void) {
    struct raw_resp r[2];
    int n = exchange_str("GET /healthz HTTP/1.0\r\n\r\n", r);
    CHECK_EQ_INT(n, 1);
    CHECK_EQ_INT(r[0].status, 200);
    n = exchange_str(
        "POST /v1/locks/h10 HTTP/1.0\r\nContent-Length: 17\r\n\r\n{\"ttl_ms\":10000}\n", r);
    CHECK_EQ_INT(n, 1);
    CHECK_EQ_INT(r[0].status, 201);
    CHECK(strstr(r[0].location, "/v1/locks/h10") != NULL);
    n = exchange_str("POST /v1/locks/h10 HTTP/1.0\r\nContent-Length: 0\r\n\r\n", r);
    CHECK_EQ_INT(n, 1);
    check_4xx(&r[0], "lock_busy");
    n = exchange_str("PUT /v1/locks/h10 HTTP/1.0\r\n\r\n", r);
    CHECK_EQ_INT(n, 1);
    check_4xx(&r[0], "method_not_allowed");
    /* 1.0 keep-alive: two requests on one connection. */
    const char *two = "GET /healthz HTTP/1.0\r\nConnection: keep-alive\r\n\r\n";
    int fd = conn_open();
    conn_send(fd, two, strlen(two));
    n = conn_read(fd, r, 2, 1, 2000);
    CHECK_EQ_INT(n, 1);
    CHECK_EQ_INT(r[0].status, 200);
    conn_send(fd, "GET /nope HTTP/1.0\r\n\r\n", 22);
    n = conn_read(fd, r, 2, 1, 2000);
    if (n == 1) check_4xx(&r[0], "not_found");
    close(fd);
    still_serving();
}

static void test_pipelined(void) {
    const char *reqs =
        "GET /healthz HTTP/1.1\r\nHost: t\r\n\r\n"
        "POST /v1/locks/pipe HTTP/1.1\r\nHost: t\r\nContent-Length: 16\r\n\r\n{\"ttl_ms\":10000}"
        "GET /v1/locks/pipe HTTP/1.1\r\nHost: t\r\n\r\n"
        "DELETE /v1/locks/pipe HTTP/1.1\r\nHost: t\r\n\r\n"
        "POST /v1/locks/pipe HTTP/1.1\r\nHost: t\r\nContent-Length: 7\r\n\r\n{oops}\n"
        "GET /nope HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n";
    struct raw_resp r[8];
    int n = exchange(reqs, strlen(reqs), r, 8, 6, 5000);
    CHECK_EQ_INT(n, 6);
    if (n == 6) {
        CHECK_EQ_INT(r[0].status, 200);
        CHECK_EQ_INT(r[1].status, 201);
        CHECK_EQ_INT(r[2].status, 200);
        CHECK(strstr(r[2].body, "\"name\":\"pipe\"") != NULL);
        check_4xx(&r[3], "missing_token");
        check_4xx(&r[4], "invalid_json");
        check_4xx(&r[5], "not_found");
    }

    /* 50 acquisitions in one write: answered in order, each its own. */
    char *many = malloc(50 * 128);
    int o = 0;
    for (int i = 0; i < 50; i++)
        o += sprintf(many + o,
                     "POST /v1/locks/pipe-%02d HTTP/1.1\r\nHost: t\r\n%sContent-Length: 0\r\n\r\n",
                     i, i == 49 ? "Connection: close\r\n" : "");
    static struct raw_resp rs[64];
    n = exchange(many, (size_t)o, rs, 64, 50, 10000);
    CHECK_EQ_INT(n, 50);
    int in_order = 1;
    for (int i = 0; i < n; i++) {
        char want[32];
        snprintf(want, sizeof want, "/v1/locks/pipe-%02d", i);
        in_order &= rs[i].status == 201 && strcmp(rs[i].location, want) == 0;
    }
    CHECK(in_order);
    free(many);

    /* Garbage after a good request: the good one is answered. */
    const char *mixed = "GET /healthz HTTP/1.1\r\nHost: t\r\n\r\n\x01\x02garbage\r\n\r\n";
    n = exchange(mixed, strlen(mixed), r, 8, 2, 2000);
    CHECK(n >= 1);
    CHECK_EQ_INT(r[0].status, 200);
    if (n > 1) check_4xx(&r[1], NULL);
    still_serving();
}

/* Slow clients: partial requests held open, a request sent a byte at a
 * time, and then all of them gone.  Meanwhile the gateway serves others. */
static void test_slowloris(void) {
    enum { N = 40 };
    int fds[N];
    const char *partial_head = "POST /v1/locks/slow HTTP/1.1\r\nHost: t\r\nContent-Len";
    const char *partial_body =
        "POST /v1/locks/slow HTTP/1.1\r\nHost: t\r\nContent-Length: 100\r\n\r\n{\"ttl";
    for (int i = 0; i < N; i++) {
        fds[i] = conn_open();
        CHECK(fds[i] >= 0);
        const char *p = i % 2 ? partial_head : partial_body;
        if (fds[i] >= 0) conn_send(fds[i], p, strlen(p));
    }
    /* Others are served promptly while those hang. */
    for (int i = 0; i < 5; i++) {
        long long t0 = h_now_ms();
        still_serving();
        CHECK(h_now_ms() - t0 < 1000);
    }
    /* A request one byte every 5 ms (about half a second) still works. */
    const char *slow = "GET /v1/locks/slow HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n";
    int fd = conn_open();
    for (const char *p = slow; *p; p++) {
        conn_send(fd, p, 1);
        h_sleep_ms(5);
    }
    struct raw_resp r;
    int n = conn_read(fd, &r, 1, 1, 3000);
    CHECK_EQ_INT(n, 1);
    check_4xx(&r, "not_held");
    close(fd);
    /* Then they all go, half politely, half with a reset. */
    for (int i = 0; i < N; i++) {
        if (fds[i] < 0) continue;
        if (i % 4 < 2)
            close(fds[i]);
        else
            conn_reset(fds[i]);
    }
    h_sleep_ms(100);
    struct h_resp g = h_http("GET", gw.port, "/v1/locks/slow", NULL, NULL, NULL);
    check_http(&g, 404, "not_held"); /* no partial body was taken for a request */
    h_resp_free(&g);
    still_serving();
}

/* Clients that send a whole request and vanish before the answer: the
 * gateway's reply (made on its Redis thread) finds the client gone. */
static void test_client_gone(void) {
    for (int i = 0; i < 200; i++) {
        char req[256];
        snprintf(req, sizeof req,
                 "POST /v1/locks/gone-%d HTTP/1.1\r\nHost: t\r\nContent-Length: "
                 "16\r\n\r\n{\"ttl_ms\":60000}",
                 i % 10);
        int fd = conn_open();
        if (fd < 0) continue;
        conn_send(fd, req, strlen(req));
        if (i % 2)
            conn_reset(fd);
        else
            close(fd);
    }
    still_serving();
    /* The gateway's bookkeeping of requests in flight goes back to 0
     * (1: the /metrics request itself). */
    long inflight = -1;
    for (int i = 0; i < 40 && inflight != 1; i++) {
        h_sleep_ms(50);
        struct h_resp m = h_http("GET", gw.port, "/metrics", NULL, NULL, NULL);
        CHECK_EQ_INT(m.status, 200);
        const char *p = m.body ? strstr(m.body, "\nlockgate_http_in_flight ") : NULL;
        inflight = p ? atol(p + 25) : -1;
        h_resp_free(&m);
    }
    CHECK_EQ_INT(inflight, 1);
}

/* ============================================================================
 * main
 * ========================================================================= */

static int gateway_alive(void) {
    if (gw.pid <= 0) return 0;
    int st;
    return waitpid(gw.pid, &st, WNOHANG) == 0;
}

static void dump_log_tail(void) {
    char cmd[256];
    snprintf(cmd, sizeof cmd, "tail -n 60 '%s' | sed 's/^/    gw: /' >&2", gw.log);
    if (system(cmd)) {}
}

int main(int argc, char **argv) {
    check_filter(argc > 1 ? argv[1] : NULL);
    /* A free port may be taken by another test's process before the
     * server binds it: up to three tries on fresh ports. */
    int up = 0;
    for (int i = 0; i < 3 && !up; i++) {
        memset(&gw, 0, sizeof gw);
        up = h_redis_start(&redis, 0, NULL) == 0 && h_gw_start(&gw, &redis, NULL) == 0;
        if (!up) {
            h_gw_kill(&gw);
            h_redis_stop(&redis);
        }
    }
    if (!up) return 2;
    long long t0 = h_now_ms();
    RUN_SOME(test_garbage_bytes);
    RUN_SOME(test_request_line_without_version);
    RUN_SOME(test_unsupported_version);
    RUN_SOME(test_absurd_method);
    RUN_SOME(test_huge_header);
    RUN_SOME(test_connection_memory);
    RUN_SOME(test_connection_memory_least);
    RUN_SOME(test_header_band);
    RUN_SOME(test_many_tiny_headers);
    RUN_SOME(test_negative_content_length);
    RUN_SOME(test_enormous_content_length);
    RUN_SOME(test_content_length_leading_zeros);
    RUN_SOME(test_content_length_longer_than_body);
    RUN_SOME(test_chunked);
    RUN_SOME(test_body_nul_bytes);
    RUN_SOME(test_body_nul_bytes_strict);
    RUN_SOME(test_escaped_nul_in_string);
    RUN_SOME(test_invalid_utf8);
    RUN_SOME(test_deep_nesting);
    RUN_SOME(test_huge_numbers);
    RUN_SOME(test_duplicate_keys);
    RUN_SOME(test_huge_lock_token);
    RUN_SOME(test_names_in_path);
    RUN_SOME(test_conflicting_content_length);
    RUN_SOME(test_http10);
    RUN_SOME(test_pipelined);
    RUN_SOME(test_slowloris);
    RUN_SOME(test_client_gone);

    /* The process lived through all of it, and stops cleanly. */
    check_cur_failed = 0;
    CHECK(gateway_alive());
    int rc = h_gw_stop(&gw, 6000);
    CHECK_EQ_INT(rc, 0);
    if (check_cur_failed) dump_log_tail();
    if (check_cur_failed) {
        check_failed++;
        fprintf(stderr, "not ok - gateway_alive_and_clean_exit\n");
    } else {
        check_passed++;
        fprintf(stderr, "ok - gateway_alive_and_clean_exit\n");
    }
    h_redis_stop(&redis);
    fprintf(stderr, "  (%.1f s)\n", (h_now_ms() - t0) / 1000.0);
    return check_summary("badinput");
}
