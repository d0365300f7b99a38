/* cache.c: one directory per entry, filled under a temporary name and renamed into place,
 * so concurrent kg-build processes never see half an entry. */
#include "common.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cache.h"
#include "fileio.h"
#include "jsonl.h"
#include "log.h"
#include "run.h"

/* What a compile leaves in a variant's folder, which an entry keeps. */
static const enum variant_file entry_files[] = {VARIANT_BUILD_LOG, VARIANT_PTX, VARIANT_CUBIN};

void cache_init(struct build_cache *cache, const char *option, int disabled)
{
	cache->dir = NULL;
	if (disabled)
		return;
	cache->dir = option ? xstrdup(option) : kg_cache_dir();
	if (!cache->dir)
		log_warn("no compile cache: neither XDG_CACHE_HOME nor HOME is set (give --cache-dir DIR)");
}

void cache_release(struct build_cache *cache)
{
	free(cache->dir);
	cache->dir = NULL;
}

int cache_fetch(const struct build_cache *cache, const char *key, const char *variant_dir, struct compile_result *res)
{
	if (!cache->dir)
		return 0;
	char *entry = xasprintf("%s/nvrtc/%s", cache->dir, key);
	char *result_path = xasprintf("%s/result.json", entry);
	size_t len;
	char *text = file_read_all(result_path, &len);
	cJSON *result = text ? cJSON_ParseWithLength(text, len) : NULL;
	int hit = 0;
	if (cJSON_IsObject(result)) {
		const cJSON *ok = cJSON_GetObjectItemCaseSensitive(result, "ok");
		const cJSON *ms = cJSON_GetObjectItemCaseSensitive(result, "compile_ms");
		const cJSON *function = cJSON_GetObjectItemCaseSensitive(result, "function");
		const cJSON *error = cJSON_GetObjectItemCaseSensitive(result, "error");
		hit = 1;
		for (size_t k = 0; k < ARRAY_SIZE(entry_files) && hit; k++) {
			char *from = xasprintf("%s/%s", entry, run_variant_file(entry_files[k]));
			char *to = xasprintf("%s/%s", variant_dir, run_variant_file(entry_files[k]));
			/* A failed compile has no cubin and maybe no PTX; a successful one has all three. */
			if (file_copy(from, to) != 0 && (errno != ENOENT || cJSON_IsTrue(ok)))
				hit = 0;
			free(from);
			free(to);
		}
		if (hit) {
			memset(res, 0, sizeof(*res));
			res->ok = cJSON_IsTrue(ok);
			res->definitive = 1;
			res->compile_ms = cJSON_IsNumber(ms) ? ms->valuedouble : 0;
			res->function = cJSON_IsString(function) ? xstrdup(function->valuestring) : NULL;
			res->error = cJSON_IsString(error) ? xstrdup(error->valuestring) : NULL;
		}
	}
	if (text && !hit)
		log_warn("compile cache entry '%s' is damaged; compiling again", entry);
	cJSON_Delete(result);
	free(text);
	free(result_path);
	free(entry);
	return hit;
}

static int fill_entry(const char *tmp, const char *variant_dir, const struct compile_result *res)
{
	for (size_t k = 0; k < ARRAY_SIZE(entry_files); k++) {
		char *from = xasprintf("%s/%s", variant_dir, run_variant_file(entry_files[k]));
		char *to = xasprintf("%s/%s", tmp, run_variant_file(entry_files[k]));
		int rc = file_copy(from, to);
		free(from);
		free(to);
		if (rc != 0 && errno != ENOENT)
			return -1;
	}
	cJSON *result = cJSON_CreateObject();
	if (!result || !cJSON_AddBoolToObject(result, "ok", res->ok) ||
	    !cJSON_AddNumberToObject(result, "compile_ms", res->compile_ms) ||
	    (res->function && !cJSON_AddStringToObject(result, "function", res->function)) ||
	    (res->error && !cJSON_AddStringToObject(result, "error", res->error)))
		xalloc_die();
	char *text = cJSON_PrintUnformatted(result);
	cJSON_Delete(result);
	if (!text)
		xalloc_die();
	char *path = xasprintf("%s/result.json", tmp);
	int rc = file_write(path, text, strlen(text));
	free(path);
	cJSON_free(text);
	return rc;
}

void cache_store(const struct build_cache *cache, const char *key, const char *variant_dir,
		 const struct compile_result *res)
{
	if (!cache->dir)
		return;
	char *root = xasprintf("%s/nvrtc", cache->dir);
	char *tmp = xasprintf("%s/.tmp-XXXXXX", root);
	char *entry = xasprintf("%s/%s", root, key);
	if (dir_create(root) != 0 || !mkdtemp(tmp)) {
		log_warn("cannot store in the compile cache '%s':", root);
	} else if (fill_entry(tmp, variant_dir, res) != 0) {
		log_warn("cannot store in the compile cache '%s':", tmp);
		dir_remove_tree(tmp);
	} else if (rename(tmp, entry) != 0) {
		/* Another process stored the same entry first: theirs is as good. */
		if (errno != EEXIST && errno != ENOTEMPTY)
			log_warn("cannot store in the compile cache '%s':", entry);
		dir_remove_tree(tmp);
	}
	free(root);
	free(tmp);
	free(entry);
}
