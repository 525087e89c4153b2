/*
 * A small deterministic random source for tests, benchmarks and the evaluation
 * (splitmix64): the same seed gives the same sequence on every machine and build, so a
 * seeded scenario is reproducible. The caller owns the state.
 */
#ifndef FS_TEST_RNG_H
#define FS_TEST_RNG_H

#include <math.h>
#include <stdint.h>

/** splitmix64's output function: a bijection that scatters nearby inputs. */
static inline uint64_t
fs_rng_mix(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/** Uniform in [0, 1). */
static inline double
fs_rng_uniform(uint64_t *state)
{
    return (double)(fs_rng_mix(*state += 0x9e3779b97f4a7c15ULL) >> 11) / 9007199254740992.0;
}

/** A state for stream `stream` of seed `seed`. Seeds must not be spaced by splitmix's
 *  increment: a state of seed * increment would make seed s + 1's sequence seed s's shifted
 *  by one draw, and a run of seeds nearly one scenario. Mixed, they are unrelated. */
static inline uint64_t
fs_rng_seed(uint64_t seed, uint64_t stream)
{
    return fs_rng_mix(seed * 0x9e3779b97f4a7c15ULL + stream);
}

/** Standard normal (Box-Muller, one of the pair). */
static inline double
fs_rng_gauss(uint64_t *state)
{
    double u = fs_rng_uniform(state), v = fs_rng_uniform(state);
    return sqrt(-2 * log(u + 1e-300)) * cos(2 * M_PI * v);
}

#endif
