/* test_cluster_streams.c -- issue 33's event streams in Redis Cluster mode
 * (3 masters, no replicas; two gateways A and B), held by plain curl as
 * the docs show it:
 *
 *   - a hold bound to its connection on a name of each master: kill -9 of
 *     its curl releases it, and a streaming waiter on the other gateway is
 *     granted within 1 s (the session's key lies on one master, so at
 *     least two of the three holds lie on another); a semaphore too;
 *   - renewal: holds of ttl 600 ms on every master outlive several ttls
 *     (the worker's session is pushed to each hold's slot), and no gateway
 *     subscribes to a slot's releases for the stream code's timers; a forced
 *     release through the other gateway is `event: lost` at once; a
 *     gateway killed: its hold ends within ttl_ms; a gateway stopped: its
 *     holds are released at once;
 *   - a watch stream on B sees every grant and release made through A, in
 *     order, and resumes with Last-Event-ID without missing or repeating;
 *   - an election: two candidates on two gateways, the leader's curl
 *     killed, the other elected with a higher term; an observer on the
 *     other gateway sees both leaders and a proclaimed value, in order.
 *
 * The gateways' heartbeat is 5 s, so every change seen within a second
 * was announced on its slot's shard channel, not found by a heartbeat's
 * read.  Every wait is for an event (a line in curl's output, the lock's
 * state), never a fixed sleep.  `build/tests/test_cluster_streams NAME`
 * runs the tests whose names contain NAME. */
#include "tests/integration/harness.h"

#include "server/cluster.c" /* key slots, computed as the gateway does */

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static struct h_redis cl;
static struct h_gw ga, gb;
static char dir[64];

/* ---- helpers ------------------------------------------------------------------------ */

/* A name whose keys live on the master of the n-th third of the slots
 * (redis-cli --cluster create splits them so among 3 masters). */
static void name_on_master(const char *stem, int third, char *out, size_t cap) {
    for (int n = 0;; n++) {
        snprintf(out, cap, "%s-%d", stem, n);
        if (cluster_key_slot(out, strlen(out)) * 3 / CLUSTER_SLOTS == third) return;
    }
}

/* curl with Accept: text/event-stream: method on path through port (body
 * may be NULL; last_id: a Last-Event-ID, or NULL), its output in the file
 * out under dir.  exec: the pid is curl's own, for kill -9. */
static pid_t sse(const char *method, int port, const char *path, const char *body,
                 const char *last_id, const char *out) {
    char cmd[1024], hdr[96] = "";
    if (last_id) snprintf(hdr, sizeof hdr, "-H 'Last-Event-ID: %s'", last_id);
    snprintf(cmd, sizeof cmd,
             "exec curl -sN -H 'Accept: text/event-stream' %s -X %s http://127.0.0.1:%d%s %s%s%s "
             "> %s/%s 2>&1",
             hdr, method, port, path, body ? "-d '" : "", body ? body : "", body ? "'" : "", dir,
             out);
    return h_spawn(cmd, NULL);
}

/* The number after "key": in the first event named event in out, or 0. */
static long long event_int(const char *out, const char *event, const char *key) {
    const char *buf = h_out_text(out);
    const char *p = strstr(buf, event);
    char k[64];
    snprintf(k, sizeof k, "\"%s\":", key);
    p = p ? strstr(p, k) : NULL;
    return p ? atoll(p + strlen(k)) : 0;
}

/* Milliseconds until GET path through port answers want, or -1. */
static long long wait_status(int port, const char *path, long want, int timeout_ms) {
    long long t0 = h_now_ms();
    do {
        struct h_resp r = h_http("GET", port, path, NULL, NULL, NULL);
        long st = r.status;
        h_resp_free(&r);
        if (st == want) return h_now_ms() - t0;
        h_sleep_ms(5);
    } while (h_now_ms() - t0 < timeout_ms);
    return -1;
}

/* Shard channels the gateways subscribe to in the slots of the stream
 * code's timer keys ("~stream-heartbeat", "~stream-session": waiters that
 * only a timer wakes, parked on keys nobody publishes): none should be.
 * (A name of this suite in one of those slots would explain one; none of
 * them is.)  Before the fix each gateway subscribed there, and the
 * subscription's confirmation woke the timers early. */
static int timer_subscriptions(void) {
    int s1 = cluster_key_slot("~stream-heartbeat", 17),
        s2 = cluster_key_slot("~stream-session", 15);
    int found = 0;
    for (int i = 0; i < cl.cn; i++) {
        struct h_redis n = h_cluster_node(&cl, i);
        const char *out = h_redis_cli(&n, "PUBSUB SHARDCHANNELS");
        char buf[4096];
        snprintf(buf, sizeof buf, "%s", out ? out : "");
        for (char *save = NULL, *ch = strtok_r(buf, "\n", &save); ch;
             ch = strtok_r(NULL, "\n", &save)) {
            int s = cluster_key_slot(ch, strlen(ch));
            if (s == s1 || s == s2) {
                fprintf(stderr, "    subscribed for a timer: %s (slot %d)\n", ch, s);
                found++;
            }
        }
    }
    return found;
}

/* ---- holds bound to their connection ----------------------------------------------- */

/* On a name of each master (and a semaphore): held by a stream through A,
 * waited for by a stream through B; kill -9 of the holder's curl and B's
 * waiter is granted within 1 s, with a higher fence. */
static void test_kill_releases_across_masters(void) {
    for (int m = 0; m < 4; m++) {
        char name[32], path[64], out_a[32], out_b[32];
        int sem = m == 3; /* the fourth: a semaphore, on the first master */
        name_on_master(sem ? "ksem" : "kill", m % 3, name, sizeof name);
        snprintf(path, sizeof path, "/v1/%s/%s", sem ? "semaphores" : "locks", name);
        snprintf(out_a, sizeof out_a, "kill-a-%d", m);
        snprintf(out_b, sizeof out_b, "kill-b-%d", m);
        pid_t a =
            sse("POST", ga.port, path, sem ? "{\"limit\":1}" : "{\"ttl_ms\":20000}", NULL, out_a);
        CHECK(h_out_wait(out_a, "event: granted", 5000) >= 0);
        pid_t b = sse("POST", gb.port, path,
                      sem ? "{\"limit\":1,\"wait_ms\":30000}" : "{\"wait_ms\":30000}", NULL, out_b);
        CHECK(h_out_wait(out_b, "event: waiting", 5000) >= 0);
        long long t0 = h_now_ms();
        h_reap(a);
        long long t = h_out_wait(out_b, "event: granted", 5000);
        fprintf(stderr,
                "    %s on master %d: kill -9 of the holder, B's stream granted after %lld ms\n",
                name, m % 3, t < 0 ? -1 : h_now_ms() - t0);
        CHECK(t >= 0 && h_now_ms() - t0 < 1000);
        if (!sem)
            CHECK(event_int(out_b, "event: granted", "fence") >
                  event_int(out_a, "event: granted", "fence"));
        h_reap(b);
        CHECK(wait_status(ga.port, path, 404, 2000) >= 0); /* released once more */
    }
}

/* Stream holds of ttl 600 ms on every master through A stand three ttls
 * later (read through B): the worker's session is renewed, and its end
 * pushed to each hold's slot.  A forced release through B: A's stream says
 * `event: lost` at once and ends. */
static void test_renewal_and_lost(void) {
    pid_t p[3];
    char names[3][32], path[128], out[32];
    for (int m = 0; m < 3; m++) {
        name_on_master("renew", m, names[m], sizeof names[m]);
        snprintf(path, sizeof path, "/v1/locks/%s", names[m]);
        snprintf(out, sizeof out, "renew-%d", m);
        p[m] = sse("POST", ga.port, path, "{\"ttl_ms\":600}", NULL, out);
    }
    for (int m = 0; m < 3; m++) {
        snprintf(out, sizeof out, "renew-%d", m);
        CHECK(h_out_wait(out, "event: granted", 5000) >= 0);
    }
    long long t0 = h_now_ms(), reads = 0;
    while (h_now_ms() - t0 < 2000) {
        for (int m = 0; m < 3; m++) {
            snprintf(path, sizeof path, "/v1/locks/%s", names[m]);
            struct h_resp r = h_http("GET", gb.port, path, NULL, NULL, NULL);
            CHECK_EQ_INT(r.status, 200);
            h_resp_free(&r);
            reads++;
        }
        h_sleep_ms(100);
    }
    fprintf(stderr, "    3 stream holds of ttl 600 ms held for 2 s (%lld reads, all 200)\n", reads);
    CHECK_EQ_INT(timer_subscriptions(), 0);
    snprintf(path, sizeof path, "/v1/locks/%s?force=true", names[1]);
    struct h_resp r = h_http("DELETE", gb.port, path, NULL, NULL, NULL);
    CHECK_EQ_INT(r.status, 200);
    h_resp_free(&r);
    long long t = h_out_wait("renew-1", "event: lost", 2000);
    fprintf(stderr, "    forced release through B: event: lost on A after %lld ms\n", t);
    CHECK(t >= 0 && t < 1000);
    int status = 0;
    t0 = h_now_ms();
    while (waitpid(p[1], &status, WNOHANG) == 0 && h_now_ms() - t0 < 2000) h_sleep_ms(5);
    CHECK(h_now_ms() - t0 < 2000); /* the stream ended: curl left by itself */
    for (int m = 0; m < 3; m++) h_reap(p[m]);
    for (int m = 0; m < 3; m++) {
        snprintf(path, sizeof path, "/v1/locks/%s", names[m]);
        CHECK(wait_status(gb.port, path, 404, 2000) >= 0);
    }
}

/* The gateway dies: nobody renews its session, and the hold ends with the
 * lease its session's last renewal pushed to the hold's own slot (the
 * session's key, on whichever master, is not needed for that): between two
 * thirds of ttl_ms and ttl_ms after the kill, a waiter on B gets it. */
static void test_gateway_killed(void) {
    struct h_gw gc = {0};
    if (h_gw_up(&gc, &cl, "--workers 1") < 0 || h_wait_ready(gc.port, 10000) < 0) {
        CHECK(0);
        return;
    }
    char name[32], path[64];
    name_on_master("gwdead", 1, name, sizeof name);
    snprintf(path, sizeof path, "/v1/locks/%s", name);
    pid_t a = sse("POST", gc.port, path, "{\"ttl_ms\":1500}", NULL, "gwdead");
    CHECK(h_out_wait("gwdead", "event: granted", 5000) >= 0);
    long long t0 = h_now_ms();
    h_gw_kill(&gc);
    struct h_resp r = h_http("POST", gb.port, path, NULL, "{\"wait_ms\":5000}", NULL);
    long long t = h_now_ms() - t0;
    fprintf(stderr, "    gateway killed: ttl 1500 ms, released after %lld ms\n", t);
    CHECK_EQ_INT(r.status, 201);
    CHECK(t >= 900 && t <= 1900);
    h_resp_free(&r);
    h_reap(a);
}

/* The gateway stops (SIGTERM): its stream holds are released at once, and
 * their streams say `event: lost` (shutting_down), in every mode.  (The
 * session's end does not end a hold that carries its lease: before the
 * fix, the session's timer was given up first and the hold stayed held
 * until its lease ran out, 20 s here.)  A waiter on B gets it. */
static void test_gateway_stopped(void) {
    struct h_gw gc = {0};
    if (h_gw_up(&gc, &cl, "--workers 1") < 0 || h_wait_ready(gc.port, 10000) < 0) {
        CHECK(0);
        return;
    }
    char name[32], path[64];
    name_on_master("gwstop", 2, name, sizeof name);
    snprintf(path, sizeof path, "/v1/locks/%s", name);
    pid_t a = sse("POST", gc.port, path, "{\"ttl_ms\":20000}", NULL, "gwstop-a");
    CHECK(h_out_wait("gwstop-a", "event: granted", 5000) >= 0);
    pid_t b = sse("POST", gb.port, path, "{\"wait_ms\":30000}", NULL, "gwstop-b");
    CHECK(h_out_wait("gwstop-b", "event: waiting", 5000) >= 0);
    long long t0 = h_now_ms();
    CHECK_EQ_INT(h_gw_stop(&gc, 10000), 0);
    long long t = h_out_wait("gwstop-b", "event: granted", 3000);
    fprintf(stderr, "    gateway stopped (SIGTERM): B's stream granted after %lld ms\n",
            t < 0 ? -1 : h_now_ms() - t0);
    CHECK(t >= 0 && h_now_ms() - t0 < 2000);
    CHECK(h_out_wait("gwstop-a", "event: lost", 10) >= 0);
    CHECK(h_out_wait("gwstop-a", "shutting_down", 10) >= 0);
    h_reap(a);
    h_reap(b);
}

/* ---- watch streams ----------------------------------------------------------------- */

/* One acquire and its release of path through port; the grant's fence. */
static long long acquire_release(int port, const char *path) {
    struct h_resp r = h_http("POST", port, path, NULL, "{}", NULL);
    long long fence = r.status == 201 ? h_jint(&r, "fence") : -1;
    char token[64];
    snprintf(token, sizeof token, "%s", h_token(&r));
    h_resp_free(&r);
    r = h_http("DELETE", port, path, token, NULL, NULL);
    h_resp_free(&r);
    return fence;
}

/* A watch stream through B; 10 grants and releases through A: 21 state
 * events in order (free, then each fence and free).  Cut after the 7th,
 * 3 more pairs, resumed with its Last-Event-ID: exactly the 14 it missed
 * and the 6 new ones, in order, no gap. */
static void test_watch_resume(void) {
    char name[32], path[64], free_state[96];
    name_on_master("watched", 2, name, sizeof name);
    snprintf(path, sizeof path, "/v1/locks/%s", name);
    snprintf(free_state, sizeof free_state, "data: {\"name\":\"%s\",\"holders\":0}", name);
    pid_t a = sse("GET", gb.port, path, NULL, NULL, "watch-a");
    CHECK(h_out_wait("watch-a", free_state, 5000) >= 0);
    char want[21][96];
    long long fences[13];
    snprintf(want[0], sizeof want[0], "%s", free_state);
    for (int i = 0; i < 10; i++) {
        fences[i] = acquire_release(ga.port, path);
        snprintf(want[1 + 2 * i], sizeof want[0], "\"holders\":1,\"count\":1,\"fence\":%lld,",
                 fences[i]);
        snprintf(want[2 + 2 * i], sizeof want[0], "%s", free_state);
    }
    long long t0 = h_now_ms();
    CHECK_EQ_INT(h_out_wait_count("watch-a", "event: state", 21, 3000), 21);
    fprintf(stderr, "    watch stream on B: 21 states of changes through A after %lld ms\n",
            h_now_ms() - t0);
    CHECK(h_out_in_order("watch-a", want[0], sizeof want[0], 21));
    CHECK_EQ_INT(h_out_count("watch-a", "event: gap"), 0);
    char id[48];
    h_out_nth_id("watch-a", 7, id);
    h_reap(a);
    CHECK(id[0] != '\0');
    char again[20][96];
    int n = 0;
    for (int i = 7; i < 21; i++) snprintf(again[n++], sizeof again[0], "%s", want[i]);
    for (int i = 10; i < 13; i++) {
        fences[i] = acquire_release(ga.port, path);
        snprintf(again[n++], sizeof again[0], "\"fence\":%lld,", fences[i]);
        snprintf(again[n++], sizeof again[0], "%s", free_state);
    }
    pid_t b = sse("GET", gb.port, path, NULL, id, "watch-b");
    CHECK_EQ_INT(h_out_wait_count("watch-b", "event: state", n, 3000), n);
    CHECK(h_out_in_order("watch-b", again[0], sizeof again[0], n));
    CHECK_EQ_INT(h_out_count("watch-b", "event: gap"), 0);
    /* And a change made after the resume reaches it too. */
    long long fence = acquire_release(ga.port, path);
    char last[64];
    snprintf(last, sizeof last, "\"fence\":%lld,", fence);
    CHECK(h_out_wait("watch-b", last, 1000) >= 0);
    CHECK_EQ_INT(h_out_wait_count("watch-b", "event: state", n + 2, 1000), n + 2);
    h_reap(b);
}

/* ---- elections --------------------------------------------------------------------- */

/* An observer on B; candidate one campaigns through A, two through B.
 * One's curl killed: two elected within 1 s with a higher term; two
 * proclaims a new value through A; the observer saw one, a vacancy, two,
 * two's new value and the last vacancy, in order, each within a second. */
static void test_election_failover(void) {
    char name[32], path[64];
    name_on_master("svc", 1, name, sizeof name);
    snprintf(path, sizeof path, "/v1/elections/%s", name);
    pid_t obs = sse("GET", gb.port, path, NULL, NULL, "obs");
    CHECK(h_out_wait("obs", "event: vacant", 5000) >= 0);
    pid_t c1 = sse("POST", ga.port, path, "{\"value\":\"one\"}", NULL, "c1");
    CHECK(h_out_wait("c1", "event: elected", 5000) >= 0);
    CHECK(h_out_wait("obs", "\"value\":\"one\"", 1000) >= 0);
    pid_t c2 = sse("POST", gb.port, path, "{\"value\":\"two\"}", NULL, "c2");
    CHECK(h_out_wait("c2", "event: waiting", 5000) >= 0);
    long long term1 = event_int("c1", "event: elected", "term");
    CHECK(term1 > 0);
    long long t0 = h_now_ms();
    h_reap(c1);
    long long t = h_out_wait("c2", "event: elected", 5000);
    fprintf(stderr, "    leader's curl killed: the other elected after %lld ms\n",
            t < 0 ? -1 : h_now_ms() - t0);
    CHECK(t >= 0 && h_now_ms() - t0 < 1000);
    long long term2 = event_int("c2", "event: elected", "term");
    CHECK(term2 > term1);
    CHECK(h_out_wait("obs", "\"value\":\"two\"", 1000) >= 0);
    /* Proclaim through the other gateway: announced on the slot's shard
     * channel, so the observer sees it long before its 5 s heartbeat. */
    const char *buf = h_out_text("c2");
    const char *tok = strstr(buf, "\"token\":\"");
    char token[64] = "";
    if (tok) snprintf(token, sizeof token, "%.*s", (int)strcspn(tok + 9, "\""), tok + 9);
    struct h_resp r = h_http("PATCH", ga.port, path, token, "{\"value\":\"two-b\"}", NULL);
    CHECK_EQ_INT(r.status, 200);
    h_resp_free(&r);
    t = h_out_wait("obs", "\"value\":\"two-b\"", 2000);
    fprintf(stderr, "    proclaim through A: seen by the observer on B after %lld ms\n", t);
    CHECK(t >= 0 && t < 1000);
    char seen[256];
    h_out_leaders("obs", seen, sizeof seen);
    fprintf(stderr, "    observer saw: %s\n", seen);
    CHECK_EQ_STR(seen, "one,two,two-b");
    r = h_http("GET", ga.port, path, NULL, NULL, NULL);
    CHECK_EQ_INT(r.status, 200);
    CHECK(h_jint(&r, "term") == term2);
    h_resp_free(&r);
    h_reap(c2);
    /* Every change in order: a vacancy between two leaders is one too. */
    CHECK_EQ_INT(h_out_wait_count("obs", "event: vacant", 3, 2000), 3);
    char order[7][96] = {"event: vacant", "event: leader",     "\"value\":\"one\"",
                         "event: vacant", "\"value\":\"two\"", "\"value\":\"two-b\"",
                         "event: vacant"};
    CHECK(h_out_in_order("obs", order[0], sizeof order[0], 7));
    h_reap(obs);
}

int main(int argc, char **argv) {
    check_filter(argc > 1 ? argv[1] : NULL);
    snprintf(dir, sizeof dir, "/tmp/lockgate-cstreams-XXXXXX");
    if (!mkdtemp(dir)) return 2;
    h_out_dir(dir);
    long long t0 = h_now_ms();
    const char *flags = "--workers 2 --stream-heartbeat-ms 5000";
    if (h_cluster_start(&cl, 3, 0) < 0 || h_gw_up(&ga, &cl, flags) < 0 ||
        h_gw_up(&gb, &cl, flags) < 0 || h_wait_ready(ga.port, 10000) < 0 ||
        h_wait_ready(gb.port, 10000) < 0) {
        printf("not ok - cluster and gateways start\ncluster_streams: 0 passed, 1 failed\n");
        return 1;
    }
    RUN_SOME(test_kill_releases_across_masters);
    RUN_SOME(test_renewal_and_lost);
    RUN_SOME(test_gateway_killed);
    RUN_SOME(test_gateway_stopped);
    RUN_SOME(test_watch_resume);
    RUN_SOME(test_election_failover);
    CHECK_EQ_INT(h_gw_stop(&ga, 5000), 0); /* a clean stop (no leak under the sanitizers) */
    CHECK_EQ_INT(h_gw_stop(&gb, 5000), 0);
    h_redis_stop(&cl);
    fprintf(stderr, "    cluster streams suite: %lld ms\n", h_now_ms() - t0);
    char rm[128];
    snprintf(rm, sizeof rm, "rm -rf %s", dir);
    if (system(rm) != 0) fprintf(stderr, "    could not remove %s\n", dir);
    return check_summary("cluster_streams");
}
