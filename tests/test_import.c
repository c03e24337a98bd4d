/* test_import.c: the benchmark-client importers (db/import_*.c) on small samples shaped like
 * each tool's output (tests/data; values made up, consistent within each file): the metrics in
 * kvplan's names and SI units, the setting carried for re-simulation, and located errors for
 * broken files. Expected values are the samples' figures converted by hand. */
#include "tests.h"
#include "../db/db_import.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
}
END_TEST

START_TEST(cli_applies_the_setting)
{
    static char out[65536], errs[4096];
    char args[2048];
    const char *db = t_write("import.db", "");
    remove(db);
    snprintf(args, sizeof args, "import '%s' --scenario '%s/chat.yaml' --db '%s' --format json", data("sglang-bench.jsonl"),
             getenv("KVPLAN_LIBRARY"), db);
    ck_assert_int_eq(t_run(args, out, sizeof out, errs, sizeof errs), 0);
    ck_assert_msg(strstr(out, "closed loop, 16 clients; 320 requests; prompt 1024 and output 256 tokens (means)"), "%s", out);
    snprintf(args, sizeof args, "import '%s' --scenario '%s/chat.yaml' --db '%s' --format json", data("mlperf-offline-summary.txt"),
             getenv("KVPLAN_LIBRARY"), db);
    ck_assert_int_eq(t_run(args, out, sizeof out, errs, sizeof errs), 0);
    ck_assert_msg(strstr(out, "offline; 24576 requests; prompt ? and output 300 tokens (means)"), "%s", out);
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
    return su;
}
