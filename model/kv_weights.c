/* kv_weights.c: parameter counts and weight bytes, dense and MoE, sharded by tensor
 * parallelism. Derivation: docs/cost-model.md, "Weights". */
#include "kv_model.h"

#include <math.h>

/* Attention parameters of one layer. */
static double attn_params(const scn_model *m)
{
    double h = m->hidden, H = m->heads;
    if (m->kv_lora_rank > 0) {
        double qk = m->qk_nope_head_dim + m->qk_rope_head_dim;
        double q = m->q_lora_rank > 0 ? h * m->q_lora_rank + m->q_lora_rank + (double)m->q_lora_rank * H * qk
                                      : h * H * qk;
        double kv_a = h * (m->kv_lora_rank + m->qk_rope_head_dim) + m->kv_lora_rank; /* + its norm */
        double kv_b = (double)m->kv_lora_rank * H * (m->qk_nope_head_dim + m->v_head_dim);
        double o = H * m->v_head_dim * h;
        return q + kv_a + kv_b + o;
    }
    double q = H * m->head_dim, kv = (double)m->kv_heads * m->head_dim;
    double p = h * (q + 2 * kv) + q * h;
    if (m->attention_bias) p += q + 2 * kv;
    return p;
}

/* Gated MLP (gate, up, down) of width `inter`. */
static double mlp_params(const scn_model *m, double inter) { return 3.0 * m->hidden * inter; }

kv_weights kv_weights_compute(const scn_model *m, int tp)
{
    kv_weights w = {0};
    double h = m->hidden;
    w.params_embedding = (double)m->vocab * h * (m->tie_embeddings ? 1 : 2);
    w.params_attention = attn_params(m) * m->layers;
    w.params_norm = (double)m->norms_per_layer * h * m->layers + h;  /* + the final norm */
    double mlp_active;
    if (m->experts > 0) {
        int moe_layers = m->layers - m->dense_layers;
        double expert = mlp_params(m, m->moe_intermediate);
        double router = h * m->experts;
        w.params_mlp = m->dense_layers * mlp_params(m, m->intermediate) +
                       moe_layers * (expert * (m->experts + m->shared_experts) + router);
        mlp_active = m->dense_layers * mlp_params(m, m->intermediate) +
                     moe_layers * (expert * (m->experts_per_token + m->shared_experts) + router);
    } else {
        w.params_mlp = mlp_params(m, m->intermediate) * m->layers;
        mlp_active = w.params_mlp;
    }
    w.params_total = w.params_embedding + w.params_attention + w.params_norm + w.params_mlp;
    w.params_active = w.params_embedding + w.params_attention + w.params_norm + mlp_active;
    /* Quantised checkpoints keep the embedding, LM head, norms and MoE routers in 16-bit; an
     * experts-only checkpoint (gpt-oss's MXFP4) its attention and dense MLPs as well. */
    double router = m->experts > 0 ? (double)(m->layers - m->dense_layers) * h * m->experts : 0;
    w.params_linear = w.params_total - w.params_embedding - w.params_norm - router;
    if (m->quant_experts_only && m->experts > 0)
        w.params_linear = (double)(m->layers - m->dense_layers) * mlp_params(m, m->moe_intermediate) *
                          (m->experts + m->shared_experts);
    /* An MLP-only checkpoint (Meta's fp8_mixed Llama-3.1-405B-FP8) keeps attention 16-bit, and
     * the MLPs of its first and last `unquantized_end_layers` layers as well. */
    if (m->quant_mlp_only && m->experts == 0)
        w.params_linear = mlp_params(m, m->intermediate) * (m->layers - 2.0 * m->unquantized_end_layers);
    w.bytes_per_linear = kv_weight_bytes_per_param(m);
    w.bytes_per_other = m->weight_quant == SCN_WQ_NONE ? scn_dtype_bytes(m->weight_dtype) : 2.0;
    w.bytes_total = w.params_linear * w.bytes_per_linear + (w.params_total - w.params_linear) * w.bytes_per_other;
    /* Norms are replicated; everything else (embedding and LM head by vocabulary) is split. */
    if (tp < 1) tp = 1;
    w.bytes_per_rank = (w.bytes_total - w.params_norm * w.bytes_per_other) / tp + w.params_norm * w.bytes_per_other;
    return w;
}

double kv_weight_bytes_per_param(const scn_model *m)
{
    double b = scn_dtype_bytes(m->weight_dtype), g = m->weight_group > 0 ? m->weight_group : 128;
    switch (m->weight_quant) {
    case SCN_WQ_NONE:
    case SCN_WQ_PER_TENSOR: return b;                     /* one scale per tensor: a few bytes */
    case SCN_WQ_BLOCK: return b + 4.0 / (g * g);           /* an fp32 scale per g x g block */
    case SCN_WQ_PER_CHANNEL: return b + 4.0 / m->hidden;   /* an fp32 scale per output row of ~hidden inputs */
    case SCN_WQ_AWQ:
    case SCN_WQ_GPTQ: return b + (2.0 + 0.5) / g;         /* fp16 scale + packed 4-bit zero per group */
    case SCN_WQ_NVFP4: return b + 1.0 / g;                /* an fp8 (e4m3) scale per 16 elements */
    case SCN_WQ_MXFP4: return b + 1.0 / g;                /* an 8-bit (e8m0) scale per 32 elements */
    case SCN_WQ_COUNT: break;
    }
    return b;
}

scn_dtype kv_gemm_dtype(const scn_model *m, const scn_hardware *hw)
{
    scn_dtype d = m->weight_dtype;
    switch (m->weight_quant) {
    case SCN_WQ_NONE: return hw->flops[d] > 0 ? d : SCN_DTYPE_BF16;
    case SCN_WQ_AWQ:
    case SCN_WQ_GPTQ: return SCN_DTYPE_BF16;              /* W4A16: dequantised into 16-bit MMA */
    default: return hw->flops[d] > 0 ? d : SCN_DTYPE_BF16; /* fp8/int8/fp4 math, or W8A16/W4A16 */
    }
}

void kv_model_set_wformat(scn_model *m, const scn_wformat *f)
{
    m->weight_dtype = f->dtype;
    m->weight_quant = f->quant;
    m->weight_group = f->group_size;
}

static double round_up(double x, double to) { return ceil(x / to) * to; }

double kv_weights_engine_extra(const scn_scenario *s)
{
    const scn_model *m = &s->model;
    int tp = s->deployment.tensor_parallel < 1 ? 1 : s->deployment.tensor_parallel;
    /* An engine that shards only the layers (`lm_head: replicated`, gpt-fast) keeps the whole
     * embedding and LM head on every rank: the (tp - 1)/tp of them a split would have saved. */
    double replicated = s->engine.lm_head_replicated && tp > 1
                            ? kv_weights_compute(m, 1).params_embedding * kv_weights_compute(m, 1).bytes_per_other * (tp - 1.0) / tp
                            : 0;
    /* MXFP4 experts on a GPU without fp4 math, repacked for Marlin: vLLM pads each rank's expert
     * width to a multiple of 128 and the hidden size to a multiple of 256 (the MoE Marlin kernel
     * needs n % 256 and k % 128 of both GEMMs), keeping 4-bit values and one scale byte per 32.
     * Derivation: docs/cost-model.md, "MXFP4 experts as engines store them". */
    if (m->weight_quant != SCN_WQ_MXFP4 || m->experts <= 0 || s->engine.mxfp4_layout != SCN_MX_MARLIN ||
        s->hardware.flops[SCN_DTYPE_FP4] > 0)
        return replicated;
    double I = (double)m->moe_intermediate / tp, h = m->hidden;
    double per_expert = 3.0 * (round_up(I, 128) * round_up(h, 256) - I * h);
    return replicated + per_expert * (m->experts + m->shared_experts) * (m->layers - m->dense_layers) * kv_weight_bytes_per_param(m);
}
