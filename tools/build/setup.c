/* setup.c (kg-build): a run directory as kg-build sees it: lib/run's spec, the baseline source,
 * the headers beside the kernel, the architecture and the compiler options every variant shares. */
#include "common.h"

#include <dirent.h>
#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "compile.h"
#include "fileio.h"
#include "jsonl.h"
#include "log.h"
#include "materialize.h"
#include "replay.h"
#include "run.h"
#include "setup.h"

int arch_parse(const char *text, int *number)
{
	if (strncmp(text, "sm_", 3) != 0 || !(text[3] >= '1' && text[3] <= '9'))
		return -1;
	char *end;
	long n = strtol(text + 3, &end, 10);
	if (n > 9999 || !(*end == '\0' || ((*end == 'a' || *end == 'f') && end[1] == '\0')))
		return -1;
	*number = (int)n;
	return 0;
}


static int is_header_name(const char *name)
{
	static const char *const suffixes[] = {".h", ".hh", ".hpp", ".hxx", ".cuh", ".inl", ".inc"};
	const char *dot = strrchr(name, '.');
	for (size_t k = 0; dot && k < ARRAY_SIZE(suffixes); k++)
		if (strcmp(dot, suffixes[k]) == 0)
			return 1;
	return 0;
}

/* A kernel may include headers from its folder: their contents are part of every key. */
static void digest_headers(struct build_run *run)
{
	struct dirent **names;
	int n = scandir(run->include_dir, &names, NULL, alphasort);
	struct sha256 h;
	sha256_init(&h);
	for (int k = 0; k < n; k++) {
		if (is_header_name(names[k]->d_name)) {
			char *path = xasprintf("%s/%s", run->include_dir, names[k]->d_name);
			size_t len;
			char *text = file_read_all(path, &len);
			if (text) {
				sha256_update(&h, names[k]->d_name, strlen(names[k]->d_name) + 1);
				sha256_update(&h, text, len);
				sha256_update(&h, "", 1);
			}
			free(text);
			free(path);
		}
		free(names[k]);
	}
	if (n >= 0)
		free(names);
	sha256_final_hex(&h, run->headers);
}

/* An architecture option in CompilerOptions ("-arch=sm_80", "--gpu-architecture sm_80"):
 * returns how many items it spans (1 or 2) and its value, or 0. */
static int arch_in_options(char *const *items, size_t n, size_t k, const char **value)
{
	static const char *const names[] = {"-arch", "--gpu-architecture", "--gpu-architecture=", "-arch="};
	const char *item = items[k];
	for (size_t j = 0; j < 2; j++) {
		size_t len = strlen(names[j]);
		if (strncmp(item, names[j], len) == 0 && item[len] == '=') {
			*value = item + len + 1;
			return 1;
		}
		if (strcmp(item, names[j]) == 0) {
			*value = k + 1 < n ? items[k + 1] : "";
			return 2;
		}
	}
	return 0;
}

/* The architecture RUN/baseline.json's build names, when it names one kg-build can use. */
static const char *baseline_arch_of(struct run *run)
{
	const cJSON *baseline = run_baseline(run);
	const char *arch = baseline ? json_string(cJSON_GetObjectItemCaseSensitive(baseline, "build"), "arch") : NULL;
	int number;
	return arch && strlen(arch) < 16 && arch_parse(arch, &number) == 0 ? arch : NULL;
}

/* The architecture: --arch, else the spec's, else (a run made with kg-init --replay) the one
 * its table's variants were built for, or that of the GPU it was measured on, else the one
 * its baseline was built for, else GPU device's, else the default. The baseline's comes
 * before the GPU's: a run's variants are built for one architecture, the one kg-init chose
 * for the GPU it measured on, and asking the driver (cuInit) costs every kg-build of a
 * search 0.3 s to seconds on a host of several GPUs. A replayed run never asks the driver:
 * its answers are the table's wherever it runs, and so are its states (and the driver's
 * cuInit cost every build, having no baseline.json to read the choice from). compute_XX in
 * a spec becomes sm_XX, since a cubin is needed. The choice
 * does not depend on check_nvrtc (whether NVRTC is asked if it supports the architecture), so
 * that a build that is not compiled hashes the state a compiled one would. */
static int choose_arch(struct build_run *run, const char *arch_option, const char *spec_arch, const char *spec_field,
		       int gpu_device, int check_nvrtc)
{
	char gpu[16], table_arch[16] = "";
	const char *baseline_arch = NULL;
	int device_given = 0; /* table_arch is its GPU's, not what its variants were built for */
	const char *source;
	char *unknown = NULL; /* why the table gave no architecture */
	int replayed = run_replayed(run->run.dir);
	if (!arch_option && !spec_arch && replayed) {
		/* The table's measurements stand for this run's, so its variants are built (and
		 * hashed, and offered ready patches) as the search that measured them built them:
		 * for the architecture its records name, else for the GPU it ran on (an H100's
		 * sm_90a, an A100's sm_80), wherever this search runs. */
		int broken, number;
		const struct replay *table = run_replay(&run->run, &broken);
		if (broken) {
			run->error = xasprintf("%s/replay.table: the run's replay table cannot be read (see above)",
					       run->run.dir);
			return -1;
		}
		char *arch = NULL, *device = NULL;
		if (table)
			replay_target(table, &arch, &device);
		if (arch && strlen(arch) < sizeof(table_arch) && arch_parse(arch, &number) == 0)
			snprintf(table_arch, sizeof(table_arch), "%s", arch);
		else if (device && device_arch(device, table_arch) == 0)
			device_given = 1;
		else if (!device)
			unknown = xstrdup("the run's replay.table names no GPU");
		else
			unknown = xasprintf("the run's replay.table was measured on '%s', a GPU kg-build does not know",
					    device);
		free(arch);
		free(device);
	}
	if (arch_option) {
		snprintf(run->arch, sizeof(run->arch), "%s", arch_option);
		source = "--arch";
	} else if (spec_arch) {
		if (strncmp(spec_arch, "compute_", 8) == 0)
			snprintf(run->arch, sizeof(run->arch), "sm_%s", spec_arch + 8);
		else
			snprintf(run->arch, sizeof(run->arch), "%s", spec_arch);
		source = spec_field;
	} else if (table_arch[0]) {
		snprintf(run->arch, sizeof(run->arch), "%s", table_arch);
		source = device_given ? "the GPU of the run's replay.table" : "the run's replay.table, as its variants were built";
	} else if ((baseline_arch = baseline_arch_of(&run->run))) {
		snprintf(run->arch, sizeof(run->arch), "%s", baseline_arch);
		source = "the run's baseline";
	} else if (!replayed && gpu_arch(gpu_device, gpu) == 0) {
		snprintf(run->arch, sizeof(run->arch), "%s", gpu);
		source = "the GPU";
	} else {
		snprintf(run->arch, sizeof(run->arch), "%s", RUN_DEFAULT_ARCH);
		source = replayed ? "the default; a replayed run does not ask the GPU" : "the default; no GPU found";
	}
	if (unknown) /* said with -v, as the choice is; every kg-build of the search would say it */
		log_info("%s: %s: building for %s (%s; --arch or KernelGraph.Arch to choose)", run->run.dir, unknown,
			 run->arch, source);
	free(unknown);
	int number;
	if (arch_parse(run->arch, &number)) {
		run->error = xasprintf("%s/spec.json: %s: '%s' is not an architecture like sm_90 or sm_90a", run->run.dir,
				       spec_field, spec_arch);
		return -1;
	}
	struct strbuf supported;
	strbuf_init(&supported);
	if (check_nvrtc && !nvrtc_supports_arch(number, &supported)) {
		run->error = xasprintf("%s: %s is not supported by NVRTC %s (it supports %s)", source, run->arch,
				       nvrtc_version(), supported.buf);
		strbuf_release(&supported);
		return -1;
	}
	strbuf_release(&supported);
	log_info("%s: building for %s (%s)", run->run.dir, run->arch, source);
	return 0;
}

static int setup_compiler_options(struct build_run *run, const char *arch_option, int device, int check_nvrtc)
{
	const cJSON *kernel = cJSON_GetObjectItemCaseSensitive(run->run.spec->json, "KernelSpecification");
	const cJSON *list = cJSON_GetObjectItemCaseSensitive(kernel, "CompilerOptions");
	const cJSON *extension = cJSON_GetObjectItemCaseSensitive(run->run.spec->json, "KernelGraph");
	const cJSON *arch = cJSON_GetObjectItemCaseSensitive(extension, "Arch");
	const char *spec_arch = NULL, *spec_field = "KernelGraph.Arch";
	if (arch && !cJSON_IsString(arch)) {
		run->error = xasprintf("%s/spec.json: KernelGraph.Arch: must be a string like \"sm_90\"", run->run.dir);
		return -1;
	}
	if (arch)
		spec_arch = arch->valuestring;

	size_t n = (size_t)cJSON_GetArraySize(list), k = 0;
	char **items = xcalloc(n + 1, sizeof(*items));
	const cJSON *item;
	cJSON_ArrayForEach(item, list)
		items[k++] = item->valuestring; /* t1_load checked that each is a string */
	run->base_options = xcalloc(n + 1, sizeof(*run->base_options));
	for (k = 0; k < n;) {
		const char *value;
		int span = arch_in_options(items, n, k, &value);
		if (span) {
			if (!spec_arch) {
				spec_arch = value;
				spec_field = "KernelSpecification.CompilerOptions";
			}
			k += (size_t)span;
			continue;
		}
		run->base_options[run->nbase_options++] = xstrdup(items[k++]);
	}
	int rc = choose_arch(run, arch_option, spec_arch, spec_field, device, check_nvrtc);
	free(items);
	return rc;
}

/* Removes what kg-build processes killed mid-build left behind (".tmp-PID-*"). */
static void remove_stale_temporaries(const char *variants)
{
	DIR *d = opendir(variants);
	if (!d)
		return;
	struct dirent *e;
	while ((e = readdir(d))) {
		long pid;
		if (sscanf(e->d_name, ".tmp-%ld-", &pid) != 1 || pid <= 0 || pid == (long)getpid())
			continue;
		if (kill((pid_t)pid, 0) == 0 || errno != ESRCH)
			continue;
		char *path = xasprintf("%s/%s", variants, e->d_name);
		dir_remove_tree(path);
		free(path);
	}
	closedir(d);
}

struct build_run *build_run_load(const char *dir, const char *arch_option, int device, int check_nvrtc)
{
	struct build_run *run = xcalloc(1, sizeof(*run));
	char *spec_path = run_path(dir, RUN_SPEC);
	int unreadable;
	if (run_init(&run->run, dir, &unreadable) != 0) {
		run->error = xasprintf("run '%s' has no usable spec.json (see above)", dir);
		goto done;
	}
	size_t len;
	const struct t1_spec *spec = run->run.spec;
	/* A link in the run that leads out of it is no kernel either (the spec loader refused
	 * absolute and ".." names already). */
	if (file_confined(spec->kernel_dir, spec->kernel_file, 1) && access(spec->kernel_path, F_OK) == 0) {
		run->error = xasprintf("%s: KernelSpecification.KernelFile: '%s': %s '%s'; %s", spec_path, spec->kernel_file,
				       FILE_NOT_INSIDE, spec->kernel_dir, T1_FILES_RULE);
		goto done;
	}
	char *text = file_read_all(run->run.spec->kernel_path, &len);
	if (!text) {
		run->error = xasprintf("%s: KernelSpecification.KernelFile: cannot read '%s': %s", spec_path,
				       run->run.spec->kernel_path, strerror(errno));
		goto done;
	}
	run->baseline_source = source_normalize(text, len);
	free(text);
	char resolved[PATH_MAX];
	if (!realpath(run->run.spec->kernel_path, resolved)) {
		run->error = xasprintf("cannot resolve '%s': %s", run->run.spec->kernel_path, strerror(errno));
		goto done;
	}
	run->include_dir = xstrdup(dirname(resolved));
	digest_headers(run);
	struct strbuf ps;
	strbuf_init(&ps);
	pyval_repr(&ps, &run->run.spec->problem_size);
	run->problem_size = strbuf_detach(&ps);
	if (setup_compiler_options(run, arch_option, device, check_nvrtc))
		goto done;
	char *variants = run_path(dir, RUN_VARIANTS);
	if (dir_create_nofollow(variants, 1) != 0)
		run->error = xasprintf("cannot create '%s': %s", variants, strerror(errno));
	else
		remove_stale_temporaries(variants);
	free(variants);
done:
	free(spec_path);
	return run;
}

void build_run_free_all(struct build_run *run)
{
	while (run) {
		struct build_run *next = run->next;
		for (size_t k = 0; k < run->nbase_options; k++)
			free(run->base_options[k]);
		free(run->base_options);
		run_release(&run->run);
		free(run->error);
		free(run->baseline_source);
		free(run->include_dir);
		free(run->problem_size);
		free(run->default_config);
		free(run);
		run = next;
	}
}
