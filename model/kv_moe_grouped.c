/* kv_moe_grouped.c: grouped-GEMM tile padding of the routed experts (kv_moe_grouped.h). */
#include "kv_moe_grouped.h"

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#define TILE_K_BYTES 128   /* bytes of K per main-loop stage, as kv_efficiency.c's dense tiles */

/* The exact sum starts from the probability of no pick, (1 - q)^n (or, mirrored, of every pick,
 * q^n): summed exactly while that stays above about 1e-304. Beyond, n min(q, 1 - q) exceeds about
 * 700, the standard deviation about 19, and the normal law with a continuity correction is
 * within a hundredth of a tile. */
#define EXACT_LOG_FLOOR (-700.0)

double kv_binomial_expected_tiles(double n, double q, double tile)
{
    if (!(n > 0) || !(q > 0) || !(tile > 0)) return 0;
    n = floor(n + 0.5);
    if (q >= 1) return ceil(n / tile);
    double mu = n * q, sd = sqrt(n * q * (1 - q));
    /* X = n - Y with Y ~ Binomial(n, 1 - q): walk whichever side starts with more mass. */
    bool mirror = q > 0.5;
    double qs = mirror ? 1 - q : q;
    if (n * log1p(-qs) > EXACT_LOG_FLOOR) {
        /* Sum the mass p(y) = C(n, y) qs^y (1 - qs)^(n - y) (recurrence p(y + 1) = p(y)
         * (n - y) / (y + 1) qs / (1 - qs)) times ceil(x / tile) for x = y or n - y, y from 0
         * while any mass is left. */
        double p = exp(n * log1p(-qs)), r = qs / (1 - qs), sum = 0, mass = 0;
        double top = fmin(n, ceil(n * qs + 12 * sd + tile));
        for (double y = 0; y <= top; y++) {
            sum += p * ceil((mirror ? n - y : y) / tile);
            mass += p;
            p *= (n - y) / (y + 1) * r;
        }
        /* Mass beyond `top` (under 1e-30) counted at the largest tile count. */
        return sum + fmax(0, 1 - mass) * ceil((mirror ? n - top : n) / tile);
    }
    /* E[ceil(X / t)] = sum_{j >= 0} P(X >= j t + 1): terms far below the mean are 1, far above 0. */
    double sum = 0;
    double jlo = floor(fmax(0, mu - 10 * sd - 1) / tile), jhi = ceil((mu + 10 * sd) / tile);
    sum += jlo;
    for (double j = jlo; j <= jhi; j++) {
        double x = j * tile + 1;
        sum += 0.5 * erfc((x - 0.5 - mu) / (sd * sqrt(2.0)));
    }
    return sum;
}

/* The CTA tiles (token rows x weight columns) TensorRT-LLM's MoE grouped GEMMs are built with
 * and profile among (cpp/tensorrt_llm/kernels/cutlass_kernels/cutlass_heuristic.cpp,
 * get_candidate_tiles and get_candidate_tiles_sm90/_sm100 for GROUPED_GEMM; docs/sources.md,
 * "Grouped GEMM tiles"): on Ampere and Ada the 16-bit configurations 32 x 128, 64 x 128 and
 * 128 x 128; on Hopper the TMA warp-specialised tiles, all 128 or 256 rows deep; on Blackwell the
 * 1-SM and 2-SM tiles of 64 to 256 rows. */
typedef struct { const double (*tile)[2]; size_t n; } tile_set;
static const double TILES_SM80[][2] = {{32, 128}, {64, 128}, {128, 128}};
/* Weight-only (W4A16, W8A16) configurations: CutlassGemmType::WeightOnly's list. */
static const double TILES_SM80_WO[][2] = {{16, 128}, {16, 256}, {32, 128}, {64, 128}, {128, 128}};
static const double TILES_SM90[][2] = {{128, 16}, {128, 32}, {128, 64}, {128, 128}, {128, 256}, {256, 128}};
static const double TILES_SM100[][2] = {{64, 64},   {64, 128},  {64, 256},  {128, 32},  {128, 64},
                                        {128, 128}, {128, 256}, {256, 64}, {256, 128}, {256, 256}};
#define TILE_SET(a) ((tile_set){a, sizeof a / sizeof a[0]})

static tile_set tiles_for(scn_arch arch)
{
    switch (arch) {
    case SCN_ARCH_HOPPER: return TILE_SET(TILES_SM90);
    case SCN_ARCH_BLACKWELL: return TILE_SET(TILES_SM100);
    default: return TILE_SET(TILES_SM80);
    }
}

/* Weights stored in fewer bytes than the 16-bit math they meet run the weight-only kernels. */
static bool weight_only(scn_dtype dt, double weight_bytes) { return scn_dtype_bytes(dt) == 2 && weight_bytes < 2; }

static tile_set ampere_style(scn_dtype dt, double weight_bytes)
{
    return weight_only(dt, weight_bytes) ? TILE_SET(TILES_SM80_WO) : TILE_SET(TILES_SM80);
}

/* Hopper also profiles the Ampere-style configurations in 16-bit math (MoeGemmRunner::getConfigs
 * adds getAmpereConfigs to the TMA warp-specialised ones; for fp8 on sm90 there are none). */
static bool hopper_ampere_too(scn_arch arch, scn_dtype dt) { return arch == SCN_ARCH_HOPPER && scn_dtype_bytes(dt) == 2; }

/* The architecture's own tiles; before Hopper, the Ampere-style set for the weights' format. */
static tile_set own_tiles(scn_arch arch, scn_dtype dt, double weight_bytes)
{
    return arch == SCN_ARCH_HOPPER || arch == SCN_ARCH_BLACKWELL ? tiles_for(arch) : ampere_style(dt, weight_bytes);
}

static double grouped_least_padded(double sm, tile_set t, double tokens, double E, double q, double N, double K,
                                   double tk)
{
    double kt = ceil(K / tk), least = INFINITY;
    double rows_seen[16], expected[16];
    size_t seen = 0;
    for (size_t i = 0; i < t.n; i++) {
        double tm = t.tile[i][0], tn = t.tile[i][1];
        /* Tiles of the same row count share one expectation of tiles per expert. */
        double per_expert = -1;
        for (size_t j = 0; j < seen; j++)
            if (rows_seen[j] == tm) per_expert = expected[j];
        if (per_expert < 0) {
            per_expert = kv_binomial_expected_tiles(tokens, q, tm);
            rows_seen[seen] = tm;
            expected[seen++] = per_expert;
        }
        /* One CTA per output tile of every expert, in waves of one per SM (the grouped kernel's
         * persistent CTAs walk all experts' tiles); no split-K. */
        double tiles = E * per_expert * ceil(N / tn);
        double waves = ceil(tiles / sm - 1e-9);
        least = fmin(least, waves * sm * tm * tn * tk * kt);
    }
    return least;
}

#define GROUPED_MEMO 512
typedef struct { double sm, arch, tokens, E, k, N, K, tk, padded; } grouped_memo_entry;
static _Thread_local grouped_memo_entry grouped_memo[GROUPED_MEMO];

static unsigned grouped_slot(const double key[8])
{
    uint64_t h = 0, v;
    for (int i = 0; i < 8; i++) {
        memcpy(&v, &key[i], sizeof v);
        h = (h ^ v) * 0x9E3779B97F4A7C15ull;
    }
    return (unsigned)(h >> 55) % GROUPED_MEMO;
}

double kv_moe_grouped_efficiency(const scn_hardware *hw, double tokens, double experts, double k, double N, double K,
                                 scn_dtype dt, double weight_bytes)
{
    double sm = hw->sm_count;
    if (sm <= 0 || !(tokens > 0) || !(experts > 0) || !(k > 0) || N <= 0 || K <= 0) return 1;
    if (k > experts) k = experts;
    tokens = floor(tokens + 0.5);
    double b = scn_dtype_bytes(dt);
    double tk = TILE_K_BYTES / (b > 0 ? b : 2);
    /* The key's arch also carries the weight-only choice (a distinct tile set). */
    double arch = hw->arch + (weight_only(dt, weight_bytes) ? 100 : 0);
    const double key[8] = {sm, arch, tokens, experts, k, N, K, tk};
    grouped_memo_entry *e = &grouped_memo[grouped_slot(key)];
    if (!(e->sm == sm && e->arch == arch && e->tokens == tokens && e->E == experts && e->k == k && e->N == N &&
          e->K == K && e->tk == tk))
        *e = (grouped_memo_entry){sm, arch, tokens, experts, k, N, K, tk,
                                  fmin(grouped_least_padded(sm, own_tiles(hw->arch, dt, weight_bytes), tokens, experts,
                                                            k / experts, N, K, tk),
                                       hopper_ampere_too(hw->arch, dt)
                                           ? grouped_least_padded(sm, ampere_style(dt, weight_bytes), tokens, experts,
                                                                  k / experts, N, K, tk)
                                           : INFINITY)};
    double eff = tokens * k * N * K / e->padded;
    return eff < 1 ? eff : 1;
}

/* DRAM reads of an expert's weight, as a multiple of reading it once, when a persistent grid of
 * `resident` CTAs walks the expert's output tiles M-row by M-row (tile i at row i / n_tiles,
 * column i % n_tiles): the CTAs in flight together cover resident / n_tiles rows, whose tiles of
 * one column read that column's weight slab at once; the next group of rows reads it again after
 * the whole slab (every other column's) has passed through the L2, so a re-read misses the L2
 * with the share of the slab the L2 cannot hold (the convention of FlashAttention's re-reads,
 * kv_roofline.c). */
double kv_grouped_weight_reads(double m_tiles, double n_tiles, double resident, double slab_bytes, double l2_bytes)
{
    if (!(m_tiles > 1) || !(n_tiles > 0) || !(resident > 0) || !(slab_bytes > 0)) return 1;
    double rows = fmax(1, resident / n_tiles);
    double miss = l2_bytes <= 0 ? 1 : slab_bytes > l2_bytes ? 1 - l2_bytes / slab_bytes : 0;
    return 1 + fmax(0, m_tiles / rows - 1) * miss;
}

/* TensorRT-LLM's Ampere-style MoE GEMMs (the fused gate|up kernel, fused_moe_gemm_launcher_sm80,
 * and the CUTLASS 2 grouped kernel, MoeFCGemm) launch SMs x min(2, occupancy) persistent CTAs. */
#define AMPERE_STYLE_MAX_RESIDENT 2

/* On GPUs whose MoE GEMMs are the Ampere-style kernels (Ampere, Ada): the tile the runner's
 * profiler keeps is the fastest, so each candidate's padded work at `rate` and its weight reads
 * (touched experts' slabs times kv_grouped_weight_reads) at the memory bandwidth are combined
 * (kv_roofline_combine) and the least time wins. Elsewhere the least padded work, read once. */
kv_moe_grouped_cost kv_moe_grouped_gemm(const scn_hardware *hw, double tokens, double experts, double k, double N,
                                        double K, scn_dtype dt, double weight_bytes, double rate)
{
    kv_moe_grouped_cost c = {kv_moe_grouped_efficiency(hw, tokens, experts, k, N, K, dt, weight_bytes), 1};
    double sm = hw->sm_count, bw = hw->memory_bandwidth * hw->eff_bandwidth;
    if (!(hw->arch == SCN_ARCH_AMPERE || hw->arch == SCN_ARCH_ADA) || !(rate > 0) || !(bw > 0) || sm <= 0 ||
        !(tokens > 0) || !(experts > 0) || !(k > 0) || N <= 0 || K <= 0)
        return c;
    if (k > experts) k = experts;
    tokens = floor(tokens + 0.5);
    double b = scn_dtype_bytes(dt), tk = TILE_K_BYTES / (b > 0 ? b : 2), kt = ceil(K / tk);
    double q = k / experts, touched = experts * (1 - pow(1 - q, tokens));
    double slab = N * K * weight_bytes, real = tokens * k * N * K;
    tile_set t = ampere_style(dt, weight_bytes);
    double best = INFINITY;
    for (size_t i = 0; i < t.n; i++) {
        double tm = t.tile[i][0], tn = t.tile[i][1];
        double per_expert = kv_binomial_expected_tiles(tokens, q, tm), nt = ceil(N / tn);
        double padded = ceil(experts * per_expert * nt / sm - 1e-9) * sm * tm * tn * tk * kt;
        /* Rows per touched expert, in tiles: the expectation over all experts spread over those
         * with rows. */
        double m_tiles = touched > 0 ? experts * per_expert / touched : 0;
        double reads = kv_grouped_weight_reads(m_tiles, nt, AMPERE_STYLE_MAX_RESIDENT * sm, slab, hw->l2_cache);
        double time = kv_roofline_combine(2 * padded / rate, touched * slab * reads / bw);
        if (time < best) {
            best = time;
            c.efficiency = fmin(1, real / padded);
            c.weight_reads = reads;
        }
    }
    return c;
}

kv_moe_grouped_layer_cost kv_moe_grouped_layer(const scn_hardware *hw, double tokens, double experts, double k,
                                               double h, double I, scn_dtype dt, double weight_bytes, double rate)
{
    kv_moe_grouped_cost gu = kv_moe_grouped_gemm(hw, tokens, experts, k, 2.0 * I, h, dt, weight_bytes, rate);
    kv_moe_grouped_cost dn = kv_moe_grouped_gemm(hw, tokens, experts, k, h, I, dt, weight_bytes, rate);
    /* gate|up holds two thirds of the flops and of the weight bytes, down one third. */
    return (kv_moe_grouped_layer_cost){2.0 / 3.0 / gu.efficiency + 1.0 / 3.0 / dn.efficiency,
                                       (2.0 * gu.weight_reads + dn.weight_reads) / 3.0};
}

double kv_moe_grouped_rate(const scn_hardware *hw, const scn_engine *e, const scn_model *m, scn_dtype dt)
{
    /* Block scales are applied inside the main loop, once per 128-wide K step, so the grouped
     * kernel runs at the block family's share, not a per-tensor fp8 GEMM's (docs/cost-model.md,
     * "Block-scaled fp8 GEMMs"). */
    if (m->weight_dtype == SCN_DTYPE_FP8 && m->weight_quant == SCN_WQ_BLOCK && dt == SCN_DTYPE_FP8 &&
        kv_block_fp8_applies(hw, e->block_fp8))
        return kv_block_fp8_peak_rate(hw, e->block_fp8);
    return kv_compute_rate(hw, dt);
}

kv_moe_movement kv_moe_movement_bytes(const scn_hardware *hw, const scn_engine *e, scn_dtype gemm_dtype,
                                      double weight_bytes, double T, double E, double k, double h, double I)
{
    const double ab = 2.0;   /* 16-bit activations */
    kv_moe_movement mv = {0, 0};
    /* kvplan's own family streams its total (kv_step_shape). */
    if (e->moe_kernel == SCN_MOE_KERNEL_KVPLAN || !(T > 0)) return mv;
    double copies = T * k;
    if (e->moe_kernel == SCN_MOE_KERNEL_TRITON) {
        /* Triton's fused_experts: the router and gate|up read each token's row (gate|up through
         * the sorted ids: T·h each), gate|up writes 2I per copy; down reads I and writes h per
         * copy (intermediate_cache3). Between and after them run silu_and_mul (2I in, I out per
         * copy) and moe_sum (the k copies in, one row out), kernels of their own.
         * KV_TRITON_MOE_BF16_SHARE is the GEMMs' share with these two kernels' time taken out of
         * the published timings (docs/cost-model.md, "Fused-MoE kernels"). */
        mv.gemm = (2 * T * h + copies * 2 * I + copies * I + copies * h) * ab;
        mv.serial = (3 * copies * I + copies * h + T * h) * ab;
        return mv;
    }
    /* The gated activation is fused into gate|up in 16-bit math on the Ampere-style kernels
     * (MoeGemmRunner::isFusedGatedActivation: sm >= 80, not fp8, not TMA warp-specialised):
     * always on Ampere and Ada; on Hopper when an Ampere-style tile pads gate|up least. */
    bool same = scn_dtype_bytes(gemm_dtype) == 2 && !weight_only(gemm_dtype, weight_bytes);
    bool fused_act = same && (hw->arch == SCN_ARCH_AMPERE || hw->arch == SCN_ARCH_ADA);
    if (same && hopper_ampere_too(hw->arch, gemm_dtype) && hw->sm_count > 0 && E > 0) {
        double tk = TILE_K_BYTES / 2.0, q = fmin(1, k / E);
        double ampere = grouped_least_padded(hw->sm_count, TILE_SET(TILES_SM80), T, E, q, 2 * I, h, tk);
        double hopper = grouped_least_padded(hw->sm_count, TILE_SET(TILES_SM90), T, E, q, 2 * I, h, tk);
        fused_act = ampere <= hopper;
    }
    /* Router input, gate|up input copies and output, down input and output. */
    mv.gemm = (T * h + copies * h + copies * (fused_act ? I : 2 * I) + copies * I + copies * h) * ab;
    /* The activation kernel (read 2I, write I per copy), the weighted sum of the k copies. */
    mv.serial = ((fused_act ? 0 : 3 * copies * I) + copies * h + T * h) * ab;
    /* CUTLASS's expansion of each token into its k copies before gate|up. */
    if (e->moe_kernel == SCN_MOE_KERNEL_CUTLASS) mv.serial += (T * h + copies * h) * ab;
    return mv;
}

double kv_moe_routing_seconds(const scn_engine *e, const scn_model *m)
{
    /* A latency-bound pair of kernels: at 384 tokens a rank the scores are 384 x 256 fp32 values
     * (393 KB, 0.05 us of B200 memory time), so neither bytes nor flops set their 15 us; the
     * published kernel time is charged as it is, whatever the token count or GPU
     * (docs/cost-model.md, "Fused-MoE kernels", routing). */
    if (m->experts == 0 || m->expert_groups <= 1) return 0;
    return e->moe_grouped_routing;
}
