/* access.h -- the gateway's access check for one request: which grant
 * (kind, access) each route needs, and the 401/403 answers.  The keys and
 * the decision itself are server/auth.c's. */
#ifndef LOCKGATE_ACCESS_H
#define LOCKGATE_ACCESS_H

#include "server/auth.h"

struct gw_request;

/* What a route needs; kind ACCESS_OPEN: anyone may call it; ACCESS_KEY: a
 * valid key, whatever its grants, and the handler asks access_may for
 * every name it touches (a listing, a multi-lock, a session). */
#define ACCESS_OPEN (-1)
#define ACCESS_KEY  (-2)
struct access_rule {
    const char *method; /* as in gw_routes */
    const char *path;   /* as in gw_routes */
    int kind;           /* enum auth_kind, or ACCESS_OPEN */
    int access;         /* enum auth_access: AUTH_READ or AUTH_WRITE */
};

/* The rule for route index i of gw_routes, or NULL when the table has none
 * (such a route is refused 403 while auth is on: fail closed). */
const struct access_rule *access_rule_for(int route);

/* Checks req (routed) against its route's rule: mutual TLS, then the API
 * key.  Returns GW_OK (req->key_id set when a key was used), or GW_REPLIED
 * after answering 401 unauthenticated or 403 forbidden. */
int access_or_reply(struct gw_request *req);

/* 1 when req's key may have `want` on name of kind (always 1 with auth
 * off): for handlers that filter what they show, e.g. a listing. */
int access_may(const struct gw_request *req, enum auth_kind kind, const char *name,
               enum auth_access want);

/* For ACCESS_KEY routes, a name the request touches: GW_OK when req's key
 * may have `want` on it (always with auth off), else GW_REPLIED after
 * answering 403 forbidden. */
int access_name_or_reply(struct gw_request *req, enum auth_kind kind, const char *name,
                         enum auth_access want);

/* Sessions are owned by the key that created them (lua/_session.lua):
 * the key id a session script checks the session's owner against, or ""
 * when req may act on any session (keys off, or admin write on every
 * name, prefix ""). */
const char *access_session_who(const struct gw_request *req);

/* Answers 403 forbidden for a session another key created, and logs and
 * counts it like any 403 (the session's token is never logged). */
void access_refuse_session(struct gw_request *req);

#endif
