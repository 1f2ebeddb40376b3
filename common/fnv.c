/* fnv.c -- see fnv.h. */
#include "common/fnv.h"

#define FNV64_OFFSET_BASIS 0xcbf29ce484222325ULL
#define FNV64_PRIME        0x100000001b3ULL

uint64_t fnv1a_64(const void *data, size_t len) {
    const unsigned char *p = data;
    uint64_t h = FNV64_OFFSET_BASIS;
    for (size_t i = 0; i < len; i++) h = (h ^ p[i]) * FNV64_PRIME;
    return h;
}
