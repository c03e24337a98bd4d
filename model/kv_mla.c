/* kv_mla.c: the absorbed MLA products an engine may keep beside the raw projections
 * (see kv_mla.h). Derivation: docs/cost-model.md, "MLA as engines cache it". */
#include "kv_mla.h"
#include "kv_model.h"

double kv_mla_absorbed_params(const scn_model *m, int tp)
{
    if (m->kv_lora_rank <= 0) return 0;
    if (tp < 1) tp = 1;
    double q_in = m->q_lora_rank > 0 ? m->q_lora_rank : m->hidden;
    double latent = (double)m->heads / tp * m->kv_lora_rank;   /* H/tp heads of r latent dims */
    return q_in * latent + latent * m->hidden;
}

double kv_mla_absorbed_bytes(const scn_scenario *s, const scn_model *m)
{
    if (!s->engine.mla_materialized || m->kv_lora_rank <= 0) return 0;
    /* vLLM requantised the products to fp8 with the projections' own scale layout when those were
     * fp8, and kept them in the activation dtype (16-bit) when they were not quantised; it
     * refused other formats, priced here as 16-bit. */
    bool fp8 = m->weight_dtype == SCN_DTYPE_FP8 && m->weight_quant != SCN_WQ_AWQ && m->weight_quant != SCN_WQ_GPTQ &&
               m->weight_quant != SCN_WQ_NVFP4;
    double b = fp8 ? kv_weight_bytes_per_param(m) : 2.0;
    return kv_mla_absorbed_params(m, s->deployment.tensor_parallel) * m->layers * b;
}

double kv_mla_decode_kernels(const scn_hardware *hw, const scn_engine *e)
{
    /* FlashMLA (vLLM's FlashMLA backend on Hopper: named, or the FA3-family profile's default)
     * runs its combine kernel on every call. FA3's MLA path combines only when it splits the keys,
     * a choice made on the device: its one kernel is counted. */
    bool flashmla = e->mla_decode == SCN_MLA_DECODE_FLASHMLA ||
                    (e->mla_decode == SCN_MLA_DECODE_AUTO && e->attn_kernel == SCN_AK_FLASH3);
    return kv_attention_family_applies(hw, e) && hw->arch == SCN_ARCH_HOPPER && flashmla ? 2 : 1;
}
