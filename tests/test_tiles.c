/* test_tiles.c: the library's choice among CTA tile shapes for a GEMM (the best of CUTLASS's
 * candidate tiles), FlashAttention-2's split-KV count for decode, and TensorRT-LLM's fp8
 * attention rate (decode only), each against hand arithmetic (docs/cost-model.md, "GEMM tiles"
 * and "Decode split"); step time across the row-tile and batch edges against bounds derived
 * from those rules; and the decode fast path against the general path with the new split rule. */
#include "tests.h"
#include "../model/kv_model.h"

#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>

static scn_scenario s;

static bool near(double a, double b) { return fabs(a - b) <= 1e-12 * fabs(b) + 1e-18; }

static void use(const char *model, const char *hardware, const char *engine)
{
    t_library_engine(model, hardware, engine, &s);
}

/* Llama-3-70B's gate|up projection at TP 4 (N = 2 x 28672 / 4 = 14336, K = 8192) in bf16 on
 * 132 SMs, 64-element K stages (128 of them): the tile each M gets, by hand. N / 128 = 112
 * column tiles of 128, 224 of 64, 56 of 256. */
START_TEST(gemm_tile_choice_by_hand)
{
    use("llama-3-8b", "h100-sxm", "vllm");
    const scn_hardware *hw = &s.hardware;
    ck_assert_int_eq(hw->sm_count, 132);
    const double N = 14336, K = 8192;
    /* M = 64: the swapped skinny tile, 64 rows x 128 columns: 112 tiles, one wave (no split-K:
     * floor(132 / 112) = 1); every candidate of 64 rows does as well, none better. */
    ck_assert(near(kv_gemm_shape_efficiency(hw, 64, N, K, SCN_DTYPE_BF16), 112.0 / 132));
    /* M = 65: every candidate pads to 128 rows (two 64-row strips or one of 128 or 256) and
     * fills 112 / 132 of its waves at best (128 x 128: 112 tiles, one wave). */
    ck_assert(near(kv_gemm_shape_efficiency(hw, 65, N, K, SCN_DTYPE_BF16), 65.0 / 128 * 112 / 132));
    /* M = 128: 128 x 128, 112 tiles in one wave. */
    ck_assert(near(kv_gemm_shape_efficiency(hw, 128, N, K, SCN_DTYPE_BF16), 112.0 / 132));
    /* M = 129: 128-row tiles pad to 256 (129 / 256 x 224 / 264 at best); 64 x 128 tiles pad
     * to 192 rows: 3 x 112 = 336 tiles, 3 waves of 132: 129 x 112 / (3 x 132 x 64), the best
     * (64 x 64 ties: 672 tiles in 6 waves). The old 128-row model gave 129 / 256 x 224 / 264. */
    double e129 = kv_gemm_shape_efficiency(hw, 129, N, K, SCN_DTYPE_BF16);
    ck_assert(near(e129, 129.0 * 112 / (3 * 132 * 64)));
    ck_assert(e129 > 129.0 / 256 * 224 / 264 * 1.3);
    /* M = 256: 64 x 64 tiles, 4 x 224 = 896 of them in 7 waves (924 slots): 896 / 924, above
     * the 112 / 132 of every larger tile. */
    ck_assert(near(kv_gemm_shape_efficiency(hw, 256, N, K, SCN_DTYPE_BF16), 896.0 / 924));
    /* M = 257: 64 x 64, 5 x 224 = 1120 tiles in 9 waves (1188): 257 x 14336 / (1188 x 64 x 64);
     * 64 x 128 (560 tiles, 5 waves) reaches 257 x 112 / (660 x 64), less. */
    ck_assert(near(kv_gemm_shape_efficiency(hw, 257, N, K, SCN_DTYPE_BF16), 257.0 * N / (1188.0 * 64 * 64)));
    /* On an A100 (108 SMs), M = 129 over N = K = 4096 (32 column tiles of 128, 64 of 64):
     * 64 x 64 tiles, 3 x 64 = 192 in 2 waves (216 slots): 129 x 4096 / (216 x 64 x 64) = 0.597;
     * 64 x 128 ties (96 tiles in one wave: 129 x 32 / (108 x 64)); the 128- and 256-row tiles
     * pad to 256 rows and reach 0.43 at best (256 x 128: 32 tiles, 3-way split-K of 22 of the
     * 64 K stages each). */
    use("llama-3-8b", "a100-80g", "vllm");
    ck_assert_int_eq(s.hardware.sm_count, 108);
    ck_assert(near(kv_gemm_shape_efficiency(&s.hardware, 129, 4096, 4096, SCN_DTYPE_BF16), 129.0 * 4096 / (216.0 * 64 * 64)));
}
END_TEST

/* FA2's split rule by hand (num_splits_heuristic): 2 x SMs slots; one split from 80 % of them;
 * else the smallest count whose last wave is filled to 85 % of the best count's. */
/* The shape efficiency is memoised per thread (kv_efficiency.c): a value answered from the memo
 * after many other shapes (colliding slots included) must equal the value a thread with an
 * empty memo computes, for every shape, SM count and dtype of a grid. The reference runs in a
 * fresh thread, whose memo is empty, so it is the plain tile search. */
typedef struct { const scn_hardware *hw; double M, N, K; scn_dtype dt; double eff; } memo_probe;

static void *fresh_thread_efficiency(void *arg)
{
    memo_probe *p = arg;
    p->eff = kv_gemm_shape_efficiency(p->hw, p->M, p->N, p->K, p->dt);
    return NULL;
}

START_TEST(gemm_memo_answers_as_the_search)
{
    static const double Ms[] = {1, 7, 64, 65, 129, 300, 2048, 8191};
    static const double NKs[][2] = {{6144, 4096}, {4096, 4096}, {28672, 4096}, {4096, 14336}, {1280, 8192}};
    static const scn_dtype dts[] = {SCN_DTYPE_BF16, SCN_DTYPE_FP8};
    scn_hardware hws[2];
    use("llama-3-8b", "h100-sxm", "vllm");
    hws[0] = s.hardware;
    use("llama-3-8b", "a100-80g", "vllm");
    hws[1] = s.hardware;
    ck_assert(hws[0].sm_count != hws[1].sm_count);
    /* Fill this thread's memo with every shape, in one order ... */
    for (int h = 0; h < 2; h++)
        for (size_t m = 0; m < sizeof Ms / sizeof *Ms; m++)
            for (size_t n = 0; n < sizeof NKs / sizeof *NKs; n++)
                for (size_t d = 0; d < 2; d++) (void)kv_gemm_shape_efficiency(&hws[h], Ms[m], NKs[n][0], NKs[n][1], dts[d]);
    /* ... then ask again in the reverse order, against a fresh thread's answer. */
    for (int h = 1; h >= 0; h--)
        for (size_t m = sizeof Ms / sizeof *Ms; m-- > 0;)
            for (size_t n = sizeof NKs / sizeof *NKs; n-- > 0;)
                for (size_t d = 2; d-- > 0;) {
                    memo_probe p = {&hws[h], Ms[m], NKs[n][0], NKs[n][1], dts[d], 0};
                    pthread_t t;
                    ck_assert_int_eq(pthread_create(&t, NULL, fresh_thread_efficiency, &p), 0);
                    ck_assert_int_eq(pthread_join(t, NULL), 0);
                    double here = kv_gemm_shape_efficiency(&hws[h], Ms[m], NKs[n][0], NKs[n][1], dts[d]);
                    ck_assert_msg(here == p.eff, "M %g N %g K %g dt %d sm %d: %.17g here, %.17g fresh", Ms[m], NKs[n][0],
                                  NKs[n][1], (int)dts[d], hws[h].sm_count, here, p.eff);
                }
}
END_TEST

START_TEST(fa2_split_rule_by_hand)
{
    use("llama-3-8b", "h100-sxm", "vllm-v0");   /* flash2 */
    const scn_hardware *hw = &s.hardware;
    const scn_engine *e = &s.engine;
    ck_assert_int_eq(e->attn_kernel, SCN_AK_FLASH2);
    /* 264 slots; the best score is 1 for each of these item counts (some k makes items x k a
     * multiple of 264 within 128 splits), so the threshold is 0.85. */
    /* 16 x 8 = 128 items: k = 1 fills 128 / 264 = 0.48; k = 2, 256 / 264 = 0.97: 2 splits. */
    ck_assert_double_eq(kv_decode_splits(hw, e, 128, false), 2);
    /* 17 x 8 = 136: k = 1, 0.52; k = 2, 272 / 264 -> 2 waves, 0.52; k = 3, 408 / 528 = 0.77;
     * k = 4, 544 / 792 = 0.69; k = 5, 680 / 792 = 0.86: 5 splits. */
    ck_assert_double_eq(kv_decode_splits(hw, e, 136, false), 5);
    /* 8 x 8 = 64: 0.24, 0.48, 0.73, then 256 / 264 = 0.97: 4. */
    ck_assert_double_eq(kv_decode_splits(hw, e, 64, false), 4);
    /* 9 x 8 = 72: 0.27, 0.55, 0.82, 288/528 = 0.55, 360/528 = 0.68, 432/528 = 0.82, 504/528 =
     * 0.95: 7. */
    ck_assert_double_eq(kv_decode_splits(hw, e, 72, false), 7);
    /* 26 x 8 = 208 < 0.8 x 264 = 211.2: 208 k / 264 fills 0.79 for k = 1 to 4 (208 / 264, 416
     * / 528, 624 / 792, 832 / 1056), 1040 / 1056 = 0.98 at k = 5: 5. 212 items: one split. */
    ck_assert_double_eq(kv_decode_splits(hw, e, 208, false), 5);
    ck_assert_double_eq(kv_decode_splits(hw, e, 212, false), 1);
    /* SDPA runs the same rule; MLA's latent decode and the other families keep one wave's
     * worth of SMs per item: floor(132 / 136) = 0 (clamped to 1 per row), floor(132 / 64) = 2. */
    s.engine.attn_kernel = SCN_AK_SDPA;
    ck_assert_double_eq(kv_decode_splits(hw, e, 136, false), 5);
    ck_assert_double_eq(kv_decode_splits(hw, e, 64, true), 2);
    s.engine.attn_kernel = SCN_AK_FLASHINFER;
    ck_assert_double_eq(kv_decode_splits(hw, e, 136, false), 0);
    s.engine.attn_kernel = SCN_AK_FLASH3;   /* FA3 on Hopper: dynamic splits, the one-wave rule */
    ck_assert_double_eq(kv_decode_splits(hw, e, 64, false), 2);
    /* vLLM's FlashAttention off Hopper is FA2: A100, 108 SMs, 216 slots; 13 x 8 = 104 items:
     * k = 1, 104 / 216 = 0.48; k = 2, 208 / 216 = 0.96: 2. */
    use("llama-3-8b", "a100-80g", "vllm");
    ck_assert_double_eq(kv_decode_splits(&s.hardware, &s.engine, 104, false), 2);
    /* The per-step cap the simulator's fast path uses is the same rule over n x KV heads. */
    use("llama-3-8b", "h100-sxm", "vllm-v0");
    ck_assert_double_eq(kv_decode_split_cap(&s, 17), 5);
    ck_assert_double_eq(kv_decode_split(4097, 5), 5);
    ck_assert_double_eq(kv_decode_split(300, 5), 3);   /* ceil(300 / 128) key blocks */
}
END_TEST

/* Step time across the row-tile edges: a step's time is a sum of op times, so its ratio from M
 * to M + 1 rows is at most the largest op ratio; a GEMM's is at most the larger of its compute
 * and memory ratios (sqrt(a^2 + b^2) / sqrt(c^2 + d^2) <= max(a / c, b / d)); its memory grows
 * by the activations only, under (M + 1) / M. Its compute is its padded work: from M, a multiple
 * of 64, the 64-row candidate tiles add one 64-row strip, (M + 64) / M, the bound asserted
 * (wave tails can move one GEMM a little past it, the weight-bound terms pull the step under).
 * The old 128-row padding doubled the compute at 129 and 257 and broke it. */
START_TEST(step_time_is_smooth_across_row_tiles)
{
    const char *hws[] = {"h100-sxm", "a100-80g", "h200"};
    for (int hi = 0; hi < 3; hi++) {
        use("llama-3-8b", hws[hi], "vllm");
        kv_cache_cfg c = kv_cache_cfg_make(&s, SCN_DTYPE_BF16, 0, 0);
        const long M[] = {64, 128, 256};
        for (int i = 0; i < 3; i++) {
            /* One prompt of M, then M + 1 new tokens, nothing cached. */
            kv_seq_work a = {M[i], 0}, b = {M[i] + 1, 0};
            double ta = kv_step_time(&s, &c, SCN_ATTN_FLASH, &a, 1).seconds;
            double tb = kv_step_time(&s, &c, SCN_ATTN_FLASH, &b, 1).seconds;
            double bound = (double)(M[i] + 64) / (double)M[i];
            ck_assert_msg(tb >= ta && tb / ta <= bound, "%s prefill %ld -> %ld: %.6g -> %.6g s (bound x%.3f)", hws[hi], M[i],
                          M[i] + 1, ta, tb, bound);
        }
    }
}
END_TEST

/* Batch 16 -> 17 at 4096 keys, Llama-3-8B on an H100 with FA2 (flash2, paged: the split-KV
 * kernel and its 64-row tile both times), eager (no graph padding of the rows). Attention's
 * memory time is its bytes over the bandwidth times the wave efficiency of its work items:
 * 16 x 8 x 2 splits = 256 items, 2 waves of 132 (256 / 264); 17 x 8 x 5 = 680, 6 waves (680 /
 * 792). Its bytes grow by exactly 17 / 16, so its memory time by 17 / 16 x (256 / 264) / (680 /
 * 792) = 1.20, by hand; its compute by 17 / 16. The other ops are weight-bound at 16-17 rows
 * (their ratios are near 1), so the step's ratio stays under attention's. The old rule (one
 * split each: 128 / 132 against 136 / 264) gave attention 17 / 16 x (128 / 132) / (136 / 264)
 * = 2.0. */
START_TEST(decode_step_bound_at_batch_16_17)
{
    use("llama-3-8b", "h100-sxm", "vllm-v0");
    s.engine.cuda_graphs = false;
    kv_cache_cfg c = kv_cache_cfg_make(&s, SCN_DTYPE_BF16, 0, 0);
    static kv_seq_work w[17];
    for (int i = 0; i < 17; i++) w[i] = (kv_seq_work){1, 4095};
    kv_step_cost a = kv_step_time(&s, &c, SCN_ATTN_FLASH, w, 16), b = kv_step_time(&s, &c, SCN_ATTN_FLASH, w, 17);
    double bound = 17.0 / 16 * (256.0 / 264) / (680.0 / 792);
    const kv_op_cost *x = &a.op[KV_OP_ATTENTION], *y = &b.op[KV_OP_ATTENTION];
    ck_assert_msg(fabs(y->t_memory / x->t_memory / bound - 1) < 1e-12, "%.6g", y->t_memory / x->t_memory);
    ck_assert(near(y->t_compute / x->t_compute, 17.0 / 16));
    ck_assert_msg(b.seconds > a.seconds && b.seconds / a.seconds <= bound, "%.6g -> %.6g s, bound x%.4f", a.seconds,
                  b.seconds, bound);
}
END_TEST

/* The decode fast path (kv_decode_plan_seconds from row sums) equals kv_step_time bit for bit
 * where the FA2 rule splits: flash2 and sdpa on an H100, vLLM on an A100, every batch size from
 * 1 to 80 with random contexts (rows with fewer key blocks than the split count split less). */
START_TEST(fast_path_is_bit_identical_with_fa2_splits)
{
    const char *cases[][2] = {{"h100-sxm", "vllm-v0"}, {"h100-sxm", "bare"}, {"a100-80g", "vllm"}};
    static kv_seq_work w[80];
    uint64_t st = 0x5eed;
    int split_steps = 0;
    for (int ci = 0; ci < 3; ci++) {
        use("llama-3-8b", cases[ci][0], cases[ci][1]);
        kv_cache_cfg c = kv_cache_cfg_make(&s, SCN_DTYPE_BF16, 0, 0);
        ck_assert(kv_decode_sums_exact(&s, &c, SCN_ATTN_FLASH, 80, 8192));
        for (int n = 1; n <= 80; n++) {
            for (int i = 0; i < n; i++) {
                st = st * 6364136223846793005ULL + 1442695040888963407ULL;
                w[i] = (kv_seq_work){1, (long)((st >> 33) % 8000)};
            }
            double cap = kv_decode_split_cap(&s, n);
            split_steps += cap > 1;
            kv_decode_sums d = {{0, 0}, {0, 0}};
            for (int k = 0; k < 2; k++) {
                long lc = kv_decode_cap(&s, &c, k);
                for (int i = 0; i < n; i++) {
                    long held = w[i].context + 1;
                    if (lc > 0 && held > lc) held = lc;
                    d.keys[k] += (double)held;
                    d.splits[k] += kv_decode_split((double)held, cap);
                }
            }
            kv_step_cost shape, want = kv_step_time(&s, &c, SCN_ATTN_FLASH, w, n);
            kv_step_shape(&s, NULL, w, n, &shape);
            kv_decode_plan plan;
            kv_decode_plan_make(&shape, &s, &c, n, &plan);
            double fast = kv_decode_plan_seconds(&plan, &d);
            ck_assert_msg(fast == want.seconds, "%s %s n=%d: %.17g vs %.17g", cases[ci][0], cases[ci][1], n, fast, want.seconds);
            ck_assert(kv_step_complete_decode(&shape, &s, &c, n, &d).seconds == want.seconds);
        }
    }
    ck_assert(split_steps > 40);
}
END_TEST

/* TensorRT-LLM over an fp8 cache on an H100: XQA decode computes in fp8 (its MathElem is the
 * cache's), the context FMHA at the 16-bit rate (no source for fp8 prefill by default); FA3
 * runs both in fp8 at 1200 of 1979 TFLOPS (the FA3 paper). Family share on Hopper 0.75. */
START_TEST(trtllm_fp8_attention_rate_is_decode_only)
{
    use("llama-3.1-8b", "h100-sxm", "trtllm");
    kv_cache_cfg f8 = kv_cache_cfg_make(&s, SCN_DTYPE_FP8, 0, 0);
    const scn_hardware *hw = &s.hardware;
    double bf = hw->flops[SCN_DTYPE_BF16], fp = hw->flops[SCN_DTYPE_FP8];
    ck_assert(near(kv_attention_rate(hw, &s.engine, &f8, false), fp * 0.75));
    ck_assert(near(kv_attention_rate(hw, &s.engine, &f8, true), bf * 0.75));
    /* A 32k prefill: attention at most at the 16-bit rate, so never above FA3's published
     * fp8 figure (1.2 PFLOP/s on an H100). */
    kv_seq_work p = {32768, 0};
    kv_step_cost r = kv_step_time(&s, &f8, SCN_ATTN_FLASH, &p, 1);
    const kv_op_cost *at = &r.op[KV_OP_ATTENTION];
    ck_assert(at->t_compute > 0);
    ck_assert_msg(at->flops / at->t_compute <= bf * 0.75 * (1 + 1e-12) && at->flops / at->t_compute < 1.2e15,
                  "%.4g flop/s", at->flops / at->t_compute);
    s.engine.attn_kernel = SCN_AK_FLASH3;
    ck_assert(near(kv_attention_rate(hw, &s.engine, &f8, true), fp * 1200.0 / 1979.0));
    ck_assert(near(kv_attention_rate(hw, &s.engine, &f8, false), fp * 1200.0 / 1979.0));
}
END_TEST

Suite *suite_tiles(void)
{
    Suite *su = suite_create("tiles");
    TCase *tc = tcase_create("tiles");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, gemm_tile_choice_by_hand);
    tcase_add_test(tc, gemm_memo_answers_as_the_search);
    tcase_add_test(tc, fa2_split_rule_by_hand);
    tcase_add_test(tc, step_time_is_smooth_across_row_tiles);
    tcase_add_test(tc, decode_step_bound_at_batch_16_17);
    tcase_add_test(tc, fast_path_is_bit_identical_with_fa2_splits);
    tcase_add_test(tc, trtllm_fp8_attention_rate_is_decode_only);
    suite_add_tcase(su, tc);
    return su;
}
