/* step.h (kg-select): what the picker (pick.c) and the learner (update.c) share, handed to
 * them rather than kept in globals: the step (its graph, its files, where its time goes). */
#ifndef KG_SELECT_STEP_H
#define KG_SELECT_STEP_H

#include "common.h"

#include <stddef.h>

#include <cjson/cJSON.h>

#include "graph.h"

struct snapshot;

/* One invocation of kg-select: the graph it loaded, and the files it saves it to. The step
 * borrows both: main loads them before and releases them after. */
struct step {
	struct graph *g;
	struct snapshot *snapshot; /* graph.bin and graph.blobs as loaded or last saved */
	double load_ms, decide_ms, save_ms; /* where the time goes, for -v and benchmarks/select.sh */
};

/* Saves s->g to its files (snapshot_save), timed; under --dry-run (g->dry_run) only counts the
 * save. 0, or -1 after reporting. */
int step_save(struct step *s);

/* The last method applied from the root to node (what the ReGraph's transitions start from),
 * or "init" for the root. The string belongs to the graph. */
const char *last_method(const struct graph *g, size_t node);
/* Ends the rollout under way, if any (the picker ends one at its depth or where it cannot go
 * on, the learner at a failure): one more playout along its path backs its values up to the
 * root. trace.md's note of it (trace_rollout_end) is the caller's, made before: the learner
 * writes none when it learns again what its log holds, whose notes are written already. */
void end_rollout(struct graph *g);
/* The method of a candidate record: its canonical name (kg-relabel's "method": {"canonical"}),
 * else the one its proposer named, else "". The learner names its edge by it, trace.md tallies
 * it ("unknown" for ""). The string belongs to record. */
const char *method_of(const cJSON *record);

/* The checks of where a record says it is, which the picker (--pending) and the learner make
 * alike; each reports what they return its own way. integral: an id with a fraction is
 * wrong (the picker's; the learner takes its integer part, as it always has). */
/* node_id id (a number), checked to be a node of g whose state is state (when given). Returns
 * NULL with *node set, or what is wrong with the record, the caller's to free. */
char *node_problem(const struct graph *g, double id, const char *state, size_t *node);
/* edge id (a number), checked to be an edge of g out of from. Returns NULL with *edge set, or
 * what is wrong with the record, the caller's to free. */
char *edge_problem(const struct graph *g, double id, size_t from, int integral, size_t *edge);
/* The edges of record's path_edges, walked from the root along evaluated edges; returns how
 * many when they lead to node, else -1. integral also asks for an array of integers (the
 * learner walks any list it is given). *edges is the caller's to free either way. */
long path_edges(const struct graph *g, const cJSON *record, size_t node, int integral, size_t **edges);

#endif
