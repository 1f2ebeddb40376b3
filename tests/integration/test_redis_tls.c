/* test_redis_tls.c -- TLS to Redis (docs/configuration.md, "TLS to Redis"),
 * against Debian's redis-server serving TLS (--tls-port) with certificates
 * made by tls_certs.sh: in every mode (single, quorum, Cluster with
 * tls-cluster, Sentinel with the sentinels and the master over TLS) a
 * lock, a waiter handed it, a release and ids go through TLS (Redis's
 * CLIENT LIST shows the gateway's connections on the TLS port); an ACL
 * user over TLS; a wrong CA, a certificate for another host, an expired
 * one and a missing client certificate are each refused with one log line
 * and /readyz saying why, and no secret anywhere; --redis-tls-server-name
 * and --redis-tls-insecure; a Redis that stalls in the handshake times out
 * like a plain one, without holding up the worker. */
#include "tests/integration/harness.h"

#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#define USER "tls-user"
#define PW   "Tls-pw-9931" /* distinctive: grepped for in logs and answers */

static char certs[64]; /* tls_certs.sh's directory */

/* ---- helpers ---------------------------------------------------------------- */

/* A Redis serving plain RESP on r->port (for the test's redis-cli) and TLS
 * on *tls_port, asking clients for a certificate signed by ca.pem. */
static int tls_redis_start(struct h_redis *r, int *tls_port, const char *more) {
    *tls_port = h_free_port();
    char extra[1024];
    snprintf(extra, sizeof extra,
             "--tls-port %d --tls-cert-file %s/server.pem --tls-key-file %s/server.key "
             "--tls-ca-cert-file %s/ca.pem --tls-auth-clients yes %s",
             *tls_port, certs, certs, certs, more ? more : "");
    return h_redis_start(r, 0, extra);
}

/* The flags for verified mutual TLS with the test's CA and client. */
static const char *tls_flags(void) {
    static char f[512];
    snprintf(f, sizeof f,
             "--redis-tls-ca %s/ca.pem --redis-tls-cert %s/rclient.pem --redis-tls-key "
             "%s/rclient.key",
             certs, certs, certs);
    return f;
}

/* How many of n's clients came in on its port tls_port. */
static int clients_on(struct h_redis *n, int tls_port) {
    char needle[48];
    snprintf(needle, sizeof needle, "laddr=127.0.0.1:%d ", tls_port);
    const char *list = h_redis_cli(n, "CLIENT LIST");
    int count = 0;
    for (const char *p = list; p && (p = strstr(p, needle)); p++) count++;
    return count;
}

struct waiter {
    int port;
    const char *path;
    long status;
};

static void *wait_call(void *arg) {
    struct waiter *w = arg;
    struct h_resp r = h_http("POST", w->port, w->path, NULL, "{\"wait_ms\":5000}", NULL);
    w->status = r.status;
    h_resp_free(&r);
    return NULL;
}

/* A lock, a waiter parked on it and handed it at the release, the
 * waiter's release, and ids: the whole lock path through g. */
static void lock_wait_release_ids(struct h_gw *g, const char *name) {
    char path[128];
    snprintf(path, sizeof path, "/v1/locks/%s", name);
    struct h_resp r = h_http("POST", g->port, path, NULL, "{\"ttl_ms\":10000}", NULL);
    CHECK_EQ_INT(r.status, 201);
    char token[128];
    snprintf(token, sizeof token, "%s", h_token(&r));
    h_resp_free(&r);
    long long waits0 = h_metric(g, "lockgate_waits_total");
    struct waiter w = {.port = g->port, .path = path};
    pthread_t t;
    pthread_create(&t, NULL, wait_call, &w);
    long long end = h_now_ms() + 10000;
    while (h_metric(g, "lockgate_waits_total") < waits0 + 1 && h_now_ms() < end) h_sleep_ms(10);
    CHECK_EQ_INT(h_metric(g, "lockgate_waits_total"), waits0 + 1);
    r = h_http("DELETE", g->port, path, token, NULL, NULL);
    CHECK_EQ_INT(r.status, 200);
    h_resp_free(&r);
    pthread_join(t, NULL);
    CHECK_EQ_INT(w.status, 201);
    snprintf(path, sizeof path, "/v1/ids/%s", name);
    r = h_http("POST", g->port, path, NULL, NULL, NULL);
    CHECK_EQ_INT(r.status, 200);
    CHECK(r.body && strstr(r.body, "\"ids\":[\""));
    h_resp_free(&r);
}

/* /readyz's answer, in a static buffer ("" when none). */
static const char *readyz(struct h_gw *g, long *status) {
    static char body[2048];
    struct h_resp r = h_http("GET", g->port, "/readyz", NULL, NULL, NULL);
    *status = r.status;
    snprintf(body, sizeof body, "%s", r.body ? r.body : "");
    h_resp_free(&r);
    return body;
}

/* Waits until /readyz is 503 and says `why`: 0, or -1 after ms. */
static int wait_refused(struct h_gw *g, const char *why, int ms) {
    long long end = h_now_ms() + ms;
    long status;
    const char *body = "";
    while (h_now_ms() < end) {
        body = readyz(g, &status);
        if (status == 503 && strstr(body, why)) return 0;
        h_sleep_ms(50);
    }
    fprintf(stderr, "    /readyz never said '%s'; last: %s (log %s)\n", why, body, g->log);
    return -1;
}

/* No password, key or key file content in g's log, /readyz, /metrics. */
static void check_no_secret(struct h_gw *g, const char *secret) {
    const char *never[] = {secret, "PRIVATE KEY", NULL};
    for (int i = 0; never[i]; i++) {
        long status;
        CHECK(!strstr(readyz(g, &status), never[i]));
        struct h_resp r = h_http("GET", g->port, "/metrics", NULL, NULL, NULL);
        CHECK(r.body && !strstr(r.body, never[i]));
        h_resp_free(&r);
        CHECK(h_file_count(g->log, never[i]) == 0);
    }
}

/* ---- every mode ------------------------------------------------------------- */

/* Single Redis, mutual TLS, connected to by address (verified against the
 * certificate's IP SAN). */
static void test_single(void) {
    struct h_redis r;
    struct h_gw g = {0};
    int tp;
    CHECK_EQ_INT(tls_redis_start(&r, &tp, NULL), 0);
    snprintf(g.redis_url, sizeof g.redis_url, "rediss://127.0.0.1:%d", tp);
    char flags[1024];
    snprintf(flags, sizeof flags, "--workers 2 %s", tls_flags());
    CHECK_EQ_INT(h_gw_start(&g, &r, flags), 0);
    CHECK_EQ_INT(h_wait_ready(g.port, 10000), 0);
    lock_wait_release_ids(&g, "tls-single");
    CHECK(clients_on(&r, tp) >= 4);          /* 2 workers + the auxiliary loop: commands, pub/sub */
    CHECK_EQ_INT(clients_on(&r, r.port), 1); /* the plain port: only this redis-cli */
    CHECK_EQ_INT(h_log_count(&g, "refused"), 0);
    check_no_secret(&g, "rclient");
    CHECK_EQ_INT(h_gw_stop(&g, 5000), 0);
    h_redis_kill(&r);
}

/* An ACL user over TLS: AUTH user password goes inside TLS. */
static void test_acl_user(void) {
    struct h_redis r;
    struct h_gw g = {0};
    int tp;
    CHECK_EQ_INT(tls_redis_start(&r, &tp, NULL), 0);
    char cmd[256];
    snprintf(cmd, sizeof cmd, "ACL SETUSER %s on '>%s' '~*' '&*' '+@all'", USER, PW);
    h_redis_cli(&r, cmd);
    snprintf(g.redis_url, sizeof g.redis_url, "rediss://%s:%s@127.0.0.1:%d", USER, PW, tp);
    char flags[1024];
    snprintf(flags, sizeof flags, "--workers 1 %s", tls_flags());
    CHECK_EQ_INT(h_gw_start(&g, &r, flags), 0);
    CHECK_EQ_INT(h_wait_ready(g.port, 10000), 0);
    lock_wait_release_ids(&g, "tls-acl");
    const char *list = h_redis_cli(&r, "CLIENT LIST");
    char needle[64];
    snprintf(needle, sizeof needle, "laddr=127.0.0.1:%d ", tp);
    int as_user = 0;
    for (const char *p = list; p && (p = strstr(p, needle)); p++) {
        const char *eol = strchr(p, '\n');
        const char *u = strstr(p, "user=" USER " ");
        as_user += u && (!eol || u < eol);
    }
    CHECK(as_user >= 2);
    check_no_secret(&g, PW);
    CHECK_EQ_INT(h_gw_stop(&g, 5000), 0);
    CHECK(h_file_count(g.log, PW) == 0);
    h_redis_kill(&r);
}

/* Quorum mode: three masters, each over TLS. */
static void test_quorum(void) {
    struct h_redis m[3];
    int tp[3];
    struct h_gw g = {0};
    for (int i = 0; i < 3; i++) CHECK_EQ_INT(tls_redis_start(&m[i], &tp[i], NULL), 0);
    snprintf(g.redis_url, sizeof g.redis_url, "rediss://127.0.0.1:%d", tp[0]);
    char flags[1024];
    snprintf(flags, sizeof flags,
             "--workers 1 --redis rediss://127.0.0.1:%d --redis rediss://127.0.0.1:%d", tp[1],
             tp[2]);
    char env[512]; /* the settings' environment twins */
    snprintf(env, sizeof env,
             "env LOCKGATE_REDIS_TLS_CA=%s/ca.pem LOCKGATE_REDIS_TLS_CERT=%s/rclient.pem "
             "LOCKGATE_REDIS_TLS_KEY=%s/rclient.key",
             certs, certs, certs);
    CHECK_EQ_INT(h_gw_start_env(&g, &m[0], flags, env), 0);
    CHECK_EQ_INT(h_wait_ready(g.port, 10000), 0);
    lock_wait_release_ids(&g, "tls-quorum");
    for (int i = 0; i < 3; i++) CHECK(clients_on(&m[i], tp[i]) >= 1);
    CHECK_EQ_INT(h_gw_stop(&g, 5000), 0);
    for (int i = 0; i < 3; i++) h_redis_kill(&m[i]);
}

/* A Redis Cluster of three masters whose bus and clients use TLS
 * (tls-cluster yes): the slot map names the nodes' TLS ports, and the
 * gateway reaches each with TLS. */
static void test_cluster(void) {
    struct h_redis node[3];
    int tp[3];
    char create[1024];
    int used = snprintf(create, sizeof create,
                        "--tls --cacert %s/ca.pem --cert %s/rclient.pem --key %s/rclient.key "
                        "--cluster create",
                        certs, certs, certs);
    for (int i = 0; i < 3; i++) {
        char more[256];
        int bus = 0;
        /* The bus port must be free too. */
        while (!bus || bus > 55535) bus = h_free_port();
        snprintf(more, sizeof more,
                 "--tls-cluster yes --tls-replication yes --cluster-enabled yes "
                 "--cluster-config-file nodes.conf --cluster-node-timeout 1500 "
                 "--cluster-port %d",
                 bus);
        CHECK_EQ_INT(tls_redis_start(&node[i], &tp[i], more), 0);
        used += snprintf(create + used, sizeof create - (size_t)used, " 127.0.0.1:%d", tp[i]);
    }
    snprintf(create + used, sizeof create - (size_t)used,
             " --cluster-replicas 0 --cluster-yes >/dev/null");
    h_redis_cli(&node[0], create);
    int ok = 0;
    for (long long end = h_now_ms() + 15000; ok < 3 && h_now_ms() < end;) {
        ok = 0;
        for (int i = 0; i < 3; i++) {
            const char *info = h_redis_cli(&node[i], "CLUSTER INFO");
            ok += info && strstr(info, "cluster_state:ok") != NULL;
        }
        if (ok < 3) h_sleep_ms(50);
    }
    CHECK_EQ_INT(ok, 3);
    struct h_gw g = {0};
    char flags[1024];
    snprintf(flags, sizeof flags, "--workers 1 %s", tls_flags());
    snprintf(g.redis_url, sizeof g.redis_url, "rediss://127.0.0.1:%d", tp[0]);
    node[0].cn = 1; /* h_gw_start: --redis-cluster g.redis_url */
    CHECK_EQ_INT(h_gw_start(&g, &node[0], flags), 0);
    node[0].cn = 0;
    CHECK_EQ_INT(h_wait_ready(g.port, 15000), 0);
    for (int k = 0; k < 4; k++) { /* names in different slots */
        char name[32];
        snprintf(name, sizeof name, "tls-cluster-%d", k);
        lock_wait_release_ids(&g, name);
    }
    for (int i = 0; i < 3; i++) CHECK(clients_on(&node[i], tp[i]) >= 1);
    CHECK_EQ_INT(h_gw_stop(&g, 5000), 0);
    for (int i = 0; i < 3; i++) h_redis_kill(&node[i]);
}

/* A sentinel serving TLS (tls-port), talking TLS to the master
 * (tls-replication), which it names by its TLS port. */
static int tls_sentinel_start(struct h_redis *s, int *tls_port, int master_tls_port,
                              int down_after_ms) {
    memset(s, 0, sizeof *s);
    strcpy(s->dir, "/tmp/lockgate-test-XXXXXX");
    if (!mkdtemp(s->dir)) return -1;
    s->port = h_free_port();
    *tls_port = h_free_port();
    char conf[128];
    snprintf(conf, sizeof conf, "%s/sentinel.conf", s->dir);
    FILE *f = fopen(conf, "w");
    if (!f) return -1;
    fprintf(f,
            "port %d\nbind 127.0.0.1\nprotected-mode no\ndaemonize no\ndir %s\n"
            "tls-port %d\ntls-cert-file %s/server.pem\ntls-key-file %s/server.key\n"
            "tls-ca-cert-file %s/ca.pem\ntls-auth-clients yes\ntls-replication yes\n"
            "sentinel resolve-hostnames no\n"
            "sentinel monitor tlsm 127.0.0.1 %d 1\n"
            "sentinel down-after-milliseconds tlsm %d\n"
            "sentinel failover-timeout tlsm 10000\n",
            s->port, s->dir, *tls_port, certs, certs, certs, master_tls_port, down_after_ms);
    fclose(f);
    char cmd[256], log[96];
    snprintf(cmd, sizeof cmd, "exec redis-sentinel '%s'", conf);
    snprintf(log, sizeof log, "%s/sentinel.log", s->dir);
    s->pid = h_spawn(cmd, log);
    for (int i = 0; i < 500; i++) {
        const char *pong = h_redis_cli(s, "PING");
        if (pong && strcmp(pong, "PONG") == 0) return 0;
        h_sleep_ms(10);
    }
    return -1;
}

/* Sentinel mode: the sentinel over TLS (rediss://), and the master it
 * names over TLS (by default as the sentinels; a second gateway asks a
 * plain sentinel port and sets --sentinel-master-tls 1). */
static void test_sentinel(void) {
    struct h_redis m, s;
    int mtp, stp = 0;
    CHECK_EQ_INT(tls_redis_start(&m, &mtp, "--tls-replication yes"), 0);
    CHECK_EQ_INT(tls_sentinel_start(&s, &stp, mtp, 5000), 0);
    struct h_gw g = {0}, g2 = {0};
    char flags[1024];
    snprintf(flags, sizeof flags,
             "--workers 1 --sentinel rediss://127.0.0.1:%d --sentinel-master tlsm %s", stp,
             tls_flags());
    snprintf(g.redis_url, sizeof g.redis_url, "redis://127.0.0.1:1"); /* host unused */
    CHECK_EQ_INT(h_gw_start(&g, &m, flags), 0);
    CHECK_EQ_INT(h_wait_ready(g.port, 10000), 0);
    lock_wait_release_ids(&g, "tls-sentinel");
    CHECK(clients_on(&m, mtp) >= 2);
    CHECK(clients_on(&s, stp) >= 1);
    snprintf(
        flags, sizeof flags,
        "--workers 1 --sentinel 127.0.0.1:%d --sentinel-master tlsm --sentinel-master-tls 1 %s",
        s.port, tls_flags());
    snprintf(g2.redis_url, sizeof g2.redis_url, "redis://127.0.0.1:1");
    CHECK_EQ_INT(h_gw_start(&g2, &m, flags), 0);
    CHECK_EQ_INT(h_wait_ready(g2.port, 10000), 0);
    lock_wait_release_ids(&g2, "tls-sentinel-2");
    CHECK(h_log_count(&g2, "(TLS)") >= 1);
    CHECK_EQ_INT(h_gw_stop(&g, 5000), 0);
    CHECK_EQ_INT(h_gw_stop(&g2, 5000), 0);
    h_redis_kill(&s);
    h_redis_kill(&m);
}

/* A failover over TLS: the master killed, the sentinel promotes the
 * replica (replicating over TLS) and announces it by its TLS port; the
 * gateway follows to it over TLS and serves again. */
static void test_sentinel_failover(void) {
    struct h_redis m, rep, s;
    int mtp, rtp, stp = 0;
    CHECK_EQ_INT(tls_redis_start(&m, &mtp, "--tls-replication yes"), 0);
    char more[128];
    snprintf(more, sizeof more, "--tls-replication yes --replicaof 127.0.0.1 %d", mtp);
    CHECK_EQ_INT(tls_redis_start(&rep, &rtp, more), 0);
    CHECK_EQ_INT(h_replica_wait_link(&rep, 10000), 0);
    CHECK_EQ_INT(tls_sentinel_start(&s, &stp, mtp, 1000), 0);
    CHECK_EQ_INT(h_sentinel_wait_ready(&s, "tlsm", 0, 1, 15000), 0);
    struct h_gw g = {0};
    char flags[1024];
    snprintf(flags, sizeof flags,
             "--workers 1 --sentinel rediss://127.0.0.1:%d --sentinel-master tlsm %s", stp,
             tls_flags());
    snprintf(g.redis_url, sizeof g.redis_url, "redis://127.0.0.1:1");
    CHECK_EQ_INT(h_gw_start(&g, &m, flags), 0);
    CHECK_EQ_INT(h_wait_ready(g.port, 10000), 0);
    lock_wait_release_ids(&g, "tls-before-failover");
    /* Everything written so far (the gateway's marker key too) reached the
     * replica: else the promoted replica lacks the marker and the gateway
     * rightly refuses grants for --max-lease-ms (lossguard.h). */
    long long want = h_redis_info_int(&m, "replication", "master_repl_offset");
    long long until = h_now_ms() + 5000;
    while (h_redis_info_int(&rep, "replication", "slave_repl_offset") < want && h_now_ms() < until)
        h_sleep_ms(10);
    CHECK(h_redis_info_int(&rep, "replication", "slave_repl_offset") >= want);
    h_redis_kill(&m);
    long long end = h_now_ms() + 20000;
    while (h_sentinel_master_port(&s, "tlsm") != rtp && h_now_ms() < end) h_sleep_ms(50);
    CHECK_EQ_INT(h_sentinel_master_port(&s, "tlsm"), rtp);
    /* Served again: a lock granted and an id block leased (a 503 while the
     * gateway moves; the id lease has a connection of its own, on the
     * offload thread, which follows the sentinels on its own schedule). */
    long status = 0, ids = 0;
    for (end = h_now_ms() + 15000; (status != 201 || ids != 200) && h_now_ms() < end;) {
        struct h_resp r;
        if (status != 201) {
            r = h_http("POST", g.port, "/v1/locks/tls-probe", NULL, "{\"ttl_ms\":1000}", NULL);
            status = r.status;
            h_resp_free(&r);
        }
        if (ids != 200) {
            r = h_http("POST", g.port, "/v1/ids/tls-probe", NULL, NULL, NULL);
            ids = r.status;
            h_resp_free(&r);
        }
        if (status != 201 || ids != 200) h_sleep_ms(50);
    }
    CHECK_EQ_INT(status, 201);
    CHECK_EQ_INT(ids, 200);
    lock_wait_release_ids(&g, "tls-after-failover");
    CHECK(clients_on(&rep, rtp) >= 2); /* the gateway's, on the new master's TLS port */
    CHECK_EQ_INT(h_gw_stop(&g, 5000), 0);
    h_redis_kill(&s);
    h_redis_kill(&rep);
}

/* ---- refusals ----------------------------------------------------------------- */

/* A gateway on r's TLS port with these flags (after --workers 2), which
 * must not get ready: /readyz says why (in the wording of `why`), the log
 * says it on exactly one line, and no secret shows. */
static void refused(struct h_redis *r, int tp, const char *flags, const char *why) {
    struct h_gw g = {0};
    snprintf(g.redis_url, sizeof g.redis_url, "rediss://%s:%s@127.0.0.1:%d", USER, PW, tp);
    char all[1024];
    snprintf(all, sizeof all, "--workers 2 %s", flags);
    CHECK_EQ_INT(h_gw_start(&g, r, all), 0);
    CHECK_EQ_INT(wait_refused(&g, why, 10000), 0);
    CHECK_EQ_INT(h_log_count(&g, why), 1); /* 5 connections failed; one line */
    check_no_secret(&g, PW);
    CHECK_EQ_INT(h_gw_stop(&g, 5000), 0);
    if (!check_cur_failed) unlink(g.log);
}

static void set_cert(struct h_redis *r, const char *name) {
    char cmd[512];
    snprintf(cmd, sizeof cmd, "CONFIG SET tls-cert-file %s/%s.pem tls-key-file %s/%s.key", certs,
             name, certs, name);
    CHECK_EQ_STR(h_redis_cli(r, cmd), "OK");
}

static void test_refusals(void) {
    struct h_redis r;
    int tp;
    CHECK_EQ_INT(tls_redis_start(&r, &tp, NULL), 0);
    char cmd[256];
    snprintf(cmd, sizeof cmd, "ACL SETUSER %s on '>%s' '~*' '&*' '+@all'", USER, PW);
    h_redis_cli(&r, cmd);
    char flags[1024];
    /* A CA that did not sign Redis's certificate. */
    snprintf(flags, sizeof flags,
             "--redis-tls-ca %s/ca2.pem --redis-tls-cert %s/rclient.pem --redis-tls-key "
             "%s/rclient.key",
             certs, certs, certs);
    refused(&r, tp, flags, "it is not signed by a CA in --redis-tls-ca");
    /* No client certificate, where Redis asks for one. */
    snprintf(flags, sizeof flags, "--redis-tls-ca %s/ca.pem", certs);
    refused(&r, tp, flags, "it asks for a client certificate");
    /* A certificate for another host. */
    set_cert(&r, "other");
    refused(&r, tp, tls_flags(), "it is not issued for '127.0.0.1'");
    /* ... which --redis-tls-server-name accepts (verified against it). */
    struct h_gw g = {0};
    snprintf(g.redis_url, sizeof g.redis_url, "rediss://%s:%s@127.0.0.1:%d", USER, PW, tp);
    snprintf(flags, sizeof flags, "--workers 1 --redis-tls-server-name other.example %s",
             tls_flags());
    CHECK_EQ_INT(h_gw_start(&g, &r, flags), 0);
    CHECK_EQ_INT(h_wait_ready(g.port, 10000), 0);
    lock_wait_release_ids(&g, "tls-other-name");
    CHECK_EQ_INT(h_gw_stop(&g, 5000), 0);
    /* An expired certificate. */
    set_cert(&r, "expired");
    refused(&r, tp, tls_flags(), "it has expired");
    /* --redis-tls-insecure takes it, and says so at start. */
    struct h_gw gi = {0};
    snprintf(gi.redis_url, sizeof gi.redis_url, "rediss://%s:%s@127.0.0.1:%d", USER, PW, tp);
    snprintf(flags, sizeof flags,
             "--workers 1 --redis-tls-insecure --redis-tls-cert %s/rclient.pem --redis-tls-key "
             "%s/rclient.key",
             certs, certs);
    CHECK_EQ_INT(h_gw_start(&gi, &r, flags), 0);
    CHECK_EQ_INT(h_wait_ready(gi.port, 10000), 0);
    CHECK_EQ_INT(h_log_count(&gi, "--redis-tls-insecure: Redis's TLS certificate is NOT verified"),
                 1);
    CHECK_EQ_INT(h_gw_stop(&gi, 5000), 0);
    /* Their environment twins. */
    struct h_gw ge = {0};
    snprintf(ge.redis_url, sizeof ge.redis_url, "rediss://%s:%s@127.0.0.1:%d", USER, PW, tp);
    snprintf(flags, sizeof flags, "--workers 1 %s", tls_flags());
    CHECK_EQ_INT(h_gw_start_env(&ge, &r, flags,
                                "env LOCKGATE_REDIS_TLS_INSECURE=1 "
                                "LOCKGATE_REDIS_TLS_SERVER_NAME=other.example"),
                 0);
    CHECK_EQ_INT(h_wait_ready(ge.port, 10000), 0);
    CHECK_EQ_INT(h_log_count(&ge, "NOT verified"), 1);
    CHECK_EQ_INT(h_gw_stop(&ge, 5000), 0);
    /* A refused gateway becomes ready once Redis serves a good certificate,
     * without a restart, and /readyz stops naming the refusal. */
    struct h_gw gr = {0};
    snprintf(gr.redis_url, sizeof gr.redis_url, "rediss://%s:%s@127.0.0.1:%d", USER, PW, tp);
    snprintf(flags, sizeof flags, "--workers 1 %s", tls_flags());
    CHECK_EQ_INT(h_gw_start(&gr, &r, flags), 0);
    CHECK_EQ_INT(wait_refused(&gr, "it has expired", 10000), 0);
    set_cert(&r, "server");
    CHECK_EQ_INT(h_wait_ready(gr.port, 10000), 0);
    CHECK_EQ_INT(h_gw_stop(&gr, 5000), 0);
    h_redis_kill(&r);
}

/* A "Redis" that accepts TCP and then says nothing (the kernel completes
 * the connect; nobody reads the ClientHello): the handshake times out
 * after --redis-timeout-ms, as a plain connect does, and the worker keeps
 * serving meanwhile. */
static void test_handshake_stall(void) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    CHECK_EQ_INT(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
    socklen_t len = sizeof a;
    getsockname(fd, (struct sockaddr *)&a, &len);
    CHECK_EQ_INT(listen(fd, 64), 0);
    int port = ntohs(a.sin_port);
    struct h_redis none = {0};
    strcpy(none.dir, "/tmp");
    struct h_gw g = {0};
    snprintf(g.log, sizeof g.log, "/tmp/lockgate-tls-stall-%d.log", (int)getpid());
    snprintf(g.redis_url, sizeof g.redis_url, "rediss://127.0.0.1:%d", port);
    char flags[1024];
    snprintf(flags, sizeof flags, "--workers 1 --redis-timeout-ms 300 %s", tls_flags());
    long long t0 = h_now_ms();
    CHECK_EQ_INT(h_gw_start(&g, &none, flags), 0);
    long long end = t0 + 5000;
    while (h_log_count(&g, "timed out") < 1 && h_now_ms() < end) {
        struct h_resp r = h_http("GET", g.port, "/healthz", NULL, NULL, NULL);
        CHECK_EQ_INT(r.status, 200);
        CHECK(r.seconds < 0.25); /* the worker is not stuck in a handshake */
        h_resp_free(&r);
        h_sleep_ms(20);
    }
    CHECK(h_log_count(&g, "timed out") >= 1);
    CHECK(h_now_ms() - t0 < 3000);
    CHECK_EQ_INT(wait_refused(&g, "the TLS handshake timed out after 300 ms", 5000), 0);
    CHECK_EQ_INT(h_log_count(&g, "the TLS handshake timed out"), 1);
    CHECK_EQ_INT(h_gw_stop(&g, 5000), 0);
    unlink(g.log);
    close(fd);
}

/* Files that cannot serve stop the start (exit 2) with one line naming
 * the setting, and never the key's content. */
static void test_bad_files(void) {
    const char *build = getenv("BUILD") ? getenv("BUILD") : "build";
    struct {
        const char *flags, *says;
    } cases[] = {
        {"--redis-tls-ca /nonexistent/ca.pem",                            "--redis-tls-ca /nonexistent/ca.pem: "            },
        {"--redis-tls-ca %s/rclient.key",                                 "no certificate in it"                            },
        {"--redis-tls-cert %s/rclient.pem",                               "--redis-tls-cert and --redis-tls-key go together"},
        {"--redis-tls-cert %s/rclient.pem --redis-tls-key %s/server.key", "do not match"                                    },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char flags[512], cmd[1024], out[1024] = "";
        snprintf(flags, sizeof flags, cases[i].flags, certs, certs);
        snprintf(cmd, sizeof cmd, "%s/lockgate --redis rediss://127.0.0.1:1 %s 2>&1", build, flags);
        FILE *p = popen(cmd, "r");
        size_t n = p ? fread(out, 1, sizeof out - 1, p) : 0;
        out[n] = '\0';
        int st = p ? pclose(p) : -1;
        CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 2);
        CHECK(strstr(out, cases[i].says) != NULL);
        CHECK(!strstr(out, "PRIVATE KEY"));
        CHECK(strchr(out, '\n') == out + strlen(out) - 1);
    }
}

int main(int argc, char **argv) {
    check_filter(argc > 1 ? argv[1] : NULL);
    snprintf(certs, sizeof certs, "/tmp/lockgate-rtls-XXXXXX");
    if (!mkdtemp(certs)) return 1;
    char cmd[256];
    snprintf(cmd, sizeof cmd, "tests/integration/tls_certs.sh %s", certs);
    if (system(cmd) != 0) {
        fprintf(stderr, "tls_certs.sh failed\n");
        return 1;
    }
    RUN_SOME(test_single);
    RUN_SOME(test_acl_user);
    RUN_SOME(test_quorum);
    RUN_SOME(test_cluster);
    RUN_SOME(test_sentinel);
    RUN_SOME(test_sentinel_failover);
    RUN_SOME(test_refusals);
    RUN_SOME(test_handshake_stall);
    RUN_SOME(test_bad_files);
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", certs);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", certs);
    return check_summary("redis_tls");
}
