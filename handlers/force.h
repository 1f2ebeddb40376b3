/* force.h -- DELETE /v1/locks/{name}?force=true (and semaphores): an
 * operator ends every hold on a name, whatever the token (lua/force.lua).
 * With auth on this needs the admin grant (see locks_release). */
#ifndef LOCKGATE_FORCE_H
#define LOCKGATE_FORCE_H

struct gw_request;

/* Reads ?force=: returns 1 for "true", 0 when absent or "false", or -1
 * after answering 400 invalid_field for anything else. */
int force_asked_or_reply(struct gw_request *req);

/* Ends every hold on the name, logs it, and answers
 * {"name", "released": true, "holders_ended"} or 404 not_held. */
void force_release(struct gw_request *req, int semaphore);

/* Registers lockgate_forced_releases_total with /metrics; once, at start. */
void force_init(void);

#endif
