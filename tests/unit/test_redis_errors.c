/* test_redis_errors.c -- which Redis failures a waiting request rides out
 * (redis_error_is_final, server/redis.c): Redis refusing the command
 * itself is final; Redis away, loading, read-only or moving is not. */
#include "server/redis.h"
#include "tests/check.h"

static void test_final(void) {
    CHECK(redis_error_is_final("ERR Error running script (call to f_1234): bad argument"));
    CHECK(
        redis_error_is_final("WRONGTYPE Operation against a key holding the wrong kind of value"));
    CHECK(redis_error_is_final("NOPERM this user has no permissions to run the 'evalsha' command"));
    CHECK(redis_error_is_final("NOAUTH Authentication required."));
    CHECK(redis_error_is_final("WRONGPASS invalid username-password pair"));
    CHECK(redis_error_is_final("ERR"));
}

static void test_passing(void) {
    CHECK(!redis_error_is_final(NULL));
    CHECK(!redis_error_is_final(""));
    CHECK(!redis_error_is_final("Redis is not connected"));
    CHECK(!redis_error_is_final("Redis connection lost"));
    CHECK(!redis_error_is_final("Redis did not answer in time"));
    CHECK(!redis_error_is_final("LOADING Redis is loading the dataset in memory"));
    CHECK(!redis_error_is_final("READONLY You can't write against a read only replica."));
    CHECK(!redis_error_is_final("MASTERDOWN Link with MASTER is down"));
    CHECK(!redis_error_is_final("CLUSTERDOWN The cluster is down"));
    CHECK(!redis_error_is_final("TRYAGAIN Multiple keys request during rehashing of slot"));
    CHECK(!redis_error_is_final("BUSY Redis is busy running a script."));
    CHECK(!redis_error_is_final("ERRANT is not a code")); /* a code is a whole word */
}

/* redis_error_is_reply (handlers/undo.h): an error reply means the command
 * did not run; the layer's own failures leave it unknown, and an acquire
 * then is undone. */
static void test_reply_or_unknown(void) {
    CHECK(redis_error_is_reply("OOM command not allowed when used memory > 'maxmemory'."));
    CHECK(redis_error_is_reply("LOADING Redis is loading the dataset in memory"));
    CHECK(redis_error_is_reply("BUSY Redis is busy running a script."));
    CHECK(redis_error_is_reply("ERR"));
    CHECK(!redis_error_is_reply(NULL));
    CHECK(!redis_error_is_reply(""));
    CHECK(!redis_error_is_reply("Redis did not answer in time"));
    CHECK(!redis_error_is_reply("Redis connection lost"));
    CHECK(!redis_error_is_reply("Redis is not connected"));
    CHECK(!redis_error_is_reply("only 2 of 5 Redis masters answered (Redis is not connected)"));
    CHECK(!redis_error_is_reply("the gateway is stopping"));
    CHECK(!redis_error_is_reply("X not a code")); /* one letter is not a code */
}

int main(void) {
    RUN(test_final);
    RUN(test_passing);
    RUN(test_reply_or_unknown);
    return check_summary("redis_errors");
}
