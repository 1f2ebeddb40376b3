/* idgen.h -- the ID layout and the per-namespace block hand-out.
 *
 * Pure C: no sockets, no Redis.  The clock and the Redis call (running
 * lua/id_lease.lua) are passed in through struct idgen_ops, so all of this is
 * unit-tested with a fake clock and a fake lease (tests/unit/test_idgen.c).
 *
 * An ID is a positive signed 64-bit integer (openapi.yaml, "decodeId"):
 *
 *   bit 63       0
 *   bits 62..32  seconds since the epoch (default 2024-01-01T00:00:00Z)
 *   bits 31..0   sequence within that second, per namespace
 *
 * Because the sequence is the low half, the ids of one second are contiguous
 * integers, and a block (second, first..last) is simply the integer range
 * idgen_pack(second, first) .. idgen_pack(second, last).
 *
 * Hand-out (idgen_next) is lock-free on the hot path: one atomic fetch_add on
 * a 64-bit cursor claims n ids of the current block.  Only when the block is
 * exhausted or stale does a thread take the namespace's mutex and lease the
 * next block from Redis (synchronously, through ops->lease).  See idgen.c for
 * the why of each part. */
#ifndef LOCKGATE_IDGEN_H
#define LOCKGATE_IDGEN_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

/* ---- constants ------------------------------------------------------------ */

#define IDGEN_DEFAULT_EPOCH      1704067200  /* 2024-01-01T00:00:00Z, unix seconds */
#define IDGEN_DEFAULT_MAX_AGE_MS 1000        /* a block is used at most this long */
#define IDGEN_MAX_COUNT          10000       /* most ids one idgen_next may ask for */
#define IDGEN_BLOCK_MIN          16          /* smallest lease size asked for */
#define IDGEN_BLOCK_MAX          (1u << 20)  /* largest lease size asked for */
#define IDGEN_SECOND_MAX         0x7fffffffu /* 31 bits of seconds: until 2092 */
#define IDGEN_NAME_MAX           200         /* namespace name, bytes (NAME_MAX_LEN) */
#define IDGEN_DEC_MAX            21          /* idgen_format buffer: 20 digits + NUL */
#define IDGEN_TIME_MAX           21          /* "YYYY-MM-DDTHH:MM:SSZ" + NUL */
#define IDGEN_RING               4           /* published block slots, see idgen.c */

/* ---- layout helpers --------------------------------------------------------- */

/* What an id says, for GET /v1/ids/{namespace}/{id}. */
struct idgen_decoded {
    int64_t unix_seconds; /* epoch + bits 62..32 */
    uint32_t seq;         /* bits 31..0: sequence within that second */
};

/* The id of sequence `seq` in second `sec_since_epoch`.  Only the low 31 bits
 * of the second are used, so bit 63 is always 0. */
uint64_t idgen_pack(uint32_t sec_since_epoch, uint32_t seq);

/* Split an id.  Returns 0, or -1 (out untouched) when the id is not of the
 * layout: 0, or bit 63 set. */
int idgen_unpack(uint64_t id, int64_t epoch_unix, struct idgen_decoded *out);

/* Parse the decimal id s[0..len) (not NUL-terminated).  Strict: 1..19 ASCII
 * digits, no sign, no space, no leading zero (ids have one spelling), value
 * in 1..INT64_MAX.  Returns 0 and sets *out, or -1 (*out untouched). */
int idgen_parse_decimal(const char *s, size_t len, uint64_t *out);

/* Write `id` in decimal to buf, which holds at least IDGEN_DEC_MAX bytes,
 * NUL-terminated.  Returns the number of digits (1..20). */
size_t idgen_format(uint64_t id, char *buf);

/* Write unix_seconds as RFC 3339 UTC, "2026-01-01T00:00:00Z", NUL-terminated.
 * Returns 0, or -1 (out untouched) when the year is outside 0..9999. */
int idgen_format_time(int64_t unix_seconds, char out[IDGEN_TIME_MAX]);

/* ---- block hand-out ----------------------------------------------------------- */

/* The answer of lua/id_lease.lua: sequence numbers first..last (inclusive) of
 * one second belong to the caller. */
struct idgen_block_lease {
    uint32_t second; /* seconds since the epoch (Redis's clock) */
    uint32_t first;  /* first sequence number granted */
    uint32_t last;   /* last sequence number granted, >= first */
};

/* What idgen needs from the outside world.
 *
 * now_ms: a monotonic clock in milliseconds (CLOCK_MONOTONIC); only
 *   differences are used.  Called on every idgen_next, from any thread.
 * lease: run lua/id_lease.lua for namespace `ns`, asking for `want` numbers
 *   (1..IDGEN_BLOCK_MAX) above `floor`, the highest id this namespace has
 *   leased (0: none); fill *out and return 0, or return -1 when Redis cannot
 *   answer, IDGEN_BEHIND when Redis's block would not lie above `floor` (it
 *   lost ids handed out already: nothing was written), or
 *   IDGEN_EPOCH_MISMATCH when the namespace's mark was made with an earlier
 *   epoch than this gateway's.  soft 1: `floor` may be another namespace's
 *   (idtable.c): place the block above it rather than refuse.  Called with the namespace's mutex held (so never twice at
 *   once for one namespace), synchronously, on the thread of the request
 *   that found the block exhausted or crossed its prefetch mark; its latency
 *   is that request's.  It must not call idgen for the same namespace.
 * ctx: passed to both. */
#define IDGEN_BEHIND         (-3) /* Redis's mark lies below ids already leased */
#define IDGEN_EPOCH_MISMATCH (-4) /* the mark was made with an earlier epoch */
struct idgen_ops {
    int64_t (*now_ms)(void *ctx); /* monotonic milliseconds */
    int (*lease)(void *ctx, const char *ns, uint32_t want, uint64_t floor, int soft,
                 struct idgen_block_lease *out); /* 0 ok, < 0 see above */
    void *ctx;                                   /* caller's context for both */
};

/* A block as idgen keeps it: an inclusive range of ids, and when its lease
 * answer arrived by ops->now_ms. */
struct idgen_span {
    uint64_t lo;       /* first id not yet known to be handed out */
    uint64_t hi;       /* last id of the block */
    int64_t leased_ms; /* now_ms() when the lease answer arrived */
};

/* One published block, read by the fast path without a lock.  Written only
 * under the namespace mutex, seqlock-style: gen is 0 while being rewritten. */
struct idgen_slot {
    _Atomic uint32_t gen;       /* generation stored here, 0 while writing */
    _Atomic uint64_t lo;        /* first id of the block */
    _Atomic uint64_t hi;        /* last id of the block */
    _Atomic int64_t expires_ms; /* last now_ms() at which the block may be used */
};

/* One namespace's hand-out state.  Initialise with idgen_ns_init, never copy
 * or move it afterwards (it holds a mutex), and destroy with idgen_ns_free
 * once no thread uses it.  All fields are private to idgen.c, except the two
 * counters, which /metrics may read with atomic_load. */
struct idgen_ns {
    /* Hot: every idgen_next does one fetch_add here.  Padded so that it does
     * not share a cache line with the slots every reader loads. */
    _Atomic uint64_t cursor;          /* (generation << 32) | ids claimed in it */
    char pad_[64 - sizeof(uint64_t)]; /* keeps the slots off cursor's line */

    struct idgen_slot ring[IDGEN_RING]; /* block of generation g is in [g % RING] */

    _Atomic uint64_t leases;         /* stat: successful leases (incl. prefetch) */
    _Atomic uint64_t lease_failures; /* stat: failed or unusable lease answers;
                                       also tells mutex waiters one just failed */

    pthread_mutex_t lock; /* slow path only: refill and prefetch */
    /* Guarded by lock: */
    uint32_t gen;              /* generation of the installed block, 0: none */
    struct idgen_span cur;     /* the installed block */
    uint32_t adapted_gen;      /* generation whose outcome already resized */
    uint32_t next_size;        /* numbers to ask for in the next lease */
    int has_pending;           /* 1 when `pending` holds a prefetched block */
    struct idgen_span pending; /* prefetched block, installed on exhaustion */
    uint64_t floor;            /* highest id of any block leased so far */
    int floor_soft;            /* floor came from a shared slot of idtable's */

    /* Immutable after init: */
    struct idgen_ops ops;          /* clock and lease, copied at init */
    int64_t max_age_ms;            /* freshness limit of a block */
    char name[IDGEN_NAME_MAX + 1]; /* namespace name, NUL-terminated */
};

/* Set up `ns` for namespace `name` (1..IDGEN_NAME_MAX bytes, NUL-terminated;
 * copied).  ops is copied; now_ms and lease must be set.  max_age_ms <= 0
 * means IDGEN_DEFAULT_MAX_AGE_MS.  Leases nothing yet.  Returns 0 or -1. */
int idgen_ns_init(struct idgen_ns *ns, const char *name, const struct idgen_ops *ops,
                  int64_t max_age_ms);

/* Write n ids (1..IDGEN_MAX_COUNT), strictly increasing, to out_ids[0..n).
 * Thread-safe.  Ids of a later call (from any thread, once this one has
 * returned) are greater.  Returns 0, or < 0 when a block had to be leased and
 * the lease failed (-1: Redis down; IDGEN_BEHIND, IDGEN_EPOCH_MISMATCH: as
 * ops->lease said), or n is out of range (-1); then out_ids
 * may have been written to and the ids in it are discarded, never reissued.
 * While Redis is down, ids of a block that is still fresh keep being served. */
int idgen_next(struct idgen_ns *ns, uint32_t n, uint64_t *out_ids);

/* idgen_next without a lease: 0 with n ids, or IDGEN_WOULD_LEASE when the
 * current block cannot give them all (the ids it did give are discarded,
 * never reissued: call idgen_next, which may lease), or -1 (n out of
 * range).  Never blocks: for a caller that must not wait for Redis. */
#define IDGEN_WOULD_LEASE (-2)
int idgen_try_next(struct idgen_ns *ns, uint32_t n, uint64_t *out_ids);

/* The highest id leased so far (0: none), for a caller that keeps it when
 * the namespace is evicted (idtable.c), and setting it on a namespace that
 * has not leased yet (soft: see idgen_ops.lease).  Not thread-safe: for a
 * namespace no thread uses. */
uint64_t idgen_floor(const struct idgen_ns *ns);
void idgen_set_floor(struct idgen_ns *ns, uint64_t floor, int soft);

/* Release what idgen_ns_init set up (the mutex).  ns itself is the caller's. */
void idgen_ns_free(struct idgen_ns *ns);

#endif
