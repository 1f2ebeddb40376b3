/* secret.c -- see secret.h. */
#include "server/secret.h"
#include "server/log.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static char path[4096];          /* --redis-password-file, "" for none */
static char current[SECRET_MAX]; /* the password in force, "" for none */
static int failing;              /* the last read failed (logged once) */

int secret_parse(const char *buf, size_t len, char out[SECRET_MAX], const char **why) {
    if (len > 0 && buf[len - 1] == '\n') len--;
    if (len > 0 && buf[len - 1] == '\r') len--;
    if (len == 0) return *why = "it is empty", -1;
    if (len >= SECRET_MAX) return *why = "it is longer than 255 bytes", -1;
    if (memchr(buf, '\0', len) || memchr(buf, '\n', len))
        return *why = "it is more than one line", -1;
    memcpy(out, buf, len);
    out[len] = '\0';
    return 0;
}

/* Reads the file into out; -1 with why (static, or strerror's). */
static int read_file(char out[SECRET_MAX], const char **why) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return *why = strerror(errno), -1;
    char buf[SECRET_MAX + 2];
    size_t len = 0;
    ssize_t n;
    while (len < sizeof buf && (n = read(fd, buf + len, sizeof buf - len)) != 0) {
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) {
            *why = strerror(errno);
            close(fd);
            return -1;
        }
        len += (size_t)n;
    }
    close(fd);
    if (len == sizeof buf) return *why = "it is longer than 255 bytes", -1;
    return secret_parse(buf, len, out, why);
}

/* Reads the file; on success it is the password in force.  Returns 0, or
 * -1 with why.  Under mu. */
static int refresh(const char **why) {
    char pw[SECRET_MAX];
    if (read_file(pw, why) < 0) return -1;
    if (current[0] && strcmp(pw, current) != 0)
        log_info("redis: the password file %s holds a new password: new connections use it", path);
    memcpy(current, pw, sizeof pw);
    return 0;
}

int secret_init(const struct gw_config *cfg, char *err, size_t errlen) {
    pthread_mutex_lock(&mu);
    snprintf(path, sizeof path, "%s", cfg->redis_password_file);
    snprintf(current, sizeof current, "%s", path[0] ? "" : cfg->redis_password);
    const char *why = NULL;
    int rc = path[0] ? refresh(&why) : 0;
    pthread_mutex_unlock(&mu);
    if (rc < 0) snprintf(err, errlen, "cannot use the Redis password file %s: %s", path, why);
    return rc;
}

void secret_reload(void) {
    if (!path[0]) return; /* set before any thread started, never again */
    pthread_mutex_lock(&mu);
    const char *why = NULL;
    if (refresh(&why) < 0) {
        log_error("redis: cannot read the password file %s again: %s; keeping the password read "
                  "before",
                  path, why);
        failing = 1;
    } else {
        log_info("redis: password file %s read again", path);
        failing = 0;
    }
    pthread_mutex_unlock(&mu);
}

void secret_redis_password(char out[SECRET_MAX]) {
    pthread_mutex_lock(&mu);
    const char *why = NULL;
    if (path[0] && refresh(&why) < 0) {
        if (!failing)
            log_warn("redis: cannot read the password file %s: %s; using the password read before",
                     path, why);
        failing = 1;
    } else {
        failing = 0;
    }
    memcpy(out, current, SECRET_MAX);
    pthread_mutex_unlock(&mu);
}
