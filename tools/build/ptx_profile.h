/* ptx_profile.h: static instruction counts of a PTX module, the symptoms a performance
 * engineer reads first (vector widths, async copies, tensor-core instructions, barriers). */
#ifndef KG_BUILD_PTX_PROFILE_H
#define KG_BUILD_PTX_PROFILE_H

#include "common.h"

#include <cjson/cJSON.h>

/* Counts instructions in the PTX text, each once however often it executes:
 *   {"instructions", "global_loads": {"scalar","v2","v4","v8"}, "global_stores": {...},
 *    "shared_loads": {...}, "shared_stores": {...}, "ldmatrix", "cp_async", "bulk_copies",
 *    "mma", "wgmma", "barriers", "branches", "loops", "fma", "flop_instructions",
 *    "atomics", "shuffles"}
 * "loops" counts backward branches; "flop_instructions" floating-point arithmetic
 * instructions of any width (an fma counts once). The caller frees it with cJSON_Delete. */
cJSON *ptx_profile(const char *ptx);

/* What ptx_split_line found on a line of PTX. */
enum ptx_line_kind {
	PTX_OTHER,	 /* blank, a comment, a directive (".loc", ".reg", ...), a brace */
	PTX_LABEL,	 /* "NAME:" */
	PTX_INSTRUCTION, /* "[@%p] opcode operands;" */
};

struct ptx_line {
	enum ptx_line_kind kind;
	char *text;	/* the label's name or the opcode, NUL-terminated; else the line past its blanks */
	char *operands; /* an instruction's operands, up to the end of the line */
	int guarded;	/* an instruction under a "@%p" or "@!%p" guard */
};

/* Splits one line of PTX (no newline) in place: its "//" comment is cut off and the label or
 * opcode NUL-terminated, so out points into line. Returns out->kind. */
enum ptx_line_kind ptx_split_line(char *line, struct ptx_line *out);

/* Whether the opcode has the dotted part part (".v4" matches "ld.global.v4.f32", not ".v4x"). */
int ptx_has_part(const char *opcode, const char *part);

/* Whether the opcode starts with prefix. */
int ptx_starts(const char *opcode, const char *prefix);

#endif
