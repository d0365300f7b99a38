/* cli.c: shared pieces of option handling and the final stdout check.
 * Messages follow log.h: "kg-NAME: ..." on stderr, usage errors exit 2. */
#include "common.h"

#include <errno.h>
#include <getopt.h>
#include <stdarg.h>

#include "cli.h"
#include "log.h"

#ifndef KG_VERSION
#error "KG_VERSION must be defined by the build"
#endif

void cli_usage_error(const char *fmt, ...)
{
	char msg[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	log_error("%s", msg);
	fprintf(stderr, "Try '%s --help' for more information.\n", log_program());
	exit(KG_EXIT_USAGE);
}

void cli_option_error(int opt, char *const argv[])
{
	char name[128];
	const char *arg = optind > 0 ? argv[optind - 1] : "";
	if (strncmp(arg, "--", 2) == 0) {
		/* A long option: "--name" or "--name=value". */
		snprintf(name, sizeof(name), "%.*s", (int)strcspn(arg, "="), arg);
	} else {
		snprintf(name, sizeof(name), "-%c", optopt);
	}
	if (opt == ':')
		cli_usage_error("option '%s' needs an argument", name);
	cli_usage_error("unknown option '%s'", name);
}

void cli_print_version(void)
{
	printf("%s (kernelgraph) %s\n", log_program(), KG_VERSION);
}

/* The errno of the first failed cli_flush: the error flag outlives it, errno does not. */
static int flush_errno;

int cli_flush(void)
{
	if (fflush(stdout) == 0)
		return 0;
	if (!flush_errno)
		flush_errno = errno;
	return -1;
}

int cli_finish(int status)
{
	/* fclose alone can miss an error that an earlier buffered write already hit. */
	int failed = fflush(stdout) != 0;
	int saved_errno = errno;
	if (!failed && ferror(stdout)) {
		failed = 1;
		saved_errno = flush_errno ? flush_errno : errno ? errno : EIO; /* the last write's, mostly */
	}
	if (fclose(stdout) != 0 && !failed) {
		failed = 1;
		saved_errno = errno;
	}
	if (!failed)
		return status;
	errno = saved_errno;
	log_error("cannot write to standard output:");
	return KG_EXIT_IO;
}
