/* hot_lines.h: the short form of a lines.json (kg-bench --metrics' PC samples by kernel.cu
 * line, tools/bench/README.md "Source lines"): its hottest lines. */
#ifndef KG_HOT_LINES_H
#define KG_HOT_LINES_H

#include "common.h"

#include <cjson/cJSON.h>

/* {"status", "why"?, "samples", "hottest": [{"line", "share_pct", "stall"}] (at most 3, most
 * samples first; stall is the line's most frequent stall reason, null when it has none),
 * "cost_ms"} of a lines.json object; only status (and why) when its status is not "ok". The
 * caller owns it. */
cJSON *hot_lines_summary(const cJSON *lines);

#endif
