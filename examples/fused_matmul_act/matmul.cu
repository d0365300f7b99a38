/* matmul.cu: C = A·B for row-major fp16 A (M×K), B (K×N) and C (M×N), accumulated in fp32 on
 * the tensor cores (wmma 16×16×16), the tiles staged through a num_stages-deep cp.async pipeline.
 * Tuned: block_m × block_n × block_k (the block's tile), num_warps, num_stages and group_m (how
 * many block rows run together and share B's tiles in L2, as Triton orders them). EPILOGUE picks
 * an activation applied before the store: 0 none, 1 ReLU, 2 LeakyReLU (fused_matmul_act). M may
 * be anything; N and K must be multiples of 8 (rows of 16 bytes, the cp.async unit). */
#include <cuda_fp16.h>
#include <mma.h>

using namespace nvcuda;

#ifndef EPILOGUE
#define EPILOGUE 0
#endif
#ifndef LEAKY_SLOPE
#define LEAKY_SLOPE 0.01f
#endif

/* Shared rows are padded by 8 halves (16 bytes) so that the rows a fragment load reads start
 * in different banks. */
constexpr int PAD = 8;
constexpr int THREADS = num_warps * 32;
constexpr int A_LD = block_k + PAD, B_LD = block_n + PAD;
constexpr int STAGE_HALVES = block_m * A_LD + block_k * B_LD;
/* The epilogue turns one 16×16 fp32 fragment at a time into fp16 through this much of a warp's
 * shared memory (a row of 20 floats keeps the wmma store 16-byte aligned). */
constexpr int OUT_LD = 20, OUT_FLOATS_PER_WARP = 16 * OUT_LD;

/* The warps form a WARPS_M × WARPS_N grid over the block's tile: of the splits whose warp tile is
 * whole 16×16 fragments, the one closest to square (fewest fragment loads per mma). */
__host__ __device__ constexpr int pick_warps_m()
{
	int best = 0, best_gap = 1 << 30;
	for (int wm = 1; wm <= num_warps; wm *= 2) {
		const int wn = num_warps / wm;
		if (wm * wn != num_warps || block_m % (16 * wm) != 0 || block_n % (16 * wn) != 0)
			continue;
		const int gap = block_m / wm > block_n / wn ? block_m / wm - block_n / wn : block_n / wn - block_m / wm;
		if (gap < best_gap) {
			best = wm;
			best_gap = gap;
		}
	}
	return best;
}
constexpr int WARPS_M = pick_warps_m(), WARPS_N = WARPS_M ? num_warps / WARPS_M : 1;
static_assert(WARPS_M > 0, "no split of num_warps gives every warp whole 16x16 fragments of the tile");
constexpr int WARP_M = block_m / WARPS_M, WARP_N = block_n / WARPS_N;
constexpr int FRAGS_M = WARP_M / 16, FRAGS_N = WARP_N / 16;
static_assert(block_k % 16 == 0, "block_k must be a multiple of 16");

/* 16 bytes from global to shared memory, bypassing L1; zeros when the source is out of range
 * (src-size 0), so that edge tiles need no other care. */
__device__ __forceinline__ void cp_async_16(void *dst, const void *src, bool in_range)
{
	const unsigned s = (unsigned)__cvta_generic_to_shared(dst);
	asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(s), "l"(src), "r"(in_range ? 16 : 0));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int pending> __device__ __forceinline__ void cp_async_wait()
{
	asm volatile("cp.async.wait_group %0;\n" ::"n"(pending));
}

/* Starts the copies of A's block_m × block_k tile and B's block_k × block_n tile at k0. */
__device__ __forceinline__ void load_stage(half *sa, half *sb, const half *A, const half *B, int M, int N, int K,
					   int row0, int col0, int k0)
{
	constexpr int A_CHUNKS_PER_ROW = block_k / 8, B_CHUNKS_PER_ROW = block_n / 8;
	for (int c = threadIdx.x; c < block_m * A_CHUNKS_PER_ROW; c += THREADS) {
		const int r = c / A_CHUNKS_PER_ROW, k = (c % A_CHUNKS_PER_ROW) * 8;
		const bool in_range = row0 + r < M && k0 + k < K;
		cp_async_16(sa + r * A_LD + k, in_range ? A + (size_t)(row0 + r) * K + k0 + k : A, in_range);
	}
	for (int c = threadIdx.x; c < block_k * B_CHUNKS_PER_ROW; c += THREADS) {
		const int r = c / B_CHUNKS_PER_ROW, n = (c % B_CHUNKS_PER_ROW) * 8;
		const bool in_range = k0 + r < K && col0 + n < N;
		cp_async_16(sb + r * B_LD + n, in_range ? B + (size_t)(k0 + r) * N + col0 + n : B, in_range);
	}
}

__device__ __forceinline__ float activate(float x)
{
#if EPILOGUE == 1
	return fmaxf(x, 0.0f);
#elif EPILOGUE == 2
	return x > 0.0f ? x : LEAKY_SLOPE * x;
#else
	return x;
#endif
}

extern "C" __global__ void __launch_bounds__(THREADS) matmul(half *C, const half *A, const half *B, int M, int N, int K)
{
	extern __shared__ __align__(128) unsigned char smem[];
	half *const stages = reinterpret_cast<half *>(smem);

	/* Block order: group_m block rows at a time, column by column, so that the blocks running
	 * together read the same B tiles. */
	const int grid_m = (M + block_m - 1) / block_m, grid_n = (N + block_n - 1) / block_n;
	const int per_group = group_m * grid_n, first_m = (int)blockIdx.x / per_group * group_m;
	const int rows_here = min(grid_m - first_m, group_m), in_group = (int)blockIdx.x % per_group;
	const int row0 = (first_m + in_group % rows_here) * block_m, col0 = in_group / rows_here * block_n;

	const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
	const int warp_row = warp / WARPS_N * WARP_M, warp_col = warp % WARPS_N * WARP_N;

	wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[FRAGS_M][FRAGS_N];
#pragma unroll
	for (int i = 0; i < FRAGS_M; i++)
#pragma unroll
		for (int j = 0; j < FRAGS_N; j++)
			wmma::fill_fragment(acc[i][j], 0.0f);

	const int k_tiles = (K + block_k - 1) / block_k;
#pragma unroll
	for (int s = 0; s < num_stages - 1; s++) {
		if (s < k_tiles)
			load_stage(stages + s * STAGE_HALVES, stages + s * STAGE_HALVES + block_m * A_LD, A, B, M, N, K,
				   row0, col0, s * block_k);
		cp_async_commit(); /* empty groups too: the count below stays right */
	}
	for (int kt = 0; kt < k_tiles; kt++) {
		cp_async_wait<num_stages - 2>(); /* tile kt has landed */
		__syncthreads();		 /* ... for every thread, and tile kt - 1 is no longer read */
		const int next = kt + num_stages - 1;
		if (next < k_tiles) {
			half *const s = stages + next % num_stages * STAGE_HALVES;
			load_stage(s, s + block_m * A_LD, A, B, M, N, K, row0, col0, next * block_k);
		}
		cp_async_commit();

		const half *const sa = stages + kt % num_stages * STAGE_HALVES, *const sb = sa + block_m * A_LD;
#pragma unroll
		for (int kk = 0; kk < block_k; kk += 16) {
			wmma::fragment<wmma::matrix_a, 16, 16, 16, half, wmma::row_major> a[FRAGS_M];
			wmma::fragment<wmma::matrix_b, 16, 16, 16, half, wmma::row_major> b[FRAGS_N];
#pragma unroll
			for (int i = 0; i < FRAGS_M; i++)
				wmma::load_matrix_sync(a[i], sa + (warp_row + i * 16) * A_LD + kk, A_LD);
#pragma unroll
			for (int j = 0; j < FRAGS_N; j++)
				wmma::load_matrix_sync(b[j], sb + kk * B_LD + warp_col + j * 16, B_LD);
#pragma unroll
			for (int i = 0; i < FRAGS_M; i++)
#pragma unroll
				for (int j = 0; j < FRAGS_N; j++)
					wmma::mma_sync(acc[i][j], a[i], b[j], acc[i][j]);
		}
	}
	cp_async_wait<0>();
	__syncthreads(); /* the stages become the epilogue's scratch */

	float *const out = reinterpret_cast<float *>(smem) + warp * OUT_FLOATS_PER_WARP;
	const int r = lane / 2, c = lane % 2 * 8; /* each lane converts and stores 8 of a row's 16 */
#pragma unroll
	for (int i = 0; i < FRAGS_M; i++)
#pragma unroll
		for (int j = 0; j < FRAGS_N; j++) {
			wmma::store_matrix_sync(out, acc[i][j], OUT_LD, wmma::mem_row_major);
			__syncwarp();
			const int row = row0 + warp_row + i * 16 + r, col = col0 + warp_col + j * 16 + c;
			__align__(16) half h[8];
#pragma unroll
			for (int e = 0; e < 8; e++)
				h[e] = __float2half_rn(activate(out[r * OUT_LD + c + e]));
			if (row < M && col + 8 <= N)
				*reinterpret_cast<uint4 *>(C + (size_t)row * N + col) = *reinterpret_cast<const uint4 *>(h);
			else
				for (int e = 0; row < M && e < 8 && col + e < N; e++)
					C[(size_t)row * N + col + e] = h[e];
			__syncwarp(); /* out is rewritten by the next fragment */
		}
}
