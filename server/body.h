/* body.h -- typed access to the JSON request body.
 *
 * Each *_or_reply helper returns GW_OK with the value, or GW_REPLIED after
 * answering 400 itself, so a handler reads as a straight line:
 *     if (body_int_or_reply(req, "ttl_ms", 30000, 100, 86400000, &ttl)) return;
 * A field that is absent or null takes its default.  Unknown fields are
 * ignored. */
#ifndef LOCKGATE_BODY_H
#define LOCKGATE_BODY_H

#include <stddef.h>

struct gw_request;

#define GW_OK      0
#define GW_REPLIED 1

/* Parses the body as a JSON object (an empty body is {}).  Answers
 * 400 invalid_json when it is not one. */
int body_parse_or_reply(struct gw_request *req);

/* An integer field within [lo, hi]; *present says whether it was given. */
int body_int_or_reply(struct gw_request *req, const char *field, long long def, long long lo,
                      long long hi, long long *out, int *present);

int body_bool_or_reply(struct gw_request *req, const char *field, int def, int *out);

/* A string field of at most maxlen bytes; *out is NULL when absent and
 * otherwise points into the parsed body (valid until the request ends). */
int body_string_or_reply(struct gw_request *req, const char *field, size_t maxlen,
                         const char **out);

#endif
