/* main.c (kg-select): owns a run's search graph. Without --update it chooses what to try
 * next (pick.c); with --update it learns from measured records (update.c). */
#include "common.h"

#include <errno.h>
#include <getopt.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "clock.h"
#include "draw.h"
#include "fileio.h"
#include "graph.h"
#include "jsonl.h"
#include "log.h"
#include "parse.h"
#include "pick.h"
#include "snapshot.h"
#include "step.h"
#include "trace.h"
#include "update.h"
#include "xalloc.h"

struct options {
	const char *run;
	const char *regraph;
	int update;
	int dry_run; /* --dry-run: --update, writing nothing */
	int export_json;
	int draw;	 /* --draw: 1 + enum draw_format; 0: not drawing */
	long draw_nodes; /* --graph-nodes: nodes in the drawing at most */
	int summary; /* --summary: append the closing summary to RUN/trace.md */
	int builds;  /* --builds: print the candidates the run has evaluated */
	struct pick_options pick; /* --pending, --batch, --fill */
	int seed_given;
	uint64_t seed;
	struct search_params params;
	unsigned char given[32]; /* which params were set on the command line */
};

static void usage(FILE *fp)
{
	fputs("Usage: kg-select [OPTION]... RUN\n"
	      "       kg-select --update [OPTION]... RUN [FILE]\n"
	      "       kg-select --export RUN\n"
	      "       kg-select --draw dot|json [--graph-nodes N] RUN\n"
	      "       kg-select --summary RUN\n"
	      "       kg-select --builds RUN\n"
	      "Monte-Carlo Graph Search over the variants of a run (RUN/graph.bin).\n"
	      "\n"
	      "Without --update, writes what to try next: {\"op\": \"expand\"} for a node that may get\n"
	      "new children (progressive widening: fewer than ceil(k N^alpha); its \"children\" says how\n"
	      "many it may get now), or {\"op\": \"evaluate\"} with the candidate of a registered edge\n"
	      "not yet measured. The path from the root is\n"
	      "chosen by PUCT on Q normalized over each node and its visited children, with\n"
	      "first-play urgency for unvisited edges. When the search is over it writes\n"
	      "{\"op\": \"stop\", \"reason\": \"budget\"|\"converged\"|\"exhausted\"} and exits with\n"
	      "status 5 (exhausted: no node is left with anything new to try).\n"
	      "\n"
	      "With --update, reads finished records (FILE or stdin): the benched baseline creates\n"
	      "the root; a candidate with \"build\" and \"bench\" becomes an evaluated edge whose child\n"
	      "is found by its state (a transposition when it exists and the rank rule allows),\n"
	      "rewarded clip(log2 speedup) or the failure reward, and backed up along its path;\n"
	      "one without \"build\" is registered for later evaluation; an expansion kg-propose\n"
	      "found nothing for (\"propose\": {\"status\": \"empty\"}) is not expanded again.\n"
	      "Each record is written back with an \"update\" object and appended to\n"
	      "RUN/events.jsonl; the incumbent changes only when the candidate's speedup interval\n"
	      "clears it; RUN/best, best.json, trace.md and OUTDIR/regraph_dataset.jsonl\n"
	      "(OUTDIR = RUN/../..) are kept current. A new edge's prior is its candidate's,\n"
	      "weighed by --regraph's statistics and, when the parent's variant has hardware\n"
	      "metrics (variants/STATE/metrics.json), by the moves its bottleneck favours.\n"
	      "\n"
	      "  -u, --update                learn from finished records\n"
	      "      --dry-run               with --update: learn as it does and write the records\n"
	      "                              with their \"update\", but write nothing to the run or\n"
	      "                              OUTDIR (the log, graph, best, trace, dataset); say on\n"
	      "                              stderr what each file would have got\n"
	      "      --draw dot|json         draw the graph for people and change nothing: Graphviz\n"
	      "                              DOT (kg-report's graph.dot), or the same nodes and\n"
	      "                              edges as one JSON document. A node per variant, filled\n"
	      "                              by its speedup (green faster, red slower, grey\n"
	      "                              failed), numbered by build as trace.md numbers them; an\n"
	      "                              edge per evaluated candidate, labelled by its method and\n"
	      "                              configuration change; the incumbent's path thick\n"
	      "      --graph-nodes N         with --draw: at most N nodes (default 60): the\n"
	      "                              incumbent's path, then the fastest, each with the nodes\n"
	      "                              that lead to it\n"
	      "  -e, --export                write the graph as one JSON document (graph.json's\n"
	      "                              form, version 1) and change nothing\n"
	      "      --builds                print the number of candidates the run has evaluated,\n"
	      "                              as its graph counts them and those its log holds past\n"
	      "                              the graph (a kill between the two), and change nothing\n"
	      "                              (what the scripts count a run's builds by; 0 without a\n"
	      "                              graph)\n"
	      "      --summary               append a closing summary to RUN/trace.md (what was\n"
	      "                              tried by method and proposer, what failed and why, how\n"
	      "                              the best moved, the best variant); kg-tune does at the end\n"
	      "      --batch K               pick K distinct things at once (virtual loss)\n"
	      "      --fill N                pick more than --batch when the picks are expected to\n"
	      "                              make fewer than N candidates: ceil(N / c) picks, at\n"
	      "                              most 16, c the mean candidates per pick in the last\n"
	      "                              200 records of RUN/events.jsonl (kg-iterate gives the\n"
	      "                              compile slots; with no picks logged, --batch alone)\n"
	      "      --pending FILE          FILE holds the records of picks made earlier and not\n"
	      "                              learned yet (kg-propose's output, say): they count as\n"
	      "                              picks of this batch, and their candidates count against\n"
	      "                              the build budget; when they leave nothing else, the\n"
	      "                              nodes they expand may be expanded again, and when not\n"
	      "                              even that, nothing is written (exit 0)\n"
	      "      --seed S                the random state of a new graph (noise, ties)\n"
	      "      --regraph FILE          weigh new edges' priors by method-transition statistics\n"
	      "                              (kg-regraph's regraph.json): P(method | parent's last\n"
	      "                              method) x its success rate; kept in the graph\n"
	      "      --c-puct C              PUCT constant c_init (1.25)\n"
	      "      --c-base B              growth base of c (19652)\n"
	      "      --fpu-reduction R       first-play urgency reduction below the root (0.2)\n"
	      "      --root-fpu-reduction R  first-play urgency reduction at the root (0.1)\n"
	      "      --widen-k K             progressive widening factor (1)\n"
	      "      --widen-alpha A         progressive widening exponent (0.5)\n"
	      "      --reward-clip L         rewards are clipped to [-L, L] (3)\n"
	      "      --failure-reward R      reward of a failed candidate (-3)\n"
	      "      --backup mean|max       what a node's value is (mean)\n"
	      "      --cycle-penalty P       subtracted for a child that repeats a state on the path (0.5)\n"
	      "      --noise EPS             Dirichlet noise weight at the root (0: off)\n"
	      "      --noise-alpha A         total Dirichlet concentration (10.83)\n"
	      "      --improve-pct P         an improvement is at least P % faster (2)\n"
	      "      --converge K            stop after K iterations without one (0: never)\n"
	      "      --budget-builds N       stop after N evaluated candidates (0: no limit); each\n"
	      "                              pick carries its share of what is left as\n"
	      "                              \"budget_left\", which kg-propose keeps to\n"
	      "      --rollout-depth D       greedy expansions below an improving child (0: none);\n"
	      "                              their picks carry \"rollout\": STEP\n"
	      "      --rollout-epsilon E     rollout exploration (0.1)\n"
	      "      --rollout-lambda L      rollout visit penalty (0.5)\n"
	      "  -q, --quiet                 print errors only\n"
	      "  -v, --verbose               say more on stderr (twice: debug)\n"
	      "  -h, --help                  print this help and exit\n"
	      "  -V, --version               print the version and exit\n"
	      "\n"
	      "Parameters given when the graph is created are stored in it; given later, they\n"
	      "replace the stored ones.\n"
	      "\n"
	      "The graph lives in RUN/graph.bin (records, and a log of what each step changed) and\n"
	      "RUN/graph.blobs (states, configurations, candidates), both for this machine's byte\n"
	      "order; a kill at any moment leaves the previous or the next graph. A run without\n"
	      "graph.bin starts from RUN/graph.json when there is one (what --export writes).\n"
	      "\n"
	      "Exit status: 0 done; 1 some record could not be handled (reported, passed on);\n"
	      "2 usage error; 4 input or output failed; 5 the search is over (budget, convergence,\n"
	      "or nothing left to try: exhausted; a {\"op\": \"stop\"} record says which).\n",
	      fp);
}

enum {
	OPT_C_PUCT = 256, OPT_C_BASE, OPT_FPU, OPT_ROOT_FPU, OPT_WIDEN_K, OPT_WIDEN_ALPHA, OPT_CLIP, OPT_FAILURE,
	OPT_BACKUP, OPT_CYCLE, OPT_NOISE, OPT_NOISE_ALPHA, OPT_IMPROVE, OPT_CONVERGE, OPT_BUDGET, OPT_ROLLOUT_DEPTH,
	OPT_ROLLOUT_EPSILON, OPT_ROLLOUT_LAMBDA, OPT_REGRAPH, OPT_PENDING, OPT_FILL, OPT_SUMMARY, OPT_BUILDS, OPT_DRY_RUN,
	OPT_DRAW, OPT_GRAPH_NODES,
};

static double *param_slot(struct search_params *p, int opt)
{
	switch (opt) {
	case OPT_C_PUCT: return &p->c_init;
	case OPT_C_BASE: return &p->c_base;
	case OPT_FPU: return &p->fpu_reduction;
	case OPT_ROOT_FPU: return &p->root_fpu_reduction;
	case OPT_WIDEN_K: return &p->widen_k;
	case OPT_WIDEN_ALPHA: return &p->widen_alpha;
	case OPT_CLIP: return &p->reward_clip;
	case OPT_FAILURE: return &p->failure_reward;
	case OPT_CYCLE: return &p->cycle_penalty;
	case OPT_NOISE: return &p->noise_epsilon;
	case OPT_NOISE_ALPHA: return &p->noise_alpha;
	case OPT_IMPROVE: return &p->improve_pct;
	case OPT_ROLLOUT_EPSILON: return &p->rollout_epsilon;
	case OPT_ROLLOUT_LAMBDA: return &p->rollout_lambda;
	default: return NULL;
	}
}

static long *long_slot(struct search_params *p, int opt)
{
	switch (opt) {
	case OPT_CONVERGE: return &p->converge_iters;
	case OPT_BUDGET: return &p->budget_builds;
	case OPT_ROLLOUT_DEPTH: return &p->rollout_depth;
	default: return NULL;
	}
}

static void parse_options(int argc, char **argv, struct options *opt)
{
	static const struct option longopts[] = {
		{"backup", required_argument, NULL, OPT_BACKUP},
		{"batch", required_argument, NULL, 'b'},
		{"budget-builds", required_argument, NULL, OPT_BUDGET},
		{"c-base", required_argument, NULL, OPT_C_BASE},
		{"c-puct", required_argument, NULL, OPT_C_PUCT},
		{"converge", required_argument, NULL, OPT_CONVERGE},
		{"cycle-penalty", required_argument, NULL, OPT_CYCLE},
		{"draw", required_argument, NULL, OPT_DRAW},
		{"dry-run", no_argument, NULL, OPT_DRY_RUN},
		{"export", no_argument, NULL, 'e'},
		{"failure-reward", required_argument, NULL, OPT_FAILURE},
		{"fill", required_argument, NULL, OPT_FILL},
		{"fpu-reduction", required_argument, NULL, OPT_FPU},
		{"graph-nodes", required_argument, NULL, OPT_GRAPH_NODES},
		{"help", no_argument, NULL, 'h'},
		{"improve-pct", required_argument, NULL, OPT_IMPROVE},
		{"noise", required_argument, NULL, OPT_NOISE},
		{"noise-alpha", required_argument, NULL, OPT_NOISE_ALPHA},
		{"pending", required_argument, NULL, OPT_PENDING},
		{"quiet", no_argument, NULL, 'q'},
		{"regraph", required_argument, NULL, OPT_REGRAPH},
		{"reward-clip", required_argument, NULL, OPT_CLIP},
		{"rollout-depth", required_argument, NULL, OPT_ROLLOUT_DEPTH},
		{"rollout-epsilon", required_argument, NULL, OPT_ROLLOUT_EPSILON},
		{"rollout-lambda", required_argument, NULL, OPT_ROLLOUT_LAMBDA},
		{"root-fpu-reduction", required_argument, NULL, OPT_ROOT_FPU},
		{"seed", required_argument, NULL, 's'},
		{"summary", no_argument, NULL, OPT_SUMMARY},
		{"builds", no_argument, NULL, OPT_BUILDS},
		{"update", no_argument, NULL, 'u'},
		{"verbose", no_argument, NULL, 'v'},
		{"version", no_argument, NULL, 'V'},
		{"widen-alpha", required_argument, NULL, OPT_WIDEN_ALPHA},
		{"widen-k", required_argument, NULL, OPT_WIDEN_K},
		{NULL, 0, NULL, 0},
	};
	const char *why;
	int c, index;
	int64_t i64;
	uint64_t u64;
	opt->pick.batch = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":ehquvV", longopts, &index)) != -1) {
		double *d = param_slot(&opt->params, c), lo = 0, hi = 0;
		long *l = long_slot(&opt->params, c);
		/* The ranges a loaded graph's parameters are checked against (each of these options
		 * has one). */
		if (d || l)
			(void)search_param_range(longopts[index].name, &lo, &hi);
		if (d) {
			if ((why = parse_double(optarg, lo, hi, d)))
				cli_usage_error("--%s: '%s': %s", longopts[index].name, optarg, why);
			opt->given[c - OPT_C_PUCT] = 1;
			continue;
		}
		if (l) {
			if ((why = parse_int64(optarg, (int64_t)lo, (int64_t)hi, &i64)))
				cli_usage_error("--%s: '%s': %s", longopts[index].name, optarg, why);
			*l = (long)i64;
			opt->given[c - OPT_C_PUCT] = 1;
			continue;
		}
		switch (c) {
		case OPT_BACKUP:
			if (strcmp(optarg, "mean") != 0 && strcmp(optarg, "max") != 0)
				cli_usage_error("--backup: '%s' is not mean or max", optarg);
			opt->params.backup_max = strcmp(optarg, "max") == 0;
			opt->given[c - OPT_C_PUCT] = 1;
			break;
		case OPT_REGRAPH: opt->regraph = optarg; break;
		case OPT_PENDING: opt->pick.pending = optarg; break;
		case 'b':
			if ((why = parse_int64(optarg, 1, 1024, &i64)))
				cli_usage_error("--batch: '%s': %s", optarg, why);
			opt->pick.batch = (long)i64;
			break;
		case OPT_FILL:
			if ((why = parse_int64(optarg, 1, 1024, &i64)))
				cli_usage_error("--fill: '%s': %s", optarg, why);
			opt->pick.fill = (long)i64;
			break;
		case 'h': usage(stdout); exit(cli_finish(KG_EXIT_OK));
		case 'q': log_quieter(); break;
		case 's':
			if ((why = parse_uint64(optarg, UINT64_MAX, &u64)))
				cli_usage_error("--seed: '%s': %s", optarg, why);
			opt->seed = u64;
			opt->seed_given = 1;
			break;
		case 'e': opt->export_json = 1; break;
		case OPT_DRAW:
			if (strcmp(optarg, "dot") != 0 && strcmp(optarg, "json") != 0)
				cli_usage_error("--draw: '%s' is not dot or json", optarg);
			opt->draw = 1 + (strcmp(optarg, "dot") == 0 ? DRAW_DOT : DRAW_JSON);
			break;
		case OPT_GRAPH_NODES:
			if ((why = parse_int64(optarg, 1, 1000000000, &i64)))
				cli_usage_error("--graph-nodes: '%s': %s", optarg, why);
			opt->draw_nodes = (long)i64;
			break;
		case OPT_SUMMARY: opt->summary = 1; break;
		case OPT_BUILDS: opt->builds = 1; break;
		case OPT_DRY_RUN: opt->dry_run = 1; break;
		case 'u': opt->update = 1; break;
		case 'v': log_louder(); break;
		case 'V': cli_print_version(); exit(cli_finish(KG_EXIT_OK));
		default: cli_option_error(c, argv);
		}
	}
	if (optind >= argc)
		cli_usage_error("no run directory given");
	opt->run = argv[optind++];
	/* the things kg-select does besides picking, one at a time */
	const char *did[] = {opt->export_json ? "--export" : NULL, opt->update ? "--update" : NULL,
			     opt->draw ? "--draw" : NULL, opt->summary ? "--summary" : NULL,
			     opt->builds ? "--builds" : NULL};
	const char *other = NULL;
	for (size_t i = 0; i < sizeof did / sizeof *did; i++) {
		if (did[i] && other)
			cli_usage_error("%s and %s do not go together", other, did[i]);
		other = other ? other : did[i];
	}
	if (opt->draw_nodes && !opt->draw)
		cli_usage_error("--graph-nodes goes with --draw");
	if (!opt->draw_nodes)
		opt->draw_nodes = 60;
	if (opt->dry_run && !opt->update)
		cli_usage_error("--dry-run goes with --update");
	if (opt->pick.pending && other)
		cli_usage_error("--pending goes with picking, not with %s", other);
	if (opt->pick.fill && other)
		cli_usage_error("--fill goes with picking, not with %s", other);
	if (optind < argc && !opt->update)
		cli_usage_error("unexpected argument '%s' (only --update reads a file)", argv[optind]);
	if (argc - optind > 1)
		cli_usage_error("unexpected argument '%s'", argv[optind + 1]);
}

/* Options given on this command line replace what the graph stored. */
static void apply_given(struct graph *g, const struct options *opt)
{
	for (int c = OPT_C_PUCT; c <= OPT_ROLLOUT_LAMBDA; c++) {
		if (!opt->given[c - OPT_C_PUCT])
			continue;
		struct search_params *from = (struct search_params *)&opt->params;
		if (param_slot(&g->params, c))
			*param_slot(&g->params, c) = *param_slot(from, c);
		else if (long_slot(&g->params, c))
			*long_slot(&g->params, c) = *long_slot(from, c);
		else if (c == OPT_BACKUP)
			g->params.backup_max = opt->params.backup_max;
	}
}


/* --summary: the closing summary of trace.md, with why the search is over, if it is. */
static int write_summary(const struct graph *g)
{
	const char *stopped = NULL;
	if (!stop_reason(g, &stopped) && g->nodes[0].exhausted == NODE_SPENT)
		stopped = "exhausted";
	return trace_summary(g, stopped) == 0 ? KG_EXIT_OK : KG_EXIT_IO;
}

static int export_graph(const struct graph *g)
{
	cJSON *doc = graph_export(g);
	char *text = cJSON_PrintUnformatted(doc);
	if (!text)
		xalloc_die();
	int rc = puts(text) < 0 ? KG_EXIT_IO : KG_EXIT_OK;
	free(text);
	cJSON_Delete(doc);
	return rc;
}

/* Blocks until the reader's stream has data or has ended. */
static void wait_for_input(struct jsonl_reader *reader)
{
	struct pollfd p = {.fd = fileno(reader->fp), .events = POLLIN};
	while (poll(&p, 1, -1) < 0 && errno == EINTR)
		;
}

int main(int argc, char **argv)
{
	struct options opt = {0};
	log_init("kg-select");
	search_params_default(&opt.params);
	parse_options(argc, argv, &opt);

	struct stream in;
	if (opt.update) {
		if (stream_open(&in, optind < argc ? argv[optind] : "-", stdout) != 0)
			return cli_finish(KG_EXIT_USAGE);
		/* In kg-select RUN | ... | kg-select --update RUN both start at once: the update
		 * must not hold the run's lock before the pick, which feeds it, has taken it. */
		wait_for_input(&in.in);
	}
	struct dirlock lock;
	if (dirlock_acquire(&lock, opt.run, 1) != 0) {
		log_error("cannot lock the run '%s':", opt.run);
		if (opt.update)
			stream_release(&in);
		return KG_EXIT_USAGE;
	}
	struct graph g;
	struct step step = {.g = &g};
	double t0 = monotonic_ms();
	int exists = snapshot_load(&step.snapshot, &g, opt.run);
	step.load_ms = monotonic_ms() - t0;
	int status;
	if (exists < 0) {
		status = KG_EXIT_INPUT;
	} else {
		if (!exists && opt.seed_given)
			g.rng = opt.seed;
		apply_given(&g, &opt);
		if (opt.regraph) {
			free(g.regraph);
			g.regraph = xstrdup(opt.regraph);
			g.regraph_blob = (struct blob){BLOB_NONE, 0};
		}
		struct dry_run dry = {0};
		if (opt.dry_run)
			g.dry_run = &dry;
		if (opt.update) {
			status = run_update(&step, exists, &in);
			if (opt.dry_run)
				update_report_dry_run(&g);
		} else if (opt.builds) {
			status = printf("%ld\n", exists ? run_builds(&g) : 0L) < 0 ? KG_EXIT_IO : KG_EXIT_OK;
		} else if (!exists) {
			log_error("%s: no graph yet: make the root with kg-select --update and the benched baseline (kg-init does this)",
				  opt.run);
			status = KG_EXIT_INPUT;
		} else if (opt.export_json) {
			status = export_graph(&g);
		} else if (opt.draw) {
			/* Only a graph learned before graphs kept build numbers needs the log. */
			if (graph_unnumbered(&g) && number_from_log(&g) != 0) {
				status = KG_EXIT_IO;
			} else {
				draw_graph(&g, (enum draw_format)(opt.draw - 1), opt.draw_nodes, stdout);
				status = KG_EXIT_OK;
			}
		} else if (opt.summary) {
			if ((status = catch_up_before_pick(&step)) == KG_EXIT_OK)
				status = write_summary(&g);
		} else if ((status = catch_up_before_pick(&step)) == KG_EXIT_OK) {
			status = run_select(&step, &opt.pick);
		}
	}
	log_info("%s: %zu nodes, %zu edges: loaded in %.2f ms, decided in %.2f ms, saved in %.2f ms", opt.run,
		 g.g.nnodes, g.g.nedges, step.load_ms, step.decide_ms, step.save_ms);
	graph_release(&g);
	snapshot_free(step.snapshot); /* after the graph, whose arrays may lie in its maps */
	dirlock_release(&lock);
	if (opt.update)
		stream_release(&in);
	return cli_finish(status);
}
