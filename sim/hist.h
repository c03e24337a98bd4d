/* hist.h: a fixed-size log-bucketed histogram for latency percentiles, so a run's memory does
 * not grow with the requests it simulates. Each power of two is split into 2048 linear
 * buckets (at most 0.1 % wide relative to their value) from 0.5 ns to 24 days; count, min and
 * max are exact, and the sum (hence the mean) is exact to 2^-64 s per value whatever the order
 * of the additions. */
#ifndef KVPLAN_SIM_HIST_H
#define KVPLAN_SIM_HIST_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#define SIM_HIST_SUB 2048     /* linear sub-buckets per power of two (11 mantissa bits): width <= 1/2048 relative */
#define SIM_HIST_EMIN (-31)   /* 2^-31 s ~ 0.5 ns: smaller values count as zeros */
#define SIM_HIST_EMAX 21      /* 2^21 s ~ 24 days: larger values go to the last bucket */
#define SIM_HIST_NB ((SIM_HIST_EMAX - SIM_HIST_EMIN) * SIM_HIST_SUB)

typedef struct {
    uint32_t *b;        /* bucket counts; a power of two's 2048 are zeroed when its first value
                         * comes (bit g of z), so a run pays for the few it uses, not 416 KiB */
    uint64_t z;
    uint64_t g[52];     /* counts per power of two (2048 buckets), so quantiles skip empty stretches */
    long count, zeros;  /* values <= the smallest bucket are counted in zeros */
    __int128 fix;       /* 2^-64 s: the exact sum of the values' fixed-point forms (see sim_hist_sum) */
    double big;         /* s: the sum of values too large for fix (none in any real run) */
    double min, max;
} sim_hist;

int sim_hist_init(sim_hist *h);
void sim_hist_free(sim_hist *h);
/* sim_hist_add and sim_hist_add_n are inline (below): the engine records a value every step. */
static inline void sim_hist_add(sim_hist *h, double v);
/* The same as n calls of sim_hist_add(h, v), bit for bit, in O(1). */
static inline void sim_hist_add_n(sim_hist *h, double v, long n);
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
/* The count in bucket i (0 .. SIM_HIST_NB - 1). */
static inline uint32_t sim_hist_bucket_count(const sim_hist *h, long i)
{
    return h->z >> (i / SIM_HIST_SUB) & 1 ? h->b[i] : 0;
}


/* ---- inline adds ---- */
#define SIM_HIST_FIX_LIMIT 0x1p40   /* s: |v| * n below 2^62 s keeps fix (< 2^127 in 2^-64 s units) from overflowing */

/* n copies of v into the sums. v * 2^64 truncated toward zero, in two exact parts: the whole
 * seconds (a double's integer part is exact) and the fraction's top 64 bits. */
static inline void sim_hist_add_sum_(sim_hist *h, double v, long n)
{
    double a = fabs(v);
    if (!(a < SIM_HIST_FIX_LIMIT) || (double)n * a >= 0x1p62) {   /* NaN too */
        for (long k = 0; k < n; k++) h->big += v;
        return;
    }
    uint64_t whole = (uint64_t)a;            /* truncated: exact below 2^40 */
    double frac = a - (double)whole;         /* exact */
    unsigned __int128 q = ((unsigned __int128)whole << 64) + (uint64_t)(frac * 0x1p64);
    __int128 t = (__int128)(q * (unsigned __int128)(uint64_t)n);
    h->fix += v < 0 ? -t : t;
}

/* The bucket of a positive value of at least 2^EMIN: v = (1 + mant / 2^52) * 2^(E - 1023), so the
 * bucket is (E - 1023 - EMIN) * SUB plus the top 11 bits of the mantissa; -1 for values counted
 * as zeros. */
static inline long sim_hist_bucket_(double v)
{
    uint64_t u;
    memcpy(&u, &v, sizeof u);
    long E = (long)((u >> 52) & 0x7ff) - 1023;
    if (!(v > 0) || E < SIM_HIST_EMIN) return -1;
    return E >= SIM_HIST_EMAX - 1 ? SIM_HIST_NB - 1 : (E - SIM_HIST_EMIN) * SIM_HIST_SUB + (long)((u >> 41) & (SIM_HIST_SUB - 1));
}

/* Power of two g's buckets, zeroed on its first value. */
static inline void sim_hist_touch_(sim_hist *h, long g)
{
    if (h->z >> g & 1) return;
    memset(h->b + g * SIM_HIST_SUB, 0, sizeof *h->b * SIM_HIST_SUB);
    h->z |= (uint64_t)1 << g;
}

static inline void sim_hist_add(sim_hist *h, double v)
{
    h->count++;
    sim_hist_add_sum_(h, v, 1);
    if (v < h->min) h->min = v;
    if (v > h->max) h->max = v;
    long i = sim_hist_bucket_(v);
    if (i < 0) { h->zeros++; return; }
    sim_hist_touch_(h, i / SIM_HIST_SUB);
    h->b[i]++;
    h->g[i / SIM_HIST_SUB]++;
}

static inline void sim_hist_add_n(sim_hist *h, double v, long n)
{
    if (n <= 0) return;
    sim_hist_add_sum_(h, v, n);   /* exact, so n copies at once are n additions of one */
    h->count += n;
    if (v < h->min) h->min = v;
    if (v > h->max) h->max = v;
    long i = sim_hist_bucket_(v);
    if (i < 0) { h->zeros += n; return; }
    sim_hist_touch_(h, i / SIM_HIST_SUB);
    h->b[i] += (uint32_t)n;
    h->g[i / SIM_HIST_SUB] += (uint64_t)n;
}

#endif
