/* nvrtc_dl.h: NVRTC, loaded with dlopen at run time so that the tools start (and say plainly
 * what is missing) on machines without the CUDA toolkit; one compile, in this process. */
#ifndef KG_NVRTC_DL_H
#define KG_NVRTC_DL_H

#include "common.h"

#include <stddef.h>

#include "xalloc.h"

/* Loads NVRTC: $KG_NVRTC_LIBRARY if set, else libnvrtc from $CUDA_HOME/lib64 (CUDA_HOME
 * defaults to the toolkit kernelgraph was built with), else from the loader's search path.
 * Returns 0, or -1 with why set. Later calls return the first call's result. */
int nvrtc_open(struct strbuf *why);
/* "13.0"; valid after nvrtc_open succeeded. */
const char *nvrtc_version(void);
/* Whether NVRTC can generate code for sm_<number>; otherwise fills list with the numbers
 * it supports ("75 80 86 ..."). */
int nvrtc_supports_arch(int number, struct strbuf *list);

/* What one compile left: every pointer is the caller's to free (nvrtc_output_release). */
struct nvrtc_output {
	int ok;		   /* NVRTC compiled the program */
	double compile_ms; /* wall time of nvrtcCompileProgram */
	char *log;	   /* the compiler's log, "" when it wrote none */
	char *ptx;	   /* NUL-terminated; NULL when not made */
	size_t ptx_len;	   /* without the NUL */
	char *cubin;	   /* NULL when not made (a virtual architecture, a failed compile) */
	size_t cubin_len;
	char *lowered;	   /* the lowered name of name_expression; NULL when not found */
	const char *error; /* NVRTC's name for a failure (static), NULL when ok */
	int own_failure;   /* NVRTC failed itself, not the program (its builtins not found, out of
			    * memory, an internal error): a fixed toolkit may compile it */
};

/* Compiles source (called file_name in messages) with options; name_expression, when not
 * NULL, is a kernel's name expression ("&kernel") whose lowered name is returned. Returns
 * 0 when NVRTC ran (out->ok says whether it compiled), -1 when it could not start. */
int nvrtc_compile(const char *source, const char *file_name, const char *const *options, size_t noptions,
		  const char *name_expression, struct nvrtc_output *out);
void nvrtc_output_release(struct nvrtc_output *out);

#endif
