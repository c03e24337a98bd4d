/* cmd_validate.c: `kvplan validate SCENARIO --backend ...`: calibrate (unless this machine
 * already has a calibration), predict with the calibrated model on the KV pool the backend
 * really allocated, run for real, store both runs, and print predicted against measured. */
#include "cli_run.h"
#include "../backend/be_calibrate.h"
#include "../backend/be_session.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int cli_calibrate_backend(const char *backend, const scn_scenario *s, be_calibration *cal);
int cli_store_calibration(db *d, const char *db_path, const char *name, const char *base, const char *backend,
                          const char *source, const be_calibration *cal, long *id);
int cli_fit_parse(const char *text, be_fit *f);
void cli_hostname(char *buf, size_t n);

/* The metrics validation compares, in the order it prints them. */
static const char *const COMPARED[] = {"throughput_req_per_s", "output_tok_per_s", "ttft_p50_s", "ttft_p99_s",
                                       "tpot_mean_s", "tpot_p50_s", "tpot_p99_s", "e2e_p50_s", "e2e_p99_s",
                                       "kv_util_peak", "preemptions", NULL};

static double find(const sim_metric_kv *v, int n, const char *name)
{
    for (int i = 0; i < n; i++) if (!strcmp(v[i].name, name)) return v[i].value;
    return NAN;
}

int cmd_validate(int argc, char **argv)
{
    cli_common c = {.format = OUT_TABLE};
    cli_run_flags f = {.seed = -1, .interval = 1.0, .backend = "cpu"};
    int help = 0, recalibrate = 0;
    /* --recalibrate is validate's own flag; the rest are the engine commands' flags. */
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--recalibrate")) { recalibrate = 1; for (int j = i; j < argc - 1; j++) argv[j] = argv[j + 1]; argc--; i--; }
    int rc = cli_parse_engine_cmd("validate", argc, argv, &c, &f, &help);
    if (rc || help) { if (help) fputs(cli_usage_of("validate"), stdout); return rc; }
    scn_scenario s;
    sim_choice ch;
    if ((rc = cli_prepare_engine(&c, &f, &s, &ch))) return rc;
    char err[1024];
    db *d;
    const char *db_path;
    if ((rc = cli_open_db(&f, &d, &db_path))) return rc;
    /* 1. The calibration: this machine's latest for this backend and profile, or a new one. */
    static be_calibration cal;
    long cal_id = 0;
    char host[256], base[SCN_NAME_MAX + 16];
    cli_hostname(host, sizeof host);
    snprintf(base, sizeof base, "%s", s.hardware.name);
    char *stored = d && !recalibrate ? db_calibration_latest(d, f.backend, host, base, &cal_id) : NULL;
    int calibrated_now = 0;
    if (stored && cli_fit_parse(stored, &cal.fit) == 0) {
        cal.n = 0;
    } else {
        if ((rc = cli_calibrate_backend(f.backend, &s, &cal))) { free(stored); db_close(d); return rc; }
        char prof[SCN_NAME_MAX + 16];
        snprintf(prof, sizeof prof, "%.48s.calibrated", s.hardware.name);
        if ((rc = cli_store_calibration(d, db_path, prof, base, f.backend, "microbenchmarks", &cal, &cal_id))) {
            free(stored);
            db_close(d);
            return rc;
        }
        calibrated_now = 1;
    }
    free(stored);
    be_fit_apply(&cal.fit, &s.hardware);
    /* 2. The backend, with its real KV pool. */
    be_session bs;
    be_status bst = be_session_open(&bs, f.backend, &s, &ch, err, sizeof err);
    if (bst != BE_OK) { fprintf(stderr, "kvplan: backend %s: %s\n", f.backend, err); db_close(d); return cli_exit_for_be(bst); }
    /* 3. Predict and measure the same workload on the same number of blocks. */
    sim_executor model = {0};
    cli_sink kp, km;
    memset(&kp, 0, sizeof kp);
    memset(&km, 0, sizeof km);
    sim_metrics mp, mm;
    char sp[32], fp[32], sm[32], fm[32];
    long id_p = 0, id_m = 0;
    cli_run_flags nof = f;
    nof.req_out = nof.ts_out = NULL;
    rc = CLI_EX_INTERNAL;
    if (sim_executor_model(&s, &ch, &model)) goto out;
    if ((rc = cli_sink_open(&kp, &nof, false, "predicting"))) goto out;
    if ((rc = cli_execute(&s, &ch, &model, &nof, bs.blocks, &kp, &mp, sp, fp))) goto out;
    if ((rc = cli_sink_open(&km, &f, d != NULL, "measuring"))) goto out;
    if ((rc = cli_execute(&s, &ch, &bs.ex, &f, bs.blocks, &km, &mm, sm, fm))) goto out;
    if ((rc = cli_store(d, db_path, &s, &ch, "predicted", "model", &mp, &kp, sp, fp, &id_p))) goto out;
    if ((rc = cli_store(d, db_path, &s, &ch, "measured", f.backend, &mm, &km, sm, fm, &id_m))) goto out;
    /* 4. The comparison. */
    sim_metric_kv vp[SIM_METRICS_MAX], vm[SIM_METRICS_MAX];
    int np = sim_metrics_list(&mp, vp, SIM_METRICS_MAX), nm = sim_metrics_list(&mm, vm, SIM_METRICS_MAX);
    out_doc *doc = out_doc_init();
    rc = CLI_EX_INTERNAL;
    if (!doc) goto out;
    static const out_col cols[] = {{"metric", "metric", OUT_STR}, {"predicted", "predicted", OUT_NUM},
                                   {"measured", "measured", OUT_NUM}, {"error", "error", OUT_FRAC}};
    out_table(doc, "comparison", "Predicted against measured", 4, cols);
    double key_err[2] = {NAN, NAN};
    for (int i = 0; COMPARED[i]; i++) {
        double p = find(vp, np, COMPARED[i]), m = find(vm, nm, COMPARED[i]);
        double e = m != 0 && isfinite(m) && isfinite(p) ? p / m - 1 : (p == m ? 0 : NAN);
        out_cell_str(doc, COMPARED[i]);
        out_cell_num(doc, p);
        out_cell_num(doc, m);
        out_cell_num(doc, e);
        if (!strcmp(COMPARED[i], "throughput_req_per_s")) key_err[0] = fabs(e);
        if (!strcmp(COMPARED[i], "tpot_mean_s")) key_err[1] = fabs(e);
    }
    char choice[160];
    sim_choice_describe(&ch, choice, sizeof choice);
    out_section(doc, "validation", "Validation");
    out_kv_str(doc, "scenario", "scenario", s.name);
    out_kv_str(doc, "backend", "backend", f.backend);
    out_kv_str(doc, "choice", "choice", choice);
    out_kv_num(doc, "kv_blocks", "KV blocks (both runs)", (double)bs.blocks, OUT_INT);
    out_kv_num(doc, "calibration_id", "calibration", (double)cal_id, OUT_INT);
    out_kv_str(doc, "calibrated_now", "calibrated", calibrated_now ? "now" : "earlier (stored)");
    out_kv_num(doc, "median_key_error", "median |error| (throughput, mean TPOT)", (key_err[0] + key_err[1]) / 2, OUT_FRAC);
    if (id_p) out_kv_num(doc, "predicted_run", "predicted run", (double)id_p, OUT_INT);
    if (id_m) out_kv_num(doc, "measured_run", "measured run", (double)id_m, OUT_INT);
    rc = cli_emit(doc, c.format);
    out_doc_free(doc);
out:
    if (model.free) model.free(model.ctx);
    cli_sink_close(&kp);
    cli_sink_close(&km);
    be_session_close(&bs);
    db_close(d);
    return rc;
}
