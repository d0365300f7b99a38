/* log.h: the one error reporter and logger of every kg-* tool.
 * Every line goes to stderr as "kg-NAME: message"; data never goes through here. */
#ifndef KG_LOG_H
#define KG_LOG_H

#include "common.h"

#include <stdarg.h>

/* Message levels, from always shown to shown only with -vv. */
enum log_level {
	LOG_ERROR = 0, /* shown even with --quiet */
	LOG_WARN = 1,  /* the default level */
	LOG_INFO = 2,  /* -v */
	LOG_DEBUG = 3, /* -vv */
};

/* The current level; read it through log_enabled(), set it with the functions below. */
extern enum log_level log_current_level;

/* Sets the program name that prefixes every message ("kg-propose"). The string is borrowed
 * and must outlive all logging; a program name is usually a literal. */
void log_init(const char *program);
const char *log_program(void);

/* --quiet shows errors only; each -v shows one level more. */
void log_quieter(void);
void log_louder(void);

#define log_enabled(level) (log_current_level >= (level))

/* Each prints "kg-NAME: message\n" on stderr. A format that ends in ':' gets
 * " strerror(errno)" appended, so "cannot open '%s':" reads "cannot open 'x': No such file".
 * log_error returns -1 so that "return log_error(...);" reports and fails in one statement. */
int log_error(const char *fmt, ...) PRINTF_LIKE(1, 2);
void log_warn(const char *fmt, ...) PRINTF_LIKE(1, 2);
void log_info_(const char *fmt, ...) PRINTF_LIKE(1, 2);
void log_debug_(const char *fmt, ...) PRINTF_LIKE(1, 2);
NORETURN void log_die(int status, const char *fmt, ...) PRINTF_LIKE(2, 3);
/* "kg-NAME: FILE:LINE: message", for a record that cannot be handled; returns -1. */
int log_at(const char *file, long line, const char *fmt, ...) PRINTF_LIKE(3, 4);
/* log_at for a caller that takes the arguments itself (lib/stream's report_record). */
int log_vat(const char *file, long line, const char *fmt, va_list ap) PRINTF_LIKE(3, 0);

/* info and debug check the level before their arguments are evaluated. */
#define log_info(...) do { if (log_enabled(LOG_INFO)) log_info_(__VA_ARGS__); } while (0)
#define log_debug(...) do { if (log_enabled(LOG_DEBUG)) log_debug_(__VA_ARGS__); } while (0)
/* What the user asked to be told (a --dry-run's report of what it would write): shown at
 * the default level as a warning is, but not called one, and silenced by --quiet. */
#define log_notice(...) do { if (log_enabled(LOG_WARN)) log_info_(__VA_ARGS__); } while (0)

#endif
