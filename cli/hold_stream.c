/* hold_stream.c -- see hold_stream.h.  The gateway's side is
 * docs/locks.md, "Hold a lock as long as a connection": a POST with
 * Accept: text/event-stream answers `event: waiting` while it waits, then
 * `event: granted` (the grant body), then heartbeat comments while the hold
 * lasts; it ends with `event: lost` when the hold is lost, or `event:
 * error` (a problem body) when the wait ran out or failed.  Closing the
 * connection releases the hold at once, so lockctl killed outright frees
 * the lock at once too; the price is that any break of the connection, a
 * network blip included, ends the hold, where the renewal loop (renew.c)
 * retries until its lease ends. */
#include "cli/hold_stream.h"
#include "cli/answer.h"
#include "cli/ctl.h"
#include "cli/requests.h"
#include "cli/signals.h"
#include "cli/sse.h"

#include <limits.h>
#include <stdio.h>
#include <string.h>

static const char SSE[] = "text/event-stream";

/* The gateway's host may stay silent (not even TCP answering) this long
 * before the stream counts as ended (http.h, call_start_stream): a third
 * of the TTL, as a host that died right after renewing leaves the hold
 * two thirds of it, and at most SILENT_MAX_MS, below the gateway's default
 * --stream-user-timeout-ms (20 s), after which a gateway cut off from
 * lockctl releases the hold. */
#define SILENT_MAX_MS 10000

/* ---- acquiring ---------------------------------------------------------------- */

/* One event before the grant.  Returns 1 when it settles the attempt: the
 * grant (w->stream then reads as a 200 answer, and stays open) or the
 * stream's last error (w->stream then reads as that answer, ended). */
static int before_grant(struct watch *w, const struct opts *o, const struct sse_event *ev) {
    struct call *c = &w->stream;
    if (strcmp(ev->name, "granted") == 0) {
        cJSON *grant = cJSON_Parse(ev->data);
        if (raw_int(ev->data, "fence", w->fence, sizeof w->fence) < 0) strcpy(w->fence, "0");
        long long ttl = jint(grant, "ttl_ms", w->ttl);
        cJSON_Delete(grant);
        c->status = 200;
        w->acquired_at = c->sent_at;
        w->lease_end = LLONG_MAX; /* the gateway keeps it: no lease of ours to count */
        w->keeper = &keeper_stream;
        if (ctl_verbose)
            ctl_say("acquired lock '%s' over a stream (fence %s, ttl %lld ms, kept by the "
                    "gateway)",
                    o->name, w->fence, ttl);
        return 1;
    }
    if (strcmp(ev->name, "error") == 0) {
        cJSON *problem = cJSON_Parse(ev->data);
        call_stop(c, CURLE_OK, NULL);
        c->status = jint(problem, "status", 503);
        cJSON_Delete(c->json);
        c->json = problem;
        return 1;
    }
    if (strcmp(ev->name, "waiting") == 0 && ctl_verbose) {
        cJSON *j = cJSON_Parse(ev->data);
        ctl_say("waiting for lock '%s' (%s; %lld ms left)", o->name,
                jstr(j, "state") ? jstr(j, "state") : "busy", jint(j, "wait_left_ms", 0));
        cJSON_Delete(j);
    }
    return 0;
}

/* One POST asking for the stream, until it settles: the grant, an
 * ordinary answer (an error before the stream started: 409 when not
 * waiting, 4xx, 503), the stream's `event: error`, its end without either,
 * or no grant within the wait asked plus CTL_REQUEST_MS.  Returns 0 with
 * w->stream settled, or a stop signal's number. */
static int stream_attempt(struct watch *w, const struct opts *o, const char *path, long long ask) {
    struct call *c = &w->stream;
    call_start_stream(c, "POST", path, w->token, acquire_body(o, ask), SSE,
                      min_ll(w->ttl / 3, SILENT_MAX_MS));
    long long until = now_ms() + ask + CTL_REQUEST_MS;
    for (;;) {
        long long now = now_ms();
        if (now >= until) {
            call_stop(c, CURLE_OPERATION_TIMEDOUT, NULL);
            return 0;
        }
        http_wait(min_ll(until - now, 1000));
        int sig = sig_take_stop();
        if (sig) return sig;
        if (call_status_now(c) == 200) {
            struct sse_event ev;
            while (sse_next(c, &ev)) {
                int settled = before_grant(w, o, &ev);
                sse_event_free(&ev);
                if (settled) return 0;
            }
        }
        if (c->done) {
            if (c->status == 200)
                call_stop(c, CURLE_RECV_ERROR, "the stream ended before the lock was granted");
            return 0;
        }
    }
}

int stream_acquire(struct watch *w, const struct opts *o, long long *retry_after) {
    char path[256];
    lock_path(path, sizeof path, o->name);
    long long deadline = wait_deadline(o->wait);
    struct acquire_retry st = {.backoff = 50};
    for (;;) {
        int sig = stream_attempt(w, o, path, acquire_wait_ms(o, deadline));
        if (sig) {
            call_free(&w->stream);
            return -sig;
        }
        enum outcome out = call_outcome(&w->stream);
        if (out == OUT_OK || out == OUT_REFUSED || out == OUT_GONE) return out;
        int next = acquire_pause(o, &w->stream, out, deadline, &st);
        *retry_after = st.retry_after;
        if (next) return next < 0 ? next : (int)out;
    }
}

/* ---- holding ------------------------------------------------------------------ */

/* Reads what came: `event: lost` (or a last `event: error`) loses the
 * hold, and so does the stream's end; heartbeats are skipped.  Nothing to
 * do on a timer: the loop wakes when the socket has news. */
static long long stream_tend(struct watch *w, long long now) {
    struct call *c = &w->stream;
    struct sse_event ev;
    while (!w->lost && sse_next(c, &ev)) {
        if (strcmp(ev.name, "lost") == 0 || strcmp(ev.name, "error") == 0) {
            cJSON *j = cJSON_Parse(ev.data);
            const char *why = jstr(j, "reason") ? jstr(j, "reason") : jstr(j, "detail");
            lose(w, 0, "the gateway ended the hold: %s", why ? why : ev.data);
            cJSON_Delete(j);
        }
        sse_event_free(&ev);
    }
    if (!w->lost && c->done) {
        const char *why = c->rc != CURLE_OK ? (c->err[0] ? c->err : curl_easy_strerror(c->rc))
                                            : "closed by the gateway";
        lose(w, 0, "the stream from the gateway at %s ended (%s)", ctl_url, why);
    }
    return LLONG_MAX;
}

/* Releases with a DELETE (so that the lock is free once lockctl has
 * exited, not a moment later when the gateway notices the closed
 * connection), then closes the connection, which releases too: a DELETE
 * that fails costs nothing.  After a lost hold: closing only. */
static void stream_let_go(struct watch *w, int quietly) {
    if (!quietly && !w->stream.done) {
        char path[256];
        lock_path(path, sizeof path, w->o->name);
        struct call c;
        call_start(&c, "DELETE", path, w->token, NULL, 1000);
        while (!c.done) http_wait(1000);
        if (ctl_verbose) {
            char why[768] = "released";
            if (call_outcome(&c) != OUT_OK) call_why(&c, why, sizeof why);
            ctl_say("release '%s': %s; closing the stream", w->o->name, why);
        }
        call_free(&c);
    }
    call_free(&w->stream);
}

const struct keeper keeper_stream = {.tend = stream_tend, .let_go = stream_let_go};
