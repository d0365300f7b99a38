/* worker_metrics.c: kg-bench --metrics in the worker: a timed kernel's hardware metrics and
 * PC samples, each collected in a replay of its own readied as a timed launch is. */
#include "common.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fileio.h"
#include "hot_lines.h"
#include "jsonl.h"
#include "metrics.h"
#include "pcsample.h"
#include "worker_shared.h"
#include "xalloc.h"

/* The metrics replay: each pass readied and launched as a timed launch is. */
struct metrics_pass {
	const struct wrun *r;
	const struct kernel *kn;
	const struct bench_settings *cfg;
	struct failure f;
};

static const char *metrics_prepare(void *arg)
{
	struct metrics_pass *p = arg;
	progress();
	if (ready_outputs(p->r, SLOT_OUT, &p->f) ||
	    (!p->cfg->hot && check_cuda(&p->f, cu.cuMemsetD8Async(gpu.flush, 0x5a, gpu.flush_bytes, gpu.stream), "L2 flush")) ||
	    check_cuda(&p->f, cu.cuStreamSynchronize(gpu.stream), "the kernel"))
		return p->f.what;
	return NULL;
}

static const char *metrics_launch(void *arg)
{
	struct metrics_pass *p = arg;
	if (launch_into(p->r, p->kn, SLOT_OUT, &p->f) || check_cuda(&p->f, cu.cuStreamSynchronize(gpu.stream), "the kernel"))
		return p->f.what;
	return NULL;
}

/* The PC sampling replay: the kernel loaded again once sampling is on, each launch readied as
 * a metrics pass is, its symbols written into the fresh module. */
struct lines_pass {
	struct metrics_pass base;
	const cJSON *build;
	struct kernel fresh;
};

static const char *lines_load(void *arg)
{
	struct lines_pass *p = arg;
	if (load_run_kernel(p->base.r, p->build, &p->fresh, &p->base.f))
		return p->base.f.what;
	return NULL;
}

static const char *lines_prepare(void *arg)
{
	struct lines_pass *p = arg;
	return metrics_prepare(&p->base);
}

static const char *lines_launch(void *arg)
{
	struct lines_pass *p = arg;
	const struct wrun *r = p->base.r;
	if (write_symbols(r, &p->fresh, &p->base.f) || launch_into(r, &p->fresh, SLOT_OUT, &p->base.f) ||
	    check_cuda(&p->base.f, cu.cuStreamSynchronize(gpu.stream), "the kernel"))
		return p->base.f.what;
	return NULL;
}

static cJSON *lines_unavailable(const char *why)
{
	cJSON *lines = json_object();
	json_add_string(lines, "status", "unavailable");
	json_add_string(lines, "why", why);
	json_add_string(lines, "source", "cupti-pc-sampling");
	return lines;
}

/* The kernel.cu lines the kernel's PC samples fall on (pcsample.h), after its metrics. */
static cJSON *sample_lines(const struct wrun *r, const struct kernel *kn, const cJSON *build,
			   const struct bench_settings *cfg, double median_ms)
{
	if (gpu.spoiled)
		return lines_unavailable("not sampled: the metrics replay ended in a CUDA error");
	const char *cubin = json_string(build, "cubin");
	char *path = xasprintf("%s/%s", r->run.dir, cubin ? cubin : "");
	size_t len = 0;
	char *image = file_read_all(path, &len);
	struct lines_pass pass = {.base = {.r = r, .kn = kn, .cfg = cfg}, .build = build};
	struct pcsample_target t = {.ctx = gpu.ctx, .dev = gpu.dev, .cubin = image, .cubin_size = len,
				    .function = kn->name, .median_ms = median_ms};
	struct pcsample_replay replay = {.load = lines_load, .prepare = lines_prepare, .launch = lines_launch, .arg = &pass};
	cJSON *lines = image ? pcsample_collect(&t, &replay) : lines_unavailable("cannot read the cubin again");
	gpu.spoiled |= pass.base.f.failed;
	kernel_release(&pass.fresh);
	free(image);
	free(path);
	return lines;
}

/* kg-bench --metrics: the hardware metrics of a timed kernel, in a replay of its own on the
 * spec's inputs, into bench.metrics and variants/STATE/metrics.json, and the lines of its PC
 * samples into variants/STATE/lines.json (hot_lines.h's summary in bench.metrics.lines). Whatever
 * happens here the record keeps its status and figures; a CUDA error only ends the worker
 * after it. */
void add_metrics(const struct wrun *r, const struct kernel *kn, const cJSON *build, const struct bench_settings *cfg,
		 cJSON *bench)
{
	struct metrics_pass pass = {.r = r, .kn = kn, .cfg = cfg};
	struct metrics_target t = {.ctx = gpu.ctx, .dev = gpu.dev, .ordinal = gpu.ordinal, .device = gpu.name,
				   .function = kn->function, .dynamic_smem = kn->smem};
	struct metrics_replay replay = {.prepare = metrics_prepare, .launch = metrics_launch, .arg = &pass};
	memcpy(t.block, kn->block, sizeof(t.block));
	cJSON *m = metrics_collect(&t, &replay);
	gpu.spoiled |= pass.f.failed;
	cJSON *lines = sample_lines(r, kn, build, cfg, json_number(bench, "median_ms", NAN));
	const char *dir = json_string(build, "dir");
	json_add(m, "lines", hot_lines_summary(lines));
	if (dir) {
		char *path = xasprintf("%s/%s/%s", r->run.dir, dir, run_variant_file(VARIANT_LINES));
		write_json_file(path, lines);
		free(path);
		path = xasprintf("%s/%s/%s", r->run.dir, dir, run_variant_file(VARIANT_METRICS));
		write_json_file(path, m);
		free(path);
	}
	cJSON_Delete(lines);
	json_add(bench, "metrics", m);
}

