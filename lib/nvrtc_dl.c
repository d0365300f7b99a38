/* nvrtc_dl.c: NVRTC through dlopen, found where the toolkit installs it, and one compile that
 * hands back everything NVRTC produced. */
#include "common.h"

#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

#include <cuda.h>
#include <nvrtc.h>

#include "clock.h"
#include "nvrtc_dl.h"

#ifndef KG_CUDA_HOME
#define KG_CUDA_HOME "/usr/local/cuda"
#endif

static struct {
	int tried, loaded;
	char *error;
	char version[32];
	nvrtcResult (*Version)(int *, int *);
	nvrtcResult (*GetNumSupportedArchs)(int *);
	nvrtcResult (*GetSupportedArchs)(int *);
	nvrtcResult (*CreateProgram)(nvrtcProgram *, const char *, const char *, int, const char *const *,
				     const char *const *);
	nvrtcResult (*AddNameExpression)(nvrtcProgram, const char *);
	nvrtcResult (*CompileProgram)(nvrtcProgram, int, const char *const *);
	nvrtcResult (*GetLoweredName)(nvrtcProgram, const char *, const char **);
	nvrtcResult (*GetProgramLogSize)(nvrtcProgram, size_t *);
	nvrtcResult (*GetProgramLog)(nvrtcProgram, char *);
	nvrtcResult (*GetPTXSize)(nvrtcProgram, size_t *);
	nvrtcResult (*GetPTX)(nvrtcProgram, char *);
	nvrtcResult (*GetCUBINSize)(nvrtcProgram, size_t *);
	nvrtcResult (*GetCUBIN)(nvrtcProgram, char *);
	nvrtcResult (*DestroyProgram)(nvrtcProgram *);
	const char *(*GetErrorString)(nvrtcResult);
} nvrtc;

static void *open_nvrtc_library(struct strbuf *tried)
{
	const char *explicit_path = getenv("KG_NVRTC_LIBRARY");
	if (explicit_path && explicit_path[0]) {
		void *h = dlopen(explicit_path, RTLD_LAZY | RTLD_LOCAL);
		if (!h)
			strbuf_addf(tried, "%s (KG_NVRTC_LIBRARY)", dlerror());
		return h;
	}
	const char *cuda_home = getenv("CUDA_HOME");
	char *candidates[3];
	candidates[0] = xasprintf("%s/lib64/libnvrtc.so.%d", cuda_home && cuda_home[0] ? cuda_home : KG_CUDA_HOME,
				  CUDA_VERSION / 1000);
	candidates[1] = xasprintf("libnvrtc.so.%d", CUDA_VERSION / 1000);
	candidates[2] = xstrdup("libnvrtc.so");
	void *h = NULL;
	for (size_t k = 0; k < ARRAY_SIZE(candidates) && !h; k++) {
		h = dlopen(candidates[k], RTLD_LAZY | RTLD_LOCAL);
		if (!h)
			strbuf_addf(tried, "%s%s", tried->len ? "; " : "", dlerror());
	}
	for (size_t k = 0; k < ARRAY_SIZE(candidates); k++)
		free(candidates[k]);
	return h;
}

/* NVRTC opens its builtins by name, through the linker's search path, at its first compile:
 * a toolkit whose folder is not there (no ld.so.conf.d line, no LD_LIBRARY_PATH, as a
 * fresh Debian root with the toolkit in CUDA_HOME has it) fails every compile with "failed to
 * open libnvrtc-builtins.so.13.0". Opened first from beside the NVRTC that was loaded, the
 * loader answers NVRTC's request with it (a library already loaded matches by its soname). */
static void open_builtins(int major, int minor)
{
	Dl_info info;
	if (!dladdr(*(void **)&nvrtc.Version, &info) || !info.dli_fname || !strchr(info.dli_fname, '/'))
		return;
	const char *slash = strrchr(info.dli_fname, '/');
	char *path = xasprintf("%.*s/libnvrtc-builtins.so.%d.%d", (int)(slash - info.dli_fname), info.dli_fname,
			       major, minor);
	if (!dlopen(path, RTLD_LAZY | RTLD_LOCAL))
		(void)dlerror(); /* not there: NVRTC's own search, and its own error */
	free(path);
}

int nvrtc_open(struct strbuf *why)
{
	if (!nvrtc.tried) {
		nvrtc.tried = 1;
		struct strbuf tried;
		strbuf_init(&tried);
		void *h = open_nvrtc_library(&tried);
		if (!h) {
			nvrtc.error = xasprintf("cannot load NVRTC (install the CUDA toolkit, set CUDA_HOME or "
						"KG_NVRTC_LIBRARY): %s", tried.buf);
			strbuf_release(&tried);
			goto done;
		}
		strbuf_release(&tried);
		/* dlsym returns void *; POSIX guarantees it converts to a function pointer. */
#define LOAD(field, symbol)                                                            \
	if (!(*(void **)&nvrtc.field = dlsym(h, symbol))) {                            \
		nvrtc.error = xasprintf("NVRTC has no %s: %s", symbol, dlerror());      \
		goto done;                                                             \
	}
		LOAD(Version, "nvrtcVersion");
		LOAD(GetNumSupportedArchs, "nvrtcGetNumSupportedArchs");
		LOAD(GetSupportedArchs, "nvrtcGetSupportedArchs");
		LOAD(CreateProgram, "nvrtcCreateProgram");
		LOAD(AddNameExpression, "nvrtcAddNameExpression");
		LOAD(CompileProgram, "nvrtcCompileProgram");
		LOAD(GetLoweredName, "nvrtcGetLoweredName");
		LOAD(GetProgramLogSize, "nvrtcGetProgramLogSize");
		LOAD(GetProgramLog, "nvrtcGetProgramLog");
		LOAD(GetPTXSize, "nvrtcGetPTXSize");
		LOAD(GetPTX, "nvrtcGetPTX");
		LOAD(GetCUBINSize, "nvrtcGetCUBINSize");
		LOAD(GetCUBIN, "nvrtcGetCUBIN");
		LOAD(DestroyProgram, "nvrtcDestroyProgram");
		LOAD(GetErrorString, "nvrtcGetErrorString");
#undef LOAD
		int major = 0, minor = 0;
		nvrtc.Version(&major, &minor);
		snprintf(nvrtc.version, sizeof(nvrtc.version), "%d.%d", major, minor);
		open_builtins(major, minor);
		nvrtc.loaded = 1;
	}
done:
	if (!nvrtc.loaded)
		strbuf_addstr(why, nvrtc.error);
	return nvrtc.loaded ? 0 : -1;
}

const char *nvrtc_version(void)
{
	return nvrtc.version;
}

int nvrtc_supports_arch(int number, struct strbuf *list)
{
	int n = 0;
	if (nvrtc.GetNumSupportedArchs(&n) != NVRTC_SUCCESS || n <= 0)
		return 1; /* cannot tell; let the compile say */
	int *archs = xcalloc((size_t)n, sizeof(*archs));
	int found = 0;
	if (nvrtc.GetSupportedArchs(archs) == NVRTC_SUCCESS) {
		for (int k = 0; k < n; k++) {
			found |= archs[k] == number;
			strbuf_addf(list, "%s%d", k ? " " : "", archs[k]);
		}
	} else {
		found = 1;
	}
	free(archs);
	return found;
}

int nvrtc_compile(const char *source, const char *file_name, const char *const *options, size_t noptions,
		  const char *name_expression, struct nvrtc_output *out)
{
	memset(out, 0, sizeof(*out));
	nvrtcProgram prog;
	nvrtcResult rc = nvrtc.CreateProgram(&prog, source, file_name, 0, NULL, NULL);
	if (rc != NVRTC_SUCCESS) {
		out->error = nvrtc.GetErrorString(rc);
		return -1;
	}
	if (name_expression)
		nvrtc.AddNameExpression(prog, name_expression);
	double t0 = monotonic_ms();
	rc = nvrtc.CompileProgram(prog, (int)noptions, options);
	out->compile_ms = monotonic_ms() - t0;
	out->ok = rc == NVRTC_SUCCESS;
	out->error = out->ok ? NULL : nvrtc.GetErrorString(rc);
	out->own_failure = rc == NVRTC_ERROR_BUILTIN_OPERATION_FAILURE || rc == NVRTC_ERROR_OUT_OF_MEMORY ||
			   rc == NVRTC_ERROR_INTERNAL_ERROR;

	size_t size = 0;
	out->log = NULL;
	if (nvrtc.GetProgramLogSize(prog, &size) == NVRTC_SUCCESS && size > 0) {
		out->log = xmalloc(size);
		if (nvrtc.GetProgramLog(prog, out->log) != NVRTC_SUCCESS)
			out->log[0] = '\0';
	}
	if (!out->log)
		out->log = xstrdup("");
	if (out->ok && nvrtc.GetPTXSize(prog, &size) == NVRTC_SUCCESS && size > 1) {
		out->ptx = xmalloc(size);
		if (nvrtc.GetPTX(prog, out->ptx) == NVRTC_SUCCESS) {
			out->ptx_len = size - 1;
		} else {
			free(out->ptx);
			out->ptx = NULL;
		}
	}
	if (out->ok && nvrtc.GetCUBINSize(prog, &size) == NVRTC_SUCCESS && size > 0) {
		out->cubin = xmalloc(size);
		if (nvrtc.GetCUBIN(prog, out->cubin) == NVRTC_SUCCESS) {
			out->cubin_len = size;
		} else {
			free(out->cubin);
			out->cubin = NULL;
		}
	}
	const char *lowered = NULL;
	if (out->ok && name_expression && nvrtc.GetLoweredName(prog, name_expression, &lowered) == NVRTC_SUCCESS && lowered)
		out->lowered = xstrdup(lowered);
	nvrtc.DestroyProgram(&prog);
	return 0;
}

void nvrtc_output_release(struct nvrtc_output *out)
{
	free(out->log);
	free(out->ptx);
	free(out->cubin);
	free(out->lowered);
	memset(out, 0, sizeof(*out));
}
