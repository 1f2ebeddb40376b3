/* access.h -- how lockctl proves who it is: the API key (from
 * $LOCKGATE_API_KEY or --api-key-file, never from an argument `ps` would
 * show) and TLS (--cacert, and --cert/--key for mutual TLS). */
#ifndef LOCKCTL_ACCESS_H
#define LOCKCTL_ACCESS_H

#include <curl/curl.h>

/* Takes $LOCKGATE_API_KEY (when set and not empty) as the key. */
void access_from_env(void);

/* Reads the key from the first line of path.  Returns 0, or -1 with a
 * one-line reason printed (ctl_say). */
int access_key_file(const char *path);

/* --cacert, --cert, --key: paths kept for every request. */
void access_set_cacert(const char *path);
void access_set_cert(const char *path);
void access_set_key(const char *path);

/* Adds the Authorization header (when there is a key) to *headers and
 * the TLS files to e. */
void access_apply(CURL *e, struct curl_slist **headers);

#endif
