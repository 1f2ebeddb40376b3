/* test_slow.c -- slow clients are cut off (server/conns.h): connections
 * that dribble their headers (slowloris) are closed by the header
 * deadline, a body that stalls by the body deadline; a normal client is
 * served within a second while 2,000 slow connections are open; at the
 * descriptor limit connections beyond the gateway's share are refused
 * and counted, and Redis reconnections still find descriptors. */
#include "tests/integration/harness.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

static struct h_redis redis;

/* 1 once the server has closed fd (EOF or reset), 0 while it is open. */
static int closed_by_server(int fd) {
    char c;
    ssize_t n = recv(fd, &c, 1, MSG_DONTWAIT);
    return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK);
}

/* n connections that send a request line and then one header byte a
 * second; returns how many seconds until the gateway had closed all of
 * them (or limit_s when it had not). */
static int slowloris(int port, int n, int limit_s) {
    int *fds = calloc((size_t)n, sizeof *fds), open_ = 0;
    for (int i = 0; i < n; i++) {
        fds[i] = h_connect(port);
        if (fds[i] < 0) continue;
        open_++;
        const char *line = "POST /v1/locks/slow HTTP/1.1\r\nHost: x\r\nX-Slow: ";
        if (send(fds[i], line, strlen(line), MSG_NOSIGNAL) < 0) {}
    }
    CHECK_EQ_INT(open_, n);
    long long start = h_now_ms();
    int secs = limit_s;
    for (int s = 1; s <= limit_s; s++) {
        while (h_now_ms() < start + s * 1000LL) h_sleep_ms(20);
        int still = 0;
        for (int i = 0; i < n; i++) {
            if (fds[i] < 0) continue;
            if (closed_by_server(fds[i]) || send(fds[i], "a", 1, MSG_NOSIGNAL) < 0) {
                close(fds[i]);
                fds[i] = -1;
            } else {
                still++;
            }
        }
        if (!still) {
            secs = s;
            break;
        }
    }
    for (int i = 0; i < n; i++)
        if (fds[i] >= 0) close(fds[i]);
    free(fds);
    return secs;
}

/* Default deadlines: 500 slowloris connections all closed within 15 s
 * (before #30 all were open after 70 s), counted in /metrics. */
static void test_slow_headers_cut_off(void) {
    struct h_gw g = {0};
    CHECK_EQ_INT(h_gw_up(&g, &redis, NULL), 0);
    int secs = slowloris(g.port, 500, 16);
    printf("  (500 slowloris connections all closed after %d s)\n", secs);
    CHECK(secs <= 15 && secs >= 9); /* the 10 s default, not sooner */
    CHECK(h_metric(&g, "lockgate_slow_clients_closed_total") >= 500);
    struct h_resp r = h_http("GET", g.port, "/healthz", NULL, NULL, NULL);
    CHECK_EQ_INT(r.status, 200);
    h_resp_free(&r);
    h_gw_stop(&g, 5000);
}

/* A body that stops coming is cut off by the body deadline; a request
 * that waits (wait_ms) longer than either deadline is not. */
static void test_slow_body_cut_off(void) {
    struct h_gw g = {0};
    CHECK_EQ_INT(h_gw_up(&g, &redis, "--header-timeout-ms 1000 --body-timeout-ms 1000"), 0);
    int fd = h_connect(g.port);
    const char *req = "POST /v1/locks/slow-body HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n"
                      "{\"ttl_ms\":";
    CHECK(send(fd, req, strlen(req), MSG_NOSIGNAL) == (ssize_t)strlen(req));
    long long t0 = h_now_ms();
    struct pollfd p = {.fd = fd, .events = POLLIN};
    while (!closed_by_server(fd) && h_now_ms() - t0 < 10000) poll(&p, 1, 100);
    long long took = h_now_ms() - t0;
    printf("  (a stalled body was cut off after %lld ms)\n", took);
    CHECK(took >= 900 && took < 5000);
    close(fd);
    /* Waiting is not slowness: held, then a 3 s wait that gets it. */
    struct h_resp r =
        h_http("POST", g.port, "/v1/locks/slow-wait", NULL, "{\"ttl_ms\":2500}", NULL);
    CHECK_EQ_INT(r.status, 201);
    h_resp_free(&r);
    r = h_http("POST", g.port, "/v1/locks/slow-wait", NULL, "{\"wait_ms\":10000}", NULL);
    CHECK_EQ_INT(r.status, 201);
    CHECK(r.seconds > 1.5);
    h_resp_free(&r);
    h_gw_stop(&g, 5000);
}

/* 2,000 connections that sent part of their headers and then nothing: a
 * normal client is still served within a second. */
static void test_slow_2000_open_normal_served(void) {
    h_raise_nofile(8192);
    struct h_gw g = {0};
    CHECK_EQ_INT(h_gw_up(&g, &redis, "--header-timeout-ms 60000"), 0);
    enum { N = 2000 };
    static int fds[N];
    int opened = 0;
    for (int i = 0; i < N; i++) {
        fds[i] = h_connect(g.port);
        if (fds[i] < 0) continue;
        opened++;
        const char *part = "POST /v1/locks/slow HTTP/1.1\r\nHost: x\r\nX-Part: ";
        if (send(fds[i], part, strlen(part), MSG_NOSIGNAL) < 0) {}
    }
    CHECK_EQ_INT(opened, N);
    double worst = 0;
    for (int i = 0; i < 10; i++) {
        char path[64];
        snprintf(path, sizeof path, "/v1/locks/slow-normal-%d", i);
        struct h_resp r = h_http("POST", g.port, path, NULL, "{}", NULL);
        CHECK_EQ_INT(r.status, 201);
        if (r.seconds > worst) worst = r.seconds;
        h_resp_free(&r);
    }
    printf("  (with 2000 slow connections open: slowest of 10 acquires %.3f s)\n", worst);
    CHECK(worst < 1.0);
    int still = 0;
    for (int i = 0; i < N; i++) {
        if (fds[i] >= 0 && !closed_by_server(fds[i])) still++;
        if (fds[i] >= 0) close(fds[i]);
    }
    CHECK_EQ_INT(still, N); /* they were all open meanwhile */
    h_gw_stop(&g, 5000);
}

/* Lines of g's log holding needle. */
/* A gateway with 300 descriptors: its connection limit keeps descriptors
 * back, so 400 clients get 250-odd connections, the rest are refused,
 * counted and logged (not left hanging), and when Redis drops the
 * gateway's connections it reconnects at once and serves. */
static void test_slow_descriptors_held_back(void) {
    struct h_gw g = {0};
    CHECK_EQ_INT(h_gw_start_env(&g, &redis, "--workers 1 --header-timeout-ms 60000",
                                "prlimit --nofile=300:300"),
                 0);
    enum { N = 400 };
    static int fds[N];
    for (int i = 0; i < N; i++) {
        fds[i] = h_connect(g.port);
        const char *part = "GET /healthz HTTP/1.1\r\nHost: x\r\nX-Part: ";
        if (fds[i] >= 0 && send(fds[i], part, strlen(part), MSG_NOSIGNAL) < 0) {}
    }
    long long refused = -1;
    for (long long end = h_now_ms() + 10000; h_now_ms() < end; h_sleep_ms(50)) {
        int shut = 0;
        for (int i = 0; i < N; i++) shut += fds[i] >= 0 && closed_by_server(fds[i]);
        if (shut >= N - 204) break;
    }
    /* Redis drops every client: the gateway must reconnect while its
     * connections are at their limit. */
    CHECK(h_redis_cli(&redis, "CLIENT KILL TYPE normal") != NULL);
    CHECK(h_redis_cli(&redis, "CLIENT KILL TYPE pubsub") != NULL);
    h_sleep_ms(300);
    for (int i = 0; i < 20; i++) close(fds[i]), fds[i] = -1; /* room for the test's client */
    long status = 0;
    for (long long end = h_now_ms() + 10000; h_now_ms() < end && status != 201; h_sleep_ms(100)) {
        struct h_resp r = h_http("POST", g.port, "/v1/locks/slow-fds", NULL, "{}", NULL);
        status = r.status;
        h_resp_free(&r);
    }
    CHECK_EQ_INT(status, 201);
    refused = h_metric(&g, "lockgate_accept_refused_total");
    printf("  (400 clients, 300 descriptors: %lld refused)\n", refused);
    CHECK(refused >= N - 210);
    CHECK(h_log_count(&g, "not accepted in the last second") >= 1);
    CHECK_EQ_INT(h_log_count(&g, "Too many open files"), 0);
    for (int i = 0; i < N; i++)
        if (fds[i] >= 0) close(fds[i]);
    h_gw_stop(&g, 5000);
}

/* A client that pipelines 20 batches of 10,000 ids and reads nothing:
 * once a quarter MiB of answers waits in its socket, its next requests
 * are not handled (before #30 all 20 were, megabytes queued for it).
 * When it reads, the rest are handled in order and all 20 arrive. */
static void test_slow_nonreading_held_back(void) {
    struct h_gw g = {0};
    CHECK_EQ_INT(h_gw_up(&g, &redis, NULL), 0);
    /* a small receive buffer, set before connecting (the window scale is
     * agreed then), so that answers stay in the gateway's send queue */
    int fd = socket(AF_INET, SOCK_STREAM, 0), small = 4096;
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_port = htons((uint16_t)g.port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    CHECK_EQ_INT(connect(fd, (struct sockaddr *)&a, sizeof a), 0);
    const char *one = "POST /v1/ids/slow-x?count=10000 HTTP/1.1\r\nHost: x\r\n"
                      "Content-Length: 0\r\n\r\n";
    char all[20 * 128] = "";
    for (int i = 0; i < 20; i++) strcat(all, one);
    CHECK(send(fd, all, strlen(all), MSG_NOSIGNAL) == (ssize_t)strlen(all));
    long long issued = -1, last = -2;
    for (long long end = h_now_ms() + 10000; h_now_ms() < end && issued != last; h_sleep_ms(300)) {
        last = issued;
        issued = h_metric(&g, "lockgate_ids_issued_total");
    }
    printf("  (a client that does not read: %lld of 20 batches handled)\n", issued / 10000);
    CHECK(issued >= 10000 && issued <= 3 * 10000);
    /* now it reads: every answer comes */
    static char buf[1 << 16];
    int answers = 0;
    size_t tail = 0;
    struct pollfd p = {.fd = fd, .events = POLLIN};
    for (long long end = h_now_ms() + 20000; answers < 20 && h_now_ms() < end;) {
        if (poll(&p, 1, 200) <= 0) continue;
        ssize_t n = recv(fd, buf + tail, sizeof buf - 1 - tail, 0);
        if (n <= 0) {
            fprintf(stderr, "  recv: %zd (%s) after %d answers\n", n, strerror(errno), answers);
            break;
        }
        buf[tail + (size_t)n] = '\0';
        /* a match that ends in the kept bytes was counted last time */
        for (char *q = buf; (q = strstr(q, "HTTP/1.1 200 ")) != NULL; q += 13)
            if (q + 13 > buf + tail) answers++;
        /* keep the last few bytes: a status line may straddle two reads */
        size_t len = tail + (size_t)n;
        tail = len < 16 ? len : 16;
        memmove(buf, buf + len - tail, tail);
    }
    close(fd);
    CHECK_EQ_INT(answers, 20);
    CHECK_EQ_INT(h_metric(&g, "lockgate_ids_issued_total"), 20 * 10000);
    h_gw_stop(&g, 5000);
}

int main(int argc, char **argv) {
    check_filter(argc > 1 ? argv[1] : NULL);
    if (h_redis_start(&redis, 0, NULL) < 0) return 1;
    RUN_SOME(test_slow_body_cut_off);
    RUN_SOME(test_slow_headers_cut_off);
    RUN_SOME(test_slow_2000_open_normal_served);
    RUN_SOME(test_slow_descriptors_held_back);
    RUN_SOME(test_slow_nonreading_held_back);
    h_redis_stop(&redis);
    return check_summary("slow");
}
