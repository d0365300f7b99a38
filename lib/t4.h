/* t4.h: tuning results in the community T4 format (odgaard/TuningSchema, results schema
 * 1.0.0), the format Kernel Tuner and benchmark_hub exchange results in. */
#ifndef KG_T4_H
#define KG_T4_H

#include "common.h"

#include <stddef.h>

#include <cjson/cJSON.h>

/* Why a configuration has no valid time, in T4's words ("correct" when it has one). */
enum t4_invalidity { T4_CORRECT, T4_COMPILE, T4_RUNTIME, T4_CORRECTNESS, T4_CONSTRAINTS, T4_TIMEOUT };

struct t4_measurement {
	const char *name;  /* "time", "gbps", "sm_clock_mhz", ... */
	double value;
	const char *unit;  /* "ms", "GB/s", "" when dimensionless */
	const char *text;  /* a value that is a string (T4 allows it): written instead of value */
};

/* One measured (or rejected) configuration. Times are in milliseconds; a NAN time is
 * left out of the document rather than written as a guess. */
struct t4_result {
	const char *timestamp;	       /* ISO 8601; NULL: now, in UTC */
	const cJSON *configuration;    /* {parameter: value}; copied */
	const char *const *objectives; /* e.g. {"time"}; may be empty */
	size_t nobjectives;
	double compilation_ms;
	const double *runtimes_ms;     /* every raw sample, in the order measured */
	size_t nruntimes;
	double framework_ms;	       /* the tool's own overhead for this configuration */
	double search_algorithm_ms;
	double validation_ms;
	enum t4_invalidity invalidity;
	double correctness;	       /* 1 when every checked output matched; less otherwise */
	const struct t4_measurement *measurements;
	size_t nmeasurements;
};

/* A new, empty T4 document; the caller frees it with cJSON_Delete. */
cJSON *t4_new(void);
/* Appends r to doc's results. */
void t4_add(cJSON *doc, const struct t4_result *r);
/* Writes doc to path atomically (see fileio.h). Returns 0, or -1 with errno set. */
int t4_write_file(const cJSON *doc, const char *path);

const char *t4_invalidity_name(enum t4_invalidity invalidity);
/* Reads an invalidity name; returns 0, or -1 when name is not one of T4's. */
int t4_invalidity_parse(const char *name, enum t4_invalidity *out);

#endif
