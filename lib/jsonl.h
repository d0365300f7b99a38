/* jsonl.h: the one reader and writer of JSON: records as JSON lines on streams, and whole
 * JSON documents (specs, graph files). Every parse error names the source, line and column. */
#ifndef KG_JSONL_H
#define KG_JSONL_H

#include "common.h"

#include <stddef.h>
#include <stdio.h>

#include <cjson/cJSON.h>

/* Reads one record per line from a stream. Lines may be of any length; a trailing "\r" is
 * dropped; blank lines are skipped; every other line must be one JSON object. */
struct jsonl_reader {
	FILE *fp;	  /* the stream being read */
	const char *name; /* how messages name it: a path, or "<stdin>" */
	long line;	  /* number of the line last read, from 1 */
	char *buf;	  /* getline's buffer, reused from line to line */
	size_t cap;	  /* bytes allocated for buf */
	int owns_fp;	  /* whether jsonl_reader_release closes fp */
	int plain_numbers; /* 1: numbers are their doubles alone, no text kept (see Numbers
			      below): for a reader that never writes back what it read */
	/* For a stream read from past its first line (lib/events, from a byte offset): the number
	 * of lines before where it starts, asked for once, the first time a line is named
	 * (jsonl_line), so that a read of a log's tail need not count its head; NULL: none. */
	long (*lines_before)(void *ctx);
	void *lines_ctx; /* lines_before's argument */
};

enum jsonl_status {
	JSONL_RECORD,	/* *record holds the next object; the caller frees it with cJSON_Delete */
	JSONL_EOF,	/* the input has ended */
	JSONL_BAD_LINE, /* this line was reported ("<name>:<line>: ..."); reading may go on */
	JSONL_IO_ERROR, /* reading failed; reported; stop */
};

/* Reads fp, which stays the caller's to close; name is borrowed. */
void jsonl_reader_init(struct jsonl_reader *r, FILE *fp, const char *name);
/* Opens path ("-" for stdin). Returns 0, or -1 after reporting why it cannot be opened. */
int jsonl_reader_open(struct jsonl_reader *r, const char *path);
enum jsonl_status jsonl_next(struct jsonl_reader *r, cJSON **record);
/* The number of the line last read, counted from the top of the file (lines_before). */
long jsonl_line(struct jsonl_reader *r);
void jsonl_reader_release(struct jsonl_reader *r);

/* Numbers: every reader here keeps the text of a number that cJSON would not print back as it
 * was written (an integer beyond 2^53, 1e400, a 17-digit fraction), so that records and
 * documents pass on members no tool owns unchanged. The node stays a number whose double is
 * what the text gives, as close as a double can be; jsonl_write, jsonl_append and
 * json_write_file print the text while the double is still the one it gives, and json_text
 * prints the double, for keys and hashes that must not depend on how a number was spelt. */

/* Writes record as one compact line. Returns 0, or -1 with errno set when the write failed. */
int jsonl_write(FILE *fp, const cJSON *record);

/* Every record of the JSON-lines file at path, as an array the caller frees with
 * cJSON_Delete: empty when the file does not exist. Bad lines are reported and skipped; a
 * file that cannot be read is warned about and gives what was read. */
cJSON *jsonl_read_file(const char *path);

/* Appends record as one line to the file at path (file_append). Returns 0, or -1 with errno. */
int jsonl_append(const char *path, const cJSON *record);

/* Building records and documents: each takes ownership of what it adds, and ends the
 * program as xmalloc does when memory runs out. A non-finite number is written as null,
 * since JSON has no NaN or infinity. */
cJSON *json_object(void);
void json_add(cJSON *obj, const char *key, cJSON *item);
void json_add_number(cJSON *obj, const char *key, double value);
void json_add_string(cJSON *obj, const char *key, const char *value);
void json_add_bool(cJSON *obj, const char *key, int value);
void json_append(cJSON *array, cJSON *item);

/* item as compact JSON text, numbers printed from their doubles, in a buffer the caller frees
 * with free(). */
char *json_text(const cJSON *item);

/* Reading members: the string value of key, or NULL when it is absent or not a string; the
 * number, or fallback when it is absent or not a number; the object, or NULL when it is absent
 * or not an object (a malformed file's array has no names to show). */
const char *json_string(const cJSON *obj, const char *key);
double json_number(const cJSON *obj, const char *key, double fallback);
const cJSON *json_object_member(const cJSON *obj, const char *key);
/* Whether v counts as given the way jq's "a // b" takes a: present, not null, not false
 * (kg-report's jq and kg-select read the records' optional members alike). */
int json_given(const cJSON *v);

/* The JSON document in the file at path; NULL when it cannot be read or is not JSON. Reports
 * nothing: for files whose absence or damage the caller treats as "none". */
cJSON *json_read_file(const char *path);

/* The JSON document in the file at path, for files that may be absent: NULL, silently, when
 * there is none; NULL after reporting when it cannot be read or is not JSON. The caller frees
 * the result with cJSON_Delete. */
cJSON *json_read_optional(const char *path);

/* Replaces path with doc, printed (pretty or compact) and ending in a newline, through
 * file_write_atomic. Returns 0, or -1 with errno set; reports nothing. */
int json_write_file(const char *path, const cJSON *doc, int pretty);

/* Parses text as one JSON document. On error, reports "<name>:<line>:<column>: invalid JSON"
 * and returns NULL; otherwise the caller frees the result with cJSON_Delete. */
cJSON *json_parse_document(const char *name, const char *text, size_t len);

#endif
