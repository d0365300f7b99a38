/* regraph.c: reads regraph.json, checked, and gives the statistics of one transition,
 * backing off to the target's overall frequency when the transition was never seen. */
#include "common.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fileio.h"
#include "log.h"
#include "regraph.h"
#include "xalloc.h"

/* A member regraph_load checks. */
struct regraph_field {
	const char *key;
	int number;   /* a number, else a string */
	int optional; /* may be absent or null (success_mean: the policy in regraph.h) */
};

/* What is wrong with member key of item (NULL when nothing): a string, or a number; optional
 * ones may also be absent or null. */
static const char *field_problem(const cJSON *item, const char *key, int number, int optional)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(item, key);
	if (optional && (!v || cJSON_IsNull(v)))
		return NULL;
	if (number)
		return cJSON_IsNumber(v) ? NULL : "must be a number";
	return cJSON_IsString(v) ? NULL : "must be a string";
}

/* Checks each member of doc's array name against fields; reports the first problem. */
static int check_members(const char *path, const cJSON *doc, const char *name, const struct regraph_field *fields, size_t n)
{
	int i = 0;
	const cJSON *item;
	cJSON_ArrayForEach(item, cJSON_GetObjectItemCaseSensitive(doc, name)) {
		for (size_t k = 0; k < n; k++) {
			const char *problem = field_problem(item, fields[k].key, fields[k].number, fields[k].optional);
			if (problem)
				return log_error("%s: %s[%d].%s: %s", path, name, i, fields[k].key, problem);
		}
		i++;
	}
	return 0;
}

cJSON *regraph_load(const char *path, int *status)
{
	static const struct regraph_field node_fields[] = {{"method", 0, 0}, {"frequency", 1, 0}};
	static const struct regraph_field edge_fields[] = {
		{"from", 0, 0}, {"to", 0, 0}, {"probability", 1, 0}, {"success_mean", 1, 1}};
	size_t len;
	char *text = file_read_all(path, &len);
	if (!text) {
		log_error("cannot read '%s':", path);
		*status = KG_EXIT_USAGE;
		return NULL;
	}
	cJSON *doc = json_parse_document(path, text, len);
	free(text);
	*status = KG_EXIT_INPUT;
	if (!doc)
		return NULL;
	int bad = 0;
	if (!cJSON_IsArray(cJSON_GetObjectItemCaseSensitive(doc, "nodes")) || !cJSON_IsArray(cJSON_GetObjectItemCaseSensitive(doc, "edges")))
		bad = log_error("%s: must have \"nodes\" and \"edges\" arrays (kg-regraph build writes it)", path);
	else
		bad = check_members(path, doc, "nodes", node_fields, ARRAY_SIZE(node_fields)) ||
		      check_members(path, doc, "edges", edge_fields, ARRAY_SIZE(edge_fields));
	if (bad) {
		cJSON_Delete(doc);
		return NULL;
	}
	*status = KG_EXIT_OK;
	return doc;
}

static const cJSON *find_member(const cJSON *array, const char *key, const char *value, const char *key2, const char *value2)
{
	const cJSON *item;
	cJSON_ArrayForEach(item, array) {
		const char *a = json_string(item, key), *b = key2 ? json_string(item, key2) : NULL;
		if (a && strcmp(a, value) == 0 && (!key2 || (b && strcmp(b, value2) == 0)))
			return item;
	}
	return NULL;
}

/* The Beta prior's mean: what the success of a transition is when nothing is known of it. */
static double prior_success(const cJSON *doc)
{
	const cJSON *params = cJSON_GetObjectItemCaseSensitive(doc, "parameters");
	double a0 = json_number(params, "alpha0", 1), b0 = json_number(params, "beta0", 1);
	return a0 + b0 > 0 ? a0 / (a0 + b0) : 0.5;
}

static void seen_transition(const cJSON *doc, const cJSON *e, struct regraph_transition *t)
{
	*t = (struct regraph_transition){.to = json_string(e, "to"), .seen = 1, .probability = json_number(e, "probability", 0),
					 .success = json_number(e, "success_mean", prior_success(doc)),
					 .count = json_number(e, "count", 0), .mean_reward = json_number(e, "mean_reward", NAN)};
}

int regraph_transition(const cJSON *doc, const char *from, const char *to, struct regraph_transition *t)
{
	const cJSON *nodes = cJSON_GetObjectItemCaseSensitive(doc, "nodes");
	const cJSON *target = find_member(nodes, "method", to, NULL, NULL);
	double frequency = json_number(target, "frequency", 0);
	if (frequency <= 0)
		return -1;
	const cJSON *e = find_member(cJSON_GetObjectItemCaseSensitive(doc, "edges"), "from", from, "to", to);
	if (e) {
		seen_transition(doc, e, t);
		return 0;
	}
	const cJSON *params = cJSON_GetObjectItemCaseSensitive(doc, "parameters");
	double lambda = json_number(params, "lambda", 4);
	double out_weight = json_number(find_member(nodes, "method", from, NULL, NULL), "out_weight", 0);
	*t = (struct regraph_transition){.to = json_string(target, "method"), .probability = lambda * frequency / (out_weight + lambda),
					 .success = prior_success(doc), .mean_reward = NAN};
	return 0;
}

static int by_promise(const void *a, const void *b)
{
	const struct regraph_transition *x = a, *y = b;
	double px = x->probability * x->success, py = y->probability * y->success;
	return px > py ? -1 : px < py ? 1 : strcmp(x->to, y->to);
}

void regraph_sort(struct regraph_transition *list, size_t n)
{
	if (n)
		qsort(list, n, sizeof(*list), by_promise);
}

size_t regraph_seen_from(const cJSON *doc, const char *from, size_t top, struct regraph_transition **list)
{
	const cJSON *edges = cJSON_GetObjectItemCaseSensitive(doc, "edges"), *e;
	size_t n = 0;
	*list = NULL;
	cJSON_ArrayForEach(e, edges) {
		const char *a = json_string(e, "from");
		if (!a || !json_string(e, "to") || strcmp(a, from) != 0)
			continue;
		*list = xreallocarray(*list, n + 1, sizeof(**list));
		seen_transition(doc, e, &(*list)[n++]);
	}
	regraph_sort(*list, n);
	return n < top ? n : top;
}
