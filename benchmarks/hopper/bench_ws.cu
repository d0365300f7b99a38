/* bench_ws.cu: times one configuration of examples/matmul/matmul.cu patched with wgmma_tma_ws.diff
 * (KFILE, its tuning macros given with -D) against cublasGemmEx on the same inputs, L2 flushed
 * before each run, and checks it against cuBLAS and, at 64 entries, an fp64 sum on the host.
 * Usage: bench_ws M N K [reps]; GRID=n caps the grid (the kernel then loops over its tiles).
 * Prints one line; exits 2 when the check fails. */
#include <cublas_v2.h>
#include <cuda.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include <cstring>
#include KFILE

#define CK(x)                                                                                           \
	do {                                                                                            \
		cudaError_t e_ = (x);                                                                   \
		if (e_ != cudaSuccess) {                                                                \
			fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
			exit(1);                                                                        \
		}                                                                                       \
	} while (0)

static TensorMap encode(const void *base, unsigned long long inner, unsigned long long outer, unsigned box_inner,
			unsigned box_outer)
{
	static_assert(sizeof(TensorMap) == sizeof(CUtensorMap), "TensorMap is a CUtensorMap");
	CUtensorMap m;
	cuuint64_t dims[2] = {inner, outer}, strides[1] = {inner * 2};
	cuuint32_t box[2] = {box_inner, box_outer}, estr[2] = {1, 1};
	CUresult r = cuTensorMapEncodeTiled(&m, CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 2, const_cast<void *>(base), dims,
					    strides, box, estr, CU_TENSOR_MAP_INTERLEAVE_NONE,
					    CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
					    CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
	if (r != CUDA_SUCCESS) {
		fprintf(stderr, "cuTensorMapEncodeTiled: %d\n", (int)r);
		exit(1);
	}
	TensorMap t;
	memcpy(&t, &m, sizeof t);
	return t;
}

int main(int argc, char **argv)
{
	const int M = atoi(argv[1]), N = atoi(argv[2]), K = atoi(argv[3]), reps = argc > 4 ? atoi(argv[4]) : 30;
	std::vector<half> hA((size_t)M * K), hB((size_t)K * N);
	srand(1234 + M + N + K);
	for (auto &x : hA)
		x = __float2half((rand() / (float)RAND_MAX) * 2.0f - 1.0f);
	for (auto &x : hB)
		x = __float2half((rand() / (float)RAND_MAX) * 2.0f - 1.0f);
	half *A, *B, *C, *R;
	CK(cudaMalloc(&A, hA.size() * 2));
	CK(cudaMalloc(&B, hB.size() * 2));
	CK(cudaMalloc(&C, (size_t)M * N * 2));
	CK(cudaMalloc(&R, (size_t)M * N * 2));
	CK(cudaMemcpy(A, hA.data(), hA.size() * 2, cudaMemcpyHostToDevice));
	CK(cudaMemcpy(B, hB.data(), hB.size() * 2, cudaMemcpyHostToDevice));
	const size_t flush_bytes = 256u << 20;
	void *flush;
	CK(cudaMalloc(&flush, flush_bytes));

	const TensorMap ta = encode(A, K, M, 64, block_m), tb = encode(B, N, K, 64, 64);
	const int smem = 1024 + num_stages * (STAGE_BYTES + 16) + (num_warps - 4) * OUT_WARP_BYTES;
	CK(cudaFuncSetAttribute(matmul, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
	const int tiles = ((M + block_m - 1) / block_m) * ((N + block_n - 1) / block_n);
	int grid = getenv("GRID") ? std::min(tiles, atoi(getenv("GRID"))) : tiles;
	
	cublasHandle_t h;
	cublasCreate(&h);
	const float one = 1.0f, zero = 0.0f;
	auto run_cublas = [&]() {
		/* row-major C = A·B is column-major C^T = B^T·A^T */
		cublasStatus_t s = cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, N, M, K, &one, B, CUDA_R_16F, N, A,
						CUDA_R_16F, K, &zero, R, CUDA_R_16F, N, CUBLAS_COMPUTE_32F,
						CUBLAS_GEMM_DEFAULT);
		if (s != CUBLAS_STATUS_SUCCESS) {
			fprintf(stderr, "cublasGemmEx: %d\n", (int)s);
			exit(1);
		}
	};
	auto run_ours = [&]() { matmul<<<grid, THREADS, smem>>>(C, A, B, M, N, K, ta, tb); };

	/* correctness: poison C, run once, compare to cuBLAS */
	CK(cudaMemset(C, 0xff, (size_t)M * N * 2)); /* NaN */
	run_ours();
	CK(cudaGetLastError());
	run_cublas();
	CK(cudaDeviceSynchronize());
	std::vector<half> hC((size_t)M * N), hR((size_t)M * N);
	CK(cudaMemcpy(hC.data(), C, hC.size() * 2, cudaMemcpyDeviceToHost));
	CK(cudaMemcpy(hR.data(), R, hR.size() * 2, cudaMemcpyDeviceToHost));
	double num = 0, den = 0, maxabs = 0;
	size_t bad = 0;
	for (size_t i = 0; i < hC.size(); i++) {
		const double c = __half2float(hC[i]), r = __half2float(hR[i]);
		if (!std::isfinite(c))
			bad++;
		num += (c - r) * (c - r);
		den += r * r;
		maxabs = std::max(maxabs, std::fabs(c - r));
	}
	/* and a few entries against an fp64 reference on the CPU */
	double ref_err = 0;
	for (int t = 0; t < 64; t++) {
		const int i = rand() % M, j = rand() % N;
		double s = 0;
		for (int k = 0; k < K; k++)
			s += (double)__half2float(hA[(size_t)i * K + k]) * __half2float(hB[(size_t)k * N + j]);
		ref_err = std::max(ref_err, std::fabs(s - __half2float(hC[(size_t)i * N + j])) / (std::fabs(s) + 1.0));
	}
	const double rel = bad ? NAN : std::sqrt(num / den);

	cudaEvent_t e0, e1;
	cudaEventCreate(&e0);
	cudaEventCreate(&e1);
	auto time_it = [&](auto fn) {
		std::vector<float> ts;
		for (int r = 0; r < reps + 3; r++) {
			CK(cudaMemsetAsync(flush, r, flush_bytes));
			cudaEventRecord(e0);
			fn();
			cudaEventRecord(e1);
			CK(cudaEventSynchronize(e1));
			float ms;
			cudaEventElapsedTime(&ms, e0, e1);
			if (r >= 3)
				ts.push_back(ms);
		}
		CK(cudaGetLastError());
		std::sort(ts.begin(), ts.end());
		return ts[ts.size() / 2];
	};
	const float t_ours = time_it(run_ours), t_cublas = time_it(run_cublas);
	const float t_ours2 = time_it(run_ours);
	const double flop = 2.0 * M * N * K;
	printf("%-24s g%-4d %5dx%5dx%5d  ours %.4f ms (%.4f) %6.1f TF  cublas %.4f ms %6.1f TF  ratio %.3f  relerr %.2e fp64err %.2e nonfinite %zu\n",
	       VARIANT, grid, M, N, K, t_ours, t_ours2, flop / t_ours / 1e9, t_cublas, flop / t_cublas / 1e9, t_cublas / t_ours, rel,
	       ref_err, bad);
	return rel < 1e-2 && !bad ? 0 : 2;
}
