/* verdict.h -- the first integer of every lua/ script's answer, named.
 *
 * The scripts answer {verdict, values...} (or a bare integer on a fast
 * path, see verdict_parse below); C compares against these names, never
 * against bare numbers.  VERDICT_ERROR is C's own: Redis failed or the
 * answer had another shape. */
#ifndef LOCKGATE_VERDICT_H
#define LOCKGATE_VERDICT_H

enum lua_verdict {
    VERDICT_GRANTED = 1,           /* a new hold (acquire), or done (extend, release...) */
    VERDICT_REENTERED = 2,         /* the token already held it: one more level */
    VERDICT_BUSY = 0,              /* held, full, in lock-delay, or fair waiters ahead */
    VERDICT_NOT_HELD = -1,         /* nobody holds it (or the session is gone) */
    VERDICT_NOT_OWNER = -2,        /* held, but not by this token */
    VERDICT_MODE_MISMATCH = -3,    /* the token holds it in the other mode */
    VERDICT_LIMIT_MISMATCH = -4,   /* a semaphore in use with another limit */
    VERDICT_SESSION_BOUND = -5,    /* the hold lives by its session: renew that */
    VERDICT_SESSION_ENDED = -6,    /* the session it was to be bound to has ended */
    VERDICT_SESSION_MISMATCH = -7, /* a re-entry's session is not the hold's */
    VERDICT_DATA_LOST = -8,        /* a fresh grant refused: the master's marker is not what
                                      the gateway last read (lua/_marker.lua; the Redis layer
                                      noted the loss, server/redis.h REDIS_MARKER_MOVED) */
    VERDICT_ERROR = -100,          /* no usable answer (C only) */
};

/* acquire.lua's busy cause (the answer's third value). */
enum busy_cause {
    BUSY_HELD = 1,    /* held, or a semaphore full */
    BUSY_DELAY = 2,   /* in its lock-delay after an expired holder */
    BUSY_QUEUED = 3,  /* free, but fair waiters are queued ahead */
    BUSY_STALLED = 4, /* C only: the wait ended while this gateway was stalled */
};

#include <stddef.h>

struct redis_result;

/* Reads a script's reply into v[0..n): the verdict (v[0]), or VERDICT_ERROR
 * with *err set. */
long long verdict_parse(const struct redis_result *res, long long *v, size_t n, const char **err);
/* acquire.lua's answer in v[0..4] (see backend.h, acquire); ttl_ms is the
 * lease asked for, which its fast path's bare fence stands for. */
long long verdict_parse_acquire(const struct redis_result *res, long long ttl_ms, long long *v,
                                const char **err);
/* Quorum mode: which of every master's inspect.lua answers ({1, holders,
 * count, fence, ...} or {-1}, or a failure) stands for them.  Held when a
 * quorum of masters says so: the held answer with the highest fence, the
 * first (in --redis order) on a tie.  Else a free answer (a held one when
 * none is free).  Fewer than quorum answers: a failed one. */
const struct redis_result *verdict_pick_inspect(const struct redis_result *res, int n, int quorum);

#endif
