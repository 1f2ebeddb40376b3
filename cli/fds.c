/* fds.c -- descriptors: nothing of lockctl's leaks into the command.
 * Our pipes are close-on-exec and libcurl's sockets are opened so, but a
 * library may open something we do not see (curl's wakeup socketpair, a
 * resolver's socket).  So the descriptors open at startup are remembered
 * (they are the caller's, passed on to the command as flock(1) does) and,
 * before each fork, every other one is marked close-on-exec. */
#include "cli/fds.h"
#include "common/alloc.h"

#include <ctype.h>
#include <dirent.h>
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

static int *fds_inherited;    /* descriptors open when lockctl started */
static size_t fds_ninherited; /* how many */

int fds_cloexec(int fd, int nonblock) {
    int fl = fcntl(fd, F_GETFD);
    if (fl < 0 || fcntl(fd, F_SETFD, fl | FD_CLOEXEC) < 0) return -1;
    if (nonblock) {
        fl = fcntl(fd, F_GETFL);
        if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0) return -1;
    }
    return 0;
}

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
    int *p = alloc_check(realloc(fds_inherited, (fds_ninherited + 1) * sizeof *p));
    fds_inherited = p;
    fds_inherited[fds_ninherited++] = fd;
}

static void fds_seal(int fd) {
    for (size_t i = 0; i < fds_ninherited; i++)
        if (fds_inherited[i] == fd) return;
    int fl = fcntl(fd, F_GETFD);
    if (fl >= 0 && !(fl & FD_CLOEXEC)) fcntl(fd, F_SETFD, fl | FD_CLOEXEC);
}

void fds_remember_inherited(void) { fds_each(fds_remember); }

void fds_seal_others(void) { fds_each(fds_seal); }

void fds_forget(void) {
    free(fds_inherited);
    fds_inherited = NULL;
    fds_ninherited = 0;
}
