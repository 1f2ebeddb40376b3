/* fuzz_body.c -- body and field parsing (server/body.c): any bytes as a
 * request body, then the typed fields the handlers read.  Every call
 * answers GW_OK or replies 400 exactly once; nothing leaks. */
#include "server/body.h"
#include "tests/fuzz/fuzz.h"

#include <assert.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size > HTTP_BODY_MAX) return 0;
    struct gw_request *req = fuzz_request(data, size);
    if (body_parse_or_reply(req) == GW_OK) {
        long long ttl;
        int present, fair;
        const char *owner;
        if (body_int_or_reply(req, "ttl_ms", 30000, 100, 86400000, &ttl, &present) == GW_OK)
            assert(ttl >= 100 && ttl <= 86400000);
        else
            assert(req->status == 400);
        if (!req->status && body_bool_or_reply(req, "fair", 0, &fair) == GW_OK)
            assert(fair == 0 || fair == 1);
        if (!req->status && body_string_or_reply(req, "owner", 256, &owner) == GW_OK)
            assert(!owner || strlen(owner) <= 256);
    } else {
        assert(req->status == 400);
    }
    fuzz_request_free(req);
    return 0;
}
