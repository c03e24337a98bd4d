/* test_verify.c: the verify loop: the calibration fit recovers known coefficients, the
 * importers read vLLM's formats (and refuse broken ones), and calibrate / validate / import /
 * compare work end to end. Importer inputs are in tests/data, written from the formats' docs. */
#include "tests.h"
#include "../backend/be_cuda.h"
#include "../backend/be_calibrate.h"
#include "../db/db_import.h"
#include "../model/kv_model.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char out[1 << 16], err[1 << 14];

static double metric(const db_import *im, const char *name)
{
    for (int i = 0; i < im->n; i++) if (!strcmp(im->m[i].name, name)) return im->m[i].value;
    return NAN;
}

START_TEST(fit_recovers_known_coefficients)
{
    /* Synthetic "measurements" from a profile with known coefficients; the fit starting from the
     * defaults must find coefficients that predict them again. */
    scn_scenario s;
    char path[600];
    snprintf(path, sizeof path, "%s/tiny-cpu.yaml", getenv("KVPLAN_LIBRARY"));
    scn_error e;
    ck_assert_int_eq(scn_scenario_load(path, NULL, 0, &s, &e), SCN_OK);
    sim_choice c = sim_choice_first(&s);
    scn_scenario truth = s;
    truth.hardware.eff_bandwidth = 0.55;
    truth.hardware.eff_compute = 0.35;
    truth.hardware.eff_attention = 0.05;
    truth.hardware.kernel_overhead = 3e-6;
    truth.hardware.step_overhead = 2e-4;
    static be_calibration cal;
    memset(&cal, 0, sizeof cal);
    cal.fit.memory_bandwidth = s.hardware.memory_bandwidth;
    cal.fit.gemm_dtype = s.model.weight_dtype;
    cal.fit.gemm_flops = s.hardware.flops[s.model.weight_dtype];
    int pts[][3] = {{1, 1, 128}, {1, 1, 1536}, {8, 1, 512}, {32, 1, 128}, {32, 1, 1536}, {1, 64, 0}, {1, 512, 0}, {1, 256, 512}};
    kv_cache_cfg cfg = kv_cache_cfg_make(&truth, c.kv_dtype, 0, 0);
    for (size_t i = 0; i < sizeof pts / sizeof pts[0]; i++) {
        kv_seq_work w[32];
        for (int j = 0; j < pts[i][0]; j++) w[j] = (kv_seq_work){pts[i][1], pts[i][2]};
        cal.pts[cal.n] = (be_cal_point){pts[i][0], pts[i][1], pts[i][2], kv_step_time(&truth, &cfg, c.attention, w, pts[i][0]).seconds, 0, ""};
        cal.n++;
    }
    be_fit_points(&s, &c, &cal);
    ck_assert_msg(cal.rms_log_error < 0.01, "rms log error %g", cal.rms_log_error);
    for (int i = 0; i < cal.n; i++)
        ck_assert_msg(fabs(cal.pts[i].predicted / cal.pts[i].measured - 1) < 0.02, "point %d off by %g", i,
                      cal.pts[i].predicted / cal.pts[i].measured - 1);
    /* The coefficients themselves are not all identifiable from step times (bandwidth
     * efficiency trades against the fixed overheads at small batches), so the fit promises
     * predictions, not the generating values; it stays within its bounds. */
    ck_assert(cal.fit.eff_bandwidth > 0 && cal.fit.eff_bandwidth <= 1);
    ck_assert(cal.fit.eff_compute > 0 && cal.fit.eff_compute <= 1);
}
END_TEST

START_TEST(imports_vllm_benchmark_json)
{
    db_import im;
    char e[512];
    char path[600];
    snprintf(path, sizeof path, "%s/data/vllm-bench.json", getenv("KVPLAN_TESTS"));
    ck_assert_int_eq(db_import_file(path, &im, e, sizeof e), 0);
    ck_assert_str_eq(im.format, "vllm-benchmark");
    ck_assert(metric(&im, "requests") == 1000);
    ck_assert(metric(&im, "throughput_req_per_s") == 7.619);
    ck_assert(fabs(metric(&im, "ttft_mean_s") - 0.0845) < 1e-12);
    ck_assert(fabs(metric(&im, "ttft_p50_s") - 0.0612) < 1e-12);   /* median */
    ck_assert(fabs(metric(&im, "tpot_p99_s") - 0.0338) < 1e-12);
    ck_assert(fabs(metric(&im, "e2e_p99_s") - 15.0239) < 1e-12);    /* e2el */
    ck_assert(fabs(metric(&im, "input_tok_per_s") - 812345 / 131.25) < 1e-9);
    /* Broken inputs are refused with where and why. */
    ck_assert_int_eq(db_import_text("{\"completed\": 10, \"duration\": 5,\n \"mean_ttft_ms\": }", "t.json", &im, e, sizeof e), -1);
    ck_assert_msg(strstr(e, "t.json:2:") && strstr(e, "malformed JSON"), "%s", e);
    ck_assert_int_eq(db_import_text("{\"completed\": 10, \"duration\": 5}", "t.json", &im, e, sizeof e), -1);
    ck_assert_msg(strstr(e, "'mean_ttft_ms' is missing"), "%s", e);
    ck_assert_int_eq(db_import_file("/nonexistent.json", &im, e, sizeof e), -2);
}
END_TEST

START_TEST(imports_prometheus_metrics)
{
    db_import im;
    char e[512], path[600];
    snprintf(path, sizeof path, "%s/data/vllm-metrics.prom", getenv("KVPLAN_TESTS"));
    ck_assert_int_eq(db_import_file(path, &im, e, sizeof e), 0);
    ck_assert_str_eq(im.format, "prometheus");
    ck_assert(metric(&im, "requests") == 100);                     /* summed over finished_reason */
    ck_assert(fabs(metric(&im, "ttft_mean_s") - 0.056) < 1e-12);   /* sum / count */
    /* histogram_quantile by hand: p50 has rank 50, the end of the (0.04, 0.06] bucket: 0.06.
     * p90: rank 90, the end of (0.06, 0.08]: 0.08. p99: rank 99 in (0.08, 0.1] holding 90..100:
     * 0.08 + 0.02 * 9 / 10 = 0.098. */
    ck_assert(fabs(metric(&im, "ttft_p50_s") - 0.06) < 1e-12);
    ck_assert(fabs(metric(&im, "ttft_p90_s") - 0.08) < 1e-12);
    ck_assert(fabs(metric(&im, "ttft_p99_s") - 0.098) < 1e-12);
    /* TPOT p50: rank 12450 in (0.01, 0.025] holding 1000..24000: 0.01 + 0.015 * 11450 / 23000. */
    ck_assert(fabs(metric(&im, "tpot_p50_s") - (0.01 + 0.015 * 11450.0 / 23000)) < 1e-12);
    ck_assert(metric(&im, "kv_util_at_scrape") == 0.42);
    ck_assert(metric(&im, "prefix_hit_rate") == 0.25);
    ck_assert(metric(&im, "preemptions") == 3);
    /* Truncated and malformed scrapes are refused. */
    ck_assert_int_eq(db_import_text("vllm:time_to_first_token_seconds_bucket{le=\"0.1\"} 5\n"
                                    "vllm:time_to_first_token_seconds_sum 0.3\n", "cut.prom", &im, e, sizeof e), -1);
    ck_assert_msg(strstr(e, "truncated"), "%s", e);
    ck_assert_int_eq(db_import_text("# TYPE x gauge\nvllm:num_requests_running{a=\"b\" 3\n", "bad.prom", &im, e, sizeof e), -1);
    ck_assert_msg(strstr(e, "bad.prom:2: not a Prometheus sample line"), "%s", e);
    ck_assert_int_eq(db_import_text("vllm:e2e_request_latency_seconds_bucket{le=\"1\"} 5\n"
                                    "vllm:e2e_request_latency_seconds_bucket{le=\"2\"} 3\n"
                                    "vllm:e2e_request_latency_seconds_bucket{le=\"+Inf\"} 5\n"
                                    "vllm:e2e_request_latency_seconds_sum 4\nvllm:e2e_request_latency_seconds_count 5\n",
                                    "dec.prom", &im, e, sizeof e), -1);
    ck_assert_msg(strstr(e, "decrease"), "%s", e);
    ck_assert_int_eq(db_import_text("node_cpu_seconds_total 5\n", "node.prom", &im, e, sizeof e), -1);
    ck_assert_msg(strstr(e, "no vllm: metrics"), "%s", e);
}
END_TEST

static int run(const char *fmt, const char *a, const char *b)
{
    char args[4096];
    snprintf(args, sizeof args, fmt, a, b);
    return t_run(args, out, sizeof out, err, sizeof err);
}

START_TEST(calibrate_validate_import_compare)
{
    char db[600], yaml[600], sc[700], data[600], cal2[1300];
    snprintf(db, sizeof db, "%s", t_write("verify.db", ""));
    unlink(db);
    snprintf(yaml, sizeof yaml, "%s", t_write("mine.calibrated.yaml", ""));
    /* A smaller tiny-cpu run keeps the test quick. */
    snprintf(sc, sizeof sc, "%s/tiny-cpu.yaml --set workload.requests=30", getenv("KVPLAN_LIBRARY"));
    ck_assert_int_eq(run("calibrate --backend cpu --db %s --out %s --format json", db, yaml), 0);
    json_t *root = json_loads(out, 0, NULL);
    ck_assert_ptr_nonnull(root);
    ck_assert_int_eq(json_array_size(json_object_get(root, "points")), 16);
    json_decref(root);
    /* The profile it wrote loads as hardware and says it is calibrated. */
    scn_scenario s;
    scn_error e;
    char set[700];
    snprintf(set, sizeof set, "hardware=%s", yaml);
    const char *sets[] = {set};
    char path[600];
    snprintf(path, sizeof path, "%s/tiny-cpu.yaml", getenv("KVPLAN_LIBRARY"));
    ck_assert_int_eq(scn_scenario_load(path, sets, 1, &s, &e), SCN_OK);
    ck_assert(s.hardware.calibrated);
    ck_assert(s.hardware.memory == 1.0 * GIB);   /* the rest comes from the profile it extends */
    /* validate reuses the stored calibration, and stores a predicted and a measured run. */
    ck_assert_int_eq(run("validate %s --db %s --format json", sc, db), 0);
    root = json_loads(out, 0, NULL);
    ck_assert_ptr_nonnull(root);
    json_t *v = json_object_get(root, "validation");
    ck_assert_str_eq(json_string_value(json_object_get(v, "calibrated_now")), "earlier (stored)");
    ck_assert_int_eq(json_integer_value(json_object_get(v, "predicted_run")), 1);
    ck_assert_int_eq(json_integer_value(json_object_get(v, "measured_run")), 2);
    ck_assert_int_eq(json_array_size(json_object_get(root, "comparison")), 11);
    json_decref(root);
    ck_assert_int_eq(run("compare 1 2 --db %s --format csv%s", db, ""), 0);
    ck_assert_msg(strstr(out, "metric,a,b,b_over_a_minus_1\nrequests,30,30,0\n"), "%s", out);
    /* import, then fit a calibration to the imported run by re-simulation. */
    snprintf(data, sizeof data, "%s/data/vllm-bench.json", getenv("KVPLAN_TESTS"));
    ck_assert_int_eq(run("import %s --db %s", data, db), 0);
    ck_assert_msg(strstr(out, "run id") && strstr(out, "3"), "%s", out);
    snprintf(cal2, sizeof cal2, "%s --out %s.2", db, yaml);
    char chat[700];
    snprintf(chat, sizeof chat, "%s/chat.yaml --set workload.requests=300 --set options.kv_layout=paged", getenv("KVPLAN_LIBRARY"));
    char args[4096];
    snprintf(args, sizeof args, "calibrate --from 3 --scenario %s --db %s --format json", chat, cal2);
    ck_assert_int_eq(t_run(args, out, sizeof out, err, sizeof err), 0);
    root = json_loads(out, 0, NULL);
    ck_assert_ptr_nonnull(root);
    json_t *pts = json_object_get(root, "points");
    ck_assert_int_eq(json_array_size(pts), 2);   /* the run's mean TTFT and mean TPOT */
    /* TPOT depends smoothly on the coefficients: the fit matches it closely. */
    double tpot_err = json_real_value(json_object_get(json_array_get(pts, 1), "error"));
    ck_assert_msg(fabs(tpot_err) < 0.05, "tpot error %g", tpot_err);
    json_decref(root);
    /* Failures: a predicted run cannot calibrate; a broken import stores nothing. */
    snprintf(args, sizeof args, "calibrate --from 1 --scenario %s --db %s", chat, cal2);
    ck_assert_int_eq(t_run(args, out, sizeof out, err, sizeof err), 65);
    ck_assert_int_eq(run("import %s --db %s", t_write("broken.json", "{\"completed\": 3"), db), 65);
    ck_assert_int_eq(run("runs --db %s --format csv%s", db, ""), 0);
    int rows = 0;
    for (const char *p = out; (p = strchr(p, '\n')); p++) rows++;
    ck_assert_int_eq(rows, 4);   /* header + 3 runs */
    /* Without a usable device (no plugin, no driver, no GPU) the cuda backend is refused with 69;
     * where one is there, the run completes. */
    char why[1400];
    ck_assert_int_eq(run("run %s --backend cuda --no-db%s", path, ""), be_cuda_device_count(why, sizeof why) > 0 ? 0 : 69);
}
END_TEST

Suite *suite_verify(void)
{
    Suite *su = suite_create("verify");
    TCase *tc = tcase_create("loop");
    /* The loop takes about 20 s of CPU (calibration micro-benchmarks, two CPU-backend runs); on
     * a 2-core machine shared with 8 busy processes that is minutes of wall time. The timeout
     * only has to catch a hang. */
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, fit_recovers_known_coefficients);
    tcase_add_test(tc, imports_vllm_benchmark_json);
    tcase_add_test(tc, imports_prometheus_metrics);
    tcase_add_test(tc, calibrate_validate_import_compare);
    suite_add_tcase(su, tc);
    return su;
}
