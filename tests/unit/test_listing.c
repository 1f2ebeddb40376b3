/* test_listing.c -- the pure parts of listing.c: the SCAN MATCH pattern
 * (glob characters of the fixed part escaped) and the opaque cursor
 * (round trip; cursors the gateway never made are refused). */
#include "handlers/listing.h"
#include "tests/check.h"

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

static void test_cursor(void) {
    char enc[64], dec[32];
    listing_cursor_encode("0", enc, sizeof enc);
    CHECK_EQ_STR(enc, ""); /* done */
    const char *cursors[] = {"1", "42", "123456", "18446744073709551615"};
    for (int i = 0; i < 4; i++) {
        listing_cursor_encode(cursors[i], enc, sizeof enc);
        CHECK(strlen(enc) > 0 && strspn(enc, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
                                             "0123456789-_") == strlen(enc));
        CHECK_EQ_INT(listing_cursor_decode(enc, dec, sizeof dec), 0);
        CHECK_EQ_STR(dec, cursors[i]);
    }
    CHECK_EQ_INT(listing_cursor_decode(NULL, dec, sizeof dec), 0);
    CHECK_EQ_STR(dec, "0");
    CHECK_EQ_INT(listing_cursor_decode("", dec, sizeof dec), 0);
    const char *bad[] = {
        "!!", "Zm9v", "Yw", "YzEy=", "YzF4", "A", "YzEyMzQ1Njc4OTAxMjM0NTY3ODkwMTIzNDU2"};
    for (int i = 0; i < 7; i++) CHECK_EQ_INT(listing_cursor_decode(bad[i], dec, sizeof dec), -1);
}

int main(void) {
    RUN(test_pattern);
    RUN(test_cursor);
    return check_summary("listing");
}
