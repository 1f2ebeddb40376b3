/* redis.h -- the Redis layer: run this script with these keys and arguments,
 * and be called back with the reply or the error.
 *
 * Each worker thread has its own instance (struct redis) on its own loop,
 * bound to the thread with redis_bind: the calls below without an instance
 * act on the calling thread's.  Every command sent in a loop turn goes out
 * in one write per connection at the turn's end (auto-pipelining) and each
 * callback runs on the same thread, in order.  A callback is called exactly
 * once for every command, also when Redis is down (at the turn's end, never
 * inside the call), does not answer within the command timeout, or the
 * connection drops.  The layer reconnects by itself and reloads scripts on
 * NOSCRIPT (Redis restarted, failed over, SCRIPT FLUSH), retrying the
 * command once.  A second connection per instance subscribes to the release
 * channel and hands each message to the release hook (the worker's
 * waiters). */
#ifndef LOCKGATE_REDIS_H
#define LOCKGATE_REDIS_H

#include <stddef.h>
#include <stdint.h>

#include "server/config.h"
#include "server/scripts.h"

struct redisReply;
struct loop;
struct redis;

struct redis_result {
    int ok;                         /* 1: reply is Redis's answer */
    const struct redisReply *reply; /* valid during the callback only */
    const char *error;              /* when !ok: why, for logs and details */
    int maybe_ran;                  /* when !ok: the command was written before it failed
                                       (no answer in time, the connection lost): it may
                                       have run, or may still (undo.h) */
};

typedef void (*redis_cb)(void *arg, const struct redis_result *res);

/* Element i of an array reply (r may be NULL): its integer, or dflt when r
 * is not an array that long or the element is not an integer. */
long long redis_reply_int(const struct redisReply *r, size_t i, long long dflt);
/* Element i of an array reply: its string, or "" likewise. */
const char *redis_reply_str(const struct redisReply *r, size_t i);
/* The reply a callback got, or NULL when Redis did not answer. */
#define REDIS_ANSWER(res) ((res) && (res)->ok ? (res)->reply : NULL)

/* The settings every instance shares (kept by pointer); before any. */
void redis_settings(const struct gw_config *cfg);

/* A new instance whose connections go on loop l (made on its first turn);
 * subscribe 0 leaves out the pub/sub connection.  Bind it to the thread
 * that runs l; free it after l stopped. */
struct redis *redis_new(struct loop *l, const struct gw_config *cfg, int subscribe);
void redis_bind(struct redis *r);
void redis_free(struct redis *r);
/* Single Redis (also through Sentinel): whether every instance's command
 * connection is up; 1 in the other modes, whose readiness is their own. */
int redis_all_instances_up(void);

/* Called with every release message "KIND:NAME", and when the subscription
 * is (re)made (releases may have been missed); on r's thread. */
void redis_on_release(struct redis *r, void (*on_release)(void *arg, const char *key, size_t len),
                      void (*on_resubscribed)(void *arg), void *arg);

/* Cluster mode subscribes to a slot's release channel only once it has
 * waiters there (and keeps the subscription until the connection or the
 * slot moves).  redis_interest: the waiters of key ("KIND:NAME") start
 * (on 1) or stop (on 0) on the calling worker; returns the key's slot, -1
 * outside cluster mode and for a key without a kind (nothing announces
 * it).  on_slot_subscribed is called once a subscription made for a
 * slot's first waiters is confirmed: a release may have been missed before
 * it, so those waiters try again. */
int redis_interest(const char *key, int on);
void redis_on_slot_subscribed(struct redis *r, void (*fn)(void *arg, int slot));

/* The calling worker's pub/sub connection to the first master (Redis
 * Cluster mode: below) keeps pattern PSUBSCRIBEd (again after each reconnection)
 * until it is removed; on_message(arg, channel, payload) for each message,
 * on_confirmed(arg) each time the subscription is (re)made (messages may
 * have been missed before it).  On the worker's thread.  Returns -1 (and
 * keeps nothing) without a pub/sub connection, or when the pattern is kept
 * already.  In Redis Cluster mode it is made on every master, each message
 * is passed on once (the copy of the master serving the channel's name,
 * "<prefix>chg:<kind>:<name>"), and on_confirmed also follows a change of
 * the slot map (see redis_patterns.inc).  Redis refusing the pattern (NOPERM:
 * the user's ACL does not list it) makes hiredis drop the connection; the
 * refused pattern is then forgotten (not sent again on the new connection,
 * which would loop) and on_refused(arg, Redis's error) is called once. */
typedef void (*redis_pattern_fn)(void *arg, const char *channel, size_t channel_len,
                                 const char *payload, size_t payload_len);
int redis_pattern_add(const char *pattern, redis_pattern_fn on_message,
                      void (*on_confirmed)(void *arg),
                      void (*on_refused)(void *arg, const char *why), void *arg);
void redis_pattern_remove(const char *pattern);

/* fn(arg) is called as each command connection of r is being made, after
 * its AUTH, SELECT, script loads and prelude are queued and before any
 * other command: what it sends goes out first on that connection (cluster
 * mode's per-slot liveness keys, after a restart or a failover). */
void redis_on_command_up(struct redis *r, void (*fn)(void *arg), void *arg);

/* The loop turn-end hook (loop.h): fails what could not be sent, makes and
 * times out connections, writes what the turn queued. */
void redis_turn_hook(void *arg, int64_t now_ms);

/* Whether the calling thread's instance is stopping (redis_fail_all ran):
 * a callback failed by it should not queue more work. */
int redis_stopping(void);

/* The gateway is stopping (on the instance's thread): fails whatever is
 * queued or outstanding and closes; from then on commands fail at once. */
void redis_fail_all(void);

/* EVALSHA script with argv[0..nkeys) as KEYS and argv[nkeys..nargs) as
 * ARGV.  The strings are copied; cb(arg, result) is called once.  A
 * script that grants (scripts.h, marker) gets one more key and argument,
 * its master's marker key and the value last read there (lua/_marker.lua;
 * in Redis Cluster mode its slot's marker, learnt first when it was not:
 * redis_cluster.inc, "slot markers"): when it answers {REDIS_MARKER_MOVED,
 * marker} the master lost its data, and the loss is noted
 * (server/lossguard.h) before cb is called. */
#define REDIS_MARKER_MOVED (-8)
void redis_eval(enum script_id id, int nkeys, int nargs, const char *const *argv,
                const size_t *lens, redis_cb cb, void *arg);

/* redis_eval on instance r from any thread: posted to r's loop, and cb runs
 * on r's thread.  For a caller that must wait for the answer (idgen's
 * lease) and so cannot wait on its own loop. */
void redis_eval_on(struct redis *r, enum script_id id, int nkeys, int nargs,
                   const char *const *argv, const size_t *lens, redis_cb cb, void *arg);

/* Whether a failure's why (redis_result.error) is Redis refusing the
 * command itself (an error reply such as ERR or WRONGTYPE), which trying
 * again will not change, rather than Redis being away, loading, read-only
 * or moving (which it may). */
int redis_error_is_final(const char *why);

/* Whether a failure's why is an error reply of Redis (a word in capitals
 * first: ERR, OOM, LOADING, MOVED, ...), so the command did not run; else
 * the layer gave up on it (timeout, connection lost, not connected), and it
 * may have run or may still run (handlers/undo.h). */
int redis_error_is_reply(const char *why);

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
/* Quorum mode: master i lost its data less than --max-lease-ms ago and
 * abstains (server/lossguard.h); *retry_after_ms how long still. */
int redis_node_lost(int i, int64_t *retry_after_ms);
/* Cluster mode: the master serving name's slot (a hash tag's: lock and
 * semaphore keys put the name in one) lost its data less than
 * --max-lease-ms ago; who gets its host:port.  0 outside Cluster mode,
 * where lossguard_refusing covers every name. */
int redis_name_lost(const char *name, int64_t *retry_after_ms, char *who, size_t cap);
int redis_quorum(void);

/* Quorum mode: the same script on every master.  cb gets every master's
 * result at once (results[i] for master i), when all have answered, failed
 * or timed out; the replies stay valid during the callback. */
typedef void (*redis_all_cb)(void *arg, const struct redis_result *results, int n);
void redis_eval_all(enum script_id id, int nkeys, int nargs, const char *const *argv,
                    const size_t *lens, redis_all_cb cb, void *arg);
void redis_eval_all_on(struct redis *r, enum script_id id, int nkeys, int nargs,
                       const char *const *argv, const size_t *lens, redis_all_cb cb, void *arg);
/* Quorum mode: the script on master i alone (0 <= i < redis_nodes()). */
void redis_eval_node(int i, enum script_id id, int nkeys, int nargs, const char *const *argv,
                     const size_t *lens, redis_cb cb, void *arg);
void redis_command_all(int argc, const char *const *argv, const size_t *lens, redis_all_cb cb,
                       void *arg);

/* A command sent first on every new command connection, right after the
 * scripts are loaded and ahead of anything queued (liveness.c: the
 * gateway's liveness key).  Its answer is only logged when it is an error.
 * The words are copied; call before redis_start. */
void redis_set_prelude(int argc, const char *const *argv, const size_t *lens);

/* base followed, in cluster mode, by a hash tag in key's slot ("{tag}"),
 * so that one script may touch both keys: the id era beside an id mark.
 * From any thread, once the first instance is made. */
void redis_key_in_slot_of(char *out, size_t cap, const char *base, const char *key);

/* The channel releases are published on: "<prefix>released". */
const char *redis_release_channel(void);
/* The channel a release of key's lock is published on: in cluster mode a
 * shard channel in key's slot, "<prefix>released{<tag>}" (the scripts then
 * SPUBLISH: lua/_layout.lua, publish), else redis_release_channel(). */
const char *redis_release_channel_for(const char *key);
/* Cluster mode only: the shard channel of slot (0..16383). */
const char *redis_release_channel_of_slot(int slot);


#endif
