/* renew.c -- the lease of `run`: extensions on a schedule (every third of
 * the TTL, retried with backoff, never past the lease), dating a lease
 * granted at an unknown moment, and the release at the end. */
#include "cli/answer.h"
#include "cli/ctl.h"
#include "cli/requests.h"
#include "cli/watch.h"
#include "common/alloc.h"

#include <limits.h>
#include <stdio.h>
#include <string.h>

/* An extension has come back: moves the lease on or schedules a retry and
 * returns 0; or, when the gateway refused it, returns 1 with the reason
 * in reason and *known_gone set when it said the token holds nothing (the
 * watchdog then loses the lease: lose()). */
static int renewal_done(struct watch *w, int *known_gone, char *reason, size_t cap) {
    struct call *c = &w->ext;
    enum outcome out = call_outcome(c);
    long long now = now_ms();
    /* run --session: the hold has no lease of its own, and this PATCH only
     * asks whether it is still held: session_bound says it is (until the
     * session's TTL from now, as the renewer keeps it), not_held that the
     * session is gone. */
    const char *code = c->status == 409 ? jstr(c->json, "code") : NULL;
    if (w->o->session && code && strcmp(code, "session_bound") == 0) {
        w->lease_end = max_ll(w->lease_end, c->sent_at + w->ttl);
        w->next_renew = c->sent_at + w->ttl / 3;
        w->backoff = 100;
        call_free(c);
        w->ext_busy = 0;
        return 0;
    }
    if (out == OUT_OK) {
        long long ttl = jint(c->json, "ttl_ms", 0);
        /* The gateway counts the new lease from when Redis ran the
         * extension, after we sent it: counting from sending is safe. */
        w->lease_end = max_ll(w->lease_end, c->sent_at + ttl);
        w->capped = ttl < w->ttl;
        w->next_renew = c->sent_at + w->ttl / 3;
        w->backoff = 100;
        if (ctl_verbose) ctl_say("extended lock '%s' by %lld ms", w->o->name, ttl);
    } else {
        char why[768];
        call_why(c, why, sizeof why);
        if (out == OUT_DOWN) {
            long long left = w->lease_end - now;
            w->next_renew = now + min_ll(w->backoff, max_ll(left / 2, 1));
            w->backoff = min_ll(w->backoff * 2, max_ll(w->ttl / 6, 200));
            if (ctl_verbose)
                ctl_say("extend '%s': %s; trying again in %lld ms (lease ends in %lld ms)",
                        w->o->name, why, w->next_renew - now, left);
        } else {
            *known_gone = out == OUT_GONE;
            call_free(c);
            w->ext_busy = 0;
            if (w->o->max_hold >= 0 && now >= w->acquired_at + w->o->max_hold - w->ttl / 3)
                snprintf(reason, cap, "--max-hold of %lld ms reached (%s)", w->o->max_hold, why);
            else
                snprintf(reason, cap, "the gateway answered: %s", why);
            return 1;
        }
    }
    call_free(c);
    w->ext_busy = 0;
    return 0;
}

/* Sends the next extension (w->ext). */
static void renewal_start(struct watch *w) {
    char path[256];
    lock_path(path, sizeof path, w->o->name);
    cJSON *b = alloc_check(cJSON_CreateObject());
    add_int(b, "ttl_ms", w->ttl);
    /* Give up on one attempt after a third of the TTL (at least 1 s) and
     * try afresh; never wait past the lease. */
    long long limit = min_ll(w->lease_end - now_ms(), max_ll(w->ttl / 3, 1000));
    call_start(&w->ext, "PATCH", path, w->token, b, max_ll(limit, 1));
    w->ext_busy = 1;
}

/* Releases the lock after the command, retrying errors for up to 5 s but
 * never past the lease (after it the lock is free anyway).  A failure is
 * only a warning: the lock expires by itself.  After a lost lease (quietly)
 * it is one short try: the lease may outlive our cautious count of it. */
static void release_after(struct watch *w, int quietly) {
    if (w->ext_busy) { /* an extension still under way: its answer no longer matters */
        call_free(&w->ext);
        w->ext_busy = 0;
    }
    char path[256];
    lock_path(path, sizeof path, w->o->name);
    long long until = min_ll(now_ms() + 5000, max_ll(w->lease_end, now_ms() + 1000));
    if (quietly) until = now_ms() + 300;
    long long backoff = 100;
    for (;;) {
        struct call c;
        call_start(&c, "DELETE", path, w->token, NULL, max_ll(until - now_ms(), 1));
        while (!c.done) http_wait(1000);
        enum outcome out = call_outcome(&c);
        if (out == OUT_OK) {
            if (ctl_verbose) ctl_say("released lock '%s'", w->o->name);
            call_free(&c);
            return;
        }
        char why[768];
        call_why(&c, why, sizeof why);
        call_free(&c);
        if (out != OUT_DOWN || quietly || now_ms() + backoff >= until) {
            if (!quietly)
                ctl_say("warning: could not release lock '%s' (%s); it expires at the end "
                        "of its lease",
                        w->o->name, why);
            return;
        }
        long long t = now_ms() + backoff;
        while (now_ms() < t) http_wait(t - now_ms());
        backoff *= 2;
    }
}

/* The lease's turn of the watchdog: an extension that came back moves the
 * lease on (or loses it), and the next is sent every third of the TTL
 * while the lease lasts (the watchdog loses it at its end). */
static long long lease_tend(struct watch *w, long long now) {
    if (w->ext_busy && w->ext.done) {
        char reason[1024];
        int known_gone = 0;
        if (renewal_done(w, &known_gone, reason, sizeof reason)) lose(w, known_gone, "%s", reason);
    }
    if (!w->lost && !w->ext_busy && now >= w->next_renew && now < w->lease_end) renewal_start(w);
    return w->ext_busy ? LLONG_MAX : w->next_renew;
}

const struct keeper keeper_lease = {.tend = lease_tend, .let_go = release_after};

/* Best effort, after an acquire cut short by a signal: the gateway may
 * have granted it without our hearing. */
void release_unheard(const struct opts *o, const char *token) {
    char path[256];
    lock_path(path, sizeof path, o->name);
    struct call c;
    call_start(&c, "DELETE", path, token, NULL, 1000);
    while (!c.done) http_wait(1000);
    call_free(&c);
}

int lease_date(struct watch *w, long long until, struct call *c) {
    char path[256];
    lock_path(path, sizeof path, w->o->name);
    long long backoff = 100;
    for (;;) {
        cJSON *b = alloc_check(cJSON_CreateObject());
        add_int(b, "ttl_ms", w->ttl);
        call_start(c, "PATCH", path, w->token, b, max_ll(until - now_ms(), 1));
        int sig = call_finish(c);
        if (sig) {
            call_free(c);
            return -sig;
        }
        enum outcome out = call_outcome(c);
        if (out == OUT_OK) {
            long long ttl = jint(c->json, "ttl_ms", 0);
            w->lease_end = c->sent_at + ttl;
            w->capped = ttl < w->ttl;
            call_free(c);
            return OUT_OK;
        }
        if (out != OUT_DOWN || now_ms() + backoff >= until) return out;
        call_free(c);
        sig = sleep_ms(backoff);
        if (sig) return -sig;
        backoff *= 2;
    }
}
