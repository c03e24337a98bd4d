/* vf_fit_runs.c: `calibrate --from RUN`: fits the efficiencies and the step overhead to runs
 * already measured (imported from a serving system, or run by kvplan's backends), by
 * re-simulating each run's scenario until its mean TTFT and TPOT match theirs (least squares in
 * log time, one golden-section coordinate search at a time; docs/validation.md). An imported run
 * is re-simulated under the benchmark setting it carries (vf_setting.c); with two runs or more,
 * each run is also predicted by a fit to the others (held out). */
#include "vf.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* An imported run is re-simulated with at most this many requests, so a fit over a handful of
 * runs takes seconds; the steady state of a benchmark is reached well within it. */
#define FIT_MAX_REQUESTS 1000

typedef struct {
    long id;
    double ttft, tpot;      /* measured means, s (0 when absent) */
    scn_scenario *sc;       /* the run's scenario: the given one, under the run's setting */
    double p_ttft, p_tpot;  /* simulated means for the last x tried on it */
} fit_run;

enum { F_BW, F_C, F_S, NF };
/* The search box: efficiencies are fractions of the ceilings; the step overhead in seconds. */
static const double FLO[NF] = {0.02, 0.01, 1e-6}, FHI[NF] = {1.0, 1.0, 0.2};

typedef struct {
    fit_run *r;
    int n;
    int held;               /* the run left out of the loss; -1: none */
    scn_scenario *work;     /* a run's scenario with the coefficients under trial */
} fit_state;

static int simulate(fit_state *f, int i, const double *x)
{
    *f->work = *f->r[i].sc;
    f->work->hardware.eff_bandwidth = x[F_BW];
    f->work->hardware.eff_compute = x[F_C];
    f->work->hardware.step_overhead = x[F_S];
    sim_choice c = sim_choice_first(f->work);
    sim_metrics m;
    char err[512];
    if (sim_run_predicted(f->work, &c, &m, err, sizeof err) != SIM_OK) return -1;
    f->r[i].p_ttft = m.q[SIM_Q_TTFT].mean;
    f->r[i].p_tpot = m.q[SIM_Q_TPOT].mean;
    return 0;
}

static double loss(void *ud, const double *x)
{
    fit_state *f = ud;
    double sum = 0;
    for (int i = 0; i < f->n; i++) {
        if (i == f->held) continue;
        if (simulate(f, i, x)) return INFINITY;
        if (f->r[i].ttft > 0) sum += pow(log(f->r[i].p_ttft / f->r[i].ttft), 2);
        if (f->r[i].tpot > 0) sum += pow(log(f->r[i].p_tpot / f->r[i].tpot), 2);
    }
    return sum;
}

static void search(fit_state *f, double *x, int sweeps, int iters)
{
    for (int sweep = 0; sweep < sweeps; sweep++)
        for (int k = 0; k < NF; k++) be_golden_coord(loss, f, x, NF, k, FLO[k], FHI[k], iters);
}

/* Appends run i's mean TTFT and TPOT, measured against its simulated values, to cal. */
static void add_points(be_calibration *cal, const fit_run *r, const char *tag)
{
    double meas[2] = {r->ttft, r->tpot}, pred[2] = {r->p_ttft, r->p_tpot};
    for (int q = 0; q < 2 && cal->n < BE_CAL_POINTS; q++) {
        if (!(meas[q] > 0)) continue;
        be_cal_point *p = &cal->pts[cal->n++];
        memset(p, 0, sizeof *p);
        snprintf(p->label, sizeof p->label, "run %ld %s mean%s", r->id, q ? "tpot" : "ttft", tag);
        p->measured = meas[q];
        p->predicted = pred[q];
    }
}

static vf_status load_runs(db *d, const long *runs, int n_runs, const scn_scenario *s, fit_run *r, char *err, size_t n)
{
    char why[1024];
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
        r[i].id = runs[i];
        r[i].ttft = m.q[SIM_Q_TTFT].mean;
        r[i].tpot = m.q[SIM_Q_TPOT].mean;
        if (!(r[i].ttft > 0) && !(r[i].tpot > 0)) {
            snprintf(err, n, "run %ld has neither ttft_mean_s nor tpot_mean_s to fit to", runs[i]);
            return VF_E_DATA;
        }
        *r[i].sc = *s;
        int applied = 0;
        vf_status vs = vf_run_setting(d, runs[i], r[i].sc, &applied, why, sizeof why);
        if (vs != VF_OK) { snprintf(err, n, "%s", why); return vs; }
        if (applied && r[i].sc->workload.requests > FIT_MAX_REQUESTS) r[i].sc->workload.requests = FIT_MAX_REQUESTS;
    }
    return VF_OK;
}

vf_status vf_fit_runs(db *d, const long *runs, int n_runs, const scn_scenario *s, be_calibration *cal, char *err,
                      size_t n)
{
    if (n_runs < 1 || n_runs > VF_FIT_RUNS) { snprintf(err, n, "fit 1 to %d runs, not %d", VF_FIT_RUNS, n_runs); return VF_E_DATA; }
    if (!d) { snprintf(err, n, "fitting runs needs the database that holds them"); return VF_E_DATA; }
    fit_run r[VF_FIT_RUNS];
    memset(r, 0, sizeof r);
    scn_scenario *scs = malloc(sizeof *scs * (size_t)(n_runs + 1));
    if (!scs) { snprintf(err, n, "out of memory"); return VF_E_INTERNAL; }
    for (int i = 0; i < n_runs; i++) r[i].sc = &scs[i];
    fit_state f = {.r = r, .n = n_runs, .held = -1, .work = &scs[n_runs]};
    vf_status st = load_runs(d, runs, n_runs, s, r, err, n);
    if (st != VF_OK) { free(scs); return st; }
    double x[NF] = {s->hardware.eff_bandwidth, s->hardware.eff_compute, s->hardware.step_overhead};
    for (int k = 0; k < NF; k++) x[k] = fmin(fmax(x[k], FLO[k]), FHI[k]);
    if (!isfinite(loss(&f, x))) {
        free(scs);
        snprintf(err, n, "the scenario cannot be simulated as given (or under a run's setting)");
        return VF_E_DATA;
    }
    search(&f, x, 4, 25);
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
    for (int i = 0; i < n_runs; i++) {
        simulate(&f, i, x);
        add_points(cal, &r[i], "");
    }
    be_cal_summarise(cal);
    /* Held out: each run predicted by the coefficients fitted to the others (starting from the
     * joint fit, so two sweeps suffice). These say how well the fit predicts a run it has not
     * seen; the summary above says how well it reproduces the runs it was given. */
    for (int i = 0; n_runs >= 2 && i < n_runs; i++) {
        double xi[NF];
        memcpy(xi, x, sizeof xi);
        f.held = i;
        search(&f, xi, 2, 15);
        f.held = -1;
        simulate(&f, i, xi);
        add_points(cal, &r[i], " (held out)");
    }
    free(scs);
    return VF_OK;
}
