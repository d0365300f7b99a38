/* model_impl.h (kg-propose): what the model (model.c: its coordinates, history and fit)
 * and its picks (pool.c: the pool the acquisition is maximized over) share. */
#ifndef KG_PROPOSE_MODEL_IMPL_H
#define KG_PROPOSE_MODEL_IMPL_H

#include "common.h"

#include "gp.h"
#include "model.h"

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

/* Each history source's best configurations put in the pool (a space too large to list
 * would miss them). */
#define SOURCE_TOP 64

/* The launch's figures that become coordinates of their own when they vary: the blocks of
 * the grid and the threads of a block. Time follows them across parameters (a tile's two
 * sides set the waves of blocks together), which the parameters' own coordinates, one
 * length scale each, cannot express. (The dynamic shared memory as a third did no better
 * on the convolution and worse on the 1024^3 matmul: BENCHMARKS.md.) */
enum { LAUNCH_BLOCKS, LAUNCH_THREADS, LAUNCH_FIGURES };

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
	uint64_t pool_key; /* all its predictions of a listed space's pool depend on (pool.c keeps
			      them for the next pick of the same model); 0 with history */
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
	double agreement;    /* the largest Kendall tau with another source's ranking */
};

/* The coordinates of the configuration at indices (d of them) into x. */
void model_encode(const struct model *m, const size_t *indices, double *x);

/* The slot of the configuration at indices in an open-addressing table of nslots slots (a
 * power of two; each the number + 1 of a row of rows, np indices a row, 0 empty): where it
 * is, or the empty slot where it would go. The pool, the run's measured configurations and
 * each history file are indexed so. */
size_t model_indices_slot(const size_t *slots, size_t nslots, const size_t *rows, size_t np, const size_t *indices);

/* The slot of the configuration at indices among the run's measured ones. */
size_t model_measured_slot(const struct model *m, const size_t *indices);

/* The sources' share of a prediction, in the run model's standardized units: each source's
 * calibrated value by its weight; the variance, each one's residual variance by its weight
 * squared (none before the run can calibrate it). */
void model_sources_predict(const struct model *m, const size_t *indices, const double *x, double *mu, double *var);

/* The run model's prediction (its prior, mean 0 and variance 1, before it has one); w as
 * gp_predict's. */
void model_run_predict(const struct model *m, const double *x, double *mu, double *var, double *w);

/* The whole prediction: the run model by its weight, then the sources. */
double model_mixed_mu(const struct model *m, double mu_run, double mu_src);

double model_mixed_var(const struct model *m, double var_run, double var_src);

/* The expected improvement of a prediction over the run's best (standardized units). */
double model_improvement(const struct model *m, double mu, double var);

/* A move's prior (its expected improvement of ln time over the run's best) from a prediction
 * in standardized units; *weak (unless NULL) when even an optimistic outcome gains less than
 * min_pred_gain over the node, or does not beat the run's best (at a slow node every move
 * gains on the node: those the model knows cannot win are builds wasted). */
double model_gain_prior(const struct model *m, double mu, double var, enum move_weakness *weak);

#endif
