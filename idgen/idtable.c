/* idtable.c -- see idtable.h.
 *
 * Why it is shaped so
 * -------------------
 * Readers never take a lock, so an entry they found may be evicted and
 * reused for another namespace while they look at it.  Two things make that
 * harmless:
 *
 * - Entries are never freed while the table lives (they come from one pool
 *   of `max` and are recycled), so a stale pointer always points at an
 *   entry, never at freed memory.
 * - A reader holds an entry through its `state` word:
 *   (incarnation << 32) | dead | references.  It takes a reference with a
 *   compare-and-swap that fails if the entry is dead or was recycled since
 *   it read the word, and only then compares the name (stable while held).
 *   Eviction turns a word with no references into a dead one, with one
 *   compare-and-swap, so it never waits for a reader and a held entry is
 *   never evicted: a request keeps its namespace from start to reply.
 *
 * The slots are striped: each shard is its own linear-probing table with a
 * mutex that only inserts and evictions in it take.  Removal shifts later
 * entries back (no tombstones, so a table that sees a million namespaces
 * come and go never fills with them).  A lock-free reader racing with such a
 * shift may miss an entry that is there; a miss is therefore confirmed under
 * the shard's mutex before anything is inserted, so a namespace is never
 * live twice (which would break the order of its ids).  At most one stripe
 * mutex is held at a time, each for a few slot writes.
 *
 * Choosing whom to evict: a CLOCK hand sweeps the slots; a namespace used
 * since the hand last passed gets a second chance (its bit is cleared), one
 * held by a request is skipped.  Each request on a namespace sets its bit
 * only when clear, so a busy namespace costs no extra writes.  The victim
 * is found before the new namespace's stripe mutex is taken; if the name
 * turns out to have been inserted meanwhile, the dead entry waits on a
 * short spare list for the next new namespace.  A stripe that the hash has
 * given more than its share (half its slots) makes room from its own
 * entries instead: it refuses a new namespace only when every one of its
 * own is held by a request. */
#include "idgen/idtable.h"
#include "common/alloc.h"
#include "common/fnv.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define IDTABLE_DEAD       (1ull << 31)
#define IDTABLE_REFS       (IDTABLE_DEAD - 1)
#define IDTABLE_SHARDS     64 /* stripes at most */
#define IDTABLE_SHARD_MIN  32 /* slots per stripe at least */
#define IDTABLE_SHARD_FILL 2  /* a stripe takes at most 1/2 its slots */

/* FNV-1a, folded: the shard is chosen by the high half, the home slot by
 * the low. */
static uint64_t idtable_hash(const char *s) {
    uint64_t h = fnv1a_64(s, strlen(s));
    return h ^ (h >> 29);
}

static size_t idtable_shard_of(const struct idtable *t, uint64_t h) {
    return (size_t)(h >> 40) & (t->nshards - 1);
}

static size_t idtable_home(const struct idtable *t, uint64_t h) {
    return (size_t)h & (t->shard_slots - 1);
}

/* ============================================================================
 * Holding an entry
 * ========================================================================= */

static int idtable_ref(struct idtable_entry *e) {
    uint64_t w = atomic_load_explicit(&e->state, memory_order_acquire);
    for (;;) {
        if ((w & IDTABLE_DEAD) || (w & IDTABLE_REFS) == IDTABLE_REFS) return 0;
        if (atomic_compare_exchange_weak_explicit(&e->state, &w, w + 1, memory_order_acquire,
                                                  memory_order_acquire))
            return 1;
    }
}

void idtable_release(struct idtable_entry *e) {
    atomic_fetch_sub_explicit(&e->state, 1, memory_order_release);
}

/* Dead only if nobody holds it: one compare-and-swap, never a wait. */
static int idtable_kill(struct idtable_entry *e) {
    uint64_t w = atomic_load_explicit(&e->state, memory_order_acquire);
    if ((w & IDTABLE_DEAD) || (w & IDTABLE_REFS) != 0) return 0;
    return atomic_compare_exchange_strong_explicit(&e->state, &w, w | IDTABLE_DEAD,
                                                   memory_order_acq_rel, memory_order_relaxed);
}

/* ============================================================================
 * Slots
 * ========================================================================= */

static _Atomic(struct idtable_entry *) *idtable_stripe(struct idtable *t, size_t shard) {
    return t->slot + shard * t->shard_slots;
}

/* Probe shard `shard` for `name`; returns it held, or NULL.  Lock-free; under
 * the shard's mutex it is exact (no writer moves entries meanwhile). */
static struct idtable_entry *idtable_find(struct idtable *t, size_t shard, uint64_t h,
                                          const char *name) {
    _Atomic(struct idtable_entry *) *s = idtable_stripe(t, shard);
    size_t mask = t->shard_slots - 1, i = idtable_home(t, h);
    for (size_t n = 0; n < t->shard_slots; n++, i = (i + 1) & mask) {
        struct idtable_entry *e = atomic_load_explicit(&s[i], memory_order_acquire);
        if (!e) return NULL;
        if (atomic_load_explicit(&e->hash, memory_order_relaxed) != h || !idtable_ref(e)) continue;
        if (strcmp(e->ns.name, name) == 0) return e;
        idtable_release(e); /* recycled since we read its hash */
    }
    return NULL;
}

/* Remove slot `hole` of shard `shard` (its mutex held) and shift back the
 * entries after it that would otherwise become unreachable. */
static void idtable_remove(struct idtable *t, size_t shard, size_t hole) {
    _Atomic(struct idtable_entry *) *s = idtable_stripe(t, shard);
    size_t mask = t->shard_slots - 1, j = hole;
    for (;;) {
        j = (j + 1) & mask;
        struct idtable_entry *e = atomic_load_explicit(&s[j], memory_order_relaxed);
        if (!e) break;
        size_t home = idtable_home(t, atomic_load_explicit(&e->hash, memory_order_relaxed));
        if (((j - home) & mask) >= ((j - hole) & mask)) {
            atomic_store_explicit(&s[hole], e, memory_order_release);
            hole = j;
        }
    }
    atomic_store_explicit(&s[hole], NULL, memory_order_release);
    t->shard[shard].count--;
}

/* The floors of evicted namespaces (idtable.h).  A hash of 0 or 1 cannot
 * tell "empty" or "shared" from a name, so names hash to 2 and up here. */
#define IDTABLE_FLOOR_SHARED 1

static struct idtable_floor *idtable_floor_slot(struct idtable *t, uint64_t h) {
    return &t->floor[(size_t)(h >> 20) & (t->nfloors - 1)];
}

static void idtable_keep_floor(struct idtable *t, struct idtable_entry *e) {
    uint64_t h = atomic_load_explicit(&e->hash, memory_order_relaxed) | 2, f = idgen_floor(&e->ns);
    if (f == 0) return;
    pthread_mutex_lock(&t->floor_mu);
    struct idtable_floor *s = idtable_floor_slot(t, h);
    if (s->hash != 0 && s->hash != h)
        s->hash = IDTABLE_FLOOR_SHARED; /* both must stay covered */
    else
        s->hash = h;
    if (f > s->floor) s->floor = f;
    pthread_mutex_unlock(&t->floor_mu);
}

static void idtable_restore_floor(struct idtable *t, uint64_t h, struct idgen_ns *ns) {
    h |= 2;
    pthread_mutex_lock(&t->floor_mu);
    struct idtable_floor *s = idtable_floor_slot(t, h);
    if (s->hash == h)
        idgen_set_floor(ns, s->floor, 0); /* its own */
    else if (s->hash == IDTABLE_FLOOR_SHARED)
        idgen_set_floor(ns, s->floor, 1); /* perhaps its own, perhaps another's */
    pthread_mutex_unlock(&t->floor_mu);
}

/* Find an entry to give way and take it out of the table, dead; the caller
 * holds no shard mutex.  Four turns of the hand give every entry a second
 * chance (a busy namespace is used again before the hand comes back); a
 * fifth ignores the bits, so NULL means every entry was held by a request
 * in flight all along.  The victim's stripe mutex is held for the kill and
 * the removal only. */
static struct idtable_entry *idtable_evict(struct idtable *t) {
    for (size_t n = 0; n < 5 * t->nslots; n++) {
        size_t i = atomic_fetch_add_explicit(&t->hand, 1, memory_order_relaxed) & (t->nslots - 1);
        struct idtable_entry *e = atomic_load_explicit(&t->slot[i], memory_order_relaxed);
        if (!e) continue;
        if (n < 4 * t->nslots && atomic_load_explicit(&e->used, memory_order_relaxed)) {
            atomic_store_explicit(&e->used, 0, memory_order_relaxed);
            continue;
        }
        if (atomic_load_explicit(&e->state, memory_order_relaxed) & IDTABLE_REFS) continue;
        size_t shard = i / t->shard_slots;
        pthread_mutex_lock(&t->shard[shard].mu);
        int ok = atomic_load_explicit(&t->slot[i], memory_order_relaxed) == e && idtable_kill(e);
        if (ok) {
            idtable_remove(t, shard, i % t->shard_slots);
            /* Under the stripe's mutex: the name cannot come back (an insert
             * takes it) before its floor is kept for it. */
            idtable_keep_floor(t, e);
        }
        pthread_mutex_unlock(&t->shard[shard].mu);
        if (ok) {
            atomic_fetch_add_explicit(&t->evictions, 1, memory_order_relaxed);
            atomic_fetch_sub_explicit(&t->live, 1, memory_order_relaxed);
            idgen_ns_free(&e->ns);
            return e;
        }
    }
    return NULL;
}

/* Make room in stripe `shard` (its mutex held) when it is at its fill
 * limit: the hash put more than its share of the live namespaces there, so
 * the victim must come from it.  Prefers one not used since the hand
 * passed.  Returns the dead entry, or NULL when all of the stripe's are
 * held. */
static struct idtable_entry *idtable_evict_in(struct idtable *t, size_t shard) {
    _Atomic(struct idtable_entry *) *s = idtable_stripe(t, shard);
    for (int pass = 0; pass < 2; pass++) {
        for (size_t i = 0; i < t->shard_slots; i++) {
            struct idtable_entry *e = atomic_load_explicit(&s[i], memory_order_relaxed);
            if (!e || (pass == 0 && atomic_load_explicit(&e->used, memory_order_relaxed)) ||
                !idtable_kill(e))
                continue;
            idtable_remove(t, shard, i);
            atomic_fetch_add_explicit(&t->evictions, 1, memory_order_relaxed);
            atomic_fetch_sub_explicit(&t->live, 1, memory_order_relaxed);
            idtable_keep_floor(t, e);
            idgen_ns_free(&e->ns);
            return e;
        }
    }
    return NULL;
}

/* A dead entry for a new namespace: from the pool while it lasts, else one
 * left over by a lost insert race, else an evicted one.  No mutex held. */
static struct idtable_entry *idtable_take(struct idtable *t) {
    size_t n = atomic_load_explicit(&t->made, memory_order_relaxed);
    while (n < t->max) {
        if (atomic_compare_exchange_weak_explicit(&t->made, &n, n + 1, memory_order_relaxed,
                                                  memory_order_relaxed)) {
            struct idtable_entry *e = &t->pool[n];
            atomic_init(&e->state, IDTABLE_DEAD);
            atomic_init(&e->hash, 0);
            atomic_init(&e->used, 0);
            return e;
        }
    }
    pthread_mutex_lock(&t->spare_mu);
    struct idtable_entry *e = t->spare;
    if (e) t->spare = e->next_spare;
    pthread_mutex_unlock(&t->spare_mu);
    return e ? e : idtable_evict(t);
}

/* Keep an entry taken but not used (the name was inserted meanwhile). */
static void idtable_put_spare(struct idtable *t, struct idtable_entry *e) {
    pthread_mutex_lock(&t->spare_mu);
    e->next_spare = t->spare;
    t->spare = e;
    pthread_mutex_unlock(&t->spare_mu);
}

/* ============================================================================
 * Acquire
 * ========================================================================= */

struct idtable_entry *idtable_acquire(struct idtable *t, const char *name) {
    size_t len = strlen(name);
    if (len == 0 || len > IDGEN_NAME_MAX) return NULL;
    uint64_t h = idtable_hash(name);
    size_t shard = idtable_shard_of(t, h);
    struct idtable_entry *e = idtable_find(t, shard, h, name);
    if (e) goto found;

    /* Taken before the stripe's mutex, so that no two stripe mutexes are
     * ever held at once and the search for a victim holds none. */
    struct idtable_entry *fresh = idtable_take(t);
    if (!fresh) return NULL; /* every live namespace is held */
    struct idtable_shard *sh = &t->shard[shard];
    pthread_mutex_lock(&sh->mu);
    e = idtable_find(t, shard, h, name); /* exact now: a lock-free miss may be false */
    struct idtable_entry *extra = NULL;
    if (!e && sh->count >= t->shard_slots / IDTABLE_SHARD_FILL)
        extra = idtable_evict_in(t, shard); /* kept as a spare: live stays <= max */
    if (!e && sh->count < t->shard_slots / IDTABLE_SHARD_FILL) {
        e = fresh;
        fresh = NULL;
        if (idgen_ns_init(&e->ns, name, &t->ops, t->max_age_ms) != 0) abort(); /* mutex init */
        idtable_restore_floor(t, h, &e->ns);
        atomic_store_explicit(&e->hash, h, memory_order_relaxed);
        /* Alive, held by us, a new incarnation: a reader that read the old
         * word cannot take a reference on this one. */
        uint64_t inc = (atomic_load_explicit(&e->state, memory_order_relaxed) >> 32) + 1;
        atomic_store_explicit(&e->state, inc << 32 | 1, memory_order_release);
        _Atomic(struct idtable_entry *) *s = idtable_stripe(t, shard);
        size_t i = idtable_home(t, h);
        while (atomic_load_explicit(&s[i], memory_order_relaxed))
            i = (i + 1) & (t->shard_slots - 1);
        atomic_store_explicit(&s[i], e, memory_order_release);
        sh->count++;
        atomic_fetch_add_explicit(&t->live, 1, memory_order_relaxed);
    }
    pthread_mutex_unlock(&sh->mu);
    if (fresh) idtable_put_spare(t, fresh);
    if (extra) idtable_put_spare(t, extra);
    if (!e) return NULL; /* the stripe's namespaces are all held */
found:
    if (!atomic_load_explicit(&e->used, memory_order_relaxed))
        atomic_store_explicit(&e->used, 1, memory_order_relaxed);
    return e;
}

/* ============================================================================
 * Lifecycle
 * ========================================================================= */

int idtable_init(struct idtable *t, size_t max, const struct idgen_ops *ops, int64_t max_age_ms) {
    if (max < IDTABLE_MIN || max > IDTABLE_MAX || !ops || !ops->now_ms || !ops->lease) return -1;
    memset(t, 0, sizeof *t);
    t->max = max;
    t->nslots = IDTABLE_SHARD_MIN;
    while (t->nslots < 4 * max) t->nslots *= 2;
    t->nshards = t->nslots / IDTABLE_SHARD_MIN < IDTABLE_SHARDS ? t->nslots / IDTABLE_SHARD_MIN
                                                                : IDTABLE_SHARDS;
    t->shard_slots = t->nslots / t->nshards;
    t->slot = alloc_check(calloc(t->nslots, sizeof *t->slot));
    t->shard = alloc_check(calloc(t->nshards, sizeof *t->shard));
    for (size_t i = 0; i < t->nshards; i++)
        if (pthread_mutex_init(&t->shard[i].mu, NULL) != 0) abort();
    if (pthread_mutex_init(&t->spare_mu, NULL) != 0) abort();
    /* Untouched pages cost no memory: the pool grows in RSS as it is used. */
    t->pool = alloc_check(calloc(max, sizeof *t->pool));
    for (t->nfloors = 1; t->nfloors < 2 * max;) t->nfloors *= 2;
    t->floor = alloc_check(calloc(t->nfloors, sizeof *t->floor));
    if (pthread_mutex_init(&t->floor_mu, NULL) != 0) abort();
    t->ops = *ops;
    t->max_age_ms = max_age_ms;
    return 0;
}

void idtable_free(struct idtable *t) {
    size_t made = atomic_load(&t->made);
    for (size_t i = 0; i < made; i++)
        if (!(atomic_load(&t->pool[i].state) & IDTABLE_DEAD)) idgen_ns_free(&t->pool[i].ns);
    for (size_t i = 0; i < t->nshards; i++) pthread_mutex_destroy(&t->shard[i].mu);
    pthread_mutex_destroy(&t->spare_mu);
    pthread_mutex_destroy(&t->floor_mu);
    free(t->pool);
    free(t->floor);
    free(t->shard);
    free(t->slot);
}
