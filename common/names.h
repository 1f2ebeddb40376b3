/* names.h -- lock, semaphore and id-namespace names: the rule both binaries
 * check (openapi.yaml, parameters "name" and "namespace": 1-200 bytes of
 * [A-Za-z0-9._:-]).  Such a name never needs escaping in a URL, and every
 * name lockctl sends is one the gateway takes. */
#ifndef LOCKGATE_NAMES_H
#define LOCKGATE_NAMES_H

#include <stddef.h>

#define NAME_MAX_LEN 200

/* Returns 1 when the len bytes at s are a valid name, else 0. */
int name_valid(const char *s, size_t len);

/* Percent-decodes one path segment of raw_len bytes into out and checks the
 * result is a valid name.  Returns the decoded length, or -1 when the
 * segment is not a valid name (bad escape, bad byte, length). */
int name_decode(const char *raw, size_t raw_len, char out[NAME_MAX_LEN + 1]);

#endif
