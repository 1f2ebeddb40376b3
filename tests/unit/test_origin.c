/* test_origin.c -- which Origin a browser request may come from
 * (server/origin.c): the parser of --cors-origin values and the verdict
 * for a request's Origin and Host. */
#include "server/origin.h"
#include "tests/check.h"

static void test_parse(void) {
    CHECK_EQ_INT(origin_parse("http://example.com"), 0);
    CHECK_EQ_INT(origin_parse("https://app.example.com:8443"), 0);
    CHECK_EQ_INT(origin_parse("http://127.0.0.1:3000"), 0);
    CHECK_EQ_INT(origin_parse("http://[::1]:3000"), 0);
    CHECK_EQ_INT(origin_parse("HTTP://Example.COM"), 0);
    CHECK_EQ_INT(origin_parse("http://example.com/"), -1); /* no path */
    CHECK_EQ_INT(origin_parse("http://example.com/app"), -1);
    CHECK_EQ_INT(origin_parse("ftp://example.com"), -1);
    CHECK_EQ_INT(origin_parse("example.com"), -1);
    CHECK_EQ_INT(origin_parse("null"), -1);
    CHECK_EQ_INT(origin_parse("*"), -1);
    CHECK_EQ_INT(origin_parse("http://"), -1);
    CHECK_EQ_INT(origin_parse("http://a:"), -1);
    CHECK_EQ_INT(origin_parse("http://a:123456"), -1);
    CHECK_EQ_INT(origin_parse("http://a:12x"), -1);
    CHECK_EQ_INT(origin_parse("http://user@a"), -1);
    CHECK_EQ_INT(origin_parse("http://[::1"), -1);
    CHECK_EQ_INT(origin_parse(""), -1);
    CHECK_EQ_INT(origin_parse(NULL), -1);
}

static void test_verdicts(void) {
    const char list[2][ORIGIN_MAX_LEN + 1] = {"https://app.example.com", "http://127.0.0.1:3000"};
    origin_init(list, 0);
    CHECK_EQ_INT(origin_cors_enabled(), 0);
    CHECK_EQ_INT(origin_check(NULL, "gw:8080", 0), ORIGIN_NONE);
    CHECK_EQ_INT(origin_check("http://gw:8080", "gw:8080", 0), ORIGIN_SAME);
    CHECK_EQ_INT(origin_check("http://GW:8080", "gw:8080", 0), ORIGIN_SAME);
    CHECK_EQ_INT(origin_check("https://gw:8080", "gw:8080", 0), ORIGIN_REFUSED); /* scheme */
    CHECK_EQ_INT(origin_check("https://gw:8080", "gw:8080", 1), ORIGIN_SAME);
    CHECK_EQ_INT(origin_check("http://gw", "gw:80", 0), ORIGIN_SAME); /* default port */
    CHECK_EQ_INT(origin_check("https://gw:443", "gw", 1), ORIGIN_SAME);
    CHECK_EQ_INT(origin_check("http://gw:8081", "gw:8080", 0), ORIGIN_REFUSED);
    CHECK_EQ_INT(origin_check("http://evil.example", "gw:8080", 0), ORIGIN_REFUSED);
    CHECK_EQ_INT(origin_check("http://evil.example", NULL, 0), ORIGIN_REFUSED);
    CHECK_EQ_INT(origin_check("null", "gw:8080", 0), ORIGIN_REFUSED);
    CHECK_EQ_INT(origin_check("", "gw:8080", 0), ORIGIN_REFUSED);
    CHECK_EQ_INT(origin_check("http://gw:8080/", "gw:8080", 0), ORIGIN_REFUSED);
    CHECK_EQ_INT(origin_check("https://app.example.com", "gw:8080", 0), ORIGIN_REFUSED);

    origin_init(list, 2);
    CHECK_EQ_INT(origin_cors_enabled(), 1);
    CHECK_EQ_INT(origin_check("https://app.example.com", "gw:8080", 0), ORIGIN_LISTED);
    CHECK_EQ_INT(origin_check("https://APP.example.com:443", "gw:8080", 0), ORIGIN_LISTED);
    CHECK_EQ_INT(origin_check("http://app.example.com", "gw:8080", 0), ORIGIN_REFUSED);
    CHECK_EQ_INT(origin_check("https://app.example.com.evil", "gw:8080", 0), ORIGIN_REFUSED);
    CHECK_EQ_INT(origin_check("https://evil-app.example.com", "gw:8080", 0), ORIGIN_REFUSED);
    CHECK_EQ_INT(origin_check("http://127.0.0.1:3000", "gw:8080", 0), ORIGIN_LISTED);
    CHECK_EQ_INT(origin_check("http://127.0.0.1:30000", "gw:8080", 0), ORIGIN_REFUSED);
    CHECK_EQ_INT(origin_check("http://gw:8080", "gw:8080", 0), ORIGIN_SAME);
    origin_init(list, 0);
}

int main(void) {
    RUN(test_parse);
    RUN(test_verdicts);
    return check_summary("origin");
}
