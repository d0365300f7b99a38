/* kargs.c: T1 Arguments read into sized, typed buffers; fills (Constant, Random, Generator,
 * BinaryRaw) on the host; and the element-wise comparison that decides correctness. */
#include "common.h"

#include <errno.h>
#include <libgen.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fileio.h"
#include "jsonl.h"
#include "kargs.h"

static const struct {
	const char *name;
	enum karg_base base;
	size_t bytes;
} base_types[] = {
	{"bool", KARG_BOOL, 1}, {"int8", KARG_I8, 1}, {"uint8", KARG_U8, 1}, {"int16", KARG_I16, 2},
	{"uint16", KARG_U16, 2}, {"int32", KARG_I32, 4}, {"uint32", KARG_U32, 4}, {"int64", KARG_I64, 8},
	{"uint64", KARG_U64, 8}, {"half", KARG_F16, 2}, {"float", KARG_F32, 4}, {"double", KARG_F64, 8},
	{"custom", KARG_CUSTOM, 0},
};

const char *karg_base_name(enum karg_base base)
{
	for (size_t k = 0; k < ARRAY_SIZE(base_types); k++)
		if (base_types[k].base == base)
			return base_types[k].name;
	return "?";
}

static size_t base_bytes(enum karg_base base)
{
	for (size_t k = 0; k < ARRAY_SIZE(base_types); k++)
		if (base_types[k].base == base)
			return base_types[k].bytes;
	return 0;
}

/* "float4" is float with 4 lanes; the loader already checked the name against T1's list. */
static void parse_type(const char *type, struct karg *a)
{
	a->lanes = 1;
	for (size_t k = 0; k < ARRAY_SIZE(base_types); k++) {
		size_t len = strlen(base_types[k].name);
		if (strncmp(type, base_types[k].name, len) != 0)
			continue;
		if (type[len] == '\0' || (base_types[k].base >= KARG_F16 && base_types[k].base <= KARG_F64)) {
			a->base = base_types[k].base;
			if (type[len])
				a->lanes = (size_t)strtoul(type + len, NULL, 10);
			return;
		}
	}
}

size_t karg_bytes(const struct karg *a)
{
	return a->elem_bytes * a->count;
}

int karg_is_output(const struct karg *a)
{
	return (a->memory == KARG_VECTOR || a->memory == KARG_SYMBOL) && a->access != KARG_READ;
}

/* ---------------------------------------------------------------- loading */



/* Size: an integer, or an expression with each tuning parameter bound to all its values. */
static int load_size(const struct t1_spec *spec, const cJSON *arg, struct karg *a, struct strbuf *why)
{
	const cJSON *size = cJSON_GetObjectItemCaseSensitive(arg, "Size");
	if (!size) {
		if (a->memory == KARG_SCALAR) {
			a->count = 1;
			return 0;
		}
		strbuf_addf(why, "%s: %s: Size: missing (a %s argument needs one)", spec->path, a->field,
			    a->memory == KARG_VECTOR ? "Vector" : a->memory == KARG_LOCAL ? "Local" : "Symbol");
		return -1;
	}
	if (cJSON_IsNumber(size)) {
		a->count = (size_t)size->valuedouble;
		return 0;
	}
	struct pyexpr_error err;
	struct pyexpr *e = pyexpr_compile(size->valuestring, spec->names, spec->nnames, &err);
	struct pyarena *arena = pyarena_new();
	struct pyval *values = xcalloc(spec->nnames, sizeof(*values)), v;
	for (size_t k = 0; k < spec->nparams; k++)
		values[k] = pyval_list(arena, spec->params[k].values, spec->params[k].nvalues);
	values[spec->nparams] = spec->problem_size;
	int rc = 0;
	if (!e || pyexpr_eval(e, values, arena, &v, &err) != 0) {
		strbuf_addf(why, "%s: %s.Size: column %zu: %s in \"%s\"", spec->path, a->field,
			    pyexpr_error_column(size->valuestring, &err), err.message, size->valuestring);
		rc = -1;
	} else if (v.kind != PY_INT || v.u.i < 0) {
		strbuf_addf(why, "%s: %s.Size: \"%s\" gives ", spec->path, a->field, size->valuestring);
		pyval_describe(why, &v);
		strbuf_addstr(why, ", not a count of elements");
		rc = -1;
	} else {
		a->count = (size_t)v.u.i;
	}
	free(values);
	pyarena_free(arena);
	pyexpr_free(e);
	return rc;
}

static int load_fill(const struct t1_spec *spec, const cJSON *arg, struct karg *a, struct strbuf *why)
{
	static const char *const fills[] = {"Constant", "Random", "Generator", "BinaryRaw"};
	const char *fill = json_string(arg, "FillType");
	const char *source = json_string(arg, "DataSource");
	double seed;
	a->fill = KARG_FILL_CONSTANT;
	for (size_t k = 0; fill && k < ARRAY_SIZE(fills); k++)
		if (strcmp(fill, fills[k]) == 0)
			a->fill = (enum karg_fill)k;
	if (fill && strcmp(fill, fills[a->fill]) != 0) {
		strbuf_addf(why, "%s: %s.FillType: %s is not supported (Constant, Random, Generator, BinaryRaw)",
			    spec->path, a->field, fill);
		return -1;
	}
	a->fill_value = json_number(arg, "FillValue", NAN);
	a->has_fill_value = !isnan(a->fill_value);
	if (!isnan(seed = json_number(arg, "RandomSeed", NAN)))
		a->seed = (uint64_t)seed;
	if (a->fill == KARG_FILL_GENERATOR || a->fill == KARG_FILL_BINARY) {
		if (!source) {
			strbuf_addf(why, "%s: %s.DataSource: missing (FillType %s needs it)", spec->path, a->field, fill);
			return -1;
		}
	}
	if (a->fill == KARG_FILL_GENERATOR) {
		static const char *const names[] = {"i", "ProblemSize"};
		struct pyexpr_error err;
		a->generator = pyexpr_compile(source, names, ARRAY_SIZE(names), &err);
		if (!a->generator) {
			strbuf_addf(why, "%s: %s.DataSource: column %zu: %s in \"%s\"", spec->path, a->field,
				    pyexpr_error_column(source, &err), err.message, source);
			return -1;
		}
	} else if (a->fill == KARG_FILL_BINARY) {
		/* In the spec's folder, as its KernelFile is (file_confined). */
		const char *refused = file_confined(NULL, source, 0);
		if (refused) {
			strbuf_addf(why, "%s: %s.DataSource: '%s': %s; %s", spec->path, a->field, source, refused, T1_FILES_RULE);
			return -1;
		}
		a->data_source = source;
		a->data_path = xasprintf("%s/%s", spec->kernel_dir, source);
	}
	return 0;
}

/* KernelGraph.Tolerance {"atol", "rtol"} applies to every output; otherwise by type, as
 * KernelBench's current defaults (1e-4 for float, 1e-2 for half). */
static void load_tolerance(const struct t1_spec *spec, const cJSON *arg, struct karg *a)
{
	const cJSON *ext = cJSON_GetObjectItemCaseSensitive(spec->json, "KernelGraph");
	const cJSON *tol = cJSON_GetObjectItemCaseSensitive(ext, "Tolerance");
	const cJSON *own = cJSON_GetObjectItemCaseSensitive(arg, "Tolerance");
	a->abs_tol = a->rel_tol = a->base == KARG_F16 ? 1e-2 : a->base == KARG_F64 ? 1e-8 : karg_elem_is_float(a->base) ? 1e-4 : 0;
	a->abs_tol = json_number(own, "atol", json_number(tol, "atol", a->abs_tol));
	a->rel_tol = json_number(own, "rtol", json_number(tol, "rtol", a->rel_tol));
}

static int load_references(const struct t1_spec *spec, const cJSON *kernel, struct kargs *out, struct strbuf *why);

int kargs_load(const struct t1_spec *spec, struct kargs *out, struct strbuf *why)
{
	static const char *const memories[] = {"Scalar", "Vector", "Local", "Symbol"};
	const cJSON *kernel = cJSON_GetObjectItemCaseSensitive(spec->json, "KernelSpecification");
	const cJSON *list = cJSON_GetObjectItemCaseSensitive(kernel, "Arguments"), *arg;
	double shared;
	memset(out, 0, sizeof(*out));
	out->args = xcalloc((size_t)cJSON_GetArraySize(list) + 1, sizeof(*out->args));
	if ((shared = json_number(kernel, "SharedMemory", 0)) > 0)
		out->dynamic_smem = (size_t)shared;
	cJSON_ArrayForEach(arg, list) {
		struct karg *a = &out->args[out->n];
		const char *name = json_string(arg, "Name"), *memory = json_string(arg, "MemoryType");
		const char *access = json_string(arg, "AccessType");
		double type_size;
		a->field = xasprintf("KernelSpecification.Arguments[%zu]", out->n);
		a->name = name ? xstrdup(name) : xasprintf("argument %zu", out->n);
		a->seed = out->n + 1;
		a->problem_size = &spec->problem_size;
		out->n++;
		parse_type(json_string(arg, "Type"), a);
		for (size_t k = 0; k < ARRAY_SIZE(memories); k++)
			if (strcmp(memory, memories[k]) == 0)
				a->memory = (enum karg_memory)k;
		a->access = !access ? KARG_READ_WRITE
			    : strcmp(access, "ReadOnly") == 0 ? KARG_READ
			    : strcmp(access, "WriteOnly") == 0 ? KARG_WRITE : KARG_READ_WRITE;
		/* Kernel Tuner's "Output": 1 marks an output that has no AccessType. */
		if (!access && json_number(arg, "Output", 1) == 0)
			a->access = KARG_READ;
		a->elem_bytes = base_bytes(a->base) * a->lanes;
		if (a->base == KARG_CUSTOM) {
			if ((type_size = json_number(arg, "TypeSize", 0)) < 1) {
				strbuf_addf(why, "%s: %s.TypeSize: missing (a custom Type needs its size in bytes)",
					    spec->path, a->field);
				kargs_release(out);
				return -1;
			}
			a->elem_bytes = (size_t)type_size;
		}
		if (a->memory == KARG_SYMBOL && !name) {
			strbuf_addf(why, "%s: %s.Name: missing (a Symbol is found by its name)", spec->path, a->field);
			kargs_release(out);
			return -1;
		}
		if (load_size(spec, arg, a, why) || load_fill(spec, arg, a, why)) {
			kargs_release(out);
			return -1;
		}
		load_tolerance(spec, arg, a);
		if (a->memory == KARG_LOCAL)
			out->dynamic_smem += karg_bytes(a);
	}
	if (load_references(spec, kernel, out, why)) {
		kargs_release(out);
		return -1;
	}
	return 0;
}

static int load_references(const struct t1_spec *spec, const cJSON *kernel, struct kargs *out, struct strbuf *why)
{
	const cJSON *list = cJSON_GetObjectItemCaseSensitive(kernel, "ReferenceArguments"), *ref;
	out->refs = xcalloc((size_t)cJSON_GetArraySize(list) + 1, sizeof(*out->refs));
	out->ref_target = xcalloc((size_t)cJSON_GetArraySize(list) + 1, sizeof(*out->ref_target));
	cJSON_ArrayForEach(ref, list) {
		char *field = xasprintf("KernelSpecification.ReferenceArguments[%zu]", out->nrefs);
		const char *target = json_string(ref, "TargetName");
		const char *method = json_string(ref, "ValidationMethod");
		size_t k;
		for (k = 0; k < out->n && strcmp(out->args[k].name, target) != 0; k++)
			;
		if (k == out->n || !karg_is_output(&out->args[k])) {
			strbuf_addf(why, "%s: %s.TargetName: '%s' is not an output argument", spec->path, field, target);
			free(field);
			return -1;
		}
		struct karg *r = &out->refs[out->nrefs];
		*r = out->args[k];
		r->name = xstrdup(json_string(ref, "Name"));
		r->field = field;
		r->data_path = NULL;
		r->data_source = NULL;
		r->generator = NULL;
		r->has_fill_value = 0;
		r->seed = out->nrefs + 1001;
		out->ref_target[out->nrefs++] = k;
		if (load_fill(spec, ref, r, why))
			return -1;
		double threshold;
		if (!isnan(threshold = json_number(ref, "ValidationThreshold", NAN))) {
			int relative = method && strcmp(method, "SideBySideRelativeComparison") == 0;
			out->args[k].abs_tol = relative ? 0 : threshold;
			out->args[k].rel_tol = relative ? threshold : 0;
		}
	}
	return 0;
}

static void release_arg(struct karg *a)
{
	free(a->name);
	free(a->field);
	free(a->data_path);
	pyexpr_free(a->generator);
}

void kargs_release(struct kargs *kargs)
{
	for (size_t j = 0; j < kargs->nrefs; j++)
		release_arg(&kargs->refs[j]);
	free(kargs->refs);
	free(kargs->ref_target);
	for (size_t k = 0; k < kargs->n; k++)
		release_arg(&kargs->args[k]);
	free(kargs->args);
	memset(kargs, 0, sizeof(*kargs));
}

/* ---------------------------------------------------------------- data */

uint16_t half_from_float(float f)
{
	return karg_elem_half_from_float(f);
}

float half_to_float(uint16_t h)
{
	return karg_elem_half_to_float(h);
}

double karg_random_range(const struct karg *a)
{
	if (a->has_fill_value)
		return fabs(a->fill_value);
	return karg_elem_is_float(a->base) ? 1.0 : 100;
}

static int fill_binary(const struct karg *a, void *host, struct strbuf *why)
{
	size_t len = 0;
	char *dir = xstrndup(a->data_path, strlen(a->data_path) - strlen(a->data_source) - 1);
	const char *refused = file_confined(dir, a->data_source, 1);
	free(dir);
	char *data = refused ? NULL : file_read_all(a->data_path, &len);
	if (refused && access(a->data_path, F_OK) == 0) {
		/* a link in the folder that leads out of it */
		strbuf_addf(why, "%s.DataSource: '%s': %s of the spec; %s", a->field, a->data_source, FILE_NOT_INSIDE,
			    T1_FILES_RULE);
		return -1;
	}
	if (!data) {
		strbuf_addf(why, "%s.DataSource: cannot read '%s': %s", a->field, a->data_path, strerror(errno));
		return -1;
	}
	int rc = 0;
	if (len != karg_bytes(a)) {
		strbuf_addf(why, "%s.DataSource: '%s' holds %zu bytes; %s needs %zu (%zu elements of %zu bytes)",
			    a->field, a->data_path, len, a->name, karg_bytes(a), a->count, a->elem_bytes);
		rc = -1;
	} else {
		memcpy(host, data, len);
	}
	free(data);
	return rc;
}

static int fill_generated(const struct karg *a, void *host, struct strbuf *why)
{
	struct pyarena *arena = pyarena_new();
	unsigned char *p = host;
	size_t lane_bytes = a->elem_bytes / a->lanes, n = a->count * a->lanes;
	int rc = 0;
	for (size_t i = 0; i < n && rc == 0; i++) {
		struct pyval globals[2] = {pyval_int((int64_t)i), *a->problem_size}, v;
		struct pyexpr_error err;
		if (pyexpr_eval(a->generator, globals, arena, &v, &err) != 0) {
			strbuf_addf(why, "%s.DataSource: column %zu: %s in \"%s\" (with i=%zu)", a->field,
				    pyexpr_error_column(pyexpr_source(a->generator), &err), err.message,
				    pyexpr_source(a->generator), i);
			rc = -1;
		} else if (v.kind != PY_INT && v.kind != PY_BOOL && v.kind != PY_FLOAT) {
			strbuf_addf(why, "%s.DataSource: \"%s\" gives %s, not a number (with i=%zu)", a->field,
				    pyexpr_source(a->generator), pyval_type_name(&v), i);
			rc = -1;
		} else {
			karg_elem_store(a->base, p + i * lane_bytes, v.kind == PY_FLOAT ? v.u.f : (double)v.u.i);
		}
		pyarena_reset(arena);
	}
	pyarena_free(arena);
	return rc;
}

int karg_fill(const struct karg *a, uint64_t input_set, void *host, struct strbuf *why)
{
	if (a->memory == KARG_LOCAL)
		return 0;
	if (a->base == KARG_CUSTOM && a->fill != KARG_FILL_BINARY) {
		memset(host, 0, karg_bytes(a));
		return 0;
	}
	unsigned char *p = host;
	size_t lane_bytes = a->elem_bytes / a->lanes, n = a->count * a->lanes;
	switch (a->fill) {
	case KARG_FILL_CONSTANT:
		for (size_t i = 0; i < n; i++)
			karg_elem_store(a->base, p + i * lane_bytes, a->has_fill_value ? a->fill_value : 0);
		return 0;
	case KARG_FILL_RANDOM:
		for (size_t i = 0; i < n; i++)
			karg_elem_store_random(a->base, p + i * lane_bytes, karg_elem_random_bits(a->seed, input_set, i),
					       karg_random_range(a));
		return 0;
	case KARG_FILL_GENERATOR:
		return fill_generated(a, host, why);
	case KARG_FILL_BINARY:
		return fill_binary(a, host, why);
	}
	return 0;
}

/* ---------------------------------------------------------------- comparison */

void karg_compare(const struct karg *a, const void *out, const void *ref, struct karg_diff *d)
{
	memset(d, 0, sizeof(*d));
	d->passed = 1;
	const unsigned char *o = out, *r = ref;
	if (a->base == KARG_CUSTOM) {
		for (size_t i = 0; i < karg_bytes(a); i++)
			if (o[i] != r[i] && d->bad++ == 0)
				d->first_bad = i / a->elem_bytes;
		d->passed = d->bad == 0;
		return;
	}
	size_t lane_bytes = a->elem_bytes / a->lanes, n = a->count * a->lanes;
	for (size_t i = 0; i < n; i++) {
		double err, ref_abs;
		int ok = karg_elem_check(a->base, o + i * lane_bytes, r + i * lane_bytes, a->abs_tol, a->rel_tol, &err,
					 &ref_abs);
		if (isfinite(ref_abs) && ref_abs > d->ref_max)
			d->ref_max = ref_abs;
		if (isfinite(err)) {
			if (err > d->max_abs_err)
				d->max_abs_err = err;
			if (ref_abs != 0 && err / ref_abs > d->max_rel_err)
				d->max_rel_err = err / ref_abs;
		} else if (!ok) {
			d->max_abs_err = d->max_rel_err = INFINITY;
		}
		if (!ok && d->bad++ == 0)
			d->first_bad = i / a->lanes;
	}
	d->passed = d->bad == 0;
}
