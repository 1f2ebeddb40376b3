/* keygen.c -- see keygen.h. */
#include "server/keygen.h"
#include "common/names.h"
#include "server/auth.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

static const char B64URL[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

/* base64url without padding: 32 bytes give 43 characters. */
static void b64url(const unsigned char *in, size_t n, char *out) {
    size_t o = 0;
    for (size_t i = 0; i < n; i += 3) {
        unsigned v = (unsigned)in[i] << 16 | (i + 1 < n ? (unsigned)in[i + 1] << 8 : 0) |
                     (i + 2 < n ? in[i + 2] : 0);
        out[o++] = B64URL[v >> 18 & 63];
        out[o++] = B64URL[v >> 12 & 63];
        if (i + 1 < n) out[o++] = B64URL[v >> 6 & 63];
        if (i + 2 < n) out[o++] = B64URL[v & 63];
    }
    out[o] = '\0';
}

int keygen_parse_grant(const char *s, int *kind, char *prefix, size_t prefix_cap, int *access) {
    const char *first = strchr(s, ':'), *last = strrchr(s, ':');
    if (!first || first == last) return -1;
    *kind = auth_kind_parse(s, (size_t)(first - s));
    *access = auth_access_parse(last + 1, strlen(last + 1));
    size_t plen = (size_t)(last - first - 1);
    if (*kind < 0 || *access < 0 || plen >= prefix_cap || plen > NAME_MAX_LEN ||
        (plen && !name_valid(first + 1, plen)))
        return -1;
    memcpy(prefix, first + 1, plen);
    prefix[plen] = '\0';
    return 0;
}

static int usage(const char *why) {
    fprintf(stderr,
            "lockgate keygen: %s\n"
            "usage: lockgate keygen ID [--grant KIND:PREFIX:ACCESS]...\n"
            "  ID      1-%d characters of [A-Za-z0-9_-]\n"
            "  KIND    locks, semaphores, elections, ids, ops or admin\n"
            "  PREFIX  names that start with it ('' for every name)\n"
            "  ACCESS  read, write or deny\n",
            why, AUTH_ID_MAX);
    return 2;
}

int keygen_main(int argc, char **argv) {
    if (argc < 2 || argv[1][0] == '-') return usage("needs a key id");
    const char *id = argv[1];
    if (!auth_id_valid(id, strlen(id))) return usage("bad key id");
    cJSON *entry = cJSON_CreateObject(), *grants = cJSON_CreateArray();
    for (int i = 2; i < argc; i++) {
        const char *g = argv[i];
        if (strcmp(g, "--grant") == 0 && i + 1 < argc) {
            g = argv[++i];
        } else if (strncmp(g, "--grant=", 8) == 0) {
            g += 8;
        } else {
            cJSON_Delete(entry);
            cJSON_Delete(grants);
            return usage("unexpected argument");
        }
        int kind, access;
        char prefix[NAME_MAX_LEN + 1];
        if (keygen_parse_grant(g, &kind, prefix, sizeof prefix, &access) < 0) {
            cJSON_Delete(entry);
            cJSON_Delete(grants);
            return usage("a grant is KIND:PREFIX:ACCESS");
        }
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "kind", auth_kind_name(kind));
        cJSON_AddStringToObject(o, "prefix", prefix);
        cJSON_AddStringToObject(o, "access", auth_access_name(access));
        cJSON_AddItemToArray(grants, o);
    }
    unsigned char raw[32], digest[32];
    if (getrandom(raw, sizeof raw, 0) != (ssize_t)sizeof raw) {
        fprintf(stderr, "lockgate keygen: no randomness from the kernel\n");
        return 1;
    }
    char secret[48], hex[65];
    b64url(raw, sizeof raw, secret);
    auth_sha256(secret, strlen(secret), digest);
    for (int i = 0; i < 32; i++) snprintf(hex + 2 * i, 3, "%02x", digest[i]);
    cJSON_AddStringToObject(entry, "id", id);
    cJSON_AddStringToObject(entry, "sha256", hex);
    cJSON_AddItemToObject(entry, "grants", grants);
    char *json = cJSON_Print(entry);
    printf("# The key, shown this once: clients send\n"
           "#   Authorization: Bearer %s.%s\n"
           "# (lockctl: LOCKGATE_API_KEY=%s.%s).\n"
           "# Add this entry to the \"keys\" array of the auth file, then SIGHUP the gateway:\n"
           "%s\n",
           id, secret, id, secret, json);
    free(json);
    cJSON_Delete(entry);
    return 0;
}
