/* experts.c (kg-propose): asks LLM experts for candidate changes: builds the prompt from the
 * run's files, asks every persona at once, extracts and checks the answers, corrects once. */
#include "common.h"

#include <errno.h>
#include <libgen.h>
#include <math.h>
#include <string.h>

#include "bottleneck.h"
#include "experts.h"
#include "fileio.h"
#include "fnv1a.h"
#include "functions.h"
#include "hot_lines.h"
#include "jsonl.h"
#include "log.h"
#include "methods.h"
#include "run.h"

static const struct {
	const char *name, *text;
} builtin_personas[] = {
	{"throughput", "You are the throughput expert. Raise arithmetic intensity and hide latency: bigger tiles "
		       "and more work per thread, deeper software pipelines (more stages, cp.async), wider vector "
		       "loads, tensor cores where the math allows. Accept more registers and shared memory as long "
		       "as occupancy stays adequate and nothing spills."},
	{"memory", "You are the memory expert. Lower register and shared-memory pressure to raise occupancy and "
		   "remove spills: smaller tiles, fewer stages, fewer live values, reused buffers. Make global "
		   "accesses coalesced and aligned, cut redundant traffic, and use the caches well; for a "
		   "memory-bound kernel, move bytes at the speed of the memory system."},
	{"robustness", "You are the robustness expert. Prefer safe, proven choices that keep results correct on "
		       "every input size: tensor-core-friendly shapes (multiples of 16), aligned vector widths, "
		       "moderate tiles and stages, configurations that compile without spills, correct tails. "
		       "Take small steps from what already measured well."},
};

/* The prompt's regions section stays a few lines: the heaviest regions, each with at most
 * so many ranges of kernel lines (region_detail, in the tool loop, gives the rest). */
#define PROMPT_REGIONS 5
#define PROMPT_LINE_RANGES 8

static const char system_prompt[] =
	"You are an expert CUDA performance engineer. You propose concrete changes that make one CUDA kernel "
	"faster on one GPU while its results stay correct. Every proposal is compiled with NVRTC, run, checked "
	"against a reference on fresh random inputs and timed with CUDA events; a change that does not compile, "
	"or changes the results, is wasted. Reason from the measurements and symptoms you are given. Answer "
	"with one JSON object and nothing else.";

/* ---------------------------------------------------------------- personas */

int persona_add(struct experts *ex, const char *name_or_file)
{
	struct persona p = {0};
	for (size_t i = 0; i < ARRAY_SIZE(builtin_personas); i++)
		if (strcmp(name_or_file, builtin_personas[i].name) == 0)
			p = (struct persona){xstrdup(builtin_personas[i].name), xstrdup(builtin_personas[i].text)};
	if (!p.name) {
		size_t len;
		char *text = file_read_all(name_or_file, &len);
		if (!text) {
			if (errno == ENOENT && !strchr(name_or_file, '/') && !strchr(name_or_file, '.'))
				return log_error("--persona: '%s' is neither a built-in persona (throughput, memory, "
						 "robustness) nor a prompt file", name_or_file);
			return log_error("--persona: cannot read the prompt file '%s':", name_or_file);
		}
		char *copy = xstrdup(name_or_file), *base = basename(copy), *dot = strrchr(base, '.');
		if (dot && dot != base)
			*dot = '\0';
		p = (struct persona){xstrdup(base), text};
		free(copy);
	}
	ex->personas = xreallocarray(ex->personas, ex->npersonas + 1, sizeof(*ex->personas));
	ex->personas[ex->npersonas++] = p;
	return 0;
}

void experts_release(struct experts *ex)
{
	for (size_t i = 0; i < ex->npersonas; i++) {
		free(ex->personas[i].name);
		free(ex->personas[i].text);
	}
	free(ex->personas);
}

/* ---------------------------------------------------------------- the prompt */

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

/* The sections of what every expert of an expansion is told (the persona and the answer's
 * form follow), in prompt order; drop is the order in which --max-prompt-tokens leaves them
 * out (the least needed first), 0 for those always kept: what the kernel is, its source and
 * its tuning space. */
enum section {
	SEC_GOAL, SEC_DEVICE, SEC_SOURCE, SEC_SPACE, SEC_SYMPTOMS, SEC_REGIONS, SEC_METRICS, SEC_HISTORY,
	SEC_CATALOG, SEC_REGRAPH, SEC_COUNT
};
static const struct {
	const char *name;
	int drop;
} section_info[SEC_COUNT] = {
	[SEC_GOAL] = {"goal", 0}, [SEC_DEVICE] = {"device", 6}, [SEC_SOURCE] = {"kernel source", 0},
	[SEC_SPACE] = {"tuning space", 0}, [SEC_SYMPTOMS] = {"symptoms", 7}, [SEC_REGIONS] = {"regions", 1},
	[SEC_METRICS] = {"hardware metrics", 4}, [SEC_HISTORY] = {"history", 3}, [SEC_CATALOG] = {"method catalog", 2},
	[SEC_REGRAPH] = {"ReGraph", 5},
};

static void prompt_sections(const struct experts *ex, struct run_info *run, const struct node_info *node,
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

/* The bytes a token takes, where the server does not count them: 4 (English text and code,
 * for the usual tokenizers), until a server that refused a prompt said how many tokens it was. */
static double bytes_per_token = 4;

/* The prompt's size in tokens: the server's count (llm_count_tokens) while it gives one, else
 * an estimate at bytes_per_token. *exact says which. */
static long prompt_tokens(const struct llm_settings *s, const char *text, int *exact)
{
	if (!*text)
		return 0;
	long n = *exact ? llm_count_tokens(s, text) : -1;
	if (n >= 0)
		return n;
	*exact = 0; /* once the server has not counted, it is not asked again */
	return (long)ceil((double)strlen(text) / bytes_per_token);
}

/* The context every expert is told: the sections, left out by their drop order until the
 * prompt (fixed: the tokens of what surrounds them) fits budget tokens (0: no limit), each
 * left-out section logged. Returns NULL with why set when the sections always kept do not
 * fit. */
static char *fit_context(const struct llm_settings *s, char *part[SEC_COUNT], long budget, long fixed, int exact,
			 const char *where, struct strbuf *why)
{
	long tokens[SEC_COUNT], total = fixed;
	int keep[SEC_COUNT];
	for (int k = 0; k < SEC_COUNT; k++) {
		keep[k] = 1;
		tokens[k] = budget > 0 ? prompt_tokens(s, part[k], &exact) : 0;
		total += tokens[k];
	}
	if (budget > 0 && total > budget) {
		struct strbuf left;
		strbuf_init(&left);
		long before = total;
		for (int drop = 1; drop < SEC_COUNT && total > budget; drop++)
			for (int k = 0; k < SEC_COUNT; k++)
				if (section_info[k].drop == drop && tokens[k] > 0) {
					keep[k] = 0;
					total -= tokens[k];
					strbuf_addf(&left, "%s%s (%ld)", left.len ? ", " : "", section_info[k].name, tokens[k]);
				}
		char how[64];
		if (exact)
			snprintf(how, sizeof(how), "counted by the server");
		else
			snprintf(how, sizeof(how), "estimated at %.3g bytes a token", bytes_per_token);
		if (total > budget) {
			strbuf_addf(why, "the prompt is %ld tokens (%s) without its sections that may be left out, more than "
					 "the %ld it may have", total, how, budget);
			strbuf_release(&left);
			return NULL;
		}
		log_info("%s: the prompt, %ld tokens (%s), is over %ld: left out %s", where, before, how, budget, left.buf);
		strbuf_release(&left);
	}
	struct strbuf sb;
	strbuf_init(&sb);
	for (int k = 0; k < SEC_COUNT; k++)
		if (keep[k])
			strbuf_addstr(&sb, part[k]);
	return strbuf_detach(&sb);
}

static char *user_prompt(const char *context, const struct persona *persona, int tool_rounds)
{
	struct strbuf sb;
	strbuf_init(&sb);
	strbuf_addf(&sb, "%s\n## Your role: %s\n%s\n", context, persona->name, persona->text);
	if (tool_rounds > 0)
		strbuf_addf(&sb, "\n## Functions\nBefore you answer, you may call functions to look closer at this variant "
				 "(at most %d round%s of calls): metrics(names) for its hardware metrics, region_detail(id) "
				 "for a region above, source_lines(start, end) for kernel.cu lines, ptx_for_lines(start, end) "
				 "for the PTX compiled from kernel.cu lines. Ask only for what your proposal needs.\n",
			    tool_rounds, tool_rounds == 1 ? "" : "s");
	strbuf_addstr(&sb,
		      "\n## Answer\nOne JSON object {\"candidates\": [...]}; each candidate has:\n"
		      "- \"think\": your reasoning, in a few sentences\n"
		      "- \"method\": the optimization method, a short name (a catalog name when one fits)\n"
		      "- \"detail\": what exactly changes\n"
		      "- \"patch\": a unified diff against kernel.cu (--- a/kernel.cu, +++ b/kernel.cu, @@ hunks whose "
		      "context lines match the source exactly), or null\n"
		      "- \"source\": the whole new kernel.cu instead of a patch, or null\n"
		      "- \"config\": the complete configuration to build with (every parameter, values from the lists "
		      "above, the conditions satisfied), or null to keep the current one\n"
		      "- \"launch_update\": null; the launch follows from the configuration (GlobalSize and LocalSize "
		      "of the spec)\n"
		      "Keep the kernel's name, signature and macros; a change may be code, configuration or both.\n");
	return strbuf_detach(&sb);
}

/* The answer's JSON schema; the configuration's values are listed where the list is short,
 * so that a strict endpoint cannot even produce one outside the space. */
static cJSON *answer_schema(const struct t1_spec *spec)
{
	static const char *const types[] = {"integer", "integer", "number", "boolean", "string"};
	cJSON *config = json_object(), *props = json_object(), *required = cJSON_CreateArray();
	json_add_string(config, "type", "object");
	for (size_t k = 0; k < spec->nparams; k++) {
		const struct t1_param *p = &spec->params[k];
		cJSON *prop = json_object();
		if (p->nvalues <= 64) {
			cJSON *values = cJSON_CreateArray();
			for (size_t v = 0; v < p->nvalues; v++)
				json_append(values, cJSON_Parse(p->values_json[v]));
			json_add(prop, "enum", values);
		} else {
			json_add_string(prop, "type", types[p->type]);
		}
		json_add(props, p->name, prop);
		json_append(required, cJSON_CreateString(p->name));
	}
	json_add(config, "properties", props);
	json_add(config, "required", required);
	json_add_bool(config, "additionalProperties", 0);
	char *config_text = json_text(config);
	char *text = xasprintf(
		"{\"type\":\"object\",\"additionalProperties\":false,\"required\":[\"candidates\"],\"properties\":{"
		"\"candidates\":{\"type\":\"array\",\"items\":{\"type\":\"object\",\"additionalProperties\":false,"
		"\"required\":[\"think\",\"method\",\"detail\",\"patch\",\"source\",\"config\",\"launch_update\"],"
		"\"properties\":{\"think\":{\"type\":\"string\"},\"method\":{\"type\":\"string\"},"
		"\"detail\":{\"type\":\"string\"},\"patch\":{\"type\":[\"string\",\"null\"]},"
		"\"source\":{\"type\":[\"string\",\"null\"]},\"config\":{\"anyOf\":[{\"type\":\"null\"},%s]},"
		"\"launch_update\":{\"type\":\"null\"}}}}}}",
		config_text);
	cJSON *schema = cJSON_Parse(text);
	if (!schema)
		xalloc_die();
	free(text);
	free(config_text);
	cJSON_Delete(config);
	return schema;
}

static cJSON *message(const char *role, const char *content)
{
	cJSON *m = json_object();
	json_add_string(m, "role", role);
	json_add_string(m, "content", content);
	return m;
}

/* ---------------------------------------------------------------- answers */

/* The end of the JSON value starting at text[0] ('{' or '['), strings and escapes respected;
 * NULL when it does not close. */
static const char *value_end(const char *text)
{
	int depth = 0, in_string = 0;
	for (const char *p = text; *p; p++) {
		if (in_string) {
			if (*p == '\\' && p[1])
				p++;
			else if (*p == '"')
				in_string = 0;
		} else if (*p == '"') {
			in_string = 1;
		} else if (*p == '{' || *p == '[') {
			depth++;
		} else if ((*p == '}' || *p == ']') && --depth == 0) {
			return p + 1;
		}
	}
	return NULL;
}

static int answer_shaped(const cJSON *v)
{
	return cJSON_IsArray(v) || cJSON_IsArray(cJSON_GetObjectItemCaseSensitive(v, "candidates")) ||
	       json_string(v, "method");
}

static cJSON *parse_span(const char *start, const char *end)
{
	char *copy = xstrndup(start, (size_t)(end - start));
	cJSON *v = cJSON_Parse(copy);
	free(copy);
	if (v && !answer_shaped(v)) {
		cJSON_Delete(v);
		v = NULL;
	}
	return v;
}

/* The first JSON value in text that has the shape of an answer: the whole text, a fenced
 * code block, or a balanced {...} inside prose. Returns it, or NULL with why set. */
static cJSON *answer_extract(const char *text, struct strbuf *why)
{
	cJSON *v = parse_span(text, text + strlen(text));
	if (v)
		return v;
	/* Fenced blocks: ```json ... ``` or ``` ... ``` */
	for (const char *p = strstr(text, "```"); p; p = strstr(p, "```")) {
		const char *body = strchr(p + 3, '\n'), *close = body ? strstr(body, "```") : NULL;
		if (!close)
			break;
		if ((v = parse_span(body + 1, close)))
			return v;
		p = close + 3;
	}
	/* A balanced value inside prose. */
	for (const char *p = text; *p; p++) {
		if (*p != '{' && *p != '[')
			continue;
		const char *end = value_end(p);
		if (end && (v = parse_span(p, end)))
			return v;
	}
	strbuf_addstr(why, "no JSON object with \"candidates\" in the answer");
	return NULL;
}

static char *optional_text(const cJSON *c, const char *key, int *bad)
{
	const cJSON *item = cJSON_GetObjectItemCaseSensitive(c, key);
	if (!item || cJSON_IsNull(item))
		return NULL;
	if (!cJSON_IsString(item)) {
		*bad = 1;
		return NULL;
	}
	return *item->valuestring ? xstrdup(item->valuestring) : NULL;
}

/* Turns an answer into proposals. Returns how many, or -1 with why set when none is usable. */
static int take_candidates(const cJSON *answer, const char *proposer, struct proposal **list, size_t *n,
			   struct strbuf *why)
{
	const cJSON *items = cJSON_IsArray(answer) ? answer : cJSON_GetObjectItemCaseSensitive(answer, "candidates");
	cJSON *single = NULL;
	if (!items) { /* one candidate, unwrapped */
		single = cJSON_CreateArray();
		json_append(single, cJSON_Duplicate(answer, 1));
		items = single;
	}
	int taken = 0, i = -1;
	const cJSON *c;
	cJSON_ArrayForEach(c, items) {
		i++;
		int bad = 0;
		struct proposal p = {.proposer = xstrdup(proposer), .prior = NAN};
		p.method = optional_text(c, "method", &bad);
		p.detail = optional_text(c, "detail", &bad);
		p.think = optional_text(c, "think", &bad);
		p.patch = optional_text(c, "patch", &bad);
		p.source = optional_text(c, "source", &bad);
		const cJSON *config = cJSON_GetObjectItemCaseSensitive(c, "config");
		const cJSON *launch = cJSON_GetObjectItemCaseSensitive(c, "launch_update");
		if (config && !cJSON_IsNull(config))
			p.config = cJSON_Duplicate(config, 1);
		if (launch && !cJSON_IsNull(launch))
			p.launch_update = cJSON_Duplicate(launch, 1);
		const char *problem = !cJSON_IsObject(c) ? "is not an object"
				      : bad ? "think, method, detail, patch and source must be strings or null"
				      : !p.method ? "method: missing"
				      : p.config && !cJSON_IsObject(p.config) ? "config: must be an object or null"
				      : !p.patch && !p.source && !p.config ? "changes nothing: no patch, source or config"
				      : p.patch && strlen(p.patch) > KG_CANDIDATE_MAX_BYTES ? "patch: larger than 1 MiB, the most a patch may have"
				      : p.source && strlen(p.source) > KG_CANDIDATE_MAX_BYTES ? "source: larger than 1 MiB, the most a source may have"
									    : NULL;
		if (problem) {
			if (!why->len)
				strbuf_addf(why, "candidates[%d]: %s", i, problem);
			proposal_release(&p);
			continue;
		}
		*list = xreallocarray(*list, *n + 1, sizeof(**list));
		(*list)[(*n)++] = p;
		taken++;
	}
	cJSON_Delete(single);
	if (!taken && !why->len)
		strbuf_addstr(why, "the answer has no candidates");
	return taken ? taken : -1;
}

/* ---------------------------------------------------------------- asking */

struct expert_call {
	const struct persona *persona;
	cJSON *messages;
	struct llm_request req;
	char *proposer;
	int done;
	int shortened; /* asked again with a shorter prompt, which takes the place of the correction */
};

static void add_error(cJSON *errors, const char *persona, const char *error)
{
	cJSON *e = json_object();
	json_add_string(e, "persona", persona);
	json_add_string(e, "error", error);
	json_append(errors, e);
}

/* The context the endpoint said its prompts may fill, in tokens, once a request of this
 * process was refused as longer (llm_request's context_tokens); 0 until then. A process
 * talks to one endpoint, so the later expansions fit their prompts to it from the start. */
static long server_context;

/* The tokens a prompt may have: --max-prompt-tokens, and at most the server's context less
 * room for the answer (--max-output-tokens, else a quarter of it) and for the tool loop's
 * results; 0: no limit known. */
static long prompt_budget(const struct experts *ex, const struct llm_settings *s, long context)
{
	long budget = ex->max_prompt_tokens;
	if (context > 0) {
		long room = s->max_output_tokens > 0 ? s->max_output_tokens : context / 4;
		if (ex->tool_rounds > 0)
			room += ex->tool_total_bytes / 4;
		long fit = context - room > 1 ? context - room : 1;
		budget = budget > 0 && budget < fit ? budget : fit;
	}
	return budget;
}

static cJSON *expert_messages(const char *context, const struct persona *persona, int tool_rounds)
{
	cJSON *messages = cJSON_CreateArray();
	char *prompt = user_prompt(context, persona, tool_rounds);
	json_append(messages, message("system", system_prompt));
	json_append(messages, message("user", prompt));
	free(prompt);
	return messages;
}

/* The tokens of a prompt beyond its sections: the system prompt, the longest persona with
 * the answer's form, and a few for each message's framing (the chat template). */
static long fixed_tokens(const struct experts *ex, const struct llm_settings *s, int *exact)
{
	long most = 0;
	for (size_t i = 0; i < ex->npersonas; i++) {
		char *rest = user_prompt("", &ex->personas[i], ex->tool_rounds);
		long n = prompt_tokens(s, rest, exact);
		free(rest);
		most = n > most ? n : most;
	}
	return prompt_tokens(s, system_prompt, exact) + most + 16;
}

void experts_propose(const struct experts *ex, struct run_info *run, const struct node_info *node,
		     struct proposal **list, size_t *n, cJSON *errors)
{
	struct llm_settings s = ex->llm;
	char *log_dir = run_path(run->run.dir, RUN_LLM), *cache_dir = run_path(run->run.dir, RUN_LLM_CACHE);
	s.log_dir = log_dir;
	s.cache_dir = cache_dir;
	s.jitter_seed ^= fnv1a64(node->state, strlen(node->state));
	cJSON *schema = answer_schema(run->run.spec);
	struct variant_view view = {run, node};
	struct llm_tools tools = {.max_rounds = ex->tool_rounds, .max_result_bytes = (size_t)ex->tool_result_bytes,
				  .max_total_bytes = (size_t)ex->tool_total_bytes};
	functions_init(&tools, &view);
	struct expert_call *calls = xcalloc(ex->npersonas + 1, sizeof(*calls));
	struct llm_request *reqs = xcalloc(ex->npersonas + 1, sizeof(*reqs));
	char *part[SEC_COUNT], *where = xasprintf("%s: node %s", run->run.dir, node->state);
	prompt_sections(ex, run, node, part);
	struct strbuf why_not;
	strbuf_init(&why_not);
	long budget = prompt_budget(ex, &s, server_context);
	int exact = 1;
	long fixed = budget > 0 ? fixed_tokens(ex, &s, &exact) : 0;
	char *context = fit_context(&s, part, budget, fixed, exact, where, &why_not);
	for (size_t i = 0; i < ex->npersonas; i++) {
		struct expert_call *c = &calls[i];
		c->persona = &ex->personas[i];
		c->proposer = xasprintf("llm:%s/%s", s.model, c->persona->name);
		if (context) {
			c->messages = expert_messages(context, c->persona, ex->tool_rounds);
		} else {
			add_error(errors, c->persona->name, why_not.buf);
			c->done = 1;
		}
	}
	free(context);
	char *shorter = NULL; /* the context fitted to what the server said, for shorter_fit tokens */
	long shorter_fit = 0;
	/* Round 1 asks everyone; round 2 corrects, once, those whose answer was unusable, and asks
	 * again with a shorter prompt those whose prompt the server found longer than its context. */
	for (int round = 1; round <= 2; round++) {
		size_t k = 0, *index = xcalloc(ex->npersonas + 1, sizeof(*index));
		for (size_t i = 0; i < ex->npersonas; i++) {
			if (calls[i].done)
				continue;
			reqs[k] = (struct llm_request){.label = calls[i].persona->name, .messages = calls[i].messages,
						       .schema = schema, .schema_name = "candidates",
						       .tools = ex->tool_rounds > 0 ? &tools : NULL};
			index[k++] = i;
		}
		if (k)
			llm_run(&s, reqs, k);
		for (size_t j = 0; j < k; j++) {
			struct expert_call *c = &calls[index[j]];
			struct llm_request *r = &reqs[j];
			c->done = 1;
			if (!r->ok && r->context_tokens > 0 && round == 1) {
				/* The server said how long a prompt may be: shorten it to fit, once. */
				server_context = r->context_tokens;
				if (r->refused_tokens > 0) { /* and how long this one was: the estimate's measure */
					size_t bytes = 0;
					const cJSON *m;
					cJSON_ArrayForEach(m, c->messages)
						bytes += strlen(json_string(m, "content") ? json_string(m, "content") : "");
					bytes_per_token = (double)bytes / (double)r->refused_tokens;
				}
				long fit = prompt_budget(ex, &s, server_context);
				if (fit != shorter_fit) { /* measured once for every expert refused alike */
					free(shorter);
					strbuf_reset(&why_not);
					exact = 1;
					fixed = fixed_tokens(ex, &s, &exact);
					shorter = fit_context(&s, part, fit, fixed, exact, where, &why_not);
					shorter_fit = fit;
				}
				if (shorter) {
					log_warn("%s: %s: %s; asking again with the prompt shortened to %ld tokens", where,
						 c->persona->name, r->error, fit);
					cJSON_Delete(c->messages);
					c->messages = expert_messages(shorter, c->persona, ex->tool_rounds);
					c->done = 0;
					c->shortened = 1;
				} else {
					char *error = xasprintf("%s; and %s", r->error, why_not.buf);
					add_error(errors, c->persona->name, error);
					free(error);
				}
				llm_request_release(r);
				continue;
			}
			if (!r->ok) {
				add_error(errors, c->persona->name, r->error);
				llm_request_release(r);
				continue;
			}
			log_info("%s: node %s: %s answered in %.0f ms (%s%d round%s, %d function call%s, %.0f + %.0f tokens, $%.4f)",
				 run->run.dir, node->state, c->persona->name, r->ms, r->cached ? "cached, " : "", r->rounds,
				 r->rounds == 1 ? "" : "s", r->function_calls, r->function_calls == 1 ? "" : "s", r->tokens_in,
				 r->tokens_out, r->cost_usd);
			struct strbuf why;
			strbuf_init(&why);
			cJSON *answer = answer_extract(r->text, &why);
			/* Every field of a candidate (think, method, detail, source, patch, config) is
			 * text only after this parse, where an escaped key becomes the key. */
			llm_redact_json(&s, answer);
			int usable = answer && take_candidates(answer, c->proposer, list, n, &why) >= 0;
			if (!usable && r->cut) { /* what went wrong first: the answer has no end */
				char *was = strbuf_detach(&why);
				strbuf_init(&why);
				if (s.max_output_tokens > 0)
					strbuf_addf(&why, "the answer stopped at --max-output-tokens %ld, unfinished: %s",
						    s.max_output_tokens, was);
				else
					strbuf_addf(&why, "the answer stopped at the server's output token limit, unfinished: %s", was);
				free(was);
			}
			if (usable) {
				if (why.len)
					log_warn("%s: node %s: %s: dropped %s", run->run.dir, node->state, c->persona->name, why.buf);
			} else if (round == 1) {
				char *fix = xasprintf("Your answer could not be used: %s. Answer again with only one JSON object "
						      "{\"candidates\": [...]} as specified, no prose and no code fences.", why.buf);
				json_append(c->messages, message("assistant", r->text));
				json_append(c->messages, message("user", fix));
				free(fix);
				log_warn("%s: node %s: %s: malformed answer (%s); asking once more", run->run.dir, node->state,
					 c->persona->name, why.buf);
				c->done = 0;
			} else {
				char *error = xasprintf("malformed answer %s: %s (see %s/%s)",
							c->shortened ? "to the shortened prompt" : "after one correction", why.buf,
							log_dir, r->log_file);
				add_error(errors, c->persona->name, error);
				free(error);
			}
			cJSON_Delete(answer);
			strbuf_release(&why);
			llm_request_release(r);
		}
		free(index);
	}
	for (size_t i = 0; i < ex->npersonas; i++) {
		cJSON_Delete(calls[i].messages);
		free(calls[i].proposer);
	}
	for (int k = 0; k < SEC_COUNT; k++)
		free(part[k]);
	free(shorter);
	free(where);
	strbuf_release(&why_not);
	free(calls);
	free(reqs);
	cJSON_Delete(schema);
	free(log_dir);
	free(cache_dir);
}
