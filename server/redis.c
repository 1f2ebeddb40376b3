/* redis.c -- see redis.h.
 *
 * Shape of the loop thread:
 *
 *   callers --(mutex queue + eventfd)--> loop: hiredis async context
 *                                         |  one write per wake-up
 *                                         v
 *                                       Redis  --> replies, in order --> callbacks
 *
 * Commands are kept in `pending`, oldest first, with the time they were
 * sent.  Redis answers in order, so the oldest is the one a frozen Redis
 * holds up: when it passes the command timeout the connection is dropped,
 * which fails every outstanding command at once, and a new connection is
 * made with a growing back-off.  Nothing here blocks. */
#include "server/redis.h"
#include "server/log.h"
#include "server/metrics.h"

#include <errno.h>
#include <hiredis/async.h>
#include <hiredis/hiredis.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

struct redis_op {
    struct redis_op *prev, *next;  /* in the submit queue or in pending */
    redis_cb cb;                   /* called once */
    void *arg;                     /* passed to cb */
    int argc;                      /* words of the command as sent */
    const char **argv;             /* the words (point into this allocation) */
    size_t *lens;                  /* their lengths */
    int script;                    /* script id, or -1 for a plain command */
    int retried;                   /* a NOSCRIPT retry was made */
    int64_t sent_ms;               /* when it was written, for the timeout */
    char numkeys[16];              /* EVALSHA's key count, as text */
};

static struct {
    struct gw_config cfg;          /* copy of the settings */
    pthread_t thread;              /* the loop thread */
    int epfd;                      /* epoll instance */
    int evfd;                      /* eventfd: work was queued or stop asked */
    atomic_int stop;               /* redis_stop was called */

    pthread_mutex_t mu;            /* guards the submit queue */
    struct redis_op *q_head, *q_tail; /* queued, not yet sent */

    redisAsyncContext *ac;         /* the connection, NULL while down */
    uint32_t ac_events;            /* epoll events hiredis asked for */
    int connected;                 /* onConnect said OK */
    int64_t connecting_since;      /* when the attempt started */
    int64_t next_attempt_ms;       /* earliest next connection attempt */
    int backoff_ms;                /* grows to 1 s while Redis stays down */
    int ever_connected;            /* for the reconnect counter */
    int down_logged;               /* the outage was logged once */
    const char *fail_reason;       /* why outstanding commands are failing */
    struct redis_op pending;       /* sentinel of the sent, unanswered list */
    atomic_int up;                 /* mirror of connected for other threads */
} R;

static int64_t now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void *xmalloc(size_t n) {
    void *p = malloc(n);
    if (!p) {
        fprintf(stderr, "lockgate: out of memory\n");
        abort();
    }
    return p;
}

/* ------------------------------------------------------------------------
 * Operations
 * --------------------------------------------------------------------- */

/* Allocates an op holding a copy of the words, with `extra` leading words
 * (EVALSHA sha nkeys) left for the caller to fill. */
static struct redis_op *op_new(int extra, int argc, const char *const *argv,
                               const size_t *lens, redis_cb cb, void *arg) {
    size_t bytes = 0;
    for (int i = 0; i < argc; i++) bytes += lens[i] + 1;
    int total = extra + argc;
    struct redis_op *op = xmalloc(sizeof *op + (size_t)total * (sizeof(char *) + sizeof(size_t)) + bytes);
    memset(op, 0, sizeof *op);
    op->argv = (const char **)(op + 1);
    op->lens = (size_t *)(op->argv + total);
    char *p = (char *)(op->lens + total);
    for (int i = 0; i < argc; i++) {
        memcpy(p, argv[i], lens[i]);
        p[lens[i]] = '\0';
        op->argv[extra + i] = p;
        op->lens[extra + i] = lens[i];
        p += lens[i] + 1;
    }
    op->argc = total;
    op->cb = cb;
    op->arg = arg;
    op->script = -1;
    return op;
}

static void op_fail(struct redis_op *op, const char *why) {
    struct redis_result res = {.ok = 0, .reply = NULL, .error = why};
    metrics_inc(M_REDIS_ERRORS, 1);
    op->cb(op->arg, &res);
    free(op);
}

static void pending_unlink(struct redis_op *op) {
    op->prev->next = op->next;
    op->next->prev = op->prev;
    op->prev = op->next = NULL;
}

static void on_reply(redisAsyncContext *ac, void *r, void *privdata);

/* Hands op to hiredis, which appends it to its output buffer; the write
 * happens once per loop turn, for everything appended in that turn. */
static void op_send(struct redis_op *op) {
    if (!R.ac) {
        op_fail(op, "Redis is not connected");
        return;
    }
    if (redisAsyncCommandArgv(R.ac, on_reply, op, op->argc, op->argv, op->lens) != REDIS_OK) {
        op_fail(op, "Redis connection is closing");
        return;
    }
    op->sent_ms = now_ms();
    op->prev = R.pending.prev;
    op->next = &R.pending;
    R.pending.prev->next = op;
    R.pending.prev = op;
}

static void send_script_load(int id) {
    const struct script *s = script_get((enum script_id)id);
    const char *argv[3] = {"SCRIPT", "LOAD", (const char *)s->src};
    size_t lens[3] = {6, 4, s->len};
    redisAsyncCommandArgv(R.ac, on_reply, NULL, 3, argv, lens);
}

static void on_reply(redisAsyncContext *ac, void *r, void *privdata) {
    redisReply *reply = r;
    struct redis_op *op = privdata;

    if (!op) { /* AUTH, SELECT, SCRIPT LOAD: only errors matter */
        if (reply && reply->type == REDIS_REPLY_ERROR)
            log_error("redis: setup command failed: %s", reply->str);
        return;
    }
    pending_unlink(op);
    if (!reply) {
        op_fail(op, R.fail_reason ? R.fail_reason : "Redis connection lost");
        return;
    }
    if (reply->type == REDIS_REPLY_ERROR) {
        if (op->script >= 0 && !op->retried && strncmp(reply->str, "NOSCRIPT", 8) == 0) {
            /* The script cache was emptied: load it and send the command
             * again behind the load, in the same pipeline. */
            log_info("redis: NOSCRIPT for %s, reloading", script_get(op->script)->file);
            metrics_inc(M_REDIS_NOSCRIPT, 1);
            op->retried = 1;
            send_script_load(op->script);
            op_send(op);
            return;
        }
        log_warn("redis: command failed: %s", reply->str);
        op_fail(op, reply->str);
        return;
    }
    struct redis_result res = {.ok = 1, .reply = reply, .error = NULL};
    op->cb(op->arg, &res);
    free(op);
}

/* ------------------------------------------------------------------------
 * hiredis event hooks: hiredis says what it wants to wait for; we keep the
 * epoll registration in step.
 * --------------------------------------------------------------------- */

static void ev_update(uint32_t events) {
    if (!R.ac || events == R.ac_events) return;
    struct epoll_event ev = {.events = events, .data.u32 = 1};
    int op = R.ac_events == 0 ? EPOLL_CTL_ADD : events == 0 ? EPOLL_CTL_DEL : EPOLL_CTL_MOD;
    if (epoll_ctl(R.epfd, op, R.ac->c.fd, &ev) < 0 && errno != ENOENT)
        log_error("redis: epoll_ctl: %s", strerror(errno));
    R.ac_events = events;
}
static void ev_add_read(void *p)  { ev_update(R.ac_events | EPOLLIN); }
static void ev_del_read(void *p)  { ev_update(R.ac_events & ~(uint32_t)EPOLLIN); }
static void ev_add_write(void *p) { ev_update(R.ac_events | EPOLLOUT); }
static void ev_del_write(void *p) { ev_update(R.ac_events & ~(uint32_t)EPOLLOUT); }
static void ev_cleanup(void *p)   { ev_update(0); }

/* ------------------------------------------------------------------------
 * Connection
 * --------------------------------------------------------------------- */

static void connection_gone(void) {
    R.ac = NULL;
    R.ac_events = 0;
    R.connected = 0;
    atomic_store(&R.up, 0);
    R.next_attempt_ms = now_ms() + R.backoff_ms;
    R.backoff_ms = R.backoff_ms * 2 > 1000 ? 1000 : R.backoff_ms * 2;
}

static void on_connect(const redisAsyncContext *ac, int status) {
    if (status != REDIS_OK) {
        if (!R.down_logged)
            log_warn("redis: cannot connect to %s:%d: %s", R.cfg.redis_host,
                     R.cfg.redis_port, ac->errstr);
        R.down_logged = 1;
        connection_gone(); /* hiredis frees ac after this returns */
        return;
    }
    R.connected = 1;
    atomic_store(&R.up, 1);
    R.backoff_ms = 100;
    R.down_logged = 0;
    if (R.ever_connected) metrics_inc(M_REDIS_RECONNECTS, 1);
    R.ever_connected = 1;
    log_info("redis: connected to %s:%d", R.cfg.redis_host, R.cfg.redis_port);
}

static void on_disconnect(const redisAsyncContext *ac, int status) {
    if (status != REDIS_OK)
        log_warn("redis: connection to %s:%d lost: %s", R.cfg.redis_host, R.cfg.redis_port,
                 ac->errstr);
    connection_gone();
}

/* Starts a non-blocking connection and queues, ahead of any command, what
 * every new connection needs: AUTH, SELECT and the scripts. */
static void connect_start(void) {
    redisAsyncContext *ac = redisAsyncConnect(R.cfg.redis_host, R.cfg.redis_port);
    if (!ac || ac->err) {
        if (!R.down_logged)
            log_warn("redis: cannot connect to %s:%d: %s", R.cfg.redis_host,
                     R.cfg.redis_port, ac ? ac->errstr : "out of memory");
        R.down_logged = 1;
        if (ac) redisAsyncFree(ac);
        connection_gone();
        return;
    }
    R.ac = ac;
    R.ac_events = 0;
    R.connecting_since = now_ms();
    ac->ev.data = NULL;
    ac->ev.addRead = ev_add_read;
    ac->ev.delRead = ev_del_read;
    ac->ev.addWrite = ev_add_write;
    ac->ev.delWrite = ev_del_write;
    ac->ev.cleanup = ev_cleanup;
    redisAsyncSetConnectCallback(ac, on_connect);
    redisAsyncSetDisconnectCallback(ac, on_disconnect);
    ev_add_write(NULL); /* connect(2) completes as writability */

    if (R.cfg.redis_password[0]) {
        const char *argv[2] = {"AUTH", R.cfg.redis_password};
        size_t lens[2] = {4, strlen(R.cfg.redis_password)};
        redisAsyncCommandArgv(ac, on_reply, NULL, 2, argv, lens);
    }
    if (R.cfg.redis_db) {
        char db[16];
        int n = snprintf(db, sizeof db, "%d", R.cfg.redis_db);
        const char *argv[2] = {"SELECT", db};
        size_t lens[2] = {6, (size_t)n};
        redisAsyncCommandArgv(ac, on_reply, NULL, 2, argv, lens);
    }
    for (int i = 0; i < SCRIPT_COUNT; i++) send_script_load(i);
}

/* Drops the connection, failing everything outstanding with `why`. */
static void connection_drop(const char *why) {
    redisAsyncContext *ac = R.ac;
    R.fail_reason = why;
    redisAsyncFree(ac);       /* fails outstanding commands; may call on_disconnect */
    if (R.ac == ac) connection_gone();
    R.fail_reason = NULL;
}

/* ------------------------------------------------------------------------
 * The loop
 * --------------------------------------------------------------------- */

static struct redis_op *queue_take_all(void) {
    pthread_mutex_lock(&R.mu);
    struct redis_op *head = R.q_head;
    R.q_head = R.q_tail = NULL;
    pthread_mutex_unlock(&R.mu);
    return head;
}

static void check_timeouts(int64_t now) {
    if (!R.ac) return;
    int64_t limit = R.cfg.redis_timeout_ms;
    struct redis_op *oldest = R.pending.next;
    if (oldest != &R.pending && now - oldest->sent_ms > limit) {
        log_warn("redis: no answer within %lld ms, dropping the connection", (long long)limit);
        connection_drop("Redis did not answer in time");
    } else if (!R.connected && now - R.connecting_since > limit) {
        log_warn("redis: connecting to %s:%d timed out", R.cfg.redis_host, R.cfg.redis_port);
        connection_drop("Redis did not accept the connection in time");
    }
}

static void *loop_main(void *unused) {
    struct epoll_event events[8];
    while (!atomic_load(&R.stop)) {
        int64_t now = now_ms();
        if (!R.ac && now >= R.next_attempt_ms) connect_start();

        int n = epoll_wait(R.epfd, events, 8, 50);
        for (int i = 0; i < n; i++) {
            if (events[i].data.u32 == 0) {          /* eventfd: new work */
                uint64_t v;
                ssize_t rr = read(R.evfd, &v, sizeof v);
                (void)rr;
                continue;
            }
            if (!R.ac) continue;
            if (events[i].events & (EPOLLIN | EPOLLERR | EPOLLHUP))
                redisAsyncHandleRead(R.ac);
            if (R.ac && (events[i].events & EPOLLOUT))
                redisAsyncHandleWrite(R.ac);
        }

        /* Everything queued since the last turn goes out in one write. */
        struct redis_op *op = queue_take_all();
        while (op) {
            struct redis_op *next = op->next;
            op_send(op);
            op = next;
        }
        if (R.ac && R.connected && (R.ac_events & EPOLLOUT)) redisAsyncHandleWrite(R.ac);

        check_timeouts(now_ms());
    }

    /* Stopping: fail what is queued and what is outstanding. */
    for (struct redis_op *op = queue_take_all(), *next; op; op = next) {
        next = op->next;
        op_fail(op, "the gateway is stopping");
    }
    if (R.ac) connection_drop("the gateway is stopping");
    return NULL;
}

static void submit(struct redis_op *op) {
    op->next = NULL;
    pthread_mutex_lock(&R.mu);
    int was_empty = R.q_head == NULL;
    if (R.q_tail) R.q_tail->next = op;
    else R.q_head = op;
    R.q_tail = op;
    pthread_mutex_unlock(&R.mu);
    if (was_empty) {
        uint64_t one = 1;
        ssize_t w = write(R.evfd, &one, sizeof one);
        (void)w;
    }
}

void redis_eval(enum script_id id, int nkeys, int nargs, const char *const *argv,
                const size_t *lens, redis_cb cb, void *arg) {
    const struct script *s = script_get(id);
    struct redis_op *op = op_new(3, nargs, argv, lens, cb, arg);
    int nk = snprintf(op->numkeys, sizeof op->numkeys, "%d", nkeys);
    op->argv[0] = "EVALSHA";
    op->lens[0] = 7;
    op->argv[1] = s->sha;
    op->lens[1] = 40;
    op->argv[2] = op->numkeys;
    op->lens[2] = (size_t)nk;
    op->script = (int)id;
    submit(op);
}

void redis_command(int argc, const char *const *argv, const size_t *lens, redis_cb cb,
                   void *arg) {
    submit(op_new(0, argc, argv, lens, cb, arg));
}

int redis_connected(void) { return atomic_load(&R.up); }

int redis_start(const struct gw_config *cfg) {
    R.cfg = *cfg;
    R.pending.next = R.pending.prev = &R.pending;
    R.backoff_ms = 100;
    pthread_mutex_init(&R.mu, NULL);
    R.epfd = epoll_create1(EPOLL_CLOEXEC);
    R.evfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (R.epfd < 0 || R.evfd < 0) {
        log_error("redis: cannot make epoll/eventfd: %s", strerror(errno));
        return -1;
    }
    struct epoll_event ev = {.events = EPOLLIN, .data.u32 = 0};
    epoll_ctl(R.epfd, EPOLL_CTL_ADD, R.evfd, &ev);
    if (pthread_create(&R.thread, NULL, loop_main, NULL) != 0) {
        log_error("redis: cannot start the loop thread");
        return -1;
    }
    return 0;
}

void redis_stop(void) {
    atomic_store(&R.stop, 1);
    uint64_t one = 1;
    ssize_t w = write(R.evfd, &one, sizeof one);
    (void)w;
    pthread_join(R.thread, NULL);
    close(R.evfd);
    close(R.epfd);
}
