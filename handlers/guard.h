/* guard.h -- grants refused while Redis cannot keep them (issue 28): a
 * master that may evict keys (server/memguard.h), or one that lost its
 * data less than the longest lease ago (server/lossguard.h, 503
 * redis_data_lost with Retry-After).  Every handler that grants calls one
 * of these first. */
#ifndef LOCKGATE_GUARD_H
#define LOCKGATE_GUARD_H

#include <stdint.h>

struct gw_request;

/* Locks, semaphores, sessions and multi-locks: 1 when refused (then req was
 * answered 503 redis_may_evict or redis_data_lost), 0 to go on.  In Redis
 * Cluster mode a loss holds off only the names of the master that lost
 * its data: req->name's here. */
int guard_grant_or_reply(struct gw_request *req);
/* The same for a multi-lock's names (every one's master, in Cluster mode). */
int guard_names_or_reply(struct gw_request *req, char *const *names, int n);
/* Whether grants on name are held off by a data loss now (every grant, or
 * in Cluster mode name's master's), and *left_ms how long still: for a
 * grant whose answer came after the loss was noticed. */
int guard_lost_for(const char *name, int64_t *left_ms);
/* Answers 503 redis_data_lost for a grant a data loss refused (the script
 * found the master's marker changed, lua/_marker.lua, or the grant came
 * back after the loss was noticed): the hold-off of the first of names
 * held off, or, should none be held off (any more: this instance's read
 * was older than another's notice, --max-lease-ms ago; in quorum mode, a
 * master or two abstain, no more than the quorum can spare, yet too few
 * others granted), Retry-After 1 and the detail why (NULL: a marker
 * changed). */
void guard_lost_reply(struct gw_request *req, char *const *names, int n, const char *why);
/* The same for ids: refused only under an allkeys-* policy (not after a
 * data loss: ids jump ahead by themselves, docs/ids.md). */
int guard_ids_or_reply(struct gw_request *req);

/* Every /v1/ request, before its handler (the HTTP gate, wiring.c): GW_OK
 * to go on, or GW_REPLIED after 503 layout_unsupported (a master holds a
 * key layout this gateway does not understand, server/layout.h). */
int guard_layout_or_reply(struct gw_request *req);

/* The longest ttl_ms a lease, session or extension may ask for
 * (--max-lease-ms: after a master lost its data, grants wait that long),
 * and the default ttl_ms, 30 s or that when shorter. */
long long guard_max_lease_ms(void);
long long guard_default_lease_ms(void);

#endif
