/* kv_efficiency.c: how much of the roofs an op reaches, from its shape: GEMM tile and wave
 * quantisation over the SMs, attention kernel families per GPU generation, decode attention's
 * spread over the SMs, and the smooth roofline near the ridge. docs/cost-model.md,
 * "Efficiency from shapes", derives each; docs/sources.md names the kernel figures. */
#include "kv_model.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

#define TILE_N 128          /* output columns per CTA tile (CUTLASS/cuBLAS Hopper and Ampere tiles) */
#define TILE_K_BYTES 128    /* bytes of K per main-loop stage: 64 bf16, 128 fp8, 256 fp4/int4 */
#define FA_MAX_SPLITS 128   /* FlashAttention's largest split count (num_splits_heuristic's max_splits) */

double kv_compute_share(const scn_hardware *hw, scn_dtype dt)
{
    double scale = (unsigned)dt < SCN_DTYPE_COUNT ? hw->eff_compute_scale[dt] : 0;
    return hw->eff_compute * (scale > 0 ? scale : 1);
}

double kv_compute_rate(const scn_hardware *hw, scn_dtype dt)
{
    if ((unsigned)dt >= SCN_DTYPE_COUNT) return 0;
    return hw->flops[dt] * kv_compute_share(hw, dt);
}

/* One CTA tile shape's padded work: the waves of tiles times what each wave could compute, K split
 * across CTAs (split-K / stream-K) when the tiles alone do not fill the SMs. The shape's
 * efficiency is the real work M N K over it. */
static double tile_padded(double sm, double M, double N, double K, double tm, double tn, double tk)
{
    double mt = ceil(M / tm), nt = ceil(N / tn), kt = ceil(K / tk), tiles = mt * nt;
    double split = tiles < sm ? fmax(1, fmin(kt, floor(sm / tiles))) : 1;
    double units = tiles * split, waves = ceil(units / sm), k_per = ceil(kt / split);
    return waves * sm * tm * tn * tk * k_per;
}

/* The CTA tiles (rows x columns) the library chooses among for a wide GEMM: CUTLASS's tensor-op
 * GEMM kernels for sm80 (generator.py, GenerateSM80_TensorOp_16816) instantiate 256x128,
 * 128x256, 256x64, 64x256, 128x128, 128x64, 64x128 and 64x64; Hopper's wgmma tiles are
 * multiples of 64 rows per warpgroup over the same sizes. docs/sources.md. */
static const double GEMM_TILES[][2] = {{256, 128}, {128, 256}, {256, 64}, {64, 256},
                                       {128, 128}, {128, 64}, {64, 128}, {64, 64}};

/* The skinny tile's rows for M <= 64: skinny GEMMs swap operands so the token rows become the
 * MMA's narrow dimension (n = 8 on Ampere mma.sync and Hopper wgmma), padding rows to the next of
 * 8, 16, 32, 64 under TILE_N-column tiles. */
static double skinny_rows(double M) { return M <= 8 ? 8 : M <= 16 ? 16 : M <= 32 ? 32 : 64; }

/* The least padded work over the candidate tiles. The library runs, per shape, the tile that is
 * fastest, so the efficiency is the best of the candidates' (docs/cost-model.md, "GEMM tiles"):
 * every candidate does the same real work, and division rounds monotonically, so M N K over the
 * least padded work is the largest of their quotients bit for bit. */
static double gemm_least_padded(double sm, double M, double N, double K, double tk)
{
    double least = M <= 64 ? tile_padded(sm, M, N, K, skinny_rows(M), TILE_N, tk) : INFINITY;
    for (size_t i = 0; i < sizeof GEMM_TILES / sizeof GEMM_TILES[0]; i++)
        least = fmin(least, tile_padded(sm, M, N, K, GEMM_TILES[i][0], GEMM_TILES[i][1], tk));
    return least;
}

/* The simulator prices the same few GEMM shapes millions of times (a model has a handful of N x K),
 * and the tile search costs nine candidates each: a small memo per thread (the planner runs
 * simulations on several threads) keeps the least padded work. The rows enter it only through
 * ceil(M / tm) for tile rows tm in {64, 128, 256} (ceil(ceil(x) / n) = ceil(x / n) for whole n),
 * which ceil(M / 64) fixes, or for M <= 64 through the skinny tile alone (every tile row count
 * then covers M in one tile): a prefill's rows, which seldom repeat, share an entry with the
 * other row counts of their 64-row band. */
#define GEMM_MEMO 1024
typedef struct { double sm, band, N, K, tk, padded; } gemm_memo_entry;
static _Thread_local gemm_memo_entry gemm_memo[GEMM_MEMO];

static unsigned gemm_memo_slot(double band, double N, double K, double tk)
{
    uint64_t h = 0, v;
    const double key[4] = {band, N, K, tk};
    for (int i = 0; i < 4; i++) {
        memcpy(&v, &key[i], sizeof v);
        h = (h ^ v) * 0x9E3779B97F4A7C15ull;
    }
    return (unsigned)(h >> 54) % GEMM_MEMO;
}

double kv_gemm_shape_efficiency(const scn_hardware *hw, double M, double N, double K, scn_dtype dt)
{
    double sm = hw->sm_count;
    if (sm <= 0 || M <= 0 || N <= 0 || K <= 0) return 1;
    double b = scn_dtype_bytes(dt);
    double tk = TILE_K_BYTES / (b > 0 ? b : 2);
    double band = M <= 64 ? -skinny_rows(M) : ceil(M / 64);   /* negative: the skinny bands */
    gemm_memo_entry *e = &gemm_memo[gemm_memo_slot(band, N, K, tk)];
    if (!(e->sm == sm && e->band == band && e->N == N && e->K == K && e->tk == tk))
        *e = (gemm_memo_entry){sm, band, N, K, tk, gemm_least_padded(sm, M, N, K, tk)};
    return M * N * K / e->padded;
}

double kv_attention_efficiency(const scn_hardware *hw, const scn_engine *e)
{
    if (hw->calibrated || hw->attention_given) return hw->eff_attention;
    /* FlashAttention-3 reaches 75 % of H100 bf16 peak in the forward pass; FlashAttention-2
     * 35 % on H100 and 50-73 % on A100 (midpoint 0.62). FA3 only runs on Hopper; FlashInfer
     * and TensorRT-LLM prefill on Hopper are FA3-class kernels, elsewhere FA2-class; PyTorch
     * SDPA runs the FA2 kernel. Other generations get a default calibrate replaces. */
    bool fa3_class = e->attn_kernel == SCN_AK_FLASH3 || e->attn_kernel == SCN_AK_FLASHINFER ||
                     e->attn_kernel == SCN_AK_TRTLLM || e->attn_kernel == SCN_AK_MMHA;
    switch (hw->arch) {
    case SCN_ARCH_HOPPER: return fa3_class ? 0.75 : 0.35;
    case SCN_ARCH_AMPERE:
    case SCN_ARCH_ADA: return 0.62;
    default: return hw->eff_attention;
    }
}

/* TensorRT-LLM's masked MHA decode kernel (0.5 and 0.6): CUDA-core fp32 FMAs, and over an 8-bit
 * cache each query head's block converts every K and V element it reads to fp32 (4 flops per
 * key and query head against 2 conversions: 2 flops per conversion). docs/cost-model.md,
 * "Masked MHA". 0 when the GPU's rates are not known. */
static double mmha_rate(const scn_hardware *hw, const kv_cache_cfg *c)
{
    double fma = hw->flops[SCN_DTYPE_FP32];
    if (scn_dtype_bytes(c->dtype) != 1) return fma;
    double cvt = 2.0 * kv_convert_rate(hw);
    return cvt > 0 && cvt < fma ? cvt : fma;
}

double kv_attention_rate(const scn_hardware *hw, const scn_engine *e, const kv_cache_cfg *c, bool prefill)
{
    if (e->attn_kernel == SCN_AK_MMHA && !prefill && !hw->calibrated && !hw->attention_given) {
        double mmha = mmha_rate(hw, c);
        if (mmha > 0) return mmha;
    }
    double bf16 = hw->flops[SCN_DTYPE_BF16] * kv_attention_efficiency(hw, e);
    if (hw->calibrated || hw->attention_given || hw->arch != SCN_ARCH_HOPPER || c->dtype != SCN_DTYPE_FP8 ||
        hw->flops[SCN_DTYPE_FP8] <= 0)
        return bf16;
    /* Over an fp8 cache, FA3 quantises the queries and runs both GEMMs in fp8 for all its
     * attention (vLLM, "Quantized KV Cache"), at "close to 1.2 PFLOPs/s" of H100's 1979 (the
     * FA3 paper). TensorRT-LLM's XQA, its generation kernel, computes in the cache's element
     * type on Hopper (mha_sm90.cu: MathElem is CacheElem for fp8); no source here says its
     * context FMHA runs in fp8 by default over an fp8 cache, so prefill keeps the 16-bit rate.
     * FlashInfer converts fp8 K/V to 16 bits for its MMAs, FA2 and SDPA take no fp8 cache. */
    if (e->attn_kernel == SCN_AK_FLASH3) return hw->flops[SCN_DTYPE_FP8] * (1200.0 / 1979.0);
    if (e->attn_kernel == SCN_AK_TRTLLM && !prefill) return hw->flops[SCN_DTYPE_FP8] * kv_attention_efficiency(hw, e);
    return bf16;
}

bool kv_attention_family_applies(const scn_hardware *hw, const scn_engine *e)
{
    /* A calibrated or given figure was measured on the kernel as it runs, padding and tails
     * included: it replaces the family table and the mechanisms below. kvplan's own kernels
     * decode on CUDA cores and tile prefill their own way: none of the families' terms. */
    if (hw->calibrated || hw->attention_given || hw->sm_count <= 0 || e->attn_kernel == SCN_AK_KVPLAN) return false;
    return hw->arch == SCN_ARCH_HOPPER || hw->arch == SCN_ARCH_AMPERE || hw->arch == SCN_ARCH_ADA;
}

/* The engine's kernel is an FA3-class Hopper kernel (warp-specialised, persistent); otherwise
 * an FA2-class one (kv_attention_efficiency's classes). */
static bool fa3_kernel(const scn_hardware *hw, const scn_engine *e)
{
    return hw->arch == SCN_ARCH_HOPPER && (e->attn_kernel == SCN_AK_FLASH3 || e->attn_kernel == SCN_AK_FLASHINFER ||
                                           e->attn_kernel == SCN_AK_TRTLLM || e->attn_kernel == SCN_AK_MMHA);
}

static double round_up(double v, double to) { return ceil(v / to) * to; }

double kv_decode_tile_rows(const scn_hardware *hw, const scn_engine *e, const kv_cache_cfg *c, double rows,
                           double head_dim, double group, bool split)
{
    if (rows <= 0 || !kv_attention_family_applies(hw, e)) return rows;
    double tile;
    switch (e->attn_kernel) {
    case SCN_AK_MMHA:
        /* One thread block per sequence and query head on CUDA cores: no MMA tile to pad. */
        return rows;
    case SCN_AK_FLASHINFER:
        /* SGLang decodes on tensor cores when the group exceeds 4 or the cache is fp8
         * (should_use_tensor_core), through FlashInfer's prefill kernel whose query tile is
         * FA2DetermineCtaTileQ of the packed rows: 128 above 64 rows (head dim < 256), 64 above
         * 16, else 16. Otherwise its CUDA-core decode kernel computes the real rows only. */
        if (!(group > 4 || c->dtype == SCN_DTYPE_FP8)) return rows;
        tile = rows > 64 && head_dim < 256 ? 128 : rows > 16 ? 64 : 16;
        break;
    case SCN_AK_TRTLLM:
        /* XQA (GQA/MQA generation) puts the group's heads in the MMA's narrow operand: padded
         * to 8 on Hopper (mha_sm90.cu, swapped A and B), to 16 elsewhere (mha.cu). MHA decodes
         * with the masked-MHA CUDA-core kernel. */
        if (group <= 1) return rows;
        tile = hw->arch == SCN_ARCH_HOPPER ? 8 : 16;
        break;
    default:
        if (e->attn_kernel == SCN_AK_FLASH3 && hw->arch == SCN_ARCH_HOPPER) {
            /* FA3 packs the group into the query tile (PackGQA); its M is tile_size_fwd_sm90's:
             * 192 up to head dim 96, 128 above. */
            tile = head_dim <= 96 ? 192 : 128;
            break;
        }
        /* FA2 (flash2, sdpa, and vLLM's FA off Hopper) folds the group into the query rows
         * (seqlenq_ngroups_swapped); its split-KV kernel's M is 64 for every head dim, the
         * one-pass kernel's 128 (64 for head dims above 128 on Hopper). A paged cache (the
         * serving engines': flash2, flash3) always runs the split-KV kernel
         * (force_split_kernel = paged_KV); SDPA's contiguous cache splits by the heuristic. */
        if (e->attn_kernel != SCN_AK_SDPA) split = true;
        tile = split ? 64 : head_dim > 128 && hw->arch == SCN_ARCH_HOPPER ? 64 : 128;
        break;
    }
    return round_up(rows, tile);
}

double kv_mla_decode_tile_rows(const scn_hardware *hw, const scn_engine *e, double rows)
{
    /* vLLM decodes MLA on Hopper with FlashMLA, whose tile is 64 query rows (the rank's heads
     * times the new tokens: Flash_fwd_kernel_traits_mla<576, 64, 64, 8>; get_mla_metadata's
     * num_heads_per_head_k = seq_len_q x heads); FA3's MLA path (head dim 64, value dim 512),
     * SGLang's default MLA backend on Hopper (`mla: {decode: fa3}`), also runs 64-row tiles. The
     * other engines' MLA kernels have no tile figure here. */
    if (rows <= 0 || !kv_attention_family_applies(hw, e) || hw->arch != SCN_ARCH_HOPPER) return rows;
    bool tiled = e->mla_decode == SCN_MLA_DECODE_FLASHMLA || e->mla_decode == SCN_MLA_DECODE_FA3 ||
                 (e->mla_decode == SCN_MLA_DECODE_AUTO && e->attn_kernel == SCN_AK_FLASH3);
    return tiled ? round_up(rows, 64) : rows;
}

/* How a family's prefill kernel tiles the work (docs/cost-model.md, "Attention kernels"). */
typedef struct {
    double tm, tn;     /* query rows and keys per tile step */
    double slots;      /* tiles the GPU runs at once */
    bool lpt;          /* persistent, longest tile first; else in launch order, m-blocks ascending */
} prefill_kernel;

static prefill_kernel prefill_kernel_of(const scn_hardware *hw, const scn_engine *e, double head_dim)
{
    prefill_kernel k;
    if (fa3_kernel(hw, e)) {
        /* FA3 (tile_size_fwd_sm90, causal): 192 x 128 up to head dim 96, 128 x 128 above; one
         * persistent CTA per SM, longest-processing-time-first (hopper/tile_scheduler.hpp). */
        k.tm = head_dim <= 96 ? 192 : 128;
        k.tn = 128;
        k.slots = hw->sm_count;
        k.lpt = true;
        return k;
    }
    /* FA2: 128 x 64 tiles of 4 warps on sm80/sm90 (64 x 64 causal on sm86/89, and above head
     * dim 128); grid (m-blocks, batch, heads), so a head's tiles launch shortest first. Its
     * O accumulator (tm x d / 128 threads) and score tile (tm x tn / 128) take at least 192
     * registers a thread at 128 x 64, so 65536 / (128 x 192) = 2 CTAs share an SM. */
    bool small = hw->arch == SCN_ARCH_ADA || head_dim > 128;
    k.tm = small ? 64 : 128;
    k.tn = 64;
    k.slots = 2.0 * hw->sm_count;
    k.lpt = false;
    return k;
}

void kv_prefill_tiles_add(kv_prefill_tiles *t, const scn_hardware *hw, const scn_engine *e, double head_dim,
                          double heads, long ctx, long n, long cap, double pairs)
{
    if (n <= 0 || heads <= 0 || hw->sm_count <= 0) return;
    prefill_kernel k = prefill_kernel_of(hw, e, head_dim);
    double p = kv_prefill_tile_prologue(hw, e, head_dim);
    /* Tile m visits the key blocks its last row sees (a window: the tile's rows plus the window). */
    for (long first = 0; first < n; first += (long)k.tm) {
        long last = first + (long)k.tm < n ? first + (long)k.tm : n;
        double keys = (double)ctx + (double)last;
        if (cap > 0 && keys > (double)cap + (double)(last - first)) keys = (double)cap + (double)(last - first);
        double w = ceil(keys / k.tn) + p;
        t->work += heads * w;
        t->tiles += heads;
        if (w > t->wmax) t->wmax = w;
        if (t->wmin <= 0 || w < t->wmin) t->wmin = w;
    }
    t->useful += heads * pairs / (k.tm * k.tn);
}

double kv_prefill_kv_share(const scn_hardware *hw, const scn_engine *e, double head_dim, double heads, double kv_heads, long n)
{
    if (!kv_attention_family_applies(hw, e) || n <= 0 || heads <= 0 || kv_heads <= 0) return 1;
    prefill_kernel k = prefill_kernel_of(hw, e, head_dim);
    /* FA3's scheduler hands out the longest tiles of every head first: all heads are in flight. */
    if (k.lpt) return 1;
    /* FA2's grid is (m-blocks, batch, heads): the slots hold slots / m-blocks consecutive query
     * heads, which share ceil(that / group) KV heads. */
    double per_head = ceil((double)n / k.tm), q = ceil(k.slots / per_head);
    if (q >= heads) return 1;
    double kv = ceil(q / (heads / kv_heads));
    return kv < kv_heads ? kv / kv_heads : 1;
}

double kv_prefill_tile_prologue(const scn_hardware *hw, const scn_engine *e, double head_dim)
{
    /* A tile reads its Q (tm x d x 2 B) before its main loop and writes O after it, at the SM's
     * share of the achieved bandwidth, bw / SMs; one key block costs 4 tm tn d flops at the
     * SM's share of the family's rate. Their ratio, tm and d cancelling: */
    prefill_kernel k = prefill_kernel_of(hw, e, head_dim);
    double bw = hw->memory_bandwidth * hw->eff_bandwidth;
    double rate = hw->flops[SCN_DTYPE_BF16] * kv_attention_efficiency(hw, e);
    return bw > 0 && rate > 0 ? rate / (bw * k.tn) : 0;
}

double kv_prefill_tiles_efficiency(const kv_prefill_tiles *t, const scn_hardware *hw, const scn_engine *e, double head_dim)
{
    if (t->tiles <= 0 || t->useful <= 0 || hw->sm_count <= 0) return 1;
    prefill_kernel k = prefill_kernel_of(hw, e, head_dim);
    double W = t->work, mk;
    if (t->tiles <= k.slots) {
        mk = t->wmax;   /* one wave: the longest tile */
    } else if (k.lpt) {
        /* Longest first: the load evens out, the last (shortest) tile finishing on average half
         * its length after the mean, unless the longest tile alone is longer. */
        mk = fmax(t->wmax, W / k.slots + t->wmin / 2);
    } else {
        /* Launch order: the last tile launched is a head's longest; it starts when the first
         * slot frees, on average half a mean tile before the others' mean finish. */
        mk = fmax(W / k.slots, (W - t->wmax) / k.slots - W / t->tiles / 2 + t->wmax);
    }
    double eff = t->useful / (k.slots * mk);
    return eff > 1 ? 1 : eff;
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

/* FlashAttention-2's split-KV rule (flash_api.cpp and PyTorch's copy of it:
 * num_splits_heuristic) decides the split count where its kernels decode: flash2 and sdpa
 * everywhere, flash3 (vLLM's FlashAttention backend) off Hopper, where it runs FA2; not MLA's
 * latent decode (FlashMLA and the other MLA kernels schedule their own). FA3 on Hopper splits
 * varlen batches dynamically on the device (the host heuristic only bounds it, "pretending that
 * batch = 1"); FlashInfer and TensorRT-LLM's XQA choose their own splits; those keep the
 * one-wave rule (docs/cost-model.md, "Decode split"). */
static bool fa2_split_rule(const scn_hardware *hw, const scn_engine *e)
{
    return e->attn_kernel == SCN_AK_FLASH2 || e->attn_kernel == SCN_AK_SDPA ||
           (e->attn_kernel == SCN_AK_FLASH3 && hw->arch != SCN_ARCH_HOPPER);
}

/* FlashAttention-2's split count for `items` work items over `slots` CTA slots (kv_decode_splits
 * says the rule). The simulator asks it every decode step with the few batch sizes a run has,
 * and each answer scores up to 128 counts twice: a small memo per thread answers repeats. */
#define SPLIT_MEMO 64
static _Thread_local struct { double items, slots, splits; } split_memo[SPLIT_MEMO];

static double fa2_split_search(double items, double slots)
{
    unsigned slot = isfinite(items) ? (unsigned)fmod(items, SPLIT_MEMO) : 0;
    if (split_memo[slot].slots == slots && split_memo[slot].items == items) return split_memo[slot].splits;
    double most = fmin(FA_MAX_SPLITS, slots), best = 0, splits = 1;
    for (double k = 1; k <= most; k++) {
        double w = items * k / slots, eff = w / ceil(w);
        if (eff > best) best = eff;
    }
    for (double k = 1; k <= most; k++) {
        double w = items * k / slots;
        if (w / ceil(w) >= 0.85 * best) { splits = k; break; }
    }
    split_memo[slot].items = items;
    split_memo[slot].slots = slots;
    split_memo[slot].splits = splits;
    return splits;
}

double kv_decode_splits(const scn_hardware *hw, const scn_engine *e, double items, bool mla)
{
    double sm = hw->sm_count;
    if (sm <= 0) return 1;
    if (items <= 0) return sm;
    /* Other families: a sequence's keys spread over the SMs left per work item, at most one
     * wave's worth. */
    if (mla || !fa2_split_rule(hw, e)) return floor(sm / items);
    /* FA2 counts two CTAs of 128 threads per SM. */
    double slots = 2 * sm;
    /* Enough work items to fill 80 % of the slots: one split. */
    if (items >= 0.8 * slots) return 1;
    /* Otherwise every count from 1 to 128 (and at most the slots) is scored by the filled share
     * of its last wave, and the smallest count within 85 % of the best score wins: few splits
     * (each adds a partial output to write and combine) unless more fill the GPU clearly
     * better. The per-row key-block limit is applied per sequence (kv_decode_split). */
    return fa2_split_search(items, slots);
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

/* ---- Weight-only kernels of a PyTorch-native decoder (docs/cost-model.md, "Weight-only
 * kernels") ---- */

double kv_sm_clock(const scn_hardware *hw)
{
    /* fp32 FMA lanes per SM: 64 on GA100 (A100), 128 on Ada, Hopper and Blackwell SMs (the
     * architecture whitepapers). The library's Ampere entries are A100s; a GA10x profile would
     * need 128. */
    double lanes;
    switch (hw->arch) {
    case SCN_ARCH_AMPERE: lanes = 64; break;
    case SCN_ARCH_ADA:
    case SCN_ARCH_HOPPER:
    case SCN_ARCH_BLACKWELL: lanes = 128; break;
    default: return 0;
    }
    double fp32 = hw->flops[SCN_DTYPE_FP32];
    return fp32 > 0 && hw->sm_count > 0 ? fp32 / (2.0 * hw->sm_count * lanes) : 0;
}

double kv_convert_rate(const scn_hardware *hw)
{
    return 16.0 * hw->sm_count * kv_sm_clock(hw);
}

/* tinygemm's on-chip rate, weights per SM per clock, from validation/h200-2026-11-30/int4.csv:
 * for each M and group, the time per weight byte of the two large shapes' difference (Llama-2-7B
 * gate_up minus qkv, so the fixed per-call part drops out), less the model's memory time per byte
 * at that GPU's achievable bandwidth (4.8 TB/s x 0.80), combined as kv_roofline_combine does
 * (on-chip = sqrt(t^2 - t_mem^2)); per weight over 132 SMs x 1.98 GHz. docs/cost-model.md,
 * "Weight-only kernels", shows the arithmetic. */
static const double TG_M[] = {1, 2, 4, 8, 16};
static const double TG_G32[] = {13.81, 12.59, 10.51, 6.12, 3.62};
static const double TG_G128[] = {18.75, 17.68, 11.58, 6.41, 3.68};
enum { TG_N = (int)(sizeof TG_M / sizeof TG_M[0]) };

static double tg_at(const double *v, double M)
{
    if (M <= TG_M[0]) return v[0];
    /* Above the last measured M the per-row work keeps growing: the rate falls as 1/M. */
    if (M >= TG_M[TG_N - 1]) return v[TG_N - 1] * TG_M[TG_N - 1] / M;
    int i = 1;
    while (TG_M[i] < M) i++;
    double f = (M - TG_M[i - 1]) / (TG_M[i] - TG_M[i - 1]);
    return v[i - 1] + f * (v[i] - v[i - 1]);
}

double kv_tinygemm_rate(const scn_hardware *hw, double group, double M)
{
    double clock = kv_sm_clock(hw);
    if (clock <= 0 || hw->sm_count <= 0) return 0;
    /* Groups between the measured 32 and 128: linear in log2(group); outside, the nearer one. */
    double f = group <= 32 ? 0 : group >= 128 ? 1 : (log2(group) - 5.0) / 2.0;
    double per_clock = (1 - f) * tg_at(TG_G32, M) + f * tg_at(TG_G128, M);
    return per_clock * hw->sm_count * clock;
}

double kv_tinygemm_bytes_per_param(double group)
{
    return 0.5 + 4.0 / (group > 0 ? group : 128);
}

double kv_marlin_rate(const scn_hardware *hw)
{
    /* Marlin's bench.py on A100 (vLLM PR #2497, 2024-01-24): 139.7-141.4 TFLOP/s from batch 64 to
     * 4000 ("for batchsizes > 64, it will just run the batch 64 kernel repeatedly", IST-DASLab/
     * marlin issue #2), against A100's 312 TFLOP/s dense fp16: 141.4 / 312. */
    double share = hw->flops[SCN_DTYPE_BF16] * (141.4 / 312.0);
    /* Marlin is one sm80 kernel (mma.sync m16n8k16, dequantisation in registers), with no
     * Hopper path: Hopper's wgmma rate is out of its reach (Machete was written for that), so
     * there it does per SM per clock what it does on A100, 141.4 TFLOP/s over 108 SMs at
     * 1.41 GHz (docs/cost-model.md, "Weight-only kernels"). On A100 the two are the same figure;
     * on Ada the share is the smaller. */
    double clock = kv_sm_clock(hw);
    double per_sm = clock > 0 && hw->sm_count > 0 ? 141.4e12 / (108 * 1.41e9) * hw->sm_count * clock : 0;
    return per_sm > 0 && per_sm < share ? per_sm : share;
}

/* ---- Block-scaled fp8 GEMMs (docs/cost-model.md, "Block-scaled fp8 GEMMs") ---- */

/* Each family's published large-M rate on H100 SXM (fp8 dense datasheet 1979 TFLOP/s) and the
 * shape it was measured at (docs/sources.md, "Block-scaled fp8 GEMMs"): vLLM PR #23280, DeepSeek-V3
 * N = 2112, K = 7168 at M = 8192: Triton w8a8_block_fp8_matmul 406.5 TFLOP/s, CUTLASS SM90
 * blockwise 489.7; vLLM PR #13917, N = 18432, K = 7168 at M = 1024: DeepGEMM 969.8. */
static const struct { double tflops, M, N, K; } BF8_MEASURED[SCN_BF8_COUNT] = {
    [SCN_BF8_TRITON] = {406.5, 8192, 2112, 7168},
    [SCN_BF8_CUTLASS] = {489.7, 8192, 2112, 7168},
    [SCN_BF8_DEEPGEMM] = {969.8, 1024, 18432, 7168},
};
#define BF8_H100_FP8_TFLOPS 1979.0
#define BF8_BLOCK_M 64     /* w8a8_block_fp8_matmul's default BLOCK_SIZE_M */
#define BF8_BLOCK_N 128    /* BLOCK_SIZE_N = the weight block's 128 columns */

bool kv_block_fp8_applies(const scn_hardware *hw, scn_block_fp8 k)
{
    return k > SCN_BF8_NATIVE && k < SCN_BF8_COUNT && hw->arch == SCN_ARCH_HOPPER && hw->flops[SCN_DTYPE_FP8] > 0;
}

double kv_block_fp8_rate(const scn_hardware *hw, scn_block_fp8 k, double M, double N, double K)
{
    if (!kv_block_fp8_applies(hw, k)) return 0;
    double fp8 = hw->flops[SCN_DTYPE_FP8];
    /* The kernel's own share of the datasheet rate: the measurement over the tile-quantised
     * work of its shape, so this shape's tiles are not counted twice. */
    double eff0 = kv_gemm_shape_efficiency(hw, BF8_MEASURED[k].M, BF8_MEASURED[k].N, BF8_MEASURED[k].K, SCN_DTYPE_FP8);
    double share = BF8_MEASURED[k].tflops / BF8_H100_FP8_TFLOPS / eff0;
    return fp8 * fmin(1.0, share) * kv_gemm_shape_efficiency(hw, M, N, K, SCN_DTYPE_FP8);
}

double kv_block_fp8_peak_rate(const scn_hardware *hw, scn_block_fp8 k)
{
    if (!kv_block_fp8_applies(hw, k)) return 0;
    /* kv_block_fp8_rate without this shape's tiles: the family's share of the fp8 datasheet rate
     * with the published shape's tile quantisation taken out. */
    double eff0 = kv_gemm_shape_efficiency(hw, BF8_MEASURED[k].M, BF8_MEASURED[k].N, BF8_MEASURED[k].K, SCN_DTYPE_FP8);
    return hw->flops[SCN_DTYPE_FP8] * fmin(1.0, BF8_MEASURED[k].tflops / BF8_H100_FP8_TFLOPS / eff0);
}

double kv_block_fp8_fill(const scn_hardware *hw, scn_block_fp8 k, double M, double N)
{
    if ((k != SCN_BF8_TRITON && k != SCN_BF8_CUTLASS) || hw->sm_count <= 0 || M <= 0 || N <= 0) return 1;
    double ctas = ceil(M / BF8_BLOCK_M) * ceil(N / BF8_BLOCK_N);
    return fmin(1.0, ctas / hw->sm_count);
}
