/* kv_capacity.c: the KV budget left after weights, activations and the runtime, and how
 * many tokens, blocks and sequences it holds under contiguous and paged allocation.
 * Derivation: docs/cost-model.md, "Memory budget and capacity". */
#include "kv_blocks.h"
#include "kv_model.h"
#include "kv_moe_parallel.h"
#include "kv_mla.h"
#include "kv_spec.h"

#include <math.h>

#define ACT_BYTES 2.0     /* activations are kept in 16-bit */
/* Bytes per logit in the sampler's working set: the LM head's 16-bit output, the fp32 copy the
 * sampler works on and one fp32 tensor of the same shape (softmax probabilities for top-k/top-p). */
#define SAMPLER_BYTES (2.0 + 4.0 + 4.0)

double kv_activation_bytes(const scn_model *m, int tp, long tokens, long seqs)
{
    return kv_activation_bytes_chunked(m, tp, tokens, seqs, 0);
}

double kv_activation_bytes_chunked(const scn_model *m, int tp, long tokens, long seqs, long moe_chunk)
{
    /* The sampler over one token's logits per sequence: engines gather the vocabulary shards, so
     * every rank holds the whole vocabulary. */
    double sampler = (double)seqs * m->vocab * SAMPLER_BYTES;
    double inter = m->intermediate, moe_out = 0;
    if (m->experts > 0) {
        double k = m->experts_per_token + m->shared_experts;
        double moe = k * m->moe_intermediate;
        inter = m->dense_layers > 0 && m->intermediate > moe ? m->intermediate : moe;
        /* A fused MoE kernel keeps each token's k expert outputs (k x h) until it sums them. */
        moe_out = m->experts_per_token * (double)m->hidden;
    }
    /* Live at the MLP: the residual stream and normed input (2h), the fused gate|up output
     * (2I/tp) and the activated product (I/tp); plus the attention output and QKV (2h). */
    double T = (double)tokens;
    if (m->experts == 0 || moe_chunk <= 0 || tokens <= moe_chunk)
        return T * (4.0 * m->hidden + 3.0 * inter / tp + moe_out) * ACT_BYTES + sampler;
    /* A fused MoE kernel that works through the tokens in chunks (vLLM's fused_experts allocates
     * its gate|up, activation and expert-output caches for min(tokens, chunk) rows) holds the
     * routed experts' part for one chunk only: the MoE layer's peak is the stream and the shared
     * experts over every token plus the routed part over a chunk, and a dense layer's (its own
     * MLP over every token) may then be the larger (docs/cost-model.md, "Memory budget and
     * capacity", "A fused MoE kernel that works in chunks"). */
    double C = (double)moe_chunk, stream = 4.0 * m->hidden;
    double routed = 3.0 * m->experts_per_token * (double)m->moe_intermediate / tp + moe_out;
    double moe_layer = T * (stream + 3.0 * m->shared_experts * (double)m->moe_intermediate / tp) + C * routed;
    double dense_layer = m->dense_layers > 0 ? T * (stream + 3.0 * m->intermediate / tp) : 0;
    return (moe_layer > dense_layer ? moe_layer : dense_layer) * ACT_BYTES + sampler;
}

double kv_held_allreduce_bytes(const scn_scenario *s)
{
    const scn_engine *e = &s->engine;
    const scn_deployment *d = &s->deployment;
    const scn_model *m = &s->model;
    if (!e->mem_held_allreduce || d->tensor_parallel < 2) return 0;
    /* One message per all-reduce of the profile run: its max_num_batched_tokens rows of the
     * hidden state, in 16-bit. A custom all-reduce copies a message it takes into its own
     * registered buffer, so only messages beyond it go through torch.distributed. */
    double msg = (double)d->max_num_batched_tokens * m->hidden * ACT_BYTES;
    if (e->allreduce != SCN_AR_NCCL && msg <= e->custom_max) return 0;
    /* Two per layer (attention output, MLP output) and the vocabulary-parallel embedding's. */
    return (2.0 * m->layers + 1) * msg;
}

double kv_profile_activation_bytes(const scn_scenario *s, const scn_model *m, int tp, long tokens, long seqs,
                                   long moe_chunk)
{
    int b = s->engine.mem_sampler_bytes;
    if (b <= 0) return kv_activation_bytes_chunked(m, tp, tokens, seqs, moe_chunk);
    /* The profile run samples after the forward pass returns: the forward's activations are
     * freed by then and only its output, the hidden states of every token, is still held (vLLM
     * V0's profile_run: the model runner keeps hidden_states while it samples). So the run peaks
     * at the larger of the forward pass and the sampler over S x V logits at `b` bytes each. */
    double forward = kv_activation_bytes_chunked(m, tp, tokens, 0, moe_chunk);
    double sampler = (double)tokens * m->hidden * ACT_BYTES + (double)seqs * m->vocab * b;
    return forward > sampler ? forward : sampler;
}

kv_mem_split kv_memory_split(const scn_scenario *s, double weights, double activation)
{
    const scn_engine *e = &s->engine;
    const scn_hardware *hw = &s->hardware;
    /* An engine sizes its budget from the total the CUDA runtime reports (memory less what the
     * driver keeps, memory_reserved); kvplan's own rule keeps the device's memory. */
    double dev = e->mem_given ? scn_hw_cuda_memory(hw) : hw->memory;
    kv_mem_split r = {.fraction = scn_engine_mem_fraction(e, &s->deployment, hw), .base = dev,
                      .activation = activation, .runtime = hw->runtime_memory};
    /* A profiler that reads the device's free memory sees the all-reduce buffers the allocator
     * still holds for the NCCL stream at the end of the profile run: part of its peak. */
    if (e->mem_given && (e->mem_budget == SCN_MEM_TOTAL || e->mem_budget == SCN_MEM_DEVICE))
        r.activation += kv_held_allreduce_bytes(s);
    activation = r.activation;
    if (!e->mem_given) {
        /* kvplan's own rule: the fraction of device memory holds everything. */
        r.usable = r.fraction * r.base;
        r.kv_budget = r.usable - weights - activation - r.runtime;
        return r;
    }
    switch (e->mem_budget) {
    case SCN_MEM_TOTAL:
        /* vLLM: fraction x total; the profile run's peak and the non-torch memory that appeared
         * since start-up come out of it. The CUDA context (there before the baseline) and the
         * CUDA graphs (captured after the KV cache) fall in the remaining 1 - fraction. */
        r.runtime = e->mem_non_torch;
        r.usable = r.fraction * r.base;
        r.kv_budget = r.usable - weights - activation - r.runtime;
        break;
    case SCN_MEM_DEVICE:
        /* vLLM 0.2.5 to 0.3.0: total - free after the profile run is what the engine holds, so
         * the CUDA context counts as well as the non-torch memory (vLLM PR #2031); from 0.3.1
         * the baseline is the memory free at start-up (PR #2863), the context outside. */
        r.runtime = hw->runtime_memory + e->mem_non_torch;
        r.usable = r.fraction * r.base;
        r.kv_budget = r.usable - weights - activation - r.runtime;
        break;
    case SCN_MEM_STATIC:
        /* SGLang: fraction x the memory free at start-up holds the weights and the KV pool;
         * activations and CUDA graphs use the rest. */
        r.base = dev - hw->runtime_memory;
        r.usable = r.fraction * r.base;
        r.activation = 0;
        r.runtime = e->mem_non_torch;
        r.kv_budget = r.usable - weights - r.runtime;
        break;
    case SCN_MEM_FREE:
        /* TensorRT-LLM: fraction x what is still free after the runtime, the weights and the
         * activation buffers. */
        r.base = dev - hw->runtime_memory - e->mem_non_torch - weights - activation;
        r.runtime = hw->runtime_memory + e->mem_non_torch;
        r.usable = r.fraction * (r.base > 0 ? r.base : 0);
        r.kv_budget = r.base > 0 ? r.usable : r.base;
        break;
    }
    return r;
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
    return kv_capacity_spec(s, c0, block_size, mean_tokens, NULL);
}

kv_capacity kv_capacity_spec(const scn_scenario *s, const kv_cache_cfg *c0, int block_size, double mean_tokens,
                             const scn_spec *sp)
{
    const scn_model *m = &s->model;
    const scn_deployment *d = &s->deployment;
    int tp = d->tensor_parallel;
    /* A model whose every layer is windowed keeps what a window keeps (kv_cache_fold). */
    kv_cache_cfg cf = kv_cache_fold(m, c0);
    const kv_cache_cfg *c = &cf;
    kv_capacity k = {0};
    k.device_memory = s->hardware.memory;
    /* With expert parallelism a GPU holds its share of the routed experts, not all of them
     * (kv_moe_parallel.h): the budget is one DP rank's, on each of its GPUs. */
    k.weights = kv_moe_parallel_on(s) ? kv_moe_memory_compute(s, c0).weights
                                      : kv_weights_compute(m, tp).bytes_per_rank + kv_mla_absorbed_bytes(s, m) +
                                            kv_weights_engine_extra(s);
    kv_mem_split ms = kv_memory_split(s, k.weights, kv_profile_activation_bytes(s, m, tp, d->max_num_batched_tokens, d->max_num_seqs,
                                                                                s->engine.mem_moe_chunk));
    k.usable = ms.usable;
    k.activation = ms.activation;
    k.runtime = ms.runtime;
    k.kv_budget = ms.kv_budget;
    /* A proposer (docs/cost-model.md, "Speculative decoding", Memory): its weights, k more fp32
     * logit rows per sequence at max_num_seqs, and its KV for every token the target keeps. */
    double prop_tok = 0;
    if (sp) {
        double pw = kv_spec_weight_bytes(s, sp);
        double logits = (double)sp->k * d->max_num_seqs * m->vocab / tp * 4.0;
        k.weights += pw;
        k.activation += logits;
        k.kv_budget -= pw + logits;
        prop_tok = kv_spec_kv_bytes_per_token(s, c0, sp);
    }
    double per_layer = kv_bytes_per_token_layer_rank(m, c, tp);
    k.kv_bytes_per_token = per_layer * m->layers + prop_tok;
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
    long per_seq_blocks = (held + block_size - 1) / block_size;
    k.seq_bytes_paged = units_p * block_size * per_layer + (double)per_seq_blocks * block_size * prop_tok;
    k.seq_bytes_contiguous = units_c * per_layer + (double)k.reserve_contiguous * prop_tok;
    if (!(k.kv_budget > 0) || !(k.kv_bytes_per_token > 0)) return k;
    /* Counts saturate rather than overflow when a budget is absurdly large. */
    double tokens = floor(k.kv_budget / k.kv_bytes_per_token), blocks = floor(tokens / block_size);
    k.capacity_tokens = tokens < 9e15 ? (long)tokens : (long)9e15;
    k.capacity_blocks = blocks < 9e15 ? (long)blocks : (long)9e15;
    if (g.win == 0) {
        k.max_seqs_contiguous = k.reserve_contiguous > 0 ? k.capacity_tokens / k.reserve_contiguous : 0;
        k.max_seqs_paged = per_seq_blocks > 0 ? k.capacity_blocks / per_seq_blocks : 0;
    } else if (prop_tok > 0) {
        /* A windowed target with a proposer: whole sequences of the budget. */
        k.max_seqs_contiguous = k.seq_bytes_contiguous > 0 ? (long)fmin(9e15, floor(k.kv_budget / k.seq_bytes_contiguous)) : 0;
        k.max_seqs_paged = k.seq_bytes_paged > 0 ? (long)fmin(9e15, floor(k.kv_budget / k.seq_bytes_paged)) : 0;
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
