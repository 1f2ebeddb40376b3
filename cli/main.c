/* main.c -- lockctl: lockgate from the shell.  Runs a command under a lock
 * that is renewed for as long as the command runs (`lockctl run`, run.c),
 * and the lock and id API one request at a time (commands.c).
 *
 * The parts, each in a file of its own: the command line (options.c) and
 * the help texts (help.c); the HTTP engine (http.c) and the reading of its
 * answers (answer.c); the lock requests (requests.c); for `run`, the signal
 * self-pipe (signals.c), the descriptors (fds.c), starting the command
 * (spawn.c), the watchdog (watch.c) and the lease (renew.c).  The rules
 * lockctl shares with the gateway -- names, tokens -- are common/'s.
 *
 * This file holds the table of commands and main. */
#include "cli/commands.h"
#include "cli/access.h"
#include "cli/ctl.h"
#include "cli/fds.h"
#include "cli/help.h"
#include "cli/http.h"
#include "cli/options.h"
#include "cli/observe.h"
#include "cli/run.h"
#include "cli/session.h"
#include "common/fatal.h"
#include "common/names.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the commands --------------------------------------------------------- */

static const int allow_run[] = {'t',          'w',     O_SHARED,  O_FAIR,   O_OWNER, O_MAX_HOLD,
                                O_LOCK_DELAY, O_GRACE, O_SESSION, O_STREAM, 'q',     0};
static const int allow_acquire[] = {'t',        'w',          O_SHARED, O_FAIR, O_OWNER,
                                    O_MAX_HOLD, O_LOCK_DELAY, O_TOKEN,  'q',    0};
static const int allow_extend[] = {'t', O_TOKEN, 'q', 0};
static const int allow_release[] = {O_TOKEN, O_FORCE, 'q', 0};
static const int allow_status[] = {'q', 0};
static const int allow_id[] = {'n', 'q', 0};
static const int allow_ls[] = {'q', 0};
static const int allow_watch[] = {'q', 0};
static const int allow_elect[] = {'t', 'w', O_VALUE, O_GRACE, 'q', 0};
static const int allow_observe[] = {'q', 0};

static const struct subcommand subcommands[] = {
    {.name = "run",     .help = help_run,     .allowed = allow_run,     .fn = cmd_run    },
    {.name = "acquire", .help = help_acquire, .allowed = allow_acquire, .fn = cmd_acquire},
    {.name = "extend",  .help = help_extend,  .allowed = allow_extend,  .fn = cmd_extend },
    {.name = "release", .help = help_release, .allowed = allow_release, .fn = cmd_release},
    {.name = "status",  .help = help_status,  .allowed = allow_status,  .fn = cmd_status },
    {.name = "id",      .help = help_id,      .allowed = allow_id,      .fn = cmd_id     },
    {.name = "ls",      .help = help_ls,      .allowed = allow_ls,      .fn = cmd_ls     },
    {.name = "watch",   .help = help_watch,   .allowed = allow_watch,   .fn = cmd_watch  },
    {.name = "elect",   .help = help_elect,   .allowed = allow_elect,   .fn = cmd_elect  },
    {.name = "observe", .help = help_observe, .allowed = allow_observe, .fn = cmd_observe},
};

static const struct subcommand *find_subcommand(const char *name) {
    for (size_t i = 0; i < sizeof subcommands / sizeof subcommands[0]; i++)
        if (strcmp(subcommands[i].name, name) == 0) return &subcommands[i];
    return NULL;
}

/* ---- the command line ----------------------------------------------------- */

#define GO_ON (-1) /* parse_command_line: nothing to exit with, go on */

/* run and elect take a command after NAME. */
static int takes_command(const struct subcommand *sc) {
    return strcmp(sc->name, "run") == 0 || strcmp(sc->name, "elect") == 0;
}

/* lockctl [global options] COMMAND [options] NAME [options] [ARGS...]
 * into o and *sc.  Returns GO_ON, or the status to exit with (help and
 * --version: 0). */
static int parse_command_line(int argc, char **argv, struct opts *o,
                              const struct subcommand **scp) {
    int at, dd, rc = options_parse(NULL, o, argc, argv, 1, &at, &dd);
    if (rc) return rc == 1 ? 0 : rc;
    if (at >= argc) {
        fputs(help_main, stderr);
        return CTL_EXIT_USAGE;
    }
    if (strcmp(argv[at], "help") == 0) {
        const struct subcommand *sc = at + 1 < argc ? find_subcommand(argv[at + 1]) : NULL;
        if (at + 1 < argc && !sc) return usage_error(NULL, "no command '%s'", argv[at + 1]);
        help_print(sc ? sc->help : help_main);
        return 0;
    }
    const struct subcommand *sc = find_subcommand(argv[at]);
    if (!sc) return usage_error(NULL, "no command '%s'", argv[at]);
    o->cmd = sc->name;
    *scp = sc;

    /* Options may come before and after NAME; for run, the command starts
     * at the first word after NAME that is not an option, or after "--". */
    int sub_argc = argc - at;
    char **sub_argv = argv + at;
    int pos = 1;
    for (;;) {
        rc = options_parse(sc, o, sub_argc, sub_argv, pos, &pos, &dd);
        if (rc) return rc == 1 ? 0 : rc;
        if (pos >= sub_argc) break;
        if (!o->name) {
            o->name = sub_argv[pos++];
            if (dd && takes_command(sc)) {
                o->argv = sub_argv + pos;
                break;
            }
            continue;
        }
        if (takes_command(sc)) {
            o->argv = sub_argv + pos;
            break;
        }
        return usage_error(sc->name, "unexpected argument '%s'", sub_argv[pos]);
    }
    const char *what = strcmp(sc->name, "id") == 0 ? "NAMESPACE" : "NAME";
    if (!o->name && strcmp(sc->name, "ls") == 0) return GO_ON; /* PREFIX is optional */
    if (!o->name) return usage_error(sc->name, "missing %s", what);
    /* The gateway's rule (common/names.h), checked here too so that a name
     * never needs escaping in a URL. */
    if (!name_valid(o->name, strlen(o->name))) {
        ctl_say("%s: invalid %s '%s': 1-%d characters of A-Z a-z 0-9 . _ : - (invalid_name)",
                sc->name, strcmp(sc->name, "id") == 0 ? "namespace" : "lock name", o->name,
                NAME_MAX_LEN);
        return CTL_EXIT_REFUSED;
    }
    return GO_ON;
}

/* ---- main ----------------------------------------------------------------- */

int main(int argc, char **argv) {
    fatal_setup("lockctl", CTL_EXIT_INTERNAL);
    fds_remember_inherited();
    const char *env_url = getenv("LOCKGATE_URL");
    options_set_url(env_url && *env_url ? env_url : CTL_DEFAULT_URL);
    access_from_env();
    setvbuf(stdout, NULL, _IOLBF, 0);

    /* The renewer `run --session` starts (session.h); not for people. */
    if (argc > 1 && strcmp(argv[1], "_session-renewer") == 0) {
        if (http_init() < 0) return CTL_EXIT_INTERNAL;
        int rc = session_renewer(argc, argv);
        http_cleanup();
        return rc;
    }

    struct opts o;
    memset(&o, 0, sizeof o);
    o.ttl = o.max_hold = o.lock_delay = -1;
    o.grace = 5000;
    o.count = 1;
    const struct subcommand *sc = NULL;
    int rc = parse_command_line(argc, argv, &o, &sc);
    if (rc != GO_ON) return rc;

    if (http_init() < 0) {
        ctl_say("cannot initialise libcurl");
        return CTL_EXIT_INTERNAL;
    }
    rc = sc->fn(&o);
    fflush(stdout);
    http_cleanup();
    fds_forget();
    return rc;
}
