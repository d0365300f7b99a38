/* context.c (kg-propose): loads a run (spec, events, measurements) once, the node an expand
 * record names, and checks each proposal against the space and against what the run has tried. */
#include "common.h"

#include <errno.h>
#include <math.h>
#include <string.h>
#include <unistd.h>

#include "context.h"
#include "events.h"
#include "fileio.h"
#include "fnv1a.h"
#include "jsonl.h"
#include "log.h"

/* A state of the run: its configuration and, once asked for, its source's digest. */
struct digest {
	char *state;
	const cJSON *config; /* inside run->events or run->run.baseline */
	char hex[SHA256_HEX_SIZE];
	int unedited;	     /* kg-build found its source to be the spec's kernel: the baseline's */
};

void proposal_release(struct proposal *p)
{
	free(p->proposer);
	free(p->method);
	free(p->detail);
	free(p->think);
	free(p->patch);
	free(p->source);
	free(p->library);
	cJSON_Delete(p->config);
	cJSON_Delete(p->launch_update);
	cJSON_Delete(p->full_config);
	memset(p, 0, sizeof(*p));
}

/* The complete configuration of indices as compact text, the form the checks compare. */
static char *config_key_text(const struct t1_spec *spec, const size_t *indices)
{
	cJSON *json = t1_config_to_json(spec, indices);
	char *text = json_text(json);
	cJSON_Delete(json);
	return text;
}

int config_indices(const struct t1_spec *spec, const cJSON *config, size_t *indices)
{
	return t1_config_indices(spec, config, indices, NULL);
}

cJSON *config_object(const struct t1_spec *spec, const size_t *indices)
{
	char *text = config_key_text(spec, indices);
	cJSON *config = cJSON_Parse(text);
	free(text);
	if (!config)
		xalloc_die();
	return config;
}

/* ---------------------------------------------------------------- states and keys */

/* The key of entry i of an array of n entries of size `size` whose first member is its key. */
static const char *key_at(const void *entries, size_t size, size_t i)
{
	return *(char *const *)(const void *)((const char *)entries + i * size);
}

/* key's slot in ix over the entries (found, or where it would go). */
static size_t key_slot(const struct key_index *ix, const void *entries, size_t size, const char *key)
{
	size_t s = (size_t)fnv1a64(key, strlen(key)) & (ix->nslots - 1);
	while (ix->slots[s] && strcmp(key_at(entries, size, ix->slots[s] - 1), key) != 0)
		s = (s + 1) & (ix->nslots - 1);
	return s;
}

/* The entry of key among the n entries, or -1. */
static long key_find(const struct key_index *ix, const void *entries, size_t size, const char *key)
{
	if (!ix->nslots)
		return -1;
	size_t s = key_slot(ix, entries, size, key);
	return ix->slots[s] ? (long)ix->slots[s] - 1 : -1;
}

/* Indexes entry n - 1 (just added), growing the index to keep it at most half full. */
static void key_add(struct key_index *ix, const void *entries, size_t size, size_t n)
{
	if (2 * n > ix->nslots) {
		free(ix->slots);
		ix->nslots = ix->nslots ? 2 * ix->nslots : 64;
		ix->slots = xcalloc(ix->nslots, sizeof(*ix->slots));
		for (size_t i = 0; i + 1 < n; i++)
			ix->slots[key_slot(ix, entries, size, key_at(entries, size, i))] = i + 1;
	}
	ix->slots[key_slot(ix, entries, size, key_at(entries, size, n - 1))] = n;
}

static struct digest *find_state(struct run_info *run, const char *state)
{
	long i = key_find(&run->digest_index, run->digests, sizeof(*run->digests), state);
	return i < 0 ? NULL : &run->digests[i];
}

static void add_state(struct run_info *run, const char *state, const cJSON *config, int unedited)
{
	if (!state || find_state(run, state))
		return;
	run->digests = xreallocarray(run->digests, run->ndigests + 1, sizeof(*run->digests));
	run->digests[run->ndigests++] = (struct digest){.state = xstrdup(state), .config = config, .unedited = unedited};
	key_add(&run->digest_index, run->digests, sizeof(*run->digests), run->ndigests);
}

/* The digest of a state's kernel.cu; "" when it cannot be read. A variant kg-build found
 * unedited has the baseline's (the spec's kernel, normalized), read once rather than once per
 * variant: a long run has a thousand. */
static const char *source_digest(struct run_info *run, const char *state)
{
	struct digest *d = find_state(run, state);
	if (!d) {
		add_state(run, state, NULL, 0);
		d = &run->digests[run->ndigests - 1];
	}
	const char *base = run->base_state;
	if (!d->hex[0] && d->unedited && base && strcmp(base, state) != 0) {
		char hex[SHA256_HEX_SIZE];
		memcpy(hex, source_digest(run, base), sizeof(hex));
		d = find_state(run, state); /* the call may have grown the table */
		memcpy(d->hex, hex, sizeof(hex));
	}
	if (!d->hex[0]) {
		char *path = run_variant_path(run->run.dir, state, VARIANT_KERNEL);
		size_t len;
		char *text = file_read_all(path, &len);
		if (text)
			sha256_hex(text, len, d->hex);
		free(text);
		free(path);
	}
	return d->hex;
}

static void text_digest(const char *text, char hex[SHA256_HEX_SIZE])
{
	if (text)
		sha256_hex(text, strlen(text), hex);
	else
		snprintf(hex, SHA256_HEX_SIZE, "-");
}

/* A configuration-only change is known by the source it applies to and the configuration it
 * makes: two paths to the same pair are the same variant. An edit is known by its parent, its
 * text and the configuration. */
static char *change_key(const char *parent, const char *digest, const char *patch, const char *source,
			const char *config)
{
	if (!patch && !source)
		return xasprintf("cfg|%s|%s", digest, config);
	char p[SHA256_HEX_SIZE], s[SHA256_HEX_SIZE];
	text_digest(patch, p);
	text_digest(source, s);
	return xasprintf("edit|%s|%s|%s|%s", parent, p, s, config);
}

static int is_seen(const struct run_info *run, const char *key)
{
	return key_find(&run->seen_index, run->seen, sizeof(*run->seen), key) >= 0;
}

static void remember(struct run_info *run, char *key)
{
	if (is_seen(run, key)) {
		free(key);
		return;
	}
	run->seen = xreallocarray(run->seen, run->nseen + 1, sizeof(*run->seen));
	run->seen[run->nseen++] = key;
	key_add(&run->seen_index, run->seen, sizeof(*run->seen), run->nseen);
}

static const char *nonempty(const char *s)
{
	return s && *s ? s : NULL;
}

/* The complete configuration wanted over parent's, as key text; NULL when it is not valid. */
static char *complete_config(const struct t1_spec *spec, const cJSON *wanted, const cJSON *parent, cJSON **full,
			     struct strbuf *why)
{
	size_t *indices = xcalloc(spec->nparams + 1, sizeof(*indices));
	cJSON *merged = json_object();
	struct strbuf scratch;
	strbuf_init(&scratch);
	char *text = NULL;
	if (t1_resolve_config(spec, cJSON_IsObject(wanted) ? wanted : NULL, cJSON_IsObject(parent) ? parent : NULL,
			      indices, merged, why ? why : &scratch) == 0) {
		text = config_key_text(spec, indices);
		if (full)
			*full = config_object(spec, indices);
	}
	strbuf_release(&scratch);
	cJSON_Delete(merged);
	free(indices);
	return text;
}

static void remember_changes(struct run_info *run, const cJSON *records, const char *only_run);

/* Keys of every change the run has built or registered, so that none is proposed again. */
static void remember_events(struct run_info *run)
{
	const cJSON *e;
	const cJSON *base_build = run->run.baseline;
	add_state(run, json_string(base_build, "state"), cJSON_GetObjectItemCaseSensitive(base_build, "config"), 0);
	cJSON_ArrayForEach(e, run->events) {
		const cJSON *build = cJSON_GetObjectItemCaseSensitive(e, "build");
		add_state(run, json_string(build, "state"), cJSON_GetObjectItemCaseSensitive(build, "config"),
			  cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(build, "edited")));
	}
	if (json_string(base_build, "state")) {
		char *config = complete_config(run->run.spec, cJSON_GetObjectItemCaseSensitive(base_build, "config"), NULL, NULL, NULL);
		if (config)
			remember(run, change_key(NULL, source_digest(run, json_string(base_build, "state")), NULL, NULL, config));
		free(config);
	}
	remember_changes(run, run->events, NULL);
}

/* Keys of the changes the records built or registered; with only_run, of those records alone
 * whose "run" is it (records in flight, from --pending, may name several runs). */
static void remember_changes(struct run_info *run, const cJSON *records, const char *only_run)
{
	const cJSON *e;
	cJSON_ArrayForEach(e, records) {
		const cJSON *candidate = cJSON_GetObjectItemCaseSensitive(e, "candidate");
		const cJSON *build = cJSON_GetObjectItemCaseSensitive(e, "build");
		const char *parent = json_string(e, "node"), *state = json_string(build, "state");
		const char *in = json_string(e, "run");
		if (only_run && in && strcmp(in, only_run) != 0)
			continue;
		const char *patch = nonempty(json_string(candidate, "patch")), *source = nonempty(json_string(candidate, "source"));
		const cJSON *built = cJSON_GetObjectItemCaseSensitive(build, "config");
		/* what was built, else what the candidate asked of its parent: one resolution each */
		char *config = cJSON_IsObject(built) ? complete_config(run->run.spec, built, NULL, NULL, NULL) : NULL;
		if (state && config)
			remember(run, change_key(NULL, source_digest(run, state), NULL, NULL, config));
		if (!cJSON_IsObject(candidate) || !parent) {
			free(config);
			continue;
		}
		const struct digest *pd = find_state(run, parent);
		if (!cJSON_IsObject(built))
			config = complete_config(run->run.spec, cJSON_GetObjectItemCaseSensitive(candidate, "config"),
						 pd ? pd->config : NULL, NULL, NULL);
		if (!config)
			continue; /* an invalid configuration: the same one proposed again is refused anyway */
		if (patch || source)
			remember(run, change_key(parent, NULL, patch, source, config));
		else
			remember(run, change_key(NULL, source_digest(run, parent), NULL, NULL, config));
		free(config);
	}
}

/* ---------------------------------------------------------------- runs */

/* The baseline's state: baseline.json's (kg-bench writes it on a GPU), else its record's (a
 * replayed run, or one kg-init did not make, has no baseline.json); NULL when neither has it. */
static const char *baseline_state(struct run_info *run)
{
	const char *base = json_string(run_baseline(&run->run), "state");
	const cJSON *e;
	cJSON_ArrayForEach(e, run->events) {
		if (base)
			break;
		const cJSON *build = cJSON_GetObjectItemCaseSensitive(e, "build");
		if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(build, "baseline")))
			base = json_string(build, "state");
	}
	return base;
}

/* What kg-propose reads of a logged record (the readers above and context_observations,
 * find_applied, rules.c's tried_anywhere, experts.c's history): the record's other members,
 * most of its bytes (the compiler options, the statistics, the path), are dropped as the
 * log is read, so that a long run's log is not held whole. */
static const char *const kept_top[] = {"node", "run", NULL};
static const struct kept_member {
	const char *name;
	const char *const fields[7];
} kept_members[] = {
	{"candidate", {"patch", "source", "config", "library", "method", "detail", NULL}},
	{"build", {"status", "state", "config", "edited", "baseline", "error", NULL}},
	{"bench", {"status", "median_ms", "speedup", "error", NULL}},
	{"update", {"child", NULL}},
};

static void keep_slim(cJSON *record, void *ctx)
{
	cJSON *events = ctx, *slim = json_object(), *item;
	for (const char *const *k = kept_top; *k; k++)
		if ((item = cJSON_DetachItemFromObjectCaseSensitive(record, *k)))
			json_add(slim, *k, item);
	for (size_t m = 0; m < sizeof(kept_members) / sizeof(*kept_members); m++) {
		cJSON *from = cJSON_GetObjectItemCaseSensitive(record, kept_members[m].name), *to = NULL;
		if (!cJSON_IsObject(from))
			continue;
		for (const char *const *f = kept_members[m].fields; *f; f++) {
			if (!(item = cJSON_DetachItemFromObjectCaseSensitive(from, *f)))
				continue;
			if (!to)
				json_add(slim, kept_members[m].name, to = json_object());
			json_add(to, *f, item);
		}
		if (!to)
			json_add(slim, kept_members[m].name, json_object());
	}
	cJSON_Delete(record);
	json_append(events, slim);
}

static void run_load(struct run_info *run, const char *dir, const cJSON *pending)
{
	int unreadable;
	if (run_init(&run->run, dir, &unreadable) != 0) {
		run->error = xasprintf("run: %s has no usable spec.json (%s; kg-init makes run directories)", dir,
				       unreadable ? "cannot read it" : "see above");
		return;
	}
	run->events = cJSON_CreateArray();
	if (!run->events)
		xalloc_die();
	events_read(dir, keep_slim, run->events);
	char *path = run_path(dir, RUN_BEST_JSON);
	run->best = json_read_optional(path);
	free(path);
	run->base_state = baseline_state(run);
	remember_events(run);
	remember_changes(run, pending, dir);
	run->pending = pending;
}

struct run_info *runs_get(struct runs *runs, const char *dir)
{
	for (size_t i = 0; i < runs->n; i++)
		if (strcmp(runs->list[i]->run.dir, dir) == 0)
			return runs->list[i];
	struct run_info *run = xcalloc(1, sizeof(*run));
	run_load(run, dir, runs->pending);
	runs->list = xreallocarray(runs->list, runs->n + 1, sizeof(*runs->list));
	runs->list[runs->n++] = run;
	return run;
}

void runs_release(struct runs *runs)
{
	for (size_t i = 0; i < runs->n; i++) {
		struct run_info *run = runs->list[i];
		run_release(&run->run);
		free(run->error);
		cJSON_Delete(run->events);
		cJSON_Delete(run->best);
		cJSON_Delete(run->regraph);
		for (size_t k = 0; k < run->nsent; k++)
			free(run->sent[k].indices);
		free(run->sent);
		free(run->listing);
		for (size_t k = 0; k < run->nseen; k++)
			free(run->seen[k]);
		free(run->seen);
		for (size_t k = 0; k < run->ndigests; k++)
			free(run->digests[k].state);
		free(run->digests);
		free(run->seen_index.slots);
		free(run->digest_index.slots);
		free(run);
	}
	free(runs->list);
	cJSON_Delete(runs->pending);
}

/* ---------------------------------------------------------------- nodes */

/* The KernelGraph.Patches entries applied on the record's path: the candidates of the events
 * that lead from each state of the path to the next. */
static void find_applied(const struct run_info *run, const cJSON *path, struct node_info *node)
{
	int n = cJSON_GetArraySize(path);
	for (int i = 0; i + 1 < n; i++) {
		const char *from = cJSON_GetStringValue(cJSON_GetArrayItem(path, i));
		const char *to = cJSON_GetStringValue(cJSON_GetArrayItem(path, i + 1));
		const cJSON *e;
		cJSON_ArrayForEach(e, run->events) {
			const char *parent = json_string(e, "node");
			const char *child = json_string(cJSON_GetObjectItemCaseSensitive(e, "update"), "child");
			const char *library = json_string(cJSON_GetObjectItemCaseSensitive(e, "candidate"), "library");
			if (from && to && parent && child && library && strcmp(parent, from) == 0 && strcmp(child, to) == 0) {
				node->applied = xreallocarray(node->applied, node->napplied + 1, sizeof(*node->applied));
				node->applied[node->napplied++] = xstrdup(library);
			}
		}
	}
}

int node_load(struct run_info *run, const cJSON *record, struct node_info *node, struct strbuf *why)
{
	memset(node, 0, sizeof(*node));
	node->state = json_string(record, "node");
	if (!node->state) {
		strbuf_addstr(why, "node: missing (an expand record names the node to expand, as kg-select writes it)");
		return -1;
	}
	char *path = run_variant_path(run->run.dir, node->state, VARIANT_KERNEL);
	size_t len;
	node->source = file_read_all(path, &len);
	if (!node->source) {
		strbuf_addf(why, "node: %s has no variant (cannot read %s: %s)", node->state, path, strerror(errno));
		free(path);
		return -1;
	}
	free(path);
	snprintf(node->digest, sizeof(node->digest), "%s", source_digest(run, node->state));
	path = run_variant_path(run->run.dir, node->state, VARIANT_BUILD);
	node->build = json_read_optional(path);
	free(path);
	path = run_variant_path(run->run.dir, node->state, VARIANT_BENCH);
	node->bench = json_read_optional(path);
	free(path);
	path = run_variant_path(run->run.dir, node->state, VARIANT_METRICS);
	node->metrics = json_read_optional(path);
	free(path);
	const cJSON *config = cJSON_GetObjectItemCaseSensitive(record, "config");
	if (!cJSON_IsObject(config))
		config = cJSON_GetObjectItemCaseSensitive(node->build, "config");
	struct strbuf inner;
	strbuf_init(&inner);
	char *text = complete_config(run->run.spec, config, NULL, &node->config, &inner);
	if (!text)
		strbuf_addf(why, "config: the node's configuration is not one of the space: %s", inner.buf);
	strbuf_release(&inner);
	if (!text)
		return -1;
	free(text);
	node->last_method = json_string(record, "last_method");
	node->methods = cJSON_GetObjectItemCaseSensitive(record, "methods");
	find_applied(run, cJSON_GetObjectItemCaseSensitive(record, "path"), node);
	node->prefix = xasprintf("c%.0f-n%.0f", json_number(record, "iter", 0), json_number(record, "node_id", 0));
	return 0;
}

void node_release(struct node_info *node)
{
	free(node->source);
	cJSON_Delete(node->config);
	cJSON_Delete(node->build);
	cJSON_Delete(node->bench);
	cJSON_Delete(node->metrics);
	for (size_t i = 0; i < node->napplied; i++)
		free(node->applied[i]);
	free(node->applied);
	free(node->prefix);
	memset(node, 0, sizeof(*node));
}

/* A JSON file of the node's variant directory (regions.json), or NULL when it
 * is absent (an unreadable or malformed one is reported). The caller frees it. */
cJSON *node_variant_json(const struct run_info *run, const struct node_info *node, enum variant_file file)
{
	char *path = run_variant_path(run->run.dir, node->state, file);
	cJSON *doc = json_read_optional(path);
	free(path);
	return doc;
}

/* ---------------------------------------------------------------- checks */

int context_within(const struct run_info *run, const size_t *indices)
{
	if (!run->within)
		return 1;
	cJSON *config = config_object(run->run.spec, indices);
	int found = replay_has(run->within, config);
	cJSON_Delete(config);
	return found;
}

size_t context_observations(struct run_info *run, const struct node_info *node, size_t **indices, double **log_ms)
{
	const struct t1_spec *spec = run->run.spec;
	size_t n = 0, *at = xcalloc(spec->nparams + 1, sizeof(*at));
	const cJSON *e;
	*indices = NULL;
	*log_ms = NULL;
	cJSON_ArrayForEach(e, run->events) {
		const cJSON *build = cJSON_GetObjectItemCaseSensitive(e, "build"), *bench = cJSON_GetObjectItemCaseSensitive(e, "bench");
		const cJSON *config = cJSON_GetObjectItemCaseSensitive(build, "config");
		const char *status = json_string(build, "status"), *state = json_string(build, "state");
		if (!status || !cJSON_IsObject(config) || strcmp(status, "invalid_config") == 0 || strcmp(status, "patch_failed") == 0)
			continue; /* never a point of the space, or not one of this source */
		const char *digest = state ? source_digest(run, state) : "";
		if (!digest[0]) { /* no variant kept (a failed compile): a configuration change keeps its parent's source */
			const cJSON *candidate = cJSON_GetObjectItemCaseSensitive(e, "candidate");
			const char *parent = json_string(e, "node");
			if (!parent || nonempty(json_string(candidate, "patch")) || nonempty(json_string(candidate, "source")))
				continue;
			digest = source_digest(run, parent);
		}
		if (strcmp(digest, node->digest) != 0)
			continue;
		if (config_indices(spec, config, at) != 0)
			continue;
		double median = json_number(bench, "median_ms", NAN);
		int ok = strcmp(status, "ok") == 0 && json_string(bench, "status") && strcmp(json_string(bench, "status"), "ok") == 0 &&
			 median > 0;
		*indices = xreallocarray(*indices, (n + 1) * (spec->nparams + 1), sizeof(**indices));
		*log_ms = xreallocarray(*log_ms, n + 1, sizeof(**log_ms));
		memcpy(*indices + n * spec->nparams, at, spec->nparams * sizeof(*at));
		(*log_ms)[n] = ok ? log(median) : NAN;
		n++;
	}
	free(at);
	return n;
}

/* The configuration of an in-flight record e into at, when it is one of node's source: 0, else -1. */
static int in_flight_config(struct run_info *run, const struct node_info *node, const cJSON *e, size_t *at)
{
	const cJSON *candidate = cJSON_GetObjectItemCaseSensitive(e, "candidate");
	const char *parent = json_string(e, "node"), *in = json_string(e, "run");
	if (!cJSON_IsObject(candidate) || !parent || (in && strcmp(in, run->run.dir) != 0) ||
	    nonempty(json_string(candidate, "patch")) || nonempty(json_string(candidate, "source")))
		return -1; /* another run's, or a code edit: another space */
	if (strcmp(source_digest(run, parent), node->digest) != 0)
		return -1;
	const cJSON *wanted = cJSON_GetObjectItemCaseSensitive(candidate, "config"), *base = cJSON_GetObjectItemCaseSensitive(e, "config");
	cJSON *merged = json_object();
	struct strbuf why;
	strbuf_init(&why);
	int rc = t1_resolve_config(run->run.spec, cJSON_IsObject(wanted) ? wanted : NULL, cJSON_IsObject(base) ? base : NULL, at,
				   merged, &why);
	strbuf_release(&why);
	cJSON_Delete(merged);
	return rc == 0 ? 0 : -1;
}

size_t context_in_flight(struct run_info *run, const struct node_info *node, size_t **indices)
{
	size_t n = 0, np = run->run.spec->nparams, *at = xcalloc(np + 1, sizeof(*at));
	const cJSON *e;
	*indices = NULL;
	cJSON_ArrayForEach(e, run->pending) {
		if (in_flight_config(run, node, e, at) != 0)
			continue;
		*indices = xreallocarray(*indices, (n + 1) * (np + 1), sizeof(**indices));
		memcpy(*indices + n++ * np, at, np * sizeof(*at));
	}
	*indices = xreallocarray(*indices, (n + run->nsent) * np + 1, sizeof(**indices));
	for (size_t i = 0; i < run->nsent; i++)
		if (strcmp(run->sent[i].digest, node->digest) == 0)
			memcpy(*indices + n++ * np, run->sent[i].indices, np * sizeof(*at));
	free(at);
	return n;
}

struct history_read {
	const struct t1_spec *spec;
	size_t n, *indices;
	double *log_ms;
};

static int add_history(void *ctx, const cJSON *config, const cJSON *bench)
{
	struct history_read *h = ctx;
	size_t np = h->spec->nparams;
	h->indices = xreallocarray(h->indices, (h->n + 1) * (np + 1), sizeof(*h->indices));
	if (config_indices(h->spec, config, h->indices + h->n * np) != 0)
		return 0; /* not a configuration of this space */
	const char *status = json_string(bench, "status");
	double median = json_number(bench, "median_ms", NAN);
	h->log_ms = xreallocarray(h->log_ms, h->n + 1, sizeof(*h->log_ms));
	h->log_ms[h->n++] = status && strcmp(status, "ok") == 0 && median > 0 ? log(median) : NAN;
	return 0;
}

size_t context_history(struct run_info *run, const struct node_info *node, size_t k, size_t **indices, double **log_ms)
{
	struct history_read h = {.spec = run->run.spec};
	const char *base = run->base_state;
	*indices = NULL;
	*log_ms = NULL;
	if (k >= run->nhistory)
		return 0;
	if (!base || strcmp(source_digest(run, base), node->digest) != 0)
		return 0; /* a table of configurations measured the spec's kernel, not an edit of it */
	if (replay_each(run->history[k].table, add_history, &h) != 0)
		h.n = 0;
	*indices = h.indices;
	*log_ms = h.log_ms;
	return h.n;
}

int kernel_takes(const struct t1_spec *spec, const struct node_info *node, const char *library, const size_t *indices,
		 struct strbuf *why)
{
	const char **applied = xcalloc(node->napplied + 2, sizeof(*applied));
	size_t n = 0;
	for (size_t i = 0; i < node->napplied; i++)
		applied[n++] = node->applied[i];
	if (library)
		applied[n++] = library;
	struct pyval *values = xcalloc(spec->nnames, sizeof(*values));
	t1_bind(spec, indices, values);
	int takes = t1_check_kernel_conditions(spec, applied, n, values, why) == 0;
	free(values);
	free(applied);
	return takes;
}

int context_accept(struct run_info *run, const struct node_info *node, struct proposal *p, struct strbuf *why)
{
	const char *patch = nonempty(p->patch), *source = nonempty(p->source);
	if (source && strcmp(source, node->source) == 0)
		source = NULL; /* the node's own source, given whole: a configuration change */
	if (p->config && !cJSON_IsObject(p->config)) {
		strbuf_addstr(why, "config: must be an object of tuning parameters");
		return 1;
	}
	char *config = complete_config(run->run.spec, p->config, node->config, &p->full_config, why);
	if (!config)
		return 1;
	if (run->within && !replay_has(run->within, p->full_config)) {
		free(config);
		strbuf_addstr(why, "not among the configurations the --within table measured");
		return 1;
	}
	if (!source) {
		size_t *at = xcalloc(run->run.spec->nparams + 1, sizeof(*at));
		struct strbuf cond;
		strbuf_init(&cond);
		int takes = config_indices(run->run.spec, p->full_config, at) != 0 ||
			    kernel_takes(run->run.spec, node, patch ? p->library : NULL, at, &cond);
		if (!takes)
			strbuf_addf(why, "a configuration its kernel does not take: %s", cond.buf);
		strbuf_release(&cond);
		free(at);
		if (!takes) {
			free(config);
			return 1;
		}
	}
	char *node_config = json_text(node->config);
	int same = !patch && !source && strcmp(config, node_config) == 0;
	free(node_config);
	if (same) {
		free(config);
		strbuf_addstr(why, "changes nothing (the node's own configuration and source)");
		return 1;
	}
	char *key = change_key(node->state, node->digest, patch, source, config);
	free(config);
	if (is_seen(run, key)) {
		free(key);
		strbuf_addstr(why, "already proposed: the run has this change, or this expansion has it twice");
		return 1;
	}
	remember(run, key);
	return 0;
}

void context_sent(struct run_info *run, const struct node_info *node, const struct proposal *p)
{
	size_t np = run->run.spec->nparams, *at = xcalloc(np + 1, sizeof(*at));
	if (nonempty(p->patch) || (nonempty(p->source) && strcmp(p->source, node->source) != 0) || !p->full_config ||
	    config_indices(run->run.spec, p->full_config, at) != 0) {
		free(at); /* a code edit: another space */
		return;
	}
	run->sent = xreallocarray(run->sent, run->nsent + 1, sizeof(*run->sent));
	memcpy(run->sent[run->nsent].digest, node->digest, sizeof(node->digest));
	run->sent[run->nsent++].indices = at;
}

size_t context_regraph_next(struct run_info *run, const char *path, const char *from, size_t top,
			    struct regraph_transition **next)
{
	if (!run->regraph_read) {
		int status;
		run->regraph_read = 1;
		if (access(path, F_OK) == 0 || errno != ENOENT) {
			run->regraph = regraph_load(path, &status);
			if (!run->regraph)
				log_warn("the ReGraph '%s' is not used: no methods are suggested or filtered", path);
		}
	}
	return regraph_seen_from(run->regraph, from, top, next);
}
