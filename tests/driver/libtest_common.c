/* libtest_common.c: what kg-libtest's subcommands share: the usage message, and the --let
 * bindings of the expression commands (expr, cuda). */
#include "common.h"

#include <stdio.h>
#include <string.h>

#include "libtest.h"
#include "log.h"
#include "pyexpr.h"

int libtest_usage(void)
{
	fputs("usage: kg-libtest expr [--let NAME=EXPR]... < lines\n"
	      "       kg-libtest bottleneck METRICS.json [BUILD-RECORD.json]\n"
	      "       kg-libtest jsonl FILE|- [ERROR-KEY]\n"
	      "       kg-libtest events RUN from OFFSET | last N | append < records\n"
	      "       kg-libtest exit-status STATUS...\n"
	      "       kg-libtest json FILE\n"
	      "       kg-libtest number KEY [NEW] < records\n"
	      "       kg-libtest sha256 FILE|-\n"
	      "       kg-libtest atomic-write PATH < data\n"
	      "       kg-libtest lock [--nowait] DIR CMD [ARG]...\n"
	      "       kg-libtest write write|append|tail|atomic PATH < data\n"
	      "       kg-libtest gpu-lock SYSTEM-DIR BUS-ID WAIT-SEC CMD [ARG]...\n"
	      "       kg-libtest gpu-lock-path BUS-ID\n"
	      "       kg-libtest parse int64|uint64|double TEXT MIN MAX\n"
	      "       kg-libtest t4 PATH < results.jsonl\n"
	      "       kg-libtest t1-count SPEC LIMIT\n"
	      "       kg-libtest kargs SPEC [INPUT-SET]\n"
	      "       kg-libtest tensor-maps SPEC CONFIG-JSON\n"
	      "       kg-libtest compare TYPE ABS-TOL REL-TOL OUT-VALUES REF-VALUES\n"
	      "       kg-libtest half VALUE...\n"
	      "       kg-libtest philox C0 C1 C2 C3 K0 K1\n"
	      "       kg-libtest fill SPEC ARGUMENT SET\n"
	      "       kg-libtest harness ARCH\n"
	      "       kg-libtest gp FILE\n"
	      "       kg-libtest transfer Y H1 [H2...]\n"
	      "       kg-libtest mcgs T1|T1b|T2|T3|T4|T4c|T4d|T4e|T5|T7d|T8|T8b|T8c|T8d|widen\n"
	      "       kg-libtest ptx-regions FILE [ENTRY]\n"
	      "       kg-libtest ptx-lines FILE FIRST LAST\n"
	      "       kg-libtest method-terms NAME...\n"
	      "       kg-libtest cuda function|refuse|program|eval|nvrtc [--index NAME] [--let NAME=EXPR]... [EXPR|FILE|ARCH]\n",
	      stderr);
	return KG_EXIT_USAGE;
}

/* Binds names[*n], names[*n + 1], ... to the leading --let NAME=EXPR arguments, each EXPR
 * evaluated with the names before it; the values are copied into keep. Returns how many
 * arguments it took, or -1 for a malformed --let or too many names (at most max). */
int parse_lets(int argc, char **argv, const char **names, struct pyval *values, size_t *n, size_t max,
	       struct pyarena *keep)
{
	struct pyarena *scratch = pyarena_new();
	struct pyexpr_error err;
	int i;
	for (i = 0; i + 1 < argc && strcmp(argv[i], "--let") == 0; i += 2) {
		char *eq = strchr(argv[i + 1], '=');
		if (!eq || *n == max) {
			pyarena_free(scratch);
			return -1;
		}
		*eq = '\0';
		struct pyexpr *e = pyexpr_compile(eq + 1, names, *n, &err);
		struct pyval v;
		if (!e || pyexpr_eval(e, values, scratch, &v, &err))
			log_die(KG_EXIT_INPUT, "--let %s: %s", argv[i + 1], err.message);
		values[*n] = pyval_copy(keep, &v);
		names[(*n)++] = argv[i + 1];
		pyexpr_free(e);
	}
	pyarena_free(scratch);
	return i;
}
