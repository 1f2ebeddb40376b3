/* loop.h -- one epoll event loop, run by the thread that owns it.
 *
 * The gateway runs one loop per worker thread (worker.c), and one more for
 * the calls that a worker must wait for (id leases).  A loop knows nothing
 * of the layers above: it offers "watch this descriptor", "call this at the
 * start and at the end of every turn", "ask this how long the turn may
 * wait", and "run this task on the loop's thread"; the Redis layer, the
 * waiters and the HTTP layer register on it (worker.c wires them).
 * Everything that runs on a loop must not block. */
#ifndef LOCKGATE_LOOP_H
#define LOCKGATE_LOOP_H

#include <stdint.h>

struct loop;

/* A unit of work posted from any thread; embedded in the caller's struct. */
struct loop_task {
    struct loop_task *next;           /* queue link */
    void (*run)(struct loop_task *t); /* called on the loop's thread */
};

typedef void (*loop_fd_fn)(void *arg, uint32_t events);
typedef void (*loop_hook_fn)(void *arg, int64_t now_ms);
typedef int (*loop_timeout_fn)(void *arg, int64_t now_ms); /* ms, -1: none */

/* A new loop (aborts when the kernel refuses an epoll or eventfd). */
struct loop *loop_new(void);

/* Runs l on the calling thread until loop_stop; then runs the tasks still
 * posted, refuses new ones, and returns.  loop_self() is l meanwhile. */
void loop_run(struct loop *l);

/* Makes l's loop_run return after the current turn; any thread. */
void loop_stop(struct loop *l);

/* Frees l after its loop_run returned. */
void loop_free(struct loop *l);

/* The loop the calling thread runs, or NULL. */
struct loop *loop_self(void);

/* Runs t->run(t) on l's thread soon, in the turn's task step; posting to
 * one's own loop is fine.  Returns -1, without taking t, once l stopped. */
int loop_post(struct loop *l, struct loop_task *t);

/* epoll registration of a descriptor l serves (l's thread only); events 0
 * removes it.  A descriptor is served by one loop at a time; any number
 * the process may open can be registered.  Returns 0, or -1 with errno
 * when the kernel refuses (EBADF: the descriptor is already closed, as a
 * client gone before its request was parked): then fd is not registered
 * at all, so a later use of its number is a new registration. */
int loop_fd(struct loop *l, int fd, uint32_t events, loop_fd_fn fn, void *arg);

/* Hooks, registered before loop_run, called on l's thread in the order
 * registered.  A turn: wait, the start hooks (right after the wait: the
 * place for what must go out ahead of the turn's other writes after a
 * stall), the ready descriptors, the posted tasks, the end hooks (timers,
 * then whatever must write what the turn queued).  The wait lasts until
 * the earliest of the timeout hooks' answers, at most 50 ms. */
#define LOOP_HOOKS 6
void loop_on_turn_start(struct loop *l, loop_hook_fn fn, void *arg);
void loop_on_turn_end(struct loop *l, loop_hook_fn fn, void *arg);
void loop_on_timeout(struct loop *l, loop_timeout_fn fn, void *arg);

/* Monotonic milliseconds. */
int64_t loop_now_ms(void);

#endif
