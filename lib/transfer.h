/* transfer.h: how far earlier measurements of a kernel (another GPU's table, another problem
 * size's, an earlier night's run) can be trusted in the run at hand, judged by the run's own.
 *
 * Each source's ln times are calibrated onto the run's by a line fitted to the run's
 * measurements, and the sources and the run's own model are weighed by how well each ranks
 * those measurements: the ranking-weighted ensemble of Feurer, Letham and Bakshy ("Scalable
 * meta-learning for Bayesian optimization using ranking-weighted Gaussian process ensembles",
 * 2018). A source's ranking is fixed by its values; the run model's is drawn from its
 * leave-one-out predictions, so its weight is the chance that it ranks the run's measurements
 * with fewer mistakes than every source. A source that ranks worse than the run model does in
 * 95 % of the draws gets no weight at all (no dilution by many bad sources), nor does one that
 * misorders more pairs than a ranker that knows nothing does in 3 draws of 4. Before the run
 * has a model of its own, a ranker that knows nothing (independent standard normal draws)
 * stands in for it, so a source must beat chance. Once it has one, a source's weight is at
 * most the evidence for it: its rank correlation with the run's measurements, less what
 * chance reaches on so few, or its agreement with another source (a shuffled table that
 * ranked a handful of measurements well by luck would otherwise lead the picks that decide
 * where the search goes, while the run's model is too weak to outvote it). kg-propose's model
 * is the user; docs/search.md gives the formulas. */
#ifndef KG_TRANSFER_H
#define KG_TRANSFER_H

#include "common.h"

#include <stddef.h>
#include <stdint.h>

/* y ~ a + b h by least squares over n points with b at least 0; *resid_var gets the residual
 * variance (n - 2 degrees of freedom, at least a millionth of y's variance). With fewer than
 * 3 points, or h constant: b = 1 and a the mean of y - h (a shift), *resid_var NAN. */
void transfer_calibrate(const double *y, const double *h, size_t n, double *a, double *b, double *resid_var);

/* The pairs of the n points that h orders otherwise than y, each by |y_i - y_j| (a tie of h
 * against a difference of y counts half; ties of y count nothing). */
double transfer_misordered(const double *y, const double *h, size_t n);

/* The pairs' whole weight, the sum of |y_i - y_j|: what a source that reverses y misorders. */
double transfer_pair_weight(const double *y, size_t n);

/* How far a and b order the n points alike: Kendall's tau, (concordant - discordant) / pairs,
 * a tie of either counting nothing (0 when n < 2). */
double transfer_agreement(const double *a, const double *b, size_t n);

/* The weights of nsrc sources (h[s]: source s's values at the n points) and, in w[nsrc], of
 * the run's own model, summing to 1: the share of `samples` draws in which each misorders
 * the least (ties shared). The run model's draws come from its leave-one-out predictions
 * loo_mu, loo_var (both NULL: a ranker that knows nothing); seed makes them reproducible.
 * With the run's model (loo_mu) and bound (not NULL), a source's weight is at most the
 * larger of bound[s] (what vouches for it apart from the run: its agreement with the other
 * sources) and the evidence that it ranks the points better than chance, its Kendall tau on
 * them shrunk by tau's variance under independence, max(tau - v0 / tau, 0) with
 * v0 = 2 (2n + 5) / (9 n (n - 1)); what it loses goes to the run's model. misordered[s]
 * (s < nsrc) gets each source's misordered share of the pairs' whole weight,
 * misordered[nsrc] the run model's median one (0 when no two points differ). */
void transfer_weights(const double *y, size_t n, const double *const *h, size_t nsrc, const double *loo_mu,
		      const double *loo_var, const double *bound, size_t samples, uint64_t seed, double *w,
		      double *misordered);

#endif
