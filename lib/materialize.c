/* materialize.c: source normalization, and diffs rewritten to touch one file then applied
 * by GNU patch, whose own words explain every failure. */
#include "common.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fileio.h"
#include "materialize.h"
#include "process.h"

char *source_normalize(const char *text, size_t len)
{
	struct strbuf out;
	strbuf_init(&out);
	size_t kept = 0; /* out.len up to the last line that was not blank */
	size_t i = 0;
	while (i < len) {
		size_t end = i;
		while (end < len && text[end] != '\n' && text[end] != '\r')
			end++;
		size_t stop = end;
		while (stop > i && (text[stop - 1] == ' ' || text[stop - 1] == '\t' || text[stop - 1] == '\f' ||
				    text[stop - 1] == '\v'))
			stop--;
		strbuf_add(&out, text + i, stop - i);
		strbuf_addch(&out, '\n');
		if (stop > i)
			kept = out.len;
		i = end + (end < len);
		if (end + 1 < len && text[end] == '\r' && text[end + 1] == '\n')
			i++;
	}
	out.len = kept;
	out.buf[kept] = '\0';
	return strbuf_detach(&out);
}

/* ---------------------------------------------------------------- what a source includes */

/* The source with every line splice removed (a backslash, blanks, a newline; "??/" too,
 * should trigraphs be on): *at maps each byte kept to its offset in source. Splicing more
 * than the compiler does only joins lines, which cannot hide a directive from the scan. */
static char *spliced(const char *source, size_t **at)
{
	size_t len = strlen(source), n = 0;
	char *out = xmalloc(len + 1);
	*at = xcalloc(len + 1, sizeof(**at));
	for (size_t i = 0; i < len;) {
		size_t j = source[i] == '\\' ? i + 1 : strncmp(source + i, "?\?/", 3) == 0 ? i + 3 : 0;
		if (j) {
			while (source[j] == ' ' || source[j] == '\t')
				j++;
			if (source[j] == '\n') {
				i = j + 1;
				continue;
			}
		}
		(*at)[n] = i;
		out[n++] = source[i++];
	}
	(*at)[n] = len;
	out[n] = '\0';
	return out;
}

/* Skips blanks and block comments, which may stand between "#" and "include". */
static const char *skip_gap(const char *p)
{
	for (;;) {
		while (*p == ' ' || *p == '\t' || *p == '\f' || *p == '\v')
			p++;
		if (p[0] != '/' || p[1] != '*')
			return p;
		const char *end = strstr(p + 2, "*/");
		if (!end)
			return p + strlen(p);
		p = end + 2;
	}
}

/* Why path may not be included, or NULL when it may: file_confined's rule, the file checked
 * only for a quoted name (an <...> one is the toolkit's). */
static char *include_refused(const char *path, int quoted, const char *include_dir)
{
	const char *why = file_confined(include_dir, path, quoted);
	if (!why)
		return NULL;
	if (strcmp(why, FILE_NOT_INSIDE) == 0)
		return xasprintf("no such file in the kernel's folder '%s'", include_dir);
	return xstrdup(why);
}

int source_check_includes(const char *source, const char *include_dir, char **why)
{
	static const char *const directives[] = {"include", "include_next", "import", "embed"};
	size_t *at;
	char *text = spliced(source, &at);
	int rc = 0;
	for (const char *p = text; *p && !rc; p++) {
		/* "#", its digraph "%:" and its trigraph "??=" all start a directive. */
		const char *q = *p == '#' ? p + 1 : (p[0] == '%' && p[1] == ':') ? p + 2 : strncmp(p, "?\?=", 3) == 0 ? p + 3 : NULL;
		if (!q)
			continue;
		q = skip_gap(q);
		size_t len = strspn(q, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_");
		int named = 0;
		for (size_t k = 0; k < ARRAY_SIZE(directives); k++)
			named |= strlen(directives[k]) == len && strncmp(q, directives[k], len) == 0;
		if (!named)
			continue;
		size_t line = 1;
		for (size_t k = 0; k < at[p - text]; k++)
			line += source[k] == '\n';
		const char *name = skip_gap(q + len);
		const char *close = *name == '"' ? strpbrk(name + 1, "\"\n") : *name == '<' ? strpbrk(name + 1, ">\n") : NULL;
		if (!close || *close == '\n') {
			*why = xasprintf("kernel.cu:%zu: #%.*s names its file with a macro or not at all; name it in \"\" or <>",
					 line, (int)len, q);
			rc = -1;
			break;
		}
		char *path = xstrndup(name + 1, (size_t)(close - name - 1));
		char *refused = include_refused(path, *name == '"', include_dir);
		if (refused) {
			*why = xasprintf("kernel.cu:%zu: #%.*s %c%.200s%c: %s; a kernel may include only files in its folder and the toolkit's headers",
					 line, (int)len, q, *name, path, *close, refused);
			rc = -1;
		}
		free(refused);
		free(path);
	}
	free(text);
	free(at);
	return rc;
}

/* ---------------------------------------------------------------- the diff, rewritten */

struct line {
	const char *text;
	size_t len;
};

static int starts_with(const struct line *l, const char *prefix)
{
	size_t n = strlen(prefix);
	return l->len >= n && memcmp(l->text, prefix, n) == 0;
}

static size_t split_lines(const char *text, struct line **out)
{
	size_t n = 0, cap = 16;
	struct line *lines = xcalloc(cap, sizeof(*lines));
	const char *p = text;
	while (*p) {
		const char *nl = strchr(p, '\n');
		size_t len = nl ? (size_t)(nl - p) : strlen(p);
		if (n == cap)
			lines = xreallocarray(lines, cap *= 2, sizeof(*lines));
		lines[n].text = p;
		lines[n].len = len && p[len - 1] == '\r' ? len - 1 : len;
		n++;
		p += len + (nl != NULL);
	}
	*out = lines;
	return n;
}

static int is_file_header(const struct line *lines, size_t i, size_t n)
{
	return starts_with(&lines[i], "--- ") && i + 1 < n && starts_with(&lines[i + 1], "+++ ");
}

/* Whether a line can belong to a hunk's body; an empty line is a blank context line whose
 * leading space was lost (editors and LLMs strip it). */
static int is_body_line(const struct line *lines, size_t i, size_t n)
{
	const struct line *l = &lines[i];
	if (l->len == 0)
		return 1;
	if (starts_with(l, "@@") || is_file_header(lines, i, n))
		return 0;
	return l->text[0] == ' ' || l->text[0] == '+' || l->text[0] == '-' || l->text[0] == '\\';
}

/* Parses "@@ -A[,B] +C[,D] @@"; a bare "@@" (no numbers) places the hunk at line 1 and lets
 * patch find it by its context. Returns 0, or -1 when the numbers are malformed. */
static int parse_hunk_header(const struct line *l, long *old_start, long *old_count, long *new_start,
			     long *new_count, int *has_counts)
{
	char *header = xstrndup(l->text, l->len);
	const char *p = header + 2;
	while (*p == ' ')
		p++;
	*has_counts = 0;
	*old_start = *new_start = 1;
	*old_count = *new_count = -1;
	int rc = 0;
	if (*p == '\0' || strncmp(p, "@@", 2) == 0) {
		free(header);
		return 0;
	}
	char *end;
	if (*p != '-' || !(p[1] >= '0' && p[1] <= '9')) {
		rc = -1;
	} else {
		*old_start = strtol(p + 1, &end, 10);
		*old_count = *end == ',' ? strtol(end + 1, &end, 10) : 1;
		for (p = end; *p == ' '; p++)
			;
		if (*p != '+' || !(p[1] >= '0' && p[1] <= '9')) {
			rc = -1;
		} else {
			*new_start = strtol(p + 1, &end, 10);
			*new_count = *end == ',' ? strtol(end + 1, &end, 10) : 1;
			*has_counts = 1;
		}
	}
	free(header);
	return rc;
}

/* Whether a "--- " or "+++ " line names name or alias: the last component of its path,
 * which ends at a tab (a timestamp follows) or at the end of the line. */
static int header_names(const struct line *l, const char *name, const char *alias)
{
	const char *path = l->text + 4, *end = l->text + l->len;
	const char *tab = memchr(path, '\t', (size_t)(end - path));
	if (tab)
		end = tab;
	while (end > path && end[-1] == ' ')
		end--;
	for (const char *p = path; p < end; p++)
		if (*p == '/')
			path = p + 1;
	size_t len = (size_t)(end - path);
	return (strlen(name) == len && memcmp(path, name, len) == 0) ||
	       (alias && strlen(alias) == len && memcmp(path, alias, len) == 0);
}

/* Rewrites diff into headers for name and hunks whose line counts match their bodies.
 * Returns 0, or -1 with *why set (allocated). */
static int rewrite_diff(const char *diff, const char *name, const char *alias, struct strbuf *out, size_t *nhunks,
			int *recounted, char **why)
{
	struct line *lines;
	size_t n = split_lines(diff, &lines);
	size_t files = 0, other = 0; /* other: 1 + the index of the first header naming another file */
	*nhunks = 0;
	*recounted = 0;
	strbuf_addf(out, "--- a/%s\n+++ b/%s\n", name, name);
	for (size_t i = 0; i < n;) {
		if (is_file_header(lines, i, n)) {
			/* Applied to name whatever the header says, a diff for another file (a new
			 * header, /dev/null) would change the kernel in ways nobody meant. */
			for (size_t j = i; j < i + 2 && !other; j++)
				if (!header_names(&lines[j], name, alias))
					other = j + 1;
			files++;
			i += 2;
			continue;
		}
		if (!starts_with(&lines[i], "@@")) {
			i++; /* prose, "diff --git", "index ...": nothing patch needs */
			continue;
		}
		long old_start, old_count, new_start, new_count;
		int has_counts;
		if (parse_hunk_header(&lines[i], &old_start, &old_count, &new_start, &new_count, &has_counts)) {
			*why = xasprintf("line %zu of the diff: malformed hunk header \"%.*s\"", i + 1, (int)lines[i].len,
					 lines[i].text);
			free(lines);
			return -1;
		}
		size_t first = i + 1, end = first;
		while (end < n && is_body_line(lines, end, n))
			end++;
		/* Blank lines after the body separate hunks, unless the header counts them. */
		long olds = 0, news = 0;
		for (size_t j = first; j < end; j++) {
			char c = lines[j].len ? lines[j].text[0] : ' ';
			olds += c == ' ' || c == '-';
			news += c == ' ' || c == '+';
		}
		while (end > first && lines[end - 1].len == 0 && !(olds == old_count && news == new_count)) {
			end--;
			olds--;
			news--;
		}
		if (!has_counts || olds != old_count || news != new_count)
			*recounted = 1;
		strbuf_addf(out, "@@ -%ld,%ld +%ld,%ld @@\n", old_start, olds, new_start, news);
		for (size_t j = first; j < end; j++) {
			if (lines[j].len == 0)
				strbuf_addch(out, ' ');
			strbuf_add(out, lines[j].text, lines[j].len);
			strbuf_addch(out, '\n');
		}
		++*nhunks;
		i = end;
	}
	if (files > 1) {
		*why = xasprintf("the diff changes %zu files; a candidate may change %s only", files, name);
		free(lines);
		return -1;
	}
	if (other) {
		const struct line *l = &lines[other - 1];
		int two = alias && strcmp(alias, name) != 0;
		*why = xasprintf("line %zu of the diff: \"%.*s\" names another file than the kernel's (%s%s%s)", other,
				 (int)(l->len < 200 ? l->len : 200), l->text, name, two ? " or " : "", two ? alias : "");
		free(lines);
		return -1;
	}
	free(lines);
	if (*nhunks == 0) {
		*why = xasprintf("the diff has no hunks (no line starts with \"@@\")");
		return -1;
	}
	return 0;
}

/* ---------------------------------------------------------------- running patch */

/* Runs argv in dir with stdin from /dev/null, collecting stdout and stderr together.
 * Returns the exit status, 127 when the program could not be run (out says why), or -1
 * when no process could be started (errno set). */
static int run_in(const char *dir, char *const argv[], struct strbuf *out)
{
	int fd;
	pid_t pid = process_fork_piped(&fd);
	if (pid < 0)
		return -1;
	if (pid == 0) {
		int null = open("/dev/null", O_RDONLY);
		if (null < 0 || dup2(null, 0) < 0 || dup2(fd, 1) < 0 || dup2(fd, 2) < 0 || chdir(dir) != 0)
			_exit(126);
		unsetenv("POSIXLY_CORRECT"); /* which would make patch keep backups and ignore options */
		execvp(argv[0], argv);
		dprintf(2, "cannot run '%s': %s", argv[0], strerror(errno));
		_exit(127);
	}
	process_read_all(fd, out);
	close(fd);
	int status = process_wait(pid);
	if (status < 0)
		return -1;
	if (WIFSIGNALED(status))
		return 128 + WTERMSIG(status);
	return WEXITSTATUS(status);
}

/* Reads "Hunk #2 succeeded at 30 with fuzz 1 (offset -3 lines)." into the per-hunk arrays. */
static void read_hunk_reports(const char *output, struct patch_report *r)
{
	long *offsets = xcalloc(r->hunks, sizeof(*offsets));
	long *fuzz = xcalloc(r->hunks, sizeof(*fuzz));
	for (const char *p = strstr(output, "Hunk #"); p; p = strstr(p + 1, "Hunk #")) {
		char *end;
		long k = strtol(p + 6, &end, 10);
		const char *eol = strchr(end, '\n');
		if (k < 1 || (size_t)k > r->hunks)
			continue;
		const char *f = strstr(end, "with fuzz "), *o = strstr(end, "(offset ");
		if (f && (!eol || f < eol))
			fuzz[k - 1] = strtol(f + 10, NULL, 10);
		if (o && (!eol || o < eol))
			offsets[k - 1] = strtol(o + 8, NULL, 10);
	}
	r->offsets = cJSON_CreateArray();
	r->fuzz = cJSON_CreateArray();
	if (!r->offsets || !r->fuzz)
		xalloc_die();
	for (size_t k = 0; k < r->hunks; k++)
		if (!cJSON_AddItemToArray(r->offsets, cJSON_CreateNumber((double)offsets[k])) ||
		    !cJSON_AddItemToArray(r->fuzz, cJSON_CreateNumber((double)fuzz[k])))
			xalloc_die();
	free(offsets);
	free(fuzz);
}

/* Whether two lines are alike: equal once leading and trailing blanks are set aside, as a
 * diff written by hand or by a model often re-indents. */
static int lines_alike(const struct line *a, const struct line *b)
{
	const char *p = a->text, *pe = a->text + a->len, *q = b->text, *qe = b->text + b->len;
	while (p < pe && (*p == ' ' || *p == '\t'))
		p++;
	while (pe > p && (pe[-1] == ' ' || pe[-1] == '\t'))
		pe--;
	while (q < qe && (*q == ' ' || *q == '\t'))
		q++;
	while (qe > q && (qe[-1] == ' ' || qe[-1] == '\t'))
		qe--;
	return pe - p == qe - q && memcmp(p, q, (size_t)(pe - p)) == 0;
}

/* Adds lines [from, from + n) of lines, numbered from first_number, at most SHOWN of them. */
static void add_numbered(struct strbuf *sb, const struct line *lines, size_t n, long first_number)
{
	enum { SHOWN = 12 };
	for (size_t i = 0; i < n && i < SHOWN; i++)
		strbuf_addf(sb, "\n%6ld | %.*s", first_number + (long)i, (int)lines[i].len, lines[i].text);
	if (n > SHOWN)
		strbuf_addf(sb, "\n       | ... (%zu more lines)", n - SHOWN);
}

/* After patch's own words, what a person needs to mend the first hunk that failed: the lines
 * it expected (its context and removed lines) and where, and the parent's lines that are most
 * alike, a window as long as the hunk slid over the file (the most lines alike; of those,
 * the nearest to where the hunk said). diff is the rewritten one patch was given. Returns
 * whether a hunk had failed. */
static int explain_failed_hunk(struct strbuf *msg, const char *output, const char *diff, const char *parent)
{
	const char *failed = NULL;
	for (const char *p = output; (p = strstr(p, "Hunk #")); p++) {
		const char *eol = strchr(p, '\n');
		const char *f = strstr(p, " FAILED");
		if (f && (!eol || f < eol)) {
			failed = p;
			break;
		}
	}
	if (!failed)
		return 0;
	long k = strtol(failed + 6, NULL, 10);
	struct line *dl, *fl;
	size_t nd = split_lines(diff, &dl), nf = split_lines(parent, &fl);
	struct line *old = xcalloc(nd + 1, sizeof(*old));
	size_t nold = 0;
	long hunk = 0, start = 1;
	for (size_t i = 0; i < nd; i++) {
		if (starts_with(&dl[i], "@@ -")) {
			if (++hunk == k)
				start = strtol(dl[i].text + 4, NULL, 10);
			continue;
		}
		if (hunk != k || !dl[i].len || (dl[i].text[0] != ' ' && dl[i].text[0] != '-'))
			continue;
		old[nold].text = dl[i].text + 1;
		old[nold++].len = dl[i].len - 1;
	}
	if (nold) {
		strbuf_addf(msg, "\nhunk #%ld expected, at line %ld:", k, start);
		add_numbered(msg, old, nold, start);
		size_t best = 0, best_alike = 0, window = nold < nf ? nold : nf;
		long best_distance = -1;
		for (size_t s = 0; s + window <= nf; s++) {
			size_t alike = 0;
			for (size_t i = 0; i < window; i++)
				alike += lines_alike(&old[i], &fl[s + i]);
			long distance = labs((long)s + 1 - start);
			if (alike > best_alike || (alike == best_alike && alike && distance < best_distance)) {
				best = s;
				best_alike = alike;
				best_distance = distance;
			}
		}
		if (best_alike) {
			strbuf_addf(msg, "\nthe parent's nearest lines, %zu to %zu (%zu of %zu alike):", best + 1, best + window,
				    best_alike, nold);
			add_numbered(msg, fl + best, window, (long)best + 1);
		} else {
			strbuf_addf(msg, "\nthe parent has none of these lines");
		}
	}
	free(old);
	free(dl);
	free(fl);
	return 1;
}

/* patch's output without its "patching file" line and trailing newlines. */
static char *patch_message(const char *output)
{
	struct strbuf sb;
	strbuf_init(&sb);
	for (const char *p = output; *p;) {
		const char *eol = strchr(p, '\n');
		size_t len = eol ? (size_t)(eol - p) : strlen(p);
		if (strncmp(p, "patching file ", 14) != 0 && len > 0) {
			if (sb.len)
				strbuf_addch(&sb, '\n');
			strbuf_add(&sb, p, len);
		}
		p += len + (eol != NULL);
	}
	return strbuf_detach(&sb);
}

void patch_apply(const char *dir, const char *name, const char *alias, const char *diff, struct patch_report *r)
{
	static const char diff_name[] = ".candidate.patch";
	memset(r, 0, sizeof(*r));
	struct strbuf rewritten, output;
	strbuf_init(&rewritten);
	strbuf_init(&output);
	char *diff_path = xasprintf("%s/%s", dir, diff_name), *parent = NULL;
	r->outcome = PATCH_REJECTED;
	if (rewrite_diff(diff, name, alias, &rewritten, &r->hunks, &r->recounted, &r->message))
		goto done;
	if (file_write(diff_path, rewritten.buf, rewritten.len) != 0) {
		r->outcome = PATCH_NO_TOOL;
		r->message = xasprintf("cannot write '%s': %s", diff_path, strerror(errno));
		goto done;
	}
	char *file_path = xasprintf("%s/%s", dir, name);
	size_t parent_len;
	parent = file_read_all(file_path, &parent_len); /* before patch changes it */
	free(file_path);
	char input[64];
	snprintf(input, sizeof(input), "--input=%s", diff_name);
	char *argv[] = {"patch", "--batch", "--forward", "--no-backup-if-mismatch", "--reject-file=-", "--get=0",
			input, (char *)name, NULL};
	int status = run_in(dir, argv, &output);
	unlink(diff_path);
	if (status < 0 || status == 126 || status == 127) {
		r->outcome = PATCH_NO_TOOL;
		r->message = status < 0 ? xasprintf("cannot run 'patch': %s", strerror(errno)) : patch_message(output.buf);
		goto done;
	}
	read_hunk_reports(output.buf, r);
	if (status == 0) {
		r->outcome = PATCH_APPLIED;
	} else {
		r->message = patch_message(output.buf);
		if (!r->message[0]) {
			free(r->message);
			r->message = xasprintf("patch exited with status %d", status);
		}
		if (parent) {
			struct strbuf sb;
			strbuf_init(&sb);
			strbuf_addstr(&sb, r->message);
			r->mismatched = explain_failed_hunk(&sb, output.buf, rewritten.buf, parent);
			free(r->message);
			r->message = strbuf_detach(&sb);
		}
	}
done:
	free(parent);
	free(diff_path);
	strbuf_release(&rewritten);
	strbuf_release(&output);
}

void patch_report_release(struct patch_report *r)
{
	cJSON_Delete(r->offsets);
	cJSON_Delete(r->fuzz);
	free(r->message);
	memset(r, 0, sizeof(*r));
}
