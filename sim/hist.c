/* hist.c: log-bucketed histogram (see hist.h). */
#include "hist.h"

#include <math.h>
#include <stdlib.h>

#define LO 1e-9
#define HI 1e6
#define RATIO 1.001      /* bucket i covers [LO * RATIO^i, LO * RATIO^(i+1)) */
#define NB 34557         /* ceil(log(HI / LO) / log(RATIO)) */

int sim_hist_init(sim_hist *h)
{
    h->b = calloc(NB, sizeof *h->b);
    h->count = h->zeros = 0;
    h->sum = 0;
    h->min = INFINITY;
    h->max = -INFINITY;
    return h->b ? 0 : -1;
}

void sim_hist_free(sim_hist *h) { free(h->b); h->b = NULL; }

double sim_hist_resolution(void) { return (RATIO - 1) / 2; }

void sim_hist_add(sim_hist *h, double v)
{
    h->count++;
    h->sum += v;
    if (v < h->min) h->min = v;
    if (v > h->max) h->max = v;
    if (!(v > LO)) { h->zeros++; return; }
    int i = (int)(log(v / LO) / log(RATIO));
    if (i >= NB) i = NB - 1;
    h->b[i]++;
}

double sim_hist_quantile(const sim_hist *h, double q)
{
    if (h->count == 0) return NAN;
    double target = q * (double)(h->count - 1);   /* rank of the wanted value, 0-based */
    if (target < h->zeros) return h->min;
    double seen = (double)h->zeros;
    for (int i = 0; i < NB; i++) {
        if (!h->b[i]) continue;
        if (seen + h->b[i] > target) {
            double lo = LO * pow(RATIO, i), hi = lo * RATIO;
            double frac = (target - seen + 0.5) / h->b[i];
            double v = lo * pow(hi / lo, frac);
            return v < h->min ? h->min : v > h->max ? h->max : v;
        }
        seen += h->b[i];
    }
    return h->max;
}
