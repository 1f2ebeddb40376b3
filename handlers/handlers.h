/* handlers.h -- one function per (resource, method); the table that maps
 * routes to them is handlers/routes.c.  A handler validates, starts at most
 * one Redis call, and replies (reply.h), possibly from that call's callback. */
#ifndef LOCKGATE_HANDLERS_H
#define LOCKGATE_HANDLERS_H

#include "server/config.h"

#include <stddef.h>
#include <stdint.h>

struct gw_request;

/* Settings the handlers read (key prefix, id epoch); set once at start
 * (handlers_init, wiring.c). */
void handlers_set_config(const struct gw_config *cfg);
const struct gw_config *handlers_config(void);

/* Decodes path parameter i into req->name, or answers 400 invalid_name
 * and returns GW_REPLIED. */
int name_param_or_reply(struct gw_request *req, int i);

/* Copies a valid Lock-Token header into req->token.  Returns GW_OK with
 * *present set, or GW_REPLIED after 400 invalid_token, or, when required
 * and absent, 400 missing_token. */
int token_header_or_reply(struct gw_request *req, int required, int *present);

/* Sets req->token to a new token made by the server. */
void token_issue(struct gw_request *req);

/* A 409 lock_busy's extra members: sets Retry-After (whole seconds,
 * rounded up) and returns {"retry_after_ms": ms} (at least 1) to add to. */
struct cJSON *busy_extra(struct gw_request *req, long long retry_after_ms);

/* A request that is already parked rides out a Redis outage: when its
 * attempt fails (why) it tries again, backing off from 50 ms to 1 s, until
 * its own deadline; one that was never parked, or whose failure is final
 * (redis_error_is_final), is answered at once.  Returns when to try again,
 * or 0 when the request is to be answered 503 now.  *backoff_ms starts at
 * 0 and is reset to 0 by the caller after an answer from Redis. */
int64_t outage_retry_at(struct gw_request *req, const char *why, int waited, int64_t deadline_ms,
                        int *backoff_ms);

/* Parks w, req's waiter, until wake_ms (waiters.h), watching req's socket
 * as it is now: the number read at the request's start may since have been
 * closed by libmicrohttpd (its client reset) and even reused by another
 * socket.  Returns 0 parked, or -1 when the client is gone already: then
 * nothing is parked and the caller answers (a request is never parked for
 * nobody). */
struct waiter;
int park_request(struct gw_request *req, struct waiter *w, int64_t wake_ms);

/* locks.c */
void locks_acquire(struct gw_request *req);
void locks_extend(struct gw_request *req);
void locks_release(struct gw_request *req);
void locks_inspect(struct gw_request *req);

/* semaphores.c */
void semaphores_acquire(struct gw_request *req);
void semaphores_extend(struct gw_request *req);
void semaphores_release(struct gw_request *req);
void semaphores_inspect(struct gw_request *req);

/* elections.c: leader election on the lock machinery (/v1/elections/{name}). */
void elections_campaign(struct gw_request *req);
void elections_proclaim(struct gw_request *req);
void elections_resign(struct gw_request *req);
void elections_leader(struct gw_request *req);

/* sessions.c */
void sessions_create(struct gw_request *req);
void sessions_renew(struct gw_request *req);
void sessions_end(struct gw_request *req);
void sessions_inspect(struct gw_request *req);

/* multi.c: several locks at once, all or nothing (POST, PATCH, DELETE
 * /v1/locks with {"names": [...]}). */
void multi_acquire(struct gw_request *req);
void multi_extend(struct gw_request *req);
void multi_release(struct gw_request *req);

/* ids.c */
void ids_next(struct gw_request *req);
void ids_decode(struct gw_request *req);
int ids_init(const struct gw_config *cfg);

/* ops.c */
void ops_healthz(struct gw_request *req);
void ops_readyz(struct gw_request *req);
void ops_metrics(struct gw_request *req);
void ops_openapi(struct gw_request *req);

#endif
