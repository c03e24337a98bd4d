/* test_block_fp8.c: block-scaled fp8 GEMMs as the engines' kernels run them (docs/cost-model.md,
 * "Block-scaled fp8 GEMMs"): each family's large-M rate, the CTA count of the kernels that do not
 * split K, what they add to a DeepSeek-R1 decode step, against hand arithmetic and against the
 * published kernel timings. */
#include "tests.h"
#include "../model/kv_model.h"
#include "../planner/plan_published.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static scn_scenario s;

static bool near(double a, double b, double rel) { return fabs(a - b) <= rel * fabs(b); }

START_TEST(fill_counts_ctas_without_split_k)
{
    t_library_engine("deepseek-r1", "h100-sxm", "vllm", &s);
    const scn_hardware *hw = &s.hardware;
    /* 132 SMs; CTAs = ceil(M / 64) x ceil(N / 128). q_a + kv_a at one row: 17 CTAs. */
    ck_assert(near(kv_block_fp8_fill(hw, SCN_BF8_TRITON, 1, 2112), 17.0 / 132, 1e-15));
    ck_assert(near(kv_block_fp8_fill(hw, SCN_BF8_CUTLASS, 64, 2112), 17.0 / 132, 1e-15));
    ck_assert(near(kv_block_fp8_fill(hw, SCN_BF8_TRITON, 65, 2112), 34.0 / 132, 1e-15));
    /* 144 CTAs fill the 132 SMs. */
    ck_assert(kv_block_fp8_fill(hw, SCN_BF8_TRITON, 1, 18432) == 1);
    /* DeepGEMM sizes its blocks to the SMs; the native pricing has no such term. */
    ck_assert(kv_block_fp8_fill(hw, SCN_BF8_DEEPGEMM, 1, 2112) == 1);
    ck_assert(kv_block_fp8_fill(hw, SCN_BF8_NATIVE, 1, 2112) == 1);
}
END_TEST

START_TEST(large_m_rates_are_the_published_ones)
{
    t_library_engine("deepseek-r1", "h100-sxm", "vllm", &s);
    const scn_hardware *hw = &s.hardware;
    /* At the shape each was measured at, on H100 (1979 TFLOP/s fp8 dense), the rate is the
     * measurement itself: vLLM PR #23280, N = 2112, K = 7168, M = 8192: Triton 406.5 TFLOP/s,
     * CUTLASS 489.7; vLLM PR #13917, N = 18432, K = 7168, M = 1024: DeepGEMM 969.8. */
    ck_assert(near(kv_block_fp8_rate(hw, SCN_BF8_TRITON, 8192, 2112, 7168), 406.5e12, 1e-12));
    ck_assert(near(kv_block_fp8_rate(hw, SCN_BF8_CUTLASS, 8192, 2112, 7168), 489.7e12, 1e-12));
    ck_assert(near(kv_block_fp8_rate(hw, SCN_BF8_DEEPGEMM, 1024, 18432, 7168), 969.8e12, 1e-12));
    /* All well under the 1.32 PFLOP/s the per-tensor fp8 pricing gives H100 (1979 x 0.75 x 0.89). */
    ck_assert(kv_block_fp8_rate(hw, SCN_BF8_DEEPGEMM, 8192, 18432, 7168) < kv_compute_rate(hw, SCN_DTYPE_FP8));
    /* Native: not priced apart; off Hopper: no published figure. */
    ck_assert(kv_block_fp8_rate(hw, SCN_BF8_NATIVE, 8192, 2112, 7168) == 0);
    s.hardware.arch = SCN_ARCH_BLACKWELL;
    ck_assert(kv_block_fp8_rate(&s.hardware, SCN_BF8_TRITON, 8192, 2112, 7168) == 0);
}
END_TEST

static kv_step_cost decode1(const char *engine, scn_block_fp8 k)
{
    t_library_engine("deepseek-r1", "h100-sxm", engine, &s);
    s.deployment.tensor_parallel = 8;
    s.engine.block_fp8 = k;
    kv_cache_cfg c = kv_cache_cfg_make(&s, SCN_DTYPE_BF16, 0, 0);
    kv_seq_work w[1] = {{1, 1000}};
    return kv_step_time(&s, &c, SCN_ATTN_FLASH, w, 1);
}

START_TEST(batch_one_decode_streams_at_the_ctas_share)
{
    /* DeepSeek-R1 at TP8 on H100, one decode row (CUDA graph of size 1): per layer q_a + kv_a
     * (N = 1536 + 576 = 2112, K = 7168: 17 CTAs) and q_b (N = 128 x 192 / 8 = 3072, K = 1536: 24
     * CTAs); o_proj N = 7168, K = 128 x 128 / 8 = 2048: 56 CTAs. Each streams its weights (1 byte
     * and an fp32 scale per 128 x 128 block) at CTAs / 132 of 3.35 TB/s x 0.80: beyond bytes /
     * bandwidth, W (132 / CTAs - 1) / bw, over 61 layers. */
    kv_step_cost t = decode1("vllm", SCN_BF8_TRITON), n = decode1("vllm", SCN_BF8_NATIVE);
    double wb = 1.0 + 4.0 / (128.0 * 128.0), bw = 3.35e12 * 0.80;
    double qkv = 61 * wb * (2112.0 * 7168 * (132.0 / 17 - 1) + 3072.0 * 1536 * (132.0 / 24 - 1)) / bw;
    double out = 61 * wb * 7168.0 * 2048 * (132.0 / 56 - 1) / bw;
    ck_assert_msg(near(t.op[KV_OP_QKV].t_fill, qkv, 1e-9), "%g vs %g", t.op[KV_OP_QKV].t_fill, qkv);
    ck_assert(near(t.op[KV_OP_OUT_PROJ].t_fill, out, 1e-9));
    /* Beyond the fill, the family's GEMMs stream their inputs' group quantisation
     * (block_fp8_gemms_quantise_their_inputs): 61 x (7168 + 1536) x (2 + 1 + 4/128) bytes. */
    double quant = 61 * (7168.0 + 1536) * (2 + 1 + 4.0 / 128) / bw;
    ck_assert(near(t.op[KV_OP_QKV].t_memory - n.op[KV_OP_QKV].t_memory, qkv + quant, 1e-9));
    ck_assert(n.op[KV_OP_QKV].t_fill == 0);
    /* The weight bytes are the checkpoint's either way; the rest is the quantisation's. */
    ck_assert(near(t.op[KV_OP_QKV].bytes - n.op[KV_OP_QKV].bytes, 61 * (7168.0 + 1536) * (2 + 1 + 4.0 / 128), 1e-9));
    ck_assert(t.seconds > n.seconds);
    /* DeepGEMM fills the SMs: no such term. */
    kv_step_cost d = decode1("sglang", SCN_BF8_DEEPGEMM);
    ck_assert(d.op[KV_OP_QKV].t_fill == 0);
}
END_TEST

START_TEST(block_fp8_gemms_quantise_their_inputs)
{
    /* Every block-fp8 GEMM runs after a kernel that quantises its 16-bit input in 1 x 128 groups
     * (vLLM and SGLang per_token_group_quant_fp8, TensorRT-LLM fp8_quantize_1x128): one more
     * kernel, reading T x K x 2 bytes and writing T x K x 1 + T x K / 128 x 4. DeepSeek-R1 at TP
     * 8, one decode row, by hand, against the same step priced per-tensor (no such kernel):
     * - qkv_proj: q_a|kv_a (K = 7168) and q_b (K = 1536) in each of 61 layers: 122 kernels,
     *   61 x 8704 x 3.03125 B;
     * - out_proj: o_proj (K = 128 x 128 / 8 = 2048): 61 kernels, 61 x 2048 x 3.03125 B;
     * - mlp: the 3 dense layers' gate|up (K = 7168) and down (K = 18432 / 8 = 2304), and the 58
     *   MoE layers' shared expert, gate|up (K = 7168) and down (K = 2048 / 8 = 256): 6 + 116
     *   kernels, (3 x (7168 + 2304) + 58 x (7168 + 256)) x 3.03125 B.
     * The routed experts' quantisation was already counted (kv_moe_quant_kernels). */
    kv_step_cost t = decode1("vllm", SCN_BF8_TRITON), n = decode1("vllm", SCN_BF8_NATIVE);
    double q = 2 + 1 + 4.0 / 128;
    ck_assert(t.op[KV_OP_QKV].kernels - n.op[KV_OP_QKV].kernels == 122);
    ck_assert(t.op[KV_OP_OUT_PROJ].kernels - n.op[KV_OP_OUT_PROJ].kernels == 61);
    ck_assert(t.op[KV_OP_MLP].kernels - n.op[KV_OP_MLP].kernels == 122);
    ck_assert(near(t.op[KV_OP_OUT_PROJ].bytes - n.op[KV_OP_OUT_PROJ].bytes, 61 * 2048.0 * q, 1e-9));
    double mlp = (3 * (7168.0 + 2304) + 58 * (7168.0 + 256)) * q;
    ck_assert_msg(near(t.op[KV_OP_MLP].bytes - n.op[KV_OP_MLP].bytes, mlp, 1e-9), "%g vs %g",
                  t.op[KV_OP_MLP].bytes - n.op[KV_OP_MLP].bytes, mlp);
    ck_assert(near(t.op[KV_OP_MLP].serial_bytes - n.op[KV_OP_MLP].serial_bytes, mlp, 1e-9));
    /* In a replayed graph each costs its boundary, 3 us: 305 kernels, 0.915 ms more overhead. */
    double ov = 0;
    for (int op = 0; op < KV_OP_COUNT; op++) ov += t.op[op].t_overhead - n.op[op].t_overhead;
    ck_assert(t.graph && n.graph);
    ck_assert_msg(near(ov, 305 * 3e-6, 1e-9), "%g", ov);
    /* A bf16 checkpoint has no block-fp8 GEMM and no such kernel. */
    t_library_engine("llama-3-8b", "h100-sxm", "vllm", &s);
    kv_cache_cfg c = kv_cache_cfg_make(&s, SCN_DTYPE_BF16, 0, 0);
    kv_seq_work w[1] = {{1, 1000}};
    kv_step_cost b = kv_step_time(&s, &c, SCN_ATTN_FLASH, w, 1);
    ck_assert(b.op[KV_OP_OUT_PROJ].kernels == 32);
}
END_TEST

START_TEST(one_gemm_against_the_published_timing)
{
    /* vLLM PR #23280 (H100 80GB HBM3), DeepSeek-V3 N = 2112, K = 7168 at batch 1: Triton 1.298
     * TFLOP/s and CUTLASS 0.893, i.e. 2 x 2112 x 7168 / rate = 23.3 and 33.9 us, 3-5x the
     * 4.5 us its 15.1 MB take at 3.35 TB/s. The model's time for it, W / (bw x 17 / 132), is
     * within a factor of 2 of both, and much closer than bytes / bandwidth. */
    t_library_engine("deepseek-r1", "h100-sxm", "vllm", &s);
    double W = 2112.0 * 7168 * (1.0 + 4.0 / 16384), bw = s.hardware.memory_bandwidth * s.hardware.eff_bandwidth;
    double model = W / (bw * kv_block_fp8_fill(&s.hardware, SCN_BF8_TRITON, 1, 2112)), flat = W / bw;
    double meas[2] = {2.0 * 2112 * 7168 / 1.298436e12, 2.0 * 2112 * 7168 / 0.893065e12};
    for (int i = 0; i < 2; i++) {
        ck_assert_msg(model / meas[i] < 2 && model / meas[i] > 0.5, "%g vs %g", model, meas[i]);
        ck_assert(fabs(log(model / meas[i])) < fabs(log(flat / meas[i])));
    }
}
END_TEST

START_TEST(block_fp8_field_is_bound_and_checked)
{
    t_library_engine("deepseek-r1", "h100-sxm", "vllm", &s);
    ck_assert(s.engine.block_fp8 == SCN_BF8_TRITON);
    t_library_engine("deepseek-r1", "h100-sxm", "sglang", &s);
    ck_assert(s.engine.block_fp8 == SCN_BF8_DEEPGEMM);
    t_library_engine("deepseek-r1", "h100-sxm", "trtllm", &s);
    ck_assert(s.engine.block_fp8 == SCN_BF8_DEEPGEMM);
    t_library_engine("deepseek-r1", "h100-sxm", "bare", &s);
    ck_assert(s.engine.block_fp8 == SCN_BF8_NATIVE);
    scn_scenario *o = malloc(sizeof *o);
    scn_error e;
    const char *y = "name: t\nmodel: deepseek-r1\nhardware: h100-sxm\nengine: {name: x, block_fp8: marlin}\n"
                    "workload: {requests: 10, arrival: {process: offline}, prompt_tokens: 100, output_tokens: 100}\n";
    ck_assert_int_eq(t_load(y, NULL, 0, o, &e), SCN_E_DATA);
    ck_assert_str_eq(e.path, "engine.block_fp8");
    ck_assert_int_eq(e.line, 4);
    ck_assert(strstr(e.msg, "triton") && strstr(e.msg, "deepgemm"));
    free(o);
}
END_TEST

START_TEST(published_fp8_keeps_the_models_block_layout)
{
    /* A published row's "fp8" on DeepSeek-R1 (8 x H200), whose own checkpoint is block-scaled,
     * is that checkpoint: the same prediction as naming fp8_block. On Llama-3-8B (a bf16 model)
     * "fp8" is per-tensor fp8, which the block pricing does not touch, so fp8_block predicts more
     * time (vLLM's Triton kernel). Batch 1, 128 in, 8 out, TPOT. */
    const char *p = t_write("bf8.tsv",
        "id\tgpu\tgpus\ttp\tmodel\tengine\tengine_version\tweight_dtype\tkv_dtype\tmode\tload\tinput_tokens\t"
        "output_tokens\tmetric\tvalue\tunit\tsource\tnotes\n"
        "a\th200\t8\t8\tdeepseek-r1\tvllm\tx\tfp8\tauto\tbatch\t1\t128\t8\ttpot_mean_ms\t1\tms\ts\t\n"
        "b\th200\t8\t8\tdeepseek-r1\tvllm\tx\tfp8_block\tauto\tbatch\t1\t128\t8\ttpot_mean_ms\t1\tms\ts\t\n"
        "c\th100-sxm\t1\t1\tllama-3-8b\tvllm\tx\tfp8\tauto\tbatch\t1\t128\t8\ttpot_mean_ms\t1\tms\ts\t\n"
        "d\th100-sxm\t1\t1\tllama-3-8b\tvllm\tx\tfp8_block\tauto\tbatch\t1\t128\t8\ttpot_mean_ms\t1\tms\ts\t\n");
    pub_table t;
    char err[512], ds[1024];
    snprintf(ds, sizeof ds, "%s/data/datasets", getenv("KVPLAN_TESTS"));
    ck_assert_msg(pub_table_read(p, &t, err, sizeof err) == 0, "%s", err);
    for (int i = 0; i < t.n; i++) {
        ck_assert_msg(pub_row_predict(&t.rows[i], ds, err, sizeof err) == 0, "%s", err);
        ck_assert_msg(t.rows[i].status == PUB_PREDICTED, "%s: %s", t.rows[i].id, t.rows[i].why);
    }
    ck_assert(t.rows[0].predicted == t.rows[1].predicted);
    ck_assert(t.rows[3].predicted > t.rows[2].predicted);
    pub_table_free(&t);
}
END_TEST

Suite *suite_block_fp8(void)
{
    Suite *su = suite_create("block_fp8");
    TCase *tc = tcase_create("kernels");
    tcase_add_test(tc, fill_counts_ctas_without_split_k);
    tcase_add_test(tc, large_m_rates_are_the_published_ones);
    tcase_add_test(tc, batch_one_decode_streams_at_the_ctas_share);
    tcase_add_test(tc, block_fp8_gemms_quantise_their_inputs);
    tcase_add_test(tc, one_gemm_against_the_published_timing);
    tcase_add_test(tc, block_fp8_field_is_bound_and_checked);
    tcase_add_test(tc, published_fp8_keeps_the_models_block_layout);
    suite_add_tcase(su, tc);
    return su;
}
