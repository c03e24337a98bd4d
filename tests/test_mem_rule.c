/* test_mem_rule.c: SGLang's reserve rule for the default mem_fraction_static (0.5.4 to 0.5.6,
 * `memory: {fraction_rule: sglang_reserve}`), checked against the rule worked by hand from its
 * source (sgl-project/sglang@469c63e python/sglang/srt/server_args.py,
 * ServerArgs._handle_gpu_memory_settings; docs/cost-model.md, "Memory budget and capacity"), the
 * KV budget it leaves, the scenario's own fraction winning, a located error for a rule the budget
 * cannot take, and which SGLang versions validate-published gives it. */
#include "tests.h"
#include "../model/kv_model.h"
#include "../planner/plan_published.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* A scenario that leaves the memory fraction to the engine. */
static void load_on(const char *model, const char *hardware, int tp, const char *engine, scn_scenario *s)
{
    char y[600];
    scn_error e;
    snprintf(y, sizeof y, "name: t\nmodel: %s\nhardware: %s\nengine: %s\ndeployment: {tensor_parallel: %d}\n"
             "workload: {requests: 10, arrival: {process: poisson, rate: 1/s}, prompt_tokens: 100, output_tokens: 10}\n",
             model, hardware, engine, tp);
    ck_assert_msg(t_load(y, NULL, 0, s, &e) == SCN_OK, "%s", e.msg);
}

/* The hardware profiles' memory is nvidia-smi's MiB figure, which is what SGLang reads. */
static double fraction_on(const char *hardware, int tp, const char *engine)
{
    static scn_scenario s;
    load_on("llama-3-8b", hardware, tp, engine, &s);
    return scn_engine_mem_fraction(&s.engine, &s.deployment, &s.hardware);
}

START_TEST(reserve_rule_by_hand)
{
    /* H100 SXM (81559 MiB), TP 1: chunk 8192, 256 captured; reserve 512 + 8192 x 1.5 + 256 x 2 +
     * 1/8 x 1024 = 13440 MiB (above the 10 GiB floor); (81559 - 13440) / 81559 = 0.8352. */
    ck_assert_double_eq_tol(fraction_on("h100-sxm", 1, "sglang-0.5.4"), 0.835, 1e-12);
    /* A100 80GB (81920 MiB), TP 1: the same reserve; 68480 / 81920 = 0.8359. */
    ck_assert_double_eq_tol(fraction_on("a100-80g", 1, "sglang-0.5.4"), 0.836, 1e-12);
    /* H200 (143771 MiB), TP 8: 512 captured; 512 + 12288 + 1024 + 1024 = 14848 MiB;
     * 128923 / 143771 = 0.8967. */
    ck_assert_double_eq_tol(fraction_on("h200", 8, "sglang-0.5.4"), 0.897, 1e-12);
    /* H100, TP 4: 512 captured; 512 + 12288 + 1024 + 512 = 14336; 67223 / 81559 = 0.8242. */
    ck_assert_double_eq_tol(fraction_on("h100-sxm", 4, "sglang-0.5.4"), 0.824, 1e-12);
    /* H200 with attention DP over 8 GPUs (SGLang --tp 8 --dp 8 --enable-dp-attention; kvplan's
     * tensor_parallel 1, attention_data_parallel 8): tp_size 8, 512 captured; 14848 + 512 x 8 x 3
     * + 512 x 8 x 1.5 (above 300 captured) = 33280 MiB; 110491 / 143771 = 0.7685. */
    {
        static scn_scenario s;
        load_on("llama-3-8b", "h200", 1, "sglang-0.5.4", &s);
        s.deployment.attention_dp = 8;
        ck_assert_double_eq_tol(scn_engine_mem_fraction(&s.engine, &s.deployment, &s.hardware), 0.769, 1e-12);
    }
    /* The v0.4-era table of the `sglang` profile is untouched: 0.88 at TP 1, 0.81 at TP 8. */
    ck_assert_double_eq_tol(fraction_on("h100-sxm", 1, "sglang"), 0.88, 1e-12);
    ck_assert_double_eq_tol(fraction_on("h200", 8, "sglang"), 0.81, 1e-12);
}
END_TEST

START_TEST(reserve_rule_sizes_the_pool)
{
    /* SGLang's static budget with the rule's fraction: the KV budget is the rule's fraction of the
     * memory free at start-up less the weights (docs/cost-model.md's table), so moving from the
     * table's 0.88 to 0.835 takes 0.045 x (M - runtime) out of the KV cache and nothing else. */
    static scn_scenario a, b;
    load_on("qwen3-32b", "a100-80g", 1, "sglang", &a);
    load_on("qwen3-32b", "a100-80g", 1, "sglang-0.5.4", &b);
    double w = kv_weights_compute(&a.model, 1).bytes_per_rank;
    kv_mem_split ra = kv_memory_split(&a, w, 0), rb = kv_memory_split(&b, w, 0);
    ck_assert_double_eq_tol(ra.fraction, 0.88, 1e-12);
    ck_assert_double_eq_tol(rb.fraction, 0.836, 1e-12);
    double taken = (0.88 - 0.836) * (a.hardware.memory - a.hardware.runtime_memory);
    ck_assert_msg(fabs((ra.kv_budget - rb.kv_budget) - taken) < 1.0, "%.17g vs %.17g", ra.kv_budget - rb.kv_budget,
                  taken);
}
END_TEST

START_TEST(scenario_fraction_wins)
{
    static scn_scenario s;
    const char *sets[] = {"model=llama-3-8b", "hardware=h100-sxm", "engine=sglang-0.5.4",
                          "deployment.gpu_memory_utilization=0.7"};
    t_library_file("chat.yaml", sets, 4, &s);
    ck_assert_double_eq_tol(scn_engine_mem_fraction(&s.engine, &s.deployment, &s.hardware), 0.7, 1e-12);
}
END_TEST

START_TEST(rule_needs_a_static_budget)
{
    static scn_scenario s;
    scn_error e;
    scn_status st = t_load("name: t\nmodel: llama-3-8b\nhardware: h100-sxm\n"
                           "engine: {name: x, memory: {budget: total, fraction_rule: sglang_reserve}}\n"
                           "workload: {requests: 10, arrival: {process: poisson, rate: 1/s}, prompt_tokens: 100, "
                           "output_tokens: 10}\n", NULL, 0, &s, &e);
    ck_assert_int_eq(st, SCN_E_DATA);
    ck_assert_int_eq(e.line, 4);
    ck_assert_msg(strstr(e.msg, "static"), "%s", e.msg);
    st = t_load("name: t\nmodel: llama-3-8b\nhardware: h100-sxm\n"
                "engine: {name: x, memory: {budget: static, fraction_rule: guess}}\n"
                "workload: {requests: 10, arrival: {process: poisson, rate: 1/s}, prompt_tokens: 100, "
                "output_tokens: 10}\n", NULL, 0, &s, &e);
    ck_assert_int_eq(st, SCN_E_DATA);
    ck_assert_int_eq(e.line, 4);
}
END_TEST

START_TEST(versions_that_run_the_rule)
{
    char buf[32];
    ck_assert_str_eq(pub_engine_profile("sglang", "0.5.5.post1", buf, sizeof buf), "sglang-0.5.4");
    ck_assert_str_eq(pub_engine_profile("sglang", "0.5.4", buf, sizeof buf), "sglang-0.5.4");
    ck_assert_str_eq(pub_engine_profile("sglang", "0.5.6", buf, sizeof buf), "sglang-0.5.4");
    /* Before PR #10975 (0.5.3rc0, 2025-09-15), undated against it (0.5.3, 0.5.3.post3), and after
     * the checked source (0.5.7): the `sglang` profile. */
    ck_assert_str_eq(pub_engine_profile("sglang", "0.5.3rc0", buf, sizeof buf), "sglang");
    ck_assert_str_eq(pub_engine_profile("sglang", "0.5.3.post3", buf, sizeof buf), "sglang");
    ck_assert_str_eq(pub_engine_profile("sglang", "0.5.7", buf, sizeof buf), "sglang");
    ck_assert_str_eq(pub_engine_profile("sglang", "0.3.0", buf, sizeof buf), "sglang-v0.3");
}
END_TEST

Suite *suite_mem_rule(void)
{
    Suite *su = suite_create("mem_rule");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, reserve_rule_by_hand);
    tcase_add_test(tc, reserve_rule_sizes_the_pool);
    tcase_add_test(tc, scenario_fraction_wins);
    tcase_add_test(tc, rule_needs_a_static_budget);
    tcase_add_test(tc, versions_that_run_the_rule);
    suite_add_tcase(su, tc);
    return su;
}
