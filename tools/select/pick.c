/* pick.c (kg-select): the picker. Descends the graph by PUCT with progressive widening and
 * writes what to try next (expand, evaluate), a rollout's next expansion, or the stop record. */
#include "common.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "events.h"
#include "graph.h"
#include "jsonl.h"
#include "log.h"
#include "mcgs.h"
#include "pick.h"
#include "rng.h"
#include "run.h"
#include "step.h"
#include "stream.h"
#include "trace.h"
#include "xalloc.h"

/* ---------------------------------------------------------------- records */

/* The common part of what kg-select writes about a node reached by path. */
static cJSON *pick_record(const struct graph *g, const char *op, size_t node, const size_t *path, size_t len)
{
	cJSON *r = json_object(), *states = cJSON_CreateArray(), *edges = cJSON_CreateArray();
	json_add_number(r, "v", 1);
	json_add_string(r, "run", g->run);
	json_add_string(r, "kernel", g->kernel);
	json_add_number(r, "iter", (double)g->iter);
	json_add_string(r, "op", op);
	json_add_string(r, "node", graph_node_state(g, node));
	json_add_number(r, "node_id", (double)node);
	if (!states || !edges || !cJSON_AddItemToArray(states, cJSON_CreateString(graph_node_state(g, 0))))
		xalloc_die();
	for (size_t i = 0; i < len; i++)
		if (!cJSON_AddItemToArray(states, cJSON_CreateString(graph_node_state(g, g->g.edges[path[i]].to))) ||
		    !cJSON_AddItemToArray(edges, cJSON_CreateNumber((double)path[i])))
			xalloc_die();
	json_add(r, "path", states);
	json_add(r, "path_edges", edges);
	json_add_number(r, "depth", (double)len);
	json_add_number(r, "rollout", 0);
	const cJSON *config = graph_node_config(g, node);
	json_add(r, "config", config ? cJSON_Duplicate(config, 1) : cJSON_CreateNull());
	json_add(r, "methods", cJSON_Duplicate(graph_node_methods(g, node), 1));
	json_add_string(r, "last_method", last_method(g, node));
	return r;
}

/* ---------------------------------------------------------------- selection */

struct picks {
	size_t *expanded;  /* nodes already picked for expansion in this batch */
	size_t nexpanded;
	size_t *evaluated; /* edges already picked for evaluation */
	size_t nevaluated;
	size_t *virtual_edges; /* visits added for virtual loss, removed after the batch */
	size_t nvirtual;
	size_t *blocked;   /* edges into subtrees with nothing left to pick in this batch */
	size_t nblocked;
};

static int contains(const size_t *list, size_t n, size_t x)
{
	for (size_t i = 0; i < n; i++)
		if (list[i] == x)
			return 1;
	return 0;
}

static void push(size_t **list, size_t *n, size_t x)
{
	*list = xreallocarray(*list, *n + 1, sizeof(**list));
	(*list)[(*n)++] = x;
}

static int state_on_path(const struct graph *g, const size_t *path, size_t len, const char *state)
{
	if (strcmp(graph_node_state(g, 0), state) == 0)
		return 1;
	for (size_t i = 0; i < len; i++)
		if (strcmp(graph_node_state(g, g->g.edges[path[i]].to), state) == 0)
			return 1;
	return 0;
}

/* PUCT over the out-edges of node; returns the chosen edge, or MCGS_NONE when none can be
 * taken (every edge leads to a dead end or was picked in this batch). */
static size_t choose_edge(struct graph *g, size_t node, const size_t *path, size_t len, const struct picks *pk)
{
	const struct mcgs_node *n = &g->g.nodes[node];
	const struct search_params *p = &g->params;
	size_t k = n->nout;
	if (k == 0)
		return MCGS_NONE;
	size_t *out = xcalloc(k, sizeof(*out));
	mcgs_out_edges(&g->g, node, out);
	double *q = xcalloc(k, sizeof(*q)), *qhat = xcalloc(k, sizeof(*qhat)), *prior = xcalloc(k, sizeof(*prior));
	int *visited = xcalloc(k, sizeof(*visited));
	double sum_n = 0, visited_prior = 0, weighted = 0, visits = 0, prior_total = 0;
	for (size_t i = 0; i < k; i++) {
		const struct mcgs_edge *e = &g->g.edges[out[i]];
		visited[i] = e->to != MCGS_NONE && e->n > 0;
		q[i] = visited[i] ? g->g.nodes[e->to].q : 0;
		prior[i] = e->prior;
		prior_total += e->prior;
		sum_n += e->n;
	}
	for (size_t i = 0; i < k; i++)
		prior[i] = prior_total > 0 ? prior[i] / prior_total : 1.0 / (double)k;
	if (node == 0 && p->noise_epsilon > 0) {
		double *eta = xcalloc(k, sizeof(*eta));
		mcgs_dirichlet_sample(&g->rng, p->noise_alpha / (double)k, k, eta);
		mcgs_dirichlet_mix(prior, eta, k, p->noise_epsilon);
		free(eta);
	}
	mcgs_normalize_by_parent_and_siblings(n->q, q, visited, k, qhat);
	for (size_t i = 0; i < k; i++) {
		if (!visited[i])
			continue;
		double en = g->g.edges[out[i]].n;
		visited_prior += prior[i];
		weighted += en * qhat[i];
		visits += en;
	}
	double parent_qhat = visits > 0 ? weighted / visits : 0;
	double fpu = mcgs_fpu_value(parent_qhat, node == 0 ? p->root_fpu_reduction : p->fpu_reduction, visited_prior);
	double c = mcgs_puct_c(p->c_init, p->c_base, n->n);
	size_t best = MCGS_NONE;
	double best_score = -INFINITY;
	for (size_t i = 0; i < k; i++) {
		size_t ei = out[i];
		const struct mcgs_edge *e = &g->g.edges[ei];
		if ((e->to == MCGS_NONE && contains(pk->evaluated, pk->nevaluated, ei)) ||
		    contains(pk->blocked, pk->nblocked, ei))
			continue;
		if (e->to != MCGS_NONE && (g->nodes[e->to].failed || g->nodes[e->to].exhausted == NODE_SPENT))
			continue; /* a dead end: nothing below it to try */
		/* max(sum, 1) as lc0 does: before any visit the priors alone must rank the edges. */
		double score = mcgs_puct_score(visited[i] ? qhat[i] : fpu, c, prior[i], fmax(sum_n, 1), e->n);
		if (e->to != MCGS_NONE && state_on_path(g, path, len, graph_node_state(g, e->to)))
			score -= p->cycle_penalty;
		if (score > best_score) {
			best_score = score;
			best = ei;
		}
	}
	free(out);
	free(q);
	free(qhat);
	free(prior);
	free(visited);
	return best;
}

/* An expansion of node: "children", the new children the widening allows it now, which
 * kg-propose keeps to (the most promising first), so that they arrive a few at a time. */
static cJSON *expand_record(const struct graph *g, size_t node, const size_t *path, size_t len, size_t children)
{
	cJSON *r = pick_record(g, "expand", node, path, len);
	json_add_number(r, "children", (double)children);
	return r;
}

/* An exhausted node whose every edge is evaluated and leads to a failed or spent node has
 * nothing left below it; its edges never change again, so it stays spent. */
static int spent(const struct graph *g, size_t node)
{
	if (!g->nodes[node].exhausted)
		return 0;
	for (size_t e = g->g.nodes[node].first_out; e != MCGS_NONE; e = g->g.edges[e].next_out) {
		size_t to = g->g.edges[e].to;
		if (to == MCGS_NONE || !(g->nodes[to].failed || g->nodes[to].exhausted == NODE_SPENT))
			return 0;
	}
	return 1;
}

/* One pick: descends from the root and returns the record to write, or NULL when nothing
 * is left to try. A descent that reaches a transposition whose node has more visits than
 * the edge into it backs up there (KataGo's rule) and starts again. */
static cJSON *select_one(struct graph *g, struct picks *pk)
{
	const struct search_params *p = &g->params;
	size_t *path = NULL, len = 0;
	cJSON *record = NULL;
	for (int attempt = 0; attempt < 1000 && !record; attempt++) {
		size_t node = 0;
		int dead_end = 0;
		len = 0;
		for (;;) {
			const struct mcgs_node *n = &g->g.nodes[node];
			size_t limit = mcgs_widening_limit(n->n > 1 ? n->n : 1, p->widen_k, p->widen_alpha);
			int may_expand = !g->nodes[node].exhausted && !contains(pk->expanded, pk->nexpanded, node);
			if (n->nout < limit && may_expand) {
				record = expand_record(g, node, path, len, limit - n->nout);
				push(&pk->expanded, &pk->nexpanded, node);
				break;
			}
			size_t e = choose_edge(g, node, path, len, pk);
			if (e == MCGS_NONE) {
				if (may_expand) {
					record = expand_record(g, node, path, len, 1);
					push(&pk->expanded, &pk->nexpanded, node);
				} else if (spent(g, node)) {
					g->nodes[node].exhausted = NODE_SPENT; /* the next attempt goes elsewhere */
				} else {
					dead_end = 1; /* for this batch: picked already, or its edges are */
				}
				break;
			}
			if (g->g.edges[e].to == MCGS_NONE) {
				record = pick_record(g, "evaluate", node, path, len);
				json_add_number(record, "edge", (double)e);
				json_add(record, "candidate", cJSON_Duplicate(graph_edge_candidate(g, e), 1));
				push(&pk->evaluated, &pk->nevaluated, e);
				break;
			}
			size_t child = g->g.edges[e].to;
			path = xreallocarray(path, len + 1, sizeof(*path));
			path[len++] = e;
			if (g->g.nodes[child].n > g->g.edges[e].n) {
				mcgs_playout(&g->g, 0, path, len, 0);
				break; /* caught up; descend again */
			}
			node = child;
		}
		if (!record && len == 0)
			break; /* the root itself has nothing to offer */
		if (!record && dead_end)
			push(&pk->blocked, &pk->nblocked, path[len - 1]);
	}
	/* Virtual loss: the edges of this pick count as visited until the batch is written. */
	for (size_t i = 0; record && i < len; i++) {
		g->g.edges[path[i]].n += 1;
		push(&pk->virtual_edges, &pk->nvirtual, path[i]);
	}
	free(path);
	return record;
}

/* ---------------------------------------------------------------- rollouts */

/* The child a rollout goes on from: epsilon-greedy on the edge's mean reward minus lambda
 * times its visits (ReGraphT's rule), among the children that did not fail. */
static size_t rollout_edge(struct graph *g, size_t node)
{
	const struct mcgs_node *n = &g->g.nodes[node];
	const struct search_params *p = &g->params;
	size_t *ok = xcalloc(n->nout + 1, sizeof(*ok)), nok = 0, best = MCGS_NONE;
	double best_value = -INFINITY;
	for (size_t e = n->first_out; e != MCGS_NONE; e = g->g.edges[e].next_out) {
		if (g->g.edges[e].to == MCGS_NONE || g->nodes[g->g.edges[e].to].failed)
			continue;
		ok[nok++] = e;
		double mean = g->edges[e].reward_sum / (double)(g->edges[e].evaluations ? g->edges[e].evaluations : 1);
		double value = mean - p->rollout_lambda * g->g.edges[e].n;
		if (value > best_value) {
			best_value = value;
			best = e;
		}
	}
	if (nok > 0 && rng_uniform(&g->rng) < p->rollout_epsilon)
		best = ok[rng_next(&g->rng) % nok];
	free(ok);
	return best;
}

/* The rollout's next expansion, or NULL when none is under way (or it just ended). */
static cJSON *rollout_pick(struct graph *g)
{
	struct rollout *r = &g->rollout;
	if (!r->active)
		return NULL;
	if (r->steps_left <= 0) {
		trace_rollout_end(g, r, "depth reached");
		end_rollout(g);
		return NULL;
	}
	if (r->step > 0) {
		size_t e = rollout_edge(g, r->node);
		if (e == MCGS_NONE) {
			trace_rollout_end(g, r, "no child to go on from");
			end_rollout(g);
			return NULL;
		}
		r->path = xreallocarray(r->path, r->len + 1, sizeof(*r->path));
		r->path[r->len++] = e;
		r->node = g->g.edges[e].to;
	}
	r->step++;
	r->steps_left--;
	cJSON *record = pick_record(g, "expand", r->node, r->path, r->len);
	cJSON_ReplaceItemInObjectCaseSensitive(record, "rollout", cJSON_CreateNumber((double)r->step));
	return record;
}

/* Writes record on stdout and frees it. Returns 0, or -1 when the write failed: not reported
 * here, as lib/stream's contract has it: cli_finish reports the error of standard output,
 * with the system's reason, once. */
static int write_record(cJSON *record)
{
	int rc = jsonl_write(stdout, record);
	cJSON_Delete(record);
	/* A record that could not be printed at all leaves no error on stdout for cli_finish to
	 * report: only memory can be short then (as stream_write has it). */
	if (rc && !ferror(stdout))
		xalloc_die();
	return rc;
}

int stop_reason(const struct graph *g, const char **reason)
{
	const struct search_params *p = &g->params;
	if (p->budget_builds > 0 && g->builds >= p->budget_builds)
		*reason = "budget";
	else if (p->converge_iters > 0 && g->iter - g->last_improvement >= p->converge_iters)
		*reason = "converged";
	else
		return 0;
	return 1;
}

/* {"op": "stop"}: the search is over, and why. */
static int write_stop(const struct graph *g, const char *reason)
{
	cJSON *stop = json_object();
	json_add_number(stop, "v", 1);
	json_add_string(stop, "run", g->run);
	json_add_string(stop, "kernel", g->kernel);
	json_add_string(stop, "op", "stop");
	json_add_string(stop, "reason", reason);
	json_add_number(stop, "iter", (double)g->iter);
	json_add_number(stop, "builds", (double)g->builds);
	json_add_string(stop, "incumbent", graph_node_state(g, g->incumbent));
	json_add_number(stop, "speedup", g->nodes[g->incumbent].speedup);
	log_info("%s: the search is over (%s) after %ld iterations and %ld builds", g->run, reason, g->iter, g->builds);
	return write_record(stop) ? KG_EXIT_IO : EXIT_SEARCH_DONE;
}

/* ---------------------------------------------------------------- pending picks */

/* What the records of --pending FILE hold: picks made by an earlier kg-select whose results
 * have not reached --update yet (the next iteration is picked while one is in flight). */
struct pending {
	int64_t builds;	 /* builds they will make: candidates, and the budget_left of expansions
			  * kg-propose has not answered yet */
	long open;	 /* records whose results may open new choices (candidates, unanswered expansions) */
	int rollout;	 /* a rollout step is among them: the rollout waits for its result */
};

/* Reports why (node_problem's, edge_problem's) for the record of s and frees it. Returns -1. */
static int report_problem(struct stream *s, char *why)
{
	stream_error(s, s->in.line, "%s", why);
	free(why);
	return -1;
}

/* One pending record: a pick like those of this batch. Its node (expand) or edge (evaluate)
 * is marked picked and its path gets a virtual visit, once per pick however many candidate
 * records it became. Returns 0, or -1 after reporting what is wrong (stream_error: at
 * FILE:LINE, ranked KG_EXIT_INPUT). */
static int pending_record(struct stream *s, struct graph *g, const cJSON *record, struct picks *pk,
			  struct pending *pd)
{
	const char *op = json_string(record, "op"), *state = json_string(record, "node");
	if (op && strcmp(op, "stop") == 0)
		return 0; /* the end of an earlier pick's output: nothing in flight */
	int expand = op && strcmp(op, "expand") == 0;
	if (!op)
		return stream_error(s, s->in.line, "op: missing (a pending record is a pick: expand or evaluate)");
	if (!expand && strcmp(op, "evaluate") != 0)
		return stream_error(s, s->in.line, "op: '%s' is not a pick (expand or evaluate)", op);
	const cJSON *id = cJSON_GetObjectItemCaseSensitive(record, "node_id");
	if (!cJSON_IsNumber(id))
		return stream_error(s, s->in.line, "node_id: missing (a pick names its node)");
	size_t node, e = MCGS_NONE;
	char *why = node_problem(g, id->valuedouble, state, &node);
	if (why)
		return report_problem(s, why);
	if (!expand) {
		const cJSON *edge = cJSON_GetObjectItemCaseSensitive(record, "edge");
		if (!cJSON_IsNumber(edge))
			return stream_error(s, s->in.line, "edge: missing (an evaluate pick names its edge)");
		if ((why = edge_problem(g, edge->valuedouble, node, 1, &e)))
			return report_problem(s, why);
		if (g->g.edges[e].to != MCGS_NONE)
			return stream_error(s, s->in.line, "edge %zu was evaluated already: it is not pending", e);
	}
	size_t *edges;
	long len = path_edges(g, record, node, 1, &edges);
	if (len < 0) {
		free(edges);
		return stream_error(s, s->in.line, "path_edges: not a path of the graph from the root to node %zu", node);
	}
	const cJSON *candidate = cJSON_GetObjectItemCaseSensitive(record, "candidate");
	if (cJSON_IsObject(candidate)) {
		pd->builds++;
		pd->open++;
	} else if (expand && event_kind(record) != EVENT_EXHAUSTED) {
		/* Not answered yet (it may make up to its share), or kg-propose failed on it (its
		 * node may be expanded again once it is no longer pending). */
		double share = cJSON_HasObjectItem(record, "propose") ? 0 : json_number(record, "budget_left", 0);
		pd->builds += share > 0 ? (int64_t)share : 0;
		pd->open++;
	}
	if (json_number(record, "rollout", 0) > 0)
		pd->rollout = 1;
	int seen = expand ? contains(pk->expanded, pk->nexpanded, node) : contains(pk->evaluated, pk->nevaluated, e);
	if (!seen) {
		if (expand)
			push(&pk->expanded, &pk->nexpanded, node);
		else
			push(&pk->evaluated, &pk->nevaluated, e);
		for (long i = 0; i < len; i++) {
			g->g.edges[edges[i]].n += 1;
			push(&pk->virtual_edges, &pk->nvirtual, edges[i]);
		}
	}
	free(edges);
	return 0;
}

struct pending_reader {
	struct graph *g;
	struct picks *pk;
	struct pending *pd;
};

static enum stream_action take_pending(struct stream *s, cJSON *record, void *ctx)
{
	struct pending_reader *r = ctx;
	pending_record(s, r->g, record, r->pk, r->pd);
	cJSON_Delete(record);
	return STREAM_TAKEN;
}

/* Reads --pending FILE into pk and pd. Returns KG_EXIT_OK; KG_EXIT_USAGE when it cannot be
 * opened; KG_EXIT_INPUT when a line is bad (each reported with FILE:LINE), so that nothing is
 * picked on a list of what is in flight that cannot be trusted. */
static int read_pending(struct graph *g, const char *path, struct picks *pk, struct pending *pd)
{
	struct stream s;
	if (stream_open(&s, path, NULL) != 0)
		return KG_EXIT_USAGE;
	struct pending_reader r = {.g = g, .pk = pk, .pd = pd};
	stream_each(&s, take_pending, &r);
	stream_release(&s);
	return s.status;
}

/* ---------------------------------------------------------------- picking */

static void picks_release(struct graph *g, struct picks *pk)
{
	for (size_t i = 0; i < pk->nvirtual; i++)
		g->g.edges[pk->virtual_edges[i]].n -= 1;
	free(pk->expanded);
	free(pk->evaluated);
	free(pk->virtual_edges);
	free(pk->blocked);
	memset(pk, 0, sizeof(*pk));
}

/* Up to max picks of one batch into records; returns how many. The rollout under way gives
 * the first, unless its previous step is still pending (its next step needs that result). */
static size_t pick_batch(struct graph *g, struct picks *pk, const struct pending *pd, long max, cJSON **records)
{
	size_t n = 0;
	for (long k = 0; k < max; k++) {
		cJSON *record = k == 0 && !pd->rollout ? rollout_pick(g) : NULL;
		if (record && contains(pk->expanded, pk->nexpanded, g->rollout.node)) {
			/* A transposition made the rollout's node one a pending pick expands already:
			 * that expansion serves as this step. */
			cJSON_Delete(record);
			record = NULL;
		} else if (record) {
			push(&pk->expanded, &pk->nexpanded, g->rollout.node);
		}
		if (!record)
			record = select_one(g, pk);
		if (!record)
			break;
		records[n++] = record;
	}
	return n;
}

/* When the picks in flight leave nothing else, the nodes they expand may be expanded again:
 * kg-propose proposes around their records in flight (--pending), so the GPUs get more to
 * measure rather than wait for them. At a search's start the root's initial design is all
 * there is, and the iterations picked around it found nothing: the GPUs measured it, then
 * waited for the next pick and its first compile. Edges in flight stay picked. */
static size_t pick_again(struct graph *g, struct picks *pk, const struct pending *pd, long max, cJSON **records)
{
	free(pk->expanded);
	free(pk->blocked);
	pk->expanded = pk->blocked = NULL;
	pk->nexpanded = pk->nblocked = 0;
	size_t n = pick_batch(g, pk, pd, max, records);
	if (n)
		log_info("%s: nothing else to pick: nodes in flight expanded again: %zu", g->run, n);
	return n;
}

/* --fill: the most picks it asks for, and the log records it learns from. */
#define FILL_MAX_BATCH 16
#define FILL_WINDOW 200

static int compare_strings(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The batch --fill asks for: ceil(fill / c) picks, at most FILL_MAX_BATCH, c the mean
 * number of candidates per pick in the last FILL_WINDOW records of the run's log (a pick is
 * an iteration's expand or evaluate of a node or edge, however many records it made; picks
 * that made none ask for the most). A bad line is reported and left out; 0 when the log has
 * no picks or cannot be read. */
static long fill_batch(const struct graph *g, long fill)
{
	size_t npicks = 0, candidates = 0;
	char **picks = xcalloc(FILL_WINDOW + 1, sizeof(*picks));
	struct events_reader r;
	cJSON *rec;
	events_open_last(&r, g->run, FILL_WINDOW, 0);
	while ((rec = events_next(&r))) {
		const char *op = json_string(rec, "op");
		if (op && (strcmp(op, "expand") == 0 || strcmp(op, "evaluate") == 0) && npicks < FILL_WINDOW) {
			static const char *const keys[] = {"iter", "op", "node_id", "edge"};
			cJSON *key = cJSON_CreateArray();
			for (size_t k = 0; k < ARRAY_SIZE(keys); k++) {
				const cJSON *v = cJSON_GetObjectItemCaseSensitive(rec, keys[k]);
				json_append(key, v ? cJSON_Duplicate(v, 1) : cJSON_CreateNull());
			}
			picks[npicks++] = json_text(key);
			cJSON_Delete(key);
			const cJSON *candidate = cJSON_GetObjectItemCaseSensitive(rec, "candidate");
			candidates += json_given(candidate);
		}
		cJSON_Delete(rec);
	}
	int failed = r.failed;
	events_reader_release(&r);
	qsort(picks, npicks, sizeof(*picks), compare_strings);
	size_t distinct = 0;
	for (size_t k = 0; k < npicks; k++)
		distinct += k == 0 || strcmp(picks[k], picks[k - 1]) != 0;
	for (size_t k = 0; k < npicks; k++)
		free(picks[k]);
	free(picks);
	if (failed || distinct == 0) {
		log_info("%s: --fill %ld: no picks in the log%s", g->run, fill, failed ? " (it cannot be read)" : "");
		return 0;
	}
	double c = (double)candidates / (double)distinct;
	double b = c > 0 ? ceil((double)fill / c) : FILL_MAX_BATCH;
	long batch = b > FILL_MAX_BATCH ? FILL_MAX_BATCH : (long)b;
	log_info("%s: --fill %ld: %.4g candidates per pick in the log: %ld picks", g->run, fill, c, batch);
	return batch;
}

int run_select(struct step *step, const struct pick_options *opt)
{
	struct graph *g = step->g;
	const char *reason;
	if (stop_reason(g, &reason))
		return write_stop(g, reason);
	double t0 = monotonic_ms();
	struct picks pk = {0};
	struct pending pd = {0};
	int status = opt->pending ? read_pending(g, opt->pending, &pk, &pd) : KG_EXIT_OK;
	if (status != KG_EXIT_OK) {
		picks_release(g, &pk);
		return status;
	}
	/* Under a build budget, each pick gets its share of what is left ("budget_left"), so
	 * that kg-propose never makes a batch go past it; pending candidates are spent already. */
	int64_t left = g->params.budget_builds > 0 ? (int64_t)g->params.budget_builds - g->builds - pd.builds : -1;
	if (g->params.budget_builds > 0 && left <= 0) {
		log_info("%s: the %" PRId64 " pending builds take the budget left: nothing to pick until they are learned",
			 g->run, pd.builds);
		picks_release(g, &pk);
		return KG_EXIT_OK;
	}
	g->iter++;
	long batch = opt->batch;
	if (opt->fill) {
		long filled = fill_batch(g, opt->fill);
		if (filled > batch)
			batch = filled;
	}
	cJSON **records = xcalloc((size_t)batch, sizeof(*records));
	size_t n = pick_batch(g, &pk, &pd, batch, records);
	if (n == 0 && pd.open > 0)
		n = pick_again(g, &pk, &pd, batch, records);
	picks_release(g, &pk);
	/* The shares go to the picks made, not to the batch asked for. With fewer builds left
	 * than picks (the budget's end), each pick may make one and the batch "batch_budget" of
	 * them, the first picks that make one taking them (kg-propose keeps to it): a batch cut to
	 * the builds left spent an iteration on each pick that found nothing new, and late in a
	 * search most of them do. */
	int shared = left >= 0 && (int64_t)n > left;
	for (size_t k = 0; k < n; k++) {
		if (shared) {
			json_add_number(records[k], "budget_left", 1);
			json_add_number(records[k], "batch_budget", (double)left);
		} else if (left >= 0) {
			json_add_number(records[k], "budget_left", (double)(left / (int64_t)n + ((int64_t)k < left % (int64_t)n)));
		}
		if (write_record(records[k]))
			status = KG_EXIT_IO;
	}
	free(records);
	if (n == 0 && pd.open > 0) {
		/* Nothing to pick now, but what is in flight may open new choices: not an iteration. */
		g->iter--;
		log_info("%s: nothing to pick while %ld pending records are in flight", g->run, pd.open);
	}
	step->decide_ms += monotonic_ms() - t0;
	if (step_save(step))
		return KG_EXIT_IO;
	if (n == 0 && pd.open == 0 && status == KG_EXIT_OK)
		return write_stop(g, "exhausted"); /* every node is a dead end or has nothing new */
	return status;
}

