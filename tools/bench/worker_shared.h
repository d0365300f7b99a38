/* worker_shared.h: what the worker's files share: the device it holds, a failure, a kernel, a
 * run's buffers on the device, a check's verdict and a timing loop's samples.
 *
 * The worker is one process (worker.h) split by what each file owns, each calling only those
 * listed before it (no file's code calls back into one above it): worker_device.c the device, the
 * GPU's lock, the check results and failures; worker_launch.c a build's kernel, loaded and
 * launched; worker_buffers.c a run's buffers and their fills; worker_checks.c the reference
 * and the checks against it; worker_timing.c the timing loop and a timed record's figures;
 * worker_metrics.c the metrics and PC sampling replays; worker.c the request loop over them
 * all. Only the worker includes this header; kg-bench's parent never touches CUDA. */
#ifndef KG_BENCH_WORKER_SHARED_H
#define KG_BENCH_WORKER_SHARED_H

#include "common.h"

#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "gpu.h"
#include "harness.h"
#include "kargs.h"
#include "run.h"
#include "worker.h"
#include "xalloc.h"

/* ---------------------------------------------------------------- failures (worker_device.c) */

/* A CUDA call failed: the answer is a crashed or error record, and the worker ends. */
struct failure {
	int failed;
	char status[16];  /* "crashed" (the kernel faulted) or "error" (it could not run) */
	char what[1024];
};

/* Fills f (its first failure only) and returns -1: when rc is an error (check_cuda: "crashed"
 * for a fault, else "error"; what names the call), or with status and the message (fail_with).
 * check_cuda returns 0 on success. */
int check_cuda(struct failure *f, CUresult rc, const char *what);
int fail_with(struct failure *f, const char *status, const char *fmt, ...) PRINTF_LIKE(3, 4);

/* ---------------------------------------------------------------- the device (worker_device.c) */

/* Results of the harness's checks: a device array of struct harness_result, handed out in
 * order between two reads and zeroed before reuse. */
enum { RESULTS = 16384 };

/* The one device the worker holds, opened by open_device. */
struct worker_device {
	CUdevice dev;
	int ordinal;		/* dev's CUDA ordinal in this process: 0 when shown alone (lib/visible.h) */
	CUcontext ctx;
	CUstream stream;
	char name[256];
	char pci_bus_id[64];
	size_t l2_bytes;
	int smem_optin;		/* the most shared memory a block may opt in to */
	int tensor_maps;	/* compute capability 9.0 or later, or unknown: tensor maps are encoded */
	CUdeviceptr flush;	/* twice the L2, written before each cold sample */
	size_t flush_bytes;
	struct harness harness;
	CUdeviceptr results;	/* RESULTS harness_results */
	struct harness_result *host_results;
	size_t nresults;	/* handed out since the last results_reset */
	CUevent mark[2];	/* around fills, for their GPU time */
	int out_fd;
	double last_progress;
	uint64_t rng;		/* which timed launches are verified: nothing a kernel can see */
	const char *cache_dir;	/* where compiled device code is kept */
	int spoiled;		/* a CUDA error the answer does not report (the metrics replay): end after it */
	double open_wait_ms;	/* waited for the GPU's lock to make the context: the first record's wait */
};

extern struct worker_device gpu;

/* Opens --device into gpu (context, stream, flush buffer, results, the harness). 0, or -1 with
 * why set. */
int open_device(const struct bench_settings *settings, struct strbuf *why);
/* The device's figures as kg-propose's prompt shows them; the caller deletes it. */
cJSON *device_json(void);
/* Tells kg-bench the GPU is alive (at most every 50 ms). */
void progress(void);
/* The GPU's lock, taken for one record (or a run's preparation) and released after. */
int gpu_lock_take(const struct bench_settings *cfg, double *wait_ms, struct failure *f);
void gpu_lock_release(void);
/* The check results: zeroed before a record's launches, handed out one by one (result_take,
 * result_ptr: its device address), read back together (results_read, into gpu.host_results). */
int results_reset(struct failure *f);
long result_take(struct failure *f);
CUdeviceptr result_ptr(long k);
int results_read(struct failure *f);
/* Replaces path with doc; a failure is only warned about. */
void write_json_file(const char *path, const cJSON *doc);

/* ---------------------------------------------------------------- kernels (worker_launch.c) */

/* A build's kernel, loaded: its module and function, launch shape and tensor maps. */
struct kernel {
	CUmodule module;
	CUfunction function;
	unsigned grid[3], block[3];
	size_t smem; /* dynamic shared memory: the spec's fixed bytes plus the build's shared_bytes */
	char name[512];
	CUtensorMap *maps; /* KernelGraph.TensorMaps for the build's configuration (64-byte aligned),
			      passed after the arguments */
	size_t nmaps;
};

/* ---------------------------------------------------------------- a run's buffers (worker_buffers.c) */

/* One buffer of the run's arena. */
struct slot {
	size_t offset, bytes; /* bytes 0: no buffer */
};

/* The device side of one argument (or of one ReferenceArguments entry, which fills its
 * target's ref slot). */
struct warg {
	const struct karg *a;
	struct slot in;	      /* inputs, ReadWrite initial values, Symbols: the data of the loaded set */
	struct slot out;      /* outputs: what the kernel being run writes */
	struct slot ref;      /* outputs: the expected values on the loaded set, masked */
	struct slot ref0;     /* outputs: the reference on the spec's own inputs, masked */
	struct slot pristine; /* data the fill copies: BinaryRaw files, Generators run on the host */
	void *scalar;	      /* Scalars: the value passed to the kernel, on the host */
	int gen_translated;   /* a Generator whose expression the device evaluates (pyexpr_cuda.h) */
	CUfunction gen;	      /* its fill kernel */
	long gen_result;      /* where its fill reports the first element it failed on; -1 */
	int hashed;	      /* a read-only Vector: hashed after each fill and after each check */
	uint64_t hash;	      /* its hash right after the last fill */
};

/* A guard between two buffers: where it is, and the buffers it lies between, for messages. */
struct guard_info {
	size_t offset, bytes;
	const char *prev, *prev_kind; /* the argument whose buffer it follows; NULL before the first */
	const char *next, *next_kind; /* the one whose buffer follows it; NULL after the last */
};

/* A run as the worker keeps it for its life (worker_buffers.c's list): its spec's arguments,
 * their buffers in one arena on the device between guards, its baseline and reference. */
struct wrun {
	struct run run;		/* the directory, its spec and baseline.json */
	struct kargs ka;
	struct warg *args;	/* ka.n */
	struct warg *refs;	/* ka.nrefs: ReferenceArguments, filled into their target's ref */
	CUdeviceptr arena;
	size_t arena_bytes;
	struct guard_info *guards;
	size_t nguards;
	uint64_t guard_words;	/* the largest guard's 8-byte words */
	CUdeviceptr guard_table;
	uint64_t guard_salt, mask_key; /* drawn per worker: no kernel can know them */
	CUmodule gen_module;	/* the run's Generators, when any could be translated */
	struct kernel baseline;
	int has_baseline;
	char *baseline_state;	/* the baseline build's state, which RUN/reference/ must match */
	int ref0_ready;
	struct wrun *next;
};

static inline CUdeviceptr slot_ptr(const struct wrun *r, const struct slot *s)
{
	return r->arena + s->offset;
}

/* Which of an output's buffers a launch writes or a check reads. */
enum which_slot { SLOT_OUT, SLOT_REF, SLOT_REF0 };

static inline const struct slot *slot_of(const struct warg *w, enum which_slot which)
{
	return which == SLOT_OUT ? &w->out : which == SLOT_REF ? &w->ref : &w->ref0;
}

static inline int is_vector_output(const struct karg *a)
{
	return a->memory == KARG_VECTOR && karg_is_output(a);
}

/* The run of dir, made ready on the device the first time; NULL with f filled. */
struct wrun *find_run(const char *dir, struct failure *f);
/* Writes the guards' pattern. */
int guards_write(const struct wrun *r, struct failure *f);
/* After a fill's results are read: a Generator that failed on the device, as the host says it. */
int judge_generators(struct wrun *r, struct failure *f);
/* A build's kernel for r: its module, function and tensor maps (kernel_release frees them). */
int load_run_kernel(const struct wrun *r, const cJSON *build, struct kernel *k, struct failure *f);
/* Fills dst with w's data for input set set. */
int fill(const struct wrun *r, struct warg *w, CUdeviceptr dst, uint64_t set, struct failure *f);
/* Enqueues the hashes of the read-only inputs; *first: the first result they use. */
int enqueue_input_hashes(const struct wrun *r, long *first, struct failure *f);
/* Loads input set set (adding the fills' GPU time to *fill_ms); starts a new set of results. */
int load_set(struct wrun *r, uint64_t set, double *fill_ms, struct failure *f);

/* ---------------------------------------------------------------- launches (worker_launch.c) */

/* Unloads k's module and frees its tensor maps. */
void kernel_release(struct kernel *k);
/* Loads the cubin a build object names (relative to run) and its kernel. */
int load_kernel(const char *run, const cJSON *build, size_t dynamic_smem, struct kernel *k, struct failure *f);
/* A launch of kn on the loaded set, its outputs in the to slots: the Symbols written
 * (write_symbols), the outputs readied (ready_outputs: initial values or poison), the launch
 * (launch_into); run_into does all three. mask_refs masks the which slots of every output. */
int write_symbols(const struct wrun *r, const struct kernel *kn, struct failure *f);
int ready_outputs(const struct wrun *r, enum which_slot to, struct failure *f);
int launch_into(const struct wrun *r, const struct kernel *kn, enum which_slot to, struct failure *f);
int run_into(const struct wrun *r, const struct kernel *kn, enum which_slot to, struct failure *f);
int mask_refs(const struct wrun *r, enum which_slot which, struct failure *f);

/* ---------------------------------------------------------------- the reference and checks (worker_checks.c) */

/* What the check found, over every input set and output. */
struct verdict {
	int passed;
	double max_abs_err, max_rel_err; /* infinite when an output was NaN or infinite */
	int weak;			 /* a reference so small that an all-zero output would pass */
	const char *argument;		 /* the first output (or input) that failed */
	size_t first_bad, bad;
	int input_set;			 /* where it failed: 1, 2, ... the fresh sets; 0 the spec's own */
	char why[512];			 /* a failure that is not a wrong element, in words */
	size_t timed_checks;		 /* timed launches whose outputs were verified */
};

/* The run's baseline kernel (RUN/baseline.json), loaded once. */
int load_run_baseline(struct wrun *r, struct failure *f);
/* The reference (RUN/reference/, in the ref0 slots): read, or made when it is not there
 * (ready_reference, once); made again from the baseline (make_reference). */
int ready_reference(struct wrun *r, double *fill_ms, struct failure *f);
int make_reference(struct wrun *r, double *fill_ms, struct failure *f);
/* The fresh input set k of a candidate, derived from its state (never 0). */
uint64_t check_set_id(const char *state, size_t k);
/* The checks of outputs against a reference and of the guards, enqueued (enqueue_checks) and
 * judged into v once read (judge_checks, judge_inputs); check_set and check_baseline check a
 * kernel on one input set; verdict_to_json is bench.check (the caller's to delete). */
int enqueue_checks(const struct wrun *r, enum which_slot which, long *first, struct failure *f);
int judge_checks(const struct wrun *r, long first, int set_index, struct verdict *v, struct failure *f);
void judge_inputs(const struct wrun *r, long first, int set_index, const char *when, struct verdict *v);
int check_set(struct wrun *r, const struct kernel *kn, uint64_t set, int set_index, struct verdict *v,
	      double *fill_ms, struct failure *f);
int check_baseline(struct wrun *r, const struct kernel *kn, struct verdict *v, double *fill_ms, struct failure *f);
cJSON *verdict_to_json(const struct verdict *v, size_t input_sets);

/* ---------------------------------------------------------------- timing (worker_timing.c) */

/* The samples of one kernel in a timing loop. */
struct series {
	const struct kernel *kn;
	double *events_ms, *cupti_ms;
	size_t n, cap;
};

/* Where the time of a record went, in ms. */
struct phases {
	double wait, setup, load, fill, check, warmup, time, gpu, write;
};

/* Registers CUPTI's buffers for kernel records; without CUPTI, timing uses events alone. */
void trace_open(void);
/* Times series[] interleaved on set 0 (verify: series[0]'s outputs checked after chosen
 * launches, into v); ph gets where the time went. */
int time_series(struct wrun *r, struct series *series, size_t nseries, const struct bench_settings *cfg, int verify,
		int *cupti_used, struct phases *ph, struct verdict *v, struct failure *f);
/* The figures of a timed record into bench: phases, timer and summary, speedup and roofline,
 * clocks; keep_samples writes variants/STATE/bench.json. free_series frees s's samples. */
void free_series(struct series *s);
void add_phases(cJSON *bench, const struct phases *ph);
void add_figures(const struct wrun *r, const cJSON *build, int is_baseline, const struct series *series,
		 int cupti_used, const struct bench_settings *cfg, cJSON *bench);
void add_clocks(cJSON *bench, int before, const char *state);
void keep_samples(const char *run, const cJSON *build, const cJSON *bench, const struct series *series,
		  size_t nseries, int cupti_used);

/* ---------------------------------------------------------------- metrics (worker_metrics.c) */

/* kg-bench --metrics: kn's hardware metrics and PC sample lines into bench.metrics and the
 * variant's files; never changes the record's status. */
void add_metrics(const struct wrun *r, const struct kernel *kn, const cJSON *build, const struct bench_settings *cfg,
		 cJSON *bench);

#endif
