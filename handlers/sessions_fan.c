/* sessions_fan.c -- see sessions_fan.h.
 *
 *   PATCH    session_renew.lua moves the session's end and lists its
 *            holds; then session_slot.lua p moves every hold's end.  The
 *            cost: 1 + N keys written, in 1 + (calls) scripts: one call per
 *            FAN_CHUNK holds outside Cluster, one per slot used in Cluster
 *            (bench/RESULTS.md).  A call that
 *            fails makes it 503: the holds there may end at the old time.
 *   DELETE   session_end.lua ends the session's key and lists its holds;
 *            session_slot.lua r releases them, publishing on the release
 *            channel (in Cluster the slot's shard channel) so waiters wake.
 *   GET      session_read.lua, then session_slot.lua c: only holds that
 *            are still held are listed.
 *
 * Quorum mode: every master keeps its own copy of the session and of each
 * hold, and may list different holds (a grant a minority missed).  The
 * lists are joined and each call goes to every master with all of them
 * (a master without a hold finds it not held, harmlessly).  A call counts
 * when a quorum answered; a hold is listed (GET) when a quorum holds it,
 * and is taken off the session only when every master answered and none
 * holds it, so a master that is late never drops a live hold's renewals.
 *
 * Times cross masters as durations, never as clock readings: each master
 * computes an end from its own clock, and the hold's end comes at most one
 * round trip after the session's (later, never sooner). */
#include "handlers/sessions_fan.h"
#include "common/alloc.h"
#include "common/token.h"
#include "handlers/backend.h"
#include "handlers/handlers.h"
#include "handlers/holds.h"
#include "handlers/session_ref.h"
#include "server/cluster.h"
#include "server/redis.h"
#include "server/request.h"

#include <cjson/cJSON.h>
#include <hiredis/hiredis.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SKEY_MAX (GW_PREFIX_MAX + TOKEN_MAX_LEN + 16)

/* Holds per call outside Cluster mode: a script runs alone on its master,
 * so a session of thousands of holds is pushed in calls of this many (all
 * in flight at once), each about a millisecond of Redis's time, rather
 * than one that keeps every other client waiting for the whole. */
#define FAN_CHUNK 100

/* A fan over at least this many holds gives the heap's free pages back
 * when it ends (fan_finish). */
#define FAN_TRIM_HOLDS 1000

struct session_hold {
    char *what;  /* "lock:NAME" or "sem:NAME", as the session lists it */
    char *token; /* the hold's token */
    char *key;   /* its hash, <prefix>lock:{NAME} */
    int slot;    /* the key's hash slot (cluster mode), else its chunk: one call each */
    int held;    /* masters that found it held by the session */
    int gone;    /* no master holds it: taken off the session */
};

struct session_fan {
    struct gw_request *req;        /* answered by finish once all calls answered (or ctx's) */
    void *ctx;                     /* sessions_fan_ctx's caller, for finish_ctx */
    char token[TOKEN_MAX_LEN + 1]; /* the session's token */
    char op;                       /* session_slot.lua's op: p, r or c */
    int n;                         /* holds */
    struct session_hold *h;        /* sorted by slot */
    int pending;                   /* calls not yet answered */
    int failed;                    /* calls Redis did not answer (or WAITs short of replicas) */
    long long acted;               /* holds the scripts acted on */
    char err[160];                 /* the first failure */
    char skey[SKEY_MAX];           /* the session's key, for the clean-up */
    cJSON *body;                   /* the caller's, handed to finish */
    void (*finish)(struct gw_request *, const struct session_fan *, cJSON *);
    void (*finish_ctx)(void *, const struct session_fan *, cJSON *);
};

struct fan_call {
    struct session_fan *f; /* the whole */
    int first, count;      /* its holds: f->h[first .. first+count) */
};

int session_fan_failed(const struct session_fan *f) { return f->failed; }
long long session_fan_acted(const struct session_fan *f) { return f->acted; }
const char *session_fan_error(const struct session_fan *f) { return f->err; }

void session_fan_list(const struct session_fan *f, cJSON *holds) {
    for (int i = 0; i < f->n; i++) {
        if (f->h[i].held < redis_quorum()) continue;
        const char *colon = strchr(f->h[i].what, ':');
        cJSON *o = alloc_check(cJSON_CreateObject());
        cJSON_AddStringToObject(o, "kind",
                                strncmp(f->h[i].what, "sem:", 4) == 0 ? "semaphore" : "lock");
        cJSON_AddStringToObject(o, "name", colon + 1);
        cJSON_AddStringToObject(o, "token", f->h[i].token);
        cJSON_AddItemToArray(holds, o);
    }
}

static int by_slot(const void *a, const void *b) {
    const struct session_hold *x = a, *y = b;
    return (x->slot > y->slot) - (x->slot < y->slot);
}

static void fan_free(struct session_fan *f) {
    for (int i = 0; i < f->n; i++) {
        free(f->h[i].what);
        free(f->h[i].token);
        free(f->h[i].key);
    }
    free(f->h);
    free(f);
}

/* Takes the holds found gone off the session's key (one call, on every
 * master in quorum mode; an end already deleted the key, so none then). */
static void forget_gone(struct session_fan *f) {
    if (f->op == 'r') return;
    int gone = 0;
    for (int i = 0; i < f->n; i++) gone += f->h[i].gone;
    if (!gone) return;
    const char **av = alloc_check(malloc(sizeof *av * (size_t)(2 + 2 * gone)));
    size_t *lens = alloc_check(malloc(sizeof *lens * (size_t)(2 + 2 * gone)));
    int n = 0;
    av[n++] = f->skey;
    av[n++] = "u";
    for (int i = 0; i < f->n; i++) {
        if (!f->h[i].gone) continue;
        av[n++] = f->h[i].key;
        av[n++] = f->h[i].token;
    }
    for (int i = 0; i < n; i++) lens[i] = strlen(av[i]);
    /* best effort: the next PATCH or GET finds them again */
    backend->forget(SCRIPT_SESSION_BIND, 1, n, av, lens, NULL);
    free(av);
    free(lens);
}

/* A fan over thousands of holds (a stream session's renewal: every one
 * of a worker's stream holds, each ttl_ms / 3) has had the session
 * script's list, a copy of it and a hundred holds' command per call in
 * memory at once: about 2 MiB for 5,000 holds, freed in pieces the heap
 * keeps resident between longer-lived blocks.  With 10,000 stream holds
 * that left the gateway 3.3 MiB larger after the first renewal
 * (bench/RESULTS.md, "Stream holds"); malloc_trim gives those pages back
 * (0.1 to 0.4 ms measured with 10,000 stream holds, once per renewal). */
static void fan_finish(struct session_fan *f) {
    int holds = f->n;
    if (f->finish_ctx)
        f->finish_ctx(f->ctx, f, f->body);
    else
        f->finish(f->req, f, f->body);
    forget_gone(f);
    fan_free(f);
    if (holds >= FAN_TRIM_HOLDS) malloc_trim(0);
}

static int verdict_ok(const struct redis_result *res) {
    return res->ok && res->reply->type == REDIS_REPLY_ARRAY && res->reply->elements >= 1 &&
           res->reply->element[0]->type == REDIS_REPLY_INTEGER;
}

/* Every master's answer to one call (n of them; one outside quorum mode):
 * {holds acted on, i, j, ...}, i, j the 1-based indexes of the keys it
 * found not held by the session. */
static void call_done_all(void *arg, const struct redis_result *res, int n) {
    struct fan_call *c = arg;
    struct session_fan *f = c->f;
    int answered = 0;
    long long acted = 0;
    const char *why = NULL;
    char *not_held = alloc_check(calloc((size_t)c->count, 1));
    for (int m = 0; m < n; m++) {
        if (!verdict_ok(&res[m])) {
            if (!why) why = res[m].ok ? "unexpected answer" : res[m].error;
            continue;
        }
        answered++;
        const redisReply *r = res[m].reply;
        if (r->element[0]->integer > acted) acted = r->element[0]->integer;
        memset(not_held, 0, (size_t)c->count);
        for (size_t i = 1; i < r->elements; i++) {
            long long k = r->element[i]->type == REDIS_REPLY_INTEGER ? r->element[i]->integer : 0;
            if (k >= 1 && k <= c->count) not_held[k - 1] = 1;
        }
        for (int k = 0; k < c->count; k++)
            if (!not_held[k]) f->h[c->first + k].held++;
    }
    free(not_held);
    if (answered < redis_quorum()) {
        if (!f->failed++) snprintf(f->err, sizeof f->err, "%s", why ? why : "no answer");
    } else {
        f->acted += acted;
    }
    for (int k = 0; k < c->count; k++)
        if (answered == n && f->h[c->first + k].held == 0) f->h[c->first + k].gone = 1;
    free(c);
    if (--f->pending == 0) fan_finish(f);
}

static void call_done(void *arg, const struct redis_result *res) { call_done_all(arg, res, 1); }

/* --min-replicas-ack: a pushed lease counts once the replicas of its
 * master have it (a failover could otherwise bring back the old end, and
 * another client the lock while the session still lives). */
static void push_acked(void *arg, const struct redis_result *res) {
    struct session_fan *f = arg;
    long long n = res->ok && res->reply->type == REDIS_REPLY_INTEGER ? res->reply->integer : -1;
    if (n < handlers_config()->min_replicas_ack && !f->failed++)
        snprintf(f->err, sizeof f->err, "only %lld replica(s) acknowledged the holds' leases",
                 n < 0 ? 0 : n);
    if (--f->pending == 0) fan_finish(f);
}

/* One session_slot.lua call for f->h[first .. first+count): one slot. */
static void fan_send(struct session_fan *f, int first, int count, const char *arg) {
    size_t n = (size_t)(2 * count + 3);
    const char **av = alloc_check(malloc(sizeof *av * n));
    size_t *lens = alloc_check(malloc(sizeof *lens * n));
    char op[2] = {f->op, 0};
    for (int i = 0; i < count; i++) av[i] = f->h[first + i].key;
    av[count] = op;
    av[count + 1] = f->op == 'r' ? redis_release_channel_for(f->h[first].key) : arg;
    av[count + 2] = f->token;
    for (int i = 0; i < count; i++) av[count + 3 + i] = f->h[first + i].token;
    for (size_t i = 0; i < n; i++) lens[i] = strlen(av[i]);
    struct fan_call *c = alloc_check(malloc(sizeof *c));
    c->f = f;
    c->first = first;
    c->count = count;
    backend->eval(SCRIPT_SESSION_SLOT, count, (int)n, av, lens, call_done, call_done_all, c);
    free(av);
    free(lens);
    int wanted = handlers_config()->min_replicas_ack; /* refused with quorum (config.c) */
    if (wanted && f->op == 'p') {
        char w[16], timeout[16];
        snprintf(w, sizeof w, "%d", wanted);
        snprintf(timeout, sizeof timeout, "%d", handlers_config()->replica_ack_timeout_ms);
        const char *wv[3] = {"WAIT", w, timeout};
        size_t wl[3] = {4, strlen(w), strlen(timeout)};
        f->pending++;
        redis_command_for(f->h[first].key, 3, wv, wl, push_acked, f);
    }
}

static int listed(const struct session_fan *f, const redisReply *what, const redisReply *tok) {
    for (int i = 0; i < f->n; i++)
        if (strcmp(f->h[i].what, what->str) == 0 && strcmp(f->h[i].token, tok->str) == 0) return 1;
    return 0;
}

static void fan_start(struct session_fan *f, const struct redis_result *results, int n,
                      size_t first, char op, long long arg, cJSON *body);

void sessions_fan(struct gw_request *req, const struct redis_result *results, int n, size_t first,
                  char op, long long arg, cJSON *body,
                  void (*finish)(struct gw_request *, const struct session_fan *, cJSON *)) {
    struct session_fan *f = alloc_check(calloc(1, sizeof *f));
    f->req = req;
    f->finish = finish;
    snprintf(f->token, sizeof f->token, "%s", req->token);
    fan_start(f, results, n, first, op, arg, body);
}

void sessions_fan_ctx(const char *token, void *ctx, const struct redis_result *results, int n,
                      size_t first, char op, long long arg, cJSON *body,
                      void (*finish)(void *ctx, const struct session_fan *, cJSON *)) {
    struct session_fan *f = alloc_check(calloc(1, sizeof *f));
    f->ctx = ctx;
    f->finish_ctx = finish;
    snprintf(f->token, sizeof f->token, "%s", token);
    fan_start(f, results, n, first, op, arg, body);
}

static void fan_start(struct session_fan *f, const struct redis_result *results, int n,
                      size_t first, char op, long long arg, cJSON *body) {
    f->op = op;
    f->body = body;
    session_key(f->token, f->skey, sizeof f->skey);
    size_t cap = 0;
    for (int m = 0; m < n; m++)
        if (verdict_ok(&results[m]) && results[m].reply->element[0]->integer == 1 &&
            results[m].reply->elements > first)
            cap += (results[m].reply->elements - first) / 2;
    f->h = alloc_check(calloc(cap ? cap : 1, sizeof *f->h));
    for (int m = 0; m < n; m++) {
        if (!verdict_ok(&results[m]) || results[m].reply->element[0]->integer != 1) continue;
        const redisReply *r = results[m].reply;
        for (size_t i = first; i + 1 < r->elements; i += 2) {
            const redisReply *what = r->element[i], *tok = r->element[i + 1];
            if (what->type != REDIS_REPLY_STRING || tok->type != REDIS_REPLY_STRING) continue;
            const char *colon = strchr(what->str, ':');
            if (!colon || (n > 1 && listed(f, what, tok))) continue;
            struct hold_keys k;
            hold_keys(colon + 1, strncmp(what->str, "sem:", 4) == 0, &k);
            struct session_hold *h = &f->h[f->n++];
            h->what = alloc_copy(what->str, what->len);
            h->token = alloc_copy(tok->str, tok->len);
            h->key = alloc_copy(k.hash, strlen(k.hash));
            h->slot = backend->per_slot ? cluster_key_slot(k.hash, strlen(k.hash))
                                        : (f->n - 1) / FAN_CHUNK;
        }
    }
    if (f->n == 0) {
        fan_finish(f);
        return;
    }
    qsort(f->h, (size_t)f->n, sizeof *f->h, by_slot);
    char a[24];
    snprintf(a, sizeof a, "%lld", arg);
    /* One count for the sending itself: a call that fails at once
     * answers before the next is sent, and must not finish the whole. */
    f->pending = 1;
    for (int i = 0, j; i < f->n; i = j) {
        for (j = i + 1; j < f->n && f->h[j].slot == f->h[i].slot; j++) {}
        f->pending++;
        fan_send(f, i, j - i, a);
    }
    if (--f->pending == 0) fan_finish(f);
}
