/* check.h -- the smallest test framework that does the job.
 *
 * A test is a `static void test_x(void)` registered with RUN(test_x).
 * CHECK(cond) records a failure with file:line and goes on; a test passes
 * when none of its checks failed.  check_summary() prints the closing line
 * CI reads ("<suite>: N passed, N failed") and returns the exit status. */
#ifndef LOCKGATE_CHECK_H
#define LOCKGATE_CHECK_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int check_passed, check_failed, check_cur_failed __attribute__((unused));

#define CHECK(cond)                                                           \
    do {                                                                      \
        if (!(cond)) {                                                        \
            fprintf(stderr, "  FAIL %s:%d: %s\n", __FILE__, __LINE__, #cond); \
            check_cur_failed = 1;                                             \
        }                                                                     \
    } while (0)

#define CHECK_EQ_INT(a, b)                                                                         \
    do {                                                                                           \
        long long check_a_ = (long long)(a), check_b_ = (long long)(b);                            \
        if (check_a_ != check_b_) {                                                                \
            fprintf(stderr, "  FAIL %s:%d: %s == %s (%lld != %lld)\n", __FILE__, __LINE__, #a, #b, \
                    check_a_, check_b_);                                                           \
            check_cur_failed = 1;                                                                  \
        }                                                                                          \
    } while (0)

#define CHECK_EQ_STR(a, b)                                                                         \
    do {                                                                                           \
        const char *check_a_ = (a), *check_b_ = (b);                                               \
        if (!check_a_ || !check_b_ || strcmp(check_a_, check_b_) != 0) {                           \
            fprintf(stderr, "  FAIL %s:%d: %s == %s (\"%s\" != \"%s\")\n", __FILE__, __LINE__, #a, \
                    #b, check_a_ ? check_a_ : "(null)", check_b_ ? check_b_ : "(null)");           \
            check_cur_failed = 1;                                                                  \
        }                                                                                          \
    } while (0)

#define RUN(fn)                                    \
    do {                                           \
        check_cur_failed = 0;                      \
        fn();                                      \
        if (check_cur_failed) {                    \
            check_failed++;                        \
            fprintf(stderr, "not ok - %s\n", #fn); \
        } else {                                   \
            check_passed++;                        \
            fprintf(stderr, "ok - %s\n", #fn);     \
        }                                          \
    } while (0)

/* RUN_SOME runs only the tests whose names contain the filter: a test
 * binary's first argument, or else $ONLY (check_filter sets it). */
static const char *check_only __attribute__((unused));
static inline void check_filter(const char *arg) { check_only = arg ? arg : getenv("ONLY"); }
#define RUN_SOME(fn)                                         \
    do {                                                     \
        if (!check_only || strstr(#fn, check_only)) RUN(fn); \
    } while (0)

static inline int check_summary(const char *suite) {
    printf("%s: %d passed, %d failed\n", suite, check_passed, check_failed);
    fflush(stdout);
    return check_failed ? 1 : 0;
}

#endif
