/* stream.c: the record loop every kg-* filter shares, around jsonl_next and jsonl_write, and
 * the one ranking of exit statuses (stream.h states the contract). */
#include "common.h"

#include <stdarg.h>

#include "cli.h"
#include "log.h"
#include "stream.h"
#include "xalloc.h"

/* Failures rank by their codes, which docs/design.md orders input (1), usage (2),
 * environment (3), I/O (4); the statuses that say how a tool ended well rank lowest. */
static int rank(int status)
{
	return status >= KG_EXIT_INPUT && status <= KG_EXIT_IO ? 1 + status : status != KG_EXIT_OK;
}

int exit_status_merge(int a, int b)
{
	return rank(b) > rank(a) ? b : a;
}

int stream_open(struct stream *s, const char *path, FILE *out)
{
	*s = (struct stream){.out = out};
	return jsonl_reader_open(&s->in, path);
}

void stream_release(struct stream *s)
{
	jsonl_reader_release(&s->in);
}

void stream_fail(struct stream *s, int status)
{
	s->status = exit_status_merge(s->status, status);
}

cJSON *stream_next(struct stream *s)
{
	cJSON *record;
	while (!s->broken) {
		switch (jsonl_next(&s->in, &record)) {
		case JSONL_RECORD: return record;
		case JSONL_BAD_LINE: stream_fail(s, KG_EXIT_INPUT); break;
		case JSONL_IO_ERROR:
			stream_fail(s, KG_EXIT_IO);
			s->broken = 1;
			break;
		case JSONL_EOF: return NULL;
		}
	}
	return NULL;
}

int stream_write(struct stream *s, const cJSON *record)
{
	if (jsonl_write(s->out, record) == 0 && (!s->flush_each || cli_flush() == 0))
		return 0;
	/* A record that could not be printed at all leaves no error on the stream for
	 * cli_finish to report: only memory can be short then. */
	if (!ferror(s->out))
		xalloc_die();
	stream_fail(s, KG_EXIT_IO);
	s->broken = 1;
	return -1;
}

int report_record(int *status, const char *name, long line, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	log_vat(name, line, fmt, ap);
	va_end(ap);
	*status = exit_status_merge(*status, KG_EXIT_INPUT);
	return -1;
}

int stream_each(struct stream *s, stream_handler fn, void *ctx)
{
	cJSON *record;
	while ((record = stream_next(s))) {
		enum stream_action action = fn(s, record, ctx);
		if (action == STREAM_PASS) {
			stream_write(s, record);
			cJSON_Delete(record);
		} else if (action == STREAM_STOP) {
			break;
		}
	}
	return s->status;
}
