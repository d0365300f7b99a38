/* hot_lines.c: the short form of a lines.json (kg-bench --metrics' PC samples by kernel.cu
 * line): its hottest lines, for bench.metrics.lines and kg-propose's prompt. */
#include "common.h"

#include <string.h>

#include "hot_lines.h"
#include "jsonl.h"
#include "xalloc.h"

/* The stall reason with the most samples in a line's "stalls"; NULL when none. */
static const char *top_stall(const cJSON *line)
{
	const cJSON *s, *best = NULL;
	cJSON_ArrayForEach(s, cJSON_GetObjectItemCaseSensitive(line, "stalls"))
		if (cJSON_IsNumber(s) && (!best || s->valuedouble > best->valuedouble))
			best = s;
	return best ? best->string : NULL;
}

cJSON *hot_lines_summary(const cJSON *lines)
{
	cJSON *m = json_object();
	const char *status = json_string(lines, "status"), *why = json_string(lines, "why");
	json_add_string(m, "status", status ? status : "unavailable");
	if (why)
		json_add_string(m, "why", why);
	if (status && strcmp(status, "ok") == 0) {
		json_add_number(m, "samples", json_number(lines, "samples", 0));
		const cJSON *all = cJSON_GetObjectItemCaseSensitive(lines, "lines");
		int n = cJSON_GetArraySize(all);
		char *taken = xcalloc((size_t)n + 1, 1);
		cJSON *hottest = cJSON_CreateArray();
		if (!hottest)
			xalloc_die();
		for (int k = 0; k < 3 && k < n; k++) {
			int best = -1;
			for (int i = 0; i < n; i++)
				if (!taken[i] && (best < 0 || json_number(cJSON_GetArrayItem(all, i), "samples", 0) >
								      json_number(cJSON_GetArrayItem(all, best), "samples", 0)))
					best = i;
			taken[best] = 1;
			const cJSON *line = cJSON_GetArrayItem(all, best);
			cJSON *h = json_object();
			json_add_number(h, "line", json_number(line, "line", 0));
			json_add_number(h, "share_pct", json_number(line, "share_pct", 0));
			const char *stall = top_stall(line);
			json_add(h, "stall", stall ? cJSON_CreateString(stall) : cJSON_CreateNull());
			json_append(hottest, h);
		}
		free(taken);
		json_add(m, "hottest", hottest);
	}
	json_add_number(m, "cost_ms", json_number(lines, "cost_ms", 0));
	return m;
}
