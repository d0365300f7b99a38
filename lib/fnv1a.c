/* fnv1a.c: FNV-1a, 64 bits (offset basis and prime from the FNV reference). Kept apart from
 * sha256.c so that tools hashing only this way do not load libcrypto. */
#include "common.h"

#include <string.h>

#include "fnv1a.h"

uint64_t fnv1a64_add(uint64_t h, const void *data, size_t len)
{
	const unsigned char *p = data;
	for (size_t i = 0; i < len; i++)
		h = (h ^ p[i]) * 0x100000001b3ULL;
	return h;
}

uint64_t fnv1a64_words(uint64_t h, const void *data, size_t len)
{
	const unsigned char *p = data;
	size_t i = 0;
	for (; i + 8 <= len; i += 8) {
		uint64_t w;
		memcpy(&w, p + i, sizeof(w));
		h = (h ^ w) * 0x100000001b3ULL;
	}
	return fnv1a64_add(h, p + i, len - i);
}

uint64_t fnv1a64(const void *data, size_t len)
{
	return fnv1a64_add(FNV1A64_BASIS, data, len);
}
