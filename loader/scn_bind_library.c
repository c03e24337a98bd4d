/* scn_bind_library.c: binds and validates library entries: a model description (library file, inline mapping,
 * or a translated Hugging Face config). Field meanings: docs/scenarios.md, "model". */
#include "scn_bind.h"

#include <math.h>
#include <stdlib.h>

#include <stdio.h>
#include <string.h>

#define BIG 100000000L

static const char *const MODEL_KEYS[] = {
    "name", "source", "extends", "layers", "hidden", "heads", "kv_heads", "head_dim",
    "intermediate", "vocab", "tie_embeddings", "attention_bias", "norms_per_layer",
    "max_position", "weight_dtype", "sliding_window", "sliding_layers", "experts",
    "experts_per_token", "moe_intermediate", "shared_experts", "dense_layers", "expert_groups", "kv_lora_rank",
    "q_lora_rank", "qk_rope_head_dim", "qk_nope_head_dim", "v_head_dim", "weight_quant", "weight_group", "mtp_layers",
    "quantized_layers", "unquantized_end_layers", "chat_template", NULL};
static const char *const CHAT_KEYS[] = {"prefix", "suffix", "bos", NULL};
static const char *const WQUANTS[] = {"none", "per_tensor", "block", "per_channel", "awq", "gptq", "nvfp4", "mxfp4", NULL};
static const char *const QLAYERS[] = {"all", "experts", "mlp", NULL};

static int invalid(scn_ctx *c, const scn_node *at, const char *path, const char *key, const char *msg)
{
    char full[256];
    const scn_node *v = scn_map_get(at, key);
    scn_fail(c->err, SCN_E_DATA, v ? v : at, scn_path_join(full, sizeof full, path, key), "%s", msg);
    return -1;
}

int scn_bind_model(scn_ctx *c, const scn_node *m, const char *path, scn_model *o)
{
    if (scn_expect_map(c, m, path) || scn_check_keys(c, m, path, MODEL_KEYS)) return -1;
    static const char *const req[] = {"layers", "hidden", "heads", "intermediate", "vocab", "max_position", NULL};
    for (int i = 0; req[i]; i++)
        if (scn_require(c, m, path, req[i])) return -1;
    memset(o, 0, sizeof *o);
    snprintf(o->source, sizeof o->source, "%s", m->file ? m->file : "");
    o->norms_per_layer = 2;
    o->weight_dtype = SCN_DTYPE_BF16;
    if (scn_get_str(c, m, path, "name", o->name, sizeof o->name) ||
        scn_get_int(c, m, path, "layers", 1, 100000, &o->layers) ||
        scn_get_int(c, m, path, "hidden", 1, BIG, &o->hidden) ||
        scn_get_int(c, m, path, "heads", 1, 100000, &o->heads) ||
        scn_get_int(c, m, path, "intermediate", 1, BIG, &o->intermediate) ||
        scn_get_int(c, m, path, "vocab", 1, BIG, &o->vocab) ||
        scn_get_int(c, m, path, "max_position", 1, BIG, &o->max_position))
        return -1;
    o->kv_heads = o->heads;
    if (scn_get_int(c, m, path, "kv_heads", 1, 100000, &o->kv_heads)) return -1;
    if (!scn_has(m, "head_dim") && o->hidden % o->heads)
        return invalid(c, m, path, "head_dim", "missing: hidden is not a multiple of heads, so head_dim must be given");
    o->head_dim = o->hidden / o->heads;
    if (scn_get_int(c, m, path, "head_dim", 1, 65536, &o->head_dim) ||
        scn_get_bool(c, m, path, "tie_embeddings", &o->tie_embeddings) ||
        scn_get_bool(c, m, path, "attention_bias", &o->attention_bias) ||
        scn_get_int(c, m, path, "norms_per_layer", 0, 16, &o->norms_per_layer) ||
        scn_get_dtype(c, m, path, "weight_dtype", &o->weight_dtype) ||
        scn_get_int(c, m, path, "sliding_window", 1, BIG, &o->sliding_window) ||
        scn_get_int(c, m, path, "experts", 1, 100000, &o->experts) ||
        scn_get_int(c, m, path, "experts_per_token", 1, 100000, &o->experts_per_token) ||
        scn_get_int(c, m, path, "moe_intermediate", 1, BIG, &o->moe_intermediate) ||
        scn_get_int(c, m, path, "shared_experts", 0, 1000, &o->shared_experts) ||
        scn_get_int(c, m, path, "dense_layers", 0, 100000, &o->dense_layers) ||
        scn_get_int(c, m, path, "expert_groups", 0, 100000, &o->expert_groups) ||
        scn_get_int(c, m, path, "kv_lora_rank", 1, BIG, &o->kv_lora_rank) ||
        scn_get_int(c, m, path, "q_lora_rank", 0, BIG, &o->q_lora_rank) ||
        scn_get_int(c, m, path, "qk_rope_head_dim", 1, 65536, &o->qk_rope_head_dim) ||
        scn_get_int(c, m, path, "qk_nope_head_dim", 1, 65536, &o->qk_nope_head_dim) ||
        scn_get_int(c, m, path, "v_head_dim", 1, 65536, &o->v_head_dim) ||
        scn_get_int(c, m, path, "mtp_layers", 0, 64, &o->mtp_layers))
        return -1;
    if (o->heads % o->kv_heads)
        return invalid(c, m, path, "kv_heads", "heads must be a multiple of kv_heads");
    /* The weight layout defaults to what checkpoints of that dtype use (docs/cost-model.md,
     * "Quantised weights"). */
    static const scn_wquant DEF_Q[SCN_DTYPE_COUNT] = {SCN_WQ_NONE, SCN_WQ_NONE, SCN_WQ_NONE, SCN_WQ_PER_TENSOR,
                                                     SCN_WQ_PER_CHANNEL, SCN_WQ_AWQ, SCN_WQ_NVFP4};
    static const int DEF_G[SCN_WQ_COUNT] = {0, 0, 128, 0, 128, 128, 16, 32};
    int q = (int)DEF_Q[o->weight_dtype];
    if (scn_get_enum(c, m, path, "weight_quant", WQUANTS, &q)) return -1;
    o->weight_quant = (scn_wquant)q;
    o->weight_group = DEF_G[o->weight_quant];
    if (scn_get_int(c, m, path, "weight_group", 1, 1 << 20, &o->weight_group)) return -1;
    bool sixteen = o->weight_dtype == SCN_DTYPE_FP32 || o->weight_dtype == SCN_DTYPE_FP16 || o->weight_dtype == SCN_DTYPE_BF16;
    if (sixteen != (o->weight_quant == SCN_WQ_NONE))
        return invalid(c, m, path, scn_has(m, "weight_quant") ? "weight_quant" : "weight_dtype",
                       "weight_quant none goes with fp32/fp16/bf16 weights, and quantised dtypes need a layout");
    int ql = 0;
    if (scn_get_enum(c, m, path, "quantized_layers", QLAYERS, &ql)) return -1;
    o->quant_experts_only = ql == 1;
    if (o->quant_experts_only && (!o->experts || o->weight_quant == SCN_WQ_NONE))
        return invalid(c, m, path, "quantized_layers", "experts needs a model with experts and a quantised weight_dtype");
    o->quant_mlp_only = ql == 2;
    if (o->quant_mlp_only && (o->experts || o->weight_quant == SCN_WQ_NONE))
        return invalid(c, m, path, "quantized_layers", "mlp needs a dense model (no experts) and a quantised weight_dtype");
    o->unquantized_end_layers = 0;
    if (scn_get_int(c, m, path, "unquantized_end_layers", 0, o->layers / 2, &o->unquantized_end_layers)) return -1;
    if (o->unquantized_end_layers > 0 && !o->quant_mlp_only)
        return invalid(c, m, path, "unquantized_end_layers", "unquantized_end_layers needs quantized_layers: mlp");
    o->sliding_layers = o->sliding_window ? o->layers : 0;
    if (scn_get_int(c, m, path, "sliding_layers", 0, o->layers, &o->sliding_layers)) return -1;
    if (scn_has(m, "sliding_layers") && !o->sliding_window)
        return invalid(c, m, path, "sliding_layers", "sliding_layers needs sliding_window");
    if (o->experts) {
        if (!o->experts_per_token)
            return invalid(c, m, path, "experts_per_token", "missing: a model with experts needs experts_per_token");
        if (o->experts_per_token > o->experts)
            return invalid(c, m, path, "experts_per_token", "cannot exceed experts");
        if (!o->moe_intermediate) o->moe_intermediate = o->intermediate;
        if (o->dense_layers > o->layers)
            return invalid(c, m, path, "dense_layers", "cannot exceed layers");
        if (o->expert_groups > 1 && o->experts % o->expert_groups)
            return invalid(c, m, path, "expert_groups", "experts must be a multiple of expert_groups");
    } else if (scn_has(m, "experts_per_token") || scn_has(m, "shared_experts") || scn_has(m, "expert_groups")) {
        const char *k = scn_has(m, "experts_per_token") ? "experts_per_token"
                        : scn_has(m, "shared_experts")  ? "shared_experts"
                                                        : "expert_groups";
        return invalid(c, m, path, k, "needs experts (the number of routed experts)");
    }
    if (o->kv_lora_rank) {
        if (!o->qk_rope_head_dim)
            return invalid(c, m, path, "qk_rope_head_dim", "missing: MLA (kv_lora_rank) needs qk_rope_head_dim");
        if (!o->qk_nope_head_dim) o->qk_nope_head_dim = o->head_dim;
        if (!o->v_head_dim) o->v_head_dim = o->head_dim;
    }
    const scn_node *ct = scn_map_get(m, "chat_template");
    if (ct) {
        char cp[256];
        scn_path_join(cp, sizeof cp, path, "chat_template");
        if (scn_expect_map(c, ct, cp) || scn_check_keys(c, ct, cp, CHAT_KEYS) ||
            scn_get_int(c, ct, cp, "prefix", 0, 1000000, &o->chat_prefix) ||
            scn_get_int(c, ct, cp, "suffix", 0, 1000000, &o->chat_suffix) ||
            scn_get_int(c, ct, cp, "bos", 0, 1000000, &o->chat_bos))
            return -1;
        /* The BOS is one of the prefix's tokens: it cannot outnumber them. The error names both
         * counts and stands where the most derived file wrote one: a model that extends
         * deepseek-r1 (bos 1) with prefix 0 is told at its prefix, not at the library's bos. */
        if (o->chat_bos > o->chat_prefix) {
            const scn_node *bn = scn_map_get(ct, "bos"), *pn = scn_map_get(ct, "prefix");
            char msg[256];
            if (pn && bn && pn->file && bn->file && m->file && strcmp(pn->file, bn->file) && !strcmp(pn->file, m->file)) {
                snprintf(msg, sizeof msg, "prefix %d is less than bos %d (%s:%d:%d): bos counts tokens of the prefix, "
                         "so prefix is at least bos", o->chat_prefix, o->chat_bos, bn->file, bn->line, bn->col);
                return invalid(c, ct, cp, "prefix", msg);
            }
            snprintf(msg, sizeof msg, "bos %d is more than prefix %d: bos counts tokens of the prefix, at most prefix",
                     o->chat_bos, o->chat_prefix);
            return invalid(c, ct, cp, "bos", msg);
        }
    }
    if (!o->name[0]) snprintf(o->name, sizeof o->name, "%s", "unnamed-model");
    return 0;
}

/* ---- hardware ---- */
static const char *const HW_KEYS[] = {"name", "source", "extends", "arch", "sm_count", "l2_cache", "memory", "memory_reserved", "memory_bandwidth",
                                      "compute", "interconnect", "network", "efficiency", "overhead", "calibrated", "price",
                                      "host", "nvme", "remote", NULL};
static const char *const TIER_KEYS[] = {"link", "capacity", "bandwidth", "efficiency", "latency", NULL};
static const char *const LINK_KEYS[] = {"kind", "bandwidth", "latency", "gpus_per_node", "oneshot_latency",
                                        "oneshot_latency_per_peer", "twoshot_latency", "twoshot_bandwidth",
                                        "nccl_latency", "nccl_latency_gpus", "nccl_bandwidth", NULL};
static const char *const NET_KEYS[] = {"kind", "bandwidth", "latency", NULL};
static const char *const HW_PRICE_KEYS[] = {"usd_per_gpu_hour", "source", NULL};
static const char *const EFF_KEYS[] = {"memory_bandwidth", "compute", "compute_scale", "attention", "interconnect", NULL};
static const char *const OVH_KEYS[] = {"kernel_launch", "step", "runtime_memory", NULL};

static int sub_map(scn_ctx *c, const scn_node *m, const char *path, const char *key,
                   const char *const *keys, const scn_node **out, char *full, size_t n)
{
    *out = scn_map_get(m, key);
    scn_path_join(full, n, path, key);
    if (!*out) return 0;
    return scn_expect_map(c, *out, full) || scn_check_keys(c, *out, full, keys);
}

static int get_fraction(scn_ctx *c, const scn_node *m, const char *path, const char *key, double *out)
{
    double x = *out;
    if (scn_get_qty(c, m, path, key, SCN_UNIT_FRACTION, false, &x)) return -1;
    if (x > 1) return invalid(c, m, path, key, "must be a fraction in (0, 1]");
    *out = x;
    return 0;
}

/* efficiency.compute_scale: per GEMM dtype, the ratio of that dtype's share of its own peak to
 * `compute` (docs/scenarios.md, "hardware"; docs/cost-model.md, "Efficiency defaults"). The dtype
 * needs a tensor rate, and its share, compute x scale, must stay a fraction. */
static int bind_compute_scale(scn_ctx *c, const scn_node *eff, const char *path, scn_hardware *o)
{
    char full[256], msg[200];
    const scn_node *s;
    if (sub_map(c, eff, path, "compute_scale", SCN_DTYPE_NAMES, &s, full, sizeof full)) return -1;
    for (int d = 0; s && SCN_DTYPE_NAMES[d]; d++) {
        const char *k = SCN_DTYPE_NAMES[d];
        if (!scn_has(s, k)) continue;
        if (scn_get_qty(c, s, full, k, SCN_UNIT_FRACTION, false, &o->eff_compute_scale[d])) return -1;
        if (!(o->flops[d] > 0)) {
            snprintf(msg, sizeof msg, "the profile has no %s tensor rate (compute.%s) to scale", k, k);
            return invalid(c, s, full, k, msg);
        }
        /* A rounding margin: 0.75 x 4/3 written to six digits is still the whole peak. */
        if (o->eff_compute * o->eff_compute_scale[d] > 1 + 1e-9) {
            snprintf(msg, sizeof msg, "compute x compute_scale.%s = %.4g: a share of the peak must be at most 1", k,
                     o->eff_compute * o->eff_compute_scale[d]);
            return invalid(c, s, full, k, msg);
        }
    }
    return 0;
}

/* A memory tier below HBM (host:, nvme:, remote:): capacity and bandwidth per GPU are required,
 * and so is the efficiency that turns the datasheet bandwidth into what transfers reach
 * (docs/cost-model.md, "KV offload tiers"). */
static int bind_tier(scn_ctx *c, const scn_node *m, const char *path, const char *key, scn_tier *t)
{
    char full[256];
    const scn_node *s;
    if (sub_map(c, m, path, key, TIER_KEYS, &s, full, sizeof full)) return -1;
    memset(t, 0, sizeof *t);
    if (!s) return 0;
    if (scn_require(c, s, full, "capacity") || scn_require(c, s, full, "bandwidth") || scn_require(c, s, full, "efficiency") ||
        scn_get_str(c, s, full, "link", t->link, sizeof t->link) ||
        scn_get_qty(c, s, full, "capacity", SCN_UNIT_BYTES, false, &t->capacity) ||
        scn_get_qty(c, s, full, "bandwidth", SCN_UNIT_BANDWIDTH, false, &t->bandwidth) ||
        scn_get_qty(c, s, full, "latency", SCN_UNIT_TIME, true, &t->latency))
        return -1;
    t->efficiency = 1;
    return get_fraction(c, s, full, "efficiency", &t->efficiency);
}

int scn_bind_hardware(scn_ctx *c, const scn_node *m, const char *path, scn_hardware *o)
{
    if (scn_expect_map(c, m, path) || scn_check_keys(c, m, path, HW_KEYS)) return -1;
    if (scn_require(c, m, path, "memory") || scn_require(c, m, path, "memory_bandwidth") ||
        scn_require(c, m, path, "compute"))
        return -1;
    memset(o, 0, sizeof *o);
    snprintf(o->source, sizeof o->source, "%s", m->file ? m->file : "");
    /* Defaults until calibration replaces them: docs/cost-model.md, "Efficiency defaults". */
    o->eff_bandwidth = 0.80;
    o->eff_compute = 0.60;
    o->eff_attention = 0.40;
    o->eff_link = 0.70;
    o->runtime_memory = 1.0 * 1073741824.0;
    /* NCCL's tuning model: 0.6 us per ring step of its low-latency protocol over NVLink
     * (docs/sources.md); the profiles give their own. */
    o->link_latency = 0.6e-6;
    if (scn_get_str(c, m, path, "name", o->name, sizeof o->name) ||
        scn_get_qty(c, m, path, "memory", SCN_UNIT_BYTES, false, &o->memory) ||
        scn_get_qty(c, m, path, "memory_reserved", SCN_UNIT_BYTES, true, &o->memory_reserved) ||
        scn_get_qty(c, m, path, "memory_bandwidth", SCN_UNIT_BANDWIDTH, false, &o->memory_bandwidth) ||
        scn_get_bool(c, m, path, "calibrated", &o->calibrated) ||
        scn_get_int(c, m, path, "sm_count", 1, 100000, &o->sm_count) ||
        scn_get_qty(c, m, path, "l2_cache", SCN_UNIT_BYTES, true, &o->l2_cache))
        return -1;
    if (o->memory_reserved >= o->memory)
        return invalid(c, m, path, "memory_reserved", "must be less than memory (the driver keeps part of it from CUDA)");
    int arch = SCN_ARCH_OTHER;
    if (scn_get_enum(c, m, path, "arch", SCN_ARCH_NAMES, &arch)) return -1;
    o->arch = (scn_arch)arch;
    char full[256];
    const scn_node *s;
    if (sub_map(c, m, path, "compute", SCN_DTYPE_NAMES, &s, full, sizeof full)) return -1;
    for (int d = 0; SCN_DTYPE_NAMES[d]; d++)
        if (scn_get_qty(c, s, full, SCN_DTYPE_NAMES[d], SCN_UNIT_COMPUTE, true, &o->flops[d])) return -1;
    if (o->flops[SCN_DTYPE_FP16] == 0 && o->flops[SCN_DTYPE_BF16] == 0)
        return invalid(c, s, full, "bf16", "missing: the profile needs fp16 or bf16 tensor throughput");
    if (o->flops[SCN_DTYPE_FP16] == 0) o->flops[SCN_DTYPE_FP16] = o->flops[SCN_DTYPE_BF16];
    if (o->flops[SCN_DTYPE_BF16] == 0) o->flops[SCN_DTYPE_BF16] = o->flops[SCN_DTYPE_FP16];
    if (sub_map(c, m, path, "interconnect", LINK_KEYS, &s, full, sizeof full)) return -1;
    const scn_node *ic = s;   /* for the checks that need the efficiencies bound below */
    char ic_path[256];
    snprintf(ic_path, sizeof ic_path, "%s", full);
    if (s) {
        int k = 0;
        if (scn_get_enum(c, s, full, "kind", SCN_LINK_NAMES, &k) ||
            scn_get_qty(c, s, full, "bandwidth", SCN_UNIT_BANDWIDTH, false, &o->link_bandwidth) ||
            scn_get_qty(c, s, full, "latency", SCN_UNIT_TIME, true, &o->link_latency) ||
            scn_get_int(c, s, full, "gpus_per_node", 1, 100000, &o->gpus_per_node) ||
            scn_get_qty(c, s, full, "oneshot_latency", SCN_UNIT_TIME, true, &o->oneshot_latency) ||
            scn_get_qty(c, s, full, "oneshot_latency_per_peer", SCN_UNIT_TIME, true, &o->oneshot_latency_peer) ||
            scn_get_qty(c, s, full, "twoshot_latency", SCN_UNIT_TIME, true, &o->twoshot_latency) ||
            scn_get_qty(c, s, full, "twoshot_bandwidth", SCN_UNIT_BANDWIDTH, true, &o->twoshot_bandwidth) ||
            scn_get_qty(c, s, full, "nccl_latency", SCN_UNIT_TIME, true, &o->nccl_latency) ||
            scn_get_int(c, s, full, "nccl_latency_gpus", 2, 100000, &o->nccl_latency_gpus) ||
            scn_get_qty(c, s, full, "nccl_bandwidth", SCN_UNIT_BANDWIDTH, false, &o->nccl_bandwidth))
            return -1;
        o->link = (scn_link)k;
        if (o->link != SCN_LINK_NONE && scn_require(c, s, full, "bandwidth")) return -1;
        /* A measured NCCL latency says over how many GPUs, and is at least the ring's own
         * 2 (g - 1) steps, from which kv_collective.c takes the rest as NCCL's fixed cost
         * (docs/cost-model.md, "Collectives"). */
        if (o->nccl_latency > 0 && scn_require(c, s, full, "nccl_latency_gpus")) return -1;
        /* Both measurements describe one node (kv_collective.c uses them only within one), so
         * the GPU count cannot exceed the node's; and a ring's bus bandwidth is the rate each
         * GPU sends on its links, so it cannot exceed the link's own per-direction bandwidth
         * (docs/cost-model.md, "Collectives"). The count is checked before the latency it
         * scales, so a count outside the node is named as the cause. */
        char msg[200];
        if (o->nccl_latency_gpus > 0 && o->gpus_per_node > 0 && o->nccl_latency_gpus > o->gpus_per_node) {
            snprintf(msg, sizeof msg, "%d GPUs, but the node (gpus_per_node) has %d: the measurement ran within one node",
                     o->nccl_latency_gpus, o->gpus_per_node);
            return invalid(c, s, full, "nccl_latency_gpus", msg);
        }
        if (o->nccl_latency > 0 && o->nccl_latency <= 2.0 * (o->nccl_latency_gpus - 1) * o->link_latency)
            return invalid(c, s, full, "nccl_latency",
                           "at most the ring's 2 (gpus - 1) steps of `latency`: a measured all-reduce takes longer");
        if (o->nccl_bandwidth > 0 && o->nccl_bandwidth > o->link_bandwidth * (1 + 1e-9)) {
            snprintf(msg, sizeof msg,
                     "%.4g GB/s exceeds the link's %.4g GB/s: a ring's bus bandwidth is what each GPU sends on its links",
                     o->nccl_bandwidth / 1e9, o->link_bandwidth / 1e9);
            return invalid(c, s, full, "nccl_bandwidth", msg);
        }
    }
    if (sub_map(c, m, path, "network", NET_KEYS, &s, full, sizeof full)) return -1;
    if (s) {
        int k = 0;
        if (scn_require(c, s, full, "bandwidth") || scn_get_enum(c, s, full, "kind", SCN_LINK_NAMES, &k) ||
            scn_get_qty(c, s, full, "bandwidth", SCN_UNIT_BANDWIDTH, false, &o->net_bandwidth) ||
            scn_get_qty(c, s, full, "latency", SCN_UNIT_TIME, true, &o->net_latency))
            return -1;
        o->net = (scn_link)k;
    }
    if (sub_map(c, m, path, "efficiency", EFF_KEYS, &s, full, sizeof full)) return -1;
    if (s && (get_fraction(c, s, full, "memory_bandwidth", &o->eff_bandwidth) ||
              get_fraction(c, s, full, "compute", &o->eff_compute) ||
              get_fraction(c, s, full, "attention", &o->eff_attention) ||
              get_fraction(c, s, full, "interconnect", &o->eff_link) || bind_compute_scale(c, s, full, o)))
        return -1;
    o->attention_given = s && scn_has(s, "attention");
    /* A measured large-message bus bandwidth is NCCL's best protocol's, so it is not below what
     * its LL protocol moves on the same links: half the link's rate (8-byte lines carrying 4 data
     * bytes), which the model takes as bandwidth x efficiency.interconnect / 2 (kv_collective.c).
     * Under it the model would price large all-reduces as LL and ignore the figure; it is a
     * unit slip (MB/s for GB/s) or a profile whose interconnect efficiency overstates its links
     * (docs/cost-model.md, "Collectives"). */
    if (ic && o->nccl_bandwidth > 0 && o->nccl_bandwidth < 0.5 * o->link_bandwidth * o->eff_link * (1 - 1e-9)) {
        char msg[300];
        snprintf(msg, sizeof msg,
                 "%.4g GB/s is below %.4g GB/s, what NCCL's LL protocol moves on these links (half of bandwidth x "
                 "efficiency.interconnect): a measured large all-reduce runs at least that fast (check the unit, or "
                 "the efficiency)",
                 o->nccl_bandwidth / 1e9, 0.5 * o->link_bandwidth * o->eff_link / 1e9);
        return invalid(c, ic, ic_path, "nccl_bandwidth", msg);
    }
    if (sub_map(c, m, path, "overhead", OVH_KEYS, &s, full, sizeof full)) return -1;
    if (s && (scn_get_qty(c, s, full, "kernel_launch", SCN_UNIT_TIME, true, &o->kernel_overhead) ||
              scn_get_qty(c, s, full, "step", SCN_UNIT_TIME, true, &o->step_overhead) ||
              scn_get_qty(c, s, full, "runtime_memory", SCN_UNIT_BYTES, true, &o->runtime_memory)))
        return -1;
    /* A profile that names its own launch and step costs (a calibrated one) overrides the
     * engine's; otherwise the engine supplies both (scn_engine_apply). */
    if (s && (scn_has(s, "kernel_launch") || scn_has(s, "step"))) {
        if (!scn_has(s, "kernel_launch") || !scn_has(s, "step"))
            return invalid(c, s, full, scn_has(s, "step") ? "kernel_launch" : "step",
                           "give both kernel_launch and step (a calibrated profile), or neither (the engine's)");
        o->overhead_given = true;
    }
    /* A list price per GPU-hour, for cost per token (sources in docs/sources.md). */
    if (sub_map(c, m, path, "price", HW_PRICE_KEYS, &s, full, sizeof full)) return -1;
    const scn_node *pv = s ? scn_map_get(s, "usd_per_gpu_hour") : NULL;
    if (pv) {
        char *end = NULL;
        double x = pv->kind == SCN_NODE_SCALAR ? strtod(pv->text, &end) : -1;
        if (pv->kind != SCN_NODE_SCALAR || end == pv->text || *end || !(x >= 0) || !isfinite(x))
            return invalid(c, s, full, "usd_per_gpu_hour", "expected a price in US dollars per GPU-hour, e.g. 2.49");
        o->usd_per_gpu_hour = x;
    }
    if (bind_tier(c, m, path, "host", &o->host) || bind_tier(c, m, path, "nvme", &o->nvme) ||
        bind_tier(c, m, path, "remote", &o->remote))
        return -1;
    if (!o->name[0]) snprintf(o->name, sizeof o->name, "%s", "unnamed-hardware");
    return 0;
}
