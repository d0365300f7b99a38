/* fnv1a.h: FNV-1a, a fast 64-bit non-cryptographic hash: checksums against torn writes and
 * hash-table keys, never identity (that is sha256.h). */
#ifndef KG_FNV1A_H
#define KG_FNV1A_H

#include "common.h"

#include <stddef.h>
#include <stdint.h>

uint64_t fnv1a64(const void *data, size_t len);
/* The hash h of some bytes extended by len more: fnv1a64_add(FNV1A64_BASIS, d, n) is
 * fnv1a64(d, n), and a checksum over several regions chains them. */
#define FNV1A64_BASIS 0xcbf29ce484222325ULL
uint64_t fnv1a64_add(uint64_t h, const void *data, size_t len);
/* The same step over 8-byte words in the host's order (a byte at a time for the rest): not
 * FNV-1a's value, but eight times faster, for checksums of megabytes that a load reads. A
 * change to any one word always changes the result (each step is a bijection). */
uint64_t fnv1a64_words(uint64_t h, const void *data, size_t len);

#endif
