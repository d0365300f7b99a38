/* model.h (kg-propose): the model-guided rule: a Gaussian process (lib/gp.h) fitted on every
 * measured configuration of the run proposes where the expected improvement is largest. */
#ifndef KG_PROPOSE_MODEL_H
#define KG_PROPOSE_MODEL_H

#include "common.h"

#include <stddef.h>
#include <stdint.h>

#include "context.h"

struct model_settings {
	size_t picks;	      /* --model-picks: the model's configurations per expansion; 0, no model */
	size_t initial;	      /* observations (one correct at least) before the model starts */
	double min_pred_gain; /* --min-pred-gain: a move whose optimistic gain is below it is weak */
	int iterations;	      /* steps of the hyperparameter fit */
	double budget_left;   /* the expansion's share of the build budget (NAN: none) */
};

/* The model of node's space, or NULL (reported at info level) when settings->picks is 0, the
 * space has no parameter to model, or the fit failed; also while the run has fewer than
 * settings->initial measurements of node's source or none correct, and then *waiting is set:
 * the rules draw the initial design. With history (run->history) it is returned while waiting
 * too, its picks the history's best, half the initial design's at most. */
struct model *model_fit(struct run_info *run, const struct node_info *node, const struct model_settings *settings,
			int *waiting);
void model_free(struct model *m);

/* How many distinct configurations of the space the run itself measured (--history's left
 * out). */
size_t model_measured(const struct model *m);

/* Appends to *list up to settings->picks configurations of the space, one at a time by
 * largest expected improvement over the run's best (each later pick conditioned on the
 * earlier ones at their predicted time: a kriging believer), each accepted by context_accept:
 * a refused one gives way to the next best. --min-pred-gain does not prune them: the largest
 * expected improvement is worth its build by the model's own measure. The pool:
 * every valid configuration the run has not measured when the space has at most 8,192, else
 * 2,048 random ones, the one-parameter moves of the 5 best measured and hill-climbs on the
 * expected improvement from the 10 best of them; seed draws the random ones. Outside the
 * endgame, once the run has measured as many configurations as the space has parameters
 * since its best, the first pick is the best's untried one-parameter move of largest expected
 * improvement, its proposal's lead set (where *list holds that move already, that one's). In the endgame
 * (settings->budget_left at most 6, and no point of the pool expected to gain
 * settings->min_pred_gain on the run's best) it picks by the lowest predicted time instead,
 * and returns 1 (else 0), so that the caller sends its picks first. */
int model_propose(struct model *m, struct run_info *run, const struct node_info *node, uint64_t seed,
		  struct proposal **list, size_t *n);

/* A configuration move's prior: its expected improvement of ln time over the run's best
 * (floored at 1e-3), which kg-select normalizes over siblings: the same order as the model's
 * own picks, wherever the node is; *weak set (else MOVE_STRONG) when even an optimistic
 * outcome (the predicted ln time less two standard deviations) would not be min_pred_gain
 * faster than the node, or not faster than the run's best. full is a complete configuration. */
enum move_weakness { MOVE_STRONG, MOVE_WEAK_ON_NODE, MOVE_WEAK_ON_BEST };
double model_prior(const struct model *m, const cJSON *full, enum move_weakness *weak);

#endif
