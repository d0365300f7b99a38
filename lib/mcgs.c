/* mcgs.c: the search's formulas (docs/search.md), each written to reproduce its test vectors
 * exactly; tests/40-mcgs.bats checks them through the test driver. */
#include "common.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "mcgs.h"
#include "rng.h"
#include "xalloc.h"

double mcgs_puct_c(double c_init, double c_base, double n_parent)
{
	return c_init + log((n_parent + c_base + 1) / c_base);
}

double mcgs_puct_score(double q_hat, double c, double prior, double sum_n, double n_edge)
{
	return q_hat + c * prior * sqrt(sum_n) / (1 + n_edge);
}

double mcgs_fpu_value(double parent_q, double reduction, double visited_prior)
{
	return parent_q - reduction * sqrt(visited_prior);
}

/* A limit beyond it is no limit: no node has 2^53 children, and every count up to it is a
 * double exactly. */
#define WIDENING_MAX 9007199254740992.0

size_t mcgs_widening_limit(double visits, double k, double alpha)
{
	/* Clamped before it becomes an integer, a conversion undefined for a negative, infinite,
	 * NaN or too large value: --widen-k goes from -1e9 to 1e9 and --widen-alpha up to 1e9. */
	double limit = ceil(k * pow(visits, alpha));
	if (!(limit > 0))
		limit = 0;
	else if (limit > WIDENING_MAX)
		limit = WIDENING_MAX;
	size_t c = (size_t)limit;
	/* For alpha = 0.5 settle the rounding with the exact integer test C*C < k*k*N, since
	 * pow and sqrt may miss by an ulp at perfect squares. */
	if (alpha == 0.5 && k > 0) {
		while (c > 0 && (double)(c - 1) * (double)(c - 1) >= k * k * visits)
			c--;
		while (c < (size_t)WIDENING_MAX && (double)c * (double)c < k * k * visits)
			c++;
	}
	return c;
}

double mcgs_reward_log2(double t_ref, double t, double clip)
{
	double r = log2(t_ref / t);
	return r > clip ? clip : r < -clip ? -clip : r;
}

void mcgs_normalize_by_parent_and_siblings(double parent_v, const double *q, const int *visited, size_t n, double *out)
{
	double lo = parent_v, hi = parent_v;
	for (size_t i = 0; i < n; i++) {
		if (!visited[i])
			continue;
		lo = fmin(lo, q[i]);
		hi = fmax(hi, q[i]);
	}
	double range = fmax(hi - lo, 1e-8);
	for (size_t i = 0; i < n; i++)
		out[i] = visited[i] ? (q[i] - lo) / range : 0;
}

double mcgs_value_h(double x)
{
	double sign = x < 0 ? -1 : x > 0 ? 1 : 0;
	return sign * (sqrt(fabs(x) + 1) - 1) + 1e-3 * x;
}

double mcgs_value_h_inverse(double y)
{
	const double eps = 1e-3;
	double sign = y < 0 ? -1 : y > 0 ? 1 : 0;
	double t = (sqrt(1 + 4 * eps * (fabs(y) + 1 + eps)) - 1) / (2 * eps);
	return sign * (t * t - 1);
}

void mcgs_dirichlet_mix(double *p, const double *eta, size_t n, double eps)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (1 - eps) * p[i] + eps * eta[i];
}

static double normal(uint64_t *rng)
{
	double u = rng_uniform(rng), v = rng_uniform(rng);
	return sqrt(-2 * log(1 - u)) * cos(2 * M_PI * v);
}

/* Marsaglia and Tsang's method; alpha < 1 through the boost gamma(alpha + 1) * U^(1/alpha). */
static double gamma_draw(uint64_t *rng, double alpha)
{
	if (alpha < 1)
		return gamma_draw(rng, alpha + 1) * pow(1 - rng_uniform(rng), 1 / alpha);
	double d = alpha - 1.0 / 3, c = 1 / sqrt(9 * d);
	for (;;) {
		double x = normal(rng), v = 1 + c * x;
		if (v <= 0)
			continue;
		v = v * v * v;
		double u = rng_uniform(rng);
		if (log(1 - u) < 0.5 * x * x + d - d * v + d * log(v))
			return d * v;
	}
}

void mcgs_dirichlet_sample(uint64_t *rng, double alpha, size_t n, double *eta)
{
	double sum = 0;
	for (size_t i = 0; i < n; i++)
		sum += eta[i] = gamma_draw(rng, alpha);
	for (size_t i = 0; i < n; i++)
		eta[i] = sum > 0 ? eta[i] / sum : 1.0 / (double)n;
}

void mcgs_prior_laplace(const double *counts, size_t k, double alpha, double *out)
{
	double total = 0;
	for (size_t i = 0; i < k; i++)
		total += counts[i];
	for (size_t i = 0; i < k; i++)
		out[i] = (counts[i] + alpha) / (total + alpha * (double)k);
}

void mcgs_prior_backoff(const double *counts, const double *global, size_t k, double lambda, double *out)
{
	double total = 0;
	for (size_t i = 0; i < k; i++)
		total += counts[i];
	for (size_t i = 0; i < k; i++)
		out[i] = (counts[i] + lambda * global[i]) / (total + lambda);
}

void mcgs_beta_posterior(double s, double f, double a0, double b0, double *a, double *b, double *mean, double *var)
{
	*a = a0 + s;
	*b = b0 + f;
	*mean = *a / (*a + *b);
	*var = *a * *b / ((*a + *b) * (*a + *b) * (*a + *b + 1));
}

void mcgs_prior_temper(const double *p, size_t k, double temperature, double *out)
{
	double total = 0;
	for (size_t i = 0; i < k; i++)
		total += out[i] = pow(p[i], 1 / temperature);
	for (size_t i = 0; i < k; i++)
		out[i] /= total;
}

/* ---------------------------------------------------------------- the graph */

void mcgs_init(struct mcgs *g)
{
	memset(g, 0, sizeof(*g));
}

void mcgs_release(struct mcgs *g)
{
	free(g->nodes);
	free(g->edges);
	memset(g, 0, sizeof(*g));
}

void mcgs_reserve(struct mcgs *g, size_t nodes, size_t edges)
{
	if (nodes > g->nodes_cap) {
		g->nodes_cap = nodes > 2 * g->nodes_cap ? nodes : 2 * g->nodes_cap;
		g->nodes = xreallocarray(g->nodes, g->nodes_cap, sizeof(*g->nodes));
	}
	if (edges > g->edges_cap) {
		g->edges_cap = edges > 2 * g->edges_cap ? edges : 2 * g->edges_cap;
		g->edges = xreallocarray(g->edges, g->edges_cap, sizeof(*g->edges));
	}
}

size_t mcgs_add_node(struct mcgs *g, double u, int rank)
{
	mcgs_reserve(g, g->nnodes + 1 > 64 ? g->nnodes + 1 : 64, g->nedges);
	g->nodes[g->nnodes] = (struct mcgs_node){.u = u, .rank = rank, .first_out = MCGS_NONE, .last_out = MCGS_NONE};
	return g->nnodes++;
}

size_t mcgs_add_edge(struct mcgs *g, size_t from, size_t to, double prior)
{
	mcgs_reserve(g, g->nnodes, g->nedges + 1 > 64 ? g->nedges + 1 : 64);
	size_t id = g->nedges++;
	g->edges[id] = (struct mcgs_edge){.from = from, .to = to, .next_out = MCGS_NONE, .n = 0, .prior = prior};
	struct mcgs_node *n = &g->nodes[from];
	if (n->last_out == MCGS_NONE)
		n->first_out = id;
	else
		g->edges[n->last_out].next_out = id;
	n->last_out = id;
	n->nout++;
	return id;
}

void mcgs_out_edges(const struct mcgs *g, size_t node, size_t *out)
{
	size_t k = 0;
	for (size_t e = g->nodes[node].first_out; e != MCGS_NONE; e = g->edges[e].next_out)
		out[k++] = e;
}

int mcgs_rank_allows(const struct mcgs *g, size_t from, size_t to)
{
	return g->nodes[to].rank > g->nodes[from].rank;
}

void mcgs_recompute(struct mcgs *g, size_t node)
{
	struct mcgs_node *n = &g->nodes[node];
	double visits = 1, sum = n->u;
	for (size_t i = n->first_out; i != MCGS_NONE; i = g->edges[i].next_out) {
		const struct mcgs_edge *e = &g->edges[i];
		if (e->to == MCGS_NONE || e->n == 0)
			continue;
		visits += e->n;
		sum += e->n * g->nodes[e->to].q;
	}
	n->n = visits;
	n->q = sum / visits;
}

void mcgs_playout(struct mcgs *g, size_t root, const size_t *edges, size_t len, int recompute_leaf)
{
	for (size_t i = 0; i < len; i++)
		g->edges[edges[i]].n += 1;
	if (len > 0 && recompute_leaf && g->edges[edges[len - 1]].to != MCGS_NONE)
		mcgs_recompute(g, g->edges[edges[len - 1]].to);
	for (size_t i = len; i-- > 0;)
		mcgs_recompute(g, g->edges[edges[i]].from);
	if (len == 0)
		mcgs_recompute(g, root);
}

double mcgs_best(const struct mcgs *g, size_t node)
{
	const struct mcgs_node *n = &g->nodes[node];
	double best = n->u;
	for (size_t i = n->first_out; i != MCGS_NONE; i = g->edges[i].next_out) {
		const struct mcgs_edge *e = &g->edges[i];
		if (e->to != MCGS_NONE)
			best = fmax(best, mcgs_best(g, e->to));
	}
	return best;
}

/* ---------------------------------------------------------------- comparison */

static int compare_doubles(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

void mcgs_sort_doubles(double *x, size_t n)
{
	qsort(x, n, sizeof(*x), compare_doubles);
}

static double median_of(double *x, size_t n)
{
	mcgs_sort_doubles(x, n);
	return n % 2 ? x[n / 2] : (x[n / 2 - 1] + x[n / 2]) / 2;
}

void mcgs_bootstrap_median_ratio(const double *a, size_t na, const double *b, size_t nb, size_t resamples, uint64_t seed,
				 double interval[2])
{
	double *ratios = xcalloc(resamples, sizeof(*ratios));
	double *ra = xcalloc(na, sizeof(*ra)), *rb = xcalloc(nb, sizeof(*rb));
	uint64_t state = seed;
	for (size_t r = 0; r < resamples; r++) {
		for (size_t i = 0; i < nb; i++)
			rb[i] = b[rng_next(&state) % nb];
		for (size_t i = 0; i < na; i++)
			ra[i] = a[rng_next(&state) % na];
		ratios[r] = median_of(ra, na) / median_of(rb, nb);
	}
	mcgs_sort_doubles(ratios, resamples);
	interval[0] = ratios[(size_t)floor(0.025 * (double)resamples)];
	interval[1] = ratios[(size_t)ceil(0.975 * (double)resamples) - 1];
	free(ratios);
	free(ra);
	free(rb);
}
