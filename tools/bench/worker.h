/* worker.h: the process that owns the GPU. kg-bench forks it before touching CUDA, sends it
 * one request per record and replaces it whenever a kernel faults or hangs. */
#ifndef KG_BENCH_WORKER_H
#define KG_BENCH_WORKER_H

#include "common.h"

#include <stddef.h>

/* How a candidate is measured; the same for every request of a kg-bench process. */
struct bench_settings {
	int device;	       /* --device: CUDA ordinal */
	int hot;	       /* --hot: no L2 flush before each sample */
	double budget_ms;      /* --budget: GPU time for one record's samples */
	size_t min_samples;    /* --min-samples */
	double noise;	       /* --noise: target relative standard error of the median */
	size_t input_sets;     /* --input-sets: fresh random input sets checked per candidate */
	const char *cache_dir; /* where --calibrate's figures and the harness are kept ($XDG_CACHE_HOME/kernelgraph) */
	const char *prepare_run; /* --run: the run readied before the first record */
	double gpu_wait_s;	 /* --gpu-wait: the longest wait for the GPU's lock, then an error record */
};

/* The worker's side: reads requests on in_fd and answers on out_fd until in_fd closes.
 * A request is one JSON line {"run": DIR, "build": {...}, "baseline": bool}; the answer is
 * any number of {"progress": true} lines (each proves the GPU is not hung), then one line
 * {"bench": {...}}. After a CUDA error the worker answers and exits: its context cannot be
 * trusted again. Never returns. */
NORETURN void worker_main(int in_fd, int out_fd, const struct bench_settings *settings);

/* Measures the device-to-device copy bandwidth of the worker's GPU (bytes read plus bytes
 * written, per second) and writes {"device", "copy_gbps"} to stdout as one JSON line.
 * Returns an exit status. */
int worker_calibrate(const struct bench_settings *settings);

/* kg-bench --devices: a JSON line on stdout per GPU the driver sees (device, name, bus_id,
 * capability, memory_bytes), for kg-tune --gpus all, which pools only GPUs of one model.
 * Returns the exit status: 3 without a driver or a GPU, said on stderr. */
int worker_list_devices(void);

#endif
