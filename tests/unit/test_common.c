/* test_common.c -- common/, the rules and helpers both binaries link: names
 * (name_valid, name_decode), lock tokens (token_valid, token_new), the
 * decimal parser, the FNV hash and the allocation helpers. */
#include "common/alloc.h"
#include "common/decimal.h"
#include "common/fnv.h"
#include "common/names.h"
#include "common/token.h"
#include "tests/check.h"

#include <limits.h>
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

/* name_valid is name_decode's rule without the decoding: lockctl checks a
 * name with it before sending, so that the two can never disagree. */
static void test_name_valid(void) {
    const char *good[] = {"a", "job-1", "orders.v2", "ns:lock_x", "A.b_c:d-E"};
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++)
        CHECK_EQ_INT(name_valid(good[i], strlen(good[i])), 1);
    const char *bad[] = {"", "a b", "a/b", "a%41", "caf\xc3\xa9", "a\tb", "x?y", "#"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        CHECK_EQ_INT(name_valid(bad[i], strlen(bad[i])), 0);
    CHECK_EQ_INT(name_valid("ab\0c", 4), 0); /* a NUL inside is a bad byte */
    char raw[NAME_MAX_LEN + 2];
    memset(raw, 'n', sizeof raw);
    CHECK_EQ_INT(name_valid(raw, NAME_MAX_LEN), 1);
    CHECK_EQ_INT(name_valid(raw, NAME_MAX_LEN + 1), 0);
    /* Every byte: name_valid and name_decode accept the same ones. */
    char out[NAME_MAX_LEN + 1];
    for (int c = 1; c < 256; c++) {
        char one = (char)c;
        if (c == '%') continue; /* an escape to name_decode */
        CHECK_EQ_INT(name_valid(&one, 1), name_decode(&one, 1, out) == 1);
    }
}

/* ============================================================================
 * decimal_parse
 * ========================================================================= */

static int dec(const char *s, long long lo, long long hi, long long *v) {
    return decimal_parse(s, s ? strlen(s) : 0, lo, hi, v);
}

static void test_decimal_parse(void) {
    long long v = -1;
    CHECK_EQ_INT(dec("0", 0, 10, &v), 0);
    CHECK_EQ_INT(v, 0);
    CHECK_EQ_INT(dec("1", 1, 10000, &v), 0);
    CHECK_EQ_INT(v, 1);
    CHECK_EQ_INT(dec("10000", 1, 10000, &v), 0);
    CHECK_EQ_INT(v, 10000);
    CHECK_EQ_INT(dec("007", 1, 10000, &v), 0);
    CHECK_EQ_INT(v, 7);
    CHECK_EQ_INT(dec("9223372036854775807", 0, LLONG_MAX, &v), 0);
    CHECK_EQ_INT(v, LLONG_MAX);
    CHECK_EQ_INT(dec("9223372036854775806", 0, LLONG_MAX, &v), 0);
    CHECK_EQ_INT(v, LLONG_MAX - 1);

    v = 42;
    const char *bad[] = {"",     "-1",  "+1",  " 1", "1 ",    "1a", "a1",
                         "0x10", "1.0", "1e3", "١",  "10001", "0",  "99999999999999999999999999"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        CHECK_EQ_INT(dec(bad[i], 1, 10000, &v), -1);
    }
    CHECK_EQ_INT(dec(NULL, 1, 10000, &v), -1);
    CHECK_EQ_INT(dec("9223372036854775808", 0, LLONG_MAX, &v), -1);
    CHECK_EQ_INT(dec("18446744073709551616", 0, LLONG_MAX, &v), -1);
    CHECK_EQ_INT(dec("7", 0, 5, &v), -1);
    CHECK_EQ_INT(dec("50", 0, 5, &v), -1);
    CHECK_EQ_INT(v, 42); /* untouched by a refusal */

    /* The length counts, not a NUL: a query argument or a path segment
     * is parsed where it lies. */
    CHECK_EQ_INT(decimal_parse("1234&x=1", 4, 0, 10000, &v), 0);
    CHECK_EQ_INT(v, 1234);
    CHECK_EQ_INT(decimal_parse("12\0"
                               "3",
                               4, 0, 10000, &v),
                 -1);
}

/* ============================================================================
 * fnv1a_64, alloc_copy
 * ========================================================================= */

/* The published FNV-1a test vectors.  (Both copies this replaced started
 * from 1469598103934665603, the offset basis with its last digit lost: a
 * hash still, but not FNV's.) */
static void test_fnv1a_64(void) {
    CHECK(fnv1a_64("", 0) == 0xcbf29ce484222325ULL);
    CHECK(fnv1a_64("a", 1) == 0xaf63dc4c8601ec8cULL);
    CHECK(fnv1a_64("foobar", 6) == 0x85944171f73967e8ULL);
    CHECK(fnv1a_64("foobarbaz", 6) == fnv1a_64("foobar", 6)); /* len, not NUL */
}

static void test_alloc_copy(void) {
    char *p = alloc_copy("abcdef", 3);
    CHECK_EQ_STR(p, "abc");
    free(p);
    p = alloc_copy("", 0);
    CHECK_EQ_STR(p, "");
    free(p);
    int x = 7;
    CHECK(alloc_check(&x) == &x);
}

int main(void) {
    RUN(test_name_plain);
    RUN(test_name_bad_bytes);
    RUN(test_name_percent);
    RUN(test_name_length);
    RUN(test_name_no_overflow);
    RUN(test_name_valid);
    RUN(test_token_new);
    RUN(test_token_valid);
    RUN(test_decimal_parse);
    RUN(test_fnv1a_64);
    RUN(test_alloc_copy);
    return check_summary("common");
}
