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
 * Only tokens the gateway made for that request: nobody else holds with
 * them, and the attempt can only have granted a new hold (a waiting
 * request's own earlier grant is answered, never re-entered: acquire.lua),
 * so one release undoes exactly it.  Single, Sentinel and Cluster modes,
 * locks, shared locks and permits.  Counted in lockgate_undo_started_total
 * and, as each settles, lockgate_undo_given_back_total, _nothing_total or
 * _expired_total; logged by name, never with a token. */
#ifndef LOCKGATE_UNDO_H
#define LOCKGATE_UNDO_H

#define UNDO_RETRY_MS 100

/* Undoes the attempt of token on name (semaphore: a permit) that asked for
 * ttl_ms; on the calling worker's thread. */
void undo_hold(const char *name, int semaphore, const char *token, long long ttl_ms);

#endif
