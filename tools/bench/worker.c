/* worker.c: runs, checks and times kernels through the CUDA driver. Correctness first (fresh
 * input sets, poisoned outputs, untouched inputs), then interleaved baseline/candidate samples
 * timed by CUPTI and CUDA events with the L2 flushed before each. */
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
#include "jsonl.h"
#include "kargs.h"
#include "log.h"
#include "mcgs.h"
#include "stats.h"
#include "t1.h"
#include "worker.h"
#include "xalloc.h"

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

static struct {
	CUdevice dev;
	CUcontext ctx;
	CUstream stream;
	char name[256];
	char pci_bus_id[64];
	size_t l2_bytes;
	CUdeviceptr flush;	/* twice the L2, written before each cold sample */
	size_t flush_bytes;
	int out_fd;
	double last_progress;
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
	    check_cuda(&f, cu.cuDeviceGetAttribute(&l2, CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, gpu.dev), "cuDeviceGetAttribute")) {
		strbuf_addstr(why, f.what);
		return -1;
	}
	gpu.l2_bytes = (size_t)l2;
	gpu.flush_bytes = 2 * gpu.l2_bytes;
	if (check_cuda(&f, cu.cuMemAlloc(&gpu.flush, gpu.flush_bytes), "cuMemAlloc (L2 flush buffer)")) {
		strbuf_addstr(why, f.what);
		return -1;
	}
	return 0;
}

/* ---------------------------------------------------------------- kernels and buffers */

struct kernel {
	CUmodule module;
	CUfunction function;
	unsigned grid[3], block[3];
	size_t smem; /* dynamic shared memory: the spec's fixed bytes plus the build's shared_bytes */
	char name[512];
};

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
		 check_cuda(f, cu.cuModuleGetFunction(&k->function, k->module, k->name), "cuModuleGetFunction"))
		rc = -1;
	else if (k->smem > 48 * 1024 &&
		 check_cuda(f, cu.cuFuncSetAttribute(k->function, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
						     (int)k->smem), "cuFuncSetAttribute (dynamic shared memory)"))
		rc = -1;
	free(image);
	free(path);
	return rc;
}

/* One launch's arguments: a device buffer per Vector argument, the value of each Scalar. */
struct launch_args {
	CUdeviceptr *buf;
	void **params;
	size_t nparams;
};

static void free_args(const struct kargs *ka, struct launch_args *la)
{
	for (size_t k = 0; la->buf && k < ka->n; k++)
		if (la->buf[k])
			cu.cuMemFree(la->buf[k]);
	free(la->buf);
	free(la->params);
	memset(la, 0, sizeof(*la));
}

/* Allocates buffers for every Vector argument; for_outputs_only shares the other buffers of
 * base (inputs read by both kernels) and allocates only the outputs. */
static int alloc_args(const struct kargs *ka, void *const *host, const struct launch_args *base,
		      struct launch_args *la, struct failure *f)
{
	la->buf = xcalloc(ka->n + 1, sizeof(*la->buf));
	la->params = xcalloc(ka->n + 1, sizeof(*la->params));
	la->nparams = 0;
	for (size_t k = 0; k < ka->n; k++) {
		const struct karg *a = &ka->args[k];
		if (a->memory == KARG_SCALAR) {
			la->params[la->nparams++] = host[k];
		} else if (a->memory == KARG_VECTOR) {
			if (base && !karg_is_output(a)) {
				la->params[la->nparams++] = &base->buf[k];
				continue;
			}
			if (check_cuda(f, cu.cuMemAlloc(&la->buf[k], karg_bytes(a) ? karg_bytes(a) : 1), "cuMemAlloc"))
				return -1;
			la->params[la->nparams++] = &la->buf[k];
		}
	}
	return 0;
}

/* Copies __constant__ and __device__ Symbol arguments into a loaded module. */
static int write_symbols(const struct kargs *ka, void *const *host, const struct kernel *kn, struct failure *f)
{
	for (size_t k = 0; k < ka->n; k++) {
		const struct karg *a = &ka->args[k];
		if (a->memory != KARG_SYMBOL)
			continue;
		CUdeviceptr ptr;
		size_t bytes;
		if (check_cuda(f, cu.cuModuleGetGlobal(&ptr, &bytes, kn->module, a->name), "cuModuleGetGlobal"))
			return -1;
		if (bytes < karg_bytes(a))
			return fail_with(f, "error", "symbol %s holds %zu bytes; %s needs %zu", a->name, bytes, a->field,
					 karg_bytes(a));
		if (check_cuda(f, cu.cuMemcpyHtoD(ptr, host[k], karg_bytes(a)), "cuMemcpyHtoD (symbol)"))
			return -1;
	}
	return 0;
}

static int launch(const struct kernel *kn, const struct launch_args *la, struct failure *f)
{
	return check_cuda(f, cu.cuLaunchKernel(kn->function, kn->grid[0], kn->grid[1], kn->grid[2], kn->block[0],
					       kn->block[1], kn->block[2], (unsigned)kn->smem, gpu.stream, la->params, NULL),
			  "cuLaunchKernel");
}

/* ---------------------------------------------------------------- runs and input sets */

/* Host data for one input set: inputs as filled, outputs as the baseline left them. */
struct input_set {
	uint64_t id;
	void **in;   /* per argument */
	void **ref;  /* per output argument; NULL otherwise */
};

struct wrun {
	char *dir;
	struct t1_spec *spec;
	struct kargs ka;
	struct kernel baseline;
	int has_baseline;
	struct input_set sets[4]; /* the most recent, reused while a run is benched */
	size_t nsets;
	struct wrun *next;
};

static struct wrun *runs;

static void free_set(const struct kargs *ka, struct input_set *s)
{
	for (size_t k = 0; k < ka->n; k++) {
		free(s->in ? s->in[k] : NULL);
		free(s->ref ? s->ref[k] : NULL);
	}
	free(s->in);
	free(s->ref);
	memset(s, 0, sizeof(*s));
}

static struct wrun *find_run(const char *dir, struct failure *f)
{
	for (struct wrun *r = runs; r; r = r->next)
		if (strcmp(r->dir, dir) == 0)
			return r;
	struct wrun *r = xcalloc(1, sizeof(*r));
	char *spec_path = xasprintf("%s/spec.json", dir);
	int unreadable;
	struct strbuf why;
	strbuf_init(&why);
	r->spec = t1_load(spec_path, &unreadable);
	if (!r->spec || kargs_load(r->spec, &r->ka, &why)) {
		fail_with(f, "error", "%s", r->spec ? why.buf : "run has no usable spec.json (see above)");
		t1_free(r->spec);
		free(r);
		r = NULL;
	} else {
		r->dir = xstrdup(dir);
		r->next = runs;
		runs = r;
	}
	strbuf_release(&why);
	free(spec_path);
	return r;
}

/* Runs kn on the inputs of set s with fresh buffers and poisoned outputs; out[k] receives
 * each output argument, and *modified names an input the kernel changed (or is NULL). */
static int run_once(struct wrun *r, const struct kernel *kn, const struct input_set *s, void **out,
		    const char **modified, struct failure *f)
{
	const struct kargs *ka = &r->ka;
	struct launch_args la = {0};
	int rc = -1;
	*modified = NULL;
	if (alloc_args(ka, s->in, NULL, &la, f) || write_symbols(ka, s->in, kn, f))
		goto done;
	for (size_t k = 0; k < ka->n; k++) {
		const struct karg *a = &ka->args[k];
		if (a->memory != KARG_VECTOR)
			continue;
		const void *data = s->in[k];
		if (a->access == KARG_WRITE) {
			karg_poison(a, out[k]);
			data = out[k];
		}
		if (check_cuda(f, cu.cuMemcpyHtoD(la.buf[k], data, karg_bytes(a)), "cuMemcpyHtoD"))
			goto done;
	}
	progress();
	if (launch(kn, &la, f) || check_cuda(f, cu.cuStreamSynchronize(gpu.stream), "the kernel"))
		goto done;
	progress();
	void *scratch = NULL;
	for (size_t k = 0; k < ka->n; k++) {
		const struct karg *a = &ka->args[k];
		if (a->memory != KARG_VECTOR)
			continue;
		if (karg_is_output(a)) {
			if (check_cuda(f, cu.cuMemcpyDtoH(out[k], la.buf[k], karg_bytes(a)), "cuMemcpyDtoH"))
				goto done;
		} else if (!*modified) {
			/* A kernel that writes its inputs could pass a check it should fail. */
			scratch = xrealloc(scratch, karg_bytes(a) ? karg_bytes(a) : 1);
			if (check_cuda(f, cu.cuMemcpyDtoH(scratch, la.buf[k], karg_bytes(a)), "cuMemcpyDtoH")) {
				free(scratch);
				goto done;
			}
			if (memcmp(scratch, s->in[k], karg_bytes(a)) != 0)
				*modified = a->name;
		}
	}
	free(scratch);
	rc = 0;
done:
	free_args(ka, &la);
	return rc;
}

static void **alloc_outputs(const struct kargs *ka)
{
	void **out = xcalloc(ka->n + 1, sizeof(*out));
	for (size_t k = 0; k < ka->n; k++)
		if (karg_is_output(&ka->args[k]))
			out[k] = xmalloc(karg_bytes(&ka->args[k]) + 1);
	return out;
}

static void free_outputs(const struct kargs *ka, void **out)
{
	for (size_t k = 0; out && k < ka->n; k++)
		free(out[k]);
	free(out);
}

static char *reference_path(const struct wrun *r, size_t k)
{
	return xasprintf("%s/reference/%zu-%s.bin", r->dir, k, r->ka.args[k].name);
}

/* Reads the reference outputs of set 0 from RUN/reference/; returns 1 when every one was
 * there with the right size. */
static int load_reference(const struct wrun *r, struct input_set *s)
{
	for (size_t k = 0; k < r->ka.n; k++) {
		if (!s->ref[k])
			continue;
		char *path = reference_path(r, k);
		size_t len;
		char *data = file_read_all(path, &len);
		int ok = data && len == karg_bytes(&r->ka.args[k]);
		if (ok)
			memcpy(s->ref[k], data, len);
		free(data);
		free(path);
		if (!ok)
			return 0;
	}
	return 1;
}

static void keep_reference(const struct wrun *r, const struct input_set *s)
{
	char *dir = xasprintf("%s/reference", r->dir);
	if (dir_create(dir) != 0)
		log_warn("cannot create '%s':", dir);
	for (size_t k = 0; k < r->ka.n; k++) {
		if (!s->ref[k])
			continue;
		char *path = reference_path(r, k);
		if (file_write_atomic(path, s->ref[k], karg_bytes(&r->ka.args[k])) != 0)
			log_warn("cannot write '%s':", path);
		free(path);
	}
	free(dir);
}

/* The input set id: its inputs, and the baseline's outputs on them (the reference). Set 0
 * is the spec's own (its RandomSeeds), used for timing; its reference is kept in
 * RUN/reference/ so that every later process checks against the same outputs. */
static struct input_set *input_set(struct wrun *r, uint64_t id, struct failure *f)
{
	for (size_t k = 0; k < r->nsets; k++)
		if (r->sets[k].id == id)
			return &r->sets[k];
	if (r->nsets == ARRAY_SIZE(r->sets)) {
		/* Drop the oldest set but set 0, which every candidate is timed on. */
		size_t old = r->sets[0].id == 0 ? 1 : 0;
		free_set(&r->ka, &r->sets[old]);
		memmove(&r->sets[old], &r->sets[old + 1], (r->nsets - old - 1) * sizeof(r->sets[0]));
		r->nsets--;
	}
	struct input_set *s = &r->sets[r->nsets];
	memset(s, 0, sizeof(*s));
	s->id = id;
	s->in = xcalloc(r->ka.n + 1, sizeof(*s->in));
	struct strbuf why;
	strbuf_init(&why);
	for (size_t k = 0; k < r->ka.n; k++) {
		const struct karg *a = &r->ka.args[k];
		s->in[k] = xmalloc(karg_bytes(a) + 1);
		/* Set 0 is what the spec describes; other sets redraw only the Random fills. */
		if (karg_fill(a, id, s->in[k], &why)) {
			fail_with(f, "error", "%s", why.buf);
			strbuf_release(&why);
			free_set(&r->ka, s);
			return NULL;
		}
		progress();
	}
	strbuf_release(&why);
	r->nsets++;
	if (!r->has_baseline)
		return s; /* the baseline itself is being benched: it makes the reference */
	s->ref = alloc_outputs(&r->ka);
	if (id != 0 || !load_reference(r, s)) {
		const char *modified;
		if (run_once(r, &r->baseline, s, s->ref, &modified, f)) {
			r->nsets--;
			free_set(&r->ka, s);
			return NULL;
		}
		if (id == 0)
			keep_reference(r, s);
	}
	/* On the spec's own inputs, ReferenceArguments say what the outputs must be. */
	for (size_t j = 0; id == 0 && j < r->ka.nrefs; j++) {
		strbuf_init(&why);
		if (karg_fill(&r->ka.refs[j], 0, s->ref[r->ka.ref_target[j]], &why)) {
			fail_with(f, "error", "%s", why.buf);
			strbuf_release(&why);
			r->nsets--;
			free_set(&r->ka, s);
			return NULL;
		}
		strbuf_release(&why);
	}
	return s;
}

/* ---------------------------------------------------------------- correctness */

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
	const char *why;
};

/* Compares every output of kn on set s into v; returns 0, or -1 on a CUDA failure. */
static int check_set(struct wrun *r, const struct kernel *kn, struct input_set *s, int set_index, struct verdict *v,
		     struct failure *f)
{
	void **out = alloc_outputs(&r->ka);
	const char *modified;
	int rc = run_once(r, kn, s, out, &modified, f);
	for (size_t k = 0; rc == 0 && v->passed && k < r->ka.n; k++) {
		const struct karg *a = &r->ka.args[k];
		if (!karg_is_output(a) || a->memory != KARG_VECTOR)
			continue;
		struct karg_diff d;
		karg_compare(a, out[k], s->ref[k], &d);
		v->max_abs_err = fmax(v->max_abs_err, d.max_abs_err);
		v->max_rel_err = fmax(v->max_rel_err, d.max_rel_err);
		v->weak |= d.ref_max <= a->abs_tol;
		if (!d.passed) {
			v->passed = 0;
			v->argument = a->name;
			v->first_bad = d.first_bad;
			v->bad = d.bad;
			v->input_set = set_index;
		}
	}
	if (rc == 0 && v->passed && modified) {
		v->passed = 0;
		v->argument = modified;
		v->input_set = set_index;
		v->why = "the kernel changed an input it may only read";
	}
	free_outputs(&r->ka, out);
	return rc;
}

static cJSON *verdict_to_json(const struct verdict *v, size_t input_sets)
{
	cJSON *check = json_object();
	json_add_bool(check, "passed", v->passed);
	json_add_number(check, "input_sets", (double)input_sets);
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
		json_add_string(check, "argument", v->argument);
		json_add_number(check, "input_set", v->input_set);
		if (v->why) {
			json_add_string(check, "why", v->why);
		} else {
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
	struct launch_args args;  /* its own output buffers; inputs shared */
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

/* One sample: restore what the kernel overwrites of its inputs, flush the L2 (cold mode),
 * then time the launch between two events. */
static int sample(struct wrun *r, struct series *s, const struct launch_args *pristine, const struct bench_settings *cfg,
		  CUevent start, CUevent stop, struct failure *f)
{
	const struct kargs *ka = &r->ka;
	for (size_t k = 0; k < ka->n; k++) {
		const struct karg *a = &ka->args[k];
		if (a->memory == KARG_VECTOR && a->access == KARG_READ_WRITE &&
		    check_cuda(f, cu.cuMemcpyDtoDAsync(s->args.buf[k], pristine->buf[k], karg_bytes(a), gpu.stream),
			       "cuMemcpyDtoDAsync"))
			return -1;
	}
	if (!cfg->hot && check_cuda(f, cu.cuMemsetD8Async(gpu.flush, 0x5a, gpu.flush_bytes, gpu.stream), "L2 flush"))
		return -1;
	float ms;
	if (check_cuda(f, cu.cuEventRecord(start, gpu.stream), "cuEventRecord") || launch(s->kn, &s->args, f) ||
	    check_cuda(f, cu.cuEventRecord(stop, gpu.stream), "cuEventRecord") ||
	    check_cuda(f, cu.cuEventSynchronize(stop), "the kernel") ||
	    check_cuda(f, cu.cuEventElapsedTime(&ms, start, stop), "cuEventElapsedTime"))
		return -1;
	series_add(s, ms);
	progress();
	return 0;
}

static int upload_inputs(const struct kargs *ka, void *const *in, const struct launch_args *la, struct failure *f)
{
	for (size_t k = 0; k < ka->n; k++) {
		const struct karg *a = &ka->args[k];
		if (a->memory == KARG_VECTOR && la->buf[k] &&
		    check_cuda(f, cu.cuMemcpyHtoD(la->buf[k], in[k], karg_bytes(a)), "cuMemcpyHtoD"))
			return -1;
	}
	return 0;
}

/* Assigns CUPTI's kernel records to the samples, which ran in the order the series were
 * interleaved. Returns 0, or -1 when the records do not match the launches one to one (a
 * kernel that launched others, say): the events then stand alone. */
static int attach_cupti(struct series *series, size_t nseries, size_t rounds)
{
	if (trace.n != rounds * nseries)
		return -1;
	for (size_t i = 0; i < rounds; i++)
		for (size_t j = 0; j < nseries; j++) {
			size_t t = i * nseries + j;
			if (strcmp(trace.names[t], series[j].kn->name) != 0)
				return -1;
			series[j].cupti_ms[i] = (trace.end[t] - trace.start[t]) / 1e6;
		}
	return 0;
}

/* Times the kernels of series[] interleaved (A B A B ...) on set 0 until each median's
 * relative standard error is under the target, or the GPU-time budget is spent. */
static int time_series(struct wrun *r, struct input_set *s0, struct series *series, size_t nseries,
		       const struct bench_settings *cfg, int *cupti_used, double *gpu_ms, struct failure *f)
{
	const struct kargs *ka = &r->ka;
	struct launch_args inputs = {0};
	CUevent start = NULL, stop = NULL;
	int rc = -1;
	*cupti_used = 0;
	if (alloc_args(ka, s0->in, NULL, &inputs, f) || upload_inputs(ka, s0->in, &inputs, f) ||
	    check_cuda(f, cu.cuEventCreate(&start, CU_EVENT_DEFAULT), "cuEventCreate") ||
	    check_cuda(f, cu.cuEventCreate(&stop, CU_EVENT_DEFAULT), "cuEventCreate"))
		goto done;
	for (size_t j = 0; j < nseries; j++)
		if (alloc_args(ka, s0->in, &inputs, &series[j].args, f) || upload_inputs(ka, s0->in, &series[j].args, f) ||
		    write_symbols(ka, s0->in, series[j].kn, f))
			goto done;

	/* Warm-up: at least 3 launches and 25 ms of each kernel, discarded. */
	for (size_t j = 0; j < nseries; j++) {
		double t0 = monotonic_ms();
		for (int n = 0; n < 3 || monotonic_ms() - t0 < 25; n++)
			if (sample(r, &series[j], &inputs, cfg, start, stop, f))
				goto done;
		series[j].n = 0;
	}
	if (cupti_ready) {
		trace_reset();
		cupti.cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
	}
	size_t rounds = 0;
	double spent = 0, wall0 = monotonic_ms();
	for (;;) {
		for (size_t j = 0; j < nseries; j++) {
			if (sample(r, &series[j], &inputs, cfg, start, stop, f))
				goto done;
			spent += series[j].events_ms[series[j].n - 1];
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
		/* The wall-clock cap bounds flushes and launch gaps that GPU time leaves out. */
		if (quiet || spent >= cfg->budget_ms || monotonic_ms() - wall0 > 10 * cfg->budget_ms + 1000 || rounds >= 100000)
			break;
	}
	*gpu_ms = spent;
	if (cupti_ready) {
		check_cuda(f, cu.cuCtxSynchronize(), "cuCtxSynchronize");
		cupti.cuptiActivityFlushAll(1);
		cupti.cuptiActivityDisable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
		*cupti_used = attach_cupti(series, nseries, rounds) == 0;
	}
	rc = f->failed ? -1 : 0;
done:
	if (start)
		cu.cuEventSynchronize(start);
	free_args(ka, &inputs);
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
	const cJSON *ext = cJSON_GetObjectItemCaseSensitive(r->spec->json, "KernelGraph");
	const cJSON *item = cJSON_GetObjectItemCaseSensitive(ext, key);
	if (cJSON_IsNumber(item))
		return item->valuedouble;
	if (!cJSON_IsString(item))
		return NAN;
	struct pyexpr_error err;
	struct pyexpr *e = pyexpr_compile(item->valuestring, r->spec->names, r->spec->nnames, &err);
	struct pyarena *arena = pyarena_new();
	struct pyval *values = xcalloc(r->spec->nnames, sizeof(*values)), v;
	double out = NAN;
	int complete = 1;
	for (size_t k = 0; k < r->spec->nparams; k++) {
		size_t index;
		const cJSON *value = cJSON_GetObjectItemCaseSensitive(config, r->spec->params[k].name);
		if (!value || t1_value_index(r->spec, k, value, &index) != 0)
			complete = 0;
		else
			values[k] = r->spec->params[k].values[index];
	}
	values[r->spec->nparams] = r->spec->problem_size;
	if (e && complete && pyexpr_eval(e, values, arena, &v, &err) == 0)
		out = v.kind == PY_FLOAT ? v.u.f : v.kind == PY_INT ? (double)v.u.i : NAN;
	else
		log_warn("%s/spec.json: KernelGraph.%s: cannot evaluate \"%s\"", r->dir, key, item->valuestring);
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
	char *path = xasprintf("%s/%s/bench.json", run, dir->valuestring);
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
	char *path = xasprintf("%s/baseline.json", run);
	write_json_file(path, doc);
	free(path);
	cJSON_Delete(doc);
}

static int load_run_baseline(struct wrun *r, struct failure *f)
{
	if (r->has_baseline)
		return 0;
	char *path = xasprintf("%s/baseline.json", r->dir);
	cJSON *doc = json_read_file(path);
	int rc = -1;
	if (!doc)
		fail_with(f, "error", "no baseline in %s (%s is missing): bench the baseline first, as kg-init does",
			  r->dir, path);
	else if (load_kernel(r->dir, doc, r->ka.dynamic_smem, &r->baseline, f) == 0)
		rc = 0, r->has_baseline = 1;
	cJSON_Delete(doc);
	free(path);
	return rc;
}

static void free_series(struct series *s)
{
	free(s->events_ms);
	free(s->cupti_ms);
}

/* Benches one record's build; fills bench (the record's "bench" object). */
static void bench_record(const char *run_dir, const cJSON *build, int is_baseline, const struct bench_settings *cfg,
			 cJSON *bench, struct failure *f)
{
	struct wrun *r = find_run(run_dir, f);
	struct kernel cand = {0};
	struct series series[2];
	memset(series, 0, sizeof(series));
	if (!r)
		return;
	int clock_before = nvml_sm_clock_mhz(gpu.pci_bus_id);
	if (!is_baseline && load_run_baseline(r, f))
		return;
	if (load_kernel(r->dir, build, r->ka.dynamic_smem, &cand, f))
		return;
	const cJSON *state = cJSON_GetObjectItemCaseSensitive(build, "state");
	const char *state_text = cJSON_IsString(state) ? state->valuestring : "";

	/* Correctness: fresh input sets, then the spec's own set 0. */
	struct verdict v = {.passed = 1};
	if (is_baseline) {
		r->baseline = cand;
		r->has_baseline = 1;
		/* The baseline is the reference, unless the spec gives one: then it is checked too. */
		struct input_set *s0 = r->ka.nrefs ? input_set(r, 0, f) : NULL;
		if (r->ka.nrefs && (!s0 || check_set(r, &cand, s0, 0, &v, f)))
			return;
	} else {
		for (size_t k = 0; k <= cfg->input_sets && v.passed; k++) {
			int fresh = k < cfg->input_sets;
			struct input_set *s = input_set(r, fresh ? check_set_id(state_text, k) : 0, f);
			if (!s || check_set(r, &cand, s, fresh ? (int)k + 1 : 0, &v, f))
				return;
		}
	}
	json_add_string(bench, "status", v.passed ? "ok" : "incorrect");
	json_add_string(bench, "device", gpu.name);
	/* Which of several alike GPUs: the ordinal as given, and the bus id that does not move. */
	json_add_number(bench, "device_id", cfg->device);
	json_add_string(bench, "pci_bus_id", gpu.pci_bus_id);
	cJSON *check = verdict_to_json(&v, is_baseline ? (r->ka.nrefs ? 1 : 0) : cfg->input_sets + 1);
	if (!cJSON_AddItemToObject(bench, "check", check))
		xalloc_die();
	if (!v.passed)
		return;

	/* Timing: the baseline and the candidate interleaved on set 0. */
	struct input_set *s0 = input_set(r, 0, f);
	if (!s0)
		return;
	size_t nseries = is_baseline ? 1 : 2;
	series[0].kn = &cand;
	series[1].kn = &r->baseline;
	int cupti_used = 0;
	double gpu_ms = 0;
	if (time_series(r, s0, series, nseries, cfg, &cupti_used, &gpu_ms, f) == 0) {
		const double *primary[2];
		struct summary sm[2];
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
			keep_baseline(r->dir, build, sm[0].median);
		} else {
			double ci[2];
			/* The same bootstrap kg-select's decisions are specified with (search.md T7d). */
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
		json_add_number(bench, "gpu_ms", gpu_ms);
		int clock_after = nvml_sm_clock_mhz(gpu.pci_bus_id);
		if (clock_before > 0 && clock_after > 0) {
			double clocks[2] = {clock_before, clock_after};
			if (!cJSON_AddItemToObject(bench, "sm_clock_mhz", number_array(clocks, 2)))
				xalloc_die();
			if (clock_after < 0.9 * clock_before) {
				json_add_bool(bench, "throttled", 1);
				log_warn("%s: the SM clock fell from %d to %d MHz while timing: the GPU throttled", state_text,
					 clock_before, clock_after);
			}
		}
		/* The outputs of the timed launches must be right too: a kernel that is correct
		 * only when checked is not. */
		void **out = alloc_outputs(&r->ka);
		for (size_t k = 0; k < r->ka.n && !is_baseline; k++) {
			const struct karg *a = &r->ka.args[k];
			if (!karg_is_output(a) || a->memory != KARG_VECTOR || a->access == KARG_READ_WRITE)
				continue;
			struct karg_diff d;
			if (check_cuda(f, cu.cuMemcpyDtoH(out[k], series[0].args.buf[k], karg_bytes(a)), "cuMemcpyDtoH"))
				break;
			karg_compare(a, out[k], s0->ref[k], &d);
			if (!d.passed) {
				cJSON_ReplaceItemInObjectCaseSensitive(bench, "status", cJSON_CreateString("incorrect"));
				json_add_string(check, "why", "the outputs of the timed launches differ from the reference");
				cJSON_ReplaceItemInObjectCaseSensitive(check, "passed", cJSON_CreateBool(0));
				break;
			}
		}
		free_outputs(&r->ka, out);
		keep_samples(r->dir, build, bench, series, nseries, cupti_used);
	}
	for (size_t j = 0; j < nseries; j++) {
		free_args(&r->ka, &series[j].args);
		free_series(&series[j]);
	}
	if (!is_baseline && cand.module)
		cu.cuModuleUnload(cand.module);
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
	cJSON *request;
	while (jsonl_next(&reader, &request) == JSONL_RECORD) {
		cJSON *bench = json_object();
		struct failure f = {0};
		{
			const cJSON *run = cJSON_GetObjectItemCaseSensitive(request, "run");
			const cJSON *build = cJSON_GetObjectItemCaseSensitive(request, "build");
			double t0 = monotonic_ms();
			bench_record(run->valuestring, build, cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(request, "baseline")),
				     cfg, bench, &f);
			json_add_number(bench, "wall_ms", monotonic_ms() - t0);
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
		if (f.failed)
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
