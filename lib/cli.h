/* cli.h: what every kg-* main() does the same way: option errors, --version, and the
 * final check of stdout that turns a failed write into exit code 4. */
#ifndef KG_CLI_H
#define KG_CLI_H

#include "common.h"

/* Prints "kg-NAME: message" and "Try 'kg-NAME --help' for more information." on stderr
 * and exits with KG_EXIT_USAGE. */
NORETURN void cli_usage_error(const char *fmt, ...) PRINTF_LIKE(1, 2);

/* Reports what getopt_long returned for a bad option ('?' unknown, ':' missing argument;
 * the option string must start with ':') and exits with KG_EXIT_USAGE. */
NORETURN void cli_option_error(int opt, char *const argv[]);

/* Prints "kg-NAME (kernelgraph) VERSION" on stdout. */
void cli_print_version(void);

/* Flushes stdout, for a record that should go out now; a failure is remembered for
 * cli_finish to report. Returns 0, or -1 with errno set. */
int cli_flush(void);

/* Flushes and closes stdout. Returns status, or KG_EXIT_IO after reporting the error when
 * the output could not be written (a full disk, a closed pipe). */
int cli_finish(int status);

#endif
