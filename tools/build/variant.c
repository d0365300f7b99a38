/* variant.c (kg-build): a variant's directory: assembled in a temporary directory inside
 * RUN/variants, described from what the compile left there, then renamed into place. */
#include "common.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "compile.h"
#include "fileio.h"
#include "jsonl.h"
#include "log.h"
#include "ptx_profile.h"
#include "ptx_regions.h"
#include "run.h"
#include "variant.h"
#include "xalloc.h"

/* ---------------------------------------------------------------- the variant directory */

/* The build object kept in variants/STATE/build.json, or NULL when there is none. */
cJSON *read_variant(const struct build_run *run, const char *state)
{
	char *path = run_variant_path(run->run.dir, state, VARIANT_BUILD);
	size_t len;
	char *text = file_read_all(path, &len);
	cJSON *build = text ? json_parse_document(path, text, len) : NULL;
	free(text);
	free(path);
	if (build && !cJSON_IsObject(build)) {
		cJSON_Delete(build);
		return NULL;
	}
	return build;
}

/* A template for mkdtemp inside RUN/variants: a rename from there into place is atomic, and
 * setup.c removes what a killed process left by the pid in its name. */
static char *tmp_variant_template(const struct build_run *run)
{
	char name[64];
	snprintf(name, sizeof(name), ".tmp-%ld-XXXXXX", (long)getpid());
	return run_variant_path(run->run.dir, name, VARIANT_DIR);
}

int make_tmp_dir(struct entry *e)
{
	e->tmp_dir = tmp_variant_template(e->run);
	if (mkdtemp(e->tmp_dir)) {
		/* mkdtemp's 0700 would hide variants from the other users of a shared run. */
		mode_t mask = umask(0);
		umask(mask);
		chmod(e->tmp_dir, 0755 & ~mask);
		return 0;
	}
	log_error("cannot create '%s':", e->tmp_dir);
	free(e->tmp_dir);
	e->tmp_dir = NULL;
	return -1;
}

/* The variant's file in its temporary directory, a path the caller frees. */
char *tmp_file(const struct entry *e, enum variant_file file)
{
	return xasprintf("%s/%s", e->tmp_dir, run_variant_file(file));
}

int write_in_tmp(struct entry *e, enum variant_file file, const char *text)
{
	char *path = tmp_file(e, file);
	int rc = file_write(path, text, strlen(text));
	if (rc)
		log_error("cannot write '%s':", path);
	free(path);
	return rc;
}

void drop_tmp_dir(struct entry *e)
{
	if (e->tmp_dir) {
		dir_remove_tree(e->tmp_dir);
		free(e->tmp_dir);
		e->tmp_dir = NULL;
	}
}

/* Writes the Region-DAG of the compiled entry to regions.json beside kernel.cu and its summary
 * into the build object as "regions"; without an entry in the PTX, or when the file cannot be
 * written (reported), neither. */
static void describe_regions(struct entry *e, const char *ptx, const char *function)
{
	cJSON *graph = ptx_regions(ptx, function, run_variant_file(VARIANT_KERNEL));
	if (!graph)
		return;
	char *json = cJSON_PrintUnformatted(graph);
	if (!json)
		xalloc_die();
	if (write_in_tmp(e, VARIANT_REGIONS, json) == 0) {
		cJSON *summary = ptx_regions_summary(graph);
		char *p = run_variant_path(NULL, e->state, VARIANT_REGIONS);
		json_add_string(summary, "file", p);
		free(p);
		json_add(e->variant, "regions", summary);
	}
	cJSON_free(json);
	cJSON_Delete(graph);
}

/* Reads what the compile left in the temporary directory into the variant's build object. */
void describe_compile(struct entry *e, const struct compile_result *res, int cached)
{
	cJSON *v = e->variant;
	char *log_path = tmp_file(e, VARIANT_BUILD_LOG), *ptx_path = tmp_file(e, VARIANT_PTX);
	size_t len;
	char *log = file_read_all(log_path, &len), *ptx = file_read_all(ptx_path, &len);

	cJSON_ReplaceItemInObjectCaseSensitive(v, "status", cJSON_CreateString(res->ok ? "ok" : "compile_failed"));
	if (!res->ok)
		json_add_string(v, "error", res->error ? res->error : "the compile failed");
	char *p = run_variant_path(NULL, e->state, VARIANT_KERNEL);
	json_add_string(v, "kernel_file", p);
	free(p);
	p = run_variant_path(NULL, e->state, VARIANT_BUILD_LOG);
	json_add_string(v, "log", p);
	free(p);
	if (res->ok) {
		p = run_variant_path(NULL, e->state, VARIANT_CUBIN);
		json_add_string(v, "cubin", p);
		free(p);
		p = run_variant_path(NULL, e->state, VARIANT_PTX);
		json_add_string(v, "ptx", p);
		free(p);
		if (res->function)
			json_add_string(v, "function", res->function);
		struct ptxas_report r;
		ptxas_report_parse(log ? log : "", res->function, &r);
		if (r.found) {
			json_add_number(v, "registers", (double)r.registers);
			json_add_number(v, "smem_bytes", (double)r.smem_bytes);
			json_add_number(v, "cmem_bytes", (double)r.cmem_bytes);
			json_add_number(v, "stack_bytes", (double)r.stack_bytes);
			json_add_number(v, "spill_stores", (double)r.spill_stores);
			json_add_number(v, "spill_loads", (double)r.spill_loads);
			json_add_number(v, "spill_bytes", (double)(r.spill_stores + r.spill_loads));
		}
	}
	json_add_number(v, "compile_ms", (double)(long long)(res->compile_ms * 10 + 0.5) / 10);
	if (!cJSON_AddBoolToObject(v, "cached", cached))
		xalloc_die();
	if (res->ok && ptx) {
		json_add(v, "ptx_profile", ptx_profile(ptx));
		describe_regions(e, ptx, res->function);
	}
	free(log);
	free(ptx);
	free(log_path);
	free(ptx_path);
}

/* Whether a variant's build object was compiled: only kg-build --no-compile makes variants
 * without a cubin, and says so with "compiled": false. */
int variant_compiled(const cJSON *variant)
{
	return !cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(variant, "compiled"));
}

/* Puts the assembled variant in the place of final, a variant that was not compiled: final
 * is moved aside (renames are atomic, so a reader sees one variant or the other), the new
 * one renamed into place, the old one removed. Returns 0, or -1 when another process put
 * its own variant there first. */
static int replace_variant(struct entry *e, const char *final)
{
	char *old = tmp_variant_template(e->run);
	int rc = -1;
	if (mkdtemp(old)) {
		/* rename replaces the empty directory mkdtemp made */
		if (rename(final, old) == 0 && rename(e->tmp_dir, final) == 0)
			rc = 0;
		dir_remove_tree(old);
	}
	free(old);
	return rc;
}

/* Moves the assembled variant to variants/STATE. When another process got there first, its
 * variant (the same state) is taken instead, unless it was not compiled and this one was.
 * Returns 0, or -1 after reporting. */
int publish_variant(struct entry *e)
{
	char *json = cJSON_PrintUnformatted(e->variant);
	if (!json)
		xalloc_die();
	int rc = write_in_tmp(e, VARIANT_BUILD, json);
	cJSON_free(json);
	if (rc)
		return -1;
	char *final = run_variant_path(e->run->run.dir, e->state, VARIANT_DIR);
	if (rename(e->tmp_dir, final) == 0) {
		free(e->tmp_dir);
		e->tmp_dir = NULL;
	} else if (errno == EEXIST || errno == ENOTEMPTY) {
		cJSON *theirs = read_variant(e->run, e->state);
		int replaced = 0;
		if (theirs && !variant_compiled(theirs) && variant_compiled(e->variant)) {
			replaced = replace_variant(e, final) == 0;
			cJSON_Delete(theirs);
			theirs = replaced ? NULL : read_variant(e->run, e->state);
		}
		if (replaced) {
			free(e->tmp_dir);
			e->tmp_dir = NULL;
		} else if (theirs) {
			cJSON_Delete(e->variant);
			e->variant = theirs;
			e->reused = 1;
		} else {
			rc = log_error("'%s' exists but has no readable build.json", final);
		}
	} else {
		rc = log_error("cannot rename '%s' to '%s':", e->tmp_dir, final);
	}
	free(final);
	drop_tmp_dir(e);
	return rc;
}
