/* waiters.h -- requests waiting for a busy lock, semaphore permit or fair
 * turn, kept on their worker's loop without a thread or a poll each.
 *
 * A parked waiter is woken (its retry() called) by whichever comes first:
 *   - a release of its key, announced on Redis pub/sub (waiters_on_release):
 *     the earliest local waiter of that key is woken, and the earliest fair
 *     one, never the whole list (no thundering herd; the scripts pass the
 *     wake-up on when there is room for more), and every watcher of it;
 *   - its wake time: the holder's lease end, or its own deadline;
 *   - its client hanging up (give_up(w, 1)), seen by epoll on its socket.
 * Each worker has its own set (struct waiters), bound to its thread with
 * waiters_bind; the functions below act on the calling thread's set, and a
 * waiter is parked, woken and unparked on the thread that parked it.  The
 * worker wires the hooks: releases from its Redis subscriber, its loop's
 * timeout and turn end. */
#ifndef LOCKGATE_WAITERS_H
#define LOCKGATE_WAITERS_H

#include <stddef.h>
#include <stdint.h>

struct loop;
struct waiters;

struct waiter {
    /* Set by the owner before waiters_park. */
    const char *key;                 /* "lock:NAME" or "sem:NAME", as published;
                                      the owner keeps it alive while parked */
    int fair;                        /* a fair waiter (woken besides the first) */
    int watch;                       /* a watcher (GET ?watch_ms): woken by every
                                      release of its key, never counted as the
                                      first waiter nor as waiting for a lock */
    int fd;                          /* client socket, watched for hang-up; -1 none */
    uint64_t seen_seq;               /* waiters_release_seq() before the attempt */
    void (*retry)(struct waiter *w); /* try again now */
    void (*give_up)(struct waiter *w, int client_gone); /* stop waiting */

    /* Private to waiters.c. */
    uint64_t arrival;           /* order of its first park, kept for good */
    int64_t wake_ms;            /* when the timer wakes it */
    size_t heap_i;              /* index in the timer heap */
    struct waiter *prev, *next; /* its key's list, in arrival order */
    int parked;                 /* in the heap and the key list */
    int turn;                   /* woken by a release, not yet passed on */
    int turn_due;               /* made due by a pass-on: its wake is a turn */
};

/* A worker's set, whose hang-up watches go on loop l; bound to the thread
 * that runs l; freed after l stopped. */
struct waiters *waiters_new(struct loop *l);
void waiters_bind(struct waiters *w);
void waiters_free(struct waiters *w);

/* Loop hooks (loop.h): ms until the next timer, and the due timers. */
int waiters_timeout_hook(void *arg, int64_t now_ms);
void waiters_due_hook(void *arg, int64_t now_ms);

/* Parks w until wake_ms (monotonic ms) or an event.  If a release of w's key
 * was seen after w->seen_seq, w is retried at once instead. */
void waiters_park(struct waiter *w, int64_t wake_ms);

/* Takes w out (before replying to it); safe if it is not parked. */
void waiters_unpark(struct waiter *w);

/* 1 while w is parked. */
int waiters_parked(const struct waiter *w);

/* A release message "KIND:NAME" arrived. */
void waiters_on_release(const char *key, size_t len);

/* w was woken by a release of its key (its turn) and will not take it: it
 * gives up without trying (its client left, its wait ran out while the
 * gateway was stalled), or its attempt found busy something else than
 * that key (a multi-lock).  The next local waiter of the key after w (and
 * the next fair one) is woken in its place, so the release still lets
 * someone in; each passes on only to those after it, so a chain ends.
 * Does nothing when w was woken by its timer, or passed on already. */
void waiters_pass_on(struct waiter *w);

/* Counter of release messages this thread's set has seen. */
uint64_t waiters_release_seq(void);

/* Milliseconds until the next timer, -1 when none (for epoll_wait). */
int waiters_next_timeout(int64_t now_ms);

/* Wakes every waiter whose time has come. */
void waiters_run_due(int64_t now_ms);

/* The pub/sub connection was re-made: releases may have been missed, so
 * every waiter tries again. */
void waiters_retry_all(void);

/* Called on the worker's thread when the first waiter of a key parks (on
 * 1: what it returns is the key's group) and when the last one leaves
 * (on 0): cluster mode subscribes to a slot's releases once it has waiters
 * there (worker.c wires it to redis_interest). */
void waiters_on_interest(struct waiters *ws, int (*fn)(void *arg, const char *key, int on),
                         void *arg);

/* Every waiter of a key in group tries again soon (at the turn's end): a
 * subscription just made may have missed a release. */
void waiters_retry_group(int group);

/* The gateway is stopping: every waiter gives up (it answers 503). */
void waiters_give_up_all(void);

#endif
