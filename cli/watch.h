/* watch.h -- what `run` keeps while the command runs, the watchdog loop
 * (watch.c) and the lease's renewal and release (renew.c). */
#ifndef LOCKCTL_WATCH_H
#define LOCKCTL_WATCH_H

#include "cli/http.h"
#include "cli/options.h"

#include <sys/types.h>

struct watch;

/* How the hold is kept while the command runs: a lease lockctl renews
 * (keeper_lease, renew.c) or an event stream the gateway keeps it for
 * (keeper_stream, hold_stream.c).  Chosen once, by the acquire. */
struct keeper {
    /* A turn of the watchdog: moves the hold on (a renewal sent or heard,
     * the stream read) and calls lose() when it is lost.  Returns when it
     * wants the next turn (now_ms() time; LLONG_MAX: when something comes
     * on a socket). */
    long long (*tend)(struct watch *w, long long now);
    /* The command has ended: lets go of the hold.  quietly: one short try,
     * after a lost hold. */
    void (*let_go)(struct watch *w, int quietly);
};

extern const struct keeper keeper_lease;

/* What `run` keeps while the command runs. */
struct watch {
    const struct keeper *keeper; /* how the hold is kept */
    const struct opts *o;        /* the command line */
    char token[32];              /* our token (we make it) */
    char fence[32];              /* the fence, as digits */
    long long ttl;               /* the lease length asked for */
    long long acquired_at;       /* now_ms() when the acquire was sent */
    long long lease_end;         /* the lock is surely ours until then */
    long long next_renew;        /* when to send the next extension */
    long long backoff;           /* pause before retrying a failed extension */
    struct call ext;             /* the extension in flight */
    int ext_busy;                /* 1 while ext is in flight */
    pid_t pid;                   /* the command; also its process group */
    int tty;                     /* the terminal handed to the command, or -1 */
    int lost;                    /* 1 once the lease is lost */
    int lost_known_gone;         /* lost because the gateway said not held */
    int capped;                  /* the last extension was cut short by max-hold */
    long long kill_at;           /* lost: when SIGKILL follows SIGTERM */
    int killed;                  /* SIGKILL sent */
    struct call stream;          /* run --stream: the POST whose event stream holds the lock */
};

/* ---- watch.c */

/* Runs until the command has exited, waking for the command (SIGCHLD), a
 * signal, the keeper's news (a renewal that came back, an event of the
 * stream), or a timer (next renewal, end of lease, SIGKILL after the
 * grace).  Returns the command's wait status. */
int watch_command(struct watch *w);

/* The lease is gone: SIGTERM to the command's group now, SIGKILL after
 * --grace.  known_gone: the gateway said the token holds nothing. */
void lose(struct watch *w, int known_gone, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* A wait status as a shell reports it: the exit status, 128+N for signal N. */
int watch_exit_status(int st);

/* ---- renew.c */

/* Dates a lease granted at an unknown moment: an extension sent now
 * counts from now.  Tries until `until`.  Returns OUT_OK with w->lease_end
 * set, another outcome with c holding the failed call, or -sig when a stop
 * signal came. */
int lease_date(struct watch *w, long long until, struct call *c);

/* Best effort, after an acquire cut short: the gateway may have granted it
 * without our hearing. */
void release_unheard(const struct opts *o, const char *token);

#endif
