/* test_auth.c -- access control without a server: the auth file's parser,
 * the grant decision (longest prefix, then deny over write over read), the
 * Authorization header, the secret's digest check, keygen's grant syntax,
 * and that every route has an access rule. */
#include "handlers/access.h"
#include "handlers/routes.h"
#include "server/auth.h"
#include "server/config.h"
#include "server/keygen.h"
#include "server/quota.h"
#include "tests/check.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* SHA-256("s3cret"), as `printf %s s3cret | sha256sum` prints it. */
#define S3CRET_SHA "1ec1c26b50d5d3c58d9583181af8076655fe00756bf7285940ba3670f99fcba0"

static struct auth_table *parse(const char *json, char *err) {
    return auth_table_parse(json, strlen(json), err, 256);
}

static struct auth_table *one_key(const char *grants) {
    char json[2048], err[256];
    snprintf(json, sizeof json, "{\"keys\":[{\"id\":\"k\",\"sha256\":\"%s\",\"grants\":[%s]}]}",
             S3CRET_SHA, grants);
    struct auth_table *t = parse(json, err);
    if (!t) fprintf(stderr, "  parse: %s\n", err);
    return t;
}

static void test_auth_sha256_known_value(void) {
    unsigned char d[32];
    char hex[65];
    auth_sha256("s3cret", 6, d);
    for (int i = 0; i < 32; i++) snprintf(hex + 2 * i, 3, "%02x", d[i]);
    /* sha256("s3cret") */
    CHECK_EQ_STR(hex, "1ec1c26b50d5d3c58d9583181af8076655fe00756bf7285940ba3670f99fcba0");
}

static void test_auth_longest_prefix_wins(void) {
    struct auth_table *t =
        one_key("{\"kind\":\"locks\",\"prefix\":\"\",\"access\":\"read\"},"
                "{\"kind\":\"locks\",\"prefix\":\"job-\",\"access\":\"write\"},"
                "{\"kind\":\"locks\",\"prefix\":\"job-secret\",\"access\":\"deny\"}");
    CHECK(t != NULL);
    if (!t) return;
    const struct auth_key *k = &t->keys[0];
    CHECK_EQ_INT(auth_allows(k, AUTH_LOCKS, "other", AUTH_READ), 1);
    CHECK_EQ_INT(auth_allows(k, AUTH_LOCKS, "other", AUTH_WRITE), 0);
    CHECK_EQ_INT(auth_allows(k, AUTH_LOCKS, "job-1", AUTH_WRITE), 1);
    CHECK_EQ_INT(auth_allows(k, AUTH_LOCKS, "job-1", AUTH_READ), 1); /* write includes read */
    CHECK_EQ_INT(auth_allows(k, AUTH_LOCKS, "job-secret-1", AUTH_READ), 0);
    CHECK_EQ_INT(auth_allows(k, AUTH_LOCKS, "job-secre", AUTH_WRITE), 1);
    /* Another kind has no grant at all. */
    CHECK_EQ_INT(auth_allows(k, AUTH_SEMAPHORES, "job-1", AUTH_READ), 0);
    CHECK_EQ_INT(auth_allows(k, AUTH_IDS, "", AUTH_READ), 0);
    auth_table_free(t);
}

static void test_auth_equal_length_deny_write_read(void) {
    struct auth_table *t = one_key("{\"kind\":\"ids\",\"prefix\":\"a\",\"access\":\"read\"},"
                                   "{\"kind\":\"ids\",\"prefix\":\"a\",\"access\":\"write\"},"
                                   "{\"kind\":\"ids\",\"prefix\":\"b\",\"access\":\"write\"},"
                                   "{\"kind\":\"ids\",\"prefix\":\"b\",\"access\":\"deny\"},"
                                   "{\"kind\":\"ids\",\"prefix\":\"c\",\"access\":\"deny\"},"
                                   "{\"kind\":\"ids\",\"prefix\":\"c\",\"access\":\"read\"}");
    CHECK(t != NULL);
    if (!t) return;
    const struct auth_key *k = &t->keys[0];
    CHECK_EQ_INT(auth_allows(k, AUTH_IDS, "a1", AUTH_WRITE), 1); /* write beats read */
    CHECK_EQ_INT(auth_allows(k, AUTH_IDS, "b1", AUTH_READ), 0);  /* deny beats write */
    CHECK_EQ_INT(auth_allows(k, AUTH_IDS, "c1", AUTH_READ), 0);  /* deny beats read, any order */
    CHECK_EQ_INT(auth_allows(k, AUTH_IDS, "d1", AUTH_READ), 0);  /* no grant */
    auth_table_free(t);
    /* A longer read beats a shorter write: length first. */
    t = one_key("{\"kind\":\"locks\",\"prefix\":\"\",\"access\":\"write\"},"
                "{\"kind\":\"locks\",\"prefix\":\"ro-\",\"access\":\"read\"}");
    CHECK(t && auth_allows(&t->keys[0], AUTH_LOCKS, "ro-x", AUTH_WRITE) == 0);
    CHECK(t && auth_allows(&t->keys[0], AUTH_LOCKS, "ro-x", AUTH_READ) == 1);
    CHECK(t && auth_allows(&t->keys[0], AUTH_LOCKS, "rw", AUTH_WRITE) == 1);
    auth_table_free(t);
}

static void test_auth_bearer_parsing(void) {
    const char *id, *sec;
    size_t il, sl;
    CHECK_EQ_INT(auth_parse_bearer("Bearer cron-prod.abc_DEF-1", &id, &il, &sec, &sl), 0);
    CHECK(il == 9 && memcmp(id, "cron-prod", 9) == 0);
    CHECK(sl == 9 && memcmp(sec, "abc_DEF-1", 9) == 0);
    CHECK_EQ_INT(auth_parse_bearer("bearer   k.s", &id, &il, &sec, &sl), 0);
    CHECK_EQ_INT(auth_parse_bearer("Bearer k.s  ", &id, &il, &sec, &sl), 0);
    const char *bad[] = {"",           "Bearer",       "Bearer ",    "Bearer k",     "Bearer k.",
                         "Bearer .s",  "Basic k.s",    "Bearerk.s",  "Bearer k.s x", "Bearer k.s.t",
                         "Bearer k s", "Bearer k.s\t", "Bearer k!.s"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        CHECK_EQ_INT(auth_parse_bearer(bad[i], &id, &il, &sec, &sl), -1);
    char longid[200];
    memset(longid, 'a', sizeof longid);
    snprintf(longid, sizeof longid, "Bearer %0*d.s", AUTH_ID_MAX + 1, 0);
    CHECK_EQ_INT(auth_parse_bearer(longid, &id, &il, &sec, &sl), -1);
}

static void test_auth_secret_digest(void) {
    char json[512], err[256];
    snprintf(json, sizeof json, "{\"keys\":[{\"id\":\"k\",\"sha256\":\"%s\",\"grants\":[]}]}",
             "1ec1c26b50d5d3c58d9583181af8076655fe00756bf7285940ba3670f99fcba0");
    struct auth_table *t = parse(json, err);
    CHECK(t != NULL);
    if (!t) return;
    CHECK_EQ_INT(auth_secret_matches(&t->keys[0], "s3cret", 6), 1);
    CHECK_EQ_INT(auth_secret_matches(&t->keys[0], "s3cres", 6), 0);
    CHECK_EQ_INT(auth_secret_matches(&t->keys[0], "s3cret", 5), 0);
    CHECK_EQ_INT(auth_secret_matches(NULL, "s3cret", 6), 0);
    CHECK(auth_table_find(t, "k", 1) == &t->keys[0]);
    CHECK(auth_table_find(t, "kk", 2) == NULL);
    auth_table_free(t);
}

static void test_auth_file_errors(void) {
    char err[256];
    const char *bad[] = {
        "",
        "[]",
        "{\"keys\": {}}",
        "{\"keys\": [1]}",
        "{\"keys\": [{\"id\": \"a.b\", \"sha256\": \"" S3CRET_SHA "\", \"grants\": []}]}",
        "{\"keys\": [{\"id\": \"a\", \"sha256\": \"abc\", \"grants\": []}]}",
        "{\"keys\": [{\"id\": \"a\", \"sha256\": \"" S3CRET_SHA "\"}]}",
        "{\"keys\": [{\"id\": \"a\", \"sha256\": \"" S3CRET_SHA "\", \"grants\": "
        "[{\"kind\": \"lock\", \"prefix\": \"\", \"access\": \"read\"}]}]}",
        "{\"keys\": [{\"id\": \"a\", \"sha256\": \"" S3CRET_SHA "\", \"grants\": "
        "[{\"kind\": \"locks\", \"prefix\": \"a b\", \"access\": \"read\"}]}]}",
        "{\"keys\": [{\"id\": \"a\", \"sha256\": \"" S3CRET_SHA "\", \"grants\": "
        "[{\"kind\": \"locks\", \"prefix\": \"\", \"access\": \"all\"}]}]}",
        "{\"keys\": [{\"id\": \"a\", \"sha256\": \"" S3CRET_SHA "\", \"grants\": []},"
        "{\"id\": \"a\", \"sha256\": \"" S3CRET_SHA "\", \"grants\": []}]}",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        err[0] = '\0';
        struct auth_table *t = parse(bad[i], err);
        CHECK(t == NULL);
        CHECK(err[0] != '\0' && !strchr(err, '\n'));
        auth_table_free(t);
    }
    struct auth_table *t = parse("{\"keys\": []}", err);
    CHECK(t && t->nkeys == 0);
    auth_table_free(t);
}

/* "limits": {"requests_per_second": N, "holds_at_once": M}, whole numbers
 * 1..QUOTA_RPS_MAX and 1..QUOTA_HOLDS_MAX, each optional; anything else in
 * it refused with one line. */
static void test_auth_limits_field(void) {
    char err[256], json[1024];
    const char *good[] = {"",
                          ",\"limits\":{}",
                          ",\"limits\":{\"requests_per_second\":5}",
                          ",\"limits\":{\"requests_per_second\":1000000}",
                          ",\"limits\":{\"holds_at_once\":3}",
                          ",\"limits\":{\"holds_at_once\":1000000,\"requests_per_second\":2}"};
    const unsigned want[] = {0, 0, 5, 1000000, 0, 2}, want_holds[] = {0, 0, 0, 0, 3, 1000000};
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        snprintf(json, sizeof json, "{\"keys\":[{\"id\":\"k\",\"sha256\":\"%s\",\"grants\":[]%s}]}",
                 S3CRET_SHA, good[i]);
        struct auth_table *t = parse(json, err);
        CHECK(t != NULL);
        if (t) CHECK_EQ_INT(t->keys[0].rps, want[i]);
        if (t) CHECK_EQ_INT(t->keys[0].holds, want_holds[i]);
        auth_table_free(t);
    }
    const char *bad[] = {",\"limits\":5",
                         ",\"limits\":{\"requests_per_second\":0}",
                         ",\"limits\":{\"requests_per_second\":-1}",
                         ",\"limits\":{\"requests_per_second\":1.5}",
                         ",\"limits\":{\"requests_per_second\":1000001}",
                         ",\"limits\":{\"requests_per_second\":\"5\"}",
                         ",\"limits\":{\"holds\":5}",
                         ",\"limits\":{\"holds_at_once\":0}",
                         ",\"limits\":{\"holds_at_once\":1000001}",
                         ",\"limits\":{\"holds_at_once\":2.5}",
                         ",\"limits\":{\"holds_at_once\":null}",
                         ",\"limits\":{\"holds_at_once\":[3]}",
                         ",\"limits\":{\"requests_per_second\":1e300}"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        snprintf(json, sizeof json, "{\"keys\":[{\"id\":\"k\",\"sha256\":\"%s\",\"grants\":[]%s}]}",
                 S3CRET_SHA, bad[i]);
        err[0] = '\0';
        struct auth_table *t = parse(json, err);
        if (t) fprintf(stderr, "  accepted: %s\n", bad[i]);
        CHECK(t == NULL && strstr(err, "limits") && !strchr(err, '\n'));
        auth_table_free(t);
    }
}

/* GCRA: a burst of rps after a quiet second, then one every 1/rps; a
 * refusal says how long until the next, and takes nothing. */
static void test_auth_quota_rate(void) {
    _Atomic int64_t tat = 0;
    int64_t t0 = 50 * 1000000LL;
    for (int i = 0; i < 5; i++) CHECK_EQ_INT(quota_take(&tat, 5, t0), 0);
    CHECK_EQ_INT(quota_take(&tat, 5, t0), 200000); /* the next in 1/5 s */
    CHECK_EQ_INT(quota_take(&tat, 5, t0 + 199999), 1);
    CHECK_EQ_INT(quota_take(&tat, 5, t0 + 200000), 0);
    CHECK(quota_take(&tat, 5, t0 + 200000) > 0);
    CHECK_EQ_INT(quota_take(&tat, 5, t0 + 10 * 1000000LL), 0); /* quiet: the burst again */
    for (int i = 0; i < 4; i++) CHECK_EQ_INT(quota_take(&tat, 5, t0 + 10 * 1000000LL), 0);
    CHECK(quota_take(&tat, 5, t0 + 10 * 1000000LL) > 0);
    _Atomic int64_t big = 0;
    int passed = 0;
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    for (int i = 0; i < 2000000; i++) passed += quota_take(&big, QUOTA_RPS_MAX, t0) == 0;
    clock_gettime(CLOCK_MONOTONIC, &b);
    CHECK_EQ_INT(passed, QUOTA_RPS_MAX);
    printf("  (quota_take: %.1f ns a call)\n",
           ((b.tv_sec - a.tv_sec) * 1e9 + (b.tv_nsec - a.tv_nsec)) / 2e6);
}

static void test_auth_keygen_grant_syntax(void) {
    int kind, access;
    char prefix[256];
    CHECK_EQ_INT(keygen_parse_grant("locks:nightly-:write", &kind, prefix, sizeof prefix, &access),
                 0);
    CHECK(kind == AUTH_LOCKS && access == AUTH_WRITE && strcmp(prefix, "nightly-") == 0);
    CHECK_EQ_INT(keygen_parse_grant("ids::read", &kind, prefix, sizeof prefix, &access), 0);
    CHECK(kind == AUTH_IDS && access == AUTH_READ && prefix[0] == '\0');
    CHECK_EQ_INT(keygen_parse_grant("locks:a:b:deny", &kind, prefix, sizeof prefix, &access), 0);
    CHECK(strcmp(prefix, "a:b") == 0 && access == AUTH_DENY);
    CHECK_EQ_INT(keygen_parse_grant("locks:write", &kind, prefix, sizeof prefix, &access), -1);
    CHECK_EQ_INT(keygen_parse_grant("lock::write", &kind, prefix, sizeof prefix, &access), -1);
    CHECK_EQ_INT(keygen_parse_grant("locks:a b:write", &kind, prefix, sizeof prefix, &access), -1);
}

/* Every route has a rule: a route without one is refused while auth is on. */
static void test_auth_every_route_has_a_rule(void) {
    for (size_t i = 0; i < gw_routes_count; i++) {
        const struct access_rule *r = access_rule_for((int)i);
        if (!r)
            fprintf(stderr, "  no access rule for %s %s\n", gw_routes[i].method, gw_routes[i].path);
        CHECK(r != NULL);
    }
}

/* The access flags and their variables (config.c). */
static void test_auth_config_flags(void) {
    static struct gw_config c;
    char err[256];
    char *argv[] = {
        "lockgate",  "--auth-file", "/k.json",         "--tls-cert", "/c.pem",
        "--tls-key", "/k.pem",      "--tls-client-ca", "/ca.pem",    "--max-connections-per-ip",
        "8",         NULL};
    CHECK_EQ_INT(config_load(&c, 11, argv, err, sizeof err), 0);
    CHECK_EQ_STR(c.auth_file, "/k.json");
    CHECK_EQ_STR(c.tls_cert, "/c.pem");
    CHECK_EQ_STR(c.tls_key, "/k.pem");
    CHECK_EQ_STR(c.tls_client_ca, "/ca.pem");
    CHECK_EQ_INT(c.max_connections_per_ip, 8);
    setenv("LOCKGATE_AUTH_FILE", "/env.json", 1);
    setenv("LOCKGATE_MAX_CONNECTIONS_PER_IP", "3", 1);
    char *none[] = {"lockgate", NULL};
    CHECK_EQ_INT(config_load(&c, 1, none, err, sizeof err), 0);
    CHECK_EQ_STR(c.auth_file, "/env.json");
    CHECK_EQ_INT(c.max_connections_per_ip, 3);
    CHECK_EQ_INT(config_listen_is_loopback(&c), 1);
    setenv("LOCKGATE_MAX_CONNECTIONS_PER_IP", "-1", 1);
    CHECK_EQ_INT(config_load(&c, 1, none, err, sizeof err), -1);
    CHECK(strstr(err, "max connections per ip") != NULL);
    unsetenv("LOCKGATE_AUTH_FILE");
    unsetenv("LOCKGATE_MAX_CONNECTIONS_PER_IP");
    char *lan[] = {"lockgate", "--listen", "0.0.0.0:80", NULL};
    CHECK_EQ_INT(config_load(&c, 3, lan, err, sizeof err), 0);
    CHECK_EQ_INT(config_listen_is_loopback(&c), 0);
    CHECK_EQ_INT(c.max_connections_per_ip, 0); /* default: unlimited */
}

int main(int argc, char **argv) {
    check_filter(argc > 1 ? argv[1] : NULL);
    router_install(gw_routes, gw_routes_count); /* as handlers_init does */
    RUN_SOME(test_auth_sha256_known_value);
    RUN_SOME(test_auth_longest_prefix_wins);
    RUN_SOME(test_auth_equal_length_deny_write_read);
    RUN_SOME(test_auth_bearer_parsing);
    RUN_SOME(test_auth_secret_digest);
    RUN_SOME(test_auth_file_errors);
    RUN_SOME(test_auth_limits_field);
    RUN_SOME(test_auth_quota_rate);
    RUN_SOME(test_auth_keygen_grant_syntax);
    RUN_SOME(test_auth_every_route_has_a_rule);
    RUN_SOME(test_auth_config_flags);
    return check_summary("auth");
}
