/* fuzz_authz_header.c -- the Authorization header (server/auth.c): any
 * bytes as its value.  A parse that succeeds points inside the value, with
 * an id and a secret of the allowed bytes and lengths; the digest check
 * runs on it without a key. */
#include "server/auth.h"
#include "server/keygen.h"
#include "tests/fuzz/fuzz.h"

#include <assert.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *s = fuzz_cstr(data, size);
    const char *id, *secret;
    size_t id_len, secret_len;
    if (auth_parse_bearer(s, &id, &id_len, &secret, &secret_len) == 0) {
        assert(id >= s && id + id_len <= s + size && secret + secret_len <= s + size);
        assert(auth_id_valid(id, id_len));
        assert(secret_len > 0 && secret_len <= AUTH_SECRET_MAX);
        assert(auth_secret_matches(NULL, secret, secret_len) == 0);
    }
    int kind, access;
    char prefix[256];
    if (keygen_parse_grant(s, &kind, prefix, sizeof prefix, &access) == 0)
        assert(kind >= 0 && kind < AUTH_KIND_COUNT && access >= AUTH_READ && access <= AUTH_DENY);
    free(s);
    return 0;
}
