/* fuzz_auth_file.c -- the auth file's parser: any bytes as the file.  A
 * table that parses has valid ids, no id twice, limits in range (a rate,
 * holds at once),
 * and answers the grant decision for any name; a file that does not parse gives a one-line
 * reason. */
#include "server/auth.h"
#include "server/quota.h"
#include "tests/fuzz/fuzz.h"

#include <assert.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char err[256] = "";
    struct auth_table *t = auth_table_parse((const char *)data, size, err, sizeof err);
    if (!t) {
        assert(err[0] && !strchr(err, '\n'));
        return 0;
    }
    static const char *const names[] = {"", "a", "job-1", "nightly-x", "metrics"};
    for (int i = 0; i < t->nkeys; i++) {
        const struct auth_key *k = &t->keys[i];
        assert(auth_id_valid(k->id, strlen(k->id)));
        assert(auth_table_find(t, k->id, strlen(k->id)) == k);
        assert(k->rps <= QUOTA_RPS_MAX); /* "limits": 0 (none) or 1..max */
        assert(k->holds <= QUOTA_HOLDS_MAX);
        for (size_t n = 0; n < sizeof names / sizeof names[0]; n++)
            for (int kind = 0; kind < AUTH_KIND_COUNT; kind++) {
                int w = auth_allows(k, kind, names[n], AUTH_WRITE);
                int r = auth_allows(k, kind, names[n], AUTH_READ);
                assert(!w || r); /* write includes read */
            }
    }
    auth_table_free(t);
    return 0;
}
