/* kv_roofline.c: time of one engine step as a roofline per operation.
 *
 * Each op's time is the smooth roofline of its compute time (flops over the dtype's peak times
 * the shape's efficiency) and memory time, or its collective's time, plus whatever of its
 * kernel launches the GPU does not hide; the step adds the engine's CPU work (hidden behind the
 * GPU when the engine schedules asynchronously). Decode steps the engine captured replay a CUDA
 * graph. Counts are per tensor-parallel rank and summed over layers. docs/cost-model.md, "Step
 * time", derives each count. */
#include "kv_model.h"
#include "kv_mla.h"
#include "kv_moe_grouped.h"
#include "kv_moe_parallel.h"

#include <math.h>
#include <string.h>

#define AB 2.0            /* activation bytes (16-bit) */
#define LOGIT_BYTES 4.0
#define FLASH_TILE 128    /* query rows per FlashAttention tile: K/V are re-read once per tile */

static const char *const OP_NAMES[KV_OP_COUNT] = {"embed", "norm", "qkv_proj", "attention",
                                                  "out_proj", "mlp", "allreduce", "lm_head", "step_overhead"};
static const char *const BOUND_NAMES[] = {"memory", "compute", "network", "overhead"};

const char *kv_op_name(kv_op op) { return op < KV_OP_COUNT ? OP_NAMES[op] : "?"; }
const char *kv_bound_name(kv_bound b) { return BOUND_NAMES[b]; }

/* Keys attended, summed over the n new query tokens of one sequence with `ctx` cached tokens,
 * when a layer holds at most `cap` tokens (cap <= 0: unbounded). Query j (1..n) sees
 * min(ctx + j, cap) keys. */
static double keys_attended(long ctx, long n, long cap)
{
    if (n <= 0) return 0;
    double full = (double)n * ctx + (double)n * (n + 1) / 2.0;
    if (cap <= 0) return full;
    long j0 = cap - ctx;   /* last query that is not capped */
    if (j0 >= n) return full;
    if (j0 <= 0) return (double)n * cap;
    return (double)j0 * ctx + (double)j0 * (j0 + 1) / 2.0 + (double)(n - j0) * cap;
}

/* K/V tokens read by FlashAttention for one sequence: every query tile reads the keys its
 * last row can see (capped to what the layer holds). */
static double flash_kv_tokens(long ctx, long n, long cap)
{
    double total = 0;
    for (long t0 = 0; t0 < n; t0 += FLASH_TILE) {
        long last = t0 + FLASH_TILE < n ? t0 + FLASH_TILE : n;
        long keys = ctx + last;
        if (cap > 0 && keys > cap) keys = cap;
        total += (double)keys;
    }
    return total;
}

/* K/V tokens FlashAttention reads from device memory: the first read of every key any tile
 * sees, plus the re-reads of later query tiles that the on-chip cache cannot hold. A tile's
 * working set is the keys it sees times `tok_bytes` (the bytes per token of the KV heads whose
 * tiles run at once: kv_prefill_kv_share); when that fits the L2, re-reads hit it. */
static double flash_dram_tokens(const scn_hardware *hw, long ctx, long n, long cap, double tok_bytes)
{
    double all = flash_kv_tokens(ctx, n, cap);
    if (hw->l2_cache <= 0) return all;
    double keys = (double)ctx + n;
    if (cap > 0 && keys > (double)cap + n) keys = (double)cap + n;   /* the union of capped windows */
    double once = fmin(all, keys);
    double ws = (cap > 0 && keys > cap ? cap : keys) * tok_bytes;
    double spill = ws > hw->l2_cache ? 1.0 - hw->l2_cache / ws : 0;
    return once + (all - once) * spill;
}

/* The cap a layer applies: the model's sliding window on sliding layers, and StreamingLLM's
 * sink + window on all. 0 means none. */
static long layer_cap(const scn_model *m, const kv_cache_cfg *c, int sliding)
{
    long cap = sliding && m->sliding_window > 0 ? m->sliding_window : 0;
    if (c->window > 0) {
        long sw = (long)c->sink + c->window;
        if (cap == 0 || sw < cap) cap = sw;
    }
    return cap;
}

static void add(kv_op_cost *o, double flops, double bytes, double kernels)
{
    o->flops += flops;
    o->bytes += bytes;
    o->kernels += kernels;
}

/* Bytes an op's own elementwise kernel moves between the op's GEMMs (SiLU*mul after gate|up,
 * rotary after the QKV projection): a kernel of its own, memory-bound, that runs when the GEMM
 * before it has finished, so its time adds to the GEMMs' instead of hiding under their compute
 * (finish(); docs/cost-model.md, "Elementwise kernels"). */
static void add_serial(kv_op_cost *o, double bytes, double kernels)
{
    add(o, 0, bytes, kernels);
    o->serial_bytes += bytes;
}

/* The quantisation of a block-scaled fp8 GEMM's input (docs/cost-model.md, "Block-scaled fp8
 * GEMMs", "Activation quantisation"): engines quantise the 16-bit activations in 1 x 128 groups
 * with a kernel of their own before every such GEMM (vLLM's and SGLang's
 * per_token_group_quant_fp8, TensorRT-LLM's fp8_quantize_1x128). It reads the T x K input and
 * writes it back in fp8 with an fp32 scale per 128 values; it must finish before the GEMM starts,
 * so its bytes stream alone (add_serial). */
#define FP8_GROUP 128.0
static void add_group_quant(kv_op_cost *o, double T, double K, double layers)
{
    add_serial(o, T * K * (AB + 1.0 + 4.0 / FP8_GROUP) * layers, layers);
}

/* What every GEMM of the step shares. */
typedef struct {
    const scn_hardware *hw;
    double T;          /* tokens (rows) really processed */
    double M;          /* rows the kernel computes: T, or the CUDA-graph size it was padded to */
    double peak;       /* kv_compute_rate of the GEMM dtype */
    scn_dtype dt;
    double wb;         /* stored bytes per weight parameter */
    /* An engine's weight-only kernels (weight_only_of below): per weight, an
     * integer-to-float conversion (int8) or tinygemm's on-chip work (int4) besides the read;
     * or Marlin's own compute rate. */
    enum { WO_NONE, WO_CONVERT, WO_TINYGEMM, WO_MARLIN } wo;
    double wo_rate;    /* weights per second that on-chip work allows; Marlin: flop/s */
    scn_block_fp8 bf8; /* block-scaled fp8 weights the engine runs with this kernel family */
} gemm_ctx;

/* The weight-only kernel an engine runs over these weights (docs/cost-model.md, "Weight-only
 * kernels"): with `weight_only: torch`, int8 per-channel weights go through a torch.compile'd
 * GEMV that converts each weight to fp32 (Inductor's M = 1 mm decomposition, then the cast), and
 * int4 group-quantised weights through tinygemm, whose layout stores a bf16 scale and zero per
 * group. Fused kernels (the default) add nothing to the memory roof. */
static void weight_only_of(gemm_ctx *g, const scn_model *m, const scn_engine *e)
{
    g->wo = WO_NONE;
    g->wo_rate = 0;
    bool w4a16 = m->weight_dtype == SCN_DTYPE_INT4 && (m->weight_quant == SCN_WQ_AWQ || m->weight_quant == SCN_WQ_GPTQ);
    if (e->weight_only == SCN_WO_MARLIN) {
        /* Marlin runs W4A16, and 8-bit weights the GPU has no math for (fp8 on Ampere: W8A16);
         * on Ampere and Ada, where the engines pick it for every such layer. */
        bool w8a16 = scn_dtype_bytes(m->weight_dtype) == 1 && g->hw->flops[m->weight_dtype] <= 0;
        bool arch = g->hw->arch == SCN_ARCH_AMPERE || g->hw->arch == SCN_ARCH_ADA;
        if (arch && (w4a16 || w8a16) && kv_marlin_rate(g->hw) > 0) {
            g->wo = WO_MARLIN;
            g->wo_rate = kv_marlin_rate(g->hw);
        }
        return;
    }
    if (e->weight_only != SCN_WO_TORCH) return;
    /* fp8 weights where the GPU has no fp8 math (Ampere) have no conversion instruction either
     * (PTX cvt from e4m3x2/e5m2x2 needs sm_89): PyTorch upcasts each weight in software, at
     * least one conversion's work per weight, so they take int8's convert-then-16-bit path. */
    bool fp8_soft = m->weight_dtype == SCN_DTYPE_FP8 && g->hw->flops[SCN_DTYPE_FP8] <= 0;
    if ((m->weight_dtype == SCN_DTYPE_INT8 && m->weight_quant == SCN_WQ_PER_CHANNEL) || fp8_soft) {
        g->wo_rate = kv_convert_rate(g->hw);
        g->wo = g->wo_rate > 0 ? WO_CONVERT : WO_NONE;
        /* Weight-only (W8A16): the converted weights meet 16-bit activations in 16-bit math. */
        g->dt = SCN_DTYPE_BF16;
        g->peak = kv_compute_rate(g->hw, SCN_DTYPE_BF16);
    } else if (w4a16) {
        double group = m->weight_group > 0 ? m->weight_group : 128;
        g->wo_rate = kv_tinygemm_rate(g->hw, group, g->M);
        if (g->wo_rate > 0) {
            g->wo = WO_TINYGEMM;
            g->wb = kv_tinygemm_bytes_per_param(group);
        }
    }
}

/* A GEMM [M x K] x [K x N] over `layers` layers: flops on the real rows, time on the padded
 * rows at the shape's efficiency; the weight is read once, activations in and out. */
static void gemm(kv_op_cost *o, const gemm_ctx *g, double N, double K, double layers, double kernels)
{
    double eff = kv_gemm_shape_efficiency(g->hw, g->M, N, K, g->dt);
    add(o, 2.0 * g->T * N * K * layers, (N * K * g->wb + g->T * (N + K) * AB) * layers, kernels * layers);
    if (g->wo == WO_MARLIN) {
        /* Marlin computes at its own measured rate (its 64-row tile repeated) in place of the
         * library GEMM's. */
        eff = 1;
        o->t_compute += 2.0 * g->M * N * K * layers / g->wo_rate;
    } else if (g->bf8 != SCN_BF8_NATIVE) {
        /* Block-scaled fp8 (docs/cost-model.md, "Block-scaled fp8 GEMMs"): the family's own rate;
         * its CTAs, K not split, stream the weights at their SMs' share of the bandwidth. */
        double rate = kv_block_fp8_rate(g->hw, g->bf8, g->M, N, K);
        o->t_compute += rate > 0 ? 2.0 * g->M * N * K * layers / rate : 0;
        double f = kv_block_fp8_fill(g->hw, g->bf8, g->M, N);
        double bw = g->hw->memory_bandwidth * g->hw->eff_bandwidth;
        if (f < 1 && bw > 0) o->t_fill += N * K * g->wb * layers * (1.0 / f - 1.0) / bw;
        add_group_quant(o, g->T, K, layers);
    } else {
        o->t_compute += g->peak > 0 ? 2.0 * g->M * N * K * layers / (g->peak * eff) : 0;
    }
    /* A weight-only kernel's work per weight runs on the SMs beside the MMAs: on-chip time. */
    if (g->wo == WO_CONVERT || g->wo == WO_TINYGEMM) o->t_compute += N * K * layers / g->wo_rate;
    o->efficiency = eff;
}

/* The launch and kernel-boundary time of an op of `kernels` kernels whose GPU time is `gpu`
 * (finish(); kv_decode_plan_seconds and the expert-parallel MoE layer use it too, so they cannot
 * drift apart). */
double kv_launch_overhead(double kernels, double gpu, double launch, bool graph, double graph_kernel)
{
    /* Every kernel boundary stalls the GPU (the next kernel starts when the last block of the
     * previous one ends, and each ramps its memory pipeline up and down): graph_kernel each,
     * graph or not. A graph removes the CPU's launches; eager launches overlap the GPU's work,
     * so only a CPU launch rate slower than the kernels and their boundaries shows. */
    double bounds = kernels * graph_kernel;
    return graph ? bounds : fmax(bounds, kernels * launch - gpu);
}

/* Finishes an op: memory time, the roofline, launches the GPU does not hide, and the bound.
 * The op's own kernel streams at `wave` of bandwidth bw (its SM occupancy); the weight bytes
 * it holds are a GEMM's and stream at bw whatever the batch (docs/cost-model.md, "MLA"). */
static void finish(kv_op_cost *o, double bw, double wave, double launch, bool graph, double graph_kernel)
{
    if (o->flops == 0 && o->bytes == 0 && o->t_network == 0 && o->t_latency == 0) return;
    /* The op's elementwise kernels stream their bytes alone, after the roofline of the rest
     * (add_serial); an op without them (serial_bytes 0) gets exactly the plain roofline. Block-fp8
     * GEMMs' slow weight streaming (t_fill) belongs to the rest. */
    double t_serial = bw > 0 ? o->serial_bytes / bw : 0;
    double t_rest = bw > 0 && wave > 0 ? (o->bytes - o->weight_bytes - o->serial_bytes) / (bw * wave) + o->weight_bytes / bw + o->t_fill : 0;
    o->t_memory = t_rest + t_serial;
    double roof = kv_roofline_combine(o->t_compute, t_rest) + t_serial + o->t_latency;
    double gpu = fmax(roof, o->t_network);
    o->t_overhead += kv_launch_overhead(o->kernels, gpu, launch, graph, graph_kernel);
    o->bound = KV_BOUND_COMPUTE;
    if (o->t_memory >= o->t_compute) o->bound = KV_BOUND_MEMORY;
    if (o->t_network > roof) o->bound = KV_BOUND_NETWORK;
    if (o->t_overhead > gpu) o->bound = KV_BOUND_OVERHEAD;
    o->seconds = gpu + o->t_overhead;
}

/* Attention's flops by the rate they run at (docs/cost-model.md, "Attention kernels"), per
 * rank, all layers: what the family's tensor rate computes (decode tiles with their padded
 * rows; prefill tiles stretched by their launch's tile efficiency, or the whole launch's work,
 * whichever takes longer), and the rest at that rate unstretched. MLA's latent decode runs in
 * its own family (absorbed_flops). */
typedef struct {
    double compute;   /* flops-equivalent of the FlashAttention decode tiles of decode-only launches */
    double prefill;   /* the same of launches with prefill tiles (decode tiles they carry included) */
    double other;     /* naive attention, MLA prefill and MLA's absorption GEMVs */
} attn_work;

/* Rows a decode (or speculative verify) row set's work item computes over its real rows, for
 * row sets of `nt` new tokens each whose keys are split `split_cap` ways at most
 * (kv_decode_tile_rows; the split count is kv_decode_splits' for the step's decode batch). */
static double decode_pad_ratio_of(const scn_scenario *s, const scn_model *m, const kv_cache_cfg *c, double split_cap,
                                  long nt)
{
    if (m->kv_lora_rank > 0 || nt <= 0) return 1;
    int tp = s->deployment.tensor_parallel;
    double heads = (double)m->heads / tp, kvh = kv_heads_per_rank(m, tp);
    double group = heads / kvh, rows = group * (double)nt;
    return kv_decode_tile_rows(&s->hardware, &s->engine, c, rows, m->head_dim, group, split_cap >= 2) / rows;
}

static double decode_pad_ratio(const scn_scenario *s, const kv_cache_cfg *c, double split_cap, long nt)
{
    return decode_pad_ratio_of(s, &s->model, c, split_cap, nt);
}

/* The model attention runs: the scenario's, or for an MLA model its engine caches expanded
 * (kv_cache_cfg.mla_expanded) the ordinary multi-head attention the engine runs instead, over
 * kv_heads heads of qk_nope + qk_rope dims for queries, keys and (padded) values. */
static const scn_model *attention_model(const scn_model *m, const kv_cache_cfg *c, scn_model *buf)
{
    if (!c->mla_expanded || m->kv_lora_rank <= 0) return m;
    *buf = *m;
    buf->kv_lora_rank = buf->q_lora_rank = 0;
    buf->head_dim = m->qk_nope_head_dim + m->qk_rope_head_dim;
    return buf;
}

/* Attention over all sequences, one layer kind (global or sliding), `layers` of them. Adds
 * flops, bytes and compute time, and the SM work items decode spreads over (*units). */
static void attention(kv_op_cost *o, const scn_scenario *s, const kv_cache_cfg *c, scn_attention attn,
                      const kv_decode_lead *lead, const kv_seq_work *seqs, const int *verify, int n, int sliding, double layers,
                      double *units, bool *absorbed, double *absorbed_flops, attn_work *work)
{
    if (layers <= 0) return;
    const scn_model *m0 = &s->model;
    scn_model mbuf;
    const scn_model *m = attention_model(m0, c, &mbuf);
    bool expanded = m != m0;
    const scn_hardware *hw = &s->hardware;
    int tp = s->deployment.tensor_parallel;
    long cap = layer_cap(m, c, sliding);
    double heads = (double)m->heads / tp;
    double kv_tok = kv_bytes_per_token_layer_rank(m, c, tp);
    bool mla = m->kv_lora_rank > 0;
    double r = m0->kv_lora_rank, dr = m0->qk_rope_head_dim, dn = m0->qk_nope_head_dim, dv = m0->v_head_dim;
    double kvh = mla ? 1 : kv_heads_per_rank(m, tp);
    double flops = 0, bytes = 0, kernels;
    /* Decode rows and speculative verify row sets both run the split-KV decode kernel. */
    int decoding = lead ? lead->n : 0;
    for (int i = 0; i < n; i++) decoding += seqs[i].new_tokens == 1 || (verify && verify[i] > 0 && seqs[i].new_tokens > 0);
    bool kv_b_read = false, mla_dec = false, mla_pre = false;
    /* The most splits one decode sequence's keys get: the same for every sequence. */
    double split_cap = kv_decode_splits(hw, &s->engine, decoding * kvh, mla);
    /* A decode row's per-key flops and its Q read + O write, as the general path computes them. */
    double flop_per_key_mha = 2.0 * heads * ((double)m->head_dim + (double)m->head_dim);
    double qo_one = 1 * heads * ((double)m->head_dim + (double)m->head_dim) * AB;
    /* Flops by kind: decode rows (their padding applied once below), verify rows with their
     * padding, FlashAttention prefill rows and their tiles, everything else. */
    double dflops = 0, vpad = 0, pflops = 0, oflops = 0;
    double ratio1 = decoding > 0 ? decode_pad_ratio_of(s, m, c, split_cap, 1) : 1;
    long vpad_nt = 0;          /* verify row sets share one nt (k + 1): their ratio, computed once */
    double vpad_ratio = 1;
    kv_prefill_tiles tiles = {0, 0, 0, 0, 0};
    if (lead && lead->n > 0) {
        /* Leading decode rows given by their sums (kv_step_complete_led): what the loop below
         * adds for them one by one, each splitting once; every term an integer, so the sums are
         * exact and equal the loop's (kv_decode_sums_exact). */
        *units += kvh * lead->n;
        flops = dflops = flop_per_key_mha * lead->keys[sliding];
        bytes = lead->n * (qo_one + kv_tok) + lead->keys[sliding] * kv_tok;
    }
    for (int i = 0; i < n; i++) {
        long nt = seqs[i].new_tokens, ctx = seqs[i].context;
        if (nt <= 0) continue;
        long held = kv_tokens_held(m, c, sliding, ctx + nt);
        double kv_new = nt * kv_tok;                                  /* write the new K/V */
        if (expanded) {
            /* kv_b decompresses only the new tokens' latents into the K/V the cache keeps. */
            double f = 2.0 * nt * r * heads * (dn + dv);
            flops += f;
            oflops += f;
            bytes += nt * r * AB;
            kv_b_read = true;
        }
        if (nt == 1 || (verify && verify[i] > 0)) {
            /* fmax(1, fmin(ceil(held / 128), split_cap)) on values that are never NaN or -0,
             * written as comparisons so the per-sequence loop makes no library calls. */
            double split = ceil(held / 128.0);
            if (!(split < split_cap)) split = split_cap;
            if (!(split > 1)) split = 1;
            /* A verify row set's k + 1 query rows ride in the tile rows of the same split-KV
             * work items as one decode row (GQA packing puts a KV head's query heads there
             * too): the cache streams with the same parallelism, so more rows never stream it
             * faster (docs/cost-model.md, "Speculative decoding"). */
            *units += kvh * split;
            if (nt == 1 && !mla && attn == SCN_ATTN_FLASH) {
                /* One query row: it attends min(ctx + 1, cap) keys (keys_attended with n = 1),
                 * and FlashAttention reads each of them once (flash_dram_tokens with one tile:
                 * nothing is re-read, so no spill term), in the general path's order of sums. */
                double keys = cap > 0 && ctx + 1 > cap ? (double)cap : (double)ctx + 1.0;
                flops += flop_per_key_mha * keys;
                dflops += flop_per_key_mha * keys;
                bytes += qo_one + kv_new + keys * kv_tok;
                continue;
            }
        } else {
            *units += heads * ceil(nt / 128.0);
        }
        if (mla && (nt == 1 || (verify && verify[i] > 0))) {
            /* Absorbed decode: W_UK folded into the query, W_UV applied after attention, so
             * attention runs over the latent (r + rope per key; r for values). A speculative
             * verify row set (kv_spec.h) runs the same kernel with nt query rows. */
            double per_key = 2.0 * heads * (r + dr + r);
            double f = per_key * (nt == 1 ? (double)held : keys_attended(ctx, nt, cap));
            flops += f + nt * 2.0 * heads * r * (dn + dv);
            oflops += nt * 2.0 * heads * r * (dn + dv);
            /* The latent-attention kernel's own flops, computed over its padded tile rows. */
            double rows = heads * (double)nt;
            *absorbed_flops += f * (kv_mla_decode_tile_rows(hw, &s->engine, rows) / rows) * layers;
            bytes += nt * heads * (r + dr + r) * AB + kv_new + held * kv_tok;
            kv_b_read = *absorbed = mla_dec = true;
            continue;
        }
        if (mla) {
            /* Prefill decompresses every key it attends: kv_b expands the latent of all held
             * tokens to per-head K (nope) and V, then ordinary attention over d_nope + d_rope
             * query/key dims and d_v value dims. */
            double exp_per_tok = heads * (dn + dr + dv) * AB;
            double f = 2.0 * held * r * heads * (dn + dv) + 2.0 * heads * (dn + dr + dv) * keys_attended(ctx, nt, cap);
            flops += f;
            oflops += f;
            bytes += nt * heads * (dn + dr + dv) * AB + kv_new + held * kv_tok + held * exp_per_tok +
                     flash_dram_tokens(hw, ctx, nt, cap, exp_per_tok) * exp_per_tok;
            kv_b_read = mla_pre = true;
            continue;
        }
        double qk_dim = m->head_dim, v_dim = m->head_dim;
        double flop_per_key = 2.0 * heads * (qk_dim + v_dim);
        double qo = nt * heads * (qk_dim + v_dim) * AB;              /* read Q, write O */
        if (attn == SCN_ATTN_FLASH) {
            double pairs = keys_attended(ctx, nt, cap);
            flops += flop_per_key * pairs;
            if (verify && verify[i] > 0) {
                /* A verify row set: the decode kernel, its nt x group rows padded to its tile. */
                if (nt != vpad_nt) {
                    vpad_nt = nt;
                    vpad_ratio = decode_pad_ratio_of(s, m, c, split_cap, nt);
                }
                vpad += flop_per_key * pairs * vpad_ratio;
            } else {
                pflops += flop_per_key * pairs;
                kv_prefill_tiles_add(&tiles, hw, &s->engine, qk_dim, heads, ctx, nt, cap, pairs);
            }
            /* Only the KV heads whose tiles run at once share the L2 (FA2 launches a head's
             * tiles together, head after head). */
            double share = kv_prefill_kv_share(hw, &s->engine, qk_dim, heads, kvh, nt);
            bytes += qo + kv_new + flash_dram_tokens(hw, ctx, nt, cap, kv_tok * share) * kv_tok;
        } else {
            /* Naive attention computes the full n x held score matrix, then masks it, and
             * writes scores and probabilities to memory and reads them back. */
            double scores = heads * nt * (double)held;
            double f = flop_per_key * nt * (double)held;
            flops += f;
            oflops += f;
            bytes += qo + kv_new + held * kv_tok + 4.0 * scores * AB;
        }
    }
    if (kv_b_read) {
        /* kv_b (W_UK | W_UV) is read once a layer by its own GEMM (expansion) or batched GEMV
         * (absorption), not by the split-KV attention kernel: it streams at full bandwidth. */
        double wb = r * heads * (dn + dv) * kv_weight_bytes_per_param(m);
        bytes += wb;
        o->weight_bytes += wb * layers;
    }
    /* Decode tiles compute their padded rows; a prefill launch's tiles take the longer of their
     * critical path (kv_prefill_tiles_efficiency) and the launch's whole work, decode tiles
     * included, at the family's rate. */
    double dpad = dflops * ratio1 + vpad;
    if (pflops > 0) {
        double eff = kv_attention_family_applies(hw, &s->engine) ? kv_prefill_tiles_efficiency(&tiles, hw, &s->engine, m->head_dim) : 1;
        work->prefill += fmax(pflops / eff, pflops + dpad) * layers;
    } else {
        work->compute += dpad * layers;
    }
    work->other += oflops * layers;
    kernels = attn == SCN_ATTN_FLASH ? 2 : 5;   /* cache write + kernel; or + QK, softmax, PV, copy */
    /* kv_b: one GEMM where it expands (prefill, or an expanded cache's new tokens); absorbed
     * decode applies W_UK and W_UV as two batched matmuls, one before the latent attention and
     * one after it (vLLM's MLA decode: torch.bmm with W_UK_T, then _v_up_proj's bmm with W_UV;
     * docs/cost-model.md, "MLA as engines run it"). A mixed step runs both. */
    if (expanded) kernels += 1;
    else if (mla) kernels += (mla_pre ? 1 : 0) + (mla_dec ? 2 : 0);
    /* FlashMLA's decode is a split-KV kernel and its combine kernel (kv_mla_decode_kernels):
     * one boundary more than the single attention kernel counted above. */
    if (mla_dec) kernels += kv_mla_decode_kernels(hw, &s->engine) - 1;
    add(o, flops * layers, bytes * layers, kernels * layers);
}

/* The captured size a decode batch of n replays at, or 0 when it is not captured. Speculative
 * verify rows (uniform decode of k + 1 tokens) are captured by their token count. */
static int graph_size(const scn_engine *e, const kv_seq_work *seqs, const int *verify, int n)
{
    if (!e->cuda_graphs || n <= 0) return 0;
    long rows = 0;
    for (int i = 0; i < n; i++) {
        if (seqs[i].new_tokens != 1 && !(verify && verify[i] > 0)) return 0;
        rows += seqs[i].new_tokens;
    }
    for (int i = 0; i < e->n_graph_sizes; i++)
        if (e->graph_sizes[i] >= rows) return e->graph_sizes[i];
    return 0;
}

kv_step_cost kv_step_time(const scn_scenario *s, const kv_cache_cfg *c, scn_attention attn,
                          const kv_seq_work *seqs, int n)
{
    return kv_step_time_verify(s, c, attn, seqs, NULL, n);
}

kv_step_cost kv_step_time_verify(const scn_scenario *s, const kv_cache_cfg *c, scn_attention attn,
                                 const kv_seq_work *seqs, const int *verify, int n)
{
    kv_step_cost shape;
    kv_step_shape(s, verify, seqs, n, &shape);
    return kv_step_complete(&shape, s, c, attn, seqs, verify, n);
}

/* Everything but attention: each op depends on the batch only through its token and row
 * counts and n, never on the contexts. The ops are finished here exactly as kv_step_complete
 * would finish them (finish() touches one op), so a shape cached and reused gives the same
 * doubles as recomputing it. */
void kv_step_shape(const scn_scenario *s, const int *verify, const kv_seq_work *seqs, int n, kv_step_cost *out)
{
    const scn_model *m = &s->model;
    const scn_hardware *hw = &s->hardware;
    const scn_engine *e = &s->engine;
    int tp = s->deployment.tensor_parallel;
    kv_step_cost r;
    memset(&r, 0, sizeof r);
    double T = 0;
    for (int i = 0; i < n; i++) T += (double)(seqs[i].new_tokens > 0 ? seqs[i].new_tokens : 0);
    r.tokens = (long)T;
    r.graph_batch = graph_size(e, seqs, verify, n);
    r.graph = r.graph_batch > 0;
    double h = m->hidden, L = m->layers, H = m->heads;
    double S = n;   /* LM-head rows: one per sequence, every row of a speculative verify */
    for (int i = 0; i < n; i++)
        if ((verify && verify[i] > 0) && seqs[i].new_tokens > 1) S += (double)(seqs[i].new_tokens - 1);
    kv_weights kw = kv_weights_compute(m, tp);
    r.gemm_dtype = kv_gemm_dtype(m, hw);
    gemm_ctx g = {hw, T, r.graph ? r.graph_batch : T, kv_compute_rate(hw, r.gemm_dtype), r.gemm_dtype,
                  kw.bytes_per_linear, WO_NONE, 0, SCN_BF8_NATIVE};
    weight_only_of(&g, m, e);
    /* Block-scaled fp8 weights on a GPU with fp8 math, run by a kernel family with a published
     * rate for it: priced as that family runs them. */
    if (m->weight_dtype == SCN_DTYPE_FP8 && m->weight_quant == SCN_WQ_BLOCK && g.wo == WO_NONE &&
        g.dt == SCN_DTYPE_FP8 && kv_block_fp8_applies(hw, e->block_fp8))
        g.bf8 = e->block_fp8;
    r.gemm_dtype = g.dt;
    /* An experts-only checkpoint (gpt-oss's MXFP4) or an MLP-only one (Meta's fp8_mixed
     * Llama-3.1-405B-FP8) keeps attention in 16-bit: its projections stream 16-bit weights and
     * run 16-bit math. */
    gemm_ctx ga = g;
    if (m->quant_experts_only || m->quant_mlp_only) {
        ga.dt = SCN_DTYPE_BF16;
        ga.peak = kv_compute_rate(hw, SCN_DTYPE_BF16);
        ga.wb = kw.bytes_per_other;
        ga.wo = WO_NONE;
        ga.bf8 = SCN_BF8_NATIVE;
    }

    if (T > 0) {
        add(&r.op[KV_OP_EMBED], 0, 2.0 * T * h * AB, 1);
        /* Each norm is fused with its residual add: read x and residual, write both. */
        add(&r.op[KV_OP_NORM], 5.0 * T * h * m->norms_per_layer * L, 4.0 * T * h * AB * m->norms_per_layer * L,
            m->norms_per_layer * L);

        double q_out, o_in;
        if (m->kv_lora_rank > 0) {
            /* Queries (through q_lora when present) and kv_a's latent + rope key; kv_b belongs to
             * attention, which runs it as expansion (prefill) or absorption (decode). */
            double qk = m->qk_nope_head_dim + m->qk_rope_head_dim;
            double kv_a = m->kv_lora_rank + m->qk_rope_head_dim;
            if (m->q_lora_rank > 0) {
                gemm(&r.op[KV_OP_QKV], &ga, m->q_lora_rank + kv_a, h, L, 1);
                gemm(&r.op[KV_OP_QKV], &ga, H * qk / tp, m->q_lora_rank, L, 1);
            } else {
                gemm(&r.op[KV_OP_QKV], &ga, H * qk / tp + kv_a, h, L, 1);
            }
            add(&r.op[KV_OP_QKV], 0, 0, L);   /* rotary */
            /* The latents are normalised before they are expanded or cached (kv_a_layernorm,
             * and q_a_layernorm with a query LoRA): one RMSNorm kernel each, reading and writing
             * the latent. */
            double lat = m->kv_lora_rank + (m->q_lora_rank > 0 ? m->q_lora_rank : 0);
            add(&r.op[KV_OP_NORM], 4.0 * T * lat * L, 2.0 * T * lat * AB * L, (m->q_lora_rank > 0 ? 2.0 : 1.0) * L);
            q_out = H * qk / tp + kv_a;
            o_in = H * m->v_head_dim / tp;
        } else {
            q_out = (H / tp + 2.0 * kv_heads_per_rank(m, tp)) * m->head_dim;
            gemm(&r.op[KV_OP_QKV], &ga, q_out, h, L, 1);
            /* Rotary: a kernel that reads and writes the new tokens' query and key heads
             * (vLLM's and SGLang's rotary_embedding in place; TensorRT-LLM's QKV preprocessing
             * inside its attention plugin), after the GEMM that produced them. */
            add_serial(&r.op[KV_OP_QKV], 2.0 * T * (H / tp + kv_heads_per_rank(m, tp)) * m->head_dim * AB * L, L);
            o_in = H * m->head_dim / tp;
        }
        gemm(&r.op[KV_OP_OUT_PROJ], &ga, h, o_in, L, 1);

        /* MLP: gate|up GEMM, activation, down GEMM. Activation traffic: x in, gate|up out and
         * back in (4I), product out and back in (2I), y out. */
        kv_op_cost *mlp = &r.op[KV_OP_MLP];
        double dense_layers = m->experts > 0 ? m->dense_layers : L;
        if (dense_layers > 0) {
            double I = (double)m->intermediate / tp;
            /* An MLP-only checkpoint's end layers keep 16-bit MLPs: their GEMMs run as
             * attention's do (ga). */
            double ends = m->quant_mlp_only ? 2.0 * m->unquantized_end_layers : 0;
            if (ends > 0) {
                gemm(mlp, &ga, 2.0 * I, h, ends, 1);
                gemm(mlp, &ga, h, I, ends, 1);
            }
            /* Last, so the op reports the quantised GEMMs' shape efficiency. */
            gemm(mlp, &g, 2.0 * I, h, dense_layers - ends, 1);
            gemm(mlp, &g, h, I, dense_layers - ends, 1);
            /* SiLU*mul, its own kernel between the two GEMMs (vLLM's and SGLang's silu_and_mul;
             * TensorRT-LLM's separate SwiGLU kernel, fused into the GEMM only for FP8 on Hopper
             * with --gemm_swiglu_plugin): gate|up in, product out. */
            add_serial(mlp, (3.0 * T * I) * AB * dense_layers, dense_layers);
        }
        if (m->experts > 0) {
            double moe_layers = L - m->dense_layers, E = m->experts, k = m->experts_per_token;
            double I = (double)m->moe_intermediate / tp;
            /* Distinct experts T tokens touch when each picks k of E uniformly: E(1 - (1 - k/E)^T). */
            double touched = E * (1.0 - pow(1.0 - k / E, T)) + m->shared_experts;
            double active = k + m->shared_experts;
            /* The routed experts and the router; the shared experts are added below. */
            double flops = (2.0 * T * 3.0 * h * I * k + 2.0 * T * h * E) * moe_layers;
            /* Activation traffic: under the Triton and CUTLASS families, the grouped GEMMs' own
             * (gate|up reads the k copies of each token and writes 2I or, fused, I per copy; down
             * reads I and writes h per copy) beside the memory-bound kernels between them, which
             * run alone (kv_moe_movement_bytes); kvplan's own family keeps its streamed total. */
            kv_moe_movement mv = kv_moe_movement_bytes(hw, e, g.dt, kw.bytes_per_linear, T, E, k, h, I);
            double act = mv.serial + mv.gemm > 0 ? mv.gemm : (2.0 * T * h + 6.0 * T * I * k) * AB;
            if (mv.serial > 0) add_serial(mlp, mv.serial * moe_layers, 0);
            add(mlp, flops,
                ((touched - m->shared_experts) * 3.0 * h * I * kw.bytes_per_linear + h * E * kw.bytes_per_other +
                 act) * moe_layers,
                /* router GEMM, top-k, sorting tokens by expert, grouped gate|up, activation,
                 * grouped down, weighted sum of the k outputs (a fused-MoE layer's kernels),
                 * and with 8- or 4-bit GEMM math the quantisation of each grouped GEMM's
                 * input activations (kv_moe_quant_kernels). */
                (7.0 + kv_moe_quant_kernels(g.dt)) * moe_layers);
            /* A group-limited router (DeepSeek-V3's n_group) under an engine with a published
             * time for its fused top-k: that time a layer, run alone, and its second kernel
             * (kv_moe_routing_seconds). */
            double t_route = kv_moe_routing_seconds(e, m);
            if (t_route > 0) {
                mlp->t_latency += t_route * moe_layers;
                add(mlp, 0, 0, moe_layers);
            }
            /* Shared experts run as a dense MLP (vLLM's and SGLang's DeepseekV2MLP, a
             * TensorRT-LLM GatedMLP): gate|up, activation, down, each GEMM priced as the dense
             * layers' are (gemm(): with block-scaled fp8 the family's rate, its CTA fill and
             * its input's group quantisation), so that the step prices them as the
             * expert-parallel step's dense stand-in does (kv_moe_parallel.c). */
            if (m->shared_experts > 0) {
                double Is = (double)m->shared_experts * I;
                gemm(mlp, &g, 2.0 * Is, h, moe_layers, 1);
                gemm(mlp, &g, h, Is, moe_layers, 1);
                add_serial(mlp, 3.0 * T * Is * AB * moe_layers, moe_layers);
            }
            /* Grouped GEMMs: each touched expert sees T * active / touched rows on average. */
            double Me = fmax(1, g.M * active / touched);
            double eff = kv_gemm_shape_efficiency(hw, Me, 2.0 * I, h, g.dt);
            /* The routed experts' grouped GEMMs at the engine's fused-MoE rate, the router as a
             * dense GEMM (kv_moe_gemm_rate); the shared experts' GEMMs are priced above. */
            double routed = 2.0 * T * 3.0 * h * I * k * moe_layers;
            double rate = kv_moe_gemm_rate(hw, e, g.dt, Me, 2.0 * I, h), t_routed = rate > 0 ? routed / rate : 0;
            /* MXFP4 experts an engine runs weight-only through Marlin's MoE kernel (`mxfp4:
             * marlin`, a GPU without fp4 math): Marlin's own rate, as its dense GEMMs (gemm()),
             * in place of the fused-MoE family's (docs/cost-model.md, "Weight-only kernels"). */
            double marlin = m->weight_quant == SCN_WQ_MXFP4 && e->mxfp4_layout == SCN_MX_MARLIN &&
                                    hw->flops[SCN_DTYPE_FP4] <= 0 ? kv_marlin_rate(hw) : 0;
            if (marlin > 0) {
                t_routed = routed / marlin;
                eff = 1;
            }
            if (e->moe_kernel == SCN_MOE_KERNEL_CUTLASS) {
                /* CUTLASS grouped GEMMs: each expert's rows padded to the tile on their own, all
                 * experts' tiles in one set of waves (kv_moe_grouped_layer): gate|up holds two
                 * thirds of the flops, down one third. */
                double dense = kv_moe_grouped_rate(hw, e, m, g.dt);
                kv_moe_grouped_layer_cost gl =
                    kv_moe_grouped_layer(hw, g.M, E, k, h, I, g.dt, kw.bytes_per_linear, dense);
                t_routed = dense > 0 ? routed * gl.inverse / dense : 0;
                eff = 1.0 / gl.inverse;
                /* On Ampere and Ada the grouped kernels walk an expert's tiles M-row by M-row:
                 * the groups of rows after the first read the expert's weights again
                 * (kv_grouped_weight_reads; docs/cost-model.md, "Weight re-reads of row-major
                 * grouped GEMMs"). */
                if (gl.weight_reads > 1)
                    add(mlp, 0,
                        (gl.weight_reads - 1) * (touched - m->shared_experts) * 3.0 * h * I * kw.bytes_per_linear *
                            moe_layers,
                        0);
            }
            mlp->t_compute += g.peak > 0 && t_routed > 0 ? (t_routed + (flops - routed) / (g.peak * kv_gemm_shape_efficiency(hw, Me, 2.0 * I, h, g.dt))) * g.M / T : 0;
            mlp->efficiency = eff;
        }

        if (tp > 1) {
            /* Two all-reduces of the M x h activations a layer (after attention and the MLP),
             * each as the engine runs it on this interconnect. */
            kv_op_cost *ar = &r.op[KV_OP_ALLREDUCE];
            double msg = g.M * h * AB;
            r.allreduce = kv_allreduce_time(hw, e, tp, msg);
            r.allreduces = (int)(2 * L);
            ar->net_bytes = 2.0 * L * r.allreduce.net_bytes;
            ar->t_network = 2.0 * L * r.allreduce.seconds;
            ar->kernels = 2.0 * L * (1 + r.allreduce.copies);   /* the framework's copies are kernels too */
        }
        /* LM head: one token's logits per sequence, plus the final norm; 16-bit weights. Split
         * by vocabulary over the ranks, or whole on each where the engine leaves it replicated. */
        double V = (double)m->vocab / (e->lm_head_replicated ? 1 : tp);
        gemm_ctx lg = {hw, S, r.graph ? r.graph_batch : S, kv_compute_rate(hw, SCN_DTYPE_BF16),
                       SCN_DTYPE_BF16, kw.bytes_per_other, WO_NONE, 0, SCN_BF8_NATIVE};
        gemm(&r.op[KV_OP_LM_HEAD], &lg, V, h, 1, 1);
        if (e->sampler_bytes_per_logit > 0) {
            /* The sampler as the engine runs it (docs/cost-model.md, "The sampler in the step"):
             * the LM head writes its shard's logits in 16 bits (the GEMM's own bytes); with
             * `gather` the ranks all-gather the shards, so each holds all V_full logits of the
             * S rows, and every rank's sampler then moves bytes_per_logit over each of them, in
             * kernels of its own after the GEMM. */
            double Vf = (double)m->vocab, Sv = S * Vf;
            add(&r.op[KV_OP_LM_HEAD], 0, 2.0 * S * h * AB, 1);
            bool gathered = e->sampler_gather && V < Vf;
            add_serial(&r.op[KV_OP_LM_HEAD], Sv * e->sampler_bytes_per_logit + (gathered ? Sv * AB * (Vf - V) / Vf : 0), 2);
            if (gathered) {
                kv_coll_cost ag = kv_allgather_time(hw, tp, Sv * AB);
                kv_op_cost *ar = &r.op[KV_OP_ALLREDUCE];
                ar->net_bytes += ag.net_bytes;
                ar->t_network += ag.seconds;
                ar->kernels += 1;
            }
        } else {
            add(&r.op[KV_OP_LM_HEAD], 0, S * V * LOGIT_BYTES + 2.0 * S * h * AB - S * V * AB, 1);
        }
    }

    double bw = hw->memory_bandwidth * hw->eff_bandwidth;
    double fp32 = hw->flops[SCN_DTYPE_FP32] > 0 ? hw->flops[SCN_DTYPE_FP32] : g.peak / 8;
    r.op[KV_OP_NORM].t_compute = fp32 > 0 ? r.op[KV_OP_NORM].flops / fp32 : 0;
    for (int op = 0; op < KV_OP_COUNT; op++) {
        if (op == KV_OP_STEP || op == KV_OP_ATTENTION) continue;
        finish(&r.op[op], bw, 1, hw->kernel_overhead, r.graph, e->graph_kernel);
    }
    *out = r;
}

/* Attention over the batch's contexts, then the step's totals, on top of kv_step_shape's ops
 * for the same batch shape. */
static kv_step_cost step_totals(kv_step_cost r, const scn_scenario *s, double attn_units, int n);

static kv_step_cost complete_led(const kv_step_cost *shape, const scn_scenario *s, const kv_cache_cfg *c,
                                 scn_attention attn, const kv_decode_lead *lead, const kv_seq_work *seqs, const int *verify,
                                 int n);

kv_step_cost kv_step_complete(const kv_step_cost *shape, const scn_scenario *s, const kv_cache_cfg *c,
                              scn_attention attn, const kv_seq_work *seqs, const int *verify, int n)
{
    return complete_led(shape, s, c, attn, NULL, seqs, verify, n);
}

kv_step_cost kv_step_complete_led(const kv_step_cost *shape, const scn_scenario *s, const kv_cache_cfg *c,
                                  scn_attention attn, const kv_decode_lead *lead, const kv_seq_work *rows, int n)
{
    return complete_led(shape, s, c, attn, lead, rows, NULL, n);
}

static kv_step_cost complete_led(const kv_step_cost *shape, const scn_scenario *s, const kv_cache_cfg *c,
                                 scn_attention attn, const kv_decode_lead *lead, const kv_seq_work *seqs, const int *verify,
                                 int n)
{
    const scn_model *m = &s->model;
    const scn_hardware *hw = &s->hardware;
    const scn_engine *e = &s->engine;
    kv_step_cost r = *shape;
    double attn_units = 0;
    kv_op_cost *at = &r.op[KV_OP_ATTENTION];
    if (r.tokens > 0) {
        double L = m->layers;
        double mla_flops = 0;
        attn_work work = {0, 0, 0};
        attention(at, s, c, attn, lead, seqs, verify, n, 0, L - m->sliding_layers, &attn_units, &r.mla_absorbed, &mla_flops, &work);
        attention(at, s, c, attn, lead, seqs, verify, n, 1, m->sliding_layers, &attn_units, &r.mla_absorbed, &mla_flops, &work);
        at->efficiency = kv_attention_efficiency(hw, e);
        double apeak = kv_attention_rate(hw, e, c, false), ppeak = kv_attention_rate(hw, e, c, true);
        /* MLA decode's latent attention runs in its own kernel family (FlashMLA-class decode),
         * whose share of the peak differs from prefill attention's (kv_mla_decode_efficiency). */
        double mpeak = hw->flops[SCN_DTYPE_BF16] * kv_mla_decode_efficiency(hw, e);
        /* Prefill launches run at the prefill rate (TensorRT-LLM's context FMHA keeps 16-bit math);
         * a decode-only step adds 0 for them, leaving kv_step_complete_decode's doubles. */
        at->t_compute = apeak > 0 ? (work.compute + work.other) / apeak + (work.prefill > 0 && ppeak > 0 ? work.prefill / ppeak : 0) +
                                        (mpeak > 0 ? mla_flops / mpeak : 0)
                                  : 0;
    }
    return step_totals(r, s, attn_units, n + (lead ? lead->n : 0));
}

/* ---- A plain decode step from sums over its rows ----
 * attention() adds, for each FlashAttention decode row of a non-MLA model, per layer kind:
 * flop_per_key * keys to the flops, (qo + kv_tok) + keys * kv_tok to the bytes and kvh * split
 * to the work items, where keys = held = min(context + 1, the kind's cap). When each of those
 * terms is an integer and every partial sum stays below 2^53, every addition is exact, so the
 * sums do not depend on the order of the rows and equal n * (qo + kv_tok) + kv_tok * Σ keys and
 * so on: the closed form below gives kv_step_complete's doubles bit for bit. docs/simulator.md,
 * "Decode steps in O(1)", states the conditions. */

typedef struct { double fpk, qo, kv_tok, kvh; } decode_row;

/* The per-row constants of attention()'s FlashAttention decode path, the same expressions. */
static decode_row decode_row_of(const scn_scenario *s, const kv_cache_cfg *c)
{
    const scn_model *m = &s->model;
    int tp = s->deployment.tensor_parallel;
    double heads = (double)m->heads / tp;
    return (decode_row){.fpk = 2.0 * heads * ((double)m->head_dim + (double)m->head_dim),
                        .qo = 1 * heads * ((double)m->head_dim + (double)m->head_dim) * AB,
                        .kv_tok = kv_bytes_per_token_layer_rank(m, c, tp),
                        .kvh = kv_heads_per_rank(m, tp)};
}

static bool whole(double v, double bound) { return v >= 0 && v == floor(v) && v < bound; }

bool kv_decode_sums_exact(const scn_scenario *s, const kv_cache_cfg *c, scn_attention attn, int max_n, long max_ctx)
{
    if (attn != SCN_ATTN_FLASH || s->model.kv_lora_rank > 0 || max_n < 1 || max_ctx < 1) return false;
    decode_row d = decode_row_of(s, c);
    const double lim = 9007199254740992.0;   /* 2^53: integers below it add exactly */
    double n = max_n, keys = (double)max_n * ((double)max_ctx + 1);   /* a bound on Σ keys */
    /* A row's split is at most its keys (ceil(held / 128) <= held), so Σ splits <= Σ keys. */
    return whole(d.fpk, lim) && whole(d.qo, lim) && whole(d.kv_tok, lim) && whole(d.kvh, lim) &&
           whole(d.fpk * keys, lim) && whole(n * (d.qo + d.kv_tok) + d.kv_tok * keys, lim) &&
           d.kvh * keys * 2 < lim;
}

long kv_decode_cap(const scn_scenario *s, const kv_cache_cfg *c, int sliding)
{
    return layer_cap(&s->model, c, sliding);
}

double kv_decode_split_cap(const scn_scenario *s, int n)
{
    double kvh = s->model.kv_lora_rank > 0 ? 1 : kv_heads_per_rank(&s->model, s->deployment.tensor_parallel);
    return kv_decode_splits(&s->hardware, &s->engine, n * kvh, s->model.kv_lora_rank > 0);
}

double kv_decode_split(double held, double split_cap)
{
    double split = ceil(held / 128.0);
    if (!(split < split_cap)) split = split_cap;
    if (!(split > 1)) split = 1;
    return split;
}

kv_step_cost kv_step_complete_decode(const kv_step_cost *shape, const scn_scenario *s, const kv_cache_cfg *c,
                                     int n, const kv_decode_sums *d)
{
    const scn_model *m = &s->model;
    const scn_hardware *hw = &s->hardware;
    kv_step_cost r = *shape;
    double attn_units = 0;
    kv_op_cost *at = &r.op[KV_OP_ATTENTION];
    if (r.tokens > 0) {
        decode_row w = decode_row_of(s, c);
        double layers[2] = {(double)m->layers - m->sliding_layers, m->sliding_layers};
        double ratio = decode_pad_ratio(s, c, kv_decode_split_cap(s, n), 1), cflops = 0;
        for (int k = 0; k < 2; k++) {
            if (layers[k] <= 0) continue;
            attn_units += w.kvh * d->splits[k];
            add(at, w.fpk * d->keys[k] * layers[k], ((double)n * (w.qo + w.kv_tok) + w.kv_tok * d->keys[k]) * layers[k],
                2 * layers[k]);
            cflops += w.fpk * d->keys[k] * ratio * layers[k];   /* attention()'s dflops * ratio1 * layers */
        }
        at->efficiency = kv_attention_efficiency(hw, &s->engine);
        double apeak = kv_attention_rate(hw, &s->engine, c, false);
        at->t_compute = apeak > 0 ? cflops / apeak : 0;
    }
    return step_totals(r, s, attn_units, n);
}

/* kv_step_complete_decode's seconds for one batch size, with everything but the sums prepared
 * once: the same operations on the same doubles in the same order (finish() on attention, the
 * GPU sum, the step's CPU term, the total), so the same result. */
void kv_decode_plan_make(const kv_step_cost *shape, const scn_scenario *s, const kv_cache_cfg *c, int n, kv_decode_plan *p)
{
    const scn_model *m = &s->model;
    const scn_hardware *hw = &s->hardware;
    const scn_engine *e = &s->engine;
    decode_row w = decode_row_of(s, c);
    memset(p, 0, sizeof *p);
    p->hw = hw;
    for (int op = 0; op < KV_OP_COUNT; op++) p->op_seconds[op] = shape->op[op].seconds;
    p->tokens = shape->tokens > 0;
    p->n = n;
    p->layers[0] = (double)m->layers - m->sliding_layers;
    p->layers[1] = m->sliding_layers;
    p->fpk = w.fpk;
    p->qo_kv = w.qo + w.kv_tok;
    p->kv_tok = w.kv_tok;
    p->kvh = w.kvh;
    p->pad = decode_pad_ratio(s, c, kv_decode_split_cap(s, n), 1);
    p->apeak = kv_attention_rate(hw, e, c, false);
    p->bw = hw->memory_bandwidth * hw->eff_bandwidth;
    p->launch = hw->kernel_overhead;
    p->graph = shape->graph;
    p->graph_kernel = e->graph_kernel;
    p->graph_launch = e->graph_launch;
    p->async = e->async_scheduling;
    p->cpu = hw->step_overhead + e->seq_cpu * n;
    p->host = kv_eager_host_seconds(s, p->graph);
    /* The common case's wave efficiency, once: every row splits once (splits = n per kind), so a
     * run of steps of n rows has the same work items; computed as kv_decode_plan_seconds does. */
    for (int k = 0; k < 2; k++)
        if (p->tokens && p->layers[k] > 0) p->wave_units += p->kvh * (double)n;
    p->wave = kv_wave_efficiency(hw, p->wave_units);
    /* The step's sums start with the same ops every time: their partial sum, in the same order. */
    for (int op = 0; op < KV_OP_ATTENTION; op++) p->pre_attention += p->op_seconds[op];
}

double kv_decode_plan_seconds(const kv_decode_plan *p, const kv_decode_sums *d)
{
    double flops = 0, cflops = 0, bytes = 0, kernels = 0, units = 0;
    if (p->tokens)
        for (int k = 0; k < 2; k++) {
            if (p->layers[k] <= 0) continue;
            units += p->kvh * d->splits[k];
            flops += p->fpk * d->keys[k] * p->layers[k];
            cflops += p->fpk * d->keys[k] * p->pad * p->layers[k];
            bytes += ((double)p->n * p->qo_kv + p->kv_tok * d->keys[k]) * p->layers[k];
            kernels += 2 * p->layers[k];
        }
    double att = 0;
    if (flops != 0 || bytes != 0) {   /* finish() on the attention op */
        double tc = p->apeak > 0 ? cflops / p->apeak : 0;
        double bw = p->bw * (units == p->wave_units ? p->wave : kv_wave_efficiency(p->hw, units));
        double tm = bw > 0 ? bytes / bw : 0;
        double gpu = fmax(kv_roofline_combine(tc, tm), 0);
        double ov = 0;
        ov += kv_launch_overhead(kernels, gpu, p->launch, p->graph, p->graph_kernel);
        att = gpu + ov;
    }
    /* The sums of finish() and step_totals(), op by op in op order, from the prepared prefix. */
    _Static_assert(KV_OP_ATTENTION < KV_OP_STEP, "the prefix before attention holds no step term");
    double gpu = p->pre_attention + att;
    for (int op = KV_OP_ATTENTION + 1; op < KV_OP_COUNT; op++) gpu += p->op_seconds[op];
    if (p->graph) gpu += p->graph_launch;
    double st = (p->graph ? p->graph_launch : 0) + kv_step_host_term(gpu, p->cpu, p->host, p->async);
    double seconds = p->pre_attention + att;
    for (int op = KV_OP_ATTENTION + 1; op < KV_OP_COUNT; op++) seconds += op == KV_OP_STEP ? st : p->op_seconds[op];
    return seconds;
}

/* Attention's roofline and the step's totals, once attention's counts are in. */
static kv_step_cost step_totals(kv_step_cost r, const scn_scenario *s, double attn_units, int n)
{
    const scn_hardware *hw = &s->hardware;
    const scn_engine *e = &s->engine;
    kv_op_cost *at = &r.op[KV_OP_ATTENTION];
    /* Decode attention streams the cache with as many work items as it can spread. */
    double bw = hw->memory_bandwidth * hw->eff_bandwidth;
    finish(at, bw, kv_wave_efficiency(hw, attn_units), hw->kernel_overhead, r.graph, e->graph_kernel);
    for (int op = 0; op < KV_OP_COUNT; op++) r.gpu_seconds += r.op[op].seconds;
    if (r.graph) r.gpu_seconds += e->graph_launch;

    /* The engine's CPU work: serial with the GPU, or hidden behind it when scheduling runs a
     * step ahead. */
    r.cpu_seconds = hw->step_overhead + e->seq_cpu * n;
    r.host_seconds = kv_eager_host_seconds(s, r.graph);
    kv_op_cost *st = &r.op[KV_OP_STEP];
    st->t_overhead = (r.graph ? e->graph_launch : 0) +
                     kv_step_host_term(r.gpu_seconds, r.cpu_seconds, r.host_seconds, e->async_scheduling);
    st->seconds = st->t_overhead;
    st->bound = KV_BOUND_OVERHEAD;

    /* The step's bound is the category holding the most time. */
    double by[4] = {0};
    for (int op = 0; op < KV_OP_COUNT; op++) {
        kv_op_cost *o = &r.op[op];
        r.seconds += o->seconds;
        by[KV_BOUND_OVERHEAD] += o->t_overhead;
        double t = o->seconds - o->t_overhead;
        if (t > 0) by[o->bound == KV_BOUND_OVERHEAD ? (o->t_network > 0 ? KV_BOUND_NETWORK : o->t_memory >= o->t_compute ? KV_BOUND_MEMORY : KV_BOUND_COMPUTE)
                                                    : o->bound] += t;
    }
    r.bound = KV_BOUND_MEMORY;
    for (int b = 0; b < 4; b++) if (by[b] > by[r.bound]) r.bound = (kv_bound)b;
    /* A step whose host walk outlasts its kernels waits on the host, whatever its ops hold. */
    if (r.host_seconds > r.gpu_seconds) r.bound = KV_BOUND_OVERHEAD;
    return r;
}

kv_op_cost kv_gemm_time(const scn_hardware *hw, const scn_engine *e, double M, double N, double K, scn_dtype dt,
                        double weight_bytes, bool graph)
{
    kv_op_cost o;
    memset(&o, 0, sizeof o);
    gemm_ctx g = {hw, M, M, kv_compute_rate(hw, dt), dt, weight_bytes, WO_NONE, 0, SCN_BF8_NATIVE};
    gemm(&o, &g, N, K, 1, 1);
    finish(&o, hw->memory_bandwidth * hw->eff_bandwidth, 1, hw->kernel_overhead, graph, e->graph_kernel);
    return o;
}
