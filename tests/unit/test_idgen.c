/* test_idgen.c -- the id layout and the block hand-out, with a fake clock and
 * a fake lease that keeps its high-water mark in memory exactly as
 * lua/id_lease.lua keeps it in Redis. */
#include "idgen/idgen.h"
#include "idgen/idtable.h"
#include "tests/check.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <time.h>

/* ============================================================================
 * The fake world: a gateway clock, a Redis clock, and the Lua script in C
 * ========================================================================= */

struct fake {
    pthread_mutex_t mu;     /* guards everything but the clock */
    _Atomic int64_t now_ms; /* the gateway's monotonic clock */
    _Atomic int64_t ticks;  /* tick mode: each now_ms() call adds one */
    int64_t tick_div;       /* >0: now_ms = ticks / tick_div (tick mode) */
    int64_t redis_sec;      /* Redis TIME - epoch, when not derived */
    int redis_from_clock;   /* 1: Redis second = redis_sec + now / 1000 */
    int has_mark;           /* the high-water mark exists */
    uint32_t mark_sec;      /* last second granted */
    uint32_t mark_seq;      /* last sequence granted */
    int fail;               /* 1: every lease fails */
    unsigned fail_every;    /* >0: every n-th lease fails */
    unsigned calls;         /* lease calls, failed ones included */
    unsigned leases;        /* successful leases */
    unsigned refused;       /* leases refused below the floor */
    uint32_t wants[4096];   /* want of each successful lease */
    _Atomic int in_lease;   /* 1 while a lease runs: checks mutual exclusion */
    _Atomic int overlap;    /* set when two leases ran at once */
    uint64_t (*granted)[2]; /* every granted block as an id range [lo, hi] */
    size_t ngranted;        /* entries used in granted */
    size_t capgranted;      /* entries allocated in granted */
};

static int64_t fake_clock(struct fake *f) {
    if (f->tick_div > 0) return atomic_fetch_add(&f->ticks, 1) / f->tick_div;
    return atomic_load(&f->now_ms);
}

static int64_t fake_now_ms(void *ctx) { return fake_clock(ctx); }

static void fake_advance(struct fake *f, int64_t ms) { atomic_fetch_add(&f->now_ms, ms); }

/* lua/id_lease.lua's rules for the mark and the floor (not the era and its
 * jump, which need Redis's run_id and clock: tests/integration/test_idloss.c,
 * and not a shared floor: tb_lease below). */
static int fake_lease(void *ctx, const char *ns, uint32_t want, uint64_t floor, int soft,
                      struct idgen_block_lease *out) {
    struct fake *f = ctx;
    (void)ns;
    if (atomic_exchange(&f->in_lease, 1)) atomic_store(&f->overlap, 1);
    pthread_mutex_lock(&f->mu);
    f->calls++;
    int rc = -1;
    if (f->fail || (f->fail_every && f->calls % f->fail_every == 0) || want < 1 ||
        want > IDGEN_BLOCK_MAX)
        goto out;
    int64_t now = f->redis_sec + (f->redis_from_clock ? fake_clock(f) / 1000 : 0);
    uint64_t sec, first;
    if (!f->has_mark || now > f->mark_sec) {
        sec = (uint64_t)now;
        first = 0;
    } else if (f->mark_seq == UINT32_MAX) {
        sec = (uint64_t)f->mark_sec + 1;
        first = 0;
    } else {
        sec = f->mark_sec;
        first = (uint64_t)f->mark_seq + 1;
    }
    if (idgen_pack((uint32_t)sec, (uint32_t)first) <= floor) {
        f->refused++;
        rc = IDGEN_BEHIND; /* written nothing */
        goto out;
    }
    uint64_t last = first + want - 1;
    if (last > UINT32_MAX) last = UINT32_MAX;
    f->has_mark = 1;
    f->mark_sec = (uint32_t)sec;
    f->mark_seq = (uint32_t)last;
    out->second = (uint32_t)sec;
    out->first = (uint32_t)first;
    out->last = (uint32_t)last;
    if (f->leases < sizeof f->wants / sizeof f->wants[0]) f->wants[f->leases] = want;
    f->leases++;
    if (f->ngranted == f->capgranted) {
        f->capgranted = f->capgranted ? 2 * f->capgranted : 256;
        f->granted = realloc(f->granted, f->capgranted * sizeof *f->granted);
        if (!f->granted) abort();
    }
    f->granted[f->ngranted][0] = idgen_pack(out->second, out->first);
    f->granted[f->ngranted][1] = idgen_pack(out->second, out->last);
    f->ngranted++;
    rc = 0;
out:
    pthread_mutex_unlock(&f->mu);
    atomic_store(&f->in_lease, 0);
    return rc;
}

static void fake_init(struct fake *f, struct idgen_ns *ns, int64_t max_age_ms) {
    memset(f, 0, sizeof *f);
    pthread_mutex_init(&f->mu, NULL);
    f->redis_sec = 1000;
    struct idgen_ops ops = {.now_ms = fake_now_ms, .lease = fake_lease, .ctx = f};
    CHECK_EQ_INT(idgen_ns_init(ns, "orders", &ops, max_age_ms), 0);
}

static void fake_free(struct fake *f, struct idgen_ns *ns) {
    idgen_ns_free(ns);
    pthread_mutex_destroy(&f->mu);
    free(f->granted);
}

/* Was `id` inside a block the fake Redis granted?  Grants increase while
 * the mark is kept, so a binary search finds the one that could hold it. */
static int fake_granted(const struct fake *f, uint64_t id) {
    size_t lo = 0, hi = f->ngranted;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (f->granted[mid][1] < id)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < f->ngranted && f->granted[lo][0] <= id && id <= f->granted[lo][1];
}

static uint32_t id_sec(uint64_t id) { return (uint32_t)(id >> 32); }
static uint32_t id_seq(uint64_t id) { return (uint32_t)id; }

/* ============================================================================
 * Layout helpers
 * ========================================================================= */

static void test_pack_unpack(void) {
    CHECK(idgen_pack(0, 1) == 1);
    CHECK(idgen_pack(1, 0) == (UINT64_C(1) << 32));
    CHECK(idgen_pack(1, 42) == ((UINT64_C(1) << 32) | 42));
    CHECK(idgen_pack(IDGEN_SECOND_MAX, UINT32_MAX) == (uint64_t)INT64_MAX);
    CHECK((idgen_pack(UINT32_MAX, UINT32_MAX) >> 63) == 0); /* bit 63 stays 0 */

    struct idgen_decoded d;
    uint64_t id = idgen_pack(63158400, 42); /* 2026-01-01 */
    CHECK_EQ_INT(idgen_unpack(id, IDGEN_DEFAULT_EPOCH, &d), 0);
    CHECK_EQ_INT(d.unix_seconds, 1767225600);
    CHECK_EQ_INT(d.seq, 42);
    CHECK_EQ_INT(idgen_unpack((uint64_t)INT64_MAX, 0, &d), 0);
    CHECK_EQ_INT(d.unix_seconds, IDGEN_SECOND_MAX);
    CHECK(d.seq == UINT32_MAX);
    CHECK_EQ_INT(idgen_unpack(1, 100, &d), 0);
    CHECK_EQ_INT(d.unix_seconds, 100);
    CHECK_EQ_INT(d.seq, 1);

    d.seq = 7;
    CHECK_EQ_INT(idgen_unpack(0, 0, &d), -1);
    CHECK_EQ_INT(idgen_unpack((uint64_t)INT64_MAX + 1, 0, &d), -1);
    CHECK_EQ_INT(idgen_unpack(UINT64_MAX, 0, &d), -1);
    CHECK_EQ_INT(d.seq, 7); /* untouched on error */

    for (uint32_t s = 0; s < 2000000000u; s += 99991) {
        uint32_t q = s * 2654435761u;
        CHECK_EQ_INT(idgen_unpack(idgen_pack(s, q), IDGEN_DEFAULT_EPOCH, &d), q || s ? 0 : -1);
        if (q || s) {
            CHECK_EQ_INT(d.unix_seconds, IDGEN_DEFAULT_EPOCH + (int64_t)s);
            CHECK(d.seq == q);
        }
    }
}

static int parse(const char *s, uint64_t *v) { return idgen_parse_decimal(s, strlen(s), v); }

static void test_parse_decimal(void) {
    uint64_t v = 99;
    CHECK_EQ_INT(parse("1", &v), 0);
    CHECK(v == 1);
    CHECK_EQ_INT(parse("7433226813092249601", &v), 0);
    CHECK(v == UINT64_C(7433226813092249601));
    CHECK_EQ_INT(parse("9223372036854775807", &v), 0);
    CHECK(v == (uint64_t)INT64_MAX);

    v = 99;
    CHECK_EQ_INT(parse("0", &v), -1);
    CHECK_EQ_INT(parse("9223372036854775808", &v), -1);  /* INT64_MAX + 1 */
    CHECK_EQ_INT(parse("9999999999999999999", &v), -1);  /* 19 digits, too big */
    CHECK_EQ_INT(parse("18446744073709551615", &v), -1); /* 20 digits */
    CHECK_EQ_INT(parse("18446744073709551616", &v), -1); /* 2^64 */
    CHECK_EQ_INT(parse("10000000000000000000", &v), -1);
    CHECK_EQ_INT(parse("00000000000000000001", &v), -1);
    CHECK_EQ_INT(parse("01", &v), -1); /* leading zero */
    CHECK_EQ_INT(parse("", &v), -1);
    CHECK_EQ_INT(parse("+1", &v), -1);
    CHECK_EQ_INT(parse("-1", &v), -1);
    CHECK_EQ_INT(parse(" 1", &v), -1);
    CHECK_EQ_INT(parse("1 ", &v), -1);
    CHECK_EQ_INT(parse("12a", &v), -1);
    CHECK_EQ_INT(parse("1/", &v), -1);
    CHECK_EQ_INT(parse("1:", &v), -1);
    CHECK_EQ_INT(parse("0x10", &v), -1);
    CHECK_EQ_INT(idgen_parse_decimal("12\0"
                                     "3",
                                     4, &v),
                 -1); /* NUL inside */
    CHECK_EQ_INT(idgen_parse_decimal(NULL, 0, &v), -1);
    CHECK(v == 99); /* untouched on error */

    CHECK_EQ_INT(idgen_parse_decimal("1234", 2, &v), 0); /* length, not NUL */
    CHECK(v == 12);
}

static void test_format(void) {
    char buf[IDGEN_DEC_MAX];
    CHECK_EQ_INT(idgen_format(0, buf), 1);
    CHECK_EQ_STR(buf, "0");
    CHECK_EQ_INT(idgen_format(9, buf), 1);
    CHECK_EQ_STR(buf, "9");
    CHECK_EQ_INT(idgen_format(10, buf), 2);
    CHECK_EQ_STR(buf, "10");
    CHECK_EQ_INT(idgen_format(100, buf), 3);
    CHECK_EQ_STR(buf, "100");
    CHECK_EQ_INT(idgen_format((uint64_t)INT64_MAX, buf), 19);
    CHECK_EQ_STR(buf, "9223372036854775807");
    CHECK_EQ_INT(idgen_format(UINT64_MAX, buf), 20);
    CHECK_EQ_STR(buf, "18446744073709551615");

    /* every length, and a spread of values, against printf; and back */
    uint64_t x = 1;
    for (int i = 0; i < 200000; i++) {
        char want[32];
        x = x * 6364136223846793005u + 1442695040888963407u;
        uint64_t v = x >> (i % 64);
        snprintf(want, sizeof want, "%" PRIu64, v);
        size_t n = idgen_format(v, buf);
        if (n != strlen(want) || strcmp(buf, want) != 0) {
            CHECK_EQ_STR(buf, want);
            break;
        }
        uint64_t back;
        if (v >= 1 && v <= (uint64_t)INT64_MAX &&
            (idgen_parse_decimal(buf, n, &back) != 0 || back != v)) {
            CHECK(!"parse(format(v)) != v");
            break;
        }
    }
}

static void test_format_time(void) {
    char out[IDGEN_TIME_MAX];
    CHECK_EQ_INT(idgen_format_time(1767225600, out), 0);
    CHECK_EQ_STR(out, "2026-01-01T00:00:00Z");
    CHECK_EQ_INT(idgen_format_time(IDGEN_DEFAULT_EPOCH, out), 0);
    CHECK_EQ_STR(out, "2024-01-01T00:00:00Z");
    CHECK_EQ_INT(idgen_format_time(0, out), 0);
    CHECK_EQ_STR(out, "1970-01-01T00:00:00Z");
    CHECK_EQ_INT(idgen_format_time(951825845, out), 0); /* a leap day */
    CHECK_EQ_STR(out, "2000-02-29T12:04:05Z");
    CHECK_EQ_INT(idgen_format_time(1709251199, out), 0);
    CHECK_EQ_STR(out, "2024-02-29T23:59:59Z");
    /* the last second an id can hold */
    CHECK_EQ_INT(idgen_format_time(IDGEN_DEFAULT_EPOCH + IDGEN_SECOND_MAX, out), 0);
    CHECK_EQ_STR(out, "2092-01-19T03:14:07Z");
    CHECK_EQ_INT(idgen_format_time(253402300799, out), 0);
    CHECK_EQ_STR(out, "9999-12-31T23:59:59Z");
    strcpy(out, "untouched");
    CHECK_EQ_INT(idgen_format_time(253402300800, out), -1); /* year 10000 */
    CHECK_EQ_INT(idgen_format_time(INT64_MAX, out), -1);
    CHECK_EQ_STR(out, "untouched");
}

/* ============================================================================
 * Block hand-out, one thread
 * ========================================================================= */

static void test_init_and_bounds(void) {
    struct idgen_ns ns;
    struct fake f;
    struct idgen_ops ops = {.now_ms = fake_now_ms, .lease = fake_lease, .ctx = &f};
    struct idgen_ops no_lease = {.now_ms = fake_now_ms, .ctx = &f};
    char longname[IDGEN_NAME_MAX + 2];
    memset(longname, 'a', sizeof longname - 1);
    longname[sizeof longname - 1] = '\0';
    CHECK_EQ_INT(idgen_ns_init(&ns, "", &ops, 0), -1);
    CHECK_EQ_INT(idgen_ns_init(&ns, longname, &ops, 0), -1);
    CHECK_EQ_INT(idgen_ns_init(&ns, "x", &no_lease, 0), -1);
    CHECK_EQ_INT(idgen_ns_init(&ns, "x", NULL, 0), -1);
    longname[IDGEN_NAME_MAX] = '\0';
    CHECK_EQ_INT(idgen_ns_init(&ns, longname, &ops, 0), 0);
    CHECK_EQ_INT(ns.max_age_ms, IDGEN_DEFAULT_MAX_AGE_MS);
    idgen_ns_free(&ns);

    fake_init(&f, &ns, 0);
    static uint64_t ids[IDGEN_MAX_COUNT + 1];
    CHECK_EQ_INT(idgen_next(&ns, 0, ids), -1);
    CHECK_EQ_INT(idgen_next(&ns, IDGEN_MAX_COUNT + 1, ids), -1);
    CHECK_EQ_INT(f.calls, 0); /* nothing leased until asked */

    /* the first request gets at least what it needs in one lease */
    CHECK_EQ_INT(idgen_next(&ns, IDGEN_MAX_COUNT, ids), 0);
    CHECK_EQ_INT(f.wants[0], IDGEN_MAX_COUNT);
    CHECK_EQ_INT(id_sec(ids[0]), 1000);
    CHECK_EQ_INT(id_seq(ids[0]), 0);
    for (int i = 1; i < IDGEN_MAX_COUNT; i++)
        if (ids[i] != ids[i - 1] + 1) {
            CHECK(!"one lease, consecutive ids");
            break;
        }
    fake_free(&f, &ns);
}

static void test_increasing_many_blocks(void) {
    struct idgen_ns ns;
    struct fake f;
    fake_init(&f, &ns, 0);
    f.redis_from_clock = 1;
    uint64_t ids[64], prev = 0;
    unsigned r = 1;
    long total = 0;
    for (int i = 0; i < 20000; i++) {
        r = r * 1103515245u + 12345u;
        uint32_t n = 1 + (r >> 16) % 50;
        if ((r >> 8) % 4 == 0) fake_advance(&f, (r >> 4) % 40);
        CHECK_EQ_INT(idgen_next(&ns, n, ids), 0);
        int64_t redis_now = f.redis_sec + atomic_load(&f.now_ms) / 1000;
        for (uint32_t k = 0; k < n; k++) {
            if (ids[k] <= prev) {
                CHECK(!"ids strictly increasing");
                i = 20000;
                break;
            }
            if (!fake_granted(&f, ids[k])) {
                CHECK(!"every id lies in a block Redis granted");
                i = 20000;
                break;
            }
            /* fresh: the id's second is Redis's second, or the one before */
            if (id_sec(ids[k]) > redis_now || id_sec(ids[k]) + 1 < redis_now) {
                CHECK(!"id's second within a second of Redis's clock");
                i = 20000;
                break;
            }
            prev = ids[k];
        }
        total += n;
    }
    CHECK(total > 400000);
    CHECK(f.leases > 100); /* many blocks were crossed */
    CHECK(!atomic_load(&f.overlap));
    fake_free(&f, &ns);
}

static void test_span_two_blocks(void) {
    struct idgen_ns ns;
    struct fake f;
    fake_init(&f, &ns, 0);
    uint64_t ids[10];
    CHECK_EQ_INT(idgen_next(&ns, 10, ids), 0); /* block 0..15 */
    CHECK_EQ_INT(id_seq(ids[0]), 0);
    CHECK_EQ_INT(id_seq(ids[9]), 9);
    CHECK_EQ_INT(f.leases, 1);
    CHECK_EQ_INT(idgen_next(&ns, 10, ids), 0); /* 10..15, then 16..19 */
    for (int i = 0; i < 10; i++) {
        CHECK_EQ_INT(id_sec(ids[i]), 1000);
        CHECK_EQ_INT(id_seq(ids[i]), 10 + i);
    }
    /* the second block was prefetched when the first crossed 75%, and the
     * clock stood still, so it was asked twice as big */
    CHECK_EQ_INT(f.leases, 2);
    CHECK_EQ_INT(f.wants[1], 32);

    /* the same across a second boundary: the block 16..47 crosses 75% while
     * Redis is in second 1001, so the next one is 1001:0..63 */
    uint64_t more[20];
    f.redis_sec = 1001;
    CHECK_EQ_INT(idgen_next(&ns, 20, more), 0); /* 20..39 of second 1000 */
    CHECK_EQ_INT(id_seq(more[19]), 39);
    CHECK_EQ_INT(f.leases, 3);
    CHECK_EQ_INT(idgen_next(&ns, 10, ids), 0); /* 40..47, then 1001:0..1 */
    CHECK_EQ_INT(id_sec(ids[0]), 1000);
    CHECK_EQ_INT(id_seq(ids[0]), 40);
    CHECK_EQ_INT(id_seq(ids[7]), 47);
    CHECK_EQ_INT(id_sec(ids[8]), 1001);
    CHECK_EQ_INT(id_seq(ids[8]), 0);
    CHECK_EQ_INT(id_seq(ids[9]), 1);
    CHECK_EQ_INT(f.leases, 3);
    for (int i = 1; i < 10; i++) CHECK(ids[i] > ids[i - 1]);
    fake_free(&f, &ns);
}

static void test_freshness(void) {
    struct idgen_ns ns;
    struct fake f;
    fake_init(&f, &ns, 0);
    uint64_t id;
    CHECK_EQ_INT(idgen_next(&ns, 1, &id), 0); /* block 0..15 at t=0 */
    CHECK_EQ_INT(id_seq(id), 0);
    fake_advance(&f, 1000); /* exactly max_age: still fresh */
    CHECK_EQ_INT(idgen_next(&ns, 1, &id), 0);
    CHECK_EQ_INT(id_seq(id), 1);
    CHECK_EQ_INT(f.leases, 1);
    fake_advance(&f, 1); /* stale: 2..15 dropped */
    CHECK_EQ_INT(idgen_next(&ns, 1, &id), 0);
    CHECK_EQ_INT(f.leases, 2);
    CHECK_EQ_INT(id_sec(id), 1000);
    CHECK_EQ_INT(id_seq(id), 16);
    CHECK_EQ_INT(f.wants[1], 16); /* idle: not grown */

    /* a prefetched block goes stale too, and is dropped unused */
    uint64_t ids[16];
    CHECK_EQ_INT(idgen_next(&ns, 12, ids), 0); /* 17..28, crosses 75%: prefetch 32..63 */
    CHECK_EQ_INT(f.leases, 3);
    fake_advance(&f, 1001);
    CHECK_EQ_INT(idgen_next(&ns, 1, &id), 0); /* both stale: a new lease */
    CHECK_EQ_INT(f.leases, 4);
    CHECK_EQ_INT(id_seq(id), 64);
    fake_free(&f, &ns);
}

static void test_block_size_adapts(void) {
    struct idgen_ns ns;
    struct fake f;
    fake_init(&f, &ns, 0);
    static uint64_t ids[IDGEN_MAX_COUNT];

    /* demand: the clock stands still, so every block runs out at once */
    for (int i = 0; i < 3000; i++) CHECK_EQ_INT(idgen_next(&ns, 1, ids), 0);
    CHECK_EQ_INT(f.wants[0], 16);
    for (unsigned i = 1; i < f.leases; i++) CHECK_EQ_INT(f.wants[i], 2 * f.wants[i - 1]);
    CHECK(f.wants[f.leases - 1] >= 1024);
    for (int i = 0; i < 600; i++) CHECK_EQ_INT(idgen_next(&ns, IDGEN_MAX_COUNT, ids), 0);
    CHECK_EQ_INT(f.wants[f.leases - 1], IDGEN_BLOCK_MAX); /* capped */
    for (unsigned i = 0; i < f.leases; i++) CHECK(f.wants[i] <= IDGEN_BLOCK_MAX);

    /* idle: one id per 1.5 s, every block goes stale nearly unused */
    unsigned before = f.leases;
    for (int i = 0; i < 25; i++) {
        fake_advance(&f, 1500);
        CHECK_EQ_INT(idgen_next(&ns, 1, ids), 0);
    }
    CHECK_EQ_INT(f.leases, before + 25);
    CHECK(f.wants[before] <= IDGEN_BLOCK_MAX);
    for (unsigned i = before + 1; i < f.leases; i++)
        CHECK(f.wants[i] == f.wants[i - 1] / 2 || f.wants[i] == IDGEN_BLOCK_MIN);
    CHECK_EQ_INT(f.wants[f.leases - 1], IDGEN_BLOCK_MIN);

    /* steady: a 16-id block used up in 150 ms keeps its size */
    before = f.leases;
    for (int i = 0; i < 160; i++) {
        fake_advance(&f, 10);
        CHECK_EQ_INT(idgen_next(&ns, 1, ids), 0);
    }
    for (unsigned i = before; i < f.leases; i++) CHECK_EQ_INT(f.wants[i], IDGEN_BLOCK_MIN);

    /* a request bigger than the lease size still gets one lease for it, and
     * big requests in quick succession grow blocks from their size: the
     * prefetched block is twice the one they used up, not twice 16 */
    fake_advance(&f, 2000);
    before = f.leases;
    CHECK_EQ_INT(idgen_next(&ns, 5000, ids), 0);
    CHECK_EQ_INT(f.wants[before], 5000);
    CHECK_EQ_INT(ids[4999] - ids[0], 4999);
    CHECK_EQ_INT(f.leases, before + 2); /* crossed 75%: prefetched */
    CHECK_EQ_INT(f.wants[before + 1], 10000);
    CHECK_EQ_INT(idgen_next(&ns, 5000, ids), 0); /* from the prefetched block */
    CHECK_EQ_INT(f.leases, before + 2);
    fake_free(&f, &ns);
}

static void test_lease_failure(void) {
    struct idgen_ns ns;
    struct fake f;
    fake_init(&f, &ns, 0);
    uint64_t ids[16], prev;

    /* Redis never reached: nothing to serve */
    f.fail = 1;
    CHECK_EQ_INT(idgen_next(&ns, 1, ids), -1);
    CHECK_EQ_INT(atomic_load(&ns.lease_failures), 1);
    f.fail = 0;

    CHECK_EQ_INT(idgen_next(&ns, 1, ids), 0);  /* block 0..15 */
    f.fail = 1;                                /* Redis goes down */
    CHECK_EQ_INT(idgen_next(&ns, 10, ids), 0); /* 1..10 */
    CHECK_EQ_INT(idgen_next(&ns, 2, ids), 0);  /* 11, 12: prefetch fails, still served */
    CHECK_EQ_INT(id_seq(ids[1]), 12);
    CHECK_EQ_INT(atomic_load(&ns.lease_failures), 2);
    fake_advance(&f, 900);
    CHECK_EQ_INT(idgen_next(&ns, 3, ids), 0); /* 13..15, block still fresh */
    CHECK_EQ_INT(id_seq(ids[2]), 15);
    prev = ids[2];
    CHECK_EQ_INT(idgen_next(&ns, 1, ids), -1); /* exhausted, cannot lease */
    CHECK_EQ_INT(idgen_next(&ns, 1, ids), -1);
    f.fail = 0; /* Redis is back */
    CHECK_EQ_INT(idgen_next(&ns, 1, ids), 0);
    CHECK(ids[0] > prev);
    prev = ids[0];

    /* a stale block with ids left is not served while Redis is down */
    f.fail = 1;
    fake_advance(&f, 999);
    CHECK_EQ_INT(idgen_next(&ns, 1, ids), 0); /* fresh: served */
    CHECK(ids[0] > prev);
    prev = ids[0];
    fake_advance(&f, 2);
    CHECK_EQ_INT(idgen_next(&ns, 1, ids), -1); /* stale: 503 */
    f.fail = 0;
    CHECK_EQ_INT(idgen_next(&ns, 1, ids), 0);
    CHECK(ids[0] > prev);
    prev = ids[0];

    /* a request spanning into a block that cannot be leased fails whole */
    f.fail = 1;
    CHECK_EQ_INT(idgen_next(&ns, 16, ids), -1);
    f.fail = 0;
    CHECK_EQ_INT(idgen_next(&ns, 16, ids), 0);
    CHECK(ids[0] > prev);

    fake_free(&f, &ns);
}

static int bad_lease(void *ctx, const char *ns, uint32_t want, uint64_t floor, int soft,
                     struct idgen_block_lease *out) {
    int *mode = ctx;
    (void)ns;
    (void)want;
    out->second = 5;
    out->first = 10;
    out->last = *mode == 0 ? 9 : 20;                     /* 0: first > last */
    if (*mode == 2) out->second = IDGEN_SECOND_MAX + 1u; /* would set bit 63 */
    if (*mode == 3) {
        out->second = 0; /* Redis at the epoch second */
        out->first = 0;
    }
    return 0;
}

static int64_t zero_clock(void *ctx) {
    (void)ctx;
    return 0;
}

static void test_bad_lease_answer(void) {
    int mode = 0;
    struct idgen_ops ops = {.now_ms = zero_clock, .lease = bad_lease, .ctx = &mode};
    struct idgen_ns ns;
    uint64_t id;
    CHECK_EQ_INT(idgen_ns_init(&ns, "bad", &ops, 0), 0);
    CHECK_EQ_INT(idgen_next(&ns, 1, &id), -1);
    mode = 2;
    CHECK_EQ_INT(idgen_next(&ns, 1, &id), -1);
    mode = 3; /* id 0 is not an id */
    CHECK_EQ_INT(idgen_next(&ns, 1, &id), 0);
    CHECK(id == 1);
    CHECK_EQ_INT(idgen_next(&ns, 1, &id), 0);
    CHECK(id == 2);
    idgen_ns_free(&ns);
    CHECK_EQ_INT(idgen_ns_init(&ns, "bad", &ops, 0), 0);
    mode = 1;
    CHECK_EQ_INT(idgen_next(&ns, 1, &id), 0);
    CHECK(id == idgen_pack(5, 10));
    idgen_ns_free(&ns);
}

/* Take n ids, retrying while idgen_next fails; check they go on increasing
 * from *prev.  Returns how many calls failed. */
static int take_retry(struct idgen_ns *ns, uint32_t n, uint64_t *ids, uint64_t *prev, int *ok) {
    int failed = 0;
    while (idgen_next(ns, n, ids) != 0)
        if (++failed > 1000) {
            *ok = 0;
            return failed;
        }
    for (uint32_t k = 0; k < n; k++) {
        if (ids[k] <= *prev) *ok = 0;
        *prev = ids[k];
    }
    return failed;
}

static void test_clock_step_back(void) {
    struct idgen_ns ns;
    struct fake f;
    fake_init(&f, &ns, 0);
    uint64_t ids[40], prev = 0;
    int ok = 1;

    /* Redis's clock steps back an hour: the mark keeps ids going up */
    f.redis_sec = 5000;
    CHECK_EQ_INT(take_retry(&ns, 20, ids, &prev, &ok), 0);
    f.redis_sec = 5000 - 3600;
    fake_advance(&f, 2000); /* force a new lease */
    CHECK_EQ_INT(take_retry(&ns, 20, ids, &prev, &ok), 0);
    CHECK_EQ_INT(id_sec(ids[0]), 5000);
    CHECK_EQ_INT(id_sec(ids[19]), 5000);
    CHECK(ok);

    /* the gateway's clock steps back: blocks look younger, ids stay unique */
    atomic_store(&f.now_ms, 0);
    for (int i = 0; i < 20; i++) CHECK_EQ_INT(take_retry(&ns, 40, ids, &prev, &ok), 0);
    atomic_store(&f.now_ms, 10000);
    CHECK_EQ_INT(take_retry(&ns, 40, ids, &prev, &ok), 0);
    CHECK(ok);

    /* Redis restarted without persistence, in the same second: its answers
     * start at 0 again.  This instance refuses, and the refused leases
     * write nothing (their numbers may be other gateways' lost ones), until
     * Redis's clock reaches a later second. */
    f.has_mark = 0;
    f.redis_sec = 5000;
    fake_advance(&f, 2000);
    unsigned before = f.leases, refused = f.refused;
    for (int i = 0; i < 5; i++) CHECK_EQ_INT(idgen_next(&ns, 1, ids), IDGEN_BEHIND);
    CHECK_EQ_INT(f.leases, before);
    CHECK_EQ_INT(f.refused, refused + 5);
    CHECK(!f.has_mark);
    f.redis_sec = 5001;
    CHECK_EQ_INT(take_retry(&ns, 40, ids, &prev, &ok), 0);
    CHECK_EQ_INT(id_sec(ids[0]), 5001);
    CHECK(ok);
    f.redis_sec = 5000;

    /* ... and with its clock an hour back as well: every answer lies below
     * what this instance gave, so it fails until Redis's clock catches up */
    f.has_mark = 0;
    f.redis_sec = 5000 - 3600;
    fake_advance(&f, 2000);
    for (int i = 0; i < 5; i++) CHECK_EQ_INT(idgen_next(&ns, 1, ids), IDGEN_BEHIND);
    f.redis_sec = 5002;
    CHECK_EQ_INT(take_retry(&ns, 40, ids, &prev, &ok), 0);
    CHECK_EQ_INT(id_sec(ids[0]), 5002);
    CHECK(ok);
    CHECK(!atomic_load(&f.overlap));
    fake_free(&f, &ns);
}

/* A lease that takes its time and then fails, as when Redis is gone and the
 * connection times out. */
static _Atomic int slow_entered;

static int slow_failing_lease(void *ctx, const char *ns, uint32_t want, uint64_t floor, int soft,
                              struct idgen_block_lease *out) {
    atomic_store(&slow_entered, 1);
    struct timespec ts = {0, 300 * 1000 * 1000};
    nanosleep(&ts, NULL);
    return fake_lease(ctx, ns, want, floor, soft, out);
}

static void *coalesce_worker(void *p) {
    uint64_t id;
    return idgen_next(p, 1, &id) == 0 ? (void *)1 : NULL;
}

/* Requests that queue behind a lease which then fails give up with it,
 * rather than each waiting out another Redis timeout in turn.  (Timing:
 * the second thread has 300 ms to reach the mutex while the first leases.) */
static void test_failed_lease_fails_waiters(void) {
    struct idgen_ns ns;
    struct fake f;
    memset(&f, 0, sizeof f);
    pthread_mutex_init(&f.mu, NULL);
    f.redis_sec = 1000;
    f.fail = 1;
    struct idgen_ops ops = {.now_ms = fake_now_ms, .lease = slow_failing_lease, .ctx = &f};
    CHECK_EQ_INT(idgen_ns_init(&ns, "slow", &ops, 0), 0);
    atomic_store(&slow_entered, 0);
    pthread_t a, b;
    void *ra, *rb;
    CHECK_EQ_INT(pthread_create(&a, NULL, coalesce_worker, &ns), 0);
    while (!atomic_load(&slow_entered)) {
        struct timespec ts = {0, 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    CHECK_EQ_INT(pthread_create(&b, NULL, coalesce_worker, &ns), 0);
    pthread_join(a, &ra);
    pthread_join(b, &rb);
    CHECK(ra == NULL);
    CHECK(rb == NULL);
    CHECK_EQ_INT(f.calls, 1); /* the waiter did not try Redis again */

    /* a request that arrives after the failure does try again */
    f.fail = 0;
    uint64_t id;
    CHECK_EQ_INT(idgen_next(&ns, 1, &id), 0);
    CHECK_EQ_INT(f.calls, 2);
    fake_free(&f, &ns);
}

/* ============================================================================
 * Many threads
 * ========================================================================= */

#define MT_THREADS 8
#define MT_IDS     100000

struct mt_arg {
    struct idgen_ns *ns; /* shared namespace */
    uint64_t *ids;       /* this thread's ids, in order received */
    unsigned seed;       /* for the request sizes */
    int failures;        /* idgen_next that returned -1 */
    int order_ok;        /* 0 when this thread saw ids go down */
};

static void *mt_worker(void *p) {
    struct mt_arg *a = p;
    size_t have = 0;
    a->order_ok = 1;
    while (have < MT_IDS) {
        a->seed = a->seed * 1103515245u + 12345u;
        uint32_t n = 1 + (a->seed >> 16) % 50;
        if (n > MT_IDS - have) n = (uint32_t)(MT_IDS - have);
        if (idgen_next(a->ns, n, a->ids + have) != 0) {
            a->failures++;
            continue;
        }
        for (size_t i = have ? have : 1; i < have + n; i++)
            if (a->ids[i] <= a->ids[i - 1]) a->order_ok = 0;
        have += n;
    }
    return NULL;
}

static int cmp_u64(const void *x, const void *y) {
    uint64_t a = *(const uint64_t *)x, b = *(const uint64_t *)y;
    return a < b ? -1 : a > b;
}

/* 8 threads take 100k ids each in requests of 1..50; every id is unique and
 * each thread's ids increase.  Time passes with use (every now_ms call is a
 * tick), blocks live max_age_ms ticks / tick_div, and every fail_every-th
 * lease fails, so the slow path races as well as the fast one. */
static void run_threads(int64_t max_age_ms, int64_t tick_div, unsigned fail_every) {
    struct idgen_ns ns;
    struct fake f;
    fake_init(&f, &ns, max_age_ms);
    f.tick_div = tick_div;
    f.redis_from_clock = 1;
    f.fail_every = fail_every;
    uint64_t *all = malloc(sizeof *all * MT_THREADS * MT_IDS);
    CHECK(all != NULL);
    if (!all) return;
    struct mt_arg args[MT_THREADS];
    pthread_t th[MT_THREADS];
    for (int t = 0; t < MT_THREADS; t++) {
        args[t] = (struct mt_arg){
            .ns = &ns, .ids = all + (size_t)t * MT_IDS, .seed = 7u + (unsigned)t * 7919u};
        CHECK_EQ_INT(pthread_create(&th[t], NULL, mt_worker, &args[t]), 0);
    }
    int failures = 0;
    for (int t = 0; t < MT_THREADS; t++) {
        pthread_join(th[t], NULL);
        CHECK(args[t].order_ok);
        failures += args[t].failures;
    }
    qsort(all, (size_t)MT_THREADS * MT_IDS, sizeof *all, cmp_u64);
    size_t dups = 0;
    for (size_t i = 1; i < (size_t)MT_THREADS * MT_IDS; i++)
        if (all[i] == all[i - 1]) dups++;
    CHECK_EQ_INT(dups, 0);
    size_t outside = 0;
    for (size_t i = 0; i < (size_t)MT_THREADS * MT_IDS; i++)
        if (!fake_granted(&f, all[i])) outside++;
    CHECK_EQ_INT(outside, 0);
    CHECK(all[0] > 0);
    CHECK(all[(size_t)MT_THREADS * MT_IDS - 1] <= (uint64_t)INT64_MAX);
    CHECK(!atomic_load(&f.overlap)); /* one lease at a time per namespace */
    CHECK(f.leases > 10);
    fprintf(stderr, "  threads: %u leases, %u lease calls, %d failed requests\n", f.leases, f.calls,
            failures);
    free(all);
    fake_free(&f, &ns);
}

static void test_threads(void) { run_threads(1000, 16, 7); /* demand: blocks grow large */ }

static void test_threads_churn(void) {
    run_threads(20, 1, 5); /* a block lasts 20 calls: leases all the time */
}

/* ============================================================================
 * The table of live namespaces (idtable): eviction
 * ========================================================================= */

/* A Redis of many namespaces: one mark per name "ns-<k>", kept like
 * id_lease.lua keeps it, so an evicted namespace that comes back continues
 * above its mark. */
#define TB_NAMES 512
struct tb_redis {
    pthread_mutex_t mu;        /* guards the marks */
    uint64_t mark[TB_NAMES];   /* last id granted per namespace, 0: none */
    unsigned leases[TB_NAMES]; /* leases per namespace */
    _Atomic int64_t now_ms;    /* the gateway's clock */
    uint32_t sec;              /* Redis's second */
};

static int tb_index(const char *ns) { return atoi(ns + 3) % TB_NAMES; }

static int64_t tb_now(void *ctx) { return atomic_load(&((struct tb_redis *)ctx)->now_ms); }

static int tb_lease(void *ctx, const char *ns, uint32_t want, uint64_t floor, int soft,
                    struct idgen_block_lease *out) {
    struct tb_redis *r = ctx;
    int k = tb_index(ns);
    pthread_mutex_lock(&r->mu);
    uint64_t m = r->mark[k];
    if (m == 0 || (uint32_t)(m >> 32) < r->sec) {
        out->second = r->sec;
        out->first = 0;
    } else {
        out->second = (uint32_t)(m >> 32);
        out->first = (uint32_t)m + 1; /* tests never use up a second */
    }
    if (idgen_pack(out->second, out->first) <= floor && soft) {
        out->second = (uint32_t)(floor >> 32) + 1; /* past a floor that may be another's */
        out->first = 0;
    } else if (idgen_pack(out->second, out->first) <= floor) {
        /* Below the namespace's own floor, kept from its eviction: refused,
         * written nothing.  The client retries after Retry-After, by when
         * Redis's clock has moved on: modelled by moving it here. */
        r->sec++;
        pthread_mutex_unlock(&r->mu);
        return IDGEN_BEHIND;
    }
    out->last = out->first + want - 1;
    r->mark[k] = idgen_pack(out->second, out->last);
    r->leases[k]++;
    pthread_mutex_unlock(&r->mu);
    return 0;
}

static void tb_init(struct tb_redis *r, struct idtable *t, size_t max) {
    memset(r, 0, sizeof *r);
    pthread_mutex_init(&r->mu, NULL);
    r->sec = 1000;
    struct idgen_ops ops = {.now_ms = tb_now, .lease = tb_lease, .ctx = r};
    CHECK_EQ_INT(idtable_init(t, max, &ops, 1000), 0);
}

/* idgen_next as a client does it: again after a 503 ids_behind. */
static int tb_next(struct idgen_ns *ns, uint32_t n, uint64_t *ids) {
    int rc = -1;
    for (int tries = 0; tries < 100; tries++)
        if ((rc = idgen_next(ns, n, ids)) != IDGEN_BEHIND) break;
    return rc;
}

static uint64_t tb_one(struct idtable *t, const char *name) {
    struct idtable_entry *e = idtable_acquire(t, name);
    CHECK(e != NULL);
    if (!e) return 0;
    CHECK_EQ_STR(e->ns.name, name);
    uint64_t id = 0;
    CHECK_EQ_INT(tb_next(&e->ns, 1, &id), 0);
    idtable_release(e);
    return id;
}

static void test_table_bounds(void) {
    struct tb_redis r;
    struct idtable t;
    struct idgen_ops ops = {.now_ms = tb_now, .lease = tb_lease, .ctx = &r};
    CHECK_EQ_INT(idtable_init(&t, IDTABLE_MIN - 1, &ops, 1000), -1);
    CHECK_EQ_INT(idtable_init(&t, IDTABLE_MAX + 1, &ops, 1000), -1);
    tb_init(&r, &t, IDTABLE_MIN);
    CHECK(idtable_acquire(&t, "") == NULL);
    char longname[IDGEN_NAME_MAX + 2];
    memset(longname, 'a', sizeof longname - 1);
    longname[sizeof longname - 1] = '\0';
    CHECK(idtable_acquire(&t, longname) == NULL);
    /* One name, one entry: asking twice gives the same namespace. */
    struct idtable_entry *a = idtable_acquire(&t, "ns-1"), *b = idtable_acquire(&t, "ns-1");
    CHECK(a != NULL && a == b);
    if (a) idtable_release(a);
    if (b) idtable_release(b);
    CHECK_EQ_INT(atomic_load(&t.live), 1);
    idtable_free(&t);
}

/* A namespace used, evicted by 16x its bound of others, used again: its ids
 * keep increasing and none repeats; the table never holds more than max. */
static void test_table_evict_and_return(void) {
    struct tb_redis r;
    struct idtable t;
    tb_init(&r, &t, 16);
    uint64_t first = tb_one(&t, "ns-0"), second = tb_one(&t, "ns-0");
    CHECK(second > first);
    char name[32];
    for (int round = 0; round < 3; round++) {
        for (int k = 1; k < 257; k++) {
            snprintf(name, sizeof name, "ns-%d", k);
            tb_one(&t, name);
            CHECK(atomic_load(&t.live) <= 16);
        }
        uint64_t again = tb_one(&t, "ns-0");
        CHECK(again > second); /* above Redis's mark: the abandoned ids are skipped */
        second = again;
    }
    CHECK(atomic_load(&t.evictions) >= 3 * 256 - 16);
    CHECK(atomic_load(&t.made) == 16); /* entries are recycled, never more */
    CHECK(r.leases[0] == 4);           /* one lease per incarnation: it really was evicted */
    idtable_free(&t);
}

/* 20,000 names through room for 64: the hash puts more than their share in
 * some stripes now and then, and those make room themselves; never NULL. */
/* An evicted namespace keeps its floor: when Redis lost its mark while the
 * namespace was away (a restart in the same second), the namespace comes
 * back refused until Redis's clock passes the floor, never below its own
 * earlier ids. */
static void test_table_floor_outlives_eviction(void) {
    struct tb_redis r;
    struct idtable t;
    tb_init(&r, &t, IDTABLE_MIN);
    uint64_t before = 0;
    for (int i = 0; i < 50; i++) before = tb_one(&t, "ns-1");
    char name[32];
    for (int k = 2; k < 200; k++) { /* ns-1 is evicted */
        snprintf(name, sizeof name, "ns-%d", k);
        tb_one(&t, name);
    }
    CHECK(atomic_load(&t.evictions) > 0);
    pthread_mutex_lock(&r.mu);
    r.mark[tb_index("ns-1")] = 0; /* Redis lost it, in the second of its last lease */
    r.sec = id_sec(before);
    pthread_mutex_unlock(&r.mu);
    uint64_t after = tb_one(&t, "ns-1");
    CHECK(id_sec(after) > id_sec(before)); /* refused until a later second, or, where its
                                              floor's slot is shared, placed in the second
                                              after the shared floor */
    idtable_free(&t);
}

static void test_table_many_names(void) {
    struct tb_redis r;
    struct idtable t;
    tb_init(&r, &t, 64);
    char name[32];
    int nulls = 0;
    for (int k = 0; k < 20000; k++) {
        snprintf(name, sizeof name, "ns-%d", k);
        struct idtable_entry *e = idtable_acquire(&t, name);
        if (!e) {
            nulls++;
            continue;
        }
        CHECK_EQ_STR(e->ns.name, name);
        idtable_release(e);
    }
    CHECK_EQ_INT(nulls, 0);
    CHECK(atomic_load(&t.live) <= 64);
    CHECK(atomic_load(&t.made) <= 64);
    CHECK(atomic_load(&t.evictions) >= 20000 - 64);
    idtable_free(&t);
}

/* A recently used namespace gets a second chance; a held one is never
 * evicted; when every entry is held, a new namespace gets NULL (503), and
 * gets in once one is let go. */
static void test_table_held_and_full(void) {
    struct tb_redis r;
    struct idtable t;
    tb_init(&r, &t, 16);
    struct idtable_entry *held[16];
    char name[32];
    for (int k = 0; k < 16; k++) {
        snprintf(name, sizeof name, "ns-%d", k);
        held[k] = idtable_acquire(&t, name);
        CHECK(held[k] != NULL);
    }
    CHECK(idtable_acquire(&t, "ns-100") == NULL);
    CHECK_EQ_INT(atomic_load(&t.evictions), 0);
    idtable_release(held[5]);
    struct idtable_entry *e = idtable_acquire(&t, "ns-100");
    CHECK(e != NULL);
    if (e) {
        CHECK_EQ_STR(e->ns.name, "ns-100");
        CHECK(e == held[5]); /* the only one not held gave way */
        idtable_release(e);
    }
    for (int k = 0; k < 16; k++) {
        if (k == 5) continue;
        CHECK_EQ_STR(held[k]->ns.name, (snprintf(name, sizeof name, "ns-%d", k), name));
        idtable_release(held[k]);
    }
    /* ns-1 is used between every new namespace: CLOCK keeps it live. */
    struct idtable_entry *hot = idtable_acquire(&t, "ns-1");
    if (hot) idtable_release(hot);
    for (int k = 200; k < 400; k++) {
        snprintf(name, sizeof name, "ns-%d", k);
        tb_one(&t, name);
        struct idtable_entry *again = idtable_acquire(&t, "ns-1");
        CHECK(again == hot);
        if (again) idtable_release(again);
    }
    idtable_free(&t);
}

/* Threads hammer 300 namespaces through a table of 16: every lookup races
 * with evictions and re-insertions.  Per namespace, each thread sees its ids
 * increase, and no id is ever handed out twice. */
#define TT_THREADS 4
#define TT_OPS     40000
struct tt_arg {
    struct idtable *t;
    unsigned seed;
    uint64_t (*got)[2]; /* (namespace, id) per op */
    int bad;            /* acquire failed, wrong name or ids went down */
};

static void *tt_worker(void *p) {
    struct tt_arg *a = p;
    uint64_t last[300] = {0};
    char name[32];
    for (int i = 0; i < TT_OPS; i++) {
        a->seed = a->seed * 1103515245u + 12345u;
        unsigned k = (a->seed >> 16) % 300;
        snprintf(name, sizeof name, "ns-%u", k);
        struct idtable_entry *e = idtable_acquire(a->t, name);
        uint64_t ids[3];
        if (!e || strcmp(e->ns.name, name) != 0 || tb_next(&e->ns, 3, ids) != 0) {
            fprintf(stderr, "  op %d on %s: %s\n", i, name, !e ? "no entry" : "wrong or failed");
            a->bad++;
            a->got[i][0] = 1000 + (uint64_t)i; /* not a namespace: no false duplicate */
            if (e) idtable_release(e);
            continue;
        }
        idtable_release(e);
        if (ids[0] <= last[k] || ids[1] <= ids[0] || ids[2] <= ids[1]) a->bad++;
        last[k] = ids[2];
        a->got[i][0] = k;
        a->got[i][1] = ids[0];
    }
    return NULL;
}

static int cmp_pair(const void *x, const void *y) {
    const uint64_t *a = x, *b = y;
    return a[0] != b[0] ? (a[0] < b[0] ? -1 : 1) : a[1] < b[1] ? -1 : a[1] > b[1];
}

static void test_table_threads(void) {
    struct tb_redis r;
    struct idtable t;
    tb_init(&r, &t, 16);
    uint64_t(*all)[2] = calloc((size_t)TT_THREADS * TT_OPS, sizeof *all);
    CHECK(all != NULL);
    if (!all) return;
    struct tt_arg args[TT_THREADS];
    pthread_t th[TT_THREADS];
    for (int i = 0; i < TT_THREADS; i++) {
        args[i] = (struct tt_arg){
            .t = &t, .seed = 11u + 977u * (unsigned)i, .got = all + (size_t)i * TT_OPS};
        CHECK_EQ_INT(pthread_create(&th[i], NULL, tt_worker, &args[i]), 0);
    }
    for (int i = 0; i < TT_THREADS; i++) {
        pthread_join(th[i], NULL);
        CHECK_EQ_INT(args[i].bad, 0);
    }
    qsort(all, (size_t)TT_THREADS * TT_OPS, sizeof *all, cmp_pair);
    size_t dups = 0;
    for (size_t i = 1; i < (size_t)TT_THREADS * TT_OPS; i++)
        if (all[i][0] == all[i - 1][0] && all[i][1] == all[i - 1][1]) dups++;
    CHECK_EQ_INT(dups, 0);
    CHECK(atomic_load(&t.live) <= 16);
    CHECK(atomic_load(&t.evictions) > 1000);
    fprintf(stderr, "  table threads: %llu evictions\n",
            (unsigned long long)atomic_load(&t.evictions));
    free(all);
    idtable_free(&t);
}

int main(void) {
    RUN(test_pack_unpack);
    RUN(test_parse_decimal);
    RUN(test_format);
    RUN(test_format_time);
    RUN(test_init_and_bounds);
    RUN(test_increasing_many_blocks);
    RUN(test_span_two_blocks);
    RUN(test_freshness);
    RUN(test_block_size_adapts);
    RUN(test_lease_failure);
    RUN(test_bad_lease_answer);
    RUN(test_clock_step_back);
    RUN(test_failed_lease_fails_waiters);
    RUN(test_threads);
    RUN(test_threads_churn);
    RUN(test_table_bounds);
    RUN(test_table_evict_and_return);
    RUN(test_table_floor_outlives_eviction);
    RUN(test_table_many_names);
    RUN(test_table_held_and_full);
    RUN(test_table_threads);
    return check_summary("idgen");
}
