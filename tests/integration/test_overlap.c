/* test_overlap.c -- mutual exclusion under faults, measured.
 *
 * Eight client threads contend for ONE lock name through TWO gateways
 * (alternating between them) while a fault is injected.  Every hold is
 * recorded as the client saw it, on this process's monotonic clock:
 *
 *   start  when the 201 arrived
 *   end    when the DELETE was sent, or when the lease would have run out
 *          counted from when the POST was sent (sent + the answer's
 *          ttl_ms), whichever is first
 *
 * so a hold is judged conservatively: it is never longer than the client
 * could rely on.  Two holds overlap when their intervals intersect; the
 * fences of the holds, in the order they started, should increase
 * (inversions are counted too).
 *
 * Scenarios (each ~10 s):
 *   a. quorum (5 masters): two masters killed, restarted after longer than
 *      the lease, then two others                                 expect 0
 *   b. Sentinel + --min-replicas-ack 1, master killed             expect 0
 *   b2. the same, master partitioned away with one gateway (SIGSTOP of the
 *      master and of the only sentinel that gateway knows; the master comes
 *      back after the failover, still believing it is the master)  expect 0
 *   c. plain Sentinel, master killed                 counted and printed
 *   c2. plain Sentinel, master partitioned as in b2  counted and printed
 *   d. single Redis, a gateway killed (SIGKILL) while a client holds the
 *      lock through it: held until its lease ends                 expect 0
 *   e. single Redis frozen (SIGSTOP) for longer than a lease, then thawed:
 *      leases are judged by Redis's clock, which kept running     expect 0
 *
 * The table at the end is what docs/redis-modes.md quotes. */
#include "tests/integration/harness.h"

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define THREADS     8
#define MAX_HOLDS   200000
#define LOCK_PATH   "/v1/locks/overlap"
#define MASTER_NAME "mymaster"

static long long now_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* ============================================================================
 * The clients and their holds
 * ========================================================================= */

struct hold {
    long long fence;
    long long start_us, end_us;
    int gw; /* which gateway granted it */
};

static struct hold holds[MAX_HOLDS];
static int nholds;
static pthread_mutex_t holds_mu = PTHREAD_MUTEX_INITIALIZER;

static void record(long long fence, long long start, long long end, int gw) {
    pthread_mutex_lock(&holds_mu);
    if (nholds < MAX_HOLDS) holds[nholds++] = (struct hold){fence, start, end, gw};
    pthread_mutex_unlock(&holds_mu);
}

struct run {
    int port[2];
    atomic_int dead[2]; /* a gateway the clients stopped using */
    int ttl_ms;
    int hold_us; /* time spent inside the critical section */
    atomic_int stop;
    atomic_int busy, unavailable, failed, other, granted[2];
    pthread_t th[THREADS];
};

struct worker {
    struct run *r;
    int id;
};
static struct worker workers[THREADS];

static void *worker_main(void *arg) {
    struct worker *w = arg;
    struct run *r = w->r;
    unsigned seed = 7919u * (unsigned)(w->id + 1);
    struct h_client cl;
    h_client_init(&cl, 5000);
    char body[64], tok[160];
    snprintf(body, sizeof body, "{\"ttl_ms\":%d}", r->ttl_ms);
    for (int round = 0; !atomic_load(&r->stop); round++) {
        int g = (w->id + round) % 2;
        if (atomic_load(&r->dead[g])) g = 1 - g;
        long long sent = now_us();
        long st = h_client_do(&cl, "POST", r->port[g], LOCK_PATH, NULL, body);
        long long got = now_us();
        if (st == 201) {
            long long ttl = h_jint(&cl.last, "ttl_ms"), fence = h_jint(&cl.last, "fence");
            snprintf(tok, sizeof tok, "%s", h_token(&cl.last));
            atomic_fetch_add(&r->granted[g], 1);
            struct timespec ts = {0, (long)r->hold_us * 1000};
            nanosleep(&ts, NULL);
            long long del = now_us(), lease_end = sent + ttl * 1000;
            record(fence, got, del < lease_end ? del : lease_end, g);
            /* Released through the gateway that granted it (in a partition
             * the other one may talk to another master). */
            for (int i = 0; i < 3; i++) {
                st = h_client_do(&cl, "DELETE", r->port[g], LOCK_PATH, tok, NULL);
                if (st == 200 || st == 404 || st == 409) break;
                /* 503 or no answer: the lease runs out by itself; a couple
                 * of quick retries keep the others from waiting for it. */
                h_sleep_ms(5);
            }
            continue;
        }
        if (st == 409) {
            atomic_fetch_add(&r->busy, 1);
            seed = seed * 1103515245u + 12345u;
            struct timespec ts = {0, (long)(300 + (seed >> 8) % 2000) * 1000};
            nanosleep(&ts, NULL);
        } else if (st == 503) {
            atomic_fetch_add(&r->unavailable, 1);
            h_sleep_ms(10);
        } else if (st == 0) {
            atomic_fetch_add(&r->failed, 1);
            h_sleep_ms(10);
        } else {
            atomic_fetch_add(&r->other, 1);
            fprintf(stderr, "  thread %d: acquire answered %ld: %.200s\n", w->id, st, cl.last.body);
            h_sleep_ms(10);
        }
    }
    h_client_free(&cl);
    return NULL;
}

static void run_start(struct run *r, int port0, int port1, int ttl_ms) {
    memset(r, 0, sizeof *r);
    r->port[0] = port0;
    r->port[1] = port1;
    r->ttl_ms = ttl_ms;
    r->hold_us = 2000;
    pthread_mutex_lock(&holds_mu);
    nholds = 0;
    pthread_mutex_unlock(&holds_mu);
    for (int i = 0; i < THREADS; i++) {
        workers[i] = (struct worker){r, i};
        pthread_create(&r->th[i], NULL, worker_main, &workers[i]);
    }
}

static void run_stop(struct run *r) {
    atomic_store(&r->stop, 1);
    for (int i = 0; i < THREADS; i++) pthread_join(r->th[i], NULL);
}

/* A hold taken by this thread through gateway g that is never released:
 * it ends when its lease does.  Returns 0 once recorded, -1 if no 201
 * came within timeout_ms. */
static int hold_without_release(struct run *r, int g, int ttl_ms, int timeout_ms) {
    char body[64];
    snprintf(body, sizeof body, "{\"ttl_ms\":%d}", ttl_ms);
    long long t0 = h_now_ms();
    struct h_client cl;
    h_client_init(&cl, 5000);
    int rc = -1;
    while (h_now_ms() - t0 < timeout_ms) {
        long long sent = now_us();
        long st = h_client_do(&cl, "POST", r->port[g], LOCK_PATH, NULL, body);
        long long got = now_us();
        if (st == 201) {
            long long ttl = h_jint(&cl.last, "ttl_ms");
            record(h_jint(&cl.last, "fence"), got, sent + ttl * 1000, g);
            atomic_fetch_add(&r->granted[g], 1);
            rc = 0;
            break;
        }
        h_sleep_ms(1);
    }
    h_client_free(&cl);
    return rc;
}

/* ============================================================================
 * Judging the holds
 * ========================================================================= */

struct result {
    const char *scenario;
    const char *mode;
    int holds, overlapping, pairs, inversions, unavailable, failed, granted[2];
    double seconds;
    int expect_zero;
};

static struct result results[16];
static int nresults;

static int by_start(const void *a, const void *b) {
    const struct hold *x = a, *y = b;
    return x->start_us < y->start_us ? -1 : x->start_us > y->start_us;
}

static struct result *judge(struct run *r, const char *scenario, const char *mode, double seconds,
                            int expect_zero) {
    struct result *res = &results[nresults++];
    memset(res, 0, sizeof *res);
    res->scenario = scenario;
    res->mode = mode;
    res->seconds = seconds;
    res->expect_zero = expect_zero;
    res->unavailable = atomic_load(&r->unavailable);
    res->failed = atomic_load(&r->failed);
    res->granted[0] = atomic_load(&r->granted[0]);
    res->granted[1] = atomic_load(&r->granted[1]);
    pthread_mutex_lock(&holds_mu);
    int n = nholds;
    qsort(holds, (size_t)n, sizeof holds[0], by_start);
    static char involved[MAX_HOLDS];
    memset(involved, 0, (size_t)n);
    int shown = 0;
    long long last_fence = 0, last_end = 0;
    for (int i = 0; i < n; i++) {
        if (holds[i].end_us <= holds[i].start_us) continue; /* the lease ran out on the way */
        res->holds++;
        for (int j = i + 1; j < n && holds[j].start_us < holds[i].end_us; j++) {
            if (holds[j].end_us <= holds[j].start_us) continue;
            res->pairs++;
            involved[i] = involved[j] = 1;
            if (shown++ < 3)
                fprintf(stderr,
                        "  overlap: fence %lld (gateway %d) held %.1f..%.1f ms, fence %lld "
                        "(gateway %d) from %.1f ms\n",
                        holds[i].fence, holds[i].gw, (holds[i].start_us - holds[0].start_us) / 1e3,
                        (holds[i].end_us - holds[0].start_us) / 1e3, holds[j].fence, holds[j].gw,
                        (holds[j].start_us - holds[0].start_us) / 1e3);
        }
        /* In start order, a hold that began after the previous one ended
         * must carry a higher fence. */
        if (holds[i].start_us >= last_end && holds[i].fence <= last_fence) res->inversions++;
        if (holds[i].fence > last_fence) last_fence = holds[i].fence;
        if (holds[i].end_us > last_end) last_end = holds[i].end_us;
    }
    for (int i = 0; i < n; i++) res->overlapping += involved[i];
    pthread_mutex_unlock(&holds_mu);
    fprintf(stderr,
            "  %s: %d holds (%d + %d by gateway), %d overlapping holds (%d pairs), %d fence "
            "inversions, %d answers 503, %d without answer, %.1f s\n",
            scenario, res->holds, res->granted[0], res->granted[1], res->overlapping, res->pairs,
            res->inversions, res->unavailable, res->failed, seconds);
    return res;
}

/* ============================================================================
 * Topologies
 * ========================================================================= */

struct topo {
    struct h_redis master, replica, replica2, sen[3];
    int replicas;
};

/* A master, `replicas` (1 or 2) replicas, three sentinels (quorum 2,
 * down-after 1 s, failover-timeout 3 s). */
static int sentinel_topology(struct topo *t, int replicas) {
    memset(t, 0, sizeof *t);
    t->replicas = replicas;
    if (h_redis_start(&t->master, 0, NULL) < 0 || h_replica_start(&t->replica, &t->master) < 0)
        return -1;
    if (replicas > 1 && h_replica_start(&t->replica2, &t->master) < 0) return -1;
    for (int i = 0; i < 3; i++)
        if (h_sentinel_start(&t->sen[i], &t->master, MASTER_NAME, 2, 1000, 3000) < 0) return -1;
    for (int i = 0; i < 3; i++)
        if (h_sentinel_wait_ready(&t->sen[i], MASTER_NAME, 2, replicas, 20000) < 0) return -1;
    return 0;
}

static void topology_stop(struct topo *t) {
    for (int i = 0; i < 3; i++) h_redis_stop(&t->sen[i]);
    h_redis_stop(&t->replica2);
    h_redis_stop(&t->replica);
    h_redis_stop(&t->master);
}

/* Polls a sentinel until it names a master other than old_port; the ms it
 * took, or -1 after timeout_ms. */
static long long wait_switch(struct h_redis *s, int old_port, int timeout_ms) {
    long long t0 = h_now_ms();
    while (h_now_ms() - t0 < timeout_ms) {
        int p = h_sentinel_master_port(s, MASTER_NAME);
        if (p > 0 && p != old_port) return h_now_ms() - t0;
        h_sleep_ms(50);
    }
    return -1;
}

static void stop_gateways(struct h_gw *g, int n) {
    for (int i = 0; i < n; i++)
        if (g[i].pid > 0) h_gw_kill(&g[i]);
}

/* ============================================================================
 * a. Quorum mode
 * ========================================================================= */

static void test_a_quorum(void) {
    struct h_redis m[5];
    struct h_gw g[2] = {{0}};
    int ok = 1;
    for (int i = 0; i < 5 && ok; i++) ok = h_redis_start(&m[i], 0, NULL) == 0;
    char flags[512];
    size_t len = 0;
    for (int i = 1; i < 5 && ok; i++)
        len += (size_t)snprintf(flags + len, sizeof flags - len, "--redis redis://127.0.0.1:%d ",
                                m[i].port);
    snprintf(flags + len, sizeof flags - len, "--redis-timeout-ms 500");
    for (int i = 0; i < 2 && ok; i++) ok = h_gw_up(&g[i], &m[0], flags) == 0;
    CHECK(ok);
    if (!ok) return;
    h_sleep_ms(300);
    struct run r;
    long long t0 = h_now_ms();
    run_start(&r, g[0].port, g[1].port, 1000);
    h_sleep_ms(1500);
    h_redis_kill(&m[1]);
    h_redis_kill(&m[3]);
    h_sleep_ms(2000); /* down for longer than the 1 s lease */
    CHECK_EQ_INT(h_redis_restart(&m[1], NULL), 0);
    CHECK_EQ_INT(h_redis_restart(&m[3], NULL), 0);
    h_sleep_ms(1500);
    h_redis_kill(&m[0]);
    h_redis_kill(&m[4]);
    h_sleep_ms(2000);
    CHECK_EQ_INT(h_redis_restart(&m[0], NULL), 0);
    CHECK_EQ_INT(h_redis_restart(&m[4], NULL), 0);
    h_sleep_ms(1500);
    run_stop(&r);
    struct result *res =
        judge(&r, "a. quorum: 2 of 5 masters killed, restarted after > lease, twice", "quorum",
              (h_now_ms() - t0) / 1000.0, 1);
    CHECK(res->holds > 200);
    CHECK_EQ_INT(res->overlapping, 0);
    CHECK_EQ_INT(res->inversions, 0);
    CHECK_EQ_INT(atomic_load(&r.other), 0);
    stop_gateways(g, 2);
    for (int i = 0; i < 5; i++) h_redis_stop(&m[i]);
}

/* ============================================================================
 * b, c. Sentinel, master killed
 * ========================================================================= */

static void sentinel_killed(int ack) {
    struct topo t;
    struct h_gw g[2] = {{0}};
    if (sentinel_topology(&t, 1) < 0) {
        CHECK(0);
        topology_stop(&t);
        return;
    }
    char flags[512];
    snprintf(flags, sizeof flags,
             "--sentinel 127.0.0.1:%d --sentinel 127.0.0.1:%d --sentinel 127.0.0.1:%d "
             "--sentinel-master %s --redis-timeout-ms 1000 %s",
             t.sen[0].port, t.sen[1].port, t.sen[2].port, MASTER_NAME,
             ack ? "--min-replicas-ack 1 --replica-ack-timeout-ms 300" : "");
    int ok = h_gw_up(&g[0], &t.master, flags) == 0 && h_gw_up(&g[1], &t.master, flags) == 0;
    CHECK(ok);
    if (!ok) {
        stop_gateways(g, 2);
        topology_stop(&t);
        return;
    }
    h_sleep_ms(300);
    struct run r;
    long long t0 = h_now_ms();
    run_start(&r, g[0].port, g[1].port, 2000);
    h_sleep_ms(2000);
    int old_port = t.master.port;
    h_redis_kill(&t.master);
    long long sw = wait_switch(&t.sen[0], old_port, 20000);
    CHECK(sw >= 0);
    if (ack) {
        /* The promoted replica has no replica of its own: until one joins,
         * nothing can be acknowledged.  The old master comes back as one. */
        char extra[64];
        snprintf(extra, sizeof extra, "--replicaof 127.0.0.1 %d", t.replica.port);
        CHECK_EQ_INT(h_redis_restart(&t.master, extra), 0);
        CHECK_EQ_INT(h_replica_wait_link(&t.master, 10000), 0);
    }
    int before = atomic_load(&r.granted[0]) + atomic_load(&r.granted[1]);
    /* Served again: 2.5 s of load, or up to 10 s while fewer than 21 grants
     * came (a gateway may first ask a sentinel that has not yet heard of
     * the switch, and meet the old master come back as a replica). */
    long long t_after = h_now_ms();
    h_sleep_ms(2500);
    while (atomic_load(&r.granted[0]) + atomic_load(&r.granted[1]) - before <= 20 &&
           h_now_ms() - t_after < 10000)
        h_sleep_ms(100);
    int after = atomic_load(&r.granted[0]) + atomic_load(&r.granted[1]) - before;
    run_stop(&r);
    fprintf(stderr, "  failover took %lld ms; %d holds in the %lld ms after it\n", sw, after,
            h_now_ms() - t_after);
    CHECK(after > 20);
    struct result *res =
        ack ? judge(&r, "b. Sentinel + ack 1: master killed", "sentinel+ack",
                    (h_now_ms() - t0) / 1000.0, 1)
            : judge(&r, "c. Sentinel: master killed", "sentinel", (h_now_ms() - t0) / 1000.0, 0);
    CHECK(res->holds > 100);
    CHECK(res->unavailable > 0);
    if (ack) {
        CHECK_EQ_INT(res->overlapping, 0);
        CHECK_EQ_INT(res->inversions, 0);
    }
    CHECK_EQ_INT(atomic_load(&r.other), 0);
    stop_gateways(g, 2);
    topology_stop(&t);
}

static void test_b_sentinel_ack_master_killed(void) { sentinel_killed(1); }
static void test_c_sentinel_master_killed(void) { sentinel_killed(0); }

/* ============================================================================
 * b2, c2. Sentinel, master partitioned away with one gateway
 * ========================================================================= */

/* A master with two replicas.  Gateway 0 knows only sentinel 2; gateway 1 knows sentinels 0 and 1.  The
 * master and sentinel 2 are frozen together: the others promote the
 * replica and gateway 1 follows; then the old master comes back, still a
 * master in its own eyes until the sentinels turn it into a replica, and
 * gateway 0, which never heard of the switch, serves from it. */
static void sentinel_partitioned(int ack) {
    struct topo t;
    struct h_gw g[2] = {{0}};
    /* Two replicas: after the failover the new master keeps one, so it can
     * acknowledge (with one, nothing could be acknowledged any more). */
    if (sentinel_topology(&t, 2) < 0) {
        CHECK(0);
        topology_stop(&t);
        return;
    }
    const char *more = ack ? "--min-replicas-ack 1 --replica-ack-timeout-ms 300" : "";
    char f0[256], f1[256];
    snprintf(f0, sizeof f0,
             "--sentinel 127.0.0.1:%d --sentinel-master %s --redis-timeout-ms 1000 %s",
             t.sen[2].port, MASTER_NAME, more);
    snprintf(f1, sizeof f1,
             "--sentinel 127.0.0.1:%d --sentinel 127.0.0.1:%d --sentinel-master %s "
             "--redis-timeout-ms 1000 %s",
             t.sen[0].port, t.sen[1].port, MASTER_NAME, more);
    int ok = h_gw_up(&g[0], &t.master, f0) == 0 && h_gw_up(&g[1], &t.master, f1) == 0;
    CHECK(ok);
    if (!ok) {
        stop_gateways(g, 2);
        topology_stop(&t);
        return;
    }
    h_sleep_ms(300);
    struct run r;
    long long t0 = h_now_ms();
    run_start(&r, g[0].port, g[1].port, 2000);
    h_sleep_ms(1500);
    kill(t.sen[2].pid, SIGSTOP);
    kill(t.master.pid, SIGSTOP);
    long long sw = wait_switch(&t.sen[0], t.master.port, 20000);
    CHECK(sw >= 0);
    h_sleep_ms(500);
    int g1_before = atomic_load(&r.granted[1]);
    kill(t.master.pid, SIGCONT); /* back, but only gateway 0 uses it */
    h_sleep_ms(3500);
    int g1_after = atomic_load(&r.granted[1]) - g1_before;
    run_stop(&r);
    kill(t.sen[2].pid, SIGCONT);
    fprintf(stderr, "  failover took %lld ms; the old master was back for 3.5 s\n", sw);
    CHECK(g1_after > 20); /* gateway 1 served from the new master */
    struct result *res =
        ack ? judge(&r, "b2. Sentinel + ack 1: master partitioned with one gateway", "sentinel+ack",
                    (h_now_ms() - t0) / 1000.0, 1)
            : judge(&r, "c2. Sentinel: master partitioned with one gateway", "sentinel",
                    (h_now_ms() - t0) / 1000.0, 0);
    CHECK(res->holds > 100);
    if (ack) {
        CHECK_EQ_INT(res->overlapping, 0);
        CHECK_EQ_INT(res->inversions, 0);
    }
    CHECK_EQ_INT(atomic_load(&r.other), 0);
    stop_gateways(g, 2);
    topology_stop(&t);
}

static void test_b2_sentinel_ack_partitioned(void) { sentinel_partitioned(1); }
static void test_c2_sentinel_partitioned(void) { sentinel_partitioned(0); }

/* ============================================================================
 * d. A gateway killed while a client holds the lock through it
 * ========================================================================= */

static void test_d_gateway_killed_holding(void) {
    struct h_redis redis;
    struct h_gw g[2] = {{0}};
    if (h_redis_start(&redis, 0, NULL) < 0 || h_gw_up(&g[0], &redis, NULL) < 0 ||
        h_gw_up(&g[1], &redis, NULL) < 0) {
        CHECK(0);
        return;
    }
    struct run r;
    long long t0 = h_now_ms();
    run_start(&r, g[0].port, g[1].port, 1500);
    h_sleep_ms(1500);
    /* This thread takes the lock through gateway 0 and never releases it;
     * gateway 0 dies at once. */
    CHECK_EQ_INT(hold_without_release(&r, 0, 1500, 5000), 0);
    atomic_store(&r.dead[0], 1);
    h_gw_kill(&g[0]);
    long long killed = h_now_ms();
    int g1_before = atomic_load(&r.granted[1]);
    h_sleep_ms(3500);
    run_stop(&r);
    CHECK(atomic_load(&r.granted[1]) - g1_before > 20); /* served after the lease ran out */
    fprintf(stderr, "  gateway killed %lld ms into the run\n", killed - t0);
    struct result *res = judge(&r, "d. single Redis: gateway killed while holding (lease 1.5 s)",
                               "single", (h_now_ms() - t0) / 1000.0, 1);
    CHECK(res->holds > 100);
    CHECK_EQ_INT(res->overlapping, 0);
    CHECK_EQ_INT(res->inversions, 0);
    CHECK_EQ_INT(atomic_load(&r.other), 0);
    stop_gateways(g, 2);
    h_redis_stop(&redis);
}

/* ============================================================================
 * e. Redis frozen for longer than a lease
 * ========================================================================= */

static void test_e_redis_frozen(void) {
    struct h_redis redis;
    struct h_gw g[2] = {{0}};
    if (h_redis_start(&redis, 0, NULL) < 0 ||
        h_gw_up(&g[0], &redis, "--redis-timeout-ms 500") < 0 ||
        h_gw_up(&g[1], &redis, "--redis-timeout-ms 500") < 0) {
        CHECK(0);
        return;
    }
    struct run r;
    long long t0 = h_now_ms();
    run_start(&r, g[0].port, g[1].port, 800);
    h_sleep_ms(1500);
    /* A holder that keeps the lock for its whole lease, and Redis frozen
     * right after it got it, for longer than that lease. */
    CHECK_EQ_INT(hold_without_release(&r, 1, 800, 5000), 0);
    kill(redis.pid, SIGSTOP);
    h_sleep_ms(1500);
    kill(redis.pid, SIGCONT);
    int before = atomic_load(&r.granted[0]) + atomic_load(&r.granted[1]);
    h_sleep_ms(2500);
    run_stop(&r);
    CHECK(atomic_load(&r.granted[0]) + atomic_load(&r.granted[1]) - before > 20); /* thawed */
    struct result *res = judge(&r, "e. single Redis frozen 1.5 s, longer than the 0.8 s lease",
                               "single", (h_now_ms() - t0) / 1000.0, 1);
    CHECK(res->holds > 100);
    CHECK(res->unavailable > 0);
    CHECK_EQ_INT(res->overlapping, 0);
    CHECK_EQ_INT(res->inversions, 0);
    CHECK_EQ_INT(atomic_load(&r.other), 0);
    stop_gateways(g, 2);
    h_redis_stop(&redis);
}

/* ============================================================================
 * The table
 * ========================================================================= */

static void print_table(void) {
    printf(
        "\n| scenario | holds | overlapping holds | fence inversions | 503 answers | expected |\n");
    printf("|---|---:|---:|---:|---:|---|\n");
    for (int i = 0; i < nresults; i++) {
        struct result *res = &results[i];
        printf("| %s | %d | %d | %d | %d | %s |\n", res->scenario, res->holds, res->overlapping,
               res->inversions, res->unavailable, res->expect_zero ? "0" : "counted");
    }
    for (int i = 0; i < nresults; i++)
        if (!results[i].expect_zero && strncmp(results[i].mode, "sentinel", 8) == 0)
            printf("plain sentinel (%s): %d overlapping holds in %d holds\n", results[i].scenario,
                   results[i].overlapping, results[i].holds);
    printf("\n");
    fflush(stdout);
}

int main(void) {
    long long t0 = h_now_ms();
    check_filter(NULL);
    RUN_SOME(test_a_quorum);
    RUN_SOME(test_b_sentinel_ack_master_killed);
    RUN_SOME(test_b2_sentinel_ack_partitioned);
    RUN_SOME(test_c_sentinel_master_killed);
    RUN_SOME(test_c2_sentinel_partitioned);
    RUN_SOME(test_d_gateway_killed_holding);
    RUN_SOME(test_e_redis_frozen);
    print_table();
    fprintf(stderr, "  (%.1f s)\n", (h_now_ms() - t0) / 1000.0);
    return check_summary("overlap");
}
