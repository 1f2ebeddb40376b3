/* test_sessions.c -- issue 22 against the real binary and a real
 * redis-server: sessions (one lease for many holds) and multi-lock (several
 * names all or nothing).
 *
 * Time bounds are generous for a busy 2-core machine: "at once" is
 * SLACK_MS; lower bounds are asserted only where the point is "not before"
 * (a session's end, its lock-delay).
 *
 * `build/tests/test_sessions NAME` runs only the tests whose names contain
 * NAME. */
#include "tests/integration/harness.h"

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static struct h_redis redis;
static struct h_gw gw, gw2;

#define SLACK_MS 1000

#define H(method, path, token, body) h_http(method, gw.port, path, token, body, NULL)

/* POST /v1/sessions with body; the new session's token (malloc'd), or "". */
static char *session_new(const char *body) {
    struct h_resp r = H("POST", "/v1/sessions", NULL, body);
    CHECK_EQ_INT(r.status, 201);
    const char *t = h_header(&r, "Session");
    char *tok = strdup(t ? t : "");
    if (t) CHECK_EQ_STR(h_jstr(&r, "token"), t);
    h_resp_free(&r);
    return tok;
}

/* Acquires path bound to session on port; returns the status, the hold's
 * token into tok (when given) and its fence into *fence. */
static long bound_acquire(int port, const char *path, const char *session, const char *body,
                          char *tok, long long *fence) {
    char hdr[200];
    snprintf(hdr, sizeof hdr, "Session: %s", session);
    struct h_resp r = h_http("POST", port, path, NULL, body ? body : "{}", hdr);
    long st = r.status;
    if (tok) snprintf(tok, 160, "%s", h_token(&r));
    if (fence) *fence = h_jint(&r, "fence");
    h_resp_free(&r);
    return st;
}

static long status_of(const char *method, int port, const char *path, const char *token,
                      const char *body) {
    struct h_resp r = h_http(method, port, path, token, body, NULL);
    long st = r.status;
    h_resp_free(&r);
    return st;
}

/* ---- sessions ------------------------------------------------------------------- */

static void test_session_routes(void) {
    struct h_resp r = H("POST", "/v1/sessions", NULL,
                        "{\"ttl_ms\":5000,\"lock_delay_ms\":100,\"owner\":\"worker 3\"}");
    CHECK_EQ_INT(r.status, 201);
    char tok[160];
    snprintf(tok, sizeof tok, "%s", h_header(&r, "Session") ? h_header(&r, "Session") : "");
    CHECK(strlen(tok) == 22);
    CHECK_EQ_INT(h_jint(&r, "ttl_ms"), 5000);
    CHECK_EQ_INT(h_jint(&r, "lock_delay_ms"), 100);
    char loc[200];
    snprintf(loc, sizeof loc, "/v1/sessions/%s", tok);
    CHECK_EQ_STR(h_header(&r, "Location"), loc);
    h_resp_free(&r);

    char held[160];
    long long f1;
    CHECK_EQ_INT(bound_acquire(gw.port, "/v1/locks/sr1", tok, NULL, held, &f1), 201);
    CHECK_EQ_INT(bound_acquire(gw.port, "/v1/semaphores/sr2", tok, "{\"limit\":3}", NULL, NULL),
                 201);
    /* Re-entry with the hold's token: the same fence, count 2. */
    char hdr[200];
    snprintf(hdr, sizeof hdr, "Session: %s", tok);
    r = h_http("POST", gw.port, "/v1/locks/sr1", held, "{}", hdr);
    CHECK_EQ_INT(r.status, 200);
    CHECK_EQ_INT(h_jint(&r, "count"), 2);
    CHECK_EQ_INT(h_jint(&r, "fence"), f1);
    h_resp_free(&r);

    r = H("GET", loc, NULL, NULL);
    CHECK_EQ_INT(r.status, 200);
    CHECK_EQ_STR(h_jstr(&r, "owner"), "worker 3");
    cJSON *holds = cJSON_GetObjectItem(r.json, "holds");
    CHECK(cJSON_GetArraySize(holds) == 2);
    CHECK(strstr(r.body, held) != NULL);
    CHECK(strstr(r.body, "\"semaphore\"") != NULL);
    h_resp_free(&r);

    /* Extending a bound hold: 409 session_bound; renew the session. */
    r = H("PATCH", "/v1/locks/sr1", held, "{\"ttl_ms\":9000}");
    CHECK_EQ_INT(r.status, 409);
    CHECK_EQ_STR(h_jcode(&r), "session_bound");
    h_resp_free(&r);
    r = H("PATCH", loc, NULL, "{\"ttl_ms\":8000}");
    CHECK_EQ_INT(r.status, 200);
    CHECK_EQ_INT(h_jint(&r, "ttl_ms"), 8000);
    CHECK_EQ_INT(h_jint(&r, "holds"), 2);
    h_resp_free(&r);
    /* Held as long as the session: GET reports its remaining time. */
    r = H("GET", "/v1/locks/sr1", NULL, NULL);
    CHECK(h_jint(&r, "ttl_ms") > 7000 && h_jint(&r, "ttl_ms") <= 8000);
    h_resp_free(&r);

    /* A release of a bound hold takes it off the session. */
    CHECK_EQ_INT(status_of("DELETE", gw.port, "/v1/locks/sr1", held, NULL), 200);
    CHECK_EQ_INT(status_of("DELETE", gw.port, "/v1/locks/sr1", held, NULL), 200);
    r = H("GET", loc, NULL, NULL);
    CHECK(cJSON_GetArraySize(cJSON_GetObjectItem(r.json, "holds")) == 1);
    h_resp_free(&r);

    r = H("DELETE", loc, NULL, NULL);
    CHECK_EQ_INT(r.status, 200);
    CHECK_EQ_INT(h_jint(&r, "released"), 1);
    h_resp_free(&r);
    CHECK_EQ_INT(status_of("GET", gw.port, "/v1/semaphores/sr2", NULL, NULL), 404);

    /* An ended session: every route says so, and nothing binds to it. */
    r = H("GET", loc, NULL, NULL);
    CHECK_EQ_INT(r.status, 404);
    CHECK_EQ_STR(h_jcode(&r), "session_not_found");
    h_resp_free(&r);
    CHECK_EQ_INT(status_of("PATCH", gw.port, loc, NULL, "{}"), 404);
    CHECK_EQ_INT(status_of("DELETE", gw.port, loc, NULL, NULL), 404);
    r = h_http("POST", gw.port, "/v1/locks/sr3", NULL, "{}", hdr);
    CHECK_EQ_INT(r.status, 404);
    CHECK_EQ_STR(h_jcode(&r), "session_not_found");
    h_resp_free(&r);
    CHECK_EQ_INT(status_of("GET", gw.port, "/v1/locks/sr3", NULL, NULL), 404);

    /* Bad input. */
    r = h_http("POST", gw.port, "/v1/locks/sr3", NULL, "{}", "Session: short");
    CHECK_EQ_INT(r.status, 400);
    CHECK_EQ_STR(h_jcode(&r), "invalid_token");
    h_resp_free(&r);
    r = H("POST", "/v1/sessions", NULL, "{\"ttl_ms\":5}");
    CHECK_EQ_INT(r.status, 400);
    CHECK_EQ_STR(h_jcode(&r), "invalid_field");
    h_resp_free(&r);
    CHECK_EQ_INT(status_of("GET", gw.port, "/v1/sessions/x", NULL, NULL), 404);
}

/* A session with 1,000 holds: one PATCH keeps them all past the session's
 * first end. */
static void test_thousand_holds_one_patch(void) {
    long long t0 = h_now_ms();
    char *s = session_new("{\"ttl_ms\":6000}");
    char path[64];
    int ok = 0;
    for (int i = 0; i < 1000; i++) {
        snprintf(path, sizeof path, "/v1/locks/k%d", i);
        ok += bound_acquire(gw.port, path, s, NULL, NULL, NULL) == 201;
    }
    CHECK_EQ_INT(ok, 1000);
    long long took = h_now_ms() - t0;
    fprintf(stderr, "  (1000 bound acquires took %lld ms)\n", took);
    /* Renew late enough that the first end lies well before the new one. */
    if (h_now_ms() < t0 + 2000) h_sleep_ms((int)(t0 + 2000 - h_now_ms()));
    char loc[200];
    snprintf(loc, sizeof loc, "/v1/sessions/%s", s);
    struct h_resp r = H("PATCH", loc, NULL, "{\"ttl_ms\":15000}");
    CHECK_EQ_INT(r.status, 200);
    CHECK_EQ_INT(h_jint(&r, "holds"), 1000);
    h_resp_free(&r);
    if (h_now_ms() < t0 + 6500) h_sleep_ms((int)(t0 + 6500 - h_now_ms()));
    /* Past the session's first end: every hold is still held. */
    int held = 0;
    for (int i = 0; i < 1000; i++) {
        snprintf(path, sizeof path, "/v1/locks/k%d", i);
        held += status_of("POST", gw.port, path, NULL, "{}") == 409;
    }
    CHECK_EQ_INT(held, 1000);
    r = H("DELETE", loc, NULL, NULL);
    CHECK_EQ_INT(h_jint(&r, "released"), 1000);
    h_resp_free(&r);
    CHECK_EQ_INT(status_of("POST", gw.port, "/v1/locks/k999", NULL, "{}"), 201);
    free(s);
}

/* A waiter on its own thread. */
struct waiter_call {
    pthread_t th;
    int port;
    char path[64];
    char body[128];
    long status;
    long long t_done, fence;
};

static void *waiter_main(void *arg) {
    struct waiter_call *w = arg;
    struct h_resp r = h_http("POST", w->port, w->path, NULL, w->body, NULL);
    w->t_done = h_now_ms();
    w->status = r.status;
    w->fence = h_jint(&r, "fence");
    h_resp_free(&r);
    return NULL;
}

static void waiter_start(struct waiter_call *w, int port, const char *path, const char *body) {
    memset(w, 0, sizeof *w);
    w->port = port;
    snprintf(w->path, sizeof w->path, "%s", path);
    snprintf(w->body, sizeof w->body, "%s", body);
    pthread_create(&w->th, NULL, waiter_main, w);
}

/* Session expiry frees every hold, wakes waiters on both gateways when it
 * happens (no request of anyone else needed) and applies the session's
 * lock-delay; fences keep growing across it. */
static void test_expiry_wakes_and_delays(void) {
    long long t0 = h_now_ms();
    char *s = session_new("{\"ttl_ms\":1500,\"lock_delay_ms\":700}");
    long long f1 = 0, f2 = 0;
    CHECK_EQ_INT(bound_acquire(gw.port, "/v1/locks/ex1", s, NULL, NULL, &f1), 201);
    CHECK_EQ_INT(bound_acquire(gw2.port, "/v1/locks/ex2", s, "{\"mode\":\"shared\"}", NULL, &f2),
                 201);
    CHECK_EQ_INT(bound_acquire(gw.port, "/v1/semaphores/ex3", s, "{\"limit\":1}", NULL, NULL), 201);
    struct waiter_call w1, w2, w3;
    waiter_start(&w1, gw.port, "/v1/locks/ex1", "{\"wait_ms\":10000}");
    waiter_start(&w2, gw2.port, "/v1/locks/ex2", "{\"wait_ms\":10000,\"fair\":true}");
    waiter_start(&w3, gw2.port, "/v1/semaphores/ex3", "{\"limit\":1,\"wait_ms\":10000}");
    pthread_join(w1.th, NULL);
    pthread_join(w2.th, NULL);
    pthread_join(w3.th, NULL);
    long long end = t0 + 1500, free_at = end + 700;
    CHECK_EQ_INT(w1.status, 201);
    CHECK_EQ_INT(w2.status, 201);
    CHECK_EQ_INT(w3.status, 201);
    fprintf(stderr, "  (waiters got it %lld, %lld, %lld ms after session start; free at %lld)\n",
            w1.t_done - t0, w2.t_done - t0, w3.t_done - t0, free_at - t0);
    /* Not before the lock-delay is over (the session began after t0). */
    CHECK(w1.t_done >= free_at - 50);
    CHECK(w2.t_done >= free_at - 50);
    CHECK(w3.t_done >= free_at - 50);
    CHECK(w1.t_done <= free_at + SLACK_MS);
    CHECK(w2.t_done <= free_at + SLACK_MS);
    CHECK(w3.t_done <= free_at + SLACK_MS);
    CHECK(w1.fence > f1);
    CHECK(w2.fence > f2);
    free(s);
}

/* A hold's own lock-delay, longer than its session's, outlives the
 * session's expiry (issue 34): once the session is gone by expiry, the
 * name is in the hold's lock-delay, counted from the session's end, as a
 * plain hold with that delay would be.  (The session's key used to expire
 * at its end plus its own lock-delay, after which the hold's end read as 0
 * and its delay as long past.)  Waits for the session's 404, not a fixed
 * time.  port: the gateway to use. */
static void hold_delay_outlives_session_on(int port, const char *name) {
    struct h_resp r =
        h_http("POST", port, "/v1/sessions", NULL, "{\"ttl_ms\":1000,\"lock_delay_ms\":0}", NULL);
    CHECK_EQ_INT(r.status, 201);
    char s[160], loc[200], path[200];
    snprintf(s, sizeof s, "%s", h_header(&r, "Session") ? h_header(&r, "Session") : "");
    h_resp_free(&r);
    long long t0 = h_now_ms();
    snprintf(loc, sizeof loc, "/v1/sessions/%s", s);
    snprintf(path, sizeof path, "/v1/locks/%s", name);
    CHECK_EQ_INT(bound_acquire(port, path, s, "{\"lock_delay_ms\":5000}", NULL, NULL), 201);
    long long deadline = h_now_ms() + 5000;
    long st = 0;
    while ((st = status_of("GET", port, loc, NULL, NULL)) != 404 && h_now_ms() < deadline)
        h_sleep_ms(20);
    CHECK_EQ_INT(st, 404);
    h_sleep_ms(50); /* past the session key's own expiry too (end + its lock-delay 0) */
    r = h_http("POST", port, path, NULL, "{}", NULL);
    long long waited = h_now_ms() - t0;
    CHECK_EQ_INT(r.status, 409);
    CHECK_EQ_STR(h_jcode(&r), "lock_busy");
    CHECK(r.body && strstr(r.body, "lock-delay") != NULL);
    /* The delay runs from the session's end (at most 1 s after t0). */
    CHECK(h_jint(&r, "retry_after_ms") >= 5000 - waited);
    CHECK(h_jint(&r, "retry_after_ms") <= 6000);
    h_resp_free(&r);
}

static void test_hold_delay_outlives_session(void) {
    hold_delay_outlives_session_on(gw.port, "hd1");
}

/* A Session header on a re-entry (issue 34) is honoured when it names the
 * session the hold lives by, and refused otherwise (409 session_mismatch),
 * the hold left as it was: it neither binds a plain hold (which used to
 * have its lease silently renewed, or in Cluster mode cut to the session's
 * time) nor moves a bound one.  port: the gateway to use. */
static void reentry_session_on(int port, const char *name) {
    char path[200], hdr[200], hdr2[200], tok[160], stok[160];
    snprintf(path, sizeof path, "/v1/locks/%s", name);
    struct h_resp r = h_http("POST", port, "/v1/sessions", NULL, "{\"ttl_ms\":20000}", NULL);
    CHECK_EQ_INT(r.status, 201);
    snprintf(hdr, sizeof hdr, "Session: %s",
             h_header(&r, "Session") ? h_header(&r, "Session") : "");
    h_resp_free(&r);
    r = h_http("POST", port, "/v1/sessions", NULL, "{\"ttl_ms\":20000}", NULL);
    CHECK_EQ_INT(r.status, 201);
    snprintf(hdr2, sizeof hdr2, "Session: %s",
             h_header(&r, "Session") ? h_header(&r, "Session") : "");
    h_resp_free(&r);

    /* A plain hold: its token with a Session header is refused, lease kept. */
    r = h_http("POST", port, path, NULL, "{\"ttl_ms\":3000}", NULL);
    CHECK_EQ_INT(r.status, 201);
    snprintf(tok, sizeof tok, "%s", h_token(&r));
    h_resp_free(&r);
    r = h_http("POST", port, path, tok, "{\"ttl_ms\":60000}", hdr);
    CHECK_EQ_INT(r.status, 409);
    CHECK_EQ_STR(h_jcode(&r), "session_mismatch");
    h_resp_free(&r);
    r = h_http("GET", port, path, NULL, NULL, NULL);
    CHECK_EQ_INT(h_jint(&r, "count"), 1);
    CHECK(h_jint(&r, "ttl_ms") <= 3000);
    h_resp_free(&r);
    CHECK_EQ_INT(status_of("DELETE", port, path, tok, NULL), 200);

    /* A bound hold: its own session re-enters it, another is refused. */
    r = h_http("POST", port, path, NULL, "{}", hdr);
    CHECK_EQ_INT(r.status, 201);
    snprintf(stok, sizeof stok, "%s", h_token(&r));
    h_resp_free(&r);
    r = h_http("POST", port, path, stok, "{}", hdr2);
    CHECK_EQ_INT(r.status, 409);
    CHECK_EQ_STR(h_jcode(&r), "session_mismatch");
    h_resp_free(&r);
    r = h_http("POST", port, path, stok, "{}", hdr);
    CHECK_EQ_INT(r.status, 200);
    CHECK_EQ_INT(h_jint(&r, "count"), 2);
    CHECK(h_jint(&r, "ttl_ms") > 15000 && h_jint(&r, "ttl_ms") <= 20000);
    h_resp_free(&r);
    CHECK_EQ_INT(status_of("DELETE", port, path, stok, NULL), 200);
    CHECK_EQ_INT(status_of("DELETE", port, path, stok, NULL), 200);
    CHECK_EQ_INT(status_of("GET", port, path, NULL, NULL), 404);
}

static void test_reentry_session_header(void) { reentry_session_on(gw.port, "rs1"); }

/* A bound hold re-entered with its token and no Session header: it stays
 * bound to its session, with its session's remaining time (acquire.lua
 * took the missing header for a session that had ended: the answer's
 * ttl_ms was minus the clock; in Redis Cluster the hold's lease ended). */
static void test_reentry_without_session_header(void) {
    char *s = session_new("{\"ttl_ms\":20000}");
    char tok[160];
    CHECK_EQ_INT(bound_acquire(gw.port, "/v1/locks/rns1", s, NULL, tok, NULL), 201);
    struct h_resp r = H("POST", "/v1/locks/rns1", tok, "{}");
    CHECK_EQ_INT(r.status, 200);
    CHECK_EQ_INT(h_jint(&r, "count"), 2);
    CHECK(h_jint(&r, "ttl_ms") > 15000 && h_jint(&r, "ttl_ms") <= 20000);
    h_resp_free(&r);
    r = H("GET", "/v1/locks/rns1", NULL, NULL);
    CHECK_EQ_INT(r.status, 200);
    CHECK_EQ_INT(h_jint(&r, "count"), 2);
    CHECK(h_jint(&r, "ttl_ms") > 15000 && h_jint(&r, "ttl_ms") <= 20000);
    h_resp_free(&r);
    /* Still its session's: another token finds it held. */
    CHECK_EQ_INT(status_of("POST", gw.port, "/v1/locks/rns1", NULL, "{\"ttl_ms\":1000}"), 409);
    CHECK_EQ_INT(status_of("DELETE", gw.port, "/v1/locks/rns1", tok, NULL), 200);
    CHECK_EQ_INT(status_of("DELETE", gw.port, "/v1/locks/rns1", tok, NULL), 200);
    CHECK_EQ_INT(status_of("GET", gw.port, "/v1/locks/rns1", NULL, NULL), 404);
    char loc[200];
    snprintf(loc, sizeof loc, "/v1/sessions/%s", s);
    CHECK_EQ_INT(status_of("DELETE", gw.port, loc, NULL, NULL), 200);
    free(s);
}

/* DELETE of a session whose lock has a fair waiter queued: the waiter gets
 * it at once, with no lock-delay, and a higher fence. */
static void test_delete_with_fair_waiter(void) {
    char *s = session_new("{\"ttl_ms\":20000,\"lock_delay_ms\":5000}");
    long long f1 = 0;
    CHECK_EQ_INT(bound_acquire(gw.port, "/v1/locks/df1", s, NULL, NULL, &f1), 201);
    struct waiter_call w;
    waiter_start(&w, gw2.port, "/v1/locks/df1", "{\"wait_ms\":10000,\"fair\":true}");
    h_sleep_ms(400);
    /* It is queued: an unfair request that finds the lock free goes behind it. */
    char *q = strdup(h_redis_cli(&redis, "ZCARD lockgate:lock:{df1}:q") ?: "");
    CHECK_EQ_STR(q, "1");
    free(q);
    char loc[200];
    snprintf(loc, sizeof loc, "/v1/sessions/%s", s);
    long long t = h_now_ms();
    CHECK_EQ_INT(status_of("DELETE", gw.port, loc, NULL, NULL), 200);
    pthread_join(w.th, NULL);
    CHECK_EQ_INT(w.status, 201);
    CHECK(w.t_done - t < SLACK_MS);
    CHECK(w.fence > f1);
    free(s);
}

/* ---- multi-lock ------------------------------------------------------------------ */

/* The ttl_ms of an entry in a multi-lock answer's locks[], -1 when absent. */
static long long multi_ttl_of(struct h_resp *r, const char *name) {
    cJSON *locks = r->json ? cJSON_GetObjectItem(r->json, "locks") : NULL, *e;
    cJSON_ArrayForEach(e, locks) {
        if (strcmp(cJSON_GetStringValue(cJSON_GetObjectItem(e, "name")), name) == 0 &&
            cJSON_IsNumber(cJSON_GetObjectItem(e, "ttl_ms")))
            return (long long)cJSON_GetNumberValue(cJSON_GetObjectItem(e, "ttl_ms"));
    }
    return -1;
}

/* A multi-lock's ttl_ms is never longer than a granted name's real lease
 * (issue 34): a re-entered name capped by its max_hold_ms, or bound to a
 * session, keeps its own shorter lease, and the answer says so: ttl_ms the
 * smallest, each name its own.  (It used to answer the requested ttl.) */
static void test_multi_reentry_real_lease(void) {
    /* max_hold_ms: mh1 can live 1 s at most, whatever the multi-lock asks. */
    struct h_resp r = H("POST", "/v1/locks/mh1", NULL, "{\"ttl_ms\":1000,\"max_hold_ms\":1000}");
    CHECK_EQ_INT(r.status, 201);
    char tok[160];
    snprintf(tok, sizeof tok, "%s", h_token(&r));
    h_resp_free(&r);
    r = H("POST", "/v1/locks", tok, "{\"names\":[\"mh1\",\"mh2\"],\"ttl_ms\":30000}");
    CHECK_EQ_INT(r.status, 201);
    CHECK(h_jint(&r, "ttl_ms") > 0 && h_jint(&r, "ttl_ms") <= 1000);
    CHECK(multi_ttl_of(&r, "mh1") > 0 && multi_ttl_of(&r, "mh1") <= 1000);
    CHECK(multi_ttl_of(&r, "mh2") > 25000 && multi_ttl_of(&r, "mh2") <= 30000);
    h_resp_free(&r);
    r = H("GET", "/v1/locks/mh1", NULL, NULL);
    CHECK_EQ_INT(h_jint(&r, "count"), 2);
    CHECK(h_jint(&r, "ttl_ms") <= 1000);
    h_resp_free(&r);
    CHECK_EQ_INT(status_of("DELETE", gw.port, "/v1/locks", tok, "{\"names\":[\"mh1\",\"mh2\"]}"),
                 200);
    CHECK_EQ_INT(status_of("DELETE", gw.port, "/v1/locks/mh1", tok, NULL), 200);

    /* A session-bound name lives by its session: 2 s here. */
    char *s = session_new("{\"ttl_ms\":2000}");
    char stok[160];
    CHECK_EQ_INT(bound_acquire(gw.port, "/v1/locks/ms1", s, NULL, stok, NULL), 201);
    r = H("POST", "/v1/locks", stok, "{\"names\":[\"ms1\",\"ms2\"],\"ttl_ms\":30000}");
    CHECK_EQ_INT(r.status, 201);
    CHECK(h_jint(&r, "ttl_ms") > 0 && h_jint(&r, "ttl_ms") <= 2000);
    CHECK(multi_ttl_of(&r, "ms1") > 0 && multi_ttl_of(&r, "ms1") <= 2000);
    CHECK(multi_ttl_of(&r, "ms2") > 25000);
    h_resp_free(&r);
    CHECK_EQ_INT(status_of("DELETE", gw.port, "/v1/locks", stok, "{\"names\":[\"ms1\",\"ms2\"]}"),
                 200);
    char loc[200];
    snprintf(loc, sizeof loc, "/v1/sessions/%s", s);
    CHECK_EQ_INT(status_of("DELETE", gw.port, loc, NULL, NULL), 200);
    free(s);
}

static void test_multi_routes(void) {
    struct h_resp r = H("POST", "/v1/locks", NULL,
                        "{\"names\":[\"ma\",\"mb\",\"mc\"],\"ttl_ms\":5000,\"owner\":\"o\"}");
    CHECK_EQ_INT(r.status, 201);
    char tok[160];
    snprintf(tok, sizeof tok, "%s", h_token(&r));
    CHECK(strlen(tok) == 22);
    cJSON *locks = cJSON_GetObjectItem(r.json, "locks");
    CHECK(cJSON_GetArraySize(locks) == 3);
    long long fb = 0;
    for (int i = 0; i < cJSON_GetArraySize(locks); i++) {
        cJSON *l = cJSON_GetArrayItem(locks, i);
        CHECK(cJSON_GetObjectItem(l, "fence") && cJSON_GetObjectItem(l, "fence")->valuedouble > 0);
        if (strcmp(cJSON_GetObjectItem(l, "name")->valuestring, "mb") == 0)
            fb = (long long)cJSON_GetObjectItem(l, "fence")->valuedouble;
    }
    h_resp_free(&r);
    /* Each name is an ordinary lock of that token. */
    r = H("GET", "/v1/locks/mb", NULL, NULL);
    CHECK_EQ_INT(r.status, 200);
    CHECK_EQ_STR(h_jstr(&r, "owner"), "o");
    CHECK(h_jint(&r, "fence") / 1000 == fb / 1000);
    h_resp_free(&r);

    /* PATCH extends them all; a wrong token or name changes nothing. */
    r = H("PATCH", "/v1/locks", tok, "{\"names\":[\"ma\",\"mb\",\"mc\"],\"ttl_ms\":9000}");
    CHECK_EQ_INT(r.status, 200);
    CHECK(h_jint(&r, "ttl_ms") > 8000 && h_jint(&r, "ttl_ms") <= 9000);
    h_resp_free(&r);
    r = H("PATCH", "/v1/locks", tok, "{\"names\":[\"ma\",\"zz\"],\"ttl_ms\":20000}");
    CHECK_EQ_INT(r.status, 404);
    CHECK_EQ_STR(h_jcode(&r), "not_held");
    /* In cluster mode ma and zz are two slots, extended group by group: ma's
     * went through and the answer says so (docs/sessions-and-multi.md). */
    int ma_done = r.body && strstr(r.body, "\"done_names\":[\"ma\"]") != NULL;
    CHECK(!ma_done || h_cluster_mode());
    h_resp_free(&r);
    r = H("GET", "/v1/locks/ma", NULL, NULL);
    CHECK(h_jint(&r, "ttl_ms") <= (ma_done ? 20000 : 9000));
    h_resp_free(&r);
    r = H("DELETE", "/v1/locks", "AAAAAAAAAAAAAAAAAAAAAAAA", "{\"names\":[\"ma\",\"mb\"]}");
    CHECK_EQ_INT(r.status, 409);
    CHECK_EQ_STR(h_jcode(&r), "not_owner");
    h_resp_free(&r);
    /* Delete two of three, all or nothing per request. */
    r = H("DELETE", "/v1/locks", tok, "{\"names\":[\"ma\",\"mb\"]}");
    CHECK_EQ_INT(r.status, 200);
    CHECK_EQ_INT(h_jint(&r, "released"), 2);
    h_resp_free(&r);
    CHECK_EQ_INT(status_of("GET", gw.port, "/v1/locks/ma", NULL, NULL), 404);
    CHECK_EQ_INT(status_of("GET", gw.port, "/v1/locks/mc", NULL, NULL), 200);
    CHECK_EQ_INT(status_of("DELETE", gw.port, "/v1/locks/mc", tok, NULL), 200);

    /* Limits and bad input. */
    char body[2048] = "{\"names\":[";
    for (int i = 0; i < 65; i++)
        snprintf(body + strlen(body), sizeof body - strlen(body), "%s\"n%d\"", i ? "," : "", i);
    strcat(body, "]}");
    r = H("POST", "/v1/locks", NULL, body);
    CHECK_EQ_INT(r.status, 400);
    CHECK_EQ_STR(h_jcode(&r), "invalid_field");
    h_resp_free(&r);
    body[strlen(body) - 2] = '\0';
    *strrchr(body, ',') = '\0';
    strcat(body, "]}"); /* 64 names: fine */
    r = H("POST", "/v1/locks", NULL, body);
    CHECK_EQ_INT(r.status, 201);
    h_resp_free(&r);
    r = H("POST", "/v1/locks", NULL, "{\"names\":[\"d1\",\"d1\"]}");
    CHECK_EQ_INT(r.status, 400);
    CHECK_EQ_STR(h_jcode(&r), "invalid_field");
    h_resp_free(&r);
    r = H("POST", "/v1/locks", NULL, "{\"names\":[\"ok\",\"bad name\"]}");
    CHECK_EQ_INT(r.status, 400);
    CHECK_EQ_STR(h_jcode(&r), "invalid_name");
    h_resp_free(&r);
    CHECK_EQ_INT(status_of("POST", gw.port, "/v1/locks", NULL, "{}"), 400);
    r = h_http("POST", gw.port, "/v1/locks", NULL, "{\"names\":[\"sx\"]}",
               "Session: AAAAAAAAAAAAAAAAAAAAAAAA");
    CHECK_EQ_INT(r.status, 400);
    h_resp_free(&r);
    CHECK_EQ_INT(status_of("POST", gw.port, "/v1/locks", NULL, "{\"names\":\"a\"}"), 400);
}

/* A multi-lock including a name someone else holds takes nothing. */
static void test_multi_takes_nothing(void) {
    struct h_resp r = H("POST", "/v1/locks/tn2", NULL, "{\"ttl_ms\":6000}");
    CHECK_EQ_INT(r.status, 201);
    char t2[160];
    snprintf(t2, sizeof t2, "%s", h_token(&r));
    h_resp_free(&r);
    r = H("POST", "/v1/locks", NULL, "{\"names\":[\"tn1\",\"tn2\",\"tn3\"]}");
    CHECK_EQ_INT(r.status, 409);
    CHECK_EQ_STR(h_jcode(&r), "lock_busy");
    CHECK_EQ_STR(h_jstr(&r, "busy_name"), "tn2");
    CHECK(h_jint(&r, "retry_after_ms") > 3000);
    h_resp_free(&r);
    CHECK_EQ_INT(status_of("GET", gw.port, "/v1/locks/tn1", NULL, NULL), 404);
    CHECK_EQ_INT(status_of("GET", gw.port, "/v1/locks/tn3", NULL, NULL), 404);
    /* Waiting, it still holds nothing; a release of tn2 on the other
     * gateway wakes it at once, and it takes all three. */
    struct waiter_call w;
    waiter_start(&w, gw2.port, "/v1/locks",
                 "{\"names\":[\"tn3\",\"tn2\",\"tn1\"],\"wait_ms\":8000}");
    h_sleep_ms(400);
    CHECK_EQ_INT(status_of("GET", gw.port, "/v1/locks/tn1", NULL, NULL), 404);
    CHECK_EQ_INT(status_of("GET", gw.port, "/v1/locks/tn3", NULL, NULL), 404);
    long long t = h_now_ms();
    CHECK_EQ_INT(status_of("DELETE", gw.port, "/v1/locks/tn2", t2, NULL), 200);
    pthread_join(w.th, NULL);
    CHECK_EQ_INT(w.status, 201);
    CHECK(w.t_done - t < SLACK_MS);
    CHECK_EQ_INT(status_of("GET", gw.port, "/v1/locks/tn1", NULL, NULL), 200);
}

/* Two clients hammering overlapping, differently ordered multi-locks: a
 * non-atomic read-modify-write over all the names never loses an update,
 * no request waits past its wait_ms, and completions never stop. */
static const char *const SET_A[] = {"h1", "h2", "h3"};
static const char *const SET_B[] = {"h3", "h2", "h4", "h1"};
static int counters[5];
static atomic_int stop_hammer;

struct hammer {
    pthread_t th;
    int port;
    const char *const *names;
    int n;
    int ok, busy, other;
    long long max_ms;
    long long done_at[4096];
    int ndone;
};

static void *hammer_main(void *arg) {
    struct hammer *hm = arg;
    struct h_client cl;
    h_client_init(&cl, 20000);
    char body[256];
    int len = snprintf(body, sizeof body, "{\"ttl_ms\":5000,\"wait_ms\":3000,\"names\":[");
    for (int i = 0; i < hm->n; i++)
        len += snprintf(body + len, sizeof body - len, "%s\"%s\"", i ? "," : "", hm->names[i]);
    snprintf(body + len, sizeof body - len, "]}");
    char names_only[256];
    snprintf(names_only, sizeof names_only, "{%s", strstr(body, "\"names\""));
    while (!atomic_load(&stop_hammer)) {
        long long t = h_now_ms();
        long st = h_client_do(&cl, "POST", hm->port, "/v1/locks", NULL, body);
        long long took = h_now_ms() - t;
        if (took > hm->max_ms) hm->max_ms = took;
        if (st != 201) {
            if (st == 409)
                hm->busy++;
            else
                hm->other++;
            continue;
        }
        char tok[160];
        snprintf(tok, sizeof tok, "%s", h_token(&cl.last));
        int vals[5];
        for (int i = 0; i < hm->n; i++) vals[i] = counters[hm->names[i][1] - '0'];
        usleep(500); /* the race window a lost update needs */
        for (int i = 0; i < hm->n; i++) counters[hm->names[i][1] - '0'] = vals[i] + 1;
        st = h_client_do(&cl, "DELETE", hm->port, "/v1/locks", tok, names_only);
        if (st != 200) hm->other++;
        hm->ok++;
        if (hm->ndone < 4096) hm->done_at[hm->ndone++] = h_now_ms();
    }
    h_client_free(&cl);
    return NULL;
}

static void test_multi_hammer(void) {
    memset(counters, 0, sizeof counters);
    atomic_store(&stop_hammer, 0);
    struct hammer a = {.port = gw.port, .names = SET_A, .n = 3};
    struct hammer b = {.port = gw2.port, .names = SET_B, .n = 4};
    long long t0 = h_now_ms();
    pthread_create(&a.th, NULL, hammer_main, &a);
    pthread_create(&b.th, NULL, hammer_main, &b);
    h_sleep_ms(4000);
    atomic_store(&stop_hammer, 1);
    pthread_join(a.th, NULL);
    pthread_join(b.th, NULL);
    long long t1 = h_now_ms();
    fprintf(stderr,
            "  (hammer: %d + %d cycles in %lld ms, busy %d/%d, longest wait %lld/%lld ms)\n", a.ok,
            b.ok, t1 - t0, a.busy, b.busy, a.max_ms, b.max_ms);
    CHECK(a.ok > 10 && b.ok > 10);
    CHECK_EQ_INT(a.other + b.other, 0);
    CHECK_EQ_INT(counters[1], a.ok + b.ok);
    CHECK_EQ_INT(counters[2], a.ok + b.ok);
    CHECK_EQ_INT(counters[3], a.ok + b.ok);
    CHECK_EQ_INT(counters[4], b.ok);
    CHECK(a.max_ms <= 3000 + SLACK_MS && b.max_ms <= 3000 + SLACK_MS);
    /* Throughput never drops to zero: no second without a completion. */
    long long gap = 0, last = t0;
    int ia = 0, ib = 0;
    while (ia < a.ndone || ib < b.ndone) {
        long long next = ib >= b.ndone || (ia < a.ndone && a.done_at[ia] < b.done_at[ib])
                             ? a.done_at[ia++]
                             : b.done_at[ib++];
        if (next - last > gap) gap = next - last;
        last = next;
    }
    fprintf(stderr, "  (longest gap between completions: %lld ms)\n", gap);
    CHECK(gap < 1000);
}

/* ---- lockctl run --session ------------------------------------------------------------ */

/* Two runs share one session and one renewer: both hold their locks past
 * the session's TTL, and once both are done the renewer ends the session
 * and empties the file. */
static void test_lockctl_session(void) {
    char dir[] = "/tmp/lockgate-sess.XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    const char *b = getenv("BUILD") ? getenv("BUILD") : "build";
    char cmd[1024], file[128];
    snprintf(file, sizeof file, "%s/session", dir);
    snprintf(cmd, sizeof cmd,
             "(%s/lockctl --url http://127.0.0.1:%d run --session %s --ttl 1200 lr1 -- sleep 3 & "
             " sleep 0.3; %s/lockctl --url http://127.0.0.1:%d run --session %s --ttl 1200 lr2 -- "
             "sleep 2.5; r2=$?; wait $!; r1=$?; echo $r1$r2 > %s/rc) >/dev/null 2>&1 &",
             b, gw.port, file, b, gw.port, file, dir);
    CHECK(system(cmd) == 0);
    h_sleep_ms(2200); /* both runs started, past the session's 1.2 s */
    CHECK_EQ_INT(status_of("GET", gw.port, "/v1/locks/lr1", NULL, NULL), 200);
    CHECK_EQ_INT(status_of("GET", gw.port, "/v1/locks/lr2", NULL, NULL), 200);
    char tok[160] = "";
    FILE *f = fopen(file, "r");
    if (f) {
        if (!fgets(tok, sizeof tok, f)) tok[0] = '\0';
        fclose(f);
    }
    tok[strcspn(tok, "\n")] = '\0';
    char loc[200];
    snprintf(loc, sizeof loc, "/v1/sessions/%s", tok);
    struct h_resp r = H("GET", loc, NULL, NULL);
    CHECK_EQ_INT(r.status, 200);
    CHECK(cJSON_GetArraySize(cJSON_GetObjectItem(r.json, "holds")) == 2);
    h_resp_free(&r);
    /* Both done by 3.3 s; the renewer sees it within a third of the TTL. */
    char rcfile[160], rc[16] = "";
    snprintf(rcfile, sizeof rcfile, "%s/rc", dir);
    long long until = h_now_ms() + 5000;
    while (h_now_ms() < until && status_of("GET", gw.port, loc, NULL, NULL) != 404) h_sleep_ms(100);
    CHECK_EQ_INT(status_of("GET", gw.port, loc, NULL, NULL), 404);
    h_sleep_ms(300);
    f = fopen(rcfile, "r");
    if (f) {
        if (!fgets(rc, sizeof rc, f)) rc[0] = '\0';
        fclose(f);
    }
    CHECK_EQ_STR(rc, "00\n");
    CHECK_EQ_INT(status_of("GET", gw.port, "/v1/locks/lr1", NULL, NULL), 404);
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    CHECK(system(cmd) == 0);
}

/* ---- the other Redis modes ----------------------------------------------------------- */

/* Quorum mode (three masters): a session lives on every master; a bound
 * hold outlives a master's loss; DELETE frees it; multi-lock all or
 * nothing. */
/* Quorum mode: masters may list different holds in their copies of a
 * session (a grant a minority refused).  m[0], the first master, holds the
 * name for another client, so the bound grant comes from m[1] and m[2]
 * and m[0]'s session lists nothing.  A renewal must still reach the hold
 * (the masters' lists are joined, sessions_fan.c): past the session's
 * first end the name is still held on the quorum, so another client gets
 * 409, and the session still lists the hold. */
static void quorum_lists_joined(int port, struct h_redis *m) {
    const char *busy = "EVAL \"local t = redis.call('TIME') local now = t[1] * 1000 + "
                       "math.floor(t[2] / 1000) redis.call('HSET', KEYS[1], 'x', "
                       "struct.pack('<sI4I7I6I4', 'Other000000000000000000', 1, 5, now + 60000, "
                       "60000)) redis.call('PEXPIRE', KEYS[1], 70000)\" 1 'lockgate:lock:{qu1}'";
    h_redis_cli(&m[0], busy);
    struct h_resp r = h_http("POST", port, "/v1/sessions", NULL, "{\"ttl_ms\":2500}", NULL);
    CHECK_EQ_INT(r.status, 201);
    char s[160], loc[200], held[160];
    snprintf(s, sizeof s, "%s", h_header(&r, "Session") ? h_header(&r, "Session") : "");
    h_resp_free(&r);
    snprintf(loc, sizeof loc, "/v1/sessions/%s", s);
    long long t0 = h_now_ms();
    CHECK_EQ_INT(bound_acquire(port, "/v1/locks/qu1", s, NULL, held, NULL), 201);
    CHECK_EQ_INT(status_of("PATCH", port, loc, NULL, "{\"ttl_ms\":6000}"), 200);
    while (h_now_ms() < t0 + 2500 + 300) h_sleep_ms(20); /* past the session's first end */
    CHECK_EQ_INT(status_of("POST", port, "/v1/locks/qu1", NULL, "{}"), 409);
    r = h_http("GET", port, loc, NULL, NULL, NULL);
    CHECK_EQ_INT(r.status, 200);
    CHECK(r.body && strstr(r.body, held) != NULL);
    h_resp_free(&r);
    CHECK_EQ_INT(status_of("DELETE", port, loc, NULL, NULL), 200);
    h_redis_cli(&m[0], "DEL 'lockgate:lock:{qu1}'");
}

static void test_quorum_mode(void) {
    struct h_redis m[3];
    struct h_gw q = {0};
    for (int i = 0; i < 3; i++) CHECK(h_redis_start(&m[i], 0, NULL) == 0);
    char flags[256];
    snprintf(flags, sizeof flags,
             "--redis redis://127.0.0.1:%d --redis redis://127.0.0.1:%d --redis-timeout-ms 500",
             m[1].port, m[2].port);
    CHECK(h_gw_up(&q, &m[0], flags) == 0);
    h_sleep_ms(300);
    quorum_lists_joined(q.port, m);
    struct h_resp r = h_http("POST", q.port, "/v1/sessions", NULL, "{\"ttl_ms\":1500}", NULL);
    CHECK_EQ_INT(r.status, 201);
    char s[160], hdr[200], loc[200], held[160];
    snprintf(s, sizeof s, "%s", h_header(&r, "Session") ? h_header(&r, "Session") : "");
    h_resp_free(&r);
    snprintf(hdr, sizeof hdr, "Session: %s", s);
    snprintf(loc, sizeof loc, "/v1/sessions/%s", s);
    for (int i = 0; i < 3; i++) {
        char cmd[200];
        snprintf(cmd, sizeof cmd, "EXISTS lockgate:session:{%s}", s);
        const char *e = h_redis_cli(&m[i], cmd);
        CHECK(e && strcmp(e, "1") == 0);
    }
    r = h_http("POST", q.port, "/v1/locks/qs1", NULL, "{}", hdr);
    CHECK_EQ_INT(r.status, 201);
    long long f1 = h_jint(&r, "fence");
    snprintf(held, sizeof held, "%s", h_token(&r));
    h_resp_free(&r);
    /* One master lost: renewals and the hold go on with the other two. */
    h_redis_kill(&m[2]);
    h_sleep_ms(1000);
    CHECK_EQ_INT(status_of("PATCH", q.port, loc, NULL, "{\"ttl_ms\":3000}"), 200);
    h_sleep_ms(1000); /* past the first end */
    CHECK_EQ_INT(status_of("POST", q.port, "/v1/locks/qs1", NULL, "{}"), 409);
    r = h_http("PATCH", q.port, "/v1/locks/qs1", held, "{}", NULL);
    CHECK_EQ_INT(r.status, 409);
    CHECK_EQ_STR(h_jcode(&r), "session_bound");
    h_resp_free(&r);
    r = h_http("GET", q.port, loc, NULL, NULL, NULL);
    CHECK_EQ_INT(r.status, 200);
    CHECK(strstr(r.body, held) != NULL);
    h_resp_free(&r);
    CHECK_EQ_INT(status_of("DELETE", q.port, loc, NULL, NULL), 200);
    r = h_http("POST", q.port, "/v1/locks/qs1", NULL, "{}", NULL);
    CHECK_EQ_INT(r.status, 201);
    CHECK(h_jint(&r, "fence") > f1);
    h_resp_free(&r);

    /* Multi-lock: all or nothing, on a quorum. */
    r = h_http("POST", q.port, "/v1/locks", NULL, "{\"names\":[\"qm1\",\"qs1\"]}", NULL);
    CHECK_EQ_INT(r.status, 409);
    h_resp_free(&r);
    CHECK_EQ_INT(status_of("GET", q.port, "/v1/locks/qm1", NULL, NULL), 404);
    r = h_http("POST", q.port, "/v1/locks", NULL, "{\"names\":[\"qm1\",\"qm2\"]}", NULL);
    CHECK_EQ_INT(r.status, 201);
    char mt[160];
    snprintf(mt, sizeof mt, "%s", h_token(&r));
    h_resp_free(&r);
    CHECK_EQ_INT(status_of("PATCH", q.port, "/v1/locks", mt, "{\"names\":[\"qm1\",\"qm2\"]}"), 200);
    CHECK_EQ_INT(status_of("DELETE", q.port, "/v1/locks", mt, "{\"names\":[\"qm1\",\"qm2\"]}"),
                 200);
    CHECK_EQ_INT(status_of("GET", q.port, "/v1/locks/qm2", NULL, NULL), 404);
    hold_delay_outlives_session_on(q.port, "qhd1");
    reentry_session_on(q.port, "qrs1");
    h_gw_stop(&q, 5000);
    for (int i = 0; i < 3; i++) h_redis_stop(&m[i]);
}

/* --min-replicas-ack: sessions, bound holds and multi-locks are answered
 * once the replica has them; with the replica gone, 503. */
static void test_replica_ack_mode(void) {
    struct h_redis master, replica;
    struct h_gw a = {0};
    CHECK(h_redis_start(&master, 0, NULL) == 0);
    CHECK(h_replica_start(&replica, &master) == 0);
    CHECK(h_gw_up(&a, &master, "--min-replicas-ack 1 --replica-ack-timeout-ms 300") == 0);
    struct h_resp r = h_http("POST", a.port, "/v1/sessions", NULL, "{}", NULL);
    CHECK_EQ_INT(r.status, 201);
    char hdr[200];
    snprintf(hdr, sizeof hdr, "Session: %s",
             h_header(&r, "Session") ? h_header(&r, "Session") : "");
    h_resp_free(&r);
    r = h_http("POST", a.port, "/v1/locks/ra1", NULL, "{}", hdr);
    CHECK_EQ_INT(r.status, 201);
    h_resp_free(&r);
    CHECK_EQ_INT(status_of("POST", a.port, "/v1/locks", NULL, "{\"names\":[\"ra2\",\"ra3\"]}"),
                 201);
    h_redis_kill(&replica);
    h_sleep_ms(300);
    CHECK_EQ_INT(status_of("POST", a.port, "/v1/sessions", NULL, "{}"), 503);
    CHECK_EQ_INT(status_of("POST", a.port, "/v1/locks", NULL, "{\"names\":[\"ra4\",\"ra5\"]}"),
                 503);
    /* Given back: nothing stays held. */
    CHECK_EQ_INT(status_of("GET", a.port, "/v1/locks/ra4", NULL, NULL), 404);
    h_gw_stop(&a, 5000);
    h_redis_stop(&master);
}

/* --min-replicas-ack: a multi-lock whose WAIT outlasts its lease is given
 * back, not answered 201 (issue 34: it used to answer a negative ttl_ms).
 * The replica is frozen until the lease has surely run out (the name is
 * free again), then let go, so the WAIT is answered with its ack. */
struct ack_call {
    int port;      /* the gateway */
    long status;   /* the answer's status */
    long long ttl; /* its ttl_ms when 201 */
};

static void *ack_main(void *arg) {
    struct ack_call *a = arg;
    struct h_resp r = h_http("POST", a->port, "/v1/locks", NULL,
                             "{\"names\":[\"rw1\",\"rw2\"],\"ttl_ms\":300}", NULL);
    a->status = r.status;
    a->ttl = r.status == 201 ? h_jint(&r, "ttl_ms") : 0;
    if (r.status != 409) fprintf(stderr, "    multi-lock: %ld %s\n", r.status, r.body);
    h_resp_free(&r);
    return NULL;
}

static void test_replica_ack_outlasts_lease(void) {
    struct h_redis master, replica;
    struct h_gw a = {0}, b = {0};
    CHECK(h_redis_start(&master, 0, NULL) == 0);
    CHECK(h_replica_start(&replica, &master) == 0);
    CHECK(h_replica_wait_link(&replica, 10000) == 0);
    CHECK(h_gw_up(&a, &master,
                  "--min-replicas-ack 1 --replica-ack-timeout-ms 8000 --redis-timeout-ms 10000") ==
          0);
    /* The WAIT holds a's connection: b looks at the lock meanwhile. */
    CHECK(h_gw_up(&b, &master, NULL) == 0);
    CHECK_EQ_INT(h_freeze(replica.pid), 0);
    struct ack_call c = {.port = a.port};
    pthread_t th;
    CHECK_EQ_INT(pthread_create(&th, NULL, ack_main, &c), 0);
    /* Taken (the script ran), then its 300 ms lease over: free again. */
    long long until = h_now_ms() + 5000;
    while (status_of("GET", b.port, "/v1/locks/rw1", NULL, NULL) != 200 && h_now_ms() < until)
        h_sleep_ms(5);
    while (status_of("GET", b.port, "/v1/locks/rw1", NULL, NULL) == 200 && h_now_ms() < until)
        h_sleep_ms(5);
    kill(replica.pid, SIGCONT);
    pthread_join(th, NULL);
    if (c.status == 201) fprintf(stderr, "    answered 201 with ttl_ms %lld\n", c.ttl);
    CHECK_EQ_INT(c.status, 409);
    CHECK_EQ_INT(status_of("GET", b.port, "/v1/locks/rw2", NULL, NULL), 404);
    h_gw_stop(&a, 5000);
    h_gw_stop(&b, 5000);
    h_redis_stop(&replica);
    h_redis_stop(&master);
}

/* Sentinel mode: a session and its bound hold live through a failover
 * (the replica had them), and end as anywhere else. */
static void test_sentinel_mode(void) {
    struct h_redis master, replica, sen;
    struct h_gw g = {0};
    CHECK(h_redis_start(&master, 0, NULL) == 0);
    CHECK(h_replica_start(&replica, &master) == 0);
    CHECK(h_sentinel_start(&sen, &master, "sm", 1, 1000, 3000) == 0);
    CHECK(h_sentinel_wait_ready(&sen, "sm", 0, 1, 15000) == 0);
    char flags[160];
    snprintf(flags, sizeof flags, "--sentinel 127.0.0.1:%d --sentinel-master sm", sen.port);
    CHECK(h_gw_up(&g, &master, flags) == 0);
    /* Ready once it has found the master through Sentinel. */
    long long ready_by = h_now_ms() + 15000;
    while (h_now_ms() < ready_by && status_of("GET", g.port, "/readyz", NULL, NULL) != 200)
        h_sleep_ms(100);
    struct h_resp r = h_http("POST", g.port, "/v1/sessions", NULL, "{\"ttl_ms\":30000}", NULL);
    CHECK_EQ_INT(r.status, 201);
    char hdr[200], loc[200];
    snprintf(hdr, sizeof hdr, "Session: %s",
             h_header(&r, "Session") ? h_header(&r, "Session") : "");
    snprintf(loc, sizeof loc, "/v1/sessions/%s", h_jstr(&r, "token") ? h_jstr(&r, "token") : "");
    h_resp_free(&r);
    r = h_http("POST", g.port, "/v1/locks/sn1", NULL, "{}", hdr);
    CHECK_EQ_INT(r.status, 201);
    h_resp_free(&r);
    h_sleep_ms(300); /* the replica has it */
    h_redis_kill(&master);
    /* Sentinel promotes the replica; the gateway follows. */
    long long until = h_now_ms() + 20000;
    long st = 0;
    while (h_now_ms() < until && (st = status_of("PATCH", g.port, loc, NULL, "{}")) != 200)
        h_sleep_ms(200);
    CHECK_EQ_INT(st, 200);
    CHECK_EQ_INT(status_of("POST", g.port, "/v1/locks/sn1", NULL, "{}"), 409);
    CHECK_EQ_INT(status_of("DELETE", g.port, loc, NULL, NULL), 200);
    CHECK_EQ_INT(status_of("POST", g.port, "/v1/locks/sn1", NULL, "{}"), 201);
    hold_delay_outlives_session_on(g.port, "snhd1");
    h_gw_stop(&g, 5000);
    h_redis_stop(&sen);
    h_redis_stop(&replica);
    h_redis_stop(&master);
}

/* Multi-lock's no-deadlock guarantee, exactly as README states it (docs/
 * sessions-and-multi.md): a multi-lock holds nothing while it waits, so it
 * never takes part in a wait cycle of holds; but a fair multi-lock's queue
 * entries do reserve its names, free ones included, so a client that holds
 * one of those names and asks for another waits behind it, bounded by its
 * own wait_ms (409, fair waiters ahead), and the multi-lock goes on as soon
 * as the held name is released.  Nothing waits forever. */
static void test_multi_fair_reserves_bounded(void) {
    struct h_resp r = H("POST", "/v1/locks/dl.a", NULL, "{\"ttl_ms\":20000}");
    CHECK_EQ_INT(r.status, 201);
    char tok[160];
    snprintf(tok, sizeof tok, "%s", h_token(&r));
    h_resp_free(&r);
    struct waiter_call m;
    waiter_start(&m, gw.port, "/v1/locks",
                 "{\"names\":[\"dl.a\",\"dl.b\"],\"wait_ms\":10000,\"fair\":true,\"ttl_ms\":5000}");
    /* Queued on both names, the free dl.b included. */
    long long until = h_now_ms() + 5000;
    const char *q = NULL;
    while (h_now_ms() < until) {
        q = h_redis_cli(&redis, "ZCARD lockgate:lock:{dl.b}:q");
        if (q && strcmp(q, "1") == 0) break;
        h_sleep_ms(10);
    }
    CHECK(q && strcmp(q, "1") == 0);
    /* The holder of dl.a asks for dl.b: it waits behind the multi-lock, for
     * its own wait_ms and no longer. */
    long long t0 = h_now_ms();
    r = h_http("POST", gw.port, "/v1/locks/dl.b", tok, "{\"wait_ms\":600}", NULL);
    long long took = h_now_ms() - t0;
    CHECK_EQ_INT(r.status, 409);
    CHECK(r.body && strstr(r.body, "fair waiters are queued ahead") != NULL);
    h_resp_free(&r);
    CHECK(took >= 550 && took < 600 + SLACK_MS);
    /* It lets go of dl.a: the multi-lock takes both. */
    long long t1 = h_now_ms();
    CHECK_EQ_INT(status_of("DELETE", gw.port, "/v1/locks/dl.a", tok, NULL), 200);
    pthread_join(m.th, NULL);
    CHECK_EQ_INT(m.status, 201);
    CHECK(m.t_done - t1 < SLACK_MS);
}

/* Fair multi-locks queue on every name with one arrival: the first to come
 * is served first even when a later one's names free up earlier. */
static void test_multi_fair(void) {
    struct h_resp r = H("POST", "/v1/locks/fa", NULL, "{\"ttl_ms\":10000}");
    char ta[160];
    snprintf(ta, sizeof ta, "%s", h_token(&r));
    h_resp_free(&r);
    struct waiter_call first, second;
    waiter_start(&first, gw.port, "/v1/locks",
                 "{\"names\":[\"fa\",\"fb\"],\"wait_ms\":8000,\"fair\":true,\"ttl_ms\":500}");
    h_sleep_ms(300);
    /* fb is free, but the first waiter is queued on it: a later fair
     * multi-lock over fb alone waits its turn. */
    waiter_start(&second, gw2.port, "/v1/locks",
                 "{\"names\":[\"fb\"],\"wait_ms\":8000,\"fair\":true}");
    h_sleep_ms(300);
    CHECK_EQ_INT(status_of("GET", gw.port, "/v1/locks/fb", NULL, NULL), 404);
    CHECK_EQ_INT(status_of("DELETE", gw.port, "/v1/locks/fa", ta, NULL), 200);
    pthread_join(first.th, NULL);
    pthread_join(second.th, NULL);
    CHECK_EQ_INT(first.status, 201);
    CHECK_EQ_INT(second.status, 201);
    CHECK(first.t_done <= second.t_done);
    CHECK(second.t_done - first.t_done >= 400); /* after first's 500 ms lease */
}

/* Outside Redis Cluster a bound lock is live (lua/_holders.lua, "sessions"):
 * its lease is its session's field in <prefix>gw, so a renewal moves that
 * field and leaves the lock's record as it is, and the lock's hash lasts
 * the horizon (an hour) past the session's end, never less than a renewal
 * set it to. */
static void test_session_lease_live(void) {
    char *tok = session_new("{\"ttl_ms\":5000}");
    CHECK_EQ_INT(bound_acquire(gw.port, "/v1/locks/hz1", tok, NULL, NULL, NULL), 201);
    char cmd[200];
    snprintf(cmd, sizeof cmd, "hget lockgate:gw %s", tok);
    long long end1 = atoll(h_redis_cli(&redis, cmd));
    CHECK(end1 > 0);
    char rec[512];
    snprintf(rec, sizeof rec, "%s", h_redis_cli(&redis, "hget lockgate:lock:{hz1} x"));
    long long pttl = atoll(h_redis_cli(&redis, "pttl lockgate:lock:{hz1}"));
    /* Session end (5 s) + the hour's horizon + the 10 s fence keep. */
    CHECK(pttl > 3600000 && pttl <= 5000 + 3600000 + 10000 + 2);
    char loc[200];
    snprintf(loc, sizeof loc, "/v1/sessions/%s", tok);
    struct h_resp r = H("PATCH", loc, NULL, "{\"ttl_ms\":60000}");
    CHECK_EQ_INT(r.status, 200);
    CHECK(h_jint(&r, "holds") == 1);
    h_resp_free(&r);
    /* The field moved 55 s later; the record did not change. */
    long long end2 = atoll(h_redis_cli(&redis, cmd));
    CHECK(end2 >= end1 + 54000);
    CHECK_EQ_STR(h_redis_cli(&redis, "hget lockgate:lock:{hz1} x"), rec);
    r = H("GET", "/v1/locks/hz1", NULL, NULL);
    CHECK(h_jint(&r, "ttl_ms") > 55000 && h_jint(&r, "ttl_ms") <= 60000);
    h_resp_free(&r);
    pttl = atoll(h_redis_cli(&redis, "pttl lockgate:lock:{hz1}"));
    CHECK(pttl > 3600000 + 55000 && pttl <= 60000 + 3600000 + 10000 + 2);
    /* A renewal to a shorter ttl leaves the hash's expiry where it was. */
    r = H("PATCH", loc, NULL, "{\"ttl_ms\":2000}");
    CHECK_EQ_INT(r.status, 200);
    h_resp_free(&r);
    CHECK(atoll(h_redis_cli(&redis, "pttl lockgate:lock:{hz1}")) > 3600000 + 55000);
    /* The field gone (its gateway would have stopped renewing it
     * LIVE_KEEP_MS ago): nobody holds the lock, though its record says
     * nothing of it. */
    snprintf(cmd, sizeof cmd, "hdel lockgate:gw %s", tok);
    h_redis_cli(&redis, cmd);
    CHECK_EQ_INT(status_of("GET", gw.port, "/v1/locks/hz1", NULL, NULL), 404);
    CHECK_EQ_INT(status_of("POST", gw.port, "/v1/locks/hz1", NULL, "{\"ttl_ms\":1000}"), 201);
    CHECK_EQ_INT(status_of("DELETE", gw.port, loc, NULL, NULL), 200);
    free(tok);
}

/* A session whose liveness field is gone (an operator's DEL <prefix>gw,
 * an eviction) has lost its live holds: a hold bound to it now would be
 * ended as it is granted, and a renewal would bring back, unannounced,
 * the holds nobody judged meanwhile.  So nothing binds to it, and its
 * renewal says it is gone (404 session_not_found). */
static void test_session_liveness_field_lost(void) {
    char *tok = session_new("{\"ttl_ms\":20000}");
    CHECK_EQ_INT(bound_acquire(gw.port, "/v1/locks/lf1", tok, NULL, NULL, NULL), 201);
    char cmd[200], hdr[200], loc[200];
    snprintf(cmd, sizeof cmd, "hdel lockgate:gw %s", tok);
    h_redis_cli(&redis, cmd);
    snprintf(hdr, sizeof hdr, "Session: %s", tok);
    struct h_resp r = h_http("POST", gw.port, "/v1/locks/lf2", NULL, "{}", hdr);
    CHECK_EQ_INT(r.status, 404);
    CHECK_EQ_STR(h_jcode(&r), "session_not_found");
    h_resp_free(&r);
    snprintf(loc, sizeof loc, "/v1/sessions/%s", tok);
    CHECK_EQ_INT(status_of("GET", gw.port, loc, NULL, NULL), 404);
    r = H("PATCH", loc, NULL, "{}");
    CHECK_EQ_INT(r.status, 404);
    CHECK_EQ_STR(h_jcode(&r), "session_not_found");
    h_resp_free(&r);
    /* And lf1 stays free: the renewal wrote no field back. */
    CHECK_EQ_INT(status_of("GET", gw.port, "/v1/locks/lf1", NULL, NULL), 404);
    CHECK_EQ_INT(status_of("GET", gw.port, "/v1/locks/lf2", NULL, NULL), 404);
    free(tok);
}

/* GET path's ttl_ms, or -1 when nobody holds it. */
static long long held_ttl(const char *path) {
    struct h_resp r = H("GET", path, NULL, NULL);
    long long ttl = r.status == 200 ? h_jint(&r, "ttl_ms") : -1;
    h_resp_free(&r);
    return ttl;
}

/* A session from key layout 2 (no horizon h, no liveness field) after the
 * upgrade: holds bound to it carry its lease until its first renewal here,
 * later ones are live, and every renewal moves both kinds, to a longer
 * end and to a shorter one; both end with it. */
static void test_layout2_session_mixed_holds(void) {
    char *tok = session_new("{\"ttl_ms\":4000}");
    char cmd[200], loc[200];
    snprintf(cmd, sizeof cmd, "hdel lockgate:session:{%s} h", tok);
    h_redis_cli(&redis, cmd);
    snprintf(cmd, sizeof cmd, "hdel lockgate:gw %s", tok);
    h_redis_cli(&redis, cmd);
    CHECK_EQ_INT(bound_acquire(gw.port, "/v1/locks/l2m.a", tok, NULL, NULL, NULL), 201);
    snprintf(loc, sizeof loc, "/v1/sessions/%s", tok);
    struct h_resp r = H("PATCH", loc, NULL, "{\"ttl_ms\":4000}");
    CHECK_EQ_INT(r.status, 200);
    CHECK_EQ_INT(h_jint(&r, "holds"), 1);
    h_resp_free(&r);
    CHECK_EQ_INT(bound_acquire(gw.port, "/v1/locks/l2m.b", tok, NULL, NULL, NULL), 201);
    r = H("PATCH", loc, NULL, "{\"ttl_ms\":30000}");
    CHECK_EQ_INT(r.status, 200);
    CHECK_EQ_INT(h_jint(&r, "holds"), 2);
    h_resp_free(&r);
    CHECK(held_ttl("/v1/locks/l2m.a") > 25000);
    CHECK(held_ttl("/v1/locks/l2m.b") > 25000);
    r = H("PATCH", loc, NULL, "{\"ttl_ms\":500}");
    CHECK_EQ_INT(r.status, 200);
    h_resp_free(&r);
    CHECK(held_ttl("/v1/locks/l2m.a") <= 500);
    CHECK(held_ttl("/v1/locks/l2m.b") <= 500);
    long long t0 = h_now_ms();
    while ((held_ttl("/v1/locks/l2m.a") >= 0 || held_ttl("/v1/locks/l2m.b") >= 0) &&
           h_now_ms() - t0 < 3000)
        h_sleep_ms(10);
    CHECK_EQ_INT(held_ttl("/v1/locks/l2m.a"), -1);
    CHECK_EQ_INT(held_ttl("/v1/locks/l2m.b"), -1);
    free(tok);
}

/* Redis's count of calls of command cmd (lowercase) so far, scripts'
 * included. */
static long long calls_of(const char *cmd) {
    char needle[64];
    snprintf(needle, sizeof needle, "cmdstat_%s:calls=", cmd);
    const char *info = h_redis_cli(&redis, "info commandstats");
    const char *at = info ? strstr(info, needle) : NULL;
    return at ? atoll(at + strlen(needle)) : 0;
}

/* Outside Redis Cluster every live session keeps a field in the liveness
 * hash, which every gateway's beat (lua/liveness.lua) prunes: with many
 * sessions a beat reads a page of it, never the whole hash (HGETALL of
 * 10,000 fields is 3 ms of Redis a beat, per gateway). */
static void test_liveness_beat_reads_a_page(void) {
    /* 3,000 sessions' fields (their ends an hour away), then a few beats
     * of both gateways: no beat reads the whole hash. */
    h_redis_cli(&redis, "eval \"local t = redis.call('time') local e = t[1] * 1000 + 3600000 "
                        "for i = 1, 3000 do redis.call('hset', KEYS[1], "
                        "string.format('zzbeat%016d', i), e) end return 1\" 1 lockgate:gw");
    long long before = calls_of("hgetall"), scans = calls_of("hscan");
    char cmd[200];
    snprintf(cmd, sizeof cmd,
             "eval \"local n = 0 for _, f in ipairs(redis.call('hkeys', "
             "KEYS[1])) do if #f == 12 then n = n + 1 end end return n\" 1 "
             "lockgate:gw");
    long long gateways = atoll(h_redis_cli(&redis, cmd));
    /* Each gateway's field moved twice: two beats each, at least. */
    long long t0 = h_now_ms();
    while (calls_of("hscan") - scans < 2 * gateways && h_now_ms() - t0 < 5000) h_sleep_ms(20);
    long long read_all = calls_of("hgetall") - before;
    fprintf(stderr, "    3,000 session fields: %lld page reads, %lld whole reads in %lld ms\n",
            calls_of("hscan") - scans, read_all, h_now_ms() - t0);
    CHECK(calls_of("hscan") - scans >= 2 * gateways);
    CHECK_EQ_INT(read_all, 0);
    /* And fields over (a minute past their end) still go, a page a beat. */
    h_redis_cli(&redis, "eval \"local t = redis.call('time') local e = t[1] * 1000 - 120000 "
                        "for i = 1, 3000 do redis.call('hset', KEYS[1], "
                        "string.format('zzbeat%016d', i), e) end return 1\" 1 lockgate:gw");
    long long left = 3000;
    for (t0 = h_now_ms(); left >= 3000 && h_now_ms() - t0 < 5000; h_sleep_ms(20))
        left = atoll(h_redis_cli(&redis, "eval \"local n = 0 for _, f in ipairs(redis.call("
                                         "'hkeys', KEYS[1])) do if string.sub(f, 1, 6) == "
                                         "'zzbeat' then n = n + 1 end end return n\" 1 "
                                         "lockgate:gw"));
    CHECK(left < 3000);
    h_redis_cli(&redis, "eval \"for i = 1, 3000 do redis.call('hdel', KEYS[1], "
                        "string.format('zzbeat%016d', i)) end return 1\" 1 lockgate:gw");
}

/* Every lock listed under prefix, following the cursor (a page may hold
 * fewer than asked, even none, before the end); the number of locks, and
 * the first holder's ttl_ms into *ttl when given. */
static int listed(const char *prefix, double *ttl) {
    char path[300], cursor[200] = "";
    int n = 0;
    for (int pages = 0; pages < 1000; pages++) {
        snprintf(path, sizeof path, "/v1/locks?prefix=%s&cursor=%s", prefix, cursor);
        struct h_resp r = H("GET", path, NULL, NULL);
        cJSON *locks = cJSON_GetObjectItem(r.json, "locks");
        for (int i = 0; i < cJSON_GetArraySize(locks); i++, n++) {
            cJSON *h =
                cJSON_GetArrayItem(cJSON_GetObjectItem(cJSON_GetArrayItem(locks, i), "holders"), 0);
            if (ttl && n == 0) *ttl = cJSON_GetNumberValue(cJSON_GetObjectItem(h, "ttl_ms"));
        }
        const char *c = h_jstr(&r, "cursor");
        snprintf(cursor, sizeof cursor, "%s", c ? c : "");
        h_resp_free(&r);
        if (!cursor[0]) break;
    }
    return n;
}

/* Operators' routes on session-bound holds: a listing shows the session's
 * remaining time (not the record's far-future lease end) and nothing once
 * the session is gone; a forced release takes the hold off its session. */
static void test_session_listing_and_force(void) {
    char *tok = session_new("{\"ttl_ms\":20000}");
    CHECK_EQ_INT(bound_acquire(gw.port, "/v1/locks/sl.a", tok, NULL, NULL, NULL), 201);
    CHECK_EQ_INT(bound_acquire(gw.port, "/v1/locks/sl.b", tok, NULL, NULL, NULL), 201);
    double ttl = 0;
    CHECK_EQ_INT(listed("sl.", &ttl), 2);
    CHECK(ttl > 10000 && ttl <= 20000);
    CHECK_EQ_INT(status_of("DELETE", gw.port, "/v1/locks/sl.a?force=true", NULL, NULL), 200);
    char loc[200];
    snprintf(loc, sizeof loc, "/v1/sessions/%s", tok);
    struct h_resp r = H("GET", loc, NULL, NULL);
    CHECK_EQ_INT(cJSON_GetArraySize(cJSON_GetObjectItem(r.json, "holds")), 1);
    CHECK(strstr(r.body, "sl.b") != NULL && strstr(r.body, "sl.a") == NULL);
    h_resp_free(&r);

    CHECK_EQ_INT(status_of("DELETE", gw.port, loc, NULL, NULL), 200);
    CHECK_EQ_INT(listed("sl.", NULL), 0);
    free(tok);
}

int main(int argc, char **argv) {
    check_filter(argc > 1 ? argv[1] : NULL);
    if (h_redis_start(&redis, 0, NULL) < 0 || h_gw_up(&gw, &redis, NULL) < 0 ||
        h_gw_up(&gw2, &redis, NULL) < 0)
        return 2;
    RUN_SOME(test_session_routes);
    RUN_SOME(test_thousand_holds_one_patch);
    if (!h_cluster_mode()) RUN_SOME(test_session_lease_live); /* reads the lock's own Redis */
    if (!h_cluster_mode()) RUN_SOME(test_session_liveness_field_lost); /* live holds */
    if (!h_cluster_mode()) RUN_SOME(test_layout2_session_mixed_holds); /* live holds */
    if (!h_cluster_mode()) RUN_SOME(test_liveness_beat_reads_a_page);  /* one liveness hash */
    RUN_SOME(test_session_listing_and_force);
    RUN_SOME(test_expiry_wakes_and_delays);
    RUN_SOME(test_delete_with_fair_waiter);
    RUN_SOME(test_hold_delay_outlives_session);
    RUN_SOME(test_reentry_session_header);
    RUN_SOME(test_reentry_without_session_header);
    RUN_SOME(test_multi_routes);
    RUN_SOME(test_multi_reentry_real_lease);
    RUN_SOME(test_multi_takes_nothing);
    RUN_SOME(test_multi_hammer);
    /* One master's order: across slots a later group is not queued on until
     * reached (docs/sessions-and-multi.md; test_cluster_mode tests what holds). */
    if (!h_cluster_mode()) RUN_SOME(test_multi_fair);
    if (!h_cluster_mode()) RUN_SOME(test_multi_fair_reserves_bounded); /* one master's queues */
    RUN_SOME(test_lockctl_session);
    if (!h_cluster_mode()) RUN_SOME(test_quorum_mode);      /* single-master design or own Redis */
    if (!h_cluster_mode()) RUN_SOME(test_replica_ack_mode); /* single-master design or own Redis */
    if (!h_cluster_mode()) RUN_SOME(test_replica_ack_outlasts_lease); /* own Redis */
    if (!h_cluster_mode()) RUN_SOME(test_sentinel_mode); /* single-master design or own Redis */
    CHECK_EQ_INT(h_gw_stop(&gw, 5000), 0);
    CHECK_EQ_INT(h_gw_stop(&gw2, 5000), 0);
    h_redis_stop(&redis);
    return check_summary("sessions");
}
