/* model.c (kg-propose): the model-guided rule: a Gaussian process on ln time over the node's
 * space proposes the configurations of largest expected improvement, and prices every move. */
#include "common.h"

#include <math.h>
#include <string.h>

#include "fnv1a.h"
#include "gp.h"
#include "log.h"
#include "model.h"
#include "moves.h"
#include "rng.h"
#include "rules.h"

/* Observations beyond this many are thinned (the best half kept, then the latest), so that a
 * long run's fit stays well under a second: the fit is cubic in them. */
#define OBS_MAX 256
/* The pool the acquisition is maximized over: the whole space up to POOL_LISTED configurations,
 * else POOL_DRAWS uniform ones, every one-parameter move of the MOVES_FROM best measured, and
 * hill-climbs on the expected improvement from the CLIMB_STARTS best of those. */
#define POOL_LISTED 8192
#define POOL_DRAWS 2048
#define MOVES_FROM 5
#define CLIMB_STARTS 10
#define CLIMB_STEPS 20
/* An optimistic outcome is the prediction less KAPPA standard deviations. */
#define KAPPA 2.0
/* The endgame's builds: at most this many left (model.h). */
#define ENDGAME_BUILDS 6
/* The smallest prior, so that kg-select's normalization never divides by zero. */
#define PRIOR_FLOOR 1e-3

/* The launch's figures that become coordinates of their own when they vary: the blocks of
 * the grid and the threads of a block. Time follows them across parameters (a tile's two
 * sides set the waves of blocks together), which the parameters' own coordinates, one
 * length scale each, cannot express. (The dynamic shared memory as a third did no better
 * on the convolution and worse on the 1024^3 matmul: BENCHMARKS.md.) */
enum { LAUNCH_BLOCKS, LAUNCH_THREADS, LAUNCH_FIGURES };
/* The spread of each figure is read from this many configurations at most. */
#define LAUNCH_SAMPLE 512

struct model {
	const struct t1_spec *spec;
	struct model_settings settings;
	size_t d;		    /* coordinates: the parameters with two values or more, then the
				       launch figures that vary */
	size_t nparam_coords;	    /* the first of them */
	int launch_of[LAUNCH_FIGURES]; /* each launch coordinate's figure */
	double launch_lo[LAUNCH_FIGURES], launch_span[LAUNCH_FIGURES]; /* of ln figure */
	struct pyval *values;	    /* scratch for t1_bind */
	size_t *param_of;	    /* d: each coordinate's parameter */
	unsigned char *categorical; /* d: compared as same or different */
	double **position;	    /* d: each ordinal value's place in [0,1] (NULL: categorical) */
	struct gp gp;
	size_t *measured; /* nmeasured x nparams: the configurations the run measured, distinct */
	size_t nmeasured;
	double best_z;	  /* the best correct observation, standardized */
	double y_node;	  /* ln ms of the node: measured, or else predicted */
};

/* ln of the launch figures of the configuration at indices; -1 when its launch cannot be
 * computed. */
static int launch_figures(const struct t1_spec *spec, struct pyval *values, const size_t *indices, double *f)
{
	struct t1_launch launch;
	struct strbuf why;
	strbuf_init(&why);
	t1_bind(spec, indices, values);
	int rc = t1_launch_geometry(spec, values, &launch, &why);
	strbuf_release(&why);
	if (rc != 0)
		return -1;
	f[LAUNCH_BLOCKS] = log((double)launch.grid[0]) + log((double)launch.grid[1]) + log((double)launch.grid[2]);
	f[LAUNCH_THREADS] = log((double)launch.block[0]) + log((double)launch.block[1]) + log((double)launch.block[2]);
	return 0;
}

static void encode(const struct model *m, const size_t *indices, double *x)
{
	size_t j = 0;
	for (; j < m->nparam_coords; j++) {
		size_t i = indices[m->param_of[j]];
		x[j] = m->categorical[j] ? (double)i : m->position[j][i];
	}
	double f[LAUNCH_FIGURES];
	int known = j < m->d && launch_figures(m->spec, m->values, indices, f) == 0;
	for (; j < m->d; j++) { /* a launch that fails (then so does the build) sits mid-range */
		int k = m->launch_of[j - m->nparam_coords];
		x[j] = known ? (f[k] - m->launch_lo[k]) / m->launch_span[k] : 0.5;
	}
}

/* A move's prior (its expected improvement of ln time over the run's best) from a prediction
 * in standardized units; *weak (unless NULL) when even an optimistic outcome gains less than
 * min_pred_gain over the node, or does not beat the run's best (at a slow node every move
 * gains on the node: those the model knows cannot win are builds wasted). */
static double gain_prior(const struct model *m, double mu, double var, enum move_weakness *weak)
{
	double mu_y = m->gp.mean + m->gp.sd * mu, sd_y = m->gp.sd * sqrt(var);
	double y_best = m->gp.mean + m->gp.sd * m->best_z, optimistic = mu_y - KAPPA * sd_y;
	if (weak)
		*weak = exp(m->y_node - optimistic) - 1 < m->settings.min_pred_gain ? MOVE_WEAK_ON_NODE
			: optimistic >= y_best					       ? MOVE_WEAK_ON_BEST
										       : MOVE_STRONG;
	return fmax(gp_expected_improvement(mu_y, sd_y, y_best), PRIOR_FLOOR);
}

double model_prior(const struct model *m, const cJSON *full, enum move_weakness *weak)
{
	size_t *indices = xcalloc(m->spec->nparams + 1, sizeof(*indices));
	double *x = xcalloc(m->d + 1, sizeof(*x)), mu, var, prior = PRIOR_FLOOR;
	*weak = MOVE_STRONG;
	if (config_indices(m->spec, full, indices) == 0) {
		encode(m, indices, x);
		gp_predict(&m->gp, x, &mu, &var, NULL);
		prior = gain_prior(m, mu, var, weak);
	}
	free(x);
	free(indices);
	return prior;
}

/* ---------------------------------------------------------------- observations */

struct observation {
	const size_t *indices;
	double y; /* mean ln ms of its correct measurements; NAN when every one failed */
	size_t latest;
	int from_run; /* measured by the run, not only in --model-history */
};

static int by_y(const void *a, const void *b)
{
	const struct observation *p = a, *q = b;
	if (isnan(p->y) != isnan(q->y))
		return isnan(p->y) ? 1 : -1;
	if (!isnan(p->y) && p->y != q->y)
		return p->y < q->y ? -1 : 1;
	return p->latest < q->latest ? -1 : p->latest > q->latest;
}

static int by_latest_desc(const void *a, const void *b)
{
	const struct observation *p = a, *q = b;
	return p->latest > q->latest ? -1 : p->latest < q->latest;
}

/* The distinct configurations of the n measurements, those from first_run on the run's own:
 * *obs gets one entry per configuration (correct if any measurement of it was), sorted best
 * first. Returns how many. */
static size_t distinct_observations(size_t nparams, const size_t *indices, const double *log_ms, size_t n,
				    size_t first_run, struct observation **obs)
{
	size_t count = 0, *correct = xcalloc(n + 1, sizeof(*correct));
	*obs = xcalloc(n + 1, sizeof(**obs));
	for (size_t i = 0; i < n; i++) {
		const size_t *at = indices + i * nparams;
		size_t j;
		for (j = 0; j < count; j++)
			if (memcmp((*obs)[j].indices, at, nparams * sizeof(*at)) == 0)
				break;
		if (j == count)
			(*obs)[count++] = (struct observation){.indices = at, .y = NAN};
		(*obs)[j].latest = i;
		(*obs)[j].from_run |= i >= first_run;
		if (!isnan(log_ms[i])) {
			(*obs)[j].y = correct[j] ? ((*obs)[j].y * (double)correct[j] + log_ms[i]) / (double)(correct[j] + 1)
						 : log_ms[i];
			correct[j]++;
		}
	}
	free(correct);
	qsort(*obs, count, sizeof(**obs), by_y);
	return count;
}

static double numeric_value(const struct pyval *v)
{
	return v->kind == PY_INT ? (double)v->u.i : v->kind == PY_FLOAT ? v->u.f : NAN;
}

/* Where each value of an ordinal parameter lies in [0,1]: by the logarithm of its value when
 * every value is a positive number (sizes act by ratios: 32 to 64 threads is a larger step
 * than 992 to 1024), else by its index. */
static double *ordinal_positions(const struct t1_param *p)
{
	double *pos = xcalloc(p->nvalues, sizeof(*pos)), lo = INFINITY, hi = -INFINITY;
	int by_log = 1;
	for (size_t i = 0; i < p->nvalues && by_log; i++) {
		double v = numeric_value(&p->values[i]);
		by_log = v > 0 && isfinite(v);
		lo = fmin(lo, v), hi = fmax(hi, v);
	}
	by_log = by_log && hi > lo;
	for (size_t i = 0; i < p->nvalues; i++)
		pos[i] = by_log ? (log(numeric_value(&p->values[i])) - log(lo)) / (log(hi) - log(lo))
				: (double)i / (double)(p->nvalues - 1);
	return pos;
}

static void choose_coordinates(struct model *m)
{
	const struct t1_spec *spec = m->spec;
	m->param_of = xcalloc(spec->nparams + LAUNCH_FIGURES, sizeof(*m->param_of));
	m->categorical = xcalloc(spec->nparams + LAUNCH_FIGURES, sizeof(*m->categorical));
	m->position = xcalloc(spec->nparams + LAUNCH_FIGURES, sizeof(*m->position));
	for (size_t k = 0; k < spec->nparams; k++) {
		if (spec->params[k].nvalues < 2)
			continue; /* a constant tells the model nothing */
		enum t1_param_type t = spec->params[k].type;
		m->categorical[m->d] = t == T1_BOOL || t == T1_STRING;
		m->position[m->d] = m->categorical[m->d] ? NULL : ordinal_positions(&spec->params[k]);
		m->param_of[m->d++] = k;
	}
	m->nparam_coords = m->d;
}

struct spread {
	const struct model *m;
	double lo[LAUNCH_FIGURES], hi[LAUNCH_FIGURES];
	size_t seen;
};

static int spread_add(void *ctx, const size_t *indices)
{
	struct spread *sp = ctx;
	double f[LAUNCH_FIGURES];
	if (launch_figures(sp->m->spec, sp->m->values, indices, f) != 0)
		return 0;
	for (int k = 0; k < LAUNCH_FIGURES; k++)
		sp->lo[k] = fmin(sp->lo[k], f[k]), sp->hi[k] = fmax(sp->hi[k], f[k]);
	sp->seen++;
	return 0;
}

/* The launch figures that vary over (a uniform sample of) the space become coordinates, each
 * scaled to [0,1] over that sample. */
static void choose_launch_coordinates(struct model *m, struct run_info *run)
{
	struct spread sp = {.m = m};
	for (int k = 0; k < LAUNCH_FIGURES; k++)
		sp.lo[k] = INFINITY, sp.hi[k] = -INFINITY;
	const size_t *listed;
	long nlisted = run_listing(run, &listed);
	uint64_t rng = 0x6c61756e6368; /* the same sample every time: the model's coordinates stay put */
	random_configs(m->spec, listed, nlisted, &rng, LAUNCH_SAMPLE, spread_add, &sp);
	for (int k = 0; sp.seen && k < LAUNCH_FIGURES && m->d < GP_THETA_MAX - 2; k++)
		if (sp.hi[k] - sp.lo[k] > 1e-9) {
			m->launch_of[m->d - m->nparam_coords] = k;
			m->launch_lo[k] = sp.lo[k];
			m->launch_span[k] = sp.hi[k] - sp.lo[k];
			m->categorical[m->d++] = 0;
		}
}

struct model *model_fit(struct run_info *run, const struct node_info *node, const struct model_settings *settings,
			int *waiting)
{
	*waiting = 0;
	if (settings->picks == 0)
		return NULL;
	const struct t1_spec *spec = run->run.spec;
	size_t *indices, *own, np = spec->nparams;
	double *log_ms, *own_ms;
	/* --model-history's measurements first, so that the run's own are the latest */
	size_t n = context_history(run, node, &indices, &log_ms), history = n;
	size_t nown = context_observations(run, node, &own, &own_ms);
	indices = xreallocarray(indices, (n + nown) * np + 1, sizeof(*indices));
	log_ms = xreallocarray(log_ms, n + nown + 1, sizeof(*log_ms));
	memcpy(indices + n * np, own, nown * np * sizeof(*own));
	memcpy(log_ms + n, own_ms, nown * sizeof(*own_ms));
	n += nown;
	free(own);
	free(own_ms);
	struct observation *obs;
	size_t count = distinct_observations(np, indices, log_ms, n, history, &obs);
	size_t ncorrect = 0;
	while (ncorrect < count && !isnan(obs[ncorrect].y))
		ncorrect++;
	struct model *m = xcalloc(1, sizeof(*m));
	m->spec = spec;
	m->settings = *settings;
	m->values = xcalloc(spec->nnames, sizeof(*m->values));
	choose_coordinates(m);
	choose_launch_coordinates(m, run);
	if (m->d == 0 || m->d + 2 > GP_THETA_MAX) {
		log_info("%s: node %s: no model (%zu parameters to model, at most %d)", run->run.dir, node->state, m->d,
			 GP_THETA_MAX - 2);
		goto off;
	}
	if (count < settings->initial || ncorrect == 0) {
		*waiting = 1;
		log_info("%s: node %s: no model yet (%zu configurations measured, %zu correct; %zu needed)", run->run.dir,
			 node->state, count, ncorrect, settings->initial);
		goto off;
	}
	if (count > OBS_MAX) /* the best half, then the latest of the rest */
		qsort(obs + OBS_MAX / 2, count - OBS_MAX / 2, sizeof(*obs), by_latest_desc), count = OBS_MAX;
	double worst = obs[0].y, *x = xcalloc(count * m->d + 1, sizeof(*x)), *y = xcalloc(count + 1, sizeof(*y));
	m->measured = xcalloc(count * np + 1, sizeof(*m->measured));
	long best_own = -1; /* the run's best: what a proposal must beat */
	for (size_t i = 0; i < count; i++) {
		if (!isnan(obs[i].y))
			worst = fmax(worst, obs[i].y);
		if (obs[i].from_run && !isnan(obs[i].y) && best_own < 0)
			best_own = (long)i;
	}
	for (size_t i = 0; i < count; i++) {
		if (obs[i].from_run) /* only these are not proposed again */
			memcpy(m->measured + m->nmeasured++ * np, obs[i].indices, np * sizeof(*indices));
		encode(m, obs[i].indices, x + i * m->d);
		y[i] = isnan(obs[i].y) ? worst : obs[i].y; /* a failure is as bad as the worst correct time */
	}
	int rc = gp_fit(&m->gp, x, y, count, m->d, m->categorical, NULL, settings->iterations);
	free(x);
	if (rc != 0) {
		log_warn("%s: node %s: the model could not be fitted to %zu configurations; no model", run->run.dir,
			 node->state, count);
		free(y);
		goto off;
	}
	m->best_z = (obs[best_own >= 0 ? best_own : 0].y - m->gp.mean) / m->gp.sd;
	size_t *at = xcalloc(np + 1, sizeof(*at));
	double *xn = xcalloc(m->d + 1, sizeof(*xn)), mu, var;
	m->y_node = NAN;
	if (config_indices(spec, node->config, at) == 0) {
		for (size_t i = 0; i < count && isnan(m->y_node); i++)
			if (!isnan(obs[i].y) && memcmp(obs[i].indices, at, np * sizeof(*at)) == 0)
				m->y_node = obs[i].y;
		if (isnan(m->y_node)) {
			encode(m, at, xn);
			gp_predict(&m->gp, xn, &mu, &var, NULL);
			m->y_node = m->gp.mean + m->gp.sd * mu;
		}
	} else {
		m->y_node = m->gp.mean;
	}
	free(xn);
	free(at);
	free(y);
	log_info("%s: node %s: model of %zu configurations (%zu correct, %zu measurements from --model-history) over %zu "
		 "parameters and %zu launch figures, best %.4g ms",
		 run->run.dir, node->state, count, ncorrect, history, m->nparam_coords, m->d - m->nparam_coords,
		 exp(obs[0].y));
	free(obs);
	free(indices);
	free(log_ms);
	return m;
off:
	free(obs);
	free(indices);
	free(log_ms);
	model_free(m);
	return NULL;
}

size_t model_measured(const struct model *m)
{
	return m->nmeasured;
}

void model_free(struct model *m)
{
	if (!m)
		return;
	gp_release(&m->gp);
	for (size_t j = 0; j < m->d; j++)
		free(m->position[j]);
	free(m->position);
	free(m->param_of);
	free(m->categorical);
	free(m->measured);
	free(m->values);
	free(m);
}

/* ---------------------------------------------------------------- the pool */

struct pool {
	const struct model *m;
	size_t n, cap, stride; /* points; w's row length: observations + picks */
	size_t *indices;       /* n x nparams */
	double *x;	       /* n x d */
	double *mu, *var0, *var; /* var: after the picks so far (a kriging believer) */
	double *ei;		 /* expected improvement at mu, var */
	double *w;	       /* n x stride: L^-1 k(x), grown by one per pick */
	unsigned char *out;    /* picked, refused or weak */
	size_t *slots;	       /* open addressing on the indices: point + 1, 0 empty */
	size_t nslots;
};

static size_t slot_of(const struct pool *pool, const size_t *indices, size_t np)
{
	size_t s = (size_t)fnv1a64(indices, np * sizeof(*indices)) & (pool->nslots - 1);
	while (pool->slots[s] && memcmp(pool->indices + (pool->slots[s] - 1) * np, indices, np * sizeof(*indices)) != 0)
		s = (s + 1) & (pool->nslots - 1);
	return s;
}

static void grow(struct pool *pool, size_t np)
{
	size_t cap = pool->cap ? 2 * pool->cap : 1024;
	pool->indices = xreallocarray(pool->indices, cap * np + 1, sizeof(*pool->indices));
	pool->x = xreallocarray(pool->x, cap * pool->m->d + 1, sizeof(*pool->x));
	pool->mu = xreallocarray(pool->mu, cap, sizeof(*pool->mu));
	pool->var0 = xreallocarray(pool->var0, cap, sizeof(*pool->var0));
	pool->var = xreallocarray(pool->var, cap, sizeof(*pool->var));
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
	for (size_t i = 0; i < m->nmeasured; i++)
		if (memcmp(m->measured + i * np, indices, np * sizeof(*indices)) == 0)
			return -1;
	size_t i = pool->n++;
	pool->slots[s] = i + 1;
	memcpy(pool->indices + i * np, indices, np * sizeof(*indices));
	encode(m, indices, pool->x + i * m->d);
	gp_predict(&m->gp, pool->x + i * m->d, &pool->mu[i], &pool->var0[i], pool->w + i * pool->stride);
	pool->var[i] = pool->var0[i];
	pool->ei[i] = gp_expected_improvement(pool->mu[i], sqrt(pool->var[i]), m->best_z);
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

static int pool_fill(struct pool *pool, struct run_info *run, uint64_t seed)
{
	const struct model *m = pool->m;
	const struct t1_spec *spec = m->spec;
	size_t np = spec->nparams;
	const size_t *listed;
	long nlisted = run_listing(run, &listed);
	if (nlisted >= 0 && nlisted <= POOL_LISTED) {
		for (long i = 0; i < nlisted; i++)
			pool_add(pool, listed + (size_t)i * np);
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
			pool->ei[i] = gp_expected_improvement(pool->mu[i], sqrt(pool->var[i]), pool->m->best_z);
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
	int exploit = endgame(&pool);
	for (long best; picked < m->settings.picks && (best = pool_best(&pool, exploit)) >= 0;) {
		size_t i = (size_t)best;
		/* never weak: the largest expected improvement is worth its build by the model's
		 * own measure, near the best as far from it (--min-pred-gain prunes the rules') */
		double prior = gain_prior(m, pool.mu[i], pool.var0[i], NULL);
		const size_t *at = pool.indices + i * np;
		pool.out[i] = 1;
		if (!context_within(run, at))
			continue; /* asked for here only: a replay key per point of the pool costs */
		double mu_y = m->gp.mean + m->gp.sd * pool.mu[i], sd_y = m->gp.sd * sqrt(pool.var0[i]);
		struct proposal p = {.proposer = xstrdup("rules:model"), .prior = prior, .config = config_object(spec, at)};
		char *changes = changes_text(spec, from, at);
		p.method = xstrdup(move_method(spec, node->config, p.config));
		p.detail = xasprintf("%s: predicted %.4g ms (%.4g to %.4g)", changes, exp(mu_y), exp(mu_y - KAPPA * sd_y),
				     exp(mu_y + KAPPA * sd_y));
		free(changes);
		struct strbuf why;
		strbuf_init(&why);
		if (context_accept(run, node, &p, &why) == 0) {
			*list = xreallocarray(*list, *n + 1, sizeof(**list));
			(*list)[(*n)++] = p;
			believe(&pool, i, m->gp.n + believed++);
			picked++;
		} else {
			proposal_release(&p); /* in flight already, or the node's own: the next best */
		}
		strbuf_release(&why);
	}
	log_info("%s: node %s: the model proposes %zu of %zu configurations (%zu in flight)%s", run->run.dir, node->state,
		 picked, pool.n, believed - picked, exploit ? ", the lowest predicted times (the endgame)" : "");
	free(from);
	pool_release(&pool);
	return exploit;
}
