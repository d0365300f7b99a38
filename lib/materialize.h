/* materialize.h: the source of a variant, from its parent's source and a candidate's diff.
 * Diffs are applied by GNU patch to one file only, whatever file names the diff carries.
 * kg-build materializes variants with it; kg-propose tries a ready patch on a node's kernel
 * with it before offering the patch there. */
#ifndef KG_MATERIALIZE_H
#define KG_MATERIALIZE_H

#include "common.h"

#include <stddef.h>

#include <cjson/cJSON.h>

#include "xalloc.h"

/* The version of source_normalize's rules; part of every state hash, so that changing the
 * rules can never make two different sources collide with old states. */
#define SOURCE_NORMALIZATION "kg-source-1"

/* The source as states are keyed and compiled: "\r\n" and lone "\r" become "\n",
 * whitespace at the end of each line and blank lines at the end of the file are removed,
 * and the text ends with one "\n". The caller frees the result. */
char *source_normalize(const char *text, size_t len);

/* Checks every #include (and #include_next, #import, #embed) of source, whatever comments,
 * strings or line splices surround it (a directive is looked for everywhere, so that no
 * lexing trick hides one; one inside a comment is checked too): "name" must be a relative
 * path without ".." to a file inside include_dir, the kernel's folder; <name> may not be
 * absolute or go through ".." (it resolves in the kernel's folder, the toolkit's headers or
 * NVRTC's own); a file named by a macro is refused. A kernel could otherwise have NVRTC
 * quote any file of the host (/proc/self/environ) in its errors. Returns 0, or -1 with *why
 * set (allocated) to "kernel.cu:LINE: ...". */
int source_check_includes(const char *source, const char *include_dir, char **why);

enum patch_outcome {
	PATCH_APPLIED,	 /* every hunk applied; the file holds the result */
	PATCH_REJECTED,	 /* the diff is unusable or a hunk did not apply; see message */
	PATCH_NO_TOOL,	 /* GNU patch could not be run; see message */
};

struct patch_report {
	enum patch_outcome outcome;
	size_t hunks;	  /* hunks in the diff */
	int recounted;	  /* some hunk header had wrong line counts, which were recomputed */
	cJSON *offsets;	  /* per hunk: lines it moved from where the diff placed it (patch's "offset") */
	cJSON *fuzz;	  /* per hunk: lines of context patch ignored to place it (patch's "fuzz") */
	char *message;	  /* what went wrong, in patch's own words where patch ran; NULL when applied */
	int mismatched;	  /* patch ran and some hunk did not match the file: message shows the first
			     one's lines against the file's nearest */
};

/* Applies diff to the file dir/name with GNU patch, running in dir. Only the hunks of the
 * diff are used: the paths in its headers are never opened, so nothing but dir/name can
 * change. A diff whose headers name a file other than name or alias (the kernel's own file
 * name; compared by their last component, so "a/kernel.cu" and "../../kernel.cu" name it),
 * with sections for more than one file, or with no hunks, is rejected. Fills *report; the
 * caller frees it with patch_report_release. */
void patch_apply(const char *dir, const char *name, const char *alias, const char *diff, struct patch_report *report);
void patch_report_release(struct patch_report *report);

#endif
