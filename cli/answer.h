/* answer.h -- what the gateway answered, in lockctl's terms. */
#ifndef LOCKCTL_ANSWER_H
#define LOCKCTL_ANSWER_H

#include "cli/http.h"

enum outcome {
    OUT_OK,      /* 2xx */
    OUT_BUSY,    /* 409 lock_busy */
    OUT_GONE,    /* 404 not_held or 409 not_owner: the token holds nothing */
    OUT_REFUSED, /* any other 4xx, and 501: asking again will not help */
    OUT_DOWN,    /* no answer, or 5xx: asking again later may */
};

/* A string member of o, or NULL. */
const char *jstr(const cJSON *o, const char *key);

/* A number member of o, or dflt. */
long long jint(const cJSON *o, const char *key, long long dflt);

/* A number member copied from the raw body as digits: fences may pass 2^53,
 * which a double (cJSON's number) does not hold exactly.  Returns 0 or -1. */
int raw_int(const char *body, const char *key, char *out, size_t cap);

enum outcome call_outcome(const struct call *c);

/* Says in a few words why a call failed, into out. */
void call_why(const struct call *c, char *out, size_t cap);

/* Prints the one-line error for a call that did not succeed and returns
 * the exit status it means.  what names the request ("acquire 'x'"). */
int call_report(const struct call *c, const char *what);

/* The answer's body on stdout, ending with a newline. */
void print_body(const struct call *c);

/* "lock 'NAME' is held by someone else (try again in N s)". */
void say_busy(const char *name, long long retry_after_ms);

#endif
