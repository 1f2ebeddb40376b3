/* state_stream.h -- a name's state as an event stream: read at once, then
 * again at each announced change, for as long as the client stays.  The
 * stream marks the name as watched (watch.lua), so every change of holder
 * is announced on the release channel and wakes it (lua/_holders.lua, THE
 * RULE); an expiry, which nobody announces, by its timer set to the
 * lease's end; and it reads the name again once a heartbeat
 * (--stream-heartbeat-ms), writing a comment line.  Two changes closer
 * together than one read reach it as the later state only.
 *
 * Its users say what to send for each state read: elections.c (observe:
 * leader and value) and watch.c (a lock's or semaphore's changes, with
 * the watch index as the event id). */
#ifndef LOCKGATE_STATE_STREAM_H
#define LOCKGATE_STATE_STREAM_H

struct gw_request;
struct redis_result;
struct cJSON;

/* Called after each read, in order: res is watch.lua's answer (inspect.lua's
 * shape, {1, holders, count, fence, ttl_ms, owner, kind, limit, key_id,
 * index} or {-1}: the one that stands for the backend's), index its watch
 * index (0 when nobody holds it).  It sends what it wants with
 * state_stream_event. */
typedef void (*state_stream_fn)(struct gw_request *req, const struct redis_result *res,
                                long long index, void *arg);

/* Starts streaming hash's state to req ("<prefix>lock:{NAME}", its
 * announcements' key "lock:NAME"), calling fn(.., arg) after each read;
 * arg is freed with free_arg (may be NULL) with the request.  Answers req
 * in every case: a failure before anything was sent is an HTTP 503. */
void state_stream_start(struct gw_request *req, const char *hash, const char *key,
                        state_stream_fn fn, void *arg, void (*free_arg)(void *));

/* Writes one event ("id: ID" when id is not NULL, "event: NAME", data as
 * one line of JSON, taken over), opening the stream first. */
void state_stream_event(struct gw_request *req, const char *id, const char *name,
                        struct cJSON *data);

#endif
