/* t4.c: builds T4 documents with cJSON. Keys follow the schema (times.compilation_time),
 * not Kernel Tuner's writer (times.compilation); the time unit goes in metadata. */
#include "common.h"

#include <math.h>
#include <time.h>

#include "clock.h"
#include "fileio.h"
#include "jsonl.h"
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
		json_add(times, key, cJSON_CreateNumber(ms));
}

cJSON *t4_new(void)
{
	cJSON *doc = cJSON_CreateObject();
	if (!doc)
		xalloc_die();
	json_add(doc, "schema_version", cJSON_CreateString("1.0.0"));
	cJSON *metadata = cJSON_CreateObject();
	json_add(doc, "metadata", metadata);
	json_add(metadata, "timeunit", cJSON_CreateString("milliseconds"));
	json_add(doc, "results", cJSON_CreateArray());
	return doc;
}

void t4_add(cJSON *doc, const struct t4_result *r)
{
	cJSON *result = cJSON_CreateObject();
	json_append(cJSON_GetObjectItemCaseSensitive(doc, "results"), result);
	char now[32];
	if (!r->timestamp)
		utc_now(now, sizeof(now), 0);
	json_add(result, "timestamp", cJSON_CreateString(r->timestamp ? r->timestamp : now));
	json_add(result, "configuration", cJSON_Duplicate(r->configuration, 1));

	json_add(result, "objectives", string_array(r->objectives, r->nobjectives));

	cJSON *times = cJSON_CreateObject();
	json_add(result, "times", times);
	add_time(times, "compilation_time", r->compilation_ms);
	json_add(times, "runtimes", number_array(r->runtimes_ms, r->nruntimes));
	add_time(times, "framework", r->framework_ms);
	add_time(times, "search_algorithm", r->search_algorithm_ms);
	add_time(times, "validation", r->validation_ms);

	json_add(result, "invalidity", cJSON_CreateString(t4_invalidity_name(r->invalidity)));
	json_add(result, "correctness", cJSON_CreateNumber(r->correctness));

	cJSON *measurements = cJSON_CreateArray();
	json_add(result, "measurements", measurements);
	for (size_t k = 0; k < r->nmeasurements; k++) {
		cJSON *m = cJSON_CreateObject();
		json_append(measurements, m);
		json_add(m, "name", cJSON_CreateString(r->measurements[k].name));
		json_add(m, "value", r->measurements[k].text ? cJSON_CreateString(r->measurements[k].text)
							     : cJSON_CreateNumber(r->measurements[k].value));
		json_add(m, "unit", cJSON_CreateString(r->measurements[k].unit));
	}
}

int t4_write_file(const cJSON *doc, const char *path)
{
	return json_write_file(path, doc, 1);
}
