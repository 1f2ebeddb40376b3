/* loop.c -- see loop.h.
 *
 * A turn: wait (until the next waiter's timer, at most 50 ms), run the
 * turn hooks (the gateway's liveness key, renewed when due), handle the ready descriptors, run the
 * posted tasks, then let the Redis layer write what the turn queued (one
 * write per connection: auto-pipelining) and check its timeouts, then fire
 * due waiter timers. */
#include "server/loop.h"
#include "common/alloc.h"
#include "common/fatal.h"
#include "server/log.h"
#include "server/redis.h"
#include "server/waiters.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

/* What an epoll event points at. */
struct loop_source {
    loop_fd_fn fn;                 /* handler, NULL for a waiter's hang-up watch */
    void *arg;                     /* handler argument, or the struct waiter */
    int dead;                      /* unregistered during this turn */
    struct loop_source *next_dead; /* the turn's graveyard */
};

static struct {
    int epfd;                                            /* epoll instance */
    int evfd;                                            /* eventfd: tasks posted or stop */
    pthread_t thread;                                    /* the loop thread */
    atomic_int stop;                                     /* loop_stop was called */
    pthread_mutex_t mu;                                  /* guards the task queue */
    struct loop_task *head, *tail;                       /* posted, not yet run */
    struct loop_source wake;                             /* the eventfd's source */
    int closed;                                          /* takes no more tasks (under mu) */
    void (*stop_fn)(void);                               /* last words on the loop thread */
    void (*turn_hooks[LOOP_TURN_HOOKS])(int64_t now_ms); /* loop_on_turn */
    int nturn_hooks;
} L;

static _Thread_local int on_loop;

int loop_on_thread(void) { return on_loop; }

void loop_on_turn(void (*fn)(int64_t now_ms)) {
    if (L.nturn_hooks == LOOP_TURN_HOOKS) fatal("too many loop turn hooks");
    L.turn_hooks[L.nturn_hooks++] = fn;
}

int64_t loop_now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int loop_post(struct loop_task *t) {
    t->next = NULL;
    pthread_mutex_lock(&L.mu);
    if (L.closed) {
        pthread_mutex_unlock(&L.mu);
        return -1;
    }
    int was_empty = L.head == NULL;
    if (L.tail)
        L.tail->next = t;
    else
        L.head = t;
    L.tail = t;
    pthread_mutex_unlock(&L.mu);
    if (was_empty) {
        uint64_t one = 1;
        ssize_t w = write(L.evfd, &one, sizeof one);
        (void)w;
    }
    return 0;
}

/* Sources are allocated per registration: descriptors come and go often
 * (waiters), and epoll hands back exactly the pointer it was given.  One
 * unregistered while handling a turn's events may still be among that
 * turn's events (a waiter woken by a release whose client also hung up):
 * it is marked dead and freed only when the turn is over. */
static struct loop_source *sources[65536];
static struct loop_source *graveyard;

static void fd_set_source(int fd, uint32_t events, loop_fd_fn fn, void *arg) {
    if (fd < 0 || fd >= 65536) {
        log_error("loop: descriptor %d out of range", fd);
        return;
    }
    struct loop_source *s = sources[fd];
    if (events == 0) {
        if (!s) return;
        epoll_ctl(L.epfd, EPOLL_CTL_DEL, fd, NULL);
        s->dead = 1;
        s->next_dead = graveyard;
        graveyard = s;
        sources[fd] = NULL;
        return;
    }
    int op = s ? EPOLL_CTL_MOD : EPOLL_CTL_ADD;
    if (!s) {
        s = alloc_check(calloc(1, sizeof *s));
        sources[fd] = s;
    }
    s->fn = fn;
    s->arg = arg;
    struct epoll_event ev = {.events = events, .data.ptr = s};
    if (epoll_ctl(L.epfd, op, fd, &ev) == 0) return;
    /* A descriptor closed and reopened under the same number is no longer
     * in the set (ENOENT), and one added twice is (EEXIST): switch op. */
    int other = op == EPOLL_CTL_ADD ? EPOLL_CTL_MOD : EPOLL_CTL_ADD;
    if ((errno == EEXIST || errno == ENOENT) && epoll_ctl(L.epfd, other, fd, &ev) == 0) return;
    log_error("loop: epoll_ctl(%d): %s", fd, strerror(errno));
}

void loop_fd(int fd, uint32_t events, loop_fd_fn fn, void *arg) {
    fd_set_source(fd, events, fn, arg);
}

void loop_watch_hangup(int fd, struct waiter *w) { fd_set_source(fd, EPOLLRDHUP, NULL, w); }

void loop_unwatch(int fd) { fd_set_source(fd, 0, NULL, NULL); }

static void run_tasks(void) {
    pthread_mutex_lock(&L.mu);
    struct loop_task *t = L.head;
    L.head = L.tail = NULL;
    pthread_mutex_unlock(&L.mu);
    while (t) {
        struct loop_task *next = t->next;
        t->run(t);
        t = next;
    }
}

static void *loop_main(void *unused) {
    struct epoll_event events[64];
    on_loop = 1;
    redis_loop_turn(loop_now_ms()); /* connect before the first wait */
    while (!atomic_load(&L.stop)) {
        int timeout = waiters_next_timeout(loop_now_ms());
        if (timeout < 0 || timeout > 50) timeout = 50;
        int n = epoll_wait(L.epfd, events, 64, timeout);
        /* First, so that after a stall (SIGSTOP, an overloaded host) the
         * renewal goes out ahead of the waiters' attempts. */
        for (int h = 0; h < L.nturn_hooks; h++) L.turn_hooks[h](loop_now_ms());
        for (int i = 0; i < n; i++) {
            struct loop_source *s = events[i].data.ptr;
            if (s->dead) {
                continue;
            } else if (s == &L.wake) {
                uint64_t v;
                ssize_t r = read(L.evfd, &v, sizeof v);
                (void)r;
            } else if (s->fn) {
                s->fn(s->arg, events[i].events);
            } else if (events[i].events & (EPOLLRDHUP | EPOLLHUP | EPOLLERR)) {
                waiters_on_hangup(s->arg);
            }
        }
        run_tasks();
        int64_t now = loop_now_ms();
        redis_loop_turn(now);
        waiters_run_due(now);
        run_tasks(); /* what the timers posted goes out this turn */
        redis_loop_turn(loop_now_ms());
        while (graveyard) {
            struct loop_source *s = graveyard;
            graveyard = s->next_dead;
            free(s);
        }
    }
    pthread_mutex_lock(&L.mu);
    L.closed = 1;
    pthread_mutex_unlock(&L.mu);
    run_tasks();
    if (L.stop_fn) L.stop_fn();
    return NULL;
}

int loop_start(void) {
    pthread_mutex_init(&L.mu, NULL);
    L.epfd = epoll_create1(EPOLL_CLOEXEC);
    L.evfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (L.epfd < 0 || L.evfd < 0) {
        log_error("loop: cannot make epoll/eventfd: %s", strerror(errno));
        return -1;
    }
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = &L.wake};
    epoll_ctl(L.epfd, EPOLL_CTL_ADD, L.evfd, &ev);
    if (pthread_create(&L.thread, NULL, loop_main, NULL) != 0) {
        log_error("loop: cannot start the thread");
        return -1;
    }
    return 0;
}

void loop_stop(void (*stop_fn)(void)) {
    L.stop_fn = stop_fn;
    atomic_store(&L.stop, 1);
    uint64_t one = 1;
    ssize_t w = write(L.evfd, &one, sizeof one);
    (void)w;
    pthread_join(L.thread, NULL);
    close(L.evfd);
    close(L.epfd);
}
