/* harness.cu: kg-bench's own device code, compiled by NVRTC after lib/karg_elem.h: input
 * fills, output checks as reductions, input hashes, reference masks and guard bytes.
 *
 * Every kernel walks its elements with a grid-stride loop, so any grid size is correct;
 * reductions combine a warp's values with shuffles and then one atomic per warp into a
 * struct kg_result that the host zeroed, and reads back once. Names start with kg_harness_
 * so that CUPTI's records of these kernels are told apart from the ones being timed. */

#define KG_FULL_MASK 0xffffffffu

/* What one check leaves on the device; the host zeroes it before and reads it after.
 * Doubles that are never negative are kept as their bits, whose order as unsigned integers
 * is the numbers' order, so that atomicMax compares them. */
struct kg_result {
	unsigned long long bad;		  /* lanes (or bytes, or guard words) that failed */
	unsigned long long first_bad_inv; /* ~(the first failing index): atomicMax keeps the least */
	unsigned long long max_abs;	  /* bits of the largest |out - ref| (infinite when non-finite) */
	unsigned long long max_rel;	  /* bits of the largest |out - ref| / |ref| */
	unsigned long long ref_max;	  /* bits of the largest finite |ref| */
	unsigned long long hash;	  /* the input hash: a sum over words, so order does not matter */
	unsigned long long spare[2];
};

static __device__ __forceinline__ unsigned long long kg_index(void)
{
	return (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
}

static __device__ __forceinline__ unsigned long long kg_stride(void)
{
	return (unsigned long long)gridDim.x * blockDim.x;
}

/* splitmix64's finalizer: every input bit moves every output bit. */
static __device__ __forceinline__ unsigned long long kg_mix(unsigned long long z)
{
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* The mask of the 8-byte block at byte offset block * 8 of a reference. */
static __device__ __forceinline__ unsigned long long kg_mask_block(unsigned long long key, unsigned long long block)
{
	return kg_mix(key + (block + 1) * 0x9e3779b97f4a7c15ull);
}

static __device__ void kg_sum(unsigned long long *to, unsigned long long v)
{
	for (int d = 16; d > 0; d /= 2)
		v += __shfl_down_sync(KG_FULL_MASK, v, d);
	if ((threadIdx.x & 31) == 0 && v)
		atomicAdd(to, v);
}

static __device__ void kg_max(unsigned long long *to, unsigned long long v)
{
	for (int d = 16; d > 0; d /= 2) {
		unsigned long long o = __shfl_down_sync(KG_FULL_MASK, v, d);
		v = o > v ? o : v;
	}
	if ((threadIdx.x & 31) == 0 && v)
		atomicMax(to, v);
}

static __device__ __forceinline__ unsigned long long kg_bits(double d)
{
	return (unsigned long long)__double_as_longlong(d);
}

/* ---------------------------------------------------------------- fills */

/* Random lanes: lane i of dst (n lanes of lane_bytes) from karg_elem_random_bits. */
extern "C" __global__ void kg_harness_fill_random(unsigned char *dst, unsigned long long n, int base, int lane_bytes,
						  double range, unsigned long long seed, unsigned long long set)
{
	for (unsigned long long i = kg_index(); i < n; i += kg_stride())
		karg_elem_store_random(base, dst + i * lane_bytes, karg_elem_random_bits(seed, set, i), range);
}

/* Every lane of dst set to the lane_bytes of pattern (a Constant, or a poison). Lanes of 2, 4
 * and 8 bytes are stored whole: dst is aligned to them. */
extern "C" __global__ void kg_harness_fill_pattern(unsigned char *dst, unsigned long long n, int lane_bytes,
						   unsigned long long pattern)
{
	for (unsigned long long i = kg_index(); i < n; i += kg_stride()) {
		if (lane_bytes == 8)
			((unsigned long long *)dst)[i] = pattern;
		else if (lane_bytes == 4)
			((unsigned int *)dst)[i] = (unsigned int)pattern;
		else if (lane_bytes == 2)
			((unsigned short *)dst)[i] = (unsigned short)pattern;
		else
			for (int b = 0; b < lane_bytes; b++)
				dst[i * lane_bytes + b] = (unsigned char)(pattern >> (8 * b));
	}
}

/* ---------------------------------------------------------------- checks */

/* Compares n lanes of out with the masked reference ref (mask key) by karg_elem_check.
 * A custom type (base KARG_CUSTOM) is compared byte by byte (lane_bytes 1). A failing lane
 * reports its element, i / per_element. */
extern "C" __global__ void kg_harness_compare(const unsigned char *out, const unsigned char *ref, unsigned long long n,
					      int base, int lane_bytes, int per_element, double abs_tol, double rel_tol,
					      unsigned long long key, struct kg_result *res)
{
	unsigned long long bad = 0, first = 0, max_abs = 0, max_rel = 0, ref_max = 0;
	for (unsigned long long i = kg_index(); i < n; i += kg_stride()) {
		unsigned long long at = i * lane_bytes, m = kg_mask_block(key, at >> 3) >> (8 * (at & 7));
		unsigned char y[8];
		for (int b = 0; b < lane_bytes; b++)
			y[b] = ref[at + b] ^ (unsigned char)(m >> (8 * b));
		int ok;
		if (base == KARG_CUSTOM) {
			ok = out[at] == y[0];
		} else {
			double err, ref_abs;
			ok = karg_elem_check(base, out + at, y, abs_tol, rel_tol, &err, &ref_abs);
			if (ref_abs - ref_abs == 0 && kg_bits(ref_abs) > ref_max)
				ref_max = kg_bits(ref_abs);
			if (err - err == 0) {
				if (kg_bits(err) > max_abs)
					max_abs = kg_bits(err);
				if (ref_abs != 0 && kg_bits(err / ref_abs) > max_rel)
					max_rel = kg_bits(err / ref_abs);
			} else if (!ok) {
				max_abs = max_rel = kg_bits(__longlong_as_double(0x7ff0000000000000ll));
			}
		}
		if (!ok && bad++ == 0)
			first = ~(i / per_element);
	}
	kg_sum(&res->bad, bad);
	kg_max(&res->first_bad_inv, first);
	kg_max(&res->max_abs, max_abs);
	kg_max(&res->max_rel, max_rel);
	kg_max(&res->ref_max, ref_max);
}

/* Adds the hash of bytes at buf (8-aligned) to res->hash: each 8-byte word mixed with its
 * position, summed, so that any changed word changes the sum. */
extern "C" __global__ void kg_harness_hash(const unsigned char *buf, unsigned long long bytes, struct kg_result *res)
{
	unsigned long long sum = 0, words = (bytes + 7) / 8;
	for (unsigned long long w = kg_index(); w < words; w += kg_stride()) {
		unsigned long long v = 0;
		if (w * 8 + 8 <= bytes) {
			v = *(const unsigned long long *)(buf + w * 8);
		} else {
			for (unsigned long long b = w * 8; b < bytes; b++)
				v |= (unsigned long long)buf[b] << (8 * (b - w * 8));
		}
		sum += kg_mix(v ^ kg_mix(w + 0x632be59bd9b4e019ull));
	}
	kg_sum(&res->hash, sum);
}

/* XORs bytes at buf (8-aligned) with the key's mask: a reference on the device is kept
 * masked, so a kernel that reads memory it was not given finds no answers there. */
extern "C" __global__ void kg_harness_mask(unsigned char *buf, unsigned long long bytes, unsigned long long key)
{
	unsigned long long words = (bytes + 7) / 8;
	for (unsigned long long w = kg_index(); w < words; w += kg_stride()) {
		unsigned long long m = kg_mask_block(key, w);
		if (w * 8 + 8 <= bytes) {
			*(unsigned long long *)(buf + w * 8) ^= m;
		} else {
			for (unsigned long long b = w * 8; b < bytes; b++)
				buf[b] ^= (unsigned char)(m >> (8 * (b - w * 8)));
		}
	}
}

/* ---------------------------------------------------------------- guards */

/* A guard: words 8-byte words at byte offset offset of the arena. */
struct kg_guard {
	unsigned long long offset, words;
};

/* Writes (check 0) or checks (check 1) the guard words of guards[blockIdx.y]: word w at
 * arena byte a holds kg_mix(salt ^ a). A check counts the words that changed and keeps the
 * least changed byte offset in res->first_bad_inv. */
extern "C" __global__ void kg_harness_guard(unsigned char *arena, const struct kg_guard *guards, unsigned long long salt,
					    int check, struct kg_result *res)
{
	const struct kg_guard g = guards[blockIdx.y];
	unsigned long long bad = 0, first = 0;
	for (unsigned long long w = kg_index(); w < g.words; w += kg_stride()) {
		unsigned long long at = g.offset + w * 8, want = kg_mix(salt ^ at);
		unsigned long long *p = (unsigned long long *)(arena + at);
		if (!check) {
			*p = want;
		} else if (*p != want && bad++ == 0) {
			first = ~at;
		}
	}
	if (check) {
		kg_sum(&res->bad, bad);
		kg_max(&res->first_bad_inv, first);
	}
}
