/* functions.c (kg-propose): the functions of the tool loop, each reading one file of the
 * node's variant as it is: what is not there is said to be missing, never made up. */
#include "common.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fileio.h"
#include "functions.h"
#include "jsonl.h"
#include "ptx_lines.h"
#include "run.h"
#include "xalloc.h"

static const struct llm_function functions[] = {
	{"metrics",
	 "Hardware metrics of this variant measured on the GPU (kg-bench --metrics, CUPTI): throughputs as % of "
	 "peak, occupancy and its limiter, cache hit rates, bank conflicts, pipe utilizations, warp stall reasons. "
	 "Names the metrics that were not measured, and why.",
	 "{\"type\":\"object\",\"properties\":{\"names\":{\"type\":\"array\",\"items\":{\"type\":\"string\"},"
	 "\"description\":\"metric names (dram_throughput_pct, stalls, ...); an empty array for all\"}},"
	 "\"required\":[\"names\"],\"additionalProperties\":false}"},
	{"region_detail",
	 "One region of the kernel's PTX Region-DAG (regions.json): its kernel.cu lines, PTX lines, static "
	 "per-thread bytes, FLOPs, barriers, async copies and waits, predicated branches, loop depth, the "
	 "regions after it and the loops holding it.",
	 "{\"type\":\"object\",\"properties\":{\"id\":{\"type\":\"integer\",\"description\":\"the region's id\"}},"
	 "\"required\":[\"id\"],\"additionalProperties\":false}"},
	{"source_lines",
	 "Lines start to end of this variant's kernel.cu, numbered; when its PC samples were taken (kg-bench "
	 "--metrics), each line's share of them and its most frequent stall reason beside it.",
	 "{\"type\":\"object\",\"properties\":{\"start\":{\"type\":\"integer\"},\"end\":{\"type\":\"integer\"}},"
	 "\"required\":[\"start\",\"end\"],\"additionalProperties\":false}"},
	{"ptx_for_lines",
	 "The PTX that NVRTC generated for kernel.cu lines start to end (from its .loc line info): each "
	 "instruction with its kernel.ptx line and its kernel.cu line.",
	 "{\"type\":\"object\",\"properties\":{\"start\":{\"type\":\"integer\"},\"end\":{\"type\":\"integer\"}},"
	 "\"required\":[\"start\",\"end\"],\"additionalProperties\":false}"},
};

void functions_init(struct llm_tools *tools, struct variant_view *view)
{
	tools->functions = functions;
	tools->nfunctions = ARRAY_SIZE(functions);
	tools->call = functions_call;
	tools->ctx = view;
}

static char *text_of(cJSON *doc)
{
	char *text = json_text(doc);
	cJSON_Delete(doc);
	return text;
}

/* The whole number argument key into *v. Returns NULL, or the error for the model. */
static char *whole_arg(const cJSON *arguments, const char *key, long *v)
{
	const cJSON *item = cJSON_GetObjectItemCaseSensitive(arguments, key);
	double d = cJSON_IsNumber(item) ? item->valuedouble : NAN;
	if (!(d == floor(d) && fabs(d) < 1e9))
		return xasprintf("error: %s must be a whole number", key);
	*v = (long)d;
	return NULL;
}

/* ---------------------------------------------------------------- metrics */

static char *call_metrics(const struct variant_view *v, const cJSON *arguments)
{
	const cJSON *names = cJSON_GetObjectItemCaseSensitive(arguments, "names"), *name;
	cJSON_ArrayForEach(name, names)
		if (!cJSON_IsString(name))
			return xstrdup("error: names must be an array of metric names");
	if (!cJSON_IsArray(names))
		return xstrdup("error: names must be an array of metric names");
	const cJSON *doc = v->node->metrics;
	cJSON *out = json_object();
	if (!doc) {
		json_add_string(out, "status", "unavailable");
		json_add_string(out, "why", "no hardware metrics were collected for this variant (kg-bench --metrics "
					    "writes variants/STATE/metrics.json)");
		return text_of(out);
	}
	const char *status = json_string(doc, "status");
	json_add_string(out, "status", status ? status : "unavailable");
	if (!status || strcmp(status, "ok") != 0) {
		const char *why = json_string(doc, "why");
		json_add_string(out, "why", why ? why : "metrics.json gives no reason");
		return text_of(out);
	}
	static const char *const about[] = {"source", "device"};
	for (size_t k = 0; k < ARRAY_SIZE(about); k++)
		if (json_string(doc, about[k]))
			json_add_string(out, about[k], json_string(doc, about[k]));
	const cJSON *values = json_object_member(doc, "values");
	const cJSON *unavailable = json_object_member(doc, "unavailable");
	if (cJSON_GetArraySize(names) == 0) {
		json_add(out, "values", cJSON_Duplicate(values, 1));
		json_add(out, "unavailable", cJSON_Duplicate(unavailable, 1));
		return text_of(out);
	}
	cJSON *got = json_object(), *missing = json_object();
	int unknown = 0;
	cJSON_ArrayForEach(name, names) {
		const char *n = name->valuestring;
		const cJSON *value = cJSON_GetObjectItemCaseSensitive(values, n);
		const char *why = json_string(unavailable, n);
		if (cJSON_GetObjectItemCaseSensitive(got, n) || cJSON_GetObjectItemCaseSensitive(missing, n))
			continue;
		if (value) {
			json_add(got, n, cJSON_Duplicate(value, 1));
		} else {
			json_add_string(missing, n, why ? why : "not a metric of metrics.json");
			unknown += !why;
		}
	}
	json_add(out, "values", got);
	json_add(out, "unavailable", missing);
	if (unknown) { /* the names it has, so that the next call can use them */
		cJSON *all = cJSON_CreateArray();
		const cJSON *item;
		if (!all)
			xalloc_die();
		cJSON_ArrayForEach(item, values)
			json_append(all, cJSON_CreateString(item->string));
		cJSON_ArrayForEach(item, unavailable)
			json_append(all, cJSON_CreateString(item->string));
		json_add(out, "metrics", all);
	}
	return text_of(out);
}

/* ---------------------------------------------------------------- regions */

static char *call_region_detail(const struct variant_view *v, const cJSON *arguments)
{
	long id;
	char *bad = whole_arg(arguments, "id", &id);
	if (bad)
		return bad;
	cJSON *graph = node_variant_json(v->run, v->node, VARIANT_REGIONS);
	const cJSON *regions = cJSON_GetObjectItemCaseSensitive(graph, "regions"), *item;
	int n = cJSON_GetArraySize(regions);
	if (n == 0 || id < 0 || id >= n) {
		char *error = n == 0 ? xstrdup("error: this variant has no region graph (regions.json: a build that was not "
					       "compiled, under --replay, has none)")
				     : xasprintf("error: there is no region %ld; the regions are 0 to %d", id, n - 1);
		cJSON_Delete(graph);
		return error;
	}
	cJSON *out = cJSON_Duplicate(cJSON_GetArrayItem(regions, (int)id), 1);
	cJSON *next = cJSON_CreateArray(), *back = cJSON_CreateArray(), *loops = cJSON_CreateArray();
	if (!next || !back || !loops)
		xalloc_die();
	cJSON_ArrayForEach(item, cJSON_GetObjectItemCaseSensitive(graph, "edges")) {
		const char *kind = json_string(item, "kind");
		if (json_number(item, "from", -1) == (double)id && kind)
			json_append(strcmp(kind, "loop_back") == 0 ? back : next,
				    cJSON_CreateNumber(json_number(item, "to", NAN)));
	}
	cJSON_ArrayForEach(item, cJSON_GetObjectItemCaseSensitive(graph, "loops")) {
		const cJSON *member;
		cJSON_ArrayForEach(member, cJSON_GetObjectItemCaseSensitive(item, "regions"))
			if (cJSON_IsNumber(member) && member->valuedouble == (double)id)
				json_append(loops, cJSON_CreateNumber(json_number(item, "id", NAN)));
	}
	json_add(out, "next", next);
	json_add(out, "loops_back_to", back);
	json_add(out, "in_loops", loops);
	cJSON_Delete(graph);
	return text_of(out);
}

/* ---------------------------------------------------------------- lines */

/* The lines of text, as pointers into it (each ends at "\n" or the end); *n of them. */
static const char **split_lines(const char *text, size_t *n)
{
	const char **lines = NULL;
	*n = 0;
	for (const char *p = text; *p;) {
		lines = xreallocarray(lines, *n + 1, sizeof(*lines));
		lines[(*n)++] = p;
		p += strcspn(p, "\n");
		p += *p == '\n';
	}
	return lines;
}

/* Checks start and end against kernel.cu's n lines, cutting end to n. Returns NULL, or the
 * error for the model. */
static char *line_range(const cJSON *arguments, size_t n, long *start, long *end)
{
	char *bad = whole_arg(arguments, "start", start);
	if (!bad)
		bad = whole_arg(arguments, "end", end);
	if (!bad && (*start < 1 || *start > (long)n || *end < *start))
		bad = xasprintf("error: lines %ld to %ld are not a range of kernel.cu, whose lines are 1 to %zu", *start, *end, n);
	if (!bad && *end > (long)n)
		*end = (long)n;
	return bad;
}

/* The variant's lines.json when its PC samples were taken (status ok), else NULL. */
static cJSON *sampled_lines(const struct variant_view *v)
{
	cJSON *doc = node_variant_json(v->run, v->node, VARIANT_LINES);
	const char *status = json_string(doc, "status");
	if (doc && (!status || strcmp(status, "ok") != 0)) {
		cJSON_Delete(doc);
		doc = NULL;
	}
	return doc;
}

/* Line k's share of the samples and its top stall, in a column of its own ("" when none). */
static void add_samples(struct strbuf *sb, const cJSON *doc, long k)
{
	const cJSON *line, *s, *top = NULL;
	cJSON_ArrayForEach(line, cJSON_GetObjectItemCaseSensitive(doc, "lines")) {
		if (json_number(line, "line", 0) != (double)k)
			continue;
		cJSON_ArrayForEach(s, cJSON_GetObjectItemCaseSensitive(line, "stalls"))
			if (cJSON_IsNumber(s) && (!top || s->valuedouble > top->valuedouble))
				top = s;
		strbuf_addf(sb, "%5.1f %% %-18.18s  ", json_number(line, "share_pct", 0), top ? top->string : "");
		return;
	}
	strbuf_addf(sb, "%27s", "");
}

static char *call_source_lines(const struct variant_view *v, const cJSON *arguments)
{
	size_t n;
	const char **lines = split_lines(v->node->source, &n);
	long start, end;
	char *bad = line_range(arguments, n, &start, &end);
	if (bad) {
		free(lines);
		return bad;
	}
	struct strbuf sb;
	strbuf_init(&sb);
	cJSON *samples = sampled_lines(v);
	if (samples)
		strbuf_addstr(&sb, "line, share of the PC samples (lines.json) and top stall, source:\n");
	for (long k = start; k <= end; k++) {
		strbuf_addf(&sb, "%4ld  ", k);
		if (samples)
			add_samples(&sb, samples, k);
		strbuf_addf(&sb, "%.*s\n", (int)strcspn(lines[k - 1], "\n"), lines[k - 1]);
	}
	cJSON_Delete(samples);
	free(lines);
	return strbuf_detach(&sb);
}

static char *call_ptx_for_lines(const struct variant_view *v, const cJSON *arguments)
{
	size_t n, nptx, len, *found = NULL;
	const char **lines = split_lines(v->node->source, &n);
	free(lines);
	long start, end;
	char *bad = line_range(arguments, n, &start, &end);
	if (bad)
		return bad;
	char *path = run_variant_path(v->run->run.dir, v->node->state, VARIANT_PTX);
	char *ptx = file_read_all(path, &len);
	free(path);
	if (!ptx)
		return xstrdup("error: this variant has no kernel.ptx (a build that was not compiled, under --replay, has none)");
	struct ptx_lines map;
	ptx_lines_init(&map, ptx, run_variant_file(VARIANT_KERNEL));
	size_t count = ptx_lines_of_source(&map, (int)start, (int)end, &found);
	lines = split_lines(ptx, &nptx);
	struct strbuf sb;
	strbuf_init(&sb);
	if (!count)
		strbuf_addf(&sb, "no PTX instruction comes from kernel.cu lines %ld to %ld\n", start, end);
	else
		strbuf_addf(&sb, "kernel.ptx line, kernel.cu line, PTX (kernel.cu lines %ld to %ld):\n", start, end);
	for (size_t k = 0; k < count; k++) {
		const char *l = lines[found[k] - 1];
		l += strspn(l, " \t");
		strbuf_addf(&sb, "%6zu %4d  %.*s\n", found[k], ptx_lines_source(&map, found[k]), (int)strcspn(l, "\n"), l);
	}
	free(lines);
	free(found);
	ptx_lines_release(&map);
	free(ptx);
	return strbuf_detach(&sb);
}

char *functions_call(void *view, const char *name, const cJSON *arguments)
{
	const struct variant_view *v = view;
	if (strcmp(name, "metrics") == 0)
		return call_metrics(v, arguments);
	if (strcmp(name, "region_detail") == 0)
		return call_region_detail(v, arguments);
	if (strcmp(name, "source_lines") == 0)
		return call_source_lines(v, arguments);
	if (strcmp(name, "ptx_for_lines") == 0)
		return call_ptx_for_lines(v, arguments);
	return xasprintf("error: there is no function '%s'", name);
}
