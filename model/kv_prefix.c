/* kv_prefix.c: what a prefix-cache hit saves (vLLM-style: whole blocks only, and the last
 * prompt token is always recomputed so the step has logits to sample from).
 * Derivation: docs/cost-model.md, "Prefix caching". */
#include "kv_model.h"

kv_prefix_saving kv_prefix_saving_compute(const scn_scenario *s, const kv_cache_cfg *c,
                                          int block_size, long prompt, long hit_len)
{
    kv_prefix_saving p = {0};
    long usable = hit_len < prompt - 1 ? hit_len : prompt - 1;
    if (usable < 0) usable = 0;
    p.blocks_shared = usable / block_size;
    p.hit_tokens = p.blocks_shared * block_size;
    int tp = s->deployment.tensor_parallel;
    p.kv_bytes_saved = kv_bytes_for_context(&s->model, c, tp, p.hit_tokens);
    kv_seq_work cold = {.new_tokens = prompt, .context = 0};
    kv_seq_work warm = {.new_tokens = prompt - p.hit_tokens, .context = p.hit_tokens};
    scn_attention a = s->options.attention[0];
    kv_step_cost tc = kv_step_time(s, c, a, &cold, 1), tw = kv_step_time(s, c, a, &warm, 1);
    for (int op = 0; op < KV_OP_COUNT; op++) p.prefill_flops_saved += tc.op[op].flops - tw.op[op].flops;
    p.prefill_seconds_saved = tc.seconds - tw.seconds;
    return p;
}
