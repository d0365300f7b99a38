/* model.c (kg-propose): the model-guided rule: a Gaussian process on ln time over the node's
 * space, and earlier measurements as far as they rank the run's own, propose the configurations
 * of largest expected improvement and price every move. */
#include "common.h"

#include <math.h>
#include <string.h>

#include "fnv1a.h"
#include "gp.h"
#include "log.h"
#include "model_impl.h"
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
/* The smallest prior, so that kg-select's normalization never divides by zero. */
#define PRIOR_FLOOR 1e-3
/* The history: the draws that weigh the sources (transfer.h), and a source's fit's steps when
 * it lacks configurations (its model stands in for them). */
#define WEIGH_DRAWS 128
#define SOURCE_FIT_STEPS 30

/* The spread of each figure is read from this many configurations at most. */
#define LAUNCH_SAMPLE 512
/* The sources' agreement with each other is read over this many configurations at most (a
 * Kendall tau's standard error over 256 is about 0.04; its cost is quadratic in them). */
#define AGREEMENT_SAMPLE 256


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

void model_encode(const struct model *m, const size_t *indices, double *x)
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

size_t model_indices_slot(const size_t *slots, size_t nslots, const size_t *rows, size_t np, const size_t *indices)
{
	size_t s = (size_t)fnv1a64(indices, np * sizeof(*indices)) & (nslots - 1);
	while (slots[s] && memcmp(rows + (slots[s] - 1) * np, indices, np * sizeof(*indices)) != 0)
		s = (s + 1) & (nslots - 1);
	return s;
}

static size_t source_slot(const struct source *src, const size_t *indices, size_t np)
{
	return model_indices_slot(src->slots, src->nslots, src->indices, np, indices);
}

size_t model_measured_slot(const struct model *m, const size_t *indices)
{
	return model_indices_slot(m->measured_slots, m->nmeasured_slots, m->measured, m->spec->nparams, indices);
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

void model_sources_predict(const struct model *m, const size_t *indices, const double *x, double *mu, double *var)
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

void model_run_predict(const struct model *m, const double *x, double *mu, double *var, double *w)
{
	if (m->has_gp)
		gp_predict(&m->gp, x, mu, var, w);
	else
		*mu = 0, *var = 1;
}

double model_mixed_mu(const struct model *m, double mu_run, double mu_src)
{
	return m->w_run * mu_run + mu_src;
}

double model_mixed_var(const struct model *m, double var_run, double var_src)
{
	return m->w_run * m->w_run * var_run + var_src;
}

static void predict(const struct model *m, const size_t *indices, const double *x, double *mu, double *var)
{
	double mu_run, var_run, mu_src, var_src;
	model_run_predict(m, x, &mu_run, &var_run, NULL);
	model_sources_predict(m, indices, x, &mu_src, &var_src);
	*mu = model_mixed_mu(m, mu_run, mu_src);
	*var = model_mixed_var(m, var_run, var_src);
}

double model_improvement(const struct model *m, double mu, double var)
{
	return m->no_best ? -mu : gp_expected_improvement(mu, sqrt(var), m->best_z);
}

double model_gain_prior(const struct model *m, double mu, double var, enum move_weakness *weak)
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
		model_encode(m, indices, x);
		predict(m, indices, x, &mu, &var);
		prior = model_gain_prior(m, mu, var, weak);
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
 * first. Returns how many. Found by hash: a history table of 11,130 configurations compared
 * pairwise was three quarters of a kg-propose call. */
static size_t distinct_observations(size_t nparams, const size_t *indices, const double *log_ms, size_t n,
				    struct observation **obs)
{
	size_t count = 0, *correct = xcalloc(n + 1, sizeof(*correct)), nslots = 16;
	while (nslots < 2 * n)
		nslots *= 2;
	/* slots: 1 + the first measurement of a configuration; entry: that measurement's in *obs */
	size_t *slots = xcalloc(nslots, sizeof(*slots)), *entry = xcalloc(n + 1, sizeof(*entry));
	*obs = xcalloc(n + 1, sizeof(**obs));
	for (size_t i = 0; i < n; i++) {
		const size_t *at = indices + i * nparams;
		size_t s = model_indices_slot(slots, nslots, indices, nparams, at);
		if (!slots[s]) {
			slots[s] = i + 1;
			entry[i] = count;
			(*obs)[count++] = (struct observation){.indices = at, .y = NAN, .first = i};
		}
		size_t j = entry[slots[s] - 1];
		(*obs)[j].latest = i;
		if (!isnan(log_ms[i])) {
			(*obs)[j].y = correct[j] ? ((*obs)[j].y * (double)correct[j] + log_ms[i]) / (double)(correct[j] + 1)
						 : log_ms[i];
			correct[j]++;
		}
	}
	free(correct);
	free(slots);
	free(entry);
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

/* ---------------------------------------------------------------- fits remembered */

/* The hyperparameters of the fits this process made, by a hash of what each was fitted to:
 * the picks of a batch on one kernel see the same measurements, and the fit's steps (most of
 * a pick's time, and a batch has up to 16 picks) are taken once. gp_fit from the fitted theta
 * with no step factors the same model, bit for bit. */
#define FITS_REMEMBERED 16
static struct fit_memo {
	uint64_t key;
	int used;
	double theta[GP_THETA_MAX];
} fits[FITS_REMEMBERED];
static size_t fits_next;

/* gp_fit from the prior's mode, or from the theta a fit to the same data ended at. */
static int fit_remembered(struct gp *gp, const double *x, const double *y, size_t n, size_t d,
			  const unsigned char *categorical, int iterations)
{
	size_t shape[3] = {n, d, (size_t)iterations};
	uint64_t key = fnv1a64_add(FNV1A64_BASIS, shape, sizeof(shape));
	key = fnv1a64_words(key, x, n * d * sizeof(*x));
	key = fnv1a64_words(key, y, n * sizeof(*y));
	if (categorical)
		key = fnv1a64_add(key, categorical, d);
	for (size_t k = 0; k < FITS_REMEMBERED; k++)
		if (fits[k].used && fits[k].key == key) {
			log_debug("the hyperparameters fitted to these %zu points before are used again", n);
			return gp_fit(gp, x, y, n, d, categorical, fits[k].theta, 0);
		}
	int rc = gp_fit(gp, x, y, n, d, categorical, NULL, iterations);
	if (rc == 0) {
		struct fit_memo *f = &fits[fits_next++ % FITS_REMEMBERED];
		f->key = key;
		f->used = 1;
		memcpy(f->theta, gp->theta, (d + 2) * sizeof(*f->theta));
	}
	return rc;
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
			model_encode(m, obs[i].indices, x + i * m->d);
			y[i] = isnan(obs[i].y) ? worst : obs[i].y;
		}
		src->has_gp = fit_remembered(&src->gp, x, y, keep, m->d, m->categorical, SOURCE_FIT_STEPS) == 0;
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

struct agreement_sample {
	const struct model *m;
	double **h; /* each source's values at the sample */
	double *x;
	size_t n;
};

static int agreement_add(void *ctx, const size_t *indices)
{
	struct agreement_sample *as = ctx;
	model_encode(as->m, indices, as->x);
	for (size_t k = 0; k < as->m->nsrc; k++)
		as->h[k][as->n] = source_value(as->m, &as->m->src[k], indices, as->x);
	as->n++;
	return 0;
}

/* Each source's agreement with the others: the largest Kendall tau between its ranking and
 * another source's over a fixed uniform sample of the space (0 for a source alone). Sources
 * measured apart (other GPUs, sizes, nights) that rank the space alike are unlikely to do so
 * by chance; one that no other corroborates has only the run's own measurements to vouch
 * for it (transfer.h). */
static void source_agreement(struct model *m, struct run_info *run, double *agree)
{
	struct agreement_sample as = {.m = m, .h = xcalloc(m->nsrc + 1, sizeof(*as.h)), .x = xcalloc(m->d + 1, sizeof(*as.x))};
	for (size_t k = 0; k < m->nsrc; k++)
		as.h[k] = xcalloc(AGREEMENT_SAMPLE, sizeof(**as.h));
	const size_t *listed;
	long nlisted = run_listing(run, &listed);
	uint64_t rng = 0x6167726565; /* the same sample every time: the bound stays put */
	if (m->nsrc > 1)
		random_configs(m->spec, listed, nlisted, &rng, AGREEMENT_SAMPLE, agreement_add, &as);
	for (size_t k = 0; k < m->nsrc; k++)
		agree[k] = 0;
	for (size_t k = 0; k < m->nsrc; k++)
		for (size_t j = 0; j < k; j++) {
			double tau = transfer_agreement(as.h[k], as.h[j], as.n);
			agree[k] = fmax(agree[k], tau), agree[j] = fmax(agree[j], tau);
		}
	for (size_t k = 0; k < m->nsrc; k++)
		free(as.h[k]);
	free(as.h);
	free(as.x);
}

/* Calibrates each source onto the run's n observations (ln ms y, failures as the worst) and
 * weighs the sources against the run's model by how well each ranks them (transfer.h). */
static void weigh_sources(struct model *m, struct run_info *run, const struct observation *obs, const double *y,
			  size_t n, uint64_t seed)
{
	double **h = xcalloc(m->nsrc + 1, sizeof(*h)), *x = xcalloc(m->d + 1, sizeof(*x));
	for (size_t k = 0; k < m->nsrc; k++)
		h[k] = xcalloc(n + 1, sizeof(**h));
	for (size_t i = 0; i < n; i++) {
		model_encode(m, obs[i].indices, x);
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
	double *agree = xcalloc(m->nsrc + 1, sizeof(*agree));
	if (m->has_gp)
		source_agreement(m, run, agree);
	transfer_weights(y, n, (const double *const *)h, m->nsrc, loo_mu, loo_var, agree, WEIGH_DRAWS, seed, w, wrong);
	for (size_t k = 0; k < m->nsrc; k++) {
		struct source *src = &m->src[k];
		transfer_calibrate(y, h[k], n, &src->a, &src->b, &src->resid);
		src->weight = w[k];
		src->misordered = wrong[k];
		src->agreement = agree[k];
		free(h[k]);
	}
	m->w_run = w[m->nsrc];
	free(agree);
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
		json_add_number(e, "agreement", m->src[k].agreement);
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
		return fit_remembered(&m->gp, x, y, n, m->d, m->categorical, m->settings.iterations);
	int rc = fit_remembered(&m->gp, x, y, FIT_MAX, m->d, m->categorical, m->settings.iterations);
	if (rc != 0)
		return rc;
	double theta[GP_THETA_MAX];
	memcpy(theta, m->gp.theta, (m->d + 2) * sizeof(*theta));
	gp_release(&m->gp);
	return gp_fit(&m->gp, x, y, n, m->d, m->categorical, theta, 0);
}

/* A hash of what the model's predictions and the pool's membership depend on: the GP's points,
 * weights and hyperparameters, the best, and the configurations measured (never in the
 * pool). Sources are left out: a model with history is not keyed (their weights differ from
 * node to node). */
static uint64_t pool_key(const struct model *m)
{
	double figures[6] = {m->best_z, m->no_best, m->w_run, m->has_gp, m->gp.mean, m->gp.sd};
	size_t shape[3] = {m->d, m->has_gp ? m->gp.n : 0, m->nmeasured};
	uint64_t h = fnv1a64_add(FNV1A64_BASIS, shape, sizeof(shape));
	h = fnv1a64_words(h, figures, sizeof(figures));
	if (m->has_gp) {
		h = fnv1a64_words(h, m->gp.theta, (m->d + 2) * sizeof(*m->gp.theta));
		h = fnv1a64_words(h, m->gp.x, m->gp.n * m->d * sizeof(*m->gp.x));
		h = fnv1a64_words(h, m->gp.alpha, m->gp.n * sizeof(*m->gp.alpha));
	}
	h = fnv1a64_words(h, m->measured, m->nmeasured * m->spec->nparams * sizeof(*m->measured));
	return h ? h : 1;
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
		m->measured_slots[model_measured_slot(m, obs[i].indices)] = m->nmeasured;
	}
	size_t fitted = count < OBS_MAX ? count : OBS_MAX;
	if (count > FIT_MAX) /* the best FIT_MAX / 2, then the latest of the rest */
		qsort(obs + FIT_MAX / 2, count - FIT_MAX / 2, sizeof(*obs), by_latest_desc);
	double worst = ncorrect ? obs[0].y : 0, *x = xcalloc(fitted * m->d + 1, sizeof(*x)), *y = xcalloc(fitted + 1, sizeof(*y));
	for (size_t i = 0; i < fitted; i++)
		if (!isnan(obs[i].y))
			worst = fmax(worst, obs[i].y);
	for (size_t i = 0; i < fitted; i++) {
		model_encode(m, obs[i].indices, x + i * m->d);
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
		weigh_sources(m, run, obs, y, fitted, fnv1a64(node->state, strlen(node->state)) ^ count);
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
			model_encode(m, at, xn);
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
		log_info("%s: node %s: history %s: %zu configurations, weight %.3f (%.0f %% of the run's order misordered)",
			 run->run.dir, node->state, m->src[k].path, m->src[k].n, m->src[k].weight, 100 * m->src[k].misordered);
	if (m->nsrc)
		write_trust(m, run, node, count);
	m->pool_key = m->nsrc ? 0 : pool_key(m);
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
