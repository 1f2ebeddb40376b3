/* stream_session.h -- the sessions that carry a worker's stream holds
 * (handlers/streams.c): one session per worker and ttl, renewed for all.
 *
 * A hold bound to its connection has no lease of its own: it is bound to
 * a session (lua/session_*.lua) that the worker owns, one per ttl_ms its
 * streams asked for, renewed every third of that ttl while it carries
 * streams.  Each hold carries its session's lease in its own hash (key
 * layout 2, lua/_holders.lua "sessions"), so a renewal is session_renew.lua
 * on the session's key, then session_slot.lua pushing the new end to the
 * holds it lists, a hundred a call (sessions_fan.h): O(holds) in Redis per
 * interval, not the O(1) issue 33 asks for (bench/RESULTS.md).
 * If the gateway dies, nobody renews and the session, with every hold it
 * carries, ends ttl_ms after its last renewal, as a lease would.  A session
 * that carries nothing more is ended (session_end.lua).
 *
 * A member is told when its session is lost: Redis no longer has it (it
 * lost its data, or a renewal came after the end), or no renewal reached
 * Redis before the end.  Every mode, through the backend: in quorum mode
 * the backend's eval goes to every master and a quorum decides; in Redis
 * Cluster mode the session's key lives in its own slot, a hold is bound to
 * it by the cluster backend's acquire (sessions_cluster.h), and the fan-out
 * pushes each renewal slot by slot, whichever masters its holds are on. */
#ifndef LOCKGATE_STREAM_SESSION_H
#define LOCKGATE_STREAM_SESSION_H

struct stream_session;

/* One stream hold's place in its session; embedded in the caller's state. */
struct ss_member {
    /* Set by the caller before stream_session_join. */
    void (*ready)(struct ss_member *m, const char *token, const char *why); /* the session's
                                 token (why NULL), or NULL and why it could not be made */
    void (*lost)(struct ss_member *m, const char *reason); /* the session ended under it */

    /* Private to stream_session.c. */
    struct stream_session *ss;     /* the session it is in, NULL when out */
    struct ss_member *prev, *next; /* the session's members */
};

/* Puts m in the calling worker's session for ttl_ms (made first when there
 * is none: ready is called once it is, at once when it is there). */
void stream_session_join(struct ss_member *m, long long ttl_ms);

/* Takes m out (its hold released or lost); the last member out ends the
 * session.  Safe when m is in none. */
void stream_session_leave(struct ss_member *m);

#endif
