/* t4.c: builds T4 documents with cJSON. Keys follow the schema (times.compilation_time),
 * not Kernel Tuner's writer (times.compilation); the time unit goes in metadata. */
#include "common.h"

#include <math.h>
#include <time.h>

#include "fileio.h"
#include "t4.h"
#include "xalloc.h"

static const char *const invalidity_names[] = {
	[T4_CORRECT] = "correct", [T4_COMPILE] = "compile", [T4_RUNTIME] = "runtime",
	[T4_CORRECTNESS] = "correctness", [T4_CONSTRAINTS] = "constraints", [T4_TIMEOUT] = "timeout",
};

const char *t4_invalidity_name(enum t4_invalidity invalidity)
{
	return invalidity_names[invalidity];
}

int t4_invalidity_parse(const char *name, enum t4_invalidity *out)
{
	for (size_t k = 0; k < ARRAY_SIZE(invalidity_names); k++) {
		if (strcmp(name, invalidity_names[k]) == 0) {
			*out = (enum t4_invalidity)k;
			return 0;
		}
	}
	return -1;
}

/* Adds item to obj under key, or dies; cJSON leaves an item it failed to add with us. */
static void add(cJSON *obj, const char *key, cJSON *item)
{
	if (!item || !cJSON_AddItemToObject(obj, key, item)) {
		cJSON_Delete(item);
		xalloc_die();
	}
}

/* Appends item to array, or dies, as add does. */
static void append(cJSON *array, cJSON *item)
{
	if (!item || !cJSON_AddItemToArray(array, item)) {
		cJSON_Delete(item);
		xalloc_die();
	}
}

/* cJSON's array constructors refuse an empty (NULL, 0) input; an empty array is wanted. */
static cJSON *string_array(const char *const *items, size_t n)
{
	return n ? cJSON_CreateStringArray(items, (int)n) : cJSON_CreateArray();
}

static cJSON *number_array(const double *items, size_t n)
{
	return n ? cJSON_CreateDoubleArray(items, (int)n) : cJSON_CreateArray();
}

static void add_time(cJSON *times, const char *key, double ms)
{
	if (!isnan(ms))
		add(times, key, cJSON_CreateNumber(ms));
}

cJSON *t4_new(void)
{
	cJSON *doc = cJSON_CreateObject();
	if (!doc)
		xalloc_die();
	add(doc, "schema_version", cJSON_CreateString("1.0.0"));
	cJSON *metadata = cJSON_CreateObject();
	add(doc, "metadata", metadata);
	add(metadata, "timeunit", cJSON_CreateString("milliseconds"));
	add(doc, "results", cJSON_CreateArray());
	return doc;
}

void t4_add(cJSON *doc, const struct t4_result *r)
{
	cJSON *result = cJSON_CreateObject();
	append(cJSON_GetObjectItemCaseSensitive(doc, "results"), result);
	char now[32];
	if (!r->timestamp) {
		time_t t = time(NULL);
		struct tm tm;
		gmtime_r(&t, &tm);
		strftime(now, sizeof(now), "%Y-%m-%dT%H:%M:%SZ", &tm);
	}
	add(result, "timestamp", cJSON_CreateString(r->timestamp ? r->timestamp : now));
	add(result, "configuration", cJSON_Duplicate(r->configuration, 1));

	add(result, "objectives", string_array(r->objectives, r->nobjectives));

	cJSON *times = cJSON_CreateObject();
	add(result, "times", times);
	add_time(times, "compilation_time", r->compilation_ms);
	add(times, "runtimes", number_array(r->runtimes_ms, r->nruntimes));
	add_time(times, "framework", r->framework_ms);
	add_time(times, "search_algorithm", r->search_algorithm_ms);
	add_time(times, "validation", r->validation_ms);

	add(result, "invalidity", cJSON_CreateString(t4_invalidity_name(r->invalidity)));
	add(result, "correctness", cJSON_CreateNumber(r->correctness));

	cJSON *measurements = cJSON_CreateArray();
	add(result, "measurements", measurements);
	for (size_t k = 0; k < r->nmeasurements; k++) {
		cJSON *m = cJSON_CreateObject();
		append(measurements, m);
		add(m, "name", cJSON_CreateString(r->measurements[k].name));
		add(m, "value", cJSON_CreateNumber(r->measurements[k].value));
		add(m, "unit", cJSON_CreateString(r->measurements[k].unit));
	}
}

int t4_write_file(const cJSON *doc, const char *path)
{
	char *text = cJSON_Print(doc);
	if (!text)
		xalloc_die();
	/* A text file ends with a newline; cJSON_Print leaves it off. */
	char *file = xasprintf("%s\n", text);
	cJSON_free(text);
	int rc = file_write_atomic(path, file, strlen(file));
	free(file);
	return rc;
}
