/* streams.h -- a hold bound to its connection: POST /v1/locks/{name} or
 * /v1/semaphores/{name} with Accept: text/event-stream.
 *
 * The answer is a Server-Sent Events stream: `event: waiting` each time the
 * request finds the name busy and waits on (fair or not, as any wait),
 * `event: granted` with the usual grant body, then comment lines every
 * --stream-heartbeat-ms while the connection stays open, during which the
 * hold lives (its worker's session carries it: stream_session.h).  It ends:
 *   - the client closes or resets: the hold is released at once (a
 *     release, so the next waiter is woken);
 *   - the client's host goes silent: its socket's TCP_USER_TIMEOUT
 *     (--stream-user-timeout-ms) cuts it off once a heartbeat goes
 *     unacknowledged that long, then as above;
 *   - the gateway dies: the session, so the hold, ends ttl_ms after its
 *     last renewal;
 *   - the hold is lost (forced release, its session gone from Redis,
 *     renewal impossible past the lease): `event: lost` with the reason,
 *     and the stream ends. */
#ifndef LOCKGATE_STREAMS_H
#define LOCKGATE_STREAMS_H

#include <stddef.h>

struct gw_request;
struct hold_call;

/* 1 when req asked for an event stream (its Accept chose it). */
int stream_asked(const struct gw_request *req);

/* Starts hc (filled as for hold_acquire) as a hold bound to req's
 * connection; answers, as hold_acquire does, in every case. */
void stream_hold_start(struct gw_request *req, struct hold_call *hc);

/* The same, the grant's event named granted_event, and the name the
 * events show req->name without its first name_skip bytes (elections.c:
 * "elected", and the election's name without the lock's prefix). */
void stream_hold_start_as(struct gw_request *req, struct hold_call *hc, const char *granted_event,
                          size_t name_skip);

#endif
