/* stream.h: the record loop of every kg-* filter: records in, the tool's handler for each,
 * what it does not own passed on, bad records reported one way, exit statuses ranked one way. */
#ifndef KG_STREAM_H
#define KG_STREAM_H

#include "common.h"

#include <stdio.h>

#include "jsonl.h"

/* The contract (docs/design.md "Exit statuses and errors"):
 * - A line that is not a JSON object is reported ("kg-NAME: FILE:LINE: ...") by jsonl_next,
 *   dropped, and ranked KG_EXIT_INPUT; reading goes on.
 * - A record the tool cannot handle is reported the same way by stream_error and, unless
 *   the tool says otherwise, passed on unchanged.
 * - A failed read or write ranks KG_EXIT_IO and ends the loop: nothing after it could be
 *   read, or would reach the next tool. A failed write is not reported here: cli_finish
 *   reports the error of standard output, with the system's reason, once.
 * - The status is the worst seen, as exit_status_merge ranks them. */

/* The more serious of two exit statuses: KG_EXIT_IO, then KG_EXIT_ENV, then KG_EXIT_USAGE,
 * then KG_EXIT_INPUT; the statuses that are no failure (KG_EXIT_OK, and those above
 * KG_EXIT_IO: the search is over, another holds the lock) below every failure, the first
 * kept when they tie. A lesser problem never hides a more serious one. */
int exit_status_merge(int a, int b);

struct stream {
	struct jsonl_reader in;
	FILE *out;	/* where records are passed on; NULL for a tool that passes none on */
	int status;	/* the worst exit status so far */
	int broken;	/* reading or writing failed: the loop reads nothing more */
	int flush_each; /* every record goes out at once, for a tool slow enough (a compile, a
			 * measurement) that the next stage should not wait for a full buffer */
};

/* Opens path ("-" for stdin) to read records from, to pass them on to out (stdout, or NULL: a
 * file of records the tool consumes, such as --pending). Returns 0, or -1 after reporting why
 * it cannot be opened (for the tools, a usage error: exit status 2). */
int stream_open(struct stream *s, const char *path, FILE *out);
/* Closes what stream_open opened; stdin and stdout stay open for cli_finish. */
void stream_release(struct stream *s);

/* The next record, which the caller owns (cJSON_Delete), or NULL at the end of the input or
 * after a read error. Bad lines are skipped (reported and ranked); so is everything once the
 * stream is broken. */
cJSON *stream_next(struct stream *s);

/* Writes record on s->out (it stays the caller's). Returns 0, or -1 when the write failed:
 * the stream is then broken and its status KG_EXIT_IO. */
int stream_write(struct stream *s, const cJSON *record);

/* Ranks status into s's status, as exit_status_merge does. */
void stream_fail(struct stream *s, int status);

/* Reports a record that cannot be handled, "kg-NAME: NAME:LINE: message", LINE being the
 * record's line in the input NAME, and ranks KG_EXIT_INPUT into *status. Returns -1. */
int report_record(int *status, const char *name, long line, const char *fmt, ...) PRINTF_LIKE(4, 5);
/* The same for a record of s: stream_error(s, line, fmt, ...). */
#define stream_error(s, line, ...) report_record(&(s)->status, (s)->in.name, (line), __VA_ARGS__)

/* What a handler did with the record it was given. */
enum stream_action {
	STREAM_PASS, /* the loop writes the record on and frees it: the tool has added its part, or
		      * the record is not the tool's */
	STREAM_TAKEN, /* the handler freed or kept the record (and wrote what goes out itself) */
	STREAM_STOP,  /* as STREAM_TAKEN, and the loop ends: the tool cannot go on (no GPU) */
};

/* Called with each record, which the handler owns; s->in.line is the record's line. */
typedef enum stream_action (*stream_handler)(struct stream *s, cJSON *record, void *ctx);

/* Hands every record of s to fn until the input ends, the stream breaks or fn stops it.
 * Returns s's status. */
int stream_each(struct stream *s, stream_handler fn, void *ctx);

#endif
