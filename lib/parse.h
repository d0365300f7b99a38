/* parse.h: checked conversion of option and field text into numbers.
 * No atoi/strtol without checks: trailing junk, overflow and empty text are all refused. */
#ifndef KG_PARSE_H
#define KG_PARSE_H

#include "common.h"

#include <stdint.h>

/* Each parses the whole of text (surrounding blanks refused), stores the value in *out and
 * returns NULL; on failure it leaves *out alone and returns a static reason that reads well
 * after "'text': " ("not an integer", "out of range [1, 64]" is the caller's to add). */
const char *parse_int64(const char *text, int64_t min, int64_t max, int64_t *out);
const char *parse_uint64(const char *text, uint64_t max, uint64_t *out);
/* Finite decimal or hexadecimal floating-point numbers only; "nan" and "inf" are refused. */
const char *parse_double(const char *text, double min, double max, double *out);

/* The other way: the shortest decimal digits that read back as x (finite, not 0; its sign is
 * the caller's), without trailing zeros, into digits (NUL-terminated), with *decpt where the
 * decimal point goes: x = 0.d1d2... x 10^decpt. Returns how many digits (at most 17). The
 * printers of Python's repr (pyexpr) and of jq's numbers (kg-select --draw) lay them out. */
size_t shortest_digits(double x, char digits[18], long *decpt);

#endif
