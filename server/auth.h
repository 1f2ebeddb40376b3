/* auth.h -- who may use the gateway: API keys (--auth-file) and their
 * grants.
 *
 * The file is JSON: {"keys": [{"id", "sha256", "grants": [{"kind",
 * "prefix", "access"}]}]} (docs/security.md).  A client sends
 * "Authorization: Bearer <id>.<secret>"; the secret's SHA-256 is compared
 * with the key's in constant time.  A grant's prefix matches names that
 * start with it; the longest matching prefix of the asked kind decides,
 * and at equal length deny beats write beats read.  write includes read.
 *
 * Parsing and deciding are pure (no I/O, no globals) so that unit tests
 * and fuzzers reach them without a server; the loaded table, its reload
 * on SIGHUP and the per-request check sit below them. */
#ifndef LOCKGATE_AUTH_H
#define LOCKGATE_AUTH_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#define AUTH_ID_MAX     64   /* bytes of a key id: [A-Za-z0-9_-] */
#define AUTH_SECRET_MAX 256  /* bytes of a secret as sent */
#define AUTH_GRANTS_MAX 256  /* grants one key may have */
#define AUTH_KEYS_MAX   4096 /* keys one file may have */
#define AUTH_FILE_MAX   (4 * 1024 * 1024)

enum auth_kind {
    AUTH_LOCKS,
    AUTH_SEMAPHORES,
    AUTH_IDS,
    AUTH_OPS,
    AUTH_ADMIN,
    AUTH_ELECTIONS,
    AUTH_KIND_COUNT
};

/* Ordered: at equal prefix length the higher one wins. */
enum auth_access { AUTH_READ = 1, AUTH_WRITE = 2, AUTH_DENY = 3 };

struct auth_grant {
    int kind;          /* enum auth_kind */
    int access;        /* enum auth_access */
    char *prefix;      /* names it covers start with this ("" = all) */
    size_t prefix_len; /* strlen(prefix) */
};

struct auth_key {
    char id[AUTH_ID_MAX + 1];    /* the id clients send before the '.' */
    unsigned char sha256[32];    /* SHA-256 of the secret */
    struct auth_grant *grants;   /* what it may do */
    int ngrants;                 /* used entries of grants */
    uint32_t rps;                /* "limits": requests a second (quota.h), 0: none */
    _Atomic int64_t tat_us;      /* its rate's state (quota_take), per gateway */
    atomic_ullong rate_refused;  /* requests refused for the rate, for /metrics */
    uint32_t holds;              /* "limits": holds at once across gateways, 0: none */
    atomic_ullong holds_refused; /* acquisitions refused for holds, for /metrics */
};

struct auth_table {
    struct auth_key *keys; /* sorted by nothing: files hold few keys */
    int nkeys;             /* used entries of keys */
};

/* Why a request was let in or not; also the /metrics reason label. */
enum auth_verdict {
    AUTH_OK,
    AUTH_MISSING,      /* no Authorization header */
    AUTH_MALFORMED,    /* not "Bearer <id>.<secret>" */
    AUTH_UNKNOWN_KEY,  /* no key has that id */
    AUTH_WRONG_SECRET, /* the id is known, the secret is not its own */
    AUTH_FORBIDDEN,    /* a valid key without the grant */
    AUTH_CLIENT_CERT,  /* mutual TLS: no client certificate, or not the CA's */
    AUTH_VERDICT_COUNT
};

/* ---- pure functions --------------------------------------------------------- */

/* Parses an auth file's bytes (not NUL-terminated).  Returns a table the
 * caller frees with auth_table_free, or NULL with a one-line reason in err. */
struct auth_table *auth_table_parse(const char *json, size_t len, char *err, size_t errlen);
void auth_table_free(struct auth_table *t);

/* The key with this id, or NULL. */
const struct auth_key *auth_table_find(const struct auth_table *t, const char *id, size_t len);

/* The key key_id's request rate (its "limits"): 0 when a request may go
 * on now (also for a key without a limit, and with auth off), else the
 * milliseconds until one would be let in; counted by key for /metrics. */
int64_t auth_rate_take(const char *key_id);

/* The key key_id's "holds_at_once" limit: 0 for none (also with auth
 * off or an unknown key).  The count itself lives in Redis
 * (handlers/quota_holds.h). */
uint32_t auth_holds_limit(const char *key_id);
/* 1 when some key of the file has a holds_at_once (0 with auth off). */
int auth_holds_any(void);
/* Counts one acquisition refused for key_id's holds_at_once, for /metrics. */
void auth_count_holds_refused(const char *key_id);

/* 1 when key may have `want` (AUTH_READ or AUTH_WRITE) on name of kind. */
int auth_allows(const struct auth_key *key, enum auth_kind kind, const char *name,
                enum auth_access want);

/* Splits an Authorization value "Bearer <id>.<secret>" (scheme
 * case-insensitive, one or more spaces).  Returns 0 with the parts
 * pointing into header, or -1 when it is not of that form. */
int auth_parse_bearer(const char *header, const char **id, size_t *id_len, const char **secret,
                      size_t *secret_len);

/* 1 when SHA-256(secret) equals key's digest; compared in constant time.
 * key may be NULL (an unknown id): the same work is done, and 0 returned. */
int auth_secret_matches(const struct auth_key *key, const char *secret, size_t len);

/* The names of the enums as the file and the API spell them; -1 when
 * unknown. */
int auth_kind_parse(const char *s, size_t len);
int auth_access_parse(const char *s, size_t len);
const char *auth_kind_name(enum auth_kind k);
const char *auth_access_name(enum auth_access a);
const char *auth_verdict_name(enum auth_verdict v);

/* SHA-256 of data into out. */
void auth_sha256(const void *data, size_t len, unsigned char out[32]);

/* 1 when s is 1-AUTH_ID_MAX bytes of [A-Za-z0-9_-]. */
int auth_id_valid(const char *s, size_t len);

/* ---- the loaded table ------------------------------------------------------- */

/* Loads path as the table in force.  Returns 0, or -1 with a one-line
 * reason in err (the gateway then exits 2). */
int auth_load(const char *path, char *err, size_t errlen);

/* Reads the file again (SIGHUP).  An invalid file keeps the table in force
 * and logs one error line.  Returns 0 or -1. */
int auth_reload(void);

/* Frees the table at exit. */
void auth_stop(void);

/* 1 when an auth file is in force. */
int auth_enabled(void);

/* Checks an Authorization header (may be NULL) for `want` on name of kind
 * (want 0: a valid key is enough, whatever its grants).
 * On AUTH_OK, AUTH_FORBIDDEN and AUTH_WRONG_SECRET the key's id is copied
 * into key_id (an id is not a secret: a denial is logged with it). */
enum auth_verdict auth_check(const char *header, enum auth_kind kind, const char *name,
                             enum auth_access want, char key_id[AUTH_ID_MAX + 1]);

/* 1 when the key with this id (in the table in force now) may have want on
 * name; 1 as well when auth is off. */
int auth_key_may(const char *key_id, enum auth_kind kind, const char *name, enum auth_access want);

/* Counts a denial for /metrics (by reason). */
void auth_count_denial(enum auth_verdict v);

/* The denial counters as Prometheus text; the caller frees it. */
char *auth_metrics_text(void);

#endif
