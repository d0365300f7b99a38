/* graph.h: a run's search graph as kg-select keeps it (RUN/graph.bin, see snapshot.h): the
 * MCGS numbers (lib/mcgs) plus what each node and edge is (state, configuration, methods,
 * candidate), the search parameters and the random state, so that any step can stop and resume. */
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
/* The parameters as numbers in a fixed order (for graph.bin). */
#define SEARCH_PARAMS_MAX 32
void search_params_export(const struct search_params *p, double v[SEARCH_PARAMS_MAX]);
/* Sets p from v when every number lies in the range its option accepts (a damaged graph's
 * -1e300 or NaN would make the search recurse or loop): NULL, or a message naming the first
 * that does not ("noise_alpha: ..."), which the caller frees; p is then unchanged. */
char *search_params_import(struct search_params *p, const double v[SEARCH_PARAMS_MAX]);
/* The range kg-select's --OPTION (its long name) accepts: 0, or -1 when it sets no parameter. */
int search_param_range(const char *option, double *lo, double *hi);
/* Counters, visits and indices are at most this: exact in a double, far from overflowing. */
#define GRAPH_COUNT_MAX 1e15

/* Where a string or a JSON text lies in RUN/graph.blobs (NUL-terminated there); off is
 * BLOB_NONE until it is stored. */
struct blob {
	uint64_t off, len;
};
#define BLOB_NONE UINT64_MAX

/* Whether b (stored) lies inside blobs of len bytes with room for its NUL: the one range check
 * of a reference, made when graph.bin is loaded (snapshot.c) and when a blob is read. */
static inline int blob_inside(struct blob b, size_t len)
{
	return b.off < len && b.len < len - b.off;
}

/* What a node is besides its MCGS numbers. Plain data, stored as it is in graph.bin; the
 * strings and JSON values live in graph.blobs and are read through the accessors below.
 * Fields are only ever added at the end, so that an older graph.bin's record is a prefix of
 * this one (snapshot.c reads version 4's that way). */
struct gnode {
	double median_ms, speedup, speedup_lo; /* its measurement; speedup against the baseline */
	int64_t created_iter;
	int32_t failed;	     /* a candidate that did not build, crashed or was incorrect: a dead end */
	int32_t exhausted;   /* NODE_EXHAUSTED or NODE_SPENT; 0: may still be expanded */
	uint64_t state_hash; /* fnv1a64 of the state: lookups compare this before the string */
	struct blob state;   /* the state hash (kg-build's build.state), or "failed:EDGE" */
	struct blob config;  /* build.config */
	struct blob methods; /* canonical methods applied from the root to here */
	/* Version 5: what kg-select --draw shows of a node without reading the log. */
	int64_t build;	     /* the evaluated candidate that made it, numbered from 1 in the order
				learned (trace.md's build); 0: the root, or learned before graphs kept it */
	struct blob status;  /* a failed node: the status of the stage that failed (bench.status,
				else build.status, else "failed"); BLOB_NONE otherwise or not known */
	struct blob reason;  /* a failed node: why, on one line as trace.md says it (Markdown);
				BLOB_NONE: none */
};

/* gnode.exhausted: kg-propose found nothing new to try from the node, so it is not expanded
 * again; spent, besides, when every edge out of it is evaluated and leads to a failed or
 * spent node, so selection no longer descends into it. */
enum { NODE_EXHAUSTED = 1, NODE_SPENT = 2 };

struct gedge {
	double reward_sum, reward_max;
	int64_t evaluations;
	struct blob candidate; /* the candidate as proposed (payload for kg-build) */
	struct blob method;    /* canonical method (record's method.canonical, or candidate.method) */
	/* Version 5 (at the end, as gnode's). */
	int64_t build;	       /* its evaluation, numbered as gnode.build; 0: not evaluated, or
				  evaluated before graphs kept it (graph_unnumbered) */
	int32_t transposition; /* its evaluation reached a node made before */
	int32_t spare;	       /* 0: keeps the record free of padding (compared with memcmp) */
};

/* What is not stored as it is: strings not yet in graph.blobs, and parsed JSON values (a
 * loaded graph of 10,000 nodes parses only the few a step uses). */
struct node_cache {
	char *state;
	cJSON *config, *methods;
	char *status, *reason; /* graph_node_set_failure's, until stored */
};

struct edge_cache {
	char *method;
	cJSON *candidate;
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

/* kg-select --update --dry-run: what the update would have written, counted instead of
 * written, for the report at the end (update_report_dry_run). */
struct dry_run {
	long events;	  /* records RUN/events.jsonl would have got */
	long rows;	  /* rows OUTDIR/regraph_dataset.jsonl would have got */
	long trace_lines; /* lines RUN/trace.md would have got */
	char trace_tail[2]; /* the last two bytes trace.md would end with, once trace_lines > 0 */
	long saves;	  /* saves of graph.bin and graph.blobs left out */
	int best;	  /* RUN/best and best.json would have been rewritten */
};

struct graph {
	char *run;
	char *kernel;
	struct search_params params;
	uint64_t rng;
	long iter;		/* iterations started by kg-select */
	long builds;		/* evaluated candidates */
	long last_improvement;	/* the iteration of the last improvement of the incumbent */
	uint64_t events_len;	/* bytes of RUN/events.jsonl the graph has learned from */
	size_t incumbent;
	double baseline_ms;
	char *regraph;		/* --regraph: method-transition statistics for edge priors, or NULL */
	struct blob kernel_blob, regraph_blob;
	struct rollout rollout;
	struct mcgs g;		/* node 0 is the root */
	struct gnode *nodes;	/* parallel to g.nodes */
	struct gedge *edges;	/* parallel to g.edges */
	struct node_cache *node_cache;
	struct edge_cache *edge_cache;
	size_t cap_nodes, cap_edges;
	int arrays_mapped;	/* the four arrays are in the snapshot's map of graph.bin */
	struct dry_run *dry_run; /* --dry-run: nothing is written, what would be is counted; NULL:
				    written (not part of the graph: never stored) */
	const char *blobs;	/* graph.blobs as the snapshot mapped it at load (it owns the map), */
	size_t blobs_len;	/* which the stored blobs point into; NULL, 0: none */
};

/* Imports RUN/graph.json (the form --export writes, and tests/tools/make_graph.py) into g
 * (initialized, empty). Returns 1 when imported, 0 when there is none, -1 after reporting a
 * file that is not a graph. snapshot_load reads graph.bin, and this without one. */
int graph_import(struct graph *g, const char *run);
/* Checks what a loaded graph holds before anything uses it: out-edge chains that match each
 * node's nout and end, edges between nodes with the rank rule, finite values, counters in
 * [0, GRAPH_COUNT_MAX] that agree (builds = the edges' evaluations), an incumbent and a
 * rollout that exist. 0, or -1 after reporting the first problem as "FILE: FIELD: ...". */
int graph_check(const struct graph *g, const char *file);
/* The whole graph as one JSON document (the graph.json schema, version 1). */
cJSON *graph_export(const struct graph *g);
void graph_init(struct graph *g, const char *run);
void graph_release(struct graph *g);

/* Makes room for that many nodes and edges in all. */
void graph_reserve(struct graph *g, size_t nodes, size_t edges);
/* Makes g use arrays it does not own, with room for that many nodes and edges (a graph
 * loaded in place); they move to the heap when they must grow. */
void graph_use_arrays(struct graph *g, struct mcgs_node *mnodes, struct gnode *nodes, size_t cap_nodes,
		      struct mcgs_edge *medges, struct gedge *edges, size_t cap_edges);
size_t graph_add_node(struct graph *g, const char *state, double u, int rank);
size_t graph_add_edge(struct graph *g, size_t from, double prior, const cJSON *candidate, const char *method);
/* The stored text of b in g->blobs, or NULL when b is BLOB_NONE or does not lie there. */
const char *graph_blob_text(const struct graph *g, struct blob b);
/* The strings and JSON values of nodes and edges, parsed on first use; config may be NULL. */
const char *graph_node_state(const struct graph *g, size_t node);
const char *graph_edge_method(const struct graph *g, size_t edge);
const cJSON *graph_node_config(const struct graph *g, size_t node);
const cJSON *graph_node_methods(const struct graph *g, size_t node);
const cJSON *graph_edge_candidate(const struct graph *g, size_t edge);
/* A failed node's status and reason (gnode.status, gnode.reason): NULL when not known. */
const char *graph_node_status(const struct graph *g, size_t node);
const char *graph_node_reason(const struct graph *g, size_t node);
/* Sets them (copied; reason may be NULL). A node learned now gets them stored with its other
 * blobs; one numbered from the log (number_from_log) only in memory, for the drawing. */
void graph_node_set_failure(struct graph *g, size_t node, const char *status, const char *reason);
/* Whether an evaluated edge lacks its build number: the graph learned it before graphs kept
 * them (a graph.bin of version 4, a graph.json written before), and only the log has it. */
int graph_unnumbered(const struct graph *g);
/* Sets the values of a node just added (taking them over): only new nodes get stored blobs. */
void graph_node_set_json(struct graph *g, size_t node, cJSON *config, cJSON *methods);
/* The first node of that state reachable from parent by the rank rule (any node of that
 * state when parent is MCGS_NONE), or MCGS_NONE. */
size_t graph_find_state(const struct graph *g, const char *state, size_t parent);

#endif
