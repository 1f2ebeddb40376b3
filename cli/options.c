/* options.c -- the command line: getopt_long over each part, every option
 * checked against the ones its command takes, durations parsed. */
#include "cli/options.h"
#include "cli/access.h"
#include "cli/ctl.h"
#include "cli/help.h"
#include "common/decimal.h"

#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static const struct option long_opts[] = {
    {"ttl",        required_argument, 0, 't'         },
    {"wait",       required_argument, 0, 'w'         },
    {"shared",     no_argument,       0, O_SHARED    },
    {"fair",       no_argument,       0, O_FAIR      },
    {"owner",      required_argument, 0, O_OWNER     },
    {"max-hold",   required_argument, 0, O_MAX_HOLD  },
    {"lock-delay", required_argument, 0, O_LOCK_DELAY},
    {"grace",      required_argument, 0, O_GRACE     },
    {"token",      required_argument, 0, O_TOKEN     },
    {"session",    required_argument, 0, O_SESSION   },
    {"count",      required_argument, 0, 'n'         },
    {"quiet",      no_argument,       0, 'q'         },
    {"force",      no_argument,       0, O_FORCE     },
    {"value",      required_argument, 0, O_VALUE     },
    {"stream",     no_argument,       0, O_STREAM    },
    {"verbose",    no_argument,       0, 'v'         },
    {"url",        required_argument, 0, 'u'         },
    {"help",       no_argument,       0, 'h'         },
    {"version",    no_argument,       0, O_VERSION   },
 // clang-format off
    {"api-key-file", required_argument, 0, O_API_KEY_FILE},
    {"cacert",      required_argument, 0, O_CACERT    },
    {"cert",        required_argument, 0, O_CERT      },
    {"key",         required_argument, 0, O_KEY       },
  // clang-format on
    {0,            0,                 0, 0           },
};

int usage_error(const char *cmd, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    char line[512];
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (cmd)
        ctl_say("%s: %s (see 'lockctl %s --help')", cmd, line, cmd);
    else
        ctl_say("%s (see 'lockctl --help')", line);
    return CTL_EXIT_USAGE;
}

void options_set_url(const char *u) {
    snprintf(ctl_url, sizeof ctl_url, "%s", u);
    size_t n = strlen(ctl_url);
    while (n > 0 && ctl_url[n - 1] == '/') ctl_url[--n] = '\0';
}

/* Parses a duration: digits, then nothing or ms (milliseconds), s, m or h.
 * "forever" gives -1 when allowed.  Returns 0, or -1 when malformed. */
static int parse_ms(const char *s, int allow_forever, long long *out) {
    if (allow_forever && (strcmp(s, "forever") == 0 || strcmp(s, "inf") == 0)) {
        *out = -1;
        return 0;
    }
    size_t ndigits = strspn(s, "0123456789");
    const char *end = s + ndigits;
    long long mul;
    if (*end == '\0' || strcmp(end, "ms") == 0)
        mul = 1;
    else if (strcmp(end, "s") == 0)
        mul = 1000;
    else if (strcmp(end, "m") == 0)
        mul = 60000;
    else if (strcmp(end, "h") == 0)
        mul = 3600000;
    else
        return -1;
    long long v; /* at most 10^15 ms: 31,000 years is plenty */
    if (decimal_parse(s, ndigits, 0, 1000000000000000LL / mul, &v) < 0) return -1;
    *out = v * mul;
    return 0;
}

static const char *opt_name(int opt) {
    for (const struct option *lo = long_opts; lo->name; lo++)
        if (lo->val == opt) return lo->name;
    return "?";
}

/* Parses one option of a subcommand into o.  Returns 0, 1 when help or
 * the version was printed (exit 0), or an exit status for a usage error. */
static int take_option(const struct subcommand *sc, struct opts *o, int opt, const char *arg,
                       const char *bad) {
    const char *cmd = sc ? sc->name : NULL;
    int allowed = opt == 'u' || opt == 'v' || opt == 'h' || opt == O_VERSION ||
                  (!sc && opt == 'q') || (opt >= O_API_KEY_FILE && opt <= O_KEY);
    for (const int *a = sc ? sc->allowed : NULL; a && *a && !allowed; a++) allowed = *a == opt;
    if (opt == '?' || opt == ':')
        return usage_error(cmd, "unknown option or missing value: %s", bad);
    if (!allowed) return usage_error(cmd, "--%s does not apply here", opt_name(opt));
    long long *dur = NULL;
    int forever = 0;
    switch (opt) {
    case 'h': help_print(sc && sc->help ? sc->help : help_main); return 1;
    case O_VERSION: printf("lockctl " CTL_VERSION "\n"); return 1;
    case 'u': options_set_url(arg); return 0;
    case O_API_KEY_FILE: return access_key_file(arg) < 0 ? CTL_EXIT_USAGE : 0;
    case O_CACERT: access_set_cacert(arg); return 0;
    case O_CERT: access_set_cert(arg); return 0;
    case O_KEY: access_set_key(arg); return 0;
    case 'v': ctl_verbose = 1; return 0;
    case 'q': o->quiet = 1; return 0;
    case O_SHARED: o->shared = 1; return 0;
    case O_FAIR: o->fair = 1; return 0;
    case O_FORCE: o->force = 1; return 0;
    case O_STREAM: o->stream = 1; return 0;
    case O_OWNER: o->owner = arg; return 0;
    case O_VALUE: o->value = arg; return 0;
    case O_TOKEN: o->token = arg; return 0;
    case O_SESSION: o->session = arg; return 0;
    case 't': dur = &o->ttl; break;
    case 'w':
        dur = &o->wait;
        forever = 1;
        break;
    case O_MAX_HOLD: dur = &o->max_hold; break;
    case O_LOCK_DELAY: dur = &o->lock_delay; break;
    case O_GRACE: dur = &o->grace; break;
    case 'n':
        if (decimal_parse(arg, strlen(arg), 1, LLONG_MAX, &o->count) < 0)
            return usage_error(cmd, "-n wants a count of at least 1, not '%s'", arg);
        return 0;
    default: return usage_error(cmd, "unknown option");
    }
    if (parse_ms(arg, forever, dur) < 0)
        return usage_error(cmd, "--%s wants milliseconds (e.g. 5000, 30s, 5m), not '%s'",
                           opt_name(opt), arg);
    return 0;
}

/* getopt_long over argv from its start, stopping at the first word that is
 * not an option ('+').  Returns as take_option; *stop is where it stopped,
 * *dashdash set when that was right after "--". */
int options_parse(const struct subcommand *sc, struct opts *o, int argc, char **argv, int start,
                  int *stop, int *dashdash) {
    static const char shorts[] = "+:t:w:n:qvu:h";
    optind = start == 1 ? 0 : start; /* 0: start afresh on a new argv */
    opterr = 0;
    *dashdash = 0;
    for (;;) {
        int before = optind;
        int opt = getopt_long(argc, argv, shorts, long_opts, NULL);
        if (opt == -1) {
            *dashdash = optind == before + 1 && strcmp(argv[before], "--") == 0;
            break;
        }
        int rc = take_option(sc, o, opt, optarg, optind - 1 < argc ? argv[optind - 1] : "?");
        if (rc) return rc;
    }
    *stop = optind;
    return 0;
}
