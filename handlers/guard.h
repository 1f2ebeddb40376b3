/* guard.h -- grants refused while Redis cannot keep them (issue 28): a
 * master that may evict keys (server/memguard.h).  Every handler that
 * grants calls one of these first. */
#ifndef LOCKGATE_GUARD_H
#define LOCKGATE_GUARD_H

struct gw_request;

/* Locks, semaphores, sessions and multi-locks: 1 when refused (then req was
 * answered 503 redis_may_evict), 0 to go on. */
int guard_grant_or_reply(struct gw_request *req);
/* The same for ids (refused only under an allkeys-* policy). */
int guard_ids_or_reply(struct gw_request *req);

#endif
