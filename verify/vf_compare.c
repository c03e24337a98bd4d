/* vf_compare.c: predicted against measured: the error of each compared metric, and which
 * stored runs pair up (a predicted and a measured run of the same options key and seed, so
 * the only thing that differs between them is the clock). */
#include "vf.h"

#include <math.h>
#include <string.h>

const char *const VF_COMPARED[] = {"throughput_req_per_s", "output_tok_per_s", "ttft_p50_s", "ttft_p99_s",
                                   "tpot_mean_s", "tpot_p50_s", "tpot_p99_s", "e2e_p50_s", "e2e_p99_s",
                                   "kv_util_peak", "preemptions", NULL};

double vf_error(double p, double m)
{
    if (!isfinite(p) || !isfinite(m)) return NAN;
    if (m != 0) return p / m - 1;
    return p == 0 ? 0 : NAN;
}

static double find(const sim_metric_kv *v, int n, const char *name)
{
    for (int i = 0; i < n; i++)
        if (!strcmp(v[i].name, name)) return v[i].value;
    return NAN;
}

int vf_compare(const sim_metrics *predicted, const sim_metrics *measured, const char *const *names, vf_row *rows,
               int max)
{
    sim_metric_kv vp[SIM_METRICS_MAX], vm[SIM_METRICS_MAX];
    int np = sim_metrics_list(predicted, vp, SIM_METRICS_MAX), nm = sim_metrics_list(measured, vm, SIM_METRICS_MAX);
    if (!names) names = VF_COMPARED;
    int k = 0;
    for (int i = 0; names[i] && k < max; i++, k++) {
        double p = find(vp, np, names[i]), m = find(vm, nm, names[i]);
        rows[k] = (vf_row){names[i], p, m, vf_error(p, m)};
    }
    return k;
}

double vf_key_error(const vf_row *rows, int n)
{
    double thr = NAN, tpot = NAN;
    for (int i = 0; i < n; i++) {
        if (!strcmp(rows[i].metric, "throughput_req_per_s")) thr = fabs(rows[i].error);
        if (!strcmp(rows[i].metric, "tpot_mean_s")) tpot = fabs(rows[i].error);
    }
    return (thr + tpot) / 2;
}

int vf_worst_row(const vf_row *rows, int n)
{
    int w = -1;
    for (int i = 0; i < n; i++)
        if (isfinite(rows[i].error) && (w < 0 || fabs(rows[i].error) > fabs(rows[w].error))) w = i;
    return w;
}

bool vf_overloaded(const sim_metrics *m)
{
    return m->q[SIM_Q_QUEUE].p99 > VF_MAX_QUEUE_P99;
}

int vf_pair_runs(const vf_run_ref *runs, int n, void (*fn)(void *ud, int predicted, int measured), void *ud)
{
    int pairs = 0;
    for (int i = 0; i < n; i++) {
        if (strcmp(runs[i].kind, "predicted")) continue;
        for (int j = 0; j < n; j++) {
            if (strcmp(runs[j].kind, "measured") || runs[j].seed != runs[i].seed ||
                strcmp(runs[j].options, runs[i].options))
                continue;
            if (fn) fn(ud, i, j);
            pairs++;
        }
    }
    return pairs;
}
