/* test_import.c: the benchmark-client importers (db/import_*.c) on small samples shaped like
 * each tool's output (tests/data; values made up, consistent within each file): the metrics in
 * kvplan's names and SI units, the setting carried for re-simulation, and located errors for
 * broken files. Expected values are the samples' figures converted by hand. */
#include "tests.h"
#include "../db/db_import.h"
#include "../verify/vf.h"
#include "../sim/sim.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static db_import im;

static const char *data(const char *name)
{
    static char p[1024];
    snprintf(p, sizeof p, "%s/data/%s", getenv("KVPLAN_TESTS"), name);
    return p;
}

static void load(const char *name, const char *format)
{
    char err[1024];
    int rc = db_import_file(data(name), &im, err, sizeof err);
    ck_assert_msg(rc == 0, "%s: %s", name, err);
    ck_assert_str_eq(im.format, format);
}

static double get(const char *name)
{
    for (int i = 0; i < im.n; i++) if (!strcmp(im.m[i].name, name)) return im.m[i].value;
    return NAN;
}

#define NEAR(name, want) ck_assert_msg(fabs(get(name) - (double)(want)) <= 1e-12 * fabs((double)(want)) + 1e-15, "%s = %.17g, want %.17g", \
                                       name, get(name), (double)(want))

START_TEST(aiperf_export)
{
    load("aiperf-export.json", "aiperf");
    NEAR("requests", 1000);
    NEAR("duration_s", 80);
    NEAR("throughput_req_per_s", 12.5);
    NEAR("output_tok_per_s", 1600);
    NEAR("ttft_mean_s", 0.120);
    NEAR("ttft_p99_s", 0.240);
    NEAR("tpot_mean_s", 0.019);   /* inter_token_latency: per request, i.e. TPOT */
    NEAR("e2e_p95_s", 3.000);
    NEAR("input_tok_per_s", 512 * 12.5);
    NEAR("setting_concurrency", 32);
    NEAR("setting_input_tokens_mean", 512);
    NEAR("setting_output_tokens_mean", 128);
    ck_assert(isnan(get("setting_request_rate_per_s")));
}
END_TEST

START_TEST(genai_perf_export)
{
    load("genai-perf-export.json", "genai-perf");
    NEAR("throughput_req_per_s", 3.2);
    NEAR("ttft_p50_s", 0.044);
    NEAR("tpot_p90_s", 0.0099);
    NEAR("e2e_mean_s", 2.4805);
    NEAR("setting_concurrency", 8);
    NEAR("setting_output_tokens_mean", 256);
    ck_assert(isnan(get("e2e_p25_s")));   /* quartiles are not kept */
}
END_TEST

START_TEST(sglang_jsonl_last_record)
{
    load("sglang-bench.jsonl", "sglang-bench");
    /* The second (latest) record: rate Infinity (Python's bare token) with 16 clients. */
    NEAR("requests", 320);
    NEAR("duration_s", 50);
    NEAR("throughput_req_per_s", 6.4);
    NEAR("ttft_mean_s", 0.150);
    NEAR("itl_p95_s", 0.011);
    NEAR("e2e_p50_s", 2.48);
    NEAR("setting_concurrency", 16);
    NEAR("setting_input_tokens_mean", 327680.0 / 320);
    NEAR("setting_output_tokens_mean", 81920.0 / 320);
    ck_assert(isnan(get("setting_request_rate_per_s")));
    ck_assert(isnan(get("setting_offline")));
    /* One record pretty-printed over several lines is one record too. */
    char err[1024];
    const char *p = t_write("pretty.json", "{\n  \"completed\": 10,\n  \"duration\": 5.0,\n  \"request_rate\": Infinity,\n"
                                           "  \"max_concurrency\": null,\n  \"mean_e2e_latency_ms\": 250.0\n}\n");
    ck_assert_msg(db_import_file(p, &im, err, sizeof err) == 0, "%s", err);
    ck_assert_str_eq(im.format, "sglang-bench");
    NEAR("requests", 10);
    NEAR("e2e_mean_s", 0.25);
    NEAR("setting_offline", 1);
}
END_TEST

START_TEST(vllm_bench_serve)
{
    load("vllm-bench-serve.json", "vllm-bench-serve");
    NEAR("requests", 640);
    NEAR("ttft_p99_s", 0.7208);
    NEAR("e2e_mean_s", 6.3302);
    NEAR("input_tok_per_s", 655360.0 / 64);
    NEAR("setting_concurrency", 64);
    NEAR("setting_prompts", 640);
    NEAR("setting_input_tokens_mean", 1024);
    NEAR("setting_output_tokens_mean", 128);
    ck_assert(isnan(get("setting_offline")));   /* rate inf but capped: a closed loop */
    /* The older benchmark_serving file still goes to db_import.c's parser. */
    load("vllm-bench.json", "vllm-benchmark");
}
END_TEST

START_TEST(mlperf_summaries)
{
    load("mlperf-server-summary.txt", "mlperf-summary");
    NEAR("throughput_req_per_s", 12.4);
    NEAR("output_tok_per_s", 3720);
    NEAR("ttft_mean_s", 0.31);
    NEAR("ttft_p99_s", 1.05);
    NEAR("tpot_mean_s", 0.047);
    NEAR("tpot_p90_s", 0.055);
    NEAR("e2e_p50_s", 13.9);
    NEAR("setting_request_rate_per_s", 12.5);    /* Server: Poisson at target_qps */
    NEAR("setting_output_tokens_mean", 3720 / 12.4);
    NEAR("mlperf_result_valid", 1);
    ck_assert(isnan(get("setting_prompts")));
    load("mlperf-offline-summary.txt", "mlperf-summary");
    NEAR("throughput_req_per_s", 40.96);
    NEAR("output_tok_per_s", 12288);
    NEAR("setting_offline", 1);
    NEAR("setting_prompts", 24576);
    NEAR("setting_output_tokens_mean", 12288 / 40.96);
    ck_assert(isnan(get("setting_request_rate_per_s")));
    ck_assert(isnan(get("ttft_mean_s")));
}
END_TEST

/* A sample with one edit, written to a temp file; the import must fail with `expect` in the
 * message (after the file name). */
static void broken(const char *sample, const char *from, const char *to, const char *expect)
{
    char path[1024];
    snprintf(path, sizeof path, "%s", data(sample));
    FILE *f = fopen(path, "rb");
    ck_assert(f);
    static char buf[65536];
    size_t len = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[len] = 0;
    static char edited[70000];
    char *at = strstr(buf, from);
    ck_assert_msg(at, "'%s' not in %s", from, sample);
    snprintf(edited, sizeof edited, "%.*s%s%s", (int)(at - buf), buf, to, at + strlen(from));
    const char *p = t_write("broken-import", edited);
    char err[1024];
    ck_assert_int_eq(db_import_file(p, &im, err, sizeof err), -1);
    char want[1200];
    snprintf(want, sizeof want, "%s%s", p, expect);
    ck_assert_msg(strstr(err, want), "got '%s', expected '%s'", err, want);
}

START_TEST(broken_files_are_located)
{
    broken("aiperf-export.json", "\"avg\": 12.5", "\"avg\": \"fast\"", ": request_throughput.avg: expected a number");
    broken("aiperf-export.json", "{\"unit\": \"ms\", \"avg\": 120.0", "{\"unit\": \"fortnights\", \"avg\": 120.0",
           ": time_to_first_token.unit: expected a time unit");
    broken("genai-perf-export.json", "\"p50\": 44.0,", "\"p50\": 44.0,,", ":5:");   /* malformed JSON: line 5 */
    broken("sglang-bench.jsonl", "\"duration\": 50.0", "\"duration\": fifty", ":2:");
    broken("sglang-bench.jsonl", "\"duration\": 50.0", "\"duration\": -1", ":2: duration: expected numbers > 0");
    broken("vllm-bench-serve.json", "\"max_concurrency\": 64", "\"max_concurrency\": \"many\"",
           ": max_concurrency: expected a whole number");
    broken("vllm-bench-serve.json", "\"completed\": 640, ", "", ": completed: missing");
    broken("mlperf-server-summary.txt", "Mean First Token latency (ns)               : 310000000",
           "Mean First Token latency (ns)               : 3.1e8ns", ":36:47: mean first token latency (ns): expected a number");
    broken("mlperf-server-summary.txt", "Result is : VALID", "", ": no 'Result is :' line");
    broken("mlperf-offline-summary.txt", "Samples per second: 40.96\n", "", ": no 'Samples per second' line");
    /* Found by fuzz-ci: a negative throughput was accepted. Every importer's values must be
     * finite and >= 0, whichever parser read them. */
    broken("vllm-bench-serve.json", "\"output_throughput\": ", "\"output_throughput\": -",
           ": output_tok_per_s: -");
}
END_TEST

START_TEST(cli_applies_the_setting)
{
    static char out[65536], errs[4096];
    char args[2048];
    const char *dbp = t_write("import.db", "");
    remove(dbp);
    snprintf(args, sizeof args, "import '%s' --scenario '%s/chat.yaml' --db '%s' --format json", data("sglang-bench.jsonl"),
             getenv("KVPLAN_LIBRARY"), dbp);
    ck_assert_int_eq(t_run(args, out, sizeof out, errs, sizeof errs), 0);
    ck_assert_msg(strstr(out, "closed loop, 16 clients; 320 requests; prompt 1024 and output 256 tokens (means)"), "%s", out);
    snprintf(args, sizeof args, "import '%s' --scenario '%s/chat.yaml' --db '%s' --format json", data("mlperf-offline-summary.txt"),
             getenv("KVPLAN_LIBRARY"), dbp);
    ck_assert_int_eq(t_run(args, out, sizeof out, errs, sizeof errs), 0);
    ck_assert_msg(strstr(out, "offline; 24576 requests; prompt ? and output 300 tokens (means)"), "%s", out);
}
END_TEST

/* Stores a "measured" run made by the model itself with known coefficients under a benchmark
 * setting, with the setting entries an importer would have stored. */
static long store_synthetic(db *d, const scn_scenario *base, const scn_scenario *truth_hw, const char *const *names,
                            const double *values, int n)
{
    static scn_scenario sc;
    sc = *base;
    ck_assert_int_eq(vf_setting_apply(names, values, n, &sc, NULL, 0), 1);
    sc.hardware = truth_hw->hardware;
    sim_choice c = sim_choice_first(&sc);
    sim_metrics m;
    char err[1024];
    ck_assert_msg(sim_run_predicted(&sc, &c, &m, err, sizeof err) == SIM_OK, "%s", err);
    sim_metric_kv kv[SIM_METRICS_MAX + 16];
    int k = sim_metrics_list(&m, kv, SIM_METRICS_MAX);
    for (int i = 0; i < n; i++) kv[k++] = (sim_metric_kv){names[i], values[i], SIM_UNIT_NUMBER};
    db_run_rec rec = {.scenario = base, .kind = "measured", .executor = "import:test", .options_json = "{}",
                      .started = "a", .finished = "b", .metrics = kv, .n_metrics = k};
    long id = 0;
    ck_assert_msg(db_run_insert(d, &rec, &id, err, sizeof err) == DB_OK, "%s", err);
    return id;
}

START_TEST(calibrate_from_imports_with_held_out_runs)
{
    /* Three benchmark runs of one deployment (a single client, eight clients, Poisson 20/s) made
     * with known coefficients; the fit starts from the library's and each run is re-simulated
     * under its own setting. TPOT depends smoothly on the coefficients, so both the fitted and
     * the held-out predictions of it land close; the held-out points say so per run. */
    scn_scenario s, truth;
    char path[600];
    snprintf(path, sizeof path, "%s/tiny-cpu.yaml", getenv("KVPLAN_LIBRARY"));
    scn_error e;
    ck_assert_int_eq(scn_scenario_load(path, NULL, 0, &s, &e), SCN_OK);
    truth = s;
    truth.hardware.eff_bandwidth = 0.5;
    truth.hardware.step_overhead = 3e-4;
    const char *p = t_write("fit-imports.db", "");
    unlink(p);
    db_status st;
    char err[1024];
    db *d = db_open(p, &st, err, sizeof err);
    ck_assert_msg(d, "%s", err);
    const char *closed[] = {"setting_concurrency", "setting_prompts", "setting_input_tokens_mean", "setting_output_tokens_mean"};
    const char *open_[] = {"setting_request_rate_per_s", "setting_prompts", "setting_input_tokens_mean", "setting_output_tokens_mean"};
    double one[] = {1, 40, 200, 32}, eight[] = {8, 80, 200, 32}, poisson[] = {20, 80, 100, 48};
    long runs[3] = {store_synthetic(d, &s, &truth, closed, one, 4), store_synthetic(d, &s, &truth, closed, eight, 4),
                    store_synthetic(d, &s, &truth, open_, poisson, 4)};
    static be_calibration cal;
    ck_assert_msg(vf_fit_runs(d, runs, 3, &s, &cal, err, sizeof err) == VF_OK, "%s", err);
    db_close(d);
    ck_assert_int_eq(cal.n, 12);   /* TTFT and TPOT of three runs, fitted then held out */
    for (int i = 0; i < 12; i++) {
        const be_cal_point *pt = &cal.pts[i];
        bool held = strstr(pt->label, "(held out)") != NULL, tpot = strstr(pt->label, "tpot") != NULL;
        ck_assert_msg(held == (i >= 6), "%s", pt->label);
        /* The coordinate search trades bandwidth against the step overhead (both set a decode
         * step) and stops within a few percent of the truth on TPOT; TTFT is matched closely. */
        double err_rel = fabs(pt->predicted / pt->measured - 1);
        ck_assert_msg(err_rel < (tpot || held ? 0.10 : 0.05), "%s: %g vs %g", pt->label, pt->predicted, pt->measured);
    }
    /* Each run was simulated under its own setting: the eight clients' TTFT (queued behind each
     * other's prefills) is several times the single client's; one scenario's workload for all
     * three runs could not match both. */
    ck_assert_msg(cal.pts[2].measured > 4 * cal.pts[0].measured && cal.pts[2].predicted > 4 * cal.pts[0].predicted,
                  "ttft %g vs %g", cal.pts[2].predicted, cal.pts[0].predicted);
}
END_TEST

Suite *suite_import(void)
{
    Suite *su = suite_create("import");
    TCase *tc = tcase_create("formats");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, aiperf_export);
    tcase_add_test(tc, genai_perf_export);
    tcase_add_test(tc, sglang_jsonl_last_record);
    tcase_add_test(tc, vllm_bench_serve);
    tcase_add_test(tc, mlperf_summaries);
    tcase_add_test(tc, broken_files_are_located);
    tcase_add_test(tc, cli_applies_the_setting);
    suite_add_tcase(su, tc);
    TCase *fit = tcase_create("calibrate");
    tcase_set_timeout(fit, 300);
    tcase_add_test(fit, calibrate_from_imports_with_held_out_runs);
    suite_add_tcase(su, fit);
    return su;
}
