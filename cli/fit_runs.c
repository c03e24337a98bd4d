/* fit_runs.c: `kvplan calibrate --from RUN`: fits the efficiencies and the step overhead to
 * runs already measured (imported from a serving system, or run by kvplan's backends), by
 * re-simulating their scenario until its mean TTFT and TPOT match theirs (least squares in
 * log time, one coordinate at a time). */
#include "cli_run.h"
#include "../backend/be_calibrate.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

typedef struct { double ttft, tpot; } targets;

enum { F_BW, F_C, F_S, NF };
static const double FLO[NF] = {0.02, 0.01, 1e-6}, FHI[NF] = {1.0, 1.0, 0.2};

typedef struct {
    const scn_scenario *s;
    sim_choice c;
    double ttft, tpot;      /* the simulated means for the current x */
} fit_state;

static int simulate(fit_state *f, const double *x)
{
    static scn_scenario w;
    w = *f->s;
    w.hardware.eff_bandwidth = x[F_BW];
    w.hardware.eff_compute = x[F_C];
    w.hardware.step_overhead = x[F_S];
    sim_metrics m;
    char err[512];
    int rc = sim_run_predicted(&w, &f->c, &m, err, sizeof err);
    if (rc != SIM_OK) return -1;
    f->ttft = m.q[SIM_Q_TTFT].mean;
    f->tpot = m.q[SIM_Q_TPOT].mean;
    return 0;
}

static double loss(fit_state *f, const double *x, const targets *t, int n)
{
    if (simulate(f, x)) return INFINITY;
    double sum = 0;
    for (int i = 0; i < n; i++) {
        if (t[i].ttft > 0) sum += pow(log(f->ttft / t[i].ttft), 2);
        if (t[i].tpot > 0) sum += pow(log(f->tpot / t[i].tpot), 2);
    }
    return sum;
}

typedef struct { fit_state *f; const targets *t; int n; } fit_loss_ctx;

static double fit_loss(void *ud, const double *x)
{
    fit_loss_ctx *lc = ud;
    return loss(lc->f, x, lc->t, lc->n);
}

int cli_fit_runs(db *d, const long *runs, int n_runs, const scn_scenario *s, be_calibration *cal)
{
    targets t[32];
    char err[1024];
    for (int i = 0; i < n_runs; i++) {
        db_run_info info;
        db_status st = db_run_get(d, runs[i], &info, err, sizeof err);
        if (st != DB_OK) { fprintf(stderr, "kvplan: %s\n", err); return cli_exit_for_db(st); }
        if (strcmp(info.kind, "measured")) {
            fprintf(stderr, "kvplan: run %ld is %s; calibrate from measured runs\n", runs[i], info.kind);
            return CLI_EX_DATA;
        }
        sim_metrics m;
        memset(&m, 0, sizeof m);
        if ((st = db_run_sim_metrics(d, runs[i], &m, err, sizeof err)) != DB_OK) { fprintf(stderr, "kvplan: %s\n", err); return cli_exit_for_db(st); }
        t[i] = (targets){m.q[SIM_Q_TTFT].mean, m.q[SIM_Q_TPOT].mean};
        if (!(t[i].ttft > 0) && !(t[i].tpot > 0)) {
            fprintf(stderr, "kvplan: run %ld has neither ttft_mean_s nor tpot_mean_s to fit to\n", runs[i]);
            return CLI_EX_DATA;
        }
    }
    fit_state f = {.s = s, .c = sim_choice_first(s)};
    double x[NF] = {s->hardware.eff_bandwidth, s->hardware.eff_compute, s->hardware.step_overhead};
    for (int k = 0; k < NF; k++) x[k] = fmin(fmax(x[k], FLO[k]), FHI[k]);
    if (!isfinite(loss(&f, x, t, n_runs))) {
        fprintf(stderr, "kvplan: the scenario cannot be simulated as given\n");
        return CLI_EX_DATA;
    }
    fit_loss_ctx lc = {&f, t, n_runs};
    for (int sweep = 0; sweep < 4; sweep++)
        for (int k = 0; k < NF; k++) be_golden_coord(fit_loss, &lc, x, NF, k, FLO[k], FHI[k], 25);
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
    return CLI_OK;
}
