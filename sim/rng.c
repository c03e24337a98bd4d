/* rng.c: xoshiro256** (Blackman and Vigna) and the samplers built on it. */
#include "rng.h"

#include <math.h>

void sim_rng_seed(sim_rng *r, uint64_t seed)
{
    for (int i = 0; i < 4; i++) { seed = sim_mix64(seed); r->s[i] = seed; }
}

double sim_rng_exp(sim_rng *r, double rate) { return -log1p(-sim_rng_uniform(r)) / rate; }

/* Marsaglia's polar method; the spare value is dropped to keep the stream simple. */
double sim_rng_normal(sim_rng *r)
{
    double u, v, s;
    do {
        u = 2 * sim_rng_uniform(r) - 1;
        v = 2 * sim_rng_uniform(r) - 1;
        s = u * u + v * v;
    } while (s >= 1 || s == 0);
    return u * sqrt(-2 * log(s) / s);
}

/* Marsaglia and Tsang (2000); shape < 1 through the boost x * U^(1/shape). */
double sim_rng_gamma(sim_rng *r, double shape)
{
    if (shape < 1) return sim_rng_gamma(r, shape + 1) * pow(sim_rng_uniform(r) + 1e-300, 1 / shape);
    double d = shape - 1.0 / 3, c = 1 / sqrt(9 * d);
    for (;;) {
        double x = sim_rng_normal(r), v = 1 + c * x;
        if (v <= 0) continue;
        v = v * v * v;
        double u = sim_rng_uniform(r);
        if (u < 1 - 0.0331 * x * x * x * x || log(u) < 0.5 * x * x + d * (1 - v + log(v))) return d * v;
    }
}
