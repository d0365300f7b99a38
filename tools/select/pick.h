/* pick.h (kg-select): the picker, which decides what to try next: PUCT descent with
 * progressive widening, rollouts, the picks in flight, and when the search is over. */
#ifndef KG_SELECT_PICK_H
#define KG_SELECT_PICK_H

#include "common.h"

#include "graph.h"
#include "step.h"

/* Exit status when the search is over (budget spent or converged): not an error. */
#define EXIT_SEARCH_DONE 5

/* What a pick is asked for: kg-select's options for picking. */
struct pick_options {
	const char *pending; /* --pending FILE: records picked already and not learned yet */
	long batch;	     /* --batch K */
	long fill;	     /* --fill N: candidates the batch should make, judged by the log; 0: off */
};

/* Picks one batch from step->g (a graph behind its log must have caught up first) and writes
 * its records to stdout, or {"op": "stop"} when the search is over; saves the graph. Returns
 * KG_EXIT_OK, EXIT_SEARCH_DONE, KG_EXIT_INPUT or KG_EXIT_USAGE for a bad or missing
 * --pending FILE (nothing picked), or KG_EXIT_IO. */
int run_select(struct step *step, const struct pick_options *opt);
/* Whether the search is over by its budget or by convergence: 1 with *reason "budget" or
 * "converged" (a static string), else 0. */
int stop_reason(const struct graph *g, const char **reason);

#endif
