/* pyexpr_cuda.h: translates a compiled expression (pyexpr.h) into a CUDA C++ device function
 * with pyexpr_eval's semantics, so that Generator fills can be computed on the GPU.
 *
 * The subset: int, float and bool constants; the index name; globals that are numbers or
 * lists of numbers (ProblemSize), folded into the code as constants, a list indexed by any
 * int expression (negative indices count from the end; an index out of range fails); unary
 * + - ~ not; binary + - * / // % ** << >> & | ^; comparisons (< <= > >= == !=), chained as
 * in Python; and/or with Python's operand results; "x if c else y"; min and max of two or
 * more arguments, abs, int and float of a number. Anything else (strings, None, list
 * displays and comprehensions, range, len, list, min or max of one list, in, a list used
 * other than indexed) is refused, and the caller evaluates on the host instead.
 *
 * Semantics: the function returns what pyexpr_eval returns, converted to double as
 * lib/kargs.c stores a value ((double) for an int or a bool), bit for bit, and fails
 * wherever pyexpr_eval fails (division or modulo by zero, integer overflow, a negative shift
 * count, zero to a negative power, int() of inf or nan, a float operand of a bitwise
 * operator or of ~, an index out of range or not an int), with one exception: a float
 * power (x ** y with a float operand or a negative int exponent) that pyexpr computes with
 * glibc's pow() may differ in its last bits (and so may what is computed from it, such as
 * int(x ** 0.5); at the edge of the double range, so may whether it overflows), since neither glibc's pow() nor CUDA's (documented
 * to within 2 ulp) is correctly rounded, and NVVM may rewrite pow(x, -1.0) as 1.0 / x.
 * A NaN result is NaN on both, though its sign and payload bits may differ. int / int
 * beyond 2**53 reproduces the host's long double rounding (x87 on x86-64, as LDBL_MANT_DIG
 * of the compiler that built this file says). */
#ifndef KG_PYEXPR_CUDA_H
#define KG_PYEXPR_CUDA_H

#include "common.h"

#include <stddef.h>

#include "pyexpr.h"
#include "xalloc.h"

/* The device helpers the generated functions call (names prefixed kgpy_), as source text:
 * valid CUDA C++ for NVRTC (C++17, no headers needed), and valid C++ for a host compiler
 * when KGPY_HOST is defined (then __device__ expands to nothing), so that tests run the
 * same code on the CPU. It does not depend on floating-point contraction, and the generated
 * code must be compiled without it (NVRTC's --fmad=false, a host's -ffp-contract=off).
 * Static storage. It goes before the functions; a second copy in a program is skipped. */
const char *pyexpr_cuda_prelude(void);

/* Appends to out the definition of
 *     __device__ double NAME(long long i, int *failed)
 * which returns the value of e for element index i as a double and, wherever pyexpr_eval
 * would fail, sets *failed to 1 and returns 0 (it leaves *failed alone otherwise, so a
 * caller may test a whole fill's flag once). globals are the values of e's names, as for
 * pyexpr_eval; the name at index_slot is i and its value is not read; every other global e
 * reads must be a number or a list of numbers, and is folded into the code as a constant.
 * name must be a C++ identifier that the prelude does not use (no kgpy_ prefix).
 * Returns 0, or -1 with err set (the offset into e's source of the construct, and a message
 * such as "lists are not supported on the GPU") when e is outside the subset; out is then
 * unchanged. */
int pyexpr_cuda_function(const struct pyexpr *e, const char *name, size_t index_slot,
			 const struct pyval *globals, struct strbuf *out, struct pyexpr_error *err);

#endif
