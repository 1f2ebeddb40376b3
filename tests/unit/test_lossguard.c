/* test_lossguard.c -- server/lossguard.c's counting: one loss is counted
 * and timed once however many connections and keys show it.  One master
 * (single, Sentinel): by the value the loss left in the master's marker.
 * Redis Cluster: a loss shows through every slot's marker (no value that
 * names the loss) and the master's marker, read at once after a slot's
 * refusal; the value read then names the loss for the reads that follow. */
#include "server/lossguard.h"
#include "server/metrics.h"
#include "tests/check.h"

#include <stdlib.h>
#include <string.h>

/* lockgate_redis_data_lost_total as /metrics renders it. */
static long long losses(void) {
    size_t len;
    char *text = metrics_render(&len);
    const char *p = strstr(text, "\nlockgate_redis_data_lost_total ");
    long long n = p ? atoll(p + strlen("\nlockgate_redis_data_lost_total ")) : -1;
    free(text);
    return n;
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
    lossguard_note_slot("c", 1);
    lossguard_note_slot("c", 1);
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
    lossguard_note_slot("d", 1); /* a slot learnt before it: the same loss */
    CHECK_EQ_INT(losses() - n0, 1);
}

int main(void) {
    RUN(test_one_master_by_value);
    RUN(test_cluster_slot_then_master);
    RUN(test_cluster_master_then_slot);
    return check_summary("lossguard");
}
