/* methods.h: the fifteen canonical optimization methods every method catalog starts from, the
 * catalog file OUTDIR/methods.json that kg-relabel grows and kg-propose shows the LLM, and how
 * a freely written method name is matched onto it. */
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

/* A method's name as the catalog compares it: lowercase words joined by '_' ("Shared Memory
 * Tiling 2D" -> "shared_memory_tiling_2d"). The caller frees it. */
char *method_normalize(const char *name);

/* How alike two normalized names are, 0 to 1: the larger of 1 - edit distance / length and
 * the share of words they have in common (Jaccard). */
double method_similarity(const char *a, const char *b);

/* The catalog method label names: its normalized name equals a method's name (*how "exact")
 * or alias ("alias"), or failing both the most similar name or alias scores at least
 * threshold ("fuzzy"). Returns it, or NULL; *score gets the best similarity seen (1 for
 * exact and alias). */
const cJSON *methods_match(const cJSON *catalog, const char *label, double threshold, const char **how, double *score);

#endif
