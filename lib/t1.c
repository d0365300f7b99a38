/* t1.c: T1 validation, expression compilation and the walk over the configuration space.
 * Validation follows the T1 1.0.0 schema, accepting the variations published files use
 * (numbers for GlobalSize parts, a single Budget object, a string FormatVersion). */
#include "common.h"

#include <libgen.h>
#include <math.h>
#include <stdarg.h>

#include "fileio.h"
#include "jsonl.h"
#include "log.h"
#include "t1.h"
#include "xalloc.h"

/* JSON numbers are doubles: integers beyond 2**53 would silently change on the way out. */
#define JSON_INT_LIMIT 9007199254740992LL

struct loader {
	const char *path;      /* for messages */
	struct t1_spec *spec;  /* being filled */
};

static int fail(struct loader *L, const char *field, const char *fmt, ...) PRINTF_LIKE(3, 4);

static int fail(struct loader *L, const char *field, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	return log_error("%s: %s: %s", L->path, field, msg);
}

static int expr_fail(struct loader *L, const char *field, const char *source, const struct pyexpr_error *err)
{
	return fail(L, field, "column %zu: %s in \"%s\"", pyexpr_error_column(source, err), err->message, source);
}

static const char *json_type_name(const cJSON *item)
{
	if (cJSON_IsString(item))
		return "a string";
	if (cJSON_IsNumber(item))
		return "a number";
	if (cJSON_IsBool(item))
		return "a boolean";
	if (cJSON_IsNull(item))
		return "null";
	if (cJSON_IsArray(item))
		return "an array";
	return "an object";
}

/* The field path of key inside parent, into buf. */
static const char *subfield(char *buf, size_t size, const char *parent, const char *key)
{
	if (parent[0])
		snprintf(buf, size, "%s.%s", parent, key);
	else
		snprintf(buf, size, "%s", key);
	return buf;
}

static const char *item_field(char *buf, size_t size, const char *parent, size_t index)
{
	snprintf(buf, size, "%s[%zu]", parent, index);
	return buf;
}

/* Names item k of the array parent in field (size bytes) and checks that it is an object.
 * Returns 0, or -1 after reporting. */
static int object_item(struct loader *L, const cJSON *item, const char *parent, size_t k, char *field, size_t size)
{
	item_field(field, size, parent, k);
	if (!cJSON_IsObject(item))
		return fail(L, field, "must be an object, not %s", json_type_name(item));
	return 0;
}

enum presence { OPTIONAL, REQUIRED };

/* Looks up key in obj, checking that it is present when required and has the wanted type.
 * Returns 0 with *out set (NULL when an optional key is absent) or -1 after reporting. */
static int member(struct loader *L, const cJSON *obj, const char *parent, const char *key, enum presence presence,
		  int (*is_type)(const cJSON *), const char *type_name, const cJSON **out)
{
	char field[512];
	const cJSON *item = cJSON_GetObjectItemCaseSensitive(obj, key);
	*out = NULL;
	if (!item) {
		if (presence == REQUIRED)
			return fail(L, subfield(field, sizeof(field), parent, key), "missing (required by T1)");
		return 0;
	}
	if (!is_type(item))
		return fail(L, subfield(field, sizeof(field), parent, key), "must be %s, not %s", type_name,
			    json_type_name(item));
	*out = item;
	return 0;
}

static int is_string(const cJSON *item) { return cJSON_IsString(item); }
static int is_object(const cJSON *item) { return cJSON_IsObject(item); }
static int is_array(const cJSON *item) { return cJSON_IsArray(item); }
static int is_number(const cJSON *item) { return cJSON_IsNumber(item); }
static int is_bool(const cJSON *item) { return cJSON_IsBool(item); }

static int is_integer(const cJSON *item)
{
	return cJSON_IsNumber(item) && item->valuedouble == floor(item->valuedouble) &&
	       fabs(item->valuedouble) <= (double)JSON_INT_LIMIT;
}

static int is_string_or_number(const cJSON *item)
{
	return cJSON_IsString(item) || cJSON_IsNumber(item);
}

static int is_scalar(const cJSON *item)
{
	return cJSON_IsNumber(item) || cJSON_IsString(item) || cJSON_IsBool(item);
}

static int is_string_or_array(const cJSON *item)
{
	return cJSON_IsString(item) || cJSON_IsArray(item);
}

static int is_string_or_integer(const cJSON *item)
{
	return cJSON_IsString(item) || is_integer(item);
}

/* An optional or required string member that must be one of choices (a NULL-ended list). */
static int enum_member(struct loader *L, const cJSON *obj, const char *parent, const char *key, enum presence presence,
		       const char *const *choices, const char **out)
{
	const cJSON *item;
	*out = NULL;
	if (member(L, obj, parent, key, presence, is_string, "a string", &item))
		return -1;
	if (!item)
		return 0;
	for (size_t k = 0; choices[k]; k++) {
		if (strcmp(item->valuestring, choices[k]) == 0) {
			*out = choices[k];
			return 0;
		}
	}
	struct strbuf list;
	strbuf_init(&list);
	for (size_t k = 0; choices[k]; k++)
		strbuf_addf(&list, "%s%s", k ? ", " : "", choices[k]);
	char field[512];
	fail(L, subfield(field, sizeof(field), parent, key), "'%s' is not one of %s", item->valuestring, list.buf);
	strbuf_release(&list);
	return -1;
}

/* The text of an expression field, which T1 files write as a string or a bare number. */
static char *expression_text(const cJSON *item)
{
	if (cJSON_IsString(item))
		return xstrdup(item->valuestring);
	if (item->valuedouble == floor(item->valuedouble) && fabs(item->valuedouble) <= (double)JSON_INT_LIMIT)
		return xasprintf("%lld", (long long)item->valuedouble);
	return xasprintf("%.17g", item->valuedouble);
}

/* Compiles item (a string or number) as an expression over the spec's names. */
static struct pyexpr *compile_field(struct loader *L, const char *field, const cJSON *item, size_t nnames)
{
	struct pyexpr_error err;
	char *text = expression_text(item);
	struct pyexpr *e = pyexpr_compile(text, L->spec->names, nnames, &err);
	if (!e)
		expr_fail(L, field, text, &err);
	free(text);
	return e;
}

/* Copies v, a constant's value, into the spec's arena: a scalar or a list of scalars. A
 * list of lists is refused before the copy, since its items may all be one list shared
 * (as [[0] * 10**6] * 10**6 makes them), which a deep copy would multiply into 10**12. */
static int copy_constant(struct loader *L, const char *field, const struct pyval *v, struct pyval *out)
{
	if (v->kind == PY_LIST) {
		for (size_t k = 0; k < v->u.list->len; k++) {
			if (v->u.list->items[k].kind == PY_LIST) {
				char f[600];
				return fail(L, item_field(f, sizeof(f), field, k),
					    "must be a number, a string or a boolean, not a list");
			}
		}
	}
	*out = pyval_copy(L->spec->arena, v);
	return 0;
}

/* Evaluates item as a constant expression (no names) into the spec's arena. */
static int constant_field(struct loader *L, const char *field, const cJSON *item, struct pyval *out)
{
	struct pyexpr *e = compile_field(L, field, item, 0);
	if (!e)
		return -1;
	struct pyexpr_error err;
	struct pyval v;
	int rc = pyexpr_eval(e, NULL, L->spec->arena, &v, &err);
	if (rc)
		expr_fail(L, field, pyexpr_source(e), &err);
	else /* string constants live in the expression, which is freed here */
		rc = copy_constant(L, field, &v, out);
	pyexpr_free(e);
	return rc;
}

static int is_identifier(const char *s)
{
	if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || *s == '_'))
		return 0;
	for (s++; *s; s++)
		if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') || *s == '_'))
			return 0;
	return 1;
}

static const char *const param_type_names[] = {"int", "uint", "float", "bool", "string", NULL};

/* Whether v may be a value of a parameter of the given type; *why says why not. */
static int value_fits(enum t1_param_type type, const struct pyval *v, const char **why)
{
	switch (type) {
	case T1_INT:
	case T1_UINT:
		if (v->kind != PY_INT) {
			*why = type == T1_INT ? "an int" : "a non-negative int";
			return 0;
		}
		if (type == T1_UINT && v->u.i < 0) {
			*why = "a non-negative int";
			return 0;
		}
		if (v->u.i > JSON_INT_LIMIT || v->u.i < -JSON_INT_LIMIT) {
			*why = "an int within 2**53 (beyond it, JSON numbers lose digits)";
			return 0;
		}
		return 1;
	case T1_FLOAT:
		if ((v->kind == PY_INT && v->u.i <= JSON_INT_LIMIT && v->u.i >= -JSON_INT_LIMIT) ||
		    (v->kind == PY_FLOAT && isfinite(v->u.f)))
			return 1;
		*why = "a finite float";
		return 0;
	case T1_BOOL:
		if (v->kind == PY_BOOL || (v->kind == PY_INT && (v->u.i == 0 || v->u.i == 1)))
			return 1;
		*why = "a bool (True, False, 0 or 1)";
		return 0;
	case T1_STRING:
		if (v->kind == PY_STR)
			return 1;
		*why = "a string";
		return 0;
	}
	return 0;
}

static cJSON *value_to_json(const struct pyval *v)
{
	switch (v->kind) {
	case PY_BOOL: return cJSON_CreateBool((cJSON_bool)v->u.i);
	case PY_INT: return cJSON_CreateNumber((double)v->u.i);
	case PY_FLOAT: return cJSON_CreateNumber(v->u.f);
	case PY_STR: return cJSON_CreateString(v->u.s->bytes);
	default: return cJSON_CreateNull(); /* value_fits admits only the kinds above */
	}
}

/* cJSON's text for a value, which t1_config_to_json splices in raw: formatting numbers is
 * most of the cost of writing a configuration, and each value is formatted only once. */
static char *value_json_text(const struct pyval *v)
{
	cJSON *item = value_to_json(v);
	char *text = item ? cJSON_PrintUnformatted(item) : NULL;
	cJSON_Delete(item);
	if (!text)
		xalloc_die();
	char *copy = xstrdup(text);
	cJSON_free(text);
	return copy;
}

/* A Values field that is a JSON array instead of an expression string (seen in BAT files). */
static int values_from_array(struct loader *L, const char *field, const cJSON *array, struct pyval *out)
{
	size_t n = (size_t)cJSON_GetArraySize(array), k = 0;
	struct pyval *items = xcalloc(n ? n : 1, sizeof(*items));
	const cJSON *item;
	cJSON_ArrayForEach(item, array) {
		char f[512];
		if (cJSON_IsString(item)) {
			items[k] = pyval_str(L->spec->arena, item->valuestring, strlen(item->valuestring));
		} else if (cJSON_IsBool(item)) {
			items[k] = pyval_bool(cJSON_IsTrue(item));
		} else if (is_integer(item)) {
			items[k] = pyval_int((int64_t)item->valuedouble);
		} else if (cJSON_IsNumber(item)) {
			items[k] = pyval_float(item->valuedouble);
		} else {
			free(items);
			return fail(L, item_field(f, sizeof(f), field, k), "must be a number, string or boolean, not %s",
				    json_type_name(item));
		}
		k++;
	}
	*out = pyval_list(L->spec->arena, items, n);
	free(items);
	return 0;
}

static int load_param(struct loader *L, const cJSON *obj, size_t index)
{
	struct t1_param *p = &L->spec->params[index];
	const cJSON *name, *values;
	char field[256], f[512];
	if (object_item(L, obj, "ConfigurationSpace.TuningParameters", index, field, sizeof(field)))
		return -1;
	if (member(L, obj, field, "Name", REQUIRED, is_string, "a string", &name))
		return -1;
	if (!is_identifier(name->valuestring))
		return fail(L, subfield(f, sizeof(f), field, "Name"),
			    "'%s' is not a valid name (letters, digits and _, not starting with a digit)", name->valuestring);
	if (strcmp(name->valuestring, "ProblemSize") == 0)
		return fail(L, subfield(f, sizeof(f), field, "Name"), "'ProblemSize' is reserved for KernelSpecification.ProblemSize");
	for (size_t k = 0; k < index; k++)
		if (strcmp(L->spec->params[k].name, name->valuestring) == 0)
			return fail(L, subfield(f, sizeof(f), field, "Name"), "'%s' is already the name of TuningParameters[%zu]",
				    name->valuestring, k);
	p->name = name->valuestring;
	L->spec->names[index] = p->name;

	const char *type_name;
	if (enum_member(L, obj, field, "Type", REQUIRED, param_type_names, &type_name))
		return -1;
	for (size_t k = 0; param_type_names[k]; k++)
		if (strcmp(type_name, param_type_names[k]) == 0)
			p->type = (enum t1_param_type)k;

	if (member(L, obj, field, "Values", REQUIRED, is_string_or_array, "a string (a Python expression) or an array",
		   &values))
		return -1;
	subfield(f, sizeof(f), field, "Values");
	struct pyval v;
	if (cJSON_IsArray(values) ? values_from_array(L, f, values, &v) : constant_field(L, f, values, &v))
		return -1;
	if (pyval_items(L->spec->arena, &v, &p->values, &p->nvalues))
		return fail(L, f, "must give a list, not %s", pyval_type_name(&v));
	if (p->nvalues == 0)
		return fail(L, f, "the list of values is empty");
	const cJSON *def;
	if (member(L, obj, field, "Default", OPTIONAL, is_scalar, "a number, a string or a boolean", &def))
		return -1;
	p->default_value = def;
	p->values_json = xcalloc(p->nvalues, sizeof(*p->values_json));
	for (size_t k = 0; k < p->nvalues; k++) {
		const char *why = "";
		if (!value_fits(p->type, &p->values[k], &why)) {
			struct strbuf r;
			strbuf_init(&r);
			pyval_repr(&r, &p->values[k]);
			char g[600];
			fail(L, item_field(g, sizeof(g), f, k), "%s is not %s (Type is %s)", r.buf, why, type_name);
			strbuf_release(&r);
			return -1;
		}
		p->values_json[k] = value_json_text(&p->values[k]);
	}
	return 0;
}

static int load_condition(struct loader *L, const cJSON *obj, size_t index)
{
	struct t1_condition *c = &L->spec->conditions[index];
	const cJSON *expression, *params, *item;
	char field[256], f[512];
	if (object_item(L, obj, "ConfigurationSpace.Conditions", index, field, sizeof(field)))
		return -1;
	if (member(L, obj, field, "Parameters", REQUIRED, is_array, "an array", &params) ||
	    member(L, obj, field, "Expression", REQUIRED, is_string, "a string", &expression))
		return -1;
	size_t k = 0;
	cJSON_ArrayForEach(item, params) {
		char g[600];
		item_field(g, sizeof(g), subfield(f, sizeof(f), field, "Parameters"), k++);
		if (!cJSON_IsString(item))
			return fail(L, g, "must be a string, not %s", json_type_name(item));
		size_t p;
		for (p = 0; p < L->spec->nparams && strcmp(L->spec->params[p].name, item->valuestring) != 0; p++)
			;
		if (p == L->spec->nparams && strcmp(item->valuestring, "ProblemSize") != 0)
			return fail(L, g, "unknown tuning parameter '%s'", item->valuestring);
	}
	c->field = xstrdup(subfield(f, sizeof(f), field, "Expression"));
	c->expr = compile_field(L, c->field, expression, L->spec->nnames);
	return c->expr ? 0 : -1;
}

static int load_configuration_space(struct loader *L, const cJSON *root)
{
	struct t1_spec *s = L->spec;
	const cJSON *space, *params, *conditions, *item;
	if (member(L, root, "", "ConfigurationSpace", REQUIRED, is_object, "an object", &space) ||
	    member(L, space, "ConfigurationSpace", "TuningParameters", REQUIRED, is_array, "an array", &params) ||
	    member(L, space, "ConfigurationSpace", "Conditions", OPTIONAL, is_array, "an array", &conditions))
		return -1;

	s->nparams = (size_t)cJSON_GetArraySize(params);
	s->params = xcalloc(s->nparams ? s->nparams : 1, sizeof(*s->params));
	s->nnames = s->nparams + 1;
	s->names = xcalloc(s->nnames, sizeof(*s->names));
	s->names[s->nparams] = "ProblemSize";
	size_t k = 0;
	cJSON_ArrayForEach(item, params)
		if (load_param(L, item, k++))
			return -1;

	if (!conditions)
		return 0;
	s->nconditions = (size_t)cJSON_GetArraySize(conditions);
	s->conditions = xcalloc(s->nconditions ? s->nconditions : 1, sizeof(*s->conditions));
	k = 0;
	cJSON_ArrayForEach(item, conditions)
		if (load_condition(L, item, k++))
			return -1;
	return 0;
}

static int load_problem_size(struct loader *L, const cJSON *kernel)
{
	const char *field = "KernelSpecification.ProblemSize";
	const cJSON *ps = cJSON_GetObjectItemCaseSensitive(kernel, "ProblemSize");
	L->spec->problem_size = pyval_none();
	if (!ps)
		return 0;
	if (is_string_or_number(ps))
		return constant_field(L, field, ps, &L->spec->problem_size);
	if (!cJSON_IsArray(ps))
		return fail(L, field, "must be a number, a string or an array, not %s", json_type_name(ps));
	size_t n = (size_t)cJSON_GetArraySize(ps), k = 0;
	struct pyval *items = xcalloc(n ? n : 1, sizeof(*items));
	const cJSON *item;
	cJSON_ArrayForEach(item, ps) {
		char f[512];
		item_field(f, sizeof(f), field, k);
		if (!is_string_or_number(item)) {
			free(items);
			return fail(L, f, "must be a number or a string, not %s", json_type_name(item));
		}
		if (constant_field(L, f, item, &items[k])) {
			free(items);
			return -1;
		}
		k++;
	}
	L->spec->problem_size = pyval_list(L->spec->arena, items, n);
	free(items);
	return 0;
}

static int load_sizes(struct loader *L, const cJSON *kernel, const char *key, struct pyexpr *out[3])
{
	static const char *const dims[] = {"X", "Y", "Z"};
	char parent[128], f[256];
	const cJSON *obj, *item;
	if (member(L, kernel, "KernelSpecification", key, REQUIRED, is_object, "an object", &obj))
		return -1;
	subfield(parent, sizeof(parent), "KernelSpecification", key);
	for (int d = 0; d < 3; d++) {
		if (member(L, obj, parent, dims[d], d == 0 ? REQUIRED : OPTIONAL, is_string_or_number,
			   "a string (an expression) or a number", &item))
			return -1;
		if (item && !(out[d] = compile_field(L, subfield(f, sizeof(f), parent, dims[d]), item, L->spec->nnames)))
			return -1;
	}
	return 0;
}

static const char *const fill_types[] = {"Constant", "Random", "Generator", "Script", "BinaryRaw", "BinaryHDF", NULL};

static int load_arguments(struct loader *L, const cJSON *kernel)
{
	static const char *const types[] = {
		"bool", "int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64",
		"half", "half2", "half4", "half8", "half16", "float", "float2", "float4", "float8", "float16",
		"double", "double2", "double4", "double8", "double16", "custom", NULL};
	static const char *const memory_types[] = {"Scalar", "Vector", "Local", "Symbol", NULL};
	static const char *const access_types[] = {"ReadOnly", "WriteOnly", "ReadWrite", NULL};
	const cJSON *args, *arg, *item, *size;
	if (member(L, kernel, "KernelSpecification", "Arguments", OPTIONAL, is_array, "an array", &args))
		return -1;
	if (!args)
		return 0;
	size_t k = 0;
	cJSON_ArrayForEach(arg, args) {
		char f[256], g[300];
		const char *value;
		if (object_item(L, arg, "KernelSpecification.Arguments", k++, f, sizeof(f)))
			return -1;
		if (member(L, arg, f, "Name", OPTIONAL, is_string, "a string", &item) ||
		    enum_member(L, arg, f, "Type", REQUIRED, types, &value) ||
		    enum_member(L, arg, f, "MemoryType", REQUIRED, memory_types, &value) ||
		    enum_member(L, arg, f, "FillType", OPTIONAL, fill_types, &value) ||
		    enum_member(L, arg, f, "AccessType", OPTIONAL, access_types, &value) ||
		    member(L, arg, f, "FillValue", OPTIONAL, is_number, "a number", &item) ||
		    member(L, arg, f, "DataSource", OPTIONAL, is_string, "a string", &item) ||
		    member(L, arg, f, "RandomSeed", OPTIONAL, is_integer, "an integer", &item) ||
		    member(L, arg, f, "TypeSize", OPTIONAL, is_integer, "an integer", &item) ||
		    member(L, arg, f, "Size", OPTIONAL, is_string_or_integer, "an integer or a string (an expression)", &size))
			return -1;
		if (size) {
			struct pyexpr *e = compile_field(L, subfield(g, sizeof(g), f, "Size"), size, L->spec->nnames);
			if (!e)
				return -1;
			pyexpr_free(e);
		}
	}
	return 0;
}

static int load_reference_arguments(struct loader *L, const cJSON *kernel)
{
	static const char *const methods[] = {"AbsoluteDifference", "SideBySideComparison",
					       "SideBySideRelativeComparison", NULL};
	const cJSON *refs, *ref, *item;
	if (member(L, kernel, "KernelSpecification", "ReferenceArguments", OPTIONAL, is_array, "an array", &refs))
		return -1;
	if (!refs)
		return 0;
	size_t k = 0;
	cJSON_ArrayForEach(ref, refs) {
		char f[256];
		const char *value;
		if (object_item(L, ref, "KernelSpecification.ReferenceArguments", k++, f, sizeof(f)))
			return -1;
		if (member(L, ref, f, "Name", REQUIRED, is_string, "a string", &item) ||
		    member(L, ref, f, "TargetName", REQUIRED, is_string, "a string", &item) ||
		    enum_member(L, ref, f, "FillType", REQUIRED, fill_types, &value) ||
		    member(L, ref, f, "FillValue", OPTIONAL, is_number, "a number", &item) ||
		    member(L, ref, f, "DataSource", OPTIONAL, is_string, "a string", &item) ||
		    member(L, ref, f, "RandomSeed", OPTIONAL, is_integer, "an integer", &item) ||
		    enum_member(L, ref, f, "ValidationMethod", OPTIONAL, methods, &value) ||
		    member(L, ref, f, "ValidationThreshold", OPTIONAL, is_number, "a number", &item))
			return -1;
	}
	return 0;
}

static int load_kernel(struct loader *L, const cJSON *root)
{
	static const char *const languages[] = {"CUDA", "OpenCL", "Vulkan", "Hypertuner", NULL};
	static const char *const size_types[] = {"CUDA", "OpenCL", "Vulkan", NULL};
	struct t1_spec *s = L->spec;
	const cJSON *kernel, *name, *file, *options, *item;
	const char *size_type;
	if (member(L, root, "", "KernelSpecification", REQUIRED, is_object, "an object", &kernel) ||
	    enum_member(L, kernel, "KernelSpecification", "Language", REQUIRED, languages, &s->language) ||
	    member(L, kernel, "KernelSpecification", "KernelName", REQUIRED, is_string, "a string", &name) ||
	    member(L, kernel, "KernelSpecification", "KernelFile", REQUIRED, is_string, "a string", &file) ||
	    enum_member(L, kernel, "KernelSpecification", "GlobalSizeType", OPTIONAL, size_types, &size_type) ||
	    member(L, kernel, "KernelSpecification", "CompilerOptions", OPTIONAL, is_array, "an array", &options) ||
	    member(L, kernel, "KernelSpecification", "SharedMemory", OPTIONAL, is_integer, "an integer", &item) ||
	    member(L, kernel, "KernelSpecification", "Profiling", OPTIONAL, is_bool, "a boolean", &item) ||
	    member(L, kernel, "KernelSpecification", "Device", OPTIONAL, is_object, "an object", &item))
		return -1;
	s->kernel_name = name->valuestring;
	/* KernelFile is relative to the spec, so a spec and its kernel can move together, and in
	 * its folder, as a kernel's includes are (file_confined): no host file becomes the kernel. */
	const char *refused = file_confined(NULL, file->valuestring, 0);
	if (refused)
		return fail(L, "KernelSpecification.KernelFile", "'%s': %s; %s", file->valuestring, refused, T1_FILES_RULE);
	s->kernel_file = file->valuestring;
	char *copy = xstrdup(L->path);
	s->kernel_dir = xstrdup(dirname(copy));
	s->kernel_path = xasprintf("%s/%s", s->kernel_dir, file->valuestring);
	free(copy);
	/* Absent, KTT's CUDA engine reads GlobalSize as blocks; kernelgraph does the same. */
	s->global_size_type = size_type && strcmp(size_type, "OpenCL") == 0 ? T1_GLOBAL_OPENCL : T1_GLOBAL_CUDA;
	if (options) {
		size_t k = 0;
		cJSON_ArrayForEach(item, options) {
			char f[256];
			if (!cJSON_IsString(item))
				return fail(L, item_field(f, sizeof(f), "KernelSpecification.CompilerOptions", k),
					    "must be a string, not %s", json_type_name(item));
			k++;
		}
	}
	if (load_problem_size(L, kernel) || load_sizes(L, kernel, "GlobalSize", s->global_size) ||
	    load_sizes(L, kernel, "LocalSize", s->local_size) || load_arguments(L, kernel) ||
	    load_reference_arguments(L, kernel))
		return -1;
	return 0;
}

static int load_budget_entry(struct loader *L, const cJSON *entry, const char *field)
{
	static const char *const budget_types[] = {"TuningDuration", "ConfigurationCount", "ConfigurationFraction", NULL};
	const char *type;
	const cJSON *value;
	if (!cJSON_IsObject(entry))
		return fail(L, field, "must be an object, not %s", json_type_name(entry));
	return enum_member(L, entry, field, "Type", REQUIRED, budget_types, &type) ||
			       member(L, entry, field, "BudgetValue", REQUIRED, is_number, "a number", &value)
		       ? -1
		       : 0;
}

/* KernelGraph.Methods: {"PARAMETER": "method"}, what a change of each parameter is called. */
static int check_methods(struct loader *L, const cJSON *methods)
{
	const cJSON *m;
	cJSON_ArrayForEach(m, methods) {
		char f[256];
		snprintf(f, sizeof(f), "KernelGraph.Methods.%s", m->string);
		size_t k;
		for (k = 0; k < L->spec->nparams && strcmp(L->spec->params[k].name, m->string) != 0; k++)
			;
		if (k == L->spec->nparams)
			return fail(L, f, "not a tuning parameter");
		if (!cJSON_IsString(m) || !m->valuestring[0])
			return fail(L, f, "must be a method's name (a string)");
	}
	return 0;
}

/* The ReadOnly Vector argument named name in KernelSpecification.Arguments, or NULL: an input's
 * buffer stays where it is for every launch, so its map is encoded once per kernel. */
static const cJSON *vector_argument(const cJSON *root, const char *name)
{
	const cJSON *kernel = cJSON_GetObjectItemCaseSensitive(root, "KernelSpecification");
	const cJSON *arg;
	cJSON_ArrayForEach(arg, cJSON_GetObjectItemCaseSensitive(kernel, "Arguments")) {
		const cJSON *n = cJSON_GetObjectItemCaseSensitive(arg, "Name");
		const cJSON *m = cJSON_GetObjectItemCaseSensitive(arg, "MemoryType");
		const cJSON *access = cJSON_GetObjectItemCaseSensitive(arg, "AccessType");
		if (cJSON_IsString(n) && strcmp(n->valuestring, name) == 0 && cJSON_IsString(m) &&
		    strcmp(m->valuestring, "Vector") == 0 && cJSON_IsString(access) &&
		    strcmp(access->valuestring, "ReadOnly") == 0)
			return arg;
	}
	return NULL;
}

/* Dims or Box of a tensor map: an array of rank expressions, compiled into out. */
static int tensor_map_exprs(struct loader *L, const cJSON *entry, const char *field, const char *key, size_t *rank,
			    struct pyexpr **out)
{
	const cJSON *list, *item;
	char f[300], g[320];
	if (member(L, entry, field, key, REQUIRED, is_array, "an array", &list))
		return -1;
	subfield(f, sizeof(f), field, key);
	size_t n = (size_t)cJSON_GetArraySize(list), k = 0;
	if (n < 1 || n > T1_TENSOR_MAP_MAX_RANK)
		return fail(L, f, "must have 1 to %d entries, not %zu", T1_TENSOR_MAP_MAX_RANK, n);
	if (*rank && n != *rank)
		return fail(L, f, "must have as many entries as Dims (%zu), not %zu", *rank, n);
	*rank = n;
	cJSON_ArrayForEach(item, list) {
		item_field(g, sizeof(g), f, k);
		if (!is_string_or_number(item))
			return fail(L, g, "must be a string (an expression) or a number, not %s", json_type_name(item));
		if (!(out[k++] = compile_field(L, g, item, L->spec->nnames)))
			return -1;
	}
	return 0;
}

/* KernelGraph.TensorMaps: [{"Argument", "Dims", "Box", "Swizzle"}] (t1.h says what each is). */
static int load_tensor_maps(struct loader *L, const cJSON *root, const cJSON *maps)
{
	const cJSON *entry, *item;
	struct t1_spec *s = L->spec;
	s->tensor_maps = xcalloc((size_t)cJSON_GetArraySize(maps) + 1, sizeof(*s->tensor_maps));
	cJSON_ArrayForEach(entry, maps) {
		char f[256], g[300];
		struct t1_tensor_map *m = &s->tensor_maps[s->ntensor_maps];
		if (object_item(L, entry, "KernelGraph.TensorMaps", s->ntensor_maps, f, sizeof(f)))
			return -1;
		m->field = xstrdup(f);
		s->ntensor_maps++;
		if (member(L, entry, f, "Argument", REQUIRED, is_string, "a string", &item))
			return -1;
		m->argument = item->valuestring;
		if (!vector_argument(root, m->argument))
			return fail(L, subfield(g, sizeof(g), f, "Argument"),
				    "'%s' is not the Name of a ReadOnly Vector argument of KernelSpecification.Arguments",
				    m->argument);
		if (tensor_map_exprs(L, entry, f, "Dims", &m->rank, m->dims) ||
		    tensor_map_exprs(L, entry, f, "Box", &m->rank, m->box) ||
		    member(L, entry, f, "Swizzle", OPTIONAL, is_integer, "an integer", &item))
			return -1;
		m->swizzle = item ? (int)item->valuedouble : 0;
		if (m->swizzle != 0 && m->swizzle != 32 && m->swizzle != 64 && m->swizzle != 128)
			return fail(L, subfield(g, sizeof(g), f, "Swizzle"), "must be 0, 32, 64 or 128 (bytes), not %d",
				    m->swizzle);
	}
	return 0;
}

/* Conditions of one kernel (t1.h): list is an array of {"Expression", "Parameters"} objects at
 * field; name the Patches entry's Name, or NULL for KernelGraph.Conditions. */
static int load_kernel_conditions(struct loader *L, const cJSON *list, const char *field, const char *name)
{
	struct t1_spec *s = L->spec;
	const cJSON *obj, *expression, *params;
	if (!cJSON_IsArray(list))
		return fail(L, field, "must be an array, not %s", json_type_name(list));
	s->kernel_conditions = xreallocarray(s->kernel_conditions, s->nkernel_conditions + 1, sizeof(*s->kernel_conditions));
	struct t1_kernel_conditions *kc = &s->kernel_conditions[s->nkernel_conditions++];
	kc->name = name;
	kc->n = 0;
	kc->conditions = xcalloc((size_t)cJSON_GetArraySize(list) + 1, sizeof(*kc->conditions));
	size_t k = 0;
	cJSON_ArrayForEach(obj, list) {
		char f[300], g[320];
		/* Parameters is fetched only to be type-checked (a spec with "Parameters": 3 fails to
		 * load); nothing reads it, since the compiled Expression knows the names it reads. */
		if (object_item(L, obj, field, k++, f, sizeof(f)) ||
		    member(L, obj, f, "Parameters", OPTIONAL, is_array, "an array", &params) ||
		    member(L, obj, f, "Expression", REQUIRED, is_string, "a string", &expression))
			return -1;
		struct t1_condition *c = &kc->conditions[kc->n++];
		c->field = xstrdup(subfield(g, sizeof(g), f, "Expression"));
		if (!(c->expr = compile_field(L, c->field, expression, s->nnames)))
			return -1;
	}
	return 0;
}

/* Whether item names a real architecture, "sm_90", "sm_90a" or "sm_100f" (a patch's Arch). */
static int is_arch(const cJSON *item)
{
	if (!cJSON_IsString(item) || strncmp(item->valuestring, "sm_", 3) != 0)
		return 0;
	const char *p = item->valuestring + 3;
	if (*p < '1' || *p > '9')
		return 0;
	while (*p >= '0' && *p <= '9')
		p++;
	return *p == '\0' || ((*p == 'a' || *p == 'f') && p[1] == '\0');
}

/* KernelGraph.Conditions, and the Conditions, PatchFile and Arch of each KernelGraph.Patches
 * entry (the rest of an entry is kg-propose's to read). */
static int load_all_kernel_conditions(struct loader *L, const cJSON *ext)
{
	const cJSON *conditions = cJSON_GetObjectItemCaseSensitive(ext, "Conditions");
	const cJSON *patches = cJSON_GetObjectItemCaseSensitive(ext, "Patches"), *entry;
	if (conditions && load_kernel_conditions(L, conditions, "KernelGraph.Conditions", NULL))
		return -1;
	size_t k = 0;
	if (!cJSON_IsArray(patches))
		return 0; /* kg-propose says what is wrong with it */
	cJSON_ArrayForEach(entry, patches) {
		char f[256], g[300];
		const cJSON *name;
		item_field(f, sizeof(f), "KernelGraph.Patches", k++);
		const char *file = json_string(entry, "PatchFile"), *refused = file ? file_confined(NULL, file, 0) : NULL;
		if (refused)
			return fail(L, subfield(g, sizeof(g), f, "PatchFile"), "'%s': %s; %s", file, refused, T1_FILES_RULE);
		const cJSON *arch = cJSON_GetObjectItemCaseSensitive(entry, "Arch");
		if (arch && !is_arch(arch))
			return fail(L, subfield(g, sizeof(g), f, "Arch"), "must be an architecture like \"sm_90a\"");
		conditions = cJSON_GetObjectItemCaseSensitive(entry, "Conditions");
		if (!conditions)
			continue;
		if (member(L, entry, f, "Name", REQUIRED, is_string, "a string", &name) ||
		    load_kernel_conditions(L, conditions, subfield(g, sizeof(g), f, "Conditions"), name->valuestring))
			return -1;
	}
	return 0;
}

static int load_other_sections(struct loader *L, const cJSON *root)
{
	static const char *const levels[] = {"Off", "Error", "Warning", "Info", "Debug", NULL};
	static const char *const units[] = {"Nanoseconds", "Microseconds", "Milliseconds", "Seconds", NULL};
	static const char *const formats[] = {"JSON", "XML", NULL};
	const cJSON *general, *search, *budget, *item, *attrs, *bench_name = NULL;
	const char *value;

	if (member(L, root, "", "General", OPTIONAL, is_object, "an object", &general))
		return -1;
	if (general &&
	    (member(L, general, "General", "FormatVersion", OPTIONAL, is_string_or_number, "a number or a string", &item) ||
	     enum_member(L, general, "General", "LoggingLevel", OPTIONAL, levels, &value) ||
	     enum_member(L, general, "General", "TimeUnit", OPTIONAL, units, &value) ||
	     member(L, general, "General", "OutputFile", OPTIONAL, is_string, "a string", &item) ||
	     enum_member(L, general, "General", "OutputFormat", OPTIONAL, formats, &value) ||
	     member(L, general, "General", "BenchmarkName", OPTIONAL, is_string, "a string", &bench_name)))
		return -1;
	if (bench_name)
		L->spec->name = bench_name->valuestring;

	if (member(L, root, "", "Search", OPTIONAL, is_object, "an object", &search))
		return -1;
	if (search && (member(L, search, "Search", "Name", REQUIRED, is_string, "a string", &item) ||
		       member(L, search, "Search", "Attributes", OPTIONAL, is_array, "an array", &attrs)))
		return -1;
	if (search && attrs) {
		size_t k = 0;
		cJSON_ArrayForEach(item, attrs) {
			char f[256], g[300];
			const cJSON *x;
			if (object_item(L, item, "Search.Attributes", k++, f, sizeof(f)) ||
			    member(L, item, f, "Name", REQUIRED, is_string, "a string", &x))
				return -1;
			if (!cJSON_GetObjectItemCaseSensitive(item, "Value"))
				return fail(L, subfield(g, sizeof(g), f, "Value"), "missing (required by T1)");
		}
	}

	/* T1 makes Budget an array; BAT files write one object. Both are read. */
	budget = cJSON_GetObjectItemCaseSensitive(root, "Budget");
	if (budget && cJSON_IsArray(budget)) {
		size_t k = 0;
		cJSON_ArrayForEach(item, budget) {
			char f[64];
			if (load_budget_entry(L, item, item_field(f, sizeof(f), "Budget", k++)))
				return -1;
		}
	} else if (budget && load_budget_entry(L, budget, "Budget")) {
		return -1;
	}

	if (member(L, root, "", "KernelGraph", OPTIONAL, is_object, "an object", &item))
		return -1;
	const cJSON *shared, *methods, *maps;
	if (item && (member(L, item, "KernelGraph", "SharedMemory", OPTIONAL, is_string_or_number,
			    "a string (an expression) or a number", &shared) ||
		     (shared && !(L->spec->shared_memory = compile_field(L, "KernelGraph.SharedMemory", shared,
									 L->spec->nnames))) ||
		     member(L, item, "KernelGraph", "Methods", OPTIONAL, is_object, "an object", &methods) ||
		     (methods && check_methods(L, methods)) ||
		     member(L, item, "KernelGraph", "TensorMaps", OPTIONAL, is_array, "an array", &maps) ||
		     (maps && load_tensor_maps(L, root, maps)) || load_all_kernel_conditions(L, item)))
		return -1;
	return 0;
}

struct t1_spec *t1_load(const char *path, int *unreadable)
{
	struct t1_spec *s = xcalloc(1, sizeof(*s));
	struct loader L = {.path = path, .spec = s};
	s->path = xstrdup(path);
	s->arena = pyarena_new();
	s->budget = xcalloc(1, sizeof(*s->budget));
	pyexpr_budget_init(s->budget, "the spec", T1_LISTING_STEPS);
	*unreadable = 0;

	size_t len;
	char *text = file_read_all(path, &len);
	if (!text) {
		log_error("cannot read '%s':", path);
		*unreadable = 1;
		goto fail;
	}
	s->json = json_parse_document(path, text, len);
	free(text);
	if (!s->json)
		goto fail;
	if (!cJSON_IsObject(s->json)) {
		log_error("%s: a T1 spec must be a JSON object, not %s", path, json_type_name(s->json));
		goto fail;
	}
	if (load_configuration_space(&L, s->json) || load_kernel(&L, s->json) || load_other_sections(&L, s->json))
		goto fail;
	if (!s->name)
		s->name = s->kernel_name;
	return s;
fail:
	t1_free(s);
	return NULL;
}

void t1_free(struct t1_spec *s)
{
	if (!s)
		return;
	for (size_t k = 0; k < s->nconditions; k++) {
		free(s->conditions[k].field);
		pyexpr_free(s->conditions[k].expr);
	}
	for (int d = 0; d < 3; d++) {
		pyexpr_free(s->global_size[d]);
		pyexpr_free(s->local_size[d]);
	}
	pyexpr_free(s->shared_memory);
	for (size_t k = 0; k < s->ntensor_maps; k++) {
		for (size_t d = 0; d < T1_TENSOR_MAP_MAX_RANK; d++) {
			pyexpr_free(s->tensor_maps[k].dims[d]);
			pyexpr_free(s->tensor_maps[k].box[d]);
		}
		free(s->tensor_maps[k].field);
	}
	free(s->tensor_maps);
	for (size_t k = 0; k < s->nkernel_conditions; k++) {
		for (size_t c = 0; c < s->kernel_conditions[k].n; c++) {
			free(s->kernel_conditions[k].conditions[c].field);
			pyexpr_free(s->kernel_conditions[k].conditions[c].expr);
		}
		free(s->kernel_conditions[k].conditions);
	}
	free(s->kernel_conditions);
	for (size_t k = 0; k < s->nparams; k++) {
		for (size_t v = 0; s->params[k].values_json && v < s->params[k].nvalues; v++)
			free(s->params[k].values_json[v]);
		free(s->params[k].values_json);
	}
	free(s->conditions);
	free(s->params);
	free(s->names);
	free(s->kernel_path);
	free(s->kernel_dir);
	free(s->budget);
	free(s->path);
	cJSON_Delete(s->json);
	pyarena_free(s->arena);
	free(s);
}

uint64_t t1_cartesian_size(const struct t1_spec *s, int *saturated)
{
	uint64_t n = 1;
	*saturated = 0;
	for (size_t k = 0; k < s->nparams; k++) {
		if (__builtin_mul_overflow(n, (uint64_t)s->params[k].nvalues, &n)) {
			*saturated = 1;
			return UINT64_MAX;
		}
	}
	return n;
}

/* ---------------------------------------------------------------- the walk */

/* Parameters with a single value are bound before all others: that cannot change the order
 * of the product, and conditions that read such constants (MAX_THREADS, say) are then
 * checked as early as their other parameters allow. */
struct walk {
	const struct t1_spec *spec;
	size_t *order;	      /* order[level]: the parameter bound at that level */
	size_t nlevels;	      /* = nparams */
	size_t **checks;      /* checks[level]: conditions whose last parameter is bound there */
	size_t *nchecks;
	size_t *constant_checks; /* conditions that read no parameter, checked once */
	size_t nconstant_checks;
	uint64_t *below;      /* below[level]: points in the product of the levels after it */
	int *unconstrained;   /* unconstrained[level]: no condition is checked after it */
	struct pyval *values; /* the configuration being built, indexed like spec->names */
	size_t *indices;      /* indices[i]: position of values[i] in params[i].values */
	struct pyarena *scratch;
	const size_t *fixed;  /* fixed[k]: the only value index params[k] may take, or T1_FREE; may be NULL */
	t1_config_fn fn;      /* NULL when counting */
	void *ctx;
	uint64_t count;
	uint64_t limit;	      /* when counting: stop once count exceeds it */
	uint64_t tries, max_tries; /* values bound so far, and how many the walk may bind */
	int bounded;	      /* max_tries applies (a count always; an enumeration when asked) */
	int cut;	      /* an enumeration stopped at max_tries, short of the end */
	int saturated;
};

static void walk_init(struct walk *w, const struct t1_spec *s)
{
	memset(w, 0, sizeof(*w));
	/* Each walk has the whole budget: a listing is bounded, and the next one may run. */
	if (s->budget)
		pyexpr_budget_init(s->budget, "the spec", T1_LISTING_STEPS);
	w->spec = s;
	w->nlevels = s->nparams;
	w->order = xcalloc(s->nparams + 1, sizeof(*w->order));
	size_t *level_of = xcalloc(s->nparams + 1, sizeof(*level_of));
	size_t n = 0;
	for (int pass = 0; pass < 2; pass++)
		for (size_t k = 0; k < s->nparams; k++)
			if ((s->params[k].nvalues == 1) == (pass == 0)) {
				level_of[k] = n;
				w->order[n++] = k;
			}

	w->checks = xcalloc(s->nparams + 1, sizeof(*w->checks));
	w->nchecks = xcalloc(s->nparams + 1, sizeof(*w->nchecks));
	w->constant_checks = xcalloc(s->nconditions + 1, sizeof(*w->constant_checks));
	for (size_t c = 0; c < s->nconditions; c++) {
		const size_t *slots;
		size_t nslots = pyexpr_globals_used(s->conditions[c].expr, &slots);
		int bound = 0;
		size_t level = 0;
		for (size_t j = 0; j < nslots; j++) {
			if (slots[j] >= s->nparams)
				continue; /* ProblemSize is bound from the start */
			if (!bound || level_of[slots[j]] > level)
				level = level_of[slots[j]];
			bound = 1;
		}
		if (!bound) {
			w->constant_checks[w->nconstant_checks++] = c;
			continue;
		}
		w->checks[level] = xreallocarray(w->checks[level], w->nchecks[level] + 1, sizeof(**w->checks));
		w->checks[level][w->nchecks[level]++] = c;
	}
	free(level_of);

	w->below = xcalloc(s->nparams + 1, sizeof(*w->below));
	w->unconstrained = xcalloc(s->nparams + 1, sizeof(*w->unconstrained));
	uint64_t product = 1;
	int unconstrained = 1;
	for (size_t level = s->nparams; level-- > 0;) {
		w->below[level] = product;
		w->unconstrained[level] = unconstrained;
		size_t nvalues = s->params[w->order[level]].nvalues;
		if (__builtin_mul_overflow(product, (uint64_t)nvalues, &product))
			product = UINT64_MAX;
		if (w->nchecks[level])
			unconstrained = 0;
	}

	w->values = xcalloc(s->nnames, sizeof(*w->values));
	w->indices = xcalloc(s->nnames, sizeof(*w->indices));
	w->values[s->nparams] = s->problem_size;
	w->scratch = pyarena_new();
}

static void walk_release(struct walk *w)
{
	for (size_t level = 0; level <= w->nlevels; level++)
		free(w->checks[level]);
	free(w->checks);
	free(w->nchecks);
	free(w->constant_checks);
	free(w->order);
	free(w->below);
	free(w->unconstrained);
	free(w->values);
	free(w->indices);
	pyarena_free(w->scratch);
}

/* Appends " (with a=1, b=2)": the values a condition read, for messages. */
static void describe_inputs(struct strbuf *sb, const struct t1_spec *s, const struct pyexpr *e, const struct pyval *values)
{
	const size_t *slots;
	size_t nslots = pyexpr_globals_used(e, &slots);
	for (size_t j = 0; j < nslots; j++) {
		strbuf_addf(sb, "%s%s=", j ? ", " : " (with ", s->names[slots[j]]);
		pyval_repr(sb, &values[slots[j]]);
	}
	if (nslots)
		strbuf_addch(sb, ')');
}

/* Evaluates a condition, drawing on the spec's budget; returns 1 if it holds, 0 if not, -1
 * with *err filled. */
static int condition_holds(const struct t1_spec *s, const struct t1_condition *cond, const struct pyval *values,
			   struct pyarena *scratch, struct pyexpr_error *err)
{
	struct pyval result;
	if (pyexpr_eval_budgeted(cond->expr, values, scratch, s->budget, &result, err))
		return -1;
	int holds = pyval_truthy(&result);
	pyarena_reset(scratch);
	return holds;
}

static void condition_error(struct strbuf *sb, const struct t1_spec *s, const struct t1_condition *cond,
			    const struct pyval *values, const struct pyexpr_error *err)
{
	const struct pyexpr *e = cond->expr;
	strbuf_addf(sb, "%s: column %zu: %s in \"%s\"", cond->field, pyexpr_error_column(pyexpr_source(e), err),
		    err->message, pyexpr_source(e));
	describe_inputs(sb, s, e, values);
}

/* Evaluates the conditions listed; returns 1 if all hold, 0 if one does not, -1 after
 * reporting one that cannot be evaluated. */
static int conditions_hold(struct walk *w, const size_t *conds, size_t n)
{
	for (size_t k = 0; k < n; k++) {
		struct pyexpr_error err;
		const struct t1_condition *cond = &w->spec->conditions[conds[k]];
		int holds = condition_holds(w->spec, cond, w->values, w->scratch, &err);
		if (holds < 0) {
			struct strbuf msg;
			strbuf_init(&msg);
			condition_error(&msg, w->spec, cond, w->values, &err);
			log_error("%s: %s", w->spec->path, msg.buf);
			strbuf_release(&msg);
			return -1;
		}
		if (!holds)
			return 0;
	}
	return 1;
}

static void add_count(struct walk *w, uint64_t n)
{
	if (__builtin_add_overflow(w->count, n, &w->count)) {
		w->count = UINT64_MAX;
		w->saturated = 1;
	}
}

static int walk_level(struct walk *w, size_t level)
{
	const struct t1_param *p = &w->spec->params[w->order[level]];
	size_t fixed = w->fixed ? w->fixed[w->order[level]] : T1_FREE;
	for (size_t v = 0; v < p->nvalues; v++) {
		if (fixed != T1_FREE && v != fixed)
			continue;
		if (w->bounded && ++w->tries > w->max_tries) {
			if (w->fn)
				w->cut = 1;
			else /* sparse: counted as more than limit */
				w->count = w->limit + 1;
			return 1;
		}
		w->values[w->order[level]] = p->values[v];
		w->indices[w->order[level]] = v;
		int holds = conditions_hold(w, w->checks[level], w->nchecks[level]);
		if (holds < 0)
			return -1;
		if (!holds)
			continue;
		if (level + 1 == w->nlevels) {
			if (!w->fn) {
				add_count(w, 1);
				if (w->count > w->limit)
					return 1;
			} else {
				int rc = w->fn(w->ctx, w->values, w->indices);
				if (rc)
					return rc;
			}
		} else if (!w->fn && w->unconstrained[level]) {
			/* Nothing below is checked: every point of the subspace is valid. */
			if (w->below[level] == UINT64_MAX)
				w->saturated = 1;
			add_count(w, w->below[level]);
			if (w->count > w->limit)
				return 1;
		} else {
			int rc = walk_level(w, level + 1);
			if (rc)
				return rc;
		}
	}
	return 0;
}

static int walk_run(struct walk *w)
{
	int holds = conditions_hold(w, w->constant_checks, w->nconstant_checks);
	if (holds <= 0)
		return holds;
	if (w->nlevels == 0) {
		/* No parameters: the one empty configuration. */
		if (!w->fn) {
			add_count(w, 1);
			return 0;
		}
		return w->fn(w->ctx, w->values, w->indices);
	}
	return walk_level(w, 0);
}

int t1_enumerate(const struct t1_spec *s, t1_config_fn fn, void *ctx)
{
	struct walk w;
	walk_init(&w, s);
	w.fn = fn;
	w.ctx = ctx;
	int rc = walk_run(&w);
	walk_release(&w);
	return rc;
}

int t1_enumerate_bounded(const struct t1_spec *s, uint64_t max_tries, t1_config_fn fn, void *ctx, int *cut)
{
	struct walk w;
	walk_init(&w, s);
	w.fn = fn;
	w.ctx = ctx;
	w.bounded = 1;
	w.max_tries = max_tries;
	int rc = walk_run(&w);
	*cut = w.cut;
	walk_release(&w);
	return w.cut ? 0 : rc;
}

int t1_count(const struct t1_spec *s, uint64_t limit, uint64_t *count, int *saturated)
{
	struct walk w;
	walk_init(&w, s);
	w.limit = limit;
	w.bounded = 1;
	w.max_tries = limit > UINT64_MAX / T1_COUNT_TRIES ? UINT64_MAX : limit * T1_COUNT_TRIES;
	int rc = walk_run(&w);
	*count = w.count;
	*saturated = w.saturated;
	walk_release(&w);
	return rc < 0 ? -1 : 0; /* 1: stopped past the limit */
}

cJSON *t1_config_to_json(const struct t1_spec *s, const size_t *indices)
{
	cJSON *config = cJSON_CreateObject();
	if (!config)
		xalloc_die();
	for (size_t k = 0; k < s->nparams; k++)
		if (!cJSON_AddRawToObject(config, s->params[k].name, s->params[k].values_json[indices[k]]))
			xalloc_die();
	return config;
}

/* Python's == between a JSON scalar and a value; containers never match. */
static int json_equals_value(const cJSON *json, const struct pyval *v)
{
	struct pyval j;
	if (cJSON_IsBool(json))
		j = pyval_bool(cJSON_IsTrue(json));
	else if (is_integer(json) && fabs(json->valuedouble) <= (double)JSON_INT_LIMIT)
		j = pyval_int((int64_t)json->valuedouble);
	else if (cJSON_IsNumber(json))
		j = pyval_float(json->valuedouble);
	else if (cJSON_IsString(json))
		return v->kind == PY_STR && strcmp(v->u.s->bytes, json->valuestring) == 0;
	else
		return 0;
	return pyval_equal(&j, v);
}

int t1_value_index(const struct t1_spec *s, size_t k, const cJSON *value, size_t *index)
{
	const struct t1_param *p = &s->params[k];
	for (size_t v = 0; v < p->nvalues; v++) {
		if (json_equals_value(value, &p->values[v])) {
			*index = v;
			return 0;
		}
	}
	return -1;
}

void t1_bind(const struct t1_spec *s, const size_t *indices, struct pyval *values)
{
	for (size_t k = 0; k < s->nparams; k++)
		values[k] = s->params[k].values[indices[k]];
	values[s->nparams] = s->problem_size;
}

int t1_config_indices(const struct t1_spec *s, const cJSON *config, size_t *indices, size_t *missing)
{
	for (size_t k = 0; k < s->nparams; k++) {
		if (t1_value_index(s, k, cJSON_GetObjectItemCaseSensitive(config, s->params[k].name), &indices[k]) != 0) {
			if (missing)
				*missing = k;
			return -1;
		}
	}
	return 0;
}

int t1_bind_config(const struct t1_spec *s, const cJSON *config, struct pyval *values, size_t *missing)
{
	size_t *indices = xcalloc(s->nparams + 1, sizeof(*indices));
	int rc = t1_config_indices(s, config, indices, missing);
	if (rc == 0)
		t1_bind(s, indices, values);
	free(indices);
	return rc;
}

/* Checks conds[0..n) against values, as t1_check_conditions does (t1.h has the contract):
 * the spec's and a kernel's conditions read the same and fail with the same messages. */
static int check_list(const struct t1_spec *s, const struct t1_condition *conds, size_t n, const struct pyval *values,
		      struct strbuf *why)
{
	struct pyarena *scratch = pyarena_new();
	int rc = 0;
	for (size_t c = 0; c < n && rc == 0; c++) {
		struct pyexpr_error err;
		int holds = condition_holds(s, &conds[c], values, scratch, &err);
		if (holds < 0) {
			if (why)
				condition_error(why, s, &conds[c], values, &err);
			rc = 1;
		} else if (!holds) {
			if (why) {
				strbuf_addf(why, "%s does not hold: \"%s\"", conds[c].field, pyexpr_source(conds[c].expr));
				describe_inputs(why, s, conds[c].expr, values);
			}
			rc = 1;
		}
	}
	pyarena_free(scratch);
	return rc;
}

int t1_check_conditions(const struct t1_spec *s, const struct pyval *values, struct strbuf *why)
{
	return check_list(s, s->conditions, s->nconditions, values, why);
}

int t1_check_kernel_conditions(const struct t1_spec *s, const char *const *applied, size_t napplied,
			       const struct pyval *values, struct strbuf *why)
{
	/* the kernel's conditions: the latest applied entry's that states some, else the spec's */
	const struct t1_kernel_conditions *kc = NULL;
	for (size_t i = napplied; i-- > 0 && !kc;)
		for (size_t k = 0; k < s->nkernel_conditions && !kc; k++)
			if (s->kernel_conditions[k].name && strcmp(s->kernel_conditions[k].name, applied[i]) == 0)
				kc = &s->kernel_conditions[k];
	for (size_t k = 0; k < s->nkernel_conditions && !kc; k++)
		if (!s->kernel_conditions[k].name)
			kc = &s->kernel_conditions[k];
	return kc ? check_list(s, kc->conditions, kc->n, values, why) : 0;
}

struct first_config {
	const struct t1_spec *spec;
	size_t *indices;
};

static int take_first(void *ctx, const struct pyval *values, const size_t *indices)
{
	struct first_config *fc = ctx;
	(void)values;
	memcpy(fc->indices, indices, fc->spec->nparams * sizeof(*indices));
	return 1;
}

int t1_first_config(const struct t1_spec *s, const size_t *fixed, size_t *indices)
{
	struct first_config fc = {.spec = s, .indices = indices};
	struct walk w;
	walk_init(&w, s);
	w.fixed = fixed;
	w.fn = take_first;
	w.ctx = &fc;
	int rc = walk_run(&w);
	walk_release(&w);
	return rc;
}

/* Evaluates one GlobalSize or LocalSize part (absent means 1), or KernelGraph.SharedMemory,
 * into an integer from least up to 2**31 - 1. */
static int size_part(const struct t1_spec *s, const struct pyexpr *e, const char *field, int64_t least,
		     const struct pyval *values, struct pyarena *scratch, int64_t *out, struct strbuf *why)
{
	struct pyval v;
	struct pyexpr_error err;
	if (!e) {
		*out = 1;
		return 0;
	}
	if (pyexpr_eval(e, values, scratch, &v, &err)) {
		strbuf_addf(why, "%s: column %zu: %s in \"%s\"", field, pyexpr_error_column(pyexpr_source(e), &err),
			    err.message, pyexpr_source(e));
		describe_inputs(why, s, e, values);
		return -1;
	}
	if ((v.kind != PY_INT && v.kind != PY_BOOL) || v.u.i < least || v.u.i > INT32_MAX) {
		strbuf_addf(why, "%s: \"%s\" gives ", field, pyexpr_source(e));
		pyval_describe(why, &v);
		strbuf_addf(why, ", not %s integer below 2**31", least > 0 ? "a positive" : "a non-negative");
		describe_inputs(why, s, e, values);
		return -1;
	}
	*out = v.u.i;
	return 0;
}

int t1_launch_geometry(const struct t1_spec *s, const struct pyval *values, struct t1_launch *launch,
		       struct strbuf *why)
{
	static const char *const global_fields[] = {"KernelSpecification.GlobalSize.X", "KernelSpecification.GlobalSize.Y",
						    "KernelSpecification.GlobalSize.Z"};
	static const char *const local_fields[] = {"KernelSpecification.LocalSize.X", "KernelSpecification.LocalSize.Y",
						   "KernelSpecification.LocalSize.Z"};
	struct pyarena *scratch = pyarena_new();
	int rc = 0;
	for (int d = 0; d < 3 && rc == 0; d++) {
		int64_t global;
		rc = size_part(s, s->global_size[d], global_fields[d], 1, values, scratch, &global, why) ||
		     size_part(s, s->local_size[d], local_fields[d], 1, values, scratch, &launch->block[d], why);
		if (rc == 0)
			launch->grid[d] = s->global_size_type == T1_GLOBAL_OPENCL
						  ? (global + launch->block[d] - 1) / launch->block[d]
						  : global;
	}
	launch->shared_bytes = 0;
	if (rc == 0 && s->shared_memory)
		rc = size_part(s, s->shared_memory, "KernelGraph.SharedMemory", 0, values, scratch,
			       &launch->shared_bytes, why);
	pyarena_free(scratch);
	return rc ? -1 : 0;
}

int t1_tensor_map_eval(const struct t1_spec *s, const struct t1_tensor_map *m, const struct pyval *values,
		       size_t elem_bytes, uint64_t *dims, uint32_t *box, struct strbuf *why)
{
	struct pyarena *scratch = pyarena_new();
	int rc = 0;
	for (size_t d = 0; d < m->rank && rc == 0; d++) {
		char fd[300], fb[300];
		int64_t dim = 0, b = 0;
		snprintf(fd, sizeof(fd), "%s.Dims[%zu]", m->field, d);
		snprintf(fb, sizeof(fb), "%s.Box[%zu]", m->field, d);
		rc = size_part(s, m->dims[d], fd, 1, values, scratch, &dim, why) ||
		     size_part(s, m->box[d], fb, 1, values, scratch, &b, why);
		if (rc == 0 && (b > 256 || b > dim)) {
			strbuf_addf(why, "%s: \"%s\" gives %lld, more than %s", fb, pyexpr_source(m->box[d]), (long long)b,
				    b > 256 ? "256, the most a tensor map's box may span" : "the dimension's size");
			rc = -1;
		}
		dims[d] = (uint64_t)dim;
		box[d] = (uint32_t)b;
	}
	if (rc == 0 && (box[0] * elem_bytes) % 16 != 0) {
		strbuf_addf(why, "%s.Box[0]: %u elements of %zu bytes are not a multiple of 16 bytes", m->field, box[0],
			    elem_bytes);
		rc = -1;
	} else if (rc == 0 && m->swizzle && box[0] * elem_bytes > (size_t)m->swizzle) {
		strbuf_addf(why, "%s.Box[0]: %u elements of %zu bytes are more than Swizzle (%d bytes)", m->field, box[0],
			    elem_bytes, m->swizzle);
		rc = -1;
	}
	pyarena_free(scratch);
	return rc ? -1 : 0;
}

int t1_resolve_config(const struct t1_spec *spec, const cJSON *wanted, const cJSON *parent, size_t *indices,
			  cJSON *merged, struct strbuf *why)
{
	const cJSON *item;
	cJSON_ArrayForEach(item, wanted) {
		size_t k;
		for (k = 0; k < spec->nparams && strcmp(spec->params[k].name, item->string) != 0; k++)
			;
		if (k == spec->nparams) {
			strbuf_addf(why, "'%s' is not a tuning parameter of this kernel (its parameters:", item->string);
			for (k = 0; k < spec->nparams; k++)
				strbuf_addf(why, " %s", spec->params[k].name);
			strbuf_addch(why, ')');
			return 1;
		}
	}
	size_t *fixed = xcalloc(spec->nparams + 1, sizeof(*fixed));
	int any_free = 0, rc = 0;
	size_t start = why->len;
	/* Every value that is not among its Values is named, not only the first: a spec with
	 * several bad Defaults is then fixed in one go. */
	for (size_t k = 0; k < spec->nparams; k++) {
		const struct t1_param *p = &spec->params[k];
		const cJSON *value = cJSON_GetObjectItemCaseSensitive(wanted, p->name);
		const char *from = "candidate";
		if (!value) {
			value = cJSON_GetObjectItemCaseSensitive(parent, p->name);
			from = "parent";
		}
		if (!value) {
			value = p->default_value;
			from = "Default";
		}
		fixed[k] = T1_FREE;
		if (value)
			json_add(merged, p->name, cJSON_Duplicate(value, 1));
		if (!value) {
			any_free = 1;
		} else if (t1_value_index(spec, k, value, &fixed[k]) != 0) {
			char *text = json_text(value);
			if (why->len > start)
				strbuf_addstr(why, "; ");
			if (strcmp(from, "Default") == 0)
				strbuf_addf(why, "ConfigurationSpace.TuningParameters[%zu].Default: %s=%s is not one of its Values",
					    k, p->name, text);
			else
				strbuf_addf(why, "%s=%s (from the %s) is not one of the Values of ConfigurationSpace.TuningParameters[%zu]",
					    p->name, text, from, k);
			free(text);
			rc = 1;
		}
	}
	if (rc == 0 && any_free) {
		int found = t1_first_config(spec, fixed, indices);
		if (found <= 0) {
			strbuf_addstr(why, found < 0 ? "a condition cannot be evaluated (see above)"
						     : "no valid configuration has the values given:");
			for (size_t k = 0; found == 0 && k < spec->nparams; k++)
				if (fixed[k] != T1_FREE)
					strbuf_addf(why, " %s=%s", spec->params[k].name, spec->params[k].values_json[fixed[k]]);
			rc = 1;
		}
	} else if (rc == 0) {
		memcpy(indices, fixed, spec->nparams * sizeof(*indices));
		struct pyval *values = xcalloc(spec->nnames, sizeof(*values));
		t1_bind(spec, indices, values);
		rc = t1_check_conditions(spec, values, why);
		free(values);
	}
	free(fixed);
	return rc;
}
