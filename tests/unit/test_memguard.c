/* test_memguard.c -- which INFO memory answers say a master may evict
 * held locks (memguard_parse, server/memguard.c), and the counting that
 * refuses grants while one connection sees such a master. */
#include "server/memguard.h"
#include "tests/check.h"

#include <string.h>

static const char *info(const char *maxmemory, const char *policy) {
    static char buf[512];
    snprintf(buf, sizeof buf,
             "# Memory\r\nused_memory:1000\r\nmaxmemory:%s\r\nmaxmemory_human:x\r\n"
             "maxmemory_policy:%s\r\n",
             maxmemory, policy);
    return buf;
}

static void test_parse(void) {
    char policy[64];
    long long mm;
    CHECK_EQ_INT(memguard_parse(info("0", "allkeys-lru"), policy, sizeof policy, &mm), 0);
    CHECK_EQ_STR(policy, "allkeys-lru"); /* no maxmemory: nothing is evicted */
    CHECK_EQ_INT(memguard_parse(info("2097152", "noeviction"), policy, sizeof policy, &mm), 0);
    CHECK_EQ_INT(mm, 2097152);
    CHECK_EQ_INT(memguard_parse(info("2097152", "volatile-lru"), policy, sizeof policy, &mm), 1);
    CHECK_EQ_INT(memguard_parse(info("2097152", "volatile-ttl"), policy, sizeof policy, &mm), 1);
    CHECK_EQ_INT(memguard_parse(info("2097152", "allkeys-lru"), policy, sizeof policy, &mm), 2);
    CHECK_EQ_INT(memguard_parse(info("2097152", "allkeys-random"), policy, sizeof policy, &mm), 2);
    /* maxmemory_human must not be read as maxmemory, nor a missing policy as safe. */
    CHECK_EQ_INT(memguard_parse("maxmemory:5\r\n", policy, sizeof policy, &mm), 2);
    CHECK_EQ_STR(policy, "unknown");
}

static void test_counting(void) {
    memguard_init(0);
    struct memguard_seen a = {0}, b = {0};
    CHECK(!memguard_refusing());
    memguard_note(&a, "127.0.0.1", 1, info("100", "volatile-lru"));
    CHECK(memguard_refusing() && !memguard_ids_refusing());
    memguard_note(&b, "127.0.0.1", 2, info("100", "allkeys-lru"));
    CHECK(memguard_ids_refusing());
    char why[256];
    CHECK(memguard_describe(why, sizeof why) && strstr(why, "allkeys-lru") != NULL);
    memguard_forget(&b); /* its connection went */
    CHECK(memguard_refusing() && !memguard_ids_refusing());
    memguard_note(&a, "127.0.0.1", 1, info("100", "noeviction")); /* fixed */
    CHECK(!memguard_refusing());
    memguard_forget(&a);
    CHECK(!memguard_refusing());
}

int main(void) {
    RUN(test_parse);
    RUN(test_counting);
    return check_summary("memguard");
}
