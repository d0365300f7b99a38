/* libtest.h: the subcommands of kg-libtest, the bats suites' driver of lib/, that live outside
 * libtest.c (its main and the file, JSON, spec and PTX subcommands); each returns an exit status. */
#ifndef KG_TESTS_LIBTEST_H
#define KG_TESTS_LIBTEST_H

#include "common.h"

#include <stddef.h>

#include "pyexpr.h"

/* libtest_common.c */
int libtest_usage(void);
int parse_lets(int argc, char **argv, const char **names, struct pyval *values, size_t *n, size_t max,
	       struct pyarena *keep);

/* libtest_cuda.c */
int cmd_expr(int argc, char **argv);
int cmd_transfer(int argc, char **argv);
int cmd_gp(const char *path);
int cmd_harness(const char *arch);
int cmd_cuda(int argc, char **argv);

/* libtest_mcgs.c */
int cmd_mcgs(const char *vector);

#endif
