/* ptx_regions.c: two passes over a PTX entry, the first finding its loops (branches back to a
 * label already passed), the second cutting it into regions and counting each one's work. */
#include "common.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jsonl.h"
#include "ptx_lines.h"
#include "ptx_profile.h"
#include "ptx_regions.h"
#include "xalloc.h"

enum count {
	R_INSTRUCTIONS, R_GLOBAL_LOAD_BYTES, R_GLOBAL_STORE_BYTES, R_SHARED_LOAD_BYTES, R_SHARED_STORE_BYTES,
	R_CP_ASYNC, R_CP_ASYNC_BYTES, R_BULK_COPIES, R_BULK_COPY_BYTES, R_FLOPS, R_TENSOR_FLOPS, R_BARRIERS,
	R_ASYNC_WAITS, R_FENCES, R_PREDICATED_BRANCHES, NCOUNTS
};

static const char *const count_names[NCOUNTS] = {
	"instructions", "global_load_bytes", "global_store_bytes", "shared_load_bytes", "shared_store_bytes",
	"cp_async", "cp_async_bytes", "bulk_copies", "bulk_copy_bytes", "flops", "tensor_flops", "barriers",
	"async_waits", "fences", "predicated_branches"};

struct region {
	long counts[NCOUNTS];
	long first_ptx_line, last_ptx_line; /* 1-based lines of the PTX text, for its snippet */
	const char *end;		    /* why it ends: the next region is a new stage or loop */
	long stage;
	int *lines; /* the kernel lines its instructions came from, repeats and all */
	size_t nlines;
};

struct loop {
	const char *header; /* the label the back edge jumps to (points into the PTX copy) */
	size_t first, last; /* its regions */
	int entered;	    /* the second pass has passed the header */
};

struct edge {
	size_t from, to;
};

struct graph {
	struct ptx_line *lines; /* the PTX split line by line */
	int *depths;		/* brace depth after each line */
	size_t nlines;
	struct ptx_lines map; /* the kernel line of each PTX line */
	struct loop *loops;
	size_t nloops;
	struct region *regions;
	size_t nregions;
	int open; /* regions[nregions - 1] takes more instructions */
	struct edge *back_edges;
	size_t nback_edges;
	long stage;
};

/* The loop whose header is label, or NULL. */
static struct loop *find_loop(struct graph *g, const char *label, size_t len)
{
	for (size_t k = 0; k < g->nloops; k++)
		if (strlen(g->loops[k].header) == len && strncmp(g->loops[k].header, label, len) == 0)
			return &g->loops[k];
	return NULL;
}

/* The first operand: a branch's target. */
static const char *first_operand(const char *operands, size_t *len)
{
	while (*operands == ' ' || *operands == '\t')
		operands++;
	*len = strcspn(operands, " \t;,");
	return operands;
}

static int is_branch(const char *opcode)
{
	return strcmp(opcode, "bra") == 0 || ptx_starts(opcode, "bra.");
}

/* The operand at index (from 0) as an integer literal, or -1 when it is a register or absent. */
static long literal_operand(const char *operands, int index)
{
	const char *p = operands;
	for (int k = 0; k < index; k++) {
		p = strchr(p, ',');
		if (!p)
			return -1;
		p++;
	}
	char *end;
	long v = strtol(p, &end, 0);
	while (*end == ' ' || *end == '\t')
		end++;
	return end != p && (*end == ',' || *end == ';' || *end == '\0') && v >= 0 ? v : -1;
}

/* Bytes one thread moves: the element type's size (the last type part of the opcode) times the
 * vector length. */
static long access_bytes(const char *opcode)
{
	static const struct {
		const char *part;
		long bytes;
	} types[] = {{".b8", 1},   {".u8", 1},	 {".s8", 1},	{".b16", 2},  {".u16", 2},    {".s16", 2},
		     {".f16", 2},  {".bf16", 2}, {".b32", 4},	{".u32", 4},  {".s32", 4},    {".f32", 4},
		     {".f16x2", 4}, {".bf16x2", 4}, {".tf32", 4}, {".b64", 8}, {".u64", 8}, {".s64", 8},
		     {".f64", 8},  {".b128", 16}};
	long bytes = 0;
	const char *last = NULL;
	for (size_t k = 0; k < sizeof(types) / sizeof(types[0]); k++) {
		const char *p = strstr(opcode, types[k].part);
		for (; p; p = strstr(p + 1, types[k].part)) {
			char after = p[strlen(types[k].part)];
			if ((after == '.' || after == '\0') && (!last || p > last)) {
				last = p;
				bytes = types[k].bytes;
			}
		}
	}
	long lanes = ptx_has_part(opcode, ".v8") ? 8 : ptx_has_part(opcode, ".v4") ? 4 : ptx_has_part(opcode, ".v2") ? 2 : 1;
	return bytes * lanes;
}

/* ldmatrix and stmatrix move .x1, .x2 or .x4 8x8 matrices of 16-bit elements across the warp:
 * 128 bytes each, 4 per thread. */
static long matrix_bytes(const char *opcode)
{
	int matrices = ptx_has_part(opcode, ".x4") ? 4 : ptx_has_part(opcode, ".x2") ? 2 : 1;
	return 4L * matrices;
}

/* Reads the shape part ("m16n8k16") of the opcode. Returns 0, or -1 when it has none. */
static int parse_shape(const char *opcode, long *m, long *n, long *k)
{
	for (const char *p = strstr(opcode, ".m"); p; p = strstr(p + 1, ".m")) {
		int used = 0;
		if (sscanf(p, ".m%ldn%ldk%ld%n", m, n, k, &used) == 3 && (p[used] == '.' || p[used] == '\0'))
			return 0;
	}
	return -1;
}

/* 2*m*n*k of a warp-level mma's shape, or 0 when it has none. */
static long shape_flops(const char *opcode)
{
	long m, n, k;
	return parse_shape(opcode, &m, &n, &k) == 0 ? 2 * m * n * k : 0;
}

/* Bytes one thread moves in a wmma.load or wmma.store: the warp's whole fragment (m x k for
 * a, k x n for b, m x n for c and d) over its 32 threads. */
static long fragment_bytes(const char *opcode)
{
	long m, n, k;
	if (parse_shape(opcode, &m, &n, &k))
		return 0;
	long elements = ptx_starts(opcode, "wmma.load.a") ? m * k : ptx_starts(opcode, "wmma.load.b") ? k * n : m * n;
	return elements * access_bytes(opcode) / 32;
}

/* Floating-point operations of one thread's add, sub, mul, fma or mad: 1 per lane, 2 for a fused
 * multiply-add; a packed f16x2 or bf16x2 has two lanes. */
static long arithmetic_flops(const char *opcode)
{
	long lanes = ptx_has_part(opcode, ".f16x2") || ptx_has_part(opcode, ".bf16x2") ? 2
		     : ptx_has_part(opcode, ".f16") || ptx_has_part(opcode, ".bf16") || ptx_has_part(opcode, ".f32") ||
				 ptx_has_part(opcode, ".f64")
			     ? 1
			     : 0;
	if (ptx_starts(opcode, "fma.") || ptx_starts(opcode, "mad."))
		return 2 * lanes;
	if (ptx_starts(opcode, "add.") || ptx_starts(opcode, "sub.") || ptx_starts(opcode, "mul."))
		return lanes;
	return 0;
}

static int is_async_wait(const char *opcode)
{
	return ptx_starts(opcode, "cp.async.wait_group") || ptx_starts(opcode, "cp.async.wait_all") ||
	       ptx_starts(opcode, "cp.async.bulk.wait_group") || ptx_starts(opcode, "mbarrier.try_wait") ||
	       ptx_starts(opcode, "mbarrier.test_wait") || ptx_starts(opcode, "wgmma.wait_group");
}

/* Adds the instruction to the region's counts. Returns why the region ends after it (a
 * synchronization point), or NULL. */
static const char *count_instruction(struct region *r, const struct ptx_line *l)
{
	const char *op = l->text;
	long *c = r->counts;
	c[R_INSTRUCTIONS]++;
	if (is_async_wait(op)) {
		c[R_ASYNC_WAITS]++;
		return "async_wait";
	}
	if ((ptx_starts(op, "bar.") && !ptx_starts(op, "bar.warp")) || ptx_starts(op, "barrier.")) {
		c[R_BARRIERS]++;
		return "barrier";
	}
	if (ptx_starts(op, "membar.") || ptx_starts(op, "fence.")) {
		c[R_FENCES]++;
		return "fence";
	}
	if (ptx_starts(op, "ld.global") || ptx_starts(op, "ldu.global"))
		c[R_GLOBAL_LOAD_BYTES] += access_bytes(op);
	else if (ptx_starts(op, "st.global"))
		c[R_GLOBAL_STORE_BYTES] += access_bytes(op);
	else if (ptx_starts(op, "ld.shared"))
		c[R_SHARED_LOAD_BYTES] += access_bytes(op);
	else if (ptx_starts(op, "st.shared"))
		c[R_SHARED_STORE_BYTES] += access_bytes(op);
	else if (ptx_starts(op, "wmma.load") && ptx_has_part(op, ".shared"))
		c[R_SHARED_LOAD_BYTES] += fragment_bytes(op);
	else if (ptx_starts(op, "wmma.load") && ptx_has_part(op, ".global"))
		c[R_GLOBAL_LOAD_BYTES] += fragment_bytes(op);
	else if (ptx_starts(op, "wmma.store") && ptx_has_part(op, ".shared"))
		c[R_SHARED_STORE_BYTES] += fragment_bytes(op);
	else if (ptx_starts(op, "wmma.store") && ptx_has_part(op, ".global"))
		c[R_GLOBAL_STORE_BYTES] += fragment_bytes(op);
	else if (ptx_starts(op, "ldmatrix"))
		c[R_SHARED_LOAD_BYTES] += matrix_bytes(op);
	else if (ptx_starts(op, "stmatrix"))
		c[R_SHARED_STORE_BYTES] += matrix_bytes(op);
	else if (ptx_starts(op, "cp.async.ca") || ptx_starts(op, "cp.async.cg")) {
		long bytes = literal_operand(l->operands, 2);
		c[R_CP_ASYNC]++;
		c[R_CP_ASYNC_BYTES] += bytes > 0 ? bytes : 0;
	} else if ((ptx_starts(op, "cp.async.bulk") || ptx_starts(op, "cp.reduce.async.bulk")) &&
		   !ptx_starts(op, "cp.async.bulk.commit_group") && !ptx_starts(op, "cp.async.bulk.prefetch")) {
		/* a tensor copy's size is in its tensor map, not in the PTX */
		long bytes = ptx_has_part(op, ".tensor") ? -1 : literal_operand(l->operands, 2);
		c[R_BULK_COPIES]++;
		c[R_BULK_COPY_BYTES] += bytes > 0 ? bytes : 0;
	} else if (ptx_starts(op, "wgmma.mma_async")) {
		c[R_TENSOR_FLOPS] += shape_flops(op) / 4; /* one instruction of the 4 warps of a warpgroup */
	} else if (ptx_starts(op, "mma.") || ptx_starts(op, "wmma.mma")) {
		c[R_TENSOR_FLOPS] += shape_flops(op);
	} else if (is_branch(op)) {
		if (l->guarded && !ptx_has_part(op, ".uni"))
			c[R_PREDICATED_BRANCHES]++;
	} else {
		c[R_FLOPS] += arithmetic_flops(op);
	}
	return NULL;
}

static void close_region(struct graph *g, const char *end)
{
	if (!g->open)
		return;
	struct region *r = &g->regions[g->nregions - 1];
	r->end = end;
	g->open = 0;
	if (strcmp(end, "barrier") == 0 || strcmp(end, "async_wait") == 0 || strcmp(end, "fence") == 0)
		g->stage++;
}

static struct region *open_region(struct graph *g, long ptx_line)
{
	if (!g->open) {
		g->regions = xreallocarray(g->regions, g->nregions + 1, sizeof(*g->regions));
		struct region *r = &g->regions[g->nregions++];
		memset(r, 0, sizeof(*r));
		r->first_ptx_line = ptx_line;
		r->stage = g->stage;
		g->open = 1;
	}
	return &g->regions[g->nregions - 1];
}

/* Finds the loops of the body lines [begin, end): the labels some later branch jumps back to. */
static void find_loops(struct graph *g, size_t begin, size_t end)
{
	const char **labels = NULL;
	size_t nlabels = 0;
	for (size_t i = begin; i < end; i++) {
		const struct ptx_line *l = &g->lines[i];
		if (l->kind == PTX_LABEL) {
			labels = xreallocarray(labels, nlabels + 1, sizeof(*labels));
			labels[nlabels++] = l->text;
		} else if (l->kind == PTX_INSTRUCTION && is_branch(l->text)) {
			size_t len;
			const char *target = first_operand(l->operands, &len);
			for (size_t k = 0; k < nlabels; k++)
				if (strlen(labels[k]) == len && strncmp(labels[k], target, len) == 0 &&
				    !find_loop(g, target, len)) {
					g->loops = xreallocarray(g->loops, g->nloops + 1, sizeof(*g->loops));
					memset(&g->loops[g->nloops], 0, sizeof(*g->loops));
					g->loops[g->nloops++].header = labels[k];
					break;
				}
		}
	}
	free(labels);
}

/* Cuts the body lines [begin, end) into regions. */
static void cut_regions(struct graph *g, size_t begin, size_t end)
{
	for (size_t i = begin; i < end; i++) {
		const struct ptx_line *l = &g->lines[i];
		if (l->kind == PTX_OTHER) {
			continue; /* a directive, ".loc" included: the map has read it */
		} else if (l->kind == PTX_LABEL) {
			struct loop *loop = find_loop(g, l->text, strlen(l->text));
			if (loop && !loop->entered) {
				close_region(g, "loop_start");
				loop->entered = 1;
				loop->first = g->nregions;
			}
		} else {
			struct region *r = open_region(g, (long)i + 1);
			r->last_ptx_line = (long)i + 1;
			int kernel_line = ptx_lines_source(&g->map, i + 1);
			if (kernel_line) {
				r->lines = xreallocarray(r->lines, r->nlines + 1, sizeof(*r->lines));
				r->lines[r->nlines++] = kernel_line;
			}
			const char *sync = count_instruction(r, l);
			size_t len;
			const char *target = is_branch(l->text) ? first_operand(l->operands, &len) : NULL;
			struct loop *loop = target ? find_loop(g, target, len) : NULL;
			if (sync) {
				close_region(g, sync);
			} else if (loop && loop->entered) {
				size_t here = g->nregions - 1;
				if (here > loop->last || loop->last < loop->first)
					loop->last = here;
				g->back_edges = xreallocarray(g->back_edges, g->nback_edges + 1, sizeof(*g->back_edges));
				g->back_edges[g->nback_edges++] = (struct edge){here, loop->first};
				close_region(g, "loop_back");
			}
		}
	}
	close_region(g, "end");
}

static int compare_ints(const void *a, const void *b)
{
	int x = *(const int *)a, y = *(const int *)b;
	return (x > y) - (x < y);
}

static cJSON *pair(long a, long b)
{
	cJSON *p = cJSON_CreateArray();
	if (!p)
		xalloc_die();
	json_append(p, cJSON_CreateNumber((double)a));
	json_append(p, cJSON_CreateNumber((double)b));
	return p;
}

/* The region's kernel lines as sorted [first, last] ranges of consecutive lines. */
static cJSON *line_ranges(struct region *r)
{
	cJSON *ranges = cJSON_CreateArray();
	if (!ranges)
		xalloc_die();
	if (r->nlines) /* qsort may not be given NULL, even for nothing */
		qsort(r->lines, r->nlines, sizeof(*r->lines), compare_ints);
	for (size_t k = 0; k < r->nlines;) {
		size_t j = k;
		while (j + 1 < r->nlines && r->lines[j + 1] <= r->lines[j] + 1)
			j++;
		json_append(ranges, pair(r->lines[k], r->lines[j]));
		k = j + 1;
	}
	return ranges;
}

static cJSON *region_json(const struct graph *g, size_t id)
{
	struct region *r = &g->regions[id];
	cJSON *o = json_object();
	json_add_number(o, "id", (double)id);
	json_add_number(o, "stage", (double)r->stage);
	int depth = 0;
	for (size_t k = 0; k < g->nloops; k++)
		depth += g->loops[k].entered && g->loops[k].first <= id && id <= g->loops[k].last;
	json_add_number(o, "loop_depth", depth);
	json_add(o, "ptx_lines", pair(r->first_ptx_line, r->last_ptx_line));
	json_add(o, "lines", line_ranges(r));
	for (int c = 0; c < NCOUNTS; c++)
		json_add_number(o, count_names[c], (double)r->counts[c]);
	json_add_string(o, "end", r->end);
	return o;
}

static cJSON *edge_json(size_t from, size_t to, const char *kind)
{
	cJSON *o = json_object();
	json_add_number(o, "from", (double)from);
	json_add_number(o, "to", (double)to);
	json_add_string(o, "kind", kind);
	return o;
}

static cJSON *graph_json(const struct graph *g, const char *entry)
{
	cJSON *out = json_object(), *regions = cJSON_CreateArray(), *edges = cJSON_CreateArray(),
	      *loops = cJSON_CreateArray();
	if (!regions || !edges || !loops)
		xalloc_die();
	json_add_string(out, "entry", entry);
	for (size_t k = 0; k < g->nregions; k++)
		json_append(regions, region_json(g, k));
	for (size_t k = 0; k + 1 < g->nregions; k++)
		json_append(edges, edge_json(k, k + 1, "next"));
	for (size_t k = 0; k < g->nback_edges; k++)
		json_append(edges, edge_json(g->back_edges[k].from, g->back_edges[k].to, "loop_back"));
	for (size_t k = 0, id = 0; k < g->nloops; k++) {
		const struct loop *loop = &g->loops[k];
		if (!loop->entered || loop->last < loop->first)
			continue;
		cJSON *o = json_object(), *members = cJSON_CreateArray();
		if (!members)
			xalloc_die();
		json_add_number(o, "id", (double)id++);
		json_add_string(o, "header", loop->header);
		for (size_t r = loop->first; r <= loop->last; r++)
			json_append(members, cJSON_CreateNumber((double)r));
		json_add(o, "regions", members);
		json_append(loops, o);
	}
	json_add(out, "regions", regions);
	json_add(out, "edges", edges);
	json_add(out, "loops", loops);
	return out;
}

/* The lines [*begin, *end) of the body of the entry named entry (the first when NULL), and its
 * name in *name (pointing into the PTX copy). Returns 0, or -1 when there is no such entry. */
static int find_entry(const struct graph *g, const char *entry, size_t *begin, size_t *end, char **name)
{
	for (size_t i = 0; i < g->nlines; i++) {
		const struct ptx_line *l = &g->lines[i];
		char *p = l->kind == PTX_OTHER ? strstr(l->text, ".entry") : NULL;
		if (!p || (p[6] != ' ' && p[6] != '\t'))
			continue;
		p += 6 + strspn(p + 6, " \t");
		p[strcspn(p, " \t(")] = '\0';
		if (entry && strcmp(p, entry) != 0)
			continue;
		size_t j = i;
		while (j < g->nlines && g->depths[j] == 0)
			j++;
		*begin = j;
		while (j < g->nlines && g->depths[j] > 0)
			j++;
		*end = j;
		*name = p;
		return 0;
	}
	return -1;
}

static void graph_release(struct graph *g)
{
	for (size_t k = 0; k < g->nregions; k++)
		free(g->regions[k].lines);
	free(g->regions);
	free(g->loops);
	free(g->back_edges);
	free(g->lines);
	free(g->depths);
	ptx_lines_release(&g->map);
}

cJSON *ptx_regions(const char *ptx, const char *entry, const char *kernel_file)
{
	struct graph g;
	memset(&g, 0, sizeof(g));
	char *copy = xstrdup(ptx);
	int depth = 0;
	for (char *line = copy, *next; line; line = next) {
		next = strchr(line, '\n');
		if (next)
			*next++ = '\0';
		char *comment = strstr(line, "//");
		for (char *p = line; *p && p != comment; p++)
			depth += (*p == '{') - (*p == '}');
		g.lines = xreallocarray(g.lines, g.nlines + 1, sizeof(*g.lines));
		g.depths = xreallocarray(g.depths, g.nlines + 1, sizeof(*g.depths));
		ptx_split_line(line, &g.lines[g.nlines]);
		g.depths[g.nlines++] = depth;
	}
	cJSON *out = NULL;
	size_t begin, end;
	char *name;
	if (find_entry(&g, entry, &begin, &end, &name) == 0) {
		ptx_lines_init(&g.map, ptx, kernel_file);
		find_loops(&g, begin, end);
		cut_regions(&g, begin, end);
		out = graph_json(&g, name);
	}
	graph_release(&g);
	free(copy);
	return out;
}

/* [first, last] of the kernel lines of a region's JSON, or null when it has none. */
static cJSON *line_span(const cJSON *region)
{
	const cJSON *ranges = cJSON_GetObjectItemCaseSensitive(region, "lines");
	int n = cJSON_GetArraySize(ranges);
	if (n == 0)
		return cJSON_CreateNull();
	const cJSON *first = cJSON_GetArrayItem(ranges, 0), *last = cJSON_GetArrayItem(ranges, n - 1);
	return pair((long)cJSON_GetArrayItem(first, 0)->valuedouble, (long)cJSON_GetArrayItem(last, 1)->valuedouble);
}

static double field(const cJSON *region, const char *name)
{
	return cJSON_GetObjectItemCaseSensitive(region, name)->valuedouble;
}

/* The region with the largest positive work (the first of equals), as {"region", KEYS...,
 * "lines"}, or null. */
static cJSON *heaviest(const cJSON *regions, double (*work)(const cJSON *), const char *const *keys)
{
	const cJSON *best = NULL, *r;
	double most = 0;
	cJSON_ArrayForEach(r, regions)
		if (work(r) > most) {
			most = work(r);
			best = r;
		}
	if (!best)
		return cJSON_CreateNull();
	cJSON *o = json_object();
	json_add_number(o, "region", field(best, "id"));
	for (size_t k = 0; keys[k]; k++)
		json_add_number(o, keys[k], field(best, keys[k]));
	json_add(o, "lines", line_span(best));
	return o;
}

static double global_bytes(const cJSON *region)
{
	return field(region, "global_load_bytes") + field(region, "global_store_bytes");
}

/* A warp's FLOPs: flops are one thread's, tensor_flops a warp's already. */
static double warp_flops(const cJSON *region)
{
	return 32 * field(region, "flops") + field(region, "tensor_flops");
}

cJSON *ptx_regions_summary(const cJSON *graph)
{
	static const char *const byte_keys[] = {"global_load_bytes", "global_store_bytes", NULL};
	static const char *const flop_keys[] = {"flops", "tensor_flops", NULL};
	const cJSON *regions = cJSON_GetObjectItemCaseSensitive(graph, "regions"), *r;
	double barriers = 0, waits = 0, stages = 0;
	cJSON_ArrayForEach(r, regions) {
		barriers += field(r, "barriers");
		waits += field(r, "async_waits");
		stages = field(r, "stage") + 1;
	}
	cJSON *o = json_object();
	json_add_number(o, "regions", cJSON_GetArraySize(regions));
	json_add_number(o, "stages", stages);
	json_add_number(o, "loops", cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(graph, "loops")));
	json_add_number(o, "barriers", barriers);
	json_add_number(o, "async_waits", waits);
	json_add(o, "most_global_bytes", heaviest(regions, global_bytes, byte_keys));
	json_add(o, "most_flops", heaviest(regions, warp_flops, flop_keys));
	return o;
}
