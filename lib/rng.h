/* rng.h: splitmix64, the one pseudo-random generator of kernelgraph: small, fast, and the
 * same stream on every machine, so seeded fills, bootstraps and searches reproduce exactly. */
#ifndef KG_RNG_H
#define KG_RNG_H

#include "common.h"

#include <stdint.h>

/* Advances *state and returns the next output (docs/search.md, T7d: seed 42 gives
 * 0xbdd732262feb6e95 first). */
static inline uint64_t rng_next(uint64_t *state)
{
	uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* A double uniform in [0, 1), from the top 53 bits. */
static inline double rng_uniform(uint64_t *state)
{
	return (double)(rng_next(state) >> 11) / 9007199254740992.0;
}

#endif
