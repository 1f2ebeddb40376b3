/* test_prefix_streams.c -- issue 33: streams over a prefix (GET
 * /v1/locks?prefix=P with Accept: text/event-stream, handlers/prefix_stream.c).
 * Two gateways on one Redis, each with a stream over the same prefix: both
 * see every change of every name under it (grants, releases, a forced
 * release, an expiry), made through either gateway, in the same order with
 * the same ids, and nothing of another prefix or of a semaphore.  A stream
 * cut and resumed with Last-Event-ID (on the other gateway) gets exactly
 * what it missed; an id no feed holds gets `event: gap` and the names held
 * now; Redis restarted under a stream: a gap.  Semaphores, the errors, the
 * listing still a listing without the Accept, and Redis Cluster mode:
 * names on every master once each, across gateways, resumed, and a gap
 * when the slot map changes.
 *
 * Every wait is for an event (a line in curl's output), never a fixed
 * sleep.  `build/tests/test_prefix_streams NAME` runs the tests whose names
 * contain NAME. */
#include "tests/integration/harness.h"

#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static struct h_redis redis;
static struct h_gw gw[2];
static char dir[64];

/* The ids out holds, joined by spaces. */
static void ids_of(const char *out, char *ids, size_t cap) {
    const char *buf = h_out_text(out);
    size_t n = 0;
    ids[0] = '\0';
    for (const char *p = buf; (p = strstr(p, "id: ")); p += 4) {
        size_t k = strcspn(p + 4, "\n");
        if (n + k + 2 >= cap) break;
        memcpy(ids + n, p + 4, k);
        n += k;
        ids[n++] = ' ';
        ids[n] = '\0';
    }
}

/* curl streaming path through port into out; opened once its first
 * comment line (sent when the gateway's subscription is confirmed) came. */
static pid_t stream(int port, const char *path, const char *last_id, const char *out) {
    char cmd[512], hdr[96] = "";
    if (last_id) snprintf(hdr, sizeof hdr, "-H 'Last-Event-ID: %s'", last_id);
    snprintf(cmd, sizeof cmd,
             "exec curl -sN -H 'Accept: text/event-stream' %s 'http://127.0.0.1:%d%s' > %s/%s "
             "2>&1",
             hdr, port, path, dir, out);
    pid_t pid = h_spawn(cmd, NULL);
    CHECK(h_out_wait(out, ":\n", 5000) >= 0);
    return pid;
}

/* POST path through port; the grant's token into token (NULL: kept). */
static long long take(int port, const char *path, const char *body, char *token) {
    struct h_resp r = h_http("POST", port, path, NULL, body, NULL);
    CHECK_EQ_INT(r.status, 201);
    long long fence = r.status == 201 ? h_jint(&r, "fence") : -1;
    if (token) snprintf(token, 64, "%s", h_token(&r));
    h_resp_free(&r);
    return fence;
}

static void give_back(int port, const char *path, const char *token) {
    struct h_resp r = h_http("DELETE", port, path, token, NULL, NULL);
    CHECK_EQ_INT(r.status, 200);
    h_resp_free(&r);
}

/* While no client of Redis holds a pattern (no prefix stream yet), a
 * change publishes nothing: the fast paths and the general path (an owner)
 * ask PUBSUB NUMPAT and stop there. */
static void test_prefix_nothing_published_unwatched(void) {
    /* In cluster mode (LOCKGATE_TEST_CLUSTER=1), each node's. */
    int nodes = redis.cn ? redis.cn : 1, asked = 0;
    struct h_redis node[H_CLUSTER_MAX];
    for (int k = 0; k < nodes; k++) {
        node[k] = redis.cn ? h_cluster_node(&redis, k) : redis;
        CHECK_EQ_STR(h_redis_cli(&node[k], "PUBSUB NUMPAT"), "0");
        h_redis_cli(&node[k], "CONFIG RESETSTAT");
    }
    char token[64];
    for (int i = 0; i < 2; i++) {
        take(gw[0].port, "/v1/locks/un-1", i ? "{\"owner\":\"o\"}" : "{}", token);
        give_back(gw[1].port, "/v1/locks/un-1", token);
    }
    for (int k = 0; k < nodes; k++) {
        const char *stats = h_redis_cli(&node[k], "INFO commandstats");
        asked += strstr(stats, "cmdstat_pubsub|numpat:calls=") != NULL;
        CHECK(strstr(stats, "cmdstat_publish:") == NULL);
    }
    CHECK(asked > 0);
}

/* Both gateways stream over pj; 6 grants and releases of pj-0..2 through
 * either, a lock and a semaphore outside it, a forced release and a 300 ms
 * lease's expiry under it: 14 events on each stream, in order, with the
 * same ids, the change named in each. */
static void test_prefix_two_gateways(void) {
    pid_t a = stream(gw[0].port, "/v1/locks?prefix=pj", NULL, "two-a");
    pid_t b = stream(gw[1].port, "/v1/locks?prefix=pj", NULL, "two-b");
    char want[32][128], token[64], path[64];
    int n = 0;
    for (int i = 0; i < 6; i++) {
        snprintf(path, sizeof path, "/v1/locks/pj-%d", i % 3);
        long long fence = take(gw[i % 2].port, path, "{}", token);
        snprintf(want[n++], sizeof want[0],
                 "data: {\"name\":\"pj-%d\",\"mode\":\"exclusive\",\"holders\":1,\"count\":1,"
                 "\"fence\":%lld,\"ttl_ms\":30000,\"change\":\"granted\"}\n",
                 i % 3, fence);
        give_back(gw[(i + 1) % 2].port, path, token);
        snprintf(want[n++], sizeof want[0],
                 "data: {\"name\":\"pj-%d\",\"holders\":0,\"change\":\"released\"}", i % 3);
        if (i == 2) { /* outside: another prefix, a semaphore under pj */
            take(gw[0].port, "/v1/locks/other-1", "{}", NULL);
            take(gw[1].port, "/v1/semaphores/pj-sem", "{\"limit\":2}", NULL);
        }
    }
    take(gw[1].port, "/v1/locks/pj-f", "{}", NULL);
    struct h_resp r = h_http("DELETE", gw[0].port, "/v1/locks/pj-f?force=true", NULL, NULL, NULL);
    CHECK_EQ_INT(r.status, 200);
    h_resp_free(&r);
    snprintf(want[n++], sizeof want[0], "data: {\"name\":\"pj-f\",\"mode\":\"exclusive\"");
    snprintf(want[n++], sizeof want[0], "\"ttl_ms\":30000,\"change\":\"granted\"}\n");
    snprintf(want[n++], sizeof want[0],
             "data: {\"name\":\"pj-f\",\"holders\":0,\"change\":\"forced\"}");
    take(gw[0].port, "/v1/locks/pj-exp", "{\"ttl_ms\":300}", NULL);
    long long t0 = h_now_ms();
    snprintf(want[n++], sizeof want[0], "data: {\"name\":\"pj-exp\",\"mode\":\"exclusive\"");
    snprintf(want[n++], sizeof want[0],
             "data: {\"name\":\"pj-exp\",\"holders\":0,\"change\":\"expired\"}");
    const char *outs[2] = {"two-a", "two-b"};
    for (int k = 0; k < 2; k++) {
        CHECK(h_out_wait(outs[k], want[n - 1], 3000) >= 0);
        if (k == 0)
            fprintf(stderr, "    a 300 ms lease's expiry streamed %lld ms after the grant\n",
                    h_now_ms() - t0);
        CHECK_EQ_INT(h_out_count(outs[k], "event: state"), 16);
        CHECK(h_out_in_order(outs[k], want[0], sizeof want[0], n));
        CHECK_EQ_INT(h_out_count(outs[k], "other-1"), 0);
        CHECK_EQ_INT(h_out_count(outs[k], "pj-sem"), 0);
        CHECK_EQ_INT(h_out_count(outs[k], "event: gap"), 0);
    }
    char ids[2][4096];
    ids_of("two-a", ids[0], sizeof ids[0]);
    ids_of("two-b", ids[1], sizeof ids[1]);
    CHECK(strcmp(ids[0], ids[1]) == 0); /* one order, one set of ids */
    h_reap(a);
    h_reap(b);
}

/* A stream on gateway 0 cut after its 4th event; 3 changes more; resumed
 * on gateway 1 (whose feed over the prefix lingers from the stream before)
 * with Last-Event-ID: the missed ones in order, nothing twice, no gap.
 * An id no feed holds: a gap, then the names held now (change current). */
static void test_prefix_resume(void) {
    pid_t a = stream(gw[0].port, "/v1/locks?prefix=pr", NULL, "res-a");
    /* The other gateway's feed over pr is up before the changes. */
    pid_t keep = stream(gw[1].port, "/v1/locks?prefix=pr", NULL, "res-keep");
    char token[64], want[16][128];
    int m = 0;
    for (int i = 0; i < 2; i++) {
        take(gw[0].port, "/v1/locks/pr-a", "{}", token);
        give_back(gw[0].port, "/v1/locks/pr-a", token);
    }
    CHECK_EQ_INT(h_out_wait_count("res-a", "event: state", 4, 3000), 4);
    char id[48];
    h_out_nth_id("res-a", 4, id);
    h_reap(a);
    long long f1 = take(gw[1].port, "/v1/locks/pr-b", "{}", token);
    give_back(gw[0].port, "/v1/locks/pr-b", token);
    long long f2 = take(gw[0].port, "/v1/locks/pr-c", "{\"owner\":\"still\"}", NULL);
    snprintf(want[m++], sizeof want[0], "\"fence\":%lld,", f1);
    snprintf(want[m++], sizeof want[0], "data: {\"name\":\"pr-b\",\"holders\":0,");
    snprintf(want[m++], sizeof want[0], "\"fence\":%lld,", f2);
    CHECK(h_out_wait("res-keep", want[m - 1], 3000) >= 0);
    pid_t b = stream(gw[1].port, "/v1/locks?prefix=pr", id, "res-b");
    CHECK_EQ_INT(h_out_wait_count("res-b", "event: state", 3, 3000), 3);
    CHECK(h_out_in_order("res-b", want[0], sizeof want[0], m));
    CHECK_EQ_INT(h_out_count("res-b", "event: gap"), 0);
    CHECK_EQ_INT(h_out_count("res-b", "pr-a"), 0);
    /* Resumed on the first gateway from the same place: the same. */
    pid_t c = stream(gw[0].port, "/v1/locks?prefix=pr", id, "res-c");
    CHECK_EQ_INT(h_out_wait_count("res-c", "event: state", 3, 3000), 3);
    CHECK(h_out_in_order("res-c", want[0], sizeof want[0], m));
    /* Then live: both resumed streams follow. */
    long long f3 = take(gw[1].port, "/v1/locks/pr-d", "{}", NULL);
    char live[64];
    snprintf(live, sizeof live, "\"fence\":%lld,", f3);
    CHECK(h_out_wait("res-b", live, 3000) >= 0);
    CHECK(h_out_wait("res-c", live, 3000) >= 0);
    h_reap(b);
    h_reap(c);
    /* An id nobody has: a gap, then what is held now, without ids. */
    pid_t d = stream(gw[1].port, "/v1/locks?prefix=pr", "5-0", "res-d");
    CHECK(h_out_wait("res-d", "event: gap\ndata: {\"prefix\":\"pr\",\"last_event_id\":\"5-0\"",
                     3000) >= 0);
    CHECK(h_out_wait("res-d", "\"name\":\"pr-d\"", 3000) >= 0);
    CHECK(h_out_wait("res-d", "\"owner\":\"still\",\"change\":\"current\"}", 3000) >= 0);
    CHECK_EQ_INT(h_out_count("res-d", "id: "), 0);
    CHECK_EQ_INT(h_out_count("res-d", "pr-a"), 0);
    h_reap(d);
    h_reap(keep);
}

/* /v1/semaphores?prefix=: permits under it, no lock of the same name. */
static void test_prefix_semaphores(void) {
    pid_t a = stream(gw[1].port, "/v1/semaphores?prefix=ps", NULL, "sem-a");
    char token[64];
    take(gw[0].port, "/v1/semaphores/ps-1", "{\"limit\":3}", token);
    take(gw[0].port, "/v1/semaphores/ps-1", "{\"limit\":3}", NULL);
    take(gw[0].port, "/v1/locks/ps-1", "{}", NULL);
    give_back(gw[1].port, "/v1/semaphores/ps-1", token);
    char want[3][128];
    snprintf(want[0], sizeof want[0], "{\"name\":\"ps-1\",\"limit\":3,\"holders\":1,");
    snprintf(want[1], sizeof want[1], "{\"name\":\"ps-1\",\"limit\":3,\"holders\":2,");
    snprintf(want[2], sizeof want[2], "{\"name\":\"ps-1\",\"limit\":3,\"holders\":1,");
    CHECK_EQ_INT(h_out_wait_count("sem-a", "event: state", 3, 3000), 3);
    CHECK(h_out_in_order("sem-a", want[0], sizeof want[0], 3));
    CHECK_EQ_INT(h_out_count("sem-a", "exclusive"), 0);
    /* Two permits of 300 and 900 ms: each expiry streamed at its own end
     * (the gateway looks at the earliest lease's end first). */
    take(gw[0].port, "/v1/semaphores/ps-2", "{\"limit\":2,\"ttl_ms\":300}", NULL);
    take(gw[1].port, "/v1/semaphores/ps-2", "{\"limit\":2,\"ttl_ms\":900}", NULL);
    long long t0 = h_now_ms();
    CHECK(h_out_wait("sem-a", "{\"name\":\"ps-2\",\"limit\":2,\"holders\":1,\"ttl_ms\":", 2000) >=
          0);
    CHECK(h_out_wait("sem-a", "\"holders\":1,\"ttl_ms\":", 10) >= 0);
    CHECK_EQ_INT(h_out_wait_count("sem-a", "\"change\":\"expired\"", 1, 2000), 1);
    long long first = h_now_ms() - t0;
    CHECK_EQ_INT(h_out_wait_count("sem-a", "\"change\":\"expired\"", 2, 2000), 2);
    long long second = h_now_ms() - t0;
    fprintf(stderr, "    permits of 300 and 900 ms: expiries streamed after %lld and %lld ms\n",
            first, second);
    CHECK(first < 800);
    CHECK(h_out_wait("sem-a", "{\"name\":\"ps-2\",\"holders\":0,\"change\":\"expired\"}", 10) >= 0);
    h_reap(a);
}

/* A bad prefix or Last-Event-ID: 400; without the Accept: the listing. */
static void test_prefix_errors(void) {
    const char *bad[] = {"/v1/locks?prefix=a%20b", "/v1/semaphores?prefix=%7B"};
    for (int i = 0; i < 2; i++) {
        struct h_resp r =
            h_http("GET", gw[0].port, bad[i], NULL, NULL, "Accept: text/event-stream");
        CHECK_EQ_INT(r.status, 400);
        CHECK(strcmp(h_jcode(&r), "invalid_name") == 0);
        h_resp_free(&r);
    }
    char cmd[256], out[64] = "";
    snprintf(cmd, sizeof cmd,
             "curl -s -H 'Accept: text/event-stream' -H 'Last-Event-ID: x y' "
             "'http://127.0.0.1:%d/v1/locks?prefix=pj'",
             gw[0].port);
    FILE *p = popen(cmd, "r");
    size_t n = p ? fread(out, 1, sizeof out - 1, p) : 0;
    if (p) pclose(p);
    out[n] = '\0';
    CHECK(strstr(out, "invalid_field") != NULL);
    struct h_resp r;
    r = h_http("GET", gw[0].port, "/v1/locks?prefix=pj", NULL, NULL, NULL);
    CHECK_EQ_INT(r.status, 200);
    CHECK(r.body && strstr(r.body, "\"locks\"") != NULL);
    h_resp_free(&r);
}

/* The pub/sub connections dropped (CLIENT KILL TYPE pubsub: as a Redis
 * restart or failover does) under a prefix stream and a stream hold: the
 * gateway subscribes again, the prefix stream says `event: gap` (what came
 * between is not known) and goes on, and the gateway still answers (a
 * worker once spun for ever there: waiters_retry_all woke the stream
 * holds' heartbeat timer, which parked again at once). */
static void test_prefix_pubsub_reconnect(void) {
    pid_t a = stream(gw[0].port, "/v1/locks?prefix=rr", NULL, "rr-a");
    char cmd[256], file[128];
    snprintf(file, sizeof file, "%s/rr-hold", dir);
    snprintf(cmd, sizeof cmd,
             "exec curl -sN -H 'Accept: text/event-stream' -X POST "
             "http://127.0.0.1:%d/v1/locks/rr-hold -d '{}' > %s 2>&1",
             gw[0].port, file);
    pid_t hold = h_spawn(cmd, NULL);
    CHECK(h_out_wait("rr-hold", "event: granted", 5000) >= 0);
    CHECK(h_out_wait("rr-a", "\"name\":\"rr-hold\",\"mode\"", 3000) >= 0); /* under rr too */
    h_redis_cli(&redis, "CLIENT KILL TYPE pubsub");
    CHECK(h_out_wait("rr-a", "event: gap", 5000) >= 0);
    long long t0 = h_now_ms(), fence = -1;
    while (fence < 0 && h_now_ms() - t0 < 5000) {
        struct h_resp r = h_http("POST", gw[0].port, "/v1/locks/rr-1", NULL, "{}", NULL);
        if (r.status == 201) fence = h_jint(&r, "fence");
        h_resp_free(&r);
        if (fence < 0) h_sleep_ms(20);
    }
    CHECK(fence > 0);
    char want[64];
    snprintf(want, sizeof want, "\"fence\":%lld,", fence);
    CHECK(h_out_wait("rr-a", want, 3000) >= 0);
    h_reap(hold);
    h_reap(a);
}

/* Quorum mode (three masters): the feed listens to the first master's
 * changes; a grant, its release and a 300 ms lease's expiry are streamed
 * once each. */
static void test_prefix_quorum(void) {
    struct h_redis m[3];
    struct h_gw g = {0};
    char flags[256] = "--workers 2 ";
    size_t len = strlen(flags);
    for (int i = 0; i < 3; i++) {
        CHECK_EQ_INT(h_redis_start(&m[i], 0, NULL), 0);
        if (i)
            len += (size_t)snprintf(flags + len, sizeof flags - len,
                                    "--redis redis://127.0.0.1:%d ", m[i].port);
    }
    CHECK_EQ_INT(h_gw_up(&g, &m[0], flags), 0);
    pid_t a = stream(g.port, "/v1/locks?prefix=q", NULL, "q-a");
    char token[64];
    take(g.port, "/v1/locks/q-1", "{}", token);
    give_back(g.port, "/v1/locks/q-1", token);
    take(g.port, "/v1/locks/q-2", "{\"ttl_ms\":300}", NULL);
    char want[4][128];
    /* (The fence is the first master's, which may be below the one the
     * grant answered: another master's clock may be ahead.) */
    snprintf(want[0], sizeof want[0],
             "{\"name\":\"q-1\",\"mode\":\"exclusive\",\"holders\":1,\"count\":1,");
    snprintf(want[1], sizeof want[1], "{\"name\":\"q-1\",\"holders\":0,\"change\":\"released\"}");
    snprintf(want[2], sizeof want[2], "{\"name\":\"q-2\",\"mode\":\"exclusive\"");
    snprintf(want[3], sizeof want[3], "{\"name\":\"q-2\",\"holders\":0,\"change\":\"expired\"}");
    CHECK(h_out_wait("q-a", want[3], 3000) >= 0);
    CHECK(h_out_in_order("q-a", want[0], sizeof want[0], 4));
    CHECK_EQ_INT(h_out_count("q-a", "event: state"), 4);
    h_reap(a);
    CHECK_EQ_INT(h_gw_stop(&g, 5000), 0);
    for (int i = 0; i < 3; i++) h_redis_stop(&m[i]);
}

/* A name under prefix whose slot is served by master k of a fresh
 * 3-master cluster (redis-cli --cluster create gives them 0-5460,
 * 5461-10922, 10923-16383), not one of the taken ones. */
static void name_on_master(struct h_redis *node0, const char *prefix, int k, int skip, char *out) {
    for (int i = 0, found = 0; i < 10000; i++) {
        char cmd[96];
        snprintf(out, 32, "%s%d", prefix, i);
        snprintf(cmd, sizeof cmd, "CLUSTER KEYSLOT %s", out);
        int slot = atoi(h_redis_cli(node0, cmd));
        if (slot * 3 / 16384 == k && found++ == skip) return;
    }
    CHECK(0);
}

/* Redis Cluster mode (3 masters): two gateways (one of 1 worker, one of
 * 2) stream over cx; names on each master, granted and released through
 * either gateway: every change exactly once on each stream, in the order
 * made, with the same ids on both; every master holds the pattern; a
 * stream cut and resumed on the other gateway with Last-Event-ID gets what
 * it missed; a slot moved to another master (the map changes): `event:
 * gap`, then changes there still once.  On main: 501. */
static void test_prefix_cluster(void) {
    struct h_redis cl;
    struct h_gw g[2] = {{0}};
    CHECK_EQ_INT(h_cluster_start(&cl, 3, 0), 0);
    CHECK_EQ_INT(h_gw_up(&g[0], &cl, "--workers 1 --stream-heartbeat-ms 200"), 0);
    CHECK_EQ_INT(h_gw_up(&g[1], &cl, "--workers 2 --stream-heartbeat-ms 200"), 0);
    for (int k = 0; k < 2; k++) CHECK_EQ_INT(h_wait_ready(g[k].port, 10000), 0);
    struct h_redis node[3];
    for (int k = 0; k < 3; k++) node[k] = h_cluster_node(&cl, k);
    pid_t a = stream(g[0].port, "/v1/locks?prefix=cx", NULL, "cx-a"); /* main: 501 */
    pid_t b = stream(g[1].port, "/v1/locks?prefix=cx", NULL, "cx-b");
    /* The one pattern (both gateways') on each master, its scripts publish. */
    for (int k = 0; k < 3; k++) CHECK_EQ_STR(h_redis_cli(&node[k], "PUBSUB NUMPAT"), "1");
    char names[3][32], want[16][160], token[64], path[96], cmd[128];
    int n = 0;
    for (int k = 0; k < 3; k++) name_on_master(&node[0], "cx-", k, 0, names[k]);
    for (int i = 0; i < 6; i++) {
        const char *name = names[i % 3];
        snprintf(path, sizeof path, "/v1/locks/%s", name);
        long long fence = take(g[i % 2].port, path, "{}", token);
        snprintf(want[n++], sizeof want[0],
                 "{\"name\":\"%s\",\"mode\":\"exclusive\",\"holders\":1,"
                 "\"count\":1,\"fence\":%lld,",
                 name, fence);
        if (i < 3) { /* the name's hash is on master i */
            snprintf(cmd, sizeof cmd, "EXISTS lockgate:lock:{%s}", name);
            CHECK_EQ_STR(h_redis_cli(&node[i], cmd), "1");
        }
        give_back(g[(i + 1) % 2].port, path, token);
        snprintf(want[n++], sizeof want[0],
                 "{\"name\":\"%s\",\"holders\":0,\"change\":\"released\"}", name);
    }
    const char *outs[2] = {"cx-a", "cx-b"};
    /* Each change once, and each name's changes in order.  Across masters
     * the order is the order of arrival (each master's messages come on
     * their own connection): a loaded machine may swap two names' events. */
    for (int k = 0; k < 2; k++) {
        CHECK_EQ_INT(h_out_wait_count(outs[k], "event: state", n, 3000), n);
        for (int i = 0; i < n; i++) /* a release reads alike both times its name is let go */
            CHECK_EQ_INT(h_out_count(outs[k], want[i]), i % 2 ? 2 : 1);
        for (int j = 0; j < 3; j++) {
            char mine[4][160];
            int rows[4] = {2 * j, 2 * j + 1, 2 * j + 6, 2 * j + 7};
            for (int r = 0; r < 4; r++) memcpy(mine[r], want[rows[r]], sizeof mine[r]);
            CHECK(h_out_in_order(outs[k], mine[0], sizeof mine[0], 4));
        }
    }
    char ids[2][4096];
    ids_of("cx-a", ids[0], sizeof ids[0]);
    ids_of("cx-b", ids[1], sizeof ids[1]);
    /* The same ids on both (each event is one change, named alike); in the
     * same order unless the two gateways saw two masters' messages arrive
     * in another order (see above). */
    int same_order = strcmp(ids[0], ids[1]) == 0;
    for (char *p = ids[0], *end; *p; p = end + 1) {
        end = strchr(p, ' ');
        *end = '\0';
        CHECK(strstr(ids[1], p) != NULL);
    }
    /* Cut after the 4th; 2 changes on other masters; resumed on the other
     * gateway: those 2, nothing twice, no gap.  What a cut stream missed is
     * only defined when both gateways saw the same order. */
    char id[48];
    h_out_nth_id("cx-a", 4, id);
    h_reap(a);
    long long f1 = take(g[0].port, "/v1/locks/cx-more", "{}", NULL);
    char more[64];
    snprintf(more, sizeof more, "\"fence\":%lld,", f1);
    CHECK(h_out_wait("cx-b", more, 3000) >= 0);
    pid_t c = stream(g[1].port, "/v1/locks?prefix=cx", id, "cx-c");
    if (same_order) {
        CHECK_EQ_INT(h_out_wait_count("cx-c", "event: state", n - 4 + 1, 3000), n - 4 + 1);
        CHECK(h_out_in_order("cx-c", want[4], sizeof want[0], n - 4));
    } else {
        printf("    the gateways saw two masters' events in another order: resume checked "
               "for the new change only\n");
    }
    CHECK(h_out_wait("cx-c", more, 3000) >= 0);
    CHECK_EQ_INT(h_out_count("cx-c", "event: gap"), 0);
    h_reap(c);
    /* An empty slot of master 0 given to master 1: the next grant there
     * meets MOVED, the map changes, the stream on that gateway says gap,
     * and the grant is streamed once. */
    pid_t d = stream(g[0].port, "/v1/locks?prefix=cx", NULL, "cx-d");
    char moved[32], id1[64];
    name_on_master(&node[0], "cx-mv-", 0, 0, moved);
    snprintf(id1, sizeof id1, "%s", h_redis_cli(&node[1], "CLUSTER MYID"));
    snprintf(cmd, sizeof cmd, "CLUSTER KEYSLOT %s", moved);
    int slot = atoi(h_redis_cli(&node[0], cmd));
    for (int k = 1; k >= 0; k--) {
        snprintf(cmd, sizeof cmd, "CLUSTER SETSLOT %d NODE %s", slot, id1);
        CHECK_EQ_STR(h_redis_cli(&node[k], cmd), "OK");
    }
    snprintf(path, sizeof path, "/v1/locks/%s", moved);
    long long f2 = take(g[0].port, path, "{}", NULL);
    CHECK(h_out_wait("cx-d", "event: gap", 7000) >= 0);
    char live[96];
    snprintf(live, sizeof live, "\"name\":\"%s\",\"mode\":\"exclusive\"", moved);
    CHECK(h_out_wait("cx-d", live, 3000) >= 0);
    snprintf(live, sizeof live, "\"fence\":%lld,\"ttl_ms\":30000,\"change\":\"granted\"", f2);
    CHECK(h_out_wait("cx-d", live, 3000) >= 0);
    long long f3 = take(g[1].port, "/v1/locks/cx-after", "{}", NULL);
    snprintf(more, sizeof more, "\"fence\":%lld,", f3);
    CHECK(h_out_wait("cx-d", more, 3000) >= 0);
    CHECK_EQ_INT(h_out_count("cx-d", live), 1);
    CHECK_EQ_INT(h_out_count("cx-d", more), 1);
    h_reap(d);
    h_reap(b);
    for (int k = 0; k < 2; k++) CHECK_EQ_INT(h_gw_stop(&g[k], 5000), 0);
    h_redis_stop(&cl);
}

/* Redis Cluster mode with a replica each: the master of a streamed name
 * killed (SIGKILL); once its replica took over, the stream says `event:
 * gap` (the map changed, and the new master had no pattern before the
 * gateway subscribed there), the new master holds the pattern, and
 * changes go on being streamed once each. */
static void test_prefix_cluster_failover(void) {
    struct h_redis cl;
    struct h_gw g = {0};
    CHECK_EQ_INT(h_cluster_start(&cl, 3, 1), 0);
    CHECK_EQ_INT(h_gw_up(&g, &cl, "--workers 1 --stream-heartbeat-ms 200"), 0);
    CHECK_EQ_INT(h_wait_ready(g.port, 10000), 0);
    struct h_redis node0 = h_cluster_node(&cl, 0);
    CHECK(strncmp(h_redis_cli(&node0, "ROLE"), "master", 6) == 0);
    char name[32], path[64], token[64], cmd[96];
    name_on_master(&node0, "fo-", 0, 0, name);
    snprintf(path, sizeof path, "/v1/locks/%s", name);
    pid_t a = stream(g.port, "/v1/locks?prefix=fo-", NULL, "fo-a");
    take(g.port, path, "{}", token);
    snprintf(cmd, sizeof cmd, "EXISTS lockgate:lock:{%s}", name);
    CHECK_EQ_STR(h_redis_cli(&node0, cmd), "1");
    give_back(g.port, path, token);
    CHECK_EQ_INT(h_out_wait_count("fo-a", "event: state", 2, 3000), 2);
    /* Its replica has every write (else the new master lost some: the
     * gateway's data-loss hold-off would refuse grants there). */
    CHECK_EQ_STR(h_redis_cli(&node0, "WAIT 1 5000"), "1");
    long long t0 = h_now_ms();
    h_redis_kill(&node0);
    cl.cpid[0] = 0;
    CHECK(h_out_wait("fo-a", "event: gap", 20000) >= 0);
    fprintf(stderr, "    master killed: the stream said gap after %lld ms\n", h_now_ms() - t0);
    /* The promoted replica holds the pattern (its scripts publish), and
     * changes on the other masters are streamed once each.  (Grants on
     * the new master itself are not tried: the gateway's data-loss guard
     * sometimes holds it off after a failover, see the branch's report.) */
    int promoted = 0;
    for (int k = 3; k < cl.cn; k++) {
        struct h_redis n = h_cluster_node(&cl, k);
        const char *role = h_redis_cli(&n, "ROLE");
        if (role && strncmp(role, "master", 6) == 0) {
            promoted++;
            CHECK_EQ_STR(h_redis_cli(&n, "PUBSUB NUMPAT"), "1");
        }
    }
    CHECK_EQ_INT(promoted, 1);
    char other[32], want[2][128];
    struct h_redis node1 = h_cluster_node(&cl, 1); /* node 0 is dead */
    name_on_master(&node1, "fo-", 1, 0, other);
    snprintf(path, sizeof path, "/v1/locks/%s", other);
    long long fence = take(g.port, path, "{}", token);
    give_back(g.port, path, token);
    snprintf(want[0], sizeof want[0], "\"fence\":%lld,\"ttl_ms\":30000,\"change\":\"granted\"",
             fence);
    snprintf(want[1], sizeof want[1], "{\"name\":\"%s\",\"holders\":0,\"change\":\"released\"}",
             other);
    CHECK(h_out_wait("fo-a", want[1], 5000) >= 0);
    CHECK(h_out_in_order("fo-a", want[0], sizeof want[0], 2));
    CHECK_EQ_INT(h_out_count("fo-a", want[0]), 1);
    CHECK_EQ_INT(h_out_count("fo-a", want[1]), 1);
    h_reap(a);
    CHECK_EQ_INT(h_gw_stop(&g, 5000), 0);
    h_redis_stop(&cl);
}

/* A stream over /v1/locks?prefix=prefix through port on a raw socket (64
 * of them are cheaper than 64 curls): read until the opening comment, or
 * an error answer's body; its status, the bytes read into head; the
 * socket into *fd (closed by the caller). */
static int raw_stream(int port, const char *prefix, int *fd, char *head, size_t cap) {
    char req[256];
    int n = snprintf(req, sizeof req,
                     "GET /v1/locks?prefix=%s HTTP/1.1\r\nHost: x\r\n"
                     "Accept: text/event-stream\r\n\r\n",
                     prefix);
    size_t got = 0;
    head[0] = '\0';
    *fd = h_connect(port);
    if (*fd < 0 || write(*fd, req, (size_t)n) != n) return -1;
    long long end = h_now_ms() + 5000;
    for (;;) {
        const char *body = strstr(head, "\r\n\r\n");
        if (body && (strstr(body, ":\n") || strchr(body, '}'))) break;
        struct pollfd p = {.fd = *fd, .events = POLLIN};
        long long left = end - h_now_ms();
        if (left <= 0 || got + 1 >= cap || poll(&p, 1, (int)left) <= 0) return -1;
        ssize_t k = read(*fd, head + got, cap - 1 - got);
        if (k <= 0) return -1;
        got += (size_t)k;
        head[got] = '\0';
    }
    return strncmp(head, "HTTP/1.1 ", 9) == 0 ? atoi(head + 9) : -1;
}

/* The gateway keeps at most 64 feeds (PSUBSCRIBEs Redis matches every
 * PUBLISH against): on a gateway of its own, streams over 64 prefixes
 * open, one over a 65th answers 503 too_many_prefixes with Retry-After;
 * once one stream ended, its lingering feed is ended to make room and the
 * 65th opens on a retry; the gateway's patterns in Redis stay at 64. */
static void test_prefix_feed_cap(void) {
    struct h_gw g = {0};
    CHECK_EQ_INT(h_gw_up(&g, &redis, "--workers 2 --stream-heartbeat-ms 1000"), 0);
    long long numpat0 = atoll(h_redis_cli(&redis, "PUBSUB NUMPAT"));
    int fd[64], x, st = 0;
    char head[2048], prefix[32];
    for (int i = 0; i < 64; i++) {
        snprintf(prefix, sizeof prefix, "cap%d-", i);
        CHECK_EQ_INT(raw_stream(g.port, prefix, &fd[i], head, sizeof head), 200);
    }
    st = raw_stream(g.port, "capx", &x, head, sizeof head);
    CHECK_EQ_INT(st, 503);
    CHECK(strstr(head, "\"code\":\"too_many_prefixes\"") != NULL);
    CHECK(strstr(head, "Retry-After: ") != NULL);
    close(x);
    close(fd[0]); /* its feed lingers: the next stream's try ends it */
    long long t0 = h_now_ms();
    int tries = 0, coming = 0;
    while (st != 200 && h_now_ms() - t0 < 10000) {
        if (tries++) h_sleep_ms(100);
        st = raw_stream(g.port, "capx", &x, head, sizeof head);
        /* Room is coming (once the gateway saw the hang-up) */
        if (st == 503 && strstr(head, "Retry-After: 3\r\n")) coming++;
        if (st != 200) close(x);
    }
    CHECK_EQ_INT(st, 200);
    CHECK(coming > 0);
    fprintf(stderr, "    the 65th prefix opened after %lld ms, %d tries\n", h_now_ms() - t0, tries);
    long long numpat = atoll(h_redis_cli(&redis, "PUBSUB NUMPAT"));
    CHECK(numpat - numpat0 <= 64);
    close(x);
    for (int i = 1; i < 64; i++) close(fd[i]);
    CHECK_EQ_INT(h_gw_stop(&g, 5000), 0);
}

int main(int argc, char **argv) {
    check_filter(argc > 1 ? argv[1] : NULL);
    snprintf(dir, sizeof dir, "/tmp/lockgate-prefix-XXXXXX");
    if (!mkdtemp(dir)) return 2;
    h_out_dir(dir);
    if (h_redis_start(&redis, 0, NULL) < 0 ||
        h_gw_up(&gw[0], &redis, "--workers 2 --stream-heartbeat-ms 200") < 0 ||
        h_gw_up(&gw[1], &redis, "--workers 2 --stream-heartbeat-ms 200") < 0)
        return 2;
    long long t0 = h_now_ms();
    RUN_SOME(test_prefix_nothing_published_unwatched);
    RUN_SOME(test_prefix_two_gateways);
    RUN_SOME(test_prefix_resume);
    RUN_SOME(test_prefix_semaphores);
    RUN_SOME(test_prefix_errors);
    RUN_SOME(test_prefix_pubsub_reconnect);
    RUN_NOT_CLUSTER(test_prefix_quorum);
    RUN_SOME(test_prefix_cluster);
    RUN_SOME(test_prefix_cluster_failover);
    RUN_SOME(test_prefix_feed_cap);
    fprintf(stderr, "    prefix streams suite: %lld ms\n", h_now_ms() - t0);
    for (int i = 0; i < 2; i++)
        CHECK_EQ_INT(h_gw_stop(&gw[i], 5000), 0); /* a clean stop (no leak under the sanitizers) */
    h_redis_stop(&redis);
    char rm[128];
    snprintf(rm, sizeof rm, "rm -rf %s", dir);
    if (system(rm) != 0) fprintf(stderr, "    could not remove %s\n", dir);
    return check_summary("prefix_streams");
}
