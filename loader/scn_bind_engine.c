/* scn_bind_engine.c: binds serving-engine profiles (scenarios/engines/NAME.yaml) and names the
 * weight formats a plan may choose. Field meanings: docs/scenarios.md, "engine"; what each
 * number does to a step: docs/cost-model.md, "Engine profiles". */
#include "scn_bind.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static const char *const WQ_NAMES[SCN_WQ_COUNT] = {"none", "per_tensor", "block", "per_channel", "awq", "gptq", "nvfp4", "mxfp4"};
const char *scn_wquant_name(scn_wquant q) { return q < SCN_WQ_COUNT ? WQ_NAMES[q] : "?"; }

static const char *const AK_NAMES[] = {"flash2", "flash3", "flashinfer", "trtllm", "sdpa", "kvplan", "mmha", NULL};
const char *scn_attn_kernel_name(scn_attn_kernel k) { return k < SCN_AK_COUNT ? AK_NAMES[k] : "?"; }

static const char *const WO_NAMES[] = {"fused", "torch", "marlin", NULL};
const char *scn_weight_only_name(scn_weight_only w) { return w < SCN_WO_COUNT ? WO_NAMES[w] : "?"; }

static const char *const MX_NAMES[] = {"checkpoint", "marlin", NULL};

static const char *const BF8_NAMES[] = {"native", "triton", "cutlass", "deepgemm", NULL};
const char *scn_block_fp8_name(scn_block_fp8 k) { return k < SCN_BF8_COUNT ? BF8_NAMES[k] : "?"; }

/* The formats a plan option may name, with the layout each checkpoint family uses: AWQ and GPTQ
 * group 128 input elements per scale, NVFP4 16, MXFP4 32 (OCP MX), DeepSeek-style fp8 blocks are 128 x 128. */
static const struct { const char *name; scn_wformat f; } WFORMATS[] = {
    {"fp32", {SCN_DTYPE_FP32, SCN_WQ_NONE, 0}},
    {"bf16", {SCN_DTYPE_BF16, SCN_WQ_NONE, 0}},
    {"fp16", {SCN_DTYPE_FP16, SCN_WQ_NONE, 0}},
    {"fp8", {SCN_DTYPE_FP8, SCN_WQ_PER_TENSOR, 0}},
    {"fp8_block", {SCN_DTYPE_FP8, SCN_WQ_BLOCK, 128}},
    {"int8", {SCN_DTYPE_INT8, SCN_WQ_PER_CHANNEL, 0}},
    {"awq", {SCN_DTYPE_INT4, SCN_WQ_AWQ, 128}},
    {"int4", {SCN_DTYPE_INT4, SCN_WQ_AWQ, 128}},
    {"gptq", {SCN_DTYPE_INT4, SCN_WQ_GPTQ, 128}},
    {"fp4", {SCN_DTYPE_FP4, SCN_WQ_NVFP4, 16}},
    {"mxfp4", {SCN_DTYPE_FP4, SCN_WQ_MXFP4, 32}},
};
#define N_WFORMATS (int)(sizeof WFORMATS / sizeof WFORMATS[0])

int scn_wformat_parse(const char *name, scn_wformat *out)
{
    for (int i = 0; i < N_WFORMATS; i++)
        if (!strcmp(name, WFORMATS[i].name)) { *out = WFORMATS[i].f; return 0; }
    return -1;
}

const char *scn_wformat_name(const scn_wformat *f)
{
    for (int i = 0; i < N_WFORMATS; i++)
        if (WFORMATS[i].f.dtype == f->dtype && WFORMATS[i].f.quant == f->quant) return WFORMATS[i].name;
    return scn_dtype_name(f->dtype);
}

/* ---- engine profiles ---- */
static const char *const ENGINE_KEYS[] = {"name", "source", "extends", "cpu", "launch", "cuda_graphs",
                                          "chunked_prefill", "batch_defaults", "allreduce", "attention", "memory",
                                          "kv_offload", "frontend", "weight_only", "mla", "moe", "block_fp8", "mxfp4",
                                          "lm_head", "prefix_caching", "sampler", "admission", NULL};
static const char *const SAMPLER_KEYS[] = {"bytes_per_logit", "gather", NULL};
static const char *const ADMISSION_KEYS[] = {"reserve", "init_ratio", "min_ratio", "decay_steps", "clip", "retract_steps",
                                             NULL};
/* What admission reserves beyond the blocks a request takes now: nothing (fill, then preempt:
 * vLLM), or the running requests' expected output (SGLang's PrefillAdder). */
static const char *const ADMISSION_RESERVES[] = {"none", "output", NULL};
static const char *const CPU_KEYS[] = {"step", "per_sequence", "eager_layer", "async_scheduling", "extra_decode_step",
                                       "no_evict", "async_output", "multi_step", "multi_step_stream", NULL};
static const char *const LAUNCH_KEYS[] = {"kernel", NULL};
static const char *const OFFLOAD_KEYS[] = {"layerwise", NULL};
static const char *const MLA_KEYS[] = {"cache", "absorbed", "decode", NULL};
static const char *const MLA_DECODES[] = {"auto", "flashmla", "fa3", NULL};
static const char *const MLA_ABSORBED[] = {"separate", "materialized", NULL};
static const char *const MLA_CACHES[] = {"latent", "expanded", NULL};
static const char *const MOE_KEYS[] = {"kernel", "grouped_routing", NULL};
static const char *const MOE_KERNELS[] = {"kvplan", "triton", "cutlass", NULL};
static const char *const FRONTEND_KEYS[] = {"request", "per_prompt_token", NULL};
static const char *const GRAPH_KEYS[] = {"enabled", "sizes", "then_every", "max", "launch", "per_kernel", NULL};
static const char *const CHUNK_KEYS[] = {"enabled", "max_num_batched_tokens", "mixed", "at_least_max_model_len",
                                         "long_context", "unchunked_mla", NULL};
static const char *const LONG_KEYS[] = {"above", "max_num_batched_tokens", NULL};
static const char *const AR_KEYS[] = {"impl", "oneshot_max", "custom_max", "copies", NULL};
static const char *const AR_IMPLS[] = {"custom", "nccl", "intranode", NULL};
/* `lm_head: split` (by vocabulary over the tensor-parallel ranks, the serving engines) or
 * `replicated` (whole on every rank: gpt-fast's tensor parallelism shards only the layers). */
static const char *const LM_HEAD_NAMES[] = {"split", "replicated", NULL};
static const char *const MEM_KEYS[] = {"budget", "non_torch", "fraction_by_tp", "held_allreduce", "moe_chunk", "fraction_rule", "sampler_bytes", NULL};
static const char *const MEM_RULES[] = {"table", "sglang_reserve", NULL};
static const char *const MEM_BUDGETS[] = {"total", "static", "free", "device", NULL};
static const char *const FRAC_KEYS[] = {"tp", "fraction", NULL};
static const char *const BATCH_KEYS[] = {"min_memory", "except", "max_num_seqs", "max_num_batched_tokens", NULL};

static int sub_map(scn_ctx *c, const scn_node *m, const char *path, const char *key,
                   const char *const *keys, const scn_node **out, char *full, size_t n)
{
    *out = scn_map_get(m, key);
    scn_path_join(full, n, path, key);
    if (!*out) return 0;
    return scn_expect_map(c, *out, full) || scn_check_keys(c, *out, full, keys);
}

static int fail_at(scn_ctx *c, const scn_node *at, const char *path, const char *msg)
{
    scn_fail(c->err, SCN_E_DATA, at, path, "%s", msg);
    return -1;
}

/* Captured sizes: an explicit ascending list, then optionally every `then_every` up to `max`. */
static int bind_graph_sizes(scn_ctx *c, const scn_node *g, const char *path, scn_engine *e)
{
    char p[256];
    const scn_node *l = scn_map_get(g, "sizes");
    scn_path_join(p, sizeof p, path, "sizes");
    int last = 0;
    if (l) {
        if (l->kind != SCN_NODE_SEQ) return fail_at(c, l, p, "expected a list of batch sizes, e.g. [1, 2, 4, 8]");
        for (int i = 0; i < l->n; i++) {
            char ip[280];
            snprintf(ip, sizeof ip, "%s[%d]", p, i);
            long x;
            if (scn_parse_int(c, l->vals[i], ip, 1, 1000000, &x)) return -1;
            if (x <= last) return fail_at(c, l->vals[i], ip, "sizes must be ascending");
            if (e->n_graph_sizes == SCN_GRAPH_SIZES_MAX) return fail_at(c, l->vals[i], ip, "too many sizes (at most 96)");
            e->graph_sizes[e->n_graph_sizes++] = last = (int)x;
        }
    }
    int every = 0, max = 0;
    if (scn_get_int(c, g, path, "then_every", 1, 1000000, &every) || scn_get_int(c, g, path, "max", 1, 1000000, &max))
        return -1;
    if (every && !max) return fail_at(c, g, path, "then_every needs max (the largest captured size)");
    for (int x = every ? (last / every + 1) * every : 0; every && x <= max; x += every) {
        if (e->n_graph_sizes == SCN_GRAPH_SIZES_MAX) return fail_at(c, g, path, "too many captured sizes (at most 96)");
        e->graph_sizes[e->n_graph_sizes++] = x;
    }
    if (e->cuda_graphs && !e->n_graph_sizes) return fail_at(c, g, path, "CUDA graphs need at least one captured size");
    return 0;
}

/* Default memory fractions by tensor-parallel size: a list of {tp, fraction}, ascending in tp;
 * each applies from its tp up to the next entry's. */
static int bind_fractions(scn_ctx *c, const scn_node *mm, const char *path, scn_engine *e)
{
    char p[256];
    const scn_node *l = scn_map_get(mm, "fraction_by_tp");
    scn_path_join(p, sizeof p, path, "fraction_by_tp");
    if (!l) return 0;
    if (l->kind != SCN_NODE_SEQ || l->n == 0)
        return fail_at(c, l, p, "expected a list of {tp, fraction}, e.g. [{tp: 1, fraction: 0.88}]");
    if (l->n > SCN_MEM_FRACTIONS_MAX) return fail_at(c, l, p, "too many entries (at most 8)");
    for (int i = 0; i < l->n; i++) {
        char ip[280];
        snprintf(ip, sizeof ip, "%s[%d]", p, i);
        const scn_node *it = l->vals[i];
        if (scn_expect_map(c, it, ip) || scn_check_keys(c, it, ip, FRAC_KEYS)) return -1;
        int tp = 0;
        double f = 0;
        if (!scn_map_get(it, "tp") || !scn_map_get(it, "fraction"))
            return fail_at(c, it, ip, "each entry needs tp and fraction");
        if (scn_get_int(c, it, ip, "tp", 1, 1024, &tp) ||
            scn_get_qty(c, it, ip, "fraction", SCN_UNIT_FRACTION, false, &f))
            return -1;
        if (!(f > 0 && f <= 1)) return fail_at(c, scn_map_get(it, "fraction"), ip, "fraction must be in (0, 1]");
        if (i > 0 && tp <= e->mem_fraction_tp[i - 1]) return fail_at(c, scn_map_get(it, "tp"), ip, "tp must be ascending");
        /* Each entry holds from its tp up, so a list must start at 1: below its first entry a
         * TP size would have no fraction, and taking the first one would be a guess. */
        if (i == 0 && tp != 1) return fail_at(c, scn_map_get(it, "tp"), ip, "the first entry must be tp 1 (each holds from its tp up to the next)");
        e->mem_fraction_tp[i] = tp;
        e->mem_fraction[i] = f;
        e->n_mem_fraction = i + 1;
    }
    return 0;
}

/* Batch limits by GPU: a list of {min_memory, except, max_num_seqs, max_num_batched_tokens},
 * tried in order (docs/scenarios.md, "engine"). */
static int bind_batch_rules(scn_ctx *c, const scn_node *l, const char *p, scn_engine *e)
{
    if (l->kind != SCN_NODE_SEQ || l->n == 0)
        return fail_at(c, l, p, "expected a list of {min_memory, except, max_num_seqs, max_num_batched_tokens}");
    if (l->n > SCN_BATCH_RULES_MAX) return fail_at(c, l, p, "too many entries (at most 4)");
    for (int i = 0; i < l->n; i++) {
        char ip[280];
        snprintf(ip, sizeof ip, "%s[%d]", p, i);
        const scn_node *it = l->vals[i];
        scn_batch_rule *r = &e->batch_rules[i];
        memset(r, 0, sizeof *r);
        if (scn_expect_map(c, it, ip) || scn_check_keys(c, it, ip, BATCH_KEYS)) return -1;
        if (!scn_map_get(it, "max_num_seqs")) return fail_at(c, it, ip, "each entry needs max_num_seqs");
        if (scn_get_qty(c, it, ip, "min_memory", SCN_UNIT_BYTES, true, &r->min_memory) ||
            scn_get_int(c, it, ip, "max_num_seqs", 1, 1000000, &r->max_num_seqs) ||
            scn_get_int(c, it, ip, "max_num_batched_tokens", 1, 1000000000, &r->max_num_batched_tokens))
            return -1;
        const scn_node *x = scn_map_get(it, "except");
        if (x) {
            char xp[300];
            snprintf(xp, sizeof xp, "%s.except", ip);
            if (x->kind != SCN_NODE_SEQ) return fail_at(c, x, xp, "expected a list of hardware name parts, e.g. [a100]");
            if (x->n > SCN_BATCH_EXCEPT_MAX) return fail_at(c, x, xp, "too many names (at most 4)");
            for (int k = 0; k < x->n; k++) {
                const scn_node *v = x->vals[k];
                if (v->kind != SCN_NODE_SCALAR || !v->text[0] || strlen(v->text) >= SCN_NAME_MAX)
                    return fail_at(c, v, xp, "expected a hardware name part, e.g. a100");
                snprintf(r->except[k], sizeof r->except[k], "%s", v->text);
            }
            r->n_except = x->n;
        }
        e->n_batch_rules = i + 1;
    }
    return 0;
}

/* chunked_prefill.long_context: {above: N, max_num_batched_tokens: B}, both required; `above:
 * 0` turns an inherited rule off. */
static int bind_long_context(scn_ctx *c, const scn_node *cp, const char *path, scn_engine *e)
{
    char p[280];
    const scn_node *l;
    if (sub_map(c, cp, path, "long_context", LONG_KEYS, &l, p, sizeof p)) return -1;
    if (!l) return 0;
    if (!scn_map_get(l, "above")) return fail_at(c, l, p, "needs above (the max_model_len past which the engine chunks)");
    if (scn_get_int(c, l, p, "above", 0, 1000000000, &e->chunk_above_len)) return -1;
    if (e->chunk_above_len == 0) { e->chunk_long_budget = 0; return 0; }
    if (!scn_map_get(l, "max_num_batched_tokens"))
        return fail_at(c, l, p, "needs max_num_batched_tokens (the token budget a step then takes)");
    return scn_get_int(c, l, p, "max_num_batched_tokens", 1, 1000000000, &e->chunk_long_budget);
}

bool scn_engine_chunks(const scn_engine *e, const scn_model *m, int max_model_len, bool multi_step, bool budget_given,
                       int *budget)
{
    bool mla = m->kv_lora_rank > 0;
    if (!(mla && e->unchunked_mla)) {
        if (e->chunked_prefill) return true;
        /* Multi-step runs do not split prompts (vLLM's SchedulerConfig gives them
         * max(max_model_len, 2048) even when chunking), and kvplan runs them on the continuous
         * scheduler: the unchunked rule below. */
        if (e->chunk_above_len > 0 && max_model_len > e->chunk_above_len && !multi_step &&
            !(m->sliding_window > 0 && m->sliding_layers > 0)) {
            if (!budget_given) *budget = e->chunk_long_budget;
            return true;
        }
    }
    if (!budget_given && e->budget_covers_context && *budget < max_model_len) *budget = max_model_len;
    return false;
}

double scn_hw_cuda_memory(const scn_hardware *h) { return h->memory - h->memory_reserved; }

void scn_engine_batch_defaults(const scn_engine *e, const scn_hardware *h, int *max_num_seqs, int *max_num_batched_tokens)
{
    *max_num_seqs = 256;
    *max_num_batched_tokens = e->max_num_batched_tokens > 0 ? e->max_num_batched_tokens : 8192;
    for (int i = 0; i < e->n_batch_rules; i++) {
        const scn_batch_rule *r = &e->batch_rules[i];
        bool excluded = h->memory < r->min_memory;
        for (int k = 0; k < r->n_except && !excluded; k++) excluded = strstr(h->name, r->except[k]) != NULL;
        if (excluded) continue;
        *max_num_seqs = r->max_num_seqs;
        if (r->max_num_batched_tokens > 0) *max_num_batched_tokens = r->max_num_batched_tokens;
        return;
    }
}

/* SGLang's default mem_fraction_static from 0.5.4 on (ServerArgs._handle_gpu_memory_settings,
 * sgl-project/sglang PRs #10975 and #11076; derivation and sources in docs/cost-model.md,
 * "Memory budget and capacity"): by the GPU's memory in MiB (as nvidia-smi reports it), a
 * chunked-prefill size and a largest captured decode batch; then a reserve in MiB for activations
 * and CUDA graphs, 512 + 1.5 per chunk token (at least 2048 tokens) + 2 per captured sequence +
 * 128 per TP rank, at least 10 GiB on GPUs above 60 GiB, and the fraction is what is left,
 * rounded to three decimals. The chunk is the deployment's token budget when set. */
static double sglang_reserve_fraction(const scn_deployment *d, double memory_bytes)
{
    double gpu = memory_bytes / (1024.0 * 1024.0);
    /* SGLang's tp_size is every GPU of the replica: with attention data parallelism the
     * deployment's tensor_parallel is the attention's (1) and the GPUs are its DP ranks. */
    int dp = d->attention_dp > 1 ? d->attention_dp : 1;
    int tp = (d->tensor_parallel > 0 ? d->tensor_parallel : 1) * dp;
    double chunk, bs;
    if (gpu < 20 * 1024) chunk = 2048, bs = 8;
    else if (gpu < 35 * 1024) chunk = 2048, bs = tp < 4 ? 24 : 80;
    else if (gpu < 60 * 1024) chunk = 4096, bs = tp < 4 ? 32 : 160;
    else if (gpu < 160 * 1024) chunk = 8192, bs = tp < 4 ? 256 : 512;
    else chunk = 16384, bs = 512;
    if (d->max_num_batched_tokens > 0) chunk = d->max_num_batched_tokens;
    double reserve = 512 + (chunk > 2048 ? chunk : 2048) * 1.5 + bs * 2 + tp / 8.0 * 1024;
    /* Attention data parallelism pads its graphs per DP rank. */
    if (dp > 1) reserve += bs * dp * 3 + (bs > 300 ? bs * dp * 1.5 : 0);
    if (gpu > 60 * 1024 && reserve < 10 * 1024) reserve = 10 * 1024;
    return round((gpu - reserve) / gpu * 1000) / 1000;
}

double scn_engine_mem_fraction(const scn_engine *e, const scn_deployment *d, const scn_hardware *h)
{
    if (d->gpu_memory_utilization_given) return d->gpu_memory_utilization;
    if (e->mem_rule == SCN_MEM_RULE_SGLANG_RESERVE && h && h->memory > 0) return sglang_reserve_fraction(d, h->memory);
    if (e->n_mem_fraction == 0) return d->gpu_memory_utilization;
    double f = e->mem_fraction[0];
    for (int i = 0; i < e->n_mem_fraction; i++)
        if (d->tensor_parallel >= e->mem_fraction_tp[i]) f = e->mem_fraction[i];
    return f;
}

/* `admission: {reserve: output, init_ratio, min_ratio, decay_steps, clip, retract_steps}`: SGLang's
 * reservation (scn_engine.adm_*). Every figure is the engine's and must be given; the ratio's
 * floor may not exceed its start, and the policy excludes cpu.no_evict (one admission rule). */
static int bind_admission(scn_ctx *c, const scn_node *m, const char *path, scn_engine *e)
{
    char p[256];
    const scn_node *s;
    if (sub_map(c, m, path, "admission", ADMISSION_KEYS, &s, p, sizeof p)) return -1;
    if (!s) return 0;
    int r = 0;
    if (scn_get_enum(c, s, p, "reserve", ADMISSION_RESERVES, &r)) return -1;
    e->adm_reserve = r == 1;
    if (!e->adm_reserve) return 0;
    static const char *const need[] = {"init_ratio", "min_ratio", "decay_steps", "clip", "retract_steps", NULL};
    for (int i = 0; need[i]; i++)
        if (!scn_map_get(s, need[i])) {
            char msg[160];
            snprintf(msg, sizeof msg, "reserve: output needs %s (the engine's figure; docs/cost-model.md, \"Admission\")",
                     need[i]);
            return fail_at(c, s, p, msg);
        }
    if (scn_get_qty(c, s, p, "init_ratio", SCN_UNIT_FRACTION, false, &e->adm_init) ||
        scn_get_qty(c, s, p, "min_ratio", SCN_UNIT_FRACTION, false, &e->adm_min) ||
        scn_get_int(c, s, p, "decay_steps", 1, 100000000, &e->adm_decay_steps) ||
        scn_get_int(c, s, p, "clip", 1, 1000000000, &e->adm_clip) ||
        scn_get_int(c, s, p, "retract_steps", 0, 1000000, &e->adm_retract_steps))
        return -1;
    char q[256];
    if (e->adm_init > 100) return fail_at(c, scn_map_get(s, "init_ratio"), scn_path_join(q, sizeof q, p, "init_ratio"),
                                          "init_ratio is a share of the remaining output: at most 100");
    if (e->adm_min > e->adm_init)
        return fail_at(c, scn_map_get(s, "min_ratio"), scn_path_join(q, sizeof q, p, "min_ratio"),
                       "min_ratio must not exceed init_ratio (the ratio only falls between resets)");
    if (e->no_evict) return fail_at(c, scn_map_get(s, "reserve"), scn_path_join(q, sizeof q, p, "reserve"),
                                    "reserve: output and cpu.no_evict are two admission rules; an engine has one");
    return 0;
}

int scn_bind_engine(scn_ctx *c, const scn_node *m, const char *path, scn_engine *e)
{
    if (scn_expect_map(c, m, path) || scn_check_keys(c, m, path, ENGINE_KEYS)) return -1;
    memset(e, 0, sizeof *e);
    snprintf(e->source, sizeof e->source, "%s", m->file ? m->file : "");
    e->allreduce = SCN_AR_NCCL;
    e->attn_kernel = SCN_AK_FLASH2;
    e->multi_step_stream = true;
    if (scn_get_str(c, m, path, "name", e->name, sizeof e->name)) return -1;
    char p[256];
    const scn_node *s;
    if (sub_map(c, m, path, "cpu", CPU_KEYS, &s, p, sizeof p)) return -1;
    if (s && (scn_get_qty(c, s, p, "step", SCN_UNIT_TIME, true, &e->step_cpu) ||
              scn_get_qty(c, s, p, "per_sequence", SCN_UNIT_TIME, true, &e->seq_cpu) ||
              scn_get_qty(c, s, p, "eager_layer", SCN_UNIT_TIME, true, &e->eager_layer) ||
              scn_get_bool(c, s, p, "async_scheduling", &e->async_scheduling) ||
              scn_get_bool(c, s, p, "extra_decode_step", &e->extra_decode_step) ||
              scn_get_bool(c, s, p, "no_evict", &e->no_evict) ||
              scn_get_bool(c, s, p, "async_output", &e->async_output) ||
              scn_get_bool(c, s, p, "multi_step", &e->multi_step) ||
              scn_get_bool(c, s, p, "multi_step_stream", &e->multi_step_stream)))
        return -1;
    if (sub_map(c, m, path, "launch", LAUNCH_KEYS, &s, p, sizeof p)) return -1;
    if (s && scn_get_qty(c, s, p, "kernel", SCN_UNIT_TIME, true, &e->kernel_launch)) return -1;
    if (sub_map(c, m, path, "cuda_graphs", GRAPH_KEYS, &s, p, sizeof p)) return -1;
    if (s) {
        e->cuda_graphs = true;
        if (scn_get_bool(c, s, p, "enabled", &e->cuda_graphs) ||
            scn_get_qty(c, s, p, "launch", SCN_UNIT_TIME, true, &e->graph_launch) ||
            scn_get_qty(c, s, p, "per_kernel", SCN_UNIT_TIME, true, &e->graph_kernel) ||
            bind_graph_sizes(c, s, p, e))
            return -1;
    }
    if (sub_map(c, m, path, "chunked_prefill", CHUNK_KEYS, &s, p, sizeof p)) return -1;
    if (s) {
        e->chunked_prefill = true;
        if (scn_get_bool(c, s, p, "enabled", &e->chunked_prefill) ||
            scn_get_int(c, s, p, "max_num_batched_tokens", 1, 1000000000, &e->max_num_batched_tokens) ||
            scn_get_bool(c, s, p, "at_least_max_model_len", &e->budget_covers_context))
            return -1;
        if (scn_map_get(s, "mixed")) {
            bool mixed = false;
            if (scn_get_bool(c, s, p, "mixed", &mixed)) return -1;
            e->prefill_mix = mixed ? SCN_PREFILL_MIX_ALWAYS : SCN_PREFILL_MIX_NEVER;
        }
        if (scn_get_bool(c, s, p, "unchunked_mla", &e->unchunked_mla) || bind_long_context(c, s, p, e)) return -1;
    }
    const scn_node *br = scn_map_get(m, "batch_defaults");
    if (br && bind_batch_rules(c, br, scn_path_join(p, sizeof p, path, "batch_defaults"), e)) return -1;
    if (sub_map(c, m, path, "allreduce", AR_KEYS, &s, p, sizeof p)) return -1;
    if (s) {
        int k = (int)e->allreduce;
        if (scn_get_enum(c, s, p, "impl", AR_IMPLS, &k) ||
            scn_get_qty(c, s, p, "oneshot_max", SCN_UNIT_BYTES, true, &e->oneshot_max) ||
            scn_get_qty(c, s, p, "custom_max", SCN_UNIT_BYTES, true, &e->custom_max) ||
            scn_get_int(c, s, p, "copies", 0, 4, &e->allreduce_copies))
            return -1;
        e->allreduce = (scn_allreduce_impl)k;
        if (e->allreduce != SCN_AR_NCCL && e->custom_max < e->oneshot_max)
            return fail_at(c, scn_map_get(s, "custom_max"), p, "custom_max must be at least oneshot_max");
    }
    if (sub_map(c, m, path, "memory", MEM_KEYS, &s, p, sizeof p)) return -1;
    if (s) {
        e->mem_given = true;
        int b = (int)e->mem_budget, rule = (int)e->mem_rule;
        if (scn_get_enum(c, s, p, "budget", MEM_BUDGETS, &b) || scn_get_enum(c, s, p, "fraction_rule", MEM_RULES, &rule) ||
            scn_get_qty(c, s, p, "non_torch", SCN_UNIT_BYTES, true, &e->mem_non_torch) ||
            scn_get_bool(c, s, p, "held_allreduce", &e->mem_held_allreduce) ||
            scn_get_int(c, s, p, "moe_chunk", 1, 1000000000, &e->mem_moe_chunk) ||
            scn_get_int(c, s, p, "sampler_bytes", 0, 1000, &e->mem_sampler_bytes) || bind_fractions(c, s, p, e))
            return -1;
        e->mem_budget = (scn_mem_budget)b;
        e->mem_rule = (scn_mem_rule)rule;
        if (e->mem_rule == SCN_MEM_RULE_SGLANG_RESERVE && e->mem_budget != SCN_MEM_STATIC)
            return fail_at(c, scn_map_get(s, "fraction_rule"), p, "sglang_reserve goes with budget static (mem_fraction_static)");
        if (e->mem_held_allreduce && e->mem_budget != SCN_MEM_TOTAL && e->mem_budget != SCN_MEM_DEVICE)
            return fail_at(c, scn_map_get(s, "held_allreduce"), p,
                           "held_allreduce goes with budget total or device (a profiler that reads the device's free memory)");
    }
    if (sub_map(c, m, path, "kv_offload", OFFLOAD_KEYS, &s, p, sizeof p)) return -1;
    if (s && scn_get_bool(c, s, p, "layerwise", &e->kv_layerwise)) return -1;
    if (sub_map(c, m, path, "mla", MLA_KEYS, &s, p, sizeof p)) return -1;
    if (s) {
        int mc = e->mla_expanded ? 1 : 0, ma = e->mla_materialized ? 1 : 0, md = (int)e->mla_decode;
        if (scn_get_enum(c, s, p, "cache", MLA_CACHES, &mc) || scn_get_enum(c, s, p, "absorbed", MLA_ABSORBED, &ma) ||
            scn_get_enum(c, s, p, "decode", MLA_DECODES, &md))
            return -1;
        e->mla_expanded = mc == 1;
        e->mla_materialized = ma == 1;
        e->mla_decode = (scn_mla_decode)md;
    }
    if (sub_map(c, m, path, "moe", MOE_KEYS, &s, p, sizeof p)) return -1;
    if (s) {
        int mk = (int)e->moe_kernel;
        if (scn_get_enum(c, s, p, "kernel", MOE_KERNELS, &mk) ||
            scn_get_qty(c, s, p, "grouped_routing", SCN_UNIT_TIME, true, &e->moe_grouped_routing))
            return -1;
        e->moe_kernel = (scn_moe_kernel)mk;
    }
    if (sub_map(c, m, path, "frontend", FRONTEND_KEYS, &s, p, sizeof p)) return -1;
    if (s && (scn_get_qty(c, s, p, "request", SCN_UNIT_TIME, true, &e->frontend_request) ||
              scn_get_qty(c, s, p, "per_prompt_token", SCN_UNIT_TIME, true, &e->frontend_token)))
        return -1;
    int k = (int)e->attn_kernel;
    if (scn_get_enum(c, m, path, "attention", AK_NAMES, &k)) return -1;
    e->attn_kernel = (scn_attn_kernel)k;
    int w = (int)e->weight_only;
    if (scn_get_enum(c, m, path, "weight_only", WO_NAMES, &w)) return -1;
    e->weight_only = (scn_weight_only)w;
    int mx = (int)e->mxfp4_layout;
    if (scn_get_enum(c, m, path, "mxfp4", MX_NAMES, &mx)) return -1;
    e->mxfp4_layout = (scn_mxfp4_layout)mx;
    int bf = (int)e->block_fp8;
    if (scn_get_enum(c, m, path, "block_fp8", BF8_NAMES, &bf)) return -1;
    e->block_fp8 = (scn_block_fp8)bf;
    int lh = e->lm_head_replicated ? 1 : 0;
    if (scn_get_enum(c, m, path, "lm_head", LM_HEAD_NAMES, &lh)) return -1;
    e->lm_head_replicated = lh == 1;
    if (scn_get_bool(c, m, path, "prefix_caching", &e->prefix_caching)) return -1;
    if (sub_map(c, m, path, "sampler", SAMPLER_KEYS, &s, p, sizeof p)) return -1;
    if (s && (scn_get_int(c, s, p, "bytes_per_logit", 0, 1000, &e->sampler_bytes_per_logit) ||
              scn_get_bool(c, s, p, "gather", &e->sampler_gather)))
        return -1;
    if (bind_admission(c, m, path, e)) return -1;
    if (!e->name[0]) snprintf(e->name, sizeof e->name, "%s", "unnamed-engine");
    return 0;
}

void scn_engine_apply(scn_scenario *s, const scn_engine *e)
{
    s->engine = *e;
    if (!s->hardware.overhead_given) {
        s->hardware.kernel_overhead = e->kernel_launch;
        s->hardware.step_overhead = e->step_cpu;
    }
}
