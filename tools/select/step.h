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

/* Saves s->g to its files (snapshot_save), timed. 0, or -1 after reporting. */
int step_save(struct step *s);

/* The last method applied from the root to node (what the ReGraph's transitions start from),
 * or "init" for the root. The string belongs to the graph. */
const char *last_method(const struct graph *g, size_t node);
/* Ends the rollout under way, if any (the picker ends one at its depth or where it cannot go
 * on, the learner at a failure): one more playout along its path backs its values up to the
 * root, and trace.md notes it unless catching_up (the graph learns again what its log holds:
 * the note is written already). */
void end_rollout(struct graph *g, const char *why, int catching_up);
/* Whether record is an expansion kg-propose found nothing new for ("propose": {"status":
 * "empty"}): the learner marks its node exhausted, the picker counts it as nothing in flight. */
int is_empty_expansion(const cJSON *record);

#endif
