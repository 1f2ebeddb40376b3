/* sessions_cluster.h -- sessions in Redis Cluster mode, where a session's
 * key and its holds' hashes live in different slots and no one script can
 * read both (sessions_cluster.c says how expiry is observed there). */
#ifndef LOCKGATE_SESSIONS_CLUSTER_H
#define LOCKGATE_SESSIONS_CLUSTER_H

#include <stddef.h>

struct gw_request;
struct hold_call;
struct redis_result;
struct cJSON;

/* The cluster backend's acquire for a session-bound hold (hc->session
 * set): argv as holds.c built it, the session's key as KEYS[4].  Answers
 * once through hold_attempt_done, like any backend acquire. */
void sessions_cluster_acquire(struct hold_call *hc, int nargs, const char *const *argv,
                              const size_t *lens);

/* What a fan-out over the session's holds did, for its finish. */
struct session_fan;
int session_fan_failed(const struct session_fan *f);        /* slots Redis did not answer */
long long session_fan_acted(const struct session_fan *f);   /* holds the scripts acted on */
const char *session_fan_error(const struct session_fan *f); /* the first failure's text */
/* Adds {kind, name, token} for each hold still held to array holds. */
void session_fan_list(const struct session_fan *f, struct cJSON *holds);

/* Runs session_slot.lua op ('p' push ttl_ms arg, 'r' release, 'c' check)
 * on the holds that res (a session script's answer) lists from element
 * first on, as "kind:name", token pairs: one call per slot, all at once.
 * When every call has answered, finish(req, f, body) runs (body: the
 * caller's, handed back, may be NULL), then the holds found gone are taken
 * off the session's key (req->token's).  res is read before this returns. */
void sessions_cluster_fan(struct gw_request *req, const struct redis_result *res, size_t first,
                          char op, long long arg, struct cJSON *body,
                          void (*finish)(struct gw_request *req, const struct session_fan *f,
                                         struct cJSON *body));

#endif
