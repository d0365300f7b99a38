/* regraph.h: the ReGraph file (regraph.json, written by kg-regraph build): read and checked,
 * and the statistics of one method-to-method transition, which kg-select's priors and
 * kg-regraph neighbors both use. */
#ifndef KG_REGRAPH_H
#define KG_REGRAPH_H

#include "common.h"

#include "jsonl.h"

/* Reads the ReGraph at path and checks what readers use: "nodes" (each with a method and a
 * frequency) and "edges" (each with from, to, probability and success_mean). Returns it, or
 * NULL after reporting (*status KG_EXIT_USAGE when the file cannot be read, KG_EXIT_INPUT when
 * it is not a ReGraph). */
cJSON *regraph_load(const char *path, int *status);

/* One transition from a method to another. */
struct regraph_transition {
	int seen;	    /* the ReGraph has the edge; else the backoff below */
	double probability; /* P(to | from): the edge's, or λ·P(to)/(w_from + λ) for one never seen */
	double success;	    /* its Beta success mean, or the Beta prior's mean α0/(α0 + β0) */
	double count;	    /* transitions seen (0 when unseen) */
	double mean_reward; /* NAN when unseen */
};

/* The transition from -> to in doc (docs/search.md "The ReGraph": an unseen transition backs
 * off to to's overall frequency). Returns 0, or -1 when to was never the target of any
 * transition (its frequency is 0), so that nothing can be said of it. */
int regraph_transition(const cJSON *doc, const char *from, const char *to, struct regraph_transition *t);

#endif
