/* methods.h: the sixteen canonical optimization methods every method catalog starts from, the
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

/* A name's terms as the matcher compares them, sorted and joined by spaces: its words
 * lowercased, spelled the American way, stemmed, the domain's synonyms written one way and
 * words that name no method dropped ("Unroll the loops" -> "loop unroll"). The caller frees it. */
char *method_terms(const char *name);

/* The least share of a label's terms a method must know for the label to be matched onto it
 * (kg-relabel --threshold, kg-propose --regraph-filter), and the least share each of two
 * methods must know of a name of the other for kg-relabel --merge to propose them: measured
 * on tests/fixtures/relabel/phrasings.tsv (tools/relabel/README.md). */
#define METHODS_MATCH_THRESHOLD 0.4
#define METHODS_MERGE_THRESHOLD 0.7

/* The catalog method label names: its normalized name equals a method's name (*how "exact")
 * or alias ("alias"), or failing both the method that knows the largest weighted share of the
 * label's terms has a share of at least threshold ("fuzzy"). A term weighs more the fewer
 * methods use it, and most when none does, so that a name with words no method knows stays
 * new. Returns it, or NULL; *score gets that share (1 for exact and alias). */
const cJSON *methods_match(const cJSON *catalog, const char *label, double threshold, const char **how, double *score);

/* Two catalog methods that look like one: each knows at least threshold of the terms of one
 * of the other's names (scored as methods_match does, descriptions aside). */
struct method_pair {
	const cJSON *a, *b; /* in the catalog's order */
	double score;	    /* the smaller share of the two ways */
};

/* The pairs of the catalog's methods that look like one, in the catalog's order, into *pairs
 * (the caller frees it); returns how many. */
size_t methods_alike(const cJSON *catalog, double threshold, struct method_pair **pairs);

#endif
