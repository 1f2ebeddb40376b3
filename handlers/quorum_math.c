/* quorum_math.c -- see quorum_math.h. */
#include "handlers/quorum_math.h"

#include <stdlib.h>

long long quorum_drift_ms(long long ttl_ms) { return ttl_ms / 100 + 2; }

long long quorum_validity(long long shortest_ttl_ms, long long elapsed_ms, long long lease_ms) {
    return shortest_ttl_ms - elapsed_ms - quorum_drift_ms(lease_ms);
}

int quorum_granted(int granted, int q, long long validity_ms) {
    return granted >= q && validity_ms > 0;
}

enum quorum_failure quorum_failed_why(int granted, int nbusy, int lost, int q) {
    if (nbusy > 0 || granted >= q) return QUORUM_FAILED_BUSY;
    if (lost > 0 && granted + lost >= q) return QUORUM_FAILED_DATA_LOST;
    return QUORUM_FAILED_NO_COMMON;
}

long long quorum_lost_retry_ms(long long shortest_holdoff_ms) {
    if (shortest_holdoff_ms > 0 && shortest_holdoff_ms < QUORUM_LOST_RETRY_MS)
        return shortest_holdoff_ms;
    return QUORUM_LOST_RETRY_MS;
}

static int cmp_ll(const void *a, const void *b) {
    long long x = *(const long long *)a, y = *(const long long *)b;
    return x < y ? -1 : x > y;
}

/* The free masters already count toward q; of the busy ones the `need`
 * that free up first make the quorum. */
long long quorum_retry_after(long long *busy, int nbusy, int answered, int q) {
    if (nbusy <= 0) return 1;
    qsort(busy, (size_t)nbusy, sizeof busy[0], cmp_ll);
    int need = q - (answered - nbusy);
    if (need < 1) need = 1;
    if (need > nbusy) need = nbusy;
    return busy[need - 1];
}

/* A second already used up to its last number moves the block to the
 * next second, so no number is handed out twice. */
int quorum_id_block(long long now, long long msec, long long mseq, uint32_t want, uint32_t *second,
                    uint32_t *first, uint32_t *last) {
    if (now < 0 || now > 0x7fffffffLL) return -1;
    if (now > msec) {
        *second = (uint32_t)now;
        *first = 0;
    } else if (mseq >= 0xffffffffLL) {
        *second = (uint32_t)(msec + 1);
        *first = 0;
    } else {
        *second = (uint32_t)msec;
        *first = (uint32_t)(mseq + 1);
    }
    unsigned long long l = (unsigned long long)*first + want - 1;
    *last = l > 0xffffffffULL ? 0xffffffffU : (uint32_t)l;
    return 0;
}
