/* rng.h: deterministic random numbers (xoshiro256**, seeded by splitmix64) and the
 * distributions the workload draws from. Same seed, same stream, on every platform. */
#ifndef KVPLAN_SIM_RNG_H
#define KVPLAN_SIM_RNG_H

#include <stdint.h>

typedef struct { uint64_t s[4]; } sim_rng;

void sim_rng_seed(sim_rng *r, uint64_t seed);

/* Inline: the workload draws several a request (a length's normal takes two or more). */
static inline uint64_t sim_rng_rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

static inline uint64_t sim_rng_next(sim_rng *r)
{
    uint64_t *s = r->s, out = sim_rng_rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
    s[2] ^= s[0]; s[3] ^= s[1]; s[1] ^= s[2]; s[0] ^= s[3]; s[2] ^= t; s[3] = sim_rng_rotl(s[3], 45);
    return out;
}

static inline double sim_rng_uniform(sim_rng *r) { return (double)(sim_rng_next(r) >> 11) * 0x1.0p-53; }   /* [0, 1) */
double sim_rng_exp(sim_rng *r, double rate);        /* mean 1/rate */
double sim_rng_normal(sim_rng *r);                  /* standard normal */
double sim_rng_gamma(sim_rng *r, double shape);     /* scale 1 */

/* splitmix64's finaliser; inline, as the prefix cache's block hash applies it per token. */
static inline uint64_t sim_mix64(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

#endif
