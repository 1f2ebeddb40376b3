/* fuzz_origin.c -- the Origin header and --cors-origin values
 * (server/origin.c): any bytes as an origin and as a Host.  An origin the
 * parser accepts is allowed once listed; nothing is "same origin" without
 * a Host; a refused parse is never listed. */
#include "server/origin.h"
#include "tests/fuzz/fuzz.h"

#include <assert.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *s = fuzz_cstr(data, size);
    /* The first NUL-free part is the origin, what follows a '\n' the Host. */
    char *host = strchr(s, '\n');
    if (host) *host++ = '\0';
    int valid = origin_parse(s) == 0;
    origin_init(NULL, 0);
    enum origin_verdict v = origin_check(s, host, size & 1);
    assert(v != ORIGIN_LISTED && v != ORIGIN_NONE);
    if (!valid) assert(v == ORIGIN_REFUSED);
    assert(origin_check(s, NULL, 0) == ORIGIN_REFUSED);
    if (valid) {
        char list[1][ORIGIN_MAX_LEN + 1];
        strcpy(list[0], s);
        origin_init((const char(*)[ORIGIN_MAX_LEN + 1]) list, 1);
        assert(origin_check(s, host, size & 1) == ORIGIN_LISTED);
        origin_init(NULL, 0);
    }
    free(s);
    return 0;
}
