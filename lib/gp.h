/* gp.h: Gaussian-process regression for small tuning spaces (a few hundred points): a
 * Matérn-5/2 kernel with one length scale per dimension over ordinal coordinates in [0,1] and
 * categorical ones (same or different), hyperparameters fitted by maximum marginal likelihood
 * with weak priors, predictions, expected improvement, and the kriging-believer update that
 * picks a batch. kg-propose's model proposer is its user. */
#ifndef KG_GP_H
#define KG_GP_H

#include "common.h"

#include <stddef.h>

/* The hyperparameters, in logs: one length scale per dimension, then the signal and the
 * noise variance (of the standardized target). */
#define GP_THETA_MAX 66 /* 64 dimensions */

struct gp {
	size_t n, d;		    /* observations, dimensions */
	double *x;		    /* n x d coordinates: ordinal in [0,1], or a category's number */
	const unsigned char *categorical; /* d flags (the caller's) */
	double mean, sd;	    /* of the raw targets; z = (y - mean) / sd */
	double *z;		    /* n standardized targets */
	double theta[GP_THETA_MAX]; /* ln l_1..d, ln sf2, ln sn2 */
	double inv_ell2[GP_THETA_MAX], sf2; /* 1 / l^2 and sf2 of the theta last factored */
	double *chol;		    /* n x n lower Cholesky factor of K + (sn2 + 1e-8) I */
	double *alpha;		    /* n: (K + sn2 I)^-1 z */
	double nll;		    /* at theta, prior included */
};

/* The prior's mode: every length scale 0.5 (half an ordinal range), sf2 1, sn2 0.01. */
void gp_theta_mode(size_t d, double *theta);

/* Fits a GP to n points x (n x d) with targets y: standardizes y, then moves theta from
 * theta0 (the prior's mode when NULL) by at most `iterations` steps of iRprop- on the
 * negative log marginal likelihood plus the log prior (length scales ln N(ln 0.5, 1.5),
 * sf2 ln N(0, 1.5), sn2 ln N(ln 0.01, 2); boxes l in [0.05, 20], sf2 in [0.05, 20], sn2 in
 * [1e-4, 0.5]), keeping the best theta met. Returns 0, or -1 when no covariance could be
 * factored (then gp is released). gp keeps pointers to none of the inputs but categorical. */
int gp_fit(struct gp *gp, const double *x, const double *y, size_t n, size_t d, const unsigned char *categorical,
	   const double *theta0, int iterations);
void gp_release(struct gp *gp);

/* The objective at theta and its gradient (grad may be NULL), for gp's data; NAN when the
 * covariance cannot be factored. Exposed for tests. */
double gp_objective(struct gp *gp, const double *theta, double *grad);

/* The covariance of two points (no noise) under the theta last factored: gp->theta after
 * gp_fit, the argument of the last gp_objective after that. */
double gp_kernel(const struct gp *gp, const double *a, const double *b);

/* Prediction at x in standardized units: *mu, *var (of the latent function, >= 1e-12), and
 * w = L^-1 k(x) (n values) when w is not NULL. */
void gp_predict(const struct gp *gp, const double *x, double *mu, double *var, double *w);

/* The mean alone at x (standardized units): linear in the points, where gp_predict's variance
 * is quadratic. */
double gp_mean(const struct gp *gp, const double *x);

/* The leave-one-out predictions at each of the gp's n points from the other n - 1 (standardized
 * units, noise included; Rasmussen and Williams eq. 5.12): mu_i = z_i - alpha_i / [K^-1]_ii,
 * var_i = 1 / [K^-1]_ii. */
void gp_loo(const struct gp *gp, double *mu, double *var);

/* Expected improvement below best (minimization) of a normal prediction (mu, sd). */
double gp_expected_improvement(double mu, double sd, double best);

#endif
