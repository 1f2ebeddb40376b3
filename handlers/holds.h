/* holds.h -- what locks and semaphores share: a holder with a token and a
 * lease, taken by acquire.lua (waiting and fair queues included), extended,
 * released and inspected.  locks.c and semaphores.c parse their requests
 * and call these. */
#ifndef LOCKGATE_HOLDS_H
#define LOCKGATE_HOLDS_H

#include "common/names.h"
#include "server/config.h"
#include <stddef.h>
#include <stdint.h>
#include "server/redis.h"
#include "server/waiters.h"

struct gw_request;
struct cJSON;

enum hold_kind {
    HOLD_EXCLUSIVE = 'x', /* a lock, one holder */
    HOLD_SHARED = 's',    /* a reader lock, any number of holders */
    HOLD_PERMIT = 'p',    /* a semaphore permit, up to limit holders */
};

/* --min-replicas-ack: the script's answer kept until WAIT's arrives.
 * Allocated only when the flag is on. */
struct hold_ack {
    int got_script, got_ack; /* which of the two answers are in */
    long long sverdict;      /* the script's verdict */
    long long sv[5];         /* its values */
    char serr[256];          /* its error, when sverdict is -100 */
    long long acked;         /* replicas WAIT counted, -1 on error */
};

/* An acquisition whose answer is an event stream (handlers/streams.c):
 * holds.c calls these instead of answering while it waits and when it
 * grants.  Any other outcome is answered as usual (reply_*): before the
 * stream opened, as an HTTP answer; after, as its last event. */
struct hold_call;
struct hold_stream_ops {
    /* Busy, and it waits (parks) again: retry_after_ms and why as
     * acquire.lua gives them (1 held, 2 lock-delay, 3 fair waiters ahead). */
    void (*waiting)(struct hold_call *hc, long long retry_after_ms, long long why);
    /* Granted (or re-entered): body is today's grant body, taken over. */
    void (*granted)(struct hold_call *hc, long long verdict, struct cJSON *body);
    /* hc is being freed (with its request). */
    void (*free)(struct hold_call *hc);
};

/* One acquisition, alive from the handler to the reply, across waits.
 * A waiting request keeps one for as long as it waits, so it holds no
 * fixed-size buffers: its strings sit after it, sized to fit. */
struct hold_call {
    struct waiter w;         /* parking state while it waits (first) */
    struct gw_request *req;  /* the request it answers */
    char kind;               /* enum hold_kind */
    int fair;                /* queue in Redis, first come first served */
    int waited;              /* it was parked at least once */
    int queued;              /* an attempt went with its waiter id: it may be queued */
    int own_token;           /* the gateway made req->token for this request */
    int backoff_ms;          /* parked through a Redis outage: the last pause */
    int acks_wanted;         /* replicas that must have the write, 0 off */
    long long ttl_ms;        /* lease length */
    long long wait_ms;       /* how long it may wait, 0 = try once */
    long long max_hold_ms;   /* 0: none */
    long long lock_delay_ms; /* 0: none */
    long long limit;         /* semaphores: permits */
    int64_t start_ms;        /* arrival (monotonic) */
    int64_t deadline_ms;     /* start + wait_ms */
    int64_t attempt_ms;      /* when the current attempt was sent */
    struct hold_ack *ack;    /* NULL unless acks_wanted */
    char waiter_id[32];      /* its id in the fair queue (liveness.h), "" if none */
    char attempt_id[32];     /* the request's id in its holder record, so that trying
                                again after an answer was lost finds its own grant
                                rather than re-enter (acquire.lua ARGV 15), and an
                                undo releases that level only (undo.h): a waiting
                                request's, or one with the client's token; "" else */
    int live_slot;           /* what liveness_waiter_join returned */
    uint32_t unsure;         /* quorum mode: masters (bit i: master i) that did not answer
                                its last attempt there, though it may have run (a
                                timeout, a lost connection): if the request ends
                                without a grant, undone there (hold_call_free) */
    const char *owner;       /* informational, "" for none (after the struct) */
    char *session;           /* Session header: the session it is bound to, or NULL
                                (malloc'd, freed with it); set before hold_acquire,
                                the header is not read */
    uint32_t quota;          /* its key's holds_at_once, 0: none (quota_holds.h) */
    char *quota_member;      /* its entry in the key's ledger (malloc'd), or NULL */
    int quota_added;         /* this attempt's take entered it: drop it if no grant */
    /* The grant's body as the resource shows it (elections.c: value and
     * term), from the lock's; takes it over.  NULL: the lock's, with its
     * Location header; else the reshape adds its own. */
    struct cJSON *(*reshape)(struct hold_call *hc, struct cJSON *grant);
    const struct hold_stream_ops *stream; /* answered as an event stream, or NULL */
    void *stream_arg;                     /* the stream's own state */
    /* w.key, "lock:NAME" or "sem:NAME", also sits after the struct. */
};

/* A zeroed hold_call of this kind for req (req->name set), with its owner
 * ("" or NULL for none) and waiter key; never NULL. */
struct hold_call *hold_call_new(struct gw_request *req, enum hold_kind kind, const char *owner);

/* Frees hc (a request's ctx_free, which hold_acquire sets). */
void hold_call_free(void *ctx);

/* Starts the acquisition hc (filled by the caller, req->name and
 * req->token set); replies when it is done.  hc becomes req->ctx. */
void hold_acquire(struct gw_request *req, struct hold_call *hc);

/* PATCH, DELETE and GET read the same request for both kinds: these parse
 * it (name, Lock-Token, ttl_ms) and answer. */
void hold_extend(struct gw_request *req, int semaphore);
void hold_release(struct gw_request *req, int semaphore);
void hold_inspect(struct gw_request *req, int semaphore);

/* Answers GET from inspect.lua's reply (watch.lua's too); req->aux is 1
 * for a semaphore. */
struct redis_result;
void hold_inspect_done(void *arg, const struct redis_result *res);

/* GET's body for name from inspect.lua's (or watch.lua's) answer, or
 * {"name", "holders": 0} when nobody holds it. */
struct cJSON *hold_state_json(const char *name, int semaphore, const struct redis_result *res);

/* ---- for the backends (backend.h) ------------------------------------------------
 * What an acquisition's Redis round needs from holds.c, and what it calls
 * back with. */

#define HOLD_KEY_MAX       (GW_PREFIX_MAX + NAME_MAX_LEN + 16)
#define HOLD_FENCE_KEEP_MS "10000" /* as in _holders.lua: the last fence outlives use */

struct hold_keys {
    char hash[HOLD_KEY_MAX];        /* <prefix>lock:{name} or <prefix>sem:{name} */
    char queue[HOLD_KEY_MAX + 8];   /* ...:q, fair waiters by arrival */
    char qdead[HOLD_KEY_MAX + 8];   /* ...:qd, their deadlines */
    char message[NAME_MAX_LEN + 8]; /* "lock:NAME", published on release */
};

/* The keys of name's hold; the name sits in a hash tag, so all keys of one
 * lock share a Redis Cluster slot. */
void hold_keys(const char *name, int semaphore, struct hold_keys *k);

/* Acts on one attempt's outcome (the backend's, reduced): reply, or park
 * the request to try again.  See backend_acquire_cb for v. */
void hold_attempt_done(struct hold_call *hc, long long verdict, const long long *v,
                       const char *err);

/* Whether an undelivered grant of this verdict is given back (holds.c). */
int hold_gives_back(const struct hold_call *hc, long long verdict);

/* Answers 503 backend_unavailable now, with why, leaving the fair queue;
 * no riding out (contrast hold_attempt_done with VERDICT_ERROR). */
void hold_fail(struct hold_call *hc, const char *why);

/* The client will never learn it got the hold: give it back (req->ctx is
 * its hold_call). */
void hold_give_back(struct gw_request *req);
/* The same for token's hold of name, with no request (streams.c: a
 * granted stream hold keeps no hold_call). */
void hold_give_back_token(const char *name, const char *token, int semaphore);
/* The same on the one master of the name (single and cluster backends),
 * calling done(arg, ...) once Redis has answered. */
void hold_give_back_then(struct gw_request *req, redis_cb done, void *arg);

/* A fair waiter that stops waiting leaves the queue at once. */
void hold_leave_queue(struct hold_call *hc);

/* Element i of a script's array reply when it is an integer, else 0. */
long long hold_reply_int(const struct redis_result *res, size_t i);
/* How many dead gateways' queue entries an acquire.lua answer dropped. */
long long hold_acquire_dropped(const struct redis_result *res);

#endif
