/* auth.c -- see auth.h. */
#include "server/auth.h"
#include "common/alloc.h"
#include "common/names.h"
#include "server/log.h"
#include "server/quota.h"

#include <cjson/cJSON.h>
#include <gnutls/crypto.h>
#include <gnutls/gnutls.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

static const char *const kind_names[AUTH_KIND_COUNT] = {"locks", "semaphores", "ids",
                                                        "ops",   "admin",      "elections"};
static const char *const access_names[] = {"", "read", "write", "deny"};
static const char *const verdict_names[AUTH_VERDICT_COUNT] = {
    "ok", "missing", "malformed", "unknown_key", "wrong_secret", "forbidden", "client_cert"};

const char *auth_kind_name(enum auth_kind k) { return kind_names[k]; }
const char *auth_access_name(enum auth_access a) { return access_names[a]; }
const char *auth_verdict_name(enum auth_verdict v) { return verdict_names[v]; }

static int lookup(const char *const *names, int n, const char *s, size_t len) {
    for (int i = 0; i < n; i++)
        if (names[i][0] && strlen(names[i]) == len && memcmp(names[i], s, len) == 0) return i;
    return -1;
}

int auth_kind_parse(const char *s, size_t len) {
    return lookup(kind_names, AUTH_KIND_COUNT, s, len);
}

int auth_access_parse(const char *s, size_t len) { return lookup(access_names, 4, s, len); }

void auth_sha256(const void *data, size_t len, unsigned char out[32]) {
    if (gnutls_hash_fast(GNUTLS_DIG_SHA256, data, len, out) < 0) abort();
}

static int id_byte(unsigned char c) {
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '-';
}

int auth_id_valid(const char *s, size_t len) {
    if (len == 0 || len > AUTH_ID_MAX) return 0;
    for (size_t i = 0; i < len; i++)
        if (!id_byte((unsigned char)s[i])) return 0;
    return 1;
}

/* ---- parsing the file ------------------------------------------------------- */

static int hex_digit(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* A grant prefix is the start of a name: the bytes a name may have, at
 * most NAME_MAX_LEN of them ("" covers every name). */
static int prefix_valid(const char *s) {
    size_t len = strlen(s);
    return len == 0 || (len <= NAME_MAX_LEN && name_valid(s, len));
}

/* A value from the file, cut to 40 bytes, for an error line: bytes that
 * are not printable ASCII become '?', so the reason stays one line
 * (fuzz_auth_file found a kind with a newline in it). */
static const char *shown(const char *s, char out[41]) {
    size_t i = 0;
    for (; s[i] && i < 40; i++) out[i] = s[i] >= 0x20 && s[i] < 0x7f ? s[i] : '?';
    out[i] = '\0';
    return out;
}

void auth_table_free(struct auth_table *t) {
    if (!t) return;
    for (int i = 0; i < t->nkeys; i++) {
        for (int g = 0; g < t->keys[i].ngrants; g++) free(t->keys[i].grants[g].prefix);
        free(t->keys[i].grants);
    }
    free(t->keys);
    free(t);
}

static int parse_grant(const cJSON *g, struct auth_grant *out, int k, int i, char *err,
                       size_t errlen) {
    const cJSON *kind = cJSON_GetObjectItemCaseSensitive(g, "kind");
    const cJSON *prefix = cJSON_GetObjectItemCaseSensitive(g, "prefix");
    const cJSON *access = cJSON_GetObjectItemCaseSensitive(g, "access");
    char buf[41];
    if (!cJSON_IsObject(g) || !cJSON_IsString(kind) || !cJSON_IsString(prefix) ||
        !cJSON_IsString(access)) {
        snprintf(err, errlen, "keys[%d].grants[%d]: needs string fields kind, prefix, access", k,
                 i);
        return -1;
    }
    out->kind = auth_kind_parse(kind->valuestring, strlen(kind->valuestring));
    if (out->kind < 0) {
        snprintf(
            err, errlen,
            "keys[%d].grants[%d].kind: '%s' is not locks, semaphores, elections, ids, ops or admin",
            k, i, shown(kind->valuestring, buf));
        return -1;
    }
    out->access = auth_access_parse(access->valuestring, strlen(access->valuestring));
    if (out->access < 0) {
        snprintf(err, errlen, "keys[%d].grants[%d].access: '%s' is not read, write or deny", k, i,
                 shown(access->valuestring, buf));
        return -1;
    }
    if (!prefix_valid(prefix->valuestring)) {
        snprintf(err, errlen, "keys[%d].grants[%d].prefix: at most %d bytes of [A-Za-z0-9._:-]", k,
                 i, NAME_MAX_LEN);
        return -1;
    }
    out->prefix_len = strlen(prefix->valuestring);
    out->prefix = alloc_copy(prefix->valuestring, out->prefix_len);
    return 0;
}

/* A limit is absent, or a whole number 1..max. */
static int limit_ok(const cJSON *v, int max) {
    return !v || (cJSON_IsNumber(v) && v->valuedouble >= 1 && v->valuedouble <= max &&
                  v->valuedouble == (double)(int)v->valuedouble);
}

static int parse_key(const cJSON *o, struct auth_key *key, int k, char *err, size_t errlen) {
    const cJSON *id = cJSON_GetObjectItemCaseSensitive(o, "id");
    const cJSON *sha = cJSON_GetObjectItemCaseSensitive(o, "sha256");
    const cJSON *grants = cJSON_GetObjectItemCaseSensitive(o, "grants");
    if (!cJSON_IsObject(o)) {
        snprintf(err, errlen, "keys[%d]: not an object", k);
        return -1;
    }
    if (!cJSON_IsString(id) || !auth_id_valid(id->valuestring, strlen(id->valuestring))) {
        snprintf(err, errlen, "keys[%d].id: 1-%d characters of [A-Za-z0-9_-]", k, AUTH_ID_MAX);
        return -1;
    }
    strcpy(key->id, id->valuestring);
    if (!cJSON_IsString(sha) || strlen(sha->valuestring) != 64) {
        snprintf(err, errlen, "keys[%d].sha256: 64 hex digits (the secret's SHA-256)", k);
        return -1;
    }
    for (int i = 0; i < 32; i++) {
        int hi = hex_digit(sha->valuestring[2 * i]), lo = hex_digit(sha->valuestring[2 * i + 1]);
        if (hi < 0 || lo < 0) {
            snprintf(err, errlen, "keys[%d].sha256: 64 hex digits (the secret's SHA-256)", k);
            return -1;
        }
        key->sha256[i] = (unsigned char)(hi << 4 | lo);
    }
    const cJSON *limits = cJSON_GetObjectItemCaseSensitive(o, "limits");
    if (limits) {
        const cJSON *rps = cJSON_GetObjectItemCaseSensitive(limits, "requests_per_second");
        const cJSON *holds = cJSON_GetObjectItemCaseSensitive(limits, "holds_at_once");
        const cJSON *f;
        int known = 1;
        cJSON_ArrayForEach(f, limits) known &=
            f->string && (strcmp(f->string, "requests_per_second") == 0 ||
                          strcmp(f->string, "holds_at_once") == 0);
        if (!cJSON_IsObject(limits) || !known || !limit_ok(rps, QUOTA_RPS_MAX) ||
            !limit_ok(holds, QUOTA_HOLDS_MAX)) {
            snprintf(err, errlen,
                     "keys[%d].limits: an object with requests_per_second (a whole number "
                     "1-%d) and holds_at_once (1-%d), each optional",
                     k, QUOTA_RPS_MAX, QUOTA_HOLDS_MAX);
            return -1;
        }
        if (rps) key->rps = (uint32_t)rps->valuedouble;
        if (holds) key->holds = (uint32_t)holds->valuedouble;
    }
    if (!cJSON_IsArray(grants) || cJSON_GetArraySize(grants) > AUTH_GRANTS_MAX) {
        snprintf(err, errlen, "keys[%d].grants: an array of at most %d grants", k, AUTH_GRANTS_MAX);
        return -1;
    }
    int n = cJSON_GetArraySize(grants);
    key->grants = alloc_check(calloc((size_t)n + 1, sizeof *key->grants));
    const cJSON *g;
    cJSON_ArrayForEach(g, grants) {
        if (parse_grant(g, &key->grants[key->ngrants], k, key->ngrants, err, errlen) < 0) return -1;
        key->ngrants++;
    }
    return 0;
}

struct auth_table *auth_table_parse(const char *json, size_t len, char *err, size_t errlen) {
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(json, len, &end, 0);
    if (!root) {
        snprintf(err, errlen, "not JSON (at byte %zu)", end ? (size_t)(end - json) : (size_t)0);
        return NULL;
    }
    const cJSON *keys = cJSON_GetObjectItemCaseSensitive(root, "keys");
    if (!cJSON_IsObject(root) || !cJSON_IsArray(keys) || cJSON_GetArraySize(keys) > AUTH_KEYS_MAX) {
        snprintf(err, errlen, "needs an object {\"keys\": [...]} of at most %d keys",
                 AUTH_KEYS_MAX);
        cJSON_Delete(root);
        return NULL;
    }
    struct auth_table *t = alloc_check(calloc(1, sizeof *t));
    t->keys = alloc_check(calloc((size_t)cJSON_GetArraySize(keys) + 1, sizeof *t->keys));
    const cJSON *o;
    cJSON_ArrayForEach(o, keys) {
        struct auth_key *key = &t->keys[t->nkeys];
        int rc = parse_key(o, key, t->nkeys, err, errlen);
        t->nkeys++; /* counted even when half-built: auth_table_free frees it */
        if (rc == 0 && auth_table_find(t, key->id, strlen(key->id)) != key) {
            snprintf(err, errlen, "keys[%d].id: '%s' appears twice", t->nkeys - 1, key->id);
            rc = -1;
        }
        if (rc < 0) {
            auth_table_free(t);
            cJSON_Delete(root);
            return NULL;
        }
    }
    cJSON_Delete(root);
    return t;
}

const struct auth_key *auth_table_find(const struct auth_table *t, const char *id, size_t len) {
    for (int i = 0; t && i < t->nkeys; i++)
        if (strlen(t->keys[i].id) == len && memcmp(t->keys[i].id, id, len) == 0) return &t->keys[i];
    return NULL;
}

/* ---- deciding --------------------------------------------------------------- */

int auth_allows(const struct auth_key *key, enum auth_kind kind, const char *name,
                enum auth_access want) {
    size_t best_len = 0;
    int best = 0; /* no grant matches: denied */
    for (int i = 0; i < key->ngrants; i++) {
        const struct auth_grant *g = &key->grants[i];
        if (g->kind != (int)kind || strncmp(name, g->prefix, g->prefix_len) != 0) continue;
        if (!best || g->prefix_len > best_len || (g->prefix_len == best_len && g->access > best)) {
            best = g->access;
            best_len = g->prefix_len;
        }
    }
    return best != 0 && best != AUTH_DENY && best >= (int)want;
}

int auth_parse_bearer(const char *header, const char **id, size_t *id_len, const char **secret,
                      size_t *secret_len) {
    if (strncasecmp(header, "Bearer", 6) != 0 || header[6] != ' ') return -1;
    const char *p = header + 6;
    while (*p == ' ') p++;
    size_t n = 0;
    while (id_byte((unsigned char)p[n])) n++;
    if (n == 0 || n > AUTH_ID_MAX || p[n] != '.') return -1;
    const char *s = p + n + 1;
    size_t m = 0;
    while (id_byte((unsigned char)s[m])) m++;
    /* Trailing spaces are tolerated (some clients pad); nothing else. */
    size_t t = m;
    while (s[t] == ' ') t++;
    if (m == 0 || m > AUTH_SECRET_MAX || s[t] != '\0') return -1;
    *id = p;
    *id_len = n;
    *secret = s;
    *secret_len = m;
    return 0;
}

int auth_secret_matches(const struct auth_key *key, const char *secret, size_t len) {
    static const unsigned char nobody[32];
    unsigned char got[32];
    auth_sha256(secret, len, got);
    const unsigned char *want = key ? key->sha256 : nobody;
    unsigned diff = 0;
    for (int i = 0; i < 32; i++) diff |= (unsigned)(got[i] ^ want[i]);
    return key != NULL && diff == 0;
}

/* ---- the table in force ----------------------------------------------------- */

/* Requests read the table under the read lock for the few microseconds a
 * check takes; a reload swaps it under the write lock and frees the old
 * one.  Nothing keeps a pointer into a table past the check: a request
 * copies its key's id. */
static pthread_rwlock_t table_lock = PTHREAD_RWLOCK_INITIALIZER;
static struct auth_table *table;
static char *table_path;
static atomic_ullong denials[AUTH_VERDICT_COUNT];

static struct auth_table *load_file(const char *path, char *err, size_t errlen) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(err, errlen, "cannot read auth file %.200s: %m", path);
        return NULL;
    }
    char *buf = alloc_check(malloc(AUTH_FILE_MAX + 1));
    size_t n = fread(buf, 1, AUTH_FILE_MAX + 1, f);
    int bad = ferror(f);
    fclose(f);
    struct auth_table *t = NULL;
    char why[200];
    if (bad)
        snprintf(err, errlen, "cannot read auth file %.200s", path);
    else if (n > AUTH_FILE_MAX)
        snprintf(err, errlen, "auth file %.200s is over %d bytes", path, AUTH_FILE_MAX);
    else if (!(t = auth_table_parse(buf, n, why, sizeof why)))
        snprintf(err, errlen, "auth file %.200s: %s", path, why);
    free(buf);
    return t;
}

int auth_load(const char *path, char *err, size_t errlen) {
    struct auth_table *t = load_file(path, err, errlen);
    if (!t) return -1;
    pthread_rwlock_wrlock(&table_lock);
    auth_table_free(table);
    table = t;
    free(table_path);
    table_path = alloc_check(strdup(path));
    pthread_rwlock_unlock(&table_lock);
    return 0;
}

int auth_reload(void) {
    if (!table_path) return 0;
    char err[300];
    struct auth_table *t = load_file(table_path, err, sizeof err);
    if (!t) {
        log_error("auth: reload failed, the keys in force stay: %s", err);
        return -1;
    }
    pthread_rwlock_wrlock(&table_lock);
    struct auth_table *old = table;
    table = t;
    pthread_rwlock_unlock(&table_lock);
    auth_table_free(old);
    log_info("auth: reloaded %s: %d keys", table_path, t->nkeys);
    return 0;
}

int auth_enabled(void) { return table_path != NULL; }

void auth_stop(void) {
    pthread_rwlock_wrlock(&table_lock);
    auth_table_free(table);
    table = NULL;
    pthread_rwlock_unlock(&table_lock);
}

enum auth_verdict auth_check(const char *header, enum auth_kind kind, const char *name,
                             enum auth_access want, char key_id[AUTH_ID_MAX + 1]) {
    const char *id, *secret;
    size_t id_len, secret_len;
    if (!header) return AUTH_MISSING;
    if (auth_parse_bearer(header, &id, &id_len, &secret, &secret_len) < 0) return AUTH_MALFORMED;
    pthread_rwlock_rdlock(&table_lock);
    const struct auth_key *key = auth_table_find(table, id, id_len);
    enum auth_verdict v = AUTH_OK;
    if (!auth_secret_matches(key, secret, secret_len))
        v = key ? AUTH_WRONG_SECRET : AUTH_UNKNOWN_KEY;
    else if (want && !auth_allows(key, kind, name, want))
        v = AUTH_FORBIDDEN;
    if (key) strcpy(key_id, key->id); /* OK, FORBIDDEN, WRONG_SECRET */
    pthread_rwlock_unlock(&table_lock);
    return v;
}

int auth_key_may(const char *key_id, enum auth_kind kind, const char *name, enum auth_access want) {
    if (!auth_enabled()) return 1;
    if (!key_id) return 0;
    pthread_rwlock_rdlock(&table_lock);
    const struct auth_key *key = auth_table_find(table, key_id, strlen(key_id));
    int ok = key && auth_allows(key, kind, name, want);
    pthread_rwlock_unlock(&table_lock);
    return ok;
}

int64_t auth_rate_take(const char *key_id) {
    if (!key_id || !auth_enabled()) return 0;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    int64_t now_us = (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000, wait_us = 0;
    pthread_rwlock_rdlock(&table_lock);
    /* the table's keys are the table's own: only their rate fields change */
    struct auth_key *key = (struct auth_key *)auth_table_find(table, key_id, strlen(key_id));
    if (key && key->rps && (wait_us = quota_take(&key->tat_us, key->rps, now_us)) > 0)
        atomic_fetch_add(&key->rate_refused, 1);
    pthread_rwlock_unlock(&table_lock);
    return wait_us > 0 ? (wait_us + 999) / 1000 : 0;
}

uint32_t auth_holds_limit(const char *key_id) {
    if (!key_id || !auth_enabled()) return 0;
    pthread_rwlock_rdlock(&table_lock);
    const struct auth_key *key = auth_table_find(table, key_id, strlen(key_id));
    uint32_t limit = key ? key->holds : 0;
    pthread_rwlock_unlock(&table_lock);
    return limit;
}

int auth_holds_any(void) {
    if (!auth_enabled()) return 0;
    int any = 0;
    pthread_rwlock_rdlock(&table_lock);
    for (int i = 0; table && i < table->nkeys && !any; i++) any = table->keys[i].holds > 0;
    pthread_rwlock_unlock(&table_lock);
    return any;
}

void auth_count_holds_refused(const char *key_id) {
    if (!key_id) return;
    pthread_rwlock_rdlock(&table_lock);
    struct auth_key *key = (struct auth_key *)auth_table_find(table, key_id, strlen(key_id));
    if (key) atomic_fetch_add(&key->holds_refused, 1);
    pthread_rwlock_unlock(&table_lock);
}

void auth_count_denial(enum auth_verdict v) { atomic_fetch_add(&denials[v], 1); }

/* The denials by reason, and the requests refused for their rate by key
 * id: only keys with a limit, so the labels are bounded by the file. */
char *auth_metrics_text(void) {
    pthread_rwlock_rdlock(&table_lock);
    size_t cap = 2048 + (size_t)(table ? table->nkeys : 0) * 2 * (AUTH_ID_MAX + 96);
    char *s = alloc_check(malloc(cap));
    size_t used = (size_t)snprintf(s, cap,
                                   "# HELP lockgate_auth_denials_total Requests refused access, "
                                   "by reason\n# TYPE lockgate_auth_denials_total counter\n");
    for (int v = AUTH_MISSING; v < AUTH_VERDICT_COUNT; v++)
        used += (size_t)snprintf(s + used, cap - used,
                                 "lockgate_auth_denials_total{reason=\"%s\"} %llu\n",
                                 verdict_names[v], atomic_load(&denials[v]));
    used += (size_t)snprintf(s + used, cap - used,
                             "# HELP lockgate_quota_refused_total Requests refused 429 for a key's "
                             "limit, by key id\n# TYPE lockgate_quota_refused_total counter\n");
    for (int i = 0; table && i < table->nkeys; i++)
        if (table->keys[i].rps)
            used += (size_t)snprintf(
                s + used, cap - used,
                "lockgate_quota_refused_total{key_id=\"%s\",quota=\"requests_per_second\"} %llu\n",
                table->keys[i].id, atomic_load(&table->keys[i].rate_refused));
    for (int i = 0; table && i < table->nkeys; i++)
        if (table->keys[i].holds)
            used += (size_t)snprintf(
                s + used, cap - used,
                "lockgate_quota_refused_total{key_id=\"%s\",quota=\"holds_at_once\"} %llu\n",
                table->keys[i].id, atomic_load(&table->keys[i].holds_refused));
    pthread_rwlock_unlock(&table_lock);
    return s;
}
