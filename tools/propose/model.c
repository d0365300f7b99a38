/* model.c (kg-propose): the model-guided rule: a Gaussian process on ln time over the node's
 * space, and earlier measurements as far as they rank the run's own, propose the configurations
 * of largest expected improvement and price every move. */
#include "common.h"

#include <math.h>
#include <string.h>

#include "fnv1a.h"
#include "gp.h"
#include "log.h"
#include "model.h"
#include "moves.h"
#include "rng.h"
#include "space.h"
#include "transfer.h"

/* The model holds at most OBS_MAX observations, FIT_MAX / 2 best and then the latest, and its
 * hyperparameters are fitted to the first FIT_MAX of them, so that a long run's step costs
 * what a short run's does: each step of the fit is cubic in its points, each prediction
 * quadratic in the model's. */
#define OBS_MAX 128
#define FIT_MAX 64
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
/* The history: the draws that weigh the sources (transfer.h), each source's best configurations
 * put in the pool (a space too large to list would miss them), and its fit's steps when it
 * lacks configurations (its model stands in for them). */
#define WEIGH_DRAWS 128
#define SOURCE_TOP 64
#define SOURCE_FIT_STEPS 30

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
	size_t d;		    /* coordinates: the parameters with two values or more, their
				       alignments, then the launch figures that vary */
	size_t nparam_coords;	    /* the first of them: the parameters', then their alignments' */
	size_t nalignments;	    /* of those, the alignments (alignment_positions) */
	int launch_of[LAUNCH_FIGURES]; /* each launch coordinate's figure */
	double launch_lo[LAUNCH_FIGURES], launch_span[LAUNCH_FIGURES]; /* of ln figure */
	struct pyval *values;	    /* scratch for t1_bind */
	size_t *param_of;	    /* d: each coordinate's parameter */
	unsigned char *categorical; /* d: compared as same or different */
	double **position;	    /* d: each value's coordinate (NULL: its index) */
	struct gp gp;	    /* the run's own model, when has_gp; else only its mean and sd */
	int has_gp;
	double w_run;	    /* the run model's weight beside the sources (1 without history) */
	struct source *src; /* --history, read for the node's space */
	size_t nsrc;
	size_t *measured; /* nmeasured x nparams: the configurations the run measured, distinct */
	size_t nmeasured;
	size_t *measured_slots; /* open addressing on them: point + 1, 0 empty */
	size_t nmeasured_slots;
	double best_z;	  /* the best correct observation, standardized */
	int no_best;	  /* the run has no correct measurement: picks by the lowest prediction */
	double y_node;	  /* ln ms of the node: measured, or else predicted */
	size_t stalled;	  /* configurations measured since the best was (its row in measured: 0) */
};

/* One --history file's measurements of the node's space. */
struct source {
	const char *path;
	size_t n;	     /* distinct configurations */
	size_t *indices;     /* n x nparams, best first */
	double *y;	     /* ln ms; a failure as its worst correct time */
	size_t *slots;	     /* open addressing on the indices: point + 1, 0 empty */
	size_t nslots;
	struct gp gp;	     /* where it did not measure (when has_gp; else its mean) */
	int has_gp;
	double mean;
	double a, b, resid;  /* calibrated onto the run: a + b y, residual variance (ln ms) */
	double weight, misordered;
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
		x[j] = m->position[j] ? m->position[j][i] : (double)i;
	}
	double f[LAUNCH_FIGURES];
	int known = j < m->d && launch_figures(m->spec, m->values, indices, f) == 0;
	for (; j < m->d; j++) { /* a launch that fails (then so does the build) sits mid-range */
		int k = m->launch_of[j - m->nparam_coords];
		x[j] = known ? (f[k] - m->launch_lo[k]) / m->launch_span[k] : 0.5;
	}
}

/* ---------------------------------------------------------------- predictions */

/* The slot of the configuration at indices in an open-addressing table of nslots slots (a
 * power of two; each the number + 1 of a row of rows, np indices a row, 0 empty): where it
 * is, or the empty slot where it would go. The pool, the run's measured configurations and
 * each history file are indexed so. */
static size_t indices_slot(const size_t *slots, size_t nslots, const size_t *rows, size_t np, const size_t *indices)
{
	size_t s = (size_t)fnv1a64(indices, np * sizeof(*indices)) & (nslots - 1);
	while (slots[s] && memcmp(rows + (slots[s] - 1) * np, indices, np * sizeof(*indices)) != 0)
		s = (s + 1) & (nslots - 1);
	return s;
}

static size_t source_slot(const struct source *src, const size_t *indices, size_t np)
{
	return indices_slot(src->slots, src->nslots, src->indices, np, indices);
}

static size_t measured_slot(const struct model *m, const size_t *indices)
{
	return indices_slot(m->measured_slots, m->nmeasured_slots, m->measured, m->spec->nparams, indices);
}

/* Source src's ln ms at the configuration at indices (x its coordinates): its measurement, or
 * else its model's mean, or else its mean. */
static double source_value(const struct model *m, const struct source *src, const size_t *indices, const double *x)
{
	size_t slot = source_slot(src, indices, m->spec->nparams);
	if (src->slots[slot])
		return src->y[src->slots[slot] - 1];
	return src->has_gp ? src->gp.mean + src->gp.sd * gp_mean(&src->gp, x) : src->mean;
}

/* The sources' share of a prediction, in the run model's standardized units: each source's
 * calibrated value by its weight; the variance, each one's residual variance by its weight
 * squared (none before the run can calibrate it). */
static void sources_predict(const struct model *m, const size_t *indices, const double *x, double *mu, double *var)
{
	*mu = 0, *var = 0;
	for (size_t k = 0; k < m->nsrc; k++) {
		const struct source *src = &m->src[k];
		if (!(src->weight > 0))
			continue;
		double v = src->a + src->b * source_value(m, src, indices, x);
		*mu += src->weight * (v - m->gp.mean) / m->gp.sd;
		if (!isnan(src->resid))
			*var += src->weight * src->weight * src->resid / (m->gp.sd * m->gp.sd);
	}
}

/* The run model's prediction (its prior, mean 0 and variance 1, before it has one); w as
 * gp_predict's. */
static void run_predict(const struct model *m, const double *x, double *mu, double *var, double *w)
{
	if (m->has_gp)
		gp_predict(&m->gp, x, mu, var, w);
	else
		*mu = 0, *var = 1;
}

/* The whole prediction: the run model by its weight, then the sources. */
static double mixed_mu(const struct model *m, double mu_run, double mu_src)
{
	return m->w_run * mu_run + mu_src;
}

static double mixed_var(const struct model *m, double var_run, double var_src)
{
	return m->w_run * m->w_run * var_run + var_src;
}

static void predict(const struct model *m, const size_t *indices, const double *x, double *mu, double *var)
{
	double mu_run, var_run, mu_src, var_src;
	run_predict(m, x, &mu_run, &var_run, NULL);
	sources_predict(m, indices, x, &mu_src, &var_src);
	*mu = mixed_mu(m, mu_run, mu_src);
	*var = mixed_var(m, var_run, var_src);
}

/* The expected improvement of a prediction over the run's best (standardized units). */
static double improvement(const struct model *m, double mu, double var)
{
	return m->no_best ? -mu : gp_expected_improvement(mu, sqrt(var), m->best_z);
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
			: !m->no_best && optimistic >= y_best			       ? MOVE_WEAK_ON_BEST
										       : MOVE_STRONG;
	if (m->no_best)
		return fmax(exp(-mu_y), PRIOR_FLOOR);
	return fmax(gp_expected_improvement(mu_y, sd_y, y_best), PRIOR_FLOOR);
}

double model_prior(const struct model *m, const cJSON *full, enum move_weakness *weak)
{
	size_t *indices = xcalloc(m->spec->nparams + 1, sizeof(*indices));
	double *x = xcalloc(m->d + 1, sizeof(*x)), mu, var, prior = PRIOR_FLOOR;
	*weak = MOVE_STRONG;
	if (config_indices(m->spec, full, indices) == 0) {
		encode(m, indices, x);
		predict(m, indices, x, &mu, &var);
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
	size_t first; /* the measurement that first met it */
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

/* The distinct configurations of the n measurements:
 * *obs gets one entry per configuration (correct if any measurement of it was), sorted best
 * first. Returns how many. */
static size_t distinct_observations(size_t nparams, const size_t *indices, const double *log_ms, size_t n,
				    struct observation **obs)
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
			(*obs)[count++] = (struct observation){.indices = at, .y = NAN, .first = i};
		(*obs)[j].latest = i;
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

/* Whether each value of an integer parameter is a power of two (1 or 0), when the parameter
 * has values of both kinds; else NULL. Time is rarely smooth across such values: a block
 * side of 80 or a tile of 3 misaligns rows with the warp, the wavefront, the memory
 * transactions and a problem size that is a power of two, and is often many times slower
 * than 64 or 4 beside it (the convolution on AMD GPUs: 30 times). An ordinal coordinate
 * cannot put 64 and 128 together apart from 80 to 112; this one can, as far as the fit finds
 * it matters (its length scale, like every other, is fitted). */
static double *alignment_positions(const struct t1_param *p)
{
	if (p->type != T1_INT && p->type != T1_UINT)
		return NULL;
	double *pos = xcalloc(p->nvalues, sizeof(*pos));
	size_t aligned = 0;
	for (size_t i = 0; i < p->nvalues; i++) {
		int64_t v = p->values[i].kind == PY_INT ? p->values[i].u.i : 0;
		pos[i] = v > 0 && (v & (v - 1)) == 0;
		aligned += pos[i] > 0;
	}
	if (aligned == 0 || aligned == p->nvalues) {
		free(pos);
		return NULL;
	}
	return pos;
}

static void choose_coordinates(struct model *m)
{
	const struct t1_spec *spec = m->spec;
	m->param_of = xcalloc(2 * spec->nparams + LAUNCH_FIGURES, sizeof(*m->param_of));
	m->categorical = xcalloc(2 * spec->nparams + LAUNCH_FIGURES, sizeof(*m->categorical));
	m->position = xcalloc(2 * spec->nparams + LAUNCH_FIGURES, sizeof(*m->position));
	for (size_t k = 0; k < spec->nparams; k++) {
		if (spec->params[k].nvalues < 2)
			continue; /* a constant tells the model nothing */
		enum t1_param_type t = spec->params[k].type;
		m->categorical[m->d] = t == T1_BOOL || t == T1_STRING;
		m->position[m->d] = m->categorical[m->d] ? NULL : ordinal_positions(&spec->params[k]);
		m->param_of[m->d++] = k;
	}
	for (size_t k = 0; k < spec->nparams && m->d < GP_THETA_MAX - 2 - LAUNCH_FIGURES; k++)
		if (spec->params[k].nvalues > 1 && (m->position[m->d] = alignment_positions(&spec->params[k]))) {
			m->categorical[m->d] = 1;
			m->param_of[m->d++] = k;
			m->nalignments++;
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

/* ---------------------------------------------------------------- the history */

/* The indices of obs[0..n) with the best half first, then every other one evenly: a source's
 * model needs the whole space's shape, not the latest region (it has no latest). */
static void thin_evenly(struct observation *obs, size_t n, size_t keep)
{
	if (n <= keep)
		return;
	size_t rest = keep - keep / 2;
	for (size_t j = 0; j < rest; j++)
		obs[keep / 2 + j] = obs[keep / 2 + j * (n - keep / 2) / rest];
}

/* History file k's measurements of node's space as a source; 0, or -1 when it has none
 * correct. */
static int source_load(struct model *m, struct run_info *run, const struct node_info *node, size_t k,
		       struct source *src)
{
	size_t np = m->spec->nparams, *indices;
	double *log_ms;
	size_t n = context_history(run, node, k, &indices, &log_ms);
	struct observation *obs;
	size_t count = distinct_observations(np, indices, log_ms, n, &obs), ncorrect = 0;
	while (ncorrect < count && !isnan(obs[ncorrect].y))
		ncorrect++;
	*src = (struct source){.path = run->history[k].path, .n = count};
	if (ncorrect == 0) {
		free(obs), free(indices), free(log_ms);
		return -1;
	}
	double worst = obs[ncorrect - 1].y;
	src->indices = xcalloc(count * np + 1, sizeof(*src->indices));
	src->y = xcalloc(count + 1, sizeof(*src->y));
	for (src->nslots = 16; src->nslots < 2 * count;)
		src->nslots *= 2;
	src->slots = xcalloc(src->nslots, sizeof(*src->slots));
	for (size_t i = 0; i < count; i++) {
		memcpy(src->indices + i * np, obs[i].indices, np * sizeof(*indices));
		src->y[i] = isnan(obs[i].y) ? worst : obs[i].y;
		src->mean += src->y[i] / (double)count;
		src->slots[source_slot(src, src->indices + i * np, np)] = i + 1;
	}
	const size_t *listed;
	long nlisted = run_listing(run, &listed);
	int complete = nlisted >= 0; /* it measured every listed configuration */
	for (long i = 0; complete && i < nlisted; i++)
		complete = src->slots[source_slot(src, listed + (size_t)i * np, np)] != 0;
	if (!complete && count >= m->settings.initial) { /* its model answers for the rest */
		size_t keep = count < FIT_MAX ? count : FIT_MAX;
		thin_evenly(obs, count, keep);
		double *x = xcalloc(keep * m->d + 1, sizeof(*x)), *y = xcalloc(keep + 1, sizeof(*y));
		for (size_t i = 0; i < keep; i++) {
			encode(m, obs[i].indices, x + i * m->d);
			y[i] = isnan(obs[i].y) ? worst : obs[i].y;
		}
		src->has_gp = gp_fit(&src->gp, x, y, keep, m->d, m->categorical, NULL, SOURCE_FIT_STEPS) == 0;
		free(x);
		free(y);
	}
	free(obs);
	free(indices);
	free(log_ms);
	return 0;
}

static void source_release(struct source *src)
{
	free(src->indices);
	free(src->y);
	free(src->slots);
	if (src->has_gp)
		gp_release(&src->gp);
}

/* Calibrates each source onto the run's n observations (ln ms y, failures as the worst) and
 * weighs the sources against the run's model by how well each ranks them (transfer.h). */
static void weigh_sources(struct model *m, const struct observation *obs, const double *y, size_t n, uint64_t seed)
{
	double **h = xcalloc(m->nsrc + 1, sizeof(*h)), *x = xcalloc(m->d + 1, sizeof(*x));
	for (size_t k = 0; k < m->nsrc; k++)
		h[k] = xcalloc(n + 1, sizeof(**h));
	for (size_t i = 0; i < n; i++) {
		encode(m, obs[i].indices, x);
		for (size_t k = 0; k < m->nsrc; k++)
			h[k][i] = source_value(m, &m->src[k], obs[i].indices, x);
	}
	double *loo_mu = NULL, *loo_var = NULL;
	if (m->has_gp) {
		loo_mu = xcalloc(n + 1, sizeof(*loo_mu));
		loo_var = xcalloc(n + 1, sizeof(*loo_var));
		gp_loo(&m->gp, loo_mu, loo_var);
	}
	double *w = xcalloc(m->nsrc + 1, sizeof(*w)), *wrong = xcalloc(m->nsrc + 1, sizeof(*wrong));
	transfer_weights(y, n, (const double *const *)h, m->nsrc, loo_mu, loo_var, WEIGH_DRAWS, seed, w, wrong);
	for (size_t k = 0; k < m->nsrc; k++) {
		struct source *src = &m->src[k];
		transfer_calibrate(y, h[k], n, &src->a, &src->b, &src->resid);
		src->weight = w[k];
		src->misordered = wrong[k];
		free(h[k]);
	}
	m->w_run = w[m->nsrc];
	free(w);
	free(wrong);
	free(loo_mu);
	free(loo_var);
	free(x);
	free(h);
}

/* RUN/history.json: how far the last model trusted each history file, for kg-tune's table
 * and trace.md (a failure to write it costs the search nothing: warned). */
static void write_trust(const struct model *m, struct run_info *run, const struct node_info *node, size_t count)
{
	cJSON *doc = json_object(), *list = cJSON_CreateArray();
	if (!list)
		xalloc_die();
	json_add_string(doc, "node", node->state);
	json_add_number(doc, "observations", (double)count);
	json_add_number(doc, "run_weight", m->w_run);
	for (size_t k = 0; k < m->nsrc; k++) {
		cJSON *e = json_object();
		json_add_string(e, "file", m->src[k].path);
		json_add_number(e, "configurations", (double)m->src[k].n);
		json_add_number(e, "weight", m->src[k].weight);
		json_add_number(e, "misordered", m->src[k].misordered);
		json_append(list, e);
	}
	json_add(doc, "sources", list);
	char *path = run_path(run->run.dir, RUN_HISTORY);
	if (json_write_file(path, doc, 1) != 0)
		log_warn("%s: cannot write the model's trust in its history", path);
	free(path);
	cJSON_Delete(doc);
}

/* ---------------------------------------------------------------- the fit */

/* Fits the run's model to the n points x, y: the hyperparameters to the first FIT_MAX (the
 * best half, then the latest), then the model to all of them. */
static int fit_thinned(struct model *m, const double *x, const double *y, size_t n)
{
	if (n <= FIT_MAX)
		return gp_fit(&m->gp, x, y, n, m->d, m->categorical, NULL, m->settings.iterations);
	int rc = gp_fit(&m->gp, x, y, FIT_MAX, m->d, m->categorical, NULL, m->settings.iterations);
	if (rc != 0)
		return rc;
	double theta[GP_THETA_MAX];
	memcpy(theta, m->gp.theta, (m->d + 2) * sizeof(*theta));
	gp_release(&m->gp);
	return gp_fit(&m->gp, x, y, n, m->d, m->categorical, theta, 0);
}

struct model *model_fit(struct run_info *run, const struct node_info *node, const struct model_settings *settings,
			int *waiting)
{
	*waiting = 0;
	if (settings->picks == 0)
		return NULL;
	const struct t1_spec *spec = run->run.spec;
	size_t *indices, np = spec->nparams;
	double *log_ms;
	size_t n = context_observations(run, node, &indices, &log_ms);
	struct observation *obs;
	size_t count = distinct_observations(np, indices, log_ms, n, &obs);
	size_t ncorrect = 0;
	while (ncorrect < count && !isnan(obs[ncorrect].y))
		ncorrect++;
	struct model *m = xcalloc(1, sizeof(*m));
	m->spec = spec;
	m->settings = *settings;
	m->values = xcalloc(spec->nnames, sizeof(*m->values));
	m->w_run = 1;
	choose_coordinates(m);
	choose_launch_coordinates(m, run);
	if (m->d == 0 || m->d + 2 > GP_THETA_MAX) {
		log_info("%s: node %s: no model (%zu parameters to model, at most %d)", run->run.dir, node->state, m->d,
			 GP_THETA_MAX - 2);
		goto off;
	}
	m->src = xcalloc(run->nhistory + 1, sizeof(*m->src));
	for (size_t k = 0; k < run->nhistory; k++)
		if (source_load(m, run, node, k, &m->src[m->nsrc]) == 0)
			m->nsrc++;
		else
			log_info("%s: node %s: %s: no correct measurement of this space", run->run.dir, node->state,
				 run->history[k].path);
	if (count < settings->initial || ncorrect == 0) {
		/* The initial design is drawn all the same: until the run can check its history, a
		 * few of the history's best go first, beside draws of the seed's (a history that
		 * misleads costs those few builds, and seeds still search apart). */
		*waiting = 1;
		m->settings.picks = (settings->initial + 1) / 2 < settings->picks ? (settings->initial + 1) / 2 : settings->picks;
	}
	if (m->nsrc == 0 && *waiting) {
		log_info("%s: node %s: no model yet (%zu configurations measured, %zu correct; %zu needed)", run->run.dir,
			 node->state, count, ncorrect, settings->initial);
		goto off;
	}
	m->measured = xcalloc(count * np + 1, sizeof(*m->measured));
	for (m->nmeasured_slots = 16; m->nmeasured_slots < 2 * count;)
		m->nmeasured_slots *= 2;
	m->measured_slots = xcalloc(m->nmeasured_slots, sizeof(*m->measured_slots));
	for (size_t i = 0; i < count; i++) { /* none is proposed again */
		memcpy(m->measured + m->nmeasured++ * np, obs[i].indices, np * sizeof(*indices));
		m->measured_slots[measured_slot(m, obs[i].indices)] = m->nmeasured;
	}
	size_t fitted = count < OBS_MAX ? count : OBS_MAX;
	if (count > FIT_MAX) /* the best FIT_MAX / 2, then the latest of the rest */
		qsort(obs + FIT_MAX / 2, count - FIT_MAX / 2, sizeof(*obs), by_latest_desc);
	double worst = ncorrect ? obs[0].y : 0, *x = xcalloc(fitted * m->d + 1, sizeof(*x)), *y = xcalloc(fitted + 1, sizeof(*y));
	for (size_t i = 0; i < fitted; i++)
		if (!isnan(obs[i].y))
			worst = fmax(worst, obs[i].y);
	for (size_t i = 0; i < fitted; i++) {
		encode(m, obs[i].indices, x + i * m->d);
		y[i] = isnan(obs[i].y) ? worst : obs[i].y; /* a failure is as bad as the worst correct time */
	}
	if (count >= settings->initial && ncorrect > 0) {
		m->has_gp = fit_thinned(m, x, y, fitted) == 0;
		if (!m->has_gp && m->nsrc == 0) {
			log_warn("%s: node %s: the model could not be fitted to %zu configurations; no model", run->run.dir,
				 node->state, fitted);
			free(x);
			free(y);
			goto off;
		}
	}
	free(x);
	if (!m->has_gp) { /* the history alone, on the run's scale: ln ms about its mean */
		m->gp.mean = 0, m->gp.sd = 1;
		for (size_t i = 0; i < ncorrect; i++)
			m->gp.mean += obs[i].y / (double)ncorrect;
	}
	if (m->nsrc)
		weigh_sources(m, obs, y, fitted, fnv1a64(node->state, strlen(node->state)) ^ count);
	m->no_best = ncorrect == 0;
	m->best_z = ncorrect ? (obs[0].y - m->gp.mean) / m->gp.sd : 0;
	for (size_t i = 1; i < count && ncorrect; i++)
		m->stalled += obs[i].first > obs[0].first;
	size_t *at = xcalloc(np + 1, sizeof(*at));
	double *xn = xcalloc(m->d + 1, sizeof(*xn)), mu, var;
	m->y_node = NAN;
	if (config_indices(spec, node->config, at) == 0) {
		for (size_t i = 0; i < count && isnan(m->y_node); i++)
			if (!isnan(obs[i].y) && memcmp(obs[i].indices, at, np * sizeof(*at)) == 0)
				m->y_node = obs[i].y;
		if (isnan(m->y_node)) {
			encode(m, at, xn);
			predict(m, at, xn, &mu, &var);
			m->y_node = m->gp.mean + m->gp.sd * mu;
		}
	} else {
		m->y_node = m->gp.mean;
	}
	free(xn);
	free(at);
	free(y);
	log_info("%s: node %s: model of %zu configurations (%zu correct%s) over %zu parameters, %zu alignments and "
		 "%zu launch figures, best %.4g ms",
		 run->run.dir, node->state, fitted, ncorrect, m->has_gp ? "" : "; too few for a model of the run's own",
		 m->nparam_coords - m->nalignments, m->nalignments, m->d - m->nparam_coords, ncorrect ? exp(obs[0].y) : NAN);
	for (size_t k = 0; k < m->nsrc; k++)
		log_info("%s: node %s: history %s: %zu configurations, weight %.3f (%.0f %% of the run's pairs misordered)",
			 run->run.dir, node->state, m->src[k].path, m->src[k].n, m->src[k].weight, 100 * m->src[k].misordered);
	if (m->nsrc)
		write_trust(m, run, node, count);
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
	if (m->has_gp)
		gp_release(&m->gp);
	for (size_t k = 0; k < m->nsrc; k++)
		source_release(&m->src[k]);
	free(m->src);
	for (size_t j = 0; j < m->d; j++)
		free(m->position[j]);
	free(m->position);
	free(m->param_of);
	free(m->categorical);
	free(m->measured);
	free(m->measured_slots);
	free(m->values);
	free(m);
}

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
	return indices_slot(pool->slots, pool->nslots, pool->indices, np, indices);
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
	if (m->measured_slots[measured_slot(m, indices)])
		return -1;
	size_t i = pool->n++;
	pool->slots[s] = i + 1;
	memcpy(pool->indices + i * np, indices, np * sizeof(*indices));
	encode(m, indices, pool->x + i * m->d);
	double mu_run, mu_src;
	run_predict(m, pool->x + i * m->d, &mu_run, &pool->var[i], pool->w + i * pool->stride);
	sources_predict(m, indices, pool->x + i * m->d, &mu_src, &pool->var_src[i]);
	pool->mu[i] = mixed_mu(m, mu_run, mu_src);
	pool->var0[i] = mixed_var(m, pool->var[i], pool->var_src[i]);
	pool->ei[i] = improvement(m, pool->mu[i], pool->var0[i]);
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
			pool->ei[i] = improvement(pool->m, pool->mu[i], mixed_var(pool->m, pool->var[i], pool->var_src[i]));
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
	/* never weak: the largest expected improvement is worth its build by the model's own
	 * measure, near the best as far from it (--min-pred-gain prunes the rules') */
	double mu_y = m->gp.mean + m->gp.sd * pool->mu[i], sd_y = m->gp.sd * sqrt(pool->var0[i]);
	struct proposal p = {.proposer = xstrdup("rules:model"), .prior = gain_prior(m, pool->mu[i], pool->var0[i], NULL),
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
