/* memguard.c -- see memguard.h.  Two counters (connections that see an
 * evicting master, and of those an allkeys-* one) decide; the text of the
 * last finding is kept for /readyz under a mutex, written rarely. */
#include "server/memguard.h"
#include "server/log.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int accept_risk;
static atomic_int evicting; /* connections whose master may evict */
static atomic_int allkeys;  /* of those, under an allkeys-* (or unknown) policy */
static pthread_mutex_t last_mu = PTHREAD_MUTEX_INITIALIZER;
static char last[256]; /* the last finding, for /readyz */

void memguard_init(int accept) {
    accept_risk = accept;
    if (accept)
        log_warn("memguard: --accept-eviction-risk 1: locks are granted even on a Redis "
                 "master whose maxmemory-policy may evict them; an evicted lock is granted "
                 "again to another client while its holder still holds it");
}

/* The value of "field:" on its own line of an INFO answer, or NULL. */
static const char *info_field(const char *info, const char *field, size_t *len) {
    size_t n = strlen(field);
    for (const char *p = info; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL) {
        if (strncmp(p, field, n) == 0 && p[n] == ':') {
            const char *v = p + n + 1;
            *len = strcspn(v, "\r\n");
            return v;
        }
    }
    return NULL;
}

int memguard_parse(const char *info, char *policy, size_t cap, long long *maxmemory) {
    size_t len = 0;
    const char *v = info_field(info, "maxmemory_policy", &len);
    snprintf(policy, cap, "%.*s", v ? (int)len : 7, v ? v : "unknown");
    const char *m = info_field(info, "maxmemory", &len);
    *maxmemory = m ? strtoll(m, NULL, 10) : 0;
    /* Without maxmemory nothing is evicted, whatever the policy. */
    if (*maxmemory <= 0 || strcmp(policy, "noeviction") == 0) return 0;
    return strncmp(policy, "volatile-", 9) == 0 ? 1 : 2;
}

void memguard_forget(struct memguard_seen *seen) {
    if (seen->evicting == 2) atomic_fetch_sub(&allkeys, 1);
    if (seen->evicting) atomic_fetch_sub(&evicting, 1);
    seen->evicting = 0;
}

void memguard_note(struct memguard_seen *seen, const char *host, int port, const char *info) {
    char policy[64];
    long long maxmemory;
    int now = memguard_parse(info, policy, sizeof policy, &maxmemory);
    if (now == seen->evicting) return;
    int was = seen->evicting;
    memguard_forget(seen);
    seen->evicting = now;
    if (now) {
        atomic_fetch_add(&evicting, 1);
        if (now == 2) atomic_fetch_add(&allkeys, 1);
        pthread_mutex_lock(&last_mu);
        snprintf(last, sizeof last, "Redis master %s:%d has maxmemory-policy %s (maxmemory %lld)",
                 host, port, policy, maxmemory);
        pthread_mutex_unlock(&last_mu);
        if (accept_risk)
            log_error("memguard: Redis master %s:%d has maxmemory-policy %s with maxmemory %lld: "
                      "it may evict held locks; granting anyway (--accept-eviction-risk 1)",
                      host, port, policy, maxmemory);
        else
            log_error("memguard: Redis master %s:%d has maxmemory-policy %s with maxmemory %lld: "
                      "it may evict held locks, so lock, semaphore, session and multi-lock "
                      "grants are refused (503 redis_may_evict)%s until it is noeviction",
                      host, port, policy, maxmemory, now == 2 ? " and so are ids" : "");
    } else if (was) {
        log_info("memguard: Redis master %s:%d has maxmemory-policy %s now: it no longer "
                 "evicts",
                 host, port, policy);
    }
}

int memguard_refusing(void) { return !accept_risk && atomic_load(&evicting) > 0; }

int memguard_ids_refusing(void) { return !accept_risk && atomic_load(&allkeys) > 0; }

int memguard_describe(char *out, size_t cap) {
    if (atomic_load(&evicting) == 0) return 0;
    pthread_mutex_lock(&last_mu);
    snprintf(out, cap, "%s", last);
    pthread_mutex_unlock(&last_mu);
    return 1;
}
