/* main.c (kg-propose): writes candidate changes for the search to build and measure.
 * So far one proposer: --exhaustive, every valid configuration of a spec's tuning space. */
#include "common.h"

#include <getopt.h>
#include <inttypes.h>

#include "cli.h"
#include "jsonl.h"
#include "log.h"
#include "t1.h"
#include "xalloc.h"

struct options {
	const char *spec_path; /* --spec */
	int exhaustive;	       /* --exhaustive */
	int count_only;	       /* --count */
};

static void usage(FILE *fp)
{
	fputs("Usage: kg-propose --exhaustive --spec FILE [--count]\n"
	      "Write one candidate record per valid configuration of a T1 spec's tuning space,\n"
	      "in the order of the Cartesian product (the first parameter varies slowest).\n"
	      "\n"
	      "  -c, --count        print only the number of valid configurations\n"
	      "  -x, --exhaustive   propose every valid configuration of the space\n"
	      "  -s, --spec FILE    the kernel spec (T1 JSON)\n"
	      "  -q, --quiet        print errors only\n"
	      "  -v, --verbose      say more on stderr (twice: debug)\n"
	      "  -h, --help         print this help and exit\n"
	      "  -V, --version      print the version and exit\n"
	      "\n"
	      "Each record is one JSON line:\n"
	      "  {\"v\":1,\"kernel\":NAME,\"candidate\":{\"id\":\"exhaustive-N\",\"proposer\":\"exhaustive\",\n"
	      "   \"config\":{PARAMETER:VALUE,...}}}\n"
	      "\n"
	      "Exit status: 0 done; 1 the spec is invalid or a condition failed to evaluate;\n"
	      "2 usage error or unreadable spec; 4 output could not be written.\n",
	      fp);
}

static void parse_options(int argc, char **argv, struct options *opt)
{
	static const struct option longopts[] = {
		{"count", no_argument, NULL, 'c'},
		{"exhaustive", no_argument, NULL, 'x'},
		{"help", no_argument, NULL, 'h'},
		{"quiet", no_argument, NULL, 'q'},
		{"spec", required_argument, NULL, 's'},
		{"verbose", no_argument, NULL, 'v'},
		{"version", no_argument, NULL, 'V'},
		{NULL, 0, NULL, 0},
	};
	int c;
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":chqs:vVx", longopts, NULL)) != -1) {
		switch (c) {
		case 'c': opt->count_only = 1; break;
		case 'h': usage(stdout); exit(cli_finish(KG_EXIT_OK));
		case 'q': log_quieter(); break;
		case 's': opt->spec_path = optarg; break;
		case 'v': log_louder(); break;
		case 'V': cli_print_version(); exit(cli_finish(KG_EXIT_OK));
		case 'x': opt->exhaustive = 1; break;
		default: cli_option_error(c, argv);
		}
	}
	if (optind < argc)
		cli_usage_error("unexpected argument '%s'", argv[optind]);
	if (!opt->exhaustive)
		cli_usage_error("no proposer chosen: give --exhaustive");
	if (!opt->spec_path)
		cli_usage_error("--exhaustive needs --spec FILE");
}

struct emitter {
	const struct t1_spec *spec;
	uint64_t emitted;
};

/* Writes one candidate record; returns KG_EXIT_IO, which stops the walk, if it cannot
 * (cli_finish then reports the error of the stream). */
static int emit_candidate(void *ctx, const struct pyval *values, const size_t *indices)
{
	struct emitter *em = ctx;
	(void)values;
	char id[64];
	snprintf(id, sizeof(id), "exhaustive-%" PRIu64, ++em->emitted);

	cJSON *record = cJSON_CreateObject();
	cJSON *candidate = cJSON_CreateObject();
	if (!record || !candidate || !cJSON_AddNumberToObject(record, "v", 1) ||
	    !cJSON_AddStringToObject(record, "kernel", em->spec->name) ||
	    !cJSON_AddItemToObject(record, "candidate", candidate) ||
	    !cJSON_AddStringToObject(candidate, "id", id) ||
	    !cJSON_AddStringToObject(candidate, "proposer", "exhaustive") ||
	    !cJSON_AddItemToObject(candidate, "config", t1_config_to_json(em->spec, indices)))
		xalloc_die();
	int rc = jsonl_write(stdout, record);
	cJSON_Delete(record);
	return rc ? KG_EXIT_IO : 0;
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
	if (t1_count(spec, &count, &saturated))
		return KG_EXIT_INPUT;
	if (count == 0)
		return empty_space(spec);
	printf("%" PRIu64 "%s\n", count, saturated ? " or more" : "");
	return KG_EXIT_OK;
}

static int write_candidates(const struct t1_spec *spec)
{
	struct emitter em = {.spec = spec};
	int rc = t1_enumerate(spec, emit_candidate, &em);
	if (rc)
		return rc < 0 ? KG_EXIT_INPUT : rc;
	if (em.emitted == 0)
		return empty_space(spec);
	log_info("%s: %" PRIu64 " valid configurations", spec->path, em.emitted);
	return KG_EXIT_OK;
}

int main(int argc, char **argv)
{
	struct options opt = {0};
	log_init("kg-propose");
	parse_options(argc, argv, &opt);

	int unreadable;
	struct t1_spec *spec = t1_load(opt.spec_path, &unreadable);
	if (!spec)
		return unreadable ? KG_EXIT_USAGE : KG_EXIT_INPUT;
	if (log_enabled(LOG_INFO)) {
		int saturated;
		uint64_t points = t1_cartesian_size(spec, &saturated);
		log_info("%s: %zu parameters, %zu conditions, %" PRIu64 "%s Cartesian points", spec->path,
			 spec->nparams, spec->nconditions, points, saturated ? " or more" : "");
	}

	int status = opt.count_only ? print_count(spec) : write_candidates(spec);
	t1_free(spec);
	return cli_finish(status);
}
