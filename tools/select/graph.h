/* graph.h: a run's search graph as kg-select keeps it in RUN/graph.json: the MCGS numbers
 * (lib/mcgs) plus what each node and edge is (state, configuration, methods, candidate),
 * the search parameters and the random state, so that any step can stop and resume. */
#ifndef KG_SELECT_GRAPH_H
#define KG_SELECT_GRAPH_H

#include "common.h"

#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "mcgs.h"

/* Every knob of the search; stored in the graph when it is created, so a resumed search
 * goes on with the same ones (options given later override them and are stored). */
struct search_params {
	double c_init, c_base;		/* PUCT: c(N) = c_init + log((N + c_base + 1) / c_base) */
	double fpu_reduction, root_fpu_reduction;
	double widen_k, widen_alpha;	/* a node may have ceil(k N^alpha) children */
	double reward_clip;		/* r = clip(log2 speedup, -clip, clip) */
	double failure_reward;
	int backup_max;			/* back up the best value instead of the mean */
	double cycle_penalty;		/* subtracted from an edge whose child repeats a state on the path */
	double noise_epsilon, noise_alpha; /* Dirichlet noise at the root; epsilon 0: off */
	double improve_pct;		/* an improvement for convergence: at least this much faster */
	long converge_iters;		/* stop after this many iterations without one; 0: never */
	long budget_builds;		/* stop after this many evaluated candidates; 0: no limit */
	double rollout_epsilon, rollout_lambda;
	long rollout_depth;
};

void search_params_default(struct search_params *p);

struct gnode {
	char *state;	    /* the state hash (kg-build's build.state), or "failed:EDGE" */
	int failed;	    /* a candidate that did not build, crashed or was incorrect: a dead end */
	double median_ms, speedup, speedup_lo; /* its measurement; speedup against the baseline */
	cJSON *config;	    /* build.config */
	cJSON *methods;	    /* canonical methods applied from the root to here */
	long created_iter;
};

struct gedge {
	cJSON *candidate;   /* the candidate as proposed (payload for kg-build) */
	char *method;	    /* canonical method (record's method.canonical, or candidate.method) */
	double reward_sum, reward_max;
	long evaluations;
};

/* A rollout in progress: after an improving child, a few greedy expansions below it. */
struct rollout {
	int active;
	size_t node;	   /* the node the next rollout expansion starts from */
	long steps_left;   /* expansions still allowed */
	long step;	   /* expansions made so far */
	double best;	   /* the best reward seen along it */
	size_t *path;	   /* the edges from the root to node */
	size_t len;
};

struct graph {
	char *run;
	char *kernel;
	struct search_params params;
	uint64_t rng;
	long iter;		/* iterations started by kg-select */
	long builds;		/* evaluated candidates */
	long last_improvement;	/* the iteration of the last improvement of the incumbent */
	size_t incumbent;
	double baseline_ms;
	char *regraph;		/* --regraph: method-transition statistics for edge priors, or NULL */
	struct rollout rollout;
	struct mcgs g;		/* node 0 is the root */
	struct gnode *nodes;	/* parallel to g.nodes */
	struct gedge *edges;	/* parallel to g.edges */
	size_t cap_nodes, cap_edges;
};

/* Loads RUN/graph.json into g. Returns 1 when loaded, 0 when there is none yet, -1 after
 * reporting a damaged file. */
int graph_load(struct graph *g, const char *run);
/* Writes RUN/graph.json atomically. Returns 0, or -1 after reporting. */
int graph_save(const struct graph *g);
void graph_init(struct graph *g, const char *run);
void graph_release(struct graph *g);

size_t graph_add_node(struct graph *g, const char *state, double u, int rank);
size_t graph_add_edge(struct graph *g, size_t from, double prior, const cJSON *candidate, const char *method);
/* The node of that state reachable from parent by the rank rule, or MCGS_NONE. */
size_t graph_find_state(const struct graph *g, const char *state, size_t parent);

#endif
