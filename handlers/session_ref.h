/* session_ref.h -- a session as a hold refers to it: the `Session` header
 * that binds a hold, and the session's Redis key.  A leaf: holds.c binds
 * holds with it without knowing sessions.c, and sessions.c and
 * sessions_fan.c (which depend on holds, never the reverse) name the
 * same key with it. */
#ifndef LOCKGATE_SESSION_REF_H
#define LOCKGATE_SESSION_REF_H

#include <stddef.h>

struct gw_request;

/* The session's key, "<prefix>session:{token}", into out. */
void session_key(const char *token, char *out, size_t cap);

/* A valid `Session` header, copied into *out (malloc'd; NULL when absent),
 * or GW_REPLIED after 400 invalid_token. */
int session_header_or_reply(struct gw_request *req, char **out);

#endif
