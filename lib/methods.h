/* methods.h: the nine canonical optimization methods every method catalog starts from, and
 * the catalog file OUTDIR/methods.json that kg-relabel grows and kg-propose shows the LLM. */
#ifndef KG_METHODS_H
#define KG_METHODS_H

#include "common.h"

#include <stddef.h>

#include <cjson/cJSON.h>

struct method_seed {
	const char *name;	 /* canonical: lowercase snake_case */
	const char *description; /* what the change does, for people and prompts */
	const char *aliases[6];	 /* other names the same change goes by; NULL-terminated */
};

extern const struct method_seed method_seeds[];
extern const size_t method_seed_count;

/* The catalog at path: {"methods": [{"name", "description", "aliases": [...]}, ...]}. When the
 * file does not exist, the seeds in that form. Returns NULL after reporting a file that exists
 * but is not a catalog; the caller frees the result with cJSON_Delete. */
cJSON *methods_load(const char *path);

#endif
