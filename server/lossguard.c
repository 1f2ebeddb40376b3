/* lossguard.c -- see lossguard.h.  The hold-off's end is one atomic
 * (monotonic ms); the text of the last loss and the masters already warned
 * about sit under a mutex, written rarely. */
#include "server/lossguard.h"
#include "server/log.h"
#include "server/loop.h"
#include "server/metrics.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static long long max_lease;
static int holds_off;              /* one master is the whole truth (single, Sentinel) */
static atomic_llong holdoff_until; /* loop_now_ms() until which grants are refused */
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static char last_loss[200];                        /* the last loss, for /readyz */
static char last_marker[LOSSGUARD_MARKER_LEN + 1]; /* the marker that loss left */
static char warned[16][64];                        /* masters warned about, host:port */
static int nwarned;

void lossguard_init(long long max_lease_ms, int hold_off) {
    max_lease = max_lease_ms;
    holds_off = hold_off;
}

void lossguard_note(struct lossguard_seen *seen, const char *host, int port, const char *value) {
    int lost = seen->marker[0] && (seen->absent || strcmp(seen->marker, value) != 0);
    snprintf(seen->marker, sizeof seen->marker, "%s", value);
    seen->absent = 0;
    if (!lost) return;
    long long until = loop_now_ms() + max_lease;
    pthread_mutex_lock(&mu);
    /* Several connections (workers, gateways) notice the same loss: the
     * marker it left is the same, so it is said and counted once here. */
    int first = strcmp(last_marker, value) != 0;
    if (first) {
        snprintf(last_marker, sizeof last_marker, "%s", value);
        snprintf(last_loss, sizeof last_loss,
                 "Redis master %s:%d lost its data (its marker key was gone)", host, port);
    }
    pthread_mutex_unlock(&mu);
    if (holds_off && atomic_load(&holdoff_until) < until) atomic_store(&holdoff_until, until);
    if (!first) return;
    metrics_inc(M_REDIS_DATA_LOST, 1);
    if (!holds_off) {
        log_error("lossguard: Redis master %s:%d lost its data (its marker key was gone: a "
                  "restart without persistence or FLUSHALL); in quorum mode the others still "
                  "decide and its votes still count: keep such a master out for --max-lease-ms "
                  "(%lld ms) after it comes back empty (Redlock's delayed restart), or run it "
                  "with AOF",
                  host, port, max_lease);
        return;
    }
    log_error("lossguard: Redis master %s:%d lost its data (its marker key was gone: a restart "
              "without persistence, FLUSHALL, or a failover to an empty replica); every held "
              "lock there is forgotten, so no lock, permit or session is granted for "
              "%lld ms (--max-lease-ms), until every lease that could have been running has "
              "ended",
              host, port, max_lease);
}

/* The value of "field:" on its own line of an INFO answer, or -1. */
static long long info_int(const char *info, const char *field) {
    size_t n = strlen(field);
    for (const char *p = info; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL)
        if (strncmp(p, field, n) == 0 && p[n] == ':') return strtoll(p + n + 1, NULL, 10);
    return -1;
}

void lossguard_check_persistence(const char *host, int port, const char *info) {
    long long aof = info_int(info, "aof_enabled"), replicas = info_int(info, "connected_slaves");
    if (aof != 0 || replicas != 0) return; /* persisted, replicated, or not said */
    char me[64];
    snprintf(me, sizeof me, "%s:%d", host, port);
    pthread_mutex_lock(&mu);
    int known = 0;
    for (int i = 0; i < nwarned && !known; i++) known = strcmp(warned[i], me) == 0;
    if (!known && nwarned < 16) snprintf(warned[nwarned++], sizeof warned[0], "%s", me);
    pthread_mutex_unlock(&mu);
    if (known) return;
    log_warn("lossguard: Redis master %s has neither AOF persistence nor a replica: a restart "
             "would forget every held lock (the gateway then refuses grants for --max-lease-ms); "
             "run it with appendonly yes",
             me);
}

int lossguard_refusing(int64_t *retry_after_ms) {
    long long left = atomic_load(&holdoff_until) - loop_now_ms();
    if (left <= 0) return 0;
    if (retry_after_ms) *retry_after_ms = left;
    return 1;
}

int lossguard_describe(char *out, size_t cap) {
    int64_t left;
    if (!lossguard_refusing(&left)) return 0;
    pthread_mutex_lock(&mu);
    snprintf(out, cap, "%s: no lock is granted for %lld ms more", last_loss, (long long)left);
    pthread_mutex_unlock(&mu);
    return 1;
}
