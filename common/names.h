/* names.h -- lock, semaphore and id-namespace names taken from the path. */
#ifndef LOCKGATE_NAMES_H
#define LOCKGATE_NAMES_H

#include <stddef.h>

#define NAME_MAX_LEN 200

/* Percent-decodes one path segment of raw_len bytes into out and checks the
 * result is 1-200 bytes of [A-Za-z0-9._:-].  Returns the decoded length, or
 * -1 when the segment is not a valid name (bad escape, bad byte, length). */
int name_decode(const char *raw, size_t raw_len, char out[NAME_MAX_LEN + 1]);

#endif
