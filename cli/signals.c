/* signals.c -- the self-pipe.  Handlers only write the signal's number to a
 * non-blocking pipe; the loops poll its read end (http_wait) and act on the
 * signals outside signal context.  Only `run` installs them: the one-shot
 * commands keep the default actions (Ctrl-C just ends them). */
#include "cli/signals.h"
#include "cli/ctl.h"
#include "cli/fds.h"

#include <errno.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

static int sig_pipe[2] = {-1, -1};    /* [0] polled by http_wait, [1] handlers */
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

int signals_install(void) {
    if (pipe(sig_pipe) < 0 || fds_cloexec(sig_pipe[0], 1) < 0 || fds_cloexec(sig_pipe[1], 1) < 0)
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

void signals_drain(void) {
    if (sig_pipe[0] < 0) return;
    unsigned char buf[64];
    ssize_t n;
    while ((n = read(sig_pipe[0], buf, sizeof buf)) > 0)
        for (ssize_t i = 0; i < n; i++)
            if (buf[i] < sizeof sig_pending) sig_pending[buf[i]] = 1;
}

int sig_take(int sig) {
    if (!sig_pending[sig]) return 0;
    sig_pending[sig] = 0;
    return 1;
}

int sig_take_stop(void) {
    static const int stops[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT};
    for (size_t i = 0; i < sizeof stops / sizeof stops[0]; i++)
        if (sig_take(stops[i])) return stops[i];
    return 0;
}

int signals_fd(void) { return sig_pipe[0]; }

void signals_forget(void) { memset(sig_pending, 0, sizeof sig_pending); }

void signals_pass_on(pid_t group) {
    for (size_t i = 0; i < sizeof sig_forwarded / sizeof sig_forwarded[0]; i++)
        if (sig_take(sig_forwarded[i])) {
            if (ctl_verbose) ctl_say("passing signal %d on to the command", sig_forwarded[i]);
            kill(-group, sig_forwarded[i]);
        }
}

/* Runs in the child between fork and exec: sigaction only, which is
 * async-signal-safe. */
void signals_default_in_child(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = SIG_DFL;
    sigemptyset(&sa.sa_mask);
    for (size_t i = 0; i < sizeof sig_caught / sizeof sig_caught[0]; i++)
        sigaction(sig_caught[i], &sa, NULL);
    for (size_t i = 0; i < sizeof sig_ignored / sizeof sig_ignored[0]; i++)
        sigaction(sig_ignored[i], &sa, NULL);
}
