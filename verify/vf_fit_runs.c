/* vf_fit_runs.c: `calibrate --from RUN`: fits the efficiencies and the step overhead to runs
 * already measured (imported from a serving system, or run by kvplan's backends), by
 * re-simulating their scenario until its mean TTFT and TPOT match theirs (least squares in log
 * time, one golden-section coordinate search at a time; docs/validation.md). */
#include "vf.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct { double ttft, tpot; } targets;

enum { F_BW, F_C, F_S, NF };
/* The search box: efficiencies are fractions of the ceilings; the step overhead in seconds. */
static const double FLO[NF] = {0.02, 0.01, 1e-6}, FHI[NF] = {1.0, 1.0, 0.2};

typedef struct {
    const scn_scenario *s;
    scn_scenario *work;     /* the scenario with the coefficients under trial */
    sim_choice c;
    double ttft, tpot;      /* the simulated means for the current x */
    const targets *t;
    int n;
} fit_state;

static int simulate(fit_state *f, const double *x)
{
    *f->work = *f->s;
    f->work->hardware.eff_bandwidth = x[F_BW];
    f->work->hardware.eff_compute = x[F_C];
    f->work->hardware.step_overhead = x[F_S];
    sim_metrics m;
    char err[512];
    if (sim_run_predicted(f->work, &f->c, &m, err, sizeof err) != SIM_OK) return -1;
    f->ttft = m.q[SIM_Q_TTFT].mean;
    f->tpot = m.q[SIM_Q_TPOT].mean;
    return 0;
}

static double loss(void *ud, const double *x)
{
    fit_state *f = ud;
    if (simulate(f, x)) return INFINITY;
    double sum = 0;
    for (int i = 0; i < f->n; i++) {
        if (f->t[i].ttft > 0) sum += pow(log(f->ttft / f->t[i].ttft), 2);
        if (f->t[i].tpot > 0) sum += pow(log(f->tpot / f->t[i].tpot), 2);
    }
    return sum;
}

vf_status vf_fit_runs(db *d, const long *runs, int n_runs, const scn_scenario *s, be_calibration *cal, char *err,
                      size_t n)
{
    targets t[VF_FIT_RUNS];
    char why[1024];
    if (n_runs < 1 || n_runs > VF_FIT_RUNS) { snprintf(err, n, "fit 1 to %d runs, not %d", VF_FIT_RUNS, n_runs); return VF_E_DATA; }
    if (!d) { snprintf(err, n, "fitting runs needs the database that holds them"); return VF_E_DATA; }
    for (int i = 0; i < n_runs; i++) {
        db_run_info info;
        db_status st = db_run_get(d, runs[i], &info, why, sizeof why);
        if (st != DB_OK) { snprintf(err, n, "%s", why); return vf_status_of_db(st); }
        if (strcmp(info.kind, "measured")) {
            snprintf(err, n, "run %ld is %s; calibrate from measured runs", runs[i], info.kind);
            return VF_E_DATA;
        }
        sim_metrics m;
        memset(&m, 0, sizeof m);
        if ((st = db_run_sim_metrics(d, runs[i], &m, why, sizeof why)) != DB_OK) {
            snprintf(err, n, "%s", why);
            return vf_status_of_db(st);
        }
        t[i] = (targets){m.q[SIM_Q_TTFT].mean, m.q[SIM_Q_TPOT].mean};
        if (!(t[i].ttft > 0) && !(t[i].tpot > 0)) {
            snprintf(err, n, "run %ld has neither ttft_mean_s nor tpot_mean_s to fit to", runs[i]);
            return VF_E_DATA;
        }
    }
    fit_state f = {.s = s, .work = malloc(sizeof *f.work), .c = sim_choice_first(s), .t = t, .n = n_runs};
    if (!f.work) { snprintf(err, n, "out of memory"); return VF_E_INTERNAL; }
    double x[NF] = {s->hardware.eff_bandwidth, s->hardware.eff_compute, s->hardware.step_overhead};
    for (int k = 0; k < NF; k++) x[k] = fmin(fmax(x[k], FLO[k]), FHI[k]);
    if (!isfinite(loss(&f, x))) {
        free(f.work);
        snprintf(err, n, "the scenario cannot be simulated as given");
        return VF_E_DATA;
    }
    for (int sweep = 0; sweep < 4; sweep++)
        for (int k = 0; k < NF; k++) be_golden_coord(loss, &f, x, NF, k, FLO[k], FHI[k], 25);
    memset(cal, 0, sizeof *cal);
    be_fit *fit = &cal->fit;
    fit->memory_bandwidth = s->hardware.memory_bandwidth;
    fit->gemm_dtype = s->model.weight_dtype;
    fit->gemm_flops = s->hardware.flops[s->model.weight_dtype];
    fit->eff_bandwidth = x[F_BW];
    fit->eff_compute = x[F_C];
    fit->eff_attention = s->hardware.eff_attention;
    fit->kernel_overhead = s->hardware.kernel_overhead;
    fit->step_overhead = x[F_S];
    simulate(&f, x);
    free(f.work);
    for (int i = 0; i < n_runs && cal->n + 2 <= BE_CAL_POINTS; i++) {
        double meas[2] = {t[i].ttft, t[i].tpot}, pred[2] = {f.ttft, f.tpot};
        for (int q = 0; q < 2; q++) {
            if (!(meas[q] > 0)) continue;
            be_cal_point *p = &cal->pts[cal->n++];
            memset(p, 0, sizeof *p);
            snprintf(p->label, sizeof p->label, "run %ld %s mean", runs[i], q ? "tpot" : "ttft");
            p->measured = meas[q];
            p->predicted = pred[q];
        }
    }
    be_cal_summarise(cal);
    return VF_OK;
}
