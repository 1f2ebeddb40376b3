/* undo.h -- an acquisition whose outcome is unknown is undone.
 *
 * When acquire.lua fails by timeout or a lost connection, Redis may still
 * run it (the command was in its socket) or may have run it already, and
 * the client, answered 503, will never use the grant.  The Redis layer
 * makes the outcome settle: the next connection to that master first kills
 * the old one (CLIENT KILL ID .. ADDR .., redis.c), so the attempt either
 * ran before anything sent after it or never runs.  undo_hold then sends
 * release.lua for exactly that attempt's token on the new connection, and
 * tries again (every UNDO_RETRY_MS) until Redis answers or the lease the
 * attempt asked for has ended (nothing is left to undo then).
 *
 * A token the gateway made for that request is held by nobody else, and
 * the attempt can only have granted a new hold (a waiting request's own
 * earlier grant is answered, never re-entered: acquire.lua), so one
 * release undoes exactly it.  A client's token may hold levels of its own:
 * its attempts carry an id, and the undo releases only the level that id
 * took.  A session-bound hold is undone the same way (release.lua takes
 * it off its session), bounded by --max-lease-ms, past which a session
 * Redis could not renew has ended.  A multi-lock group is undone name by
 * name with its attempt's id (multi.c): each name's record says whether
 * that attempt took a level there.  Every Redis mode (in quorum mode on
 * each master by itself), locks, shared locks, permits, multi-locks and
 * session-bound holds.  Counted in lockgate_undo_started_total
 * and, as each settles, lockgate_undo_given_back_total, _nothing_total or
 * _expired_total; logged by name, never with a token. */
#ifndef LOCKGATE_UNDO_H
#define LOCKGATE_UNDO_H

#include "server/redis.h"

#define UNDO_RETRY_MS 100

/* Undoes the attempt of token on the hold whose hash key is hash (message:
 * "lock:NAME" or "sem:NAME", holds.h) that asked for ttl_ms; on the
 * calling worker's thread.  attempt: the attempt's id
 * (acquire.lua ARGV 15) when it carried one: then only the level that
 * attempt took is released, once (release.lua ARGV 4); "" or NULL for a
 * token the gateway made, whose only possible hold is that attempt's. */
void undo_hold(const char *hash, const char *message, const char *token, const char *attempt,
               long long ttl_ms);

/* The same on master node alone (quorum mode; any other mode: the
 * backend's master): for a request that ends without a grant while some
 * masters never answered its last attempt, though others did (a round
 * answered 409 while a master timed out: holds.c, multi.c). */
void undo_hold_at(int node, const char *hash, const char *message, const char *token,
                  const char *attempt, long long ttl_ms);

/* Quorum mode: one level of token's hold on master node alone (what a
 * failed round's attempt took there: a new hold or a re-entry level; the
 * level attempt took when it is not ""); done(arg, ...) gets the answer. */
void undo_give_back_at(int node, const char *hash, const char *message, const char *token,
                       const char *attempt, redis_cb done, void *arg);

#endif
