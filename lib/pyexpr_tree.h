/* pyexpr_tree.h: the parse tree of a compiled expression, private to lib/pyexpr.c (which
 * builds and evaluates it) and lib/pyexpr_cuda.c (which translates it to CUDA C++). */
#ifndef KG_PYEXPR_TREE_H
#define KG_PYEXPR_TREE_H

#include "common.h"

#include <stddef.h>

#include "pyexpr.h"

/* Tokens; a node's op is one of them (or an enum builtin, for a call). */
enum tok {
	T_END, T_INT, T_FLOAT, T_STR, T_NAME,
	T_LPAR, T_RPAR, T_LBRACK, T_RBRACK, T_COMMA,
	T_PLUS, T_MINUS, T_STAR, T_SLASH, T_DSLASH, T_PERCENT, T_DSTAR,
	T_LSHIFT, T_RSHIFT, T_AMP, T_PIPE, T_CARET, T_TILDE,
	T_LT, T_GT, T_LE, T_GE, T_EQ, T_NE,
	T_AND, T_OR, T_NOT, T_IN, T_IS, T_IF, T_ELSE, T_FOR, T_TRUE, T_FALSE, T_NONE, T_LAMBDA,
	/* Not real tokens: comparison operators that take two keywords. */
	T_NOT_IN,
};

enum node_kind {
	N_CONST,    /* value */
	N_NAME,	    /* name, before resolution */
	N_GLOBAL,   /* slot: globals[slot] */
	N_LOCAL,    /* slot: a comprehension variable */
	N_LIST,	    /* kids: the items */
	N_UNARY,    /* op: T_MINUS, T_PLUS, T_TILDE, T_NOT; kids[0] */
	N_BINARY,   /* op: an arithmetic or bitwise token; kids[0] op kids[1] */
	N_AND,	    /* kids[0] and kids[1] */
	N_OR,	    /* kids[0] or kids[1] */
	N_COMPARE,  /* kids[0] ops[0] kids[1] ops[1] kids[2] ... */
	N_IFELSE,   /* kids[0] if kids[1] else kids[2] */
	N_CALL,	    /* op: a builtin; kids: the arguments */
	N_INDEX,    /* kids[0][kids[1]] */
	N_COMPREHENSION, /* kids[0] is the element; clauses */
};

enum builtin { B_RANGE, B_LIST, B_MIN, B_MAX, B_LEN, B_ABS, B_INT, B_FLOAT };

struct clause {
	int is_for;	     /* "for name in expr" (1) or "if expr" (0) */
	const char *name;    /* the loop variable (for) */
	size_t name_len;
	size_t name_pos;
	int slot;	     /* the variable's local slot, set by resolution */
	struct node *expr;   /* the iterable (for) or the condition (if) */
};

struct node {
	enum node_kind kind;
	int op;		    /* operator token or builtin, by kind */
	size_t pos;	    /* byte offset reported in errors about this node */
	struct pyval value; /* N_CONST */
	const char *name;   /* N_NAME, N_CALL: points into the source */
	size_t name_len;
	size_t slot;	    /* N_GLOBAL, N_LOCAL */
	struct node **kids;
	size_t nkids;
	int *ops;	    /* N_COMPARE: nkids - 1 operators */
	struct clause *clauses; /* N_COMPREHENSION */
	size_t nclauses;
	unsigned height;	/* 1 + the greatest height below; bounds evaluation's recursion */
};

struct pyexpr {
	char *source;	      /* a copy of the expression */
	struct pyarena *arena; /* the tree and constants */
	struct node *root;
	size_t nlocals;	      /* comprehension variables, each with its own slot */
	size_t *globals_used; /* ascending */
	size_t nglobals_used;
};

#endif
