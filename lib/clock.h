/* clock.h: the two clocks kernelgraph reads: a monotonic one for durations and timeouts, and
 * UTC wall-clock time for the timestamps in logs and results. */
#ifndef KG_CLOCK_H
#define KG_CLOCK_H

#include "common.h"

#include <stddef.h>

/* Milliseconds on CLOCK_MONOTONIC: only differences mean anything. */
double monotonic_ms(void);

/* The current UTC time as ISO 8601, "2026-11-21T10:00:00Z", or with millis set
 * "2026-11-21T10:00:00.123Z"; size must hold 32 bytes. */
void utc_now(char *buf, size_t size, int millis);

#endif
