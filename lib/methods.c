/* methods.c: the seed catalog of optimization methods (the nine canonical moves of the
 * optimize-kernels system and six moves of a configuration), the reader of OUTDIR/methods.json,
 * and matching names onto it. */
#include "common.h"

#include <errno.h>
#include <string.h>

#include "fileio.h"
#include "jsonl.h"
#include "log.h"
#include "methods.h"
#include "xalloc.h"

const struct method_seed method_seeds[] = {
	{"enable_async_pipeline", "overlap global-memory loads with compute: cp.async or TMA into a multi-stage shared-memory pipeline",
	 {"async copy", "cp.async pipeline", "software pipelining", "multi-stage pipeline", "double buffering", NULL}},
	{"vectorize_global_loads", "wide global loads and stores (ld/st .v2/.v4, float4, int4) where addresses are aligned",
	 {"vectorized loads", "vector loads", "float4 loads", "memory vectorization", "wide loads", NULL}},
	{"switch_to_mma_or_wgmma", "move dot products from FMA to tensor cores: mma.sync, wmma or wgmma",
	 {"tensor cores", "use wmma", "mma instructions", "wgmma", "tensor core mma", NULL}},
	{"pad_tail_and_mask", "pad the tail of the problem and mask it so the main loop stays contiguous and vectorized",
	 {"tail masking", "padding", "boundary masking", "predication", NULL}},
	{"change_block_sizes", "retune tile and block sizes or launch parameters for occupancy and reuse",
	 {"tile size tuning", "block size tuning", "retile", "launch configuration", "occupancy tuning", NULL}},
	{"cache_policy_cg", "load through L2 only (.cg, __ldcg) to keep streaming data out of L1",
	 {"ld.global.cg", "cache hints", "bypass l1", "streaming loads", NULL}},
	{"avoid_atomics_reduce", "replace atomics with a tree, warp-shuffle or two-pass reduction",
	 {"warp shuffle reduction", "remove atomics", "tree reduction", "block reduction", NULL}},
	{"grouped_gemm_colmajor", "grouped (swizzled) block scheduling so neighbouring blocks reuse tiles in L2",
	 {"block swizzling", "grouped ordering", "l2 tile reuse", "threadblock swizzle", "group_m", NULL}},
	{"softmax_math_fusion", "fuse elementwise math and use fast approximations (exp2, rsqrt) to unload the SFU",
	 {"fast math", "math fusion", "online softmax", "exp2 trick", "kernel fusion", NULL}},
	/* The moves of a configuration, so that a search without an LLM still says what it changed
	 * (kg-propose's rules and model name them from the parameters, tools/propose/moves.c). */
	{"change_work_per_thread", "retune how many elements or tiles each thread computes (thread coarsening)",
	 {"work per thread", "items per thread", "elements per thread", "thread coarsening", "thread tiling", NULL}},
	{"change_pipeline_depth", "retune how many stages a software or cp.async pipeline keeps in flight",
	 {"pipeline depth", "num stages", "pipeline stages", "prefetch distance", NULL}},
	{"change_vector_width", "retune the width of the vector loads and stores the kernel is built for",
	 {"vector width", "vector size", "load width", NULL}},
	{"change_unrolling", "retune the unroll factors of inner loops",
	 {"loop unrolling", "unroll factor", "unroll", NULL}},
	{"switch_algorithm", "switch between implementations the kernel offers (shared memory or not, padding, "
			     "read-only or constant caches, shuffles or shared-memory reductions)",
	 {"algorithm switch", "variant switch", "implementation switch", NULL}},
	{"retune_configuration", "change several tuning parameters of different kinds at once",
	 {"configuration jump", "retune", "multi-parameter change", NULL}},
};
const size_t method_seed_count = ARRAY_SIZE(method_seeds);

static cJSON *seed_catalog(void)
{
	cJSON *doc = json_object(), *list = cJSON_CreateArray();
	for (size_t i = 0; i < method_seed_count; i++) {
		cJSON *m = json_object(), *aliases = cJSON_CreateArray();
		json_add_string(m, "name", method_seeds[i].name);
		json_add_string(m, "description", method_seeds[i].description);
		for (size_t k = 0; method_seeds[i].aliases[k]; k++)
			json_append(aliases, cJSON_CreateString(method_seeds[i].aliases[k]));
		json_add(m, "aliases", aliases);
		json_append(list, m);
	}
	json_add(doc, "methods", list);
	return doc;
}

cJSON *methods_load(const char *path)
{
	size_t len;
	char *text = file_read_all(path, &len);
	if (!text) {
		if (errno == ENOENT)
			return seed_catalog();
		log_error("cannot read the method catalog '%s':", path);
		return NULL;
	}
	cJSON *doc = json_parse_document(path, text, len);
	free(text);
	if (!doc)
		return NULL;
	const cJSON *list = cJSON_GetObjectItemCaseSensitive(doc, "methods"), *m;
	int i = 0;
	if (!cJSON_IsArray(list)) {
		log_error("%s: methods: must be an array of methods", path);
		cJSON_Delete(doc);
		return NULL;
	}
	cJSON_ArrayForEach(m, list) {
		if (!json_string(m, "name")) {
			log_error("%s: methods[%d].name: must be a string", path, i);
			cJSON_Delete(doc);
			return NULL;
		}
		i++;
	}
	return doc;
}

char *method_normalize(const char *s)
{
	char *out = xmalloc(strlen(s) + 1), *o = out;
	for (; *s; s++) {
		unsigned char ch = (unsigned char)*s;
		if ((ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9'))
			*o++ = (char)ch;
		else if (ch >= 'A' && ch <= 'Z')
			*o++ = (char)(ch - 'A' + 'a');
		else if (o > out && o[-1] != '_')
			*o++ = '_';
	}
	while (o > out && o[-1] == '_')
		o--;
	*o = '\0';
	return out;
}

static size_t edit_distance(const char *a, const char *b)
{
	size_t n = strlen(a), m = strlen(b), *row = xcalloc(m + 1, sizeof(*row));
	for (size_t j = 0; j <= m; j++)
		row[j] = j;
	for (size_t i = 1; i <= n; i++) {
		size_t diag = row[0];
		row[0] = i;
		for (size_t j = 1; j <= m; j++) {
			size_t up = row[j], best = diag + (a[i - 1] != b[j - 1]);
			best = best < up + 1 ? best : up + 1;
			best = best < row[j - 1] + 1 ? best : row[j - 1] + 1;
			diag = up;
			row[j] = best;
		}
	}
	size_t d = row[m];
	free(row);
	return d;
}

/* |words in both| / |words in either| of two normalized names. */
static double word_overlap(const char *a, const char *b)
{
	char *x = xasprintf("_%s_", a), *y = xasprintf("_%s_", b);
	size_t both = 0, na = 0, nb = 0;
	for (const char *w = x + 1; *w; w = strchr(w, '_') + 1) {
		size_t len = strcspn(w, "_");
		if (!len)
			break;
		char *word = xasprintf("_%.*s_", (int)len, w);
		na++;
		both += strstr(y, word) != NULL;
		free(word);
	}
	for (const char *w = y + 1; *w && strcspn(w, "_"); w = strchr(w, '_') + 1)
		nb++;
	free(x);
	free(y);
	return na + nb - both ? (double)both / (double)(na + nb - both) : 0;
}

double method_similarity(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b), longest = la > lb ? la : lb;
	double edit = longest ? 1 - (double)edit_distance(a, b) / (double)longest : 1;
	double words = word_overlap(a, b);
	return edit > words ? edit : words;
}

const cJSON *methods_match(const cJSON *catalog, const char *label, double threshold, const char **how, double *score)
{
	char *want = method_normalize(label);
	const cJSON *m, *alias, *best = NULL;
	double best_score = -1;
	*how = NULL;
	cJSON_ArrayForEach(m, cJSON_GetObjectItemCaseSensitive(catalog, "methods")) {
		char *name = method_normalize(json_string(m, "name"));
		if (strcmp(name, want) == 0)
			*how = "exact";
		double s = method_similarity(name, want);
		free(name);
		cJSON_ArrayForEach(alias, cJSON_GetObjectItemCaseSensitive(m, "aliases")) {
			if (!cJSON_IsString(alias))
				continue;
			char *a = method_normalize(alias->valuestring);
			if (!*how && strcmp(a, want) == 0)
				*how = "alias";
			s = s > method_similarity(a, want) ? s : method_similarity(a, want);
			free(a);
		}
		if (*how) {
			best = m;
			best_score = 1;
			break;
		}
		if (s > best_score) {
			best_score = s;
			best = m;
		}
	}
	free(want);
	*score = best_score > 0 ? best_score : 0;
	if (!*how && best && best_score >= threshold)
		*how = "fuzzy";
	return *how ? best : NULL;
}
