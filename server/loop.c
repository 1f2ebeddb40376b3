/* loop.c -- see loop.h. */
#include "server/loop.h"
#include "common/alloc.h"
#include "common/fatal.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

/* What an epoll event points at. */
struct loop_source {
    loop_fd_fn fn;                 /* handler */
    void *arg;                     /* its argument */
    int dead;                      /* unregistered during this turn */
    struct loop_source *next_dead; /* the turn's graveyard */
};

struct hook {
    void *fn;  /* loop_hook_fn or loop_timeout_fn */
    void *arg; /* passed to it */
};

struct loop {
    int epfd;                        /* epoll instance */
    int evfd;                        /* eventfd: tasks posted or stop */
    atomic_int stop;                 /* loop_stop was called */
    pthread_mutex_t mu;              /* guards the task queue and closed */
    struct loop_task *head, *tail;   /* posted, not yet run */
    int closed;                      /* takes no more tasks (under mu) */
    struct loop_source wake;         /* the eventfd's source */
    struct loop_source **sources;    /* by descriptor (nsources entries) */
    int nsources;                    /* its size: grows to the highest descriptor */
    struct loop_source *graveyard;   /* sources freed at the turn's end */
    struct hook start[LOOP_HOOKS];   /* loop_on_turn_start */
    struct hook end[LOOP_HOOKS];     /* loop_on_turn_end */
    struct hook timeout[LOOP_HOOKS]; /* loop_on_timeout */
    int nstart, nend, ntimeout;
};

/* Each loop keeps its sources by descriptor, in a table of its own: a
 * descriptor number closed under one loop's registration (a client gone)
 * and reused by another loop's must not reach the first loop's entry.  The
 * table starts at FIRST_FDS entries and doubles past the highest
 * descriptor registered, so no number the process may open is out of
 * reach (RLIMIT_NOFILE can be a million), and a loop that only ever sees
 * low numbers costs 8 KB.  A
 * source is allocated per registration: epoll hands back exactly the
 * pointer it was given, and one unregistered while its loop handles a
 * turn's events may still be among them (a waiter woken by a release whose
 * client also hung up): it is marked dead and freed only when the turn is
 * over. */
#define FIRST_FDS 1024

static _Thread_local struct loop *self;

struct loop *loop_self(void) {
    return self;
}

int64_t loop_now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

struct loop *loop_new(void) {
    struct loop *l = alloc_check(calloc(1, sizeof *l));
    pthread_mutex_init(&l->mu, NULL);
    l->nsources = FIRST_FDS;
    l->sources = alloc_check(calloc(FIRST_FDS, sizeof *l->sources));
    l->epfd = epoll_create1(EPOLL_CLOEXEC);
    l->evfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (l->epfd < 0 || l->evfd < 0) fatal("loop: cannot make epoll/eventfd");
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = &l->wake};
    epoll_ctl(l->epfd, EPOLL_CTL_ADD, l->evfd, &ev);
    return l;
}

static void add_hook(struct hook *hooks, int *n, void *fn, void *arg) {
    if (*n == LOOP_HOOKS) fatal("loop: too many hooks");
    hooks[(*n)++] = (struct hook){fn, arg};
}

void loop_on_turn_start(struct loop *l, loop_hook_fn fn, void *arg) {
    add_hook(l->start, &l->nstart, (void *)fn, arg);
}
void loop_on_turn_end(struct loop *l, loop_hook_fn fn, void *arg) {
    add_hook(l->end, &l->nend, (void *)fn, arg);
}
void loop_on_timeout(struct loop *l, loop_timeout_fn fn, void *arg) {
    add_hook(l->timeout, &l->ntimeout, (void *)fn, arg);
}

static void wake(struct loop *l) {
    uint64_t one = 1;
    ssize_t w = write(l->evfd, &one, sizeof one);
    (void)w;
}

int loop_post(struct loop *l, struct loop_task *t) {
    t->next = NULL;
    pthread_mutex_lock(&l->mu);
    if (l->closed) {
        pthread_mutex_unlock(&l->mu);
        return -1;
    }
    int was_empty = l->head == NULL;
    if (l->tail)
        l->tail->next = t;
    else
        l->head = t;
    l->tail = t;
    pthread_mutex_unlock(&l->mu);
    /* Posted from its own thread, the task runs in this turn's task step
     * (or the next turn's, which then does not wait). */
    if (was_empty && self != l) wake(l);
    return 0;
}

/* Makes room in l's table for descriptor fd. */
static void grow(struct loop *l, int fd) {
    int n = l->nsources;
    while (n <= fd) n *= 2;
    l->sources = alloc_check(realloc(l->sources, (size_t)n * sizeof *l->sources));
    memset(l->sources + l->nsources, 0, (size_t)(n - l->nsources) * sizeof *l->sources);
    l->nsources = n;
}

/* Takes fd's source out of the table; freed at the turn's end, as epoll
 * may still hand it back in this turn's events. */
static void bury(struct loop *l, int fd) {
    struct loop_source *s = l->sources[fd];
    s->dead = 1;
    s->next_dead = l->graveyard;
    l->graveyard = s;
    l->sources[fd] = NULL;
}

int loop_fd(struct loop *l, int fd, uint32_t events, loop_fd_fn fn, void *arg) {
    if (fd < 0) {
        errno = EBADF;
        return -1;
    }
    if (fd >= l->nsources) {
        if (events == 0) return 0;
        grow(l, fd);
    }
    struct loop_source *s = l->sources[fd];
    if (events == 0) {
        if (!s) return 0;
        epoll_ctl(l->epfd, EPOLL_CTL_DEL, fd, NULL);
        bury(l, fd);
        return 0;
    }
    int op = s ? EPOLL_CTL_MOD : EPOLL_CTL_ADD;
    if (!s) {
        s = alloc_check(calloc(1, sizeof *s));
        l->sources[fd] = s;
    }
    s->fn = fn;
    s->arg = arg;
    struct epoll_event ev = {.events = events, .data.ptr = s};
    if (epoll_ctl(l->epfd, op, fd, &ev) == 0) return 0;
    /* A descriptor closed and reopened under the same number is no longer
     * in the set (ENOENT), and one added twice is (EEXIST): switch op. */
    int other = op == EPOLL_CTL_ADD ? EPOLL_CTL_MOD : EPOLL_CTL_ADD;
    if ((errno == EEXIST || errno == ENOENT) && epoll_ctl(l->epfd, other, fd, &ev) == 0) return 0;
    /* Not registered (EBADF: closed already): no entry is left behind
     * whose later removal would undo the next owner's registration. */
    int err = errno;
    bury(l, fd);
    errno = err;
    return -1;
}

static int run_tasks(struct loop *l) {
    pthread_mutex_lock(&l->mu);
    struct loop_task *t = l->head;
    l->head = l->tail = NULL;
    pthread_mutex_unlock(&l->mu);
    int ran = t != NULL;
    while (t) {
        struct loop_task *next = t->next;
        t->run(t);
        t = next;
    }
    return ran;
}

static int turn_timeout(struct loop *l, int64_t now) {
    int timeout = 50;
    pthread_mutex_lock(&l->mu);
    if (l->head) timeout = 0; /* posted from this thread in the last turn */
    pthread_mutex_unlock(&l->mu);
    /* Every hook is asked, even once the wait is 0: a hook may note when
     * it wants its turn (http.c). */
    for (int h = 0; h < l->ntimeout; h++) {
        int t = ((loop_timeout_fn)l->timeout[h].fn)(l->timeout[h].arg, now);
        if (t >= 0 && t < timeout) timeout = t;
    }
    return timeout;
}

void loop_run(struct loop *l) {
    struct epoll_event events[128];
    self = l;
    while (!atomic_load(&l->stop)) {
        int n = epoll_wait(l->epfd, events, 128, turn_timeout(l, loop_now_ms()));
        int64_t now = loop_now_ms();
        for (int h = 0; h < l->nstart; h++) ((loop_hook_fn)l->start[h].fn)(l->start[h].arg, now);
        for (int i = 0; i < n; i++) {
            struct loop_source *s = events[i].data.ptr;
            if (s == &l->wake) {
                uint64_t v;
                ssize_t r = read(l->evfd, &v, sizeof v);
                (void)r;
            } else if (!s->dead) {
                s->fn(s->arg, events[i].events);
            }
        }
        run_tasks(l);
        now = loop_now_ms();
        for (int h = 0; h < l->nend; h++) ((loop_hook_fn)l->end[h].fn)(l->end[h].arg, now);
        while (l->graveyard) {
            struct loop_source *s = l->graveyard;
            l->graveyard = s->next_dead;
            free(s);
        }
    }
    pthread_mutex_lock(&l->mu);
    l->closed = 1;
    pthread_mutex_unlock(&l->mu);
    run_tasks(l);
    for (int h = 0; h < l->nend; h++) ((loop_hook_fn)l->end[h].fn)(l->end[h].arg, loop_now_ms());
    self = NULL;
}

void loop_stop(struct loop *l) {
    atomic_store(&l->stop, 1);
    wake(l);
}

void loop_free(struct loop *l) {
    while (l->graveyard) {
        struct loop_source *s = l->graveyard;
        l->graveyard = s->next_dead;
        free(s);
    }
    for (int fd = 0; fd < l->nsources; fd++) free(l->sources[fd]);
    free(l->sources);
    close(l->evfd);
    close(l->epfd);
    pthread_mutex_destroy(&l->mu);
    free(l);
}
