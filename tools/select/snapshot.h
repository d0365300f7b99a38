/* snapshot.h: the graph on disk, fast enough for a step of a 10,000-node search: RUN/graph.bin
 * (fixed-size records, then a log of the records each save changed) and RUN/graph.blobs. */
#ifndef KG_SELECT_SNAPSHOT_H
#define KG_SELECT_SNAPSHOT_H

#include "common.h"

#include "graph.h"

/* graph.bin (version 5) is a checkpoint (a header with an FNV-1a checksum of what a load
 * reads, the graph's four arrays as they are in memory, each page-aligned with room to grow,
 * the rollout path) followed by deltas, each with the header, the records that changed and a
 * checksum. A load maps it copy-on-write and points the graph at the arrays; a save appends a
 * delta and fdatasyncs it, or, past 64 KiB of deltas, writes a new checkpoint atomically
 * (write, fsync, rename). A delta cut short by a kill (its header promises more than the file
 * holds) is dropped, so a load sees the previous or the next graph; a checkpoint or a whole
 * delta that fails its checksum is damage, refused. What passes is then checked as graph_check
 * says (chains, ranks, parameters in their options' ranges, counters), since a bug may write
 * what no checksum catches and the search must never crash or hang on it. graph.blobs is
 * append-only: the NUL-terminated strings and JSON texts (states, methods, configurations,
 * candidates) the records point at; bytes a kill left unreferenced at its end are never read.
 * Both files are in the host's byte order, for this machine only: graph_export is the
 * portable form.
 *
 * Version 5 appended to each node record its build number, failure status and reason, and to
 * each edge record its build number and whether it was a transposition (graph.h), so that
 * kg-select --draw needs no log. A version 4 file is still read, with a warning: its records
 * are a prefix of version 5's, copied to the heap with the new fields empty (the graph is
 * then graph_unnumbered: --draw numbers it from events.jsonl, number_from_log), and its
 * next save writes a version 5 checkpoint. Any other version is refused. */

struct snapshot;

/* Loads RUN's graph into g, which it initializes: RUN/graph.bin, or without one RUN/graph.json
 * (graph_import). *s gets what the files hold, for snapshot_save, whatever it returns; free it
 * with snapshot_free after graph_release (a loaded graph's arrays and blobs lie in its maps).
 * Returns 1 when loaded, 0 when there is no graph yet, -1 after reporting a damaged file. */
int snapshot_load(struct snapshot **s, struct graph *g, const char *run);
/* Stores g in RUN/graph.bin so that a kill at any moment leaves the previous or the next
 * graph: the blobs s has not stored, then a delta or a checkpoint. 0, or -1 after reporting. */
int snapshot_save(struct snapshot *s, struct graph *g);
void snapshot_free(struct snapshot *s);

#endif
