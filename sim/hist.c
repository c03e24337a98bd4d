/* hist.c: log-bucketed histogram (see hist.h), indexed HdrHistogram-style from the double's
 * binary exponent and the top bits of its mantissa, so adding a value costs no logarithm. */
#include "hist.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define SUB SIM_HIST_SUB
#define EMIN SIM_HIST_EMIN
#define EMAX SIM_HIST_EMAX
#define NB SIM_HIST_NB
_Static_assert(sizeof ((sim_hist *)0)->g / sizeof(uint64_t) == EMAX - EMIN, "one group count per power of two");
_Static_assert(EMAX - EMIN <= 64, "one bit of z per power of two");

int sim_hist_init(sim_hist *h)
{
    h->b = malloc(NB * sizeof *h->b);   /* zeroed a power of two at a time (sim_hist_touch_) */
    h->z = 0;
    h->count = h->zeros = 0;
    memset(h->g, 0, sizeof h->g);
    h->fix = 0;
    h->big = 0;
    h->min = INFINITY;
    h->max = -INFINITY;
    return h->b ? 0 : -1;
}

void sim_hist_free(sim_hist *h) { free(h->b); h->b = NULL; }

/* Half the widest bucket's width relative to its value: the quantile's worst relative error. */
double sim_hist_resolution(void) { return 1.0 / SUB; }

double sim_hist_sum(const sim_hist *h)
{
    return (double)h->fix * 0x1p-64 + h->big;
}

/* Lower edge of bucket i: (1 + sub / SUB) * 2^(i / SUB + EMIN). */
static double edge(long i)
{
    return ldexp(1.0 + (double)(i % SUB) / SUB, (int)(i / SUB) + EMIN);
}

/* The bucket of the smallest positive value: buckets below it are empty. */
static long first_bucket(const sim_hist *h)
{
    if (!(h->min > 0)) return 0;
    uint64_t u;
    memcpy(&u, &h->min, sizeof u);
    long E = (long)((u >> 52) & 0x7ff) - 1023;
    if (E < EMIN) return 0;
    return E >= EMAX - 1 ? NB - 1 : (E - EMIN) * SUB + (long)((u >> 41) & (SUB - 1));
}

void sim_hist_quantiles(const sim_hist *h, const double *q, int n, double *out)
{
    /* The quantiles the walk answers, in q's (ascending) order; the rest are settled first. */
    double target[16];
    int idx[16], m = 0;
    for (int k = 0; k < n; k++) {
        if (h->count == 0) { out[k] = NAN; continue; }
        if (q[k] <= 0) { out[k] = h->min; continue; }   /* the extremes are kept exactly */
        if (q[k] >= 1) { out[k] = h->max; continue; }
        double t = q[k] * (double)(h->count - 1);   /* rank of the wanted value, 0-based */
        if (t < h->zeros) { out[k] = h->min; continue; }
        if (m == 16) { sim_hist_quantiles(h, &q[k], 1, &out[k]); continue; }   /* beyond the scratch: alone */
        target[m] = t;
        idx[m++] = k;
    }
    /* One walk for all of them, from min's bucket (those below are empty), skipping whole powers
     * of two that hold no target (every power of two without a value among them: its buckets
     * are never read, so they need no zeroing). Counts are integers, exact in a double, so `seen` (and with it
     * every result) is the same however the walk groups them. */
    double seen = (double)h->zeros;
    int j = 0;
    for (long i = first_bucket(h); i < NB && j < m;) {
        if (i % SUB == 0 && (!(h->z >> (i / SUB) & 1) || seen + (double)h->g[i / SUB] <= target[j])) {
            seen += (double)h->g[i / SUB];
            i += SUB;
            continue;
        }
        if (h->b[i]) {
            while (j < m && seen + h->b[i] > target[j]) {
                double lo = edge(i), hi = edge(i + 1);
                double v = lo + (hi - lo) * (target[j] - seen + 0.5) / h->b[i];
                out[idx[j++]] = v < h->min ? h->min : v > h->max ? h->max : v;
            }
            seen += h->b[i];
        }
        i++;
    }
    for (; j < m; j++) out[idx[j]] = h->max;
}

double sim_hist_quantile(const sim_hist *h, double q)
{
    double v;
    sim_hist_quantiles(h, &q, 1, &v);
    return v;
}
