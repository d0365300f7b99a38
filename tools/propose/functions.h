/* functions.h (kg-propose): what an LLM expert may ask about the variant it improves, in the
 * tool loop (--tool-rounds): its metrics, a region, source lines and the PTX of source lines. */
#ifndef KG_PROPOSE_FUNCTIONS_H
#define KG_PROPOSE_FUNCTIONS_H

#include "common.h"

#include <cjson/cJSON.h>

#include "context.h"
#include "llm.h"

/* The variant the functions read: RUN/variants/STATE/ of the node expanded. */
struct variant_view {
	const struct run_info *run;
	const struct node_info *node;
};

/* Fills tools with the four functions, reading view (borrowed; it must outlive the calls):
 *   metrics(names)           values of metrics.json, the unavailable ones named with why
 *   region_detail(id)        a region of regions.json, with its edges and loops
 *   source_lines(start, end) lines of kernel.cu, numbered
 *   ptx_for_lines(start, end) the kernel.ptx lines compiled from those kernel.cu lines
 * The bounds (rounds, bytes) are the caller's to set. */
void functions_init(struct llm_tools *tools, struct variant_view *view);

/* Runs one call (an llm_tools call): the result text, or "error: ..." for the model when an
 * argument is wrong or the variant lacks the file. The caller frees it. */
char *functions_call(void *view, const char *name, const cJSON *arguments);

#endif
