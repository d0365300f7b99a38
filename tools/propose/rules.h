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

/* Whether the configuration at indices satisfies the spec's conditions. */
int config_valid(const struct t1_spec *spec, const size_t *indices);

/* The valid configurations of spec when it has at most 200,000, in t1_enumerate's order:
 * returns their number; -2 when it has more (too many to list: they are drawn instead), -1
 * after reporting a condition that cannot be evaluated. *indices is the caller's to free. */
long listed_configs(const struct t1_spec *spec, size_t **indices);

/* listed_configs of run's space, made once per run and kept with it. */
long run_listing(struct run_info *run, const size_t **indices);

/* Calls fn for up to want distinct valid configurations of spec drawn at random from *rng
 * (all of them, shuffled, when the space has fewer): from listed, nlisted of them, as
 * listed_configs gave them, or from the Cartesian product when nlisted is -2. fn returns
 * nonzero to stop, or -1 to refuse one (it does not count). Returns how many fn accepted, or
 * -1 when nlisted is -1. */
typedef int (*random_config_fn)(void *ctx, const size_t *indices);
long random_configs(const struct t1_spec *spec, const size_t *listed, long nlisted, uint64_t *rng, size_t want,
		    random_config_fn fn, void *ctx);

#endif
