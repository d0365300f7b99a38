/* trace.c (kg-select): RUN/trace.md as a story: the baseline, one table row per candidate as
 * --update learns it (what changed, who proposed it, time, speedup, what became of it), and the
 * closing summary --summary appends from RUN/events.jsonl. */
#include "common.h"

#include <fcntl.h>
#include <math.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "events.h"
#include "fileio.h"
#include "jsonl.h"
#include "log.h"
#include "run.h"
#include "step.h"
#include "trace.h"
#include "xalloc.h"

/* A state shows as its first characters: enough to tell a run's variants apart, short enough
 * that a row stays readable. */
#define SHORT_STATE 8
/* The most bytes a cell shows of a message or a description, so that a row stays one line. */
#define CELL_TEXT_MAX 110

/* "build" numbers the candidates in the order they were learned, the baseline being build 0,
 * as kg-report's page, plots and graph number them. */
static const char TABLE_HEAD[] = "| build | iter | from | change | method (proposer) | ms | speedup | result |\n"
				 "|---:|---:|---|---|---|---:|---:|---|\n";

/* x to three significant digits, trailing zeros kept ("0.940", "1.87", "123"); "-" when it
 * is not known. */
static void add_3digits(struct strbuf *sb, double x)
{
	if (!isfinite(x)) {
		strbuf_addch(sb, '-');
		return;
	}
	int decimals = x == 0 ? 2 : 2 - (int)floor(log10(fabs(x)));
	strbuf_addf(sb, "%.*f", decimals > 0 ? decimals : 0, x);
}

/* A speedup: "1.87x", and " [1.85, 1.89]" when ci holds its interval. */
static void add_speedup(struct strbuf *sb, double speedup, const cJSON *ci)
{
	add_3digits(sb, speedup);
	if (!isfinite(speedup))
		return;
	strbuf_addch(sb, 'x');
	if (cJSON_GetArraySize(ci) == 2 && cJSON_IsNumber(cJSON_GetArrayItem(ci, 0)) &&
	    cJSON_IsNumber(cJSON_GetArrayItem(ci, 1))) {
		strbuf_addstr(sb, " [");
		add_3digits(sb, cJSON_GetArrayItem(ci, 0)->valuedouble);
		strbuf_addstr(sb, ", ");
		add_3digits(sb, cJSON_GetArrayItem(ci, 1)->valuedouble);
		strbuf_addch(sb, ']');
	}
}

/* text[0, len) in a table cell, on one line and at most max bytes of it (cut between
 * characters, "..." said; 0: all of it): as a code span (code), pipes escaped and backticks,
 * which would end it, shown as quotes; else as prose, with what Markdown or the table would
 * read (pipes, emphasis, brackets, tags) escaped. */
static void add_cell(struct strbuf *sb, const char *text, size_t len, size_t max, int code)
{
	size_t n = len;
	if (max && n > max) {
		n = max;
		while (n > 0 && ((unsigned char)text[n] & 0xC0) == 0x80)
			n--; /* not inside a UTF-8 sequence */
	}
	if (code)
		strbuf_addch(sb, '`');
	for (size_t i = 0; i < n; i++) {
		char c = text[i];
		if (c == '\n' || c == '\r' || c == '\t')
			c = ' ';
		else if (code && c == '`')
			c = '\'';
		else if (c == '|' || (!code && strchr("\\`*_[]<>#~", c)))
			strbuf_addch(sb, '\\');
		strbuf_addch(sb, c);
	}
	if (n < len)
		strbuf_addstr(sb, "...");
	if (code)
		strbuf_addch(sb, '`');
}

/* A method's name, as code. */
static void add_method(struct strbuf *sb, const char *name)
{
	add_cell(sb, name, strlen(name), 0, 1);
}

/* Whether the line of n bytes at p names an error: "error" and a colon after it, spaces
 * between allowed, for NVRTC writes "kernel.cu(40): error: ..." and ptxas "ptxas error   :
 * ...". */
static int names_error(const char *p, size_t n)
{
	for (const char *at = p; (at = memmem(at, n - (size_t)(at - p), "error", 5)); at += 5) {
		size_t k = (size_t)(at - p) + 5;
		while (k < n && p[k] == ' ')
			k++;
		if (k < n && p[k] == ':')
			return 1;
	}
	return 0;
}

/* The line of text that says most: the first that names an error ("kernel.cu(40): error:
 * ...", "ptxas error   : ..."), else the first that is not blank. *len gets its length. */
static const char *telling_line(const char *text, size_t *len)
{
	const char *first = NULL;
	size_t first_len = 0;
	for (const char *p = text; *p;) {
		const char *eol = strchr(p, '\n');
		size_t n = eol ? (size_t)(eol - p) : strlen(p);
		if (names_error(p, n)) {
			*len = n;
			return p;
		}
		if (!first && strspn(p, " \t\r") < n) {
			first = p;
			first_len = n;
		}
		p += n + (eol != NULL);
	}
	*len = first ? first_len : 0;
	return first ? first : text;
}

/* The telling line of text (a description, a reason), as code or prose. */
static void add_line(struct strbuf *sb, const char *text, int code)
{
	size_t len;
	const char *line = telling_line(text, &len);
	add_cell(sb, line, len, CELL_TEXT_MAX, code);
}

/* A link to node's variant directory, shown by its short state ("baseline" for the root); a
 * failed candidate that made no variant ("failed:EDGE") has none. */
static void add_variant(struct strbuf *sb, const struct graph *g, size_t node)
{
	const char *state = graph_node_state(g, node);
	if (strncmp(state, "failed:", 7) == 0) {
		strbuf_addstr(sb, "no variant");
		return;
	}
	/* relative to the run, where trace.md is; lib/run names the directory */
	char *dir = run_variant_path(NULL, state, VARIANT_DIR);
	if (node == 0)
		strbuf_addf(sb, "[baseline](%s/)", dir);
	else
		strbuf_addf(sb, "[%.*s](%s/)", SHORT_STATE, state, dir);
	free(dir);
}

/* A configuration as "block_m 64, block_n 128", in a code span. */
static void add_config(struct strbuf *sb, const cJSON *config)
{
	const cJSON *item;
	struct strbuf text;
	strbuf_init(&text);
	cJSON_ArrayForEach(item, config) {
		char *value = json_text(item);
		strbuf_addf(&text, "%s%s %s", item == config->child ? "" : ", ", item->string, value);
		free(value);
	}
	add_cell(sb, text.buf, text.len, 0, 1);
	strbuf_release(&text);
}

/* What changed from one configuration to the next, as "block_m 64 -> 128, num_stages 2 -> 3"
 * in a code span (a parameter the parent did not set shows as "unset"). Returns how many. */
static int add_config_change(struct strbuf *sb, const cJSON *from, const cJSON *to)
{
	const cJSON *item;
	int changes = 0;
	struct strbuf text;
	strbuf_init(&text);
	cJSON_ArrayForEach(item, to) {
		const cJSON *before = cJSON_GetObjectItemCaseSensitive(from, item->string);
		if (before && cJSON_Compare(before, item, 1))
			continue;
		char *old = before ? json_text(before) : xstrdup("unset"), *new = json_text(item);
		strbuf_addf(&text, "%s%s %s -> %s", changes++ ? ", " : "", item->string, old, new);
		free(old);
		free(new);
	}
	if (changes)
		add_cell(sb, text.buf, text.len, 0, 1);
	strbuf_release(&text);
	return changes;
}

/* What a unified diff changes: "+14 -6 in kernel.cu" (the files its "+++" lines name). */
static void add_diffstat(struct strbuf *sb, const char *patch)
{
	long added = 0, removed = 0;
	struct strbuf files;
	strbuf_init(&files);
	for (const char *p = patch; *p;) {
		const char *eol = strchr(p, '\n');
		size_t n = eol ? (size_t)(eol - p) : strlen(p);
		if (n >= 4 && strncmp(p, "+++ ", 4) == 0) {
			const char *name = p + 4;
			size_t len = strcspn(name, "\t\n");
			if (len >= 2 && strncmp(name, "b/", 2) == 0) {
				name += 2;
				len -= 2;
			}
			strbuf_addstr(&files, files.len ? ", " : "");
			add_cell(&files, name, len, CELL_TEXT_MAX, 0);
		} else if (n >= 4 && strncmp(p, "--- ", 4) == 0) {
			; /* the file before */
		} else if (*p == '+') {
			added++;
		} else if (*p == '-') {
			removed++;
		}
		p += n + (eol != NULL);
	}
	strbuf_addf(sb, "+%ld -%ld", added, removed);
	if (files.len)
		strbuf_addf(sb, " in %s", files.buf);
	strbuf_release(&files);
}

static const char *nonempty(const char *s)
{
	return s && *s ? s : NULL;
}

/* The change cell: a code edit as its description and what its diff changes, a configuration
 * change as the parameters that moved from the parent's configuration. */
static void add_change(struct strbuf *sb, const struct graph *g, const struct trace_step *s)
{
	const cJSON *candidate = cJSON_GetObjectItemCaseSensitive(s->record, "candidate");
	const cJSON *build = cJSON_GetObjectItemCaseSensitive(s->record, "build");
	const char *patch = nonempty(json_string(candidate, "patch")), *source = nonempty(json_string(candidate, "source"));
	const char *detail = nonempty(json_string(candidate, "detail"));
	int said = 0;
	if (patch || source) {
		if (detail)
			add_line(sb, detail, 0);
		else
			strbuf_addstr(sb, "a code edit");
		if (patch) {
			strbuf_addstr(sb, " (");
			add_diffstat(sb, patch);
			strbuf_addch(sb, ')');
		} else {
			size_t lines = 0;
			for (const char *p = source; (p = strchr(p, '\n')); p++)
				lines++;
			strbuf_addf(sb, " (a new source, %zu lines)", lines);
		}
		said = 1;
	}
	const cJSON *config = cJSON_GetObjectItemCaseSensitive(build, "config");
	if (!cJSON_IsObject(config))
		config = cJSON_GetObjectItemCaseSensitive(candidate, "config");
	struct strbuf change;
	strbuf_init(&change);
	if (cJSON_IsObject(config) && add_config_change(&change, graph_node_config(g, s->parent), config))
		strbuf_addf(sb, "%s%s", said ? "; " : "", change.buf);
	else if (!said)
		strbuf_addstr(sb, "the same configuration");
	strbuf_release(&change);
}

/* What failed, in words, from the status of the stage that failed. */
static const char *failure_words(const char *status)
{
	static const char *const words[][2] = {
		{"invalid_config", "invalid configuration"}, {"patch_failed", "patch did not apply"},
		{"compile_failed", "compile failed"},	      {"incorrect", "incorrect output"},
		{"crashed", "crashed"},			      {"timeout", "timed out"},
		{"error", "could not be measured"},
	};
	for (size_t i = 0; i < ARRAY_SIZE(words); i++)
		if (strcmp(status, words[i][0]) == 0)
			return words[i][1];
	return status;
}

/* The status of the stage that failed ("compile_failed", "incorrect", ...), or NULL when the
 * candidate built and measured ok. */
static const char *failed_status(const cJSON *record)
{
	const cJSON *build = cJSON_GetObjectItemCaseSensitive(record, "build");
	const cJSON *bench = cJSON_GetObjectItemCaseSensitive(record, "bench");
	const char *build_status = json_string(build, "status"), *bench_status = json_string(bench, "status");
	if (!build_status || strcmp(build_status, "ok") != 0)
		return build_status ? build_status : "not built";
	if (!bench_status || strcmp(bench_status, "ok") != 0)
		return bench_status ? bench_status : "not measured";
	return NULL;
}

/* Why a candidate failed, on one line: the compiler's first error, the check's verdict, the
 * bench's error. */
static void add_failure_reason(struct strbuf *sb, const cJSON *record)
{
	const cJSON *build = cJSON_GetObjectItemCaseSensitive(record, "build");
	const cJSON *bench = cJSON_GetObjectItemCaseSensitive(record, "bench");
	const cJSON *check = cJSON_GetObjectItemCaseSensitive(bench, "check");
	const char *build_status = json_string(build, "status"), *text;
	if (build_status && strcmp(build_status, "ok") != 0) {
		if ((text = json_string(build, "error")))
			add_line(sb, text, 1); /* the compiler's words, a patch's, a condition's */
	} else if ((text = json_string(check, "why"))) {
		add_line(sb, text, 0);
	} else if ((text = json_string(check, "argument"))) {
		add_method(sb, text);
		double bad = json_number(check, "bad_elements", NAN), err = json_number(check, "max_abs_err", NAN);
		if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(check, "nonfinite")))
			strbuf_addstr(sb, ": not finite");
		else if (!isnan(bad))
			strbuf_addf(sb, ": %.0f elements wrong", bad);
		if (!isnan(err)) {
			strbuf_addstr(sb, ", max abs err ");
			add_3digits(sb, err);
		}
	} else if ((text = json_string(bench, "error"))) {
		add_line(sb, text, 0);
	}
}

char *trace_failure_reason(const cJSON *record)
{
	struct strbuf sb;
	strbuf_init(&sb);
	add_failure_reason(&sb, record);
	if (sb.len == 0) {
		strbuf_release(&sb);
		return NULL;
	}
	return strbuf_detach(&sb);
}

/* Appends text to RUN/trace.md in one write; a table row after a line that is not one
 * starts the table again (a summary or a note may have come between). */
static void append_trace(const struct graph *g, const char *text, int row)
{
	char *path = run_path(g->run, RUN_TRACE);
	struct strbuf out;
	strbuf_init(&out);
	if (row) {
		char tail[2] = {0, 0};
		if (g->dry_run && g->dry_run->trace_lines) { /* the file does not hold what came before */
			memcpy(tail, g->dry_run->trace_tail, 2);
		} else {
			int fd = open(path, O_RDONLY | O_CLOEXEC);
			struct stat st;
			if (fd >= 0 && fstat(fd, &st) == 0 && st.st_size >= 2 && pread(fd, tail, 2, st.st_size - 2) != 2)
				tail[0] = tail[1] = 0;
			if (fd >= 0)
				close(fd);
		}
		if (tail[0] != '|' || tail[1] != '\n')
			strbuf_addf(&out, "%s%s", tail[0] == '\n' && tail[1] == '\n' ? "" : "\n", TABLE_HEAD);
	}
	strbuf_addstr(&out, text);
	if (g->dry_run) {
		for (size_t k = 0; k < out.len; k++)
			g->dry_run->trace_lines += out.buf[k] == '\n';
		if (out.len >= 2)
			memcpy(g->dry_run->trace_tail, out.buf + out.len - 2, 2);
	} else if (file_append(path, out.buf, out.len) != 0) {
		log_warn("cannot append to '%s':", path);
	}
	strbuf_release(&out);
	free(path);
}

void trace_root(const struct graph *g, const cJSON *record)
{
	const cJSON *build = cJSON_GetObjectItemCaseSensitive(record, "build");
	struct strbuf sb;
	strbuf_init(&sb);
	strbuf_addf(&sb, "# Search of %s\n\nThe baseline, ", g->kernel);
	add_variant(&sb, g, 0);
	const cJSON *config = cJSON_GetObjectItemCaseSensitive(build, "config");
	if (cJSON_GetArraySize(config) > 0) {
		strbuf_addstr(&sb, " (");
		add_config(&sb, config);
		strbuf_addch(&sb, ')');
	}
	strbuf_addstr(&sb, ", runs in ");
	add_3digits(&sb, g->baseline_ms);
	strbuf_addstr(&sb, " ms. One row per candidate: its build (the candidates numbered in the order they were "
			   "learned, as kg-report numbers them), the iteration that picked it, the variant it changes, the "
			   "change, its method and who proposed it, its median time, its speedup over the baseline "
			   "(with the 95 % interval of that ratio when it was measured; a replayed table has none), "
			   "and what became of it. A candidate becomes the new best only when its interval (its "
			   "speedup, without one) lies above the best speedup so far.\n\n");
	append_trace(g, sb.buf, 0);
	strbuf_release(&sb);
}

void trace_candidate(const struct graph *g, const struct trace_step *s)
{
	const cJSON *r = s->record, *bench = cJSON_GetObjectItemCaseSensitive(r, "bench");
	const cJSON *candidate = cJSON_GetObjectItemCaseSensitive(r, "candidate");
	const char *proposer = json_string(candidate, "proposer"), *failed = failed_status(r);
	struct strbuf sb;
	strbuf_init(&sb);
	strbuf_addf(&sb, "| %ld | %.0f | ", g->builds, json_number(r, "iter", (double)g->iter));
	add_variant(&sb, g, s->parent);
	strbuf_addstr(&sb, " | ");
	add_change(&sb, g, s);
	strbuf_addstr(&sb, " | ");
	add_method(&sb, s->method[0] ? s->method : "?");
	if (proposer) {
		strbuf_addstr(&sb, " (");
		add_cell(&sb, proposer, strlen(proposer), 0, 0);
		strbuf_addch(&sb, ')');
	}
	strbuf_addstr(&sb, " | ");
	double median = json_number(bench, "median_ms", NAN), speedup = json_number(bench, "speedup", NAN);
	if (isnan(speedup))
		speedup = g->baseline_ms / median;
	add_3digits(&sb, failed ? NAN : median);
	strbuf_addstr(&sb, " | ");
	add_speedup(&sb, failed ? NAN : speedup, cJSON_GetObjectItemCaseSensitive(bench, "speedup_ci"));
	strbuf_addstr(&sb, " | ");
	add_variant(&sb, g, s->child);
	if (s->transposition)
		strbuf_addstr(&sb, " (reached before another way)");
	if (failed) {
		struct strbuf why;
		strbuf_init(&why);
		add_failure_reason(&why, r);
		strbuf_addf(&sb, ": **%s**%s%s", failure_words(failed), why.len ? ": " : "", why.buf);
		strbuf_release(&why);
	} else if (s->better) {
		const struct gnode *before = &g->nodes[s->previous_best];
		double ratio = speedup / before->speedup;
		strbuf_addstr(&sb, ": **new best**, ");
		if (ratio < 2) {
			strbuf_addf(&sb, "%.1f %% faster than ", 100 * (ratio - 1));
		} else {
			add_speedup(&sb, ratio, NULL);
			strbuf_addstr(&sb, " as fast as ");
		}
		add_variant(&sb, g, s->previous_best);
		if (cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(bench, "speedup_ci")) == 2) {
			strbuf_addstr(&sb, " (its interval clears ");
			add_3digits(&sb, before->speedup);
			strbuf_addstr(&sb, "x)");
		}
	}
	strbuf_addstr(&sb, " |\n");
	append_trace(g, sb.buf, 1);
	strbuf_release(&sb);
}

void trace_note(const struct graph *g, long iter, size_t node, const char *what)
{
	struct strbuf sb;
	strbuf_init(&sb);
	strbuf_addf(&sb, "| | %ld | ", iter);
	add_variant(&sb, g, node);
	strbuf_addstr(&sb, " | | | | | ");
	add_cell(&sb, what, strlen(what), 0, 0);
	strbuf_addstr(&sb, " |\n");
	append_trace(g, sb.buf, 1);
	strbuf_release(&sb);
}

void trace_rollout_end(const struct graph *g, const struct rollout *r, const char *why)
{
	if (!r->active)
		return;
	/* a reward is log2 of a speedup */
	char *text = xasprintf("the rollout from here ended (%s) after %ld expansions, best %.2fx", why, r->step,
			       exp2(r->best));
	trace_note(g, g->iter, r->node, text);
	free(text);
}

/* ---------------------------------------------------------------- the closing summary */

/* Candidates of one kind (a method, a proposer, a failure): how many, how many of them
 * failed, the best speedup of the others. */
struct tally {
	char *name;
	long tried, failed;
	double best; /* NAN until one did not fail */
};

struct tallies {
	struct tally *v;
	size_t n;
};

static void tally_add(struct tallies *t, const char *name, int failed, double speedup)
{
	size_t i = 0;
	while (i < t->n && strcmp(t->v[i].name, name) != 0)
		i++;
	if (i == t->n) {
		t->v = xreallocarray(t->v, t->n + 1, sizeof(*t->v));
		t->v[t->n++] = (struct tally){.name = xstrdup(name), .best = NAN};
	}
	struct tally *k = &t->v[i];
	k->tried++;
	k->failed += failed != 0;
	if (!failed && (isnan(k->best) || speedup > k->best))
		k->best = speedup;
}

static void tallies_release(struct tallies *t)
{
	for (size_t i = 0; i < t->n; i++)
		free(t->v[i].name);
	free(t->v);
}

/* The most tried first; ties by name, so that a summary is the same every time. */
static int by_tried(const void *a, const void *b)
{
	const struct tally *x = a, *y = b;
	if (x->tried != y->tried)
		return x->tried < y->tried ? 1 : -1;
	return strcmp(x->name, y->name);
}

/* What a proposer of kg-propose is, for a reader who has not met them; "" when unknown. */
static const char *proposer_words(const char *proposer)
{
	static const char *const words[][2] = {
		{"rules:neighbour", "one parameter one step up or down"},
		{"rules:random", "a random valid configuration"},
		{"rules:model", "the model's pick: the largest expected improvement"},
		{"rules:library", "a ready patch of the spec (KernelGraph.Patches)"},
		{"llm:", "an LLM expert: model/persona"},
	};
	for (size_t i = 0; i < ARRAY_SIZE(words); i++)
		if (strncmp(proposer, words[i][0], strlen(words[i][0])) == 0)
			return words[i][1];
	return "";
}

/* "| what | tried | failed | best speedup |" and a row per kind, the most tried first; the
 * kinds are methods (as code) or proposers (said what they are). */
static void add_tally_table(struct strbuf *sb, struct tallies *t, const char *what, int methods)
{
	qsort(t->v, t->n, sizeof(*t->v), by_tried);
	strbuf_addf(sb, "\n| %s | tried | failed | best speedup |%s\n|---|---:|---:|---:|%s\n", what,
		    methods ? "" : " what it is |", methods ? "" : "---|");
	for (size_t i = 0; i < t->n; i++) {
		strbuf_addstr(sb, "| ");
		add_cell(sb, t->v[i].name, strlen(t->v[i].name), 0, methods);
		strbuf_addf(sb, " | %ld | %ld | ", t->v[i].tried, t->v[i].failed);
		add_speedup(sb, t->v[i].best, NULL);
		strbuf_addstr(sb, " |");
		if (!methods) {
			strbuf_addf(sb, " %s |", proposer_words(t->v[i].name));
		}
		strbuf_addch(sb, '\n');
	}
}

/* What the summary gathers from RUN/events.jsonl. */
struct run_story {
	long tried, failed;
	struct tallies methods, proposers, failures;
	struct strbuf moves;   /* how the best moved: " → [abcd1234](...) 1.26x (build 3, iteration 1)" each */
	cJSON *best_record;    /* the record that made the incumbent, or NULL (the baseline) */
	long best_build;       /* its build: the candidates learned up to it, as trace rows count */
};

/* Adds one learned record to the story. */
static void story_add(struct run_story *st, const struct graph *g, cJSON *record)
{
	const cJSON *update = cJSON_GetObjectItemCaseSensitive(record, "update");
	const char *child = json_string(update, "child");
	if (event_kind(record) != EVENT_EVALUATED || !child)
		return; /* registered, exhausted, the baseline */
	const cJSON *candidate = cJSON_GetObjectItemCaseSensitive(record, "candidate");
	const cJSON *bench = cJSON_GetObjectItemCaseSensitive(record, "bench");
	const char *method = method_of(record);
	const char *proposer = json_string(candidate, "proposer"), *failed = failed_status(record);
	double speedup = json_number(bench, "speedup", NAN);
	if (isnan(speedup))
		speedup = g->baseline_ms / json_number(bench, "median_ms", NAN);
	st->tried++;
	st->failed += failed != NULL;
	tally_add(&st->methods, method[0] ? method : "unknown", failed != NULL, speedup);
	tally_add(&st->proposers, proposer ? proposer : "unknown", failed != NULL, speedup);
	if (failed)
		tally_add(&st->failures, failure_words(failed), 1, NAN);
	if (!cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(update, "incumbent")))
		return;
	size_t node = (size_t)json_number(update, "child_id", 0);
	strbuf_addstr(&st->moves, " → ");
	if (node < g->g.nnodes && strcmp(graph_node_state(g, node), child) == 0)
		add_variant(&st->moves, g, node);
	else
		strbuf_addf(&st->moves, "%.*s", SHORT_STATE, child);
	strbuf_addch(&st->moves, ' ');
	add_speedup(&st->moves, speedup, NULL);
	strbuf_addf(&st->moves, " (build %ld, iteration %.0f)", st->tried, json_number(record, "iter", NAN));
	cJSON_Delete(st->best_record);
	st->best_record = cJSON_Duplicate(record, 1);
	st->best_build = st->tried;
}

/* Why the search ended, or that it may go on. */
static void add_stop(struct strbuf *sb, const struct graph *g, const char *stopped)
{
	const struct search_params *p = &g->params;
	strbuf_addch(sb, '\n');
	if (!stopped && p->budget_builds > 0)
		strbuf_addf(sb, "The search may go on: %ld of its %ld builds are left.\n", p->budget_builds - g->builds,
			    p->budget_builds);
	else if (!stopped)
		strbuf_addstr(sb, "The search may go on (it has no build budget).\n");
	else if (strcmp(stopped, "budget") == 0)
		strbuf_addf(sb, "The search is over: its budget of %ld builds is spent.\n", p->budget_builds);
	else if (strcmp(stopped, "converged") == 0)
		strbuf_addf(sb, "The search is over: the best did not get %g %% faster in %ld iterations.\n",
			    p->improve_pct, p->converge_iters);
	else
		strbuf_addstr(sb, "The search is over: nothing new was left to try.\n");
}

/* The best variant: where it is, its time and speedup, its configuration and methods. */
static void add_best(struct strbuf *sb, const struct graph *g, const cJSON *record, long build)
{
	size_t best = g->incumbent;
	strbuf_addstr(sb, "**Best**: ");
	if (best == 0) {
		strbuf_addstr(sb, "the baseline itself; no candidate's speedup interval lay above it.\n");
		return;
	}
	const cJSON *bench = cJSON_GetObjectItemCaseSensitive(record, "bench");
	add_variant(sb, g, best);
	if (record)
		strbuf_addf(sb, ", found at build %ld (iteration %.0f)", build, json_number(record, "iter", NAN));
	strbuf_addstr(sb, ": ");
	add_3digits(sb, g->nodes[best].median_ms);
	strbuf_addstr(sb, " ms, **");
	add_speedup(sb, g->nodes[best].speedup, NULL);
	strbuf_addstr(sb, "** the baseline's ");
	add_3digits(sb, g->baseline_ms);
	strbuf_addstr(sb, " ms");
	const cJSON *ci = cJSON_GetObjectItemCaseSensitive(bench, "speedup_ci");
	if (cJSON_GetArraySize(ci) == 2) {
		strbuf_addstr(sb, " (interval ");
		add_3digits(sb, cJSON_GetArrayItem(ci, 0)->valuedouble);
		strbuf_addstr(sb, "x to ");
		add_3digits(sb, cJSON_GetArrayItem(ci, 1)->valuedouble);
		strbuf_addstr(sb, "x)");
	}
	const cJSON *config = graph_node_config(g, best), *methods = graph_node_methods(g, best), *m;
	if (cJSON_GetArraySize(config) > 0) {
		strbuf_addstr(sb, ", with ");
		add_config(sb, config);
	}
	if (cJSON_GetArraySize(methods) > 0) {
		strbuf_addstr(sb, ", its methods from the baseline ");
		cJSON_ArrayForEach(m, methods) {
			strbuf_addstr(sb, m == methods->child ? "" : " → ");
			add_method(sb, cJSON_IsString(m) ? m->valuestring : "?");
		}
	}
	strbuf_addstr(sb, ". Its files are in `best/` (a link to its variant's directory), its figures in "
			  "`best.json`.\n");
}

/* How far the model's last fit trusted each --history file (RUN/history.json, kg-propose's),
 * when the run had history. */
static void add_history(struct strbuf *sb, const struct graph *g)
{
	char *path = run_path(g->run, RUN_HISTORY);
	cJSON *doc = json_read_optional(path), *e;
	free(path);
	const cJSON *sources = cJSON_GetObjectItemCaseSensitive(doc, "sources");
	if (cJSON_GetArraySize(sources) > 0) {
		strbuf_addf(sb, "\n**History**: at its last fit (%.0f of the run's configurations), the model weighed",
			    json_number(doc, "observations", 0));
		cJSON_ArrayForEach(e, sources) {
			const char *file = json_string(e, "file");
			strbuf_addf(sb, "%s`%s` (%.0f configurations) at %.2f, %.0f %% of the run's order misordered",
				    e == sources->child ? " " : "; ", file ? file : "?", json_number(e, "configurations", 0),
				    json_number(e, "weight", 0), 100 * json_number(e, "misordered", 0));
		}
		strbuf_addf(sb, "; the run's own measurements at %.2f.\n", json_number(doc, "run_weight", 1));
	}
	cJSON_Delete(doc);
}

int trace_summary(const struct graph *g, const char *stopped)
{
	struct run_story st = {0};
	strbuf_init(&st.moves);
	struct events_reader r;
	cJSON *record;
	int rc = events_open(&r, g->run, 0, EVENTS_MUST_EXIST) == EVENTS_OPENED ? 0 : -1;
	/* A bad line of the log is reported by the reader and left out of the story: only a
	 * failed read, after which the story would be a part of the run's, leaves it unwritten. */
	while ((record = events_next(&r))) {
		story_add(&st, g, record);
		cJSON_Delete(record);
	}
	if (r.failed)
		rc = -1;
	events_reader_release(&r);
	if (rc != 0)
		goto out;

	struct strbuf sb;
	strbuf_init(&sb);
	strbuf_addf(&sb, "\n## Summary after %ld candidates\n\n", st.tried);
	add_best(&sb, g, st.best_record, st.best_build);
	if (st.moves.len)
		strbuf_addf(&sb, "\n**How the best moved**: baseline 1.00x%s.\n", st.moves.buf);
	strbuf_addf(&sb, "\n**Failed**: %ld of %ld", st.failed, st.tried);
	if (st.failures.n) /* qsort's base must not be NULL */
		qsort(st.failures.v, st.failures.n, sizeof(*st.failures.v), by_tried);
	for (size_t i = 0; i < st.failures.n; i++)
		strbuf_addf(&sb, "%s%s %ld", i ? ", " : ": ", st.failures.v[i].name, st.failures.v[i].tried);
	strbuf_addstr(&sb, ".\n");
	add_history(&sb, g);
	if (st.tried > 0) {
		add_tally_table(&sb, &st.methods, "method", 1);
		add_tally_table(&sb, &st.proposers, "proposer", 0);
	}
	add_stop(&sb, g, stopped); /* last: a line that is no table row ends the summary */
	append_trace(g, sb.buf, 0);
	strbuf_release(&sb);
out:
	tallies_release(&st.methods);
	tallies_release(&st.proposers);
	tallies_release(&st.failures);
	strbuf_release(&st.moves);
	cJSON_Delete(st.best_record);
	return rc;
}
