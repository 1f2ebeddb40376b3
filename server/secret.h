/* secret.h -- the password lockgate logs in to Redis with: the Redis URL's,
 * or the content of --redis-password-file.
 *
 * The file is read at start (a file that cannot be read is a bad setting),
 * again on SIGHUP (for the log line: it says whether the file still reads),
 * and again before each new Redis connection, so a rotated secret (a
 * Kubernetes Secret mounted as a file, a vault agent's template) is used by
 * the next connection without a restart.  A file that stops reading keeps
 * the last password read.  The password itself is never logged. */
#ifndef LOCKGATE_SECRET_H
#define LOCKGATE_SECRET_H

#include <stddef.h>

#include "server/config.h"

#define SECRET_MAX 256 /* a password's bytes, with the NUL */

/* A password file's content, len bytes at buf: one line, its end of line
 * ("\n" or "\r\n") dropped, 1 to SECRET_MAX - 1 bytes and no NUL.  Copies
 * it to out (SECRET_MAX bytes) and returns 0, or returns -1 with why set
 * to a static reason. */
int secret_parse(const char *buf, size_t len, char out[SECRET_MAX], const char **why);

/* Takes cfg's password, or reads cfg's password file; -1 with a one-line
 * reason in err when the file cannot be read.  Before any worker starts. */
int secret_init(const struct gw_config *cfg, char *err, size_t errlen);

/* SIGHUP: reads the file again and logs whether it did (no-op without a
 * file). */
void secret_reload(void);

/* The password to log in with now (the file read again), "" for none,
 * copied to out (SECRET_MAX bytes).  Any thread. */
void secret_redis_password(char out[SECRET_MAX]);

#endif
