/* test_moe_grouped.c: grouped-GEMM tile padding of the routed experts and the data movement of a
 * CUTLASS fused-MoE layer (model/kv_moe_grouped.c), against values worked out by hand. */
#include "tests.h"
#include "../model/kv_moe_grouped.h"
#include "../model/kv_moe_parallel.h"

#include <math.h>

static scn_scenario s;

/* E[ceil(X / t)] for X ~ Binomial(n, q), by hand: n 4, q 1/2, t 2: P(X) = 1, 4, 6, 4, 1 (/16),
 * ceil(X / 2) = 0, 1, 1, 2, 2, so (4 + 6 + 8 + 2) / 16 = 1.25. With t 1 the expectation is the
 * mean n q, exactly in the summed branch and within a hundredth in the normal one (n > 1024). */
START_TEST(binomial_tiles_by_hand)
{
    ck_assert(fabs(kv_binomial_expected_tiles(4, 0.5, 2) - 1.25) < 1e-12);
    ck_assert(fabs(kv_binomial_expected_tiles(100, 0.25, 1) - 25) < 1e-9);
    ck_assert(fabs(kv_binomial_expected_tiles(4096, 0.25, 1) - 1024) < 0.01);
    /* Every token to every expert (q 1): the rows are n, ceil(300 / 128) = 3 tiles. */
    ck_assert(kv_binomial_expected_tiles(300, 1, 128) == 3);
    ck_assert(kv_binomial_expected_tiles(0, 0.25, 128) == 0);
    /* The two branches agree across their boundary: with q 1/4 the exact walk ends where
     * n ln(3/4) passes -700, n = 2433; 2433 and 2434 tokens, 128-row tiles (mean 608, sd 21.4:
     * 5 tiles unless the rows pass 640, about 7 % of the time: 5.07). */
    double a = kv_binomial_expected_tiles(2433, 0.25, 128), b = kv_binomial_expected_tiles(2434, 0.25, 128);
    ck_assert_msg(fabs(a - b) < 0.01 && a > 5.05 && a < 5.09, "%g vs %g", a, b);
    /* Mirrored: q 3/4 is 4 - Binomial(4, 1/4): P(X) = 1, 12, 54, 108, 81 (/256), ceil(X / 2) =
     * 0, 1, 1, 2, 2: (12 + 54 + 216 + 162) / 256 = 444 / 256; and at q 0.99, n 200 (where
     * 0.01^200 would underflow unmirrored) the rows are 198 +- 1.4, all in 2 tiles of 128. */
    ck_assert(fabs(kv_binomial_expected_tiles(4, 0.75, 2) - 444.0 / 256) < 1e-12);
    ck_assert(fabs(kv_binomial_expected_tiles(200, 0.99, 128) - 2) < 1e-9);
}
END_TEST

/* Each token to all 8 experts (k = E), 128 tokens: every expert has exactly 128 rows, N 2048,
 * K 1024, bf16 (64 K per stage, 16 stages). On an H100 (132 SMs) the grouped tiles are 128 or
 * 256 rows: 128 x 128 gives 8 experts x 16 column tiles = 128 tiles, one wave of 132, padded work
 * 132 x 128 x 128 x 1024 against the real 128 x 8 x 2048 x 1024: 128 / 132 (the narrower columns
 * tie, 256-row tiles pad half). On an A100 (108 SMs) the 16-bit grouped tiles are 32, 64 and 128
 * rows under 128 columns; 32 x 128: 4 x 16 x 8 = 512 tiles, 5 waves, padded 5 x 108 x 32 x 128 x
 * 1024, which beats 64 rows (3 waves of 256 tiles) and 128 rows (2 waves of 128). */
START_TEST(grouped_efficiency_by_hand)
{
    t_library("mixtral-8x7b", "h100-sxm", &s);
    double real = 128.0 * 8 * 2048 * 1024;
    double h100 = kv_moe_grouped_efficiency(&s.hardware, 128, 8, 8, 2048, 1024, SCN_DTYPE_BF16, 2);
    ck_assert_msg(fabs(h100 - 128.0 / 132) < 1e-12, "%.15g", h100);
    t_library("mixtral-8x7b", "a100-80g", &s);
    double a100 = kv_moe_grouped_efficiency(&s.hardware, 128, 8, 8, 2048, 1024, SCN_DTYPE_BF16, 2);
    ck_assert_msg(fabs(a100 - real / (5.0 * 108 * 32 * 128 * 1024)) < 1e-12, "%.15g", a100);
    /* One token to 2 of 8 experts on the H100 in fp8 (TMA warp-specialised tiles only): the
     * expected tiles are 8 (1 - (3/4)^1) = 2 one-row experts, each padded to 128 rows; the least
     * padded choice is 128 x 16 (2 x 896 tiles, 14 waves of 132; 128 K per stage, 32 stages). */
    t_library("mixtral-8x7b", "h100-sxm", &s);
    double one = kv_moe_grouped_efficiency(&s.hardware, 1, 8, 2, 14336, 4096, SCN_DTYPE_FP8, 1);
    double tiles = 2.0 * ceil(14336 / 16.0), waves = ceil(tiles / 132);
    ck_assert_msg(fabs(one - 2.0 * 14336 * 4096 / (waves * 132 * 128 * 16 * 4096)) < 1e-12, "%.15g", one);
    /* In bf16 Hopper also profiles the Ampere-style tiles: 32 x 128 pads the row to 32 only
     * (2 x 112 tiles, 2 waves): 2 x 14336 x 4096 / (2 x 132 x 32 x 128 x 4096). */
    double bf = kv_moe_grouped_efficiency(&s.hardware, 1, 8, 2, 14336, 4096, SCN_DTYPE_BF16, 2);
    ck_assert_msg(fabs(bf - 2.0 * 14336 / (2.0 * 132 * 32 * 128)) < 1e-12, "%.15g", bf);
    /* On an A100 (108 SMs) the same token: 16-bit weights take 32 x 128 (2 x 112 tiles, 3 waves);
     * 4-bit weights in 16-bit math take the weight-only set's 16 x 128. */
    t_library("mixtral-8x7b", "a100-80g", &s);
    double a16 = kv_moe_grouped_efficiency(&s.hardware, 1, 8, 2, 14336, 4096, SCN_DTYPE_BF16, 2);
    double a4 = kv_moe_grouped_efficiency(&s.hardware, 1, 8, 2, 14336, 4096, SCN_DTYPE_BF16, 0.5);
    ck_assert_msg(fabs(a16 - 2.0 * 14336 / (3.0 * 108 * 32 * 128)) < 1e-12, "%.15g", a16);
    ck_assert_msg(fabs(a4 - 2.0 * 14336 / (3.0 * 108 * 16 * 128)) < 1e-12, "%.15g", a4);
}
END_TEST

/* Weight re-reads of the row-major grouped GEMMs, by hand. kv_grouped_weight_reads: 4 M tiles,
 * 112 column tiles and 216 resident CTAs (108 SMs x 2) put 216 / 112 = 27/14 rows in flight, so
 * 4 / (27/14) = 56/27 row groups; a 14336 x 4096 bf16 slab (117 440 512 B) against 40 MiB of L2
 * (41 943 040 B, 5/14 of it) misses with 9/14: 1 + (56/27 - 1) x 9/14 = 71/42. A slab the L2
 * holds, or rows that all run together, read once; without an L2 size every re-read misses. */
START_TEST(grouped_weight_reads_by_hand)
{
    double slab = 14336.0 * 4096 * 2, l2 = 40.0 * 1024 * 1024;
    ck_assert(fabs(kv_grouped_weight_reads(4, 112, 216, slab, l2) - 71.0 / 42) < 1e-12);
    ck_assert(kv_grouped_weight_reads(4, 112, 216, 30e6, l2) == 1);
    ck_assert(kv_grouped_weight_reads(1.5, 112, 216, slab, l2) == 1);
    ck_assert(kv_grouped_weight_reads(4, 32, 216, slab, l2) == 1);   /* 6.75 rows in flight */
    ck_assert(fabs(kv_grouped_weight_reads(4, 112, 216, slab, 0) - 56.0 / 27) < 1e-12);

    /* The A100's choice among its 16-bit grouped tiles for 512 tokens sent to both of 2 experts
     * (512 rows each), N 14336, K 4096, bf16, at the dense rate 312 x 0.75 = 234 TFLOP/s and
     * 2039 x 0.80 = 1631.2 GB/s (64 K per stage, 64 stages; 112 column tiles of 128):
     *   32 x 128: 2 x 16 x 112 = 3584 tiles, 34 waves of 108, padded 34 x 108 x 32 x 128 x 4096
     *             = 61.61 G (0.5265 ms); 16 row tiles re-read 1 + (16 x 14/27 - 1) x 9/14 = 5.690
     *             times: 2 x 117.44 MB x 5.690 = 1336 MB (0.8194 ms); combined 0.974 ms;
     *   64 x 128: 1792 tiles, 17 waves, the same 61.61 G (0.5265 ms); 8 row tiles, 3.024 reads,
     *             0.4354 ms; combined 0.683 ms;
     *  128 x 128: 896 tiles, 9 waves, 65.23 G (0.5575 ms); 71/42 reads, 0.2434 ms; 0.608 ms.
     * So 128 x 128: efficiency 896 / (9 x 108), weights read 71/42 times. The least padded tile
     * alone (kv_moe_grouped_efficiency) would be 32 x 128 (3584 / (34 x 108)). */
    t_library_engine("mixtral-8x7b", "a100-80g", "trtllm", &s);
    double rate = kv_compute_rate(&s.hardware, SCN_DTYPE_BF16);
    ck_assert(fabs(rate - 234e12) < 1e3);
    kv_moe_grouped_cost c = kv_moe_grouped_gemm(&s.hardware, 512, 2, 2, 14336, 4096, SCN_DTYPE_BF16, 2, rate);
    ck_assert_msg(fabs(c.efficiency - 896.0 / (9 * 108)) < 1e-12, "%.15g", c.efficiency);
    ck_assert_msg(fabs(c.weight_reads - 71.0 / 42) < 1e-12, "%.15g", c.weight_reads);
    double least = kv_moe_grouped_efficiency(&s.hardware, 512, 2, 2, 14336, 4096, SCN_DTYPE_BF16, 2);
    ck_assert_msg(fabs(least - 3584.0 / (34 * 108)) < 1e-12, "%.15g", least);
    /* The layer weighs gate|up (this GEMM) 2 : 1 with down: N 4096, K 7168 (112 stages), a
     * 58 720 256 B slab the L2 holds 5/7 of, 32 column tiles, 216 / 32 = 6.75 rows in flight:
     *   128 x 128: 256 tiles, 3 waves, 2 x 3 x 108 x 128 x 128 x 7168 = 76.1 GFLOP (0.3252 ms),
     *              4 row tiles read once (0.0720 ms): 0.333 ms;
     *    64 x 128: 512 tiles, 5 waves, 63.4 GFLOP (0.2710 ms), 8 row tiles: 1 + (8 / 6.75 - 1)
     *              x 2/7 = 199/189 reads (0.0758 ms): 0.281 ms;
     *    32 x 128: 10 waves, the same 0.2710 ms, 1 + (16 / 6.75 - 1) x 2/7 = 263/189 reads
     *              (0.1002 ms): 0.289 ms.
     * So 64 x 128, and the layer's reads are (2 x 71/42 + 199/189) / 3. */
    kv_moe_grouped_layer_cost l = kv_moe_grouped_layer(&s.hardware, 512, 2, 2, 4096, 7168, SCN_DTYPE_BF16, 2, rate);
    ck_assert_msg(fabs(l.weight_reads - (2 * 71.0 / 42 + 199.0 / 189) / 3) < 1e-12, "%.15g", l.weight_reads);
    ck_assert_msg(fabs(l.inverse - (2.0 / 3 * 972 / 896 + 1.0 / 3 * 540 / 512)) < 1e-12, "%.15g", l.inverse);
    /* An H100 runs TMA warp-specialised tiles whose order this does not cover: least padded,
     * read once. */
    t_library_engine("mixtral-8x7b", "h100-sxm", "trtllm", &s);
    c = kv_moe_grouped_gemm(&s.hardware, 512, 2, 2, 14336, 4096, SCN_DTYPE_BF16, 2, rate);
    ck_assert(c.weight_reads == 1);
    ck_assert(c.efficiency == kv_moe_grouped_efficiency(&s.hardware, 512, 2, 2, 14336, 4096, SCN_DTYPE_BF16, 2));
}
END_TEST

/* The step adds exactly the layer's re-read bytes: Mixtral-8x7B at TP 2 on an A100 under trtllm,
 * a 2048-token prefill (every expert touched), against the same step with an L2 that holds any
 * slab (where nothing is re-read): (reads - 1) x 8 experts x 3 x 4096 x 7168 x 2 B x 32 layers. */
START_TEST(cutlass_moe_step_adds_weight_rereads)
{
    t_library_engine("mixtral-8x7b", "a100-80g", "trtllm", &s);
    s.deployment.tensor_parallel = 2;
    kv_cache_cfg c = kv_cache_cfg_make(&s, SCN_DTYPE_BF16, 0, 0);
    kv_seq_work w = {2048, 0};
    double rate = kv_moe_grouped_rate(&s.hardware, &s.engine, &s.model, SCN_DTYPE_BF16);
    kv_moe_grouped_layer_cost l = kv_moe_grouped_layer(&s.hardware, 2048, 8, 2, 4096, 7168, SCN_DTYPE_BF16, 2, rate);
    ck_assert(l.weight_reads > 1.2);
    double with = kv_step_time(&s, &c, SCN_ATTN_FLASH, &w, 1).op[KV_OP_MLP].bytes;
    s.hardware.l2_cache = 1e12;
    double without = kv_step_time(&s, &c, SCN_ATTN_FLASH, &w, 1).op[KV_OP_MLP].bytes;
    double want = (l.weight_reads - 1) * 8 * 3.0 * 4096 * 7168 * 2 * 32;
    ck_assert_msg(fabs((with - without) - want) < 1e-6 * want, "%g vs %g", with - without, want);
}
END_TEST

/* The CUTLASS family's data movement, by hand: 10 tokens, k 2 (20 copies), h 4, I 8, 16-bit.
 * A100 in 16-bit math (gated activation fused into gate|up): GEMMs move router input 40, copies
 * in 80, gate|up out 20 x 8 = 160, down in 160, down out 80: 520 values = 1040 B; the kernels
 * between them: finalize (80 in, 40 out) and expand (40 in, 80 out): 240 values = 480 B. H100 in
 * fp8 math (TMA warp-specialised kernels, never fused): gate|up writes 2I (320) and an activation kernel reads 2I and writes I (480 values): GEMMs
 * 680 values = 1360 B, kernels 720 values = 1440 B. Triton (vllm): below. */
START_TEST(cutlass_moe_data_movement_by_hand)
{
    t_library_engine("mixtral-8x7b", "a100-80g", "trtllm", &s);
    ck_assert(s.engine.moe_kernel == SCN_MOE_KERNEL_CUTLASS);
    kv_moe_movement mv = kv_moe_movement_bytes(&s.hardware, &s.engine, SCN_DTYPE_BF16, 2, 10, 8, 2, 4, 8);
    ck_assert(mv.gemm == 1040 && mv.serial == 480);
    t_library_engine("mixtral-8x7b", "h100-sxm", "trtllm", &s);
    mv = kv_moe_movement_bytes(&s.hardware, &s.engine, SCN_DTYPE_FP8, 1, 10, 8, 2, 4, 8);
    ck_assert(mv.gemm == 1360 && mv.serial == 1440);
    /* Triton's fused_experts (vllm): 20 copies; the router and gate|up read each token once
     * (2 * 10 * 4), gate|up writes 2I and down reads I per copy (20 * 24), down writes h per
     * copy (20 * 4): (80 + 480 + 80) * 2 = 1280 streamed; silu_and_mul 3I per copy (480) and
     * moe_sum the copies in and the tokens out (80 + 40): (480 + 120) * 2 = 1200 serial. */
    t_library_engine("mixtral-8x7b", "h100-sxm", "vllm", &s);
    ck_assert(s.engine.moe_kernel == SCN_MOE_KERNEL_TRITON);
    mv = kv_moe_movement_bytes(&s.hardware, &s.engine, SCN_DTYPE_BF16, 2, 10, 8, 2, 4, 8);
    ck_assert(mv.gemm == 1280 && mv.serial == 1200);
    /* kvplan's own family streams its total in the step: nothing here. */
    t_library_engine("mixtral-8x7b", "h100-sxm", "kvplan", &s);
    mv = kv_moe_movement_bytes(&s.hardware, &s.engine, SCN_DTYPE_BF16, 2, 10, 8, 2, 4, 8);
    ck_assert(mv.gemm == 0 && mv.serial == 0);
}
END_TEST

/* The step prices a CUTLASS MoE layer with both: at 2048 prefill tokens on an H100 under trtllm
 * the MLP op holds the movement kernels' bytes as serial bytes (32 layers), and its routed
 * GEMMs take longer than the dense shape efficiency of one expert's mean rows alone gives. */
START_TEST(cutlass_moe_step_uses_grouped_pricing)
{
    t_library_engine("mixtral-8x7b", "h100-sxm", "trtllm", &s);
    kv_cache_cfg c = kv_cache_cfg_make(&s, SCN_DTYPE_BF16, 0, 0);
    kv_seq_work w = {2048, 0};
    kv_step_cost r = kv_step_time(&s, &c, SCN_ATTN_FLASH, &w, 1);
    kv_moe_movement mv = kv_moe_movement_bytes(&s.hardware, &s.engine, SCN_DTYPE_BF16, 2, 2048, 8, 2, 4096, 14336);
    ck_assert(mv.serial > 0);
    /* The dense MLP's SiLU is not there (no dense layers): the serial bytes are the movement's. */
    ck_assert_msg(fabs(r.op[KV_OP_MLP].serial_bytes - 32 * mv.serial) < 1, "%g vs %g", r.op[KV_OP_MLP].serial_bytes,
                  32 * mv.serial);
}
END_TEST

/* Triton's silu_and_mul and moe_sum run alone in the step, and weigh most where the per-GPU
 * expert width is small against the hidden size. DeepSeek-R1 at TP 8 on an H200 under vllm,
 * 900 decode rows: 7200 copies, I = 2048 / 8 = 256, h = 7168. Per MoE layer, by hand:
 * silu_and_mul 3 x 7200 x 256 = 5 529 600 values, moe_sum 7200 x 7168 + 900 x 7168 =
 * 58 060 800 values: 127 180 800 B, times 58 MoE layers. The same step with kvplan's own family
 * (which streams them) has exactly that many fewer serial bytes in its MLP op; everything else
 * serial there (the dense layers' and shared expert's SiLU, the block-fp8 input quantisations)
 * is the same in both. At 0.80 x 4.8 TB/s that is 1.92 ms a step. */
START_TEST(triton_moe_sum_and_activation_run_alone)
{
    t_library_engine("deepseek-r1", "h200", "vllm", &s);
    ck_assert(s.engine.moe_kernel == SCN_MOE_KERNEL_TRITON);
    s.deployment.tensor_parallel = 8;
    kv_cache_cfg c = kv_cache_cfg_make(&s, SCN_DTYPE_BF16, 0, 0);
    enum { B = 900 };
    static kv_seq_work w[B];
    for (int i = 0; i < B; i++) w[i] = (kv_seq_work){1, 400};
    kv_step_cost tri = kv_step_time(&s, &c, SCN_ATTN_FLASH, w, B);
    s.engine.moe_kernel = SCN_MOE_KERNEL_KVPLAN;
    kv_step_cost own = kv_step_time(&s, &c, SCN_ATTN_FLASH, w, B);
    double want = 58 * 127180800.0;
    double got = tri.op[KV_OP_MLP].serial_bytes - own.op[KV_OP_MLP].serial_bytes;
    ck_assert_msg(fabs(got - want) < 1, "%.0f vs %.0f", got, want);
    ck_assert_msg(fabs(want / (0.80 * 4.8e12) - 1.921e-3) < 1e-6, "%g", want / (0.80 * 4.8e12));
}
END_TEST

/* Block-scaled fp8 experts under the CUTLASS family (TensorRT-LLM on Hopper run them through
 * the fp8 block-scale grouped GEMM, CutlassFp8BlockScaleGemmRunner::moeGemm) go at the engine's
 * block-fp8 family rate per unit of padded work, DeepGEMM's for trtllm: 969.8 TFLOP/s measured at
 * M 1024, N 18432, K 7168 on an H100 (vLLM PR #13917), over that shape's tile efficiency. By hand:
 * 64 x 64 tiles give 16 x 288 = 4608 tiles in 35 waves of 132 SMs (4620 slots), 56 K stages of
 * 128 fp8 elements each, no split: 4608 / 4620, the best of the eight tiles (128 x 128: 1152 tiles
 * in 9 waves, 1152 / 1188). So the rate is 969.8e12 x 4620 / 4608. A per-tensor fp8 checkpoint,
 * a 16-bit one and a GPU without the published figure keep the dense tensor rate. */
START_TEST(block_fp8_experts_run_at_the_block_family_rate)
{
    t_library_engine("deepseek-r1", "h100-sxm", "trtllm", &s);
    ck_assert_int_eq(s.engine.block_fp8, SCN_BF8_DEEPGEMM);
    ck_assert_int_eq(s.model.weight_quant, SCN_WQ_BLOCK);
    double r = kv_moe_grouped_rate(&s.hardware, &s.engine, &s.model, SCN_DTYPE_FP8);
    ck_assert_msg(fabs(r - 969.8e12 * 4620.0 / 4608.0) < 1e-9 * r, "%g", r);
    /* Below the per-tensor pricing (1979 x 0.75 x 0.89 = 1321 TFLOP/s): 0.736 of it. */
    ck_assert(r < kv_compute_rate(&s.hardware, SCN_DTYPE_FP8));
    scn_model pt = s.model;
    pt.weight_quant = SCN_WQ_PER_TENSOR;
    ck_assert(kv_moe_grouped_rate(&s.hardware, &s.engine, &pt, SCN_DTYPE_FP8) == kv_compute_rate(&s.hardware, SCN_DTYPE_FP8));
    ck_assert(kv_moe_grouped_rate(&s.hardware, &s.engine, &s.model, SCN_DTYPE_BF16) ==
              kv_compute_rate(&s.hardware, SCN_DTYPE_BF16));
    scn_engine native = s.engine;
    native.block_fp8 = SCN_BF8_NATIVE;
    ck_assert(kv_moe_grouped_rate(&s.hardware, &native, &s.model, SCN_DTYPE_FP8) == kv_compute_rate(&s.hardware, SCN_DTYPE_FP8));
    s.hardware.arch = SCN_ARCH_BLACKWELL;
    ck_assert(kv_moe_grouped_rate(&s.hardware, &s.engine, &s.model, SCN_DTYPE_FP8) == kv_compute_rate(&s.hardware, SCN_DTYPE_FP8));
}
END_TEST

/* The expert-parallel step's routed phase takes that rate. DeepSeek-R1 on H200 under trtllm,
 * attention DP 8 and EP 8, 256 decode rows a rank (2048 tokens over the EP group). With the memory
 * made free (bandwidth 1e30 B/s) the phase is compute plus what does not depend on the rate: its
 * kernel boundaries (10 kernels: the 7 of a fused-MoE layer, fp8's 2 input quantisations and the
 * grouped top-k's second kernel, graph_kernel each, the compute being longer than their eager
 * launches) and the grouped top-k's published 15 us (kv_moe_routing_seconds): so per MoE layer the
 * block-scaled checkpoint's compute over a per-tensor one's is the per-tensor rate over the block
 * family's, whatever the tile padding (the same for both). */
START_TEST(ep_routed_phase_takes_the_block_family_rate)
{
    t_library_engine("deepseek-r1", "h200", "trtllm", &s);
    s.deployment.tensor_parallel = 1;
    s.deployment.attention_dp = 8;
    s.deployment.expert_parallel = 8;
    s.hardware.memory_bandwidth = 1e30;
    kv_cache_cfg c = kv_cache_cfg_make(&s, SCN_DTYPE_BF16, 0, 0);
    enum { B = 256 };
    kv_seq_work w[B];
    for (int i = 0; i < B; i++) w[i] = (kv_seq_work){1, 1024};
    kv_moe_step blk = kv_moe_step_time(&s, &c, SCN_ATTN_FLASH, w, B);
    double ratio = kv_compute_rate(&s.hardware, SCN_DTYPE_FP8) /
                   kv_moe_grouped_rate(&s.hardware, &s.engine, &s.model, SCN_DTYPE_FP8);
    s.model.weight_quant = SCN_WQ_PER_TENSOR;
    kv_moe_step pt = kv_moe_step_time(&s, &c, SCN_ATTN_FLASH, w, B);
    double layers = s.model.layers - s.model.dense_layers, bounds = 10 * s.engine.graph_kernel + 15e-6;
    ck_assert(blk.experts > 0 && pt.experts > 0);
    double got = (blk.experts / layers - bounds) / (pt.experts / layers - bounds);
    ck_assert_msg(fabs(got - ratio) < 1e-6 * ratio, "%g vs %g", got, ratio);
    ck_assert(ratio > 1.3 && ratio < 1.4);
}
END_TEST

Suite *suite_moe_grouped(void)
{
    Suite *su = suite_create("moe_grouped");
    TCase *tc = tcase_create("grouped");
    tcase_add_test(tc, binomial_tiles_by_hand);
    tcase_add_test(tc, grouped_efficiency_by_hand);
    tcase_add_test(tc, grouped_weight_reads_by_hand);
    tcase_add_test(tc, cutlass_moe_step_adds_weight_rereads);
    tcase_add_test(tc, cutlass_moe_data_movement_by_hand);
    tcase_add_test(tc, cutlass_moe_step_uses_grouped_pricing);
    tcase_add_test(tc, triton_moe_sum_and_activation_run_alone);
    tcase_add_test(tc, block_fp8_experts_run_at_the_block_family_rate);
    tcase_add_test(tc, ep_routed_phase_takes_the_block_family_rate);
    suite_add_tcase(su, tc);
    return su;
}
