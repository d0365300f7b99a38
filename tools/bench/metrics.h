/* metrics.h: the hardware metrics of one kernel (kg-bench --metrics), collected by CUPTI's
 * range profiler in passes of their own after the kernel was timed, never during timing. */
#ifndef KG_BENCH_METRICS_H
#define KG_BENCH_METRICS_H

#include "common.h"

#include <stddef.h>

#include <cjson/cJSON.h>

#include "gpu.h"

/* The kernel to profile and where it runs. */
struct metrics_target {
	CUcontext ctx;
	CUdevice dev;
	int ordinal;	    /* the CUDA ordinal, which CUPTI calls the device index */
	const char *device; /* the GPU's name, for the record */
	CUfunction function;
	unsigned block[3];
	size_t dynamic_smem; /* bytes of dynamic shared memory per block at launch */
};

/* How the caller replays the kernel: prepare runs before each pass, outside the profiled
 * range (outputs readied, the L2 flushed, the stream waited for); launch makes the one
 * profiled launch and waits for it. Each returns NULL, or the CUDA error that stopped it
 * (after which the caller knows its context is spoiled). */
struct metrics_replay {
	const char *(*prepare)(void *arg);
	const char *(*launch)(void *arg);
	void *arg;
};

/* The "metrics" object of a bench record (tools/bench/README.md, "Hardware metrics"):
 * {"status": "ok" | "unavailable", "why", "source", "device", "cost_ms", "passes", "replay",
 * "values": {...}, "unavailable": {KEY: why}}. A value that could not be collected is absent
 * from "values" and named in "unavailable"; nothing is ever put in its place. The profiler is
 * set up once per process (the first call pays for it in cost_ms); when it cannot be (no
 * profiling API, no permission to read the counters), every call answers "unavailable" with
 * the same why and only the occupancy the driver computes. The caller owns the object. */
cJSON *metrics_collect(const struct metrics_target *t, const struct metrics_replay *replay);

#endif
