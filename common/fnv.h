/* fnv.h -- FNV-1a, 64 bits: a fast, well-spread hash for picking a shard
 * or a bucket from a name.  Not for anything an attacker may aim at. */
#ifndef LOCKGATE_FNV_H
#define LOCKGATE_FNV_H

#include <stddef.h>
#include <stdint.h>

uint64_t fnv1a_64(const void *data, size_t len);

#endif
