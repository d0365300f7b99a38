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
#include "kargs.h"
#include "log.h"
#include "parse.h"
#include "pyexpr.h"
#include "sha256.h"
#include "t1.h"
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
	      "       kg-libtest t4 PATH < results.jsonl\n"
	      "       kg-libtest kargs SPEC [INPUT-SET]\n"
	      "       kg-libtest compare TYPE ABS-TOL REL-TOL OUT-VALUES REF-VALUES\n"
	      "       kg-libtest half VALUE...\n",
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

static const char *const memory_names[] = {"Scalar", "Vector", "Local", "Symbol"};
static const char *const access_names[] = {"ReadOnly", "WriteOnly", "ReadWrite"};
static const char *const fill_names[] = {"Constant", "Random", "Generator", "BinaryRaw"};

/* The first values of a filled buffer, as %g, and the sum of them all. */
static void print_values(const struct karg *a, const unsigned char *data)
{
	size_t lane = a->elem_bytes / a->lanes, n = a->count * a->lanes;
	double sum = 0;
	for (size_t i = 0; i < n && a->base != KARG_CUSTOM; i++) {
		float f;
		double v;
		switch (a->base) {
		case KARG_F32: memcpy(&f, data + i * lane, 4); v = f; break;
		case KARG_F64: memcpy(&v, data + i * lane, 8); break;
		case KARG_F16: { uint16_t h; memcpy(&h, data + i * lane, 2); v = half_to_float(h); break; }
		case KARG_I32: { int32_t x; memcpy(&x, data + i * lane, 4); v = x; break; }
		case KARG_U8: case KARG_BOOL: v = data[i * lane]; break;
		case KARG_I64: { int64_t x; memcpy(&x, data + i * lane, 8); v = (double)x; break; }
		default: { uint32_t x = 0; memcpy(&x, data + i * lane, lane < 4 ? lane : 4); v = x; break; }
		}
		if (i < 4)
			printf(" %g", v);
		sum += v;
	}
	printf(" ... sum %.6g\n", sum);
}

/* Prints each argument of SPEC as kg-bench sees it, and its data for an input set. */
static int cmd_kargs(const char *path, const char *set)
{
	int unreadable;
	struct t1_spec *spec = t1_load(path, &unreadable);
	if (!spec)
		return KG_EXIT_INPUT;
	struct kargs ka;
	struct strbuf why;
	strbuf_init(&why);
	int status = KG_EXIT_OK;
	if (kargs_load(spec, &ka, &why)) {
		log_error("%s", why.buf);
		strbuf_release(&why);
		t1_free(spec);
		return KG_EXIT_INPUT;
	}
	printf("dynamic_smem %zu\n", ka.dynamic_smem);
	for (size_t k = 0; k < ka.n; k++) {
		const struct karg *a = &ka.args[k];
		printf("%s: %s x%zu count %zu bytes %zu %s %s %s%s tol %g %g\n", a->name, karg_base_name(a->base), a->lanes,
		       a->count, karg_bytes(a), memory_names[a->memory], access_names[a->access], fill_names[a->fill],
		       karg_is_output(a) ? " output" : "", a->abs_tol, a->rel_tol);
		if (a->memory == KARG_LOCAL)
			continue;
		unsigned char *data = xmalloc(karg_bytes(a) + 1);
		strbuf_reset(&why);
		if (karg_fill(a, set ? strtoull(set, NULL, 10) : 0, data, &why)) {
			log_error("%s", why.buf);
			status = KG_EXIT_INPUT;
		} else {
			printf("  data");
			print_values(a, data);
		}
		if (karg_is_output(a)) {
			karg_poison(a, data);
			printf("  poisoned");
			print_values(a, data);
		}
		free(data);
	}
	for (size_t j = 0; j < ka.nrefs; j++) {
		const struct karg *a = &ka.refs[j], *t = &ka.args[ka.ref_target[j]];
		unsigned char *data = xmalloc(karg_bytes(a) + 1);
		strbuf_reset(&why);
		printf("reference %s for %s: %s, tol %g %g\n", a->name, t->name, fill_names[a->fill], t->abs_tol, t->rel_tol);
		if (karg_fill(a, 0, data, &why)) {
			log_error("%s", why.buf);
			status = KG_EXIT_INPUT;
		} else {
			printf("  data");
			print_values(a, data);
		}
		free(data);
	}
	strbuf_release(&why);
	kargs_release(&ka);
	t1_free(spec);
	return status;
}

/* Compares two lists of numbers as outputs of TYPE (float, half, double, int32). */
static int cmd_compare(char **argv)
{
	struct karg a = {.lanes = 1};
	const char *type = argv[0];
	a.base = strcmp(type, "half") == 0 ? KARG_F16 : strcmp(type, "double") == 0 ? KARG_F64
		 : strcmp(type, "int32") == 0 ? KARG_I32 : KARG_F32;
	a.elem_bytes = a.base == KARG_F16 ? 2 : a.base == KARG_F64 ? 8 : 4;
	a.abs_tol = strtod(argv[1], NULL);
	a.rel_tol = strtod(argv[2], NULL);
	unsigned char out[64 * 8], ref[64 * 8];
	const char *lists[2] = {argv[3], argv[4]};
	unsigned char *bufs[2] = {out, ref};
	size_t counts[2] = {0, 0};
	for (int l = 0; l < 2; l++) {
		char *copy = xstrdup(lists[l]), *save = NULL;
		for (char *tok = strtok_r(copy, " ", &save); tok && counts[l] < 64; tok = strtok_r(NULL, " ", &save)) {
			double v = strtod(tok, NULL);
			unsigned char *p = bufs[l] + counts[l]++ * a.elem_bytes;
			if (a.base == KARG_F16) { uint16_t h = half_from_float((float)v); memcpy(p, &h, 2); }
			else if (a.base == KARG_F64) memcpy(p, &v, 8);
			else if (a.base == KARG_I32) { int32_t x = (int32_t)v; memcpy(p, &x, 4); }
			else { float f = (float)v; memcpy(p, &f, 4); }
		}
		free(copy);
	}
	a.count = counts[0] < counts[1] ? counts[0] : counts[1];
	struct karg_diff d;
	karg_compare(&a, out, ref, &d);
	printf("passed %d bad %zu first_bad %zu max_abs_err %g max_rel_err %g ref_max %g\n", d.passed, d.bad,
	       d.passed ? 0 : d.first_bad, d.max_abs_err, d.max_rel_err, d.ref_max);
	return KG_EXIT_OK;
}

/* Rounds each value to half precision and back, printing the half's bits and value. */
static int cmd_half(int argc, char **argv)
{
	for (int k = 0; k < argc; k++) {
		uint16_t h = half_from_float(strtof(argv[k], NULL));
		printf("%s 0x%04x %.9g\n", argv[k], h, half_to_float(h));
	}
	return KG_EXIT_OK;
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
	else if (strcmp(cmd, "kargs") == 0 && (argc == 3 || argc == 4))
		status = cmd_kargs(argv[2], argc == 4 ? argv[3] : NULL);
	else if (strcmp(cmd, "compare") == 0 && argc == 7)
		status = cmd_compare(argv + 2);
	else if (strcmp(cmd, "half") == 0)
		status = cmd_half(argc - 2, argv + 2);
	else
		return usage();
	return cli_finish(status);
}
