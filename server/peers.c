/* peers.c -- open connections per client address, for the whole gateway
 * (peers.h).  A chained hash of addresses; an entry goes when its last
 * connection closes, so the table holds only addresses with a connection
 * open. */
#include "server/peers.h"
#include "common/alloc.h"
#include "common/fnv.h"

#include <netinet/in.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define PEERS_BUCKETS 4096

struct peer {
    struct peer *next;
    unsigned char addr[16]; /* IPv4 as IPv4-mapped IPv6 */
    int open;
};

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static struct peer *buckets[PEERS_BUCKETS];
static int limit_;

void peers_init(int limit) { limit_ = limit; }

/* The address's 16 bytes; 0 for a family other than IPv4/IPv6. */
static int addr_key(const struct sockaddr *sa, unsigned char out[16]) {
    memset(out, 0, 16);
    if (sa->sa_family == AF_INET) {
        out[10] = out[11] = 0xff;
        memcpy(out + 12, &((const struct sockaddr_in *)sa)->sin_addr, 4);
        return 1;
    }
    if (sa->sa_family == AF_INET6) {
        memcpy(out, &((const struct sockaddr_in6 *)sa)->sin6_addr, 16);
        return 1;
    }
    return 0;
}

static struct peer **slot_of(const unsigned char key[16]) {
    struct peer **p = &buckets[fnv1a_64(key, 16) % PEERS_BUCKETS];
    while (*p && memcmp((*p)->addr, key, 16) != 0) p = &(*p)->next;
    return p;
}

int peers_admit(const struct sockaddr *addr, socklen_t len) {
    (void)len;
    unsigned char key[16];
    if (limit_ <= 0 || !addr_key(addr, key)) return 1;
    pthread_mutex_lock(&mu);
    struct peer **p = slot_of(key);
    int ok = !*p || (*p)->open < limit_;
    if (ok) {
        if (!*p) {
            *p = alloc_check(calloc(1, sizeof **p));
            memcpy((*p)->addr, key, 16);
        }
        (*p)->open++;
    }
    pthread_mutex_unlock(&mu);
    return ok;
}

void peers_leave(const struct sockaddr *addr) {
    unsigned char key[16];
    if (limit_ <= 0 || !addr || !addr_key(addr, key)) return;
    pthread_mutex_lock(&mu);
    struct peer **p = slot_of(key);
    if (*p && --(*p)->open == 0) {
        struct peer *gone = *p;
        *p = gone->next;
        free(gone);
    }
    pthread_mutex_unlock(&mu);
}
