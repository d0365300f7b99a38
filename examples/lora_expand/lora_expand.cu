/* lora_expand.cu: the expand step of many LoRA adapters served at once, y[t] += x[t] · W[adapter[t]]
 * for tokens × rank x, adapters × rank × hidden W and tokens × hidden y, in fp16 with fp32 sums:
 * each token gathers its own adapter's rank × hidden matrix, a skinny GEMM per adapter. Tuned:
 * tokens_per_block (tokens sharing a block, whose x rows it stages once), block_threads and
 * vector_width (halves per load and store of W and y). rank ≤ 64; hidden a multiple of 8. */
#include <cuda_fp16.h>

constexpr int MAX_RANK = 64;

/* vector_width halves moved as one load: 2, 4, 8 halves are 4, 8, 16 bytes. */
template <int N> struct halves { typedef half type; };
template <> struct halves<2> { typedef unsigned type; };
template <> struct halves<4> { typedef uint2 type; };
template <> struct halves<8> { typedef uint4 type; };
typedef halves<vector_width>::type vhalf;

union lanes {
	vhalf v;
	half h[vector_width];
};

extern "C" __global__ void __launch_bounds__(block_threads)
	lora_expand(half *y, const half *x, const half *w, const int *adapter, int tokens, int rank, int hidden)
{
	__shared__ float xs[tokens_per_block][MAX_RANK];
	const int t0 = blockIdx.y * tokens_per_block;
	for (int i = threadIdx.x; i < tokens_per_block * rank; i += block_threads) {
		const int t = t0 + i / rank;
		xs[i / rank][i % rank] = t < tokens ? __half2float(x[(size_t)t * rank + i % rank]) : 0.0f;
	}
	__syncthreads();
	const int col = (blockIdx.x * block_threads + threadIdx.x) * vector_width;
	if (col >= hidden || rank > MAX_RANK)
		return;
	for (int tt = 0; tt < tokens_per_block && t0 + tt < tokens; tt++) {
		const int t = t0 + tt;
		const half *wa = w + (size_t)adapter[t] * rank * hidden + col;
		float acc[vector_width] = {};
		for (int k = 0; k < rank; k++) {
			lanes wk;
			wk.v = *reinterpret_cast<const vhalf *>(wa + (size_t)k * hidden);
#pragma unroll
			for (int e = 0; e < vector_width; e++)
				acc[e] += xs[tt][k] * __half2float(wk.h[e]);
		}
		vhalf *yt = reinterpret_cast<vhalf *>(y + (size_t)t * hidden + col);
		lanes out;
		out.v = *yt;
#pragma unroll
		for (int e = 0; e < vector_width; e++)
			out.h[e] = __float2half_rn(__half2float(out.h[e]) + acc[e]);
		*yt = out.v;
	}
}
