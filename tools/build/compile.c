/* compile.c: NVRTC compiles in child processes (a compiler crash or hang costs one record),
 * and the GPU's architecture through the CUDA driver, loaded with dlopen. */
#include "common.h"

#include <dlfcn.h>
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cuda.h>

#include "clock.h"
#include "compile.h"
#include "fileio.h"
#include "jsonl.h"
#include "nvrtc_dl.h"
#include "process.h"
#include "run.h"
#include "visible.h"

/* ---------------------------------------------------------------- the GPU */

/* The architecture kg-build builds for on a GPU of compute capability major.minor. */
static void arch_of_capability(int major, int minor, char arch[16])
{
	/* On compute capability 9.0, sm_90a: its arch-specific instructions (wgmma, setmaxnreg)
	 * are what a Hopper kernel reaches the tensor cores' rate with, and a cubin for sm_90a
	 * runs on this GPU, the one it is built for. */
	snprintf(arch, 16, "sm_%d%d%s", major, minor, major == 9 && minor == 0 ? "a" : "");
}

int gpu_arch(int device, char arch[16])
{
	char shown[256];
	device = visible_only(device, shown, sizeof(shown)); /* a quicker cuInit */
	void *h = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL);
	if (!h)
		return -1;
	CUresult (*init)(unsigned int);
	CUresult (*count)(int *);
	CUresult (*get)(CUdevice *, int);
	CUresult (*attribute)(int *, CUdevice_attribute, CUdevice);
	*(void **)&init = dlsym(h, "cuInit");
	*(void **)&count = dlsym(h, "cuDeviceGetCount");
	*(void **)&get = dlsym(h, "cuDeviceGet");
	*(void **)&attribute = dlsym(h, "cuDeviceGetAttribute");
	int n = 0, major = 0, minor = 0;
	CUdevice dev;
	int rc = -1;
	if (init && count && get && attribute && init(0) == CUDA_SUCCESS && count(&n) == CUDA_SUCCESS && device < n &&
	    get(&dev, device) == CUDA_SUCCESS &&
	    attribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev) == CUDA_SUCCESS &&
	    attribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev) == CUDA_SUCCESS) {
		arch_of_capability(major, minor, arch);
		rc = 0;
	}
	/* The driver stays loaded: unloading it after cuInit is not supported. */
	return rc;
}

/* The compute capability of a GPU model, by the word of its name that names it. */
static int capability_of_model(const char *word, int *major, int *minor)
{
	static const struct {
		const char *model;
		int major, minor;
	} models[] = {
		{"V100", 7, 0},	 {"V100S", 7, 0}, {"T4", 7, 5},	   {"A100", 8, 0},  {"A800", 8, 0},  {"A30", 8, 0},
		{"A2", 8, 6},	 {"A10", 8, 6},	  {"A10G", 8, 6},  {"A16", 8, 6},   {"A40", 8, 6},   {"L4", 8, 9},
		{"L20", 8, 9},	 {"L40", 8, 9},	  {"L40S", 8, 9},  {"H20", 9, 0},   {"H100", 9, 0},  {"H200", 9, 0},
		{"H800", 9, 0},	 {"GH200", 9, 0}, {"B100", 10, 0}, {"B200", 10, 0}, {"GB200", 10, 0},
	};
	for (size_t k = 0; k < ARRAY_SIZE(models); k++)
		if (strcasecmp(word, models[k].model) == 0) {
			*major = models[k].major;
			*minor = models[k].minor;
			return 0;
		}
	/* The workstation Ampere cards: "RTX A6000" */
	if ((word[0] == 'A' || word[0] == 'a') && strlen(word) == 5 && strspn(word + 1, "0123456789") == 4) {
		*major = 8;
		*minor = 6;
		return 0;
	}
	return -1;
}

int device_arch(const char *device, char arch[16])
{
	/* The words of the name, split where NVIDIA's names split them ("NVIDIA A100-SXM4-80GB"). */
	char *copy = xstrdup(device), *save = NULL, *previous = "";
	int major = 0, minor = 0, rc = -1;
	for (char *word = strtok_r(copy, " -_", &save); word && rc; word = strtok_r(NULL, " -_", &save)) {
		char *end;
		long series = strtol(word, &end, 10);
		if (capability_of_model(word, &major, &minor) == 0)
			rc = 0;
		else if (strcasecmp(word, "Ada") == 0) { /* "RTX 6000 Ada Generation" */
			major = 8;
			minor = 9;
			rc = 0;
		} else if (strcasecmp(previous, "RTX") == 0 && *end == '\0' && series >= 2000 && series < 6000) {
			/* GeForce RTX 20xx to 50xx: Turing, Ampere, Ada, Blackwell */
			static const int majors[] = {7, 8, 8, 12}, minors[] = {5, 6, 9, 0};
			major = majors[series / 1000 - 2];
			minor = minors[series / 1000 - 2];
			rc = 0;
		}
		previous = word;
	}
	if (rc == 0)
		arch_of_capability(major, minor, arch);
	free(copy);
	return rc;
}

/* ---------------------------------------------------------------- one compile, in a child */


/* Whether a line of the log is ptxas's resource report ("ptxas info    : Used 10
 * registers", "ptxas         .     0 bytes stack frame"), not a message. */
static int is_ptxas_report(const char *line, size_t len)
{
	if (len < 5 || strncmp(line, "ptxas", 5) != 0)
		return 0;
	size_t k = 5;
	while (k < len && line[k] == ' ')
		k++;
	return (len - k >= 4 && strncmp(line + k, "info", 4) == 0) || (k < len && line[k] == '.');
}

/* Whether the log has a line that reports an error ("kernel.cu(3): error: ...", "ptxas
 * error   : ..."); with --ptxas-options=-v, NVRTC can fail with ptxas's report alone. */
static int names_an_error(const char *log)
{
	for (const char *p = log; *p;) {
		const char *eol = strchr(p, '\n');
		size_t len = eol ? (size_t)(eol - p) : strlen(p);
		if (!is_ptxas_report(p, len) && memmem(p, len, "error", 5))
			return 1;
		p += len + (eol != NULL);
	}
	return 0;
}

/* The compiler's messages without ptxas's resource report, at most 4 KB of them. */
static char *compiler_errors(const char *log, const char *status)
{
	enum { LIMIT = 4096 };
	struct strbuf sb;
	strbuf_init(&sb);
	strbuf_addf(&sb, "%s", status);
	size_t omitted = 0;
	for (const char *p = log; *p;) {
		const char *eol = strchr(p, '\n');
		size_t len = eol ? (size_t)(eol - p) : strlen(p);
		if (len && !is_ptxas_report(p, len)) {
			if (sb.len + len < LIMIT) {
				strbuf_addch(&sb, '\n');
				strbuf_add(&sb, p, len);
			} else {
				omitted += len + 1;
			}
		}
		p += len + (eol != NULL);
	}
	if (omitted)
		strbuf_addf(&sb, "\n... (%zu more bytes in build.log)", omitted);
	return strbuf_detach(&sb);
}

static int write_output(const char *dir, enum variant_file file, const char *data, size_t len)
{
	char *path = xasprintf("%s/%s", dir, run_variant_file(file));
	int rc = file_write(path, data, len);
	free(path);
	return rc;
}

/* Writes the result line to fd and ends the child; _exit, so that stdio buffers the parent
 * filled before fork are not written twice. */
NORETURN static void child_exit(int fd, int ok, int definitive, double ms, const char *function, const char *error)
{
	cJSON *res = cJSON_CreateObject();
	if (res) {
		cJSON_AddBoolToObject(res, "ok", ok);
		cJSON_AddBoolToObject(res, "definitive", definitive);
		cJSON_AddNumberToObject(res, "compile_ms", ms);
		if (function)
			cJSON_AddStringToObject(res, "function", function);
		if (error)
			cJSON_AddStringToObject(res, "error", error);
		char *text = cJSON_PrintUnformatted(res);
		if (text && write(fd, text, strlen(text)) < 0)
			_exit(1);
	}
	_exit(0);
}

NORETURN static void compile_child(const struct compile_job *job, int fd)
{
	struct nvrtc_output out;
	if (nvrtc_compile(job->source, run_variant_file(VARIANT_KERNEL), (const char *const *)job->options, job->noptions,
			  job->name_expression, &out) != 0)
		child_exit(fd, 0, 0, 0, NULL, out.error);
	struct strbuf text;
	strbuf_init(&text);
	strbuf_addf(&text, "# NVRTC %s:", nvrtc_version());
	for (size_t k = 0; k < job->noptions; k++)
		strbuf_addf(&text, " %s", job->options[k]);
	strbuf_addf(&text, "\n%s", out.log);
	if (!out.ok && !names_an_error(out.log)) {
		/* ptxas run verbose leaves its error out of NVRTC's log ("uses too much shared
		 * data"): compiled again without -v, the log says what failed. */
		const char *quiet[job->noptions + 1];
		size_t n = 0;
		for (size_t k = 0; k < job->noptions; k++)
			if (strcmp(job->options[k], "--ptxas-options=-v") != 0)
				quiet[n++] = job->options[k];
		struct nvrtc_output again;
		if (n < job->noptions && nvrtc_compile(job->source, run_variant_file(VARIANT_KERNEL), quiet, n, NULL, &again) == 0) {
			if (!again.ok && names_an_error(again.log)) {
				strbuf_addf(&text, "# again without --ptxas-options=-v:\n%s", again.log);
				free(out.log);
				out.log = again.log;
				again.log = NULL;
			}
			nvrtc_output_release(&again);
		}
	}
	if (write_output(job->dir, VARIANT_BUILD_LOG, text.buf, text.len) != 0)
		child_exit(fd, 0, 0, out.compile_ms, NULL, "cannot write build.log");
	/* NVRTC's own failure is no verdict on the program: neither cached nor kept, so the
	 * build after the toolkit is fixed compiles it. */
	if (!out.ok)
		child_exit(fd, 0, !out.own_failure, out.compile_ms, NULL, compiler_errors(out.log, out.error));
	if (out.ptx && write_output(job->dir, VARIANT_PTX, out.ptx, out.ptx_len) != 0)
		child_exit(fd, 0, 0, out.compile_ms, NULL, "cannot write kernel.ptx");
	if (!out.cubin)
		child_exit(fd, 0, 0, out.compile_ms, NULL, "NVRTC made no cubin (is the architecture a real one, sm_XX?)");
	if (write_output(job->dir, VARIANT_CUBIN, out.cubin, out.cubin_len) != 0)
		child_exit(fd, 0, 0, out.compile_ms, NULL, "cannot write kernel.cubin");
	child_exit(fd, 1, 1, out.compile_ms, out.lowered, NULL);
}

/* ---------------------------------------------------------------- the pool */

struct running {
	struct compile_job job;
	pid_t pid;
	int fd;		    /* the result pipe */
	struct strbuf out;  /* what the child wrote on it */
	double deadline;    /* when it is killed */
	int timed_out;
};

struct compile_pool {
	size_t jobs;
	double timeout_s;
	struct running *running;
	size_t nrunning;
	struct compile_job *queue; /* jobs waiting for a slot, first at index 0 */
	size_t nqueued, queue_cap;
};

struct compile_pool *compile_pool_new(size_t jobs, double timeout_s)
{
	struct compile_pool *pool = xcalloc(1, sizeof(*pool));
	pool->jobs = jobs ? jobs : 1;
	pool->timeout_s = timeout_s;
	pool->running = xcalloc(pool->jobs, sizeof(*pool->running));
	return pool;
}

static void job_release(struct compile_job *job)
{
	free(job->dir);
	free(job->source);
	free(job->name_expression);
	for (size_t k = 0; k < job->noptions; k++)
		free(job->options[k]);
	free(job->options);
}

void compile_pool_free(struct compile_pool *pool)
{
	if (!pool)
		return;
	for (size_t k = 0; k < pool->nrunning; k++) {
		kill(pool->running[k].pid, SIGKILL);
		process_wait(pool->running[k].pid);
		close(pool->running[k].fd);
		strbuf_release(&pool->running[k].out);
		job_release(&pool->running[k].job);
	}
	for (size_t k = 0; k < pool->nqueued; k++)
		job_release(&pool->queue[k]);
	free(pool->running);
	free(pool->queue);
	free(pool);
}

/* Forks a compiler for job. Returns 0, or -1 with errno set. */
static int start(struct compile_pool *pool, const struct compile_job *job)
{
	int fd;
	pid_t pid = process_fork_piped(&fd);
	if (pid < 0)
		return -1;
	if (pid == 0)
		compile_child(job, fd);
	struct running *r = &pool->running[pool->nrunning++];
	memset(r, 0, sizeof(*r));
	r->job = *job;
	r->pid = pid;
	r->fd = fd;
	strbuf_init(&r->out);
	r->deadline = (monotonic_ms() / 1e3) + pool->timeout_s;
	return 0;
}

void compile_pool_submit(struct compile_pool *pool, struct compile_job *job)
{
	if (pool->nqueued == pool->queue_cap) {
		pool->queue_cap = pool->queue_cap ? 2 * pool->queue_cap : 8;
		pool->queue = xreallocarray(pool->queue, pool->queue_cap, sizeof(*pool->queue));
	}
	pool->queue[pool->nqueued++] = *job;
	/* A job that cannot start now stays queued; compile_pool_wait retries and reports it. */
	while (pool->nrunning < pool->jobs && pool->nqueued > 0 && start(pool, &pool->queue[0]) == 0)
		memmove(pool->queue, pool->queue + 1, --pool->nqueued * sizeof(*pool->queue));
}


/* Turns what a finished child left into a result. */
static void collect(struct running *r, int status, struct compile_result *res)
{
	memset(res, 0, sizeof(*res));
	cJSON *line = r->out.len ? cJSON_Parse(r->out.buf) : NULL;
	if (r->timed_out) {
		res->error = xasprintf("the compiler ran past the time limit and was killed");
	} else if (!line) {
		res->error = WIFSIGNALED(status)
				     ? xasprintf("the compiler crashed (signal %d, %s)", WTERMSIG(status), strsignal(WTERMSIG(status)))
				     : xasprintf("the compiler process ended with status %d and no result", WEXITSTATUS(status));
	} else {
		const cJSON *ok = cJSON_GetObjectItemCaseSensitive(line, "ok");
		const cJSON *ms = cJSON_GetObjectItemCaseSensitive(line, "compile_ms");
		const cJSON *function = cJSON_GetObjectItemCaseSensitive(line, "function");
		const cJSON *error = cJSON_GetObjectItemCaseSensitive(line, "error");
		res->ok = cJSON_IsTrue(ok);
		res->definitive = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(line, "definitive"));
		res->compile_ms = cJSON_IsNumber(ms) ? ms->valuedouble : 0;
		res->function = cJSON_IsString(function) ? xstrdup(function->valuestring) : NULL;
		res->error = cJSON_IsString(error) ? xstrdup(error->valuestring) : NULL;
		if (!res->ok && !res->error)
			res->error = xstrdup("the compile failed");
	}
	cJSON_Delete(line);
}

int compile_pool_wait(struct compile_pool *pool, void **tag, struct compile_result *res, int block)
{
	while (pool->nrunning < pool->jobs && pool->nqueued > 0) {
		struct compile_job job = pool->queue[0];
		memmove(pool->queue, pool->queue + 1, --pool->nqueued * sizeof(*pool->queue));
		if (start(pool, &job) != 0) {
			memset(res, 0, sizeof(*res));
			res->error = xasprintf("cannot start a compiler process: %s", strerror(errno));
			*tag = job.tag;
			job_release(&job);
			return 0;
		}
	}
	if (pool->nrunning == 0)
		return -1;
	for (;;) {
		struct pollfd fds[pool->nrunning];
		double now = (monotonic_ms() / 1e3), next = now + 3600;
		for (size_t k = 0; k < pool->nrunning; k++) {
			fds[k] = (struct pollfd){.fd = pool->running[k].fd, .events = POLLIN};
			if (!pool->running[k].timed_out && pool->running[k].deadline < next)
				next = pool->running[k].deadline;
		}
		int timeout_ms = next <= now || !block ? 0 : (int)((next - now) * 1e3) + 1;
		int ready = poll(fds, pool->nrunning, timeout_ms);
		if (ready < 0)
			continue; /* EINTR, or no memory for now: try again */
		if (ready == 0 && !block)
			return 1;
		now = (monotonic_ms() / 1e3);
		for (size_t k = 0; k < pool->nrunning; k++) {
			struct running *r = &pool->running[k];
			if (!r->timed_out && r->deadline <= now) {
				r->timed_out = 1;
				kill(r->pid, SIGKILL);
			}
			if (!(fds[k].revents & (POLLIN | POLLHUP | POLLERR)))
				continue;
			char chunk[4096];
			ssize_t got = read(r->fd, chunk, sizeof(chunk));
			if (got > 0) {
				strbuf_add(&r->out, chunk, (size_t)got);
				continue;
			}
			if (got < 0 && errno == EINTR)
				continue;
			int status = process_wait(r->pid);
			close(r->fd);
			collect(r, status, res);
			*tag = r->job.tag;
			strbuf_release(&r->out);
			job_release(&r->job);
			pool->running[k] = pool->running[--pool->nrunning];
			return 0;
		}
	}
}

void compile_result_release(struct compile_result *res)
{
	free(res->function);
	free(res->error);
	memset(res, 0, sizeof(*res));
}

/* ---------------------------------------------------------------- ptxas's report */

static long number_before(const char *line, const char *eol, const char *unit)
{
	const char *p = strstr(line, unit);
	if (!p || p > eol)
		return 0;
	while (p > line && p[-1] == ' ')
		p--;
	while (p > line && p[-1] >= '0' && p[-1] <= '9')
		p--;
	return strtol(p, NULL, 10);
}

void ptxas_report_parse(const char *log, const char *function, struct ptxas_report *r)
{
	memset(r, 0, sizeof(*r));
	char current[512] = "";
	int taking = 0;
	for (const char *p = log; p && *p;) {
		const char *eol = strchr(p, '\n');
		if (!eol)
			eol = p + strlen(p);
		const char *q;
		if ((q = strstr(p, "Function properties for ")) && q < eol) {
			q += strlen("Function properties for ");
			snprintf(current, sizeof(current), "%.*s", (int)(eol - q), q);
			taking = !r->found && (!function || strcmp(current, function) == 0);
		} else if ((q = strstr(p, "Compiling entry function '")) && q < eol) {
			q += strlen("Compiling entry function '");
			const char *end = memchr(q, '\'', (size_t)(eol - q));
			snprintf(current, sizeof(current), "%.*s", (int)((end ? end : eol) - q), q);
			taking = !r->found && (!function || strcmp(current, function) == 0);
		} else if (taking && (q = strstr(p, "bytes stack frame")) && q < eol) {
			r->stack_bytes = number_before(p, eol, "bytes stack frame");
			r->spill_stores = number_before(p, eol, "bytes spill stores");
			r->spill_loads = number_before(p, eol, "bytes spill loads");
		} else if (taking && (q = strstr(p, "Used ")) && q < eol) {
			r->registers = number_before(p, eol, "registers");
			r->smem_bytes = number_before(p, eol, "bytes smem");
			r->cmem_bytes = number_before(p, eol, "bytes cmem[0]");
			r->found = 1;
			taking = 0;
		}
		p = *eol ? eol + 1 : eol;
	}
}
