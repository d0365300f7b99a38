/* libtest_mcgs.c: kg-libtest mcgs: prints docs/search.md's test vectors of lib/mcgs (PUCT, widening,
 * rewards, backup, priors, the bootstrap) the way their reference computation does. */
#include "common.h"

#include <math.h>
#include <stdint.h>

#include "libtest.h"
#include "mcgs.h"
#include "pyexpr.h"
#include "rng.h"
#include "xalloc.h"

/* Python's repr of x rounded to 12 decimals, as docs/search.md's test vectors print lists. */
static void print_repr12(double x)
{
	struct strbuf sb;
	strbuf_init(&sb);
	struct pyval v = pyval_float(round(x * 1e12) / 1e12);
	pyval_repr(&sb, &v);
	fputs(sb.buf, stdout);
	strbuf_release(&sb);
}

static void print_list12(const char *prefix, const double *x, size_t n)
{
	printf("%s[", prefix);
	for (size_t i = 0; i < n; i++) {
		if (i)
			fputs(", ", stdout);
		print_repr12(x[i]);
	}
	puts("]");
}

static void vector_t1(void)
{
	const double prior[3] = {0.5, 0.3, 0.2}, n[3] = {10, 5, 0}, q[3] = {0.6, 0.7, 0};
	double parent_q = (10 * 0.6 + 5 * 0.7) / 15;
	double fpus[2] = {0, mcgs_fpu_value(parent_q, 0.2, 0.5 + 0.3)};
	const char *names[2] = {"absolute0", "parentQ-0.2*sqrt(visitedP)"};
	for (int f = 0; f < 2; f++) {
		printf("%s fpu=%.10f scores= [", names[f], fpus[f]);
		size_t best = 0;
		double scores[3];
		for (size_t i = 0; i < 3; i++) {
			scores[i] = mcgs_puct_score(n[i] > 0 ? q[i] : fpus[f], 1.5, prior[i], 15, n[i]);
			printf("%s'%.10f'", i ? ", " : "", scores[i]);
			if (scores[i] > scores[best])
				best = i;
		}
		printf("] argmax= %zu\n", best);
	}
}

static void vector_t3(void)
{
	printf("N : [");
	for (int n = 1; n <= 16; n++)
		printf("%s%d", n > 1 ? ", " : "", n);
	puts("]");
	for (int k = 1; k <= 2; k++) {
		printf("ceil(%d*N^0.5)        : [", k);
		for (int n = 1; n <= 16; n++)
			printf("%s%zu", n > 1 ? ", " : "", mcgs_widening_limit(n, k, 0.5));
		puts("]");
	}
	printf("MCTS-AHD widen? int(N^.5) > |C| for |C|=2: [");
	for (int n = 1; n <= 16; n++)
		printf("%s%s", n > 1 ? ", " : "", (int)sqrt(n) > 2 ? "True" : "False");
	puts("]");
	printf("MCTS.jl k=1,a=.5 max : [");
	for (int n = 1; n <= 16; n++)
		printf("%s%d", n > 1 ? ", " : "", (int)floor(sqrt(n)) + 1);
	puts("]");
}

/* Widening limits far from the vectors: huge, negative and NaN products are clamped. */
static void vector_widen(void)
{
	static const double cases[][3] = {
		{1e6, 1e9, 1}, {1e9, 1e9, 1}, {1e9, 1e9, 0.5}, {10, 1, 1e9}, {10, 1e9, 1e9},
		{10, 0, 1e9}, {4, -2, 0.5}, {4, -1e9, 1}, {16, 1e9, 0.5},
	};
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++)
		printf("N=%g k=%g alpha=%g: %zu\n", cases[i][0], cases[i][1], cases[i][2],
		       mcgs_widening_limit(cases[i][0], cases[i][1], cases[i][2]));
}

/* The diamond R->A, R->B, A->C, B->C (and C->D for T4c), with docs/search.md's U values. */
static void diamond(struct mcgs *g, int with_d, size_t e[5])
{
	mcgs_init(g);
	mcgs_add_node(g, 0.0, 0);
	mcgs_add_node(g, 0.2, 1);
	mcgs_add_node(g, 0.4, 1);
	mcgs_add_node(g, 1.0, 2);
	e[0] = mcgs_add_edge(g, 0, 1, 0.5);
	e[1] = mcgs_add_edge(g, 0, 2, 0.5);
	e[2] = mcgs_add_edge(g, 1, 3, 1);
	e[3] = mcgs_add_edge(g, 2, 3, 1);
	if (with_d) {
		mcgs_add_node(g, 0.0, 3);
		e[4] = mcgs_add_edge(g, 3, 4, 1);
	}
}

static void vector_t4(void)
{
	struct mcgs g;
	size_t e[5];
	diamond(&g, 0, e);
	const size_t paths[6][2] = {{0, 0}, {e[0], 0}, {e[1], 0}, {e[0], e[2]}, {e[1], e[3]}, {e[1], e[3]}};
	const size_t lens[6] = {0, 1, 1, 2, 2, 2};
	const char *labels[6] = {"R", "R->A", "R->B", "R->A->C", "R->B->C", "R->B->C"};
	for (int p = 0; p < 6; p++) {
		mcgs_playout(&g, 0, paths[p], lens[p], 1);
		printf("after playout %d %s:", p + 1, labels[p]);
		for (int i = 0; i < 4; i++)
			printf(" %c(N=%.0f,Q=%.12f)", "RABC"[i], g.nodes[i].n, g.nodes[i].q);
		putchar('\n');
	}
	struct mcgs_node a = g.nodes[1];
	mcgs_recompute(&g, 1);
	printf("note: A is stale after playouts 5,6 (A.Q uses C.Q as of its last visit) -> A recomputed now would be %.12f\n",
	       g.nodes[1].q);
	g.nodes[1] = a;
	mcgs_release(&g);
}

static void vector_t4c(int best)
{
	struct mcgs g;
	size_t e[5];
	diamond(&g, 1, e);
	mcgs_playout(&g, 0, NULL, 0, 1);
	const size_t paths[6][3] = {{e[0]}, {e[1]}, {e[0], e[2]}, {e[1], e[3]}, {e[0], e[2], e[4]}, {e[1], e[3]}};
	const size_t lens[6] = {1, 1, 2, 2, 3, 2};
	/* Steps 5 and 7 stop at C, a transposition: N(C) > N(B,C), so C is not entered. */
	const int stop[6] = {0, 0, 0, 1, 0, 1};
	const char *labels[6] = {"R->A", "R->B", "R->A->C", "R->B->C", "R->A->C->D", "R->B->C"};
	for (int s = 0; s < 6; s++) {
		size_t last = paths[s][lens[s] - 1];
		int stops = g.nodes[g.edges[last].to].n > g.edges[last].n;
		if (stops != stop[s])
			printf("unexpected stop decision at step %d\n", s + 2);
		mcgs_playout(&g, 0, paths[s], lens[s], !stops);
		if (!best)
			printf("step %d %-10s KataGo: R=%.6f A=%.6f B=%.6f C=%.6f\n", s + 2, labels[s], g.nodes[0].q,
			       g.nodes[1].q, g.nodes[2].q, g.nodes[3].q);
	}
	if (best) {
		printf("{");
		for (int i = 0; i < 5; i++) {
			printf("%s'%c': ", i ? ", " : "", "RABCD"[i]);
			print_repr12(mcgs_best(&g, (size_t)i));
		}
		puts("}");
	}
	mcgs_release(&g);
}

static void vector_t4e(void)
{
	struct mcgs g;
	mcgs_init(&g);
	for (int r = 0; r < 3; r++)
		mcgs_add_node(&g, 0, r);
	const int pairs[5][2] = {{0, 1}, {1, 2}, {2, 0}, {0, 2}, {2, 1}};
	for (int p = 0; p < 5; p++) {
		int u = pairs[p][0], v = pairs[p][1];
		printf("%c -> %c monotone: %s  CrazyAra-style same-depth: %s\n", "ABC"[u], "ABC"[v],
		       mcgs_rank_allows(&g, (size_t)u, (size_t)v) ? "True" : "False",
		       g.nodes[v].rank == g.nodes[u].rank + 1 ? "True" : "False");
	}
	mcgs_release(&g);
}

static void vector_t5(void)
{
	const double times[5] = {100, 50, 25, 200, 400};
	double r[5], lo = INFINITY, hi = -INFINITY;
	for (int i = 0; i < 5; i++) {
		r[i] = mcgs_reward_log2(100, times[i], 3);
		printf("t=%6.1f speedup=%.6f log2=%.12f ln=%.12f\n", times[i], 100 / times[i], r[i], log(100 / times[i]));
		lo = fmin(lo, r[i]);
		hi = fmax(hi, r[i]);
	}
	double global[5];
	for (int i = 0; i < 5; i++)
		global[i] = (r[i] - lo) / (hi - lo);
	print_list12("minmax over tree of log2 speedups: ", global, 5);
	const double q[4] = {1.0, -1.0, 2.0, 0};
	const int visited[4] = {1, 1, 1, 0};
	double out[4];
	mcgs_normalize_by_parent_and_siblings(0.5, q, visited, 4, out);
	printf("parent_and_siblings: [");
	for (int i = 0; i < 4; i++) {
		struct strbuf sb;
		strbuf_init(&sb);
		struct pyval v = pyval_float(out[i]);
		pyval_repr(&sb, &v);
		printf("%s%s", i ? ", " : "", sb.buf);
		strbuf_release(&sb);
	}
	puts("]");
	const int xs[5] = {0, 1, 3, 99, -3};
	for (int i = 0; i < 5; i++)
		printf("h(%d)=%.12f hinv(h)=%.12f\n", xs[i], mcgs_value_h(xs[i]), mcgs_value_h_inverse(mcgs_value_h(xs[i])));
}

static void vector_t7d(void)
{
	uint64_t state = 42;
	printf("splitmix64(seed=42) first output: 0x%016llx\n", (unsigned long long)rng_next(&state));
	const double a[5] = {1.00, 1.02, 0.99, 1.01, 1.03}, b[5] = {0.95, 0.96, 0.94, 0.97, 0.93};
	double ci[2];
	mcgs_bootstrap_median_ratio(a, 5, b, 5, 1000, 42, ci);
	printf("speedup(median a / median b) point = %.12f\n", 1.01 / 0.95);
	printf("bootstrap 95%% CI of median(a)/median(b) (B=1000, seed=42): [%.12f, %.12f]\n", ci[0], ci[1]);
}

static void vector_t8(const char *which)
{
	const double counts[4] = {0, 6, 3, 1};
	double out[4];
	if (strcmp(which, "T8") == 0) {
		mcgs_prior_laplace(counts, 4, 1.0, out);
		print_list12("alpha=1.0 ", out, 4);
		mcgs_prior_laplace(counts, 4, 0.5, out);
		print_list12("alpha=0.5 ", out, 4);
	} else if (strcmp(which, "T8b") == 0) {
		const double cases[3][4] = {{7, 3, 1, 1}, {7, 3, 0.5, 0.5}, {0, 0, 1, 1}};
		for (int c = 0; c < 3; c++) {
			double a, b, mean, var;
			mcgs_beta_posterior(cases[c][0], cases[c][1], cases[c][2], cases[c][3], &a, &b, &mean, &var);
			printf("s=%.0f f=%.0f prior=Beta(%.1f,%.1f) -> Beta(%.1f,%.1f) mean=%.12f var=%.12f\n", cases[c][0],
			       cases[c][1], cases[c][2], cases[c][3], a, b, mean, var);
		}
	} else if (strcmp(which, "T8c") == 0) {
		const double global[4] = {0.1, 0.5, 0.3, 0.1}, local[4] = {0, 1, 0, 0};
		mcgs_prior_backoff(local, global, 4, 4, out);
		print_list12("", out, 4);
	} else {
		double p[4];
		mcgs_prior_laplace(counts, 4, 1.0, p);
		mcgs_prior_temper(p, 4, 2, out);
		print_list12("T=2 tempered: ", out, 4);
	}
}

/* Prints one of docs/search.md's test vectors the way its reference computation does. */
int cmd_mcgs(const char *vector)
{
	if (strcmp(vector, "T1") == 0) {
		vector_t1();
	} else if (strcmp(vector, "T1b") == 0) {
		const double ns[5] = {0, 1, 800, 19652, 100000};
		for (int i = 0; i < 5; i++)
			printf("N=%.0f c(s)=%.12f\n", ns[i], mcgs_puct_c(1.25, 19652, ns[i]));
	} else if (strcmp(vector, "T2") == 0) {
		double p[3] = {0.5, 0.3, 0.2}, eta[3] = {0.1, 0.7, 0.2}, g[3] = {0.2, 1.4, 0.4};
		mcgs_dirichlet_mix(p, eta, 3, 0.25);
		print_list12("", p, 3);
		for (int i = 0; i < 3; i++)
			eta[i] = g[i] / (g[0] + g[1] + g[2]);
		print_list12("from gamma draws ", eta, 3);
	} else if (strcmp(vector, "T3") == 0) {
		vector_t3();
	} else if (strcmp(vector, "widen") == 0) {
		vector_widen();
	} else if (strcmp(vector, "T4") == 0) {
		vector_t4();
	} else if (strcmp(vector, "T4c") == 0 || strcmp(vector, "T4d") == 0) {
		vector_t4c(strcmp(vector, "T4d") == 0);
	} else if (strcmp(vector, "T4e") == 0) {
		vector_t4e();
	} else if (strcmp(vector, "T5") == 0) {
		vector_t5();
	} else if (strcmp(vector, "T7d") == 0) {
		vector_t7d();
	} else if (strncmp(vector, "T8", 2) == 0) {
		vector_t8(vector);
	} else {
		return libtest_usage();
	}
	return KG_EXIT_OK;
}
