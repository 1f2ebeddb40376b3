/* timeshift.c -- an LD_PRELOAD shim that moves a process's wall clock by
 * TIMESHIFT_S seconds (may be negative): clock_gettime's realtime clocks,
 * gettimeofday and time.  For redis-server in tests (test_idloss: a replica
 * whose clock is behind), where libfaketime clashes with its jemalloc.
 * Monotonic clocks are left alone. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdlib.h>
#include <sys/time.h>
#include <time.h>

static long shift_s(void) {
    static int read;
    static long s;
    if (!read) {
        const char *v = getenv("TIMESHIFT_S");
        s = v ? atol(v) : 0;
        read = 1;
    }
    return s;
}

int clock_gettime(clockid_t id, struct timespec *ts) {
    static int (*real)(clockid_t, struct timespec *);
    if (!real) real = (int (*)(clockid_t, struct timespec *))dlsym(RTLD_NEXT, "clock_gettime");
    int rc = real(id, ts);
    if (rc == 0 && (id == CLOCK_REALTIME || id == CLOCK_REALTIME_COARSE)) ts->tv_sec += shift_s();
    return rc;
}

int gettimeofday(struct timeval *restrict tv, void *restrict tz) {
    struct timespec ts;
    if (clock_gettime(CLOCK_REALTIME, &ts) != 0) return -1;
    tv->tv_sec = ts.tv_sec;
    tv->tv_usec = ts.tv_nsec / 1000;
    (void)tz;
    return 0;
}

time_t time(time_t *t) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    if (t) *t = ts.tv_sec;
    return ts.tv_sec;
}
