/* cmd_validate.c: `kvplan validate SCENARIO --backend ...`: parses the flags, runs the
 * validation (verify/vf_validate.c) and prints predicted against measured. */
#include "cli_run.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

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
    db *d;
    const char *db_path;
    if ((rc = cli_open_db(&f, &d, &db_path))) return rc;
    cli_sink kp, km;
    memset(&kp, 0, sizeof kp);
    memset(&km, 0, sizeof km);
    cli_run_flags nof = f;
    nof.req_out = nof.ts_out = NULL;
    cli_progress cal_bar;
    cli_progress_init(&cal_bar, "calibrating");
    vf_validate_result r;
    if ((rc = cli_sink_open(&kp, &nof, false, "predicting")) || (rc = cli_sink_open(&km, &f, d != NULL, "measuring")))
        goto out;
    vf_validate_req rq = {.s = &s, .c = &ch, .backend = f.backend, .d = d, .recalibrate = recalibrate,
                          .predicting = &kp.v, .measuring = &km.v, .interval = f.interval,
                          .cal_progress = cli_progress_cb, .cal_ud = &cal_bar};
    char err[1500];
    vf_status st = vf_validate(&rq, &r, err, sizeof err);
    cli_progress_end(&cal_bar);
    cli_progress_end(&kp.bar);
    cli_progress_end(&km.bar);
    if (st) { rc = cli_fail_vf(st, err); goto out; }
    out_doc *doc = out_doc_init();
    rc = CLI_EX_INTERNAL;
    if (!doc) goto out;
    static const out_col cols[] = {{"metric", "metric", OUT_STR}, {"predicted", "predicted", OUT_NUM},
                                   {"measured", "measured", OUT_NUM}, {"error", "error", OUT_FRAC}};
    out_table(doc, "comparison", "Predicted against measured", 4, cols);
    for (int i = 0; i < r.n_rows; i++) {
        out_cell_str(doc, r.rows[i].metric);
        out_cell_num(doc, r.rows[i].predicted);
        out_cell_num(doc, r.rows[i].measured);
        out_cell_num(doc, r.rows[i].error);
    }
    char choice[160];
    sim_choice_describe(&ch, choice, sizeof choice);
    out_section(doc, "validation", "Validation");
    out_kv_str(doc, "scenario", "scenario", s.name);
    out_kv_str(doc, "backend", "backend", f.backend);
    out_kv_str(doc, "choice", "choice", choice);
    out_kv_num(doc, "kv_blocks", "KV blocks (both runs)", (double)r.blocks, OUT_INT);
    out_kv_num(doc, "calibration_id", "calibration", (double)r.calibration_id, OUT_INT);
    out_kv_str(doc, "calibrated_now", "calibrated", r.calibrated_now ? "now" : "earlier (stored)");
    /* The headline is the worst metric, not a median that can hide it (issue 16). */
    out_kv_str(doc, "worst_metric", "worst metric", r.worst >= 0 ? r.rows[r.worst].metric : "-");
    out_kv_num(doc, "worst_error", "its error", r.worst >= 0 ? r.rows[r.worst].error : NAN, OUT_FRAC);
    out_kv_num(doc, "median_key_error", "median |error| (throughput, mean TPOT)", r.key_error, OUT_FRAC);
    out_kv_str(doc, "measured_overloaded", "measured run overloaded", r.measured_overloaded ? "yes" : "no");
    if (r.measured_overloaded)
        out_note(doc, "The measured run fell behind the offered load: its p99 wait for admission was %.1f s (over %.0f s), so "
                      "its latencies measure a growing queue, not the engine%s. Lower the rate, or validate at a load the "
                      "backend sustains.", r.measured.q[SIM_Q_QUEUE].p99, VF_MAX_QUEUE_P99,
                 r.predicted_overloaded ? "" : "; the prediction kept up, so the latency errors mostly measure that");
    if (r.predicted_run) out_kv_num(doc, "predicted_run", "predicted run", (double)r.predicted_run, OUT_INT);
    if (r.measured_run) out_kv_num(doc, "measured_run", "measured run", (double)r.measured_run, OUT_INT);
    rc = cli_emit(doc, c.format);
    out_doc_free(doc);
out:
    cli_sink_close(&kp);
    cli_sink_close(&km);
    db_close(d);
    return rc;
}
