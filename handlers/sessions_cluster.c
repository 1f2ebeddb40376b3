/* sessions_cluster.c -- sessions in Redis Cluster mode.
 *
 * A session's key (<prefix>session:{token}) and its holds' hashes
 * (<prefix>lock:{name}) hash to different slots, and a script may touch
 * one slot.  So in cluster mode a session-bound hold carries the session's
 * lease itself: its record's lease end is the session's end and its
 * lock-delay the session's (lua/_holders.lua, "sessions").  Its expiry is
 * then observed in the lock's own slot, by the lock's own lease, exactly
 * as any lease's: the next acquire finds it ended, waiters' retry hints
 * point at that end, and the session's lock-delay applies because the hold
 * ended by expiry.  The session's key still lists its holds.
 *
 *   acquire  1. session_bind.lua r in the session's slot: live, and for
 *               how long (else 404 session_not_found);
 *            2. acquire.lua in the lock's slot, lease = that time left;
 *            3. session_bind.lua b: list the hold in the session.  The
 *               session gone by then (a DELETE raced) gives the hold back.
 *            A crash between 2 and 3 leaves a hold the session does not
 *            list, whose lease ends no later than the session would have
 *            without renewal, and whose client never got an answer.  A
 *            listed hold that does not exist (released, expired) is
 *            skipped by GET, PATCH and DELETE and then taken off the list.
 *   PATCH    session_renew.lua in its slot moves the session's end and
 *            lists its holds; then session_slot.lua p moves every hold's
 *            end, one call per slot that has holds, all in flight at once
 *            (auto-pipelined per master).  The cost: 1 + (slots used)
 *            writes, not one (bench/RESULTS.md).  A master that does not
 *            answer makes it 503: the holds there may end at the old time.
 *   DELETE   session_end.lua ends the session's key and lists its holds;
 *            session_slot.lua r releases them per slot, publishing on the
 *            slot's shard channel (SPUBLISH) so waiters wake.
 *   GET      session_read.lua, then session_slot.lua c per slot: only
 *            holds that are still held are listed.
 *
 * Times cross masters as durations, never as clock readings: each master
 * computes an end from its own clock, and the hold's end comes at most one
 * round trip after the session's (later, never sooner). */
#include "handlers/sessions_cluster.h"
#include "common/alloc.h"
#include "common/token.h"
#include "handlers/backend.h"
#include "handlers/handlers.h"
#include "handlers/session_ref.h"
#include "handlers/holds.h"
#include "handlers/verdict.h"
#include "server/cluster.h"
#include "server/metrics.h"
#include "server/redis.h"
#include "server/request.h"

#include <cjson/cJSON.h>
#include <hiredis/hiredis.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SKEY_MAX (GW_PREFIX_MAX + TOKEN_MAX_LEN + 16)

static long long int_at(const struct redis_result *res, size_t i) {
    const redisReply *r = res->reply;
    return res->ok && r->type == REDIS_REPLY_ARRAY && r->elements > i &&
                   r->element[i]->type == REDIS_REPLY_INTEGER
               ? r->element[i]->integer
               : 0;
}

static int verdict_ok(const struct redis_result *res) {
    return res->ok && res->reply->type == REDIS_REPLY_ARRAY && res->reply->elements >= 1 &&
           res->reply->element[0]->type == REDIS_REPLY_INTEGER;
}

/* ---- acquire ------------------------------------------------------------------- */

/* holds.c's argv for a session-bound acquire: KEYS hash, queue, qdead,
 * session; then ARGV token, ttl, owner, max-hold, lock-delay, ...  */
enum { AV_HASH = 0, AV_SKEY = 3, AV_TOKEN = 4, AV_TTL = 5, AV_DELAY = 8, AV_MAX = 19 };

struct session_acquire {
    struct hold_call *hc; /* the acquisition this attempt is for */
    int nargs;            /* argv's count, the session's key included */
    char *argv[AV_MAX];   /* holds.c's argv, copied (the attempt's are on its stack) */
    long long verdict;    /* acquire.lua's, kept across the bind */
    long long v[5];       /* its values */
    long long outcome;    /* the verdict to answer once a give-back is done */
    char err[128];        /* its error text */
};

static void acquire_free(struct session_acquire *sa) {
    for (int i = 0; i < sa->nargs; i++) free(sa->argv[i]);
    free(sa);
}

static void acquire_finish(struct session_acquire *sa, long long verdict, const char *err) {
    hold_attempt_done(sa->hc, verdict, sa->v, err);
    acquire_free(sa);
}

static void given_back(void *arg, const struct redis_result *res) {
    struct session_acquire *sa = arg;
    (void)res;
    acquire_finish(sa, sa->outcome, sa->outcome == VERDICT_ERROR ? sa->err : NULL);
}

/* Gives the hold back, then answers outcome (so the client, told it holds
 * nothing, finds it so through any gateway). */
static void give_back(struct session_acquire *sa, long long outcome, const char *err) {
    sa->outcome = outcome;
    snprintf(sa->err, sizeof sa->err, "%s", err ? err : "");
    hold_give_back_then(sa->hc->req, given_back, sa);
}

/* --min-replicas-ack: the grant stands once enough replicas of the
 * lock's master have it (as backend_single.c's), else it is given back. */
static void acked(void *arg, const struct redis_result *res) {
    struct session_acquire *sa = arg;
    long long n = res->ok && res->reply->type == REDIS_REPLY_INTEGER ? res->reply->integer : -1;
    if (n >= sa->hc->acks_wanted) {
        acquire_finish(sa, sa->verdict, NULL);
        return;
    }
    give_back(sa, VERDICT_ERROR, "too few replicas acknowledged the lock; it was given back");
}

static void bound(void *arg, const struct redis_result *res) {
    struct session_acquire *sa = arg;
    if (verdict_ok(res) && int_at(res, 0) == 1) {
        if (!sa->hc->acks_wanted) {
            acquire_finish(sa, sa->verdict, NULL);
            return;
        }
        char n[16], timeout[16];
        snprintf(n, sizeof n, "%d", sa->hc->acks_wanted);
        snprintf(timeout, sizeof timeout, "%d", handlers_config()->replica_ack_timeout_ms);
        const char *argv[3] = {"WAIT", n, timeout};
        size_t lens[3] = {4, strlen(n), strlen(timeout)};
        redis_command_for(sa->argv[AV_HASH], 3, argv, lens, acked, sa);
        return;
    }
    /* Not listed in its session: nobody could renew or end it, so it goes. */
    if (verdict_ok(res))
        give_back(sa, VERDICT_SESSION_ENDED, NULL);
    else
        give_back(sa, VERDICT_ERROR, res->ok ? "unexpected answer" : res->error);
}

static void acquired(void *arg, const struct redis_result *res) {
    struct session_acquire *sa = arg;
    const char *err = NULL;
    sa->verdict = verdict_parse_acquire(res, sa->hc->ttl_ms, sa->v, &err);
    if (sa->verdict == VERDICT_BUSY) sa->v[2] = hold_reply_int(res, 2);
    metrics_inc(M_DEAD_WAITERS, (uint64_t)hold_acquire_dropped(res));
    if (sa->verdict != VERDICT_GRANTED && sa->verdict != VERDICT_REENTERED) {
        acquire_finish(sa, sa->verdict, err);
        return;
    }
    const char *argv[4] = {sa->argv[AV_SKEY], "b", sa->argv[AV_HASH], sa->argv[AV_TOKEN]};
    size_t lens[4];
    for (int i = 0; i < 4; i++) lens[i] = strlen(argv[i]);
    redis_eval(SCRIPT_SESSION_BIND, 1, 4, argv, lens, bound, sa);
}

static void session_read(void *arg, const struct redis_result *res) {
    struct session_acquire *sa = arg;
    if (!verdict_ok(res)) {
        acquire_finish(sa, VERDICT_ERROR, res->ok ? "unexpected answer" : res->error);
        return;
    }
    if (int_at(res, 0) != 1) {
        acquire_finish(sa, VERDICT_SESSION_ENDED, NULL);
        return;
    }
    /* The lease is the session's time left, the lock-delay the longer of
     * the request's and the session's (as load() does in one slot). */
    long long left = int_at(res, 1), sdelay = int_at(res, 2);
    char ttl[24], delay[24];
    snprintf(ttl, sizeof ttl, "%lld", left);
    long long own = strtoll(sa->argv[AV_DELAY], NULL, 10);
    snprintf(delay, sizeof delay, "%lld", sdelay > own ? sdelay : own);
    const char *av[AV_MAX];
    size_t lens[AV_MAX];
    int n = 0;
    for (int i = 0; i < sa->nargs; i++) {
        if (i == AV_SKEY) continue;
        av[n] = i == AV_TTL ? ttl : i == AV_DELAY ? delay : sa->argv[i];
        lens[n] = strlen(av[n]);
        n++;
    }
    redis_eval(SCRIPT_ACQUIRE, 3, n, av, lens, acquired, sa);
}

void sessions_cluster_acquire(struct hold_call *hc, int nargs, const char *const *argv,
                              const size_t *lens) {
    struct session_acquire *sa = alloc_check(calloc(1, sizeof *sa));
    sa->hc = hc;
    sa->nargs = nargs < AV_MAX ? nargs : AV_MAX;
    for (int i = 0; i < sa->nargs; i++) sa->argv[i] = alloc_copy(argv[i], lens[i]);
    const char *av[2] = {sa->argv[AV_SKEY], "r"};
    size_t l[2] = {strlen(av[0]), 1};
    redis_eval(SCRIPT_SESSION_BIND, 1, 2, av, l, session_read, sa);
}

/* ---- the fan-out over a session's holds ----------------------------------------- */

struct session_hold {
    char *what;  /* "lock:NAME" or "sem:NAME", as the session lists it */
    char *token; /* the hold's token */
    char *key;   /* its hash, <prefix>lock:{NAME} */
    int slot;    /* the key's hash slot */
    int gone;    /* a slot's script found no hold of the session there */
};

struct session_fan {
    struct gw_request *req; /* answered by finish once all slots answered */
    char op;                /* session_slot.lua's op: p, r or c */
    int n;                  /* holds */
    struct session_hold *h; /* sorted by slot */
    int pending;            /* calls not yet answered */
    int failed;             /* calls Redis did not answer (or WAITs short of replicas) */
    long long acted;        /* holds the scripts acted on */
    char err[160];          /* the first failure */
    char skey[SKEY_MAX];    /* the session's key, for the clean-up */
    cJSON *body;            /* the caller's, handed to finish */
    void (*finish)(struct gw_request *, const struct session_fan *, cJSON *);
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
        if (f->h[i].gone) continue;
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

static void unbound(void *arg, const struct redis_result *res) {
    (void)arg;
    (void)res; /* best effort: the next PATCH or GET finds them again */
}

/* Takes the holds found gone off the session's key (one call; an end
 * already deleted the key, so none then). */
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
    redis_eval(SCRIPT_SESSION_BIND, 1, n, av, lens, unbound, NULL);
    free(av);
    free(lens);
}

static void fan_finish(struct session_fan *f) {
    f->finish(f->req, f, f->body);
    forget_gone(f);
    fan_free(f);
}

static void slot_done(void *arg, const struct redis_result *res) {
    struct fan_call *c = arg;
    struct session_fan *f = c->f;
    if (!verdict_ok(res)) {
        if (!f->failed++)
            snprintf(f->err, sizeof f->err, "%s", res->ok ? "unexpected answer" : res->error);
    } else {
        const redisReply *r = res->reply;
        f->acted += r->element[0]->integer;
        for (size_t i = 1; i < r->elements; i++) {
            long long k = r->element[i]->type == REDIS_REPLY_INTEGER ? r->element[i]->integer : 0;
            if (k >= 1 && k <= c->count) f->h[c->first + k - 1].gone = 1;
        }
    }
    free(c);
    if (--f->pending == 0) fan_finish(f);
}

/* --min-replicas-ack: a pushed lease counts once the replicas of its
 * slot's master have it (a failover could otherwise bring back the old
 * end, and another client the lock while the session still lives). */
static void push_acked(void *arg, const struct redis_result *res) {
    struct session_fan *f = arg;
    long long n = res->ok && res->reply->type == REDIS_REPLY_INTEGER ? res->reply->integer : -1;
    if (n < handlers_config()->min_replicas_ack && !f->failed++)
        snprintf(f->err, sizeof f->err, "only %lld replica(s) acknowledged a slot's leases",
                 n < 0 ? 0 : n);
    if (--f->pending == 0) fan_finish(f);
}

/* One session_slot.lua call for f->h[first .. first+count), one slot. */
static void fan_send(struct session_fan *f, int first, int count, const char *arg) {
    size_t n = (size_t)(2 * count + 3);
    const char **av = alloc_check(malloc(sizeof *av * n));
    size_t *lens = alloc_check(malloc(sizeof *lens * n));
    char op[2] = {f->op, 0};
    for (int i = 0; i < count; i++) av[i] = f->h[first + i].key;
    av[count] = op;
    av[count + 1] = f->op == 'r' ? redis_release_channel_for(f->h[first].key) : arg;
    av[count + 2] = f->req->token;
    for (int i = 0; i < count; i++) av[count + 3 + i] = f->h[first + i].token;
    for (size_t i = 0; i < n; i++) lens[i] = strlen(av[i]);
    struct fan_call *c = alloc_check(malloc(sizeof *c));
    c->f = f;
    c->first = first;
    c->count = count;
    redis_eval(SCRIPT_SESSION_SLOT, count, (int)n, av, lens, slot_done, c);
    free(av);
    free(lens);
    int wanted = handlers_config()->min_replicas_ack;
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

void sessions_cluster_fan(struct gw_request *req, const struct redis_result *res, size_t first,
                          char op, long long arg, cJSON *body,
                          void (*finish)(struct gw_request *, const struct session_fan *,
                                         cJSON *)) {
    const redisReply *r = res->reply;
    struct session_fan *f = alloc_check(calloc(1, sizeof *f));
    f->req = req;
    f->op = op;
    f->body = body;
    f->finish = finish;
    session_key(req->token, f->skey, sizeof f->skey);
    size_t cap = r->elements > first ? (r->elements - first) / 2 : 0;
    f->h = alloc_check(calloc(cap ? cap : 1, sizeof *f->h));
    for (size_t i = first; i + 1 < r->elements; i += 2) {
        const redisReply *what = r->element[i], *tok = r->element[i + 1];
        if (what->type != REDIS_REPLY_STRING || tok->type != REDIS_REPLY_STRING) continue;
        const char *colon = strchr(what->str, ':');
        if (!colon) continue;
        struct hold_keys k;
        hold_keys(colon + 1, strncmp(what->str, "sem:", 4) == 0, &k);
        struct session_hold *h = &f->h[f->n++];
        h->what = alloc_copy(what->str, what->len);
        h->token = alloc_copy(tok->str, tok->len);
        h->key = alloc_copy(k.hash, strlen(k.hash));
        h->slot = cluster_key_slot(k.hash, strlen(k.hash));
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
