/* waiters.c -- see waiters.h.
 *
 * Two structures, both touched by the loop thread only:
 *   - a binary min-heap on wake_ms, so the next timer is O(1) to find and
 *     10,000 waiters cost nothing while nobody releases;
 *   - a hash table from key to the list of that key's waiters in arrival
 *     order, so a release finds its waiters without scanning.
 * A small ring remembers the last releases, to close the race where a
 * release is announced after the attempt was sent but before its busy
 * answer parks the waiter (the two arrive on different connections). */
#include "server/waiters.h"
#include "common/alloc.h"
#include "common/fnv.h"
#include "server/loop.h"
#include "server/log.h"
#include "server/metrics.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- timer heap ------------------------------------------------------------- */

static struct waiter **heap;
static size_t heap_len, heap_cap;

static void heap_swap(size_t a, size_t b) {
    struct waiter *t = heap[a];
    heap[a] = heap[b];
    heap[b] = t;
    heap[a]->heap_i = a;
    heap[b]->heap_i = b;
}

static void heap_up(size_t i) {
    while (i > 0 && heap[(i - 1) / 2]->wake_ms > heap[i]->wake_ms) {
        heap_swap(i, (i - 1) / 2);
        i = (i - 1) / 2;
    }
}

static void heap_down(size_t i) {
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        if (l < heap_len && heap[l]->wake_ms < heap[m]->wake_ms) m = l;
        if (r < heap_len && heap[r]->wake_ms < heap[m]->wake_ms) m = r;
        if (m == i) return;
        heap_swap(i, m);
        i = m;
    }
}

static void heap_push(struct waiter *w) {
    if (heap_len == heap_cap) {
        heap_cap = heap_cap ? heap_cap * 2 : 256;
        heap = alloc_check(realloc(heap, heap_cap * sizeof *heap));
    }
    heap[heap_len] = w;
    w->heap_i = heap_len++;
    heap_up(w->heap_i);
}

static void heap_remove(struct waiter *w) {
    size_t i = w->heap_i;
    heap_len--;
    if (i != heap_len) {
        heap[i] = heap[heap_len];
        heap[i]->heap_i = i;
        heap_up(i);
        heap_down(heap[i]->heap_i);
    }
}

/* ---- key table -------------------------------------------------------------- */

struct bucket_entry {
    struct bucket_entry *next;  /* chain */
    struct waiter *head, *tail; /* the key's waiters, oldest first */
    char key[];                 /* the key, NUL-terminated */
};

#define NBUCKETS 4096
static struct bucket_entry *buckets[NBUCKETS];

static struct bucket_entry **entry_slot(const char *key, size_t len) {
    struct bucket_entry **e = &buckets[fnv1a_64(key, len) % NBUCKETS];
    while (*e && !(strlen((*e)->key) == len && memcmp((*e)->key, key, len) == 0)) e = &(*e)->next;
    return e;
}

/* ---- recent releases -------------------------------------------------------- */

#define RING 256
static struct { uint64_t seq, hash; } ring[RING];
static atomic_ullong release_seq;

uint64_t waiters_release_seq(void) { return atomic_load(&release_seq); }

static int released_since(const char *key, uint64_t seen) {
    uint64_t h = fnv1a_64(key, strlen(key)), last = atomic_load(&release_seq);
    for (uint64_t s = last; s > seen && last - s < RING; s--)
        if (ring[s % RING].seq == s && ring[s % RING].hash == h) return 1;
    return last - seen >= RING; /* too many to tell: assume so */
}

/* ---- parking ------------------------------------------------------------------ */

void waiters_park(struct waiter *w, int64_t wake_ms) {
    if (released_since(w->key, w->seen_seq)) {
        w->seen_seq = waiters_release_seq();
        w->retry(w);
        return;
    }
    size_t len = strlen(w->key);
    struct bucket_entry **slot = entry_slot(w->key, len);
    if (!*slot) {
        struct bucket_entry *e = alloc_check(calloc(1, sizeof *e + len + 1));
        memcpy(e->key, w->key, len + 1);
        *slot = e;
    }
    struct bucket_entry *e = *slot;
    /* A waiter woken in vain is parked again in its old place, not at the
     * end: "wake the first" must keep meaning the one that came first. */
    static uint64_t arrivals;
    if (!w->arrival) w->arrival = ++arrivals;
    struct waiter *after = e->tail;
    while (after && after->arrival > w->arrival) after = after->prev;
    w->prev = after;
    w->next = after ? after->next : e->head;
    if (w->next)
        w->next->prev = w;
    else
        e->tail = w;
    if (after)
        after->next = w;
    else
        e->head = w;
    w->wake_ms = wake_ms;
    heap_push(w);
    if (w->fd >= 0) loop_watch_hangup(w->fd, w);
    w->parked = 1;
    if (!w->watch) metrics_waiting_add(1);
}

void waiters_unpark(struct waiter *w) {
    if (!w->parked) return;
    w->parked = 0;
    if (!w->watch) metrics_waiting_add(-1);
    if (w->fd >= 0) loop_unwatch(w->fd);
    heap_remove(w);
    struct bucket_entry **slot = entry_slot(w->key, strlen(w->key));
    struct bucket_entry *e = *slot;
    if (w->prev)
        w->prev->next = w->next;
    else
        e->head = w->next;
    if (w->next)
        w->next->prev = w->prev;
    else
        e->tail = w->prev;
    if (!e->head) {
        *slot = e->next;
        free(e);
    }
}

static void wake(struct waiter *w) {
    waiters_unpark(w);
    metrics_inc(M_WAIT_WAKEUPS, 1);
    w->seen_seq = waiters_release_seq();
    w->retry(w);
}

void waiters_on_release(const char *key, size_t len) {
    uint64_t s = atomic_fetch_add(&release_seq, 1) + 1;
    ring[s % RING].seq = s;
    ring[s % RING].hash = fnv1a_64(key, len);

    struct bucket_entry *e = *entry_slot(key, len);
    log_debug("waiters: release of %.*s, %s", (int)len, key, e ? "waking" : "nobody waits here");
    if (!e) return;
    /* Waking may free e (its last waiter leaves): pick everyone first. */
    struct waiter *first = NULL, *first_fair = NULL, **watchers = NULL;
    size_t nwatch = 0, cap = 0;
    for (struct waiter *w = e->head; w; w = w->next) {
        if (w->watch) {
            if (nwatch == cap) {
                cap = cap ? 2 * cap : 8;
                watchers = alloc_check(realloc(watchers, cap * sizeof *watchers));
            }
            watchers[nwatch++] = w;
        } else {
            if (!first) first = w;
            if (w->fair && !first_fair) first_fair = w;
        }
    }
    if (first) wake(first);
    if (first_fair && first_fair != first) wake(first_fair);
    for (size_t i = 0; i < nwatch; i++) wake(watchers[i]);
    free(watchers);
}

int waiters_next_timeout(int64_t now_ms) {
    if (heap_len == 0) return -1;
    int64_t d = heap[0]->wake_ms - now_ms;
    return d < 0 ? 0 : d > 1000000 ? 1000000 : (int)d;
}

void waiters_run_due(int64_t now_ms) {
    while (heap_len > 0 && heap[0]->wake_ms <= now_ms) wake(heap[0]);
}

void waiters_retry_all(void) {
    while (heap_len > 0) wake(heap[0]);
}

void waiters_give_up_all(void) {
    while (heap_len > 0) {
        struct waiter *w = heap[0];
        waiters_unpark(w);
        w->give_up(w, 0);
    }
}

static void give_up_task(struct loop_task *t) {
    waiters_give_up_all();
    free(t);
}

void waiters_give_up_all_soon(void) {
    struct loop_task *t = malloc(sizeof *t);
    if (!t) return;
    t->run = give_up_task;
    if (loop_post(t) < 0) free(t);
}

void waiters_on_hangup(struct waiter *w) {
    waiters_unpark(w);
    w->give_up(w, 1);
}
