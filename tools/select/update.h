/* update.h (kg-select): the learner, which learns from measured records: the root, edges,
 * rewards backed up along their paths, the incumbent, and the run's log, best and dataset. */
#ifndef KG_SELECT_UPDATE_H
#define KG_SELECT_UPDATE_H

#include "common.h"

#include "step.h"
#include "stream.h"

/* Learns each record of in into step->g (exists: the graph has a root; the first record
 * makes it otherwise), appends it to RUN/events.jsonl, saves the graph and passes the record
 * on with its "update". Learns first what the log holds beyond the graph. Returns
 * KG_EXIT_OK, KG_EXIT_INPUT when a record could not be learned (reported, passed on), or
 * KG_EXIT_IO (a row of the log or of the dataset not appended, the graph not saved, the
 * stream not read or written). */
int run_update(struct step *step, int exists, struct stream *in);

/* kg-select --update --dry-run: says on stderr what each file of the run and of OUTDIR would
 * have got (g->dry_run's counts, the graph as learned), and that nothing was written. */
void update_report_dry_run(const struct graph *g);
/* Before a pick (or a summary): learns what RUN/events.jsonl holds beyond the graph, which a
 * kill between appending to the log and saving the graph leaves. Returns KG_EXIT_OK, or
 * KG_EXIT_IO when the graph could not be saved. */
int catch_up_before_pick(struct step *step);
/* The candidates the run has evaluated: the graph's builds, and the evaluated records
 * RUN/events.jsonl holds past what the graph learned (a kill between the two), which the
 * next step learns again; read only, the graph left as it is (kg-select --builds). */
long run_builds(const struct graph *g);
/* Gives a graph learned before graphs kept build numbers (graph_unnumbered: a graph.bin of
 * version 4, a graph.json written before) the numbers, transpositions and failures it lacks
 * from RUN/events.jsonl's evaluated records, in memory (kg-select --draw's older graphs; the
 * next save stores what a step learns after it, numbered). Returns 0, or -1 after reporting
 * a log that cannot be read. */
int number_from_log(struct graph *g);

#endif
