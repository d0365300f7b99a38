/* rules.h (kg-propose): proposals that need nothing but the spec and the run: neighbouring
 * configurations, the spec's ready patches, and random valid configurations. */
#ifndef KG_PROPOSE_RULES_H
#define KG_PROPOSE_RULES_H

#include "common.h"

#include <stddef.h>
#include <stdint.h>

#include "context.h"

/* Appends to *list (of *n) the rule proposals for node, each accepted by context_accept (one
 * it refuses is reported at info level and counted in *dropped): for each parameter the
 * nearest valid value below and above the node's (among run->within's, when set), then each KernelGraph.Patches entry not yet
 * applied on the path, then `random` random valid configurations drawn from seed and the
 * node's state (a draw it refuses is drawn again). */
void rules_propose(struct run_info *run, const struct node_info *node, uint64_t seed, size_t random,
		   struct proposal **list, size_t *n, size_t *dropped);

/* Calls fn for up to want distinct valid configurations of spec drawn at random from *rng
 * (all of them, shuffled, when the space has fewer); fn returns nonzero to stop, or -1 to
 * refuse one (it does not count). Returns how many fn accepted, or -1 after reporting a
 * condition that cannot be evaluated. */
typedef int (*random_config_fn)(void *ctx, const size_t *indices);
long random_configs(const struct t1_spec *spec, uint64_t *rng, size_t want, random_config_fn fn, void *ctx);

#endif
