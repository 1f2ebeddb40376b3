/* lockctl.c -- lockgate from the shell: run a command under a lock that is
 * renewed for as long as the command runs (`lockctl run`), and the lock and
 * id API one request at a time (acquire, extend, release, status, id).
 *
 * The file reads top to bottom: exit statuses and help texts; small helpers
 * (time, durations, names, tokens); the HTTP engine; the answers' reading
 * and the one-line error reports; the one-shot subcommands; `run`; main.
 *
 * The HTTP engine is libcurl's multi interface, so that one poll(2), in
 * curl_multi_poll, waits on the gateway's sockets, the renewal timer and a
 * self-pipe that the signal handlers (SIGCHLD among them) write to.  `run`
 * is therefore one loop with no threads: a renewal in flight never delays
 * noticing that the command exited or that a signal arrived. */
#include <cjson/cJSON.h>
#include <curl/curl.h>
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#define CTL_VERSION         "1.0.0"
#define CTL_DEFAULT_URL     "http://127.0.0.1:8080"
#define CTL_NAME_MAX        200    /* API.md: names are 1-200 bytes */
#define CTL_TOKEN_MAX       128    /* API.md: tokens are 22-128 chars */
#define CTL_SERVER_WAIT_MAX 300000 /* the most wait_ms one request may ask */
#define CTL_REQUEST_MS      10000  /* one-shot requests: answer within this */
#define CTL_CONNECT_MS      5000   /* connecting may take at most this */

extern char **environ;

/* ---- exit statuses ------------------------------------------------------------
 * lockctl's own statuses sit where sysexits.h puts them (64 and up), away
 * from the small numbers commands use; `run` otherwise exits with the
 * command's status.  The table is repeated in --help and lockctl.1. */
enum {
    CTL_EXIT_OK = 0,            /* done; run: the command exited 0 */
    CTL_EXIT_NOT_HELD = 1,      /* status: nobody holds the lock */
    CTL_EXIT_USAGE = 64,        /* bad command line */
    CTL_EXIT_REFUSED = 65,      /* the gateway refused the request (4xx, 501) */
    CTL_EXIT_UNAVAILABLE = 69,  /* gateway unreachable, or 5xx */
    CTL_EXIT_INTERNAL = 70,     /* out of memory, fork failed, bad answer */
    CTL_EXIT_BUSY = 75,         /* held by someone else, wait over */
    CTL_EXIT_LEASE_LOST = 76,   /* run: lease lost, command stopped */
    CTL_EXIT_CANNOT_EXEC = 126, /* run: the command cannot be executed */
    CTL_EXIT_NOT_FOUND = 127,   /* run: the command was not found */
};

/* ---- help texts ------------------------------------------------------------------ */

static const char help_exit[] =
    "Exit status:\n"
    "  0      success; for run: the command exited 0\n"
    "  1      status: nobody holds the lock\n"
    "  64     usage error: unknown option, missing argument, malformed number\n"
    "  65     the gateway refused the request: invalid name, field or token, lock\n"
    "         not held or held by another token, feature not offered (4xx, 501)\n"
    "  69     the gateway could not be reached, or answered with a server error (5xx)\n"
    "  70     internal error (out of memory, cannot fork, unreadable answer)\n"
    "  75     busy: the lock is held by someone else and --wait was 0 or ran out\n"
    "  76     run: the lease was lost while the command ran; it was stopped\n"
    "  126    run: the command could not be executed\n"
    "  127    run: the command was not found\n"
    "  other  run: the command's own exit status; 128+N if signal N killed it\n";

static const char help_main[] =
    "Usage: lockctl [--url URL] [-v] COMMAND [ARGS...]\n"
    "A client for lockgate, the HTTP lock gateway: run a command under a\n"
    "distributed lock, kept renewed while it runs, or use the API from the shell.\n"
    "\n"
    "Commands:\n"
    "  run NAME [OPTIONS] [--] CMD [ARGS...]  run CMD while holding lock NAME\n"
    "  acquire NAME [OPTIONS]   take lock NAME; print the answer (JSON), or with\n"
    "                           -q just the token\n"
    "  extend NAME [OPTIONS]    extend a lease (token: --token or $LOCKGATE_TOKEN)\n"
    "  release NAME [OPTIONS]   release a lock (token: --token or $LOCKGATE_TOKEN)\n"
    "  status NAME              show who holds lock NAME (exit 1: nobody does)\n"
    "  id NAMESPACE [-n N]      print N new unique ids, one per line\n"
    "  help [COMMAND]           this text, or a command's\n"
    "\n"
    "Options of every command:\n"
    "  -u, --url URL     the gateway (default: $LOCKGATE_URL, else " CTL_DEFAULT_URL ")\n"
    "  -v, --verbose     report what lockctl does on stderr\n"
    "  -h, --help        help; `lockctl COMMAND --help` for a command's\n"
    "      --version     print the version\n"
    "\n"
    "Durations (MS) are milliseconds; a suffix ms, s, m or h may be given (30s, 5m).\n"
    "Errors are one line on stderr, starting with \"lockctl: \".\n"
    "\n";

static const char help_run[] =
    "Usage: lockctl run NAME [OPTIONS] [--] COMMAND [ARGS...]\n"
    "Take lock NAME (waiting up to --wait), run COMMAND while holding it, renew\n"
    "the lease every third of the TTL for as long as COMMAND runs, release the\n"
    "lock when it exits, and exit with its exit status.\n"
    "\n"
    "  -t, --ttl MS        lease length (default 30000); renewed every MS/3\n"
    "  -w, --wait MS       wait this long for a busy lock (default 0: try once;\n"
    "                      \"forever\": no limit)\n"
    "      --shared        take it in shared (reader) mode\n"
    "      --fair          wait in line: first come, first served\n"
    "      --owner TEXT    shown by `lockctl status` (default \"lockctl on HOST, pid N\")\n"
    "      --max-hold MS   never hold it longer than this, renewals included; when\n"
    "                      it runs out the lease is lost (see below)\n"
    "      --lock-delay MS if the lease is lost, nobody may take the lock for MS\n"
    "      --grace MS      after SIGTERM on a lost lease, wait this long before\n"
    "                      SIGKILL (default 5000)\n"
    "  -q, --quiet         no message when the lock is busy (the status tells)\n"
    "  -u, --url URL, -v, --verbose, -h, --help: as for every command\n"
    "\n"
    "COMMAND gets LOCKGATE_NAME, LOCKGATE_FENCE (the fencing token), LOCKGATE_TOKEN\n"
    "and LOCKGATE_URL in its environment; it is looked up in $PATH.\n"
    "\n"
    "When the lock is busy and the wait is over: exit 75 and, unless -q, one line\n"
    "  lockctl: lock 'NAME' is held by someone else (try again in N s)\n"
    "\n"
    "Lease lost: when a renewal is answered not_held or not_owner (the lease ran\n"
    "out or the lock was taken away), or the gateway cannot be reached until the\n"
    "lease ends (errors and 5xx are retried with backoff, never past the lease),\n"
    "COMMAND's process group gets SIGTERM, SIGKILL after --grace, and lockctl\n"
    "exits 76 whatever COMMAND's status was.\n"
    "\n"
    "Signals: COMMAND runs in a process group of its own, so that lockctl can\n"
    "stop all of it; SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1 and SIGUSR2 sent\n"
    "to lockctl are passed on to that whole group, and lockctl releases the lock\n"
    "once COMMAND has exited.  When lockctl runs in the foreground of a terminal,\n"
    "it hands the terminal to COMMAND's group (Ctrl-C reaches COMMAND, which can\n"
    "read the terminal) and takes it back at the end; Ctrl-Z suspends COMMAND\n"
    "and lockctl together.  While lockctl is suspended it cannot renew: suspended\n"
    "past the lease, the lease is lost, and COMMAND is stopped on resumption.  If\n"
    "lockctl is killed (SIGKILL), COMMAND gets SIGTERM (Linux) and the lock\n"
    "expires at the end of its lease.  Processes COMMAND leaves running in the\n"
    "background after it exits are not waited for: the lock ends with COMMAND.\n"
    "\n";

static const char help_acquire[] =
    "Usage: lockctl acquire NAME [OPTIONS]\n"
    "Take lock NAME and print the gateway's answer (JSON: name, token, fence,\n"
    "mode, count, ttl_ms), or with -q only the token.  Nothing renews this\n"
    "lease: extend it with `lockctl extend`, end it with `lockctl release`.\n"
    "\n"
    "  -t, --ttl MS        lease length (default 30000)\n"
    "  -w, --wait MS       wait this long for a busy lock (default 0: try once;\n"
    "                      \"forever\": no limit)\n"
    "      --token TOKEN   the holder's token (22-128 of A-Z a-z 0-9 _ -): re-enter\n"
    "                      a lock this token holds, or take it under this token\n"
    "      --shared, --fair, --owner TEXT, --max-hold MS, --lock-delay MS: as for run\n"
    "  -q, --quiet         print only the token\n"
    "\n";

static const char help_extend[] =
    "Usage: lockctl extend NAME [--token TOKEN] [--ttl MS]\n"
    "Extend the lease of lock NAME held by TOKEN (default $LOCKGATE_TOKEN) to MS\n"
    "from now (default: the TTL it was taken with); print the answer (JSON).\n"
    "  -q, --quiet         print nothing\n"
    "\n";

static const char help_release[] =
    "Usage: lockctl release NAME [--token TOKEN]\n"
    "Release one level of lock NAME held by TOKEN (default $LOCKGATE_TOKEN);\n"
    "print the answer (JSON: released, count).\n"
    "  -q, --quiet         print nothing\n"
    "\n";

static const char help_status[] =
    "Usage: lockctl status NAME\n"
    "Print who holds lock NAME (JSON: mode, holders, count, fence, ttl_ms, owner),\n"
    "or exit 1 with a message when nobody does.\n"
    "  -q, --quiet         print nothing: only the exit status tells\n"
    "\n";

static const char help_id[] =
    "Usage: lockctl id NAMESPACE [-n N]\n"
    "Print N (default 1, at most 10000) new unique ids of NAMESPACE, one per line.\n"
    "\n";

/* ---- small helpers ---------------------------------------------------------------- */

static int verbose;       /* -v: report steps on stderr */
static char gw_url[2048]; /* gateway base URL, no trailing '/' */

static void say(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    char line[1024];
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    fprintf(stderr, "lockctl: %s\n", line);
}

static void oom(void) {
    fprintf(stderr, "lockctl: out of memory\n");
    exit(CTL_EXIT_INTERNAL);
}

static long long now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static long long min_ll(long long a, long long b) { return a < b ? a : b; }
static long long max_ll(long long a, long long b) { return a > b ? a : b; }

/* The absolute deadline of a --wait (-1: none). */
static long long wait_deadline(long long wait_ms) {
    return wait_ms < 0 ? LLONG_MAX : now_ms() + wait_ms;
}

/* Parses a duration: digits, then nothing or ms (milliseconds), s, m or h.
 * "forever" gives -1 when allowed.  Returns 0, or -1 when malformed. */
static int parse_ms(const char *s, int allow_forever, long long *out) {
    if (allow_forever && (strcmp(s, "forever") == 0 || strcmp(s, "inf") == 0)) {
        *out = -1;
        return 0;
    }
    if (!isdigit((unsigned char)s[0])) return -1;
    errno = 0;
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno) return -1;
    unsigned long long mul;
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
    if (v > 1000000000000000ULL / mul) return -1; /* 31,000 years is plenty */
    *out = (long long)(v * mul);
    return 0;
}

/* API.md: a name or namespace is 1-200 bytes of [A-Za-z0-9._:-].  Checked
 * here as well as by the gateway so that it never needs escaping in a URL. */
static int valid_name(const char *s) {
    size_t n = strlen(s);
    if (n == 0 || n > CTL_NAME_MAX) return 0;
    for (size_t i = 0; i < n; i++)
        if (!isalnum((unsigned char)s[i]) && !strchr("._:-", s[i])) return 0;
    return 1;
}

/* API.md: a token is 22-128 chars of [A-Za-z0-9_-].  Checked so that no
 * header can be smuggled through it. */
static int valid_token(const char *s) {
    size_t n = strlen(s);
    if (n < 22 || n > CTL_TOKEN_MAX) return 0;
    for (size_t i = 0; i < n; i++)
        if (!isalnum((unsigned char)s[i]) && s[i] != '_' && s[i] != '-') return 0;
    return 1;
}

/* A fresh token as the server makes them: 128 random bits, base64url, 22
 * chars.  `run` makes its own so that it can release a lock whose grant it
 * never heard of (an acquire cut short by a signal).  Returns 0 or -1. */
static int token_new(char out[23]) {
    static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    unsigned char r[16];
    size_t got = 0;
    while (got < sizeof r) {
        ssize_t n = getrandom(r + got, sizeof r - got, 0);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return -1;
        got += (size_t)n;
    }
    unsigned bits = 0, nbits = 0, o = 0;
    for (size_t i = 0; i < sizeof r; i++) {
        bits = (bits << 8) | r[i];
        nbits += 8;
        while (nbits >= 6) {
            out[o++] = b64[(bits >> (nbits - 6)) & 63];
            nbits -= 6;
        }
    }
    if (nbits) out[o++] = b64[(bits << (6 - nbits)) & 63];
    out[o] = '\0';
    return 0;
}

/* ---- signals: a self-pipe ------------------------------------------------------------
 * Handlers only write the signal's number to a non-blocking pipe; the loops
 * read it (engine_wait) and act outside signal context.  Only `run` installs
 * them: the one-shot commands keep the default actions (Ctrl-C just ends). */

static int sig_pipe[2] = {-1, -1};    /* [0] polled by engine_wait, [1] handlers */
static unsigned char sig_pending[65]; /* signals read from the pipe, not yet handled */
static const int sig_forwarded[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2};
static const int sig_caught[] = {SIGINT,  SIGTERM, SIGHUP,  SIGQUIT,
                                 SIGUSR1, SIGUSR2, SIGCHLD, SIGTSTP};
static const int sig_ignored[] = {SIGPIPE, SIGTTOU, SIGTTIN};

static void on_signal(int sig) {
    int saved = errno;
    unsigned char b = (unsigned char)sig;
    if (write(sig_pipe[1], &b, 1) < 0) {} /* full: a byte is waiting anyway */
    errno = saved;
}

static int cloexec_nonblock(int fd, int nonblock) {
    int fl = fcntl(fd, F_GETFD);
    if (fl < 0 || fcntl(fd, F_SETFD, fl | FD_CLOEXEC) < 0) return -1;
    if (nonblock) {
        fl = fcntl(fd, F_GETFL);
        if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0) return -1;
    }
    return 0;
}

static int signals_install(void) {
    if (pipe(sig_pipe) < 0 || cloexec_nonblock(sig_pipe[0], 1) < 0 ||
        cloexec_nonblock(sig_pipe[1], 1) < 0)
        return -1;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sigemptyset(&sa.sa_mask);
    sa.sa_handler = on_signal;
    sa.sa_flags = SA_RESTART;
    for (size_t i = 0; i < sizeof sig_caught / sizeof sig_caught[0]; i++)
        sigaction(sig_caught[i], &sa, NULL);
    sa.sa_handler = SIG_IGN;
    for (size_t i = 0; i < sizeof sig_ignored / sizeof sig_ignored[0]; i++)
        sigaction(sig_ignored[i], &sa, NULL);
    return 0;
}

static void signals_drain(void) {
    if (sig_pipe[0] < 0) return;
    unsigned char buf[64];
    ssize_t n;
    while ((n = read(sig_pipe[0], buf, sizeof buf)) > 0)
        for (ssize_t i = 0; i < n; i++)
            if (buf[i] < sizeof sig_pending) sig_pending[buf[i]] = 1;
}

/* Takes a pending signal off the list: returns 1 if sig was pending. */
static int sig_take(int sig) {
    if (!sig_pending[sig]) return 0;
    sig_pending[sig] = 0;
    return 1;
}

/* Takes the first pending signal that asks lockctl to stop, or 0. */
static int sig_take_stop(void) {
    static const int stops[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT};
    for (size_t i = 0; i < sizeof stops / sizeof stops[0]; i++)
        if (sig_take(stops[i])) return stops[i];
    return 0;
}

/* ---- descriptors: nothing of lockctl's leaks into the command ------------------------
 * Our pipes are close-on-exec and libcurl's sockets are opened so, but a
 * library may open something we do not see (curl's wakeup socketpair, a
 * resolver's socket).  So the descriptors open at startup are remembered
 * (they are the caller's, passed on to the command as flock(1) does) and,
 * before each fork, every other one is marked close-on-exec. */

static int *fds_inherited;    /* descriptors open when lockctl started */
static size_t fds_ninherited; /* how many */

/* Calls fn on every open descriptor (from /proc/self/fd, or by probing). */
static void fds_each(void (*fn)(int fd)) {
    DIR *d = opendir("/proc/self/fd");
    if (d) {
        int self = dirfd(d);
        struct dirent *e;
        while ((e = readdir(d)))
            if (isdigit((unsigned char)e->d_name[0]) && atoi(e->d_name) != self)
                fn(atoi(e->d_name));
        closedir(d);
        return;
    }
    long max = sysconf(_SC_OPEN_MAX);
    if (max < 0 || max > 65536) max = 65536;
    for (int fd = 0; fd < max; fd++)
        if (fcntl(fd, F_GETFD) >= 0) fn(fd);
}

static void fds_remember(int fd) {
    int *p = realloc(fds_inherited, (fds_ninherited + 1) * sizeof *p);
    if (!p) oom();
    fds_inherited = p;
    fds_inherited[fds_ninherited++] = fd;
}

static void fds_seal(int fd) {
    for (size_t i = 0; i < fds_ninherited; i++)
        if (fds_inherited[i] == fd) return;
    int fl = fcntl(fd, F_GETFD);
    if (fl >= 0 && !(fl & FD_CLOEXEC)) fcntl(fd, F_SETFD, fl | FD_CLOEXEC);
}

/* ---- the HTTP engine -------------------------------------------------------------------
 * A call is one request.  call_start adds it to the multi handle; engine_wait
 * waits (at most timeout_ms) for any socket, the signal pipe or a timer, and
 * marks finished calls done.  Connections are kept in the multi handle and
 * reused from one call to the next. */

struct call {
    CURL *easy;                 /* libcurl's handle, NULL when not started */
    struct curl_slist *headers; /* the request's headers */
    char *req_body;             /* the request's body, NULL for none */
    char *body;                 /* the answer's body, NUL-terminated */
    size_t len;                 /* its length */
    size_t cap;                 /* its allocation */
    long status;                /* HTTP status, 0 when nothing came back */
    CURLcode rc;                /* the transfer's result, once done */
    int done;                   /* 1 once the transfer has ended */
    char err[CURL_ERROR_SIZE];  /* libcurl's words for rc */
    cJSON *json;                /* the body parsed, or NULL */
    long long sent_at;          /* now_ms() when the request started */
};

static CURLM *multi;

static size_t call_write(char *p, size_t size, size_t n, void *ud) {
    struct call *c = ud;
    size_t add = size * n;
    if (c->len + add + 1 > c->cap) {
        size_t cap = (c->len + add + 1) * 2;
        char *b = realloc(c->body, cap);
        if (!b) oom();
        c->body = b;
        c->cap = cap;
    }
    memcpy(c->body + c->len, p, add);
    c->len += add;
    c->body[c->len] = '\0';
    return add;
}

static curl_socket_t open_cloexec(void *ud, curlsocktype purpose, struct curl_sockaddr *a) {
    return socket(a->family, a->socktype | SOCK_CLOEXEC, a->protocol);
}

static void call_free(struct call *c) {
    if (c->easy) {
        if (!c->done) curl_multi_remove_handle(multi, c->easy);
        curl_easy_cleanup(c->easy);
    }
    curl_slist_free_all(c->headers);
    free(c->req_body);
    free(c->body);
    cJSON_Delete(c->json);
    memset(c, 0, sizeof *c);
}

/* Starts method on path (below the gateway URL) with an optional Lock-Token
 * and JSON body (taken over and freed), to finish within timeout_ms. */
static void call_start(struct call *c, const char *method, const char *path, const char *token,
                       cJSON *body, long long timeout_ms) {
    memset(c, 0, sizeof *c);
    c->easy = curl_easy_init();
    if (!c->easy) oom();
    char url[sizeof gw_url + 512];
    snprintf(url, sizeof url, "%s%s", gw_url, path);
    char th[CTL_TOKEN_MAX + 16];
    c->headers = curl_slist_append(c->headers, "Accept: application/json");
    c->headers = curl_slist_append(c->headers, "Expect:");
    if (token) {
        snprintf(th, sizeof th, "Lock-Token: %s", token);
        c->headers = curl_slist_append(c->headers, th);
    }
    if (body) {
        c->req_body = cJSON_PrintUnformatted(body);
        cJSON_Delete(body);
        if (!c->req_body) oom();
        c->headers = curl_slist_append(c->headers, "Content-Type: application/json");
    }
    if (!c->headers) oom();
    CURL *e = c->easy;
    curl_easy_setopt(e, CURLOPT_URL, url);
    curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
    if (strcmp(method, "GET") == 0) {
        curl_easy_setopt(e, CURLOPT_HTTPGET, 1L);
    } else {
        curl_easy_setopt(e, CURLOPT_POSTFIELDS, c->req_body ? c->req_body : "");
        curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE, c->req_body ? (long)strlen(c->req_body) : 0L);
        curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, method);
    }
    curl_easy_setopt(e, CURLOPT_HTTPHEADER, c->headers);
    curl_easy_setopt(e, CURLOPT_USERAGENT, "lockctl/" CTL_VERSION);
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, call_write);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, c);
    curl_easy_setopt(e, CURLOPT_PRIVATE, c);
    curl_easy_setopt(e, CURLOPT_ERRORBUFFER, c->err);
    curl_easy_setopt(e, CURLOPT_OPENSOCKETFUNCTION, open_cloexec);
    curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    timeout_ms = max_ll(timeout_ms, 1);
    curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, (long)min_ll(timeout_ms, LONG_MAX));
    curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, (long)min_ll(timeout_ms, CTL_CONNECT_MS));
    c->sent_at = now_ms();
    if (curl_multi_add_handle(multi, e) != CURLM_OK) oom();
}

/* Waits up to timeout_ms for the gateway, a signal or a timer; drives the
 * transfers and marks the finished ones done. */
static void engine_wait(long long timeout_ms) {
    struct curl_waitfd extra = {.fd = sig_pipe[0], .events = CURL_WAIT_POLLIN};
    int nfds = 0, running = 0;
    timeout_ms = max_ll(0, min_ll(timeout_ms, INT_MAX));
    curl_multi_poll(multi, sig_pipe[0] >= 0 ? &extra : NULL, sig_pipe[0] >= 0 ? 1 : 0,
                    (int)timeout_ms, &nfds);
    curl_multi_perform(multi, &running);
    CURLMsg *m;
    int left;
    while ((m = curl_multi_info_read(multi, &left))) {
        if (m->msg != CURLMSG_DONE) continue;
        struct call *c = NULL;
        curl_easy_getinfo(m->easy_handle, CURLINFO_PRIVATE, (char **)&c);
        c->rc = m->data.result;
        if (c->rc == CURLE_OK) curl_easy_getinfo(c->easy, CURLINFO_RESPONSE_CODE, &c->status);
        if (c->body) c->json = cJSON_ParseWithLength(c->body, c->len);
        curl_multi_remove_handle(multi, c->easy);
        c->done = 1;
    }
    signals_drain();
}

/* Runs a started call to its end.  Returns 0, or the number of a signal
 * asking lockctl to stop (then the call is abandoned, still to be freed). */
static int call_finish(struct call *c) {
    while (!c->done) {
        engine_wait(1000);
        int sig = sig_take_stop();
        if (sig) return sig;
    }
    return 0;
}

/* Sleeps ms, or less when a stop signal comes (returned, else 0). */
static int sleep_ms(long long ms) {
    long long end = now_ms() + ms;
    for (long long left = ms; left > 0; left = end - now_ms()) {
        engine_wait(left);
        int sig = sig_take_stop();
        if (sig) return sig;
    }
    return 0;
}

/* ---- reading answers ---------------------------------------------------------------- */

enum outcome {
    OUT_OK,      /* 2xx */
    OUT_BUSY,    /* 409 lock_busy */
    OUT_GONE,    /* 404 not_held or 409 not_owner: the token holds nothing */
    OUT_REFUSED, /* any other 4xx, and 501: asking again will not help */
    OUT_DOWN,    /* no answer, or 5xx: asking again later may */
};

static const char *jstr(const cJSON *o, const char *key) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

static long long jint(const cJSON *o, const char *key, long long dflt) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsNumber(v) ? (long long)v->valuedouble : dflt;
}

/* A number member copied from the raw body as digits: fences may pass 2^53,
 * which a double (cJSON's number) does not hold exactly.  The gateway's
 * bodies put no key inside a string unescaped, so the first match is it. */
static int raw_int(const char *body, const char *key, char *out, size_t cap) {
    char pat[64];
    snprintf(pat, sizeof pat, "\"%s\"", key);
    const char *p = body ? strstr(body, pat) : NULL;
    if (!p) return -1;
    p += strlen(pat);
    while (*p == ' ' || *p == ':') p++;
    size_t n = 0;
    while (isdigit((unsigned char)p[n]) && n + 1 < cap) {
        out[n] = p[n];
        n++;
    }
    out[n] = '\0';
    return n ? 0 : -1;
}

static enum outcome call_outcome(const struct call *c) {
    if (c->rc != CURLE_OK || c->status == 0) return OUT_DOWN;
    if (c->status >= 200 && c->status < 300) return OUT_OK;
    const char *code = jstr(c->json, "code");
    code = code ? code : "";
    if (c->status == 409 && strcmp(code, "lock_busy") == 0) return OUT_BUSY;
    if ((c->status == 404 && strcmp(code, "not_held") == 0) ||
        (c->status == 409 && strcmp(code, "not_owner") == 0))
        return OUT_GONE;
    if ((c->status >= 500 && c->status != 501) || c->status == 429) return OUT_DOWN;
    return OUT_REFUSED;
}

/* Says in a few words why a call failed, into out. */
static void call_why(const struct call *c, char *out, size_t cap) {
    if (c->rc != CURLE_OK) {
        if (c->rc == CURLE_OPERATION_TIMEDOUT)
            snprintf(out, cap, "the gateway at %.300s did not answer in time", gw_url);
        else
            snprintf(out, cap, "cannot reach the gateway at %.300s: %.300s", gw_url,
                     c->err[0] ? c->err : curl_easy_strerror(c->rc));
        return;
    }
    const char *detail = jstr(c->json, "detail"), *code = jstr(c->json, "code");
    if (detail && code)
        snprintf(out, cap, "%s (%s)", detail, code);
    else if (code)
        snprintf(out, cap, "HTTP %ld (%s)", c->status, code);
    else
        snprintf(out, cap, "HTTP %ld from the gateway", c->status);
}

/* Prints the one-line error for a call that did not succeed and returns
 * the exit status it means.  what names the request ("acquire 'x'"). */
static int call_report(const struct call *c, const char *what) {
    char why[768];
    call_why(c, why, sizeof why);
    switch (call_outcome(c)) {
    case OUT_DOWN:
        if (c->rc != CURLE_OK)
            say("%s", why);
        else
            say("%s: gateway error %ld: %s", what, c->status, why);
        return CTL_EXIT_UNAVAILABLE;
    case OUT_BUSY:
    case OUT_GONE:
    case OUT_REFUSED: say("%s: %s", what, why); return CTL_EXIT_REFUSED;
    case OUT_OK: break;
    }
    return CTL_EXIT_OK;
}

static void print_body(const struct call *c) {
    fputs(c->body ? c->body : "", stdout);
    if (!c->len || c->body[c->len - 1] != '\n') putchar('\n');
}

static void say_busy(const char *name, long long retry_after_ms) {
    long long s = retry_after_ms > 0 ? (retry_after_ms + 999) / 1000 : 1;
    say("lock '%s' is held by someone else (try again in %lld s)", name, s);
}

/* ---- options -------------------------------------------------------------------------- */

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
    long long count;      /* id -n */
    int quiet;            /* -q */
};

enum { O_SHARED = 256, O_FAIR, O_OWNER, O_MAX_HOLD, O_LOCK_DELAY, O_GRACE, O_TOKEN, O_VERSION };

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
    {"count",      required_argument, 0, 'n'         },
    {"quiet",      no_argument,       0, 'q'         },
    {"verbose",    no_argument,       0, 'v'         },
    {"url",        required_argument, 0, 'u'         },
    {"help",       no_argument,       0, 'h'         },
    {"version",    no_argument,       0, O_VERSION   },
    {0,            0,                 0, 0           },
};

struct subcommand {
    const char *name;          /* as typed */
    const char *help;          /* its --help text */
    const int *allowed;        /* options it takes besides u, v, h; 0 ends */
    int (*fn)(struct opts *o); /* does it; returns the exit status */
};

static int usage_error(const char *cmd, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    char line[512];
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (cmd)
        say("%s: %s (see 'lockctl %s --help')", cmd, line, cmd);
    else
        say("%s (see 'lockctl --help')", line);
    return CTL_EXIT_USAGE;
}

static void set_url(const char *u) {
    snprintf(gw_url, sizeof gw_url, "%s", u);
    size_t n = strlen(gw_url);
    while (n > 0 && gw_url[n - 1] == '/') gw_url[--n] = '\0';
}

/* ---- building requests ------------------------------------------------------------------ */

static void lock_path(char *out, size_t cap, const char *name) {
    snprintf(out, cap, "/v1/locks/%s", name);
}

static void add_int(cJSON *o, const char *key, long long v) {
    if (!cJSON_AddNumberToObject(o, key, (double)v)) oom();
}

/* The body of a POST /v1/locks/{name} from the options; wait_ms as given. */
static cJSON *acquire_body(const struct opts *o, long long wait_ms) {
    cJSON *b = cJSON_CreateObject();
    if (!b) oom();
    if (o->ttl >= 0) add_int(b, "ttl_ms", o->ttl);
    if (wait_ms > 0) add_int(b, "wait_ms", wait_ms);
    if (o->shared && !cJSON_AddStringToObject(b, "mode", "shared")) oom();
    if (o->fair && !cJSON_AddBoolToObject(b, "fair", 1)) oom();
    if (o->owner && !cJSON_AddStringToObject(b, "owner", o->owner)) oom();
    if (o->max_hold >= 0) add_int(b, "max_hold_ms", o->max_hold);
    if (o->lock_delay >= 0) add_int(b, "lock_delay_ms", o->lock_delay);
    return b;
}

/* Acquires the lock o->name under token (NULL: the gateway makes one),
 * waiting up to o->wait.  The gateway is asked to wait (wait_ms) and, when
 * it answers lock_busy with time left -- a gateway that does not wait, or a
 * wait longer than one request may ask -- lockctl tries again after
 * retry_after_ms, the time left, or a backoff from 50 ms to 1 s, whichever
 * is shortest (the backoff notices a release before the holder's lease
 * would have run out).  With time left, a gateway that cannot be reached
 * or answers 5xx is tried again too.
 *
 * deadline is absolute (now_ms() + o->wait; LLONG_MAX to wait forever).
 * Returns OUT_OK with c holding the answer, OUT_BUSY with *retry_after set,
 * OUT_REFUSED/OUT_GONE/OUT_DOWN with c holding the failed call, or -sig
 * when a stop signal came (c is then freed). */
static int acquire_loop(const struct opts *o, const char *token, struct call *c,
                        long long *retry_after, long long deadline) {
    char path[256];
    lock_path(path, sizeof path, o->name);
    long long backoff = 50;
    int warned = 0;
    for (;;) {
        long long left = o->wait < 0 ? CTL_SERVER_WAIT_MAX : max_ll(0, deadline - now_ms());
        long long ask = min_ll(left, CTL_SERVER_WAIT_MAX);
        call_start(c, "POST", path, token, acquire_body(o, ask), ask + CTL_REQUEST_MS);
        int sig = call_finish(c);
        if (sig) {
            call_free(c);
            return -sig;
        }
        enum outcome out = call_outcome(c);
        if (out == OUT_OK || out == OUT_REFUSED || out == OUT_GONE) return out;
        left = deadline - now_ms();
        long long pause = backoff;
        if (out == OUT_BUSY) {
            *retry_after = jint(c->json, "retry_after_ms", 1000);
            pause = min_ll(pause, max_ll(*retry_after, 1));
        }
        if (left <= 0) return out;
        if (verbose || (out == OUT_DOWN && !warned)) {
            /* Said once even without -v: a wrong --url must not wait mutely. */
            char why[768];
            call_why(c, why, sizeof why);
            if (verbose)
                say("acquire '%s': %s; trying again in %lld ms", o->name,
                    out == OUT_BUSY ? "busy" : why, min_ll(pause, left));
            else
                say("acquire '%s': %s; trying again while --wait lasts", o->name, why);
            warned = out == OUT_DOWN;
        }
        call_free(c);
        sig = sleep_ms(min_ll(pause, left));
        if (sig) return -sig;
        backoff = min_ll(backoff * 2, 1000);
    }
}

/* ---- the one-shot subcommands ----------------------------------------------------------- */

static int cmd_acquire(struct opts *o) {
    if (o->token && !valid_token(o->token))
        return usage_error("acquire", "a token is 22-128 characters of A-Z a-z 0-9 _ -");
    struct call c;
    long long retry_after = 0;
    char what[256];
    snprintf(what, sizeof what, "acquire '%s'", o->name);
    int out = acquire_loop(o, o->token, &c, &retry_after, wait_deadline(o->wait));
    int rc = CTL_EXIT_OK;
    if (out == OUT_OK) {
        if (o->quiet) {
            const char *t = jstr(c.json, "token");
            if (!t) {
                say("%s: the gateway's answer has no token", what);
                rc = CTL_EXIT_INTERNAL;
            } else {
                puts(t);
            }
        } else {
            print_body(&c);
        }
    } else if (out == OUT_BUSY) {
        say_busy(o->name, retry_after);
        rc = CTL_EXIT_BUSY;
    } else {
        rc = call_report(&c, what);
    }
    call_free(&c);
    return rc;
}

/* extend, release, status: one request, the answer printed. */
static int one_request(struct opts *o, const char *method, const char *token, cJSON *body) {
    char path[256], what[256];
    lock_path(path, sizeof path, o->name);
    snprintf(what, sizeof what, "%s '%s'", o->cmd, o->name);
    struct call c;
    call_start(&c, method, path, token, body, CTL_REQUEST_MS);
    call_finish(&c);
    int rc = CTL_EXIT_OK;
    if (call_outcome(&c) == OUT_OK) {
        if (!o->quiet) print_body(&c);
    } else if (strcmp(o->cmd, "status") == 0 && c.status == 404 && call_outcome(&c) == OUT_GONE) {
        if (!o->quiet) say("lock '%s' is not held", o->name);
        rc = CTL_EXIT_NOT_HELD;
    } else {
        rc = call_report(&c, what);
    }
    call_free(&c);
    return rc;
}

static const char *token_arg(struct opts *o, int *rc) {
    const char *t = o->token ? o->token : getenv("LOCKGATE_TOKEN");
    if (!t || !*t) {
        *rc = usage_error(o->cmd, "no token: give --token or set LOCKGATE_TOKEN");
        return NULL;
    }
    if (!valid_token(t)) {
        *rc = usage_error(o->cmd, "a token is 22-128 characters of A-Z a-z 0-9 _ -");
        return NULL;
    }
    return t;
}

static int cmd_extend(struct opts *o) {
    int rc = 0;
    const char *t = token_arg(o, &rc);
    if (!t) return rc;
    cJSON *b = NULL;
    if (o->ttl >= 0) {
        if (!(b = cJSON_CreateObject())) oom();
        add_int(b, "ttl_ms", o->ttl);
    }
    return one_request(o, "PATCH", t, b);
}

static int cmd_release(struct opts *o) {
    int rc = 0;
    const char *t = token_arg(o, &rc);
    return t ? one_request(o, "DELETE", t, NULL) : rc;
}

static int cmd_status(struct opts *o) { return one_request(o, "GET", NULL, NULL); }

static int cmd_id(struct opts *o) {
    char path[256], what[256];
    snprintf(path, sizeof path, "/v1/ids/%s?count=%lld", o->name, o->count);
    snprintf(what, sizeof what, "id '%s'", o->name);
    struct call c;
    call_start(&c, "POST", path, NULL, NULL, CTL_REQUEST_MS);
    call_finish(&c);
    int rc = CTL_EXIT_OK;
    const cJSON *ids = cJSON_GetObjectItemCaseSensitive(c.json, "ids");
    if (call_outcome(&c) != OUT_OK) {
        const char *code = jstr(c.json, "code");
        if (c.status == 404 && (!code || strcmp(code, "not_found") == 0)) {
            say("%s: the gateway at %s does not serve /v1/ids (HTTP 404)", what, gw_url);
            rc = CTL_EXIT_REFUSED;
        } else {
            rc = call_report(&c, what);
        }
    } else if (!cJSON_IsArray(ids)) {
        say("%s: the gateway's answer has no ids", what);
        rc = CTL_EXIT_INTERNAL;
    } else {
        const cJSON *id;
        cJSON_ArrayForEach(id, ids) {
            if (cJSON_IsString(id)) {
                puts(id->valuestring);
            } else {
                char *s = cJSON_PrintUnformatted(id);
                if (!s) oom();
                puts(s);
                cJSON_free(s);
            }
        }
    }
    call_free(&c);
    return rc;
}

/* ---- run: the command and its watchdog ---------------------------------------------------- */

/* What `run` keeps while the command runs. */
struct watch {
    const struct opts *o;  /* the command line */
    char token[32];        /* our token (we make it) */
    char fence[32];        /* the fence, as digits */
    long long ttl;         /* the lease length asked for */
    long long acquired_at; /* now_ms() when the acquire was sent */
    long long lease_end;   /* the lock is surely ours until then */
    long long next_renew;  /* when to send the next extension */
    long long backoff;     /* pause before retrying a failed extension */
    struct call ext;       /* the extension in flight */
    int ext_busy;          /* 1 while ext is in flight */
    pid_t pid;             /* the command; also its process group */
    int tty;               /* the terminal handed to the command, or -1 */
    int lost;              /* 1 once the lease is lost */
    int lost_known_gone;   /* lost because the gateway said not held */
    int capped;            /* the last extension was cut short by max-hold */
    long long kill_at;     /* lost: when SIGKILL follows SIGTERM */
    int killed;            /* SIGKILL sent */
};

/* Finds the program as execvp would, before the lock is taken, so that a
 * typo costs no lock.  Returns 0 with its path in out, or an errno. */
static int find_program(const char *cmd, char *out, size_t cap) {
    struct stat st;
    if (strchr(cmd, '/')) {
        snprintf(out, cap, "%s", cmd);
        if (stat(cmd, &st) < 0) return errno;
        if (S_ISDIR(st.st_mode)) return EISDIR;
        return access(cmd, X_OK) == 0 ? 0 : errno;
    }
    const char *path = getenv("PATH");
    if (!path) path = "/usr/local/bin:/usr/bin:/bin";
    int err = ENOENT;
    for (const char *p = path;;) {
        const char *colon = strchr(p, ':');
        size_t n = colon ? (size_t)(colon - p) : strlen(p);
        snprintf(out, cap, "%.*s%s%s", (int)n, n ? p : ".", "/", cmd);
        if (stat(out, &st) == 0 && !S_ISDIR(st.st_mode)) {
            if (access(out, X_OK) == 0) return 0;
            err = EACCES;
        }
        if (!colon) break;
        p = colon + 1;
    }
    return err;
}

/* Starts the command in a process group of its own (and, when tty >= 0,
 * gives it the terminal).  Between fork and exec the child makes only
 * async-signal-safe calls; what it needs was prepared before.  Every signal
 * is blocked across fork, so that no handler of ours runs in the child.
 * Returns the pid, or -1 with *err set (an errno; the child's exec failed
 * when *exec_failed is 1). */
static pid_t spawn(char *path, char **argv, char **sh_argv, int tty, int *err, int *exec_failed) {
    fds_each(fds_seal);
    int report[2];
    *exec_failed = 0;
    if (pipe(report) < 0 || cloexec_nonblock(report[0], 0) < 0 ||
        cloexec_nonblock(report[1], 0) < 0) {
        *err = errno;
        return -1;
    }
    sigset_t all, old;
    sigfillset(&all);
    sigprocmask(SIG_SETMASK, &all, &old);
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid == 0) {
        setpgid(0, 0);
        if (tty >= 0) tcsetpgrp(tty, getpid()); /* SIGTTOU is blocked: allowed */
        /* lockctl killed outright: the command is told (Linux). */
        prctl(PR_SET_PDEATHSIG, SIGTERM);
        if (getppid() != parent) _exit(CTL_EXIT_LEASE_LOST);
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = SIG_DFL;
        sigemptyset(&sa.sa_mask);
        for (size_t i = 0; i < sizeof sig_caught / sizeof sig_caught[0]; i++)
            sigaction(sig_caught[i], &sa, NULL);
        for (size_t i = 0; i < sizeof sig_ignored / sizeof sig_ignored[0]; i++)
            sigaction(sig_ignored[i], &sa, NULL);
        sigprocmask(SIG_SETMASK, &old, NULL);
        execve(path, argv, environ);
        int e = errno;
        if (e == ENOEXEC) { /* a script without #!: as execvp, run it with sh */
            execve("/bin/sh", sh_argv, environ);
            e = errno;
        }
        if (write(report[1], &e, sizeof e) < 0) {}
        _exit(e == ENOENT ? CTL_EXIT_NOT_FOUND : CTL_EXIT_CANNOT_EXEC);
    }
    int fork_errno = errno;
    if (pid > 0) setpgid(pid, pid); /* also here: no race with our kill(-pid) */
    sigprocmask(SIG_SETMASK, &old, NULL);
    close(report[1]);
    if (pid < 0) {
        close(report[0]);
        *err = fork_errno;
        return -1;
    }
    int e = 0;
    ssize_t n;
    while ((n = read(report[0], &e, sizeof e)) < 0 && errno == EINTR) {}
    close(report[0]);
    if (n == (ssize_t)sizeof e) {
        *exec_failed = 1;
        *err = e;
    }
    return pid;
}

/* The terminal, if lockctl is in its foreground: then the command gets it. */
static int terminal_to_hand_over(void) {
    int fd = open("/dev/tty", O_RDWR | O_NOCTTY | O_CLOEXEC);
    if (fd < 0) return -1;
    if (tcgetpgrp(fd) != getpgrp()) {
        close(fd);
        return -1;
    }
    return fd;
}

/* Ctrl-Z (the command stopped on the terminal) or SIGTSTP to lockctl: stop
 * the command's group and lockctl together, as a shell job, and go on
 * together when continued.  The lease is not renewed meanwhile; the loop
 * finds out on resumption whether it outlived the suspension. */
static void suspend_together(struct watch *w) {
    kill(-w->pid, SIGSTOP);
    if (w->tty >= 0 && tcgetpgrp(w->tty) == w->pid) tcsetpgrp(w->tty, getpgrp());
    raise(SIGSTOP);
    if (w->tty >= 0 && tcgetpgrp(w->tty) == getpgrp()) tcsetpgrp(w->tty, w->pid);
    kill(-w->pid, SIGCONT);
}

/* The lease is gone: SIGTERM to the command's group now, SIGKILL later. */
static void lose(struct watch *w, int known_gone, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    char why[768];
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    w->lost = 1;
    w->lost_known_gone = known_gone;
    if (w->ext_busy) {
        call_free(&w->ext);
        w->ext_busy = 0;
    }
    say("lost lock '%s': %s; stopping the command", w->o->name, why);
    kill(-w->pid, SIGTERM);
    kill(-w->pid, SIGCONT);
    w->kill_at = now_ms() + w->o->grace;
}

/* An extension has come back: move the lease on, retry, or give up. */
static void renewal_done(struct watch *w) {
    struct call *c = &w->ext;
    enum outcome out = call_outcome(c);
    long long now = now_ms();
    if (out == OUT_OK) {
        long long ttl = jint(c->json, "ttl_ms", 0);
        /* The gateway counts the new lease from when Redis ran the
         * extension, after we sent it: counting from sending is safe. */
        w->lease_end = max_ll(w->lease_end, c->sent_at + ttl);
        w->capped = ttl < w->ttl;
        w->next_renew = c->sent_at + w->ttl / 3;
        w->backoff = 100;
        if (verbose) say("extended lock '%s' by %lld ms", w->o->name, ttl);
    } else {
        char why[768];
        call_why(c, why, sizeof why);
        if (out == OUT_DOWN) {
            long long left = w->lease_end - now;
            w->next_renew = now + min_ll(w->backoff, max_ll(left / 2, 1));
            w->backoff = min_ll(w->backoff * 2, max_ll(w->ttl / 6, 200));
            if (verbose)
                say("extend '%s': %s; trying again in %lld ms (lease ends in %lld ms)", w->o->name,
                    why, w->next_renew - now, left);
        } else {
            int gone = out == OUT_GONE;
            call_free(c);
            w->ext_busy = 0;
            if (w->o->max_hold >= 0 && now >= w->acquired_at + w->o->max_hold - w->ttl / 3)
                lose(w, gone, "--max-hold of %lld ms reached (%s)", w->o->max_hold, why);
            else
                lose(w, gone, "the gateway answered: %s", why);
            return;
        }
    }
    call_free(c);
    w->ext_busy = 0;
}

static void renewal_start(struct watch *w) {
    char path[256];
    lock_path(path, sizeof path, w->o->name);
    cJSON *b = cJSON_CreateObject();
    if (!b) oom();
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
    char path[256];
    lock_path(path, sizeof path, w->o->name);
    long long until = min_ll(now_ms() + 5000, max_ll(w->lease_end, now_ms() + 1000));
    if (quietly) until = now_ms() + 300;
    long long backoff = 100;
    for (;;) {
        struct call c;
        call_start(&c, "DELETE", path, w->token, NULL, max_ll(until - now_ms(), 1));
        while (!c.done) engine_wait(1000);
        enum outcome out = call_outcome(&c);
        if (out == OUT_OK) {
            if (verbose) say("released lock '%s'", w->o->name);
            call_free(&c);
            return;
        }
        char why[768];
        call_why(&c, why, sizeof why);
        call_free(&c);
        if (out != OUT_DOWN || quietly || now_ms() + backoff >= until) {
            if (!quietly)
                say("warning: could not release lock '%s' (%s); it expires at the end "
                    "of its lease",
                    w->o->name, why);
            return;
        }
        long long t = now_ms() + backoff;
        while (now_ms() < t) engine_wait(t - now_ms());
        backoff *= 2;
    }
}

/* Best effort, after an acquire cut short by a signal: the gateway may
 * have granted it without our hearing. */
static void release_unheard(const struct opts *o, const char *token) {
    char path[256];
    lock_path(path, sizeof path, o->name);
    struct call c;
    call_start(&c, "DELETE", path, token, NULL, 1000);
    while (!c.done) engine_wait(1000);
    call_free(&c);
}

/* Dates a lease that was granted at an unknown moment: an extension sent
 * now counts from now.  Tries until `until` (after which the lease is over
 * in any case).  Returns OUT_OK with w->lease_end set, another outcome with
 * c holding the failed call, or -sig when a stop signal came. */
static int lease_date(struct watch *w, long long until, struct call *c) {
    char path[256];
    lock_path(path, sizeof path, w->o->name);
    long long backoff = 100;
    for (;;) {
        cJSON *b = cJSON_CreateObject();
        if (!b) oom();
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

static int child_status(int st) {
    if (WIFEXITED(st)) return WEXITSTATUS(st);
    if (WIFSIGNALED(st)) return 128 + WTERMSIG(st);
    return CTL_EXIT_INTERNAL;
}

/* The watchdog: one loop until the command has exited, waking for the
 * command (SIGCHLD), a signal, a renewal that came back, or a timer (next
 * renewal, end of lease, SIGKILL after the grace).  Returns the command's
 * wait status. */
static int watch(struct watch *w) {
    for (;;) {
        /* The command: exited (left unreaped until its group is dealt
         * with, so that its pid, the group's id, cannot be reused), or
         * stopped on the terminal. */
        siginfo_t si;
        memset(&si, 0, sizeof si);
        int flags = WEXITED | WNOHANG | WNOWAIT | (w->tty >= 0 ? WSTOPPED : 0);
        if (waitid(P_PID, (id_t)w->pid, &si, flags) == 0 && si.si_pid == w->pid) {
            if (si.si_code == CLD_STOPPED) {
                siginfo_t drop;
                waitid(P_PID, (id_t)w->pid, &drop, WSTOPPED | WNOHANG);
                suspend_together(w);
                continue;
            }
            if (w->lost) kill(-w->pid, SIGKILL); /* what the command left behind */
            int st = 0;
            while (waitpid(w->pid, &st, 0) < 0 && errno == EINTR) {}
            return st;
        }
        sig_take(SIGCHLD);
        for (size_t i = 0; i < sizeof sig_forwarded / sizeof sig_forwarded[0]; i++)
            if (sig_take(sig_forwarded[i])) {
                if (verbose) say("passing signal %d on to the command", sig_forwarded[i]);
                kill(-w->pid, sig_forwarded[i]);
            }
        if (sig_take(SIGTSTP)) suspend_together(w);

        if (w->ext_busy && w->ext.done) renewal_done(w);
        long long now = now_ms();
        if (!w->lost && now >= w->lease_end) {
            if (w->capped)
                lose(w, 0, "--max-hold of %lld ms reached", w->o->max_hold);
            else
                lose(w, 0, "the lease ran out before the gateway at %s could extend it", gw_url);
        }
        if (w->lost && !w->killed && now >= w->kill_at) {
            if (verbose) say("the command outlived --grace: SIGKILL");
            kill(-w->pid, SIGKILL);
            w->killed = 1;
        }
        if (!w->lost && !w->ext_busy && now >= w->next_renew) renewal_start(w);

        long long wake = now + 1000; /* also a safety net for a lost SIGCHLD */
        if (!w->lost) {
            wake = min_ll(wake, w->lease_end);
            if (!w->ext_busy) wake = min_ll(wake, w->next_renew);
        } else if (!w->killed) {
            wake = min_ll(wake, w->kill_at);
        }
        engine_wait(wake - now);
    }
}

static int cmd_run(struct opts *o) {
    if (!o->argv || !o->argv[0]) return usage_error("run", "no command to run after NAME");
    char path[PATH_MAX];
    int err = find_program(o->argv[0], path, sizeof path);
    if (err) {
        say("cannot run '%s': %s", o->argv[0], err == ENOENT ? "command not found" : strerror(err));
        return err == ENOENT ? CTL_EXIT_NOT_FOUND : CTL_EXIT_CANNOT_EXEC;
    }
    size_t argc = 0;
    while (o->argv[argc]) argc++;
    char **sh_argv = calloc(argc + 2, sizeof *sh_argv);
    if (!sh_argv) oom();
    sh_argv[0] = "sh";
    sh_argv[1] = path;
    for (size_t i = 1; i < argc; i++) sh_argv[i + 1] = o->argv[i];

    struct watch w;
    memset(&w, 0, sizeof w);
    w.o = o;
    w.tty = -1;
    w.ttl = o->ttl >= 0 ? o->ttl : 30000;
    w.backoff = 100;
    if (token_new(w.token) < 0) {
        say("cannot make a token: %s", strerror(errno));
        free(sh_argv);
        return CTL_EXIT_INTERNAL;
    }
    if (signals_install() < 0) {
        say("cannot set up signals: %s", strerror(errno));
        free(sh_argv);
        return CTL_EXIT_INTERNAL;
    }
    char owner[CTL_NAME_MAX + 1], host[128] = "";
    struct opts oo = *o;
    if (!oo.owner) {
        gethostname(host, sizeof host - 1);
        snprintf(owner, sizeof owner, "lockctl on %s, pid %ld", host[0] ? host : "?",
                 (long)getpid());
        oo.owner = owner;
    }
    oo.ttl = w.ttl;

    /* Acquire. */
    struct call c;
    long long retry_after = 0, deadline = wait_deadline(o->wait);
    char what[256];
    snprintf(what, sizeof what, "acquire '%s'", o->name);
    for (;;) {
        int maybe_held = 0; /* granted, perhaps, but not confirmed */
        int out = acquire_loop(&oo, w.token, &c, &retry_after, deadline);
        if (out == OUT_OK) {
            w.acquired_at = c.sent_at;
            w.lease_end = c.sent_at + jint(c.json, "ttl_ms", w.ttl);
            if (raw_int(c.body, "fence", w.fence, sizeof w.fence) < 0) strcpy(w.fence, "0");
            long long took = now_ms() - c.sent_at;
            call_free(&c);
            if (verbose) say("acquired lock '%s' (fence %s, ttl %lld ms)", o->name, w.fence, w.ttl);
            w.next_renew = w.acquired_at + w.ttl / 3;
            if (took <= w.ttl / 3) break;
            /* Granted at an unknown moment of a long wait: date the lease
             * by an extension sent now, before relying on it. */
            out = lease_date(&w, now_ms() + w.ttl, &c);
            if (out == OUT_OK) {
                w.next_renew = now_ms() + w.ttl / 3;
                break;
            }
            if (out == OUT_GONE) {
                if (verbose) say("the lease of '%s' ran out before it was heard of", o->name);
                call_free(&c);
                continue; /* what is left of --wait, or one more try */
            }
            snprintf(what, sizeof what, "extend '%s'", o->name);
            maybe_held = 1;
        }
        if (out < 0) {
            release_unheard(o, w.token);
            free(sh_argv);
            return 128 - out;
        }
        int rc;
        if (out == OUT_BUSY) {
            if (!o->quiet) say_busy(o->name, retry_after);
            rc = CTL_EXIT_BUSY;
        } else {
            rc = call_report(&c, what);
        }
        call_free(&c);
        if (maybe_held) release_unheard(o, w.token);
        free(sh_argv);
        return rc;
    }

    /* The command. */
    setenv("LOCKGATE_NAME", o->name, 1);
    setenv("LOCKGATE_FENCE", w.fence, 1);
    setenv("LOCKGATE_TOKEN", w.token, 1);
    setenv("LOCKGATE_URL", gw_url, 1);
    /* Signals that came while acquiring and did not stop it (USR1, Ctrl-Z)
     * were not meant for a command that was not running yet. */
    memset(sig_pending, 0, sizeof sig_pending);
    w.tty = terminal_to_hand_over();
    int exec_failed = 0;
    w.pid = spawn(path, o->argv, sh_argv, w.tty, &err, &exec_failed);
    free(sh_argv);
    if (w.pid < 0) {
        say("cannot start '%s': %s", o->argv[0], strerror(err));
        release_after(&w, 0);
        return CTL_EXIT_INTERNAL;
    }
    int st = watch(&w);
    if (w.tty >= 0) {
        tcsetpgrp(w.tty, getpgrp()); /* SIGTTOU is ignored: allowed */
        close(w.tty);
    }
    if (w.ext_busy) {
        call_free(&w.ext);
        w.ext_busy = 0;
    }
    if (exec_failed) {
        say("cannot run '%s': %s", o->argv[0], strerror(err));
        release_after(&w, 0);
        return err == ENOENT ? CTL_EXIT_NOT_FOUND : CTL_EXIT_CANNOT_EXEC;
    }
    if (w.lost) {
        if (!w.lost_known_gone) release_after(&w, 1); /* perhaps still ours */
        return CTL_EXIT_LEASE_LOST;
    }
    release_after(&w, 0);
    return child_status(st);
}

/* ---- main --------------------------------------------------------------------------------- */

static const int allow_run[] = {'t',        'w',          O_SHARED, O_FAIR, O_OWNER,
                                O_MAX_HOLD, O_LOCK_DELAY, O_GRACE,  'q',    0};
static const int allow_acquire[] = {'t',        'w',          O_SHARED, O_FAIR, O_OWNER,
                                    O_MAX_HOLD, O_LOCK_DELAY, O_TOKEN,  'q',    0};
static const int allow_extend[] = {'t', O_TOKEN, 'q', 0};
static const int allow_release[] = {O_TOKEN, 'q', 0};
static const int allow_status[] = {'q', 0};
static const int allow_id[] = {'n', 'q', 0};

static const struct subcommand subcommands[] = {
    {.name = "run",     .help = help_run,     .allowed = allow_run,     .fn = cmd_run    },
    {.name = "acquire", .help = help_acquire, .allowed = allow_acquire, .fn = cmd_acquire},
    {.name = "extend",  .help = help_extend,  .allowed = allow_extend,  .fn = cmd_extend },
    {.name = "release", .help = help_release, .allowed = allow_release, .fn = cmd_release},
    {.name = "status",  .help = help_status,  .allowed = allow_status,  .fn = cmd_status },
    {.name = "id",      .help = help_id,      .allowed = allow_id,      .fn = cmd_id     },
};

static const struct subcommand *find_subcommand(const char *name) {
    for (size_t i = 0; i < sizeof subcommands / sizeof subcommands[0]; i++)
        if (strcmp(subcommands[i].name, name) == 0) return &subcommands[i];
    return NULL;
}

static void print_help(const struct subcommand *sc) {
    fputs(sc ? sc->help : help_main, stdout);
    fputs(help_exit, stdout);
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
    int allowed = opt == 'u' || opt == 'v' || opt == 'h' || opt == O_VERSION || (!sc && opt == 'q');
    for (const int *a = sc ? sc->allowed : NULL; a && *a && !allowed; a++) allowed = *a == opt;
    if (opt == '?' || opt == ':')
        return usage_error(cmd, "unknown option or missing value: %s", bad);
    if (!allowed) return usage_error(cmd, "--%s does not apply here", opt_name(opt));
    long long *dur = NULL;
    int forever = 0;
    switch (opt) {
    case 'h': print_help(sc); return 1;
    case O_VERSION: printf("lockctl " CTL_VERSION "\n"); return 1;
    case 'u': set_url(arg); return 0;
    case 'v': verbose = 1; return 0;
    case 'q': o->quiet = 1; return 0;
    case O_SHARED: o->shared = 1; return 0;
    case O_FAIR: o->fair = 1; return 0;
    case O_OWNER: o->owner = arg; return 0;
    case O_TOKEN: o->token = arg; return 0;
    case 't': dur = &o->ttl; break;
    case 'w':
        dur = &o->wait;
        forever = 1;
        break;
    case O_MAX_HOLD: dur = &o->max_hold; break;
    case O_LOCK_DELAY: dur = &o->lock_delay; break;
    case O_GRACE: dur = &o->grace; break;
    case 'n': {
        char *end;
        errno = 0;
        long long n = strtoll(arg, &end, 10);
        if (errno || *end || end == arg || n < 1)
            return usage_error(cmd, "-n wants a count of at least 1, not '%s'", arg);
        o->count = n;
        return 0;
    }
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
static int parse_options(const struct subcommand *sc, struct opts *o, int argc, char **argv,
                         int start, int *stop, int *dashdash) {
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

int main(int argc, char **argv) {
    fds_each(fds_remember);
    const char *env_url = getenv("LOCKGATE_URL");
    set_url(env_url && *env_url ? env_url : CTL_DEFAULT_URL);
    setvbuf(stdout, NULL, _IOLBF, 0);

    struct opts o;
    memset(&o, 0, sizeof o);
    o.ttl = o.max_hold = o.lock_delay = -1;
    o.grace = 5000;
    o.count = 1;

    /* lockctl [global options] SUBCOMMAND [options] ARGS... */
    int at, dd, rc = parse_options(NULL, &o, argc, argv, 1, &at, &dd);
    if (rc) return rc == 1 ? 0 : rc;
    if (at >= argc) {
        fputs(help_main, stderr);
        return CTL_EXIT_USAGE;
    }
    if (strcmp(argv[at], "help") == 0) {
        const struct subcommand *sc = at + 1 < argc ? find_subcommand(argv[at + 1]) : NULL;
        if (at + 1 < argc && !sc) return usage_error(NULL, "no command '%s'", argv[at + 1]);
        print_help(sc);
        return 0;
    }
    const struct subcommand *sc = find_subcommand(argv[at]);
    if (!sc) return usage_error(NULL, "no command '%s'", argv[at]);
    o.cmd = sc->name;

    /* Options may come before and after NAME; for run, the command starts
     * at the first word after NAME that is not an option, or after "--". */
    int sub_argc = argc - at;
    char **sub_argv = argv + at;
    int pos = 1;
    for (;;) {
        rc = parse_options(sc, &o, sub_argc, sub_argv, pos, &pos, &dd);
        if (rc) return rc == 1 ? 0 : rc;
        if (pos >= sub_argc) break;
        if (!o.name) {
            o.name = sub_argv[pos++];
            if (dd && strcmp(sc->name, "run") == 0) {
                o.argv = sub_argv + pos;
                break;
            }
            continue;
        }
        if (strcmp(sc->name, "run") == 0) {
            o.argv = sub_argv + pos;
            break;
        }
        return usage_error(sc->name, "unexpected argument '%s'", sub_argv[pos]);
    }
    if (!o.name)
        return usage_error(sc->name, "missing %s",
                           strcmp(sc->name, "id") == 0 ? "NAMESPACE" : "NAME");
    if (!valid_name(o.name)) {
        say("%s: invalid %s '%s': 1-200 characters of A-Z a-z 0-9 . _ : - (invalid_name)", sc->name,
            strcmp(sc->name, "id") == 0 ? "namespace" : "lock name", o.name);
        return CTL_EXIT_REFUSED;
    }

    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK || !(multi = curl_multi_init())) {
        say("cannot initialise libcurl");
        return CTL_EXIT_INTERNAL;
    }
    rc = sc->fn(&o);
    fflush(stdout);
    curl_multi_cleanup(multi);
    curl_global_cleanup();
    free(fds_inherited);
    return rc;
}
