/* be_calibrate.h: measuring a backend and fitting the hardware profile to it.
 *
 * Ceilings come from micro-benchmarks (a large copy for bandwidth, GEMMs at the model's layer
 * shapes for compute); the efficiencies and overheads are then fitted by least squares (in log
 * time) so the cost model's step time matches real steps over a grid of decode batches and
 * prefill chunks. docs/validation.md describes the procedure. */
#ifndef KVPLAN_BE_CALIBRATE_H
#define KVPLAN_BE_CALIBRATE_H

#include "be.h"

/* The calibrated part of a hardware profile. */
typedef struct {
    double memory_bandwidth;  /* bytes/s: the measured copy bandwidth (read + write) */
    scn_dtype gemm_dtype;     /* the model's weight dtype */
    double gemm_flops;        /* ops/s: the best measured GEMM */
    double eff_bandwidth, eff_compute, eff_attention;
    double kernel_overhead, step_overhead;   /* s */
} be_fit;

#define BE_CAL_POINTS 32
typedef struct {
    int seqs, new_tokens, context;  /* the step: seqs sequences, each new_tokens on context */
    double measured, predicted;     /* s */
    char label[48];                 /* for points that are not steps (a run's metric); "" otherwise */
} be_cal_point;

typedef struct {
    be_fit fit;
    double gemm_by_m[8];            /* best ops/s at M = 1, 4, 16, 64, 256, 1024, 2048, 4096 */
    int n;
    be_cal_point pts[BE_CAL_POINTS];
    double rms_log_error;           /* sqrt(mean((ln predicted - ln measured)^2)) */
    double median_abs_error;        /* median |predicted / measured - 1| */
} be_calibration;

/* Applies a fit to a scenario's hardware (marks it calibrated). */
void be_fit_apply(const be_fit *f, scn_hardware *hw);

/* Measures the backend for the scenario's model and first choice, and fits. `progress` may be
 * NULL; it gets (done, total) as measurements finish. */
be_status be_calibrate(const be_ops *ops, const scn_scenario *s, const sim_choice *c, be_calibration *out,
                       void (*progress)(void *ud, long done, long total), void *ud, char *err, size_t n);

/* Fits the coefficients to measured points alone (exposed so tests can check the fit recovers
 * known coefficients from synthetic measurements). */
void be_fit_points(const scn_scenario *s, const sim_choice *c, be_calibration *cal);

/* The pieces of the fit that `calibrate --from` shares. A golden-section search of coordinate k
 * of x (np of them, at most BE_FIT_MAX_PARAMS) in log space over [lo, hi] for `iters` steps; the
 * bracket's centre replaces x[k] unless it raises the loss. */
#define BE_FIT_MAX_PARAMS 8
typedef double (*be_loss_fn)(void *ud, const double *x);
void be_golden_coord(be_loss_fn cost, void *ud, double *x, int np, int k, double lo, double hi, int iters);

/* Sets rms_log_error and median_abs_error from the points' predicted and measured times. */
void be_cal_summarise(be_calibration *cal);

#endif
