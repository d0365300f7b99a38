/* jsonl.c: JSON lines in and out, and whole documents, all through cJSON's strict
 * length-bounded parser, so that trailing garbage or an embedded NUL is an error. */
#include "common.h"

#include <math.h>

#include <errno.h>

#include "fileio.h"
#include "jsonl.h"
#include "xalloc.h"
#include "log.h"

void jsonl_reader_init(struct jsonl_reader *r, FILE *fp, const char *name)
{
	r->fp = fp;
	r->name = name;
	r->line = 0;
	r->buf = NULL;
	r->cap = 0;
	r->owns_fp = 0;
	r->plain_numbers = 0;
	r->lines_before = NULL;
	r->lines_ctx = NULL;
}

int jsonl_reader_open(struct jsonl_reader *r, const char *path)
{
	if (strcmp(path, "-") == 0) {
		jsonl_reader_init(r, stdin, "<stdin>");
		return 0;
	}
	FILE *fp = fopen(path, "r");
	if (!fp)
		return log_error("cannot open '%s':", path);
	jsonl_reader_init(r, fp, path);
	r->owns_fp = 1;
	return 0;
}

static int is_blank(const char *s, size_t len)
{
	for (size_t i = 0; i < len; i++)
		if (s[i] != ' ' && s[i] != '\t' && s[i] != '\r' && s[i] != '\n')
			return 0;
	return 1;
}

/* Line and column (both from 1) of byte offset pos in text; columns count characters, not
 * the bytes of UTF-8 continuation. */
static void position_of(const char *text, size_t pos, long *line, long *column)
{
	*line = 1;
	*column = 1;
	for (size_t i = 0; i < pos; i++) {
		if (text[i] == '\n') {
			++*line;
			*column = 1;
		} else if (((unsigned char)text[i] & 0xC0) != 0x80) {
			++*column;
		}
	}
}

/* Where the next number token at or after *pos in text[0..len) starts (*start) and ends
 * (*pos, just past it), strings skipped; 0 when there is none. In valid JSON, a '-' or a digit
 * outside a string can only start a number, since true, false and null hold neither. */
static int next_number_token(const char *text, size_t len, size_t *pos, size_t *start)
{
	size_t i = *pos;
	while (i < len) {
		char c = text[i];
		if (c == '"') {
			for (i++; i < len && text[i] != '"'; i++)
				if (text[i] == '\\')
					i++;
			i++;
		} else if (c == '-' || (c >= '0' && c <= '9')) {
			*start = i;
			while (i < len && (text[i] == '-' || text[i] == '+' || text[i] == '.' || text[i] == 'e' ||
					   text[i] == 'E' || (text[i] >= '0' && text[i] <= '9')))
				i++;
			*pos = i;
			return 1;
		} else {
			i++;
		}
	}
	return 0;
}

/* Gives number the text of its token when cJSON would print its double otherwise, since the
 * double cannot hold every number (9007199254740993 comes back 9007199254740992, 1e400 as null,
 * and cJSON's 15-digit printing rounds some 17-digit values). The node stays a number, so every
 * reader of numbers sees its double; the writers below print the text. */
/* Whether token is an integer as cJSON prints one: an optional minus, then 0 or up to 15
 * digits without a leading zero (a double holds it exactly, and cJSON prints it digit for
 * digit). Most numbers of a log are such, and printing each to compare costs more than the
 * parse. */
static int plain_integer(const char *token, size_t len)
{
	size_t i = len && token[0] == '-', digits = len - i;
	if (digits == 0 || digits > 15 || (token[i] == '0' && (digits > 1 || i)))
		return 0;
	for (; i < len; i++)
		if (token[i] < '0' || token[i] > '9')
			return 0;
	return 1;
}

static void keep_token(cJSON *number, const char *token, size_t len)
{
	char printed[64];
	if (plain_integer(token, len))
		return;
	if (cJSON_PrintPreallocated(number, printed, (int)sizeof(printed), 0) && strlen(printed) == len &&
	    memcmp(printed, token, len) == 0)
		return;
	char *text = cJSON_malloc(len + 1);
	if (!text)
		xalloc_die();
	memcpy(text, token, len);
	text[len] = '\0';
	number->valuestring = text;
}

/* Walks the values from item on (its siblings after it, and the children of each) in document
 * order, which is cJSON's order of children, alongside the number tokens of the text it was
 * parsed from, *pos being where the next token is looked for. */
static void keep_number_texts(cJSON *item, const char *text, size_t len, size_t *pos)
{
	for (; item; item = item->next) {
		size_t start;
		if (cJSON_IsNumber(item)) {
			if (!next_number_token(text, len, pos, &start))
				return;
			keep_token(item, text + start, *pos - start);
		} else if (item->child) {
			keep_number_texts(item->child, text, len, pos);
		}
	}
}

/* Parses exactly one JSON value from text[0..len), allowing blanks around it. Returns it,
 * or NULL with *bad set to the offset of the first character that is wrong: cJSON says
 * where parsing stopped but not why, so the position is all a message can give. */
static cJSON *parse_strict(const char *text, size_t len, int keep_texts, size_t *bad)
{
	const char *end = NULL;
	cJSON *value = cJSON_ParseWithLengthOpts(text, len, &end, 0);
	size_t stop = end && end >= text && (size_t)(end - text) <= len ? (size_t)(end - text) : len;
	if (!value) {
		*bad = stop;
		return NULL;
	}
	while (stop < len && is_blank(text + stop, 1))
		stop++;
	if (stop < len) {
		cJSON_Delete(value);
		*bad = stop;
		return NULL;
	}
	size_t pos = 0;
	if (keep_texts)
		keep_number_texts(value, text, len, &pos);
	return value;
}

/* Whether a number under item (item included, its siblings not) has a text to print. */
static int has_kept_text(const cJSON *item)
{
	if (cJSON_IsNumber(item))
		return item->valuestring != NULL;
	for (const cJSON *child = item->child; child; child = child->next)
		if (has_kept_text(child))
			return 1;
	return 0;
}

/* Turns the numbers under item whose text still says their value into raw nodes, which cJSON
 * prints verbatim. A number set since it was read has a double its text no longer gives, and
 * is printed from the double. */
static void raw_kept_texts(cJSON *item)
{
	if (cJSON_IsNumber(item)) {
		if (item->valuestring && strtod(item->valuestring, NULL) == item->valuedouble)
			item->type = cJSON_Raw;
		return;
	}
	for (cJSON *child = item->child; child; child = child->next)
		raw_kept_texts(child);
}

/* item as compact or pretty JSON text, numbers read from text as they were written there; the
 * caller frees it with cJSON_free. NULL when memory ran out. Records are printed from a copy, so
 * that what the caller holds stays numbers. */
static char *print_kept(const cJSON *item, int pretty)
{
	if (!has_kept_text(item))
		return pretty ? cJSON_Print(item) : cJSON_PrintUnformatted(item);
	cJSON *copy = cJSON_Duplicate(item, 1);
	if (!copy)
		return NULL;
	raw_kept_texts(copy);
	char *text = pretty ? cJSON_Print(copy) : cJSON_PrintUnformatted(copy);
	cJSON_Delete(copy);
	return text;
}

long jsonl_line(struct jsonl_reader *r)
{
	if (r->lines_before) {
		r->line += r->lines_before(r->lines_ctx);
		r->lines_before = NULL;
	}
	return r->line;
}

enum jsonl_status jsonl_next(struct jsonl_reader *r, cJSON **record)
{
	for (;;) {
		errno = 0;
		ssize_t n = getline(&r->buf, &r->cap, r->fp);
		if (n < 0) {
			if (ferror(r->fp)) {
				log_error("cannot read '%s':", r->name);
				return JSONL_IO_ERROR;
			}
			return JSONL_EOF;
		}
		r->line++;
		size_t len = (size_t)n;
		if (len > 0 && r->buf[len - 1] == '\n')
			len--;
		if (len > 0 && r->buf[len - 1] == '\r')
			len--;
		if (is_blank(r->buf, len))
			continue;

		size_t bad;
		cJSON *value = parse_strict(r->buf, len, !r->plain_numbers, &bad);
		if (!value) {
			long line, column;
			position_of(r->buf, bad, &line, &column);
			log_error("%s:%ld: invalid JSON at column %ld", r->name, jsonl_line(r), column);
			return JSONL_BAD_LINE;
		}
		if (!cJSON_IsObject(value)) {
			cJSON_Delete(value);
			log_error("%s:%ld: a record must be a JSON object", r->name, jsonl_line(r));
			return JSONL_BAD_LINE;
		}
		*record = value;
		return JSONL_RECORD;
	}
}

void jsonl_reader_release(struct jsonl_reader *r)
{
	if (r->owns_fp && r->fp)
		fclose(r->fp);
	free(r->buf);
	r->buf = NULL;
	r->fp = NULL;
}

int jsonl_write(FILE *fp, const cJSON *record)
{
	char *text = print_kept(record, 0);
	if (!text) {
		errno = ENOMEM;
		return -1;
	}
	int ok = fputs(text, fp) >= 0 && putc('\n', fp) != EOF;
	cJSON_free(text);
	return ok ? 0 : -1;
}

char *json_text(const cJSON *item)
{
	char *text = cJSON_PrintUnformatted(item);
	if (!text)
		xalloc_die();
	char *copy = xstrdup(text);
	cJSON_free(text);
	return copy;
}

cJSON *jsonl_read_file(const char *path)
{
	cJSON *records = cJSON_CreateArray();
	if (!records)
		xalloc_die();
	FILE *fp = fopen(path, "r");
	if (!fp) {
		if (errno != ENOENT)
			log_warn("cannot read '%s':", path);
		return records;
	}
	struct jsonl_reader reader;
	jsonl_reader_init(&reader, fp, path);
	cJSON *record;
	enum jsonl_status st;
	while ((st = jsonl_next(&reader, &record)) != JSONL_EOF && st != JSONL_IO_ERROR)
		if (st == JSONL_RECORD)
			json_append(records, record);
	jsonl_reader_release(&reader);
	fclose(fp);
	return records;
}

int jsonl_append(const char *path, const cJSON *record)
{
	char *text = print_kept(record, 0);
	if (!text) {
		errno = ENOMEM;
		return -1;
	}
	size_t len = strlen(text);
	char *line = xmalloc(len + 2);
	memcpy(line, text, len);
	line[len] = '\n';
	cJSON_free(text);
	int rc = file_append(path, line, len + 1);
	free(line);
	return rc;
}

cJSON *json_parse_document(const char *name, const char *text, size_t len)
{
	size_t bad;
	cJSON *value = parse_strict(text, len, 1, &bad);
	if (!value) {
		long line, column;
		position_of(text, bad, &line, &column);
		log_error("%s:%ld:%ld: invalid JSON", name, line, column);
	}
	return value;
}

cJSON *json_object(void)
{
	cJSON *obj = cJSON_CreateObject();
	if (!obj)
		xalloc_die();
	return obj;
}

void json_add(cJSON *obj, const char *key, cJSON *item)
{
	if (!item || !cJSON_AddItemToObject(obj, key, item))
		xalloc_die();
}

void json_add_number(cJSON *obj, const char *key, double value)
{
	json_add(obj, key, isfinite(value) ? cJSON_CreateNumber(value) : cJSON_CreateNull());
}

void json_add_string(cJSON *obj, const char *key, const char *value)
{
	json_add(obj, key, cJSON_CreateString(value));
}

void json_add_bool(cJSON *obj, const char *key, int value)
{
	json_add(obj, key, cJSON_CreateBool(value));
}

void json_append(cJSON *array, cJSON *item)
{
	if (!item || !cJSON_AddItemToArray(array, item))
		xalloc_die();
}

int json_given(const cJSON *v)
{
	return v && !cJSON_IsNull(v) && !cJSON_IsFalse(v);
}

const char *json_string(const cJSON *obj, const char *key)
{
	const cJSON *item = cJSON_GetObjectItemCaseSensitive(obj, key);
	return cJSON_IsString(item) ? item->valuestring : NULL;
}

double json_number(const cJSON *obj, const char *key, double fallback)
{
	const cJSON *item = cJSON_GetObjectItemCaseSensitive(obj, key);
	return cJSON_IsNumber(item) ? item->valuedouble : fallback;
}

const cJSON *json_object_member(const cJSON *obj, const char *key)
{
	const cJSON *item = cJSON_GetObjectItemCaseSensitive(obj, key);
	return cJSON_IsObject(item) ? item : NULL;
}

cJSON *json_read_file(const char *path)
{
	size_t len;
	char *text = file_read_all(path, &len);
	cJSON *doc = text ? cJSON_ParseWithLength(text, len) : NULL;
	if (doc) {
		size_t pos = 0;
		keep_number_texts(doc, text, len, &pos);
	}
	free(text);
	return doc;
}

cJSON *json_read_optional(const char *path)
{
	size_t len;
	char *text = file_read_all(path, &len);
	if (!text) {
		if (errno != ENOENT)
			log_warn("cannot read '%s':", path);
		return NULL;
	}
	cJSON *doc = json_parse_document(path, text, len);
	free(text);
	return doc;
}

int json_write_file(const char *path, const cJSON *doc, int pretty)
{
	char *text = print_kept(doc, pretty);
	if (!text)
		xalloc_die();
	size_t len = strlen(text);
	char *file = xmalloc(len + 2);
	memcpy(file, text, len);
	file[len] = '\n';
	file[len + 1] = '\0';
	cJSON_free(text);
	int rc = file_write_atomic(path, file, len + 1);
	int saved_errno = errno;
	free(file);
	errno = saved_errno;
	return rc;
}
