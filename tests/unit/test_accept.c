/* test_accept.c -- Accept negotiation: q-values, specificity, 406 cases. */
#include "server/accept.h"
#include "tests/check.h"

static const char *const ids[] = {"application/json", "text/plain", NULL};
static const char *const json[] = {"application/json", NULL};

static void test_absent_means_anything(void) {
    CHECK_EQ_INT(accept_choose(NULL, ids), 0);
    CHECK_EQ_INT(accept_choose("", ids), 0);
    CHECK_EQ_INT(accept_choose("  ", ids), 0);
    CHECK_EQ_INT(accept_choose("*/*", ids), 0);
}

static void test_q_values_decide(void) {
    CHECK_EQ_INT(accept_choose("application/json;q=0.5, text/plain;q=0.9", ids), 1);
    CHECK_EQ_INT(accept_choose("application/json;q=0.9, text/plain;q=0.5", ids), 0);
    CHECK_EQ_INT(accept_choose("text/plain", ids), 1);
    CHECK_EQ_INT(accept_choose("text/plain; charset=utf-8", ids), 1);
    CHECK_EQ_INT(accept_choose("TEXT/Plain ; Q=0.3", ids), 1);
    /* A tie goes to the server's first choice. */
    CHECK_EQ_INT(accept_choose("text/plain, application/json", ids), 0);
    CHECK_EQ_INT(accept_choose("text/*, application/json;q=0.1", ids), 1);
    CHECK_EQ_INT(accept_choose("*/*;q=0.1, text/plain", ids), 1);
    CHECK_EQ_INT(accept_choose("application/json;q=1.000, text/plain;q=0.999", ids), 0);
}

static void test_most_specific_range_wins(void) {
    /* text/plain is refused although text/ * is welcome. */
    CHECK_EQ_INT(accept_choose("text/*, text/plain;q=0, application/json;q=0.2", ids), 0);
    CHECK_EQ_INT(accept_choose("*/*, application/json;q=0", ids), 1);
}

static void test_nothing_acceptable(void) {
    CHECK_EQ_INT(accept_choose("text/html", ids), -1);
    CHECK_EQ_INT(accept_choose("image/png, text/html;q=0.9", json), -1);
    CHECK_EQ_INT(accept_choose("application/json;q=0", json), -1);
    CHECK_EQ_INT(accept_choose("*/*;q=0", ids), -1);
    CHECK_EQ_INT(accept_choose("text/plain", json), -1);
}

static void test_bad_elements_are_skipped(void) {
    CHECK_EQ_INT(accept_choose("garbage, text/plain", ids), 1);
    CHECK_EQ_INT(accept_choose("text/plain;q=2, application/json", ids), 0);
    CHECK_EQ_INT(accept_choose("text/plain;q=0.5x", ids), -1);
    CHECK_EQ_INT(accept_choose("*/json", ids), -1);
    CHECK_EQ_INT(accept_choose(",,, text/plain ,", ids), 1);
}

int main(void) {
    RUN(test_absent_means_anything);
    RUN(test_q_values_decide);
    RUN(test_most_specific_range_wins);
    RUN(test_nothing_acceptable);
    RUN(test_bad_elements_are_skipped);
    return check_summary("accept");
}
