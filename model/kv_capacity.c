/* kv_capacity.c: the KV budget left after weights, activations and the runtime, and how
 * many tokens, blocks and sequences it holds under contiguous and paged allocation.
 * Derivation: docs/cost-model.md, "Memory budget and capacity". */
#include "kv_model.h"

#include <math.h>

#define ACT_BYTES 2.0     /* activations are kept in 16-bit */
#define LOGIT_BYTES 4.0   /* logits are materialised in fp32 for sampling */

double kv_activation_bytes(const scn_model *m, int tp, long tokens, long seqs)
{
    double inter = m->intermediate;
    if (m->experts > 0) {
        double moe = (double)(m->experts_per_token + m->shared_experts) * m->moe_intermediate;
        inter = m->dense_layers > 0 && m->intermediate > moe ? m->intermediate : moe;
    }
    /* Live at the MLP: the residual stream and normed input (2h), the fused gate|up output
     * (2I/tp) and the activated product (I/tp); plus the attention output and QKV (2h).
     * Then the logits for one token per sequence. */
    double per_token = (4.0 * m->hidden + 3.0 * inter / tp) * ACT_BYTES;
    return (double)tokens * per_token + (double)seqs * m->vocab / tp * LOGIT_BYTES;
}

/* A count from a floating-point quotient, saturated: a budget of exabytes over a tiny per-token
 * cost must print as the largest count, not wrap (a float-to-integer overflow is undefined). */
static long to_count(double x)
{
    if (!(x > 0)) return 0;
    return x >= 9.2e18 ? 9200000000000000000L : (long)x;
}

double kv_expected_block_waste(int block_size) { return (block_size - 1) / 2.0; }

/* Bytes one sequence of `tokens` occupies when every layer's KV is rounded up to whole blocks. */
static double paged_seq_bytes(const scn_model *m, const kv_cache_cfg *c, int tp, int bs, double tokens)
{
    double per = kv_bytes_per_token_layer_rank(m, c, tp);
    long t = to_count(ceil(tokens));
    long g = kv_tokens_held(m, c, 0, t), l = kv_tokens_held(m, c, 1, t);
    double gb = ceil((double)g / bs) * bs, lb = ceil((double)l / bs) * bs;
    return per * ((double)(m->layers - m->sliding_layers) * gb + (double)m->sliding_layers * lb);
}

kv_capacity kv_capacity_compute(const scn_scenario *s, const kv_cache_cfg *c, int block_size,
                                double mean_tokens)
{
    const scn_model *m = &s->model;
    const scn_deployment *d = &s->deployment;
    int tp = d->tensor_parallel;
    kv_capacity k = {0};
    k.device_memory = s->hardware.memory;
    k.usable = k.device_memory * d->gpu_memory_utilization;
    k.weights = kv_weights_compute(m, tp).bytes_per_rank;
    k.activation = kv_activation_bytes(m, tp, d->max_num_batched_tokens, d->max_num_seqs);
    k.runtime = s->hardware.runtime_memory;
    k.kv_budget = k.usable - k.weights - k.activation - k.runtime;
    k.kv_bytes_per_token = kv_bytes_per_token_layer_rank(m, c, tp) * m->layers;
    k.block_size = block_size;
    k.mean_tokens = mean_tokens > 0 ? mean_tokens : s->workload.prompt.mean + s->workload.output.mean;
    /* A trace's lengths are not known before it is read: assume sequences of max_model_len,
     * the bound the engine enforces (docs/cost-model.md). */
    if (!(k.mean_tokens > 0)) k.mean_tokens = d->max_model_len;
    if (k.kv_budget <= 0) return k;
    k.capacity_tokens = to_count(floor(k.kv_budget / k.kv_bytes_per_token));
    k.capacity_blocks = to_count(floor(k.kv_budget / (k.kv_bytes_per_token * block_size)));
    double reserve = kv_bytes_for_context(m, c, tp, d->max_model_len);
    double used = kv_bytes_for_context(m, c, tp, to_count(ceil(k.mean_tokens)));
    k.max_seqs_contiguous = to_count(floor(k.kv_budget / reserve));
    k.max_seqs_paged = to_count(floor(k.kv_budget / paged_seq_bytes(m, c, tp, block_size, k.mean_tokens)));
    k.waste_contiguous = reserve > used ? 1.0 - used / reserve : 0.0;
    /* Expected last-block waste over lengths spread uniformly modulo the block size. */
    double w = kv_expected_block_waste(block_size);
    k.waste_paged = w / (k.mean_tokens + w);
    return k;
}
