/* softmax.cu: row-wise softmax of a rows x cols matrix of floats (max-subtracted, so large
 * inputs do not overflow). Tuned: rows_per_block, num_warps (the block's warps, shared out
 * among its rows) and vector_width (floats per load: 1, 2 or 4). */
#define WARPS_PER_ROW (num_warps / rows_per_block)

template <int N> struct vec;
template <> struct vec<1> { typedef float type; };
template <> struct vec<2> { typedef float2 type; };
template <> struct vec<4> { typedef float4 type; };
typedef vec<vector_width>::type vfloat;

__device__ __forceinline__ float lane(const vfloat &v, int k) { return reinterpret_cast<const float *>(&v)[k]; }
__device__ __forceinline__ void set_lane(vfloat &v, int k, float x) { reinterpret_cast<float *>(&v)[k] = x; }

/* The reduction of x over the warps of one row: op is max (0) or sum (1). */
__device__ float row_reduce(float x, int op, float *scratch, int row_in_block, int warp_in_row, int lane_id)
{
	for (int offset = 16; offset > 0; offset /= 2) {
		float y = __shfl_xor_sync(0xffffffffu, x, offset);
		x = op ? x + y : fmaxf(x, y);
	}
	if (WARPS_PER_ROW == 1)
		return x;
	__syncthreads(); /* scratch is free again */
	if (lane_id == 0)
		scratch[row_in_block * WARPS_PER_ROW + warp_in_row] = x;
	__syncthreads();
	x = scratch[row_in_block * WARPS_PER_ROW];
	for (int w = 1; w < WARPS_PER_ROW; w++) {
		float y = scratch[row_in_block * WARPS_PER_ROW + w];
		x = op ? x + y : fmaxf(x, y);
	}
	return x;
}

extern "C" __global__ void softmax(float *out, const float *in, int rows, int cols)
{
	__shared__ float scratch[num_warps];
	const int warp = threadIdx.x / 32, lane_id = threadIdx.x % 32;
	const int row_in_block = warp / WARPS_PER_ROW, warp_in_row = warp % WARPS_PER_ROW;
	const int row = blockIdx.x * rows_per_block + row_in_block;
	const int threads = WARPS_PER_ROW * 32, t = warp_in_row * 32 + lane_id;
	const int vcols = cols / vector_width; /* cols is a multiple of 4 */
	const bool live = row < rows;          /* dead rows still reach every barrier */
	const vfloat *src = reinterpret_cast<const vfloat *>(in + (size_t)(live ? row : 0) * cols);
	vfloat *dst = reinterpret_cast<vfloat *>(out + (size_t)(live ? row : 0) * cols);

	float m = -__int_as_float(0x7f800000); /* -inf */
	for (int c = t; c < vcols; c += threads) {
		vfloat v = src[c];
#pragma unroll
		for (int k = 0; k < vector_width; k++)
			m = fmaxf(m, lane(v, k));
	}
	m = row_reduce(m, 0, scratch, row_in_block, warp_in_row, lane_id);
	float s = 0.0f;
	for (int c = t; c < vcols; c += threads) {
		vfloat v = src[c];
#pragma unroll
		for (int k = 0; k < vector_width; k++)
			s += __expf(lane(v, k) - m);
	}
	s = row_reduce(s, 1, scratch, row_in_block, warp_in_row, lane_id);
	const float inv = 1.0f / s;
	for (int c = t; live && c < vcols; c += threads) {
		vfloat v = src[c], r;
#pragma unroll
		for (int k = 0; k < vector_width; k++)
			set_lane(r, k, __expf(lane(v, k) - m) * inv);
		dst[c] = r;
	}
}
