/* test_routes_spec.c -- what the binary carries agrees with its sources:
 * every route the router knows is in openapi.yaml with its method, every
 * error code is in the spec's ProblemCode enum, and every embedded Lua
 * script is named by the SHA-1 Redis will give it (sha1_hex, checked on
 * known vectors and against sha1sum).
 *
 * The spec is read from openapi.yaml at the repository root (the tests run
 * from there) and, when the binary embeds it (handlers/ops.c, from
 * build/gen/openapi_yaml.h), the embedded copy is checked too. */
#include "handlers/routes.h"
#include "server/reply.h"
#include "server/scripts.h"
#include "server/sha1.h"
#include "tests/check.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Defined by ops.c from the generated header; weak so this test still
 * links (and reads the file alone) if that ever changes. */
extern unsigned char openapi_yaml[] __attribute__((weak));
extern unsigned int openapi_yaml_len __attribute__((weak));

/* ============================================================================
 * Reading files and commands
 * ========================================================================= */

static char *read_all(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 1 << 16, n = 0;
    char *b = malloc(cap + 1);
    size_t got;
    while ((got = fread(b + n, 1, cap - n, f)) > 0) {
        n += got;
        if (n == cap) b = realloc(b, (cap *= 2) + 1);
    }
    fclose(f);
    b[n] = '\0';
    if (len) *len = n;
    return b;
}

/* The repository root: where openapi.yaml and lua/ are. */
static const char *root(void) {
    static const char *roots[] = {".", "..", "../..", "../../.."};
    for (size_t i = 0; i < sizeof roots / sizeof roots[0]; i++) {
        char p[256];
        snprintf(p, sizeof p, "%s/openapi.yaml", roots[i]);
        if (access(p, R_OK) == 0) {
            snprintf(p, sizeof p, "%s/handlers/routes.c", roots[i]);
            if (access(p, R_OK) == 0) return roots[i];
        }
    }
    return NULL;
}

/* sha1sum of a file, or "" when the tool is missing. */
static void sha1sum_file(const char *path, char out[41]) {
    char cmd[512];
    snprintf(cmd, sizeof cmd, "sha1sum '%s' 2>/dev/null", path);
    out[0] = '\0';
    FILE *p = popen(cmd, "r");
    if (!p) return;
    char line[256] = "";
    if (fgets(line, sizeof line, p) && strlen(line) >= 40) {
        memcpy(out, line, 40);
        out[40] = '\0';
    }
    pclose(p);
}

static void sha1sum_bytes(const void *data, size_t len, char out[41]) {
    char path[] = "/tmp/lockgate-sha1-XXXXXX";
    int fd = mkstemp(path);
    out[0] = '\0';
    if (fd < 0) return;
    size_t off = 0;
    while (off < len) {
        ssize_t w = write(fd, (const char *)data + off, len - off);
        if (w <= 0) break;
        off += (size_t)w;
    }
    close(fd);
    sha1sum_file(path, out);
    unlink(path);
}

/* ============================================================================
 * A small reading of openapi.yaml: the keys under `paths:`
 * ========================================================================= */

#define MAX_OPS 128

struct spec_op {
    char path[128];
    char method[16];
};

/* Collects (path, method) pairs: path keys sit two spaces in under
 * `paths:`, operation keys four spaces in under their path.  Returns the
 * number found. */
static int spec_ops(const char *yaml, struct spec_op *ops, int max) {
    int n = 0, in_paths = 0;
    char cur[128] = "";
    const char *line = yaml;
    while (line && *line) {
        const char *eol = strchr(line, '\n');
        size_t len = eol ? (size_t)(eol - line) : strlen(line);
        char l[512];
        if (len >= sizeof l) len = sizeof l - 1;
        memcpy(l, line, len);
        l[len] = '\0';
        if (len && l[len - 1] == '\r') l[--len] = '\0';
        line = eol ? eol + 1 : NULL;

        if (len == 0 || l[0] == '#') continue;
        if (!isspace((unsigned char)l[0])) { /* a top-level key */
            in_paths = strncmp(l, "paths:", 6) == 0;
            cur[0] = '\0';
            continue;
        }
        if (!in_paths) continue;
        if (strncmp(l, "  ", 2) == 0 && l[2] != ' ') { /* a path key */
            const char *p = l + 2;
            char q = (*p == '\'' || *p == '"') ? *p++ : 0;
            size_t plen = 0;
            while (p[plen] && (q ? p[plen] != q : p[plen] != ':')) plen++;
            cur[0] = '\0';
            if (*p == '/' && plen < sizeof cur) {
                memcpy(cur, p, plen);
                cur[plen] = '\0';
            }
            continue;
        }
        if (cur[0] && strncmp(l, "    ", 4) == 0 && l[4] != ' ') { /* an operation */
            static const char *verbs[] = {"get",   "put",  "post",    "delete",
                                          "patch", "head", "options", "trace"};
            for (size_t v = 0; v < sizeof verbs / sizeof verbs[0]; v++) {
                size_t vl = strlen(verbs[v]);
                if (strncmp(l + 4, verbs[v], vl) == 0 && l[4 + vl] == ':' && n < max) {
                    snprintf(ops[n].path, sizeof ops[n].path, "%s", cur);
                    snprintf(ops[n].method, sizeof ops[n].method, "%s", verbs[v]);
                    n++;
                }
            }
        }
    }
    return n;
}

static int spec_has(const struct spec_op *ops, int n, const char *method, const char *path) {
    char lower[16];
    size_t i = 0;
    for (; method[i] && i < sizeof lower - 1; i++)
        lower[i] = (char)tolower((unsigned char)method[i]);
    lower[i] = '\0';
    for (int k = 0; k < n; k++)
        if (strcmp(ops[k].path, path) == 0 && strcmp(ops[k].method, lower) == 0) return 1;
    return 0;
}

/* Checks one copy of the spec; `what` names it in messages. */
static void check_spec_routes(const char *yaml, const char *what) {
    static struct spec_op ops[MAX_OPS];
    int n = spec_ops(yaml, ops, MAX_OPS);
    CHECK(n >= (int)gw_routes_count);
    for (size_t i = 0; i < gw_routes_count; i++) {
        int has = spec_has(ops, n, gw_routes[i].method, gw_routes[i].path);
        if (!has)
            fprintf(stderr, "  %s lacks %s %s\n", what, gw_routes[i].method, gw_routes[i].path);
        CHECK(has);
    }
    /* The other direction is informational: the spec may describe routes
     * of features this build does not serve yet. */
    for (int k = 0; k < n; k++) {
        int served = 0;
        for (size_t i = 0; i < gw_routes_count; i++) {
            char lower[16];
            size_t j = 0;
            for (; gw_routes[i].method[j] && j < 15; j++)
                lower[j] = (char)tolower((unsigned char)gw_routes[i].method[j]);
            lower[j] = '\0';
            served |=
                strcmp(gw_routes[i].path, ops[k].path) == 0 && strcmp(lower, ops[k].method) == 0;
        }
        if (!served)
            fprintf(stderr, "  note: %s documents %s %s, which the router does not serve\n", what,
                    ops[k].method, ops[k].path);
    }
}

/* The ProblemCode enum lists every code of reply.c's table. */
static void check_spec_codes(const char *yaml, const char *what) {
    const char *enum_at = strstr(yaml, "ProblemCode:");
    CHECK(enum_at != NULL);
    if (!enum_at) return;
    /* The enum ends at the next schema (a line 4 spaces in). */
    const char *end = strstr(enum_at, "\n    ");
    while (end && end[5] == ' ') end = strstr(end + 1, "\n    ");
    size_t span = end ? (size_t)(end - enum_at) : strlen(enum_at);
    char *block = strndup(enum_at, span);
    for (int c = 0; c < CODE_COUNT; c++) {
        const char *code = problem_info((enum gw_code)c)->code;
        char item[64], inl[64];
        snprintf(item, sizeof item, "- %s\n", code);
        snprintf(inl, sizeof inl, " %s,", code);
        int found = strstr(block, item) || strstr(block, inl);
        if (!found) {
            /* last item of a block or of an inline list */
            snprintf(item, sizeof item, "- %s", code);
            snprintf(inl, sizeof inl, " %s]", code);
            found = strstr(block, item) || strstr(block, inl);
        }
        if (!found) fprintf(stderr, "  %s: ProblemCode lacks %s\n", what, code);
        CHECK(found);
    }
    free(block);
}

static void test_spec_file(void) {
    const char *r = root();
    CHECK(r != NULL);
    if (!r) return;
    char path[256];
    snprintf(path, sizeof path, "%s/openapi.yaml", r);
    size_t len;
    char *yaml = read_all(path, &len);
    CHECK(yaml != NULL);
    if (!yaml) return;
    CHECK(strncmp(yaml, "openapi: 3.1", 12) == 0);
    check_spec_routes(yaml, "openapi.yaml");
    check_spec_codes(yaml, "openapi.yaml");
    free(yaml);
}

static void test_spec_embedded(void) {
    if (!openapi_yaml || !&openapi_yaml_len) {
        fprintf(stderr, "  (the binary does not embed the spec; skipped)\n");
        return;
    }
    char *yaml = strndup((const char *)openapi_yaml, openapi_yaml_len);
    CHECK(strncmp(yaml, "openapi: 3.1", 12) == 0);
    check_spec_routes(yaml, "embedded spec");
    check_spec_codes(yaml, "embedded spec");
    /* It is the file of the tree it was built from. */
    const char *r = root();
    if (r) {
        char path[256];
        snprintf(path, sizeof path, "%s/openapi.yaml", r);
        size_t len;
        char *file = read_all(path, &len);
        CHECK(file && len == openapi_yaml_len && memcmp(file, openapi_yaml, len) == 0);
        free(file);
    }
    free(yaml);
}

/* The reader itself, on a spec written for it. */
static void test_spec_reader(void) {
    const char *y = "openapi: 3.1.0\n"
                    "info:\n  title: x\n"
                    "paths:\n"
                    "  /v1/locks/{name}:\n"
                    "    parameters:\n"
                    "      - $ref: '#/components/parameters/name'\n"
                    "    post:\n      summary: a\n"
                    "    get:\n      summary: b\n"
                    "  '/healthz':\n"
                    "    get:\n      responses: {}\n"
                    "components:\n"
                    "  x:\n    post: not a path\n";
    struct spec_op ops[8];
    int n = spec_ops(y, ops, 8);
    CHECK_EQ_INT(n, 3);
    CHECK(spec_has(ops, n, "POST", "/v1/locks/{name}"));
    CHECK(spec_has(ops, n, "GET", "/v1/locks/{name}"));
    CHECK(spec_has(ops, n, "GET", "/healthz"));
    CHECK(!spec_has(ops, n, "DELETE", "/v1/locks/{name}"));
    CHECK(!spec_has(ops, n, "POST", "/healthz"));
}

/* ============================================================================
 * SHA-1
 * ========================================================================= */

static void test_sha1_vectors(void) {
    char hex[41];
    sha1_hex("", 0, hex);
    CHECK_EQ_STR(hex, "da39a3ee5e6b4b0d3255bfef95601890afd80709");
    sha1_hex("abc", 3, hex);
    CHECK_EQ_STR(hex, "a9993e364706816aba3e25717850c26c9cd0d89d");
    const char *two = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"; /* 56 bytes */
    sha1_hex(two, strlen(two), hex);
    CHECK_EQ_STR(hex, "84983e441c3bd26ebaae4aa1f95129e5e54670f1");
    sha1_hex("The quick brown fox jumps over the lazy dog", 43, hex);
    CHECK_EQ_STR(hex, "2fd4e1c67a2d28fced849ee1bb76e7391b93eb12");
    char *million = malloc(1000000);
    memset(million, 'a', 1000000);
    sha1_hex(million, 1000000, hex);
    CHECK_EQ_STR(hex, "34aa973cd4c4daa4f61eeb2bdbad27316534016f");
    free(million);
}

/* Every length around the block and padding boundaries, and 1000 bytes,
 * against the system's sha1sum. */
static void test_sha1_against_sha1sum(void) {
    unsigned char data[1000];
    for (size_t i = 0; i < sizeof data; i++) data[i] = (unsigned char)(i * 7 + 3);
    char probe[41];
    sha1sum_bytes("abc", 3, probe);
    if (strcmp(probe, "a9993e364706816aba3e25717850c26c9cd0d89d") != 0) {
        fprintf(stderr, "  sha1sum is not available: cannot compare\n");
        CHECK(0);
        return;
    }
    static const size_t lens[] = {1, 55, 56, 57, 63, 64, 65, 119, 120, 127, 128, 129, 1000};
    for (size_t i = 0; i < sizeof lens / sizeof lens[0]; i++) {
        char mine[41], theirs[41];
        sha1_hex(data, lens[i], mine);
        sha1sum_bytes(data, lens[i], theirs);
        if (strcmp(mine, theirs) != 0) fprintf(stderr, "  length %zu differs\n", lens[i]);
        CHECK_EQ_STR(mine, theirs);
    }
}

/* lua/<file> with each line `--@include NAME` replaced by lua/NAME, as the
 * Makefile builds it; NULL when a file cannot be read.  Caller frees. */
static char *expand_includes(const char *root, const char *file, size_t *len) {
    char path[256];
    snprintf(path, sizeof path, "%s/lua/%s", root, file);
    size_t n = 0;
    char *src = read_all(path, &n);
    if (!src) return NULL;
    size_t cap = n + 1, used = 0;
    char *out = malloc(cap);
    for (size_t at = 0; out && at < n;) {
        const char *eol = memchr(src + at, '\n', n - at);
        size_t line = eol ? (size_t)(eol - (src + at)) + 1 : n - at;
        char inc[128];
        const char *piece = src + at;
        size_t plen = line;
        char *incl = NULL;
        if (line > 12 && memcmp(src + at, "--@include ", 11) == 0 && line - 11 < sizeof inc) {
            memcpy(inc, src + at + 11, line - 11);
            inc[line - 11 - (eol ? 1 : 0)] = '\0';
            incl = expand_includes(root, inc, &plen);
            if (!incl) {
                free(out);
                out = NULL;
                break;
            }
            piece = incl;
        }
        if (used + plen + 1 > cap) {
            cap = (used + plen + 1) * 2;
            out = realloc(out, cap);
        }
        if (out) memcpy(out + used, piece, plen);
        used += plen;
        free(incl);
        at += line;
    }
    free(src);
    if (out) out[used] = '\0';
    *len = used;
    return out;
}

/* Each embedded script is named by the SHA-1 of exactly the bytes it
 * sends with SCRIPT LOAD (else every EVALSHA would be NOSCRIPT forever),
 * and is its lua/ file with its includes in place. */
static void test_script_shas(void) {
    scripts_init(0);
    const char *r = root();
    CHECK(SCRIPT_COUNT > 0);
    for (int i = 0; i < SCRIPT_COUNT; i++) {
        const struct script *s = script_get((enum script_id)i);
        CHECK(s->src != NULL && s->len > 0 && s->file != NULL);
        if (!s->src || !s->file) continue;
        char sum[41];
        sha1sum_bytes(s->src, s->len, sum);
        if (strcmp(s->sha, sum) != 0) fprintf(stderr, "  %s: sha differs\n", s->file);
        CHECK_EQ_STR(s->sha, sum);
        CHECK_EQ_INT((int)strlen(s->sha), 40);
        if (!r) continue;
        size_t len = 0;
        char *file = expand_includes(r, s->file, &len);
        if (!file) {
            fprintf(stderr, "  cannot read lua/%s or a file it includes\n", s->file);
            CHECK(file != NULL);
            continue;
        }
        int same = s->len == len && memcmp(s->src, file, len) == 0;
        if (!same)
            fprintf(stderr, "  %s: the embedded text is not lua/%s expanded\n", s->file, s->file);
        CHECK(same);
        free(file);
    }
}

int main(void) {
    RUN(test_spec_reader);
    RUN(test_spec_file);
    RUN(test_spec_embedded);
    RUN(test_sha1_vectors);
    RUN(test_sha1_against_sha1sum);
    RUN(test_script_shas);
    return check_summary("routes_spec");
}
