/* pyexpr.h: compiles and evaluates the subset of Python expressions that T1 specs use
 * (Values, Conditions, sizes), with Python 3 semantics, except that integers are 64-bit.
 *
 * The subset: None, True, False, integers (decimal, 0x, 0o, 0b, with _), floats, strings
 * ('..', "..", r and u prefixes, adjacent literals joined), lists and list comprehensions
 * with any number of "for NAME in ..." and "if ..." clauses, indexing, the operators
 * + - * / // % ** << >> & | ^ ~, unary + and -, comparisons (< <= > >= == != in, not in)
 * chained as in Python (1 <= a <= b), and/or/not with short-circuit and Python's operand
 * results, "x if c else y", parentheses, and the builtins range, list, min, max, len, abs,
 * int and float. Anything else is refused at compile time with its position.
 *
 * Where Python integers would grow past 64 bits, evaluation fails with an "integer
 * overflow" error instead of returning a wrong value, and a complex result is an error;
 * everything else (floor division and modulo of negatives, true division, float formatting,
 * comparisons of ints with floats) follows CPython, except that int / int with an operand
 * beyond 2**53 is rounded through long double and may differ from CPython in the last bit.
 *
 * Memory: values are immutable. Strings, lists and ranges live in a struct pyarena; a
 * value stays valid while the arena that made it, the compiled expression and the globals
 * it was evaluated with all do. */
#ifndef KG_PYEXPR_H
#define KG_PYEXPR_H

#include "common.h"

#include <stddef.h>
#include <stdint.h>

#include "xalloc.h"

enum pyval_kind {
	PY_NONE,
	PY_BOOL, /* u.i is 0 or 1; a bool is an int in arithmetic, as in Python */
	PY_INT,	 /* u.i */
	PY_FLOAT,
	PY_STR,
	PY_LIST,
	PY_RANGE,
};

struct pyval {
	enum pyval_kind kind;
	union {
		int64_t i;		     /* PY_BOOL, PY_INT */
		double f;		     /* PY_FLOAT */
		const struct pystr *s;	     /* PY_STR */
		const struct pylist *list;   /* PY_LIST */
		const struct pyrange *range; /* PY_RANGE */
	} u;
};

struct pystr {
	size_t len;    /* bytes of UTF-8, without the terminating NUL */
	char bytes[];  /* NUL-terminated */
};

struct pylist {
	size_t len;	       /* number of items */
	struct pyval items[];  /* the items, in order */
};

struct pyrange {
	int64_t start, stop, step; /* as range(start, stop, step); step is never 0 */
};

/* A bump allocator: everything it hands out is freed together by reset or free. */
struct pyarena;

struct pyarena *pyarena_new(void);
/* Frees everything allocated since pyarena_new, keeping one block for reuse. */
void pyarena_reset(struct pyarena *arena);
void pyarena_free(struct pyarena *arena);

struct pyval pyval_none(void);
struct pyval pyval_bool(int b);
struct pyval pyval_int(int64_t i);
struct pyval pyval_float(double f);
/* Copies len bytes of s into arena. */
struct pyval pyval_str(struct pyarena *arena, const char *s, size_t len);
/* Copies the n items into a new list in arena. */
struct pyval pyval_list(struct pyarena *arena, const struct pyval *items, size_t n);

/* A deep copy of v in arena, for a value that must outlive the expression, globals or
 * arena it came from. */
struct pyval pyval_copy(struct pyarena *arena, const struct pyval *v);

/* Python's type name: "int", "float", "bool", "str", "list", "range", "NoneType". */
const char *pyval_type_name(const struct pyval *v);
/* Python's bool(v). */
int pyval_truthy(const struct pyval *v);
/* Python's a == b (deep for lists; 1 == 1.0 == True). */
int pyval_equal(const struct pyval *a, const struct pyval *b);
/* Appends Python's repr(v): "[1, 2.5, 'a', True]", "1e+16", "range(0, 3)". */
void pyval_repr(struct strbuf *sb, const struct pyval *v);
/* Appends v for a message about a result: repr(v), but a list as "a list of N items", since
 * its items may be one list shared millions of times ([[0] * 10**6] * 10**6), which a repr
 * would write out whole. */
void pyval_describe(struct strbuf *sb, const struct pyval *v);
/* Lays out the items of a list, range or string (one-character strings) as an array in
 * arena. Returns 0, or -1 when v is not iterable. */
int pyval_items(struct pyarena *arena, const struct pyval *v, const struct pyval **items, size_t *n);

/* Where and why compiling or evaluating failed. */
struct pyexpr_error {
	size_t offset;	    /* byte offset into the source of what failed */
	char message[256];  /* "division by zero", "name 'x' is not defined", ... */
};

/* A compiled expression; opaque. */
struct pyexpr;

/* Compiles source. Names other than builtins and comprehension variables must be among
 * names[0..nnames-1]; at evaluation, globals[i] is the value of names[i]. Returns NULL and
 * fills *err on a syntax error, an unknown name or a construct outside the subset. The
 * caller frees the result with pyexpr_free; source and names are copied. */
struct pyexpr *pyexpr_compile(const char *source, const char *const *names, size_t nnames,
			      struct pyexpr_error *err);
void pyexpr_free(struct pyexpr *expr);

const char *pyexpr_source(const struct pyexpr *expr);
/* The indices (into names) of the globals the expression reads, ascending, each once. */
size_t pyexpr_globals_used(const struct pyexpr *expr, const size_t **slots);

/* Evaluates expr with globals[i] bound to names[i] (only the slots listed by
 * pyexpr_globals_used are read). Temporaries and the result are allocated in arena.
 * Returns 0 with *out set, or -1 with *err filled (ZeroDivisionError, TypeError, ...,
 * or a limit of one evaluation exceeded: 10**8 steps, 512 MiB of lists and strings). */
int pyexpr_eval(const struct pyexpr *expr, const struct pyval *globals, struct pyarena *arena,
		struct pyval *out, struct pyexpr_error *err);

/* Expression work shared by many evaluations (a spec's conditions over one listing of its
 * space): each evaluation spends its first PYEXPR_FREE_STEPS steps freely and draws the rest
 * from steps_left, so that a condition just under the limit of one evaluation cannot take
 * minutes over a few hundred configurations. */
#define PYEXPR_FREE_STEPS 10000
struct pyexpr_budget {
	const char *what;    /* whose budget it is, for the message: "the spec" */
	uint64_t steps;	     /* the whole budget */
	uint64_t steps_left; /* what is left of it */
};
void pyexpr_budget_init(struct pyexpr_budget *budget, const char *what, uint64_t steps);
/* pyexpr_eval drawing on budget (NULL: none); fails with "...'s budget of expression work
 * exceeded" once it is spent. */
int pyexpr_eval_budgeted(const struct pyexpr *expr, const struct pyval *globals, struct pyarena *arena,
			 struct pyexpr_budget *budget, struct pyval *out, struct pyexpr_error *err);

/* The column (from 1, in characters) at which err points in source. */
size_t pyexpr_error_column(const char *source, const struct pyexpr_error *err);

#endif
