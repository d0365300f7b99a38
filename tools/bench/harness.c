/* harness.c: compiles kg-bench's device code with NVRTC for the GPU in hand, keeps the image
 * in the cache shared by all runs, and enqueues its kernels. */
#include "common.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "fileio.h"
#include "harness.h"
#include "log.h"
#include "nvrtc_dl.h"
#include "sha256.h"

enum { THREADS = 256 }; /* harness.cu's reductions assume whole warps */

/* The architecture to compile for: the GPU's own ("sm_90") when NVRTC knows it, else the
 * newest virtual one NVRTC knows below it ("compute_89"), whose PTX the driver compiles. */
static void pick_arch(char *arch, size_t size, struct strbuf *why)
{
	CUdevice dev;
	int major = 0, minor = 0;
	if (cu.cuCtxGetDevice(&dev) != CUDA_SUCCESS ||
	    cu.cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev) != CUDA_SUCCESS ||
	    cu.cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev) != CUDA_SUCCESS) {
		snprintf(arch, size, "sm_52");
		return;
	}
	int number = major * 10 + minor;
	struct strbuf supported;
	strbuf_init(&supported);
	if (nvrtc_supports_arch(number, &supported)) {
		snprintf(arch, size, "sm_%d", number);
	} else {
		int best = 0;
		for (char *p = supported.buf; *p;) {
			long n = strtol(p, &p, 10);
			if (n <= number && n > best)
				best = (int)n;
			while (*p == ' ')
				p++;
		}
		snprintf(arch, size, "compute_%d", best ? best : 52);
		strbuf_addf(why, "NVRTC %s cannot make sm_%d code; using %s PTX", nvrtc_version(), number, arch);
	}
	strbuf_release(&supported);
}

int harness_module(const char *source, const char *cache_dir, CUmodule *module, struct strbuf *why)
{
	static char arch[32];
	struct strbuf note;
	strbuf_init(&note);
	if (nvrtc_open(why) != 0)
		return -1;
	if (!arch[0]) {
		pick_arch(arch, sizeof(arch), &note);
		if (note.len)
			log_warn("%s", note.buf);
	}
	strbuf_release(&note);
	char arch_option[64];
	snprintf(arch_option, sizeof(arch_option), "--gpu-architecture=%s", arch);
	const char *options[] = {arch_option, "--fmad=false", "--std=c++17", "--diag-suppress=177"};
	int cubin = strncmp(arch, "sm_", 3) == 0;

	struct sha256 h;
	char hex[SHA256_HEX_SIZE];
	sha256_init(&h);
	sha256_update(&h, nvrtc_version(), strlen(nvrtc_version()) + 1);
	for (size_t k = 0; k < ARRAY_SIZE(options); k++)
		sha256_update(&h, options[k], strlen(options[k]) + 1);
	sha256_update(&h, source, strlen(source));
	sha256_final_hex(&h, hex);
	char *path = cache_dir ? xasprintf("%s/harness/%s.%s", cache_dir, hex, cubin ? "cubin" : "ptx") : NULL;

	size_t len;
	char *image = path ? file_read_all(path, &len) : NULL;
	if (image && cu.cuModuleLoadData(module, image) == CUDA_SUCCESS) {
		free(image);
		free(path);
		return 0;
	}
	free(image); /* missing, or unusable: made again */

	struct nvrtc_output out;
	int rc = -1;
	if (nvrtc_compile(source, "harness.cu", options, ARRAY_SIZE(options), NULL, &out) != 0) {
		strbuf_addf(why, "NVRTC could not start on kg-bench's harness: %s", out.error);
	} else if (!out.ok || !(cubin ? out.cubin : out.ptx)) {
		strbuf_addf(why, "NVRTC failed on kg-bench's harness (%s): %s", out.error ? out.error : "no image", out.log);
	} else {
		const char *data = cubin ? out.cubin : out.ptx;
		size_t bytes = cubin ? out.cubin_len : out.ptx_len + 1;
		CUresult load = cu.cuModuleLoadData(module, data);
		if (load != CUDA_SUCCESS) {
			strbuf_addf(why, "cannot load kg-bench's harness: %s", cuda_error(load));
		} else {
			rc = 0;
			if (path) {
				char *dir = xasprintf("%s/harness", cache_dir);
				if (dir_create(dir) != 0 || file_write_atomic(path, data, bytes) != 0)
					log_warn("cannot keep the harness in '%s':", path);
				free(dir);
			}
		}
	}
	nvrtc_output_release(&out);
	free(path);
	return rc;
}

int harness_load(struct harness *h, const char *cache_dir, struct strbuf *why)
{
	memset(h, 0, sizeof(*h));
	struct strbuf source;
	strbuf_init(&source);
	strbuf_addstr(&source, kg_karg_elem_source);
	strbuf_addstr(&source, kg_harness_kernels_source);
	int compiled = harness_module(source.buf, cache_dir, &h->module, why);
	strbuf_release(&source);
	if (compiled != 0)
		return -1;
	CUfunction *functions[] = {&h->fill_random, &h->fill_pattern, &h->compare, &h->hash, &h->mask, &h->guard};
	static const char *const names[] = {"kg_harness_fill_random", "kg_harness_fill_pattern", "kg_harness_compare",
					    "kg_harness_hash", "kg_harness_mask", "kg_harness_guard"};
	for (size_t k = 0; k < ARRAY_SIZE(names); k++) {
		CUresult rc = cu.cuModuleGetFunction(functions[k], h->module, names[k]);
		if (rc != CUDA_SUCCESS) {
			strbuf_addf(why, "kg-bench's harness has no %s: %s", names[k], cuda_error(rc));
			return -1;
		}
	}
	CUdevice dev;
	int sms = 0;
	if (cu.cuCtxGetDevice(&dev) == CUDA_SUCCESS)
		cu.cuDeviceGetAttribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev);
	h->max_blocks = (unsigned)(sms > 0 ? sms : 16) * 8; /* 2048 threads a multiprocessor */
	return 0;
}

CUresult harness_launch(const struct harness *h, CUstream stream, CUfunction f, uint64_t n, unsigned grid_y,
			void **params)
{
	uint64_t blocks = (n + THREADS - 1) / THREADS;
	unsigned grid = blocks == 0 ? 1 : blocks < h->max_blocks ? (unsigned)blocks : h->max_blocks;
	return cu.cuLaunchKernel(f, grid, grid_y, 1, THREADS, 1, 1, 0, stream, params, NULL);
}

CUresult harness_fill_random(const struct harness *h, CUstream stream, CUdeviceptr dst, uint64_t n, int base,
			     int lane_bytes, double range, uint64_t seed, uint64_t set)
{
	unsigned long long n_ = n, seed_ = seed, set_ = set;
	void *params[] = {&dst, &n_, &base, &lane_bytes, &range, &seed_, &set_};
	return harness_launch(h, stream, h->fill_random, n, 1, params);
}

CUresult harness_fill_pattern(const struct harness *h, CUstream stream, CUdeviceptr dst, uint64_t n, int lane_bytes,
			      uint64_t pattern)
{
	unsigned long long n_ = n, pattern_ = pattern;
	void *params[] = {&dst, &n_, &lane_bytes, &pattern_};
	return harness_launch(h, stream, h->fill_pattern, n, 1, params);
}

CUresult harness_compare(const struct harness *h, CUstream stream, CUdeviceptr out, CUdeviceptr ref, uint64_t n,
			 int base, int lane_bytes, int per_element, double abs_tol, double rel_tol, uint64_t key,
			 CUdeviceptr res)
{
	unsigned long long n_ = n, key_ = key;
	void *params[] = {&out, &ref, &n_, &base, &lane_bytes, &per_element, &abs_tol, &rel_tol, &key_, &res};
	return harness_launch(h, stream, h->compare, n, 1, params);
}

CUresult harness_hash(const struct harness *h, CUstream stream, CUdeviceptr buf, uint64_t bytes, CUdeviceptr res)
{
	unsigned long long bytes_ = bytes;
	void *params[] = {&buf, &bytes_, &res};
	return harness_launch(h, stream, h->hash, (bytes + 7) / 8, 1, params);
}

CUresult harness_mask(const struct harness *h, CUstream stream, CUdeviceptr buf, uint64_t bytes, uint64_t key)
{
	unsigned long long bytes_ = bytes, key_ = key;
	void *params[] = {&buf, &bytes_, &key_};
	return harness_launch(h, stream, h->mask, (bytes + 7) / 8, 1, params);
}

CUresult harness_guard(const struct harness *h, CUstream stream, CUdeviceptr arena, CUdeviceptr guards,
		       unsigned nguards, uint64_t max_words, uint64_t salt, int check, CUdeviceptr res)
{
	unsigned long long salt_ = salt;
	void *params[] = {&arena, &guards, &salt_, &check, &res};
	return harness_launch(h, stream, h->guard, max_words, nguards, params); /* a grid row per guard */
}
