/* test_elections.c -- issue 33: leader election (/v1/elections/{name},
 * handlers/elections.c).  Three candidates campaign as event streams
 * (curl, as docs/elections.md shows it); the leader is killed, the next is
 * elected within 1 s with a higher term, twice; an observer sees every
 * leader and value in order.  A campaign with a lease: leader, renewal,
 * proclaim, resign.
 *
 * Every wait is for an event (a line in curl's output), never a fixed
 * sleep.  `build/tests/test_elections NAME` runs the tests whose names
 * contain NAME. */
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

static pid_t curl_stream(const char *method, const char *path, const char *body, const char *out) {
    char cmd[1024];
    snprintf(cmd, sizeof cmd,
             "exec curl -sN -H 'Accept: text/event-stream' -X %s http://127.0.0.1:%d%s %s%s%s "
             "> %s/%s 2>&1",
             method, gw.port, path, body ? "-d '" : "", body ? body : "", body ? "'" : "", dir,
             out);
    return h_spawn(cmd, NULL);
}

/* The term of out's `event: elected`, or 0. */
static long long elected_term(const char *out) {
    const char *buf = h_out_text(out);
    const char *p = strstr(buf, "event: elected");
    p = p ? strstr(p, "\"term\":") : NULL;
    return p ? atoll(p + 7) : 0;
}

/* Three replicas campaign; the leader is killed (kill -9 of its curl)
 * twice: each time the next is elected within 1 s with a higher term.
 * The last proclaims a new value.  The observer saw every leader and
 * value, in order. */
static void test_three_candidates_failover(void) {
    pid_t obs = curl_stream("GET", "/v1/elections/svc", NULL, "obs");
    CHECK(h_out_wait("obs", "event: vacant", 5000) >= 0);
    pid_t c[3];
    char out[16];
    c[0] = curl_stream("POST", "/v1/elections/svc", "{\"value\":\"replica-1\"}", "c1");
    CHECK(h_out_wait("c1", "event: elected", 5000) >= 0);
    c[1] = curl_stream("POST", "/v1/elections/svc", "{\"value\":\"replica-2\"}", "c2");
    CHECK(h_out_wait("c2", "event: waiting", 5000) >= 0);
    c[2] = curl_stream("POST", "/v1/elections/svc", "{\"value\":\"replica-3\"}", "c3");
    CHECK(h_out_wait("c3", "event: waiting", 5000) >= 0);
    CHECK(h_out_wait("obs", "\"value\":\"replica-1\"", 5000) >= 0);
    long long term = elected_term("c1");
    CHECK(term > 0);
    for (int i = 0; i < 2; i++) {
        long long t0 = h_now_ms();
        kill(c[i], SIGKILL);
        waitpid(c[i], NULL, 0);
        snprintf(out, sizeof out, "c%d", i + 2);
        long long t = h_out_wait(out, "event: elected", 5000);
        fprintf(stderr, "    leader %d killed: replica-%d elected after %lld ms\n", i + 1, i + 2,
                t < 0 ? -1 : h_now_ms() - t0);
        CHECK(t >= 0 && t < 1000);
        long long next = elected_term(out);
        CHECK(next > term);
        term = next;
        /* The observer has each leader (it would have every one however
         * fast they came: the proclaims below). */
        char want[64];
        snprintf(want, sizeof want, "\"value\":\"replica-%d\"", i + 2);
        CHECK(h_out_wait("obs", want, 2000) >= 0);
    }
    /* Proclaim: the leader changes its value. */
    const char *buf = h_out_text("c3");
    const char *tok = strstr(buf, "\"token\":\"");
    char token[64] = "";
    if (tok) snprintf(token, sizeof token, "%.*s", (int)strcspn(tok + 9, "\""), tok + 9);
    struct h_resp r =
        h_http("PATCH", gw.port, "/v1/elections/svc", token, "{\"value\":\"replica-3b\"}", NULL);
    CHECK_EQ_INT(r.status, 200);
    h_resp_free(&r);
    CHECK(h_out_wait("obs", "\"value\":\"replica-3b\"", 2000) >= 0);
    /* 20 proclaims in a tight loop: the observer sees every value, in
     * order (the name's change log, docs/elections.md "Observing"). */
    char expect[512] = "replica-1,replica-2,replica-3,replica-3b";
    for (int i = 0; i < 20; i++) {
        char body[64];
        snprintf(body, sizeof body, "{\"value\":\"p%d\"}", i);
        r = h_http("PATCH", gw.port, "/v1/elections/svc", token, body, NULL);
        CHECK_EQ_INT(r.status, 200);
        h_resp_free(&r);
        snprintf(expect + strlen(expect), sizeof expect - strlen(expect), ",p%d", i);
    }
    CHECK(h_out_wait("obs", "\"value\":\"p19\"", 2000) >= 0);
    char seen[512];
    h_out_leaders("obs", seen, sizeof seen);
    fprintf(stderr, "    observer saw: %s\n", seen);
    CHECK_EQ_STR(seen, expect);
    r = h_http("GET", gw.port, "/v1/elections/svc", NULL, NULL, NULL);
    CHECK_EQ_INT(r.status, 200);
    CHECK_EQ_STR(h_jstr(&r, "value"), "p19");
    CHECK(h_jint(&r, "term") == term);
    h_resp_free(&r);
    h_reap(c[2]);
    CHECK(h_out_wait("obs", "event: vacant", 2000) >= 0);
    h_reap(obs);
}

/* A campaign with a lease: 201 with value, term and token; the leader
 * read back; renewed (PATCH ttl_ms), proclaimed (PATCH value); another
 * campaign with wait_ms 0 is 409; resign; then no leader (404). */
static void test_lease_campaign(void) {
    struct h_resp r = h_http("POST", gw.port, "/v1/elections/batch", NULL,
                             "{\"value\":\"host-a\",\"ttl_ms\":5000}", NULL);
    CHECK_EQ_INT(r.status, 201);
    CHECK_EQ_STR(h_jstr(&r, "value"), "host-a");
    long long term = h_jint(&r, "term");
    CHECK(term > 0);
    char token[64];
    snprintf(token, sizeof token, "%s", h_token(&r));
    h_resp_free(&r);
    r = h_http("GET", gw.port, "/v1/elections/batch", NULL, NULL, NULL);
    CHECK_EQ_INT(r.status, 200);
    CHECK_EQ_STR(h_jstr(&r, "value"), "host-a");
    CHECK(h_jint(&r, "term") == term);
    CHECK(h_jint(&r, "since_ms") == term / 1000);
    h_resp_free(&r);
    r = h_http("PATCH", gw.port, "/v1/elections/batch", token, "{\"ttl_ms\":8000}", NULL);
    CHECK_EQ_INT(r.status, 200);
    CHECK(h_jint(&r, "ttl_ms") > 5000);
    h_resp_free(&r);
    r = h_http("PATCH", gw.port, "/v1/elections/batch", token, "{\"value\":\"host-a2\"}", NULL);
    CHECK_EQ_INT(r.status, 200);
    CHECK_EQ_STR(h_jstr(&r, "value"), "host-a2");
    h_resp_free(&r);
    r = h_http("POST", gw.port, "/v1/elections/batch", NULL, "{\"value\":\"host-b\",\"wait_ms\":0}",
               NULL);
    CHECK_EQ_INT(r.status, 409);
    h_resp_free(&r);
    r = h_http("PATCH", gw.port, "/v1/elections/batch", "not-the-leaders-token-xx",
               "{\"value\":\"x\"}", NULL);
    CHECK_EQ_INT(r.status, 409);
    h_resp_free(&r);
    r = h_http("DELETE", gw.port, "/v1/elections/batch", token, NULL, NULL);
    CHECK_EQ_INT(r.status, 200);
    h_resp_free(&r);
    r = h_http("GET", gw.port, "/v1/elections/batch", NULL, NULL, NULL);
    CHECK_EQ_INT(r.status, 404);
    h_resp_free(&r);
    r = h_http("POST", gw.port, "/v1/elections/batch", NULL, "{}", NULL);
    CHECK_EQ_INT(r.status, 400); /* value is required */
    h_resp_free(&r);
}

/* lockctl elect runs its command only once elected, with the term in
 * LOCKGATE_TERM; a second candidate's command waits; when the leadership
 * is taken away (a forced release of the election's lock) the leader's
 * command is stopped and lockctl exits 76, and the second is elected and
 * runs; its command's exit resigns.  lockctl observe prints the leaders. */
static void test_lockctl_elect(void) {
    const char *b = getenv("BUILD");
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "exec %s/lockctl -u http://127.0.0.1:%d observe job > %s/lc-obs 2>&1",
             b ? b : "build", gw.port, dir);
    pid_t obs = h_spawn(cmd, NULL);
    CHECK(h_out_wait("lc-obs", "\"value\":null", 5000) >= 0);
    snprintf(cmd, sizeof cmd,
             "exec %s/lockctl -u http://127.0.0.1:%d elect job --value a --ttl 900 --grace 500 -- "
             "sh -c 'echo term=$LOCKGATE_TERM; exec sleep 30' > %s/lc-a 2>&1",
             b ? b : "build", gw.port, dir);
    pid_t a = h_spawn(cmd, NULL);
    CHECK(h_out_wait("lc-a", "term=1", 5000) >= 0);
    snprintf(cmd, sizeof cmd,
             "exec %s/lockctl -u http://127.0.0.1:%d elect job --value b -- "
             "sh -c 'echo term=$LOCKGATE_TERM; sleep 0.2; echo b-done' > %s/lc-b 2>&1",
             b ? b : "build", gw.port, dir);
    pid_t bp = h_spawn(cmd, NULL);
    struct h_resp r = h_http("GET", gw.port, "/v1/elections/job", NULL, NULL, NULL);
    CHECK_EQ_INT(r.status, 200);
    CHECK_EQ_STR(h_jstr(&r, "value"), "a");
    h_resp_free(&r);
    CHECK(h_out_wait("lc-b", "term=", 300) < 0); /* not elected while a leads */
    /* Taken away: a's next renewal (every 300 ms) is refused. */
    r = h_http("DELETE", gw.port, "/v1/locks/election:job?force=true", NULL, NULL, NULL);
    CHECK_EQ_INT(r.status, 200);
    h_resp_free(&r);
    int st = 0;
    long long t0 = h_now_ms();
    while (waitpid(a, &st, WNOHANG) == 0 && h_now_ms() - t0 < 5000) h_sleep_ms(5);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 76);
    CHECK(h_out_wait("lc-b", "b-done", 5000) >= 0);
    t0 = h_now_ms();
    while (waitpid(bp, &st, WNOHANG) == 0 && h_now_ms() - t0 < 5000) h_sleep_ms(5);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    CHECK(h_out_wait("lc-obs", "\"value\":\"b\"", 2000) >= 0);
    r = h_http("GET", gw.port, "/v1/elections/job", NULL, NULL, NULL);
    CHECK_EQ_INT(r.status, 404); /* b resigned when its command exited */
    h_resp_free(&r);
    char seen[256];
    h_out_leaders("lc-obs", seen, sizeof seen); /* lockctl prints the data lines only */
    const char *buf = h_out_text("lc-obs");
    const char *pa = strstr(buf, "\"value\":\"a\""), *pb = strstr(buf, "\"value\":\"b\"");
    CHECK(pa && pb && pa < pb);
    h_reap(obs);
}

int main(int argc, char **argv) {
    check_filter(argc > 1 ? argv[1] : NULL);
    snprintf(dir, sizeof dir, "/tmp/lockgate-elections-XXXXXX");
    if (!mkdtemp(dir)) return 2;
    h_out_dir(dir);
    if (h_redis_start(&redis, 0, NULL) < 0 ||
        h_gw_up(&gw, &redis, "--workers 2 --stream-heartbeat-ms 200") < 0)
        return 2;
    long long t0 = h_now_ms();
    RUN_SOME(test_three_candidates_failover);
    RUN_SOME(test_lease_campaign);
    RUN_SOME(test_lockctl_elect);
    fprintf(stderr, "    elections suite: %lld ms\n", h_now_ms() - t0);
    CHECK_EQ_INT(h_gw_stop(&gw, 5000), 0);
    h_redis_stop(&redis);
    char rm[128];
    snprintf(rm, sizeof rm, "rm -rf %s", dir);
    if (system(rm) != 0) fprintf(stderr, "    could not remove %s\n", dir);
    return check_summary("elections");
}
