/* log.c: "kg-NAME: message" lines on stderr, filtered by level.
 * Kept free of allocation so that it still works when memory has run out. */
#include "common.h"

#include <errno.h>
#include <stdarg.h>

#include "log.h"

enum log_level log_current_level = LOG_WARN;
static const char *program_name = "kg";

void log_init(const char *program)
{
	program_name = program;
}

const char *log_program(void)
{
	return program_name;
}

void log_quieter(void)
{
	log_current_level = LOG_ERROR;
}

void log_louder(void)
{
	if (log_current_level < LOG_DEBUG)
		log_current_level++;
}

static void vreport(const char *tag, const char *fmt, va_list ap)
{
	int saved_errno = errno;
	size_t n = strlen(fmt);

	/* One fprintf per piece can interleave with another process writing to the same
	 * stderr, so the line is assembled first and written with one call. */
	char line[4096];
	int used = snprintf(line, sizeof(line), "%s: %s", program_name, tag);
	if (used < 0)
		used = 0;
	if ((size_t)used < sizeof(line))
		vsnprintf(line + used, sizeof(line) - used, fmt, ap);
	if (n > 0 && fmt[n - 1] == ':') {
		size_t len = strlen(line);
		snprintf(line + len, sizeof(line) - len, " %s", strerror(saved_errno));
	}
	fprintf(stderr, "%s\n", line);
	errno = saved_errno;
}

int log_vat(const char *file, long line, const char *fmt, va_list ap)
{
	char tag[1024];
	snprintf(tag, sizeof(tag), "%s:%ld: ", file, line);
	vreport(tag, fmt, ap);
	return -1;
}

int log_at(const char *file, long line, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	log_vat(file, line, fmt, ap);
	va_end(ap);
	return -1;
}

int log_error(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vreport("", fmt, ap);
	va_end(ap);
	return -1;
}

void log_warn(const char *fmt, ...)
{
	va_list ap;
	if (!log_enabled(LOG_WARN))
		return;
	va_start(ap, fmt);
	vreport("warning: ", fmt, ap);
	va_end(ap);
}

void log_info_(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vreport("", fmt, ap);
	va_end(ap);
}

void log_debug_(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vreport("", fmt, ap);
	va_end(ap);
}

void log_die(int status, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vreport("", fmt, ap);
	va_end(ap);
	exit(status);
}
