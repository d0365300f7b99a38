/* events.h: RUN/events.jsonl, the run's log (docs/design.md "The run directory"), which
 * kg-select --update appends to: its one writer, its one reader and the one rule for what a
 * record of it is. No other C code opens the log.
 *
 * Contract:
 * - events_append is the only way a record enters the log: a copy of it, stamped with "t"
 *   (UTC, to the millisecond), as one line.
 * - A reader hands the records of the log in order, each the caller's to free with
 *   cJSON_Delete: from the start, from a byte offset (where an earlier read stopped: what was
 *   appended since), or the last N. A reader of a long log keeps only what it needs, so that
 *   its memory and its time to free grow with that, not with the log.
 * - A bad line is reported ("FILE:LINE: ...", LINE counted from the top of the log even when
 *   the read started past it) and skipped, and counted in the reader's bad. A read that fails
 *   is reported and ends the reader's records (failed); the records before it count.
 * - A log that does not exist has no records, unless the caller says it must exist.
 * - Numbers are their doubles alone (jsonl.h "Numbers") unless EVENTS_NUMBER_TEXTS: a reader
 *   that writes back what it read (a graph learning the log again) keeps their texts.
 * - event_kind is the one rule for what a record is; "how many candidates has this run
 *   evaluated" is the number of its EVENT_EVALUATED records. */
#ifndef KG_EVENTS_H
#define KG_EVENTS_H

#include "common.h"

#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "jsonl.h"

/* What a record is, judged from the record alone, in this order: the rule kg-select --update
 * learns by, so that on its log it agrees with the "update" member it wrote (update.root,
 * update.child, update.registered, update.exhausted). */
enum event_kind {
	EVENT_OTHER,	  /* none of these: not learned, never in the log */
	EVENT_EVALUATED,  /* a candidate (a "candidate" object, no baseline build) with a "build"
			   * member: built, and measured or failed; one build of the budget */
	EVENT_REGISTERED, /* a candidate without a "build": its edge is added, not evaluated */
	EVENT_EXHAUSTED,  /* an expansion kg-propose found nothing new for ("op": "expand",
			   * "propose": {"status": "empty"}): its node is not expanded again */
	EVENT_ROOT,	  /* the baseline's record (build.baseline true): the root of a run without
			   * a graph; in a log, its first record */
	EVENT_STOP,	  /* {"op": "stop"}: kg-select's word that the search is over */
};

enum event_kind event_kind(const cJSON *record);

/* Appends a copy of record to RUN/events.jsonl, with "t" the time now. Returns 0, or -1 after
 * reporting ("cannot append to 'FILE': ...") with errno set. */
int events_append(const char *run, const cJSON *record);

/* The size of RUN/events.jsonl in bytes, where a read of what is appended next starts; 0 when
 * there is none. */
uint64_t events_size(const char *run);

enum events_flags {
	EVENTS_NUMBER_TEXTS = 1 << 0, /* keep the texts of numbers (jsonl.h "Numbers") */
	EVENTS_MUST_EXIST = 1 << 1,   /* a log that does not exist is reported ("cannot open") */
};

/* One read of a log. */
struct events_reader {
	struct jsonl_reader in; /* the lines, through the one JSON-lines reader */
	char *path;		/* the log, as messages name it */
	uint64_t start;		/* the byte the read started at */
	uint64_t offset;	/* the byte after the last line read: where a read of what is
				 * appended later starts */
	long lines_before;	/* the lines before start; -1 until a message needs them */
	size_t bad;		/* lines reported and skipped */
	int failed;		/* opening or reading failed (reported): no more records */
};

/* What opening a reader found. On every return the reader yields what it can (nothing unless
 * EVENTS_OPENED) and is to be released. */
enum events_open_status {
	EVENTS_FAILED = -1,   /* reported: the log cannot be opened or read there */
	EVENTS_OPENED = 0,    /* the records follow */
	EVENTS_MISSING = 1,   /* there is no log (reported only with EVENTS_MUST_EXIST, and then
			       * EVENTS_FAILED) */
	EVENTS_NOT_AT_RECORD, /* from is past the end, or not just after a newline (the log was
			       * changed under the caller); not reported: the caller words it */
};

/* A reader of RUN/events.jsonl from byte from (0: the start); flags: enum events_flags. */
enum events_open_status events_open(struct events_reader *r, const char *run, uint64_t from, unsigned flags);
/* The same of a log at path (a run's log copied elsewhere: a replay table, a --history file). */
enum events_open_status events_open_file(struct events_reader *r, const char *path, uint64_t from, unsigned flags);
/* A reader of the last n records of RUN/events.jsonl (its last n lines that are not blank; a
 * bad one among them is reported and skipped), read back from the end, not the whole log. */
enum events_open_status events_open_last(struct events_reader *r, const char *run, size_t n, unsigned flags);

/* The next record, the caller's to free; NULL once there is none (the end, or a failed read). */
cJSON *events_next(struct events_reader *r);
/* The line of the log (from 1, at its top) of the record events_next returned last. */
long events_line(struct events_reader *r);
/* Closes the log and frees what the reader holds. */
void events_reader_release(struct events_reader *r);

/* Every record of RUN/events.jsonl, numbers their doubles alone, handed in order to fn, which
 * owns it. Returns the number handed. */
typedef void (*events_fn)(cJSON *record, void *ctx);
size_t events_read(const char *run, events_fn fn, void *ctx);

#endif
