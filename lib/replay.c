/* replay.c: a table of recorded measurements, by state and by configuration. T4 results
 * become bench objects with the same summary fields kg-bench measures (from their raw
 * runtimes), the throughputs and the device they recorded; events.jsonl records give back
 * the bench objects they carried.
 *
 * Either source is first turned into the same compact text, one measurement a line:
 *
 *     KEY \t STATE \t EDITED \t BENCH \t RUNTIMES \n
 *
 * (the configuration as replay_key gives it; the variant's state, or nothing; 1 for a code
 * edit, else 0; the bench object, with the architecture the variant was built for where the
 * source says (REPLAY_ARCH_KEY); the raw samples, or nothing), after a header line that
 * names the source file as it was read (path, device, inode, size, modification time). No
 * field can hold a tab or a newline: JSON text escapes them, and states with them are
 * dropped. The table is indexed in place, and a measurement is parsed only when it answers.
 * For a large source the text is kept in the cache, and a later load whose header still
 * matches the file maps it instead of parsing the source again. */
#include "common.h"

#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "events.h"
#include "fileio.h"
#include "fnv1a.h"
#include "jsonl.h"
#include "log.h"
#include "replay.h"
#include "stats.h"
#include "t4.h"
#include "xalloc.h"

/* The format of the compact text; a change to it, or to what a source becomes in it (the
 * summaries of T4 runtimes, say), needs a new version, so that no cache is read wrongly. */
#define REPLAY_FORMAT "kg-replay-3"
/* The member of a line's bench object that carries the architecture its variant was built
 * for, when the source records it; replay_target reads it, and the lookups take it out. */
#define REPLAY_ARCH_KEY "kg_replay_arch"
/* Sources smaller than this parse about as fast as their cached text loads: not cached. */
#define REPLAY_CACHE_MIN_BYTES (256 * 1024)

struct span {
	const char *p; /* into the table's text; not NUL-terminated */
	size_t n;      /* 0: absent */
};

struct entry {
	struct span key, state, bench, runtimes;
	int edited; /* measured a source other than the spec's kernel: answers by state only */
};

/* Open addressing: a slot holds an entry's number plus one, 0 when free. */
struct index {
	uint32_t *slots;
	size_t mask; /* slots - 1; the number of slots is a power of two */
};

struct replay {
	char *cache;	    /* the cache file the text was mapped from, for messages; NULL when made */
	char *owned;	    /* the text, when it was made by this load */
	const char *mapped; /* the text, when it is a mapped cache file */
	size_t mapped_len;
	struct entry *entries;
	size_t n, cap;
	struct index by_key;   /* the configurations of entries that are not edits */
	struct index by_state; /* the states of entries that have one */
};

/* ---------------------------------------------------------------- keys and edits */

static int compare_names(const void *a, const void *b)
{
	return strcmp((*(const cJSON *const *)a)->string, (*(const cJSON *const *)b)->string);
}

static void add_json(struct strbuf *sb, const cJSON *item)
{
	char *text = cJSON_PrintUnformatted(item);
	if (!text)
		xalloc_die();
	strbuf_addstr(sb, text);
	cJSON_free(text);
}

char *replay_key(const cJSON *config)
{
	size_t n = (size_t)cJSON_GetArraySize(config), k = 0;
	const cJSON **members = xcalloc(n + 1, sizeof(*members)), *item;
	cJSON_ArrayForEach(item, config)
		members[k++] = item;
	qsort(members, n, sizeof(*members), compare_names);
	struct strbuf sb;
	strbuf_init(&sb);
	strbuf_addch(&sb, '{');
	for (k = 0; k < n; k++) {
		/* names escaped as JSON, so that no key holds a tab or a newline */
		cJSON *name = cJSON_CreateString(members[k]->string);
		if (!name)
			xalloc_die();
		if (k)
			strbuf_addch(&sb, ',');
		add_json(&sb, name);
		cJSON_Delete(name);
		strbuf_addch(&sb, ':');
		add_json(&sb, members[k]);
	}
	strbuf_addch(&sb, '}');
	free(members);
	return strbuf_detach(&sb);
}

struct replay_edits {
	char **states; /* of the edited variants seen so far */
	size_t n, cap;
};

struct replay_edits *replay_edits_new(void)
{
	return xcalloc(1, sizeof(struct replay_edits));
}

void replay_edits_free(struct replay_edits *edits)
{
	if (!edits)
		return;
	for (size_t k = 0; k < edits->n; k++)
		free(edits->states[k]);
	free(edits->states);
	free(edits);
}

static int known_edit(const struct replay_edits *edits, const char *state)
{
	for (size_t k = 0; edits && state && k < edits->n; k++)
		if (strcmp(edits->states[k], state) == 0)
			return 1;
	return 0;
}

static int nonempty(const char *s)
{
	return s && s[0];
}

int replay_edited(const cJSON *record, struct replay_edits *edits)
{
	const cJSON *build = cJSON_GetObjectItemCaseSensitive(record, "build");
	const cJSON *candidate = cJSON_GetObjectItemCaseSensitive(record, "candidate");
	const cJSON *flag = cJSON_GetObjectItemCaseSensitive(build, "edited");
	int edited;
	if (cJSON_IsBool(flag)) {
		edited = cJSON_IsTrue(flag);
	} else {
		/* Built before kg-build said: what the record itself shows. */
		const char *materialized = json_string(build, "materialized");
		edited = nonempty(json_string(candidate, "patch")) || nonempty(json_string(candidate, "source")) ||
			 (materialized && strcmp(materialized, "parent") != 0) ||
			 known_edit(edits, json_string(record, "node"));
	}
	const char *state = json_string(build, "state");
	if (edited && edits && state && !known_edit(edits, state)) {
		if (edits->n == edits->cap) {
			edits->cap = edits->cap ? 2 * edits->cap : 16;
			edits->states = xreallocarray(edits->states, edits->cap, sizeof(*edits->states));
		}
		edits->states[edits->n++] = xstrdup(state);
	}
	return edited;
}

/* ---------------------------------------------------------------- the compact text */

/* Appends one measurement's line; arch: what its variant was built for, NULL when unknown. */
static void add_line(struct strbuf *sb, const cJSON *config, const char *state, int edited, const cJSON *bench,
		     const char *arch, const cJSON *runtimes)
{
	char *key = replay_key(config);
	strbuf_addstr(sb, key);
	free(key);
	strbuf_addch(sb, '\t');
	if (state && !strpbrk(state, "\t\n\r"))
		strbuf_addstr(sb, state);
	strbuf_addf(sb, "\t%d\t", edited ? 1 : 0);
	if (arch) {
		cJSON *copy = cJSON_Duplicate(bench, 1);
		cJSON_DeleteItemFromObjectCaseSensitive(copy, REPLAY_ARCH_KEY);
		json_add_string(copy, REPLAY_ARCH_KEY, arch);
		add_json(sb, copy);
		cJSON_Delete(copy);
	} else {
		add_json(sb, bench);
	}
	strbuf_addch(sb, '\t');
	if (cJSON_GetArraySize(runtimes) > 0)
		add_json(sb, runtimes);
	strbuf_addch(sb, '\n');
}

/* T4's invalidity in kg-bench's words. */
static const char *status_of(enum t4_invalidity invalidity)
{
	switch (invalidity) {
	case T4_CORRECT: return "ok";
	case T4_CORRECTNESS: return "incorrect";
	case T4_RUNTIME: return "crashed";
	case T4_TIMEOUT: return "timeout";
	default: return "error";
	}
}

/* The measurement called name in a T4 result (kg-bench --t4 writes "state", "edited" and
 * "arch"). */
static const cJSON *t4_measurement(const cJSON *result, const char *name)
{
	const cJSON *m;
	cJSON_ArrayForEach(m, cJSON_GetObjectItemCaseSensitive(result, "measurements")) {
		const char *n = json_string(m, "name");
		if (n && strcmp(n, name) == 0)
			return cJSON_GetObjectItemCaseSensitive(m, "value");
	}
	return NULL;
}

/* The bench object of a T4 result measured on device (NULL: the table does not say): the
 * summary of its runtimes and, for a correct one, the throughputs recorded with them (kg-bench
 * --t4 writes them), which kg-report's roofline needs and which were measured at that median. */
static cJSON *bench_from_t4(const cJSON *result, const char *device, const char *path, size_t index)
{
	const cJSON *times = cJSON_GetObjectItemCaseSensitive(result, "times");
	const cJSON *runtimes = cJSON_GetObjectItemCaseSensitive(times, "runtimes");
	const cJSON *invalidity = cJSON_GetObjectItemCaseSensitive(result, "invalidity"), *item;
	enum t4_invalidity inv = T4_CORRECT;
	if (!cJSON_IsString(invalidity) || t4_invalidity_parse(invalidity->valuestring, &inv) != 0) {
		log_error("%s: results[%zu].invalidity: missing or not one of T4's", path, index);
		return NULL;
	}
	cJSON *bench = cJSON_CreateObject();
	if (!bench || !cJSON_AddStringToObject(bench, "status", status_of(inv)))
		xalloc_die();
	size_t n = 0;
	double *samples = xcalloc((size_t)cJSON_GetArraySize(runtimes) + 1, sizeof(*samples));
	cJSON_ArrayForEach(item, runtimes)
		if (cJSON_IsNumber(item))
			samples[n++] = item->valuedouble;
	if (inv == T4_CORRECT) {
		if (n == 0) {
			log_error("%s: results[%zu].times.runtimes: a correct result needs its runtimes", path, index);
			free(samples);
			cJSON_Delete(bench);
			return NULL;
		}
		struct summary s;
		summarize(samples, n, &s);
		summary_to_json(&s, bench);
		static const char *const throughputs[] = {"gbps", "pct_peak_bw", "tflops"};
		for (size_t t = 0; t < ARRAY_SIZE(throughputs); t++) {
			const cJSON *v = t4_measurement(result, throughputs[t]);
			if (cJSON_IsNumber(v))
				json_add_number(bench, throughputs[t], v->valuedouble);
		}
	} else if (!cJSON_AddStringToObject(bench, "error", "recorded as failed in the replay table")) {
		xalloc_die();
	}
	if (device)
		json_add_string(bench, "device", device);
	free(samples);
	return bench;
}

static int text_from_t4(struct strbuf *sb, const cJSON *doc, const char *path)
{
	const cJSON *results = cJSON_GetObjectItemCaseSensitive(doc, "results"), *result;
	const cJSON *metadata = cJSON_GetObjectItemCaseSensitive(doc, "metadata");
	const char *device = json_string(cJSON_GetObjectItemCaseSensitive(metadata, "hardware"), "hardware_description");
	size_t k = 0;
	if (!cJSON_IsArray(results))
		return log_error("%s: results: missing (not a T4 file)", path);
	cJSON_ArrayForEach(result, results) {
		const cJSON *config = cJSON_GetObjectItemCaseSensitive(result, "configuration");
		if (!cJSON_IsObject(config))
			return log_error("%s: results[%zu].configuration: missing", path, k);
		cJSON *bench = bench_from_t4(result, device, path, k);
		if (!bench)
			return -1;
		const cJSON *times = cJSON_GetObjectItemCaseSensitive(result, "times");
		const cJSON *state = t4_measurement(result, "state"), *edited = t4_measurement(result, "edited");
		const cJSON *arch = t4_measurement(result, "arch");
		add_line(sb, config, cJSON_IsString(state) ? state->valuestring : NULL,
			 cJSON_IsTrue(edited) || (cJSON_IsNumber(edited) && edited->valuedouble != 0), bench,
			 cJSON_IsString(arch) && *arch->valuestring ? arch->valuestring : NULL,
			 cJSON_GetObjectItemCaseSensitive(times, "runtimes"));
		cJSON_Delete(bench);
		k++;
	}
	return 0;
}

/* A run's log (lib/events: its one reader) into lines; a table with a bad line is refused. */
static int text_from_events(struct strbuf *sb, const char *path)
{
	struct events_reader r;
	if (events_open_file(&r, path, 0, EVENTS_NUMBER_TEXTS | EVENTS_MUST_EXIST) != EVENTS_OPENED) {
		events_reader_release(&r);
		return -1;
	}
	struct replay_edits *edits = replay_edits_new();
	cJSON *record;
	while ((record = events_next(&r))) {
		const cJSON *build = cJSON_GetObjectItemCaseSensitive(record, "build");
		const cJSON *config = cJSON_GetObjectItemCaseSensitive(build, "config");
		const cJSON *bench = cJSON_GetObjectItemCaseSensitive(record, "bench");
		int edited = replay_edited(record, edits);
		if (cJSON_IsObject(config) && cJSON_IsObject(bench))
			add_line(sb, config, json_string(build, "state"), edited, bench, json_string(build, "arch"), NULL);
		cJSON_Delete(record);
	}
	int rc = r.failed || r.bad ? -1 : 0;
	events_reader_release(&r);
	replay_edits_free(edits);
	return rc;
}

/* Reads path (a T4 document, or one record per line) into its lines. Returns 0, or -1
 * after reporting. */
static int text_from_source(struct strbuf *sb, const char *path)
{
	size_t len;
	char *text = file_read_all(path, &len);
	if (!text)
		return log_error("cannot read '%s':", path);
	cJSON *doc = cJSON_ParseWithLength(text, len);
	free(text);
	int rc = cJSON_IsObject(doc) && cJSON_HasObjectItem(doc, "results") ? text_from_t4(sb, doc, path)
									: text_from_events(sb, path);
	cJSON_Delete(doc);
	return rc;
}

/* ---------------------------------------------------------------- the indexes */

static uint64_t span_hash(struct span s)
{
	return fnv1a64(s.p, s.n);
}

static int span_equal(struct span a, struct span b)
{
	return a.n == b.n && memcmp(a.p, b.p, a.n) == 0;
}

static void index_init(struct index *ix, size_t n)
{
	size_t size = 16;
	while (size < 2 * n)
		size *= 2;
	ix->slots = xcalloc(size, sizeof(*ix->slots));
	ix->mask = size - 1;
}

/* The slot of s: the one that holds it, or the free one where it goes. */
static uint32_t *index_slot(const struct replay *r, const struct index *ix, struct span s, int by_state)
{
	for (size_t i = span_hash(s) & ix->mask;; i = (i + 1) & ix->mask) {
		uint32_t *slot = &ix->slots[i];
		if (!*slot)
			return slot;
		const struct entry *e = &r->entries[*slot - 1];
		if (span_equal(by_state ? e->state : e->key, s))
			return slot;
	}
}

static const struct entry *index_find(const struct replay *r, const struct index *ix, const char *text, int by_state)
{
	struct span s = {text, strlen(text)};
	uint32_t slot = *index_slot(r, ix, s, by_state);
	return slot ? &r->entries[slot - 1] : NULL;
}

/* Splits text (after the header) into entries and indexes them: a later measurement of a
 * key replaces an earlier one, as a later run would. Returns 0, or -1 when a line is not
 * one of the compact text's. */
static int index_text(struct replay *r, const char *text, size_t len)
{
	const char *end = text + len;
	while (text < end) {
		const char *nl = memchr(text, '\n', (size_t)(end - text));
		if (!nl)
			return -1;
		struct span f[5];
		const char *p = text;
		for (int k = 0; k < 5; k++) {
			const char *stop = k < 4 ? memchr(p, '\t', (size_t)(nl - p)) : nl;
			if (!stop)
				return -1;
			f[k] = (struct span){p, (size_t)(stop - p)};
			p = stop + 1;
		}
		if (f[0].n == 0 || f[2].n != 1 || (f[2].p[0] != '0' && f[2].p[0] != '1') || f[3].n == 0)
			return -1;
		if (r->n == r->cap) {
			r->cap = r->cap ? 2 * r->cap : 256;
			r->entries = xreallocarray(r->entries, r->cap, sizeof(*r->entries));
		}
		r->entries[r->n++] = (struct entry){f[0], f[1], f[3], f[4], f[2].p[0] == '1'};
		text = nl + 1;
	}
	if (r->n > UINT32_MAX - 1)
		return -1;
	index_init(&r->by_key, r->n);
	index_init(&r->by_state, r->n);
	for (size_t k = 0; k < r->n; k++) {
		const struct entry *e = &r->entries[k];
		if (!e->edited)
			*index_slot(r, &r->by_key, e->key, 0) = (uint32_t)k + 1;
		if (e->state.n)
			*index_slot(r, &r->by_state, e->state, 1) = (uint32_t)k + 1;
	}
	return 0;
}

static void unindex(struct replay *r)
{
	free(r->entries);
	free(r->by_key.slots);
	free(r->by_state.slots);
	r->entries = NULL;
	r->n = r->cap = 0;
	r->by_key.slots = r->by_state.slots = NULL;
}

/* ---------------------------------------------------------------- loading */

/* The header line of the compact text of the file resolved (a real path) with st: what tells
 * a cache of it from a stale one. */
static char *header_of(const char *resolved, const struct stat *st)
{
	return xasprintf("%s %s %ju %ju %jd %jd.%09ld\n", REPLAY_FORMAT, resolved, (uintmax_t)st->st_dev,
			 (uintmax_t)st->st_ino, (intmax_t)st->st_size, (intmax_t)st->st_mtim.tv_sec,
			 st->st_mtim.tv_nsec);
}

/* The cache file of the file resolved: $XDG_CACHE_HOME/kernelgraph/replay/HASH.txt (the
 * header tells two paths of one hash apart). NULL without a cache directory. */
static char *cache_path(const char *resolved)
{
	char *root = kg_cache_dir();
	if (!root)
		return NULL;
	char *path = xasprintf("%s/replay/%016llx.txt", root, (unsigned long long)fnv1a64(resolved, strlen(resolved)));
	free(root);
	return path;
}

/* Takes the cached text at cache when its header is header. Returns 0, or -1 (a miss). */
static int load_cached(struct replay *r, const char *cache, const char *header)
{
	size_t len, hlen = strlen(header);
	const char *map = file_map(cache, &len);
	if (!map)
		return -1;
	if (len > hlen && memcmp(map, header, hlen) == 0 && index_text(r, map + hlen, len - hlen) == 0 && r->n > 0) {
		r->mapped = map;
		r->mapped_len = len;
		return 0;
	}
	unindex(r);
	file_unmap(map, len);
	log_info("the replay cache '%s' is stale or damaged: made again", cache);
	return -1;
}

/* Keeps text in the cache; a failure costs only the next load's time. */
static void store_cached(const char *cache, const struct strbuf *text)
{
	char *dir = xstrndup(cache, (size_t)(strrchr(cache, '/') - cache));
	if (dir_create(dir) != 0 || file_write_atomic(cache, text->buf, text->len) != 0)
		log_info("cannot keep the replay table in '%s': %s", cache, strerror(errno));
	else
		log_info("replay table kept in the cache '%s'", cache);
	free(dir);
}

struct replay *replay_load(const char *path)
{
	struct stat st;
	if (stat(path, &st) != 0) {
		log_error("cannot read '%s':", path);
		return NULL;
	}
	struct replay *r = xcalloc(1, sizeof(*r));
	char resolved[PATH_MAX], *header, *cache = NULL;
	if (realpath(path, resolved)) {
		header = header_of(resolved, &st);
		if (st.st_size >= REPLAY_CACHE_MIN_BYTES)
			cache = cache_path(resolved);
	} else {
		header = xstrdup(REPLAY_FORMAT "\n");
	}
	if (cache && load_cached(r, cache, header) == 0) {
		log_info("%s: %zu measurements, read from the cache '%s'", path, r->n, cache);
		r->cache = cache;
		free(header);
		return r;
	}
	struct strbuf text;
	strbuf_init(&text);
	strbuf_addstr(&text, header);
	size_t hlen = text.len;
	int rc = text_from_source(&text, path);
	if (rc == 0 && text.len == hlen)
		rc = log_error("%s: no measurements to replay", path);
	if (rc == 0 && cache)
		store_cached(cache, &text);
	free(cache);
	free(header);
	size_t len = text.len;
	r->owned = strbuf_detach(&text);
	if (rc == 0 && index_text(r, r->owned + hlen, len - hlen) != 0)
		rc = log_error("%s: cannot index its measurements", path); /* never expected */
	if (rc) {
		replay_free(r);
		return NULL;
	}
	return r;
}

void replay_free(struct replay *r)
{
	if (!r)
		return;
	unindex(r);
	free(r->owned);
	free(r->cache);
	if (r->mapped)
		file_unmap(r->mapped, r->mapped_len);
	free(r);
}

/* ---------------------------------------------------------------- lookups */

/* A field of an entry as JSON; NULL after reporting, when a cache file was damaged. */
static cJSON *parse_span(const struct replay *r, struct span s)
{
	cJSON *json = cJSON_ParseWithLength(s.p, s.n);
	if (!json)
		log_error("%s: a damaged measurement (remove the file: it is only a cache)",
			  r->cache ? r->cache : "the replay table");
	return json;
}

int replay_has(const struct replay *r, const cJSON *config)
{
	char *key = replay_key(config);
	int found = index_find(r, &r->by_key, key, 0) != NULL;
	free(key);
	return found;
}

cJSON *replay_lookup(const struct replay *r, const cJSON *config, const char *state, int edited, cJSON **runtimes)
{
	const struct entry *e = state ? index_find(r, &r->by_state, state, 1) : NULL;
	if (!e && !edited && cJSON_IsObject(config)) {
		char *key = replay_key(config);
		e = index_find(r, &r->by_key, key, 0);
		free(key);
	}
	*runtimes = NULL;
	if (!e)
		return NULL;
	cJSON *bench = parse_span(r, e->bench);
	if (!bench)
		return NULL;
	cJSON_DeleteItemFromObjectCaseSensitive(bench, REPLAY_ARCH_KEY);
	cJSON_DeleteItemFromObjectCaseSensitive(bench, "replayed");
	if (!cJSON_AddBoolToObject(bench, "replayed", 1))
		xalloc_die();
	if (e->runtimes.n)
		*runtimes = parse_span(r, e->runtimes);
	return bench;
}

int replay_each(const struct replay *r, replay_each_fn fn, void *ctx)
{
	for (size_t i = 0; i < r->n; i++) {
		const struct entry *e = &r->entries[i];
		if (e->edited)
			continue;
		cJSON *config = parse_span(r, e->key), *bench = parse_span(r, e->bench);
		cJSON_DeleteItemFromObjectCaseSensitive(bench, REPLAY_ARCH_KEY);
		int rc = config && bench ? fn(ctx, config, bench) : -1;
		cJSON_Delete(config);
		cJSON_Delete(bench);
		if (rc)
			return rc;
	}
	return 0;
}

void replay_target(const struct replay *r, char **arch, char **device)
{
	/* Every measurement of a T4 table names the table's one device; an events.jsonl names
	 * the device and architecture of each record, the baseline's first. A record that failed
	 * before it was built or measured may name neither, so the first that names each
	 * answers. */
	*arch = *device = NULL;
	for (size_t i = 0; i < r->n && !(*arch && *device); i++) {
		struct span b = r->entries[i].bench;
		/* only a measurement whose text names what is still missing is parsed: many tables
		 * name neither, and parsing all of their measurements cost every kg-build of a
		 * replayed run 6 ms (the cache's text writes keys as they are) */
		if (!(!*arch && memmem(b.p, b.n, "\"" REPLAY_ARCH_KEY "\"", strlen(REPLAY_ARCH_KEY) + 2)) &&
		    !(!*device && memmem(b.p, b.n, "\"device\"", 8)))
			continue;
		cJSON *bench = parse_span(r, b);
		const char *a = json_string(bench, REPLAY_ARCH_KEY), *d = json_string(bench, "device");
		if (!*arch && a && *a)
			*arch = xstrdup(a);
		if (!*device && d && *d)
			*device = xstrdup(d);
		cJSON_Delete(bench);
	}
}
