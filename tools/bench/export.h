/* export.h: kg-bench --t4, the measurements of a stream of records as one T4 document. */
#ifndef KG_BENCH_EXPORT_H
#define KG_BENCH_EXPORT_H

#include "common.h"

#include "stream.h"

/* Writes on stdout a T4 document with one result per record of in that was benched or
 * refused by its build (raw samples from RUN/variants/STATE/bench.json; run_dir serves the
 * records without "run"); in passes no record on. Returns an exit status: KG_EXIT_INPUT
 * after bad lines. */
int export_t4(struct stream *in, const char *run_dir);

#endif
