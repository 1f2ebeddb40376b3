/* test_quota.c -- a key's "holds_at_once" across gateways (the auth file's
 * "limits"; docs/security.md, "Quotas"; handlers/quota_holds.h): two
 * gateways on one Redis (or Redis Cluster, LOCKGATE_TEST_CLUSTER), a key
 * "team" that may hold 3 at once, a key "free" without a limit.  The last
 * case runs the same in quorum mode (3 masters). */
#include "tests/integration/harness.h"

#include <pthread.h>
#include <sys/types.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define LIMIT       3
#define SECRET_TEAM "teamTEAMteamTEAMteamTEAMteamTEAMteamTEAM123"
#define SECRET_FREE "freeFREEfreeFREEfreeFREEfreeFREEfreeFREE123"
#define TEAM        "Authorization: Bearer team." SECRET_TEAM
#define FREE        "Authorization: Bearer free." SECRET_FREE

static struct h_redis redis;
static struct h_gw gw[2];
static char dir[64], auth_path[128];

static void sha256_hex(const char *s, char out[65]) {
    char cmd[256];
    snprintf(cmd, sizeof cmd, "printf %%s '%s' | sha256sum", s);
    FILE *p = popen(cmd, "r");
    out[0] = '\0';
    if (p) {
        if (fscanf(p, "%64s", out) != 1) out[0] = '\0';
        pclose(p);
    }
}

static void write_keys(void) {
    char team[65], free_[65], text[2048];
    sha256_hex(SECRET_TEAM, team);
    sha256_hex(SECRET_FREE, free_);
    const char *grants = "[{\"kind\":\"locks\",\"prefix\":\"\",\"access\":\"write\"},"
                         "{\"kind\":\"semaphores\",\"prefix\":\"\",\"access\":\"write\"},"
                         "{\"kind\":\"ops\",\"prefix\":\"\",\"access\":\"read\"}]";
    const char *admin = "[{\"kind\":\"locks\",\"prefix\":\"\",\"access\":\"write\"},"
                        "{\"kind\":\"semaphores\",\"prefix\":\"\",\"access\":\"write\"},"
                        "{\"kind\":\"ops\",\"prefix\":\"\",\"access\":\"read\"},"
                        "{\"kind\":\"admin\",\"prefix\":\"\",\"access\":\"write\"}]";
    snprintf(text, sizeof text,
             "{\"keys\":[{\"id\":\"team\",\"sha256\":\"%s\",\"grants\":%s,"
             "\"limits\":{\"holds_at_once\":%d}},"
             "{\"id\":\"free\",\"sha256\":\"%s\",\"grants\":%s}]}\n",
             team, grants, LIMIT, free_, admin);
    FILE *f = fopen(auth_path, "w");
    if (!f) return;
    fputs(text, f);
    fclose(f);
}

/* POSTs an acquisition on gateway g as a key; returns the status, the
 * token in tok (when given). */
static long take(int g, const char *path, const char *body, const char *auth, char *tok) {
    struct h_resp r =
        h_http("POST", gw[g].port, path, NULL, body ? body : "{\"ttl_ms\":30000}", auth);
    long st = r.status;
    if (tok) snprintf(tok, 64, "%s", h_token(&r));
    h_resp_free(&r);
    return st;
}

static long drop(int g, const char *path, const char *tok, const char *auth) {
    struct h_resp r = h_http("DELETE", gw[g].port, path, tok, NULL, auth);
    long st = r.status;
    h_resp_free(&r);
    return st;
}

/* Locks, shared locks and permits on two gateways count together; the
 * fourth hold is refused 429 quota_exceeded with Retry-After, counted on
 * the gateway that refused it; a re-entry is no new hold; a release makes
 * room; another key is not held back. */
static void test_quota_across_gateways(void) {
    char t1[64], t2[64], t3[64], t4[64];
    CHECK_EQ_INT(take(0, "/v1/locks/qa-1", NULL, TEAM, t1), 201);
    CHECK_EQ_INT(take(1, "/v1/locks/qa-2", "{\"ttl_ms\":30000,\"mode\":\"shared\"}", TEAM, t2),
                 201);
    CHECK_EQ_INT(take(0, "/v1/semaphores/qa-3", "{\"ttl_ms\":30000,\"limit\":5}", TEAM, t3), 201);
    struct h_resp r =
        h_http("POST", gw[1].port, "/v1/locks/qa-4", NULL, "{\"ttl_ms\":30000}", TEAM);
    CHECK_EQ_INT(r.status, 429);
    CHECK_EQ_STR(h_jcode(&r), "quota_exceeded");
    CHECK(h_header(&r, "Retry-After") && atoi(h_header(&r, "Retry-After")) >= 1);
    CHECK(strstr(h_header(&r, "Content-Type") ? h_header(&r, "Content-Type") : "",
                 "application/problem+json") != NULL);
    h_resp_free(&r);
    /* nothing of the refused one is held */
    r = h_http("GET", gw[0].port, "/v1/locks/qa-4", NULL, NULL, TEAM);
    CHECK_EQ_INT(r.status, 404);
    h_resp_free(&r);
    /* a re-entry of a lock it holds is no new hold */
    struct h_resp re = h_http("POST", gw[1].port, "/v1/locks/qa-1", t1, "{\"ttl_ms\":30000}", TEAM);
    CHECK_EQ_INT(re.status, 200);
    h_resp_free(&re);
    CHECK_EQ_INT(take(0, "/v1/locks/qa-4", NULL, FREE, t4), 201); /* another key */
    CHECK_EQ_INT(drop(0, "/v1/locks/qa-4", t4, FREE), 200);
    r = h_http("GET", gw[1].port, "/metrics", NULL, NULL, TEAM);
    CHECK(
        r.body &&
        strstr(r.body, "lockgate_quota_refused_total{key_id=\"team\",quota=\"holds_at_once\"} 1"));
    CHECK(r.body && !strstr(r.body, "key_id=\"free\""));
    h_resp_free(&r);
    /* one release of the re-entered lock leaves it held: still full */
    CHECK_EQ_INT(drop(1, "/v1/locks/qa-1", t1, TEAM), 200);
    CHECK_EQ_INT(take(1, "/v1/locks/qa-4", NULL, TEAM, t4), 429);
    CHECK_EQ_INT(drop(1, "/v1/locks/qa-1", t1, TEAM), 200);
    CHECK_EQ_INT(take(1, "/v1/locks/qa-4", NULL, TEAM, t4), 201);
    CHECK_EQ_INT(drop(0, "/v1/locks/qa-2", t2, TEAM), 200);
    CHECK_EQ_INT(drop(0, "/v1/semaphores/qa-3", t3, TEAM), 200);
    CHECK_EQ_INT(drop(0, "/v1/locks/qa-4", t4, TEAM), 200);
}

/* A hold that ends by expiry leaves the count with nobody releasing it;
 * an attempt that finds the name busy counts nothing. */
static void test_quota_expiry_and_busy(void) {
    char t[LIMIT][64], tb[64], tf[64];
    CHECK_EQ_INT(take(0, "/v1/locks/qe-short", "{\"ttl_ms\":300}", TEAM, t[0]), 201);
    for (int i = 1; i < LIMIT; i++) {
        char path[64];
        snprintf(path, sizeof path, "/v1/locks/qe-%d", i);
        CHECK_EQ_INT(take(i % 2, path, NULL, TEAM, t[i]), 201);
    }
    CHECK_EQ_INT(take(1, "/v1/locks/qe-next", NULL, TEAM, tb), 429);
    /* the short lease ends (its lock answers 404), then there is room */
    long long t0 = h_now_ms();
    for (;;) {
        struct h_resp r = h_http("GET", gw[0].port, "/v1/locks/qe-short", NULL, NULL, TEAM);
        long st = r.status;
        h_resp_free(&r);
        if (st == 404 || h_now_ms() - t0 > 5000) break;
        h_sleep_ms(20);
    }
    /* its entry lapses with it, within moments: the next take passes */
    long long freed = h_now_ms();
    long st;
    while ((st = take(1, "/v1/locks/qe-next", NULL, TEAM, tb)) == 429 && h_now_ms() - freed < 2000)
        h_sleep_ms(20);
    CHECK_EQ_INT(st, 201);
    printf("  (room %lld ms after the lease ended)\n", h_now_ms() - freed);
    CHECK(h_now_ms() - freed < 500);
    CHECK_EQ_INT(drop(0, "/v1/locks/qe-next", tb, TEAM), 200);
    /* busy: another key holds qe-busy; team's attempts are refused 409 and
     * do not stay in the count */
    char tl[64];
    CHECK_EQ_INT(take(0, "/v1/locks/qe-last", NULL, TEAM, tl), 201);
    CHECK_EQ_INT(take(0, "/v1/locks/qe-busy", NULL, FREE, tf), 201);
    CHECK_EQ_INT(drop(0, "/v1/locks/qe-last", tl, TEAM), 200);
    for (int i = 0; i < 5; i++) CHECK_EQ_INT(take(i % 2, "/v1/locks/qe-busy", NULL, TEAM, tb), 409);
    CHECK_EQ_INT(take(1, "/v1/locks/qe-next", NULL, TEAM, tb), 201);
    CHECK_EQ_INT(drop(0, "/v1/locks/qe-next", tb, TEAM), 200);
    CHECK_EQ_INT(drop(0, "/v1/locks/qe-busy", tf, FREE), 200);
    for (int i = 1; i < LIMIT; i++) {
        char path[64];
        snprintf(path, sizeof path, "/v1/locks/qe-%d", i);
        CHECK_EQ_INT(drop(i % 2, path, t[i], TEAM), 200);
    }
}

/* Session-bound holds count; ending the session frees them at once. */
static void test_quota_session(void) {
    struct h_resp r = h_http("POST", gw[0].port, "/v1/sessions", NULL, "{\"ttl_ms\":30000}", TEAM);
    CHECK_EQ_INT(r.status, 201);
    char session[96], hdr[512], path[64];
    snprintf(session, sizeof session, "%s", h_header(&r, "Session") ? h_header(&r, "Session") : "");
    h_resp_free(&r);
    snprintf(hdr, sizeof hdr, "%s\r\nSession: %s", TEAM, session);
    for (int i = 0; i < LIMIT; i++) {
        snprintf(path, sizeof path, "/v1/locks/qs-%d", i);
        CHECK_EQ_INT(take(i % 2, path, "{}", hdr, NULL), 201);
    }
    CHECK_EQ_INT(take(1, "/v1/locks/qs-more", NULL, TEAM, NULL), 429);
    /* renewing keeps them counted */
    char spath[160];
    snprintf(spath, sizeof spath, "/v1/sessions/%s", session);
    r = h_http("PATCH", gw[1].port, spath, NULL, "{\"ttl_ms\":30000}", TEAM);
    CHECK_EQ_INT(r.status, 200);
    h_resp_free(&r);
    CHECK_EQ_INT(take(0, "/v1/locks/qs-more", NULL, TEAM, NULL), 429);
    r = h_http("DELETE", gw[1].port, spath, NULL, NULL, TEAM);
    CHECK_EQ_INT(r.status, 200);
    h_resp_free(&r);
    char t[64];
    CHECK_EQ_INT(take(0, "/v1/locks/qs-more", NULL, TEAM, t), 201);
    CHECK_EQ_INT(drop(0, "/v1/locks/qs-more", t, TEAM), 200);
}

/* Holds a key binds to another key's session count against the binding
 * key for as long as the session lives: the owner's renewals carry them
 * past the session's first end, its end frees them. */
static void test_quota_session_of_another_key(void) {
    struct h_resp r = h_http("POST", gw[0].port, "/v1/sessions", NULL, "{\"ttl_ms\":1000}", FREE);
    CHECK_EQ_INT(r.status, 201);
    char session[96], hdr[512], path[64], spath[160];
    snprintf(session, sizeof session, "%s", h_header(&r, "Session") ? h_header(&r, "Session") : "");
    h_resp_free(&r);
    snprintf(spath, sizeof spath, "/v1/sessions/%s", session);
    snprintf(hdr, sizeof hdr, "%s\r\nSession: %s", TEAM, session);
    for (int i = 0; i < LIMIT; i++) {
        snprintf(path, sizeof path, "/v1/locks/qo-%d", i);
        CHECK_EQ_INT(take(i % 2, path, "{}", hdr, NULL), 201);
    }
    /* the owner keeps it alive past its first end */
    long long t0 = h_now_ms();
    while (h_now_ms() - t0 < 2000) {
        r = h_http("PATCH", gw[1].port, spath, NULL, "{\"ttl_ms\":1000}", FREE);
        CHECK_EQ_INT(r.status, 200);
        h_resp_free(&r);
        h_sleep_ms(250);
    }
    r = h_http("GET", gw[0].port, "/v1/locks/qo-0", NULL, NULL, TEAM);
    CHECK_EQ_INT(r.status, 200); /* still held */
    h_resp_free(&r);
    CHECK_EQ_INT(take(0, "/v1/locks/qo-more", NULL, TEAM, NULL), 429);
    r = h_http("DELETE", gw[1].port, spath, NULL, NULL, FREE);
    CHECK_EQ_INT(r.status, 200);
    h_resp_free(&r);
    char t[64];
    CHECK_EQ_INT(take(0, "/v1/locks/qo-more", NULL, TEAM, t), 201);
    CHECK_EQ_INT(drop(0, "/v1/locks/qo-more", t, TEAM), 200);
}

/* A forced release (an operator's) takes the ended holds out of their
 * keys' ledgers at once. */
static void test_quota_forced(void) {
    char t[LIMIT][64], tn[64], path[64];
    for (int i = 0; i < LIMIT; i++) {
        snprintf(path, sizeof path, "/v1/semaphores/qf-%d", i);
        CHECK_EQ_INT(take(i % 2, path, "{\"ttl_ms\":30000,\"limit\":2}", TEAM, t[i]), 201);
    }
    CHECK_EQ_INT(take(0, "/v1/locks/qf-next", NULL, TEAM, tn), 429);
    struct h_resp r =
        h_http("DELETE", gw[1].port, "/v1/semaphores/qf-0?force=true", NULL, NULL, FREE);
    CHECK_EQ_INT(r.status, 200);
    h_resp_free(&r);
    CHECK_EQ_INT(take(0, "/v1/locks/qf-next", NULL, TEAM, tn), 201);
    CHECK_EQ_INT(drop(0, "/v1/locks/qf-next", tn, TEAM), 200);
    for (int i = 1; i < LIMIT; i++) {
        snprintf(path, sizeof path, "/v1/semaphores/qf-%d", i);
        CHECK_EQ_INT(drop(0, path, t[i], TEAM), 200);
    }
}

/* A multi-lock counts each of its names, all or nothing; its release
 * frees them. */
static void test_quota_multi(void) {
    char t1[64], t2[64], t3[64];
    CHECK_EQ_INT(take(0, "/v1/locks", "{\"names\":[\"qm-a\",\"qm-b\"],\"ttl_ms\":30000}", TEAM, t1),
                 201);
    struct h_resp r = h_http("POST", gw[1].port, "/v1/locks", NULL,
                             "{\"names\":[\"qm-c\",\"qm-d\"],\"ttl_ms\":30000}", TEAM);
    CHECK_EQ_INT(r.status, 429);
    CHECK_EQ_STR(h_jcode(&r), "quota_exceeded");
    h_resp_free(&r);
    r = h_http("GET", gw[0].port, "/v1/locks/qm-c", NULL, NULL, TEAM); /* none of them taken */
    CHECK_EQ_INT(r.status, 404);
    h_resp_free(&r);
    CHECK_EQ_INT(take(1, "/v1/locks/qm-c", NULL, TEAM, t2), 201); /* the third fits */
    CHECK_EQ_INT(drop(1, "/v1/locks/qm-c", t2, TEAM), 200);
    r = h_http("DELETE", gw[1].port, "/v1/locks", t1, "{\"names\":[\"qm-a\",\"qm-b\"]}", TEAM);
    CHECK_EQ_INT(r.status, 200);
    h_resp_free(&r);
    CHECK_EQ_INT(
        take(0, "/v1/locks", "{\"names\":[\"qm-c\",\"qm-d\",\"qm-e\"],\"ttl_ms\":30000}", TEAM, t3),
        201);
    r = h_http("DELETE", gw[0].port, "/v1/locks", t3, "{\"names\":[\"qm-c\",\"qm-d\",\"qm-e\"]}",
               TEAM);
    CHECK_EQ_INT(r.status, 200);
    h_resp_free(&r);
}

/* Exact under concurrency: 24 acquisitions of different names at once,
 * half on each gateway, and exactly LIMIT are granted. */
struct racer {
    int i;
    long status;
    char tok[64];
};

static void *race(void *arg) {
    struct racer *rc = arg;
    char path[64];
    snprintf(path, sizeof path, "/v1/locks/qr-%d", rc->i);
    rc->status = take(rc->i % 2, path, NULL, TEAM, rc->tok);
    return NULL;
}

static void test_quota_concurrent(void) {
    enum { N = 24 };
    struct racer rc[N];
    pthread_t th[N];
    for (int i = 0; i < N; i++) {
        rc[i] = (struct racer){.i = i};
        pthread_create(&th[i], NULL, race, &rc[i]);
    }
    int granted = 0, refused = 0;
    for (int i = 0; i < N; i++) {
        pthread_join(th[i], NULL);
        if (rc[i].status == 201) granted++;
        if (rc[i].status == 429) refused++;
    }
    printf("  (%d at once with holds_at_once %d: %d granted, %d refused)\n", N, LIMIT, granted,
           refused);
    CHECK_EQ_INT(granted, LIMIT);
    CHECK_EQ_INT(granted + refused, N);
    for (int i = 0; i < N; i++) {
        if (rc[i].status != 201) continue;
        char path[64];
        snprintf(path, sizeof path, "/v1/locks/qr-%d", i);
        CHECK_EQ_INT(drop(0, path, rc[i].tok, TEAM), 200);
    }
}

/* Quorum mode: three masters, each with its ledger, a majority decides. */
static void test_quota_quorum(void) {
    if (h_cluster_mode()) return;
    struct h_redis m[3];
    struct h_gw q;
    for (int i = 0; i < 3; i++) CHECK_EQ_INT(h_redis_start(&m[i], 0, NULL), 0);
    char flags[512];
    snprintf(flags, sizeof flags,
             "--auth-file %s --redis redis://127.0.0.1:%d --redis redis://127.0.0.1:%d", auth_path,
             m[1].port, m[2].port);
    CHECK_EQ_INT(h_gw_up(&q, &m[0], flags), 0);
    struct h_gw saved = gw[0];
    gw[0] = q;
    char t[LIMIT + 1][64];
    for (int i = 0; i < LIMIT; i++) {
        char path[64];
        snprintf(path, sizeof path, "/v1/locks/qq-%d", i);
        CHECK_EQ_INT(take(0, path, NULL, TEAM, t[i]), 201);
    }
    CHECK_EQ_INT(take(0, "/v1/locks/qq-more", NULL, TEAM, t[LIMIT]), 429);
    CHECK_EQ_INT(drop(0, "/v1/locks/qq-0", t[0], TEAM), 200);
    CHECK_EQ_INT(take(0, "/v1/locks/qq-more", NULL, TEAM, t[LIMIT]), 201);
    gw[0] = saved;
    h_gw_stop(&q, 5000);
    for (int i = 0; i < 3; i++) h_redis_stop(&m[i]);
}

/* Starts curl holding path as a stream (Accept: text/event-stream) for
 * TEAM on gateway 0, its output in out (h_out_dir). */
static pid_t stream_hold(const char *path, const char *body, const char *out) {
    char cmd[1024];
    snprintf(cmd, sizeof cmd,
             "exec curl -sN -H 'Accept: text/event-stream' -H '%s' -X POST "
             "http://127.0.0.1:%d%s -d '%s' > %s/%s 2>&1",
             TEAM, gw[0].port, path, body, dir, out);
    return h_spawn(cmd, NULL);
}

/* Polls take() until it answers want (the ledger's drop is not waited
 * for by the give-back); the last status. */
static long take_until(const char *path, long want, char *tok) {
    long st = 0;
    for (long long t0 = h_now_ms(); h_now_ms() - t0 < 3000; h_sleep_ms(10))
        if ((st = take(0, path, NULL, TEAM, tok)) == want) break;
    return st;
}

/* A stream hold counts while its connection lives, and its entry goes
 * when its client leaves, not at the longest lease: granted at once (its
 * request freed once its head is out, streams.c keeping the key's id) and
 * granted after a wait (its head out before the grant). */
static void test_quota_stream(void) {
    char t1[64], t2[64], tm[64], tw[64];
    h_out_dir(dir);
    CHECK_EQ_INT(take(0, "/v1/locks/qs-1", NULL, TEAM, t1), 201);
    CHECK_EQ_INT(take(0, "/v1/locks/qs-2", NULL, TEAM, t2), 201);
    pid_t a = stream_hold("/v1/locks/qs-a", "{\"ttl_ms\":30000}", "qs-a");
    CHECK(h_out_wait("qs-a", "event: granted", 5000) >= 0);
    CHECK_EQ_INT(take(0, "/v1/locks/qs-more", NULL, TEAM, tm), 429);
    h_reap(a);
    CHECK_EQ_INT(take_until("/v1/locks/qs-more", 201, tm), 201);
    CHECK_EQ_INT(drop(0, "/v1/locks/qs-more", tm, TEAM), 200);
    /* busy: it waits (counting nothing), then is granted */
    CHECK_EQ_INT(take(0, "/v1/locks/qs-w", NULL, FREE, tw), 201);
    pid_t b = stream_hold("/v1/locks/qs-w", "{\"ttl_ms\":30000,\"wait_ms\":30000}", "qs-b");
    CHECK(h_out_wait("qs-b", "event: waiting", 5000) >= 0);
    CHECK_EQ_INT(drop(0, "/v1/locks/qs-w", tw, FREE), 200);
    CHECK(h_out_wait("qs-b", "event: granted", 5000) >= 0);
    CHECK_EQ_INT(take(0, "/v1/locks/qs-more", NULL, TEAM, tm), 429);
    h_reap(b);
    CHECK_EQ_INT(take_until("/v1/locks/qs-more", 201, tm), 201);
    CHECK_EQ_INT(drop(0, "/v1/locks/qs-more", tm, TEAM), 200);
    CHECK_EQ_INT(drop(0, "/v1/locks/qs-1", t1, TEAM), 200);
    CHECK_EQ_INT(drop(0, "/v1/locks/qs-2", t2, TEAM), 200);
}

int main(int argc, char **argv) {
    check_filter(argc > 1 ? argv[1] : NULL);
    snprintf(dir, sizeof dir, "/tmp/lockgate-quota-XXXXXX");
    if (!mkdtemp(dir)) return 1;
    snprintf(auth_path, sizeof auth_path, "%s/keys.json", dir);
    write_keys();
    if (h_redis_start(&redis, 0, NULL) < 0) return 1;
    char flags[256];
    snprintf(flags, sizeof flags, "--auth-file %s", auth_path);
    for (int g = 0; g < 2; g++)
        if (h_gw_up(&gw[g], &redis, flags) < 0) return 1;
    RUN_SOME(test_quota_across_gateways);
    RUN_SOME(test_quota_expiry_and_busy);
    RUN_SOME(test_quota_session);
    RUN_SOME(test_quota_session_of_another_key);
    RUN_SOME(test_quota_forced);
    RUN_SOME(test_quota_multi);
    RUN_SOME(test_quota_concurrent);
    RUN_SOME(test_quota_stream);
    RUN_SOME(test_quota_quorum);
    for (int g = 0; g < 2; g++) h_gw_stop(&gw[g], 5000);
    h_redis_stop(&redis);
    char rm[128];
    snprintf(rm, sizeof rm, "rm -rf %s", dir);
    if (system(rm) != 0) fprintf(stderr, "could not remove %s\n", dir);
    return check_summary("quota");
}
