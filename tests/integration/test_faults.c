/* test_faults.c -- Redis and gateway trouble, end to end.
 *
 *   1. Redis killed under load: 503 backend_unavailable with Retry-After: 1,
 *      promptly, while it is down; /readyz 503, /healthz 200; served again
 *      after Redis restarts, without restarting the gateway.
 *   2. SCRIPT FLUSH: the next call of every script still succeeds (NOSCRIPT,
 *      reload, retry) and lockgate_redis_noscript_total grows.
 *   3. Redis frozen (SIGSTOP): answers 503 within the command timeout,
 *      never a hang; served again after SIGCONT.
 *   4. Gateway killed holding a lock: the lock stays held until its TTL
 *      (seen through a second gateway), then frees -- not earlier.
 *   5. SIGTERM: exit 0 within 5 s, idle, with a request in flight on a
 *      frozen Redis, and with a half-sent request open.
 *   6. Redis down when the gateway starts: it starts, answers 503 at once,
 *      and serves once Redis comes up.
 *   7. Waiters: a client gone mid-wait is dropped and never takes the lock;
 *      SIGTERM answers a waiter 503 shutting_down and exits 0.  With
 *      --shutdown-delay-ms, /readyz fails at once and requests are still
 *      served for the delay, then the parked waiter gets its 503.
 *
 * Each scenario has its own redis-server and gateways. */
#include "tests/integration/harness.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

/* ============================================================================
 * Helpers
 * ========================================================================= */

static int gateway_alive(struct h_gw *g) {
    int st;
    return g->pid > 0 && waitpid(g->pid, &st, WNOHANG) == 0;
}

static void dump_log_tail(struct h_gw *g, int lines) {
    char cmd[256];
    snprintf(cmd, sizeof cmd, "tail -n %d '%s' | sed 's/^/    gw: /' >&2", lines, g->log);
    if (system(cmd)) {}
}

/* Starting can fail for reasons that are not the gateway's: a port that
 * was free a moment ago may be taken by another test's process before the
 * server binds it.  So each start gets three tries on fresh ports. */
static int redis_up(struct h_redis *r, int aof) {
    for (int i = 0; i < 3; i++) {
        if (h_redis_start(r, aof, NULL) == 0) return 0;
        h_redis_stop(r);
    }
    return -1;
}

static int gw_up(struct h_gw *g, struct h_redis *r, const char *flags) {
    for (int i = 0; i < 3; i++) {
        memset(g, 0, sizeof *g);
        if (h_gw_start(g, r, flags) == 0) return 0;
        dump_log_tail(g, 20);
        h_gw_kill(g);
    }
    return -1;
}

/* Stops g with SIGTERM; it must exit 0 (under ASan: no leak either). */
static void stop_clean(struct h_gw *g) {
    if (g->pid <= 0) return;
    int rc = h_gw_stop(g, 6000);
    if (rc != 0) {
        fprintf(stderr, "  gateway on %d exited %d\n", g->port, rc);
        dump_log_tail(g, 40);
    }
    CHECK_EQ_INT(rc, 0);
}

/* A 503 backend_unavailable, problem+json, Retry-After: 1, promptly. */
static void check_unavailable(struct h_resp *r, double within_s) {
    if (r->status != 503) fprintf(stderr, "  answered %ld: %.200s\n", r->status, r->body);
    CHECK_EQ_INT(r->status, 503);
    CHECK_EQ_STR(h_jcode(r), "backend_unavailable");
    CHECK_EQ_STR(h_header(r, "Content-Type"), "application/problem+json");
    CHECK_EQ_STR(h_header(r, "Retry-After"), "1");
    if (r->seconds >= within_s) fprintf(stderr, "  took %.2f s\n", r->seconds);
    CHECK(r->seconds < within_s);
}

/* A counter from /metrics, or -1. */
static long long metric(struct h_gw *g, const char *name) {
    struct h_resp r = h_http("GET", g->port, "/metrics", NULL, NULL, NULL);
    long long v = -1;
    char key[128];
    snprintf(key, sizeof key, "\n%s ", name);
    const char *p = r.body ? strstr(r.body, key) : NULL;
    if (p) v = atoll(p + strlen(key));
    h_resp_free(&r);
    return v;
}

/* Polls POST path every 100 ms until 201 or timeout_ms; returns the ms it
 * took, or -1.  The lock taken is released. */
/* /readyz 200 within timeout_ms: once one worker is served again, the
 * others' connections follow within a loop turn or two (/readyz waits for
 * all of them). */
static int ready_within(struct h_gw *g, int timeout_ms) {
    for (long long end = h_now_ms() + timeout_ms;; h_sleep_ms(20)) {
        struct h_resp r = h_http("GET", g->port, "/readyz", NULL, NULL, NULL);
        long st = r.status;
        h_resp_free(&r);
        if (st == 200) return 1;
        if (h_now_ms() > end) return 0;
    }
}

static long long wait_served(struct h_gw *g, const char *path, int timeout_ms) {
    long long t0 = h_now_ms();
    while (h_now_ms() - t0 < timeout_ms) {
        struct h_resp r = h_http("POST", g->port, path, NULL, "{\"ttl_ms\":1000}", NULL);
        long st = r.status;
        if (st == 201) {
            char tok[160];
            snprintf(tok, sizeof tok, "%s", h_header(&r, "Lock-Token"));
            h_resp_free(&r);
            r = h_http("DELETE", g->port, path, tok, NULL, NULL);
            h_resp_free(&r);
            return h_now_ms() - t0;
        }
        CHECK(st == 503); /* nothing but "not now" while it recovers */
        h_resp_free(&r);
        h_sleep_ms(100);
    }
    return -1;
}

static int port_accepts(int port) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_port = htons((uint16_t)port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    int ok = connect(fd, (struct sockaddr *)&a, sizeof a) == 0;
    close(fd);
    return ok;
}

/* ============================================================================
 * Background load: acquire and release in a loop, recording every answer
 * ========================================================================= */

struct load {
    struct h_gw *g;           /* gateway to load */
    atomic_int stop;          /* set to end the run */
    atomic_int ok;            /* 2xx answers */
    atomic_int unavailable;   /* 503 backend_unavailable */
    atomic_int busy;          /* 409: one's own lock, whose release failed in the outage */
    atomic_int other;         /* anything else */
    atomic_int failed;        /* no answer at all */
    atomic_int slow;          /* answers that took 3 s or more */
    atomic_int ok_after_mark; /* 2xx after `mark` was set */
    atomic_int mark;          /* set by the test at a point in time */
    pthread_t th[4];
};

static void load_count(struct load *l, struct h_resp *r) {
    if (r->status == 0)
        atomic_fetch_add(&l->failed, 1);
    else if (r->status >= 200 && r->status < 300) {
        atomic_fetch_add(&l->ok, 1);
        if (atomic_load(&l->mark)) atomic_fetch_add(&l->ok_after_mark, 1);
    } else if (r->status == 503 && h_jcode(r) && strcmp(h_jcode(r), "backend_unavailable") == 0 &&
               h_header(r, "Retry-After") && strcmp(h_header(r, "Retry-After"), "1") == 0)
        atomic_fetch_add(&l->unavailable, 1);
    else if (r->status == 409 && h_jcode(r) && strcmp(h_jcode(r), "lock_busy") == 0)
        atomic_fetch_add(&l->busy, 1);
    else {
        atomic_fetch_add(&l->other, 1);
        fprintf(stderr, "  load: unexpected %ld: %.200s\n", r->status, r->body);
    }
    if (r->seconds >= 3.0) atomic_fetch_add(&l->slow, 1);
}

struct load_arg {
    struct load *l;
    int id;
};
static struct load_arg load_args[4];

static void *load_main(void *arg) {
    struct load_arg *a = arg;
    struct load *l = a->l;
    char path[64];
    snprintf(path, sizeof path, "/v1/locks/load-%d", a->id);
    while (!atomic_load(&l->stop)) {
        struct h_resp r = h_http("POST", l->g->port, path, NULL, "{\"ttl_ms\":2000}", NULL);
        load_count(l, &r);
        if (r.status == 201 && h_header(&r, "Lock-Token")) {
            char tok[160];
            snprintf(tok, sizeof tok, "%s", h_header(&r, "Lock-Token"));
            h_resp_free(&r);
            r = h_http("DELETE", l->g->port, path, tok, NULL, NULL);
            /* After a restart without persistence the lock may be gone. */
            if (r.status == 404)
                atomic_fetch_add(&l->ok, 1);
            else
                load_count(l, &r);
        }
        h_resp_free(&r);
        h_sleep_ms(10);
    }
    return NULL;
}

static void load_start(struct load *l, struct h_gw *g) {
    memset(l, 0, sizeof *l);
    l->g = g;
    for (int i = 0; i < 4; i++) {
        load_args[i] = (struct load_arg){l, i};
        pthread_create(&l->th[i], NULL, load_main, &load_args[i]);
    }
}

static void load_stop(struct load *l) {
    atomic_store(&l->stop, 1);
    for (int i = 0; i < 4; i++) pthread_join(l->th[i], NULL);
    fprintf(stderr, "  load: %d ok, %d unavailable, %d other, %d failed, %d slow\n",
            atomic_load(&l->ok), atomic_load(&l->unavailable), atomic_load(&l->other),
            atomic_load(&l->failed), atomic_load(&l->slow));
}

/* ============================================================================
 * 1. Redis killed and restarted
 * ========================================================================= */

static void test_redis_killed_and_restarted(void) {
    struct h_redis redis;
    struct h_gw gw = {0};
    if (redis_up(&redis, 1) < 0 || gw_up(&gw, &redis, NULL) < 0) {
        CHECK(0);
        return;
    }
    struct h_resp r = h_http("POST", gw.port, "/v1/locks/before", NULL, "{\"ttl_ms\":60000}", NULL);
    CHECK_EQ_INT(r.status, 201);
    char tok[160];
    snprintf(tok, sizeof tok, "%s", h_header(&r, "Lock-Token") ? h_header(&r, "Lock-Token") : "");
    h_resp_free(&r);

    struct load l;
    load_start(&l, &gw);
    h_sleep_ms(300);
    h_redis_kill(&redis);
    long long down_at = h_now_ms();

    /* While it is down: every lock operation is a prompt 503. */
    int rounds = 0;
    while (h_now_ms() - down_at < 1500) {
        r = h_http("POST", gw.port, "/v1/locks/during", NULL, NULL, NULL);
        check_unavailable(&r, 3.0);
        h_resp_free(&r);
        r = h_http("GET", gw.port, "/v1/locks/before", NULL, NULL, NULL);
        check_unavailable(&r, 3.0);
        h_resp_free(&r);
        r = h_http("PATCH", gw.port, "/v1/locks/before", tok, NULL, NULL);
        check_unavailable(&r, 3.0);
        h_resp_free(&r);
        r = h_http("GET", gw.port, "/readyz", NULL, NULL, NULL);
        CHECK_EQ_INT(r.status, 503);
        CHECK(r.seconds < 3.0);
        h_resp_free(&r);
        r = h_http("GET", gw.port, "/healthz", NULL, NULL, NULL);
        CHECK_EQ_INT(r.status, 200);
        CHECK(r.seconds < 1.0);
        h_resp_free(&r);
        rounds++;
        h_sleep_ms(100);
    }
    CHECK(rounds >= 3);

    /* Back: served again by the same gateway process. */
    CHECK_EQ_INT(h_redis_restart(&redis, NULL), 0);
    atomic_store(&l.mark, 1);
    long long took = wait_served(&gw, "/v1/locks/after", 5000);
    fprintf(stderr, "  served again %lld ms after Redis came back\n", took);
    CHECK(took >= 0);
    CHECK(ready_within(&gw, 2000));
    /* With AOF on, the lock taken before the outage is still there. */
    r = h_http("DELETE", gw.port, "/v1/locks/before", tok, NULL, NULL);
    CHECK_EQ_INT(r.status, 200);
    h_resp_free(&r);
    /* The load's own requests succeed again too (give it up to 5 s: under
     * the sanitizers with one worker 300 ms was once not enough). */
    for (int i = 0; i < 250 && atomic_load(&l.ok_after_mark) == 0; i++) h_sleep_ms(20);
    h_sleep_ms(300);
    load_stop(&l);
    CHECK(atomic_load(&l.unavailable) > 0);
    CHECK(atomic_load(&l.ok_after_mark) > 0);
    CHECK_EQ_INT(atomic_load(&l.other), 0);
    CHECK_EQ_INT(atomic_load(&l.failed), 0);
    CHECK_EQ_INT(atomic_load(&l.slow), 0);
    CHECK(metric(&gw, "lockgate_redis_reconnects_total") >= 1);
    CHECK(metric(&gw, "lockgate_redis_errors_total") >= 1);
    CHECK(gateway_alive(&gw));
    stop_clean(&gw);
    h_redis_stop(&redis);
}

/* ============================================================================
 * 2. SCRIPT FLUSH
 * ========================================================================= */

static void test_script_flush(void) {
    struct h_redis redis;
    struct h_gw gw = {0};
    if (redis_up(&redis, 0) < 0 || gw_up(&gw, &redis, NULL) < 0) {
        CHECK(0);
        return;
    }
    struct h_resp r = h_http("POST", gw.port, "/v1/locks/warm", NULL, NULL, NULL);
    CHECK_EQ_INT(r.status, 201);
    h_resp_free(&r);
    long long n0 = metric(&gw, "lockgate_redis_noscript_total");
    CHECK(n0 >= 0);

    CHECK_EQ_STR(h_redis_cli(&redis, "SCRIPT FLUSH"), "OK");
    r = h_http("POST", gw.port, "/v1/locks/flushed", NULL, "{\"ttl_ms\":30000}", NULL);
    CHECK_EQ_INT(r.status, 201);
    char tok[160];
    snprintf(tok, sizeof tok, "%s", h_header(&r, "Lock-Token") ? h_header(&r, "Lock-Token") : "");
    h_resp_free(&r);
    long long n1 = metric(&gw, "lockgate_redis_noscript_total");
    CHECK(n1 > n0);

    /* Every lock script, each right after a flush. */
    static const struct {
        const char *method;
        int with_token;
        long status;
    } ops[] = {
        {"PATCH",  1, 200},
        {"GET",    0, 200},
        {"POST",   1, 200},
        {"DELETE", 1, 200},
        {"DELETE", 1, 200},
        {"POST",   0, 201},
    };
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++) {
        CHECK_EQ_STR(h_redis_cli(&redis, "SCRIPT FLUSH"), "OK");
        r = h_http(ops[i].method, gw.port, "/v1/locks/flushed", ops[i].with_token ? tok : NULL,
                   NULL, NULL);
        if (r.status != ops[i].status)
            fprintf(stderr, "  %s after SCRIPT FLUSH answered %ld: %.200s\n", ops[i].method,
                    r.status, r.body);
        CHECK_EQ_INT(r.status, ops[i].status);
        h_resp_free(&r);
    }
    long long n2 = metric(&gw, "lockgate_redis_noscript_total");
    CHECK(n2 >= n1 + 4);
    fprintf(stderr, "  noscript reloads: %lld -> %lld -> %lld\n", n0, n1, n2);

    /* Flushed many times while requests run: all of them are served. */
    struct load l;
    load_start(&l, &gw);
    for (int i = 0; i < 5; i++) {
        h_sleep_ms(100);
        h_redis_cli(&redis, "SCRIPT FLUSH");
    }
    h_sleep_ms(100);
    load_stop(&l);
    CHECK(atomic_load(&l.ok) > 0);
    CHECK_EQ_INT(atomic_load(&l.other), 0);
    CHECK_EQ_INT(atomic_load(&l.failed), 0);
    /* A flush that lands between a reload and its retry may cost one
     * request a 503; more than that would mean reloads do not stick. */
    CHECK(atomic_load(&l.unavailable) <= 5);
    CHECK(gateway_alive(&gw));
    stop_clean(&gw);
    h_redis_stop(&redis);
}

/* ============================================================================
 * 3. Redis frozen
 * ========================================================================= */

struct timed {
    struct h_gw *g;
    const char *method;
    const char *path;
    struct h_resp r;
};

static void *timed_main(void *arg) {
    struct timed *t = arg;
    t->r = h_http(t->method, t->g->port, t->path, NULL, NULL, NULL);
    return NULL;
}

/* The same, as a request that waits up to 60 s for the lock. */
static void *waiting_main(void *arg) {
    struct timed *t = arg;
    t->r = h_http(t->method, t->g->port, t->path, NULL, "{\"wait_ms\":60000}", NULL);
    return NULL;
}

/* A request with its own body, in a thread (the waiters below). */
struct posted {
    struct h_gw *g;
    const char *path;
    const char *body;
    struct h_resp r;
    long long t_done;
};

static void *posted_main(void *arg) {
    struct posted *p = arg;
    p->r = h_http("POST", p->g->port, p->path, NULL, p->body, NULL);
    p->t_done = h_now_ms();
    return NULL;
}

/* Parked waiters whose retries meet a dead Redis keep waiting until their
 * own deadline: one whose deadline passes in the outage gets 503, one with
 * time left gets the lock once Redis is back (the short lease it waited
 * on ended during the outage).  Redis runs with AOF: an outage, not a
 * loss of data (that holds grants off: test_safety, test_data_loss_holds_off). */
static void test_waiters_ride_out_outage(void) {
    struct h_redis redis;
    struct h_gw gw = {0};
    if (redis_up(&redis, 1) < 0 || gw_up(&gw, &redis, NULL) < 0) {
        CHECK(0);
        return;
    }
    struct h_resp r = h_http("POST", gw.port, "/v1/locks/outage", NULL, "{\"ttl_ms\":2000}", NULL);
    CHECK_EQ_INT(r.status, 201);
    h_resp_free(&r);
    r = h_http("POST", gw.port, "/v1/locks", NULL,
               "{\"names\":[\"outage-m1\",\"outage-m2\"],\"ttl_ms\":2000}", NULL);
    CHECK_EQ_INT(r.status, 201);
    h_resp_free(&r);
    /* Each is woken by its lease's end (2 s), inside the outage; the multi-lock
     * waiter is parked on both names. */
    struct posted w[3] = {
        {&gw, "/v1/locks/outage", "{\"wait_ms\":20000}",                                         {0}, 0},
        {&gw, "/v1/locks/outage", "{\"wait_ms\":1500}",                                          {0}, 0},
        {&gw, "/v1/locks",        "{\"names\":[\"outage-m2\",\"outage-m1\"],\"wait_ms\":20000}", {0}, 0},
    };
    pthread_t th[3];
    for (int i = 0; i < 3; i++) pthread_create(&th[i], NULL, posted_main, &w[i]);
    long long waiting = -1;
    for (int i = 0; i < 100 && waiting != 4; i++) {
        h_sleep_ms(10);
        waiting = metric(&gw, "lockgate_waiting_requests");
    }
    CHECK_EQ_INT(waiting, 4);
    h_redis_kill(&redis);
    long long down_at = h_now_ms();
    h_sleep_ms(3000);
    CHECK_EQ_INT(metric(&gw, "lockgate_waiting_requests"), 3);
    CHECK_EQ_INT(h_redis_restart(&redis, NULL), 0);
    long long up_at = h_now_ms();
    for (int i = 0; i < 3; i++) pthread_join(th[i], NULL);
    fprintf(stderr,
            "  Redis down %lld ms; short waiter %ld after %lld ms of outage, "
            "lock waiter %ld and multi-lock waiter %ld %lld and %lld ms after it came back\n",
            up_at - down_at, w[1].r.status, w[1].t_done - down_at, w[0].r.status, w[2].r.status,
            w[0].t_done - up_at, w[2].t_done - up_at);
    CHECK_EQ_INT(w[1].r.status, 503);
    CHECK_EQ_STR(h_jcode(&w[1].r), "backend_unavailable");
    CHECK_EQ_INT(w[0].r.status, 201);
    CHECK_EQ_INT(w[2].r.status, 201);
    CHECK(w[0].t_done - up_at < 3000);
    CHECK(w[2].t_done - up_at < 3000);
    for (int i = 0; i < 3; i++) h_resp_free(&w[i].r);
    CHECK(gateway_alive(&gw));
    stop_clean(&gw);
    h_redis_stop(&redis);
}

static void test_redis_frozen(void) {
    struct h_redis redis;
    struct h_gw gw = {0};
    if (redis_up(&redis, 0) < 0 || gw_up(&gw, &redis, "--redis-timeout-ms 500") < 0) {
        CHECK(0);
        return;
    }
    struct h_resp r = h_http("POST", gw.port, "/v1/locks/warm", NULL, NULL, NULL);
    CHECK_EQ_INT(r.status, 201);
    h_resp_free(&r);

    kill(redis.pid, SIGSTOP);
    /* One at a time: each a 503 within the 500 ms timeout (plus slack). */
    for (int i = 0; i < 4; i++) {
        r = h_http("POST", gw.port, "/v1/locks/frozen", NULL, NULL, NULL);
        check_unavailable(&r, 2.0);
        h_resp_free(&r);
    }
    r = h_http("GET", gw.port, "/readyz", NULL, NULL, NULL);
    CHECK_EQ_INT(r.status, 503);
    CHECK(r.seconds < 2.0);
    h_resp_free(&r);
    r = h_http("GET", gw.port, "/healthz", NULL, NULL, NULL);
    CHECK_EQ_INT(r.status, 200);
    CHECK(r.seconds < 0.5);
    h_resp_free(&r);

    /* Twelve at once. */
    enum { N = 12 };
    struct timed ts[N];
    pthread_t th[N];
    for (int i = 0; i < N; i++) {
        ts[i] = (struct timed){&gw, i % 3 == 2 ? "GET" : "POST", "/v1/locks/frozen-many", {0}};
        pthread_create(&th[i], NULL, timed_main, &ts[i]);
    }
    for (int i = 0; i < N; i++) {
        pthread_join(th[i], NULL);
        check_unavailable(&ts[i].r, 2.0);
        h_resp_free(&ts[i].r);
    }

    /* Clients that give up while their request waits on the frozen Redis. */
    for (int i = 0; i < 10; i++) {
        const char *req =
            "POST /v1/locks/frozen-gone HTTP/1.1\r\nHost: t\r\nContent-Length: 0\r\n\r\n";
        char out[64];
        h_raw(gw.port, req, strlen(req), out, sizeof out, 20);
    }

    kill(redis.pid, SIGCONT);
    long long took = wait_served(&gw, "/v1/locks/thawed", 5000);
    fprintf(stderr, "  served again %lld ms after SIGCONT\n", took);
    CHECK(took >= 0);
    CHECK(ready_within(&gw, 2000));
    CHECK(gateway_alive(&gw));
    stop_clean(&gw);
    h_redis_stop(&redis);
}

/* ============================================================================
 * 4. Gateway killed while holding
 * ========================================================================= */

static void test_gateway_killed_while_holding(void) {
    struct h_redis redis;
    struct h_gw a = {0}, b = {0};
    if (redis_up(&redis, 0) < 0 || gw_up(&a, &redis, NULL) < 0 || gw_up(&b, &redis, NULL) < 0) {
        CHECK(0);
        return;
    }
    const int ttl = 1500;
    long long t_send = h_now_ms();
    struct h_resp r = h_http("POST", a.port, "/v1/locks/orphan", NULL, "{\"ttl_ms\":1500}", NULL);
    long long t_recv = h_now_ms();
    CHECK_EQ_INT(r.status, 201);
    long long fence = h_jint(&r, "fence");
    h_resp_free(&r);
    h_gw_kill(&a);

    /* Through the other gateway: held (GET 200, POST 409) until the TTL,
     * then free (POST 201) -- never before. */
    long long first_free_sent = -1;
    int held_seen = 0, get_ok = 1;
    while (h_now_ms() < t_recv + ttl + 1000) {
        long long sent = h_now_ms();
        if (sent < t_send + ttl - 150) {
            struct h_resp g = h_http("GET", b.port, "/v1/locks/orphan", NULL, NULL, NULL);
            if (g.status != 200 || h_jint(&g, "ttl_ms") > ttl || h_jint(&g, "fence") != fence)
                get_ok = 0;
            h_resp_free(&g);
        }
        sent = h_now_ms();
        r = h_http("POST", b.port, "/v1/locks/orphan", NULL, NULL, NULL);
        if (r.status == 201) {
            first_free_sent = sent;
            CHECK(h_jint(&r, "fence") > fence);
            h_resp_free(&r);
            break;
        }
        CHECK_EQ_INT(r.status, 409);
        if (r.status == 409) {
            held_seen++;
            long long ra = h_jint(&r, "retry_after_ms");
            CHECK(ra > 0 && ra <= ttl);
        }
        h_resp_free(&r);
        h_sleep_ms(50);
    }
    fprintf(stderr, "  held for %d polls; free %lld ms after the acquisition was sent\n", held_seen,
            first_free_sent >= 0 ? first_free_sent - t_send : -1);
    CHECK(get_ok);
    CHECK(held_seen >= 10);
    CHECK(first_free_sent >= 0);
    /* Not earlier than the lease (less the time a request takes to
     * reach Redis) ... */
    CHECK(first_free_sent >= t_send + ttl - 30);
    /* ... and not much later: expiry is exact in Redis. */
    CHECK(first_free_sent <= t_recv + ttl + 300);
    CHECK(gateway_alive(&b));
    stop_clean(&b);
    h_redis_stop(&redis);
}

/* ============================================================================
 * 5. SIGTERM
 * ========================================================================= */

static void test_sigterm_idle(void) {
    struct h_redis redis;
    struct h_gw gw = {0};
    if (redis_up(&redis, 0) < 0 || gw_up(&gw, &redis, NULL) < 0) {
        CHECK(0);
        return;
    }
    struct h_resp r = h_http("POST", gw.port, "/v1/locks/idle", NULL, NULL, NULL);
    CHECK_EQ_INT(r.status, 201);
    h_resp_free(&r);
    long long t0 = h_now_ms();
    int rc = h_gw_stop(&gw, 5000);
    long long ms = h_now_ms() - t0;
    fprintf(stderr, "  idle gateway stopped in %lld ms\n", ms);
    CHECK_EQ_INT(rc, 0);
    CHECK(ms < 5000);
    CHECK(!port_accepts(gw.port));
    h_redis_stop(&redis);
}

/* SIGTERM while a request waits on a frozen Redis, with the gateway's
 * Redis timeout `timeout_ms`: exit 0 within 5 s, and the request gets an
 * answer (503: backend_unavailable or shutting_down), not a dropped
 * connection.  New connections are refused at once. */
static void sigterm_in_flight(int timeout_ms) {
    struct h_redis redis;
    struct h_gw gw = {0};
    char flags[64];
    snprintf(flags, sizeof flags, "--redis-timeout-ms %d", timeout_ms);
    if (redis_up(&redis, 0) < 0 || gw_up(&gw, &redis, flags) < 0) {
        CHECK(0);
        return;
    }
    struct h_resp r = h_http("POST", gw.port, "/v1/locks/warm", NULL, NULL, NULL);
    CHECK_EQ_INT(r.status, 201);
    h_resp_free(&r);

    kill(redis.pid, SIGSTOP);
    struct timed t = {&gw, "POST", "/v1/locks/in-flight", {0}};
    pthread_t th;
    pthread_create(&th, NULL, timed_main, &t);
    h_sleep_ms(300); /* the request is now waiting on Redis */

    long long t0 = h_now_ms();
    kill(gw.pid, SIGTERM);
    h_sleep_ms(300);
    CHECK(!port_accepts(gw.port)); /* stopped accepting */
    /* h_gw_stop sends a second SIGTERM (harmless) and waits for the exit. */
    int rc = h_gw_stop(&gw, 6700);
    long long ms = h_now_ms() - t0;
    pthread_join(th, NULL);
    fprintf(stderr,
            "  (timeout %d ms) exited %d after %lld ms; in-flight request got %ld after %.2f s\n",
            timeout_ms, rc, ms, t.r.status, t.r.seconds);
    if (rc != 0) dump_log_tail(&gw, 30);
    CHECK_EQ_INT(rc, 0);
    CHECK(ms < 5000);
    CHECK_EQ_INT(t.r.status, 503);
    if (t.r.status == 503)
        CHECK(strcmp(h_jcode(&t.r), "backend_unavailable") == 0 ||
              strcmp(h_jcode(&t.r), "shutting_down") == 0);
    h_resp_free(&t.r);
    kill(redis.pid, SIGCONT);
    h_redis_stop(&redis);
}

static void test_sigterm_in_flight_default_timeout(void) { sigterm_in_flight(2000); }

/* The Redis timeout is longer than the 5 s the gateway has to stop: it
 * must not wait for it. */
static void test_sigterm_in_flight_long_timeout(void) { sigterm_in_flight(20000); }

/* SIGTERM while a client has sent headers and half a body. */
static void test_sigterm_with_half_request(void) {
    struct h_redis redis;
    struct h_gw gw = {0};
    if (redis_up(&redis, 0) < 0 || gw_up(&gw, &redis, NULL) < 0) {
        CHECK(0);
        return;
    }
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_port = htons((uint16_t)gw.port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    CHECK(connect(fd, (struct sockaddr *)&a, sizeof a) == 0);
    const char *half =
        "POST /v1/locks/half HTTP/1.1\r\nHost: t\r\nContent-Length: 100\r\n\r\n{\"ttl";
    CHECK(send(fd, half, strlen(half), MSG_NOSIGNAL) == (ssize_t)strlen(half));
    h_sleep_ms(200);
    long long t0 = h_now_ms();
    int rc = h_gw_stop(&gw, 5000);
    long long ms = h_now_ms() - t0;
    fprintf(stderr, "  with a half-sent request: exited %d after %lld ms\n", rc, ms);
    CHECK_EQ_INT(rc, 0);
    CHECK(ms < 5000);
    close(fd);
    h_redis_stop(&redis);
}

/* ============================================================================
 * 6. Redis down when the gateway starts
 * ========================================================================= */

/* The gateway's command timeout is long (10 s) here on purpose: while
 * Redis refuses connections, a request must get its 503 at once, not
 * after a connection attempt times out; and once Redis is up, the next
 * attempt (back-off at most 1 s) must succeed. */
static void test_redis_down_at_start(void) {
    struct h_redis redis;
    struct h_gw gw = {0};
    if (redis_up(&redis, 0) < 0) {
        CHECK(0);
        return;
    }
    h_redis_kill(&redis); /* its port and directory stay reserved */
    CHECK_EQ_INT(gw_up(&gw, &redis, "--redis-timeout-ms 10000"), 0);
    if (gw.pid <= 0) return;

    struct h_resp r = h_http("GET", gw.port, "/healthz", NULL, NULL, NULL);
    CHECK_EQ_INT(r.status, 200);
    h_resp_free(&r);
    for (int i = 0; i < 4; i++) {
        r = h_http("POST", gw.port, "/v1/locks/early", NULL, NULL, NULL);
        check_unavailable(&r, 1.0);
        h_resp_free(&r);
        r = h_http("GET", gw.port, "/readyz", NULL, NULL, NULL);
        CHECK_EQ_INT(r.status, 503);
        CHECK(r.seconds < 1.0);
        h_resp_free(&r);
        r = h_http("GET", gw.port, "/healthz", NULL, NULL, NULL);
        CHECK_EQ_INT(r.status, 200);
        h_resp_free(&r);
        h_sleep_ms(400);
    }
    CHECK_EQ_INT(h_redis_restart(&redis, NULL), 0);
    long long took = wait_served(&gw, "/v1/locks/late", 3000);
    fprintf(stderr, "  served %lld ms after Redis came up\n", took);
    CHECK(took >= 0);
    CHECK(ready_within(&gw, 2000));
    CHECK(gateway_alive(&gw));
    stop_clean(&gw);
    h_redis_stop(&redis);
}

/* ============================================================================
 * 7. Waiters: a client gone mid-wait, and SIGTERM while waiting
 * ========================================================================= */

/* Waiters whose clients hang up are dropped at once, and none of them
 * takes the lock when it is released: a fresh client gets it. */
static void test_client_gone_mid_wait(void) {
    struct h_redis redis;
    struct h_gw gw = {0};
    if (redis_up(&redis, 0) < 0 || gw_up(&gw, &redis, NULL) < 0) {
        CHECK(0);
        return;
    }
    struct h_resp r =
        h_http("POST", gw.port, "/v1/locks/wait-gone", NULL, "{\"ttl_ms\":20000}", NULL);
    CHECK_EQ_INT(r.status, 201);
    char tok[160];
    snprintf(tok, sizeof tok, "%s", h_header(&r, "Lock-Token") ? h_header(&r, "Lock-Token") : "");
    h_resp_free(&r);

    enum { N = 10 };
    int fds[N];
    const char *body = "{\"wait_ms\":20000,\"ttl_ms\":30000}";
    char req[256];
    snprintf(req, sizeof req,
             "POST /v1/locks/wait-gone HTTP/1.1\r\nHost: t\r\n"
             "Content-Length: %zu\r\n\r\n%s",
             strlen(body), body);
    for (int i = 0; i < N; i++) {
        fds[i] = h_connect(gw.port);
        CHECK(fds[i] >= 0);
        if (fds[i] >= 0)
            CHECK(send(fds[i], req, strlen(req), MSG_NOSIGNAL) == (ssize_t)strlen(req));
    }
    long long waiting = -1;
    for (int i = 0; i < 20 && waiting != N; i++) {
        h_sleep_ms(50);
        waiting = metric(&gw, "lockgate_waiting_requests");
    }
    CHECK_EQ_INT(waiting, N);
    for (int i = 0; i < N; i++) {
        if (fds[i] < 0) continue;
        if (i % 2) {
            struct linger lg = {1, 0};
            setsockopt(fds[i], SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
        }
        close(fds[i]);
    }
    for (int i = 0; i < 40 && waiting != 0; i++) {
        h_sleep_ms(50);
        waiting = metric(&gw, "lockgate_waiting_requests");
    }
    CHECK_EQ_INT(waiting, 0);

    r = h_http("DELETE", gw.port, "/v1/locks/wait-gone", tok, NULL, NULL);
    CHECK_EQ_INT(r.status, 200);
    h_resp_free(&r);
    h_sleep_ms(300);
    r = h_http("POST", gw.port, "/v1/locks/wait-gone", NULL, NULL, NULL);
    if (r.status != 201)
        fprintf(stderr, "  after the waiters left: %ld %.200s\n", r.status, r.body);
    CHECK_EQ_INT(r.status, 201); /* no departed waiter took it */
    h_resp_free(&r);
    CHECK(gateway_alive(&gw));
    stop_clean(&gw);
    h_redis_stop(&redis);
}

/* SIGTERM answers a waiting request 503 shutting_down at once. */
static void test_sigterm_with_waiter(void) {
    struct h_redis redis;
    struct h_gw gw = {0};
    if (redis_up(&redis, 0) < 0 || gw_up(&gw, &redis, NULL) < 0) {
        CHECK(0);
        return;
    }
    struct h_resp r =
        h_http("POST", gw.port, "/v1/locks/wait-term", NULL, "{\"ttl_ms\":30000}", NULL);
    CHECK_EQ_INT(r.status, 201);
    h_resp_free(&r);
    struct timed t = {&gw, "POST", "/v1/locks/wait-term", {0}};
    pthread_t th;
    pthread_create(&th, NULL, waiting_main, &t);
    h_sleep_ms(300);
    long long t0 = h_now_ms();
    int rc = h_gw_stop(&gw, 6000);
    long long ms = h_now_ms() - t0;
    pthread_join(th, NULL);
    fprintf(stderr, "  with a waiter: exited %d after %lld ms; the waiter got %ld after %.2f s\n",
            rc, ms, t.r.status, t.r.seconds);
    CHECK_EQ_INT(rc, 0);
    CHECK(ms < 5000);
    CHECK_EQ_INT(t.r.status, 503);
    CHECK_EQ_STR(h_jcode(&t.r), "shutting_down");
    CHECK_EQ_STR(h_header(&t.r, "Retry-After"), "1");
    CHECK(t.r.seconds < 0.3 + 1.5); /* answered soon after the signal */
    h_resp_free(&t.r);
    h_redis_stop(&redis);
}

/* SIGTERM with --shutdown-delay-ms: /readyz fails at once, while requests
 * are still served for the delay (a new lock, a waiter granted by a
 * release), each answer closing its connection; then the waiter still
 * parked gets 503 shutting_down with Retry-After, and the gateway exits 0. */
static void test_sigterm_delay_serves_first(void) {
    struct h_redis redis;
    struct h_gw gw = {0};
    if (redis_up(&redis, 0) < 0 || gw_up(&gw, &redis, "--shutdown-delay-ms 1500") < 0) {
        CHECK(0);
        return;
    }
    char tok_a[64];
    struct h_resp r =
        h_http("POST", gw.port, "/v1/locks/delay-a", NULL, "{\"ttl_ms\":30000}", NULL);
    CHECK_EQ_INT(r.status, 201);
    snprintf(tok_a, sizeof tok_a, "%s", h_token(&r));
    h_resp_free(&r);
    r = h_http("POST", gw.port, "/v1/locks/delay-b", NULL, "{\"ttl_ms\":30000}", NULL);
    CHECK_EQ_INT(r.status, 201);
    h_resp_free(&r);
    struct posted w[2] = {
        {&gw, "/v1/locks/delay-a", "{\"wait_ms\":20000}", {0}, 0},
        {&gw, "/v1/locks/delay-b", "{\"wait_ms\":20000}", {0}, 0},
    };
    pthread_t th[2];
    for (int i = 0; i < 2; i++) pthread_create(&th[i], NULL, posted_main, &w[i]);
    long long waiting = 0;
    for (long long end = h_now_ms() + 5000; h_now_ms() < end && waiting < 2; h_sleep_ms(10))
        waiting = metric(&gw, "lockgate_waiting_requests");
    CHECK_EQ_INT(waiting, 2);

    long long t0 = h_now_ms();
    kill(gw.pid, SIGTERM);
    long long unready = -1;
    for (long long end = t0 + 1000; h_now_ms() < end && unready < 0; h_sleep_ms(5)) {
        r = h_http("GET", gw.port, "/readyz", NULL, NULL, NULL);
        if (r.status == 503 && strcmp(h_jcode(&r), "shutting_down") == 0) unready = h_now_ms() - t0;
        h_resp_free(&r);
    }
    CHECK(unready >= 0 && unready < 500);
    /* Still served: a new lock, and the waiter on a name released now. */
    r = h_http("POST", gw.port, "/v1/locks/delay-c", NULL, "{\"ttl_ms\":30000}", NULL);
    CHECK_EQ_INT(r.status, 201);
    CHECK_EQ_STR(h_header(&r, "Connection"), "close");
    h_resp_free(&r);
    r = h_http("DELETE", gw.port, "/v1/locks/delay-a", tok_a, NULL, NULL);
    CHECK_EQ_INT(r.status, 200);
    h_resp_free(&r);
    pthread_join(th[0], NULL);
    CHECK_EQ_INT(w[0].r.status, 201);
    CHECK(w[0].t_done - t0 < 1500);
    /* The other waits out the delay, then gets 503 with Retry-After. */
    pthread_join(th[1], NULL);
    long long took = w[1].t_done - t0;
    fprintf(stderr, "  /readyz 503 after %lld ms; the parked waiter answered %ld after %lld ms\n",
            unready, w[1].r.status, took);
    CHECK_EQ_INT(w[1].r.status, 503);
    CHECK_EQ_STR(h_jcode(&w[1].r), "shutting_down");
    CHECK_EQ_STR(h_header(&w[1].r, "Retry-After"), "1");
    CHECK(took >= 1450 && took < 1500 + 1500);
    stop_clean(&gw);
    for (int i = 0; i < 2; i++) h_resp_free(&w[i].r);
    h_redis_stop(&redis);
}

int main(void) {
    long long t0 = h_now_ms();
    RUN(test_redis_killed_and_restarted);
    RUN(test_waiters_ride_out_outage);
    RUN(test_script_flush);
    RUN(test_redis_frozen);
    RUN(test_gateway_killed_while_holding);
    RUN(test_sigterm_idle);
    RUN(test_sigterm_in_flight_default_timeout);
    RUN(test_sigterm_in_flight_long_timeout);
    RUN(test_sigterm_with_half_request);
    RUN(test_redis_down_at_start);
    RUN(test_client_gone_mid_wait);
    RUN(test_sigterm_with_waiter);
    RUN(test_sigterm_delay_serves_first);
    fprintf(stderr, "  (%.1f s)\n", (h_now_ms() - t0) / 1000.0);
    return check_summary("faults");
}
