/* hist.h: a fixed-size log-bucketed histogram for latency percentiles, so a run's memory does
 * not grow with the requests it simulates. Each power of two is split into 2048 linear
 * buckets (at most 0.1 % wide relative to their value) from 0.5 ns to 24 days; count, min and
 * max are exact, and the sum (hence the mean) is exact to 2^-64 s per value whatever the order
 * of the additions. */
#ifndef KVPLAN_SIM_HIST_H
#define KVPLAN_SIM_HIST_H

#include <stdint.h>

typedef struct {
    uint32_t *b;        /* bucket counts */
    uint64_t g[52];     /* counts per power of two (2048 buckets), so quantiles skip empty stretches */
    long count, zeros;  /* values <= the smallest bucket are counted in zeros */
    __int128 fix;       /* 2^-64 s: the exact sum of the values' fixed-point forms (see sim_hist_sum) */
    double big;         /* s: the sum of values too large for fix (none in any real run) */
    double min, max;
} sim_hist;

int sim_hist_init(sim_hist *h);
void sim_hist_free(sim_hist *h);
void sim_hist_add(sim_hist *h, double v);
/* The same as n calls of sim_hist_add(h, v), bit for bit, in O(1). */
void sim_hist_add_n(sim_hist *h, double v, long n);
/* The sum of the values added: each value is taken as a multiple of 2^-64 s (truncated toward
 * zero, an absolute error below 5.5e-20 s per value) and those are summed exactly, so the sum
 * does not depend on the order or grouping of the additions; the one rounding is the final
 * conversion to double (half an ulp). Values of 2^40 s or more are summed as doubles. */
double sim_hist_sum(const sim_hist *h);
/* The q-quantile (0..1), interpolated within its bucket and clamped to [min, max]. */
double sim_hist_quantile(const sim_hist *h, double q);
/* sim_hist_quantile for each of n quantiles q[] given in ascending order, into out[], in one walk
 * over the buckets: the same values, bit for bit. */
void sim_hist_quantiles(const sim_hist *h, const double *q, int n, double *out);
/* Relative half-width of a bucket: the quantile's worst-case relative error. */
double sim_hist_resolution(void);

#endif
