/* state_stream.h -- a name's changes as an event stream, each one, in
 * order, for as long as the client stays.  The stream marks the name as
 * watched and logged (lua/watch_log.lua), so the script that changes its
 * holders (or an election's value) appends the new state to the name's
 * change log (lua/_holders.lua, "the change log") and announces it on the
 * release channel, which wakes the stream to read the log from the last
 * entry it sent.  An expiry, which nobody announces, is found by the
 * stream's timer set to the lease's end (watch_log.lua logs it).  It reads
 * once a heartbeat (--stream-heartbeat-ms) too, writing a comment line.
 * Each entry's id is the event id: Last-Event-ID resumes from the log;
 * when the log no longer reaches back to it, an `event: gap` says so and
 * the current state follows.
 *
 * Its users say what to send for each state: elections.c (observe: leader
 * and value) and watch.c (a lock's or semaphore's state). */
#ifndef LOCKGATE_STATE_STREAM_H
#define LOCKGATE_STATE_STREAM_H

struct gw_request;
struct redis_result;
struct cJSON;

/* Called for each state, in order: res in inspect.lua's shape ({1,
 * holders, count, fence, ttl_ms, owner, kind, limit, key_id, index} or
 * {-1}), id its log entry's id, to send as the event's id.  It sends what
 * it wants with state_stream_event (a gap event, when one is due, was sent
 * before). */
typedef void (*state_stream_fn)(struct gw_request *req, const struct redis_result *res,
                                const char *id, void *arg);

/* Starts streaming hash's changes to req ("<prefix>lock:{NAME}", its
 * announcements' key "lock:NAME"), calling fn(.., arg) for each; resume,
 * the client's Last-Event-ID (NULL: none), a log entry's id (checked with
 * state_stream_id_ok).  arg is freed with free_arg (may be NULL) with the
 * request.  Answers req in every case: a failure before anything was sent
 * is an HTTP 503. */
void state_stream_start(struct gw_request *req, const char *hash, const char *key,
                        const char *resume, state_stream_fn fn, void *arg,
                        void (*free_arg)(void *));

/* Whether s can be a log entry's id (digits, or digits-digits): a
 * Last-Event-ID a stream may have sent. */
int state_stream_id_ok(const char *s);

/* Writes one event ("id: ID" when id is not NULL, "event: NAME", data as
 * one line of JSON, taken over), opening the stream first. */
void state_stream_event(struct gw_request *req, const char *id, const char *name,
                        struct cJSON *data);

#endif
