/* graph.c: the search graph in memory, and as JSON (--export, and graph.json imports). Every
 * number the search uses is kept, so a loaded graph selects exactly as the saved one would have. */
#include "common.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "events.h"
#include "fileio.h"
#include "graph.h"
#include "jsonl.h"
#include "log.h"
#include "run.h"
#include "fnv1a.h"
#include "xalloc.h"

#define GRAPH_JSON_VERSION 1

void search_params_default(struct search_params *p)
{
	*p = (struct search_params){
		.c_init = 1.25, .c_base = 19652, .fpu_reduction = 0.2, .root_fpu_reduction = 0.1,
		.widen_k = 1, .widen_alpha = 0.5, .reward_clip = 3, .failure_reward = -3, .backup_max = 0,
		.cycle_penalty = 0.5, .noise_epsilon = 0, .noise_alpha = 10.83, .improve_pct = 2,
		.converge_iters = 0, .budget_builds = 0, .rollout_epsilon = 0.1, .rollout_lambda = 0.5,
		.rollout_depth = 0,
	};
}

/* The parameters: the name each has in graph.json, the option that sets it and the range
 * that option accepts, which a loaded graph's must lie in too. One table serves the command
 * line, saving and loading. */
static const struct {
	const char *name, *option;
	size_t offset;
	int is_long;
	double lo, hi;
} param_fields[] = {
#define D(f, option, lo, hi) {#f, option, offsetof(struct search_params, f), 0, lo, hi}
#define L(f, option) {#f, option, offsetof(struct search_params, f), 1, 0, GRAPH_COUNT_MAX}
	/* Widening past N^1 or below 0, noise off [0, 1] and c_base <= 0 make no search; a
	 * negative widen_k loops for ever, a noise_alpha of -1e9 recurses until the stack ends. */
	D(c_init, "c-puct", -1e9, 1e9), D(c_base, "c-base", 1, 1e9), D(fpu_reduction, "fpu-reduction", -1e9, 1e9),
	D(root_fpu_reduction, "root-fpu-reduction", -1e9, 1e9), D(widen_k, "widen-k", 0, 1e9),
	D(widen_alpha, "widen-alpha", 0, 1), D(reward_clip, "reward-clip", 0, 1e9),
	D(failure_reward, "failure-reward", -1e9, 1e9), D(cycle_penalty, "cycle-penalty", -1e9, 1e9),
	D(noise_epsilon, "noise", 0, 1), D(noise_alpha, "noise-alpha", 0, 1e9), D(improve_pct, "improve-pct", -1e9, 1e9),
	L(converge_iters, "converge"), L(budget_builds, "budget-builds"), D(rollout_epsilon, "rollout-epsilon", 0, 1),
	D(rollout_lambda, "rollout-lambda", -1e9, 1e9), L(rollout_depth, "rollout-depth"),
#undef D
#undef L
};

int search_param_range(const char *option, double *lo, double *hi)
{
	for (size_t k = 0; k < ARRAY_SIZE(param_fields); k++)
		if (strcmp(param_fields[k].option, option) == 0) {
			*lo = param_fields[k].lo;
			*hi = param_fields[k].hi;
			return 0;
		}
	return -1;
}

void search_params_export(const struct search_params *p, double v[SEARCH_PARAMS_MAX])
{
	size_t k;
	for (k = 0; k < ARRAY_SIZE(param_fields); k++) {
		const char *base = (const char *)p + param_fields[k].offset;
		v[k] = param_fields[k].is_long ? (double)*(const long *)(const void *)base : *(const double *)(const void *)base;
	}
	v[k] = p->backup_max;
}

char *search_params_import(struct search_params *p, const double v[SEARCH_PARAMS_MAX])
{
	size_t k;
	for (k = 0; k < ARRAY_SIZE(param_fields); k++) {
		double lo = param_fields[k].lo, hi = param_fields[k].hi;
		/* Written so that NaN fails too; a long must be whole before it is converted. */
		if (!(v[k] >= lo && v[k] <= hi) || (param_fields[k].is_long && floor(v[k]) != v[k]))
			return xasprintf("%s: %g is not %s in [%g, %g] (what --%s accepts)", param_fields[k].name, v[k],
					 param_fields[k].is_long ? "a whole number" : "a number", lo, hi, param_fields[k].option);
	}
	if (v[k] != 0 && v[k] != 1)
		return xasprintf("backup_max: %g is not 0 (mean) or 1 (max)", v[k]);
	for (k = 0; k < ARRAY_SIZE(param_fields); k++) {
		char *base = (char *)p + param_fields[k].offset;
		if (param_fields[k].is_long)
			*(long *)(void *)base = (long)v[k];
		else
			*(double *)(void *)base = v[k];
	}
	p->backup_max = v[k] != 0;
	return NULL;
}

static const struct blob no_blob = {BLOB_NONE, 0};

void graph_init(struct graph *g, const char *run)
{
	memset(g, 0, sizeof(*g));
	g->run = xstrdup(run);
	g->kernel_blob = g->regraph_blob = no_blob;
	search_params_default(&g->params);
	mcgs_init(&g->g);
}

void graph_release(struct graph *g)
{
	/* Most entries are empty: a loaded graph caches only what a step used. */
	for (size_t i = 0; i < g->g.nnodes; i++) {
		struct node_cache *c = &g->node_cache[i];
		if (c->state || c->config || c->methods || c->status || c->reason) {
			free(c->state);
			cJSON_Delete(c->config);
			cJSON_Delete(c->methods);
			free(c->status);
			free(c->reason);
		}
	}
	for (size_t i = 0; i < g->g.nedges; i++) {
		struct edge_cache *c = &g->edge_cache[i];
		if (c->method || c->candidate) {
			free(c->method);
			cJSON_Delete(c->candidate);
		}
	}
	if (g->arrays_mapped) {
		g->nodes = NULL;
		g->edges = NULL;
		g->g.nodes = NULL;
		g->g.edges = NULL;
	}
	free(g->nodes);
	free(g->edges);
	free(g->node_cache);
	free(g->edge_cache);
	free(g->rollout.path);
	free(g->regraph);
	free(g->run);
	free(g->kernel);
	mcgs_release(&g->g);
	memset(g, 0, sizeof(*g));
}

/* Grows an array of old items of size bytes to cap; zero: clear the new ones. */
static void *grow(void *array, size_t old, size_t cap, size_t size, int zero)
{
	char *p = xreallocarray(array, cap, size);
	if (zero)
		memset(p + old * size, 0, (cap - old) * size);
	return p;
}

void graph_use_arrays(struct graph *g, struct mcgs_node *mnodes, struct gnode *nodes, size_t cap_nodes,
		      struct mcgs_edge *medges, struct gedge *edges, size_t cap_edges)
{
	g->g.nodes = mnodes;
	g->nodes = nodes;
	g->g.nodes_cap = g->cap_nodes = cap_nodes;
	g->g.edges = medges;
	g->edges = edges;
	g->g.edges_cap = g->cap_edges = cap_edges;
	g->node_cache = xcalloc(cap_nodes, sizeof(*g->node_cache));
	g->edge_cache = xcalloc(cap_edges, sizeof(*g->edge_cache));
	g->arrays_mapped = 1;
}

/* A copy on the heap of an array that is not the graph's own. */
static void *own(const void *array, size_t n, size_t size)
{
	void *p = xreallocarray(NULL, n ? n : 1, size);
	memcpy(p, array, n * size);
	return p;
}

void graph_reserve(struct graph *g, size_t nodes, size_t edges)
{
	if (g->arrays_mapped && (nodes > g->cap_nodes || edges > g->cap_edges)) {
		g->g.nodes = own(g->g.nodes, g->cap_nodes, sizeof(*g->g.nodes));
		g->nodes = own(g->nodes, g->cap_nodes, sizeof(*g->nodes));
		g->g.edges = own(g->g.edges, g->cap_edges, sizeof(*g->g.edges));
		g->edges = own(g->edges, g->cap_edges, sizeof(*g->edges));
		g->arrays_mapped = 0;
	}
	mcgs_reserve(&g->g, nodes, edges);
	if (nodes > g->cap_nodes) {
		size_t cap = nodes > 2 * g->cap_nodes ? nodes : 2 * g->cap_nodes;
		g->nodes = grow(g->nodes, g->cap_nodes, cap, sizeof(*g->nodes), 0);
		g->node_cache = grow(g->node_cache, g->cap_nodes, cap, sizeof(*g->node_cache), 1);
		g->cap_nodes = cap;
	}
	if (edges > g->cap_edges) {
		size_t cap = edges > 2 * g->cap_edges ? edges : 2 * g->cap_edges;
		g->edges = grow(g->edges, g->cap_edges, cap, sizeof(*g->edges), 0);
		g->edge_cache = grow(g->edge_cache, g->cap_edges, cap, sizeof(*g->edge_cache), 1);
		g->cap_edges = cap;
	}
}

const char *graph_blob_text(const struct graph *g, struct blob b)
{
	if (b.off == BLOB_NONE || !blob_inside(b, g->blobs_len))
		return NULL;
	return g->blobs + b.off;
}

/* A text the graph learned this process (cached), else the one stored at b. */
static const char *text_or_blob(const struct graph *g, const char *cached, struct blob b)
{
	return cached ? cached : graph_blob_text(g, b);
}

const char *graph_node_state(const struct graph *g, size_t node)
{
	return text_or_blob(g, g->node_cache[node].state, g->nodes[node].state);
}

const char *graph_edge_method(const struct graph *g, size_t edge)
{
	return text_or_blob(g, g->edge_cache[edge].method, g->edges[edge].method);
}

/* The value stored at b, parsed into *cache on first use; fallback() when there is none. */
static const cJSON *parsed(const struct graph *g, cJSON **cache, struct blob b, cJSON *(*fallback)(void))
{
	if (!*cache) {
		const char *text = graph_blob_text(g, b);
		*cache = text ? cJSON_ParseWithLength(text, b.len) : NULL;
		if (!*cache && fallback)
			*cache = fallback();
	}
	return *cache;
}

const cJSON *graph_node_config(const struct graph *g, size_t node)
{
	return parsed(g, &g->node_cache[node].config, g->nodes[node].config, NULL);
}

const cJSON *graph_node_methods(const struct graph *g, size_t node)
{
	return parsed(g, &g->node_cache[node].methods, g->nodes[node].methods, cJSON_CreateArray);
}

const cJSON *graph_edge_candidate(const struct graph *g, size_t edge)
{
	return parsed(g, &g->edge_cache[edge].candidate, g->edges[edge].candidate, cJSON_CreateObject);
}

const char *graph_node_status(const struct graph *g, size_t node)
{
	return text_or_blob(g, g->node_cache[node].status, g->nodes[node].status);
}

const char *graph_node_reason(const struct graph *g, size_t node)
{
	return text_or_blob(g, g->node_cache[node].reason, g->nodes[node].reason);
}

void graph_node_set_failure(struct graph *g, size_t node, const char *status, const char *reason)
{
	struct node_cache *c = &g->node_cache[node];
	free(c->status);
	free(c->reason);
	c->status = status ? xstrdup(status) : NULL;
	c->reason = reason ? xstrdup(reason) : NULL;
	g->nodes[node].status = g->nodes[node].reason = no_blob;
}

int graph_unnumbered(const struct graph *g)
{
	for (size_t i = 0; i < g->g.nedges; i++)
		if (g->g.edges[i].to != MCGS_NONE && g->edges[i].build == 0)
			return 1;
	return 0;
}

void graph_node_set_json(struct graph *g, size_t node, cJSON *config, cJSON *methods)
{
	struct node_cache *c = &g->node_cache[node];
	cJSON_Delete(c->config);
	cJSON_Delete(c->methods);
	c->config = config;
	c->methods = methods;
	g->nodes[node].config = g->nodes[node].methods = no_blob;
}

size_t graph_add_node(struct graph *g, const char *state, double u, int rank)
{
	graph_reserve(g, g->g.nnodes + 1, g->g.nedges);
	size_t id = mcgs_add_node(&g->g, u, rank);
	g->nodes[id] = (struct gnode){
		.median_ms = NAN, .speedup = NAN, .speedup_lo = NAN, .created_iter = g->iter,
		.state_hash = fnv1a64(state, strlen(state)), .state = no_blob, .config = no_blob, .methods = no_blob,
		.status = no_blob, .reason = no_blob,
	};
	g->node_cache[id] = (struct node_cache){.state = xstrdup(state)};
	return id;
}

size_t graph_add_edge(struct graph *g, size_t from, double prior, const cJSON *candidate, const char *method)
{
	graph_reserve(g, g->g.nnodes, g->g.nedges + 1);
	size_t id = mcgs_add_edge(&g->g, from, MCGS_NONE, prior);
	g->edges[id] = (struct gedge){.reward_max = -INFINITY, .candidate = no_blob, .method = no_blob};
	g->edge_cache[id] = (struct edge_cache){
		.method = xstrdup(method ? method : ""),
		.candidate = candidate ? cJSON_Duplicate(candidate, 1) : NULL,
	};
	return id;
}

size_t graph_find_state(const struct graph *g, const char *state, size_t parent)
{
	uint64_t hash = fnv1a64(state, strlen(state));
	for (size_t i = 0; i < g->g.nnodes; i++)
		if (g->nodes[i].state_hash == hash && strcmp(graph_node_state(g, i), state) == 0 &&
		    (parent == MCGS_NONE || mcgs_rank_allows(&g->g, parent, i)))
			return i;
	return MCGS_NONE;
}

/* ---------------------------------------------------------------- checking */

static int count_ok(double v)
{
	return v >= 0 && v <= GRAPH_COUNT_MAX && floor(v) == v;
}

/* Each node's out-edges, walked as mcgs_out_edges and selection walk them: every edge must
 * be on the chain of its from node, once, in increasing order, nout of them, ending at
 * last_out (a chain longer than nout overflowed the array of choose_edge). */
static int check_chains(const struct graph *g, const char *file)
{
	size_t n = g->g.nnodes, m = g->g.nedges, walked = 0;
	for (size_t i = 0; i < n; i++) {
		const struct mcgs_node *mn = &g->g.nodes[i];
		size_t count = 0, last = MCGS_NONE;
		for (size_t e = mn->first_out; e != MCGS_NONE; e = g->g.edges[e].next_out) {
			if (e >= m || g->g.edges[e].from != i || (last != MCGS_NONE && e <= last) || count == mn->nout)
				return log_error("%s: nodes[%zu]: nout %zu does not match its out-edges (edge %zu)", file, i,
						 mn->nout, e);
			last = e;
			count++;
		}
		if (count != mn->nout || last != mn->last_out)
			return log_error("%s: nodes[%zu]: nout %zu and last_out do not match its %zu out-edges", file, i,
					 mn->nout, count);
		walked += count;
	}
	if (walked != m)
		return log_error("%s: %zu edges, but the nodes' out-edges are %zu of them", file, m, walked);
	return 0;
}

int graph_check(const struct graph *g, const char *file)
{
	size_t n = g->g.nnodes, m = g->g.nedges;
	double evaluations = 0;
	if (n == 0)
		return log_error("%s: the graph has no root", file);
	if (!count_ok((double)g->iter) || !count_ok((double)g->builds) || !count_ok((double)g->last_improvement) ||
	    g->last_improvement > g->iter || !count_ok((double)g->events_len))
		return log_error("%s: iter %ld, builds %ld, last_improvement %ld, events_len %" PRIu64
				 ": not counts in [0, 1e15] with last_improvement at most iter", file, g->iter, g->builds,
				 g->last_improvement, g->events_len);
	if (g->incumbent >= n)
		return log_error("%s: incumbent: %zu is not a node", file, g->incumbent);
	if (!isnan(g->baseline_ms) && !(g->baseline_ms > 0 && isfinite(g->baseline_ms)))
		return log_error("%s: baseline_ms: %g is not a time", file, g->baseline_ms);
	for (size_t i = 0; i < n; i++) {
		const struct mcgs_node *mn = &g->g.nodes[i];
		const struct gnode *gn = &g->nodes[i];
		/* Ranks grow by one from a parent, so they are below the number of nodes. */
		if (mn->rank < 0 || (uint64_t)mn->rank >= n || (i == 0 && mn->rank != 0))
			return log_error("%s: nodes[%zu]: rank %" PRId64 " is not in [0, %zu) (0 for the root)", file, i,
					 mn->rank, n);
		if (!isfinite(mn->u) || !isfinite(mn->q) || !count_ok(mn->n) || mn->n < 1)
			return log_error("%s: nodes[%zu]: u %g, n %g, q %g: not finite, or n not a count of visits", file, i,
					 mn->u, mn->n, mn->q);
		if (gn->failed < 0 || gn->failed > 1 || gn->exhausted < 0 || gn->exhausted > NODE_SPENT ||
		    !count_ok((double)gn->created_iter) || gn->build < 0 || gn->build > g->builds)
			return log_error("%s: nodes[%zu]: failed %d, exhausted %d, created_iter %" PRId64 ", build %" PRId64
					 ": not their values", file, i, gn->failed, gn->exhausted, gn->created_iter, gn->build);
	}
	if (check_chains(g, file) != 0)
		return -1;
	for (size_t i = 0; i < m; i++) {
		const struct mcgs_edge *me = &g->g.edges[i];
		const struct gedge *ge = &g->edges[i];
		/* The rank rule keeps the graph acyclic: backups and walks back to the root end. */
		if (me->to != MCGS_NONE && (me->to >= n || g->g.nodes[me->to].rank <= g->g.nodes[me->from].rank))
			return log_error("%s: edges[%zu]: to %zu is not a node of a higher rank than from %zu", file, i, me->to,
					 me->from);
		if (!count_ok(me->n) || !isfinite(me->prior))
			return log_error("%s: edges[%zu]: n %g, prior %g: not a count of visits, or not finite", file, i, me->n,
					 me->prior);
		if (ge->evaluations != (me->to != MCGS_NONE) || !isfinite(ge->reward_sum) ||
		    !(isfinite(ge->reward_max) || ge->reward_max == -INFINITY))
			return log_error("%s: edges[%zu]: evaluations %" PRId64 ", reward_sum %g, reward_max %g: not an edge %s",
					 file, i, ge->evaluations, ge->reward_sum, ge->reward_max,
					 me->to == MCGS_NONE ? "registered, not evaluated" : "evaluated once");
		if (ge->build < 0 || ge->build > g->builds || (ge->build > 0 && me->to == MCGS_NONE) ||
		    ge->transposition < 0 || ge->transposition > 1)
			return log_error("%s: edges[%zu]: build %" PRId64 ", transposition %d: not a build of the graph's %ld "
					 "(0 when not evaluated) and 0 or 1", file, i, ge->build, ge->transposition, g->builds);
		evaluations += (double)ge->evaluations;
	}
	if (evaluations != (double)g->builds)
		return log_error("%s: builds: %ld, but %g edges are evaluated", file, g->builds, evaluations);
	const struct rollout *r = &g->rollout;
	if (r->active) {
		int ok = r->node < n && count_ok((double)r->steps_left) && count_ok((double)r->step) && isfinite(r->best);
		for (size_t i = 0; ok && i < r->len; i++)
			ok = r->path[i] < m && g->g.edges[r->path[i]].to != MCGS_NONE;
		if (!ok)
			return log_error("%s: rollout: its node, path, steps or best reward are not the graph's", file);
	}
	return 0;
}

/* ---------------------------------------------------------------- JSON */

static cJSON *node_json(const struct graph *g, size_t i)
{
	const struct mcgs_node *m = &g->g.nodes[i];
	const struct gnode *n = &g->nodes[i];
	cJSON *o = cJSON_CreateObject();
	if (!o || !cJSON_AddStringToObject(o, "state", graph_node_state(g, i)) ||
	    !cJSON_AddBoolToObject(o, "failed", n->failed))
		xalloc_die();
	if (n->exhausted)
		json_add_string(o, "exhausted", n->exhausted == NODE_SPENT ? "spent" : "exhausted");
	json_add_number(o, "rank", m->rank);
	json_add_number(o, "u", m->u);
	json_add_number(o, "n", m->n);
	json_add_number(o, "q", m->q);
	json_add_number(o, "median_ms", n->median_ms);
	json_add_number(o, "speedup", n->speedup);
	json_add_number(o, "speedup_lo", n->speedup_lo);
	json_add_number(o, "created_iter", (double)n->created_iter);
	json_add_number(o, "build", (double)n->build);
	if (graph_node_status(g, i))
		json_add_string(o, "status", graph_node_status(g, i));
	if (graph_node_reason(g, i))
		json_add_string(o, "reason", graph_node_reason(g, i));
	const cJSON *config = graph_node_config(g, i);
	json_add(o, "config", config ? cJSON_Duplicate(config, 1) : cJSON_CreateNull());
	json_add(o, "methods", cJSON_Duplicate(graph_node_methods(g, i), 1));
	return o;
}

static cJSON *edge_json(const struct graph *g, size_t i)
{
	const struct mcgs_edge *m = &g->g.edges[i];
	const struct gedge *e = &g->edges[i];
	cJSON *o = cJSON_CreateObject();
	if (!o)
		xalloc_die();
	json_add_number(o, "from", (double)m->from);
	json_add(o, "to", m->to == MCGS_NONE ? cJSON_CreateNull() : cJSON_CreateNumber((double)m->to));
	json_add_number(o, "n", m->n);
	json_add_number(o, "prior", m->prior);
	if (!cJSON_AddStringToObject(o, "method", graph_edge_method(g, i)))
		xalloc_die();
	json_add_number(o, "reward_sum", e->reward_sum);
	json_add_number(o, "reward_max", e->reward_max);
	json_add_number(o, "evaluations", (double)e->evaluations);
	json_add_number(o, "build", (double)e->build);
	if (!cJSON_AddBoolToObject(o, "transposition", e->transposition))
		xalloc_die();
	json_add(o, "candidate", cJSON_Duplicate(graph_edge_candidate(g, i), 1));
	return o;
}

cJSON *graph_export(const struct graph *gr)
{
	cJSON *doc = cJSON_CreateObject(), *params = cJSON_CreateObject();
	cJSON *nodes = cJSON_CreateArray(), *edges = cJSON_CreateArray();
	char rng[32];
	snprintf(rng, sizeof(rng), "%016" PRIx64, gr->rng);
	if (!doc || !params || !nodes || !edges || !cJSON_AddNumberToObject(doc, "version", GRAPH_JSON_VERSION) ||
	    !cJSON_AddStringToObject(doc, "kernel", gr->kernel ? gr->kernel : "") ||
	    !cJSON_AddStringToObject(doc, "rng", rng))
		xalloc_die();
	for (size_t k = 0; k < ARRAY_SIZE(param_fields); k++) {
		const char *base = (const char *)&gr->params + param_fields[k].offset;
		json_add_number(params, param_fields[k].name,
			   param_fields[k].is_long ? (double)*(const long *)(const void *)base : *(const double *)(const void *)base);
	}
	if (!cJSON_AddBoolToObject(params, "backup_max", gr->params.backup_max))
		xalloc_die();
	json_add(doc, "params", params);
	json_add_number(doc, "iter", (double)gr->iter);
	json_add_number(doc, "builds", (double)gr->builds);
	json_add_number(doc, "events_len", (double)gr->events_len);
	json_add_number(doc, "last_improvement", (double)gr->last_improvement);
	json_add_number(doc, "incumbent", (double)gr->incumbent);
	json_add_number(doc, "baseline_ms", gr->baseline_ms);
	json_add(doc, "regraph", gr->regraph ? cJSON_CreateString(gr->regraph) : cJSON_CreateNull());
	for (size_t i = 0; i < gr->g.nnodes; i++)
		if (!cJSON_AddItemToArray(nodes, node_json(gr, i)))
			xalloc_die();
	for (size_t i = 0; i < gr->g.nedges; i++)
		if (!cJSON_AddItemToArray(edges, edge_json(gr, i)))
			xalloc_die();
	if (gr->rollout.active) {
		cJSON *r = cJSON_CreateObject(), *path = cJSON_CreateArray();
		if (!r || !path)
			xalloc_die();
		json_add_number(r, "node", (double)gr->rollout.node);
		json_add_number(r, "steps_left", (double)gr->rollout.steps_left);
		json_add_number(r, "step", (double)gr->rollout.step);
		json_add_number(r, "best", gr->rollout.best);
		for (size_t i = 0; i < gr->rollout.len; i++)
			if (!cJSON_AddItemToArray(path, cJSON_CreateNumber((double)gr->rollout.path[i])))
				xalloc_die();
		json_add(r, "path_edges", path);
		json_add(doc, "rollout", r);
	} else {
		json_add(doc, "rollout", cJSON_CreateNull());
	}
	json_add(doc, "nodes", nodes);
	json_add(doc, "edges", edges);
	return doc;
}


/* A count or an index of graph.json as a long: -1 when it is not a whole number in [0,
 * GRAPH_COUNT_MAX] (converting 1e300 would be undefined), which graph_check then reports. */
static long json_count(const cJSON *o, const char *key, double missing)
{
	double v = json_number(o, key, missing);
	return count_ok(v) ? (long)v : -1;
}

static int load_nodes(struct graph *g, const cJSON *nodes, const char *path)
{
	const cJSON *o;
	size_t k = 0;
	cJSON_ArrayForEach(o, nodes) {
		const cJSON *state = cJSON_GetObjectItemCaseSensitive(o, "state");
		if (!cJSON_IsString(state))
			return log_error("%s: nodes[%zu].state: missing", path, k);
		long rank = json_count(o, "rank", 0);
		size_t id = graph_add_node(g, state->valuestring, json_number(o, "u", 0), rank > INT_MAX ? -1 : (int)rank);
		struct gnode *n = &g->nodes[id];
		g->g.nodes[id].n = json_number(o, "n", 0);
		g->g.nodes[id].q = json_number(o, "q", 0);
		n->failed = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(o, "failed"));
		const char *exhausted = json_string(o, "exhausted");
		n->exhausted = !exhausted ? 0 : strcmp(exhausted, "spent") == 0 ? NODE_SPENT : NODE_EXHAUSTED;
		n->median_ms = json_number(o, "median_ms", NAN);
		n->speedup = json_number(o, "speedup", NAN);
		n->speedup_lo = json_number(o, "speedup_lo", NAN);
		n->created_iter = json_count(o, "created_iter", 0);
		n->build = json_count(o, "build", 0); /* a graph.json written before: 0 (graph_unnumbered) */
		const cJSON *config = cJSON_GetObjectItemCaseSensitive(o, "config");
		const cJSON *methods = cJSON_GetObjectItemCaseSensitive(o, "methods");
		graph_node_set_json(g, id, cJSON_IsObject(config) ? cJSON_Duplicate(config, 1) : NULL,
				    cJSON_IsArray(methods) ? cJSON_Duplicate(methods, 1) : cJSON_CreateArray());
		if (json_string(o, "status"))
			graph_node_set_failure(g, id, json_string(o, "status"), json_string(o, "reason"));
		k++;
	}
	return 0;
}

static int load_edges(struct graph *g, const cJSON *edges, const char *path)
{
	const cJSON *o;
	size_t k = 0;
	cJSON_ArrayForEach(o, edges) {
		double from = json_number(o, "from", -1), to = json_number(o, "to", -1);
		const cJSON *method = cJSON_GetObjectItemCaseSensitive(o, "method");
		if (from < 0 || from >= (double)g->g.nnodes || to >= (double)g->g.nnodes)
			return log_error("%s: edges[%zu]: from or to is not a node", path, k);
		size_t id = graph_add_edge(g, (size_t)from, json_number(o, "prior", 0),
					   cJSON_GetObjectItemCaseSensitive(o, "candidate"),
					   cJSON_IsString(method) ? method->valuestring : "");
		g->g.edges[id].to = to < 0 ? MCGS_NONE : (size_t)to;
		g->g.edges[id].n = json_number(o, "n", 0);
		g->edges[id].reward_sum = json_number(o, "reward_sum", 0);
		g->edges[id].reward_max = json_number(o, "reward_max", -INFINITY);
		g->edges[id].evaluations = json_count(o, "evaluations", 0);
		g->edges[id].build = json_count(o, "build", 0);
		g->edges[id].transposition = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(o, "transposition"));
		k++;
	}
	return 0;
}

/* A graph.json (version 1, graph_export's form), for graphs made elsewhere. */
int graph_import(struct graph *g, const char *run)
{
	char *path = run_path(run, RUN_GRAPH_JSON);
	size_t len;
	char *text = file_read_all(path, &len);
	if (!text) {
		int missing = errno == ENOENT;
		if (!missing)
			log_error("cannot read '%s':", path);
		free(path);
		return missing ? 0 : -1;
	}
	cJSON *doc = json_parse_document(path, text, len);
	free(text);
	int rc = -1;
	if (!cJSON_IsObject(doc)) {
		if (doc)
			log_error("%s: not a graph (a JSON object)", path);
	} else if (json_number(doc, "version", 0) != GRAPH_JSON_VERSION) {
		log_error("%s: version %g, but this kg-select reads version %d", path, json_number(doc, "version", 0),
			  GRAPH_JSON_VERSION);
	} else {
		const cJSON *params = cJSON_GetObjectItemCaseSensitive(doc, "params");
		const cJSON *kernel = cJSON_GetObjectItemCaseSensitive(doc, "kernel");
		const cJSON *rng = cJSON_GetObjectItemCaseSensitive(doc, "rng");
		double v[SEARCH_PARAMS_MAX];
		size_t k;
		search_params_export(&g->params, v); /* the defaults, for those it does not give */
		for (k = 0; k < ARRAY_SIZE(param_fields); k++) {
			const cJSON *value = cJSON_GetObjectItemCaseSensitive(params, param_fields[k].name);
			if (cJSON_IsNumber(value))
				v[k] = value->valuedouble;
		}
		v[k] = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(params, "backup_max"));
		char *why = search_params_import(&g->params, v);
		if (why) {
			log_error("%s: params.%s", path, why);
			free(why);
			goto out;
		}
		g->kernel = xstrdup(cJSON_IsString(kernel) ? kernel->valuestring : "");
		g->rng = cJSON_IsString(rng) ? strtoull(rng->valuestring, NULL, 16) : 0;
		g->iter = json_count(doc, "iter", 0);
		g->builds = json_count(doc, "builds", 0);
		/* A graph made elsewhere without the field is taken to know its whole log. */
		g->events_len = (uint64_t)json_count(doc, "events_len", (double)events_size(run));
		g->last_improvement = json_count(doc, "last_improvement", 0);
		g->incumbent = (size_t)json_count(doc, "incumbent", 0);
		g->baseline_ms = json_number(doc, "baseline_ms", NAN);
		const cJSON *regraph = cJSON_GetObjectItemCaseSensitive(doc, "regraph");
		g->regraph = cJSON_IsString(regraph) ? xstrdup(regraph->valuestring) : NULL;
		const cJSON *rollout = cJSON_GetObjectItemCaseSensitive(doc, "rollout"), *item;
		if (cJSON_IsObject(rollout)) {
			const cJSON *edges = cJSON_GetObjectItemCaseSensitive(rollout, "path_edges");
			g->rollout.active = 1;
			g->rollout.node = (size_t)json_count(rollout, "node", 0);
			g->rollout.steps_left = json_count(rollout, "steps_left", 0);
			g->rollout.step = json_count(rollout, "step", 0);
			g->rollout.best = json_number(rollout, "best", 0);
			g->rollout.path = xcalloc((size_t)cJSON_GetArraySize(edges) + 1, sizeof(*g->rollout.path));
			cJSON_ArrayForEach(item, edges)
				g->rollout.path[g->rollout.len++] =
					cJSON_IsNumber(item) && count_ok(item->valuedouble) ? (size_t)item->valuedouble : MCGS_NONE;
		}
		if (load_nodes(g, cJSON_GetObjectItemCaseSensitive(doc, "nodes"), path) == 0 &&
		    load_edges(g, cJSON_GetObjectItemCaseSensitive(doc, "edges"), path) == 0 && graph_check(g, path) == 0)
			rc = 1;
	}
out:
	cJSON_Delete(doc);
	free(path);
	return rc;
}
