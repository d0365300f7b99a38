/* parse.c: strtoll/strtoull/strtod wrapped with the checks they leave to the caller.
 * errno, the end pointer and the range are all checked before a value is stored. */
#include "common.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "parse.h"

static int starts_badly(const char *text)
{
	return text[0] == '\0' || isspace((unsigned char)text[0]);
}

const char *parse_int64(const char *text, int64_t min, int64_t max, int64_t *out)
{
	char *end;
	if (starts_badly(text))
		return "not an integer";
	errno = 0;
	long long v = strtoll(text, &end, 10);
	if (*end != '\0')
		return "not an integer";
	if (errno == ERANGE || v < min || v > max)
		return "out of range";
	*out = v;
	return NULL;
}

const char *parse_uint64(const char *text, uint64_t max, uint64_t *out)
{
	char *end;
	/* strtoull accepts "-1" and wraps it; a minus sign is refused before it can. */
	if (starts_badly(text) || text[0] == '-')
		return "not a non-negative integer";
	errno = 0;
	unsigned long long v = strtoull(text, &end, 10);
	if (*end != '\0')
		return "not a non-negative integer";
	if (errno == ERANGE || v > max)
		return "out of range";
	*out = v;
	return NULL;
}

const char *parse_double(const char *text, double min, double max, double *out)
{
	char *end;
	if (starts_badly(text))
		return "not a number";
	errno = 0;
	double v = strtod(text, &end);
	if (*end != '\0')
		return "not a number";
	if (!isfinite(v) || (errno == ERANGE && fabs(v) > 1.0))
		return "not a finite number";
	if (v < min || v > max)
		return "out of range";
	*out = v;
	return NULL;
}

size_t shortest_digits(double x, char digits[18], long *decpt)
{
	char buf[40];
	for (int precision = 0; precision < 17; precision++) {
		snprintf(buf, sizeof(buf), "%.*e", precision, x);
		if (strtod(buf, NULL) == x)
			break;
	}
	/* buf is "[-]d[.ddd]e[+-]xx": the digits, then the exponent */
	const char *p = buf + (buf[0] == '-');
	size_t n = 0;
	for (; *p && *p != 'e'; p++)
		if (*p != '.')
			digits[n++] = *p;
	while (n > 1 && digits[n - 1] == '0')
		n--;
	digits[n] = '\0';
	*decpt = strtol(p + 1, NULL, 10) + 1;
	return n;
}
