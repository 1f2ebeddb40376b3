/* offload.h -- work that must wait (a blocking call), run off the loops.
 *
 * A worker's loop must never block; the rare work that has to (idgen's
 * lease of an id block, which waits for Redis) is handed to a small, fixed
 * pool of helper threads, and its completion comes back to the loop that
 * handed it over, where it may reply.  Only for the rare path: the common
 * one stays on the worker (handlers/ids.c tries the current block first). */
#ifndef LOCKGATE_OFFLOAD_H
#define LOCKGATE_OFFLOAD_H

#include "server/loop.h"

struct offload_job {
    struct loop_task task;               /* first: the way back to `home` */
    struct offload_job *next;            /* the pool's queue */
    struct loop *home;                   /* the loop that handed it over */
    void (*work)(struct offload_job *j); /* on a helper thread: may block */
    void (*done)(struct offload_job *j); /* then on home's thread */
    void (*lost)(struct offload_job *j); /* instead of done when home has
                                             stopped (on the helper; frees) */
};

/* Starts n helper threads; 0 or -1. */
int offload_start(int n);

/* Hands j over (j->work, done, lost set); from a loop's thread. */
void offload_run(struct offload_job *j);

/* Lets the queued jobs finish, then stops and joins the helpers. */
void offload_stop(void);

#endif
