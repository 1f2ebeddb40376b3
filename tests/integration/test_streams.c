/* test_streams.c -- issue 33: holds bound to their connection (POST with
 * Accept: text/event-stream, handlers/streams.c), held by plain curl as the
 * docs show it.  Each way a stream hold ends is checked: its curl killed
 * (released, the next waiter granted within 1 s), its host gone silent (a
 * relay that stops taking bytes: cut off by TCP_USER_TIMEOUT and released),
 * its gateway killed (released after ttl_ms, not before two thirds of it),
 * a forced release (`event: lost`).  Also: the stream's headers, waiting
 * events, heartbeats, and that renewal is one session per worker and ttl,
 * whatever the number of streams.
 *
 * Every wait is for an event (a line in curl's output, the lock's state),
 * never a fixed sleep.  `build/tests/test_streams NAME` runs the tests
 * whose names contain NAME. */
#include "tests/integration/harness.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static struct h_redis redis;
static struct h_gw gw;
static char dir[64];

/* Starts curl holding (or waiting for) NAME through port, its output in
 * out (a file under dir).  exec: the pid is curl's own, for kill -9. */
static pid_t hold(int port, const char *path, const char *body, const char *out, int headers) {
    char cmd[1024], file[128];
    snprintf(file, sizeof file, "%s/%s", dir, out);
    snprintf(cmd, sizeof cmd,
             "exec curl -sN %s -H 'Accept: text/event-stream' -X POST "
             "http://127.0.0.1:%d%s -d '%s' > %s 2>&1",
             headers ? "-i" : "", port, path, body, file);
    return h_spawn(cmd, NULL);
}

/* Milliseconds until nobody holds the lock (GET answers 404), or -1. */
static long long wait_free(int port, const char *name, int timeout_ms) {
    char path[128];
    snprintf(path, sizeof path, "/v1/locks/%s", name);
    long long t0 = h_now_ms();
    while (h_now_ms() - t0 < timeout_ms) {
        struct h_resp r = h_http("GET", port, path, NULL, NULL, NULL);
        long st = r.status;
        h_resp_free(&r);
        if (st == 404) return h_now_ms() - t0;
        h_sleep_ms(5);
    }
    return -1;
}

/* The curl idiom holds the lock; killed with -9, the hold is released at
 * once and the next waiter (a stream too) is granted within 1 s. */
static void test_kill_releases_within_1s(void) {
    pid_t a = hold(gw.port, "/v1/locks/kill", "{\"ttl_ms\":20000}", "kill-a", 1);
    CHECK(h_out_wait("kill-a", "event: granted", 5000) >= 0);
    CHECK(h_out_wait("kill-a", "X-Accel-Buffering: no", 10) >= 0);
    CHECK(h_out_wait("kill-a", "Content-Type: text/event-stream", 10) >= 0);
    pid_t b = hold(gw.port, "/v1/locks/kill", "{\"wait_ms\":30000}", "kill-b", 0);
    CHECK(h_out_wait("kill-b", "event: waiting", 5000) >= 0);
    CHECK(h_out_wait("kill-b", "\"state\":\"held\"", 10) >= 0);
    long long t0 = h_now_ms();
    kill(a, SIGKILL);
    long long waited = h_out_wait("kill-b", "event: granted", 5000);
    fprintf(stderr, "    kill -9 of the holder's curl: next stream granted after %lld ms\n",
            waited < 0 ? -1 : h_now_ms() - t0);
    CHECK(waited >= 0 && waited < 1000);
    waitpid(a, NULL, 0);
    h_reap(b);
    CHECK(wait_free(gw.port, "kill", 2000) >= 0);
}

/* Heartbeats (comment lines) come at --stream-heartbeat-ms while held. */
static void test_heartbeats(void) {
    pid_t a = hold(gw.port, "/v1/locks/beat", "{}", "beat", 0);
    CHECK(h_out_wait("beat", "event: granted", 5000) >= 0);
    /* 5 comment lines at 100 ms: within 2 s, well before the 60 s of idle
     * after which libmicrohttpd would close the connection. */
    long long t0 = h_now_ms();
    while (h_out_count("beat", "\n:\n") < 5 && h_now_ms() - t0 < 2000) h_sleep_ms(10);
    CHECK(h_out_count("beat", "\n:\n") >= 5);
    h_reap(a);
    CHECK(wait_free(gw.port, "beat", 2000) >= 0);
}

/* An HTTP/1.0 client gets the stream unchunked, ended by the close, read
 * through the response's own block (http.c, stream_queue: an HTTP/1.1
 * stream's response has a 1-byte block it never uses): the grant, then
 * heartbeats, as an HTTP/1.1 client does. */
static void test_http10_stream(void) {
    char cmd[1024], file[128];
    snprintf(file, sizeof file, "%s/h10", dir);
    snprintf(cmd, sizeof cmd,
             "exec curl -sN -i --http1.0 -H 'Accept: text/event-stream' -X POST "
             "http://127.0.0.1:%d/v1/locks/h10 -d '{}' > %s 2>&1",
             gw.port, file);
    pid_t a = h_spawn(cmd, NULL);
    CHECK(h_out_wait("h10", "event: granted", 5000) >= 0);
    CHECK(h_out_wait("h10", "Content-Type: text/event-stream", 10) >= 0);
    CHECK(h_out_wait("h10", "\"token\":", 10) >= 0);
    long long t0 = h_now_ms();
    while (h_out_count("h10", "\n:\n") < 3 && h_now_ms() - t0 < 2000) h_sleep_ms(10);
    CHECK(h_out_count("h10", "\n:\n") >= 3);
    CHECK_EQ_INT((int)h_out_count("h10", "Transfer-Encoding"), 0);
    h_reap(a);
    CHECK(wait_free(gw.port, "h10", 2000) >= 0);
}

/* An operator's forced release: the holder's stream says `event: lost`
 * (with the reason) and ends, so curl exits. */
static void test_forced_release_lost(void) {
    pid_t a = hold(gw.port, "/v1/locks/forced", "{}", "forced", 0);
    CHECK(h_out_wait("forced", "event: granted", 5000) >= 0);
    struct h_resp r = h_http("DELETE", gw.port, "/v1/locks/forced?force=true", NULL, NULL, NULL);
    CHECK_EQ_INT(r.status, 200);
    h_resp_free(&r);
    long long t = h_out_wait("forced", "event: lost", 2000);
    fprintf(stderr, "    forced release: event: lost after %lld ms\n", t);
    CHECK(t >= 0 && t < 1000);
    CHECK(h_out_wait("forced", "\"reason\":\"released", 10) >= 0);
    int status = 0;
    long long t0 = h_now_ms();
    while (waitpid(a, &status, WNOHANG) == 0 && h_now_ms() - t0 < 2000) h_sleep_ms(5);
    CHECK(h_now_ms() - t0 < 2000); /* the stream ended: curl left by itself */
    kill(a, SIGKILL);
    waitpid(a, NULL, WNOHANG);
}

/* Opens n stream holds through port on "<prefix>-<i>" (ttl_ms 600: their
 * session renews every 200 ms), their pids in p, and waits until each is
 * granted. */
static void hold_many(int port, const char *prefix, int n, pid_t *p) {
    char out[32], path[64];
    for (int i = 0; i < n; i++) {
        snprintf(out, sizeof out, "%s-%d", prefix, i);
        snprintf(path, sizeof path, "/v1/locks/%s-%d", prefix, i);
        p[i] = hold(port, path, "{\"ttl_ms\":600}", out, 0);
    }
    for (int i = 0; i < n; i++) {
        snprintf(out, sizeof out, "%s-%d", prefix, i);
        CHECK(h_out_wait(out, "event: granted", 10000) >= 0);
    }
}

/* 20 stream holds of one ttl live on at most one session per worker, and
 * the holds outlive several ttls: the session's renewal keeps each hold
 * (outside Redis Cluster by its liveness field, in Redis Cluster by the
 * end it pushes into each hold's hash; before layout 2 pushed it, they
 * ended with the first ttl: 404). */
static void test_one_session_per_ttl(void) {
    pid_t p[20];
    hold_many(gw.port, "many", 20, p);
    const char *n = h_redis_cli(&redis, "eval \"return #redis.call('keys', "
                                        "'lockgate:session:*')\" 0");
    CHECK(n && atoi(n) >= 1 && atoi(n) <= 2); /* two workers */
    /* Three ttls later every hold is still there (the sessions renewed). */
    long long t0 = h_now_ms();
    while (h_now_ms() - t0 < 1800) {
        struct h_resp r = h_http("GET", gw.port, "/v1/locks/many-7", NULL, NULL, NULL);
        CHECK_EQ_INT(r.status, 200);
        h_resp_free(&r);
        h_sleep_ms(100);
    }
    for (int i = 0; i < 20; i++) h_reap(p[i]);
    CHECK(wait_free(gw.port, "many-19", 2000) >= 0);
    /* The last stream out ends its session. */
    t0 = h_now_ms();
    while (h_now_ms() - t0 < 2000) {
        n = h_redis_cli(&redis, "eval \"return #redis.call('keys', 'lockgate:session:*')\" 0");
        if (n && atoi(n) == 0) break;
        h_sleep_ms(10);
    }
    CHECK(n && atoi(n) == 0);
}

/* The one session key of a one-worker gateway's streams (its name in key,
 * cap bytes), once the sessions of earlier cases have ended; "" when
 * there is not exactly one within 3 s. */
static void session_of(char *key, size_t cap) {
    key[0] = '\0';
    for (long long t0 = h_now_ms(); h_now_ms() - t0 < 3000; h_sleep_ms(10)) {
        const char *n = h_redis_cli(&redis, "eval \"return #redis.call('keys', "
                                            "'lockgate:session:*')\" 0");
        if (!n || atoi(n) != 1) continue;
        const char *k =
            h_redis_cli(&redis, "eval \"return redis.call('keys', 'lockgate:session:*')[1]\" 0");
        if (k && strchr(k, '{')) snprintf(key, cap, "%s", k);
        return;
    }
}

/* Waits until the session's liveness field has moved n times (n renewals);
 * 1 when it has. */
static int renewals_seen(const char *session_key, int n) {
    char cmd[200];
    const char *open = strchr(session_key, '{');
    if (!open) return 0;
    snprintf(cmd, sizeof cmd, "hget lockgate:gw %.*s", (int)strcspn(open + 1, "}"), open + 1);
    long long end = atoll(h_redis_cli(&redis, cmd));
    for (long long t0 = h_now_ms(); n > 0 && h_now_ms() - t0 < 10000; h_sleep_ms(10)) {
        long long e = atoll(h_redis_cli(&redis, cmd));
        if (e != end) n--, end = e;
    }
    return n == 0;
}

/* Redis's count of HSET calls so far (scripts' included). */
static long long hset_calls(void) {
    const char *st = h_redis_cli(&redis, "INFO commandstats");
    const char *p = st ? strstr(st, "cmdstat_hset:calls=") : NULL;
    return p ? atoll(p + 19) : -1;
}

/* Renewing the streams' session is one write, however many holds it
 * carries (#33: renewal O(1) per interval, lua/_holders.lua "sessions"):
 * over three renewals of one session Redis runs fewer HSETs than there
 * are holds, and no hold's record changes.  Before, each renewal pushed
 * the new end into every hold's hash. */
static void test_renewal_touches_no_hold(void) {
    enum { N = 60 };
    pid_t p[N];
    hold_many(gw.port, "o1", N, p);
    char rec[512];
    snprintf(rec, sizeof rec, "%s", h_redis_cli(&redis, "hget lockgate:lock:{o1-7} x"));
    /* One of the two workers' sessions. */
    const char *key =
        h_redis_cli(&redis, "eval \"return redis.call('keys', 'lockgate:session:*')[1]\" 0");
    char session[160];
    snprintf(session, sizeof session, "%s", key ? key : "");
    long long hsets = hset_calls();
    CHECK(renewals_seen(session, 3));
    hsets = hset_calls() - hsets;
    fprintf(stderr, "    %d holds, 3 renewals of one of the two sessions: %lld HSET in Redis\n", N,
            hsets);
    CHECK(hsets >= 0 && hsets < N);
    CHECK_EQ_STR(h_redis_cli(&redis, "hget lockgate:lock:{o1-7} x"), rec);
    /* Still held: the renewals kept every hold. */
    struct h_resp r = h_http("GET", gw.port, "/v1/locks/o1-59", NULL, NULL, NULL);
    CHECK_EQ_INT(r.status, 200);
    h_resp_free(&r);
    for (int i = 0; i < N; i++) h_reap(p[i]);
    CHECK(wait_free(gw.port, "o1-0", 2000) >= 0);
}

/* A live hold's hash lasts an hour past its session's end; the renewal
 * that finds the session's horizon due pushes it (session_slot.lua p).
 * Here the horizon is made due by hand, and the hash's expiry brought
 * near: the next renewal sets it an hour ahead again. */
static void test_horizon_pushed(void) {
    struct h_gw g = {0};
    if (h_gw_up(&g, &redis, "--workers 1") < 0) {
        CHECK(0);
        return;
    }
    pid_t a = hold(g.port, "/v1/locks/horizon", "{\"ttl_ms\":600}", "horizon", 0);
    CHECK(h_out_wait("horizon", "event: granted", 5000) >= 0);
    char key[160], cmd[256];
    session_of(key, sizeof key);
    CHECK(key[0] != '\0');
    long long pttl = atoll(h_redis_cli(&redis, "pttl lockgate:lock:{horizon}"));
    CHECK(pttl > 3600000);
    h_redis_cli(&redis, "pexpire lockgate:lock:{horizon} 5000");
    snprintf(cmd, sizeof cmd, "hset %s h 0", key);
    h_redis_cli(&redis, cmd);
    CHECK(renewals_seen(key, 2));
    pttl = atoll(h_redis_cli(&redis, "pttl lockgate:lock:{horizon}"));
    CHECK(pttl > 3600000);
    snprintf(cmd, sizeof cmd, "hget %s h", key);
    CHECK(atoll(h_redis_cli(&redis, cmd)) > 0);
    h_reap(a);
    CHECK(wait_free(g.port, "horizon", 2000) >= 0);
    h_gw_stop(&g, 5000);
}

/* The liveness hash deleted under a live stream hold (an operator's DEL
 * <prefix>gw, an eviction): the hold's lease is gone, and another client
 * may take the name at once.  The stream must say so: its session's next
 * renewal finds its liveness field missing, and the session is lost
 * (`event: lost`) rather than renewed, which would have brought back the
 * holds nobody looked at while telling none of them. */
static void test_liveness_hash_deleted(void) {
    struct h_gw g = {0};
    if (h_gw_up(&g, &redis, "--workers 1") < 0) {
        CHECK(0);
        return;
    }
    pid_t a = hold(g.port, "/v1/locks/gwdel-a", "{\"ttl_ms\":900}", "gwdel-a", 0);
    pid_t b = hold(g.port, "/v1/locks/gwdel-b", "{\"ttl_ms\":900}", "gwdel-b", 0);
    CHECK(h_out_wait("gwdel-a", "event: granted", 5000) >= 0);
    CHECK(h_out_wait("gwdel-b", "event: granted", 5000) >= 0);
    h_redis_cli(&redis, "del lockgate:gw");
    /* Another client finds gwdel-a free (its lease, the field, is gone). */
    struct h_resp r = h_http("POST", g.port, "/v1/locks/gwdel-a", NULL, "{\"ttl_ms\":30000}", NULL);
    CHECK_EQ_INT(r.status, 201);
    char tok[160];
    snprintf(tok, sizeof tok, "%s", h_token(&r));
    h_resp_free(&r);
    long long ta = h_out_wait("gwdel-a", "event: lost", 3000);
    long long tb = h_out_wait("gwdel-b", "event: lost", 3000);
    fprintf(stderr, "    liveness hash deleted: streams lost after %lld and %lld ms\n", ta, tb);
    CHECK(ta >= 0 && tb >= 0);
    /* Nobody else holds gwdel-b: it did not come back with a renewal. */
    CHECK(wait_free(g.port, "gwdel-b", 2000) >= 0);
    r = h_http("DELETE", g.port, "/v1/locks/gwdel-a", tok, NULL, NULL);
    CHECK_EQ_INT(r.status, 200);
    h_resp_free(&r);
    h_reap(a);
    h_reap(b);
    h_gw_stop(&g, 5000);
}

/* The horizon push fails (here: one hold's key is not a hash, so
 * session_slot.lua errs on the call that carries both holds) after the
 * renewal moved the session's horizon: the next renewals are not due, so
 * without a push owed the other hold's hash keeps its old expiry and
 * vanishes under a live session (the name free, nobody told).  A failed
 * push is owed: the next renewal lists the holds again and pushes. */
static void test_horizon_push_failed(void) {
    struct h_gw g = {0};
    if (h_gw_up(&g, &redis, "--workers 1") < 0) {
        CHECK(0);
        return;
    }
    pid_t a = hold(g.port, "/v1/locks/hzf-a", "{\"ttl_ms\":600}", "hzf-a", 0);
    pid_t b = hold(g.port, "/v1/locks/hzf-b", "{\"ttl_ms\":600}", "hzf-b", 0);
    CHECK(h_out_wait("hzf-a", "event: granted", 5000) >= 0);
    CHECK(h_out_wait("hzf-b", "event: granted", 5000) >= 0);
    char key[160], cmd[256];
    session_of(key, sizeof key);
    CHECK(key[0] != '\0');
    h_redis_cli(&redis, "pexpire lockgate:lock:{hzf-b} 3000");
    h_redis_cli(&redis, "rename lockgate:lock:{hzf-a} lockgate:hzf-a-aside");
    h_redis_cli(&redis, "set lockgate:lock:{hzf-a} not-a-hash");
    int failed = h_log_count(&g, "trying again");
    snprintf(cmd, sizeof cmd, "hset %s h 0", key);
    h_redis_cli(&redis, cmd);
    long long t0 = h_now_ms();
    while (h_log_count(&g, "trying again") == failed && h_now_ms() - t0 < 3000) h_sleep_ms(5);
    CHECK(h_log_count(&g, "trying again") > failed);
    h_redis_cli(&redis, "del lockgate:lock:{hzf-a}");
    h_redis_cli(&redis, "rename lockgate:hzf-a-aside lockgate:lock:{hzf-a}");
    long long pttl = 0;
    for (t0 = h_now_ms(); h_now_ms() - t0 < 2500; h_sleep_ms(10)) {
        pttl = atoll(h_redis_cli(&redis, "pttl lockgate:lock:{hzf-b}"));
        if (pttl > 3600000) break;
    }
    fprintf(stderr, "    horizon push failed once: hzf-b's hash then expires in %lld ms\n", pttl);
    CHECK(pttl > 3600000);
    h_reap(a);
    h_reap(b);
    h_gw_stop(&g, 5000);
}

/* Released stream holds stay listed in the session until a push finds
 * them gone; a quiet renewal pushes once they outnumber twice the holds
 * the gateway carries (plus 16), so the list stays bounded. */
static void test_released_holds_leave_session(void) {
    struct h_gw g = {0};
    if (h_gw_up(&g, &redis, "--workers 1") < 0) {
        CHECK(0);
        return;
    }
    enum { N = 40, KEEP = 5 };
    pid_t p[N];
    hold_many(g.port, "pile", N, p);
    char key[160], cmd[256];
    session_of(key, sizeof key);
    snprintf(cmd, sizeof cmd, "hlen %s", key);
    CHECK(atoll(h_redis_cli(&redis, cmd)) >= N);
    for (int i = KEEP; i < N; i++) h_reap(p[i]);
    for (int i = KEEP; i < N; i++) {
        char name[32];
        snprintf(name, sizeof name, "pile-%d", i);
        CHECK(wait_free(g.port, name, 2000) >= 0);
    }
    CHECK(renewals_seen(key, 3));
    long long fields = atoll(h_redis_cli(&redis, cmd));
    fprintf(stderr, "    %d holds, %d released: the session lists %lld fields after 3 renewals\n",
            N, N - KEEP, fields);
    /* The bound quiet renewals keep: a push once the released outnumber
     * twice the holds carried plus 16 (a renewal may come while the
     * releases run: those still held at its push stay listed, fewer than
     * that bound, until the horizon's push). */
    CHECK(fields > 0 && fields <= 6 + 2 * KEEP + 16);
    for (int i = 0; i < KEEP; i++) h_reap(p[i]);
    h_gw_stop(&g, 5000);
}

/* The client's host goes silent: a relay that stops forwarding, with a
 * small receive buffer, so that the gateway's heartbeats soon meet a
 * closed window; TCP_USER_TIMEOUT then cuts the connection and the hold
 * is released.  (On loopback the relay's kernel acknowledges until its
 * buffer is full, about 1 KiB of heartbeats; a host really gone
 * acknowledges nothing, and the bound is heartbeat + user timeout.) */
static void test_silent_host(void) {
    struct h_gw g = {0};
    if (h_gw_up(&g, &redis, "--stream-heartbeat-ms 20 --stream-user-timeout-ms 300") < 0) {
        CHECK(0);
        return;
    }
    struct h_relay relay;
    CHECK_EQ_INT(h_relay_start(&relay, g.port), 0);
    relay.small_rcvbuf = 1;
    pid_t a = hold(relay.port, "/v1/locks/silent", "{\"ttl_ms\":60000}", "silent", 0);
    CHECK(h_out_wait("silent", "event: granted", 5000) >= 0);
    h_relay_hold(&relay);
    long long t = wait_free(g.port, "silent", 15000);
    fprintf(stderr, "    silent host (relay held): released after %lld ms\n", t);
    CHECK(t >= 0);
    h_reap(a);
    h_relay_stop(&relay);
    h_gw_stop(&g, 5000);
}

/* The gateway dies: nobody renews its session, and the hold ends with it,
 * ttl_ms after the last renewal (between two thirds of ttl_ms and ttl_ms
 * after the kill): another gateway's waiter gets it then. */
static void test_gateway_killed(void) {
    struct h_gw g = {0}, g2 = {0};
    if (h_gw_up(&g, &redis, NULL) < 0 || h_gw_up(&g2, &redis, NULL) < 0) {
        CHECK(0);
        return;
    }
    pid_t a = hold(g.port, "/v1/locks/gwdead", "{\"ttl_ms\":1500}", "gwdead", 0);
    CHECK(h_out_wait("gwdead", "event: granted", 5000) >= 0);
    long long t0 = h_now_ms();
    h_gw_kill(&g);
    struct h_resp r = h_http("POST", g2.port, "/v1/locks/gwdead", NULL, "{\"wait_ms\":5000}", NULL);
    long long t = h_now_ms() - t0;
    fprintf(stderr, "    gateway killed: ttl 1500 ms, released after %lld ms\n", t);
    CHECK_EQ_INT(r.status, 201);
    CHECK(t >= 900 && t <= 1900);
    h_resp_free(&r);
    h_reap(a);
    h_gw_stop(&g2, 5000);
}

/* The gateway dies under a stream hold with a lock-delay: the hold ends
 * with its session, and its lock-delay still runs after that end (the
 * session's liveness field outlives it, lua/liveness.lua): another
 * gateway grants no sooner than two thirds of ttl_ms plus the delay
 * after the kill. */
static void test_gateway_killed_lock_delay(void) {
    struct h_gw g = {0}, g2 = {0};
    if (h_gw_up(&g, &redis, NULL) < 0 || h_gw_up(&g2, &redis, NULL) < 0) {
        CHECK(0);
        return;
    }
    pid_t a =
        hold(g.port, "/v1/locks/gwdelay", "{\"ttl_ms\":1500,\"lock_delay_ms\":1500}", "gwdelay", 0);
    CHECK(h_out_wait("gwdelay", "event: granted", 5000) >= 0);
    long long t0 = h_now_ms();
    h_gw_kill(&g);
    struct h_resp r =
        h_http("POST", g2.port, "/v1/locks/gwdelay", NULL, "{\"wait_ms\":8000}", NULL);
    long long t = h_now_ms() - t0;
    fprintf(stderr, "    gateway killed: ttl 1500 ms, lock-delay 1500 ms, granted after %lld ms\n",
            t);
    CHECK_EQ_INT(r.status, 201);
    CHECK(t >= 900 + 1500 && t <= 1900 + 1500 + 1000);
    h_resp_free(&r);
    h_reap(a);
    h_gw_stop(&g2, 5000);
}

/* A live hold's session field outlives the session's end by LIVE_KEEP_MS
 * (lua/liveness.lua), so a hold first judged after a surviving gateway's
 * liveness beat has run past that end still brings its lock-delay: the
 * beat must not have pruned the field.  Here nobody looks at the name
 * until the other gateway has beaten once after the end. */
static void test_lock_delay_outlives_beat(void) {
    struct h_gw g = {0}, g2 = {0};
    if (h_gw_up(&g, &redis, "--workers 1") < 0 ||
        h_gw_up(&g2, &redis, "--workers 1 --liveness-ttl-ms 300") < 0) {
        CHECK(0);
        return;
    }
    pid_t a = hold(g.port, "/v1/locks/beatdelay", "{\"ttl_ms\":600,\"lock_delay_ms\":20000}",
                   "beatdelay", 0);
    CHECK(h_out_wait("beatdelay", "event: granted", 5000) >= 0);
    char key[160], field[200];
    session_of(key, sizeof key);
    const char *open = strchr(key, '{');
    CHECK(open != NULL);
    if (!open) goto out;
    snprintf(field, sizeof field, "hget lockgate:gw %.*s", (int)strcspn(open + 1, "}"), open + 1);
    h_gw_kill(&g);
    /* The session's end passes, then g2 beats (its field moves) twice. */
    long long end = atoll(h_redis_cli(&redis, field)), now = 0;
    for (long long t0 = h_now_ms(); h_now_ms() - t0 < 5000 && now <= end; h_sleep_ms(20)) {
        const char *t = h_redis_cli(&redis, "eval \"local t = redis.call('TIME') "
                                            "return t[1] * 1000 + math.floor(t[2] / 1000)\" 0");
        now = t ? atoll(t) : 0;
    }
    CHECK(now > end);
    const char *beat = "eval \"local f = redis.call('HGETALL', KEYS[1]) local s = '' "
                       "for i = 1, #f, 2 do if #f[i] == 12 then s = s .. f[i + 1] end end "
                       "return s\" 1 lockgate:gw";
    char last[256];
    snprintf(last, sizeof last, "%s", h_redis_cli(&redis, beat));
    int beats = 0;
    for (long long t0 = h_now_ms(); beats < 2 && h_now_ms() - t0 < 5000; h_sleep_ms(10)) {
        const char *b = h_redis_cli(&redis, beat);
        if (b && strcmp(b, last) != 0) beats++, snprintf(last, sizeof last, "%s", b);
    }
    CHECK_EQ_INT(beats, 2);
    CHECK(atoll(h_redis_cli(&redis, field)) == end); /* kept past its end */
    struct h_resp r = h_http("POST", g2.port, "/v1/locks/beatdelay", NULL, "{}", NULL);
    CHECK_EQ_INT(r.status, 409);
    h_resp_free(&r);
out:
    h_reap(a);
    h_gw_stop(&g2, 5000);
    h_redis_cli(&redis, "del lockgate:lock:{beatdelay}");
}

/* A semaphore permit as a stream; an error before anything was streamed
 * is an ordinary HTTP answer (here 400), and a wait that runs out after
 * the stream opened ends it with `event: error`. */
static void test_semaphore_and_errors(void) {
    pid_t a = hold(gw.port, "/v1/semaphores/pool", "{\"limit\":1}", "sem-a", 0);
    CHECK(h_out_wait("sem-a", "event: granted", 5000) >= 0);
    CHECK(h_out_wait("sem-a", "\"limit\":1", 10) >= 0);
    pid_t b = hold(gw.port, "/v1/semaphores/pool", "{\"limit\":1,\"wait_ms\":300}", "sem-b", 0);
    CHECK(h_out_wait("sem-b", "event: waiting", 5000) >= 0);
    CHECK(h_out_wait("sem-b", "event: error", 5000) >= 0);
    CHECK(h_out_wait("sem-b", "lock_busy", 10) >= 0);
    h_reap(a);
    h_reap(b);
    struct h_resp r = h_http("POST", gw.port, "/v1/locks/bad", NULL, "{\"ttl_ms\":-5}",
                             "Accept: text/event-stream");
    CHECK_EQ_INT(r.status, 400);
    h_resp_free(&r);
}

/* The hold lost under the stream: Redis loses its data (FLUSHALL: the
 * session's key is gone, the next renewal says so: `event: lost`,
 * session_lost), and Redis gone for longer than the lease (no renewal
 * reaches it before the end: renewal_failed).  A Redis of its own.  The
 * FLUSHALL holds grants off for --max-lease-ms (server/lossguard.h; the
 * next grant's script refuses at once): 1 s here, waited out before the
 * second hold. */
static void test_redis_loss_lost(void) {
    struct h_redis r2;
    struct h_gw g = {0};
    if (h_redis_start(&r2, 0, NULL) < 0 || h_gw_up(&g, &r2, "--max-lease-ms 1000") < 0) {
        CHECK(0);
        return;
    }
    pid_t a = hold(g.port, "/v1/locks/flushed", "{\"ttl_ms\":600}", "flushed", 0);
    CHECK(h_out_wait("flushed", "event: granted", 5000) >= 0);
    CHECK(h_redis_cli(&r2, "FLUSHALL") != NULL);
    long long t = h_out_wait("flushed", "event: lost", 3000);
    fprintf(stderr, "    FLUSHALL: event: lost after %lld ms (ttl 600 ms)\n", t);
    CHECK(t >= 0);
    CHECK(h_out_wait("flushed", "session_lost", 10) >= 0);
    h_reap(a);
    /* The loss noticed (by the periodic marker read, within a second),
     * then its hold-off ended. */
    for (long long end = h_now_ms() + 3000;
         h_log_count(&g, "lost its data (its marker") < 1 && h_now_ms() < end;)
        h_sleep_ms(10);
    CHECK_EQ_INT(h_log_count(&g, "lost its data (its marker"), 1);
    CHECK_EQ_INT(h_wait_ready(g.port, 5000), 0);
    a = hold(g.port, "/v1/locks/cut", "{\"ttl_ms\":600}", "cut", 0);
    CHECK(h_out_wait("cut", "event: granted", 5000) >= 0);
    h_redis_kill(&r2);
    t = h_out_wait("cut", "event: lost", 5000);
    fprintf(stderr, "    Redis killed: event: lost after %lld ms (ttl 600 ms)\n", t);
    CHECK(t >= 0);
    CHECK(h_out_wait("cut", "renewal_failed", 10) >= 0);
    h_reap(a);
    h_gw_stop(&g, 5000);
    h_redis_stop(&r2);
}

/* Quorum mode (three masters): the stream's session lives on a quorum and
 * its renewal reaches the hold on every master (a hold of ttl 600 ms still
 * stands three ttls later), kill -9 of its curl releases (the next stream
 * is granted within 1 s), and a forced release is `event: lost`. */
static void test_quorum_mode(void) {
    struct h_redis m[3];
    struct h_gw g = {0};
    char flags[256];
    size_t len = 0;
    for (int i = 0; i < 3; i++) {
        if (h_redis_start(&m[i], 0, NULL) < 0) {
            CHECK(0);
            return;
        }
        if (i)
            len += (size_t)snprintf(flags + len, sizeof flags - len,
                                    "--redis redis://127.0.0.1:%d ", m[i].port);
    }
    if (h_gw_up(&g, &m[0], flags) < 0) {
        CHECK(0);
        return;
    }
    pid_t a = hold(g.port, "/v1/locks/q", "{\"ttl_ms\":600}", "q-a", 0);
    CHECK(h_out_wait("q-a", "event: granted", 5000) >= 0);
    pid_t b = hold(g.port, "/v1/locks/q", "{\"wait_ms\":10000}", "q-b", 0);
    CHECK(h_out_wait("q-b", "event: waiting", 5000) >= 0);
    for (long long t1 = h_now_ms(); h_now_ms() - t1 < 1800; h_sleep_ms(100)) {
        struct h_resp r = h_http("GET", g.port, "/v1/locks/q", NULL, NULL, NULL);
        CHECK_EQ_INT(r.status, 200);
        h_resp_free(&r);
    }
    CHECK(h_out_wait("q-b", "event: granted", 10) < 0);
    long long t0 = h_now_ms();
    kill(a, SIGKILL);
    long long t = h_out_wait("q-b", "event: granted", 5000);
    fprintf(stderr, "    quorum mode, kill -9: next stream granted after %lld ms\n",
            t < 0 ? -1 : h_now_ms() - t0);
    CHECK(t >= 0 && t < 1000);
    waitpid(a, NULL, 0);
    struct h_resp r = h_http("DELETE", g.port, "/v1/locks/q?force=true", NULL, NULL, NULL);
    CHECK_EQ_INT(r.status, 200);
    h_resp_free(&r);
    CHECK(h_out_wait("q-b", "event: lost", 2000) >= 0);
    h_reap(b);
    h_gw_stop(&g, 5000);
    for (int i = 0; i < 3; i++) h_redis_stop(&m[i]);
}

static pid_t watch(const char *path, const char *last_id, const char *out) {
    char cmd[512], hdr[96] = "";
    if (last_id) snprintf(hdr, sizeof hdr, "-H 'Last-Event-ID: %s'", last_id);
    snprintf(cmd, sizeof cmd,
             "exec curl -sN -H 'Accept: text/event-stream' %s http://127.0.0.1:%d%s > %s/%s 2>&1",
             hdr, gw.port, path, dir, out);
    return h_spawn(cmd, NULL);
}

/* One acquire and its release on path; the grant's fence. */
static long long acquire_release(const char *path) {
    struct h_resp r = h_http("POST", gw.port, path, NULL, "{}", NULL);
    long long fence = r.status == 201 ? h_jint(&r, "fence") : -1;
    char token[64];
    snprintf(token, sizeof token, "%s", h_token(&r));
    h_resp_free(&r);
    r = h_http("DELETE", gw.port, path, token, NULL, NULL);
    h_resp_free(&r);
    return fence;
}

/* GET with Accept: text/event-stream: a state event for every change, in
 * order, however close together: 20 acquire/release pairs in a tight loop
 * give 40 events after the first state (each grant's fence, then free).
 * A stream cut after the 10th change and resumed with Last-Event-ID gets
 * exactly the changes it missed, in order, and nothing twice. */
static void test_watch_every_change(void) {
    pid_t a = watch("/v1/locks/rapid", NULL, "rapid-a");
    CHECK(h_out_wait("rapid-a", "event: state\ndata: {\"name\":\"rapid\",\"holders\":0}", 5000) >=
          0);
    char want[41][96];
    long long fences[30];
    snprintf(want[0], sizeof want[0], "data: {\"name\":\"rapid\",\"holders\":0}");
    for (int i = 0; i < 20; i++) {
        fences[i] = acquire_release("/v1/locks/rapid");
        snprintf(want[1 + 2 * i], sizeof want[0], "\"holders\":1,\"count\":1,\"fence\":%lld,",
                 fences[i]);
        snprintf(want[2 + 2 * i], sizeof want[0], "data: {\"name\":\"rapid\",\"holders\":0}");
    }
    long long t0 = h_now_ms();
    while (h_out_count("rapid-a", "event: state") < 41 && h_now_ms() - t0 < 3000) h_sleep_ms(5);
    CHECK_EQ_INT(h_out_count("rapid-a", "event: state"), 41);
    CHECK(h_out_in_order("rapid-a", want[0], sizeof want[0], 41));
    CHECK_EQ_INT(h_out_count("rapid-a", "event: gap"), 0);
    /* Cut after the 10th change (the 11th event), 5 more pairs, resumed. */
    char id[48];
    h_out_nth_id("rapid-a", 11, id);
    h_reap(a);
    CHECK(id[0] != '\0');
    pid_t b = watch("/v1/locks/rapid", id, "rapid-b");
    char again[40][96];
    int n = 0;
    for (int i = 5; i < 20; i++) {
        snprintf(again[n++], sizeof again[0], "\"fence\":%lld,", fences[i]);
        snprintf(again[n++], sizeof again[0], "data: {\"name\":\"rapid\",\"holders\":0}");
    }
    CHECK(h_out_wait("rapid-b", again[n - 2], 3000) >= 0);
    for (int i = 20; i < 25; i++) {
        fences[i] = acquire_release("/v1/locks/rapid");
        snprintf(again[n++], sizeof again[0], "\"fence\":%lld,", fences[i]);
        snprintf(again[n++], sizeof again[0], "data: {\"name\":\"rapid\",\"holders\":0}");
    }
    t0 = h_now_ms();
    while (h_out_count("rapid-b", "event: state") < n && h_now_ms() - t0 < 3000) h_sleep_ms(5);
    CHECK_EQ_INT(h_out_count("rapid-b", "event: state"), n); /* 30 missed + 10 new */
    CHECK(h_out_in_order("rapid-b", again[0], sizeof again[0], n));
    CHECK_EQ_INT(h_out_count("rapid-b", "event: gap"), 0);
    h_reap(b);
}

/* Resumed with Last-Event-ID: nothing repeated when it is the last change,
 * the next change when it comes; an id the log no longer holds: a gap
 * event, then the current state. */
static void test_watch_stream(void) {
    pid_t a = watch("/v1/locks/watched", NULL, "watch-a");
    CHECK(h_out_wait("watch-a", "event: state\ndata: {\"name\":\"watched\",\"holders\":0}", 5000) >=
          0);
    struct h_resp r = h_http("POST", gw.port, "/v1/locks/watched", NULL, "{}", NULL);
    CHECK_EQ_INT(r.status, 201);
    long long fence = h_jint(&r, "fence");
    char token[64], want[64], id[48];
    snprintf(token, sizeof token, "%s", h_token(&r));
    h_resp_free(&r);
    snprintf(want, sizeof want, "\"fence\":%lld,", fence);
    CHECK(h_out_wait("watch-a", want, 2000) >= 0);
    r = h_http("DELETE", gw.port, "/v1/locks/watched", token, NULL, NULL);
    h_resp_free(&r);
    long long t0 = h_now_ms();
    while (h_out_count("watch-a", "event: state") < 3 && h_now_ms() - t0 < 2000) h_sleep_ms(5);
    CHECK_EQ_INT(h_out_count("watch-a", "event: state"), 3); /* free, held, free */
    h_out_nth_id("watch-a", 3, id);
    h_reap(a);
    /* Resumed at the last id: the next event is the next change. */
    pid_t b = watch("/v1/locks/watched", id, "watch-b");
    /* Two heartbeats: the stream has read the log at least twice, and
     * sent nothing (the id was the last). */
    long long t1 = h_now_ms();
    while (h_out_count("watch-b", ":\n") < 2 && h_now_ms() - t1 < 3000) h_sleep_ms(5);
    CHECK(h_out_count("watch-b", ":\n") >= 2);
    CHECK_EQ_INT(h_out_count("watch-b", "event:"), 0);
    r = h_http("POST", gw.port, "/v1/locks/watched", NULL, "{}", NULL);
    fence = h_jint(&r, "fence");
    h_resp_free(&r);
    snprintf(want, sizeof want, "\"fence\":%lld,", fence);
    CHECK(h_out_wait("watch-b", want, 2000) >= 0);
    CHECK_EQ_INT(h_out_count("watch-b", "event: state"), 1);
    CHECK_EQ_INT(h_out_count("watch-b", "event: gap"), 0);
    h_reap(b);
    /* Resumed at an id that is gone: a gap, then the current state. */
    pid_t c = watch("/v1/locks/watched", "12345-0", "watch-c");
    CHECK(h_out_wait("watch-c", want, 2000) >= 0);
    CHECK(h_out_wait("watch-c", "event: gap", 10) >= 0);
    h_reap(c);
    /* Not an id: refused. */
    pid_t d = watch("/v1/locks/watched", "x1", "watch-d");
    CHECK(h_out_wait("watch-d", "\"status\":400", 2000) >= 0);
    h_reap(d);
}

/* A lease's end is a change too: the stream's timer finds it and logs it. */
static void test_watch_expiry(void) {
    pid_t a = watch("/v1/locks/expiring", NULL, "exp-a");
    CHECK(h_out_wait("exp-a", "\"holders\":0}", 5000) >= 0);
    struct h_resp r = h_http("POST", gw.port, "/v1/locks/expiring", NULL, "{\"ttl_ms\":300}", NULL);
    CHECK_EQ_INT(r.status, 201);
    h_resp_free(&r);
    CHECK(h_out_wait("exp-a", "\"holders\":1,", 2000) >= 0);
    long long t0 = h_now_ms();
    while (h_out_count("exp-a", "\"holders\":0}") < 2 && h_now_ms() - t0 < 2000) h_sleep_ms(5);
    CHECK_EQ_INT(h_out_count("exp-a", "\"holders\":0}"), 2);
    CHECK_EQ_INT(h_out_count("exp-a", "event: gap"), 0); /* logged as a change */
    fprintf(stderr, "    expiry of a 300 ms lease streamed %lld ms after the grant was seen\n",
            h_now_ms() - t0);
    h_reap(a);
}

int main(int argc, char **argv) {
    check_filter(argc > 1 ? argv[1] : NULL);
    snprintf(dir, sizeof dir, "/tmp/lockgate-streams-XXXXXX");
    if (!mkdtemp(dir)) return 2;
    h_out_dir(dir);
    if (h_redis_start(&redis, 0, NULL) < 0 ||
        h_gw_up(&gw, &redis, "--workers 2 --stream-heartbeat-ms 100") < 0)
        return 2;
    long long t0 = h_now_ms();
    RUN_SOME(test_kill_releases_within_1s);
    RUN_SOME(test_heartbeats);
    RUN_SOME(test_http10_stream);
    RUN_SOME(test_forced_release_lost);
    RUN_SOME(test_one_session_per_ttl);
    if (!h_cluster_mode()) { /* live holds */
        RUN_SOME(test_renewal_touches_no_hold);
        RUN_SOME(test_horizon_pushed);
        RUN_SOME(test_horizon_push_failed);
        RUN_SOME(test_released_holds_leave_session);
        RUN_SOME(test_liveness_hash_deleted);
    }
    RUN_SOME(test_semaphore_and_errors);
    RUN_SOME(test_watch_stream);
    RUN_SOME(test_watch_every_change);
    RUN_SOME(test_watch_expiry);
    RUN_SOME(test_redis_loss_lost);
    RUN_SOME(test_quorum_mode);
    RUN_SOME(test_silent_host);
    RUN_SOME(test_gateway_killed);
    RUN_SOME(test_gateway_killed_lock_delay);
    if (!h_cluster_mode()) RUN_SOME(test_lock_delay_outlives_beat); /* live holds */
    fprintf(stderr, "    streams suite: %lld ms\n", h_now_ms() - t0);
    CHECK_EQ_INT(h_gw_stop(&gw, 5000), 0); /* a clean stop (no leak under the sanitizers) */
    h_redis_stop(&redis);
    char rm[128];
    snprintf(rm, sizeof rm, "rm -rf %s", dir);
    if (system(rm) != 0) fprintf(stderr, "    could not remove %s\n", dir);
    return check_summary("streams");
}
