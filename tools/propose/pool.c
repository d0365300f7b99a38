/* pool.c (kg-propose): the model's picks: the pool of configurations the expected improvement
 * is maximized over, a kriging believer across the picks, and a stalled search's best's moves. */
#include "common.h"

#include <math.h>
#include <string.h>

#include "log.h"
#include "model_impl.h"
#include "moves.h"
#include "space.h"

/* ---------------------------------------------------------------- the pool */


struct pool {
	const struct model *m;
	size_t n, cap, stride; /* points; w's row length: observations + picks */
	size_t *indices;       /* n x nparams */
	double *x;	       /* n x d */
	double *mu, *var0;     /* the whole prediction (run model and sources) */
	double *var;	       /* the run model's variance after the picks so far (a kriging believer) */
	double *var_src;       /* the sources' share of the variance (the believer leaves it) */
	double *ei;	       /* expected improvement of the whole prediction, after the picks */
	double *w;	       /* n x stride: L^-1 k(x), grown by one per pick */
	unsigned char *out;    /* picked, refused or weak */
	size_t *slots;	       /* open addressing on the indices: point + 1, 0 empty */
	size_t nslots;
};

static size_t slot_of(const struct pool *pool, const size_t *indices, size_t np)
{
	return model_indices_slot(pool->slots, pool->nslots, pool->indices, np, indices);
}

static void grow(struct pool *pool, size_t np)
{
	size_t cap = pool->cap ? 2 * pool->cap : 1024;
	pool->indices = xreallocarray(pool->indices, cap * np + 1, sizeof(*pool->indices));
	pool->x = xreallocarray(pool->x, cap * pool->m->d + 1, sizeof(*pool->x));
	pool->mu = xreallocarray(pool->mu, cap, sizeof(*pool->mu));
	pool->var0 = xreallocarray(pool->var0, cap, sizeof(*pool->var0));
	pool->var = xreallocarray(pool->var, cap, sizeof(*pool->var));
	pool->var_src = xreallocarray(pool->var_src, cap, sizeof(*pool->var_src));
	pool->ei = xreallocarray(pool->ei, cap, sizeof(*pool->ei));
	pool->w = xreallocarray(pool->w, cap * pool->stride, sizeof(*pool->w));
	pool->out = xreallocarray(pool->out, cap, sizeof(*pool->out));
	pool->cap = cap;
	free(pool->slots);
	pool->nslots = 4 * cap;
	pool->slots = xcalloc(pool->nslots, sizeof(*pool->slots));
	for (size_t i = 0; i < pool->n; i++)
		pool->slots[slot_of(pool, pool->indices + i * np, np)] = i + 1;
}

/* Adds the configuration at indices (a valid one) with its prediction, unless the pool has it
 * or the run measured it. Returns its point, or -1. */
static long pool_add(struct pool *pool, const size_t *indices)
{
	const struct model *m = pool->m;
	size_t np = m->spec->nparams;
	if (pool->n == pool->cap)
		grow(pool, np);
	size_t s = slot_of(pool, indices, np);
	if (pool->slots[s])
		return -1;
	if (m->measured_slots[model_measured_slot(m, indices)])
		return -1;
	size_t i = pool->n++;
	pool->slots[s] = i + 1;
	memcpy(pool->indices + i * np, indices, np * sizeof(*indices));
	model_encode(m, indices, pool->x + i * m->d);
	double mu_run, mu_src;
	model_run_predict(m, pool->x + i * m->d, &mu_run, &pool->var[i], pool->w + i * pool->stride);
	model_sources_predict(m, indices, pool->x + i * m->d, &mu_src, &pool->var_src[i]);
	pool->mu[i] = model_mixed_mu(m, mu_run, mu_src);
	pool->var0[i] = model_mixed_var(m, pool->var[i], pool->var_src[i]);
	pool->ei[i] = model_improvement(m, pool->mu[i], pool->var0[i]);
	pool->out[i] = 0;
	return (long)i;
}

/* The point of the configuration at indices, added when new; -1 when the run measured it. */
static long pool_point(struct pool *pool, const size_t *indices)
{
	long i = pool_add(pool, indices);
	if (i < 0) {
		size_t s = slot_of(pool, indices, pool->m->spec->nparams);
		i = pool->slots[s] ? (long)pool->slots[s] - 1 : -1;
	}
	return i;
}

static void pool_release(struct pool *pool)
{
	free(pool->indices);
	free(pool->x);
	free(pool->mu);
	free(pool->var0);
	free(pool->var);
	free(pool->var_src);
	free(pool->ei);
	free(pool->w);
	free(pool->out);
	free(pool->slots);
}

static int add_drawn(void *ctx, const size_t *indices)
{
	pool_add(ctx, indices);
	return 0;
}

/* Every valid configuration that differs from at in one parameter, added to the pool; the
 * point of largest expected improvement among them (new or not) in *best, -1 if none. */
static void add_moves(struct pool *pool, const size_t *at, long *best)
{
	const struct t1_spec *spec = pool->m->spec;
	size_t np = spec->nparams, *try = xcalloc(np + 1, sizeof(*try));
	double best_ei = -1;
	*best = -1;
	for (size_t k = 0; k < np; k++)
		for (size_t j = 0; j < spec->params[k].nvalues; j++) {
			if (j == at[k])
				continue;
			memcpy(try, at, np * sizeof(*try));
			try[k] = j;
			if (!config_valid(spec, try))
				continue;
			long i = pool_point(pool, try);
			if (i >= 0 && pool->ei[i] > best_ei)
				best_ei = pool->ei[i], *best = i;
		}
	free(try);
}

struct ranked {
	double ei;
	size_t point;
};

static int by_ei_desc(const void *a, const void *b)
{
	const struct ranked *p = a, *q = b;
	if (p->ei != q->ei)
		return p->ei > q->ei ? -1 : 1;
	return p->point < q->point ? -1 : p->point > q->point;
}

/* The points not out, largest expected improvement first (ties by point). */
static size_t pool_order(const struct pool *pool, struct ranked *order)
{
	size_t n = 0;
	for (size_t i = 0; i < pool->n; i++)
		if (!pool->out[i])
			order[n++] = (struct ranked){pool->ei[i], i};
	qsort(order, n, sizeof(*order), by_ei_desc);
	return n;
}

/* The point not out of largest expected improvement (the first of equals), or with exploit
 * of lowest predicted time; -1 when none. */
static long pool_best(const struct pool *pool, int exploit)
{
	long best = -1;
	double best_score = 0;
	for (size_t i = 0; i < pool->n; i++) {
		double score = exploit ? -pool->mu[i] : pool->ei[i];
		if (!pool->out[i] && (best < 0 || score > best_score))
			best = (long)i, best_score = score;
	}
	return best;
}

/* Whether the last builds go to the lowest predicted time: ENDGAME_BUILDS or fewer are left
 * and nothing in the pool is expected to gain --min-pred-gain on the run's best (the search
 * has converged by the model's own measure; a space still being explored keeps exploring). */
static int endgame(const struct pool *pool)
{
	const struct model *m = pool->m;
	if (!(m->settings.budget_left <= ENDGAME_BUILDS))
		return 0;
	double max_ei = 0;
	for (size_t i = 0; i < pool->n; i++)
		if (!pool->out[i])
			max_ei = fmax(max_ei, pool->ei[i]);
	return max_ei * m->gp.sd < log1p(m->settings.min_pred_gain);
}

/* The pools of listed spaces as the last picks of their models filled them: the picks of a
 * batch that see the same measurements of a kernel predict the same points (the whole space
 * but what was measured), so a later pick of the same model (pool_key) copies them rather
 * than predicting each again (most of a pick's time). A batch's picks go from kernel to
 * kernel (a search with ready patches has several), so the last few are kept. */
#define POOLS_KEPT 8
static struct listed_pool {
	uint64_t key;
	const struct run_info *run;
	size_t n, gpn; /* points; the GP's, each point's w before any pick */
	size_t *indices;
	double *x, *mu, *var0, *var, *var_src, *ei, *w;
} pools_kept[POOLS_KEPT];
static size_t pools_next;

static void pool_keep(const struct pool *pool, const struct run_info *run)
{
	struct listed_pool *k = &pools_kept[pools_next++ % POOLS_KEPT];
	const struct model *m = pool->m;
	size_t n = pool->n, np = m->spec->nparams, d = m->d, gpn = m->has_gp ? m->gp.n : 0;
	k->key = m->pool_key;
	k->run = run;
	k->n = n;
	k->gpn = gpn;
	k->indices = xreallocarray(k->indices, n * np + 1, sizeof(*k->indices));
	memcpy(k->indices, pool->indices, n * np * sizeof(*k->indices));
	k->x = xreallocarray(k->x, n * d + 1, sizeof(*k->x));
	memcpy(k->x, pool->x, n * d * sizeof(*k->x));
	double **kept[] = {&k->mu, &k->var0, &k->var, &k->var_src, &k->ei};
	const double *from[] = {pool->mu, pool->var0, pool->var, pool->var_src, pool->ei};
	for (size_t a = 0; a < ARRAY_SIZE(kept); a++) {
		*kept[a] = xreallocarray(*kept[a], n + 1, sizeof(**kept[a]));
		memcpy(*kept[a], from[a], n * sizeof(**kept[a]));
	}
	k->w = xreallocarray(k->w, n * gpn + 1, sizeof(*k->w));
	for (size_t i = 0; i < n; i++)
		memcpy(k->w + i * gpn, pool->w + i * pool->stride, gpn * sizeof(*k->w));
}

/* The kept pool of this model into pool: 1, else 0. */
static int pool_restore(struct pool *pool, const struct run_info *run)
{
	const struct model *m = pool->m;
	const struct listed_pool *k = NULL;
	size_t np = m->spec->nparams, d = m->d;
	for (size_t j = 0; m->pool_key && j < POOLS_KEPT && !k; j++)
		if (pools_kept[j].key == m->pool_key && pools_kept[j].run == run)
			k = &pools_kept[j];
	if (!k)
		return 0;
	while (pool->cap < k->n)
		grow(pool, np);
	pool->n = k->n;
	memcpy(pool->indices, k->indices, k->n * np * sizeof(*pool->indices));
	memcpy(pool->x, k->x, k->n * d * sizeof(*pool->x));
	double *to[] = {pool->mu, pool->var0, pool->var, pool->var_src, pool->ei};
	const double *kept[] = {k->mu, k->var0, k->var, k->var_src, k->ei};
	for (size_t a = 0; a < ARRAY_SIZE(to); a++)
		memcpy(to[a], kept[a], k->n * sizeof(*to[a]));
	for (size_t i = 0; i < k->n; i++) {
		memcpy(pool->w + i * pool->stride, k->w + i * k->gpn, k->gpn * sizeof(*pool->w));
		pool->out[i] = 0;
		pool->slots[slot_of(pool, pool->indices + i * np, np)] = i + 1;
	}
	return 1;
}

static int pool_fill(struct pool *pool, struct run_info *run, uint64_t seed)
{
	const struct model *m = pool->m;
	const struct t1_spec *spec = m->spec;
	size_t np = spec->nparams;
	for (size_t k = 0; k < m->nsrc; k++) /* where the history expects the best */
		for (size_t i = 0; i < SOURCE_TOP && i < m->src[k].n && m->src[k].weight > 0; i++)
			if (config_valid(spec, m->src[k].indices + i * np))
				pool_add(pool, m->src[k].indices + i * np);
	const size_t *listed;
	long nlisted = run_listing(run, &listed);
	if (nlisted >= 0 && nlisted <= POOL_LISTED) {
		if (pool_restore(pool, run)) {
			log_debug("%s: the pool's %zu predictions of the same model are used again", run->run.dir, pool->n);
			return 0;
		}
		for (long i = 0; i < nlisted; i++)
			pool_add(pool, listed + (size_t)i * np);
		if (pool->m->pool_key && pool->n) /* (an empty one costs nothing to fill again) */
			pool_keep(pool, run);
		return 0;
	}
	uint64_t rng = seed;
	if (random_configs(spec, listed, nlisted, &rng, POOL_DRAWS, add_drawn, pool) < 0)
		return -1;
	long ignored;
	for (size_t i = 0; i < MOVES_FROM && i < m->nmeasured; i++)
		add_moves(pool, m->measured + i * np, &ignored);
	struct ranked *order = xcalloc(pool->n + 1, sizeof(*order));
	size_t starts = pool_order(pool, order), *at = xcalloc(np + 1, sizeof(*at));
	for (size_t s = 0; s < starts && s < CLIMB_STARTS; s++) {
		long here = (long)order[s].point, next;
		for (int step = 0; step < CLIMB_STEPS; step++) {
			memcpy(at, pool->indices + (size_t)here * np, np * sizeof(*at));
			add_moves(pool, at, &next);
			if (next < 0 || pool->ei[next] <= pool->ei[here])
				break;
			here = next;
		}
	}
	free(at);
	free(order);
	return 0;
}

/* Conditions the pool on point p at its predicted value: the posterior mean stays, every
 * variance shrinks by the new element of its w. */
static void believe(struct pool *pool, size_t p, size_t filled)
{
	if (!pool->m->has_gp)
		return; /* the history's picks are not conditioned: each goes by its own value */
	const struct gp *gp = &pool->m->gp;
	const double *l = pool->w + p * pool->stride;
	double diag = exp(gp->theta[gp->d]) + exp(gp->theta[gp->d + 1]);
	for (size_t k = 0; k < filled; k++)
		diag -= l[k] * l[k];
	double lnn = sqrt(fmax(diag, 1e-12));
	for (size_t i = 0; i < pool->n; i++) {
		if (pool->out[i])
			continue;
		double *w = pool->w + i * pool->stride, dot = 0;
		for (size_t k = 0; k < filled; k++)
			dot += w[k] * l[k];
		w[filled] = (gp_kernel(gp, pool->x + i * gp->d, pool->x + p * gp->d) - dot) / lnn;
		if (w[filled] * w[filled] > 1e-12 * pool->var[i]) { /* else too far to matter */
			pool->var[i] = fmax(pool->var[i] - w[filled] * w[filled], 1e-12);
			pool->ei[i] = model_improvement(pool->m, pool->mu[i], model_mixed_var(pool->m, pool->var[i], pool->var_src[i]));
		}
	}
}

/* "tile_size_x 1 -> 4, use_padding 0 -> 1" */
static char *changes_text(const struct t1_spec *spec, const size_t *from, const size_t *to)
{
	struct strbuf sb;
	strbuf_init(&sb);
	for (size_t k = 0; k < spec->nparams; k++)
		if (from[k] != to[k])
			strbuf_addf(&sb, "%s%s %s -> %s", sb.len ? ", " : "", spec->params[k].name,
				    spec->params[k].values_json[from[k]], spec->params[k].values_json[to[k]]);
	return strbuf_detach(&sb);
}

/* The one-parameter move of the run's best (measured's first row) of largest expected
 * improvement that is not measured, in flight or picked already; -1 when none is left. */
static long best_neighbour(struct pool *pool, struct run_info *run)
{
	const struct t1_spec *spec = pool->m->spec;
	size_t np = spec->nparams, *try = xcalloc(np + 1, sizeof(*try));
	long best = -1;
	for (size_t k = 0; k < np; k++)
		for (size_t j = 0; j < spec->params[k].nvalues; j++) {
			memcpy(try, pool->m->measured, np * sizeof(*try));
			if (j == try[k])
				continue;
			try[k] = j;
			if (!config_valid(spec, try))
				continue;
			long i = pool_point(pool, try);
			if (i < 0 || pool->out[i])
				continue;
			if (!context_within(run, try))
				pool->out[i] = 1;
			else if (best < 0 || pool->ei[i] > pool->ei[best])
				best = i;
		}
	free(try);
	return best;
}

/* Proposes point i of the pool, taken out of it; with lead, to go out first. Returns 1 when
 * context_accept took it (then the pool believes it), else 0. */
static int pick(struct pool *pool, struct run_info *run, const struct node_info *node, const size_t *from, size_t i,
		const char *why, int lead, size_t *believed, struct proposal **list, size_t *n)
{
	const struct model *m = pool->m;
	const struct t1_spec *spec = m->spec;
	const size_t *at = pool->indices + i * spec->nparams;
	pool->out[i] = 1;
	if (!kernel_takes(spec, node, NULL, at, NULL))
		return 0; /* as context_accept would refuse it, before the texts are made */
	/* never weak: the largest expected improvement is worth its build by the model's own
	 * measure, near the best as far from it (--min-pred-gain prunes the rules') */
	double mu_y = m->gp.mean + m->gp.sd * pool->mu[i], sd_y = m->gp.sd * sqrt(pool->var0[i]);
	struct proposal p = {.proposer = xstrdup("rules:model"), .prior = model_gain_prior(m, pool->mu[i], pool->var0[i], NULL),
			     .config = config_object(spec, at), .lead = lead};
	char *changes = changes_text(spec, from, at);
	p.method = xstrdup(move_method(spec, node->config, p.config));
	p.detail = xasprintf("%s: predicted %.4g ms (%.4g to %.4g)%s", changes, exp(mu_y), exp(mu_y - KAPPA * sd_y),
			     exp(mu_y + KAPPA * sd_y), why);
	free(changes);
	struct strbuf refused;
	strbuf_init(&refused);
	int accepted = context_accept(run, node, &p, &refused) == 0;
	strbuf_release(&refused);
	if (!accepted) {
		/* in flight already, or the node's own: the next best; or the rules' own move of
		 * the best, in this expansion already: that one leads */
		for (size_t k = 0; lead && k < *n; k++)
			if (!(*list)[k].patch && !(*list)[k].source && (*list)[k].full_config && p.full_config &&
			    cJSON_Compare((*list)[k].full_config, p.full_config, 1))
				(*list)[k].lead = 1;
		proposal_release(&p);
		return 0;
	}
	*list = xreallocarray(*list, *n + 1, sizeof(**list));
	(*list)[(*n)++] = p;
	believe(pool, i, m->gp.n + (*believed)++);
	return 1;
}

int model_propose(struct model *m, struct run_info *run, const struct node_info *node, uint64_t seed,
		  struct proposal **list, size_t *n)
{
	const struct t1_spec *spec = m->spec;
	size_t np = spec->nparams, picked = 0, *flying, nflying = context_in_flight(run, node, &flying);
	struct pool pool = {.m = m, .stride = m->gp.n + nflying + m->settings.picks};
	size_t *from = xcalloc(np + 1, sizeof(*from)), believed = 0;
	if (config_indices(spec, node->config, from) != 0 || pool_fill(&pool, run, seed) != 0) {
		free(flying);
		free(from);
		pool_release(&pool);
		return 0;
	}
	/* What is in flight will be measured soon: believed at its prediction, so that the picks
	 * go elsewhere rather than next to it. */
	for (size_t f = 0; f < nflying; f++) {
		long i = pool_point(&pool, flying + f * np);
		if (i >= 0 && !pool.out[i]) {
			pool.out[i] = 1;
			believe(&pool, (size_t)i, m->gp.n + believed++);
		}
	}
	free(flying);
	int exploit = m->no_best || endgame(&pool);
	char trust[64] = "", *local = NULL;
	if (m->nsrc) /* how far the history leads these picks */
		snprintf(trust, sizeof(trust), "; history weight %.2f", 1 - m->w_run);
	/* A search that has measured as many configurations as the space has parameters without
	 * a gain tries the best's untried one-parameter moves first, one an expansion, largest
	 * expected improvement first: the model can be sure of a neighbour it has wrong (a block
	 * of 32 among multiples of 16), and a best with untried moves is not yet known to be
	 * even a local optimum. */
	long near = !exploit && m->stalled >= m->nparam_coords - m->nalignments ? best_neighbour(&pool, run) : -1;
	if (near >= 0) {
		local = xasprintf("; a move of the best, %zu configurations measured since it%s", m->stalled, trust);
		picked += pick(&pool, run, node, from, (size_t)near, local, 1, &believed, list, n);
	}
	for (long best; picked < m->settings.picks && (best = pool_best(&pool, exploit)) >= 0;) {
		if (!context_within(run, pool.indices + (size_t)best * np)) {
			pool.out[best] = 1; /* asked for here only: a replay key per point of the pool costs */
			continue;
		}
		picked += pick(&pool, run, node, from, (size_t)best, trust, 0, &believed, list, n);
	}
	log_info("%s: node %s: the model proposes %zu of %zu configurations (%zu in flight)%s%s", run->run.dir, node->state,
		 picked, pool.n, believed - picked, exploit ? ", the lowest predicted times (the endgame)" : "",
		 near >= 0 ? ", the first a move of the best" : "");
	free(local);
	free(from);
	pool_release(&pool);
	return exploit;
}
