/* launch_cubin.c: launches one kernel of a cubin once, on buffers of random floats, for ncu to
 * profile beside kg-bench --metrics (tests/gpu/32-kg-bench-metrics.bats).
 * Usage: launch_cubin CUBIN FUNCTION GX GY GZ BX BY BZ ARG...; each ARG is buf:BYTES (a device
 * buffer of random floats in [-1, 1)) or i32:VALUE. Exit 1 on any CUDA error. */
#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int check(CUresult rc, const char *what)
{
	if (rc == CUDA_SUCCESS)
		return 0;
	const char *name = "?";
	cuGetErrorName(rc, &name);
	fprintf(stderr, "launch_cubin: %s: %s\n", what, name);
	return -1;
}

int main(int argc, char **argv)
{
	if (argc < 9) {
		fprintf(stderr, "usage: launch_cubin CUBIN FUNCTION GX GY GZ BX BY BZ ARG...\n");
		return 2;
	}
	unsigned dims[6];
	for (int d = 0; d < 6; d++)
		dims[d] = (unsigned)strtoul(argv[3 + d], NULL, 10);
	int nargs = argc - 9;
	void **params = calloc((size_t)nargs + 1, sizeof(*params));
	CUdeviceptr *ptrs = calloc((size_t)nargs + 1, sizeof(*ptrs));
	int *ints = calloc((size_t)nargs + 1, sizeof(*ints));
	CUdevice dev;
	CUcontext ctx;
	CUmodule mod;
	CUfunction fn;
	if (check(cuInit(0), "cuInit") || check(cuDeviceGet(&dev, 0), "cuDeviceGet") ||
	    check(cuDevicePrimaryCtxRetain(&ctx, dev), "cuDevicePrimaryCtxRetain") || check(cuCtxSetCurrent(ctx), "cuCtxSetCurrent") ||
	    check(cuModuleLoad(&mod, argv[1]), "cuModuleLoad") || check(cuModuleGetFunction(&fn, mod, argv[2]), "cuModuleGetFunction"))
		return 1;
	srand(1);
	for (int k = 0; k < nargs; k++) {
		const char *a = argv[9 + k];
		if (strncmp(a, "buf:", 4) == 0) {
			size_t bytes = strtoull(a + 4, NULL, 10), n = bytes / sizeof(float);
			float *host = malloc(bytes);
			for (size_t i = 0; i < n; i++)
				host[i] = (float)rand() / RAND_MAX * 2 - 1;
			if (check(cuMemAlloc(&ptrs[k], bytes), "cuMemAlloc") || check(cuMemcpyHtoD(ptrs[k], host, bytes), "cuMemcpyHtoD"))
				return 1;
			free(host);
			params[k] = &ptrs[k];
		} else if (strncmp(a, "i32:", 4) == 0) {
			ints[k] = (int)strtol(a + 4, NULL, 10);
			params[k] = &ints[k];
		} else {
			fprintf(stderr, "launch_cubin: '%s': want buf:BYTES or i32:VALUE\n", a);
			return 2;
		}
	}
	if (check(cuLaunchKernel(fn, dims[0], dims[1], dims[2], dims[3], dims[4], dims[5], 0, NULL, params, NULL), "cuLaunchKernel") ||
	    check(cuCtxSynchronize(), "the kernel"))
		return 1;
	return 0;
}
