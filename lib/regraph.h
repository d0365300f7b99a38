/* regraph.h: the ReGraph file (regraph.json, written by kg-regraph build): read and checked,
 * and the statistics of one method-to-method transition, which kg-select's priors and
 * kg-regraph neighbors both use. */
#ifndef KG_REGRAPH_H
#define KG_REGRAPH_H

#include "common.h"

#include <stddef.h>

#include "jsonl.h"

/* Reads the ReGraph at path and checks what readers use. Returns it, or NULL after reporting
 * (*status KG_EXIT_USAGE when the file cannot be read, KG_EXIT_INPUT when it is not a ReGraph).
 *
 * The policy for missing fields, the same for every reader (docs/search.md "The ReGraph"):
 * - "nodes" and "edges" arrays, each node's method and frequency, each edge's from, to and
 *   probability are required: without them no transition can be scored. A missing or
 *   mistyped one is an error naming the file and the field ("regraph.json: edges[2].to: ...").
 * - An edge without success_mean (absent or null, as a NaN is written) has the Beta prior's
 *   mean α0/(α0 + β0), what a transition never seen gets: nothing is known of its success.
 *   One that is there must be a number.
 * - parameters.lambda, alpha0 and beta0 default to kg-regraph build's defaults (4, 1, 1);
 *   count, mean_reward and out_weight, which only describe, to 0, NAN and 0. */
cJSON *regraph_load(const char *path, int *status);

/* One transition from a method to another. */
struct regraph_transition {
	const char *to;	    /* the target method, inside the ReGraph's document */
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

/* Sorts list[0..n) most promising first: by probability x success, highest first, ties by
 * the target's name in strcmp order. The one ranking of transitions, so that kg-propose's
 * view of the ReGraph (regraph_seen_from) and kg-regraph neighbors cannot come to disagree.
 * A NaN product (only an overflowing number in a hand-written file, 1e400 x 0) compares
 * equal to every other, so where it lands is unspecified. */
void regraph_sort(struct regraph_transition *list, size_t n);

/* The transitions out of from that doc has seen, most promising first (regraph_sort), at most
 * top of them, into *list (the caller frees it; its strings are doc's). Returns how many; 0
 * with *list NULL when there are none. */
size_t regraph_seen_from(const cJSON *doc, const char *from, size_t top, struct regraph_transition **list);

#endif
