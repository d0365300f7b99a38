/* clock.c: clock_gettime and strftime behind the two calls kernelgraph needs. */
#include "common.h"

#include <stdio.h>
#include <time.h>

#include "clock.h"

double monotonic_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

void utc_now(char *buf, size_t size, int millis)
{
	struct timespec ts;
	struct tm tm;
	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	size_t n = strftime(buf, size, "%Y-%m-%dT%H:%M:%S", &tm);
	if (millis)
		snprintf(buf + n, size - n, ".%03ldZ", ts.tv_nsec / 1000000);
	else
		snprintf(buf + n, size - n, "Z");
}
