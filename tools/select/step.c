/* step.c (kg-select): what the picker (pick.c) and the learner (update.c) share (see step.h):
 * the timed save, and what either does with the graph's rollout and records. */
#include "common.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "jsonl.h"
#include "mcgs.h"
#include "snapshot.h"
#include "step.h"
#include "xalloc.h"

int step_save(struct step *s)
{
	if (s->g->dry_run) {
		s->g->dry_run->saves++;
		return 0;
	}
	double t0 = monotonic_ms();
	int rc = snapshot_save(s->snapshot, s->g);
	s->save_ms += monotonic_ms() - t0;
	return rc;
}

const char *last_method(const struct graph *g, size_t node)
{
	const cJSON *m = graph_node_methods(g, node);
	int n = cJSON_GetArraySize(m);
	const cJSON *last = n > 0 ? cJSON_GetArrayItem(m, n - 1) : NULL;
	return cJSON_IsString(last) ? last->valuestring : "init";
}

void end_rollout(struct graph *g)
{
	struct rollout *r = &g->rollout;
	if (!r->active)
		return;
	mcgs_playout(&g->g, 0, r->path, r->len, 1);
	free(r->path);
	memset(r, 0, sizeof(*r));
}

const char *method_of(const cJSON *record)
{
	const cJSON *method = cJSON_GetObjectItemCaseSensitive(record, "method");
	const char *canonical = json_string(method, "canonical");
	if (canonical)
		return canonical;
	const char *named = json_string(cJSON_GetObjectItemCaseSensitive(record, "candidate"), "method");
	return named ? named : "";
}

char *node_problem(const struct graph *g, double id, const char *state, size_t *node)
{
	if (id < 0 || id >= (double)g->g.nnodes || floor(id) != id)
		return xasprintf("node_id: %g is not a node of the graph", id);
	*node = (size_t)id;
	if (state && strcmp(graph_node_state(g, *node), state) != 0)
		return xasprintf("node: %s is not the state of node %zu", state, *node);
	return NULL;
}

char *edge_problem(const struct graph *g, double id, size_t from, int integral, size_t *edge)
{
	if (id < 0 || id >= (double)g->g.nedges || (integral && floor(id) != id) || g->g.edges[(size_t)id].from != from)
		return xasprintf("edge: %g is not an edge out of node %zu", id, from);
	*edge = (size_t)id;
	return NULL;
}

long path_edges(const struct graph *g, const cJSON *record, size_t node, int integral, size_t **edges)
{
	const cJSON *list = cJSON_GetObjectItemCaseSensitive(record, "path_edges"), *item;
	size_t n = 0, at = 0;
	*edges = xcalloc((size_t)cJSON_GetArraySize(list) + 1, sizeof(**edges));
	if (integral && !cJSON_IsArray(list))
		return -1;
	cJSON_ArrayForEach(item, list) {
		double e = cJSON_IsNumber(item) ? item->valuedouble : -1;
		if (e < 0 || e >= (double)g->g.nedges || (integral && floor(e) != e) || g->g.edges[(size_t)e].from != at ||
		    g->g.edges[(size_t)e].to == MCGS_NONE)
			return -1;
		(*edges)[n++] = (size_t)e;
		at = g->g.edges[(size_t)e].to;
	}
	return at == node ? (long)n : -1;
}
