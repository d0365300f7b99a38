/* check_reference.c (benchmark, GPU): checks the baseline of a run of one of examples/ against
 * an independent computation, and times cuBLAS on the matmuls, so BENCHMARKS.md can claim both.
 *
 * kg-bench keeps the baseline's outputs on the spec's own inputs in RUN/reference/ and checks
 * every candidate against them; this recomputes those outputs from the same inputs (lib/kargs
 * fills them exactly as kg-bench does): on the host in double precision, or with cuBLAS for the
 * matmuls, whose C = A·B is computed in fp32 and rounded once, as the kernel does. One JSON line
 * per run: {"run", "example", "check": "passed"|"failed", "max_abs_err", "max_rel_err",
 * "bad_elements", and for the matmuls "cublas_ms" (median of --samples cold-L2 GEMMs with fp16
 * output, CUDA events) and "cublas_tflops", and for fused_matmul_act "activation_pass_ms" (a cold
 * copy of C: what applying the activation after cuBLAS would add)}. Exit status 1 when a check
 * failed. */
#include "common.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include "fileio.h"
#include "kargs.h"
#include "log.h"
#include "parse.h"
#include "stats.h"
#include "t1.h"
#include "xalloc.h"

struct problem {
	const char *run;
	struct t1_spec *spec;
	struct kargs ka;
	void **host;	  /* every argument's data on the spec's own inputs (input set 0) */
	void **expected;  /* each output, recomputed */
};

static size_t arg_index(const struct problem *p, const char *name)
{
	for (size_t k = 0; k < p->ka.n; k++)
		if (strcmp(p->ka.args[k].name, name) == 0)
			return k;
	log_error("%s/spec.json: no argument named '%s'", p->run, name);
	exit(2);
}

static const float *f32(const struct problem *p, const char *name) { return p->host[arg_index(p, name)]; }
static const uint16_t *f16(const struct problem *p, const char *name) { return p->host[arg_index(p, name)]; }
static int scalar(const struct problem *p, const char *name)
{
	int v;
	memcpy(&v, p->host[arg_index(p, name)], sizeof(v));
	return v;
}
static void *out(const struct problem *p, const char *name) { return p->expected[arg_index(p, name)]; }

static void vector_add(const struct problem *p)
{
	const float *a = f32(p, "a"), *b = f32(p, "b");
	float *c = out(p, "c");
	for (int i = 0, n = scalar(p, "n"); i < n; i++)
		c[i] = a[i] + b[i];
}

static void reduction(const struct problem *p)
{
	const float *in = f32(p, "in");
	float *sums = out(p, "out");
	const int rows = scalar(p, "rows"), cols = scalar(p, "cols");
	for (int r = 0; r < rows; r++) {
		double s = 0;
		for (int c = 0; c < cols; c++)
			s += in[(size_t)r * cols + c];
		sums[r] = (float)s;
	}
}

static void transpose(const struct problem *p)
{
	const float *in = f32(p, "in");
	float *t = out(p, "out");
	const int rows = scalar(p, "rows"), cols = scalar(p, "cols");
	for (int r = 0; r < rows; r++)
		for (int c = 0; c < cols; c++)
			t[(size_t)c * rows + r] = in[(size_t)r * cols + c];
}

static void softmax(const struct problem *p)
{
	const float *in = f32(p, "in");
	float *y = out(p, "out");
	const int rows = scalar(p, "rows"), cols = scalar(p, "cols");
	for (int r = 0; r < rows; r++) {
		const float *x = in + (size_t)r * cols;
		double m = -INFINITY, s = 0;
		for (int c = 0; c < cols; c++)
			m = fmax(m, x[c]);
		for (int c = 0; c < cols; c++)
			s += exp(x[c] - m);
		for (int c = 0; c < cols; c++)
			y[(size_t)r * cols + c] = (float)(exp(x[c] - m) / s);
	}
}

static void lora_expand(const struct problem *p)
{
	const uint16_t *x = f16(p, "x"), *w = f16(p, "w"), *y_in = f16(p, "y");
	const int *adapter = p->host[arg_index(p, "adapter")];
	uint16_t *y = out(p, "y");
	const int tokens = scalar(p, "tokens"), rank = scalar(p, "rank"), hidden = scalar(p, "hidden");
	for (int t = 0; t < tokens; t++)
		for (int h = 0; h < hidden; h++) {
			double acc = 0;
			for (int k = 0; k < rank; k++)
				acc += (double)half_to_float(x[(size_t)t * rank + k]) *
				       half_to_float(w[((size_t)adapter[t] * rank + k) * hidden + h]);
			const size_t i = (size_t)t * hidden + h;
			y[i] = half_from_float((float)(half_to_float(y_in[i]) + acc));
		}
}

#define CUDA_OK(call)                                                                                  \
	do {                                                                                           \
		cudaError_t e_ = (call);                                                               \
		if (e_ != cudaSuccess) {                                                               \
			log_error("%s: %s", #call, cudaGetErrorString(e_));                            \
			exit(3);                                                                       \
		}                                                                                      \
	} while (0)
#define CUBLAS_OK(call)                                                                                \
	do {                                                                                           \
		cublasStatus_t s_ = (call);                                                            \
		if (s_ != CUBLAS_STATUS_SUCCESS) {                                                     \
			log_error("%s: cuBLAS status %d", #call, (int)s_);                             \
			exit(3);                                                                       \
		}                                                                                      \
	} while (0)

/* Row-major C (M×N) = A (M×K) · B (K×N) is column-major Cᵀ = Bᵀ·Aᵀ: cuBLAS gets B first. */
static void gemm(cublasHandle_t h, const void *A, const void *B, void *C, cudaDataType c_type, int M, int N, int K)
{
	const float one = 1.0f, zero = 0.0f;
	CUBLAS_OK(cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, N, M, K, &one, B, CUDA_R_16F, N, A, CUDA_R_16F, K, &zero,
			       C, c_type, N, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

struct operands {
	cublasHandle_t h;
	void *A, *B, *C32, *C16;
	int M, N, K;
	size_t c_elems;
};

/* What is timed: cuBLAS's GEMM into C16, or the memory pass an activation applied after it
 * costs (a copy that reads and writes C once). */
enum op { OP_GEMM, OP_PASS };

static void run_op(const struct operands *o, enum op op)
{
	if (op == OP_GEMM)
		gemm(o->h, o->A, o->B, o->C16, CUDA_R_16F, o->M, o->N, o->K);
	else
		CUDA_OK(cudaMemcpyAsync(o->C32, o->C16, o->c_elems * 2, cudaMemcpyDeviceToDevice, 0));
}

struct timing {
	void *flush;
	size_t flush_bytes;
	int samples;
	cudaEvent_t start, stop;
};

/* The median of t->samples runs of op timed by CUDA events, each after the L2 is flushed. */
static double cold_median_ms(const struct timing *t, const struct operands *o, enum op op)
{
	double *ms = xcalloc((size_t)t->samples, sizeof(*ms));
	for (int i = 0; i < t->samples; i++) {
		float elapsed;
		CUDA_OK(cudaMemsetAsync(t->flush, i & 0xff, t->flush_bytes, 0));
		CUDA_OK(cudaEventRecord(t->start, 0));
		run_op(o, op);
		CUDA_OK(cudaEventRecord(t->stop, 0));
		CUDA_OK(cudaEventSynchronize(t->stop));
		CUDA_OK(cudaEventElapsedTime(&elapsed, t->start, t->stop));
		ms[i] = elapsed;
	}
	struct summary summary;
	summarize(ms, (size_t)t->samples, &summary);
	free(ms);
	return summary.median;
}

/* EPILOGUE as examples/matmul/matmul.cu applies it: 0 none, 1 ReLU, 2 LeakyReLU (slope 0.01).
 * Returns cuBLAS's median ms; with an epilogue, *pass_ms gets the median of a cold-L2
 * device-to-device copy of C, the memory pass an activation applied after cuBLAS would cost
 * (it reads and writes C once). */
static double matmul(const struct problem *p, int epilogue, int samples, double *pass_ms)
{
	const int M = scalar(p, "M"), N = scalar(p, "N"), K = scalar(p, "K");
	const size_t a_bytes = (size_t)M * K * 2, b_bytes = (size_t)K * N * 2, c_elems = (size_t)M * N;
	void *A, *B, *C32, *C16, *flush;
	int l2;
	CUDA_OK(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, 0));
	CUDA_OK(cudaMalloc(&A, a_bytes));
	CUDA_OK(cudaMalloc(&B, b_bytes));
	CUDA_OK(cudaMalloc(&C32, c_elems * 4));
	CUDA_OK(cudaMalloc(&C16, c_elems * 2));
	CUDA_OK(cudaMalloc(&flush, 2 * (size_t)l2));
	CUDA_OK(cudaMemcpy(A, f16(p, "A"), a_bytes, cudaMemcpyHostToDevice));
	CUDA_OK(cudaMemcpy(B, f16(p, "B"), b_bytes, cudaMemcpyHostToDevice));
	cublasHandle_t h;
	CUBLAS_OK(cublasCreate(&h));

	gemm(h, A, B, C32, CUDA_R_32F, M, N, K);
	float *c = xmalloc(c_elems * 4);
	CUDA_OK(cudaMemcpy(c, C32, c_elems * 4, cudaMemcpyDeviceToHost));
	uint16_t *expected = out(p, "C");
	for (size_t i = 0; i < c_elems; i++) {
		float x = c[i];
		if (epilogue == 1)
			x = fmaxf(x, 0.0f);
		else if (epilogue == 2)
			x = x > 0.0f ? x : 0.01f * x;
		expected[i] = half_from_float(x);
	}
	free(c);

	/* Timed as kg-bench times kernels: warmed up, each sample after the L2 is flushed. */
	struct timing t = {.flush = flush, .flush_bytes = 2 * (size_t)l2, .samples = samples};
	struct operands o = {h, A, B, C32, C16, M, N, K, c_elems};
	CUDA_OK(cudaEventCreate(&t.start));
	CUDA_OK(cudaEventCreate(&t.stop));
	for (int i = 0; i < 5; i++)
		run_op(&o, OP_GEMM);
	double gemm_ms = cold_median_ms(&t, &o, OP_GEMM);
	*pass_ms = epilogue ? cold_median_ms(&t, &o, OP_PASS) : NAN;
	cublasDestroy(h);
	cudaFree(A);
	cudaFree(B);
	cudaFree(C32);
	cudaFree(C16);
	cudaFree(flush);
	return gemm_ms;
}

static void load_problem(struct problem *p, const char *run)
{
	struct strbuf why;
	strbuf_init(&why);
	char *path = xasprintf("%s/spec.json", run);
	int unreadable;
	p->run = run;
	if (!(p->spec = t1_load(path, &unreadable)))
		exit(2);
	if (kargs_load(p->spec, &p->ka, &why)) {
		log_error("%s", why.buf);
		exit(2);
	}
	p->host = xcalloc(p->ka.n, sizeof(*p->host));
	p->expected = xcalloc(p->ka.n, sizeof(*p->expected));
	for (size_t k = 0; k < p->ka.n; k++) {
		p->host[k] = xmalloc(karg_bytes(&p->ka.args[k]) + 1);
		if (karg_fill(&p->ka.args[k], 0, p->host[k], &why)) {
			log_error("%s", why.buf);
			exit(2);
		}
		if (karg_is_output(&p->ka.args[k]))
			p->expected[k] = xcalloc(1, karg_bytes(&p->ka.args[k]) + 1);
	}
	free(path);
	strbuf_release(&why);
}

/* Compares the baseline's outputs (RUN/reference/K-NAME.bin, from kg-bench) with expected. */
static int check_outputs(const struct problem *p, cJSON *line)
{
	int passed = 1;
	double max_abs = 0, max_rel = 0;
	size_t bad = 0;
	for (size_t k = 0; k < p->ka.n; k++) {
		const struct karg *a = &p->ka.args[k];
		if (!p->expected[k] || a->memory != KARG_VECTOR)
			continue;
		char *path = xasprintf("%s/reference/%zu-%s.bin", p->run, k, a->name);
		size_t len;
		char *baseline = file_read_all(path, &len);
		if (!baseline || len != karg_bytes(a)) {
			log_error("%s: missing or not %zu bytes (bench the baseline first)", path, karg_bytes(a));
			exit(2);
		}
		struct karg_diff d;
		karg_compare(a, baseline, p->expected[k], &d);
		passed &= d.passed;
		max_abs = fmax(max_abs, d.max_abs_err);
		max_rel = fmax(max_rel, d.max_rel_err);
		bad += d.passed ? 0 : d.bad;
		free(baseline);
		free(path);
	}
	cJSON_AddStringToObject(line, "check", passed ? "passed" : "failed");
	cJSON_AddNumberToObject(line, "max_abs_err", max_abs);
	cJSON_AddNumberToObject(line, "max_rel_err", max_rel);
	cJSON_AddNumberToObject(line, "bad_elements", (double)bad);
	return passed;
}

int main(int argc, char **argv)
{
	int64_t samples = 30;
	int failed = 0, first = 1;
	log_init("check-reference");
	if (argc > 2 && strcmp(argv[1], "--samples") == 0) {
		first = parse_int64(argv[2], 1, 100000, &samples) ? argc : 3;
	}
	if (first >= argc) {
		fprintf(stderr, "Usage: check-reference [--samples N] RUN...\n");
		return 2;
	}
	for (int i = first; i < argc; i++) {
		struct problem p;
		load_problem(&p, argv[i]);
		cJSON *line = cJSON_CreateObject();
		cJSON_AddStringToObject(line, "run", p.run);
		cJSON_AddStringToObject(line, "example", p.spec->name);
		double cublas_ms = NAN, pass_ms = NAN;
		const char *name = p.spec->name;
		const cJSON *options = cJSON_GetObjectItemCaseSensitive(
			cJSON_GetObjectItemCaseSensitive(p.spec->json, "KernelSpecification"), "CompilerOptions");
		char *opts = options ? cJSON_PrintUnformatted(options) : xstrdup("");
		if (strcmp(name, "vector_add") == 0)
			vector_add(&p);
		else if (strcmp(name, "reduction") == 0)
			reduction(&p);
		else if (strcmp(name, "transpose") == 0)
			transpose(&p);
		else if (strcmp(name, "softmax") == 0)
			softmax(&p);
		else if (strcmp(name, "lora_expand") == 0)
			lora_expand(&p);
		else if (strcmp(name, "matmul") == 0 || strcmp(name, "fused_matmul_act") == 0)
			cublas_ms = matmul(&p, strstr(opts, "EPILOGUE=2") ? 2 : strstr(opts, "EPILOGUE=1") ? 1 : 0, (int)samples,
					   &pass_ms);
		else {
			log_error("%s: no reference for example '%s'", p.run, name);
			return 2;
		}
		free(opts);
		failed |= !check_outputs(&p, line);
		if (!isnan(cublas_ms)) {
			cJSON_AddNumberToObject(line, "cublas_ms", cublas_ms);
			cJSON_AddNumberToObject(line, "cublas_tflops",
						2.0 * scalar(&p, "M") * scalar(&p, "N") * scalar(&p, "K") / cublas_ms / 1e9);
		}
		if (!isnan(pass_ms))
			cJSON_AddNumberToObject(line, "activation_pass_ms", pass_ms);
		char *text = cJSON_PrintUnformatted(line);
		puts(text);
		fflush(stdout);
		free(text);
		cJSON_Delete(line);
	}
	return failed;
}
