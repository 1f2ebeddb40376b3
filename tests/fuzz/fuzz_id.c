/* fuzz_id.c -- id decoding (GET /v1/ids/{namespace}/{id}): any bytes as
 * the {id} segment.  An id that parses unpacks, formats back to a number
 * that parses to itself, and its time formats. */
#include "idgen/idgen.h"
#include "tests/fuzz/fuzz.h"

#include <assert.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    uint64_t id, again;
    if (idgen_parse_decimal((const char *)data, size, &id) < 0) return 0;
    char digits[IDGEN_DEC_MAX], time[IDGEN_TIME_MAX];
    size_t n = idgen_format(id, digits);
    assert(idgen_parse_decimal(digits, n, &again) == 0 && again == id);
    struct idgen_decoded d;
    if (idgen_unpack(id, 1704067200, &d) == 0) (void)idgen_format_time(d.unix_seconds, time);
    return 0;
}
