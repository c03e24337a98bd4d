/* kv_bytes.c: bytes the KV cache takes per token, per layer, per rank and per sequence.
 * Derivations: docs/cost-model.md, "KV bytes per token". */
#include "kv_model.h"

kv_cache_cfg kv_cache_cfg_make(const scn_scenario *s, scn_dtype dtype, int sink, int window)
{
    kv_cache_cfg c = {.dtype = dtype, .quant = s->options.quant[dtype], .sink = sink, .window = window,
                      .mla_expanded = s->engine.mla_expanded && s->model.kv_lora_rank > 0};
    return c;
}

double kv_elems_per_token_layer(const scn_model *m)
{
    if (m->kv_lora_rank > 0) return (double)(m->kv_lora_rank + m->qk_rope_head_dim);
    return 2.0 * m->kv_heads * m->head_dim;
}

/* Scale (and zero-point) bytes per cached element for the quantisation layout. A per-tensor
 * scale is a constant a few bytes per layer, not per token, so it counts as zero here. */
static double scale_bytes_per_elem(const scn_model *m, const kv_cache_cfg *c)
{
    if (c->dtype != SCN_DTYPE_FP8 && c->dtype != SCN_DTYPE_INT8 && c->dtype != SCN_DTYPE_INT4) return 0;
    double per_scale = scn_dtype_bytes(c->quant.scale_dtype) * (c->quant.zero_point ? 2 : 1);
    switch (c->quant.granularity) {
    case SCN_QUANT_PER_TENSOR: return 0;
    case SCN_QUANT_PER_TOKEN_HEAD: {
        /* One scale per head vector; MLA's latent is one vector per token. */
        double vec = m->kv_lora_rank > 0 ? kv_elems_per_token_layer(m) : (double)m->head_dim;
        return per_scale / vec;
    }
    case SCN_QUANT_GROUP: return per_scale / (double)c->quant.group_size;
    }
    return 0;
}

/* An expanded MLA cache (kv_cache_cfg.mla_expanded) holds, per token and layer, K of
 * qk_nope + qk_rope per head and V padded to the same size: vLLM before 0.7.1 ran MLA models
 * through its ordinary attention with one head size (docs/cost-model.md, "MLA as engines cache
 * it"). Its per-head scale vectors are that head size. */
static double mla_expanded_head(const scn_model *m) { return (double)m->qk_nope_head_dim + m->qk_rope_head_dim; }

double kv_bytes_per_token_layer(const scn_model *m, const kv_cache_cfg *c)
{
    if (c->mla_expanded && m->kv_lora_rank > 0) {
        double head = mla_expanded_head(m), per_scale = 0;
        if (c->dtype == SCN_DTYPE_FP8 || c->dtype == SCN_DTYPE_INT8 || c->dtype == SCN_DTYPE_INT4) {
            double sb = scn_dtype_bytes(c->quant.scale_dtype) * (c->quant.zero_point ? 2 : 1);
            per_scale = c->quant.granularity == SCN_QUANT_PER_TOKEN_HEAD ? sb / head
                      : c->quant.granularity == SCN_QUANT_GROUP ? sb / (double)c->quant.group_size : 0;
        }
        return 2.0 * m->kv_heads * head * (scn_dtype_bytes(c->dtype) + per_scale);
    }
    return kv_elems_per_token_layer(m) * (scn_dtype_bytes(c->dtype) + scale_bytes_per_elem(m, c));
}

int kv_heads_per_rank(const scn_model *m, int tp)
{
    /* KV heads split across ranks; with fewer KV heads than ranks each rank keeps a replica. */
    if (tp <= 1) return m->kv_heads;
    return m->kv_heads >= tp ? (m->kv_heads + tp - 1) / tp : 1;
}

double kv_bytes_per_token_layer_rank(const scn_model *m, const kv_cache_cfg *c, int tp)
{
    double all = kv_bytes_per_token_layer(m, c);
    /* MLA's latent is replicated on every rank; expanded per-head K/V split like any heads. */
    if ((m->kv_lora_rank > 0 && !c->mla_expanded) || tp <= 1) return all;
    return all * kv_heads_per_rank(m, tp) / m->kv_heads;
}

double kv_bytes_per_token(const scn_model *m, const kv_cache_cfg *c)
{
    return kv_bytes_per_token_layer(m, c) * m->layers;
}

long kv_tokens_held(const scn_model *m, const kv_cache_cfg *c, int layer_is_sliding, long tokens)
{
    long held = tokens;
    if (layer_is_sliding && m->sliding_window > 0 && held > m->sliding_window) held = m->sliding_window;
    if (c->window > 0) {
        long cap = (long)c->sink + c->window;
        if (held > cap) held = cap;
    }
    return held;
}

double kv_bytes_for_context(const scn_model *m, const kv_cache_cfg *c, int tp, long tokens)
{
    double per = kv_bytes_per_token_layer_rank(m, c, tp);
    long global = m->layers - m->sliding_layers;
    return per * ((double)global * kv_tokens_held(m, c, 0, tokens) +
                  (double)m->sliding_layers * kv_tokens_held(m, c, 1, tokens));
}
