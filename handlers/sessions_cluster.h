/* sessions_cluster.h -- sessions in Redis Cluster mode, where a session's
 * key and its holds' hashes live in different slots and no one script can
 * read both (sessions_cluster.c says how expiry is observed there). */
#ifndef LOCKGATE_SESSIONS_CLUSTER_H
#define LOCKGATE_SESSIONS_CLUSTER_H

#include <stddef.h>

struct hold_call;

/* The cluster backend's acquire for a session-bound hold (hc->session
 * set): argv as holds.c built it, the session's key as KEYS[4], the
 * slot's liveness hash as KEYS[5].  Answers
 * once through hold_attempt_done, like any backend acquire. */
void sessions_cluster_acquire(struct hold_call *hc, int nargs, const char *const *argv,
                              const size_t *lens);

#endif
