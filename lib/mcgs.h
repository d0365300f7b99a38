/* mcgs.h: the arithmetic of Monte-Carlo Graph Search (docs/search.md): PUCT with first-play
 * urgency, progressive widening, rewards and their normalization, priors from counts, the
 * idempotent backup over a graph, and the bootstrap interval that gates the incumbent.
 * Pure functions and a small graph of numbers; kg-select keeps the rest of a node. Every
 * name this header exports starts with mcgs_ (struct mcgs_node, mcgs_puct_score, ...). */
#ifndef KG_MCGS_H
#define KG_MCGS_H

#include "common.h"

#include <stddef.h>
#include <stdint.h>

/* ---- PUCT (docs/search.md "Selection") */

/* AlphaZero's growing constant: c_init + log((n + c_base + 1) / c_base). */
double mcgs_puct_c(double c_init, double c_base, double n_parent);
/* q_hat + c * prior * sqrt(sum_n) / (1 + n_edge). */
double mcgs_puct_score(double q_hat, double c, double prior, double sum_n, double n_edge);
/* First-play urgency: parent_q - reduction * sqrt(visited_prior). */
double mcgs_fpu_value(double parent_q, double reduction, double visited_prior);

/* ---- Progressive widening ("Selection") */

/* ceil(k * visits^alpha): how many children a node may have after that many visits; 0 when
 * that is not positive (or NaN), and at most 2^53. */
size_t mcgs_widening_limit(double visits, double k, double alpha);

/* ---- Rewards ("Rewards", "Selection") */

/* clip(log2(t_ref / t), -clip, clip). */
double mcgs_reward_log2(double t_ref, double t, double clip);
/* Min-max over the parent's value and its visited children's values (mctx's
 * qtransform_by_parent_and_siblings): out[i] = (q[i] - min) / max(max - min, 1e-8);
 * unvisited children get 0 (the minimum). */
void mcgs_normalize_by_parent_and_siblings(double parent_v, const double *q, const int *visited, size_t n, double *out);

/* MuZero's value transform h(x) = sign(x)(sqrt(|x| + 1) - 1) + eps x, eps = 1e-3, and its
 * inverse; for a value model trained on raw speedups. */
double mcgs_value_h(double x);
double mcgs_value_h_inverse(double y);

/* ---- Root noise ("Selection") */

/* p[i] = (1 - eps) p[i] + eps eta[i]. */
void mcgs_dirichlet_mix(double *p, const double *eta, size_t n, double eps);
/* A Dirichlet(alpha, ..., alpha) draw into eta, from gamma draws made with rng. */
void mcgs_dirichlet_sample(uint64_t *rng, double alpha, size_t n, double *eta);

/* ---- Priors from counts ("The ReGraph") */

void mcgs_prior_laplace(const double *counts, size_t k, double alpha, double *out);
/* (c_b + lambda * global_b) / (sum c + lambda). */
void mcgs_prior_backoff(const double *counts, const double *global, size_t k, double lambda, double *out);
/* Beta(a0 + s, b0 + f): its parameters, mean and variance. */
void mcgs_beta_posterior(double s, double f, double a0, double b0, double *a, double *b, double *mean, double *var);
/* p^(1/T), normalized. */
void mcgs_prior_temper(const double *p, size_t k, double temperature, double *out);

/* ---- The graph and its backup ("The graph", "Backup") */

#define MCGS_NONE SIZE_MAX

/* Nodes and edges hold no pointers (out-edges are a list threaded through the edges), so
 * a graph can be stored and loaded as its two arrays. */
struct mcgs_node {
	double u;      /* the node's own reward */
	double n;      /* 1 + the visits of its out-edges */
	double q;      /* backed-up value */
	int64_t rank;  /* depth at creation: an edge u->v needs rank(v) > rank(u) */
	size_t first_out, last_out; /* its out-edges, oldest first (MCGS_NONE: none) */
	size_t nout;
};

struct mcgs_edge {
	size_t from, to;  /* to is MCGS_NONE while the edge is not evaluated */
	size_t next_out;  /* the next out-edge of from, always a later edge, or MCGS_NONE */
	double n;	  /* visits */
	double prior;
};

struct mcgs {
	struct mcgs_node *nodes;
	size_t nnodes, nodes_cap;
	struct mcgs_edge *edges;
	size_t nedges, edges_cap;
};

void mcgs_init(struct mcgs *g);
void mcgs_release(struct mcgs *g);
/* Makes room for that many nodes and edges in all, for a graph about to be loaded. */
void mcgs_reserve(struct mcgs *g, size_t nodes, size_t edges);
size_t mcgs_add_node(struct mcgs *g, double u, int rank);
size_t mcgs_add_edge(struct mcgs *g, size_t from, size_t to, double prior);
/* The out-edges of node, oldest first, into out (room for nodes[node].nout of them). */
void mcgs_out_edges(const struct mcgs *g, size_t node, size_t *out);
/* Whether an edge from u to v keeps the graph acyclic (the rank rule). */
int mcgs_rank_allows(const struct mcgs *g, size_t from, size_t to);
/* N(n) = 1 + sum of out-edge visits; Q(n) = (U(n) + sum N(e) Q(child)) / N(n). */
void mcgs_recompute(struct mcgs *g, size_t node);
/* One playout along edges[0..len): each edge gets a visit, then every node on the path
 * is recomputed, deepest first, the last child only when recompute_leaf is set (a playout
 * that stopped at a transposition does not enter it). */
void mcgs_playout(struct mcgs *g, size_t root, const size_t *edges, size_t len, int recompute_leaf);
/* max(U(n), best of its children): the best value below n. */
double mcgs_best(const struct mcgs *g, size_t node);

/* ---- Comparison (docs/measurement.md "Comparing two kernels") */

/* Sorts x ascending. */
void mcgs_sort_doubles(double *x, size_t n);

/* Percentile bootstrap of median(a) / median(b) with splitmix64 (docs/search.md, T7d): each of
 * the resamples draws b first, then a; the interval is the sorted values at
 * floor(0.025 B) and ceil(0.975 B) - 1. */
void mcgs_bootstrap_median_ratio(const double *a, size_t na, const double *b, size_t nb, size_t resamples, uint64_t seed,
				 double interval[2]);

#endif
