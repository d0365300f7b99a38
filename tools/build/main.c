/* main.c (kg-build): turns each candidate into a compiled variant of its run: configuration
 * checked against the T1 space, source materialized with GNU patch, state hashed, NVRTC run. */
#include "common.h"

#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cache.h"
#include "cli.h"
#include "compile.h"
#include "fileio.h"
#include "jsonl.h"
#include "llm.h"
#include "log.h"
#include "materialize.h"
#include "parse.h"
#include "run.h"
#include "setup.h"
#include "sha256.h"
#include "stream.h"
#include "t1.h"
#include "variant.h"
#include "xalloc.h"

#ifndef KG_CUDA_HOME
#define KG_CUDA_HOME "/usr/local/cuda"
#endif

#define STATE_VERSION "kg-state-1" /* bump when anything hashed below changes meaning */

struct options {
	const char *run_dir;   /* --run: for records without "run" */
	const char *arch;      /* --arch */
	int device;	       /* --device: the GPU whose architecture to build for */
	const char *cache_dir; /* --cache-dir */
	int no_cache;	       /* --no-cache */
	int no_compile;	       /* --no-compile 1, --compile 0; -1: as the run says (a run made with
				  kg-init --replay is not compiled: run_replayed) */
	size_t jobs;	       /* -j */
	double timeout_s;      /* --timeout */
	int as_ready;	       /* --as-ready */
};

static void usage(FILE *fp)
{
	fputs("Usage: kg-build [OPTION]... [FILE]\n"
	      "Build each record's candidate into a variant of its run: complete and check the\n"
	      "configuration, apply the diff with GNU patch, hash the state, compile with NVRTC.\n"
	      "Reads FILE (or stdin) and writes every record to stdout, in input order (but see\n"
	      "--as-ready), with a \"build\" object added to those that carry a \"candidate\".\n"
	      "\n"
	      "      --as-ready       write each record once built, not in input order: a compile\n"
	      "                       that ends early goes to kg-bench early (records that compile\n"
	      "                       nothing, as under a replay, keep the input's order)\n"
	      "  -r, --run DIR        the run directory of records that have no \"run\"\n"
	      "  -a, --arch ARCH      target architecture, e.g. sm_90 or sm_90a (default: the spec's\n"
	      "                       KernelGraph.Arch or -arch option, else for a run made with\n"
	      "                       kg-init --replay what its table's variants were built for,\n"
	      "                       or its GPU's, else what the run's baseline was built for,\n"
	      "                       else --device's (sm_90a on compute capability 9.0), else\n"
	      "                       " RUN_DEFAULT_ARCH ")\n"
	      "  -d, --device N       the GPU (CUDA ordinal) whose architecture a run without a\n"
	      "                       baseline is built for (default 0; kg-init's, as kg-bench's)\n"
	      "  -j, --jobs N         compile up to N records at once (default 1)\n"
	      "  -t, --timeout SEC    kill a compile that runs longer (default 600)\n"
	      "      --cache-dir DIR  the compile cache (default $XDG_CACHE_HOME/kernelgraph)\n"
	      "      --compile        compile (the default but for a run made with kg-init --replay,\n"
	      "                       whose RUN/replay.table answers kg-bench): undoes an earlier\n"
	      "                       --no-compile, as in kg-iterate --replay FILE --build-opt --compile\n"
	      "      --no-cache       neither read nor fill the compile cache\n"
	      "      --no-compile     all but the compile: the variant (kernel.cu, build.json) and its\n"
	      "                       state, the same as a compiled build's, without NVRTC, the\n"
	      "                       compile cache, a cubin or a PTX (build.compiled: false), for\n"
	      "                       searches on recorded measurements (kg-bench --replay)\n"
	      "  -q, --quiet          print errors only\n"
	      "  -v, --verbose        say more on stderr (twice: debug)\n"
	      "  -h, --help           print this help and exit\n"
	      "  -V, --version        print the version and exit\n"
	      "\n"
	      "A record's \"candidate\" may carry \"patch\" (a unified diff against kernel.cu),\n"
	      "\"source\" (the whole kernel; used as well when the patch fails) and \"config\"\n"
	      "(tuning parameters; the rest come from the parent node, then the spec's Default\n"
	      "values, then the first valid configuration). \"node\" names the parent variant,\n"
	      "RUN/variants/NODE; without it the spec's own kernel file is built (the baseline).\n"
	      "The run directory holds spec.json and the kernel file it names.\n"
	      "\n"
	      "build.status is ok, invalid_config, patch_failed or compile_failed; paths in\n"
	      "\"build\" are relative to the run directory. build.edited says whether the variant's\n"
	      "source differs from the spec's kernel file (a code edit on its path).\n"
	      "\n"
	      "Exit status: 0 every record handled; 1 some input could not be: a record (no run,\n"
	      "a missing parent) is reported and passed on unchanged, a line that is not a JSON\n"
	      "object is reported and dropped; 2 usage error; 3 NVRTC (for a record to compile) or\n"
	      "GNU patch cannot be run; 4 input or output failed.\n",
	      fp);
}

static void parse_options(int argc, char **argv, struct options *opt)
{
	enum { OPT_AS_READY = 256, OPT_CACHE_DIR, OPT_COMPILE, OPT_NO_CACHE, OPT_NO_COMPILE };
	static const struct option longopts[] = {
		{"arch", required_argument, NULL, 'a'},
		{"as-ready", no_argument, NULL, OPT_AS_READY},
		{"cache-dir", required_argument, NULL, OPT_CACHE_DIR},
		{"device", required_argument, NULL, 'd'},
		{"compile", no_argument, NULL, OPT_COMPILE},
		{"help", no_argument, NULL, 'h'},
		{"jobs", required_argument, NULL, 'j'},
		{"no-cache", no_argument, NULL, OPT_NO_CACHE},
		{"no-compile", no_argument, NULL, OPT_NO_COMPILE},
		{"quiet", no_argument, NULL, 'q'},
		{"run", required_argument, NULL, 'r'},
		{"timeout", required_argument, NULL, 't'},
		{"verbose", no_argument, NULL, 'v'},
		{"version", no_argument, NULL, 'V'},
		{NULL, 0, NULL, 0},
	};
	int c, number;
	uint64_t jobs;
	int64_t device;
	const char *why;
	opterr = 0;
	opt->jobs = 1;
	opt->timeout_s = 600;
	opt->no_compile = -1;
	while ((c = getopt_long(argc, argv, ":a:d:hj:qr:t:vV", longopts, NULL)) != -1) {
		switch (c) {
		case 'a':
			if (arch_parse(optarg, &number))
				cli_usage_error("--arch: '%s' is not an architecture like sm_90 or sm_90a", optarg);
			opt->arch = optarg;
			break;
		case OPT_AS_READY: opt->as_ready = 1; break;
		case OPT_CACHE_DIR: opt->cache_dir = optarg; break;
		case 'd':
			if ((why = parse_int64(optarg, 0, 1023, &device)))
				cli_usage_error("--device: '%s': %s", optarg, why);
			opt->device = (int)device;
			break;
		case OPT_COMPILE: opt->no_compile = 0; break;
		case 'h': usage(stdout); exit(cli_finish(KG_EXIT_OK));
		case 'j':
			if ((why = parse_uint64(optarg, 256, &jobs)) || jobs < 1)
				cli_usage_error("--jobs: '%s': %s", optarg, why ? why : "must be at least 1");
			opt->jobs = (size_t)jobs;
			break;
		case OPT_NO_CACHE: opt->no_cache = 1; break;
		case OPT_NO_COMPILE: opt->no_compile = 1; break;
		case 'q': log_quieter(); break;
		case 'r': opt->run_dir = optarg; break;
		case 't':
			if ((why = parse_double(optarg, 0.001, 86400, &opt->timeout_s)))
				cli_usage_error("--timeout: '%s': %s", optarg, why);
			break;
		case 'v': log_louder(); break;
		case 'V': cli_print_version(); exit(cli_finish(KG_EXIT_OK));
		default: cli_option_error(c, argv);
		}
	}
	if (argc - optind > 1)
		cli_usage_error("unexpected argument '%s'", argv[optind + 1]);
}

/* ---------------------------------------------------------------- records in flight */

struct builder {
	const struct options *opt;
	struct build_run *runs;
	struct build_cache cache;
	struct compile_pool *pool;
	struct entry **window; /* records read and not yet written, in input order */
	size_t nwindow, window_cap;
	struct stream in; /* the records, and the exit status so far */
	int nvrtc;	  /* need_nvrtc: 0 not tried yet, 1 loaded, -1 missing */
};

/* Loads NVRTC the first time a record needs a compile, so that the records of replayed runs
 * build on a machine without it. Returns 0, or -1 (said once, status 3). */
static int need_nvrtc(struct builder *b)
{
	if (!b->nvrtc) {
		struct strbuf why;
		strbuf_init(&why);
		b->nvrtc = nvrtc_open(&why) == 0 ? 1 : -1;
		if (b->nvrtc < 0) {
			log_error("%s", why.buf);
			stream_fail(&b->in, KG_EXIT_ENV);
		}
		strbuf_release(&why);
	}
	return b->nvrtc > 0 ? 0 : -1;
}

static struct build_run *find_run(struct builder *b, const char *dir)
{
	for (struct build_run *run = b->runs; run; run = run->next)
		if (strcmp(run->run.dir, dir) == 0)
			return run;
	int no_compile = b->opt->no_compile >= 0 ? b->opt->no_compile : run_replayed(dir);
	int nvrtc = !no_compile && need_nvrtc(b) == 0;
	struct build_run *run = build_run_load(dir, b->opt->arch, b->opt->device, nvrtc);
	run->no_compile = no_compile;
	if (!no_compile && !nvrtc && !run->error)
		run->error = xstrdup("NVRTC cannot be loaded (said above): nothing of this run can be compiled");
	run->next = b->runs;
	b->runs = run;
	return run;
}

static cJSON *int_triple(const int64_t v[3])
{
	cJSON *array = cJSON_CreateArray();
	for (int d = 0; array && d < 3; d++)
		if (!cJSON_AddItemToArray(array, cJSON_CreateNumber((double)v[d])))
			xalloc_die();
	return array;
}

/* A failed build: {"status": ..., "error": ...}, with the configuration when known. */
static cJSON *failed_build(const char *status, const char *error, const cJSON *config)
{
	cJSON *build = json_object();
	json_add_string(build, "status", status);
	json_add_string(build, "error", error);
	if (config)
		json_add(build, "config", cJSON_Duplicate(config, 1));
	return build;
}

/* ---------------------------------------------------------------- configuration */

/* -DNAME=VALUE as C sees it: booleans become 1 and 0, strings go in unquoted (they name
 * types or functions). */
static char *define_option(const struct t1_param *p, size_t index)
{
	const struct pyval *v = &p->values[index];
	if (v->kind == PY_BOOL)
		return xasprintf("-D%s=%d", p->name, (int)v->u.i);
	if (v->kind == PY_STR)
		return xasprintf("-D%s=%s", p->name, v->u.s->bytes);
	return xasprintf("-D%s=%s", p->name, p->values_json[index]);
}

/* ---------------------------------------------------------------- state and options */

struct build_plan {
	cJSON *config;
	char arch[16];	/* the record's architecture: the run's, or its variant for this GPU
			   ("sm_90a") that a ready patch or the parent needs (record_arch) */
	struct t1_launch launch;
	char **options; /* what the state and cache keys see: no include paths */
	size_t noptions;
};

static void plan_release(struct build_plan *plan)
{
	cJSON_Delete(plan->config);
	for (size_t k = 0; k < plan->noptions; k++)
		free(plan->options[k]);
	free(plan->options);
}

static void hash_field(struct sha256 *h, const char *name, const char *value)
{
	sha256_update(h, name, strlen(name) + 1);
	sha256_update(h, value, strlen(value) + 1);
}

static void state_hash(const struct build_run *run, const char *source, const struct build_plan *plan,
		       char out[SHA256_HEX_SIZE])
{
	struct sha256 h;
	char *config = json_text(plan->config);
	char geometry[256];
	snprintf(geometry, sizeof(geometry), "%lld,%lld,%lld/%lld,%lld,%lld", (long long)plan->launch.grid[0],
		 (long long)plan->launch.grid[1], (long long)plan->launch.grid[2], (long long)plan->launch.block[0],
		 (long long)plan->launch.block[1], (long long)plan->launch.block[2]);
	if (plan->launch.shared_bytes) /* absent before KernelGraph.SharedMemory: old states stay valid */
		snprintf(geometry + strlen(geometry), sizeof(geometry) - strlen(geometry), "+%lld",
			 (long long)plan->launch.shared_bytes);
	sha256_init(&h);
	hash_field(&h, "version", STATE_VERSION "/" SOURCE_NORMALIZATION);
	hash_field(&h, "source", source);
	hash_field(&h, "headers", run->headers);
	hash_field(&h, "kernel", run->run.spec->kernel_name);
	hash_field(&h, "problem_size", run->problem_size);
	hash_field(&h, "config", config);
	hash_field(&h, "geometry", geometry);
	for (size_t k = 0; k < plan->noptions; k++)
		hash_field(&h, "option", plan->options[k]);
	hash_field(&h, "arch", plan->arch);
	sha256_final_hex(&h, out);
	free(config);
}

static void compile_key(const struct build_run *run, const char *source, const struct build_plan *plan,
			char out[SHA256_HEX_SIZE])
{
	struct sha256 h;
	sha256_init(&h);
	hash_field(&h, "version", "kg-nvrtc-1");
	hash_field(&h, "nvrtc", nvrtc_version());
	hash_field(&h, "kernel", run->run.spec->kernel_name);
	for (size_t k = 0; k < plan->noptions; k++)
		hash_field(&h, "option", plan->options[k]);
	hash_field(&h, "headers", run->headers);
	hash_field(&h, "source", source);
	sha256_final_hex(&h, out);
}

/* Fills plan for the configuration at indices; returns 0, or 1 with why set. */
static int make_plan(const struct build_run *run, const size_t *indices, const char *arch, struct build_plan *plan,
		     struct strbuf *why)
{
	snprintf(plan->arch, sizeof(plan->arch), "%s", arch);
	const struct t1_spec *spec = run->run.spec;
	struct pyval *values = xcalloc(spec->nnames, sizeof(*values));
	t1_bind(spec, indices, values);
	int rc = t1_launch_geometry(spec, values, &plan->launch, why) ? 1 : 0;
	free(values);
	if (rc)
		return 1;
	int64_t threads = plan->launch.block[0] * plan->launch.block[1] * plan->launch.block[2];
	if (threads > 1024) {
		strbuf_addf(why, "LocalSize gives %lld threads per block (%lld x %lld x %lld); CUDA allows at most 1024",
			    (long long)threads, (long long)plan->launch.block[0], (long long)plan->launch.block[1],
			    (long long)plan->launch.block[2]);
		return 1;
	}
	plan->options = xcalloc(run->nbase_options + spec->nparams + 4, sizeof(*plan->options));
	for (size_t k = 0; k < run->nbase_options; k++)
		plan->options[plan->noptions++] = xstrdup(run->base_options[k]);
	for (size_t k = 0; k < spec->nparams; k++)
		plan->options[plan->noptions++] = define_option(&spec->params[k], indices[k]);
	plan->options[plan->noptions++] = xasprintf("--gpu-architecture=%s", plan->arch);
	plan->options[plan->noptions++] = xstrdup("-lineinfo");
	/* ptxas's report gives registers, shared memory and spills without a GPU. */
	plan->options[plan->noptions++] = xstrdup("--ptxas-options=-v");
	return 0;
}

/* The options NVRTC gets: the plan's, then the include paths. */
static char **full_options(const struct build_run *run, const struct build_plan *plan, size_t *n)
{
	const char *cuda_home = getenv("CUDA_HOME");
	if (!cuda_home || !cuda_home[0])
		cuda_home = KG_CUDA_HOME;
	char **options = xcalloc(plan->noptions + 3, sizeof(*options));
	*n = 0;
	for (size_t k = 0; k < plan->noptions; k++)
		options[(*n)++] = xstrdup(plan->options[k]);
	options[(*n)++] = xasprintf("-I%s", run->include_dir);
	char *include = xasprintf("%s/include", cuda_home), *cccl = xasprintf("%s/include/cccl", cuda_home);
	struct stat st;
	if (stat(include, &st) == 0)
		options[(*n)++] = xasprintf("-I%s", include);
	if (stat(cccl, &st) == 0) /* CUB, Thrust and libcu++ moved here in CUDA 13 */
		options[(*n)++] = xasprintf("-I%s", cccl);
	free(include);
	free(cccl);
	return options;
}

/* ---------------------------------------------------------------- one record */

static int is_state_hash(const char *s)
{
	size_t n = 0;
	for (; s[n]; n++)
		if (!((s[n] >= '0' && s[n] <= '9') || (s[n] >= 'a' && s[n] <= 'f')))
			return 0;
	return n == 64;
}

/* The optional string member key of obj: 0 with *out set (NULL when absent or null), or
 * -1 when it has another type. */
static int optional_string(const cJSON *obj, const char *key, const char **out)
{
	const cJSON *item = cJSON_GetObjectItemCaseSensitive(obj, key);
	*out = NULL;
	if (!item || cJSON_IsNull(item))
		return 0;
	if (!cJSON_IsString(item))
		return -1;
	*out = item->valuestring;
	return 0;
}

struct parent {
	char *source;  /* normalized */
	cJSON *config; /* NULL for the baseline */
	char arch[16]; /* what it was built for; "" for the baseline (the run's) */
};

/* Loads the node a candidate applies to. Returns 0, or -1 after reporting. */
static int load_parent(struct builder *b, long line, struct build_run *run, const char *node, struct parent *parent)
{
	parent->source = NULL;
	parent->config = NULL;
	parent->arch[0] = '\0';
	if (!node) {
		parent->source = xstrdup(run->baseline_source);
		return 0;
	}
	if (!is_state_hash(node)) {
		stream_error(&b->in, line, "node: '%s' is not a state hash (64 hex digits)", node);
		return -1;
	}
	cJSON *build = read_variant(run, node);
	char *path = run_variant_path(run->run.dir, node, VARIANT_KERNEL);
	size_t len;
	char *text = file_read_all(path, &len);
	const cJSON *config = cJSON_GetObjectItemCaseSensitive(build, "config");
	if (!text || !cJSON_IsObject(config)) {
		stream_error(&b->in, line, "node: %s has no built variant in %s/variants (%s is %s)", node, run->run.dir,
			     run_variant_file(text ? VARIANT_BUILD : VARIANT_KERNEL), text ? "missing or has no config" : "missing");
		free(text);
		free(path);
		cJSON_Delete(build);
		return -1;
	}
	parent->source = source_normalize(text, len);
	parent->config = cJSON_Duplicate(config, 1);
	const char *arch = json_string(build, "arch");
	if (arch)
		snprintf(parent->arch, sizeof(parent->arch), "%s", arch);
	free(text);
	free(path);
	cJSON_Delete(build);
	return 0;
}

/* The architecture a record is built for: the run's, unless the ready patch it applies
 * (candidate.library, a KernelGraph.Patches entry with "Arch") or its parent needs the run's
 * GPU generation with its architecture-specific features ("sm_90a" where the run builds for
 * "sm_90": wgmma and setmaxnreg exist only there), which it then gets; a patch for another
 * generation keeps the run's (kg-propose does not offer it, and its compile would say why). */
static const char *record_arch(const struct build_run *run, const cJSON *candidate, const struct parent *parent)
{
	const char *wanted = parent->arch[0] ? parent->arch : NULL, *library = json_string(candidate, "library");
	const cJSON *patches = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(run->run.spec->json, "KernelGraph"),
								"Patches"),
		    *entry;
	cJSON_ArrayForEach(entry, patches) {
		const char *name = json_string(entry, "Name"), *arch = json_string(entry, "Arch");
		if (library && name && arch && strcmp(name, library) == 0)
			wanted = arch;
	}
	int have, want;
	if (wanted && arch_parse(run->arch, &have) == 0 && arch_parse(wanted, &want) == 0 && have == want)
		return wanted;
	return run->arch;
}

/* The variant's source: the parent's, the patched parent's, or the candidate's own.
 * Returns the normalized text, or NULL with e->variant set to a failed build (or left
 * NULL after an environment error was reported). */
static char *materialize(struct builder *b, struct entry *e, const char *parent_source, const char *parent_path,
			 const char *patch, const char *source)
{
	if (!patch) {
		json_add_string(e->own, "materialized", source ? "source" : "parent");
		return source_normalize(source ? source : parent_source, strlen(source ? source : parent_source));
	}
	if (make_tmp_dir(e) || write_in_tmp(e, VARIANT_KERNEL, parent_source) || write_in_tmp(e, VARIANT_DIFF, patch)) {
		stream_fail(&b->in, KG_EXIT_IO);
		return NULL;
	}
	struct patch_report r;
	const char *kernel_file = strrchr(e->run->run.spec->kernel_path, '/');
	patch_apply(e->tmp_dir, run_variant_file(VARIANT_KERNEL), kernel_file ? kernel_file + 1 : e->run->run.spec->kernel_path, patch, &r);
	cJSON *report = json_object();
	json_add_number(report, "hunks", (double)r.hunks);
	if (r.offsets) {
		json_add(report, "offsets", r.offsets);
		json_add(report, "fuzz", r.fuzz);
		r.offsets = r.fuzz = NULL;
	}
	if (!cJSON_AddBoolToObject(report, "recounted", r.recounted))
		xalloc_die();
	if (r.message)
		json_add_string(report, "message", r.message);
	json_add(e->own, "patch", report);

	char *result = NULL;
	if (r.outcome == PATCH_NO_TOOL) {
		log_error("%s", r.message);
		stream_fail(&b->in, KG_EXIT_ENV);
	} else if (r.outcome == PATCH_APPLIED) {
		char *path = tmp_file(e, VARIANT_KERNEL);
		size_t len;
		char *text = file_read_all(path, &len);
		if (text)
			result = source_normalize(text, len);
		else
			log_error("cannot read '%s':", path);
		free(text);
		free(path);
		json_add_string(e->own, "materialized", "patch");
	} else if (source) {
		json_add_string(e->own, "materialized", "source_after_patch_failed");
		result = source_normalize(source, strlen(source));
	} else {
		/* where the parent's source is, to hold the diff against */
		char *message = r.mismatched ? xasprintf("%s\nthe parent's kernel: %s", r.message, parent_path)
					     : xstrdup(r.message);
		e->variant = failed_build("patch_failed", message, NULL);
		free(message);
	}
	patch_report_release(&r);
	return result;
}

/* Takes the variant over from an existing build.json or compile cache entry, or submits
 * the compile; with --no-compile, publishes the variant as it is. A variant that was not
 * compiled is taken over only by a build that does not compile either. */
static void schedule(struct builder *b, struct entry *e, const char *source, const struct build_plan *plan)
{
	cJSON *existing = read_variant(e->run, e->state);
	if (existing && (e->run->no_compile || variant_compiled(existing))) {
		e->variant = existing;
		e->reused = 1;
		drop_tmp_dir(e);
		return;
	}
	cJSON_Delete(existing);
	for (size_t k = 0; k < b->nwindow; k++) {
		struct entry *other = b->window[k];
		if (other->stage == STAGE_COMPILING && other->run == e->run && strcmp(other->state, e->state) == 0) {
			e->stage = STAGE_FOLLOWING;
			e->leader = other;
			drop_tmp_dir(e);
			return;
		}
	}
	if (!e->tmp_dir && make_tmp_dir(e)) {
		stream_fail(&b->in, KG_EXIT_IO);
		return;
	}
	if (write_in_tmp(e, VARIANT_KERNEL, source)) {
		stream_fail(&b->in, KG_EXIT_IO);
		drop_tmp_dir(e);
		return;
	}
	e->variant = json_object();
	json_add_string(e->variant, "status", "compiling");
	json_add_string(e->variant, "state", e->state);
	char *dir = run_variant_path(NULL, e->state, VARIANT_DIR);
	json_add_string(e->variant, "dir", dir);
	free(dir);
	json_add_string(e->variant, "arch", plan->arch);
	json_add(e->variant, "config", cJSON_Duplicate(plan->config, 1));
	json_add(e->variant, "grid", int_triple(plan->launch.grid));
	json_add(e->variant, "block", int_triple(plan->launch.block));
	if (plan->launch.shared_bytes)
		cJSON_AddNumberToObject(e->variant, "shared_bytes", (double)plan->launch.shared_bytes);
	cJSON *options = cJSON_CreateStringArray((const char *const *)plan->options, (int)plan->noptions);
	json_add(e->variant, "options", options);
	if (e->run->no_compile) {
		cJSON_ReplaceItemInObjectCaseSensitive(e->variant, "status", cJSON_CreateString("ok"));
		if (!cJSON_AddBoolToObject(e->variant, "compiled", 0))
			xalloc_die();
		char *kernel_file = run_variant_path(NULL, e->state, VARIANT_KERNEL);
		json_add_string(e->variant, "kernel_file", kernel_file);
		free(kernel_file);
		if (publish_variant(e))
			stream_fail(&b->in, KG_EXIT_IO);
		return;
	}
	json_add_string(e->variant, "nvrtc", nvrtc_version());

	char key[SHA256_HEX_SIZE];
	compile_key(e->run, source, plan, key);
	e->cache_key = xstrdup(key);
	struct compile_result res;
	if (cache_fetch(&b->cache, key, e->tmp_dir, &res)) {
		log_debug("%s: compile cache hit %s", e->state, key);
		describe_compile(e, &res, 1);
		compile_result_release(&res);
		if (publish_variant(e))
			stream_fail(&b->in, KG_EXIT_IO);
		return;
	}
	struct compile_job job = {
		.dir = xstrdup(e->tmp_dir),
		.source = xstrdup(source),
		.name_expression = xasprintf("&%s", e->run->run.spec->kernel_name),
		.tag = e,
	};
	job.options = full_options(e->run, plan, &job.noptions);
	e->stage = STAGE_COMPILING;
	compile_pool_submit(b->pool, &job);
}

/* Whether a record builds the run's baseline: the spec's own kernel file, unchanged, with
 * the configuration a candidate without one gets. kg-bench times every candidate against it. */
static int is_baseline(struct build_run *run, const char *node, const char *patch, const char *source, const cJSON *config)
{
	if (node || patch || source)
		return 0;
	if (!run->default_config) {
		const struct t1_spec *spec = run->run.spec;
		size_t *indices = xcalloc(spec->nparams + 1, sizeof(*indices));
		cJSON *merged = json_object();
		struct strbuf why;
		strbuf_init(&why);
		if (t1_resolve_config(spec, NULL, NULL, indices, merged, &why) == 0) {
			cJSON *json = t1_config_to_json(spec, indices);
			run->default_config = json_text(json);
			cJSON_Delete(json);
		} else {
			run->default_config = xstrdup("");
		}
		strbuf_release(&why);
		cJSON_Delete(merged);
		free(indices);
	}
	char *text = json_text(config);
	int same = strcmp(text, run->default_config) == 0;
	free(text);
	return same;
}

/* Works out everything about a record short of compiling it. Returns 0, or -1 when the
 * record cannot be handled (reported; it passes through unchanged). */
static int prepare(struct builder *b, struct entry *e, long line)
{
	const cJSON *candidate = cJSON_GetObjectItemCaseSensitive(e->record, "candidate");
	if (!candidate || cJSON_IsNull(candidate))
		return 0; /* not ours: passes through */
	const char *run_dir, *node, *patch, *source;
	const cJSON *config = cJSON_GetObjectItemCaseSensitive(candidate, "config");
	if (!cJSON_IsObject(candidate))
		return stream_error(&b->in, line, "candidate: must be an object");
	if (optional_string(e->record, "run", &run_dir))
		return stream_error(&b->in, line, "run: must be a string (a run directory)");
	if (optional_string(e->record, "node", &node))
		return stream_error(&b->in, line, "node: must be a string (a state hash) or null");
	if (optional_string(candidate, "patch", &patch))
		return stream_error(&b->in, line, "candidate.patch: must be a string (a unified diff) or null");
	if (optional_string(candidate, "source", &source))
		return stream_error(&b->in, line, "candidate.source: must be a string (a whole kernel file) or null");
	if (config && !cJSON_IsNull(config) && !cJSON_IsObject(config))
		return stream_error(&b->in, line, "candidate.config: must be an object of tuning parameters");
	if (!run_dir && !(run_dir = b->opt->run_dir))
		return stream_error(&b->in, line, "run: missing (give the record a \"run\" or kg-build --run DIR)");
	e->run = find_run(b, run_dir);
	if (e->run->error)
		return stream_error(&b->in, line, "%s", e->run->error);
	/* Refused before anything is patched, hashed or stored in the run (README "Limits"). */
	if (patch && strlen(patch) > KG_CANDIDATE_MAX_BYTES) {
		e->variant = failed_build("patch_failed", "candidate.patch: larger than 1 MiB, the most a patch may have", NULL);
		return 0;
	}
	if (source && strlen(source) > KG_CANDIDATE_MAX_BYTES) {
		e->variant = failed_build("compile_failed", "candidate.source: larger than 1 MiB, the most a source may have", NULL);
		return 0;
	}

	struct parent parent;
	if (load_parent(b, line, e->run, node, &parent))
		return -1;
	struct build_plan plan = {0};
	struct strbuf why;
	strbuf_init(&why);
	size_t *indices = xcalloc(e->run->run.spec->nparams + 1, sizeof(*indices));
	e->own = json_object();
	cJSON *merged = json_object();
	if (t1_resolve_config(e->run->run.spec, cJSON_IsObject(config) ? config : NULL, parent.config, indices, merged, &why) == 0) {
		plan.config = t1_config_to_json(e->run->run.spec, indices);
		if (make_plan(e->run, indices, record_arch(e->run, candidate, &parent), &plan, &why) == 0) {
			char *parent_path = node ? run_variant_path(e->run->run.dir, node, VARIANT_KERNEL)
						 : xstrdup(e->run->run.spec->kernel_path);
			char *text = materialize(b, e, parent.source, parent_path, patch, source);
			free(parent_path);
			char *refused = NULL;
			if (text && strlen(text) > KG_CANDIDATE_MAX_BYTES)
				refused = xstrdup("kernel.cu: larger than 1 MiB after the patch, the most a source may have");
			if (text && !refused)
				source_check_includes(text, e->run->include_dir, &refused);
			if (refused) {
				e->variant = failed_build("compile_failed", refused, plan.config);
				free(refused);
				free(text);
				text = NULL;
			}
			if (text) {
				state_hash(e->run, text, &plan, e->state);
				if (is_baseline(e->run, node, patch, source, plan.config) &&
				    !cJSON_AddBoolToObject(e->own, "baseline", 1))
					xalloc_die();
				/* What kg-bench --replay needs to know: a table keyed by configuration
				 * measured the spec's own kernel, not this source. */
				if (!cJSON_AddBoolToObject(e->own, "edited", strcmp(text, e->run->baseline_source) != 0))
					xalloc_die();
				schedule(b, e, text, &plan);
				free(text);
			}
		} else {
			e->variant = failed_build("invalid_config", why.buf, plan.config);
		}
	} else {
		e->variant = failed_build("invalid_config", why.buf, merged);
	}
	cJSON_Delete(merged);
	if (e->stage != STAGE_COMPILING)
		drop_tmp_dir(e);
	plan_release(&plan);
	strbuf_release(&why);
	free(indices);
	free(parent.source);
	cJSON_Delete(parent.config);
	return 0;
}

/* ---------------------------------------------------------------- output */

/* The record's "build": the variant's object, then this candidate's own fields. */
static void attach_build(struct entry *e)
{
	if (!e->variant)
		return;
	cJSON *build = cJSON_Duplicate(e->variant, 1);
	if (!build)
		xalloc_die();
	if (cJSON_GetObjectItemCaseSensitive(build, "state") && !cJSON_AddBoolToObject(build, "reused", e->reused))
		xalloc_die();
	cJSON *item;
	cJSON_ArrayForEach(item, e->own)
		json_add(build, item->string, cJSON_Duplicate(item, 1));
	if (cJSON_HasObjectItem(e->record, "build"))
		cJSON_ReplaceItemInObjectCaseSensitive(e->record, "build", build);
	else
		json_add(e->record, "build", build);
}

static void free_entry(struct entry *e)
{
	drop_tmp_dir(e);
	cJSON_Delete(e->record);
	cJSON_Delete(e->variant);
	cJSON_Delete(e->own);
	free(e->cache_key);
	free(e);
}

/* Writes the ready records at the window's head (with --as-ready, every ready one) and
 * keeps the rest in their order. */
static void flush_ready(struct builder *b)
{
	size_t kept = 0;
	int blocked = 0; /* a record before is not ready */
	for (size_t k = 0; k < b->nwindow; k++) {
		struct entry *e = b->window[k];
		if (e->stage != STAGE_READY || (blocked && !b->opt->as_ready)) {
			blocked = 1;
			b->window[kept++] = e;
			continue;
		}
		attach_build(e);
		stream_write(&b->in, e->record);
		free_entry(e);
	}
	b->nwindow = kept;
}

/* A compile ended: the variant is published and records waiting on it become ready. */
static void finish_compile(struct builder *b, struct entry *e, struct compile_result *res)
{
	describe_compile(e, res, 0);
	if (res->definitive) {
		cache_store(&b->cache, e->cache_key, e->tmp_dir, res);
		if (publish_variant(e))
			stream_fail(&b->in, KG_EXIT_IO);
	} else {
		/* A crash or a timeout may not happen again (a longer --timeout, a fixed
		 * toolkit): keep no variant, so that the next build tries again. */
		drop_tmp_dir(e);
		cJSON_DeleteItemFromObjectCaseSensitive(e->variant, "dir");
		cJSON_DeleteItemFromObjectCaseSensitive(e->variant, "kernel_file");
		cJSON_DeleteItemFromObjectCaseSensitive(e->variant, "log");
	}
	e->stage = STAGE_READY;
	for (size_t k = 0; k < b->nwindow; k++) {
		struct entry *f = b->window[k];
		if (f->stage == STAGE_FOLLOWING && f->leader == e) {
			f->variant = cJSON_Duplicate(e->variant, 1);
			f->reused = 1;
			f->stage = STAGE_READY;
		}
	}
}

static void add_to_window(struct builder *b, struct entry *e)
{
	if (b->nwindow == b->window_cap) {
		b->window_cap = b->window_cap ? 2 * b->window_cap : 16;
		b->window = xreallocarray(b->window, b->window_cap, sizeof(*b->window));
	}
	b->window[b->nwindow++] = e;
}

/* stream_each's loop with a window: records are read ahead while earlier ones compile, and
 * go out in input order as each is ready (with --as-ready, as each is ready). */
static void build_all(struct builder *b)
{
	/* Reading ahead lets patching and hashing overlap the compiles. */
	size_t max_window = 4 * b->opt->jobs + 4;
	int eof = 0;
	for (;;) {
		void *tag;
		struct compile_result res;
		flush_ready(b);
		if (!eof && b->nwindow < max_window) {
			cJSON *record = stream_next(&b->in);
			if (record) {
				struct entry *e = xcalloc(1, sizeof(*e));
				e->record = record;
				add_to_window(b, e);
				prepare(b, e, b->in.in.line);
			} else {
				eof = 1;
			}
			/* preparing a record (a patch, a hash) takes a while: a compile that ended
			 * meanwhile goes out now, not after the last record is read */
			while (compile_pool_wait(b->pool, &tag, &res, 0) == 0) {
				finish_compile(b, tag, &res);
				compile_result_release(&res);
			}
			continue;
		}
		if (compile_pool_wait(b->pool, &tag, &res, 1) != 0)
			break;
		finish_compile(b, tag, &res);
		compile_result_release(&res);
	}
}

/* kg-build never calls an LLM endpoint, and NVRTC runs in its processes: a kernel that
 * makes the compiler quote the environment finds no key in it. The value is overwritten
 * first, since /proc/self/environ shows the environment the process started with. */
static void forget_llm_settings(void)
{
	static const char *const names[] = {LLM_ENV_API_KEY, LLM_ENV_BASE_URL};
	for (size_t k = 0; k < ARRAY_SIZE(names); k++) {
		char *value = getenv(names[k]);
		if (value)
			explicit_bzero(value, strlen(value));
		unsetenv(names[k]);
	}
}

int main(int argc, char **argv)
{
	struct options opt = {0};
	log_init("kg-build");
	forget_llm_settings();
	parse_options(argc, argv, &opt);

	struct builder b = {.opt = &opt};
	if (stream_open(&b.in, optind < argc ? argv[optind] : "-", stdout) != 0)
		return KG_EXIT_USAGE;
	/* A compile takes long: the next stage should have each record as soon as it is ready. */
	b.in.flush_each = 1;
	cache_init(&b.cache, opt.cache_dir, opt.no_cache || opt.no_compile == 1);
	b.pool = compile_pool_new(opt.jobs, opt.timeout_s);

	build_all(&b);

	compile_pool_free(b.pool);
	for (size_t k = 0; k < b.nwindow; k++)
		free_entry(b.window[k]);
	free(b.window);
	build_run_free_all(b.runs);
	cache_release(&b.cache);
	stream_release(&b.in);
	return cli_finish(b.in.status);
}
