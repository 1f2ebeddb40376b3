/* worker.h -- the gateway's threads, and the wiring of the layers on them.
 *
 * --workers N threads, shared-nothing: each runs one event loop (loop.h)
 * that owns its own libmicrohttpd daemon on its share of the listening
 * socket (SO_REUSEPORT), its own Redis connections (redis.h), its own
 * timers and parked waiters (waiters.h).  A request is read, sent to Redis,
 * resumed and answered on its worker's thread.  One more loop thread, the
 * auxiliary, has Redis connections of its own for the one call that must
 * be waited for (idgen's lease of an id block), which a few helper threads
 * make off the workers' loops (offload.h, handlers/ids.c). */
#ifndef LOCKGATE_WORKER_H
#define LOCKGATE_WORKER_H

#include "server/config.h"

struct redis;

/* Starts cfg->threads workers and the auxiliary loop; 0, or -1 (logged)
 * when a worker cannot listen. */
int workers_start(const struct gw_config *cfg);

/* Stops serving: no new connections, waiting requests answer 503, requests
 * in flight get up to 4 s (what Redis still owes then is answered 503),
 * then every thread is stopped and joined.  From the main thread. */
void workers_stop(void);

/* The auxiliary loop's Redis instance (for redis_eval_on). */
struct redis *workers_aux_redis(void);

#endif
