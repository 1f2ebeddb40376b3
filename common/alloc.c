/* alloc.c -- see alloc.h. */
#include "common/alloc.h"

#include "common/fatal.h"

#include <stdlib.h>
#include <string.h>

void *alloc_check(void *p) {
    if (!p) fatal("out of memory");
    return p;
}

char *alloc_copy(const void *src, size_t len) {
    char *p = alloc_check(malloc(len + 1));
    memcpy(p, src, len);
    p[len] = '\0';
    return p;
}
