/* kv_roofline.c: time of one engine step as a roofline per operation.
 *
 * Each op's time is max(flops / achievable compute, bytes / achievable bandwidth, network
 * time) plus its kernel launches' fixed cost; the step adds the engine's CPU overhead.
 * Counts are per tensor-parallel rank and summed over layers. docs/cost-model.md, "Step time",
 * derives each count. */
#include "kv_model.h"

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

/* Finishes an op: times from counts, and which term binds. */
static void finish(kv_op_cost *o, double peak, double bw, double launch)
{
    o->t_compute = peak > 0 ? o->flops / peak : 0;
    o->t_memory = bw > 0 ? o->bytes / bw : 0;
    o->t_overhead += o->kernels * launch;
    double t = o->t_compute;
    o->bound = KV_BOUND_COMPUTE;
    if (o->t_memory >= t) { t = o->t_memory; o->bound = KV_BOUND_MEMORY; }
    if (o->t_network > t) { t = o->t_network; o->bound = KV_BOUND_NETWORK; }
    if (o->t_overhead > t) o->bound = KV_BOUND_OVERHEAD;
    o->seconds = t + o->t_overhead;
}

/* Attention over all sequences, one layer kind (global or sliding), `layers` of them. */
static void attention(kv_op_cost *o, const scn_model *m, const kv_cache_cfg *c, scn_attention attn,
                      int tp, const kv_seq_work *seqs, int n, int sliding, double layers)
{
    if (layers <= 0) return;
    long cap = layer_cap(m, c, sliding);
    double heads = (double)m->heads / tp;
    double kv_tok = kv_bytes_per_token_layer_rank(m, c, tp);
    /* Per key and head: QK^T and PV multiply-adds. MLA attends in the latent space. */
    double qk_dim = m->kv_lora_rank > 0 ? m->kv_lora_rank + m->qk_rope_head_dim : m->head_dim;
    double v_dim = m->kv_lora_rank > 0 ? m->kv_lora_rank : m->head_dim;
    double flop_per_key = 2.0 * heads * (qk_dim + v_dim);
    double flops = 0, bytes = 0, kernels;
    for (int i = 0; i < n; i++) {
        long nt = seqs[i].new_tokens, ctx = seqs[i].context;
        if (nt <= 0) continue;
        double qo = nt * heads * (qk_dim + v_dim) * AB;              /* read Q, write O */
        double kv_new = nt * kv_tok;                                 /* write the new K/V */
        long held = kv_tokens_held(m, c, sliding, ctx + nt);
        if (attn == SCN_ATTN_FLASH) {
            flops += flop_per_key * keys_attended(ctx, nt, cap);
            bytes += qo + kv_new + flash_kv_tokens(ctx, nt, cap) * kv_tok;
        } else {
            /* Naive attention computes the full n x held score matrix, then masks it, and
             * writes scores and probabilities to memory and reads them back. */
            double scores = heads * nt * (double)held;
            flops += flop_per_key * nt * (double)held;
            bytes += qo + kv_new + held * kv_tok + 4.0 * scores * AB;
        }
    }
    kernels = attn == SCN_ATTN_FLASH ? 2 : 5;   /* cache write + kernel; or + QK, softmax, PV, copy */
    add(o, flops * layers, bytes * layers, kernels * layers);
}

/* A GEMM op: weight matrix of `wparams` per rank, T tokens in and out widths per rank. */
static void gemm(kv_op_cost *o, double T, double wparams, double in_w, double out_w, double wb,
                 double layers, double kernels)
{
    add(o, 2.0 * T * wparams * layers, (wparams * wb + T * (in_w + out_w) * AB) * layers, kernels * layers);
}

kv_step_cost kv_step_time(const scn_scenario *s, const kv_cache_cfg *c, scn_attention attn,
                          const kv_seq_work *seqs, int n)
{
    const scn_model *m = &s->model;
    const scn_hardware *hw = &s->hardware;
    int tp = s->deployment.tensor_parallel;
    kv_step_cost r;
    memset(&r, 0, sizeof r);
    double T = 0;
    for (int i = 0; i < n; i++) T += (double)(seqs[i].new_tokens > 0 ? seqs[i].new_tokens : 0);
    r.tokens = (long)T;
    double h = m->hidden, wb = scn_dtype_bytes(m->weight_dtype), L = m->layers, H = m->heads;
    double S = n;

    if (T > 0) {
        add(&r.op[KV_OP_EMBED], 0, 2.0 * T * h * AB, 1);
        /* Each norm is fused with its residual add: read x and residual, write both. */
        add(&r.op[KV_OP_NORM], 5.0 * T * h * m->norms_per_layer * L, 4.0 * T * h * AB * m->norms_per_layer * L,
            m->norms_per_layer * L);

        double q_out, qkv_params, o_in;
        if (m->kv_lora_rank > 0) {
            double qk = m->qk_nope_head_dim + m->qk_rope_head_dim;
            double q = m->q_lora_rank > 0 ? h * m->q_lora_rank + (double)m->q_lora_rank * H * qk / tp : h * H * qk / tp;
            double kv_a = h * (m->kv_lora_rank + m->qk_rope_head_dim);
            double kv_b = (double)m->kv_lora_rank * H * (m->qk_nope_head_dim + m->v_head_dim) / tp;
            qkv_params = q + kv_a + kv_b;
            q_out = H * qk / tp + m->kv_lora_rank + m->qk_rope_head_dim;
            o_in = H * m->v_head_dim / tp;
        } else {
            q_out = (H / tp + 2.0 * kv_heads_per_rank(m, tp)) * m->head_dim;
            qkv_params = h * q_out;
            o_in = H * m->head_dim / tp;
        }
        gemm(&r.op[KV_OP_QKV], T, qkv_params, h, q_out, wb, L, 2);   /* GEMM + rotary */
        gemm(&r.op[KV_OP_OUT_PROJ], T, o_in * h, o_in, h, wb, L, 1);

        attention(&r.op[KV_OP_ATTENTION], m, c, attn, tp, seqs, n, 0, L - m->sliding_layers);
        attention(&r.op[KV_OP_ATTENTION], m, c, attn, tp, seqs, n, 1, m->sliding_layers);

        /* MLP: gate|up GEMM, activation, down GEMM. Activation traffic: x in, gate|up out and
         * back in (4I), product out and back in (2I), y out. */
        kv_op_cost *mlp = &r.op[KV_OP_MLP];
        double dense_layers = m->experts > 0 ? m->dense_layers : L;
        if (dense_layers > 0) {
            double I = (double)m->intermediate / tp;
            add(mlp, 2.0 * T * 3.0 * h * I * dense_layers,
                (3.0 * h * I * wb + (2.0 * T * h + 6.0 * T * I) * AB) * dense_layers, 3 * dense_layers);
        }
        if (m->experts > 0) {
            double moe_layers = L - m->dense_layers, E = m->experts, k = m->experts_per_token;
            double I = (double)m->moe_intermediate / tp;
            /* Distinct experts T tokens touch when each picks k of E uniformly: E(1 - (1 - k/E)^T). */
            double touched = E * (1.0 - pow(1.0 - k / E, T)) + m->shared_experts;
            double active = k + m->shared_experts;
            add(mlp, (2.0 * T * 3.0 * h * I * active + 2.0 * T * h * E) * moe_layers,
                (touched * 3.0 * h * I * wb + h * E * wb + (2.0 * T * h + 6.0 * T * I * active) * AB) * moe_layers,
                5 * moe_layers);   /* router, top-k, grouped gate|up, activation, grouped down */
        }

        if (tp > 1) {
            /* Ring all-reduce of the T x h activations after attention and after the MLP. */
            kv_op_cost *ar = &r.op[KV_OP_ALLREDUCE];
            double msg = T * h * AB, p = tp;
            double per = 2.0 * (p - 1) / p * msg;
            ar->net_bytes = 2.0 * L * per;
            ar->bytes = 2.0 * L * 2.0 * msg;   /* reduce-add reads and writes locally */
            ar->kernels = 2.0 * L;
            double bw = hw->link_bandwidth * hw->eff_link;
            ar->t_network = bw > 0 ? ar->net_bytes / bw : INFINITY;
            ar->t_overhead = 2.0 * L * 2.0 * (p - 1) * hw->link_latency;
        }
        /* LM head: one token's logits per sequence, plus the final norm. */
        double V = (double)m->vocab / tp;
        add(&r.op[KV_OP_LM_HEAD], 2.0 * S * h * V, V * h * wb + S * h * AB + S * V * LOGIT_BYTES + 2.0 * S * h * AB, 2);
    }

    double bw = hw->memory_bandwidth * hw->eff_bandwidth;
    scn_dtype gd = hw->flops[m->weight_dtype] > 0 ? m->weight_dtype : SCN_DTYPE_BF16;
    double gemm_peak = hw->flops[gd] * hw->eff_compute;
    double attn_peak = hw->flops[SCN_DTYPE_BF16] * hw->eff_attention;
    for (int op = 0; op < KV_OP_COUNT; op++) {
        if (op == KV_OP_STEP) continue;
        double peak = op == KV_OP_ATTENTION ? attn_peak : op == KV_OP_NORM || op == KV_OP_EMBED ? 0 : gemm_peak;
        if (op == KV_OP_NORM) peak = hw->flops[SCN_DTYPE_FP32] > 0 ? hw->flops[SCN_DTYPE_FP32] : gemm_peak / 8;
        finish(&r.op[op], peak, bw, hw->kernel_overhead);
    }
    r.op[KV_OP_STEP].t_overhead = hw->step_overhead;
    r.op[KV_OP_STEP].seconds = hw->step_overhead;
    r.op[KV_OP_STEP].bound = KV_BOUND_OVERHEAD;

    /* The step's bound is the category holding the most time. */
    double by[4] = {0};
    for (int op = 0; op < KV_OP_COUNT; op++) {
        kv_op_cost *o = &r.op[op];
        r.seconds += o->seconds;
        by[KV_BOUND_OVERHEAD] += o->t_overhead;
        double t = o->seconds - o->t_overhead;
        if (t > 0) by[o->bound == KV_BOUND_OVERHEAD ? (o->t_memory >= o->t_compute ? KV_BOUND_MEMORY : KV_BOUND_COMPUTE)
                                                    : o->bound] += t;
    }
    r.bound = KV_BOUND_MEMORY;
    for (int b = 0; b < 4; b++) if (by[b] > by[r.bound]) r.bound = (kv_bound)b;
    return r;
}
