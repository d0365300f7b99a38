/* replay.h: answers from recorded measurements instead of the GPU, so that searches can be
 * tested and compared on any machine: a T4 file, or the events.jsonl of an earlier run.
 *
 * A table answers a variant by its state when it holds a measurement of that state (an
 * events.jsonl, or a T4 export of one, records states), else by its configuration, but only
 * for the spec's own kernel: a table keyed by configuration measured the unedited source, so
 * a code edit it has no state for gets no answer. Measurements of code edits (an earlier
 * run's edited variants) answer by state only.
 *
 * Loading a large table (a T4 file of thousands of configurations, each with its raw
 * samples) costs far more than a search step on replayed measurements, and every kg-bench
 * --replay and kg-propose --within of a search loads it again: the first load keeps a
 * compact copy in $XDG_CACHE_HOME/kernelgraph/replay/, which later loads map and index
 * without parsing JSON, parsing only the measurements they answer with. */
#ifndef KG_REPLAY_H
#define KG_REPLAY_H

#include "common.h"

#include <cjson/cJSON.h>

struct replay;

/* Loads path, from the cache when it holds path as it is now (same file, size and
 * modification time), else from path itself, then fills the cache (when it cannot, the
 * table is used all the same). Returns NULL after reporting what is wrong with path. */
struct replay *replay_load(const char *path);
void replay_free(struct replay *replay);

/* The recorded "bench" object for a variant, marked "replayed": true: the measurement of
 * state (NULL: none known) when the table has one, else, unless edited (the variant's
 * source is not the spec's kernel), the last measurement of config by a variant that was
 * not edited. NULL when the table cannot answer. The caller frees it with cJSON_Delete.
 * *runtimes gets the raw samples the table holds for it (the caller frees them with
 * cJSON_Delete), or NULL. */
cJSON *replay_lookup(const struct replay *replay, const cJSON *config, const char *state, int edited,
		     cJSON **runtimes);

/* Calls fn with each measurement of the spec's own kernel (edits left out), in the table's
 * order: its configuration and "bench" object, which fn must not keep. Stops at the first
 * nonzero return, and returns it; -1 for a damaged cache (reported); else 0. */
typedef int (*replay_each_fn)(void *ctx, const cJSON *config, const cJSON *bench);
int replay_each(const struct replay *replay, replay_each_fn fn, void *ctx);

/* What the table's measurements were built for and run on: *arch, the architecture the first
 * measurement that records one was built for ("sm_90": an events.jsonl's build.arch, the
 * "arch" measurement of a T4 table kg-bench --t4 wrote), and *device, the GPU the first that
 * names one ran on ("NVIDIA H100 80GB HBM3": a T4 table's metadata.hardware
 * .hardware_description, an events.jsonl's bench.device); each NULL when none says. The
 * caller frees both. */
void replay_target(const struct replay *replay, char **arch, char **device);

/* Whether the table answers config for the spec's own kernel. */
int replay_has(const struct replay *replay, const cJSON *config);

/* The configuration as the table keys it: members sorted by name, compact JSON. The caller
 * frees it. */
char *replay_key(const cJSON *config);

/* Which records measured code edits, among records read in order (an events.jsonl). */
struct replay_edits;

struct replay_edits *replay_edits_new(void);
void replay_edits_free(struct replay_edits *edits);

/* Whether record's variant is a code edit: its build's "edited" (kg-build says whether the
 * variant's source differs from the spec's kernel file); for a record built before kg-build
 * said so, a candidate patch or source of its own (build.materialized other than "parent"),
 * or a parent node (record.node) that an earlier record judged by edits showed to be one.
 * edits may be NULL; otherwise an edited record's state is remembered there. */
int replay_edited(const cJSON *record, struct replay_edits *edits);

#endif
