/* requests.h -- the lock requests lockctl sends. */
#ifndef LOCKCTL_REQUESTS_H
#define LOCKCTL_REQUESTS_H

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

/* Acquires the lock o->name under token (NULL: the gateway makes one),
 * waiting until deadline (absolute; LLONG_MAX: forever).  Returns OUT_OK
 * with c holding the answer, OUT_BUSY with *retry_after set,
 * OUT_REFUSED/OUT_GONE/OUT_DOWN with c holding the failed call, or -sig
 * when a stop signal came (c is then freed).  How it waits: requests.c. */
int acquire_loop(const struct opts *o, const char *token, struct call *c, long long *retry_after,
                 long long deadline);

#endif
