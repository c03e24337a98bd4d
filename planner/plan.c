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

int plan_enumerate(const scn_scenario *s, plan_result *r)
{
    const scn_options *o = &s->options;
    const scn_deployment *d = &s->deployment;
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
        c->c = (sim_choice){.layout = o->layout[idx[0]], .block_size = o->block_size[idx[1]],
                            .prefix_cache = o->prefix_cache[idx[2]], .kv_dtype = o->kv_dtype[idx[3]],
                            .attention = o->attention[idx[4]], .scheduler = o->scheduler[idx[5]],
                            .sink = o->sink[idx[6]], .window = o->window[idx[6]]};
        /* Contiguous allocation has no blocks: keep one candidate per contiguous choice. */
        if (c->c.layout == SCN_LAYOUT_CONTIGUOUS && idx[1] != 0) continue;
        if (c->c.layout == SCN_LAYOUT_CONTIGUOUS) c->c.block_size = o->block_size[0];
        c->max_num_seqs = o->n_max_seqs ? o->max_num_seqs[idx[7]] : d->max_num_seqs;
        c->max_batched = o->n_budget ? o->max_num_batched_tokens[idx[8]] : d->max_num_batched_tokens;
        c->tp = o->n_tp ? o->tensor_parallel[idx[9]] : d->tensor_parallel;
        c->replicas = o->n_replicas ? o->replicas[idx[10]] : d->replicas;
        c->kv_heads = o->n_kv_heads ? o->kv_heads[idx[11]] : 0;
        if (c->kv_heads == s->model.kv_heads) c->kv_heads = 0;
        c->hw = o->n_hardware ? idx[12] : -1;
        snprintf(c->hw_name, sizeof c->hw_name, "%s", c->hw >= 0 ? o->hardware[c->hw].name : s->hardware.name);
        c->n_seeds = r->seeds;
        for (int j = 0; j < PLAN_SEEDS_MAX; j++) c->seed_batch[j] = NAN;
        c->search_capacity = plan_objective_at_capacity(s);
        c->wformat = o->n_wformat ? idx[13] : -1;
        c->engine = o->n_engine ? idx[14] : -1;
        c->c.spec = o->n_spec ? idx[15] : 0;
        c->c.kv_offload = o->n_offload ? o->kv_offload[idx[16]] : SCN_OFFLOAD_OFF;
        c->c.preemption = o->n_preempt ? o->preemption[idx[17]] : SCN_PREEMPT_RECOMPUTE;
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
        char why[200];
        if (sim_choice_check(&c->c, why, sizeof why)) {
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
                c->status = PLAN_SKIPPED;
                snprintf(c->why, sizeof c->why, "does not fit: weights %.1f GiB + activations %.1f GiB + runtime %.1f GiB "
                         "exceed the %.1f GiB usable per GPU (%s) at tensor_parallel %d",
                         cap.weights / 1073741824.0, cap.activation / 1073741824.0, cap.runtime / 1073741824.0,
                         cap.usable / 1073741824.0, t.hardware.name, c->tp);
            }
        }
        r->n++;
    }
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

/* ---- parallel evaluation ---- */
typedef struct {
    const scn_scenario *s;
    plan_result *r;
    int shard_i, shard_n;
    long next, done, total;
    pthread_mutex_t lock;
    void (*progress)(void *ud, long done, long total);
    void *ud;
    char *err;
    size_t nerr;
    int failed;
} pool;

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

int plan_evaluate_one(const scn_scenario *s, plan_cand *c, char *err, size_t n)
{
    scn_scenario *t = malloc(sizeof *t);
    err[0] = 0;
    if (!t) { snprintf(err, n, "out of memory"); return -1; }
    plan_apply(s, c, t);
    bool cap = c->search_capacity && s->workload.arrival != SCN_ARRIVAL_TRACE;
    double first_rate = -1, first_lowest = s->workload.rate / 256;   /* first_rate -1: no seed searched yet */
    bool first_unbounded = false;
    double first_tok = 0;
    if (c->n_seeds < 1) c->n_seeds = 1;
    for (int k = 0; k < c->n_seeds; k++) {
        sim_metrics m;
        bool have_m = false;
        t->seed = s->seed + (unsigned long long)k;
        if (!(c->seed_done & (1u << k))) {
            int rc = sim_run_predicted(t, &c->c, &m, err, n);
            c->sims++;
            if (rc == SIM_E_DATA) {
                c->status = PLAN_SKIPPED;
                snprintf(c->why, sizeof c->why, "%s", err);
                free(t);
                return 0;
            }
            if (rc != SIM_OK) {
                if (!err[0]) snprintf(err, n, "out of memory");
                free(t);
                return -1;
            }
            plan_record_offered(s, c, k, &m);
            have_m = true;
        }
        if (!cap || (c->cap_done & (1u << k))) {
            if (c->cap_done & (1u << k) && first_rate < 0) {
                first_rate = c->seed_rate[k];
                first_unbounded = (c->seed_unbounded >> k) & 1;
                first_tok = c->seed_tok[k];
            }
            continue;
        }
        /* The first seed searches in doublings from the offered rate when its offered-load run
         * is trial-sized (that run is then its first trial: work reused), else from the cost
         * model's saturation rate (plan_capacity_hint: a warm start near the knee). Later seeds
         * start at the first seed's answer and step by 10 %, since seeds move capacity by a few
         * per cent. When the first seed met the SLO at no rate, later seeds try only its lowest
         * rate; when it kept up at every rate searched, later seeds try only that top rate
         * (stopping early either way). */
        plan_capacity_result x;
        bool trial_sized = have_m && t->workload.requests == plan_trial_requests(t);
        if (first_rate > 0 && first_unbounded) {
            sim_metrics top;
            memset(&x, 0, sizeof x);
            x.sims = 1;
            if (plan_sustains(s, c, t->seed, first_rate, c->replicas, &top)) {
                x.rate = first_rate;
                x.unbounded = true;
                x.m = top;
                x.out_tok_per_s = first_tok;   /* the first seed's steady tokens/s at the same rate */
            } else {
                plan_capacity_search(s, c, t->seed, c->replicas, first_rate, 2, PLAN_CAPACITY_TOL, &top, &x);
                x.sims++;
            }
        } else if (first_rate > 0) {
            plan_capacity_search(s, c, t->seed, c->replicas, first_rate, 1.1, PLAN_CAPACITY_TOL, NULL, &x);
        } else if (first_rate == 0) {
            sim_metrics low;
            memset(&x, 0, sizeof x);
            x.sims = 1;
            if (plan_sustains(s, c, t->seed, first_lowest, c->replicas, &low)) {
                plan_capacity_search(s, c, t->seed, c->replicas, first_lowest, 2, PLAN_CAPACITY_TOL, &low, &x);
                x.sims++;
            }
        } else {
            double hint = trial_sized ? s->workload.rate : plan_capacity_hint(s, c, c->replicas);
            plan_capacity_search(s, c, t->seed, c->replicas, hint, 2, PLAN_CAPACITY_TOL, trial_sized ? &m : NULL, &x);
            first_lowest = x.lowest;
        }
        c->sims += x.sims;
        c->seed_rate[k] = x.rate;
        c->seed_tok[k] = x.out_tok_per_s;
        c->seed_batch[k] = x.rate > 0 ? x.m.batch_mean : NAN;
        if (x.unbounded) c->seed_unbounded |= 1u << k; else c->seed_unbounded &= ~(1u << k);
        c->cap_done |= 1u << k;
        if (first_rate < 0) { first_rate = x.rate; first_unbounded = x.unbounded; first_tok = x.out_tok_per_s; }
    }
    free(t);
    c->status = PLAN_DONE;
    return 0;
}

static void *worker(void *p)
{
    pool *w = p;
    for (;;) {
        pthread_mutex_lock(&w->lock);
        long i = w->next++;
        pthread_mutex_unlock(&w->lock);
        if (i >= w->r->n) break;
        plan_cand *c = &w->r->c[i];
        if (c->status != PLAN_PENDING || i % w->shard_n != w->shard_i) continue;
        char err[512];
        int rc = plan_evaluate_one(w->s, c, err, sizeof err);
        pthread_mutex_lock(&w->lock);
        if (rc) {
            if (!w->failed) snprintf(w->err, w->nerr, "simulating a candidate failed: %s", err);
            w->failed = 1;
        }
        w->done++;
        if (w->progress) w->progress(w->ud, w->done, w->total);
        pthread_mutex_unlock(&w->lock);
    }
    return NULL;
}

int plan_evaluate(const scn_scenario *s, plan_result *r, int threads, int shard_i, int shard_n,
                  void (*progress)(void *ud, long done, long total), void *ud, char *err, size_t n)
{
    pool w = {.s = s, .r = r, .shard_i = shard_i, .shard_n = shard_n > 0 ? shard_n : 1, .progress = progress,
              .ud = ud, .err = err, .nerr = n};
    for (int i = 0; i < r->n; i++) if (r->c[i].status == PLAN_PENDING && i % w.shard_n == shard_i) w.total++;
    pthread_mutex_init(&w.lock, NULL);
    if (threads < 1) threads = 1;
    if (threads > 64) threads = 64;
    pthread_t th[64];
    int started = 0;
    for (int i = 0; i < threads; i++) if (pthread_create(&th[i], NULL, worker, &w) == 0) started++;
    if (!started) worker(&w);
    for (int i = 0; i < started; i++) pthread_join(th[i], NULL);
    pthread_mutex_destroy(&w.lock);
    return w.failed ? -1 : 0;
}
