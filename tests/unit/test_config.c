/* test_config.c -- the settings the gateway is started with: each parser
 * (config_parse_*) on good and bad spellings, and config_load over flags
 * and the environment. */
#include "server/config.h"
#include "tests/check.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static void test_config_redis_url(void) {
    struct gw_config c;
    memset(&c, 0, sizeof c);
    CHECK_EQ_INT(config_parse_redis_url(&c, "redis://127.0.0.1:6379"), 0);
    CHECK_EQ_STR(c.redis_host, "127.0.0.1");
    CHECK_EQ_INT(c.redis_port, 6379);
    CHECK_EQ_STR(c.redis_password, "");
    CHECK_EQ_INT(c.redis_db, 0);

    CHECK_EQ_INT(config_parse_redis_url(&c, "redis://localhost"), 0);
    CHECK_EQ_STR(c.redis_host, "localhost");
    CHECK_EQ_INT(c.redis_port, 6379);

    CHECK_EQ_INT(config_parse_redis_url(&c, "redis://:s3cret@redis.internal:7000/3"), 0);
    CHECK_EQ_STR(c.redis_password, "s3cret");
    CHECK_EQ_STR(c.redis_host, "redis.internal");
    CHECK_EQ_INT(c.redis_port, 7000);
    CHECK_EQ_INT(c.redis_db, 3);

    /* An ACL user: AUTH user password. */
    CHECK_EQ_INT(config_parse_redis_url(&c, "redis://default:pw@h:1"), 0);
    CHECK_EQ_STR(c.redis_user, "default");
    CHECK_EQ_STR(c.redis_password, "pw");
    CHECK_EQ_STR(c.redis_host, "h");
    CHECK_EQ_INT(c.redis_port, 1);

    /* Percent-encoded user and password; a plain '@' or ':' in the
     * password (the last '@' ends it, the first ':' ends the user). */
    CHECK_EQ_INT(config_parse_redis_url(&c, "redis://app%2F1:p%40ss%2Fw%25rd@h:2/4"), 0);
    CHECK_EQ_STR(c.redis_user, "app/1");
    CHECK_EQ_STR(c.redis_password, "p@ss/w%rd");
    CHECK_EQ_STR(c.redis_host, "h");
    CHECK_EQ_INT(c.redis_db, 4);
    CHECK_EQ_INT(config_parse_redis_url(&c, "redis://u:a@b:c@h"), 0);
    CHECK_EQ_STR(c.redis_user, "u");
    CHECK_EQ_STR(c.redis_password, "a@b:c");
    CHECK_EQ_STR(c.redis_host, "h");

    /* No colon: a password for the default user, as before. */
    CHECK_EQ_INT(config_parse_redis_url(&c, "redis://justpw@h"), 0);
    CHECK_EQ_STR(c.redis_user, "");
    CHECK_EQ_STR(c.redis_password, "justpw");

    /* A later URL resets what an earlier one set. */
    CHECK_EQ_INT(config_parse_redis_url(&c, "redis://h2/"), 0);
    CHECK_EQ_STR(c.redis_user, "");
    CHECK_EQ_STR(c.redis_password, "");
    CHECK_EQ_INT(c.redis_db, 0);
    CHECK_EQ_INT(c.redis_port, 6379);
    CHECK_EQ_INT(config_parse_redis_url(&c, "redis://h:65535/15"), 0);
    CHECK_EQ_INT(c.redis_port, 65535);
    CHECK_EQ_INT(c.redis_db, 15);

    char longhost[400] = "redis://";
    memset(longhost + 8, 'h', 300);
    longhost[308] = '\0';
    char longpw[400] = "redis://:";
    memset(longpw + 9, 'p', 300);
    strcpy(longpw + 309, "@h");
    const char *bad[] = {
        "",
        "127.0.0.1:6379",
        "http://h:6379",
        "redis:/h",
        "redis://",
        "redis://:6379",
        "redis://h:",
        "redis://h:0",
        "redis://h:65536",
        "redis://h:-1",
        "redis://h:abc",
        "redis://h:63 79",
        "redis://h:6379x",
        "redis://h/x",
        "redis://h/-1",
        "redis://h/1x",
        "redis://:pw@",
        "redis://:pw@:1",
        "redis://u:p%4@h",  /* a cut escape */
        "redis://u:p%zz@h", /* not hex */
        "redis://u:p%00@h", /* no NUL in a password */
        "redis://u%00:p@h", /* nor in a user */
        longhost,
        longpw,
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        if (config_parse_redis_url(&c, bad[i]) != -1)
            fprintf(stderr, "  accepted redis URL '%.40s'\n", bad[i]);
        CHECK_EQ_INT(config_parse_redis_url(&c, bad[i]), -1);
    }
}

static void test_config_listen(void) {
    struct gw_config c;
    memset(&c, 0, sizeof c);
    CHECK_EQ_INT(config_parse_listen(&c, "127.0.0.1:8080"), 0);
    CHECK_EQ_STR(c.listen_host, "127.0.0.1");
    CHECK_EQ_INT(c.listen_port, 8080);
    CHECK_EQ_INT(config_parse_listen(&c, "0.0.0.0:1"), 0);
    CHECK_EQ_STR(c.listen_host, "0.0.0.0");
    CHECK_EQ_INT(c.listen_port, 1);
    CHECK_EQ_INT(config_parse_listen(&c, "localhost:65535"), 0);
    CHECK_EQ_STR(c.listen_host, "localhost");
    CHECK_EQ_INT(c.listen_port, 65535);
    CHECK_EQ_INT(config_parse_listen(&c, "[::1]:9000"), 0);
    CHECK_EQ_STR(c.listen_host, "::1");
    CHECK_EQ_INT(c.listen_port, 9000);
    CHECK_EQ_INT(config_parse_listen(&c, "[::]:80"), 0);
    CHECK_EQ_STR(c.listen_host, "::");

    char longhost[400];
    memset(longhost, 'h', 300);
    strcpy(longhost + 300, ":80");
    const char *bad[] = {"",     "8080",  ":8080", "h:",      "h:abc", "h:65536",
                         "h:-1", "h:80 ", "[]:80", "h:8080:", longhost};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        strcpy(c.listen_host, "unchanged");
        if (config_parse_listen(&c, bad[i]) != -1)
            fprintf(stderr, "  accepted listen address '%.40s'\n", bad[i]);
        CHECK_EQ_INT(config_parse_listen(&c, bad[i]), -1);
        CHECK_EQ_STR(c.listen_host, "unchanged");
    }
}

static void test_config_epoch(void) {
    int64_t e = -1;
    CHECK_EQ_INT(config_parse_epoch("0", &e), 0);
    CHECK_EQ_INT(e, 0);
    CHECK_EQ_INT(config_parse_epoch("1704067200", &e), 0);
    CHECK_EQ_INT(e, 1704067200);
    CHECK_EQ_INT(config_parse_epoch("2024-01-01T00:00:00Z", &e), 0);
    CHECK_EQ_INT(e, 1704067200);
    CHECK_EQ_INT(config_parse_epoch("2026-01-01T00:00:00Z", &e), 0);
    CHECK_EQ_INT(e, 1767225600);
    CHECK_EQ_INT(config_parse_epoch("1970-01-01T00:00:00Z", &e), 0);
    CHECK_EQ_INT(e, 0);
    CHECK_EQ_INT(config_parse_epoch("2024-02-29T12:34:56Z", &e), 0);
    CHECK_EQ_INT(e, 1709210096);
    CHECK_EQ_INT(config_parse_epoch("4102444800", &e), 0);

    e = 42;
    const char *bad[] = {"",
                         "-1",
                         "4102444801",
                         "99999999999999999999",
                         "1e9",
                         "12ab",
                         "2024-01-01",
                         "2024-01-01T00:00:00",
                         "2024-01-01 00:00:00Z",
                         "2024-01-01T00:00Z",
                         "yesterday",
                         "1969-12-31T23:59:59Z"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        if (config_parse_epoch(bad[i], &e) != -1)
            fprintf(stderr, "  accepted epoch '%s'\n", bad[i]);
        CHECK_EQ_INT(config_parse_epoch(bad[i], &e), -1);
    }
    CHECK_EQ_INT(e, 42); /* untouched by a refusal */
}

/* A date that does not exist, or text after the 'Z', is not an epoch: it
 * must not be silently moved to another instant by timegm's normalising. */
static void test_config_epoch_strict(void) {
    int64_t e = 42;
    const char *bad[] = {"2024-13-01T00:00:00Z", "2024-02-30T00:00:00Z",
                         "2024-01-01T24:00:00Z", "2024-01-01T00:60:00Z",
                         "2024-00-10T00:00:00Z", "2024-01-01T00:00:00Zjunk"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        if (config_parse_epoch(bad[i], &e) != -1)
            fprintf(stderr, "  accepted epoch '%s'\n", bad[i]);
        CHECK_EQ_INT(config_parse_epoch(bad[i], &e), -1);
    }
}

static void test_config_load(void) {
    struct gw_config c;
    char err[256] = "";
    unsetenv("LOCKGATE_LISTEN");
    unsetenv("LOCKGATE_REDIS");
    unsetenv("LOCKGATE_KEY_PREFIX");
    unsetenv("LOCKGATE_REDIS_TIMEOUT_MS");

    /* Defaults. */
    char *argv0[] = {"lockgate", NULL};
    CHECK_EQ_INT(config_load(&c, 1, argv0, err, sizeof err), 0);
    CHECK_EQ_STR(c.listen_host, "127.0.0.1");
    CHECK_EQ_INT(c.listen_port, 8080);
    CHECK_EQ_STR(c.redis_host, "127.0.0.1");
    CHECK_EQ_INT(c.redis_port, 6379);
    CHECK_EQ_STR(c.key_prefix, "lockgate:");
    CHECK_EQ_INT(c.redis_timeout_ms, 2000);
    CHECK_EQ_INT(c.id_epoch, 1704067200);

    /* The environment, then a flag that wins over it. */
    setenv("LOCKGATE_LISTEN", "127.0.0.1:9001", 1);
    setenv("LOCKGATE_REDIS", "redis://envhost:7001", 1);
    setenv("LOCKGATE_KEY_PREFIX", "env:", 1);
    char *argv1[] = {"lockgate", "--listen", "127.0.0.1:9002", "--redis-timeout-ms", "500", NULL};
    CHECK_EQ_INT(config_load(&c, 5, argv1, err, sizeof err), 0);
    CHECK_EQ_INT(c.listen_port, 9002);
    CHECK_EQ_STR(c.redis_host, "envhost");
    CHECK_EQ_INT(c.redis_port, 7001);
    CHECK_EQ_STR(c.key_prefix, "env:");
    CHECK_EQ_INT(c.redis_timeout_ms, 500);

    /* A bad setting names itself. */
    char *argv2[] = {"lockgate", "--redis", "http://x", NULL};
    err[0] = '\0';
    CHECK_EQ_INT(config_load(&c, 3, argv2, err, sizeof err), -1);
    CHECK(strstr(err, "Redis URL") != NULL);
    setenv("LOCKGATE_LISTEN", "nonsense", 1);
    CHECK_EQ_INT(config_load(&c, 1, argv0, err, sizeof err), -1);
    unsetenv("LOCKGATE_LISTEN");
    char *argv3[] = {"lockgate", "--no-such-flag", NULL};
    CHECK_EQ_INT(config_load(&c, 2, argv3, err, sizeof err), -1);
    char *argv4[] = {"lockgate", "stray", NULL};
    CHECK_EQ_INT(config_load(&c, 2, argv4, err, sizeof err), -1);
    char *argv5[] = {"lockgate", "--redis-timeout-ms", "5", NULL};
    CHECK_EQ_INT(config_load(&c, 3, argv5, err, sizeof err), -1);
    char prefix[100];
    memset(prefix, 'p', 65);
    prefix[65] = '\0';
    char *argv6[] = {"lockgate", "--key-prefix", prefix, NULL};
    CHECK_EQ_INT(config_load(&c, 3, argv6, err, sizeof err), -1);
    prefix[64] = '\0';
    CHECK_EQ_INT(config_load(&c, 3, argv6, err, sizeof err), 0);
    CHECK_EQ_INT((int)strlen(c.key_prefix), 64);
    /* Braces would make or break the hash tag: keys and channels would
     * leave the name's slot in Redis Cluster (issue 28). */
    const char *braced[] = {"{app}:", "lg{{", "a{}b:", "x}"};
    for (size_t i = 0; i < sizeof braced / sizeof *braced; i++) {
        char *argv7[] = {"lockgate", "--key-prefix", (char *)braced[i], NULL};
        err[0] = '\0';
        CHECK_EQ_INT(config_load(&c, 3, argv7, err, sizeof err), -1);
        CHECK(strstr(err, "key prefix") != NULL && strstr(err, "'{'") != NULL);
    }
    unsetenv("LOCKGATE_REDIS");
    unsetenv("LOCKGATE_KEY_PREFIX");
}

/* --cors-origin: repeatable, a comma list in the environment, flags
 * replacing the environment's list, anything but an origin refused. */
static void test_config_cors_origin(void) {
    struct gw_config c;
    char err[256] = "";
    unsetenv("LOCKGATE_LISTEN");
    unsetenv("LOCKGATE_REDIS");
    setenv("LOCKGATE_CORS_ORIGIN", "https://a.example, http://127.0.0.1:3000", 1);
    char *argv0[] = {"lockgate", NULL};
    CHECK_EQ_INT(config_load(&c, 1, argv0, err, sizeof err), 0);
    CHECK_EQ_INT(c.ncors_origins, 2);
    CHECK_EQ_STR(c.cors_origins[0], "https://a.example");
    CHECK_EQ_STR(c.cors_origins[1], "http://127.0.0.1:3000");
    char *argv1[] = {"lockgate",      "--cors-origin",          "https://b.example",
                     "--cors-origin", "https://c.example:8443", NULL};
    CHECK_EQ_INT(config_load(&c, 5, argv1, err, sizeof err), 0);
    CHECK_EQ_INT(c.ncors_origins, 2);
    CHECK_EQ_STR(c.cors_origins[0], "https://b.example");
    CHECK_EQ_STR(c.cors_origins[1], "https://c.example:8443");
    unsetenv("LOCKGATE_CORS_ORIGIN");
    char *argv2[] = {"lockgate", "--cors-origin", "https://b.example/app", NULL};
    CHECK_EQ_INT(config_load(&c, 3, argv2, err, sizeof err), -1);
    CHECK(strstr(err, "cors origin") != NULL);
    char *argv3[] = {"lockgate", "--cors-origin", "*", NULL};
    CHECK_EQ_INT(config_load(&c, 3, argv3, err, sizeof err), -1);
    CHECK_EQ_INT(config_load(&c, 1, argv0, err, sizeof err), 0);
    CHECK_EQ_INT(c.ncors_origins, 0);
}

/* Where the Redis password comes from: the URL or --redis-password-file,
 * never both; a user always has one of them. */
static void test_config_password_source(void) {
    struct gw_config c;
    char err[256] = "";
    unsetenv("LOCKGATE_REDIS");
    setenv("LOCKGATE_REDIS_PASSWORD_FILE", "/run/secrets/redis", 1);
    char *env_only[] = {"lockgate", "--redis", "redis://app:@h:1", NULL};
    CHECK_EQ_INT(config_load(&c, 3, env_only, err, sizeof err), 0);
    CHECK_EQ_STR(c.redis_password_file, "/run/secrets/redis");
    CHECK_EQ_STR(c.redis_user, "app");
    CHECK_EQ_STR(c.redis_password, "");
    unsetenv("LOCKGATE_REDIS_PASSWORD_FILE");

    char *flag[] = {"lockgate", "--redis-password-file", "/p", NULL};
    CHECK_EQ_INT(config_load(&c, 3, flag, err, sizeof err), 0);
    CHECK_EQ_STR(c.redis_password_file, "/p");

    char *both[] = {"lockgate", "--redis", "redis://:pw@h", "--redis-password-file", "/p", NULL};
    CHECK_EQ_INT(config_load(&c, 5, both, err, sizeof err), -1);
    CHECK(strstr(err, "give one") != NULL);

    char *no_pw[] = {"lockgate", "--redis", "redis://app:@h", NULL};
    CHECK_EQ_INT(config_load(&c, 3, no_pw, err, sizeof err), -1);
    CHECK(strstr(err, "needs a password") != NULL && !strchr(err, '\n'));

    char *empty[] = {"lockgate", "--redis-password-file", "", NULL};
    CHECK_EQ_INT(config_load(&c, 3, empty, err, sizeof err), -1);

    /* A bad URL is named in the error without its user and password. */
    char *bad_url[] = {"lockgate", "--redis", "redis://u:Hush-1@h:70000", NULL};
    CHECK_EQ_INT(config_load(&c, 3, bad_url, err, sizeof err), -1);
    CHECK(strstr(err, "redis://***@h:70000") != NULL && !strstr(err, "Hush"));
    char *bad_seed[] = {"lockgate", "--redis-cluster", "redis://:Hush-2@a:1,redis://:Hush-3@b:x",
                        NULL};
    CHECK_EQ_INT(config_load(&c, 3, bad_seed, err, sizeof err), -1);
    CHECK(!strstr(err, "Hush") && strstr(err, "redis://***@b:x") != NULL);

    /* A cluster seed's user, for a password from the file. */
    char *seed[] = {
        "lockgate", "--redis-cluster", "redis://app:@h:7000", "--redis-password-file", "/p", NULL};
    CHECK_EQ_INT(config_load(&c, 5, seed, err, sizeof err), 0);
    CHECK_EQ_STR(c.redis_user, "app");
}

/* rediss:// (TLS) wherever a Redis URL or endpoint is taken, and the
 * TLS settings with their defaults. */
static void test_config_redis_tls(void) {
    struct gw_config c;
    memset(&c, 0, sizeof c);
    CHECK_EQ_INT(config_parse_redis_url(&c, "rediss://u:p%40w@redis.example:6380/2"), 0);
    CHECK_EQ_INT(c.redis_tls, 1);
    CHECK_EQ_STR(c.redis_user, "u");
    CHECK_EQ_STR(c.redis_password, "p@w");
    CHECK_EQ_STR(c.redis_host, "redis.example");
    CHECK_EQ_INT(c.redis_port, 6380);
    CHECK_EQ_INT(c.redis_db, 2);
    CHECK_EQ_INT(config_parse_redis_url(&c, "redis://h"), 0);
    CHECK_EQ_INT(c.redis_tls, 0);
    const char *bad[] = {"redisss://h", "rediss:/h", "rediss://", "REDISS://h", "tls://h"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        CHECK_EQ_INT(config_parse_redis_url(&c, bad[i]), -1);

    struct gw_endpoint e;
    CHECK_EQ_INT(config_parse_endpoint(&e, "rediss://10.0.0.1:26380"), 0);
    CHECK_EQ_STR(e.host, "10.0.0.1");
    CHECK_EQ_INT(e.port, 26380);
    CHECK_EQ_INT(e.tls, 1);
    CHECK_EQ_INT(config_parse_endpoint(&e, "h:1"), 0);
    CHECK_EQ_INT(e.tls, 0);
    CHECK_EQ_INT(config_parse_endpoint(&e, "rediss://u:p@h:1"), -1); /* no login there */

    char err[256] = "";
    unsetenv("LOCKGATE_REDIS");
    char *single[] = {"lockgate",
                      "--redis",
                      "rediss://h:6380",
                      "--redis-tls-ca",
                      "/ca.pem",
                      "--redis-tls-server-name",
                      "redis.example",
                      "--redis-tls-insecure",
                      NULL};
    CHECK_EQ_INT(config_load(&c, 8, single, err, sizeof err), 0);
    CHECK_EQ_INT(c.nodes[0].tls, 1);
    CHECK_EQ_STR(c.redis_tls_ca, "/ca.pem");
    CHECK_EQ_STR(c.redis_tls_server_name, "redis.example");
    CHECK_EQ_INT(c.redis_tls_insecure, 1);
    char *quorum[] = {"lockgate", "--redis", "rediss://a:1,redis://b:2,rediss://c:3", NULL};
    CHECK_EQ_INT(config_load(&c, 3, quorum, err, sizeof err), 0);
    CHECK(c.nodes[0].tls && !c.nodes[1].tls && c.nodes[2].tls);
    char *seeds[] = {"lockgate", "--redis-cluster", "rediss://a:1,rediss://b:2", NULL};
    CHECK_EQ_INT(config_load(&c, 3, seeds, err, sizeof err), 0);
    CHECK(c.cluster[0].tls && c.cluster[1].tls);
    char *mixed[] = {"lockgate", "--redis-cluster", "rediss://a:1,b:2", NULL};
    CHECK_EQ_INT(config_load(&c, 3, mixed, err, sizeof err), -1);
    CHECK(strstr(err, "one scheme") != NULL);
    /* Sentinel: the master as the sentinels, unless said otherwise. */
    char *sen_tls[] = {"lockgate",   "--sentinel",   "rediss://a:1",
                       "--sentinel", "rediss://b:2", NULL};
    CHECK_EQ_INT(config_load(&c, 5, sen_tls, err, sizeof err), 0);
    CHECK(c.sentinels[0].tls && c.sentinels[1].tls && c.sentinel_master_tls == 1);
    char *sen_plain[] = {"lockgate", "--sentinel", "a:1", NULL};
    CHECK_EQ_INT(config_load(&c, 3, sen_plain, err, sizeof err), 0);
    CHECK_EQ_INT(c.sentinel_master_tls, 0);
    char *sen_set[] = {"lockgate", "--sentinel", "rediss://a:1", "--sentinel-master-tls",
                       "0",        NULL};
    CHECK_EQ_INT(config_load(&c, 5, sen_set, err, sizeof err), 0);
    CHECK_EQ_INT(c.sentinel_master_tls, 0);
    char *sen_bad[] = {"lockgate", "--sentinel-master-tls", "2", NULL};
    CHECK_EQ_INT(config_load(&c, 3, sen_bad, err, sizeof err), -1);
    /* The environment twins. */
    setenv("LOCKGATE_REDIS_TLS_INSECURE", "1", 1);
    setenv("LOCKGATE_REDIS_TLS_CERT", "/c.pem", 1);
    setenv("LOCKGATE_REDIS_TLS_KEY", "/c.key", 1);
    char *none[] = {"lockgate", NULL};
    CHECK_EQ_INT(config_load(&c, 1, none, err, sizeof err), 0);
    CHECK_EQ_INT(c.redis_tls_insecure, 1);
    CHECK_EQ_STR(c.redis_tls_cert, "/c.pem");
    CHECK_EQ_STR(c.redis_tls_key, "/c.key");
    setenv("LOCKGATE_REDIS_TLS_INSECURE", "yes", 1);
    CHECK_EQ_INT(config_load(&c, 1, none, err, sizeof err), -1);
    unsetenv("LOCKGATE_REDIS_TLS_INSECURE");
    unsetenv("LOCKGATE_REDIS_TLS_CERT");
    unsetenv("LOCKGATE_REDIS_TLS_KEY");
}

int main(void) {
    RUN(test_config_cors_origin);
    RUN(test_config_redis_url);
    RUN(test_config_redis_tls);
    RUN(test_config_password_source);
    RUN(test_config_listen);
    RUN(test_config_epoch);
    RUN(test_config_epoch_strict);
    RUN(test_config_load);
    return check_summary("config");
}
