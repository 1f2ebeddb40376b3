/* scripts.h -- the Lua scripts compiled into the binary from lua/ (one file
 * per atomic operation; see the Makefile for how _holders.lua is shared).
 *
 * Each script makes one decision atomically inside Redis.  Its SHA-1 is
 * computed at start, so EVALSHA can be sent right behind SCRIPT LOAD.
 *
 * Memory (Redis 7's script flags, the first line of a script): every
 * script that lets go or adds no memory (release, force, session end and
 * renewal, multi-lock release and extension, dequeue, extend, and Cluster
 * mode's session_slot and session_bind) says allow-oom, so a holder can let
 * go when Redis is full under noeviction; the scripts that grant (acquire,
 * multi_acquire, session_create) say no allow-oom, so Redis refuses them
 * whole, before they run, with its OOM error (answered 503
 * redis_out_of_memory, reply.h).  Each also says allow-cross-slot-keys,
 * which keeps what a script without flags may do. */
#ifndef LOCKGATE_SCRIPTS_H
#define LOCKGATE_SCRIPTS_H

#include <stddef.h>

enum script_id {
    SCRIPT_ACQUIRE, /* lock, shared lock or permit; fair queue */
    SCRIPT_EXTEND,
    SCRIPT_RELEASE,
    SCRIPT_INSPECT,
    SCRIPT_DEQUEUE,        /* a fair waiter gives up */
    SCRIPT_ID_LEASE,       /* a block of id sequence numbers */
    SCRIPT_FENCE_RAISE,    /* quorum mode: lift a name's last fence */
    SCRIPT_ID_READ,        /* quorum mode: read a namespace's high-water mark */
    SCRIPT_ID_CLAIM,       /* quorum mode: claim a block above it */
    SCRIPT_SESSION_CREATE, /* sessions (handlers/sessions.c) */
    SCRIPT_SESSION_RENEW,
    SCRIPT_SESSION_READ,
    SCRIPT_SESSION_END,   /* ends it and releases its holds */
    SCRIPT_MULTI_ACQUIRE, /* several locks, all or nothing (handlers/multi.c) */
    SCRIPT_MULTI_RELEASE,
    SCRIPT_MULTI_EXTEND,
    SCRIPT_LIST,         /* a page of held names (listing.c) */
    SCRIPT_FORCE,        /* end every hold on a name (force.c) */
    SCRIPT_WATCH,        /* inspect and mark for a watcher (watch.c) */
    SCRIPT_LIST_CLUSTER, /* list.lua allowed several slots (cluster mode) */
    SCRIPT_SESSION_BIND, /* cluster mode: a hold's side in its session's slot */
    SCRIPT_SESSION_SLOT, /* cluster mode: a session's holds in one slot */
    SCRIPT_LIVENESS,     /* cluster mode: a gateway alive in a slot (liveness.c) */
    SCRIPT_PROCLAIM,     /* an election's leader changes its value (elections.c) */
    SCRIPT_QUOTA,        /* a key's ledger of holds (handlers/quota_holds.c) */
    SCRIPT_WATCH_LOG,    /* an event stream reads a name's change log (state_stream.c) */
    SCRIPT_HOLDOFF,      /* a data loss's hold-off recorded in Redis (lossguard.h) */
    SCRIPT_COUNT
};

struct script {
    const char *file;         /* "acquire.lua", for logs */
    const unsigned char *src; /* the text, not NUL-terminated */
    size_t len;               /* bytes in src */
    char sha[41];             /* SHA-1 of src in hex, filled by scripts_init */
    int marker;               /* it grants: the Redis layer appends the master's marker
                                 key and the value last read there (lua/_marker.lua) */
    int live;                 /* it judges holders: outside Redis Cluster the Redis
                                 layer declares the liveness hash, where live holders'
                                 leases are (lua/_holders.lua, "sessions") */
};

/* Computes every script's SHA-1; call once before the Redis layer starts.
 * keycheck (tests only, every mode): every script but the
 * listings starts with lua/keycheck.lua, which makes a script's access to
 * a key it did not declare an error. */
void scripts_init(int keycheck);

const struct script *script_get(enum script_id id);

#endif
