/* main.c (kg-relabel): maps each candidate's freely named method onto the run's method catalog
 * (exact, alias, by terms, optionally an LLM), growing the catalog with what is new. */
#include "common.h"

#include <getopt.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "fileio.h"
#include "jsonl.h"
#include "llm.h"
#include "log.h"
#include "methods.h"
#include "parse.h"
#include "run.h"
#include "stream.h"
#include "xalloc.h"

struct options {
	const char *catalog; /* --catalog, else OUTDIR/methods.json of each record's run */
	double threshold;    /* --threshold, else the default of the mode (NAN until then) */
	int llm, merge;	     /* --llm, --merge */
	int dry_run;	     /* --dry-run: the catalog and the run's llm/ are not written */
	const char *input;
	struct llm_settings s;
};

static void usage(FILE *fp)
{
	fputs("Usage: kg-relabel [--catalog FILE] [--threshold T] [--dry-run] [--llm [LLM OPTIONS]] [FILE]\n"
	      "       kg-relabel --merge [--catalog FILE] [--threshold T]\n"
	      "Give each record with a candidate.method its canonical method, \"method\": {\"label\",\n"
	      "\"canonical\", \"how\", \"score\"}, in this order: the normalized name equals a catalog name\n"
	      "(how \"exact\") or alias (\"alias\"), a method knows a share of at least T of its terms\n"
	      "(\"fuzzy\"), the LLM maps it (\"llm\", one call per expansion), or else it becomes a new method\n"
	      "of the catalog (\"new\"). Terms are the name's words lowercased, spelled the American way,\n"
	      "stemmed (\"unrolling\" as \"unroll\"), with the domain's synonyms written one way (smem as\n"
	      "shared memory, cp.async and TMA as async copy, float4 as vector, wgmma as mma) and filler\n"
	      "words (\"use\", \"the\", \"increase\") dropped; a term weighs more the fewer methods use it, and\n"
	      "most when none does, so that a name of words no method knows stays new.\n"
	      "Other records pass through. The catalog is OUTDIR/methods.json two levels above the record's\n"
	      "run (seeded with the sixteen canonical methods), updated atomically under methods.json.lock.\n"
	      "\n"
	      "      --catalog FILE      the catalog for every record\n"
	      "      --dry-run           relabel and write the records as without it, but write nothing to\n"
	      "                          the catalog (say on stderr what it would get) nor, with --llm, to\n"
	      "                          the run's llm/ (the calls are neither logged nor cached)\n"
	      "      --threshold T       the least share of a name's weighted terms that the method's names and\n"
	      "                          aliases must know (a term of its description counts half), 0 to 1\n"
	      "                          (default 0.4); with --merge, the least share each of two methods must\n"
	      "                          know of a name of the other (default 0.7)\n"
	      "      --merge             print pairs of catalog methods that look like synonyms, for a person\n"
	      "                          to merge: {\"merge\": [A, B], \"score\"}; changes nothing\n"
	      "  -l, --llm               ask an LLM about names no rule matches (OPENAI_API_KEY, OPENAI_BASE_URL)\n"
	      "\n"
	      "LLM options (as kg-propose's):\n"
	      "      --model M           the model (default gpt-5-mini)\n"
	      LLM_OPTIONS_HELP
	      "\n"
	      "  -q, --quiet             print errors only\n"
	      "  -v, --verbose           say more on stderr\n"
	      "  -h, --help              print this help and exit\n"
	      "  -V, --version           print the version and exit\n"
	      "\n"
	      "Exit status: 0 done; 1 a record or the catalog could not be handled; 2 usage error;\n"
	      "3 --llm without OPENAI_API_KEY or OPENAI_BASE_URL; 4 output could not be written.\n",
	      fp);
}

static void parse_options(int argc, char **argv, struct options *opt)
{
	static const struct option longopts[] = {
		{"catalog", required_argument, NULL, 'c'}, {"dry-run", no_argument, NULL, 'n'},
		{"help", no_argument, NULL, 'h'},
		{"llm", no_argument, NULL, 'l'},	   {"merge", no_argument, NULL, 'm'},
		{"quiet", no_argument, NULL, 'q'},	   {"threshold", required_argument, NULL, 't'},
		{"verbose", no_argument, NULL, 'v'},	   {"version", no_argument, NULL, 'V'},
		LLM_LONG_OPTIONS,			   {NULL, 0, NULL, 0},
	};
	int c;
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":hlqvV", longopts, NULL)) != -1) {
		switch (c) {
		case 'c': opt->catalog = optarg; break;
		case 'n': opt->dry_run = 1; break;
		case 'h': usage(stdout); exit(cli_finish(KG_EXIT_OK));
		case 'l': opt->llm = 1; break;
		case 'm': opt->merge = 1; break;
		case 'q': log_quieter(); break;
		case 't':
			if (parse_double(optarg, 0, 1, &opt->threshold))
				cli_usage_error("--threshold: '%s' is not a number from 0 to 1", optarg);
			break;
		case 'v': log_louder(); break;
		case 'V': cli_print_version(); exit(cli_finish(KG_EXIT_OK));
		default: {
			if (!llm_is_option(c))
				cli_option_error(c, argv);
			char *why = llm_option(&opt->s, c, optarg);
			if (why)
				cli_usage_error("%s", why);
		}
		}
	}
	if (opt->merge && optind < argc)
		cli_usage_error("--merge reads no records (unexpected argument '%s')", argv[optind]);
	if (opt->merge && opt->dry_run)
		cli_usage_error("--merge changes nothing: --dry-run goes with relabelling");
	if (opt->merge && !opt->catalog)
		cli_usage_error("--merge needs --catalog FILE");
	if (optind + 1 < argc)
		cli_usage_error("unexpected argument '%s'", argv[optind + 1]);
	opt->input = optind < argc ? argv[optind] : "-";
	if (isnan(opt->threshold))
		opt->threshold = opt->merge ? METHODS_MERGE_THRESHOLD : METHODS_MATCH_THRESHOLD;
	if (opt->llm && llm_settings_from_env(&opt->s) != 0)
		exit(cli_finish(KG_EXIT_ENV));
}

/* ---------------------------------------------------------------- matching */

struct decision {
	char *label, *canonical, *detail;
	const char *how;
	double score;
};

static int has_name(const cJSON *catalog, const char *name)
{
	const cJSON *m;
	cJSON_ArrayForEach(m, cJSON_GetObjectItemCaseSensitive(catalog, "methods"))
		if (strcmp(json_string(m, "name"), name) == 0)
			return 1;
	return 0;
}

/* Exact, alias or fuzzy; fills d and returns 1, or 0 when nothing reaches the threshold (d's
 * score is then the best seen). */
static int match(const cJSON *catalog, double threshold, struct decision *d)
{
	const cJSON *m = methods_match(catalog, d->label, threshold, &d->how, &d->score);
	if (m)
		d->canonical = xstrdup(json_string(m, "name"));
	return m != NULL;
}

/* ---------------------------------------------------------------- the LLM's relabel step */

static char *relabel_prompt(const cJSON *catalog, struct decision *ds, size_t n)
{
	struct strbuf sb;
	strbuf_init(&sb);
	strbuf_addstr(&sb, "## Catalog of optimization methods (name: description; aliases)\n");
	const cJSON *m, *alias;
	cJSON_ArrayForEach(m, cJSON_GetObjectItemCaseSensitive(catalog, "methods")) {
		const char *desc = json_string(m, "description");
		strbuf_addf(&sb, "- %s: %s", json_string(m, "name"), desc ? desc : "");
		int k = 0;
		cJSON_ArrayForEach(alias, cJSON_GetObjectItemCaseSensitive(m, "aliases"))
			if (cJSON_IsString(alias))
				strbuf_addf(&sb, "%s%s", k++ ? ", " : "; ", alias->valuestring);
		strbuf_addch(&sb, '\n');
	}
	strbuf_addstr(&sb, "\n## Steps to relabel\n");
	for (size_t i = 0; i < n; i++)
		strbuf_addf(&sb, "- label \"%s\": %s\n", ds[i].label, ds[i].detail ? ds[i].detail : "");
	strbuf_addstr(&sb, "\n## Answer\nOne JSON object {\"mappings\": [{\"label\", \"canonical\", \"new_name\"}]}, one "
			   "per step: \"canonical\" is the catalog name the step is an instance of, or null when none "
			   "is; then \"new_name\" is a short lowercase snake_case name for the new method, else null.\n");
	return strbuf_detach(&sb);
}

/* One call for every step no rule matched; fills canonical and how for those it maps. */
static void ask_llm(const struct options *opt, const char *run, const cJSON *catalog, struct decision *ds, size_t n)
{
	static const char schema_text[] =
		"{\"type\":\"object\",\"additionalProperties\":false,\"required\":[\"mappings\"],\"properties\":{\"mappings\":"
		"{\"type\":\"array\",\"items\":{\"type\":\"object\",\"additionalProperties\":false,\"required\":[\"label\","
		"\"canonical\",\"new_name\"],\"properties\":{\"label\":{\"type\":\"string\"},\"canonical\":{\"type\":[\"string\","
		"\"null\"]},\"new_name\":{\"type\":[\"string\",\"null\"]}}}}}}";
	struct llm_settings s = opt->s;
	int keep = run && !opt->dry_run; /* a dry run writes nothing into the run, its llm/ included */
	char *log_dir = keep ? run_path(run, RUN_LLM) : NULL, *cache_dir = keep ? run_path(run, RUN_LLM_CACHE) : NULL;
	s.log_dir = log_dir;
	s.cache_dir = cache_dir;
	cJSON *messages = cJSON_CreateArray(), *schema = cJSON_Parse(schema_text);
	char *prompt = relabel_prompt(catalog, ds, n);
	cJSON *sys = json_object(), *user = json_object();
	json_add_string(sys, "role", "system");
	json_add_string(sys, "content", "You relabel GPU kernel optimization steps onto a catalog of canonical methods, "
					"as in ReGraphT's relabel step: map each step onto the existing name it is an "
					"instance of, or declare it new. Answer with one JSON object only.");
	json_add_string(user, "role", "user");
	json_add_string(user, "content", prompt);
	json_append(messages, sys);
	json_append(messages, user);
	struct llm_request req = {.label = "relabel", .messages = messages, .schema = schema, .schema_name = "relabel"};
	llm_run(&s, &req, 1);
	cJSON *answer = req.ok ? cJSON_Parse(req.text) : NULL;
	llm_redact_json(&s, answer); /* a name escaped in the answer's JSON is the key once parsed */
	if (!req.ok)
		log_warn("relabel by LLM failed: %s; the steps become new methods", req.error);
	else if (!answer)
		log_warn("relabel by LLM: the answer is not JSON (see %s/%s); the steps become new methods",
			 log_dir ? log_dir : "no log: --dry-run", req.log_file ? req.log_file : "");
	const cJSON *map;
	cJSON_ArrayForEach(map, cJSON_GetObjectItemCaseSensitive(answer, "mappings")) {
		const char *label = json_string(map, "label"), *canonical = json_string(map, "canonical");
		const char *new_name = json_string(map, "new_name");
		for (size_t i = 0; label && i < n; i++) {
			if (ds[i].canonical || strcmp(ds[i].label, label) != 0)
				continue;
			if (canonical && has_name(catalog, canonical)) {
				ds[i].canonical = xstrdup(canonical);
				ds[i].how = "llm";
			} else if (new_name && *new_name) {
				ds[i].canonical = method_normalize(new_name);
				ds[i].how = "new";
			}
		}
	}
	cJSON_Delete(answer);
	llm_request_release(&req);
	free(prompt);
	cJSON_Delete(messages);
	cJSON_Delete(schema);
	free(log_dir);
	free(cache_dir);
}

/* ---------------------------------------------------------------- the catalog */


static char *catalog_path(const struct options *opt, const char *run)
{
	return opt->catalog ? xstrdup(opt->catalog) : run_outdir_path(run, OUTDIR_METHODS);
}

static void add_alias(cJSON *method, const char *label)
{
	cJSON *aliases = cJSON_GetObjectItemCaseSensitive(method, "aliases");
	if (!cJSON_IsArray(aliases)) {
		aliases = cJSON_CreateArray();
		cJSON_DeleteItemFromObjectCaseSensitive(method, "aliases");
		json_add(method, "aliases", aliases);
	}
	const cJSON *a;
	cJSON_ArrayForEach(a, aliases)
		if (cJSON_IsString(a) && strcmp(a->valuestring, label) == 0)
			return;
	json_append(aliases, cJSON_CreateString(label));
}

/* Writes the new methods and the aliases learned into the catalog, reading it again under its
 * lock so that what another relabel added meanwhile is kept; with dry_run, says what it would
 * write instead, taking no lock (its file is not made either). Returns 0, or -1 (reported). */
static int update_catalog(const char *path, const struct decision *ds, size_t n, int dry_run)
{
	struct dirlock lock = {.fd = -1};
	char *lock_path = xasprintf("%s.lock", path);
	int rc = dry_run ? 0 : filelock_acquire(&lock, lock_path, 1);
	free(lock_path);
	if (rc != 0)
		return log_error("cannot lock '%s.lock':", path);
	cJSON *doc = methods_load(path);
	int changed = 0;
	for (size_t i = 0; doc && i < n; i++) {
		const struct decision *d = &ds[i];
		if (strcmp(d->how, "exact") == 0 || strcmp(d->how, "alias") == 0)
			continue;
		cJSON *m, *found = NULL;
		cJSON_ArrayForEach(m, cJSON_GetObjectItemCaseSensitive(doc, "methods"))
			if (strcmp(json_string(m, "name"), d->canonical) == 0)
				found = m;
		if (!found) {
			found = json_object();
			json_add_string(found, "name", d->canonical);
			json_add_string(found, "description", d->detail ? d->detail : d->label);
			json_add(found, "aliases", cJSON_CreateArray());
			json_append(cJSON_GetObjectItemCaseSensitive(doc, "methods"), found);
			changed = 1;
			if (dry_run)
				log_notice("dry run: %s would get the method %s", path, d->canonical);
		}
		if (strcmp(d->label, d->canonical) != 0) {
			int before = cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(found, "aliases"));
			add_alias(found, d->label);
			if (cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(found, "aliases")) != before) {
				changed = 1;
				if (dry_run)
					log_notice("dry run: %s would get \"%s\" as an alias of %s", path, d->label, d->canonical);
			}
		}
	}
	rc = doc ? 0 : -1;
	if (doc && changed && !dry_run && json_write_file(path, doc, 1) != 0)
		rc = log_error("cannot write '%s':", path);
	cJSON_Delete(doc);
	if (!dry_run)
		dirlock_release(&lock);
	return rc;
}

/* ---------------------------------------------------------------- records */

struct group {
	cJSON **records;
	long *lines;
	size_t n;
	char *key; /* run, node and iter: the expansion the records came from */
};

static char *expansion_key(const cJSON *r)
{
	const cJSON *item = cJSON_GetObjectItemCaseSensitive(r, "node");
	char *node = item ? json_text(item) : xstrdup("");
	char *key = xasprintf("%s|%s|%g", json_string(r, "run") ? json_string(r, "run") : "", node, json_number(r, "iter", -1));
	free(node);
	return key;
}

static void new_method(struct decision *d)
{
	d->canonical = method_normalize(d->label);
	d->how = "new";
	if (!*d->canonical) {
		free(d->canonical);
		d->canonical = xstrdup("unnamed");
	}
}

/* Relabels a group of candidate records of one catalog and expansion; writes them. */
static void relabel_group(const struct options *opt, struct group *g, struct stream *s)
{
	struct decision *ds = xcalloc(g->n + 1, sizeof(*ds));
	const char *run = json_string(g->records[0], "run");
	char *path = catalog_path(opt, run);
	cJSON *catalog = methods_load(path);
	if (!catalog)
		stream_fail(s, KG_EXIT_INPUT);
	size_t unmatched = 0;
	for (size_t i = 0; catalog && i < g->n; i++) {
		const cJSON *c = cJSON_GetObjectItemCaseSensitive(g->records[i], "candidate");
		ds[i].label = xstrdup(json_string(c, "method"));
		ds[i].detail = json_string(c, "detail") ? xstrdup(json_string(c, "detail")) : NULL;
		if (match(catalog, opt->threshold, &ds[i]))
			continue;
		if (opt->llm) {
			unmatched++;
			continue;
		}
		/* New now, so that a later step of the expansion with a like name lands on it. */
		new_method(&ds[i]);
		cJSON *m = json_object();
		json_add_string(m, "name", ds[i].canonical);
		json_append(cJSON_GetObjectItemCaseSensitive(catalog, "methods"), m);
	}
	if (catalog && unmatched && opt->llm) {
		struct decision *ask = xcalloc(unmatched + 1, sizeof(*ask));
		size_t k = 0;
		for (size_t i = 0; i < g->n; i++)
			if (!ds[i].canonical)
				ask[k++] = ds[i];
		ask_llm(opt, run, catalog, ask, k);
		for (size_t i = 0, j = 0; i < g->n; i++)
			if (!ds[i].canonical) {
				ds[i].canonical = ask[j].canonical;
				ds[i].how = ask[j++].how;
			}
		free(ask);
	}
	for (size_t i = 0; catalog && i < g->n; i++)
		if (!ds[i].canonical)
			new_method(&ds[i]);
	if (catalog && update_catalog(path, ds, g->n, opt->dry_run) != 0)
		stream_fail(s, KG_EXIT_INPUT);
	for (size_t i = 0; i < g->n; i++) {
		if (catalog) {
			cJSON *m = json_object();
			json_add_string(m, "label", ds[i].label);
			json_add_string(m, "canonical", ds[i].canonical);
			json_add_string(m, "how", ds[i].how);
			json_add_number(m, "score", ds[i].score);
			if (cJSON_HasObjectItem(g->records[i], "method"))
				cJSON_ReplaceItemInObjectCaseSensitive(g->records[i], "method", m);
			else
				json_add(g->records[i], "method", m);
			log_info("%s:%ld: \"%s\" -> %s (%s, %.2f)", s->in.name, g->lines[i], ds[i].label, ds[i].canonical,
				 ds[i].how, ds[i].score);
		}
		stream_write(s, g->records[i]);
		free(ds[i].label);
		free(ds[i].canonical);
		free(ds[i].detail);
		cJSON_Delete(g->records[i]);
	}
	free(ds);
	cJSON_Delete(catalog);
	free(path);
	free(g->key);
	g->key = NULL;
	g->n = 0;
}

struct relabeler {
	const struct options *opt;
	struct group g; /* the records of the expansion being read */
};

/* Gathers the candidates of one expansion, to relabel them together (one LLM call); the
 * group goes out when a record of another expansion, or none with a method, comes. */
static enum stream_action take_record(struct stream *s, cJSON *rec, void *ctx)
{
	struct relabeler *r = ctx;
	struct group *g = &r->g;
	const cJSON *c = cJSON_GetObjectItemCaseSensitive(rec, "candidate");
	const cJSON *method = cJSON_GetObjectItemCaseSensitive(c, "method");
	char *key = expansion_key(rec);
	if (g->n && (!method || strcmp(key, g->key) != 0))
		relabel_group(r->opt, g, s);
	if (method && !(cJSON_IsString(method) && *method->valuestring)) {
		stream_error(s, s->in.line, "candidate.method: must be a non-empty string");
		method = NULL;
	} else if (method && !r->opt->catalog && !json_string(rec, "run")) {
		stream_error(s, s->in.line, "run: missing, so no catalog (give the record a run, or --catalog FILE)");
		method = NULL;
	}
	if (!method) {
		free(key);
		return STREAM_PASS;
	}
	g->records = xreallocarray(g->records, g->n + 1, sizeof(*g->records));
	g->lines = xreallocarray(g->lines, g->n + 1, sizeof(*g->lines));
	g->records[g->n] = rec;
	g->lines[g->n++] = s->in.line;
	free(g->key);
	g->key = key;
	return STREAM_TAKEN;
}

static int relabel_stream(const struct options *opt)
{
	struct stream s;
	if (stream_open(&s, opt->input, stdout) != 0)
		return KG_EXIT_USAGE;
	struct relabeler r = {.opt = opt};
	stream_each(&s, take_record, &r);
	if (r.g.n)
		relabel_group(opt, &r.g, &s);
	if (opt->dry_run)
		log_notice("dry run: nothing was written");
	free(r.g.records);
	free(r.g.lines);
	free(r.g.key);
	stream_release(&s);
	return s.status;
}

/* Pairs of methods that look like one, for a person to merge. */
static int propose_merges(const struct options *opt)
{
	cJSON *doc = methods_load(opt->catalog);
	if (!doc)
		return KG_EXIT_INPUT;
	struct method_pair *pairs;
	size_t n = methods_alike(doc, opt->threshold, &pairs);
	int status = KG_EXIT_OK;
	for (size_t i = 0; i < n; i++) {
		cJSON *line = json_object(), *pair = cJSON_CreateArray();
		json_append(pair, cJSON_CreateString(json_string(pairs[i].a, "name")));
		json_append(pair, cJSON_CreateString(json_string(pairs[i].b, "name")));
		json_add(line, "merge", pair);
		json_add_number(line, "score", pairs[i].score);
		if (jsonl_write(stdout, line) != 0)
			status = KG_EXIT_IO;
		cJSON_Delete(line);
	}
	free(pairs);
	cJSON_Delete(doc);
	return status;
}

int main(int argc, char **argv)
{
	struct options opt = {.threshold = NAN};
	llm_settings_init(&opt.s);
	log_init("kg-relabel");
	parse_options(argc, argv, &opt);
	return cli_finish(opt.merge ? propose_merges(&opt) : relabel_stream(&opt));
}
