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
#include "mcgs.h"
#include "methods.h"
#include "parse.h"
#include "gp.h"
#include "transfer.h"
#include "nvrtc_dl.h"
#include "pyexpr.h"
#include "ptx_lines.h"
#include "ptx_regions.h"
#include "pyexpr_cuda.h"
#include "rng.h"
#include "run.h"
#include "sha256.h"
#include "stream.h"
#include "t1.h"
#include "t4.h"
#include "xalloc.h"

static int usage(void)
{
	fputs("usage: kg-libtest expr [--let NAME=EXPR]... < lines\n"
	      "       kg-libtest bottleneck METRICS.json [BUILD-RECORD.json]\n"
	      "       kg-libtest jsonl FILE|- [ERROR-KEY]\n"
	      "       kg-libtest events RUN from OFFSET | last N | append < records\n"
	      "       kg-libtest exit-status STATUS...\n"
	      "       kg-libtest json FILE\n"
	      "       kg-libtest number KEY [NEW] < records\n"
	      "       kg-libtest sha256 FILE|-\n"
	      "       kg-libtest atomic-write PATH < data\n"
	      "       kg-libtest lock [--nowait] DIR CMD [ARG]...\n"
	      "       kg-libtest write write|append|tail|atomic PATH < data\n"
	      "       kg-libtest gpu-lock SYSTEM-DIR BUS-ID WAIT-SEC CMD [ARG]...\n"
	      "       kg-libtest parse int64|uint64|double TEXT MIN MAX\n"
	      "       kg-libtest t4 PATH < results.jsonl\n"
	      "       kg-libtest t1-count SPEC LIMIT\n"
	      "       kg-libtest kargs SPEC [INPUT-SET]\n"
	      "       kg-libtest tensor-maps SPEC CONFIG-JSON\n"
	      "       kg-libtest compare TYPE ABS-TOL REL-TOL OUT-VALUES REF-VALUES\n"
	      "       kg-libtest half VALUE...\n"
	      "       kg-libtest philox C0 C1 C2 C3 K0 K1\n"
	      "       kg-libtest fill SPEC ARGUMENT SET\n"
	      "       kg-libtest harness ARCH\n"
	      "       kg-libtest gp FILE\n"
	      "       kg-libtest transfer Y H1 [H2...]\n"
	      "       kg-libtest mcgs T1|T1b|T2|T3|T4|T4c|T4d|T4e|T5|T7d|T8|T8b|T8c|T8d|widen\n"
	      "       kg-libtest ptx-regions FILE [ENTRY]\n"
	      "       kg-libtest ptx-lines FILE FIRST LAST\n"
	      "       kg-libtest method-terms NAME...\n"
	      "       kg-libtest cuda function|refuse|program|eval|nvrtc [--index NAME] [--let NAME=EXPR]... [EXPR|FILE|ARCH]\n",
	      stderr);
	return KG_EXIT_USAGE;
}

/* Binds names[*n], names[*n + 1], ... to the leading --let NAME=EXPR arguments, each EXPR
 * evaluated with the names before it; the values are copied into keep. Returns how many
 * arguments it took, or -1 for a malformed --let or too many names (at most max). */
static int parse_lets(int argc, char **argv, const char **names, struct pyval *values, size_t *n, size_t max,
		      struct pyarena *keep)
{
	struct pyarena *scratch = pyarena_new();
	struct pyexpr_error err;
	int i;
	for (i = 0; i + 1 < argc && strcmp(argv[i], "--let") == 0; i += 2) {
		char *eq = strchr(argv[i + 1], '=');
		if (!eq || *n == max) {
			pyarena_free(scratch);
			return -1;
		}
		*eq = '\0';
		struct pyexpr *e = pyexpr_compile(eq + 1, names, *n, &err);
		struct pyval v;
		if (!e || pyexpr_eval(e, values, scratch, &v, &err))
			log_die(KG_EXIT_INPUT, "--let %s: %s", argv[i + 1], err.message);
		values[*n] = pyval_copy(keep, &v);
		names[(*n)++] = argv[i + 1];
		pyexpr_free(e);
	}
	pyarena_free(scratch);
	return i;
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

	if (parse_lets(argc, argv, names, values, &n, ARRAY_SIZE(names), keep) != argc)
		return usage();

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

/* ---------------------------------------------------------------- kg-libtest cuda */

/* The expressions of a file, one a line, compiled over names and translated for the GPU
 * (function kgfn_LINE); a line that does not compile or translate has no code. */
struct cuda_lines {
	char **text;	      /* each line, without its newline */
	struct pyexpr **expr; /* NULL where the line does not compile */
	char **code;	      /* the function, NULL where refused */
	struct pyexpr_error *err; /* why a line has no code */
	size_t n;
};

static void cuda_lines_read(struct cuda_lines *cl, FILE *in, const char *const *names, size_t nnames,
			    const struct pyval *globals)
{
	memset(cl, 0, sizeof(*cl));
	char *line = NULL;
	size_t cap = 0, alloc = 0;
	ssize_t len;
	while ((len = getline(&line, &cap, in)) >= 0) {
		if (len > 0 && line[len - 1] == '\n')
			line[--len] = '\0';
		if (cl->n == alloc) {
			alloc = alloc ? 2 * alloc : 64;
			cl->text = xreallocarray(cl->text, alloc, sizeof(*cl->text));
			cl->expr = xreallocarray(cl->expr, alloc, sizeof(*cl->expr));
			cl->code = xreallocarray(cl->code, alloc, sizeof(*cl->code));
			cl->err = xreallocarray(cl->err, alloc, sizeof(*cl->err));
		}
		size_t k = cl->n++;
		cl->text[k] = xstrdup(line);
		cl->code[k] = NULL;
		cl->expr[k] = pyexpr_compile(line, names, nnames, &cl->err[k]);
		if (!cl->expr[k])
			continue;
		struct strbuf fn;
		strbuf_init(&fn);
		char name[32];
		snprintf(name, sizeof(name), "kgfn_%zu", k + 1);
		if (pyexpr_cuda_function(cl->expr[k], name, 0, globals, &fn, &cl->err[k]) == 0)
			cl->code[k] = strbuf_detach(&fn);
		strbuf_release(&fn);
	}
	free(line);
}

static void cuda_lines_release(struct cuda_lines *cl)
{
	for (size_t k = 0; k < cl->n; k++) {
		free(cl->text[k]);
		pyexpr_free(cl->expr[k]);
		free(cl->code[k]);
	}
	free(cl->text);
	free(cl->expr);
	free(cl->code);
	free(cl->err);
}

/* The main() of a host program: reads index values from stdin and prints, for each
 * function and each index, what cmd_cuda_eval prints for the same line. */
static const char cuda_host_main[] =
	"int main(void)\n"
	"{\n"
	"\tstatic long long is[1 << 16];\n"
	"\tsize_t n = 0;\n"
	"\twhile (n < sizeof(is) / sizeof(is[0]) && scanf(\"%lld\", &is[n]) == 1)\n"
	"\t\tn++;\n"
	"\tfor (size_t k = 0; kgfns[k].fn; k++) {\n"
	"\t\tfor (size_t j = 0; j < n; j++) {\n"
	"\t\t\tint failed = 0;\n"
	"\t\t\tdouble v = kgfns[k].fn(is[j], &failed);\n"
	"\t\t\tunsigned long long bits;\n"
	"\t\t\tmemcpy(&bits, &v, sizeof(bits));\n"
	"\t\t\tif (failed)\n"
	"\t\t\t\tprintf(\"%d %lld failed\\n\", kgfns[k].line, is[j]);\n"
	"\t\t\telse if (v != v)\n"
	"\t\t\t\tprintf(\"%d %lld nan\\n\", kgfns[k].line, is[j]);\n"
	"\t\t\telse\n"
	"\t\t\t\tprintf(\"%d %lld %016llx\\n\", kgfns[k].line, is[j], bits);\n"
	"\t\t}\n"
	"\t}\n"
	"\treturn 0;\n"
	"}\n";

/* Writes a C++ program for the host compiler (-DKGPY_HOST) that runs every translated line. */
static void cuda_program(const struct cuda_lines *cl)
{
	fputs("#include <stdio.h>\n#include <string.h>\n\n", stdout);
	fputs(pyexpr_cuda_prelude(), stdout);
	for (size_t k = 0; k < cl->n; k++)
		if (cl->code[k])
			printf("\n%s", cl->code[k]);
	fputs("\nstatic const struct {\n\tint line;\n\tdouble (*fn)(long long, int *);\n} kgfns[] = {\n", stdout);
	for (size_t k = 0; k < cl->n; k++)
		if (cl->code[k])
			printf("\t{%zu, kgfn_%zu},\n", k + 1, k + 1);
	printf("\t{0, 0},\n};\n\n%s", cuda_host_main);
}

/* Prints what each translated line gives under pyexpr_eval for each index value on stdin. */
static void cuda_eval(const struct cuda_lines *cl, struct pyval *globals)
{
	long long *is = NULL;
	size_t n = 0, cap = 0;
	long long i;
	while (scanf("%lld", &i) == 1) {
		if (n == cap) {
			cap = cap ? 2 * cap : 1024;
			is = xreallocarray(is, cap, sizeof(*is));
		}
		is[n++] = i;
	}
	struct pyarena *arena = pyarena_new();
	struct pyexpr_error err;
	for (size_t k = 0; k < cl->n; k++) {
		for (size_t j = 0; j < n && cl->code[k]; j++) {
			struct pyval v;
			globals[0] = pyval_int(is[j]);
			if (pyexpr_eval(cl->expr[k], globals, arena, &v, &err)) {
				printf("%zu %lld failed\n", k + 1, is[j]);
			} else {
				double d = v.kind == PY_FLOAT ? v.u.f : (double)v.u.i;
				uint64_t bits;
				memcpy(&bits, &d, sizeof(bits));
				if (isnan(d))
					printf("%zu %lld nan\n", k + 1, is[j]);
				else
					printf("%zu %lld %016llx\n", k + 1, is[j], (unsigned long long)bits);
			}
			pyarena_reset(arena);
		}
	}
	pyarena_free(arena);
	free(is);
}

/* Compiles the prelude, every translated line and one kernel for each with NVRTC, as
 * kg-bench would, and says how it went. */
static int cuda_nvrtc(const struct cuda_lines *cl, const char *arch)
{
	struct strbuf why, src;
	strbuf_init(&why);
	if (nvrtc_open(&why))
		log_die(KG_EXIT_ENV, "%s", why.buf);
	strbuf_release(&why);
	strbuf_init(&src);
	strbuf_addstr(&src, pyexpr_cuda_prelude());
	size_t nfn = 0;
	for (size_t k = 0; k < cl->n; k++) {
		if (!cl->code[k])
			continue;
		strbuf_addf(&src, "\n%s\nextern \"C\" __global__ void kgfill_%zu(double *out, int *failed, long long n)\n"
				  "{\n\tlong long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;\n"
				  "\tif (i < n)\n\t\tout[i] = kgfn_%zu(i, failed);\n}\n",
			    cl->code[k], k + 1, k + 1);
		nfn++;
	}
	char arch_option[64];
	snprintf(arch_option, sizeof(arch_option), "--gpu-architecture=%s", arch);
	const char *options[] = {arch_option, "--fmad=false"};
	struct nvrtc_output out;
	if (nvrtc_compile(src.buf, "pyexpr_cuda.cu", options, ARRAY_SIZE(options), NULL, &out))
		log_die(KG_EXIT_ENV, "NVRTC: %s", out.error);
	int status = KG_EXIT_OK;
	if (out.ok && out.cubin) {
		printf("compiled %zu functions for %s\n", nfn, arch);
	} else {
		printf("NVRTC failed (%s):\n%s\n", out.error ? out.error : "no cubin", out.log);
		status = KG_EXIT_INPUT;
	}
	if (out.ok && out.log[0])
		printf("log:\n%s\n", out.log);
	nvrtc_output_release(&out);
	strbuf_release(&src);
	return status;
}

/* The numbers of a comma-separated list into v (at most max); returns how many. */
static size_t number_list(const char *text, double *v, size_t max)
{
	size_t n = 0;
	for (char *end; n < max && *text; text = *end == ',' ? end + 1 : end) {
		v[n++] = strtod(text, &end);
		if (end == text)
			log_die(KG_EXIT_USAGE, "'%s' is not a list of numbers", text);
	}
	return n;
}

/* kg-libtest transfer Y H1 [H2...]: lib/transfer.c on the run's values Y and the sources'
 * values H1... (comma-separated lists of one length): each source's calibration and misordered
 * pairs, and the weights of the sources and of a ranker that knows nothing (seed 1, 1000
 * draws). */
static int cmd_transfer(int argc, char **argv)
{
	enum { MAX = 64 };
	double y[MAX], h[8][MAX], w[9], wrong[9];
	const double *hs[8];
	size_t n = number_list(argv[0], y, MAX), nsrc = 0;
	for (int k = 1; k < argc && nsrc < 8; k++, nsrc++) {
		if (number_list(argv[k], h[nsrc], MAX) != n)
			log_die(KG_EXIT_USAGE, "source %d has not %zu values", k, n);
		hs[nsrc] = h[nsrc];
		double a, b, resid;
		transfer_calibrate(y, h[nsrc], n, &a, &b, &resid);
		printf("source %zu: y = %.6g + %.6g h, residual variance %.6g, misordered %g of %zu pairs\n", nsrc + 1, a, b,
		       resid, transfer_misordered(y, h[nsrc], n), n * (n - 1) / 2);
	}
	transfer_weights(y, n, hs, nsrc, NULL, NULL, 1000, 1, w, wrong);
	printf("weights");
	for (size_t k = 0; k <= nsrc; k++)
		printf(" %.3f", w[k]);
	printf("\n");
	return KG_EXIT_OK;
}

/* Whether gp_loo's predictions match the model of the other n - 1 points (the same theta and
 * standardized targets, factored anew), noise included, within 1e-9. */
static int loo_matches_refits(const struct gp *gp)
{
	size_t n = gp->n, d = gp->d;
	double *mu = xcalloc(n, sizeof(*mu)), *var = xcalloc(n, sizeof(*var));
	struct gp rest = {.n = n - 1, .d = d, .categorical = gp->categorical, .mean = 0, .sd = 1};
	rest.x = xcalloc((n - 1) * d + 1, sizeof(*rest.x));
	rest.z = xcalloc(n, sizeof(*rest.z));
	rest.chol = xcalloc(n * n, sizeof(*rest.chol));
	rest.alpha = xcalloc(n, sizeof(*rest.alpha));
	gp_loo(gp, mu, var);
	int ok = 1;
	for (size_t i = 0; i < n; i++) {
		for (size_t j = 0, k = 0; j < n; j++)
			if (j != i) {
				memcpy(rest.x + k * d, gp->x + j * d, d * sizeof(*rest.x));
				rest.z[k++] = gp->z[j];
			}
		double m, v;
		gp_objective(&rest, gp->theta, NULL);
		gp_predict(&rest, gp->x + i * d, &m, &v, NULL);
		v += exp(gp->theta[d + 1]) + 1e-8; /* the noise and jitter the factor holds */
		ok = ok && fabs(m - mu[i]) < 1e-9 && fabs(v - var[i]) < 1e-9;
	}
	gp_release(&rest);
	free(mu);
	free(var);
	return ok;
}

/* kg-libtest gp FILE: a Gaussian process on the points of FILE ("d D", "categorical F...",
 * then rows "x_1 ... x_D y"; rows "? x_1 ... x_D" are queries): the objective and its
 * gradient at the prior's mode, the largest gap between that gradient and central finite
 * differences, the fitted theta, and the prediction at each query. */
static int cmd_gp(const char *path)
{
	FILE *fp = fopen(path, "r");
	if (!fp)
		log_die(KG_EXIT_USAGE, "cannot open '%s':", path);
	size_t d = 0, n = 0, q = 0;
	unsigned char categorical[GP_THETA_MAX] = {0};
	double *x = NULL, *y = NULL, *query = NULL;
	char line[4096];
	while (fgets(line, sizeof(line), fp)) {
		char *p = line, *end;
		if (strncmp(p, "d ", 2) == 0) {
			d = strtoul(p + 2, NULL, 10);
		} else if (strncmp(p, "categorical", 11) == 0) {
			p += 11;
			for (size_t k = 0; k < d; k++)
				categorical[k] = (unsigned char)strtoul(p, &p, 10);
		} else if (*p == '?') {
			query = xreallocarray(query, (q + 1) * d, sizeof(*query));
			p++;
			for (size_t k = 0; k < d; k++)
				query[q * d + k] = strtod(p, &p);
			q++;
		} else if (strtod(p, &end), end != p) {
			x = xreallocarray(x, (n + 1) * d, sizeof(*x));
			y = xreallocarray(y, n + 1, sizeof(*y));
			for (size_t k = 0; k < d; k++)
				x[n * d + k] = strtod(p, &p);
			y[n++] = strtod(p, &p);
		}
	}
	fclose(fp);
	struct gp gp;
	double theta[GP_THETA_MAX], grad[GP_THETA_MAX], h = 1e-6, worst = 0;
	if (gp_fit(&gp, x, y, n, d, categorical, NULL, 0) != 0)
		log_die(KG_EXIT_INPUT, "%s: the covariance cannot be factored", path);
	gp_theta_mode(d, theta);
	printf("objective at the mode %.10f\ngradient", gp_objective(&gp, theta, grad));
	for (size_t j = 0; j < d + 2; j++) {
		double up[GP_THETA_MAX], down[GP_THETA_MAX];
		memcpy(up, theta, sizeof(up));
		memcpy(down, theta, sizeof(down));
		up[j] += h;
		down[j] -= h;
		double numeric = (gp_objective(&gp, up, NULL) - gp_objective(&gp, down, NULL)) / (2 * h);
		worst = fmax(worst, fabs(numeric - grad[j]));
		printf(" %.8f", grad[j]);
	}
	printf("\nfinite differences within %s\n", worst < 1e-5 ? "1e-5" : "NOT 1e-5");
	gp_release(&gp);
	if (gp_fit(&gp, x, y, n, d, categorical, NULL, 60) != 0)
		log_die(KG_EXIT_INPUT, "%s: the fit failed", path);
	printf("fitted objective %.6f (at the mode %.6f)\ntheta", gp.nll, gp_objective(&gp, theta, NULL));
	gp_release(&gp);
	gp_fit(&gp, x, y, n, d, categorical, NULL, 60);
	for (size_t j = 0; j < d + 2; j++)
		printf(" %.4f", gp.theta[j]);
	printf("\n");
	printf("leave-one-out %s\n", loo_matches_refits(&gp) ? "matches the refits without each point"
							      : "DIFFERS from the refits without each point");
	for (size_t i = 0; i < q; i++) {
		double mu, var;
		gp_predict(&gp, query + i * d, &mu, &var, NULL);
		printf("at");
		for (size_t k = 0; k < d; k++)
			printf(" %g", query[i * d + k]);
		printf(": mean %.6f sd %.6f (y %.6f +- %.6f) EI below the best %.6f\n", mu, sqrt(var), gp.mean + gp.sd * mu,
		       gp.sd * sqrt(var), gp_expected_improvement(mu, sqrt(var), -1.0));
	}
	gp_release(&gp);
	free(x);
	free(y);
	free(query);
	return KG_EXIT_OK;
}

/* kg-bench's own device code (lib/karg_elem.h and tools/bench/harness.cu) compiled with
 * NVRTC for ARCH, with the options tools/bench/harness.c gives, so that a change to it
 * that does not compile fails here, without a GPU. */
extern const char kg_karg_elem_source[], kg_harness_kernels_source[];

static int cmd_harness(const char *arch)
{
	struct strbuf why, src;
	strbuf_init(&why);
	if (nvrtc_open(&why))
		log_die(KG_EXIT_ENV, "%s", why.buf);
	strbuf_release(&why);
	strbuf_init(&src);
	strbuf_addstr(&src, kg_karg_elem_source);
	strbuf_addstr(&src, kg_harness_kernels_source);
	char arch_option[64];
	snprintf(arch_option, sizeof(arch_option), "--gpu-architecture=%s", arch);
	const char *options[] = {arch_option, "--fmad=false", "--std=c++17", "--diag-suppress=177"};
	struct nvrtc_output out;
	if (nvrtc_compile(src.buf, "harness.cu", options, ARRAY_SIZE(options), NULL, &out))
		log_die(KG_EXIT_ENV, "NVRTC: %s", out.error);
	int status = out.ok && (out.cubin || out.ptx) ? KG_EXIT_OK : KG_EXIT_INPUT;
	printf("%s for %s%s%s\n", status == KG_EXIT_OK ? "compiled" : "failed", arch, out.log[0] ? ":\n" : "", out.log);
	nvrtc_output_release(&out);
	strbuf_release(&src);
	return status;
}

/* kg-libtest cuda MODE [--index NAME] [--let NAME=EXPR]... [ARG]: the GPU translation of
 * expressions (lib/pyexpr_cuda.c). The index name (i unless --index says) is slot 0.
 *   function EXPR   prints EXPR's function, or "error: column N: message"
 *   refuse          for each line of stdin, "ok" or "error: column N: message"
 *   program         writes a host C++ program running each translated line of stdin
 *   eval FILE       prints what the program prints, from pyexpr_eval, for index values on stdin
 *   nvrtc ARCH      compiles each translated line of stdin with NVRTC for ARCH */
static int cmd_cuda(int argc, char **argv)
{
	const char *names[64];
	struct pyval values[64];
	size_t n = 1;
	if (argc < 1)
		return usage();
	const char *mode = argv[0];
	argc--;
	argv++;
	names[0] = "i";
	values[0] = pyval_int(0);
	if (argc >= 2 && strcmp(argv[0], "--index") == 0) {
		names[0] = argv[1];
		argc -= 2;
		argv += 2;
	}
	struct pyarena *keep = pyarena_new();
	int used = parse_lets(argc, argv, names, values, &n, ARRAY_SIZE(names), keep);
	if (used < 0) {
		pyarena_free(keep);
		return usage();
	}
	argc -= used;
	argv += used;

	int status = KG_EXIT_OK;
	struct cuda_lines cl;
	if (strcmp(mode, "function") == 0 && argc == 1) {
		FILE *in = fmemopen(argv[0], strlen(argv[0]), "r");
		cuda_lines_read(&cl, in, names, n, values);
		fclose(in);
	} else if ((strcmp(mode, "refuse") == 0 || strcmp(mode, "program") == 0) && argc == 0) {
		cuda_lines_read(&cl, stdin, names, n, values);
	} else if ((strcmp(mode, "eval") == 0 || strcmp(mode, "nvrtc") == 0) && argc == 1) {
		FILE *in = strcmp(mode, "eval") == 0 ? fopen(argv[0], "r") : stdin;
		if (!in)
			log_die(KG_EXIT_USAGE, "cannot open '%s':", argv[0]);
		cuda_lines_read(&cl, in, names, n, values);
		if (in != stdin)
			fclose(in);
	} else {
		pyarena_free(keep);
		return usage();
	}

	if (strcmp(mode, "program") == 0) {
		cuda_program(&cl);
	} else if (strcmp(mode, "eval") == 0) {
		cuda_eval(&cl, values);
	} else if (strcmp(mode, "nvrtc") == 0) {
		status = cuda_nvrtc(&cl, argv[0]);
	} else {
		for (size_t k = 0; k < cl.n; k++) {
			if (cl.code[k] && strcmp(mode, "function") == 0) {
				fputs(cl.code[k], stdout);
			} else if (cl.code[k]) {
				puts("ok");
			} else {
				printf("error: column %zu: %s\n", pyexpr_error_column(cl.text[k], &cl.err[k]), cl.err[k].message);
				status = KG_EXIT_INPUT;
			}
		}
	}
	cuda_lines_release(&cl);
	pyarena_free(keep);
	return status;
}

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
		return usage();
	struct events_reader r;
	enum events_open_status st;
	if (strcmp(how, "from") == 0)
		st = events_open(&r, run, n, 0);
	else if (strcmp(how, "last") == 0)
		st = events_open_last(&r, run, (size_t)n, 0);
	else
		return usage();
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
		return usage();
	if (rc)
		log_die(KG_EXIT_IO, "cannot write '%s':", path);
	return KG_EXIT_OK;
}

/* Takes the GPU lock kg-bench takes (the folder gpu_lock_dir picks, the file named by the bus
 * id), waiting at most WAIT-SEC, and runs CMD while holding it; prints the lock's path, and who holds it when the wait runs out (exit 1). */
static int cmd_gpu_lock(int argc, char **argv)
{
	double wait_s;
	if (argc < 4 || parse_double(argv[2], 0, 86400, &wait_s))
		return usage();
	struct strbuf why;
	strbuf_init(&why);
	char *dir = gpu_lock_dir(argv[0], &why);
	if (!dir)
		log_die(KG_EXIT_ENV, "%s", why.buf);
	char *path = xasprintf("%s/gpu-%s.lock", dir, argv[1]);
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
	free(dir);
	strbuf_release(&why);
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

/* Python's repr of x rounded to 12 decimals, as docs/search.md's test vectors print lists. */
static void print_repr12(double x)
{
	struct strbuf sb;
	strbuf_init(&sb);
	struct pyval v = pyval_float(round(x * 1e12) / 1e12);
	pyval_repr(&sb, &v);
	fputs(sb.buf, stdout);
	strbuf_release(&sb);
}

static void print_list12(const char *prefix, const double *x, size_t n)
{
	printf("%s[", prefix);
	for (size_t i = 0; i < n; i++) {
		if (i)
			fputs(", ", stdout);
		print_repr12(x[i]);
	}
	puts("]");
}

static void vector_t1(void)
{
	const double prior[3] = {0.5, 0.3, 0.2}, n[3] = {10, 5, 0}, q[3] = {0.6, 0.7, 0};
	double parent_q = (10 * 0.6 + 5 * 0.7) / 15;
	double fpus[2] = {0, mcgs_fpu_value(parent_q, 0.2, 0.5 + 0.3)};
	const char *names[2] = {"absolute0", "parentQ-0.2*sqrt(visitedP)"};
	for (int f = 0; f < 2; f++) {
		printf("%s fpu=%.10f scores= [", names[f], fpus[f]);
		size_t best = 0;
		double scores[3];
		for (size_t i = 0; i < 3; i++) {
			scores[i] = mcgs_puct_score(n[i] > 0 ? q[i] : fpus[f], 1.5, prior[i], 15, n[i]);
			printf("%s'%.10f'", i ? ", " : "", scores[i]);
			if (scores[i] > scores[best])
				best = i;
		}
		printf("] argmax= %zu\n", best);
	}
}

static void vector_t3(void)
{
	printf("N : [");
	for (int n = 1; n <= 16; n++)
		printf("%s%d", n > 1 ? ", " : "", n);
	puts("]");
	for (int k = 1; k <= 2; k++) {
		printf("ceil(%d*N^0.5)        : [", k);
		for (int n = 1; n <= 16; n++)
			printf("%s%zu", n > 1 ? ", " : "", mcgs_widening_limit(n, k, 0.5));
		puts("]");
	}
	printf("MCTS-AHD widen? int(N^.5) > |C| for |C|=2: [");
	for (int n = 1; n <= 16; n++)
		printf("%s%s", n > 1 ? ", " : "", (int)sqrt(n) > 2 ? "True" : "False");
	puts("]");
	printf("MCTS.jl k=1,a=.5 max : [");
	for (int n = 1; n <= 16; n++)
		printf("%s%d", n > 1 ? ", " : "", (int)floor(sqrt(n)) + 1);
	puts("]");
}

/* Widening limits far from the vectors: huge, negative and NaN products are clamped. */
static void vector_widen(void)
{
	static const double cases[][3] = {
		{1e6, 1e9, 1}, {1e9, 1e9, 1}, {1e9, 1e9, 0.5}, {10, 1, 1e9}, {10, 1e9, 1e9},
		{10, 0, 1e9}, {4, -2, 0.5}, {4, -1e9, 1}, {16, 1e9, 0.5},
	};
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++)
		printf("N=%g k=%g alpha=%g: %zu\n", cases[i][0], cases[i][1], cases[i][2],
		       mcgs_widening_limit(cases[i][0], cases[i][1], cases[i][2]));
}

/* The diamond R->A, R->B, A->C, B->C (and C->D for T4c), with docs/search.md's U values. */
static void diamond(struct mcgs *g, int with_d, size_t e[5])
{
	mcgs_init(g);
	mcgs_add_node(g, 0.0, 0);
	mcgs_add_node(g, 0.2, 1);
	mcgs_add_node(g, 0.4, 1);
	mcgs_add_node(g, 1.0, 2);
	e[0] = mcgs_add_edge(g, 0, 1, 0.5);
	e[1] = mcgs_add_edge(g, 0, 2, 0.5);
	e[2] = mcgs_add_edge(g, 1, 3, 1);
	e[3] = mcgs_add_edge(g, 2, 3, 1);
	if (with_d) {
		mcgs_add_node(g, 0.0, 3);
		e[4] = mcgs_add_edge(g, 3, 4, 1);
	}
}

static void vector_t4(void)
{
	struct mcgs g;
	size_t e[5];
	diamond(&g, 0, e);
	const size_t paths[6][2] = {{0, 0}, {e[0], 0}, {e[1], 0}, {e[0], e[2]}, {e[1], e[3]}, {e[1], e[3]}};
	const size_t lens[6] = {0, 1, 1, 2, 2, 2};
	const char *labels[6] = {"R", "R->A", "R->B", "R->A->C", "R->B->C", "R->B->C"};
	for (int p = 0; p < 6; p++) {
		mcgs_playout(&g, 0, paths[p], lens[p], 1);
		printf("after playout %d %s:", p + 1, labels[p]);
		for (int i = 0; i < 4; i++)
			printf(" %c(N=%.0f,Q=%.12f)", "RABC"[i], g.nodes[i].n, g.nodes[i].q);
		putchar('\n');
	}
	struct mcgs_node a = g.nodes[1];
	mcgs_recompute(&g, 1);
	printf("note: A is stale after playouts 5,6 (A.Q uses C.Q as of its last visit) -> A recomputed now would be %.12f\n",
	       g.nodes[1].q);
	g.nodes[1] = a;
	mcgs_release(&g);
}

static void vector_t4c(int best)
{
	struct mcgs g;
	size_t e[5];
	diamond(&g, 1, e);
	mcgs_playout(&g, 0, NULL, 0, 1);
	const size_t paths[6][3] = {{e[0]}, {e[1]}, {e[0], e[2]}, {e[1], e[3]}, {e[0], e[2], e[4]}, {e[1], e[3]}};
	const size_t lens[6] = {1, 1, 2, 2, 3, 2};
	/* Steps 5 and 7 stop at C, a transposition: N(C) > N(B,C), so C is not entered. */
	const int stop[6] = {0, 0, 0, 1, 0, 1};
	const char *labels[6] = {"R->A", "R->B", "R->A->C", "R->B->C", "R->A->C->D", "R->B->C"};
	for (int s = 0; s < 6; s++) {
		size_t last = paths[s][lens[s] - 1];
		int stops = g.nodes[g.edges[last].to].n > g.edges[last].n;
		if (stops != stop[s])
			printf("unexpected stop decision at step %d\n", s + 2);
		mcgs_playout(&g, 0, paths[s], lens[s], !stops);
		if (!best)
			printf("step %d %-10s KataGo: R=%.6f A=%.6f B=%.6f C=%.6f\n", s + 2, labels[s], g.nodes[0].q,
			       g.nodes[1].q, g.nodes[2].q, g.nodes[3].q);
	}
	if (best) {
		printf("{");
		for (int i = 0; i < 5; i++) {
			printf("%s'%c': ", i ? ", " : "", "RABCD"[i]);
			print_repr12(mcgs_best(&g, (size_t)i));
		}
		puts("}");
	}
	mcgs_release(&g);
}

static void vector_t4e(void)
{
	struct mcgs g;
	mcgs_init(&g);
	for (int r = 0; r < 3; r++)
		mcgs_add_node(&g, 0, r);
	const int pairs[5][2] = {{0, 1}, {1, 2}, {2, 0}, {0, 2}, {2, 1}};
	for (int p = 0; p < 5; p++) {
		int u = pairs[p][0], v = pairs[p][1];
		printf("%c -> %c monotone: %s  CrazyAra-style same-depth: %s\n", "ABC"[u], "ABC"[v],
		       mcgs_rank_allows(&g, (size_t)u, (size_t)v) ? "True" : "False",
		       g.nodes[v].rank == g.nodes[u].rank + 1 ? "True" : "False");
	}
	mcgs_release(&g);
}

static void vector_t5(void)
{
	const double times[5] = {100, 50, 25, 200, 400};
	double r[5], lo = INFINITY, hi = -INFINITY;
	for (int i = 0; i < 5; i++) {
		r[i] = mcgs_reward_log2(100, times[i], 3);
		printf("t=%6.1f speedup=%.6f log2=%.12f ln=%.12f\n", times[i], 100 / times[i], r[i], log(100 / times[i]));
		lo = fmin(lo, r[i]);
		hi = fmax(hi, r[i]);
	}
	double global[5];
	for (int i = 0; i < 5; i++)
		global[i] = (r[i] - lo) / (hi - lo);
	print_list12("minmax over tree of log2 speedups: ", global, 5);
	const double q[4] = {1.0, -1.0, 2.0, 0};
	const int visited[4] = {1, 1, 1, 0};
	double out[4];
	mcgs_normalize_by_parent_and_siblings(0.5, q, visited, 4, out);
	printf("parent_and_siblings: [");
	for (int i = 0; i < 4; i++) {
		struct strbuf sb;
		strbuf_init(&sb);
		struct pyval v = pyval_float(out[i]);
		pyval_repr(&sb, &v);
		printf("%s%s", i ? ", " : "", sb.buf);
		strbuf_release(&sb);
	}
	puts("]");
	const int xs[5] = {0, 1, 3, 99, -3};
	for (int i = 0; i < 5; i++)
		printf("h(%d)=%.12f hinv(h)=%.12f\n", xs[i], mcgs_value_h(xs[i]), mcgs_value_h_inverse(mcgs_value_h(xs[i])));
}

static void vector_t7d(void)
{
	uint64_t state = 42;
	printf("splitmix64(seed=42) first output: 0x%016llx\n", (unsigned long long)rng_next(&state));
	const double a[5] = {1.00, 1.02, 0.99, 1.01, 1.03}, b[5] = {0.95, 0.96, 0.94, 0.97, 0.93};
	double ci[2];
	mcgs_bootstrap_median_ratio(a, 5, b, 5, 1000, 42, ci);
	printf("speedup(median a / median b) point = %.12f\n", 1.01 / 0.95);
	printf("bootstrap 95%% CI of median(a)/median(b) (B=1000, seed=42): [%.12f, %.12f]\n", ci[0], ci[1]);
}

static void vector_t8(const char *which)
{
	const double counts[4] = {0, 6, 3, 1};
	double out[4];
	if (strcmp(which, "T8") == 0) {
		mcgs_prior_laplace(counts, 4, 1.0, out);
		print_list12("alpha=1.0 ", out, 4);
		mcgs_prior_laplace(counts, 4, 0.5, out);
		print_list12("alpha=0.5 ", out, 4);
	} else if (strcmp(which, "T8b") == 0) {
		const double cases[3][4] = {{7, 3, 1, 1}, {7, 3, 0.5, 0.5}, {0, 0, 1, 1}};
		for (int c = 0; c < 3; c++) {
			double a, b, mean, var;
			mcgs_beta_posterior(cases[c][0], cases[c][1], cases[c][2], cases[c][3], &a, &b, &mean, &var);
			printf("s=%.0f f=%.0f prior=Beta(%.1f,%.1f) -> Beta(%.1f,%.1f) mean=%.12f var=%.12f\n", cases[c][0],
			       cases[c][1], cases[c][2], cases[c][3], a, b, mean, var);
		}
	} else if (strcmp(which, "T8c") == 0) {
		const double global[4] = {0.1, 0.5, 0.3, 0.1}, local[4] = {0, 1, 0, 0};
		mcgs_prior_backoff(local, global, 4, 4, out);
		print_list12("", out, 4);
	} else {
		double p[4];
		mcgs_prior_laplace(counts, 4, 1.0, p);
		mcgs_prior_temper(p, 4, 2, out);
		print_list12("T=2 tempered: ", out, 4);
	}
}

/* Prints one of docs/search.md's test vectors the way its reference computation does. */
static int cmd_mcgs(const char *vector)
{
	if (strcmp(vector, "T1") == 0) {
		vector_t1();
	} else if (strcmp(vector, "T1b") == 0) {
		const double ns[5] = {0, 1, 800, 19652, 100000};
		for (int i = 0; i < 5; i++)
			printf("N=%.0f c(s)=%.12f\n", ns[i], mcgs_puct_c(1.25, 19652, ns[i]));
	} else if (strcmp(vector, "T2") == 0) {
		double p[3] = {0.5, 0.3, 0.2}, eta[3] = {0.1, 0.7, 0.2}, g[3] = {0.2, 1.4, 0.4};
		mcgs_dirichlet_mix(p, eta, 3, 0.25);
		print_list12("", p, 3);
		for (int i = 0; i < 3; i++)
			eta[i] = g[i] / (g[0] + g[1] + g[2]);
		print_list12("from gamma draws ", eta, 3);
	} else if (strcmp(vector, "T3") == 0) {
		vector_t3();
	} else if (strcmp(vector, "widen") == 0) {
		vector_widen();
	} else if (strcmp(vector, "T4") == 0) {
		vector_t4();
	} else if (strcmp(vector, "T4c") == 0 || strcmp(vector, "T4d") == 0) {
		vector_t4c(strcmp(vector, "T4d") == 0);
	} else if (strcmp(vector, "T4e") == 0) {
		vector_t4e();
	} else if (strcmp(vector, "T5") == 0) {
		vector_t5();
	} else if (strcmp(vector, "T7d") == 0) {
		vector_t7d();
	} else if (strncmp(vector, "T8", 2) == 0) {
		vector_t8(vector);
	} else {
		return usage();
	}
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
		return usage();
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
		return usage();
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
		return usage();
	return cli_finish(status);
}
