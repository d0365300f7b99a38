/* pcsample.h: the kernel.cu lines one kernel spends its time on (kg-bench --metrics), from
 * CUPTI's PC sampling in launches of their own after the kernel was timed and profiled. */
#ifndef KG_BENCH_PCSAMPLE_H
#define KG_BENCH_PCSAMPLE_H

#include "common.h"

#include <stddef.h>

#include <cjson/cJSON.h>

#include "gpu.h"

/* The kernel to sample: its cubin (compiled with -lineinfo from kernel.cu) and its function. */
struct pcsample_target {
	CUcontext ctx;
	CUdevice dev;
	const void *cubin;
	size_t cubin_size;
	const char *function;
	double median_ms; /* its timed median, for the sampling period */
};

/* How the caller replays the kernel. load runs once, after sampling is enabled: it loads the
 * cubin again, the function to launch (as NVIDIA's samples do, the module loaded while
 * CUPTI samples; one loaded before was never tried). prepare runs before each sampled launch, outside the sampled range; launch makes
 * the one launch and waits for it. Each returns NULL, or the CUDA error that stopped it. */
struct pcsample_replay {
	const char *(*load)(void *arg);
	const char *(*prepare)(void *arg);
	const char *(*launch)(void *arg);
	void *arg;
};

/* The lines.json object (tools/bench/README.md, "Source lines"): {"status": "ok" |
 * "unavailable", "why", "source": "cupti-pc-sampling", "sampling_period_cycles", "launches",
 * "samples", "dropped", "unmapped", "cost_ms", "lines": [{"line", "samples", "share_pct",
 * "stalls": {REASON: samples}}] by line}. The caller owns it. */
cJSON *pcsample_collect(const struct pcsample_target *t, const struct pcsample_replay *replay);

#endif
