/* test_idloss.c -- ids on an operator's worst day (#35): Redis loses the
 * last writes or all of them, and no id is handed out twice.
 *
 * Each case has gateways minting ids in four namespaces from threads of
 * their own (one keep-alive client each, so a gateway's answers come in
 * order), through the fault, plus a gateway that joins after it and one
 * started afresh later still.  Every id of every answer is kept; at the end
 * the ids of each namespace are sorted and counted for repeats, and each
 * gateway's answers for decreases.  The targets are 0 and 0.
 *
 *   1. Replication loss, hand promotion: the replica reaches its master
 *      through a relay (harness.c) that holds the replication stream, so
 *      the writes after the hold are really lost when the master is killed
 *      (SIGSTOP of the replica would lose nothing: the bytes wait in kernel
 *      buffers).  The replica is promoted at once, in the same second, and
 *      the gateways' address (another relay) moved to it.
 *   2. The same with --min-replicas-ack 1: no id of a block the replica did
 *      not acknowledge is handed out, so the promoted replica's marks lie at
 *      or above every id issued.
 *   3. Sentinel failover after the same loss, with the replica's clock 3 s
 *      behind (an LD_PRELOAD shim, timeshift.so: libfaketime clashes with
 *      redis-server's jemalloc).
 *   4. Quorum mode: all three masters restarted empty in the same second.
 *   5. Sentinel mode after a promotion the gateway hears no +switch-master
 *      for: it asks its sentinel again when the old master refuses
 *      connections, and serves within a few seconds.
 *   6. Namespaces evicted from the gateways (--id-namespaces 16, 40 used)
 *      while Redis restarts empty: evicted namespaces keep their floors.
 *   7. Redis Cluster: a shard's replica stopped, the replication link filled
 *      so that leases are lost with the master, the replica taking over
 *      (CLUSTER FAILOVER TAKEOVER).
 *   8. Two losses within one second: the second era jumps to the same
 *      second as the first, and starts above its ids.
 *
 * Without the id era (lua/id_lease.lua) each case repeats ids: the new
 * master's marks are behind and its clock reads the lost leases' second
 * (or an earlier one). */
#include "tests/integration/harness.h"

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NNS    4  /* namespaces */
#define MAXNS  64 /* namespaces a minter may cycle through */
#define COUNT  10 /* ids per request */
#define JUMP_S 2  /* --id-jump-s of every gateway here */
#define MAXGW  4

struct rec {
    uint64_t id;
    unsigned char ns, gw;
};

/* One minting thread: one gateway, one client, answers in order. */
struct minter {
    int port, gw;
    int nns; /* namespaces it cycles through: NNS, or more to evict */
    atomic_int stop;
    struct rec *recs; /* the minting thread's alone until it stops */
    size_t n, cap;
    _Atomic uint64_t top[MAXNS]; /* the highest id handed out per namespace, for
                                        the main thread while minting goes on */
    long ok, failed;
    pthread_t th;
};

static void keep(struct minter *m, int ns, uint64_t id) {
    if (m->n == m->cap) {
        m->cap = m->cap ? 2 * m->cap : 65536;
        m->recs = realloc(m->recs, m->cap * sizeof *m->recs);
        if (!m->recs) abort();
    }
    m->recs[m->n++] = (struct rec){id, (unsigned char)ns, (unsigned char)m->gw};
}

static void *mint_main(void *arg) {
    struct minter *m = arg;
    struct h_client cl;
    h_client_init(&cl, 5000);
    char path[64];
    for (int i = 0; !atomic_load(&m->stop); i++) {
        int ns = i % m->nns;
        snprintf(path, sizeof path, "/v1/ids/loss-%d?count=%d", ns, COUNT);
        long st = h_client_do(&cl, "POST", m->port, path, NULL, NULL);
        cJSON *ids = st == 200 ? cJSON_GetObjectItem(cl.last.json, "ids") : NULL;
        if (!cJSON_IsArray(ids)) {
            m->failed++;
            h_sleep_ms(20); /* a 503: as a client told Retry-After would, a little sooner */
            continue;
        }
        m->ok++;
        cJSON *it;
        uint64_t id = 0;
        cJSON_ArrayForEach(it, ids) keep(m, ns, id = strtoull(it->valuestring, NULL, 10));
        if (id > atomic_load(&m->top[ns])) atomic_store(&m->top[ns], id);
    }
    h_client_free(&cl);
    return NULL;
}

static void mint_start_n(struct minter *m, int port, int gw, int nns) {
    memset(m, 0, sizeof *m);
    m->port = port;
    m->gw = gw;
    m->nns = nns;
    pthread_create(&m->th, NULL, mint_main, m);
}

static void mint_start(struct minter *m, int port, int gw) { mint_start_n(m, port, gw, NNS); }

static void mint_stop(struct minter *m) {
    atomic_store(&m->stop, 1);
    pthread_join(m->th, NULL);
}

/* Waits until minter m has had `answers` more good answers (the event, not
 * a time), at most timeout_ms. */
static void mint_wait(struct minter *m, long answers, int timeout_ms) {
    long goal = m->ok + answers;
    long long end = h_now_ms() + timeout_ms;
    while (m->ok < goal && h_now_ms() < end) h_sleep_ms(10);
}

static int cmp_rec(const void *x, const void *y) {
    const struct rec *a = x, *b = y;
    if (a->ns != b->ns) return a->ns < b->ns ? -1 : 1;
    return a->id < b->id ? -1 : a->id > b->id;
}

/* Repeats across every minter, and decreases within each (a minter is one
 * gateway's answers in order). */
static void count(struct minter *ms, int n, size_t *ids, size_t *repeats, size_t *decreases) {
    size_t total = 0;
    *decreases = 0;
    for (int i = 0; i < n; i++) {
        uint64_t last[MAXNS] = {0};
        for (size_t k = 0; k < ms[i].n; k++) {
            struct rec *r = &ms[i].recs[k];
            if (r->id <= last[r->ns]) (*decreases)++;
            last[r->ns] = r->id;
        }
        total += ms[i].n;
    }
    struct rec *all = malloc((total ? total : 1) * sizeof *all);
    size_t k = 0;
    for (int i = 0; i < n; i++) {
        memcpy(all + k, ms[i].recs, ms[i].n * sizeof *all);
        k += ms[i].n;
    }
    qsort(all, total, sizeof *all, cmp_rec);
    *repeats = 0;
    for (size_t j = 1; j < total; j++)
        if (all[j].ns == all[j - 1].ns && all[j].id == all[j - 1].id) {
            if ((*repeats)++ < 5)
                fprintf(stderr,
                        "  repeated: namespace %d id %llu (second %llu, sequence %llu) from "
                        "gateways %d and %d\n",
                        all[j].ns, (unsigned long long)all[j].id,
                        (unsigned long long)(all[j].id >> 32),
                        (unsigned long long)(all[j].id & 0xffffffffu), all[j].gw, all[j - 1].gw);
        }
    free(all);
    *ids = total;
}

/* The highest id handed out in namespace ns by any minter. */
static uint64_t highest(struct minter *ms, int n, int ns) {
    uint64_t h = 0;
    for (int i = 0; i < n; i++)
        if (atomic_load(&ms[i].top[ns]) > h) h = atomic_load(&ms[i].top[ns]);
    return h;
}

/* The id a namespace's mark on r stands at (its last sequence), 0 when none. */
static uint64_t mark_on(struct h_redis *r, int ns) {
    char args[128];
    snprintf(args, sizeof args, "HMGET 'lockgate:id:{loss-%d}' sec seq", ns);
    const char *out = h_redis_cli(r, args);
    unsigned long long sec = 0, seq = 0;
    if (!out || sscanf(out, "%llu %llu", &sec, &seq) != 2) return 0;
    return sec << 32 | seq;
}

static void free_minters(struct minter *ms, int n) {
    for (int i = 0; i < n; i++) free(ms[i].recs);
}

/* After the fault: a gateway joins (r, flags) and mints beside the first
 * two, a fresh one later still; then every id of the four is counted.
 * m[2] is started here unless the case started it (started3). */
static void join_and_count(struct h_redis *r, const char *flags, struct h_gw *g, struct minter *m,
                           int started3, const char *what) {
    if (!started3) {
        CHECK_EQ_INT(h_gw_up(&g[2], r, flags), 0);
        mint_start(&m[2], g[2].port, 2);
    }
    for (int i = 0; i < 3; i++) mint_wait(&m[i], 20, 15000);
    CHECK_EQ_INT(h_gw_up(&g[3], r, flags), 0);
    mint_start(&m[3], g[3].port, 3);
    for (int i = 0; i < 4; i++) mint_wait(&m[i], 20, 10000);
    for (int i = 0; i < 4; i++) mint_stop(&m[i]);
    size_t ids, repeats, decreases;
    count(m, 4, &ids, &repeats, &decreases);
    fprintf(stderr,
            "  %zu ids from 4 gateways: %zu repeated, %zu decreases (%s); jumps on "
            "gateway 0: %lld\n",
            ids, repeats, decreases, what, h_metric(&g[0], "lockgate_id_jumps_total"));
    CHECK(ids > 0);
    CHECK_EQ_INT(repeats, 0);
    CHECK_EQ_INT(decreases, 0);
    for (int i = 0; i < 4; i++) CHECK(m[i].ok > 0);
    free_minters(m, 4);
    for (int i = 0; i < 4; i++) h_gw_stop(&g[i], 5000);
}

/* Lets the gateways mint until this Redis's id era is past its window, so
 * the ids before the fault lie at Redis's clock, as on a Redis long in use. */
static void mint_past_era(struct h_redis *r, struct minter *m) {
    const char *t = h_redis_cli(r, "TIME");
    long long start = t ? atoll(t) : 0;
    long long end = h_now_ms() + 15000;
    for (;;) {
        t = h_redis_cli(r, "TIME");
        if (!t || atoll(t) > start + JUMP_S + 1 || h_now_ms() > end) break;
        h_sleep_ms(50);
    }
    mint_wait(m, 20, 5000);
}

/* Waits until what was already on its way to the replica when its stream
 * was held has landed: its replication offset stays put for 150 ms. */
static void replica_settled(struct h_redis *replica) {
    long long last = -2, end = h_now_ms() + 5000;
    for (int still = 0; still < 3 && h_now_ms() < end;) {
        long long off = h_redis_info_int(replica, "replication", "master_repl_offset");
        still = off == last ? still + 1 : 0;
        last = off;
        h_sleep_ms(50);
    }
}

/* The fault of cases 1 and 2: the replica behind relay `rep` loses what the
 * master wrote after the hold; the master is killed, the replica promoted at
 * once and the gateways' relay `front` moved to it.  Then a gateway joins,
 * and later a fresh one. */
static void replication_loss(const char *flags, int acked) {
    struct h_redis master, replica, via_rep, via_front;
    struct h_relay rep, front;
    CHECK_EQ_INT(h_redis_start(&master, 0, NULL), 0);
    CHECK_EQ_INT(h_relay_start(&rep, master.port), 0);
    via_rep = master;
    via_rep.port = rep.port;
    CHECK_EQ_INT(h_replica_start(&replica, &via_rep), 0);
    CHECK_EQ_INT(h_relay_start(&front, master.port), 0);
    via_front = master;
    via_front.port = front.port;

    struct h_gw g[MAXGW];
    struct minter m[MAXGW];
    char all_flags[256];
    snprintf(all_flags, sizeof all_flags, "--id-jump-s %d %s", JUMP_S, flags);
    for (int i = 0; i < 2; i++) {
        CHECK_EQ_INT(h_gw_up(&g[i], &via_front, all_flags), 0);
        mint_start(&m[i], g[i].port, i);
    }
    mint_past_era(&master, &m[0]);
    mint_wait(&m[1], 20, 5000);

    h_relay_hold(&rep); /* from here the replica gets nothing */
    replica_settled(&replica);
    long before0 = m[0].ok, before1 = m[1].ok;
    if (acked) {
        /* Blocks leased now are not acknowledged: ids stop once the fresh
         * block runs out (503), never from an unacknowledged block. */
        long long end = h_now_ms() + 3000;
        while (m[0].failed == 0 && h_now_ms() < end) h_sleep_ms(10);
        CHECK(m[0].failed > 0);
    } else {
        /* Until every namespace has ids handed out from a lease the replica
         * lacks: the loss. */
        long long end = h_now_ms() + 10000;
        int behind = 0;
        while (behind < NNS && h_now_ms() < end) {
            behind = 0;
            for (int ns = 0; ns < NNS; ns++) behind += highest(m, 2, ns) > mark_on(&replica, ns);
            if (behind < NNS) h_sleep_ms(20);
        }
        CHECK_EQ_INT(behind, NNS);
        CHECK(m[0].ok > before0 && m[1].ok > before1);
    }
    uint64_t issued[NNS];
    for (int ns = 0; ns < NNS; ns++) issued[ns] = highest(m, 2, ns);
    h_redis_kill(&master);
    CHECK_EQ_STR(h_redis_cli(&replica, "REPLICAOF NO ONE"), "OK");
    h_relay_retarget(&front, replica.port);
    int lost = 0;
    for (int ns = 0; ns < NNS; ns++) {
        uint64_t mark = mark_on(&replica, ns);
        if (acked)
            CHECK(mark >= issued[ns]); /* every id came from an acknowledged block */
        else
            lost += mark < issued[ns];
    }
    if (!acked) CHECK(lost > 0); /* the loss is real: the new master is behind */
    struct h_redis replica2;     /* with --min-replicas-ack, the new master needs one */
    if (acked) CHECK_EQ_INT(h_replica_start(&replica2, &replica), 0);

    join_and_count(&via_front, all_flags, g, m, 0, acked ? "acknowledged" : "hand promotion");
    h_relay_stop(&front);
    h_relay_stop(&rep);
    if (acked) h_redis_stop(&replica2);
    h_redis_stop(&replica);
    h_redis_stop(&master);
}

static void test_replication_loss_hand_promotion(void) { replication_loss("", 0); }

static void test_replication_loss_acked(void) {
    replication_loss("--min-replicas-ack 1 --replica-ack-timeout-ms 300", 1);
}

/* Case 3: Sentinel, the replica's clock 3 s behind, writes lost. */
static void test_sentinel_failover_clock_behind(void) {
    char shim[256];
    h_timeshift_shim(shim, sizeof shim);
    struct h_redis master, replica, via_rep, sen[3];
    struct h_relay rep;
    CHECK_EQ_INT(h_redis_start(&master, 0, NULL), 0);
    CHECK_EQ_INT(h_relay_start(&rep, master.port), 0);
    via_rep = master;
    via_rep.port = rep.port;
    setenv("LD_PRELOAD", shim, 1);
    setenv("TIMESHIFT_S", "-3", 1);
    int up = h_replica_start(&replica, &via_rep);
    unsetenv("LD_PRELOAD");
    unsetenv("TIMESHIFT_S");
    CHECK_EQ_INT(up, 0);
    const char *t = h_redis_cli(&master, "TIME");
    long long skew = t ? atoll(t) : 0;
    t = h_redis_cli(&replica, "TIME");
    skew -= t ? atoll(t) : 0;
    CHECK(skew >= 2 && skew <= 4); /* the shim works */
    char flags[512];
    int n = snprintf(flags, sizeof flags, "--id-jump-s 5 --sentinel-master idloss");
    for (int i = 0; i < 3; i++) {
        CHECK_EQ_INT(h_sentinel_start(&sen[i], &master, "idloss", 2, 1000, 3000), 0);
        n += snprintf(flags + n, sizeof flags - (size_t)n, " --sentinel 127.0.0.1:%d", sen[i].port);
    }
    for (int i = 0; i < 3; i++)
        CHECK_EQ_INT(h_sentinel_wait_ready(&sen[i], "idloss", 2, 1, 15000), 0);

    struct h_gw g[MAXGW];
    struct minter m[MAXGW];
    for (int i = 0; i < 2; i++) {
        CHECK_EQ_INT(h_gw_up(&g[i], &master, flags), 0);
        mint_start(&m[i], g[i].port, i);
    }
    mint_past_era(&master, &m[0]);
    h_relay_hold(&rep);
    mint_wait(&m[0], 10, 5000);
    mint_wait(&m[1], 10, 5000);
    h_redis_kill(&master);
    long long end = h_now_ms() + 30000;
    while (h_sentinel_master_port(&sen[0], "idloss") != replica.port && h_now_ms() < end)
        h_sleep_ms(50);
    CHECK_EQ_INT(h_sentinel_master_port(&sen[0], "idloss"), replica.port);
    join_and_count(&master, flags, g, m, 0, "Sentinel, the replica's clock 3 s behind");
    for (int i = 0; i < 3; i++) h_redis_stop(&sen[i]);
    h_relay_stop(&rep);
    h_redis_stop(&replica);
    h_redis_stop(&master);
}

/* Waits until Redis's clock is early in a second, so that a fault made now
 * and what follows it fall in the same second, the case that repeats. */
static void early_in_second(struct h_redis *r) {
    long long end = h_now_ms() + 3000;
    while (h_now_ms() < end) {
        const char *t = h_redis_cli(r, "TIME");
        const char *usec = t ? strchr(t, '\n') : NULL;
        if (usec && atol(usec + 1) < 200000) return;
        h_sleep_ms(5);
    }
}

/* Case 8: two losses within one second.  A Redis without persistence
 * is restarted empty, a gateway leases at once (its era's window: ids
 * ahead of the clock), and Redis is restarted empty again in the same
 * second, before a second gateway leases: that era jumps to the same
 * second, and must still start above the first era's ids. */
static void test_two_losses_one_second(void) {
    struct h_redis r;
    CHECK_EQ_INT(h_redis_start(&r, 0, NULL), 0);
    char flags[64];
    snprintf(flags, sizeof flags, "--id-jump-s %d", JUMP_S);
    struct h_gw a, b;
    CHECK_EQ_INT(h_gw_up(&a, &r, flags), 0);
    CHECK_EQ_INT(h_gw_up(&b, &r, flags), 0);
    struct h_client cl;
    h_client_init(&cl, 5000);
    int same = 0;
    for (int tries = 0; tries < 5 && !same; tries++) {
        early_in_second(&r);
        const char *t = h_redis_cli(&r, "TIME");
        long long sec0 = t ? atoll(t) : 0;
        h_redis_kill(&r);
        CHECK_EQ_INT(h_redis_restart(&r, NULL), 0);
        char path[64];
        snprintf(path, sizeof path, "/v1/ids/twice-%d?count=100", tries);
        long long end = h_now_ms() + 5000;
        while (h_client_do(&cl, "POST", a.port, path, NULL, NULL) != 200 && h_now_ms() < end)
            h_sleep_ms(10);
        uint64_t first_era =
            strtoull(cJSON_GetArrayItem(cJSON_GetObjectItem(cl.last.json, "ids"), 99)->valuestring,
                     NULL, 10);
        h_redis_kill(&r);
        CHECK_EQ_INT(h_redis_restart(&r, NULL), 0);
        end = h_now_ms() + 5000;
        while (h_client_do(&cl, "POST", b.port, path, NULL, NULL) != 200 && h_now_ms() < end)
            h_sleep_ms(10);
        uint64_t second_era = strtoull(
            cJSON_GetArrayItem(cJSON_GetObjectItem(cl.last.json, "ids"), 0)->valuestring, NULL, 10);
        t = h_redis_cli(&r, "TIME");
        same = t && atoll(t) == sec0; /* both losses fell in one second */
        CHECK(second_era > first_era);
        if (same)
            fprintf(stderr,
                    "  two losses in one second: the second era starts %llu above the first's last "
                    "id\n",
                    (unsigned long long)(second_era - first_era));
    }
    CHECK(same);
    h_client_free(&cl);
    h_gw_stop(&a, 5000);
    h_gw_stop(&b, 5000);
    h_redis_stop(&r);
}

/* Case 4: quorum mode, every master restarted empty in the same second. */
static void test_quorum_all_restarted_empty(void) {
    struct h_redis r[3];
    char flags[512];
    int n = snprintf(flags, sizeof flags, "--id-jump-s %d", JUMP_S);
    for (int i = 0; i < 3; i++) {
        CHECK_EQ_INT(h_redis_start(&r[i], 0, NULL), 0);
        n += snprintf(flags + n, sizeof flags - (size_t)n, " --redis redis://127.0.0.1:%d",
                      r[i].port);
    }
    struct h_gw g[MAXGW];
    struct minter m[MAXGW];
    for (int i = 0; i < 2; i++) {
        CHECK_EQ_INT(h_gw_up(&g[i], &r[0], flags), 0);
        mint_start(&m[i], g[i].port, i);
    }
    mint_past_era(&r[0], &m[0]);
    mint_wait(&m[1], 20, 5000);
    /* This one has handed out nothing when the masters go: no floor of its
     * own protects it. */
    CHECK_EQ_INT(h_gw_up(&g[2], &r[0], flags), 0);
    early_in_second(&r[0]);
    for (int i = 0; i < 3; i++) h_redis_kill(&r[i]);
    for (int i = 0; i < 3; i++) CHECK_EQ_INT(h_redis_restart(&r[i], NULL), 0);
    mint_start(&m[2], g[2].port, 2);
    join_and_count(&r[0], flags, g, m, 1, "quorum, every master restarted empty");
    for (int i = 0; i < 3; i++) h_redis_stop(&r[i]);
}

/* Case 5: a promotion the gateway hears no +switch-master for (the
 * sentinel is told of the new master by hand, as an operator or a
 * management tool does).  The master it knew refuses connections, so it
 * asks its sentinel again and serves from the new master within a few
 * seconds (it used to knock on the old master's door until a
 * +switch-master that never came: 503 throughout). */
static void test_sentinel_reasked_without_switch(void) {
    struct h_redis master, replica, sen;
    CHECK_EQ_INT(h_redis_start(&master, 0, NULL), 0);
    CHECK_EQ_INT(h_replica_start(&replica, &master), 0);
    CHECK_EQ_INT(h_sentinel_start(&sen, &master, "idre", 1, 60000, 180000), 0);
    char flags[256];
    snprintf(flags, sizeof flags, "--sentinel-master idre --sentinel 127.0.0.1:%d", sen.port);
    struct h_gw g;
    CHECK_EQ_INT(h_gw_up(&g, &master, flags), 0);
    long st = 0;
    uint64_t id;
    struct h_client cl;
    h_client_init(&cl, 3000);
    long long end = h_now_ms() + 10000;
    while ((st = h_client_do(&cl, "POST", g.port, "/v1/ids/reask", NULL, NULL)) != 200 &&
           h_now_ms() < end)
        h_sleep_ms(50);
    CHECK_EQ_INT(st, 200);
    long long conns0 = h_redis_info_int(&sen, "stats", "total_connections_received");
    long long t_kill = h_now_ms();
    h_redis_kill(&master);
    /* The gateway lost its master, asked the sentinel, was told the same
     * one (the sentinel has not noticed yet) and gets refused: 503 for a
     * second and a half, then the promotion. */
    long long refused_since = 0;
    end = h_now_ms() + 10000;
    while (h_now_ms() < end) {
        st = h_client_do(&cl, "POST", g.port, "/v1/ids/reask-before", NULL, NULL);
        if (st == 503 && !refused_since) refused_since = h_now_ms();
        if (st != 503) refused_since = 0;
        if (refused_since && h_now_ms() - refused_since > 1500) break;
        h_sleep_ms(50);
    }
    CHECK(refused_since > 0);
    /* Asking again is paced (once a second a worker), not a new sentinel
     * connection per refused connect. */
    long long conns = h_redis_info_int(&sen, "stats", "total_connections_received") - conns0;
    long long secs = (h_now_ms() - t_kill) / 1000 + 1;
    fprintf(stderr, "  %lld sentinel connections in %lld s of refusals\n", conns, secs);
    CHECK(conns <= 4 * secs * 4); /* up to 4 workers, a margin of 2 */
    /* Removed first: a sentinel that still watches the dead master would
     * turn a replica promoted behind its back into a replica again. */
    CHECK_EQ_STR(h_redis_cli(&sen, "SENTINEL REMOVE idre"), "OK");
    CHECK_EQ_STR(h_redis_cli(&replica, "REPLICAOF NO ONE"), "OK");
    char mon[128];
    snprintf(mon, sizeof mon, "SENTINEL MONITOR idre 127.0.0.1 %d 1", replica.port);
    CHECK_EQ_STR(h_redis_cli(&sen, mon), "OK");
    long long t0 = h_now_ms();
    end = t0 + 15000;
    while ((st = h_client_do(&cl, "POST", g.port, "/v1/ids/reask", NULL, NULL)) != 200 &&
           h_now_ms() < end)
        h_sleep_ms(50);
    long long took = h_now_ms() - t0;
    fprintf(stderr, "  served from the new master %lld ms after the sentinel knew it\n", took);
    CHECK_EQ_INT(st, 200);
    CHECK(took < 5000);
    if (took >= 5000) {
        char cmd[256];
        snprintf(cmd, sizeof cmd, "tail -n 60 '%s' | sed 's/^/    gw: /' >&2", g.log);
        if (system(cmd)) {}
    }
    (void)id;
    h_client_free(&cl);
    h_gw_stop(&g, 5000);
    h_redis_stop(&sen);
    h_redis_stop(&replica);
    h_redis_stop(&master);
}

/* Case 6: a gateway with room for 16 namespaces cycles through 40, so each
 * comes back evicted, while Redis (no persistence) restarts empty in the
 * same second.  Evicted namespaces keep their floors (idgen/idtable.c): no
 * gateway's answers go back, and nothing repeats. */
static void test_eviction_and_empty_restart(void) {
    struct h_redis r;
    CHECK_EQ_INT(h_redis_start(&r, 0, NULL), 0);
    char flags[64];
    snprintf(flags, sizeof flags, "--id-jump-s %d --id-namespaces 16", JUMP_S);
    struct h_gw g[3];
    struct minter m[3];
    for (int i = 0; i < 2; i++) {
        CHECK_EQ_INT(h_gw_up(&g[i], &r, flags), 0);
        mint_start_n(&m[i], g[i].port, i, 40);
    }
    mint_past_era(&r, &m[0]);
    mint_wait(&m[1], 100, 5000);
    CHECK_EQ_INT(h_gw_up(&g[2], &r, flags), 0);
    early_in_second(&r);
    h_redis_kill(&r);
    CHECK_EQ_INT(h_redis_restart(&r, NULL), 0);
    mint_start_n(&m[2], g[2].port, 2, 40);
    for (int i = 0; i < 3; i++) mint_wait(&m[i], 200, 15000);
    for (int i = 0; i < 3; i++) mint_stop(&m[i]);
    size_t ids, repeats, decreases;
    count(m, 3, &ids, &repeats, &decreases);
    fprintf(stderr,
            "  %zu ids from 3 gateways over 40 namespaces (16 live): %zu repeated, %zu "
            "decreases; evictions on gateway 0: %lld\n",
            ids, repeats, decreases, h_metric(&g[0], "lockgate_id_namespaces_evicted_total"));
    CHECK_EQ_INT(repeats, 0);
    CHECK_EQ_INT(decreases, 0);
    CHECK(h_metric(&g[0], "lockgate_id_namespaces_evicted_total") > 100);
    free_minters(m, 3);
    for (int i = 0; i < 3; i++) h_gw_stop(&g[i], 5000);
    h_redis_stop(&r);
}

/* Cluster mode: the index (in c) of the master serving key's slot and of a
 * replica of it, from CLUSTER NODES; 0, or -1. */
static int cluster_pair(struct h_redis *c, const char *key, int *master, int *replica) {
    struct h_redis n0 = h_cluster_node(c, 0);
    char args[160];
    snprintf(args, sizeof args, "CLUSTER KEYSLOT '%s'", key);
    const char *out = h_redis_cli(&n0, args);
    int slot = out ? atoi(out) : -1;
    static char nodes[8192];
    out = h_redis_cli(&n0, "CLUSTER NODES");
    if (slot < 0 || !out) return -1;
    snprintf(nodes, sizeof nodes, "%s", out);
    char master_id[64] = "";
    *master = *replica = -1;
    for (int pass = 0; pass < 2; pass++)
        for (char *line = nodes, *next; line && *line; line = next) {
            next = strchr(line, '\n');
            if (next) *next++ = '\0';
            char id[64], addr[64], flags[64], of[64];
            int port = 0, used = 0;
            if (sscanf(line, "%63s %63s %63s %63s %*s %*s %*s %*s%n", id, addr, flags, of, &used) <
                4)
                goto restore;
            sscanf(strchr(addr, ':') ? strchr(addr, ':') + 1 : "0", "%d", &port);
            int idx = -1;
            for (int i = 0; i < c->cn; i++)
                if (c->cport[i] == port) idx = i;
            if (pass == 0 && strstr(flags, "master")) {
                for (char *r = line + used; *r;) {
                    int lo, hi, k = 0;
                    if (sscanf(r, " %d-%d%n", &lo, &hi, &k) == 2 && slot >= lo && slot <= hi) {
                        *master = idx;
                        snprintf(master_id, sizeof master_id, "%s", id);
                    }
                    if (k == 0 && sscanf(r, " %d%n", &lo, &k) == 1 && slot == lo) {
                        *master = idx;
                        snprintf(master_id, sizeof master_id, "%s", id);
                    }
                    if (k == 0) break;
                    r += k;
                }
            } else if (pass == 1 && strstr(flags, "slave") && strcmp(of, master_id) == 0) {
                *replica = idx;
            }
        restore:
            if (next) next[-1] = '\n';
        }
    return *master >= 0 && *replica >= 0 ? 0 : -1;
}

/* Case 7: Redis Cluster.  The replica of the master serving loss-0's slot
 * is stopped; a 50 MB write fills the replication link's kernel buffers,
 * so the id leases after it wait in the master's own output buffer; the
 * master is killed (they are lost), and the replica, continued, takes the
 * slots over (CLUSTER FAILOVER TAKEOVER).  The era of that slot names the
 * old master: leases there jump. */
static void test_cluster_failover_loss(void) {
    struct h_redis c;
    CHECK_EQ_INT(h_cluster_start(&c, 3, 1), 0);
    int mi = -1, ri = -1, found = -1;
    long long end = h_now_ms() + 15000; /* replicas are attached after the cluster is ok */
    while ((found = cluster_pair(&c, "lockgate:id:{loss-0}", &mi, &ri)) != 0 && h_now_ms() < end)
        h_sleep_ms(50);
    CHECK_EQ_INT(found, 0);
    if (mi < 0 || ri < 0) {
        h_redis_stop(&c);
        return;
    }
    struct h_redis master = h_cluster_node(&c, mi), replica = h_cluster_node(&c, ri);
    char flags[64];
    snprintf(flags, sizeof flags, "--id-jump-s %d", JUMP_S);
    struct h_gw g[MAXGW];
    struct minter m[MAXGW];
    for (int i = 0; i < 2; i++) {
        CHECK_EQ_INT(h_gw_up(&g[i], &c, flags), 0);
        mint_start(&m[i], g[i].port, i);
    }
    mint_past_era(&master, &m[0]);
    mint_wait(&m[1], 20, 5000);
    kill(replica.pid, SIGSTOP);
    h_redis_cli(&master, "EVAL \"redis.call('SET', KEYS[1], string.rep('x', 50000000))\" 1 "
                         "'lockgate:junk{loss-0}'");
    uint64_t at_stop = mark_on(&master, 0);
    end = h_now_ms() + 10000;
    while (highest(m, 2, 0) <= at_stop && h_now_ms() < end) h_sleep_ms(20);
    CHECK(highest(m, 2, 0) > at_stop); /* ids handed out from leases after the junk */
    uint64_t issued = highest(m, 2, 0);
    h_redis_kill(&master);
    c.cpid[mi] = 0;
    kill(replica.pid, SIGCONT);
    end = h_now_ms() + 10000;
    const char *st = NULL;
    while (h_now_ms() < end) { /* it reads what the kernel kept, then sees the link gone */
        st = h_redis_cli(&replica, "CLUSTER FAILOVER TAKEOVER");
        if (st && strcmp(st, "OK") == 0) break;
        h_sleep_ms(100);
    }
    CHECK_EQ_STR(st ? st : "", "OK");
    end = h_now_ms() + 10000;
    while (h_now_ms() < end) {
        const char *role = h_redis_cli(&replica, "ROLE");
        if (role && strncmp(role, "master", 6) == 0) break;
        h_sleep_ms(50);
    }
    CHECK(mark_on(&replica, 0) < issued); /* the loss is real */
    join_and_count(&c, flags, g, m, 0, "Redis Cluster, a shard's failover");
    h_redis_stop(&c);
}

int main(void) {
    long long t0 = h_now_ms();
    RUN_NOT_CLUSTER(test_replication_loss_hand_promotion);
    RUN_NOT_CLUSTER(test_replication_loss_acked);
    RUN_NOT_CLUSTER(test_sentinel_failover_clock_behind);
    RUN_NOT_CLUSTER(test_quorum_all_restarted_empty);
    RUN_NOT_CLUSTER(test_sentinel_reasked_without_switch);
    RUN_NOT_CLUSTER(test_eviction_and_empty_restart);
    RUN_NOT_CLUSTER(test_cluster_failover_loss);
    RUN_NOT_CLUSTER(test_two_losses_one_second);
    fprintf(stderr, "  idloss suite: %lld ms\n", h_now_ms() - t0);
    return check_summary("idloss");
}
