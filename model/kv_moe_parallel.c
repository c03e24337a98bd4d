/* kv_moe_parallel.c: expert parallelism and attention data parallelism (kv_moe_parallel.h). */
#include "kv_moe_parallel.h"
#include "kv_mla.h"
#include "kv_moe_grouped.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define AB 2.0   /* activation bytes (16-bit), as the all-to-all moves them */

double kv_moe_gemm_rate(const scn_hardware *hw, const scn_engine *e, scn_dtype dt, double Me, double N, double K)
{
    /* Published benchmark_moe timings of tuned Triton fused_moe kernels at thousands of tokens
     * reach 0.358-0.516 of the bf16 dense peak in bf16 once their silu_and_mul and moe_sum are
     * taken out (kv_moe_movement_bytes prices those), and fp8 no more than that (docs/sources.md,
     * "Fused-MoE kernels"): measured on H100 and H200 only, so other GPUs keep the dense rate. */
    if (e->moe_kernel == SCN_MOE_KERNEL_TRITON && hw->arch == SCN_ARCH_HOPPER && hw->flops[SCN_DTYPE_BF16] > 0)
        return hw->flops[SCN_DTYPE_BF16] * KV_TRITON_MOE_BF16_SHARE *
               kv_gemm_shape_efficiency(hw, Me, N, K, SCN_DTYPE_BF16);
    return kv_compute_rate(hw, dt) * kv_gemm_shape_efficiency(hw, Me, N, K, dt);
}

int kv_moe_ep(const scn_scenario *s) { return s->deployment.expert_parallel > 1 ? s->deployment.expert_parallel : 1; }
int kv_moe_dp(const scn_scenario *s) { return s->deployment.attention_dp > 1 ? s->deployment.attention_dp : 1; }

bool kv_moe_parallel_on(const scn_scenario *s)
{
    return s->model.experts > 0 && (kv_moe_ep(s) > 1 || kv_moe_dp(s) > 1);
}

int kv_moe_inclusion(int experts, int k, double skew, double *pi)
{
    if (experts <= 0) return -1;
    if (k > experts) k = experts;
    if (k < 0) k = 0;
    /* Popularity w_i = (i + 1)^-skew falls with i, so the experts a cap reaches are the first c.
     * With the first c capped at 1 the rest share k - c in proportion to w: lambda = (k - c) /
     * sum_{i >= c} w_i, which is consistent once w_c * lambda <= 1 (docs/cost-model.md, "Expert
     * load imbalance"). */
    double tail = 0;
    for (int i = 0; i < experts; i++) tail += pow(i + 1.0, -skew);
    int c = 0;
    double lambda = 0;
    for (; c < k; c++) {
        lambda = (k - c) / tail;
        if (pow(c + 1.0, -skew) * lambda <= 1) break;
        tail -= pow(c + 1.0, -skew);
    }
    if (c >= k) lambda = 0;
    for (int i = 0; i < experts; i++) pi[i] = i < c ? 1.0 : fmin(1.0, pow(i + 1.0, -skew) * lambda);
    return c;
}

double kv_moe_busiest_share(int experts, int k, int ep, double skew)
{
    if (experts <= 0 || ep <= 1 || k <= 0) return 1;
    double *pi = calloc((size_t)experts, sizeof *pi), *rank = calloc((size_t)ep, sizeof *rank);
    if (!pi || !rank) { free(pi); free(rank); return 1.0 / ep; }
    kv_moe_inclusion(experts, k, skew, pi);
    double total = 0;
    for (int i = 0; i < experts; i++) {
        total += pi[i];
        rank[i % ep] += pi[i];
    }
    double best = 0;
    for (int r = 0; r < ep; r++) best = fmax(best, rank[r]);
    free(pi);
    free(rank);
    return total > 0 ? best / total : 1.0 / ep;
}

double kv_moe_expected_max_touched(const double *pi, int experts, int ep, double tokens)
{
    if (experts <= 0 || ep < 1 || tokens <= 0) return 0;
    int ranks = ep < experts ? ep : experts, n = (experts + ep - 1) / ep;
    /* cdf[r * (n + 1) + x]: P(rank r touches at most x experts). Each rank's count is a sum of
     * independent Bernoulli draws, one per local expert i, touched with q_i = 1 - (1 - pi_i)^T
     * (a Poisson-binomial law, built by the usual recurrence over its experts); the ranks are
     * taken as independent of each other (docs/cost-model.md, "Expert parallelism and attention
     * data parallelism", busiest rank). */
    double *pmf = calloc((size_t)(n + 1), sizeof *pmf), *cdf = calloc((size_t)ranks * (size_t)(n + 1), sizeof *cdf);
    if (!pmf || !cdf) {
        free(pmf);
        free(cdf);
        return -1;
    }
    for (int r = 0; r < ranks; r++) {
        for (int x = 0; x <= n; x++) pmf[x] = 0;
        pmf[0] = 1;
        int m = 0;
        for (int i = r; i < experts; i += ep) {
            double q = 1 - pow(1 - pi[i], tokens);
            m++;
            for (int x = m; x >= 1; x--) pmf[x] = pmf[x] * (1 - q) + pmf[x - 1] * q;
            pmf[0] *= 1 - q;
        }
        double acc = 0;
        for (int x = 0; x <= n; x++) cdf[(size_t)r * (n + 1) + x] = acc += pmf[x];
    }
    /* E[max] = sum over x >= 1 of P(max >= x) = 1 - prod_r P(count_r <= x - 1). */
    double e = 0;
    for (int x = 1; x <= n; x++) {
        double all_below = 1;
        for (int r = 0; r < ranks; r++) all_below *= fmin(1, cdf[(size_t)r * (n + 1) + x - 1]);
        e += 1 - all_below;
    }
    free(pmf);
    free(cdf);
    return e;
}

/* Parameters of one routed expert (gate, up, down). */
static double expert_params(const scn_model *m) { return 3.0 * m->hidden * (double)m->moe_intermediate; }

double kv_moe_weight_bytes(const scn_scenario *s, const scn_model *m)
{
    const scn_deployment *d = &s->deployment;
    int tp = d->tensor_parallel < 1 ? 1 : d->tensor_parallel;
    kv_weights w = kv_weights_compute(m, tp);
    /* An engine that materialises MLA's absorbed products holds them too (kv_mla.h). */
    double absorbed = kv_mla_absorbed_bytes(s, m);
    if (m->experts <= 0 || (kv_moe_ep(s) <= 1 && kv_moe_dp(s) <= 1)) return w.bytes_per_rank + absorbed;
    int gpus = tp * kv_moe_dp(s);
    double routed = expert_params(m) * m->experts * (m->layers - m->dense_layers) * w.bytes_per_linear;
    /* Everything but the routed experts is split over the DP rank's tp GPUs (norms replicated,
     * as kv_weights_compute has it); the routed experts over all the replica's GPUs: experts / EP
     * per rank, each split gpus / EP ways. */
    return w.bytes_per_rank - routed / tp + routed / gpus + absorbed;
}

kv_moe_memory kv_moe_memory_compute(const scn_scenario *s, const kv_cache_cfg *c)
{
    const scn_model *m = &s->model;
    const scn_deployment *d = &s->deployment;
    int tp = d->tensor_parallel < 1 ? 1 : d->tensor_parallel;
    int gpus = tp * kv_moe_dp(s);
    kv_moe_memory r = {0};
    double routed = m->experts > 0 ? expert_params(m) * m->experts * (m->layers - m->dense_layers) : 0;
    r.expert_weights = routed * kv_weights_compute(m, tp).bytes_per_linear / gpus;
    r.weights = kv_moe_weight_bytes(s, m);
    r.kv_bytes_per_token = kv_bytes_per_token_layer_rank(m, c, tp) * m->layers;
    r.kv_budget = kv_memory_split(s, r.weights, kv_profile_activation_bytes(s, m, tp, d->max_num_batched_tokens, d->max_num_seqs, 0)).kv_budget;
    return r;
}

kv_pool kv_moe_pool_size(const scn_scenario *s, const kv_cache_cfg *c, bool paged, int block_size)
{
    /* kv_capacity_compute takes the expert-sharded weights when EP or DP is on, so the pool
     * every caller sizes (memory, capacity, the engine) is this one. */
    return kv_pool_size(s, c, paged, block_size);
}

/* The routing a step prices depends only on (experts, k, EP, skew), not on the batch, so each
 * thread keeps the last one computed: an expert-parallel run prices every step with the same
 * routing, and recomputing it (about 1,500 pow() calls) was most of a step's cost. The values
 * are those kv_moe_inclusion and kv_moe_busiest_share return, so prices are unchanged. */
#define ROUTING_EXPERTS_MAX 1024
/* With it, the experts each EP rank touches at a token count (sum over its experts of
 * 1 - (1 - pi_i)^tokens, another pow() per expert) for the last token counts seen, in a table
 * indexed by a hash of the count: a run's steps repeat a few hundred token counts. */
#define TOUCHED_SLOTS 128
#define TOUCHED_EP_MAX 32
typedef struct {
    int experts, k, ep;
    double skew;
    bool valid;
    double share;
    double pi[ROUTING_EXPERTS_MAX];
    double touched_key[TOUCHED_SLOTS];   /* tokens; NaN: empty */
    double touched[TOUCHED_SLOTS][TOUCHED_EP_MAX];
    double touched_max[TOUCHED_SLOTS];   /* kv_moe_expected_max_touched at the slot's tokens */
} routing;

static routing *routing_of(int experts, int k, int ep, double skew)
{
    static _Thread_local routing memo;
    if (experts <= 0 || experts > ROUTING_EXPERTS_MAX) return NULL;
    if (memo.valid && memo.experts == experts && memo.k == k && memo.ep == ep && memo.skew == skew) return &memo;
    memo.valid = false;
    kv_moe_inclusion(experts, k, skew, memo.pi);
    memo.share = kv_moe_busiest_share(experts, k, ep, skew);
    for (int i = 0; i < TOUCHED_SLOTS; i++) memo.touched_key[i] = NAN;
    memo.experts = experts;
    memo.k = k;
    memo.ep = ep;
    memo.skew = skew;
    memo.valid = true;
    return &memo;
}

/* Expected experts EP rank `rk` of `ep` touches when `tokens` tokens each pick from pi. */
static double touched_of(const double *pi, int experts, int ep, int rk, double tokens)
{
    double touched = 0;
    for (int i = rk; i < experts; i += ep) touched += 1 - pow(1 - pi[i], tokens);
    return touched;
}

/* The touched experts of every EP rank at `tokens` (at most TOUCHED_EP_MAX ranks), from the
 * routing's table, and in *tmax their expected maximum over the ranks. NULL: out of memory. */
static const double *touched_row(routing *rt, double tokens, double *tmax)
{
    int ranks = rt->ep < rt->experts ? rt->ep : rt->experts;
    uint64_t u;
    memcpy(&u, &tokens, sizeof u);
    size_t slot = (size_t)((u * 0x9e3779b97f4a7c15ULL) >> 57) % TOUCHED_SLOTS;
    if (rt->touched_key[slot] != tokens) {   /* NaN never equals: an empty slot fills */
        for (int rk = 0; rk < ranks; rk++) rt->touched[slot][rk] = touched_of(rt->pi, rt->experts, rt->ep, rk, tokens);
        rt->touched_max[slot] = kv_moe_expected_max_touched(rt->pi, rt->experts, rt->ep, tokens);
        if (rt->touched_max[slot] < 0) return NULL;   /* out of memory: the caller computes it again */
        rt->touched_key[slot] = tokens;
    }
    *tmax = rt->touched_max[slot];
    return rt->touched[slot];
}

/* What a step adds to the step model's price besides its attention-side ops: a function of the
 * batch's new tokens and CUDA-graph size alone (the dense stand-in MLPs are GEMMs over the rows,
 * the routed experts and collectives depend on the token count), so a run can keep it by that
 * key. */
typedef struct {
    double dense, shared;   /* MLP op seconds of the dense layers and of the shared experts */
    kv_moe_step r;          /* experts, all-to-all, gather and their details; seconds, attention
                             * and engine_seconds unset */
} moe_part;

#define PART_SLOTS 512   /* a run's steps repeat a few hundred (tokens, graph size) pairs */

struct kv_moe_ctx {
    const scn_scenario *s;
    /* Dense stand-ins of s for the dense layers and the shared experts: built once, since a
     * scenario is large (tens of KB) and copying it twice a step was most of a step's cost. */
    scn_scenario dense, shared;
    bool has_dense, has_shared;
    long key_tokens[PART_SLOTS];   /* -1: empty */
    int key_graph[PART_SLOTS];
    moe_part part[PART_SLOTS];
};

/* A dense stand-in of s: `layers` layers whose MLP is `width` wide and no experts; false when it
 * would have no MLP. */
static bool stand_in(const scn_scenario *s, int layers, int width, scn_scenario *t)
{
    if (layers <= 0 || width <= 0) return false;
    *t = *s;
    t->model.experts = t->model.experts_per_token = t->model.shared_experts = t->model.dense_layers = 0;
    t->model.layers = layers;
    t->model.sliding_layers = 0;
    t->model.intermediate = width;
    return true;
}

kv_moe_ctx *kv_moe_ctx_make(const scn_scenario *s)
{
    kv_moe_ctx *x = malloc(sizeof *x);
    if (!x) return NULL;
    const scn_model *m = &s->model;
    x->s = s;
    x->has_dense = stand_in(s, m->dense_layers, m->intermediate, &x->dense);
    x->has_shared = stand_in(s, m->layers - m->dense_layers, m->shared_experts * m->moe_intermediate, &x->shared);
    for (int i = 0; i < PART_SLOTS; i++) x->key_tokens[i] = -1;
    return x;
}

void kv_moe_ctx_free(kv_moe_ctx *x) { free(x); }

/* The MLP op's time of a dense stand-in over the same rows. kv_step_shape finishes the MLP op
 * and kv_step_complete leaves it as it is, so this is kv_step_time_verify's op[KV_OP_MLP]
 * without pricing attention. */
static double stand_in_mlp(const scn_scenario *t, const kv_seq_work *seqs, const int *verify, int n)
{
    kv_step_cost shape;
    kv_step_shape(t, verify, seqs, n, &shape);
    return shape.op[KV_OP_MLP].seconds;
}

/* The routed experts' phase, the all-to-all and the attention-DP gather of a step of T tokens on
 * each DP rank. */
static void routed_part(const scn_scenario *s, double T, bool graph, kv_moe_step *r)
{
    const scn_model *m = &s->model;
    const scn_hardware *hw = &s->hardware;
    int tp = s->deployment.tensor_parallel < 1 ? 1 : s->deployment.tensor_parallel;
    int dp = kv_moe_dp(s), ep = kv_moe_ep(s), gpus = tp * dp;
    int moe_layers = m->layers - m->dense_layers;
    /* Routed experts: the DP ranks' tokens together pick k distinct experts each, expert i with
     * probability pi_i (kv_moe_inclusion); the busiest of the EP ranks gets share_max of those
     * rows, over experts/EP local experts split gpus/EP ways. */
    double k = m->experts_per_token, tokens = T * dp, split = (double)gpus / ep;
    routing *rt = routing_of(m->experts, m->experts_per_token, ep, s->deployment.expert_skew);
    double *pi = rt ? NULL : malloc(sizeof *pi * (size_t)m->experts);
    if (!rt && !pi) { r->seconds = -1; return; }
    if (rt) r->busiest_share = rt->share;
    else {
        kv_moe_inclusion(m->experts, m->experts_per_token, s->deployment.expert_skew, pi);
        r->busiest_share = kv_moe_busiest_share(m->experts, m->experts_per_token, ep, s->deployment.expert_skew);
    }
    const double *p = rt ? rt->pi : pi;
    r->rows_busiest = tokens * k * r->busiest_share;
    double h = m->hidden, I = m->moe_intermediate / split, wb = kv_weight_bytes_per_param(m);
    scn_dtype dt = kv_gemm_dtype(m, hw);
    double bw = hw->memory_bandwidth * hw->eff_bandwidth;
    /* Each EP rank r holds experts r, r + E, r + 2E, ...: it computes tokens x sum pi_i rows and
     * reads the weights of each local expert at least one token picked. The slowest rank sets
     * the phase (the all-to-all after it is a barrier): at small batches that is the rank
     * touching the most experts, at large ones the rank with the most rows. Which rank touches
     * the most changes from step to step, so the phase waits on the expected maximum over the
     * ranks of the experts each touches, not on any one rank's expectation: at one token
     * (DeepSeek-V3, 8 of 256 experts over 8 ranks) 2.56 experts against a mean of 1
     * (kv_moe_expected_max_touched). Each rank's rows are paired with that maximum, so the rank
     * with the most rows (all alike without skew) binds at large batches, where the maximum
     * reaches every local expert. */
    double slowest = 0;
    double tmax = -1;
    const double *row = rt && (ep < m->experts ? ep : m->experts) <= TOUCHED_EP_MAX ? touched_row(rt, tokens, &tmax) : NULL;
    if (!row) tmax = kv_moe_expected_max_touched(p, m->experts, ep, tokens);
    if (tmax < 0) { free(pi); r->seconds = -1; return; }
    r->touched_busiest = tmax;
    for (int rk = 0; rk < ep && rk < m->experts; rk++) {
        double rows = 0;
        for (int i = rk; i < m->experts; i += ep) rows += tokens * p[i];
        double touched = fmax(tmax, row ? row[rk] : touched_of(p, m->experts, ep, rk, tokens));
        double flops = 2.0 * rows * 3.0 * h * I;
        double bytes = touched * 3.0 * h * I * wb + rows * (2.0 * h + 6.0 * I) * AB;
        double rate = kv_moe_gemm_rate(hw, &s->engine, dt, fmax(1, rows / fmax(1, touched)), 2.0 * I, h);
        double tc = rate > 0 ? flops / rate : 0, tm = bw > 0 ? bytes / bw : 0, ts = 0;
        if (s->engine.moe_kernel == SCN_MOE_KERNEL_CUTLASS && tokens > 0 && rows > 0) {
            /* CUTLASS grouped GEMMs over the rank's local experts, as the step model's fused-MoE
             * op prices them (kv_moe_grouped.h): each token sends rows / tokens of its k picks
             * here, spread over the local experts; the layer's data-movement kernels run alone. */
            double local = (m->experts - rk + ep - 1) / ep;   /* experts rk, rk + ep, ... */
            double kl = rows / tokens, dense = kv_moe_grouped_rate(hw, &s->engine, m, dt);
            kv_moe_grouped_layer_cost gl = kv_moe_grouped_layer(hw, tokens, local, kl, h, I, dt, wb, dense);
            tc = dense > 0 ? flops * gl.inverse / dense : 0;
            kv_moe_movement mv = kv_moe_movement_bytes(hw, &s->engine, dt, wb, tokens, local, kl, h, I);
            tm = bw > 0 ? (touched * 3.0 * h * I * wb * gl.weight_reads + mv.gemm) / bw : 0;
            ts = bw > 0 ? mv.serial / bw : 0;
        } else if (s->engine.moe_kernel == SCN_MOE_KERNEL_TRITON && tokens > 0 && rows > 0) {
            /* Triton's fused_experts over the rank's rows: its silu_and_mul and moe_sum run
             * alone after and between the GEMMs, as in the step model (kv_moe_movement_bytes). */
            double local = (m->experts - rk + ep - 1) / ep;
            kv_moe_movement mv = kv_moe_movement_bytes(hw, &s->engine, dt, wb, tokens, local, rows / tokens, h, I);
            tm = bw > 0 ? (touched * 3.0 * h * I * wb + mv.gemm) / bw : 0;
            ts = bw > 0 ? mv.serial / bw : 0;
        }
        slowest = fmax(slowest, kv_roofline_combine(tc, tm) + ts);
    }
    free(pi);
    /* The MoE layer's kernels are those of the step model's fused-MoE op (kv_step_shape), which
     * the expert-parallel step takes out: router GEMM, top-k, sorting (permuting) tokens by
     * expert, grouped gate|up, activation, grouped down, and the weighted sum of each token's k
     * outputs, plus the activation quantisations of 8-bit GEMM math (kv_moe_quant_kernels); each
     * pays what every op of the step pays for its kernels (a boundary each in a replayed graph,
     * kv_launch_overhead). */
    double kernels = 7 + kv_moe_quant_kernels(dt);
    /* A group-limited router's fused top-k (kv_moe_routing_seconds): its published time a layer,
     * run alone on the rank's own tokens before the dispatch, and its second kernel, as in the
     * step model's op. */
    double t_route = kv_moe_routing_seconds(&s->engine, m);
    if (t_route > 0) kernels += 1;
    double layer = slowest + t_route;
    r->experts = moe_layers * (layer + kv_launch_overhead(kernels, layer, hw->kernel_overhead, graph,
                                                          s->engine.graph_kernel));
    /* Dispatch and combine: each GPU sends its share of the rank's tokens (T / tp) to the k
     * experts each picked, as 16-bit hidden states. An even all-to-all moves that much through
     * every rank; with skew the busiest EP rank receives (and in the combine sends back)
     * busiest_share x EP times the mean, and the collective ends when it does. Without attention
     * DP (dp 1) every GPU of the tensor-parallel group already holds all T tokens: it runs its
     * local experts on them and the layer's tensor-parallel all-reduce, already in the step, sums
     * the outputs, so nothing is dispatched or combined (vLLM's FusedMoE dispatches only when
     * dp_size > 1; docs/cost-model.md, "Expert parallelism and attention data parallelism"). */
    if (ep > 1 && dp > 1) {
        double msg = T / tp * k * h * AB;
        r->hot_factor = fmax(1.0, r->busiest_share * ep);
        r->dispatch = kv_alltoall_time(hw, ep, msg * r->hot_factor);
        r->alltoall = 2.0 * moe_layers * r->dispatch.seconds;
        r->alltoall_bytes = 2.0 * moe_layers * r->dispatch.net_bytes;
    }
    /* Attention DP with the experts split over the whole replica (no EP): every GPU needs all
     * D ranks' tokens before the experts (all-gather of D x T hidden states) and each rank needs
     * back the sum of the G GPUs' partial expert outputs for its own tokens (reduce-scatter of
     * the same tensor). Those are the two halves of a ring all-reduce of D x T x h x 2 bytes over
     * the G GPUs (its reduce-scatter and all-gather phases), with its bytes and its steps, so
     * they are priced as that all-reduce, chosen as the engine runs it (docs/cost-model.md). */
    if (ep <= 1 && dp > 1) {
        r->gather_layer = kv_allreduce_time(hw, &s->engine, gpus, tokens * h * AB);
        r->gather = moe_layers * r->gather_layer.seconds;
    }
}

/* The part of the step for base's (tokens, graph size), from the context's table or computed
 * into it. NULL when it cannot be had (out of memory). */
static const moe_part *part_of(kv_moe_ctx *x, const kv_step_cost *base, const kv_seq_work *seqs,
                               const int *verify, int n)
{
    unsigned long h = ((unsigned long)base->tokens * 0x9e3779b1UL + (unsigned long)base->graph_batch * 0x85ebca6bUL) >> 7;
    int slot = (int)(h % PART_SLOTS);
    moe_part *p = &x->part[slot];
    if (x->key_tokens[slot] == base->tokens && x->key_graph[slot] == base->graph_batch) return p;
    memset(p, 0, sizeof *p);
    p->dense = x->has_dense ? stand_in_mlp(&x->dense, seqs, verify, n) : 0;
    p->shared = x->has_shared ? stand_in_mlp(&x->shared, seqs, verify, n) : 0;
    routed_part(x->s, (double)base->tokens, base->graph, &p->r);
    if (p->r.seconds < 0) { x->key_tokens[slot] = -1; return NULL; }
    x->key_tokens[slot] = base->tokens;
    x->key_graph[slot] = base->graph_batch;
    return p;
}

kv_moe_step kv_moe_step_of(kv_moe_ctx *x, const kv_step_cost *base, const kv_seq_work *seqs, const int *verify, int n)
{
    kv_moe_step r;
    memset(&r, 0, sizeof r);
    r.engine_seconds = base->seconds - base->gpu_seconds;
    const moe_part *p = x->s->model.experts == 0 ? NULL : part_of(x, base, seqs, verify, n);
    if (!p) { r.seconds = r.attention = base->seconds; return r; }
    double engine = r.engine_seconds;
    r = p->r;
    r.engine_seconds = engine;
    /* Everything but the MoE MLP from the step model, then the dense layers and shared experts
     * as dense MLPs of their widths over this rank's rows. */
    r.attention = base->seconds - base->op[KV_OP_MLP].seconds + p->dense + p->shared;
    r.seconds = r.attention + r.experts + r.alltoall + r.gather;
    return r;
}

kv_moe_step kv_moe_step_time(const scn_scenario *s, const kv_cache_cfg *c, scn_attention attn,
                             const kv_seq_work *seqs, int n)
{
    return kv_moe_step_time_verify(s, c, attn, seqs, NULL, n);
}

kv_moe_step kv_moe_step_time_verify(const scn_scenario *s, const kv_cache_cfg *c, scn_attention attn,
                                    const kv_seq_work *seqs, const int *verify, int n)
{
    kv_step_cost base = kv_step_time_verify(s, c, attn, seqs, verify, n);
    kv_moe_ctx *x = s->model.experts == 0 ? NULL : kv_moe_ctx_make(s);
    kv_moe_step r;
    if (x) r = kv_moe_step_of(x, &base, seqs, verify, n);
    else {
        memset(&r, 0, sizeof r);
        r.engine_seconds = base.seconds - base.gpu_seconds;
        r.seconds = r.attention = base.seconds;
    }
    kv_moe_ctx_free(x);
    return r;
}
