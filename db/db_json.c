/* db_json.c: the resolved scenario and an option choice as canonical JSON (sorted keys,
 * compact), the form runs are stored and hashed in. */
#include "db.h"

#include <jansson.h>
#include <stdlib.h>


static json_t *model_json(const scn_model *m)
{
    return json_pack("{s:s, s:i, s:i, s:i, s:i, s:i, s:i, s:i, s:b, s:b, s:i, s:i, s:s, s:i, s:i, s:i, s:i, s:i, s:i, "
                     "s:i, s:i, s:i, s:i, s:i, s:i}",
                     "name", m->name, "layers", m->layers, "hidden", m->hidden, "heads", m->heads, "kv_heads", m->kv_heads,
                     "head_dim", m->head_dim, "intermediate", m->intermediate, "vocab", m->vocab,
                     "tie_embeddings", m->tie_embeddings, "attention_bias", m->attention_bias,
                     "norms_per_layer", m->norms_per_layer, "max_position", m->max_position,
                     "weight_dtype", scn_dtype_name(m->weight_dtype), "sliding_window", m->sliding_window,
                     "sliding_layers", m->sliding_layers, "experts", m->experts, "experts_per_token", m->experts_per_token,
                     "moe_intermediate", m->moe_intermediate, "shared_experts", m->shared_experts,
                     "dense_layers", m->dense_layers, "kv_lora_rank", m->kv_lora_rank, "q_lora_rank", m->q_lora_rank,
                     "qk_rope_head_dim", m->qk_rope_head_dim, "qk_nope_head_dim", m->qk_nope_head_dim,
                     "v_head_dim", m->v_head_dim);
}

static json_t *hardware_json(const scn_hardware *h)
{
    json_t *flops = json_object();
    for (int d = 0; d < SCN_DTYPE_COUNT; d++) json_object_set_new(flops, scn_dtype_name((scn_dtype)d), json_real(h->flops[d]));
    return json_pack("{s:s, s:f, s:f, s:o, s:i, s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:b}",
                     "name", h->name, "memory_bytes", h->memory, "memory_bandwidth", h->memory_bandwidth, "flops", flops,
                     "link", (int)h->link, "link_bandwidth", h->link_bandwidth, "link_latency_s", h->link_latency,
                     "eff_bandwidth", h->eff_bandwidth, "eff_compute", h->eff_compute, "eff_attention", h->eff_attention,
                     "eff_link", h->eff_link, "kernel_overhead_s", h->kernel_overhead, "step_overhead_s", h->step_overhead,
                     "runtime_memory_bytes", h->runtime_memory, "calibrated", h->calibrated);
}

static json_t *dist_json(const scn_dist *d)
{
    return json_pack("{s:s, s:f, s:f, s:i, s:i, s:s}", "dist", SCN_DIST_NAMES[d->kind], "mean", d->mean, "sigma", d->sigma,
                     "min", d->min, "max", d->max, "file", d->file);
}

static json_t *int_list(const int *v, int n)
{
    json_t *a = json_array();
    for (int i = 0; i < n; i++) json_array_append_new(a, json_integer(v[i]));
    return a;
}

static json_t *name_list(const char *const *names, const int *idx, int n)
{
    json_t *a = json_array();
    for (int i = 0; i < n; i++) json_array_append_new(a, json_string(names[idx[i]]));
    return a;
}

/* Prefill/decode disaggregation: the pools and the hand-off link (sim/disagg.h). */
static json_t *disagg_json(const scn_disagg *g)
{
    return json_pack("{s:{s:i, s:i, s:s}, s:{s:i, s:i, s:s}, s:{s:s, s:f, s:f, s:b}}", "prefill", "replicas",
                     g->prefill.replicas, "tensor_parallel", g->prefill.tensor_parallel, "hardware", g->prefill.hardware.name,
                     "decode", "replicas", g->decode.replicas, "tensor_parallel", g->decode.tensor_parallel, "hardware",
                     g->decode.hardware.name, "transfer", "link", SCN_LINK_NAMES[g->link], "bandwidth", g->bandwidth,
                     "latency_s", g->latency, "layerwise", g->layerwise);
}

char *db_scenario_json(const scn_scenario *s)
{
    const scn_options *o = &s->options;
    const scn_workload *w = &s->workload;
    const scn_deployment *d = &s->deployment;
    int tmp[SCN_OPT_MAX];
    json_t *opt = json_object();
    for (int i = 0; i < o->n_layout; i++) tmp[i] = o->layout[i];
    json_object_set_new(opt, "kv_layout", name_list(SCN_LAYOUT_NAMES, tmp, o->n_layout));
    json_object_set_new(opt, "block_size", int_list(o->block_size, o->n_block));
    json_t *pc = json_array();
    for (int i = 0; i < o->n_prefix; i++) json_array_append_new(pc, json_boolean(o->prefix_cache[i]));
    json_object_set_new(opt, "prefix_cache", pc);
    json_t *dt = json_array();
    for (int i = 0; i < o->n_dtype; i++) json_array_append_new(dt, json_string(scn_dtype_name(o->kv_dtype[i])));
    json_object_set_new(opt, "kv_dtype", dt);
    for (int i = 0; i < o->n_attention; i++) tmp[i] = o->attention[i];
    json_object_set_new(opt, "attention", name_list(SCN_ATTN_NAMES, tmp, o->n_attention));
    for (int i = 0; i < o->n_sched; i++) tmp[i] = o->scheduler[i];
    json_object_set_new(opt, "scheduler", name_list(SCN_SCHED_NAMES, tmp, o->n_sched));
    json_t *win = json_array();
    for (int i = 0; i < o->n_window; i++) json_array_append_new(win, json_pack("{s:i, s:i}", "sink", o->sink[i], "window", o->window[i]));
    json_object_set_new(opt, "window", win);
    json_t *q = json_object();
    for (int dd = SCN_DTYPE_FP8; dd <= SCN_DTYPE_INT4; dd++)
        json_object_set_new(q, scn_dtype_name((scn_dtype)dd),
                            json_pack("{s:s, s:i, s:s, s:b}", "granularity", SCN_QUANT_GRAN_NAMES[o->quant[dd].granularity],
                                      "group_size", o->quant[dd].group_size, "scale_dtype",
                                      scn_dtype_name(o->quant[dd].scale_dtype), "zero_point", o->quant[dd].zero_point));
    json_object_set_new(opt, "kv_quant", q);
    if (o->n_spec > 0) {
        /* Speculative decoding, only when listed, so older records keep their digest. */
        json_t *sp = json_array();
        for (int i = 0; i < o->n_spec; i++) {
            const scn_spec *x = &o->spec[i];
            json_t *acc = json_array();
            for (int j = 0; j < x->k; j++) json_array_append_new(acc, json_real(x->accept[j]));
            json_array_append_new(sp, json_pack("{s:s, s:i, s:o, s:s}", "method", SCN_SPEC_NAMES[x->method], "k", x->k,
                                                "acceptance", acc, "model", x->method == SCN_SPEC_DRAFT ? x->draft.name : ""));
        }
        json_object_set_new(opt, "speculative", sp);
    }
    /* KV offload and preemption, only when not the defaults, so older records keep their digest. */
    bool tiers = o->n_offload > 1 || (o->n_offload == 1 && o->kv_offload[0] != SCN_OFFLOAD_OFF) || o->n_preempt > 1 ||
                 (o->n_preempt == 1 && o->preemption[0] != SCN_PREEMPT_RECOMPUTE);
    if (tiers) {
        for (int i = 0; i < o->n_offload; i++) tmp[i] = o->kv_offload[i];
        json_object_set_new(opt, "kv_offload", name_list(SCN_OFFLOAD_NAMES, tmp, o->n_offload));
        for (int i = 0; i < o->n_preempt; i++) tmp[i] = o->preemption[i];
        json_object_set_new(opt, "preemption", name_list(SCN_PREEMPT_NAMES, tmp, o->n_preempt));
        json_t *cap = json_pack("{s:f, s:f}", "cpu", o->offload_cpu_bytes, "disk", o->offload_disk_bytes);
        bool remote = false;   /* the remote store's figures only when a choice uses it: older digests stay */
        for (int i = 0; i < o->n_offload; i++) remote |= scn_offload_remote(o->kv_offload[i]);
        if (remote) json_object_set_new(cap, "remote", json_real(o->offload_remote_bytes));
        json_object_set_new(opt, "kv_offload_capacity", cap);
        json_object_set_new(opt, "swap_space", json_real(o->swap_space));
        const scn_tier *t[] = {&s->hardware.host, &s->hardware.nvme, &s->hardware.remote};
        json_t *hw = json_array();
        for (int i = 0; i < (remote ? 3 : 2); i++)
            json_array_append_new(hw, json_pack("{s:s, s:f, s:f, s:f, s:f}", "link", t[i]->link, "capacity", t[i]->capacity,
                                                "bandwidth", t[i]->bandwidth, "efficiency", t[i]->efficiency, "latency_s",
                                                t[i]->latency));
        json_object_set_new(opt, "tiers_hardware", hw);   /* host, nvme[, remote] */
    }
    json_t *slo = json_array();
    for (int i = 0; i < s->slo.n; i++)
        json_array_append_new(slo, json_pack("{s:s, s:f, s:f}", "metric", SCN_METRIC_NAMES[s->slo.terms[i].metric],
                                             "percentile", s->slo.terms[i].percentile, "limit_s", s->slo.terms[i].limit));
    json_t *root = json_pack(
        "{s:s, s:o, s:o, s:{s:i, s:i, s:s, s:f, s:i, s:i, s:i}, s:{s:I, s:s, s:f, s:f, s:s, s:o, s:o, s:i, s:i, s:f, "
        "s:f, s:i, s:f}, s:o, s:o, s:I}",
        "name", s->name, "model", model_json(&s->model), "hardware", hardware_json(&s->hardware), "deployment",
        "tensor_parallel", d->tensor_parallel, "replicas", d->replicas, "router", SCN_ROUTER_NAMES[d->router],
        "gpu_memory_utilization", d->gpu_memory_utilization, "max_model_len", d->max_model_len, "max_num_seqs",
        d->max_num_seqs, "max_num_batched_tokens", d->max_num_batched_tokens, "workload", "requests",
        (json_int_t)w->requests, "arrival", SCN_ARRIVAL_NAMES[w->arrival], "rate", w->rate, "cv", w->cv, "trace", w->trace,
        "prompt_tokens", dist_json(&w->prompt), "output_tokens", dist_json(&w->output), "prefix_groups",
        w->prefix_groups, "prefix_tokens", w->prefix_tokens, "prefix_share", w->prefix_share, "prefix_zipf",
        w->prefix_zipf, "turns", w->turns, "think_time_s", w->think_time, "slo", slo, "options", opt, "seed",
        (json_int_t)s->seed);
    if (!root) return NULL;
    /* Expert and attention-DP parallelism, added only when used so older records keep their digest. */
    json_t *dj = json_object_get(root, "deployment");
    if ((d->expert_parallel > 1 || d->attention_dp > 1 || d->expert_skew > 0) &&
        (json_object_set_new(dj, "expert_parallel", json_integer(d->expert_parallel)) ||
         json_object_set_new(dj, "attention_data_parallel", json_integer(d->attention_dp)) ||
         json_object_set_new(dj, "expert_skew", json_real(d->expert_skew)))) { json_decref(root); return NULL; }
    /* Disaggregation, added only when on so older records keep their digest. */
    if (d->disagg.on && json_object_set_new(dj, "disaggregation", disagg_json(&d->disagg))) { json_decref(root); return NULL; }
    /* Closed-loop and windowed settings, added only when used so older records keep their form. */
    json_t *wj = json_object_get(root, "workload");
    if (w->arrival == SCN_ARRIVAL_CLOSED &&
        (json_object_set_new(wj, "concurrency", json_integer(w->concurrency)) ||
         json_object_set_new(wj, "client_think_time_s", json_real(w->client_think_time)))) { json_decref(root); return NULL; }
    /* Offline prompts sent through the server, added only when so, so older records keep their digest. */
    if (w->arrival == SCN_ARRIVAL_OFFLINE && w->via_server &&
        json_object_set_new(wj, "via", json_string("server"))) { json_decref(root); return NULL; }
    /* max_tokens sent by the client, added only when so, so older records keep their digest. */
    if (w->max_tokens_sent && json_object_set_new(wj, "max_tokens", json_string("output"))) { json_decref(root); return NULL; }
    if ((w->skip_first || w->skip_last || w->skip_first_frac > 0 || w->skip_last_frac > 0) &&
        json_object_set_new(wj, "measure", json_pack("{s:I, s:I, s:f, s:f}", "skip_first", (json_int_t)w->skip_first,
                                                     "skip_last", (json_int_t)w->skip_last, "skip_first_frac",
                                                     w->skip_first_frac, "skip_last_frac", w->skip_last_frac))) {
        json_decref(root);
        return NULL;
    }
    /* A window cut by time, added only when so, so older records keep their digest. */
    if (w->measure_by_time) {
        json_t *mj = json_object_get(wj, "measure");
        if (!mj) {
            mj = json_object();
            if (!mj || json_object_set_new(wj, "measure", mj)) { json_decref(root); return NULL; }
        }
        if (json_object_set_new(mj, "by", json_string("time"))) { json_decref(root); return NULL; }
    }
    char *out = json_dumps(root, JSON_COMPACT | JSON_SORT_KEYS | JSON_REAL_PRECISION(17));
    json_decref(root);
    return out;
}

/* The options key: the choice and the deployment it ran on, as canonical JSON. Every writer of
 * a run's options (simulate, run, validate, plan) calls this one encoder, so equal choices on
 * equal deployments have byte-equal keys and a stored run can be found and paired by its key.
 * kv_heads is a planner's override of the model's KV heads, 0 for the model's own. */
/* The speculative setting itself, not its index in a list: two scenarios whose first entry
 * differs (method, k, per-position acceptance, draft model) are different runs, and the same
 * setting at another index is the same run. */
static json_t *spec_json(const scn_spec *sp)
{
    json_t *acc = json_array();
    if (!acc) return NULL;
    for (int i = 0; i < sp->k && i < SCN_SPEC_K_MAX; i++)
        if (json_array_append_new(acc, json_real(sp->accept[i]))) { json_decref(acc); return NULL; }
    json_t *j = json_pack("{s:s, s:i, s:o}", "method", SCN_SPEC_NAMES[sp->method], "k", sp->k, "acceptance", acc);
    if (!j) return NULL;
    if (sp->method == SCN_SPEC_DRAFT) {
        const scn_model *m = &sp->draft;
        json_t *dm = json_pack("{s:s, s:i, s:i, s:i, s:i, s:i, s:i}", "name", m->name, "layers", m->layers, "hidden",
                               m->hidden, "heads", m->heads, "kv_heads", m->kv_heads, "intermediate", m->intermediate,
                               "vocab", m->vocab);
        if (!dm || json_object_set_new(j, "draft", dm)) { json_decref(j); return NULL; }
    }
    return j;
}

char *db_options_json(const sim_choice *c, const scn_deployment *d, int kv_heads, const scn_spec *sp)
{
    json_t *j = json_pack("{s:s, s:i, s:b, s:s, s:s, s:s, s:i, s:i, s:i, s:i, s:i, s:i, s:i}", "kv_layout",
                          SCN_LAYOUT_NAMES[c->layout], "block_size", c->layout == SCN_LAYOUT_PAGED ? c->block_size : 0,
                          "prefix_cache", c->prefix_cache, "kv_dtype", scn_dtype_name(c->kv_dtype), "attention",
                          SCN_ATTN_NAMES[c->attention], "scheduler", SCN_SCHED_NAMES[c->scheduler], "sink", c->sink, "window", c->window,
                          "tensor_parallel", d->tensor_parallel, "replicas", d->replicas, "max_num_seqs",
                          d->max_num_seqs, "max_num_batched_tokens", d->max_num_batched_tokens, "kv_heads",
                          kv_heads);
    if (!j) return NULL;
    /* Only when speculation is on, so keys without it keep their form. */
    if (sp && sp->method != SCN_SPEC_OFF && sp->k > 0) {
        json_t *x = spec_json(sp);
        if (!x || json_object_set_new(j, "speculative", x)) { json_decref(j); return NULL; }
    }
    /* Offload and swap only when chosen, so keys without them keep their form (docs/simulator.md,
     * "KV offload tiers"). */
    if (c->kv_offload != SCN_OFFLOAD_OFF &&
        json_object_set_new(j, "kv_offload", json_string(SCN_OFFLOAD_NAMES[c->kv_offload]))) { json_decref(j); return NULL; }
    if (c->preemption != SCN_PREEMPT_RECOMPUTE &&
        json_object_set_new(j, "preemption", json_string(SCN_PREEMPT_NAMES[c->preemption]))) { json_decref(j); return NULL; }
    /* The pools a disaggregated run ran on, only then, so colocated keys keep their form. */
    if (d->disagg.on && json_object_set_new(j, "disaggregation", disagg_json(&d->disagg))) { json_decref(j); return NULL; }
    /* Acceptance rates are the only reals: 12 significant digits name them without binary noise. */
    char *out = json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS | JSON_REAL_PRECISION(12));
    json_decref(j);
    return out;
}
