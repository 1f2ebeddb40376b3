/* fds.h -- lockctl's descriptors versus the caller's. */
#ifndef LOCKCTL_FDS_H
#define LOCKCTL_FDS_H

/* Marks fd close-on-exec and, when nonblock, non-blocking.  Returns 0 or
 * -1 (errno). */
int fds_cloexec(int fd, int nonblock);

/* At startup: remembers the descriptors lockctl was given. */
void fds_remember_inherited(void);

/* Before a fork: marks every descriptor but those close-on-exec. */
void fds_seal_others(void);

/* Frees what fds_remember_inherited kept. */
void fds_forget(void);

#endif
