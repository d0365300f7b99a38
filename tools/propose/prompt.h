/* prompt.h (kg-propose): the sections of what every LLM expert of an expansion is told, made
 * from the run's files (prompt.c); experts.c fits them to the budget and asks the experts. */
#ifndef KG_PROPOSE_PROMPT_H
#define KG_PROPOSE_PROMPT_H

#include "common.h"

#include "context.h"
#include "experts.h"

/* The sections of what every expert of an expansion is told (the persona and the answer's
 * form follow), in prompt order. */
enum section {
	SEC_GOAL, SEC_DEVICE, SEC_SOURCE, SEC_SPACE, SEC_SYMPTOMS, SEC_REGIONS, SEC_METRICS, SEC_HISTORY,
	SEC_CATALOG, SEC_REGRAPH, SEC_COUNT
};

/* Makes every section for node of run into part[] (each the caller's to free; "" for a
 * section the run's files have nothing for). */
void prompt_sections(const struct experts *ex, struct run_info *run, const struct node_info *node,
		     char *part[SEC_COUNT]);

/* The catalog and the ReGraph a run's proposals use; the caller frees them. */
char *experts_catalog_path(const struct experts *ex, const struct run_info *run);
char *experts_regraph_path(const struct experts *ex, const struct run_info *run);

#endif
