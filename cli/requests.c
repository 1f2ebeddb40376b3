/* requests.c -- building the lock requests, and acquiring (with its waits
 * and retries), which `acquire` and `run` share. */
#include "cli/requests.h"
#include "cli/answer.h"
#include "cli/ctl.h"
#include "common/alloc.h"

#include <stdio.h>

/* "locks", or "elections" for `lockctl elect` (requests_for_elections). */
static const char *resource = "locks";

void requests_for_elections(void) { resource = "elections"; }
int requests_elections(void) { return resource[0] == 'e'; }

void lock_path(char *out, size_t cap, const char *name) {
    snprintf(out, cap, "/v1/%s/%s", resource, name);
}

void add_int(cJSON *o, const char *key, long long v) {
    alloc_check(cJSON_AddNumberToObject(o, key, (double)v));
}

long long acquire_wait_ms(const struct opts *o, long long deadline) {
    long long left = o->wait < 0 ? CTL_SERVER_WAIT_MAX : max_ll(0, deadline - now_ms());
    return min_ll(left, CTL_SERVER_WAIT_MAX);
}

cJSON *acquire_body(const struct opts *o, long long wait_ms) {
    cJSON *b = alloc_check(cJSON_CreateObject());
    if (o->ttl >= 0) add_int(b, "ttl_ms", o->ttl);
    if (requests_elections()) { /* a campaign: its value, and how long it waits */
        alloc_check(cJSON_AddStringToObject(b, "value", o->value ? o->value : ""));
        add_int(b, "wait_ms", wait_ms);
        return b;
    }
    if (wait_ms > 0) add_int(b, "wait_ms", wait_ms);
    if (o->shared) alloc_check(cJSON_AddStringToObject(b, "mode", "shared"));
    if (o->fair) alloc_check(cJSON_AddBoolToObject(b, "fair", 1));
    if (o->owner) alloc_check(cJSON_AddStringToObject(b, "owner", o->owner));
    if (o->max_hold >= 0) add_int(b, "max_hold_ms", o->max_hold);
    if (o->lock_delay >= 0) add_int(b, "lock_delay_ms", o->lock_delay);
    return b;
}

/* Between two acquire attempts (see acquire_loop for the policy): the
 * attempt in c found the lock busy or the gateway down (out). */
int acquire_pause(const struct opts *o, struct call *c, enum outcome out, long long deadline,
                  struct acquire_retry *st) {
    long long left = deadline - now_ms();
    long long pause = st->backoff;
    if (out == OUT_BUSY) {
        st->retry_after = jint(c->json, "retry_after_ms", 1000);
        pause = min_ll(pause, max_ll(st->retry_after, 1));
    }
    if (left <= 0) return 1;
    if (ctl_verbose || (out == OUT_DOWN && !st->warned)) {
        /* Said once even without -v: a wrong --url must not wait mutely. */
        char why[768];
        call_why(c, why, sizeof why);
        if (ctl_verbose)
            ctl_say("acquire '%s': %s; trying again in %lld ms", o->name,
                    out == OUT_BUSY ? "busy" : why, min_ll(pause, left));
        else
            ctl_say("acquire '%s': %s; trying again while --wait lasts", o->name, why);
        st->warned = out == OUT_DOWN;
    }
    call_free(c);
    int sig = sleep_ms(min_ll(pause, left));
    if (sig) return -sig;
    st->backoff = min_ll(st->backoff * 2, 1000);
    return 0;
}

/* Acquires the lock o->name under token (NULL: the gateway makes one),
 * waiting up to o->wait.  The gateway is asked to wait (wait_ms) and, when
 * it answers lock_busy with time left -- a gateway that does not wait, or a
 * wait longer than one request may ask -- lockctl tries again after
 * retry_after_ms, the time left, or a backoff from 50 ms to 1 s, whichever
 * is shortest (the backoff notices a release before the holder's lease
 * would have run out).  With time left, a gateway that cannot be reached
 * or answers 5xx is tried again too.
 *
 * deadline is absolute (now_ms() + o->wait; LLONG_MAX to wait forever).
 * Returns OUT_OK with c holding the answer, OUT_BUSY with *retry_after set,
 * OUT_REFUSED/OUT_GONE/OUT_DOWN with c holding the failed call, or -sig
 * when a stop signal came (c is then freed). */
int acquire_loop(const struct opts *o, const char *token, struct call *c, long long *retry_after,
                 long long deadline) {
    char path[256];
    lock_path(path, sizeof path, o->name);
    struct acquire_retry st = {.backoff = 50};
    for (;;) {
        long long ask = acquire_wait_ms(o, deadline);
        call_start(c, "POST", path, token, acquire_body(o, ask), ask + CTL_REQUEST_MS);
        int sig = call_finish(c);
        if (sig) {
            call_free(c);
            return -sig;
        }
        enum outcome out = call_outcome(c);
        if (out == OUT_OK || out == OUT_REFUSED || out == OUT_GONE) return out;
        int next = acquire_pause(o, c, out, deadline, &st);
        *retry_after = st.retry_after;
        if (next) return next < 0 ? next : (int)out;
    }
}
