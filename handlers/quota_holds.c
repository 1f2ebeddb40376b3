/* quota_holds.c -- see quota_holds.h. */
#include "handlers/quota_holds.h"
#include "common/alloc.h"
#include "handlers/backend.h"
#include "handlers/handlers.h"
#include "server/auth.h"
#include "server/redis.h"
#include "server/reply.h"
#include "server/scripts.h"

#include <hiredis/hiredis.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LEDGER_MAX (GW_PREFIX_MAX + 96)

/* <prefix>quota:{key:<id>}; with a session, its set in the same slot. */
static void ledger_keys(const char *key_id, const char *session, char *ledger, char *set,
                        size_t setlen) {
    snprintf(ledger, LEDGER_MAX, "%squota:{key:%s}", handlers_config()->key_prefix, key_id);
    if (session) snprintf(set, setlen, "%s:s:%s", ledger, session);
}

char *quota_holds_member(const char *message, const char *token) {
    size_t n = strlen(message) + strlen(token) + 2;
    char *m = alloc_check(malloc(n));
    snprintf(m, n, "%s|%s", message, token);
    return m;
}

long long quota_holds_margin_ms(void) { return handlers_config()->redis_timeout_ms + 1000LL; }

static void run(int nkeys, const char *head[], int nhead, int n, const char *const *members,
                void (*done)(void *arg), void *arg);

/* ---- take ------------------------------------------------------------------------ */

struct take_call {
    quota_take_cb cb; /* told the outcome, once */
    void *arg;        /* its argument */
    char *key_id;     /* for the drop after a refused quorum */
    int n;            /* members */
    char **members;   /* their copies */
};

static void take_free(struct take_call *tc) {
    for (int i = 0; i < tc->n; i++) free(tc->members[i]);
    free(tc->members);
    free(tc->key_id);
    free(tc);
}

/* One master's answer: 1 taken (added), 0 over (retry), -1 no answer. */
static int take_read(const struct redis_result *res, long long *added, long long *retry,
                     const char **err) {
    const redisReply *r = res->reply;
    if (!res->ok) {
        *err = res->error;
        return -1;
    }
    if (r->type != REDIS_REPLY_ARRAY || r->elements < 2 ||
        r->element[0]->type != REDIS_REPLY_INTEGER || r->element[1]->type != REDIS_REPLY_INTEGER) {
        *err = r->type == REDIS_REPLY_ERROR ? r->str : "quota.lua: an answer of another shape";
        return -1;
    }
    if (r->element[0]->integer == 1) {
        *added = r->element[1]->integer;
        return 1;
    }
    *retry = r->element[1]->integer;
    return 0;
}

static void take_one(void *arg, const struct redis_result *res) {
    struct take_call *tc = arg;
    long long added = 0, retry = 0;
    const char *err = NULL;
    int v = take_read(res, &added, &retry, &err);
    tc->cb(tc->arg,
           v > 0    ? QUOTA_TAKEN
           : v == 0 ? QUOTA_OVER
                    : QUOTA_ERROR,
           (int)added, retry, err);
    take_free(tc);
}

/* Quorum mode: taken when a majority of masters took it; otherwise what
 * the others took is dropped again. */
static void take_all(void *arg, const struct redis_result *results, int n) {
    struct take_call *tc = arg;
    long long added_max = 0, retry_min = -1;
    int taken = 0, over = 0;
    const char *err = "no master answered";
    for (int i = 0; i < n; i++) {
        long long added = 0, retry = 0;
        int v = take_read(&results[i], &added, &retry, &err);
        if (v > 0) {
            taken++;
            if (added > added_max) added_max = added;
        } else if (v == 0) {
            over++;
            if (retry_min < 0 || retry < retry_min) retry_min = retry;
        }
    }
    if (taken >= redis_quorum()) {
        tc->cb(tc->arg, QUOTA_TAKEN, (int)added_max, 0, NULL);
    } else {
        if (taken > 0 && added_max > 0)
            quota_holds_drop(tc->key_id, tc->n, (const char *const *)tc->members);
        if (over > 0)
            tc->cb(tc->arg, QUOTA_OVER, 0, retry_min < 1 ? 1 : retry_min, NULL);
        else
            tc->cb(tc->arg, QUOTA_ERROR, 0, 0, err);
    }
    take_free(tc);
}

void quota_holds_take(const char *key_id, uint32_t limit, long long ms, const char *session, int n,
                      const char *const *members, quota_take_cb cb, void *arg) {
    char ledger[LEDGER_MAX], set[LEDGER_MAX + 64], lim[16], len[24];
    ledger_keys(key_id, session, ledger, set, sizeof set);
    snprintf(lim, sizeof lim, "%u", limit);
    snprintf(len, sizeof len, "%lld", ms);
    int nkeys = session ? 2 : 1, nargs = nkeys + 4 + n;
    const char **argv = alloc_check(malloc((size_t)nargs * sizeof *argv));
    size_t *lens = alloc_check(malloc((size_t)nargs * sizeof *lens));
    int j = 0;
    argv[j++] = ledger;
    if (session) argv[j++] = set;
    argv[j++] = "take", argv[j++] = lim, argv[j++] = len, argv[j++] = session ? session : "";
    struct take_call *tc = alloc_check(calloc(1, sizeof *tc));
    tc->cb = cb, tc->arg = arg, tc->n = n, tc->key_id = alloc_check(strdup(key_id));
    tc->members = alloc_check(calloc((size_t)n, sizeof *tc->members));
    for (int i = 0; i < n; i++) {
        tc->members[i] = alloc_check(strdup(members[i]));
        argv[j++] = members[i];
    }
    for (int i = 0; i < nargs; i++) lens[i] = strlen(argv[i]);
    backend->eval(SCRIPT_QUOTA, nkeys, nargs, argv, lens, take_one, take_all, tc);
    free(argv);
    free(lens);
    if (session) { /* the session's renewal and end find this key's ledger */
        char index[LEDGER_MAX + 64];
        snprintf(index, sizeof index, "%squota:{s:%s}", handlers_config()->key_prefix, session);
        const char *head[] = {index, "index", key_id, len};
        run(1, head, 4, 0, NULL, NULL, NULL);
    }
}

/* ---- the others ------------------------------------------------------------------ */

struct then_call {
    void (*done)(void *arg); /* told once Redis answered */
    void *arg;
};

static void then_one(void *arg, const struct redis_result *res) {
    struct then_call *tc = arg;
    tc->done(tc->arg);
    free(tc);
}

static void then_all(void *arg, const struct redis_result *results, int n) { then_one(arg, NULL); }

/* quota.lua with head (keys and leading arguments) and members; done(arg)
 * after the answer, or nobody waits when done is NULL. */
static void run(int nkeys, const char *head[], int nhead, int n, const char *const *members,
                void (*done)(void *arg), void *arg) {
    int nargs = nhead + n;
    const char **argv = alloc_check(malloc((size_t)nargs * sizeof *argv));
    size_t *lens = alloc_check(malloc((size_t)nargs * sizeof *lens));
    for (int i = 0; i < nargs; i++) {
        argv[i] = i < nhead ? head[i] : members[i - nhead];
        lens[i] = strlen(argv[i]);
    }
    if (done) {
        struct then_call *tc = alloc_check(malloc(sizeof *tc));
        tc->done = done, tc->arg = arg;
        backend->eval(SCRIPT_QUOTA, nkeys, nargs, argv, lens, then_one, then_all, tc);
    } else {
        backend->forget(SCRIPT_QUOTA, nkeys, nargs, argv, lens, NULL);
    }
    free(argv);
    free(lens);
}

void quota_holds_set(const char *key_id, long long ms, int n, const char *const *members) {
    char ledger[LEDGER_MAX], len[24];
    ledger_keys(key_id, NULL, ledger, NULL, 0);
    snprintf(len, sizeof len, "%lld", ms);
    const char *head[] = {ledger, "set", len};
    run(1, head, 3, n, members, NULL, NULL);
}

void quota_holds_drop_then(const char *key_id, int n, const char *const *members,
                           void (*done)(void *arg), void *arg) {
    char ledger[LEDGER_MAX];
    ledger_keys(key_id, NULL, ledger, NULL, 0);
    const char *head[] = {ledger, "drop"};
    run(1, head, 2, n, members, done, arg);
}

void quota_holds_drop(const char *key_id, int n, const char *const *members) {
    quota_holds_drop_then(key_id, n, members, NULL, NULL);
}

/* A renewal or end on its way through the session's keys. */
struct session_call {
    char *session;           /* its token */
    long long ms;            /* the new lease, < 0: ended */
    int pending;             /* ledgers not yet answered, + 1 while listing */
    void (*done)(void *arg); /* told after the last (may be NULL) */
    void *arg;
};

static void session_step(void *arg) {
    struct session_call *sc = arg;
    if (--sc->pending > 0) return;
    if (sc->done) sc->done(sc->arg);
    free(sc->session);
    free(sc);
}

/* One master's list of key ids: each one's ledger follows the session. */
static void session_keys(struct session_call *sc, const struct redis_result *res) {
    const redisReply *r = res && res->ok ? res->reply : NULL;
    if (!r || r->type != REDIS_REPLY_ARRAY) return;
    for (size_t i = 0; i < r->elements; i++) {
        const redisReply *k = r->element[i];
        if (k->type != REDIS_REPLY_STRING || !auth_holds_limit(k->str)) continue;
        char ledger[LEDGER_MAX], set[LEDGER_MAX + 64], len[24];
        ledger_keys(k->str, sc->session, ledger, set, sizeof set);
        snprintf(len, sizeof len, "%lld", sc->ms);
        const char *head[] = {ledger, set, sc->ms < 0 ? "end" : "renew", len};
        sc->pending++;
        run(2, head, sc->ms < 0 ? 3 : 4, 0, NULL, session_step, sc);
    }
}

static void keys_one(void *arg, const struct redis_result *res) {
    session_keys(arg, res);
    session_step(arg);
}

/* Quorum mode: every master's index (they may differ: a take reaches a
 * majority); a ledger met twice is renewed or ended twice, harmlessly. */
static void keys_all(void *arg, const struct redis_result *results, int n) {
    for (int i = 0; i < n; i++) session_keys(arg, &results[i]);
    session_step(arg);
}

void quota_holds_session_then(const char *session, long long ms, void (*done)(void *arg),
                              void *arg) {
    char index[LEDGER_MAX + 64], len[24];
    snprintf(index, sizeof index, "%squota:{s:%s}", handlers_config()->key_prefix, session);
    snprintf(len, sizeof len, "%lld", ms < 0 ? -1 : ms);
    struct session_call *sc = alloc_check(calloc(1, sizeof *sc));
    *sc = (struct session_call){
        .session = alloc_check(strdup(session)), .ms = ms, .pending = 1, .done = done, .arg = arg};
    const char *argv[] = {index, "keys", len};
    size_t lens[3] = {strlen(index), 4, strlen(len)};
    backend->eval(SCRIPT_QUOTA, 1, 3, argv, lens, keys_one, keys_all, sc);
}

/* ---- answers after the drops ------------------------------------------------------ */

struct quota_reply {
    struct gw_request *req; /* the request to answer */
    int status;             /* its status */
    struct cJSON *body;     /* its body, sent with it */
    int pending;            /* drops not yet answered */
};

struct quota_reply *quota_reply_new(struct gw_request *req, int status, struct cJSON *body) {
    struct quota_reply *qr = alloc_check(malloc(sizeof *qr));
    *qr = (struct quota_reply){.req = req, .status = status, .body = body, .pending = 1};
    return qr;
}

void quota_reply_expect(struct quota_reply *qr) { qr->pending++; }

void quota_reply_done(void *arg) {
    struct quota_reply *qr = arg;
    if (--qr->pending > 0) return;
    reply_json(qr->req, qr->status, qr->body);
    free(qr);
}
