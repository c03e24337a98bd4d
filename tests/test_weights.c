/* test_weights.c: parameter counts against the published counts and hand sums. */
#include "tests.h"
#include "../model/kv_model.h"

#include <math.h>
#include <string.h>

static scn_scenario s;

START_TEST(llama_dense_counts)
{
    t_library("llama-2-7b", "h100-sxm", &s);
    /* Per layer: 4 * 4096^2 (q, k, v, o) + 3 * 4096 * 11008 (MLP) + 2 * 4096 (norms) = 202383360;
     * x 32 = 6476267520; + 2 * 32000 * 4096 (embedding, LM head) + 4096 (final norm)
     * = 6738415616, the checkpoint's published parameter count. */
    kv_weights w = kv_weights_compute(&s.model, 1);
    ck_assert(w.params_total == 6738415616.0);
    ck_assert(w.bytes_total == 2 * 6738415616.0);
    t_library("llama-3-8b", "h100-sxm", &s);
    /* Per layer: q, o 2 * 4096^2 + k, v 2 * 4096 * 1024 + 3 * 4096 * 14336 + 8192 = 218112000;
     * x 32 = 6979584000; + 2 * 128256 * 4096 + 4096 = 8030261248 ("8.03B"). */
    w = kv_weights_compute(&s.model, 1);
    ck_assert(w.params_total == 8030261248.0);
    ck_assert(w.params_active == w.params_total);
}
END_TEST

START_TEST(mixtral_total_and_active)
{
    t_library("mixtral-8x7b", "h100-sxm", &s);
    /* Per layer: attention 41943040 + 8 experts * 3 * 4096 * 14336 (1409286144) + router 32768 +
     * norms 8192 = 1451270144; x 32 + 262144000 + 4096 = 46702792704 (Mistral AI: "46.7B total").
     * Active: 2 experts instead of 8: 32 * (41943040 + 352321536 + 32768 + 8192) + 262148096
     * = 12879925248 ("12.9B active"). */
    kv_weights w = kv_weights_compute(&s.model, 1);
    ck_assert(w.params_total == 46702792704.0);
    ck_assert(w.params_active == 12879925248.0);
}
END_TEST

START_TEST(deepseek_v2_lite_mla_moe)
{
    t_library("deepseek-v2-lite", "h100-sxm", &s);
    kv_weights w = kv_weights_compute(&s.model, 1);
    /* DeepSeek-V2 paper: V2-Lite has 15.7B total and 2.4B activated parameters. DeepSeek's
     * activated count leaves out the input embedding (a lookup, 102400 * 2048). */
    ck_assert_msg(fabs(w.params_total / 15.7e9 - 1) < 0.01, "total %.4g", w.params_total);
    double active = w.params_active - 102400.0 * 2048;
    ck_assert_msg(fabs(active / 2.4e9 - 1) < 0.03, "active %.4g", active);
    /* Hand sum of one layer's MLA: q 2048*16*192 + kv_a 2048*576 + 512 + kv_b 512*16*256 + o 16*128*2048. */
    ck_assert(w.params_attention == 27.0 * (6291456 + 1179648 + 512 + 2097152 + 4194304));
}
END_TEST

START_TEST(tensor_parallel_shards_all_but_norms)
{
    t_library("llama-3-70b", "h100-sxm", &s);
    kv_weights w1 = kv_weights_compute(&s.model, 1), w8 = kv_weights_compute(&s.model, 8);
    double norm_bytes = (2.0 * 8192 * 80 + 8192) * 2;
    ck_assert(fabs(w8.bytes_per_rank - ((w1.bytes_total - norm_bytes) / 8 + norm_bytes)) < 1);
    ck_assert(w1.bytes_per_rank == w1.bytes_total);
}
END_TEST

START_TEST(tied_embeddings_counted_once)
{
    t_library("gemma-2-9b", "h100-sxm", &s);
    kv_weights w = kv_weights_compute(&s.model, 1);
    ck_assert(w.params_embedding == 256000.0 * 3584);
    /* Gemma-2-9B: about 9.24B parameters (model card: "9B"). */
    ck_assert_msg(fabs(w.params_total / 9.24e9 - 1) < 0.01, "%.4g", w.params_total);
}
END_TEST

/* gpt-oss-120b's checkpoint (config.json quantization_config): the routed experts in MXFP4, 4-bit
 * values plus one e8m0 scale byte per 32 (0.53125 B a weight); attention, router, embedding and
 * LM head in bf16. Hand sums: experts 128 * 3 * 2880 * 2880 * 36 = 114661785600 parameters;
 * attention a layer 2880 * (4096 + 2 * 512) + 4096 * 2880 + 5120 biases = 26547200, x 36 =
 * 955699200; routers 2880 * 128 * 36 = 13271040; embedding + LM head 2 * 201088 * 2880 =
 * 1158266880; norms 2 * 2880 * 36 + 2880 = 210240. */
START_TEST(gpt_oss_experts_only_mxfp4)
{
    t_library("gpt-oss-120b", "h100-sxm", &s);
    kv_weights w = kv_weights_compute(&s.model, 1);
    double experts = 114661785600.0, other = 955699200.0 + 13271040.0 + 1158266880.0 + 210240.0;
    ck_assert(w.params_total == experts + other);
    ck_assert(w.params_linear == experts);
    ck_assert(w.bytes_per_linear == 0.53125);
    /* 60914073600 B of experts + 4254894720 B of bf16 = 65168968320 B. */
    ck_assert(w.bytes_total == experts * 0.53125 + other * 2);
    ck_assert(w.bytes_total == 65168968320.0);
    /* The model card's 116.83B total also counts the experts' biases, 128 * (5760 + 2880) * 36 =
     * 39813120, and the output projections' 2880 * 36, which kvplan leaves out: within 0.05 %. */
    ck_assert_msg(fabs((w.params_total + 39813120.0 + 103680.0) / 116.83e9 - 1) < 0.0005, "%.6g", w.params_total);
}
END_TEST

/* vLLM 0.10.x on Hopper (no fp4 math) runs the MXFP4 experts weight-only through Marlin and pads
 * them for it (vllm-project/vllm@007d5005 mxfp4.py, create_weights: the expert width per rank to a
 * multiple of 128, the hidden size to 256): 2880 -> 2944 and 3072 at TP 1. Hand sum: 128 * 36 *
 * 3 * 2944 * 3072 * 0.53125 = 66418900992 B of experts + 4254894720 B of bf16 = 70673795712 B
 * (65.820 GiB). vLLM issue #23278's log (v0.10.1, one H100, "Weight-only FP4 compression will be
 * used leveraging the Marlin kernel"): "Model loading took 65.9651 GiB". What kvplan leaves out is
 * all additive: the experts' biases, 128 * (2 * 2944 + 3072) * 36 * 2 B = 0.077 GiB, the rotary
 * table, 131072 positions * 64 * 4 B = 0.031 GiB, and the output projections' biases and the
 * attention sinks (under 1 MiB): 0.109 GiB, so the log lies 0 to 0.15 GiB above kvplan's count. */
START_TEST(gpt_oss_marlin_layout_matches_vllm_log)
{
    t_library_engine("gpt-oss-120b", "h100-sxm", "vllm", &s);
    const double GiB = 1073741824.0;
    double extra = kv_weights_engine_extra(&s);
    ck_assert(extra == 128.0 * 36 * 3 * (2944.0 * 3072 - 2880.0 * 2880) * 0.53125);
    double weights = kv_weights_compute(&s.model, 1).bytes_per_rank + extra;
    ck_assert(weights == 70673795712.0);
    double log = 65.9651 * GiB;
    ck_assert_msg(log - weights > 0 && log - weights < 0.15 * GiB, "%.4f GiB", weights / GiB);
    /* The capacity path charges the same. */
    kv_cache_cfg c = kv_cache_cfg_make(&s, SCN_DTYPE_BF16, 0, 0);
    kv_capacity k = kv_capacity_compute(&s, &c, 16, 0);
    ck_assert(k.weights == weights);
    /* TP 2: 1440 -> 1536 per rank, hidden 3072: 128 * 36 * 3 * 1536 * 3072 * 0.53125 B. */
    s.deployment.tensor_parallel = 2;
    ck_assert(kv_weights_engine_extra(&s) == 128.0 * 36 * 3 * (1536.0 * 3072 - 1440.0 * 2880) * 0.53125);
    /* A GPU with fp4 math, or an engine that keeps the checkpoint's layout: nothing added. */
    s.engine.mxfp4_layout = SCN_MX_CHECKPOINT;
    ck_assert(kv_weights_engine_extra(&s) == 0);
    t_library_engine("gpt-oss-120b", "h100-sxm", "sglang", &s);
    ck_assert(kv_weights_engine_extra(&s) == 0);
}
END_TEST

/* Meta's fp8_mixed Llama-3.1-405B-FP8 (meta-llama/llama-models models/llama3/quantization/
 * loader.py, convert_to_fp8_quantized_model): only feed_forward.w1, w3, w2 of layers 1..124 are
 * fp8 with a row-wise scale; attention, layers 0 and 125 and the embedding and LM head stay
 * bf16. Hand sums: MLP 3 * 16384 * 53248 = 2617245696 a layer, x 124 = 324538466304 fp8
 * weights at 1 + 4/16384 B (an fp32 scale per row of 16384) = 324617699328 B; the rest,
 * 405853388800 - 324538466304 = 81314922496 parameters, at 2 B = 162629844992 B; total
 * 487247544320 B, where an all-fp8 405B would be about 410 GB. Per GPU at TP 8: norms
 * (2 * 16384 * 126 + 16384 = 4145152 parameters, 8290304 B) replicated, the rest split:
 * (487247544320 - 8290304) / 8 + 8290304 = 60904906752 + 8290304 = 60913197056 B (56.73 GiB). */
START_TEST(meta_fp8_mixed_405b_weights)
{
    t_library("llama-3.1-405b-fp8", "h100-sxm", &s);
    ck_assert(s.model.quant_mlp_only && s.model.unquantized_end_layers == 1);
    kv_weights w = kv_weights_compute(&s.model, 1);
    ck_assert(w.params_total == 405853388800.0);
    ck_assert(w.params_linear == 324538466304.0);
    ck_assert_msg(fabs(w.bytes_total - 487247544320.0) < 1, "%.1f", w.bytes_total);
    kv_weights w8 = kv_weights_compute(&s.model, 8);
    ck_assert_msg(fabs(w8.bytes_per_rank - 60913197056.0) < 1, "%.1f", w8.bytes_per_rank);
}
END_TEST

/* `quantized_layers: mlp` needs a dense model and a quantised dtype; `unquantized_end_layers`
 * needs `mlp`: located errors. */
START_TEST(mlp_only_needs_dense_quantised)
{
    static scn_scenario sc;
    scn_error e;
    static const struct { const char *model, *field; } bad[] = {
        {"{extends: mixtral-8x7b, weight_dtype: fp8, quantized_layers: mlp}", "quantized_layers"},   /* experts */
        {"{extends: llama-3-8b, quantized_layers: mlp}", "quantized_layers"},                       /* 16-bit */
        {"{extends: llama-3-8b, weight_dtype: fp8, unquantized_end_layers: 1}", "unquantized_end_layers"},
        /* 32 layers: at most 16 at each end */
        {"{extends: llama-3-8b, weight_dtype: fp8, quantized_layers: mlp, unquantized_end_layers: 17}", "unquantized_end_layers"}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char buf[512];
        snprintf(buf, sizeof buf, "model: %s\nhardware: h100-sxm\nworkload: {requests: 10, arrival: {process: poisson, "
                 "rate: 1/s}, prompt_tokens: 100, output_tokens: 10}\n", bad[i].model);
        ck_assert_int_eq(t_load(buf, NULL, 0, &sc, &e), SCN_E_DATA);
        ck_assert_msg(strstr(e.path, bad[i].field) != NULL, "%s: %s", bad[i].model, e.path);
    }
}
END_TEST

/* `quantized_layers: experts` on a dense model is a located error. */
START_TEST(experts_only_needs_experts)
{
    static scn_scenario sc;
    scn_error e;
    scn_status st = t_load("model: {extends: llama-3-8b, weight_dtype: fp4, weight_quant: mxfp4, quantized_layers: experts}\n"
                           "hardware: h100-sxm\nworkload: {requests: 10, arrival: {process: poisson, rate: 1/s}, "
                           "prompt_tokens: 100, output_tokens: 10}\n", NULL, 0, &sc, &e);
    ck_assert_int_eq(st, SCN_E_DATA);
    ck_assert_int_eq(e.line, 1);
    ck_assert_msg(strstr(e.path, "quantized_layers") != NULL, "%s", e.path);
}
END_TEST

Suite *suite_weights(void)
{
    Suite *su = suite_create("weights");
    TCase *tc = tcase_create("counts");
    tcase_add_test(tc, llama_dense_counts);
    tcase_add_test(tc, mixtral_total_and_active);
    tcase_add_test(tc, deepseek_v2_lite_mla_moe);
    tcase_add_test(tc, tensor_parallel_shards_all_but_norms);
    tcase_add_test(tc, tied_embeddings_counted_once);
    tcase_add_test(tc, gpt_oss_experts_only_mxfp4);
    tcase_add_test(tc, gpt_oss_marlin_layout_matches_vllm_log);
    tcase_add_test(tc, experts_only_needs_experts);
    tcase_add_test(tc, meta_fp8_mixed_405b_weights);
    tcase_add_test(tc, mlp_only_needs_dense_quantised);
    suite_add_tcase(su, tc);
    return su;
}
