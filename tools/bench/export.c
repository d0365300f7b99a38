/* export.c: a run's measurements as one T4 document (kg-bench --t4), so that Kernel Tuner,
 * benchmark_hub and kg-bench --replay can read what kernelgraph measured. */
#include "common.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "export.h"
#include "jsonl.h"
#include "log.h"
#include "replay.h"
#include "run.h"
#include "t4.h"
#include "xalloc.h"

/* The verdict in T4's words: the bench's when there is one, else the build's. */
static enum t4_invalidity invalidity_of(const char *build_status, const char *bench_status)
{
	if (bench_status) {
		if (strcmp(bench_status, "ok") == 0)
			return T4_CORRECT;
		if (strcmp(bench_status, "incorrect") == 0)
			return T4_CORRECTNESS;
		if (strcmp(bench_status, "timeout") == 0)
			return T4_TIMEOUT;
		return T4_RUNTIME;
	}
	return strcmp(build_status, "invalid_config") == 0 ? T4_CONSTRAINTS : T4_COMPILE;
}

/* The raw samples kg-bench kept in variants/STATE/bench.json: CUPTI's when it timed with
 * CUPTI, else the events', else those a replay table recorded. NULL when there are none. */
static cJSON *kept_samples(const char *run, const cJSON *build)
{
	const char *dir = json_string(build, "dir");
	if (!run || !dir)
		return NULL;
	char *path = xasprintf("%s/%s/%s", run, dir, run_variant_file(VARIANT_BENCH));
	cJSON *doc = json_read_file(path);
	free(path);
	const cJSON *raw = cJSON_GetObjectItemCaseSensitive(doc, "candidate_ms");
	static const char *const timers[] = {"cupti_ms", "events_ms", "recorded_ms"};
	cJSON *samples = NULL;
	for (size_t k = 0; k < ARRAY_SIZE(timers) && !samples; k++)
		if (cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(raw, timers[k])) > 0)
			samples = cJSON_DetachItemFromObjectCaseSensitive((cJSON *)raw, timers[k]);
	cJSON_Delete(doc);
	return samples;
}

static void add_result(cJSON *doc, const cJSON *record, const char *run, int edited)
{
	const cJSON *build = cJSON_GetObjectItemCaseSensitive(record, "build");
	const cJSON *bench = cJSON_GetObjectItemCaseSensitive(record, "bench");
	const char *build_status = json_string(build, "status"), *bench_status = json_string(bench, "status");
	enum t4_invalidity inv = invalidity_of(build_status, bench_status);
	cJSON *samples = inv == T4_CORRECT ? kept_samples(run, build) : NULL;
	size_t n = (size_t)cJSON_GetArraySize(samples), k = 0;
	double median = json_number(bench, "median_ms", NAN);
	double *runtimes = xcalloc(n + 1, sizeof(*runtimes));
	const cJSON *item;
	cJSON_ArrayForEach(item, samples)
		runtimes[k++] = item->valuedouble;
	if (n == 0 && inv == T4_CORRECT && !isnan(median))
		runtimes[n++] = median; /* no raw samples kept: the median stands for them */

	static const struct {
		const char *key, *name, *unit;
	} figures[] = {
		{"median_ms", "time", "ms"}, {"p10_ms", "p10", "ms"}, {"p90_ms", "p90", "ms"},
		{"speedup", "speedup", ""}, {"gbps", "gbps", "GB/s"}, {"pct_peak_bw", "pct_peak_bw", "%"},
		{"tflops", "tflops", "TFLOP/s"},
	};
	struct t4_measurement m[ARRAY_SIZE(figures) + 3];
	size_t nm = 0;
	for (size_t f = 0; f < ARRAY_SIZE(figures) && inv == T4_CORRECT; f++) {
		double v = json_number(bench, figures[f].key, NAN);
		if (!isnan(v))
			m[nm++] = (struct t4_measurement){figures[f].name, v, figures[f].unit, NULL};
	}
	/* T4 keys results by configuration alone; the variant's state tells code edits apart,
	 * and "edited" keeps kg-bench --replay from answering the unedited kernel with them. */
	const char *state = json_string(build, "state");
	m[nm++] = (struct t4_measurement){"state", NAN, "", state ? state : ""};
	m[nm++] = (struct t4_measurement){"edited", edited ? 1 : 0, "", NULL};
	/* What the variant was built for, which the state hashes: a search replaying the table
	 * builds for it too (kg-build), so that its states are the table's. */
	const char *arch = json_string(build, "arch");
	if (arch)
		m[nm++] = (struct t4_measurement){"arch", NAN, "", arch};
	static const char *const objectives[] = {"time"};
	struct t4_result r = {
		.timestamp = json_string(record, "t"),
		.configuration = cJSON_GetObjectItemCaseSensitive(build, "config"),
		.objectives = objectives,
		.nobjectives = 1,
		.compilation_ms = json_number(build, "compile_ms", NAN),
		.runtimes_ms = runtimes,
		.nruntimes = n,
		.framework_ms = NAN,
		.search_algorithm_ms = NAN,
		.validation_ms = NAN,
		.invalidity = inv,
		.correctness = inv == T4_CORRECT ? 1 : 0,
		.measurements = m,
		.nmeasurements = nm,
	};
	t4_add(doc, &r);
	free(runtimes);
	cJSON_Delete(samples);
}

/* Adds what the records say about where they were measured to the document's metadata. */
static void describe(cJSON *doc, const cJSON *record)
{
	cJSON *metadata = cJSON_GetObjectItemCaseSensitive(doc, "metadata");
	const char *kernel = json_string(record, "kernel");
	const char *device = json_string(cJSON_GetObjectItemCaseSensitive(record, "bench"), "device");
	if (kernel && !cJSON_HasObjectItem(metadata, "kernel"))
		json_add_string(metadata, "kernel", kernel);
	if (device && !cJSON_HasObjectItem(metadata, "hardware")) {
		cJSON *hardware = json_object();
		json_add_string(hardware, "hardware_description", device);
		json_add(metadata, "hardware", hardware);
	}
}

struct exporter {
	cJSON *doc;
	struct replay_edits *edits;
	const char *run_dir;
};

static enum stream_action export_record(struct stream *s, cJSON *record, void *ctx)
{
	struct exporter *ex = ctx;
	(void)s;
	const cJSON *build = cJSON_GetObjectItemCaseSensitive(record, "build");
	const char *build_status = json_string(build, "status");
	const char *run = json_string(record, "run") ? json_string(record, "run") : ex->run_dir;
	/* Measured, or refused by the build: a result; anything else (a pick, a registered
	 * candidate, a build not yet benched) is not. */
	int measured = cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(record, "bench"));
	int edited = replay_edited(record, ex->edits);
	if (cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(build, "config")) && build_status &&
	    (measured || strcmp(build_status, "ok") != 0)) {
		describe(ex->doc, record);
		add_result(ex->doc, record, run, edited);
	}
	cJSON_Delete(record);
	return STREAM_TAKEN;
}

int export_t4(struct stream *in, const char *run_dir)
{
	struct exporter ex = {.doc = t4_new(), .edits = replay_edits_new(), .run_dir = run_dir};
	cJSON *doc = ex.doc;
	json_add_string(cJSON_GetObjectItemCaseSensitive(doc, "metadata"), "generator", "kernelgraph " KG_VERSION);
	int status = stream_each(in, export_record, &ex);
	char *text = cJSON_Print(doc);
	if (!text)
		xalloc_die();
	if (status != KG_EXIT_IO && (fputs(text, stdout) < 0 || putchar('\n') == EOF)) {
		log_error("cannot write the output:");
		status = KG_EXIT_IO;
	}
	cJSON_free(text);
	cJSON_Delete(doc);
	replay_edits_free(ex.edits);
	return status;
}
