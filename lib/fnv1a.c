/* fnv1a.c: FNV-1a, 64 bits (offset basis and prime from the FNV reference). Kept apart from
 * sha256.c so that tools hashing only this way do not load libcrypto. */
#include "common.h"

#include "fnv1a.h"

uint64_t fnv1a64(const void *data, size_t len)
{
	const unsigned char *p = data;
	uint64_t h = 0xcbf29ce484222325ULL;
	for (size_t i = 0; i < len; i++)
		h = (h ^ p[i]) * 0x100000001b3ULL;
	return h;
}
