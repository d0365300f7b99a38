/* karg_elem.h: the element-wise rules of kernel arguments (types, loads and stores, the
 * counter-based Random draw, the correctness test of one element), written once as plain
 * code that both the host (lib/kargs.c) and kg-bench's GPU harness (NVRTC) compile, so that
 * the device fills and checks exactly what the host would.
 *
 * Random data: element (lane) i of an argument with seed S in input set T takes the 64 bits
 * of Philox4x32-10 (Salmon et al., SC'11; the Random123 constants) at counter
 * (i / 2, T) and key S, words 2(i % 2) and 2(i % 2) + 1. It depends on nothing else, so
 * any element can be drawn alone, on any GPU or CPU, in any order. */
#ifndef KG_KARG_ELEM_H
#define KG_KARG_ELEM_H

#ifdef __CUDACC_RTC__
typedef unsigned char uint8_t;
typedef unsigned short uint16_t;
typedef unsigned int uint32_t;
typedef unsigned long long uint64_t;
typedef signed char int8_t;
typedef short int16_t;
typedef int int32_t;
typedef long long int64_t;
#define KARG_ELEM static __device__ __forceinline__
#define karg_elem_copy(dst, src, n) memcpy(dst, src, n)
#else
#include <math.h>
#include <stdint.h>
#include <string.h>
#define KARG_ELEM static inline
#define karg_elem_copy(dst, src, n) memcpy(dst, src, n)
#endif

/* The element types of T1 (vector types are lanes of these). */
enum karg_base {
	KARG_BOOL, KARG_I8, KARG_U8, KARG_I16, KARG_U16, KARG_I32, KARG_U32, KARG_I64, KARG_U64,
	KARG_F16, KARG_F32, KARG_F64, KARG_CUSTOM,
};

KARG_ELEM int karg_elem_is_float(int base)
{
	return base == KARG_F16 || base == KARG_F32 || base == KARG_F64;
}

/* IEEE half precision from a float, rounding to nearest even (as CPython's struct 'e'). */
KARG_ELEM uint16_t karg_elem_half_from_float(float f)
{
	uint32_t x;
	karg_elem_copy(&x, &f, sizeof(x));
	uint32_t sign = (x >> 16) & 0x8000u, exp = (x >> 23) & 0xffu, mant = x & 0x7fffffu;
	if (exp == 0xff) /* infinity, or NaN (kept quiet) */
		return (uint16_t)(sign | 0x7c00u | (mant ? 0x200u : 0));
	int e = (int)exp - 127 + 15;
	if (e >= 31)
		return (uint16_t)(sign | 0x7c00u);
	if (e <= 0) { /* subnormal or zero */
		if (e < -10)
			return (uint16_t)sign;
		mant |= 0x800000u;
		uint32_t shift = (uint32_t)(14 - e);
		uint32_t half = mant >> shift, rest = mant & ((1u << shift) - 1), mid = 1u << (shift - 1);
		if (rest > mid || (rest == mid && (half & 1)))
			half++;
		return (uint16_t)(sign | half);
	}
	uint32_t half = ((uint32_t)e << 10) | (mant >> 13), rest = mant & 0x1fffu;
	if (rest > 0x1000u || (rest == 0x1000u && (half & 1)))
		half++; /* may carry into the exponent, up to infinity: still correct */
	return (uint16_t)(sign | half);
}

KARG_ELEM float karg_elem_half_to_float(uint16_t h)
{
	uint32_t sign = (uint32_t)(h & 0x8000u) << 16, exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu, x;
	if (exp == 0x1f) {
		x = sign | 0x7f800000u | (mant << 13);
	} else if (exp == 0) {
		if (mant == 0) {
			x = sign;
		} else { /* subnormal: normalize */
			int e = -1;
			do {
				e++;
				mant <<= 1;
			} while (!(mant & 0x400u));
			x = sign | ((uint32_t)(127 - 15 - e) << 23) | ((mant & 0x3ffu) << 13);
		}
	} else {
		x = sign | ((exp + 127 - 15) << 23) | (mant << 13);
	}
	float f;
	karg_elem_copy(&f, &x, sizeof(f));
	return f;
}

/* A double converted to an integer type: truncated toward zero and saturated at the type's
 * limits (NaN gives 0), so that every value has one defined result on every machine. */
KARG_ELEM int64_t karg_elem_to_signed(double v, int64_t lo, int64_t hi)
{
	if (v != v)
		return 0;
	if (v <= (double)lo)
		return lo;
	if (v >= (double)hi)
		return hi;
	return (int64_t)v;
}

KARG_ELEM uint64_t karg_elem_to_unsigned(double v, uint64_t hi)
{
	if (v != v || v <= 0)
		return 0;
	if (v >= (double)hi)
		return hi;
	return (uint64_t)v;
}

/* Writes v as one lane of type base at p (a custom type's first byte takes v). */
KARG_ELEM void karg_elem_store(int base, unsigned char *p, double v)
{
	switch (base) {
	case KARG_BOOL: *p = v != 0; break;
	case KARG_I8: { int8_t x = (int8_t)karg_elem_to_signed(v, -128, 127); karg_elem_copy(p, &x, 1); break; }
	case KARG_U8: case KARG_CUSTOM: *p = (uint8_t)karg_elem_to_unsigned(v, 255); break;
	case KARG_I16: { int16_t x = (int16_t)karg_elem_to_signed(v, -32768, 32767); karg_elem_copy(p, &x, 2); break; }
	case KARG_U16: { uint16_t x = (uint16_t)karg_elem_to_unsigned(v, 65535); karg_elem_copy(p, &x, 2); break; }
	case KARG_I32: {
		int32_t x = (int32_t)karg_elem_to_signed(v, -2147483647 - 1, 2147483647);
		karg_elem_copy(p, &x, 4);
		break;
	}
	case KARG_U32: { uint32_t x = (uint32_t)karg_elem_to_unsigned(v, 4294967295u); karg_elem_copy(p, &x, 4); break; }
	case KARG_I64: {
		/* (double)INT64_MAX rounds up to 2**63: saturate before converting. */
		int64_t x = v != v ? 0 : v >= 9223372036854775808.0 ? (int64_t)0x7fffffffffffffffll
			  : v < -9223372036854775808.0 ? (int64_t)(-0x7fffffffffffffffll - 1) : (int64_t)v;
		karg_elem_copy(p, &x, 8);
		break;
	}
	case KARG_U64: {
		uint64_t x = v != v || v <= 0 ? 0 : v >= 18446744073709551616.0 ? ~0ull : (uint64_t)v;
		karg_elem_copy(p, &x, 8);
		break;
	}
	case KARG_F16: { uint16_t x = karg_elem_half_from_float((float)v); karg_elem_copy(p, &x, 2); break; }
	case KARG_F32: { float x = (float)v; karg_elem_copy(p, &x, 4); break; }
	case KARG_F64: karg_elem_copy(p, &v, 8); break;
	}
}

/* One lane of type base at p, as a double (64-bit integers beyond 2**53 rounded). */
KARG_ELEM double karg_elem_load(int base, const unsigned char *p)
{
	switch (base) {
	case KARG_BOOL: return *p != 0;
	case KARG_I8: { int8_t x; karg_elem_copy(&x, p, 1); return x; }
	case KARG_U8: case KARG_CUSTOM: return *p;
	case KARG_I16: { int16_t x; karg_elem_copy(&x, p, 2); return x; }
	case KARG_U16: { uint16_t x; karg_elem_copy(&x, p, 2); return x; }
	case KARG_I32: { int32_t x; karg_elem_copy(&x, p, 4); return x; }
	case KARG_U32: { uint32_t x; karg_elem_copy(&x, p, 4); return x; }
	case KARG_I64: { int64_t x; karg_elem_copy(&x, p, 8); return (double)x; }
	case KARG_U64: { uint64_t x; karg_elem_copy(&x, p, 8); return (double)x; }
	case KARG_F16: { uint16_t x; karg_elem_copy(&x, p, 2); return karg_elem_half_to_float(x); }
	case KARG_F32: { float x; karg_elem_copy(&x, p, 4); return x; }
	case KARG_F64: { double x; karg_elem_copy(&x, p, 8); return x; }
	}
	return 0;
}

/* ---------------------------------------------------------------- Random */

KARG_ELEM uint32_t karg_elem_mulhilo(uint32_t a, uint32_t b, uint32_t *hi)
{
	uint64_t product = (uint64_t)a * b;
	*hi = (uint32_t)(product >> 32);
	return (uint32_t)product;
}

/* Philox4x32 with 10 rounds: out = philox(counter c, key k). */
KARG_ELEM void karg_elem_philox(const uint32_t c[4], const uint32_t k[2], uint32_t out[4])
{
	uint32_t x0 = c[0], x1 = c[1], x2 = c[2], x3 = c[3], k0 = k[0], k1 = k[1];
	for (int round = 0; round < 10; round++) {
		uint32_t hi0, hi1;
		uint32_t lo0 = karg_elem_mulhilo(0xD2511F53u, x0, &hi0);
		uint32_t lo1 = karg_elem_mulhilo(0xCD9E8D57u, x2, &hi1);
		x0 = hi1 ^ x1 ^ k0;
		x1 = lo1;
		x2 = hi0 ^ x3 ^ k1;
		x3 = lo0;
		k0 += 0x9E3779B9u;
		k1 += 0xBB67AE85u;
	}
	out[0] = x0;
	out[1] = x1;
	out[2] = x2;
	out[3] = x3;
}

/* The 64 random bits of lane i of an argument seeded seed, in input set set. */
KARG_ELEM uint64_t karg_elem_random_bits(uint64_t seed, uint64_t set, uint64_t i)
{
	uint64_t block = i >> 1;
	uint32_t c[4] = {(uint32_t)block, (uint32_t)(block >> 32), (uint32_t)set, (uint32_t)(set >> 32)};
	uint32_t k[2] = {(uint32_t)seed, (uint32_t)(seed >> 32)}, out[4];
	karg_elem_philox(c, k, out);
	return (i & 1) ? (uint64_t)out[2] | (uint64_t)out[3] << 32 : (uint64_t)out[0] | (uint64_t)out[1] << 32;
}

/* Stores a Random lane drawn from bits: floats uniform in [-range, range), integers uniform
 * in [0, range] (stored modulo the type's width), booleans 0 or 1. */
KARG_ELEM void karg_elem_store_random(int base, unsigned char *p, uint64_t bits, double range)
{
	if (karg_elem_is_float(base)) {
		double u = (double)(bits >> 11) * (1.0 / 9007199254740992.0); /* exact: 53 bits */
		karg_elem_store(base, p, (2.0 * u - 1.0) * range);
		return;
	}
	if (base == KARG_BOOL) {
		*p = (uint8_t)(bits & 1);
		return;
	}
	uint64_t top = karg_elem_to_unsigned(range, ~0ull), r = top == ~0ull ? bits : bits % (top + 1);
	switch (base) {
	case KARG_I8: case KARG_U8: case KARG_CUSTOM: *p = (uint8_t)r; break;
	case KARG_I16: case KARG_U16: { uint16_t x = (uint16_t)r; karg_elem_copy(p, &x, 2); break; }
	case KARG_I32: case KARG_U32: { uint32_t x = (uint32_t)r; karg_elem_copy(p, &x, 4); break; }
	default: karg_elem_copy(p, &r, 8); break;
	}
}

/* ---------------------------------------------------------------- checking */

/* The byte an output is filled with before a checked launch, so that an element the kernel
 * never writes fails: all ones is a NaN in every IEEE format; 0xA5 for the others. */
KARG_ELEM unsigned char karg_elem_poison_byte(int base)
{
	return karg_elem_is_float(base) ? 0xFF : 0xA5;
}

/* Whether lane out passes against lane ref of type base: floating-point lanes when
 * |out - ref| <= abs_tol + rel_tol |ref| (a NaN or infinity where the reference is finite fails;
 * where the reference is NaN the output must be NaN too; an infinite reference must be
 * matched exactly; the tolerances are abs_tol and rel_tol), integers bit for bit. *err gets |out - ref| (NaN or infinite for
 * non-finite lanes) and *ref_abs |ref|. */
KARG_ELEM int karg_elem_check(int base, const unsigned char *out, const unsigned char *ref, double abs_tol,
			      double rel_tol, double *err, double *ref_abs)
{
	double x = karg_elem_load(base, out), y = karg_elem_load(base, ref);
	*err = fabs(x - y);
	*ref_abs = fabs(y);
	if (!karg_elem_is_float(base)) {
		if (base == KARG_I64 || base == KARG_U64) {
			uint64_t a, b;
			karg_elem_copy(&a, out, 8);
			karg_elem_copy(&b, ref, 8);
			return a == b;
		}
		return x == y;
	}
	if (y != y)
		return x != x; /* the baseline made a NaN here: so may the candidate */
	if (y - y != 0)
		return x == y; /* an infinite reference */
	return x - x == 0 && *err <= abs_tol + rel_tol * *ref_abs;
}

#endif
