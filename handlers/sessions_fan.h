/* sessions_fan.h -- a session's renewal, end or read reaching its holds,
 * in every mode.
 *
 * Each session-bound hold carries its session's lease in its own hash
 * (lua/_holders.lua, "sessions"), and no script touches a key it does not
 * declare: the session's scripts (session_renew.lua, session_end.lua,
 * session_read.lua) act on the session's key and list its holds, and this
 * then runs session_slot.lua on the listed holds' hashes, declared: one
 * call per hash slot in Redis Cluster mode, one call per hundred holds in
 * the other modes (on every master in quorum mode). */
#ifndef LOCKGATE_SESSIONS_FAN_H
#define LOCKGATE_SESSIONS_FAN_H

#include <stddef.h>

struct gw_request;
struct redis_result;
struct cJSON;

/* What a fan-out over the session's holds did, for its finish. */
struct session_fan;
int session_fan_failed(const struct session_fan *f);        /* calls Redis did not answer */
long long session_fan_acted(const struct session_fan *f);   /* holds the scripts acted on */
const char *session_fan_error(const struct session_fan *f); /* the first failure's text */
/* Adds {kind, name, token} for each hold still held to array holds. */
void session_fan_list(const struct session_fan *f, struct cJSON *holds);

/* Runs session_slot.lua op ('p' push ttl_ms arg, 'r' release, 'c' check)
 * on the holds that the session script's answers list from element first
 * on, as "kind:name", token pairs: results[0..n) are every master's
 * answer (one outside quorum mode; those whose verdict is not 1 are
 * skipped), their lists joined.  All calls go at once.  When every call
 * has answered, finish(req, f, body) runs (body: the caller's, handed
 * back, may be NULL), then the holds found gone are taken off the
 * session's key (req->token's).  The results are read before this
 * returns. */
void sessions_fan(struct gw_request *req, const struct redis_result *results, int n, size_t first,
                  char op, long long arg, struct cJSON *body,
                  void (*finish)(struct gw_request *req, const struct session_fan *f,
                                 struct cJSON *body));

/* The same for a session no request names (stream_session.c: the session
 * that carries a worker's stream holds): token is the session's, and
 * finish gets ctx instead of a request. */
void sessions_fan_ctx(const char *token, void *ctx, const struct redis_result *results, int n,
                      size_t first, char op, long long arg, struct cJSON *body,
                      void (*finish)(void *ctx, const struct session_fan *f, struct cJSON *body));

#endif
