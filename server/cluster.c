/* cluster.c -- see cluster.h. */
#include "server/cluster.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Bit by bit rather than by table: it runs once per command on a key of a
 * few dozen bytes, next to a round trip to Redis. */
uint16_t cluster_crc16(const void *buf, size_t len) {
    const unsigned char *p = buf;
    uint16_t crc = 0;
    for (size_t i = 0; i < len; i++) {
        crc ^= (uint16_t)(p[i] << 8);
        for (int b = 0; b < 8; b++) crc = (uint16_t)(crc & 0x8000 ? (crc << 1) ^ 0x1021 : crc << 1);
    }
    return crc;
}

/* An empty tag ("{}") does not count: the whole key is hashed, as Redis does. */
int cluster_key_slot(const char *key, size_t len) {
    const char *open = memchr(key, '{', len);
    if (open) {
        size_t rest = len - (size_t)(open - key) - 1;
        const char *close = memchr(open + 1, '}', rest);
        if (close && close > open + 1)
            return cluster_crc16(open + 1, (size_t)(close - open - 1)) & (CLUSTER_SLOTS - 1);
    }
    return cluster_crc16(key, len) & (CLUSTER_SLOTS - 1);
}

/* Base-36 counting lands in every one of the 16,384 slots within a few
 * hundred thousand CRCs (about 2 ms, once, on the first worker that asks:
 * pthread_once, as every worker may); no tag is longer than 4 characters
 * (tests/unit/test_cluster.c checks every one). */
static char (*slot_tags)[8];
static pthread_once_t slot_tags_once = PTHREAD_ONCE_INIT;

static void slot_tags_make(void) {
    char(*t)[8] = calloc(CLUSTER_SLOTS, sizeof *t);
    if (!t) {
        fprintf(stderr, "out of memory\n");
        abort();
    }
    int left = CLUSTER_SLOTS;
    for (unsigned n = 0; left > 0; n++) {
        char tag[8];
        int len = 0;
        for (unsigned v = n;; v /= 36) {
            tag[len++] = "0123456789abcdefghijklmnopqrstuvwxyz"[v % 36];
            if (v < 36) break;
        }
        tag[len] = '\0';
        int s = cluster_crc16(tag, (size_t)len) & (CLUSTER_SLOTS - 1);
        if (t[s][0]) continue;
        memcpy(t[s], tag, (size_t)len + 1);
        left--;
    }
    slot_tags = t;
}

const char *cluster_slot_tag(int slot) {
    pthread_once(&slot_tags_once, slot_tags_make);
    return slot_tags[slot];
}

/* Insertion sort, stable: at most 64 keys (MULTI_MAX), each slot computed
 * once. */
int cluster_group_by_slot(const char *const *keys, int n, int *order, int *gstart) {
    int slot[n > 0 ? n : 1];
    for (int i = 0; i < n; i++) slot[i] = cluster_key_slot(keys[i], strlen(keys[i]));
    for (int i = 0; i < n; i++) {
        int k = i;
        while (k > 0) {
            int a = order[k - 1];
            if (slot[a] <= slot[i]) break;
            order[k] = a;
            k--;
        }
        order[k] = i;
    }
    int g = 0;
    for (int k = 0; k < n; k++)
        if (k == 0 || slot[order[k]] != slot[order[k - 1]]) gstart[g++] = k;
    gstart[g] = n;
    return g;
}

enum cluster_redirect cluster_parse_error(const char *err, int *slot, char *host, size_t cap,
                                          int *port) {
    enum cluster_redirect kind;
    if (strncmp(err, "MOVED ", 6) == 0)
        kind = CLUSTER_MOVED;
    else if (strncmp(err, "ASK ", 4) == 0)
        kind = CLUSTER_ASK;
    else if (strncmp(err, "TRYAGAIN", 8) == 0)
        return CLUSTER_TRYAGAIN;
    else if (strncmp(err, "CLUSTERDOWN", 11) == 0)
        return CLUSTER_DOWN;
    else
        return CLUSTER_NONE;
    const char *p = strchr(err, ' ') + 1;
    char *end;
    long s = strtol(p, &end, 10);
    if (end == p || *end != ' ' || s < 0 || s >= CLUSTER_SLOTS) return CLUSTER_NONE;
    const char *addr = end + 1, *colon = strrchr(addr, ':');
    if (!colon) return CLUSTER_NONE;
    long pt = strtol(colon + 1, &end, 10);
    if (end == colon + 1 || pt <= 0 || pt > 65535) return CLUSTER_NONE;
    size_t hlen = (size_t)(colon - addr);
    if (hlen >= cap) return CLUSTER_NONE;
    memcpy(host, addr, hlen);
    host[hlen] = '\0';
    *slot = (int)s;
    *port = (int)pt;
    return kind;
}

void cluster_map_clear(struct cluster_map *m) {
    for (int i = 0; i < CLUSTER_SLOTS; i++) m->owner[i] = -1;
}

int cluster_map_assign(struct cluster_map *m, int from, int to, int node) {
    if (from < 0 || to >= CLUSTER_SLOTS || from > to) return -1;
    for (int i = from; i <= to; i++) m->owner[i] = (int16_t)node;
    return 0;
}

int cluster_map_uncovered(const struct cluster_map *m) {
    int n = 0;
    for (int i = 0; i < CLUSTER_SLOTS; i++) n += m->owner[i] < 0;
    return n;
}
