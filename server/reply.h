/* reply.h -- the only way a handler answers: JSON, text, or problem+json.
 *
 * Every reply_* call completes the request (it may be called from the Redis
 * thread); a handler replies exactly once.  Headers are added before. */
#ifndef LOCKGATE_REPLY_H
#define LOCKGATE_REPLY_H

#include <stddef.h>

struct gw_request;
struct cJSON;

/* The stable error codes of the contract (openapi.yaml, the Problem schema's
 * code enum: keep in step with it); problem_info() maps each to its HTTP
 * status and title. */
enum gw_code {
    CODE_INVALID_NAME,
    CODE_INVALID_FIELD,
    CODE_INVALID_JSON,
    CODE_INVALID_ID,
    CODE_INVALID_TOKEN,
    CODE_MISSING_TOKEN,
    CODE_LOCK_BUSY,
    CODE_MODE_MISMATCH,
    CODE_LIMIT_MISMATCH,
    CODE_NOT_HELD,
    CODE_NOT_OWNER,
    CODE_NOT_FOUND,
    CODE_METHOD_NOT_ALLOWED,
    CODE_PAYLOAD_TOO_LARGE,
    CODE_BACKEND_UNAVAILABLE,
    CODE_SHUTTING_DOWN,
    CODE_UNAUTHORIZED,
    CODE_NOT_IMPLEMENTED,
    CODE_TOO_MANY_NAMESPACES,
    CODE_INVALID_REQUEST,
    CODE_NOT_ACCEPTABLE,
    CODE_SESSION_NOT_FOUND, /* sessions (#22) */
    CODE_SESSION_BOUND,
    CODE_SESSION_MISMATCH, /* a re-entry's Session header (#34) */
    CODE_UNAUTHENTICATED,
    CODE_FORBIDDEN,
    CODE_IDS_BEHIND, /* ids (#35) */
    CODE_ID_EPOCH_MISMATCH,
    CODE_REDIS_OUT_OF_MEMORY, /* safety (#28) */
    CODE_REDIS_MAY_EVICT,
    CODE_REDIS_DATA_LOST,
    CODE_LAYOUT_UNSUPPORTED,
    CODE_ORIGIN_FORBIDDEN,  /* browsers (origin.h) */
    CODE_RATE_LIMITED,      /* a key's requests_per_second (quota.h) */
    CODE_QUOTA_EXCEEDED,    /* a key's holds_at_once (handlers/quota_holds.h) */
    CODE_URI_TOO_LONG,      /* libmicrohttpd's 414: the request line (mhd_errors.h) */
    CODE_HEADERS_TOO_LARGE, /* libmicrohttpd's 431: the headers (mhd_errors.h) */
    CODE_TOO_MANY_PREFIXES, /* prefix streams: the gateway's feeds all streamed (prefix_stream.c) */
    CODE_COUNT
};

struct problem_info {
    const char *code;  /* "lock_busy" */
    int status;        /* 409 */
    const char *title; /* "Lock is busy" */
};

const struct problem_info *problem_info(enum gw_code code);

/* Adds a response header; at most HTTP_MAX_HEADERS.  name is a static
 * string (kept, not copied); value is copied. */
void reply_header(struct gw_request *req, const char *name, const char *value);

/* Replies with body serialised as application/json and frees body. */
void reply_json(struct gw_request *req, int status, struct cJSON *body);

/* Replies with a malloc'd body that the request takes over. */
void reply_raw(struct gw_request *req, int status, const char *content_type, char *body,
               size_t len);

/* Replies application/problem+json for code, with detail formatted from fmt.
 * extra, if not NULL, is an object whose members are added and is freed.
 * 503s get Retry-After: 1 unless one was added before.  A backend_unavailable whose detail quotes
 * Redis's OOM error (maxmemory reached under noeviction: a script that
 * would add memory was refused) is answered redis_out_of_memory instead,
 * whichever handler met it: only grants meet it, since every script that
 * lets go runs with allow-oom (scripts.h). */
void reply_problem_with(struct gw_request *req, enum gw_code code, struct cJSON *extra,
                        const char *fmt, ...) __attribute__((format(printf, 4, 5)));

#define reply_problem(req, code, ...) reply_problem_with(req, code, NULL, __VA_ARGS__)

/* Builds the problem+json body alone (for tests and for http.c); the caller
 * frees it with free(). */
char *problem_body(enum gw_code code, struct cJSON *extra, const char *detail);

/* Adds an exact 64-bit integer member (cJSON's doubles would round). */
void json_add_int(struct cJSON *obj, const char *key, long long v);

#endif
