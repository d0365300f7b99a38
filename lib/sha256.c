/* sha256.c: a thin wrapper over OpenSSL's EVP digest interface.
 * Hashing is never hand-written here: libcrypto's SHA-256 is tested far beyond what we could. */
#include "common.h"

#include <openssl/evp.h>

#include "log.h"
#include "sha256.h"

static NORETURN void crypto_failed(void)
{
	log_die(KG_EXIT_ENV, "libcrypto could not compute a SHA-256 digest (out of memory?)");
}

void sha256_init(struct sha256 *h)
{
	EVP_MD_CTX *ctx = EVP_MD_CTX_new();
	if (!ctx || EVP_DigestInit_ex(ctx, EVP_sha256(), NULL) != 1)
		crypto_failed();
	h->ctx = ctx;
}

void sha256_update(struct sha256 *h, const void *data, size_t len)
{
	if (EVP_DigestUpdate(h->ctx, data, len) != 1)
		crypto_failed();
}

void sha256_final_hex(struct sha256 *h, char hex[SHA256_HEX_SIZE])
{
	unsigned char digest[EVP_MAX_MD_SIZE];
	unsigned int n = 0;
	if (EVP_DigestFinal_ex(h->ctx, digest, &n) != 1 || n != 32)
		crypto_failed();
	EVP_MD_CTX_free(h->ctx);
	h->ctx = NULL;
	static const char digits[] = "0123456789abcdef";
	for (unsigned int i = 0; i < n; i++) {
		hex[2 * i] = digits[digest[i] >> 4];
		hex[2 * i + 1] = digits[digest[i] & 15];
	}
	hex[64] = '\0';
}

void sha256_hex(const void *data, size_t len, char hex[SHA256_HEX_SIZE])
{
	struct sha256 h;
	sha256_init(&h);
	sha256_update(&h, data, len);
	sha256_final_hex(&h, hex);
}
