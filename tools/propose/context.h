/* context.h (kg-propose): what a proposer knows about the node it expands (its run, source,
 * configuration, measurements and history) and the checks every proposal passes before output. */
#ifndef KG_PROPOSE_CONTEXT_H
#define KG_PROPOSE_CONTEXT_H

#include "common.h"

#include <stddef.h>

#include <cjson/cJSON.h>

#include "regraph.h"
#include "replay.h"
#include "run.h"
#include "sha256.h"
#include "t1.h"
#include "xalloc.h"

/* An earlier measurement of the kernel (kg-propose --history FILE): a T4 table or a run's
 * events.jsonl, of another GPU, problem size or night. */
struct history {
	const char *path;
	struct replay *table;
};

/* One candidate change, from the rules or from an LLM expert, before it is checked. */
struct proposal {
	char *proposer;	     /* "rules:neighbour", "llm:gpt-5-mini/throughput" */
	char *method, *detail, *think;
	char *patch, *source; /* a unified diff against kernel.cu, or a whole kernel file */
	cJSON *config;	     /* the parameters it sets (the rest stay the node's), or NULL */
	cJSON *launch_update;
	char *library;	     /* the KernelGraph.Patches entry it comes from */
	double prior;
	int lead;	     /* goes out first whatever its prior (the model's move of the best) */
	cJSON *full_config;  /* set by context_accept: the complete configuration */
};

void proposal_release(struct proposal *p);

/* A run directory met in the input, loaded once. */
struct run_info {
	struct run run;	       /* the directory, OUTDIR, the spec; the baseline, read at load */
	char *error;	       /* why the run cannot be used (each record of it is an error) */
	cJSON *events;	       /* RUN/events.jsonl, as an array of its records, each cut
				  to the members kg-propose reads (context.c, keep_slim) */
	cJSON *best;	       /* RUN/best.json, or NULL */
	const char *base_state; /* the baseline's state (baseline.json's, else its record's), or NULL */
	cJSON *regraph;	       /* the ReGraph, once context_regraph_next read it; NULL when none */
	int regraph_read;
	char **seen;	       /* keys of the changes already built or registered */
	size_t nseen;
	struct digest *digests; /* the sources' digests, by state */
	size_t ndigests;
	struct key_index {     /* seen's and digests' keys by hash: a long run's lookups stay O(1) */
		size_t *slots; /* open addressing: the entry's number + 1, 0 empty */
		size_t nslots;
	} seen_index, digest_index;
	const struct replay *within; /* --within: only configurations this table measured */
	const struct history *history; /* --history: earlier measurements for the model */
	size_t nhistory;
	const cJSON *pending;	     /* --pending's records (the runs'), or NULL */
	struct sent {		     /* configuration changes this process sent out */
		char digest[SHA256_HEX_SIZE]; /* of the source they apply to */
		size_t *indices;
	} *sent;
	size_t nsent;
	size_t *listing;	     /* space.c's run_listing, made once */
	long nlisting;
	int listing_made;
};

/* The node an expand record asks to expand. */
struct node_info {
	const char *state;     /* the record's "node" */
	char *source;	       /* RUN/variants/STATE/kernel.cu */
	char digest[SHA256_HEX_SIZE];
	cJSON *config;	       /* the node's complete configuration */
	cJSON *build;	       /* RUN/variants/STATE/build.json, or NULL */
	cJSON *bench;	       /* RUN/variants/STATE/bench.json, or NULL */
	cJSON *metrics;	       /* RUN/variants/STATE/metrics.json (kg-bench --metrics), or NULL */
	const char *last_method;
	const cJSON *methods;  /* the methods applied from the root (the record's) */
	char **applied;	       /* KernelGraph.Patches entries applied on the path */
	size_t napplied;
	char *prefix;	       /* candidate ids start with it: "c7-n3" */
};

struct runs {
	struct run_info **list;
	size_t n;
	cJSON *pending; /* --pending: records in flight, whose changes count as the run's (owned) */
};

/* The run at dir, loaded at its first use, with the changes of runs->pending records that
 * name it counted as its own. Never NULL; run->error says when it is unusable. */
struct run_info *runs_get(struct runs *runs, const char *dir);
void runs_release(struct runs *runs);

/* Fills node from an expand record of run. Returns 0, or -1 with why set (a record that
 * names no node, a node whose variant is missing). */
int node_load(struct run_info *run, const cJSON *record, struct node_info *node, struct strbuf *why);
void node_release(struct node_info *node);
/* A JSON file of node's variant directory (RUN/variants/STATE/NAME: regions.json; the
 * node's metrics.json is read once, into node->metrics), or NULL when it is absent (an unreadable or malformed one is reported). The
 * caller frees it with cJSON_Delete. */
cJSON *node_variant_json(const struct run_info *run, const struct node_info *node, enum variant_file file);

/* Whether p may go out: its configuration completes to a valid one of the space (one that
 * run->within measured, when set) that the kernel it makes takes (kernel_takes: node's, with
 * p's ready patch applied on top; an edit of the source is taken as it comes), it changes
 * something, and neither this expansion nor the run has it already. Returns 0 and sets
 * p->full_config (and remembers p), or 1 with why set. */
int context_accept(struct run_info *run, const struct node_info *node, struct proposal *p, struct strbuf *why);

/* The run's measured configurations whose source is node's (the configurations of one kernel;
 * a code edit makes another space): *indices gets n x nparams indices into the spec's values,
 * *log_ms ln of each one's median time (NAN for a failure: a failed compile, a wrong result, a
 * crash or timeout). Returns n; the arrays are the caller's to free. */
size_t context_observations(struct run_info *run, const struct node_info *node, size_t **indices, double **log_ms);

/* p, accepted, goes out as a candidate of node: in flight from now on. */
void context_sent(struct run_info *run, const struct node_info *node, const struct proposal *p);

/* The measurements of history file k (run->history[k]) of configurations of the space, when
 * node's source is the spec's kernel (a table's configurations measured it): n x nparams
 * indices into *indices, ln of each median into *log_ms (NAN for a failure). Returns n; the
 * arrays are the caller's to free. */
size_t context_history(struct run_info *run, const struct node_info *node, size_t k, size_t **indices, double **log_ms);

/* The configurations of node's source in flight (--pending records of run, and those this
 * process sent out: none is measured yet) into *indices (n x nparams, the caller's to free). Returns n. */
size_t context_in_flight(struct run_info *run, const struct node_info *node, size_t **indices);

/* Whether the kernel of a variant of node, with the ready patch library (NULL: none) applied
 * on top, takes the configuration at indices: the spec's kernel conditions for the patches on
 * its path (t1_check_kernel_conditions). Returns 1, or 0 with why set when why is not NULL. */
int kernel_takes(const struct t1_spec *spec, const struct node_info *node, const char *library, const size_t *indices,
		 struct strbuf *why);

/* Whether the configuration at indices is one run->within measured (always, without it). */
int context_within(const struct run_info *run, const size_t *indices);

/* A complete configuration as value indices into the spec's values (t1_config_indices); -1 when a parameter is
 * missing or a value is not one of its Values. */
int config_indices(const struct t1_spec *spec, const cJSON *config, size_t *indices);

/* The complete configuration of indices as an object of plain values (t1_config_to_json
 * splices raw text, which cJSON's comparisons do not read). */
cJSON *config_object(const struct t1_spec *spec, const size_t *indices);

/* The transitions out of method `from` that the ReGraph at path (the same for every call of a
 * run) has seen, most promising first, at most top of them (regraph_seen_from: *next is the
 * caller's to free, its strings the run's). The ReGraph is read at the first call: none when
 * path does not exist; one that cannot be used is reported once, then not used. */
size_t context_regraph_next(struct run_info *run, const char *path, const char *from, size_t top,
			    struct regraph_transition **next);

#endif
