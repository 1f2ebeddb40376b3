/* loop.h -- the gateway's one event loop thread (epoll).
 *
 * It carries the Redis connections (redis.c), the timers and hang-up
 * watches of waiting requests (waiters.c), and tasks posted from other
 * threads.  Everything that runs on it must not block. */
#ifndef LOCKGATE_LOOP_H
#define LOCKGATE_LOOP_H

#include <stdint.h>

struct waiter;

/* A unit of work posted from any thread; embedded in the caller's struct. */
struct loop_task {
    struct loop_task *next;           /* queue link */
    void (*run)(struct loop_task *t); /* called on the loop thread */
};

typedef void (*loop_fd_fn)(void *arg, uint32_t events);

int loop_start(void);
/* Asks the loop to stop, waits for it; stop_fn runs on the loop thread
 * last (to fail what is outstanding). */
void loop_stop(void (*stop_fn)(void));

/* Runs t->run(t) on the loop thread soon; tasks posted together are run
 * in the same turn, before that turn's writes.  Returns -1, without taking
 * t, once the loop has stopped. */
int loop_post(struct loop_task *t);

/* epoll registration of a descriptor the loop serves (loop thread only);
 * events 0 removes it. */
void loop_fd(int fd, uint32_t events, loop_fd_fn fn, void *arg);

/* Watches a waiting client's socket for hang-up (loop thread only). */
void loop_watch_hangup(int fd, struct waiter *w);
void loop_unwatch(int fd);

/* Calls fn(now_ms) first thing in every turn, on the loop thread, right
 * after the wait: the place for work that must go out ahead of the turn's
 * other writes after a stall (liveness.c).  At most LOOP_TURN_HOOKS, all
 * before loop_start. */
#define LOOP_TURN_HOOKS 4
void loop_on_turn(void (*fn)(int64_t now_ms));

/* 1 on the loop thread, else 0. */
int loop_on_thread(void);

/* Monotonic milliseconds. */
int64_t loop_now_ms(void);

#endif
