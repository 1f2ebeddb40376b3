/* delivery.c -- see delivery.h.
 *
 * The evidence is the socket's own: SIOCOUTQ is the number of bytes written
 * and not yet acknowledged (write_seq - snd_una), and TCP_INFO's state is
 * TCP_CLOSE once a reset came in.  At most one unacknowledged byte:
 * delivered -- that byte is our FIN once libmicrohttpd has closed (a
 * client whose TCP took the whole answer and then reset instead of
 * acknowledging the FIN did get the answer), and an answer is never split
 * so that only its last byte is left.  Closed with more unacknowledged:
 * the answer met a closed socket, not delivered.  A timerfd ticks
 * every WATCH_TICK_MS on the loop until one of the two, or the deadline.
 * Watches are rare (only grants answered after the client's FIN), so one
 * timerfd each is simpler than a shared timer list. */
#define _GNU_SOURCE /* POLLRDHUP */
#include "server/delivery.h"
#include "server/log.h"
#include "server/loop.h"

#include <errno.h>
#include <linux/sockios.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <unistd.h>

#define WATCH_TICK_MS 5

struct watch {
    struct loop_task task;                /* how it reaches the loop (first) */
    int fd;                               /* our duplicate of the client socket */
    int tfd;                              /* the tick's timerfd, -1 before start */
    struct loop *loop;                    /* the loop it is watched on */
    int64_t deadline_ms;                  /* give up waiting then: delivered */
    void (*fn)(void *arg, int delivered); /* called once */
    void *arg;                            /* passed to fn */
};

int delivery_peer_shut(int fd) {
    if (fd < 0) return 0;
    struct pollfd p = {.fd = fd, .events = POLLRDHUP};
    return poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR));
}

/* 1 delivered, 0 reset, -1 not known yet. */
static int judge(struct watch *w) {
    int outq = 0;
    if (ioctl(w->fd, SIOCOUTQ, &outq) < 0 || outq <= 1) return 1;
    struct tcp_info ti;
    socklen_t len = sizeof ti;
    if (getsockopt(w->fd, IPPROTO_TCP, TCP_INFO, &ti, &len) == 0 && ti.tcpi_state == TCP_CLOSE) {
        log_info("delivery: reset with %d bytes unacknowledged (%lld ms into the watch)", outq,
                 (long long)(loop_now_ms() - (w->deadline_ms - DELIVERY_WATCH_MS)));
        return 0;
    }
    return loop_now_ms() >= w->deadline_ms ? 1 : -1;
}

static void finish(struct watch *w, int delivered) {
    if (w->tfd >= 0) {
        loop_fd(w->loop, w->tfd, 0, NULL, NULL);
        close(w->tfd);
    }
    close(w->fd);
    w->fn(w->arg, delivered);
    free(w);
}

static void on_tick(void *arg, uint32_t events) {
    struct watch *w = arg;
    uint64_t n;
    ssize_t r = read(w->tfd, &n, sizeof n);
    (void)r;
    int verdict = judge(w);
    if (verdict >= 0) finish(w, verdict);
}

static void watch_start(struct loop_task *t) {
    struct watch *w = (struct watch *)t;
    int verdict = judge(w);
    if (verdict >= 0) {
        finish(w, verdict);
        return;
    }
    w->tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
    struct itimerspec its = {
        .it_interval = {0, WATCH_TICK_MS * 1000000L},
          .it_value = {0, WATCH_TICK_MS * 1000000L}
    };
    if (w->tfd < 0 || timerfd_settime(w->tfd, 0, &its, NULL) < 0) {
        log_warn("delivery: no timer for a watch, taking the answer as delivered");
        finish(w, 1);
        return;
    }
    if (loop_fd(w->loop, w->tfd, EPOLLIN, on_tick, w) < 0) {
        log_warn("delivery: cannot watch a timer (%s), taking the answer as delivered",
                 strerror(errno));
        finish(w, 1);
    }
}

void delivery_watch(int fd, void (*fn)(void *arg, int delivered), void *arg) {
    struct watch *w = calloc(1, sizeof *w);
    if (!w) {
        fprintf(stderr, "lockgate: out of memory\n");
        abort();
    }
    w->fd = dup(fd);
    w->tfd = -1;
    w->fn = fn;
    w->arg = arg;
    w->deadline_ms = loop_now_ms() + DELIVERY_WATCH_MS;
    w->task.run = watch_start;
    w->loop = loop_self();
    if (w->fd < 0 || !w->loop || loop_post(w->loop, &w->task) < 0) {
        if (w->fd >= 0) close(w->fd);
        free(w);
        fn(arg, 1);
    }
}
