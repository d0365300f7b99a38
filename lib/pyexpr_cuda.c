/* pyexpr_cuda.c: the kgpy_ device prelude, and the translator from a compiled expression's
 * tree (pyexpr_tree.h) to one CUDA C++ function made of those helpers.
 *
 * The function is straight-line code over temporaries t0, t1, ...: each node of the tree
 * becomes one declaration whose C++ type is the node's static type (long long for an int
 * or bool, double for a float, kgpy_val where it is known only at run time). An operation
 * that can fail sets the flag f, which the function tests once, at its end. and, or,
 * if-else and chained comparisons become if statements, so that what Python does not
 * evaluate does not run (and cannot set f). Each prelude helper mirrors one piece of
 * pyexpr.c's evaluator, statement for statement, so that the two give the same bits. */
#include "common.h"

#include <float.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <string.h>

#include "pyexpr_cuda.h"
#include "pyexpr_tree.h"
#include "xalloc.h"

#define STRINGIFY(x) #x
#define EXPAND_AND_STRINGIFY(x) STRINGIFY(x)

/* The prelude, as CUDA C++. KGPY_LDBL_MANT_DIG is this compiler's long double, which
 * pyexpr.c's int / int beyond 2**53 goes through. */
static const char prelude[] =
	"#ifndef KGPY_PRELUDE\n"
	"#define KGPY_PRELUDE\n"
	"#define KGPY_LDBL_MANT_DIG " EXPAND_AND_STRINGIFY(LDBL_MANT_DIG) "\n"
	"/* kgpy prelude: the helpers that functions made by pyexpr_cuda_function call, each the\n"
	" * device twin of a piece of lib/pyexpr.c's evaluator (same name in a comment), with the\n"
	" * same results bit for bit (pow() aside, see kgpy_pow_ff). A fallible helper takes the\n"
	" * caller's failure flag f: on failure it sets *f = 1 and returns 0; it never clears *f.\n"
	" * Every helper is total, so a generated function runs on after a failure and tests f\n"
	" * once, at its end: a failure is final, and straight-line code compiles and runs faster\n"
	" * than an exit after each step. Plain C++ apart from __device__ and __forceinline__, so\n"
	" * that a host compiler runs it with KGPY_HOST. */\n"
	"#ifdef KGPY_HOST\n"
	"#include <math.h>\n"
	"#include <string.h>\n"
	"#define __device__\n"
	"#define __forceinline__ inline\n"
	"#endif\n"
	"/* Not static: NVRTC warns of a static function that a program does not call. */\n"
	"#define KGPY_FN __device__ __forceinline__\n"
	"\n"
	"/* KGPY_LDBL_MANT_DIG, defined above: the bits of the host's long double, through which\n"
	" * pyexpr computes int / int beyond 2**53 (64 for x87, 113 for IEEE quad, 53 for none). */\n"
	"#if KGPY_LDBL_MANT_DIG != 53 && (KGPY_LDBL_MANT_DIG < 64 || KGPY_LDBL_MANT_DIG > 116)\n"
	"#error \"kgpy: unsupported long double\"\n"
	"#endif\n"
	"\n"
	"#define KGPY_INT_MAX 9223372036854775807LL\n"
	"#define KGPY_INT_MIN (-9223372036854775807LL - 1)\n"
	"#define KGPY_TWO63 9223372036854775808.0\n"
	"\n"
	"enum { KGPY_BOOL, KGPY_INT, KGPY_FLOAT };\n"
	"enum { KGPY_ADD, KGPY_SUB, KGPY_MUL, KGPY_DIV, KGPY_FLOORDIV, KGPY_MOD, KGPY_POW,\n"
	"       KGPY_LSHIFT, KGPY_RSHIFT, KGPY_AND, KGPY_OR, KGPY_XOR };\n"
	"enum { KGPY_LT, KGPY_LE, KGPY_GT, KGPY_GE, KGPY_EQ, KGPY_NE };\n"
	"enum { KGPY_NEG, KGPY_POS, KGPY_INVERT };\n"
	"\n"
	"/* A value whose type is known only at run time (\"1 if c else 0.5\"): struct pyval's numbers. */\n"
	"struct kgpy_val {\n"
	"	int kind;    /* KGPY_BOOL, KGPY_INT or KGPY_FLOAT */\n"
	"	long long i; /* KGPY_BOOL (0 or 1), KGPY_INT */\n"
	"	double f;    /* KGPY_FLOAT */\n"
	"};\n"
	"\n"
	"KGPY_FN kgpy_val kgpy_make(int kind, long long i, double f)\n"
	"{\n"
	"	kgpy_val v;\n"
	"	v.kind = kind;\n"
	"	v.i = i;\n"
	"	v.f = f;\n"
	"	return v;\n"
	"}\n"
	"\n"
	"KGPY_FN kgpy_val kgpy_vbool(long long b) { return kgpy_make(KGPY_BOOL, b, 0.0); }\n"
	"KGPY_FN kgpy_val kgpy_vint(long long i) { return kgpy_make(KGPY_INT, i, 0.0); }\n"
	"KGPY_FN kgpy_val kgpy_vfloat(double f) { return kgpy_make(KGPY_FLOAT, 0, f); }\n"
	"\n"
	"/* As lib/kargs.c stores a result. */\n"
	"KGPY_FN double kgpy_as_double(kgpy_val v)\n"
	"{\n"
	"	return v.kind == KGPY_FLOAT ? v.f : (double)v.i;\n"
	"}\n"
	"\n"
	"KGPY_FN int kgpy_truthy(kgpy_val v)\n"
	"{\n"
	"	return v.kind == KGPY_FLOAT ? v.f != 0.0 : v.i != 0;\n"
	"}\n"
	"\n"
	"/* A double from its bits, for constants no literal spells (inf, nan). */\n"
	"KGPY_FN double kgpy_bits(unsigned long long bits)\n"
	"{\n"
	"#ifdef KGPY_HOST\n"
	"	double d;\n"
	"	memcpy(&d, &bits, sizeof(d));\n"
	"	return d;\n"
	"#else\n"
	"	return __longlong_as_double((long long)bits);\n"
	"#endif\n"
	"}\n"
	"\n"
	"/* A TypeError, an IndexError: whatever pyexpr refuses for every value. */\n"
	"KGPY_FN long long kgpy_fail(int *f)\n"
	"{\n"
	"	*f = 1;\n"
	"	return 0;\n"
	"}\n"
	"\n"
	"/* ------------------------------------------------------------ integers */\n"
	"\n"
	"KGPY_FN long long kgpy_add(long long x, long long y, int *f)\n"
	"{\n"
	"	unsigned long long r = (unsigned long long)x + (unsigned long long)y;\n"
	"	/* Overflow: both operands have the sign the wrapped sum lacks. */\n"
	"	if ((long long)(((unsigned long long)x ^ r) & ((unsigned long long)y ^ r)) < 0)\n"
	"		return kgpy_fail(f);\n"
	"	return (long long)r;\n"
	"}\n"
	"\n"
	"KGPY_FN long long kgpy_sub(long long x, long long y, int *f)\n"
	"{\n"
	"	unsigned long long r = (unsigned long long)x - (unsigned long long)y;\n"
	"	/* Overflow: the operands' signs differ and the wrapped difference has y's. */\n"
	"	if ((long long)(((unsigned long long)x ^ (unsigned long long)y) & ((unsigned long long)x ^ r)) < 0)\n"
	"		return kgpy_fail(f);\n"
	"	return (long long)r;\n"
	"}\n"
	"\n"
	"/* x * y, through the 128-bit product of the magnitudes built from 32-bit halves: device\n"
	" * code has no overflow builtins, and __int128 needs NVRTC's --device-int128. */\n"
	"KGPY_FN long long kgpy_mul(long long x, long long y, int *f)\n"
	"{\n"
	"	int negative = (x < 0) != (y < 0);\n"
	"	unsigned long long a = x < 0 ? 0 - (unsigned long long)x : (unsigned long long)x;\n"
	"	unsigned long long b = y < 0 ? 0 - (unsigned long long)y : (unsigned long long)y;\n"
	"	unsigned long long a0 = a & 0xffffffffULL, a1 = a >> 32, b0 = b & 0xffffffffULL, b1 = b >> 32;\n"
	"	unsigned long long p00 = a0 * b0, p01 = a0 * b1, p10 = a1 * b0, p11 = a1 * b1;\n"
	"	unsigned long long mid = (p00 >> 32) + (p01 & 0xffffffffULL) + (p10 & 0xffffffffULL);\n"
	"	unsigned long long hi = p11 + (p01 >> 32) + (p10 >> 32) + (mid >> 32);\n"
	"	unsigned long long lo = (mid << 32) | (p00 & 0xffffffffULL);\n"
	"	if (hi != 0 || lo > (unsigned long long)KGPY_INT_MAX + (unsigned long long)negative)\n"
	"		return kgpy_fail(f);\n"
	"	return negative ? (long long)(0 - lo) : (long long)lo;\n"
	"}\n"
	"\n"
	"/* int_binary's // and %: Python rounds the quotient toward minus infinity. */\n"
	"KGPY_FN long long kgpy_floordiv_mod(int op, long long x, long long y, int *f)\n"
	"{\n"
	"	if (y == 0)\n"
	"		return kgpy_fail(f);\n"
	"	if (y == -1)\n"
	"		/* INT64_MIN / -1 overflows in C; its remainder is always 0. */\n"
	"		return op == KGPY_MOD ? 0 : kgpy_sub(0, x, f);\n"
	"	if (op == KGPY_FLOORDIV) {\n"
	"		long long r = x / y;\n"
	"		if ((x % y != 0) && ((x < 0) != (y < 0)))\n"
	"			r--;\n"
	"		return r;\n"
	"	}\n"
	"	long long r = x % y;\n"
	"	if (r != 0 && ((r < 0) != (y < 0)))\n"
	"		r += y;\n"
	"	return r;\n"
	"}\n"
	"\n"
	"KGPY_FN long long kgpy_lshift(long long x, long long y, int *f)\n"
	"{\n"
	"	if (y < 0)\n"
	"		return kgpy_fail(f);\n"
	"	if (x == 0)\n"
	"		return 0;\n"
	"	if (y >= 63 || (x > 0 ? x > (KGPY_INT_MAX >> y) : x < (KGPY_INT_MIN >> y)))\n"
	"		return kgpy_fail(f);\n"
	"	return (long long)((unsigned long long)x << y);\n"
	"}\n"
	"\n"
	"KGPY_FN long long kgpy_rshift(long long x, long long y, int *f)\n"
	"{\n"
	"	if (y < 0)\n"
	"		return kgpy_fail(f);\n"
	"	/* Python shifts toward minus infinity, like an arithmetic shift. */\n"
	"	if (y >= 63)\n"
	"		return x < 0 ? -1 : 0;\n"
	"	return x >= 0 ? x >> y : -1 - ((-1 - x) >> y);\n"
	"}\n"
	"\n"
	"/* int_pow: int ** int for y >= 0, by squaring; the base's square past the last bit of the\n"
	" * exponent is never taken, so that it cannot overflow where the result does not. */\n"
	"KGPY_FN long long kgpy_ipow(long long base, long long exponent, int *f)\n"
	"{\n"
	"	long long result = 1;\n"
	"	while (exponent > 0) {\n"
	"		if (exponent & 1) {\n"
	"			result = kgpy_mul(result, base, f);\n"
	"			if (*f)\n"
	"				return 0;\n"
	"		}\n"
	"		exponent >>= 1;\n"
	"		if (exponent > 0) {\n"
	"			base = kgpy_mul(base, base, f);\n"
	"			if (*f)\n"
	"				return 0;\n"
	"		}\n"
	"	}\n"
	"	return result;\n"
	"}\n"
	"\n"
	"/* The operators of int_binary whose result is an int (all but / and **). */\n"
	"KGPY_FN long long kgpy_int_op(int op, long long x, long long y, int *f)\n"
	"{\n"
	"	switch (op) {\n"
	"	case KGPY_ADD: return kgpy_add(x, y, f);\n"
	"	case KGPY_SUB: return kgpy_sub(x, y, f);\n"
	"	case KGPY_MUL: return kgpy_mul(x, y, f);\n"
	"	case KGPY_FLOORDIV:\n"
	"	case KGPY_MOD: return kgpy_floordiv_mod(op, x, y, f);\n"
	"	case KGPY_LSHIFT: return kgpy_lshift(x, y, f);\n"
	"	case KGPY_RSHIFT: return kgpy_rshift(x, y, f);\n"
	"	case KGPY_AND: return x & y;\n"
	"	case KGPY_OR: return x | y;\n"
	"	case KGPY_XOR: return x ^ y;\n"
	"	default: return kgpy_fail(f);\n"
	"	}\n"
	"}\n"
	"\n"
	"/* (double)((long double)x / (long double)y), int_true_divide's path beyond 2**53, without\n"
	" * long double: the exact quotient's bits by long division, rounded to nearest even at\n"
	" * KGPY_LDBL_MANT_DIG bits and then again at 53, as the host's two roundings do. */\n"
	"KGPY_FN double kgpy_long_double_divide(long long x, long long y)\n"
	"{\n"
	"#if KGPY_LDBL_MANT_DIG == 53\n"
	"	return (double)x / (double)y;\n"
	"#else\n"
	"	const int tail = KGPY_LDBL_MANT_DIG - 53; /* bits kept beyond a double's */\n"
	"	int negative = (x < 0) != (y < 0);\n"
	"	unsigned long long n = x < 0 ? 0 - (unsigned long long)x : (unsigned long long)x;\n"
	"	unsigned long long d = y < 0 ? 0 - (unsigned long long)y : (unsigned long long)y;\n"
	"	if (n == 0)\n"
	"		return negative ? -0.0 : 0.0;\n"
	"	/* hi: the first 53 significant bits; lo: the next `tail`; round: the one after. */\n"
	"	unsigned long long r = 0, hi = 0, lo = 0, round = 0;\n"
	"	int count = 0, exponent = 0;\n"
	"	for (int pos = 63; count <= KGPY_LDBL_MANT_DIG; pos--) {\n"
	"		/* r < d <= 2**63, so 2r + 1 fits. */\n"
	"		r = 2 * r + (pos >= 0 ? (n >> pos) & 1 : 0);\n"
	"		unsigned long long bit = r >= d;\n"
	"		if (bit)\n"
	"			r -= d;\n"
	"		if (count == 0 && !bit)\n"
	"			continue;\n"
	"		if (count == 0)\n"
	"			exponent = pos;\n"
	"		if (count < 53)\n"
	"			hi = 2 * hi + bit;\n"
	"		else if (count < KGPY_LDBL_MANT_DIG)\n"
	"			lo = 2 * lo + bit;\n"
	"		else\n"
	"			round = bit;\n"
	"		count++;\n"
	"	}\n"
	"	int sticky = r != 0;\n"
	"	if (round && (sticky || (lo & 1))) {\n"
	"		lo++;\n"
	"		if (lo >> tail) {\n"
	"			lo = 0;\n"
	"			hi++;\n"
	"		}\n"
	"	}\n"
	"	unsigned long long half = 1ULL << (tail - 1);\n"
	"	if (lo > half || (lo == half && (hi & 1)))\n"
	"		hi++;\n"
	"	if (hi >> 53) {\n"
	"		hi >>= 1;\n"
	"		exponent++;\n"
	"	}\n"
	"	double q = ldexp((double)hi, exponent - 52);\n"
	"	return negative ? -q : q;\n"
	"#endif\n"
	"}\n"
	"\n"
	"/* int_true_divide: int / int. */\n"
	"KGPY_FN double kgpy_truediv_ii(long long x, long long y, int *f)\n"
	"{\n"
	"	const long long exact = 1LL << 53;\n"
	"	if (y == 0)\n"
	"		return (double)kgpy_fail(f);\n"
	"	if (x >= -exact && x <= exact && y >= -exact && y <= exact)\n"
	"		return (double)x / (double)y;\n"
	"	return kgpy_long_double_divide(x, y);\n"
	"}\n"
	"\n"
	"/* ------------------------------------------------------------ floats */\n"
	"\n"
	"/* float_divmod: Python's float // and % (Objects/floatobject.c). */\n"
	"KGPY_FN double kgpy_float_divmod(int op, double vx, double wx)\n"
	"{\n"
	"	double m = fmod(vx, wx);\n"
	"	double div = (vx - m) / wx;\n"
	"	if (m != 0.0) {\n"
	"		if ((wx < 0) != (m < 0)) {\n"
	"			m += wx;\n"
	"			div -= 1.0;\n"
	"		}\n"
	"	} else {\n"
	"		m = copysign(0.0, wx);\n"
	"	}\n"
	"	if (op == KGPY_MOD)\n"
	"		return m;\n"
	"	double fd;\n"
	"	if (div != 0.0) {\n"
	"		fd = floor(div);\n"
	"		if (div - fd > 0.5)\n"
	"			fd += 1.0;\n"
	"	} else {\n"
	"		fd = copysign(0.0, vx / wx);\n"
	"	}\n"
	"	return fd;\n"
	"}\n"
	"\n"
	"/* float_pow: Python's float ** float. The one place the device may differ from the host:\n"
	" * pow() itself, which neither glibc nor CUDA (at most 2 ulp off) rounds correctly, and\n"
	" * which a compiler may rewrite (pow(x, -1.0) as 1.0 / x). */\n"
	"KGPY_FN double kgpy_pow_ff(double iv, double iw, int *f)\n"
	"{\n"
	"	if (iw == 0)\n"
	"		return 1.0;\n"
	"	if (isnan(iv))\n"
	"		return iv;\n"
	"	if (isnan(iw))\n"
	"		return iv == 1.0 ? 1.0 : iw;\n"
	"	if (isinf(iw)) {\n"
	"		double a = fabs(iv);\n"
	"		if (a == 1.0)\n"
	"			return 1.0;\n"
	"		if ((iw > 0) == (a > 1.0))\n"
	"			return fabs(iw);\n"
	"		return 0.0;\n"
	"	}\n"
	"	int iw_is_odd = fmod(fabs(iw), 2.0) == 1.0;\n"
	"	if (isinf(iv)) {\n"
	"		if (iw > 0)\n"
	"			return iw_is_odd ? iv : fabs(iv);\n"
	"		return iw_is_odd ? copysign(0.0, iv) : 0.0;\n"
	"	}\n"
	"	if (iv == 0.0) {\n"
	"		if (iw < 0)\n"
	"			return (double)kgpy_fail(f);\n"
	"		return iw_is_odd ? iv : 0.0;\n"
	"	}\n"
	"	int negate = 0;\n"
	"	if (iv < 0.0) {\n"
	"		if (iw != floor(iw))\n"
	"			return (double)kgpy_fail(f); /* complex */\n"
	"		iv = -iv;\n"
	"		negate = iw_is_odd;\n"
	"	}\n"
	"	if (iv == 1.0)\n"
	"		return negate ? -1.0 : 1.0;\n"
	"	double r = pow(iv, iw);\n"
	"	if (isinf(r))\n"
	"		return (double)kgpy_fail(f);\n"
	"	return negate ? -r : r;\n"
	"}\n"
	"\n"
	"/* float_binary: every operator with a float operand; the bitwise ones are TypeErrors. */\n"
	"KGPY_FN double kgpy_float_op(int op, double x, double y, int *f)\n"
	"{\n"
	"	switch (op) {\n"
	"	case KGPY_ADD: return x + y;\n"
	"	case KGPY_SUB: return x - y;\n"
	"	case KGPY_MUL: return x * y;\n"
	"	case KGPY_DIV:\n"
	"		if (y == 0.0)\n"
	"			return (double)kgpy_fail(f);\n"
	"		return x / y;\n"
	"	case KGPY_FLOORDIV:\n"
	"	case KGPY_MOD:\n"
	"		if (y == 0.0)\n"
	"			return (double)kgpy_fail(f);\n"
	"		return kgpy_float_divmod(op, x, y);\n"
	"	case KGPY_POW: return kgpy_pow_ff(x, y, f);\n"
	"	default: return (double)kgpy_fail(f);\n"
	"	}\n"
	"}\n"
	"\n"
	"/* int ** int: an int for y >= 0, a float otherwise. */\n"
	"KGPY_FN kgpy_val kgpy_pow_ii(long long x, long long y, int *f)\n"
	"{\n"
	"	if (y >= 0)\n"
	"		return kgpy_vint(kgpy_ipow(x, y, f));\n"
	"	if (x == 0)\n"
	"		return kgpy_vint(kgpy_fail(f));\n"
	"	return kgpy_vfloat(kgpy_pow_ff((double)x, (double)y, f));\n"
	"}\n"
	"\n"
	"/* ------------------------------------------------------------ mixed and dynamic */\n"
	"\n"
	"/* cmp_int_double: i against d exactly, as CPython does; -1, 0, 1, or 2 when d is NaN. */\n"
	"KGPY_FN int kgpy_cmp_if(long long i, double d)\n"
	"{\n"
	"	if (isnan(d))\n"
	"		return 2;\n"
	"	if (d >= KGPY_TWO63)\n"
	"		return -1;\n"
	"	if (d < -KGPY_TWO63)\n"
	"		return 1;\n"
	"	double t = trunc(d);\n"
	"	long long ti = (long long)t;\n"
	"	if (i < ti)\n"
	"		return -1;\n"
	"	if (i > ti)\n"
	"		return 1;\n"
	"	double frac = d - t;\n"
	"	return frac > 0 ? -1 : frac < 0 ? 1 : 0;\n"
	"}\n"
	"\n"
	"/* cmp_numbers: -1, 0, 1, or 2 when unordered. */\n"
	"KGPY_FN int kgpy_cmp(kgpy_val a, kgpy_val b)\n"
	"{\n"
	"	if (a.kind != KGPY_FLOAT && b.kind != KGPY_FLOAT)\n"
	"		return (a.i > b.i) - (a.i < b.i);\n"
	"	if (a.kind == KGPY_FLOAT && b.kind == KGPY_FLOAT) {\n"
	"		if (isnan(a.f) || isnan(b.f))\n"
	"			return 2;\n"
	"		return (a.f > b.f) - (a.f < b.f);\n"
	"	}\n"
	"	if (a.kind == KGPY_FLOAT) {\n"
	"		int c = kgpy_cmp_if(b.i, a.f);\n"
	"		return c == 2 ? 2 : -c;\n"
	"	}\n"
	"	return kgpy_cmp_if(a.i, b.f);\n"
	"}\n"
	"\n"
	"/* compare and order: unordered values are equal to nothing and in no order. */\n"
	"KGPY_FN int kgpy_compare(int op, kgpy_val a, kgpy_val b)\n"
	"{\n"
	"	int c = kgpy_cmp(a, b);\n"
	"	switch (op) {\n"
	"	case KGPY_EQ: return c == 0;\n"
	"	case KGPY_NE: return c != 0;\n"
	"	case KGPY_LT: return c == -1;\n"
	"	case KGPY_LE: return c == -1 || c == 0;\n"
	"	case KGPY_GT: return c == 1;\n"
	"	default: return c == 1 || c == 0;\n"
	"	}\n"
	"}\n"
	"\n"
	"/* binary, for operands whose types are known only at run time. */\n"
	"KGPY_FN kgpy_val kgpy_binary(int op, kgpy_val a, kgpy_val b, int *f)\n"
	"{\n"
	"	if (a.kind != KGPY_FLOAT && b.kind != KGPY_FLOAT) {\n"
	"		/* Bitwise operators on two bools give a bool. */\n"
	"		if (a.kind == KGPY_BOOL && b.kind == KGPY_BOOL && (op == KGPY_AND || op == KGPY_OR || op == KGPY_XOR))\n"
	"			return kgpy_vbool(kgpy_int_op(op, a.i, b.i, f));\n"
	"		if (op == KGPY_DIV)\n"
	"			return kgpy_vfloat(kgpy_truediv_ii(a.i, b.i, f));\n"
	"		if (op == KGPY_POW)\n"
	"			return kgpy_pow_ii(a.i, b.i, f);\n"
	"		return kgpy_vint(kgpy_int_op(op, a.i, b.i, f));\n"
	"	}\n"
	"	return kgpy_vfloat(kgpy_float_op(op, kgpy_as_double(a), kgpy_as_double(b), f));\n"
	"}\n"
	"\n"
	"/* unary's -, + and ~. */\n"
	"KGPY_FN kgpy_val kgpy_unary(int op, kgpy_val a, int *f)\n"
	"{\n"
	"	if (a.kind == KGPY_FLOAT) {\n"
	"		if (op == KGPY_INVERT)\n"
	"			return kgpy_vint(kgpy_fail(f));\n"
	"		return kgpy_vfloat(op == KGPY_NEG ? -a.f : a.f);\n"
	"	}\n"
	"	if (op == KGPY_NEG)\n"
	"		return kgpy_vint(kgpy_sub(0, a.i, f));\n"
	"	return kgpy_vint(op == KGPY_INVERT ? ~a.i : a.i);\n"
	"}\n"
	"\n"
	"/* ------------------------------------------------------------ builtins and indexing */\n"
	"\n"
	"KGPY_FN long long kgpy_abs_i(long long x, int *f)\n"
	"{\n"
	"	if (x == KGPY_INT_MIN)\n"
	"		return kgpy_fail(f);\n"
	"	return x < 0 ? -x : x;\n"
	"}\n"
	"\n"
	"KGPY_FN kgpy_val kgpy_abs(kgpy_val a, int *f)\n"
	"{\n"
	"	if (a.kind == KGPY_FLOAT)\n"
	"		return kgpy_vfloat(fabs(a.f));\n"
	"	return kgpy_vint(kgpy_abs_i(a.i, f));\n"
	"}\n"
	"\n"
	"/* int(x) for a float: toward zero; NaN, the infinities and what exceeds 64 bits fail. */\n"
	"KGPY_FN long long kgpy_int_f(double x, int *f)\n"
	"{\n"
	"	if (isnan(x) || isinf(x))\n"
	"		return kgpy_fail(f);\n"
	"	double t = trunc(x);\n"
	"	if (t >= KGPY_TWO63 || t < -KGPY_TWO63)\n"
	"		return kgpy_fail(f);\n"
	"	return (long long)t;\n"
	"}\n"
	"\n"
	"KGPY_FN long long kgpy_int(kgpy_val a, int *f)\n"
	"{\n"
	"	return a.kind == KGPY_FLOAT ? kgpy_int_f(a.f, f) : a.i;\n"
	"}\n"
	"\n"
	"/* eval_index's bounds: the position in a list of len items that index i names (from the\n"
	" * end when negative); an IndexError outside the list. */\n"
	"KGPY_FN long long kgpy_index(long long i, long long len, int *f)\n"
	"{\n"
	"	if (i < 0)\n"
	"		i = (long long)((unsigned long long)i + (unsigned long long)len);\n"
	"	if (i < 0 || i >= len)\n"
	"		return kgpy_fail(f);\n"
	"	return i;\n"
	"}\n"
	"\n"
	"/* As kgpy_index, for an index that may be a float (a TypeError). */\n"
	"KGPY_FN long long kgpy_index_v(kgpy_val i, long long len, int *f)\n"
	"{\n"
	"	if (i.kind == KGPY_FLOAT)\n"
	"		return kgpy_fail(f);\n"
	"	return kgpy_index(i.i, len, f);\n"
	"}\n"
	"#endif\n";

const char *pyexpr_cuda_prelude(void)
{
	return prelude;
}

/* ---------------------------------------------------------------- translation */

/* A list is folded into a switch over its positions; longer ones stay on the host. */
#define MAX_LIST_ITEMS 4096
#define MAX_LIST_ITEMS_TEXT EXPAND_AND_STRINGIFY(MAX_LIST_ITEMS)

/* The static type of a translated value, which picks its C++ type. A bool and an int give
 * the same number and fail for the same operators, so branches of the two join as an int;
 * a number that may be an int or a float joins as a tagged kgpy_val. */
enum ckind {
	CK_BOOL,  /* long long, 0 or 1 */
	CK_INT,	  /* long long */
	CK_FLOAT, /* double */
	CK_VAL,	  /* kgpy_val: the type is known only at run time */
};

/* A translated value: the temporary tN that holds it. */
struct cval {
	enum ckind kind;
	unsigned temp;
};

struct gen {
	const struct pyval *globals; /* the expression's globals, folded as constants */
	size_t index_slot;	     /* the global that is the parameter i */
	struct strbuf *out;	     /* where statements go (a branch's own buffer while one is made) */
	struct pyexpr_error *err;    /* where a refusal is described */
	unsigned ntemps;	     /* temporaries t0..t<ntemps-1> declared so far */
	int indent;		     /* tabs before each statement */
	int fallible;		     /* some statement can set the failure flag f */
	int reads_index;	     /* the parameter i is read */
};

/* A short piece of C++ (a temporary, converted), returned by value to pass to printf. */
struct ctext {
	char s[48];
};

/* Says why the expression stays on the host; returns -1. */
static int refuse(struct gen *g, size_t pos, const char *message)
{
	snprintf(g->err->message, sizeof(g->err->message), "%s", message);
	g->err->offset = pos;
	return -1;
}

static const char *ctype(enum ckind kind)
{
	switch (kind) {
	case CK_FLOAT: return "double";
	case CK_VAL: return "kgpy_val";
	default: return "long long";
	}
}

static int is_intlike_kind(enum ckind kind)
{
	return kind == CK_BOOL || kind == CK_INT;
}

/* The kind that holds a value of either kind. */
static enum ckind join(enum ckind a, enum ckind b)
{
	if (a == b)
		return a;
	return is_intlike_kind(a) && is_intlike_kind(b) ? CK_INT : CK_VAL;
}

/* v converted to kind `to`, where join allows it. */
static struct ctext as(enum ckind to, struct cval v)
{
	struct ctext t;
	if (to == CK_FLOAT && v.kind == CK_VAL)
		snprintf(t.s, sizeof(t.s), "kgpy_as_double(t%u)", v.temp);
	else if (to == CK_FLOAT && v.kind != CK_FLOAT)
		snprintf(t.s, sizeof(t.s), "(double)t%u", v.temp);
	else if (to == CK_VAL && v.kind != CK_VAL)
		snprintf(t.s, sizeof(t.s), "kgpy_v%s(t%u)",
			 v.kind == CK_FLOAT ? "float" : v.kind == CK_BOOL ? "bool" : "int", v.temp);
	else
		snprintf(t.s, sizeof(t.s), "t%u", v.temp);
	return t;
}

/* C++ that is true when v is (Python's bool(v)). */
static struct ctext truth(struct cval v)
{
	struct ctext t;
	if (v.kind == CK_VAL)
		snprintf(t.s, sizeof(t.s), "kgpy_truthy(t%u)", v.temp);
	else
		snprintf(t.s, sizeof(t.s), v.kind == CK_FLOAT ? "t%u != 0.0" : "t%u != 0", v.temp);
	return t;
}

/* Appends one statement, indented. */
static void line(struct gen *g, const char *fmt, ...) PRINTF_LIKE(2, 3);

static void line(struct gen *g, const char *fmt, ...)
{
	for (int k = 0; k < g->indent; k++)
		strbuf_addch(g->out, '\t');
	va_list ap;
	va_start(ap, fmt);
	strbuf_vaddf(g->out, fmt, ap);
	va_end(ap);
	strbuf_addch(g->out, '\n');
}

enum { PURE, FALLIBLE };

/* Declares a new temporary of kind, initialised with the C++ expression fmt, which sets the
 * failure flag f when fallible. */
static struct cval declare(struct gen *g, enum ckind kind, int fallible, const char *fmt, ...) PRINTF_LIKE(4, 5);

static struct cval declare(struct gen *g, enum ckind kind, int fallible, const char *fmt, ...)
{
	struct cval v = {.kind = kind, .temp = g->ntemps++};
	struct strbuf stmt;
	strbuf_init(&stmt);
	va_list ap;
	va_start(ap, fmt);
	strbuf_vaddf(&stmt, fmt, ap);
	va_end(ap);
	line(g, "%s t%u = %s;", ctype(kind), v.temp, stmt.buf);
	strbuf_release(&stmt);
	g->fallible |= fallible;
	return v;
}

/* Appends a C++ literal for x, exact: hexadecimal for a finite double, its bits otherwise. */
static void add_double(struct strbuf *sb, double x)
{
	if (isfinite(x)) {
		strbuf_addf(sb, signbit(x) ? "(%a)" : "%a", x);
	} else {
		uint64_t bits;
		memcpy(&bits, &x, sizeof(bits));
		strbuf_addf(sb, "kgpy_bits(0x%016llxULL)", (unsigned long long)bits);
	}
}

static void add_int(struct strbuf *sb, int64_t i)
{
	if (i == INT64_MIN)
		strbuf_addstr(sb, "KGPY_INT_MIN");
	else
		strbuf_addf(sb, "%lldLL", (long long)i);
}

/* The kind of a number; -1 for anything else. */
static int number_kind(const struct pyval *v)
{
	switch (v->kind) {
	case PY_BOOL: return CK_BOOL;
	case PY_INT: return CK_INT;
	case PY_FLOAT: return CK_FLOAT;
	default: return -1;
	}
}

/* Appends the number v as a C++ constant of kind, which holds it. */
static void add_constant(struct strbuf *sb, const struct pyval *v, enum ckind kind)
{
	if (kind == CK_VAL)
		strbuf_addstr(sb, v->kind == PY_FLOAT ? "kgpy_vfloat(" : v->kind == PY_BOOL ? "kgpy_vbool(" : "kgpy_vint(");
	if (v->kind == PY_FLOAT)
		add_double(sb, v->u.f);
	else if (kind == CK_FLOAT)
		add_double(sb, (double)v->u.i);
	else
		add_int(sb, v->u.i);
	if (kind == CK_VAL)
		strbuf_addch(sb, ')');
}

/* Refuses a value that is not a number, saying what it is. */
static int refuse_value(struct gen *g, size_t pos, const struct pyval *v)
{
	switch (v->kind) {
	case PY_STR: return refuse(g, pos, "strings are not supported on the GPU");
	case PY_LIST: return refuse(g, pos, "lists are not supported on the GPU");
	case PY_RANGE: return refuse(g, pos, "ranges are not supported on the GPU");
	default: return refuse(g, pos, "None is not supported on the GPU");
	}
}

static int constant(struct gen *g, size_t pos, const struct pyval *v, struct cval *out)
{
	int kind = number_kind(v);
	if (kind < 0)
		return refuse_value(g, pos, v);
	struct strbuf text;
	strbuf_init(&text);
	add_constant(&text, v, (enum ckind)kind);
	*out = declare(g, (enum ckind)kind, PURE, "%s", text.buf);
	strbuf_release(&text);
	return 0;
}

static int translate(struct gen *g, const struct node *n, struct cval *out);

/* Translates n into its own buffer, one level deeper, for a branch that runs only when
 * Python would evaluate it. */
static int translate_branch(struct gen *g, const struct node *n, struct strbuf *code, struct cval *out)
{
	struct strbuf *saved = g->out;
	g->out = code;
	g->indent++;
	int rc = translate(g, n, out);
	g->indent--;
	g->out = saved;
	return rc;
}

/* Emits "if (cond) { first; r = a; } else { second; r = b; }" with r declared before it:
 * the two sides of and, or and if-else, each translated into its own buffer. */
static struct cval choose(struct gen *g, const char *cond, const struct strbuf *first, struct cval a,
			  const struct strbuf *second, struct cval b)
{
	enum ckind kind = join(a.kind, b.kind);
	struct cval r = {.kind = kind, .temp = g->ntemps++};
	line(g, "%s t%u;", ctype(kind), r.temp);
	line(g, "if (%s) {", cond);
	strbuf_add(g->out, first->buf, first->len);
	line(g, "\tt%u = %s;", r.temp, as(kind, a).s);
	line(g, "} else {");
	strbuf_add(g->out, second->buf, second->len);
	line(g, "\tt%u = %s;", r.temp, as(kind, b).s);
	line(g, "}");
	return r;
}

/* x if c else y, and a and b and a or b, which are (b if a else a) and (a if a else b) with
 * a evaluated once: the condition, then only the side that it picks. */
static int translate_conditional(struct gen *g, const struct node *n, struct cval *out)
{
	const struct node *sides[2] = {
		n->kind == N_IFELSE ? n->kids[0] : n->kind == N_AND ? n->kids[1] : NULL,
		n->kind == N_IFELSE ? n->kids[2] : n->kind == N_OR ? n->kids[1] : NULL,
	};
	struct cval cond, value[2];
	struct strbuf code[2];
	strbuf_init(&code[0]);
	strbuf_init(&code[1]);
	int rc = translate(g, n->kind == N_IFELSE ? n->kids[1] : n->kids[0], &cond);
	for (int k = 0; k < 2 && rc == 0; k++) {
		/* and/or's own side is the condition's value, already computed. */
		value[k] = cond;
		if (sides[k])
			rc = translate_branch(g, sides[k], &code[k], &value[k]);
	}
	if (rc == 0)
		*out = choose(g, truth(cond).s, &code[0], value[0], &code[1], value[1]);
	strbuf_release(&code[0]);
	strbuf_release(&code[1]);
	return rc;
}

/* Each operator token: the prelude's name for it, and the C++ operator that computes it
 * where the operands' types allow (see translate_binary and comparison); NULL where none can. */
static const struct {
	int tok;
	const char *name;
	const char *cxx;
} operators[] = {
	{T_PLUS, "KGPY_ADD", "+"}, {T_MINUS, "KGPY_SUB", "-"}, {T_STAR, "KGPY_MUL", "*"},
	{T_SLASH, "KGPY_DIV", NULL}, {T_DSLASH, "KGPY_FLOORDIV", NULL}, {T_PERCENT, "KGPY_MOD", NULL},
	{T_DSTAR, "KGPY_POW", NULL}, {T_LSHIFT, "KGPY_LSHIFT", NULL}, {T_RSHIFT, "KGPY_RSHIFT", NULL},
	{T_AMP, "KGPY_AND", "&"}, {T_PIPE, "KGPY_OR", "|"}, {T_CARET, "KGPY_XOR", "^"},
	{T_LT, "KGPY_LT", "<"}, {T_LE, "KGPY_LE", "<="}, {T_GT, "KGPY_GT", ">"}, {T_GE, "KGPY_GE", ">="},
	{T_EQ, "KGPY_EQ", "=="}, {T_NE, "KGPY_NE", "!="},
};

static size_t operator_index(int tok)
{
	size_t k = 0;
	while (k + 1 < ARRAY_SIZE(operators) && operators[k].tok != tok)
		k++;
	return k;
}

/* C++ for "a op b" (a comparison token): the C++ operator where both sides have one
 * numeric type (NaN is unordered and unequal there, as in Python), else kgpy_compare,
 * which compares an int with a float exactly. */
static void comparison(struct strbuf *sb, int op, struct cval a, struct cval b)
{
	if ((is_intlike_kind(a.kind) && is_intlike_kind(b.kind)) || (a.kind == CK_FLOAT && b.kind == CK_FLOAT))
		strbuf_addf(sb, "t%u %s t%u", a.temp, operators[operator_index(op)].cxx, b.temp);
	else
		strbuf_addf(sb, "kgpy_compare(%s, %s, %s)", operators[operator_index(op)].name, as(CK_VAL, a).s,
			    as(CK_VAL, b).s);
}

/* a < b < c: each link only while the ones before hold, each operand evaluated once. */
static int translate_compare(struct gen *g, const struct node *n, struct cval *out)
{
	for (size_t k = 0; k + 1 < n->nkids; k++)
		if (n->ops[k] == T_IN || n->ops[k] == T_NOT_IN)
			return refuse(g, n->pos, "'in' is not supported on the GPU");
	struct cval left, right;
	if (translate(g, n->kids[0], &left))
		return -1;
	struct cval r = {.kind = CK_BOOL, .temp = g->ntemps++};
	line(g, "long long t%u = 0;", r.temp);
	int opened = 0, rc = 0;
	struct strbuf test;
	strbuf_init(&test);
	for (size_t k = 1; k < n->nkids && rc == 0; k++) {
		if (k > 1) {
			line(g, "if (t%u) {", r.temp);
			g->indent++;
			opened++;
		}
		rc = translate(g, n->kids[k], &right);
		if (rc == 0) {
			strbuf_reset(&test);
			comparison(&test, n->ops[k - 1], left, right);
			line(g, "t%u = %s;", r.temp, test.buf);
			left = right;
		}
	}
	while (opened-- > 0) {
		g->indent--;
		line(g, "}");
	}
	strbuf_release(&test);
	*out = r;
	return rc;
}

/* Whether n is an int constant (a literal or a folded global) that is not negative. */
static int is_natural_constant(const struct gen *g, const struct node *n)
{
	const struct pyval *v = n->kind == N_CONST ? &n->value
			      : n->kind == N_GLOBAL && n->slot != g->index_slot ? &g->globals[n->slot]
										 : NULL;
	return v && (v->kind == PY_INT || v->kind == PY_BOOL) && v->u.i >= 0;
}

/* binary: by the operands' kinds, the int or float helper, or kgpy_binary for a kgpy_val. */
static int translate_binary(struct gen *g, const struct node *n, struct cval *out)
{
	struct cval a, b;
	if (translate(g, n->kids[0], &a) || translate(g, n->kids[1], &b))
		return -1;
	const char *op = operators[operator_index(n->op)].name, *cxx = operators[operator_index(n->op)].cxx;
	int bitwise = n->op == T_AMP || n->op == T_PIPE || n->op == T_CARET;
	if (a.kind == CK_VAL || b.kind == CK_VAL) {
		*out = declare(g, CK_VAL, FALLIBLE, "kgpy_binary(%s, %s, %s, &f)", op, as(CK_VAL, a).s, as(CK_VAL, b).s);
	} else if (!is_intlike_kind(a.kind) || !is_intlike_kind(b.kind)) {
		/* + - * of floats cannot fail; & | ^ of a float is a TypeError, which kgpy_float_op reports. */
		if (cxx && !bitwise)
			*out = declare(g, CK_FLOAT, PURE, "%s %s %s", as(CK_FLOAT, a).s, cxx, as(CK_FLOAT, b).s);
		else
			*out = declare(g, CK_FLOAT, FALLIBLE, "kgpy_float_op(%s, %s, %s, &f)", op, as(CK_FLOAT, a).s,
				       as(CK_FLOAT, b).s);
	} else if (bitwise) {
		/* Two bools give a bool, as in Python. */
		*out = declare(g, a.kind == CK_BOOL && b.kind == CK_BOOL ? CK_BOOL : CK_INT, PURE, "t%u %s t%u", a.temp,
			       cxx, b.temp);
	} else if (n->op == T_SLASH) {
		*out = declare(g, CK_FLOAT, FALLIBLE, "kgpy_truediv_ii(t%u, t%u, &f)", a.temp, b.temp);
	} else if (n->op == T_DSTAR && is_natural_constant(g, n->kids[1])) {
		*out = declare(g, CK_INT, FALLIBLE, "kgpy_ipow(t%u, t%u, &f)", a.temp, b.temp);
	} else if (n->op == T_DSTAR) {
		/* An int, or a float for a negative exponent: known only at run time. */
		*out = declare(g, CK_VAL, FALLIBLE, "kgpy_pow_ii(t%u, t%u, &f)", a.temp, b.temp);
	} else {
		*out = declare(g, CK_INT, FALLIBLE, "kgpy_int_op(%s, t%u, t%u, &f)", op, a.temp, b.temp);
	}
	return 0;
}

static int translate_unary(struct gen *g, const struct node *n, struct cval *out)
{
	struct cval a;
	if (translate(g, n->kids[0], &a))
		return -1;
	if (n->op == T_NOT) {
		*out = declare(g, CK_BOOL, PURE, "!(%s)", truth(a).s);
	} else if (a.kind == CK_VAL || (a.kind == CK_FLOAT && n->op == T_TILDE)) {
		/* ~ of a float is a TypeError, which kgpy_unary reports. */
		const char *op = n->op == T_MINUS ? "KGPY_NEG" : n->op == T_PLUS ? "KGPY_POS" : "KGPY_INVERT";
		*out = declare(g, CK_VAL, FALLIBLE, "kgpy_unary(%s, %s, &f)", op, as(CK_VAL, a).s);
	} else if (a.kind == CK_FLOAT) {
		*out = declare(g, CK_FLOAT, PURE, "%st%u", n->op == T_MINUS ? "-" : "", a.temp);
	} else if (n->op == T_MINUS) {
		*out = declare(g, CK_INT, FALLIBLE, "kgpy_sub(0, t%u, &f)", a.temp);
	} else {
		*out = declare(g, CK_INT, PURE, "%st%u", n->op == T_TILDE ? "~" : "", a.temp);
	}
	return 0;
}

/* min and max of two or more numbers: the first of equal extremes, as Python keeps it. */
static int translate_extreme(struct gen *g, const struct node *n, struct cval *out)
{
	if (n->nkids < 2)
		return refuse(g, n->pos, n->op == B_MIN ? "min() of a list is not supported on the GPU; pass two or more numbers"
						       : "max() of a list is not supported on the GPU; pass two or more numbers");
	struct cval *args = xcalloc(n->nkids, sizeof(*args));
	int rc = 0;
	enum ckind kind = CK_BOOL;
	for (size_t k = 0; k < n->nkids && rc == 0; k++) {
		rc = translate(g, n->kids[k], &args[k]);
		kind = k == 0 ? args[k].kind : join(kind, args[k].kind);
	}
	if (rc == 0) {
		struct cval r = declare(g, kind, PURE, "%s", as(kind, args[0]).s);
		struct strbuf test;
		strbuf_init(&test);
		for (size_t k = 1; k < n->nkids; k++) {
			strbuf_reset(&test);
			struct cval item = args[k];
			if (item.kind != kind)
				item = declare(g, kind, PURE, "%s", as(kind, item).s);
			comparison(&test, n->op == B_MIN ? T_LT : T_GT, item, r);
			line(g, "if (%s)", test.buf);
			line(g, "\tt%u = t%u;", r.temp, item.temp);
		}
		strbuf_release(&test);
		*out = r;
	}
	free(args);
	return rc;
}

static int translate_call(struct gen *g, const struct node *n, struct cval *out)
{
	struct cval a = {.kind = CK_INT};
	switch ((enum builtin)n->op) {
	case B_MIN:
	case B_MAX: return translate_extreme(g, n, out);
	case B_RANGE: return refuse(g, n->pos, "range() is not supported on the GPU");
	case B_LIST: return refuse(g, n->pos, "list() is not supported on the GPU");
	case B_LEN: return refuse(g, n->pos, "len() is not supported on the GPU");
	case B_ABS:
	case B_INT:
	case B_FLOAT: break;
	}
	if (n->nkids == 0) {
		*out = declare(g, n->op == B_FLOAT ? CK_FLOAT : CK_INT, PURE, n->op == B_FLOAT ? "0.0" : "0LL");
		return 0;
	}
	if (translate(g, n->kids[0], &a))
		return -1;
	if (n->op == B_FLOAT)
		*out = declare(g, CK_FLOAT, PURE, "%s", as(CK_FLOAT, a).s);
	else if (n->op == B_INT && is_intlike_kind(a.kind))
		*out = declare(g, CK_INT, PURE, "t%u", a.temp);
	else if (n->op == B_INT)
		*out = declare(g, CK_INT, FALLIBLE, "kgpy_int%s(t%u, &f)", a.kind == CK_FLOAT ? "_f" : "", a.temp);
	else if (a.kind == CK_FLOAT)
		*out = declare(g, CK_FLOAT, PURE, "fabs(t%u)", a.temp);
	else
		*out = declare(g, a.kind == CK_VAL ? CK_VAL : CK_INT, FALLIBLE, "kgpy_abs%s(t%u, &f)",
			       a.kind == CK_VAL ? "" : "_i", a.temp);
	return 0;
}

/* list[index] for a list global: the index checked, then a switch over the folded items. */
static int translate_index(struct gen *g, const struct node *n, struct cval *out)
{
	const struct node *seq = n->kids[0];
	if (seq->kind != N_GLOBAL || seq->slot == g->index_slot || g->globals[seq->slot].kind != PY_LIST) {
		struct cval ignored;
		if (translate(g, seq, &ignored))
			return -1;
		return refuse(g, n->pos, "only lists can be indexed on the GPU");
	}
	const struct pylist *list = g->globals[seq->slot].u.list;
	if (list->len > MAX_LIST_ITEMS)
		return refuse(g, seq->pos, "lists of more than " MAX_LIST_ITEMS_TEXT " items are not supported on the GPU");
	enum ckind kind = CK_INT;
	for (size_t k = 0; k < list->len; k++) {
		int item = number_kind(&list->items[k]);
		if (item < 0)
			return refuse(g, seq->pos, "lists of anything but numbers are not supported on the GPU");
		kind = k == 0 ? (enum ckind)item : join(kind, (enum ckind)item);
	}
	struct cval index, at;
	if (translate(g, n->kids[1], &index))
		return -1;
	/* A float index is a TypeError, which kgpy_index_v reports. */
	if (is_intlike_kind(index.kind))
		at = declare(g, CK_INT, FALLIBLE, "kgpy_index(t%u, %zuLL, &f)", index.temp, list->len);
	else
		at = declare(g, CK_INT, FALLIBLE, "kgpy_index_v(%s, %zuLL, &f)", as(CK_VAL, index).s, list->len);
	if (list->len == 0) {
		/* Not reached: no index is in range. */
		*out = declare(g, CK_INT, PURE, "t%u", at.temp);
		return 0;
	}
	struct cval r = {.kind = kind, .temp = g->ntemps++};
	line(g, "%s t%u;", ctype(kind), r.temp);
	line(g, "switch (t%u) {", at.temp);
	struct strbuf item;
	strbuf_init(&item);
	for (size_t k = 0; k < list->len; k++) {
		strbuf_reset(&item);
		add_constant(&item, &list->items[k], kind);
		if (k + 1 < list->len)
			line(g, "case %zu: t%u = %s; break;", k, r.temp, item.buf);
		else
			line(g, "default: t%u = %s; break;", r.temp, item.buf);
	}
	strbuf_release(&item);
	line(g, "}");
	*out = r;
	return 0;
}

static int translate(struct gen *g, const struct node *n, struct cval *out)
{
	switch (n->kind) {
	case N_CONST: return constant(g, n->pos, &n->value, out);
	case N_GLOBAL:
		if (n->slot == g->index_slot) {
			g->reads_index = 1;
			*out = declare(g, CK_INT, PURE, "i");
			return 0;
		}
		return constant(g, n->pos, &g->globals[n->slot], out);
	case N_UNARY: return translate_unary(g, n, out);
	case N_BINARY: return translate_binary(g, n, out);
	case N_AND:
	case N_OR:
	case N_IFELSE: return translate_conditional(g, n, out);
	case N_COMPARE: return translate_compare(g, n, out);
	case N_CALL: return translate_call(g, n, out);
	case N_INDEX: return translate_index(g, n, out);
	case N_LIST: return refuse(g, n->pos, "lists are not supported on the GPU");
	case N_LOCAL:
	case N_COMPREHENSION: return refuse(g, n->pos, "list comprehensions are not supported on the GPU");
	case N_NAME: break;
	}
	return refuse(g, n->pos, "internal error: unresolved name");
}

int pyexpr_cuda_function(const struct pyexpr *e, const char *name, size_t index_slot,
			 const struct pyval *globals, struct strbuf *out, struct pyexpr_error *err)
{
	struct strbuf body;
	strbuf_init(&body);
	struct gen g = {.globals = globals, .index_slot = index_slot, .out = &body, .err = err, .indent = 1};
	struct cval result;
	int rc = translate(&g, e->root, &result);
	if (rc == 0) {
		/* The source, in a comment that no valid expression without strings can end. */
		if (!strstr(e->source, "*/") && !strstr(e->source, "/*"))
			strbuf_addf(out, "/* %s */\n", e->source);
		strbuf_addf(out, "__device__ double %s(long long i, int *failed)\n{\n", name);
		if (g.fallible)
			strbuf_addstr(out, "\tint f = 0;\n");
		else
			strbuf_addstr(out, "\t(void)failed;\n");
		if (!g.reads_index)
			strbuf_addstr(out, "\t(void)i;\n");
		strbuf_add(out, body.buf, body.len);
		if (g.fallible)
			strbuf_addstr(out, "\tif (f) {\n\t\t*failed = 1;\n\t\treturn 0;\n\t}\n");
		strbuf_addf(out, "\treturn %s;\n}\n", as(CK_FLOAT, result).s);
	}
	strbuf_release(&body);
	return rc;
}
