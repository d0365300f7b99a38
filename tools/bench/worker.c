/* worker.c: runs, checks and times kernels through the CUDA driver. Every run's buffers live
 * on the device for the worker's life, filled and checked there by kg-bench's harness, so a
 * candidate costs launches and a few numbers read back, not host work on its data. */
#include "common.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "fileio.h"
#include "gpu.h"
#include "harness.h"
#include "hot_lines.h"
#include "jsonl.h"
#include "kargs.h"
#include "log.h"
#include "mcgs.h"
#include "metrics.h"
#include "pcsample.h"
#include "pyexpr_cuda.h"
#include "rng.h"
#include "run.h"
#include "stats.h"
#include "t1.h"
#include "worker.h"
#include "xalloc.h"

/* What RUN/reference/ was made from: its files are outputs on the spec's own inputs, which
 * only this fill scheme reproduces (a reference of another makes every candidate fail). */
#define REFERENCE_FILLS "philox4x32-10/1"

/* ---------------------------------------------------------------- failures */

/* A CUDA call failed: the answer is a crashed or error record, and the worker ends. */
struct failure {
	int failed;
	char status[16];  /* "crashed" (the kernel faulted) or "error" (it could not run) */
	char what[1024];
};

static int check_cuda(struct failure *f, CUresult rc, const char *what)
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

static int fail_with(struct failure *f, const char *status, const char *fmt, ...) PRINTF_LIKE(3, 4);

static int fail_with(struct failure *f, const char *status, const char *fmt, ...)
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

/* Results of the harness's checks: a device array of struct harness_result, handed out in
 * order between two reads and zeroed before reuse. */
enum { RESULTS = 16384 };

static struct {
	CUdevice dev;
	CUcontext ctx;
	CUstream stream;
	char name[256];
	char pci_bus_id[64];
	size_t l2_bytes;
	int smem_optin;		/* the most shared memory a block may opt in to */
	int tensor_maps;	/* compute capability 9.0 or later, or unknown: tensor maps are encoded */
	CUdeviceptr flush;	/* twice the L2, written before each cold sample */
	size_t flush_bytes;
	struct harness harness;
	CUdeviceptr results;	/* RESULTS harness_results */
	struct harness_result *host_results;
	size_t nresults;	/* handed out since the last results_reset */
	CUevent mark[2];	/* around fills, for their GPU time */
	int out_fd;
	double last_progress;
	uint64_t rng;		/* which timed launches are verified: nothing a kernel can see */
	const char *cache_dir;	/* where compiled device code is kept */
	int spoiled;		/* a CUDA error the answer does not report (the metrics replay): end after it */
} gpu;

/* Tells the parent the GPU is alive, at most every 50 ms. */
static void progress(void)
{
	double t = monotonic_ms();
	if (t - gpu.last_progress < 50)
		return;
	gpu.last_progress = t;
	static const char line[] = "{\"progress\":true}\n";
	if (write(gpu.out_fd, line, sizeof(line) - 1) < 0)
		_exit(1); /* the parent is gone */
}

static int open_device(const struct bench_settings *settings, struct strbuf *why)
{
	if (cuda_open(why))
		return -1;
	int count = 0, l2 = 0;
	struct failure f = {0};
	cu.cuDeviceGetCount(&count);
	if (settings->device < 0 || settings->device >= count) {
		strbuf_addf(why, "--device %d: there are %d GPUs (0 to %d)", settings->device, count, count - 1);
		return -1;
	}
	if (check_cuda(&f, cu.cuDeviceGet(&gpu.dev, settings->device), "cuDeviceGet") ||
	    check_cuda(&f, cu.cuDevicePrimaryCtxRetain(&gpu.ctx, gpu.dev), "cuDevicePrimaryCtxRetain") ||
	    check_cuda(&f, cu.cuCtxSetCurrent(gpu.ctx), "cuCtxSetCurrent") ||
	    check_cuda(&f, cu.cuStreamCreate(&gpu.stream, CU_STREAM_NON_BLOCKING), "cuStreamCreate") ||
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
	if (check_cuda(&f, cu.cuMemAlloc(&gpu.flush, gpu.flush_bytes), "cuMemAlloc (L2 flush buffer)") ||
	    check_cuda(&f, cu.cuMemAlloc(&gpu.results, RESULTS * sizeof(struct harness_result)), "cuMemAlloc (results)") ||
	    check_cuda(&f, cu.cuEventCreate(&gpu.mark[0], CU_EVENT_DEFAULT), "cuEventCreate") ||
	    check_cuda(&f, cu.cuEventCreate(&gpu.mark[1], CU_EVENT_DEFAULT), "cuEventCreate")) {
		strbuf_addstr(why, f.what);
		return -1;
	}
	gpu.host_results = xcalloc(RESULTS, sizeof(*gpu.host_results));
	gpu.cache_dir = settings->cache_dir;
	gpu.rng = (uint64_t)monotonic_ms() * 1000003u ^ (uint64_t)getpid() << 32;
	return harness_load(&gpu.harness, settings->cache_dir, why);
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
static int gpu_lock_take(const struct bench_settings *cfg, double *wait_ms, struct failure *f)
{
	struct strbuf why;
	strbuf_init(&why);
	char *dir = gpu_lock_dir(KG_LOCK_DIR, &why);
	if (!dir) {
		fail_with(f, "error", "%s", why.buf);
		strbuf_release(&why);
		return -1;
	}
	strbuf_release(&why);
	char *path = xasprintf("%s/gpu-%s.lock", dir, gpu.pci_bus_id);
	free(dir);
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

static void gpu_lock_release(void)
{
	dirlock_release(&gpu_lock);
}

/* ---------------------------------------------------------------- check results */

static int results_reset(struct failure *f)
{
	gpu.nresults = 0;
	return check_cuda(f, cu.cuMemsetD8Async(gpu.results, 0, RESULTS * sizeof(struct harness_result), gpu.stream),
			  "cuMemsetD8Async (results)");
}

/* A fresh result; -1 (reported) when a record needs more than the array holds. */
static long result_take(struct failure *f)
{
	if (gpu.nresults == RESULTS)
		return fail_with(f, "error", "kg-bench ran out of room for check results (%d)", RESULTS);
	return (long)gpu.nresults++;
}

static CUdeviceptr result_ptr(long k)
{
	return gpu.results + (CUdeviceptr)k * sizeof(struct harness_result);
}

/* Waits for the stream and reads every result handed out since the reset. */
static int results_read(struct failure *f)
{
	if (check_cuda(f, cu.cuMemcpyDtoHAsync(gpu.host_results, gpu.results, gpu.nresults * sizeof(struct harness_result),
					       gpu.stream), "the kernel") ||
	    check_cuda(f, cu.cuStreamSynchronize(gpu.stream), "the kernel"))
		return -1;
	progress();
	return 0;
}

static double result_double(uint64_t bits)
{
	double d;
	memcpy(&d, &bits, sizeof(d));
	return d;
}

/* ---------------------------------------------------------------- kernels */

struct kernel {
	CUmodule module;
	CUfunction function;
	unsigned grid[3], block[3];
	size_t smem; /* dynamic shared memory: the spec's fixed bytes plus the build's shared_bytes */
	char name[512];
	CUtensorMap *maps; /* KernelGraph.TensorMaps for the build's configuration (64-byte aligned),
			      passed after the arguments */
	size_t nmaps;
};

/* Unloads the kernel's module and frees its tensor maps. */
static void kernel_release(struct kernel *k)
{
	if (k->module)
		cu.cuModuleUnload(k->module);
	free(k->maps);
	k->module = NULL;
	k->maps = NULL;
	k->nmaps = 0;
}

static int read_triple(const cJSON *obj, const char *key, unsigned out[3])
{
	const cJSON *a = cJSON_GetObjectItemCaseSensitive(obj, key);
	if (cJSON_GetArraySize(a) != 3)
		return -1;
	for (int d = 0; d < 3; d++) {
		const cJSON *x = cJSON_GetArrayItem(a, d);
		if (!cJSON_IsNumber(x) || x->valuedouble < 1)
			return -1;
		out[d] = (unsigned)x->valuedouble;
	}
	return 0;
}

/* Raises the function's dynamic shared memory limit when its static and dynamic parts
 * together pass the 48 KB every kernel may use without asking. */
static int allow_shared_memory(const struct kernel *k, struct failure *f)
{
	int static_bytes = 0;
	if (check_cuda(f, cu.cuFuncGetAttribute(&static_bytes, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, k->function),
		       "cuFuncGetAttribute (shared memory)"))
		return -1;
	size_t total = (size_t)static_bytes + k->smem;
	if (total <= 48 * 1024)
		return 0;
	if (total > (size_t)gpu.smem_optin)
		return fail_with(f, "error",
				 "%s needs %zu bytes of shared memory per block (%d static + %zu dynamic); %s allows "
				 "at most %d", k->name, total, static_bytes, k->smem, gpu.name, gpu.smem_optin);
	return check_cuda(f, cu.cuFuncSetAttribute(k->function, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, (int)k->smem),
			  "cuFuncSetAttribute (dynamic shared memory)");
}

/* Loads the cubin a build object names (relative to run) and its kernel. */
static int load_kernel(const char *run, const cJSON *build, size_t dynamic_smem, struct kernel *k, struct failure *f)
{
	const cJSON *cubin = cJSON_GetObjectItemCaseSensitive(build, "cubin");
	const cJSON *function = cJSON_GetObjectItemCaseSensitive(build, "function");
	memset(k, 0, sizeof(*k));
	const cJSON *shared = cJSON_GetObjectItemCaseSensitive(build, "shared_bytes");
	if (!cJSON_IsString(cubin) || !cJSON_IsString(function) || read_triple(build, "grid", k->grid) ||
	    read_triple(build, "block", k->block))
		return fail_with(f, "error", "build: needs cubin, function, grid and block (from kg-build)");
	if (shared && (!cJSON_IsNumber(shared) || shared->valuedouble < 0))
		return fail_with(f, "error", "build.shared_bytes: must be a non-negative number of bytes");
	k->smem = dynamic_smem + (shared ? (size_t)shared->valuedouble : 0);
	snprintf(k->name, sizeof(k->name), "%s", function->valuestring);
	char *path = xasprintf("%s/%s", run, cubin->valuestring);
	size_t len;
	char *image = file_read_all(path, &len);
	int rc = 0;
	if (!image)
		rc = fail_with(f, "error", "cannot read '%s': %s", path, strerror(errno));
	else if (check_cuda(f, cu.cuModuleLoadData(&k->module, image), "cuModuleLoadData") ||
		 check_cuda(f, cu.cuModuleGetFunction(&k->function, k->module, k->name), "cuModuleGetFunction") ||
		 allow_shared_memory(k, f))
		rc = -1;
	free(image);
	free(path);
	return rc;
}

/* ---------------------------------------------------------------- a run's buffers */

/* One buffer of the run's arena. */
struct slot {
	size_t offset, bytes; /* bytes 0: no buffer */
};

/* The device side of one argument (or of one ReferenceArguments entry, which fills its
 * target's ref slot). */
struct warg {
	const struct karg *a;
	struct slot in;	      /* inputs, ReadWrite initial values, Symbols: the data of the loaded set */
	struct slot out;      /* outputs: what the kernel being run writes */
	struct slot ref;      /* outputs: the expected values on the loaded set, masked */
	struct slot ref0;     /* outputs: the reference on the spec's own inputs, masked */
	struct slot pristine; /* data the fill copies: BinaryRaw files, Generators run on the host */
	void *scalar;	      /* Scalars: the value passed to the kernel, on the host */
	int gen_translated;   /* a Generator whose expression the device evaluates (pyexpr_cuda.h) */
	CUfunction gen;	      /* its fill kernel */
	long gen_result;      /* where its fill reports the first element it failed on; -1 */
	int hashed;	      /* a read-only Vector: hashed after each fill and after each check */
	uint64_t hash;	      /* its hash right after the last fill */
};

/* A guard between two buffers: where it is, and the buffers it lies between, for messages. */
struct guard_info {
	size_t offset, bytes;
	const char *prev, *prev_kind; /* the argument whose buffer it follows; NULL before the first */
	const char *next, *next_kind; /* the one whose buffer follows it; NULL after the last */
};

struct wrun {
	struct run run;		/* the directory, its spec and baseline.json */
	struct kargs ka;
	struct warg *args;	/* ka.n */
	struct warg *refs;	/* ka.nrefs: ReferenceArguments, filled into their target's ref */
	CUdeviceptr arena;
	size_t arena_bytes;
	struct guard_info *guards;
	size_t nguards;
	uint64_t guard_words;	/* the largest guard's 8-byte words */
	CUdeviceptr guard_table;
	uint64_t guard_salt, mask_key; /* drawn per worker: no kernel can know them */
	CUmodule gen_module;	/* the run's Generators, when any could be translated */
	struct kernel baseline;
	int has_baseline;
	char *baseline_state;	/* the baseline build's state, which RUN/reference/ must match */
	int ref0_ready;
	struct wrun *next;
};

static struct wrun *runs;

enum { ALIGN = 256 };

static size_t guard_bytes_for(size_t bytes)
{
	/* A tile that runs past a matrix's end writes up to a few rows of it: scale with the
	 * buffer, from 64 KiB to 16 MiB. */
	size_t g = bytes / 8;
	g = g < 65536 ? 65536 : g > (16u << 20) ? (16u << 20) : g;
	return (g + ALIGN - 1) / ALIGN * ALIGN;
}

/* Places a buffer of bytes in the arena being laid out, and the guard right after it (from
 * the next 8-byte boundary up to where the next buffer may start). */
static void place(struct wrun *r, size_t *end, struct slot *s, size_t bytes, const char *name, const char *kind)
{
	s->offset = *end;
	s->bytes = bytes;
	size_t guard = s->offset + (bytes + 7) / 8 * 8;
	size_t next = (guard + guard_bytes_for(bytes) + ALIGN - 1) / ALIGN * ALIGN;
	r->guards[r->nguards - 1].next = name;
	r->guards[r->nguards - 1].next_kind = kind;
	r->guards = xreallocarray(r->guards, r->nguards + 1, sizeof(*r->guards));
	r->guards[r->nguards++] = (struct guard_info){.offset = guard, .bytes = next - guard, .prev = name, .prev_kind = kind};
	*end = next;
}

static CUdeviceptr slot_ptr(const struct wrun *r, const struct slot *s)
{
	return r->arena + s->offset;
}

/* Which of an output's buffers a launch writes or a check reads. */
enum which_slot { SLOT_OUT, SLOT_REF, SLOT_REF0 };

static const struct slot *slot_of(const struct warg *w, enum which_slot which)
{
	return which == SLOT_OUT ? &w->out : which == SLOT_REF ? &w->ref : &w->ref0;
}

static int is_vector_output(const struct karg *a)
{
	return a->memory == KARG_VECTOR && karg_is_output(a);
}

/* A Generator the device can make: its expression translates (pyexpr_cuda.h). */
static int is_device_generator(const struct karg *a)
{
	return a->fill == KARG_FILL_GENERATOR && a->base != KARG_CUSTOM && a->memory != KARG_LOCAL;
}

/* Data a fill copies rather than makes: a file, or a Generator evaluated on the host
 * (once, when the device cannot evaluate it). */
static int fill_is_copied(const struct warg *w)
{
	return w->a->fill == KARG_FILL_BINARY || (is_device_generator(w->a) && !w->gen_translated);
}

/* Lays the run's buffers out in one allocation, every one between guards:
 * guard | in | guard | out | guard | ref | guard | ref0 | guard | ... */
static int layout(struct wrun *r, struct failure *f)
{
	size_t end = guard_bytes_for(0);
	r->guards = xcalloc(1, sizeof(*r->guards));
	r->guards[0] = (struct guard_info){.offset = 0, .bytes = end};
	r->nguards = 1;
	for (size_t k = 0; k < r->ka.n; k++) {
		struct warg *w = &r->args[k];
		const struct karg *a = w->a;
		size_t bytes = karg_bytes(a);
		if (a->memory == KARG_SCALAR) {
			w->scalar = xcalloc(1, bytes + 8);
			continue;
		}
		if (a->memory == KARG_LOCAL)
			continue;
		/* A WriteOnly output has no data of its own: it is poisoned before each launch. */
		if (!(is_vector_output(a) && a->access == KARG_WRITE))
			place(r, &end, &w->in, bytes, a->name, "input");
		w->hashed = a->memory == KARG_VECTOR && a->access == KARG_READ;
		if (is_vector_output(a)) {
			place(r, &end, &w->out, bytes, a->name, "output");
			place(r, &end, &w->ref, bytes, a->name, "reference");
			place(r, &end, &w->ref0, bytes, a->name, "reference");
		}
		if (fill_is_copied(w))
			place(r, &end, &w->pristine, bytes, a->name, "data");
	}
	for (size_t j = 0; j < r->ka.nrefs; j++) {
		struct warg *w = &r->refs[j];
		if (fill_is_copied(w))
			place(r, &end, &w->pristine, karg_bytes(w->a), w->a->name, "data");
	}
	r->arena_bytes = end;
	r->guard_words = 0;
	struct harness_guard *table = xcalloc(r->nguards, sizeof(*table));
	for (size_t g = 0; g < r->nguards; g++) {
		table[g] = (struct harness_guard){r->guards[g].offset, r->guards[g].bytes / 8};
		if (table[g].words > r->guard_words)
			r->guard_words = table[g].words;
	}
	int rc = check_cuda(f, cu.cuMemAlloc(&r->arena, r->arena_bytes), "cuMemAlloc (the run's buffers)") ||
		 check_cuda(f, cu.cuMemAlloc(&r->guard_table, r->nguards * sizeof(*table)), "cuMemAlloc (guards)") ||
		 check_cuda(f, cu.cuMemcpyHtoD(r->guard_table, table, r->nguards * sizeof(*table)), "cuMemcpyHtoD (guards)")
		 ? -1 : 0;
	free(table);
	return rc;
}

/* Writes the guards' pattern (at setup, and after a kernel damaged them). */
static int guards_write(const struct wrun *r, struct failure *f)
{
	return check_cuda(f, harness_guard(&gpu.harness, gpu.stream, r->arena, r->guard_table, (unsigned)r->nguards,
					   r->guard_words, r->guard_salt, 0, 0), "the harness (guards)");
}

/* Copies what fills copy (BinaryRaw files; Generators made on the host) to the device. */
static int upload_pristine(struct wrun *r, struct warg *w, struct failure *f)
{
	if (!w->pristine.bytes)
		return 0;
	void *host = xmalloc(w->pristine.bytes + 1);
	struct strbuf why;
	strbuf_init(&why);
	int rc = karg_fill(w->a, 0, host, &why) ? fail_with(f, "error", "%s: %s", r->run.spec->path, why.buf)
		 : check_cuda(f, cu.cuMemcpyHtoD(slot_ptr(r, &w->pristine), host, w->pristine.bytes), "cuMemcpyHtoD (data)");
	strbuf_release(&why);
	free(host);
	return rc;
}

/* The device function and fill kernel of Generator w (number k), appended to program;
 * whether the expression could be translated. */
static int translate_generator(const struct wrun *r, struct warg *w, size_t k, struct strbuf *program)
{
	const struct karg *a = w->a;
	struct pyval globals[2] = {pyval_int(0), *a->problem_size};
	struct pyexpr_error err;
	char name[64];
	snprintf(name, sizeof(name), "kg_generator_%zu", k);
	if (pyexpr_cuda_function(a->generator, name, 0, globals, program, &err) != 0) {
		log_info("%s: %s.DataSource: made on the host once, copied on the GPU after: column %zu: %s", r->run.spec->path,
			 a->field, pyexpr_error_column(pyexpr_source(a->generator), &err), err.message);
		return 0;
	}
	strbuf_addf(program,
		    "extern \"C\" __global__ void kg_harness_gen_%zu(unsigned char *dst, unsigned long long n, int base,\n"
		    "\t\tint lane_bytes, unsigned long long *fail)\n"
		    "{\n"
		    "\tfor (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < n;\n"
		    "\t     i += (unsigned long long)gridDim.x * blockDim.x) {\n"
		    "\t\tint failed = 0;\n"
		    "\t\tdouble v = %s((long long)i, &failed);\n"
		    "\t\tif (failed)\n"
		    "\t\t\tatomicMax(fail, ~i);\n"
		    "\t\telse\n"
		    "\t\t\tkarg_elem_store(base, dst + i * lane_bytes, v);\n"
		    "\t}\n"
		    "}\n",
		    k, name);
	w->gen_translated = 1;
	return 1;
}

/* Translates the run's Generators (arguments, then ReferenceArguments) into one program
 * for the device; those it cannot are made on the host. Returns the program, or NULL when
 * there is nothing to compile. */
static char *generator_program(struct wrun *r)
{
	struct strbuf program;
	strbuf_init(&program);
	strbuf_addstr(&program, kg_karg_elem_source);
	strbuf_addstr(&program, pyexpr_cuda_prelude());
	size_t translated = 0;
	for (size_t j = 0; j < r->ka.n + r->ka.nrefs; j++) {
		struct warg *w = j < r->ka.n ? &r->args[j] : &r->refs[j - r->ka.n];
		if (is_device_generator(w->a))
			translated += (size_t)translate_generator(r, w, j, &program);
	}
	if (!translated) {
		strbuf_release(&program);
		return NULL;
	}
	return strbuf_detach(&program);
}

/* Compiles and loads the run's translated Generators. */
static int load_generators(struct wrun *r, const char *program, struct failure *f)
{
	struct strbuf why;
	strbuf_init(&why);
	int rc = 0;
	if (harness_module(program, gpu.cache_dir, &r->gen_module, &why) != 0) {
		rc = fail_with(f, "error", "%s: the Generators made on the GPU: %s", r->run.spec->path, why.buf);
	} else {
		for (size_t j = 0; rc == 0 && j < r->ka.n + r->ka.nrefs; j++) {
			struct warg *w = j < r->ka.n ? &r->args[j] : &r->refs[j - r->ka.n];
			char name[64];
			snprintf(name, sizeof(name), "kg_harness_gen_%zu", j);
			if (w->gen_translated)
				rc = check_cuda(f, cu.cuModuleGetFunction(&w->gen, r->gen_module, name), "cuModuleGetFunction");
		}
	}
	strbuf_release(&why);
	return rc;
}

/* After the fills' results are read: a Generator that failed on the device is reported as
 * the host says it (the same expression, evaluated at the first element that failed). */
static int judge_generators(struct wrun *r, struct failure *f)
{
	for (size_t j = 0; j < r->ka.n + r->ka.nrefs; j++) {
		struct warg *w = j < r->ka.n ? &r->args[j] : &r->refs[j - r->ka.n];
		if (w->gen_result < 0)
			continue;
		uint64_t inv = gpu.host_results[w->gen_result].first_bad_inv;
		w->gen_result = -1;
		if (!inv)
			continue;
		const struct karg *a = w->a;
		struct pyval globals[2] = {pyval_int((int64_t)~inv), *a->problem_size}, v;
		struct pyexpr_error err;
		struct pyarena *arena = pyarena_new();
		if (pyexpr_eval(a->generator, globals, arena, &v, &err) != 0)
			fail_with(f, "error", "%s: %s.DataSource: column %zu: %s in \"%s\" (with i=%llu)", r->run.spec->path,
				  a->field, pyexpr_error_column(pyexpr_source(a->generator), &err), err.message,
				  pyexpr_source(a->generator), (unsigned long long)~inv);
		else
			fail_with(f, "error", "%s: %s.DataSource: \"%s\" failed on the GPU at i=%llu", r->run.spec->path, a->field,
				  pyexpr_source(a->generator), (unsigned long long)~inv);
		pyarena_free(arena);
		return -1;
	}
	return 0;
}

static void free_run(struct wrun *r)
{
	if (r->arena)
		cu.cuMemFree(r->arena);
	if (r->guard_table)
		cu.cuMemFree(r->guard_table);
	if (r->gen_module)
		cu.cuModuleUnload(r->gen_module);
	kernel_release(&r->baseline);
	for (size_t k = 0; r->args && k < r->ka.n; k++)
		free(r->args[k].scalar);
	free(r->args);
	free(r->refs);
	free(r->guards);
	free(r->baseline_state);
	kargs_release(&r->ka);
	run_release(&r->run);
	free(r);
}

/* The run of dir, its spec loaded and its buffers allocated on the device the first time. */
static struct wrun *find_run(const char *dir, struct failure *f)
{
	for (struct wrun *r = runs; r; r = r->next)
		if (strcmp(r->run.dir, dir) == 0)
			return r;
	struct wrun *r = xcalloc(1, sizeof(*r));
	int unreadable;
	struct strbuf why;
	strbuf_init(&why);
	if (run_init(&r->run, dir, &unreadable) != 0 || kargs_load(r->run.spec, &r->ka, &why)) {
		fail_with(f, "error", "%s", r->run.spec ? why.buf : "run has no usable spec.json (see above)");
		strbuf_release(&why);
		free_run(r);
		return NULL;
	}
	strbuf_release(&why);
	r->args = xcalloc(r->ka.n + 1, sizeof(*r->args));
	r->refs = xcalloc(r->ka.nrefs + 1, sizeof(*r->refs));
	for (size_t j = 0; j < r->ka.n + r->ka.nrefs; j++) {
		struct warg *w = j < r->ka.n ? &r->args[j] : &r->refs[j - r->ka.n];
		w->a = j < r->ka.n ? &r->ka.args[j] : &r->ka.refs[j - r->ka.n];
		w->gen_result = -1;
	}
	r->guard_salt = rng_next(&gpu.rng);
	r->mask_key = rng_next(&gpu.rng);
	char *program = generator_program(r);
	int rc = layout(r, f) || guards_write(r, f) || (program && load_generators(r, program, f));
	free(program);
	for (size_t k = 0; rc == 0 && k < r->ka.n; k++)
		rc = upload_pristine(r, &r->args[k], f);
	for (size_t j = 0; rc == 0 && j < r->ka.nrefs; j++)
		rc = upload_pristine(r, &r->refs[j], f);
	if (rc) {
		free_run(r);
		return NULL;
	}
	r->next = runs;
	runs = r;
	return r;
}

/* The tensor map element type of an argument's lanes; -1 for a type it has none of. */
static int tensor_map_type(enum karg_base base)
{
	switch (base) {
	case KARG_BOOL:
	case KARG_I8:
	case KARG_U8:
		return CU_TENSOR_MAP_DATA_TYPE_UINT8;
	case KARG_I16:
	case KARG_U16:
		return CU_TENSOR_MAP_DATA_TYPE_UINT16;
	case KARG_I32:
		return CU_TENSOR_MAP_DATA_TYPE_INT32;
	case KARG_U32:
		return CU_TENSOR_MAP_DATA_TYPE_UINT32;
	case KARG_I64:
		return CU_TENSOR_MAP_DATA_TYPE_INT64;
	case KARG_U64:
		return CU_TENSOR_MAP_DATA_TYPE_UINT64;
	case KARG_F16:
		return CU_TENSOR_MAP_DATA_TYPE_FLOAT16;
	case KARG_F32:
		return CU_TENSOR_MAP_DATA_TYPE_FLOAT32;
	case KARG_F64:
		return CU_TENSOR_MAP_DATA_TYPE_FLOAT64;
	default:
		return -1;
	}
}

/* Encodes the spec's KernelGraph.TensorMaps for the build's configuration into k->maps, each
 * over its argument's input buffer (lib/t1.h has the format). */
static int encode_tensor_maps(const struct wrun *r, const cJSON *build, struct kernel *k, struct failure *f)
{
	const struct t1_spec *spec = r->run.spec;
	/* Tensor maps exist from compute capability 9.0 on; before it, no kernel that reads
	 * one compiles for the GPU (kg-build builds for its architecture), and the others,
	 * the wmma baseline of the matmul say, run without. */
	if (spec->ntensor_maps == 0 || !gpu.tensor_maps)
		return 0;
	struct pyval *values = xcalloc(spec->nnames, sizeof(*values));
	struct strbuf why;
	strbuf_init(&why);
	int rc = 0;
	if (t1_bind_config(spec, cJSON_GetObjectItemCaseSensitive(build, "config"), values, NULL) != 0)
		rc = fail_with(f, "error", "build.config: not a configuration of %s/spec.json, so its "
				     "KernelGraph.TensorMaps cannot be encoded", r->run.dir);
	if (rc == 0 && !(k->maps = aligned_alloc(64, spec->ntensor_maps * sizeof(*k->maps))))
		xalloc_die();
	for (size_t m = 0; rc == 0 && m < spec->ntensor_maps; m++) {
		const struct t1_tensor_map *map = &spec->tensor_maps[m];
		const struct warg *w = NULL;
		for (size_t j = 0; j < r->ka.n && !w; j++)
			if (strcmp(r->ka.args[j].name, map->argument) == 0)
				w = &r->args[j];
		const struct karg *a = w ? w->a : NULL;
		int type = a ? tensor_map_type(a->base) : -1;
		size_t elem = a ? a->elem_bytes / a->lanes : 0;
		cuuint64_t dims[T1_TENSOR_MAP_MAX_RANK], strides[T1_TENSOR_MAP_MAX_RANK];
		cuuint32_t box[T1_TENSOR_MAP_MAX_RANK], ones[T1_TENSOR_MAP_MAX_RANK] = {1, 1, 1, 1, 1};
		uint64_t d64[T1_TENSOR_MAP_MAX_RANK];
		uint32_t b32[T1_TENSOR_MAP_MAX_RANK];
		if (!w || !w->in.bytes || type < 0) {
			rc = fail_with(f, "error", "%s/spec.json: %s.Argument: '%s' has no input buffer of a type a tensor map holds",
				       r->run.dir, map->field, map->argument);
			break;
		}
		if (t1_tensor_map_eval(spec, map, values, elem, d64, b32, &why) != 0) {
			rc = fail_with(f, "error", "%s/spec.json: %s", r->run.dir, why.buf);
			break;
		}
		uint64_t elements = 1;
		for (size_t d = 0; d < map->rank; d++) {
			dims[d] = d64[d];
			box[d] = b32[d];
			if (d > 0)
				strides[d - 1] = elements * elem;
			elements *= d64[d];
			if (d > 0 && strides[d - 1] % 16 != 0) {
				rc = fail_with(f, "error", "%s/spec.json: %s.Dims: dimension %zu's stride, %llu bytes, is not a "
					       "multiple of 16", r->run.dir, map->field, d, (unsigned long long)strides[d - 1]);
				break;
			}
		}
		if (rc == 0 && elements > (uint64_t)a->count * a->lanes)
			rc = fail_with(f, "error", "%s/spec.json: %s.Dims: %llu elements, more than %s holds (%llu)", r->run.dir,
				       map->field, (unsigned long long)elements, a->name,
				       (unsigned long long)a->count * a->lanes);
		if (rc)
			break;
		static const CUtensorMapSwizzle swizzles[] = {CU_TENSOR_MAP_SWIZZLE_NONE, CU_TENSOR_MAP_SWIZZLE_32B,
							      CU_TENSOR_MAP_SWIZZLE_64B, CU_TENSOR_MAP_SWIZZLE_128B};
		CUtensorMapSwizzle swizzle = swizzles[map->swizzle == 0 ? 0 : map->swizzle == 32 ? 1 : map->swizzle == 64 ? 2 : 3];
		char what[300];
		snprintf(what, sizeof(what), "cuTensorMapEncodeTiled (%s/spec.json: %s)", r->run.dir, map->field);
		rc = check_cuda(f, cu.cuTensorMapEncodeTiled(&k->maps[m], (CUtensorMapDataType)type, (cuuint32_t)map->rank,
							     (void *)(uintptr_t)slot_ptr(r, &w->in), dims, strides, box, ones,
							     CU_TENSOR_MAP_INTERLEAVE_NONE, swizzle,
							     CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE),
				what);
		if (rc == 0)
			k->nmaps = m + 1;
	}
	strbuf_release(&why);
	free(values);
	return rc ? -1 : 0;
}

/* A build's kernel for the run: its module and function, and its tensor maps. */
static int load_run_kernel(const struct wrun *r, const cJSON *build, struct kernel *k, struct failure *f)
{
	if (load_kernel(r->run.dir, build, r->ka.dynamic_smem, k, f))
		return -1;
	if (encode_tensor_maps(r, build, k, f)) {
		kernel_release(k);
		return -1;
	}
	return 0;
}

/* ---------------------------------------------------------------- fills */

/* Fills dst with argument a's data for input set set (Random depends on it; the other
 * fills do not). */
static int fill(const struct wrun *r, struct warg *w, CUdeviceptr dst, uint64_t set, struct failure *f)
{
	const struct karg *a = w->a;
	int lane_bytes = (int)(a->elem_bytes / a->lanes);
	uint64_t lanes = (uint64_t)a->count * a->lanes;
	CUresult rc = CUDA_SUCCESS;
	if (a->memory == KARG_LOCAL || karg_bytes(a) == 0)
		return 0;
	if (fill_is_copied(w)) {
		rc = cu.cuMemcpyDtoDAsync(dst, slot_ptr(r, &w->pristine), karg_bytes(a), gpu.stream);
	} else if (w->gen_translated) {
		if ((w->gen_result = result_take(f)) < 0)
			return -1;
		unsigned long long n = lanes;
		CUdeviceptr fail = result_ptr(w->gen_result) + offsetof(struct harness_result, first_bad_inv);
		int base = a->base;
		void *params[] = {&dst, &n, &base, &lane_bytes, &fail};
		rc = harness_launch(&gpu.harness, gpu.stream, w->gen, lanes, 1, params);
	} else if (a->base == KARG_CUSTOM) {
		rc = cu.cuMemsetD8Async(dst, 0, karg_bytes(a), gpu.stream);
	} else if (a->fill == KARG_FILL_RANDOM) {
		rc = harness_fill_random(&gpu.harness, gpu.stream, dst, lanes, a->base, lane_bytes, karg_random_range(a),
					 a->seed, set);
	} else {
		unsigned char pattern[8] = {0};
		uint64_t bits;
		karg_elem_store(a->base, pattern, a->has_fill_value ? a->fill_value : 0);
		memcpy(&bits, pattern, sizeof(bits));
		rc = harness_fill_pattern(&gpu.harness, gpu.stream, dst, lanes, lane_bytes, bits);
	}
	return check_cuda(f, rc, "the harness (fill)");
}

/* Enqueues a hash of every read-only input; *first gets the first result used. */
static int enqueue_input_hashes(const struct wrun *r, long *first, struct failure *f)
{
	*first = (long)gpu.nresults;
	for (size_t a = 0; a < r->ka.n; a++) {
		const struct warg *w = &r->args[a];
		long res;
		if (w->hashed &&
		    ((res = result_take(f)) < 0 ||
		     check_cuda(f, harness_hash(&gpu.harness, gpu.stream, slot_ptr(r, &w->in), w->in.bytes, result_ptr(res)),
				"the harness (hash)")))
			return -1;
	}
	return 0;
}

/* Puts input set set in place, every argument's in slot and Scalar, and keeps the hash of
 * each read-only input; adds the fills' GPU time. Starts a new set of results. */
static int load_set(struct wrun *r, uint64_t set, double *fill_ms, struct failure *f)
{
	long first;
	if (results_reset(f) || check_cuda(f, cu.cuEventRecord(gpu.mark[0], gpu.stream), "cuEventRecord"))
		return -1;
	for (size_t k = 0; k < r->ka.n; k++) {
		struct warg *w = &r->args[k];
		if (w->scalar) {
			struct strbuf why;
			strbuf_init(&why);
			int rc = karg_fill(w->a, set, w->scalar, &why);
			if (rc)
				fail_with(f, "error", "%s", why.buf);
			strbuf_release(&why);
			if (rc)
				return -1;
		} else if (w->in.bytes && fill(r, w, slot_ptr(r, &w->in), set, f)) {
			return -1;
		}
	}
	float ms = 0;
	if (check_cuda(f, cu.cuEventRecord(gpu.mark[1], gpu.stream), "cuEventRecord") ||
	    enqueue_input_hashes(r, &first, f) || results_read(f) ||
	    check_cuda(f, cu.cuEventElapsedTime(&ms, gpu.mark[0], gpu.mark[1]), "cuEventElapsedTime"))
		return -1;
	*fill_ms += ms;
	for (size_t k = 0; k < r->ka.n; k++)
		if (r->args[k].hashed)
			r->args[k].hash = gpu.host_results[first++].hash;
	return judge_generators(r, f);
}

/* ---------------------------------------------------------------- launches */

/* Copies __constant__ and __device__ Symbol arguments into a loaded module. */
static int write_symbols(const struct wrun *r, const struct kernel *kn, struct failure *f)
{
	for (size_t k = 0; k < r->ka.n; k++) {
		const struct warg *w = &r->args[k];
		if (w->a->memory != KARG_SYMBOL || !w->in.bytes)
			continue;
		CUdeviceptr ptr;
		size_t bytes;
		if (check_cuda(f, cu.cuModuleGetGlobal(&ptr, &bytes, kn->module, w->a->name), "cuModuleGetGlobal"))
			return -1;
		if (bytes < w->in.bytes)
			return fail_with(f, "error", "symbol %s holds %zu bytes; %s needs %zu", w->a->name, bytes, w->a->field,
					 w->in.bytes);
		if (check_cuda(f, cu.cuMemcpyDtoDAsync(ptr, slot_ptr(r, &w->in), w->in.bytes, gpu.stream),
			       "cuMemcpyDtoDAsync (symbol)"))
			return -1;
	}
	return 0;
}

/* Fills bytes at dst with byte (the harness's kernel, in 8-byte stores). */
static CUresult poison(CUdeviceptr dst, size_t bytes, unsigned char byte)
{
	uint64_t word = byte * 0x0101010101010101ull;
	CUresult rc = harness_fill_pattern(&gpu.harness, gpu.stream, dst, bytes / 8, 8, word);
	if (rc == CUDA_SUCCESS && bytes % 8)
		rc = harness_fill_pattern(&gpu.harness, gpu.stream, dst + bytes / 8 * 8, bytes % 8, 1, word);
	return rc;
}

/* Readies the outputs for a launch that writes into the to slots (out or ref): ReadWrite
 * outputs get the loaded set's values, the others poison, so that an element the kernel
 * never writes fails and nothing an earlier launch left can pass for an answer. */
static int ready_outputs(const struct wrun *r, enum which_slot to, struct failure *f)
{
	for (size_t k = 0; k < r->ka.n; k++) {
		const struct warg *w = &r->args[k];
		if (!is_vector_output(w->a) || !w->out.bytes)
			continue;
		const struct slot *dst = slot_of(w, to);
		CUresult rc = w->a->access == KARG_READ_WRITE
				      ? cu.cuMemcpyDtoDAsync(slot_ptr(r, dst), slot_ptr(r, &w->in), dst->bytes, gpu.stream)
				      : poison(slot_ptr(r, dst), dst->bytes, karg_elem_poison_byte(w->a->base));
		if (check_cuda(f, rc, "readying the outputs"))
			return -1;
	}
	return 0;
}

/* Launches kn on the loaded set with its outputs in the to slots, ready_outputs done. */
static int launch_into(const struct wrun *r, const struct kernel *kn, enum which_slot to, struct failure *f)
{
	CUdeviceptr ptrs[r->ka.n + 1];
	void *params[r->ka.n + kn->nmaps + 1];
	size_t n = 0;
	for (size_t k = 0; k < r->ka.n; k++) {
		const struct warg *w = &r->args[k];
		if (w->scalar) {
			params[n++] = w->scalar;
		} else if (w->a->memory == KARG_VECTOR) {
			const struct slot *s = is_vector_output(w->a) ? slot_of(w, to) : &w->in;
			ptrs[k] = slot_ptr(r, s);
			params[n++] = &ptrs[k];
		}
	}
	for (size_t m = 0; m < kn->nmaps; m++)
		params[n++] = &kn->maps[m];
	return check_cuda(f, cu.cuLaunchKernel(kn->function, kn->grid[0], kn->grid[1], kn->grid[2], kn->block[0],
					       kn->block[1], kn->block[2], (unsigned)kn->smem, gpu.stream, params, NULL),
			  "cuLaunchKernel");
}

/* ready_outputs, the symbols, then the launch. */
static int run_into(const struct wrun *r, const struct kernel *kn, enum which_slot to, struct failure *f)
{
	return ready_outputs(r, to, f) || write_symbols(r, kn, f) || launch_into(r, kn, to, f);
}

static int mask_refs(const struct wrun *r, enum which_slot which, struct failure *f)
{
	for (size_t k = 0; k < r->ka.n; k++) {
		const struct warg *w = &r->args[k];
		const struct slot *s = slot_of(w, which);
		if (is_vector_output(w->a) && s->bytes &&
		    check_cuda(f, harness_mask(&gpu.harness, gpu.stream, slot_ptr(r, s), s->bytes, r->mask_key),
			       "the harness (mask)"))
			return -1;
	}
	return 0;
}

/* ---------------------------------------------------------------- the reference */

static char *reference_path(const struct wrun *r, size_t k)
{
	char *dir = run_path(r->run.dir, RUN_REFERENCE), *path = xasprintf("%s/%zu-%s.bin", dir, k, r->ka.args[k].name);
	free(dir);
	return path;
}

/* RUN/reference/inputs.json: what the reference files were made from. */
static cJSON *reference_stamp(const struct wrun *r)
{
	cJSON *doc = json_object();
	json_add_string(doc, "fills", REFERENCE_FILLS);
	json_add_string(doc, "baseline", r->baseline_state ? r->baseline_state : "");
	return doc;
}

/* Reads RUN/reference/ into the ref0 slots (masked). Returns 1 when every file was there,
 * of the right size and made from today's fills; 0 otherwise (then it must be made). */
static int load_reference(struct wrun *r, struct failure *f)
{
	char *dir = run_path(r->run.dir, RUN_REFERENCE), *stamp_path = xasprintf("%s/inputs.json", dir);
	free(dir);
	cJSON *stamp = json_read_file(stamp_path), *want = reference_stamp(r);
	int same = stamp && cJSON_Compare(stamp, want, 1);
	free(stamp_path);
	cJSON_Delete(stamp);
	cJSON_Delete(want);
	if (!same)
		return 0;
	for (size_t k = 0; k < r->ka.n; k++) {
		struct warg *w = &r->args[k];
		if (!is_vector_output(w->a) || !w->ref0.bytes)
			continue;
		char *path = reference_path(r, k);
		size_t len;
		char *data = file_read_all(path, &len);
		int ok = data && len == w->ref0.bytes &&
			 !check_cuda(f, cu.cuMemcpyHtoD(slot_ptr(r, &w->ref0), data, len), "cuMemcpyHtoD (reference)");
		free(data);
		free(path);
		if (!ok)
			return 0;
	}
	return mask_refs(r, SLOT_REF0, f) ? 0 : 1;
}

/* Makes the reference: the baseline on the spec's own inputs, kept in RUN/reference/ so
 * that every later process checks against the same outputs, and in the ref0 slots. */
static int make_reference(struct wrun *r, double *fill_ms, struct failure *f)
{
	if (load_set(r, 0, fill_ms, f) || run_into(r, &r->baseline, SLOT_REF, f) ||
	    check_cuda(f, cu.cuStreamSynchronize(gpu.stream), "the baseline"))
		return -1;
	char *dir = run_path(r->run.dir, RUN_REFERENCE);
	if (dir_create_nofollow(dir, 1) != 0)
		log_warn("cannot create '%s':", dir);
	for (size_t k = 0; k < r->ka.n; k++) {
		struct warg *w = &r->args[k];
		if (!is_vector_output(w->a) || !w->ref.bytes)
			continue;
		void *host = xmalloc(w->ref.bytes + 1);
		int rc = check_cuda(f, cu.cuMemcpyDtoH(host, slot_ptr(r, &w->ref), w->ref.bytes), "cuMemcpyDtoH (reference)") ||
			 check_cuda(f, cu.cuMemcpyDtoDAsync(slot_ptr(r, &w->ref0), slot_ptr(r, &w->ref), w->ref.bytes, gpu.stream),
				    "cuMemcpyDtoDAsync (reference)");
		if (rc == 0) {
			char *path = reference_path(r, k);
			if (file_write_atomic(path, host, w->ref.bytes) != 0)
				log_warn("cannot write '%s':", path);
			free(path);
		}
		free(host);
		if (rc) {
			free(dir);
			return -1;
		}
	}
	char *stamp_path = xasprintf("%s/inputs.json", dir);
	cJSON *stamp = reference_stamp(r);
	if (json_write_file(stamp_path, stamp, 1) != 0)
		log_warn("cannot write '%s':", stamp_path);
	cJSON_Delete(stamp);
	free(stamp_path);
	free(dir);
	return mask_refs(r, SLOT_REF0, f);
}

static int ready_reference(struct wrun *r, double *fill_ms, struct failure *f)
{
	if (r->ref0_ready)
		return 0;
	int loaded = load_reference(r, f);
	if (f->failed || (!loaded && make_reference(r, fill_ms, f)))
		return -1;
	r->ref0_ready = 1;
	return 0;
}

static int load_run_baseline(struct wrun *r, struct failure *f)
{
	if (r->has_baseline)
		return 0;
	const cJSON *doc = run_baseline(&r->run);
	if (!doc) {
		char *path = run_path(r->run.dir, RUN_BASELINE);
		fail_with(f, "error", "no baseline in %s (%s is missing): bench the baseline first, as kg-init does",
			  r->run.dir, path);
		free(path);
		return -1;
	}
	if (load_run_kernel(r, doc, &r->baseline, f) != 0)
		return -1;
	r->has_baseline = 1;
	r->baseline_state = json_string(doc, "state") ? xstrdup(json_string(doc, "state")) : NULL;
	return 0;
}

/* ---------------------------------------------------------------- checks */

/* Input sets for a candidate: fresh ones derived from its state, so that no two candidates
 * are checked on the same data and none can know its data in advance, then set 0, whose
 * outputs are also checked after timing. */
static uint64_t check_set_id(const char *state, size_t k)
{
	uint64_t h = 1469598103934665603ull;
	for (const char *p = state; *p; p++)
		h = (h ^ (unsigned char)*p) * 1099511628211ull;
	return (h ^ (k + 1) * 0x9e3779b97f4a7c15ull) | 1; /* never 0 */
}

/* What the check found, over every input set and output. */
struct verdict {
	int passed;
	double max_abs_err, max_rel_err; /* infinite when an output was NaN or infinite */
	int weak;			 /* a reference so small that an all-zero output would pass */
	const char *argument;		 /* the first output (or input) that failed */
	size_t first_bad, bad;
	int input_set;			 /* where it failed: 1, 2, ... the fresh sets; 0 the spec's own */
	char why[512];			 /* a failure that is not a wrong element, in words */
	size_t timed_checks;		 /* timed launches whose outputs were verified */
};

/* Enqueues the comparison of every output in out with its reference (ref, or ref0) and
 * the check of the guards; *first gets the first result used. */
static int enqueue_checks(const struct wrun *r, enum which_slot which, long *first, struct failure *f)
{
	*first = (long)gpu.nresults;
	for (size_t k = 0; k < r->ka.n; k++) {
		const struct warg *w = &r->args[k];
		if (!is_vector_output(w->a) || !w->out.bytes)
			continue;
		const struct slot *ref = slot_of(w, which);
		const struct karg *a = w->a;
		int custom = a->base == KARG_CUSTOM;
		long res = result_take(f);
		if (res < 0 || check_cuda(f, harness_compare(&gpu.harness, gpu.stream, slot_ptr(r, &w->out), slot_ptr(r, ref),
							 custom ? karg_bytes(a) : (uint64_t)a->count * a->lanes, a->base,
							 custom ? 1 : (int)(a->elem_bytes / a->lanes),
							 custom ? (int)a->elem_bytes : (int)a->lanes, a->abs_tol, a->rel_tol,
							 r->mask_key, result_ptr(res)), "the harness (compare)"))
			return -1;
	}
	long res = result_take(f);
	return res < 0 || check_cuda(f, harness_guard(&gpu.harness, gpu.stream, r->arena, r->guard_table, (unsigned)r->nguards,
						      r->guard_words, r->guard_salt, 1, result_ptr(res)), "the harness (guards)")
		       ? -1 : 0;
}

/* Which buffer a damaged guard byte at arena offset at follows. */
static const struct guard_info *guard_at(const struct wrun *r, size_t at)
{
	for (size_t g = 0; g < r->nguards; g++)
		if (at >= r->guards[g].offset && at < r->guards[g].offset + r->guards[g].bytes)
			return &r->guards[g];
	return NULL;
}

/* Says where a kernel wrote outside its buffers: the guard it changed first (at, an arena
 * offset, within g) and the buffer before it. */
static void describe_guard(const struct guard_info *g, size_t at, unsigned long long words, char *why, size_t size)
{
	if (g && g->prev)
		snprintf(why, size, "the kernel wrote outside its buffers: from %zu bytes past the end of the %s buffer of "
			 "'%s' (%llu 8-byte words of guard bytes changed)", at - g->offset, g->prev_kind, g->prev, words);
	else if (g && g->next)
		snprintf(why, size, "the kernel wrote outside its buffers: before the start of the %s buffer of '%s' (%llu "
			 "8-byte words of guard bytes changed)", g->next_kind, g->next, words);
	else
		snprintf(why, size, "the kernel wrote outside its buffers (%llu 8-byte words of guard bytes changed)", words);
}

/* Reads the results enqueue_checks made from first into v (for set set_index); returns
 * whether they passed. A damaged guard is rewritten, so the next launch starts clean. */
static int judge_checks(const struct wrun *r, long first, int set_index, struct verdict *v, struct failure *f)
{
	long k = first;
	int passed = 1;
	for (size_t a = 0; a < r->ka.n; a++) {
		const struct warg *w = &r->args[a];
		if (!is_vector_output(w->a) || !w->out.bytes)
			continue;
		const struct harness_result *res = &gpu.host_results[k++];
		double max_abs = result_double(res->max_abs), max_rel = result_double(res->max_rel);
		v->max_abs_err = fmax(v->max_abs_err, max_abs);
		v->max_rel_err = fmax(v->max_rel_err, max_rel);
		v->weak |= w->a->base != KARG_CUSTOM && result_double(res->ref_max) <= w->a->abs_tol;
		if (res->bad && passed && v->passed) {
			passed = 0;
			v->argument = w->a->name;
			v->first_bad = (size_t)~res->first_bad_inv;
			v->bad = (size_t)res->bad;
			v->input_set = set_index;
		}
	}
	const struct harness_result *guard = &gpu.host_results[k];
	if (guard->bad) {
		const struct guard_info *g = guard_at(r, (size_t)~guard->first_bad_inv);
		if (passed && v->passed) {
			passed = 0;
			v->input_set = set_index;
			v->argument = g ? (g->prev ? g->prev : g->next) : NULL;
			describe_guard(g, (size_t)~guard->first_bad_inv, (unsigned long long)guard->bad, v->why, sizeof(v->why));
		}
		if (guards_write(r, f))
			return -1;
	}
	if (!passed)
		v->passed = 0;
	return passed;
}

/* Whether the read-only inputs still hash as they did after the fill (hashes enqueued from
 * first by enqueue_input_hashes). */
static void judge_inputs(const struct wrun *r, long first, int set_index, const char *when, struct verdict *v)
{
	long k = first;
	for (size_t a = 0; a < r->ka.n; a++) {
		const struct warg *w = &r->args[a];
		if (!w->hashed)
			continue;
		if (gpu.host_results[k++].hash != w->hash && v->passed) {
			v->passed = 0;
			v->argument = w->a->name;
			v->input_set = set_index;
			snprintf(v->why, sizeof(v->why), "the kernel changed an input it may only read%s", when);
		}
	}
}

/* Checks kn on input set set: with a fresh set the baseline computes the expected outputs
 * first (the reference's own launch, into ref); set 0 is checked against ref0. */
static int check_set(struct wrun *r, const struct kernel *kn, uint64_t set, int set_index, struct verdict *v,
		     double *fill_ms, struct failure *f)
{
	long checks, hashes, base_guard = -1;
	int fresh = set != 0;
	if (load_set(r, set, fill_ms, f))
		return -1;
	if (fresh) {
		if (run_into(r, &r->baseline, SLOT_REF, f) || mask_refs(r, SLOT_REF, f) ||
		    (base_guard = result_take(f)) < 0 ||
		    check_cuda(f, harness_guard(&gpu.harness, gpu.stream, r->arena, r->guard_table, (unsigned)r->nguards,
						r->guard_words, r->guard_salt, 1, result_ptr(base_guard)), "the harness (guards)"))
			return -1;
	}
	if (run_into(r, kn, SLOT_OUT, f) ||
	    enqueue_checks(r, fresh ? SLOT_REF : SLOT_REF0, &checks, f) ||
	    enqueue_input_hashes(r, &hashes, f) || results_read(f))
		return -1;
	if (base_guard >= 0 && gpu.host_results[base_guard].bad)
		return fail_with(f, "error", "the baseline wrote outside its buffers (on fresh input set %d): "
			       "its outputs cannot serve as the reference", set_index);
	if (judge_checks(r, checks, set_index, v, f) < 0)
		return -1;
	judge_inputs(r, hashes, set_index, "", v);
	return 0;
}

/* Baseline kn against ReferenceArguments: their data, filled into the targets' ref slots, is
 * what the baseline must compute on the spec's own inputs. */
static int check_baseline(struct wrun *r, const struct kernel *kn, struct verdict *v, double *fill_ms, struct failure *f)
{
	long checks;
	if (load_set(r, 0, fill_ms, f))
		return -1;
	for (size_t j = 0; j < r->ka.nrefs; j++) {
		struct warg *target = &r->args[r->ka.ref_target[j]];
		if (fill(r, &r->refs[j], slot_ptr(r, &target->ref), 0, f))
			return -1;
	}
	if (mask_refs(r, SLOT_REF, f) || run_into(r, kn, SLOT_OUT, f) ||
	    enqueue_checks(r, SLOT_REF, &checks, f) || results_read(f) || judge_generators(r, f))
		return -1;
	return judge_checks(r, checks, 0, v, f) < 0 ? -1 : 0;
}

static cJSON *verdict_to_json(const struct verdict *v, size_t input_sets)
{
	cJSON *check = json_object();
	json_add_bool(check, "passed", v->passed);
	json_add_number(check, "input_sets", (double)input_sets);
	json_add_number(check, "timed_checks", (double)v->timed_checks);
	/* JSON has no infinity: a non-finite error is null, and nonfinite says why. */
	if (isfinite(v->max_abs_err)) {
		json_add_number(check, "max_abs_err", v->max_abs_err);
		json_add_number(check, "max_rel_err", v->max_rel_err);
	} else {
		if (!cJSON_AddNullToObject(check, "max_abs_err") || !cJSON_AddNullToObject(check, "max_rel_err"))
			xalloc_die();
		json_add_bool(check, "nonfinite", 1);
	}
	if (v->weak)
		json_add_bool(check, "weak", 1);
	if (!v->passed) {
		if (v->argument)
			json_add_string(check, "argument", v->argument);
		json_add_number(check, "input_set", v->input_set);
		if (v->why[0])
			json_add_string(check, "why", v->why);
		if (v->bad) {
			json_add_number(check, "first_bad", (double)v->first_bad);
			json_add_number(check, "bad_elements", (double)v->bad);
		}
	}
	return check;
}

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

static void trace_reset(void)
{
	for (size_t k = 0; k < trace.n; k++)
		free(trace.names[k]);
	trace.n = 0;
}

/* The samples of one kernel in a timing loop. */
struct series {
	const struct kernel *kn;
	double *events_ms, *cupti_ms;
	size_t n, cap;
};

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

/* Where the time of a record went, in ms. */
struct phases {
	double wait, setup, load, fill, check, warmup, time, gpu, write;
};

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
static int time_series(struct wrun *r, struct series *series, size_t nseries, const struct bench_settings *cfg, int verify,
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

/* ---------------------------------------------------------------- one request */

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

/* Replaces path with doc; a failure is only a warning, since the record carries the figures. */
static void write_json_file(const char *path, const cJSON *doc)
{
	if (json_write_file(path, doc, 1) != 0)
		log_warn("cannot write '%s':", path);
}

/* Writes variants/STATE/bench.json: every raw sample and the summary. */
static void keep_samples(const char *run, const cJSON *build, const cJSON *bench, const struct series *series,
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

/* The device as an engineer describes it (and kg-propose's prompt shows it): what bounds
 * occupancy, shared memory and the caches. */
static cJSON *device_json(void)
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

static void free_series(struct series *s)
{
	free(s->events_ms);
	free(s->cupti_ms);
}

static void add_phases(cJSON *bench, const struct phases *ph)
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
static void add_figures(const struct wrun *r, const cJSON *build, int is_baseline, const struct series *series,
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
		bootstrap_median_ratio(primary[1], series[1].n, primary[0], series[0].n, 2000, 42, ci);
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

static void add_clocks(cJSON *bench, int before, const char *state)
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
static void add_metrics(const struct wrun *r, const struct kernel *kn, const cJSON *build, const struct bench_settings *cfg,
			cJSON *bench)
{
	struct metrics_pass pass = {.r = r, .kn = kn, .cfg = cfg};
	struct metrics_target t = {.ctx = gpu.ctx, .dev = gpu.dev, .ordinal = cfg->device, .device = gpu.name,
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
	{
		struct strbuf cupti_why;
		strbuf_init(&cupti_why);
		cupti_ready = cupti_open(&cupti_why) == 0 &&
			      cupti.cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed) == CUPTI_SUCCESS;
		if (!cupti_ready)
			log_warn("timing with CUDA events alone: %s", cupti_why.buf);
		strbuf_release(&cupti_why);
	}
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
			double wait_ms = 0;
			char started[40];
			if (gpu_lock_take(cfg, &wait_ms, &f) == 0) {
				utc_now(started, sizeof(started), 1);
				double t0 = monotonic_ms();
				bench_record(run->valuestring, build,
					     cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(request, "baseline")),
					     json_number(request, "metrics_above", NAN), cfg, wait_ms, bench, &f);
				json_add_number(bench, "wall_ms", monotonic_ms() - t0);
				json_add_string(bench, "started", started);
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
		return KG_EXIT_ENV;
	}
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
