/* multi.c -- /v1/locks with {"names": [...]}: several locks all or nothing,
 * under one token (lua/multi_acquire.lua).
 *
 * An attempt takes every name or none, atomically in one script on one
 * master.  While any name is busy the request holds nothing and waits like
 * a single acquire (holds.c), parked on every one of its names at once: a
 * release of any of them, or the retry hint (the latest time a busy name
 * frees up by itself), wakes it for another attempt.  waiters.c parks one
 * struct waiter per key, so the request parks one per name; whichever
 * wakes first takes the others out before the attempt.
 *
 * Quorum mode runs the script on every master; the set counts as taken
 * when a quorum took all of it within the lease's validity, as for one
 * lock (holds.c, "quorum mode"); otherwise what was taken is given back.
 *
 * Cluster mode: one script may only touch one slot's keys, so the names are
 * split into groups, one per slot (cluster_group_by_slot: by ascending
 * slot), and an attempt takes the groups one after the other, each
 * atomically with the same script.  A group found busy (or failing) makes
 * the attempt give back every group it took, newest first, and wait parked
 * on the busy group's names only: the earlier groups were free, and a
 * release of their names -- our own give-back's among them -- says nothing
 * about the obstacle.  Every request takes shared slots in the same order
 * and holds nothing while waiting, so overlapping sets cannot deadlock; the
 * set as a whole is not atomic (docs/sessions-and-multi.md, "Multi-lock").  A fair waiter
 * queues, on every master, with the arrival the first master that queued
 * it answered, so its queues order it alike as on one master.  PATCH and
 * DELETE send one script per group at once; each group is all or nothing,
 * and a refusal names which groups' names went through all the same. */
#include "common/alloc.h"
#include "common/names.h"
#include "common/token.h"
#include "handlers/backend.h"
#include "handlers/guard.h"
#include "handlers/holds.h"
#include "handlers/undo.h"
#include "handlers/verdict.h"
#include "handlers/access.h"
#include "handlers/handlers.h"
#include "handlers/quota_holds.h"
#include "handlers/quorum_math.h"
#include "server/auth.h"
#include "server/body.h"
#include "server/cluster.h"
#include "server/config.h"
#include "server/http.h"
#include "server/liveness.h"
#include "server/loop.h"
#include "server/metrics.h"
#include "server/redis.h"
#include "server/reply.h"
#include "server/waiters.h"

#include <cjson/cJSON.h>
#include <hiredis/hiredis.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MULTI_MAX     64 /* names per request (openapi.yaml) */
#define KEY_MAX       (GW_PREFIX_MAX + NAME_MAX_LEN + 16)
#define DRIFT_MS(ttl) ((ttl) / 100 + 2) /* as holds.c */

struct multi_call;

/* One parked waiter per name. */
struct multi_waiter {
    struct waiter w;       /* parked on this name's key (first) */
    struct multi_call *mc; /* the request it belongs to */
};

/* One request, alive from the handler to the reply, across waits. */
struct multi_call {
    struct gw_request *req;                  /* the request it answers */
    int n;                                   /* names */
    char **names;                            /* the names, as given */
    char **wkeys;                            /* "lock:NAME", what releases announce */
    struct multi_waiter *ws;                 /* n waiters */
    char kind;                               /* 'x' exclusive, 's' shared */
    int fair;                                /* queue in Redis on every name */
    int waited;                              /* parked at least once */
    int queued;                              /* an attempt went with its waiter id */
    int parking;                             /* inside park_all: a retry waits for it */
    int retry_pending;                       /* a retry came while parking */
    int backoff_ms;                          /* parked through a Redis outage: last pause */
    long long ttl_ms;                        /* lease length */
    long long wait_ms;                       /* how long it may wait, 0 = try once */
    int64_t start_ms;                        /* arrival (monotonic) */
    int64_t deadline_ms;                     /* start + wait_ms */
    int64_t attempt_ms;                      /* when the current attempt was sent */
    uint64_t seen_seq;                       /* waiters_release_seq() before the attempt */
    char waiter_id[LIVENESS_WAITER_ID_MAX];  /* its id in the fair queues */
    char attempt_id[LIVENESS_WAITER_ID_MAX]; /* its id in every holder record it makes
                                                (multi_acquire.lua ARGV 10): its retry
                                                finds its own grant, and an undo or a
                                                give-back takes exactly what it took */
    int live_slot[MULTI_MAX];                /* per group: liveness_waiter_join's answer */
    char *owner;                             /* "" for none */
    struct grant {
        long long fence;  /* its fence */
        long long count;  /* its re-entry count */
        long long ttl;    /* its remaining lease as its script answered (quorum: the
                            smallest of the granting masters') */
    } granted[MULTI_MAX]; /* per name: a grant */

    /* Groups (one per slot in cluster mode, else one of every name). */
    int ngroups;                /* how many */
    int order[MULTI_MAX];       /* name indices in taking order (identity: one group) */
    int gstart[MULTI_MAX + 1];  /* group g is order[gstart[g] .. gstart[g + 1]) */
    int taken;                  /* groups the current attempt has taken */
    int busy_group;             /* the group an attempt found busy: parked on its names */
    struct multi_waiter *woken; /* the waiter whose wake-up led to this attempt */
    struct group_ref {
        struct multi_call *mc;         /* the request */
        int g;                         /* the group */
    } refs[MULTI_MAX];                 /* callback arguments, one per group */
    int pending;                       /* group answers (or WAITs) still to come */
    long long acked;                   /* --min-replicas-ack: fewest replicas of a group */
    long long gverdict[MULTI_MAX];     /* PATCH/DELETE: each group's verdict (-100 failed) */
    long long gindex[MULTI_MAX];       /* its refused name, 1-based in request order */
    long long sum;                     /* PATCH: shortest ttl; DELETE: holds ended */
    char err[128];                     /* the first Redis error of a group */
    char arrival[24];                  /* fair across slots: the queues' score, "" until known */
    void (*then)(struct multi_call *); /* after a give-back's answers (give_back_then) */
    long long fv, fa, fb;              /* the failed attempt's verdict and its two values
                                          (quorum: fa the grant's validity while its
                                          fences are raised) */
    int64_t judged_ms;                 /* quorum: when that validity was reckoned */
    uint32_t quota;                    /* the key's holds_at_once, 0: none (quota_holds.h) */
    char **qmembers;                   /* n entries in its ledger when quota, else NULL */
    int quota_added;                   /* this attempt's take entered some: drop if no grant */
    uint32_t unsure;                   /* quorum: masters that did not answer its last attempt
                                          though it may have run (as holds.h's): undone there
                                          if the request ends without a grant (multi_free) */
};

static void undo_attempt_at(struct multi_call *mc, int node);

static void multi_free(void *ctx) {
    struct multi_call *mc = ctx;
    /* Ended without a grant while some quorum masters never answered its
     * last attempt, though a quorum of others did (409, a mode mismatch,
     * the client gone): what those may have granted is undone there. */
    for (int i = 0; mc->unsure && i < GW_MAX_NODES; i++)
        if (mc->unsure & (1u << i)) undo_attempt_at(mc, i);
    if (mc->waiter_id[0])
        for (int g = 0; g < mc->ngroups; g++) liveness_waiter_leave(mc->live_slot[g]);
    for (int i = 0; i < mc->n; i++) {
        free(mc->names[i]);
        free(mc->wkeys[i]);
    }
    for (int i = 0; mc->qmembers && i < mc->n; i++) free(mc->qmembers[i]);
    free(mc->qmembers);
    free(mc->names);
    free(mc->wkeys);
    free(mc->ws);
    free(mc->owner);
    free(mc);
}

static void hash_of(const char *name, char *hash) {
    snprintf(hash, KEY_MAX, "%slock:{%s}", handlers_config()->key_prefix, name);
}

static void keys_of(const char *name, char *hash, char *queue, char *qdead) {
    hash_of(name, hash);
    snprintf(queue, KEY_MAX + 8, "%s:q", hash);
    snprintf(qdead, KEY_MAX + 8, "%s:qd", hash);
}

/* ---- parsing ------------------------------------------------------------------ */

/* "names": 1 to MULTI_MAX distinct valid names, into a new multi_call
 * (req->ctx), or an answer 400 and NULL. */
static struct multi_call *names_or_reply(struct gw_request *req) {
    cJSON *a = req->json ? cJSON_GetObjectItemCaseSensitive(req->json, "names") : NULL;
    int n = cJSON_IsArray(a) ? cJSON_GetArraySize(a) : 0;
    if (n < 1 || n > MULTI_MAX) {
        reply_problem(req, CODE_INVALID_FIELD, "names must be an array of 1 to %d lock names",
                      MULTI_MAX);
        return NULL;
    }
    for (int i = 0; i < n; i++) {
        cJSON *v = cJSON_GetArrayItem(a, i);
        if (!cJSON_IsString(v) || !name_valid(v->valuestring, strlen(v->valuestring))) {
            reply_problem(req, CODE_INVALID_NAME,
                          "names[%d]: a name is 1-%d bytes of [A-Za-z0-9._:-]", i, NAME_MAX_LEN);
            return NULL;
        }
        for (int j = 0; j < i; j++)
            if (strcmp(cJSON_GetArrayItem(a, j)->valuestring, v->valuestring) == 0) {
                reply_problem(req, CODE_INVALID_FIELD, "names[%d]: '%s' is named twice", i,
                              v->valuestring);
                return NULL;
            }
        /* Every name needs the key's write grant: all or nothing here too. */
        if (access_name_or_reply(req, AUTH_LOCKS, v->valuestring, AUTH_WRITE) != GW_OK) return NULL;
    }
    struct multi_call *mc = alloc_check(calloc(1, sizeof *mc));
    mc->req = req;
    mc->n = n;
    mc->names = alloc_check(calloc((size_t)n, sizeof *mc->names));
    mc->wkeys = alloc_check(calloc((size_t)n, sizeof *mc->wkeys));
    mc->ws = alloc_check(calloc((size_t)n, sizeof *mc->ws));
    for (int i = 0; i < n; i++) {
        const char *s = cJSON_GetArrayItem(a, i)->valuestring;
        mc->names[i] = alloc_copy(s, strlen(s));
        size_t len = strlen(s) + 6;
        mc->wkeys[i] = alloc_check(malloc(len));
        snprintf(mc->wkeys[i], len, "lock:%s", s);
    }
    mc->owner = alloc_copy("", 0);
    req->ctx = mc;
    req->ctx_free = multi_free;
    /* One of the names stands for the request in logs and problem details. */
    req->name = alloc_copy(mc->names[0], strlen(mc->names[0]));
    if (backend->per_slot) {
        mc->ngroups =
            cluster_group_by_slot((const char *const *)mc->names, n, mc->order, mc->gstart);
    } else {
        for (int i = 0; i < n; i++) mc->order[i] = i;
        mc->ngroups = 1, mc->gstart[0] = 0, mc->gstart[1] = n;
    }
    for (int g = 0; g < mc->ngroups; g++) mc->refs[g] = (struct group_ref){mc, g};
    return mc;
}

/* ---- scripts over all names ------------------------------------------------------ */

/* The first name of group g in taking order (its slot's stand-in). */
static const char *group_name(const struct multi_call *mc, int g) {
    return mc->names[mc->order[mc->gstart[g]]];
}

/* Name k (0-based) of group g, as a 1-based index in request order. */
static long long request_index(const struct multi_call *mc, int g, long long k) {
    int size = mc->gstart[g + 1] - mc->gstart[g];
    return k >= 1 && k <= size ? mc->order[mc->gstart[g] + k - 1] + 1 : 0;
}

/* Runs id with group g's hashes as KEYS (and, with queues, their two queue
 * keys each, then in cluster mode the slot's liveness hash) and args as
 * ARGV, on every master in quorum mode; ARGV[chan], when chan >= 0, becomes
 * the release channel of the group's slot. */
static void run_group(struct multi_call *mc, int g, enum script_id id, int queues, int nargs,
                      const char *const *args, int chan, redis_cb one, redis_all_cb all,
                      void *arg) {
    int from = mc->gstart[g], size = mc->gstart[g + 1] - from;
    int per = queues ? 3 : 1, nkeys = per * size;
    char live[LIVENESS_HASH_MAX];
    if (queues) {
        char h[KEY_MAX];
        hash_of(group_name(mc, g), h);
        liveness_hash_for(h, live, sizeof live);
        nkeys++;
    }
    int total = nkeys + nargs;
    const char **argv = alloc_check(calloc((size_t)total, sizeof *argv));
    size_t *lens = alloc_check(calloc((size_t)total, sizeof *lens));
    char *buf = alloc_check(malloc((size_t)per * size * (KEY_MAX + 8)));
    for (int k = 0; k < size; k++) {
        char *h = buf + (size_t)per * k * (KEY_MAX + 8);
        char *q = h + (KEY_MAX + 8), *d = q + (KEY_MAX + 8);
        char qb[KEY_MAX + 8], db[KEY_MAX + 8];
        keys_of(mc->names[mc->order[from + k]], h, queues ? q : qb, queues ? d : db);
        argv[per * k] = h;
        if (queues) argv[per * k + 1] = q, argv[per * k + 2] = d;
    }
    if (nkeys > per * size) argv[per * size] = live;
    for (int i = 0; i < nargs; i++) argv[nkeys + i] = args[i];
    if (chan >= 0) argv[nkeys + chan] = redis_release_channel_for(group_name(mc, g));
    for (int i = 0; i < total; i++) lens[i] = strlen(argv[i]);
    backend->eval(id, nkeys, total, argv, lens, one, all, arg);
    free(buf);
    free(lens);
    free(argv);
}

static void ignore_one(void *arg, const struct redis_result *res) {}
static void ignore_all(void *arg, const struct redis_result *res, int n) {}

/* Releases one level of every name of the first `groups` groups, newest
 * first, answers unread (a give-back).  One level is exactly what an
 * attempt added: a new hold ends, a re-entered one goes back down.  Only
 * where this request's attempt id says it added it (multi_release.lua
 * ARGV 3): a quorum master the attempt did not reach keeps what the token
 * held before, and a give-back never takes a level twice. */
static void give_back(struct multi_call *mc, int groups) {
    const char *args[3] = {mc->req->token, "", mc->attempt_id};
    for (int g = groups - 1; g >= 0; g--)
        run_group(mc, g, SCRIPT_MULTI_RELEASE, 0, 3, args, 1, ignore_one, ignore_all, NULL);
}

static void give_back_done(void *arg, const struct redis_result *res) {
    struct multi_call *mc = arg;
    if (--mc->pending == 0) mc->then(mc);
}

/* give_back, then `then` once every group's master has answered (or
 * failed): what follows -- an answer, or waiting -- comes after the names
 * are free, so a client that reads the answer and looks finds them free,
 * and nothing is held while the request waits.  Per-slot backends only
 * (one master per group: no quorum to reduce). */
static void give_back_then(struct multi_call *mc, int groups, void (*then)(struct multi_call *)) {
    const char *args[3] = {mc->req->token, "", mc->attempt_id};
    mc->then = then;
    mc->pending = groups;
    for (int g = groups - 1; g >= 0; g--)
        run_group(mc, g, SCRIPT_MULTI_RELEASE, 0, 3, args, 1, give_back_done, ignore_all, mc);
}

static void release_undelivered(struct gw_request *req) {
    struct multi_call *mc = req->ctx;
    give_back(mc, mc->ngroups);
    metrics_inc(M_GIVEN_BACK, 1);
}

/* A fair waiter that stops waiting leaves every name's queue at once. */
static void leave_queues(struct multi_call *mc) {
    if (!mc->queued) return;
    mc->queued = 0;
    for (int i = 0; i < mc->n; i++) {
        char h[KEY_MAX], q[KEY_MAX + 8], d[KEY_MAX + 8], live[LIVENESS_HASH_MAX];
        keys_of(mc->names[i], h, q, d);
        liveness_hash_for(h, live, sizeof live);
        int nkeys = 4; /* dequeue.lua */
        const char *argv[] = {h,           q, d, live, mc->waiter_id, redis_release_channel_for(h),
                              mc->wkeys[i]};
        size_t lens[7];
        for (int k = 0; k < nkeys + 3; k++) lens[k] = strlen(argv[k]);
        backend->eval(SCRIPT_DEQUEUE, nkeys, nkeys + 3, argv, lens, ignore_one, ignore_all, NULL);
    }
}

/* ---- acquire --------------------------------------------------------------------- */

static void attempt(struct multi_call *mc);

static void unpark_all(struct multi_call *mc) {
    for (int i = 0; i < mc->n; i++) waiters_unpark(&mc->ws[i].w);
}

static void on_give_up(struct waiter *w, int client_gone) {
    struct multi_call *mc = ((struct multi_waiter *)w)->mc;
    unpark_all(mc);
    leave_queues(mc);
    if (client_gone) {
        metrics_inc(M_WAIT_TIMEOUTS, 1);
        reply_problem(mc->req, CODE_LOCK_BUSY, "the client went away while waiting");
    } else {
        reply_problem(mc->req, CODE_SHUTTING_DOWN, "the gateway is stopping");
    }
}

static void reply_busy(struct multi_call *mc, long long retry_after_ms, long long i) {
    struct gw_request *req = mc->req;
    cJSON *extra = busy_extra(req, retry_after_ms);
    const char *busy = i >= 1 && i <= mc->n ? mc->names[i - 1] : "";
    if (busy[0]) cJSON_AddStringToObject(extra, "busy_name", busy);
    metrics_inc(M_LOCK_BUSY, 1);
    reply_problem_with(req, CODE_LOCK_BUSY, extra,
                       "lock '%s' is busy: none of the %d names was taken", busy, mc->n);
}

/* A release of one of its names, or its timer: take every name's waiter
 * out and try again.  While park_all is still parking, only note it. */
static void on_wake(struct waiter *w) {
    struct multi_call *mc = ((struct multi_waiter *)w)->mc;
    if (mc->parking) {
        mc->retry_pending = 1;
        return;
    }
    unpark_all(mc);
    if (http_client_gone(mc->req)) {
        waiters_pass_on(w); /* a release's wake-up is not lost with it */
        on_give_up(w, 1);
        return;
    }
    int64_t now = loop_now_ms();
    if (now > mc->deadline_ms + handlers_config()->liveness_ttl_ms) {
        waiters_pass_on(w);
        metrics_inc(M_WAIT_TIMEOUTS, 1);
        leave_queues(mc);
        reply_busy(mc, 1, 0);
        return;
    }
    mc->woken = (struct multi_waiter *)w;
    attempt(mc);
}

/* Parks on the names of the group the attempt found busy: every name when
 * there is one group. */
static void park_all(struct multi_call *mc, int64_t wake) {
    mc->parking = 1;
    mc->retry_pending = 0;
    int from = mc->gstart[mc->busy_group], to = mc->gstart[mc->busy_group + 1];
    for (int k = from; k < to && !mc->retry_pending; k++) {
        int i = mc->order[k];
        struct waiter *w = &mc->ws[i].w;
        mc->ws[i].mc = mc;
        w->key = mc->wkeys[i];
        w->fair = mc->fair;
        w->fd = -1;
        w->seen_seq = mc->seen_seq;
        w->retry = on_wake;
        w->give_up = on_give_up;
        if (k > from) {
            waiters_park(w, wake);
        } else if (park_request(mc->req, w, wake) < 0) { /* the one hang-up watch */
            mc->parking = 0;
            on_give_up(w, 1);
            return;
        }
    }
    mc->parking = 0;
    if (mc->retry_pending) {
        unpark_all(mc);
        attempt(mc);
    }
}

/* The longest hold-off a data loss puts on any of mc's names now (0: none;
 * server/lossguard.h). */
static int64_t lost_for(struct multi_call *mc) {
    int64_t held_off = 0, left;
    for (int i = 0; i < mc->n; i++)
        if (guard_lost_for(mc->names[i], &left) && left > held_off) held_off = left;
    return held_off;
}

/* Grants on mc's names are refused by a data loss and the attempt holds
 * nothing (any grant given back): a waiting request whose wait outlasts
 * the hold-off waits it out, any other is answered 503 redis_data_lost.
 * With no hold-off on them (yet, or in quorum mode too few masters held
 * off for one) it tries again after retry_ms (a quorum round's hint, 0 at
 * once); why: the detail then (NULL: a marker changed). */
static void held_lost(struct multi_call *mc, int64_t retry_ms, const char *why) {
    int64_t held_off = lost_for(mc);
    int64_t again = loop_now_ms() + (held_off > 0 ? held_off : retry_ms);
    if (mc->wait_ms > 0 && again < mc->deadline_ms) {
        mc->waited = 1;
        park_all(mc, again);
        return;
    }
    leave_queues(mc);
    guard_lost_reply(mc->req, mc->names, mc->n, why); /* answers 503 redis_data_lost */
}

/* ttl: the smallest real remaining lease; spent: what to take off each
 * name's granted ttl for its own (see grant_or_retry). */
static void reply_granted(struct multi_call *mc, long long ttl, long long spent) {
    struct gw_request *req = mc->req;
    /* A loss found after the request passed the guard (holds.c, the
     * same): what this attempt took is given back, by its id; a waiting
     * request whose wait outlasts the hold-off waits it out. */
    if (!backend->fans_out && lost_for(mc) > 0) {
        give_back(mc, mc->ngroups);
        metrics_inc(M_GIVEN_BACK, 1);
        held_lost(mc, 0, NULL);
        return;
    }
    mc->unsure = 0; /* what the masters that did not answer may grant is the client's */
    reply_header(req, "Lock-Token", req->token);
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "token", req->token);
    cJSON_AddStringToObject(o, "mode", mc->kind == 's' ? "shared" : "exclusive");
    json_add_int(o, "ttl_ms", ttl);
    cJSON *locks = cJSON_AddArrayToObject(o, "locks");
    int all_reentered = 1;
    for (int i = 0; i < mc->n; i++) {
        cJSON *l = cJSON_CreateObject();
        cJSON_AddStringToObject(l, "name", mc->names[i]);
        json_add_int(l, "fence", mc->granted[i].fence);
        json_add_int(l, "count", mc->granted[i].count);
        json_add_int(l, "ttl_ms", mc->granted[i].ttl - spent);
        if (mc->granted[i].count <= 1) all_reentered = 0;
        cJSON_AddItemToArray(locks, l);
    }
    metrics_inc(M_LOCK_ACQUIRED, (uint64_t)mc->n);
    if (mc->quota) { /* the entries count as long as the leases (holds.c attempt) */
        quota_holds_set(req->key_id, ttl + 1, mc->n, (const char *const *)mc->qmembers);
        mc->quota_added = 0;
    }
    /* A give-back takes one level of every name: right for a new hold and
     * a re-entry alike (not in quorum mode, as holds.c's hold_gives_back). */
    if (backend->undoes_reentry || !all_reentered) req->on_undelivered = release_undelivered;
    reply_json(req, all_reentered ? 200 : 201, o);
}

static void resume_failed(struct multi_call *mc);

/* A grant is answered only while it is true: every name held, for at least
 * the ttl_ms answered, which is the smallest real remaining lease.  Each
 * name's lease is what its script answered (a re-entry's capped by its
 * max_hold_ms, a session-bound one's its session's); with since_attempt,
 * less the time since the attempt began, which every script of it ran
 * after: groups taken one after another on several masters, or a WAIT
 * after them.  When what is left is at or under the drift allowance
 * (DRIFT_MS, as holds.c's quorum mode), a name may already be someone
 * else's: everything is given back and the attempt counts as busy, so the
 * request tries again within its wait_ms or is refused, as quorum mode
 * does (README "Multi-lock"). */
static void grant_or_retry(struct multi_call *mc, int since_attempt) {
    long long spent = since_attempt ? loop_now_ms() - mc->attempt_ms : 0, least = -1;
    int at = 0;
    for (int i = 0; i < mc->n; i++)
        if (least < 0 || mc->granted[i].ttl - spent < least)
            least = mc->granted[i].ttl - spent, at = i;
    if (least > DRIFT_MS(mc->ttl_ms)) {
        reply_granted(mc, least, spent);
        return;
    }
    mc->fv = 0, mc->fa = 1, mc->fb = at + 1;
    for (int g = 0; g < mc->ngroups; g++)
        for (int k = mc->gstart[g]; k < mc->gstart[g + 1]; k++)
            if (mc->order[k] == at) mc->busy_group = g;
    give_back_then(mc, mc->ngroups, resume_failed);
}

/* --min-replicas-ack: a grant is answered once enough replicas have it,
 * else given back and answered 503 (as holds.c).  In cluster mode each
 * group's master is asked (a WAIT there counts that master's replicas),
 * and every one of them must have enough. */
static void reply_unacked(struct multi_call *mc) {
    long long acked = mc->acked;
    reply_problem(mc->req, CODE_BACKEND_UNAVAILABLE,
                  "only %lld of %d replicas acknowledged the locks in time; they were given back",
                  acked < 0 ? 0 : acked, handlers_config()->min_replicas_ack);
}

static void ack_done(void *arg, const struct redis_result *res) {
    struct multi_call *mc = ((struct group_ref *)arg)->mc;
    long long got = res->ok && res->reply->type == REDIS_REPLY_INTEGER ? res->reply->integer : -1;
    if (got < mc->acked) mc->acked = got;
    if (--mc->pending > 0) return;
    if (mc->acked < handlers_config()->min_replicas_ack) {
        give_back_then(mc, mc->ngroups, reply_unacked);
        return;
    }
    grant_or_retry(mc, 1);
}

/* The request is answered 503 after a timeout or a lost connection: its
 * last attempt may have run, or may still run, on any group's master (in
 * quorum mode on any master).  Each name is undone by itself, by the
 * attempt's id (undo.h): release.lua takes only the level this request's
 * attempt took there, once, so a name it never reached, or one already
 * given back, is left as it is ("nothing"). */
static void undo_attempt(struct multi_call *mc) {
    for (int i = 0; i < mc->n; i++) {
        struct hold_keys k;
        hold_keys(mc->names[i], 0, &k);
        undo_hold(k.hash, k.message, mc->req->token, mc->attempt_id, mc->ttl_ms);
    }
    mc->unsure = 0; /* undone on every master */
}

/* The same on quorum master node alone. */
static void undo_attempt_at(struct multi_call *mc, int node) {
    for (int i = 0; i < mc->n; i++) {
        struct hold_keys k;
        hold_keys(mc->names[i], 0, &k);
        undo_hold_at(node, k.hash, k.message, mc->req->token, mc->attempt_id, mc->ttl_ms);
    }
}

/* One attempt's outcome: verdict 1 (granted: mc->granted filled; quorum
 * mode: a its validity, each name's ttl already its own),
 * 0 (busy: retry, busy index), -3 (mode, index), -100 (err). */
static void resume_failed(struct multi_call *mc);
static void unreserved(void *arg) { resume_failed(arg); }

static void on_verdict(struct multi_call *mc, long long verdict, long long a, long long b,
                       const char *err) {
    struct gw_request *req = mc->req;
    if (verdict == -100) {
        int64_t again = outage_retry_at(req, err, mc->waited, mc->deadline_ms, &mc->backoff_ms);
        if (again) {
            park_all(mc, again);
            return;
        }
        leave_queues(mc);
        if (err && !redis_error_is_reply(err)) undo_attempt(mc);
        reply_problem(req, CODE_BACKEND_UNAVAILABLE, "Redis: %s", err ? err : "unexpected answer");
        return;
    }
    mc->backoff_ms = 0;
    if (mc->quota_added && verdict <= 0) {
        /* No grant: its ledger entries go again, and then it goes on (as
         * holds.c's quota_unreserve). */
        mc->quota_added = 0;
        mc->fv = verdict, mc->fa = a, mc->fb = b;
        quota_holds_drop_then(req->key_id, mc->n, (const char *const *)mc->qmembers, unreserved,
                              mc);
        return;
    }
    int64_t now = loop_now_ms();
    if (mc->waited && verdict != 0) metrics_observe_wait((now - mc->start_ms) * 1000);
    /* A script refused a fresh grant on a master that lost its data since
     * this gateway last read its marker (the Redis layer noted the loss);
     * quorum mode: a round that failed while more masters are held off
     * than the quorum can spare (holds.c, the same). */
    if (verdict == VERDICT_DATA_LOST || (verdict == 0 && backend->fans_out && lost_for(mc) > 0)) {
        /* A master's -8 has a = 0 (at once); a quorum round's carries
         * its retry hint in a and its detail in err (quorum_acquire_done). */
        int round = verdict == VERDICT_DATA_LOST && backend->fans_out;
        held_lost(mc, round ? a : 0, round ? err : NULL);
        return;
    }
    if (verdict == -3) {
        leave_queues(mc);
        reply_problem(req, CODE_MODE_MISMATCH, "this token holds lock '%s' in the other mode",
                      b >= 1 && b <= mc->n ? mc->names[b - 1] : "");
        return;
    }
    if (verdict == 0) {
        if (http_shutting_down() && mc->wait_ms > 0) {
            leave_queues(mc);
            reply_problem(req, CODE_SHUTTING_DOWN, "the gateway is stopping");
            return;
        }
        if (mc->wait_ms > 0 && now < mc->deadline_ms) {
            if (!mc->waited) metrics_inc(M_WAIT_STARTED, 1);
            mc->waited = 1;
            int64_t wake = now + a;
            if (wake > mc->deadline_ms) wake = mc->deadline_ms;
            /* Woken by a release of a name it did not find busy: that name
             * is free for the next local waiter (waiters_pass_on). */
            if (mc->woken && mc->woken - mc->ws != b - 1) waiters_pass_on(&mc->woken->w);
            mc->woken = NULL;
            park_all(mc, wake);
            return;
        }
        if (mc->waited) {
            metrics_inc(M_WAIT_TIMEOUTS, 1);
            metrics_observe_wait((now - mc->start_ms) * 1000);
            leave_queues(mc);
        }
        reply_busy(mc, a, b);
        return;
    }
    if (mc->waited && http_client_gone(req)) {
        give_back(mc, mc->ngroups);
        metrics_inc(M_GIVEN_BACK, 1);
        metrics_inc(M_WAIT_TIMEOUTS, 1);
        reply_problem(req, CODE_LOCK_BUSY, "the client went away while waiting");
        return;
    }
    if (handlers_config()->min_replicas_ack) { /* refused with quorum (config.c) */
        char n[16], timeout[16];
        snprintf(n, sizeof n, "%d", handlers_config()->min_replicas_ack);
        snprintf(timeout, sizeof timeout, "%d", handlers_config()->replica_ack_timeout_ms);
        const char *argv[3] = {"WAIT", n, timeout};
        size_t lens[3] = {4, strlen(n), strlen(timeout)};
        mc->pending = mc->ngroups;
        mc->acked = 1 << 30;
        for (int g = 0; g < mc->ngroups; g++) {
            char h[KEY_MAX], q[KEY_MAX + 8], d[KEY_MAX + 8];
            keys_of(group_name(mc, g), h, q, d); /* the master that took the group */
            redis_command_for(h, 3, argv, lens, ack_done, &mc->refs[g]);
        }
        return;
    }
    if (backend->fans_out) {
        reply_granted(mc, a, 0); /* quorum_acquire_done judged it: a is its validity */
        return;
    }
    grant_or_retry(mc, mc->ngroups > 1);
}

static long long elem(const redisReply *r, size_t i) {
    return r && r->type == REDIS_REPLY_ARRAY && r->elements > i &&
                   r->element[i]->type == REDIS_REPLY_INTEGER
               ? r->element[i]->integer
               : 0;
}

/* The script's verdict, -100 when Redis failed or answered otherwise. */
static long long verdict_of(const struct redis_result *res) {
    if (!res->ok || res->reply->type != REDIS_REPLY_ARRAY || res->reply->elements < 2 ||
        res->reply->element[0]->type != REDIS_REPLY_INTEGER)
        return -100;
    return res->reply->element[0]->integer;
}

static void send_group(struct multi_call *mc);

/* A failed attempt goes on (waits, or is answered) with what acquire_done
 * kept of it. */
static void resume_failed(struct multi_call *mc) {
    on_verdict(mc, mc->fv, mc->fa, mc->fb,
               mc->fv == -100 || (mc->fv == VERDICT_DATA_LOST && backend->fans_out) ? mc->err
                                                                                    : NULL);
}

/* Group mc->taken's answer: the next group, the grant, or (anything but a
 * grant) the give-back of the groups taken before it. */
static void acquire_done(void *arg, const struct redis_result *res) {
    struct multi_call *mc = arg;
    int g = mc->taken;
    long long verdict = verdict_of(res);
    const redisReply *r = res->reply;
    if (verdict == 1) {
        for (int k = 0; k < mc->gstart[g + 1] - mc->gstart[g]; k++) {
            int i = mc->order[mc->gstart[g] + k];
            mc->granted[i].fence = elem(r, 2 + 3 * (size_t)k);
            mc->granted[i].count = elem(r, 3 + 3 * (size_t)k);
            mc->granted[i].ttl = elem(r, 4 + 3 * (size_t)k);
        }
        if (++mc->taken < mc->ngroups) {
            send_group(mc);
            return;
        }
        on_verdict(mc, 1, 0, 0, NULL); /* grant_or_retry judges it */
        return;
    }
    mc->busy_group = g;
    /* A fair waiter across slots queues everywhere with the first score a
     * master gave it (multi_acquire.lua, ARGV 9). */
    if (verdict == 0 && mc->queued && mc->ngroups > 1 && !mc->arrival[0] && elem(r, 4) > 0)
        snprintf(mc->arrival, sizeof mc->arrival, "%lld", elem(r, 4));
    mc->fv = verdict;
    if (verdict == -100) {
        mc->fa = mc->fb = 0;
        snprintf(mc->err, sizeof mc->err, "%s", res->ok ? "unexpected answer" : res->error);
    } else {
        mc->fa = elem(r, 1);
        mc->fb = request_index(mc, g, verdict == 0 ? elem(r, 3) : elem(r, 1));
    }
    if (mc->taken > 0) {
        give_back_then(mc, mc->taken, resume_failed);
        return;
    }
    resume_failed(mc);
}

/* Quorum mode: the raise's outcome (backend.h, quorum_fences_raise).  The
 * grant is answered with its validity and leases less the raise's round
 * trip, or given back. */
static void fences_raised(void *arg, int ok) {
    struct multi_call *mc = arg;
    long long extra = loop_now_ms() - mc->judged_ms, left = mc->fa - extra;
    if (ok && left > 0) {
        for (int k = 0; k < mc->n; k++) mc->granted[k].ttl -= extra;
        on_verdict(mc, 1, left, 0, NULL);
        return;
    }
    give_back(mc, 1);
    if (!ok)
        on_verdict(mc, -100, 0, 0, QUORUM_RAISE_FAILED);
    else
        on_verdict(mc, 0, 1, 0, NULL); /* too late: try again */
}

static void fence_raise(struct multi_call *mc, long long validity) {
    char h[MULTI_MAX][KEY_MAX];
    const char *hashes[MULTI_MAX];
    long long fences[MULTI_MAX];
    for (int i = 0; i < mc->n; i++) {
        hash_of(mc->names[i], h[i]);
        hashes[i] = h[i];
        fences[i] = mc->granted[i].fence;
    }
    mc->fa = validity;
    mc->judged_ms = loop_now_ms();
    quorum_fences_raise(mc->n, hashes, fences, fences_raised, mc);
}

static void quorum_acquire_done(void *arg, const struct redis_result *res, int n) {
    struct multi_call *mc = arg;
    int q = redis_quorum(), granted = 0, answered = 0, mismatch = 0, nbusy = 0, abstained = 0;
    int refused = 0;
    long long ttl = -1, retry = 1, busy_i = 0, mode_i = 0, holdoff = 0;
    const char *err = "no Redis master answered";
    memset(mc->granted, 0, sizeof mc->granted);
    for (int k = 0; k < mc->n; k++) mc->granted[k].ttl = -1;
    for (int i = 0; i < n; i++) {
        long long v = verdict_of(&res[i]);
        /* As holds.c's quorum round (backend_quorum.c): a master whose
         * answer did not come may grant yet, and a later attempt's answer
         * there does not settle it (the earlier one may run after it). */
        if (res[i].maybe_ran) mc->unsure |= 1u << i;
        if (v == -100) {
            if (!res[i].ok) err = res[i].error;
            continue;
        }
        answered++;
        const redisReply *r = res[i].reply;
        int64_t lost_left = 0;
        if ((v == 1 || v == VERDICT_DATA_LOST) && redis_node_lost(i, &lost_left) &&
            (holdoff == 0 || lost_left < holdoff))
            holdoff = lost_left;
        if (v == 1 && redis_node_lost(i, NULL)) {
            abstained++; /* lost its data: its grant does not count (backend_quorum.c) */
        } else if (v == 1) {
            granted++;
            if (ttl < 0 || elem(r, 1) < ttl) ttl = elem(r, 1);
            for (int k = 0; k < mc->n; k++) {
                struct grant *gr = &mc->granted[k];
                long long fence = elem(r, 2 + 3 * (size_t)k), count = elem(r, 3 + 3 * (size_t)k),
                          left = elem(r, 4 + 3 * (size_t)k);
                if (fence > gr->fence) gr->fence = fence;
                if (count > gr->count) gr->count = count;
                if (gr->ttl < 0 || left < gr->ttl) gr->ttl = left;
            }
        } else if (v == 0) {
            nbusy++;
            if (elem(r, 1) > retry) retry = elem(r, 1);
            busy_i = elem(r, 3);
        } else if (v == -3) {
            mismatch++;
            mode_i = elem(r, 1);
        } else if (v == VERDICT_DATA_LOST) {
            refused++; /* its marker moved: it lost its data */
        }
    }
    /* ttl is the smallest lease any name has on any granting master. */
    long long off = (loop_now_ms() - mc->attempt_ms) + DRIFT_MS(mc->ttl_ms);
    long long validity = ttl - off;
    if (granted >= q && validity > 0) {
        for (int k = 0; k < mc->n; k++) mc->granted[k].ttl -= off;
        if (granted < n) leave_queues(mc);
        fence_raise(mc, validity);
        return;
    }
    if (granted + abstained > 0) give_back(mc, 1);
    if (answered < q) {
        char why[160];
        snprintf(why, sizeof why, "only %d of %d Redis masters answered (%s)", answered, n, err);
        on_verdict(mc, -100, 0, 0, why);
        return;
    }
    if (mismatch >= q) {
        on_verdict(mc, -3, 0, mode_i, NULL);
        return;
    }
    switch (quorum_failed_why(granted, nbusy, refused + abstained, q)) {
    case QUORUM_FAILED_BUSY: on_verdict(mc, 0, retry, busy_i, NULL); return;
    case QUORUM_FAILED_DATA_LOST: /* no 409: nobody holds it (quorum_math.h) */
        snprintf(mc->err, sizeof mc->err,
                 "%d of %d Redis masters granted and %d are held off after losing their data",
                 granted, n, refused + abstained);
        on_verdict(mc, VERDICT_DATA_LOST, quorum_lost_retry_ms(holdoff), 0, mc->err);
        return;
    case QUORUM_FAILED_NO_COMMON:
        snprintf(mc->err, sizeof mc->err,
                 "the Redis masters gave no common answer (%d of %d granted, none busy)", granted,
                 n);
        on_verdict(mc, -100, 0, 0, mc->err);
        return;
    }
}

/* Sends group mc->taken's script; the attempt's first when taken is 0. */
static void send_group(struct multi_call *mc) {
    long long wait_left = 0;
    if (mc->wait_ms > 0) {
        wait_left = mc->deadline_ms - loop_now_ms();
        if (wait_left < 1) wait_left = 1;
    }
    char ttl[24], left[24], kind[2] = {mc->kind, 0};
    snprintf(ttl, sizeof ttl, "%lld", mc->ttl_ms);
    snprintf(left, sizeof left, "%lld", wait_left);
    if (mc->fair && mc->wait_ms > 0) mc->queued = 1;
    const char *args[10] = {mc->req->token,
                            ttl,
                            mc->owner,
                            kind,
                            mc->fair && mc->wait_ms > 0 ? mc->waiter_id : "",
                            left,
                            mc->fair ? "1" : "0",
                            "",
                            mc->arrival,
                            mc->attempt_id};
    run_group(mc, mc->taken, SCRIPT_MULTI_ACQUIRE, 1, 10, args, 7, acquire_done,
              quorum_acquire_done, mc);
}

static void send_attempt(struct multi_call *mc);

/* The key's ledger said whether the names fit its holds_at_once. */
static void quota_taken(void *arg, enum quota_verdict v, int added, long long retry_ms,
                        const char *err) {
    struct multi_call *mc = arg;
    struct gw_request *req = mc->req;
    if (v == QUOTA_ERROR) {
        leave_queues(mc);
        reply_problem(req, CODE_BACKEND_UNAVAILABLE, "Redis: %s",
                      err ? err : "the key's ledger did not answer");
        return;
    }
    if (v == QUOTA_OVER) {
        leave_queues(mc);
        auth_count_holds_refused(req->key_id);
        reply_problem_with(req, CODE_QUOTA_EXCEEDED, busy_extra(req, retry_ms),
                           "key '%s' would hold more than its holds_at_once, %u, across all "
                           "gateways with these %d names; release some (or wait %lld ms, when the "
                           "first lease ends)",
                           req->key_id, mc->quota, mc->n, retry_ms);
        return;
    }
    mc->quota_added = mc->quota_added || added > 0; /* as holds.c's quota_taken */
    send_attempt(mc);
}

/* With a holds_at_once limit, every name first takes its place in the
 * key's ledger, all or none (quota_holds.h). */
static void attempt(struct multi_call *mc) {
    if (!mc->quota) {
        send_attempt(mc);
        return;
    }
    quota_holds_take(mc->req->key_id, mc->quota, mc->ttl_ms + quota_holds_margin_ms(), NULL, mc->n,
                     (const char *const *)mc->qmembers, quota_taken, mc);
}

static void send_attempt(struct multi_call *mc) {
    mc->taken = 0;
    mc->busy_group = 0;
    mc->seen_seq = waiters_release_seq();
    mc->attempt_ms = loop_now_ms();
    send_group(mc);
}

void multi_acquire(struct gw_request *req) {
    long long ttl, wait;
    int fair, has_token;
    const char *mode, *owner;
    if (token_header_or_reply(req, 0, &has_token) || body_parse_or_reply(req) ||
        body_int_or_reply(req, "ttl_ms", guard_default_lease_ms(), 100, guard_max_lease_ms(), &ttl,
                          NULL) ||
        body_int_or_reply(req, "wait_ms", 0, 0, 300000, &wait, NULL) ||
        body_string_or_reply(req, "mode", 16, &mode) || body_bool_or_reply(req, "fair", 0, &fair) ||
        body_string_or_reply(req, "owner", NAME_MAX_LEN, &owner))
        return;
    int shared = mode && strcmp(mode, "shared") == 0;
    if (mode && !shared && strcmp(mode, "exclusive") != 0) {
        reply_problem(req, CODE_INVALID_FIELD, "mode must be \"exclusive\" or \"shared\"");
        return;
    }
    /* Not offered (yet): binding a multi-lock to a session.  Said rather
     * than ignored, so nobody believes the set lives with the session. */
    if (http_header(req, "Session")) {
        reply_problem(req, CODE_INVALID_FIELD,
                      "a multi-lock cannot be bound to a session: take the names one by one "
                      "with the Session header");
        return;
    }
    struct multi_call *mc = names_or_reply(req);
    if (!mc || guard_names_or_reply(req, mc->names, mc->n)) return;
    if (!has_token) token_issue(req);
    free(mc->owner);
    mc->owner = alloc_copy(owner ? owner : "", owner ? strlen(owner) : 0);
    mc->kind = shared ? 's' : 'x';
    mc->fair = fair;
    mc->ttl_ms = ttl;
    mc->wait_ms = wait;
    mc->start_ms = loop_now_ms();
    mc->deadline_ms = mc->start_ms + wait;
    mc->quota = auth_holds_limit(req->key_id);
    if (mc->quota) {
        mc->qmembers = alloc_check(calloc((size_t)mc->n, sizeof *mc->qmembers));
        for (int i = 0; i < mc->n; i++)
            mc->qmembers[i] = quota_holds_member(mc->wkeys[i], req->token);
    }
    if (fair && wait > 0) {
        /* Its liveness is this gateway's, in every slot it queues in, so a
         * dead gateway's multi-lock waiter holds no queue up past the
         * liveness TTL, in Redis Cluster mode too. */
        liveness_waiter_id(mc->waiter_id);
        for (int g = 0; g < mc->ngroups; g++) /* a name's slot is its hash's */
            mc->live_slot[g] = liveness_waiter_join(group_name(mc, g));
    }
    liveness_waiter_id(mc->attempt_id);
    attempt(mc);
}

/* ---- extend and release ------------------------------------------------------------ */

/* PATCH and DELETE send one script per group at once and answer when every
 * group has.  Each group is all or nothing; with one group (every mode but
 * cluster, or names in one slot) so is the request.  Across groups, the
 * answer is the first group's (in taking order) that did not go through:
 * its refusal, or 503 when Redis failed there; the problem then lists in
 * `done_names` the names of the groups that went through all the same
 * (extended, or released: not undone). */

/* {-1|-2|-5, i}: the problem for name i; extra (may be NULL) added. */
static void reply_refused(struct gw_request *req, long long verdict, long long i, cJSON *extra) {
    struct multi_call *mc = req->ctx;
    const char *name = i >= 1 && i <= mc->n ? mc->names[i - 1] : "";
    const char *what = extra ? "its slot's names were not changed" : "nothing was done";
    if (verdict == -5)
        reply_problem_with(req, CODE_SESSION_BOUND, extra,
                           "lock '%s' is bound to a session: renew the session instead (%s)", name,
                           what);
    else if (verdict == -1)
        reply_problem_with(req, CODE_NOT_HELD, extra,
                           "this token holds no lock '%s' (never did, or its hold ended: released, "
                           "expired or forced): %s",
                           name, what);
    else
        reply_problem_with(req, CODE_NOT_OWNER, extra,
                           "lock '%s' is held, but not by this token: %s", name, what);
}

/* Quorum mode: a success when `want` masters succeeded, else the
 * commonest refusal of a quorum, else an error. */
static const struct redis_result *pick(const struct redis_result *res, int n, int want,
                                       struct redis_result *slot) {
    int ok = 0, answered = 0;
    const struct redis_result *good = NULL, *refused = NULL;
    for (int i = 0; i < n; i++) {
        long long v = verdict_of(&res[i]);
        if (v == -100) continue;
        answered++;
        if (v == 1) {
            ok++;
            if (!good || elem(res[i].reply, 1) < elem(good->reply, 1)) good = &res[i];
        } else if (!refused) {
            refused = &res[i];
        }
    }
    if (ok >= want) return good;
    if (answered >= redis_quorum() && refused) return refused;
    *slot =
        (struct redis_result){.ok = 0, .reply = NULL, .error = "too few Redis masters answered"};
    return slot;
}

/* Notes group g's verdict (and its refused name, or the Redis error);
 * returns the verdict. */
static long long note_group(struct multi_call *mc, int g, const struct redis_result *res) {
    long long v = verdict_of(res);
    mc->gverdict[g] = v;
    if (v == -100 && !mc->err[0])
        snprintf(mc->err, sizeof mc->err, "%s", res->ok ? "unexpected answer" : res->error);
    if (v != 1 && v != -100) mc->gindex[g] = request_index(mc, g, elem(res->reply, 1));
    return v;
}

/* 1 when every group went through; else answers (see above) and 0. */
static int all_done_or_reply(struct multi_call *mc) {
    int bad = -1;
    for (int g = 0; g < mc->ngroups && bad < 0; g++)
        if (mc->gverdict[g] != 1) bad = g;
    if (bad < 0) return 1;
    cJSON *extra = NULL;
    if (mc->ngroups > 1) {
        extra = cJSON_CreateObject();
        cJSON *done = cJSON_AddArrayToObject(extra, "done_names");
        for (int g = 0; g < mc->ngroups; g++)
            for (int k = mc->gstart[g]; mc->gverdict[g] == 1 && k < mc->gstart[g + 1]; k++)
                cJSON_AddItemToArray(done, cJSON_CreateString(mc->names[mc->order[k]]));
    }
    if (mc->gverdict[bad] == -100)
        reply_problem_with(mc->req, CODE_BACKEND_UNAVAILABLE, extra, "Redis: %s", mc->err);
    else
        reply_refused(mc->req, mc->gverdict[bad], mc->gindex[bad], extra);
    return 0;
}

/* The names' entries in the key's ledger count until ms from now, or
 * (ms < 0) leave it, and then qr's answer goes out. */
static void quota_names(struct multi_call *mc, long long ms, struct quota_reply *qr) {
    char **m = alloc_check(calloc((size_t)mc->n, sizeof *m));
    for (int i = 0; i < mc->n; i++) m[i] = quota_holds_member(mc->wkeys[i], mc->req->token);
    if (ms < 0)
        quota_holds_drop_then(mc->req->key_id, mc->n, (const char *const *)m, quota_reply_done, qr);
    else
        quota_holds_set(mc->req->key_id, ms, mc->n, (const char *const *)m);
    for (int i = 0; i < mc->n; i++) free(m[i]);
    free(m);
}

static void extend_done(void *arg, const struct redis_result *res) {
    struct group_ref *ref = arg;
    struct multi_call *mc = ref->mc;
    if (note_group(mc, ref->g, res) == 1) {
        long long ttl = elem(res->reply, 1);
        if (mc->sum < 0 || ttl < mc->sum) mc->sum = ttl;
        for (int k = mc->gstart[ref->g]; k < mc->gstart[ref->g + 1]; k++)
            mc->granted[mc->order[k]].fence =
                elem(res->reply, 2 + (size_t)(k - mc->gstart[ref->g]));
    }
    if (--mc->pending > 0 || !all_done_or_reply(mc)) return;
    cJSON *o = cJSON_CreateObject();
    long long ttl = mc->sum;
    if (backend->fans_out) ttl -= (loop_now_ms() - mc->attempt_ms) + DRIFT_MS(ttl);
    json_add_int(o, "ttl_ms", ttl < 1 ? 1 : ttl);
    cJSON *locks = cJSON_AddArrayToObject(o, "locks");
    for (int i = 0; i < mc->n; i++) {
        cJSON *l = cJSON_CreateObject();
        cJSON_AddStringToObject(l, "name", mc->names[i]);
        json_add_int(l, "fence", mc->granted[i].fence);
        cJSON_AddItemToArray(locks, l);
    }
    metrics_inc(M_LOCK_EXTENDED, (uint64_t)mc->n);
    reply_json(mc->req, 200, o);
}

static void quorum_extend_done(void *arg, const struct redis_result *res, int n) {
    struct redis_result slot;
    extend_done(arg, pick(res, n, redis_quorum(), &slot));
}

void multi_extend(struct gw_request *req) {
    long long ttl;
    if (token_header_or_reply(req, 1, NULL) || body_parse_or_reply(req) ||
        body_int_or_reply(req, "ttl_ms", 0, 100, guard_max_lease_ms(), &ttl, NULL))
        return;
    struct multi_call *mc = names_or_reply(req);
    if (!mc) return;
    char t[24];
    snprintf(t, sizeof t, "%lld", ttl);
    const char *args[2] = {req->token, t};
    mc->attempt_ms = loop_now_ms();
    mc->sum = -1;
    mc->pending = mc->ngroups;
    if (auth_holds_limit(req->key_id)) /* the entries count at least as long as the leases */
        quota_names(mc, ttl + quota_holds_margin_ms(), NULL);
    for (int g = 0; g < mc->ngroups; g++)
        run_group(mc, g, SCRIPT_MULTI_EXTEND, 0, 2, args, -1, extend_done, quorum_extend_done,
                  &mc->refs[g]);
}

static void release_done(void *arg, const struct redis_result *res) {
    struct group_ref *ref = arg;
    struct multi_call *mc = ref->mc;
    if (note_group(mc, ref->g, res) == 1) mc->sum += elem(res->reply, 1);
    if (--mc->pending > 0 || !all_done_or_reply(mc)) return;
    cJSON *o = cJSON_CreateObject();
    json_add_int(o, "released", mc->sum);
    cJSON *names = cJSON_AddArrayToObject(o, "names");
    for (int i = 0; i < mc->n; i++) cJSON_AddItemToArray(names, cJSON_CreateString(mc->names[i]));
    metrics_inc(M_LOCK_RELEASED, (uint64_t)mc->n);
    /* Every hold ended: their entries go, and then it is answered.  (When
     * some were re-entered and stay, which is not told apart, the entries
     * lapse at their leases.) */
    if (mc->sum == mc->n && auth_holds_limit(mc->req->key_id)) {
        quota_names(mc, -1, quota_reply_new(mc->req, 200, o));
        return;
    }
    reply_json(mc->req, 200, o);
}

/* A release goes to every master; one that released stands for them all. */
static void quorum_release_done(void *arg, const struct redis_result *res, int n) {
    struct redis_result slot;
    release_done(arg, pick(res, n, 1, &slot));
}

void multi_release(struct gw_request *req) {
    if (token_header_or_reply(req, 1, NULL) || body_parse_or_reply(req)) return;
    struct multi_call *mc = names_or_reply(req);
    if (!mc) return;
    const char *args[2] = {req->token, ""};
    mc->sum = 0;
    mc->pending = mc->ngroups;
    for (int g = 0; g < mc->ngroups; g++)
        run_group(mc, g, SCRIPT_MULTI_RELEASE, 0, 2, args, 1, release_done, quorum_release_done,
                  &mc->refs[g]);
}
