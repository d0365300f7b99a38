/* events.c: RUN/events.jsonl, appended and read record by record through the one JSON-lines
 * reader and writer (events.h). A read from a byte offset or of the last records seeks rather
 * than reads what comes before, and counts the lines there only to name a bad line. */
#include "common.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "clock.h"
#include "events.h"
#include "jsonl.h"
#include "log.h"
#include "run.h"
#include "xalloc.h"

enum event_kind event_kind(const cJSON *record)
{
	const cJSON *build = cJSON_GetObjectItemCaseSensitive(record, "build");
	int baseline = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(build, "baseline"));
	if (cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(record, "candidate")) && !baseline)
		return build ? EVENT_EVALUATED : EVENT_REGISTERED;
	const char *op = json_string(record, "op");
	const char *status = json_string(cJSON_GetObjectItemCaseSensitive(record, "propose"), "status");
	if (op && strcmp(op, "expand") == 0 && status && strcmp(status, "empty") == 0)
		return EVENT_EXHAUSTED;
	if (baseline)
		return EVENT_ROOT;
	if (op && strcmp(op, "stop") == 0)
		return EVENT_STOP;
	return EVENT_OTHER;
}

int events_append(const char *run, const cJSON *record)
{
	char t[40];
	utc_now(t, sizeof(t), 1);
	cJSON *logged = cJSON_Duplicate(record, 1);
	if (!logged)
		xalloc_die();
	json_add_string(logged, "t", t);
	char *path = run_path(run, RUN_EVENTS);
	int rc = jsonl_append(path, logged);
	if (rc != 0) {
		int saved = errno;
		log_error("cannot append to '%s':", path);
		errno = saved;
	}
	cJSON_Delete(logged);
	free(path);
	return rc;
}

uint64_t events_size(const char *run)
{
	char *path = run_path(run, RUN_EVENTS);
	struct stat st;
	uint64_t size = stat(path, &st) == 0 ? (uint64_t)st.st_size : 0;
	free(path);
	return size;
}

/* The newlines of the log before the byte the read started at (jsonl's lines_before): read
 * again from the top, only when a line is to be named. What cannot be read counts nothing. */
static long count_lines_before(void *ctx)
{
	const struct events_reader *r = ctx;
	FILE *fp = fopen(r->path, "rb");
	long lines = 0;
	if (!fp)
		return 0;
	char buf[65536];
	for (uint64_t left = r->start; left > 0;) {
		size_t n = fread(buf, 1, left < sizeof(buf) ? (size_t)left : sizeof(buf), fp);
		if (n == 0)
			break;
		for (size_t i = 0; i < n; i++)
			lines += buf[i] == '\n';
		left -= n;
	}
	fclose(fp);
	return lines;
}

static void reader_init(struct events_reader *r, const char *path, unsigned flags)
{
	*r = (struct events_reader){.path = xstrdup(path)};
	jsonl_reader_init(&r->in, NULL, r->path);
	r->in.plain_numbers = !(flags & EVENTS_NUMBER_TEXTS);
}

/* Opens the log for r; EVENTS_OPENED, EVENTS_MISSING or EVENTS_FAILED (reported). */
static enum events_open_status open_log(struct events_reader *r, unsigned flags)
{
	FILE *fp = fopen(r->path, "r");
	if (!fp) {
		if (errno == ENOENT && !(flags & EVENTS_MUST_EXIST))
			return EVENTS_MISSING;
		log_error("cannot open '%s':", r->path);
		r->failed = 1;
		return EVENTS_FAILED;
	}
	r->in.fp = fp;
	r->in.owns_fp = 1;
	return EVENTS_OPENED;
}

/* Reads from byte from, which must follow a newline: a record starts there. */
static enum events_open_status start_at(struct events_reader *r, uint64_t from)
{
	r->start = r->offset = from;
	errno = 0;
	if (from == 0 && fseeko(r->in.fp, 0, SEEK_SET) == 0)
		return EVENTS_OPENED; /* back to the top, where events_open_last may have read from */
	r->in.lines_before = count_lines_before;
	r->in.lines_ctx = r;
	int c = from > 0 && fseeko(r->in.fp, (off_t)(from - 1), SEEK_SET) == 0 ? getc(r->in.fp) : EOF;
	if (c == '\n')
		return EVENTS_OPENED;
	if (c == EOF && (ferror(r->in.fp) || errno)) {
		log_error("cannot read '%s':", r->path);
		r->failed = 1;
		return EVENTS_FAILED;
	}
	r->failed = 1; /* nothing is read from a byte inside a line */
	return EVENTS_NOT_AT_RECORD;
}

enum events_open_status events_open_file(struct events_reader *r, const char *path, uint64_t from, unsigned flags)
{
	reader_init(r, path, flags);
	enum events_open_status st = open_log(r, flags);
	return st == EVENTS_OPENED ? start_at(r, from) : st;
}

enum events_open_status events_open(struct events_reader *r, const char *run, uint64_t from, unsigned flags)
{
	char *path = run_path(run, RUN_EVENTS);
	enum events_open_status st = events_open_file(r, path, from, flags);
	free(path);
	return st;
}

static int is_blank_byte(char c)
{
	return c == ' ' || c == '\t' || c == '\r';
}

/* Where the earliest of the last n lines of buf that are not blank starts; at_top: buf is the
 * file from its first byte, so that its first line starts at 0. -1 when buf holds fewer
 * (those before it may hold more), 0 at the top when the file holds fewer. */
static long last_records_start(const char *buf, size_t len, size_t n, int at_top)
{
	size_t count = 0;
	int nonblank = 0;
	for (size_t i = len; i-- > 0;) {
		if (buf[i] == '\n') {
			if (nonblank && ++count == n)
				return (long)(i + 1);
			nonblank = 0;
		} else if (!is_blank_byte(buf[i])) {
			nonblank = 1;
		}
	}
	return at_top ? 0 : -1;
}

enum events_open_status events_open_last(struct events_reader *r, const char *run, size_t n, unsigned flags)
{
	char *path = run_path(run, RUN_EVENTS);
	reader_init(r, path, flags);
	free(path);
	enum events_open_status st = open_log(r, flags);
	if (st != EVENTS_OPENED)
		return st;
	FILE *fp = r->in.fp;
	off_t size = fseeko(fp, 0, SEEK_END) == 0 ? ftello(fp) : -1;
	char *buf = NULL;
	long start = -1;
	off_t from = 0;
	/* Back from the end in ever larger reads, until they hold n lines or the whole log. */
	for (off_t want = 64 * 1024; size >= 0 && start < 0; want *= 2) {
		from = size > want ? size - want : 0;
		size_t len = (size_t)(size - from);
		buf = xrealloc(buf, len + 1);
		if (fseeko(fp, from, SEEK_SET) != 0 || fread(buf, 1, len, fp) != len)
			break;
		start = n == 0 ? (long)len : last_records_start(buf, len, n, from == 0);
	}
	free(buf);
	if (size < 0 || start < 0) {
		log_error("cannot read '%s':", r->path);
		r->failed = 1;
		return EVENTS_FAILED;
	}
	return start_at(r, (uint64_t)from + (uint64_t)start);
}

cJSON *events_next(struct events_reader *r)
{
	if (!r->in.fp || r->failed)
		return NULL;
	cJSON *record = NULL;
	enum jsonl_status st;
	while ((st = jsonl_next(&r->in, &record)) == JSONL_BAD_LINE)
		r->bad++;
	if (st == JSONL_IO_ERROR) {
		r->failed = 1;
		return NULL;
	}
	off_t pos = ftello(r->in.fp);
	if (pos >= 0)
		r->offset = (uint64_t)pos;
	return st == JSONL_RECORD ? record : NULL;
}

long events_line(struct events_reader *r)
{
	return jsonl_line(&r->in);
}

void events_reader_release(struct events_reader *r)
{
	jsonl_reader_release(&r->in);
	free(r->path);
	r->path = NULL;
}

size_t events_read(const char *run, events_fn fn, void *ctx)
{
	struct events_reader r;
	size_t n = 0;
	cJSON *record;
	events_open(&r, run, 0, 0);
	while ((record = events_next(&r)))
		fn(record, ctx), n++;
	events_reader_release(&r);
	return n;
}
