/* quota_holds.h -- an API key's "holds_at_once" (the auth file's
 * "limits"), counted across every gateway in a ledger in Redis
 * (lua/quota.lua): one sorted set per key, members its holds, scores the
 * time each counts until, so a hold that ends by expiry leaves the count
 * by itself.
 *
 * The ledger is its own slot (in Redis Cluster mode the key's holds lie in
 * many), so it is written beside the scripts that grant and release, not by
 * them: a grant is preceded by a take, which enters the hold only when the
 * key has room, and an attempt that grants nothing drops it again.  The
 * key can never hold more than its limit; what can happen is an entry
 * outliving its hold up to its score (a forced release, a lost answer),
 * counting one hold too many for that while (docs/security.md, "Quotas").
 *
 * Calls are made on the loop thread; backend->eval carries them, so in
 * quorum mode every master keeps its ledger and a majority decides. */
#ifndef LOCKGATE_QUOTA_HOLDS_H
#define LOCKGATE_QUOTA_HOLDS_H

#include <stddef.h>
#include <stdint.h>

/* A take's outcome. */
enum quota_verdict {
    QUOTA_TAKEN, /* within the limit: the members are in the ledger */
    QUOTA_OVER,  /* over it: nothing entered */
    QUOTA_ERROR, /* Redis did not answer: nothing known, nothing granted */
};

/* added: members the take entered anew (0 for a re-entry's); retry_ms: when
 * over, until the key's first entry lapses; err: with QUOTA_ERROR. */
typedef void (*quota_take_cb)(void *arg, enum quota_verdict v, int added, long long retry_ms,
                              const char *err);

/* The ledger member of a hold: "<message>|<token>", message "lock:NAME" or
 * "sem:NAME" (holds.h hold_keys).  Returns a malloc'd string. */
char *quota_holds_member(const char *message, const char *token);

/* Enters members (n of them) in key_id's ledger, counting until now + ms,
 * if they fit in limit; bound to session (NULL: none) so that renewing or
 * ending it moves them.  cb is called once, on the loop thread. */
void quota_holds_take(const char *key_id, uint32_t limit, long long ms, const char *session, int n,
                      const char *const *members, quota_take_cb cb, void *arg);
/* Members still in the ledger count until now + ms (an extension, a
 * session-bound grant's real end).  Nobody waits for the answer. */
void quota_holds_set(const char *key_id, long long ms, int n, const char *const *members);
/* Members leave the ledger (a grant that did not happen). */
void quota_holds_drop(const char *key_id, int n, const char *const *members);
/* The same, then done(arg) once Redis has answered (or failed): a release
 * is answered only then, so that the client's next acquisition, through
 * any worker or gateway, finds the room it made. */
void quota_holds_drop_then(const char *key_id, int n, const char *const *members,
                           void (*done)(void *arg), void *arg);
/* A session was renewed to ms from now, or ended (ms < 0): its holds'
 * entries follow, in the ledger of every key that bound one to it (the
 * session's index, quota.lua); then done(arg) (may be NULL), as
 * quota_holds_drop_then. */
void quota_holds_session_then(const char *session, long long ms, void (*done)(void *arg),
                              void *arg);

/* An answer held back until the ledger has answered the drops a release
 * made (quota_holds_drop_then): made with one drop pending; each further
 * drop adds one (quota_reply_expect); quota_reply_done is each drop's
 * done and sends the answer after the last. */
struct gw_request;
struct cJSON;
struct quota_reply;
struct quota_reply *quota_reply_new(struct gw_request *req, int status, struct cJSON *body);
void quota_reply_expect(struct quota_reply *qr);
void quota_reply_done(void *qr);

/* The margin an entry is given over the lease it stands for: a grant runs
 * after the take, at most a command timeout later. */
long long quota_holds_margin_ms(void);

#endif
