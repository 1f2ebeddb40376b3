/* test_lossguard.c -- server/lossguard.c's counting: one loss is counted
 * and timed once however many connections and keys show it.  One master
 * (single, Sentinel): by the value the loss left in the master's marker.
 * Redis Cluster: a loss shows through every slot's marker (no value that
 * names the loss) and the master's marker, read at once after a slot's
 * refusal; the value read then names the loss for the reads that follow. */
#include "server/lossguard.h"
#include "server/loop.h"
#include "server/metrics.h"
#include "tests/check.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

/* lockgate_redis_data_lost_total as /metrics renders it. */
static long long losses(void) {
    size_t len;
    char *text = metrics_render(&len);
    const char *p = strstr(text, "\nlockgate_redis_data_lost_total ");
    long long n = p ? atoll(p + strlen("\nlockgate_redis_data_lost_total ")) : -1;
    free(text);
    return n;
}

/* lockgate_redis_holdoff_learnt_total. */
static long long learnt(void) {
    size_t len;
    char *text = metrics_render(&len);
    const char *key = "\nlockgate_redis_holdoff_learnt_total ";
    const char *p = strstr(text, key);
    long long n = p ? atoll(p + strlen(key)) : -1;
    free(text);
    return n;
}

/* A hold-off read from Redis (<prefix>holdoff) on a master this process
 * never saw lose anything: held off for what Redis says is left, counted
 * once; read again while held: the later end kept, not counted again; a
 * loss noticed here later (another marker) is a loss of its own. */
static void test_learnt_hold_off(void) {
    lossguard_init(60000, LOSSGUARD_ALL, 1, 1);
    long long n0 = learnt(), l0 = losses();
    int64_t left = 0;
    CHECK_EQ_INT(lossguard_master_refusing("h", 9, NULL), 0);
    lossguard_learn("h", 9, "m5", 30000);
    CHECK_EQ_INT(lossguard_refusing(NULL), 1);
    CHECK_EQ_INT(lossguard_master_refusing("h", 9, &left), 1);
    CHECK(left > 29000 && left <= 30000);
    CHECK_EQ_INT(learnt() - n0, 1);
    lossguard_learn("h", 9, "m5", 40000); /* another gateway's longer --max-lease-ms */
    CHECK_EQ_INT(lossguard_master_refusing("h", 9, &left), 1);
    CHECK(left > 39000 && left <= 40000);
    lossguard_learn("h", 9, "m5", 1000); /* never shortened */
    CHECK_EQ_INT(lossguard_master_refusing("h", 9, &left), 1);
    CHECK(left > 39000);
    CHECK_EQ_INT(learnt() - n0, 1);
    CHECK_EQ_INT(losses() - l0, 0);
    struct lossguard_seen a = {0};
    CHECK_EQ_INT(lossguard_note(&a, "h", 9, "m5"), 0); /* first read: the marker learnt with it */
    CHECK_EQ_INT(lossguard_note(&a, "h", 9, "m6"), 1); /* a new loss */
    CHECK_EQ_INT(losses() - l0, 1);
}

/* A marker value longer than lockgate writes (an operator's SET, another
 * version's token): read again unchanged it is no loss.  Kept truncated
 * and compared whole, every read was one: a hold-off of --max-lease-ms
 * begun again every second. */
static void test_long_marker_value(void) {
    lossguard_init(60000, LOSSGUARD_ALL, 1, 1);
    struct lossguard_seen a = {0};
    const char *v = "0123456789abcdefghijklmnopqrstuvwxyz",
               *w = "X123456789abcdefghijklmnopqrstuvwxyz";
    long long n0 = losses();
    CHECK_EQ_INT(lossguard_note(&a, "L", 1, v), 0);
    CHECK_EQ_INT(lossguard_note(&a, "L", 1, v), 0);
    CHECK_EQ_INT(losses() - n0, 0);
    CHECK_EQ_INT(lossguard_note(&a, "L", 1, w), 1); /* another value: a loss */
    CHECK_EQ_INT(lossguard_note(&a, "L", 1, w), 0);
    CHECK_EQ_INT(losses() - n0, 1);
}

static void test_one_master_by_value(void) {
    lossguard_init(60000, LOSSGUARD_ALL, 1, 1);
    struct lossguard_seen a = {0}, b = {0};
    long long n0 = losses();
    CHECK_EQ_INT(lossguard_note(&a, "s", 1, "m0"), 0); /* first reads: nothing to compare */
    CHECK_EQ_INT(lossguard_note(&b, "s", 1, "m0"), 0);
    CHECK_EQ_INT(lossguard_refusing(NULL), 0);
    CHECK_EQ_INT(lossguard_note(&a, "s", 1, "m1"), 1); /* a loss, counted */
    CHECK_EQ_INT(lossguard_note(&b, "s", 1, "m1"), 1); /* the same loss, another connection */
    CHECK_EQ_INT(losses() - n0, 1);
    CHECK_EQ_INT(lossguard_refusing(NULL), 1);
    CHECK_EQ_INT(lossguard_note(&a, "s", 1, "m2"), 1); /* another loss */
    CHECK_EQ_INT(losses() - n0, 2);
}

static void test_cluster_slot_then_master(void) {
    lossguard_init(60000, LOSSGUARD_PER_MASTER, 0, 0);
    struct lossguard_seen a = {0}, b = {0};
    long long n0 = losses();
    lossguard_note(&a, "c", 1, "m0");
    lossguard_note(&b, "c", 1, "m0");
    /* A slot's marker refused a grant: a loss, counted; more slots refuse
     * while the master is held off: the same loss. */
    lossguard_note_slot("c", 1, "m0", "m0");
    lossguard_note_slot("c", 1, "m0", "m0");
    CHECK_EQ_INT(losses() - n0, 1);
    CHECK_EQ_INT(lossguard_master_refusing("c", 1, NULL), 1);
    CHECK_EQ_INT(lossguard_master_refusing("c", 2, NULL), 0); /* another master */
    /* The master's marker, read at once after the refusal, and by every
     * other connection later: the same loss, whatever their timing. */
    CHECK_EQ_INT(lossguard_note(&a, "c", 1, "m1"), 1);
    CHECK_EQ_INT(lossguard_note(&b, "c", 1, "m1"), 1);
    CHECK_EQ_INT(losses() - n0, 1);
    /* A later loss shows a value of its own: counted. */
    CHECK_EQ_INT(lossguard_note(&a, "c", 1, "m2"), 1);
    CHECK_EQ_INT(losses() - n0, 2);
}

static void test_cluster_master_then_slot(void) {
    lossguard_init(60000, LOSSGUARD_PER_MASTER, 0, 0);
    struct lossguard_seen a = {0};
    long long n0 = losses();
    lossguard_note(&a, "d", 1, "m0");
    CHECK_EQ_INT(lossguard_note(&a, "d", 1, "m1"), 1);
    lossguard_note_slot("d", 1, "m1", "m1"); /* a slot learnt before it: the same loss */
    CHECK_EQ_INT(losses() - n0, 1);
}

/* A slot's refusal of a grant sent under a master marker older than the
 * process's latest read: the loss that marker's change showed, noted and
 * held off for already (here: over), so no second hold-off; sent under the
 * latest value, a loss of its own. */
static void test_cluster_slot_after_hold_off(void) {
    lossguard_init(30, LOSSGUARD_PER_MASTER, 0, 0);
    struct lossguard_seen a = {0};
    long long n0 = losses();
    lossguard_note(&a, "e", 1, "m0");
    CHECK_EQ_INT(lossguard_note(&a, "e", 1, "m1"), 1); /* another worker noticed it */
    CHECK_EQ_INT(losses() - n0, 1);
    long long end = loop_now_ms() + 5000;
    while (lossguard_master_refusing("e", 1, NULL) && loop_now_ms() < end) {
        struct timespec ts = {0, 2000000};
        nanosleep(&ts, NULL);
    }
    CHECK_EQ_INT(lossguard_master_refusing("e", 1, NULL), 0); /* its hold-off ended */
    /* The worker that was cut off: its grant carried a slot value from
     * before m1, sent while it had read m0 last. */
    CHECK_EQ_INT(lossguard_note_slot("e", 1, "m0", "m1"), 0);
    CHECK_EQ_INT(losses() - n0, 1);
    CHECK_EQ_INT(lossguard_master_refusing("e", 1, NULL), 0);
    /* Sent under the latest value (or nothing known): a new loss. */
    CHECK_EQ_INT(lossguard_note_slot("e", 1, "m1", "m1"), 1);
    CHECK_EQ_INT(losses() - n0, 2);
    CHECK_EQ_INT(lossguard_master_refusing("e", 1, NULL), 1);
}

int main(void) {
    RUN(test_one_master_by_value);
    RUN(test_long_marker_value);
    RUN(test_cluster_slot_then_master);
    RUN(test_cluster_master_then_slot);
    RUN(test_cluster_slot_after_hold_off);
    RUN(test_learnt_hold_off);
    return check_summary("lossguard");
}
