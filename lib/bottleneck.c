/* bottleneck.c: the bottleneck model of bottleneck.h: metrics.json read and checked, a score
 * per class from ramps over the figures, and the priors over the canonical methods. */
#include "common.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "bottleneck.h"
#include "fileio.h"
#include "jsonl.h"
#include "methods.h"

enum figure_kind { PERCENT, COUNT };

/* Where each figure lies in "values" ("stalls.x" inside "stalls") and what it may hold. */
static const struct {
	const char *key;
	enum figure_kind kind;
} figures[BOTTLENECK_NFIGURES] = {
	[BF_SM] = {"sm_throughput_pct", PERCENT},
	[BF_DRAM] = {"dram_throughput_pct", PERCENT},
	[BF_MEMORY] = {"memory_throughput_pct", PERCENT},
	[BF_OCCUPANCY] = {"achieved_occupancy_pct", PERCENT},
	[BF_THEORETICAL_OCCUPANCY] = {"theoretical_occupancy_pct", PERCENT},
	[BF_L1_HIT] = {"l1_hit_rate_pct", PERCENT},
	[BF_L2_HIT] = {"l2_hit_rate_pct", PERCENT},
	[BF_TENSOR] = {"tensor_pipe_pct", PERCENT},
	[BF_FMA] = {"fma_pipe_pct", PERCENT},
	[BF_SFU] = {"sfu_pipe_pct", PERCENT},
	[BF_BANK_CONFLICTS] = {"shared_bank_conflicts", COUNT},
	[BF_WAVEFRONTS] = {"shared_wavefronts", COUNT},
	[BF_ATOMICS] = {"global_atomics", COUNT},
	[BF_INSTRUCTIONS] = {"instructions_issued", COUNT},
	[BF_IPC] = {"ipc", COUNT},
	[BF_STALL_LONG_SCOREBOARD] = {"stalls.long_scoreboard", PERCENT},
	[BF_STALL_BARRIER] = {"stalls.barrier", PERCENT},
	[BF_STALL_MIO_THROTTLE] = {"stalls.mio_throttle", PERCENT},
	[BF_STALL_SHORT_SCOREBOARD] = {"stalls.short_scoreboard", PERCENT},
	[BF_STALL_MATH_PIPE_THROTTLE] = {"stalls.math_pipe_throttle", PERCENT},
	[BF_STALL_WAIT] = {"stalls.wait", PERCENT},
	[BF_STALL_NOT_SELECTED] = {"stalls.not_selected", PERCENT},
	[BF_STALL_LG_THROTTLE] = {"stalls.lg_throttle", PERCENT},
};

static const char *const limiters[] = {"registers", "shared_memory", "threads", "blocks"};

static const char *const class_names[BOTTLENECK_NCLASSES + 1] = {
	[BC_ATOMICS] = "atomics", [BC_TENSOR] = "tensor", [BC_SFU] = "sfu", [BC_SMEM] = "smem",
	[BC_COMPUTE] = "compute", [BC_GMEM_BANDWIDTH] = "gmem_bandwidth", [BC_OVERLAP] = "overlap",
	[BC_LATENCY] = "latency", [BC_UNCLASSIFIED] = "unclassified"};

/* The class-to-method table of bottleneck.h; the README says why for each row. */
static const struct {
	enum bottleneck_class kind;
	const char *method;
	double weight;
} favours[] = {
	{BC_ATOMICS, "avoid_atomics_reduce", 1},	 {BC_ATOMICS, "change_work_per_thread", .6},
	{BC_ATOMICS, "switch_algorithm", .5},		 {BC_ATOMICS, "change_block_sizes", .3},
	{BC_TENSOR, "change_block_sizes", .8},		 {BC_TENSOR, "enable_async_pipeline", .6},
	{BC_TENSOR, "change_pipeline_depth", .6},	 {BC_TENSOR, "switch_to_mma_or_wgmma", .6},
	{BC_TENSOR, "grouped_gemm_colmajor", .4},	 {BC_TENSOR, "change_work_per_thread", .4},
	{BC_SFU, "softmax_math_fusion", 1},		 {BC_SFU, "change_work_per_thread", .4},
	{BC_SFU, "change_vector_width", .3},		 {BC_SFU, "switch_algorithm", .3},
	{BC_SMEM, "switch_algorithm", .8},		 {BC_SMEM, "change_block_sizes", .6},
	{BC_SMEM, "change_vector_width", .5},		 {BC_SMEM, "change_work_per_thread", .4},
	{BC_SMEM, "switch_to_mma_or_wgmma", .2},	 {BC_COMPUTE, "switch_to_mma_or_wgmma", 1},
	{BC_COMPUTE, "softmax_math_fusion", .5},	 {BC_COMPUTE, "change_work_per_thread", .5},
	{BC_COMPUTE, "change_unrolling", .5},		 {BC_COMPUTE, "change_vector_width", .3},
	{BC_COMPUTE, "switch_algorithm", .3},		 {BC_GMEM_BANDWIDTH, "vectorize_global_loads", .8},
	{BC_GMEM_BANDWIDTH, "change_vector_width", .6},	 {BC_GMEM_BANDWIDTH, "cache_policy_cg", .6},
	{BC_GMEM_BANDWIDTH, "grouped_gemm_colmajor", .6}, {BC_GMEM_BANDWIDTH, "change_block_sizes", .5},
	{BC_GMEM_BANDWIDTH, "change_work_per_thread", .4}, {BC_GMEM_BANDWIDTH, "pad_tail_and_mask", .3},
	{BC_GMEM_BANDWIDTH, "softmax_math_fusion", .3},	 {BC_OVERLAP, "enable_async_pipeline", 1},
	{BC_OVERLAP, "change_pipeline_depth", .8},	 {BC_OVERLAP, "change_unrolling", .4},
	{BC_OVERLAP, "change_block_sizes", .4},		 {BC_OVERLAP, "change_work_per_thread", .3},
	{BC_LATENCY, "change_block_sizes", .8},		 {BC_LATENCY, "change_work_per_thread", .6},
	{BC_LATENCY, "change_unrolling", .6},		 {BC_LATENCY, "enable_async_pipeline", .6},
	{BC_LATENCY, "change_pipeline_depth", .5},	 {BC_LATENCY, "vectorize_global_loads", .4},
};

/* Every method keeps this much of the mixture, so that no move is ruled out by a guess. */
#define PRIOR_FLOOR 0.05
/* Below this top score nothing stands out: the kernel is unclassified. */
#define MIN_SCORE 0.2

/* ---------------------------------------------------------------- metrics.json */

static int bad_field(struct strbuf *why, const char *name, const char *field, const char *what)
{
	strbuf_addf(why, "%s: %s: %s", name, field, what);
	return -1;
}

/* values' member for a figure key, "stalls.x" looked up inside "stalls". */
static const cJSON *figure_item(const cJSON *values, const char *key)
{
	const char *dot = strchr(key, '.');
	if (!dot)
		return cJSON_GetObjectItemCaseSensitive(values, key);
	char outer[32];
	snprintf(outer, sizeof(outer), "%.*s", (int)(dot - key), key);
	return cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(values, outer), dot + 1);
}

static int read_figures(const cJSON *values, const char *name, struct bottleneck_metrics *m, struct strbuf *why)
{
	const cJSON *stalls = cJSON_GetObjectItemCaseSensitive(values, "stalls");
	if (stalls && !cJSON_IsNull(stalls) && !cJSON_IsObject(stalls))
		return bad_field(why, name, "values.stalls", "must be an object of percentages");
	for (int f = 0; f < BOTTLENECK_NFIGURES; f++) {
		const cJSON *item = figure_item(values, figures[f].key);
		char field[64];
		snprintf(field, sizeof(field), "values.%s", figures[f].key);
		/* null is how a writer prints a figure it could not compute (NaN): absent. */
		if (!item || cJSON_IsNull(item))
			continue;
		if (!cJSON_IsNumber(item) || !isfinite(item->valuedouble))
			return bad_field(why, name, field, "must be a number");
		double v = item->valuedouble;
		if (figures[f].kind == PERCENT && (v < 0 || v > 110))
			return bad_field(why, name, field, "must be a percentage from 0 to 110");
		if (figures[f].kind == COUNT && v < 0)
			return bad_field(why, name, field, "must not be negative");
		m->value[f] = figures[f].kind == PERCENT ? fmin(v, 100) : v;
	}
	const cJSON *limiter = cJSON_GetObjectItemCaseSensitive(values, "occupancy_limiter");
	if (!limiter || cJSON_IsNull(limiter))
		return 0;
	for (size_t k = 0; k < ARRAY_SIZE(limiters); k++)
		if (cJSON_IsString(limiter) && strcmp(limiter->valuestring, limiters[k]) == 0) {
			snprintf(m->limiter, sizeof(m->limiter), "%s", limiters[k]);
			return 0;
		}
	return bad_field(why, name, "values.occupancy_limiter", "must be registers, shared_memory, threads, blocks or null");
}

static void metrics_clear(struct bottleneck_metrics *m)
{
	for (int f = 0; f < BOTTLENECK_NFIGURES; f++)
		m->value[f] = NAN;
	m->limiter[0] = '\0';
}

int bottleneck_metrics_read(const cJSON *doc, const char *name, struct bottleneck_metrics *m, struct strbuf *why)
{
	metrics_clear(m);
	if (!cJSON_IsObject(doc)) {
		strbuf_addf(why, "%s: must be a JSON object (kg-bench --metrics writes it)", name);
		return -1;
	}
	const char *status = json_string(doc, "status");
	if (!status || (strcmp(status, "ok") != 0 && strcmp(status, "unavailable") != 0))
		return bad_field(why, name, "status", "must be \"ok\" or \"unavailable\"");
	if (strcmp(status, "unavailable") == 0)
		return 0;
	const cJSON *values = cJSON_GetObjectItemCaseSensitive(doc, "values");
	if (!cJSON_IsObject(values))
		return bad_field(why, name, "values", "must be an object (\"status\" is \"ok\")");
	return read_figures(values, name, m, why) ? -1 : 1;
}

int bottleneck_metrics_load(const char *path, struct bottleneck_metrics *m, struct strbuf *why)
{
	size_t len;
	char *text = file_read_all(path, &len);
	metrics_clear(m);
	if (!text) {
		if (errno == ENOENT)
			return 0;
		strbuf_addf(why, "cannot read '%s': %s", path, strerror(errno));
		return -1;
	}
	const char *end = text;
	cJSON *doc = cJSON_ParseWithLengthOpts(text, len, &end, 0);
	while (doc && end < text + len && strchr(" \t\r\n", *end) && *end)
		end++;
	if (doc && end != text + len) { /* something after the document */
		cJSON_Delete(doc);
		doc = NULL;
	}
	free(text);
	if (!doc) {
		strbuf_addf(why, "%s: not a JSON document", path);
		return -1;
	}
	int rc = bottleneck_metrics_read(doc, path, m, why);
	cJSON_Delete(doc);
	return rc;
}

/* ---------------------------------------------------------------- the PTX figures */

/* What kg-build's ptx_profile and regions summary say, 0 where they say nothing. */
struct ptx_figures {
	int present;
	double instructions, fma, flops, mma, wgmma, atomics;
	double global_loads, scalar_loads, global_stores, async; /* async: copies or waits */
	double barriers, loops, tensor_flops;
};

static double width_sum(const cJSON *widths)
{
	return json_number(widths, "scalar", 0) + json_number(widths, "v2", 0) + json_number(widths, "v4", 0) +
	       json_number(widths, "v8", 0);
}

static void read_ptx(const cJSON *build, struct ptx_figures *p)
{
	memset(p, 0, sizeof(*p));
	const cJSON *profile = cJSON_GetObjectItemCaseSensitive(build, "ptx_profile");
	const cJSON *regions = cJSON_GetObjectItemCaseSensitive(build, "regions");
	p->present = cJSON_IsObject(profile) || cJSON_IsObject(regions);
	const cJSON *loads = cJSON_GetObjectItemCaseSensitive(profile, "global_loads");
	p->instructions = json_number(profile, "instructions", 0);
	p->fma = json_number(profile, "fma", 0);
	p->flops = json_number(profile, "flop_instructions", 0);
	p->mma = json_number(profile, "mma", 0);
	p->wgmma = json_number(profile, "wgmma", 0);
	p->atomics = json_number(profile, "atomics", 0);
	p->global_loads = width_sum(loads);
	p->scalar_loads = json_number(loads, "scalar", 0);
	p->global_stores = width_sum(cJSON_GetObjectItemCaseSensitive(profile, "global_stores"));
	p->async = json_number(profile, "cp_async", 0) + json_number(profile, "bulk_copies", 0) +
		   json_number(regions, "async_waits", 0);
	p->barriers = fmax(json_number(profile, "barriers", 0), json_number(regions, "barriers", 0));
	p->loops = fmax(json_number(profile, "loops", 0), json_number(regions, "loops", 0));
	p->tensor_flops = json_number(cJSON_GetObjectItemCaseSensitive(regions, "most_flops"), "tensor_flops", 0);
}

/* ---------------------------------------------------------------- scores */

/* 0 at or below lo, 1 at or above hi, linear between; 0 for a missing figure. */
static double ramp(double x, double lo, double hi)
{
	if (isnan(x) || x <= lo)
		return 0;
	return x >= hi ? 1 : (x - lo) / (hi - lo);
}

static void note(struct bottleneck *b, enum bottleneck_class c, const char *fmt, ...) PRINTF_LIKE(3, 4);

/* Appends one piece of evidence to class c's, "; "-separated. */
static void note(struct bottleneck *b, enum bottleneck_class c, const char *fmt, ...)
{
	char *text = b->evidence[c];
	size_t used = strlen(text);
	if (used && used + 2 < sizeof(b->evidence[c]))
		used += (size_t)snprintf(text + used, sizeof(b->evidence[c]) - used, "; ");
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(text + used, sizeof(b->evidence[c]) - used, fmt, ap);
	va_end(ap);
}

/* The largest throughput of the units the metrics name, and which it is; NAN without any. */
static double roof_of(const struct bottleneck_metrics *m, const char **which)
{
	static const enum bottleneck_figure units[] = {BF_SM, BF_DRAM, BF_MEMORY, BF_TENSOR, BF_FMA, BF_SFU};
	double roof = NAN;
	*which = NULL;
	for (size_t k = 0; k < ARRAY_SIZE(units); k++)
		if (!isnan(m->value[units[k]]) && !(roof >= m->value[units[k]])) {
			roof = m->value[units[k]];
			*which = figures[units[k]].key;
		}
	return roof;
}

static void score_units(const struct bottleneck_metrics *m, struct bottleneck *b)
{
	const double *v = m->value;
	double ratio = v[BF_ATOMICS] / v[BF_INSTRUCTIONS];
	if (v[BF_ATOMICS] > 0 && !(v[BF_INSTRUCTIONS] > 0)) {
		b->score[BC_ATOMICS] = 0.3;
		note(b, BC_ATOMICS, "global_atomics %.4g, no instructions_issued to weigh them against", v[BF_ATOMICS]);
	} else if ((b->score[BC_ATOMICS] = ramp(ratio, 0.01, 0.05)) > 0) {
		note(b, BC_ATOMICS, "global_atomics / instructions_issued %.3g (high from 0.05)", ratio);
	}
	if ((b->score[BC_TENSOR] = ramp(v[BF_TENSOR], 30, 60)) > 0)
		note(b, BC_TENSOR, "tensor_pipe_pct %.3g (busy from 60)", v[BF_TENSOR]);
	if ((b->score[BC_SFU] = ramp(v[BF_SFU], 25, 50)) > 0)
		note(b, BC_SFU, "sfu_pipe_pct %.3g (busy from 50)", v[BF_SFU]);
	double conflicts = v[BF_BANK_CONFLICTS] / v[BF_WAVEFRONTS];
	double conflict_score = v[BF_WAVEFRONTS] > 0 ? ramp(conflicts, 0.1, 0.4) : 0;
	double mio_score = ramp(v[BF_STALL_MIO_THROTTLE], 10, 30) * (1 - b->score[BC_SFU]);
	/* The busiest memory unit near its roof while DRAM idles: it is on chip (L1/shared
	 * memory or L2), where more reuse per load and wider accesses help, not less traffic. */
	double on_chip = v[BF_DRAM] < v[BF_MEMORY] / 2 ? ramp(v[BF_MEMORY], 60, 80) : 0;
	b->score[BC_SMEM] = fmax(fmax(conflict_score, mio_score), on_chip);
	if (conflict_score > 0)
		note(b, BC_SMEM, "shared_bank_conflicts / shared_wavefronts %.3g (high from 0.4)", conflicts);
	if (mio_score > 0)
		note(b, BC_SMEM, "stalls.mio_throttle %.3g%% (high from 30)", v[BF_STALL_MIO_THROTTLE]);
	if (on_chip > 0)
		note(b, BC_SMEM, "memory_throughput_pct %.3g (near the roof from 80) with dram_throughput_pct %.3g: "
				 "the busiest memory unit is on chip (L1/shared memory or L2)",
		     v[BF_MEMORY], v[BF_DRAM]);
	double dram = v[BF_DRAM];
	const char *dram_key = figures[BF_DRAM].key;
	if (isnan(dram)) { /* the memory system's busiest unit stands in for DRAM */
		dram = v[BF_MEMORY];
		dram_key = figures[BF_MEMORY].key;
	}
	if ((b->score[BC_GMEM_BANDWIDTH] = ramp(dram, 50, 80)) > 0)
		note(b, BC_GMEM_BANDWIDTH, "%s %.3g (near the roof from 80)", dram_key, dram);
}

/* compute: the FMA pipe, or a busy SM that no other unit explains. */
static void score_compute(const struct bottleneck_metrics *m, struct bottleneck *b)
{
	const double *v = m->value;
	double others = fmax(fmax(b->score[BC_TENSOR], b->score[BC_SFU]), fmax(b->score[BC_SMEM], b->score[BC_GMEM_BANDWIDTH]));
	double fma = ramp(v[BF_FMA], 40, 70), sm = ramp(v[BF_SM], 60, 85) * (1 - others);
	double throttle = ramp(v[BF_STALL_MATH_PIPE_THROTTLE], 20, 40) * (1 - others);
	b->score[BC_COMPUTE] = fmax(fma, fmax(sm, throttle));
	if (fma > 0)
		note(b, BC_COMPUTE, "fma_pipe_pct %.3g (busy from 70)", v[BF_FMA]);
	if (sm > 0)
		note(b, BC_COMPUTE, "sm_throughput_pct %.3g (busy from 85) with no other unit busy", v[BF_SM]);
	if (throttle > 0)
		note(b, BC_COMPUTE, "stalls.math_pipe_throttle %.3g%% (high from 40)", v[BF_STALL_MATH_PIPE_THROTTLE]);
}

/* overlap and latency: stalls and occupancy, placed by how far the busiest unit is from its roof. */
static void score_waiting(const struct bottleneck_metrics *m, struct bottleneck *b)
{
	const double *v = m->value;
	const char *which;
	double roof = roof_of(m, &which);
	double near = ramp(roof, 60, 80), far = isnan(roof) ? 0.5 : 1 - ramp(roof, 30, 50);
	double barrier = ramp(v[BF_STALL_BARRIER], 15, 40), waiting = ramp(v[BF_STALL_LONG_SCOREBOARD], 20, 50);
	double low_occupancy = isnan(v[BF_OCCUPANCY]) ? 0 : 1 - ramp(v[BF_OCCUPANCY], 20, 40);
	b->score[BC_OVERLAP] = (1 - near) * fmax(barrier, waiting * (1 - far));
	if (b->score[BC_OVERLAP] > 0) {
		if (barrier > 0)
			note(b, BC_OVERLAP, "stalls.barrier %.3g%% (high from 40)", v[BF_STALL_BARRIER]);
		if (waiting * (1 - far) > 0)
			note(b, BC_OVERLAP, "stalls.long_scoreboard %.3g%% (high from 50)", v[BF_STALL_LONG_SCOREBOARD]);
		note(b, BC_OVERLAP, "busiest unit %s %.3g (neither idle nor near its roof)", which, roof);
	}
	b->score[BC_LATENCY] = far * fmax(low_occupancy, waiting);
	if (b->score[BC_LATENCY] > 0) {
		if (low_occupancy > 0)
			note(b, BC_LATENCY, "achieved_occupancy_pct %.3g (low below 20)%s%s", v[BF_OCCUPANCY],
			     m->limiter[0] ? ", limited by " : "", m->limiter);
		if (waiting > 0)
			note(b, BC_LATENCY, "stalls.long_scoreboard %.3g%% (high from 50)", v[BF_STALL_LONG_SCOREBOARD]);
		if (which)
			note(b, BC_LATENCY, "busiest unit %s %.3g (far from its roof below 30)", which, roof);
		else
			note(b, BC_LATENCY, "no throughput figure to place it against a roof");
	}
}

/* The weaker guess of the header from the PTX figures alone. */
static void score_ptx(const struct ptx_figures *p, struct bottleneck *b)
{
	double tensor = p->mma + p->wgmma, global = p->global_loads + p->global_stores;
	if (tensor > 0 || p->tensor_flops > 0) {
		b->score[BC_TENSOR] = 0.6;
		note(b, BC_TENSOR, "PTX: mma %.0f, wgmma %.0f", p->mma, p->wgmma);
	}
	if (p->atomics > 0) {
		b->score[BC_ATOMICS] = 0.5;
		note(b, BC_ATOMICS, "PTX: atomics %.0f", p->atomics);
	}
	if (tensor == 0 && p->fma >= 32) {
		b->score[BC_COMPUTE] = 0.5;
		note(b, BC_COMPUTE, "PTX: fma %.0f, no tensor instruction", p->fma);
	}
	if (tensor == 0 && global > 0 && p->flops <= 2 * global) {
		b->score[BC_GMEM_BANDWIDTH] = 0.5;
		note(b, BC_GMEM_BANDWIDTH, "PTX: flop_instructions %.0f for %.0f global loads and stores (streaming from 2 or fewer a load or store)", p->flops, global);
	}
	if (p->loops > 0 && p->barriers > 0 && p->global_loads > 0 && p->async == 0) {
		b->score[BC_OVERLAP] = 0.4;
		note(b, BC_OVERLAP, "PTX: loops %.0f, barriers %.0f, global loads %.0f, no async copy", p->loops, p->barriers, p->global_loads);
	}
}

/* ---------------------------------------------------------------- priors */

static int method_index(const char *name)
{
	for (size_t i = 0; i < BOTTLENECK_NMETHODS && i < method_seed_count; i++)
		if (strcmp(method_seeds[i].name, name) == 0)
			return (int)i;
	return -1;
}

/* done(m) of the header: a move the kernel has made already is worth less. */
static double done_factor(const struct ptx_figures *p, const char *method)
{
	if (!p->present)
		return 1;
	if (strcmp(method, "vectorize_global_loads") == 0)
		return p->global_loads > 0 && p->scalar_loads == 0 ? 0.25 : 1;
	if (strcmp(method, "enable_async_pipeline") == 0)
		return p->async > 0 ? 0.25 : 1;
	if (strcmp(method, "switch_to_mma_or_wgmma") == 0)
		return p->wgmma > 0 ? 0.1 : p->mma > 0 ? 0.5 : p->fma < 32 ? 0.25 : 1;
	if (strcmp(method, "avoid_atomics_reduce") == 0)
		return p->atomics == 0 ? 0.1 : 1;
	return 1;
}

static void set_priors(const struct ptx_figures *p, struct bottleneck *b)
{
	double total = 0;
	for (int i = 0; i < BOTTLENECK_NMETHODS; i++)
		b->prior[i] = PRIOR_FLOOR;
	if (b->kind != BC_UNCLASSIFIED)
		for (size_t r = 0; r < ARRAY_SIZE(favours); r++) {
			int i = method_index(favours[r].method);
			if (i >= 0)
				b->prior[i] += b->score[favours[r].kind] * favours[r].weight * done_factor(p, favours[r].method);
		}
	for (int i = 0; i < BOTTLENECK_NMETHODS; i++)
		total += b->prior[i];
	for (int i = 0; i < BOTTLENECK_NMETHODS; i++)
		b->prior[i] /= total;
}

static void decide(struct bottleneck *b)
{
	double s1 = 0, s2 = 0;
	b->kind = BC_UNCLASSIFIED;
	for (int c = 0; c < BOTTLENECK_NCLASSES; c++) {
		if (b->score[c] > s1) {
			s2 = s1;
			s1 = b->score[c];
			b->kind = (enum bottleneck_class)c;
		} else if (b->score[c] > s2) {
			s2 = b->score[c];
		}
	}
	if (s1 < MIN_SCORE) {
		b->kind = BC_UNCLASSIFIED;
		return;
	}
	b->confidence = fmin(1, fmax(0, s1 - s2 / 2)) * (b->from == BS_METRICS ? 1 : 0.5);
}

void bottleneck_classify(const struct bottleneck_metrics *metrics, const cJSON *build, struct bottleneck *b)
{
	struct ptx_figures ptx;
	memset(b, 0, sizeof(*b));
	read_ptx(build, &ptx);
	b->from = metrics ? BS_METRICS : ptx.present ? BS_PTX : BS_NOTHING;
	if (metrics) {
		score_units(metrics, b);
		score_compute(metrics, b);
		score_waiting(metrics, b);
	} else {
		score_ptx(&ptx, b);
	}
	decide(b);
	set_priors(&ptx, b);
}

const char *bottleneck_class_name(enum bottleneck_class kind)
{
	return kind <= BC_UNCLASSIFIED ? class_names[kind] : "unclassified";
}

double bottleneck_prior(const struct bottleneck *b, const char *method)
{
	int i = method ? method_index(method) : -1;
	return i < 0 ? NAN : b->prior[i];
}

double bottleneck_edge_factor(const struct bottleneck *b, const char *method)
{
	double p = bottleneck_prior(b, method), beta = BOTTLENECK_WEIGHT * b->confidence;
	if (isnan(p) || beta == 0)
		return 1;
	return (1 - beta) + beta * BOTTLENECK_NMETHODS * p;
}

size_t bottleneck_favoured(const struct bottleneck *b, size_t *index, size_t max)
{
	size_t order[BOTTLENECK_NMETHODS], n = 0;
	for (size_t i = 0; i < BOTTLENECK_NMETHODS; i++) {
		if (!(b->prior[i] > 1.0 / BOTTLENECK_NMETHODS + 1e-12))
			continue;
		/* by descending prior; equal priors keep the catalog's order */
		size_t j = n++;
		for (; j > 0 && b->prior[order[j - 1]] < b->prior[i]; j--)
			order[j] = order[j - 1];
		order[j] = i;
	}
	n = n < max ? n : max;
	memcpy(index, order, n * sizeof(*index));
	return n;
}

static double rounded(double x)
{
	return round(x * 1e4) / 1e4;
}

cJSON *bottleneck_to_json(const struct bottleneck *b)
{
	cJSON *out = json_object(), *scores = json_object(), *priors = json_object(), *favoured = cJSON_CreateArray();
	json_add_string(out, "class", bottleneck_class_name(b->kind));
	json_add_string(out, "from", b->from == BS_METRICS ? "metrics" : b->from == BS_PTX ? "ptx" : "nothing");
	json_add_number(out, "confidence", rounded(b->confidence));
	json_add_string(out, "evidence", b->kind != BC_UNCLASSIFIED ? b->evidence[b->kind]
					 : b->from == BS_NOTHING ? "neither metrics nor PTX figures"
								 : "no score reaches 0.2");
	for (int c = 0; c < BOTTLENECK_NCLASSES; c++)
		json_add_number(scores, class_names[c], rounded(b->score[c]));
	for (size_t i = 0; i < BOTTLENECK_NMETHODS; i++)
		json_add_number(priors, method_seeds[i].name, rounded(b->prior[i]));
	size_t index[BOTTLENECK_NMETHODS], n = bottleneck_favoured(b, index, BOTTLENECK_NMETHODS);
	for (size_t k = 0; k < n; k++)
		json_append(favoured, cJSON_CreateString(method_seeds[index[k]].name));
	json_add(out, "scores", scores);
	json_add(out, "priors", priors);
	json_add(out, "favoured", favoured);
	return out;
}
