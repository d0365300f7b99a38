/* gpu.c: dlopen and dlsym for the CUDA driver, CUPTI and NVML, each found where the driver
 * or the toolkit installs it. */
#include "common.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu.h"

#ifndef KG_CUDA_HOME
#define KG_CUDA_HOME "/usr/local/cuda"
#endif

#define STRINGIFY_(x) #x
#define STRINGIFY(x) STRINGIFY_(x)

struct cu_api cu;
struct cupti_api cupti;
struct cupti_profiler_api cupti_prof;
struct cupti_pcsampling_api cupti_pc;
static void *cupti_handle; /* what cupti_open loaded, for cupti_profiler_open */

int cuda_open(struct strbuf *why)
{
	void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		strbuf_addf(why, "no CUDA driver on this machine (%s); give --replay FILE to answer from recorded "
				 "measurements", dlerror());
		return -1;
	}
#define CU_LOAD(f)                                                                     \
	if (!(*(void **)&cu.f = dlsym(h, STRINGIFY(f)))) {                             \
		strbuf_addf(why, "the CUDA driver has no %s: %s", STRINGIFY(f), dlerror()); \
		return -1;                                                             \
	}
	CU_FUNCTIONS(CU_LOAD)
#undef CU_LOAD
	CUresult rc = cu.cuInit(0);
	int n = 0;
	if (rc == CUDA_SUCCESS)
		rc = cu.cuDeviceGetCount(&n);
	if (rc != CUDA_SUCCESS || n == 0) {
		strbuf_addf(why, "no GPU: %s; give --replay FILE to answer from recorded measurements",
			    rc != CUDA_SUCCESS ? cuda_error(rc) : "the CUDA driver sees no device");
		return -1;
	}
	return 0;
}

const char *cuda_error(CUresult rc)
{
	static char text[256];
	const char *name = "CUDA_ERROR_UNKNOWN", *what = "";
	if (cu.cuGetErrorName)
		cu.cuGetErrorName(rc, &name);
	if (cu.cuGetErrorString)
		cu.cuGetErrorString(rc, &what);
	snprintf(text, sizeof(text), "%s: %s", name ? name : "?", what ? what : "");
	return text;
}

int cupti_open(struct strbuf *why)
{
	const char *cuda_home = getenv("CUDA_HOME");
	if (!cuda_home || !cuda_home[0])
		cuda_home = KG_CUDA_HOME;
	const char *places[] = {"%s/extras/CUPTI/lib64/libcupti.so.%d", "%s/lib64/libcupti.so.%d", "%s/lib/libcupti.so.%d"};
	void *h = NULL;
	for (size_t k = 0; k < ARRAY_SIZE(places) && !h; k++) {
		char path[4096];
		snprintf(path, sizeof(path), places[k], cuda_home, CUDA_VERSION / 1000);
		h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	}
	if (!h) {
		char soname[64];
		snprintf(soname, sizeof(soname), "libcupti.so.%d", CUDA_VERSION / 1000);
		h = dlopen(soname, RTLD_NOW | RTLD_LOCAL);
	}
	if (!h) {
		strbuf_addf(why, "no CUPTI (%s)", dlerror());
		return -1;
	}
#define CUPTI_LOAD(f)                                                                  \
	if (!(*(void **)&cupti.f = dlsym(h, STRINGIFY(f)))) {                          \
		strbuf_addf(why, "CUPTI has no %s", STRINGIFY(f));                     \
		return -1;                                                             \
	}
	CUPTI_FUNCTIONS(CUPTI_LOAD)
#undef CUPTI_LOAD
	cupti_handle = h;
	return 0;
}

int cupti_profiler_open(struct strbuf *why)
{
	if (!cupti_handle) {
		strbuf_addstr(why, "no CUPTI");
		return -1;
	}
#define CUPTI_PROF_LOAD(f)                                                                         \
	if (!(*(void **)&cupti_prof.f = dlsym(cupti_handle, STRINGIFY(f)))) {                      \
		strbuf_addf(why, "this CUPTI has no %s (its range profiler came with CUDA 12.6)", STRINGIFY(f)); \
		return -1;                                                                         \
	}
	CUPTI_PROFILER_FUNCTIONS(CUPTI_PROF_LOAD)
#undef CUPTI_PROF_LOAD
	return 0;
}

int cupti_pcsampling_open(struct strbuf *why)
{
	if (!cupti_handle) {
		strbuf_addstr(why, "no CUPTI");
		return -1;
	}
#define CUPTI_PC_LOAD(f)                                                               \
	if (!(*(void **)&cupti_pc.f = dlsym(cupti_handle, STRINGIFY(f)))) {            \
		strbuf_addf(why, "this CUPTI has no %s (no PC sampling API)", STRINGIFY(f)); \
		return -1;                                                             \
	}
	CUPTI_PCSAMPLING_FUNCTIONS(CUPTI_PC_LOAD)
#undef CUPTI_PC_LOAD
	return 0;
}

int cupti_failed(CUptiResult rc, const char *call, struct strbuf *why)
{
	if (rc == CUPTI_SUCCESS)
		return 0;
	const char *text = NULL;
	if (cupti.cuptiGetResultString)
		cupti.cuptiGetResultString(rc, &text);
	strbuf_addf(why, "%s: %s", call, text ? text : "CUPTI error");
	if (rc == CUPTI_ERROR_INSUFFICIENT_PRIVILEGES)
		strbuf_addstr(why, " (ERR_NVGPUCTRPERM: the driver lets only administrators read the GPU's performance "
				   "counters; run as root, or load the nvidia module with NVreg_RestrictProfilingToAdminUsers=0)");
	return -1;
}

/* NVML's few entry points, declared here: the toolkit ships no nvml.h everywhere. */
typedef struct nvml_device *nvml_device_t;
enum { NVML_SUCCESS = 0, NVML_CLOCK_SM = 1 };

int nvml_sm_clock_mhz(const char *pci_bus_id)
{
	static int tried, ok;
	static int (*init)(void);
	static int (*by_bus_id)(const char *, nvml_device_t *);
	static int (*clock_info)(nvml_device_t, int, unsigned int *);
	if (!tried) {
		tried = 1;
		void *h = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
		if (h) {
			*(void **)&init = dlsym(h, "nvmlInit_v2");
			*(void **)&by_bus_id = dlsym(h, "nvmlDeviceGetHandleByPciBusId_v2");
			*(void **)&clock_info = dlsym(h, "nvmlDeviceGetClockInfo");
			ok = init && by_bus_id && clock_info && init() == NVML_SUCCESS;
		}
	}
	nvml_device_t dev;
	unsigned int mhz;
	if (!ok || by_bus_id(pci_bus_id, &dev) != NVML_SUCCESS || clock_info(dev, NVML_CLOCK_SM, &mhz) != NVML_SUCCESS)
		return -1;
	return (int)mhz;
}
