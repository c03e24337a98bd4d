/* test_model_terms.c: the cost model's shape, format and engine terms worked by hand: GEMM
 * efficiency at chosen shapes, the smooth roofline, attention kernel families, weight bytes as
 * checkpoints store them (AWQ from the config), MLA flops in decode and prefill, CUDA-graph
 * padding, and engine profiles as the loader reads them. */
#include "tests.h"
#include "../model/kv_mla.h"
#include "../model/kv_model.h"
#include "../planner/plan.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static scn_scenario s;

static bool near(double a, double b) { return fabs(a - b) <= 1e-12 * fabs(b) + 1e-18; }

START_TEST(gemm_efficiency_at_chosen_shapes)
{
    t_library("llama-3-8b", "h100-sxm", &s);   /* 132 SMs */
    const scn_hardware *hw = &s.hardware;
    /* 4096^3 bf16: 128 x 128 tiles, 32 x 32 = 1024 of them, 8 waves over 132 SMs (1056 slots). */
    ck_assert(near(kv_gemm_shape_efficiency(hw, 4096, 4096, 4096, SCN_DTYPE_BF16), 1024.0 / 1056));
    /* M = 1 (decode): rows padded to 8, 32 column tiles, split-K by floor(132 / 32) = 4 over the
     * 64 K-steps of 64: 128 CTAs in one wave, each doing 16 steps. Useful work 1 x 4096 x 4096
     * of 132 x 8 x 128 x 64 x 16. M = 40 pads to 64 the same way. */
    ck_assert(near(kv_gemm_shape_efficiency(hw, 1, 4096, 4096, SCN_DTYPE_BF16), 4096.0 * 4096 / (132.0 * 8 * 128 * 64 * 16)));
    ck_assert(near(kv_gemm_shape_efficiency(hw, 40, 4096, 4096, SCN_DTYPE_BF16), 40.0 * 4096 * 4096 / (132.0 * 64 * 128 * 64 * 16)));
    /* M = 200, N = K = 8192 (near the ridge): 2 x 64 = 128 tiles fill 128 of 132 SMs; rows
     * padded 200 -> 256. */
    ck_assert(near(kv_gemm_shape_efficiency(hw, 200, 8192, 8192, SCN_DTYPE_BF16), 200.0 / 256 * 128 / 132));
    /* fp8 stages 128 K elements: K = 8256 needs 65 of them (8320), against 129 bf16 stages of 64
     * (8256 exactly). */
    ck_assert(near(kv_gemm_shape_efficiency(hw, 4096, 4096, 8256, SCN_DTYPE_FP8), 1024.0 / 1056 * 8256 / 8320));
    ck_assert(near(kv_gemm_shape_efficiency(hw, 4096, 4096, 8256, SCN_DTYPE_BF16), 1024.0 / 1056));
    /* Without an SM count (a CPU) there is no wave model. */
    s.hardware.sm_count = 0;
    ck_assert(kv_gemm_shape_efficiency(&s.hardware, 7, 9, 11, SCN_DTYPE_FP32) == 1);
    /* The smooth roofline: at the ridge sqrt(2) times either roof; far from it, the larger. */
    ck_assert(near(kv_roofline_combine(3, 4), 5));
    ck_assert(near(kv_roofline_combine(1, 1), sqrt(2.0)));
    ck_assert(kv_roofline_combine(0, 2) == 2 && kv_roofline_combine(2, 0) == 2);
}
END_TEST

START_TEST(attention_kernel_families)
{
    scn_error e;
    const char *sets[] = {"engine=bare"};
    t_library("llama-3-8b", "h100-sxm", &s);
    ck_assert(kv_attention_efficiency(&s.hardware, &s.engine) == 0.75);   /* FA3 on Hopper */
    ck_assert_int_eq(t_load("model: llama-3-8b\nhardware: h100-sxm\nworkload:\n  arrival: {process: poisson, rate: 1/s}\n"
                            "  prompt_tokens: 10\n  output_tokens: 10\n", sets, 1, &s, &e), SCN_OK);
    ck_assert_str_eq(s.engine.name, "bare");
    ck_assert(kv_attention_efficiency(&s.hardware, &s.engine) == 0.35);   /* SDPA = FA2 on Hopper */
    t_library("llama-3-8b", "a100-80g", &s);
    ck_assert(kv_attention_efficiency(&s.hardware, &s.engine) == 0.62);   /* FA2 on Ampere */
    s.hardware.calibrated = true;
    s.hardware.eff_attention = 0.123;
    ck_assert(kv_attention_efficiency(&s.hardware, &s.engine) == 0.123);  /* a calibration wins */
    /* Decode spreads work items over the SMs: 3 items on 132 SMs use 3 of them. */
    ck_assert(near(kv_wave_efficiency(&s.hardware, 3), 3.0 / 108));
    ck_assert(near(kv_wave_efficiency(&s.hardware, 109), 109.0 / 216));
}
END_TEST

START_TEST(awq_bytes_from_the_config)
{
    t_library("llama-3-8b", "rtx-4090", &s);
    scn_wformat f;
    ck_assert_int_eq(scn_wformat_parse("awq", &f), 0);
    kv_model_set_wformat(&s.model, &f);
    /* Linear layers: per layer 2 x 4096^2 + 2 x 4096 x 1024 + 3 x 4096 x 14336 = 218103808, x 32
     * = 6979321856 parameters at 4 bits + an fp16 scale and a 4-bit zero per 128 (2.5 B / 128).
     * Embedding and LM head 2 x 128256 x 4096 and norms 65 x 4096 stay 16-bit. */
    double linear = 6979321856.0, other = 2.0 * 128256 * 4096 + 65.0 * 4096;
    kv_weights w = kv_weights_compute(&s.model, 1);
    ck_assert(w.params_linear == linear);
    ck_assert(near(w.bytes_per_linear, 0.5 + 2.5 / 128));
    double bytes = linear * (0.5 + 2.5 / 128) + other * 2;
    ck_assert(near(w.bytes_total, bytes));
    ck_assert(w.bytes_total / GIB > 5.3 && w.bytes_total / GIB < 5.4);   /* 5.73 GB: the published checkpoints' size */
    /* W4A16 runs its math in bf16. */
    ck_assert_int_eq(kv_gemm_dtype(&s.model, &s.hardware), SCN_DTYPE_BF16);
    /* Other formats: fp8 per-tensor 1 B; block fp8 + an fp32 scale per 128 x 128; int8 W8A8 + an
     * fp32 per output row of 4096 inputs; NVFP4 + an fp8 scale per 16. */
    const struct { const char *name; double bpp; scn_dtype math; } rows[] = {
        {"fp8", 1.0, SCN_DTYPE_FP8}, {"fp8_block", 1.0 + 4.0 / 16384, SCN_DTYPE_FP8},
        {"int8", 1.0 + 4.0 / 4096, SCN_DTYPE_INT8}, {"fp4", 0.5 + 1.0 / 16, SCN_DTYPE_BF16},
        {"gptq", 0.5 + 2.5 / 128, SCN_DTYPE_BF16}, {"bf16", 2.0, SCN_DTYPE_BF16}};
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        ck_assert_int_eq(scn_wformat_parse(rows[i].name, &f), 0);
        kv_model_set_wformat(&s.model, &f);
        w = kv_weights_compute(&s.model, 1);
        ck_assert_msg(near(w.bytes_per_linear, rows[i].bpp), "%s", rows[i].name);
        ck_assert_msg(near(w.bytes_total, linear * rows[i].bpp + other * 2), "%s", rows[i].name);
        ck_assert_msg(kv_gemm_dtype(&s.model, &s.hardware) == rows[i].math, "%s math", rows[i].name);   /* no fp4 on Ada */
    }
    /* fp8 on an A100 (no fp8 tensor cores) dequantises into bf16. */
    t_library("llama-3-8b", "a100-80g", &s);
    ck_assert_int_eq(scn_wformat_parse("fp8", &f), 0);
    kv_model_set_wformat(&s.model, &f);
    ck_assert_int_eq(kv_gemm_dtype(&s.model, &s.hardware), SCN_DTYPE_BF16);
    /* AWQ leaves more of an RTX 4090 for the KV cache than bf16 weights. */
    t_library("llama-3-8b", "rtx-4090", &s);
    kv_cache_cfg c = kv_cache_cfg_make(&s, SCN_DTYPE_BF16, 0, 0);
    double bf16_budget = kv_capacity_compute(&s, &c, 16, 0).kv_budget;
    ck_assert_int_eq(scn_wformat_parse("awq", &f), 0);
    kv_model_set_wformat(&s.model, &f);
    double awq_budget = kv_capacity_compute(&s, &c, 16, 0).kv_budget;
    ck_assert(near(awq_budget - bf16_budget, 8030261248.0 * 2 - bytes));
}
END_TEST

START_TEST(mla_flops_by_hand)
{
    t_library("deepseek-v2-lite", "h100-sxm", &s);
    kv_cache_cfg c = kv_cache_cfg_make(&s, SCN_DTYPE_BF16, 0, 0);
    /* Prefill of 3000 tokens with decompressed heads: 16 heads, d_nope 128, d_rope 64, d_v 128,
     * latent 512, 27 layers. Causal pairs 3000 x 3001 / 2; QK 2 x 16 x 192 and PV 2 x 16 x 128
     * flops per pair; kv_b expands 3000 latents: 2 x 3000 x 512 x 16 x 256. */
    kv_seq_work p = {3000, 0};
    kv_step_cost r = kv_step_time(&s, &c, SCN_ATTN_FLASH, &p, 1);
    double pairs = 3000.0 * 3001 / 2;
    double want = 27 * (2.0 * 16 * 192 * pairs + 2.0 * 16 * 128 * pairs + 2.0 * 3000 * 512 * 16 * 256);
    ck_assert_msg(near(r.op[KV_OP_ATTENTION].flops, want), "%.6g vs %.6g", r.op[KV_OP_ATTENTION].flops, want);
    ck_assert(want > 1.5e12 && want < 1.65e12);    /* about 1.6 TFLOP, not the latent-space 4.23 */
    ck_assert(!r.mla_absorbed);
    /* Decode with absorbed weights over a 2000-token latent cache: per key QK over 512 + 64 and
     * PV over 512, per head; plus folding W_UK into the query (16 x 128 x 512) and W_UV after
     * (16 x 512 x 128). */
    kv_seq_work d = {1, 2000};
    r = kv_step_time(&s, &c, SCN_ATTN_FLASH, &d, 1);
    want = 27 * (2.0 * 16 * (512 + 64 + 512) * 2001 + 2.0 * 16 * 512 * 256);
    ck_assert(r.mla_absorbed);
    ck_assert_msg(near(r.op[KV_OP_ATTENTION].flops, want), "%.6g vs %.6g", r.op[KV_OP_ATTENTION].flops, want);
    /* The q projection and kv_a stay in qkv_proj: 2 x (2048 x 16 x 192 + 2048 x 576) per token. */
    ck_assert(near(r.op[KV_OP_QKV].flops, 27 * 2.0 * (2048.0 * 16 * 192 + 2048.0 * 576)));
}
END_TEST

/* Regression (issue 14 review): DeepSeek-V3's absorbed kv_b (W_UK | W_UV, about 0.96 GiB over
 * 61 layers) was charged at the split-KV attention kernel's wave efficiency (16 of 132 SMs for
 * one sequence), so attention got faster as the batch grew. The weights are a GEMM's read at
 * full bandwidth; only the latent cache streams at the kernel's occupancy. */
START_TEST(mla_absorbed_weights_stream_at_full_bandwidth)
{
    t_library("deepseek-v3", "h200", &s);
    s.deployment.tensor_parallel = 1;
    kv_cache_cfg c = kv_cache_cfg_make(&s, SCN_DTYPE_BF16, 0, 0);
    kv_seq_work d = {1, 2000};
    kv_step_cost r = kv_step_time(&s, &c, SCN_ATTN_FLASH, &d, 1);
    /* Per layer, by hand: 128 heads read q and write o over r + rope + r = 512 + 64 + 512
     * 16-bit values; the new token's latent + rope key (576 x 2 bytes) is written; 2001 cached
     * ones are read. kv_b: 512 x 128 x (128 + 128) parameters. 61 layers. */
    double L = 61, kvtok = 576 * 2.0;
    double kv = L * (128 * 1088 * 2.0 + kvtok + 2001 * kvtok);
    double w = L * 512.0 * 128 * 256 * kv_weight_bytes_per_param(&s.model);
    const kv_op_cost *at = &r.op[KV_OP_ATTENTION];
    ck_assert(near(at->bytes, kv + w));
    ck_assert(near(at->weight_bytes, w));
    /* One sequence splits its 2001 keys in ceil(2001 / 128) = 16 work items of 132 SMs. */
    double bw = s.hardware.memory_bandwidth * s.hardware.eff_bandwidth;
    ck_assert_int_eq(s.hardware.sm_count, 132);
    double want = kv / (bw * 16.0 / 132.0) + w / bw;
    ck_assert_msg(near(at->t_memory, want), "%.6g vs %.6g", at->t_memory, want);
    /* Compute, by hand: the latent attention's 2 x 128 x (512 + 64 + 512) flops per cached key
     * over 2001 keys run in the FlashMLA-class decode kernel, 660 of the H800's 989 dense bf16
     * TFLOPS (FlashMLA README); the absorption's 2 x 128 x 512 x (128 + 128) flops per token run
     * at the engine's attention efficiency (vLLM: FlashAttention-3, 0.75 on Hopper). */
    double fl = L * 2.0 * 128 * 1088 * 2001, fa = L * 2.0 * 128 * 512 * 256, peak = s.hardware.flops[SCN_DTYPE_BF16];
    ck_assert(near(at->flops, fl + fa));
    double tc = fl / (peak * 660.0 / 989.0) + fa / (peak * 0.75);
    ck_assert_msg(near(at->t_compute, tc), "%.6g vs %.6g", at->t_compute, tc);
}
END_TEST

/* FlashMLA decodes in two kernels a layer, its split-KV kernel and its combine kernel
 * (deepseek-ai/FlashMLA csrc/flash_api.cpp launches both on every call): with the cache write
 * and the W_UK and W_UV batched matmuls, 5 kernels a layer in attention under vLLM (FA3 family)
 * on Hopper, 61 x 5 = 305 for DeepSeek-V3; 4 a layer where no FlashMLA-class figure applies (an
 * Ampere GPU, or an engine of another family), and a prefill-only step is unchanged. Each kernel
 * costs its boundary in a replayed graph: 61 x 3 us more. */
START_TEST(flashmla_decode_is_two_kernels)
{
    t_library("deepseek-v3", "h200", &s);
    s.deployment.tensor_parallel = 8;
    kv_cache_cfg c = kv_cache_cfg_make(&s, SCN_DTYPE_BF16, 0, 0);
    kv_seq_work d = {1, 2000};
    ck_assert_double_eq(kv_mla_decode_kernels(&s.hardware, &s.engine), 2);
    kv_step_cost r = kv_step_time(&s, &c, SCN_ATTN_FLASH, &d, 1);
    ck_assert_double_eq_tol(r.op[KV_OP_ATTENTION].kernels, 61 * 5.0, 1e-9);
    scn_engine fa3 = s.engine;
    s.engine.attn_kernel = SCN_AK_FLASHINFER;
    ck_assert_double_eq(kv_mla_decode_kernels(&s.hardware, &s.engine), 1);
    kv_step_cost other = kv_step_time(&s, &c, SCN_ATTN_FLASH, &d, 1);
    ck_assert_double_eq_tol(other.op[KV_OP_ATTENTION].kernels, 61 * 4.0, 1e-9);
    ck_assert(r.graph && other.graph);
    ck_assert_double_eq_tol(r.op[KV_OP_ATTENTION].t_overhead - other.op[KV_OP_ATTENTION].t_overhead, 61 * fa3.graph_kernel, 1e-12);
    s.engine = fa3;
    s.hardware.arch = SCN_ARCH_AMPERE;
    ck_assert_double_eq(kv_mla_decode_kernels(&s.hardware, &s.engine), 1);
    s.hardware.arch = SCN_ARCH_HOPPER;
    kv_seq_work p = {500, 0};
    kv_step_cost pre = kv_step_time(&s, &c, SCN_ATTN_FLASH, &p, 1);
    ck_assert_double_eq_tol(pre.op[KV_OP_ATTENTION].kernels, 61 * 3.0, 1e-9);   /* cache write, kernel, kv_b */
}
END_TEST

/* Attention time never falls as the batch grows at a fixed context, for MLA and GQA models. */
START_TEST(attention_time_grows_with_the_batch)
{
    const char *models[][2] = {{"deepseek-v3", "h200"}, {"llama-3.1-8b", "h100-sxm"}, {"qwen3-32b", "h100-sxm"}};
    static kv_seq_work w[256];
    for (int mi = 0; mi < 3; mi++) {
        t_library(models[mi][0], models[mi][1], &s);
        s.deployment.tensor_parallel = 1;
        kv_cache_cfg c = kv_cache_cfg_make(&s, SCN_DTYPE_BF16, 0, 0);
        for (long ctx = 200; ctx <= 8000; ctx *= 4) {
            for (int i = 0; i < 256; i++) w[i] = (kv_seq_work){1, ctx};
            double last = 0;
            for (int b = 1; b <= 256; b++) {
                kv_step_cost r = kv_step_time(&s, &c, SCN_ATTN_FLASH, w, b);
                double t = r.op[KV_OP_ATTENTION].seconds;
                ck_assert_msg(t >= last, "%s ctx %ld: attention %.6g s at batch %d < %.6g at %d", models[mi][0], ctx, t, b,
                              last, b - 1);
                last = t;
            }
        }
    }
}
END_TEST

START_TEST(graphs_pad_decode_batches)
{
    t_library("llama-3-8b", "h100-sxm", &s);
    kv_cache_cfg c = kv_cache_cfg_make(&s, SCN_DTYPE_BF16, 0, 0);
    /* vLLM captures 1, 2, 4, then every 8 up to 512: 3 + 64 sizes. */
    ck_assert_int_eq(s.engine.n_graph_sizes, 67);
    ck_assert_int_eq(s.engine.graph_sizes[3], 8);
    ck_assert_int_eq(s.engine.graph_sizes[66], 512);
    kv_seq_work w[600];
    for (int i = 0; i < 600; i++) w[i] = (kv_seq_work){1, 100};
    kv_step_cost r = kv_step_time(&s, &c, SCN_ATTN_FLASH, w, 5);
    ck_assert(r.graph && r.graph_batch == 8);
    ck_assert(near(r.allreduces ? 0 : 1, 1));                /* tp 1: no all-reduce */
    r = kv_step_time(&s, &c, SCN_ATTN_FLASH, w, 600);           /* beyond the largest size: eager */
    ck_assert(!r.graph);
    w[0].new_tokens = 50;                                        /* a prefill chunk in the batch: eager */
    ck_assert(!kv_step_time(&s, &c, SCN_ATTN_FLASH, w, 4).graph);
}
END_TEST

static const char *SCN = "model: llama-3-8b\nhardware: h100-sxm\nworkload:\n  arrival: {process: poisson, rate: 1/s}\n"
                         "  prompt_tokens: 10\n  output_tokens: 10\n";

START_TEST(engine_profiles_load)
{
    scn_error e;
    ck_assert_int_eq(t_load(SCN, NULL, 0, &s, &e), SCN_OK);
    ck_assert_str_eq(s.engine.name, "vllm");                                  /* the default */
    ck_assert(s.hardware.step_overhead == 0.5e-3 && s.hardware.kernel_overhead == 4e-6);
    ck_assert(s.engine.allreduce == SCN_AR_CUSTOM && s.engine.oneshot_max == 256 * KIB && s.engine.custom_max == 8 * MIB);
    ck_assert_int_eq(s.options.scheduler[0], SCN_SCHED_CHUNKED);              /* V1 always chunks */
    const char *names[] = {"sglang", "trtllm", "bare", "kvplan"};
    for (int i = 0; i < 4; i++) {
        char set[64];
        snprintf(set, sizeof set, "engine=%s", names[i]);
        const char *sets[] = {set};
        ck_assert_int_eq(t_load(SCN, sets, 1, &s, &e), SCN_OK);
        ck_assert_str_eq(s.engine.name, names[i]);
    }
    ck_assert(!s.engine.cuda_graphs && s.engine.allreduce == SCN_AR_NCCL);   /* kvplan's own backends */
    /* options.engine lists library engines; the planner gets a candidate per engine. */
    const char *opt[] = {"options.engine=[vllm, sglang]", "options.weight_dtype=[bf16, awq]"};
    ck_assert_int_eq(t_load(SCN, opt, 2, &s, &e), SCN_OK);
    ck_assert_int_eq(s.options.n_engine, 2);
    ck_assert_str_eq(s.options.engine[1].name, "sglang");
    ck_assert(s.options.engine[1].async_scheduling);
    ck_assert_int_eq(s.options.n_wformat, 2);
    ck_assert_int_eq(s.options.wformat[1].quant, SCN_WQ_AWQ);
    plan_result pr;
    ck_assert_int_eq(plan_enumerate(&s, &pr), 0);
    ck_assert_int_eq(pr.n, 4);
    int awq_allowed = 0, awq = 0;
    for (int i = 0; i < pr.n; i++)
        if (pr.c[i].risk_weights) { awq++; awq_allowed += pr.c[i].allowed; }
    ck_assert(awq == 2 && awq_allowed == 0);      /* quantised weights need quality.allow_weight_dtype */
    scn_scenario t;
    plan_apply(&s, &pr.c[3], &t);
    ck_assert_str_eq(t.engine.name, pr.c[3].engine_name);
    ck_assert_int_eq(t.model.weight_quant, pr.c[3].wformat == 1 ? SCN_WQ_AWQ : SCN_WQ_NONE);
    plan_result_free(&pr);
    const char *q[] = {"options.weight_dtype=[bf16, awq]", "quality.allow_weight_dtype=[awq]"};
    ck_assert_int_eq(t_load(SCN, q, 2, &s, &e), SCN_OK);
    ck_assert_int_eq(plan_enumerate(&s, &pr), 0);
    for (int i = 0; i < pr.n; i++) ck_assert(pr.c[i].allowed);
    plan_result_free(&pr);
    /* A profile that sets its own launch and step costs overrides the engine's. */
    const char *hw[] = {"hardware.overhead={kernel_launch: 2 us, step: 1 ms}"};
    ck_assert_int_eq(t_load(SCN, hw, 1, &s, &e), SCN_OK);
    ck_assert(s.hardware.overhead_given && s.hardware.step_overhead == 1e-3 && s.hardware.kernel_overhead == 2e-6);
}
END_TEST

START_TEST(engine_errors_are_located)
{
    scn_error e;
    char buf[1200];
    const char *bad1[] = {"engine=vlm"};
    ck_assert_int_eq(t_load(SCN, bad1, 1, &s, &e), SCN_E_DATA);
    scn_error_format(&e, buf, sizeof buf);
    ck_assert_msg(strstr(buf, "did you mean 'vllm'"), "%s", buf);
    const char *bad2[] = {"options.weight_dtype=[bf16, int3]"};
    ck_assert_int_eq(t_load(SCN, bad2, 1, &s, &e), SCN_E_DATA);
    ck_assert_str_eq(e.path, "options.weight_dtype[1]");
    const char *bad3[] = {"hardware.overhead={step: 1 ms}"};
    ck_assert_int_eq(t_load(SCN, bad3, 1, &s, &e), SCN_E_DATA);
    ck_assert_str_eq(e.path, "hardware.overhead.kernel_launch");
    const char *bad4[] = {"engine={name: x, cuda_graphs: {sizes: [4, 2]}}"};
    ck_assert_int_eq(t_load(SCN, bad4, 1, &s, &e), SCN_E_DATA);
    ck_assert_str_eq(e.path, "engine.cuda_graphs.sizes[1]");
    const char *bad5[] = {"model.weight_dtype=int4", "model.weight_quant=none"};
    ck_assert_int_eq(t_load(SCN, bad5, 2, &s, &e), SCN_E_DATA);
    ck_assert_str_eq(e.path, "model.weight_quant");
}
END_TEST

START_TEST(hf_quantization_config)
{
    /* A Llama-3-8B AWQ checkpoint's config.json: the quantization_config names the format. */
    t_write("awq.json", "{\"model_type\": \"llama\", \"num_hidden_layers\": 32, \"hidden_size\": 4096,\n"
                        " \"num_attention_heads\": 32, \"num_key_value_heads\": 8, \"intermediate_size\": 14336,\n"
                        " \"vocab_size\": 128256, \"max_position_embeddings\": 8192, \"torch_dtype\": \"float16\",\n"
                        " \"quantization_config\": {\"quant_method\": \"awq\", \"bits\": 4, \"group_size\": 128,\n"
                        "   \"zero_point\": true, \"version\": \"gemm\"}}\n");
    scn_error e;
    const char *y = "model: {hf_config: awq.json}\nhardware: rtx-4090\nworkload:\n  arrival: {process: poisson, rate: 1/s}\n"
                    "  prompt_tokens: 10\n  output_tokens: 10\n";
    ck_assert_int_eq(t_load(y, NULL, 0, &s, &e), SCN_OK);
    ck_assert(s.model.weight_dtype == SCN_DTYPE_INT4 && s.model.weight_quant == SCN_WQ_AWQ && s.model.weight_group == 128);
    ck_assert(near(kv_weights_compute(&s.model, 1).bytes_total, 6979321856.0 * (0.5 + 2.5 / 128) + (2.0 * 128256 * 4096 + 65.0 * 4096) * 2));
    /* DeepSeek-style fp8 with 128 x 128 blocks. */
    t_write("fp8.json", "{\"model_type\": \"llama\", \"num_hidden_layers\": 2, \"hidden_size\": 256,\n"
                        " \"num_attention_heads\": 4, \"intermediate_size\": 512, \"vocab_size\": 1000,\n"
                        " \"max_position_embeddings\": 512, \"torch_dtype\": \"bfloat16\",\n"
                        " \"quantization_config\": {\"quant_method\": \"fp8\", \"weight_block_size\": [128, 128]}}\n");
    const char *y2 = "model: {hf_config: fp8.json}\nhardware: h100-sxm\nworkload:\n  arrival: {process: poisson, rate: 1/s}\n"
                     "  prompt_tokens: 10\n  output_tokens: 10\n";
    ck_assert_int_eq(t_load(y2, NULL, 0, &s, &e), SCN_OK);
    ck_assert(s.model.weight_dtype == SCN_DTYPE_FP8 && s.model.weight_quant == SCN_WQ_BLOCK && s.model.weight_group == 128);
    ck_assert_int_eq(kv_gemm_dtype(&s.model, &s.hardware), SCN_DTYPE_FP8);
}
END_TEST

/* The GEMM rate per dtype (kv_compute_rate): the dtype's peak x compute x its compute_scale,
 * scale 1 where the profile gives none; and one fp8 GEMM priced with it, by hand. */
START_TEST(compute_rate_per_dtype)
{
    scn_error e;
    const char *sets[] = {"engine=bare"};
    ck_assert_int_eq(t_load("model: llama-3-8b\nhardware: h200\nworkload:\n  arrival: {process: poisson, rate: 1/s}\n"
                            "  prompt_tokens: 10\n  output_tokens: 10\n", sets, 1, &s, &e), SCN_OK);
    const scn_hardware *hw = &s.hardware;
    /* h200.yaml: 989 TFLOPS bf16 and 1979 fp8/int8 at compute 0.75; fp8 scaled by 0.89. */
    ck_assert(near(kv_compute_rate(hw, SCN_DTYPE_BF16), 989e12 * 0.75));
    ck_assert(near(kv_compute_rate(hw, SCN_DTYPE_FP16), 989e12 * 0.75));
    ck_assert(near(kv_compute_share(hw, SCN_DTYPE_FP8), 0.75 * 0.89));
    ck_assert(near(kv_compute_rate(hw, SCN_DTYPE_FP8), 1979e12 * 0.75 * 0.89));
    ck_assert(near(kv_compute_rate(hw, SCN_DTYPE_INT8), 1979e12 * 0.75));   /* no scale: compute's */
    ck_assert(kv_compute_rate(hw, SCN_DTYPE_FP4) == 0);                   /* no fp4 tensor rate */
    /* Llama-3-8B's QKV GEMM at M = 4096 in fp8, one kernel replayed from a graph of the bare
     * engine (3 us a boundary). Shape: of the candidate tiles, those of 256 x 128, 128 x 256,
     * 256 x 64, 64 x 256, 128 x 128, 128 x 64 and 64 x 128 make 768, 1536 or 3072 tiles in 6,
     * 12 or 24 waves over 132 SMs: 32/33 each (768 / (6 x 132)); 64 x 64 tiles make 64 x 96 =
     * 6144 in ceil(6144 / 132) = 47 waves: e = 6144 / (47 x 132) = 6144 / 6204, the best;
     * 4096 / 128 = 32 K stages each either way. Compute at
     * 1979 TFLOPS x 0.75 x 0.89 x e; memory: the 1-byte weight and 16-bit activations in and out
     * at 4.8 TB/s x 0.80; combined as sqrt(tc^2 + tm^2). */
    double M = 4096, N = 6144, K = 4096, ef = 6144.0 / 6204.0;
    double tc = 2 * M * N * K / (1979e12 * 0.75 * 0.89 * ef);
    double tm = (N * K * 1 + M * (N + K) * 2) / (4.8e12 * 0.80);
    double want = sqrt(tc * tc + tm * tm) + 3e-6;   /* about 186.6 us */
    kv_op_cost g = kv_gemm_time(hw, &s.engine, M, N, K, SCN_DTYPE_FP8, 1, true);
    ck_assert_msg(fabs(g.seconds - want) <= 1e-12 * want, "%.10g vs %.10g", g.seconds, want);
    ck_assert(near(g.t_compute, tc) && near(g.efficiency, ef));
    /* The same in bf16 has no scale: 989 TFLOPS x 0.75, 64-element K stages (64 of them). */
    g = kv_gemm_time(hw, &s.engine, M, N, K, SCN_DTYPE_BF16, 2, true);
    ck_assert(near(g.t_compute, 2 * M * N * K / (989e12 * 0.75 * ef)));
    /* A profile built by hand, with no scale set (0), prices at compute's share. */
    scn_hardware h;
    memset(&h, 0, sizeof h);
    h.flops[SCN_DTYPE_FP8] = 100;
    h.eff_compute = 0.5;
    ck_assert(near(kv_compute_rate(&h, SCN_DTYPE_FP8), 50));
    h.eff_compute_scale[SCN_DTYPE_FP8] = 0.6;
    ck_assert(near(kv_compute_rate(&h, SCN_DTYPE_FP8), 30));
    ck_assert(kv_compute_rate(&h, (scn_dtype)SCN_DTYPE_COUNT) == 0);
    /* `kvplan cost` prints the rate's terms: fp8 weights on h200, 1979 TFLOPS x 0.6675. */
    char out[65536], err[4096], args[512];
    snprintf(args, sizeof args, "cost '%s/chat.yaml' --set model=llama-3-8b --set hardware=h200 "
             "--set model.weight_dtype=fp8 --format json", getenv("KVPLAN_LIBRARY"));
    ck_assert_int_eq(t_run(args, out, sizeof out, err, sizeof err), 0);
    ck_assert_msg(strstr(out, "\"gemm_peak_per_s\": 1979000000000000.0") != NULL, "%s", out);
    ck_assert_msg(strstr(out, "\"gemm_compute_share\": 0.6674999") != NULL, "%s", out);
    ck_assert_msg(strstr(out, "\"gemm_rate_per_s\": 1320982500000000.0") != NULL, "%s", out);
}
END_TEST

/* h200.yaml's compute_scale.fp8 is the statistic its comment names, computed here from the
 * measurement file: over the fp8 rows of validation/h200-2026-11-30/gemm.csv with M >= 4096,
 * the median of fp8 TFLOP/s over the bf16 TFLOP/s of the row with the same label and M, times
 * bf16 peak / fp8 peak; rounded to two places. h100-sxm.yaml carries the same figure. */
static int cmp_dbl(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

START_TEST(fp8_scale_is_the_gemm_csv_statistic)
{
    char path[700], line[256];
    snprintf(path, sizeof path, "%s/../validation/h200-2026-11-30/gemm.csv", getenv("KVPLAN_TESTS"));
    FILE *f = fopen(path, "r");
    ck_assert_msg(f != NULL, "cannot open %s", path);
    enum { MAXROWS = 400 };
    static char label[MAXROWS][64], dtype[MAXROWS][8];
    static long rows_m[MAXROWS];
    static double tflops[MAXROWS];
    int n = 0;
    ck_assert(fgets(line, sizeof line, f) != NULL);   /* header */
    while (n < MAXROWS && fgets(line, sizeof line, f)) {
        long N, K;
        double sec;
        if (sscanf(line, "%63[^,],%7[^,],%ld,%ld,%ld,%lf,%lf", label[n], dtype[n], &rows_m[n], &N, &K, &sec, &tflops[n]) == 7)
            n++;
    }
    fclose(f);
    double ratio[MAXROWS];
    int r = 0;
    for (int i = 0; i < n; i++) {
        if (strcmp(dtype[i], "fp8") || rows_m[i] < 4096) continue;
        for (int j = 0; j < n; j++)
            if (!strcmp(dtype[j], "bf16") && rows_m[j] == rows_m[i] && !strcmp(label[j], label[i]))
                ratio[r++] = tflops[i] / tflops[j];
    }
    ck_assert_int_eq(r, 8);   /* 4 Llama-3-8B shapes x M = 4096, 8192 */
    qsort(ratio, (size_t)r, sizeof *ratio, cmp_dbl);
    double med = (ratio[r / 2 - 1] + ratio[r / 2]) / 2;
    t_library("llama-3-8b", "h200", &s);
    double scale = med * s.hardware.flops[SCN_DTYPE_BF16] / s.hardware.flops[SCN_DTYPE_FP8];
    ck_assert_msg(fabs(scale - 0.8903) < 5e-4, "statistic %.4f", scale);
    ck_assert(near(s.hardware.eff_compute_scale[SCN_DTYPE_FP8], round(scale * 100) / 100));
    t_library("llama-3-8b", "h100-sxm", &s);
    ck_assert(near(s.hardware.eff_compute_scale[SCN_DTYPE_FP8], round(scale * 100) / 100));
    /* GPUs without a measurement or source have none. */
    static const char *const none[] = {"a100-80g", "h100-pcie", "b200", "mi300x", "l40s"};
    for (size_t i = 0; i < sizeof none / sizeof none[0]; i++) {
        t_library("llama-3-8b", none[i], &s);
        for (int d = 0; d < SCN_DTYPE_COUNT; d++) ck_assert_msg(s.hardware.eff_compute_scale[d] == 0, "%s", none[i]);
    }
}
END_TEST

Suite *suite_model_terms(void)
{
    Suite *su = suite_create("model_terms");
    TCase *tc = tcase_create("terms");
    tcase_add_test(tc, gemm_efficiency_at_chosen_shapes);
    tcase_add_test(tc, attention_kernel_families);
    tcase_add_test(tc, awq_bytes_from_the_config);
    tcase_add_test(tc, mla_flops_by_hand);
    tcase_add_test(tc, mla_absorbed_weights_stream_at_full_bandwidth);
    tcase_add_test(tc, flashmla_decode_is_two_kernels);
    tcase_add_test(tc, attention_time_grows_with_the_batch);
    tcase_add_test(tc, graphs_pad_decode_batches);
    tcase_add_test(tc, engine_profiles_load);
    tcase_add_test(tc, engine_errors_are_located);
    tcase_add_test(tc, hf_quantization_config);
    tcase_add_test(tc, compute_rate_per_dtype);
    tcase_add_test(tc, fp8_scale_is_the_gemm_csv_statistic);
    suite_add_tcase(su, tc);
    return su;
}
