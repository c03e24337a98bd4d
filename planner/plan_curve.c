/* plan_curve.c: load curves: a candidate simulated at a ladder of offered rates, so latency
 * percentiles and goodput can be read against load (where the knee is, how far the SLO lines
 * are from it). Each point is a capacity trial (plan_capacity.c) at one rate. */
#include "plan.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int plan_curve_rates(const scn_scenario *s, const plan_result *r, const int *cands, int n_cands, double max_rate,
                     int points, double *rates)
{
    if (points < 1) return 0;
    if (!(max_rate > 0)) {
        double top = 0;
        for (int i = 0; i < n_cands; i++) {
            const plan_cand *c = &r->c[cands[i]];
            /* An unbounded seed's rate is the top of its search, not a capacity: no knee to show. */
            for (int k = 0; k < c->n_seeds; k++)
                if ((c->cap_done >> k) & 1 && !((c->seed_unbounded >> k) & 1)) top = fmax(top, c->seed_rate[k]);
        }
        /* Past the highest capacity by half again, so every curve shows its knee. */
        max_rate = top > 0 ? 1.5 * top : 2 * (s->workload.rate > 0 ? s->workload.rate : 1);
    }
    for (int i = 0; i < points; i++) rates[i] = max_rate * (i + 1) / points;
    return points;
}

int plan_curve(const scn_scenario *s, const plan_result *r, int cand, const double *rates, int n, plan_curve_point *out,
               char *err, size_t nerr)
{
    const plan_cand *c = &r->c[cand];
    if (s->workload.arrival == SCN_ARRIVAL_TRACE) { snprintf(err, nerr, "a trace has no rate to vary"); return -1; }
    for (int i = 0; i < n; i++) {
        out[i].cand = cand;
        out[i].rate = rates[i];
        memset(&out[i].m, 0, sizeof out[i].m);
        out[i].slo_met = plan_sustains(s, c, s->seed, rates[i], c->replicas, &out[i].m);
        if (out[i].m.requests <= 0) { snprintf(err, nerr, "simulating at %.3g req/s failed", rates[i]); return -1; }
    }
    return 0;
}
