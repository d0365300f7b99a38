/* rules.h (kg-propose): proposals that need nothing but the spec and the run: neighbouring
 * configurations, the spec's ready patches, and random valid configurations. */
#ifndef KG_PROPOSE_RULES_H
#define KG_PROPOSE_RULES_H

#include "common.h"

#include <stddef.h>
#include <stdint.h>

#include "context.h"
#include "model.h"

struct rules_settings {
	uint64_t seed;	/* --seed, with the node's state: the random draws */
	size_t random;	/* --rules-random: random configurations per expansion */
	struct model_settings model;
	size_t children; /* the expand record's "children": the most proposed (0: no cap) */
};

/* Appends to *list (of *n) the rule proposals for node, each accepted by context_accept (one
 * it refuses is reported at info level and counted in *dropped): for each parameter the
 * nearest valid value below and above the node's (among run->within's, when set), then each
 * KernelGraph.Patches entry not yet applied on the path (once the run tried it
 * elsewhere, only at the incumbent), then settings->random random valid
 * configurations (a draw it refuses is drawn again), then the model's picks (model.h). With
 * a model, every configuration move gets the model's prior and a weak one is dropped (counted
 * in *dropped); without one yet, at least settings->model.initial - 1 random ones are drawn
 * (the initial design), and with a history (--history) the history's best go out with them. The proposals come most promising first (at the run's incumbent,
 * once the run measured model.initial configurations, its best neighbour first), at most
 * settings->children of them when it is set (but the whole initial design); *left_out counts
 * those that go. */
void rules_propose(struct run_info *run, const struct node_info *node, const struct rules_settings *settings,
		   struct proposal **list, size_t *n, size_t *dropped, size_t *left_out);

#endif
