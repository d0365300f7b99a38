/* worker_launch.c: a build's kernel in the worker: its module loaded from the cubin, its shared
 * memory allowed, and its launches on a run's buffers, outputs readied and symbols written. */
#include "common.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fileio.h"
#include "worker_shared.h"
#include "xalloc.h"

/* ---------------------------------------------------------------- kernels */

/* Unloads the kernel's module and frees its tensor maps. */
void kernel_release(struct kernel *k)
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
int load_kernel(const char *run, const cJSON *build, size_t dynamic_smem, struct kernel *k, struct failure *f)
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

/* ---------------------------------------------------------------- launches */

/* Copies __constant__ and __device__ Symbol arguments into a loaded module. */
int write_symbols(const struct wrun *r, const struct kernel *kn, struct failure *f)
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
int ready_outputs(const struct wrun *r, enum which_slot to, struct failure *f)
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
int launch_into(const struct wrun *r, const struct kernel *kn, enum which_slot to, struct failure *f)
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
int run_into(const struct wrun *r, const struct kernel *kn, enum which_slot to, struct failure *f)
{
	return ready_outputs(r, to, f) || write_symbols(r, kn, f) || launch_into(r, kn, to, f);
}

int mask_refs(const struct wrun *r, enum which_slot which, struct failure *f)
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

