/* test_fleet.c -- the event core in front of a fleet (issue #15), end to end.
 *
 *   1. With thousands of idle keep-alive connections open (each sent one
 *      GET /healthz, then stayed silent): locks, waiting, a fair hand-off
 *      and ids are still served correctly, and every idle connection is
 *      still answered afterwards.
 *   2. Waiters parked on one worker are woken by releases made through
 *      another worker of the same gateway: 16 waiters, each released on a
 *      new connection, with --workers 4.  The kernel spreads connections
 *      over the workers' sockets (SO_REUSEPORT) by their addresses, so
 *      that no release lands on another worker than its waiter's has a
 *      chance of (1/4)^16.
 *   3. ... and through another gateway.
 *
 * These test behaviour, not timing: every wait is generous. */
#define _GNU_SOURCE /* strcasestr */
#include "tests/integration/harness.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static struct h_redis redis;

/* ---- raw keep-alive connections ------------------------------------------------ */

static int send_req(int fd, const char *method, const char *path, const char *token,
                    const char *body) {
    char req[1024];
    int n = snprintf(req, sizeof req,
                     "%s %s HTTP/1.1\r\nHost: 127.0.0.1\r\n%s%s%sContent-Type: application/json\r\n"
                     "Content-Length: %zu\r\n\r\n%s",
                     method, path, token ? "Lock-Token: " : "", token ? token : "",
                     token ? "\r\n" : "", body ? strlen(body) : 0, body ? body : "");
    return write(fd, req, (size_t)n) == n ? 0 : -1;
}

/* Reads one whole answer (headers and Content-Length body) into out;
 * returns its status, or 0 when none came within timeout_ms. */
static int read_answer(int fd, char *out, size_t cap, int timeout_ms) {
    size_t len = 0;
    long long end = h_now_ms() + timeout_ms;
    out[0] = '\0';
    for (;;) {
        char *head_end = strstr(out, "\r\n\r\n");
        if (head_end) {
            const char *cl = strcasestr(out, "Content-Length:");
            size_t body = cl && cl < head_end ? (size_t)atol(cl + 15) : 0;
            if (len >= (size_t)(head_end + 4 - out) + body) break;
        }
        long long left = end - h_now_ms();
        if (left <= 0 || len + 1 >= cap) return 0;
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, (int)left) <= 0) return 0;
        ssize_t r = read(fd, out + len, cap - 1 - len);
        if (r <= 0) return 0;
        len += (size_t)r;
        out[len] = '\0';
    }
    int status = 0;
    sscanf(out, "HTTP/1.1 %d", &status);
    return status;
}

/* 1 when nothing has arrived on fd within ms. */
static int silent(int fd, int ms) {
    struct pollfd p = {.fd = fd, .events = POLLIN};
    return poll(&p, 1, ms) == 0;
}

/* The Lock-Token header of an answer, copied into tok. */
static void answer_token(const char *answer, char *tok, size_t cap) {
    const char *t = strcasestr(answer, "Lock-Token: ");
    tok[0] = '\0';
    if (t) snprintf(tok, cap, "%.*s", (int)strcspn(t + 12, "\r\n"), t + 12);
}

/* Opens n connections that each ask GET /healthz once; returns how many
 * were answered 200 (fds[] holds them all, -1 where connect failed). */
static int open_idle(int port, int *fds, int n) {
    char buf[1024];
    for (int i = 0; i < n; i++) {
        fds[i] = h_connect(port);
        if (fds[i] >= 0) send_req(fds[i], "GET", "/healthz", NULL, NULL);
    }
    int ok = 0;
    for (int i = 0; i < n; i++)
        if (fds[i] >= 0 && read_answer(fds[i], buf, sizeof buf, 10000) == 200) ok++;
    return ok;
}

static int ask_idle_again(int *fds, int n) {
    char buf[1024];
    for (int i = 0; i < n; i++)
        if (fds[i] >= 0) send_req(fds[i], "GET", "/healthz", NULL, NULL);
    int ok = 0;
    for (int i = 0; i < n; i++)
        if (fds[i] >= 0 && read_answer(fds[i], buf, sizeof buf, 10000) == 200) ok++;
    return ok;
}

/* Waits until the gateway reports n parked waiters; 0, or -1 after 10 s. */
static int wait_parked(struct h_gw *g, long long n) {
    for (int i = 0; i < 1000; i++) {
        if (h_metric(g, "lockgate_waiting_requests") >= n) return 0;
        h_sleep_ms(10);
    }
    return -1;
}

/* ---- 1. thousands of idle connections -------------------------------------------- */

#define NIDLE 3000

static void test_served_beside_idle(void) {
    h_raise_nofile(NIDLE * 2 + 512);
    struct h_gw gw;
    CHECK_EQ_INT(h_gw_up(&gw, &redis, NULL), 0);
    static int idle[NIDLE];
    int open = open_idle(gw.port, idle, NIDLE);
    fprintf(stderr, "    %d idle connections open and answered\n", open);
    CHECK_EQ_INT(open, NIDLE);

    /* locks */
    struct h_resp a =
        h_http("POST", gw.port, "/v1/locks/fleet-l", NULL, "{\"ttl_ms\":10000}", NULL);
    CHECK_EQ_INT(a.status, 201);
    struct h_resp busy =
        h_http("POST", gw.port, "/v1/locks/fleet-l", NULL, "{\"ttl_ms\":10000}", NULL);
    CHECK_EQ_STR(h_jcode(&busy), "lock_busy");
    struct h_resp rel = h_http("DELETE", gw.port, "/v1/locks/fleet-l", h_token(&a), NULL, NULL);
    CHECK_EQ_INT(rel.status, 200);
    h_resp_free(&a);
    h_resp_free(&busy);
    h_resp_free(&rel);

    /* waiting: a waiter is handed the lock on release */
    a = h_http("POST", gw.port, "/v1/locks/fleet-w", NULL, "{\"ttl_ms\":10000}", NULL);
    CHECK_EQ_INT(a.status, 201);
    int w = h_connect(gw.port);
    send_req(w, "POST", "/v1/locks/fleet-w", NULL, "{\"ttl_ms\":10000,\"wait_ms\":20000}");
    CHECK_EQ_INT(wait_parked(&gw, 1), 0);
    rel = h_http("DELETE", gw.port, "/v1/locks/fleet-w", h_token(&a), NULL, NULL);
    CHECK_EQ_INT(rel.status, 200);
    char buf[2048];
    CHECK_EQ_INT(read_answer(w, buf, sizeof buf, 10000), 201);
    close(w);
    h_resp_free(&a);
    h_resp_free(&rel);

    /* fair hand-off: three fair waiters get the lock in arrival order */
    a = h_http("POST", gw.port, "/v1/locks/fleet-f", NULL, "{\"ttl_ms\":10000}", NULL);
    CHECK_EQ_INT(a.status, 201);
    int f[3];
    for (int i = 0; i < 3; i++) {
        f[i] = h_connect(gw.port);
        send_req(f[i], "POST", "/v1/locks/fleet-f", NULL,
                 "{\"ttl_ms\":10000,\"wait_ms\":20000,\"fair\":true}");
        CHECK_EQ_INT(wait_parked(&gw, i + 1), 0);
    }
    char tok[64];
    snprintf(tok, sizeof tok, "%s", h_token(&a));
    h_resp_free(&a);
    for (int i = 0; i < 3; i++) {
        rel = h_http("DELETE", gw.port, "/v1/locks/fleet-f", tok, NULL, NULL);
        CHECK_EQ_INT(rel.status, 200);
        h_resp_free(&rel);
        CHECK_EQ_INT(read_answer(f[i], buf, sizeof buf, 10000), 201);
        answer_token(buf, tok, sizeof tok);
        for (int k = i + 1; k < 3; k++) CHECK(silent(f[k], 50)); /* still waiting */
    }
    rel = h_http("DELETE", gw.port, "/v1/locks/fleet-f", tok, NULL, NULL);
    CHECK_EQ_INT(rel.status, 200);
    h_resp_free(&rel);
    for (int i = 0; i < 3; i++) close(f[i]);

    /* ids: unique and increasing */
    unsigned long long last = 0;
    int ids_ok = 1;
    for (int i = 0; i < 5; i++) {
        struct h_resp r = h_http("POST", gw.port, "/v1/ids/fleet?count=100", NULL, NULL, NULL);
        CHECK_EQ_INT(r.status, 200);
        cJSON *ids = r.json ? cJSON_GetObjectItem(r.json, "ids") : NULL;
        CHECK(cJSON_GetArraySize(ids) == 100);
        for (int k = 0; k < cJSON_GetArraySize(ids); k++) {
            unsigned long long id = strtoull(cJSON_GetArrayItem(ids, k)->valuestring, NULL, 10);
            if (id <= last) ids_ok = 0;
            last = id;
        }
        h_resp_free(&r);
    }
    CHECK(ids_ok);

    int again = ask_idle_again(idle, NIDLE);
    fprintf(stderr, "    %d idle connections answered again\n", again);
    CHECK_EQ_INT(again, NIDLE);
    for (int i = 0; i < NIDLE; i++)
        if (idle[i] >= 0) close(idle[i]);
    CHECK_EQ_INT(h_gw_stop(&gw, 10000), 0);
}

/* ---- 2 and 3. woken across workers and gateways ---------------------------------- */

#define NPAIRS 16

/* NPAIRS locks held through gateway `hold`, a waiter on each through
 * `wait`, released through `release` on new connections: every waiter gets
 * its lock. */
static void wake_across(struct h_gw *hold, struct h_gw *wait, struct h_gw *release,
                        const char *prefix) {
    char path[NPAIRS][64], tok[NPAIRS][64], buf[2048];
    int w[NPAIRS];
    long long parked0 = h_metric(wait, "lockgate_waiting_requests");
    for (int i = 0; i < NPAIRS; i++) {
        snprintf(path[i], sizeof path[i], "/v1/locks/%s-%d", prefix, i);
        struct h_resp a = h_http("POST", hold->port, path[i], NULL, "{\"ttl_ms\":20000}", NULL);
        CHECK_EQ_INT(a.status, 201);
        snprintf(tok[i], sizeof tok[i], "%s", h_token(&a));
        h_resp_free(&a);
        w[i] = h_connect(wait->port);
        send_req(w[i], "POST", path[i], NULL, "{\"ttl_ms\":10000,\"wait_ms\":30000}");
    }
    CHECK_EQ_INT(wait_parked(wait, parked0 + NPAIRS), 0);
    for (int i = 0; i < NPAIRS; i++) {
        struct h_resp r = h_http("DELETE", release->port, path[i], tok[i], NULL, NULL);
        CHECK_EQ_INT(r.status, 200);
        h_resp_free(&r);
    }
    int woken = 0;
    for (int i = 0; i < NPAIRS; i++) {
        if (read_answer(w[i], buf, sizeof buf, 10000) == 201) woken++;
        close(w[i]);
    }
    fprintf(stderr, "    %s: %d of %d waiters woken\n", prefix, woken, NPAIRS);
    CHECK_EQ_INT(woken, NPAIRS);
}

static void test_woken_across_workers(void) {
    struct h_gw gw;
    CHECK_EQ_INT(h_gw_up(&gw, &redis, "--workers 4"), 0);
    wake_across(&gw, &gw, &gw, "xworker");
    CHECK_EQ_INT(h_gw_stop(&gw, 10000), 0);
}

static void test_woken_across_gateways(void) {
    struct h_gw a, b;
    CHECK_EQ_INT(h_gw_up(&a, &redis, "--workers 2"), 0);
    CHECK_EQ_INT(h_gw_up(&b, &redis, "--workers 3"), 0);
    wake_across(&a, &a, &b, "xgateway");
    wake_across(&b, &b, &a, "xgateway-back");
    CHECK_EQ_INT(h_gw_stop(&a, 10000), 0);
    CHECK_EQ_INT(h_gw_stop(&b, 10000), 0);
}

int main(int argc, char **argv) {
    check_filter(argc > 1 ? argv[1] : NULL);
    if (h_redis_start(&redis, 0, NULL) < 0) return 1;
    RUN_SOME(test_served_beside_idle);
    RUN_SOME(test_woken_across_workers);
    RUN_SOME(test_woken_across_gateways);
    h_redis_stop(&redis);
    return check_summary("fleet");
}
