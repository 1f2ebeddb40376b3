/* quorum_math.h -- the arithmetic of quorum mode (backend_quorum.c), apart
 * from Redis so that it is tested alone (tests/unit/test_quorum_math.c). */
#ifndef LOCKGATE_QUORUM_MATH_H
#define LOCKGATE_QUORUM_MATH_H

#include <stdint.h>

/* The clock-drift allowance for a lease of ttl_ms: 1% plus 2 ms. */
long long quorum_drift_ms(long long ttl_ms);

/* How long a quorum's grant is good for: the shortest lease a master
 * granted, less the round's time and the drift allowance for the lease
 * asked.  The grant stands only when this is > 0. */
long long quorum_validity(long long shortest_ttl_ms, long long elapsed_ms, long long lease_ms);

/* When a busy name may be free enough for a quorum: `answered` masters
 * answered, nbusy of them busy with the waits in busy[] (sorted here), the
 * rest free; q must grant.  The wait until enough busy masters free up (the
 * need-th shortest); 1 ms when none is busy. */
long long quorum_retry_after(long long *busy, int nbusy, int answered, int q);

/* Whether a granted round stands: enough grants, and time left. */
int quorum_granted(int granted, int q, long long validity_ms);

/* Why a round that a quorum answered failed, when no other answer (a mode
 * or limit mismatch, a session's) was a quorum's: granted masters granted,
 * nbusy said busy, lost are held off by a data loss (refused the grant,
 * -8, or granted but abstain: server/lossguard.h).  Busy when a master
 * said busy or a quorum granted (too late: try again); data lost when
 * the masters held off are what the quorum lacks; else the masters gave
 * no common answer.  A -8 or an abstention is no busy lock: a 409 would
 * say the lock is held when nobody holds it. */
enum quorum_failure { QUORUM_FAILED_BUSY, QUORUM_FAILED_DATA_LOST, QUORUM_FAILED_NO_COMMON };
enum quorum_failure quorum_failed_why(int granted, int nbusy, int lost, int q);

/* When a round that failed for a data loss is worth trying again (a
 * waiting request's wake-up): when the soonest of its masters' hold-offs
 * ends (shortest_holdoff_ms, 0: unknown), or QUORUM_LOST_RETRY_MS if
 * sooner, since a master that did not answer may answer again. */
#define QUORUM_LOST_RETRY_MS 1000
long long quorum_lost_retry_ms(long long shortest_holdoff_ms);

/* An id block above every mark a quorum read: the latest second any
 * master's clock reads (now) and the highest mark (msec, mseq; -1 when
 * none).  Fills second, first and last for want numbers (last capped at
 * 2^32-1); returns 0, or -1 when the clock reads nothing usable. */
int quorum_id_block(long long now, long long msec, long long mseq, uint32_t want, uint32_t *second,
                    uint32_t *first, uint32_t *last);

#endif
