/* hist.h: a fixed-size log-bucketed histogram for latency percentiles, so a run's memory does
 * not grow with the requests it simulates. Each power of two is split into 2048 linear
 * buckets (at most 0.1 % wide relative to their value) from 0.5 ns to 24 days; count, mean,
 * min and max are exact. */
#ifndef KVPLAN_SIM_HIST_H
#define KVPLAN_SIM_HIST_H

#include <stdint.h>

typedef struct {
    uint32_t *b;        /* bucket counts */
    long count, zeros;  /* values <= the smallest bucket are counted in zeros */
    double sum, min, max;
} sim_hist;

int sim_hist_init(sim_hist *h);
void sim_hist_free(sim_hist *h);
void sim_hist_add(sim_hist *h, double v);
/* The same as n calls of sim_hist_add(h, v), bit for bit (the sum is accumulated n times). */
void sim_hist_add_n(sim_hist *h, double v, long n);
/* The q-quantile (0..1), interpolated within its bucket and clamped to [min, max]. */
double sim_hist_quantile(const sim_hist *h, double q);
/* Relative half-width of a bucket: the quantile's worst-case relative error. */
double sim_hist_resolution(void);

#endif
