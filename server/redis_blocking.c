/* redis_blocking.c -- the per-thread blocking bridge (--redis-io blocking).
 *
 * Kept to be measured against, not to be used: it is the design the
 * event-driven layer replaced (bench/run.sh's "before" row).  Each worker
 * thread has its own hiredis connection and waits for its own reply: one
 * round trip per request, nothing pipelined, the worker's loop held up
 * meanwhile (bench/RESULTS.md: kept because at one connection it still
 * costs slightly less CPU).  Only the calls of redis_eval_here come here;
 * pub/sub and timers stay on the worker's loop, and a callback that parks
 * its request parks it there.  Connections are made on first use and
 * after any error. */
#include "server/redis.h"
#include "server/log.h"

#include <hiredis/hiredis.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

static const struct gw_config *cfg_;
static _Thread_local redisContext *ctx;
static pthread_key_t ctx_key; /* closes a thread's connection when it exits */

static void ctx_free(void *c) { redisFree(c); }

void redis_blocking_init(const struct gw_config *cfg) {
    cfg_ = cfg;
    if (cfg->redis_io_blocking) pthread_key_create(&ctx_key, ctx_free);
}

static void ctx_set(redisContext *c) {
    ctx = c;
    pthread_setspecific(ctx_key, c);
}

/* Runs one command and checks for a transport error: NULL then, and the
 * connection is dropped (the next call makes a new one). */
static redisReply *command(int argc, const char **argv, const size_t *lens, char *err,
                           size_t errlen) {
    redisReply *r = redisCommandArgv(ctx, argc, argv, lens);
    if (!r) {
        snprintf(err, errlen, "%s", ctx->errstr[0] ? ctx->errstr : "connection lost");
        redisFree(ctx);
        ctx_set(NULL);
    }
    return r;
}

/* A connection with AUTH and SELECT done, or NULL with err set. */
static int connect_if_needed(char *err, size_t errlen) {
    if (ctx) return 0;
    struct timeval tv = {cfg_->redis_timeout_ms / 1000, (cfg_->redis_timeout_ms % 1000) * 1000};
    ctx_set(redisConnectWithTimeout(cfg_->redis_host, cfg_->redis_port, tv));
    if (!ctx || ctx->err) {
        snprintf(err, errlen, "%s", ctx ? ctx->errstr : "out of memory");
        redisFree(ctx);
        ctx_set(NULL);
        return -1;
    }
    redisSetTimeout(ctx, tv);
    char db[16];
    snprintf(db, sizeof db, "%d", cfg_->redis_db);
    const char *setup[2][2] = {
        {"AUTH",   cfg_->redis_password},
        {"SELECT", db                  }
    };
    int wanted[2] = {cfg_->redis_password[0] != '\0', cfg_->redis_db != 0};
    for (int i = 0; i < 2; i++) {
        if (!wanted[i]) continue;
        size_t lens[2] = {strlen(setup[i][0]), strlen(setup[i][1])};
        redisReply *r = command(2, setup[i], lens, err, errlen);
        if (!r) return -1;
        int bad = r->type == REDIS_REPLY_ERROR;
        if (bad) snprintf(err, errlen, "%s: %s", setup[i][0], r->str);
        freeReplyObject(r);
        if (bad) {
            redisFree(ctx);
            ctx_set(NULL);
            return -1;
        }
    }
    return 0;
}

void redis_blocking_eval(enum script_id id, int nkeys, int nargs, const char *const *argv,
                         const size_t *lens, redis_cb cb, void *arg) {
    const struct script *s = script_get(id);
    char numkeys[16], err[128] = "";
    snprintf(numkeys, sizeof numkeys, "%d", nkeys);
    const char *cmd[3 + 32];
    size_t cmdlens[3 + 32];
    if (nargs > 32) {
        cb(arg, &(struct redis_result){.ok = 0, .error = "too many arguments"});
        return;
    }
    cmd[0] = "EVALSHA";
    cmdlens[0] = 7;
    cmd[1] = s->sha;
    cmdlens[1] = 40;
    cmd[2] = numkeys;
    cmdlens[2] = strlen(numkeys);
    for (int i = 0; i < nargs; i++) {
        cmd[3 + i] = argv[i];
        cmdlens[3 + i] = lens[i];
    }
    redisReply *r = NULL;
    if (connect_if_needed(err, sizeof err) == 0)
        r = command(3 + nargs, cmd, cmdlens, err, sizeof err);
    if (r && r->type == REDIS_REPLY_ERROR && strncmp(r->str, "NOSCRIPT", 8) == 0) {
        freeReplyObject(r);
        const char *load[3] = {"SCRIPT", "LOAD", (const char *)s->src};
        size_t load_lens[3] = {6, 4, s->len};
        r = command(3, load, load_lens, err, sizeof err);
        if (r) {
            freeReplyObject(r);
            r = command(3 + nargs, cmd, cmdlens, err, sizeof err);
        }
    }
    if (!r) {
        log_warn("redis (blocking): %s", err);
        cb(arg, &(struct redis_result){.ok = 0, .error = err});
        return;
    }
    cb(arg, &(struct redis_result){.ok = 1, .reply = r});
    freeReplyObject(r);
}
