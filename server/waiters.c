/* waiters.c -- see waiters.h.
 *
 * One instance per worker, touched by its thread only (self).  Two
 * structures:
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

#include <errno.h>
#include <sys/epoll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- timer heap ------------------------------------------------------------- */

#define NBUCKETS 4096
#define RING     256

struct bucket_entry {
    struct bucket_entry *next;  /* chain */
    int group;                  /* what the interest hook said of its key */
    struct waiter *head, *tail; /* the key's waiters, oldest first */
    char key[];                 /* the key, NUL-terminated */
};

/* One worker's waiters (see waiters.h); touched by its thread only. */
struct waiters {
    struct loop *loop;                      /* where hang-ups are watched */
    struct waiter **heap;                   /* timer heap on wake_ms */
    size_t heap_len, heap_cap;              /* its use and size */
    struct bucket_entry *buckets[NBUCKETS]; /* key -> its waiters */
    struct {
        uint64_t seq, hash;
    } ring[RING];                                        /* the last releases seen */
    uint64_t release_seq;                                /* releases seen */
    uint64_t arrivals;                                   /* first parks so far */
    int (*interest)(void *arg, const char *key, int on); /* see waiters_on_interest */
    void *interest_arg;                                  /* its argument */
};

static _Thread_local struct waiters *self;


static void heap_swap(size_t a, size_t b) {
    struct waiter *t = self->heap[a];
    self->heap[a] = self->heap[b];
    self->heap[b] = t;
    self->heap[a]->heap_i = a;
    self->heap[b]->heap_i = b;
}

static void heap_up(size_t i) {
    while (i > 0 && self->heap[(i - 1) / 2]->wake_ms > self->heap[i]->wake_ms) {
        heap_swap(i, (i - 1) / 2);
        i = (i - 1) / 2;
    }
}

static void heap_down(size_t i) {
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        if (l < self->heap_len && self->heap[l]->wake_ms < self->heap[m]->wake_ms) m = l;
        if (r < self->heap_len && self->heap[r]->wake_ms < self->heap[m]->wake_ms) m = r;
        if (m == i) return;
        heap_swap(i, m);
        i = m;
    }
}

static void heap_push(struct waiter *w) {
    if (self->heap_len == self->heap_cap) {
        self->heap_cap = self->heap_cap ? self->heap_cap * 2 : 256;
        self->heap = alloc_check(realloc(self->heap, self->heap_cap * sizeof *self->heap));
    }
    self->heap[self->heap_len] = w;
    w->heap_i = self->heap_len++;
    heap_up(w->heap_i);
}

static void heap_remove(struct waiter *w) {
    size_t i = w->heap_i;
    self->heap_len--;
    if (i != self->heap_len) {
        self->heap[i] = self->heap[self->heap_len];
        self->heap[i]->heap_i = i;
        heap_up(i);
        heap_down(self->heap[i]->heap_i);
    }
}

/* ---- key table -------------------------------------------------------------- */


static struct bucket_entry **entry_slot(const char *key, size_t len) {
    struct bucket_entry **e = &self->buckets[fnv1a_64(key, len) % NBUCKETS];
    while (*e && !(strlen((*e)->key) == len && memcmp((*e)->key, key, len) == 0)) e = &(*e)->next;
    return e;
}

/* ---- recent releases -------------------------------------------------------- */

uint64_t waiters_release_seq(void) { return self->release_seq; }

static int released_since(const char *key, uint64_t seen) {
    uint64_t h = fnv1a_64(key, strlen(key)), last = self->release_seq;
    for (uint64_t s = last; s > seen && last - s < RING; s--)
        if (self->ring[s % RING].seq == s && self->ring[s % RING].hash == h) return 1;
    return last - seen >= RING; /* too many to tell: assume so */
}

/* ---- parking ------------------------------------------------------------------ */

/* The waiter's client socket hung up (its loop's epoll says so). */
static void on_hangup(void *arg, uint32_t events) {
    struct waiter *w = arg;
    if (!(events & (EPOLLRDHUP | EPOLLHUP | EPOLLERR))) return;
    waiters_unpark(w);
    w->give_up(w, 1);
}

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
        e->group = self->interest ? self->interest(self->interest_arg, e->key, 1) : -1;
        *slot = e;
    }
    struct bucket_entry *e = *slot;
    /* A waiter woken in vain is parked again in its old place, not at the
     * end: "wake the first" must keep meaning the one that came first. */
    if (!w->arrival) w->arrival = ++self->arrivals;
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
    w->parked = 1;
    if (!w->watch) metrics_waiting_add(1);
    /* A socket that cannot be watched is not registered, so unpark
     * removes nothing.  Closed already (its client reset): the waiter is
     * due at once instead, and its retry finds its client gone; any other
     * refusal keeps the waiter's timer (a retry at once would find the
     * client there and park again, in a loop until its deadline).  (Not given up
     * here: the owner may be parking several waiters of one request.) */
    if (w->fd >= 0 && loop_fd(self->loop, w->fd, EPOLLRDHUP, on_hangup, w) < 0) {
        int closed = errno == EBADF;
        log_debug("waiters: socket %d cannot be watched: %s", w->fd, strerror(errno));
        w->fd = -1;
        if (closed) { /* due now; any other failure (ENOSPC, ENOMEM) keeps its timer */
            w->wake_ms = 0;
            heap_up(w->heap_i);
        }
    }
}

int waiters_parked(const struct waiter *w) { return w->parked; }

void waiters_unpark(struct waiter *w) {
    if (!w->parked) return;
    w->parked = 0;
    if (!w->watch) metrics_waiting_add(-1);
    if (w->fd >= 0) loop_fd(self->loop, w->fd, 0, NULL, NULL);
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
        if (self->interest) self->interest(self->interest_arg, e->key, 0);
        free(e);
    }
}

/* turn: woken by a release, or made due by one passed on (see
 * waiters_pass_on), not by its timer. */
static void wake(struct waiter *w, int turn) {
    waiters_unpark(w);
    metrics_inc(M_WAIT_WAKEUPS, 1);
    w->seen_seq = waiters_release_seq();
    w->turn = turn || w->turn_due;
    w->turn_due = 0;
    w->retry(w);
}

void waiters_on_release(const char *key, size_t len) {
    uint64_t s = ++self->release_seq;
    self->ring[s % RING].seq = s;
    self->ring[s % RING].hash = fnv1a_64(key, len);

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
    if (first) wake(first, 1);
    if (first_fair && first_fair != first) wake(first_fair, 1);
    for (size_t i = 0; i < nwatch; i++) wake(watchers[i], 0);
    free(watchers);
}

void waiters_pass_on(struct waiter *w) {
    if (!w->turn) return;
    w->turn = 0;
    struct bucket_entry *e = *entry_slot(w->key, strlen(w->key));
    if (!e) return;
    struct waiter *next = NULL, *next_fair = NULL;
    for (struct waiter *o = e->head; o; o = o->next) {
        if (o == w || o->watch || o->arrival <= w->arrival) continue;
        if (!next) next = o;
        if (w->fair && o->fair && !next_fair) next_fair = o;
    }
    log_debug("waiters: %s passes its turn on", w->key);
    /* Made due, not woken here: w's own retry is running inside a wake of
     * waiters_on_release, which may have picked next (or next_fair) to wake
     * after it, and a waiter woken twice would try twice for one request
     * (or after its request was freed).  The due hook wakes them at this
     * turn's end, once each; a wake before that takes them off the heap. */
    struct waiter *due[2] = {next, next_fair != next ? next_fair : NULL};
    for (int i = 0; i < 2; i++) {
        if (!due[i]) continue;
        due[i]->turn_due = 1;
        due[i]->wake_ms = 0;
        heap_up(due[i]->heap_i);
    }
}

int waiters_next_timeout(int64_t now_ms) {
    if (self->heap_len == 0) return -1;
    int64_t d = self->heap[0]->wake_ms - now_ms;
    return d < 0 ? 0 : d > 1000000 ? 1000000 : (int)d;
}

void waiters_run_due(int64_t now_ms) {
    while (self->heap_len > 0 && self->heap[0]->wake_ms <= now_ms) wake(self->heap[0], 0);
}

/* Due now rather than woken here: a waiter whose retry parks it again at
 * once, without a Redis call (a stream's heartbeat timer), would be found
 * in the heap again and woken for ever, the worker spinning.  Every waiter
 * parked now is due (all keys 0: still a heap), and the due hook wakes
 * each once at this turn's end; one parked again gets its new time. */
void waiters_retry_all(void) {
    for (size_t i = 0; i < self->heap_len; i++) self->heap[i]->wake_ms = 0;
}

/* Due now rather than woken here: waking may free others of the list
 * (multi-lock), and the due hook wakes them one at a time, safely. */
void waiters_retry_group(int group) {
    for (size_t b = 0; b < NBUCKETS; b++)
        for (struct bucket_entry *e = self->buckets[b]; e; e = e->next) {
            if (e->group != group) continue;
            for (struct waiter *w = e->head; w; w = w->next) {
                w->wake_ms = 0;
                heap_up(w->heap_i);
            }
        }
}

void waiters_on_interest(struct waiters *ws, int (*fn)(void *arg, const char *key, int on),
                         void *arg) {
    ws->interest = fn;
    ws->interest_arg = arg;
}

void waiters_give_up_all(void) {
    while (self->heap_len > 0) {
        struct waiter *w = self->heap[0];
        waiters_unpark(w);
        w->give_up(w, 0);
    }
}

struct waiters *waiters_new(struct loop *l) {
    struct waiters *w = alloc_check(calloc(1, sizeof *w));
    w->loop = l;
    return w;
}

void waiters_bind(struct waiters *w) { self = w; }

void waiters_free(struct waiters *w) {
    free(w->heap);
    free(w);
}

int waiters_timeout_hook(void *arg, int64_t now_ms) { return waiters_next_timeout(now_ms); }

void waiters_due_hook(void *arg, int64_t now_ms) { waiters_run_due(now_ms); }
