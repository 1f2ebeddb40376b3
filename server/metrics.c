/* metrics.c -- see metrics.h.
 *
 * Requests are counted per (route, status class): the route table is small
 * and fixed, and the statuses the API uses are a short fixed list, so a flat
 * array of atomics needs no locking and no allocation. */
#include "server/metrics.h"
#include "common/fatal.h"
#include "common/alloc.h"
#include "server/router.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_ROUTES 32
static const int statuses[] = {200, 201, 400, 401, 403, 404, 405, 406, 409, 413, 500, 501, 503};
#define NSTATUS  (sizeof statuses / sizeof statuses[0])
#define NBUCKETS 14
static const double bucket_le_s[NBUCKETS] = {0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05,
                                             0.1,    0.25,  0.5,   1,     2.5,  5,     10};

struct histogram {
    atomic_ullong bucket[NBUCKETS + 1]; /* last one is +Inf */
    atomic_ullong sum_us;
    atomic_ullong count;
};

static atomic_ullong counters[M_COUNTER_COUNT];
static atomic_ullong requests[MAX_ROUTES + 2][NSTATUS + 1]; /* +2: 404/405, +1: other */
static struct histogram latency, wait_time;
static atomic_long waiting;

static struct {
    const char *name, *help, *type; /* static strings */
    uint64_t (*read)(void);         /* the value now */
} sources[METRICS_SOURCES];
static size_t nsources;

/* Modules whose metrics carry labels render their own lines. */
static char *(*text_sources[METRICS_SOURCES])(void);
static size_t ntext_sources;

static const char *const counter_names[M_COUNTER_COUNT][2] = {
    [M_LOCK_ACQUIRED] = {"lockgate_lock_acquired_total",              "Locks acquired by a new holder"         },
    [M_LOCK_REENTERED] = {"lockgate_lock_reentered_total",             "Re-entries by the holder"               },
    [M_LOCK_BUSY] = {"lockgate_lock_busy_total",                  "Acquisitions answered lock_busy"        },
    [M_LOCK_EXTENDED] = {"lockgate_lock_extended_total",              "Leases extended"                        },
    [M_LOCK_RELEASED] = {"lockgate_lock_released_total",              "Releases"                               },
    [M_REDIS_ERRORS] = {"lockgate_redis_errors_total",               "Redis commands failed or timed out"     },
    [M_REDIS_RECONNECTS] = {"lockgate_redis_reconnects_total",           "Reconnections to Redis"                 },
    [M_REDIS_NOSCRIPT] = {"lockgate_redis_noscript_total",             "Scripts reloaded after NOSCRIPT"        },
    [M_IDS_ISSUED] = {"lockgate_ids_issued_total",                 "Ids handed out"                         },
    [M_ID_BLOCKS] = {"lockgate_id_blocks_total",                  "Id blocks leased from Redis"            },
    [M_ID_JUMPS] = {"lockgate_id_jumps_total",
                         "Id leases placed ahead because the mark was new or lost or another "
                    "Redis wrote it"                                                                           },
    [M_ID_REFUSED] = {"lockgate_id_leases_refused_total",
                         "Id leases refused: Redis's mark below ids this gateway handed out, or "
                      "made with an earlier --id-epoch"                                                        },
    [M_WAIT_STARTED] = {"lockgate_waits_total",                      "Requests that waited for a busy lock"   },
    [M_WAIT_WAKEUPS] = {"lockgate_wait_wakeups_total",               "Waiters woken to try again"             },
    [M_WAIT_TIMEOUTS] = {"lockgate_wait_timeouts_total",              "Waits that ended without the lock"      },
    [M_DEAD_WAITERS] = {"lockgate_dead_waiters_total",               "Dead gateways' queue entries dropped"   },
    [M_GIVEN_BACK] = {"lockgate_given_back_total",
                         "Grants given back: the client never got the answer"                                  },
    [M_REDIS_REDIRECTS] = {"lockgate_redis_redirects_total",
                         "Redis Cluster redirects and retries followed (MOVED, ASK, TRYAGAIN, "
                           "CLUSTERDOWN)"                                                                      },
    [M_REDIS_ASKS] = {"lockgate_redis_ask_total",
                         "Redis Cluster ASK redirects followed (a slot being migrated)"                        },
    [M_REDIS_PROBES_FAILED] = {"lockgate_redis_dead_connections_total",
                         "Idle Redis connections found silently dead by a liveness probe"                      },
    [M_UNDO_STARTED] = {"lockgate_undo_started_total",
                         "Acquisitions that failed by timeout or lost connection, undone"                      },
    [M_UNDO_DONE] = {"lockgate_undo_given_back_total",            "Of those, grants found and given back"  },
    [M_UNDO_NOTHING] = {"lockgate_undo_nothing_total",               "Of those, nothing had been granted"     },
    [M_UNDO_EXPIRED] = {"lockgate_undo_expired_total",
                         "Of those, not settled before the lease ended"                                        },
    [M_REDIS_DATA_LOST] = {"lockgate_redis_data_lost_total",
                         "Redis masters found to have lost their data"                                         },
    [M_REDIS_HOLDOFF_LEARNT] =
        {"lockgate_redis_holdoff_learnt_total",
                         "Data-loss hold-offs learnt from Redis (<prefix>holdoff), not noticed here"           },
    [M_REDIS_SLOT_MARKER_UNLEARNT] =
        {"lockgate_redis_slot_marker_unlearnt_total",
                         "Redis Cluster: slot markers Redis refused to set (their grants go unchecked by them)"},
    [M_ORIGIN_REFUSED] = {"lockgate_origin_refused_total",
                         "Requests refused for their Origin (a page of another site)"                          },
    [M_SLOW_CLOSED] = {"lockgate_slow_clients_closed_total",
                         "Connections cut off for sending their headers or body too slowly"                    },
    [M_ACCEPT_REFUSED] = {"lockgate_accept_refused_total",
                         "Connections not accepted: no descriptor left, or the connection limit"               },
    [M_STREAM_HOLDS] =
        {"lockgate_stream_holds_total",
                         "Acquisitions answered as an event stream (holds bound to their connection)"          },
    [M_STREAM_LOST] = {"lockgate_stream_holds_lost_total",
                         "Stream holds that ended with event: lost"                                            },
};

/* Adding 0 (most acquires drop no dead waiter) writes nothing: an atomic
 * add would still take the shared cache line from the other threads. */
void metrics_inc(enum metric_counter c, uint64_t n) {
    if (n) atomic_fetch_add_explicit(&counters[c], n, memory_order_relaxed);
}

void metrics_add_source(const char *name, const char *help, const char *type,
                        uint64_t (*read)(void)) {
    if (nsources == METRICS_SOURCES) fatal("too many metric sources");
    sources[nsources].name = name;
    sources[nsources].help = help;
    sources[nsources].type = type;
    sources[nsources++].read = read;
}

void metrics_waiting_add(long delta) { atomic_fetch_add(&waiting, delta); }

static void observe(struct histogram *h, int64_t us) {
    if (us < 0) us = 0;
    int b = 0;
    while (b < NBUCKETS && (double)us > bucket_le_s[b] * 1e6) b++;
    atomic_fetch_add_explicit(&h->bucket[b], 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&h->sum_us, (unsigned long long)us, memory_order_relaxed);
    atomic_fetch_add_explicit(&h->count, 1, memory_order_relaxed);
}

void metrics_observe_request(int route, int status, int64_t latency_us) {
    int r = route >= 0 && route < MAX_ROUTES ? route : route == -1 ? MAX_ROUTES : MAX_ROUTES + 1;
    size_t s = 0;
    while (s < NSTATUS && statuses[s] != status) s++;
    atomic_fetch_add_explicit(&requests[r][s], 1, memory_order_relaxed);
    observe(&latency, latency_us);
}

void metrics_observe_wait(int64_t wait_us) { observe(&wait_time, wait_us); }

/* kilo's append buffer: build the text once, hand it over once. */
struct abuf {
    char *b;
    size_t len, cap;
};

static void ab_printf(struct abuf *ab, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void ab_printf(struct abuf *ab, const char *fmt, ...) {
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(ab->b + ab->len, ab->cap - ab->len, fmt, ap);
        va_end(ap);
        if (n >= 0 && (size_t)n < ab->cap - ab->len) {
            ab->len += (size_t)n;
            return;
        }
        ab->cap = ab->cap * 2 + (size_t)n + 64;
        ab->b = alloc_check(realloc(ab->b, ab->cap));
    }
}

static void render_histogram(struct abuf *ab, const char *name, const char *help,
                             struct histogram *h) {
    ab_printf(ab, "# HELP %s %s\n# TYPE %s histogram\n", name, help, name);
    unsigned long long cum = 0;
    for (int b = 0; b < NBUCKETS; b++) {
        cum += atomic_load(&h->bucket[b]);
        ab_printf(ab, "%s_bucket{le=\"%g\"} %llu\n", name, bucket_le_s[b], cum);
    }
    cum += atomic_load(&h->bucket[NBUCKETS]);
    ab_printf(ab, "%s_bucket{le=\"+Inf\"} %llu\n", name, cum);
    ab_printf(ab, "%s_sum %.6f\n%s_count %llu\n", name, (double)atomic_load(&h->sum_us) / 1e6, name,
              atomic_load(&h->count));
}

void metrics_add_text(char *(*render)(void)) {
    if (ntext_sources == METRICS_SOURCES) fatal("too many metric text sources");
    text_sources[ntext_sources++] = render;
}

char *metrics_render(size_t *len) {
    struct abuf ab = {alloc_check(malloc(8192)), 0, 8192};

    ab_printf(&ab, "# HELP lockgate_http_requests_total HTTP requests by route and status\n"
                   "# TYPE lockgate_http_requests_total counter\n");
    for (size_t r = 0; r < MAX_ROUTES + 2; r++) {
        if (r < MAX_ROUTES && r >= router_routes_count) continue;
        char route[64];
        if (r < MAX_ROUTES)
            snprintf(route, sizeof route, "%s %s", router_routes[r].method, router_routes[r].path);
        else
            snprintf(route, sizeof route, "%s", r == MAX_ROUTES ? "unmatched" : "bad_method");
        for (size_t s = 0; s <= NSTATUS; s++) {
            unsigned long long v = atomic_load(&requests[r][s]);
            if (!v) continue;
            if (s < NSTATUS)
                ab_printf(&ab, "lockgate_http_requests_total{route=\"%s\",status=\"%d\"} %llu\n",
                          route, statuses[s], v);
            else
                ab_printf(&ab, "lockgate_http_requests_total{route=\"%s\",status=\"other\"} %llu\n",
                          route, v);
        }
    }
    render_histogram(&ab, "lockgate_http_request_duration_seconds",
                     "Time from request arrival to reply", &latency);
    for (int c = 0; c < M_COUNTER_COUNT; c++)
        ab_printf(&ab, "# HELP %s %s\n# TYPE %s counter\n%s %llu\n", counter_names[c][0],
                  counter_names[c][1], counter_names[c][0], counter_names[c][0],
                  atomic_load(&counters[c]));
    ab_printf(&ab,
              "# HELP lockgate_waiting_requests Requests waiting for a busy lock\n"
              "# TYPE lockgate_waiting_requests gauge\nlockgate_waiting_requests %ld\n",
              atomic_load(&waiting));
    render_histogram(&ab, "lockgate_wait_duration_seconds",
                     "Time requests spent waiting for a busy lock", &wait_time);
    for (size_t i = 0; i < nsources; i++)
        ab_printf(&ab, "# HELP %s %s\n# TYPE %s %s\n%s %llu\n", sources[i].name, sources[i].help,
                  sources[i].name, sources[i].type, sources[i].name,
                  (unsigned long long)sources[i].read());
    for (size_t i = 0; i < ntext_sources; i++) {
        char *text = text_sources[i]();
        ab_printf(&ab, "%s", text);
        free(text);
    }
    *len = ab.len;
    return ab.b;
}
