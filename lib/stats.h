/* stats.h: summaries of timing samples: order statistics, spread, and the standard error of
 * the median that stops sampling. (The bootstrap interval of a speedup is lib/mcgs's.) */
#ifndef KG_STATS_H
#define KG_STATS_H

#include "common.h"

#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

struct summary {
	size_t count;
	double median, p10, p90, mean, stdev, cv, min, max;
	double mad; /* the median absolute deviation from the median */
};

/* Summarizes n samples (n > 0); the samples are not reordered. */
void summarize(const double *samples, size_t n, struct summary *s);

/* The relative standard error of the median, 1.2533 * sigma / sqrt(n) / median, with sigma
 * estimated robustly as 1.4826 * MAD (one preempted sample must not keep sampling going):
 * sampling stops once it is small enough. */
double median_rse(const struct summary *s);


/* {"median_ms": ..., "p10_ms": ..., ...} fields added to obj. */
void summary_to_json(const struct summary *s, cJSON *obj);

#endif
