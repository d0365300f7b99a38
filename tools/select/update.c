/* update.c (kg-select): the learner. Learns measured records into the graph (rewards, backup,
 * the incumbent) and keeps the run's log, best, trace and the ReGraph's dataset current. */
#include "common.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bottleneck.h"
#include "clock.h"
#include "events.h"
#include "graph.h"
#include "jsonl.h"
#include "log.h"
#include "mcgs.h"
#include "regraph.h"
#include "run.h"
#include "step.h"
#include "stream.h"
#include "trace.h"
#include "update.h"
#include "xalloc.h"

/* ---------------------------------------------------------------- update */

struct updater {
	struct step *step; /* what it learns into (its graph) and saves through */
	struct graph *g;    /* step->g */
	cJSON *regraph_doc; /* the ReGraph, read when a prior is first needed */
	size_t bottleneck_node;	      /* the node bottleneck is of; MCGS_NONE before the first */
	struct bottleneck bottleneck; /* unclassified unless the node has hardware metrics */
	int exists;
	const char *input_name;
	int status;
	/* RUN's ReGraph dataset (OUTDIR_REGRAPH_DATASET), made once rather than per record */
	char *dataset;
	char *events; /* RUN/events.jsonl, as messages name it */
	/* The dataset row of the evaluated record just learned, or NULL: appended only once the
	 * log holds the record (write_row), so that no row stands for a record the log refused. */
	cJSON *row;
	/* While catching up: the candidate ids of this kernel the dataset has rows for (an
	 * object used as a set), read once; rows of the records learned again that it lacks
	 * (a kill between the log and the row) are written then. */
	cJSON *rows_seen;
};

/* What learning one record did, for recording it. Learning (learn_record) changes the graph,
 * its best and the record's update, whether the record is new or the log's, learned again;
 * recording (trace_learned, row_of) writes what a person and kg-regraph read of it, trace.md
 * once, when the record is new. */
struct learned {
	enum event_kind kind;	 /* EVENT_ROOT, EVENT_EVALUATED, EVENT_REGISTERED or EVENT_EXHAUSTED */
	size_t node;		 /* EVENT_EXHAUSTED: the node not expanded again */
	struct trace_step step;	 /* EVENT_EVALUATED: the candidate's trace.md row */
	size_t edge;		 /* EVENT_EVALUATED: the edge it evaluated */
	int ok;			 /* built and benched ok */
	double median, speedup, reward;
	struct rollout ended;	 /* the rollout a failed candidate ended, for its note (its path
				    freed: NULL); not active when none ended */
};

/* Reports a record that cannot be handled; it is passed on unchanged. */
#define record_error(u, line, ...) report_record(&(u)->status, (u)->input_name, (line), __VA_ARGS__)

/* record_error for what node_problem or edge_problem found; frees why. Returns -1. */
static int report_problem(struct updater *u, long line, char *why)
{
	record_error(u, line, "%s", why);
	free(why);
	return -1;
}

/* RUN/best -> variants/STATE, replaced atomically, and RUN/best.json; ci: the interval of
 * the incumbent's speedup as measured (bench.speedup_ci), or NULL. */
static void refresh_best(const struct graph *g, const cJSON *ci)
{
	if (g->dry_run) {
		g->dry_run->best = 1;
		return;
	}
	const struct gnode *n = &g->nodes[g->incumbent];
	char *target = run_variant_path(NULL, graph_node_state(g, g->incumbent), VARIANT_DIR), *tmp = xasprintf("%s/.best.tmp", g->run);
	char *link = run_path(g->run, RUN_BEST), *json_path = run_path(g->run, RUN_BEST_JSON);
	unlink(tmp);
	if (symlink(target, tmp) != 0 || rename(tmp, link) != 0)
		log_warn("cannot point '%s' at '%s':", link, target);
	cJSON *best = json_object();
	json_add_string(best, "state", graph_node_state(g, g->incumbent));
	json_add_string(best, "dir", target);
	json_add_number(best, "speedup", n->speedup);
	json_add_number(best, "speedup_lo", n->speedup_lo);
	if (cJSON_GetArraySize(ci) == 2)
		json_add(best, "speedup_ci", cJSON_Duplicate(ci, 1));
	json_add_number(best, "median_ms", n->median_ms);
	json_add_number(best, "baseline_ms", g->baseline_ms);
	json_add_number(best, "iter", (double)g->iter);
	const cJSON *config = graph_node_config(g, g->incumbent);
	json_add(best, "config", config ? cJSON_Duplicate(config, 1) : cJSON_CreateNull());
	json_add(best, "methods", cJSON_Duplicate(graph_node_methods(g, g->incumbent), 1));
	if (json_write_file(json_path, best, 1) != 0)
		log_warn("cannot write '%s':", json_path);
	cJSON_Delete(best);
	free(target);
	free(tmp);
	free(link);
	free(json_path);
}

static int create_root(struct updater *u, const cJSON *record, long line)
{
	struct graph *g = u->g;
	const cJSON *build = cJSON_GetObjectItemCaseSensitive(record, "build");
	const cJSON *bench = cJSON_GetObjectItemCaseSensitive(record, "bench");
	const char *state = json_string(build, "state"), *status = json_string(bench, "status");
	if (!cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(build, "baseline")) || !state || !status ||
	    strcmp(status, "ok") != 0)
		return record_error(u, line, "the run has no graph yet: the first record must be the baseline, built and benched ok (kg-init does this)");
	const char *kernel = json_string(record, "kernel");
	char *copy = xstrdup(g->run);
	g->kernel = xstrdup(kernel ? kernel : basename(copy));
	free(copy);
	size_t root = graph_add_node(g, state, 0, 0);
	graph_node_set_json(g, root, cJSON_Duplicate(cJSON_GetObjectItemCaseSensitive(build, "config"), 1),
			    cJSON_CreateArray());
	g->nodes[root].median_ms = g->baseline_ms = json_number(bench, "median_ms", NAN);
	g->nodes[root].speedup = g->nodes[root].speedup_lo = 1;
	mcgs_playout(&g->g, root, NULL, 0, 1);
	g->incumbent = root;
	u->exists = 1;
	refresh_best(g, NULL);
	cJSON *upd = json_object();
	json_add_number(upd, "reward", 0);
	json_add_string(upd, "child", state);
	json_add_number(upd, "child_id", (double)root);
	json_add(upd, "root", cJSON_CreateTrue());
	json_add(upd, "incumbent", cJSON_CreateTrue());
	json_add((cJSON *)record, "update", upd);
	return 0;
}

/* The parent node of a candidate record: node_id, checked against node (the state). */
static size_t parent_of(struct updater *u, const cJSON *record, long line)
{
	const struct graph *g = u->g;
	double id = json_number(record, "node_id", NAN);
	const char *state = json_string(record, "node");
	if (!isnan(id)) {
		size_t node;
		char *why = node_problem(g, id, state, &node);
		if (why) {
			report_problem(u, line, why);
			return MCGS_NONE;
		}
		return node;
	}
	if (!state) /* a candidate from the root (kg-propose --exhaustive, say) */
		return 0;
	size_t node = graph_find_state(g, state, MCGS_NONE);
	if (node == MCGS_NONE)
		record_error(u, line, "node: %s is not in the graph", state);
	return node;
}

/* The edges from the root to parent the record says it took; a path that does not lead
 * there is replaced by the first one found (a record written by hand, say). */
static size_t path_to(const struct graph *g, const cJSON *record, size_t parent, size_t **edges)
{
	long walked = path_edges(g, record, parent, 0, edges);
	if (walked >= 0)
		return (size_t)walked;
	/* Walk back from parent along any in-edge: ranks decrease, so this ends at the root. */
	size_t depth = (size_t)g->g.nodes[parent].rank, node = parent, n = 0;
	free(*edges);
	*edges = xcalloc(depth + 1, sizeof(**edges));
	while (node != 0 && n <= depth) {
		size_t found = MCGS_NONE;
		for (size_t e = 0; e < g->g.nedges && found == MCGS_NONE; e++)
			if (g->g.edges[e].to == node)
				found = e;
		if (found == MCGS_NONE)
			break;
		(*edges)[n++] = found;
		node = g->g.edges[found].from;
	}
	for (size_t i = 0; i < n / 2; i++) {
		size_t t = (*edges)[i];
		(*edges)[i] = (*edges)[n - 1 - i];
		(*edges)[n - 1 - i] = t;
	}
	return n;
}

/* Max backup: a node's value is the best of its own and its children's. */
static void back_up_max(struct graph *g, const size_t *path, size_t len)
{
	for (size_t i = len; i-- > 0;) {
		struct mcgs_node *n = &g->g.nodes[g->g.edges[path[i]].from];
		double best = n->u;
		for (size_t k = n->first_out; k != MCGS_NONE; k = g->g.edges[k].next_out) {
			const struct mcgs_edge *e = &g->g.edges[k];
			if (e->to != MCGS_NONE && e->n > 0)
				best = fmax(best, g->g.nodes[e->to].q);
		}
		n->q = best;
	}
}

/* The ReGraph's weight of a new edge with method `to` out of a node whose last method is
 * `from`: probability x success mean (an unseen transition backs off to the method's overall
 * frequency); NAN without a ReGraph, or for a method it has never seen reached. */
static double regraph_prior(struct updater *u, const char *from, const char *to)
{
	if (!u->g->regraph)
		return NAN;
	if (!u->regraph_doc) {
		int status;
		u->regraph_doc = regraph_load(u->g->regraph, &status);
		if (!u->regraph_doc) {
			log_warn("the ReGraph '%s' is not used: priors stay as given", u->g->regraph);
			u->regraph_doc = cJSON_CreateObject(); /* warned once */
		}
	}
	struct regraph_transition t;
	return regraph_transition(u->regraph_doc, from, to, &t) == 0 ? t.probability * t.success : NAN;
}

/* How the bottleneck of parent weighs a new edge with method (bottleneck_edge_factor). Only a
 * node with hardware metrics (RUN/variants/STATE/metrics.json, kg-bench --metrics) has one:
 * without them the search is what it was, PTX figures alone included (they only temper the
 * priors of moves the kernel has made). A metrics.json that cannot be used is warned about. */
static double bottleneck_factor(struct updater *u, size_t parent, const char *method)
{
	if (u->bottleneck_node != parent) {
		const char *state = graph_node_state(u->g, parent);
		char *path = run_variant_path(u->g->run, state, VARIANT_METRICS);
		char *build_path = run_variant_path(u->g->run, state, VARIANT_BUILD);
		struct bottleneck_metrics m;
		struct strbuf why;
		strbuf_init(&why);
		int have = bottleneck_metrics_load(path, &m, &why);
		if (have < 0)
			log_warn("%s: the priors of its node stay as given", why.buf);
		cJSON *build = have > 0 ? json_read_file(build_path) : NULL;
		bottleneck_classify(have > 0 ? &m : NULL, build, &u->bottleneck);
		if (have > 0)
			log_info("%s: bottleneck %s (confidence %.2f) weighs the priors of new edges", path,
				 bottleneck_class_name(u->bottleneck.kind), u->bottleneck.confidence);
		u->bottleneck_node = parent;
		cJSON_Delete(build);
		strbuf_release(&why);
		free(path);
		free(build_path);
	}
	return bottleneck_edge_factor(&u->bottleneck, method);
}

/* The edge a candidate record took out of parent: the one it names ("edge"), or a new one. */
static int edge_of(struct updater *u, const cJSON *record, long line, size_t parent, size_t *e)
{
	struct graph *g = u->g;
	const cJSON *candidate = cJSON_GetObjectItemCaseSensitive(record, "candidate");
	double edge_id = json_number(record, "edge", NAN);
	if (!isnan(edge_id)) {
		char *why = edge_problem(g, edge_id, parent, 0, e);
		if (why)
			return report_problem(u, line, why);
	} else {
		/* The proposer's prior (a rule's, the model's predicted gain, an LLM's) weighed by what
		 * the ReGraph learned of the move; either alone when the other is missing; then by
		 * what the parent's bottleneck favours (1 without its hardware metrics). */
		double prior = json_number(candidate, "prior", NAN);
		double learned = regraph_prior(u, last_method(g, parent), method_of(record));
		prior = isnan(prior) ? learned : isnan(learned) ? prior : prior * learned;
		prior = (isnan(prior) ? 1 : prior) * bottleneck_factor(u, parent, method_of(record));
		*e = graph_add_edge(g, parent, prior, candidate, method_of(record));
	}
	return 0;
}

/* The node of the variant edge e made (state), added below parent unless it is there already
 * (*transposition); l holds the record's figures. */
static size_t child_of(struct graph *g, size_t parent, size_t e, const char *state, const cJSON *build,
		       const cJSON *bench, const struct learned *l, int *transposition)
{
	size_t child = graph_find_state(g, state, parent);
	*transposition = child != MCGS_NONE;
	if (!*transposition) {
		child = graph_add_node(g, state, l->reward, g->g.nodes[parent].rank + 1);
		struct gnode *n = &g->nodes[child];
		n->failed = !l->ok;
		n->median_ms = l->median;
		n->speedup = l->ok ? l->speedup : NAN;
		const cJSON *ci = cJSON_GetObjectItemCaseSensitive(bench, "speedup_ci");
		n->speedup_lo = l->ok ? (cJSON_GetArraySize(ci) == 2 ? cJSON_GetArrayItem(ci, 0)->valuedouble : l->speedup) : NAN;
		cJSON *methods = cJSON_Duplicate(graph_node_methods(g, parent), 1);
		if (!methods || (graph_edge_method(g, e)[0] && !cJSON_AddItemToArray(methods, cJSON_CreateString(graph_edge_method(g, e)))))
			xalloc_die();
		graph_node_set_json(g, child, cJSON_Duplicate(cJSON_GetObjectItemCaseSensitive(build, "config"), 1), methods);
	}
	return child;
}

/* Keeps with a failed node the status of the stage that failed, as kg-report named it
 * (bench.status, else build.status, else "failed": jq's //), and trace.md's reason, so
 * that kg-select --draw shows it without the log. */
static void keep_failure(struct graph *g, size_t node, const cJSON *record)
{
	const cJSON *bench = cJSON_GetObjectItemCaseSensitive(record, "bench");
	const cJSON *build = cJSON_GetObjectItemCaseSensitive(record, "build");
	const cJSON *status = cJSON_GetObjectItemCaseSensitive(bench, "status");
	if (!json_given(status))
		status = cJSON_GetObjectItemCaseSensitive(build, "status");
	char *reason = trace_failure_reason(record);
	graph_node_set_failure(g, node, cJSON_IsString(status) ? status->valuestring : "failed", reason);
	free(reason);
}

/* Makes child the incumbent when it beat it (RUN/best follows); returns whether it did. The
 * incumbent moves only when the candidate's interval clears it. */
static int move_incumbent(struct graph *g, size_t child, int ok, const cJSON *bench)
{
	const struct search_params *p = &g->params;
	const struct gnode *inc = &g->nodes[g->incumbent];
	const struct gnode *c = &g->nodes[child];
	int better = ok && isfinite(c->speedup_lo) && c->speedup_lo > inc->speedup && child != g->incumbent;
	if (better) {
		if (c->speedup >= inc->speedup * (1 + p->improve_pct / 100))
			g->last_improvement = g->iter;
		g->incumbent = child;
		refresh_best(g, cJSON_GetObjectItemCaseSensitive(bench, "speedup_ci"));
	}
	return better;
}

/* Rollouts: an improving child starts one; a failure ends the one under way (l->ended keeps it
 * for its note). path (the edges from the root to child, len of them) is taken. */
static void learn_rollout(struct graph *g, const cJSON *record, size_t *path, size_t len, struct learned *l)
{
	const struct search_params *p = &g->params;
	size_t parent = l->step.parent, child = l->step.child;
	double rollout = json_number(record, "rollout", NAN);
	if (g->rollout.active && rollout > 0) {
		g->rollout.best = fmax(g->rollout.best, l->reward);
		if (!l->ok) {
			l->ended = g->rollout;
			l->ended.path = NULL;
			end_rollout(g);
		}
	} else if (!g->rollout.active && !(rollout > 0) && l->ok && p->rollout_depth > 0 && l->reward > g->g.nodes[parent].u) {
		g->rollout = (struct rollout){.active = 1, .node = child, .steps_left = p->rollout_depth, .best = l->reward,
					      .path = path, .len = len};
		path = NULL;
	}
	free(path);
}

/* Learns a candidate record: registered (no build yet) or evaluated; l says what it taught. */
static int learn_candidate(struct updater *u, cJSON *record, long line, struct learned *l)
{
	struct graph *g = u->g;
	const struct search_params *p = &g->params;
	size_t parent = parent_of(u, record, line), e;
	if (parent == MCGS_NONE || edge_of(u, record, line, parent, &e))
		return -1;
	const cJSON *build = cJSON_GetObjectItemCaseSensitive(record, "build");
	const cJSON *bench = cJSON_GetObjectItemCaseSensitive(record, "bench");
	cJSON *upd = json_object();
	json_add_number(upd, "edge", (double)e);
	if (!build) {
		json_add(upd, "registered", cJSON_CreateTrue());
		json_add(record, "update", upd);
		l->kind = EVENT_REGISTERED;
		return 0;
	}
	if (g->g.edges[e].to != MCGS_NONE) {
		cJSON_Delete(upd);
		return record_error(u, line, "edge %zu was evaluated already: a record is never evaluated twice", e);
	}
	const char *build_status = json_string(build, "status"), *bench_status = json_string(bench, "status");
	const char *state = json_string(build, "state");
	int ok = build_status && strcmp(build_status, "ok") == 0 && bench_status && strcmp(bench_status, "ok") == 0;
	double speedup = json_number(bench, "speedup", NAN), median = json_number(bench, "median_ms", NAN);
	if (ok && isnan(speedup))
		speedup = g->baseline_ms / median;
	double reward = ok ? mcgs_reward_log2(speedup, 1, p->reward_clip) : p->failure_reward;
	*l = (struct learned){.kind = EVENT_EVALUATED, .edge = e, .ok = ok, .median = median, .speedup = speedup,
			      .reward = reward};
	char failed_state[64];
	if (!state) {
		snprintf(failed_state, sizeof(failed_state), "failed:%zu", e);
		state = failed_state;
	}
	int transposition;
	size_t child = child_of(g, parent, e, state, build, bench, l, &transposition);
	g->g.edges[e].to = child;
	g->edges[e].evaluations++;
	g->edges[e].reward_sum += reward;
	g->edges[e].reward_max = fmax(g->edges[e].reward_max, reward);
	g->builds++;
	g->edges[e].build = g->builds;
	g->edges[e].transposition = transposition;
	if (!transposition) {
		g->nodes[child].build = g->builds;
		if (!ok)
			keep_failure(g, child, record);
	}

	size_t *path, len = path_to(g, record, parent, &path);
	path = xreallocarray(path, len + 1, sizeof(*path));
	path[len++] = e;
	mcgs_playout(&g->g, 0, path, len, 1);
	if (p->backup_max)
		back_up_max(g, path, len);

	size_t previous_best = g->incumbent;
	int better = move_incumbent(g, child, ok, bench);
	json_add_number(upd, "reward", reward);
	json_add_string(upd, "child", state);
	json_add_number(upd, "child_id", (double)child);
	json_add(upd, "transposition", cJSON_CreateBool(transposition));
	json_add(upd, "incumbent", cJSON_CreateBool(better));
	json_add_number(upd, "learned_iter", (double)g->iter);
	json_add(record, "update", upd);
	l->step = (struct trace_step){.record = record, .method = graph_edge_method(g, e), .parent = parent, .child = child,
				      .previous_best = previous_best, .transposition = transposition, .better = better};
	learn_rollout(g, record, path, len, l);
	return 0;
}

/* An evaluated record's dataset row (u->row), for kg-regraph: one per evaluated transition,
 * appended once the log holds the record (write_row). t: when it was learned (the log's time
 * for a record learned again). */
static void row_of(struct updater *u, const cJSON *record, const struct learned *l, const char *t)
{
	const struct graph *g = u->g;
	const cJSON *candidate = cJSON_GetObjectItemCaseSensitive(record, "candidate");
	const cJSON *build = cJSON_GetObjectItemCaseSensitive(record, "build");
	if (l->kind != EVENT_EVALUATED)
		return;
	cJSON_Delete(u->row);
	u->row = json_object();
	json_add_string(u->row, "t", t);
	json_add_string(u->row, "kernel", g->kernel);
	json_add_string(u->row, "arch", json_string(build, "arch") ? json_string(build, "arch") : "");
	json_add_string(u->row, "from_method", last_method(g, l->step.parent));
	json_add_string(u->row, "to_method", graph_edge_method(g, l->edge)[0] ? graph_edge_method(g, l->edge) : "unknown");
	json_add(u->row, "ok", cJSON_CreateBool(l->ok));
	json_add_number(u->row, "median_ms", l->median);
	json_add_number(u->row, "baseline_ms", g->baseline_ms);
	json_add_number(u->row, "speedup", l->ok ? l->speedup : NAN);
	json_add_number(u->row, "reward", l->reward);
	json_add_string(u->row, "candidate_id", json_string(candidate, "id") ? json_string(candidate, "id") : "");
	json_add_string(u->row, "variant_dir", json_string(build, "dir") ? json_string(build, "dir") : "");
}

/* An expansion kg-propose found nothing new for ("propose": {"status": "empty"}): the node
 * is not expanded again. */
static int mark_exhausted(struct updater *u, cJSON *record, long line, struct learned *l)
{
	struct graph *g = u->g;
	size_t node = parent_of(u, record, line);
	if (node == MCGS_NONE)
		return -1;
	if (!g->nodes[node].exhausted)
		g->nodes[node].exhausted = NODE_EXHAUSTED;
	cJSON *upd = json_object();
	json_add_number(upd, "exhausted", (double)node);
	json_add(record, "update", upd);
	l->kind = EVENT_EXHAUSTED;
	l->node = node;
	return 0;
}

/* Appends the row of the record just learned (u->row) to the dataset, once its record is
 * in the log: a measured transition the dataset lacks would be missing from every ReGraph
 * built from it, an I/O error as a failed write of the log is. */
static void write_row(struct updater *u)
{
	if (!u->row)
		return;
	if (u->g->dry_run)
		u->g->dry_run->rows++;
	else if (jsonl_append(u->dataset, u->row) != 0) {
		log_error("cannot append to '%s':", u->dataset);
		u->status = exit_status_merge(u->status, KG_EXIT_IO);
	}
	cJSON_Delete(u->row);
	u->row = NULL;
}

/* While catching up: writes the row of a record learned again unless the dataset has its
 * candidate's row already (the update killed after its row rather than before). */
static void catch_up_row(struct updater *u)
{
	if (!u->row)
		return;
	if (!u->rows_seen) {
		u->rows_seen = json_object();
		FILE *fp = fopen(u->dataset, "r");
		if (fp) {
			struct jsonl_reader reader;
			jsonl_reader_init(&reader, fp, u->dataset);
			cJSON *row;
			enum jsonl_status st;
			while ((st = jsonl_next(&reader, &row)) != JSONL_EOF && st != JSONL_IO_ERROR) {
				const char *kernel = json_string(row, "kernel"), *id = json_string(row, "candidate_id");
				if (st == JSONL_RECORD && kernel && id && strcmp(kernel, u->g->kernel) == 0 &&
				    !cJSON_GetObjectItemCaseSensitive(u->rows_seen, id))
					json_add(u->rows_seen, id, cJSON_CreateTrue());
				cJSON_Delete(row);
			}
			jsonl_reader_release(&reader);
			fclose(fp);
		}
	}
	const char *id = json_string(u->row, "candidate_id");
	if (id[0] && cJSON_GetObjectItemCaseSensitive(u->rows_seen, id)) {
		cJSON_Delete(u->row);
		u->row = NULL;
		return;
	}
	if (id[0])
		json_add(u->rows_seen, id, cJSON_CreateTrue());
	write_row(u);
}

/* Learns from one finished record, into l for its recording; returns whether the graph
 * changed. */
static int learn_record(struct updater *u, cJSON *record, long line, struct learned *l)
{
	*l = (struct learned){.kind = EVENT_OTHER};
	if (!u->exists) {
		l->kind = EVENT_ROOT;
		return create_root(u, record, line) == 0;
	}
	switch (event_kind(record)) {
	case EVENT_EVALUATED:
	case EVENT_REGISTERED:
		return learn_candidate(u, record, line, l) == 0;
	case EVENT_EXHAUSTED:
		return mark_exhausted(u, record, line, l) == 0;
	default:
		return 0;
	}
}

/* trace.md's rows of a record just learned (record: as learned, its update added). */
static void trace_learned(struct updater *u, const cJSON *record, const struct learned *l)
{
	struct graph *g = u->g;
	switch (l->kind) {
	case EVENT_ROOT:
		trace_root(g, record);
		break;
	case EVENT_EVALUATED:
		trace_candidate(g, &l->step);
		trace_rollout_end(g, &l->ended, "a candidate failed");
		break;
	case EVENT_EXHAUSTED:
		trace_note(g, (long)json_number(record, "iter", (double)g->iter), l->node,
			   "nothing new to try from here: not expanded again");
		break;
	default:
		break;
	}
}

/* The log is appended before the graph is saved, so a kill between the two leaves records in
 * RUN/events.jsonl past what the graph learned (events_len): they are learned again here,
 * before an update and before a pick, so that no pick is made from a graph behind its log
 * (it would hand out builds the log has spent, and edges it has evaluated). The graph keeps
 * a byte offset rather than the ids it has seen: a step reads from it instead of the whole
 * log, and the record boundary it must fall on (a newline) shows a log changed under it. */
static void catch_up_with_log(struct updater *u)
{
	struct graph *g = u->g;
	uint64_t size = events_size(g->run);
	/* With no graph yet, a log that holds records (the baseline's root, logged by a kg-init
	 * killed before the graph's first save) is learned from its start, root first. */
	if (size == g->events_len || (!u->exists && size == 0))
		return;
	if (size < g->events_len) {
		log_warn("%s: %" PRIu64 " bytes, shorter than the %" PRIu64 " the graph learned from: not read", u->events,
			 size, g->events_len);
		return;
	}
	struct events_reader r;
	enum events_open_status st = events_open(&r, g->run, g->events_len, EVENTS_NUMBER_TEXTS);
	if (st == EVENTS_NOT_AT_RECORD)
		log_warn("%s: byte %" PRIu64 ", where the graph's part of it ends, ends no record: not read", u->events,
			 g->events_len);
	if (st != EVENTS_OPENED) {
		events_reader_release(&r);
		return;
	}
	log_warn("%s: %" PRIu64 " bytes of the log are not in the graph (a run stopped between the two): learning them again",
		 u->events, size - g->events_len);
	const char *input_name = u->input_name;
	u->input_name = u->events;
	cJSON *record;
	/* What those records wrote then (events, trace) is written already: they are learned, and
	 * only a dataset row that is missing is written, with the time the log gave them. */
	while ((record = events_next(&r))) {
		struct learned l;
		cJSON_DeleteItemFromObjectCaseSensitive(record, "update");
		if (learn_record(u, record, events_line(&r), &l)) {
			char t[40];
			utc_now(t, sizeof(t), 1);
			row_of(u, record, &l, json_string(record, "t") ? json_string(record, "t") : t);
		}
		catch_up_row(u);
		cJSON_Delete(record);
	}
	u->input_name = input_name;
	g->events_len = r.offset;
	events_reader_release(&r);
	if (step_save(u->step) != 0)
		u->status = KG_EXIT_IO;
}

static void updater_init(struct updater *u, struct step *step, int exists, const char *input_name)
{
	struct graph *g = step->g;
	*u = (struct updater){.step = step, .g = g, .exists = exists, .input_name = input_name, .bottleneck_node = MCGS_NONE,
			      .dataset = run_outdir_path(g->run, OUTDIR_REGRAPH_DATASET),
			      .events = run_path(g->run, RUN_EVENTS)};
}

static void updater_release(struct updater *u)
{
	cJSON_Delete(u->regraph_doc);
	cJSON_Delete(u->row);
	cJSON_Delete(u->rows_seen);
	free(u->dataset);
	free(u->events);
}

/* Numbers from one evaluated record of the log (build: its number): its edge and, the first
 * time a record names it, its node, where the graph lacks them. */
static void number_record(struct graph *g, const cJSON *record, int64_t build)
{
	const cJSON *upd = cJSON_GetObjectItemCaseSensitive(record, "update");
	double edge = json_number(upd, "edge", NAN), child = json_number(upd, "child_id", NAN);
	if (!(child >= 0 && child < (double)g->g.nnodes && floor(child) == child))
		return;
	size_t c = (size_t)child;
	if (edge >= 0 && edge < (double)g->g.nedges && floor(edge) == edge) {
		size_t e = (size_t)edge;
		if (g->edges[e].build == 0 && g->g.edges[e].to == c) {
			g->edges[e].build = build;
			g->edges[e].transposition = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(upd, "transposition"));
		}
	}
	if (c != 0 && g->nodes[c].build == 0) {
		g->nodes[c].build = build;
		if (g->nodes[c].failed && !graph_node_status(g, c))
			keep_failure(g, c, record);
	}
}

int number_from_log(struct graph *g)
{
	struct events_reader r;
	cJSON *record;
	int64_t builds = 0;
	int ret = events_open(&r, g->run, 0, EVENTS_MUST_EXIST) == EVENTS_OPENED ? 0 : -1;
	while (ret == 0 && (record = events_next(&r))) {
		/* numbered as kg-report numbered them: each record that names its child, but the root's */
		const cJSON *child = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(record, "update"),
								      "child_id");
		if (cJSON_IsNumber(child) && event_kind(record) != EVENT_ROOT)
			number_record(g, record, ++builds);
		cJSON_Delete(record);
	}
	if (r.failed)
		ret = -1;
	events_reader_release(&r);
	return ret;
}

long run_builds(const struct graph *g)
{
	long builds = g->builds;
	if (events_size(g->run) <= g->events_len)
		return builds;
	struct events_reader r;
	cJSON *record;
	if (events_open(&r, g->run, g->events_len, 0) == EVENTS_OPENED)
		while ((record = events_next(&r))) {
			builds += event_kind(record) == EVENT_EVALUATED;
			cJSON_Delete(record);
		}
	events_reader_release(&r);
	return builds;
}

/* Before a pick: learns what the log holds beyond the graph (catch_up_with_log). Returns
 * KG_EXIT_OK, or KG_EXIT_IO when the graph could not be saved. */
int catch_up_before_pick(struct step *step)
{
	struct updater u;
	updater_init(&u, step, 1, NULL);
	catch_up_with_log(&u);
	updater_release(&u);
	return u.status == KG_EXIT_IO ? KG_EXIT_IO : KG_EXIT_OK;
}

/* What kg-select --update carries from record to record. */
struct update_stream {
	struct updater u;
	int learning; /* 0 once the log could not hold a record: the rest passes on unlearned */
};

/* Learns a record (the log first, then its dataset row, then the graph: never a graph or a
 * row ahead of the log) and passes it on. */
static enum stream_action update_record(struct stream *s, cJSON *record, void *ctx)
{
	struct update_stream *us = ctx;
	struct step *step = us->u.step;
	double t0 = monotonic_ms();
	struct learned l;
	int changed = us->learning && learn_record(&us->u, record, s->in.line, &l);
	if (changed) {
		char t[40];
		utc_now(t, sizeof(t), 1);
		trace_learned(&us->u, record, &l);
		row_of(&us->u, record, &l, t);
	}
	step->decide_ms += monotonic_ms() - t0;
	if (!changed)
		return STREAM_PASS;
	if (step->g->dry_run) {
		step->g->dry_run->events++;
	} else if (events_append(step->g->run, record) != 0) {
		/* The graph in memory learned what the log lacks: it is not saved, and the rest is
		 * passed on unlearned; the records still go out. */
		log_error("%s:%ld: not learned: the run's log could not hold it (the graph stays as the log has it)",
			  s->in.name, s->in.line);
		stream_fail(s, KG_EXIT_IO);
		us->learning = 0;
		cJSON_Delete(us->u.row); /* no row without its record */
		us->u.row = NULL;
	}
	write_row(&us->u);
	if (us->learning) {
		step->g->events_len = events_size(step->g->run);
		if (step_save(step) != 0)
			stream_fail(s, KG_EXIT_IO);
	}
	return STREAM_PASS;
}

void update_report_dry_run(const struct graph *g)
{
	const struct dry_run *d = g->dry_run;
	char *events = run_path(g->run, RUN_EVENTS), *dataset = run_outdir_path(g->run, OUTDIR_REGRAPH_DATASET);
	char *trace = run_path(g->run, RUN_TRACE), *best = run_path(g->run, RUN_BEST), *bin = run_path(g->run, RUN_GRAPH);
	if (d->events)
		log_notice("dry run: %s would get %ld record%s", events, d->events, d->events == 1 ? "" : "s");
	if (d->rows)
		log_notice("dry run: %s would get %ld row%s", dataset, d->rows, d->rows == 1 ? "" : "s");
	if (d->trace_lines)
		log_notice("dry run: %s would get %ld line%s", trace, d->trace_lines, d->trace_lines == 1 ? "" : "s");
	if (d->best)
		log_notice("dry run: %s and best.json would name the incumbent %s (%.2fx)", best,
			 graph_node_state(g, g->incumbent), g->nodes[g->incumbent].speedup);
	if (d->saves)
		log_notice("dry run: %s and graph.blobs would hold %zu nodes, %zu edges, %ld builds", bin, g->g.nnodes,
			 g->g.nedges, g->builds);
	log_notice("dry run: nothing was written%s", d->events || d->saves ? "" : ", and nothing would be");
	free(events);
	free(dataset);
	free(trace);
	free(best);
	free(bin);
}

int run_update(struct step *step, int exists, struct stream *in)
{
	struct update_stream us = {.learning = 1};
	updater_init(&us.u, step, exists, in->in.name);
	catch_up_with_log(&us.u);
	stream_each(in, update_record, &us);
	updater_release(&us.u);
	return exit_status_merge(us.u.status, in->status);
}
