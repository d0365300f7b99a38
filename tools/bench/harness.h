/* harness.h: kg-bench's own device code (harness.cu after lib/karg_elem.h) compiled by NVRTC
 * once per machine, and the calls that enqueue it: fills, checks, hashes, masks, guards. */
#ifndef KG_BENCH_HARNESS_H
#define KG_BENCH_HARNESS_H

#include "common.h"

#include <stddef.h>
#include <stdint.h>

#include "gpu.h"
#include "xalloc.h"

/* The texts NVRTC compiles, made at build time: lib/karg_elem.h (which generated Generator
 * fills use too) and harness.cu, which goes after it. */
extern const char kg_karg_elem_source[], kg_harness_kernels_source[];

/* What one check leaves on the device (harness.cu's struct kg_result, word for word). */
struct harness_result {
	uint64_t bad;		/* lanes, bytes or guard words that failed */
	uint64_t first_bad_inv; /* ~(the first failing element or arena offset); 0 when none */
	uint64_t max_abs;	/* bits of a double: the largest |out - ref| */
	uint64_t max_rel;	/* bits of the largest |out - ref| / |ref| */
	uint64_t ref_max;	/* bits of the largest finite |ref| */
	uint64_t hash;		/* an input hash */
	uint64_t spare[2];
};

/* A guard region of the arena, as harness.cu's struct kg_guard: bytes written with a known
 * pattern before and after every buffer, so that a write past a buffer's end (or before
 * its start) changes them. */
struct harness_guard {
	uint64_t offset, words; /* bytes from the arena's start; 8-byte words */
};

struct harness {
	CUmodule module;
	CUfunction fill_random, fill_pattern, compare, hash, mask, guard;
	unsigned max_blocks; /* blocks of a grid-stride launch: enough to fill the GPU */
};

/* Compiles source with NVRTC for the current context's GPU (--fmad=false) and loads it as
 * *module. The image is kept in cache_dir/harness/ (when cache_dir is not NULL) under a
 * hash of the source, options and NVRTC version, so a later process loads it at once.
 * Returns 0, or -1 with why set (no NVRTC, a compile error with its log). */
int harness_module(const char *source, const char *cache_dir, CUmodule *module, struct strbuf *why);

/* Compiles (or finds in the cache) and loads karg_elem.h and harness.cu. Returns 0, or -1
 * with why set. */
int harness_load(struct harness *h, const char *cache_dir, struct strbuf *why);

/* Each call enqueues one launch on stream and returns the driver's result. Sizes are in
 * lanes (n) of lane_bytes, or bytes; pointers are device addresses; res is a device
 * struct harness_result the caller zeroed. */
CUresult harness_fill_random(const struct harness *h, CUstream stream, CUdeviceptr dst, uint64_t n, int base,
			     int lane_bytes, double range, uint64_t seed, uint64_t set);
CUresult harness_fill_pattern(const struct harness *h, CUstream stream, CUdeviceptr dst, uint64_t n, int lane_bytes,
			      uint64_t pattern);
CUresult harness_compare(const struct harness *h, CUstream stream, CUdeviceptr out, CUdeviceptr ref, uint64_t n,
			 int base, int lane_bytes, int per_element, double abs_tol, double rel_tol, uint64_t key,
			 CUdeviceptr res);
CUresult harness_hash(const struct harness *h, CUstream stream, CUdeviceptr buf, uint64_t bytes, CUdeviceptr res);
CUresult harness_mask(const struct harness *h, CUstream stream, CUdeviceptr buf, uint64_t bytes, uint64_t key);
/* check 0 writes the guards' pattern, check 1 counts the words that differ from it;
 * max_words is the largest guard's. */
CUresult harness_guard(const struct harness *h, CUstream stream, CUdeviceptr arena, CUdeviceptr guards,
		       unsigned nguards, uint64_t max_words, uint64_t salt, int check, CUdeviceptr res);

/* Enqueues a grid-stride kernel of the harness (or a generator) over n items. */
CUresult harness_launch(const struct harness *h, CUstream stream, CUfunction f, uint64_t n, unsigned grid_y,
			void **params);

#endif
