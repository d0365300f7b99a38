/* libtest.c: a test driver that exposes lib/ modules to the bats suites.
 * Not installed; each subcommand is a thin shell around one module's API. */
#include "common.h"

#include <errno.h>
#include <math.h>
#include <inttypes.h>
#include <stdint.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bottleneck.h"
#include "cli.h"
#include "events.h"
#include "fileio.h"
#include "jsonl.h"
#include "kargs.h"
#include "log.h"
#include "methods.h"
#include "parse.h"
#include "pyexpr.h"
#include "ptx_lines.h"
#include "ptx_regions.h"
#include "run.h"
#include "sha256.h"
#include "stream.h"
#include "t1.h"
#include "t4.h"
#include "xalloc.h"
#include "libtest.h"

/* Passes every record on; a record holding error_key (when not NULL) is reported as one the
 * tool cannot handle, and still passed on. */
static enum stream_action pass_record(struct stream *s, cJSON *record, void *ctx)
{
	const char *error_key = ctx;
	if (error_key && cJSON_HasObjectItem(record, error_key))
		stream_error(s, s->in.line, "%s: a record the tool cannot handle", error_key);
	return STREAM_PASS;
}

static int cmd_jsonl(const char *path, const char *error_key)
{
	struct stream s;
	if (stream_open(&s, path, stdout))
		return KG_EXIT_USAGE;
	stream_each(&s, pass_record, (void *)error_key);
	stream_release(&s);
	return s.status;
}

/* event_kind's kinds as the tests name them. */
static const char *const event_kind_names[] = {
	[EVENT_OTHER] = "other",	 [EVENT_EVALUATED] = "evaluated", [EVENT_REGISTERED] = "registered",
	[EVENT_EXHAUSTED] = "exhausted", [EVENT_ROOT] = "root",		  [EVENT_STOP] = "stop",
};

/* RUN's log through lib/events: "from OFFSET" or "last N" prints each record read as "LINE
 * KIND ID" (ID: candidate.id, or -), then "offset BYTES bad LINES", or "not at a record";
 * "append" appends each record of stdin. Exit 1 when a line was bad, 4 when reading failed. */
static int cmd_events(const char *run, const char *how, const char *arg)
{
	if (strcmp(how, "append") == 0) {
		struct stream s;
		cJSON *record;
		if (stream_open(&s, "-", NULL))
			return KG_EXIT_USAGE;
		while ((record = stream_next(&s))) {
			if (events_append(run, record) != 0)
				stream_fail(&s, KG_EXIT_IO);
			cJSON_Delete(record);
		}
		stream_release(&s);
		return s.status;
	}
	uint64_t n;
	if (!arg || parse_uint64(arg, UINT64_MAX, &n))
		return libtest_usage();
	struct events_reader r;
	enum events_open_status st;
	if (strcmp(how, "from") == 0)
		st = events_open(&r, run, n, 0);
	else if (strcmp(how, "last") == 0)
		st = events_open_last(&r, run, (size_t)n, 0);
	else
		return libtest_usage();
	cJSON *record;
	while ((record = events_next(&r))) {
		const char *id = json_string(cJSON_GetObjectItemCaseSensitive(record, "candidate"), "id");
		long line = events_line(&r);
		printf("%ld %s %s\n", line, event_kind_names[event_kind(record)], id ? id : "-");
		cJSON_Delete(record);
	}
	if (st == EVENTS_NOT_AT_RECORD)
		printf("not at a record\n");
	else
		printf("offset %" PRIu64 " bad %zu\n", r.offset, r.bad);
	int status = r.failed && st != EVENTS_NOT_AT_RECORD ? KG_EXIT_IO : r.bad ? KG_EXIT_INPUT : KG_EXIT_OK;
	events_reader_release(&r);
	return status;
}

/* Prints the status exit_status_merge ranks highest of its arguments, merged in order. */
static int cmd_exit_status(int argc, char **argv)
{
	int status = KG_EXIT_OK;
	for (int i = 0; i < argc; i++) {
		int64_t v;
		if (parse_int64(argv[i], 0, 255, &v)) {
			log_error("'%s' is not an exit status", argv[i]);
			return KG_EXIT_USAGE;
		}
		status = exit_status_merge(status, (int)v);
	}
	printf("%d\n", status);
	return KG_EXIT_OK;
}

/* For each record of stdin, prints json_number of KEY (%.17g); with NEW, then sets that number
 * to NEW and writes the record, to show that a number set is printed from its new value. */
static int cmd_number(const char *key, const char *new_value)
{
	struct jsonl_reader r;
	jsonl_reader_init(&r, stdin, "<stdin>");
	int status = KG_EXIT_OK;
	cJSON *record;
	enum jsonl_status st;
	while ((st = jsonl_next(&r, &record)) != JSONL_EOF && st != JSONL_IO_ERROR) {
		if (st == JSONL_BAD_LINE) {
			status = KG_EXIT_INPUT;
			continue;
		}
		printf("%.17g\n", json_number(record, key, NAN));
		cJSON *item = cJSON_GetObjectItemCaseSensitive(record, key);
		if (new_value && cJSON_IsNumber(item)) {
			cJSON_SetNumberValue(item, strtod(new_value, NULL));
			if (jsonl_write(stdout, record))
				status = KG_EXIT_IO;
		}
		cJSON_Delete(record);
	}
	jsonl_reader_release(&r);
	return st == JSONL_IO_ERROR ? KG_EXIT_IO : status;
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
		return libtest_usage();
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

/* Writes stdin to path by one of fileio's writers (tail: from offset 0). */
static int cmd_write(const char *how, const char *path)
{
	size_t len;
	char *data = file_read_all("/dev/stdin", &len);
	if (!data)
		log_die(KG_EXIT_IO, "cannot read standard input:");
	int rc = strcmp(how, "write") == 0    ? file_write(path, data, len)
		 : strcmp(how, "append") == 0 ? file_append(path, data, len)
		 : strcmp(how, "tail") == 0   ? file_write_tail(path, 0, data, len)
		 : strcmp(how, "atomic") == 0 ? file_write_atomic(path, data, len)
					      : (errno = EINVAL, -2);
	free(data);
	if (rc == -2)
		return libtest_usage();
	if (rc)
		log_die(KG_EXIT_IO, "cannot write '%s':", path);
	return KG_EXIT_OK;
}

/* Takes the GPU lock kg-bench takes (gpu_lock_path: the folder gpu_lock_dir picks, the file
 * named by the bus id), waiting at most WAIT-SEC, and runs CMD while holding it; prints the
 * lock's path, and who holds it when the wait runs out (exit 1). */
static int cmd_gpu_lock(int argc, char **argv)
{
	double wait_s;
	if (argc < 4 || parse_double(argv[2], 0, 86400, &wait_s))
		return libtest_usage();
	struct strbuf why;
	strbuf_init(&why);
	char *path = gpu_lock_path(argv[0], argv[1], &why);
	if (!path)
		log_die(KG_EXIT_ENV, "%s", why.buf);
	printf("%s\n", path);
	fflush(stdout);
	struct dirlock lock;
	if (filelock_acquire_timed(&lock, path, wait_s * 1e3, NULL) != 0) {
		if (errno != ETIMEDOUT)
			log_die(KG_EXIT_IO, "cannot lock '%s':", path);
		char *holder = filelock_holder(path);
		log_die(KG_EXIT_INPUT, "'%s' is held by %s", path, holder ? holder : "another process");
	}
	pid_t pid = fork();
	if (pid == 0) {
		execvp(argv[3], argv + 3);
		_exit(127);
	}
	int wstatus = 0;
	waitpid(pid, &wstatus, 0);
	dirlock_release(&lock);
	free(path);
	strbuf_release(&why);
	return WIFEXITED(wstatus) ? WEXITSTATUS(wstatus) : 1;
}

/* Prints the lock file kg-bench locks for the GPU with that bus id: the same function on the
 * folder this build's kg-bench uses (KG_LOCK_DIR, else the user's), so that a test holding
 * it with flock(1) stands in kg-bench's way wherever the lock moves. */
static int cmd_gpu_lock_path(int argc, char **argv)
{
	if (argc != 1)
		return libtest_usage();
	struct strbuf why;
	strbuf_init(&why);
	char *path = gpu_lock_path(KG_LOCK_DIR, argv[0], &why);
	if (!path)
		log_die(KG_EXIT_ENV, "%s", why.buf);
	printf("%s\n", path);
	free(path);
	strbuf_release(&why);
	return KG_EXIT_OK;
}

static int cmd_parse(int argc, char **argv)
{
	if (argc != 4)
		return libtest_usage();
	const char *why;
	if (strcmp(argv[0], "int64") == 0) {
		int64_t v, lo, hi;
		if (parse_int64(argv[2], INT64_MIN, INT64_MAX, &lo) || parse_int64(argv[3], INT64_MIN, INT64_MAX, &hi))
			return libtest_usage();
		if (!(why = parse_int64(argv[1], lo, hi, &v)))
			printf("%lld\n", (long long)v);
	} else if (strcmp(argv[0], "uint64") == 0) {
		uint64_t v, hi;
		if (parse_uint64(argv[3], UINT64_MAX, &hi))
			return libtest_usage();
		if (!(why = parse_uint64(argv[1], hi, &v)))
			printf("%llu\n", (unsigned long long)v);
	} else if (strcmp(argv[0], "double") == 0) {
		double v, lo, hi;
		if (parse_double(argv[2], -1e308, 1e308, &lo) || parse_double(argv[3], -1e308, 1e308, &hi))
			return libtest_usage();
		if (!(why = parse_double(argv[1], lo, hi, &v)))
			printf("%.17g\n", v);
	} else {
		return libtest_usage();
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

/* t1_count of the spec at path up to limit: "COUNT" when at most limit, else "more". */
static int cmd_t1_count(const char *path, const char *limit_text)
{
	int unreadable;
	uint64_t count, limit;
	int saturated;
	if (parse_uint64(limit_text, UINT64_MAX, &limit))
		return 2;
	struct t1_spec *spec = t1_load(path, &unreadable);
	if (!spec)
		return 1;
	int rc = t1_count(spec, limit, &count, &saturated);
	if (rc == 0 && count > limit)
		puts("more");
	else if (rc == 0)
		printf("%" PRIu64 "\n", count);
	t1_free(spec);
	return rc ? 1 : 0;
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
			m->text = NULL;
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
/* Loads SPEC and its arguments; returns the spec, or NULL after reporting why. */
static struct t1_spec *load_kargs(const char *path, struct kargs *ka)
{
	int unreadable;
	struct t1_spec *spec = t1_load(path, &unreadable);
	struct strbuf why;
	strbuf_init(&why);
	if (spec && kargs_load(spec, ka, &why)) {
		log_error("%s", why.buf);
		t1_free(spec);
		spec = NULL;
	}
	strbuf_release(&why);
	return spec;
}

static int cmd_kargs(const char *path, const char *set)
{
	struct kargs ka;
	struct t1_spec *spec = load_kargs(path, &ka);
	if (!spec)
		return KG_EXIT_INPUT;
	struct strbuf why;
	strbuf_init(&why);
	int status = KG_EXIT_OK;
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
			memset(data, karg_elem_poison_byte(a->base), karg_bytes(a));
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

/* KernelGraph.TensorMaps of SPEC evaluated for the configuration CONFIG-JSON (an object of
 * every parameter), as kg-bench evaluates them before encoding: one line per map, "ARGUMENT
 * dims D0,D1.. box B0,B1.. swizzle S", or the error. */
static int cmd_tensor_maps(const char *path, const char *config_text)
{
	struct kargs ka;
	struct t1_spec *spec = load_kargs(path, &ka);
	if (!spec)
		return KG_EXIT_INPUT;
	cJSON *config = cJSON_Parse(config_text);
	struct pyval *values = xcalloc(spec->nnames, sizeof(*values));
	int status = cJSON_IsObject(config) ? KG_EXIT_OK : KG_EXIT_USAGE;
	size_t missing;
	if (status == KG_EXIT_OK && t1_bind_config(spec, config, values, &missing) != 0) {
		log_error("CONFIG-JSON: no value of %s in its list", spec->params[missing].name);
		status = KG_EXIT_USAGE;
	}
	struct strbuf why;
	strbuf_init(&why);
	for (size_t m = 0; status == KG_EXIT_OK && m < spec->ntensor_maps; m++) {
		const struct t1_tensor_map *map = &spec->tensor_maps[m];
		const struct karg *a = NULL;
		for (size_t j = 0; j < ka.n && !a; j++)
			if (strcmp(ka.args[j].name, map->argument) == 0)
				a = &ka.args[j];
		uint64_t dims[T1_TENSOR_MAP_MAX_RANK];
		uint32_t box[T1_TENSOR_MAP_MAX_RANK];
		if (t1_tensor_map_eval(spec, map, values, a->elem_bytes / a->lanes, dims, box, &why)) {
			log_error("%s", why.buf);
			status = KG_EXIT_INPUT;
			break;
		}
		printf("%s dims", map->argument);
		for (size_t d = 0; d < map->rank; d++)
			printf("%c%" PRIu64, d ? ',' : ' ', dims[d]);
		printf(" box");
		for (size_t d = 0; d < map->rank; d++)
			printf("%c%" PRIu32, d ? ',' : ' ', box[d]);
		printf(" swizzle %d\n", map->swizzle);
	}
	strbuf_release(&why);
	free(values);
	cJSON_Delete(config);
	kargs_release(&ka);
	t1_free(spec);
	return status;
}

/* Writes argument NAME of SPEC as the host fills it for input set SET, raw, on stdout: what
 * kg-bench's GPU fills must equal byte for byte. */
static int cmd_fill(const char *path, const char *name, const char *set)
{
	struct kargs ka;
	struct t1_spec *spec = load_kargs(path, &ka);
	if (!spec)
		return KG_EXIT_INPUT;
	struct strbuf why;
	strbuf_init(&why);
	int status = KG_EXIT_INPUT;
	for (size_t k = 0; k < ka.n; k++) {
		const struct karg *a = &ka.args[k];
		if (strcmp(a->name, name) != 0)
			continue;
		unsigned char *data = xmalloc(karg_bytes(a) + 1);
		if (karg_fill(a, strtoull(set, NULL, 10), data, &why))
			log_error("%s", why.buf);
		else if (fwrite(data, 1, karg_bytes(a), stdout) == karg_bytes(a))
			status = KG_EXIT_OK;
		free(data);
	}
	kargs_release(&ka);
	strbuf_release(&why);
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

/* Philox4x32-10 of a counter (four words) and a key (two words), as lib/karg_elem.h draws
 * Random data: the words to check against Random123's known answers. */
static int cmd_philox(char **argv)
{
	uint32_t c[4], k[2], out[4];
	for (int i = 0; i < 4; i++)
		c[i] = (uint32_t)strtoul(argv[i], NULL, 0);
	for (int i = 0; i < 2; i++)
		k[i] = (uint32_t)strtoul(argv[4 + i], NULL, 0);
	karg_elem_philox(c, k, out);
	printf("%08x %08x %08x %08x\n", out[0], out[1], out[2], out[3]);
	return KG_EXIT_OK;
}

/* Prints kg-build's Region-DAG of the PTX in path, with its summary as "summary"; lines are
 * those of the .file "kernel.cu". */
static int cmd_ptx_regions(const char *path, const char *entry)
{
	size_t len;
	char *ptx = file_read_all(path, &len);
	if (!ptx)
		log_die(KG_EXIT_IO, "cannot read '%s':", path);
	cJSON *graph = ptx_regions(ptx, entry, run_variant_file(VARIANT_KERNEL));
	free(ptx);
	if (!graph)
		log_die(KG_EXIT_INPUT, "'%s' has no such entry", path);
	json_add(graph, "summary", ptx_regions_summary(graph));
	int rc = jsonl_write(stdout, graph) ? KG_EXIT_IO : KG_EXIT_OK;
	cJSON_Delete(graph);
	return rc;
}

/* Prints lib/ptx_lines' map of the PTX in path for the kernel lines [first, last] of the .file
 * "kernel.cu": {"file", "lines": [[PTX line, kernel line], ...]}, the PTX lines of those kernel
 * lines (ptx_lines_of_source) each with its kernel line (ptx_lines_source). */
static int cmd_ptx_lines(const char *path, const char *first, const char *last)
{
	int64_t lo, hi;
	if (parse_int64(first, 0, INT32_MAX, &lo) || parse_int64(last, 0, INT32_MAX, &hi))
		return libtest_usage();
	size_t len, *lines;
	char *ptx = file_read_all(path, &len);
	if (!ptx)
		log_die(KG_EXIT_IO, "cannot read '%s':", path);
	struct ptx_lines map;
	ptx_lines_init(&map, ptx, run_variant_file(VARIANT_KERNEL));
	free(ptx);
	size_t n = ptx_lines_of_source(&map, (int)lo, (int)hi, &lines);
	cJSON *out = json_object(), *pairs = cJSON_CreateArray();
	if (!pairs)
		xalloc_die();
	json_add_number(out, "file", (double)map.file);
	for (size_t k = 0; k < n; k++) {
		cJSON *pair = cJSON_CreateArray();
		if (!pair)
			xalloc_die();
		json_append(pair, cJSON_CreateNumber((double)lines[k]));
		json_append(pair, cJSON_CreateNumber(ptx_lines_source(&map, lines[k])));
		json_append(pairs, pair);
	}
	json_add(out, "lines", pairs);
	int rc = jsonl_write(stdout, out) ? KG_EXIT_IO : KG_EXIT_OK;
	cJSON_Delete(out);
	free(lines);
	ptx_lines_release(&map);
	return rc;
}

/* Prints each name's terms, as kg-relabel's matcher compares them, one line per name. */
static int cmd_method_terms(int argc, char **argv)
{
	for (int i = 0; i < argc; i++) {
		char *terms = method_terms(argv[i]);
		printf("%s\n", terms);
		free(terms);
	}
	return KG_EXIT_OK;
}

/* Prints the bottleneck class, its evidence and the method priors of the metrics at
 * metrics_path (a file that does not exist: none) and of the build record at build_path (a
 * whole record, whose "build" is read, or a build object such as build.json). */
static int cmd_bottleneck(const char *metrics_path, const char *build_path)
{
	struct bottleneck_metrics m;
	struct strbuf why;
	strbuf_init(&why);
	int have = bottleneck_metrics_load(metrics_path, &m, &why);
	if (have < 0) {
		log_error("%s", why.buf);
		strbuf_release(&why);
		return KG_EXIT_INPUT;
	}
	strbuf_release(&why);
	cJSON *doc = NULL;
	if (build_path) {
		size_t len;
		char *text = file_read_all(build_path, &len);
		if (!text)
			log_die(KG_EXIT_IO, "cannot read '%s':", build_path);
		doc = json_parse_document(build_path, text, len);
		free(text);
		if (!doc)
			return KG_EXIT_INPUT;
	}
	const cJSON *build = cJSON_GetObjectItemCaseSensitive(doc, "build");
	struct bottleneck b;
	bottleneck_classify(have ? &m : NULL, cJSON_IsObject(build) ? build : doc, &b);
	cJSON *out = bottleneck_to_json(&b);
	int rc = jsonl_write(stdout, out) ? KG_EXIT_IO : KG_EXIT_OK;
	cJSON_Delete(out);
	cJSON_Delete(doc);
	return rc;
}

int main(int argc, char **argv)
{
	log_init("kg-libtest");
	if (argc < 2)
		return libtest_usage();
	const char *cmd = argv[1];
	int status;
	if (strcmp(cmd, "expr") == 0)
		status = cmd_expr(argc - 2, argv + 2);
	else if (strcmp(cmd, "bottleneck") == 0 && (argc == 3 || argc == 4))
		status = cmd_bottleneck(argv[2], argc == 4 ? argv[3] : NULL);
	else if (strcmp(cmd, "jsonl") == 0 && (argc == 3 || argc == 4))
		status = cmd_jsonl(argv[2], argc == 4 ? argv[3] : NULL);
	else if (strcmp(cmd, "events") == 0 && (argc == 4 || argc == 5))
		status = cmd_events(argv[2], argv[3], argc == 5 ? argv[4] : NULL);
	else if (strcmp(cmd, "exit-status") == 0)
		status = cmd_exit_status(argc - 2, argv + 2);
	else if (strcmp(cmd, "json") == 0 && argc == 3)
		status = cmd_json(argv[2]);
	else if (strcmp(cmd, "number") == 0 && (argc == 3 || argc == 4))
		status = cmd_number(argv[2], argc == 4 ? argv[3] : NULL);
	else if (strcmp(cmd, "sha256") == 0 && argc == 3)
		status = cmd_sha256(argv[2]);
	else if (strcmp(cmd, "atomic-write") == 0 && argc == 3)
		status = cmd_atomic_write(argv[2]);
	else if (strcmp(cmd, "write") == 0 && argc == 4)
		status = cmd_write(argv[2], argv[3]);
	else if (strcmp(cmd, "gpu-lock") == 0)
		status = cmd_gpu_lock(argc - 2, argv + 2);
	else if (strcmp(cmd, "gpu-lock-path") == 0)
		status = cmd_gpu_lock_path(argc - 2, argv + 2);
	else if (strcmp(cmd, "lock") == 0)
		status = cmd_lock(argc - 2, argv + 2);
	else if (strcmp(cmd, "t4") == 0 && argc == 3)
		status = cmd_t4(argv[2]);
	else if (strcmp(cmd, "t1-count") == 0 && argc == 4)
		status = cmd_t1_count(argv[2], argv[3]);
	else if (strcmp(cmd, "parse") == 0)
		status = cmd_parse(argc - 2, argv + 2);
	else if (strcmp(cmd, "tensor-maps") == 0 && argc == 4)
		status = cmd_tensor_maps(argv[2], argv[3]);
	else if (strcmp(cmd, "kargs") == 0 && (argc == 3 || argc == 4))
		status = cmd_kargs(argv[2], argc == 4 ? argv[3] : NULL);
	else if (strcmp(cmd, "gp") == 0 && argc == 3)
		status = cmd_gp(argv[2]);
	else if (strcmp(cmd, "transfer") == 0 && argc >= 4)
		status = cmd_transfer(argc - 2, argv + 2);
	else if (strcmp(cmd, "harness") == 0 && argc == 3)
		status = cmd_harness(argv[2]);
	else if (strcmp(cmd, "fill") == 0 && argc == 5)
		status = cmd_fill(argv[2], argv[3], argv[4]);
	else if (strcmp(cmd, "compare") == 0 && argc == 7)
		status = cmd_compare(argv + 2);
	else if (strcmp(cmd, "half") == 0)
		status = cmd_half(argc - 2, argv + 2);
	else if (strcmp(cmd, "philox") == 0 && argc == 8)
		status = cmd_philox(argv + 2);
	else if (strcmp(cmd, "mcgs") == 0 && argc == 3)
		status = cmd_mcgs(argv[2]);
	else if (strcmp(cmd, "cuda") == 0)
		status = cmd_cuda(argc - 2, argv + 2);
	else if (strcmp(cmd, "ptx-regions") == 0 && (argc == 3 || argc == 4))
		status = cmd_ptx_regions(argv[2], argc == 4 ? argv[3] : NULL);
	else if (strcmp(cmd, "method-terms") == 0)
		status = cmd_method_terms(argc - 2, argv + 2);
	else if (strcmp(cmd, "ptx-lines") == 0 && argc == 5)
		status = cmd_ptx_lines(argv[2], argv[3], argv[4]);
	else
		return libtest_usage();
	return cli_finish(status);
}
