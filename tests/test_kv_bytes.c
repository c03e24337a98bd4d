/* test_kv_bytes.c: KV bytes per token against hand arithmetic (written out per case) and the
 * published examples docs/cost-model.md works through. */
#include "tests.h"
#include "../model/kv_model.h"
#include "../model/kv_mla.h"

#include <math.h>

static scn_scenario s;

static kv_cache_cfg cfg(scn_dtype d) { return kv_cache_cfg_make(&s, d, 0, 0); }

START_TEST(llama2_7b_is_512_kib_per_token)
{
    t_library("llama-2-7b", "h100-sxm", &s);
    kv_cache_cfg c = cfg(SCN_DTYPE_FP16);
    /* 2 (K and V) * 32 layers * 32 KV heads * 128 dims * 2 bytes = 524288 B = 512 KiB. */
    ck_assert(kv_bytes_per_token(&s.model, &c) == 2.0 * 32 * 32 * 128 * 2);
    ck_assert(kv_bytes_per_token(&s.model, &c) == 512 * KIB);
    /* 4096 tokens: 4096 * 512 KiB = 2 GiB (the article's "about 1 GB" drops the heads factor). */
    ck_assert(kv_bytes_for_context(&s.model, &c, 1, 4096) == 2 * GIB);
}
END_TEST

START_TEST(forty_layer_hidden_4096_is_640_kib)
{
    /* The article's example: 40 layers, hidden 4096, MHA, fp16: 2 * 40 * 4096 * 2 = 655360 B. */
    const char *sets[] = {"model={layers: 40, hidden: 4096, heads: 32, intermediate: 11008, vocab: 32000, "
                          "max_position: 4096, weight_dtype: fp16}"};
    scn_error e;
    ck_assert_int_eq(t_load("model: llama-2-7b\nhardware: h100-sxm\nworkload: {arrival: {process: poisson, rate: 1/s}, "
                            "prompt_tokens: 1, output_tokens: 1}\n", sets, 1, &s, &e), SCN_OK);
    kv_cache_cfg c = cfg(SCN_DTYPE_FP16);
    ck_assert(kv_bytes_per_token(&s.model, &c) == 640 * KIB);
    ck_assert(kv_bytes_for_context(&s.model, &c, 1, 4096) == 2.5 * GIB);
}
END_TEST

START_TEST(gqa_eight_to_one_saves_87_5_percent)
{
    t_library("llama-2-70b", "h100-sxm", &s);   /* 64 query heads, 8 KV heads */
    kv_cache_cfg c = cfg(SCN_DTYPE_FP16);
    double gqa = kv_bytes_per_token(&s.model, &c);
    s.model.kv_heads = 64;                      /* the same model with MHA */
    double mha = kv_bytes_per_token(&s.model, &c);
    ck_assert(gqa == 2.0 * 80 * 8 * 128 * 2);   /* 327680 B = 320 KiB */
    ck_assert(1.0 - gqa / mha == 0.875);
    s.model.kv_heads = 1;                       /* MQA */
    ck_assert(kv_bytes_per_token(&s.model, &c) == 2.0 * 80 * 1 * 128 * 2);
}
END_TEST

START_TEST(mla_caches_latent_once)
{
    t_library("deepseek-v2-lite", "h100-sxm", &s);
    kv_cache_cfg c = cfg(SCN_DTYPE_BF16);
    /* (kv_lora_rank 512 + rope 64) * 27 layers * 2 bytes = 31104 B: not x2, not x heads. */
    ck_assert(kv_bytes_per_token(&s.model, &c) == (512.0 + 64) * 27 * 2);
    /* Tensor parallelism does not split the latent: every rank keeps it. */
    ck_assert(kv_bytes_per_token_layer_rank(&s.model, &c, 4) == kv_bytes_per_token_layer(&s.model, &c));
}
END_TEST

START_TEST(mla_expanded_caches_padded_heads)
{
    /* An engine that caches MLA as per-head K/V (vLLM before 0.7.1: the vllm-0.7 profile). */
    t_library_engine("deepseek-v3", "h200", "vllm-0.7", &s);
    kv_cache_cfg c = cfg(SCN_DTYPE_BF16);
    ck_assert(c.mla_expanded);
    /* K of qk_nope 128 + rope 64 = 192 per head and V padded to 192: 2 * 128 heads * 192 * 2 B
     * = 98304 B a layer, 61 layers: 5996544 B a token (the latent: 576 * 2 * 61 = 70272). */
    ck_assert(kv_bytes_per_token_layer(&s.model, &c) == 2.0 * 128 * 192 * 2);
    ck_assert(kv_bytes_per_token(&s.model, &c) == 2.0 * 128 * 192 * 2 * 61);
    /* Heads split over TP ranks, as ordinary attention: 16 of 128 on each of 8. */
    ck_assert(kv_bytes_per_token_layer_rank(&s.model, &c, 8) == 2.0 * 16 * 192 * 2);
    /* fp8 with a per-head scale (fp32): one scale per 192-element vector. */
    c = cfg(SCN_DTYPE_FP8);
    c.quant = (scn_quant){SCN_QUANT_PER_TOKEN_HEAD, 0, SCN_DTYPE_FP32, false};
    ck_assert(fabs(kv_bytes_per_token_layer(&s.model, &c) - 2.0 * 128 * (192 + 4)) < 1e-9);
    /* The latent profile of the same engine family keeps the latent. */
    t_library_engine("deepseek-v3", "h200", "vllm", &s);
    c = cfg(SCN_DTYPE_BF16);
    ck_assert(!c.mla_expanded);
    ck_assert(kv_bytes_per_token(&s.model, &c) == (512.0 + 64) * 61 * 2);
    /* A model without MLA ignores the engine's MLA cache setting. */
    t_library_engine("llama-3-8b", "h200", "vllm-0.7", &s);
    c = cfg(SCN_DTYPE_BF16);
    ck_assert(!c.mla_expanded);
    ck_assert(kv_bytes_per_token_layer(&s.model, &c) == 4096);
}
END_TEST

START_TEST(mla_expanded_capacity_matches_published_ratio)
{
    /* Neural Magic (Feb 2025): on 8x H200 vLLM 0.7.0's expanded cache held 54,560 tokens and
     * 0.7.1's latent 512,000. Same budget, so the token counts differ by the bytes per token
     * per rank: 16 heads * 192 * 2 * 2 B = 12288 B a layer against 1152 B, 10.67x. The
     * published ratio is 9.38 (its two budgets differ); the model's must be the bytes' ratio. */
    t_library_engine("deepseek-v3", "h200", "vllm-0.7", &s);
    s.deployment.tensor_parallel = 8;
    kv_cache_cfg c = cfg(SCN_DTYPE_BF16);
    kv_capacity ex = kv_capacity_compute(&s, &c, 16, 1152);
    t_library_engine("deepseek-v3", "h200", "vllm", &s);
    s.deployment.tensor_parallel = 8;
    /* Both measurements ran V0 (0.7.0 and 0.7.1), whose profile run samples after the forward
     * pass (sampler_bytes 40); the V1 `vllm` profile adds the sampler instead, so give it V0's
     * rule and only the cache layout differs. */
    ck_assert_int_eq(s.engine.mem_sampler_bytes, 0);
    s.engine.mem_sampler_bytes = 40;
    c = cfg(SCN_DTYPE_BF16);
    kv_capacity la = kv_capacity_compute(&s, &c, 16, 1152);
    ck_assert(la.kv_budget == ex.kv_budget);
    ck_assert(fabs((double)la.capacity_tokens / (double)ex.capacity_tokens - 12288.0 / 1152.0) < 1e-3);
    /* Within 25 % of the published expanded figure (the budget itself is the model's). */
    ck_assert(fabs(ex.capacity_tokens / 54560.0 - 1) < 0.25);
}
END_TEST

START_TEST(mla_materialized_products_take_their_bytes)
{
    /* vLLM 0.7.1-0.7.3 (PR #12528) kept W_Q_UK = W_Q.W_UK and W_UV_O = W_UV.W_O per layer beside
     * the raw projections, requantised to fp8 with the checkpoint's 128 x 128 block scales.
     * DeepSeek-V3 at TP 8, 16 heads a GPU, by hand: W_Q_UK 1536 x (16 * 512) = 12 582 912 and
     * W_UV_O (16 * 512) x 7168 = 58 720 256 parameters a layer, 71 303 168 in all; x 61 layers =
     * 4 349 493 248 parameters, at 1 + 4/16384 bytes: 4 349 493 248 + 1 061 888 = 4 350 555 136 B. */
    t_library_engine("deepseek-v3", "h200", "vllm-0.7.1", &s);
    s.deployment.tensor_parallel = 8;
    ck_assert(s.engine.mla_materialized);
    ck_assert(kv_mla_absorbed_params(&s.model, 8) == 71303168.0);
    ck_assert(kv_mla_absorbed_bytes(&s, &s.model) == 4350555136.0);
    kv_cache_cfg c = cfg(SCN_DTYPE_BF16);
    kv_capacity mat = kv_capacity_compute(&s, &c, 16, 1152);
    /* The same scenario without the products (vLLM 0.7.1's batch defaults and profile run are
     * V0's, not the current profile's: only the products may differ). */
    s.engine.mla_materialized = false;
    ck_assert(kv_mla_absorbed_bytes(&s, &s.model) == 0);
    c = cfg(SCN_DTYPE_BF16);
    kv_capacity sep = kv_capacity_compute(&s, &c, 16, 1152);
    t_library_engine("deepseek-v3", "h200", "vllm", &s);
    s.deployment.tensor_parallel = 8;
    ck_assert(!s.engine.mla_materialized);
    ck_assert(kv_mla_absorbed_bytes(&s, &s.model) == 0);
    /* The same budget less those bytes; the latent cache (576 * 61 * 2 = 70 272 B a token) is
     * unchanged, so the tokens fall by 4 350 555 136 / 70 272 = 61 910.2. */
    ck_assert_double_eq_tol(sep.kv_budget - mat.kv_budget, 4350555136.0, 1e-3);
    ck_assert(mat.kv_bytes_per_token == sep.kv_bytes_per_token && sep.kv_bytes_per_token == 70272.0);
    long drop = sep.capacity_tokens - mat.capacity_tokens;
    ck_assert(drop == 61910 || drop == 61911);
    /* A bf16 model without a query LoRA keeps them in 16-bit, q_in = hidden: DeepSeek-V2-Lite at
     * TP 1 (16 heads, r 512, h 2048): 2048 * 8192 + 8192 * 2048 = 33 554 432 a layer, x 27 layers
     * x 2 B = 1 811 939 328 B. */
    t_library_engine("deepseek-v2-lite", "h100-sxm", "vllm-0.7.1", &s);
    s.deployment.tensor_parallel = 1;
    ck_assert(kv_mla_absorbed_bytes(&s, &s.model) == 1811939328.0);
    /* A model without MLA has none to keep. */
    t_library_engine("llama-3-8b", "h100-sxm", "vllm-0.7.1", &s);
    ck_assert(kv_mla_absorbed_bytes(&s, &s.model) == 0);
}
END_TEST

START_TEST(quantised_kv_counts_its_scales)
{
    t_library("llama-3-8b", "h100-sxm", &s);    /* 2 * 8 heads * 128 = 2048 elements per layer */
    kv_cache_cfg c = cfg(SCN_DTYPE_FP8);        /* per-tensor scale: nothing per token */
    ck_assert(kv_bytes_per_token_layer(&s.model, &c) == 2048);
    c = cfg(SCN_DTYPE_INT8);                    /* one fp16 scale per head vector: 16 vectors */
    ck_assert(kv_bytes_per_token_layer(&s.model, &c) == 2048 + 16 * 2);
    c = cfg(SCN_DTYPE_INT4);                    /* 4 bits + an fp16 scale and zero per 64 elements */
    ck_assert(kv_bytes_per_token_layer(&s.model, &c) == 2048 * 0.5 + 2048 / 64 * 4);
    c.quant = (scn_quant){SCN_QUANT_GROUP, 128, SCN_DTYPE_FP32, false};
    ck_assert(kv_bytes_per_token_layer(&s.model, &c) == 1024 + 16 * 4);
    c = cfg(SCN_DTYPE_BF16);                    /* unquantised: no scales whatever the layout */
    ck_assert(kv_bytes_per_token_layer(&s.model, &c) == 4096);
}
END_TEST

START_TEST(sliding_windows_cap_their_layers)
{
    t_library("mistral-7b", "h100-sxm", &s);    /* all 32 layers windowed at 4096; 128 KiB/token */
    kv_cache_cfg c = cfg(SCN_DTYPE_BF16);
    ck_assert(kv_bytes_for_context(&s.model, &c, 1, 1000) == 1000 * 128 * KIB);
    ck_assert(kv_bytes_for_context(&s.model, &c, 1, 10000) == 4096 * 128 * KIB);
    ck_assert(kv_bytes_for_context(&s.model, &c, 1, 30000) == 4096 * 128 * KIB);
    t_library("gemma-2-9b", "h100-sxm", &s);    /* 2 * 8 * 256 * 2 = 8192 B per layer per token */
    c = cfg(SCN_DTYPE_BF16);
    ck_assert(kv_bytes_per_token_layer(&s.model, &c) == 8192);
    /* 8192 tokens: 21 global layers hold 8192, 21 local layers hold 4096. */
    ck_assert(kv_bytes_for_context(&s.model, &c, 1, 8192) == 8192.0 * (21 * 8192 + 21 * 4096));
}
END_TEST

START_TEST(sink_plus_window_bounds_any_length)
{
    t_library("llama-3-8b", "h100-sxm", &s);
    kv_cache_cfg c = kv_cache_cfg_make(&s, SCN_DTYPE_BF16, 4, 1020);
    double per = 128 * KIB;
    ck_assert(kv_bytes_for_context(&s.model, &c, 1, 100) == 100 * per);
    for (long t = 1024; t <= 10000000; t *= 7)
        ck_assert_msg(kv_bytes_for_context(&s.model, &c, 1, t) == 1024 * per, "%ld tokens not bounded", t);
}
END_TEST

START_TEST(tensor_parallel_splits_kv_heads)
{
    t_library("llama-3-70b", "h100-sxm", &s);   /* 8 KV heads */
    kv_cache_cfg c = cfg(SCN_DTYPE_BF16);
    double all = kv_bytes_per_token_layer(&s.model, &c);
    ck_assert(kv_bytes_per_token_layer_rank(&s.model, &c, 2) == all / 2);
    ck_assert(kv_bytes_per_token_layer_rank(&s.model, &c, 8) == all / 8);
    /* 16 ranks, 8 KV heads: each rank keeps a replica of one head, so still 1/8 of the whole. */
    ck_assert(kv_bytes_per_token_layer_rank(&s.model, &c, 16) == all / 8);
}
END_TEST

Suite *suite_kv_bytes(void)
{
    Suite *su = suite_create("kv_bytes");
    TCase *tc = tcase_create("formulas");
    tcase_add_test(tc, llama2_7b_is_512_kib_per_token);
    tcase_add_test(tc, forty_layer_hidden_4096_is_640_kib);
    tcase_add_test(tc, gqa_eight_to_one_saves_87_5_percent);
    tcase_add_test(tc, mla_caches_latent_once);
    tcase_add_test(tc, mla_expanded_caches_padded_heads);
    tcase_add_test(tc, mla_expanded_capacity_matches_published_ratio);
    tcase_add_test(tc, mla_materialized_products_take_their_bytes);
    tcase_add_test(tc, quantised_kv_counts_its_scales);
    tcase_add_test(tc, sliding_windows_cap_their_layers);
    tcase_add_test(tc, sink_plus_window_bounds_any_length);
    tcase_add_test(tc, tensor_parallel_splits_kv_heads);
    suite_add_tcase(su, tc);
    return su;
}
