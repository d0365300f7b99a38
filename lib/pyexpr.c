/* pyexpr.c: lexer, parser, name resolver and tree-walking evaluator for pyexpr.h.
 * An expression is parsed once into a tree whose names are resolved to slots, so that
 * evaluating it for each of millions of configurations does no parsing or lookup. */
#include "common.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>

#include "parse.h"
#include "pyexpr.h"
#include "pyexpr_tree.h"
#include "xalloc.h"

/* Lists and strings past this size are refused rather than built: no tuning space needs
 * them, and a typo such as range(10**12) should fail fast instead of exhausting memory. */
#define MAX_ITEMS 10000000
/* Deeper nesting than this is refused so that parsing, resolving and evaluating, which
 * recurse, cannot exhaust the stack: MAX_DEPTH bounds brackets and unary operators while
 * parsing, MAX_HEIGHT the finished tree (long chains such as 1+1+...+1). */
#define MAX_DEPTH 200
#define MAX_HEIGHT 1000
/* What one evaluation may spend. A spec's expressions take thousands of steps and
 * kilobytes (each is evaluated once per configuration, millions of times), so these limits
 * are only reached by a runaway expression ('' * 10**18, nested comprehensions over large
 * ranges), which must then fail in about a second, within memory, instead of hanging the
 * tool. A step is a node evaluated, an item built, copied or compared, or
 * STR_BYTES_PER_STEP bytes of a string read; the bytes are those of the lists, strings and
 * ranges built in the arena, and of a comprehension's items while it runs. */
#define EVAL_STEPS 100000000
#define EVAL_MIB 512
#define STR_BYTES_PER_STEP 16

/* ---------------------------------------------------------------- arena */

struct arena_block {
	struct arena_block *next;
	size_t size; /* bytes in data */
	size_t used; /* bytes handed out */
	_Alignas(16) unsigned char data[];
};

struct pyarena {
	struct arena_block *head; /* the block being filled; older blocks follow */
};

struct pyarena *pyarena_new(void)
{
	return xcalloc(1, sizeof(struct pyarena));
}

static void *arena_alloc(struct pyarena *a, size_t size)
{
	size = (size + 15) & ~(size_t)15;
	struct arena_block *b = a->head;
	if (!b || b->size - b->used < size) {
		size_t want = size > 65536 ? size : 65536;
		b = xmalloc(sizeof(*b) + want);
		b->size = want;
		b->used = 0;
		b->next = a->head;
		a->head = b;
	}
	void *p = b->data + b->used;
	b->used += size;
	return p;
}

void pyarena_reset(struct pyarena *a)
{
	struct arena_block *b = a->head;
	if (!b)
		return;
	/* Keep the newest block; it is usually the only one. */
	struct arena_block *old = b->next;
	while (old) {
		struct arena_block *next = old->next;
		free(old);
		old = next;
	}
	b->next = NULL;
	b->used = 0;
}

void pyarena_free(struct pyarena *a)
{
	if (!a)
		return;
	struct arena_block *b = a->head;
	while (b) {
		struct arena_block *next = b->next;
		free(b);
		b = next;
	}
	free(a);
}

/* ---------------------------------------------------------------- values */

struct pyval pyval_none(void)
{
	struct pyval v = {.kind = PY_NONE};
	return v;
}

struct pyval pyval_bool(int b)
{
	struct pyval v = {.kind = PY_BOOL, .u.i = b != 0};
	return v;
}

struct pyval pyval_int(int64_t i)
{
	struct pyval v = {.kind = PY_INT, .u.i = i};
	return v;
}

struct pyval pyval_float(double f)
{
	struct pyval v = {.kind = PY_FLOAT, .u.f = f};
	return v;
}

struct pyval pyval_str(struct pyarena *arena, const char *s, size_t len)
{
	struct pystr *p = arena_alloc(arena, sizeof(*p) + len + 1);
	p->len = len;
	if (len)
		memcpy(p->bytes, s, len);
	p->bytes[len] = '\0';
	struct pyval v = {.kind = PY_STR, .u.s = p};
	return v;
}

static struct pylist *new_list(struct pyarena *arena, size_t n)
{
	struct pylist *l = arena_alloc(arena, sizeof(*l) + n * sizeof(struct pyval));
	l->len = n;
	return l;
}

struct pyval pyval_list(struct pyarena *arena, const struct pyval *items, size_t n)
{
	struct pylist *l = new_list(arena, n);
	if (n)
		memcpy(l->items, items, n * sizeof(*items));
	struct pyval v = {.kind = PY_LIST, .u.list = l};
	return v;
}

static struct pyval make_range(struct pyarena *arena, int64_t start, int64_t stop, int64_t step)
{
	struct pyrange *r = arena_alloc(arena, sizeof(*r));
	r->start = start;
	r->stop = stop;
	r->step = step;
	struct pyval v = {.kind = PY_RANGE, .u.range = r};
	return v;
}

struct pyval pyval_copy(struct pyarena *arena, const struct pyval *v)
{
	switch (v->kind) {
	case PY_STR: return pyval_str(arena, v->u.s->bytes, v->u.s->len);
	case PY_RANGE: return make_range(arena, v->u.range->start, v->u.range->stop, v->u.range->step);
	case PY_LIST: {
		struct pylist *l = new_list(arena, v->u.list->len);
		for (size_t k = 0; k < l->len; k++)
			l->items[k] = pyval_copy(arena, &v->u.list->items[k]);
		struct pyval copy = {.kind = PY_LIST, .u.list = l};
		return copy;
	}
	default: return *v;
	}
}

const char *pyval_type_name(const struct pyval *v)
{
	switch (v->kind) {
	case PY_NONE: return "NoneType";
	case PY_BOOL: return "bool";
	case PY_INT: return "int";
	case PY_FLOAT: return "float";
	case PY_STR: return "str";
	case PY_LIST: return "list";
	case PY_RANGE: return "range";
	}
	return "?";
}

static int is_intlike(const struct pyval *v)
{
	return v->kind == PY_INT || v->kind == PY_BOOL;
}

static int is_number(const struct pyval *v)
{
	return is_intlike(v) || v->kind == PY_FLOAT;
}

static double as_double(const struct pyval *v)
{
	return v->kind == PY_FLOAT ? v->u.f : (double)v->u.i;
}

static uint64_t range_length(const struct pyrange *r)
{
	/* Differences are taken in unsigned arithmetic: stop - start can exceed INT64_MAX. */
	if (r->step > 0 && r->start < r->stop)
		return ((uint64_t)r->stop - (uint64_t)r->start - 1) / (uint64_t)r->step + 1;
	if (r->step < 0 && r->start > r->stop)
		return ((uint64_t)r->start - (uint64_t)r->stop - 1) / (0 - (uint64_t)r->step) + 1;
	return 0;
}

static int64_t range_item(const struct pyrange *r, uint64_t i)
{
	return (int64_t)((uint64_t)r->start + i * (uint64_t)r->step);
}

/* Byte length of the character that starts at s[0] (left > 0 bytes remain): a well-formed
 * UTF-8 sequence (no overlong forms, surrogates or code points past U+10FFFF, the bytes
 * Python's decoder accepts), or else a single byte. A stray byte is a character of its own,
 * as Python's surrogateescape decoding makes it, so that counting and splitting a string
 * agree on any bytes, whatever their origin (a spec file, a bound value). */
static size_t utf8_char_len(const char *s, size_t left)
{
	const unsigned char *u = (const unsigned char *)s;
	size_t n;
	unsigned char lo = 0x80, hi = 0xBF; /* the range of the second byte */
	if (u[0] < 0xC2 || u[0] > 0xF4)
		return 1; /* ASCII, a continuation byte, an overlong lead or past U+10FFFF */
	if (u[0] < 0xE0) {
		n = 2;
	} else if (u[0] < 0xF0) {
		n = 3;
		if (u[0] == 0xE0)
			lo = 0xA0;
		else if (u[0] == 0xED)
			hi = 0x9F;
	} else {
		n = 4;
		if (u[0] == 0xF0)
			lo = 0x90;
		else if (u[0] == 0xF4)
			hi = 0x8F;
	}
	if (n > left || u[1] < lo || u[1] > hi)
		return 1;
	for (size_t k = 2; k < n; k++)
		if ((u[k] & 0xC0) != 0x80)
			return 1;
	return n;
}

/* Characters in a string, as utf8_char_len splits it. */
static size_t utf8_length(const char *s, size_t len)
{
	size_t n = 0;
	for (size_t i = 0; i < len; n++)
		i += (unsigned char)s[i] < 0x80 ? 1 : utf8_char_len(s + i, len - i);
	return n;
}

int pyval_truthy(const struct pyval *v)
{
	switch (v->kind) {
	case PY_NONE: return 0;
	case PY_BOOL:
	case PY_INT: return v->u.i != 0;
	case PY_FLOAT: return v->u.f != 0.0;
	case PY_STR: return v->u.s->len != 0;
	case PY_LIST: return v->u.list->len != 0;
	case PY_RANGE: return range_length(v->u.range) != 0;
	}
	return 0;
}

/* Compares an integer with a double exactly, as CPython does (no rounding of i).
 * Returns -1, 0 or 1; d must not be NaN. */
static int cmp_int_double(int64_t i, double d)
{
	if (d >= 9223372036854775808.0)
		return -1;
	if (d < -9223372036854775808.0)
		return 1;
	double t = trunc(d);
	int64_t ti = (int64_t)t;
	if (i < ti)
		return -1;
	if (i > ti)
		return 1;
	double frac = d - t;
	return frac > 0 ? -1 : frac < 0 ? 1 : 0;
}

/* Numeric comparison: -1, 0, 1, or 2 when unordered (a NaN is involved). */
static int cmp_numbers(const struct pyval *a, const struct pyval *b)
{
	if (is_intlike(a) && is_intlike(b))
		return (a->u.i > b->u.i) - (a->u.i < b->u.i);
	if (a->kind == PY_FLOAT && b->kind == PY_FLOAT) {
		if (isnan(a->u.f) || isnan(b->u.f))
			return 2;
		return (a->u.f > b->u.f) - (a->u.f < b->u.f);
	}
	if (a->kind == PY_FLOAT) {
		if (isnan(a->u.f))
			return 2;
		return -cmp_int_double(b->u.i, a->u.f);
	}
	if (isnan(b->u.f))
		return 2;
	return cmp_int_double(a->u.i, b->u.f);
}

/* Python's a == b: 1 or 0, or -1 when it would take more than the *left steps it spends
 * from (one per pair of items, one per STR_BYTES_PER_STEP bytes compared): lists may share
 * items, so a small list can stand for billions of comparisons. */
static int values_equal(const struct pyval *a, const struct pyval *b, uint64_t *left)
{
	if (*left == 0)
		return -1;
	(*left)--;
	if (is_number(a) && is_number(b))
		return cmp_numbers(a, b) == 0;
	if (a->kind != b->kind)
		return 0;
	switch (a->kind) {
	case PY_NONE: return 1;
	case PY_STR: {
		if (a->u.s->len != b->u.s->len)
			return 0;
		uint64_t cost = a->u.s->len / STR_BYTES_PER_STEP;
		if (cost > *left)
			return -1;
		*left -= cost;
		return memcmp(a->u.s->bytes, b->u.s->bytes, a->u.s->len) == 0;
	}
	case PY_LIST:
		if (a->u.list->len != b->u.list->len)
			return 0;
		for (size_t i = 0; i < a->u.list->len; i++) {
			int eq = values_equal(&a->u.list->items[i], &b->u.list->items[i], left);
			if (eq != 1)
				return eq;
		}
		return 1;
	case PY_RANGE: {
		/* Ranges are equal when they hold the same sequence. */
		uint64_t n = range_length(a->u.range);
		if (n != range_length(b->u.range))
			return 0;
		if (n == 0)
			return 1;
		if (a->u.range->start != b->u.range->start)
			return 0;
		return n == 1 || a->u.range->step == b->u.range->step;
	}
	default: return 0;
	}
}

int pyval_equal(const struct pyval *a, const struct pyval *b)
{
	uint64_t unlimited = UINT64_MAX;
	return values_equal(a, b, &unlimited) == 1;
}

/* Python's repr of a float: the shortest string that reads back as the same double, in
 * positional notation when the decimal exponent is in [-4, 16), else in scientific. */
static void float_repr(struct strbuf *sb, double x)
{
	if (isnan(x)) {
		strbuf_addstr(sb, "nan");
		return;
	}
	if (isinf(x)) {
		strbuf_addstr(sb, x < 0 ? "-inf" : "inf");
		return;
	}
	if (x == 0) {
		strbuf_addstr(sb, signbit(x) ? "-0.0" : "0.0");
		return;
	}
	if (signbit(x))
		strbuf_addch(sb, '-');
	char digits[18];
	long decpt; /* digits[0..decpt) come before the decimal point */
	size_t nd = shortest_digits(x, digits, &decpt);
	long exponent = decpt - 1;

	if (decpt > -4 && decpt <= 16) {
		if (decpt <= 0) {
			strbuf_addstr(sb, "0.");
			for (long i = 0; i < -decpt; i++)
				strbuf_addch(sb, '0');
			strbuf_add(sb, digits, nd);
		} else if ((size_t)decpt >= nd) {
			strbuf_add(sb, digits, nd);
			for (long i = (long)nd; i < decpt; i++)
				strbuf_addch(sb, '0');
			strbuf_addstr(sb, ".0");
		} else {
			strbuf_add(sb, digits, (size_t)decpt);
			strbuf_addch(sb, '.');
			strbuf_add(sb, digits + decpt, nd - (size_t)decpt);
		}
	} else {
		strbuf_addch(sb, digits[0]);
		if (nd > 1) {
			strbuf_addch(sb, '.');
			strbuf_add(sb, digits + 1, nd - 1);
		}
		strbuf_addf(sb, "e%c%02ld", exponent < 0 ? '-' : '+', labs(exponent));
	}
}

static void str_repr(struct strbuf *sb, const struct pystr *s)
{
	int has_single = memchr(s->bytes, '\'', s->len) != NULL;
	int has_double = memchr(s->bytes, '"', s->len) != NULL;
	char quote = has_single && !has_double ? '"' : '\'';
	strbuf_addch(sb, quote);
	for (size_t i = 0; i < s->len; i++) {
		unsigned char c = (unsigned char)s->bytes[i];
		if (c == '\\' || c == (unsigned char)quote) {
			strbuf_addch(sb, '\\');
			strbuf_addch(sb, (char)c);
		} else if (c == '\n') {
			strbuf_addstr(sb, "\\n");
		} else if (c == '\r') {
			strbuf_addstr(sb, "\\r");
		} else if (c == '\t') {
			strbuf_addstr(sb, "\\t");
		} else if (c < 0x20 || c == 0x7f) {
			strbuf_addf(sb, "\\x%02x", c);
		} else {
			strbuf_addch(sb, (char)c);
		}
	}
	strbuf_addch(sb, quote);
}

void pyval_repr(struct strbuf *sb, const struct pyval *v)
{
	switch (v->kind) {
	case PY_NONE: strbuf_addstr(sb, "None"); break;
	case PY_BOOL: strbuf_addstr(sb, v->u.i ? "True" : "False"); break;
	case PY_INT: strbuf_addf(sb, "%lld", (long long)v->u.i); break;
	case PY_FLOAT: float_repr(sb, v->u.f); break;
	case PY_STR: str_repr(sb, v->u.s); break;
	case PY_LIST:
		strbuf_addch(sb, '[');
		for (size_t i = 0; i < v->u.list->len; i++) {
			if (i)
				strbuf_addstr(sb, ", ");
			pyval_repr(sb, &v->u.list->items[i]);
		}
		strbuf_addch(sb, ']');
		break;
	case PY_RANGE:
		strbuf_addf(sb, "range(%lld, %lld", (long long)v->u.range->start, (long long)v->u.range->stop);
		if (v->u.range->step != 1)
			strbuf_addf(sb, ", %lld", (long long)v->u.range->step);
		strbuf_addch(sb, ')');
		break;
	}
}

void pyval_describe(struct strbuf *sb, const struct pyval *v)
{
	if (v->kind == PY_LIST)
		strbuf_addf(sb, "a list of %zu item%s", v->u.list->len, v->u.list->len == 1 ? "" : "s");
	else
		pyval_repr(sb, v);
}

int pyval_items(struct pyarena *arena, const struct pyval *v, const struct pyval **items, size_t *n)
{
	switch (v->kind) {
	case PY_LIST:
		*items = v->u.list->items;
		*n = v->u.list->len;
		return 0;
	case PY_RANGE: {
		uint64_t len = range_length(v->u.range);
		if (len > MAX_ITEMS)
			return -1;
		struct pylist *l = new_list(arena, (size_t)len);
		for (uint64_t i = 0; i < len; i++)
			l->items[i] = pyval_int(range_item(v->u.range, i));
		*items = l->items;
		*n = (size_t)len;
		return 0;
	}
	case PY_STR: {
		const struct pystr *s = v->u.s;
		struct pylist *l = new_list(arena, utf8_length(s->bytes, s->len));
		size_t k = 0;
		for (size_t i = 0; i < s->len;) {
			size_t cl = utf8_char_len(s->bytes + i, s->len - i);
			l->items[k++] = pyval_str(arena, s->bytes + i, cl);
			i += cl;
		}
		*items = l->items;
		*n = l->len;
		return 0;
	}
	default: return -1;
	}
}

/* ---------------------------------------------------------------- lexer */

struct token {
	enum tok kind;
	size_t pos;	   /* byte offset of the token's first character */
	size_t len;	   /* bytes in the token */
	struct pyval value; /* T_INT, T_FLOAT, T_STR */
};

struct parser {
	const char *src;       /* the expression */
	size_t len;	       /* bytes in src */
	size_t pos;	       /* where the lexer continues */
	struct token tok;      /* the current token */
	struct pyarena *arena; /* where the tree and constants go */
	struct pyexpr_error *err;
	int depth;	       /* current nesting, against MAX_DEPTH */
	int failed;	       /* an error is in err; stop */
};

static int perror_at(struct parser *p, size_t pos, const char *fmt, ...) PRINTF_LIKE(3, 4);

static int perror_at(struct parser *p, size_t pos, const char *fmt, ...)
{
	if (p->failed)
		return -1;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(p->err->message, sizeof(p->err->message), fmt, ap);
	va_end(ap);
	p->err->offset = pos;
	p->failed = 1;
	return -1;
}

static const struct {
	const char *word;
	enum tok kind;
} keywords[] = {
	{"and", T_AND}, {"or", T_OR}, {"not", T_NOT}, {"in", T_IN}, {"is", T_IS},
	{"if", T_IF}, {"else", T_ELSE}, {"for", T_FOR}, {"True", T_TRUE},
	{"False", T_FALSE}, {"None", T_NONE}, {"lambda", T_LAMBDA},
};

static int is_name_start(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}

static int is_name_char(char c)
{
	return is_name_start(c) || (c >= '0' && c <= '9');
}

static int digit_value(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return 99;
}

/* Digits of the given base with single underscores between them, as Python allows.
 * Returns bytes consumed (0 if none); appends the digits without underscores to out. */
static size_t scan_digits(const char *s, size_t left, int base, struct strbuf *out)
{
	size_t i = 0;
	while (i < left) {
		if (digit_value(s[i]) < base) {
			strbuf_addch(out, s[i++]);
		} else if (s[i] == '_' && i > 0 && i + 1 < left && digit_value(s[i + 1]) < base &&
			   digit_value(s[i - 1]) < base) {
			i++;
		} else {
			break;
		}
	}
	return i;
}

static int lex_number(struct parser *p, struct token *t)
{
	const char *s = p->src + p->pos;
	size_t left = p->len - p->pos;
	struct strbuf digits;
	strbuf_init(&digits);
	size_t i = 0;
	int base = 10, is_float = 0;

	if (s[0] == '0' && left > 1 && strchr("xXoObB", s[1])) {
		base = s[1] == 'x' || s[1] == 'X' ? 16 : s[1] == 'o' || s[1] == 'O' ? 8 : 2;
		i = 2;
		if (i < left && s[i] == '_')
			i++;
		size_t n = scan_digits(s + i, left - i, base, &digits);
		if (n == 0) {
			strbuf_release(&digits);
			return perror_at(p, p->pos, "invalid number literal");
		}
		i += n;
	} else {
		i = scan_digits(s, left, 10, &digits);
		if (i < left && s[i] == '.') {
			is_float = 1;
			strbuf_addch(&digits, '.');
			i++;
			i += scan_digits(s + i, left - i, 10, &digits);
		}
		if (i < left && (s[i] == 'e' || s[i] == 'E')) {
			size_t j = i + 1;
			struct strbuf exp;
			strbuf_init(&exp);
			if (j < left && (s[j] == '+' || s[j] == '-'))
				strbuf_addch(&exp, s[j++]);
			size_t n = scan_digits(s + j, left - j, 10, &exp);
			if (n > 0) {
				is_float = 1;
				strbuf_addch(&digits, 'e');
				strbuf_add(&digits, exp.buf, exp.len);
				i = j + n;
			}
			strbuf_release(&exp);
		}
	}
	if (i < left && (s[i] == 'j' || s[i] == 'J')) {
		strbuf_release(&digits);
		return perror_at(p, p->pos, "complex numbers are not supported");
	}
	if (i < left && (is_name_char(s[i]) || s[i] == '.')) {
		strbuf_release(&digits);
		return perror_at(p, p->pos, "invalid number literal");
	}

	t->pos = p->pos;
	t->len = i;
	if (is_float) {
		t->kind = T_FLOAT;
		t->value = pyval_float(strtod(digits.buf, NULL));
	} else {
		/* Python refuses "012": a leading zero is allowed only in zero itself. */
		if (base == 10 && digits.len > 1 && digits.buf[0] == '0' &&
		    strspn(digits.buf, "0") != digits.len) {
			strbuf_release(&digits);
			return perror_at(p, p->pos, "leading zeros in decimal integer literals are not permitted");
		}
		errno = 0;
		unsigned long long v = strtoull(digits.buf, NULL, base);
		if (errno == ERANGE || v > INT64_MAX) {
			strbuf_release(&digits);
			return perror_at(p, p->pos, "integer literal does not fit in 64 bits");
		}
		t->kind = T_INT;
		t->value = pyval_int((int64_t)v);
	}
	strbuf_release(&digits);
	p->pos += i;
	return 0;
}

static void add_utf8(struct strbuf *sb, unsigned long cp)
{
	if (cp < 0x80) {
		strbuf_addch(sb, (char)cp);
	} else if (cp < 0x800) {
		strbuf_addch(sb, (char)(0xC0 | (cp >> 6)));
		strbuf_addch(sb, (char)(0x80 | (cp & 0x3F)));
	} else if (cp < 0x10000) {
		strbuf_addch(sb, (char)(0xE0 | (cp >> 12)));
		strbuf_addch(sb, (char)(0x80 | ((cp >> 6) & 0x3F)));
		strbuf_addch(sb, (char)(0x80 | (cp & 0x3F)));
	} else {
		strbuf_addch(sb, (char)(0xF0 | (cp >> 18)));
		strbuf_addch(sb, (char)(0x80 | ((cp >> 12) & 0x3F)));
		strbuf_addch(sb, (char)(0x80 | ((cp >> 6) & 0x3F)));
		strbuf_addch(sb, (char)(0x80 | (cp & 0x3F)));
	}
}

/* One escape sequence after a backslash at s[0]; returns the bytes it took. */
static size_t lex_escape(struct parser *p, const char *s, size_t left, struct strbuf *out)
{
	if (left < 2) {
		strbuf_addch(out, '\\');
		return 1;
	}
	char c = s[1];
	switch (c) {
	case '\n': return 2;
	case '\\': strbuf_addch(out, '\\'); return 2;
	case '\'': strbuf_addch(out, '\''); return 2;
	case '"': strbuf_addch(out, '"'); return 2;
	case 'a': strbuf_addch(out, '\a'); return 2;
	case 'b': strbuf_addch(out, '\b'); return 2;
	case 'f': strbuf_addch(out, '\f'); return 2;
	case 'n': strbuf_addch(out, '\n'); return 2;
	case 'r': strbuf_addch(out, '\r'); return 2;
	case 't': strbuf_addch(out, '\t'); return 2;
	case 'v': strbuf_addch(out, '\v'); return 2;
	case 'x': case 'u': case 'U': {
		size_t want = c == 'x' ? 2 : c == 'u' ? 4 : 8;
		unsigned long cp = 0;
		for (size_t k = 0; k < want; k++) {
			if (2 + k >= left || digit_value(s[2 + k]) >= 16) {
				perror_at(p, (size_t)(s - p->src), "truncated \\%c escape", c);
				return left;
			}
			cp = cp * 16 + (unsigned long)digit_value(s[2 + k]);
		}
		if (cp > 0x10FFFF) {
			perror_at(p, (size_t)(s - p->src), "invalid \\%c escape", c);
			return left;
		}
		add_utf8(out, cp);
		return 2 + want;
	}
	default:
		if (c >= '0' && c <= '7') {
			unsigned long cp = 0;
			size_t k = 1;
			while (k <= 3 && k < left && s[k] >= '0' && s[k] <= '7')
				cp = cp * 8 + (unsigned long)(s[k++] - '0');
			add_utf8(out, cp);
			return k;
		}
		/* Python keeps unknown escapes as written. */
		strbuf_addch(out, '\\');
		return 1;
	}
}

static int lex_string(struct parser *p, struct token *t, size_t prefix_len, int raw)
{
	const char *s = p->src + p->pos + prefix_len;
	size_t left = p->len - p->pos - prefix_len;
	char quote = s[0];
	if (left >= 3 && s[1] == quote && s[2] == quote)
		return perror_at(p, p->pos, "triple-quoted strings are not supported");
	struct strbuf out;
	strbuf_init(&out);
	size_t i = 1;
	for (;;) {
		if (i >= left || s[i] == '\n') {
			strbuf_release(&out);
			return perror_at(p, p->pos, "unterminated string literal");
		}
		if (s[i] == quote)
			break;
		if (s[i] == '\\') {
			if (raw) {
				/* A raw string keeps the backslash, and it still protects a quote. */
				size_t n = i + 1 < left ? 2 : 1;
				strbuf_add(&out, s + i, n);
				i += n;
			} else {
				i += lex_escape(p, s + i, left - i, &out);
				if (p->failed) {
					strbuf_release(&out);
					return -1;
				}
			}
		} else {
			strbuf_addch(&out, s[i++]);
		}
	}
	t->kind = T_STR;
	t->pos = p->pos;
	t->len = prefix_len + i + 1;
	t->value = pyval_str(p->arena, out.buf, out.len);
	strbuf_release(&out);
	p->pos += t->len;
	return 0;
}

static int lex(struct parser *p)
{
	struct token *t = &p->tok;
	while (p->pos < p->len && strchr(" \t\r\n\f", p->src[p->pos]))
		p->pos++;
	t->pos = p->pos;
	t->len = 0;
	if (p->pos >= p->len) {
		t->kind = T_END;
		return 0;
	}
	const char *s = p->src + p->pos;
	size_t left = p->len - p->pos;
	char c = s[0];

	if ((c >= '0' && c <= '9') || (c == '.' && left > 1 && s[1] >= '0' && s[1] <= '9'))
		return lex_number(p, t);
	if (c == '\'' || c == '"')
		return lex_string(p, t, 0, 0);
	if (is_name_start(c)) {
		size_t n = 1;
		while (n < left && is_name_char(s[n]))
			n++;
		if (n <= 2 && n < left && (s[n] == '\'' || s[n] == '"') && strspn(s, "rRuUbBfF") >= n) {
			/* A string prefix: r and u are plain Python 3; b and f make other types. */
			int raw = 0, ok = 1;
			for (size_t k = 0; k < n; k++) {
				char pc = (char)(s[k] | 0x20);
				if (pc == 'r')
					raw = 1;
				else if (pc != 'u' || n != 1)
					ok = 0;
			}
			if (!ok)
				return perror_at(p, p->pos, "string prefix '%.*s' is not supported", (int)n, s);
			return lex_string(p, t, n, raw);
		}
		t->kind = T_NAME;
		t->len = n;
		for (size_t k = 0; k < ARRAY_SIZE(keywords); k++)
			if (strlen(keywords[k].word) == n && memcmp(keywords[k].word, s, n) == 0)
				t->kind = keywords[k].kind;
		p->pos += n;
		return 0;
	}

	static const struct {
		const char *text;
		enum tok kind;
	} ops[] = {
		{"**", T_DSTAR}, {"//", T_DSLASH}, {"<<", T_LSHIFT}, {">>", T_RSHIFT},
		{"<=", T_LE}, {">=", T_GE}, {"==", T_EQ}, {"!=", T_NE},
		{"(", T_LPAR}, {")", T_RPAR}, {"[", T_LBRACK}, {"]", T_RBRACK}, {",", T_COMMA},
		{"+", T_PLUS}, {"-", T_MINUS}, {"*", T_STAR}, {"/", T_SLASH}, {"%", T_PERCENT},
		{"&", T_AMP}, {"|", T_PIPE}, {"^", T_CARET}, {"~", T_TILDE}, {"<", T_LT}, {">", T_GT},
	};
	for (size_t k = 0; k < ARRAY_SIZE(ops); k++) {
		size_t n = strlen(ops[k].text);
		if (n <= left && memcmp(ops[k].text, s, n) == 0) {
			t->kind = ops[k].kind;
			t->len = n;
			p->pos += n;
			return 0;
		}
	}
	switch (c) {
	case '{': return perror_at(p, p->pos, "dict and set displays are not supported");
	case '.': return perror_at(p, p->pos, "attribute access is not supported");
	case ':': return perror_at(p, p->pos, "slices and ':' are not supported");
	case '=': return perror_at(p, p->pos, "'=' is not supported (no assignment or keyword arguments); use == to compare");
	default:
		if ((unsigned char)c < 0x20 || (unsigned char)c >= 0x7f)
			return perror_at(p, p->pos, "invalid character in expression");
		return perror_at(p, p->pos, "invalid character '%c'", c);
	}
}

/* ---------------------------------------------------------------- tree */

static const struct {
	const char *name;
	enum builtin id;
	int min_args, max_args; /* max_args -1: any number */
} builtins[] = {
	{"range", B_RANGE, 1, 3}, {"list", B_LIST, 0, 1}, {"min", B_MIN, 1, -1},
	{"max", B_MAX, 1, -1}, {"len", B_LEN, 1, 1}, {"abs", B_ABS, 1, 1},
	{"int", B_INT, 0, 1}, {"float", B_FLOAT, 0, 1},
};

static struct node *new_node(struct parser *p, enum node_kind kind, size_t pos)
{
	struct node *n = arena_alloc(p->arena, sizeof(*n));
	memset(n, 0, sizeof(*n));
	n->kind = kind;
	n->pos = pos;
	n->height = 1;
	return n;
}

/* A growable array of node pointers; copied into the arena when complete. */
struct nodevec {
	struct node **items;
	size_t len, cap;
};

static void nodevec_push(struct nodevec *v, struct node *n)
{
	if (v->len == v->cap) {
		v->cap = v->cap ? 2 * v->cap : 4;
		v->items = xreallocarray(v->items, v->cap, sizeof(*v->items));
	}
	v->items[v->len++] = n;
}

static struct node **nodevec_finish(struct parser *p, struct nodevec *v, size_t *n)
{
	struct node **out = arena_alloc(p->arena, (v->len ? v->len : 1) * sizeof(*out));
	if (v->len)
		memcpy(out, v->items, v->len * sizeof(*out));
	*n = v->len;
	free(v->items);
	v->items = NULL;
	v->len = v->cap = 0;
	return out;
}

/* Sets n's height from its children; a tree taller than MAX_HEIGHT is refused, since
 * resolution and evaluation recurse once per level. Returns n, or NULL after an error. */
static struct node *finish_node(struct parser *p, struct node *n)
{
	unsigned h = 0;
	for (size_t k = 0; k < n->nkids; k++)
		if (n->kids[k]->height > h)
			h = n->kids[k]->height;
	for (size_t k = 0; k < n->nclauses; k++)
		if (n->clauses[k].expr->height > h)
			h = n->clauses[k].expr->height;
	n->height = h + 1;
	if (n->height > MAX_HEIGHT) {
		perror_at(p, n->pos, "expression is nested too deeply");
		return NULL;
	}
	return n;
}

static struct node *binary_node(struct parser *p, enum node_kind kind, int op, size_t pos,
				struct node *left, struct node *right)
{
	struct node *n = new_node(p, kind, pos);
	n->op = op;
	n->kids = arena_alloc(p->arena, 2 * sizeof(*n->kids));
	n->kids[0] = left;
	n->kids[1] = right;
	n->nkids = 2;
	return finish_node(p, n);
}

static int unexpected(struct parser *p)
{
	if (p->tok.kind == T_END)
		return perror_at(p, p->tok.pos, "invalid syntax: unexpected end of expression");
	return perror_at(p, p->tok.pos, "invalid syntax: unexpected '%.*s'", (int)p->tok.len,
			 p->src + p->tok.pos);
}

static int expect(struct parser *p, enum tok kind, const char *text)
{
	if (p->tok.kind != kind) {
		if (p->tok.kind == T_END)
			return perror_at(p, p->tok.pos, "invalid syntax: expected '%s' before the end", text);
		return perror_at(p, p->tok.pos, "invalid syntax: expected '%s', found '%.*s'", text,
				 (int)p->tok.len, p->src + p->tok.pos);
	}
	return lex(p);
}

static struct node *parse_expr(struct parser *p);
static struct node *parse_or(struct parser *p);
static struct node *parse_factor(struct parser *p);

static int enter(struct parser *p)
{
	if (++p->depth > MAX_DEPTH)
		return perror_at(p, p->tok.pos, "expression is nested too deeply");
	return 0;
}

/* The clauses after the element of a list comprehension: ("for" NAME "in" or_test |
 * "if" or_test)*, starting at "for". */
static struct node *parse_comprehension(struct parser *p, struct node *element, size_t pos)
{
	struct clause *clauses = NULL;
	size_t n = 0, cap = 0;
	while (p->tok.kind == T_FOR || p->tok.kind == T_IF) {
		if (n == cap) {
			cap = cap ? 2 * cap : 4;
			clauses = xreallocarray(clauses, cap, sizeof(*clauses));
		}
		struct clause *c = &clauses[n++];
		memset(c, 0, sizeof(*c));
		c->is_for = p->tok.kind == T_FOR;
		if (lex(p))
			goto fail;
		if (c->is_for) {
			if (p->tok.kind != T_NAME) {
				perror_at(p, p->tok.pos, "invalid syntax: a comprehension needs 'for NAME in ...'");
				goto fail;
			}
			c->name = p->src + p->tok.pos;
			c->name_len = p->tok.len;
			c->name_pos = p->tok.pos;
			if (lex(p))
				goto fail;
			if (p->tok.kind == T_COMMA) {
				perror_at(p, p->tok.pos, "unpacking several loop variables is not supported");
				goto fail;
			}
			if (expect(p, T_IN, "in"))
				goto fail;
		}
		c->expr = parse_or(p);
		if (!c->expr)
			goto fail;
	}
	struct node *node = new_node(p, N_COMPREHENSION, pos);
	node->kids = arena_alloc(p->arena, sizeof(*node->kids));
	node->kids[0] = element;
	node->nkids = 1;
	node->clauses = arena_alloc(p->arena, n * sizeof(*clauses));
	memcpy(node->clauses, clauses, n * sizeof(*clauses));
	node->nclauses = n;
	free(clauses);
	return finish_node(p, node);
fail:
	free(clauses);
	return NULL;
}

static struct node *parse_list_display(struct parser *p)
{
	size_t pos = p->tok.pos;
	if (lex(p))
		return NULL;
	struct nodevec items = {0};
	if (p->tok.kind != T_RBRACK) {
		struct node *first = parse_expr(p);
		if (!first)
			goto fail;
		if (p->tok.kind == T_FOR) {
			struct node *comp = parse_comprehension(p, first, pos);
			if (!comp || expect(p, T_RBRACK, "]"))
				goto fail;
			return comp;
		}
		nodevec_push(&items, first);
		while (p->tok.kind == T_COMMA) {
			if (lex(p))
				goto fail;
			if (p->tok.kind == T_RBRACK)
				break;
			struct node *item = parse_expr(p);
			if (!item)
				goto fail;
			nodevec_push(&items, item);
		}
	}
	if (expect(p, T_RBRACK, "]"))
		goto fail;
	struct node *list = new_node(p, N_LIST, pos);
	list->kids = nodevec_finish(p, &items, &list->nkids);
	return finish_node(p, list);
fail:
	free(items.items);
	return NULL;
}

static struct node *parse_atom(struct parser *p)
{
	struct token t = p->tok;
	struct node *n;
	switch (t.kind) {
	case T_INT:
	case T_FLOAT:
		n = new_node(p, N_CONST, t.pos);
		n->value = t.value;
		return lex(p) ? NULL : n;
	case T_STR: {
		/* Adjacent literals form one string, as in Python. */
		struct strbuf sb;
		strbuf_init(&sb);
		while (p->tok.kind == T_STR) {
			strbuf_add(&sb, p->tok.value.u.s->bytes, p->tok.value.u.s->len);
			if (lex(p)) {
				strbuf_release(&sb);
				return NULL;
			}
		}
		n = new_node(p, N_CONST, t.pos);
		n->value = pyval_str(p->arena, sb.buf, sb.len);
		strbuf_release(&sb);
		return n;
	}
	case T_TRUE:
	case T_FALSE:
	case T_NONE:
		n = new_node(p, N_CONST, t.pos);
		n->value = t.kind == T_NONE ? pyval_none() : pyval_bool(t.kind == T_TRUE);
		return lex(p) ? NULL : n;
	case T_NAME:
		n = new_node(p, N_NAME, t.pos);
		n->name = p->src + t.pos;
		n->name_len = t.len;
		return lex(p) ? NULL : n;
	case T_LPAR:
		if (lex(p))
			return NULL;
		if (p->tok.kind == T_RPAR) {
			perror_at(p, t.pos, "tuples are not supported; use a list");
			return NULL;
		}
		n = parse_expr(p);
		if (!n)
			return NULL;
		if (p->tok.kind == T_COMMA) {
			perror_at(p, p->tok.pos, "tuples are not supported; use a list");
			return NULL;
		}
		if (p->tok.kind == T_FOR) {
			perror_at(p, p->tok.pos, "generator expressions are not supported; use a list comprehension");
			return NULL;
		}
		return expect(p, T_RPAR, ")") ? NULL : n;
	case T_LBRACK:
		return parse_list_display(p);
	case T_LAMBDA:
		perror_at(p, t.pos, "lambda is not supported");
		return NULL;
	default:
		unexpected(p);
		return NULL;
	}
}

static struct node *parse_call(struct parser *p, struct node *callee)
{
	size_t pos = p->tok.pos;
	if (callee->kind != N_NAME) {
		perror_at(p, pos, "only builtin functions can be called");
		return NULL;
	}
	if (lex(p))
		return NULL;
	struct nodevec args = {0};
	while (p->tok.kind != T_RPAR) {
		struct node *arg = parse_expr(p);
		if (!arg)
			goto fail;
		if (p->tok.kind == T_FOR) {
			perror_at(p, p->tok.pos, "generator expressions are not supported; use a list comprehension");
			goto fail;
		}
		nodevec_push(&args, arg);
		if (p->tok.kind != T_COMMA)
			break;
		if (lex(p))
			goto fail;
	}
	if (expect(p, T_RPAR, ")"))
		goto fail;
	struct node *call = new_node(p, N_CALL, callee->pos);
	call->name = callee->name;
	call->name_len = callee->name_len;
	call->kids = nodevec_finish(p, &args, &call->nkids);
	return finish_node(p, call);
fail:
	free(args.items);
	return NULL;
}

static struct node *parse_primary(struct parser *p)
{
	struct node *n = parse_atom(p);
	while (n) {
		if (p->tok.kind == T_LPAR) {
			n = parse_call(p, n);
		} else if (p->tok.kind == T_LBRACK) {
			size_t pos = p->tok.pos;
			if (lex(p))
				return NULL;
			struct node *index = parse_expr(p);
			if (!index)
				return NULL;
			if (p->tok.kind == T_COMMA) {
				perror_at(p, p->tok.pos, "tuples are not supported as indices");
				return NULL;
			}
			if (expect(p, T_RBRACK, "]"))
				return NULL;
			n = binary_node(p, N_INDEX, 0, pos, n, index);
		} else {
			break;
		}
	}
	return n;
}

static struct node *parse_power(struct parser *p)
{
	struct node *base = parse_primary(p);
	if (!base || p->tok.kind != T_DSTAR)
		return base;
	size_t pos = p->tok.pos;
	if (enter(p) || lex(p))
		return NULL;
	/* The exponent is a factor: 2**-1 is 0.5, and ** associates to the right. */
	struct node *exponent = parse_factor(p);
	p->depth--;
	return exponent ? binary_node(p, N_BINARY, T_DSTAR, pos, base, exponent) : NULL;
}

static struct node *parse_factor(struct parser *p)
{
	if (p->tok.kind == T_MINUS || p->tok.kind == T_PLUS || p->tok.kind == T_TILDE) {
		struct token t = p->tok;
		if (enter(p) || lex(p))
			return NULL;
		struct node *operand = parse_factor(p);
		p->depth--;
		if (!operand)
			return NULL;
		struct node *n = new_node(p, N_UNARY, t.pos);
		n->op = t.kind;
		n->kids = arena_alloc(p->arena, sizeof(*n->kids));
		n->kids[0] = operand;
		n->nkids = 1;
		return finish_node(p, n);
	}
	return parse_power(p);
}

/* One left-associative level of binary operators. */
static struct node *parse_binary_level(struct parser *p, struct node *(*next)(struct parser *),
				       const enum tok *ops, size_t nops)
{
	struct node *left = next(p);
	while (left) {
		size_t k;
		for (k = 0; k < nops && p->tok.kind != ops[k]; k++)
			;
		if (k == nops)
			break;
		struct token t = p->tok;
		if (lex(p))
			return NULL;
		struct node *right = next(p);
		if (!right)
			return NULL;
		left = binary_node(p, N_BINARY, t.kind, t.pos, left, right);
	}
	return left;
}

static struct node *parse_term(struct parser *p)
{
	static const enum tok ops[] = {T_STAR, T_SLASH, T_DSLASH, T_PERCENT};
	return parse_binary_level(p, parse_factor, ops, ARRAY_SIZE(ops));
}

static struct node *parse_arith(struct parser *p)
{
	static const enum tok ops[] = {T_PLUS, T_MINUS};
	return parse_binary_level(p, parse_term, ops, ARRAY_SIZE(ops));
}

static struct node *parse_shift(struct parser *p)
{
	static const enum tok ops[] = {T_LSHIFT, T_RSHIFT};
	return parse_binary_level(p, parse_arith, ops, ARRAY_SIZE(ops));
}

static struct node *parse_bitand(struct parser *p)
{
	static const enum tok ops[] = {T_AMP};
	return parse_binary_level(p, parse_shift, ops, ARRAY_SIZE(ops));
}

static struct node *parse_bitxor(struct parser *p)
{
	static const enum tok ops[] = {T_CARET};
	return parse_binary_level(p, parse_bitand, ops, ARRAY_SIZE(ops));
}

static struct node *parse_bitor(struct parser *p)
{
	static const enum tok ops[] = {T_PIPE};
	return parse_binary_level(p, parse_bitxor, ops, ARRAY_SIZE(ops));
}

/* Reads a comparison operator, if one is next: returns its token (T_NOT_IN for "not in"),
 * or T_END when the next token is not a comparison. */
static int comparison_op(struct parser *p, enum tok *op)
{
	switch (p->tok.kind) {
	case T_LT: case T_GT: case T_LE: case T_GE: case T_EQ: case T_NE: case T_IN:
		*op = p->tok.kind;
		return lex(p);
	case T_NOT:
		if (lex(p))
			return -1;
		if (p->tok.kind != T_IN)
			return unexpected(p);
		*op = T_NOT_IN;
		return lex(p);
	case T_IS:
		return perror_at(p, p->tok.pos, "'is' is not supported; use == or !=");
	default:
		*op = T_END;
		return 0;
	}
}

static struct node *parse_comparison(struct parser *p)
{
	struct node *first = parse_bitor(p);
	if (!first)
		return NULL;
	size_t pos = p->tok.pos;
	enum tok op = T_END;
	if (comparison_op(p, &op))
		return NULL;
	if (op == T_END)
		return first;

	struct nodevec operands = {0};
	int *ops = NULL;
	size_t nops = 0, cap = 0;
	nodevec_push(&operands, first);
	while (op != T_END) {
		if (nops == cap) { /* geometrically, as nodevec_push: a chain can be long */
			cap = cap ? 2 * cap : 4;
			ops = xreallocarray(ops, cap, sizeof(*ops));
		}
		ops[nops++] = (int)op;
		struct node *next = parse_bitor(p);
		if (!next || comparison_op(p, &op))
			goto fail;
		nodevec_push(&operands, next);
	}
	struct node *n = new_node(p, N_COMPARE, pos);
	n->kids = nodevec_finish(p, &operands, &n->nkids);
	n->ops = arena_alloc(p->arena, nops * sizeof(*ops));
	memcpy(n->ops, ops, nops * sizeof(*ops));
	free(ops);
	return finish_node(p, n);
fail:
	free(operands.items);
	free(ops);
	return NULL;
}

static struct node *parse_not(struct parser *p)
{
	if (p->tok.kind != T_NOT)
		return parse_comparison(p);
	size_t pos = p->tok.pos;
	if (enter(p) || lex(p))
		return NULL;
	struct node *operand = parse_not(p);
	p->depth--;
	if (!operand)
		return NULL;
	struct node *n = new_node(p, N_UNARY, pos);
	n->op = T_NOT;
	n->kids = arena_alloc(p->arena, sizeof(*n->kids));
	n->kids[0] = operand;
	n->nkids = 1;
	return finish_node(p, n);
}

/* One level of "and" or "or": left-associative, with operands parsed by next. */
static struct node *parse_logical(struct parser *p, struct node *(*next)(struct parser *), enum tok op,
				  enum node_kind kind)
{
	struct node *left = next(p);
	while (left && p->tok.kind == op) {
		size_t pos = p->tok.pos;
		if (lex(p))
			return NULL;
		struct node *right = next(p);
		if (!right)
			return NULL;
		left = binary_node(p, kind, 0, pos, left, right);
	}
	return left;
}

static struct node *parse_and(struct parser *p)
{
	return parse_logical(p, parse_not, T_AND, N_AND);
}

static struct node *parse_or(struct parser *p)
{
	return parse_logical(p, parse_and, T_OR, N_OR);
}

static struct node *parse_expr(struct parser *p)
{
	if (enter(p))
		return NULL;
	struct node *value = parse_or(p);
	if (value && p->tok.kind == T_IF) {
		size_t pos = p->tok.pos;
		struct node *cond, *other;
		if (lex(p) || !(cond = parse_or(p)) || expect(p, T_ELSE, "else") || !(other = parse_expr(p))) {
			value = NULL;
		} else {
			struct node *n = new_node(p, N_IFELSE, pos);
			n->kids = arena_alloc(p->arena, 3 * sizeof(*n->kids));
			n->kids[0] = value;
			n->kids[1] = cond;
			n->kids[2] = other;
			n->nkids = 3;
			value = finish_node(p, n);
		}
	}
	p->depth--;
	return value;
}

/* ---------------------------------------------------------------- resolution */

struct resolver {
	struct parser *p;
	const char *const *names; /* the globals */
	size_t nnames;
	struct clause **scope;	  /* comprehension variables in scope, innermost last */
	size_t nscope, scope_cap;
	size_t nlocals;		  /* slots handed out */
	unsigned char *used;	  /* used[i]: global i is read */
};

static int find_builtin(const char *name, size_t len)
{
	for (size_t k = 0; k < ARRAY_SIZE(builtins); k++)
		if (strlen(builtins[k].name) == len && memcmp(builtins[k].name, name, len) == 0)
			return (int)k;
	return -1;
}

/* Finds name among comprehension variables (innermost first), then globals. Returns 1 and
 * sets *kind and *slot when found, 0 otherwise. */
static int lookup(struct resolver *r, const char *name, size_t len, enum node_kind *kind, size_t *slot)
{
	for (size_t k = r->nscope; k-- > 0;) {
		const struct clause *c = r->scope[k];
		if (c->name_len == len && memcmp(c->name, name, len) == 0) {
			*kind = N_LOCAL;
			*slot = (size_t)c->slot;
			return 1;
		}
	}
	for (size_t k = 0; k < r->nnames; k++) {
		if (strlen(r->names[k]) == len && memcmp(r->names[k], name, len) == 0) {
			*kind = N_GLOBAL;
			*slot = k;
			return 1;
		}
	}
	return 0;
}

static int resolve(struct resolver *r, struct node *n)
{
	struct parser *p = r->p;
	switch (n->kind) {
	case N_NAME: {
		enum node_kind kind;
		size_t slot;
		if (!lookup(r, n->name, n->name_len, &kind, &slot)) {
			if (find_builtin(n->name, n->name_len) >= 0)
				return perror_at(p, n->pos, "builtin '%.*s' can only be called", (int)n->name_len, n->name);
			return perror_at(p, n->pos, "name '%.*s' is not defined", (int)n->name_len, n->name);
		}
		n->kind = kind;
		n->slot = slot;
		if (kind == N_GLOBAL)
			r->used[slot] = 1;
		return 0;
	}
	case N_CALL: {
		enum node_kind kind;
		size_t slot;
		if (lookup(r, n->name, n->name_len, &kind, &slot))
			return perror_at(p, n->pos, "'%.*s' is not a function", (int)n->name_len, n->name);
		int b = find_builtin(n->name, n->name_len);
		if (b < 0)
			return perror_at(p, n->pos, "unknown function '%.*s' (builtins: range, list, min, max, len, abs, int, float)",
					 (int)n->name_len, n->name);
		int nargs = (int)n->nkids;
		if (nargs < builtins[b].min_args || (builtins[b].max_args >= 0 && nargs > builtins[b].max_args)) {
			if (builtins[b].max_args < 0)
				return perror_at(p, n->pos, "%s() expects at least %d argument%s, got %d", builtins[b].name,
						 builtins[b].min_args, builtins[b].min_args == 1 ? "" : "s", nargs);
			if (builtins[b].min_args == builtins[b].max_args)
				return perror_at(p, n->pos, "%s() takes exactly %d argument%s (%d given)", builtins[b].name,
						 builtins[b].min_args, builtins[b].min_args == 1 ? "" : "s", nargs);
			return perror_at(p, n->pos, "%s() takes %d to %d arguments (%d given)", builtins[b].name,
					 builtins[b].min_args, builtins[b].max_args, nargs);
		}
		n->op = (int)builtins[b].id;
		break;
	}
	case N_COMPREHENSION: {
		/* Each "for" iterable is resolved before its own variable comes into scope, so
		 * [x for x in x] reads the outer x, as in Python. */
		size_t saved = r->nscope;
		for (size_t k = 0; k < n->nclauses; k++) {
			struct clause *c = &n->clauses[k];
			if (resolve(r, c->expr))
				return -1;
			if (c->is_for) {
				c->slot = (int)r->nlocals++;
				if (r->nscope == r->scope_cap) {
					r->scope_cap = r->scope_cap ? 2 * r->scope_cap : 4;
					r->scope = xreallocarray(r->scope, r->scope_cap, sizeof(*r->scope));
				}
				r->scope[r->nscope++] = c;
			}
		}
		int rc = resolve(r, n->kids[0]);
		r->nscope = saved;
		return rc;
	}
	default:
		break;
	}
	for (size_t k = 0; k < n->nkids; k++)
		if (resolve(r, n->kids[k]))
			return -1;
	return 0;
}

struct pyexpr *pyexpr_compile(const char *source, const char *const *names, size_t nnames,
			      struct pyexpr_error *err)
{
	struct pyexpr *e = xcalloc(1, sizeof(*e));
	e->source = xstrdup(source);
	e->arena = pyarena_new();
	struct parser p = {
		.src = e->source, .len = strlen(e->source), .arena = e->arena, .err = err,
	};
	err->offset = 0;
	err->message[0] = '\0';

	if (lex(&p))
		goto fail;
	if (p.tok.kind == T_END) {
		perror_at(&p, 0, "empty expression");
		goto fail;
	}
	e->root = parse_expr(&p);
	if (!e->root) {
		perror_at(&p, p.tok.pos, "invalid syntax");
		goto fail;
	}
	if (p.tok.kind == T_COMMA) {
		perror_at(&p, p.tok.pos, "tuples are not supported; use a list");
		goto fail;
	}
	if (p.tok.kind != T_END) {
		unexpected(&p);
		goto fail;
	}

	struct resolver r = {.p = &p, .names = names, .nnames = nnames};
	r.used = xcalloc(nnames ? nnames : 1, 1);
	int rc = resolve(&r, e->root);
	free(r.scope);
	if (rc) {
		free(r.used);
		goto fail;
	}
	e->nlocals = r.nlocals;
	e->globals_used = xcalloc(nnames ? nnames : 1, sizeof(*e->globals_used));
	for (size_t k = 0; k < nnames; k++)
		if (r.used[k])
			e->globals_used[e->nglobals_used++] = k;
	free(r.used);
	return e;
fail:
	pyexpr_free(e);
	return NULL;
}

void pyexpr_free(struct pyexpr *e)
{
	if (!e)
		return;
	pyarena_free(e->arena);
	free(e->globals_used);
	free(e->source);
	free(e);
}

const char *pyexpr_source(const struct pyexpr *e)
{
	return e->source;
}

size_t pyexpr_globals_used(const struct pyexpr *e, const size_t **slots)
{
	*slots = e->globals_used;
	return e->nglobals_used;
}

size_t pyexpr_error_column(const char *source, const struct pyexpr_error *err)
{
	size_t len = strlen(source);
	size_t end = err->offset < len ? err->offset : len;
	return utf8_length(source, end) + 1;
}

/* ---------------------------------------------------------------- evaluation */

struct evalctx {
	const struct pyval *globals;
	struct pyval *locals;	/* one slot per comprehension variable */
	struct pyarena *arena;
	struct pyexpr_error *err;
	uint64_t steps_left;	/* of EVAL_STEPS, or less: what a shared budget has left */
	uint64_t bytes_left;	/* of EVAL_MIB */
	const struct pyexpr_budget *budget; /* the shared budget that limits steps_left, or NULL */
};

static int fail(struct evalctx *cx, size_t pos, const char *fmt, ...) PRINTF_LIKE(3, 4);

static int fail(struct evalctx *cx, size_t pos, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(cx->err->message, sizeof(cx->err->message), fmt, ap);
	va_end(ap);
	cx->err->offset = pos;
	return -1;
}

/* Spends steps from the evaluation's budget; fails once it is exhausted. */
static int spend(struct evalctx *cx, size_t pos, uint64_t steps)
{
	if (steps > cx->steps_left) {
		cx->steps_left = 0;
		if (cx->budget)
			return fail(cx, pos, "%s's budget of expression work exceeded: more than %" PRIu64
				    " steps beyond the first %d of each evaluation", cx->budget->what, cx->budget->steps,
				    PYEXPR_FREE_STEPS);
		return fail(cx, pos, "evaluation step limit exceeded: more than %d steps", EVAL_STEPS);
	}
	cx->steps_left -= steps;
	return 0;
}

/* Spends steps for reading len bytes of a string. */
static int spend_str(struct evalctx *cx, size_t pos, size_t len)
{
	return spend(cx, pos, len / STR_BYTES_PER_STEP);
}

/* Reserves bytes of the evaluation's memory budget before they are allocated, with the
 * steps of filling them (one per item of 16 bytes); fails once either budget is exhausted. */
static int reserve(struct evalctx *cx, size_t pos, uint64_t bytes)
{
	if (bytes > cx->bytes_left) {
		cx->bytes_left = 0;
		return fail(cx, pos, "evaluation memory limit exceeded: more than %d MiB of lists and strings", EVAL_MIB);
	}
	cx->bytes_left -= bytes;
	return spend(cx, pos, bytes / sizeof(struct pyval));
}

/* Bytes a list of n items takes in the arena. */
static uint64_t list_bytes(uint64_t n)
{
	return sizeof(struct pylist) + n * sizeof(struct pyval);
}

/* Bytes a string of len bytes takes in the arena (rounded as arena_alloc rounds). */
static uint64_t str_bytes(uint64_t len)
{
	return (sizeof(struct pystr) + len + 1 + 15) & ~(uint64_t)15;
}

/* Python's a == b within the step budget. */
static int equal(struct evalctx *cx, size_t pos, const struct pyval *a, const struct pyval *b, int *result)
{
	int eq = values_equal(a, b, &cx->steps_left);
	*result = eq == 1;
	return eq < 0 ? spend(cx, pos, UINT64_MAX) : 0; /* the budget ran out: fail */
}

static int overflow(struct evalctx *cx, size_t pos)
{
	return fail(cx, pos, "integer overflow: the result does not fit in 64 bits");
}

static const char *op_text(int op)
{
	switch (op) {
	case T_PLUS: return "+";
	case T_MINUS: return "-";
	case T_STAR: return "*";
	case T_SLASH: return "/";
	case T_DSLASH: return "//";
	case T_PERCENT: return "%";
	case T_DSTAR: return "** or pow()";
	case T_LSHIFT: return "<<";
	case T_RSHIFT: return ">>";
	case T_AMP: return "&";
	case T_PIPE: return "|";
	case T_CARET: return "^";
	case T_LT: return "<";
	case T_GT: return ">";
	case T_LE: return "<=";
	case T_GE: return ">=";
	default: return "?";
	}
}

static int unsupported_operands(struct evalctx *cx, size_t pos, int op, const struct pyval *a,
				const struct pyval *b)
{
	return fail(cx, pos, "unsupported operand type(s) for %s: '%s' and '%s'", op_text(op),
		    pyval_type_name(a), pyval_type_name(b));
}

/* Python's float floor division and modulo (Objects/floatobject.c: float_divmod). */
static void float_divmod(double vx, double wx, double *floordiv, double *mod)
{
	double m = fmod(vx, wx);
	double div = (vx - m) / wx;
	if (m != 0.0) {
		if ((wx < 0) != (m < 0)) {
			m += wx;
			div -= 1.0;
		}
	} else {
		m = copysign(0.0, wx);
	}
	double fd;
	if (div != 0.0) {
		fd = floor(div);
		if (div - fd > 0.5)
			fd += 1.0;
	} else {
		fd = copysign(0.0, vx / wx);
	}
	*floordiv = fd;
	*mod = m;
}

/* Python's float ** float (Objects/floatobject.c: float_pow). */
static int float_pow(struct evalctx *cx, size_t pos, double iv, double iw, double *out)
{
	if (iw == 0) {
		*out = 1.0;
		return 0;
	}
	if (isnan(iv)) {
		*out = iv;
		return 0;
	}
	if (isnan(iw)) {
		*out = iv == 1.0 ? 1.0 : iw;
		return 0;
	}
	if (isinf(iw)) {
		double a = fabs(iv);
		if (a == 1.0)
			*out = 1.0;
		else if ((iw > 0) == (a > 1.0))
			*out = fabs(iw);
		else
			*out = 0.0;
		return 0;
	}
	int iw_is_odd = fmod(fabs(iw), 2.0) == 1.0;
	if (isinf(iv)) {
		if (iw > 0)
			*out = iw_is_odd ? iv : fabs(iv);
		else
			*out = iw_is_odd ? copysign(0.0, iv) : 0.0;
		return 0;
	}
	if (iv == 0.0) {
		if (iw < 0)
			return fail(cx, pos, "zero to a negative power");
		*out = iw_is_odd ? iv : 0.0;
		return 0;
	}
	int negate = 0;
	if (iv < 0.0) {
		if (iw != floor(iw))
			return fail(cx, pos, "a negative number to a fractional power gives a complex number, which is not supported");
		iv = -iv;
		negate = iw_is_odd;
	}
	if (iv == 1.0) {
		*out = negate ? -1.0 : 1.0;
		return 0;
	}
	double r = pow(iv, iw);
	if (isinf(r))
		return fail(cx, pos, "float overflow: the result is out of range");
	*out = negate ? -r : r;
	return 0;
}

/* Python's int ** int for a non-negative exponent, by squaring, with overflow checks. */
static int int_pow(struct evalctx *cx, size_t pos, int64_t base, int64_t exponent, int64_t *out)
{
	int64_t result = 1;
	while (exponent > 0) {
		if (exponent & 1) {
			if (__builtin_mul_overflow(result, base, &result))
				return overflow(cx, pos);
		}
		exponent >>= 1;
		if (exponent > 0 && __builtin_mul_overflow(base, base, &base))
			return overflow(cx, pos);
	}
	*out = result;
	return 0;
}

/* Python's int / int: the correctly rounded quotient for operands up to 2**53, which
 * covers every value a tuning space holds; larger ones go through long double. */
static double int_true_divide(int64_t a, int64_t b)
{
	const int64_t exact = (int64_t)1 << 53;
	if (a >= -exact && a <= exact && b >= -exact && b <= exact)
		return (double)a / (double)b;
	return (double)((long double)a / (long double)b);
}

/* Fills dst with total bytes of the unit bytes at src repeated, doubling what is copied. */
static void fill_repeated(void *dst, const void *src, size_t unit, size_t total)
{
	unsigned char *d = dst;
	if (total == 0)
		return;
	memcpy(d, src, unit);
	for (size_t done = unit; done < total;) {
		size_t n = done < total - done ? done : total - done;
		memcpy(d + done, d, n);
		done += n;
	}
}

static int repeat_sequence(struct evalctx *cx, size_t pos, const struct pyval *seq, int64_t times,
			   struct pyval *out)
{
	if (times < 0)
		times = 0;
	size_t unit = seq->kind == PY_STR ? seq->u.s->len : seq->u.list->len;
	if (unit && (uint64_t)times > MAX_ITEMS / unit)
		return fail(cx, pos, "sequence too long (more than %d items)", MAX_ITEMS);
	/* An empty sequence repeated is empty, however many times: no loop over times. */
	if (unit == 0)
		times = 0;
	size_t total = unit * (size_t)times;
	if (seq->kind == PY_STR) {
		if (reserve(cx, pos, str_bytes(total)))
			return -1;
		struct pystr *s = arena_alloc(cx->arena, sizeof(*s) + total + 1);
		s->len = total;
		fill_repeated(s->bytes, seq->u.s->bytes, unit, total);
		s->bytes[total] = '\0';
		out->kind = PY_STR;
		out->u.s = s;
	} else {
		if (reserve(cx, pos, list_bytes(total)))
			return -1;
		struct pylist *l = new_list(cx->arena, total);
		fill_repeated(l->items, seq->u.list->items, unit * sizeof(struct pyval), total * sizeof(struct pyval));
		out->kind = PY_LIST;
		out->u.list = l;
	}
	return 0;
}

static int concat(struct evalctx *cx, size_t pos, const struct pyval *a, const struct pyval *b,
		  struct pyval *out)
{
	if (a->kind == PY_STR) {
		size_t n = a->u.s->len + b->u.s->len;
		if (n > MAX_ITEMS)
			return fail(cx, pos, "string too long (more than %d bytes)", MAX_ITEMS);
		if (reserve(cx, pos, str_bytes(n)))
			return -1;
		struct pystr *s = arena_alloc(cx->arena, sizeof(*s) + n + 1);
		s->len = n;
		memcpy(s->bytes, a->u.s->bytes, a->u.s->len);
		memcpy(s->bytes + a->u.s->len, b->u.s->bytes, b->u.s->len);
		s->bytes[n] = '\0';
		out->kind = PY_STR;
		out->u.s = s;
		return 0;
	}
	size_t na = a->u.list->len, nb = b->u.list->len;
	if (na + nb > MAX_ITEMS)
		return fail(cx, pos, "list too long (more than %d items)", MAX_ITEMS);
	if (reserve(cx, pos, list_bytes(na + nb)))
		return -1;
	struct pylist *l = new_list(cx->arena, na + nb);
	memcpy(l->items, a->u.list->items, na * sizeof(struct pyval));
	memcpy(l->items + na, b->u.list->items, nb * sizeof(struct pyval));
	out->kind = PY_LIST;
	out->u.list = l;
	return 0;
}

static int int_binary(struct evalctx *cx, size_t pos, int op, int64_t x, int64_t y, struct pyval *out)
{
	int64_t r = 0;
	switch (op) {
	case T_PLUS:
		if (__builtin_add_overflow(x, y, &r))
			return overflow(cx, pos);
		break;
	case T_MINUS:
		if (__builtin_sub_overflow(x, y, &r))
			return overflow(cx, pos);
		break;
	case T_STAR:
		if (__builtin_mul_overflow(x, y, &r))
			return overflow(cx, pos);
		break;
	case T_SLASH:
		if (y == 0)
			return fail(cx, pos, "division by zero");
		*out = pyval_float(int_true_divide(x, y));
		return 0;
	case T_DSLASH:
	case T_PERCENT:
		if (y == 0)
			return fail(cx, pos, "integer division or modulo by zero");
		if (y == -1) {
			/* INT64_MIN / -1 overflows in C; its remainder is always 0. */
			if (op == T_PERCENT) {
				r = 0;
			} else if (__builtin_sub_overflow((int64_t)0, x, &r)) {
				return overflow(cx, pos);
			}
			break;
		}
		if (op == T_DSLASH) {
			r = x / y;
			if ((x % y != 0) && ((x < 0) != (y < 0)))
				r--;
		} else {
			r = x % y;
			if (r != 0 && ((r < 0) != (y < 0)))
				r += y;
		}
		break;
	case T_DSTAR:
		if (y < 0) {
			if (x == 0)
				return fail(cx, pos, "zero to a negative power");
			double f;
			if (float_pow(cx, pos, (double)x, (double)y, &f))
				return -1;
			*out = pyval_float(f);
			return 0;
		}
		if (int_pow(cx, pos, x, y, &r))
			return -1;
		break;
	case T_LSHIFT:
		if (y < 0)
			return fail(cx, pos, "negative shift count");
		if (x == 0) {
			r = 0;
		} else if (y >= 63 || (x > 0 ? x > (INT64_MAX >> y) : x < (INT64_MIN >> y))) {
			return overflow(cx, pos);
		} else {
			r = (int64_t)((uint64_t)x << y);
		}
		break;
	case T_RSHIFT:
		if (y < 0)
			return fail(cx, pos, "negative shift count");
		/* Python shifts toward minus infinity, like an arithmetic shift. */
		if (y >= 63)
			r = x < 0 ? -1 : 0;
		else
			r = x >= 0 ? x >> y : -1 - ((-1 - x) >> y);
		break;
	case T_AMP: r = x & y; break;
	case T_PIPE: r = x | y; break;
	case T_CARET: r = x ^ y; break;
	default: return fail(cx, pos, "internal error: unknown operator");
	}
	*out = pyval_int(r);
	return 0;
}

static int float_binary(struct evalctx *cx, size_t pos, int op, double x, double y, struct pyval *out)
{
	double r = 0, mod = 0;
	switch (op) {
	case T_PLUS: r = x + y; break;
	case T_MINUS: r = x - y; break;
	case T_STAR: r = x * y; break;
	case T_SLASH:
		if (y == 0.0)
			return fail(cx, pos, "float division by zero");
		r = x / y;
		break;
	case T_DSLASH:
		if (y == 0.0)
			return fail(cx, pos, "float floor division by zero");
		float_divmod(x, y, &r, &mod);
		break;
	case T_PERCENT:
		if (y == 0.0)
			return fail(cx, pos, "float modulo by zero");
		float_divmod(x, y, &mod, &r);
		break;
	case T_DSTAR:
		if (float_pow(cx, pos, x, y, &r))
			return -1;
		break;
	default: return -2; /* not a float operator: the caller reports the types */
	}
	*out = pyval_float(r);
	return 0;
}

static int binary(struct evalctx *cx, size_t pos, int op, const struct pyval *a, const struct pyval *b,
		  struct pyval *out)
{
	if (is_intlike(a) && is_intlike(b)) {
		/* Bitwise operators on two bools give a bool, as in Python. */
		if (a->kind == PY_BOOL && b->kind == PY_BOOL && (op == T_AMP || op == T_PIPE || op == T_CARET)) {
			int64_t r = op == T_AMP ? a->u.i & b->u.i : op == T_PIPE ? a->u.i | b->u.i : a->u.i ^ b->u.i;
			*out = pyval_bool((int)r);
			return 0;
		}
		return int_binary(cx, pos, op, a->u.i, b->u.i, out);
	}
	if (is_number(a) && is_number(b)) {
		int rc = float_binary(cx, pos, op, as_double(a), as_double(b), out);
		if (rc == -2)
			return unsupported_operands(cx, pos, op, a, b);
		return rc;
	}
	if (op == T_PLUS && a->kind == b->kind && (a->kind == PY_STR || a->kind == PY_LIST))
		return concat(cx, pos, a, b, out);
	if (op == T_STAR) {
		if ((a->kind == PY_STR || a->kind == PY_LIST) && is_intlike(b))
			return repeat_sequence(cx, pos, a, b->u.i, out);
		if ((b->kind == PY_STR || b->kind == PY_LIST) && is_intlike(a))
			return repeat_sequence(cx, pos, b, a->u.i, out);
	}
	if (op == T_PERCENT && a->kind == PY_STR)
		return fail(cx, pos, "string formatting with %% is not supported");
	return unsupported_operands(cx, pos, op, a, b);
}

static int unary(struct evalctx *cx, size_t pos, int op, const struct pyval *a, struct pyval *out)
{
	switch (op) {
	case T_NOT:
		*out = pyval_bool(!pyval_truthy(a));
		return 0;
	case T_MINUS:
		if (is_intlike(a)) {
			if (a->u.i == INT64_MIN)
				return overflow(cx, pos);
			*out = pyval_int(-a->u.i);
			return 0;
		}
		if (a->kind == PY_FLOAT) {
			*out = pyval_float(-a->u.f);
			return 0;
		}
		return fail(cx, pos, "bad operand type for unary -: '%s'", pyval_type_name(a));
	case T_PLUS:
		if (is_intlike(a)) {
			*out = pyval_int(a->u.i);
			return 0;
		}
		if (a->kind == PY_FLOAT) {
			*out = *a;
			return 0;
		}
		return fail(cx, pos, "bad operand type for unary +: '%s'", pyval_type_name(a));
	case T_TILDE:
		if (is_intlike(a)) {
			*out = pyval_int(~a->u.i);
			return 0;
		}
		return fail(cx, pos, "bad operand type for unary ~: '%s'", pyval_type_name(a));
	}
	return fail(cx, pos, "internal error: unknown unary operator");
}

static int compare(struct evalctx *cx, size_t pos, int op, const struct pyval *a, const struct pyval *b,
		   int *result);

/* Python's "x in container". */
static int contains(struct evalctx *cx, size_t pos, const struct pyval *x, const struct pyval *container,
		    int *result)
{
	switch (container->kind) {
	case PY_LIST:
		*result = 0;
		for (size_t k = 0; k < container->u.list->len && !*result; k++)
			if (equal(cx, pos, x, &container->u.list->items[k], result))
				return -1;
		return 0;
	case PY_RANGE: {
		const struct pyrange *r = container->u.range;
		int64_t v = 0;
		*result = 0;
		if (is_intlike(x)) {
			v = x->u.i;
		} else if (x->kind == PY_FLOAT && isfinite(x->u.f) && x->u.f == floor(x->u.f) &&
			   fabs(x->u.f) < 9223372036854775808.0) {
			v = (int64_t)x->u.f;
		} else {
			return 0;
		}
		if (r->step > 0 ? (v < r->start || v >= r->stop) : (v > r->start || v <= r->stop))
			return 0;
		/* In unsigned arithmetic, so that the distance from start cannot overflow. */
		uint64_t dist = r->step > 0 ? (uint64_t)v - (uint64_t)r->start : (uint64_t)r->start - (uint64_t)v;
		uint64_t step = r->step > 0 ? (uint64_t)r->step : 0 - (uint64_t)r->step;
		*result = dist % step == 0;
		return 0;
	}
	case PY_STR:
		if (x->kind != PY_STR)
			return fail(cx, pos, "'in <string>' requires string as left operand, not %s", pyval_type_name(x));
		if (spend_str(cx, pos, container->u.s->len + x->u.s->len))
			return -1;
		*result = x->u.s->len == 0 ||
			  memmem(container->u.s->bytes, container->u.s->len, x->u.s->bytes, x->u.s->len) != NULL;
		return 0;
	default:
		return fail(cx, pos, "argument of type '%s' is not iterable", pyval_type_name(container));
	}
}

/* Orders two values for <, <=, >, >=; fails for types Python does not order. */
static int order(struct evalctx *cx, size_t pos, int op, const struct pyval *a, const struct pyval *b,
		 int *result)
{
	int c;
	if (is_number(a) && is_number(b)) {
		c = cmp_numbers(a, b);
		if (c == 2) {
			*result = 0;
			return 0;
		}
	} else if (a->kind == PY_STR && b->kind == PY_STR) {
		size_t n = a->u.s->len < b->u.s->len ? a->u.s->len : b->u.s->len;
		if (spend_str(cx, pos, n))
			return -1;
		c = memcmp(a->u.s->bytes, b->u.s->bytes, n);
		if (c == 0)
			c = (a->u.s->len > b->u.s->len) - (a->u.s->len < b->u.s->len);
		c = (c > 0) - (c < 0);
	} else if (a->kind == PY_LIST && b->kind == PY_LIST) {
		/* Lexicographic: the first unequal pair decides, with the operator itself. */
		size_t na = a->u.list->len, nb = b->u.list->len;
		for (size_t k = 0; k < na && k < nb; k++) {
			int eq;
			if (equal(cx, pos, &a->u.list->items[k], &b->u.list->items[k], &eq))
				return -1;
			if (!eq)
				return order(cx, pos, op, &a->u.list->items[k], &b->u.list->items[k], result);
		}
		c = (na > nb) - (na < nb);
	} else {
		return fail(cx, pos, "'%s' not supported between instances of '%s' and '%s'", op_text(op),
			    pyval_type_name(a), pyval_type_name(b));
	}
	switch (op) {
	case T_LT: *result = c < 0; break;
	case T_LE: *result = c <= 0; break;
	case T_GT: *result = c > 0; break;
	default: *result = c >= 0; break;
	}
	return 0;
}

static int compare(struct evalctx *cx, size_t pos, int op, const struct pyval *a, const struct pyval *b,
		   int *result)
{
	switch (op) {
	case T_EQ: return equal(cx, pos, a, b, result);
	case T_NE:
		if (equal(cx, pos, a, b, result))
			return -1;
		*result = !*result;
		return 0;
	case T_IN: return contains(cx, pos, a, b, result);
	case T_NOT_IN:
		if (contains(cx, pos, a, b, result))
			return -1;
		*result = !*result;
		return 0;
	default: return order(cx, pos, op, a, b, result);
	}
}

static int eval(struct evalctx *cx, const struct node *n, struct pyval *out);

/* The items of an iterable, for comprehensions and builtins. */
static int iterate(struct evalctx *cx, size_t pos, const struct pyval *v, const struct pyval **items, size_t *n)
{
	if (v->kind == PY_RANGE && range_length(v->u.range) > MAX_ITEMS)
		return fail(cx, pos, "range too long (more than %d items)", MAX_ITEMS);
	/* A range is laid out as a list, a string as a list of one-character strings. */
	if (v->kind == PY_RANGE && reserve(cx, pos, list_bytes(range_length(v->u.range))))
		return -1;
	if (v->kind == PY_STR) {
		size_t chars = utf8_length(v->u.s->bytes, v->u.s->len);
		if (spend_str(cx, pos, v->u.s->len) ||
		    reserve(cx, pos, list_bytes(chars) + chars * str_bytes(4)))
			return -1;
	}
	if (pyval_items(cx->arena, v, items, n))
		return fail(cx, pos, "'%s' object is not iterable", pyval_type_name(v));
	return 0;
}

/* Appends to a growable array of values. */
struct valvec {
	struct pyval *items;
	size_t len, cap;
};

static void valvec_push(struct valvec *v, const struct pyval *item)
{
	if (v->len == v->cap) {
		v->cap = v->cap ? 2 * v->cap : 16;
		v->items = xreallocarray(v->items, v->cap, sizeof(*v->items));
	}
	v->items[v->len++] = *item;
}

static int run_clauses(struct evalctx *cx, const struct node *n, size_t k, struct valvec *acc)
{
	if (k == n->nclauses) {
		struct pyval item;
		if (eval(cx, n->kids[0], &item))
			return -1;
		if (acc->len >= MAX_ITEMS)
			return fail(cx, n->pos, "list too long (more than %d items)", MAX_ITEMS);
		/* The item, while the comprehension runs, and in the finished list. */
		if (reserve(cx, n->pos, 2 * sizeof(item)))
			return -1;
		valvec_push(acc, &item);
		return 0;
	}
	const struct clause *c = &n->clauses[k];
	struct pyval v;
	if (eval(cx, c->expr, &v))
		return -1;
	if (!c->is_for)
		return pyval_truthy(&v) ? run_clauses(cx, n, k + 1, acc) : 0;
	if (v.kind == PY_RANGE) {
		/* A range is walked, not laid out: for i in range(n) costs no memory. */
		uint64_t count = range_length(v.u.range);
		if (count > MAX_ITEMS)
			return fail(cx, c->expr->pos, "range too long (more than %d items)", MAX_ITEMS);
		for (uint64_t i = 0; i < count; i++) {
			cx->locals[c->slot] = pyval_int(range_item(v.u.range, i));
			if (run_clauses(cx, n, k + 1, acc))
				return -1;
		}
		return 0;
	}
	const struct pyval *items;
	size_t count;
	if (iterate(cx, c->expr->pos, &v, &items, &count))
		return -1;
	for (size_t i = 0; i < count; i++) {
		cx->locals[c->slot] = items[i];
		if (run_clauses(cx, n, k + 1, acc))
			return -1;
	}
	return 0;
}

static int eval_comprehension(struct evalctx *cx, const struct node *n, struct pyval *out)
{
	struct valvec acc = {0};
	int rc = run_clauses(cx, n, 0, &acc);
	if (rc == 0) /* reserved with the items */
		*out = pyval_list(cx->arena, acc.items, acc.len);
	free(acc.items);
	return rc;
}

static int eval_compare(struct evalctx *cx, const struct node *n, struct pyval *out)
{
	struct pyval left, right;
	if (eval(cx, n->kids[0], &left))
		return -1;
	/* a < b < c is a < b and b < c, with b evaluated once and c only if needed. */
	for (size_t k = 1; k < n->nkids; k++) {
		int holds;
		if (eval(cx, n->kids[k], &right) || compare(cx, n->pos, n->ops[k - 1], &left, &right, &holds))
			return -1;
		if (!holds) {
			*out = pyval_bool(0);
			return 0;
		}
		left = right;
	}
	*out = pyval_bool(1);
	return 0;
}

static int eval_index(struct evalctx *cx, const struct node *n, struct pyval *out)
{
	struct pyval seq, index;
	if (eval(cx, n->kids[0], &seq) || eval(cx, n->kids[1], &index))
		return -1;
	if (seq.kind != PY_LIST && seq.kind != PY_STR && seq.kind != PY_RANGE)
		return fail(cx, n->pos, "'%s' object is not subscriptable", pyval_type_name(&seq));
	if (!is_intlike(&index))
		return fail(cx, n->pos, "%s indices must be integers, not %s", pyval_type_name(&seq),
			    pyval_type_name(&index));
	if (seq.kind == PY_STR && (spend_str(cx, n->pos, seq.u.s->len) || reserve(cx, n->pos, str_bytes(4))))
		return -1;
	uint64_t len = seq.kind == PY_LIST ? seq.u.list->len
		     : seq.kind == PY_RANGE ? range_length(seq.u.range)
					    : utf8_length(seq.u.s->bytes, seq.u.s->len);
	int64_t i = index.u.i;
	if (i < 0)
		i = (int64_t)((uint64_t)i + len);
	if (i < 0 || (uint64_t)i >= len)
		return fail(cx, n->pos, "%s index out of range", seq.kind == PY_RANGE ? "range object" : pyval_type_name(&seq));
	if (seq.kind == PY_LIST) {
		*out = seq.u.list->items[i];
	} else if (seq.kind == PY_RANGE) {
		*out = pyval_int(range_item(seq.u.range, (uint64_t)i));
	} else {
		const char *s = seq.u.s->bytes;
		size_t b = 0, left = seq.u.s->len;
		for (int64_t k = 0; k < i; k++)
			b += utf8_char_len(s + b, left - b);
		*out = pyval_str(cx->arena, s + b, utf8_char_len(s + b, left - b));
	}
	return 0;
}

/* The bytes of s without the blanks int() and float() allow around a number. */
static void trim_blanks(const struct pystr *s, const char **start, const char **end)
{
	const char *p = s->bytes, *e = s->bytes + s->len;
	while (p < e && *p && strchr(" \t\n\r\f\v", *p))
		p++;
	while (e > p && e[-1] && strchr(" \t\n\r\f\v", e[-1]))
		e--;
	*start = p;
	*end = e;
}

/* Fails with Python's message for a string int() or float() cannot read. */
static int conversion_error(struct evalctx *cx, size_t pos, const char *what, const struct pystr *s)
{
	struct strbuf r;
	strbuf_init(&r);
	struct pyval sv = {.kind = PY_STR, .u.s = s};
	pyval_repr(&r, &sv);
	fail(cx, pos, "%s%s", what, r.buf);
	strbuf_release(&r);
	return -1;
}

/* Python's int(x) for a string: optional blanks and sign, decimal digits with single
 * underscores between them. */
static int int_from_string(struct evalctx *cx, size_t pos, const struct pystr *s, int64_t *out)
{
	if (spend_str(cx, pos, s->len))
		return -1;
	const char *p, *end;
	trim_blanks(s, &p, &end);
	int negative = 0;
	if (p < end && (*p == '+' || *p == '-'))
		negative = *p++ == '-';
	struct strbuf digits;
	strbuf_init(&digits);
	size_t n = scan_digits(p, (size_t)(end - p), 10, &digits);
	int ok = n > 0 && p + n == end;
	uint64_t v = 0;
	for (size_t k = 0; ok && k < digits.len; k++) {
		if (v > (UINT64_MAX - 9) / 10) {
			strbuf_release(&digits);
			return overflow(cx, pos);
		}
		v = v * 10 + (uint64_t)(digits.buf[k] - '0');
	}
	strbuf_release(&digits);
	if (!ok)
		return conversion_error(cx, pos, "invalid literal for int() with base 10: ", s);
	if (v > (uint64_t)INT64_MAX + (uint64_t)negative)
		return overflow(cx, pos);
	*out = negative ? (int64_t)(0 - v) : (int64_t)v;
	return 0;
}

/* Python's float(x) for a string: decimal or special values, blanks around them allowed. */
static int float_from_string(struct evalctx *cx, size_t pos, const struct pystr *s, double *out)
{
	if (spend_str(cx, pos, s->len))
		return -1;
	const char *p, *end;
	trim_blanks(s, &p, &end);
	struct strbuf text;
	strbuf_init(&text);
	const char *q = p;
	if (q < end && (*q == '+' || *q == '-'))
		strbuf_addch(&text, *q++);
	size_t rest = (size_t)(end - q);
	int ok = 0;
	if ((rest == 3 && strncasecmp(q, "inf", 3) == 0) || (rest == 8 && strncasecmp(q, "infinity", 8) == 0) ||
	    (rest == 3 && strncasecmp(q, "nan", 3) == 0)) {
		strbuf_add(&text, q, rest);
		ok = 1;
	} else {
		size_t i = scan_digits(q, rest, 10, &text);
		size_t mantissa = i;
		if (i < rest && q[i] == '.') {
			strbuf_addch(&text, '.');
			size_t f = scan_digits(q + i + 1, rest - i - 1, 10, &text);
			i += 1 + f;
			mantissa += f;
		}
		if (mantissa > 0 && i < rest && (q[i] == 'e' || q[i] == 'E')) {
			size_t j = i + 1;
			strbuf_addch(&text, 'e');
			if (j < rest && (q[j] == '+' || q[j] == '-'))
				strbuf_addch(&text, q[j++]);
			size_t e = scan_digits(q + j, rest - j, 10, &text);
			i = e ? j + e : rest + 1;
		}
		ok = mantissa > 0 && i == rest;
	}
	if (!ok) {
		strbuf_release(&text);
		return conversion_error(cx, pos, "could not convert string to float: ", s);
	}
	*out = strtod(text.buf, NULL);
	strbuf_release(&text);
	return 0;
}

static int range_arg(struct evalctx *cx, size_t pos, const struct pyval *v, int64_t *out)
{
	if (!is_intlike(v))
		return fail(cx, pos, "'%s' object cannot be interpreted as an integer", pyval_type_name(v));
	*out = v->u.i;
	return 0;
}

static int call_builtin(struct evalctx *cx, const struct node *n, const struct pyval *args, size_t nargs,
			struct pyval *out)
{
	size_t pos = n->pos;
	switch ((enum builtin)n->op) {
	case B_RANGE: {
		int64_t start = 0, stop = 0, step = 1;
		if (nargs == 1) {
			if (range_arg(cx, pos, &args[0], &stop))
				return -1;
		} else if (range_arg(cx, pos, &args[0], &start) || range_arg(cx, pos, &args[1], &stop) ||
			   (nargs == 3 && range_arg(cx, pos, &args[2], &step))) {
			return -1;
		}
		if (step == 0)
			return fail(cx, pos, "range() arg 3 must not be zero");
		if (reserve(cx, pos, sizeof(struct pyrange)))
			return -1;
		*out = make_range(cx->arena, start, stop, step);
		return 0;
	}
	case B_LIST: {
		if (nargs == 0) {
			*out = pyval_list(cx->arena, NULL, 0);
			return 0;
		}
		const struct pyval *items;
		size_t count;
		if (iterate(cx, pos, &args[0], &items, &count) || reserve(cx, pos, list_bytes(count)))
			return -1;
		*out = pyval_list(cx->arena, items, count);
		return 0;
	}
	case B_MIN:
	case B_MAX: {
		const char *name = n->op == B_MIN ? "min" : "max";
		const struct pyval *items = args;
		size_t count = nargs;
		if (nargs == 1) {
			if (iterate(cx, pos, &args[0], &items, &count))
				return -1;
			if (count == 0)
				return fail(cx, pos, "%s() arg is an empty sequence", name);
		}
		/* Python keeps the first of equal extremes: only a strict improvement replaces. */
		size_t best = 0;
		for (size_t k = 1; k < count; k++) {
			int better;
			if (order(cx, pos, n->op == B_MIN ? T_LT : T_GT, &items[k], &items[best], &better))
				return -1;
			if (better)
				best = k;
		}
		*out = items[best];
		return 0;
	}
	case B_LEN:
		switch (args[0].kind) {
		case PY_LIST: *out = pyval_int((int64_t)args[0].u.list->len); return 0;
		case PY_STR:
			if (spend_str(cx, pos, args[0].u.s->len))
				return -1;
			*out = pyval_int((int64_t)utf8_length(args[0].u.s->bytes, args[0].u.s->len));
			return 0;
		case PY_RANGE: {
			uint64_t len = range_length(args[0].u.range);
			if (len > INT64_MAX)
				return overflow(cx, pos);
			*out = pyval_int((int64_t)len);
			return 0;
		}
		default: return fail(cx, pos, "object of type '%s' has no len()", pyval_type_name(&args[0]));
		}
	case B_ABS:
		if (is_intlike(&args[0])) {
			if (args[0].u.i == INT64_MIN)
				return overflow(cx, pos);
			*out = pyval_int(args[0].u.i < 0 ? -args[0].u.i : args[0].u.i);
			return 0;
		}
		if (args[0].kind == PY_FLOAT) {
			*out = pyval_float(fabs(args[0].u.f));
			return 0;
		}
		return fail(cx, pos, "bad operand type for abs(): '%s'", pyval_type_name(&args[0]));
	case B_INT: {
		if (nargs == 0) {
			*out = pyval_int(0);
			return 0;
		}
		const struct pyval *a = &args[0];
		if (is_intlike(a)) {
			*out = pyval_int(a->u.i);
			return 0;
		}
		if (a->kind == PY_FLOAT) {
			if (isnan(a->u.f))
				return fail(cx, pos, "cannot convert float NaN to integer");
			if (isinf(a->u.f))
				return fail(cx, pos, "cannot convert float infinity to integer");
			double t = trunc(a->u.f);
			if (t >= 9223372036854775808.0 || t < -9223372036854775808.0)
				return overflow(cx, pos);
			*out = pyval_int((int64_t)t);
			return 0;
		}
		if (a->kind == PY_STR) {
			int64_t v = 0;
			if (int_from_string(cx, pos, a->u.s, &v))
				return -1;
			*out = pyval_int(v);
			return 0;
		}
		return fail(cx, pos, "int() argument must be a string, a bytes-like object or a real number, not '%s'",
			    pyval_type_name(a));
	}
	case B_FLOAT: {
		if (nargs == 0) {
			*out = pyval_float(0.0);
			return 0;
		}
		const struct pyval *a = &args[0];
		if (is_number(a)) {
			*out = pyval_float(as_double(a));
			return 0;
		}
		if (a->kind == PY_STR) {
			double v;
			if (float_from_string(cx, pos, a->u.s, &v))
				return -1;
			*out = pyval_float(v);
			return 0;
		}
		return fail(cx, pos, "float() argument must be a string or a real number, not '%s'", pyval_type_name(a));
	}
	}
	return fail(cx, pos, "internal error: unknown builtin");
}

static int eval(struct evalctx *cx, const struct node *n, struct pyval *out)
{
	struct pyval a, b;
	if (spend(cx, n->pos, 1))
		return -1;
	switch (n->kind) {
	case N_CONST: *out = n->value; return 0;
	case N_GLOBAL: *out = cx->globals[n->slot]; return 0;
	case N_LOCAL: *out = cx->locals[n->slot]; return 0;
	case N_LIST: {
		if (reserve(cx, n->pos, list_bytes(n->nkids)))
			return -1;
		struct pylist *l = new_list(cx->arena, n->nkids);
		for (size_t k = 0; k < n->nkids; k++)
			if (eval(cx, n->kids[k], &l->items[k]))
				return -1;
		out->kind = PY_LIST;
		out->u.list = l;
		return 0;
	}
	case N_UNARY:
		return eval(cx, n->kids[0], &a) ? -1 : unary(cx, n->pos, n->op, &a, out);
	case N_BINARY:
		if (eval(cx, n->kids[0], &a) || eval(cx, n->kids[1], &b))
			return -1;
		return binary(cx, n->pos, n->op, &a, &b, out);
	case N_AND:
	case N_OR:
		/* Python returns the deciding operand itself, not a bool. */
		if (eval(cx, n->kids[0], &a))
			return -1;
		if (pyval_truthy(&a) == (n->kind == N_OR)) {
			*out = a;
			return 0;
		}
		return eval(cx, n->kids[1], out);
	case N_COMPARE: return eval_compare(cx, n, out);
	case N_IFELSE:
		if (eval(cx, n->kids[1], &a))
			return -1;
		return eval(cx, n->kids[pyval_truthy(&a) ? 0 : 2], out);
	case N_CALL: {
		struct pyval args[8];
		struct pyval *argv = n->nkids <= ARRAY_SIZE(args) ? args : xreallocarray(NULL, n->nkids, sizeof(*argv));
		int rc = 0;
		for (size_t k = 0; k < n->nkids && rc == 0; k++)
			rc = eval(cx, n->kids[k], &argv[k]);
		if (rc == 0)
			rc = call_builtin(cx, n, argv, n->nkids, out);
		if (argv != args)
			free(argv);
		return rc;
	}
	case N_INDEX: return eval_index(cx, n, out);
	case N_COMPREHENSION: return eval_comprehension(cx, n, out);
	case N_NAME: break;
	}
	return fail(cx, n->pos, "internal error: unresolved name");
}

int pyexpr_eval(const struct pyexpr *e, const struct pyval *globals, struct pyarena *arena,
		struct pyval *out, struct pyexpr_error *err)
{
	return pyexpr_eval_budgeted(e, globals, arena, NULL, out, err);
}

void pyexpr_budget_init(struct pyexpr_budget *b, const char *what, uint64_t steps)
{
	*b = (struct pyexpr_budget){.what = what, .steps = steps, .steps_left = steps};
}

int pyexpr_eval_budgeted(const struct pyexpr *e, const struct pyval *globals, struct pyarena *arena,
			 struct pyexpr_budget *budget, struct pyval *out, struct pyexpr_error *err)
{
	uint64_t limit = EVAL_STEPS;
	/* The first PYEXPR_FREE_STEPS of an evaluation are its own: only what an expensive one
	 * spends beyond them is drawn from the shared budget, so cheap expressions evaluated
	 * over millions of configurations never exhaust it. */
	if (budget && budget->steps_left < limit - PYEXPR_FREE_STEPS)
		limit = budget->steps_left + PYEXPR_FREE_STEPS;
	struct evalctx cx = {.globals = globals, .arena = arena, .err = err, .steps_left = limit,
			     .bytes_left = (uint64_t)EVAL_MIB << 20, .budget = limit < EVAL_STEPS ? budget : NULL};
	if (e->nlocals)
		cx.locals = arena_alloc(arena, e->nlocals * sizeof(*cx.locals));
	int rc = eval(&cx, e->root, out);
	uint64_t spent = limit - cx.steps_left;
	if (budget && spent > PYEXPR_FREE_STEPS)
		budget->steps_left -= spent - PYEXPR_FREE_STEPS < budget->steps_left ? spent - PYEXPR_FREE_STEPS
										  : budget->steps_left;
	return rc;
}
