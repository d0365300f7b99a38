/* compile.h: a pool of compiler processes (NVRTC, from lib/nvrtc_dl.h), and the GPU's architecture.
 * Each compile runs in a child process: a compiler crash or hang costs one record, not the run. */
#ifndef KG_BUILD_COMPILE_H
#define KG_BUILD_COMPILE_H

#include "common.h"

#include <stddef.h>

#include "nvrtc_dl.h"
#include "xalloc.h"

/* The architecture of visible GPU number device (a CUDA ordinal) as "sm_90", through the CUDA
 * driver when one is installed. Returns 0, or -1 when there is no driver or no such GPU. */
int gpu_arch(int device, char arch[16]);
/* The architecture gpu_arch gives on the GPU a device name names ("NVIDIA H100 80GB HBM3",
 * "Tesla T4", "NVIDIA GeForce RTX 4090": as the CUDA driver and T4 tables name them), for a
 * run on measurements recorded on it. Returns 0, or -1 for a name of no model it knows. */
int device_arch(const char *device, char arch[16]);

struct compile_job {
	char *dir;	       /* kernel.ptx, kernel.cubin and build.log are written here */
	char *source;	       /* the program text */
	char *name_expression; /* "&kernel_name": finds the kernel with or without extern "C" */
	char **options;	       /* NVRTC options, in order */
	size_t noptions;
	void *tag;	       /* the caller's, handed back by compile_pool_wait */
};

struct compile_result {
	int ok;		    /* NVRTC produced a cubin */
	int definitive;	    /* NVRTC itself gave the verdict: not a crash, a timeout or a failed fork */
	double compile_ms;  /* wall time of nvrtcCompileProgram */
	char *function;	    /* the kernel's lowered (mangled) name; NULL when not found */
	char *error;	    /* why it failed: the compiler's errors, a crash or a timeout; NULL when ok */
};

void compile_result_release(struct compile_result *res);

struct compile_pool;

/* Runs up to jobs compiles at once; each that runs longer than timeout_s is killed. */
struct compile_pool *compile_pool_new(size_t jobs, double timeout_s);
void compile_pool_free(struct compile_pool *pool);
/* Starts job now if a slot is free, else queues it. The pool takes job's allocations. */
void compile_pool_submit(struct compile_pool *pool, struct compile_job *job);
/* Waits until a job ends (with block 0, only looks) and hands back its tag and result.
 * Returns 0; -1 when no job was submitted and not yet handed back; 1 when, not blocking,
 * none has ended yet. */
int compile_pool_wait(struct compile_pool *pool, void **tag, struct compile_result *res, int block);

/* What ptxas reported for one kernel (NVRTC's log with --ptxas-options=-v). */
struct ptxas_report {
	int found; /* whether the log has a report for the function */
	long registers, smem_bytes, cmem_bytes, stack_bytes, spill_stores, spill_loads;
};

/* Reads the report for function (a lowered name) from log; the first function's report
 * when function is NULL. */
void ptxas_report_parse(const char *log, const char *function, struct ptxas_report *report);

#endif
