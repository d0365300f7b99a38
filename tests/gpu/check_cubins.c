/* check_cubins.c: loads cubins that kg-build wrote for examples/vector_add and runs each one
 * through the CUDA driver, checking every element of c = a + b on random inputs.
 * Reads lines "CUBIN FUNCTION GX GY GZ BX BY BZ" on stdin; argument: n. Exit 1 on any failure. */
#include <cuda.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int check(CUresult rc, const char *what, const char *path)
{
	if (rc == CUDA_SUCCESS)
		return 0;
	const char *name = "?";
	cuGetErrorName(rc, &name);
	fprintf(stderr, "check_cubins: %s: %s: %s\n", path, what, name);
	return -1;
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: check_cubins N < lines\n");
		return 2;
	}
	int n = atoi(argv[1]);
	size_t bytes = (size_t)n * sizeof(float);
	float *a = malloc(bytes), *b = malloc(bytes), *c = malloc(bytes);
	srand(12345);
	for (int i = 0; i < n; i++) {
		a[i] = (float)rand() / RAND_MAX - 0.5f;
		b[i] = (float)rand() / RAND_MAX * 8.0f - 4.0f;
	}
	CUdevice dev;
	CUcontext ctx;
	CUdeviceptr da, db, dc;
	char name[256];
	if (check(cuInit(0), "cuInit", "-") || check(cuDeviceGet(&dev, 0), "cuDeviceGet", "-") ||
	    check(cuDeviceGetName(name, sizeof(name), dev), "cuDeviceGetName", "-") ||
	    check(cuCtxCreate(&ctx, NULL, 0, dev), "cuCtxCreate", "-") || check(cuMemAlloc(&da, bytes), "cuMemAlloc", "-") ||
	    check(cuMemAlloc(&db, bytes), "cuMemAlloc", "-") || check(cuMemAlloc(&dc, bytes), "cuMemAlloc", "-") ||
	    check(cuMemcpyHtoD(da, a, bytes), "copy a", "-") || check(cuMemcpyHtoD(db, b, bytes), "copy b", "-"))
		return 1;
	printf("device: %s, n = %d\n", name, n);
	char path[4096], function[512];
	unsigned g[3], k[3];
	int ok = 0, failed = 0;
	while (scanf("%4095s %511s %u %u %u %u %u %u", path, function, &g[0], &g[1], &g[2], &k[0], &k[1], &k[2]) == 8) {
		CUmodule mod;
		CUfunction fn;
		void *args[] = {&dc, &da, &db, &n};
		/* NaN in every output element: an element the kernel skips cannot pass. */
		if (check(cuModuleLoad(&mod, path), "cuModuleLoad", path) ||
		    check(cuModuleGetFunction(&fn, mod, function), "cuModuleGetFunction", path) ||
		    check(cuMemsetD32(dc, 0x7fc00000u, (size_t)n), "cuMemsetD32", path) ||
		    check(cuLaunchKernel(fn, g[0], g[1], g[2], k[0], k[1], k[2], 0, NULL, args, NULL), "cuLaunchKernel", path) ||
		    check(cuCtxSynchronize(), "cuCtxSynchronize", path) || check(cuMemcpyDtoH(c, dc, bytes), "copy c", path)) {
			failed++;
			continue;
		}
		int bad = -1;
		for (int i = 0; i < n && bad < 0; i++)
			if (c[i] != a[i] + b[i] || isnan(c[i]))
				bad = i;
		if (bad >= 0) {
			printf("FAIL %s grid %u block %u: c[%d] = %g, expected %g\n", path, g[0], k[0], bad, c[bad], a[bad] + b[bad]);
			failed++;
		} else {
			ok++;
		}
		cuModuleUnload(mod);
	}
	printf("%d cubins ran and matched c = a + b on all %d elements; %d failed\n", ok, n, failed);
	return failed || ok == 0;
}
