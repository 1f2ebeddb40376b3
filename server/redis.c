/* redis.c -- see redis.h.
 *
 *   a worker's handlers --> its instance: hiredis async contexts on its loop
 *                                 |  one write per turn per connection
 *                                 v
 *                               Redis --> replies, in order --> callbacks
 *
 * One instance per worker thread (redis_bind), each with its own
 * connections: nothing here is shared between threads but the settings
 * and the prelude, both read-only once the workers run.
 * Sent commands are kept in `pending`, oldest first, with the time they
 * were sent.  Redis answers in order, so the oldest is the one a frozen
 * Redis holds up: when it passes the command timeout the connection is
 * dropped, which fails every outstanding command at once, and a new one is
 * made with a back-off growing to 1 s.  Nothing here blocks. */
#include "server/redis.h"
#include "common/alloc.h"
#include "common/token.h"
#include "server/cluster.h"
#include "server/log.h"
#include "server/loop.h"
#include "server/layout.h"
#include "server/lossguard.h"
#include "server/memguard.h"
#include "server/metrics.h"
#include "server/redis_tls.h"
#include "server/secret.h"

#include <errno.h>
#include <pthread.h>
#include <hiredis/async.h>
#include <hiredis/hiredis.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/epoll.h>
#include <sys/socket.h>

struct redis_op {
    struct loop_task task;        /* how it reaches another instance's thread */
    struct redis_op *prev, *next; /* in pending, once sent */
    redis_cb cb;                  /* called once */
    void *arg;                    /* passed to cb */
    int argc;                     /* words of the command as sent */
    const char **argv;            /* the words (point into this allocation) */
    size_t *lens;                 /* their lengths */
    int script;                   /* script id, or -1 for a plain command */
    int retried;                  /* a NOSCRIPT retry was made */
    int node;                     /* which Redis it goes to */
    int slot;                     /* cluster mode: its first key's slot, or -1 (-2: not
                                     worked out yet, see op_send) */
    int redirects;                /* cluster mode: MOVED/ASK followed */
    int retries;                  /* cluster mode: TRYAGAIN/CLUSTERDOWN waited out */
    int asking;                   /* cluster mode: send ASKING first (an ASK redirect) */
    int pinned;                   /* cluster mode: node is set, not the slot's */
    int64_t born_ms;              /* when it was made: its deadline is this plus the
                                     command timeout, across retries */
    int64_t sent_ms;              /* when it was written, for the timeout */
    int marker_at;                /* a grant script: its word that is the marker key (the
                                     value last read there is the last word), filled as it
                                     is sent (marker_fill); 0: none */
    int learn_tried;              /* cluster mode: its slot's marker was asked for (slot
                                     markers): if still unknown, it goes unchecked */
    char sent_under[LOSSGUARD_MARKER_LEN + 1]; /* cluster mode, a grant: its master's marker
                                                  as read here when it went out */
    const char *why;                           /* why it fails, on the failed list */
    char numkeys[16];                          /* EVALSHA's key count, as text */
};

/* One connection to Redis and its state. */
struct node;
struct sub_sent; /* redis_patterns.inc */

struct rconn {
    const char *what;  /* "command", "pub/sub", "sentinel" */
    struct node *node; /* the node it belongs to (NULL: sentinel) */
    char host[256];    /* where it connects */
    int port;
    int tls;                        /* rediss://: through a TLS link (redis_tls.h) */
    struct redis_tls_link *link;    /* that link while hiredis has a socket, else NULL */
    int link_up;                    /* its handshake is done: hiredis's fd may be watched */
    int link_failed;                /* it failed: dropped at the turn's end */
    char link_why[400];             /* why, for the commands failed by the drop */
    char tls_logged[400];           /* the TLS refusal logged last (until Redis answers) */
    redisAsyncContext *ac;          /* NULL while down */
    int fd;                         /* its socket while hiredis has one, else -1 */
    uint32_t events;                /* epoll events registered for it */
    uint32_t wanted;                /* those hiredis asked for (held back until link_up) */
    int want_write;                 /* hiredis has output: written at the turn's end */
    int connected;                  /* onConnect said OK */
    int64_t connecting_since;       /* when the attempt started */
    int64_t next_attempt_ms;        /* earliest next attempt */
    int backoff_ms;                 /* grows to 1 s while Redis stays down */
    int ever_connected;             /* for the reconnect counter */
    unsigned seen_up;               /* up_count of its node when last looked at */
    int down_logged;                /* the outage was logged once */
    int auth_refused;               /* Redis refused AUTH: dropped at the turn's end */
    int auth_logged;                /* that refusal was logged (until an AUTH passes) */
    void (*on_up)(struct rconn *c); /* after a connection is made */
    int subscribed;                 /* a SUBSCRIBE was sent on it (hiredis: pub/sub mode) */
    int64_t last_read_ms;           /* when it last had something to read */
    int64_t probe_ms;               /* when a liveness probe went out unanswered, or 0 */
    /* Command connections: Redis's CLIENT ID for this one and the address
     * Redis sees it from, and the same of the one before it, which the next
     * connection kills (cmd_up): a command still in the old one's socket
     * when it was dropped then either ran before anything the new one
     * carries, or never runs. */
    long long client_id, stale_id;
    char laddr[64], stale_addr[64];
};

/* One Redis master: one node, or one of the quorum's. */
struct node {
    struct rconn cmd;               /* commands */
    struct rconn sub;               /* SUBSCRIBE to the release channel */
    struct redis_op pending;        /* sentinel of the sent, unanswered list */
    int ssub_pending;               /* cluster mode: SSUBSCRIBEs not confirmed yet */
    struct sub_sent *sub_sent;      /* sub: PSUBSCRIBEs (and outside Cluster the release
                                       SUBSCRIBE) not confirmed yet, in the order sent
                                       (redis_patterns.inc) */
    struct memguard_seen mem;       /* whether cmd's master may evict (memguard.h) */
    struct lossguard_seen loss;     /* its marker key as last read (lossguard.h) */
    struct lossguard_seen *loss_at; /* what cmd's marker reads update: loss, or in
                                       cluster mode its marker slot's (slot_seen) */
    struct layout_seen layout;      /* its layout version as last read (layout.h) */
    int64_t next_mem_check_ms;      /* when cmd asks INFO memory again */
    int64_t next_marker_ms;         /* when cmd reads the marker again */
};

#define REDIS_MAX_NODES 64 /* quorum masters, or every cluster node ever seen */

struct redis {
    struct loop *loop;                       /* the loop its connections are on */
    struct gw_config cfg;                    /* copy of the settings */
    struct node node[REDIS_MAX_NODES];       /* the Redis masters (cluster: every node met) */
    int nnodes;                              /* 1, the quorum's size, or cluster nodes known */
    int cluster;                             /* cluster mode: ops go by slot (redis_cluster.inc) */
    int counted_up;                          /* single mode: counted in instances_up */
    struct cluster_map map;                  /* cluster mode: slot -> node */
    int uncovered;                           /* cluster mode: slots with no master in the map */
    int64_t next_refresh_ms;                 /* cluster mode: next CLUSTER SLOTS */
    int refresh_asked;                       /* cluster mode: one is outstanding */
    int refresh_i;                           /* cluster mode: the node asked last */
    int16_t sub_at[CLUSTER_SLOTS];           /* cluster mode: node whose pub/sub has the
                                          slot's channel, -1 none */
    uint32_t want[CLUSTER_SLOTS];            /* cluster mode: keys with waiters, per slot */
    unsigned char sub_demand[CLUSTER_SLOTS]; /* cluster mode: an SSUBSCRIBE for a
                                                slot's first waiters is on its way */
    void (*on_slot_subscribed)(void *arg, int slot); /* that one is confirmed */
    void (*on_cmd_up)(void *arg);                    /* a command connection is being made */
    void *cmd_up_arg;                                /* its argument */
    char owns[REDIS_MAX_NODES];                      /* cluster mode: the node serves slots */
    int nmasters;                                    /* cluster mode: nodes serving slots */
    int retry_all_due;                               /* cluster mode: wake every waiter this turn */
    struct redis_op delayed;                         /* cluster mode: ops waiting out TRYAGAIN */
    struct rconn sen;                                /* Sentinel mode: asks for the master and
                                      listens for +switch-master */
    int sentinel_i;                                  /* which sentinel sen talks to */
    int master_known;                                /* Sentinel mode: cmd/sub may connect */
    int reresolve;                                   /* Sentinel mode: ask for the master again */
    int64_t next_reask_ms;                           /* Sentinel mode: no re-ask before this */
    struct lossguard_seen *slot_seen;                /* cluster mode: per slot, what was read of
                                                        the master marker kept there (a master's
                                                        first slot, lossguard.h), whichever node
                                                        served it, so that a failover to an empty
                                                        replica is seen.  One entry per slot,
                                                        never reused: a read answered after the
                                                        map moved a master's first slot is still
                                                        compared with what that key held */
    char (*slot_mark)[LOSSGUARD_MARKER_LEN + 1];     /* cluster mode: each slot's marker as
                                                        learnt (slot markers), "" unknown */
    unsigned char *slot_learning;                    /* cluster mode: a slot's marker is being
                                                        asked for */
    int64_t *slot_unlearnt_until;                    /* cluster mode: a slot's marker could not be
                                                        learnt; not asked for again before this */
    int slot_unlearnt_said;                          /* cluster mode: that was logged (once) */
    struct redis_op parked;                          /* cluster mode: grants waiting for their
                                                        slot's marker (sentinel) */
    char slot_key[GW_PREFIX_MAX + 24];               /* the slot marker key marker_fill sent last */
    char channel[GW_PREFIX_MAX + 16];                /* "<prefix>released" */
    char alive_channel[GW_PREFIX_MAX + 16];          /* "<prefix>alive": liveness probes */
    char marker_key[GW_PREFIX_MAX + 16];             /* "<prefix>marker" (lossguard.h) */
    const char *fail_reason;                         /* why outstanding commands are failing */
    int subscribe;                                   /* keeps a pub/sub connection per node */
    int stopping;                                    /* redis_fail_all ran: commands fail at once */
    struct redis_op *failed;                         /* commands to fail at the turn's end */
    void (*on_release)(void *arg, const char *key, size_t len); /* release hook */
    void (*on_resubscribed)(void *arg);                         /* subscribed (again) */
    void *hook_arg;                                             /* their argument */
    struct redis_pattern *patterns; /* kept besides the release channel (redis_patterns.inc) */
};

/* Cluster mode: each slot's release channel, the same for every instance
 * (made once, before any starts: cluster_channels). */
static char (*cluster_chan)[GW_PREFIX_MAX + 24];

/* The instance of the calling thread (redis_bind). */
static _Thread_local struct redis *self;

/* redis_set_prelude's command, or NULL: the same for every instance, set
 * before any starts. */
static struct redis_op *prelude;

/* The settings, the same for every instance (redis_settings). */
static const struct gw_config *settings;

/* Command connections made so far, per node, by every instance (see
 * reconnect_if_up_elsewhere). */
static atomic_uint up_count[REDIS_MAX_NODES];
/* Single mode: instances there will be (redis_settings), and those whose
 * command connection is up, so that /readyz says ready only when every
 * worker (and the auxiliary loop) can send, not just the one that
 * answered it. */
static atomic_int instances, instances_up;


/* ------------------------------------------------------------------------
 * Operations
 * --------------------------------------------------------------------- */

static void op_post(struct loop_task *t);

/* Allocates an op holding a copy of the words, with `extra` leading words
 * (EVALSHA sha nkeys) left for the caller to fill. */
static struct redis_op *op_new(int extra, int argc, const char *const *argv, const size_t *lens,
                               redis_cb cb, void *arg) {
    size_t bytes = 0;
    for (int i = 0; i < argc; i++) bytes += lens[i] + 1;
    int total = extra + argc;
    struct redis_op *op =
        alloc_check(malloc(sizeof *op + (size_t)total * (sizeof(char *) + sizeof(size_t)) + bytes));
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
    op->slot = -1; /* born_ms is set when first sent, on the instance's thread */
    op->task.run = op_post;
    return op;
}

static void op_fail(struct redis_op *op, const char *why) {
    struct redis_result res = {.ok = 0, .reply = NULL, .error = why, .maybe_ran = op->sent_ms != 0};
    metrics_inc(M_REDIS_ERRORS, 1);
    op->cb(op->arg, &res);
    free(op);
}

static void on_reply(redisAsyncContext *ac, void *r, void *privdata);
static void reconnect_if_up_elsewhere(struct rconn *c);

/* A command that cannot be sent fails at the turn's end, not inside its
 * caller: a handler's callback never runs before the handler returned,
 * and a retry that fails again cannot recurse. */
static void op_fail_later(struct redis_op *op, const char *why) {
    if (self->stopping) {
        op_fail(op, why);
        return;
    }
    op->why = why;
    op->next = self->failed;
    self->failed = op;
}

static void fail_queued(void) {
    while (self->failed) {
        struct redis_op *op = self->failed;
        self->failed = op->next;
        op_fail(op, op->why);
    }
}

/* Hands op to hiredis, which appends it to its output buffer; the write
 * happens once per loop turn, for everything appended in that turn. */
static int cluster_route(struct redis_op *op);
static void cluster_connect_now(struct node *n);
static void cluster_refresh_soon(void);
static void slot_marker_key(int slot, char *out, size_t cap);
static int slot_marker_park(struct redis_op *op, struct node *n);
static void slot_marks_forget(struct node *n);
static void marker_read(struct rconn *c, struct lossguard_seen *seen, const char *value);
static void send_marker_check(struct rconn *c);
static void marker_base_get(int slot, char *out);
static int seen_slot(const struct lossguard_seen *seen);
static void holdoff_write(struct node *n, const char *marker);
static struct redis_op *eval_op(enum script_id id, int nkeys, int nargs, const char *const *argv,
                                const size_t *lens, redis_cb cb, void *arg);

/* A grant script's marker words (lua/_marker.lua), for the master it goes
 * to now: its marker key and the value this instance last read there, so
 * that a master that lost its data since is refused a fresh grant by the
 * script itself, not only at the next periodic read.  Filled again on
 * every send (a NOSCRIPT retry, a redirect).  Redis Cluster mode: a
 * script reads keys of its own slot only, so the key is its slot's marker
 * and the value the one this instance learnt there ("" while unknown:
 * nothing checked; see "slot markers" in redis_cluster.inc). */
static void marker_fill(struct redis_op *op, struct node *n) {
    int last = op->argc - 1;
    if (self->cluster) {
        slot_marker_key(op->slot, self->slot_key, sizeof self->slot_key);
        op->argv[op->marker_at] = self->slot_key, op->lens[op->marker_at] = strlen(self->slot_key);
        const char *v = self->slot_mark[op->slot];
        op->argv[last] = v, op->lens[last] = strlen(v);
        snprintf(op->sent_under, sizeof op->sent_under, "%s", n->loss_at ? n->loss_at->marker : "");
        return;
    }
    op->argv[op->marker_at] = self->marker_key;
    op->lens[op->marker_at] = strlen(self->marker_key);
    op->argv[last] = n->loss.marker, op->lens[last] = strlen(n->loss.marker);
}

static void op_send(struct redis_op *op) {
    if (!op->born_ms) op->born_ms = loop_now_ms();
    if (op->slot == -2) op->slot = self->cluster ? cluster_key_slot(op->argv[3], op->lens[3]) : -1;
    if (self->cluster && cluster_route(op) < 0) return;
    struct node *n = &self->node[op->node];
    if (self->cluster) cluster_connect_now(n);
    if (op->marker_at && self->cluster && slot_marker_park(op, n)) return;
    if (op->marker_at) marker_fill(op, n);
    if (!n->cmd.ac) reconnect_if_up_elsewhere(&n->cmd);
    if (!n->cmd.ac) {
        op_fail_later(op, "Redis is not connected");
        return;
    }
    if (op->asking) {
        const char *ask[1] = {"ASKING"};
        size_t ask_len[1] = {6};
        redisAsyncCommandArgv(n->cmd.ac, on_reply, NULL, 1, ask, ask_len);
    }
    if (redisAsyncCommandArgv(n->cmd.ac, on_reply, op, op->argc, op->argv, op->lens) != REDIS_OK) {
        op_fail_later(op, "Redis connection is closing");
        return;
    }
    op->sent_ms = loop_now_ms();
    op->prev = n->pending.prev;
    op->next = &n->pending;
    n->pending.prev->next = op;
    n->pending.prev = op;
}

/* Run on the instance's own thread (redis_eval_on). */
static void op_post(struct loop_task *t) {
    struct redis_op *op = (struct redis_op *)t;
    if (self->stopping)
        op_fail(op, "the gateway is stopping");
    else
        op_send(op);
}

static void send_script_load(struct rconn *c, int id) {
    const struct script *s = script_get((enum script_id)id);
    const char *argv[3] = {"SCRIPT", "LOAD", (const char *)s->src};
    size_t lens[3] = {6, 4, s->len};
    redisAsyncCommandArgv(c->ac, on_reply, NULL, 3, argv, lens);
}

static int cluster_redirect(struct redis_op *op, const char *err);

/* A grant script refused: the master's marker is not what this instance
 * last read (lua/_marker.lua answers {REDIS_MARKER_MOVED, marker now}).
 * The loss is noted before the caller sees the answer, as a periodic read
 * would have noted it, so the caller finds the master held off. */
static void marker_refusal(struct node *n, struct redis_op *op, const redisReply *reply) {
    if (reply->type != REDIS_REPLY_ARRAY || reply->elements < 2 ||
        reply->element[0]->type != REDIS_REPLY_INTEGER ||
        reply->element[0]->integer != REDIS_MARKER_MOVED ||
        reply->element[1]->type != REDIS_REPLY_STRING)
        return;
    if (self->cluster) {
        /* A slot's marker: every slot of that master is learnt anew, and
         * its own marker read now (what value the loss left there).  The
         * refused slot by itself too: the map may name another owner
         * since the grant went out.  A loss the master's marker had shown
         * since (the process read another value than this grant went
         * under) was held off for then: only learnt anew. */
        slot_marks_forget(n);
        if (op->slot >= 0) self->slot_mark[op->slot][0] = '\0';
        char latest[LOSSGUARD_MARKER_LEN + 1] = "";
        if (n->loss_at) marker_base_get(seen_slot(n->loss_at), latest);
        lossguard_note_slot(n->cmd.host, n->cmd.port, op->sent_under, latest);
        if (n->cmd.ac && n->cmd.connected) send_marker_check(&n->cmd);
        return;
    }
    if (lossguard_note(&n->loss, n->cmd.host, n->cmd.port, reply->element[1]->str))
        holdoff_write(n, reply->element[1]->str);
}

static void on_reply(redisAsyncContext *ac, void *r, void *privdata) {
    redisReply *reply = r;
    struct redis_op *op = privdata;

    if (!op) { /* AUTH, SELECT, SCRIPT LOAD: only errors matter */
        if (reply && reply->type == REDIS_REPLY_ERROR)
            log_error("redis: setup command failed: %s", reply->str);
        return;
    }
    op->prev->next = op->next;
    op->next->prev = op->prev;
    if (!reply) {
        op_fail(op, self->fail_reason ? self->fail_reason : "Redis connection lost");
        return;
    }
    if (reply->type == REDIS_REPLY_ERROR) {
        if (op->script >= 0 && !op->retried && strncmp(reply->str, "NOSCRIPT", 8) == 0) {
            /* The script cache was emptied: load it and send the command
             * again behind the load, in the same pipeline. */
            log_info("redis: NOSCRIPT for %s, reloading", script_get(op->script)->file);
            metrics_inc(M_REDIS_NOSCRIPT, 1);
            op->retried = 1;
            send_script_load(&self->node[op->node].cmd, op->script);
            op_send(op);
            return;
        }
        if (self->cluster && cluster_redirect(op, reply->str)) return;
        if (self->cfg.nsentinels && strncmp(reply->str, "READONLY", 8) == 0) self->reresolve = 1;
        log_warn("redis: command failed: %s", reply->str);
        op_fail(op, reply->str);
        return;
    }
    if (op->marker_at) marker_refusal(&self->node[op->node], op, reply);
    struct redis_result res = {.ok = 1, .reply = reply, .error = NULL};
    op->cb(op->arg, &res);
    free(op);
}

/* ------------------------------------------------------------------------
 * hiredis event hooks: hiredis says what it wants to wait for; the loop's
 * epoll registration follows.  ev.data is the struct rconn.  Output is the
 * exception: a connected socket is almost always writable, so hiredis's
 * wish to write only marks the connection, the turn's end writes, and
 * EPOLLOUT is registered only while a write is left unfinished (the
 * socket's buffer full).  That saves two epoll_ctl per turn and
 * connection with output.
 * --------------------------------------------------------------------- */

static void on_events(void *arg, uint32_t events) {
    struct rconn *c = arg;
    if (events & EPOLLIN) c->last_read_ms = loop_now_ms(), c->probe_ms = 0; /* alive */
    if (events & EPOLLIN) c->tls_logged[0] = '\0'; /* Redis answered over it */
    if (c->ac && (events & (EPOLLIN | EPOLLERR | EPOLLHUP))) redisAsyncHandleRead(c->ac);
    if (c->ac && (events & EPOLLOUT)) redisAsyncHandleWrite(c->ac);
}

/* Keyed on c->fd, not c->ac: hiredis calls cleanup after on_connect has
 * already forgotten a failed context, and the registration must still go.
 * Over TLS nothing is registered until the handshake is done: hiredis
 * then finds its socket connected (on_connect) and writes what it
 * queued. */
static void ev_update(struct rconn *c, uint32_t events) {
    c->wanted = events;
    if (c->link && !c->link_up) return;
    if (c->fd < 0 || events == c->events) return;
    if (loop_fd(self->loop, c->fd, events, on_events, c) < 0)
        log_error("redis: cannot watch the connection's socket %d: %s", c->fd, strerror(errno));
    c->events = events;
}
static void ev_add_read(void *p) {
    struct rconn *c = p;
    ev_update(c, c->wanted | EPOLLIN);
}
static void ev_del_read(void *p) {
    struct rconn *c = p;
    ev_update(c, c->wanted & ~(uint32_t)EPOLLIN);
}
static void ev_add_write(void *p) {
    struct rconn *c = p;
    c->want_write = 1;
    if (!c->connected) ev_update(c, c->wanted | EPOLLOUT); /* connect(2) completes so */
}
static void ev_del_write(void *p) {
    struct rconn *c = p;
    c->want_write = 0;
    ev_update(c, c->wanted & ~(uint32_t)EPOLLOUT);
}
static void ev_cleanup(void *p) {
    struct rconn *c = p;
    ev_update(c, 0);
    c->want_write = 0;
    c->fd = -1;
    redis_tls_free(c->link); /* hiredis closes its own end after this */
    c->link = NULL;
    c->link_up = c->link_failed = 0;
}

/* ------------------------------------------------------------------------
 * TLS: the link under hiredis (redis_tls.h) reports here.
 * --------------------------------------------------------------------- */

static void link_up(void *arg) {
    struct rconn *c = arg;
    c->link_up = 1;
    ev_update(c, c->wanted); /* hiredis finds its socket connected (on_connect) */
}

static void link_failed(void *arg, const char *why, int refused) {
    struct rconn *c = arg;
    snprintf(c->link_why, sizeof c->link_why, "%s", why);
    c->link_failed = 1;
    if (refused) {
        /* redis_tls.c logged it, once for every connection and attempt. */
        snprintf(c->tls_logged, sizeof c->tls_logged, "%s", why);
    } else if (!c->down_logged) {
        log_warn("redis: %s connection to %s:%d (TLS) failed: %s", c->what, c->host, c->port, why);
    }
    if (!c->connected) c->down_logged = 1;
}

/* ------------------------------------------------------------------------
 * Connections
 * --------------------------------------------------------------------- */

static struct rconn *conn_of(const redisAsyncContext *ac) { return ac->ev.data; }

static void cluster_sub_gone(struct node *n);

/* A node that cannot be reached.  Sentinel mode: the master the sentinels
 * named refuses connections (a promotion they have not announced, or
 * missed): ask them again rather than knock on the old master's door until
 * +switch-master comes.  Redis Cluster mode: ask for the slot map soon, so
 * that a failover's new master is found about when the cluster has
 * elected it, not at the next periodic refresh (cluster_refresh_soon). */
static void connect_failed(struct rconn *c) {
    if (self->cfg.nsentinels && c == &self->node[0].cmd) self->reresolve = 1;
    if (self->cluster) cluster_refresh_soon();
}

static void connection_gone(struct rconn *c) {
    if (c == &self->sen) self->sentinel_i++; /* the next attempt asks the next one */
    if (self->cluster && c->node && c == &c->node->sub) cluster_sub_gone(c->node);
    if (c->node && c == &c->node->cmd) {
        memguard_forget(&c->node->mem);
        if (c->client_id > 0) {
            c->stale_id = c->client_id;
            memcpy(c->stale_addr, c->laddr, sizeof c->stale_addr);
        }
        c->client_id = 0;
    }
    if (c == &self->node[0].cmd && self->counted_up) {
        self->counted_up = 0;
        atomic_fetch_sub(&instances_up, 1);
    }
    c->ac = NULL;
    c->connected = 0;
    c->next_attempt_ms = loop_now_ms() + c->backoff_ms;
    c->backoff_ms = c->backoff_ms * 2 > 1000 ? 1000 : c->backoff_ms * 2;
}

static void on_connect(const redisAsyncContext *ac, int status) {
    struct rconn *c = conn_of(ac);
    if (status != REDIS_OK) {
        if (!c->down_logged)
            log_warn("redis: cannot connect (%s) to %s:%d: %s", c->what, c->host, c->port,
                     ac->errstr);
        c->down_logged = 1;
        connect_failed(c);
        connection_gone(c); /* hiredis frees ac after this returns */
        return;
    }
    c->connected = 1;
    c->backoff_ms = 100;
    int quiet = c->tls_logged[0] != '\0'; /* refused last time: the line says when it works */
    c->down_logged = 0;
    c->last_read_ms = loop_now_ms();
    c->probe_ms = 0;
    if (c->ever_connected && c->node && c == &c->node->cmd) metrics_inc(M_REDIS_RECONNECTS, 1);
    c->ever_connected = 1;
    if (c->node && c == &c->node->cmd)
        c->seen_up = atomic_fetch_add(&up_count[c->node - self->node], 1) + 1;
    if (c == &self->node[0].cmd && !self->counted_up) {
        self->counted_up = 1;
        atomic_fetch_add(&instances_up, 1);
    }
    if (!quiet)
        log_info("redis: %s connection up to %s:%d%s", c->what, c->host, c->port,
                 c->link ? " (TLS)" : "");
}

static void patterns_gone(struct rconn *c, const char *why);

static void on_disconnect(const redisAsyncContext *ac, int status) {
    struct rconn *c = conn_of(ac);
    patterns_gone(c, status == REDIS_OK ? NULL : ac->errstr);
    if (self->cfg.nsentinels && c == &(&self->node[0])->cmd && status != REDIS_OK)
        self->reresolve = 1;
    if (self->cluster && status != REDIS_OK)
        self->next_refresh_ms = 0; /* who serves its slots now? */
    if (status != REDIS_OK)
        log_warn("redis: %s connection to %s:%d lost: %s", c->what, c->host, c->port, ac->errstr);
    connection_gone(c);
}

/* A refused AUTH leaves a connection on which every command fails with
 * NOAUTH: it is dropped at the turn's end (not inside hiredis's callback)
 * and made again a second later, with the password read anew (a rotation
 * whose new password reached Redis before the gateway's file). */
static void on_auth_reply(redisAsyncContext *ac, void *r, void *privdata) {
    redisReply *reply = r;
    (void)privdata;
    if (!reply) return;
    struct rconn *c = conn_of(ac);
    if (reply->type != REDIS_REPLY_ERROR) {
        c->auth_logged = 0;
        return;
    }
    if (!c->auth_logged) {
        char where[300];
        snprintf(where, sizeof where, "%s:%d", c->host, c->port);
        const char *kv[] = {"redis", where, "user",
                            self->cfg.redis_user[0] ? self->cfg.redis_user : "default", NULL};
        log_kv(LOG_ERROR, kv,
               "redis: %s connection to %s: AUTH refused: %s (trying again every second)", c->what,
               where, reply->str);
    }
    c->auth_logged = 1;
    c->auth_refused = 1;
}

/* Starts a non-blocking connection and queues, ahead of any command, what
 * every new connection needs (AUTH, SELECT, then c->on_up's commands). */
static void connect_start(struct rconn *c) {
    redisAsyncContext *ac = redisAsyncConnect(c->host, c->port);
    if (!ac || ac->err) {
        if (!c->down_logged)
            log_warn("redis: cannot connect (%s) to %s:%d: %s", c->what, c->host, c->port,
                     ac ? ac->errstr : "out of memory");
        c->down_logged = 1;
        if (ac) redisAsyncFree(ac);
        connect_failed(c);
        connection_gone(c);
        return;
    }
    c->ac = ac;
    c->fd = ac->c.fd;
    c->events = 0;
    c->wanted = 0;
    if (c->tls) {
        /* hiredis connects; the link takes the socket and hands hiredis a
         * socketpair under the same descriptor (redis_tls.h). */
        char err[200];
        struct redis_tls_owner owner = {.up = link_up, .failed = link_failed, .arg = c};
        c->link_up = c->link_failed = 0;
        c->link = redis_tls_wrap(self->loop, c->fd, c->host, c->port, &owner, err, sizeof err);
        if (!c->link) {
            log_error("redis: cannot set up TLS to %s:%d: %s", c->host, c->port, err);
            c->ac = NULL;
            c->fd = -1;
            redisAsyncFree(ac);
            connection_gone(c);
            return;
        }
    }
    c->subscribed = 0;
    c->connecting_since = loop_now_ms();
    ac->ev.data = c;
    ac->ev.addRead = ev_add_read;
    ac->ev.delRead = ev_del_read;
    ac->ev.addWrite = ev_add_write;
    ac->ev.delWrite = ev_del_write;
    ac->ev.cleanup = ev_cleanup;
    redisAsyncSetConnectCallback(ac, on_connect);
    redisAsyncSetDisconnectCallback(ac, on_disconnect);
    ev_add_write(c); /* connect(2) completes as writability */

    char pw[SECRET_MAX] = "";
    if (c != &self->sen) secret_redis_password(pw); /* a rotated file: read before each */
    if (pw[0]) {
        /* AUTH user password (an ACL user), or AUTH password (the default
         * user); the words go only to Redis, never to a log line. */
        const char *user = self->cfg.redis_user;
        const char *argv[3] = {"AUTH", user, pw};
        size_t lens[3] = {4, strlen(user), strlen(pw)};
        int n = user[0] ? 3 : 2;
        if (!user[0]) argv[1] = pw, lens[1] = lens[2];
        redisAsyncCommandArgv(ac, on_auth_reply, NULL, n, argv, lens);
        explicit_bzero(pw, sizeof pw);
    }
    if (self->cfg.redis_db && c->node && c == &c->node->cmd) {
        char db[16];
        int n = snprintf(db, sizeof db, "%d", self->cfg.redis_db);
        const char *argv[2] = {"SELECT", db};
        size_t lens[2] = {6, (size_t)n};
        redisAsyncCommandArgv(ac, on_reply, NULL, 2, argv, lens);
    }
    c->on_up(c);
}

/* INFO memory's answer on c: may its master evict (memguard.h)?  And its
 * persistence and replicas (lossguard.h).  A NULL reply is the connection
 * going away, which connection_gone accounts. */
static void on_memory_info(redisAsyncContext *ac, void *r, void *privdata) {
    redisReply *reply = r;
    struct rconn *c = privdata;
    if (!reply || reply->type != REDIS_REPLY_STRING || !c->node) return;
    memguard_note(&c->node->mem, c->host, c->port, reply->str);
    lossguard_check_persistence(c->host, c->port, reply->str);
}

/* The marker key (lossguard.h): the SETNX before it made it if missing;
 * GET says what it holds.  privdata: where what was read of that key is
 * kept, as it was when the GET went out.  Not the node's loss_at now: in
 * cluster mode a map that changed the master's first slot meanwhile (a
 * slot moved to or from it) points loss_at at another key's, whose value
 * always differs (every marker is a fresh token): a loss noted, and held
 * off for --max-lease-ms, on a master that lost nothing. */
static void on_marker_get(redisAsyncContext *ac, void *r, void *privdata) {
    redisReply *reply = r;
    struct rconn *c = conn_of(ac);
    if (reply && reply->type == REDIS_REPLY_STRING && c && c->node)
        marker_read(c, privdata, reply->str);
}

/* The layout version (layout.h): set if missing, then read.  In cluster
 * mode every node but the one serving the key's slot answers MOVED: an
 * error, from which nothing is learnt. */
static void on_layout_get(redisAsyncContext *ac, void *r, void *privdata) {
    redisReply *reply = r;
    struct rconn *c = privdata;
    if (reply && reply->type == REDIS_REPLY_STRING && c->node)
        layout_note(&c->node->layout, c->host, c->port, reply->str);
}

static void send_layout_check(struct rconn *c) {
    char key[GW_PREFIX_MAX + 16], mine[24];
    snprintf(key, sizeof key, "%slayout", self->cfg.key_prefix);
    snprintf(mine, sizeof mine, "%lld", layout_version());
    const char *set[3] = {"SETNX", key, mine};
    size_t setl[3] = {5, strlen(key), strlen(mine)};
    redisAsyncCommandArgv(c->ac, NULL, NULL, 3, set, setl);
    const char *get[2] = {"GET", key};
    size_t getl[2] = {3, strlen(key)};
    redisAsyncCommandArgv(c->ac, on_layout_get, c, 2, get, getl);
}

/* A hash tag whose slot is slot: the first decimal number that hashes
 * there (a few thousand tries on average). */
static void slot_tag(int slot, char *out, size_t cap) {
    for (unsigned k = 0; k < (1u << 24); k++) {
        int n = snprintf(out, cap, "%u", k);
        if (cluster_key_slot(out, (size_t)n) == slot) return;
    }
    snprintf(out, cap, "0");
}

/* Cluster mode: what this process read last of each master's marker (by
 * its slot), whichever instance read it: an instance's first read of a
 * master is compared with that, not taken as the first knowledge of it
 * (a worker whose first grant on a master comes after a FLUSHALL the
 * process had seen the master before). */
static pthread_mutex_t marker_base_mu = PTHREAD_MUTEX_INITIALIZER;
static char marker_base[CLUSTER_SLOTS][LOSSGUARD_MARKER_LEN + 1]; /* by slot, "" none; one
                                                                     entry per slot, never
                                                                     reused (BSS: pages
                                                                     untouched until used) */

/* The marker in slot read as value, by any instance. */
static void marker_base_put(int slot, const char *value) {
    if (slot < 0 || slot >= CLUSTER_SLOTS) return;
    pthread_mutex_lock(&marker_base_mu);
    snprintf(marker_base[slot], sizeof marker_base[slot], "%s", value);
    pthread_mutex_unlock(&marker_base_mu);
}

/* An instance's seen of the marker in slot, never read by it: what the
 * process read last. */
static void marker_base_seed(int slot, struct lossguard_seen *seen) {
    if (slot < 0 || slot >= CLUSTER_SLOTS || seen->marker[0]) return;
    pthread_mutex_lock(&marker_base_mu);
    memcpy(seen->marker, marker_base[slot], sizeof seen->marker);
    pthread_mutex_unlock(&marker_base_mu);
}

/* What this process read last of the marker in slot ("" none) into out
 * (LOSSGUARD_MARKER_LEN + 1 bytes). */
static void marker_base_get(int slot, char *out) {
    out[0] = '\0';
    if (slot < 0 || slot >= CLUSTER_SLOTS) return;
    pthread_mutex_lock(&marker_base_mu);
    memcpy(out, marker_base[slot], LOSSGUARD_MARKER_LEN + 1);
    pthread_mutex_unlock(&marker_base_mu);
}

/* The marker slot whose seen this is (cluster mode), or -1. */
static int seen_slot(const struct lossguard_seen *seen) {
    if (!self->slot_seen || seen < self->slot_seen || seen >= self->slot_seen + CLUSTER_SLOTS)
        return -1;
    return (int)(seen - self->slot_seen);
}

/* Cluster mode: a loss on node n, its marker read in slot keep: what was
 * read of the markers in its other slots is forgotten too.  They went
 * with the data (a master's marker lives in its first slot, which moves
 * when slots do); kept, the one made anew there when that slot is the
 * master's first again would count this loss a second time, and hold the
 * master off for another --max-lease-ms. */
static void slot_seen_forget(struct node *n, int keep) {
    int i = (int)(n - self->node);
    for (int s = 0; s < CLUSTER_SLOTS; s++)
        if (s != keep && self->map.owner[s] == i && self->slot_seen[s].marker[0]) {
            self->slot_seen[s].marker[0] = '\0';
            marker_base_put(s, "");
        }
}

/* A marker read on c: noted (lossguard_note), and in cluster mode kept as
 * the process's last read and, on a loss, what was learnt of that
 * master's slots forgotten. */
static void marker_read(struct rconn *c, struct lossguard_seen *seen, const char *value) {
    int lost = lossguard_note(seen, c->host, c->port, value);
    if (lost) holdoff_write(c->node, value);
    if (!self->cluster) return;
    marker_base_put(seen_slot(seen), value);
    if (!lost) return;
    slot_marks_forget(c->node);
    slot_seen_forget(c->node, seen_slot(seen));
}

/* Cluster mode: node i's marker key, in the first slot it serves, and
 * where what is read of it is kept (per slot: the replica promoted in its
 * place serves the same slots and is compared with what its predecessor
 * showed; an instance's first read, with what another one read before,
 * marker_base_seed); NULL while the map names no slot of it. */
static struct lossguard_seen *cluster_marker(int i, char *key, size_t cap) {
    int slot = -1;
    for (int s = 0; s < CLUSTER_SLOTS && slot < 0; s++)
        if (self->map.owner[s] == i) slot = s;
    if (slot < 0) return NULL;
    char tag[16];
    slot_tag(slot, tag, sizeof tag);
    snprintf(key, cap, "%smarker{%s}", self->cfg.key_prefix, tag);
    marker_base_seed(slot, &self->slot_seen[slot]);
    return &self->slot_seen[slot];
}

/* The hold-off key (lossguard.h) beside the marker key marker_key:
 * "<prefix>holdoff", in cluster mode "<prefix>holdoff{TAG}" with the
 * marker's {TAG}, so the same slot (a prefix has no braces: config.c). */
static void holdoff_key_of(const char *marker_key, char *out, size_t cap) {
    const char *tag = strchr(marker_key, '{');
    snprintf(out, cap, "%sholdoff%s", self->cfg.key_prefix, tag ? tag : "");
}

/* Node n's hold-off key; 0 while (cluster mode) the map names no slot of
 * it. */
static int holdoff_key(struct node *n, char *out, size_t cap) {
    char mkey[GW_PREFIX_MAX + 32] = "";
    if (self->cluster) {
        int i = (int)(n - self->node), slot = -1;
        for (int s = 0; s < CLUSTER_SLOTS && slot < 0; s++)
            if (self->map.owner[s] == i) slot = s;
        if (slot < 0) return 0;
        char tag[16];
        slot_tag(slot, tag, sizeof tag); /* as cluster_marker names the marker */
        snprintf(mkey, sizeof mkey, "{%s}", tag);
    }
    holdoff_key_of(mkey, out, cap);
    return 1;
}

/* The write's answer is the hold-off left in Redis: kept here too, so this
 * gateway's end is never before the one every other gateway learns (its
 * own was timed from its notice, a round trip before Redis's). */
static void on_holdoff_written(void *arg, const struct redis_result *res) {
    struct node *n = arg;
    if (res->ok && res->reply->type == REDIS_REPLY_INTEGER && res->reply->integer > 0)
        lossguard_learn(n->cmd.host, n->cmd.port, n->loss_at ? n->loss_at->marker : "",
                        res->reply->integer);
    if (!res->ok)
        log_warn("lossguard: the hold-off of %s:%d was not recorded in Redis (%s): gateways "
                 "started during it will not know it",
                 n->cmd.host, n->cmd.port, res->error);
}

/* A loss noticed on node n (marker: the value it left there, which names
 * it): its hold-off recorded in Redis (lua/holdoff.lua), for the gateways
 * that cannot notice it themselves.  Every connection that notices writes
 * (the script times one loss from its first notice). */
static void holdoff_write(struct node *n, const char *marker) {
    char key[GW_PREFIX_MAX + 32], ms[24];
    if (!holdoff_key(n, key, sizeof key)) return;
    snprintf(ms, sizeof ms, "%lld", self->cfg.max_lease_ms);
    const char *argv[3] = {key, ms, marker};
    size_t lens[3] = {strlen(key), strlen(ms), strlen(marker)};
    struct redis_op *op = eval_op(SCRIPT_HOLDOFF, 1, 3, argv, lens, on_holdoff_written, n);
    op->node = (int)(n - self->node);
    op_send(op);
}

/* The hold-off key's PTTL, read with the marker: a hold-off some gateway
 * recorded (lossguard_learn).  privdata: the marker's seen, as for
 * on_marker_get. */
static void on_holdoff_pttl(redisAsyncContext *ac, void *r, void *privdata) {
    redisReply *reply = r;
    struct rconn *c = conn_of(ac);
    const struct lossguard_seen *seen = privdata;
    if (reply && reply->type == REDIS_REPLY_INTEGER && reply->integer > 0 && c && c->node)
        lossguard_learn(c->host, c->port, seen->marker, reply->integer);
}

/* Did the master lose its data?  Asked first on every new command
 * connection, and again every LOSSGUARD_PERIOD_MS (two small commands: a
 * FLUSHALL is seen within about a second).  In cluster mode each master's
 * marker lives in a slot it serves (cluster_marker); until the map names
 * one, it is asked again 200 ms later. */
static void send_marker_check(struct rconn *c) {
    char key[GW_PREFIX_MAX + 32];
    if (self->cluster)
        c->node->loss_at = cluster_marker((int)(c->node - self->node), key, sizeof key);
    else {
        snprintf(key, sizeof key, "%smarker", self->cfg.key_prefix);
        c->node->loss_at = &c->node->loss;
    }
    if (c->node->loss_at) {
        char fresh[TOKEN_NEW_LEN + 1]; /* one per write: each loss leaves its own */
        token_new(fresh);
        const char *set[3] = {"SETNX", key, fresh};
        size_t setl[3] = {5, strlen(key), strlen(set[2])};
        redisAsyncCommandArgv(c->ac, NULL, NULL, 3, set, setl);
        const char *get[2] = {"GET", key};
        size_t getl[2] = {3, strlen(key)};
        redisAsyncCommandArgv(c->ac, on_marker_get, c->node->loss_at, 2, get, getl);
        char hkey[GW_PREFIX_MAX + 32];
        holdoff_key_of(key, hkey, sizeof hkey);
        const char *pttl[2] = {"PTTL", hkey};
        size_t pttll[2] = {4, strlen(hkey)};
        redisAsyncCommandArgv(c->ac, on_holdoff_pttl, c->node->loss_at, 2, pttl, pttll);
    }
    int soon = self->cluster && !c->node->loss_at && self->nmasters == 0;
    c->node->next_marker_ms = loop_now_ms() + (soon ? 200 : LOSSGUARD_PERIOD_MS);
}

/* Which key layout the master holds (layout.h), may it evict
 * (memguard.h), and its persistence and replicas (lossguard.h): asked
 * first on every new command connection, and again every
 * MEMGUARD_PERIOD_MS. */
static void send_memory_check(struct rconn *c) {
    send_layout_check(c);
    const char *argv[4] = {"INFO", "memory", "persistence", "replication"};
    size_t lens[4] = {4, 6, 11, 11};
    redisAsyncCommandArgv(c->ac, on_memory_info, c, 4, argv, lens);
    c->node->next_mem_check_ms = loop_now_ms() + MEMGUARD_PERIOD_MS;
}

/* CLIENT ID's answer: this connection's id, and the address Redis sees it
 * from (its local address). */
static void on_client_id(redisAsyncContext *ac, void *r, void *privdata) {
    redisReply *reply = r;
    struct rconn *c = privdata;
    if (!reply || reply->type != REDIS_REPLY_INTEGER || c->ac != ac) return;
    struct sockaddr_storage sa;
    socklen_t len = sizeof sa;
    char ip[INET6_ADDRSTRLEN] = "";
    int port = 0;
    int fd = c->link ? redis_tls_socket(c->link) : c->fd; /* the real socket */
    if (getsockname(fd, (struct sockaddr *)&sa, &len) == 0) {
        if (sa.ss_family == AF_INET) {
            struct sockaddr_in *in = (struct sockaddr_in *)&sa;
            inet_ntop(AF_INET, &in->sin_addr, ip, sizeof ip);
            port = ntohs(in->sin_port);
        } else if (sa.ss_family == AF_INET6) {
            struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&sa;
            inet_ntop(AF_INET6, &in6->sin6_addr, ip, sizeof ip);
            port = ntohs(in6->sin6_port);
        }
    }
    if (!ip[0]) return; /* unknown: the next connection kills nothing */
    c->client_id = reply->integer;
    snprintf(c->laddr, sizeof c->laddr, "%s:%d", ip, port);
}

/* "No such client" is the usual answer: the old connection had gone. */
static void on_client_kill(redisAsyncContext *ac, void *r, void *privdata) {
    redisReply *reply = r;
    if (reply && reply->type == REDIS_REPLY_INTEGER && reply->integer > 0)
        log_info("redis: killed this gateway's previous connection to %s:%d: what it still "
                 "carried will not run",
                 ((struct rconn *)privdata)->host, ((struct rconn *)privdata)->port);
}

static void cmd_up(struct rconn *c) {
    if (c->stale_id > 0) {
        /* ID and ADDR must both match: another server (a failover, a
         * restart) cannot have a client with both. */
        char id[24];
        snprintf(id, sizeof id, "%lld", c->stale_id);
        const char *argv[6] = {"CLIENT", "KILL", "ID", id, "ADDR", c->stale_addr};
        size_t lens[6] = {6, 4, 2, strlen(id), 4, strlen(c->stale_addr)};
        redisAsyncCommandArgv(c->ac, on_client_kill, c, 6, argv, lens);
        c->stale_id = 0;
    }
    {
        const char *argv[2] = {"CLIENT", "ID"};
        size_t lens[2] = {6, 2};
        redisAsyncCommandArgv(c->ac, on_client_id, c, 2, argv, lens);
    }
    send_memory_check(c); /* before any grant this connection carries is answered */
    send_marker_check(c);
    for (int i = 0; i < SCRIPT_COUNT; i++) send_script_load(c, i);
    if (prelude)
        redisAsyncCommandArgv(c->ac, on_reply, NULL, prelude->argc, prelude->argv, prelude->lens);
    if (self->on_cmd_up) self->on_cmd_up(self->cmd_up_arg);
}

#include "server/redis_patterns.inc"

/* Each message is ["message", channel, "KIND:NAME"]; the first reply is the
 * subscription itself, after which releases may have been missed while the
 * connection was down, so every waiter tries again. */
static void on_release_message(redisAsyncContext *ac, void *r, void *privdata) {
    redisReply *reply = r;
    if (!reply || reply->type != REDIS_REPLY_ARRAY || reply->elements < 3) return;
    redisReply *kind = reply->element[0], *payload = reply->element[2];
    if (kind->type != REDIS_REPLY_STRING) return;
    if (strcmp(kind->str, "subscribe") == 0) {
        if (self->on_resubscribed) self->on_resubscribed(self->hook_arg);
        sub_confirmed(conn_of(ac)->node, self->channel, strlen(self->channel));
    } else if (strcmp(kind->str, "message") == 0 && payload->type == REDIS_REPLY_STRING) {
        if (self->on_release) self->on_release(self->hook_arg, payload->str, payload->len);
    }
}

static void cluster_sub_up(struct rconn *c);

static void sub_up(struct rconn *c) {
    sub_sent_forget(c->node);
    if (self->cluster) {
        cluster_sub_up(c);
        patterns_up(c);
        return;
    }
    const char *argv[2] = {"SUBSCRIBE", self->channel};
    size_t lens[2] = {9, strlen(self->channel)};
    redisAsyncCommandArgv(c->ac, on_release_message, NULL, 2, argv, lens);
    sub_sent_note(c, self->channel);
    c->subscribed = 1;
    patterns_up(c);
}

/* ------------------------------------------------------------------------
 * Sentinel mode: a third connection asks a sentinel for the master, then
 * listens on it for +switch-master; the command and pub/sub connections
 * follow.  Scripts are reloaded on the new master like on any new
 * connection (cmd_up), and NOSCRIPT covers whatever slips through.
 * --------------------------------------------------------------------- */

static void connection_drop(struct rconn *c, const char *why);

static void set_master(const char *host, int port) {
    struct node *n = (&self->node[0]);
    if (strcmp(n->cmd.host, host) == 0 && n->cmd.port == port && n->cmd.port) {
        /* The same one again (asked again after it refused, or after a
         * failed write): its connections keep their back-off. */
        self->master_known = 1;
        return;
    }
    log_info("redis: sentinel names %s:%d as master '%s'", host, port, self->cfg.sentinel_master);
    /* A re-ask still pending was about the old master (its refused
     * connects): carried out now, it would drop the new master's fresh
     * connections and fail what they carry (seen a second after a
     * failover). */
    self->reresolve = 0;
    snprintf(n->cmd.host, sizeof n->cmd.host, "%s", host);
    snprintf(n->sub.host, sizeof n->sub.host, "%s", host);
    n->cmd.port = n->sub.port = port;
    self->master_known = 1;
    if (n->cmd.ac) connection_drop(&n->cmd, "Redis master changed");
    if (n->sub.ac) connection_drop(&n->sub, "Redis master changed");
    n->cmd.next_attempt_ms = n->sub.next_attempt_ms = 0;
    n->cmd.backoff_ms = n->sub.backoff_ms = 100;
}

static void on_sentinel_event(redisAsyncContext *ac, void *r, void *privdata);

/* The answer to get-master-addr-by-name.  Only then SUBSCRIBE: hiredis
 * treats a connection as subscribed from the moment SUBSCRIBE is sent, and
 * would take this plain answer for a pub/sub message. */
static void on_master_addr(redisAsyncContext *ac, void *r, void *privdata) {
    redisReply *reply = r;
    if (reply) {
        const char *sub[2] = {"SUBSCRIBE", "+switch-master"};
        size_t sub_lens[2] = {9, 14};
        redisAsyncCommandArgv(ac, on_sentinel_event, NULL, 2, sub, sub_lens);
        conn_of(ac)->subscribed = 1;
    }
    if (reply && reply->type == REDIS_REPLY_ARRAY && reply->elements == 2 &&
        reply->element[0]->type == REDIS_REPLY_STRING &&
        reply->element[1]->type == REDIS_REPLY_STRING) {
        set_master(reply->element[0]->str, atoi(reply->element[1]->str));
    } else if (reply) {
        log_warn("redis: sentinel %s:%d does not know master '%s'", self->sen.host, self->sen.port,
                 self->cfg.sentinel_master);
    }
}

/* "+switch-master" carries "<name> <old-ip> <old-port> <new-ip> <new-port>". */
static void on_sentinel_event(redisAsyncContext *ac, void *r, void *privdata) {
    redisReply *reply = r;
    if (!reply || reply->type != REDIS_REPLY_ARRAY || reply->elements < 3) return;
    redisReply *kind = reply->element[0], *payload = reply->element[2];
    if (kind->type != REDIS_REPLY_STRING || strcmp(kind->str, "message") != 0 ||
        payload->type != REDIS_REPLY_STRING)
        return;
    char name[128], old_ip[64], new_ip[64];
    int old_port, new_port;
    if (sscanf(payload->str, "%127s %63s %d %63s %d", name, old_ip, &old_port, new_ip, &new_port) ==
            5 &&
        strcmp(name, self->cfg.sentinel_master) == 0)
        set_master(new_ip, new_port);
}

static void sen_up(struct rconn *c) {
    const char *ask[3] = {"SENTINEL", "get-master-addr-by-name", self->cfg.sentinel_master};
    size_t ask_lens[3] = {8, 23, strlen(self->cfg.sentinel_master)};
    redisAsyncCommandArgv(c->ac, on_master_addr, NULL, 3, ask, ask_lens);
}

/* Drops the connection, failing everything outstanding with `why`. */
static void connection_drop(struct rconn *c, const char *why) {
    redisAsyncContext *ac = c->ac;
    self->fail_reason = why;
    redisAsyncFree(ac); /* fails outstanding commands; may call on_disconnect */
    if (c->ac == ac) connection_gone(c);
    self->fail_reason = NULL;
}

/* Workers reconnect on their own, each with its own back-off (up to 1 s).
 * Once one of them has a command connection to a node again, Redis is
 * back: the others try at once (from their next command or turn) instead
 * of waiting out their back-off, so that one gateway does not answer 503
 * on one worker and 200 on another for a second after Redis returns. */

static void reconnect_if_up_elsewhere(struct rconn *c) {
    if (c->ac || !c->node || c != &c->node->cmd || self->stopping) return;
    if (self->cluster) return; /* node indices differ between instances there */
    if (self->cfg.nsentinels && !self->master_known) return;
    unsigned up = atomic_load(&up_count[c->node - self->node]);
    if (up == c->seen_up) return;
    c->seen_up = up;
    connect_start(c);
}

/* Everything queued on c goes out in one write; what the socket did not
 * take waits for EPOLLOUT. */
static void flush_output(struct rconn *c) {
    if (c->ac && c->connected && c->want_write) {
        redisAsyncHandleWrite(c->ac);
        if (c->ac && c->want_write) ev_update(c, c->wanted | EPOLLOUT);
        if (c->link) redis_tls_flush(c->link); /* on to Redis now, not next turn */
    }
}

/* ------------------------------------------------------------------------
 * Liveness of idle connections.  A connection that nothing was read from
 * for PROBE_IDLE_MS is asked to answer: a plain one a PING, a subscribed
 * one (pub/sub, Sentinel) a SUBSCRIBE of <prefix>alive, a channel nothing
 * is published on (hiredis 0.14 queues a callback for a PING sent on a
 * subscribed connection and never calls nor frees it: a slow leak; a
 * SUBSCRIBE's is replaced instead).  Nothing read within the command
 * timeout after that: the connection is silently dead (a NAT or load
 * balancer forgot the flow; no FIN, no RST), and is dropped and made
 * again.  A new pub/sub connection subscribes again, which makes every
 * waiter it serves try again (on_resubscribed), so a release announced
 * while it was dead is not waited out; a new Sentinel connection asks for
 * the master again.  A dead one is found within PROBE_IDLE_MS plus the
 * command timeout (3 s by default) and re-made within the reconnect
 * back-off (100 ms at first) after that.
 * --------------------------------------------------------------------- */

#define PROBE_IDLE_MS 1000

static void on_probe_answer(redisAsyncContext *ac, void *r, void *privdata) {
    /* Its bytes were the point (on_events saw them). */
}

static void probe(struct rconn *c, int64_t now) {
    if (c->probe_ms) {
        if (now - c->probe_ms <= self->cfg.redis_timeout_ms) return;
        log_warn("redis: %s connection to %s:%d silent for %lld ms, making it again", c->what,
                 c->host, c->port, (long long)(now - c->last_read_ms));
        metrics_inc(M_REDIS_PROBES_FAILED, 1);
        connection_drop(c, "Redis did not answer a liveness probe in time");
        if (self->cfg.nsentinels && c == &self->node[0].cmd) self->reresolve = 1; /* master? */
        return;
    }
    if (now - c->last_read_ms < PROBE_IDLE_MS) return;
    if (c->subscribed) {
        const char *argv[2] = {"SUBSCRIBE", self->alive_channel};
        size_t lens[2] = {9, strlen(self->alive_channel)};
        redisAsyncCommandArgv(c->ac, on_probe_answer, NULL, 2, argv, lens);
    } else {
        const char *argv[1] = {"PING"};
        size_t lens[1] = {4};
        redisAsyncCommandArgv(c->ac, on_probe_answer, NULL, 1, argv, lens);
    }
    c->probe_ms = now;
}

static void conn_turn(struct rconn *c, int64_t now) {
    if (!c->ac) {
        if (c == &self->sen) {
            if (!self->cfg.nsentinels) return;
            const struct gw_endpoint *e =
                &self->cfg.sentinels[self->sentinel_i % self->cfg.nsentinels];
            snprintf(c->host, sizeof c->host, "%s", e->host);
            c->port = e->port;
            c->tls = e->tls;
        } else if (self->cfg.nsentinels && !self->master_known) {
            return; /* wait until a sentinel names the master */
        } else if (self->cluster && c->node && c == &c->node->sub &&
                   !self->owns[c->node - self->node]) {
            return; /* cluster mode: only masters' shard channels are listened to */
        }
        if (now >= c->next_attempt_ms)
            connect_start(c);
        else
            reconnect_if_up_elsewhere(c);
        return;
    }
    if (c->link_failed) {
        if (!c->connected) connect_failed(c);
        connection_drop(c, c->link_why);
        return;
    }
    if (c->auth_refused) {
        c->auth_refused = 0;
        connection_drop(c, "Redis refused AUTH (see the gateway's log)");
        c->next_attempt_ms = now + 1000;
        return;
    }
    if (!c->connected && now - c->connecting_since > self->cfg.redis_timeout_ms) {
        if (c->link && redis_tls_expire(c->link, self->cfg.redis_timeout_ms, c->link_why,
                                        sizeof c->link_why)) {
            connection_drop(c, c->link_why); /* redis_tls.c logged it, once */
            return;
        }
        log_warn("redis: %s connection to %s:%d timed out", c->what, c->host, c->port);
        connection_drop(c, "Redis did not accept the connection in time");
        return;
    }
    if (c->connected) probe(c, now);
    if (c->ac) flush_output(c);
}

static void cluster_turn(int64_t now);

static void redis_loop_turn(int64_t now) {
    if (self->stopping) return; /* redis_fail_all closed everything for good */
    if (self->reresolve && now >= self->next_reask_ms) {
        /* The master went away, refused a connection or a write: ask a
         * sentinel again -- once a second at most, as a failover takes
         * seconds and every refused connect or write asks for it. */
        self->reresolve = 0;
        self->next_reask_ms = now + 1000;
        self->master_known = 0;
        if ((&self->node[0])->cmd.ac)
            connection_drop(&(&self->node[0])->cmd, "Redis master is changing");
        if ((&self->node[0])->sub.ac)
            connection_drop(&(&self->node[0])->sub, "Redis master is changing");
        if (self->sen.ac) connection_drop(&self->sen, "asking again");
        self->sen.next_attempt_ms = 0;
    }
    if (self->sen.ac && !self->master_known &&
        now - self->sen.connecting_since > self->cfg.redis_timeout_ms) {
        /* A frozen sentinel accepts connections but never answers. */
        log_warn("redis: sentinel %s:%d did not name the master in time, asking the next",
                 self->sen.host, self->sen.port);
        connection_drop(&self->sen, "the sentinel did not answer");
    }
    conn_turn(&self->sen, now);
    if (self->cluster) cluster_turn(now);
    for (int i = 0; i < self->nnodes; i++) {
        struct node *n = &self->node[i];
        struct redis_op *oldest = n->pending.next;
        if (n->cmd.ac && oldest != &n->pending &&
            now - oldest->sent_ms > self->cfg.redis_timeout_ms) {
            log_warn("redis: %s:%d gave no answer within %d ms, dropping the connection",
                     n->cmd.host, n->cmd.port, self->cfg.redis_timeout_ms);
            connection_drop(&n->cmd, "Redis did not answer in time");
            if (self->cfg.nsentinels) self->reresolve = 1; /* is it still the master? */
        }
        if (n->cmd.ac && n->cmd.connected && now >= n->next_mem_check_ms)
            send_memory_check(&n->cmd);
        if (n->cmd.ac && n->cmd.connected && now >= n->next_marker_ms) send_marker_check(&n->cmd);
        conn_turn(&n->cmd, now);
        if (self->subscribe) conn_turn(&n->sub, now);
    }
}

/* ------------------------------------------------------------------------
 * Public
 * --------------------------------------------------------------------- */

/* The liveness hash, <prefix>gw, that the Redis layer declares outside
 * Redis Cluster for every script that judges holders (scripts.h, live):
 * live holders' leases are their sessions' fields there (lua/_holders.lua,
 * "sessions").  Set by redis_new, the same for every instance, before any
 * worker runs; "" in Redis Cluster mode (no live holders). */
static char live_key[GW_PREFIX_MAX + 8];

static int declared(const char *const *argv, const size_t *lens, int nkeys, const char *key) {
    size_t len = strlen(key);
    for (int i = 0; i < nkeys; i++)
        if (lens[i] == len && memcmp(argv[i], key, len) == 0) return 1;
    return 0;
}

/* An EVALSHA of script id.  After the caller's keys come, outside Redis
 * Cluster, the liveness hash for a script that judges holders (unless the
 * caller declared it), then the marker key for a script that grants, whose
 * value goes last among the arguments (filled at send time, marker_fill). */
static struct redis_op *eval_op(enum script_id id, int nkeys, int nargs, const char *const *argv,
                                const size_t *lens, redis_cb cb, void *arg) {
    const struct script *s = script_get(id);
    int live = s->live && live_key[0] && !declared(argv, lens, nkeys, live_key);
    int marker = s->marker != 0;
    struct redis_op *op;
    if (live || marker) {
        int total = nargs + live + 2 * marker, at = nkeys;
        /* Every release and inspect comes here: no malloc for the usual few words. */
        const char *few[32];
        size_t few_lens[32];
        const char **words = total <= 32 ? few : alloc_check(malloc((size_t)total * sizeof *words));
        size_t *wl = total <= 32 ? few_lens : alloc_check(malloc((size_t)total * sizeof *wl));
        memcpy(words, argv, (size_t)nkeys * sizeof *words);
        memcpy(wl, lens, (size_t)nkeys * sizeof *wl);
        if (live) words[at] = live_key, wl[at] = strlen(live_key), at++;
        int marker_pos = at;
        if (marker) words[at] = words[total - 1] = "", wl[at] = wl[total - 1] = 0, at++;
        memcpy(words + at, argv + nkeys, (size_t)(nargs - nkeys) * sizeof *words);
        memcpy(wl + at, lens + nkeys, (size_t)(nargs - nkeys) * sizeof *wl);
        op = op_new(3, total, words, wl, cb, arg);
        if (words != few) free(words);
        if (wl != few_lens) free(wl);
        if (marker) op->marker_at = 3 + marker_pos;
        nkeys = at;
    } else {
        op = op_new(3, nargs, argv, lens, cb, arg);
    }
    int nk = snprintf(op->numkeys, sizeof op->numkeys, "%d", nkeys);
    op->argv[0] = "EVALSHA";
    op->lens[0] = 7;
    op->argv[1] = s->sha;
    op->lens[1] = 40;
    op->argv[2] = op->numkeys;
    op->lens[2] = (size_t)nk;
    op->script = (int)id;
    if (nkeys > 0) op->slot = -2; /* from argv[3] once on an instance (op_send) */
    return op;
}

/* Sends op on the calling thread's instance; with none (not a worker) or
 * once stopping, it fails at once. */
static void post(struct redis_op *op) {
    if (!self || self->stopping)
        op_fail(op, "the gateway is stopping");
    else
        op_send(op);
}

/* Sends op on instance r, from any thread: posted to r's loop. */
static void post_on(struct redis *r, struct redis_op *op) {
    if (loop_post(r->loop, &op->task) < 0) op_fail(op, "the gateway is stopping");
}

void redis_eval(enum script_id id, int nkeys, int nargs, const char *const *argv,
                const size_t *lens, redis_cb cb, void *arg) {
    post(eval_op(id, nkeys, nargs, argv, lens, cb, arg));
}

void redis_eval_on(struct redis *r, enum script_id id, int nkeys, int nargs,
                   const char *const *argv, const size_t *lens, redis_cb cb, void *arg) {
    post_on(r, eval_op(id, nkeys, nargs, argv, lens, cb, arg));
}

/* ------------------------------------------------------------------------
 * Fan-out (quorum mode).  Each master's reply is copied, since hiredis
 * frees it when its own callback returns, and handed over with the others
 * once the last master has answered.
 * --------------------------------------------------------------------- */

struct fanout;
struct fan_child {
    struct fanout *f; /* the whole */
    int i;            /* which master */
};

struct fanout {
    int n, left;     /* masters, and those yet to answer */
    redis_all_cb cb; /* called once, with all results */
    void *arg;       /* passed to cb */
    struct fan_child child[GW_MAX_NODES];
    struct redis_result res[GW_MAX_NODES];
    redisReply *copy[GW_MAX_NODES]; /* owned copies of the replies */
    char err[GW_MAX_NODES][96];     /* owned copies of the errors */
};

static redisReply *reply_copy(const redisReply *r) {
    redisReply *c = alloc_check(calloc(1, sizeof *c));
    c->type = r->type;
    c->integer = r->integer;
    c->len = r->len;
    if (r->str) {
        c->str = alloc_check(malloc(r->len + 1));
        memcpy(c->str, r->str, r->len + 1);
    }
    if (r->elements) {
        c->element = alloc_check(calloc(r->elements, sizeof *c->element));
        c->elements = r->elements;
        for (size_t i = 0; i < r->elements; i++) c->element[i] = reply_copy(r->element[i]);
    }
    return c; /* freeReplyObject frees it: hiredis allocates with malloc too */
}

static void fan_child_done(void *arg, const struct redis_result *res) {
    struct fan_child *ch = arg;
    struct fanout *f = ch->f;
    f->res[ch->i].ok = res->ok;
    f->res[ch->i].maybe_ran = res->maybe_ran;
    if (res->ok) {
        f->copy[ch->i] = reply_copy(res->reply);
        f->res[ch->i].reply = f->copy[ch->i];
    } else {
        snprintf(f->err[ch->i], sizeof f->err[ch->i], "%s", res->error);
        f->res[ch->i].error = f->err[ch->i];
    }
    if (--f->left > 0) return;
    f->cb(f->arg, f->res, f->n);
    for (int i = 0; i < f->n; i++)
        if (f->copy[i]) freeReplyObject(f->copy[i]);
    free(f);
}

static struct fanout *fanout_new(redis_all_cb cb, void *arg) {
    struct fanout *f = alloc_check(calloc(1, sizeof *f));
    f->n = f->left = settings->nnodes;
    f->cb = cb;
    f->arg = arg;
    for (int i = 0; i < f->n; i++) f->child[i] = (struct fan_child){f, i};
    return f;
}

void redis_eval_all(enum script_id id, int nkeys, int nargs, const char *const *argv,
                    const size_t *lens, redis_all_cb cb, void *arg) {
    struct fanout *f = fanout_new(cb, arg);
    int n = f->n;
    for (int i = 0; i < n; i++) {
        struct redis_op *op = eval_op(id, nkeys, nargs, argv, lens, fan_child_done, &f->child[i]);
        op->node = i;
        post(op);
    }
}

void redis_eval_all_on(struct redis *r, enum script_id id, int nkeys, int nargs,
                       const char *const *argv, const size_t *lens, redis_all_cb cb, void *arg) {
    struct fanout *f = fanout_new(cb, arg);
    int n = f->n;
    for (int i = 0; i < n; i++) {
        struct redis_op *op = eval_op(id, nkeys, nargs, argv, lens, fan_child_done, &f->child[i]);
        op->node = i;
        post_on(r, op);
    }
}

void redis_eval_node(int i, enum script_id id, int nkeys, int nargs, const char *const *argv,
                     const size_t *lens, redis_cb cb, void *arg) {
    struct redis_op *op = eval_op(id, nkeys, nargs, argv, lens, cb, arg);
    op->node = i;
    post(op);
}

void redis_command_all(int argc, const char *const *argv, const size_t *lens, redis_all_cb cb,
                       void *arg) {
    struct fanout *f = fanout_new(cb, arg);
    int n = f->n;
    for (int i = 0; i < n; i++) {
        struct redis_op *op = op_new(0, argc, argv, lens, fan_child_done, &f->child[i]);
        op->node = i;
        post(op);
    }
}

void redis_settings(const struct gw_config *cfg) {
    settings = cfg;
    atomic_store(&instances, cfg->threads + 1); /* the workers and the auxiliary loop */
}

int redis_error_is_final(const char *why) {
    static const char *const codes[] = {"ERR",       "WRONGTYPE", "NOPERM", "NOAUTH",
                                        "WRONGPASS", "EXECABORT", NULL};
    /* A Redis Cluster node refusing a script's access to a key of a slot
     * that is migrating: the scripts declare every key they touch (a test
     * checks it: lua/keycheck.lua), so this is a moving slot, not a refusal
     * that trying again cannot change. */
    if (why && strstr(why, "Script attempted to access a non local key")) return 0;
    for (int i = 0; why && codes[i]; i++) {
        size_t n = strlen(codes[i]);
        if (strncmp(why, codes[i], n) == 0 && (why[n] == ' ' || why[n] == '\0')) return 1;
    }
    return 0;
}
int redis_error_is_reply(const char *why) {
    size_t n = 0;
    while (why && why[n] >= 'A' && why[n] <= 'Z') n++;
    return n >= 2 && (why[n] == ' ' || why[n] == '\0');
}

int redis_nodes(void) { return settings->nnodes; }

int redis_node_lost(int i, int64_t *retry_after_ms) {
    if (!self || i < 0 || i >= self->nnodes) return 0;
    return lossguard_master_refusing(self->node[i].cmd.host, self->node[i].cmd.port,
                                     retry_after_ms);
}

int redis_name_lost(const char *name, int64_t *retry_after_ms, char *who, size_t cap) {
    if (!self || !self->cluster || !name) return 0;
    int owner = self->map.owner[cluster_key_slot(name, strlen(name))];
    if (owner < 0) return 0;
    const struct rconn *c = &self->node[owner].cmd;
    if (!lossguard_master_refusing(c->host, c->port, retry_after_ms)) return 0;
    if (who) snprintf(who, cap, "%s:%d", c->host, c->port);
    return 1;
}
int redis_quorum(void) { return settings->nnodes == 1 ? 1 : settings->quorum; }

void redis_command(int argc, const char *const *argv, const size_t *lens, redis_cb cb, void *arg) {
    post(op_new(0, argc, argv, lens, cb, arg));
}

void redis_command_for(const char *key, int argc, const char *const *argv, const size_t *lens,
                       redis_cb cb, void *arg) {
    struct redis_op *op = op_new(0, argc, argv, lens, cb, arg);
    if (self && self->cluster) op->slot = cluster_key_slot(key, strlen(key));
    post(op);
}

const char *redis_release_channel(void) { return self->channel; }

const char *redis_release_channel_for(const char *key) {
    return self->cluster ? cluster_chan[cluster_key_slot(key, strlen(key))] : self->channel;
}

const char *redis_release_channel_of_slot(int slot) { return cluster_chan[slot]; }

void redis_key_in_slot_of(char *out, size_t cap, const char *base, const char *key) {
    const char *tag =
        cluster_chan ? strrchr(cluster_chan[cluster_key_slot(key, strlen(key))], '{') : NULL;
    snprintf(out, cap, "%s%s", base, tag ? tag : "");
}

void redis_set_prelude(int argc, const char *const *argv, const size_t *lens) {
    free(prelude);
    prelude = op_new(0, argc, argv, lens, NULL, NULL);
}

/* A node of the instance's table, new (its connections start on the next
 * turn, or at once when an op needs it); its index, or -1 when full. */
static int node_add(struct redis *r, const char *host, int port, int tls) {
    if (r->nnodes == REDIS_MAX_NODES) return -1;
    struct node *n = &r->node[r->nnodes];
    n->pending.next = n->pending.prev = &n->pending;
    n->cmd =
        (struct rconn){.what = "command", .node = n, .fd = -1, .backoff_ms = 100, .on_up = cmd_up};
    n->sub =
        (struct rconn){.what = "pub/sub", .node = n, .fd = -1, .backoff_ms = 100, .on_up = sub_up};
    snprintf(n->cmd.host, sizeof n->cmd.host, "%s", host);
    snprintf(n->sub.host, sizeof n->sub.host, "%s", host);
    n->cmd.port = n->sub.port = port;
    n->cmd.tls = n->sub.tls = tls;
    return r->nnodes++;
}

#include "server/redis_cluster.inc"

struct redis *redis_new(struct loop *l, const struct gw_config *cfg, int subscribe) {
    struct redis *r = alloc_check(calloc(1, sizeof *r));
    r->loop = l;
    r->cfg = *cfg;
    r->subscribe = subscribe;
    snprintf(r->channel, sizeof r->channel, "%sreleased", cfg->key_prefix);
    snprintf(r->alive_channel, sizeof r->alive_channel, "%salive", cfg->key_prefix);
    snprintf(r->marker_key, sizeof r->marker_key, "%smarker", cfg->key_prefix);
    r->cluster = cfg->ncluster > 0;
    /* Written once, by the first instance (made before any worker runs):
     * later ones are made while earlier workers read it (worker.c). */
    if (!r->cluster && !live_key[0]) snprintf(live_key, sizeof live_key, "%sgw", cfg->key_prefix);
    r->nnodes = 0;
    r->delayed.next = r->delayed.prev = &r->delayed;
    r->parked.next = r->parked.prev = &r->parked;
    if (r->cluster) { /* pages untouched until their slots are used */
        r->slot_mark = alloc_check(calloc(CLUSTER_SLOTS, sizeof *r->slot_mark));
        r->slot_seen = alloc_check(calloc(CLUSTER_SLOTS, sizeof *r->slot_seen));
        r->slot_learning = alloc_check(calloc(CLUSTER_SLOTS, 1));
        r->slot_unlearnt_until = alloc_check(calloc(CLUSTER_SLOTS, sizeof *r->slot_unlearnt_until));
    }
    cluster_map_clear(&r->map);
    r->uncovered = CLUSTER_SLOTS;
    for (int i = 0; i < CLUSTER_SLOTS; i++) r->sub_at[i] = -1;
    if (r->cluster) {
        cluster_channels(cfg->key_prefix);
        for (int i = 0; i < cfg->ncluster; i++)
            node_add(r, cfg->cluster[i].host, cfg->cluster[i].port, cfg->cluster[i].tls);
    } else {
        for (int i = 0; i < cfg->nnodes; i++)
            node_add(r, cfg->nodes[i].host, cfg->nodes[i].port,
                     cfg->nsentinels ? cfg->sentinel_master_tls : cfg->nodes[i].tls);
    }
    r->sen = (struct rconn){.what = "sentinel", .fd = -1, .backoff_ms = 100, .on_up = sen_up};
    return r;
}

int redis_all_instances_up(void) {
    if (!self || self->cluster || self->nnodes > 1) return 1;
    return atomic_load(&instances_up) == atomic_load(&instances);
}

void redis_on_release(struct redis *r, void (*on_release)(void *arg, const char *key, size_t len),
                      void (*on_resubscribed)(void *arg), void *arg) {
    r->on_release = on_release;
    r->on_resubscribed = on_resubscribed;
    r->hook_arg = arg;
}

void redis_on_slot_subscribed(struct redis *r, void (*fn)(void *arg, int slot)) {
    r->on_slot_subscribed = fn;
}

void redis_on_command_up(struct redis *r, void (*fn)(void *arg), void *arg) {
    r->on_cmd_up = fn;
    r->cmd_up_arg = arg;
}

void redis_bind(struct redis *r) { self = r; }

void redis_turn_hook(void *arg, int64_t now_ms) {
    fail_queued();
    redis_loop_turn(now_ms);
    /* Callbacks run by the turn itself (a timeout's failed commands, a
     * dropped connection's) may have queued more on connections already
     * written: out with it now, not at the next turn. */
    flush_output(&self->sen);
    for (int i = 0; i < self->nnodes; i++) {
        flush_output(&self->node[i].cmd);
        flush_output(&self->node[i].sub);
    }
}

int redis_stopping(void) { return self && self->stopping; }

void redis_fail_all(void) {
    self->stopping = 1;
    fail_queued();
    for (int i = 0; i < self->nnodes; i++) {
        if (self->node[i].cmd.ac) connection_drop(&self->node[i].cmd, "the gateway is stopping");
        if (self->node[i].sub.ac) connection_drop(&self->node[i].sub, "the gateway is stopping");
    }
    if (self->sen.ac) connection_drop(&self->sen, "the gateway is stopping");
    while (self->parked.next != &self->parked) { /* their learning went with its connection */
        struct redis_op *op = self->parked.next;
        op->prev->next = op->next;
        op->next->prev = op->prev;
        op_fail(op, "the gateway is stopping");
    }
}

void redis_free(struct redis *r) {
    free(r->slot_mark);
    free(r->slot_seen);
    free(r->slot_learning);
    free(r->slot_unlearnt_until);
    patterns_free(r);
    atomic_fetch_sub(&instances, 1);
    if (r->counted_up) atomic_fetch_sub(&instances_up, 1);
    free(r);
}

long long redis_reply_int(const redisReply *r, size_t i, long long dflt) {
    return r && r->type == REDIS_REPLY_ARRAY && r->elements > i &&
                   r->element[i]->type == REDIS_REPLY_INTEGER
               ? r->element[i]->integer
               : dflt;
}

const char *redis_reply_str(const redisReply *r, size_t i) {
    return r && r->type == REDIS_REPLY_ARRAY && r->elements > i &&
                   r->element[i]->type == REDIS_REPLY_STRING
               ? r->element[i]->str
               : "";
}
