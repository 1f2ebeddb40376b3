/* hold_stream.h -- `lockctl run --stream`: the lock held by lockctl's own
 * connection, as an event stream the gateway keeps the lease alive for. */
#ifndef LOCKCTL_HOLD_STREAM_H
#define LOCKCTL_HOLD_STREAM_H

#include "cli/options.h"
#include "cli/watch.h"

/* The keeper (watch.h) of a stream hold: reads the stream, loses the hold
 * on `event: lost` or the stream's end, releases by closing it. */
extern const struct keeper keeper_stream;

/* Takes lock o->name under w->token over an event stream, waiting up to
 * o->wait (as acquire_loop does, in as many requests as it takes).
 * Returns OUT_OK with w->stream open, w->fence set and w->keeper
 * keeper_stream; OUT_BUSY with *retry_after set; OUT_REFUSED, OUT_GONE or
 * OUT_DOWN with w->stream holding the failed call (its answer, or the
 * stream's `event: error`, read as one); or -sig when a stop signal came
 * (w->stream freed: a grant nobody heard of ends with the connection). */
int stream_acquire(struct watch *w, const struct opts *o, long long *retry_after);

#endif
