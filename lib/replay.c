/* replay.c: a table from configuration to measurement. T4 results become bench objects with
 * the same summary fields kg-bench measures (from their raw runtimes); events.jsonl records
 * give back the bench objects they carried. */
#include "common.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "fileio.h"
#include "jsonl.h"
#include "log.h"
#include "replay.h"
#include "stats.h"
#include "t4.h"
#include "xalloc.h"

struct entry {
	char *key;
	cJSON *bench;
	cJSON *runtimes; /* a T4 result's raw samples; NULL for an events.jsonl record */
};

struct replay {
	struct entry *entries;
	size_t n, cap;
};

static int compare_names(const void *a, const void *b)
{
	return strcmp((*(const cJSON *const *)a)->string, (*(const cJSON *const *)b)->string);
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
		char *value = cJSON_PrintUnformatted(members[k]);
		if (!value)
			xalloc_die();
		strbuf_addf(&sb, "%s\"%s\":%s", k ? "," : "", members[k]->string, value);
		cJSON_free(value);
	}
	strbuf_addch(&sb, '}');
	free(members);
	return strbuf_detach(&sb);
}

static void add_entry(struct replay *r, const cJSON *config, cJSON *bench, cJSON *runtimes)
{
	if (r->n == r->cap) {
		r->cap = r->cap ? 2 * r->cap : 64;
		r->entries = xreallocarray(r->entries, r->cap, sizeof(*r->entries));
	}
	r->entries[r->n].key = replay_key(config);
	r->entries[r->n].bench = bench;
	r->entries[r->n].runtimes = runtimes;
	r->n++;
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

static cJSON *bench_from_t4(const cJSON *result, const char *path, size_t index)
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
	} else if (!cJSON_AddStringToObject(bench, "error", "recorded as failed in the replay table")) {
		xalloc_die();
	}
	free(samples);
	return bench;
}

static int load_t4(struct replay *r, const cJSON *doc, const char *path)
{
	const cJSON *results = cJSON_GetObjectItemCaseSensitive(doc, "results"), *result;
	size_t k = 0;
	if (!cJSON_IsArray(results))
		return log_error("%s: results: missing (not a T4 file)", path);
	cJSON_ArrayForEach(result, results) {
		const cJSON *config = cJSON_GetObjectItemCaseSensitive(result, "configuration");
		if (!cJSON_IsObject(config))
			return log_error("%s: results[%zu].configuration: missing", path, k);
		cJSON *bench = bench_from_t4(result, path, k);
		if (!bench)
			return -1;
		const cJSON *runtimes = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(result, "times"), "runtimes");
		add_entry(r, config, bench, cJSON_GetArraySize(runtimes) > 0 ? cJSON_Duplicate(runtimes, 1) : NULL);
		k++;
	}
	return 0;
}

static int load_events(struct replay *r, const char *path)
{
	struct jsonl_reader reader;
	cJSON *record;
	enum jsonl_status st;
	int rc = 0;
	if (jsonl_reader_open(&reader, path))
		return -1;
	while ((st = jsonl_next(&reader, &record)) != JSONL_EOF && st != JSONL_IO_ERROR) {
		if (st != JSONL_RECORD) {
			rc = -1;
			continue;
		}
		const cJSON *build = cJSON_GetObjectItemCaseSensitive(record, "build");
		const cJSON *config = cJSON_GetObjectItemCaseSensitive(build, "config");
		cJSON *bench = cJSON_DetachItemFromObjectCaseSensitive(record, "bench");
		if (cJSON_IsObject(config) && cJSON_IsObject(bench))
			add_entry(r, config, bench, NULL);
		else
			cJSON_Delete(bench);
		cJSON_Delete(record);
	}
	if (st == JSONL_IO_ERROR)
		rc = -1;
	jsonl_reader_release(&reader);
	return rc;
}

struct replay *replay_load(const char *path)
{
	struct replay *r = xcalloc(1, sizeof(*r));
	size_t len;
	char *text = file_read_all(path, &len);
	int rc;
	if (!text) {
		log_error("cannot read '%s':", path);
		rc = -1;
	} else {
		/* A T4 file is one JSON document; events.jsonl is one record per line. */
		cJSON *doc = cJSON_ParseWithLength(text, len);
		rc = cJSON_IsObject(doc) && cJSON_HasObjectItem(doc, "results") ? load_t4(r, doc, path) : load_events(r, path);
		cJSON_Delete(doc);
	}
	free(text);
	if (rc == 0 && r->n == 0)
		rc = log_error("%s: no measurements to replay", path);
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
	for (size_t k = 0; k < r->n; k++) {
		free(r->entries[k].key);
		cJSON_Delete(r->entries[k].bench);
		cJSON_Delete(r->entries[k].runtimes);
	}
	free(r->entries);
	free(r);
}

/* The entry of config, or NULL. The last measurement of a configuration wins, as a later run
 * would. */
static const struct entry *find_entry(const struct replay *r, const cJSON *config)
{
	char *key = replay_key(config);
	const struct entry *found = NULL;
	for (size_t k = r->n; k-- > 0 && !found;)
		if (strcmp(r->entries[k].key, key) == 0)
			found = &r->entries[k];
	free(key);
	return found;
}

int replay_has(const struct replay *r, const cJSON *config)
{
	return find_entry(r, config) != NULL;
}

cJSON *replay_lookup(const struct replay *r, const cJSON *config, const cJSON **runtimes)
{
	const struct entry *e = find_entry(r, config);
	cJSON *bench = e ? cJSON_Duplicate(e->bench, 1) : NULL;
	*runtimes = e ? e->runtimes : NULL;
	if (bench) {
		cJSON_DeleteItemFromObjectCaseSensitive(bench, "replayed");
		if (!cJSON_AddBoolToObject(bench, "replayed", 1))
			xalloc_die();
	}
	return bench;
}
