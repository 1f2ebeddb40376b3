/* quota.c -- see quota.h.
 *
 * GCRA: each request moves the theoretical arrival time (tat) on by one
 * interval T = 1 s / rps; a request is refused when that would put tat
 * more than the burst tolerance (1 s) ahead of now.  So after a quiet
 * second rps requests pass at once, and then one every T. */
#include "server/quota.h"

int64_t quota_take(_Atomic int64_t *tat_us, uint32_t rps, int64_t now_us) {
    const int64_t interval = 1000000 / (int64_t)rps, tolerance = 1000000;
    int64_t tat = atomic_load(tat_us);
    for (;;) {
        int64_t next = (tat > now_us ? tat : now_us) + interval;
        if (next - now_us > tolerance) return next - now_us - tolerance;
        if (atomic_compare_exchange_weak(tat_us, &tat, next)) return 0;
    }
}
