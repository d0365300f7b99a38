/* worker_device.c: the device the worker holds: opened once, its lock taken per record, its
 * array of check results handed out, and what a CUDA call's failure makes of the answer. */
#include "common.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "clock.h"
#include "fileio.h"
#include "jsonl.h"
#include "log.h"
#include "visible.h"
#include "worker_shared.h"
#include "xalloc.h"

/* ---------------------------------------------------------------- failures */

int check_cuda(struct failure *f, CUresult rc, const char *what)
{
	if (rc == CUDA_SUCCESS)
		return 0;
	if (!f->failed) {
		int fault = rc == CUDA_ERROR_ILLEGAL_ADDRESS || rc == CUDA_ERROR_MISALIGNED_ADDRESS ||
			    rc == CUDA_ERROR_ILLEGAL_INSTRUCTION || rc == CUDA_ERROR_INVALID_PC ||
			    rc == CUDA_ERROR_HARDWARE_STACK_ERROR || rc == CUDA_ERROR_LAUNCH_FAILED ||
			    rc == CUDA_ERROR_ASSERT || rc == CUDA_ERROR_LAUNCH_TIMEOUT;
		f->failed = 1;
		snprintf(f->status, sizeof(f->status), "%s", fault ? "crashed" : "error");
		snprintf(f->what, sizeof(f->what), "%s: %s", what, cuda_error(rc));
	}
	return -1;
}


int fail_with(struct failure *f, const char *status, const char *fmt, ...)
{
	if (!f->failed) {
		va_list ap;
		va_start(ap, fmt);
		f->failed = 1;
		snprintf(f->status, sizeof(f->status), "%s", status);
		vsnprintf(f->what, sizeof(f->what), fmt, ap);
		va_end(ap);
	}
	return -1;
}

/* ---------------------------------------------------------------- the device */

struct worker_device gpu;


/* Tells the parent the GPU is alive, at most every 50 ms. */
void progress(void)
{
	double t = monotonic_ms();
	if (t - gpu.last_progress < 50)
		return;
	gpu.last_progress = t;
	static const char line[] = "{\"progress\":true}\n";
	if (write(gpu.out_fd, line, sizeof(line) - 1) < 0)
		_exit(1); /* the parent is gone */
}

/* The worker's context on its GPU: its stream, the L2 flush buffer, the check results, the
 * timing events and the harness's module. 0, or -1 with why set. */
static int open_context(const struct bench_settings *settings, struct strbuf *why)
{
	struct failure f = {0};
	if (check_cuda(&f, cu.cuDevicePrimaryCtxRetain(&gpu.ctx, gpu.dev), "cuDevicePrimaryCtxRetain") ||
	    check_cuda(&f, cu.cuCtxSetCurrent(gpu.ctx), "cuCtxSetCurrent") ||
	    check_cuda(&f, cu.cuStreamCreate(&gpu.stream, CU_STREAM_NON_BLOCKING), "cuStreamCreate") ||
	    check_cuda(&f, cu.cuMemAlloc(&gpu.flush, gpu.flush_bytes), "cuMemAlloc (L2 flush buffer)") ||
	    check_cuda(&f, cu.cuMemAlloc(&gpu.results, RESULTS * sizeof(struct harness_result)), "cuMemAlloc (results)") ||
	    check_cuda(&f, cu.cuEventCreate(&gpu.mark[0], CU_EVENT_DEFAULT), "cuEventCreate") ||
	    check_cuda(&f, cu.cuEventCreate(&gpu.mark[1], CU_EVENT_DEFAULT), "cuEventCreate")) {
		strbuf_addstr(why, f.what);
		return -1;
	}
	return harness_load(&gpu.harness, settings->cache_dir, why);
}

int open_device(const struct bench_settings *settings, struct strbuf *why)
{
	char shown[256];
	int ordinal = visible_only(settings->device, shown, sizeof(shown)); /* a quicker cuInit */
	if (cuda_open(why)) {
		if (ordinal != settings->device)
			strbuf_addf(why, " (--device %d, shown to the driver alone as CUDA_VISIBLE_DEVICES=%s)",
				    settings->device, shown);
		return -1;
	}
	int count = 0, l2 = 0;
	struct failure f = {0};
	cu.cuDeviceGetCount(&count);
	if (ordinal < 0 || ordinal >= count) {
		strbuf_addf(why, "--device %d: there are %d GPUs (0 to %d)", settings->device, count, count - 1);
		return -1;
	}
	gpu.ordinal = ordinal;
	if (check_cuda(&f, cu.cuDeviceGet(&gpu.dev, ordinal), "cuDeviceGet") ||
	    check_cuda(&f, cu.cuDeviceGetName(gpu.name, sizeof(gpu.name), gpu.dev), "cuDeviceGetName") ||
	    check_cuda(&f, cu.cuDeviceGetPCIBusId(gpu.pci_bus_id, sizeof(gpu.pci_bus_id), gpu.dev), "cuDeviceGetPCIBusId") ||
	    check_cuda(&f, cu.cuDeviceGetAttribute(&l2, CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, gpu.dev), "cuDeviceGetAttribute") ||
	    check_cuda(&f, cu.cuDeviceGetAttribute(&gpu.smem_optin, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN,
						   gpu.dev), "cuDeviceGetAttribute")) {
		strbuf_addstr(why, f.what);
		return -1;
	}
	/* Asked once here, not at each kernel load; a failed query (major unknown) leaves the
	 * maps encoded, as encode_tensor_maps always did. */
	int major = 0;
	CUresult asked = cu.cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, gpu.dev);
	gpu.tensor_maps = asked != CUDA_SUCCESS || major >= 9;
	gpu.l2_bytes = (size_t)l2;
	gpu.flush_bytes = 2 * gpu.l2_bytes;
	gpu.host_results = xcalloc(RESULTS, sizeof(*gpu.host_results));
	gpu.cache_dir = settings->cache_dir;
	gpu.rng = (uint64_t)monotonic_ms() * 1000003u ^ (uint64_t)getpid() << 32;
	/* The context is made under the GPU's lock: kg-tune starts its GPUs' kg-benches while
	 * kg-init times the baseline on the first of them, and no kg-bench's measurement is to
	 * share its GPU with a context being made. A lock not had within --gpu-wait is not a
	 * failure here: each record waits for it again, and says who holds it. */
	struct failure unlocked = {0};
	gpu_lock_take(settings, &gpu.open_wait_ms, &unlocked);
	int rc = open_context(settings, why);
	gpu_lock_release();
	return rc;
}

/* ---------------------------------------------------------------- the GPU's lock */

/* One record (or a run's preparation) at a time on a GPU, whichever kg-bench process asks:
 * the next iteration's kg-bench starts its context while this one measures, and two searches
 * on one GPU never time each other's kernels. A flock on a file named by the GPU's bus id, in
 * the folder gpu_lock_dir picks (/run/kernelgraph for every user of the machine, where make
 * install made it), opened without following links. */
static struct dirlock gpu_lock = {.fd = -1};

/* Takes the lock, telling the parent it is alive while it waits, for at most --gpu-wait; adds
 * the wait to *wait_ms. Returns 0, or -1 with f filled: a record is never measured without
 * the lock, where another search's kernels would be timed with it. */
int gpu_lock_take(const struct bench_settings *cfg, double *wait_ms, struct failure *f)
{
	struct strbuf why;
	strbuf_init(&why);
	char *path = gpu_lock_path(KG_LOCK_DIR, gpu.pci_bus_id, &why);
	if (!path) {
		fail_with(f, "error", "%s", why.buf);
		strbuf_release(&why);
		return -1;
	}
	strbuf_release(&why);
	double t0 = monotonic_ms();
	int rc = filelock_acquire_timed(&gpu_lock, path, cfg->gpu_wait_s * 1e3, progress);
	*wait_ms += monotonic_ms() - t0;
	if (rc != 0 && errno == ETIMEDOUT) {
		char *holder = filelock_holder(path);
		fail_with(f, "error", "the GPU's lock '%s' is held by %s: waited %g s (--gpu-wait)", path,
			  holder ? holder : "another process", cfg->gpu_wait_s);
		free(holder);
	} else if (rc != 0) {
		fail_with(f, "error", "cannot lock the GPU with '%s': %s", path,
			  errno == ELOOP ? "a symbolic link is there" : errno == EINVAL ? "not a regular file" : strerror(errno));
	}
	free(path);
	return rc;
}

void gpu_lock_release(void)
{
	dirlock_release(&gpu_lock);
}

/* ---------------------------------------------------------------- check results */

int results_reset(struct failure *f)
{
	gpu.nresults = 0;
	return check_cuda(f, cu.cuMemsetD8Async(gpu.results, 0, RESULTS * sizeof(struct harness_result), gpu.stream),
			  "cuMemsetD8Async (results)");
}

/* A fresh result; -1 (reported) when a record needs more than the array holds. */
long result_take(struct failure *f)
{
	if (gpu.nresults == RESULTS)
		return fail_with(f, "error", "kg-bench ran out of room for check results (%d)", RESULTS);
	return (long)gpu.nresults++;
}

CUdeviceptr result_ptr(long k)
{
	return gpu.results + (CUdeviceptr)k * sizeof(struct harness_result);
}

/* Waits for the stream and reads every result handed out since the reset. */
int results_read(struct failure *f)
{
	if (check_cuda(f, cu.cuMemcpyDtoHAsync(gpu.host_results, gpu.results, gpu.nresults * sizeof(struct harness_result),
					       gpu.stream), "the kernel") ||
	    check_cuda(f, cu.cuStreamSynchronize(gpu.stream), "the kernel"))
		return -1;
	progress();
	return 0;
}
/* Replaces path with doc; a failure is only a warning, since the record carries the figures. */
void write_json_file(const char *path, const cJSON *doc)
{
	if (json_write_file(path, doc, 1) != 0)
		log_warn("cannot write '%s':", path);
}

/* The device as an engineer describes it (and kg-propose's prompt shows it): what bounds
 * occupancy, shared memory and the caches. */
cJSON *device_json(void)
{
	static const struct {
		const char *key;
		CUdevice_attribute attr;
	} attrs[] = {
		{"multiprocessors", CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT},
		{"shared_memory_per_block", CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK},
		{"shared_memory_per_block_optin", CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN},
		{"shared_memory_per_multiprocessor", CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR},
		{"registers_per_block", CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK},
		{"registers_per_multiprocessor", CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR},
		{"max_threads_per_block", CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK},
		{"max_threads_per_multiprocessor", CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR},
		{"max_blocks_per_multiprocessor", CU_DEVICE_ATTRIBUTE_MAX_BLOCKS_PER_MULTIPROCESSOR},
		{"memory_bus_width_bits", CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH},
	};
	cJSON *d = json_object();
	int major = 0, minor = 0;
	json_add_string(d, "name", gpu.name);
	if (cu.cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, gpu.dev) == CUDA_SUCCESS &&
	    cu.cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, gpu.dev) == CUDA_SUCCESS) {
		char cc[32];
		snprintf(cc, sizeof(cc), "sm_%d%d", major, minor);
		json_add_string(d, "architecture", cc);
	}
	for (size_t i = 0; i < ARRAY_SIZE(attrs); i++) {
		int v;
		if (cu.cuDeviceGetAttribute(&v, attrs[i].attr, gpu.dev) == CUDA_SUCCESS)
			json_add_number(d, attrs[i].key, v);
	}
	json_add_number(d, "l2_cache_bytes", (double)gpu.l2_bytes);
	return d;
}

/* --devices: a JSON line per GPU the driver sees, for kg-tune --gpus all, which checks that
 * the GPUs it pools are of one model. */
int worker_list_devices(void)
{
	struct strbuf why;
	strbuf_init(&why);
	if (cuda_open(&why) != 0) {
		log_error("%s", why.buf);
		strbuf_release(&why);
		return KG_EXIT_ENV;
	}
	strbuf_release(&why);
	int n = 0, status = KG_EXIT_OK;
	cu.cuDeviceGetCount(&n);
	for (int i = 0; i < n && status == KG_EXIT_OK; i++) {
		CUdevice dev;
		char name[256], bus[32];
		int major = 0, minor = 0;
		size_t bytes = 0;
		CUresult rc = cu.cuDeviceGet(&dev, i);
		if (rc == CUDA_SUCCESS)
			rc = cu.cuDeviceGetName(name, sizeof(name), dev);
		if (rc == CUDA_SUCCESS)
			rc = cu.cuDeviceGetPCIBusId(bus, sizeof(bus), dev);
		if (rc == CUDA_SUCCESS)
			rc = cu.cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev);
		if (rc == CUDA_SUCCESS)
			rc = cu.cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev);
		if (rc == CUDA_SUCCESS)
			rc = cu.cuDeviceTotalMem(&bytes, dev);
		if (rc != CUDA_SUCCESS) {
			log_error("device %d: %s", i, cuda_error(rc));
			return KG_EXIT_ENV;
		}
		char capability[24];
		snprintf(capability, sizeof(capability), "%d.%d", major, minor);
		cJSON *line = cJSON_CreateObject();
		if (!line)
			xalloc_die();
		json_add_number(line, "device", i);
		json_add_string(line, "name", name);
		json_add_string(line, "bus_id", bus);
		json_add_string(line, "capability", capability);
		json_add_number(line, "memory_bytes", (double)bytes);
		if (jsonl_write(stdout, line) != 0)
			status = KG_EXIT_IO;
		cJSON_Delete(line);
	}
	return status;
}
