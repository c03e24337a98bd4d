/* cmd_calibrate.c: `kvplan calibrate`: parses the flags, measures a backend or fits stored
 * measured runs (verify/vf_profile.c: vf_calibrate), and prints the fit and where the profile
 * went (the user's data directory unless --out says otherwise). */
#include "cli_run.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void cli_report_calibration(out_doc *doc, const be_calibration *cal)
{
    static const out_col cols[] = {
        {"point", "point", OUT_STR}, {"seqs", "seqs", OUT_INT}, {"new_tokens", "new tokens", OUT_INT},
        {"context", "context", OUT_INT}, {"measured_s", "measured", OUT_SECONDS}, {"predicted_s", "predicted", OUT_SECONDS},
        {"error", "error", OUT_FRAC},
    };
    out_table(doc, "points", "Measured against the fitted model", 7, cols);
    for (int i = 0; i < cal->n; i++) {
        const be_cal_point *p = &cal->pts[i];
        out_cell_str(doc, p->label[0] ? p->label : p->new_tokens == 1 ? "decode step" : "prefill step");
        out_cell_num(doc, p->label[0] ? NAN : p->seqs);
        out_cell_num(doc, p->label[0] ? NAN : p->new_tokens);
        out_cell_num(doc, p->label[0] ? NAN : p->context);
        out_cell_num(doc, p->measured);
        out_cell_num(doc, p->predicted);
        out_cell_num(doc, p->predicted / p->measured - 1);
    }
    const be_fit *f = &cal->fit;
    out_section(doc, "fit", "Fitted profile");
    out_kv_num(doc, "memory_bandwidth", "copy bandwidth (B/s)", f->memory_bandwidth, OUT_NUM);
    out_kv_num(doc, "gemm_flops", "best GEMM (FLOP/s)", f->gemm_flops, OUT_NUM);
    out_kv_num(doc, "eff_bandwidth", "efficiency: bandwidth", f->eff_bandwidth, OUT_FRAC);
    out_kv_num(doc, "eff_compute", "efficiency: GEMM", f->eff_compute, OUT_FRAC);
    out_kv_num(doc, "eff_attention", "efficiency: attention", f->eff_attention, OUT_FRAC);
    out_kv_num(doc, "kernel_overhead_s", "overhead per kernel", f->kernel_overhead, OUT_SECONDS);
    out_kv_num(doc, "step_overhead_s", "overhead per step", f->step_overhead, OUT_SECONDS);
    out_kv_num(doc, "rms_log_error", "rms log error", cal->rms_log_error, OUT_NUM);
    out_kv_num(doc, "median_abs_error", "median |error|", cal->median_abs_error, OUT_FRAC);
    /* Runs predicted by a fit to the other runs (calibrate --from with two runs or more). */
    double held[BE_CAL_POINTS];
    int nh = 0;
    for (int i = 0; i < cal->n; i++)
        if (strstr(cal->pts[i].label, "(held out)")) held[nh++] = fabs(cal->pts[i].predicted / cal->pts[i].measured - 1);
    for (int i = 1; i < nh; i++)
        for (int j = i; j > 0 && held[j - 1] > held[j]; j--) { double x = held[j]; held[j] = held[j - 1]; held[j - 1] = x; }
    if (nh) out_kv_num(doc, "heldout_median_abs_error", "held out: median |error|",
                       nh % 2 ? held[nh / 2] : (held[nh / 2 - 1] + held[nh / 2]) / 2, OUT_FRAC);
}

int cmd_calibrate(int argc, char **argv)
{
    cli_common c = {.format = OUT_TABLE};
    cli_run_flags f = {.seed = -1, .interval = 1.0, .backend = ""};
    const char *name = NULL, *out_path = NULL;
    long runs[VF_FIT_RUNS];
    int n_runs = 0, help = 0;
    for (int i = 1; i < argc; i++) {
        int r = cli_common_flag(&c, argc, argv, &i, &help);
        if (r == 0) r = cli_run_flag("calibrate", &f, argc, argv, &i);
        if (r < 0) return CLI_EX_USAGE;
        if (r) continue;
        const char *v;
        if ((v = cli_flag_value(argc, argv, &i, "--name"))) name = v;
        else if ((v = cli_flag_value(argc, argv, &i, "--out"))) out_path = v;
        else if ((v = cli_flag_value(argc, argv, &i, "--scenario"))) c.scenario = v;
        else if ((v = cli_flag_value(argc, argv, &i, "--from"))) {
            if (n_runs == VF_FIT_RUNS) return cli_usage_error("calibrate", "at most %d --from runs", VF_FIT_RUNS);
            if (!cli_flag_missing_value(v) && cli_parse_long("--from", v, 1, 0x7fffffffffffffffL, &runs[n_runs++])) return CLI_EX_USAGE;
        } else return cli_usage_error("calibrate", "unexpected argument '%s'", argv[i]);
        if (cli_flag_missing_value(v)) return CLI_EX_USAGE;
    }
    if (help) { fputs(cli_usage_of("calibrate"), stdout); return CLI_OK; }
    const char *backend = f.backend[0] ? f.backend : NULL;
    if (!backend && !n_runs) return cli_usage_error("calibrate", "say what to calibrate: --backend cpu|cuda, or --from RUN");
    if (backend && n_runs) return cli_usage_error("calibrate", "--backend measures; --from fits stored runs: choose one");
    if (n_runs && !c.scenario) return cli_usage_error("calibrate", "--from needs --scenario: the scenario the runs measured");
    if (n_runs && f.no_db) return cli_usage_error("calibrate", "--from reads runs from the database; drop --no-db");
    char def[4200], lib[4000];
    if (!c.scenario) {
        scn_library_dir(lib, sizeof lib);
        snprintf(def, sizeof def, "%s/%s", lib, !strcmp(backend, "cpu") ? "tiny-cpu.yaml" : "gpu-decode.yaml");
        c.scenario = def;
    }
    scn_scenario s;
    int rc = cli_load(&c, &s);
    if (rc) return rc;
    db *d;
    const char *db_path;
    if ((rc = cli_open_db(&f, &d, &db_path))) return rc;
    cli_progress bar;
    cli_progress_init(&bar, "calibrating");
    vf_calibrate_req rq = {.s = &s, .backend = backend, .runs = runs, .n_runs = n_runs, .d = d, .name = name,
                           .out_path = out_path, .progress = cli_progress_cb, .ud = &bar};
    vf_calibrate_result *r = malloc(sizeof *r);
    char err[1500];
    vf_status st = r ? vf_calibrate(&rq, r, err, sizeof err) : VF_E_INTERNAL;
    if (!r) snprintf(err, sizeof err, "out of memory");
    cli_progress_end(&bar);
    db_close(d);
    if (st) { free(r); return cli_fail_vf(st, err); }
    out_doc *doc = out_doc_init();
    rc = CLI_EX_INTERNAL;
    if (doc) {
        cli_report_calibration(doc, &r->cal);
        out_section(doc, "written", "Written");
        out_kv_str(doc, "profile", "profile (name it as hardware:)", r->name);
        out_kv_str(doc, "file", "file", r->path);
        if (r->calibration_id) out_kv_num(doc, "calibration_id", "calibration id", (double)r->calibration_id, OUT_INT);
        rc = cli_emit(doc, c.format);
        out_doc_free(doc);
    }
    free(r);
    return rc;
}
