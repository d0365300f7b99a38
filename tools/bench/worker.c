/* worker.c: the worker's request loop: one record at a time, its run readied, its kernel checked,
 * timed and (kg-bench --metrics) profiled, and its answer sent to kg-bench; --calibrate too. Every
 * run's buffers live on the device for the worker's life, filled and checked there by kg-bench's
 * harness, so a candidate costs launches and a few numbers read back, not host work on its data;
 * worker_shared.h says which file owns each part. */
#include "common.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "clock.h"
#include "fileio.h"
#include "jsonl.h"
#include "log.h"
#include "stats.h"
#include "worker_shared.h"
#include "xalloc.h"

/* ---------------------------------------------------------------- one request */

/* RUN/baseline.json: the baseline's build and time, for the records that follow, and the
 * device it was measured on. */
static void keep_baseline(const char *run, const cJSON *build, double median_ms)
{
	cJSON *doc = cJSON_Duplicate(build, 1);
	if (!doc || !cJSON_AddNumberToObject(doc, "median_ms", median_ms))
		xalloc_die();
	json_add(doc, "device", device_json());
	char *path = run_path(run, RUN_BASELINE);
	write_json_file(path, doc);
	free(path);
	cJSON_Delete(doc);
}

/* One record being benched: what bench_record's steps fill in turn, and what record_release
 * gives back whatever the outcome. */
struct record {
	struct wrun *r;
	const cJSON *build;
	const char *state;
	int is_baseline;
	int clock_before;	 /* the SM clock before the record's launches, in MHz; -1 when unknown */
	struct kernel cand;	 /* the record's kernel, until a baseline that passed becomes the run's */
	struct verdict v;
	size_t input_sets;	 /* the input sets the check ran on */
	struct series series[2]; /* the candidate's samples, then the baseline's beside them */
	int cupti_used;		 /* the samples' times are CUPTI's kernel records, not events */
	struct phases ph;
};

static void record_init(struct record *rec, const cJSON *build, int is_baseline, double wait_ms)
{
	memset(rec, 0, sizeof(*rec));
	rec->build = build;
	rec->state = json_string(build, "state") ? json_string(build, "state") : "";
	rec->is_baseline = is_baseline;
	rec->v.passed = 1;
	rec->ph.wait = wait_ms;
}

/* Everything the record holds: its samples, and its kernel's module unless the run took it as
 * its baseline (an incorrect record's too: a worker lives for many). */
static void record_release(struct record *rec)
{
	for (size_t j = 0; j < ARRAY_SIZE(rec->series); j++)
		free_series(&rec->series[j]);
	kernel_release(&rec->cand);
}

/* The run (its buffers, and for a candidate its baseline and reference) and the record's kernel. */
static int record_load(struct record *rec, const char *run_dir, struct failure *f)
{
	double t0 = monotonic_ms();
	if (!(rec->r = find_run(run_dir, f)))
		return -1;
	rec->clock_before = nvml_sm_clock_mhz(gpu.pci_bus_id);
	if (!rec->is_baseline && (load_run_baseline(rec->r, f) || ready_reference(rec->r, &rec->ph.fill, f)))
		return -1;
	rec->ph.setup = monotonic_ms() - t0;
	t0 = monotonic_ms();
	if (load_run_kernel(rec->r, rec->build, &rec->cand, f))
		return -1;
	rec->ph.load = monotonic_ms() - t0;
	return 0;
}

/* Correctness into rec->v: a candidate on fresh input sets (the baseline computes each one's
 * expected outputs), then the spec's own set against the reference; the baseline is the
 * reference, checked only against the spec's ReferenceArguments when it has some. Leaves the
 * spec's own set loaded for the timing. */
static int check_record(struct record *rec, const struct bench_settings *cfg, struct failure *f)
{
	struct wrun *r = rec->r;
	double t0 = monotonic_ms();
	if (rec->is_baseline) {
		rec->input_sets = r->ka.nrefs ? 1 : 0;
		if ((r->ka.nrefs && check_baseline(r, &rec->cand, &rec->v, &rec->ph.fill, f)) ||
		    load_set(r, 0, &rec->ph.fill, f))
			return -1;
	} else {
		rec->input_sets = cfg->input_sets + 1;
		for (size_t k = 0; k <= cfg->input_sets && rec->v.passed; k++) {
			int fresh = k < cfg->input_sets;
			if (check_set(r, &rec->cand, fresh ? check_set_id(rec->state, k) : 0, fresh ? (int)k + 1 : 0, &rec->v,
				      &rec->ph.fill, f))
				return -1;
		}
	}
	rec->ph.check = monotonic_ms() - t0;
	return 0;
}

/* Timing into rec->series: the candidate interleaved with the run's baseline on set 0 (a
 * baseline record alone), the candidate's timed launches verified; rec->v says whether they
 * passed. */
static int time_record(struct record *rec, const struct bench_settings *cfg, struct failure *f)
{
	rec->series[0].kn = &rec->cand;
	rec->series[1].kn = &rec->r->baseline;
	return time_series(rec->r, rec->series, rec->is_baseline ? 1 : 2, cfg, !rec->is_baseline, &rec->cupti_used,
			   &rec->ph, &rec->v, f);
}

/* A baseline record that passed becomes the run's baseline (the one before it unloaded): its
 * build and median in RUN/baseline.json, its outputs on the spec's own inputs the reference. */
static int adopt_baseline(struct record *rec, struct failure *f)
{
	struct wrun *r = rec->r;
	struct summary sm;
	kernel_release(&r->baseline);
	r->baseline = rec->cand;
	rec->cand.module = NULL;
	rec->cand.maps = NULL;
	r->has_baseline = 1;
	free(r->baseline_state);
	r->baseline_state = xstrdup(rec->state);
	r->ref0_ready = 0;
	summarize(rec->cupti_used ? rec->series[0].cupti_ms : rec->series[0].events_ms, rec->series[0].n, &sm);
	keep_baseline(r->run.dir, rec->build, sm.median);
	if (make_reference(r, &rec->ph.fill, f))
		return -1;
	r->ref0_ready = 1;
	return 0;
}

/* The figures of a timed record into bench: its times against the baseline's, bandwidth and
 * clocks; a failed timed check makes it incorrect. */
static void record_figures(const struct record *rec, const struct bench_settings *cfg, cJSON *bench)
{
	if (!rec->v.passed)
		cJSON_ReplaceItemInObjectCaseSensitive(bench, "status", cJSON_CreateString("incorrect"));
	add_figures(rec->r, rec->build, rec->is_baseline, rec->series, rec->cupti_used, cfg, bench);
	add_clocks(bench, rec->clock_before, rec->state);
}

/* Benches one record's build; fills bench (the record's "bench" object), or f when the record
 * cannot be benched. Its hardware metrics are collected when it passes and its speedup is over
 * metrics_above (0: always; NAN: never). */
static void bench_record(const char *run_dir, const cJSON *build, int is_baseline, double metrics_above,
			 const struct bench_settings *cfg, double wait_ms, cJSON *bench, struct failure *f)
{
	struct record rec;
	record_init(&rec, build, is_baseline, wait_ms);
	if (record_load(&rec, run_dir, f) || check_record(&rec, cfg, f))
		goto out;
	json_add_string(bench, "status", rec.v.passed ? "ok" : "incorrect");
	json_add_string(bench, "device", gpu.name);
	/* Which of several alike GPUs: the ordinal as given, and the bus id that does not move. */
	json_add_number(bench, "device_id", cfg->device);
	json_add_string(bench, "pci_bus_id", gpu.pci_bus_id);
	if (rec.v.passed) {
		if (time_record(&rec, cfg, f))
			goto out;
		record_figures(&rec, cfg, bench);
		double t0 = monotonic_ms();
		if (is_baseline && adopt_baseline(&rec, f))
			goto out;
		json_add(bench, "check", verdict_to_json(&rec.v, rec.input_sets));
		keep_samples(rec.r->run.dir, build, bench, rec.series, is_baseline ? 1 : 2, rec.cupti_used);
		rec.ph.write = monotonic_ms() - t0;
		if (rec.v.passed && json_number(bench, "speedup", NAN) > metrics_above)
			add_metrics(rec.r, is_baseline ? &rec.r->baseline : &rec.cand, build, cfg, bench);
	} else {
		json_add(bench, "check", verdict_to_json(&rec.v, rec.input_sets));
	}
	add_phases(bench, &rec.ph);
out:
	record_release(&rec);
}

/* Writes one JSON line to the parent; a parent that is gone ends the worker. */
static void send_line(int fd, cJSON *line)
{
	char *text = cJSON_PrintUnformatted(line);
	if (!text)
		xalloc_die();
	struct strbuf sb;
	strbuf_init(&sb);
	strbuf_addstr(&sb, text);
	strbuf_addch(&sb, '\n');
	cJSON_free(text);
	const char *p = sb.buf;
	size_t left = sb.len;
	while (left > 0) {
		ssize_t n = write(fd, p, left);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			_exit(1);
		p += n;
		left -= (size_t)n;
	}
	strbuf_release(&sb);
}

static void answer(int fd, cJSON *bench)
{
	cJSON *line = json_object();
	if (!cJSON_AddItemToObject(line, "bench", bench))
		xalloc_die();
	send_line(fd, line);
	cJSON_Delete(line);
}

/* With --run, the run's buffers, reference and baseline are made ready while the first
 * candidate compiles. A failure here is not reported: the first record meets it again. */
static void prepare_run(const char *dir)
{
	struct failure f = {0};
	char *path = run_path(dir, RUN_BASELINE);
	int has_baseline = access(path, F_OK) == 0;
	free(path);
	if (!has_baseline)
		return; /* kg-init's baseline record is on its way */
	double fill_ms = 0;
	struct wrun *r = find_run(dir, &f);
	if (r && load_run_baseline(r, &f) == 0)
		ready_reference(r, &fill_ms, &f);
	if (f.failed)
		log_debug("could not prepare %s ahead of its records: %s", dir, f.what);
}

NORETURN void worker_main(int in_fd, int out_fd, const struct bench_settings *cfg)
{
	gpu.out_fd = out_fd;
	struct strbuf why;
	strbuf_init(&why);
	FILE *in = fdopen(in_fd, "r");
	struct jsonl_reader reader;
	jsonl_reader_init(&reader, in, "<requests>");
	int opened = open_device(cfg, &why);
	cJSON *ready = json_object();
	json_add_bool(ready, "ready", opened == 0);
	json_add_string(ready, opened == 0 ? "device" : "error", opened == 0 ? gpu.name : why.buf);
	send_line(out_fd, ready);
	cJSON_Delete(ready);
	if (opened != 0)
		_exit(0);
	trace_open();
	if (cfg->prepare_run) {
		double wait_ms = 0;
		struct failure f = {0};
		/* Without the lock the run is readied by its first record instead. */
		if (gpu_lock_take(cfg, &wait_ms, &f) == 0)
			prepare_run(cfg->prepare_run);
		else
			log_debug("could not prepare %s ahead of its records: %s", cfg->prepare_run, f.what);
		gpu_lock_release();
	}
	cJSON *request;
	while (jsonl_next(&reader, &request) == JSONL_RECORD) {
		cJSON *bench = json_object();
		struct failure f = {0};
		{
			const cJSON *run = cJSON_GetObjectItemCaseSensitive(request, "run");
			const cJSON *build = cJSON_GetObjectItemCaseSensitive(request, "build");
			double wait_ms = gpu.open_wait_ms; /* the first record's includes its worker's */
			char started[40];
			gpu.open_wait_ms = 0;
			if (gpu_lock_take(cfg, &wait_ms, &f) == 0) {
				utc_now(started, sizeof(started), 1);
				double t0 = monotonic_ms();
				bench_record(run->valuestring, build,
					     cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(request, "baseline")),
					     json_number(request, "metrics_above", NAN), cfg, wait_ms, bench, &f);
				json_add_number(bench, "wall_ms", monotonic_ms() - t0);
				json_add_string(bench, "started", started);
				json_add_number(bench, "gpu", cfg->device); /* whose timeline: kg-tune --gpus pools several */
			}
			gpu_lock_release();
		}
		if (f.failed) {
			cJSON_Delete(bench);
			bench = json_object();
			json_add_string(bench, "status", f.status);
			json_add_string(bench, "error", f.what);
			if (gpu.name[0])
				json_add_string(bench, "device", gpu.name);
		}
		answer(out_fd, bench);
		cJSON_Delete(request);
		if (f.failed || gpu.spoiled)
			_exit(0); /* a fresh worker, with a fresh context, takes the next record */
	}
	_exit(0);
}

int worker_calibrate(const struct bench_settings *cfg)
{
	struct strbuf why;
	strbuf_init(&why);
	if (open_device(cfg, &why) != 0) {
		log_error("%s", why.buf);
		strbuf_release(&why);
		return KG_EXIT_ENV;
	}
	strbuf_release(&why);
	struct failure f = {0};
	double wait_ms = 0;
	if (gpu_lock_take(cfg, &wait_ms, &f) != 0) { /* released when the process ends */
		log_error("%s", f.what);
		return KG_EXIT_ENV;
	}
	size_t bytes = (size_t)1 << 30;
	CUdeviceptr a = 0, b = 0;
	CUevent start, stop;
	float ms = 0;
	double best = 0;
	if (check_cuda(&f, cu.cuMemAlloc(&a, bytes), "cuMemAlloc") || check_cuda(&f, cu.cuMemAlloc(&b, bytes), "cuMemAlloc") ||
	    check_cuda(&f, cu.cuEventCreate(&start, CU_EVENT_DEFAULT), "cuEventCreate") ||
	    check_cuda(&f, cu.cuEventCreate(&stop, CU_EVENT_DEFAULT), "cuEventCreate")) {
		log_error("%s", f.what);
		return KG_EXIT_ENV;
	}
	/* The best of 20 copies of 1 GiB: bytes read plus bytes written over the time. */
	for (int k = 0; k < 21; k++) {
		if (check_cuda(&f, cu.cuEventRecord(start, gpu.stream), "cuEventRecord") ||
		    check_cuda(&f, cu.cuMemcpyDtoDAsync(b, a, bytes, gpu.stream), "cuMemcpyDtoDAsync") ||
		    check_cuda(&f, cu.cuEventRecord(stop, gpu.stream), "cuEventRecord") ||
		    check_cuda(&f, cu.cuEventSynchronize(stop), "cuEventSynchronize") ||
		    check_cuda(&f, cu.cuEventElapsedTime(&ms, start, stop), "cuEventElapsedTime")) {
			log_error("%s", f.what);
			return KG_EXIT_ENV;
		}
		double gbps = 2.0 * (double)bytes / (ms / 1e3) / 1e9;
		if (k > 0 && gbps > best) /* the first copy is a warm-up */
			best = gbps;
	}
	cJSON *doc = json_object();
	json_add_string(doc, "device", gpu.name);
	json_add_string(doc, "pci_bus_id", gpu.pci_bus_id);
	json_add_number(doc, "copy_gbps", best);
	if (cfg->cache_dir) {
		char *dir = xasprintf("%s/devices", cfg->cache_dir), *path = xasprintf("%s/%s.json", dir, gpu.pci_bus_id);
		if (dir_create(dir) != 0)
			log_warn("cannot create '%s':", dir);
		write_json_file(path, doc);
		free(dir);
		free(path);
	}
	int status = jsonl_write(stdout, doc) == 0 ? KG_EXIT_OK : KG_EXIT_IO;
	cJSON_Delete(doc);
	return status;
}

