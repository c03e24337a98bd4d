/* kv_capacity.c: the KV budget left after weights, activations and the runtime, and how
 * many tokens, blocks and sequences it holds under contiguous and paged allocation.
 * Derivation: docs/cost-model.md, "Memory budget and capacity". */
#include "kv_blocks.h"
#include "kv_model.h"
#include "kv_moe_parallel.h"

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

/* A length from a floating-point mean, saturated: a mean of 1e300 tokens must not overflow the
 * conversion (undefined behaviour; clang's float-cast-overflow check catches it). */
static long to_count(double x)
{
    if (!(x > 0)) return 0;
    return x >= 9e15 ? (long)9e15 : (long)x;
}

double kv_expected_block_waste(int block_size) { return (block_size - 1) / 2.0; }

kv_capacity kv_capacity_compute(const scn_scenario *s, const kv_cache_cfg *c0, int block_size,
                                double mean_tokens)
{
    const scn_model *m = &s->model;
    const scn_deployment *d = &s->deployment;
    int tp = d->tensor_parallel;
    /* A model whose every layer is windowed keeps what a window keeps (kv_cache_fold). */
    kv_cache_cfg cf = kv_cache_fold(m, c0);
    const kv_cache_cfg *c = &cf;
    kv_capacity k = {0};
    k.device_memory = s->hardware.memory;
    k.usable = k.device_memory * d->gpu_memory_utilization;
    /* With expert parallelism a GPU holds its share of the routed experts, not all of them
     * (kv_moe_parallel.h): the budget is one DP rank's, on each of its GPUs. */
    k.weights = kv_moe_parallel_on(s) ? kv_moe_memory_compute(s, c0).weights : kv_weights_compute(m, tp).bytes_per_rank;
    k.activation = kv_activation_bytes(m, tp, d->max_num_batched_tokens, d->max_num_seqs);
    k.runtime = s->hardware.runtime_memory;
    k.kv_budget = k.usable - k.weights - k.activation - k.runtime;
    double per_layer = kv_bytes_per_token_layer_rank(m, c, tp);
    k.kv_bytes_per_token = per_layer * m->layers;
    k.block_size = block_size;
    /* Sequence sizes and reservations follow the rules the simulator uses (kv_blocks.c): the
     * mean sequence includes its shared prefix and conversation history, a contiguous sequence
     * reserves prompt + the most it may generate, and a window caps what either keeps. */
    kv_seq_size z = kv_seq_size_of(s);
    k.mean_tokens = mean_tokens > 0 ? mean_tokens : z.held;
    long positions = to_count(ceil(k.mean_tokens));
    long held = kv_seq_held(c, positions);
    long prompt = mean_tokens > 0 ? to_count(ceil(mean_tokens)) - 1 : to_count(ceil(z.prompt));
    long output = mean_tokens > 0 ? 1 : to_count(ceil(z.output));
    k.reserve_contiguous = kv_contiguous_reserve(s, c, prompt, output, prompt);
    /* Windowed layers of a hybrid model keep only their window (kv_seq_layer_units), so a
     * sequence's KV is counted per layer group, in layer-blocks or layer-tokens. */
    kv_groups g = kv_groups_of(m);
    double units_p = kv_seq_layer_units(&g, block_size, true, held, positions);
    double units_c = kv_seq_layer_units(&g, 1, false, k.reserve_contiguous, k.reserve_contiguous);
    k.seq_bytes_paged = units_p * block_size * per_layer;
    k.seq_bytes_contiguous = units_c * per_layer;
    if (!(k.kv_budget > 0) || !(k.kv_bytes_per_token > 0)) return k;
    /* Counts saturate rather than overflow when a budget is absurdly large. */
    double tokens = floor(k.kv_budget / k.kv_bytes_per_token), blocks = floor(tokens / block_size);
    k.capacity_tokens = tokens < 9e15 ? (long)tokens : (long)9e15;
    k.capacity_blocks = blocks < 9e15 ? (long)blocks : (long)9e15;
    long per_seq_blocks = (held + block_size - 1) / block_size;
    if (g.win == 0) {
        k.max_seqs_contiguous = k.reserve_contiguous > 0 ? k.capacity_tokens / k.reserve_contiguous : 0;
        k.max_seqs_paged = per_seq_blocks > 0 ? k.capacity_blocks / per_seq_blocks : 0;
    } else {
        /* The pool of B blocks of every layer holds B * layers layer-blocks (the simulator's
         * block manager counts the same). */
        double L = m->layers;
        k.max_seqs_contiguous = units_c > 0 ? (long)floor((double)k.capacity_tokens * L / units_c) : 0;
        k.max_seqs_paged = units_p > 0 ? (long)floor((double)k.capacity_blocks * L / units_p) : 0;
    }
    k.waste_contiguous = k.reserve_contiguous > held ? 1.0 - (double)held / (double)k.reserve_contiguous : 0.0;
    /* Expected last-block waste over lengths spread uniformly modulo the block size. */
    double w = kv_expected_block_waste(block_size);
    k.waste_paged = w / ((double)held + w);
    return k;
}
