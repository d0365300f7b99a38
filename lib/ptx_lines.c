/* ptx_lines.c: two passes over a PTX text, the first finding the kernel's ".file" number
 * (NVRTC writes the ".file" directives after the code), the second following its ".loc"s. */
#include "common.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ptx_lines.h"
#include "xalloc.h"

/* The next line of *text (without its "\n"), copied into *buf; advances *text. Returns 0, or
 * -1 at the end. */
static int next_line(const char **text, char **buf)
{
	if (!**text)
		return -1;
	size_t len = strcspn(*text, "\n");
	free(*buf);
	*buf = xstrndup(*text, len);
	*text += len + ((*text)[len] == '\n');
	return 0;
}

static const char *skip_blanks(const char *p)
{
	return p + strspn(p, " \t\r");
}

/* Whether ".file N "PATH"..." names the kernel: PATH is kernel_file or ends in "/" kernel_file. */
static int names_kernel(const char *line, const char *kernel_file, long *number)
{
	int used = 0;
	if (sscanf(line, ".file %ld \"%n", number, &used) != 1 || used == 0)
		return 0;
	const char *path = line + used, *close = strchr(path, '"');
	size_t len = close ? (size_t)(close - path) : 0, n = strlen(kernel_file);
	return len >= n && strncmp(path + len - n, kernel_file, n) == 0 && (len == n || path[len - n - 1] == '/');
}

/* The brace depth after line, from depth before it; braces in a "//" comment or a string do
 * not count. */
static int depth_after(const char *line, int depth)
{
	int quoted = 0;
	for (const char *p = line; *p; p++) {
		if (*p == '"')
			quoted = !quoted;
		else if (!quoted && p[0] == '/' && p[1] == '/')
			break;
		else if (!quoted)
			depth += (*p == '{') - (*p == '}');
	}
	return depth;
}

/* The kernel line a ".loc FILE LINE COL[, function_name F, inlined_at FILE LINE COL]" sets,
 * from current, the kernel line before it. */
static int follow_loc(const char *line, long kernel, int current)
{
	long file, at;
	if (sscanf(line, ".loc %ld %ld", &file, &at) != 2)
		return current;
	const char *inlined = strstr(line, "inlined_at");
	long ifile, iline;
	if (kernel && file == kernel)
		return (int)at;
	if (inlined && sscanf(inlined, "inlined_at %ld %ld", &ifile, &iline) == 2 && kernel && ifile == kernel)
		return (int)iline;
	return inlined ? current : 0;
}

void ptx_lines_init(struct ptx_lines *m, const char *ptx, const char *kernel_file)
{
	memset(m, 0, sizeof(*m));
	char *buf = NULL;
	long number;
	for (const char *p = ptx; next_line(&p, &buf) == 0;) {
		m->n++;
		if (!m->file && names_kernel(skip_blanks(buf), kernel_file, &number))
			m->file = number;
	}
	m->source = xcalloc(m->n + 1, sizeof(*m->source));
	m->code = xcalloc(m->n + 1, sizeof(*m->code));
	int depth = 0, current = 0;
	size_t i = 0;
	for (const char *p = ptx; next_line(&p, &buf) == 0; i++) {
		const char *t = skip_blanks(buf);
		if (depth == 0)
			current = 0; /* between functions */
		else if (strncmp(t, ".loc", 4) == 0 && (t[4] == ' ' || t[4] == '\t'))
			current = follow_loc(t, m->file, current);
		m->source[i] = current;
		m->code[i] = depth > 0 && *t && !strchr("./{}()", *t);
		depth = depth_after(t, depth);
	}
	free(buf);
}

void ptx_lines_release(struct ptx_lines *m)
{
	free(m->source);
	free(m->code);
	memset(m, 0, sizeof(*m));
}

int ptx_lines_source(const struct ptx_lines *m, size_t ptx_line)
{
	return ptx_line >= 1 && ptx_line <= m->n ? m->source[ptx_line - 1] : 0;
}

size_t ptx_lines_of_source(const struct ptx_lines *m, int first, int last, size_t **lines)
{
	size_t count = 0;
	*lines = NULL;
	for (size_t i = 0; i < m->n; i++)
		if (m->code[i] && m->source[i] && m->source[i] >= first && m->source[i] <= last) {
			if (!*lines)
				*lines = xcalloc(m->n, sizeof(**lines));
			(*lines)[count++] = i + 1;
		}
	return count;
}
