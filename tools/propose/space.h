/* space.h (kg-propose): a spec's configuration space as the proposers walk it (the rules, the
 * model, --random): validity, the listing of a small space, random valid draws. */
#ifndef KG_PROPOSE_SPACE_H
#define KG_PROPOSE_SPACE_H

#include "common.h"

#include <stddef.h>
#include <stdint.h>

#include "context.h"
#include "t1.h"

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
