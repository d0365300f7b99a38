/* main.c (kg-select): owns a run's search graph. Without --update it chooses what to try
 * next (PUCT with widening); with --update it learns from measured records (rewards, backup). */
#include "common.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <libgen.h>
#include <math.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bottleneck.h"
#include "cli.h"
#include "clock.h"
#include "fileio.h"
#include "graph.h"
#include "jsonl.h"
#include "log.h"
#include "mcgs.h"
#include "parse.h"
#include "regraph.h"
#include "rng.h"
#include "trace.h"
#include "xalloc.h"

/* Exit status when the search is over (budget spent or converged): not an error. */
#define EXIT_SEARCH_DONE 5

/* Where one invocation's time goes, for -v and benchmarks/select.sh. */
static struct {
	double load_ms, decide_ms, save_ms;
} timing;


/* graph_save, timed. */
static int save_graph(struct graph *g)
{
	double t0 = monotonic_ms();
	int rc = graph_save(g);
	timing.save_ms += monotonic_ms() - t0;
	return rc;
}

struct options {
	const char *run;
	const char *regraph;
	const char *pending; /* --pending FILE: records picked already and not learned yet */
	int update;
	int export_json;
	int summary; /* --summary: append the closing summary to RUN/trace.md */
	long batch;
	long fill;	 /* --fill N: candidates the batch should make, judged by the log; 0: off */
	int seed_given;
	uint64_t seed;
	struct search_params params;
	unsigned char given[32]; /* which params were set on the command line */
};

static void usage(FILE *fp)
{
	fputs("Usage: kg-select [OPTION]... RUN\n"
	      "       kg-select --update [OPTION]... RUN [FILE]\n"
	      "       kg-select --export RUN\n"
	      "       kg-select --summary RUN\n"
	      "Monte-Carlo Graph Search over the variants of a run (RUN/graph.bin).\n"
	      "\n"
	      "Without --update, writes what to try next: {\"op\": \"expand\"} for a node that may get\n"
	      "new children (progressive widening: fewer than ceil(k N^alpha); its \"children\" says how\n"
	      "many it may get now), or {\"op\": \"evaluate\"} with the candidate of a registered edge\n"
	      "not yet measured. The path from the root is\n"
	      "chosen by PUCT on Q normalized over each node and its visited children, with\n"
	      "first-play urgency for unvisited edges. When the search is over it writes\n"
	      "{\"op\": \"stop\", \"reason\": \"budget\"|\"converged\"|\"exhausted\"} and exits with\n"
	      "status 5 (exhausted: no node is left with anything new to try).\n"
	      "\n"
	      "With --update, reads finished records (FILE or stdin): the benched baseline creates\n"
	      "the root; a candidate with \"build\" and \"bench\" becomes an evaluated edge whose child\n"
	      "is found by its state (a transposition when it exists and the rank rule allows),\n"
	      "rewarded clip(log2 speedup) or the failure reward, and backed up along its path;\n"
	      "one without \"build\" is registered for later evaluation; an expansion kg-propose\n"
	      "found nothing for (\"propose\": {\"status\": \"empty\"}) is not expanded again.\n"
	      "Each record is written back with an \"update\" object and appended to\n"
	      "RUN/events.jsonl; the incumbent changes only when the candidate's speedup interval\n"
	      "clears it; RUN/best, best.json, trace.md and OUTDIR/regraph_dataset.jsonl\n"
	      "(OUTDIR = RUN/../..) are kept current. A new edge's prior is its candidate's,\n"
	      "weighed by --regraph's statistics and, when the parent's variant has hardware\n"
	      "metrics (variants/STATE/metrics.json), by the moves its bottleneck favours.\n"
	      "\n"
	      "  -u, --update                learn from finished records\n"
	      "  -e, --export                write the graph as one JSON document (graph.json's\n"
	      "                              form, version 1) and change nothing\n"
	      "      --summary               append a closing summary to RUN/trace.md (what was\n"
	      "                              tried by method and proposer, what failed and why, how\n"
	      "                              the best moved, the best variant); kg-tune does at the end\n"
	      "  -b, --batch K               pick K distinct things at once (virtual loss)\n"
	      "      --fill N                pick more than --batch when the picks are expected to\n"
	      "                              make fewer than N candidates: ceil(N / c) picks, at\n"
	      "                              most 16, c the mean candidates per pick in the last\n"
	      "                              200 records of RUN/events.jsonl (kg-iterate gives the\n"
	      "                              compile slots; with no picks logged, --batch alone)\n"
	      "      --pending FILE          FILE holds the records of picks made earlier and not\n"
	      "                              learned yet (kg-propose's output, say): they count as\n"
	      "                              picks of this batch, and their candidates count against\n"
	      "                              the build budget; when they leave nothing to pick,\n"
	      "                              nothing is written (exit 0)\n"
	      "  -s, --seed S                the random state of a new graph (noise, ties)\n"
	      "      --regraph FILE          weigh new edges' priors by method-transition statistics\n"
	      "                              (kg-regraph's regraph.json): P(method | parent's last\n"
	      "                              method) x its success rate; kept in the graph\n"
	      "      --c-puct C              PUCT constant c_init (1.25)\n"
	      "      --c-base B              growth base of c (19652)\n"
	      "      --fpu-reduction R       first-play urgency reduction below the root (0.2)\n"
	      "      --root-fpu-reduction R  first-play urgency reduction at the root (0.1)\n"
	      "      --widen-k K             progressive widening factor (1)\n"
	      "      --widen-alpha A         progressive widening exponent (0.5)\n"
	      "      --reward-clip L         rewards are clipped to [-L, L] (3)\n"
	      "      --failure-reward R      reward of a failed candidate (-3)\n"
	      "      --backup mean|max       what a node's value is (mean)\n"
	      "      --cycle-penalty P       subtracted for a child that repeats a state on the path (0.5)\n"
	      "      --noise EPS             Dirichlet noise weight at the root (0: off)\n"
	      "      --noise-alpha A         total Dirichlet concentration (10.83)\n"
	      "      --improve-pct P         an improvement is at least P %% faster (2)\n"
	      "      --converge K            stop after K iterations without one (0: never)\n"
	      "      --budget-builds N       stop after N evaluated candidates (0: no limit); each\n"
	      "                              pick carries its share of what is left as\n"
	      "                              \"budget_left\", which kg-propose keeps to\n"
	      "      --rollout-depth D       greedy expansions below an improving child (0: none);\n"
	      "                              their picks carry \"rollout\": STEP\n"
	      "      --rollout-epsilon E     rollout exploration (0.1)\n"
	      "      --rollout-lambda L      rollout visit penalty (0.5)\n"
	      "  -q, --quiet                 print errors only\n"
	      "  -v, --verbose               say more on stderr (twice: debug)\n"
	      "  -h, --help                  print this help and exit\n"
	      "  -V, --version               print the version and exit\n"
	      "\n"
	      "Parameters given when the graph is created are stored in it; given later, they\n"
	      "replace the stored ones.\n"
	      "\n"
	      "The graph lives in RUN/graph.bin (records, and a log of what each step changed) and\n"
	      "RUN/graph.blobs (states, configurations, candidates), both for this machine's byte\n"
	      "order; a kill at any moment leaves the previous or the next graph. A run without\n"
	      "graph.bin starts from RUN/graph.json when there is one (what --export writes).\n"
	      "\n"
	      "Exit status: 0 done; 1 some record could not be handled (reported, passed on);\n"
	      "2 usage error; 4 input or output failed; 5 the search is over (budget or\n"
	      "convergence; a {\"op\": \"stop\"} record says which).\n",
	      fp);
}

enum {
	OPT_C_PUCT = 256, OPT_C_BASE, OPT_FPU, OPT_ROOT_FPU, OPT_WIDEN_K, OPT_WIDEN_ALPHA, OPT_CLIP, OPT_FAILURE,
	OPT_BACKUP, OPT_CYCLE, OPT_NOISE, OPT_NOISE_ALPHA, OPT_IMPROVE, OPT_CONVERGE, OPT_BUDGET, OPT_ROLLOUT_DEPTH,
	OPT_ROLLOUT_EPSILON, OPT_ROLLOUT_LAMBDA, OPT_REGRAPH, OPT_PENDING, OPT_FILL, OPT_SUMMARY,
};

static double *param_slot(struct search_params *p, int opt)
{
	switch (opt) {
	case OPT_C_PUCT: return &p->c_init;
	case OPT_C_BASE: return &p->c_base;
	case OPT_FPU: return &p->fpu_reduction;
	case OPT_ROOT_FPU: return &p->root_fpu_reduction;
	case OPT_WIDEN_K: return &p->widen_k;
	case OPT_WIDEN_ALPHA: return &p->widen_alpha;
	case OPT_CLIP: return &p->reward_clip;
	case OPT_FAILURE: return &p->failure_reward;
	case OPT_CYCLE: return &p->cycle_penalty;
	case OPT_NOISE: return &p->noise_epsilon;
	case OPT_NOISE_ALPHA: return &p->noise_alpha;
	case OPT_IMPROVE: return &p->improve_pct;
	case OPT_ROLLOUT_EPSILON: return &p->rollout_epsilon;
	case OPT_ROLLOUT_LAMBDA: return &p->rollout_lambda;
	default: return NULL;
	}
}

static long *long_slot(struct search_params *p, int opt)
{
	switch (opt) {
	case OPT_CONVERGE: return &p->converge_iters;
	case OPT_BUDGET: return &p->budget_builds;
	case OPT_ROLLOUT_DEPTH: return &p->rollout_depth;
	default: return NULL;
	}
}

static void parse_options(int argc, char **argv, struct options *opt)
{
	static const struct option longopts[] = {
		{"backup", required_argument, NULL, OPT_BACKUP},
		{"batch", required_argument, NULL, 'b'},
		{"budget-builds", required_argument, NULL, OPT_BUDGET},
		{"c-base", required_argument, NULL, OPT_C_BASE},
		{"c-puct", required_argument, NULL, OPT_C_PUCT},
		{"converge", required_argument, NULL, OPT_CONVERGE},
		{"cycle-penalty", required_argument, NULL, OPT_CYCLE},
		{"export", no_argument, NULL, 'e'},
		{"failure-reward", required_argument, NULL, OPT_FAILURE},
		{"fill", required_argument, NULL, OPT_FILL},
		{"fpu-reduction", required_argument, NULL, OPT_FPU},
		{"help", no_argument, NULL, 'h'},
		{"improve-pct", required_argument, NULL, OPT_IMPROVE},
		{"noise", required_argument, NULL, OPT_NOISE},
		{"noise-alpha", required_argument, NULL, OPT_NOISE_ALPHA},
		{"pending", required_argument, NULL, OPT_PENDING},
		{"quiet", no_argument, NULL, 'q'},
		{"regraph", required_argument, NULL, OPT_REGRAPH},
		{"reward-clip", required_argument, NULL, OPT_CLIP},
		{"rollout-depth", required_argument, NULL, OPT_ROLLOUT_DEPTH},
		{"rollout-epsilon", required_argument, NULL, OPT_ROLLOUT_EPSILON},
		{"rollout-lambda", required_argument, NULL, OPT_ROLLOUT_LAMBDA},
		{"root-fpu-reduction", required_argument, NULL, OPT_ROOT_FPU},
		{"seed", required_argument, NULL, 's'},
		{"summary", no_argument, NULL, OPT_SUMMARY},
		{"update", no_argument, NULL, 'u'},
		{"verbose", no_argument, NULL, 'v'},
		{"version", no_argument, NULL, 'V'},
		{"widen-alpha", required_argument, NULL, OPT_WIDEN_ALPHA},
		{"widen-k", required_argument, NULL, OPT_WIDEN_K},
		{NULL, 0, NULL, 0},
	};
	const char *why;
	int c, index;
	int64_t i64;
	uint64_t u64;
	opt->batch = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":b:ehqs:uvV", longopts, &index)) != -1) {
		double *d = param_slot(&opt->params, c), lo = 0, hi = 0;
		long *l = long_slot(&opt->params, c);
		/* The ranges a loaded graph's parameters are checked against (each of these options
		 * has one). */
		if (d || l)
			(void)search_param_range(longopts[index].name, &lo, &hi);
		if (d) {
			if ((why = parse_double(optarg, lo, hi, d)))
				cli_usage_error("--%s: '%s': %s", longopts[index].name, optarg, why);
			opt->given[c - OPT_C_PUCT] = 1;
			continue;
		}
		if (l) {
			if ((why = parse_int64(optarg, (int64_t)lo, (int64_t)hi, &i64)))
				cli_usage_error("--%s: '%s': %s", longopts[index].name, optarg, why);
			*l = (long)i64;
			opt->given[c - OPT_C_PUCT] = 1;
			continue;
		}
		switch (c) {
		case OPT_BACKUP:
			if (strcmp(optarg, "mean") != 0 && strcmp(optarg, "max") != 0)
				cli_usage_error("--backup: '%s' is not mean or max", optarg);
			opt->params.backup_max = strcmp(optarg, "max") == 0;
			opt->given[c - OPT_C_PUCT] = 1;
			break;
		case OPT_REGRAPH: opt->regraph = optarg; break;
		case OPT_PENDING: opt->pending = optarg; break;
		case 'b':
			if ((why = parse_int64(optarg, 1, 1024, &i64)))
				cli_usage_error("--batch: '%s': %s", optarg, why);
			opt->batch = (long)i64;
			break;
		case OPT_FILL:
			if ((why = parse_int64(optarg, 1, 1024, &i64)))
				cli_usage_error("--fill: '%s': %s", optarg, why);
			opt->fill = (long)i64;
			break;
		case 'h': usage(stdout); exit(cli_finish(KG_EXIT_OK));
		case 'q': log_quieter(); break;
		case 's':
			if ((why = parse_uint64(optarg, UINT64_MAX, &u64)))
				cli_usage_error("--seed: '%s': %s", optarg, why);
			opt->seed = u64;
			opt->seed_given = 1;
			break;
		case 'e': opt->export_json = 1; break;
		case OPT_SUMMARY: opt->summary = 1; break;
		case 'u': opt->update = 1; break;
		case 'v': log_louder(); break;
		case 'V': cli_print_version(); exit(cli_finish(KG_EXIT_OK));
		default: cli_option_error(c, argv);
		}
	}
	if (optind >= argc)
		cli_usage_error("no run directory given");
	opt->run = argv[optind++];
	if (opt->export_json + opt->update + opt->summary > 1)
		cli_usage_error("--%s and --%s do not go together", opt->export_json ? "export" : "update",
				opt->summary ? "summary" : "update");
	const char *other = opt->update ? "--update" : opt->export_json ? "--export" : opt->summary ? "--summary" : NULL;
	if (opt->pending && other)
		cli_usage_error("--pending goes with picking, not with %s", other);
	if (opt->fill && other)
		cli_usage_error("--fill goes with picking, not with %s", other);
	if (optind < argc && !opt->update)
		cli_usage_error("unexpected argument '%s' (only --update reads a file)", argv[optind]);
	if (argc - optind > 1)
		cli_usage_error("unexpected argument '%s'", argv[optind + 1]);
}

/* Options given on this command line replace what the graph stored. */
static void apply_given(struct graph *g, const struct options *opt)
{
	for (int c = OPT_C_PUCT; c <= OPT_ROLLOUT_LAMBDA; c++) {
		if (!opt->given[c - OPT_C_PUCT])
			continue;
		struct search_params *from = (struct search_params *)&opt->params;
		if (param_slot(&g->params, c))
			*param_slot(&g->params, c) = *param_slot(from, c);
		else if (long_slot(&g->params, c))
			*long_slot(&g->params, c) = *long_slot(from, c);
		else if (c == OPT_BACKUP)
			g->params.backup_max = opt->params.backup_max;
	}
}

/* ---------------------------------------------------------------- records */





static const char *last_method(const struct graph *g, size_t node)
{
	const cJSON *m = graph_node_methods(g, node);
	int n = cJSON_GetArraySize(m);
	const cJSON *last = n > 0 ? cJSON_GetArrayItem(m, n - 1) : NULL;
	return cJSON_IsString(last) ? last->valuestring : "init";
}

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
		dirichlet_sample(&g->rng, p->noise_alpha / (double)k, k, eta);
		dirichlet_mix(prior, eta, k, p->noise_epsilon);
		free(eta);
	}
	normalize_by_parent_and_siblings(n->q, q, visited, k, qhat);
	for (size_t i = 0; i < k; i++) {
		if (!visited[i])
			continue;
		double en = g->g.edges[out[i]].n;
		visited_prior += prior[i];
		weighted += en * qhat[i];
		visits += en;
	}
	double parent_qhat = visits > 0 ? weighted / visits : 0;
	double fpu = fpu_value(parent_qhat, node == 0 ? p->root_fpu_reduction : p->fpu_reduction, visited_prior);
	double c = puct_c(p->c_init, p->c_base, n->n);
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
		double score = puct_score(visited[i] ? qhat[i] : fpu, c, prior[i], fmax(sum_n, 1), e->n);
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
			size_t limit = widening_limit(n->n > 1 ? n->n : 1, p->widen_k, p->widen_alpha);
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

/* Set while the graph learns again what its log holds beyond it: what those records wrote
 * then (events, trace, dataset rows) is written already. */
static int catching_up;

/* Ends the rollout: one more playout along its path backs its values up to the root. */
static void end_rollout(struct graph *g, const char *why)
{
	struct rollout *r = &g->rollout;
	if (!r->active)
		return;
	mcgs_playout(&g->g, 0, r->path, r->len, 1);
	if (!catching_up) {
		/* a reward is log2 of a speedup */
		char *text = xasprintf("the rollout from here ended (%s) after %ld expansions, best %.2fx", why, r->step,
				       exp2(r->best));
		trace_note(g, g->iter, r->node, text);
		free(text);
	}
	free(r->path);
	memset(r, 0, sizeof(*r));
}

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
		end_rollout(g, "depth reached");
		return NULL;
	}
	if (r->step > 0) {
		size_t e = rollout_edge(g, r->node);
		if (e == MCGS_NONE) {
			end_rollout(g, "no child to go on from");
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

static int write_record(cJSON *record)
{
	int rc = jsonl_write(stdout, record);
	cJSON_Delete(record);
	if (rc)
		return log_error("cannot write the output:");
	return 0;
}

static int stop_reason(const struct graph *g, const char **reason)
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

static int is_empty_expansion(const cJSON *record);

/* What the records of --pending FILE hold: picks made by an earlier kg-select whose results
 * have not reached --update yet (the next iteration is picked while one is in flight). */
struct pending {
	int64_t builds;	 /* builds they will make: candidates, and the budget_left of expansions
			  * kg-propose has not answered yet */
	long open;	 /* records whose results may open new choices (candidates, unanswered expansions) */
	int rollout;	 /* a rollout step is among them: the rollout waits for its result */
	long bad;	 /* lines that could not be read (reported) */
};

/* The edges of a pending record's path_edges, checked to lead from the root to node; returns
 * how many, or -1 when they do not. *edges is the caller's to free. */
static long pending_path(const struct graph *g, const cJSON *record, size_t node, size_t **edges)
{
	const cJSON *list = cJSON_GetObjectItemCaseSensitive(record, "path_edges"), *item;
	size_t n = 0, at = 0;
	*edges = xcalloc((size_t)cJSON_GetArraySize(list) + 1, sizeof(**edges));
	if (!cJSON_IsArray(list))
		return -1;
	cJSON_ArrayForEach(item, list) {
		double e = cJSON_IsNumber(item) ? item->valuedouble : -1;
		if (e < 0 || e >= (double)g->g.nedges || floor(e) != e || g->g.edges[(size_t)e].from != at ||
		    g->g.edges[(size_t)e].to == MCGS_NONE)
			return -1;
		(*edges)[n++] = (size_t)e;
		at = g->g.edges[(size_t)e].to;
	}
	return at == node ? (long)n : -1;
}

/* One pending record: a pick like those of this batch. Its node (expand) or edge (evaluate)
 * is marked picked and its path gets a virtual visit, once per pick however many candidate
 * records it became. Returns 0, or -1 after reporting what is wrong at path:line. */
static int pending_record(struct graph *g, const cJSON *record, const char *path, long line, struct picks *pk,
			  struct pending *pd)
{
	const char *op = json_string(record, "op"), *state = json_string(record, "node");
	if (op && strcmp(op, "stop") == 0)
		return 0; /* the end of an earlier pick's output: nothing in flight */
	int expand = op && strcmp(op, "expand") == 0;
	if (!op)
		return log_at(path, line, "op: missing (a pending record is a pick: expand or evaluate)");
	if (!expand && strcmp(op, "evaluate") != 0)
		return log_at(path, line, "op: '%s' is not a pick (expand or evaluate)", op);
	const cJSON *id = cJSON_GetObjectItemCaseSensitive(record, "node_id");
	if (!cJSON_IsNumber(id))
		return log_at(path, line, "node_id: missing (a pick names its node)");
	if (id->valuedouble < 0 || id->valuedouble >= (double)g->g.nnodes || floor(id->valuedouble) != id->valuedouble)
		return log_at(path, line, "node_id: %g is not a node of the graph", id->valuedouble);
	size_t node = (size_t)id->valuedouble;
	if (state && strcmp(graph_node_state(g, node), state) != 0)
		return log_at(path, line, "node: %s is not the state of node %zu", state, node);
	size_t e = MCGS_NONE;
	if (!expand) {
		const cJSON *edge = cJSON_GetObjectItemCaseSensitive(record, "edge");
		if (!cJSON_IsNumber(edge))
			return log_at(path, line, "edge: missing (an evaluate pick names its edge)");
		if (edge->valuedouble < 0 || edge->valuedouble >= (double)g->g.nedges ||
		    floor(edge->valuedouble) != edge->valuedouble || g->g.edges[(size_t)edge->valuedouble].from != node)
			return log_at(path, line, "edge: %g is not an edge out of node %zu", edge->valuedouble, node);
		e = (size_t)edge->valuedouble;
		if (g->g.edges[e].to != MCGS_NONE)
			return log_at(path, line, "edge %zu was evaluated already: it is not pending", e);
	}
	size_t *edges;
	long len = pending_path(g, record, node, &edges);
	if (len < 0) {
		free(edges);
		return log_at(path, line, "path_edges: not a path of the graph from the root to node %zu", node);
	}
	const cJSON *candidate = cJSON_GetObjectItemCaseSensitive(record, "candidate");
	if (cJSON_IsObject(candidate)) {
		pd->builds++;
		pd->open++;
	} else if (expand && !is_empty_expansion(record)) {
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

/* Reads --pending FILE into pk and pd. Returns KG_EXIT_OK; KG_EXIT_USAGE when it cannot be
 * opened; KG_EXIT_INPUT when a line is bad (each reported with FILE:LINE), so that nothing is
 * picked on a list of what is in flight that cannot be trusted. */
static int read_pending(struct graph *g, const char *path, struct picks *pk, struct pending *pd)
{
	struct jsonl_reader reader;
	if (jsonl_reader_open(&reader, path) != 0)
		return KG_EXIT_USAGE;
	cJSON *record;
	enum jsonl_status st;
	int status = KG_EXIT_OK;
	while ((st = jsonl_next(&reader, &record)) != JSONL_EOF) {
		if (st == JSONL_IO_ERROR) {
			status = KG_EXIT_IO;
			break;
		}
		if (st == JSONL_BAD_LINE) {
			pd->bad++;
			continue;
		}
		if (pending_record(g, record, reader.name, reader.line, pk, pd) != 0)
			pd->bad++;
		cJSON_Delete(record);
	}
	jsonl_reader_release(&reader);
	if (status == KG_EXIT_OK && pd->bad > 0)
		status = KG_EXIT_INPUT;
	return status;
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

/* --fill: the most picks it asks for, and the log records it learns from. */
#define FILL_MAX_BATCH 16
#define FILL_WINDOW 200

/* Where the last n lines of text start (as tail -n counts them: a last line without "\n" is
 * one too), or -1 when text holds fewer. */
static long last_lines_start(const char *text, size_t len, size_t n)
{
	size_t end = len > 0 && text[len - 1] == '\n' ? len - 1 : len, lines = 0;
	for (size_t i = end; i-- > 0;)
		if (text[i] == '\n' && ++lines == n)
			return (long)(i + 1);
	return -1;
}

/* The last n lines of the file at path, in a buffer the caller frees (*len: their length);
 * NULL when it cannot be read. Reads back from the end, not the whole log. */
static char *tail_lines(const char *path, size_t n, size_t *len)
{
	FILE *fp = fopen(path, "rb");
	if (!fp)
		return NULL;
	char *buf = NULL;
	off_t size = fseeko(fp, 0, SEEK_END) == 0 ? ftello(fp) : -1;
	for (off_t want = 64 * 1024; size >= 0; want *= 2) {
		off_t from = size > want ? size - want : 0;
		buf = xrealloc(buf, (size_t)(size - from) + 1);
		if (fseeko(fp, from, SEEK_SET) != 0 || fread(buf, 1, (size_t)(size - from), fp) != (size_t)(size - from)) {
			free(buf);
			buf = NULL;
			break;
		}
		*len = (size_t)(size - from);
		buf[*len] = '\0';
		long start = last_lines_start(buf, *len, n);
		if (start >= 0 || from == 0) {
			if (start > 0) {
				*len -= (size_t)start;
				memmove(buf, buf + start, *len + 1);
			}
			break;
		}
	}
	fclose(fp);
	return buf;
}

static int compare_strings(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The batch --fill asks for: ceil(fill / c) picks, at most FILL_MAX_BATCH, c the mean
 * number of candidates per pick in the last FILL_WINDOW records of the run's log (a pick is
 * an iteration's expand or evaluate of a node or edge, however many records it made; picks
 * that made none ask for the most). 0 when the log has no picks or cannot be read whole. */
static long fill_batch(const struct graph *g, long fill)
{
	char *path = xasprintf("%s/events.jsonl", g->run);
	size_t len = 0, npicks = 0, candidates = 0;
	char *text = tail_lines(path, FILL_WINDOW, &len);
	free(path);
	char **picks = xcalloc(FILL_WINDOW + 1, sizeof(*picks));
	int ok = text != NULL;
	for (char *line = text, *end; ok && line && line < text + len; line = end ? end + 1 : NULL) {
		end = memchr(line, '\n', (size_t)(text + len - line));
		size_t n = end ? (size_t)(end - line) : strlen(line);
		if (strspn(line, " \t\r") >= n)
			continue; /* a blank line */
		cJSON *r = cJSON_ParseWithLength(line, n);
		const char *op = json_string(r, "op");
		ok = r != NULL;
		if (op && (strcmp(op, "expand") == 0 || strcmp(op, "evaluate") == 0) && npicks < FILL_WINDOW) {
			static const char *const keys[] = {"iter", "op", "node_id", "edge"};
			cJSON *key = cJSON_CreateArray();
			for (size_t k = 0; k < ARRAY_SIZE(keys); k++) {
				const cJSON *v = cJSON_GetObjectItemCaseSensitive(r, keys[k]);
				json_append(key, v ? cJSON_Duplicate(v, 1) : cJSON_CreateNull());
			}
			picks[npicks++] = json_text(key);
			cJSON_Delete(key);
			const cJSON *candidate = cJSON_GetObjectItemCaseSensitive(r, "candidate");
			candidates += candidate && !cJSON_IsNull(candidate) && !cJSON_IsFalse(candidate);
		}
		cJSON_Delete(r);
	}
	qsort(picks, npicks, sizeof(*picks), compare_strings);
	size_t distinct = 0;
	for (size_t k = 0; k < npicks; k++)
		distinct += k == 0 || strcmp(picks[k], picks[k - 1]) != 0;
	for (size_t k = 0; k < npicks; k++)
		free(picks[k]);
	free(picks);
	free(text);
	if (!ok || distinct == 0) {
		log_info("%s: --fill %ld: no picks in the log%s", g->run, fill, ok ? "" : " (or a line that is not JSON)");
		return 0;
	}
	double c = (double)candidates / (double)distinct;
	double b = c > 0 ? ceil((double)fill / c) : FILL_MAX_BATCH;
	long batch = b > FILL_MAX_BATCH ? FILL_MAX_BATCH : (long)b;
	log_info("%s: --fill %ld: %.4g candidates per pick in the log: %ld picks", g->run, fill, c, batch);
	return batch;
}

static int run_select(struct graph *g, const struct options *opt)
{
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
	if (left >= 0 && left < batch)
		batch = (long)left;
	cJSON **records = xcalloc((size_t)batch, sizeof(*records));
	size_t n = pick_batch(g, &pk, &pd, batch, records);
	picks_release(g, &pk);
	/* The shares go to the picks made, not to the batch asked for. */
	for (size_t k = 0; k < n; k++) {
		if (left >= 0)
			json_add_number(records[k], "budget_left", (double)(left / (int64_t)n + ((int64_t)k < left % (int64_t)n)));
		if (write_record(records[k]))
			status = KG_EXIT_IO;
	}
	free(records);
	if (n == 0 && pd.open > 0) {
		/* Nothing to pick now, but what is in flight may open new choices: not an iteration. */
		g->iter--;
		log_info("%s: nothing to pick while %ld pending records are in flight", g->run, pd.open);
	}
	timing.decide_ms += monotonic_ms() - t0;
	if (save_graph(g))
		return KG_EXIT_IO;
	if (n == 0 && pd.open == 0 && status == KG_EXIT_OK)
		return write_stop(g, "exhausted"); /* every node is a dead end or has nothing new */
	return status;
}

/* ---------------------------------------------------------------- update */

struct updater {
	struct graph *g;
	cJSON *regraph_doc; /* the ReGraph, read when a prior is first needed */
	size_t bottleneck_node;	      /* the node bottleneck is of; MCGS_NONE before the first */
	struct bottleneck bottleneck; /* unclassified unless the node has hardware metrics */
	int exists;
	const char *input_name;
	int status;
	char *outdir;
};

/* Reports a record that cannot be handled; it is passed on unchanged. */
#define record_error(u, line, ...)                                                              \
	((u)->status = (u)->status == KG_EXIT_OK ? KG_EXIT_INPUT : (u)->status,                  \
	 log_at((u)->input_name, (line), __VA_ARGS__))

static int append_line(const char *path, const cJSON *obj)
{
	if (catching_up)
		return 0;
	if (jsonl_append(path, obj) == 0)
		return 0;
	log_warn("cannot append to '%s':", path);
	return -1;
}

/* RUN/best -> variants/STATE, replaced atomically, and RUN/best.json; ci: the interval of
 * the incumbent's speedup as measured (bench.speedup_ci), or NULL. */
static void refresh_best(const struct graph *g, const cJSON *ci)
{
	const struct gnode *n = &g->nodes[g->incumbent];
	char *target = xasprintf("variants/%s", graph_node_state(g, g->incumbent)), *tmp = xasprintf("%s/.best.tmp", g->run);
	char *link = xasprintf("%s/best", g->run), *json_path = xasprintf("%s/best.json", g->run);
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
	if (!catching_up)
		trace_root(g, record);
	return 0;
}

/* The parent node of a candidate record: node_id, checked against node (the state). */
static size_t parent_of(struct updater *u, const cJSON *record, long line)
{
	const struct graph *g = u->g;
	double id = json_number(record, "node_id", NAN);
	const char *state = json_string(record, "node");
	if (!isnan(id)) {
		if (id < 0 || id >= (double)g->g.nnodes || floor(id) != id) {
			record_error(u, line, "node_id: %g is not a node of the graph", id);
			return MCGS_NONE;
		}
		if (state && strcmp(graph_node_state(g, (size_t)id), state) != 0) {
			record_error(u, line, "node: %s is not the state of node %g", state, id);
			return MCGS_NONE;
		}
		return (size_t)id;
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
	const cJSON *list = cJSON_GetObjectItemCaseSensitive(record, "path_edges"), *item;
	size_t n = 0, at = 0;
	*edges = xcalloc((size_t)cJSON_GetArraySize(list) + 1, sizeof(**edges));
	int ok = 1;
	cJSON_ArrayForEach(item, list) {
		double e = cJSON_IsNumber(item) ? item->valuedouble : -1;
		if (e < 0 || e >= (double)g->g.nedges || g->g.edges[(size_t)e].from != at || g->g.edges[(size_t)e].to == MCGS_NONE) {
			ok = 0;
			break;
		}
		(*edges)[n++] = (size_t)e;
		at = g->g.edges[(size_t)e].to;
	}
	if (ok && at == parent)
		return n;
	/* Walk back from parent along any in-edge: ranks decrease, so this ends at the root. */
	size_t depth = (size_t)g->g.nodes[parent].rank, node = parent;
	free(*edges);
	*edges = xcalloc(depth + 1, sizeof(**edges));
	n = 0;
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

static const char *method_of(const cJSON *record)
{
	const cJSON *method = cJSON_GetObjectItemCaseSensitive(record, "method");
	const char *canonical = json_string(method, "canonical");
	if (canonical)
		return canonical;
	const char *named = json_string(cJSON_GetObjectItemCaseSensitive(record, "candidate"), "method");
	return named ? named : "";
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
		char *dir = xasprintf("%s/variants/%s", u->g->run, graph_node_state(u->g, parent));
		char *path = xasprintf("%s/metrics.json", dir), *build_path = xasprintf("%s/build.json", dir);
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
		free(dir);
		free(path);
		free(build_path);
	}
	return bottleneck_edge_factor(&u->bottleneck, method);
}

/* A candidate record: registered (no build yet) or evaluated. */
static int update_candidate(struct updater *u, cJSON *record, long line)
{
	struct graph *g = u->g;
	const struct search_params *p = &g->params;
	size_t parent = parent_of(u, record, line);
	if (parent == MCGS_NONE)
		return -1;
	const cJSON *candidate = cJSON_GetObjectItemCaseSensitive(record, "candidate");
	const cJSON *build = cJSON_GetObjectItemCaseSensitive(record, "build");
	const cJSON *bench = cJSON_GetObjectItemCaseSensitive(record, "bench");
	double edge_id = json_number(record, "edge", NAN);
	size_t e;
	if (!isnan(edge_id)) {
		if (edge_id < 0 || edge_id >= (double)g->g.nedges || g->g.edges[(size_t)edge_id].from != parent)
			return record_error(u, line, "edge: %g is not an edge out of node %zu", edge_id, parent);
		e = (size_t)edge_id;
	} else {
		/* The proposer's prior (a rule's, the model's predicted gain, an LLM's) weighed by what
		 * the ReGraph learned of the move; either alone when the other is missing; then by
		 * what the parent's bottleneck favours (1 without its hardware metrics). */
		double prior = json_number(candidate, "prior", NAN);
		double learned = regraph_prior(u, last_method(g, parent), method_of(record));
		prior = isnan(prior) ? learned : isnan(learned) ? prior : prior * learned;
		prior = (isnan(prior) ? 1 : prior) * bottleneck_factor(u, parent, method_of(record));
		e = graph_add_edge(g, parent, prior, candidate, method_of(record));
	}
	cJSON *upd = json_object();
	json_add_number(upd, "edge", (double)e);
	if (!build) {
		json_add(upd, "registered", cJSON_CreateTrue());
		json_add(record, "update", upd);
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
	double reward = ok ? reward_log2(speedup, 1, p->reward_clip) : p->failure_reward;
	char failed_state[64];
	if (!state) {
		snprintf(failed_state, sizeof(failed_state), "failed:%zu", e);
		state = failed_state;
	}
	size_t child = graph_find_state(g, state, parent);
	int transposition = child != MCGS_NONE;
	if (!transposition) {
		child = graph_add_node(g, state, reward, g->g.nodes[parent].rank + 1);
		struct gnode *n = &g->nodes[child];
		n->failed = !ok;
		n->median_ms = median;
		n->speedup = ok ? speedup : NAN;
		const cJSON *ci = cJSON_GetObjectItemCaseSensitive(bench, "speedup_ci");
		n->speedup_lo = ok ? (cJSON_GetArraySize(ci) == 2 ? cJSON_GetArrayItem(ci, 0)->valuedouble : speedup) : NAN;
		cJSON *methods = cJSON_Duplicate(graph_node_methods(g, parent), 1);
		if (!methods || (graph_edge_method(g, e)[0] && !cJSON_AddItemToArray(methods, cJSON_CreateString(graph_edge_method(g, e)))))
			xalloc_die();
		graph_node_set_json(g, child, cJSON_Duplicate(cJSON_GetObjectItemCaseSensitive(build, "config"), 1), methods);
	}
	g->g.edges[e].to = child;
	g->edges[e].evaluations++;
	g->edges[e].reward_sum += reward;
	g->edges[e].reward_max = fmax(g->edges[e].reward_max, reward);
	g->builds++;

	size_t *path, len = path_to(g, record, parent, &path);
	path = xreallocarray(path, len + 1, sizeof(*path));
	path[len++] = e;
	mcgs_playout(&g->g, 0, path, len, 1);
	if (p->backup_max)
		back_up_max(g, path, len);

	/* The incumbent moves only when the candidate's interval clears it. */
	size_t previous_best = g->incumbent;
	const struct gnode *inc = &g->nodes[g->incumbent];
	const struct gnode *c = &g->nodes[child];
	int better = ok && isfinite(c->speedup_lo) && c->speedup_lo > inc->speedup && child != g->incumbent;
	if (better) {
		if (c->speedup >= inc->speedup * (1 + p->improve_pct / 100))
			g->last_improvement = g->iter;
		g->incumbent = child;
		refresh_best(g, cJSON_GetObjectItemCaseSensitive(bench, "speedup_ci"));
	}
	json_add_number(upd, "reward", reward);
	json_add_string(upd, "child", state);
	json_add_number(upd, "child_id", (double)child);
	json_add(upd, "transposition", cJSON_CreateBool(transposition));
	json_add(upd, "incumbent", cJSON_CreateBool(better));
	json_add_number(upd, "learned_iter", (double)g->iter);
	json_add(record, "update", upd);

	/* One row per evaluated transition, for kg-regraph. */
	char t[40];
	utc_now(t, sizeof(t), 1);
	cJSON *row = json_object();
	json_add_string(row, "t", t);
	json_add_string(row, "kernel", g->kernel);
	json_add_string(row, "arch", json_string(build, "arch") ? json_string(build, "arch") : "");
	json_add_string(row, "from_method", last_method(g, parent));
	json_add_string(row, "to_method", graph_edge_method(g, e)[0] ? graph_edge_method(g, e) : "unknown");
	json_add(row, "ok", cJSON_CreateBool(ok));
	json_add_number(row, "median_ms", median);
	json_add_number(row, "baseline_ms", g->baseline_ms);
	json_add_number(row, "speedup", ok ? speedup : NAN);
	json_add_number(row, "reward", reward);
	json_add_string(row, "candidate_id", json_string(candidate, "id") ? json_string(candidate, "id") : "");
	json_add_string(row, "variant_dir", json_string(build, "dir") ? json_string(build, "dir") : "");
	char *dataset = xasprintf("%s/regraph_dataset.jsonl", u->outdir);
	append_line(dataset, row);
	free(dataset);
	cJSON_Delete(row);

	if (!catching_up) {
		struct trace_step step = {.record = record, .method = graph_edge_method(g, e), .parent = parent,
					  .child = child, .previous_best = previous_best,
					  .transposition = transposition, .better = better};
		trace_candidate(g, &step);
	}

	/* Rollouts: an improving child starts one; a failure ends the one under way. */
	double rollout = json_number(record, "rollout", NAN);
	if (g->rollout.active && rollout > 0) {
		g->rollout.best = fmax(g->rollout.best, reward);
		if (!ok)
			end_rollout(g, "a candidate failed");
	} else if (!g->rollout.active && !(rollout > 0) && ok && p->rollout_depth > 0 && reward > g->g.nodes[parent].u) {
		g->rollout = (struct rollout){.active = 1, .node = child, .steps_left = p->rollout_depth, .best = reward,
					      .path = path, .len = len};
		path = NULL;
	}
	free(path);
	return 0;
}

/* An expansion kg-propose found nothing new for ("propose": {"status": "empty"}): the node
 * is not expanded again. */
static int mark_exhausted(struct updater *u, cJSON *record, long line)
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
	if (!catching_up)
		trace_note(g, (long)json_number(record, "iter", (double)g->iter), node,
			   "nothing new to try from here: not expanded again");
	return 0;
}

static int is_empty_expansion(const cJSON *record)
{
	const char *op = json_string(record, "op");
	const char *status = json_string(cJSON_GetObjectItemCaseSensitive(record, "propose"), "status");
	return op && strcmp(op, "expand") == 0 && status && strcmp(status, "empty") == 0;
}

/* Learns from one finished record; returns whether the graph changed. */
static int apply_record(struct updater *u, cJSON *record, long line)
{
	const cJSON *candidate = cJSON_GetObjectItemCaseSensitive(record, "candidate");
	if (!u->exists)
		return create_root(u, record, line) == 0;
	if (cJSON_IsObject(candidate) &&
	    !cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(record, "build"), "baseline")))
		return update_candidate(u, record, line) == 0;
	if (is_empty_expansion(record))
		return mark_exhausted(u, record, line) == 0;
	return 0;
}

/* The log is appended before the graph is saved, so a kill between the two leaves records in
 * RUN/events.jsonl past what the graph learned (events_len): they are learned again here,
 * before an update and before a pick, so that no pick is made from a graph behind its log
 * (it would hand out builds the log has spent, and edges it has evaluated). The graph keeps
 * a byte offset rather than the ids it has seen: a step seeks to it instead of reading the
 * whole log, and the record boundary it must fall on (a newline) shows a log changed under it. */
static void catch_up_with_log(struct updater *u, const char *events)
{
	struct graph *g = u->g;
	uint64_t size = events_size(g->run);
	if (!u->exists || size == g->events_len)
		return;
	if (size < g->events_len) {
		log_warn("%s: %" PRIu64 " bytes, shorter than the %" PRIu64 " the graph learned from: not read", events, size,
			 g->events_len);
		return;
	}
	FILE *fp = fopen(events, "r");
	int c = EOF;
	if (!fp || fseeko(fp, (off_t)(g->events_len ? g->events_len - 1 : 0), SEEK_SET) != 0 ||
	    (g->events_len && (c = getc(fp)) != '\n')) {
		if (c == EOF)
			log_warn("cannot read '%s':", events);
		else
			log_warn("%s: byte %" PRIu64 ", where the graph's part of it ends, ends no record: not read", events,
				 g->events_len);
		if (fp)
			fclose(fp);
		return;
	}
	log_warn("%s: %" PRIu64 " bytes of the log are not in the graph (a run stopped between the two): learning them again",
		 events, size - g->events_len);
	struct jsonl_reader reader;
	jsonl_reader_init(&reader, fp, events);
	const char *input_name = u->input_name;
	u->input_name = events;
	cJSON *record;
	enum jsonl_status st;
	catching_up = 1;
	while ((st = jsonl_next(&reader, &record)) != JSONL_EOF && st != JSONL_IO_ERROR) {
		if (st == JSONL_RECORD) {
			cJSON_DeleteItemFromObjectCaseSensitive(record, "update");
			apply_record(u, record, reader.line);
			cJSON_Delete(record);
		}
	}
	catching_up = 0;
	u->input_name = input_name;
	jsonl_reader_release(&reader);
	fclose(fp);
	g->events_len = size;
	if (save_graph(g) != 0)
		u->status = KG_EXIT_IO;
}

static void updater_init(struct updater *u, struct graph *g, int exists, const char *input_name)
{
	*u = (struct updater){.g = g, .exists = exists, .input_name = input_name, .bottleneck_node = MCGS_NONE};
	char *copy = xstrdup(g->run), *parent = xstrdup(dirname(copy));
	u->outdir = xstrdup(dirname(parent));
	free(copy);
	free(parent);
}

static void updater_release(struct updater *u)
{
	free(u->outdir);
	cJSON_Delete(u->regraph_doc);
}

/* Before a pick: learns what the log holds beyond the graph (catch_up_with_log). Returns
 * KG_EXIT_OK, or KG_EXIT_IO when the graph could not be saved. */
static int catch_up_before_pick(struct graph *g)
{
	struct updater u;
	updater_init(&u, g, 1, NULL);
	char *events = xasprintf("%s/events.jsonl", g->run);
	catch_up_with_log(&u, events);
	free(events);
	updater_release(&u);
	return u.status == KG_EXIT_IO ? KG_EXIT_IO : KG_EXIT_OK;
}

static int run_update(struct graph *g, int exists, struct jsonl_reader *reader)
{
	struct updater u;
	updater_init(&u, g, exists, reader->name);
	char *events = xasprintf("%s/events.jsonl", g->run);
	catch_up_with_log(&u, events);
	cJSON *record;
	enum jsonl_status st;
	int learning = 1;
	while ((st = jsonl_next(reader, &record)) != JSONL_EOF) {
		if (st == JSONL_IO_ERROR) {
			u.status = KG_EXIT_IO;
			break;
		}
		if (st == JSONL_BAD_LINE) {
			if (u.status == KG_EXIT_OK)
				u.status = KG_EXIT_INPUT;
			continue;
		}
		double t0 = monotonic_ms();
		int changed = learning && apply_record(&u, record, reader->line);
		timing.decide_ms += monotonic_ms() - t0;
		if (changed) {
			/* The log first, then the graph: never a graph ahead of its log. */
			char t[40];
			utc_now(t, sizeof(t), 1);
			cJSON *logged = cJSON_Duplicate(record, 1);
			json_add_string(logged, "t", t);
			if (append_line(events, logged) != 0) {
				/* The graph in memory learned what the log lacks: it is not saved, and
				 * the rest is passed on unlearned; the records still go out. */
				log_error("%s:%ld: not learned: the run's log could not hold it (the graph stays as the log has it)",
					  reader->name, reader->line);
				u.status = KG_EXIT_IO;
				learning = 0;
			}
			cJSON_Delete(logged);
			if (learning) {
				g->events_len = events_size(g->run);
				if (save_graph(g) != 0)
					u.status = KG_EXIT_IO;
			}
		}
		if (jsonl_write(stdout, record) != 0) {
			log_error("cannot write the output:");
			u.status = KG_EXIT_IO;
		}
		cJSON_Delete(record);
	}
	free(events);
	updater_release(&u);
	return u.status;
}

/* --summary: the closing summary of trace.md, with why the search is over, if it is. */
static int write_summary(const struct graph *g)
{
	const char *stopped = NULL;
	if (!stop_reason(g, &stopped) && g->nodes[0].exhausted == NODE_SPENT)
		stopped = "exhausted";
	return trace_summary(g, stopped) == 0 ? KG_EXIT_OK : KG_EXIT_IO;
}

static int export_graph(const struct graph *g)
{
	cJSON *doc = graph_export(g);
	char *text = cJSON_PrintUnformatted(doc);
	if (!text)
		xalloc_die();
	int rc = puts(text) < 0 ? KG_EXIT_IO : KG_EXIT_OK;
	free(text);
	cJSON_Delete(doc);
	return rc;
}

/* Blocks until the reader's stream has data or has ended. */
static void wait_for_input(struct jsonl_reader *reader)
{
	struct pollfd p = {.fd = fileno(reader->fp), .events = POLLIN};
	while (poll(&p, 1, -1) < 0 && errno == EINTR)
		;
}

int main(int argc, char **argv)
{
	struct options opt = {0};
	log_init("kg-select");
	search_params_default(&opt.params);
	parse_options(argc, argv, &opt);

	struct jsonl_reader reader;
	if (opt.update) {
		if (jsonl_reader_open(&reader, optind < argc ? argv[optind] : "-") != 0)
			return cli_finish(KG_EXIT_USAGE);
		/* In kg-select RUN | ... | kg-select --update RUN both start at once: the update
		 * must not hold the run's lock before the pick, which feeds it, has taken it. */
		wait_for_input(&reader);
	}
	struct dirlock lock;
	if (dirlock_acquire(&lock, opt.run, 1) != 0) {
		log_error("cannot lock the run '%s':", opt.run);
		if (opt.update)
			jsonl_reader_release(&reader);
		return KG_EXIT_USAGE;
	}
	struct graph g;
	double t0 = monotonic_ms();
	int exists = graph_load(&g, opt.run);
	timing.load_ms = monotonic_ms() - t0;
	int status;
	if (exists < 0) {
		status = KG_EXIT_INPUT;
	} else {
		if (!exists && opt.seed_given)
			g.rng = opt.seed;
		apply_given(&g, &opt);
		if (opt.regraph) {
			free(g.regraph);
			g.regraph = xstrdup(opt.regraph);
			g.regraph_blob = (struct blob){BLOB_NONE, 0};
		}
		if (opt.update) {
			status = run_update(&g, exists, &reader);
		} else if (!exists) {
			log_error("%s: no graph yet: make the root with kg-select --update and the benched baseline (kg-init does this)",
				  opt.run);
			status = KG_EXIT_INPUT;
		} else if (opt.export_json) {
			status = export_graph(&g);
		} else if (opt.summary) {
			if ((status = catch_up_before_pick(&g)) == KG_EXIT_OK)
				status = write_summary(&g);
		} else if ((status = catch_up_before_pick(&g)) == KG_EXIT_OK) {
			status = run_select(&g, &opt);
		}
	}
	log_info("%s: %zu nodes, %zu edges: loaded in %.2f ms, decided in %.2f ms, saved in %.2f ms", opt.run,
		 g.g.nnodes, g.g.nedges, timing.load_ms, timing.decide_ms, timing.save_ms);
	graph_release(&g);
	dirlock_release(&lock);
	if (opt.update)
		jsonl_reader_release(&reader);
	return cli_finish(status);
}
