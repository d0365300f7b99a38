/* setup.h (kg-build): the run directories kg-build builds into, each loaded once: lib/run's
 * spec, the kernel file it names, and what every variant of the run shares. */
#ifndef KG_BUILD_SETUP_H
#define KG_BUILD_SETUP_H

#include "common.h"

#include <stddef.h>

#include "run.h"
#include "sha256.h"

#define RUN_DEFAULT_ARCH "sm_90"

/* A run directory, loaded the first time a record names it. */
struct build_run {
	struct run run;	       /* the directory and its spec */
	char *error;	       /* why it cannot be used; NULL when it can */
	char *baseline_source; /* the spec's kernel file, normalized */
	char *include_dir;     /* the kernel file's folder, for its own headers */
	char headers[SHA256_HEX_SIZE]; /* digest of the headers in include_dir */
	char arch[16];
	int no_compile;	       /* built without compiling: --no-compile, or a replayed run */
	char **base_options;   /* the spec's CompilerOptions, less any architecture option */
	size_t nbase_options;
	char *problem_size;    /* repr of ProblemSize, for the state hash */
	char *default_config;  /* the baseline's configuration as JSON text ("" when invalid);
				  filled by kg-build's main when first needed */
	struct build_run *next;
};

/* Loads dir. The architecture is arch_option (--arch) when given, else the spec's
 * (KernelGraph.Arch, or an architecture option in CompilerOptions), else for a replayed run
 * the table's (replay_target: what its variants were built for, else its GPU's through
 * device_arch), else the run's baseline's (what kg-init built it for), else that of GPU
 * device (a CUDA ordinal), else RUN_DEFAULT_ARCH; with check_nvrtc, one NVRTC cannot
 * generate code for is an error (NVRTC must be open). Never fails: a run that cannot be used
 * has error set. Also creates dir/variants and removes what killed builds left there. */
struct build_run *build_run_load(const char *dir, const char *arch_option, int device, int check_nvrtc);
/* Frees run and every run linked after it. */
void build_run_free_all(struct build_run *run);

/* Validates "sm_90", "sm_90a", "sm_100f": the forms that give a cubin. Returns 0 with
 * *number set (90), or -1. */
int arch_parse(const char *text, int *number);

#endif
