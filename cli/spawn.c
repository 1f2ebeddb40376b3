/* spawn.c -- starting the command: found in $PATH before the lock is taken,
 * started in a process group of its own, given the terminal. */
#include "cli/spawn.h"
#include "cli/ctl.h"
#include "cli/fds.h"
#include "cli/signals.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <termios.h>
#include <unistd.h>

extern char **environ;

int spawn_find_program(const char *cmd, char *out, size_t cap) {
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
pid_t spawn_command(char *path, char **argv, char **sh_argv, int tty, int *err, int *exec_failed) {
    fds_seal_others();
    int report[2];
    *exec_failed = 0;
    if (pipe(report) < 0 || fds_cloexec(report[0], 0) < 0 || fds_cloexec(report[1], 0) < 0) {
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
        signals_default_in_child();
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

int spawn_terminal(void) {
    int fd = open("/dev/tty", O_RDWR | O_NOCTTY | O_CLOEXEC);
    if (fd < 0) return -1;
    if (tcgetpgrp(fd) != getpgrp()) {
        close(fd);
        return -1;
    }
    return fd;
}
