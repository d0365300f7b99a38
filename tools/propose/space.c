/* space.c (kg-propose): a spec's configuration space as the proposers walk it: whether a
 * configuration is valid, the valid ones listed (a small space), and random valid draws. */
#include "common.h"

#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "rng.h"
#include "space.h"
#include "xalloc.h"

/* Spaces up to this many valid configurations are listed whole for sampling, so that a
 * draw never repeats and a small space is sampled exhaustively. */
#define LISTED_MAX 200000
/* When random draws find no valid configuration of a space too large to list (its valid ones
 * too rare among its points), the space is walked for them, binding at most this many values
 * (about 5 s): a sparse but valid space is never reported empty while a walk can list it. */
#define WALK_MAX_TRIES 64000000

int config_valid(const struct t1_spec *spec, const size_t *indices)
{
	struct pyval *values = xcalloc(spec->nnames, sizeof(*values));
	struct strbuf why;
	strbuf_init(&why);
	t1_bind(spec, indices, values);
	int ok = t1_check_conditions(spec, values, &why) == 0;
	strbuf_release(&why);
	free(values);
	return ok;
}

struct listing {
	size_t nparams;
	size_t *indices; /* count x nparams */
	size_t count;
};

static int list_config(void *ctx, const struct pyval *values, const size_t *indices)
{
	struct listing *l = ctx;
	(void)values;
	l->indices = xreallocarray(l->indices, (l->count + 1) * (l->nparams + 1), sizeof(*l->indices));
	memcpy(l->indices + l->count * l->nparams, indices, l->nparams * sizeof(*indices));
	l->count++;
	return 0;
}

/* Every valid configuration of spec, n x nparams value indices into *indices (the caller's to
 * free), in t1_enumerate's order. Returns n, or -1 after reporting a condition that cannot be
 * evaluated. */
static long valid_configs(const struct t1_spec *spec, size_t **indices)
{
	struct listing l = {.nparams = spec->nparams};
	if (t1_enumerate(spec, list_config, &l) < 0) {
		free(l.indices);
		*indices = NULL;
		return -1;
	}
	*indices = l.indices;
	return (long)l.count;
}

long listed_configs(const struct t1_spec *spec, size_t **indices)
{
	uint64_t count;
	int saturated;
	*indices = NULL;
	if (t1_count(spec, LISTED_MAX, &count, &saturated) != 0)
		return -1;
	return !saturated && count <= LISTED_MAX ? valid_configs(spec, indices) : -2;
}

long run_listing(struct run_info *run, const size_t **indices)
{
	if (!run->listing_made) {
		run->nlisting = listed_configs(run->run.spec, &run->listing);
		run->listing_made = 1;
	}
	*indices = run->listing;
	return run->nlisting;
}

/* random_configs' fallback after tries draws found nothing valid: lists the valid
 * configurations by a walk of at most WALK_MAX_TRIES values and draws from those, saying so. */
static long walked_configs(const struct t1_spec *spec, size_t tries, uint64_t *rng, size_t want, random_config_fn fn,
			   void *ctx)
{
	struct listing l = {.nparams = spec->nparams};
	int cut;
	if (t1_enumerate_bounded(spec, WALK_MAX_TRIES, list_config, &l, &cut) < 0) {
		free(l.indices);
		return -1;
	}
	if (l.count == 0 && cut)
		log_warn("%s: ConfigurationSpace: %zu random draws found no valid configuration, nor did a walk of its "
			 "first %d values", spec->path, tries, WALK_MAX_TRIES);
	else if (l.count)
		log_warn("%s: ConfigurationSpace: %zu random draws found no valid configuration (a sparse space); "
			 "drawing from the %zu a walk of %s listed", spec->path, tries, l.count,
			 cut ? "part of it" : "the whole space");
	long accepted = l.count ? random_configs(spec, l.indices, (long)l.count, rng, want, fn, ctx) : 0;
	free(l.indices);
	return accepted;
}

long random_configs(const struct t1_spec *spec, const size_t *listed, long nlisted, uint64_t *rng, size_t want,
		    random_config_fn fn, void *ctx)
{
	long accepted = 0;
	if (nlisted == -1)
		return -1;
	if (nlisted >= 0) {
		size_t *order = xcalloc((size_t)nlisted + 1, sizeof(*order));
		for (size_t i = 0; i < (size_t)nlisted; i++)
			order[i] = i;
		/* Fisher-Yates on the configurations' numbers, drawn as it goes: each prefix is a
		 * uniform sample without repeats. */
		for (size_t i = 0; i < (size_t)nlisted && (size_t)accepted < want; i++) {
			size_t j = i + (size_t)(rng_uniform(rng) * (double)((size_t)nlisted - i)), t = order[i];
			order[i] = order[j];
			order[j] = t;
			int rc = fn(ctx, listed + order[i] * spec->nparams);
			if (rc == 0)
				accepted++;
			else if (rc > 0)
				break;
		}
		free(order);
		return accepted;
	}
	/* A large space: uniform points of the Cartesian product, kept when valid. */
	size_t *indices = xcalloc(spec->nparams + 1, sizeof(*indices)), tries;
	for (tries = 0; tries < 1000 * want && (size_t)accepted < want; tries++) {
		for (size_t k = 0; k < spec->nparams; k++)
			indices[k] = (size_t)(rng_uniform(rng) * (double)spec->params[k].nvalues);
		if (!config_valid(spec, indices))
			continue;
		int rc = fn(ctx, indices);
		if (rc == 0)
			accepted++;
		else if (rc > 0)
			break;
	}
	free(indices);
	if (accepted == 0 && want > 0 && tries >= 1000 * want)
		return walked_configs(spec, tries, rng, want, fn, ctx);
	return accepted;
}
