/* fnv1a.h: FNV-1a, a fast 64-bit non-cryptographic hash: checksums against torn writes and
 * hash-table keys, never identity (that is sha256.h). */
#ifndef KG_FNV1A_H
#define KG_FNV1A_H

#include "common.h"

#include <stddef.h>
#include <stdint.h>

uint64_t fnv1a64(const void *data, size_t len);

#endif
