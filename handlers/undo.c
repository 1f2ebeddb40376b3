/* undo.c -- see undo.h.  A pending undo is a parked waiter (waiters.h) on
 * its name, with no client: woken by its retry time (or a release of the
 * name, which only makes it try sooner). */
#include "handlers/undo.h"
#include "common/alloc.h"
#include "handlers/backend.h"
#include "handlers/verdict.h"
#include "server/log.h"
#include "server/loop.h"
#include "server/metrics.h"
#include "server/redis.h"
#include "server/waiters.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct undo {
    struct waiter w; /* first: parked between tries */
    int semaphore;
    int node;          /* quorum mode: the master it goes to; -1 the backend's */
    int64_t failed_ms; /* when the attempt failed */
    int64_t until_ms;  /* its lease has surely ended by then */
    int tries;
    char *token;
    char attempt[32]; /* the attempt's id, "" none */
    char *hash;       /* the hold's hash key */
    char *message;    /* "lock:NAME" or "sem:NAME": w.key, and what a release publishes */
};

static void undo_send(struct undo *u);
static void on_stop(struct waiter *w, int client_gone);

static void undo_free(struct undo *u) {
    free(u->token);
    free(u->hash);
    free(u->message);
    free(u);
}

static void undone(void *arg, const struct redis_result *res) {
    struct undo *u = arg;
    int64_t now = loop_now_ms();
    const char *what = u->semaphore ? "permit of semaphore" : "lock";
    const char *name = strchr(u->message, ':') + 1;
    if (res->ok) {
        long long v[3] = {0};
        const char *err = NULL;
        long long verdict = verdict_parse(res, v, 3, &err);
        if (verdict == VERDICT_ERROR) goto again; /* an error reply: not settled */
        int held = verdict >= 0;
        metrics_inc(held ? M_UNDO_DONE : M_UNDO_NOTHING, 1);
        if (held)
            log_warn("undo: the %s '%s' taken by an acquire that failed (Redis timed out or "
                     "the connection was lost; the client was answered 503) was given back "
                     "%lld ms after the failure",
                     what, name, (long long)(now - u->failed_ms));
        else
            log_info("undo: the acquire of %s '%s' that failed had taken nothing (checked %lld "
                     "ms after the failure)",
                     what, name, (long long)(now - u->failed_ms));
        undo_free(u);
        return;
    }
again:
    if (redis_stopping()) { /* failed by the stop: the waiters gave up already */
        on_stop(&u->w, 0);
        return;
    }
    if (now >= u->until_ms) {
        metrics_inc(M_UNDO_EXPIRED, 1);
        log_error("undo: Redis did not answer until the lease of the failed acquire of %s "
                  "'%s' had ended: nothing is left to undo",
                  what, name);
        undo_free(u);
        return;
    }
    u->w.seen_seq = waiters_release_seq();
    waiters_park(&u->w, now + UNDO_RETRY_MS);
}

static void undo_send(struct undo *u) {
    const char *argv[] = {u->hash, u->token, redis_release_channel_for(u->hash), u->message,
                          u->attempt};
    int n = u->attempt[0] ? 5 : 4;
    size_t lens[5];
    for (int i = 0; i < n; i++) lens[i] = strlen(argv[i]);
    u->tries++;
    if (u->node >= 0)
        redis_eval_node(u->node, SCRIPT_RELEASE, 1, n, argv, lens, undone, u);
    else
        backend->release(n, argv, lens, undone, u);
}

static void on_retry(struct waiter *w) { undo_send((struct undo *)w); }

/* The gateway is stopping: what is not undone now stays until its lease
 * ends (said, so an operator knows). */
static void on_stop(struct waiter *w, int client_gone) {
    struct undo *u = (struct undo *)w;
    metrics_inc(M_UNDO_EXPIRED, 1);
    log_error("undo: stopping before the failed acquire of '%s' could be undone: it may hold "
              "until its lease ends",
              u->message);
    undo_free(u);
}

static void undo_one(int node, const char *hash, const char *message, const char *token,
                     const char *attempt, long long ttl_ms) {
    if (redis_stopping()) {
        /* Failed by the stop itself: no Redis call made now would be
         * answered (the loop ends), so it stays until its lease ends. */
        metrics_inc(M_UNDO_STARTED, 1);
        metrics_inc(M_UNDO_EXPIRED, 1);
        log_error("undo: stopping before the failed acquire of '%s' could be undone: it may hold "
                  "until its lease ends",
                  message);
        return;
    }
    struct undo *u = alloc_check(calloc(1, sizeof *u));
    u->node = node;
    snprintf(u->attempt, sizeof u->attempt, "%s", attempt ? attempt : "");
    u->hash = alloc_check(strdup(hash));
    u->message = alloc_check(strdup(message));
    u->semaphore = strncmp(message, "sem:", 4) == 0;
    u->token = alloc_check(strdup(token));
    u->failed_ms = loop_now_ms();
    u->until_ms = u->failed_ms + ttl_ms + 1;
    u->w.key = u->message;
    u->w.watch = 1; /* not counted as a waiting request */
    u->w.fd = -1;
    u->w.retry = on_retry;
    u->w.give_up = on_stop;
    metrics_inc(M_UNDO_STARTED, 1);
    undo_send(u);
}

/* Quorum mode: each master by itself, so that one that answers does not
 * settle another that does not. */
void undo_hold(const char *hash, const char *message, const char *token, const char *attempt,
               long long ttl_ms) {
    if (!backend->fans_out) {
        undo_one(-1, hash, message, token, attempt, ttl_ms);
        return;
    }
    for (int i = 0; i < redis_nodes(); i++) undo_one(i, hash, message, token, attempt, ttl_ms);
}

void undo_hold_at(int node, const char *hash, const char *message, const char *token,
                  const char *attempt, long long ttl_ms) {
    undo_one(backend->fans_out ? node : -1, hash, message, token, attempt, ttl_ms);
}

void undo_give_back_at(int node, const char *hash, const char *message, const char *token,
                       const char *attempt, redis_cb done, void *arg) {
    const char *argv[] = {hash, token, redis_release_channel_for(hash), message, attempt};
    int n = attempt && attempt[0] ? 5 : 4;
    size_t lens[5];
    for (int i = 0; i < n; i++) lens[i] = strlen(argv[i]);
    redis_eval_node(node, SCRIPT_RELEASE, 1, n, argv, lens, done, arg);
}
