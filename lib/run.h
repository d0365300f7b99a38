/* run.h: the run directory (docs/design.md "The run directory"): where each of its files
 * lies, the OUTDIR above it and the files runs share there, and the spec and baseline a tool
 * reads once per run.
 *
 * Contract:
 * - The path functions only join names: they touch no file and never fail. Each returns a
 *   string the caller frees. A run is OUTDIR/kernels/NAME, so OUTDIR is two levels above the
 *   run as given (dirname twice: "." for a run given as "NAME" or "kernels/NAME").
 * - struct run is one run's cache: run_init loads spec.json (t1_load reports what is wrong
 *   inside it) but does not report that the run is unusable, which each tool words as its
 *   records need; run_baseline reads baseline.json the first time it is there (kg-bench
 *   writes it while the run is in use). run_release frees what the run holds, never the
 *   struct itself, which the tool embeds in its own. */
#ifndef KG_RUN_H
#define KG_RUN_H

#include "common.h"

#include <cjson/cJSON.h>

#include "t1.h"

/* The files and folders of a run directory. */
enum run_file {
	RUN_SPEC,	/* spec.json (the kernel file is the spec's kernel_path) */
	RUN_BASELINE,	/* baseline.json: the baseline's build and time (kg-bench) */
	RUN_REFERENCE,	/* reference/: the baseline's outputs (kg-bench) */
	RUN_VARIANTS,	/* variants/: one folder per state (run_variant_path) */
	RUN_EVENTS,	/* events.jsonl: the log kg-select --update appends to */
	RUN_GRAPH,	/* graph.bin: the search graph */
	RUN_GRAPH_BLOBS, /* graph.blobs: its strings */
	RUN_GRAPH_JSON, /* graph.json: the graph as kg-select --export prints it */
	RUN_BEST,	/* best: a symbolic link to the incumbent's variants/STATE */
	RUN_BEST_JSON,	/* best.json: the incumbent */
	RUN_TRACE,	/* trace.md */
	RUN_LLM,	/* llm/: every LLM request and answer */
	RUN_LLM_CACHE,	/* llm/cache/ */
	RUN_HISTORY,	/* history.json: how far the model last trusted each --history file (kg-propose) */
	RUN_REPLAY,	/* replay.table: a run made with kg-init --replay: its table, copied (T4 or JSON lines) */
};

/* The files OUTDIR holds for all its runs. */
enum outdir_file {
	OUTDIR_METHODS,		/* methods.json: the method catalog */
	OUTDIR_REGRAPH,		/* regraph.json: the ReGraph */
	OUTDIR_REGRAPH_DATASET, /* regraph_dataset.jsonl: one row per evaluated transition */
};

/* RUN/FILE. */
char *run_path(const char *run, enum run_file file);

/* The files of one variant's folder, RUN/variants/STATE/ (docs/design.md "The run
 * directory"), each written by the tool named. */
enum variant_file {
	VARIANT_DIR,	   /* the folder itself */
	VARIANT_KERNEL,	   /* kernel.cu: the variant's source, as NVRTC, PTX lines and PC samples name it (kg-build) */
	VARIANT_DIFF,	   /* candidate.diff: the candidate's patch, when it had one (kg-build) */
	VARIANT_BUILD,	   /* build.json: the build object (kg-build) */
	VARIANT_BUILD_LOG, /* build.log: what the compiler said (kg-build) */
	VARIANT_PTX,	   /* kernel.ptx (kg-build) */
	VARIANT_CUBIN,	   /* kernel.cubin (kg-build) */
	VARIANT_REGIONS,   /* regions.json: the PTX Region-DAG (kg-build) */
	VARIANT_BENCH,	   /* bench.json: every raw sample and the summary (kg-bench) */
	VARIANT_METRICS,   /* metrics.json: hardware metrics (kg-bench --metrics) */
	VARIANT_LINES,	   /* lines.json: PC samples by source line (kg-bench --metrics) */
};

/* The name of file inside a variant's folder ("" for VARIANT_DIR); static storage. */
const char *run_variant_file(enum variant_file file);

/* RUN/variants/STATE, or RUN/variants/STATE/FILE for a file other than VARIANT_DIR; with run
 * NULL, the path relative to the run, as records and the best link give it. */
char *run_variant_path(const char *run, const char *state, enum variant_file file);

/* OUTDIR/FILE of the run. */
char *run_outdir_path(const char *run, enum outdir_file file);

/* One run directory, as every tool that meets it in its records caches it. */
struct replay;

struct run {
	char *dir;		/* the run as the records name it */
	struct t1_spec *spec;	/* RUN/spec.json; NULL when run_init failed */
	cJSON *baseline;	/* RUN/baseline.json once run_baseline found it, else NULL */
	struct replay *replay;	/* RUN/replay.table once run_replay loaded it, else NULL */
	int replay_read;	/* run_replay looked: 1 none, 2 loaded, -1 there but unusable */
};

/* Fills run for dir and loads its spec (t1_load, which reports what is wrong inside it).
 * Returns 0, or -1 when the spec cannot be used, with *unreadable set when the file could not
 * be read at all; run is then still to be released. */
int run_init(struct run *run, const char *dir, int *unreadable);

/* RUN/baseline.json, read the first time it exists and kept; NULL while there is none (a
 * damaged one is reported, and read again at the next call). The run owns the result. */
const cJSON *run_baseline(struct run *run);

/* Whether the run was made on replayed measurements (kg-init --replay): it holds
 * RUN/replay.table, which every stage answers from unless told otherwise: kg-propose proposes
 * only what it holds, kg-build compiles nothing, kg-bench answers from it. */
int run_replayed(const char *dir);

/* RUN/replay.table, loaded the first time (replay_load) and kept; NULL for a run made without
 * one, and NULL with *broken set after a table that cannot be read was reported (once). The
 * run owns the result. */
const struct replay *run_replay(struct run *run, int *broken);

/* Frees what run holds and zeroes it. */
void run_release(struct run *run);

#endif
