/* main.c (kg-regraph): the ReGraph: regraph_dataset.jsonl aggregated into method -> method
 * statistics (build), the likely next methods after one (neighbors), and a drawing (dot). */
#include "common.h"

#include <getopt.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "fileio.h"
#include "jsonl.h"
#include "log.h"
#include "mcgs.h"
#include "parse.h"
#include "regraph.h"
#include "stream.h"
#include "xalloc.h"

struct options {
	const char *command; /* build, neighbors, dot */
	const char *input;   /* DATASET or REGRAPH */
	const char *output;  /* -o */
	const char *from;    /* --from */
	long top;	     /* --top */
	double lambda, alpha0, beta0, improve;
};

static void usage(FILE *fp)
{
	fputs("Usage: kg-regraph build DATASET [-o FILE] [--lambda L] [--alpha0 A] [--beta0 B] [--improve D]\n"
	      "       kg-regraph neighbors --from METHOD [--top K] REGRAPH\n"
	      "       kg-regraph dot REGRAPH\n"
	      "The ReGraph: what followed what in earlier searches, and how it went.\n"
	      "\n"
	      "  build       aggregate OUTDIR/regraph_dataset.jsonl (one row per evaluated transition, as\n"
	      "              kg-select --update writes it) into regraph.json, on stdout or -o FILE\n"
	      "  neighbors   the methods most worth trying after METHOD, best first, one JSON line each:\n"
	      "              {\"from\",\"to\",\"prior\",\"probability\",\"success_mean\",\"count\",\"mean_reward\"}\n"
	      "  dot         the graph in Graphviz DOT: edge width by count, colour by mean reward\n"
	      "\n"
	      "  -o, --output FILE   build: write FILE atomically instead of stdout\n"
	      "      --lambda L      build: pseudo-count of the backoff to the global frequency (default 4)\n"
	      "      --alpha0 A      build: Beta prior of a transition's success (default 1)\n"
	      "      --beta0 B       build: (default 1)\n"
	      "      --improve D     build: a success is correct and faster by more than D (default 0.01)\n"
	      "  -f, --from METHOD   neighbors: the method just applied (\"init\" at the root)\n"
	      "  -k, --top K         neighbors: how many (default 5)\n"
	      "  -q, --quiet         print errors only\n"
	      "  -v, --verbose       say more on stderr\n"
	      "  -h, --help          print this help and exit\n"
	      "  -V, --version       print the version and exit\n"
	      "\n"
	      "Each kernel weighs the same: in the transition probabilities a kernel's rows from one method\n"
	      "share a weight of 1 (docs/search.md); in success rates and means each kernel's rows share an\n"
	      "equal part of the total. P(b|a) = (w_ab + L P(b)) / (w_a + L) with P(b) the Laplace-smoothed\n"
	      "frequency of b; success ~ Beta(A + s, B + f).\n"
	      "\n"
	      "Exit status: 0 done; 1 a row or the ReGraph is invalid (reported with its line or field);\n"
	      "2 usage error or unreadable file; 4 output could not be written.\n",
	      fp);
}

static double number_arg(const char *name, const char *arg, double min)
{
	double v;
	if (parse_double(arg, min, 1e9, &v))
		cli_usage_error("%s: '%s' is not a number of at least %g", name, arg, min);
	return v;
}

static void parse_options(int argc, char **argv, struct options *opt)
{
	enum { OPT_LAMBDA = 256, OPT_ALPHA0, OPT_BETA0, OPT_IMPROVE };
	static const struct option longopts[] = {
		{"alpha0", required_argument, NULL, OPT_ALPHA0}, {"beta0", required_argument, NULL, OPT_BETA0},
		{"from", required_argument, NULL, 'f'},		 {"help", no_argument, NULL, 'h'},
		{"improve", required_argument, NULL, OPT_IMPROVE}, {"lambda", required_argument, NULL, OPT_LAMBDA},
		{"output", required_argument, NULL, 'o'},	 {"quiet", no_argument, NULL, 'q'},
		{"top", required_argument, NULL, 'k'},		 {"verbose", no_argument, NULL, 'v'},
		{"version", no_argument, NULL, 'V'},		 {NULL, 0, NULL, 0},
	};
	int c;
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":f:hk:o:qvV", longopts, NULL)) != -1) {
		switch (c) {
		case 'f': opt->from = optarg; break;
		case 'h': usage(stdout); exit(cli_finish(KG_EXIT_OK));
		case 'k': opt->top = (long)number_arg("--top", optarg, 1); break;
		case 'o': opt->output = optarg; break;
		case 'q': log_quieter(); break;
		case 'v': log_louder(); break;
		case 'V': cli_print_version(); exit(cli_finish(KG_EXIT_OK));
		case OPT_LAMBDA: opt->lambda = number_arg("--lambda", optarg, 0); break;
		case OPT_ALPHA0: opt->alpha0 = number_arg("--alpha0", optarg, 0); break;
		case OPT_BETA0: opt->beta0 = number_arg("--beta0", optarg, 0); break;
		case OPT_IMPROVE: opt->improve = number_arg("--improve", optarg, 0); break;
		default: cli_option_error(c, argv);
		}
	}
	if (optind >= argc)
		cli_usage_error("no command given: build, neighbors or dot");
	opt->command = argv[optind++];
	if (strcmp(opt->command, "build") != 0 && strcmp(opt->command, "neighbors") != 0 && strcmp(opt->command, "dot") != 0)
		cli_usage_error("'%s' is not a command: build, neighbors or dot", opt->command);
	if (optind >= argc)
		cli_usage_error("%s needs %s", opt->command, strcmp(opt->command, "build") == 0 ? "a DATASET" : "a REGRAPH file");
	opt->input = argv[optind++];
	if (optind < argc)
		cli_usage_error("unexpected argument '%s'", argv[optind]);
	if (strcmp(opt->command, "neighbors") == 0 && !opt->from)
		cli_usage_error("neighbors needs --from METHOD");
	if (opt->output && strcmp(opt->command, "build") != 0)
		cli_usage_error("-o goes with build");
}

/* ---------------------------------------------------------------- build */

struct row {
	size_t kernel, from, to;
	int success;
	double reward, log2_speedup; /* NAN when the candidate failed */
	double weight;		     /* in the transition probabilities: 1 / the kernel's rows from `from` */
	double balance;		     /* in rates and means: the kernel's equal share of all rows */
};

struct names {
	char **v;
	size_t n;
};

static size_t name_index(struct names *names, const char *name)
{
	for (size_t i = 0; i < names->n; i++)
		if (strcmp(names->v[i], name) == 0)
			return i;
	names->v = xreallocarray(names->v, names->n + 1, sizeof(*names->v));
	names->v[names->n] = xstrdup(name);
	return names->n++;
}

static void names_release(struct names *names)
{
	for (size_t i = 0; i < names->n; i++)
		free(names->v[i]);
	free(names->v);
}

/* The rows of the dataset, as they are read. */
struct dataset {
	const struct options *opt;
	struct names kernels, methods;
	struct row *rows;
	size_t n;
};

/* Reads one dataset row into d. Returns 0, or -1 after reporting what is wrong. */
static int read_row(struct dataset *d, struct stream *s, const cJSON *rec)
{
	const char *kernel = json_string(rec, "kernel"), *from = json_string(rec, "from_method");
	const char *to = json_string(rec, "to_method");
	const cJSON *ok = cJSON_GetObjectItemCaseSensitive(rec, "ok");
	double reward = json_number(rec, "reward", NAN), speedup = json_number(rec, "speedup", NAN);
	const char *bad = !kernel ? "kernel: must be a string"
			  : !from ? "from_method: must be a string"
			  : !to || !*to ? "to_method: must be a non-empty string"
			  : !cJSON_IsBool(ok) ? "ok: must be true or false"
			  : isnan(reward) ? "reward: must be a number"
					  : NULL;
	if (bad)
		return stream_error(s, s->in.line, "%s", bad);
	d->rows = xreallocarray(d->rows, d->n + 1, sizeof(*d->rows));
	struct row *r = &d->rows[d->n++];
	*r = (struct row){.kernel = name_index(&d->kernels, kernel), .from = name_index(&d->methods, *from ? from : "init"),
			  .to = name_index(&d->methods, to), .reward = reward, .log2_speedup = NAN};
	if (cJSON_IsTrue(ok) && speedup > 0) {
		r->log2_speedup = log2(speedup);
		r->success = speedup > 1 + d->opt->improve;
	}
	return 0;
}

static enum stream_action take_row(struct stream *s, cJSON *rec, void *ctx)
{
	read_row(ctx, s, rec);
	cJSON_Delete(rec);
	return STREAM_TAKEN;
}

/* Per pair (from, to), or per method (from = SIZE_MAX). */
struct tally {
	double count, successes, weight, bal, bal_success, bal_reward, bal_log2, bal_log2_n;
};

static void add(struct tally *t, const struct row *r)
{
	t->count++;
	t->successes += r->success;
	t->weight += r->weight;
	t->bal += r->balance;
	t->bal_success += r->success * r->balance;
	t->bal_reward += r->reward * r->balance;
	if (!isnan(r->log2_speedup)) {
		t->bal_log2 += r->log2_speedup * r->balance;
		t->bal_log2_n += r->balance;
	}
}

static void add_means(cJSON *o, const struct tally *t)
{
	json_add_number(o, "mean_reward", t->bal > 0 ? t->bal_reward / t->bal : NAN);
	json_add_number(o, "mean_log2_speedup", t->bal_log2_n > 0 ? t->bal_log2 / t->bal_log2_n : NAN);
}

static cJSON *regraph_json(const struct options *opt, const struct names *methods, const struct row *rows, size_t n,
			   size_t nkernels)
{
	size_t m = methods->n;
	struct tally *pair = xcalloc(m * m + 1, sizeof(*pair)), *into = xcalloc(m + 1, sizeof(*into));
	for (size_t i = 0; i < n; i++) {
		add(&pair[rows[i].from * m + rows[i].to], &rows[i]);
		add(&into[rows[i].to], &rows[i]);
	}
	/* P(b): the Laplace-smoothed frequency of each method as a target; one never reached gets 0. */
	double *w = xcalloc(m + 1, sizeof(*w)), *global = xcalloc(m + 1, sizeof(*global));
	size_t *target = xcalloc(m + 1, sizeof(*target)), k = 0;
	for (size_t b = 0; b < m; b++)
		if (into[b].count > 0) {
			target[k] = b;
			w[k++] = into[b].weight;
		}
	double *smoothed = xcalloc(k + 1, sizeof(*smoothed)), *p = xcalloc(k + 1, sizeof(*p));
	mcgs_prior_laplace(w, k, 1.0, smoothed);
	for (size_t j = 0; j < k; j++)
		global[target[j]] = smoothed[j];

	cJSON *doc = json_object(), *params = json_object(), *nodes = cJSON_CreateArray(), *edges = cJSON_CreateArray();
	json_add_number(doc, "version", 1);
	json_add_string(doc, "dataset", opt->input);
	json_add_number(doc, "rows", (double)n);
	json_add_number(doc, "kernels", (double)nkernels);
	json_add_number(params, "lambda", opt->lambda);
	json_add_number(params, "alpha0", opt->alpha0);
	json_add_number(params, "beta0", opt->beta0);
	json_add_number(params, "improve", opt->improve);
	json_add(doc, "parameters", params);
	for (size_t a = 0; a < m; a++) {
		double out_weight = 0;
		for (size_t j = 0; j < k; j++)
			out_weight += (w[j] = pair[a * m + target[j]].weight);
		cJSON *node = json_object();
		json_add_string(node, "method", methods->v[a]);
		json_add_number(node, "count", into[a].count);
		json_add_number(node, "successes", into[a].successes);
		add_means(node, &into[a]);
		json_add_number(node, "frequency", global[a]);
		json_add_number(node, "out_weight", out_weight);
		json_append(nodes, node);
		if (out_weight == 0)
			continue;
		mcgs_prior_backoff(w, smoothed, k, opt->lambda, p);
		for (size_t j = 0; j < k; j++) {
			const struct tally *t = &pair[a * m + target[j]];
			if (t->count == 0)
				continue; /* unseen: neighbors backs off to the frequency */
			double ba, bb, mean, var;
			mcgs_beta_posterior(t->bal_success, t->bal - t->bal_success, opt->alpha0, opt->beta0, &ba, &bb, &mean, &var);
			cJSON *e = json_object(), *beta = cJSON_CreateArray();
			json_add_string(e, "from", methods->v[a]);
			json_add_string(e, "to", methods->v[target[j]]);
			json_add_number(e, "count", t->count);
			json_add_number(e, "successes", t->successes);
			json_add_number(e, "failures", t->count - t->successes);
			json_add_number(e, "weight", t->weight);
			add_means(e, t);
			json_append(beta, cJSON_CreateNumber(ba));
			json_append(beta, cJSON_CreateNumber(bb));
			json_add(e, "beta", beta);
			json_add_number(e, "success_mean", mean);
			json_add_number(e, "probability", p[j]);
			json_append(edges, e);
		}
	}
	json_add(doc, "nodes", nodes);
	json_add(doc, "edges", edges);
	free(pair);
	free(into);
	free(w);
	free(global);
	free(target);
	free(smoothed);
	free(p);
	return doc;
}

static int build(const struct options *opt)
{
	struct stream in;
	if (stream_open(&in, opt->input, NULL) != 0)
		return KG_EXIT_USAGE;
	struct dataset d = {.opt = opt};
	int status = stream_each(&in, take_row, &d);
	stream_release(&in);
	struct row *rows = d.rows;
	size_t n = d.n;
	struct names kernels = d.kernels, methods = d.methods;
	/* Weights: see usage() and docs/search.md "The ReGraph". */
	double *per_kernel = xcalloc(kernels.n + 1, sizeof(*per_kernel));
	double *per_origin = xcalloc(kernels.n * methods.n + 1, sizeof(*per_origin));
	for (size_t i = 0; i < n; i++) {
		per_kernel[rows[i].kernel]++;
		per_origin[rows[i].kernel * methods.n + rows[i].from]++;
	}
	for (size_t i = 0; i < n; i++) {
		rows[i].weight = 1 / per_origin[rows[i].kernel * methods.n + rows[i].from];
		rows[i].balance = (double)n / ((double)kernels.n * per_kernel[rows[i].kernel]);
	}
	cJSON *doc = regraph_json(opt, &methods, rows, n, kernels.n);
	log_info("%s: %zu transitions of %zu kernels, %zu methods", opt->input, n, kernels.n, methods.n);
	if (status != KG_EXIT_IO) {
		int rc = opt->output ? json_write_file(opt->output, doc, 1) : jsonl_write(stdout, doc);
		if (rc != 0 && opt->output) {
			log_error("cannot write '%s':", opt->output);
			status = KG_EXIT_IO;
		} else if (rc != 0) {
			status = KG_EXIT_IO;
		}
	}
	cJSON_Delete(doc);
	free(per_kernel);
	free(per_origin);
	free(rows);
	names_release(&kernels);
	names_release(&methods);
	return status;
}

/* ---------------------------------------------------------------- reading a ReGraph */

/* ---------------------------------------------------------------- neighbors */

static int neighbors(const struct options *opt)
{
	int status;
	cJSON *doc = regraph_load(opt->input, &status);
	if (!doc)
		return status;
	const cJSON *nodes = cJSON_GetObjectItemCaseSensitive(doc, "nodes"), *node;
	struct regraph_transition *list = xcalloc((size_t)cJSON_GetArraySize(nodes) + 1, sizeof(*list));
	size_t n = 0;
	double total = 0;
	cJSON_ArrayForEach(node, nodes) {
		struct regraph_transition *t = &list[n];
		if (regraph_transition(doc, opt->from, json_string(node, "method"), t) != 0)
			continue; /* never a target */
		total += t->probability * t->success;
		n++;
	}
	regraph_sort(list, n);
	status = KG_EXIT_OK;
	for (size_t i = 0; i < n && (long)i < opt->top && status == KG_EXIT_OK; i++) {
		cJSON *line = json_object();
		json_add_string(line, "from", opt->from);
		json_add_string(line, "to", list[i].to);
		json_add_number(line, "prior", total > 0 ? list[i].probability * list[i].success / total : 0);
		json_add_number(line, "probability", list[i].probability);
		json_add_number(line, "success_mean", list[i].success);
		json_add_number(line, "count", list[i].count);
		json_add_number(line, "mean_reward", list[i].mean_reward);
		if (jsonl_write(stdout, line) != 0)
			status = KG_EXIT_IO;
		cJSON_Delete(line);
	}
	int known = 0;
	cJSON_ArrayForEach(node, nodes)
		known |= json_string(node, "method") && strcmp(json_string(node, "method"), opt->from) == 0;
	if (!known)
		log_warn("%s: no transition from '%s' yet: the methods' overall frequency ranks them", opt->input, opt->from);
	free(list);
	cJSON_Delete(doc);
	return status;
}

/* ---------------------------------------------------------------- dot */

static void dot_chars(const char *s)
{
	for (; *s; s++) {
		if (*s == '"' || *s == '\\')
			putchar('\\');
		putchar(*s);
	}
}

static void dot_string(const char *s)
{
	putchar('"');
	dot_chars(s);
	putchar('"');
}

/* A diverging scale, red for a transition that slows kernels down, green for one that helps. */
static const char *reward_colour(double r)
{
	return isnan(r) ? "#999999" : r < -0.25 ? "#d73027" : r < -0.05 ? "#fc8d59" : r < 0.05 ? "#999999"
		     : r < 0.25 ? "#91cf60" : "#1a9850";
}

static int dot(const struct options *opt)
{
	int status;
	cJSON *doc = regraph_load(opt->input, &status);
	if (!doc)
		return status;
	const cJSON *item, *edges = cJSON_GetObjectItemCaseSensitive(doc, "edges");
	double most = 1;
	cJSON_ArrayForEach(item, edges)
		most = fmax(most, json_number(item, "count", 0));
	printf("digraph regraph {\n\trankdir=LR;\n\tnode [shape=box, style=rounded];\n");
	cJSON_ArrayForEach(item, cJSON_GetObjectItemCaseSensitive(doc, "nodes")) {
		putchar('\t');
		dot_string(json_string(item, "method"));
		printf(" [label=\"");
		dot_chars(json_string(item, "method"));
		printf("\\nn=%g\"];\n", json_number(item, "count", 0));
	}
	cJSON_ArrayForEach(item, edges) {
		double count = json_number(item, "count", 0), reward = json_number(item, "mean_reward", NAN);
		putchar('\t');
		dot_string(json_string(item, "from"));
		printf(" -> ");
		dot_string(json_string(item, "to"));
		printf(" [penwidth=%.2f, color=\"%s\", label=\"%g, p=%.2f\"];\n", 1 + 4 * count / most, reward_colour(reward),
		       count, json_number(item, "probability", 0));
	}
	printf("}\n");
	cJSON_Delete(doc);
	return KG_EXIT_OK;
}

int main(int argc, char **argv)
{
	struct options opt = {.top = 5, .lambda = 4, .alpha0 = 1, .beta0 = 1, .improve = 0.01};
	log_init("kg-regraph");
	parse_options(argc, argv, &opt);
	int status = strcmp(opt.command, "build") == 0 ? build(&opt) : strcmp(opt.command, "neighbors") == 0 ? neighbors(&opt)
											 : dot(&opt);
	return cli_finish(status);
}
