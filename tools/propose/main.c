/* main.c (kg-propose): answers each expand record with candidate changes, from LLM experts or
 * from built-in rules; also lists a spec's space whole (--exhaustive) or sampled (--random). */
#include "common.h"

#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "experts.h"
#include "jsonl.h"
#include "log.h"
#include "methods.h"
#include "parse.h"
#include "prompt.h"
#include "rng.h"
#include "rules.h"
#include "space.h"
#include "stream.h"
#include "t1.h"
#include "xalloc.h"

enum source { FROM_DEFAULT, FROM_RULES, FROM_LLM };

struct options {
	const char *spec_path; /* --spec */
	int exhaustive;	       /* --exhaustive */
	long random;	       /* --random N; 0 when not given */
	int count_only;	       /* --count */
	enum source source;    /* --rules, --llm */
	uint64_t seed;	       /* --seed */
	struct rules_settings rules; /* --rules-random, --model-picks, --min-pred-gain */
	struct replay *within; /* --within FILE */
	struct history *history; /* --history FILE, repeatable */
	size_t nhistory;
	const char *pending;   /* --pending FILE: candidates in flight, not yet in events.jsonl */
	const char *input;     /* FILE, or stdin */
	struct experts ex;
};

static void usage(FILE *fp)
{
	fputs("Usage: kg-propose [--rules | --llm] [OPTIONS] [FILE]\n"
	      "       kg-propose --exhaustive --spec FILE [--count]\n"
	      "       kg-propose --random N --spec FILE [--seed S]\n"
	      "Answer each expand record (from kg-select, on FILE or stdin) with candidate records, one per\n"
	      "change, and pass every other record through. The rules are the default without OPENAI_API_KEY;\n"
	      "with it, the LLM experts.\n"
	      "\n"
	      "Proposers:\n"
	      "      --rules             neighbours of the node's configuration along each parameter, the spec's\n"
	      "                          ready patches (KernelGraph.Patches) not applied on the path, and random\n"
	      "                          valid configurations\n"
	      "      --rules-random N    random configurations per expansion with --rules (default 2)\n"
	      "      --model-picks N     with --rules, a Gaussian process fitted on every measured configuration\n"
	      "                          of the node's source (failures as the worst time) proposes the N\n"
	      "                          of largest expected improvement (default 4; 0: no model); once it\n"
	      "                          has 5 configurations, one correct, it prices every configuration\n"
	      "                          move (prior: expected improvement of ln time over the run's\n"
	      "                          best); before, the rules draw at least 4 random configurations\n"
	      "      --min-pred-gain G   drop a rules' configuration move (a neighbour, a random one) that\n"
	      "                          even an optimistic prediction (two standard deviations) makes\n"
	      "                          less than G faster than the node (default 0.02), or no faster\n"
	      "                          than the run's best; the model's own picks are kept, and\n"
	      "                          so are the weak moves when a node has nothing else left\n"
	      "      --history FILE      earlier measurements of this kernel (a T4 table or a run's\n"
	      "                          events.jsonl, of another GPU, problem size or night; repeatable):\n"
	      "                          the model follows each as far as it ranks the run's own\n"
	      "                          measurements, from the first build on (RUN/history.json says how\n"
	      "                          far it trusts each)\n"
	      "      --within FILE       propose only configurations that FILE (a T4 table or an\n"
	      "                          events.jsonl, as for kg-bench --replay) measured; a run\n"
	      "                          made with kg-init --replay is proposed only what its\n"
	      "                          RUN/replay.table holds without it\n"
	      "      --pending FILE      FILE holds candidate records in flight (proposed, not yet\n"
	      "                          learned by kg-select --update): none is proposed again, as\n"
	      "                          none that the run's events.jsonl holds is\n"
	      "  -l, --llm               ask LLM experts (OPENAI_API_KEY, OPENAI_BASE_URL)\n"
	      "  -x, --exhaustive        every valid configuration of --spec's space, first parameter slowest\n"
	      "      --random N          N distinct random valid configurations of --spec's space (one\n"
	      "                          whose valid ones random draws miss is walked for them, warning)\n"
	      "  -s, --spec FILE         the kernel spec (T1 JSON) for --exhaustive and --random\n"
	      "  -c, --count             with --exhaustive: print only the number of valid configurations\n"
	      "      --seed S            seed of every random choice (default 0)\n"
	      "\n"
	      "LLM experts:\n"
	      "  -m, --model M           the model (default gpt-5-mini)\n"
	      LLM_OPTIONS_HELP
	      "  -p, --persona P         an expert: throughput, memory, robustness, or a prompt file (its name\n"
	      "                          without extension names the expert); repeatable (default all three)\n"
	      "      --candidates N      candidates asked of each expert (default 3)\n"
	      "      --recent N          recent attempts shown in the prompt (default 8)\n"
	      "      --catalog FILE      the method catalog (default OUTDIR/methods.json, else the sixteen seeds)\n"
	      "      --regraph FILE      the ReGraph for suggested next methods (default OUTDIR/regraph.json)\n"
	      "      --regraph-filter    keep only candidates whose method (matched onto the catalog) is one of\n"
	      "                          the ReGraph's --regraph-top K (5) most promising transitions out of the\n"
	      "                          node's last method; no filter where the ReGraph has none\n"
	      "      --max-prompt-tokens N  leave sections out of the prompt (regions, method catalog,\n"
	      "                          history, metrics, ReGraph, device, symptoms: in that order) until\n"
	      "                          it fits N tokens, counted by the server's /tokenize where it has one\n"
	      "                          (llama-server), else 4 bytes a token (default: the context the server\n"
	      "                          reports in GET /v1/models (llama-server, vLLM), less room for the\n"
	      "                          answer; else no limit until the server refuses a prompt as longer\n"
	      "                          than its context, when the prompt is shortened to fit it and asked again)\n"
	      "      --tool-rounds N     let each expert call functions (metrics, region_detail, source_lines,\n"
	      "                          ptx_for_lines) for up to N rounds before it answers (default 0: the\n"
	      "                          one-shot prompt alone)\n"
	      "      --tool-result-bytes N  cut a function's result longer than N bytes (default 8000)\n"
	      "      --tool-total-bytes N   the most the calls and results of one expert's conversation\n"
	      "                          may add to it (default 32000); then one short refusal\n"
	      "                          answers the call there and all after it, which are not sent\n"
	      "                          back, and it must answer\n"
	      "\n"
	      "  -q, --quiet             print errors only\n"
	      "  -v, --verbose           say more on stderr (twice: debug)\n"
	      "  -h, --help              print this help and exit\n"
	      "  -V, --version           print the version and exit\n"
	      "\n"
	      "A candidate record is the expand record with \"candidate\": {\"id\", \"proposer\", \"method\",\n"
	      "\"detail\", \"think\", \"patch\", \"source\", \"config\" (complete), \"prior\", \"library\"}. An expansion\n"
	      "left without candidates is written once with \"propose\": {\"status\": \"error\", \"empty\" or\n"
	      "\"over_budget\", ...}.\n"
	      "An expand record's \"budget_left\" (kg-select's share of the build budget) caps its candidates;\n"
	      "at 6 or fewer, once nothing is expected to gain --min-pred-gain, the model picks the lowest\n"
	      "predicted times and they go first (the endgame);\n"
	      "its \"children\" (what the widening allows now) caps the rules' candidates, best prior first.\n"
	      "\"batch_budget\" (kg-select's, at the budget's end) caps the builds of a batch, the picks of\n"
	      "one iteration in order: a pick left without one is written with \"propose\": {\"status\":\n"
	      "\"over_budget\"} (its node is not marked exhausted), an evaluate record without its candidate.\n"
	      "Every call and answer is kept in RUN/llm/ (calls.jsonl: tokens and estimated cost); the API key\n"
	      "is never written.\n"
	      "\n"
	      "Exit status: 0 done; 1 a record could not be handled, or every expert of an expansion failed;\n"
	      "2 usage error or unreadable spec; 3 --llm without OPENAI_API_KEY or OPENAI_BASE_URL;\n"
	      "4 output could not be written.\n",
	      fp);
}

/* ---------------------------------------------------------------- options */

enum {
	OPT_RANDOM = 256, OPT_RULES_RANDOM, OPT_SEED, OPT_CANDIDATES, OPT_RECENT, OPT_CATALOG, OPT_REGRAPH, OPT_REGRAPH_FILTER, OPT_REGRAPH_TOP, OPT_WITHIN, OPT_PENDING, OPT_MODEL_PICKS, OPT_MIN_PRED_GAIN, OPT_HISTORY,
	OPT_TOOL_ROUNDS, OPT_TOOL_RESULT_BYTES, OPT_TOOL_TOTAL_BYTES, OPT_MAX_PROMPT_TOKENS,
};

static double number_arg(const char *name, const char *arg)
{
	double v;
	const char *why = parse_double(arg, 0, 1e9, &v);
	if (why)
		cli_usage_error("%s: '%s': %s", name, arg, why);
	return v;
}

static long bounded_arg(const char *name, const char *arg, long min, long max)
{
	int64_t v;
	if (parse_int64(arg, min, max, &v))
		cli_usage_error("%s: '%s' is not a whole number from %ld to %ld", name, arg, min, max);
	return (long)v;
}

static long count_arg(const char *name, const char *arg, long min)
{
	return bounded_arg(name, arg, min, INT32_MAX);
}

static void parse_options(int argc, char **argv, struct options *opt)
{
	static const struct option longopts[] = {
		LLM_LONG_OPTIONS,
		{"candidates", required_argument, NULL, OPT_CANDIDATES},
		{"catalog", required_argument, NULL, OPT_CATALOG},
		{"count", no_argument, NULL, 'c'},
		{"exhaustive", no_argument, NULL, 'x'},
		{"help", no_argument, NULL, 'h'},
		{"recent", required_argument, NULL, OPT_RECENT},
		{"llm", no_argument, NULL, 'l'},
		{"min-pred-gain", required_argument, NULL, OPT_MIN_PRED_GAIN},
		{"history", required_argument, NULL, OPT_HISTORY},
		{"model-picks", required_argument, NULL, OPT_MODEL_PICKS},
		{"pending", required_argument, NULL, OPT_PENDING},
		{"persona", required_argument, NULL, 'p'},
		{"quiet", no_argument, NULL, 'q'},
		{"random", required_argument, NULL, OPT_RANDOM},
		{"regraph", required_argument, NULL, OPT_REGRAPH},
		{"regraph-filter", no_argument, NULL, OPT_REGRAPH_FILTER},
		{"regraph-top", required_argument, NULL, OPT_REGRAPH_TOP},
		{"rules", no_argument, NULL, 'r'},
		{"rules-random", required_argument, NULL, OPT_RULES_RANDOM},
		{"within", required_argument, NULL, OPT_WITHIN},
		{"seed", required_argument, NULL, OPT_SEED},
		{"spec", required_argument, NULL, 's'},
		{"tool-result-bytes", required_argument, NULL, OPT_TOOL_RESULT_BYTES},
		{"tool-rounds", required_argument, NULL, OPT_TOOL_ROUNDS},
		{"tool-total-bytes", required_argument, NULL, OPT_TOOL_TOTAL_BYTES},
		{"max-prompt-tokens", required_argument, NULL, OPT_MAX_PROMPT_TOKENS},
		{"verbose", no_argument, NULL, 'v'},
		{"version", no_argument, NULL, 'V'},
		{NULL, 0, NULL, 0},
	};
	struct llm_settings *s = &opt->ex.llm;
	int c;
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":chlm:p:qs:vVx", longopts, NULL)) != -1) {
		switch (c) {
		case 'c': opt->count_only = 1; break;
		case 'h': usage(stdout); exit(cli_finish(KG_EXIT_OK));
		case 'l': opt->source = FROM_LLM; break;
		case 'm': s->model = optarg; break; /* --model's short form */
		case 'p':
			if (persona_add(&opt->ex, optarg) != 0)
				exit(cli_finish(KG_EXIT_USAGE));
			break;
		case 'q': log_quieter(); break;
		case 'r': opt->source = FROM_RULES; break;
		case 's': opt->spec_path = optarg; break;
		case 'v': log_louder(); break;
		case 'V': cli_print_version(); exit(cli_finish(KG_EXIT_OK));
		case 'x': opt->exhaustive = 1; break;
		case OPT_RANDOM: opt->random = count_arg("--random", optarg, 1); break;
		case OPT_RULES_RANDOM: opt->rules.random = (size_t)count_arg("--rules-random", optarg, 0); break;
		case OPT_MODEL_PICKS: opt->rules.model.picks = (size_t)bounded_arg("--model-picks", optarg, 0, 1000); break;
		case OPT_MIN_PRED_GAIN: opt->rules.model.min_pred_gain = number_arg("--min-pred-gain", optarg); break;
		case OPT_PENDING: opt->pending = optarg; break;
		case OPT_WITHIN:
			replay_free(opt->within);
			if (!(opt->within = replay_load(optarg)))
				cli_usage_error("--within: '%s' is not a table of measurements", optarg);
			break;
		case OPT_HISTORY: {
			struct replay *table = replay_load(optarg);
			if (!table)
				cli_usage_error("--history: '%s' is not a table of measurements", optarg);
			opt->history = xreallocarray(opt->history, opt->nhistory + 1, sizeof(*opt->history));
			opt->history[opt->nhistory++] = (struct history){.path = optarg, .table = table};
			break;
		}
		case OPT_SEED: {
			const char *why = parse_uint64(optarg, UINT64_MAX, &opt->seed);
			if (why)
				cli_usage_error("--seed: '%s': %s", optarg, why);
			break;
		}
		case OPT_CANDIDATES: opt->ex.candidates = (int)count_arg("--candidates", optarg, 1); break;
		case OPT_RECENT: opt->ex.recent = (int)count_arg("--recent", optarg, 0); break;
		case OPT_CATALOG: opt->ex.catalog = optarg; break;
		case OPT_REGRAPH: opt->ex.regraph = optarg; break;
		case OPT_REGRAPH_FILTER: opt->ex.allowed = 1; break;
		case OPT_REGRAPH_TOP: opt->ex.allowed_top = count_arg("--regraph-top", optarg, 1); break;
		case OPT_TOOL_ROUNDS: opt->ex.tool_rounds = (int)bounded_arg("--tool-rounds", optarg, 0, 16); break;
		case OPT_TOOL_RESULT_BYTES: opt->ex.tool_result_bytes = bounded_arg("--tool-result-bytes", optarg, 100, 1 << 20); break;
		case OPT_TOOL_TOTAL_BYTES: opt->ex.tool_total_bytes = bounded_arg("--tool-total-bytes", optarg, 100, 1 << 22); break;
		case OPT_MAX_PROMPT_TOKENS: opt->ex.max_prompt_tokens = count_arg("--max-prompt-tokens", optarg, 1); break;
		default: {
			if (!llm_is_option(c))
				cli_option_error(c, argv);
			char *why = llm_option(s, c, optarg);
			if (why)
				cli_usage_error("%s", why);
		}
		}
	}
	if (opt->exhaustive || opt->random) {
		if (opt->exhaustive && opt->random)
			cli_usage_error("--exhaustive and --random exclude each other");
		if (optind < argc)
			cli_usage_error("unexpected argument '%s'", argv[optind]);
		if (!opt->spec_path)
			cli_usage_error("%s needs --spec FILE", opt->exhaustive ? "--exhaustive" : "--random");
		if (opt->count_only && !opt->exhaustive)
			cli_usage_error("--count goes with --exhaustive");
		if (opt->within || opt->pending)
			cli_usage_error("%s goes with the proposers, not with %s", opt->within ? "--within" : "--pending",
					opt->exhaustive ? "--exhaustive" : "--random");
		return;
	}
	if (opt->spec_path || opt->count_only)
		cli_usage_error("%s goes with --exhaustive or --random", opt->spec_path ? "--spec" : "--count");
	if (optind + 1 < argc)
		cli_usage_error("unexpected argument '%s'", argv[optind + 1]);
	opt->input = optind < argc ? argv[optind] : "-";
}

/* The key and the endpoint; the proposer when none was named. Exits 3 when --llm cannot run. */
static void settle_source(struct options *opt)
{
	const char *key = getenv("OPENAI_API_KEY");
	struct llm_settings *s = &opt->ex.llm;
	if (opt->source == FROM_DEFAULT)
		opt->source = key && *key ? FROM_LLM : FROM_RULES;
	if (opt->source == FROM_LLM && llm_settings_from_env(s) != 0)
		exit(cli_finish(KG_EXIT_ENV));
	if (opt->source == FROM_LLM && opt->ex.npersonas == 0)
		for (const char *const *p = (const char *const[]){"throughput", "memory", "robustness", NULL}; *p; p++)
			persona_add(&opt->ex, *p);
	log_info("proposing with %s", opt->source == FROM_LLM ? s->model : "the rules");
}

/* ---------------------------------------------------------------- the space alone */

struct emitter {
	const struct t1_spec *spec;
	const char *proposer;
	uint64_t emitted;
};

/* Writes one candidate record; returns KG_EXIT_IO, which stops the walk, if it cannot
 * (cli_finish then reports the error of the stream). */
static int emit_config(struct emitter *em, const size_t *indices)
{
	char id[64];
	snprintf(id, sizeof(id), "%s-%" PRIu64, em->proposer, ++em->emitted);
	cJSON *record = json_object(), *candidate = json_object();
	json_add_number(record, "v", 1);
	json_add_string(record, "kernel", em->spec->name);
	json_add(record, "candidate", candidate);
	json_add_string(candidate, "id", id);
	json_add_string(candidate, "proposer", em->proposer);
	json_add(candidate, "config", t1_config_to_json(em->spec, indices));
	int rc = jsonl_write(stdout, record);
	cJSON_Delete(record);
	return rc ? KG_EXIT_IO : 0;
}

static int emit_enumerated(void *ctx, const struct pyval *values, const size_t *indices)
{
	(void)values;
	return emit_config(ctx, indices);
}

static int emit_random(void *ctx, const size_t *indices)
{
	return emit_config(ctx, indices) ? 1 : 0;
}

static int empty_space(const struct t1_spec *spec)
{
	int saturated;
	uint64_t points = t1_cartesian_size(spec, &saturated);
	log_error("%s: ConfigurationSpace: no configuration satisfies the conditions (of %" PRIu64 "%s Cartesian points)",
		  spec->path, points, saturated ? " or more" : "");
	return KG_EXIT_INPUT;
}

static int print_count(const struct t1_spec *spec)
{
	uint64_t count;
	int saturated;
	if (t1_count(spec, UINT64_MAX, &count, &saturated))
		return KG_EXIT_INPUT;
	if (count == 0)
		return empty_space(spec);
	printf("%" PRIu64 "%s\n", count, saturated ? " or more" : "");
	return KG_EXIT_OK;
}

static int write_space(const struct options *opt)
{
	int unreadable;
	struct t1_spec *spec = t1_load(opt->spec_path, &unreadable);
	if (!spec)
		return unreadable ? KG_EXIT_USAGE : KG_EXIT_INPUT;
	if (log_enabled(LOG_INFO)) {
		int saturated;
		uint64_t points = t1_cartesian_size(spec, &saturated);
		log_info("%s: %zu parameters, %zu conditions, %" PRIu64 "%s Cartesian points", spec->path,
			 spec->nparams, spec->nconditions, points, saturated ? " or more" : "");
	}
	int status;
	if (opt->count_only) {
		status = print_count(spec);
	} else {
		struct emitter em = {.spec = spec, .proposer = opt->exhaustive ? "exhaustive" : "random"};
		uint64_t rng = opt->seed;
		long rc;
		if (opt->exhaustive) {
			rc = t1_enumerate(spec, emit_enumerated, &em);
		} else {
			size_t *listed;
			long nlisted = listed_configs(spec, &listed);
			rc = random_configs(spec, listed, nlisted, &rng, (size_t)opt->random, emit_random, &em);
			free(listed);
		}
		status = rc < 0 ? KG_EXIT_INPUT : opt->exhaustive && rc ? (int)rc : KG_EXIT_OK;
		if (status == KG_EXIT_OK && em.emitted == 0)
			status = empty_space(spec);
		else if (status == KG_EXIT_OK)
			log_info("%s: %" PRIu64 " %s configurations", spec->path, em.emitted,
				 opt->exhaustive ? "valid" : "random valid");
	}
	t1_free(spec);
	return status;
}

/* ---------------------------------------------------------------- expansions */

/* The candidate object of an accepted proposal. */
static cJSON *candidate_json(const struct proposal *p, const char *id)
{
	cJSON *c = json_object();
	json_add_string(c, "id", id);
	json_add_string(c, "proposer", p->proposer);
	json_add_string(c, "method", p->method);
	if (p->detail)
		json_add_string(c, "detail", p->detail);
	if (p->think)
		json_add_string(c, "think", p->think);
	if (p->patch)
		json_add_string(c, "patch", p->patch);
	if (p->source)
		json_add_string(c, "source", p->source);
	json_add(c, "config", cJSON_Duplicate(p->full_config, 1));
	if (p->launch_update)
		json_add(c, "launch_update", cJSON_Duplicate(p->launch_update, 1));
	if (p->library)
		json_add_string(c, "library", p->library);
	if (!isnan(p->prior))
		json_add_number(c, "prior", p->prior);
	return c;
}

/* With --regraph-filter: the transitions the ReGraph allows after the node's last one, into
 * *allowed (the caller's to free). Returns how many; 0 when there is no filter (none asked,
 * or none known). */
static size_t allowed_methods(const struct options *opt, struct run_info *run, const struct node_info *node,
			      struct regraph_transition **allowed)
{
	*allowed = NULL;
	if (!opt->ex.allowed)
		return 0;
	const char *from = node->last_method && *node->last_method ? node->last_method : "init";
	char *path = experts_regraph_path(&opt->ex, run);
	size_t n = context_regraph_next(run, path, from, (size_t)opt->ex.allowed_top, allowed);
	if (n == 0)
		log_info("%s: no transition out of '%s' in the ReGraph: every method is allowed", path, from);
	free(path);
	return n;
}

/* Whether p's method, matched onto the catalog, is one of the n allowed transitions. */
static int method_allowed(const struct regraph_transition *allowed, size_t n, const cJSON *catalog,
			  const struct proposal *p, struct strbuf *why)
{
	const char *how;
	double score;
	const cJSON *m = methods_match(catalog, p->method, METHODS_MATCH_THRESHOLD, &how, &score);
	char *canonical = m ? xstrdup(json_string(m, "name")) : method_normalize(p->method);
	int ok = 0;
	for (size_t i = 0; i < n; i++)
		ok |= strcmp(allowed[i].to, canonical) == 0;
	if (!ok) {
		strbuf_addf(why, "its method %s is not one the ReGraph allows next (--regraph-filter:", canonical);
		for (size_t i = 0; i < n; i++)
			strbuf_addf(why, " %s", allowed[i].to);
		strbuf_addch(why, ')');
	}
	free(canonical);
	return ok;
}

/* Writes the candidates of one expand record, or the record with why there are none; every
 * expert failing ranks KG_EXIT_INPUT. room: the most its batch has left (below). Returns the
 * candidates written. */
static size_t expand(const struct options *opt, struct stream *s, struct run_info *run, const cJSON *record,
		     const struct node_info *node, double room)
{
	struct proposal *list = NULL;
	size_t n = 0, dropped = 0, out = 0, over_budget = 0, over_widening = 0;
	/* kg-select's share of the build budget left for this expansion, and the children its
	 * widening allows now. Rules come back next time with the rest (they are cheap to
	 * propose again); an LLM's answers are all kept, as asking again costs a call. */
	double budget_left = json_number(record, "budget_left", NAN);
	if (room < INFINITY && !(budget_left <= room))
		budget_left = room;
	double children = opt->source == FROM_LLM ? NAN : json_number(record, "children", NAN);
	cJSON *errors = cJSON_CreateArray();
	if (opt->source == FROM_LLM)
		experts_propose(&opt->ex, run, node, &list, &n, errors);
	else {
		struct rules_settings rules = opt->rules;
		rules.model.budget_left = budget_left;
		if (children >= 1) {
			rules.children = (size_t)children;
			if (rules.model.picks > rules.children)
				rules.model.picks = rules.children; /* more would not go out */
		}
		rules_propose(run, node, &rules, &list, &n, &dropped, &over_widening);
	}
	struct regraph_transition *allowed;
	size_t nallowed = allowed_methods(opt, run, node, &allowed);
	cJSON *catalog = NULL;
	if (nallowed) {
		char *path = experts_catalog_path(&opt->ex, run);
		catalog = methods_load(path);
		free(path);
	}
	for (size_t i = 0; i < n; i++) {
		struct proposal *p = &list[i];
		struct strbuf why;
		strbuf_init(&why);
		if ((nallowed && !method_allowed(allowed, nallowed, catalog, p, &why)) ||
		    (!p->full_config && context_accept(run, node, p, &why) != 0)) {
			log_warn("%s: node %s: %s: %s: dropped: %s", run->run.dir, node->state, p->proposer, p->method, why.buf);
			dropped++;
		} else if (budget_left >= 0 && (double)out >= budget_left) {
			over_budget++;
		} else if (!s->broken) {
			char *id = xasprintf("%s-%zu", node->prefix, ++out);
			cJSON *r = cJSON_Duplicate(record, 1);
			if (!r)
				xalloc_die();
			json_add(r, "candidate", candidate_json(p, id));
			stream_write(s, r);
			cJSON_Delete(r);
			context_sent(run, node, p);
			free(id);
		}
		strbuf_release(&why);
		proposal_release(p);
	}
	free(list);
	free(allowed);
	cJSON_Delete(catalog);
	const cJSON *e;
	cJSON_ArrayForEach(e, errors)
		log_error("%s: node %s: expert %s: %s", run->run.dir, node->state, json_string(e, "persona"), json_string(e, "error"));
	if (out == 0 && !s->broken) {
		int failed = cJSON_GetArraySize(errors) > 0;
		cJSON *r = cJSON_Duplicate(record, 1), *why = json_object();
		/* "empty" marks the node exhausted: not when what it had was left out by the budget */
		json_add_string(why, "status", failed ? "error" : over_budget ? "over_budget" : "empty");
		json_add_number(why, "dropped", (double)dropped);
		json_add(why, "errors", errors);
		errors = NULL;
		json_add(r, "propose", why);
		stream_write(s, r);
		cJSON_Delete(r);
		if (failed)
			stream_fail(s, KG_EXIT_INPUT);
		if (!failed)
			log_warn("%s: node %s: no new candidate (%zu dropped)", run->run.dir, node->state, dropped);
	} else {
		log_info("%s: node %s: %zu candidates (%zu dropped, %zu left out by the build budget, %zu by the widening)",
			 run->run.dir, node->state, out, dropped, over_budget, over_widening);
	}
	cJSON_Delete(errors);
	return out;
}

static enum stream_action keep_pending(struct stream *s, cJSON *record, void *ctx)
{
	(void)s;
	json_append(ctx, record);
	return STREAM_TAKEN;
}

/* The records of --pending FILE into *records (an array the caller frees). Returns
 * KG_EXIT_OK, KG_EXIT_INPUT when a line was bad (reported with FILE:LINE; the others are
 * kept), KG_EXIT_USAGE when the file cannot be opened, KG_EXIT_IO when reading failed. */
static int read_pending(const char *path, cJSON **records)
{
	struct stream s;
	*records = cJSON_CreateArray();
	if (!*records)
		xalloc_die();
	if (stream_open(&s, path, NULL) != 0)
		return KG_EXIT_USAGE;
	stream_each(&s, keep_pending, *records);
	stream_release(&s);
	return s.status;
}

/* A batch whose picks share the builds left ("batch_budget", kg-select's at the budget's
 * end): its picks in order, the first to make candidates taking the builds, so that picks
 * that find nothing new cost no iteration of their own. A batch is the picks of one
 * iteration ("iter") of one run, which kg-select writes one after the other. */
struct batch {
	char *run;
	double iter;
	double room; /* builds the batch has left; INFINITY without "batch_budget" */
};

/* The builds left to record's batch, a new batch started at a new run or iteration. */
static double batch_room(struct batch *b, const cJSON *record)
{
	const char *run = json_string(record, "run");
	double iter = json_number(record, "iter", NAN), budget = json_number(record, "batch_budget", NAN);
	if (!run || isnan(budget))
		return INFINITY;
	if (!b->run || strcmp(b->run, run) != 0 || b->iter != iter) {
		free(b->run);
		b->run = xstrdup(run);
		b->iter = iter;
		b->room = budget;
	}
	return b->room;
}

/* A pick its batch has no build left for, written without candidates: an expansion with
 * "propose": {"status": "over_budget"} (its node is not marked exhausted), an evaluation
 * without its candidate. Neither is built, and kg-select --update learns nothing from it. */
static void write_over_budget(struct stream *s, cJSON *record, int expand)
{
	if (expand) {
		cJSON *why = json_object();
		json_add_string(why, "status", "over_budget");
		json_add_number(why, "dropped", 0);
		json_add(why, "errors", cJSON_CreateArray());
		json_add(record, "propose", why);
	} else {
		cJSON_DeleteItemFromObjectCaseSensitive(record, "candidate");
	}
	stream_write(s, record);
}

struct proposer {
	const struct options *opt;
	struct runs runs;
	struct batch batch;
};

/* Answers an expand record with its candidates; passes every other record, and one that
 * cannot be handled, on unchanged. */
static enum stream_action propose_record(struct stream *s, cJSON *record, void *ctx)
{
	struct proposer *pr = ctx;
	const char *op = json_string(record, "op"), *dir = json_string(record, "run");
	int expanding = op && strcmp(op, "expand") == 0;
	const cJSON *budget = cJSON_GetObjectItemCaseSensitive(record, "batch_budget");
	if (budget && !(cJSON_IsNumber(budget) && budget->valuedouble >= 0 && floor(budget->valuedouble) == budget->valuedouble)) {
		stream_error(s, s->in.line, "batch_budget: not a number of builds (a whole number, 0 or more)");
		return STREAM_PASS;
	}
	double room = batch_room(&pr->batch, record);
	if (room < 1 && (expanding || cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(record, "candidate")))) {
		write_over_budget(s, record, expanding);
		cJSON_Delete(record);
		return STREAM_TAKEN;
	}
	if (!expanding) {
		if (cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(record, "candidate")))
			pr->batch.room -= 1; /* an evaluation: one build */
		return STREAM_PASS;
	}
	struct strbuf why;
	strbuf_init(&why);
	struct node_info node = {0};
	struct run_info *run = dir ? runs_get(&pr->runs, dir) : NULL;
	int broken = 0;
	if (run) {
		/* --within, else the table of a run made with kg-init --replay: a replayed run is
		 * proposed only what its table holds with no option, as every stage follows it */
		run->within = pr->opt->within ? pr->opt->within : run_replay(&run->run, &broken);
		run->history = pr->opt->history;
		run->nhistory = pr->opt->nhistory;
	}
	enum stream_action action = STREAM_PASS;
	if (!dir) {
		stream_error(s, s->in.line, "run: missing (an expand record names its run directory)");
	} else if (run->error) {
		stream_error(s, s->in.line, "%s", run->error);
	} else if (broken) {
		stream_error(s, s->in.line, "%s/replay.table: the run's replay table cannot be read (see above)", dir);
	} else if (node_load(run, record, &node, &why) != 0) {
		stream_error(s, s->in.line, "%s", why.buf);
	} else {
		pr->batch.room -= (double)expand(pr->opt, s, run, record, &node, room);
		cJSON_Delete(record);
		action = STREAM_TAKEN;
	}
	node_release(&node);
	strbuf_release(&why);
	return action;
}

static int propose_stream(const struct options *opt)
{
	struct proposer pr = {.opt = opt};
	int status = opt->pending ? read_pending(opt->pending, &pr.runs.pending) : KG_EXIT_OK;
	if (status == KG_EXIT_USAGE || status == KG_EXIT_IO) {
		cJSON_Delete(pr.runs.pending);
		return status;
	}
	struct stream s;
	if (stream_open(&s, opt->input, stdout) != 0) {
		cJSON_Delete(pr.runs.pending);
		return KG_EXIT_USAGE;
	}
	stream_fail(&s, status);
	stream_each(&s, propose_record, &pr);
	free(pr.batch.run);
	runs_release(&pr.runs);
	stream_release(&s);
	return s.status;
}

int main(int argc, char **argv)
{
	struct options opt = {
		.rules = {.random = 2, .model = {.picks = 4, .initial = 5, .min_pred_gain = 0.02, .iterations = 60, .budget_left = NAN}},
		.ex = {.candidates = 3, .recent = 8, .allowed_top = 5, .tool_result_bytes = 8000, .tool_total_bytes = 32000},
	};
	llm_settings_init(&opt.ex.llm);
	log_init("kg-propose");
	parse_options(argc, argv, &opt);
	int status;
	if (opt.exhaustive || opt.random) {
		status = write_space(&opt);
	} else {
		settle_source(&opt);
		opt.ex.llm.jitter_seed = opt.seed;
		opt.rules.seed = opt.seed;
		status = propose_stream(&opt);
	}
	experts_release(&opt.ex);
	replay_free(opt.within);
	for (size_t k = 0; k < opt.nhistory; k++)
		replay_free(opt.history[k].table);
	free(opt.history);
	return cli_finish(status);
}
