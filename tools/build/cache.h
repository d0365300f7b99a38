/* cache.h: the compile cache that all runs share, so that building what was built before,
 * in any run, costs a copy instead of a compile. Entries are keyed by compile_key(). */
#ifndef KG_BUILD_CACHE_H
#define KG_BUILD_CACHE_H

#include "common.h"

#include "compile.h"

/* dir is the cache's root: --cache-dir, else $XDG_CACHE_HOME/kernelgraph, else
 * ~/.cache/kernelgraph; NULL disables the cache. Entries live in dir/nvrtc/<key>/. */
struct build_cache {
	char *dir;
};

/* Sets cache->dir from the option (may be NULL) and the environment. */
void cache_init(struct build_cache *cache, const char *option, int disabled);
void cache_release(struct build_cache *cache);

/* Copies the entry for key (kernel.ptx, kernel.cubin, build.log) into variant_dir and
 * fills *res with the compile's result as first recorded. Returns 1 on a hit, 0 on a miss
 * (including an unreadable entry, which is then compiled afresh). */
int cache_fetch(const struct build_cache *cache, const char *key, const char *variant_dir, struct compile_result *res);

/* Records the compile that left its files in variant_dir under key. A failure to store is
 * only a warning: the build itself is done. */
void cache_store(const struct build_cache *cache, const char *key, const char *variant_dir,
		 const struct compile_result *res);

#endif
