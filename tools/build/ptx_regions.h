/* ptx_regions.h: the Region-DAG of a kernel's PTX: its entry split into regions at barriers,
 * async waits, fences and loop boundaries, each with its static work and its source lines. */
#ifndef KG_BUILD_PTX_REGIONS_H
#define KG_BUILD_PTX_REGIONS_H

#include "common.h"

#include <cjson/cJSON.h>

/* The graph of the entry named entry (the first entry when entry is NULL) of the PTX text:
 *   {"entry", "regions": [...], "edges": [...], "loops": [...]}
 * (tools/build/README.md lists every field). Source lines are those of the ".file" whose path
 * ends in "/" kernel_file or is kernel_file. Counts are static, per execution of a region.
 * Returns NULL when the PTX has no such entry; the caller frees it with cJSON_Delete. */
cJSON *ptx_regions(const char *ptx, const char *entry, const char *kernel_file);

/* The build record's summary of a graph from ptx_regions: the numbers of regions, stages,
 * loops, barriers and async waits, and the regions with the most global bytes and the most
 * FLOPs. The caller frees it with cJSON_Delete. */
cJSON *ptx_regions_summary(const cJSON *graph);

#endif
