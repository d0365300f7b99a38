/* transpose.cu: out = in^T for a rows x cols matrix of floats, through a shared-memory tile.
 * Tuned: tile (tile x tile elements per block), padding (a column of padding to keep the
 * tile's columns off one bank) and elements_per_thread (rows of the tile each thread moves). */
extern "C" __global__ void transpose(float *out, const float *in, int rows, int cols)
{
	__shared__ float t[tile][tile + padding];
	const int rows_per_step = tile / elements_per_thread;
	int x = blockIdx.x * tile + threadIdx.x; /* column of in */
	int y = blockIdx.y * tile + threadIdx.y; /* row of in */
#pragma unroll
	for (int k = 0; k < tile; k += rows_per_step)
		if (x < cols && y + k < rows)
			t[threadIdx.y + k][threadIdx.x] = in[(size_t)(y + k) * cols + x];
	__syncthreads();
	x = blockIdx.y * tile + threadIdx.x; /* column of out: a row of in */
	y = blockIdx.x * tile + threadIdx.y; /* row of out: a column of in */
#pragma unroll
	for (int k = 0; k < tile; k += rows_per_step)
		if (x < rows && y + k < cols)
			out[(size_t)(y + k) * rows + x] = t[threadIdx.x][threadIdx.y + k];
}
