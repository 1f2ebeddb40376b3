/* idtable.h -- the live id namespaces of one gateway: a bounded table with
 * eviction of idle ones.
 *
 * Pure C like idgen.h: no sockets, no Redis (the lease is in the idgen_ops
 * given at init), unit-tested in tests/unit/test_idgen.c.
 *
 * At most `max` namespaces are live at once.  A new namespace beyond that
 * takes the place of one not used lately (CLOCK, an approximation of LRU).
 * An evicted namespace's unused ids are abandoned; when it comes back its
 * next lease starts above Redis's mark, as after a gateway restart, and
 * above its floor (the highest id it had leased), which outlives it in a
 * table of floors indexed by the name's hash, so ids never go backwards
 * within one gateway, even when Redis lost its mark while the namespace was
 * away.  A slot whose names collide keeps the highest of their floors, and
 * a name finding such a shared slot has its lease placed in the second
 * after that floor (stricter than its own floor: past it and past anything
 * lost in its second; never a refusal, as it may be another name's).  The
 * table's memory is bounded by `max`, whatever the gateway's lifetime.
 *
 * A request on a live namespace takes no lock: a lock-free lookup and one
 * compare-and-swap on that namespace's own reference count.  See idtable.c
 * for why memory is never freed under a reader. */
#ifndef LOCKGATE_IDTABLE_H
#define LOCKGATE_IDTABLE_H

#include "idgen/idgen.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#define IDTABLE_DEFAULT_MAX 16384   /* live namespaces, --id-namespaces */
#define IDTABLE_MIN         16      /* smallest setting accepted */
#define IDTABLE_MAX         4194304 /* largest setting accepted */

/* One live (or recyclable) namespace.  Entries are never freed while the
 * table lives: an evicted one is reused for the next new namespace. */
struct idtable_entry {
    _Atomic uint64_t state;           /* (incarnation << 32) | dead bit 31 | references */
    _Atomic uint64_t hash;            /* hash of the name, for probing and moving */
    _Atomic uint32_t used;            /* CLOCK bit: set by use, cleared by the hand */
    struct idtable_entry *next_spare; /* in idtable.spare (dead entries only) */
    struct idgen_ns ns;               /* the namespace's hand-out state */
};

/* An evicted namespace's floor: whose (the name's hash, or
 * IDTABLE_FLOOR_SHARED once two names met in the slot) and the id. */
struct idtable_floor {
    uint64_t hash;  /* 0: empty */
    uint64_t floor; /* the highest id leased, the highest of all when shared */
};

/* A stripe of the slot array: inserts and evictions in it hold its mutex. */
struct idtable_shard {
    pthread_mutex_t mu; /* guards this stripe's slots against writers */
    size_t count;       /* live entries in the stripe (under mu) */
    char pad_[64];      /* keeps neighbouring mutexes off one cache line */
};

struct idtable {
    size_t max;                            /* live namespaces at most */
    size_t nslots;                         /* slots, a power of 2, >= 4 * max */
    size_t shard_slots;                    /* slots per shard, a power of 2 */
    size_t nshards;                        /* nslots / shard_slots */
    _Atomic(struct idtable_entry *) *slot; /* linear probing within a shard */
    struct idtable_shard *shard;           /* nshards stripes */
    struct idtable_entry *pool;            /* max entries, handed out in order */
    _Atomic size_t made;                   /* entries of pool taken so far */
    _Atomic size_t hand;                   /* CLOCK hand over the slots */
    _Atomic uint64_t evictions;            /* stat: namespaces evicted */
    _Atomic size_t live;                   /* stat: namespaces in the table */
    pthread_mutex_t spare_mu;              /* guards spare */
    struct idtable_entry *spare;           /* dead entries left by lost insert races */
    struct idtable_floor *floor;           /* evicted namespaces' floors, by hash */
    size_t nfloors;                        /* a power of 2, >= 2 * max */
    pthread_mutex_t floor_mu;              /* guards floor[] */
    struct idgen_ops ops;                  /* given to every namespace */
    int64_t max_age_ms;                    /* given to every namespace */
};

/* Set up `t` for at most `max` (IDTABLE_MIN..IDTABLE_MAX) live namespaces;
 * ops and max_age_ms are passed to idgen_ns_init.  Aborts on out of memory
 * (with one line).  Returns 0, or -1 when an argument is out of range. */
int idtable_init(struct idtable *t, size_t max, const struct idgen_ops *ops, int64_t max_age_ms);

/* Find or add namespace `name` (1..IDGEN_NAME_MAX bytes) and hold it: it is
 * not evicted until idtable_release(e).  Returns the entry (use &e->ns), or
 * NULL when every live namespace is held by a request in flight, so none
 * can give way, or the name is not 1..IDGEN_NAME_MAX bytes.  Never waits on
 * another namespace's lease; a new namespace may wait for a stripe mutex
 * held only for a few slot writes. */
struct idtable_entry *idtable_acquire(struct idtable *t, const char *name);

/* Let go of what idtable_acquire returned. */
void idtable_release(struct idtable_entry *e);

/* Release everything; no thread may use the table any more. */
void idtable_free(struct idtable *t);

#endif
