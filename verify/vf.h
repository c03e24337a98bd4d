/* vf.h: verification, the library between db/ and cli/: recording and storing a run, measuring
 * or fitting a calibration and writing it as a hardware profile, validating (predict and measure
 * on the same KV pool), and pairing predicted with measured runs. Everything here returns a
 * vf_status with its message in err; only cli/ turns a status into an exit code and prints. */
#ifndef KVPLAN_VF_H
#define KVPLAN_VF_H

#include "../backend/be_calibrate.h"
#include "../db/db.h"
#include "../sim/sim.h"

#include <stdbool.h>
#include <stdio.h>

typedef enum {
    VF_OK = 0,
    VF_E_DATA,          /* bad input data: a run of the wrong kind, an unrunnable scenario (exit 65) */
    VF_E_NOINPUT,       /* an input file cannot be read (exit 66) */
    VF_E_UNAVAILABLE,   /* the backend is not built or has no device (exit 69) */
    VF_E_CANTCREAT,     /* an output file or the database cannot be created or written (exit 73) */
    VF_E_INTERNAL,      /* anything else (exit 70) */
    VF_E_IOERR,         /* an I/O error on the database (exit 74) */
    VF_E_TEMPFAIL       /* the database stayed locked past the retry deadline (exit 75) */
} vf_status;

/* The status classes of the layers below, as vf_status. */
vf_status vf_status_of_db(db_status st);
vf_status vf_status_of_be(be_status st);
vf_status vf_status_of_sim(int sim_rc);

/* ---- Recording and storing a run (vf_record.c) ---- */

/* Time-series samples a sink keeps for the database, at most. */
#define VF_MAX_SAMPLES 5000000L

/* Where a run's per-request rows and time-series samples go: optional CSV files, and (when
 * `keep`) memory, for the database. `progress` may be set by the caller after opening. */
typedef struct {
    FILE *req_csv, *ts_csv;
    const char *req_path, *ts_path;   /* the caller's strings: removed again when the run fails */
    sim_request_row *rows;
    long n_rows, cap_rows;
    sim_sample *samples;
    long n_samples, cap_samples;
    bool keep;
    void (*progress)(void *ud, long done, long total);
    void *progress_ud;
    bool per_step;              /* set by the caller: form every step (sim_run_opts.per_step) */
    bool raw_errors;            /* set by the caller: leave a failed run's message unlocated, for a
                                 * caller that knows the --set flags to locate it (cli_locate_message) */
} vf_sink;

/* Opens the CSV outputs that are named (either path may be NULL); VF_E_CANTCREAT on failure. */
vf_status vf_sink_open(vf_sink *k, const char *req_path, const char *ts_path, bool keep, char *err, size_t n);
/* Closes the files and frees the rows; a zeroed sink is fine. */
void vf_sink_close(vf_sink *k);

/* Runs the engine on `ex` into the sink. `interval` is the time-series sampling period in
 * seconds (used when the sink has a time-series file); `blocks` > 0 fixes the KV pool per
 * replica. started and finished receive ISO 8601 times (32 bytes each). */
vf_status vf_execute(const scn_scenario *s, const sim_choice *c, sim_executor *ex, vf_sink *k, double interval,
                     long blocks, sim_metrics *m, char *started, char *finished, char *err, size_t n);

/* Stores a finished run in one transaction under the choice's options key; *run_id = 0 and
 * nothing happens when d is NULL. */
vf_status vf_store(db *d, const scn_scenario *s, const sim_choice *c, const char *kind, const char *executor,
                   const sim_metrics *m, const vf_sink *k, const char *started, const char *finished, long *run_id,
                   char *err, size_t n);

/* ---- Calibrations (vf_calibration.c) ---- */

/* This machine's name, as calibrations are stored under it. */
void vf_hostname(char *buf, size_t n);
/* A fit as JSON (caller frees), and back; vf_fit_parse returns -1 on a malformed text. */
char *vf_fit_json(const be_fit *f);
int vf_fit_parse(const char *text, be_fit *f);
/* Measures the backend for the scenario's model and first choice, and fits. */
vf_status vf_calibrate_backend(const char *backend, const scn_scenario *s, be_calibration *cal,
                               void (*progress)(void *ud, long done, long total), void *ud, char *err, size_t n);
/* Stores a calibration (fit and points) for this host; *id = 0 and nothing happens when d is NULL. */
vf_status vf_calibration_store(db *d, const char *name, const char *base, const char *backend, const char *source,
                               const be_calibration *cal, long *id, char *err, size_t n);

/* Fits the bandwidth and compute efficiencies and the step overhead to stored measured runs by
 * re-simulating the scenario until its mean TTFT and TPOT match theirs (least squares in log
 * time, one coordinate at a time). A run that carries its benchmark setting (an import) is
 * re-simulated under that setting. With two runs or more, each run is also predicted by a fit
 * to the others: those held-out points follow the fitted ones in cal->pts, labelled "held out",
 * and cal's error summary covers the fitted points only. At most VF_FIT_RUNS runs.
 * (vf_fit_runs.c) */
#define VF_FIT_RUNS 32
vf_status vf_fit_runs(db *d, const long *runs, int n_runs, const scn_scenario *s, be_calibration *cal, char *err,
                      size_t n);

/* ---- Benchmark settings of imported runs (vf_setting.c) ---- */

/* Applies the setting_* entries among (names, values) to the scenario's workload: a closed loop
 * of setting_concurrency clients, else offline (setting_offline), else poisson or gamma
 * (setting_burstiness) at setting_request_rate_per_s; the request count (setting_prompts, else
 * requests); fixed prompt and output lengths at their means; no measurement window. Describes
 * what it set in desc (may be NULL). Returns 1 when a traffic setting was present, else 0 and
 * the scenario is untouched. */
int vf_setting_apply(const char *const *names, const double *values, int n_values, scn_scenario *s, char *desc,
                     size_t n);
/* The same from a stored run's metrics. */
vf_status vf_run_setting(db *d, long run, scn_scenario *s, int *applied, char *err, size_t n);

/* ---- Calibrated profiles (vf_profile.c) ---- */

/* Writes the calibrated hardware profile as YAML: it extends `base` and overrides what the fit
 * measured. `cal` may have no points. */
vf_status vf_profile_write(const char *path, const char *name, const scn_hardware *base, const be_calibration *cal,
                           const char *host, const char *when, const char *backend, char *err, size_t n);

/* What `kvplan calibrate` does, as one call. */
typedef struct {
    const scn_scenario *s;      /* the scenario measured (its hardware is the base profile) */
    const char *backend;        /* measure this backend, or NULL to fit `runs` */
    const long *runs;           /* stored measured runs to fit (with backend NULL) */
    int n_runs;
    db *d;                      /* runs come from here and the calibration goes here; may be NULL to measure */
    const char *name;           /* profile name; NULL: "<hardware>.calibrated" */
    const char *out_path;       /* the YAML file; NULL: <profile dir>/<name>.yaml (see vf_profile_dir) */
    void (*progress)(void *ud, long done, long total);
    void *ud;
} vf_calibrate_req;

typedef struct {
    be_calibration cal;
    char name[SCN_NAME_MAX + 16];
    char path[4096];
    long calibration_id;        /* 0 when not stored */
} vf_calibrate_result;

vf_status vf_calibrate(const vf_calibrate_req *rq, vf_calibrate_result *out, char *err, size_t n);

/* ---- Comparing and pairing (vf_compare.c) ---- */

/* One compared metric: predicted / measured - 1 as error (0 when both are equal, NaN when the
 * measured value is 0 or either is not finite). */
typedef struct {
    const char *metric;
    double predicted, measured, error;
} vf_row;

double vf_error(double predicted, double measured);
/* The metrics validation compares, in its order (NULL-terminated). */
extern const char *const VF_COMPARED[];
#define VF_COMPARED_MAX 16
/* Compares the named metrics (NULL-terminated; NULL names = VF_COMPARED); returns the count. */
int vf_compare(const sim_metrics *predicted, const sim_metrics *measured, const char *const *names, vf_row *rows,
               int max);
/* The headline error: the mean of |error| over throughput and mean TPOT (the median of two). */
double vf_key_error(const vf_row *rows, int n);
/* The row with the largest |error| among finite ones, or -1: what a headline must not hide
 * (a mean over two metrics hid TPOT p50 -30.8 % and E2E p50 -31.3 % behind 4.4 %, issue 16). */
int vf_worst_row(const vf_row *rows, int n);
/* p99 admission wait (s) beyond which a run's queue is taken to be growing: the run was
 * overloaded (the planner's capacity trials use the same rule, docs/planner.md). */
#define VF_MAX_QUEUE_P99 5.0
/* True when a run fell behind its offered load: its p99 wait for admission passed
 * VF_MAX_QUEUE_P99, so its latencies measure a growing queue, not the engine. */
bool vf_overloaded(const sim_metrics *m);

/* A stored run as pairing sees it. */
typedef struct {
    long id;
    const char *kind;           /* "predicted" or "measured" */
    const char *options;        /* the options key (db_options_json) */
    unsigned long long seed;
} vf_run_ref;

/* Calls fn(ud, i, j) for every predicted run i and measured run j of `runs` with the same
 * options key and seed, in (i, j) order; returns the number of pairs. */
int vf_pair_runs(const vf_run_ref *runs, int n, void (*fn)(void *ud, int predicted, int measured), void *ud);

/* ---- Validation (vf_validate.c) ---- */

typedef struct {
    const scn_scenario *s;
    const sim_choice *c;
    const char *backend;
    db *d;                      /* may be NULL: calibrate afresh and store nothing */
    int recalibrate;            /* measure even if this host has a stored calibration */
    vf_sink *predicting, *measuring;   /* open sinks for the two runs (progress, CSV) */
    double interval;            /* s: time-series period of the measured run */
    void (*cal_progress)(void *ud, long done, long total);
    void *cal_ud;
} vf_validate_req;

typedef struct {
    vf_row rows[VF_COMPARED_MAX];
    int n_rows;
    double key_error;           /* vf_key_error of rows */
    int worst;                  /* vf_worst_row of rows, or -1 */
    bool measured_overloaded;   /* vf_overloaded(measured) */
    bool predicted_overloaded;  /* vf_overloaded(predicted) */
    long blocks;                /* the KV pool both runs used, per replica */
    long calibration_id;
    int calibrated_now;         /* 1: measured now; 0: a stored calibration was used */
    long predicted_run, measured_run;   /* 0 when not stored */
    sim_metrics predicted, measured;
} vf_validate_result;

/* Calibrates (unless this host has a calibration for the backend and base profile), predicts
 * with the calibrated model on the KV pool the backend really allocated, measures, stores both
 * runs and compares them. */
vf_status vf_validate(const vf_validate_req *rq, vf_validate_result *out, char *err, size_t n);

#endif
