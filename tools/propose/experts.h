/* experts.h (kg-propose): candidates from LLM experts, one persona each, asked at once: the
 * prompt a performance engineer would want, the answer's schema, extraction and one correction. */
#ifndef KG_PROPOSE_EXPERTS_H
#define KG_PROPOSE_EXPERTS_H

#include "common.h"

#include <stddef.h>

#include "context.h"
#include "llm.h"
#include "run.h"

struct persona {
	char *name; /* "throughput", or a prompt file's name without its extension */
	char *text; /* how this expert should lean */
};

struct experts {
	struct llm_settings llm; /* log_dir and cache_dir are set per run */
	struct persona *personas;
	size_t npersonas;
	int candidates;		 /* asked of each expert */
	int recent;		 /* recent attempts shown (--recent) */
	long max_prompt_tokens;	 /* --max-prompt-tokens: sections are left out to fit; 0: the
				  * context the server reports, else the one it gives when it
				  * refuses a prompt as longer, less room for the answer */
	const char *catalog;	 /* --catalog, else OUTDIR/methods.json */
	const char *regraph;	 /* --regraph, else OUTDIR/regraph.json */
	int allowed;		 /* --regraph-filter: only the ReGraph's neighbours of the last method */
	long allowed_top;	 /* --regraph-top */
	int tool_rounds;	 /* --tool-rounds: rounds of function calls before the answer; 0: none */
	long tool_result_bytes;	 /* --tool-result-bytes: the most one function's result may hold */
	long tool_total_bytes;	 /* --tool-total-bytes: the most the results of one expert may hold */
};

/* The built-in personas, or one from a prompt file (NAME.txt or NAME.md). Returns 0, or -1
 * after reporting a name that is neither. */
int persona_add(struct experts *ex, const char *name_or_file);
void experts_release(struct experts *ex);

/* Asks every persona for candidates for node of run, appends what they propose to *list
 * (unchecked), and appends to errors one {"persona", "error"} per expert that gave nothing
 * usable. */
void experts_propose(const struct experts *ex, struct run_info *run, const struct node_info *node,
		     struct proposal **list, size_t *n, cJSON *errors);

#endif
