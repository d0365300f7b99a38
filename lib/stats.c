/* stats.c: sorting copies of the samples and reading quantiles by linear interpolation
 * (numpy's default), so that figures can be checked against any tool. */
#include "common.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "jsonl.h"
#include "mcgs.h"
#include "stats.h"
#include "xalloc.h"

static double quantile(const double *sorted, size_t n, double q)
{
	double pos = q * (double)(n - 1);
	size_t lo = (size_t)pos;
	if (lo + 1 >= n)
		return sorted[n - 1];
	return sorted[lo] + (pos - (double)lo) * (sorted[lo + 1] - sorted[lo]);
}

void summarize(const double *samples, size_t n, struct summary *s)
{
	memset(s, 0, sizeof(*s));
	if (n == 0)
		return;
	double *sorted = xmalloc(n * sizeof(*sorted)), sum = 0, squares = 0;
	memcpy(sorted, samples, n * sizeof(*sorted));
	mcgs_sort_doubles(sorted, n);
	for (size_t k = 0; k < n; k++)
		sum += sorted[k];
	s->count = n;
	s->mean = sum / (double)n;
	for (size_t k = 0; k < n; k++)
		squares += (sorted[k] - s->mean) * (sorted[k] - s->mean);
	s->stdev = n > 1 ? sqrt(squares / (double)(n - 1)) : 0;
	s->cv = s->mean > 0 ? s->stdev / s->mean : 0;
	s->median = quantile(sorted, n, 0.5);
	s->p10 = quantile(sorted, n, 0.1);
	s->p90 = quantile(sorted, n, 0.9);
	s->min = sorted[0];
	s->max = sorted[n - 1];
	for (size_t k = 0; k < n; k++)
		sorted[k] = fabs(sorted[k] - s->median);
	mcgs_sort_doubles(sorted, n);
	s->mad = quantile(sorted, n, 0.5);
	free(sorted);
}

double median_rse(const struct summary *s)
{
	if (s->count < 2 || s->median <= 0)
		return INFINITY;
	return 1.2533 * 1.4826 * s->mad / sqrt((double)s->count) / s->median;
}

void summary_to_json(const struct summary *s, cJSON *obj)
{
	json_add_number(obj, "median_ms", s->median);
	json_add_number(obj, "p10_ms", s->p10);
	json_add_number(obj, "p90_ms", s->p90);
	json_add_number(obj, "mean_ms", s->mean);
	json_add_number(obj, "stdev_ms", s->stdev);
	json_add_number(obj, "cv", s->cv);
	json_add_number(obj, "min_ms", s->min);
	json_add_number(obj, "samples", (double)s->count);
}
