/* test_cluster.c -- server/cluster.c without a server: CRC16 and key slots
 * (hash tags included), the redirect errors, the slot map's coverage. */
#include "server/cluster.h"
#include "tests/check.h"

#include <stdio.h>
#include <string.h>

static int slot(const char *key) { return cluster_key_slot(key, strlen(key)); }

/* The check value of CRC16/XMODEM, and slots Redis's own documentation and
 * tests give (CLUSTER KEYSLOT). */
static void test_crc16_and_known_slots(void) {
    CHECK_EQ_INT(cluster_crc16("123456789", 9), 0x31C3);
    CHECK_EQ_INT(cluster_crc16("", 0), 0);
    CHECK_EQ_INT(slot("foo"), 12182);
    CHECK_EQ_INT(slot("bar"), 5061);
    CHECK_EQ_INT(slot("hello"), 866);
}

/* Only the first {...} with something inside counts. */
static void test_hash_tags(void) {
    CHECK_EQ_INT(slot("{user1000}.following"), slot("{user1000}.followers"));
    CHECK_EQ_INT(slot("{user1000}.following"), slot("user1000"));
    CHECK_EQ_INT(slot("foo{bar}{zap}"), slot("bar"));
    CHECK_EQ_INT(slot("foo{{bar}}zap"), slot("{bar"));
    CHECK_EQ_INT(slot("foo{}{bar}"), cluster_crc16("foo{}{bar}", 10) & 16383);
    CHECK_EQ_INT(slot("{}"), cluster_crc16("{}", 2) & 16383);
    CHECK_EQ_INT(slot("no-close{tag"), cluster_crc16("no-close{tag", 12) & 16383);
    /* lockgate's keys: every key of one lock in one slot, the name's. */
    CHECK_EQ_INT(slot("lockgate:lock:{job-7}"), slot("job-7"));
    CHECK_EQ_INT(slot("lockgate:lock:{job-7}:q"), slot("job-7"));
    CHECK_EQ_INT(slot("lockgate:sem:{job-7}:qd"), slot("job-7"));
    CHECK_EQ_INT(slot("other:id:{job-7}"), slot("job-7"));
    /* A name that carries its own tag groups with its tag ({tenant}.a). */
    CHECK_EQ_INT(slot("lockgate:lock:{{t7}.a}"), slot("lockgate:lock:{{t7}.b}"));
    /* Binary-safe: the length counts, not a NUL. */
    CHECK_EQ_INT(cluster_key_slot("a\0b", 3), cluster_crc16("a\0b", 3) & 16383);
}

/* Every slot's tag (per-slot keys and channels in Cluster mode) hashes to
 * that slot, alone and as the tag of a key, and is short; no two slots
 * share one.  Two tags the gateway has always used keep their slots (the
 * shard channels of gateways already running). */
static void test_slot_tags(void) {
    int bad = 0, long_tags = 0, dup = 0;
    for (int s = 0; s < CLUSTER_SLOTS; s++) {
        const char *t = cluster_slot_tag(s);
        char key[32];
        snprintf(key, sizeof key, "lg:slotmark{%s}", t);
        bad += slot(t) != s || slot(key) != s || !*t;
        long_tags += strlen(t) > 4;
        if (s > 0) dup += strcmp(t, cluster_slot_tag(s - 1)) == 0;
    }
    CHECK_EQ_INT(bad, 0);
    CHECK_EQ_INT(long_tags, 0);
    CHECK_EQ_INT(dup, 0);
    CHECK_EQ_STR(cluster_slot_tag(slot("0")), "0");
    CHECK_EQ_STR(cluster_slot_tag(slot("a")), "a");
}

static void test_redirects(void) {
    char host[64];
    int s = -1, port = 0;
    CHECK_EQ_INT(cluster_parse_error("MOVED 3999 127.0.0.1:6381", &s, host, sizeof host, &port),
                 CLUSTER_MOVED);
    CHECK_EQ_INT(s, 3999);
    CHECK_EQ_STR(host, "127.0.0.1");
    CHECK_EQ_INT(port, 6381);
    CHECK_EQ_INT(cluster_parse_error("ASK 16383 10.1.2.3:7000", &s, host, sizeof host, &port),
                 CLUSTER_ASK);
    CHECK_EQ_INT(s, 16383);
    CHECK_EQ_STR(host, "10.1.2.3");
    CHECK_EQ_INT(port, 7000);
    /* IPv6 and an empty host (a node that does not know its address). */
    CHECK_EQ_INT(cluster_parse_error("MOVED 1 ::1:7001", &s, host, sizeof host, &port),
                 CLUSTER_MOVED);
    CHECK_EQ_STR(host, "::1");
    CHECK_EQ_INT(port, 7001);
    CHECK_EQ_INT(cluster_parse_error("MOVED 2 :7002", &s, host, sizeof host, &port), CLUSTER_MOVED);
    CHECK_EQ_STR(host, "");
    CHECK_EQ_INT(cluster_parse_error("TRYAGAIN Multiple keys request during rehashing of slot", &s,
                                     host, sizeof host, &port),
                 CLUSTER_TRYAGAIN);
    CHECK_EQ_INT(
        cluster_parse_error("CLUSTERDOWN The cluster is down", &s, host, sizeof host, &port),
        CLUSTER_DOWN);
    /* Not redirects, or malformed ones: handled as plain errors. */
    CHECK_EQ_INT(cluster_parse_error("NOSCRIPT No matching script", &s, host, sizeof host, &port),
                 CLUSTER_NONE);
    CHECK_EQ_INT(cluster_parse_error("MOVED 16384 h:1", &s, host, sizeof host, &port),
                 CLUSTER_NONE);
    CHECK_EQ_INT(cluster_parse_error("MOVED x h:1", &s, host, sizeof host, &port), CLUSTER_NONE);
    CHECK_EQ_INT(cluster_parse_error("MOVED 5 nohost", &s, host, sizeof host, &port), CLUSTER_NONE);
    CHECK_EQ_INT(cluster_parse_error("ASK 5 h:70000", &s, host, sizeof host, &port), CLUSTER_NONE);
    char tiny[4];
    CHECK_EQ_INT(cluster_parse_error("MOVED 5 longhost:1", &s, tiny, sizeof tiny, &port),
                 CLUSTER_NONE);
}

static void test_map_coverage(void) {
    static struct cluster_map m;
    cluster_map_clear(&m);
    CHECK_EQ_INT(cluster_map_uncovered(&m), CLUSTER_SLOTS);
    CHECK_EQ_INT(cluster_map_assign(&m, 0, 5460, 0), 0);
    CHECK_EQ_INT(cluster_map_assign(&m, 5461, 10922, 1), 0);
    CHECK_EQ_INT(cluster_map_uncovered(&m), 16383 - 10922);
    CHECK_EQ_INT(cluster_map_assign(&m, 10923, 16383, 2), 0);
    CHECK_EQ_INT(cluster_map_uncovered(&m), 0);
    CHECK_EQ_INT(m.owner[slot("foo")], 2);
    CHECK_EQ_INT(m.owner[slot("hello")], 0);
    CHECK_EQ_INT(cluster_map_assign(&m, 10, 5, 1), -1);
    CHECK_EQ_INT(cluster_map_assign(&m, 0, 16384, 1), -1);
    CHECK_EQ_INT(cluster_map_assign(&m, -1, 3, 1), -1);
}

/* Multi-lock groups: by ascending slot, within a slot in the given order;
 * one group per slot. */
static void test_group_by_slot(void) {
    const char *keys[] = {"foo", "bar", "hello", "{bar}z", "{bar}a"}; /* 12182 5061 866 */
    int order[5], gstart[6];
    CHECK_EQ_INT(cluster_group_by_slot(keys, 5, order, gstart), 3);
    int want[5] = {2, 1, 3, 4, 0};
    for (int i = 0; i < 5; i++) CHECK_EQ_INT(order[i], want[i]);
    CHECK_EQ_INT(gstart[0], 0);
    CHECK_EQ_INT(gstart[1], 1);
    CHECK_EQ_INT(gstart[2], 4);
    CHECK_EQ_INT(gstart[3], 5);
    /* Another order of the same keys: the same slots in the same order. */
    const char *rev[] = {"{bar}a", "{bar}z", "hello", "bar", "foo"};
    CHECK_EQ_INT(cluster_group_by_slot(rev, 5, order, gstart), 3);
    int want_rev[5] = {2, 0, 1, 3, 4};
    for (int i = 0; i < 5; i++) CHECK_EQ_INT(order[i], want_rev[i]);
    CHECK_EQ_INT(gstart[1], 1);
    CHECK_EQ_INT(gstart[2], 4);
    const char *one[] = {"x"};
    CHECK_EQ_INT(cluster_group_by_slot(one, 1, order, gstart), 1);
    CHECK_EQ_INT(order[0], 0);
    CHECK_EQ_INT(gstart[1], 1);
}

int main(void) {
    RUN(test_crc16_and_known_slots);
    RUN(test_hash_tags);
    RUN(test_slot_tags);
    RUN(test_redirects);
    RUN(test_map_coverage);
    RUN(test_group_by_slot);
    return check_summary("cluster");
}
