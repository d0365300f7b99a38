/* transfer.c: calibration of earlier measurements onto a run, and the ranking-weighted
 * trust in each source against the run's own model (transfer.h). */
#include "common.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "rng.h"
#include "transfer.h"
#include "xalloc.h"

void transfer_calibrate(const double *y, const double *h, size_t n, double *a, double *b, double *resid_var)
{
	double my = 0, mh = 0, shh = 0, shy = 0, syy = 0;
	for (size_t i = 0; i < n; i++)
		my += y[i], mh += h[i];
	if (n)
		my /= (double)n, mh /= (double)n;
	for (size_t i = 0; i < n; i++) {
		shh += (h[i] - mh) * (h[i] - mh);
		shy += (h[i] - mh) * (y[i] - my);
		syy += (y[i] - my) * (y[i] - my);
	}
	*b = 1, *a = my - mh, *resid_var = NAN;
	if (n < 3 || !(shh > 0))
		return;
	*b = fmax(shy / shh, 0);
	*a = my - *b * mh;
	double rss = 0;
	for (size_t i = 0; i < n; i++) {
		double r = y[i] - *a - *b * h[i];
		rss += r * r;
	}
	*resid_var = fmax(rss / (double)(n - 2), 1e-6 * syy / (double)n);
}

double transfer_misordered(const double *y, const double *h, size_t n)
{
	/* A pair counts by how far apart y has it: swapping two near-equal times (a flag worth a
	 * percent) is no evidence against a source that orders the large differences right. */
	double wrong = 0;
	for (size_t i = 0; i < n; i++)
		for (size_t j = 0; j < i; j++) {
			if (y[i] == y[j])
				continue;
			double d = fabs(y[i] - y[j]);
			if (h[i] == h[j])
				wrong += 0.5 * d;
			else if ((h[i] < h[j]) != (y[i] < y[j]))
				wrong += d;
		}
	return wrong;
}

double transfer_pair_weight(const double *y, size_t n)
{
	double whole = 0;
	for (size_t i = 0; i < n; i++)
		for (size_t j = 0; j < i; j++)
			whole += fabs(y[i] - y[j]);
	return whole;
}

/* A standard normal draw (Box-Muller; one of the pair is thrown away, so that each draw
 * takes two uniforms whatever came before). */
static double normal_draw(uint64_t *rng)
{
	double u = rng_uniform(rng), v = rng_uniform(rng);
	return sqrt(-2 * log(1 - u)) * cos(2 * M_PI * v);
}

static int by_value(const void *a, const void *b)
{
	double p = *(const double *)a, q = *(const double *)b;
	return p < q ? -1 : p > q;
}

double transfer_agreement(const double *a, const double *b, size_t n)
{
	double sum = 0, pairs = 0;
	for (size_t i = 0; i < n; i++)
		for (size_t j = 0; j < i; j++) {
			double p = (a[i] - a[j]) * (b[i] - b[j]);
			sum += p > 0 ? 1 : p < 0 ? -1 : 0;
			pairs++;
		}
	return pairs > 0 ? sum / pairs : 0;
}

void transfer_weights(const double *y, size_t n, const double *const *h, size_t nsrc, const double *loo_mu,
		      const double *loo_var, const double *bound, size_t samples, uint64_t seed, double *w,
		      double *misordered)
{
	double pairs = transfer_pair_weight(y, n), *src_loss = xcalloc(nsrc + 1, sizeof(*src_loss));
	double *run_loss = xcalloc(samples + 1, sizeof(*run_loss)), *draw = xcalloc(n + 1, sizeof(*draw));
	uint64_t rng = seed;
	for (size_t s = 0; s < nsrc; s++) {
		src_loss[s] = transfer_misordered(y, h[s], n);
		misordered[s] = pairs > 0 ? src_loss[s] / pairs : 0;
	}
	for (size_t k = 0; k < samples; k++) {
		for (size_t i = 0; i < n; i++)
			draw[i] = loo_mu ? loo_mu[i] + sqrt(fmax(loo_var[i], 0)) * normal_draw(&rng) : normal_draw(&rng);
		run_loss[k] = transfer_misordered(y, draw, n);
	}
	/* A source that ranks worse than the run model in 95 % of the draws is left out, and so
	 * is one that does not rank better than a ranker that knows nothing does in 3 draws of 4
	 * (one that ranks at random would otherwise keep a share of the draws, and its picks). */
	double *sorted = xcalloc(samples + 1, sizeof(*sorted));
	memcpy(sorted, run_loss, samples * sizeof(*sorted));
	qsort(sorted, samples, sizeof(*sorted), by_value);
	double p95 = samples ? sorted[(size_t)(0.95 * (double)(samples - 1) + 0.5)] : 0;
	misordered[nsrc] = samples && pairs > 0 ? sorted[(samples - 1) / 2] / pairs : 0;
	for (size_t k = 0; k < samples; k++) {
		for (size_t i = 0; i < n; i++)
			draw[i] = normal_draw(&rng);
		sorted[k] = transfer_misordered(y, draw, n);
	}
	qsort(sorted, samples, sizeof(*sorted), by_value);
	double chance = samples ? sorted[(size_t)(0.25 * (double)(samples - 1) + 0.5)] : 0;
	unsigned char *out = xcalloc(nsrc + 1, sizeof(*out));
	for (size_t s = 0; s < nsrc; s++)
		out[s] = samples && (src_loss[s] > p95 || (pairs > 0 && src_loss[s] > chance));
	memset(w, 0, (nsrc + 1) * sizeof(*w));
	for (size_t k = 0; k < samples; k++) {
		double least = run_loss[k];
		size_t ties = 1;
		for (size_t s = 0; s < nsrc; s++)
			if (!out[s] && src_loss[s] <= least)
				ties = src_loss[s] < least ? 1 : ties + 1, least = src_loss[s];
		for (size_t s = 0; s < nsrc; s++)
			if (!out[s] && src_loss[s] == least)
				w[s] += 1.0 / (double)ties;
		if (run_loss[k] == least)
			w[nsrc] += 1.0 / (double)ties;
	}
	for (size_t s = 0; s <= nsrc; s++)
		w[s] = samples ? w[s] / (double)samples : s == nsrc;
	/* A source's weight is at most the evidence that it ranks the run's measurements better
	 * than chance: its Kendall tau on them, less what chance alone reaches (the positive-part
	 * James-Stein estimate tau (1 - v0 / tau^2), v0 tau's variance for independent ranks), or
	 * else its agreement with other sources (bound[s]). With a few measurements, ranking
	 * them well is what one source in four does by luck, and then its picks choose where it
	 * is checked next; the run's model wins few draws then, so its share alone is no check. */
	double v0 = n > 1 ? 2.0 * (2.0 * (double)n + 5) / (9.0 * (double)n * (double)(n - 1)) : 0;
	for (size_t s = 0; bound && loo_mu && s < nsrc; s++) {
		double tau = transfer_agreement(y, h[s], n), evidence = tau > 0 ? fmax(tau - v0 / tau, 0) : 0;
		double limit = fmax(fmax(bound[s], evidence), 0);
		if (w[s] > limit) {
			w[nsrc] += w[s] - limit;
			w[s] = limit;
		}
	}
	free(out);
	free(sorted);
	free(draw);
	free(run_loss);
	free(src_loss);
}
