/* libtest.c: a test driver that exposes lib/ modules to the bats suites.
 * Not installed; each subcommand is a thin shell around one module's API. */
#include "common.h"

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli.h"
#include "fileio.h"
#include "jsonl.h"
#include "log.h"
#include "parse.h"
#include "pyexpr.h"
#include "sha256.h"
#include "t4.h"
#include "xalloc.h"

static int usage(void)
{
	fputs("usage: kg-libtest expr [--let NAME=EXPR]... < lines\n"
	      "       kg-libtest jsonl FILE|-\n"
	      "       kg-libtest json FILE\n"
	      "       kg-libtest sha256 FILE|-\n"
	      "       kg-libtest atomic-write PATH < data\n"
	      "       kg-libtest lock [--nowait] DIR CMD [ARG]...\n"
	      "       kg-libtest parse int64|uint64|double TEXT MIN MAX\n"
	      "       kg-libtest t4 PATH < results.jsonl\n",
	      stderr);
	return KG_EXIT_USAGE;
}

/* Evaluates each line of stdin as an expression, printing Python's repr of the result or
 * "error: column N: message". --let binds names, in order, to evaluated expressions. */
static int cmd_expr(int argc, char **argv)
{
	const char *names[64];
	struct pyval values[64];
	size_t n = 0;
	struct pyarena *keep = pyarena_new(), *scratch = pyarena_new();
	struct pyexpr_error err;
	int status = KG_EXIT_OK;

	for (int i = 0; i < argc; i++) {
		if (strcmp(argv[i], "--let") != 0 || i + 1 >= argc || n == ARRAY_SIZE(names))
			return usage();
		char *eq = strchr(argv[++i], '=');
		if (!eq)
			return usage();
		*eq = '\0';
		struct pyexpr *e = pyexpr_compile(eq + 1, names, n, &err);
		struct pyval v;
		if (!e || pyexpr_eval(e, values, scratch, &v, &err))
			log_die(KG_EXIT_INPUT, "--let %s: %s", argv[i], err.message);
		values[n] = pyval_copy(keep, &v);
		names[n++] = argv[i];
		pyexpr_free(e);
	}

	struct strbuf out;
	strbuf_init(&out);
	char *line = NULL;
	size_t cap = 0;
	ssize_t len;
	while ((len = getline(&line, &cap, stdin)) >= 0) {
		if (len > 0 && line[len - 1] == '\n')
			line[--len] = '\0';
		struct pyval v;
		strbuf_reset(&out);
		struct pyexpr *e = pyexpr_compile(line, names, n, &err);
		if (e && pyexpr_eval(e, values, scratch, &v, &err) == 0) {
			pyval_repr(&out, &v);
		} else {
			strbuf_addf(&out, "error: column %zu: %s", pyexpr_error_column(line, &err), err.message);
			status = KG_EXIT_INPUT;
		}
		printf("%s\n", out.buf);
		pyexpr_free(e);
		pyarena_reset(scratch);
	}
	free(line);
	strbuf_release(&out);
	pyarena_free(scratch);
	pyarena_free(keep);
	return status;
}

static int cmd_jsonl(const char *path)
{
	struct jsonl_reader r;
	if (jsonl_reader_open(&r, path))
		return KG_EXIT_USAGE;
	int status = KG_EXIT_OK;
	for (;;) {
		cJSON *record;
		enum jsonl_status st = jsonl_next(&r, &record);
		if (st == JSONL_EOF)
			break;
		if (st == JSONL_IO_ERROR) {
			status = KG_EXIT_IO;
			break;
		}
		if (st == JSONL_BAD_LINE) {
			status = KG_EXIT_INPUT;
			continue;
		}
		if (jsonl_write(stdout, record))
			status = KG_EXIT_IO;
		cJSON_Delete(record);
	}
	jsonl_reader_release(&r);
	return status;
}

static int cmd_json(const char *path)
{
	size_t len;
	char *text = file_read_all(path, &len);
	if (!text)
		log_die(KG_EXIT_USAGE, "cannot read '%s':", path);
	cJSON *doc = json_parse_document(path, text, len);
	free(text);
	if (!doc)
		return KG_EXIT_INPUT;
	int rc = jsonl_write(stdout, doc) ? KG_EXIT_IO : KG_EXIT_OK;
	cJSON_Delete(doc);
	return rc;
}

static int cmd_sha256(const char *path)
{
	size_t len;
	char *data = file_read_all(strcmp(path, "-") == 0 ? "/dev/stdin" : path, &len);
	if (!data)
		log_die(KG_EXIT_IO, "cannot read '%s':", path);
	char hex[SHA256_HEX_SIZE];
	sha256_hex(data, len, hex);
	printf("%s\n", hex);
	free(data);
	return KG_EXIT_OK;
}

static int cmd_atomic_write(const char *path)
{
	size_t len;
	char *data = file_read_all("/dev/stdin", &len);
	if (!data)
		log_die(KG_EXIT_IO, "cannot read standard input:");
	int rc = file_write_atomic(path, data, len);
	free(data);
	if (rc)
		log_die(KG_EXIT_IO, "cannot write '%s':", path);
	return KG_EXIT_OK;
}

static int cmd_lock(int argc, char **argv)
{
	int wait = 1;
	if (argc > 0 && strcmp(argv[0], "--nowait") == 0) {
		wait = 0;
		argc--;
		argv++;
	}
	if (argc < 2)
		return usage();
	struct dirlock lock;
	if (dirlock_acquire(&lock, argv[0], wait)) {
		if (errno == EWOULDBLOCK)
			log_die(KG_EXIT_INPUT, "'%s' is locked by another process", argv[0]);
		log_die(KG_EXIT_IO, "cannot lock '%s':", argv[0]);
	}
	pid_t pid = fork();
	if (pid == 0) {
		execvp(argv[1], argv + 1);
		_exit(127);
	}
	int wstatus = 0;
	waitpid(pid, &wstatus, 0);
	dirlock_release(&lock);
	return WIFEXITED(wstatus) ? WEXITSTATUS(wstatus) : 1;
}

static int cmd_parse(int argc, char **argv)
{
	if (argc != 4)
		return usage();
	const char *why;
	if (strcmp(argv[0], "int64") == 0) {
		int64_t v, lo, hi;
		if (parse_int64(argv[2], INT64_MIN, INT64_MAX, &lo) || parse_int64(argv[3], INT64_MIN, INT64_MAX, &hi))
			return usage();
		if (!(why = parse_int64(argv[1], lo, hi, &v)))
			printf("%lld\n", (long long)v);
	} else if (strcmp(argv[0], "uint64") == 0) {
		uint64_t v, hi;
		if (parse_uint64(argv[3], UINT64_MAX, &hi))
			return usage();
		if (!(why = parse_uint64(argv[1], hi, &v)))
			printf("%llu\n", (unsigned long long)v);
	} else if (strcmp(argv[0], "double") == 0) {
		double v, lo, hi;
		if (parse_double(argv[2], -1e308, 1e308, &lo) || parse_double(argv[3], -1e308, 1e308, &hi))
			return usage();
		if (!(why = parse_double(argv[1], lo, hi, &v)))
			printf("%.17g\n", v);
	} else {
		return usage();
	}
	if (why) {
		log_error("'%s': %s", argv[1], why);
		return KG_EXIT_USAGE;
	}
	return KG_EXIT_OK;
}

static double number_or_nan(const cJSON *obj, const char *key)
{
	const cJSON *item = cJSON_GetObjectItemCaseSensitive(obj, key);
	return cJSON_IsNumber(item) ? item->valuedouble : NAN;
}

/* Reads one result per line (the fields of struct t4_result, times with an _ms suffix)
 * and writes them as one T4 document to path. */
static int cmd_t4(const char *path)
{
	struct jsonl_reader r;
	jsonl_reader_init(&r, stdin, "<stdin>");
	cJSON *doc = t4_new(), *line;
	int status = KG_EXIT_OK;
	enum jsonl_status st;
	while ((st = jsonl_next(&r, &line)) != JSONL_EOF) {
		if (st != JSONL_RECORD) {
			status = KG_EXIT_INPUT;
			if (st == JSONL_IO_ERROR)
				break;
			continue;
		}
		struct t4_result res = {
			.compilation_ms = number_or_nan(line, "compilation_ms"),
			.framework_ms = number_or_nan(line, "framework_ms"),
			.search_algorithm_ms = number_or_nan(line, "search_algorithm_ms"),
			.validation_ms = number_or_nan(line, "validation_ms"),
			.correctness = number_or_nan(line, "correctness"),
		};
		const cJSON *item = cJSON_GetObjectItemCaseSensitive(line, "timestamp");
		res.timestamp = cJSON_IsString(item) ? item->valuestring : NULL;
		res.configuration = cJSON_GetObjectItemCaseSensitive(line, "configuration");
		item = cJSON_GetObjectItemCaseSensitive(line, "invalidity");
		if (!cJSON_IsString(item) || t4_invalidity_parse(item->valuestring, &res.invalidity))
			log_die(KG_EXIT_INPUT, "<stdin>:%ld: invalidity: not a T4 invalidity", r.line);

		const cJSON *objectives = cJSON_GetObjectItemCaseSensitive(line, "objectives");
		const char *names[16];
		cJSON_ArrayForEach(item, objectives)
			if (res.nobjectives < ARRAY_SIZE(names))
				names[res.nobjectives++] = item->valuestring;
		res.objectives = names;

		const cJSON *runtimes = cJSON_GetObjectItemCaseSensitive(line, "runtimes_ms");
		double samples[256];
		cJSON_ArrayForEach(item, runtimes)
			if (res.nruntimes < ARRAY_SIZE(samples))
				samples[res.nruntimes++] = item->valuedouble;
		res.runtimes_ms = samples;

		const cJSON *measurements = cJSON_GetObjectItemCaseSensitive(line, "measurements");
		struct t4_measurement ms[16];
		cJSON_ArrayForEach(item, measurements) {
			if (res.nmeasurements == ARRAY_SIZE(ms))
				break;
			struct t4_measurement *m = &ms[res.nmeasurements++];
			m->name = cJSON_GetObjectItemCaseSensitive(item, "name")->valuestring;
			m->value = cJSON_GetObjectItemCaseSensitive(item, "value")->valuedouble;
			m->unit = cJSON_GetObjectItemCaseSensitive(item, "unit")->valuestring;
		}
		res.measurements = ms;
		t4_add(doc, &res);
		cJSON_Delete(line);
	}
	jsonl_reader_release(&r);
	if (t4_write_file(doc, path))
		log_die(KG_EXIT_IO, "cannot write '%s':", path);
	cJSON_Delete(doc);
	return status;
}

int main(int argc, char **argv)
{
	log_init("kg-libtest");
	if (argc < 2)
		return usage();
	const char *cmd = argv[1];
	int status;
	if (strcmp(cmd, "expr") == 0)
		status = cmd_expr(argc - 2, argv + 2);
	else if (strcmp(cmd, "jsonl") == 0 && argc == 3)
		status = cmd_jsonl(argv[2]);
	else if (strcmp(cmd, "json") == 0 && argc == 3)
		status = cmd_json(argv[2]);
	else if (strcmp(cmd, "sha256") == 0 && argc == 3)
		status = cmd_sha256(argv[2]);
	else if (strcmp(cmd, "atomic-write") == 0 && argc == 3)
		status = cmd_atomic_write(argv[2]);
	else if (strcmp(cmd, "lock") == 0)
		status = cmd_lock(argc - 2, argv + 2);
	else if (strcmp(cmd, "t4") == 0 && argc == 3)
		status = cmd_t4(argv[2]);
	else if (strcmp(cmd, "parse") == 0)
		status = cmd_parse(argc - 2, argv + 2);
	else
		return usage();
	return cli_finish(status);
}
