/* export.h: kg-bench --t4, the measurements of a stream of records as one T4 document. */
#ifndef KG_BENCH_EXPORT_H
#define KG_BENCH_EXPORT_H

#include "common.h"

#include "jsonl.h"

/* Writes on stdout a T4 document with one result per record of reader that was benched or
 * refused by its build (raw samples from RUN/variants/STATE/bench.json; run_dir serves the
 * records without "run"). Returns an exit status: KG_EXIT_INPUT after bad lines. */
int export_t4(struct jsonl_reader *reader, const char *run_dir);

#endif
