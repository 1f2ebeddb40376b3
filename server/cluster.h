/* cluster.h -- what Redis Cluster mode needs that is pure arithmetic and
 * parsing: a key's hash slot, the redirect errors, and the slot map.  No
 * I/O here; redis.c does the connections (its "Cluster mode" section) and
 * tests/unit/test_cluster.c tests this alone. */
#ifndef LOCKGATE_CLUSTER_H
#define LOCKGATE_CLUSTER_H

#include <stddef.h>
#include <stdint.h>

#define CLUSTER_SLOTS 16384

/* CRC16-CCITT (XMODEM: polynomial 0x1021, initial 0), as Redis Cluster
 * hashes keys. */
uint16_t cluster_crc16(const void *buf, size_t len);

/* The slot of a key: CRC16 of its hash tag -- the bytes between the first
 * '{' and the first '}' after it, when there are any -- else of the whole
 * key, modulo 16384. */
int cluster_key_slot(const char *key, size_t len);

/* A short hash tag (base 36, at most 4 characters) whose slot is slot:
 * "{tag}" hashes there.  The same table for every caller and every run
 * (the first tag counting up from 0 that lands in each slot), made on the
 * first call: call it once before threads share it (redis_new does).
 * Redis Cluster mode's per-slot keys and channels are named with it: the
 * shard channels (<prefix>released{tag}) and the slot markers
 * (<prefix>slotmark{tag}, server/lossguard.h). */
const char *cluster_slot_tag(int slot);

/* Orders n keys for taking them slot by slot (multi-lock in cluster mode):
 * order[] gets the key indices by ascending slot, so any two requests take
 * the slots they share in the same order, and within a slot in the given
 * order (one script takes a slot's keys at once); gstart[g] is where
 * group g (one slot's keys) starts in order[], gstart[ngroups] == n.
 * Returns the number of groups (1 for n == 1). */
int cluster_group_by_slot(const char *const *keys, int n, int *order, int *gstart);

/* A redirect error from a cluster node. */
enum cluster_redirect {
    CLUSTER_NONE = 0, /* not a redirect */
    CLUSTER_MOVED,    /* "MOVED <slot> <host>:<port>": the slot lives there now */
    CLUSTER_ASK,      /* "ASK <slot> <host>:<port>": this key, once, there (migrating) */
    CLUSTER_TRYAGAIN, /* "TRYAGAIN": keys of a migrating slot are split, try later */
    CLUSTER_DOWN,     /* "CLUSTERDOWN": the cluster cannot serve the slot now */
};

/* Classifies err (a Redis error reply's text); for MOVED and ASK fills
 * slot, host (cap bytes) and port.  An empty host ("MOVED 1 :6380", a
 * node that does not know its address) is left "" for the caller to fill
 * with the address it asked. */
enum cluster_redirect cluster_parse_error(const char *err, int *slot, char *host, size_t cap,
                                          int *port);

/* The slot map: which node serves each slot, as an index into the
 * caller's node table, or -1. */
struct cluster_map {
    int16_t owner[CLUSTER_SLOTS]; /* node index, -1 when no master serves it */
};

void cluster_map_clear(struct cluster_map *m);
/* Sets slots [from, to] to node; returns 0, or -1 for a bad range. */
int cluster_map_assign(struct cluster_map *m, int from, int to, int node);
/* Slots with no master. */
int cluster_map_uncovered(const struct cluster_map *m);

#endif
