/* replay.h: answers from recorded measurements instead of the GPU, so that searches can be
 * tested and compared on any machine: a T4 file, or the events.jsonl of an earlier run. */
#ifndef KG_REPLAY_H
#define KG_REPLAY_H

#include "common.h"

#include <cjson/cJSON.h>

struct replay;

/* Loads path; returns NULL after reporting what is wrong with it. */
struct replay *replay_load(const char *path);
void replay_free(struct replay *replay);

/* The recorded "bench" object for config, marked "replayed": true; NULL when the table has
 * no measurement of that configuration. The caller frees it with cJSON_Delete. *runtimes
 * gets the raw samples the table holds (owned by the table), or NULL. */
cJSON *replay_lookup(const struct replay *replay, const cJSON *config, const cJSON **runtimes);

/* Whether the table measured config. */
int replay_has(const struct replay *replay, const cJSON *config);

/* The configuration as the table keys it: members sorted by name, compact. */
char *replay_key(const cJSON *config);

#endif
