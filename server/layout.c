/* layout.c -- see layout.h.  The state every worker shares: how many
 * (connection, master) pairs last read a version not understood, whether
 * any version was read yet, and the text of the last refusal. */
#include "server/layout.h"
#include "server/log.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

static long long mine = LAYOUT_VERSION;
static atomic_int nforeign; /* pairs whose last read was not understood */
static atomic_int known;    /* some version was read */
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static char last[200]; /* the last refusal, for answers */

/* The versions this build can share a Redis with besides its own: a
 * compatible change adds the version it keeps.  In Redis Cluster mode
 * layout 3 writes what layout 2 writes (its live holds are made outside
 * Redis Cluster only, layout.h), so there it shares 2. */
static long long shares[] = {0};

void layout_init(long long version, int cluster) {
    mine = version;
    if (cluster && version == 3) shares[0] = 2;
}

long long layout_version(void) { return mine; }

static int understood(long long v) {
    if (v == mine) return 1;
    for (size_t i = 0; i < sizeof shares / sizeof shares[0]; i++)
        if (shares[i] && shares[i] == v) return 1;
    return 0;
}

void layout_note(struct layout_seen *seen, const char *host, int port, const char *value) {
    char *end;
    if (!value || !*value) return;
    long long v = strtoll(value, &end, 10);
    if (*end || v < 1) v = -1; /* not a version: never understood */
    int foreign = !understood(v);
    atomic_store(&known, 1);
    if (foreign && (!seen->foreign || seen->version != v)) {
        pthread_mutex_lock(&mu);
        snprintf(last, sizeof last,
                 "Redis master %s:%d holds key layout version %s; this gateway needs layout %lld "
                 "(README, \"Upgrading\")",
                 host, port, v > 0 ? value : "(unreadable)", mine);
        pthread_mutex_unlock(&mu);
        log_error("layout: %s; it touches none of that data until the versions agree", last);
    }
    if (foreign != seen->foreign) atomic_fetch_add(&nforeign, foreign ? 1 : -1);
    if (!foreign && seen->foreign)
        log_info("layout: Redis master %s:%d holds layout %lld, which this gateway serves", host,
                 port, v);
    seen->foreign = foreign;
    seen->version = v;
}

int layout_refusing(char *out, size_t cap) {
    if (atomic_load(&nforeign) <= 0) return 0;
    pthread_mutex_lock(&mu);
    snprintf(out, cap, "%s", last);
    pthread_mutex_unlock(&mu);
    return 1;
}

int layout_known(void) { return atomic_load(&known); }
