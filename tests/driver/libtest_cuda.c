/* libtest_cuda.c: kg-libtest's expression and device-code subcommands: expr (lib/pyexpr), cuda (its
 * CUDA translation, compiled by NVRTC), harness (kg-bench's device code), gp and transfer. */
#include "common.h"

#include <math.h>
#include <stdint.h>
#include <unistd.h>

#include "gp.h"
#include "libtest.h"
#include "log.h"
#include "nvrtc_dl.h"
#include "parse.h"
#include "pyexpr.h"
#include "pyexpr_cuda.h"
#include "transfer.h"
#include "xalloc.h"

/* Evaluates each line of stdin as an expression, printing Python's repr of the result or
 * "error: column N: message". --let binds names, in order, to evaluated expressions. */
int cmd_expr(int argc, char **argv)
{
	const char *names[64];
	struct pyval values[64];
	size_t n = 0;
	struct pyarena *keep = pyarena_new(), *scratch = pyarena_new();
	struct pyexpr_error err;
	int status = KG_EXIT_OK;

	if (parse_lets(argc, argv, names, values, &n, ARRAY_SIZE(names), keep) != argc)
		return libtest_usage();

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
 * pairs (by their weight, of the whole weight), and the weights of the sources and of a ranker
 * that knows nothing (seed 1, 1000 draws). */
int cmd_transfer(int argc, char **argv)
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
		printf("source %zu: y = %.6g + %.6g h, residual variance %.6g, misordered %g of %g\n", nsrc + 1, a, b, resid,
		       transfer_misordered(y, h[nsrc], n), transfer_pair_weight(y, n));
	}
	transfer_weights(y, n, hs, nsrc, NULL, NULL, NULL, 1000, 1, w, wrong);
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
int cmd_gp(const char *path)
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

int cmd_harness(const char *arch)
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
int cmd_cuda(int argc, char **argv)
{
	const char *names[64];
	struct pyval values[64];
	size_t n = 1;
	if (argc < 1)
		return libtest_usage();
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
		return libtest_usage();
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
		return libtest_usage();
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
