/* run.c -- `lockctl run` as a sequence of steps: prepare (find the program,
 * make a token, catch signals), acquire (and date the lease when the grant
 * came late in a long wait; or, with --stream, over an event stream:
 * hold_stream.c), then run the command under the watchdog (watch.c) and
 * let go of the hold.  Each step returns RUN_GO_ON or the status
 * lockctl exits with. */
#include "cli/run.h"
#include "cli/session.h"
#include "cli/answer.h"
#include "cli/ctl.h"
#include "cli/hold_stream.h"
#include "cli/requests.h"
#include "cli/signals.h"
#include "cli/spawn.h"
#include "cli/watch.h"
#include "common/alloc.h"
#include "common/names.h"
#include "common/token.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <termios.h>
#include <unistd.h>

#define RUN_GO_ON (-1)

/* What the steps pass on to each other. */
struct run {
    struct opts *o;               /* the command line */
    struct opts acquire_opts;     /* o with the TTL and owner filled in */
    char owner[NAME_MAX_LEN + 1]; /* the default --owner */
    char path[PATH_MAX];          /* the program, found in $PATH */
    char **sh_argv;               /* sh PATH ARGS...: for a script without #! */
    struct watch w;               /* the lease and the command */
};

/* Finds the program, makes our token (so that a lock whose grant we never
 * heard of can still be released), installs the signal handlers. */
static int run_prepare(struct run *r) {
    struct opts *o = r->o;
    if (!o->argv || !o->argv[0]) return usage_error("run", "no command to run after NAME");
    /* A stream hold is bound to lockctl's connection and kept by the
     * gateway for as long as it lasts: no session, no bound on it. */
    if (o->stream && o->session)
        return usage_error("run", "--stream and --session do not go together: a stream hold "
                                  "lives as long as lockctl's connection, not a session");
    if (o->stream && o->max_hold >= 0)
        return usage_error("run", "--max-hold does not apply to --stream: the gateway keeps a "
                                  "stream hold as long as the connection lasts (bound the "
                                  "command instead, e.g. with timeout(1))");
    int err = spawn_find_program(o->argv[0], r->path, sizeof r->path);
    if (err) {
        ctl_say("cannot run '%s': %s", o->argv[0],
                err == ENOENT ? "command not found" : strerror(err));
        return err == ENOENT ? CTL_EXIT_NOT_FOUND : CTL_EXIT_CANNOT_EXEC;
    }
    size_t argc = 0;
    while (o->argv[argc]) argc++;
    r->sh_argv = alloc_check(calloc(argc + 2, sizeof *r->sh_argv));
    r->sh_argv[0] = "sh";
    r->sh_argv[1] = r->path;
    for (size_t i = 1; i < argc; i++) r->sh_argv[i + 1] = o->argv[i];

    struct watch *w = &r->w;
    w->o = o;
    w->keeper = &keeper_lease; /* run --stream: keeper_stream, once granted */
    w->tty = -1;
    w->ttl = o->ttl >= 0 ? o->ttl : 30000;
    w->backoff = 100;
    token_new(w->token);
    if (signals_install() < 0) {
        ctl_say("cannot set up signals: %s", strerror(errno));
        return CTL_EXIT_INTERNAL;
    }
    r->acquire_opts = *o;
    if (!o->owner) {
        char host[128] = "";
        gethostname(host, sizeof host - 1);
        snprintf(r->owner, sizeof r->owner, "lockctl on %s, pid %ld", host[0] ? host : "?",
                 (long)getpid());
        r->acquire_opts.owner = r->owner;
    }
    r->acquire_opts.ttl = w->ttl;
    if (o->session) {
        int rc = session_join(o->session, w->ttl);
        if (rc) return rc;
    }
    return RUN_GO_ON;
}

/* An acquire that did not succeed (out: busy, refused, down): says why,
 * frees c, and returns the status lockctl exits with. */
static int acquire_failed(const struct opts *o, int out, struct call *c, long long retry_after,
                          const char *what) {
    int rc;
    if (out == OUT_BUSY) {
        if (!o->quiet) say_busy(o->name, retry_after);
        rc = CTL_EXIT_BUSY;
    } else {
        rc = call_report(c, what);
    }
    call_free(c);
    return rc;
}

/* Takes the lock, waiting up to --wait.  A grant that came more than a
 * third of the TTL after the request was sent came at an unknown moment:
 * the lease is dated by an extension sent now before it is relied on. */
static int run_acquire(struct run *r) {
    struct opts *o = r->o;
    struct watch *w = &r->w;
    struct call c;
    long long retry_after = 0, deadline = wait_deadline(o->wait);
    char what[256];
    snprintf(what, sizeof what, "acquire '%s'", o->name);
    for (;;) {
        int maybe_held = 0; /* granted, perhaps, but not confirmed */
        int out = acquire_loop(&r->acquire_opts, w->token, &c, &retry_after, deadline);
        if (out == OUT_OK) {
            w->acquired_at = c.sent_at;
            w->lease_end = c.sent_at + jint(c.json, "ttl_ms", w->ttl);
            /* An election's term is its lock's fence. */
            if (raw_int(c.body, requests_elections() ? "term" : "fence", w->fence,
                        sizeof w->fence) < 0)
                strcpy(w->fence, "0");
            long long took = now_ms() - c.sent_at;
            call_free(&c);
            if (ctl_verbose)
                ctl_say("acquired lock '%s' (fence %s, ttl %lld ms)", o->name, w->fence, w->ttl);
            w->next_renew = w->acquired_at + w->ttl / 3;
            /* A session-bound hold has no lease to date: the session's. */
            if (took <= w->ttl / 3 || o->session) return RUN_GO_ON;
            out = lease_date(w, now_ms() + w->ttl, &c);
            if (out == OUT_OK) {
                w->next_renew = now_ms() + w->ttl / 3;
                return RUN_GO_ON;
            }
            if (out == OUT_GONE) {
                if (ctl_verbose)
                    ctl_say("the lease of '%s' ran out before it was heard of", o->name);
                call_free(&c);
                continue; /* what is left of --wait, or one more try */
            }
            snprintf(what, sizeof what, "extend '%s'", o->name);
            maybe_held = 1;
        }
        if (out < 0) { /* a stop signal: -out */
            release_unheard(o, w->token);
            return 128 - out;
        }
        int rc = acquire_failed(o, out, &c, retry_after, what);
        if (maybe_held) release_unheard(o, w->token);
        return rc;
    }
}

/* run --stream: takes the lock over an event stream (hold_stream.c),
 * waiting up to --wait.  From the grant on the gateway keeps the lease:
 * nothing to date or renew.  A stop signal while waiting closes the
 * connection, which gives back a grant nobody heard of. */
static int run_acquire_stream(struct run *r) {
    struct opts *o = r->o;
    struct watch *w = &r->w;
    long long retry_after = 0;
    int out = stream_acquire(w, &r->acquire_opts, &retry_after);
    if (out == OUT_OK) return RUN_GO_ON;
    if (out < 0) return 128 - out;
    char what[256];
    snprintf(what, sizeof what, "acquire '%s'", o->name);
    return acquire_failed(o, out, &w->stream, retry_after, what);
}

/* Starts the command with the lock's details in its environment, watches
 * it to its end, takes the terminal back, releases the lock.  Returns the
 * command's status, or lockctl's own when the command could not run or the
 * lease was lost. */
static int run_command(struct run *r) {
    struct opts *o = r->o;
    struct watch *w = &r->w;
    setenv("LOCKGATE_NAME", o->name, 1);
    setenv("LOCKGATE_FENCE", w->fence, 1);
    if (requests_elections()) setenv("LOCKGATE_TERM", w->fence, 1);
    setenv("LOCKGATE_TOKEN", w->token, 1);
    setenv("LOCKGATE_URL", ctl_url, 1);
    /* Signals that came while acquiring and did not stop it (USR1, Ctrl-Z)
     * were not meant for a command that was not running yet. */
    signals_forget();
    w->tty = spawn_terminal();
    int err = 0, exec_failed = 0;
    w->pid = spawn_command(r->path, o->argv, r->sh_argv, w->tty, &err, &exec_failed);
    if (w->pid < 0) {
        ctl_say("cannot start '%s': %s", o->argv[0], strerror(err));
        w->keeper->let_go(w, 0);
        return CTL_EXIT_INTERNAL;
    }
    int st = watch_command(w);
    if (w->tty >= 0) {
        tcsetpgrp(w->tty, getpgrp()); /* SIGTTOU is ignored: allowed */
        close(w->tty);
    }
    if (exec_failed) {
        ctl_say("cannot run '%s': %s", o->argv[0], strerror(err));
        w->keeper->let_go(w, 0);
        return err == ENOENT ? CTL_EXIT_NOT_FOUND : CTL_EXIT_CANNOT_EXEC;
    }
    if (w->lost) {
        if (!w->lost_known_gone) w->keeper->let_go(w, 1); /* perhaps still ours */
        return CTL_EXIT_LEASE_LOST;
    }
    w->keeper->let_go(w, 0);
    return watch_exit_status(st);
}

/* `lockctl elect NAME --value V -- CMD`: run, on an election.  The
 * campaign waits until elected (unless --wait says otherwise), CMD gets
 * the term in LOCKGATE_TERM, and losing the leadership is losing the
 * lease: CMD is stopped, lockctl exits 76. */
int cmd_elect(struct opts *o) {
    if (!o->value) return usage_error("elect", "--value is required (the leader's value)");
    requests_for_elections();
    if (o->wait == 0) o->wait = -1; /* a campaign waits */
    return cmd_run(o);
}

int cmd_run(struct opts *o) {
    struct run r;
    memset(&r, 0, sizeof r);
    r.o = o;
    int rc = run_prepare(&r);
    if (rc == RUN_GO_ON) rc = o->stream ? run_acquire_stream(&r) : run_acquire(&r);
    if (rc == RUN_GO_ON) rc = run_command(&r);
    call_free(&r.w.stream); /* --stream: closed by let_go already (a zeroed call frees nothing) */
    free(r.sh_argv);
    return rc;
}
