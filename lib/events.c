/* events.c: reads RUN/events.jsonl record by record through the one JSON-lines reader
 * (events.h). */
#include "common.h"

#include <errno.h>

#include "events.h"
#include "jsonl.h"
#include "log.h"
#include "run.h"

size_t events_read(const char *run, events_fn fn, void *ctx)
{
	char *path = run_path(run, RUN_EVENTS);
	FILE *fp = fopen(path, "r");
	size_t n = 0;
	if (!fp) {
		if (errno != ENOENT)
			log_warn("cannot read '%s':", path);
		free(path);
		return 0;
	}
	struct jsonl_reader reader;
	jsonl_reader_init(&reader, fp, path);
	reader.plain_numbers = 1;
	cJSON *record;
	enum jsonl_status st;
	while ((st = jsonl_next(&reader, &record)) != JSONL_EOF && st != JSONL_IO_ERROR)
		if (st == JSONL_RECORD)
			fn(record, ctx), n++;
	jsonl_reader_release(&reader);
	fclose(fp);
	free(path);
	return n;
}
