/* variant.h (kg-build): a record in flight, and its variant's directory: assembled in a
 * temporary directory inside RUN/variants, then renamed into variants/STATE (variant.c). */
#ifndef KG_BUILD_VARIANT_H
#define KG_BUILD_VARIANT_H

#include "common.h"

#include <cjson/cJSON.h>

#include "compile.h"
#include "run.h"
#include "setup.h"
#include "sha256.h"

/* ---- a record in flight (main.c's builder holds them in input order) */

enum entry_stage {
	STAGE_READY,	 /* can be written */
	STAGE_COMPILING, /* waiting for its compile */
	STAGE_FOLLOWING, /* waiting for an earlier record that builds the same state */
};

struct entry {
	cJSON *record;
	enum entry_stage stage;
	struct build_run *run;
	cJSON *variant;	 /* the variant's build object, as kept in build.json; NULL: pass through */
	cJSON *own;	 /* this candidate's own fields: materialized, patch */
	int reused;	 /* the variant existed before this record */
	char state[SHA256_HEX_SIZE];
	char *tmp_dir;	 /* where the variant is assembled before it is renamed into place */
	char *cache_key;
	struct entry *leader; /* STAGE_FOLLOWING: the record that builds the state */
};

/* ---- its variant's directory */

/* The build object kept in variants/STATE/build.json, or NULL when there is none; the
 * caller deletes it. */
cJSON *read_variant(const struct build_run *run, const char *state);
/* Creates e->tmp_dir (readable by the run's other users). 0, or -1 after reporting. */
int make_tmp_dir(struct entry *e);
/* A file of the variant in e->tmp_dir: a path the caller frees. */
char *tmp_file(const struct entry *e, enum variant_file file);
/* Writes text to that file. 0, or -1 after reporting. */
int write_in_tmp(struct entry *e, enum variant_file file, const char *text);
/* Removes e->tmp_dir and what it holds, when there is one. */
void drop_tmp_dir(struct entry *e);
/* Adds to e->variant what the compile (res; cached: from kg-build's cache) left in e->tmp_dir:
 * status, files, ptxas's figures, the PTX profile and regions. */
void describe_compile(struct entry *e, const struct compile_result *res, int cached);
/* Whether a variant's build object was compiled ("compiled": false says it was not). */
int variant_compiled(const cJSON *variant);
/* Writes build.json and renames e->tmp_dir to variants/STATE, or takes the variant another
 * process put there first (e->reused). 0, or -1 after reporting; e->tmp_dir is gone either way. */
int publish_variant(struct entry *e);

#endif
