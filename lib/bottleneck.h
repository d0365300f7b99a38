/* bottleneck.h: what limits a kernel, read from its hardware metrics (kg-bench --metrics,
 * variants/STATE/metrics.json) and its PTX figures (kg-build's ptx_profile and regions), and
 * the prior probabilities over the canonical methods (lib/methods.c) that it suggests.
 *
 * Deterministic and without a time model: each class gets a score in [0, 1] from a few
 * figures through ramps (0 below a low threshold, 1 above a high one, linear between); the
 * class is the highest score (ties to the first in the order below), and the priors mix the
 * class-to-method table by the scores. tools/select/README.md, "Bottleneck classes and the
 * moves they favour", is the same table for people.
 *
 * The figures (percentages are of peak; a "roof" is the largest of sm_throughput_pct,
 * dram_throughput_pct, memory_throughput_pct, tensor_pipe_pct, fma_pipe_pct and sfu_pipe_pct;
 * near = ramp(roof, 60, 80), far = 1 - ramp(roof, 30, 50); any figure may be missing, and a
 * term that needs a missing figure counts 0):
 *
 *   atomics         ramp(global_atomics / instructions_issued, 0.01, 0.05): one warp
 *                   instruction in twenty an atomic serializes on the same addresses; 0.3
 *                   for atomics without instructions_issued to compare them with
 *   tensor          ramp(tensor_pipe_pct, 30, 60): the tensor pipe is the busiest unit
 *   sfu             ramp(sfu_pipe_pct, 25, 50): the XU pipe (exp, rsqrt, sin) is narrow (16
 *                   lanes an SM against 128 FMA lanes), so half its peak already limits a kernel
 *   smem            max(ramp(shared_bank_conflicts / shared_wavefronts, 0.1, 0.4),
 *                   ramp(stalls.mio_throttle, 10, 30) x (1 - sfu), on_chip): replayed
 *                   wavefronts, or the shared-memory queue full (an SFU-bound kernel fills it
 *                   too), or on_chip = ramp(memory_throughput_pct, 60, 80) when
 *                   dram_throughput_pct is below half of it: the busiest memory unit near its
 *                   roof is L1/shared memory or L2, not DRAM (a tiled matmul's operand reads)
 *   compute         max(ramp(fma_pipe_pct, 40, 70), max(ramp(sm_throughput_pct, 60, 85),
 *                   ramp(stalls.math_pipe_throttle, 20, 40)) x (1 - max(tensor, sfu, smem,
 *                   gmem_bandwidth))): the FMA pipe busy, or the SM busy with no other unit
 *                   to blame (integer and issue work)
 *   gmem_bandwidth  ramp(dram_throughput_pct, 50, 80) (memory_throughput_pct when DRAM's is
 *                   missing): near the DRAM roof only less traffic or fuller transactions help
 *   overlap         (1 - near) x max(ramp(stalls.barrier, 15, 40), ramp(stalls.long_scoreboard,
 *                   20, 50) x (1 - far)): warps wait at barriers or on their loads while the
 *                   units are half busy: loads and math take turns instead of overlapping
 *   latency         far x max(1 - ramp(achieved_occupancy_pct, 20, 40),
 *                   ramp(stalls.long_scoreboard, 20, 50)): too few warps, or warps waiting on
 *                   memory, with every unit far from its roof (far is 0.5 without any roof)
 *
 * Without metrics (no metrics.json, or "status": "unavailable"), the PTX figures alone give a
 * weaker guess, said as such (from "ptx", confidence halved): tensor 0.6 when the kernel has
 * mma/wgmma instructions (or tensor FLOPs); atomics 0.5 with atomic instructions; compute 0.5
 * with at least 32 FMAs and no tensor instruction (a dot product on FMA units); gmem_bandwidth
 * 0.5 with global accesses, no tensor instruction and at most two floating-point instructions
 * per global access (a streaming kernel); overlap 0.4 with a loop, a barrier and global loads
 * but no async copy. PTX cannot show bank conflicts, SFU load or latency: those stay 0.
 *
 * The class is "unclassified" when no score reaches 0.2; otherwise confidence is
 * s1 - s2 / 2 (s1, s2 the two highest scores), halved for a PTX-only guess.
 *
 * Priors: b(m) is proportional to 0.05 + sum over classes c of score(c) x table(c, m) x
 * done(m), the table being (weights 0 to 1; "why" in the README):
 *
 *   atomics         avoid_atomics_reduce 1, change_work_per_thread .6, switch_algorithm .5,
 *                   change_block_sizes .3
 *   tensor          change_block_sizes .8, enable_async_pipeline .6, change_pipeline_depth .6,
 *                   switch_to_mma_or_wgmma .6, grouped_gemm_colmajor .4, change_work_per_thread .4
 *   sfu             softmax_math_fusion 1, change_work_per_thread .4, change_vector_width .3,
 *                   switch_algorithm .3
 *   smem            switch_algorithm .8, change_block_sizes .6, change_vector_width .5,
 *                   change_work_per_thread .4, switch_to_mma_or_wgmma .2
 *   compute         switch_to_mma_or_wgmma 1, softmax_math_fusion .5, change_work_per_thread .5,
 *                   change_unrolling .5, change_vector_width .3, switch_algorithm .3
 *   gmem_bandwidth  vectorize_global_loads .8, change_vector_width .6, cache_policy_cg .6,
 *                   grouped_gemm_colmajor .6, change_block_sizes .5, change_work_per_thread .4,
 *                   pad_tail_and_mask .3, softmax_math_fusion .3
 *   overlap         enable_async_pipeline 1, change_pipeline_depth .8, change_unrolling .4,
 *                   change_block_sizes .4, change_work_per_thread .3
 *   latency         change_block_sizes .8, change_work_per_thread .6, change_unrolling .6,
 *                   enable_async_pipeline .6, change_pipeline_depth .5, vectorize_global_loads .4
 *
 * and done(m), from the PTX figures when there are any, lowering a move the kernel has made
 * already: vectorize_global_loads x 0.25 when no global load is scalar; enable_async_pipeline
 * x 0.25 with async copies or waits; switch_to_mma_or_wgmma x 0.1 with wgmma, x 0.5 with
 * mma/wmma only, x 0.25 with neither and fewer than 32 FMAs (no dot product to move);
 * avoid_atomics_reduce x 0.1 without atomic instructions. An unclassified kernel's priors are
 * uniform. */
#ifndef KG_BOTTLENECK_H
#define KG_BOTTLENECK_H

#include "common.h"

#include <stddef.h>

#include <cjson/cJSON.h>

#include "xalloc.h"

/* The figures of metrics.json's "values" the model reads; stalls are "stalls.NAME". */
enum bottleneck_figure {
	BF_SM, BF_DRAM, BF_MEMORY, BF_OCCUPANCY, BF_THEORETICAL_OCCUPANCY, BF_L1_HIT, BF_L2_HIT,
	BF_TENSOR, BF_FMA, BF_SFU, BF_BANK_CONFLICTS, BF_WAVEFRONTS, BF_ATOMICS, BF_INSTRUCTIONS, BF_IPC,
	BF_STALL_LONG_SCOREBOARD, BF_STALL_BARRIER, BF_STALL_MIO_THROTTLE, BF_STALL_SHORT_SCOREBOARD,
	BF_STALL_MATH_PIPE_THROTTLE, BF_STALL_WAIT, BF_STALL_NOT_SELECTED, BF_STALL_LG_THROTTLE,
	BOTTLENECK_NFIGURES
};

struct bottleneck_metrics {
	double value[BOTTLENECK_NFIGURES]; /* NAN where metrics.json has none (absent or null) */
	char limiter[16];		   /* occupancy_limiter, "" when absent or null */
};

/* In the order that breaks ties: the more specific unit first. */
enum bottleneck_class {
	BC_ATOMICS, BC_TENSOR, BC_SFU, BC_SMEM, BC_COMPUTE, BC_GMEM_BANDWIDTH, BC_OVERLAP, BC_LATENCY,
	BOTTLENECK_NCLASSES,
	BC_UNCLASSIFIED = BOTTLENECK_NCLASSES /* no score reaches 0.2 */
};

/* The methods the priors are over: the first fifteen of lib/methods.c (not shared_memory_tiling). */
#define BOTTLENECK_NMETHODS 15

/* What a classification was made from. */
enum bottleneck_source {
	BS_NOTHING, /* neither metrics nor PTX figures: unclassified */
	BS_PTX,	    /* the PTX figures alone: a weaker guess */
	BS_METRICS, /* hardware metrics (PTX figures only lower moves already made) */
};

struct bottleneck {
	enum bottleneck_class kind;
	enum bottleneck_source from;
	double confidence;		       /* 0 to 1; 0 when unclassified */
	double score[BOTTLENECK_NCLASSES];
	char evidence[BOTTLENECK_NCLASSES][320]; /* per class, the figures behind its score ("" for 0) */
	double prior[BOTTLENECK_NMETHODS];     /* over method_seeds[], in its order; sums to 1 */
};

/* Reads metrics.json's document doc into m. name (the file, for messages) is borrowed.
 * Returns 1 when it holds values ("status": "ok"), 0 when it says they are unavailable, or -1
 * with why set to "NAME: FIELD: what is wrong" when it is not such a document: a percentage
 * outside 0 to 110 (counters read at slightly different moments overshoot 100 a little; more
 * is taken as 100), a negative count, a limiter not among registers, shared_memory, threads,
 * blocks. Keys the model does not read are not checked. */
int bottleneck_metrics_read(const cJSON *doc, const char *name, struct bottleneck_metrics *m, struct strbuf *why);

/* The same for the file at path: 0 too when it does not exist; -1 with why set when it
 * cannot be read or is not JSON. */
int bottleneck_metrics_load(const char *path, struct bottleneck_metrics *m, struct strbuf *why);

/* Classifies from metrics (NULL: none) and build (a build object with ptx_profile and regions,
 * or NULL) into b. Never fails: with neither, b is unclassified (from BS_NOTHING) with
 * uniform priors. */
void bottleneck_classify(const struct bottleneck_metrics *metrics, const cJSON *build, struct bottleneck *b);

/* The class's name: "gmem_bandwidth", ..., "unclassified". */
const char *bottleneck_class_name(enum bottleneck_class kind);

/* b's prior of the canonical method named method, or NAN for a name that is not one. */
double bottleneck_prior(const struct bottleneck *b, const char *method);

/* How much b moves the prior of an edge with method: the mixture
 * (1 - beta) x uniform + beta x b, divided by the uniform 1/BOTTLENECK_NMETHODS, with
 * beta = BOTTLENECK_WEIGHT x confidence; 1 for a method that is not canonical. kg-select
 * multiplies a new edge's prior by it, and normalizes over siblings as ever. */
#define BOTTLENECK_WEIGHT 0.5
double bottleneck_edge_factor(const struct bottleneck *b, const char *method);

/* b as {"class", "from" ("metrics", "ptx" or "nothing"), "confidence", "evidence", "scores": {class: score}, "priors":
 * {method: p}, "favoured": [the methods whose prior is above uniform, highest first]},
 * numbers rounded to 4 decimals. The caller frees it with cJSON_Delete. */
cJSON *bottleneck_to_json(const struct bottleneck *b);

/* The favoured methods of b, at most max of them, highest prior first (those above the
 * uniform prior): indices into method_seeds[]. Returns how many. */
size_t bottleneck_favoured(const struct bottleneck *b, size_t *index, size_t max);

#endif
