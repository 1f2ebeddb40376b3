/* stream_session.c -- see stream_session.h.
 *
 * Each worker keeps its own sessions (thread-local: a stream hold lives on
 * its worker's thread), so nothing here is shared or locked.  A session's
 * renewal timer is a waiter (waiters.h) parked on a key nobody publishes:
 * its timer wakes it, and the gateway's stop (waiters_give_up_all) ends
 * it, which releases what it still carries at once. */
#include "handlers/stream_session.h"
#include "common/alloc.h"
#include "common/token.h"
#include "handlers/backend.h"
#include "handlers/session_ref.h"
#include "handlers/sessions_fan.h"
#include "server/log.h"
#include "server/loop.h"
#include "server/redis.h"
#include "server/waiters.h"

#include <hiredis/hiredis.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum ss_state { SS_MAKING, SS_LIVE, SS_ENDED };

struct stream_session {
    struct waiter timer;           /* its renewal timer (first) */
    char token[TOKEN_NEW_LEN + 1]; /* the session's token */
    long long ttl_ms;              /* its ttl, as its streams asked */
    enum ss_state state;           /* made, live, or ended (being let go) */
    struct ss_member *members;     /* the stream holds it carries */
    int nmembers;                  /* how many */
    int calls;                     /* Redis calls under way (it is freed after) */
    int push_owed;                 /* a renewal or its push failed: the next one
                                      lists the holds and pushes (renew_answered) */
    int64_t end_ms;                /* monotonic: its end as of the last renewal
                                      Redis took (sent before then) */
    int64_t sent_ms;               /* when the call under way was sent */
    struct stream_session *next;   /* the worker's sessions */
};

/* Nobody publishes this key: only the timer wakes a session's waiter. */
static const char TIMER_KEY[] = "~stream-session";

static _Thread_local struct stream_session *sessions;

/* ---- Redis -------------------------------------------------------------------- */

static long long verdict_of(const struct redis_result *res) {
    const redisReply *r = res->ok ? res->reply : NULL;
    if (!r || r->type != REDIS_REPLY_ARRAY || r->elements < 1 ||
        r->element[0]->type != REDIS_REPLY_INTEGER)
        return -100;
    return r->element[0]->integer;
}

/* Quorum mode: 1 when a quorum said 1, -1 when a quorum answered and fewer
 * than that said 1, else -100 (not enough answers). */
static long long quorum_verdict(const struct redis_result *res, int n) {
    int ok = 0, answered = 0;
    for (int i = 0; i < n; i++) {
        long long v = verdict_of(&res[i]);
        if (v == -100) continue;
        answered++;
        if (v == 1) ok++;
    }
    if (ok >= redis_quorum()) return 1;
    return answered >= redis_quorum() ? -1 : -100;
}

typedef void (*ss_done)(struct stream_session *ss, long long verdict);

/* Or, for the renewal, every master's answer (n: one outside quorum mode):
 * its list of holds is what the fan-out pushes (sessions_fan.h). */
typedef void (*ss_answered)(struct stream_session *ss, const struct redis_result *res, int n);

struct ss_call {
    struct stream_session *ss;
    ss_done done;
    ss_answered answered; /* instead of done when set */
};

static void maybe_free(struct stream_session *ss);

static void call_one(void *arg, const struct redis_result *res) {
    struct ss_call *c = arg;
    c->ss->calls--;
    if (c->answered)
        c->answered(c->ss, res, 1);
    else
        c->done(c->ss, verdict_of(res));
    maybe_free(c->ss);
    free(c);
}

static void call_all(void *arg, const struct redis_result *res, int n) {
    struct ss_call *c = arg;
    c->ss->calls--;
    if (c->answered)
        c->answered(c->ss, res, n);
    else
        c->done(c->ss, quorum_verdict(res, n));
    maybe_free(c->ss);
    free(c);
}

/* script on ss's key with up to 4 arguments; done gets the verdict. */
static void ss_run_answered(struct stream_session *ss, enum script_id id, int nargs,
                            const char **args, ss_done done, ss_answered answered) {
    char key[GW_PREFIX_MAX + TOKEN_MAX_LEN + 16];
    session_key(ss->token, key, sizeof key);
    const char *argv[5] = {key};
    size_t lens[5] = {strlen(key)};
    for (int i = 0; i < nargs; i++) {
        argv[i + 1] = args[i];
        lens[i + 1] = strlen(args[i]);
    }
    struct ss_call *c = alloc_check(calloc(1, sizeof *c));
    c->ss = ss;
    c->done = done;
    c->answered = answered;
    ss->calls++;
    ss->sent_ms = loop_now_ms();
    backend->eval(id, 1, nargs + 1, argv, lens, call_one, call_all, c);
}

static void ss_run(struct stream_session *ss, enum script_id id, int nargs, const char **args,
                   ss_done done) {
    ss_run_answered(ss, id, nargs, args, done, NULL);
}

/* ---- the session's life ------------------------------------------------------- */

static void unlink_session(struct stream_session *ss) {
    for (struct stream_session **p = &sessions; *p; p = &(*p)->next)
        if (*p == ss) {
            *p = ss->next;
            return;
        }
}

static void maybe_free(struct stream_session *ss) {
    if (ss->state != SS_ENDED || ss->calls || ss->members) return;
    waiters_unpark(&ss->timer);
    free(ss);
}

static void ended(struct stream_session *ss, long long verdict) {}

/* Ends ss in Redis (its holds released, their waiters woken), whatever it
 * still carries; members are told nothing (the caller tells them). */
static void end_session(struct stream_session *ss) {
    if (ss->state == SS_ENDED) return;
    int made = ss->state == SS_LIVE;
    ss->state = SS_ENDED;
    unlink_session(ss);
    waiters_unpark(&ss->timer);
    if (made) {
        /* session_end.lua's one argument: the caller's key id, '' (the
         * gateway's own session is anyone's). */
        const char *args[1] = {""};
        ss_run(ss, SCRIPT_SESSION_END, 1, args, ended);
    }
}

/* Every member is told that its session is gone, and taken out. */
static void lose_members(struct stream_session *ss, const char *reason) {
    while (ss->members) {
        struct ss_member *m = ss->members;
        ss->members = m->next;
        if (ss->members) ss->members->prev = NULL;
        ss->nmembers--;
        m->ss = NULL;
        m->prev = m->next = NULL;
        m->lost(m, reason);
    }
}

static void park_timer(struct stream_session *ss, int64_t wake_ms) {
    ss->timer.seen_seq = waiters_release_seq();
    waiters_park(&ss->timer, wake_ms);
}

/* Renewed every third of the ttl; after a failure, again soon (a tenth of
 * the ttl, at most a second) until the end passes. */
static int64_t renew_interval(const struct stream_session *ss) { return ss->ttl_ms / 3; }
static int64_t retry_interval(const struct stream_session *ss) {
    return ss->ttl_ms / 10 < 1000 ? ss->ttl_ms / 10 : 1000;
}

static void renewed(struct stream_session *ss, long long verdict) {
    if (ss->state != SS_LIVE) return;
    int64_t now = loop_now_ms();
    if (verdict == 1) {
        ss->end_ms = ss->sent_ms + ss->ttl_ms;
        park_timer(ss, now + renew_interval(ss));
        return;
    }
    if (verdict == -100) ss->push_owed = 1;
    if (verdict == -100 && now + retry_interval(ss) < ss->end_ms) {
        log_warn("streams: renewing the session of %lld ms failed; trying again", ss->ttl_ms);
        park_timer(ss, now + retry_interval(ss));
        return;
    }
    const char *reason = verdict == -100
                             ? "renewal_failed: no renewal reached Redis before the lease ended"
                             : "session_lost: Redis no longer has the hold's session (it lost its "
                               "data, or a renewal came after the lease ended)";
    log_warn("streams: the session of %lld ms is lost (%s)", ss->ttl_ms, reason);
    end_session(ss);
    lose_members(ss, reason);
}

/* The holds have the new end (or some call failed: they may end at the
 * old one, so it counts as a renewal that did not reach Redis). */
static void pushed(void *ctx, const struct session_fan *f, struct cJSON *body) {
    struct stream_session *ss = ctx;
    ss->calls--;
    renewed(ss, session_fan_failed(f) ? -100 : 1);
    maybe_free(ss);
}

/* The number of holds session_renew.lua listed in answer r. */
static long long listed(const struct redis_result *r) {
    const redisReply *a = r->ok ? r->reply : NULL;
    if (!a || a->type != REDIS_REPLY_ARRAY || a->elements < 3 ||
        a->element[2]->type != REDIS_REPLY_INTEGER)
        return 0;
    return a->element[2]->integer;
}

/* session_renew.lua moved the session's end.  Outside Redis Cluster its
 * holds are live (lua/_holders.lua, "sessions"): that one write renewed
 * them all, and it lists them only when their hashes' horizon is due (or
 * released ones piled up in its list, or a push is owed: on_timer).  In Redis Cluster each hold
 * carries the session's lease in its own hash and every renewal lists
 * them.  Listed holds are pushed (session_slot.lua p, one call per slot or
 * hundred holds, sessions_fan.c).  The renewal counts from when
 * session_renew.lua was sent: the holds' ends are set later, never sooner. */
static void renew_answered(struct stream_session *ss, const struct redis_result *res, int n) {
    long long verdict = n > 1 ? quorum_verdict(res, n) : verdict_of(res);
    if (verdict != 1 || ss->state != SS_LIVE) {
        renewed(ss, verdict);
        return;
    }
    /* Owed again when a master did not answer (quorum mode): it may have
     * moved its horizon and listed holds that nobody pushes. */
    long long holds = 0;
    ss->push_owed = 0;
    for (int i = 0; i < n; i++) {
        holds += listed(&res[i]);
        if (!res[i].ok) ss->push_owed = 1;
    }
    if (holds == 0) {
        renewed(ss, 1);
        return;
    }
    ss->calls++; /* the fan-out, until pushed */
    sessions_fan_ctx(ss->token, ss, res, n, 3, 'p', ss->ttl_ms, NULL, pushed);
}

static void on_timer(struct waiter *w) {
    struct stream_session *ss = (struct stream_session *)w;
    if (ss->state != SS_LIVE) return;
    if (ss->calls) { /* a renewal is under way: it parks the timer */
        return;
    }
    /* session_renew.lua: its ttl, anyone's session (''), quiet, and how
     * many holds it carries here.  Not quiet while a push is owed: the
     * renewal that failed (or whose push did) may have moved the session's
     * horizon (field h) already, so no quiet renewal would list the holds
     * again for half an hour, and their hashes would keep the expiry they
     * had, which may come before that. */
    char carried[24];
    snprintf(carried, sizeof carried, "%d", ss->nmembers);
    const char *args[4] = {"0", "", ss->push_owed ? "" : "q", carried};
    ss_run_answered(ss, SCRIPT_SESSION_RENEW, 4, args, NULL, renew_answered);
}

/* The gateway stops: the session ends now, its holds released. */
static void on_timer_give_up(struct waiter *w, int client_gone) {
    struct stream_session *ss = (struct stream_session *)w;
    end_session(ss);
    lose_members(ss, "shutting_down: the gateway is stopping; the hold was released");
    maybe_free(ss);
}

static void created(struct stream_session *ss, long long verdict) {
    if (ss->state != SS_MAKING) return;
    if (verdict != 1) {
        end_session(ss);
        while (ss->members) {
            struct ss_member *m = ss->members;
            ss->members = m->next;
            ss->nmembers--;
            m->ss = NULL;
            m->prev = m->next = NULL;
            m->ready(m, NULL,
                     verdict == -100 ? "Redis did not answer" : "the session could not be made");
        }
        return;
    }
    ss->state = SS_LIVE;
    ss->end_ms = ss->sent_ms + ss->ttl_ms;
    park_timer(ss, loop_now_ms() + renew_interval(ss));
    /* ready may take a member out (its client left), and the last one out
     * ends the session: walk a copy. */
    int n = 0;
    for (struct ss_member *m = ss->members; m; m = m->next) n++;
    struct ss_member **all = alloc_check(calloc((size_t)n + 1, sizeof *all));
    n = 0;
    for (struct ss_member *m = ss->members; m; m = m->next) all[n++] = m;
    ss->calls++; /* kept while the members are told */
    for (int i = 0; i < n; i++) all[i]->ready(all[i], ss->token, NULL);
    ss->calls--;
    free(all);
    if (!ss->members) end_session(ss);
}

static struct stream_session *session_new(long long ttl_ms) {
    struct stream_session *ss = alloc_check(calloc(1, sizeof *ss));
    token_new(ss->token);
    ss->ttl_ms = ttl_ms;
    ss->timer.key = TIMER_KEY;
    ss->timer.watch = 1;
    ss->timer.fd = -1;
    ss->timer.retry = on_timer;
    ss->timer.give_up = on_timer_give_up;
    ss->next = sessions;
    sessions = ss;
    char ttl[24];
    snprintf(ttl, sizeof ttl, "%lld", ttl_ms);
    const char *args[4] = {ttl, "0", "lockgate-streams", ""};
    ss_run(ss, SCRIPT_SESSION_CREATE, 4, args, created);
    return ss;
}

/* ---- members ------------------------------------------------------------------ */

void stream_session_join(struct ss_member *m, long long ttl_ms) {
    struct stream_session *ss = sessions;
    while (ss && ss->ttl_ms != ttl_ms) ss = ss->next;
    if (!ss) ss = session_new(ttl_ms);
    m->ss = ss;
    m->prev = NULL;
    m->next = ss->members;
    if (m->next) m->next->prev = m;
    ss->members = m;
    ss->nmembers++;
    if (ss->state == SS_LIVE) m->ready(m, ss->token, NULL);
}

void stream_session_leave(struct ss_member *m) {
    struct stream_session *ss = m->ss;
    if (!ss) return;
    if (m->prev)
        m->prev->next = m->next;
    else
        ss->members = m->next;
    if (m->next) m->next->prev = m->prev;
    ss->nmembers--;
    m->ss = NULL;
    m->prev = m->next = NULL;
    if (!ss->members && ss->state == SS_LIVE) end_session(ss);
    maybe_free(ss);
}
