/* watch.h -- GET /v1/locks/{name}?watch_ms=MS&after=INDEX (and semaphores):
 * a blocking query in the manner of Consul's, the index being the highest
 * fence of a live holder (a semaphore's: its number of holders, as permits
 * carry no fence; 0 when nobody holds the name).  The answer is
 * GET's, given once the index differs from `after` (a new holder; released,
 * expired or forced) or when watch_ms has passed, with the index in the
 * Lockgate-Index header.  A watcher is parked with waiters.c like a waiting
 * acquisition: no thread, woken by the release channel (so by changes made
 * through any gateway) or by its timer at the lease's end. */
#ifndef LOCKGATE_WATCH_H
#define LOCKGATE_WATCH_H

#include <stdint.h>

struct gw_request;

#define WATCH_MAX_MS 600000

/* 1 when the request has ?watch_ms (then it is answered: watched, or 400
 * invalid_field for a bad watch_ms or after), else 0: a plain GET. */
int watch_if_asked(struct gw_request *req, int semaphore);

/* Watch requests being served now (the lockgate_watching_requests gauge). */
uint64_t watch_in_progress(void);

/* Registers the gauge with /metrics; once, at start (handlers_init, wiring.c). */
void watch_init(void);

#endif
