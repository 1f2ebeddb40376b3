/* liveness.c -- see liveness.h.
 *
 * Renewing every third of the TTL lets two renewals in a row fail or come
 * late before the field lapses, so a gateway that is merely slow keeps its
 * waiters' places.  A renewal that fails needs no retry of its own: it
 * fails because the connection is down or was dropped for a timeout, and
 * the next connection sets the field before anything else (the prelude). */
#include "server/liveness.h"
#include "common/alloc.h"
#include "server/cluster.h"
#include "server/log.h"
#include "server/redis.h"
#include "common/token.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

static struct {
    char id[LIVENESS_ID_LEN + 1];   /* this gateway's id */
    char hash[LIVENESS_HASH_MAX];   /* outside cluster mode: <prefix>gw, the one hash */
    char ttl[16];                   /* the TTL in ms, as text */
    int period_ms;                  /* renewal interval of the gateway */
    int workers;                    /* workers taking turns at it */
    atomic_ullong seq;              /* waiter ids handed out */
    int cluster;                    /* per-slot keys (Redis Cluster mode) */
    char prefix[GW_PREFIX_MAX + 1]; /* the key prefix */
} V;

static void ignore_one(void *arg, const struct redis_result *res) {}
static void ignore_all(void *arg, const struct redis_result *res, int n) {}

/* The workers take turns: worker slot i renews at i periods, then every
 * `workers` periods, so the gateway as a whole still sends one renewal every
 * third of the TTL.  A worker whose loop stalled (its last turn was more
 * than a period ago: SIGSTOP, an overloaded host) renews at once, on its own
 * connection, so its renewal goes out ahead of its own waiters' attempts. */
static atomic_int slots;
static _Thread_local int64_t next_ms, last_turn_ms;

/* ---- cluster mode: one key per slot with waiters --------------------------------- */

/* The calling worker's fair waiters per slot, and how many slots have any. */
static _Thread_local uint32_t *slot_waiters;
static _Thread_local int busy_slots;

/* A slot's liveness hash, <prefix>gw{<tag>}, the tag from the slot's
 * release channel chan, "<prefix>released{<tag>}". */
static void slot_hash(const char *chan, char *out, size_t cap) {
    const char *tag = strchr(chan, '{');
    snprintf(out, cap, "%sgw%s", V.prefix, tag ? tag : "");
}

void liveness_hash_for(const char *key, char *out, size_t cap) {
    slot_hash(redis_release_channel_for(key), out, cap);
}

/* Sets this gateway's field in a slot's hash (lua/liveness.lua). */
static void set_slot_key(const char *chan) {
    char key[LIVENESS_HASH_MAX];
    slot_hash(chan, key, sizeof key);
    const char *argv[] = {key, V.id, V.ttl};
    size_t lens[3];
    for (int i = 0; i < 3; i++) lens[i] = strlen(argv[i]);
    redis_eval(SCRIPT_LIVENESS, 1, 3, argv, lens, ignore_one, NULL);
}

static void renew_slots(void) {
    for (int s = 0, seen = 0; s < CLUSTER_SLOTS && seen < busy_slots; s++) {
        if (!slot_waiters[s]) continue;
        seen++;
        set_slot_key(redis_release_channel_of_slot(s));
    }
}

void liveness_waiter_id(char out[LIVENESS_WAITER_ID_MAX]) {
    unsigned long long n = atomic_fetch_add_explicit(&V.seq, 1, memory_order_relaxed) + 1;
    snprintf(out, LIVENESS_WAITER_ID_MAX, "%s.%llx", V.id, n);
}

void liveness_connection_up(void *arg) {
    static _Thread_local int renewing; /* a renewal that connects a node re-enters */
    if (!V.cluster || !busy_slots || renewing) return;
    renewing = 1;
    renew_slots();
    renewing = 0;
}

int liveness_waiter_join(const char *key) {
    if (!V.cluster) return -1;
    if (!slot_waiters) slot_waiters = alloc_check(calloc(CLUSTER_SLOTS, sizeof *slot_waiters));
    int slot = cluster_key_slot(key, strlen(key));
    if (slot_waiters[slot]++ == 0) {
        busy_slots++;
        set_slot_key(redis_release_channel_for(key));
    }
    return slot;
}

void liveness_worker_done(void) {
    free(slot_waiters);
    slot_waiters = NULL;
    busy_slots = 0;
}

void liveness_waiter_leave(int joined) {
    if (joined < 0 || !slot_waiters || !slot_waiters[joined]) return;
    if (--slot_waiters[joined] == 0) busy_slots--;
}

/* ---- renewal ------------------------------------------------------------------------ */

void liveness_turn_hook(void *arg, int64_t now_ms) {
    if (V.cluster) {
        /* Each worker renews its own slots' keys, every period. */
        if (busy_slots && now_ms >= next_ms) {
            next_ms = now_ms + V.period_ms;
            renew_slots();
        }
        return;
    }
    if (!last_turn_ms) {
        next_ms = now_ms + (int64_t)(atomic_fetch_add(&slots, 1) % V.workers) * V.period_ms;
        last_turn_ms = now_ms;
    }
    int stalled = now_ms - last_turn_ms > V.period_ms;
    last_turn_ms = now_ms;
    if (now_ms < next_ms && !stalled) return;
    next_ms = now_ms + (int64_t)V.period_ms * V.workers;
    const char *argv[] = {V.hash, V.id, V.ttl};
    size_t lens[3];
    for (int i = 0; i < 3; i++) lens[i] = strlen(argv[i]);
    if (redis_nodes() > 1)
        redis_eval_all(SCRIPT_LIVENESS, 1, 3, argv, lens, ignore_all, NULL);
    else
        redis_eval(SCRIPT_LIVENESS, 1, 3, argv, lens, ignore_one, NULL);
}

void liveness_init(const struct gw_config *cfg) {
    char t[TOKEN_NEW_LEN + 1];
    token_new(t);
    memcpy(V.id, t, LIVENESS_ID_LEN);
    V.id[LIVENESS_ID_LEN] = '\0';
    snprintf(V.prefix, sizeof V.prefix, "%s", cfg->key_prefix);
    snprintf(V.ttl, sizeof V.ttl, "%d", cfg->liveness_ttl_ms);
    V.period_ms = cfg->liveness_ttl_ms / 3;
    V.workers = cfg->threads > 0 ? cfg->threads : 1;
    if (cfg->ncluster) {
        V.cluster = 1;
        log_info("liveness: cluster mode, gateway id %s, a field in a hash per slot with fair "
                 "waiters (%sgw{<slot tag>}), ttl %d ms",
                 V.id, cfg->key_prefix, cfg->liveness_ttl_ms);
        return;
    }
    /* The one hash's name is the slot hash's without a tag: the release
     * channel has none outside cluster mode. */
    snprintf(V.hash, sizeof V.hash, "%sgw", cfg->key_prefix);
    const struct script *sc = script_get(SCRIPT_LIVENESS);
    const char *argv[] = {"EVALSHA", sc->sha, "1", V.hash, V.id, V.ttl};
    size_t lens[6];
    for (int i = 0; i < 6; i++) lens[i] = strlen(argv[i]);
    redis_set_prelude(6, argv, lens);
    log_info("liveness: gateway id %s, a field of %s, ttl %d ms", V.id, V.hash,
             cfg->liveness_ttl_ms);
}
