/* worker_buffers.c: a run's buffers on the device, laid out once between guards for the
 * worker's life, its Generators compiled for the GPU, and the fills that load an input set. */
#include "common.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "pyexpr_cuda.h"
#include "rng.h"
#include "t1.h"
#include "worker_shared.h"
#include "xalloc.h"

/* ---------------------------------------------------------------- a run's buffers */

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
int guards_write(const struct wrun *r, struct failure *f)
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
int judge_generators(struct wrun *r, struct failure *f)
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
struct wrun *find_run(const char *dir, struct failure *f)
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
int load_run_kernel(const struct wrun *r, const cJSON *build, struct kernel *k, struct failure *f)
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
int fill(const struct wrun *r, struct warg *w, CUdeviceptr dst, uint64_t set, struct failure *f)
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
int enqueue_input_hashes(const struct wrun *r, long *first, struct failure *f)
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
int load_set(struct wrun *r, uint64_t set, double *fill_ms, struct failure *f)
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

