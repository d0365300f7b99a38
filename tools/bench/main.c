/* main.c (kg-bench): runs each built candidate on the GPU, checks it against the baseline and
 * times both, in a worker process that a faulting or hanging kernel cannot take down with it. */
#include "common.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli.h"
#include "clock.h"
#include "events.h"
#include "export.h"
#include "fileio.h"
#include "jsonl.h"
#include "log.h"
#include "parse.h"
#include "process.h"
#include "replay.h"
#include "run.h"
#include "stream.h"
#include "worker.h"
#include "xalloc.h"

struct options {
	const char *run_dir;	 /* --run */
	const char *replay_path; /* --replay */
	int calibrate;		 /* --calibrate */
	int devices;		 /* --devices */
	int t4;			 /* --t4 */
	double watchdog_s;	 /* --watchdog; 0: the larger of 10 s and 100x the baseline */
	long metrics_every;	 /* --metrics (1), --metrics-every N; 0: no hardware metrics */
	struct bench_settings settings;
};

static void usage(FILE *fp)
{
	fputs("Usage: kg-bench [OPTION]... [FILE]\n"
	      "       kg-bench --calibrate [--device N]\n"
	      "       kg-bench --devices\n"
	      "       kg-bench --t4 [--run DIR] [FILE]\n"
	      "Run, check and time every record whose build.status is \"ok\" (from kg-build), adding\n"
	      "a \"bench\" object; other records pass through. Reads FILE or stdin, writes stdout.\n"
	      "\n"
	      "Each candidate is checked first, on the GPU: on fresh random input sets (made on the\n"
	      "device; the baseline computes each one's expected outputs) and on the spec's own, with\n"
	      "outputs poisoned (NaN, or 0xA5 bytes) before the launch, every output element is\n"
	      "compared with the expected one (|out - ref| <= atol + rtol |ref|, from\n"
	      "KernelGraph.Tolerance or the type), inputs must come back unchanged and the guard\n"
	      "bytes around every buffer untouched. Then the baseline and the candidate are timed\n"
	      "interleaved, by CUPTI and CUDA events, each sample after an L2 flush, until the\n"
	      "median's relative standard error is under --noise or --budget is spent; every timed\n"
	      "launch gets poisoned outputs too, and chosen ones (at least three, the last included)\n"
	      "are verified. The baseline is the record whose build says \"baseline\": true; kg-bench\n"
	      "keeps it in RUN/baseline.json and its outputs in RUN/reference/, and every sample in\n"
	      "variants/STATE/bench.json.\n"
	      "\n"
	      "  -r, --run DIR          the run directory of records that have no \"run\"; its buffers\n"
	      "                         and reference are readied before the first record comes\n"
	      "  -d, --device N         the GPU (CUDA ordinal; default 0)\n"
	      "      --hot              no L2 flush before each sample\n"
	      "  -b, --budget SEC       GPU time for one record's samples (default 1)\n"
	      "      --min-samples N    at least N samples of each kernel (default 10)\n"
	      "      --noise PCT        stop sampling under this relative standard error of the\n"
	      "                         median, in percent (default 0.5)\n"
	      "      --input-sets N     fresh random input sets per check (default 2)\n"
	      "      --metrics          collect the hardware metrics of every candidate that passes\n"
	      "                         (CUPTI's range profiler, in passes of their own after its\n"
	      "                         timing) into bench.metrics and variants/STATE/metrics.json,\n"
	      "                         and its PC samples by kernel.cu line (one more replay)\n"
	      "                         into variants/STATE/lines.json\n"
	      "      --metrics-every N  only of every Nth candidate the run evaluates, the baseline\n"
	      "                         and each that beats the run's best speedup (RUN/best.json)\n"
	      "      --gpu-wait SEC     wait at most SEC for the GPU's lock, which one record at a\n"
	      "                         time holds (every kg-bench on the machine shares it: see\n"
	      "                         the README's reliability section); then the record is an\n"
	      "                         error naming who holds it (default 600; 0: no wait)\n"
	      "  -w, --watchdog SEC     a kernel silent this long is killed (default: the larger of\n"
	      "                         10 s and 100 times the baseline's median)\n"
	      "      --replay FILE      answer from recorded measurements (a T4 file, or an\n"
	      "                         events.jsonl), without a GPU: by the build's state when\n"
	      "                         the table measured it, else by its configuration when its\n"
	      "                         source is the spec's kernel (build.edited false); the\n"
	      "                         records of a run made with kg-init --replay are answered\n"
	      "                         from its RUN/replay.table without it\n"
	      "      --calibrate        measure the GPU's copy bandwidth and keep it in the cache\n"
	      "                         ($XDG_CACHE_HOME/kernelgraph/devices/), for pct_peak_bw\n"
	      "      --devices          list the GPUs CUDA sees (as CUDA_VISIBLE_DEVICES names\n"
	      "                         them), a JSON line each: device (the ordinal --device\n"
	      "                         takes), name, bus_id, capability, memory_bytes\n"
	      "      --t4               measure nothing: write the measured and refused records\n"
	      "                         of FILE (an events.jsonl, say) as one T4 document, with\n"
	      "                         the raw samples of variants/STATE/bench.json\n"
	      "  -q, --quiet            print errors only\n"
	      "  -v, --verbose          say more on stderr (twice: debug)\n"
	      "  -h, --help             print this help and exit\n"
	      "  -V, --version          print the version and exit\n"
	      "\n"
	      "bench.status is ok, incorrect (check.argument, first_bad, max_abs_err say where),\n"
	      "crashed (the kernel faulted), timeout (the watchdog fired) or error.\n"
	      "bench.metrics.status is ok, or unavailable with a why (no profiling API, no permission\n"
	      "to read the GPU's counters: ERR_NVGPUCTRPERM); a metric that cannot be collected is\n"
	      "named in bench.metrics.unavailable, never given a value, and the record's status and\n"
	      "times stay as measured; so do they when PC sampling fails (bench.metrics.lines.why).\n"
	      "--replay answers carry no metrics (nothing runs).\n"
	      "\n"
	      "Exit status: 0 every record handled; 1 some record could not be, and was reported:\n"
	      "one without a run (passed on as it is), or one given an error record (a variant the\n"
	      "replay table cannot answer: a configuration it lacks, a code edit; without --replay,\n"
	      "a build kg-build --no-compile made); 2 usage error; 3 no GPU for a record to measure;\n"
	      "4 input or output failed.\n",
	      fp);
}

static void parse_options(int argc, char **argv, struct options *opt)
{
	enum { OPT_HOT = 256, OPT_MIN_SAMPLES, OPT_NOISE, OPT_INPUT_SETS, OPT_REPLAY, OPT_CALIBRATE, OPT_DEVICES, OPT_T4, OPT_METRICS,
	       OPT_METRICS_EVERY, OPT_GPU_WAIT };
	static const struct option longopts[] = {
		{"budget", required_argument, NULL, 'b'},
		{"calibrate", no_argument, NULL, OPT_CALIBRATE},
		{"devices", no_argument, NULL, OPT_DEVICES},
		{"device", required_argument, NULL, 'd'},
		{"gpu-wait", required_argument, NULL, OPT_GPU_WAIT},
		{"help", no_argument, NULL, 'h'},
		{"hot", no_argument, NULL, OPT_HOT},
		{"input-sets", required_argument, NULL, OPT_INPUT_SETS},
		{"metrics", no_argument, NULL, OPT_METRICS},
		{"metrics-every", required_argument, NULL, OPT_METRICS_EVERY},
		{"min-samples", required_argument, NULL, OPT_MIN_SAMPLES},
		{"noise", required_argument, NULL, OPT_NOISE},
		{"quiet", no_argument, NULL, 'q'},
		{"replay", required_argument, NULL, OPT_REPLAY},
		{"run", required_argument, NULL, 'r'},
		{"t4", no_argument, NULL, OPT_T4},
		{"verbose", no_argument, NULL, 'v'},
		{"version", no_argument, NULL, 'V'},
		{"watchdog", required_argument, NULL, 'w'},
		{NULL, 0, NULL, 0},
	};
	struct bench_settings *s = &opt->settings;
	const char *why;
	int64_t i64;
	double d;
	int c;
	s->budget_ms = 1000;
	s->min_samples = 10;
	s->noise = 0.005;
	s->input_sets = 2;
	s->gpu_wait_s = 600;
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":b:d:hqr:vVw:", longopts, NULL)) != -1) {
		switch (c) {
		case 'b':
			if ((why = parse_double(optarg, 0.001, 3600, &d)))
				cli_usage_error("--budget: '%s': %s", optarg, why);
			s->budget_ms = d * 1e3;
			break;
		case OPT_CALIBRATE: opt->calibrate = 1; break;
		case OPT_DEVICES: opt->devices = 1; break;
		case 'd':
			if ((why = parse_int64(optarg, 0, 1023, &i64)))
				cli_usage_error("--device: '%s': %s", optarg, why);
			s->device = (int)i64;
			break;
		case OPT_GPU_WAIT:
			if ((why = parse_double(optarg, 0, 86400, &d)))
				cli_usage_error("--gpu-wait: '%s': %s", optarg, why);
			s->gpu_wait_s = d;
			break;
		case 'h': usage(stdout); exit(cli_finish(KG_EXIT_OK));
		case OPT_HOT: s->hot = 1; break;
		case OPT_INPUT_SETS:
			if ((why = parse_int64(optarg, 1, 64, &i64)))
				cli_usage_error("--input-sets: '%s': %s", optarg, why);
			s->input_sets = (size_t)i64;
			break;
		case OPT_METRICS:
		case OPT_METRICS_EVERY:
			if (opt->metrics_every)
				cli_usage_error("--metrics and --metrics-every: give one, once");
			if (c == OPT_METRICS_EVERY && (why = parse_int64(optarg, 1, 1000000, &i64)))
				cli_usage_error("--metrics-every: '%s': %s", optarg, why);
			opt->metrics_every = c == OPT_METRICS ? 1 : (long)i64;
			break;
		case OPT_MIN_SAMPLES:
			if ((why = parse_int64(optarg, 1, 100000, &i64)))
				cli_usage_error("--min-samples: '%s': %s", optarg, why);
			s->min_samples = (size_t)i64;
			break;
		case OPT_NOISE:
			if ((why = parse_double(optarg, 0.001, 100, &d)))
				cli_usage_error("--noise: '%s': %s", optarg, why);
			s->noise = d / 100;
			break;
		case 'q': log_quieter(); break;
		case 'r': opt->run_dir = optarg; break;
		case OPT_REPLAY: opt->replay_path = optarg; break;
		case OPT_T4: opt->t4 = 1; break;
		case 'v': log_louder(); break;
		case 'V': cli_print_version(); exit(cli_finish(KG_EXIT_OK));
		case 'w':
			if ((why = parse_double(optarg, 0.01, 86400, &opt->watchdog_s)))
				cli_usage_error("--watchdog: '%s': %s", optarg, why);
			break;
		default: cli_option_error(c, argv);
		}
	}
	if (argc - optind > 1)
		cli_usage_error("unexpected argument '%s'", argv[optind + 1]);
	if (opt->devices && (opt->replay_path || opt->calibrate || opt->t4 || opt->metrics_every || optind < argc))
		cli_usage_error("--devices lists the GPUs: it takes no input and no other mode");
	if (opt->calibrate && (opt->replay_path || optind < argc))
		cli_usage_error("--calibrate takes no input and no --replay");
	if (opt->t4 && (opt->replay_path || opt->calibrate))
		cli_usage_error("--t4 measures nothing: it takes no --replay or --calibrate");
	if (opt->metrics_every && (opt->t4 || opt->calibrate))
		cli_usage_error("--metrics and --metrics-every profile candidates: not with --t4 or --calibrate");
}

/* ---------------------------------------------------------------- the worker, from outside */

struct worker {
	pid_t pid;	      /* 0 when none runs */
	int ready;	      /* it said it opened the GPU */
	int to, from;	      /* request and answer pipes */
	struct strbuf unread; /* bytes read from the answer pipe beyond the last full line */
	char *device;	      /* the GPU's name, once ready */
};


/* Reads the worker's next answer, waiting at most timeout_s for a line; a progress line
 * ({"progress": true}: the worker is alive, waiting for the GPU's lock or a long kernel)
 * restarts the wait. Returns the parsed line, or NULL on timeout (*timed_out set) or when the
 * worker closed its end. */
static cJSON *read_reply(struct worker *w, double timeout_s, int *timed_out)
{
	double deadline = monotonic_ms() / 1e3 + timeout_s;
	*timed_out = 0;
	for (;;) {
		char *nl = memchr(w->unread.buf, '\n', w->unread.len);
		if (nl) {
			size_t len = (size_t)(nl - w->unread.buf) + 1;
			cJSON *json = cJSON_ParseWithLength(w->unread.buf, len - 1);
			memmove(w->unread.buf, w->unread.buf + len, w->unread.len - len + 1);
			w->unread.len -= len;
			if (!cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(json, "progress")))
				return json ? json : cJSON_CreateObject();
			cJSON_Delete(json);
			deadline = monotonic_ms() / 1e3 + timeout_s;
			continue;
		}
		double left = deadline - monotonic_ms() / 1e3;
		if (left <= 0) {
			*timed_out = 1;
			return NULL;
		}
		struct pollfd p = {.fd = w->from, .events = POLLIN};
		int ready = poll(&p, 1, (int)(left * 1e3) + 1);
		if (ready < 0 && errno != EINTR)
			return NULL;
		if (ready <= 0)
			continue;
		char chunk[4096];
		ssize_t got = read(w->from, chunk, sizeof(chunk));
		if (got < 0 && errno == EINTR)
			continue;
		if (got <= 0)
			return NULL;
		strbuf_add(&w->unread, chunk, (size_t)got);
	}
}

/* Collects a worker that has ended or is ending. */
static void reap_worker(struct worker *w, int *status)
{
	close(w->to); /* first: a worker waiting for its next request then sees the end */
	int st = process_wait(w->pid);
	if (status)
		*status = st;
	close(w->from);
	strbuf_reset(&w->unread);
	w->pid = 0;
	w->ready = 0;
}

static void stop_worker(struct worker *w)
{
	if (!w->pid)
		return;
	kill(w->pid, SIGKILL);
	reap_worker(w, NULL);
}

/* Forks a worker, which opens the GPU. Returns 0, or -1 after reporting why it cannot. */
static int spawn_worker(struct worker *w, const struct bench_settings *settings)
{
	int to[2];
	if (pipe2(to, O_CLOEXEC) != 0)
		return log_error("cannot create a pipe:");
	int from;
	pid_t pid = process_fork_piped(&from);
	if (pid < 0)
		return log_error("cannot start a worker process:");
	if (pid == 0) {
		close(to[1]);
		signal(SIGPIPE, SIG_DFL);
		worker_main(to[0], from, settings);
	}
	close(to[0]);
	w->pid = pid;
	w->to = to[1];
	w->from = from;
	return 0;
}

/* A worker that has opened the GPU: forked now unless one was, then waited for. Returns
 * 0, or -1 after reporting why there is no GPU to bench on. */
static int start_worker(struct worker *w, const struct bench_settings *settings)
{
	if (w->ready)
		return 0;
	if (!w->pid && spawn_worker(w, settings) != 0)
		return -1;
	int timed_out;
	cJSON *ready = read_reply(w, 120, &timed_out);
	const cJSON *ok = cJSON_GetObjectItemCaseSensitive(ready, "ready");
	const cJSON *device = cJSON_GetObjectItemCaseSensitive(ready, "device");
	const cJSON *error = cJSON_GetObjectItemCaseSensitive(ready, "error");
	int rc = 0;
	if (cJSON_IsTrue(ok) && cJSON_IsString(device)) {
		free(w->device);
		w->device = xstrdup(device->valuestring);
		log_info("benching on %s (device %d)", w->device, settings->device);
		w->ready = 1;
	} else {
		rc = log_error("%s", cJSON_IsString(error) ? error->valuestring
					 : timed_out ? "the GPU did not answer within 120 s"
						     : "the worker process ended before opening the GPU");
		stop_worker(w);
	}
	cJSON_Delete(ready);
	return rc;
}

/* The watchdog: as given, or the larger of 10 s and 100 times the run's baseline. */
static double watchdog_for(const struct options *opt, const char *run)
{
	if (opt->watchdog_s > 0)
		return opt->watchdog_s;
	char *path = run_path(run, RUN_BASELINE);
	cJSON *doc = json_read_file(path);
	double median_ms = cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(doc, "median_ms"));
	cJSON_Delete(doc);
	free(path);
	return isnan(median_ms) || median_ms * 0.1 < 10 ? 10 : median_ms * 0.1;
}

static cJSON *failure(const char *status, const char *error, const char *device)
{
	cJSON *bench = cJSON_CreateObject();
	if (!bench || !cJSON_AddStringToObject(bench, "status", status) || !cJSON_AddStringToObject(bench, "error", error) ||
	    (device && !cJSON_AddStringToObject(bench, "device", device)))
		xalloc_die();
	return bench;
}

/* Sends one record's build to the worker and waits for its bench, restarting the worker
 * after a fault or a hang; the worker collects its hardware metrics when it passes with a
 * speedup over metrics_above (NAN: never). Returns the bench object, or NULL when no GPU
 * can be opened. */
static cJSON *bench_on_gpu(struct worker *w, const struct options *opt, const char *run, const cJSON *build,
			   double metrics_above)
{
	if (start_worker(w, &opt->settings) != 0)
		return NULL;
	cJSON *request = cJSON_CreateObject();
	if (!request || !cJSON_AddStringToObject(request, "run", run) ||
	    !cJSON_AddItemToObject(request, "build", cJSON_Duplicate(build, 1)) ||
	    !cJSON_AddBoolToObject(request, "baseline", cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(build, "baseline"))))
		xalloc_die();
	if (!isnan(metrics_above))
		json_add_number(request, "metrics_above", metrics_above);
	char *text = cJSON_PrintUnformatted(request);
	cJSON_Delete(request);
	struct strbuf line;
	strbuf_init(&line);
	strbuf_addf(&line, "%s\n", text);
	cJSON_free(text);
	/* A worker that died since its last answer must not take kg-bench with it (SIGPIPE). */
	void (*previous)(int) = signal(SIGPIPE, SIG_IGN);
	ssize_t sent = write(w->to, line.buf, line.len);
	signal(SIGPIPE, previous);
	strbuf_release(&line);
	double watchdog = watchdog_for(opt, run);
	cJSON *bench = NULL;
	while (!bench) {
		int timed_out = 0;
		cJSON *reply = sent < 0 ? NULL : read_reply(w, watchdog, &timed_out);
		if (!reply) {
			int status = 0;
			if (!timed_out)
				reap_worker(w, &status);
			char msg[256];
			if (timed_out)
				snprintf(msg, sizeof(msg), "no progress for %g s: the kernel hung and its process was killed", watchdog);
			else if (WIFSIGNALED(status))
				snprintf(msg, sizeof(msg), "the worker process died of signal %d (%s)", WTERMSIG(status),
					 strsignal(WTERMSIG(status)));
			else
				snprintf(msg, sizeof(msg), "the worker process ended (status %d) without an answer", WEXITSTATUS(status));
			bench = failure(timed_out ? "timeout" : "crashed", msg, w->device);
			stop_worker(w);
			break;
		}
		cJSON *b = cJSON_DetachItemFromObjectCaseSensitive(reply, "bench");
		cJSON_Delete(reply);
		bench = b; /* NULL for a line without one: wait on */
	}
	const cJSON *status = cJSON_GetObjectItemCaseSensitive(bench, "status");
	if (cJSON_IsString(status) && (strcmp(status->valuestring, "crashed") == 0 || strcmp(status->valuestring, "error") == 0)) {
		/* The worker ends after any CUDA error; collect it so the next record gets a new one. */
		if (w->pid)
			reap_worker(w, NULL);
	}
	return bench;
}

/* ---------------------------------------------------------------- records */

/* What --metrics-every knows of a run: the candidates it has evaluated and its best speedup. */
struct metrics_run {
	char *dir;
	long evaluated;
	double best;
};

struct bencher {
	const struct options *opt;
	struct worker worker;
	struct metrics_run *mruns; /* the runs met, for --metrics-every */
	size_t nmruns;
	struct replay *replay;	    /* --replay */
	struct run *replayed;	    /* the runs met, for those made with kg-init --replay */
	size_t nreplayed;
	struct replay_edits *edits; /* the code edits among the records read, for replays */
	struct stream in;
};

/* variants/STATE/bench.json of a replayed answer, as a measured one has: the summary and
 * the table's raw samples (so that kg-bench --t4 exports them). */
static void keep_recorded_samples(const char *run_dir, const cJSON *build, const cJSON *bench, const cJSON *runtimes)
{
	const char *dir = json_string(build, "dir");
	if (!dir)
		return;
	cJSON *doc = cJSON_Duplicate(bench, 1), *raw = json_object();
	json_add(raw, "recorded_ms", cJSON_Duplicate(runtimes, 1));
	json_add(doc, "candidate_ms", raw);
	char *path = xasprintf("%s/%s/%s", run_dir, dir, run_variant_file(VARIANT_BENCH));
	if (json_write_file(path, doc, 1) != 0)
		log_warn("cannot write '%s':", path);
	free(path);
	cJSON_Delete(doc);
}

/* The replayed answer for a record with a successful build: the table's measurement of its
 * state, or of its configuration when its source is the spec's kernel; else an error record. */
static cJSON *replay_bench(struct bencher *b, const struct replay *table, const char *table_path,
			   const cJSON *record, long line, const char *run_dir)
{
	const cJSON *build = cJSON_GetObjectItemCaseSensitive(record, "build");
	const cJSON *config = cJSON_GetObjectItemCaseSensitive(build, "config");
	const char *state = json_string(build, "state");
	int edited = replay_edited(record, b->edits);
	cJSON *runtimes;
	cJSON *bench = replay_lookup(table, config, state, edited, &runtimes);
	if (bench && runtimes && run_dir)
		keep_recorded_samples(run_dir, build, bench, runtimes);
	cJSON_Delete(runtimes);
	if (bench)
		return bench;
	char *msg;
	if (edited) {
		msg = xasprintf("the replay table %s holds configurations of the unedited kernel; this variant's source "
				"differs (a code edit) and the table has no measurement of its state",
				table_path);
	} else {
		char *key = cJSON_IsObject(config) ? replay_key(config) : xstrdup("(none)");
		msg = xasprintf("configuration %s is not in the replay table %s", key, table_path);
		free(key);
	}
	stream_error(&b->in, line, "%s", msg);
	bench = failure("error", msg, NULL);
	if (!cJSON_AddBoolToObject(bench, "replayed", 1))
		xalloc_die();
	free(msg);
	return bench;
}

/* The candidates the run has evaluated (events.h: its log's EVENT_EVALUATED records). A line
 * a kill cut short is reported and not counted. */
static void count_evaluated(cJSON *record, void *ctx)
{
	long *n = ctx;
	*n += event_kind(record) == EVENT_EVALUATED;
	cJSON_Delete(record);
}

/* The run's --metrics-every state, read from its files the first time it is met. */
static struct metrics_run *metrics_run_for(struct bencher *b, const char *dir)
{
	for (size_t k = 0; k < b->nmruns; k++)
		if (strcmp(b->mruns[k].dir, dir) == 0)
			return &b->mruns[k];
	b->mruns = xreallocarray(b->mruns, b->nmruns + 1, sizeof(*b->mruns));
	struct metrics_run *m = &b->mruns[b->nmruns++];
	char *path = run_path(dir, RUN_BEST_JSON);
	cJSON *best = json_read_file(path);
	m->dir = xstrdup(dir);
	m->evaluated = 0;
	events_read(dir, count_evaluated, &m->evaluated);
	m->best = json_number(best, "speedup", 1); /* before kg-select names one, the baseline is best */
	cJSON_Delete(best);
	free(path);
	return m;
}

/* When to collect a record's hardware metrics, as the worker's metrics_above: the baseline
 * and every Nth candidate of the run always (0), the others only when faster than the run's
 * best (its speedup), none without --metrics (NAN). */
static double metrics_above(struct bencher *b, const char *run, const cJSON *build)
{
	if (!b->opt->metrics_every)
		return NAN;
	if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(build, "baseline")))
		return 0;
	struct metrics_run *m = metrics_run_for(b, run);
	return ++m->evaluated % b->opt->metrics_every == 0 ? 0 : m->best;
}

/* A candidate that passed faster than the run's best is its best now, for --metrics-every. */
static void metrics_note(struct bencher *b, const char *run, const cJSON *bench)
{
	const char *status = json_string(bench, "status");
	double speedup = json_number(bench, "speedup", NAN);
	if (b->opt->metrics_every > 1 && status && strcmp(status, "ok") == 0 && speedup > metrics_run_for(b, run)->best)
		metrics_run_for(b, run)->best = speedup;
}

/* The run at dir as far as replays go: its RUN/replay.table when kg-init --replay made it. */
static struct run *replayed_run(struct bencher *b, const char *dir)
{
	for (size_t k = 0; k < b->nreplayed; k++)
		if (strcmp(b->replayed[k].dir, dir) == 0)
			return &b->replayed[k];
	b->replayed = xreallocarray(b->replayed, b->nreplayed + 1, sizeof(*b->replayed));
	struct run *run = &b->replayed[b->nreplayed++];
	*run = (struct run){.dir = xstrdup(dir)};
	return run;
}

/* Adds "bench" to a record that has a successful build; returns -1 when there is no GPU. */
static int bench_record(struct bencher *b, cJSON *record, long line)
{
	const cJSON *build = cJSON_GetObjectItemCaseSensitive(record, "build");
	const cJSON *status = cJSON_GetObjectItemCaseSensitive(build, "status");
	const cJSON *run = cJSON_GetObjectItemCaseSensitive(record, "run");
	if (!cJSON_IsString(status) || strcmp(status->valuestring, "ok") != 0)
		return 0; /* nothing to run: passes through */
	const char *run_dir = cJSON_IsString(run) ? run->valuestring : b->opt->run_dir;
	if (!run_dir && !b->replay)
		return stream_error(&b->in, line, "run: missing (give the record a \"run\" or kg-bench --run DIR)"), 0;
	cJSON *bench;
	/* --replay, else the table a run made with kg-init --replay holds: such a run is answered
	 * from it with no option, as every stage follows it */
	const struct replay *table = b->replay;
	char *table_path = NULL;
	int broken = 0;
	if (!table && run_dir) {
		table = run_replay(replayed_run(b, run_dir), &broken);
		if (table || broken)
			table_path = run_path(run_dir, RUN_REPLAY);
	}
	if (broken) {
		char *msg = xasprintf("the run's replay table %s cannot be read (see above)", table_path);
		stream_error(&b->in, line, "%s", msg);
		bench = failure("error", msg, NULL);
		free(msg);
	} else if (table) {
		bench = replay_bench(b, table, table_path ? table_path : b->opt->replay_path, record, line, run_dir);
	} else if (cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(build, "compiled"))) {
		const char *msg = "this variant was not compiled (kg-build --no-compile): only --replay can answer it; "
				  "build it again without --no-compile to measure it";
		stream_error(&b->in, line, "%s", msg);
		bench = failure("error", msg, NULL);
	} else {
		bench = bench_on_gpu(&b->worker, b->opt, run_dir, build, metrics_above(b, run_dir, build));
		if (!bench)
			return -1;
		metrics_note(b, run_dir, bench);
	}
	free(table_path);
	if (cJSON_HasObjectItem(record, "bench"))
		cJSON_ReplaceItemInObjectCaseSensitive(record, "bench", bench);
	else if (!cJSON_AddItemToObject(record, "bench", bench))
		xalloc_die();
	return 0;
}

/* Benches a record and passes it on; without a GPU nothing more can be measured. */
static enum stream_action bench_one(struct stream *s, cJSON *record, void *ctx)
{
	if (bench_record(ctx, record, s->in.line) == 0)
		return STREAM_PASS;
	cJSON_Delete(record);
	stream_fail(s, KG_EXIT_ENV);
	return STREAM_STOP;
}

int main(int argc, char **argv)
{
	struct options opt = {0};
	log_init("kg-bench");
	parse_options(argc, argv, &opt);
	char *cache = kg_cache_dir();
	opt.settings.cache_dir = cache;
	opt.settings.prepare_run = opt.run_dir;
	if (opt.devices) {
		free(cache);
		return cli_finish(worker_list_devices());
	}
	if (opt.calibrate) {
		int rc = worker_calibrate(&opt.settings);
		free(cache);
		return cli_finish(rc);
	}

	struct bencher b = {.opt = &opt};
	const char *input = optind < argc ? argv[optind] : "-";
	int status = KG_EXIT_OK;
	if (opt.t4) {
		free(cache);
		if (stream_open(&b.in, input, NULL) != 0)
			return KG_EXIT_USAGE;
		status = export_t4(&b.in, opt.run_dir);
		stream_release(&b.in);
		return cli_finish(status);
	}
	strbuf_init(&b.worker.unread);
	/* The GPU is started for the first record that needs it: the records of a run made with
	 * kg-init --replay are answered from its table, on a machine without a GPU too. */
	if (opt.replay_path && !(b.replay = replay_load(opt.replay_path)))
		status = KG_EXIT_USAGE;
	else if (stream_open(&b.in, input, stdout) != 0)
		status = KG_EXIT_USAGE;
	if (status != KG_EXIT_OK) {
		stop_worker(&b.worker);
		strbuf_release(&b.worker.unread);
		free(b.worker.device);
		replay_free(b.replay);
		free(cache);
		return status;
	}
	/* With --run of a run measured on the GPU, the GPU is opened and the run readied
	 * (worker.h) while the first record is still being picked and compiled. */
	if (opt.run_dir && !b.replay && !run_replayed(opt.run_dir))
		spawn_worker(&b.worker, &opt.settings);
	b.edits = replay_edits_new();
	/* A measurement takes long: the next stage should have each record at once. */
	b.in.flush_each = 1;
	status = stream_each(&b.in, bench_one, &b);

	if (b.worker.ready)
		reap_worker(&b.worker, NULL); /* it sees the end of its requests and exits */
	else
		stop_worker(&b.worker); /* opened ahead and not needed: it may be waiting for the lock */
	free(b.worker.device);
	strbuf_release(&b.worker.unread);
	replay_free(b.replay);
	replay_edits_free(b.edits);
	for (size_t k = 0; k < b.nreplayed; k++)
		run_release(&b.replayed[k]);
	free(b.replayed);
	for (size_t k = 0; k < b.nmruns; k++)
		free(b.mruns[k].dir);
	free(b.mruns);
	stream_release(&b.in);
	free(cache);
	return cli_finish(status);
}
