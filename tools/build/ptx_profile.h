/* ptx_profile.h: static instruction counts of a PTX module, the symptoms a performance
 * engineer reads first (vector widths, async copies, tensor-core instructions, barriers). */
#ifndef KG_BUILD_PTX_PROFILE_H
#define KG_BUILD_PTX_PROFILE_H

#include "common.h"

#include <cjson/cJSON.h>

/* Counts instructions in the PTX text, each once however often it executes:
 *   {"instructions", "global_loads": {"scalar","v2","v4","v8"}, "global_stores": {...},
 *    "shared_loads": {...}, "shared_stores": {...}, "ldmatrix", "cp_async", "bulk_copies",
 *    "mma", "wgmma", "barriers", "branches", "loops", "fma", "flop_instructions",
 *    "atomics", "shuffles"}
 * "loops" counts backward branches; "flop_instructions" floating-point arithmetic
 * instructions of any width (an fma counts once). The caller frees it with cJSON_Delete. */
cJSON *ptx_profile(const char *ptx);

#endif
