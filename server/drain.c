/* drain.c -- see drain.h.  One timerfd per drained connection for its
 * deadline: drains are rare (only bodies refused unread), so a shared
 * timer list would buy nothing. */
#include "server/drain.h"
#include "server/loop.h"

#include <errno.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <unistd.h>

struct drain {
    int fd;            /* our duplicate of the client socket */
    int tfd;           /* the deadline's timerfd */
    struct loop *loop; /* the loop it is read on */
    long left;         /* bytes it may still read */
};

static void finish(struct drain *d) {
    loop_fd(d->loop, d->fd, 0, NULL, NULL);
    close(d->fd);
    loop_fd(d->loop, d->tfd, 0, NULL, NULL);
    close(d->tfd);
    free(d);
}

static void on_deadline(void *arg, uint32_t events) {
    (void)events;
    finish(arg);
}

static void on_readable(void *arg, uint32_t events) {
    struct drain *d = arg;
    char buf[16384];
    for (;;) {
        ssize_t n = recv(d->fd, buf, sizeof buf, MSG_DONTWAIT);
        if (n > 0 && (d->left -= n) > 0) continue;
        if (n < 0 && (errno == EAGAIN || errno == EINTR) && !(events & (EPOLLHUP | EPOLLERR)))
            return;
        finish(d); /* the client's FIN, an error, or the bound */
        return;
    }
}

void drain_start(int fd) {
    struct loop *l = loop_self();
    if (fd < 0 || !l) return;
    struct drain *d = calloc(1, sizeof *d);
    if (!d) return;
    d->fd = dup(fd);
    d->tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
    struct itimerspec its = {
        .it_value = {DRAIN_MAX_MS / 1000, (DRAIN_MAX_MS % 1000) * 1000000L}
    };
    if (d->fd < 0 || d->tfd < 0 || timerfd_settime(d->tfd, 0, &its, NULL) < 0) {
        if (d->fd >= 0) close(d->fd);
        if (d->tfd >= 0) close(d->tfd);
        free(d);
        return;
    }
    /* The answer is in the socket's buffer: the FIN goes after it. */
    shutdown(d->fd, SHUT_WR);
    d->loop = l;
    d->left = DRAIN_MAX_BYTES;
    loop_fd(l, d->tfd, EPOLLIN, on_deadline, d);
    loop_fd(l, d->fd, EPOLLIN | EPOLLRDHUP, on_readable, d);
}
