/* prefix_stream.h -- GET /v1/locks?prefix=P (and /v1/semaphores?prefix=P)
 * with Accept: text/event-stream: every change of holder of every name
 * under P, in the order Redis made them, as `event: state` whose data is
 * the name's state (GET's body) and the change (granted, released,
 * expired, forced, changed), filtered by the key's read grants as a
 * listing is.
 *
 * The design, and what it costs (docs/internals.md, "Prefix streams"):
 * each change is published with its state on the name's own channel
 * (lua/_holders.lua, "prefix streams") while any client of Redis has a
 * pub/sub pattern, and a worker with a stream over P keeps one PSUBSCRIBE
 * of P's pattern (a "feed", shared by its streams over P), so Redis sends
 * a change only to the workers watching a prefix it falls under.  A feed
 * keeps its last PREFIX_RING events and stays subscribed for a while
 * after its last stream ends, so that a client that comes back with
 * Last-Event-ID to a worker that has its place resumes without a miss;
 * otherwise (another gateway, a restart, the place dropped off the ring,
 * the subscription lost and made again) an `event: gap` says so and the
 * names held now follow as `event: state` without an id.  Expiries, which
 * no script announces, are found by the feed reading each name it saw
 * held at its lease's end (inspect.lua, which publishes what it finds).
 * Not in Redis Cluster mode (501). */
#ifndef LOCKGATE_PREFIX_STREAM_H
#define LOCKGATE_PREFIX_STREAM_H

struct gw_request;

/* GET /v1/locks and GET /v1/semaphores: the prefix stream when the client
 * asked for text/event-stream (or 400 / 501 / 503), else the listing
 * (listing.c). */
void prefix_stream_or_list_locks(struct gw_request *req);
void prefix_stream_or_list_semaphores(struct gw_request *req);

#endif
