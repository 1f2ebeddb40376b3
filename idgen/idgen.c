/* idgen.c -- the ID layout and the per-namespace block hand-out.
 *
 * How a namespace hands out ids, and why it is shaped so
 * -------------------------------------------------------
 * Redis (lua/id_lease.lua) leases a block: numbers first..last of one second,
 * above the namespace's high-water mark, so blocks leased later (by any
 * gateway) hold greater ids.  Since the sequence is the low half of an id, a
 * block is the integer range [lo, hi] and the k-th id of it is lo + k.
 *
 * Hot path: one 64-bit atomic `cursor` per namespace holds
 * (generation << 32) | (ids claimed from that generation's block).  A request
 * for n ids does one fetch_add(cursor, n): the old value names the block and
 * the offset, and the n offsets are the caller's alone, whatever other threads
 * do.  The part of them that lies inside the block is handed out; a part past
 * its end is lost (those numbers are past `hi` and do not exist).  The
 * block's bounds are published in a small ring of slots indexed by
 * generation, so nothing is ever freed while a reader may look at it: a
 * reader validates the slot's generation before and after reading it
 * (seqlock), and a reader so slow that its slot was reused IDGEN_RING
 * generations later just drops its claim and retries.  The alternative, a
 * pointer to a heap block swapped atomically, needs hazard pointers or a
 * grace period to free old blocks; the ring needs neither.
 *
 * Slow path: a thread that finds the block exhausted or stale takes the
 * mutex.  If another thread has installed a new block meanwhile (the
 * generation moved), it just retries the fast path.  If a lease failed while
 * it waited, it fails too rather than queue another Redis timeout behind the
 * first (a herd of waiters would otherwise each wait out their own).
 * Otherwise it retires the block (resizing the next lease), installs the
 * prefetched block if there is a fresh one, or leases a new one itself.
 *
 * Prefetch: the one request whose claim crosses 75% of a block (claims are
 * disjoint, so exactly one does) try-locks the mutex and, if nobody holds it
 * and nothing is prefetched yet, leases the next block and keeps it aside.
 * When the current block runs out, the next thread installs it without a
 * Redis round trip.  That request pays one Redis round trip of latency; all
 * others pay none.  A prefetched block goes stale like any other (its age
 * counts from its own lease) and is then dropped unused.
 *
 * Ordering: within one generation, claims increase with the cursor; a newer
 * generation's block was leased later, so its ids are greater; and `floor`
 * (the highest id ever leased here) trims any answer that would not be, so
 * even a Redis that lost its high-water mark cannot make this instance go
 * back.  Hence ids of one request increase, and ids of a request that starts
 * after another returned are greater.
 *
 * The cursor's count of claimed ids grows only by claims made while it was
 * below IDGEN_TAKEN_GUARD, so it can never carry into the generation bits,
 * however long Redis stays down and requests keep arriving.
 */
#include "idgen/idgen.h"
#include "common/decimal.h"

#include <string.h>
#include <time.h>

#define IDGEN_TAKEN_GUARD (1u << 31) /* no new claims past this many */
#define IDGEN_GROW_MS     100        /* exhausted sooner than this: double */

/* ============================================================================
 * Layout helpers
 * ========================================================================= */

uint64_t idgen_pack(uint32_t sec_since_epoch, uint32_t seq) {
    return ((uint64_t)(sec_since_epoch & IDGEN_SECOND_MAX) << 32) | seq;
}

int idgen_unpack(uint64_t id, int64_t epoch_unix, struct idgen_decoded *out) {
    if (id == 0 || id > (uint64_t)INT64_MAX) return -1;
    out->unix_seconds = epoch_unix + (int64_t)(id >> 32);
    out->seq = (uint32_t)id;
    return 0;
}

/* The digits themselves are decimal.h's; an id adds only "no leading
 * zero", so that each id has exactly one spelling. */
int idgen_parse_decimal(const char *s, size_t len, uint64_t *out) {
    long long v;
    if (s == NULL || len == 0 || s[0] == '0') return -1;
    if (decimal_parse(s, len, 1, INT64_MAX, &v) < 0) return -1;
    *out = (uint64_t)v;
    return 0;
}

static const char idgen_digit_pairs[201] =
    "00010203040506070809101112131415161718192021222324252627282930313233343536373839"
    "40414243444546474849505152535455565758596061626364656667686970717273747576777879"
    "8081828384858687888990919293949596979899";

/* Two digits per division: a batch of 10000 ids is formatted on every
 * request, so this is on the hot path of POST /v1/ids. */
size_t idgen_format(uint64_t id, char *buf) {
    char tmp[20];
    char *p = tmp + sizeof tmp;
    while (id >= 100) {
        unsigned r = (unsigned)(id % 100);
        id /= 100;
        p -= 2;
        memcpy(p, idgen_digit_pairs + 2 * r, 2);
    }
    if (id >= 10) {
        p -= 2;
        memcpy(p, idgen_digit_pairs + 2 * id, 2);
    } else {
        *--p = (char)('0' + id);
    }
    size_t n = (size_t)(tmp + sizeof tmp - p);
    memcpy(buf, p, n);
    buf[n] = '\0';
    return n;
}

static void idgen_put2(char *p, int v) {
    p[0] = (char)('0' + v / 10);
    p[1] = (char)('0' + v % 10);
}

int idgen_format_time(int64_t unix_seconds, char out[IDGEN_TIME_MAX]) {
    time_t t = (time_t)unix_seconds;
    struct tm tm;
    if ((int64_t)t != unix_seconds || gmtime_r(&t, &tm) == NULL) return -1;
    int year = tm.tm_year + 1900;
    if (tm.tm_year > 9999 - 1900 || year < 0) return -1;
    idgen_put2(out, year / 100);
    idgen_put2(out + 2, year % 100);
    out[4] = '-';
    idgen_put2(out + 5, tm.tm_mon + 1);
    out[7] = '-';
    idgen_put2(out + 8, tm.tm_mday);
    out[10] = 'T';
    idgen_put2(out + 11, tm.tm_hour);
    out[13] = ':';
    idgen_put2(out + 14, tm.tm_min);
    out[16] = ':';
    idgen_put2(out + 17, tm.tm_sec);
    out[19] = 'Z';
    out[20] = '\0';
    return 0;
}

/* ============================================================================
 * Published blocks (the ring)
 * ========================================================================= */

static uint32_t idgen_cursor_gen(uint64_t c) { return (uint32_t)(c >> 32); }
static uint32_t idgen_cursor_taken(uint64_t c) { return (uint32_t)c; }

/* Read the block of generation `gen`.  Returns 1 and fills *b (leased_ms
 * holds the expiry instead), or 0 when the slot holds another generation or
 * is being rewritten.  Seqlock without fences: the writer clears gen, then
 * stores the bounds with release; if we read any bound of a newer write, its
 * earlier clearing of gen is visible to our second load of gen. */
static int idgen_slot_read(struct idgen_ns *ns, uint32_t gen, struct idgen_span *b) {
    struct idgen_slot *s = &ns->ring[gen % IDGEN_RING];
    if (atomic_load_explicit(&s->gen, memory_order_acquire) != gen) return 0;
    b->lo = atomic_load_explicit(&s->lo, memory_order_acquire);
    b->hi = atomic_load_explicit(&s->hi, memory_order_acquire);
    b->leased_ms = atomic_load_explicit(&s->expires_ms, memory_order_acquire);
    return atomic_load_explicit(&s->gen, memory_order_relaxed) == gen;
}

/* Publish *b as the next generation and point the cursor at it, with no id
 * of it claimed.  Called with the mutex held.  The slot is written before
 * the cursor (release), so a reader whose fetch_add (acquire) returns the new
 * generation finds the slot filled. */
static void idgen_install(struct idgen_ns *ns, const struct idgen_span *b) {
    uint32_t gen = ns->gen + 1;
    if (gen == 0) gen = 1; /* 0 means "no block"; 2^32 leases from now */
    struct idgen_slot *s = &ns->ring[gen % IDGEN_RING];
    atomic_store_explicit(&s->gen, 0, memory_order_relaxed);
    atomic_store_explicit(&s->lo, b->lo, memory_order_release);
    atomic_store_explicit(&s->hi, b->hi, memory_order_release);
    atomic_store_explicit(&s->expires_ms, b->leased_ms + ns->max_age_ms, memory_order_release);
    atomic_store_explicit(&s->gen, gen, memory_order_release);
    ns->gen = gen;
    ns->cur = *b;
    atomic_store_explicit(&ns->cursor, (uint64_t)gen << 32, memory_order_release);
}

/* ============================================================================
 * Leasing and sizing (mutex held)
 * ========================================================================= */

/* Ask Redis for `want` numbers and turn the answer into a span above every
 * id leased before.  An answer that is malformed or lies wholly at or below
 * `floor` (Redis lost its high-water mark and its clock went back) counts as
 * a failure: better a 503 than an id this instance may already have given. */
static int idgen_lease(struct idgen_ns *ns, uint32_t want, struct idgen_span *out) {
    struct idgen_block_lease l;
    int rc = ns->ops.lease(ns->ops.ctx, ns->name, want, ns->floor, ns->floor_soft, &l);
    int64_t now = ns->ops.now_ms(ns->ops.ctx);
    if (rc != 0) goto fail;
    rc = -1;
    if (l.first > l.last || l.second > IDGEN_SECOND_MAX) goto fail;
    uint64_t lo = idgen_pack(l.second, l.first);
    uint64_t hi = idgen_pack(l.second, l.last);
    if (hi <= ns->floor) goto fail;
    if (lo <= ns->floor) lo = ns->floor + 1; /* also keeps id 0 out: floor starts at 0 */
    ns->floor = hi;
    ns->floor_soft = 0;
    out->lo = lo;
    out->hi = hi;
    out->leased_ms = now;
    atomic_fetch_add_explicit(&ns->leases, 1, memory_order_relaxed);
    return 0;
fail:
    atomic_fetch_add_explicit(&ns->lease_failures, 1, memory_order_release);
    return rc;
}

/* Size the next lease to demand, once per block, from how the installed
 * block fared: used up within IDGEN_GROW_MS (or 75% of it within 3/4 of
 * that, seen at the prefetch mark) means demand outruns the block, so double
 * (from the block's own size when a big request made it bigger than
 * next_size: that is the demand just seen); gone stale with more than half
 * unused means the block is too big for the demand, so halve.  Bounded to
 * [IDGEN_BLOCK_MIN, IDGEN_BLOCK_MAX].  Doubling keeps the leases per second
 * of a busy namespace at about ten; halving keeps an idle namespace from
 * throwing away large blocks every second. */
static void idgen_adapt(struct idgen_ns *ns, uint32_t taken, int64_t now, int at_mark) {
    if (ns->gen == 0 || ns->adapted_gen == ns->gen) return;
    ns->adapted_gen = ns->gen;
    uint64_t size = ns->cur.hi - ns->cur.lo + 1;
    uint64_t used = taken < size ? taken : size;
    int64_t age = now - ns->cur.leased_ms;
    int grow = at_mark ? age < IDGEN_GROW_MS * 3 / 4 : (used >= size && age < IDGEN_GROW_MS);
    int shrink = !at_mark && age > ns->max_age_ms && used * 2 < size;
    if (grow) {
        uint64_t base = size > ns->next_size ? size : ns->next_size;
        ns->next_size = base < IDGEN_BLOCK_MAX / 2 ? (uint32_t)base * 2 : IDGEN_BLOCK_MAX;
    } else if (shrink && ns->next_size > IDGEN_BLOCK_MIN) {
        ns->next_size /= 2;
    }
}

/* ============================================================================
 * Hand-out
 * ========================================================================= */

/* The slow path: the block of generation `seen` gave this request fewer ids
 * than it needs.  Returns 0 when a usable block is (or may now be) installed
 * and the caller should retry the fast path, -1 when leasing failed.  See the
 * comment at the top for why waiters give up when a lease failed while they
 * waited. */
static int idgen_refill(struct idgen_ns *ns, uint32_t needed, uint32_t seen) {
    uint64_t fails_seen = atomic_load_explicit(&ns->lease_failures, memory_order_acquire);
    int rc = 0;
    pthread_mutex_lock(&ns->lock);
    if (ns->gen != seen) goto out; /* someone installed a block since we looked: retry */
    if (atomic_load_explicit(&ns->lease_failures, memory_order_relaxed) != fails_seen) {
        rc = -1;
        goto out;
    }
    int64_t now = ns->ops.now_ms(ns->ops.ctx);
    idgen_adapt(ns, idgen_cursor_taken(atomic_load_explicit(&ns->cursor, memory_order_relaxed)),
                now, 0);
    if (ns->has_pending) {
        ns->has_pending = 0;
        if (now - ns->pending.leased_ms <= ns->max_age_ms) {
            idgen_install(ns, &ns->pending);
            goto out;
        }
        /* stale before it was needed: dropped unused */
    }
    struct idgen_span b;
    uint32_t want = ns->next_size > needed ? ns->next_size : needed;
    rc = idgen_lease(ns, want, &b);
    if (rc != 0) goto out;
    idgen_install(ns, &b);
out:
    pthread_mutex_unlock(&ns->lock);
    return rc;
}

/* Lease the block after generation `gen` ahead of need, if the mutex is free
 * and nothing is prefetched yet (see the top of the file).  A failure is
 * counted like any other, so requests already queued for the mutex fail fast
 * instead of each trying Redis again; the current block keeps serving. */
static void idgen_prefetch(struct idgen_ns *ns, uint32_t gen) {
    if (pthread_mutex_trylock(&ns->lock) != 0) return;
    if (ns->gen == gen && !ns->has_pending) {
        int64_t now = ns->ops.now_ms(ns->ops.ctx);
        idgen_adapt(ns, idgen_cursor_taken(atomic_load_explicit(&ns->cursor, memory_order_relaxed)),
                    now, 1);
        if (idgen_lease(ns, ns->next_size, &ns->pending) == 0) ns->has_pending = 1;
    }
    pthread_mutex_unlock(&ns->lock);
}

/* The fast path: claim up to `want` ids of the current block with one
 * fetch_add.  Returns how many were written to out (0..want); 0 or fewer
 * than want means the block is missing, exhausted or stale, and *seen
 * names its generation for idgen_refill.  The clock is read after the claim,
 * so a thread descheduled in between cannot hand out ids of a block that
 * went stale meanwhile. */
static uint32_t idgen_take(struct idgen_ns *ns, uint32_t want, uint64_t *out, uint32_t *seen) {
    uint64_t c = atomic_load_explicit(&ns->cursor, memory_order_relaxed);
    *seen = idgen_cursor_gen(c);
    if (*seen == 0 || idgen_cursor_taken(c) >= IDGEN_TAKEN_GUARD) return 0;
    c = atomic_fetch_add_explicit(&ns->cursor, want, memory_order_acquire);
    uint32_t gen = idgen_cursor_gen(c);
    uint32_t taken = idgen_cursor_taken(c);
    *seen = gen;
    struct idgen_span b;
    if (!idgen_slot_read(ns, gen, &b)) return 0;
    uint64_t size = b.hi - b.lo + 1;
    if (taken >= size || ns->ops.now_ms(ns->ops.ctx) > b.leased_ms /* expiry */) return 0;
    uint32_t k = size - taken < want ? (uint32_t)(size - taken) : want;
    uint64_t id = b.lo + taken;
    for (uint32_t i = 0; i < k; i++) out[i] = id + i;
    uint64_t mark = size - size / 4;
    if (taken < mark && taken + k >= mark) idgen_prefetch(ns, gen);
    return k;
}

/* Fast path until the ids are all there or it comes up short, then the
 * slow path, and again: a request may span blocks (the tail of one, the head
 * of the next), and its ids still increase because later blocks are greater. */
int idgen_next(struct idgen_ns *ns, uint32_t n, uint64_t *out_ids) {
    if (n == 0 || n > IDGEN_MAX_COUNT) return -1;
    uint32_t got = 0;
    while (got < n) {
        uint32_t seen;
        got += idgen_take(ns, n - got, out_ids + got, &seen);
        int rc = got < n ? idgen_refill(ns, n - got, seen) : 0;
        if (rc != 0) return rc;
    }
    return 0;
}

int idgen_try_next(struct idgen_ns *ns, uint32_t n, uint64_t *out_ids) {
    if (n == 0 || n > IDGEN_MAX_COUNT) return -1;
    uint32_t seen;
    return idgen_take(ns, n, out_ids, &seen) == n ? 0 : IDGEN_WOULD_LEASE;
}

/* ============================================================================
 * Lifecycle
 * ========================================================================= */

int idgen_ns_init(struct idgen_ns *ns, const char *name, const struct idgen_ops *ops,
                  int64_t max_age_ms) {
    size_t len = name ? strlen(name) : 0;
    if (len == 0 || len > IDGEN_NAME_MAX || ops == NULL || ops->now_ms == NULL ||
        ops->lease == NULL)
        return -1;
    memset(ns, 0, sizeof *ns);
    if (pthread_mutex_init(&ns->lock, NULL) != 0) return -1;
    atomic_init(&ns->cursor, 0);
    for (int i = 0; i < IDGEN_RING; i++) {
        atomic_init(&ns->ring[i].gen, 0);
        atomic_init(&ns->ring[i].lo, 0);
        atomic_init(&ns->ring[i].hi, 0);
        atomic_init(&ns->ring[i].expires_ms, 0);
    }
    atomic_init(&ns->leases, 0);
    atomic_init(&ns->lease_failures, 0);
    ns->next_size = IDGEN_BLOCK_MIN;
    ns->ops = *ops;
    ns->max_age_ms = max_age_ms > 0 ? max_age_ms : IDGEN_DEFAULT_MAX_AGE_MS;
    memcpy(ns->name, name, len + 1);
    return 0;
}

uint64_t idgen_floor(const struct idgen_ns *ns) { return ns->floor; }
void idgen_set_floor(struct idgen_ns *ns, uint64_t floor, int soft) {
    ns->floor = floor;
    ns->floor_soft = soft;
}

void idgen_ns_free(struct idgen_ns *ns) { pthread_mutex_destroy(&ns->lock); }
