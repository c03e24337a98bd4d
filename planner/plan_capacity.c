/* plan_capacity.c: capacity questions answered by search over simulations: the highest rate a
 * candidate sustains within the SLO, the fewest replicas for a target rate, and the longest
 * context that fits at a given concurrency (cost model only). */
#include "plan.h"
#include "../model/kv_model.h"

#include <math.h>
#include <stdlib.h>

#define CAPACITY_REQUESTS 3000   /* enough for queues to show overload, few enough to search quickly */
#define MAX_QUEUE_P99 5.0         /* s: a p99 wait for admission beyond this means the queue is growing */

/* Simulates the candidate at `rate` with `replicas`; true when it keeps up within the SLO. */
static bool sustains(const scn_scenario *s, const plan_cand *c, double rate, int replicas)
{
    scn_scenario *t = malloc(sizeof *t);
    if (!t) return false;
    plan_apply(s, c, t);
    t->deployment.replicas = replicas;
    t->workload.rate = rate;
    if (t->workload.requests > CAPACITY_REQUESTS) t->workload.requests = CAPACITY_REQUESTS;
    sim_metrics m;
    char err[256];
    /* Keeping up: the queue stays bounded (an overloaded engine's queue grows with every
     * request, so its p99 wait climbs past seconds within a trial), and the SLO holds.
     * Completions per second are no test: a short trial's drain tail lowers them. */
    bool ok = sim_run_predicted(t, &c->c, &m, err, sizeof err) == SIM_OK && m.q[SIM_Q_QUEUE].p99 <= MAX_QUEUE_P99 &&
              plan_slo_met(t, &m);
    free(t);
    return ok;
}

double plan_max_rate(const scn_scenario *s, const plan_cand *c, int iterations)
{
    if (!scn_arrival_has_rate(s->workload.arrival)) return NAN;   /* a trace, closed loop or offline run has no rate to scale */
    double lo = 0, hi = s->workload.rate > 0 ? s->workload.rate : 1;
    int replicas = c->replicas;
    if (sustains(s, c, hi, replicas)) {
        lo = hi;
        for (int i = 0; i < 24 && sustains(s, c, hi * 2, replicas); i++) { hi *= 2; lo = hi; }
        hi *= 2;
    } else {
        int i = 0;
        for (; i < 24; i++) { hi /= 2; if (sustains(s, c, hi, replicas)) { lo = hi; hi *= 2; break; } }
        if (i == 24) return 0;
    }
    for (int i = 0; i < iterations; i++) {
        double mid = (lo + hi) / 2;
        if (sustains(s, c, mid, replicas)) lo = mid; else hi = mid;
    }
    return lo;
}

int plan_min_replicas(const scn_scenario *s, const plan_cand *c, double rate, int max)
{
    int lo = 0, hi = 1;
    while (hi <= max && !sustains(s, c, rate, hi)) { lo = hi; hi *= 2; }
    if (hi > max) {
        if (lo < max && sustains(s, c, rate, max)) hi = max;
        else return 0;
    }
    while (hi - lo > 1) {
        int mid = (lo + hi) / 2;
        if (sustains(s, c, rate, mid)) hi = mid; else lo = mid;
    }
    return hi;
}

long plan_max_context(const scn_scenario *s, const plan_cand *c, long concurrency)
{
    scn_scenario t;
    plan_apply(s, c, &t);
    kv_cache_cfg kc = kv_cache_cfg_make(&t, c->c.kv_dtype, c->c.sink, c->c.window);
    kv_capacity cap = kv_capacity_compute(&t, &kc, c->c.block_size, 0);
    if (cap.kv_budget <= 0 || concurrency < 1) return 0;
    double per = cap.kv_budget / (double)concurrency;
    long lo = 0, hi = 1;
    /* Grow until a sequence of hi tokens no longer fits (windows may make every length fit). */
    while (hi < 100000000L && kv_bytes_for_context(&t.model, &kc, t.deployment.tensor_parallel, hi) <= per) { lo = hi; hi *= 2; }
    if (hi >= 100000000L) return hi;
    while (hi - lo > 1) {
        long mid = (lo + hi) / 2;
        if (kv_bytes_for_context(&t.model, &kc, t.deployment.tensor_parallel, mid) <= per) lo = mid; else hi = mid;
    }
    return lo;
}
