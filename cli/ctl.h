/* ctl.h -- what every part of lockctl shares: its exit statuses, limits,
 * the gateway's URL, -v, the one-line messages and the clock. */
#ifndef LOCKCTL_CTL_H
#define LOCKCTL_CTL_H

#include <limits.h>
#include <time.h>

#define CTL_VERSION         "1.0.0"
#define CTL_DEFAULT_URL     "http://127.0.0.1:8080"
#define CTL_SERVER_WAIT_MAX 300000 /* the most wait_ms one request may ask */
#define CTL_REQUEST_MS      10000  /* one-shot requests: answer within this */
#define CTL_CONNECT_MS      5000   /* connecting may take at most this */

/* Exit statuses: lockctl's own sit where sysexits.h puts them (64 and up),
 * away from the small numbers commands use; `run` otherwise exits with the
 * command's status.  The table is repeated in --help and lockctl.1. */
enum {
    CTL_EXIT_OK = 0,            /* done; run: the command exited 0 */
    CTL_EXIT_NOT_HELD = 1,      /* status: nobody holds the lock */
    CTL_EXIT_USAGE = 64,        /* bad command line */
    CTL_EXIT_REFUSED = 65,      /* the gateway refused the request (4xx, 501) */
    CTL_EXIT_UNAVAILABLE = 69,  /* gateway unreachable, or 5xx */
    CTL_EXIT_INTERNAL = 70,     /* out of memory, fork failed, bad answer */
    CTL_EXIT_BUSY = 75,         /* held by someone else, wait over */
    CTL_EXIT_LEASE_LOST = 76,   /* run: lease lost, command stopped */
    CTL_EXIT_CANNOT_EXEC = 126, /* run: the command cannot be executed */
    CTL_EXIT_NOT_FOUND = 127,   /* run: the command was not found */
};

extern int ctl_verbose;       /* -v: report steps on stderr */
extern char ctl_url[2048];    /* gateway base URL, no trailing '/' */
extern char ctl_session[129]; /* run --session: the Session header's token, or "" */

/* Prints "lockctl: <message>" on stderr: every message lockctl writes. */
void ctl_say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Milliseconds on the monotonic clock. */
static inline long long now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static inline long long min_ll(long long a, long long b) { return a < b ? a : b; }
static inline long long max_ll(long long a, long long b) { return a > b ? a : b; }

/* The absolute deadline of a --wait (-1: none, LLONG_MAX). */
static inline long long wait_deadline(long long wait_ms) {
    return wait_ms < 0 ? LLONG_MAX : now_ms() + wait_ms;
}

#endif
