/* moves.c (kg-propose): names a change of configuration by the methods of the parameters it
 * changes, from the spec's KernelGraph.Methods or the parameters' names and values. */
#include "common.h"

#include <ctype.h>
#include <string.h>

#include "moves.h"

/* Name fragments and the method they mean, tried in order: the more specific first, so that
 * items_per_thread is work per thread before thread makes it a block size. */
static const struct {
	const char *fragment;
	const char *method;
} name_rules[] = {
	{"use_", "switch_algorithm"},	     {"enable_", "switch_algorithm"},
	{"algo", "switch_algorithm"},	     {"variant", "switch_algorithm"},
	{"stage", "change_pipeline_depth"},  {"pipe", "change_pipeline_depth"},
	{"prefetch", "change_pipeline_depth"}, {"buffer", "change_pipeline_depth"},
	{"unroll", "change_unrolling"},
	{"per_thread", "change_work_per_thread"}, {"per_block", "change_work_per_thread"},
	{"per_warp", "change_work_per_thread"}, {"items", "change_work_per_thread"},
	{"elements", "change_work_per_thread"}, {"work", "change_work_per_thread"},
	{"coarsen", "change_work_per_thread"}, {"tile_size", "change_work_per_thread"},
	{"vec", "change_vector_width"},	     {"width", "change_vector_width"},
	{"lanes", "change_vector_width"},
	{"group", "grouped_gemm_colmajor"},  {"swizzle", "grouped_gemm_colmajor"},
	{"raster", "grouped_gemm_colmajor"},
	{"block", "change_block_sizes"},     {"warp", "change_block_sizes"},
	{"thread", "change_block_sizes"},    {"tile", "change_block_sizes"},
	{"cta", "change_block_sizes"},	     {"dim", "change_block_sizes"},
};

/* A parameter that only turns something on or off: 0 and 1 (or false and true) its values. */
static int is_switch(const struct t1_param *p)
{
	if (p->nvalues != 2)
		return 0;
	for (size_t v = 0; v < 2; v++) {
		const struct pyval *x = &p->values[v];
		if (!((x->kind == PY_INT || x->kind == PY_BOOL) && (x->u.i == 0 || x->u.i == 1)))
			return 0;
	}
	return 1;
}

const char *param_method(const struct t1_spec *spec, size_t k)
{
	const struct t1_param *p = &spec->params[k];
	const cJSON *ext = cJSON_GetObjectItemCaseSensitive(spec->json, "KernelGraph");
	const char *given = json_string(cJSON_GetObjectItemCaseSensitive(ext, "Methods"), p->name);
	if (given)
		return given;
	if (is_switch(p))
		return "switch_algorithm";
	char name[128];
	size_t n = 0;
	for (; p->name[n] && n + 1 < sizeof(name); n++)
		name[n] = (char)tolower((unsigned char)p->name[n]);
	name[n] = '\0';
	for (size_t r = 0; r < ARRAY_SIZE(name_rules); r++)
		if (strstr(name, name_rules[r].fragment))
			return name_rules[r].method;
	return "retune_configuration";
}

const char *move_method(const struct t1_spec *spec, const cJSON *from, const cJSON *to)
{
	const char *method = NULL;
	for (size_t k = 0; k < spec->nparams; k++) {
		const cJSON *a = cJSON_GetObjectItemCaseSensitive(from, spec->params[k].name);
		const cJSON *b = cJSON_GetObjectItemCaseSensitive(to, spec->params[k].name);
		if (a && b && cJSON_Compare(a, b, 1))
			continue;
		const char *m = param_method(spec, k);
		if (method && strcmp(method, m) != 0)
			return "retune_configuration";
		method = m;
	}
	return method ? method : "retune_configuration";
}
