/* ptx_lines.h: source correlation of a PTX text compiled with -lineinfo: the kernel line each
 * PTX line comes from (its ".loc" directives), and back, the PTX lines of a range of kernel lines. */
#ifndef KG_PTX_LINES_H
#define KG_PTX_LINES_H

#include "common.h"

#include <stddef.h>

/* The map of one PTX text. Only the ".file" whose path is the kernel file (or ends in "/" and
 * its name) counts: a line from any other file (a header) counts as the kernel line it was
 * inlined at ("inlined_at FILE LINE COL"), and keeps the kernel line of the ".loc" before it
 * when it was inlined deeper. A line outside every function's braces has no kernel line, so
 * one function's last ".loc" never reaches into the next. */
struct ptx_lines {
	int *source;	     /* source[i]: the kernel line of PTX line i + 1; 0 when none */
	unsigned char *code; /* code[i]: PTX line i + 1 holds an instruction or a label */
	size_t n;	     /* PTX lines (a last line without "\n" counts) */
	long file;	     /* the ".file" number of the kernel; 0 when the PTX names none */
};

/* Maps the PTX text ptx; kernel_file is the kernel's name ("kernel.cu"). Never fails (a PTX
 * without line info maps every line to 0); ptx_lines_release frees it. */
void ptx_lines_init(struct ptx_lines *m, const char *ptx, const char *kernel_file);
void ptx_lines_release(struct ptx_lines *m);

/* The kernel line of PTX line ptx_line (from 1): 0 when it has none or there is no such line. */
int ptx_lines_source(const struct ptx_lines *m, size_t ptx_line);

/* The PTX lines (from 1, ascending) holding an instruction or label whose kernel line is in
 * [first, last], into *lines (the caller frees it; NULL when none). Returns how many. */
size_t ptx_lines_of_source(const struct ptx_lines *m, int first, int last, size_t **lines);

#endif
