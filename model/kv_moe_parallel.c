/* kv_moe_parallel.c: expert parallelism and attention data parallelism (kv_moe_parallel.h). */
#include "kv_moe_parallel.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define AB 2.0   /* activation bytes (16-bit), as the all-to-all moves them */

int kv_moe_ep(const scn_scenario *s) { return s->deployment.expert_parallel > 1 ? s->deployment.expert_parallel : 1; }
int kv_moe_dp(const scn_scenario *s) { return s->deployment.attention_dp > 1 ? s->deployment.attention_dp : 1; }

bool kv_moe_parallel_on(const scn_scenario *s)
{
    return s->model.experts > 0 && (kv_moe_ep(s) > 1 || kv_moe_dp(s) > 1);
}

double kv_moe_busiest_share(int experts, int ep, double skew)
{
    if (experts <= 0 || ep <= 1) return 1;
    double total = 0, *rank = calloc((size_t)ep, sizeof *rank);
    if (!rank) return 1.0 / ep;
    for (int i = 0; i < experts; i++) {
        double p = pow(i + 1.0, -skew);
        total += p;
        rank[i % ep] += p;
    }
    double best = 0;
    for (int r = 0; r < ep; r++) best = fmax(best, rank[r]);
    free(rank);
    return best / total;
}

/* Parameters of one routed expert (gate, up, down). */
static double expert_params(const scn_model *m) { return 3.0 * m->hidden * (double)m->moe_intermediate; }

kv_moe_memory kv_moe_memory_compute(const scn_scenario *s, const kv_cache_cfg *c)
{
    const scn_model *m = &s->model;
    const scn_deployment *d = &s->deployment;
    int tp = d->tensor_parallel < 1 ? 1 : d->tensor_parallel;
    int gpus = tp * kv_moe_dp(s);
    kv_moe_memory r = {0};
    kv_weights w = kv_weights_compute(m, tp);
    double routed = m->experts > 0 ? expert_params(m) * m->experts * (m->layers - m->dense_layers) : 0;
    double routed_bytes = routed * w.bytes_per_linear;
    /* Everything but the routed experts is split over the DP rank's tp GPUs (norms replicated,
     * as kv_weights_compute has it); the routed experts over all the replica's GPUs: experts / EP
     * per rank, each split gpus / EP ways. */
    r.expert_weights = routed_bytes / gpus;
    r.weights = w.bytes_per_rank - routed_bytes / tp + r.expert_weights;
    r.kv_bytes_per_token = kv_bytes_per_token_layer_rank(m, c, tp) * m->layers;
    r.kv_budget = kv_memory_split(s, r.weights, kv_activation_bytes(m, tp, d->max_num_batched_tokens, d->max_num_seqs)).kv_budget;
    return r;
}

kv_pool kv_moe_pool_size(const scn_scenario *s, const kv_cache_cfg *c, bool paged, int block_size)
{
    kv_moe_memory mm = kv_moe_memory_compute(s, c);
    kv_pool p = {.block_size = paged ? block_size : 1, .kv_budget = mm.kv_budget};
    p.blocks = mm.kv_budget > 0 ? (long)floor(mm.kv_budget / (mm.kv_bytes_per_token * p.block_size)) : 0;
    return p;
}

/* The MLP op's time of a dense stand-in model over the same rows: `layers` layers of width I. */
static double dense_mlp_seconds(const scn_scenario *s, const kv_cache_cfg *c, scn_attention attn,
                                const kv_seq_work *seqs, int n, int layers, int width)
{
    if (layers <= 0 || width <= 0) return 0;
    scn_scenario *t = malloc(sizeof *t);
    if (!t) return 0;
    *t = *s;
    t->model.experts = t->model.experts_per_token = t->model.shared_experts = t->model.dense_layers = 0;
    t->model.layers = layers;
    t->model.sliding_layers = 0;
    t->model.intermediate = width;
    double sec = kv_step_time(t, c, attn, seqs, n).op[KV_OP_MLP].seconds;
    free(t);
    return sec;
}

kv_moe_step kv_moe_step_time(const scn_scenario *s, const kv_cache_cfg *c, scn_attention attn,
                             const kv_seq_work *seqs, int n)
{
    const scn_model *m = &s->model;
    const scn_hardware *hw = &s->hardware;
    int tp = s->deployment.tensor_parallel < 1 ? 1 : s->deployment.tensor_parallel;
    int dp = kv_moe_dp(s), ep = kv_moe_ep(s), gpus = tp * dp;
    kv_moe_step r;
    memset(&r, 0, sizeof r);
    kv_step_cost base = kv_step_time(s, c, attn, seqs, n);
    if (m->experts == 0) { r.seconds = r.attention = base.seconds; return r; }
    double T = 0;
    for (int i = 0; i < n; i++) T += (double)(seqs[i].new_tokens > 0 ? seqs[i].new_tokens : 0);
    int moe_layers = m->layers - m->dense_layers;
    /* Everything but the MoE MLP from the step model, then the dense layers and shared experts
     * as dense MLPs of their widths over this rank's rows. */
    r.attention = base.seconds - base.op[KV_OP_MLP].seconds +
                  dense_mlp_seconds(s, c, attn, seqs, n, m->dense_layers, m->intermediate) +
                  dense_mlp_seconds(s, c, attn, seqs, n, moe_layers, m->shared_experts * m->moe_intermediate);
    /* Routed experts: the DP ranks' tokens together pick k experts each; the busiest of the EP
     * ranks gets share_max of those rows, over experts/EP local experts split gpus/EP ways. */
    double k = m->experts_per_token, tokens = T * dp, split = (double)gpus / ep;
    r.busiest_share = kv_moe_busiest_share(m->experts, ep, s->deployment.expert_skew);
    r.rows_busiest = tokens * k * r.busiest_share;
    double h = m->hidden, I = m->moe_intermediate / split, wb = kv_weight_bytes_per_param(m);
    double touched = 0, total = 0;
    for (int i = 0; i < m->experts; i++) total += pow(i + 1.0, -s->deployment.expert_skew);
    for (int i = 0; i < m->experts; i += ep)   /* rank 0 holds experts 0, E, 2E, ...: the busiest */
        touched += 1 - pow(1 - pow(i + 1.0, -s->deployment.expert_skew) / total, tokens * k);
    double flops = 2.0 * r.rows_busiest * 3.0 * h * I;
    double bytes = touched * 3.0 * h * I * wb + r.rows_busiest * (2.0 * h + 6.0 * I) * AB;
    scn_dtype dt = kv_gemm_dtype(m, hw);
    double eff = kv_gemm_shape_efficiency(hw, fmax(1, r.rows_busiest / fmax(1, touched)), 2.0 * I, h, dt);
    double peak = hw->flops[dt] * hw->eff_compute * eff, bw = hw->memory_bandwidth * hw->eff_bandwidth;
    double tc = peak > 0 ? flops / peak : 0, tm = bw > 0 ? bytes / bw : 0;
    r.experts = moe_layers * (kv_roofline_combine(tc, tm) + 3 * hw->kernel_overhead);
    /* Dispatch and combine: each GPU sends its share of the rank's tokens (T / tp) to the k
     * experts each picked, as 16-bit hidden states; an all-to-all over the EP ranks. */
    if (ep > 1) {
        double msg = T / tp * k * h * AB;
        r.dispatch = kv_alltoall_time(hw, ep, msg);
        r.alltoall = 2.0 * moe_layers * r.dispatch.seconds;
        r.alltoall_bytes = 2.0 * moe_layers * r.dispatch.net_bytes;
    }
    r.seconds = r.attention + r.experts + r.alltoall;
    return r;
}
