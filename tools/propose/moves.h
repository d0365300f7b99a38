/* moves.h (kg-propose): what a change of configuration is called, so that a search without an
 * LLM feeds the ReGraph real transitions: the method of each tuning parameter, and of a move. */
#ifndef KG_PROPOSE_MOVES_H
#define KG_PROPOSE_MOVES_H

#include "common.h"

#include <stddef.h>

#include "jsonl.h"
#include "t1.h"

/* The method a change of parameter k is: the spec's KernelGraph.Methods[name] when it names
 * one, else one read from the parameter's name and values (a 0/1 or boolean parameter, or
 * use_..., is switch_algorithm; ...stage... change_pipeline_depth; ...per_thread..., ...items...
 * change_work_per_thread; ...vec..., ...width... change_vector_width; ...group... or ...swizzle...
 * grouped_gemm_colmajor; ...block..., ...warp..., ...tile... change_block_sizes; ...unroll...
 * change_unrolling), else retune_configuration. Static storage or the spec's. */
const char *param_method(const struct t1_spec *spec, size_t k);

/* The method of the move from configuration `from` to `to` (complete ones): the parameters'
 * method when every parameter that changed has the same, else retune_configuration. */
const char *move_method(const struct t1_spec *spec, const cJSON *from, const cJSON *to);

#endif
