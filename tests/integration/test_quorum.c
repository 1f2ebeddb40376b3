/* test_quorum.c -- quorum mode (Redlock over 5 independent masters), end to
 * end, through two gateways each given the five with --redis.
 *
 *   1. Acquire, inspect, extend, release; the answer's ttl_ms is the
 *      validity, below the requested ttl; every master's last fence is
 *      raised to the one answered.
 *   2. Two masters killed: everything still works, /readyz 200.
 *   3. Three of five down: every acquire is a 503, never a 201, and what
 *      the two live masters granted is given back; /readyz 503.  Restarted:
 *      served again.
 *   4. Fences strictly increase across holders while the majority changes
 *      (different pairs of masters killed and restarted between holds).
 *   5. Ids: unique, and increasing per client, from two gateways while two
 *      masters are killed and restarted; and unique when both gateways lease
 *      the first block of a namespace at the same moment.
 *   6. Mutual exclusion under contention: 8 threads through the two
 *      gateways, a non-atomic read-modify-write in the critical section,
 *      while two masters are killed and (after longer than the lease, as
 *      the Redlock description asks of masters without persistence)
 *      restarted: no lost update, no overlap, fences increasing.
 *   4b. A grant whose fence raise a quorum did not take is not answered
 *      (three masters of its own, relays that lose the raise).
 *   7. A failed round leaves nothing (issue 28): a re-entry level taken by
 *      the two masters that answered is given back on them alone before
 *      the 503; a master that timed out (stopped) during the round and
 *      runs the attempt once it resumes is undone once it answers; the
 *      same for a multi-lock group.
 *   7b. A round that ends 409 while a master timed out: what that master
 *      granted once it resumed is undone too (a lock, a multi-lock). */
#include "tests/integration/harness.h"

#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define N_MASTERS  5
#define PREFIX_KEY "lockgate:lock:"

static struct h_redis m[N_MASTERS];
static struct h_gw gws[2];
static int up_ok;

/* Holders in the lock's hash on r (lua/_holders.lua: token fields of 22+
 * characters, and x unless its token is empty), or -1
 * when r is down. */
#define HOLDERS_LUA                                                                             \
    "local n = 0 for _, f in ipairs(redis.call('HKEYS', KEYS[1])) do "                          \
    "if #f >= 22 or (f == 'x' and string.byte(redis.call('HGET', KEYS[1], 'x'), 1) ~= 0) then " \
    "n = n + 1 end end return n"
static int holders_on(struct h_redis *r, const char *name) {
    if (!r->pid) return -1;
    char args[512];
    snprintf(args, sizeof args, "EVAL \"%s\" 1 '" PREFIX_KEY "{%s}'", HOLDERS_LUA, name);
    const char *out = h_redis_cli(r, args);
    return out ? atoi(out) : -1;
}

static long long fence_on(struct h_redis *r, const char *name) {
    char args[256];
    snprintf(args, sizeof args, "HGET '" PREFIX_KEY "{%s}' f", name);
    const char *out = h_redis_cli(r, args);
    return out && *out ? atoll(out) : -1;
}

static void kill_master(int i) { h_redis_kill(&m[i]); }

static void restart_master(int i) { CHECK_EQ_INT(h_redis_restart(&m[i], NULL), 0); }

/* Polls POST path on g until 201 (then releases it); ms it took, or -1. */
static long long wait_served(struct h_gw *g, const char *path, int timeout_ms) {
    long long t0 = h_now_ms();
    while (h_now_ms() - t0 < timeout_ms) {
        struct h_resp r = h_http("POST", g->port, path, NULL, "{\"ttl_ms\":2000}", NULL);
        if (r.status == 201) {
            char tok[160];
            snprintf(tok, sizeof tok, "%s", h_header(&r, "Lock-Token"));
            h_resp_free(&r);
            r = h_http("DELETE", g->port, path, tok, NULL, NULL);
            h_resp_free(&r);
            return h_now_ms() - t0;
        }
        h_resp_free(&r);
        h_sleep_ms(50);
    }
    return -1;
}

/* Clients each master has when both gateways are connected to it (every
 * worker's command connection and the pub/sub ones, and the probe's own
 * redis-cli), learnt once at start (see start_all). */
static long long full_clients;

static long long clients_of(int j) {
    return h_redis_info_int(&m[j], "clients", "connected_clients");
}

/* Every master that is up has connected back to both gateways: a lock
 * acquired now lands on all of them.  Every connection of every worker
 * counts: a worker still in its reconnect back-off would fail the next
 * request it serves (only 2 of 5 masters answering). */
static void wait_all_connected(void) {
    long long want = full_clients > 0 ? full_clients : 4;
    for (int i = 0; i < 100; i++) {
        int up = 0, have = 0;
        for (int j = 0; j < N_MASTERS; j++) {
            if (!m[j].pid) continue;
            up++;
            if (clients_of(j) >= want) have++;
        }
        if (have == up) return;
        h_sleep_ms(50);
    }
}

static int start_all(void) {
    /* With AOF: a master killed and restarted keeps its data, as a
     * quorum's masters should (README); one restarted empty abstains
     * (test_lost_master_abstains). */
    for (int i = 0; i < N_MASTERS; i++)
        if (h_redis_start(&m[i], 1, NULL) < 0) return -1;
    char flags[512];
    size_t len = 0;
    for (int i = 1; i < N_MASTERS; i++)
        len += (size_t)snprintf(flags + len, sizeof flags - len, "--redis redis://127.0.0.1:%d ",
                                m[i].port);
    snprintf(flags + len, sizeof flags - len, "--redis-timeout-ms 500");
    /* h_gw_start gives m[0] with the first --redis; the others add to it. */
    for (int g = 0; g < 2; g++)
        if (h_gw_up(&gws[g], &m[0], flags) < 0) return -1;
    /* Both gateways are ready; their connections settle within a second
     * or so: the count seen the same on every master twice in a row. */
    long long last = -1;
    for (int i = 0; i < 100; i++) {
        long long least = -1, most = -1;
        for (int j = 0; j < N_MASTERS; j++) {
            long long c = clients_of(j);
            if (least < 0 || c < least) least = c;
            if (c > most) most = c;
        }
        if (least >= 4 && least == most && least == last) break;
        last = least == most ? least : -1;
        h_sleep_ms(100);
    }
    full_clients = last > 0 ? last : 4;
    return 0;
}

/* ============================================================================
 * 1. The API in quorum mode
 * ========================================================================= */

static void test_basics(void) {
    CHECK(up_ok);
    if (!up_ok) return;
    struct h_resp r = h_http("GET", gws[0].port, "/readyz", NULL, NULL, NULL);
    CHECK_EQ_INT(r.status, 200);
    h_resp_free(&r);

    r = h_http("POST", gws[0].port, "/v1/locks/q-basic", NULL, "{\"ttl_ms\":10000}", NULL);
    CHECK_EQ_INT(r.status, 201);
    long long fence = h_jint(&r, "fence"), ttl = h_jint(&r, "ttl_ms");
    char tok[160];
    snprintf(tok, sizeof tok, "%s", h_header(&r, "Lock-Token") ? h_header(&r, "Lock-Token") : "");
    fprintf(stderr, "  acquired: fence %lld, ttl_ms %lld of 10000\n", fence, ttl);
    h_resp_free(&r);
    CHECK(fence > 0);
    CHECK(ttl < 10000 - 100); /* validity: less the drift allowance (1% + 2 ms) */
    CHECK(ttl > 9000);
    for (int i = 0; i < N_MASTERS; i++) CHECK_EQ_INT(holders_on(&m[i], "q-basic"), 1);
    /* Every master's last fence is the answered one. */
    for (int i = 0; i < N_MASTERS; i++) {
        long long f = -1;
        for (int k = 0; k < 20 && f != fence; k++) {
            f = fence_on(&m[i], "q-basic");
            if (f != fence) h_sleep_ms(10);
        }
        CHECK_EQ_INT(f, fence);
    }

    r = h_http("GET", gws[1].port, "/v1/locks/q-basic", NULL, NULL, NULL);
    CHECK_EQ_INT(r.status, 200);
    CHECK_EQ_INT(h_jint(&r, "fence"), fence);
    CHECK_EQ_INT(h_jint(&r, "holders"), 1);
    CHECK(h_jint(&r, "ttl_ms") <= 10000);
    h_resp_free(&r);

    r = h_http("POST", gws[1].port, "/v1/locks/q-basic", NULL, NULL, NULL);
    CHECK_EQ_INT(r.status, 409);
    CHECK_EQ_STR(h_jcode(&r), "lock_busy");
    h_resp_free(&r);

    r = h_http("PATCH", gws[1].port, "/v1/locks/q-basic", tok, "{\"ttl_ms\":20000}", NULL);
    CHECK_EQ_INT(r.status, 200);
    CHECK_EQ_INT(h_jint(&r, "fence"), fence);
    CHECK(h_jint(&r, "ttl_ms") < 20000 - 200);
    CHECK(h_jint(&r, "ttl_ms") > 19000);
    h_resp_free(&r);

    r = h_http("PATCH", gws[1].port, "/v1/locks/q-basic", "AAAAAAAAAAAAAAAAAAAAAA",
               "{\"ttl_ms\":20000}", NULL);
    CHECK_EQ_INT(r.status, 409);
    CHECK_EQ_STR(h_jcode(&r), "not_owner");
    h_resp_free(&r);

    r = h_http("DELETE", gws[0].port, "/v1/locks/q-basic", tok, NULL, NULL);
    CHECK_EQ_INT(r.status, 200);
    CHECK_EQ_STR(h_jstr(&r, "released"), "true");
    h_resp_free(&r);
    for (int i = 0; i < N_MASTERS; i++) CHECK_EQ_INT(holders_on(&m[i], "q-basic"), 0);
    r = h_http("GET", gws[1].port, "/v1/locks/q-basic", NULL, NULL, NULL);
    CHECK_EQ_INT(r.status, 404);
    h_resp_free(&r);
    r = h_http("DELETE", gws[1].port, "/v1/locks/q-basic", tok, NULL, NULL);
    CHECK_EQ_INT(r.status, 404);
    h_resp_free(&r);

    /* The next holder gets a higher fence. */
    r = h_http("POST", gws[1].port, "/v1/locks/q-basic", NULL, "{\"ttl_ms\":1000}", NULL);
    CHECK_EQ_INT(r.status, 201);
    CHECK(h_jint(&r, "fence") > fence);
    snprintf(tok, sizeof tok, "%s", h_header(&r, "Lock-Token") ? h_header(&r, "Lock-Token") : "");
    h_resp_free(&r);
    r = h_http("DELETE", gws[1].port, "/v1/locks/q-basic", tok, NULL, NULL);
    CHECK_EQ_INT(r.status, 200);
    h_resp_free(&r);
}

/* ============================================================================
 * 2-3. Two masters down, then three
 * ========================================================================= */

/* A fair waiter granted on its first attempt by a quorum leaves no queue
 * entry on the master that said busy: it would hold up that master's queue
 * until its deadline (review of issue 23). */
static void test_fair_first_attempt_leaves_no_entry(void) {
    CHECK(up_ok);
    if (!up_ok) return;
    struct h_gw one = {0}; /* single mode on the last master only */
    CHECK_EQ_INT(h_gw_up(&one, &m[N_MASTERS - 1], NULL), 0);
    struct h_resp r =
        h_http("POST", one.port, "/v1/locks/q-fairq", NULL, "{\"ttl_ms\":30000}", NULL);
    CHECK_EQ_INT(r.status, 201);
    h_resp_free(&r);
    r = h_http("POST", gws[0].port, "/v1/locks/q-fairq", NULL,
               "{\"ttl_ms\":5000,\"wait_ms\":3000,\"fair\":true}", NULL);
    CHECK_EQ_INT(r.status, 201); /* four of five masters granted */
    h_resp_free(&r);
    long long queued = -1;
    for (int i = 0; i < 50 && queued != 0; i++) {
        queued = atoll(h_redis_cli(&m[N_MASTERS - 1], "ZCARD " PREFIX_KEY "{q-fairq}:q"));
        if (queued != 0) h_sleep_ms(20);
    }
    CHECK_EQ_INT(queued, 0);
    CHECK_EQ_INT(h_gw_stop(&one, 5000), 0);
}

static void test_two_down(void) {
    CHECK(up_ok);
    if (!up_ok) return;
    kill_master(1);
    kill_master(3);
    for (int g = 0; g < 2; g++) {
        struct h_resp r = h_http("GET", gws[g].port, "/readyz", NULL, NULL, NULL);
        CHECK_EQ_INT(r.status, 200);
        h_resp_free(&r);
    }
    double slowest = 0;
    for (int i = 0; i < 10; i++) {
        int a = i % 2, b = 1 - a;
        char path[64];
        snprintf(path, sizeof path, "/v1/locks/q-two-down-%d", i);
        struct h_resp r = h_http("POST", gws[a].port, path, NULL, "{\"ttl_ms\":10000}", NULL);
        if (r.status != 201) fprintf(stderr, "  two down: %ld %.200s\n", r.status, r.body);
        CHECK_EQ_INT(r.status, 201);
        CHECK(h_jint(&r, "ttl_ms") < 10000);
        if (r.seconds > slowest) slowest = r.seconds;
        long long fence = h_jint(&r, "fence");
        char tok[160];
        snprintf(tok, sizeof tok, "%s",
                 h_header(&r, "Lock-Token") ? h_header(&r, "Lock-Token") : "");
        h_resp_free(&r);
        r = h_http("GET", gws[b].port, path, NULL, NULL, NULL);
        CHECK_EQ_INT(r.status, 200);
        CHECK_EQ_INT(h_jint(&r, "fence"), fence);
        h_resp_free(&r);
        r = h_http("POST", gws[b].port, path, NULL, NULL, NULL);
        CHECK_EQ_INT(r.status, 409);
        h_resp_free(&r);
        r = h_http("PATCH", gws[b].port, path, tok, "{\"ttl_ms\":5000}", NULL);
        CHECK_EQ_INT(r.status, 200);
        h_resp_free(&r);
        r = h_http("DELETE", gws[a].port, path, tok, NULL, NULL);
        CHECK_EQ_INT(r.status, 200);
        h_resp_free(&r);
    }
    fprintf(stderr, "  two of five down: slowest acquire %.3f s\n", slowest);
    CHECK(slowest < 1.0);
    struct h_resp r = h_http("POST", gws[0].port, "/v1/ids/q-two-down?count=10", NULL, NULL, NULL);
    CHECK_EQ_INT(r.status, 200);
    h_resp_free(&r);
}

static void test_three_down(void) {
    CHECK(up_ok);
    if (!up_ok) return;
    kill_master(4); /* 1, 3 and 4 down: 0 and 2 live */
    int created = 0, unavailable = 0, other = 0;
    double slowest = 0;
    for (int i = 0; i < 60; i++) {
        char name[64], path[80];
        snprintf(name, sizeof name, "q-three-down-%d", i % 6);
        snprintf(path, sizeof path, "/v1/locks/%s", name);
        struct h_resp r = h_http("POST", gws[i % 2].port, path, NULL, "{\"ttl_ms\":30000}", NULL);
        if (r.status == 201)
            created++;
        else if (r.status == 503 && h_jcode(&r) && strcmp(h_jcode(&r), "backend_unavailable") == 0)
            unavailable++;
        else {
            other++;
            fprintf(stderr, "  three down: %ld %.200s\n", r.status, r.body);
        }
        if (r.seconds > slowest) slowest = r.seconds;
        h_resp_free(&r);
    }
    fprintf(stderr, "  three of five down: %d created, %d unavailable, %d other, slowest %.3f s\n",
            created, unavailable, other, slowest);
    CHECK_EQ_INT(created, 0);
    CHECK_EQ_INT(unavailable, 60);
    CHECK(slowest < 1.5);
    /* What the two live masters granted was given back. */
    h_sleep_ms(100);
    int left = 0;
    for (int i = 0; i < 6; i++) {
        char name[64];
        snprintf(name, sizeof name, "q-three-down-%d", i);
        left += holders_on(&m[0], name) + holders_on(&m[2], name);
    }
    CHECK_EQ_INT(left, 0);
    struct h_resp r = h_http("GET", gws[0].port, "/readyz", NULL, NULL, NULL);
    CHECK_EQ_INT(r.status, 503);
    h_resp_free(&r);
    r = h_http("POST", gws[1].port, "/v1/ids/q-three-down", NULL, NULL, NULL);
    CHECK_EQ_INT(r.status, 503);
    h_resp_free(&r);

    restart_master(1);
    restart_master(3);
    restart_master(4);
    long long t0 = h_now_ms();
    long long a = wait_served(&gws[0], "/v1/locks/q-back", 5000);
    long long b = wait_served(&gws[1], "/v1/locks/q-back", 5000);
    fprintf(stderr, "  restarted: served after %lld ms\n", h_now_ms() - t0);
    CHECK(a >= 0 && b >= 0);
    wait_all_connected();
    r = h_http("GET", gws[1].port, "/readyz", NULL, NULL, NULL);
    CHECK_EQ_INT(r.status, 200);
    h_resp_free(&r);
}

/* ============================================================================
 * 4. Fences across changing majorities
 * ========================================================================= */

static void test_fences_across_majorities(void) {
    CHECK(up_ok);
    if (!up_ok) return;
    static const int pairs[][2] = {
        {0, 1},
        {2, 3},
        {4, 0},
        {1, 2},
        {3, 4}
    };
    long long prev = 0;
    int holds = 0, inversions = 0, errors = 0;
    for (size_t p = 0; p < sizeof pairs / sizeof pairs[0]; p++) {
        kill_master(pairs[p][0]);
        kill_master(pairs[p][1]);
        for (int i = 0; i < 12; i++) {
            int a = (i + (int)p) % 2;
            struct h_resp r =
                h_http("POST", gws[a].port, "/v1/locks/q-fence", NULL, "{\"ttl_ms\":5000}", NULL);
            if (r.status != 201) {
                errors++;
                fprintf(stderr, "  fences: acquire %ld %.200s\n", r.status, r.body);
                h_resp_free(&r);
                continue;
            }
            long long f = h_jint(&r, "fence");
            char tok[160];
            snprintf(tok, sizeof tok, "%s", h_header(&r, "Lock-Token"));
            h_resp_free(&r);
            if (f <= prev) {
                inversions++;
                fprintf(stderr, "  fences: %lld after %lld (masters %d, %d down)\n", f, prev,
                        pairs[p][0], pairs[p][1]);
            }
            prev = f;
            holds++;
            r = h_http("DELETE", gws[1 - a].port, "/v1/locks/q-fence", tok, NULL, NULL);
            if (r.status != 200) errors++;
            h_resp_free(&r);
        }
        restart_master(pairs[p][0]);
        restart_master(pairs[p][1]);
        wait_all_connected();
    }
    fprintf(stderr, "  %d holds over 5 majorities: %d fence inversions, %d errors\n", holds,
            inversions, errors);
    CHECK_EQ_INT(holds, 60);
    CHECK_EQ_INT(inversions, 0);
    CHECK_EQ_INT(errors, 0);
}

/* A grant is answered only once a quorum took its fence raise
 * (backend_quorum.c, lua/fence_raise.lua).  Three masters of their own, the
 * first's clock 20 s ahead, so a grant's fence is that master's; the other
 * two behind relays that lose the raise (and nothing before it): the raise
 * reaches one master of three.  Answering then (fire and forget) hands out
 * a fence that the next quorum, the two others, does not know: its holder
 * gets a lower one.  Answered after the raise, the first grant is refused
 * (503, given back), and no answered fence is ever followed by a lower one. */
static void test_fence_raise_lost(void) {
    char shim[256];
    h_timeshift_shim(shim, sizeof shim);
    struct h_redis ahead, b, c;
    struct h_relay rb, rc;
    setenv("LD_PRELOAD", shim, 1);
    setenv("TIMESHIFT_S", "20", 1);
    int up = h_redis_start(&ahead, 0, NULL);
    unsetenv("LD_PRELOAD");
    unsetenv("TIMESHIFT_S");
    CHECK_EQ_INT(up, 0);
    CHECK_EQ_INT(h_redis_start(&b, 0, NULL), 0);
    CHECK_EQ_INT(h_redis_start(&c, 0, NULL), 0);
    CHECK_EQ_INT(h_relay_start(&rb, b.port), 0);
    CHECK_EQ_INT(h_relay_start(&rc, c.port), 0);
    const char *t = h_redis_cli(&ahead, "TIME");
    long long skew = t ? atoll(t) : 0;
    t = h_redis_cli(&b, "TIME");
    skew -= t ? atoll(t) : 0;
    CHECK(skew >= 19 && skew <= 21); /* the shim works */
    char flags[256];
    snprintf(flags, sizeof flags,
             "--redis redis://127.0.0.1:%d --redis redis://127.0.0.1:%d --redis-timeout-ms 500",
             rb.port, rc.port);
    struct h_gw g;
    if (h_gw_up(&g, &ahead, flags) < 0) {
        CHECK(0);
        return;
    }
    /* The raise's bytes: the hash, then a 16-digit fence (an acquire's
     * hash is followed by its queue's key, a release's by a token). */
    static const char raise[] = PREFIX_KEY "{q-raise}\r\n$16\r\n";
    h_relay_hold_on(&rb, raise);
    h_relay_hold_on(&rc, raise);
    struct h_resp r = h_http("POST", g.port, "/v1/locks/q-raise", NULL, "{\"ttl_ms\":1000}", NULL);
    long first = r.status;
    long long f1 = first == 201 ? h_jint(&r, "fence") : 0;
    fprintf(stderr, "  raise lost on two of three masters: %ld %.160s\n", first, r.body);
    h_resp_free(&r);
    for (int i = 0; i < 200 && (rb.hold_on || rc.hold_on); i++) h_sleep_ms(10);
    CHECK(rb.hold_on == NULL && rc.hold_on == NULL); /* both raises were lost */
    CHECK(first == 201 || first == 503);
    /* The next quorum: the two masters whose raise was lost. */
    h_redis_kill(&ahead);
    long long f2 = 0, t0 = h_now_ms();
    while (h_now_ms() - t0 < 10000) {
        r = h_http("POST", g.port, "/v1/locks/q-raise", NULL, "{\"ttl_ms\":1000}", NULL);
        if (r.status == 201) f2 = h_jint(&r, "fence");
        h_resp_free(&r);
        if (f2) break;
        h_sleep_ms(50);
    }
    if (first == 201)
        fprintf(stderr, "  then, on the other two: fence %lld after %lld\n", f2, f1);
    else
        fprintf(stderr, "  then, on the other two: fence %lld\n", f2);
    CHECK(f2 > 0);
    if (first == 201) CHECK(f2 > f1); /* fences never go backwards */
    h_gw_kill(&g);
    h_relay_stop(&rb);
    h_relay_stop(&rc);
    h_redis_stop(&b);
    h_redis_stop(&c);
}

/* ============================================================================
 * 5. Ids
 * ========================================================================= */

#define ID_THREADS 4
#define ID_CAP     400000

struct id_run {
    int id;
    const char *ns;
    int count;
    atomic_int *stop;
    uint64_t *ids;
    int n;
    int errors;
    int not_increasing;
};

/* The ids of the last JSON body, appended to ids[*n..cap). -1 on a bad body. */
static int parse_ids(const char *body, uint64_t *ids, int *n, int cap) {
    cJSON *o = cJSON_Parse(body);
    cJSON *arr = cJSON_GetObjectItemCaseSensitive(o, "ids");
    int ok = cJSON_IsArray(arr);
    cJSON *v;
    if (ok) cJSON_ArrayForEach(v, arr) {
            if (!cJSON_IsString(v) || *n >= cap) {
                ok = 0;
                break;
            }
            ids[(*n)++] = strtoull(v->valuestring, NULL, 10);
        }
    cJSON_Delete(o);
    return ok ? 0 : -1;
}

static void *ids_main(void *arg) {
    struct id_run *w = arg;
    struct h_client cl;
    h_client_init(&cl, 10000);
    char path[128];
    snprintf(path, sizeof path, "/v1/ids/%s?count=%d", w->ns, w->count);
    while (!atomic_load(w->stop)) {
        long st = h_client_do(&cl, "POST", gws[w->id % 2].port, path, NULL, NULL);
        if (st != 200) {
            w->errors++;
            fprintf(stderr, "  ids thread %d: %ld %.200s\n", w->id, st, cl.last.body);
            h_sleep_ms(20);
            continue;
        }
        int before = w->n;
        if (parse_ids(cl.last.body, w->ids, &w->n, ID_CAP) < 0) {
            w->errors++;
            break;
        }
        for (int i = before; i < w->n; i++)
            if (i > 0 && w->ids[i] <= w->ids[i - 1]) w->not_increasing++;
        struct timespec pause = {0, 500 * 1000};
        nanosleep(&pause, NULL);
        if (w->n + w->count > ID_CAP) {
            fprintf(stderr, "  ids thread %d: full before the end\n", w->id);
            w->errors++;
            break;
        }
    }
    h_client_free(&cl);
    return NULL;
}

static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* Duplicates among all[0..n) (sorted in place). */
static int duplicates(uint64_t *all, int n) {
    qsort(all, (size_t)n, sizeof *all, cmp_u64);
    int d = 0;
    for (int i = 1; i < n; i++) d += all[i] == all[i - 1];
    return d;
}

static void test_ids_while_masters_restart(void) {
    CHECK(up_ok);
    if (!up_ok) return;
    atomic_int stop = 0;
    struct id_run w[ID_THREADS];
    pthread_t th[ID_THREADS];
    for (int i = 0; i < ID_THREADS; i++) {
        w[i] = (struct id_run){.id = i,
                               .ns = "q-ids",
                               .count = 5,
                               .stop = &stop,
                               .ids = malloc(ID_CAP * sizeof(uint64_t))};
        pthread_create(&th[i], NULL, ids_main, &w[i]);
    }
    h_sleep_ms(1000);
    kill_master(1);
    kill_master(2);
    h_sleep_ms(1500);
    restart_master(1);
    restart_master(2);
    h_sleep_ms(1000);
    kill_master(3);
    kill_master(0);
    h_sleep_ms(1500);
    restart_master(3);
    restart_master(0);
    h_sleep_ms(1000);
    atomic_store(&stop, 1);
    int total = 0, errors = 0, not_inc = 0;
    for (int i = 0; i < ID_THREADS; i++) {
        pthread_join(th[i], NULL);
        total += w[i].n;
        errors += w[i].errors;
        not_inc += w[i].not_increasing;
    }
    uint64_t *all = malloc((size_t)(total ? total : 1) * sizeof *all);
    int k = 0;
    for (int i = 0; i < ID_THREADS; i++) {
        memcpy(all + k, w[i].ids, (size_t)w[i].n * sizeof *all);
        k += w[i].n;
        free(w[i].ids);
    }
    int dups = duplicates(all, total);
    free(all);
    fprintf(stderr, "  ids: %d from two gateways, %d duplicates, %d not increasing, %d errors\n",
            total, dups, not_inc, errors);
    CHECK(total > 1000);
    CHECK_EQ_INT(dups, 0);
    CHECK_EQ_INT(not_inc, 0);
    CHECK_EQ_INT(errors, 0);
    wait_all_connected();
}

/* Both gateways lease the first block of a fresh namespace at the same
 * moment, many times over: the blocks they hand out must not meet. */
#define RACE_ROUNDS 300
static pthread_barrier_t race_barrier;
struct race_arg {
    int g;
    uint64_t ids[RACE_ROUNDS][16];
    int n[RACE_ROUNDS];
    int errors;
};

static void *race_main(void *arg) {
    struct race_arg *a = arg;
    struct h_client cl;
    h_client_init(&cl, 10000);
    for (int round = 0; round < RACE_ROUNDS; round++) {
        char path[96];
        snprintf(path, sizeof path, "/v1/ids/q-race-%d-%d?count=16", (int)getpid(), round);
        pthread_barrier_wait(&race_barrier);
        long st = h_client_do(&cl, "POST", gws[a->g].port, path, NULL, NULL);
        a->n[round] = 0;
        if (st != 200 || parse_ids(cl.last.body, a->ids[round], &a->n[round], 16) < 0) a->errors++;
    }
    h_client_free(&cl);
    return NULL;
}

static void test_ids_simultaneous_first_lease(void) {
    CHECK(up_ok);
    if (!up_ok) return;
    static struct race_arg ra[2];
    pthread_t th[2];
    pthread_barrier_init(&race_barrier, NULL, 2);
    for (int g = 0; g < 2; g++) {
        memset(&ra[g], 0, sizeof ra[g]);
        ra[g].g = g;
        pthread_create(&th[g], NULL, race_main, &ra[g]);
    }
    for (int g = 0; g < 2; g++) pthread_join(th[g], NULL);
    pthread_barrier_destroy(&race_barrier);
    int clashes = 0, shared_ids = 0;
    for (int round = 0; round < RACE_ROUNDS; round++) {
        int clash = 0;
        for (int i = 0; i < ra[0].n[round]; i++)
            for (int j = 0; j < ra[1].n[round]; j++)
                if (ra[0].ids[round][i] == ra[1].ids[round][j]) {
                    clash = 1;
                    shared_ids++;
                }
        if (clash && clashes++ < 3)
            fprintf(stderr,
                    "  round %d: both gateways handed out %" PRIu64 "..%" PRIu64 " and %" PRIu64
                    "..%" PRIu64 "\n",
                    round, ra[0].ids[round][0], ra[0].ids[round][ra[0].n[round] - 1],
                    ra[1].ids[round][0], ra[1].ids[round][ra[1].n[round] - 1]);
    }
    fprintf(stderr,
            "  %d simultaneous first leases: %d rounds with the same ids (%d ids), "
            "%d errors\n",
            RACE_ROUNDS, clashes, shared_ids, ra[0].errors + ra[1].errors);
    CHECK_EQ_INT(clashes, 0);
    CHECK_EQ_INT(ra[0].errors + ra[1].errors, 0);
}

/* ============================================================================
 * 6. Mutual exclusion under contention while masters die
 * ========================================================================= */

#define MX_THREADS   8
#define MX_MAX_HOLDS 100000
#define MX_PATH      "/v1/locks/q-mutex"

static volatile long counter;
static atomic_int inside, overlaps, mx_errors, mx_busy, mx_unavailable, mx_bad_release;
static atomic_int mx_stop;
static pthread_mutex_t order_mu = PTHREAD_MUTEX_INITIALIZER;
static long long *mx_fences;
static int mx_holds;

static void *mx_main(void *arg) {
    int id = (int)(intptr_t)arg;
    unsigned seed = 7919u * (unsigned)(id + 1);
    struct h_client cl;
    h_client_init(&cl, 10000);
    for (int round = 0; !atomic_load(&mx_stop); round++) {
        int acq = gws[(id + round) % 2].port, rel = gws[(id + round + 1) % 2].port;
        long st = h_client_do(&cl, "POST", acq, MX_PATH, NULL, "{\"ttl_ms\":2000}");
        if (st == 409) {
            atomic_fetch_add(&mx_busy, 1);
            seed = seed * 1103515245u + 12345u;
            struct timespec ts = {0, (long)(500 + (seed >> 8) % 2500) * 1000};
            nanosleep(&ts, NULL);
            continue;
        }
        if (st == 503) {
            atomic_fetch_add(&mx_unavailable, 1);
            h_sleep_ms(20);
            continue;
        }
        if (st != 201) {
            atomic_fetch_add(&mx_errors, 1);
            fprintf(stderr, "  mutex thread %d: acquire %ld %.200s\n", id, st, cl.last.body);
            h_sleep_ms(20);
            continue;
        }
        char tok[160];
        snprintf(tok, sizeof tok, "%s", h_token(&cl.last));
        long long fence = h_jint(&cl.last, "fence");
        pthread_mutex_lock(&order_mu);
        if (mx_holds < MX_MAX_HOLDS) mx_fences[mx_holds++] = fence;
        pthread_mutex_unlock(&order_mu);

        if (atomic_fetch_add(&inside, 1) != 0) atomic_fetch_add(&overlaps, 1);
        long v = counter;
        struct timespec ts = {0, 300 * 1000};
        nanosleep(&ts, NULL);
        counter = v + 1;
        atomic_fetch_sub(&inside, 1);

        for (int tries = 0; tries < 50; tries++) {
            st = h_client_do(&cl, "DELETE", rel, MX_PATH, tok, NULL);
            if (st != 503) break;
            h_sleep_ms(20); /* a master just died under the release: try again */
        }
        if (st != 200) {
            atomic_fetch_add(&mx_bad_release, 1);
            fprintf(stderr, "  mutex thread %d: release %ld %.200s\n", id, st, cl.last.body);
        }
    }
    h_client_free(&cl);
    return NULL;
}

static void test_mutual_exclusion_while_masters_die(void) {
    CHECK(up_ok);
    if (!up_ok) return;
    mx_fences = calloc(MX_MAX_HOLDS, sizeof *mx_fences);
    pthread_t th[MX_THREADS];
    long long t0 = h_now_ms();
    for (int i = 0; i < MX_THREADS; i++) pthread_create(&th[i], NULL, mx_main, (void *)(intptr_t)i);
    h_sleep_ms(1500);
    int before_kill = mx_holds;
    kill_master(2);
    kill_master(4);
    h_sleep_ms(2500); /* down for longer than the 2 s lease */
    int while_down = mx_holds - before_kill;
    restart_master(2);
    restart_master(4);
    h_sleep_ms(2500);
    atomic_store(&mx_stop, 1);
    for (int i = 0; i < MX_THREADS; i++) pthread_join(th[i], NULL);
    long long ms = h_now_ms() - t0;
    fprintf(stderr,
            "  %d holds (%d while two masters were down), %d busy, %d unavailable, %d errors, "
            "%d bad releases, counter %ld, %d overlaps in %.1f s\n",
            mx_holds, while_down, atomic_load(&mx_busy), atomic_load(&mx_unavailable),
            atomic_load(&mx_errors), atomic_load(&mx_bad_release), counter, atomic_load(&overlaps),
            ms / 1000.0);
    CHECK(mx_holds > 100);
    CHECK(while_down > 20);
    CHECK_EQ_INT(counter, mx_holds);
    CHECK_EQ_INT(atomic_load(&overlaps), 0);
    CHECK_EQ_INT(atomic_load(&mx_errors), 0);
    CHECK_EQ_INT(atomic_load(&mx_bad_release), 0);
    CHECK(atomic_load(&mx_busy) > 0);
    int increasing = 1;
    for (int i = 1; i < mx_holds; i++)
        if (mx_fences[i] <= mx_fences[i - 1]) {
            if (increasing)
                fprintf(stderr, "  hold %d has fence %lld after %lld\n", i, mx_fences[i],
                        mx_fences[i - 1]);
            increasing = 0;
        }
    CHECK(increasing);
    free(mx_fences);
    struct h_resp r = h_http("GET", gws[0].port, MX_PATH, NULL, NULL, NULL);
    CHECK_EQ_INT(r.status, 404);
    h_resp_free(&r);
}

/* Eviction in quorum mode: two more gateways on the same masters, each with
 * room for 16 namespaces, asked in turn for 40 namespaces, so nearly every
 * request finds its namespace evicted and leases anew (read a quorum's
 * marks, claim above them).  No id of a namespace repeats; per gateway and
 * namespace, ids increase. */
#define EV_NS     40
#define EV_ROUNDS 5
static void test_ids_evicted_namespaces(void) {
    CHECK(up_ok);
    if (!up_ok) return;
    char flags[512];
    size_t len = 0;
    for (int i = 1; i < N_MASTERS; i++)
        len += (size_t)snprintf(flags + len, sizeof flags - len, "--redis redis://127.0.0.1:%d ",
                                m[i].port);
    snprintf(flags + len, sizeof flags - len, "--redis-timeout-ms 500 --id-namespaces 16");
    struct h_gw eg[2];
    for (int g = 0; g < 2; g++) CHECK_EQ_INT(h_gw_up(&eg[g], &m[0], flags), 0);
    struct h_client cl;
    h_client_init(&cl, 10000);
    static uint64_t got[EV_NS][EV_ROUNDS * 2 * 2];
    uint64_t last[EV_NS][2] = {{0}};
    int ngot[EV_NS] = {0}, errors = 0, down = 0;
    for (int round = 0; round < EV_ROUNDS; round++)
        for (int k = 0; k < EV_NS; k++)
            for (int j = 0; j < 2; j++) {
                int g = (k + round + j) % 2, n = 0;
                uint64_t ids[2];
                char path[96];
                snprintf(path, sizeof path, "/v1/ids/q-evict-%d?count=2", k);
                long st = h_client_do(&cl, "POST", eg[g].port, path, NULL, NULL);
                if (st != 200 || parse_ids(cl.last.body, ids, &n, 2) < 0 || n != 2 ||
                    ids[1] <= ids[0] || ids[0] <= last[k][g]) {
                    errors++;
                    down += st == 503;
                    continue;
                }
                last[k][g] = ids[1];
                got[k][ngot[k]++] = ids[0];
                got[k][ngot[k]++] = ids[1];
            }
    CHECK_EQ_INT(errors, 0);
    CHECK_EQ_INT(down, 0);
    int dups = 0;
    for (int k = 0; k < EV_NS; k++) dups += duplicates(got[k], ngot[k]);
    CHECK_EQ_INT(dups, 0);
    for (int g = 0; g < 2; g++) {
        CHECK(h_metric(&eg[g], "lockgate_id_namespaces_evicted_total") >= (EV_NS - 16) * EV_ROUNDS);
        CHECK_EQ_INT(h_gw_stop(&eg[g], 6000), 0);
    }
    h_client_free(&cl);
}

static void test_clean_stop(void) {
    for (int g = 0; g < 2; g++)
        if (gws[g].pid > 0) CHECK_EQ_INT(h_gw_stop(&gws[g], 6000), 0);
}

/* ============================================================================
 * 7. A failed round leaves nothing
 * ========================================================================= */

/* count of name's hold on master r, through a single-mode gateway on it
 * (0: not held). */
static long long count_on(struct h_redis *r, const char *name) {
    struct h_gw one = {0};
    if (h_gw_up(&one, r, "--workers 1") < 0) return -1;
    char path[128];
    snprintf(path, sizeof path, "/v1/locks/%s", name);
    struct h_resp resp = h_http("GET", one.port, path, NULL, NULL, NULL);
    long long c = resp.status == 200 ? h_jint(&resp, "count") : resp.status == 404 ? 0 : -1;
    h_resp_free(&resp);
    h_gw_stop(&one, 6000);
    return c;
}

static void test_failed_round_undone(void) {
    CHECK(up_ok);
    if (!up_ok) return;
    /* A re-entry with the client's token: the masters that took the level
     * give it back, the others keep the first level. */
    struct h_resp r =
        h_http("POST", gws[0].port, "/v1/locks/q-undo-re", NULL, "{\"ttl_ms\":60000}", NULL);
    CHECK_EQ_INT(r.status, 201);
    char tok[160];
    snprintf(tok, sizeof tok, "%s", h_header(&r, "Lock-Token") ? h_header(&r, "Lock-Token") : "");
    h_resp_free(&r);
    kill_master(0);
    kill_master(1);
    kill_master(2);
    r = h_http("POST", gws[0].port, "/v1/locks/q-undo-re", tok, "{\"ttl_ms\":60000}", NULL);
    CHECK_EQ_INT(r.status, 503);
    h_resp_free(&r);
    CHECK_EQ_INT(count_on(&m[3], "q-undo-re"), 1);
    CHECK_EQ_INT(count_on(&m[4], "q-undo-re"), 1);
    /* A fresh grant by the same failed kind of round: nothing left. */
    r = h_http("POST", gws[1].port, "/v1/locks/q-undo-new", NULL, "{\"ttl_ms\":60000}", NULL);
    CHECK_EQ_INT(r.status, 503);
    h_resp_free(&r);
    CHECK_EQ_INT(holders_on(&m[3], "q-undo-new"), 0);
    CHECK_EQ_INT(holders_on(&m[4], "q-undo-new"), 0);
    restart_master(0);
    restart_master(1);
    wait_all_connected();

    /* A master that stops during the round: m0 holds the attempt in its
     * socket, m1 and m2 are down; the round fails (two answer), and once
     * m0 resumes, what it granted is undone. */
    CHECK(h_freeze(m[0].pid) == 0);
    kill_master(1);
    r = h_http("POST", gws[0].port, "/v1/locks/q-undo-stall", NULL, "{\"ttl_ms\":60000}", NULL);
    CHECK(r.status == 503 || r.status == 201);
    int failed = r.status == 503;
    h_resp_free(&r);
    kill(m[0].pid, SIGCONT);
    long long t0 = h_now_ms();
    int held = -1;
    for (long long end = t0 + 10000; failed && h_now_ms() < end; h_sleep_ms(10))
        if ((held = holders_on(&m[0], "q-undo-stall")) == 0) break;
    if (failed) {
        fprintf(stderr, "  failed round: the stopped master free %lld ms after it resumed\n",
                h_now_ms() - t0);
        CHECK_EQ_INT(held, 0);
        CHECK(h_now_ms() - t0 <= 1500);
    }
    for (int i = 3; i < N_MASTERS; i++) CHECK_EQ_INT(holders_on(&m[i], "q-undo-stall"), 0);

    /* The same for a multi-lock group: what the stopped master granted is
     * undone name by name once it answers, what m3 and m4 granted is
     * given back by the attempt's id before the 503. */
    CHECK(h_freeze(m[0].pid) == 0);
    r = h_http("POST", gws[0].port, "/v1/locks", NULL,
               "{\"ttl_ms\":60000,\"names\":[\"q-undo-m1\",\"q-undo-m2\"]}", NULL);
    CHECK_EQ_INT(r.status, 503);
    h_resp_free(&r);
    kill(m[0].pid, SIGCONT);
    t0 = h_now_ms();
    held = -1;
    for (long long end = t0 + 10000; h_now_ms() < end; h_sleep_ms(10))
        if ((held = holders_on(&m[0], "q-undo-m1") + holders_on(&m[0], "q-undo-m2")) == 0) break;
    fprintf(stderr, "  failed multi-lock round: the stopped master free %lld ms after it resumed\n",
            h_now_ms() - t0);
    CHECK_EQ_INT(held, 0);
    CHECK(h_now_ms() - t0 <= 1500);
    for (int i = 3; i < N_MASTERS; i++) {
        CHECK_EQ_INT(holders_on(&m[i], "q-undo-m1"), 0);
        CHECK_EQ_INT(holders_on(&m[i], "q-undo-m2"), 0);
    }
    restart_master(1);
    restart_master(2);
    wait_all_connected();
}

/* A round that ends 409 (a quorum answered, some said busy) while a master
 * timed out: the attempt that master held in its socket runs once it
 * resumes and grants there (the name is free on it alone); that grant is
 * undone once it answers again, as after a 503.  A lock and a multi-lock
 * group. */
static int free_on_m0_within(const char *const *names, int n, long long t0, int ms) {
    for (long long end = t0 + ms; h_now_ms() < end; h_sleep_ms(10)) {
        int held = 0;
        for (int i = 0; i < n; i++) held += holders_on(&m[0], names[i]);
        if (held == 0) return 1;
    }
    return 0;
}

static void test_busy_round_undone(void) {
    CHECK(up_ok);
    if (!up_ok) return;
    const char *one[] = {"q-busy"}, *two[] = {"q-busy-m1", "q-busy-m2"};
    char tok[2][160];
    for (int c = 0; c < 2; c++) {
        /* Held by another client on every master, but forgotten on m0. */
        char path[64], key[96];
        snprintf(path, sizeof path, "/v1/locks/%s", c == 0 ? one[0] : two[0]);
        struct h_resp r = h_http("POST", gws[0].port, path, NULL, "{\"ttl_ms\":60000}", NULL);
        CHECK_EQ_INT(r.status, 201);
        snprintf(tok[c], sizeof tok[c], "%s", h_token(&r));
        h_resp_free(&r);
        snprintf(key, sizeof key, "DEL '" PREFIX_KEY "{%s}'", c == 0 ? one[0] : two[0]);
        h_redis_cli(&m[0], key);
        CHECK_EQ_INT(holders_on(&m[0], c == 0 ? one[0] : two[0]), 0);
        /* m0 stops with the attempt in its socket; m1..m4 say busy. */
        long long undo0 = h_metric(&gws[1], "lockgate_undo_started_total");
        CHECK(h_freeze(m[0].pid) == 0);
        if (c == 0)
            r = h_http("POST", gws[1].port, path, NULL, "{\"ttl_ms\":60000}", NULL);
        else
            r = h_http("POST", gws[1].port, "/v1/locks", NULL,
                       "{\"ttl_ms\":60000,\"names\":[\"q-busy-m1\",\"q-busy-m2\"]}", NULL);
        CHECK_EQ_INT(r.status, 409);
        h_resp_free(&r);
        kill(m[0].pid, SIGCONT);
        long long t0 = h_now_ms();
        int ok = free_on_m0_within(c == 0 ? one : two, c == 0 ? 1 : 2, t0, 10000);
        fprintf(stderr, "  409 round (%s): the stopped master free %lld ms after it resumed\n",
                c == 0 ? "lock" : "multi-lock", h_now_ms() - t0);
        CHECK(ok);
        CHECK(h_now_ms() - t0 <= 1500);
        CHECK(h_metric(&gws[1], "lockgate_undo_started_total") > undo0);
        /* The other client's hold is untouched. */
        for (int i = 1; i < N_MASTERS; i++)
            CHECK_EQ_INT(holders_on(&m[i], c == 0 ? one[0] : two[0]), 1);
        r = h_http("DELETE", gws[0].port, path, tok[c], NULL, NULL);
        CHECK_EQ_INT(r.status, 200);
        h_resp_free(&r);
        wait_all_connected();
    }
}

/* ============================================================================
 * 8. A master that lost its data abstains
 * ========================================================================= */

/* Restarts master i empty: no AOF, and an RDB file that does not exist. */
static void restart_empty(int i) {
    kill_master(i);
    CHECK_EQ_INT(h_redis_restart(&m[i], "--appendonly no --dbfilename empty.rdb"), 0);
}

/* Waits until both gateways have said n losses in all. */
static int losses_seen(int n) {
    for (long long end = h_now_ms() + 10000; h_now_ms() < end; h_sleep_ms(20))
        if (h_log_count(&gws[0], "lost its data") + h_log_count(&gws[1], "lost its data") >= n)
            return 1;
    return 0;
}

/* Redlock's hazard: a lock held on m0, m1, m2 only (m3, m4 were down);
 * m0 restarts empty.  m0, m3 and m4 would now grant it again, a quorum:
 * m0 abstains instead, for --max-lease-ms, so the second client is
 * refused while the first holds it.  One master abstaining is no outage:
 * released, the lock is granted by the four others.  Three masters lost
 * (more than N - quorum): no grant at all, 503 redis_data_lost with
 * Retry-After, /readyz 503.  Last but the clean stop: the gateways hold
 * those masters off for the default --max-lease-ms (a day). */
static void test_lost_master_abstains(void) {
    CHECK(up_ok);
    if (!up_ok) return;
    int before = h_log_count(&gws[0], "lost its data") + h_log_count(&gws[1], "lost its data");
    kill_master(3);
    kill_master(4);
    struct h_resp r =
        h_http("POST", gws[0].port, "/v1/locks/q-abst", NULL, "{\"ttl_ms\":60000}", NULL);
    CHECK_EQ_INT(r.status, 201);
    char tok[160];
    snprintf(tok, sizeof tok, "%s", h_header(&r, "Lock-Token") ? h_header(&r, "Lock-Token") : "");
    long long f1 = h_jint(&r, "fence");
    h_resp_free(&r);
    restart_master(3);
    restart_master(4);
    restart_empty(0);
    wait_all_connected();
    CHECK(losses_seen(before + 2)); /* each gateway noticed m0's loss */
    r = h_http("POST", gws[1].port, "/v1/locks/q-abst", NULL, "{\"ttl_ms\":60000}", NULL);
    CHECK_EQ_INT(r.status, 409);
    h_resp_free(&r);
    r = h_http("POST", gws[1].port, "/v1/locks", NULL,
               "{\"ttl_ms\":60000,\"names\":[\"q-abst\",\"q-abst-2\"]}", NULL);
    CHECK_EQ_INT(r.status, 409);
    h_resp_free(&r);
    r = h_http("GET", gws[1].port, "/readyz", NULL, NULL, NULL);
    CHECK_EQ_INT(r.status, 200);
    h_resp_free(&r);
    r = h_http("DELETE", gws[0].port, "/v1/locks/q-abst", tok, NULL, NULL);
    CHECK_EQ_INT(r.status, 200);
    h_resp_free(&r);
    r = h_http("POST", gws[1].port, "/v1/locks/q-abst", NULL, "{\"ttl_ms\":60000}", NULL);
    CHECK_EQ_INT(r.status, 201);
    CHECK(h_jint(&r, "fence") > f1); /* fences keep increasing across the loss */
    snprintf(tok, sizeof tok, "%s", h_header(&r, "Lock-Token") ? h_header(&r, "Lock-Token") : "");
    h_resp_free(&r);
    r = h_http("DELETE", gws[1].port, "/v1/locks/q-abst", tok, NULL, NULL);
    CHECK_EQ_INT(r.status, 200);
    h_resp_free(&r);

    /* A majority lost: nothing is granted. */
    restart_empty(1);
    restart_empty(2);
    wait_all_connected();
    CHECK(losses_seen(before + 6));
    r = h_http("POST", gws[1].port, "/v1/locks/q-abst", NULL, "{\"ttl_ms\":60000}", NULL);
    CHECK_EQ_INT(r.status, 503);
    CHECK_EQ_STR(h_jcode(&r) ? h_jcode(&r) : "", "redis_data_lost");
    CHECK(h_header(&r, "Retry-After") != NULL);
    h_resp_free(&r);
    r = h_http("GET", gws[0].port, "/readyz", NULL, NULL, NULL);
    CHECK_EQ_INT(r.status, 503);
    CHECK_EQ_STR(h_jcode(&r) ? h_jcode(&r) : "", "redis_data_lost");
    h_resp_free(&r);
}

int main(int argc, char **argv) {
    long long t0 = h_now_ms();
    check_filter(argc > 1 ? argv[1] : NULL);
    up_ok = start_all() == 0;
    RUN_SOME(test_basics);
    RUN_SOME(test_fair_first_attempt_leaves_no_entry);
    RUN_SOME(test_two_down);
    RUN_SOME(test_three_down);
    RUN_SOME(test_fences_across_majorities);
    RUN_SOME(test_fence_raise_lost);
    RUN_SOME(test_failed_round_undone);
    RUN_SOME(test_busy_round_undone);
    RUN_SOME(test_ids_while_masters_restart);
    RUN_SOME(test_ids_simultaneous_first_lease);
    RUN_SOME(test_mutual_exclusion_while_masters_die);
    RUN_SOME(test_ids_evicted_namespaces);
    RUN_SOME(test_lost_master_abstains);
    RUN(test_clean_stop);
    for (int i = 0; i < N_MASTERS; i++) h_redis_stop(&m[i]);
    fprintf(stderr, "  (%.1f s)\n", (h_now_ms() - t0) / 1000.0);
    return check_summary("quorum");
}
