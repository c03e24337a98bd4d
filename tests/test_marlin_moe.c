/* test_marlin_moe.c: Marlin's rate off Ampere and the MXFP4 experts an engine runs through
 * Marlin's MoE kernel (`mxfp4: marlin`, gpt-oss on Hopper under vLLM 0.10.x), checked against
 * the rate worked by hand from its A100 measurement (docs/cost-model.md, "Weight-only kernels")
 * and against the same step with the experts at the fused-MoE family's rate. */
#include "tests.h"
#include "../model/kv_model.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static void load(const char *model, const char *hardware, const char *engine, scn_scenario *s)
{
    char y[600];
    scn_error e;
    snprintf(y, sizeof y, "name: t\nmodel: %s\nhardware: %s\nengine: %s\n"
             "workload: {requests: 10, arrival: {process: poisson, rate: 1/s}, prompt_tokens: 100, output_tokens: 10}\n",
             model, hardware, engine);
    ck_assert_msg(t_load(y, NULL, 0, s, &e) == SCN_OK, "%s", e.msg);
}

START_TEST(marlin_rate_per_sm_clock)
{
    static scn_scenario s;
    /* A100: Marlin's measured 141.4 TFLOP/s, 141.4 / 312 of the 16-bit peak. */
    load("llama-3-8b", "a100-80g", "vllm", &s);
    ck_assert_double_eq_tol(kv_marlin_rate(&s.hardware), s.hardware.flops[SCN_DTYPE_BF16] * 141.4 / 312.0, 1e3);
    /* H100 SXM: 141.4e12 / (108 x 1.41e9) = 928.6 flop per SM per clock, x 132 SMs x 1.98 GHz
     * (its fp32 rate over 2 x 132 x 128 lanes) = 242.7 TFLOP/s, not 0.453 x 989 = 448. */
    load("llama-3-8b", "h100-sxm", "vllm", &s);
    double clock = s.hardware.flops[SCN_DTYPE_FP32] / (2.0 * s.hardware.sm_count * 128);
    double by_hand = 141.4e12 / (108 * 1.41e9) * s.hardware.sm_count * clock;
    ck_assert_double_eq_tol(kv_marlin_rate(&s.hardware), by_hand, 1e3);
    ck_assert_msg(by_hand > 2.40e14 && by_hand < 2.45e14, "%.6g", by_hand);
}
END_TEST

START_TEST(mxfp4_experts_at_marlins_rate)
{
    /* gpt-oss-120b on one H100 under vLLM (mxfp4: marlin), 8192 prefill tokens: the routed
     * experts' 2 x 8192 x 3 x 2880 x 2880 x 4 x 36 flops at Marlin's rate; the same profile with
     * the checkpoint layout keeps the fused-MoE family's (Triton's) rate. The difference in the
     * MLP op's compute time is the routed flops over the two rates. */
    static scn_scenario a, b;
    load("gpt-oss-120b", "h100-sxm", "vllm", &a);
    load("gpt-oss-120b", "h100-sxm", "{extends: vllm, name: v-ckpt, mxfp4: checkpoint}", &b);
    kv_cache_cfg c = kv_cache_cfg_make(&a, SCN_DTYPE_BF16, 0, 0);
    kv_seq_work w = {8192, 0};
    kv_step_cost ta = kv_step_time(&a, &c, SCN_ATTN_FLASH, &w, 1);
    kv_step_cost tb = kv_step_time(&b, &c, SCN_ATTN_FLASH, &w, 1);
    double routed = 2.0 * 8192 * 3 * 2880.0 * 2880 * 4 * 36;
    double marlin = routed / kv_marlin_rate(&a.hardware);
    ck_assert_msg(ta.op[KV_OP_MLP].t_compute > tb.op[KV_OP_MLP].t_compute, "%g vs %g", ta.op[KV_OP_MLP].t_compute,
                  tb.op[KV_OP_MLP].t_compute);
    /* Marlin's part alone is a lower bound on the op's compute time (the router adds to it). */
    ck_assert_msg(ta.op[KV_OP_MLP].t_compute >= marlin && ta.op[KV_OP_MLP].t_compute < marlin * 1.05,
                  "mlp compute %g s, Marlin's routed part by hand %g s", ta.op[KV_OP_MLP].t_compute, marlin);
    /* A GPU with fp4 math runs the checkpoint's MXFP4 natively: no Marlin term (B200). */
    static scn_scenario d;
    load("gpt-oss-120b", "b200", "vllm", &d);
    kv_step_cost td = kv_step_time(&d, &c, SCN_ATTN_FLASH, &w, 1);
    ck_assert_msg(td.op[KV_OP_MLP].t_compute < routed / kv_marlin_rate(&d.hardware), "%g", td.op[KV_OP_MLP].t_compute);
}
END_TEST

Suite *suite_marlin_moe(void)
{
    Suite *su = suite_create("marlin_moe");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, marlin_rate_per_sm_clock);
    tcase_add_test(tc, mxfp4_experts_at_marlins_rate);
    suite_add_tcase(su, tc);
    return su;
}
