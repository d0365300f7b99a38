/* gpu.h: the CUDA driver, CUPTI and NVML, loaded with dlopen so that kg-bench starts on any
 * machine: --replay needs none of them, and without a GPU it can say so plainly. */
#ifndef KG_BENCH_GPU_H
#define KG_BENCH_GPU_H

#include "common.h"

#include <cuda.h>
#include <cupti_activity.h>
#include <cupti_pcsampling.h>
#include <cupti_profiler_host.h>
#include <cupti_profiler_target.h>
#include <cupti_range_profiler.h>
#include <cupti_target.h>

#include "xalloc.h"

/* Every driver function kg-bench calls. cuda.h maps several names to versioned symbols
 * (cuMemAlloc to cuMemAlloc_v2); the table's members carry the same names, so that
 * cu.cuMemAlloc(...) reads as the API does and calls what the header means. */
#define CU_FUNCTIONS(X)                                                                          \
	X(cuInit) X(cuGetErrorName) X(cuGetErrorString) X(cuDeviceGetCount) X(cuDeviceGet)         \
	X(cuDeviceGetName) X(cuDeviceGetAttribute) X(cuDeviceGetPCIBusId) X(cuDeviceTotalMem)      \
	X(cuDevicePrimaryCtxRetain) X(cuCtxSetCurrent) X(cuCtxSynchronize) X(cuModuleLoadData)    \
	X(cuModuleUnload) X(cuModuleGetFunction) X(cuModuleGetGlobal) X(cuFuncSetAttribute)        \
	X(cuMemAlloc) X(cuMemFree) X(cuMemcpyHtoD) X(cuMemcpyDtoH) X(cuMemcpyDtoDAsync)            \
	X(cuMemcpyHtoDAsync) X(cuMemsetD8Async) X(cuLaunchKernel) X(cuStreamCreate)                \
	X(cuStreamSynchronize) X(cuEventCreate) X(cuEventRecord) X(cuEventSynchronize)             \
	X(cuEventElapsedTime) X(cuFuncGetAttribute) X(cuCtxGetDevice) X(cuMemcpyDtoHAsync)            \
	X(cuMemsetD32Async) X(cuEventDestroy) X(cuOccupancyMaxActiveBlocksPerMultiprocessor)  \
	X(cuTensorMapEncodeTiled)

#define CU_DECLARE(f) __typeof__(&f) f;
struct cu_api {
	CU_FUNCTIONS(CU_DECLARE)
};
extern struct cu_api cu;

#define CUPTI_FUNCTIONS(X)                                                                       \
	X(cuptiActivityEnable) X(cuptiActivityDisable) X(cuptiActivityRegisterCallbacks)            \
	X(cuptiActivityFlushAll) X(cuptiActivityGetNextRecord) X(cuptiGetResultString)
struct cupti_api {
	CUPTI_FUNCTIONS(CU_DECLARE)
};
extern struct cupti_api cupti;

/* CUPTI's profiling API (the host side: metrics and config images; the range profiler on
 * the context), loaded apart from the tracing functions so that a CUPTI without it still
 * times kernels. */
#define CUPTI_PROFILER_FUNCTIONS(X)                                                              \
	X(cuptiProfilerInitialize) X(cuptiProfilerDeviceSupported) X(cuptiDeviceGetChipName)        \
	X(cuptiProfilerGetCounterAvailability) X(cuptiProfilerHostInitialize)                      \
	X(cuptiProfilerHostDeinitialize) X(cuptiProfilerHostGetBaseMetrics)                        \
	X(cuptiProfilerHostConfigAddMetrics) X(cuptiProfilerHostGetConfigImageSize)                \
	X(cuptiProfilerHostGetConfigImage) X(cuptiProfilerHostGetNumOfPasses)                      \
	X(cuptiProfilerHostEvaluateToGpuValues) X(cuptiRangeProfilerEnable)                        \
	X(cuptiRangeProfilerDisable) X(cuptiRangeProfilerGetCounterDataSize)                       \
	X(cuptiRangeProfilerCounterDataImageInitialize) X(cuptiRangeProfilerSetConfig)             \
	X(cuptiRangeProfilerStart) X(cuptiRangeProfilerStop) X(cuptiRangeProfilerDecodeData)       \
	X(cuptiRangeProfilerGetCounterDataInfo)
struct cupti_profiler_api {
	CUPTI_PROFILER_FUNCTIONS(CU_DECLARE)
};
extern struct cupti_profiler_api cupti_prof;

/* CUPTI's PC sampling API and its SASS-to-source correlation, for the kernel.cu lines that the
 * samples of --metrics fall on; loaded apart, so that a CUPTI without them still profiles. */
#define CUPTI_PCSAMPLING_FUNCTIONS(X)                                                            \
	X(cuptiPCSamplingEnable) X(cuptiPCSamplingDisable) X(cuptiPCSamplingSetConfigurationAttribute) \
	X(cuptiPCSamplingStart) X(cuptiPCSamplingStop) X(cuptiPCSamplingGetData)                   \
	X(cuptiPCSamplingGetNumStallReasons) X(cuptiPCSamplingGetStallReasons)                    \
	X(cuptiGetSassToSourceCorrelation)
struct cupti_pcsampling_api {
	CUPTI_PCSAMPLING_FUNCTIONS(CU_DECLARE)
};
extern struct cupti_pcsampling_api cupti_pc;
#undef CU_DECLARE

/* Loads the driver and initializes it. Returns 0, or -1 with why set in plain words ("no
 * CUDA driver: ...", "no GPU: ..."). */
int cuda_open(struct strbuf *why);
/* "CUDA_ERROR_ILLEGAL_ADDRESS: an illegal memory access was encountered" */
const char *cuda_error(CUresult rc);

/* Loads CUPTI for kernel timestamps; returns 0, or -1 with why set (timing then falls back
 * to CUDA events). */
int cupti_open(struct strbuf *why);

/* Loads CUPTI's profiling API (cupti_prof), after cupti_open; returns 0, or -1 with why set
 * (hardware metrics are then unavailable). */
int cupti_profiler_open(struct strbuf *why);

/* Loads CUPTI's PC sampling API (cupti_pc), after cupti_open; returns 0, or -1 with why set
 * (the lines of the samples are then unavailable). */
int cupti_pcsampling_open(struct strbuf *why);

/* Says what a CUPTI call returned (call names it) in why; -1 unless it succeeded. */
int cupti_failed(CUptiResult rc, const char *call, struct strbuf *why);

/* The SM clock in MHz of the GPU with that PCI bus id, through NVML; -1 when NVML or the
 * reading is unavailable. */
int nvml_sm_clock_mhz(const char *pci_bus_id);

#endif
