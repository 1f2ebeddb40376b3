/* test_quorum_math.c -- quorum mode's arithmetic without a server
 * (handlers/quorum_math.c): a grant's validity, when a busy name may be
 * free for a quorum, and where an id block goes. */
#include "handlers/quorum_math.h"
#include "tests/check.h"

static void test_validity(void) {
    CHECK_EQ_INT(quorum_drift_ms(30000), 302);
    CHECK_EQ_INT(quorum_drift_ms(100), 3);
    /* The shortest lease, less the round and the drift for the lease asked. */
    CHECK_EQ_INT(quorum_validity(30000, 12, 30000), 30000 - 12 - 302);
    CHECK_EQ_INT(quorum_validity(29990, 0, 30000), 29990 - 302);
    /* A round slower than the lease leaves nothing: not granted. */
    CHECK(quorum_validity(1000, 990, 1000) <= 0);
    CHECK(!quorum_granted(3, 3, 0));
    CHECK(!quorum_granted(2, 3, 500));
    CHECK(quorum_granted(3, 3, 1));
    CHECK(quorum_granted(5, 3, 1));
}

static void test_retry_after(void) {
    /* 5 masters, quorum 3: 2 free, 3 busy for 900, 100, 500 ms: one more
     * is needed, the one free soonest. */
    long long busy[3] = {900, 100, 500};
    CHECK_EQ_INT(quorum_retry_after(busy, 3, 5, 3), 100);
    /* None free: three needed, the third soonest. */
    long long all[5] = {50, 40, 30, 20, 10};
    CHECK_EQ_INT(quorum_retry_after(all, 5, 5, 3), 30);
    /* Only 3 answered, all busy, quorum 3: wait for the last. */
    long long three[3] = {7, 9, 8};
    CHECK_EQ_INT(quorum_retry_after(three, 3, 3, 3), 9);
    /* Enough free already (busy only for another reason): the first. */
    long long one[1] = {42};
    CHECK_EQ_INT(quorum_retry_after(one, 1, 5, 3), 42);
    CHECK_EQ_INT(quorum_retry_after(NULL, 0, 5, 3), 1);
}

static void test_id_block(void) {
    uint32_t sec, first, last;
    /* The clock is past every mark: a fresh second from 0. */
    CHECK_EQ_INT(quorum_id_block(1000, 999, 55, 10, &sec, &first, &last), 0);
    CHECK_EQ_INT(sec, 1000);
    CHECK_EQ_INT(first, 0);
    CHECK_EQ_INT(last, 9);
    /* A mark in this second (or a later one: a master's clock ahead):
     * above the highest mark. */
    CHECK_EQ_INT(quorum_id_block(1000, 1000, 55, 10, &sec, &first, &last), 0);
    CHECK_EQ_INT(sec, 1000);
    CHECK_EQ_INT(first, 56);
    CHECK_EQ_INT(last, 65);
    CHECK_EQ_INT(quorum_id_block(1000, 1003, 7, 1, &sec, &first, &last), 0);
    CHECK_EQ_INT(sec, 1003);
    CHECK_EQ_INT(first, 8);
    CHECK_EQ_INT(last, 8);
    /* A second used up moves on; the block's end is capped. */
    CHECK_EQ_INT(quorum_id_block(1000, 1000, 0xffffffffLL, 4, &sec, &first, &last), 0);
    CHECK_EQ_INT(sec, 1001);
    CHECK_EQ_INT(first, 0);
    CHECK_EQ_INT(quorum_id_block(1000, 1000, 0xfffffff0LL, 100, &sec, &first, &last), 0);
    CHECK_EQ_INT(first, 0xfffffff1U);
    CHECK_EQ_INT(last, 0xffffffffU);
    /* No mark yet (-1) is below any clock. */
    CHECK_EQ_INT(quorum_id_block(5, -1, -1, 3, &sec, &first, &last), 0);
    CHECK_EQ_INT(sec, 5);
    CHECK_EQ_INT(first, 0);
    /* A clock nobody read, or past 2^31 s: refused. */
    CHECK_EQ_INT(quorum_id_block(-1, -1, -1, 3, &sec, &first, &last), -1);
    CHECK_EQ_INT(quorum_id_block(0x80000000LL, 0, 0, 3, &sec, &first, &last), -1);
}

/* A failed round is busy only when a master said busy (or a quorum
 * granted too late); a -8 or an abstention that the quorum lacks is a
 * data loss, and anything else no common answer: never a 409. */
static void test_failed_why(void) {
    CHECK_EQ_INT(quorum_failed_why(1, 1, 0, 2), QUORUM_FAILED_BUSY);
    CHECK_EQ_INT(quorum_failed_why(1, 1, 1, 2), QUORUM_FAILED_BUSY);
    CHECK_EQ_INT(quorum_failed_why(2, 0, 0, 2), QUORUM_FAILED_BUSY); /* validity ran out */
    CHECK_EQ_INT(quorum_failed_why(1, 0, 1, 2), QUORUM_FAILED_DATA_LOST);
    CHECK_EQ_INT(quorum_failed_why(0, 0, 2, 2), QUORUM_FAILED_DATA_LOST);
    CHECK_EQ_INT(quorum_failed_why(1, 0, 1, 3), QUORUM_FAILED_NO_COMMON); /* loss is not all */
    CHECK_EQ_INT(quorum_failed_why(1, 0, 0, 2), QUORUM_FAILED_NO_COMMON);
    CHECK_EQ_INT(quorum_lost_retry_ms(0), QUORUM_LOST_RETRY_MS);
    CHECK_EQ_INT(quorum_lost_retry_ms(250), 250);
    CHECK_EQ_INT(quorum_lost_retry_ms(60000), QUORUM_LOST_RETRY_MS);
}

int main(void) {
    RUN(test_validity);
    RUN(test_retry_after);
    RUN(test_failed_why);
    RUN(test_id_block);
    return check_summary("quorum_math");
}
