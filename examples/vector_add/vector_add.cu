/* vector_add.cu: c = a + b over n floats; the smallest kernel worth a tuning space.
 * Each block covers block_size_x * items_per_thread elements; both come from -D options. */
extern "C" __global__ void vector_add(float *c, const float *a, const float *b, int n)
{
	int i = blockIdx.x * (block_size_x * items_per_thread) + threadIdx.x;
#pragma unroll
	for (int k = 0; k < items_per_thread; k++, i += block_size_x)
		if (i < n)
			c[i] = a[i] + b[i];
}
