/* watch.c -- the watchdog of `run`: one loop until the command has exited,
 * passing signals on, keeping the hold (its keeper: renew.c's lease or
 * hold_stream.c's stream), and stopping the command when the hold is lost. */
#include "cli/watch.h"
#include "cli/ctl.h"
#include "cli/signals.h"

#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

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

void lose(struct watch *w, int known_gone, const char *fmt, ...) {
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
    ctl_say("lost lock '%s': %s; stopping the command", w->o->name, why);
    kill(-w->pid, SIGTERM);
    kill(-w->pid, SIGCONT);
    w->kill_at = now_ms() + w->o->grace;
}

int watch_exit_status(int st) {
    if (WIFEXITED(st)) return WEXITSTATUS(st);
    if (WIFSIGNALED(st)) return 128 + WTERMSIG(st);
    return CTL_EXIT_INTERNAL;
}

int watch_command(struct watch *w) {
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
        signals_pass_on(w->pid);
        if (sig_take(SIGTSTP)) suspend_together(w);

        long long now = now_ms();
        long long keeper_wake = w->lost ? LLONG_MAX : w->keeper->tend(w, now);
        if (!w->lost && now >= w->lease_end) {
            if (w->capped)
                lose(w, 0, "--max-hold of %lld ms reached", w->o->max_hold);
            else
                lose(w, 0, "the lease ran out before the gateway at %s could extend it", ctl_url);
        }
        if (w->lost && !w->killed && now >= w->kill_at) {
            if (ctl_verbose) ctl_say("the command outlived --grace: SIGKILL");
            kill(-w->pid, SIGKILL);
            w->killed = 1;
        }

        long long wake = now + 1000; /* also a safety net for a lost SIGCHLD */
        if (!w->lost) {
            wake = min_ll(wake, w->lease_end);
            wake = min_ll(wake, keeper_wake);
        } else if (!w->killed) {
            wake = min_ll(wake, w->kill_at);
        }
        http_wait(wake - now);
    }
}
