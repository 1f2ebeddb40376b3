/* metrics.h -- counters and a latency histogram, rendered as Prometheus
 * text by GET /metrics.  Every update is one relaxed atomic add. */
#ifndef LOCKGATE_METRICS_H
#define LOCKGATE_METRICS_H

#include <stddef.h>
#include <stdint.h>

enum metric_counter {
    M_LOCK_ACQUIRED,        /* new holders */
    M_LOCK_REENTERED,       /* re-entries */
    M_LOCK_BUSY,            /* 409 lock_busy answers */
    M_LOCK_EXTENDED,        /* successful PATCH */
    M_LOCK_RELEASED,        /* successful DELETE */
    M_REDIS_ERRORS,         /* commands that failed or timed out */
    M_REDIS_RECONNECTS,     /* connections made to Redis after the first */
    M_REDIS_NOSCRIPT,       /* NOSCRIPT answers that caused a reload */
    M_IDS_ISSUED,           /* ids handed out */
    M_ID_BLOCKS,            /* id blocks leased from Redis */
    M_ID_JUMPS,             /* leases that jumped ahead: a new or lost mark, or a changed Redis */
    M_ID_REFUSED,           /* leases refused: Redis behind this gateway's ids, or an epoch */
    M_WAIT_STARTED,         /* requests that began waiting */
    M_WAIT_WAKEUPS,         /* waiters woken to retry */
    M_WAIT_TIMEOUTS,        /* waits that ended without the lock */
    M_DEAD_WAITERS,         /* fair-queue entries of dead gateways dropped */
    M_GIVEN_BACK,           /* grants given back: the client never got the answer */
    M_REDIS_REDIRECTS,      /* cluster mode: MOVED, ASK, TRYAGAIN, CLUSTERDOWN followed */
    M_REDIS_ASKS,           /* cluster mode: of those, ASK (a slot being migrated) */
    M_REDIS_PROBES_FAILED,  /* idle connections found silently dead (redis.c) */
    M_UNDO_STARTED,         /* acquisitions that failed ambiguously, to undo (undo.h) */
    M_UNDO_DONE,            /* of those, a grant found and given back */
    M_UNDO_NOTHING,         /* of those, nothing had been granted */
    M_UNDO_EXPIRED,         /* of those, not settled before the lease ended */
    M_REDIS_DATA_LOST,      /* masters found to have lost their data (lossguard.h) */
    M_REDIS_HOLDOFF_LEARNT, /* a loss's hold-off learnt from Redis, not noticed here */
    M_REDIS_SLOT_MARKER_UNLEARNT, /* cluster mode: a slot marker's SET refused (redis.c) */
    M_ORIGIN_REFUSED,             /* 403 origin_forbidden: a browser page of a foreign origin */
    M_SLOW_CLOSED,                /* connections cut off by a header or body deadline (conns.h) */
    M_ACCEPT_REFUSED, /* connections not accepted: descriptors, or the connection limit */
    M_STREAM_HOLDS,   /* acquisitions answered as an event stream (streams.h) */
    M_STREAM_LOST,    /* of those, holds that ended with `event: lost` */
    M_COUNTER_COUNT
};

void metrics_inc(enum metric_counter c, uint64_t n);

/* Gauge of requests currently waiting for a busy lock. */
void metrics_waiting_add(long delta);

/* Records one finished request: its route index (or -1/-2 for 404/405),
 * its status and its latency. */
void metrics_observe_request(int route, int status, int64_t latency_us);

/* Records how long a waiter waited (acquired or not). */
void metrics_observe_wait(int64_t wait_us);

/* Adds a metric that another module keeps, read when /metrics is rendered:
 * `type` is "gauge" or "counter", name and help are static strings.  At
 * most METRICS_SOURCES, registered at start-up, before serving (aborts when
 * more are added: a programming error). */
#define METRICS_SOURCES 8
void metrics_add_source(const char *name, const char *help, const char *type,
                        uint64_t (*read)(void));

/* Adds a module's own Prometheus lines (metrics with labels): render
 * returns malloc'd text, freed here.  Registered at start-up, like
 * metrics_add_source. */
void metrics_add_text(char *(*render)(void));

/* Returns the Prometheus text; the caller frees it. */
char *metrics_render(size_t *len);

#endif
