/* test_names.c -- the strings the gateway takes from outside and must judge
 * exactly: names from the path (name_decode), lock tokens (token_valid,
 * token_new) and the settings it is started with (config_parse_*,
 * config_load). */
#include "server/config.h"
#include "server/log.h"
#include "common/names.h"
#include "common/token.h"
#include "tests/check.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* ============================================================================
 * name_decode
 * ========================================================================= */

/* Decodes the whole of raw; returns the length (or -1) and the name. */
static int decode(const char *raw, char out[NAME_MAX_LEN + 1]) {
    memset(out, '#', NAME_MAX_LEN + 1);
    return name_decode(raw, strlen(raw), out);
}

static void test_name_plain(void) {
    char out[NAME_MAX_LEN + 1];
    CHECK_EQ_INT(decode("a", out), 1);
    CHECK_EQ_STR(out, "a");
    CHECK_EQ_INT(decode("orders", out), 6);
    CHECK_EQ_STR(out, "orders");
    /* Every allowed byte. */
    const char *all = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._:-";
    CHECK_EQ_INT(decode(all, out), (int)strlen(all));
    CHECK_EQ_STR(out, all);
    /* Dots alone are just names: no path meaning survives into a key. */
    CHECK_EQ_INT(decode(".", out), 1);
    CHECK_EQ_INT(decode("..", out), 2);
    CHECK_EQ_STR(out, "..");
    CHECK_EQ_INT(decode("svc:cron:nightly-report_v2.1", out), 28);
}

static void test_name_bad_bytes(void) {
    char out[NAME_MAX_LEN + 1];
    /* Every byte outside [A-Za-z0-9._:-], raw, alone and inside a name. */
    for (int c = 1; c < 256; c++) {
        int ok = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
                 c == '.' || c == '_' || c == ':' || c == '-';
        char raw[4] = {'a', (char)c, 'b', '\0'};
        if (c == '%') continue; /* an escape, tested below */
        int got = decode(raw, out);
        if (ok)
            CHECK_EQ_INT(got, 3);
        else if (got != -1) {
            fprintf(stderr, "  byte 0x%02x accepted\n", c);
            CHECK_EQ_INT(got, -1);
        }
    }
    /* A NUL inside the raw bytes (raw_len counts it) is not a name byte. */
    CHECK_EQ_INT(name_decode("ab\0cd", 5, out), -1);
    const char *bad[] = {"a b", "a/b", "a?b", "a#b", "a+b", "a~b",  "a,b",  "a;b",        "a=b",
                         "a@b", "a!b", "a*b", "a'b", "a(b", "a\\b", "a\"b", "caf\xc3\xa9"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) CHECK_EQ_INT(decode(bad[i], out), -1);
}

static void test_name_percent(void) {
    char out[NAME_MAX_LEN + 1];
    CHECK_EQ_INT(decode("%41", out), 1);
    CHECK_EQ_STR(out, "A");
    CHECK_EQ_INT(decode("pct%2Ename", out), 8);
    CHECK_EQ_STR(out, "pct.name");
    CHECK_EQ_INT(decode("pct%2ename", out), 8); /* lower-case hex too */
    CHECK_EQ_STR(out, "pct.name");
    CHECK_EQ_INT(decode("%61%62%63", out), 3);
    CHECK_EQ_STR(out, "abc");
    CHECK_EQ_INT(decode("%3A%5F%2D", out), 3);
    CHECK_EQ_STR(out, ":_-");

    /* Escapes that decode to a byte that is not allowed. */
    const char *bad_bytes[] = {"%00", "a%00",  "%00a",   "%2F", "a%2Fb", "a%2fb", "%20",
                               "%25", "%2541", "%C3%A9", "%FF", "%7E",   "%0A",   "%0D%0A"};
    for (size_t i = 0; i < sizeof bad_bytes / sizeof bad_bytes[0]; i++)
        CHECK_EQ_INT(decode(bad_bytes[i], out), -1);

    /* Broken escapes. */
    const char *broken[] = {"%",
                            "a%",
                            "%4",
                            "a%4",
                            "%zz",
                            "%g0",
                            "%0g",
                            "%%41",
                            "%-1",
                            "% 1",
                            "%+1",
                            "%x41",
                            "%\xff"
                            "0"};
    for (size_t i = 0; i < sizeof broken / sizeof broken[0]; i++)
        CHECK_EQ_INT(decode(broken[i], out), -1);

    /* An escape cut by raw_len is broken even when the bytes follow. */
    CHECK_EQ_INT(name_decode("ab%41", 4, out), -1);
    CHECK_EQ_INT(name_decode("ab%41", 3, out), -1);
    CHECK_EQ_INT(name_decode("ab%41", 5, out), 3);
    CHECK_EQ_STR(out, "abA");
}

static void test_name_length(void) {
    char out[NAME_MAX_LEN + 1];
    CHECK_EQ_INT(decode("", out), -1);
    CHECK_EQ_INT(name_decode("abc", 0, out), -1);

    char raw[3 * 260];
    memset(raw, 'n', 200);
    raw[200] = '\0';
    CHECK_EQ_INT(decode(raw, out), 200);
    CHECK_EQ_INT((int)strlen(out), 200);
    raw[200] = 'n';
    raw[201] = '\0';
    CHECK_EQ_INT(decode(raw, out), -1);

    /* The limit is on the decoded bytes: 200 escapes (600 raw) are fine,
     * 201 are not. */
    for (int i = 0; i < 201; i++) memcpy(raw + 3 * i, "%41", 3);
    CHECK_EQ_INT(name_decode(raw, 600, out), 200);
    CHECK_EQ_INT((int)strlen(out), 200);
    CHECK_EQ_INT(name_decode(raw, 603, out), -1);

    /* Only the first raw_len bytes count: the path goes on after them. */
    CHECK_EQ_INT(name_decode("abc/def", 3, out), 3);
    CHECK_EQ_STR(out, "abc");
}

/* A name that is too long must never be written past out[NAME_MAX_LEN]. */
static void test_name_no_overflow(void) {
    struct {
        char out[NAME_MAX_LEN + 1];
        char guard[32];
    } buf;
    memset(&buf, 0x5a, sizeof buf);
    char raw[1000];
    memset(raw, 'x', sizeof raw);
    CHECK_EQ_INT(name_decode(raw, sizeof raw, buf.out), -1);
    int guard_ok = 1;
    for (size_t i = 0; i < sizeof buf.guard; i++) guard_ok &= buf.guard[i] == 0x5a;
    CHECK(guard_ok);
}

/* ============================================================================
 * Tokens
 * ========================================================================= */

static int b64url_char(char c) {
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' ||
           c == '_';
}

static int cmp_tok(const void *a, const void *b) { return strcmp(a, b); }

static void test_token_new(void) {
    enum { N = 2000 };
    static char toks[N][TOKEN_NEW_LEN + 1];
    int seen[256] = {0};
    for (int i = 0; i < N; i++) {
        memset(toks[i], '!', sizeof toks[i]);
        token_new(toks[i]);
        CHECK_EQ_INT((int)strlen(toks[i]), 22);
        CHECK(token_valid(toks[i]));
        for (int j = 0; j < 22; j++) {
            CHECK(b64url_char(toks[i][j]));
            if (j < 21) seen[(unsigned char)toks[i][j]]++;
        }
        /* 128 bits = 21 whole characters and 2 bits: the last character
         * carries those 2 bits and four zero bits, so it is one of these. */
        CHECK(strchr("AQgw", toks[i][21]) != NULL);
    }
    /* All distinct. */
    qsort(toks, N, sizeof toks[0], cmp_tok);
    int dups = 0;
    for (int i = 1; i < N; i++) dups += strcmp(toks[i - 1], toks[i]) == 0;
    CHECK_EQ_INT(dups, 0);
    /* Every one of the 64 characters turns up (42000 draws: a missing one
     * would mean the encoding loses bits). */
    const char *alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    for (const char *p = alphabet; *p; p++) {
        if (seen[(unsigned char)*p] == 0) fprintf(stderr, "  '%c' never drawn\n", *p);
        CHECK(seen[(unsigned char)*p] > 0);
    }
}

static void test_token_valid(void) {
    char t[200];
    for (int n = 0; n <= 140; n++) {
        memset(t, 'a', (size_t)n);
        t[n] = '\0';
        CHECK_EQ_INT(token_valid(t), n >= 22 && n <= 128);
    }
    CHECK(token_valid("client-chosen-token-AAAAAAAAAA"));
    CHECK(token_valid("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"));
    const char *bad[] = {
        "aaaaaaaaaaaaaaaaaaaaa+",    "aaaaaaaaaaaaaaaaaaaaa/",       "aaaaaaaaaaaaaaaaaaaaaa=",
        "aaaaaaaaaaa aaaaaaaaaa",    "aaaaaaaaaaaaaaaaaaaaa.",       "aaaaaaaaaaaaaaaaaaaaa:",
        "aaaaaaaaaaaaaaaaaaaaa\t",   "aaaaaaaaaaaaaaaaaaaa\xc3\xa9", "aaaaaaaaaaaaaaaaaaaaa%",
        "aaaaaaaaaaaaaaaaaaaaa\x7f", " aaaaaaaaaaaaaaaaaaaaaa",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) CHECK_EQ_INT(token_valid(bad[i]), 0);
    /* A very long token is refused without reading it all (and safely). */
    char *huge = malloc(10001);
    memset(huge, 'a', 10000);
    huge[10000] = '\0';
    CHECK_EQ_INT(token_valid(huge), 0);
    free(huge);
}

/* ============================================================================
 * Settings
 * ========================================================================= */

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

    /* A user name is accepted and only the password kept. */
    CHECK_EQ_INT(config_parse_redis_url(&c, "redis://default:pw@h:1"), 0);
    CHECK_EQ_STR(c.redis_password, "pw");
    CHECK_EQ_STR(c.redis_host, "h");
    CHECK_EQ_INT(c.redis_port, 1);

    /* A later URL resets what an earlier one set. */
    CHECK_EQ_INT(config_parse_redis_url(&c, "redis://h2/"), 0);
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
        "rediss://h",
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
    unsetenv("LOCKGATE_REDIS");
    unsetenv("LOCKGATE_KEY_PREFIX");
}

int main(void) {
    RUN(test_name_plain);
    RUN(test_name_bad_bytes);
    RUN(test_name_percent);
    RUN(test_name_length);
    RUN(test_name_no_overflow);
    RUN(test_token_new);
    RUN(test_token_valid);
    RUN(test_config_redis_url);
    RUN(test_config_listen);
    RUN(test_config_epoch);
    RUN(test_config_epoch_strict);
    RUN(test_config_load);
    return check_summary("names");
}
