/* lossguard.c -- see lossguard.h.  Each master held off is a row of a
 * small table (its address, until when) under a mutex, written rarely;
 * the latest end of any row is one atomic, so the question asked on every
 * grant costs one atomic read while nothing is held off. */
#include "server/lossguard.h"
#include "server/log.h"
#include "server/loop.h"
#include "server/metrics.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LOSSGUARD_MASTERS 64 /* masters held off at once (the Redis layer's node table) */

static long long max_lease;
static enum lossguard_scope scope;
static int nmasters, need;     /* quorum mode: masters, and how many must grant */
static atomic_llong any_until; /* loop_now_ms() until which some master is held off */
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static struct lost {
    char who[64];                          /* host:port */
    char marker[LOSSGUARD_MARKER_LEN + 1]; /* the marker its loss left */
    long long until;                       /* held off until (loop_now_ms) */
} lost[LOSSGUARD_MASTERS];
static int nlost;
static char warned[16][64]; /* masters warned about, host:port */
static int nwarned;

void lossguard_init(long long max_lease_ms, enum lossguard_scope s, int masters, int quorum) {
    max_lease = max_lease_ms;
    scope = s;
    nmasters = masters;
    need = quorum;
}

/* Two marker values the same, as kept: a value is kept to its first
 * LOSSGUARD_MARKER_LEN characters, so only those are compared.  lockgate
 * writes none longer; one written by something else (an operator's SET,
 * another version) compared whole with its truncated copy would differ on
 * every read: a loss noted, and a hold-off begun again, every second. */
static int same_marker(const char *kept, const char *value) {
    return strncmp(kept, value, LOSSGUARD_MARKER_LEN) == 0;
}

/* The row of who, made when missing (the oldest ended one is reused); mu held. */
static struct lost *row_of(const char *who, long long now) {
    struct lost *free_row = NULL;
    for (int i = 0; i < nlost; i++) {
        if (strcmp(lost[i].who, who) == 0) return &lost[i];
        if (lost[i].until <= now && !free_row) free_row = &lost[i];
    }
    if (!free_row && nlost < LOSSGUARD_MASTERS) free_row = &lost[nlost++];
    if (!free_row) free_row = &lost[0]; /* 64 masters held off at once: the first gives way */
    memset(free_row, 0, sizeof *free_row);
    snprintf(free_row->who, sizeof free_row->who, "%s", who);
    return free_row;
}

/* Counts and starts the hold-off of a loss on who (host:port), unless it
 * is one already noticed; 1 when it is new.  value: the marker the loss
 * left, or "" for a slot's marker (Redis Cluster: its value says nothing
 * of the master's); mu not held. */
static int note_loss(const char *who, const char *value) {
    long long now = loop_now_ms(), until = now + max_lease;
    pthread_mutex_lock(&mu);
    /* Several connections (workers, gateways) notice the same loss: the
     * marker it left is the same, so it is said, counted and timed once.
     * Redis Cluster: one loss shows through many keys, every slot's
     * marker and the master's.  A slot's is a new loss unless the master
     * is held off; the master's marker read after a slot's showed the
     * loss (redis.c reads it at once) is that loss, and the value it left
     * is kept for the reads that follow. */
    struct lost *l = row_of(who, now);
    int first;
    if (!value[0]) {
        first = l->until <= now;
    } else if (!l->marker[0] && l->until > now) {
        first = 0;
        snprintf(l->marker, sizeof l->marker, "%s", value);
    } else {
        first = !same_marker(l->marker, value);
    }
    if (first) {
        snprintf(l->marker, sizeof l->marker, "%s", value);
        l->until = until;
        if (atomic_load(&any_until) < until) atomic_store(&any_until, until);
    }
    pthread_mutex_unlock(&mu);
    return first;
}

/* What a master held off holds off, in this mode (for the log). */
static const char *held_what(void) {
    return scope == LOSSGUARD_ALL ? "no lock, permit, session or multi-lock is granted"
           : scope == LOSSGUARD_PER_MASTER
               ? "no lock, permit, session or multi-lock is granted on the slots it serves"
               : "its votes do not count (it abstains; when more masters abstain than the "
                 "quorum can spare, nothing is granted)";
}

static void log_loss(const char *who) {
    metrics_inc(M_REDIS_DATA_LOST, 1);
    const char *what = held_what();
    log_error("lossguard: Redis master %s lost its data (its marker key was gone: a restart "
              "without persistence, FLUSHALL, or a failover to an empty replica); every held "
              "lock there is forgotten, so %s for %lld ms (--max-lease-ms), until every lease "
              "that could have been running has ended",
              who, what, max_lease);
}

int lossguard_note(struct lossguard_seen *seen, const char *host, int port, const char *value) {
    int gone = seen->marker[0] && !same_marker(seen->marker, value);
    snprintf(seen->marker, sizeof seen->marker, "%s", value);
    if (!gone) return 0;
    char who[64];
    snprintf(who, sizeof who, "%s:%d", host, port);
    if (note_loss(who, value)) log_loss(who);
    return 1;
}

int lossguard_note_slot(const char *host, int port, const char *sent_under, const char *latest) {
    /* A worker cut off from the master past --max-lease-ms comes back
     * with slot values from before a loss the other workers held off for
     * already: its first grant there is refused after that hold-off ended,
     * and must not start another. */
    if (sent_under[0] && latest[0] && strcmp(sent_under, latest) != 0) return 0;
    char who[64];
    snprintf(who, sizeof who, "%s:%d", host, port);
    if (!note_loss(who, "")) return 0;
    log_loss(who);
    return 1;
}

void lossguard_learn(const char *host, int port, const char *marker, long long left_ms) {
    if (left_ms <= 0) return;
    long long now = loop_now_ms(), until = now + left_ms;
    char who[64];
    snprintf(who, sizeof who, "%s:%d", host, port);
    pthread_mutex_lock(&mu);
    struct lost *l = row_of(who, now);
    /* Held off here already: kept to Redis's end, silently (another
     * gateway's --max-lease-ms may be longer).  A hold-off of the same loss
     * (its marker) that ended here: this gateway noticed it and timed it
     * from its own notice, which came before the write to Redis (so
     * Redis's end is a few ms later); it is not taken up again, so
     * /readyz does not flap back for those ms. */
    int held = l->until > now, ended = !held && marker[0] && same_marker(l->marker, marker);
    if (ended) {
        pthread_mutex_unlock(&mu);
        return;
    }
    if (!held) snprintf(l->marker, sizeof l->marker, "%s", marker);
    if (l->until < until) {
        l->until = until;
        if (atomic_load(&any_until) < until) atomic_store(&any_until, until);
    }
    pthread_mutex_unlock(&mu);
    if (held) return;
    metrics_inc(M_REDIS_HOLDOFF_LEARNT, 1);
    log_warn("lossguard: Redis master %s is held off for %lld ms more: a gateway (another one, "
             "or this one before a restart) noticed it lost its data and recorded the hold-off "
             "in Redis; until every lease that could have been running has ended, %s",
             who, left_ms, held_what());
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
             "would forget every held lock (the gateway then holds it off for --max-lease-ms); "
             "run it with appendonly yes",
             me);
}

int lossguard_master_refusing(const char *host, int port, int64_t *retry_after_ms) {
    long long now = loop_now_ms();
    if (atomic_load(&any_until) <= now) return 0;
    char who[64];
    snprintf(who, sizeof who, "%s:%d", host, port);
    long long left = 0;
    pthread_mutex_lock(&mu);
    for (int i = 0; i < nlost; i++)
        if (strcmp(lost[i].who, who) == 0) left = lost[i].until - now;
    pthread_mutex_unlock(&mu);
    if (left <= 0) return 0;
    if (retry_after_ms) *retry_after_ms = left;
    return 1;
}

static int by_left_desc(const void *a, const void *b) {
    long long x = *(const long long *)a, y = *(const long long *)b;
    return x < y ? 1 : x > y ? -1 : 0;
}

/* Masters held off now, their time left longest first (into left) and
 * their names (into names, ", "-separated); mu not held. */
static int held_off(long long *left, char *names, size_t cap) {
    long long now = loop_now_ms();
    int n = 0;
    size_t len = 0;
    if (names && cap) names[0] = '\0';
    pthread_mutex_lock(&mu);
    for (int i = 0; i < nlost; i++) {
        if (lost[i].until <= now) continue;
        left[n++] = lost[i].until - now;
        if (names && len < cap)
            len += (size_t)snprintf(names + len, cap - len, "%s%s", len ? ", " : "", lost[i].who);
    }
    pthread_mutex_unlock(&mu);
    qsort(left, (size_t)n, sizeof *left, by_left_desc);
    return n;
}

int lossguard_refusing(int64_t *retry_after_ms) {
    if (atomic_load(&any_until) <= loop_now_ms() || scope == LOSSGUARD_PER_MASTER) return 0;
    long long left[LOSSGUARD_MASTERS];
    int n = held_off(left, NULL, 0);
    /* One master: its hold-off.  Quorum: grants come back once no more
     * than N - quorum masters abstain, when the (N - quorum + 1)-th
     * longest hold-off ends. */
    int spare = scope == LOSSGUARD_QUORUM ? nmasters - need : 0;
    if (n <= spare) return 0;
    if (retry_after_ms) *retry_after_ms = left[spare];
    return 1;
}

int lossguard_describe(char *out, size_t cap) {
    if (atomic_load(&any_until) <= loop_now_ms()) return 0;
    long long left[LOSSGUARD_MASTERS];
    char names[400];
    int n = held_off(left, names, sizeof names);
    if (n == 0) return 0;
    if (scope == LOSSGUARD_PER_MASTER) {
        snprintf(out, cap,
                 "Redis master(s) %s lost their data: no lock is granted on the slots they serve "
                 "for %lld ms more",
                 names, left[0]);
        return 1;
    }
    int64_t wait;
    if (!lossguard_refusing(&wait)) return 0;
    if (scope == LOSSGUARD_QUORUM)
        snprintf(out, cap,
                 "%d of %d Redis masters lost their data (%s): fewer than a quorum can grant, so "
                 "no lock is granted for %lld ms more",
                 n, nmasters, names, (long long)wait);
    else
        snprintf(out, cap,
                 "Redis master %s lost its data (its marker key was gone): no lock is granted for "
                 "%lld ms more",
                 names, (long long)wait);
    return 1;
}
