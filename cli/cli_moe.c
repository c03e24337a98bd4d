/* cli_moe.c: what `memory` and `cost` add for expert parallelism and attention data parallelism
 * (docs/cost-model.md, "Expert parallelism and attention data parallelism"). */
#include "cli.h"
#include "cli_moe.h"
#include "../model/kv_moe_parallel.h"

#include <stdlib.h>

void cli_moe_memory(out_doc *d, const scn_scenario *s, const kv_cache_cfg *c, int block_size)
{
    if (!kv_moe_parallel_on(s)) return;
    kv_moe_memory mm = kv_moe_memory_compute(s, c);
    kv_pool p = kv_moe_pool_size(s, c, true, block_size);
    out_section(d, "moe_parallel", "Expert parallelism and attention data parallelism (per GPU)");
    out_kv_num(d, "expert_parallel", "expert-parallel ranks", kv_moe_ep(s), OUT_INT);
    out_kv_num(d, "attention_data_parallel", "attention DP ranks", kv_moe_dp(s), OUT_INT);
    out_kv_num(d, "gpus_per_replica", "GPUs per replica", (double)s->deployment.tensor_parallel * kv_moe_dp(s), OUT_INT);
    out_kv_num(d, "weight_bytes_per_gpu", "weights per GPU", mm.weights, OUT_BYTES);
    out_kv_num(d, "expert_weight_bytes_per_gpu", "of which routed experts", mm.expert_weights, OUT_BYTES);
    out_kv_num(d, "kv_bytes_per_token_per_dp_rank", "KV/token per DP rank (per GPU)", mm.kv_bytes_per_token, OUT_BYTES);
    const scn_model *m = &s->model;
    if (m->kv_lora_rank > 0) {
        /* MLA caches the latent and the shared rope key once per layer per token, whole on every
         * GPU of the DP rank (docs/cost-model.md, "MLA"). */
        double el = scn_dtype_bytes(c->dtype) * m->layers;
        out_kv_num(d, "kv_latent_bytes_per_token", "of which MLA latent (kv_lora_rank x layers)", el * m->kv_lora_rank,
                   OUT_BYTES);
        out_kv_num(d, "kv_rope_bytes_per_token", "of which rope key (qk_rope_head_dim x layers)", el * m->qk_rope_head_dim,
                   OUT_BYTES);
    }
    cli_kv_budget(d, mm.kv_budget, "kv_budget_bytes_per_gpu", "KV budget per GPU", "kv_budget_per_gpu",
                  "kv_shortfall_bytes_per_gpu");
    out_kv_num(d, "blocks_per_dp_rank", "paged blocks per DP rank", (double)p.blocks, OUT_INT);
    out_note(d, "Each attention-DP rank holds its own sequences and KV pool; the memory and KV tables above are one "
                "DP rank's, with this GPU's share of the routed experts.");
}

void cli_moe_cost(out_doc *d, const scn_scenario *s, const kv_cache_cfg *c, scn_attention attn, long batch,
                  long context, long prefill, long cached)
{
    if (!kv_moe_parallel_on(s)) return;
    int n = (int)batch + (prefill ? 1 : 0);
    kv_seq_work *w = calloc((size_t)(n > 0 ? n : 1), sizeof *w);
    if (!w) return;
    for (int i = 0; i < batch; i++) w[i] = (kv_seq_work){1, context};
    if (prefill) w[n - 1] = (kv_seq_work){prefill, cached};
    kv_moe_step st = kv_moe_step_time(s, c, attn, w, n);
    free(w);
    out_section(d, "moe_parallel", "Expert parallelism and attention data parallelism (one DP rank's step)");
    out_kv_num(d, "expert_parallel", "expert-parallel ranks", kv_moe_ep(s), OUT_INT);
    out_kv_num(d, "attention_data_parallel", "attention DP ranks", kv_moe_dp(s), OUT_INT);
    out_kv_num(d, "step_seconds", "step time", st.seconds, OUT_SECONDS);
    out_kv_num(d, "attention_seconds", "attention and the rest", st.attention, OUT_SECONDS);
    out_kv_num(d, "expert_seconds", "routed experts (busiest rank)", st.experts, OUT_SECONDS);
    out_kv_num(d, "alltoall_seconds", "all-to-all (dispatch + combine)", st.alltoall, OUT_SECONDS);
    out_kv_num(d, "alltoall_share", "all-to-all share of the step", st.seconds > 0 ? st.alltoall / st.seconds : 0, OUT_FRAC);
    out_kv_num(d, "alltoall_bytes", "all-to-all bytes, busiest EP rank", st.alltoall_bytes, OUT_BYTES);
    out_kv_num(d, "alltoall_hot_factor", "busiest rank's bytes over the mean", st.hot_factor, OUT_NUM);
    out_kv_num(d, "gather_seconds", "all-gather + reduce-scatter (DP without EP)", st.gather, OUT_SECONDS);
    out_kv_num(d, "busiest_share", "busiest expert rank's share", st.busiest_share, OUT_FRAC);
    out_kv_num(d, "touched_busiest", "experts the busiest rank touches a layer (expected max)", st.touched_busiest, OUT_NUM);
    out_note(d, "Every DP rank is taken to run a batch like this one; the all-to-all joins them each MoE layer, and "
                "the busiest expert rank (expert_skew) sets the expert phase and the all-to-all's bytes. The op table above is the "
                "unsplit step this one starts from.");
}
