/* decimal.h -- the one parser of decimal integers (query arguments,
 * headers, settings, ids, lockctl's numbers). */
#ifndef LOCKGATE_DECIMAL_H
#define LOCKGATE_DECIMAL_H

#include <stddef.h>

/* Parses the len bytes at s as a decimal integer in [lo, hi] (lo >= 0):
 * digits only -- no sign, no space, nothing after -- and no overflow on
 * any length.  Returns 0 with *out set, or -1 (*out untouched). */
int decimal_parse(const char *s, size_t len, long long lo, long long hi, long long *out);

#endif
