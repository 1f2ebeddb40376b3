/* test_listing.c -- the pure parts of listing.c: the SCAN MATCH pattern
 * (glob characters of the fixed part escaped) and the opaque cursor
 * (round trip; cursors the gateway never made are refused). */
#include "handlers/listing.h"
#include "tests/check.h"

#include <stdio.h>
#include <string.h>

static void test_pattern(void) {
    char out[256];
    CHECK_EQ_INT(listing_pattern("lockgate:", "lock", "", out, sizeof out), 17);
    CHECK_EQ_STR(out, "lockgate:lock:{*}");
    listing_pattern("lockgate:", "sem", "a.b:c-d_e", out, sizeof out);
    CHECK_EQ_STR(out, "lockgate:sem:{a.b:c-d_e*}");
    /* A key prefix may hold glob characters: each is escaped. */
    listing_pattern("p*?[x]\\:", "lock", "n", out, sizeof out);
    CHECK_EQ_STR(out, "p\\*\\?\\[x\\]\\\\:lock:{n*}");
    CHECK_EQ_INT(listing_pattern("lockgate:", "lock", "abc", out, 10), -1);
}

static void round_trip(int master, const char *scan, const char *next, const char *after) {
    struct listing_cursor c = {master, "", "", ""}, d;
    snprintf(c.scan, sizeof c.scan, "%s", scan);
    snprintf(c.next, sizeof c.next, "%s", next);
    snprintf(c.after, sizeof c.after, "%s", after);
    char enc[LISTING_CURSOR_MAX + 1];
    listing_cursor_encode(&c, enc, sizeof enc);
    CHECK(strlen(enc) > 0 && strspn(enc, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
                                         "0123456789-_") == strlen(enc));
    CHECK_EQ_INT(listing_cursor_decode(enc, &d), 0);
    CHECK_EQ_INT(d.master, master);
    CHECK_EQ_STR(d.scan, scan);
    CHECK_EQ_STR(d.after, after);
    if (*after) CHECK_EQ_STR(d.next, next);
}

static void test_cursor(void) {
    struct listing_cursor c = {-1, "0", "", ""}, d;
    char enc[LISTING_CURSOR_MAX + 1];
    listing_cursor_encode(&c, enc, sizeof enc);
    CHECK_EQ_STR(enc, ""); /* done */
    const char *cursors[] = {"1", "42", "123456", "18446744073709551615"};
    for (int i = 0; i < 4; i++) round_trip(-1, cursors[i], "", "");
    round_trip(2, "0", "", ""); /* cluster: the next master's start */
    round_trip(0, "17", "", "");
    round_trip(-1, "0", "96", "orders:42"); /* a page that ended inside a call */
    char longest[NAME_MAX_LEN + 1];         /* every character a name may hold, at the longest */
    for (int i = 0; i < NAME_MAX_LEN; i++) longest[i] = "AZaz09._:-"[i % 10];
    longest[NAME_MAX_LEN] = '\0';
    round_trip(12, "18446744073709551615", "18446744073709551615", longest);
    round_trip(99999, "18446744073709551615", "18446744073709551615", longest); /* the longest */
    CHECK_EQ_INT(listing_cursor_decode(NULL, &d), 0);
    CHECK_EQ_STR(d.scan, "0");
    CHECK_EQ_INT(d.master, -1);
    CHECK_EQ_INT(listing_cursor_decode("", &d), 0);
    /* "foo", "c", "c12=", "c1x", "A", 35 digits, "c1 2" (no name), "c1 2 a*b",
     * "c1 x a", "c123456:1" (master of 6 digits), "c:1", "c1:" */
    const char *bad[] = {"!!",
                         "Zm9v",
                         "Yw",
                         "YzEy=",
                         "YzF4",
                         "A",
                         "YzEyMzQ1Njc4OTAxMjM0NTY3ODkwMTIzNDU2",
                         "YzEgMg",
                         "YzEgMiBhKmI",
                         "YzEgeCBh",
                         "YzEyMzQ1NjoxIA",
                         "YzEyMzQ1Njox",
                         "Yzox",
                         "YzE6"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        CHECK_EQ_INT(listing_cursor_decode(bad[i], &d), -1);
}

int main(void) {
    RUN(test_pattern);
    RUN(test_cursor);
    return check_summary("listing");
}
