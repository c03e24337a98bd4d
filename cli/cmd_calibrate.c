/* cmd_calibrate.c: `kvplan calibrate`: measure a backend (or fit stored measured runs) and
 * write the calibrated hardware profile as YAML and into the database. */
#include "cli_run.h"
#include "../backend/be_calibrate.h"

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

char *cli_fit_json(const be_fit *f)
{
    json_t *j = json_pack("{s:f, s:s, s:f, s:f, s:f, s:f, s:f, s:f}", "memory_bandwidth", f->memory_bandwidth,
                          "gemm_dtype", scn_dtype_name(f->gemm_dtype), "gemm_flops", f->gemm_flops, "eff_bandwidth",
                          f->eff_bandwidth, "eff_compute", f->eff_compute, "eff_attention", f->eff_attention,
                          "kernel_overhead_s", f->kernel_overhead, "step_overhead_s", f->step_overhead);
    char *s = j ? json_dumps(j, JSON_COMPACT | JSON_REAL_PRECISION(17)) : NULL;
    json_decref(j);
    return s;
}

int cli_fit_parse(const char *text, be_fit *f)
{
    json_t *j = json_loads(text, 0, NULL);
    const char *dt = NULL;
    int rc = -1;
    if (j && json_unpack(j, "{s:F, s:s, s:F, s:F, s:F, s:F, s:F, s:F}", "memory_bandwidth", &f->memory_bandwidth,
                         "gemm_dtype", &dt, "gemm_flops", &f->gemm_flops, "eff_bandwidth", &f->eff_bandwidth,
                         "eff_compute", &f->eff_compute, "eff_attention", &f->eff_attention, "kernel_overhead_s",
                         &f->kernel_overhead, "step_overhead_s", &f->step_overhead) == 0 &&
        scn_dtype_parse(dt, &f->gemm_dtype) == 0)
        rc = 0;
    json_decref(j);
    return rc;
}

void cli_hostname(char *buf, size_t n)
{
    if (gethostname(buf, n) != 0) snprintf(buf, n, "unknown");
    buf[n - 1] = 0;
}

static char *points_json(const be_calibration *cal)
{
    json_t *a = json_array();
    for (int i = 0; i < cal->n; i++) {
        const be_cal_point *p = &cal->pts[i];
        json_array_append_new(a, json_pack("{s:i, s:i, s:i, s:f, s:f}", "seqs", p->seqs, "new_tokens", p->new_tokens,
                                           "context", p->context, "measured_s", p->measured, "predicted_s", p->predicted));
    }
    char *s = json_dumps(a, JSON_COMPACT | JSON_REAL_PRECISION(17));
    json_decref(a);
    return s;
}

/* Writes the calibrated profile: the base profile's fields, overridden by the fit. */
static int write_yaml(const char *path, const char *name, const scn_hardware *base, const be_fit *f,
                      const be_calibration *cal, const char *host, const char *when, const char *backend)
{
    FILE *fp = fopen(path, "w");
    if (!fp) { fprintf(stderr, "kvplan: cannot create %s: %s\n", path, strerror(errno)); return CLI_EX_CANTCREAT; }
    fprintf(fp, "# %s: written by `kvplan calibrate --backend %s` on %s, %s.\n", name, backend, host, when);
    fprintf(fp, "# Measured: copy bandwidth %.4g GB/s (bytes read + written), best %s GEMM %.4g TFLOP/s.\n",
            f->memory_bandwidth / 1e9, scn_dtype_name(f->gemm_dtype), f->gemm_flops / 1e12);
    if (cal && cal->n)
        fprintf(fp, "# Fitted over %d measured steps: rms log error %.3f, median |error| %.1f %%.\n", cal->n,
                cal->rms_log_error, 100 * cal->median_abs_error);
    fprintf(fp, "extends: %s\nname: %s\n", base->name, name);
    fprintf(fp, "memory_bandwidth: %.6g GB/s\n", f->memory_bandwidth / 1e9);
    fprintf(fp, "compute: {%s: %.6g GFLOPS}\n", scn_dtype_name(f->gemm_dtype), f->gemm_flops / 1e9);
    fprintf(fp, "efficiency: {memory_bandwidth: %.6g, compute: %.6g, attention: %.6g, interconnect: %.6g}\n",
            f->eff_bandwidth, f->eff_compute, f->eff_attention, base->eff_link);
    fprintf(fp, "overhead: {kernel_launch: %.6g us, step: %.6g us, runtime_memory: %.6g MiB}\n", f->kernel_overhead * 1e6,
            f->step_overhead * 1e6, base->runtime_memory / 1048576.0);
    fprintf(fp, "calibrated: true\n");
    if (fclose(fp) != 0) { fprintf(stderr, "kvplan: writing %s failed: %s\n", path, strerror(errno)); return CLI_EX_CANTCREAT; }
    return CLI_OK;
}

static void on_progress(void *ud, long done, long total) { cli_progress_update(ud, done, total); }

int cli_calibrate_backend(const char *backend, const scn_scenario *s, be_calibration *cal)
{
    char err[1024];
    const be_ops *ops = be_find(backend, err, sizeof err);
    if (!ops) { fprintf(stderr, "kvplan: %s\n", err); return CLI_EX_UNAVAILABLE; }
    sim_choice ch = sim_choice_first(s);
    cli_progress bar;
    cli_progress_init(&bar, "calibrating");
    be_status st = be_calibrate(ops, s, &ch, cal, on_progress, &bar, err, sizeof err);
    cli_progress_end(&bar);
    if (st != BE_OK) { fprintf(stderr, "kvplan: calibrating %s: %s\n", backend, err); return cli_exit_for_be(st); }
    return CLI_OK;
}

int cli_store_calibration(db *d, const char *db_path, const char *name, const char *base, const char *backend,
                          const char *source, const be_calibration *cal, long *id)
{
    *id = 0;
    if (!d) return CLI_OK;
    char host[256], when[32], err[1024];
    cli_hostname(host, sizeof host);
    db_now_iso(when, sizeof when);
    char *fj = cli_fit_json(&cal->fit), *pj = points_json(cal);
    db_calibration rec = {.name = name, .base = base, .backend = backend, .host = host, .created = when,
                          .source = source, .fit_json = fj ? fj : "{}", .points_json = pj ? pj : "[]",
                          .rms_log_error = cal->rms_log_error, .median_abs_error = cal->median_abs_error};
    db_status st = db_calibration_insert(d, &rec, id, err, sizeof err);
    free(fj);
    free(pj);
    if (st != DB_OK) { fprintf(stderr, "kvplan: %s: storing the calibration failed: %s\n", db_path, err); return cli_exit_for_db(st); }
    return CLI_OK;
}

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
}

/* --from RUN: fit to stored measured runs by re-simulating the scenario (fit_runs.c). */
int cli_fit_runs(db *d, const long *runs, int n_runs, const scn_scenario *s, be_calibration *cal);

int cmd_calibrate(int argc, char **argv)
{
    cli_common c = {.format = OUT_TABLE};
    cli_run_flags f = {.seed = -1, .interval = 1.0, .backend = ""};
    const char *name = NULL, *out_path = NULL;
    long runs[32];
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
            if (n_runs == 32) return cli_usage_error("calibrate", "at most 32 --from runs");
            if (!cli_flag_missing_value() && cli_parse_long("--from", v, 1, 0x7fffffffffffffffL, &runs[n_runs++])) return CLI_EX_USAGE;
        } else return cli_usage_error("calibrate", "unexpected argument '%s'", argv[i]);
        if (cli_flag_missing_value()) return CLI_EX_USAGE;
    }
    if (help) { fputs(cli_usage_of("calibrate"), stdout); return CLI_OK; }
    const char *backend = f.backend[0] ? f.backend : NULL;
    if (!backend && !n_runs) return cli_usage_error("calibrate", "say what to calibrate: --backend cpu|cuda, or --from RUN");
    if (backend && n_runs) return cli_usage_error("calibrate", "--backend measures; --from fits stored runs: choose one");
    if (n_runs && !c.scenario) return cli_usage_error("calibrate", "--from needs --scenario: the scenario the runs measured");
    if (n_runs && f.no_db) return cli_usage_error("calibrate", "--from reads runs from the database; drop --no-db");
    char def[1200];
    if (!c.scenario) {
        snprintf(def, sizeof def, "%s/%s", scn_library_dir(), !strcmp(backend, "cpu") ? "tiny-cpu.yaml" : "gpu-decode.yaml");
        c.scenario = def;
    }
    scn_scenario s;
    int rc = cli_load(&c, &s);
    if (rc) return rc;
    db *d;
    const char *db_path;
    if ((rc = cli_open_db(&f, &d, &db_path))) return rc;
    static be_calibration cal;
    rc = n_runs ? cli_fit_runs(d, runs, n_runs, &s, &cal) : cli_calibrate_backend(backend, &s, &cal);
    if (rc) { db_close(d); return rc; }
    char prof[128], path[1400], host[256], when[32], source[400] = "microbenchmarks";
    snprintf(prof, sizeof prof, "%s", name ? name : "");
    if (!name) snprintf(prof, sizeof prof, "%.100s.calibrated", s.hardware.name);
    if (out_path) snprintf(path, sizeof path, "%s", out_path);
    else snprintf(path, sizeof path, "%s/hardware/%s.yaml", scn_library_dir(), prof);
    if (n_runs) {
        size_t used = (size_t)snprintf(source, sizeof source, "runs");
        for (int i = 0; i < n_runs && used < sizeof source; i++)
            used += (size_t)snprintf(source + used, sizeof source - used, "%s%ld", i ? "," : " ", runs[i]);
    }
    cli_hostname(host, sizeof host);
    db_now_iso(when, sizeof when);
    long id = 0;
    if ((rc = write_yaml(path, prof, &s.hardware, &cal.fit, &cal, host, when, backend ? backend : "import")) ||
        (rc = cli_store_calibration(d, db_path, prof, s.hardware.name, backend ? backend : "import", source, &cal, &id))) {
        db_close(d);
        return rc;
    }
    db_close(d);
    out_doc *doc = out_doc_init();
    if (!doc) return CLI_EX_INTERNAL;
    cli_report_calibration(doc, &cal);
    out_section(doc, "written", "Written");
    out_kv_str(doc, "profile", "profile (name it as hardware:)", prof);
    out_kv_str(doc, "file", "file", path);
    if (id) out_kv_num(doc, "calibration_id", "calibration id", (double)id, OUT_INT);
    rc = cli_emit(doc, c.format);
    out_doc_free(doc);
    return rc;
}
