/* prompt.c (kg-propose): the sections of what every LLM expert of an expansion is told, each
 * from the run's files as they are: the goal, device, source, space, symptoms, regions, metrics,
 * history, method catalog and ReGraph. experts.c fits them to the prompt budget and asks. */
#include "common.h"

#include <errno.h>
#include <math.h>
#include <string.h>

#include "bottleneck.h"
#include "fileio.h"
#include "hot_lines.h"
#include "jsonl.h"
#include "log.h"
#include "methods.h"
#include "prompt.h"
#include "run.h"

/* The prompt's regions section stays a few lines: the heaviest regions, each with at most
 * so many ranges of kernel lines (region_detail, in the tool loop, gives the rest). */
#define PROMPT_REGIONS 5
#define PROMPT_LINE_RANGES 8

char *experts_catalog_path(const struct experts *ex, const struct run_info *run)
{
	return ex->catalog ? xstrdup(ex->catalog) : run_outdir_path(run->run.dir, OUTDIR_METHODS);
}

char *experts_regraph_path(const struct experts *ex, const struct run_info *run)
{
	return ex->regraph ? xstrdup(ex->regraph) : run_outdir_path(run->run.dir, OUTDIR_REGRAPH);
}

static void add_number(struct strbuf *sb, const char *label, const cJSON *obj, const char *key, const char *unit)
{
	double v = json_number(obj, key, NAN);
	if (!isnan(v))
		strbuf_addf(sb, "- %s: %.6g%s\n", label, v, unit);
}

static void device_section(struct strbuf *sb, const struct run_info *run, const struct node_info *node)
{
	const cJSON *device = cJSON_GetObjectItemCaseSensitive(run->run.baseline, "device");
	strbuf_addstr(sb, "\n## Device\n");
	if (cJSON_IsObject(device)) {
		const cJSON *item;
		cJSON_ArrayForEach(item, device) {
			char *text = cJSON_IsString(item) ? xstrdup(item->valuestring) : json_text(item);
			strbuf_addf(sb, "- %s: %s\n", item->string, text);
			free(text);
		}
	} else {
		const char *name = json_string(node->bench, "device");
		strbuf_addf(sb, "- name: %s\n", name ? name : "unknown (no measurement of this node yet)");
	}
	const char *arch = json_string(node->build, "arch");
	if (arch)
		strbuf_addf(sb, "- architecture compiled for: %s\n", arch);
}

static void space_section(struct strbuf *sb, const struct t1_spec *spec, const cJSON *config)
{
	strbuf_addstr(sb, "\n## Tuning space\nEach parameter reaches the kernel as a macro, -DNAME=VALUE.\n");
	for (size_t k = 0; k < spec->nparams; k++) {
		const struct t1_param *p = &spec->params[k];
		char *current = json_text(cJSON_GetObjectItemCaseSensitive(config, p->name));
		strbuf_addf(sb, "- %s: one of [", p->name);
		for (size_t v = 0; v < p->nvalues; v++)
			strbuf_addf(sb, "%s%s", v ? ", " : "", p->values_json[v]);
		strbuf_addf(sb, "]; now %s\n", current);
		free(current);
	}
	if (spec->nconditions) {
		strbuf_addstr(sb, "Every configuration must satisfy (Python expressions):\n");
		for (size_t c = 0; c < spec->nconditions; c++)
			strbuf_addf(sb, "- %s\n", pyexpr_source(spec->conditions[c].expr));
	}
	const cJSON *kernel = cJSON_GetObjectItemCaseSensitive(spec->json, "KernelSpecification");
	const cJSON *problem = cJSON_GetObjectItemCaseSensitive(kernel, "ProblemSize");
	if (problem) {
		char *text = json_text(problem);
		strbuf_addf(sb, "Problem size: %s\n", text);
		free(text);
	}
	char *now = json_text(config);
	strbuf_addf(sb, "Current configuration: %s\n", now);
	free(now);
}

/* The bottleneck model's verdict (lib/bottleneck.h) in two lines: the class, what decided it,
 * and the methods it favours; from the PTX figures alone when the variant has no usable
 * hardware metrics, which the line says. */
static void bottleneck_lines(struct strbuf *sb, const struct node_info *node)
{
	struct bottleneck_metrics m;
	struct bottleneck b;
	struct strbuf why;
	strbuf_init(&why);
	char *name = run_variant_path(NULL, node->state, VARIANT_METRICS);
	int have = node->metrics ? bottleneck_metrics_read(node->metrics, name, &m, &why) : 0;
	if (have < 0)
		log_warn("%s: the bottleneck is judged without it", why.buf);
	strbuf_release(&why);
	free(name);
	bottleneck_classify(have > 0 ? &m : NULL, node->build, &b);
	if (b.from == BS_NOTHING)
		return;
	const char *from = b.from == BS_METRICS ? "from hardware metrics" : "guessed from the PTX alone, without hardware metrics";
	if (b.kind == BC_UNCLASSIFIED) {
		strbuf_addf(sb, "- bottleneck (%s): none stands out\n", from);
		return;
	}
	strbuf_addf(sb, "- bottleneck (%s): %s, confidence %.2f: %s\n", from, bottleneck_class_name(b.kind), b.confidence,
		    b.evidence[b.kind]);
	size_t index[3], n = bottleneck_favoured(&b, index, ARRAY_SIZE(index));
	strbuf_addstr(sb, "- methods this bottleneck favours:");
	for (size_t k = 0; k < n; k++)
		strbuf_addf(sb, "%s %s (prior %.2f)", k ? "," : "", method_seeds[index[k]].name, b.prior[index[k]]);
	strbuf_addch(sb, '\n');
}

/* What the compiler and the timer say about this variant, with the symptoms they suggest. */
static void symptoms_section(struct strbuf *sb, const struct node_info *node)
{
	const cJSON *build = node->build, *bench = node->bench;
	strbuf_addstr(sb, "\n## This variant: measurements and symptoms\n");
	if (!build && !bench) {
		strbuf_addstr(sb, "- nothing measured yet\n");
		return;
	}
	add_number(sb, "median time", bench, "median_ms", " ms");
	add_number(sb, "baseline time", bench, "baseline_ms", " ms");
	add_number(sb, "speedup over the baseline", bench, "speedup", "x");
	add_number(sb, "achieved bandwidth", bench, "gbps", " GB/s");
	add_number(sb, "fraction of measured peak bandwidth (roofline)", bench, "pct_peak_bw", " %");
	add_number(sb, "achieved compute", bench, "tflops", " TFLOP/s");
	add_number(sb, "registers per thread", build, "registers", "");
	add_number(sb, "static shared memory per block", build, "smem_bytes", " bytes");
	add_number(sb, "spilled bytes", build, "spill_bytes", "");
	add_number(sb, "local-memory stack", build, "stack_bytes", " bytes");
	const cJSON *grid = cJSON_GetObjectItemCaseSensitive(build, "grid"), *block = cJSON_GetObjectItemCaseSensitive(build, "block");
	if (grid && block) {
		char *g = json_text(grid), *b = json_text(block);
		strbuf_addf(sb, "- launch: grid %s, block %s\n", g, b);
		free(g);
		free(b);
	}
	const cJSON *profile = cJSON_GetObjectItemCaseSensitive(build, "ptx_profile");
	if (cJSON_IsObject(profile)) {
		char *text = json_text(profile);
		strbuf_addf(sb, "- PTX instruction profile (static counts): %s\n", text);
		free(text);
	}
	if (json_number(build, "spill_bytes", 0) > 0)
		strbuf_addstr(sb, "- symptom: registers spill to local memory\n");
	if (json_number(build, "registers", 0) > 128)
		strbuf_addstr(sb, "- symptom: high register pressure limits occupancy\n");
	double bw = json_number(bench, "pct_peak_bw", NAN);
	if (bw >= 70)
		strbuf_addstr(sb, "- symptom: memory-bound near the bandwidth roof; only less traffic helps\n");
	else if (bw < 30 && isnan(json_number(bench, "tflops", NAN)))
		strbuf_addstr(sb, "- symptom: far from the bandwidth roof: latency-bound or poorly coalesced\n");
	/* A loop body of a few dozen FMAs is a dot product worth moving to tensor cores; a few are
	 * an elementwise kernel's arithmetic. */
	if (json_number(profile, "mma", 0) + json_number(profile, "wgmma", 0) == 0 && json_number(profile, "fma", 0) >= 32)
		strbuf_addstr(sb, "- symptom: the math runs on FMA units, not tensor cores\n");
	bottleneck_lines(sb, node);
}

/* A region's kernel.cu lines, "59, 105-106, 123", at most max ranges (then "..."). */
static void region_lines(struct strbuf *sb, const cJSON *region, int max)
{
	const cJSON *range;
	int k = 0;
	cJSON_ArrayForEach(range, cJSON_GetObjectItemCaseSensitive(region, "lines")) {
		if (k++ == max) {
			strbuf_addstr(sb, ", ...");
			break;
		}
		double a = cJSON_GetNumberValue(cJSON_GetArrayItem(range, 0));
		double b = cJSON_GetNumberValue(cJSON_GetArrayItem(range, 1));
		strbuf_addf(sb, "%s%g", k > 1 ? ", " : "", a);
		if (b != a)
			strbuf_addf(sb, "-%g", b);
	}
	if (!k)
		strbuf_addstr(sb, "none");
}

/* What the prompt ranks regions by, only to choose which to show: the bytes and FLOPs of one
 * thread (a warp's tensor FLOPs over 32), times 16 per loop level around it, since a loop
 * body's static counts stand for many executions. */
static double region_weight(const cJSON *r)
{
	static const char *const work[] = {"global_load_bytes", "global_store_bytes", "shared_load_bytes",
					   "shared_store_bytes", "cp_async_bytes", "bulk_copy_bytes", "flops"};
	double w = json_number(r, "tensor_flops", 0) / 32;
	for (size_t k = 0; k < ARRAY_SIZE(work); k++)
		w += json_number(r, work[k], 0);
	return w * pow(16, json_number(r, "loop_depth", 0));
}

/* The heaviest regions of the variant's regions.json, in program order, with their kernel.cu
 * lines and work; nothing when kg-build kept no graph (a replayed build). */
static void regions_section(struct strbuf *sb, const struct run_info *run, const struct node_info *node)
{
	static const struct {
		const char *key, *label;
	} counts[] = {
		{"global_load_bytes", "global loads %g B"}, {"global_store_bytes", "global stores %g B"},
		{"shared_load_bytes", "shared loads %g B"}, {"shared_store_bytes", "shared stores %g B"},
		{"cp_async", "cp.async %g"}, {"cp_async_bytes", "(%g B)"}, {"bulk_copies", "bulk copies %g"},
		{"bulk_copy_bytes", "(%g B)"}, {"flops", "FLOPs %g"}, {"tensor_flops", "tensor FLOPs %g (warp)"},
		{"barriers", "barriers %g"}, {"async_waits", "async waits %g"}, {"fences", "fences %g"},
		{"predicated_branches", "predicated branches %g"},
	};
	cJSON *graph = node_variant_json(run, node, VARIANT_REGIONS);
	const cJSON *regions = cJSON_GetObjectItemCaseSensitive(graph, "regions"), *r;
	int n = cJSON_GetArraySize(regions);
	if (n == 0) {
		cJSON_Delete(graph);
		return;
	}
	const cJSON *summary = cJSON_GetObjectItemCaseSensitive(node->build, "regions");
	strbuf_addstr(sb, "\n## Regions of the PTX (regions.json: static counts per thread, a loop body counted once)\n");
	if (summary)
		strbuf_addf(sb, "Regions %g, stages %g, loops %g, barriers %g, async waits %g. ",
			    json_number(summary, "regions", NAN), json_number(summary, "stages", NAN),
			    json_number(summary, "loops", NAN), json_number(summary, "barriers", NAN),
			    json_number(summary, "async_waits", NAN));
	/* The PROMPT_REGIONS heaviest, marked, then listed in program order. */
	char *shown = xcalloc((size_t)n, 1);
	for (int k = 0; k < PROMPT_REGIONS && k < n; k++) {
		int best = -1;
		for (int i = 0; i < n; i++) {
			double w = region_weight(cJSON_GetArrayItem(regions, i));
			if (!shown[i] && w > 0 && (best < 0 || w > region_weight(cJSON_GetArrayItem(regions, best))))
				best = i;
		}
		if (best >= 0)
			shown[best] = 1;
	}
	strbuf_addstr(sb, "The heaviest (bytes and FLOPs, weighted by loop depth), in program order:\n");
	int i = 0;
	cJSON_ArrayForEach(r, regions) {
		if (!shown[i++])
			continue;
		strbuf_addf(sb, "- region %g (stage %g, loop depth %g; kernel.cu lines ", json_number(r, "id", NAN),
			    json_number(r, "stage", NAN), json_number(r, "loop_depth", NAN));
		region_lines(sb, r, PROMPT_LINE_RANGES);
		strbuf_addstr(sb, "):");
		int any = 0;
		for (size_t c = 0; c < ARRAY_SIZE(counts); c++) {
			double v = json_number(r, counts[c].key, 0);
			if (v > 0) {
				/* "(N B)" follows its count */
				strbuf_addstr(sb, counts[c].label[0] == '(' || !any++ ? " " : ", ");
				strbuf_addf(sb, counts[c].label, v);
			}
		}
		const char *end = json_string(r, "end");
		strbuf_addf(sb, "; ends at %s\n", end ? end : "?");
	}
	free(shown);
	cJSON_Delete(graph);
}

/* The hardware metrics of the variant (kg-bench --metrics: metrics.json) as they are: a value
 * the file does not hold is named unavailable, never estimated; nothing without the file. */
/* The 3 kernel.cu lines with the most PC samples (kg-bench --metrics: lines.json), each with
 * its share of the samples and its most frequent stall reason; nothing without the file. */
static void hot_lines(struct strbuf *sb, const struct run_info *run, const struct node_info *node)
{
	cJSON *doc = node_variant_json(run, node, VARIANT_LINES);
	const char *status = json_string(doc, "status");
	if (doc && status && strcmp(status, "ok") == 0) {
		cJSON *summary = hot_lines_summary(doc);
		const cJSON *h;
		int k = 0;
		cJSON_ArrayForEach(h, cJSON_GetObjectItemCaseSensitive(summary, "hottest")) {
			const char *stall = json_string(h, "stall");
			strbuf_addf(sb, "%sline %g %.3g %%%s%s%s", k++ ? ", " : "- hottest kernel.cu lines (share of PC samples, top stall): ",
				    json_number(h, "line", 0), json_number(h, "share_pct", 0), stall ? " (" : "", stall ? stall : "",
				    stall ? ")" : "");
		}
		if (k)
			strbuf_addch(sb, '\n');
		cJSON_Delete(summary);
	}
	cJSON_Delete(doc);
}

static void metrics_section(struct strbuf *sb, const struct run_info *run, const struct node_info *node)
{
	static const struct {
		const char *key, *label, *unit;
	} known[] = {
		{"sm_throughput_pct", "SM throughput", " % of peak"},
		{"dram_throughput_pct", "DRAM throughput", " % of peak"},
		{"memory_throughput_pct", "memory throughput", " % of peak"},
		{"achieved_occupancy_pct", "achieved occupancy", " %"},
		{"theoretical_occupancy_pct", "theoretical occupancy", " %"},
		{"occupancy_limiter", "occupancy limited by", ""},
		{"l1_hit_rate_pct", "L1 hit rate", " %"},
		{"l2_hit_rate_pct", "L2 hit rate", " %"},
		{"shared_bank_conflicts", "shared-memory bank conflicts", ""},
		{"shared_wavefronts", "shared-memory wavefronts", ""},
		{"tensor_pipe_pct", "tensor pipe utilization", " %"},
		{"fma_pipe_pct", "FMA pipe utilization", " %"},
		{"sfu_pipe_pct", "SFU pipe utilization", " %"},
		{"global_atomics", "global atomics", ""},
		{"instructions_issued", "instructions issued", ""},
		{"ipc", "instructions per cycle (per SM)", ""},
	};
	const cJSON *doc = node->metrics;
	if (!doc)
		return;
	const char *status = json_string(doc, "status"), *source = json_string(doc, "source");
	strbuf_addf(sb, "\n## Hardware metrics of this variant (%s)\n", source ? source : "kg-bench --metrics");
	if (!status || strcmp(status, "ok") != 0) {
		const char *why = json_string(doc, "why");
		strbuf_addf(sb, "- not collected: %.300s\n", why ? why : "no reason given");
		return;
	}
	/* Members of objects only: a malformed file's arrays have no names to show. */
	const cJSON *values = json_object_member(doc, "values"), *v;
	cJSON_ArrayForEach(v, values) {
		if (strcmp(v->string, "stalls") == 0)
			continue;
		const char *label = v->string, *unit = "";
		for (size_t k = 0; k < ARRAY_SIZE(known); k++)
			if (strcmp(v->string, known[k].key) == 0) {
				label = known[k].label;
				unit = known[k].unit;
			}
		if (cJSON_IsNumber(v))
			strbuf_addf(sb, "- %s: %.4g%s\n", label, v->valuedouble, unit);
		else if (cJSON_IsString(v))
			strbuf_addf(sb, "- %s: %.80s\n", label, v->valuestring);
	}
	/* The stall reasons, largest first, at most 5. */
	const cJSON *stalls = json_object_member(values, "stalls");
	int nstalls = cJSON_GetArraySize(stalls);
	char *taken = xcalloc((size_t)nstalls + 1, 1);
	int listed = 0;
	for (int k = 0; k < 5 && k < nstalls; k++) {
		int best = -1;
		for (int i = 0; i < nstalls; i++) {
			const cJSON *s = cJSON_GetArrayItem(stalls, i);
			if (!taken[i] && cJSON_IsNumber(s) &&
			    (best < 0 || s->valuedouble > cJSON_GetArrayItem(stalls, best)->valuedouble))
				best = i;
		}
		if (best < 0)
			break;
		taken[best] = 1;
		const cJSON *s = cJSON_GetArrayItem(stalls, best);
		strbuf_addf(sb, "%s%s %.3g %%", listed++ ? ", " : "- warp stall reasons (share of stalls): ", s->string,
			    s->valuedouble);
	}
	if (listed)
		strbuf_addch(sb, '\n');
	free(taken);
	hot_lines(sb, run, node);
	const cJSON *unavailable = json_object_member(doc, "unavailable");
	int k = 0;
	cJSON_ArrayForEach(v, unavailable)
		strbuf_addf(sb, "%s%s", k++ ? ", " : "- unavailable (not measured; do not assume): ", v->string);
	if (k)
		strbuf_addch(sb, '\n');
}

/* The best so far and the recent attempts, newest last, with their errors. */
static void history_section(struct strbuf *sb, const struct run_info *run, int recent)
{
	strbuf_addstr(sb, "\n## History of this search\n");
	if (run->best) {
		char *config = json_text(cJSON_GetObjectItemCaseSensitive(run->best, "config"));
		char *methods = json_text(cJSON_GetObjectItemCaseSensitive(run->best, "methods"));
		strbuf_addf(sb, "Best so far: %.4g ms, %.3gx the baseline, configuration %s, methods %s\n",
			    json_number(run->best, "median_ms", NAN), json_number(run->best, "speedup", NAN), config, methods);
		free(config);
		free(methods);
	}
	int n = cJSON_GetArraySize(run->events), shown = 0;
	for (int i = n > recent ? n - recent : 0; i < n; i++) {
		const cJSON *e = cJSON_GetArrayItem(run->events, i);
		const cJSON *candidate = cJSON_GetObjectItemCaseSensitive(e, "candidate");
		const cJSON *build = cJSON_GetObjectItemCaseSensitive(e, "build"), *bench = cJSON_GetObjectItemCaseSensitive(e, "bench");
		if (!candidate || !build)
			continue;
		const char *bs = json_string(build, "status"), *ms = json_string(bench, "status");
		const char *status = bs && strcmp(bs, "ok") != 0 ? bs : ms ? ms : "built";
		const char *method = json_string(candidate, "method"), *detail = json_string(candidate, "detail");
		if (!shown++)
			strbuf_addstr(sb, "Recent attempts, newest last:\n");
		strbuf_addf(sb, "- [%s] %s", status, method ? method : "?");
		if (detail)
			strbuf_addf(sb, ": %.160s", detail);
		double speedup = json_number(bench, "speedup", NAN);
		if (strcmp(status, "ok") == 0 && !isnan(speedup))
			strbuf_addf(sb, "; speedup %.3gx", speedup);
		const char *error = json_string(strcmp(status, bs ? bs : "") == 0 ? build : bench, "error");
		if (error)
			strbuf_addf(sb, "; error: %.300s", error);
		strbuf_addch(sb, '\n');
	}
	if (!run->best && !shown)
		strbuf_addstr(sb, "- nothing tried yet beyond the baseline\n");
}

/* The methods applied on the path and the method catalog. */
static void catalog_section(struct strbuf *sb, const struct experts *ex, struct run_info *run,
			    const struct node_info *node)
{
	if (cJSON_GetArraySize(node->methods) > 0) {
		char *applied = json_text(node->methods);
		strbuf_addf(sb, "\n## Methods applied from the baseline to this variant\n%s\n", applied);
		free(applied);
	}
	char *path = experts_catalog_path(ex, run);
	cJSON *catalog = methods_load(path);
	free(path);
	const cJSON *m;
	strbuf_addstr(sb, "\n## Method catalog (prefer these names for \"method\")\n");
	cJSON_ArrayForEach(m, cJSON_GetObjectItemCaseSensitive(catalog, "methods")) {
		const char *d = json_string(m, "description");
		strbuf_addf(sb, "- %s%s%s\n", json_string(m, "name"), d ? ": " : "", d ? d : "");
	}
	cJSON_Delete(catalog);
}

/* The ReGraph: what followed the last method in earlier searches. */
static void regraph_section(struct strbuf *sb, const struct experts *ex, struct run_info *run,
			    const struct node_info *node)
{
	const char *from = node->last_method && *node->last_method ? node->last_method : "init";
	char *path = experts_regraph_path(ex, run);
	struct regraph_transition *next;
	size_t n = context_regraph_next(run, path, from, ex->allowed ? (size_t)ex->allowed_top : 5, &next);
	free(path);
	if (n > 0)
		strbuf_addf(sb, "\n## What worked next after \"%s\" in earlier searches (ReGraph)\n", from);
	for (size_t i = 0; i < n; i++)
		strbuf_addf(sb, "- %s: probability %.3g, success rate %.3g, %g transitions, mean reward %.3g\n", next[i].to,
			    next[i].probability, next[i].success, next[i].count, next[i].mean_reward);
	if (ex->allowed && n > 0) {
		strbuf_addstr(sb, "Choose each candidate's \"method\" among these; others are dropped (--regraph-filter).\n");
	}
	free(next);
}
void prompt_sections(const struct experts *ex, struct run_info *run, const struct node_info *node,
		     char *part[SEC_COUNT])
{
	struct strbuf sb[SEC_COUNT];
	for (int k = 0; k < SEC_COUNT; k++)
		strbuf_init(&sb[k]);
	strbuf_addf(&sb[SEC_GOAL], "## Goal\nPropose up to %d distinct candidate changes that make the CUDA kernel `%s` "
				   "below faster on the device below, each a different idea.\n",
		    ex->candidates, run->run.spec->kernel_name);
	device_section(&sb[SEC_DEVICE], run, node);
	strbuf_addf(&sb[SEC_SOURCE], "\n## Kernel source (kernel.cu)\n```cuda\n%s%s```\n", node->source,
		    node->source[0] && node->source[strlen(node->source) - 1] == '\n' ? "" : "\n");
	space_section(&sb[SEC_SPACE], run->run.spec, node->config);
	symptoms_section(&sb[SEC_SYMPTOMS], node);
	regions_section(&sb[SEC_REGIONS], run, node);
	metrics_section(&sb[SEC_METRICS], run, node);
	history_section(&sb[SEC_HISTORY], run, ex->recent);
	catalog_section(&sb[SEC_CATALOG], ex, run, node);
	regraph_section(&sb[SEC_REGRAPH], ex, run, node);
	for (int k = 0; k < SEC_COUNT; k++)
		part[k] = strbuf_detach(&sb[k]);
}
