/* regraph.c: reads regraph.json, checked, and gives the statistics of one transition,
 * backing off to the target's overall frequency when the transition was never seen. */
#include "common.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fileio.h"
#include "log.h"
#include "regraph.h"

cJSON *regraph_load(const char *path, int *status)
{
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
	const char *problem = NULL;
	int i = 0;
	const cJSON *item;
	if (!cJSON_IsArray(cJSON_GetObjectItemCaseSensitive(doc, "nodes")) || !cJSON_IsArray(cJSON_GetObjectItemCaseSensitive(doc, "edges")))
		problem = "must have \"nodes\" and \"edges\" arrays (kg-regraph build writes it)";
	cJSON_ArrayForEach(item, cJSON_GetObjectItemCaseSensitive(doc, "nodes")) {
		if (!problem && (!json_string(item, "method") || isnan(json_number(item, "frequency", NAN)))) {
			log_error("%s: nodes[%d]: needs a method and a frequency", path, i);
			problem = "";
		}
		i++;
	}
	i = 0;
	cJSON_ArrayForEach(item, cJSON_GetObjectItemCaseSensitive(doc, "edges")) {
		if (!problem && (!json_string(item, "from") || !json_string(item, "to") ||
				 isnan(json_number(item, "probability", NAN)) || isnan(json_number(item, "success_mean", NAN)))) {
			log_error("%s: edges[%d]: needs from, to, probability and success_mean", path, i);
			problem = "";
		}
		i++;
	}
	if (problem) {
		if (*problem)
			log_error("%s: %s", path, problem);
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

int regraph_transition(const cJSON *doc, const char *from, const char *to, struct regraph_transition *t)
{
	const cJSON *nodes = cJSON_GetObjectItemCaseSensitive(doc, "nodes");
	const cJSON *target = find_member(nodes, "method", to, NULL, NULL);
	double frequency = json_number(target, "frequency", 0);
	if (frequency <= 0)
		return -1;
	const cJSON *e = find_member(cJSON_GetObjectItemCaseSensitive(doc, "edges"), "from", from, "to", to);
	if (e) {
		*t = (struct regraph_transition){.seen = 1, .probability = json_number(e, "probability", 0),
						 .success = json_number(e, "success_mean", 0), .count = json_number(e, "count", 0),
						 .mean_reward = json_number(e, "mean_reward", NAN)};
		return 0;
	}
	const cJSON *params = cJSON_GetObjectItemCaseSensitive(doc, "parameters");
	double lambda = json_number(params, "lambda", 4), a0 = json_number(params, "alpha0", 1), b0 = json_number(params, "beta0", 1);
	double out_weight = json_number(find_member(nodes, "method", from, NULL, NULL), "out_weight", 0);
	*t = (struct regraph_transition){.probability = lambda * frequency / (out_weight + lambda),
					 .success = a0 + b0 > 0 ? a0 / (a0 + b0) : 0.5, .mean_reward = NAN};
	return 0;
}
