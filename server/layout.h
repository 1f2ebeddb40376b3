/* layout.h -- the version of the key layout in Redis, and a gateway that
 * does not understand the one it finds refusing to touch it (#31).
 *
 * A deployment upgrades one replica at a time, so two gateway versions
 * share one Redis for a while.  When a version changes what the keys hold
 * in a way the other cannot read safely, the two must never both act on
 * the same names.  Each master keeps <prefix>layout, a decimal version
 * with no TTL: the first gateway that finds it missing sets it (SETNX, its
 * own version), and every gateway reads it on each new command connection
 * and every MEMGUARD_PERIOD_MS on it (redis.c sends, this file reads).  No
 * gateway ever overwrites it: moving a Redis to a new layout is an
 * operator's step (README, "Upgrading").  In Redis Cluster mode the key
 * sits in one slot, so it is one version for the whole cluster, read on
 * the connection to the node that serves it (the other nodes answer
 * MOVED, which is ignored).
 *
 * A gateway serves a Redis whose version is its own or one it declares it
 * can share (LAYOUT_SHARES: a compatible change keeps the older version
 * in Redis, and old and new gateways serve the same names).  Any other:
 * every /v1/ request is answered 503 layout_unsupported naming the version
 * found and the one it needs, before any script runs, and /readyz says
 * the same; nothing of the data is read or written.  /readyz is 503 until
 * the first answer, so a load balancer sends nothing before it; a request
 * that comes anyway in that first round trip is served (refusing it broke
 * every client that calls right after the port opens), and on its
 * connection the read went ahead of it, so only that round trip's
 * requests can meet a layout not yet seen.
 *
 * A version changed under a running gateway (the key deleted, then set by
 * a gateway of another version) is seen within MEMGUARD_PERIOD_MS;
 * lossguard.h holds grants off after such a loss anyway in single and
 * Sentinel mode. */
#ifndef LOCKGATE_LAYOUT_H
#define LOCKGATE_LAYOUT_H

#include <stddef.h>

/* The layout this build writes.  1: the first version kept in Redis
 * (README, "Upgrading", lists what came before).  2 (#34): gateways'
 * liveness is a field of a declared hash (<prefix>gw) in every mode, and a
 * session-bound hold carries its session's lease in its own hash in every
 * mode, so a renewal must push the new end to every hold: a layout-1
 * gateway renewing a session would leave such holds to expire under a
 * live session, and each side counts the other's fair waiters as dead.
 * Not shared with 1.  3 (#33): outside Redis Cluster a session-bound hold
 * made in a session that keeps a liveness field is live: its lease is that
 * field of <prefix>gw, its record's lease end a mark (lua/_layout.lua,
 * LIVE_EXP), so that a renewal is one write however many holds the
 * session carries; a layout-2 gateway would read that mark as a lease
 * that never ends, holding the name for an hour after its gateway died.
 * Not shared with 2 but in Redis Cluster mode, where it writes what layout
 * 2 writes (layout.c).  A test build may carry another
 * (LOCKGATE_TEST_LAYOUT_VERSION, layout_init). */
#define LAYOUT_VERSION 3

/* What one connection last read of its master's version. */
struct layout_seen {
    long long version; /* 0 before the first read */
    int foreign;       /* counted as not understood (layout.c) */
};

/* Before the workers start: the version this gateway writes and needs
 * (LAYOUT_VERSION unless a test says otherwise). */
void layout_init(long long version, int cluster);
long long layout_version(void);

/* The version read on a connection to host:port ("" or NULL: no answer,
 * e.g. MOVED in Cluster mode: nothing learnt). */
void layout_note(struct layout_seen *seen, const char *host, int port, const char *value);

/* 1 while some master holds a version this gateway does not understand,
 * with the text for the answer in out; 0 otherwise. */
int layout_refusing(char *out, size_t cap);
/* 1 once a version was read from some master (0: not yet: /readyz 503). */
int layout_known(void);

#endif
