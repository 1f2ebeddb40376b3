/* quota.h -- a request rate per API key (the auth file's
 * "limits": {"requests_per_second": N}), decided by GCRA, the generic cell
 * rate algorithm: one 64-bit "theoretical arrival time" per key, moved
 * with a compare-and-swap, so workers check the same key without a lock.
 * A key may send N requests at once after a quiet second, and N a second
 * on average.  Pure: no clock of its own, no I/O. */
#ifndef LOCKGATE_QUOTA_H
#define LOCKGATE_QUOTA_H

#include <stdatomic.h>
#include <stdint.h>

#define QUOTA_RPS_MAX   1000000 /* requests_per_second at most */
#define QUOTA_HOLDS_MAX 1000000 /* holds_at_once at most */

/* Takes one request from a bucket of rps a second (rps > 0) at now_us
 * (any monotonic microseconds).  Returns 0 when it may go on, else the
 * microseconds until it would be let in (the request is not counted). */
int64_t quota_take(_Atomic int64_t *tat_us, uint32_t rps, int64_t now_us);

#endif
