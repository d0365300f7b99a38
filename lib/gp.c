/* gp.c: Gaussian-process regression with a Matérn-5/2 kernel, fitted by iRprop- on the
 * negative log marginal likelihood with weak log-normal priors (Rasmussen and Williams,
 * "Gaussian Processes for Machine Learning", ch. 2 and 5; Igel and Hüsken 2000 for iRprop-). */
#include "common.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gp.h"
#include "xalloc.h"

#define SQRT5 2.23606797749978969641
#define JITTER 1e-8

/* Priors and boxes of theta, in logs (see gp.h). */
static void theta_prior(size_t d, size_t j, double *mean, double *sd, double *lo, double *hi)
{
	if (j < d) {
		*mean = log(0.5), *sd = 1.5, *lo = log(0.05), *hi = log(20);
	} else if (j == d) {
		*mean = 0, *sd = 1.5, *lo = log(0.05), *hi = log(20);
	} else {
		*mean = log(0.01), *sd = 2, *lo = log(1e-4), *hi = log(0.5);
	}
}

void gp_theta_mode(size_t d, double *theta)
{
	for (size_t j = 0; j < d + 2; j++) {
		double sd, lo, hi;
		theta_prior(d, j, &theta[j], &sd, &lo, &hi);
	}
}

/* r, the distance between a and b scaled by the length scales (inv_ell2: 1 / l^2 per
 * dimension, computed once per theta, as exp is the cost here); diff2[k] gets each
 * dimension's squared difference (unscaled) when not NULL. */
static double distance(const struct gp *gp, const double *inv_ell2, const double *a, const double *b, double *diff2)
{
	double r2 = 0;
	for (size_t k = 0; k < gp->d; k++) {
		double delta = gp->categorical[k] ? (a[k] != b[k]) : a[k] - b[k];
		if (diff2)
			diff2[k] = delta * delta;
		r2 += delta * delta * inv_ell2[k];
	}
	return sqrt(r2);
}

static double matern52(double r)
{
	return (1 + SQRT5 * r + 5.0 / 3.0 * r * r) * exp(-SQRT5 * r);
}

double gp_kernel(const struct gp *gp, const double *a, const double *b)
{
	return gp->sf2 * matern52(distance(gp, gp->inv_ell2, a, b, NULL));
}

/* The dot product of a and b (n values), in four partial sums: the loops of the fit and of
 * the predictions are these, and one sum would wait on each addition. */
static double dot(const double *a, const double *b, size_t n)
{
	double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
	size_t k = 0;
	for (; k + 4 <= n; k += 4) {
		s0 += a[k] * b[k];
		s1 += a[k + 1] * b[k + 1];
		s2 += a[k + 2] * b[k + 2];
		s3 += a[k + 3] * b[k + 3];
	}
	for (; k < n; k++)
		s0 += a[k] * b[k];
	return (s0 + s1) + (s2 + s3);
}

/* In-place Cholesky factorization of the n x n symmetric matrix a (its lower triangle is
 * read and replaced by L; the upper is zeroed). Returns -1 when a is not positive definite. */
static int cholesky(double *a, size_t n)
{
	for (size_t j = 0; j < n; j++) {
		double s = a[j * n + j] - dot(a + j * n, a + j * n, j);
		if (!(s > 0))
			return -1;
		double l = sqrt(s);
		a[j * n + j] = l;
		for (size_t i = j + 1; i < n; i++)
			a[i * n + j] = (a[i * n + j] - dot(a + i * n, a + j * n, j)) / l;
		for (size_t i = 0; i < j; i++)
			a[i * n + j] = 0;
	}
	return 0;
}

/* Solves L v = b in place (L lower triangular, n x n). */
static void forward(const double *l, size_t n, double *v)
{
	for (size_t i = 0; i < n; i++)
		v[i] = (v[i] - dot(l + i * n, v, i)) / l[i * n + i];
}

/* Solves L^T v = b in place. */
static void backward(const double *l, size_t n, double *v)
{
	for (size_t i = n; i-- > 0;) {
		double s = v[i];
		for (size_t k = i + 1; k < n; k++)
			s -= l[k * n + i] * v[k];
		v[i] = s / l[i * n + i];
	}
}

/* The covariance of the data under theta, noise and jitter added, factored into gp->chol;
 * gp->alpha solved. Returns -1 when it is not positive definite. */
static int factor(struct gp *gp, const double *theta)
{
	size_t n = gp->n;
	double sn2 = exp(theta[gp->d + 1]);
	for (size_t k = 0; k < gp->d; k++)
		gp->inv_ell2[k] = exp(-2 * theta[k]);
	gp->sf2 = exp(theta[gp->d]);
	for (size_t i = 0; i < n; i++) {
		for (size_t j = 0; j <= i; j++) {
			double k = gp_kernel(gp, gp->x + i * gp->d, gp->x + j * gp->d);
			gp->chol[i * n + j] = k + (i == j ? sn2 + JITTER : 0);
		}
	}
	if (cholesky(gp->chol, n) != 0)
		return -1;
	memcpy(gp->alpha, gp->z, n * sizeof(*gp->alpha));
	forward(gp->chol, n, gp->alpha);
	backward(gp->chol, n, gp->alpha);
	return 0;
}

double gp_objective(struct gp *gp, const double *theta, double *grad)
{
	size_t n = gp->n, d = gp->d, p = d + 2;
	if (factor(gp, theta) != 0)
		return NAN;
	double nll = 0;
	for (size_t i = 0; i < n; i++)
		nll += 0.5 * gp->z[i] * gp->alpha[i] + log(gp->chol[i * n + i]);
	for (size_t j = 0; j < p; j++) {
		double mean, sd, lo, hi;
		theta_prior(d, j, &mean, &sd, &lo, &hi);
		nll += 0.5 * (theta[j] - mean) * (theta[j] - mean) / (sd * sd);
		if (grad)
			grad[j] = (theta[j] - mean) / (sd * sd);
	}
	if (!grad)
		return nll;
	/* W = alpha alpha^T - A^-1, with A^-1 = M^T M for M = L^-1 (lower triangular, so each
	 * of its columns starts at the diagonal): a third of the work of solving for each column.
	 * mt holds M's columns as rows, so that every sum runs over contiguous memory. */
	double *mt = xcalloc(n * n + 1, sizeof(*mt)), *inv = xcalloc(n * n + 1, sizeof(*inv));
	for (size_t c = 0; c < n; c++)
		for (size_t i = c; i < n; i++)
			mt[c * n + i] = ((i == c ? 1 : 0) - dot(gp->chol + i * n + c, mt + c * n + c, i - c)) / gp->chol[i * n + i];
	for (size_t i = 0; i < n; i++)
		for (size_t j = 0; j <= i; j++)
			inv[i * n + j] = dot(mt + i * n + i, mt + j * n + i, n - i);
	free(mt);
	double sf2 = exp(theta[d]), sn2 = exp(theta[d + 1]);
	double *diff2 = xcalloc(d + 1, sizeof(*diff2)), *acc = xcalloc(d + 1, sizeof(*acc));
	double trace = 0, ksum = 0;
	for (size_t i = 0; i < n; i++) {
		trace += gp->alpha[i] * gp->alpha[i] - inv[i * n + i];
		ksum += (gp->alpha[i] * gp->alpha[i] - inv[i * n + i]) * sf2; /* K_ii = sf2 */
		for (size_t j = 0; j < i; j++) {
			double w = gp->alpha[i] * gp->alpha[j] - inv[i * n + j];
			double r = distance(gp, gp->inv_ell2, gp->x + i * d, gp->x + j * d, diff2);
			double e = exp(-SQRT5 * r);
			ksum += 2 * w * sf2 * (1 + SQRT5 * r + 5.0 / 3.0 * r * r) * e;
			double f = 2 * w * sf2 * (5.0 / 3.0) * (1 + SQRT5 * r) * e; /* both (i,j) and (j,i) */
			for (size_t k = 0; k < d; k++)
				acc[k] += f * diff2[k];
		}
	}
	for (size_t k = 0; k < d; k++)
		grad[k] += -0.5 * acc[k] * gp->inv_ell2[k];
	grad[d] += -0.5 * ksum;
	grad[d + 1] += -0.5 * sn2 * trace;
	free(inv);
	free(diff2);
	free(acc);
	return nll;
}

void gp_release(struct gp *gp)
{
	free(gp->x);
	free(gp->z);
	free(gp->chol);
	free(gp->alpha);
	memset(gp, 0, sizeof(*gp));
}

int gp_fit(struct gp *gp, const double *x, const double *y, size_t n, size_t d, const unsigned char *categorical,
	   const double *theta0, int iterations)
{
	size_t p = d + 2;
	memset(gp, 0, sizeof(*gp));
	if (p > GP_THETA_MAX || n == 0)
		return -1;
	gp->n = n;
	gp->d = d;
	gp->categorical = categorical;
	gp->x = xcalloc(n * d + 1, sizeof(*gp->x));
	memcpy(gp->x, x, n * d * sizeof(*gp->x));
	gp->z = xcalloc(n + 1, sizeof(*gp->z));
	gp->chol = xcalloc(n * n + 1, sizeof(*gp->chol));
	gp->alpha = xcalloc(n + 1, sizeof(*gp->alpha));
	double sum = 0, sq = 0;
	for (size_t i = 0; i < n; i++)
		sum += y[i];
	gp->mean = sum / (double)n;
	for (size_t i = 0; i < n; i++)
		sq += (y[i] - gp->mean) * (y[i] - gp->mean);
	gp->sd = sqrt(sq / (double)n);
	if (!(gp->sd > 0))
		gp->sd = 1;
	for (size_t i = 0; i < n; i++)
		gp->z[i] = (y[i] - gp->mean) / gp->sd;

	double theta[GP_THETA_MAX], best[GP_THETA_MAX], grad[GP_THETA_MAX], prev[GP_THETA_MAX] = {0}, step[GP_THETA_MAX];
	if (theta0)
		memcpy(theta, theta0, p * sizeof(*theta));
	else
		gp_theta_mode(d, theta);
	memcpy(best, theta, p * sizeof(*theta));
	double best_f = INFINITY;
	for (size_t j = 0; j < p; j++)
		step[j] = 0.1;
	for (int it = 0; it <= iterations; it++) {
		double f = gp_objective(gp, theta, it < iterations ? grad : NULL);
		if (isnan(f)) { /* not factorable: back to the best, smaller steps */
			memcpy(theta, best, p * sizeof(*theta));
			for (size_t j = 0; j < p; j++)
				step[j] = fmax(step[j] * 0.5, 1e-3), prev[j] = 0;
			continue;
		}
		if (f < best_f) {
			best_f = f;
			memcpy(best, theta, p * sizeof(*theta));
		}
		if (it == iterations)
			break;
		for (size_t j = 0; j < p; j++) {
			double mean, sd, lo, hi;
			theta_prior(d, j, &mean, &sd, &lo, &hi);
			if (grad[j] * prev[j] > 0) {
				step[j] = fmin(step[j] * 1.2, 1);
			} else if (grad[j] * prev[j] < 0) {
				step[j] = fmax(step[j] * 0.5, 1e-3);
				grad[j] = 0;
			}
			theta[j] -= grad[j] > 0 ? step[j] : grad[j] < 0 ? -step[j] : 0;
			theta[j] = fmin(fmax(theta[j], lo), hi);
			prev[j] = grad[j];
		}
	}
	if (!isfinite(best_f) || isnan(gp_objective(gp, best, NULL))) {
		gp_release(gp);
		return -1;
	}
	memcpy(gp->theta, best, p * sizeof(*best));
	gp->nll = best_f;
	return 0;
}

void gp_predict(const struct gp *gp, const double *x, double *mu, double *var, double *w)
{
	size_t n = gp->n;
	double *k = w ? w : xcalloc(n + 1, sizeof(*k));
	double m = 0;
	for (size_t i = 0; i < n; i++) {
		k[i] = gp_kernel(gp, x, gp->x + i * gp->d);
		m += k[i] * gp->alpha[i];
	}
	forward(gp->chol, n, k);
	double s = gp->sf2;
	for (size_t i = 0; i < n; i++)
		s -= k[i] * k[i];
	*mu = m;
	*var = fmax(s, 1e-12);
	if (!w)
		free(k);
}

double gp_mean(const struct gp *gp, const double *x)
{
	double m = 0;
	for (size_t i = 0; i < gp->n; i++)
		m += gp_kernel(gp, x, gp->x + i * gp->d) * gp->alpha[i];
	return m;
}

void gp_loo(const struct gp *gp, double *mu, double *var)
{
	size_t n = gp->n;
	double *col = xcalloc(n + 1, sizeof(*col));
	for (size_t i = 0; i < n; i++) { /* [K^-1]_ii = |L^-1 e_i|^2, e_i's solve starting at i */
		memset(col, 0, n * sizeof(*col));
		col[i] = 1;
		forward(gp->chol, n, col);
		double kii = dot(col, col, n);
		var[i] = 1 / kii;
		mu[i] = gp->z[i] - gp->alpha[i] / kii;
	}
	free(col);
}

double gp_expected_improvement(double mu, double sd, double best)
{
	if (!(sd > 0))
		return fmax(best - mu, 0);
	double u = (best - mu) / sd;
	double cdf = 0.5 * erfc(-u / sqrt(2.0)), pdf = exp(-0.5 * u * u) / sqrt(2.0 * M_PI);
	return sd * (u * cdf + pdf);
}
