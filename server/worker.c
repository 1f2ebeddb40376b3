/* worker.c -- see worker.h.  The only file that knows every layer of the
 * core: it makes each worker's loop, Redis instance, waiters and daemon,
 * binds them to the worker's thread and registers their hooks on the loop;
 * no layer names another.
 *
 * A turn of a worker's loop (loop.h), with the hooks registered here:
 *   wait          until the waiters' next timer or libmicrohttpd's timeout
 *   start hooks   liveness renewal, when due (ahead of the turn's writes)
 *   descriptors   the daemon (MHD_run: requests, handlers queue commands),
 *                 Redis replies (callbacks reply and resume connections),
 *                 waiters' hang-ups
 *   tasks         posted by other threads (shutdown) or by this one
 *   end hooks     due waiter timers (retries queue commands), MHD_run if a
 *                 connection was resumed, then Redis: one write per
 *                 connection for everything the turn queued */
#include "server/worker.h"
#include "common/alloc.h"
#include "server/http.h"
#include "server/liveness.h"
#include "server/log.h"
#include "server/loop.h"
#include "server/offload.h"
#include "server/redis.h"
#include "server/waiters.h"

#include <pthread.h>
#include <stdlib.h>

struct worker {
    int id;                   /* 0.., or -1 for the auxiliary loop */
    pthread_t thread;         /* runs loop */
    struct loop *loop;        /* its event loop */
    struct redis *redis;      /* its Redis connections */
    struct waiters *waiters;  /* its parked requests (NULL: auxiliary) */
    struct http_worker *http; /* its daemon (NULL: auxiliary) */
};

static struct worker *workers;
static int nworkers;
static struct worker aux;

struct redis *workers_aux_redis(void) {
    return aux.redis;
}

/* ---- wiring -------------------------------------------------------------------- */

static void on_release(void *arg, const char *key, size_t len) { waiters_on_release(key, len); }
static void on_resubscribed(void *arg) { waiters_retry_all(); }
static int on_interest(void *arg, const char *key, int on) { return redis_interest(key, on); }
static void on_slot_subscribed(void *arg, int slot) { waiters_retry_group(slot); }

static void *worker_main(void *arg) {
    struct worker *w = arg;
    redis_bind(w->redis);
    if (w->waiters) waiters_bind(w->waiters);
    if (w->http) http_bind(w->http);
    redis_turn_hook(w->redis, loop_now_ms()); /* connect before the first wait */
    loop_run(w->loop);
    if (w->http) http_stop(); /* nothing is suspended any more (workers_stop) */
    liveness_worker_done();
    return NULL;
}

static int worker_init(struct worker *w, int id, const struct gw_config *cfg) {
    w->id = id;
    w->loop = loop_new();
    w->redis = redis_new(w->loop, cfg, id >= 0);
    if (id >= 0) {
        w->waiters = waiters_new(w->loop);
        w->http = http_worker_new(cfg, w->loop);
        if (!w->http) return -1;
        redis_on_release(w->redis, on_release, on_resubscribed, NULL);
        if (cfg->ncluster) { /* subscribe where there are waiters */
            waiters_on_interest(w->waiters, on_interest, NULL);
            redis_on_slot_subscribed(w->redis, on_slot_subscribed);
            redis_on_command_up(w->redis, liveness_connection_up, NULL);
        }
        loop_on_turn_start(w->loop, liveness_turn_hook, NULL);
        loop_on_timeout(w->loop, waiters_timeout_hook, w->waiters);
        loop_on_timeout(w->loop, http_timeout_hook, w->http);
        loop_on_turn_end(w->loop, waiters_due_hook, w->waiters);
        loop_on_turn_end(w->loop, http_turn_hook, w->http);
    }
    loop_on_turn_end(w->loop, redis_turn_hook, w->redis);
    if (pthread_create(&w->thread, NULL, worker_main, w) != 0) {
        log_error("worker: cannot start a thread");
        return -1;
    }
    return 0;
}

int workers_start(const struct gw_config *cfg) {
    redis_settings(cfg);
    if (worker_init(&aux, -1, cfg) < 0) return -1;
    if (offload_start(cfg->threads) < 0) return -1;
    nworkers = cfg->threads;
    workers = alloc_check(calloc((size_t)nworkers, sizeof *workers));
    for (int i = 0; i < nworkers; i++) {
        if (worker_init(&workers[i], i, cfg) < 0) {
            nworkers = i;
            workers_stop();
            return -1;
        }
    }
    return 0;
}

/* ---- stopping ------------------------------------------------------------------ */

struct step {
    struct loop_task task; /* first: posted to a worker */
    void (*fn)(void);      /* what to run on that worker's thread */
};

static void step_run(struct loop_task *t) {
    struct step *s = (struct step *)t;
    s->fn();
    free(s);
}

/* Runs fn on worker w's thread, soon. */
static void post_step(struct worker *w, void (*fn)(void)) {
    struct step *s = alloc_check(malloc(sizeof *s));
    s->task.run = step_run;
    s->fn = fn;
    if (loop_post(w->loop, &s->task) < 0) free(s);
}

static void quiesce_here(void) {
    http_quiesce();
    waiters_give_up_all(); /* waiting requests answer 503 shutting_down */
}

/* What Redis still owes fails; then whatever parked since the quiesce
 * (an undo of an acquire that failed during the drain, handlers/undo.c)
 * gives up too, so nothing is left parked when the loop ends. */
static void fail_redis_here(void) {
    redis_fail_all();
    waiters_give_up_all();
}

static void stop_thread(struct worker *w) {
    loop_stop(w->loop);
    pthread_join(w->thread, NULL);
    if (w->waiters) waiters_free(w->waiters);
    redis_free(w->redis);
    loop_free(w->loop);
}

void workers_stop(void) {
    for (int i = 0; i < nworkers; i++) post_step(&workers[i], quiesce_here);
    http_drain(4000);
    /* A connection still suspended keeps its daemon from stopping: failing
     * what Redis still owes answers them (503), and from then on new
     * commands fail at once. */
    for (int i = 0; i < nworkers; i++) post_step(&workers[i], fail_redis_here);
    post_step(&aux, redis_fail_all); /* the helpers' leases fail too */
    http_drain(500);
    offload_stop(); /* before the workers: a finished job goes back to one */
    for (int i = 0; i < nworkers; i++) stop_thread(&workers[i]);
    stop_thread(&aux);
    free(workers);
    workers = NULL;
    nworkers = 0;
}
