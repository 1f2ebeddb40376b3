/* session.h -- `lockctl run --session FILE`: several runs on one host share
 * one gateway session (POST /v1/sessions) and one renewer process.
 *
 * FILE holds the session's token.  Every run holds a shared flock(2) on
 * FILE while it runs; FILE.lock (an exclusive flock held for moments)
 * serialises looking at FILE, starting a session, and the renewer's check
 * for runs.  The first run that finds no live session starts one and a
 * renewer (this binary, exec'd detached as `lockctl _session-renewer`),
 * which renews it every third of its TTL while any run holds FILE, and
 * ends it (DELETE, releasing whatever it still carries) and empties FILE
 * once none does. */
#ifndef LOCKCTL_SESSION_H
#define LOCKCTL_SESSION_H

/* Joins (or starts) the session in file with this TTL: sets ctl_session
 * and keeps a shared lock on file until the process ends.  Returns 0, or
 * an exit status after saying why. */
int session_join(const char *file, long long ttl);

/* The renewer: `lockctl _session-renewer URL FILE TOKEN TTL`. */
int session_renewer(int argc, char **argv);

#endif
