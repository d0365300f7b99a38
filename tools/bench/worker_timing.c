/* worker_timing.c: the timing loop (kernels interleaved, CUPTI's records beside the events,
 * chosen launches verified) and the figures, samples and clocks of a timed record. */
#include "common.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "jsonl.h"
#include "log.h"
#include "mcgs.h"
#include "pyexpr.h"
#include "rng.h"
#include "stats.h"
#include "t1.h"
#include "worker_shared.h"
#include "xalloc.h"

/* ---------------------------------------------------------------- timing */

static struct {
	double *start, *end; /* ns, in the order the kernels ran */
	char **names;
	size_t n, cap;
} trace;

static void CUPTIAPI buffer_requested(uint8_t **buffer, size_t *size, size_t *max_records)
{
	*size = 8 << 20;
	*buffer = aligned_alloc(8, *size);
	*max_records = 0;
}

static void CUPTIAPI buffer_completed(CUcontext ctx, uint32_t stream, uint8_t *buffer, size_t size, size_t valid)
{
	(void)ctx;
	(void)stream;
	(void)size;
	CUpti_Activity *record = NULL;
	while (cupti.cuptiActivityGetNextRecord(buffer, valid, &record) == CUPTI_SUCCESS) {
		if (record->kind != CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL)
			continue;
		const CUpti_ActivityKernel10 *k = (const CUpti_ActivityKernel10 *)(const void *)record;
		/* The harness's own checks run between the timed launches. */
		if (k->name && strncmp(k->name, "kg_harness_", 11) == 0)
			continue;
		if (trace.n == trace.cap) {
			trace.cap = trace.cap ? 2 * trace.cap : 1024;
			trace.start = xreallocarray(trace.start, trace.cap, sizeof(*trace.start));
			trace.end = xreallocarray(trace.end, trace.cap, sizeof(*trace.end));
			trace.names = xreallocarray(trace.names, trace.cap, sizeof(*trace.names));
		}
		trace.start[trace.n] = (double)k->start;
		trace.end[trace.n] = (double)k->end;
		trace.names[trace.n] = xstrdup(k->name ? k->name : "");
		trace.n++;
	}
	free(buffer);
}

static int cupti_ready;

/* Hands CUPTI the buffers its kernel records fill; without CUPTI the samples are CUDA events
 * alone. */
void trace_open(void)
{
	struct strbuf cupti_why;
	strbuf_init(&cupti_why);
	cupti_ready = cupti_open(&cupti_why) == 0 &&
		      cupti.cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed) == CUPTI_SUCCESS;
	if (!cupti_ready)
		log_warn("timing with CUDA events alone: %s", cupti_why.buf);
	strbuf_release(&cupti_why);
}

static void trace_reset(void)
{
	for (size_t k = 0; k < trace.n; k++)
		free(trace.names[k]);
	trace.n = 0;
}

static void series_add(struct series *s, double ms)
{
	if (s->n == s->cap) {
		s->cap = s->cap ? 2 * s->cap : 64;
		s->events_ms = xreallocarray(s->events_ms, s->cap, sizeof(*s->events_ms));
		s->cupti_ms = xreallocarray(s->cupti_ms, s->cap, sizeof(*s->cupti_ms));
	}
	s->events_ms[s->n++] = ms;
}

/* One launch as every timed one is made: outputs readied (poisoned) exactly as before a
 * checked launch, the L2 flushed (cold mode), the kernel between two events. A kernel
 * therefore cannot tell a launch whose outputs are verified from one whose are not.
 * The host waits for the poison before it flushes: tens of megabytes written just before
 * the flush and the launch made the launch's time vary from process to process (the
 * spread of a kernel's median over processes went from 0.3 % to 1.3 % on an H100); written
 * and waited for, they do not. */
static int timed_launch(const struct wrun *r, const struct kernel *kn, const struct bench_settings *cfg, CUevent start,
			CUevent stop, struct failure *f)
{
	if (ready_outputs(r, SLOT_OUT, f) || check_cuda(f, cu.cuStreamSynchronize(gpu.stream), "the kernel") ||
	    (!cfg->hot && check_cuda(f, cu.cuMemsetD8Async(gpu.flush, 0x5a, gpu.flush_bytes, gpu.stream), "L2 flush")) ||
	    check_cuda(f, cu.cuEventRecord(start, gpu.stream), "cuEventRecord") ||
	    launch_into(r, kn, SLOT_OUT, f) ||
	    check_cuda(f, cu.cuEventRecord(stop, gpu.stream), "cuEventRecord"))
		return -1;
	return 0;
}

static int elapsed(CUevent start, CUevent stop, float *ms, struct failure *f)
{
	return check_cuda(f, cu.cuEventSynchronize(stop), "the kernel") ||
	       check_cuda(f, cu.cuEventElapsedTime(ms, start, stop), "cuEventElapsedTime")
		       ? -1 : 0;
}

/* The series launched at position p of a round: the candidate (series[0]) last, so that
 * when the loop stops its last outputs are still there to verify. */
static size_t series_at(size_t p, size_t nseries)
{
	return nseries - 1 - p;
}

/* Assigns CUPTI's kernel records to the samples, which ran in the order the series were
 * interleaved. Returns 0, or -1 when the records do not match the launches one to one (a
 * kernel that launched others, say): the events then stand alone. */
static int attach_cupti(struct series *series, size_t nseries, size_t rounds)
{
	if (trace.n != rounds * nseries)
		return -1;
	for (size_t i = 0; i < rounds; i++)
		for (size_t p = 0; p < nseries; p++) {
			size_t t = i * nseries + p, j = series_at(p, nseries);
			if (strcmp(trace.names[t], series[j].kn->name) != 0)
				return -1;
			series[j].cupti_ms[i] = (trace.end[t] - trace.start[t]) / 1e6;
		}
	return 0;
}

/* A timed launch of the candidate whose outputs are verified: where its checks start, and
 * which sample it was. */
struct verified {
	long first;
	size_t sample;
};

/* Whether the candidate's sample i of a loop that runs at least min rounds is verified:
 * each with probability 1/4, and enough of the first ones that, with the last (always
 * verified), at least three are. */
static int verify_this(size_t i, size_t min, size_t done)
{
	size_t later = min >= i + 2 ? min - i - 2 : 0; /* rounds sure to follow, the last aside */
	return done + later < 2 || rng_next(&gpu.rng) % 4 == 0;
}

static int add_verified(struct verified **checked, size_t *n, size_t sample, const struct wrun *r, struct failure *f)
{
	if ((*n & (*n - 1)) == 0) /* 0, 1, 2, 4, ...: grow by doubling */
		*checked = xreallocarray(*checked, *n ? 2 * *n : 1, sizeof(**checked));
	(*checked)[*n].sample = sample;
	if (enqueue_checks(r, SLOT_REF0, &(*checked)[*n].first, f))
		return -1;
	(*n)++;
	return 0;
}

/* Times the kernels of series[] interleaved (A B A B ...) on set 0 until each median's
 * relative standard error is under the target, or the GPU-time budget is spent. When
 * verify, series[0]'s outputs are checked against the reference after chosen launches. */
int time_series(struct wrun *r, struct series *series, size_t nseries, const struct bench_settings *cfg, int verify,
		int *cupti_used, struct phases *ph, struct verdict *v, struct failure *f)
{
	CUevent start = NULL, stop = NULL;
	struct verified *checked = NULL;
	size_t nchecked = 0, rounds = 0;
	long hashes = -1;
	int rc = -1;
	*cupti_used = 0;
	if (check_cuda(f, cu.cuEventCreate(&start, CU_EVENT_DEFAULT), "cuEventCreate") ||
	    check_cuda(f, cu.cuEventCreate(&stop, CU_EVENT_DEFAULT), "cuEventCreate") || results_reset(f))
		goto done;
	for (size_t j = 0; j < nseries; j++)
		if (write_symbols(r, series[j].kn, f))
			goto done;

	/* Warm-up: the kernels in turn, at least 3 launches of each and 25 ms in all, discarded. */
	double t0 = monotonic_ms();
	for (int n = 0; n < 3 || monotonic_ms() - t0 < 25; n++)
		for (size_t p = 0; p < nseries; p++) {
			float ms;
			if (timed_launch(r, series[series_at(p, nseries)].kn, cfg, start, stop, f) || elapsed(start, stop, &ms, f))
				goto done;
			progress();
		}
	ph->warmup = monotonic_ms() - t0;
	if (cupti_ready) {
		trace_reset();
		cupti.cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
	}
	double spent = 0, wall0 = monotonic_ms();
	for (;;) {
		for (size_t p = 0; p < nseries; p++) {
			size_t j = series_at(p, nseries);
			float ms;
			if (timed_launch(r, series[j].kn, cfg, start, stop, f) ||
			    (verify && j == 0 && verify_this(rounds, cfg->min_samples, nchecked) &&
			     add_verified(&checked, &nchecked, rounds, r, f)) ||
			    elapsed(start, stop, &ms, f))
				goto done;
			series_add(&series[j], ms);
			spent += ms;
			progress();
		}
		rounds++;
		if (rounds < cfg->min_samples)
			continue;
		int quiet = 1;
		for (size_t j = 0; j < nseries; j++) {
			struct summary sm;
			summarize(series[j].events_ms, series[j].n, &sm);
			quiet &= median_rse(&sm) < cfg->noise;
		}
		/* The wall-clock cap bounds flushes and launch gaps that GPU time leaves out; the
		 * results array bounds how many launches can be verified. */
		if (quiet || spent >= cfg->budget_ms || monotonic_ms() - wall0 > 10 * cfg->budget_ms + 1000 ||
		    rounds >= 100000 || gpu.nresults + 2 * (r->ka.n + 2) >= RESULTS)
			break;
	}
	/* The candidate ran last: its last outputs are still there, and always verified. */
	if (verify && (nchecked == 0 || checked[nchecked - 1].sample != rounds - 1) &&
	    add_verified(&checked, &nchecked, rounds - 1, r, f))
		goto done;
	if (verify && enqueue_input_hashes(r, &hashes, f))
		goto done;
	ph->gpu = spent;
	ph->time = monotonic_ms() - wall0;
	if (cupti_ready) {
		check_cuda(f, cu.cuCtxSynchronize(), "cuCtxSynchronize");
		cupti.cuptiActivityFlushAll(1);
		cupti.cuptiActivityDisable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
		*cupti_used = attach_cupti(series, nseries, rounds) == 0;
	}
	if (f->failed || results_read(f))
		goto done;
	/* A changed input is the cause of wrong outputs after it: said first. */
	if (hashes >= 0)
		judge_inputs(r, hashes, 0, " while it was timed", v);
	for (size_t c = 0; c < nchecked && v->passed; c++) {
		if (judge_checks(r, checked[c].first, 0, v, f) < 0)
			goto done;
		if (!v->passed) {
			char detail[sizeof(v->why)];
			snprintf(detail, sizeof(detail), "%s", v->why);
			snprintf(v->why, sizeof(v->why), "timed launch %zu of %zu %s%s", checked[c].sample + 1, rounds,
				 detail[0] ? "failed its check: " : "left outputs that differ from the reference", detail);
		}
	}
	v->timed_checks = nchecked;
	rc = 0;
done:
	free(checked);
	if (start)
		cu.cuEventDestroy(start);
	if (stop)
		cu.cuEventDestroy(stop);
	return rc;
}

/* ---------------------------------------------------------------- a timed record's figures */

static double sum_bytes(const struct kargs *ka)
{
	double bytes = 0;
	for (size_t k = 0; k < ka->n; k++) {
		const struct karg *a = &ka->args[k];
		if (a->memory == KARG_VECTOR)
			bytes += (double)karg_bytes(a) * (a->access == KARG_READ_WRITE ? 2 : 1);
	}
	return bytes;
}

/* A KernelGraph expression (Bytes, Flops) evaluated for the configuration; NAN when absent. */
static double kernelgraph_figure(const struct wrun *r, const cJSON *config, const char *key)
{
	const cJSON *ext = cJSON_GetObjectItemCaseSensitive(r->run.spec->json, "KernelGraph");
	const cJSON *item = cJSON_GetObjectItemCaseSensitive(ext, key);
	if (cJSON_IsNumber(item))
		return item->valuedouble;
	if (!cJSON_IsString(item))
		return NAN;
	struct pyexpr_error err;
	struct pyexpr *e = pyexpr_compile(item->valuestring, r->run.spec->names, r->run.spec->nnames, &err);
	struct pyarena *arena = pyarena_new();
	struct pyval *values = xcalloc(r->run.spec->nnames, sizeof(*values)), v;
	double out = NAN;
	int complete = t1_bind_config(r->run.spec, config, values, NULL) == 0;
	if (e && complete && pyexpr_eval(e, values, arena, &v, &err) == 0)
		out = v.kind == PY_FLOAT ? v.u.f : v.kind == PY_INT ? (double)v.u.i : NAN;
	else
		log_warn("%s/spec.json: KernelGraph.%s: cannot evaluate \"%s\"", r->run.dir, key, item->valuestring);
	free(values);
	pyarena_free(arena);
	pyexpr_free(e);
	return out;
}

/* The copy bandwidth --calibrate measured on this device, in GB/s; NAN when never measured. */
static double calibrated_gbps(const struct bench_settings *cfg)
{
	if (!cfg->cache_dir)
		return NAN;
	char *path = xasprintf("%s/devices/%s.json", cfg->cache_dir, gpu.pci_bus_id);
	cJSON *doc = json_read_file(path);
	const cJSON *bw = cJSON_GetObjectItemCaseSensitive(doc, "copy_gbps");
	const cJSON *name = cJSON_GetObjectItemCaseSensitive(doc, "device");
	double gbps = cJSON_IsNumber(bw) && cJSON_IsString(name) && strcmp(name->valuestring, gpu.name) == 0 ? bw->valuedouble : NAN;
	cJSON_Delete(doc);
	free(path);
	return gbps;
}

static cJSON *number_array(const double *v, size_t n)
{
	cJSON *a = cJSON_CreateDoubleArray(v, (int)n);
	if (!a)
		xalloc_die();
	return a;
}

/* Writes variants/STATE/bench.json: every raw sample and the summary. */
void keep_samples(const char *run, const cJSON *build, const cJSON *bench, const struct series *series,
		  size_t nseries, int cupti_used)
{
	const cJSON *dir = cJSON_GetObjectItemCaseSensitive(build, "dir");
	if (!cJSON_IsString(dir))
		return;
	cJSON *doc = cJSON_Duplicate(bench, 1);
	if (!doc)
		xalloc_die();
	static const char *const names[] = {"candidate_ms", "baseline_ms_samples"};
	for (size_t j = 0; j < nseries; j++) {
		cJSON *raw = json_object();
		if (!cJSON_AddItemToObject(raw, "events_ms", number_array(series[j].events_ms, series[j].n)) ||
		    (cupti_used && !cJSON_AddItemToObject(raw, "cupti_ms", number_array(series[j].cupti_ms, series[j].n))) ||
		    !cJSON_AddItemToObject(doc, names[j], raw))
			xalloc_die();
	}
	char *path = xasprintf("%s/%s/%s", run, dir->valuestring, run_variant_file(VARIANT_BENCH));
	write_json_file(path, doc);
	free(path);
	cJSON_Delete(doc);
}

void free_series(struct series *s)
{
	free(s->events_ms);
	free(s->cupti_ms);
}

void add_phases(cJSON *bench, const struct phases *ph)
{
	json_add_number(bench, "wait_ms", ph->wait);
	json_add_number(bench, "setup_ms", ph->setup);
	json_add_number(bench, "load_ms", ph->load);
	json_add_number(bench, "fill_ms", ph->fill);
	json_add_number(bench, "check_ms", ph->check);
	json_add_number(bench, "warmup_ms", ph->warmup);
	json_add_number(bench, "time_ms", ph->time);
	json_add_number(bench, "gpu_ms", ph->gpu);
	json_add_number(bench, "write_ms", ph->write);
}

/* The figures of a timed record: timer, summary, speedup against the baseline, roofline. */
void add_figures(const struct wrun *r, const cJSON *build, int is_baseline, const struct series *series,
		 int cupti_used, const struct bench_settings *cfg, cJSON *bench)
{
	const double *primary[2];
	struct summary sm[2];
	size_t nseries = is_baseline ? 1 : 2;
	for (size_t j = 0; j < nseries; j++) {
		primary[j] = cupti_used ? series[j].cupti_ms : series[j].events_ms;
		summarize(primary[j], series[j].n, &sm[j]);
	}
	json_add_string(bench, "timer", cupti_used ? "cupti" : "events");
	json_add_string(bench, "mode", cfg->hot ? "hot" : "cold");
	summary_to_json(&sm[0], bench);
	struct summary ev;
	summarize(series[0].events_ms, series[0].n, &ev);
	json_add_number(bench, "events_median_ms", ev.median);
	if (is_baseline) {
		json_add_number(bench, "baseline_ms", sm[0].median);
		json_add_number(bench, "speedup", 1);
	} else {
		double ci[2];
		/* docs/search.md's bootstrap (vector T7d): kg-select's incumbent rule reads its interval. */
		mcgs_bootstrap_median_ratio(primary[1], series[1].n, primary[0], series[0].n, 2000, 42, ci);
		json_add_number(bench, "baseline_ms", sm[1].median);
		json_add_number(bench, "speedup", sm[1].median / sm[0].median);
		if (!cJSON_AddItemToObject(bench, "speedup_ci", number_array(ci, 2)))
			xalloc_die();
	}
	const cJSON *config = cJSON_GetObjectItemCaseSensitive(build, "config");
	double bytes = kernelgraph_figure(r, config, "Bytes"), flops = kernelgraph_figure(r, config, "Flops");
	if (isnan(bytes))
		bytes = sum_bytes(&r->ka);
	double seconds = sm[0].median / 1e3, peak = calibrated_gbps(cfg);
	json_add_number(bench, "bytes", bytes);
	json_add_number(bench, "gbps", bytes / seconds / 1e9);
	if (!isnan(peak))
		json_add_number(bench, "pct_peak_bw", 100 * bytes / seconds / 1e9 / peak);
	if (!isnan(flops)) {
		json_add_number(bench, "flops", flops);
		json_add_number(bench, "tflops", flops / seconds / 1e12);
	}
}

void add_clocks(cJSON *bench, int before, const char *state)
{
	int after = nvml_sm_clock_mhz(gpu.pci_bus_id);
	if (before <= 0 || after <= 0)
		return;
	double clocks[2] = {before, after};
	if (!cJSON_AddItemToObject(bench, "sm_clock_mhz", number_array(clocks, 2)))
		xalloc_die();
	if (after < 0.9 * before) {
		json_add_bool(bench, "throttled", 1);
		log_warn("%s: the SM clock fell from %d to %d MHz while timing: the GPU throttled", state, before, after);
	}
}

