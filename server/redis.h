/* redis.h -- the Redis layer: run this script with these keys and arguments,
 * and be called back with the reply or the error.
 *
 * The connections live on the loop thread (loop.h).  Callers on any thread
 * post commands; every command posted since the last write goes out in one
 * write (auto-pipelining) and each callback runs, on the loop thread, in
 * order.  A callback is called exactly once for every command, also when
 * Redis is down (at once), does not answer within the command timeout, or
 * the connection drops.  The layer reconnects by itself and reloads scripts
 * on NOSCRIPT (Redis restarted, failed over, SCRIPT FLUSH), retrying the
 * command once.  A second connection subscribes to the release channel and
 * hands each message to waiters.c. */
#ifndef LOCKGATE_REDIS_H
#define LOCKGATE_REDIS_H

#include <stddef.h>
#include <stdint.h>

#include "server/config.h"
#include "server/scripts.h"

struct redisReply;

struct redis_result {
    int ok;                         /* 1: reply is Redis's answer */
    const struct redisReply *reply; /* valid during the callback only */
    const char *error;              /* when !ok: why, for logs and details */
};

typedef void (*redis_cb)(void *arg, const struct redis_result *res);

/* Starts the loop and the connections; 0 or -1. */
int redis_start(const struct gw_config *cfg);

/* Fails whatever is queued or outstanding, closes, stops the loop. */
void redis_stop(void);

/* EVALSHA script with argv[0..nkeys) as KEYS and argv[nkeys..nargs) as
 * ARGV.  The strings are copied; cb(arg, result) is called once. */
void redis_eval(enum script_id id, int nkeys, int nargs, const char *const *argv,
                const size_t *lens, redis_cb cb, void *arg);

/* Like redis_eval, except with --redis-io blocking on an HTTP thread: the
 * call is then made on that thread's own blocking connection
 * (redis_blocking.c) and cb runs on this thread before this returns.  For
 * calls whose callback never parks the request (waiters are the loop's). */
void redis_eval_here(enum script_id id, int nkeys, int nargs, const char *const *argv,
                     const size_t *lens, redis_cb cb, void *arg);

/* redis_blocking.c: the bridge redis_eval_here uses in blocking mode. */
void redis_blocking_init(const struct gw_config *cfg);
void redis_blocking_eval(enum script_id id, int nkeys, int nargs, const char *const *argv,
                         const size_t *lens, redis_cb cb, void *arg);

/* Any other command, e.g. {"PING"}. */
void redis_command(int argc, const char *const *argv, const size_t *lens, redis_cb cb, void *arg);

/* Like redis_command, to the Redis that holds key: in cluster mode the
 * master of key's slot (a WAIT after a write there), else the one. */
void redis_command_for(const char *key, int argc, const char *const *argv, const size_t *lens,
                       redis_cb cb, void *arg);

/* Cluster mode: ok when every slot has a master in the map and each of
 * those masters answers a PING; cb runs once, on the loop thread. */
void redis_cluster_ready(redis_cb cb, void *arg);

/* Cluster mode: how many masters serve slots now (0 before the first map),
 * and a keyless script on the k-th of them (0-based, in the gateway's own
 * order, stable while the cluster does not change); cb gets an error when
 * there is no k-th master any more. */
int redis_cluster_masters(void);
void redis_eval_at_master(int k, enum script_id id, int nargs, const char *const *argv,
                          const size_t *lens, redis_cb cb, void *arg);

/* Quorum mode: how many masters, and how many must agree (1 and 1 else). */
int redis_nodes(void);
int redis_quorum(void);

/* Quorum mode: the same script on every master.  cb gets every master's
 * result at once (results[i] for master i), when all have answered, failed
 * or timed out; the replies stay valid during the callback. */
typedef void (*redis_all_cb)(void *arg, const struct redis_result *results, int n);
void redis_eval_all(enum script_id id, int nkeys, int nargs, const char *const *argv,
                    const size_t *lens, redis_all_cb cb, void *arg);
void redis_command_all(int argc, const char *const *argv, const size_t *lens, redis_all_cb cb,
                       void *arg);

/* A command sent first on every new command connection, right after the
 * scripts are loaded and ahead of anything queued (liveness.c: the
 * gateway's liveness key).  Its answer is only logged when it is an error.
 * The words are copied; call before redis_start. */
void redis_set_prelude(int argc, const char *const *argv, const size_t *lens);

/* The channel releases are published on: "<prefix>released". */
const char *redis_release_channel(void);
/* The channel a release of key's lock is published on: in cluster mode a
 * shard channel in key's slot, "<prefix>released{<tag>}" (the scripts then
 * SPUBLISH: lua/_layout.lua, publish), else redis_release_channel(). */
const char *redis_release_channel_for(const char *key);

/* Called by the loop once or twice a turn: writes, reconnects, timeouts. */
void redis_loop_turn(int64_t now_ms);

#endif
