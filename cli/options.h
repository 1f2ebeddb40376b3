/* options.h -- the command line: struct opts holds what it says, struct
 * subcommand what each command takes. */
#ifndef LOCKCTL_OPTIONS_H
#define LOCKCTL_OPTIONS_H

#include <getopt.h>

enum {
    O_SHARED = 256,
    O_FAIR,
    O_OWNER,
    O_MAX_HOLD,
    O_LOCK_DELAY,
    O_GRACE,
    O_TOKEN,
    O_VERSION,
    O_SESSION,
    O_FORCE,
    O_VALUE,
    O_STREAM
};
/* Options of every command that say how to reach the gateway (access.h). */
enum { O_API_KEY_FILE = 300, O_CACERT, O_CERT, O_KEY };

struct opts {
    const char *cmd;      /* the subcommand */
    const char *name;     /* NAME or NAMESPACE */
    char **argv;          /* run: the command and its arguments */
    long long ttl;        /* --ttl, -1 when not given */
    long long wait;       /* --wait, 0 try once, -1 forever */
    int shared;           /* --shared */
    int fair;             /* --fair */
    const char *owner;    /* --owner, or NULL */
    long long max_hold;   /* --max-hold, -1 when not given */
    long long lock_delay; /* --lock-delay, -1 when not given */
    long long grace;      /* --grace */
    const char *token;    /* --token, or NULL */
    const char *session;  /* run --session FILE, or NULL (session.h) */
    long long count;      /* id -n */
    int quiet;            /* -q */
    int force;            /* release --force */
    const char *value;    /* elect --value, or NULL */
    int stream;           /* run --stream: the hold bound to lockctl's connection */
};

struct subcommand {
    const char *name;          /* as typed */
    const char *help;          /* its --help text */
    const int *allowed;        /* options it takes besides u, v, h; 0 ends */
    int (*fn)(struct opts *o); /* does it; returns the exit status */
};

/* Prints "lockctl: [cmd: ]message (see 'lockctl [cmd] --help')" and returns
 * the usage exit status. */
int usage_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Sets the gateway URL (ctl_url), without trailing '/'. */
void options_set_url(const char *u);

/* getopt_long over argv from start (sc NULL: the options before the
 * command), stopping at the first word that is not an option.  Returns 0,
 * 1 when help or the version was printed (exit 0), or an exit status for a
 * usage error; *stop is where it stopped, *dashdash set when that was right
 * after "--". */
int options_parse(const struct subcommand *sc, struct opts *o, int argc, char **argv, int start,
                  int *stop, int *dashdash);

#endif
