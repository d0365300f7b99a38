/* methods.c: the seed catalog of optimization methods (the nine canonical moves of the
 * optimize-kernels system and six moves of a configuration), the reader of OUTDIR/methods.json,
 * and matching names onto it. */
#include "common.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
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
	/* Last, so that the fifteen above keep their places in lib/bottleneck.c's priors, which have
	 * no opinion on it: the move a tiled kernel starts from, named by the design's example. */
	{"shared_memory_tiling", "stage tiles of the inputs in shared memory so that a block reuses each global load many times",
	 {"smem tiling", "shared memory blocking", "tile in shared memory", "shared memory caching", NULL}},
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

/* ---------------------------------------------------------------- terms
 *
 * What the matcher compares is not a name's letters but its terms: its words lowercased,
 * spelled the American way, stemmed, with the domain's synonyms written one way and the words
 * that say nothing of a method dropped. "Unroll loops" and "loop unrolling" both become
 * {loop, unroll}; "smem tiling" and "tile in shared memory" both {memory, shar, til}. */

struct terms {
	char **term; /* sorted, no two alike; each owned */
	size_t n;
};

static void terms_release(struct terms *t)
{
	for (size_t i = 0; i < t->n; i++)
		free(t->term[i]);
	free(t->term);
	t->term = NULL;
	t->n = 0;
}

static void terms_push(struct terms *t, char *word)
{
	t->term = xreallocarray(t->term, t->n + 1, sizeof(*t->term));
	t->term[t->n++] = word;
}

static int ends_with(const char *w, size_t len, const char *suffix)
{
	size_t n = strlen(suffix);
	return len >= n && memcmp(w + len - n, suffix, n) == 0;
}

/* British spellings the American way, so that both meet: -ise, -ised, -ising, -isation
 * become -ize... after at least four letters ("vectorise", not "wise"), and -our, -ours,
 * -oured, -ouring become -or... after at least three ("behaviour", not "four"). A word
 * wrongly changed ("precise") is changed alike everywhere, so nothing is lost. */
static void american_spelling(char *w)
{
	static const char *const ise[] = {"ise", "ised", "ises", "ising", "isation", "isations", "iser", "isers"};
	static const char *const our[] = {"our", "ours", "oured", "ouring"};
	size_t len = strlen(w);
	for (size_t i = 0; i < ARRAY_SIZE(ise); i++)
		if (ends_with(w, len, ise[i]) && len - strlen(ise[i]) >= 4) {
			w[len - strlen(ise[i]) + 1] = 'z';
			return;
		}
	for (size_t i = 0; i < ARRAY_SIZE(our); i++)
		if (ends_with(w, len, our[i]) && len - strlen(our[i]) >= 3) {
			size_t u = len - strlen(our[i]) + 1;
			memmove(w + u, w + u + 1, len - u);
			return;
		}
}

/* A small suffix stemmer (Porter's idea, far fewer rules): the forms of a word the method
 * names use meet on one stem, "unroll", "unrolls", "unrolled", "unrolling" on "unroll";
 * "tile", "tiles", "tiled", "tiling" on "til". In order:
 *   1. plurals: -ies -> -y, -sses -> -ss, else a final -s goes (not after s, u or i: "bypass",
 *      "bus", "analysis");
 *   2. the first of -ation, -ction -> -c, -ing, -ed (each leaving three letters), -sion -> -s (two),
 *      -ly, -ate (each leaving four) goes; after -ing or -ed, a stem ending in -at loses it
 *      ("predicated" as "predicate") and a doubled last consonant but l, s or z is halved
 *      ("padding" -> "pad");
 *   3. a final -e goes from a word of three letters or more. */
static void stem(char *w)
{
	static const struct {
		const char *suffix, *by;
		size_t keep; /* the letters that must remain before the suffix */
	} rules[] = {
		{"ation", "", 3}, {"ction", "c", 3}, {"sion", "s", 2}, {"ing", "", 3}, {"ed", "", 3}, {"ly", "", 4}, {"ate", "", 4},
	};
	size_t len = strlen(w);
	if (len > 4 && ends_with(w, len, "ies"))
		memcpy(w + (len -= 2) - 1, "y", 2);
	else if (ends_with(w, len, "sses"))
		w[len -= 2] = '\0';
	else if (len >= 3 && w[len - 1] == 's' && !strchr("siu", w[len - 2]))
		w[--len] = '\0';
	for (size_t i = 0; i < ARRAY_SIZE(rules); i++) {
		size_t n = strlen(rules[i].suffix);
		if (!ends_with(w, len, rules[i].suffix) || len - n < rules[i].keep)
			continue;
		memcpy(w + len - n, rules[i].by, strlen(rules[i].by) + 1);
		len = strlen(w);
		if (strcmp(rules[i].suffix, "ing") == 0 || strcmp(rules[i].suffix, "ed") == 0) {
			if (ends_with(w, len, "at") && len - 2 >= 4)
				w[len -= 2] = '\0';
			else if (len >= 4 && w[len - 1] == w[len - 2] && !strchr("aeiouylsz", w[len - 1]))
				w[--len] = '\0';
		}
		break;
	}
	if (len >= 3 && w[len - 1] == 'e')
		w[--len] = '\0';
}

/* The words of text, lowercase runs of letters and digits, each spelled and stemmed. */
static void stemmed_words(const char *text, struct terms *out)
{
	for (const char *s = text; *s;) {
		size_t n = 0;
		while (s[n] && isalnum((unsigned char)s[n]))
			n++;
		if (!n) {
			s++;
			continue;
		}
		char *w = xstrndup(s, n);
		for (char *c = w; *c; c++)
			*c = (char)tolower((unsigned char)*c);
		american_spelling(w);
		stem(w);
		terms_push(out, w);
		s += n;
	}
}

/* The domain's synonyms: the first of these phrases found at a word becomes the second, so
 * that an abbreviation, an instruction or a product name meets the words the catalog uses.
 * Both are stemmed as names are ("vectorize" stands for "vectorized" and "vectorization").
 * Longer phrases come before the shorter ones they begin with. */
static const char *const synonyms[][2] = {
	{"smem", "shared memory"},
	{"shmem", "shared memory"},
	{"shared mem", "shared memory"},
	{"gmem", "global memory"},
	{"device memory", "global memory"},
	{"cp async", "async copy"},
	{"memcpy async", "async copy"},
	{"ldgsts", "async copy"},
	{"tensor memory accelerator", "async copy"},
	{"tma", "async copy"},
	{"asynchronous", "async"},
	{"vectorize", "vector"},
	{"128 bit", "vector"},
	{"float2", "vector"},
	{"float4", "vector"},
	{"int2", "vector"},
	{"int4", "vector"},
	{"half2", "vector"},
	{"v2", "vector"},
	{"v4", "vector"},
	{"v8", "vector"},
	{"wide", "vector"},
	{"wider", "vector"},
	{"tensor core", "mma"},
	{"tensorcore", "mma"},
	{"mma sync", "mma"},
	{"wgmma", "mma"},
	{"wmma", "mma"},
	{"hmma", "mma"},
	{"ld global cg", "cg"},
	{"ldcg", "cg"},
	{"cache global", "cg"},
	{"atomicadd", "atomic"},
	{"shfl down sync", "shuffle"},
	{"shfl xor sync", "shuffle"},
	{"shfl sync", "shuffle"},
	{"shfl", "shuffle"},
	{"threadblock", "block"},
	{"thread block", "block"},
	{"cta", "block"},
	{"pragma unroll", "unroll"},
	{"thread per block", "block size"},
	{"blockdim", "block size"},
	{"read", "load"},
	{"write", "store"},
	{"remainder", "tail"},
	{"rsqrtf", "rsqrt"},
	{"expf", "exp2"},
	{"exp2f", "exp2"},
	{"intrinsic", "fast math"},
	{"approximation", "fast math"},
	{"deep", "depth"},
	{"deeper", "depth"},
};

/* Words that say nothing of which method a name means: articles, prepositions, and the
 * verbs and comparatives any method is written with ("use", "apply", "increase"). */
static const char *const stop_words[] = {
	"a", "an", "the", "to", "for", "of", "with", "in", "into", "on", "onto", "by", "via", "from", "and", "or",
	"at", "as", "per", "then", "so", "that", "it", "its", "is", "be", "all", "each", "every", "one", "some",
	"more", "less", "better", "instead", "use", "using", "apply", "add", "enable", "introduce",
	"employ", "leverage", "try", "make", "do", "perform", "improve", "kernel", "change", "retune", "tune",
	"tuning", "adjust", "increase", "decrease", "raise", "lower", "larger", "smaller", "bigger", "higher",
	"number", "num", "new", "different", "set", "replace", "op", "input", "output", "data",
};

/* Whether words[at...] begin with the phrase's words. */
static int begins_with(const struct terms *words, size_t at, const struct terms *phrase)
{
	if (at + phrase->n > words->n)
		return 0;
	for (size_t i = 0; i < phrase->n; i++)
		if (strcmp(words->term[at + i], phrase->term[i]) != 0)
			return 0;
	return 1;
}

static int compare_strings(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static int has_term(const struct terms *t, const char *term)
{
	return t->n && bsearch(&term, t->term, t->n, sizeof(*t->term), compare_strings) != NULL;
}

/* Sorts t and drops the copies of a term, so that has_term can bsearch it. */
static void terms_sort_unique(struct terms *t)
{
	size_t kept = 0;
	if (t->n)
		qsort(t->term, t->n, sizeof(*t->term), compare_strings);
	for (size_t i = 0; i < t->n; i++)
		if (kept && strcmp(t->term[kept - 1], t->term[i]) == 0)
			free(t->term[i]);
		else
			t->term[kept++] = t->term[i];
	t->n = kept;
}

/* stop_words and both sides of each synonyms entry, stemmed as names are: built on first use
 * and kept for the life of the process, since every name's terms need them and stemming the
 * tables again for each was nearly all of the matcher's time. The tools are single-threaded. */
static struct {
	int built;
	struct terms stops; /* sorted, no two alike */
	struct terms from[ARRAY_SIZE(synonyms)], to[ARRAY_SIZE(synonyms)]; /* in the words' order */
} stemmed_tables;

static void build_stemmed_tables(void)
{
	if (stemmed_tables.built)
		return;
	for (size_t i = 0; i < ARRAY_SIZE(stop_words); i++)
		stemmed_words(stop_words[i], &stemmed_tables.stops);
	terms_sort_unique(&stemmed_tables.stops);
	for (size_t k = 0; k < ARRAY_SIZE(synonyms); k++) {
		stemmed_words(synonyms[k][0], &stemmed_tables.from[k]);
		stemmed_words(synonyms[k][1], &stemmed_tables.to[k]);
	}
	stemmed_tables.built = 1;
}

/* name's terms into out (empty first). */
static void terms_of(const char *name, struct terms *out)
{
	struct terms words = {0};
	build_stemmed_tables();
	stemmed_words(name, &words);
	*out = (struct terms){0};
	for (size_t at = 0; at < words.n;) {
		/* The first synonym whose phrase begins here stands for it, else the word itself. */
		struct terms self = {.term = &words.term[at], .n = 1};
		const struct terms *to = &self;
		size_t k = 0;
		while (k < ARRAY_SIZE(synonyms) && !begins_with(&words, at, &stemmed_tables.from[k]))
			k++;
		if (k < ARRAY_SIZE(synonyms)) {
			to = &stemmed_tables.to[k];
			at += stemmed_tables.from[k].n;
		} else {
			at++;
		}
		for (size_t i = 0; i < to->n; i++) {
			const char *w = to->term[i];
			if (!w[1] || isdigit((unsigned char)w[0]) || has_term(&stemmed_tables.stops, w))
				continue;
			terms_push(out, xstrdup(w));
		}
	}
	terms_sort_unique(out);
	terms_release(&words);
}

char *method_terms(const char *name)
{
	struct terms t;
	struct strbuf sb;
	terms_of(name, &t);
	strbuf_init(&sb);
	for (size_t i = 0; i < t.n; i++)
		strbuf_addf(&sb, "%s%s", i ? " " : "", t.term[i]);
	terms_release(&t);
	return strbuf_detach(&sb);
}

/* ---------------------------------------------------------------- matching */

/* A catalog method as the matcher sees it. */
struct indexed_method {
	const cJSON *method;
	struct terms vocabulary; /* every term of its name and aliases */
	struct terms described;	 /* the terms of its description: they count DESCRIBED_SHARE */
	struct terms *phrase;	 /* the terms of its name, then of each alias */
	double *phrase_weight;	 /* the weight of each phrase's terms together */
	size_t nphrase;
};

struct method_index {
	struct indexed_method *m;
	size_t n;
};

/* How much a term tells which method is meant: log((N + 1) / (methods using it + 1/2)), so a
 * term of one method weighs much, one of many little, and a term no method knows the most. */
static double term_weight(const struct method_index *ix, const char *term)
{
	double users = 0;
	for (size_t i = 0; i < ix->n; i++)
		users += has_term(&ix->m[i].vocabulary, term) || has_term(&ix->m[i].described, term);
	return log(((double)ix->n + 1) / (users + 0.5));
}

/* Adds phrase's terms to vocabulary, leaving it unsorted: the caller sorts it once after the
 * last phrase (terms_sort_unique). */
static void add_vocabulary(struct terms *vocabulary, const struct terms *phrase)
{
	for (size_t i = 0; i < phrase->n; i++)
		terms_push(vocabulary, xstrdup(phrase->term[i]));
}

static void index_catalog(const cJSON *catalog, struct method_index *ix)
{
	const cJSON *m, *alias;
	*ix = (struct method_index){0};
	cJSON_ArrayForEach(m, cJSON_GetObjectItemCaseSensitive(catalog, "methods")) {
		ix->m = xreallocarray(ix->m, ix->n + 1, sizeof(*ix->m));
		struct indexed_method *im = &ix->m[ix->n++];
		const cJSON *aliases = cJSON_GetObjectItemCaseSensitive(m, "aliases");
		size_t most = (size_t)cJSON_GetArraySize(aliases) + 1;
		*im = (struct indexed_method){.method = m};
		im->phrase = xcalloc(most, sizeof(*im->phrase));
		im->phrase_weight = xcalloc(most, sizeof(*im->phrase_weight));
		terms_of(json_string(m, "name"), &im->phrase[im->nphrase++]);
		cJSON_ArrayForEach(alias, aliases)
			if (cJSON_IsString(alias))
				terms_of(alias->valuestring, &im->phrase[im->nphrase++]);
		for (size_t p = 0; p < im->nphrase; p++)
			add_vocabulary(&im->vocabulary, &im->phrase[p]);
		terms_sort_unique(&im->vocabulary);
		if (json_string(m, "description"))
			terms_of(json_string(m, "description"), &im->described);
	}
	for (size_t i = 0; i < ix->n; i++)
		for (size_t p = 0; p < ix->m[i].nphrase; p++)
			for (size_t k = 0; k < ix->m[i].phrase[p].n; k++)
				ix->m[i].phrase_weight[p] += term_weight(ix, ix->m[i].phrase[p].term[k]);
}

static void index_release(struct method_index *ix)
{
	for (size_t i = 0; i < ix->n; i++) {
		for (size_t p = 0; p < ix->m[i].nphrase; p++)
			terms_release(&ix->m[i].phrase[p]);
		free(ix->m[i].phrase);
		free(ix->m[i].phrase_weight);
		terms_release(&ix->m[i].vocabulary);
		terms_release(&ix->m[i].described);
	}
	free(ix->m);
}

/* A label's terms with their weights, as they are compared. */
struct weighted_label {
	const struct terms *t;
	double *weight;
	double total;
};

static void weigh_label(const struct method_index *ix, const struct terms *t, struct weighted_label *out)
{
	*out = (struct weighted_label){.t = t, .weight = xcalloc(t->n + 1, sizeof(double))};
	for (size_t i = 0; i < t->n; i++)
		out->total += out->weight[i] = term_weight(ix, t->term[i]);
}

static double weight_within(const struct weighted_label *l, const struct terms *within)
{
	double sum = 0;
	for (size_t i = 0; i < l->t->n; i++)
		if (has_term(within, l->t->term[i]))
			sum += l->weight[i];
	return sum;
}

/* How well method im accounts for a label: the weighted share of the label's terms it knows,
 * a term of its name or aliases in full, one of its description by described (its coverage, 0
 * to 1); and as *closeness, which breaks ties, the best weighted Dice overlap of the label
 * with one of its names. */
static double method_score(const struct indexed_method *im, const struct weighted_label *l, double described,
			   double *closeness)
{
	double known = 0;
	*closeness = 0;
	if (l->total <= 0)
		return 0;
	for (size_t p = 0; p < im->nphrase; p++)
		*closeness = fmax(*closeness, 2 * weight_within(l, &im->phrase[p]) / (l->total + im->phrase_weight[p]));
	for (size_t i = 0; i < l->t->n; i++)
		known += has_term(&im->vocabulary, l->t->term[i]) ? l->weight[i]
			 : has_term(&im->described, l->t->term[i]) ? l->weight[i] * described
								    : 0;
	return known / l->total;
}

/* What a label's term found only in a method's description counts for, against one of its
 * names: descriptions are prose, and tell less. */
#define DESCRIBED_SHARE 0.5

/* The index of the method that best accounts for the label, or -1 when there is none; *score
 * gets its coverage. */
static long best_method(const struct method_index *ix, const struct terms *label, double *score)
{
	struct weighted_label l;
	long best = -1;
	double best_closeness = 0, closeness, s;
	weigh_label(ix, label, &l);
	*score = 0;
	for (size_t i = 0; i < ix->n; i++) {
		s = method_score(&ix->m[i], &l, DESCRIBED_SHARE, &closeness);
		if (best < 0 || s > *score + 1e-9 || (s > *score - 1e-9 && closeness > best_closeness + 1e-9)) {
			best = (long)i;
			*score = s;
			best_closeness = closeness;
		}
	}
	free(l.weight);
	return best;
}

const cJSON *methods_match(const cJSON *catalog, const char *label, double threshold, const char **how, double *score)
{
	char *want = method_normalize(label);
	const cJSON *m, *alias, *found = NULL;
	*how = NULL;
	*score = 1;
	cJSON_ArrayForEach(m, cJSON_GetObjectItemCaseSensitive(catalog, "methods")) {
		char *name = method_normalize(json_string(m, "name"));
		if (strcmp(name, want) == 0)
			*how = "exact";
		free(name);
		cJSON_ArrayForEach(alias, cJSON_GetObjectItemCaseSensitive(m, "aliases")) {
			char *a = cJSON_IsString(alias) ? method_normalize(alias->valuestring) : NULL;
			if (!*how && a && strcmp(a, want) == 0)
				*how = "alias";
			free(a);
		}
		if (*how) {
			found = m;
			break;
		}
	}
	free(want);
	if (found)
		return found;
	struct method_index ix;
	struct terms t;
	index_catalog(catalog, &ix);
	terms_of(label, &t);
	long best = best_method(&ix, &t, score);
	if (best >= 0 && *score >= threshold) {
		*how = "fuzzy";
		found = ix.m[best].method;
	}
	terms_release(&t);
	index_release(&ix);
	return found;
}

/* How well method b accounts for the best of a's names, as methods_match scores a label. */
static double names_covered(const struct method_index *ix, const struct indexed_method *a, const struct indexed_method *b)
{
	double best = 0, closeness;
	for (size_t p = 0; p < a->nphrase; p++) {
		struct weighted_label l;
		weigh_label(ix, &a->phrase[p], &l);
		best = fmax(best, method_score(b, &l, 0, &closeness));
		free(l.weight);
	}
	return best;
}

size_t methods_alike(const cJSON *catalog, double threshold, struct method_pair **pairs)
{
	struct method_index ix;
	size_t n = 0;
	index_catalog(catalog, &ix);
	*pairs = NULL;
	for (size_t a = 0; a < ix.n; a++)
		for (size_t b = a + 1; b < ix.n; b++) {
			double score = fmin(names_covered(&ix, &ix.m[a], &ix.m[b]), names_covered(&ix, &ix.m[b], &ix.m[a]));
			if (score < threshold)
				continue;
			*pairs = xreallocarray(*pairs, n + 1, sizeof(**pairs));
			(*pairs)[n++] = (struct method_pair){ix.m[a].method, ix.m[b].method, score};
		}
	index_release(&ix);
	return n;
}
