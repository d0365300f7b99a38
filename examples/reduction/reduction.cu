/* reduction.cu: the sum of each row of a rows x cols matrix of floats, one block per row.
 * Tuned: block_size_x, elements_per_thread (loads in flight per thread per step) and
 * final_shuffle (1: warp shuffles end the reduction; 0: a shared-memory tree does). */
extern "C" __global__ void reduction(float *out, const float *in, int rows, int cols)
{
	const float *row = in + (size_t)blockIdx.x * cols;
	float sum = 0.0f;
	for (int base = threadIdx.x; base < cols; base += block_size_x * elements_per_thread) {
		float v[elements_per_thread];
#pragma unroll
		for (int k = 0; k < elements_per_thread; k++) {
			int c = base + k * block_size_x;
			v[k] = c < cols ? row[c] : 0.0f;
		}
#pragma unroll
		for (int k = 0; k < elements_per_thread; k++)
			sum += v[k];
	}
#if final_shuffle
	__shared__ float warp_sums[block_size_x / 32];
	for (int offset = 16; offset > 0; offset /= 2)
		sum += __shfl_down_sync(0xffffffffu, sum, offset);
	if (threadIdx.x % 32 == 0)
		warp_sums[threadIdx.x / 32] = sum;
	__syncthreads();
	if (threadIdx.x < 32) {
		sum = threadIdx.x < block_size_x / 32 ? warp_sums[threadIdx.x] : 0.0f;
		for (int offset = 16; offset > 0; offset /= 2)
			sum += __shfl_down_sync(0xffffffffu, sum, offset);
		if (threadIdx.x == 0)
			out[blockIdx.x] = sum;
	}
#else
	__shared__ float partial[block_size_x];
	partial[threadIdx.x] = sum;
	__syncthreads();
	for (int stride = block_size_x / 2; stride > 0; stride /= 2) {
		if (threadIdx.x < stride)
			partial[threadIdx.x] += partial[threadIdx.x + stride];
		__syncthreads();
	}
	if (threadIdx.x == 0)
		out[blockIdx.x] = partial[0];
#endif
}
