/* alloc.h -- allocate or give up.  Neither binary tries to recover from
 * out of memory: there is no useful answer to send without memory, and a
 * half-built reply or request is worse than a clear end (fatal.h). */
#ifndef LOCKGATE_ALLOC_H
#define LOCKGATE_ALLOC_H

#include <stddef.h>

/* Returns p, or ends the process with "out of memory" when p is NULL.
 * Wraps any allocator: alloc_check(malloc(n)), alloc_check(cJSON_...()). */
void *alloc_check(void *p);

/* A malloc'd, NUL-terminated copy of len bytes of src. */
char *alloc_copy(const void *src, size_t len);

#endif
