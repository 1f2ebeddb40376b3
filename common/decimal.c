/* decimal.c -- see decimal.h. */
#include "common/decimal.h"

int decimal_parse(const char *s, size_t len, long long lo, long long hi, long long *out) {
    if (!s || len == 0) return -1;
    long long v = 0;
    for (size_t i = 0; i < len; i++) {
        int d = s[i] - '0';
        if (d < 0 || d > 9) return -1;
        if (v > (hi - d) / 10) return -1; /* would pass hi */
        v = v * 10 + d;
    }
    if (v < lo || v > hi) return -1;
    *out = v;
    return 0;
}
