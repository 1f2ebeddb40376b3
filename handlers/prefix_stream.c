/* prefix_stream.c -- see prefix_stream.h. */
#include "handlers/prefix_stream.h"
#include "common/alloc.h"
#include "common/names.h"
#include "handlers/access.h"
#include "handlers/backend.h"
#include "handlers/handlers.h"
#include "handlers/holds.h"
#include "handlers/listing.h"
#include "handlers/streams.h"
#include "server/http.h"
#include "server/loop.h"
#include "server/redis.h"
#include "server/reply.h"
#include "server/waiters.h"

#include <cjson/cJSON.h>
#include <hiredis/hiredis.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Events a feed keeps for resumption, and how long it stays subscribed
 * after its last stream ended (a client coming back finds its place). */
#define PREFIX_RING      1024
#define PREFIX_LINGER_MS 60000
/* The owner looks at its feed this often at least (the linger's end). */
#define FEED_TICK_MS 2000
/* Names held a feed watches for the end of their lease (beyond: found by
 * the next script on the name). */
#define EXPIRY_MAX 4096
#define ID_MAX     48
#define PAT_MAX    (2 * (GW_PREFIX_MAX + NAME_MAX_LEN) + 24)
/* A pattern Redis refused (NOPERM) is not asked for again before this:
 * streams over it meanwhile answer 503 at once.  How many such refusals
 * are remembered (the oldest forgotten first). */
#define REFUSED_MS  10000
#define REFUSED_MAX 16
/* Feeds a gateway keeps at most: each holds a PSUBSCRIBE that Redis
 * matches every PUBLISH against, a ring of PREFIX_RING events and an
 * expiry table.  A stream over one more prefix answers 503
 * too_many_prefixes; the longest-lingering feed nobody streams is then
 * ended at its owner's next tick (FEED_TICK_MS), so the client's retry
 * finds room.  From half of them on, a feed lingers only
 * PREFIX_LINGER_BUSY_MS after its last stream. */
#define FEED_MAX              64
#define PREFIX_LINGER_BUSY_MS 5000

/* One event as Redis published it: the name, and the payload (id, change,
 * state fields, joined by NUL); name NULL: a gap (the subscription was
 * made again: what came between is lost). */
struct event {
    char *name;
    char *payload;
    size_t len;
};

/* A name a feed saw held, and when its lease ends at the latest. */
struct expiry {
    char name[NAME_MAX_LEN + 1];
    int64_t end_ms;
};

struct pstream;
struct feed;

/* One worker's streams over a feed.  Its task is posted to the worker's
 * loop when the feed has news (once until it runs). */
struct tap {
    struct loop_task task;   /* first */
    struct tap *next;        /* the feed's taps (mu) */
    struct feed *f;          /* its feed */
    struct loop *loop;       /* its worker's */
    struct pstream *streams; /* its streams (its worker only) */
    int posted;              /* task posted, not yet run (mu) */
    int running;             /* its task runs (mu) */
    int dead;                /* left while posted or running: freed by the task (mu) */
};

/* A gateway's subscription to one prefix's changes: one PSUBSCRIBE, made
 * by the worker that opened its first stream (its owner), whose events
 * every worker's streams over that prefix read.  Fields marked mu are
 * shared (under mu); the others are the owner's or never change. */
struct feed {
    struct waiter timer; /* the owner's: expiries, the linger's end (first) */
    struct feed *next;   /* every feed of the gateway (mu) */
    int semaphore;       /* sem: names, else lock: */
    char prefix[NAME_MAX_LEN + 1];
    char pattern[PAT_MAX];          /* "<key prefix>chg:<kind>:<prefix>*", escaped */
    size_t chan_skip;               /* bytes before the name in a channel */
    struct event ring[PREFIX_RING]; /* the last events (mu) */
    unsigned long long seq;         /* events received (mu) */
    int confirmed;                  /* times the subscription was confirmed (mu) */
    struct tap *taps;               /* workers with streams (mu) */
    int64_t linger_until;           /* no tap since: unsubscribed then (mu) */
    struct expiry *exp;             /* names seen held (owner) */
    int nexp;                       /* (owner) */
    int calls;                      /* inspect calls under way (owner) */
    int dead;                       /* unsubscribed: freed when calls is 0 (owner) */
    int refused;                    /* Redis refused the pattern: off feeds, streams end (mu) */
};

/* A pattern Redis refused, and until when streams over it answer 503. */
struct refusal {
    int semaphore;
    char prefix[NAME_MAX_LEN + 1];
    char pattern[PAT_MAX];
    int64_t until;
};

/* One client's stream. */
struct pstream {
    struct waiter w;        /* heartbeats, the client's hang-up (first) */
    struct gw_request *req; /* the stream's request */
    struct feed *f;         /* its feed */
    struct tap *tap;        /* its worker's tap (NULL once left) */
    struct pstream *prev, *next;
    char resume[ID_MAX];    /* Last-Event-ID ("": none), until started */
    char last[ID_MAX];      /* the last id sent */
    unsigned long long pos; /* the next event it reads (a feed seq) */
    int started;            /* opened and following the feed */
    int64_t confirm_by;     /* not started by then: 503 */
    int listing;            /* a current-state listing under way */
    int orphan;             /* the request was freed: the listing's answer frees it */
    int ended;              /* the request is completed */
};

/* Recursive: ending a stream under it may free its request, whose ctx_free
 * takes it again. */
static pthread_mutex_t mu;
static pthread_once_t mu_once = PTHREAD_ONCE_INIT;
static struct feed *feeds;                   /* mu */
static int nfeeds;                           /* on the feeds list (mu) */
static struct refusal refusals[REFUSED_MAX]; /* mu */
static int refusal_next;                     /* the slot written next (mu) */

static void mu_init(void) {
    pthread_mutexattr_t a;
    pthread_mutexattr_init(&a);
    pthread_mutexattr_settype(&a, PTHREAD_MUTEX_RECURSIVE);
    pthread_mutex_init(&mu, &a);
    pthread_mutexattr_destroy(&a);
}
static const char FEED_KEY[] = "~prefix-feed";
static const char STREAM_KEY[] = "~prefix-stream";

static void stream_end(struct pstream *ps);
static void feed_arm(struct feed *f);

/* ---- events ------------------------------------------------------------------------ */

/* payload's NUL-separated fields into out (up to max); their count. */
static int fields(const char *p, size_t len, const char **out, size_t *lens, int max) {
    int n = 0;
    size_t start = 0;
    for (size_t i = 0; i <= len && n < max; i++)
        if (i == len || p[i] == '\0') {
            out[n] = p + start;
            lens[n++] = i - start;
            start = i + 1;
        }
    return n;
}

static long long num(const char *s, size_t len) {
    char b[32];
    if (len >= sizeof b) len = sizeof b - 1;
    memcpy(b, s, len);
    b[len] = '\0';
    return strtoll(b, NULL, 10);
}

/* The payload (id, change, u, holders, count, fence, ttl_ms, kind, limit,
 * index, owner, key_id, the earliest lease's ms left) as GET's body with
 * the change; id copied out.
 * NULL when it is not such a payload. */
static cJSON *event_json(const struct event *e, int semaphore, char id[ID_MAX]) {
    const char *f[12];
    size_t l[12];
    if (fields(e->payload, e->len, f, l, 12) < 12 || l[0] >= ID_MAX) return NULL;
    memcpy(id, f[0], l[0]);
    id[l[0]] = '\0';
    long long alive = num(f[3], l[3]);
    /* inspect.lua's shape, as hold_state_json reads it. */
    redisReply el[10], *ptr[10];
    memset(el, 0, sizeof el);
    long long ints[10] = {alive > 0 ? 1 : -1, alive,           num(f[4], l[4]),
                          num(f[5], l[5]),    num(f[6], l[6]), 0,
                          num(f[7], l[7]),    num(f[8], l[8]), 0,
                          num(f[9], l[9])};
    char owner[NAME_MAX_LEN + 1], key_id[NAME_MAX_LEN + 1];
    snprintf(owner, sizeof owner, "%.*s", (int)l[10], f[10]);
    snprintf(key_id, sizeof key_id, "%.*s", (int)l[11], f[11]);
    for (int i = 0; i < 10; i++) {
        ptr[i] = &el[i];
        el[i].type = REDIS_REPLY_INTEGER;
        el[i].integer = ints[i];
    }
    el[5] = (redisReply){.type = REDIS_REPLY_STRING, .str = owner, .len = strlen(owner)};
    el[8] = (redisReply){.type = REDIS_REPLY_STRING, .str = key_id, .len = strlen(key_id)};
    redisReply arr = {.type = REDIS_REPLY_ARRAY, .elements = alive > 0 ? 10 : 1, .element = ptr};
    struct redis_result res = {.ok = 1, .reply = &arr, .error = NULL};
    cJSON *o = hold_state_json(e->name, semaphore, &res);
    char change[16];
    snprintf(change, sizeof change, "%.*s", (int)(l[1] < 15 ? l[1] : 15), f[1]);
    cJSON_AddStringToObject(o, "change", change);
    return o;
}

static void write_event(struct gw_request *req, const char *id, const char *name, cJSON *data) {
    char *json = alloc_check(cJSON_PrintUnformatted(data));
    cJSON_Delete(data);
    http_stream_event(req, id, name, json);
    free(json);
}

/* Sends e to ps when its key may read the name. */
static void send_event(struct pstream *ps, const struct event *e) {
    int sem = ps->f->semaphore;
    if (!access_may(ps->req, sem ? AUTH_SEMAPHORES : AUTH_LOCKS, e->name, AUTH_READ)) return;
    char id[ID_MAX];
    cJSON *o = event_json(e, sem, id);
    if (o) write_event(ps->req, id, "state", o);
}

/* ---- the current state after a gap: the listing's pages ---------------------------- */

struct listing_call {
    struct pstream *ps;
    char pattern[PAT_MAX];
    int master; /* Redis Cluster mode: the master being listed (each in turn) */
};

/* list.lua's entry {name, kind, limit, queued, 7 a holder: owner, key_id,
 * fence, count, ttl_ms, ...} as GET's body (hold_state_json's fields). */
static cJSON *listed_json(const redisReply *e, int semaphore) {
    static const char *const modes[] = {"exclusive", "exclusive", "shared", "permit"};
    long long kind = redis_reply_int(e, 1, 0), holders = 0, fence = 0, ttl = 0, count = 0, low = -1;
    const char *owner = "", *key_id = "";
    for (size_t i = 4; i + 7 <= e->elements; i += 7) {
        holders++;
        long long hf = redis_reply_int(e, i + 2, 0);
        if (hf > fence) fence = hf;
        if (redis_reply_int(e, i + 4, 0) > ttl) ttl = redis_reply_int(e, i + 4, 0);
        if (low < 0 || hf < low) {
            low = hf;
            count = redis_reply_int(e, i + 3, 0);
            owner = redis_reply_str(e, i);
            key_id = redis_reply_str(e, i + 1);
        }
    }
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "name", redis_reply_str(e, 0));
    if (semaphore) {
        json_add_int(o, "limit", redis_reply_int(e, 2, 0));
        json_add_int(o, "holders", holders);
        json_add_int(o, "ttl_ms", ttl);
    } else {
        cJSON_AddStringToObject(o, "mode", modes[kind >= 1 && kind <= 3 ? kind : 1]);
        json_add_int(o, "holders", holders);
        json_add_int(o, "count", count);
        json_add_int(o, "fence", fence);
        json_add_int(o, "ttl_ms", ttl);
    }
    if (*owner) cJSON_AddStringToObject(o, "owner", owner);
    if (*key_id) cJSON_AddStringToObject(o, "key_id", key_id);
    return o;
}

static void listing_page(struct listing_call *lc, const char *cursor);

static void listing_done(void *arg, const struct redis_result *res) {
    struct listing_call *lc = arg;
    struct pstream *ps = lc->ps;
    ps->listing = 0;
    if (ps->orphan || ps->ended || !ps->tap) {
        if (ps->orphan) free(ps);
        free(lc);
        return;
    }
    const redisReply *r = res->ok ? res->reply : NULL;
    if (!r || r->type != REDIS_REPLY_ARRAY || r->elements < 1 ||
        r->element[0]->type != REDIS_REPLY_STRING) {
        /* Redis away: the gap stands; the client may list itself. */
        free(lc);
        return;
    }
    int sem = ps->f->semaphore;
    for (size_t i = 1; i < r->elements; i++) {
        const redisReply *e = r->element[i];
        if (e->type != REDIS_REPLY_ARRAY || e->elements < 4) continue;
        const char *name = redis_reply_str(e, 0);
        if (!access_may(ps->req, sem ? AUTH_SEMAPHORES : AUTH_LOCKS, name, AUTH_READ)) continue;
        cJSON *o = listed_json(e, sem);
        cJSON_AddStringToObject(o, "change", "current");
        write_event(ps->req, NULL, "state", o);
    }
    if (strcmp(r->element[0]->str, "0") == 0 &&
        !(backend->per_slot && ++lc->master < redis_cluster_masters())) {
        free(lc);
        return;
    }
    char cursor[32];
    snprintf(cursor, sizeof cursor, "%s", r->element[0]->str);
    listing_page(lc, cursor);
}

static void listing_page(struct listing_call *lc, const char *cursor) {
    char count[16];
    snprintf(count, sizeof count, "%d", LISTING_COUNT);
    const char *argv[4] = {cursor, lc->pattern, count, "h"};
    size_t lens[4] = {strlen(cursor), strlen(lc->pattern), strlen(count), 1};
    lc->ps->listing = 1;
    listing_scan(lc->master, argv, lens, listing_done, lc);
}

/* A gap: said, then the names held now (without ids: the next event's id
 * is a place to resume from again). */
static void send_gap(struct pstream *ps, const char *after) {
    cJSON *gap = cJSON_CreateObject();
    cJSON_AddStringToObject(gap, "prefix", ps->f->prefix);
    cJSON_AddStringToObject(gap, "last_event_id", after);
    cJSON_AddStringToObject(gap, "detail",
                            "changes after last_event_id are not known here: the names held now "
                            "follow");
    write_event(ps->req, NULL, "gap", gap);
    if (ps->listing) return;
    struct listing_call *lc = alloc_check(calloc(1, sizeof *lc));
    lc->ps = ps;
    if (listing_pattern(handlers_config()->key_prefix, ps->f->semaphore ? "sem" : "lock",
                        ps->f->prefix, lc->pattern, sizeof lc->pattern) < 0) {
        free(lc);
        return;
    }
    listing_page(lc, "0");
}

/* ---- streams (on their worker's thread) -------------------------------------------- */

static void gone(struct gw_request *req);

static void stream_park(struct pstream *ps) {
    int64_t wake = loop_now_ms() + handlers_config()->stream_heartbeat_ms;
    if (!ps->started && ps->confirm_by < wake) wake = ps->confirm_by;
    ps->w.seen_seq = waiters_release_seq();
    if (park_request(ps->req, &ps->w, wake) < 0) stream_end(ps);
}

/* The ring's event at seq s (s within the last PREFIX_RING). */
static struct event *at(struct feed *f, unsigned long long s) { return &f->ring[s % PREFIX_RING]; }

static unsigned long long ring_first(const struct feed *f) {
    return f->seq > PREFIX_RING ? f->seq - PREFIX_RING : 0;
}

/* Sends ps what the feed received since ps->pos (mu held). */
static void stream_catch_up(struct pstream *ps) {
    struct feed *f = ps->f;
    if (ps->pos < ring_first(f)) { /* fell behind the ring: rare */
        send_gap(ps, ps->last);
        ps->pos = f->seq;
    }
    for (; ps->pos < f->seq; ps->pos++) {
        const struct event *e = at(f, ps->pos);
        if (!e->name) {
            send_gap(ps, ps->last);
            continue;
        }
        const char *nul = memchr(e->payload, '\0', e->len);
        size_t idl = nul ? (size_t)(nul - e->payload) : 0;
        if (idl && idl < ID_MAX) {
            memcpy(ps->last, e->payload, idl);
            ps->last[idl] = '\0';
        }
        send_event(ps, e);
    }
}

/* The feed is subscribed (mu held): ps opens, at the ring's end, or after
 * its Last-Event-ID when the ring holds that place (else a gap). */
static void stream_start(struct pstream *ps) {
    struct feed *f = ps->f;
    ps->started = 1;
    ps->pos = f->seq;
    http_stream_open(ps->req, gone, handlers_config()->stream_user_timeout_ms);
    http_stream_write(ps->req, ":\n", 2);
    if (ps->resume[0]) {
        unsigned long long first = ring_first(f), s = f->seq;
        size_t rl = strlen(ps->resume);
        while (s > first) { /* newest first: a client is usually just behind */
            const struct event *e = at(f, s - 1);
            if (e->name && e->len > rl && e->payload[rl] == '\0' &&
                memcmp(e->payload, ps->resume, rl) == 0)
                break;
            s--;
        }
        snprintf(ps->last, sizeof ps->last, "%s", ps->resume);
        if (s == first)
            send_gap(ps, ps->resume);
        else
            ps->pos = s;
        ps->resume[0] = '\0';
        stream_catch_up(ps);
    }
    waiters_unpark(&ps->w);
    stream_park(ps);
}

/* 503 for a stream over a pattern Redis refused, for ms more. */
static void reply_refused(struct gw_request *req, const char *pattern, int64_t ms) {
    char after[24];
    snprintf(after, sizeof after, "%lld", (long long)((ms + 999) / 1000));
    reply_header(req, "Retry-After", after);
    reply_problem(req, CODE_BACKEND_UNAVAILABLE,
                  "Redis refused PSUBSCRIBE %s (NOPERM): the Redis user's ACL must list the "
                  "channel pattern '&%s' (or '&*'): docs/security.md",
                  pattern, pattern);
}

static void stream_end(struct pstream *ps) {
    if (ps->ended) return;
    ps->ended = 1;
    waiters_unpark(&ps->w);
    if (http_stream_opened(ps->req))
        http_stream_end(ps->req);
    else if (http_client_gone(ps->req))
        reply_problem(ps->req, CODE_LOCK_BUSY, "the client went away while watching");
    else if (ps->f->refused)
        reply_refused(ps->req, ps->f->pattern, REFUSED_MS);
    else
        reply_problem(ps->req, CODE_BACKEND_UNAVAILABLE,
                      "Redis did not confirm the subscription to this prefix's changes in "
                      "time (the Redis user may lack PSUBSCRIBE or the channel pattern: "
                      "docs/security.md)");
}

static void on_stream_wake(struct waiter *w) {
    struct pstream *ps = (struct pstream *)w;
    if (http_client_gone(ps->req)) {
        stream_end(ps);
        return;
    }
    if (!ps->started) {
        if (loop_now_ms() >= ps->confirm_by) {
            stream_end(ps);
            return;
        }
    } else {
        http_stream_write(ps->req, ":\n", 2);
    }
    stream_park(ps);
}

static void on_stream_give_up(struct waiter *w, int client_gone) {
    stream_end((struct pstream *)w);
}

static void gone(struct gw_request *req) {
    struct pstream *ps = req->ctx;
    if (!ps->ended) stream_end(ps);
}

/* The feed has news (the tap's worker): its streams catch up, and those
 * waiting for the subscription start once it is confirmed. */
static void tap_run(struct loop_task *t) {
    struct tap *tap = (struct tap *)t;
    pthread_mutex_lock(&mu);
    tap->posted = 0;
    tap->running = 1;
    for (struct pstream *ps = tap->dead ? NULL : tap->streams, *next; ps; ps = next) {
        next = ps->next;
        if (ps->ended) continue;
        if (tap->f->refused)
            stream_end(ps);
        else if (ps->started)
            stream_catch_up(ps);
        else if (tap->f->confirmed)
            stream_start(ps);
    }
    tap->running = 0;
    int dead = tap->dead && !tap->posted;
    pthread_mutex_unlock(&mu);
    if (dead) free(tap);
}

/* Posts tap's task unless it is posted already (mu held). */
static void tap_post(struct tap *tap) {
    if (tap->posted) return;
    tap->posted = 1;
    if (loop_post(tap->loop, &tap->task) < 0) tap->posted = 0; /* stopping */
}

/* ps leaves its tap; the last stream of a worker takes its tap off the
 * feed, the last tap starts the linger (mu held). */
static void stream_leave(struct pstream *ps) {
    struct tap *tap = ps->tap;
    if (!tap) return;
    if (ps->prev)
        ps->prev->next = ps->next;
    else
        tap->streams = ps->next;
    if (ps->next) ps->next->prev = ps->prev;
    ps->tap = NULL;
    if (tap->streams) return;
    struct feed *f = tap->f;
    for (struct tap **t = &f->taps; *t; t = &(*t)->next)
        if (*t == tap) {
            *t = tap->next;
            break;
        }
    if (tap->posted || tap->running)
        tap->dead = 1;
    else
        free(tap);
    if (!f->taps)
        f->linger_until =
            loop_now_ms() + (nfeeds >= FEED_MAX / 2 ? PREFIX_LINGER_BUSY_MS : PREFIX_LINGER_MS);
}

static void stream_free(void *ctx) {
    struct pstream *ps = ctx;
    waiters_unpark(&ps->w);
    pthread_mutex_lock(&mu);
    stream_leave(ps);
    pthread_mutex_unlock(&mu);
    if (ps->listing) {
        ps->orphan = 1;
        return;
    }
    free(ps);
}

/* ---- feeds (on their owner's thread) ----------------------------------------------- */

static void feed_free(struct feed *f) {
    for (int i = 0; i < PREFIX_RING; i++) {
        free(f->ring[i].name);
        free(f->ring[i].payload);
    }
    free(f->exp);
    free(f);
}

/* Appends an event and tells every tap (mu held). */
static void ring_push(struct feed *f, char *name, char *payload, size_t len) {
    struct event *e = at(f, f->seq++);
    free(e->name);
    free(e->payload);
    *e = (struct event){.name = name, .payload = payload, .len = len};
    for (struct tap *t = f->taps; t; t = t->next) tap_post(t);
}

/* Notes name's lease end (ttl_ms from now; < 0: nobody holds it). */
static void expiry_note(struct feed *f, const char *name, long long ttl_ms) {
    int i = 0;
    while (i < f->nexp && strcmp(f->exp[i].name, name) != 0) i++;
    if (ttl_ms < 0) {
        if (i < f->nexp) f->exp[i] = f->exp[--f->nexp];
        return;
    }
    if (i == f->nexp) {
        if (f->nexp == EXPIRY_MAX) return;
        if (!f->exp) f->exp = alloc_check(calloc(EXPIRY_MAX, sizeof *f->exp));
        snprintf(f->exp[f->nexp++].name, NAME_MAX_LEN + 1, "%s", name);
    }
    f->exp[i].end_ms = loop_now_ms() + ttl_ms + 2;
}

/* Redis Cluster mode: the same change (name and id: an id is unique per
 * master, a name on one master at a time) among the last RECENT_DUP
 * events (mu held).  Each change reaches the feed once per master and only
 * the copy of the name's master in the gateway's slot map is taken
 * (server/redis_patterns.inc); when the map changes under copies on their
 * way, one may be taken from the old master and one from the new, on
 * either side of the gap the change gives: the second is dropped here. */
#define RECENT_DUP 64
static int ring_has_recent(struct feed *f, const char *name, const char *payload, size_t len) {
    const char *nul = memchr(payload, '\0', len);
    size_t idl = nul ? (size_t)(nul - payload) : len;
    unsigned long long first = ring_first(f), s = f->seq;
    for (int k = 0; k < RECENT_DUP && s > first; k++, s--) {
        const struct event *e = at(f, s - 1);
        if (e->name && e->len > idl && e->payload[idl] == '\0' &&
            memcmp(e->payload, payload, idl) == 0 && strcmp(e->name, name) == 0)
            return 1;
    }
    return 0;
}

static void on_message(void *arg, const char *channel, size_t clen, const char *payload,
                       size_t plen) {
    struct feed *f = arg;
    if (clen <= f->chan_skip || clen - f->chan_skip > NAME_MAX_LEN) return;
    char *name = alloc_check(malloc(clen - f->chan_skip + 1));
    memcpy(name, channel + f->chan_skip, clen - f->chan_skip);
    name[clen - f->chan_skip] = '\0';
    char *copy = alloc_check(malloc(plen + 1));
    memcpy(copy, payload, plen);
    copy[plen] = '\0';
    /* The earliest lease end (the 13th field; older scripts: the longest). */
    const char *fl[13];
    size_t ll[13];
    int nf = fields(copy, plen, fl, ll, 13);
    if (nf >= 7)
        expiry_note(f, name,
                    num(fl[3], ll[3]) > 0 ? num(fl[nf == 13 ? 12 : 6], ll[nf == 13 ? 12 : 6]) : -1);
    pthread_mutex_lock(&mu);
    if (backend->per_slot && ring_has_recent(f, name, copy, plen)) {
        pthread_mutex_unlock(&mu);
        free(name);
        free(copy);
        return;
    }
    ring_push(f, name, copy, plen);
    pthread_mutex_unlock(&mu);
    feed_arm(f);
}

/* Confirmed: the first time, the waiting streams start; again (the
 * connection was made again), what came between is lost: a gap. */
static void on_confirmed(void *arg) {
    struct feed *f = arg;
    pthread_mutex_lock(&mu);
    if (f->confirmed++)
        ring_push(f, NULL, NULL, 0);
    else
        for (struct tap *t = f->taps; t; t = t->next) tap_post(t);
    pthread_mutex_unlock(&mu);
}

/* f leaves the gateway's list of feeds (mu held). */
static void feed_unlink(struct feed *f) {
    for (struct feed **p = &feeds; *p; p = &(*p)->next)
        if (*p == f) {
            *p = f->next;
            nfeeds--;
            break;
        }
}

/* Redis refused the pattern (the worker's redis layer forgot it): the
 * feed leaves the gateway's list (a later stream makes a new one, once the
 * refusal is over), its streams answer 503, and its owner frees it at the
 * next tick. */
static void on_refused(void *arg, const char *why) {
    struct feed *f = arg;
    (void)why;
    pthread_mutex_lock(&mu);
    f->refused = 1;
    feed_unlink(f);
    struct refusal *r = &refusals[refusal_next++ % REFUSED_MAX];
    r->semaphore = f->semaphore;
    snprintf(r->prefix, sizeof r->prefix, "%s", f->prefix);
    snprintf(r->pattern, sizeof r->pattern, "%s", f->pattern);
    r->until = loop_now_ms() + REFUSED_MS;
    for (struct tap *t = f->taps; t; t = t->next) tap_post(t);
    pthread_mutex_unlock(&mu);
}

/* A refusal of prefix's pattern still in force, or NULL (mu held). */
static const struct refusal *refusal_of(int semaphore, const char *prefix) {
    int64_t now = loop_now_ms();
    for (int i = 0; i < REFUSED_MAX; i++)
        if (refusals[i].until > now && refusals[i].semaphore == semaphore &&
            strcmp(refusals[i].prefix, prefix) == 0)
            return &refusals[i];
    return NULL;
}

struct inspect_call {
    struct feed *f;
    char name[NAME_MAX_LEN + 1];
};

/* A name read at its lease's end: still held (renewed) is looked at again
 * at its new end; an expiry found was published by inspect.lua. */
static void inspected(void *arg, const struct redis_result *res) {
    struct inspect_call *ic = arg;
    struct feed *f = ic->f;
    f->calls--;
    if (f->dead) {
        if (!f->calls) feed_free(f);
    } else {
        const redisReply *r = res->ok ? res->reply : NULL;
        long long verdict = r && r->type == REDIS_REPLY_ARRAY && r->elements > 0 &&
                                    r->element[0]->type == REDIS_REPLY_INTEGER
                                ? r->element[0]->integer
                                : -100;
        if (verdict == 1 && r->elements > 4 && r->element[4]->type == REDIS_REPLY_INTEGER)
            expiry_note(f, ic->name, r->element[4]->integer);
        else if (verdict == -1)
            expiry_note(f, ic->name, -1);
        feed_arm(f);
    }
    free(ic);
}

/* The owner's timer: a lingering feed nobody came back to is dropped;
 * names whose lease ended are read (inspect.lua publishes an expiry). */
static void on_feed_wake(struct waiter *w) {
    struct feed *f = (struct feed *)w;
    int64_t now = loop_now_ms();
    pthread_mutex_lock(&mu);
    int refused = f->refused;
    int drop = !f->taps && (refused || (f->linger_until && now >= f->linger_until));
    if (drop && !refused) feed_unlink(f);
    pthread_mutex_unlock(&mu);
    if (drop) {
        /* A refused pattern is gone from the redis layer already (and a
         * new feed may keep the same one). */
        if (!refused) redis_pattern_remove(f->pattern);
        f->dead = 1;
        if (!f->calls) feed_free(f);
        return;
    }
    for (int i = 0; i < f->nexp; i++) {
        if (f->exp[i].end_ms > now) continue;
        /* Looked at again a second later if nothing answers before. */
        f->exp[i].end_ms = now + 1000;
        struct inspect_call *ic = alloc_check(calloc(1, sizeof *ic));
        ic->f = f;
        snprintf(ic->name, sizeof ic->name, "%s", f->exp[i].name);
        char hash[GW_PREFIX_MAX + NAME_MAX_LEN + 16];
        snprintf(hash, sizeof hash, "%s%s:{%s}", handlers_config()->key_prefix,
                 f->semaphore ? "sem" : "lock", ic->name);
        const char *argv[1] = {hash};
        size_t lens[1] = {strlen(hash)};
        f->calls++;
        backend->inspect(1, argv, lens, inspected, ic);
    }
    feed_arm(f);
}

/* The worker stops: a refused feed, off the gateway's list already and
 * waiting for its next tick to be freed, is freed now (others stay on the
 * list to the end). */
static void on_feed_give_up(struct waiter *w, int client_gone) {
    struct feed *f = (struct feed *)w;
    pthread_mutex_lock(&mu);
    int drop = f->refused && !f->taps && !f->dead;
    pthread_mutex_unlock(&mu);
    if (!drop) return;
    f->dead = 1;
    if (!f->calls) feed_free(f);
}

/* Parks the owner's timer at the first lease end, or the next tick. */
static void feed_arm(struct feed *f) {
    int64_t wake = loop_now_ms() + FEED_TICK_MS;
    for (int i = 0; i < f->nexp; i++)
        if (f->exp[i].end_ms < wake) wake = f->exp[i].end_ms;
    waiters_unpark(&f->timer);
    f->timer.seen_seq = waiters_release_seq();
    waiters_park(&f->timer, wake);
}

/* Writes s into out with every glob character escaped; its length. */
static size_t escape_glob(const char *s, char *out) {
    size_t n = 0;
    for (; *s; s++) {
        if (strchr("*?[]\\", *s)) out[n++] = '\\';
        out[n++] = *s;
    }
    out[n] = '\0';
    return n;
}

/* The gateway has FEED_MAX feeds: the one that lingers longest without
 * a stream ends at its owner's next tick (it may be another worker's,
 * whose redis layer only that worker touches), unless one is ending
 * already; 1 if room is coming so (mu held). */
static int feed_make_room(void) {
    struct feed *oldest = NULL;
    for (struct feed *f = feeds; f; f = f->next)
        if (!f->taps && f->linger_until == 1) return 1; /* ending already */
    for (struct feed *f = feeds; f; f = f->next)
        if (!f->taps && f->linger_until > 1 && (!oldest || f->linger_until < oldest->linger_until))
            oldest = f;
    if (oldest) oldest->linger_until = 1; /* over: on_feed_wake drops it */
    return oldest != NULL;
}

/* The gateway's feed over prefix, made (owned by the calling worker) when
 * there is none; NULL when this worker cannot subscribe, *full set when
 * the gateway has FEED_MAX feeds (mu held). */
static struct feed *feed_get(int semaphore, const char *prefix, int *full) {
    *full = 0;
    for (struct feed *f = feeds; f; f = f->next)
        if (f->semaphore == semaphore && strcmp(f->prefix, prefix) == 0) return f;
    if (nfeeds >= FEED_MAX) {
        *full = 1 + feed_make_room();
        return NULL;
    }
    struct feed *f = alloc_check(calloc(1, sizeof *f));
    f->semaphore = semaphore;
    snprintf(f->prefix, sizeof f->prefix, "%s", prefix);
    const char *kind = semaphore ? "sem" : "lock";
    char head[GW_PREFIX_MAX + 16];
    snprintf(head, sizeof head, "%schg:%s:", handlers_config()->key_prefix, kind);
    f->chan_skip = strlen(head);
    size_t n = escape_glob(head, f->pattern);
    n += escape_glob(prefix, f->pattern + n);
    memcpy(f->pattern + n, "*", 2);
    f->timer.key = FEED_KEY;
    f->timer.watch = 1;
    f->timer.fd = -1;
    f->timer.retry = on_feed_wake;
    f->timer.give_up = on_feed_give_up;
    if (redis_pattern_add(f->pattern, on_message, on_confirmed, on_refused, f) < 0) {
        free(f);
        return NULL;
    }
    f->next = feeds;
    feeds = f;
    nfeeds++;
    feed_arm(f);
    return f;
}

/* ---- the request ------------------------------------------------------------------- */

/* Answers req with the stream over its ?prefix= (or 400 / 503). */
static void prefix_stream(struct gw_request *req, int semaphore) {
    pthread_once(&mu_once, mu_init);
    const char *prefix = listing_prefix_or_reply(req), *last = http_header(req, "Last-Event-ID");
    if (!prefix) return;
    if (last && (strlen(last) >= ID_MAX || strspn(last, "0123456789-") != strlen(last))) {
        reply_problem(req, CODE_INVALID_FIELD, "Last-Event-ID must be an id this stream sent");
        return;
    }
    pthread_mutex_lock(&mu);
    const struct refusal *refused = refusal_of(semaphore, prefix);
    if (refused) {
        char pattern[PAT_MAX];
        snprintf(pattern, sizeof pattern, "%s", refused->pattern);
        int64_t left = refused->until - loop_now_ms();
        pthread_mutex_unlock(&mu);
        reply_refused(req, pattern, left);
        return;
    }
    int full;
    struct feed *f = feed_get(semaphore, prefix, &full);
    if (!f && full) {
        pthread_mutex_unlock(&mu);
        /* Room is made within a tick when a feed lingered; else once
         * some stream ends and its feed's (short) linger is over. */
        int after_s = full == 2 ? FEED_TICK_MS / 1000 + 1 : PREFIX_LINGER_BUSY_MS / 1000 + 1;
        char after[16];
        snprintf(after, sizeof after, "%d", after_s);
        reply_header(req, "Retry-After", after);
        reply_problem(req, CODE_TOO_MANY_PREFIXES,
                      "this gateway streams %d prefixes already (each a Redis pattern "
                      "subscription): try again in %d s, or stream a shorter prefix that covers "
                      "several",
                      FEED_MAX, after_s);
        return;
    }
    if (!f) {
        pthread_mutex_unlock(&mu);
        reply_problem(req, CODE_BACKEND_UNAVAILABLE, "no Redis pub/sub connection on this worker");
        return;
    }
    struct tap *tap = f->taps;
    struct loop *me = loop_self();
    while (tap && tap->loop != me) tap = tap->next;
    if (!tap) {
        tap = alloc_check(calloc(1, sizeof *tap));
        tap->task.run = tap_run;
        tap->f = f;
        tap->loop = me;
        tap->next = f->taps;
        f->taps = tap;
    }
    f->linger_until = 0;
    struct pstream *ps = alloc_check(calloc(1, sizeof *ps));
    ps->req = req;
    ps->f = f;
    ps->tap = tap;
    snprintf(ps->resume, sizeof ps->resume, "%s", last ? last : "");
    ps->w.key = STREAM_KEY;
    ps->w.watch = 1;
    ps->w.retry = on_stream_wake;
    ps->w.give_up = on_stream_give_up;
    ps->confirm_by = loop_now_ms() + handlers_config()->redis_timeout_ms + 1000;
    req->ctx = ps;
    req->ctx_free = stream_free;
    ps->next = tap->streams;
    if (ps->next) ps->next->prev = ps;
    tap->streams = ps;
    if (f->confirmed)
        stream_start(ps);
    else
        stream_park(ps);
    pthread_mutex_unlock(&mu);
}

void prefix_stream_or_list_locks(struct gw_request *req) {
    if (stream_asked(req))
        prefix_stream(req, 0);
    else
        listing_locks(req);
}

void prefix_stream_or_list_semaphores(struct gw_request *req) {
    if (stream_asked(req))
        prefix_stream(req, 1);
    else
        listing_semaphores(req);
}
