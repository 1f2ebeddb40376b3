/* requests.h -- the lock requests lockctl sends. */
#ifndef LOCKCTL_REQUESTS_H
#define LOCKCTL_REQUESTS_H

#include "cli/answer.h"
#include "cli/http.h"
#include "cli/options.h"

/* /v1/locks/{name}, or /v1/elections/{name} after requests_for_elections
 * (`lockctl elect`: the same acquire, renew and release on an election):
 * names are checked (common/names.h), so never escaped. */
void lock_path(char *out, size_t cap, const char *name);
void requests_for_elections(void);
int requests_elections(void);

/* Adds an integer member to o. */
void add_int(cJSON *o, const char *key, long long v);

/* The body of a POST /v1/locks/{name} from the options; wait_ms as given. */
cJSON *acquire_body(const struct opts *o, long long wait_ms);

/* The wait_ms one acquire request asks for: what is left until deadline,
 * at most what one request may ask. */
long long acquire_wait_ms(const struct opts *o, long long deadline);

/* What acquire_pause keeps from one attempt to the next. */
struct acquire_retry {
    long long backoff;     /* the next pause's cap (ms); start with 50 */
    long long retry_after; /* the gateway's last retry_after_ms */
    int warned;            /* an unreachable gateway was reported */
};

/* After an acquire attempt (c) that found the lock busy or the gateway
 * down (out): unless the wait is over (deadline), reports it when it
 * should, frees c and pauses before the next attempt.  Returns 0 to try
 * again, 1 when the wait is over (c kept, for the report), or -sig when a
 * stop signal came.  The policy: acquire_loop's, in requests.c. */
int acquire_pause(const struct opts *o, struct call *c, enum outcome out, long long deadline,
                  struct acquire_retry *st);

/* Acquires the lock o->name under token (NULL: the gateway makes one),
 * waiting until deadline (absolute; LLONG_MAX: forever).  Returns OUT_OK
 * with c holding the answer, OUT_BUSY with *retry_after set,
 * OUT_REFUSED/OUT_GONE/OUT_DOWN with c holding the failed call, or -sig
 * when a stop signal came (c is then freed).  How it waits: requests.c. */
int acquire_loop(const struct opts *o, const char *token, struct call *c, long long *retry_after,
                 long long deadline);

#endif
