/* test_wait.c -- issue 4 against the real binary and a real redis-server:
 * waiting without polling (wait_ms), fair queues, shared (reader) locks,
 * semaphores, the waiting metrics, shutdown while requests wait, and a
 * thousand waiters on a fixed number of threads.
 *
 * Concurrent clients are threads, each with its own libcurl calls; a client
 * that must vanish mid-wait, and the thousand, are raw sockets.  No CHECK
 * runs on a client thread: threads record, the main thread checks.
 *
 * Time bounds: "at once" is SLACK_MS, generous for a busy 2-core machine
 * yet far below what a poller or a 5 s dead-waiter penalty would take.
 * Lower bounds are asserted only where the point is "not before": a lease
 * end, a wait deadline.
 *
 * `build/tests/test_wait NAME` runs only the tests whose names contain NAME;
 * with WAIT_LOGDIR=/some/dir the gateways' logs are kept there. */
#include "tests/integration/harness.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static struct h_redis redis;
static struct h_gw gw, gw2;

#define SLACK_MS 300

#define H(method, path, token, body) h_http(method, gw.port, path, token, body, NULL)

/* The Lock-Token of an answer, "" when there is none (then later checks
 * fail instead of crashing). */
static char *dup_token(struct h_resp *r) {
    const char *t = h_header(r, "Lock-Token");
    return strdup(t ? t : "");
}

/* ---- a client on its own thread ------------------------------------------------ */

static atomic_int inside;       /* holders inside their critical section now */
static atomic_int acquired_seq; /* acquisitions so far (gives each its order) */

struct call {
    pthread_t th;
    int port;
    const char *method;
    char path[256];
    char token[160];
    char body[512];
    int hold_ms;          /* after a 201: hold this long, then DELETE; < 0: keep it */
    long long t_send;     /* when the request went out */
    long long t_done;     /* when its answer was in */
    long long t_released; /* when its DELETE was answered */
    long status, rel_status;
    char code[40];        /* problem code, "" if none */
    char retry_after[16]; /* Retry-After header, "" if none */
    char got[160];        /* Lock-Token of the answer */
    long long fence;
    int order;   /* its place among the acquisitions, -1 none */
    int overlap; /* someone else was inside when it got in */
    atomic_int done;
};

static void *call_main(void *arg) {
    struct call *c = arg;
    c->t_send = h_now_ms();
    struct h_resp r = h_http(c->method, c->port, c->path, c->token[0] ? c->token : NULL,
                             c->body[0] ? c->body : NULL, NULL);
    c->t_done = h_now_ms();
    c->status = r.status;
    const char *t = h_header(&r, "Lock-Token");
    if (t) snprintf(c->got, sizeof c->got, "%s", t);
    t = h_header(&r, "Retry-After");
    if (t) snprintf(c->retry_after, sizeof c->retry_after, "%s", t);
    if (h_jcode(&r)) snprintf(c->code, sizeof c->code, "%s", h_jcode(&r));
    c->fence = h_jint(&r, "fence");
    h_resp_free(&r);
    if (c->status == 201 && c->hold_ms >= 0) {
        c->overlap = atomic_fetch_add(&inside, 1) != 0;
        c->order = atomic_fetch_add(&acquired_seq, 1);
        h_sleep_ms(c->hold_ms);
        atomic_fetch_sub(&inside, 1);
        struct h_resp d = h_http("DELETE", c->port, c->path, c->got, NULL, NULL);
        c->rel_status = d.status;
        c->t_released = h_now_ms();
        h_resp_free(&d);
    }
    atomic_store(&c->done, 1);
    return NULL;
}

static struct call *call_start(int port, const char *method, const char *path, const char *token,
                               const char *body, int hold_ms) {
    struct call *c = calloc(1, sizeof *c);
    c->port = port;
    c->method = method;
    snprintf(c->path, sizeof c->path, "%s", path);
    if (token) snprintf(c->token, sizeof c->token, "%s", token);
    if (body) snprintf(c->body, sizeof c->body, "%s", body);
    c->hold_ms = hold_ms;
    c->order = -1;
    c->t_send = h_now_ms();
    if (pthread_create(&c->th, NULL, call_main, c) != 0) abort();
    return c;
}

static void call_join(struct call *c) { pthread_join(c->th, NULL); }

/* ---- metrics and processes ------------------------------------------------------ */

/* The value of an unlabelled metric, -1 when absent. */
static double metric(int port, const char *name) {
    struct h_resp r = h_http("GET", port, "/metrics", NULL, NULL, NULL);
    double v = -1;
    size_t n = strlen(name);
    for (const char *p = r.body; p && *p;) {
        if (strncmp(p, name, n) == 0 && p[n] == ' ') {
            v = strtod(p + n + 1, NULL);
            break;
        }
        p = strchr(p, '\n');
        if (p) p++;
    }
    h_resp_free(&r);
    return v;
}

static double waiting(int port) { return metric(port, "lockgate_waiting_requests"); }

/* Waits until `name` reads `want` on the gateway(s); 1 when it did. */
static int wait_metric2(int port_a, int port_b, const char *name, double want, int timeout_ms) {
    long long end = h_now_ms() + timeout_ms;
    for (;;) {
        double v = metric(port_a, name);
        if (port_b) v += metric(port_b, name);
        if (v == want) return 1;
        if (h_now_ms() > end) {
            fprintf(stderr, "    %s is %g, not %g, after %d ms\n", name, v, want, timeout_ms);
            return 0;
        }
        h_sleep_ms(5);
    }
}

static int wait_waiting(int port, int n, int timeout_ms) {
    return wait_metric2(port, 0, "lockgate_waiting_requests", n, timeout_ms);
}

static int thread_count(pid_t pid) {
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/task", (int)pid);
    DIR *d = opendir(path);
    if (!d) return -1;
    int n = 0;
    for (struct dirent *e; (e = readdir(d));)
        if (e->d_name[0] != '.') n++;
    closedir(d);
    return n;
}

static void sleep_until(long long t) {
    long long now = h_now_ms();
    if (t > now) h_sleep_ms((int)(t - now));
}

/* ---- raw-socket clients --------------------------------------------------------- */

/* Sends a POST on a new connection and returns the socket (still open for
 * writing: a half-close would count as hanging up), or -1. */
static int raw_post(int port, const char *path, const char *body) {
    int fd = h_connect(port);
    if (fd < 0) return -1;
    char req[1024];
    int n = snprintf(req, sizeof req,
                     "POST %s HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                     "Content-Length: %zu\r\nConnection: close\r\n\r\n%s",
                     path, strlen(body), body);
    for (int sent = 0; sent < n;) {
        ssize_t w = send(fd, req + sent, (size_t)(n - sent), MSG_NOSIGNAL);
        if (w <= 0) {
            close(fd);
            return -1;
        }
        sent += (int)w;
    }
    return fd;
}

/* Closes with an RST instead of a FIN. */
static void raw_reset(int fd) {
    struct linger l = {1, 0};
    setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof l);
    close(fd);
}

static long raw_status(const char *resp) {
    if (strncmp(resp, "HTTP/1.", 7) != 0 || strlen(resp) < 12) return 0;
    return strtol(resp + 9, NULL, 10);
}

/* Many raw clients, read together in this thread. */
struct rawc {
    int fd;
    char buf[2048];
    size_t len;
    int done;
    long long t_done;
};

/* Reads until every client got its whole answer (the server closes:
 * Connection: close) or timeout_ms passed; returns how many are done. */
static int raw_collect(struct rawc *c, int n, int timeout_ms, int stop_after) {
    struct pollfd *p = calloc((size_t)n, sizeof *p);
    int *idx = calloc((size_t)n, sizeof *idx);
    long long end = h_now_ms() + timeout_ms;
    int done = 0;
    for (int i = 0; i < n; i++) done += c[i].done;
    while (done < n && (stop_after <= 0 || done < stop_after)) {
        int np = 0;
        for (int i = 0; i < n; i++)
            if (!c[i].done) {
                p[np].fd = c[i].fd;
                p[np].events = POLLIN;
                p[np].revents = 0;
                idx[np++] = i;
            }
        int left = (int)(end - h_now_ms());
        if (left <= 0) break;
        if (poll(p, (nfds_t)np, left) <= 0) continue;
        for (int k = 0; k < np; k++) {
            if (!p[k].revents) continue;
            struct rawc *r = &c[idx[k]];
            ssize_t got = recv(r->fd, r->buf + r->len, sizeof r->buf - 1 - r->len, 0);
            if (got > 0) {
                r->len += (size_t)got;
                r->buf[r->len] = '\0';
                if (r->len < sizeof r->buf - 1) continue;
            }
            r->done = 1;
            r->t_done = h_now_ms();
            close(r->fd);
            r->fd = -1;
            done++;
        }
    }
    free(p);
    free(idx);
    return done;
}

/* Starts a gateway of its own for one test; its log goes to $WAIT_LOGDIR
 * (when set, for a look after the run) instead of the throwaway dir. */
static int own_gw_start(struct h_gw *g, const char *tag) {
    memset(g, 0, sizeof *g);
    if (getenv("WAIT_LOGDIR"))
        snprintf(g->log, sizeof g->log, "%s/%s.log", getenv("WAIT_LOGDIR"), tag);
    return h_gw_start(g, &redis, NULL);
}

/* ---- 1. prompt hand-off on release --------------------------------------------- */

static void test_handoff_on_release(void) {
    const char *p = "/v1/locks/handoff-release";
    struct h_resp a = H("POST", p, NULL, "{\"ttl_ms\":10000}");
    CHECK_EQ_INT(a.status, 201);
    char *ta = dup_token(&a);
    long long fa = h_jint(&a, "fence");
    h_resp_free(&a);

    long long t0 = h_now_ms();
    struct call *b = call_start(gw.port, "POST", p, NULL, "{\"ttl_ms\":5000,\"wait_ms\":5000}", -1);
    CHECK(wait_waiting(gw.port, 1, 2000));
    sleep_until(t0 + 300);
    CHECK(!atomic_load(&b->done));
    long long t_rel = h_now_ms();
    struct h_resp d = H("DELETE", p, ta, NULL);
    CHECK_EQ_INT(d.status, 200);
    h_resp_free(&d);
    call_join(b);
    CHECK_EQ_INT(b->status, 201);
    long long gap = b->t_done - t_rel;
    fprintf(stderr, "    hand-off on release: %lld ms after the DELETE went out\n", gap);
    CHECK(b->t_done >= t_rel);
    CHECK(gap < SLACK_MS);
    CHECK(b->fence > fa);
    CHECK(strlen(b->got) >= 22 && strcmp(b->got, ta) != 0);
    /* B really holds it now. */
    struct h_resp g = H("GET", p, NULL, NULL);
    CHECK_EQ_INT(g.status, 200);
    CHECK_EQ_INT(h_jint(&g, "fence"), b->fence);
    h_resp_free(&g);
    CHECK(wait_waiting(gw.port, 0, 1000));
    free(ta);
    free(b);
}

/* ---- 2. prompt hand-off on expiry ---------------------------------------------- */

static void test_handoff_on_expiry(void) {
    const char *p = "/v1/locks/handoff-expiry";
    long long ta0 = h_now_ms();
    struct h_resp a = H("POST", p, NULL, "{\"ttl_ms\":500}");
    long long ta1 = h_now_ms();
    CHECK_EQ_INT(a.status, 201);
    long long fa = h_jint(&a, "fence");
    h_resp_free(&a);

    struct call *b = call_start(gw.port, "POST", p, NULL, "{\"ttl_ms\":5000,\"wait_ms\":3000}", -1);
    call_join(b);
    CHECK_EQ_INT(b->status, 201);
    /* A's lease ended between ta0 + 500 and ta1 + 500 (ms, clocks may differ by 1). */
    fprintf(stderr, "    hand-off on expiry: %lld ms after the lease end (at most)\n",
            b->t_done - (ta0 + 500));
    CHECK(b->t_done >= ta0 + 500 - 2);
    CHECK(b->t_done <= ta1 + 500 + SLACK_MS);
    CHECK(b->fence > fa);
    free(b);
}

/* ---- 3. wait timeout -------------------------------------------------------------- */

static void test_wait_timeout(void) {
    const char *p = "/v1/locks/wait-timeout";
    struct h_resp a = H("POST", p, NULL, "{\"ttl_ms\":10000}");
    CHECK_EQ_INT(a.status, 201);
    h_resp_free(&a);
    long long t0 = h_now_ms();
    struct h_resp r = H("POST", p, NULL, "{\"wait_ms\":400}");
    long long dt = h_now_ms() - t0;
    fprintf(stderr, "    wait_ms 400 answered after %lld ms\n", dt);
    CHECK_EQ_INT(r.status, 409);
    CHECK_EQ_STR(h_jcode(&r), "lock_busy");
    CHECK(dt >= 395); /* never before its own deadline */
    CHECK(dt <= 400 + 250);
    long long ra = h_jint(&r, "retry_after_ms");
    CHECK(ra > 8000 && ra <= 10001);
    const char *hdr = h_header(&r, "Retry-After");
    CHECK(hdr != NULL);
    if (hdr) CHECK_EQ_INT(atoll(hdr), (ra + 999) / 1000);
    CHECK_EQ_STR(h_header(&r, "Content-Type"), "application/problem+json");
    h_resp_free(&r);
    CHECK(wait_waiting(gw.port, 0, 1000));
}

/* ---- 4. twenty waiters, each served once, never two at a time ------------------- */

static void test_twenty_waiters(void) {
    const char *p = "/v1/locks/twenty";
    enum { N = 20 };
    struct h_resp a = H("POST", p, NULL, "{\"ttl_ms\":10000}");
    CHECK_EQ_INT(a.status, 201);
    char *ta = dup_token(&a);
    h_resp_free(&a);
    atomic_store(&inside, 0);
    atomic_store(&acquired_seq, 0);
    struct call *c[N];
    for (int i = 0; i < N; i++)
        c[i] = call_start(gw.port, "POST", p, NULL, "{\"ttl_ms\":5000,\"wait_ms\":10000}", 20);
    CHECK(wait_waiting(gw.port, N, 5000));
    long long t_rel = h_now_ms();
    struct h_resp d = H("DELETE", p, ta, NULL);
    CHECK_EQ_INT(d.status, 200);
    h_resp_free(&d);
    long long last = t_rel;
    int by_order[N];
    for (int i = 0; i < N; i++) by_order[i] = -1;
    for (int i = 0; i < N; i++) {
        call_join(c[i]);
        CHECK_EQ_INT(c[i]->status, 201);
        CHECK_EQ_INT(c[i]->rel_status, 200);
        CHECK(!c[i]->overlap);
        if (c[i]->order >= 0 && c[i]->order < N) {
            CHECK(by_order[c[i]->order] == -1); /* each place taken once */
            by_order[c[i]->order] = i;
        }
        if (c[i]->t_released > last) last = c[i]->t_released;
    }
    for (int k = 0; k < N; k++) CHECK(by_order[k] >= 0);
    for (int k = 1; k < N; k++)
        if (by_order[k] >= 0 && by_order[k - 1] >= 0)
            CHECK(c[by_order[k]]->fence > c[by_order[k - 1]]->fence);
    fprintf(stderr, "    20 waiters x 20 ms holds: %lld ms from the first release to the last\n",
            last - t_rel);
    CHECK(last - t_rel < 2500);
    struct h_resp g = H("GET", p, NULL, NULL);
    CHECK_EQ_INT(g.status, 404);
    h_resp_free(&g);
    for (int i = 0; i < N; i++) free(c[i]);
    free(ta);
}

/* ---- 5. fair waiters are served in arrival order (over two gateways) ----------- */

/* Holder A; N fair waiters arrive 50 ms apart or more (each is parked
 * before the next starts), on one gateway or alternating between two; A
 * releases; each holds 30 ms.  They must get the lock in arrival order, and
 * each one at once after the one before let go. */
static void fair_fifo(const char *p, int two_gateways, const char *body) {
    enum { N = 6 };
    struct h_resp a = H("POST", p, NULL, "{\"ttl_ms\":10000}");
    CHECK_EQ_INT(a.status, 201);
    char *ta = dup_token(&a);
    h_resp_free(&a);
    atomic_store(&inside, 0);
    atomic_store(&acquired_seq, 0);
    struct call *c[N];
    long long prev = 0;
    for (int i = 0; i < N; i++) {
        sleep_until(prev + 50);
        prev = h_now_ms();
        c[i] = call_start(two_gateways && i % 2 ? gw2.port : gw.port, "POST", p, NULL, body, 30);
        CHECK(wait_metric2(gw.port, two_gateways ? gw2.port : 0, "lockgate_waiting_requests", i + 1,
                           3000));
    }
    long long t_rel = h_now_ms();
    struct h_resp d = H("DELETE", p, ta, NULL);
    CHECK_EQ_INT(d.status, 200);
    h_resp_free(&d);
    for (int i = 0; i < N; i++) call_join(c[i]);
    for (int i = 0; i < N; i++) {
        CHECK_EQ_INT(c[i]->status, 201);
        CHECK_EQ_INT(c[i]->rel_status, 200);
        CHECK(!c[i]->overlap);
        long long prev_rel = i == 0 ? t_rel : c[i - 1]->t_released;
        fprintf(stderr,
                "    fair waiter %d (gateway %d) acquired %d-th, %lld ms after the "
                "release before it\n",
                i, two_gateways ? i % 2 + 1 : 1, c[i]->order, c[i]->t_done - prev_rel);
        CHECK_EQ_INT(c[i]->order, i);
        CHECK(c[i]->t_done - prev_rel < SLACK_MS); /* no wait for a timer */
    }
    for (int i = 0; i < N; i++) free(c[i]);
    free(ta);
}

static void test_fair_fifo(void) {
    fair_fifo("/v1/locks/fair-fifo", 0, "{\"ttl_ms\":5000,\"wait_ms\":10000,\"fair\":true}");
}

/* First come, first served across gateways: the order is the queue's in
 * Redis, and the head must be woken wherever it waits.  (Shorter leases and
 * waits than above only to bound the time this takes when it fails.) */
static void test_fair_fifo_two_gateways(void) {
    fair_fifo("/v1/locks/fair-fifo-2gw", 1, "{\"ttl_ms\":2000,\"wait_ms\":8000,\"fair\":true}");
}

/* ---- 6. a fair waiter that quits or vanishes does not delay the next ------------- */

static void test_fair_quitter_no_penalty(void) {
    const char *p = "/v1/locks/fair-quit";
    struct h_resp a = H("POST", p, NULL, "{\"ttl_ms\":10000}");
    CHECK_EQ_INT(a.status, 201);
    char *ta = dup_token(&a);
    h_resp_free(&a);
    long long t0 = h_now_ms();
    struct call *w1 =
        call_start(gw.port, "POST", p, NULL, "{\"ttl_ms\":5000,\"wait_ms\":500,\"fair\":true}", -1);
    CHECK(wait_waiting(gw.port, 1, 2000));
    struct call *w2 = call_start(gw.port, "POST", p, NULL,
                                 "{\"ttl_ms\":5000,\"wait_ms\":10000,\"fair\":true}", -1);
    CHECK(wait_waiting(gw.port, 2, 2000));
    call_join(w1);
    fprintf(stderr, "    fair W1 (wait_ms 500) answered %ld after %lld ms\n", w1->status,
            w1->t_done - w1->t_send);
    CHECK_EQ_INT(w1->status, 409);
    CHECK_EQ_STR(w1->code, "lock_busy");
    CHECK(w1->t_done - w1->t_send >= 495);
    CHECK(w1->t_done - w1->t_send <= 500 + SLACK_MS);
    sleep_until(t0 + 800);
    long long t_rel = h_now_ms();
    struct h_resp d = H("DELETE", p, ta, NULL);
    CHECK_EQ_INT(d.status, 200);
    h_resp_free(&d);
    call_join(w2);
    CHECK_EQ_INT(w2->status, 201);
    fprintf(stderr, "    fair W2 after W1 gave up: %lld ms after the release\n",
            w2->t_done - t_rel);
    CHECK(w2->t_done - t_rel < SLACK_MS);
    free(w1);
    free(w2);
    free(ta);
}

static void test_fair_disconnect_no_penalty(void) {
    const char *p = "/v1/locks/fair-gone";
    struct h_resp a = H("POST", p, NULL, "{\"ttl_ms\":10000}");
    CHECK_EQ_INT(a.status, 201);
    char *ta = dup_token(&a);
    h_resp_free(&a);
    /* W3 queues first, through a socket it will close. */
    int fd = raw_post(gw.port, p, "{\"ttl_ms\":5000,\"wait_ms\":10000,\"fair\":true}");
    CHECK(fd >= 0);
    CHECK(wait_waiting(gw.port, 1, 2000));
    struct call *w4 = call_start(gw.port, "POST", p, NULL,
                                 "{\"ttl_ms\":5000,\"wait_ms\":5000,\"fair\":true}", -1);
    CHECK(wait_waiting(gw.port, 2, 2000));
    h_sleep_ms(200);
    if (fd >= 0) close(fd);
    CHECK(wait_waiting(gw.port, 1, 1000)); /* W3 is forgotten at once */
    long long t_rel = h_now_ms();
    struct h_resp d = H("DELETE", p, ta, NULL);
    CHECK_EQ_INT(d.status, 200);
    h_resp_free(&d);
    call_join(w4);
    CHECK_EQ_INT(w4->status, 201);
    fprintf(stderr, "    fair W4 after W3 hung up: %lld ms after the release\n",
            w4->t_done - t_rel);
    CHECK(w4->t_done - t_rel < SLACK_MS);
    free(w4);
    free(ta);
}

/* Fair exclusive waiters behind two shared holders, on one gateway: the
 * first shared release wakes the head, which finds the lock still held and
 * parks again; the second release must still reach the head at once. */
static void test_fair_behind_shared_holders(void) {
    const char *p = "/v1/locks/fair-behind-shared";
    struct h_resp s1 = H("POST", p, NULL, "{\"mode\":\"shared\",\"ttl_ms\":3000}");
    struct h_resp s2 = H("POST", p, NULL, "{\"mode\":\"shared\",\"ttl_ms\":3000}");
    CHECK_EQ_INT(s1.status, 201);
    CHECK_EQ_INT(s2.status, 201);
    char *t1 = dup_token(&s1), *t2 = dup_token(&s2);
    h_resp_free(&s1);
    h_resp_free(&s2);
    atomic_store(&inside, 0);
    atomic_store(&acquired_seq, 0);
    struct call *f[2];
    for (int i = 0; i < 2; i++) {
        f[i] = call_start(gw.port, "POST", p, NULL,
                          "{\"ttl_ms\":5000,\"wait_ms\":8000,\"fair\":true}", 30);
        CHECK(wait_waiting(gw.port, i + 1, 2000));
        h_sleep_ms(20);
    }
    struct h_resp d = H("DELETE", p, t1, NULL);
    CHECK_EQ_INT(d.status, 200);
    h_resp_free(&d);
    h_sleep_ms(100);
    CHECK(!atomic_load(&f[0]->done));
    long long t_rel = h_now_ms();
    d = H("DELETE", p, t2, NULL);
    CHECK_EQ_INT(d.status, 200);
    h_resp_free(&d);
    for (int i = 0; i < 2; i++) call_join(f[i]);
    for (int i = 0; i < 2; i++) {
        long long prev_rel = i == 0 ? t_rel : f[0]->t_released;
        fprintf(stderr,
                "    fair waiter %d behind shared holders: %lld ms after the release "
                "before it\n",
                i, f[i]->t_done - prev_rel);
        CHECK_EQ_INT(f[i]->status, 201);
        CHECK_EQ_INT(f[i]->order, i);
        CHECK(f[i]->t_done - prev_rel < SLACK_MS);
    }
    for (int i = 0; i < 2; i++) free(f[i]);
    free(t1);
    free(t2);
}

/* ---- 7. a release through one gateway wakes a waiter on another ---------------- */

static void test_cross_gateway_wakeup(void) {
    const char *p = "/v1/locks/cross-gw";
    struct h_resp a = h_http("POST", gw.port, p, NULL, "{\"ttl_ms\":10000}", NULL);
    CHECK_EQ_INT(a.status, 201);
    char *ta = dup_token(&a);
    long long fa = h_jint(&a, "fence");
    h_resp_free(&a);
    long long t0 = h_now_ms();
    struct call *b =
        call_start(gw2.port, "POST", p, NULL, "{\"ttl_ms\":5000,\"wait_ms\":5000}", -1);
    CHECK(wait_waiting(gw2.port, 1, 2000));
    sleep_until(t0 + 300);
    CHECK(!atomic_load(&b->done));
    long long t_rel = h_now_ms();
    struct h_resp d = h_http("DELETE", gw.port, p, ta, NULL, NULL);
    CHECK_EQ_INT(d.status, 200);
    h_resp_free(&d);
    call_join(b);
    CHECK_EQ_INT(b->status, 201);
    fprintf(stderr, "    cross-gateway hand-off: %lld ms after the release\n", b->t_done - t_rel);
    CHECK(b->t_done - t_rel < SLACK_MS);
    CHECK(b->fence > fa);
    /* And the holder from gateway 2 releases through gateway 1. */
    d = h_http("DELETE", gw.port, p, b->got, NULL, NULL);
    CHECK_EQ_INT(d.status, 200);
    h_resp_free(&d);
    free(b);
    free(ta);
}

/* ---- 8. a client that disconnects while waiting never gets the lock ------------- */

static void test_disconnect_mid_wait(void) {
    const char *p = "/v1/locks/gone-client";
    struct h_resp a = H("POST", p, NULL, "{\"ttl_ms\":10000}");
    CHECK_EQ_INT(a.status, 201);
    char *ta = dup_token(&a);
    h_resp_free(&a);
    double timeouts0 = metric(gw.port, "lockgate_wait_timeouts_total");
    long long t0 = h_now_ms();
    /* One closes politely (FIN), one with a reset (RST). */
    int fin = raw_post(gw.port, p, "{\"ttl_ms\":30000,\"wait_ms\":5000}");
    int rst = raw_post(gw.port, p, "{\"ttl_ms\":30000,\"wait_ms\":5000}");
    CHECK(fin >= 0 && rst >= 0);
    CHECK(wait_waiting(gw.port, 2, 2000));
    sleep_until(t0 + 200);
    if (fin >= 0) close(fin);
    if (rst >= 0) raw_reset(rst);
    CHECK(wait_waiting(gw.port, 0, 1000));
    sleep_until(t0 + 500);
    struct h_resp d = H("DELETE", p, ta, NULL);
    CHECK_EQ_INT(d.status, 200);
    CHECK_EQ_STR(h_jstr(&d, "released"), "true");
    h_resp_free(&d);
    h_sleep_ms(300);
    struct h_resp g = H("GET", p, NULL, NULL);
    CHECK_EQ_INT(g.status, 404);
    CHECK_EQ_STR(h_jcode(&g), "not_held");
    h_resp_free(&g);
    CHECK_EQ_INT(waiting(gw.port), 0);
    CHECK(metric(gw.port, "lockgate_wait_timeouts_total") >= timeouts0 + 2);
    /* The lock is free for the next comer at once. */
    struct h_resp n = H("POST", p, NULL, "{\"ttl_ms\":1000}");
    CHECK_EQ_INT(n.status, 201);
    h_resp_free(&n);
    free(ta);
}

/* A client hangs up while its gateway is busy (here: stopped), and the
 * release of the lock (made through another gateway) reaches that gateway
 * before the hang-up does.  When the gateway gets to them, both are there
 * at once: it must neither trip over the waiter it just woke, nor hand the
 * lock to a client that is gone.  SIGSTOP only makes the order certain; a
 * busy loop thread gets the same order by chance. */
static void test_hangup_and_release_together(void) {
    struct h_gw g;
    if (own_gw_start(&g, "hangup") < 0) {
        CHECK(0);
        return;
    }
    for (int round = 0; round < 2; round++) {
        char p[64];
        snprintf(p, sizeof p, "/v1/locks/hangup-and-release-%d", round);
        struct h_resp a = h_http("POST", g.port, p, NULL, "{\"ttl_ms\":30000}", NULL);
        CHECK_EQ_INT(a.status, 201);
        char *ta = dup_token(&a);
        h_resp_free(&a);
        int fd = raw_post(g.port, p,
                          round ? "{\"ttl_ms\":30000,\"wait_ms\":5000,\"fair\":true}"
                                : "{\"ttl_ms\":30000,\"wait_ms\":5000}");
        CHECK(fd >= 0);
        CHECK(wait_waiting(g.port, 1, 2000));
        CHECK_EQ_INT(h_freeze(g.pid), 0); /* stopped before the release, for certain */
        struct h_resp d = h_http("DELETE", gw2.port, p, ta, NULL, NULL); /* publishes */
        CHECK_EQ_INT(d.status, 200);
        h_resp_free(&d);
        h_sleep_ms(50);
        if (fd >= 0) close(fd);
        h_sleep_ms(50);
        kill(g.pid, SIGCONT);
        h_sleep_ms(300);
        struct h_resp h = h_http("GET", g.port, "/healthz", NULL, NULL, NULL);
        long alive = h.status;
        CHECK_EQ_INT(alive, 200);
        h_resp_free(&h);
        struct h_resp r = h_http("GET", gw2.port, p, NULL, NULL, NULL);
        if (r.status != 404)
            fprintf(stderr, "    a client that had hung up holds the lock: %s\n", r.body);
        CHECK_EQ_INT(r.status, 404);
        h_resp_free(&r);
        free(ta);
        if (alive != 200) break;
        CHECK_EQ_INT(waiting(g.port), 0);
    }
    CHECK_EQ_INT(h_gw_stop(&g, 5000), 0);
}

/* Many waiting clients hang up around releases, over and over, on a
 * gateway of their own: half close just before the release, half just
 * after.  The gateway must stay up and forget them all. */
static void test_disconnect_storm(void) {
    enum { N = 100, ROUNDS = 10 };
    struct h_gw g;
    if (own_gw_start(&g, "storm") < 0) {
        CHECK(0);
        return;
    }
    int fds[N];
    for (int round = 0; round < ROUNDS; round++) {
        char p[64];
        snprintf(p, sizeof p, "/v1/locks/storm-%d", round);
        struct h_resp a = h_http("POST", g.port, p, NULL, "{\"ttl_ms\":30000}", NULL);
        CHECK_EQ_INT(a.status, 201);
        char *ta = dup_token(&a);
        h_resp_free(&a);
        for (int i = 0; i < N; i++)
            fds[i] = raw_post(g.port, p, "{\"ttl_ms\":30000,\"wait_ms\":5000}");
        CHECK(wait_waiting(g.port, N, 3000));
        for (int i = 0; i < N / 2; i++)
            if (fds[i] >= 0) close(fds[i]);
        struct h_resp d = h_http("DELETE", g.port, p, ta, NULL, NULL);
        for (int i = N / 2; i < N; i++)
            if (fds[i] >= 0) close(fds[i]);
        CHECK_EQ_INT(d.status, 200);
        h_resp_free(&d);
        free(ta);
        h_sleep_ms(50);
        struct h_resp h = h_http("GET", g.port, "/healthz", NULL, NULL, NULL);
        long alive = h.status;
        h_resp_free(&h);
        CHECK_EQ_INT(alive, 200);
        if (alive != 200 || !wait_waiting(g.port, 0, 1000)) {
            CHECK(0);
            break;
        }
    }
    CHECK_EQ_INT(h_gw_stop(&g, 5000), 0);
}

/* ---- 9. shared and exclusive ----------------------------------------------------- */

static void test_shared_exclusive(void) {
    const char *p = "/v1/locks/rw";
    struct h_resp s1 =
        H("POST", p, NULL, "{\"mode\":\"shared\",\"ttl_ms\":10000,\"owner\":\"r1\"}");
    struct h_resp s2 =
        H("POST", p, NULL, "{\"mode\":\"shared\",\"ttl_ms\":10000,\"owner\":\"r2\"}");
    CHECK_EQ_INT(s1.status, 201);
    CHECK_EQ_INT(s2.status, 201);
    CHECK_EQ_STR(h_jstr(&s1, "mode"), "shared");
    CHECK_EQ_STR(h_jstr(&s2, "mode"), "shared");
    char *t1 = dup_token(&s1), *t2 = dup_token(&s2);
    CHECK(t1[0] && t2[0] && strcmp(t1, t2) != 0);
    long long f1 = h_jint(&s1, "fence"), f2 = h_jint(&s2, "fence");
    CHECK(f1 > 0 && f2 > f1); /* each shared holder its own fence */
    h_resp_free(&s1);
    h_resp_free(&s2);
    struct h_resp g = H("GET", p, NULL, NULL);
    CHECK_EQ_INT(g.status, 200);
    CHECK_EQ_INT(h_jint(&g, "holders"), 2);
    CHECK_EQ_STR(h_jstr(&g, "mode"), "shared");
    CHECK_EQ_INT(h_jint(&g, "fence"), f2);
    CHECK_EQ_STR(h_jstr(&g, "owner"), "r1"); /* the longest-held holder's */
    CHECK(!t1[0] || strstr(g.body, t1) == NULL);
    CHECK(!t2[0] || strstr(g.body, t2) == NULL);
    h_resp_free(&g);

    /* Exclusive while shared are held: busy. */
    struct h_resp x = H("POST", p, NULL, NULL);
    CHECK_EQ_INT(x.status, 409);
    CHECK_EQ_STR(h_jcode(&x), "lock_busy");
    h_resp_free(&x);
    /* A shared holder re-entering exclusively: mode_mismatch. */
    x = H("POST", p, t1, "{\"mode\":\"exclusive\"}");
    CHECK_EQ_INT(x.status, 409);
    CHECK_EQ_STR(h_jcode(&x), "mode_mismatch");
    h_resp_free(&x);
    /* Re-entry in the same mode raises count. */
    x = H("POST", p, t1, "{\"mode\":\"shared\"}");
    CHECK_EQ_INT(x.status, 200);
    CHECK_EQ_INT(h_jint(&x, "count"), 2);
    CHECK_EQ_INT(h_jint(&x, "fence"), f1);
    h_resp_free(&x);

    /* Exclusive with wait_ms: it gets the lock once both shared are gone. */
    struct call *e =
        call_start(gw.port, "POST", p, NULL, "{\"ttl_ms\":10000,\"wait_ms\":5000}", -1);
    CHECK(wait_waiting(gw.port, 1, 2000));
    for (int i = 0; i < 2; i++) { /* t1 holds twice */
        struct h_resp d = H("DELETE", p, t1, NULL);
        CHECK_EQ_INT(d.status, 200);
        CHECK_EQ_STR(h_jstr(&d, "released"), i == 1 ? "true" : "false");
        h_resp_free(&d);
    }
    h_sleep_ms(150);
    CHECK(!atomic_load(&e->done)); /* t2 still holds */
    g = H("GET", p, NULL, NULL);
    CHECK_EQ_INT(h_jint(&g, "holders"), 1);
    h_resp_free(&g);
    long long t_rel = h_now_ms();
    struct h_resp d = H("DELETE", p, t2, NULL);
    CHECK_EQ_INT(d.status, 200);
    CHECK_EQ_STR(h_jstr(&d, "released"), "true");
    h_resp_free(&d);
    call_join(e);
    CHECK_EQ_INT(e->status, 201);
    CHECK(e->t_done - t_rel < SLACK_MS);
    CHECK(e->fence > f2);

    /* Shared while exclusive is held: busy; the exclusive holder's token
     * asking for shared: mode_mismatch. */
    x = H("POST", p, NULL, "{\"mode\":\"shared\"}");
    CHECK_EQ_INT(x.status, 409);
    CHECK_EQ_STR(h_jcode(&x), "lock_busy");
    h_resp_free(&x);
    x = H("POST", p, e->got, "{\"mode\":\"shared\"}");
    CHECK_EQ_INT(x.status, 409);
    CHECK_EQ_STR(h_jcode(&x), "mode_mismatch");
    h_resp_free(&x);
    g = H("GET", p, NULL, NULL);
    CHECK_EQ_STR(h_jstr(&g, "mode"), "exclusive");
    CHECK_EQ_INT(h_jint(&g, "holders"), 1);
    h_resp_free(&g);

    /* Shared waiters all enter when the exclusive holder leaves. */
    struct call *r[3];
    for (int i = 0; i < 3; i++)
        r[i] = call_start(gw.port, "POST", p, NULL,
                          "{\"mode\":\"shared\",\"ttl_ms\":10000,\"wait_ms\":5000}", -1);
    CHECK(wait_waiting(gw.port, 3, 2000));
    t_rel = h_now_ms();
    d = H("DELETE", p, e->got, NULL);
    CHECK_EQ_INT(d.status, 200);
    h_resp_free(&d);
    for (int i = 0; i < 3; i++) {
        call_join(r[i]);
        CHECK_EQ_INT(r[i]->status, 201);
        CHECK(r[i]->t_done - t_rel < SLACK_MS);
    }
    g = H("GET", p, NULL, NULL);
    CHECK_EQ_INT(h_jint(&g, "holders"), 3);
    CHECK_EQ_STR(h_jstr(&g, "mode"), "shared");
    h_resp_free(&g);
    for (int i = 0; i < 3; i++) free(r[i]);
    free(e);
    free(t1);
    free(t2);

    /* One shared holder's expiry does not free the other. */
    const char *q = "/v1/locks/rw-expiry";
    struct h_resp h1 = H("POST", q, NULL, "{\"mode\":\"shared\",\"ttl_ms\":300}");
    struct h_resp h2 = H("POST", q, NULL, "{\"mode\":\"shared\",\"ttl_ms\":5000}");
    CHECK_EQ_INT(h1.status, 201);
    CHECK_EQ_INT(h2.status, 201);
    char *th1 = dup_token(&h1);
    h_resp_free(&h1);
    h_resp_free(&h2);
    h_sleep_ms(500);
    g = H("GET", q, NULL, NULL);
    CHECK_EQ_INT(g.status, 200);
    CHECK_EQ_INT(h_jint(&g, "holders"), 1);
    h_resp_free(&g);
    x = H("POST", q, NULL, NULL);
    CHECK_EQ_INT(x.status, 409);
    CHECK_EQ_STR(h_jcode(&x), "lock_busy");
    long long ra = h_jint(&x, "retry_after_ms");
    CHECK(ra > 3500 && ra <= 4601);
    h_resp_free(&x);
    x = H("DELETE", q, th1, NULL); /* the expired one holds nothing */
    CHECK_EQ_INT(x.status, 409);
    CHECK_EQ_STR(h_jcode(&x), "not_owner");
    h_resp_free(&x);
    free(th1);
}

/* ---- 10. semaphores ---------------------------------------------------------------- */

static void test_semaphores(void) {
    const char *p = "/v1/semaphores/pool";
    char *tok[3];
    for (int i = 0; i < 3; i++) {
        struct h_resp r = H("POST", p, NULL, "{\"limit\":3,\"ttl_ms\":10000,\"owner\":\"w\"}");
        CHECK_EQ_INT(r.status, 201);
        CHECK_EQ_INT(h_jint(&r, "holders"), i + 1);
        CHECK_EQ_INT(h_jint(&r, "limit"), 3);
        CHECK_EQ_INT(h_jint(&r, "ttl_ms"), 10000);
        CHECK_EQ_STR(h_jstr(&r, "name"), "pool");
        tok[i] = dup_token(&r);
        CHECK(strlen(tok[i]) == 22);
        CHECK_EQ_STR(h_jstr(&r, "token"), tok[i]);
        CHECK_EQ_STR(h_header(&r, "Location"), "/v1/semaphores/pool");
        h_resp_free(&r);
    }
    CHECK(strcmp(tok[0], tok[1]) && strcmp(tok[1], tok[2]) && strcmp(tok[0], tok[2]));

    struct h_resp r = H("POST", p, NULL, "{\"limit\":3}");
    CHECK_EQ_INT(r.status, 409);
    CHECK_EQ_STR(h_jcode(&r), "lock_busy");
    CHECK(h_jint(&r, "retry_after_ms") > 8000);
    CHECK(h_header(&r, "Retry-After") != NULL);
    h_resp_free(&r);
    r = H("POST", p, NULL, "{\"limit\":4}");
    CHECK_EQ_INT(r.status, 409);
    CHECK_EQ_STR(h_jcode(&r), "limit_mismatch");
    h_resp_free(&r);
    r = H("POST", p, NULL, "{\"ttl_ms\":1000}");
    CHECK_EQ_INT(r.status, 400);
    CHECK_EQ_STR(h_jcode(&r), "invalid_field");
    CHECK(r.json && h_jstr(&r, "detail") && strstr(h_jstr(&r, "detail"), "limit"));
    h_resp_free(&r);

    r = H("GET", p, NULL, NULL);
    CHECK_EQ_INT(r.status, 200);
    CHECK_EQ_INT(h_jint(&r, "limit"), 3);
    CHECK_EQ_INT(h_jint(&r, "holders"), 3);
    CHECK(h_jint(&r, "ttl_ms") > 9000 && h_jint(&r, "ttl_ms") <= 10000);
    for (int i = 0; i < 3; i++) CHECK(!tok[i][0] || strstr(r.body, tok[i]) == NULL);
    h_resp_free(&r);

    /* PATCH extends one permit; GET shows the longest lease. */
    r = H("PATCH", p, tok[0], "{\"ttl_ms\":60000}");
    CHECK_EQ_INT(r.status, 200);
    CHECK_EQ_INT(h_jint(&r, "ttl_ms"), 60000);
    h_resp_free(&r);
    r = H("GET", p, NULL, NULL);
    CHECK(h_jint(&r, "ttl_ms") > 59000 && h_jint(&r, "ttl_ms") <= 60000);
    h_resp_free(&r);
    const char *stranger = "not-a-permit-holder-token-xyz";
    r = H("PATCH", p, stranger, NULL);
    CHECK_EQ_INT(r.status, 409);
    CHECK_EQ_STR(h_jcode(&r), "not_owner");
    h_resp_free(&r);
    r = H("DELETE", p, stranger, NULL);
    CHECK_EQ_INT(r.status, 409);
    CHECK_EQ_STR(h_jcode(&r), "not_owner");
    h_resp_free(&r);

    /* A 4th waits, and gets a permit as soon as one is released. */
    struct call *w =
        call_start(gw.port, "POST", p, NULL, "{\"limit\":3,\"ttl_ms\":10000,\"wait_ms\":5000}", -1);
    CHECK(wait_waiting(gw.port, 1, 2000));
    h_sleep_ms(100);
    CHECK(!atomic_load(&w->done));
    long long t_rel = h_now_ms();
    r = H("DELETE", p, tok[1], NULL);
    CHECK_EQ_INT(r.status, 200);
    CHECK_EQ_STR(h_jstr(&r, "released"), "true");
    h_resp_free(&r);
    call_join(w);
    CHECK_EQ_INT(w->status, 201);
    CHECK(w->t_done - t_rel < SLACK_MS);
    CHECK(strlen(w->got) == 22);
    r = H("DELETE", p, tok[1], NULL); /* its permit is gone */
    CHECK_EQ_INT(r.status, 409);
    CHECK_EQ_STR(h_jcode(&r), "not_owner");
    h_resp_free(&r);
    /* Free every permit: then nobody holds it. */
    const char *all[3] = {tok[0], tok[2], w->got};
    for (int i = 0; i < 3; i++) {
        r = H("DELETE", p, all[i], NULL);
        CHECK_EQ_INT(r.status, 200);
        h_resp_free(&r);
    }
    r = H("DELETE", p, tok[0], NULL);
    CHECK_EQ_INT(r.status, 404);
    CHECK_EQ_STR(h_jcode(&r), "not_held");
    h_resp_free(&r);
    r = H("GET", p, NULL, NULL);
    CHECK_EQ_INT(r.status, 404);
    h_resp_free(&r);
    /* With nobody holding, any limit goes. */
    r = H("POST", p, NULL, "{\"limit\":4,\"ttl_ms\":1000}");
    CHECK_EQ_INT(r.status, 201);
    CHECK_EQ_INT(h_jint(&r, "limit"), 4);
    h_resp_free(&r);
    for (int i = 0; i < 3; i++) free(tok[i]);
    free(w);

    /* A Lock-Token header on POST is ignored: a new token every time. */
    const char *mine = "client-chosen-permit-token-00";
    r = H("POST", "/v1/semaphores/pool2", mine, "{\"limit\":2}");
    CHECK_EQ_INT(r.status, 201);
    CHECK(h_header(&r, "Lock-Token") && strcmp(h_header(&r, "Lock-Token"), mine) != 0);
    h_resp_free(&r);
    r = H("POST", "/v1/semaphores/pool2", mine, "{\"limit\":2}");
    CHECK_EQ_INT(r.status, 201); /* no re-entry: a second permit */
    CHECK_EQ_INT(h_jint(&r, "holders"), 2);
    CHECK(h_header(&r, "Lock-Token") && strcmp(h_header(&r, "Lock-Token"), mine) != 0);
    h_resp_free(&r);
    r = H("DELETE", "/v1/semaphores/pool2", mine, NULL);
    CHECK_EQ_INT(r.status, 409);
    h_resp_free(&r);

    /* A permit's expiry frees its slot, for a newcomer and for a waiter. */
    const char *q = "/v1/semaphores/pool-exp";
    struct h_resp e1 = H("POST", q, NULL, "{\"limit\":2,\"ttl_ms\":300}");
    struct h_resp e2 = H("POST", q, NULL, "{\"limit\":2,\"ttl_ms\":5000}");
    CHECK_EQ_INT(e1.status, 201);
    CHECK_EQ_INT(e2.status, 201);
    h_resp_free(&e1);
    h_resp_free(&e2);
    r = H("POST", q, NULL, "{\"limit\":2}");
    CHECK_EQ_INT(r.status, 409);
    CHECK(h_jint(&r, "retry_after_ms") <= 301); /* a lease may last 1 ms past ttl_ms */
    h_resp_free(&r);
    h_sleep_ms(450);
    r = H("GET", q, NULL, NULL);
    CHECK_EQ_INT(h_jint(&r, "holders"), 1);
    h_resp_free(&r);
    long long ta0 = h_now_ms();
    r = H("POST", q, NULL, "{\"limit\":2,\"ttl_ms\":400}");
    long long ta1 = h_now_ms();
    CHECK_EQ_INT(r.status, 201);
    CHECK_EQ_INT(h_jint(&r, "holders"), 2);
    h_resp_free(&r);
    struct call *we =
        call_start(gw.port, "POST", q, NULL, "{\"limit\":2,\"ttl_ms\":5000,\"wait_ms\":3000}", -1);
    call_join(we);
    CHECK_EQ_INT(we->status, 201);
    CHECK(we->t_done >= ta0 + 400 - 2); /* not before the permit's lease end */
    CHECK(we->t_done <= ta1 + 400 + SLACK_MS);
    free(we);
}

/* ---- 11. the waiting metrics ------------------------------------------------------ */

static void test_wait_metrics(void) {
    const char *p = "/v1/locks/metrics-wait";
    enum { N = 4 };
    CHECK(wait_waiting(gw.port, 0, 2000));
    double waits0 = metric(gw.port, "lockgate_waits_total");
    double timeouts0 = metric(gw.port, "lockgate_wait_timeouts_total");
    double hist0 = metric(gw.port, "lockgate_wait_duration_seconds_count");
    double wake0 = metric(gw.port, "lockgate_wait_wakeups_total");
    CHECK(waits0 >= 0 && timeouts0 >= 0 && hist0 >= 0 && wake0 >= 0);
    struct h_resp a = H("POST", p, NULL, "{\"ttl_ms\":10000}");
    CHECK_EQ_INT(a.status, 201);
    h_resp_free(&a);
    struct call *c[N];
    for (int i = 0; i < N; i++) {
        c[i] = call_start(gw.port, "POST", p, NULL, "{\"wait_ms\":1500}", -1);
        CHECK(wait_waiting(gw.port, i + 1, 2000));
    }
    CHECK_EQ_INT(waiting(gw.port), N);
    CHECK(metric(gw.port, "lockgate_waits_total") >= waits0 + N);
    for (int i = 0; i < N; i++) {
        call_join(c[i]);
        CHECK_EQ_INT(c[i]->status, 409);
        free(c[i]);
    }
    CHECK_EQ_INT(waiting(gw.port), 0);
    CHECK(metric(gw.port, "lockgate_wait_timeouts_total") >= timeouts0 + N);
    CHECK(metric(gw.port, "lockgate_wait_duration_seconds_count") >= hist0 + N);
    CHECK(metric(gw.port, "lockgate_wait_wakeups_total") >= wake0 + N);
    struct h_resp m = H("GET", "/metrics", NULL, NULL);
    CHECK(strstr(m.body, "# TYPE lockgate_waiting_requests gauge") != NULL);
    CHECK(strstr(m.body, "# TYPE lockgate_wait_duration_seconds histogram") != NULL);
    CHECK(strstr(m.body, "lockgate_wait_duration_seconds_bucket{le=\"+Inf\"}") != NULL);
    h_resp_free(&m);
}

/* ---- 12. SIGTERM while requests wait ------------------------------------------------ */

static void test_sigterm_while_waiting(void) {
    struct h_gw g3;
    if (own_gw_start(&g3, "sigterm") < 0) {
        CHECK(0);
        return;
    }
    const char *p = "/v1/locks/shutdown";
    struct h_resp a = h_http("POST", g3.port, p, NULL, "{\"ttl_ms\":20000}", NULL);
    CHECK_EQ_INT(a.status, 201);
    char *ta = dup_token(&a);
    h_resp_free(&a);
    enum { N = 3 };
    struct call *c[N];
    for (int i = 0; i < N; i++)
        c[i] = call_start(g3.port, "POST", p, NULL,
                          i == 2 ? "{\"wait_ms\":20000,\"fair\":true}" : "{\"wait_ms\":20000}", -1);
    CHECK(wait_waiting(g3.port, N, 3000));
    long long t0 = h_now_ms();
    int rc = h_gw_stop(&g3, 8000);
    long long dt = h_now_ms() - t0;
    fprintf(stderr, "    gateway with %d waiters stopped in %lld ms (exit %d)\n", N, dt, rc);
    CHECK_EQ_INT(rc, 0);
    CHECK(dt < 5000);
    for (int i = 0; i < N; i++) {
        call_join(c[i]);
        CHECK_EQ_INT(c[i]->status, 503);
        CHECK_EQ_STR(c[i]->code, "shutting_down");
        CHECK_EQ_STR(c[i]->retry_after, "1");
        CHECK(c[i]->t_done - t0 < 5000);
        free(c[i]);
    }
    /* The lock is untouched, and the fair waiter left the queue. */
    struct h_resp g = H("GET", p, NULL, NULL);
    CHECK_EQ_INT(g.status, 200);
    h_resp_free(&g);
    struct h_resp d = H("DELETE", p, ta, NULL);
    CHECK_EQ_INT(d.status, 200);
    h_resp_free(&d);
    struct h_resp n = H("POST", p, NULL, "{\"ttl_ms\":1000}");
    CHECK_EQ_INT(n.status, 201);
    h_resp_free(&n);
    free(ta);
}

/* ---- 13. a thousand waiters on a fixed number of threads -------------------------- */

/* Opens n raw POSTs of body on path; returns how many went out. */
static int raw_many(struct rawc *c, int n, const char *path, const char *body) {
    int ok = 0;
    for (int i = 0; i < n; i++) {
        memset(&c[i], 0, sizeof c[i]);
        c[i].fd = raw_post(gw.port, path, body);
        if (c[i].fd < 0) {
            c[i].done = 1;
            continue;
        }
        ok++;
    }
    return ok;
}

static void test_thousand_waiters(void) {
    enum { N = 1000 };
    struct rawc *c = calloc(N, sizeof *c);
    int idle = thread_count(gw.pid);
    CHECK(idle > 0);
    CHECK(wait_waiting(gw.port, 0, 2000));

    /* Exclusive: one wins on release, the others time out cleanly. */
    const char *p = "/v1/locks/thousand-x";
    struct h_resp a = H("POST", p, NULL, "{\"ttl_ms\":30000}");
    CHECK_EQ_INT(a.status, 201);
    char *ta = dup_token(&a);
    h_resp_free(&a);
    long long t0 = h_now_ms();
    CHECK_EQ_INT(raw_many(c, N, p, "{\"ttl_ms\":30000,\"wait_ms\":5000}"), N);
    CHECK(wait_waiting(gw.port, N, 4000));
    long long t_parked = h_now_ms();
    int busy = thread_count(gw.pid);
    fprintf(stderr, "    %d exclusive waiters parked in %lld ms; threads idle %d, now %d\n", N,
            t_parked - t0, idle, busy);
    CHECK(busy <= idle);
    double wake0 = metric(gw.port, "lockgate_wait_wakeups_total");
    struct h_resp d = H("DELETE", p, ta, NULL);
    CHECK_EQ_INT(d.status, 200);
    h_resp_free(&d);
    raw_collect(c, N, 2000, 1); /* the winner's answer */
    double wake1 = metric(gw.port, "lockgate_wait_wakeups_total");
    if (h_now_ms() < t0 + 4500) { /* no deadline could have fired yet */
        fprintf(stderr, "    wake-ups for one release among %d waiters: %g\n", N, wake1 - wake0);
        CHECK(wake1 - wake0 <= 5); /* no thundering herd */
    }
    int done = raw_collect(c, N, 5000 + 3000, 0);
    long long t_all = h_now_ms();
    CHECK_EQ_INT(done, N);
    int n201 = 0, n409 = 0, other = 0;
    for (int i = 0; i < N; i++) {
        long st = raw_status(c[i].buf);
        if (st == 201)
            n201++;
        else if (st == 409 && strstr(c[i].buf, "\"lock_busy\""))
            n409++;
        else
            other++;
    }
    fprintf(stderr,
            "    exclusive: %d got it, %d timed out, %d other, all done %lld ms after start\n",
            n201, n409, other, t_all - t0);
    CHECK_EQ_INT(n201, 1);
    CHECK_EQ_INT(n409, N - 1);
    CHECK_EQ_INT(other, 0);
    CHECK(wait_waiting(gw.port, 0, 1000));
    free(ta);

    /* Shared: all of them enter when the exclusive holder leaves. */
    const char *q = "/v1/locks/thousand-s";
    a = H("POST", q, NULL, "{\"ttl_ms\":30000}");
    CHECK_EQ_INT(a.status, 201);
    ta = dup_token(&a);
    h_resp_free(&a);
    t0 = h_now_ms();
    CHECK_EQ_INT(raw_many(c, N, q, "{\"mode\":\"shared\",\"ttl_ms\":30000,\"wait_ms\":8000}"), N);
    CHECK(wait_waiting(gw.port, N, 5000));
    busy = thread_count(gw.pid);
    CHECK(busy <= idle);
    long long t_rel = h_now_ms();
    d = H("DELETE", q, ta, NULL);
    CHECK_EQ_INT(d.status, 200);
    h_resp_free(&d);
    done = raw_collect(c, N, 8000 + 3000, 0);
    CHECK_EQ_INT(done, N);
    n201 = other = 0;
    long long last = t_rel;
    for (int i = 0; i < N; i++) {
        if (raw_status(c[i].buf) == 201)
            n201++;
        else if (other++ < 3) /* what a failure looked like */
            fprintf(stderr, "    shared waiter %d answered after %lld ms: %.300s\n", i,
                    c[i].t_done - t_rel, c[i].buf);
        if (c[i].t_done > last) last = c[i].t_done;
    }
    fprintf(stderr,
            "    shared: %d of %d entered, the last %lld ms after the release; threads %d\n", n201,
            N, last - t_rel, busy);
    CHECK_EQ_INT(n201, N);
    CHECK_EQ_INT(other, 0);
    struct h_resp g = H("GET", q, NULL, NULL);
    CHECK_EQ_INT(h_jint(&g, "holders"), N);
    h_resp_free(&g);
    CHECK(wait_waiting(gw.port, 0, 1000));
    CHECK(thread_count(gw.pid) <= idle);
    free(ta);
    free(c);
}

static void test_clean_stop(void) {
    CHECK_EQ_INT(h_gw_stop(&gw2, 5000), 0);
    CHECK_EQ_INT(h_gw_stop(&gw, 5000), 0);
}

int main(int argc, char **argv) {
    check_filter(argc > 1 ? argv[1] : NULL);
    /* A thousand sockets here and in the gateways (which inherit this). */
    h_raise_nofile(8192);
    if (getenv("WAIT_LOGDIR")) {
        snprintf(gw.log, sizeof gw.log, "%s/gw1.log", getenv("WAIT_LOGDIR"));
        snprintf(gw2.log, sizeof gw2.log, "%s/gw2.log", getenv("WAIT_LOGDIR"));
    }
    if (h_redis_start(&redis, 0, NULL) < 0 || h_gw_start(&gw, &redis, NULL) < 0 ||
        h_gw_start(&gw2, &redis, NULL) < 0)
        return 2;
    long long t0 = h_now_ms();
    RUN_SOME(test_handoff_on_release);
    RUN_SOME(test_handoff_on_expiry);
    RUN_SOME(test_wait_timeout);
    RUN_SOME(test_twenty_waiters);
    RUN_SOME(test_fair_fifo);
    RUN_SOME(test_fair_fifo_two_gateways);
    RUN_SOME(test_fair_quitter_no_penalty);
    RUN_SOME(test_fair_disconnect_no_penalty);
    RUN_SOME(test_fair_behind_shared_holders);
    RUN_SOME(test_cross_gateway_wakeup);
    RUN_SOME(test_disconnect_mid_wait);
    RUN_SOME(test_hangup_and_release_together);
    RUN_SOME(test_disconnect_storm);
    RUN_SOME(test_shared_exclusive);
    RUN_SOME(test_semaphores);
    RUN_SOME(test_wait_metrics);
    RUN_SOME(test_sigterm_while_waiting);
    RUN_SOME(test_thousand_waiters);
    RUN(test_clean_stop);
    fprintf(stderr, "    wait suite: %lld ms\n", h_now_ms() - t0);
    h_redis_stop(&redis);
    return check_summary("wait");
}
