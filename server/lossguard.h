/* lossguard.h -- a Redis master that lost its data is noticed, and no lock
 * is granted until every lease that could have been running has ended.
 *
 * Each master keeps a marker key, <prefix>marker, with no TTL: the first
 * gateway that finds it missing sets it (SETNX, a fresh random value each
 * time, so each loss leaves a value of its own), and every
 * gateway reads it on each new command connection and every
 * LOSSGUARD_PERIOD_MS (redis.c sends, this file reads).  A connection that
 * has seen a master's marker and then finds it missing or changed knows
 * the master lost its data: a restart without persistence, FLUSHALL, a
 * failover to a replica that was empty.  (A failover that loses only the
 * last writes keeps the marker: that is what --min-replicas-ack is for.)
 * In Redis Cluster mode every master has its own marker, in the first
 * slot it serves (<prefix>marker{TAG}, TAG a hash tag of that slot), and
 * what was seen of it is kept per slot, so a failover to an empty replica,
 * which serves the same slots, is noticed too.
 *
 * On a loss: an error line and lockgate_redis_data_lost_total (once per
 * loss, whichever connection notices first), and for --max-lease-ms from
 * then (no lease, session or extension is granted for longer) that
 * master is held off:
 *   - one master (single, Sentinel): lock, semaphore, session and
 *     multi-lock grants are refused with 503 redis_data_lost and a
 *     Retry-After, and /readyz says so;
 *   - Redis Cluster: the same, for names whose slot that master serves
 *     (and sessions whose key it holds); /readyz names it;
 *   - quorum: that master abstains: a grant it answers is not counted
 *     (handlers/backend_quorum.c, multi.c), so one of five restarting
 *     empty is no outage; when more than N - quorum masters abstain no
 *     grant can be had, and grants are refused as with one master.
 *
 * The grant scripts check the marker too (lua/_marker.lua): the Redis
 * layer sends each the value its connection last read (redis.c,
 * marker_fill), and a fresh grant on a master whose marker differs is
 * refused and noted here like a read, so a FLUSHALL on a connection that
 * stays up grants nothing in the second before the next read.  In Redis
 * Cluster mode a script reads keys of its own slot only, so what it checks
 * is a marker of that slot, <prefix>slotmark{TAG} (redis.c, "slot
 * markers"): a refusal there is noted with lossguard_note_slot.  One loss
 * is seen there through many keys (every slot's marker, the master's): a
 * slot's refusal while the master is held off is that loss, and so is the
 * master's marker read right after it (its value then identifies the loss
 * for every read that follows, as in the other modes).
 *
 * The hold-off is recorded in Redis too, so that it survives the gateway
 * that noticed it: every loss noticed (a marker read, or a grant script's
 * refusal) writes <prefix>holdoff on that master (in Redis Cluster
 * <prefix>holdoff{TAG}, the master marker's TAG: the same slot) through
 * lua/holdoff.lua: its value the hold-off's end in Redis's clock, expiring
 * then, only ever moved later.  Every marker read also reads its PTTL (the
 * same round trip), and a hold-off found there is kept here as if noticed
 * (lossguard_learn): so a gateway started after the loss, which never read
 * the old marker, and one restarted during its own hold-off refuse what
 * the others refuse, until the same end.  Redis's clock, not the
 * gateways', times it.
 *
 * At start (each master's first INFO), a master with neither AOF nor a
 * replica gets a warning: a restart would forget every held lock. */
#ifndef LOCKGATE_LOSSGUARD_H
#define LOCKGATE_LOSSGUARD_H

#include <stddef.h>
#include <stdint.h>

#define LOSSGUARD_MARKER_LEN 24
#define LOSSGUARD_PERIOD_MS  1000 /* how often each connection reads its master's marker */

/* What one master's marker was last read as. */
struct lossguard_seen {
    char marker[LOSSGUARD_MARKER_LEN + 1]; /* "" before the first read */
};

/* How a loss holds grants off (see above). */
enum lossguard_scope {
    LOSSGUARD_ALL,       /* one master: every grant */
    LOSSGUARD_QUORUM,    /* that master's votes; every grant past N - quorum of them */
    LOSSGUARD_PER_MASTER /* Redis Cluster: grants on that master's slots */
};

/* Before the workers start: the longest lease, the scope, and (quorum)
 * how many masters there are and how many must grant. */
void lossguard_init(long long max_lease_ms, enum lossguard_scope scope, int masters, int quorum);

/* The marker read on a connection to host:port.  1 when it shows a loss
 * (the value seen before changed; counted or not), else 0.  Only the value
 * is compared, never whether the read's own SETNX set the key: every
 * value written is fresh (a random token), so a marker gone and set again
 * always reads differently; and what the SETNX saw is stale by the time
 * its GET answers (another worker may have read the value this SETNX
 * wrote, and this instance taken it up meanwhile: a false loss, held off
 * for --max-lease-ms). */
int lossguard_note(struct lossguard_seen *seen, const char *host, int port, const char *value);
/* Redis Cluster mode: a grant script on host:port found its slot's marker
 * gone or changed since this gateway learnt it (lua/_marker.lua): that
 * master lost its data, unless it is held off already (the same loss), or
 * the loss is one the master's marker showed already.  sent_under: the
 * master's marker as the refusing connection had read it when the grant
 * went out; latest: as this process read it last ("" either: not known).
 * When they differ the master's marker changed in between, a loss noted
 * then (held off, or its hold-off over): the refusal is that loss, not a
 * new one.  1 when a new loss was noted. */
int lossguard_note_slot(const char *host, int port, const char *sent_under, const char *latest);

/* A hold-off of host:port found in Redis (<prefix>holdoff), left_ms still
 * to run: kept as a loss noticed here would be (a later end wins), and,
 * when this gateway was not holding that master off, logged once and
 * counted (lockgate_redis_holdoff_learnt_total).  marker: the master's
 * marker as just read, so a later loss (another value) is told apart. */
void lossguard_learn(const char *host, int port, const char *marker, long long left_ms);

/* A master's INFO persistence and replication: warns once per master
 * without AOF and without replicas. */
void lossguard_check_persistence(const char *host, int port, const char *info);

/* Every grant refused now (one master, or too many quorum masters held
 * off); *retry_after_ms is how long still. */
int lossguard_refusing(int64_t *retry_after_ms);
/* The master host:port is held off now (quorum: abstains; Cluster: its
 * slots' grants are refused); *retry_after_ms how long still.  Cheap when
 * no master is held off (one atomic read). */
int lossguard_master_refusing(const char *host, int port, int64_t *retry_after_ms);
/* What is held off, for /readyz and problem details: every grant, or in
 * Cluster mode any master; 0 when nothing is (or, in quorum mode, while
 * enough masters remain to grant). */
int lossguard_describe(char *out, size_t cap);

#endif
