/* run_layout.c: the names of a run directory's files, of a variant's and of OUTDIR's (see
 * run.h): the one table of the layout, apart from the run loaded (run.c), below every reader. */
#include "common.h"

#include <libgen.h>
#include <stdlib.h>

#include "run.h"
#include "xalloc.h"

/* Indexed by enum run_file and enum outdir_file: the one table of the layout. */
static const char *const run_names[] = {
	[RUN_SPEC] = "spec.json",	    [RUN_BASELINE] = "baseline.json", [RUN_REFERENCE] = "reference",
	[RUN_VARIANTS] = "variants",	    [RUN_EVENTS] = "events.jsonl",   [RUN_GRAPH] = "graph.bin",
	[RUN_GRAPH_BLOBS] = "graph.blobs", [RUN_GRAPH_JSON] = "graph.json", [RUN_BEST] = "best",
	[RUN_BEST_JSON] = "best.json",	    [RUN_TRACE] = "trace.md",	     [RUN_LLM] = "llm",
	[RUN_LLM_CACHE] = "llm/cache",
	[RUN_HISTORY] = "history.json",  [RUN_REPLAY] = "replay.table",
};

static const char *const outdir_names[] = {
	[OUTDIR_METHODS] = "methods.json",
	[OUTDIR_REGRAPH] = "regraph.json",
	[OUTDIR_REGRAPH_DATASET] = "regraph_dataset.jsonl",
};

char *run_path(const char *run, enum run_file file)
{
	return xasprintf("%s/%s", run, run_names[file]);
}

/* Indexed by enum variant_file: the one table of a variant's files. */
static const char *const variant_names[] = {
	[VARIANT_DIR] = "",
	[VARIANT_KERNEL] = "kernel.cu",
	[VARIANT_DIFF] = "candidate.diff",
	[VARIANT_BUILD] = "build.json",
	[VARIANT_BUILD_LOG] = "build.log",
	[VARIANT_PTX] = "kernel.ptx",
	[VARIANT_CUBIN] = "kernel.cubin",
	[VARIANT_REGIONS] = "regions.json",
	[VARIANT_BENCH] = "bench.json",
	[VARIANT_METRICS] = "metrics.json",
	[VARIANT_LINES] = "lines.json",
};

const char *run_variant_file(enum variant_file file)
{
	return variant_names[file];
}

char *run_variant_path(const char *run, const char *state, enum variant_file file)
{
	const char *variants = run_names[RUN_VARIANTS];
	return xasprintf("%s%s%s/%s%s%s", run ? run : "", run ? "/" : "", variants, state, file ? "/" : "",
			 variant_names[file]);
}

/* OUTDIR of the run: the folder two levels above it. */
static char *run_outdir(const char *run)
{
	/* dirname may change its argument and return a pointer into it or to static storage:
	 * each call gets its own copy. */
	char *copy = xstrdup(run), *parent = xstrdup(dirname(copy));
	char *outdir = xstrdup(dirname(parent));
	free(copy);
	free(parent);
	return outdir;
}

char *run_outdir_path(const char *run, enum outdir_file file)
{
	char *outdir = run_outdir(run), *path = xasprintf("%s/%s", outdir, outdir_names[file]);
	free(outdir);
	return path;
}
