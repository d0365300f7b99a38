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
#include "trace.h"
#include "xalloc.h"

int step_save(struct step *s)
{
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

void end_rollout(struct graph *g, const char *why, int catching_up)
{
	struct rollout *r = &g->rollout;
	if (!r->active)
		return;
	mcgs_playout(&g->g, 0, r->path, r->len, 1);
	if (!catching_up) {
		/* a reward is log2 of a speedup */
		char *text = xasprintf("the rollout from here ended (%s) after %ld expansions, best %.2fx", why, r->step,
				       exp2(r->best));
		trace_note(g, g->iter, r->node, text);
		free(text);
	}
	free(r->path);
	memset(r, 0, sizeof(*r));
}

int is_empty_expansion(const cJSON *record)
{
	const char *op = json_string(record, "op");
	const char *status = json_string(cJSON_GetObjectItemCaseSensitive(record, "propose"), "status");
	return op && strcmp(op, "expand") == 0 && status && strcmp(status, "empty") == 0;
}
