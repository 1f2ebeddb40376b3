/* test_proxy.c -- the gateway behind Debian's nginx and HAProxy, each
 * started here on a free loopback port with its own configuration in a
 * temporary directory (the configurations README's "Behind a proxy"
 * shows): a body over the limit gets its 413 through both, whether framed
 * by Content-Length or chunked, every time (before #30 the gateway closed
 * with the body unread and the proxies answered 502 or nothing). */
#include "tests/integration/harness.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static struct h_redis redis;
static struct h_gw gw;
static char dir[64];
static int nginx_port, haproxy_port, haproxy_short_port;

static void write_file(const char *name, const char *text) {
    char path[160];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    if (!f) return;
    fputs(text, f);
    fclose(f);
}

/* Waits until something accepts on port; 0, or -1 after timeout_ms. */
static int wait_port(int port, int timeout_ms) {
    for (long long end = h_now_ms() + timeout_ms; h_now_ms() < end; h_sleep_ms(50)) {
        int fd = h_connect(port);
        if (fd >= 0) {
            close(fd);
            return 0;
        }
    }
    return -1;
}

static int start_nginx(void) {
    char conf[4096], cmd[512], log[160];
    nginx_port = h_free_port();
    snprintf(conf, sizeof conf,
             "daemon off;\n"
             "worker_processes 1;\n"
             "pid %s/nginx.pid;\n"
             "error_log %s/nginx-error.log info;\n"
             "events { worker_connections 1024; }\n"
             "http {\n"
             "  access_log %s/nginx-access.log;\n"
             "  client_body_temp_path %s/nginx-body;\n"
             "  proxy_temp_path %s/nginx-proxy;\n"
             "  fastcgi_temp_path %s/nginx-fcgi;\n"
             "  uwsgi_temp_path %s/nginx-uwsgi;\n"
             "  scgi_temp_path %s/nginx-scgi;\n"
             "  upstream lockgate { server 127.0.0.1:%d; keepalive 16; }\n"
             "  server {\n"
             "    listen 127.0.0.1:%d;\n"
             "    client_max_body_size 1m;\n"
             "    client_body_buffer_size 1m;\n"
             "    location / {\n"
             "      proxy_pass http://lockgate;\n"
             "      proxy_http_version 1.1;\n"
             "      proxy_set_header Connection \"\";\n"
             "      proxy_set_header Host $http_host;\n"
             "      proxy_read_timeout 330s;\n"
             "      proxy_send_timeout 330s;\n"
             "    }\n"
             "    location /short/ {\n" /* a read timeout below the wait: 504 */
             "      proxy_pass http://lockgate/;\n"
             "      proxy_read_timeout 1s;\n"
             "      proxy_http_version 1.1;\n"
             "      proxy_set_header Connection \"\";\n"
             "      proxy_set_header Host $http_host;\n"
             "    }\n"
             "    location /stream/ {\n" /* the body streamed, not buffered first */
             "      proxy_pass http://lockgate/;\n"
             "      proxy_request_buffering off;\n"
             "      proxy_http_version 1.1;\n"
             "      proxy_set_header Connection \"\";\n"
             "      proxy_set_header Host $http_host;\n"
             "    }\n"
             "  }\n"
             "}\n",
             dir, dir, dir, dir, dir, dir, dir, dir, gw.port, nginx_port);
    write_file("nginx.conf", conf);
    snprintf(log, sizeof log, "%s/nginx.out", dir);
    snprintf(cmd, sizeof cmd, "exec nginx -p %s -c %s/nginx.conf -e %s/nginx-error.log", dir, dir,
             dir);
    if (h_spawn(cmd, log) < 0) return -1;
    return wait_port(nginx_port, 10000);
}

static int start_haproxy(void) {
    char conf[2048], cmd[512], log[160];
    haproxy_port = h_free_port();
    haproxy_short_port = h_free_port();
    snprintf(conf, sizeof conf,
             "global\n"
             "  maxconn 1000\n"
             "defaults\n"
             "  mode http\n"
             "  timeout connect 5s\n"
             "  timeout client 330s\n"
             "  timeout server 330s\n"
             "  timeout http-request 15s\n"
             "frontend in\n"
             "  bind 127.0.0.1:%d\n"
             "  default_backend lockgate\n"
             "backend lockgate\n"
             "  server gw 127.0.0.1:%d\n"
             "frontend short\n" /* a server timeout below the wait: 504 */
             "  bind 127.0.0.1:%d\n"
             "  default_backend lockgate_short\n"
             "backend lockgate_short\n"
             "  timeout server 1s\n"
             "  server gw 127.0.0.1:%d\n",
             haproxy_port, gw.port, haproxy_short_port, gw.port);
    write_file("haproxy.cfg", conf);
    snprintf(log, sizeof log, "%s/haproxy.out", dir);
    snprintf(cmd, sizeof cmd, "exec haproxy -db -f %s/haproxy.cfg", dir);
    if (h_spawn(cmd, log) < 0) return -1;
    return wait_port(haproxy_port, 10000) < 0 ? -1 : wait_port(haproxy_short_port, 10000);
}

/* POSTs a body of size bytes to port (chunked in 16 KiB chunks, or with
 * a Content-Length), writing all of it unless the connection breaks, and
 * returns the answer's status (0: none). */
static int post_big(int port, const char *prefix, size_t size, int chunked) {
    int fd = h_connect(port);
    if (fd < 0) return 0;
    char head[256];
    int n = chunked ? snprintf(head, sizeof head,
                               "POST %s/v1/locks/proxy-big HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                               "Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n",
                               prefix)
                    : snprintf(head, sizeof head,
                               "POST %s/v1/locks/proxy-big HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                               "Content-Length: %zu\r\nConnection: close\r\n\r\n",
                               prefix, size);
    int ok = send(fd, head, (size_t)n, MSG_NOSIGNAL) == n;
    static char piece[16384 + 16];
    for (size_t sent = 0; ok && sent < size;) {
        size_t len = size - sent < 16384 ? size - sent : 16384;
        size_t off = 0, total = len;
        if (chunked) {
            off = (size_t)snprintf(piece, sizeof piece, "%zx\r\n", len);
            memset(piece + off, 'a', len);
            memcpy(piece + off + len, "\r\n", 2);
            total = off + len + 2;
        } else {
            memset(piece, 'a', len);
        }
        ok = send(fd, piece, total, MSG_NOSIGNAL) == (ssize_t)total;
        sent += len;
    }
    if (ok && chunked) ok = send(fd, "0\r\n\r\n", 5, MSG_NOSIGNAL) == 5;
    char buf[1024];
    size_t got = 0;
    struct pollfd p = {.fd = fd, .events = POLLIN};
    for (long long end = h_now_ms() + 15000; got < sizeof buf - 1 && h_now_ms() < end;) {
        if (poll(&p, 1, 100) <= 0) continue;
        ssize_t r = recv(fd, buf + got, sizeof buf - 1 - got, 0);
        if (r <= 0) break;
        got += (size_t)r;
        buf[got] = '\0';
        if (strstr(buf, "\r\n\r\n")) break;
    }
    close(fd);
    buf[got] = '\0';
    int status = 0;
    if (sscanf(buf, "HTTP/1.%*d %d", &status) != 1) status = 0;
    return status;
}

/* 20 tries of each framing and two sizes (under 1 MiB, nginx's default
 * cap and the gateway's drain bound): every one a 413. */
static void over_limit_through(const char *proxy, int port, const char *prefix) {
    static const size_t sizes[] = {200 * 1024, 900 * 1024};
    for (int chunked = 0; chunked <= 1; chunked++)
        for (size_t s = 0; s < 2; s++) {
            int got413 = 0, other = 0;
            for (int i = 0; i < 20; i++) {
                int st = post_big(port, prefix, sizes[s], chunked);
                if (st == 413)
                    got413++;
                else if (other++ == 0)
                    fprintf(stderr, "  %s, %s, %zu KiB: %d\n", proxy,
                            chunked ? "chunked" : "Content-Length", sizes[s] / 1024, st);
            }
            printf("  (%s, %s, %zu KiB: 413 in %d of 20)\n", proxy,
                   chunked ? "chunked" : "Content-Length", sizes[s] / 1024, got413);
            CHECK_EQ_INT(got413, 20);
        }
    if (strncmp(proxy, "nginx", 5) == 0 && check_cur_failed) {
        char cmd[200];
        snprintf(cmd, sizeof cmd, "tail -n 5 %s/nginx-error.log | sed 's/^/    nginx: /' >&2", dir);
        if (system(cmd) != 0) fprintf(stderr, "    (no nginx log)\n");
    }
    struct h_resp r = h_http("GET", gw.port, "/v1/locks/proxy-big", NULL, NULL, NULL);
    CHECK_EQ_INT(r.status, 404); /* nothing was taken */
    h_resp_free(&r);
}

static void test_proxy_nginx_forwards_413(void) { over_limit_through("nginx", nginx_port, ""); }

static void test_proxy_nginx_streaming_forwards_413(void) {
    over_limit_through("nginx (proxy_request_buffering off)", nginx_port, "/stream");
}

static void test_proxy_haproxy_forwards_413(void) {
    over_limit_through("haproxy", haproxy_port, "");
}

/* Directly: a chunked body is answered as soon as it passes the limit,
 * not after it ends (before #30, 5 MB were read first). */
static void test_proxy_chunked_stops_at_limit(void) {
    int fd = h_connect(gw.port);
    const char *head = "POST /v1/locks/proxy-chunked HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                       "Transfer-Encoding: chunked\r\n\r\n";
    CHECK(send(fd, head, strlen(head), MSG_NOSIGNAL) == (ssize_t)strlen(head));
    static char piece[16384 + 16];
    int off = snprintf(piece, sizeof piece, "4000\r\n");
    memset(piece + off, 'a', 16384);
    memcpy(piece + off + 16384, "\r\n", 2);
    size_t sent = 0, total = 5 * 1024 * 1024;
    char buf[512] = "";
    struct pollfd p = {.fd = fd, .events = POLLIN};
    while (sent < total) {
        if (send(fd, piece, (size_t)off + 16386, MSG_NOSIGNAL) < 0) break;
        sent += 16384;
        if (poll(&p, 1, 10) > 0) break; /* the answer came */
    }
    ssize_t n = recv(fd, buf, sizeof buf - 1, 0);
    buf[n > 0 ? n : 0] = '\0';
    close(fd);
    printf("  (the 413 came after %zu KiB of a 5 MiB chunked body)\n", sent / 1024);
    CHECK(strncmp(buf, "HTTP/1.1 413", 12) == 0);
    CHECK(strstr(buf, "application/problem+json") != NULL);
    CHECK(sent < total);
}

/* ---- waiting behind a proxy (README, "Behind a proxy") ---------------------- */

/* Holds name directly for ttl_ms; returns its token in tok. */
static void hold(const char *name, int ttl_ms, char *tok) {
    char path[128], body[64];
    snprintf(path, sizeof path, "/v1/locks/%s", name);
    snprintf(body, sizeof body, "{\"ttl_ms\":%d}", ttl_ms);
    struct h_resp r = h_http("POST", gw.port, path, NULL, body, NULL);
    CHECK_EQ_INT(r.status, 201);
    snprintf(tok, 130, "%s", h_token(&r));
    h_resp_free(&r);
}

static void release(const char *name, const char *tok) {
    char path[128];
    snprintf(path, sizeof path, "/v1/locks/%s", name);
    struct h_resp r = h_http("DELETE", gw.port, path, tok, NULL, NULL);
    CHECK_EQ_INT(r.status, 200);
    h_resp_free(&r);
}

/* Waits until the gateway has want requests waiting; 0, or -1 after 5 s. */
static int waiting_becomes(long long want) {
    for (long long end = h_now_ms() + 5000; h_now_ms() < end; h_sleep_ms(20))
        if (h_metric(&gw, "lockgate_waiting_requests") == want) return 0;
    return -1;
}

/* Sends a waiting acquire of name through port (path prefix prefix) on a
 * new connection and returns the descriptor, the answer unread. */
static int send_wait(int port, const char *prefix, const char *name, int wait_ms) {
    int fd = h_connect(port);
    char req[512];
    char body[96];
    snprintf(body, sizeof body, "{\"ttl_ms\":60000,\"wait_ms\":%d}", wait_ms);
    snprintf(req, sizeof req,
             "POST %s/v1/locks/%s HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: %zu\r\n"
             "Connection: close\r\n\r\n%s",
             prefix, name, strlen(body), body);
    if (fd >= 0 && send(fd, req, strlen(req), MSG_NOSIGNAL) < 0) {}
    return fd;
}

/* The status of the answer on fd (read within timeout_ms), 0 for none. */
static int read_status(int fd, int timeout_ms) {
    char buf[256] = "";
    struct pollfd p = {.fd = fd, .events = POLLIN};
    int status = 0;
    if (poll(&p, 1, timeout_ms) > 0) {
        ssize_t n = recv(fd, buf, sizeof buf - 1, 0);
        buf[n > 0 ? n : 0] = '\0';
        if (sscanf(buf, "HTTP/1.%*d %d", &status) != 1) status = 0;
    }
    return status;
}

static long status_of(const char *name) {
    char path[128];
    snprintf(path, sizeof path, "/v1/locks/%s", name);
    struct h_resp r = h_http("GET", gw.port, path, NULL, NULL, NULL);
    long st = r.status;
    h_resp_free(&r);
    return st;
}

/* A wait through each proxy, with timeouts above it, ends in the grant
 * when the holder releases. */
static void test_proxy_wait_granted_through_both(void) {
    const struct {
        const char *what;
        int port;
    } proxies[] = {
        {"nginx",   0},
        {"haproxy", 0}
    };
    for (int i = 0; i < 2; i++) {
        int port = i == 0 ? nginx_port : haproxy_port;
        char tok[130], name[64];
        snprintf(name, sizeof name, "proxy-wait-%s", proxies[i].what);
        hold(name, 60000, tok);
        int fd = send_wait(port, "", name, 20000);
        CHECK_EQ_INT(waiting_becomes(1), 0);
        release(name, tok);
        CHECK_EQ_INT(read_status(fd, 10000), 201);
        close(fd);
    }
}

/* A client that leaves while it waits.  nginx closes its connection to
 * the gateway, which drops the waiter: the lock stays free.  HAProxy keeps
 * its connection to the gateway: the waiter is granted with nobody there,
 * and the lock is held until that grant's lease ends. */
static void test_proxy_client_leaves_mid_wait(void) {
    char tok[130];
    hold("proxy-leave-nginx", 60000, tok);
    int fd = send_wait(nginx_port, "", "proxy-leave-nginx", 20000);
    CHECK_EQ_INT(waiting_becomes(1), 0);
    close(fd);
    CHECK_EQ_INT(waiting_becomes(0), 0); /* nginx let the gateway know */
    release("proxy-leave-nginx", tok);
    CHECK_EQ_INT(status_of("proxy-leave-nginx"), 404);

    hold("proxy-leave-haproxy", 60000, tok);
    fd = send_wait(haproxy_port, "", "proxy-leave-haproxy", 20000);
    CHECK_EQ_INT(waiting_becomes(1), 0);
    close(fd);
    h_sleep_ms(500);
    CHECK_EQ_INT(h_metric(&gw, "lockgate_waiting_requests"), 1); /* still waiting */
    release("proxy-leave-haproxy", tok);
    CHECK_EQ_INT(waiting_becomes(0), 0);
    CHECK_EQ_INT(status_of("proxy-leave-haproxy"), 200); /* granted to nobody */
}

/* A proxy timeout below the wait: the client gets 504 while the gateway
 * still waits; both proxies then close their connection to the gateway,
 * which drops the waiter, so a release after the 504 leaves the lock free.
 * (A release in the same instant as the timeout can still grant it: the
 * lock is then held for its lease, see README.) */
static void test_proxy_timeout_504(void) {
    for (int i = 0; i < 2; i++) {
        const char *name = i == 0 ? "proxy-504-nginx" : "proxy-504-haproxy";
        char tok[130];
        hold(name, 60000, tok);
        long long t0 = h_now_ms();
        int fd = i == 0 ? send_wait(nginx_port, "/short", name, 20000)
                        : send_wait(haproxy_short_port, "", name, 20000);
        int st = read_status(fd, 10000);
        long long took = h_now_ms() - t0;
        printf("  (%s: %d after %lld ms of a 20 s wait)\n", i == 0 ? "nginx" : "haproxy", st, took);
        CHECK_EQ_INT(st, 504);
        close(fd);
        CHECK_EQ_INT(waiting_becomes(0), 0);
        release(name, tok);
        CHECK_EQ_INT(status_of(name), 404);
    }
}

/* Reads fd until its bytes so far contain needle: 0, or -1 after
 * timeout_ms or at the end of the stream. */
static int read_until(int fd, const char *needle, int timeout_ms) {
    static char buf[16384];
    size_t len = 0;
    for (long long end = h_now_ms() + timeout_ms; h_now_ms() < end;) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, 50) <= 0) continue;
        ssize_t n = read(fd, buf + len, sizeof buf - 1 - len);
        if (n <= 0) return -1;
        len += (size_t)n;
        buf[len] = '\0';
        if (strstr(buf, needle)) return 0;
        if (len > sizeof buf / 2) { /* keep the tail */
            memmove(buf, buf + len - 256, 256);
            len = 256;
        }
    }
    return -1;
}

/* A hold bound to its connection (Accept: text/event-stream) through each
 * proxy: the grant comes through at once (nginx unbuffered by the
 * gateway's X-Accel-Buffering: no), heartbeats too, and a client that
 * leaves releases it once the proxy closes its connection to the gateway:
 * nginx at once (it watches its client), HAProxy when it next forwards
 * bytes, a heartbeat (this gateway's: 200 ms). */
static void test_proxy_stream_hold(void) {
    for (int i = 0; i < 2; i++) {
        const char *what = i == 0 ? "nginx" : "haproxy";
        char name[64], req[512], path[96];
        snprintf(name, sizeof name, "proxy-stream-%s", what);
        snprintf(path, sizeof path, "/v1/locks/%s", name);
        int fd = h_connect(i == 0 ? nginx_port : haproxy_port);
        int n = snprintf(req, sizeof req,
                         "POST %s HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/event-stream\r\n"
                         "Content-Length: 2\r\n\r\n{}",
                         path);
        CHECK(write(fd, req, (size_t)n) == n);
        CHECK_EQ_INT(read_until(fd, "event: granted", 5000), 0);
        CHECK_EQ_INT(read_until(fd, "\n:\n", 2000), 0); /* a heartbeat came through */
        CHECK_EQ_INT(status_of(name), 200);
        long long t0 = h_now_ms();
        close(fd);
        long long freed = -1;
        for (long long end = h_now_ms() + 10000; h_now_ms() < end; h_sleep_ms(5))
            if (status_of(name) == 404) {
                freed = h_now_ms() - t0;
                break;
            }
        printf("  (%s: a stream hold released %lld ms after its client left)\n", what, freed);
        CHECK(freed >= 0 && freed < 2000);
    }
}

int main(int argc, char **argv) {
    check_filter(argc > 1 ? argv[1] : NULL);
    snprintf(dir, sizeof dir, "/tmp/lockgate-proxy-XXXXXX");
    if (!mkdtemp(dir)) return 1;
    if (h_redis_start(&redis, 0, NULL) < 0 || h_gw_up(&gw, &redis, "--stream-heartbeat-ms 200") < 0)
        return 1;
    if (start_nginx() < 0 || start_haproxy() < 0) {
        fprintf(stderr, "proxy: nginx or haproxy did not start (scripts/deps.sh installs them)\n");
        return 1;
    }
    RUN_SOME(test_proxy_chunked_stops_at_limit);
    RUN_SOME(test_proxy_nginx_forwards_413);
    RUN_SOME(test_proxy_nginx_streaming_forwards_413);
    RUN_SOME(test_proxy_haproxy_forwards_413);
    RUN_SOME(test_proxy_wait_granted_through_both);
    RUN_SOME(test_proxy_client_leaves_mid_wait);
    RUN_SOME(test_proxy_timeout_504);
    RUN_SOME(test_proxy_stream_hold);
    h_gw_stop(&gw, 5000);
    h_redis_stop(&redis);
    char rm[128];
    snprintf(rm, sizeof rm, "rm -rf %s", dir);
    if (system(rm) != 0) fprintf(stderr, "could not remove %s\n", dir);
    return check_summary("proxy");
}
