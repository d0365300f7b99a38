/* sha256.h: SHA-256 digests as lowercase hex, computed by OpenSSL's libcrypto.
 * Used for state hashes (the graph's transposition key) and cache keys. */
#ifndef KG_SHA256_H
#define KG_SHA256_H

#include "common.h"

#include <stddef.h>

#define SHA256_HEX_SIZE 65 /* 64 hex digits and a NUL */

/* An incremental digest: sha256_init, any number of sha256_update, then sha256_final_hex,
 * which also frees what init allocated. Failures inside libcrypto can only mean memory has
 * run out, and end the program as xmalloc does. */
struct sha256 {
	void *ctx; /* OpenSSL's EVP_MD_CTX, kept opaque so callers need no OpenSSL headers */
};

void sha256_init(struct sha256 *h);
void sha256_update(struct sha256 *h, const void *data, size_t len);
void sha256_final_hex(struct sha256 *h, char hex[SHA256_HEX_SIZE]);

/* One-shot digest of data. */
void sha256_hex(const void *data, size_t len, char hex[SHA256_HEX_SIZE]);

#endif
