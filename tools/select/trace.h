/* trace.h (kg-select): RUN/trace.md, the search told for a person who reads it top to bottom:
 * the baseline, one table row per candidate, and a closing summary (kg-select --summary). */
#ifndef KG_SELECT_TRACE_H
#define KG_SELECT_TRACE_H

#include "common.h"

#include <stddef.h>

#include <cjson/cJSON.h>

#include "graph.h"

/* What --update made of one evaluated candidate, for its row. */
struct trace_step {
	const cJSON *record;  /* the candidate record, built and benched (or failed) */
	const char *method;   /* its edge's canonical method ("" when it has none) */
	size_t parent, child; /* the node it was tried from, the node of the variant it made */
	size_t previous_best; /* the incumbent before this record */
	int transposition;    /* the child existed already (reached another way) */
	int better;	      /* the candidate became the incumbent */
};

/* Why a failed candidate record failed, on one line, as its row says it (the compiler's
 * first error, the check's verdict, the bench's error): a string to free, or NULL when the
 * record does not say. The graph keeps it with the failed node (gnode.reason). */
char *trace_failure_reason(const cJSON *record);
/* The title, and the baseline the root was made from (record: the benched baseline). */
void trace_root(const struct graph *g, const cJSON *record);
/* One evaluated candidate's row: iteration, where from, what changed and who proposed it,
 * median and speedup (with its interval when measured), and what became of it. */
void trace_candidate(const struct graph *g, const struct trace_step *s);
/* A row about a node that is no candidate's (an exhausted node, the end of a rollout). */
void trace_note(const struct graph *g, long iter, size_t node, const char *what);
/* The note that rollout r (g's, or a copy of it made before end_rollout cleared it) ended,
 * and why: after how many expansions, with what best speedup. Nothing when r is not active. */
void trace_rollout_end(const struct graph *g, const struct rollout *r, const char *why);
/* Appends the closing summary: what was tried by method and proposer, what failed and why,
 * how the best moved, the best variant and where it is. stopped: why the search ended, or
 * NULL when it may go on. Returns 0, or -1 after reporting that events.jsonl or trace.md
 * could not be read or written. */
int trace_summary(const struct graph *g, const char *stopped);

#endif
