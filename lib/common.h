/* common.h: the first include of every kernelgraph C file.
 * Feature-test macros, compiler attributes and the exit codes every tool shares (docs/design.md). */
#ifndef KG_COMMON_H
#define KG_COMMON_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1 /* getline, strnlen, mkostemp, O_DIRECTORY, ... */
#endif

#define NORETURN __attribute__((noreturn))
#define PRINTF_LIKE(fmt, args) __attribute__((format(printf, fmt, args)))
#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

/* Exit codes of every kg-* tool; docs/design.md "Exit statuses and errors" is the contract. */
enum kg_exit {
	KG_EXIT_OK = 0,	   /* every input record was handled */
	KG_EXIT_INPUT = 1, /* some input could not be handled; the rest was passed on */
	KG_EXIT_USAGE = 2, /* bad option or argument */
	KG_EXIT_ENV = 3,   /* the environment lacks what the tool needs (GPU, NVRTC, API key, memory) */
	KG_EXIT_IO = 4,	   /* an I/O error on input or output */
};

/* The most bytes a candidate's patch or source may have (README "Limits"): kg-propose drops
 * a larger one from an answer, kg-build fails it, so that no run stores or rereads it. */
#define KG_CANDIDATE_MAX_BYTES (1 << 20)

#include "banned.h"

#endif
