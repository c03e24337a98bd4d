/* plan.c: candidates from the option space, and their parallel evaluation. */
#include "plan.h"
#include "../db/db.h"
#include "../model/kv_model.h"
#include "../model/kv_moe_parallel.h"
#include "../model/kv_spec.h"
#include "../model/kv_deploy.h"

#include <jansson.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int count_or_1(int n) { return n > 0 ? n : 1; }

static bool native_dtype(const scn_model *m, scn_dtype d)
{
    return d == SCN_DTYPE_FP32 || d == SCN_DTYPE_FP16 || d == SCN_DTYPE_BF16 || d == m->weight_dtype;
}

/* An engine or hardware option brings its own batch limits and chunking (the engine's
 * batch_defaults on that GPU; its V0 long-context, MLA and max_model_len rules; its default
 * scheduler), as the loader derives the scenario's own (scn_bind_scenario.c, bind_deployment):
 * `simulate --set engine=E --set hardware=H` and the candidate run the same. What the scenario
 * sets (deployment values, option lists) is kept. */
static bool engine_defaults(const scn_scenario *s, plan_cand *c)
{
    const scn_options *o = &s->options;
    const scn_deployment *d = &s->deployment;
    if (c->engine < 0 && c->hw < 0) return true;
    const scn_engine *e = c->engine >= 0 ? &o->engine[c->engine] : &s->engine;
    const scn_hardware *h = c->hw >= 0 ? &o->hardware[c->hw] : &s->hardware;
    int seqs, budget;
    scn_engine_batch_defaults(e, h, &seqs, &budget);
    if (d->max_num_batched_tokens_given) budget = d->max_num_batched_tokens;
    bool chunks = scn_engine_chunks(e, &s->model, d->max_model_len, d->scheduler_steps > 1, d->max_num_batched_tokens_given,
                                    &budget);
    if (!o->n_max_seqs && !d->max_num_seqs_given) { c->max_num_seqs = seqs; c->derived_seqs = true; }
    if (!o->n_budget && !d->max_num_batched_tokens_given) { c->max_batched = budget; c->derived_budget = true; }
    if (!o->scheduler_given) {
        c->c.scheduler = chunks ? SCN_SCHED_CHUNKED : SCN_SCHED_CONTINUOUS;
        c->derived_sched = true;
        /* Multi-step runs on the continuous scheduler only, as the loader requires of the
         * scenario's own engine (vLLM 0.6 refused chunked prefill with multi-step). */
        if (chunks && d->scheduler_steps > 1) return false;
    }
    return true;
}

/* The KV choice at option indices idx (plan_enumerate's first seven dimensions); contiguous
 * allocation has no blocks, so it takes the first block size. */
static sim_choice choice_at(const scn_options *o, const int *idx)
{
    sim_choice c = {.layout = o->layout[idx[0]], .block_size = o->block_size[idx[1]],
                    .prefix_cache = o->prefix_cache[idx[2]], .kv_dtype = o->kv_dtype[idx[3]],
                    .attention = o->attention[idx[4]], .scheduler = o->scheduler[idx[5]],
                    .sink = o->sink[idx[6]], .window = o->window[idx[6]]};
    if (c.layout == SCN_LAYOUT_CONTIGUOUS) c.block_size = o->block_size[0];
    return c;
}

/* Fills candidate c (its KV choice already set) from the option indices idx, in plan_enumerate's
 * dimension order: deployment values, hardware, weight format, engine, speculation, offload,
 * preemption, what the engine derives, names and risks. False when the engine's defaults rule the
 * candidate out (multi-step scheduling under an engine that chunks prefills). */
static bool fill_cand(const scn_scenario *s, const int *idx, int seeds, plan_cand *c)
{
    const scn_options *o = &s->options;
    const scn_deployment *d = &s->deployment;
    c->max_num_seqs = o->n_max_seqs ? o->max_num_seqs[idx[7]] : d->max_num_seqs;
    c->max_batched = o->n_budget ? o->max_num_batched_tokens[idx[8]] : d->max_num_batched_tokens;
    c->tp = o->n_tp ? o->tensor_parallel[idx[9]] : d->tensor_parallel;
    c->replicas = o->n_replicas ? o->replicas[idx[10]] : d->replicas;
    c->kv_heads = o->n_kv_heads ? o->kv_heads[idx[11]] : 0;
    if (c->kv_heads == s->model.kv_heads) c->kv_heads = 0;
    c->hw = o->n_hardware ? idx[12] : -1;
    snprintf(c->hw_name, sizeof c->hw_name, "%s", c->hw >= 0 ? o->hardware[c->hw].name : s->hardware.name);
    c->n_seeds = seeds;
    for (int j = 0; j < PLAN_SEEDS_MAX; j++) c->seed_batch[j] = NAN;
    c->search_capacity = plan_objective_at_capacity(s);
    c->wformat = o->n_wformat ? idx[13] : -1;
    c->engine = o->n_engine ? idx[14] : -1;
    c->c.spec = o->n_spec ? idx[15] : 0;
    c->c.kv_offload = o->n_offload ? o->kv_offload[idx[16]] : SCN_OFFLOAD_OFF;
    c->c.preemption = o->n_preempt ? o->preemption[idx[17]] : SCN_PREEMPT_RECOMPUTE;
    bool multi_ok = engine_defaults(s, c);
    const scn_spec *sp = kv_spec_get(s, c->c.spec);
    if (sp && sp->method == SCN_SPEC_DRAFT)
        snprintf(c->spec_name, sizeof c->spec_name, "draft(%.24s) k=%d a=%.2f", sp->draft.name, sp->k, sp->accept[0]);
    else if (sp)
        snprintf(c->spec_name, sizeof c->spec_name, "%s k=%d a=%.2f", SCN_SPEC_NAMES[sp->method], sp->k, sp->accept[0]);
    {   /* colocated: TP x replicas x DP attention ranks; disaggregated: both pools' GPUs */
        scn_deployment dd = *d;
        dd.tensor_parallel = c->tp;
        dd.replicas = c->replicas;
        c->gpus = kv_deploy_gpus(&dd);
    }
    const scn_wformat *wf = c->wformat >= 0 ? &o->wformat[c->wformat] : NULL;
    c->risk_weights = wf && wf->quant != SCN_WQ_NONE &&
                      (wf->quant != s->model.weight_quant || wf->dtype != s->model.weight_dtype);
    c->risk_dtype = !native_dtype(&s->model, c->c.kv_dtype);
    if (c->wformat >= 0) snprintf(c->wformat_name, sizeof c->wformat_name, "%s", scn_wformat_name(&o->wformat[c->wformat]));
    else {
        scn_wformat own = {s->model.weight_dtype, s->model.weight_quant, s->model.weight_group};
        snprintf(c->wformat_name, sizeof c->wformat_name, "%s", scn_wformat_name(&own));
    }
    snprintf(c->engine_name, sizeof c->engine_name, "%s", c->engine >= 0 ? o->engine[c->engine].name : s->engine.name);
    c->risk_window = c->c.window > 0;
    c->risk_gqa = c->kv_heads > 0 && c->kv_heads < s->model.kv_heads;
    c->allowed = (!c->risk_dtype || s->quality.allow_kv_dtype[c->c.kv_dtype]) &&
                 (!c->risk_window || s->quality.allow_window) && (!c->risk_gqa || s->quality.allow_gqa) &&
                 (!c->risk_weights || s->quality.allow_weight_quant[wf->quant]);
    c->status = PLAN_PENDING;
    return multi_ok;
}

/* Why fill_cand ruled a candidate out. */
static void multistep_why(const plan_cand *c, char *why, size_t n)
{
    snprintf(why, n, "multi-step scheduling (deployment.scheduler_steps) needs the continuous scheduler, and engine %s "
             "chunks prefills by default", c->engine_name);
}

int plan_enumerate(const scn_scenario *s, plan_result *r)
{
    const scn_options *o = &s->options;
    /* One dimension per option list (PLAN_DIMS; differs_only_in in plan_rank.c follows this order). */
    int dims[] = {o->n_layout, o->n_block, o->n_prefix, o->n_dtype, o->n_attention, o->n_sched, o->n_window,
                  count_or_1(o->n_max_seqs), count_or_1(o->n_budget), count_or_1(o->n_tp), count_or_1(o->n_replicas),
                  count_or_1(o->n_kv_heads), count_or_1(o->n_hardware), count_or_1(o->n_wformat),
                  count_or_1(o->n_engine), count_or_1(o->n_spec), count_or_1(o->n_offload), count_or_1(o->n_preempt)};
    int nd = (int)(sizeof dims / sizeof dims[0]);
    long total = 1;
    for (int i = 0; i < nd; i++) total *= dims[i];
    if (total > 100000) return -1;
    memset(r, 0, sizeof *r);
    r->c = calloc((size_t)total, sizeof *r->c);
    r->order = calloc((size_t)total, sizeof *r->order);
    if (!r->c || !r->order) { plan_result_free(r); return -1; }
    r->best = -1;
    r->seeds = PLAN_SEEDS_DEFAULT;
    int idx[PLAN_DIMS] = {0};
    for (long k = 0; k < total; k++) {
        /* Mixed-radix counter over the dimensions, last dimension fastest. */
        long rest = k;
        for (int i = nd - 1; i >= 0; i--) { idx[i] = (int)(rest % dims[i]); rest /= dims[i]; }
        plan_cand *c = &r->c[r->n];
        c->c = choice_at(o, idx);
        /* Contiguous allocation has no blocks: keep one candidate per contiguous choice. */
        if (c->c.layout == SCN_LAYOUT_CONTIGUOUS && idx[1] != 0) continue;
        bool multi_ok = fill_cand(s, idx, r->seeds, c);
        char why[200];
        if (!multi_ok) {
            c->status = PLAN_SKIPPED;
            multistep_why(c, c->why, sizeof c->why);
        } else if (sim_choice_check(&c->c, why, sizeof why)) {
            c->status = PLAN_SKIPPED;
            snprintf(c->why, sizeof c->why, "%s", why);
        } else {
            scn_scenario t;
            plan_apply(s, c, &t);
            kv_cache_cfg kc = kv_cache_cfg_make(&t, c->c.kv_dtype, c->c.sink, c->c.window);
            kv_capacity cap = kv_capacity_spec(&t, &kc, c->c.block_size, 0, kv_spec_get(s, c->c.spec));   /* proposer inside */
            if (kv_moe_parallel_on(&t) && !kv_spec_get(s, c->c.spec)) {   /* routed experts sharded over EP ranks */
                kv_moe_memory mm = kv_moe_memory_compute(&t, &kc);
                cap.weights = mm.weights;
                cap.kv_budget = mm.kv_budget;
            }
            if (cap.kv_budget <= 0) {
                /* A fraction of what is free after the weights (TensorRT-LLM) leaves 0 usable:
                 * the need is set against what the GPU has, as `kvplan memory` says it. */
                bool after = t.engine.mem_given && t.engine.mem_budget == SCN_MEM_FREE;
                c->status = PLAN_SKIPPED;
                snprintf(c->why, sizeof c->why, "does not fit: weights %.1f GiB + activations %.1f GiB + runtime %.1f GiB "
                         "exceed the %.1f GiB %s per GPU (%s) at tensor_parallel %d",
                         cap.weights / 1073741824.0, cap.activation / 1073741824.0, cap.runtime / 1073741824.0,
                         (after ? scn_hw_cuda_memory(&t.hardware) : cap.usable) / 1073741824.0,
                         after ? "that CUDA reports" : "usable", t.hardware.name, c->tp);
            }
        }
        r->n++;
    }
    return 0;
}

int plan_first(const scn_scenario *s, scn_scenario *out, sim_choice *ch, char *why, size_t n)
{
    int idx[PLAN_DIMS] = {0};
    plan_cand *c = calloc(1, sizeof *c);
    if (!c) { snprintf(why, n, "out of memory"); return -1; }
    c->c = choice_at(&s->options, idx);
    if (!fill_cand(s, idx, 1, c)) {
        multistep_why(c, why, n);
        free(c);
        return 1;
    }
    plan_apply(s, c, out);
    if (ch) *ch = c->c;
    free(c);
    return 0;
}

void plan_set_seeds(plan_result *r, int seeds)
{
    if (seeds < 1) seeds = 1;
    if (seeds > PLAN_SEEDS_MAX) seeds = PLAN_SEEDS_MAX;
    r->seeds = seeds;
    for (int i = 0; i < r->n; i++) r->c[i].n_seeds = seeds;
}

void plan_skip_disallowed(plan_result *r)
{
    for (int i = 0; i < r->n; i++) {
        plan_cand *c = &r->c[i];
        if (c->allowed || c->status != PLAN_PENDING) continue;
        c->status = PLAN_SKIPPED;
        snprintf(c->why, sizeof c->why, "changes the model's outputs, which the scenario's quality settings do not accept");
    }
}

void plan_set_capacity(plan_result *r, bool on)
{
    for (int i = 0; i < r->n; i++) r->c[i].search_capacity = on;
}

bool plan_objective_at_capacity(const scn_scenario *s)
{
    /* A trace, a closed loop or an offline run has no rate to scale: judged as it runs. */
    return s->objective != SCN_OBJ_P99_LATENCY && scn_arrival_has_rate(s->workload.arrival);
}

const char *plan_hardware_name(const scn_scenario *s, const plan_cand *c)
{
    return c->hw >= 0 && c->hw < s->options.n_hardware ? s->options.hardware[c->hw].name : s->hardware.name;
}

double plan_price(const scn_scenario *s, const plan_cand *c)
{
    /* Disaggregated pools may run on different hardware: the GPU-weighted mean of their prices,
     * so that price x GPUs is the pools' hourly cost. */
    if (s->deployment.disagg.on) {
        double gpus = kv_deploy_gpus(&s->deployment);
        double usd = kv_deploy_disagg_usd_per_hour(&s->deployment.disagg, s->usd_per_gpu_hour, s->hardware.name);
        return gpus > 0 ? usd / gpus : 0;
    }
    if (c->hw >= 0 && c->hw < s->options.n_hardware) {
        const scn_hardware *h = &s->options.hardware[c->hw];
        /* The scenario's price is for its own hardware; an option naming the same profile shares it. */
        if (s->usd_per_gpu_hour > 0 && !strcmp(h->name, s->hardware.name)) return s->usd_per_gpu_hour;
        return h->usd_per_gpu_hour;
    }
    return s->usd_per_gpu_hour > 0 ? s->usd_per_gpu_hour : s->hardware.usd_per_gpu_hour;
}

void plan_result_free(plan_result *r)
{
    for (int i = 0; i < r->n && r->c; i++) free(r->c[i].seed_m);
    free(r->c);
    free(r->order);
    memset(r, 0, sizeof *r);
}

void plan_apply(const scn_scenario *s, const plan_cand *c, scn_scenario *out)
{
    *out = *s;
    out->deployment.tensor_parallel = c->tp;
    out->deployment.replicas = c->replicas;
    out->deployment.max_num_seqs = c->max_num_seqs;
    out->deployment.max_num_batched_tokens = c->max_batched;
    if (c->kv_heads > 0) out->model.kv_heads = c->kv_heads;
    if (c->hw >= 0 && c->hw < s->options.n_hardware) out->hardware = s->options.hardware[c->hw];
    if (c->wformat >= 0 && c->wformat < s->options.n_wformat) kv_model_set_wformat(&out->model, &s->options.wformat[c->wformat]);
    /* The engine's overheads go into the hardware profile (unless it sets its own): again after a
     * hardware option replaced the profile, and for an engine option. */
    bool eng = c->engine >= 0 && c->engine < s->options.n_engine;
    if (eng || c->hw >= 0) scn_engine_apply(out, eng ? &s->options.engine[c->engine] : &s->engine);
}

void plan_describe(const plan_cand *c, char *buf, size_t n)
{
    char base[160];
    sim_choice_describe(&c->c, base, sizeof base);
    int used = snprintf(buf, n, "%s tp=%d x%d seqs=%d budget=%d", base, c->tp, c->replicas, c->max_num_seqs, c->max_batched);
    if (c->kv_heads > 0 && used > 0 && (size_t)used < n)
        used += snprintf(buf + used, n - (size_t)used, " kv_heads=%d", c->kv_heads);
    if (c->wformat >= 0 && used > 0 && (size_t)used < n)
        used += snprintf(buf + used, n - (size_t)used, " weights=%s", c->wformat_name);
    if (c->engine >= 0 && used > 0 && (size_t)used < n)
        used += snprintf(buf + used, n - (size_t)used, " engine=%s", c->engine_name);
    if (c->spec_name[0] && used > 0 && (size_t)used < n)
        used += snprintf(buf + used, n - (size_t)used, " spec=%s", c->spec_name);
    /* The hardware is named only when it is an option. */
    if (c->hw >= 0 && used > 0 && (size_t)used < n) snprintf(buf + used, n - (size_t)used, " on %s", c->hw_name);
}

char *plan_options_json(const scn_scenario *s, const plan_cand *c)
{
    /* The one options encoder (db_options_json), so a plan's key equals simulate's for the same choice. */
    scn_deployment d = {.tensor_parallel = c->tp, .replicas = c->replicas, .max_num_seqs = c->max_num_seqs,
                        .max_num_batched_tokens = c->max_batched, .disagg = s->deployment.disagg};
    return db_options_json(&c->c, &d, c->kv_heads, kv_spec_get(s, c->c.spec));
}

/* The objective of one seed's run at the offered load (higher is better). */
static double offered_objective(const scn_scenario *s, const plan_cand *c, const sim_metrics *m)
{
    double v;
    switch (s->objective) {
    case SCN_OBJ_THROUGHPUT: v = m->output_tok_per_s; break;
    case SCN_OBJ_P99_LATENCY: v = -plan_percentile(m, s->slo.n ? s->slo.terms[0].metric : SCN_METRIC_E2E, 99); break;
    case SCN_OBJ_COST: v = -(plan_price(s, c) * c->gpus / 3600.0) / m->output_tok_per_s * 1e6; break;
    default: v = m->goodput / c->gpus; break;
    }
    return isfinite(v) ? v : -INFINITY;
}

void plan_record_offered(const scn_scenario *s, plan_cand *c, int k, const sim_metrics *m)
{
    if (k == 0) c->m = *m;
    /* Kept for storing: one run per seed (n_seeds is fixed before evaluation starts). */
    if (!c->seed_m && k < c->n_seeds) c->seed_m = calloc((size_t)c->n_seeds, sizeof *c->seed_m);
    if (c->seed_m && k < c->n_seeds) c->seed_m[k] = *m;
    c->seed_offered[k] = offered_objective(s, c, m);
    if (plan_slo_met(s, m)) c->seed_slo |= 1u << k; else c->seed_slo &= ~(1u << k);
    c->seed_done |= 1u << k;
}

/* What a candidate's later seeds start from: its first searched seed's answer. */
typedef struct {
    double rate;               /* -1: no seed searched yet; 0: none within the SLO */
    double lowest;             /* the lowest rate that search tried */
    bool unbounded;
    double tok;                /* its steady output tokens/s */
} first_seed;

/* One seed's work, done without touching the candidate (so seeds run on several threads) and
 * written into it by commit_seed. */
typedef struct {
    bool ran;                  /* an offered-load run was simulated (m) */
    sim_metrics m;
    bool searched;             /* a capacity search ran (x) */
    plan_capacity_result x;
    long sims;
    bool skipped;              /* the candidate cannot run: err says why */
} seed_work;

/* Seed k of candidate c: its offered-load run when `offered` (not stored), then its search when
 * `cap` (capacity searched and not stored), from `first`, the first seed's answer when that is
 * known. Reads only the candidate's choice, never its results (other seeds' threads write
 * those). 0, or -1 on failure with the message in err. */
static int eval_seed(const scn_scenario *s, const plan_cand *c, int k, bool offered, bool cap, const first_seed *first,
                     double cutoff, bool again, plan_trials *memo, seed_work *o, char *err, size_t n)
{
    memset(o, 0, sizeof *o);
    scn_scenario *t = malloc(sizeof *t);
    if (!t) { snprintf(err, n, "out of memory"); return -1; }
    plan_apply(s, c, t);
    t->seed = s->seed + (unsigned long long)k;
    if (offered) {
        plan_trace_context(-1, k, "offered");
        double t0 = plan_trace_clock();
        int rc = sim_run_predicted(t, &c->c, &o->m, err, n);
        plan_trace_sim(t->workload.rate, t->workload.requests, rc == SIM_OK ? plan_slo_met(t, &o->m) : -1, false, t0);
        o->sims++;
        if (rc == SIM_E_DATA) { o->skipped = true; free(t); return 0; }
        if (rc != SIM_OK) {
            if (!err[0]) snprintf(err, n, "out of memory");
            free(t);
            return -1;
        }
        o->ran = true;
    }
    if (!cap) { free(t); return 0; }
    /* The first seed searches from the cost model's saturation rate (plan_capacity_hint: a
     * warm start near the knee) in strides of PLAN_CAPACITY_FIRST_STEP; its offered-load
     * run, when trial-sized, is a trial already known (work reused, one side of the bracket
     * for free). Later seeds start at the first seed's answer in strides just under the
     * resolution (PLAN_CAPACITY_SEED_STEP), since seeds move capacity by a few per cent:
     * two trials when it moved less than that. When the first seed met the SLO at no rate,
     * later seeds try only its lowest rate; when it kept up at every rate searched, later
     * seeds try only that top rate (stopping early either way). */
    plan_capacity_result *x = &o->x;
    o->searched = true;
    bool trial_sized = o->ran && t->workload.requests == plan_trial_requests(t, &c->c);
    plan_trace_context(-1, k, first->rate < 0 ? (cutoff > 0 ? "first-cut" : "first") : first->unbounded ? "later-unbounded"
                              : first->rate > 0 ? (again ? (cutoff > 0 ? "again-cut" : "again") : cutoff > 0 ? "later-cut" : "later")
                              : "later-none");
    if (first->rate > 0 && first->unbounded) {
        sim_metrics top;
        bool whole;
        memset(x, 0, sizeof *x);
        x->sims = 1;
        if (plan_sustains_early(s, c, t->seed, first->rate, c->replicas, &top, &whole)) {
            x->rate = first->rate;
            x->unbounded = true;
            x->m = top;
            x->out_tok_per_s = first->tok;   /* the first seed's steady tokens/s at the same rate */
        } else {
            plan_capacity_search(s, c, t->seed, c->replicas, first->rate, 2, PLAN_CAPACITY_TOL, &top, x);
            x->sims++;
        }
    } else if (first->rate > 0) {
        /* With a cutoff (several seeds: the rate below which this seed's answer keeps the mean
         * under the bound's bar) the search may stop once its answer is known to lie below it. */
        plan_capacity_search_memo(s, c, t->seed, c->replicas, first->rate, PLAN_CAPACITY_SEED_STEP, PLAN_CAPACITY_TOL,
                                  0, NULL, cutoff, memo, x);
    } else if (first->rate == 0) {
        sim_metrics low;
        bool whole;
        memset(x, 0, sizeof *x);
        x->sims = 1;
        if (plan_sustains_early(s, c, t->seed, first->lowest, c->replicas, &low, &whole)) {
            plan_capacity_search(s, c, t->seed, c->replicas, first->lowest, 2, PLAN_CAPACITY_TOL, &low, x);
            x->sims++;
        }
    } else {
        /* With a cutoff (the bound's bar, one seed) the search may stop once its answer is known
         * to lie below it (plan_capacity_search_below): the caller then skips the candidate. */
        plan_capacity_search_memo(s, c, t->seed, c->replicas, plan_capacity_hint(s, c, c->replicas),
                                  PLAN_CAPACITY_FIRST_STEP, PLAN_CAPACITY_TOL, s->workload.rate,
                                  trial_sized ? &o->m : NULL, cutoff, memo, x);
    }
    o->sims += x->sims;
    free(t);
    return 0;
}

/* Writes seed k's work into the candidate (one thread at a time). */
static void commit_seed(const scn_scenario *s, plan_cand *c, int k, const seed_work *o, const char *err)
{
    c->sims += o->sims;
    if (o->skipped) {
        c->status = PLAN_SKIPPED;
        snprintf(c->why, sizeof c->why, "%s", err);
        return;
    }
    if (o->ran) plan_record_offered(s, c, k, &o->m);
    if (!o->searched) return;
    const plan_capacity_result *x = &o->x;
    c->seed_rate[k] = x->rate;
    c->seed_tok[k] = x->out_tok_per_s;
    c->seed_batch[k] = x->rate > 0 ? x->m.batch_mean : NAN;
    if (x->unbounded) c->seed_unbounded |= 1u << k; else c->seed_unbounded &= ~(1u << k);
    c->cap_done |= 1u << k;
}

/* The first seed's answer once seed k is in (stored or searched): the first seed in order with a
 * capacity sets it; `lowest` is the lowest rate its search tried. */
static void note_first(const plan_cand *c, int k, const seed_work *o, first_seed *f)
{
    if (f->rate >= 0 || !(c->cap_done & (1u << k))) return;
    f->rate = c->seed_rate[k];
    f->unbounded = (c->seed_unbounded >> k) & 1;
    f->tok = c->seed_tok[k];
    if (o && o->searched) f->lowest = o->x.lowest;
}

static bool wants_capacity(const scn_scenario *s, const plan_cand *c)
{
    return c->search_capacity && s->workload.arrival != SCN_ARRIVAL_TRACE;
}

/* What seed k still needs (read while no other thread writes the candidate). */
static bool needs_offered(const plan_cand *c, int k) { return !(c->seed_done & (1u << k)); }
static bool needs_search(const scn_scenario *s, const plan_cand *c, int k)
{
    return wants_capacity(s, c) && !(c->cap_done & (1u << k));
}

int plan_evaluate_one(const scn_scenario *s, plan_cand *c, char *err, size_t n)
{
    err[0] = 0;
    first_seed first = {-1, s->workload.rate / 256, false, 0};
    if (c->n_seeds < 1) c->n_seeds = 1;
    for (int k = 0; k < c->n_seeds; k++) {
        seed_work o;
        if (eval_seed(s, c, k, needs_offered(c, k), needs_search(s, c, k), &first, 0, false, NULL, &o, err, n)) return -1;
        commit_seed(s, c, k, &o, err);
        if (o.skipped) return 0;
        note_first(c, k, &o, &first);
    }
    c->status = PLAN_DONE;
    return 0;
}

/* ---- parallel evaluation ----
 * The work items are seeds: a candidate's lead item runs its seeds in order until the first
 * search is in (later seeds start from its answer), then queues each remaining seed as an item
 * of its own, so a plan of fewer candidates than threads still uses every thread. */
typedef struct {
    int cand;
    int seed;                  /* -1: the candidate's lead item */
    int part;                  /* TASK_BOTH, or only the seed's search or only its offered-load run */
} task;
enum { TASK_BOTH, TASK_SEARCH, TASK_OFFERED };

typedef struct {
    first_seed first;
    int left;                  /* seeds still queued or running after the lead */
    bool searching;            /* the later seeds' items are searches only; offered-load runs follow */
    bool failed;
    double later_cutoff;       /* > 0: the later seeds' searches stop once their answer is below it */
    unsigned cut;              /* bit k: seed k's search stopped there (its answer is below later_cutoff) */
    bool recut;                /* the stopped seeds were searched again with a cutoff from the others' answers */
    double cut_at[PLAN_SEEDS_MAX];   /* seed k stopped (bit k of cut): its whole search's answer is at most this */
} cand_state;

typedef struct {
    const scn_scenario *s;
    plan_result *r;
    int shard_i, shard_n;
    long done, total;
    pthread_mutex_t lock;
    pthread_cond_t more;
    task *q;                   /* FIFO of lead items */
    long head, tail, cap_q;
    /* Later seeds' items, taken before any lead (last pushed first): a candidate's seeds finish
     * soon after its first one, so its objective is known early (the bound compares with it). */
    task *sq;
    long sn;
    int running;               /* items being worked on */
    cand_state *st;
    void (*progress)(void *ud, long done, long total);
    void *ud;
    char *err;
    size_t nerr;
    int failed;
    /* Skipping by bound (plan_set_bound): the best objectives so far among allowed candidates
     * within the SLO, descending, and the seed's request stream the bound reads. */
    bool bounding;
    double *best;              /* [r->bound_keep] objectives, descending */
    double *best_gpus;         /* their GPUs */
    int n_best;
    plan_bound_stream *stream[PLAN_SEEDS_MAX];   /* seed k's stream */
    long skipped;
    plan_trials **memo;        /* [cand x seeds + seed]: the trials run (plan_evaluate's, kept over its rounds); may be NULL */
    plan_twins *twins;         /* trials block-size twins share (through the memo's searches); may be NULL */
    int best_cand;             /* the candidate with the best objective so far (-1: none), whose neighbours go next */
    unsigned tried_dims;       /* option dimensions in which a neighbour of best_cand has been taken */
} pool;

static unsigned r_prune(const pool *w) { return w->r->prune_off; }

/* The trials of candidate i's seed k (created on first use; NULL without a table or memory). */
static plan_trials *memo_of(pool *w, int i, int k)
{
    if (!w->memo || k < 0 || k >= w->r->seeds) return NULL;
    plan_trials **m = &w->memo[(size_t)i * (size_t)w->r->seeds + (size_t)k];
    if (!*m) {
        *m = plan_trials_new();
        plan_trials_share(*m, w->twins);
    }
    return *m;
}

/* Under the lock. */
static void push(pool *w, int cand, int seed)
{
    if (w->tail < w->cap_q) w->q[w->tail++] = (task){cand, seed, TASK_BOTH};
}

/* Under the lock: the candidate's last item finished. A candidate that plan_rank would put in
 * its first group (allowed, within the SLO at the offered load, a capacity found) enters the
 * best objectives the bound compares with. */
static void cand_finished(pool *w, int i)
{
    plan_cand *c = &w->r->c[i];
    if (c->status == PLAN_PENDING) c->status = PLAN_DONE;
    w->done++;
    /* A candidate done is never searched again: its trials are not needed (a skipped one's are
     * kept: the reasons may need it simulated after all). */
    for (int k = 0; w->memo && c->status == PLAN_DONE && k < w->r->seeds; k++) {
        plan_trials **m = &w->memo[(size_t)i * (size_t)w->r->seeds + (size_t)k];
        w->r->trials_reused += plan_trials_reused(*m);
        plan_trials_free(*m);
        *m = NULL;
    }
    if (plan_trace_on()) plan_trace_note(i, c->status == PLAN_DONE ? "done" : c->why);
    int n = c->n_seeds, met = 0;
    unsigned all = n >= 32 ? ~0u : (1u << n) - 1;
    for (int k = 0; k < n; k++) met += (c->seed_slo >> k) & 1;
    if (w->bounding && c->status == PLAN_DONE && c->allowed && 2 * met > n && (c->cap_done & all) == all &&
        !(c->seed_unbounded & all)) {
        double v = 0;   /* plan_rank's objective: the mean over seeds of the rate per GPU */
        for (int k = 0; k < n; k++) v += c->seed_rate[k];
        v = v / n / c->gpus;
        int keep = w->r->bound_keep, j = -1;
        if (w->n_best < keep) j = w->n_best++;
        else if (v > w->best[keep - 1]) j = keep - 1;
        if (j >= 0) {   /* insertion into the descending list */
            for (; j > 0 && w->best[j - 1] < v; j--) { w->best[j] = w->best[j - 1]; w->best_gpus[j] = w->best_gpus[j - 1]; }
            w->best[j] = v;
            w->best_gpus[j] = c->gpus;
            if (j == 0 && w->best_cand != i) { w->best_cand = i; w->tried_dims = 0; }   /* the best so far */
        }
    }
    if (w->progress) w->progress(w->ud, w->done, w->total);
}

/* Under the lock: skips candidate i when its capacity provably stays below the bound_keep-th
 * best objective so far, by more than plan_rank's tie (0.1 %). True when skipped. */
static bool bound_skip(pool *w, int i)
{
    plan_result *r = w->r;
    plan_cand *c = &r->c[i];
    if (!w->bounding || w->n_best < r->bound_keep) return false;
    double thr = w->best[r->bound_keep - 1];
    double x = thr * c->gpus * (1 - 2e-3);
    char why[200];
    bool before_first = c->n_seeds > 1 && !(c->cap_done & 1);
    if (c->n_seeds == 1) {
        if (plan_bound_below(w->s, c, &w->stream[0], x, why, sizeof why) != 1) return false;
    } else if (before_first) {
        /* Several seeds, none simulated: every seed below x puts the mean below it. The first
         * seed as with one; a later seed's search starts below x (at the first one's answer, or,
         * when that found none, at most 1/256 of the first one's start: the guard), wherever
         * below x that is (plan_bound_below_later). */
        for (int j = 0; j < r->bound_keep; j++) if (c->gpus < w->best_gpus[j]) return false;
        double h = plan_capacity_hint(w->s, c, c->replicas), ro = w->s->workload.rate;
        if (!(fmin(h, ro > 0 ? ro : h) / 256 < x)) return false;
        if (plan_bound_below(w->s, c, &w->stream[0], x, why, sizeof why) != 1) return false;
        for (int k = 1; k < c->n_seeds; k++)
            if (plan_bound_below_later(w->s, c, w->s->seed + (unsigned long long)k, &w->stream[k], x, why, sizeof why) != 1)
                return false;
        snprintf(why + strlen(why), sizeof why - strlen(why), " on every seed");
    } else {
        /* Several seeds (the first one's search is in): with fewer GPUs than one of the best, the
         * ranking may prefer it when the seeds cannot tell it from the best, so it runs. Else
         * the mean over seeds stays below x when each later seed stays below
         * x' = (n x - first) / (n - 1); each later seed's search starts at the first seed's
         * answer in strides of PLAN_CAPACITY_SEED_STEP. */
        for (int j = 0; j < r->bound_keep; j++) if (c->gpus < w->best_gpus[j]) return false;
        if (!(c->cap_done & 1) || (c->seed_unbounded & 1) || !(c->seed_rate[0] > 0)) return false;
        int n = c->n_seeds;
        double a1 = c->seed_rate[0], xl = (n * x - a1) / (n - 1);
        for (int k = 1; k < n; k++) {
            unsigned long long seed = w->s->seed + (unsigned long long)k;
            if (plan_bound_below_search(w->s, c, seed, a1, PLAN_CAPACITY_SEED_STEP, 0, &w->stream[k], xl, why, sizeof why) != 1)
                return false;
        }
        snprintf(why + strlen(why), sizeof why - strlen(why), " on seeds 2-%d (%.4g on the first)", n, a1);
    }
    c->status = PLAN_SKIPPED;
    c->bound_skipped = true;
    snprintf(c->why, sizeof c->why, "not simulated%s: %.150s, under the %d best found (%.4g per GPU)",
             c->n_seeds > 1 && !before_first ? " beyond its first seed" : "", why, r->bound_keep, thr);
    w->skipped++;
    cand_finished(w, i);
    pthread_cond_broadcast(&w->more);
    return true;
}

static void fail(pool *w, const char *err)
{
    if (!w->failed) snprintf(w->err, w->nerr, "simulating a candidate failed: %s", err);
    w->failed = 1;
}

/* The lead item: seeds in order until the first search's answer is known (later seeds start
 * from it), then the rest queued as items of their own; without a search every seed is
 * independent, so all but the first are queued. */
/* True when seed 0's offered-load run is trial-sized: the search then reuses it (eval_seed). */
static bool offered_is_trial(const scn_scenario *s, const plan_cand *c)
{
    scn_scenario *t = malloc(sizeof *t);
    if (!t) return true;
    plan_apply(s, c, t);
    bool v = t->workload.requests == plan_trial_requests(t, &c->c);
    free(t);
    return v;
}

/* Under the lock, one seed, its search in: skips the offered-load run of a candidate whose
 * objective (its capacity per GPU; none when unbounded, which ranks last) is below the
 * bound_keep-th best by more than the ranking's tie. True when skipped. */
static bool searched_below(pool *w, int i)
{
    plan_result *r = w->r;
    plan_cand *c = &r->c[i];
    int n = c->n_seeds;
    unsigned all = n >= 32 ? ~0u : (1u << n) - 1;
    if (!w->bounding || w->n_best < r->bound_keep || (c->cap_done & all) != all) return false;
    /* Several seeds: one with fewer GPUs than one of the best may be preferred when the seeds
     * cannot tell it from the best (plan_rank), so it runs in full. */
    for (int j = 0; n > 1 && j < r->bound_keep; j++) if (c->gpus < w->best_gpus[j]) return false;
    double thr = w->best[r->bound_keep - 1], v = 0;
    for (int k = 0; k < n; k++) v += c->seed_rate[k];
    v = (c->seed_unbounded & all) ? -INFINITY : v / n / c->gpus;
    if (!(v < thr * (1 - 2e-3))) return false;
    c->status = PLAN_SKIPPED;
    c->bound_skipped = true;
    snprintf(c->why, sizeof c->why, "not simulated at the offered load: its capacity (%.4g %s%s) is below the %d best "
             "found (%.4g per GPU)", v * c->gpus, plan_rate_unit(w->s), n > 1 ? ", mean over seeds" : "", r->bound_keep, thr);
    w->skipped++;
    cand_finished(w, i);
    pthread_cond_broadcast(&w->more);
    return true;
}

/* Under the lock, candidate i's first seed searched (several seeds): the rate below which each
 * later seed's answer keeps the mean over seeds under the bound's bar, x' = (n x - a_1) / (n - 1)
 * for x the bar in the candidate's rate (docs/planner.md, "Seeking the cutoff"); 0 when the
 * bound does not apply (too few candidates found, or fewer GPUs than one of the best, which the
 * ranking may prefer: see bound_skip). */
static double later_cutoff(pool *w, int i)
{
    plan_result *r = w->r;
    plan_cand *c = &r->c[i];
    int n = c->n_seeds;
    if (!w->bounding || w->n_best < r->bound_keep || n < 2 || !(c->cap_done & 1) || (c->seed_unbounded & 1) ||
        !(c->seed_rate[0] > 0))
        return 0;
    for (int j = 0; j < r->bound_keep; j++) if (c->gpus < w->best_gpus[j]) return 0;
    double x = w->best[r->bound_keep - 1] * c->gpus * (1 - 2e-3);
    double xl = (n * x - c->seed_rate[0]) / (n - 1);
    return xl > 0 ? xl : 0;
}

/* Under the lock, every later seed's search in, some stopped below later_cutoff: skips the
 * candidate when the seeds' answers (those stopped counted at the cutoff, which they lie below)
 * keep its mean capacity per GPU under the bar found now (which only rises). True when skipped. */
static bool later_settled(pool *w, int i)
{
    plan_result *r = w->r;
    plan_cand *c = &r->c[i];
    cand_state *st = &w->st[i];
    int n = c->n_seeds;
    if (!w->bounding || w->n_best < r->bound_keep || !(st->later_cutoff > 0)) return false;
    double sum = 0;
    for (int k = 0; k < n; k++) {
        if (st->cut & (1u << k)) sum += st->cut_at[k];   /* at most the cutoff */
        else if ((c->cap_done & (1u << k)) && !(c->seed_unbounded & (1u << k))) sum += c->seed_rate[k];
        else return false;
    }
    double thr = w->best[r->bound_keep - 1], v = sum / n / c->gpus;
    if (!(v <= thr * (1 - 2e-3))) return false;
    c->status = PLAN_SKIPPED;
    c->bound_skipped = true;
    snprintf(c->why, sizeof c->why, "not simulated further: its later seeds' trials failed below %.4g %s, which keeps "
             "its mean capacity below the %d best found (%.4g per GPU)", st->later_cutoff, plan_rate_unit(w->s),
             r->bound_keep, thr);
    w->skipped++;
    cand_finished(w, i);
    pthread_cond_broadcast(&w->more);
    return true;
}

/* Under the lock, later_settled having failed: the cutoff for searching the stopped seeds again
 * such that, if each stops below it again, the mean over seeds stays under the bar:
 * x'' = (n x - the sum of the answers known) / (the seeds stopped), x the bar in the candidate's
 * rate (read now: it only rises). Each stopped seed's answer lies below the rate it stopped at,
 * so if every one stops again below x'', the sum lies below n x (docs/planner.md, "Several
 * seeds"). 0 when no cutoff applies (the searches then run in full). */
static double recut_cutoff(pool *w, int i)
{
    plan_result *r = w->r;
    plan_cand *c = &r->c[i];
    cand_state *st = &w->st[i];
    int n = c->n_seeds, m = 0;
    if (!w->bounding || w->n_best < r->bound_keep) return 0;
    for (int j = 0; j < r->bound_keep; j++) if (c->gpus < w->best_gpus[j]) return 0;
    double known = 0;
    for (int k = 0; k < n; k++) {
        if (st->cut & (1u << k)) m++;
        else if ((c->cap_done & (1u << k)) && !(c->seed_unbounded & (1u << k))) known += c->seed_rate[k];
        else return 0;
    }
    double x = r->c[i].gpus * w->best[r->bound_keep - 1] * (1 - 2e-3);
    /* A hair below, so that the sum later_settled forms from stops at it cannot round above n x. */
    double xc = m > 0 ? (n * x - known) / m * (1 - 1e-9) : 0;
    return xc > 0 ? xc : 0;
}

static void run_lead(pool *w, int i)
{
    plan_trace_context(i, 0, "lead");
    const scn_scenario *s = w->s;
    plan_cand *c = &w->r->c[i];
    cand_state *st = &w->st[i];
    bool cap = wants_capacity(s, c);
    char err[512] = "";
    int k = 0;
    pthread_mutex_lock(&w->lock);
    bool skipped = bound_skip(w, i);   /* several seeds: judged again after the first (below) */
    bool split = w->bounding && cap && needs_offered(c, 0) && needs_search(s, c, 0);
    pthread_mutex_unlock(&w->lock);
    if (skipped) return;
    /* When the first seed's offered-load run is not a trial the search could reuse, the search
     * needs nothing from it and runs first: a candidate whose capacity then ranks it below the
     * best found (or whose later seeds the bound shows below them) needs no offered-load run. */
    if (split && !offered_is_trial(s, c)) {
        seed_work o;
        pthread_mutex_lock(&w->lock);
        double cutoff = c->n_seeds == 1 && w->n_best >= w->r->bound_keep
                        ? w->best[w->r->bound_keep - 1] * c->gpus * (1 - 2e-3) : 0;
        pthread_mutex_unlock(&w->lock);
        int rc = eval_seed(s, c, 0, false, true, &st->first, cutoff, false, memo_of(w, i, 0), &o, err, sizeof err);
        pthread_mutex_lock(&w->lock);
        if (!rc && o.searched && o.x.cut) {
            /* Its capacity is below the bar: no need to know it closer (a neighbour of the
             * recommendation is searched again in full). */
            c->status = PLAN_SKIPPED;
            c->bound_skipped = true;
            c->sims += o.sims;
            snprintf(c->why, sizeof c->why, "not simulated further: its trials put its capacity at or below %.4g %s, "
                     "under the %d best found (%.4g per GPU)", o.x.cut_at, plan_rate_unit(s), w->r->bound_keep,
                     cutoff / c->gpus / (1 - 2e-3));
            w->skipped++;
            cand_finished(w, i);
            pthread_cond_broadcast(&w->more);
            pthread_mutex_unlock(&w->lock);
            return;
        }
        if (rc) {
            fail(w, err);
            cand_finished(w, i);
            pthread_cond_broadcast(&w->more);
            pthread_mutex_unlock(&w->lock);
            return;
        }
        commit_seed(s, c, 0, &o, err);
        note_first(c, 0, &o, &st->first);
        bool gone = c->n_seeds == 1 ? searched_below(w, i) : bound_skip(w, i);
        if (!gone && c->n_seeds > 1 && c->status == PLAN_PENDING && !w->failed) {
            /* The later seeds' searches next (they start from this answer); the offered-load
             * runs once every search is in (run_seed). */
            st->searching = true;
            st->later_cutoff = later_cutoff(w, i);
            for (int j = c->n_seeds - 1; j >= 1; j--) { w->sq[w->sn++] = (task){i, j, TASK_SEARCH}; st->left++; }
            pthread_cond_broadcast(&w->more);
            pthread_mutex_unlock(&w->lock);
            return;
        }
        pthread_mutex_unlock(&w->lock);
        if (gone) return;
    }
    for (; k < c->n_seeds; k++) {
        seed_work o;
        pthread_mutex_lock(&w->lock);
        bool offered = needs_offered(c, k), search = needs_search(s, c, k);
        pthread_mutex_unlock(&w->lock);
        int rc = eval_seed(s, c, k, offered, search, &st->first, 0, false, memo_of(w, i, k), &o, err, sizeof err);
        pthread_mutex_lock(&w->lock);
        if (rc) { fail(w, err); pthread_mutex_unlock(&w->lock); break; }
        commit_seed(s, c, k, &o, err);
        note_first(c, k, &o, &st->first);
        bool stop = o.skipped || !cap || st->first.rate >= 0;
        pthread_mutex_unlock(&w->lock);
        if (stop) { k++; break; }
    }
    pthread_mutex_lock(&w->lock);
    /* Several seeds: the later seeds' searches start from the first seed's answer, so the
     * bound can judge them now (bound_skip). */
    if (!w->failed && c->status == PLAN_PENDING && k < c->n_seeds && k == 1 && bound_skip(w, i)) {
        pthread_mutex_unlock(&w->lock);
        return;
    }
    if (!w->failed && c->status == PLAN_PENDING)
        for (int j = c->n_seeds - 1; j >= k; j--) { w->sq[w->sn++] = (task){i, j, TASK_BOTH}; st->left++; }
    if (st->left == 0) cand_finished(w, i);
    pthread_cond_broadcast(&w->more);
    pthread_mutex_unlock(&w->lock);
}

static void run_seed(pool *w, int i, int k, int part)
{
    plan_trace_context(i, k, "seed");
    const scn_scenario *s = w->s;
    plan_cand *c = &w->r->c[i];
    cand_state *st = &w->st[i];
    char err[512] = "";
    seed_work o;
    pthread_mutex_lock(&w->lock);
    bool skip = c->status != PLAN_PENDING;   /* a seed found it cannot run: the rest need not */
    bool offered = part != TASK_SEARCH && needs_offered(c, k), search = part != TASK_OFFERED && needs_search(s, c, k);
    double cutoff = part == TASK_SEARCH ? st->later_cutoff : 0;
    bool again = part == TASK_SEARCH && st->recut;
    pthread_mutex_unlock(&w->lock);
    int rc = skip ? 0 : eval_seed(s, c, k, offered, search, &st->first, cutoff, again, memo_of(w, i, k), &o, err,
                                  sizeof err);
    pthread_mutex_lock(&w->lock);
    if (rc) fail(w, err);
    else if (!skip && c->status == PLAN_PENDING && o.searched && o.x.cut) {
        c->sims += o.sims;   /* only that its answer is below the cutoff is known (later_settled) */
        st->cut |= 1u << k;
        st->cut_at[k] = o.x.cut_at;
    } else if (!skip && c->status == PLAN_PENDING) commit_seed(s, c, k, &o, err);
    bool settled = false;
    if (--st->left == 0 && st->searching && st->cut && !w->failed && c->status == PLAN_PENDING) {
        settled = later_settled(w, i);
        if (!settled) {
            /* Some later seed stopped below its cutoff but the others do not keep the mean
             * under the bar: those searches run again, once more with a cutoff when the answers
             * now known leave one (recut_cutoff), else in full; either way on the trials
             * already run (memo_of). */
            double next = st->recut || (r_prune(w) & PLAN_PRUNE_RECUT) ? 0 : recut_cutoff(w, i);
            for (int j = c->n_seeds - 1; j >= 1; j--)
                if (st->cut & (1u << j)) {
                    w->sq[w->sn++] = (task){i, j, TASK_SEARCH};
                    st->left++;
                    w->r->recut_searches += next > 0;
                }
            st->later_cutoff = next;
            st->recut = true;
            pthread_cond_broadcast(&w->more);
        }
        st->cut = 0;
    }
    if (st->left == 0) {
        /* Every seed's search is in: a candidate whose mean capacity then ranks it below the best
         * found needs no offered-load runs (searched_below finishes it); otherwise they run now. */
        bool finished = settled;
        if (st->searching) {
            st->searching = false;
            if (!settled && !w->failed && c->status == PLAN_PENDING) {
                if (searched_below(w, i)) finished = true;
                else {
                    for (int j = c->n_seeds - 1; j >= 0; j--) { w->sq[w->sn++] = (task){i, j, TASK_OFFERED}; st->left++; }
                    pthread_cond_broadcast(&w->more);
                }
            }
        }
        if (st->left == 0 && !finished) cand_finished(w, i);
    }
    pthread_mutex_unlock(&w->lock);
}

/* Under the lock, before a lead is taken: with the bound, a queued candidate one option away
 * from the best found so far moves to the head of the queue (the rest keep their order): the
 * first in queue order that differs from it in a dimension not yet tried from it, else the first
 * neighbour. Good candidates tend to sit next to the best, so the bar the bound compares with
 * rises early; and the best's one-option neighbours are the ones the recommendation's reasons
 * read, which are simulated in full whatever happens (plan_evaluate), so running them early
 * spares skipping them and simulating them again. The order changes the cost only, never what
 * is ranked (docs/planner.md, "Neighbours first"). */
static void next_lead_first(pool *w)
{
    if (!w->bounding || w->best_cand < 0 || w->head >= w->tail || (w->r->prune_off & PLAN_PRUNE_NEIGHBOURS)) return;
    const plan_cand *b = &w->r->c[w->best_cand];
    /* One neighbour per option dimension first (the first in queue order), then the others;
     * within the next 4,096 queued (a scan per lead taken: bounded on the largest plans). */
    long pick = -1, end = w->tail - w->head > 4096 ? w->head + 4096 : w->tail;
    int pick_dim = -1;
    for (long j = w->head; j < end; j++) {
        const plan_cand *c = &w->r->c[w->q[j].cand];
        if (w->q[j].seed >= 0 || !plan_one_option_apart(b, c)) continue;
        int d = 0;
        while (d < PLAN_DIMS && !plan_option_differs(b, c, d)) d++;
        if (d < PLAN_DIMS && !(w->tried_dims & (1u << d))) { pick = j; pick_dim = d; break; }
        if (pick < 0) pick = j;
    }
    if (pick < 0) return;
    if (pick_dim >= 0) w->tried_dims |= 1u << pick_dim;
    task t = w->q[pick];
    memmove(&w->q[w->head + 1], &w->q[w->head], sizeof *w->q * (size_t)(pick - w->head));
    w->q[w->head] = t;
}

static void *worker(void *p)
{
    pool *w = p;
    pthread_mutex_lock(&w->lock);
    for (;;) {
        while (w->head == w->tail && w->sn == 0 && w->running > 0 && !w->failed) pthread_cond_wait(&w->more, &w->lock);
        if ((w->head == w->tail && w->sn == 0) || w->failed) break;
        if (w->sn == 0) next_lead_first(w);
        task t = w->sn > 0 ? w->sq[--w->sn] : w->q[w->head++];
        w->running++;
        pthread_mutex_unlock(&w->lock);
        if (t.seed < 0) run_lead(w, t.cand); else run_seed(w, t.cand, t.seed, t.part);
        pthread_mutex_lock(&w->lock);
        w->running--;
        pthread_cond_broadcast(&w->more);
    }
    pthread_cond_broadcast(&w->more);
    pthread_mutex_unlock(&w->lock);
    return NULL;
}

void plan_set_bound(plan_result *r, int keep) { r->bound_keep = keep > 0 ? keep : 0; }
void plan_set_prune_off(plan_result *r, unsigned bits) { r->prune_off = bits; }

/* Whether plan_evaluate may skip by bound: the cases plan_bound_below's proof covers (goodput
 * per GPU at capacity), a plan that sees every candidate (no shards), and no speculative
 * settings (their explanation reads the best-ranked candidate of each setting, wherever it
 * ranks). */
static bool may_bound(const scn_scenario *s, const plan_result *r, int shard_n)
{
    if (r->bound_keep < 1 || shard_n > 1 || s->objective != SCN_OBJ_GOODPUT_PER_GPU || !plan_objective_at_capacity(s) ||
        s->options.n_spec > 0)
        return false;
    for (int i = 0; i < r->n; i++)
        if (r->c[i].status == PLAN_PENDING && (r->c[i].n_seeds != r->seeds || !r->c[i].search_capacity)) return false;
    return true;
}

/* Queue order when bounding: the cost model's saturation rate per GPU, highest first, so that
 * strong candidates are evaluated early and the bound has a high bar soon. Ties keep the
 * enumeration order. */
typedef struct { double key; int i; } keyed;
static int by_key(const void *a, const void *b)
{
    const keyed *x = a, *y = b;
    if (x->key != y->key) return x->key > y->key ? -1 : 1;
    return x->i - y->i;
}

static int run_pool(const scn_scenario *s, plan_result *r, int threads, int shard_i, int shard_n, bool bounding,
                    plan_trials **memo, plan_twins *twins, void (*progress)(void *ud, long done, long total), void *ud,
                    char *err, size_t n);

int plan_evaluate(const scn_scenario *s, plan_result *r, int threads, int shard_i, int shard_n,
                  void (*progress)(void *ud, long done, long total), void *ud, char *err, size_t n)
{
    bool bounding = may_bound(s, r, shard_n);
    /* With the bound, searches stop at cutoffs and candidates skipped are simulated again when
     * the reasons need them: their trials are kept and reused (pool.memo). */
    plan_trials **memo = bounding && r->n > 0 && !(r->prune_off & PLAN_PRUNE_MEMO)
                         ? calloc((size_t)r->n * (size_t)r->seeds, sizeof *memo) : NULL;
    r->trials_reused = 0;
    r->recut_searches = 0;
    r->trials_shared = 0;
    /* Block-size twins share their trials (docs/planner.md, "Block-size twins"), through the
     * kept trials' searches. */
    plan_twins *twins = memo && !(r->prune_off & PLAN_PRUNE_TWINS) ? plan_twins_new() : NULL;
    int rc = run_pool(s, r, threads, shard_i, shard_n, bounding, memo, twins, progress, ud, err, n);
    /* The recommendation's gates and reasons compare it with the candidates one option away
     * from it (and from the one a gate passed over): simulate any of those the bound skipped,
     * rank again, until none is missing. The first bound_keep ranks need nothing: the bound
     * skipped only candidates below them. */
    for (int round = 0; bounding && rc == 0 && round < 64; round++) {
        plan_rank(s, r);
        int focus[3] = {r->best, r->risk_gated ? r->risk_gated_cand : -1, r->spec_gated ? r->spec_gated_cand : -1};
        /* A dimension in which the recommendation has no runnable one-option alternative (such
         * as contiguous against a prefix cache) is explained against the best-ranked candidate
         * differing there (plan_explain): every skipped one that differs there is needed. */
        bool nearest[PLAN_DIMS] = {false};
        if (r->best >= 0)
            for (int d = 0; d < PLAN_DIMS; d++) {
                bool alt = false, differ = false;
                for (int i = 0; i < r->n && !alt; i++) {
                    const plan_cand *c = &r->c[i];
                    if (!plan_option_differs(&r->c[r->best], c, d)) continue;
                    differ = true;
                    alt = plan_one_option_apart(&r->c[r->best], c) && (c->status == PLAN_DONE || c->bound_skipped);
                }
                nearest[d] = differ && !alt;
            }
        /* With several seeds plan_rank recommends a candidate with fewer GPUs than the first-ranked
         * one whenever the seeds cannot tell the two apart, however far down it ranks. bound_skip
         * and searched_below spare such candidates only against the best found when they are
         * judged: a candidate with more GPUs that finishes later and ranks first makes every
         * candidate skipped before it with fewer GPUs one the rule may pick, so all are needed. */
        const plan_cand *top = NULL;
        for (int i = 0; i < r->n && !top; i++)
            if (r->c[r->order[i]].status == PLAN_DONE && r->c[r->order[i]].allowed) top = &r->c[r->order[i]];
        long woke = 0;
        for (int i = 0; i < r->n; i++) {
            plan_cand *c = &r->c[i];
            if (!c->bound_skipped) continue;
            bool need = top && top->obj.n > 1 && c->gpus < top->gpus;
            for (int f = 0; f < 3 && !need; f++) need = focus[f] >= 0 && plan_one_option_apart(&r->c[focus[f]], c);
            for (int d = 0; d < PLAN_DIMS && !need; d++) need = nearest[d] && plan_option_differs(&r->c[r->best], c, d);
            if (!need) continue;
            c->bound_skipped = false;
            c->status = PLAN_PENDING;
            c->why[0] = 0;
            woke++;
        }
        if (!woke) break;
        rc = run_pool(s, r, threads, shard_i, shard_n, false, memo, twins, progress, ud, err, n);
    }
    r->trials_shared = plan_twins_shared(twins);
    plan_twins_free(twins);
    for (long k = 0; memo && k < (long)r->n * r->seeds; k++) {
        r->trials_reused += plan_trials_reused(memo[k]);
        plan_trials_free(memo[k]);
    }
    free(memo);
    return rc;
}

static int run_pool(const scn_scenario *s, plan_result *r, int threads, int shard_i, int shard_n, bool bounding,
                    plan_trials **memo, plan_twins *twins, void (*progress)(void *ud, long done, long total), void *ud,
                    char *err, size_t n)
{
    pool w = {.s = s, .r = r, .shard_i = shard_i, .shard_n = shard_n > 0 ? shard_n : 1, .progress = progress,
              .ud = ud, .err = err, .nerr = n, .bounding = bounding, .memo = memo, .twins = twins, .best_cand = -1};
    long items = 0;
    for (int i = 0; i < r->n; i++)
        if (r->c[i].status == PLAN_PENDING && i % w.shard_n == shard_i) {
            w.total++;
            if (r->c[i].n_seeds < 1) r->c[i].n_seeds = 1;
            items += 1 + 2 * r->c[i].n_seeds;   /* the lead, each seed's search and its offered-load run */
        }
    w.q = malloc(sizeof *w.q * (size_t)(items > 0 ? items : 1));
    w.sq = malloc(sizeof *w.sq * (size_t)(items > 0 ? items : 1));
    w.st = calloc((size_t)(r->n > 0 ? r->n : 1), sizeof *w.st);
    if (!w.q || !w.sq || !w.st) {
        free(w.q);
        free(w.sq);
        free(w.st);
        snprintf(err, n, "out of memory");
        return -1;
    }
    w.cap_q = items;
    for (int i = 0; i < r->n; i++) w.st[i].first = (first_seed){-1, s->workload.rate / 256, false, 0};
    keyed *ord = w.bounding ? malloc(sizeof *ord * (size_t)(r->n > 0 ? r->n : 1)) : NULL;
    w.best = w.bounding ? calloc((size_t)r->bound_keep, sizeof *w.best) : NULL;
    w.best_gpus = w.bounding ? calloc((size_t)r->bound_keep, sizeof *w.best_gpus) : NULL;
    if (w.bounding && (!ord || !w.best || !w.best_gpus)) w.bounding = false;
    int n_ord = 0;
    for (int i = 0; i < r->n; i++) {
        if (r->c[i].status != PLAN_PENDING || i % w.shard_n != shard_i) continue;
        if (ord) ord[n_ord++] = (keyed){plan_capacity_hint(s, &r->c[i], r->c[i].replicas) / r->c[i].gpus, i};
        else push(&w, i, -1);
    }
    if (ord) {
        qsort(ord, (size_t)n_ord, sizeof *ord, by_key);
        for (int j = 0; j < n_ord; j++) push(&w, ord[j].i, -1);
    }
    free(ord);
    pthread_mutex_init(&w.lock, NULL);
    pthread_cond_init(&w.more, NULL);
    if (threads < 1) threads = 1;
    if (threads > 64) threads = 64;
    pthread_t th[64];
    int started = 0;
    for (int i = 0; i < threads; i++) if (pthread_create(&th[i], NULL, worker, &w) == 0) started++;
    if (!started) worker(&w);
    for (int i = 0; i < started; i++) pthread_join(th[i], NULL);
    pthread_cond_destroy(&w.more);
    pthread_mutex_destroy(&w.lock);
    free(w.q);
    free(w.sq);
    free(w.st);
    free(w.best);
    free(w.best_gpus);
    for (int k = 0; k < PLAN_SEEDS_MAX; k++) plan_bound_stream_free(w.stream[k]);
    return w.failed ? -1 : 0;
}
