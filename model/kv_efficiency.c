/* kv_efficiency.c: how much of the roofs an op reaches, from its shape: GEMM tile and wave
 * quantisation over the SMs, attention kernel families per GPU generation, decode attention's
 * spread over the SMs, and the smooth roofline near the ridge. docs/cost-model.md,
 * "Efficiency from shapes", derives each; docs/sources.md names the kernel figures. */
#include "kv_model.h"

#include <math.h>

#define TILE_N 128          /* output columns per CTA tile (CUTLASS/cuBLAS Hopper and Ampere tiles) */
#define TILE_K_BYTES 128    /* bytes of K per main-loop stage: 64 bf16, 128 fp8, 256 fp4/int4 */
#define DECODE_SPLIT 128    /* keys per split in split-KV decode (the FlashAttention key block) */

double kv_gemm_shape_efficiency(const scn_hardware *hw, double M, double N, double K, scn_dtype dt)
{
    double sm = hw->sm_count;
    if (sm <= 0 || M <= 0 || N <= 0 || K <= 0) return 1;
    /* Skinny GEMMs swap operands so the token rows become the MMA's narrow dimension (n = 8 on
     * Ampere mma.sync and Hopper wgmma), padding rows to the next of 8, 16, 32, 64; wide ones
     * run 128-row tiles. */
    double tm = M <= 8 ? 8 : M <= 16 ? 16 : M <= 32 ? 32 : M <= 64 ? 64 : 128, tn = TILE_N;
    double b = scn_dtype_bytes(dt);
    double tk = TILE_K_BYTES / (b > 0 ? b : 2);
    double mt = ceil(M / tm), nt = ceil(N / tn), kt = ceil(K / tk), tiles = mt * nt;
    /* Too few tiles to fill the SMs: split K across CTAs (split-K / stream-K). */
    double split = tiles < sm ? fmax(1, fmin(kt, floor(sm / tiles))) : 1;
    double units = tiles * split, waves = ceil(units / sm), k_per = ceil(kt / split);
    return M * N * K / (waves * sm * tm * tn * tk * k_per);
}

double kv_attention_efficiency(const scn_hardware *hw, const scn_engine *e)
{
    if (hw->calibrated || hw->attention_given) return hw->eff_attention;
    /* FlashAttention-3 reaches 75 % of H100 bf16 peak in the forward pass; FlashAttention-2
     * 35 % on H100 and 50-73 % on A100 (midpoint 0.62). FA3 only runs on Hopper; FlashInfer
     * and TensorRT-LLM prefill on Hopper are FA3-class kernels, elsewhere FA2-class; PyTorch
     * SDPA runs the FA2 kernel. Other generations get a default calibrate replaces. */
    bool fa3_class = e->attn_kernel == SCN_AK_FLASH3 || e->attn_kernel == SCN_AK_FLASHINFER ||
                     e->attn_kernel == SCN_AK_TRTLLM;
    switch (hw->arch) {
    case SCN_ARCH_HOPPER: return fa3_class ? 0.75 : 0.35;
    case SCN_ARCH_AMPERE:
    case SCN_ARCH_ADA: return 0.62;
    default: return hw->eff_attention;
    }
}

double kv_mla_decode_efficiency(const scn_hardware *hw, const scn_engine *e)
{
    if (hw->calibrated || hw->attention_given || hw->arch != SCN_ARCH_HOPPER) return kv_attention_efficiency(hw, e);
    /* FlashMLA's dense decode kernel: "660 TFLOPS in computation-bound configuration on H800
     * SXM5" (its README), against the H800's 989 TFLOPS dense bf16: 0.667. The engines' MLA
     * decode backends on Hopper (FlashMLA in vLLM and SGLang, TensorRT-LLM's own) are of this
     * class; 128 query heads share each latent key, so the kernel is compute-bound at batch. */
    return 660.0 / 989.0;
}

double kv_wave_efficiency(const scn_hardware *hw, double units)
{
    double sm = hw->sm_count;
    if (sm <= 0 || units <= 0) return 1;
    return units / (ceil(units / sm) * sm);
}

double kv_roofline_combine(double tc, double tm)
{
    if (tc <= 0) return tm;
    if (tm <= 0) return tc;
    return sqrt(tc * tc + tm * tm);
}

/* Split-KV decode: a sequence's keys are split in DECODE_SPLIT-key pieces, at most as many as
 * fit in one wave over the SMs (FlashAttention's split heuristic aims at one full wave). Used by kv_roofline.c through kv_decode_units(). */
double kv_decode_units(const scn_hardware *hw, double seqs, double heads, double held)
{
    if (seqs <= 0 || heads <= 0) return 0;
    double want = hw->sm_count > 0 ? floor(hw->sm_count / (seqs * heads)) : 1;
    double split = fmax(1, fmin(ceil(held / DECODE_SPLIT), want));
    return seqs * heads * split;
}

double kv_moe_quant_kernels(scn_dtype gemm_dtype)
{
    /* vLLM's fused_experts quantises the tokens before the gate|up grouped GEMM and the
     * activation's output before the down GEMM (moe_kernel_quantize_input, one kernel each for
     * per-token or block scales) whenever the GEMMs take 8-bit activations; 16-bit math
     * (bf16, or W4A16/W8A16 weight-only formats) reads the activations as they are. */
    double b = scn_dtype_bytes(gemm_dtype);
    return b > 0 && b < 2 ? 2.0 : 0.0;
}
