/* worker_checks.c: the reference (RUN/reference/, the baseline's outputs on the spec's own
 * inputs) and the checks of a kernel's outputs against it, on fresh input sets and set 0. */
#include "common.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fileio.h"
#include "jsonl.h"
#include "log.h"
#include "worker_shared.h"
#include "xalloc.h"

/* What RUN/reference/ was made from: its files are outputs on the spec's own inputs, which
 * only this fill scheme reproduces (a reference of another makes every candidate fail). */
#define REFERENCE_FILLS "philox4x32-10/1"

/* ---------------------------------------------------------------- the reference */

static char *reference_path(const struct wrun *r, size_t k)
{
	char *dir = run_path(r->run.dir, RUN_REFERENCE), *path = xasprintf("%s/%zu-%s.bin", dir, k, r->ka.args[k].name);
	free(dir);
	return path;
}

/* RUN/reference/inputs.json: what the reference files were made from. */
static cJSON *reference_stamp(const struct wrun *r)
{
	cJSON *doc = json_object();
	json_add_string(doc, "fills", REFERENCE_FILLS);
	json_add_string(doc, "baseline", r->baseline_state ? r->baseline_state : "");
	return doc;
}

/* Reads RUN/reference/ into the ref0 slots (masked). Returns 1 when every file was there,
 * of the right size and made from today's fills; 0 otherwise (then it must be made). */
static int load_reference(struct wrun *r, struct failure *f)
{
	char *dir = run_path(r->run.dir, RUN_REFERENCE), *stamp_path = xasprintf("%s/inputs.json", dir);
	free(dir);
	cJSON *stamp = json_read_file(stamp_path), *want = reference_stamp(r);
	int same = stamp && cJSON_Compare(stamp, want, 1);
	free(stamp_path);
	cJSON_Delete(stamp);
	cJSON_Delete(want);
	if (!same)
		return 0;
	for (size_t k = 0; k < r->ka.n; k++) {
		struct warg *w = &r->args[k];
		if (!is_vector_output(w->a) || !w->ref0.bytes)
			continue;
		char *path = reference_path(r, k);
		size_t len;
		char *data = file_read_all(path, &len);
		int ok = data && len == w->ref0.bytes &&
			 !check_cuda(f, cu.cuMemcpyHtoD(slot_ptr(r, &w->ref0), data, len), "cuMemcpyHtoD (reference)");
		free(data);
		free(path);
		if (!ok)
			return 0;
	}
	return mask_refs(r, SLOT_REF0, f) ? 0 : 1;
}

/* Makes the reference: the baseline on the spec's own inputs, kept in RUN/reference/ so
 * that every later process checks against the same outputs, and in the ref0 slots. */
int make_reference(struct wrun *r, double *fill_ms, struct failure *f)
{
	if (load_set(r, 0, fill_ms, f) || run_into(r, &r->baseline, SLOT_REF, f) ||
	    check_cuda(f, cu.cuStreamSynchronize(gpu.stream), "the baseline"))
		return -1;
	char *dir = run_path(r->run.dir, RUN_REFERENCE);
	if (dir_create_nofollow(dir, 1) != 0)
		log_warn("cannot create '%s':", dir);
	for (size_t k = 0; k < r->ka.n; k++) {
		struct warg *w = &r->args[k];
		if (!is_vector_output(w->a) || !w->ref.bytes)
			continue;
		void *host = xmalloc(w->ref.bytes + 1);
		int rc = check_cuda(f, cu.cuMemcpyDtoH(host, slot_ptr(r, &w->ref), w->ref.bytes), "cuMemcpyDtoH (reference)") ||
			 check_cuda(f, cu.cuMemcpyDtoDAsync(slot_ptr(r, &w->ref0), slot_ptr(r, &w->ref), w->ref.bytes, gpu.stream),
				    "cuMemcpyDtoDAsync (reference)");
		if (rc == 0) {
			char *path = reference_path(r, k);
			if (file_write_atomic(path, host, w->ref.bytes) != 0)
				log_warn("cannot write '%s':", path);
			free(path);
		}
		free(host);
		if (rc) {
			free(dir);
			return -1;
		}
	}
	char *stamp_path = xasprintf("%s/inputs.json", dir);
	cJSON *stamp = reference_stamp(r);
	if (json_write_file(stamp_path, stamp, 1) != 0)
		log_warn("cannot write '%s':", stamp_path);
	cJSON_Delete(stamp);
	free(stamp_path);
	free(dir);
	return mask_refs(r, SLOT_REF0, f);
}

int ready_reference(struct wrun *r, double *fill_ms, struct failure *f)
{
	if (r->ref0_ready)
		return 0;
	int loaded = load_reference(r, f);
	if (f->failed || (!loaded && make_reference(r, fill_ms, f)))
		return -1;
	r->ref0_ready = 1;
	return 0;
}

int load_run_baseline(struct wrun *r, struct failure *f)
{
	if (r->has_baseline)
		return 0;
	const cJSON *doc = run_baseline(&r->run);
	if (!doc) {
		char *path = run_path(r->run.dir, RUN_BASELINE);
		fail_with(f, "error", "no baseline in %s (%s is missing): bench the baseline first, as kg-init does",
			  r->run.dir, path);
		free(path);
		return -1;
	}
	if (load_run_kernel(r, doc, &r->baseline, f) != 0)
		return -1;
	r->has_baseline = 1;
	r->baseline_state = json_string(doc, "state") ? xstrdup(json_string(doc, "state")) : NULL;
	return 0;
}

/* ---------------------------------------------------------------- checks */

static double result_double(uint64_t bits)
{
	double d;
	memcpy(&d, &bits, sizeof(d));
	return d;
}

/* Input sets for a candidate: fresh ones derived from its state, so that no two candidates
 * are checked on the same data and none can know its data in advance, then set 0, whose
 * outputs are also checked after timing. */
uint64_t check_set_id(const char *state, size_t k)
{
	uint64_t h = 1469598103934665603ull;
	for (const char *p = state; *p; p++)
		h = (h ^ (unsigned char)*p) * 1099511628211ull;
	return (h ^ (k + 1) * 0x9e3779b97f4a7c15ull) | 1; /* never 0 */
}

/* Enqueues the comparison of every output in out with its reference (ref, or ref0) and
 * the check of the guards; *first gets the first result used. */
int enqueue_checks(const struct wrun *r, enum which_slot which, long *first, struct failure *f)
{
	*first = (long)gpu.nresults;
	for (size_t k = 0; k < r->ka.n; k++) {
		const struct warg *w = &r->args[k];
		if (!is_vector_output(w->a) || !w->out.bytes)
			continue;
		const struct slot *ref = slot_of(w, which);
		const struct karg *a = w->a;
		int custom = a->base == KARG_CUSTOM;
		long res = result_take(f);
		if (res < 0 || check_cuda(f, harness_compare(&gpu.harness, gpu.stream, slot_ptr(r, &w->out), slot_ptr(r, ref),
							 custom ? karg_bytes(a) : (uint64_t)a->count * a->lanes, a->base,
							 custom ? 1 : (int)(a->elem_bytes / a->lanes),
							 custom ? (int)a->elem_bytes : (int)a->lanes, a->abs_tol, a->rel_tol,
							 r->mask_key, result_ptr(res)), "the harness (compare)"))
			return -1;
	}
	long res = result_take(f);
	return res < 0 || check_cuda(f, harness_guard(&gpu.harness, gpu.stream, r->arena, r->guard_table, (unsigned)r->nguards,
						      r->guard_words, r->guard_salt, 1, result_ptr(res)), "the harness (guards)")
		       ? -1 : 0;
}

/* Which buffer a damaged guard byte at arena offset at follows. */
static const struct guard_info *guard_at(const struct wrun *r, size_t at)
{
	for (size_t g = 0; g < r->nguards; g++)
		if (at >= r->guards[g].offset && at < r->guards[g].offset + r->guards[g].bytes)
			return &r->guards[g];
	return NULL;
}

/* Says where a kernel wrote outside its buffers: the guard it changed first (at, an arena
 * offset, within g) and the buffer before it. */
static void describe_guard(const struct guard_info *g, size_t at, unsigned long long words, char *why, size_t size)
{
	if (g && g->prev)
		snprintf(why, size, "the kernel wrote outside its buffers: from %zu bytes past the end of the %s buffer of "
			 "'%s' (%llu 8-byte words of guard bytes changed)", at - g->offset, g->prev_kind, g->prev, words);
	else if (g && g->next)
		snprintf(why, size, "the kernel wrote outside its buffers: before the start of the %s buffer of '%s' (%llu "
			 "8-byte words of guard bytes changed)", g->next_kind, g->next, words);
	else
		snprintf(why, size, "the kernel wrote outside its buffers (%llu 8-byte words of guard bytes changed)", words);
}

/* Reads the results enqueue_checks made from first into v (for set set_index); returns
 * whether they passed. A damaged guard is rewritten, so the next launch starts clean. */
int judge_checks(const struct wrun *r, long first, int set_index, struct verdict *v, struct failure *f)
{
	long k = first;
	int passed = 1;
	for (size_t a = 0; a < r->ka.n; a++) {
		const struct warg *w = &r->args[a];
		if (!is_vector_output(w->a) || !w->out.bytes)
			continue;
		const struct harness_result *res = &gpu.host_results[k++];
		double max_abs = result_double(res->max_abs), max_rel = result_double(res->max_rel);
		v->max_abs_err = fmax(v->max_abs_err, max_abs);
		v->max_rel_err = fmax(v->max_rel_err, max_rel);
		v->weak |= w->a->base != KARG_CUSTOM && result_double(res->ref_max) <= w->a->abs_tol;
		if (res->bad && passed && v->passed) {
			passed = 0;
			v->argument = w->a->name;
			v->first_bad = (size_t)~res->first_bad_inv;
			v->bad = (size_t)res->bad;
			v->input_set = set_index;
		}
	}
	const struct harness_result *guard = &gpu.host_results[k];
	if (guard->bad) {
		const struct guard_info *g = guard_at(r, (size_t)~guard->first_bad_inv);
		if (passed && v->passed) {
			passed = 0;
			v->input_set = set_index;
			v->argument = g ? (g->prev ? g->prev : g->next) : NULL;
			describe_guard(g, (size_t)~guard->first_bad_inv, (unsigned long long)guard->bad, v->why, sizeof(v->why));
		}
		if (guards_write(r, f))
			return -1;
	}
	if (!passed)
		v->passed = 0;
	return passed;
}

/* Whether the read-only inputs still hash as they did after the fill (hashes enqueued from
 * first by enqueue_input_hashes). */
void judge_inputs(const struct wrun *r, long first, int set_index, const char *when, struct verdict *v)
{
	long k = first;
	for (size_t a = 0; a < r->ka.n; a++) {
		const struct warg *w = &r->args[a];
		if (!w->hashed)
			continue;
		if (gpu.host_results[k++].hash != w->hash && v->passed) {
			v->passed = 0;
			v->argument = w->a->name;
			v->input_set = set_index;
			snprintf(v->why, sizeof(v->why), "the kernel changed an input it may only read%s", when);
		}
	}
}

/* Checks kn on input set set: with a fresh set the baseline computes the expected outputs
 * first (the reference's own launch, into ref); set 0 is checked against ref0. */
int check_set(struct wrun *r, const struct kernel *kn, uint64_t set, int set_index, struct verdict *v,
	      double *fill_ms, struct failure *f)
{
	long checks, hashes, base_guard = -1;
	int fresh = set != 0;
	if (load_set(r, set, fill_ms, f))
		return -1;
	if (fresh) {
		if (run_into(r, &r->baseline, SLOT_REF, f) || mask_refs(r, SLOT_REF, f) ||
		    (base_guard = result_take(f)) < 0 ||
		    check_cuda(f, harness_guard(&gpu.harness, gpu.stream, r->arena, r->guard_table, (unsigned)r->nguards,
						r->guard_words, r->guard_salt, 1, result_ptr(base_guard)), "the harness (guards)"))
			return -1;
	}
	if (run_into(r, kn, SLOT_OUT, f) ||
	    enqueue_checks(r, fresh ? SLOT_REF : SLOT_REF0, &checks, f) ||
	    enqueue_input_hashes(r, &hashes, f) || results_read(f))
		return -1;
	if (base_guard >= 0 && gpu.host_results[base_guard].bad)
		return fail_with(f, "error", "the baseline wrote outside its buffers (on fresh input set %d): "
			       "its outputs cannot serve as the reference", set_index);
	if (judge_checks(r, checks, set_index, v, f) < 0)
		return -1;
	judge_inputs(r, hashes, set_index, "", v);
	return 0;
}

/* Baseline kn against ReferenceArguments: their data, filled into the targets' ref slots, is
 * what the baseline must compute on the spec's own inputs. */
int check_baseline(struct wrun *r, const struct kernel *kn, struct verdict *v, double *fill_ms, struct failure *f)
{
	long checks;
	if (load_set(r, 0, fill_ms, f))
		return -1;
	for (size_t j = 0; j < r->ka.nrefs; j++) {
		struct warg *target = &r->args[r->ka.ref_target[j]];
		if (fill(r, &r->refs[j], slot_ptr(r, &target->ref), 0, f))
			return -1;
	}
	if (mask_refs(r, SLOT_REF, f) || run_into(r, kn, SLOT_OUT, f) ||
	    enqueue_checks(r, SLOT_REF, &checks, f) || results_read(f) || judge_generators(r, f))
		return -1;
	return judge_checks(r, checks, 0, v, f) < 0 ? -1 : 0;
}

cJSON *verdict_to_json(const struct verdict *v, size_t input_sets)
{
	cJSON *check = json_object();
	json_add_bool(check, "passed", v->passed);
	json_add_number(check, "input_sets", (double)input_sets);
	json_add_number(check, "timed_checks", (double)v->timed_checks);
	/* JSON has no infinity: a non-finite error is null, and nonfinite says why. */
	if (isfinite(v->max_abs_err)) {
		json_add_number(check, "max_abs_err", v->max_abs_err);
		json_add_number(check, "max_rel_err", v->max_rel_err);
	} else {
		if (!cJSON_AddNullToObject(check, "max_abs_err") || !cJSON_AddNullToObject(check, "max_rel_err"))
			xalloc_die();
		json_add_bool(check, "nonfinite", 1);
	}
	if (v->weak)
		json_add_bool(check, "weak", 1);
	if (!v->passed) {
		if (v->argument)
			json_add_string(check, "argument", v->argument);
		json_add_number(check, "input_set", v->input_set);
		if (v->why[0])
			json_add_string(check, "why", v->why);
		if (v->bad) {
			json_add_number(check, "first_bad", (double)v->first_bad);
			json_add_number(check, "bad_elements", (double)v->bad);
		}
	}
	return check;
}

