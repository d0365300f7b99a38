/* events.h: RUN/events.jsonl, the run's log (docs/design.md "The run directory"), which
 * kg-select --update appends to: its reader, one record at a time.
 *
 * Contract:
 * - events_read hands each record of the log, in order, to fn, which owns it: it keeps it or
 *   frees it with cJSON_Delete. A reader of a long log keeps only what it needs, so that its
 *   memory and its time to free grow with that, not with the log.
 * - A log that does not exist has no records. A bad line is reported ("FILE:LINE: ...") and
 *   skipped; a log that cannot be read is warned about, and the records read before count.
 * - Numbers are their doubles alone (jsonl.h "Numbers"): nothing read here is written back.
 * Returns the number of records handed to fn. */
#ifndef KG_EVENTS_H
#define KG_EVENTS_H

#include "common.h"

#include <stddef.h>

#include <cjson/cJSON.h>

typedef void (*events_fn)(cJSON *record, void *ctx);

size_t events_read(const char *run, events_fn fn, void *ctx);

#endif
