/* plan_rank.c: scoring candidates against the SLO and objective, the Pareto front, and the
 * recommendation's reasons in terms of the cost model. */
#include "plan.h"
#include "../model/kv_model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

double plan_percentile(const sim_metrics *m, scn_metric metric, double pct)
{
    sim_quantity q = metric == SCN_METRIC_TTFT ? SIM_Q_TTFT : metric == SCN_METRIC_TPOT ? SIM_Q_TPOT
                   : metric == SCN_METRIC_ITL ? SIM_Q_ITL : SIM_Q_E2E;
    const sim_summary *x = &m->q[q];
    /* The summary holds p50, p90, p95, p99: take the nearest one at or above the percentile. */
    if (pct <= 50) return x->p50;
    if (pct <= 90) return x->p90;
    if (pct <= 95) return x->p95;
    if (pct <= 99) return x->p99;
    return x->max;
}

bool plan_slo_met(const scn_scenario *s, const sim_metrics *m)
{
    for (int i = 0; i < s->slo.n; i++) {
        double v = plan_percentile(m, s->slo.terms[i].metric, s->slo.terms[i].percentile);
        if (!(v <= s->slo.terms[i].limit)) return false;
    }
    return m->requests > 0;
}

/* The latency the objective and the Pareto front use: the first SLO metric's p99, else E2E p99. */
static double latency(const scn_scenario *s, const sim_metrics *m)
{
    return plan_percentile(m, s->slo.n ? s->slo.terms[0].metric : SCN_METRIC_E2E, 99);
}

static const plan_result *cmp_r;

/* Allowed and within the SLO first, then allowed, then the rest; each group by objective. */
static int group(const plan_cand *c)
{
    if (c->status != PLAN_DONE) return 3;
    return c->allowed ? (c->slo_met ? 0 : 1) : 2;
}

static int by_rank(const void *a, const void *b)
{
    const plan_cand *x = &cmp_r->c[*(const int *)a], *y = &cmp_r->c[*(const int *)b];
    int gx = group(x), gy = group(y);
    if (gx != gy) return gx - gy;
    /* Objectives within 0.1 % are a tie: then lower p99 latency, then less KV memory. */
    double scale = fmax(fabs(x->objective), fabs(y->objective));
    if (fabs(x->objective - y->objective) > 1e-3 * scale) return x->objective > y->objective ? -1 : 1;
    if (x->latency_p99 != y->latency_p99) return x->latency_p99 < y->latency_p99 ? -1 : 1;
    if (x->m.kv_util_peak != y->m.kv_util_peak) return x->m.kv_util_peak < y->m.kv_util_peak ? -1 : 1;
    return *(const int *)a - *(const int *)b;   /* stable: enumeration order */
}

void plan_rank(const scn_scenario *s, plan_result *r)
{
    for (int i = 0; i < r->n; i++) {
        plan_cand *c = &r->c[i];
        r->order[i] = i;
        if (c->status != PLAN_DONE) continue;
        c->slo_met = plan_slo_met(s, &c->m);
        c->latency_p99 = latency(s, &c->m);
        switch (s->objective) {
        case SCN_OBJ_THROUGHPUT: c->objective = c->m.output_tok_per_s; break;
        case SCN_OBJ_P99_LATENCY: c->objective = -c->latency_p99; break;
        case SCN_OBJ_COST:
            /* dollars per million output tokens, negated */
            c->objective = -(s->usd_per_gpu_hour * c->gpus / 3600.0) / c->m.output_tok_per_s * 1e6;
            break;
        default: c->objective = c->m.goodput / c->gpus; break;
        }
        if (!isfinite(c->objective)) c->objective = -INFINITY;
    }
    /* Pareto front of output throughput per GPU against p99 latency, over evaluated candidates. */
    for (int i = 0; i < r->n; i++) {
        plan_cand *c = &r->c[i];
        if (c->status != PLAN_DONE) continue;
        double ti = c->m.output_tok_per_s / c->gpus;
        c->pareto = true;
        for (int j = 0; j < r->n && c->pareto; j++) {
            const plan_cand *d = &r->c[j];
            if (j == i || d->status != PLAN_DONE) continue;
            double tj = d->m.output_tok_per_s / d->gpus;
            if (tj >= ti && d->latency_p99 <= c->latency_p99 && (tj > ti || d->latency_p99 < c->latency_p99)) c->pareto = false;
        }
    }
    cmp_r = r;
    qsort(r->order, (size_t)r->n, sizeof *r->order, by_rank);
    r->best = -1;
    for (int i = 0; i < r->n; i++) {
        const plan_cand *c = &r->c[r->order[i]];
        if (c->status == PLAN_DONE && c->allowed) { r->best = r->order[i]; break; }
    }
}

/* ---- reasons ---- */
static const char *objective_name(scn_objective o)
{
    static const char *const N[] = {"goodput per GPU", "output throughput", "p99 latency", "cost per million tokens"};
    return N[o];
}

static void objective_value(const scn_scenario *s, double v, char *buf, size_t n)
{
    switch (s->objective) {
    case SCN_OBJ_THROUGHPUT: snprintf(buf, n, "%.0f tokens/s", v); break;
    case SCN_OBJ_P99_LATENCY: snprintf(buf, n, "%.3f s", -v); break;
    case SCN_OBJ_COST: snprintf(buf, n, "$%.3f per million tokens", -v); break;
    default: snprintf(buf, n, "%.3f req/s per GPU", v); break;
    }
}

/* How much better a is than b on the objective, as a signed percentage of b. */
static double gain(const scn_scenario *s, double a, double b)
{
    if (s->objective == SCN_OBJ_P99_LATENCY || s->objective == SCN_OBJ_COST) return b != 0 ? (b - a) / b * 100 : 0;
    return b != 0 ? (a - b) / fabs(b) * 100 : 0;
}

/* The candidate equal to `base` except in dimension `dim`, with a different value there. */
static int differs_only_in(const plan_cand *a, const plan_cand *b, int dim)
{
    int same[12] = {
        a->c.layout == b->c.layout, a->c.block_size == b->c.block_size || a->c.layout == SCN_LAYOUT_CONTIGUOUS,
        a->c.prefix_cache == b->c.prefix_cache, a->c.kv_dtype == b->c.kv_dtype, a->c.attention == b->c.attention,
        a->c.scheduler == b->c.scheduler, a->c.window == b->c.window && a->c.sink == b->c.sink,
        a->max_num_seqs == b->max_num_seqs, a->max_batched == b->max_batched, a->tp == b->tp,
        a->replicas == b->replicas, a->kv_heads == b->kv_heads};
    if (same[dim]) return 0;
    for (int i = 0; i < 12; i++) if (i != dim && !same[i]) return 0;
    return 1;
}

static void dim_value(const plan_cand *c, int dim, char *buf, size_t n)
{
    static const char *const SCHED[] = {"static batching", "continuous batching", "chunked prefill"};
    switch (dim) {
    case 0: snprintf(buf, n, "%s", c->c.layout == SCN_LAYOUT_PAGED ? "paged KV" : "contiguous KV"); break;
    case 1: snprintf(buf, n, "block size %d", c->c.block_size); break;
    case 2: snprintf(buf, n, "prefix caching %s", c->c.prefix_cache ? "on" : "off"); break;
    case 3: snprintf(buf, n, "%s KV", scn_dtype_name(c->c.kv_dtype)); break;
    case 4: snprintf(buf, n, "%s attention", c->c.attention == SCN_ATTN_FLASH ? "flash" : "naive"); break;
    case 5: snprintf(buf, n, "%s", SCHED[c->c.scheduler]); break;
    case 6: if (c->c.window) snprintf(buf, n, "sink %d + window %d", c->c.sink, c->c.window); else snprintf(buf, n, "no window"); break;
    case 7: snprintf(buf, n, "max_num_seqs %d", c->max_num_seqs); break;
    case 8: snprintf(buf, n, "a %d-token step budget", c->max_batched); break;
    case 9: snprintf(buf, n, "tensor parallel %d", c->tp); break;
    case 10: snprintf(buf, n, "%d replica%s", c->replicas, c->replicas > 1 ? "s" : ""); break;
    default: snprintf(buf, n, "%d KV heads", c->kv_heads ? c->kv_heads : 0); break;
    }
}

int plan_explain(const scn_scenario *s, const plan_result *r, char lines[][PLAN_LINE], int max)
{
    int n = 0;
    if (r->best < 0 || max <= 0) return 0;
    const plan_cand *b = &r->c[r->best];
    char desc[300], val[96];
    plan_describe(b, desc, sizeof desc);
    objective_value(s, b->objective, val, sizeof val);
    const sim_metrics *m = &b->m;
    if (n < max) snprintf(lines[n++], PLAN_LINE, "Recommended: %.200s, for %s %.60s%s.", desc, objective_name(s->objective), val,
                          b->slo_met ? " within the SLO" : "; no allowed candidate meets the SLO, this one comes closest");
    /* Which cost binds: the cost model's view of a typical decode and prefill step. */
    scn_scenario t;
    plan_apply(s, b, &t);
    kv_cache_cfg kc = kv_cache_cfg_make(&t, b->c.kv_dtype, b->c.sink, b->c.window);
    int batch = (int)lround(m->batch_mean < 1 ? 1 : m->batch_mean);
    if (batch > 4096) batch = 4096;
    long ctx = lround(s->workload.prompt.mean + s->workload.prefix_tokens * s->workload.prefix_share +
                      s->workload.output.mean / 2);
    kv_seq_work *w = malloc(sizeof *w * (size_t)batch);
    if (w) {
        for (int i = 0; i < batch; i++) w[i] = (kv_seq_work){1, ctx};
        kv_step_cost dc = kv_step_time(&t, &kc, b->c.attention, w, batch);
        double kv = dc.op[KV_OP_ATTENTION].bytes, total = 0;
        for (int i = 0; i < KV_OP_COUNT; i++) total += dc.op[i].bytes;
        kv_seq_work pf = {(long)lround(s->workload.prompt.mean + s->workload.prefix_tokens * s->workload.prefix_share), 0};
        kv_step_cost pc = kv_step_time(&t, &kc, b->c.attention, &pf, 1);
        const char *binding;
        char why[300];
        double queue_share = m->q[SIM_Q_TTFT].mean > 0 ? m->q[SIM_Q_QUEUE].mean / m->q[SIM_Q_TTFT].mean : 0;
        if (m->preemptions > 0 || m->kv_util_peak > 0.95) {
            binding = "KV memory caps concurrency";
            snprintf(why, sizeof why, "the cache peaked at %.0f %% of %ld blocks with %ld preemptions, so the batch (mean %.1f) "
                     "cannot grow further", 100 * m->kv_util_peak, m->kv_blocks, m->preemptions, m->batch_mean);
        } else if (queue_share > 0.5) {
            binding = "queueing binds";
            snprintf(why, sizeof why, "%.0f %% of the mean TTFT (%.3f s) is waiting for admission", 100 * queue_share,
                     m->q[SIM_Q_TTFT].mean);
        } else if (dc.bound == KV_BOUND_COMPUTE) {
            binding = "compute binds in decode";
            snprintf(why, sizeof why, "a decode step of %d sequences at %ld tokens of context does %.3g TFLOP in %.2f ms",
                     batch, ctx, dc.op[KV_OP_MLP].flops / 1e12, dc.seconds * 1e3);
        } else {
            binding = dc.bound == KV_BOUND_OVERHEAD ? "fixed per-step overhead binds in decode" : "memory bandwidth binds in decode";
            snprintf(why, sizeof why, "a decode step of %d sequences at %ld tokens of context moves %.2f GiB (%.0f %% of it KV) "
                     "in %.2f ms, %.0f %% of it bandwidth-bound; the cache is at most %.0f %% full",
                     batch, ctx, total / 1073741824.0, 100 * kv / total, dc.seconds * 1e3,
                     100 * (dc.seconds - dc.op[KV_OP_STEP].seconds) / dc.seconds, 100 * m->kv_util_peak);
        }
        if (n < max) snprintf(lines[n++], PLAN_LINE, "What binds: %s: %.300s. A %ld-token prefill is %s-bound (%.1f ms).",
                              binding, why, pf.new_tokens, kv_bound_name(pc.bound), pc.seconds * 1e3);
        free(w);
    }
    /* How far each chosen option moved the objective: the best against itself with one option changed. */
    for (int dim = 0; dim < 12 && n < max; dim++) {
        const plan_cand *alt = NULL;
        for (int i = 0; i < r->n; i++) {
            const plan_cand *c = &r->c[r->order[i]];
            if (c->status == PLAN_DONE && differs_only_in(b, c, dim)) { alt = c; break; }
        }
        if (!alt) continue;
        char mine[96], theirs[96], av[96];
        dim_value(b, dim, mine, sizeof mine);
        dim_value(alt, dim, theirs, sizeof theirs);
        objective_value(s, alt->objective, av, sizeof av);
        snprintf(lines[n++], PLAN_LINE, "%s instead of %s: %+.1f %% %s (%s against %s)%s.", mine, theirs,
                 gain(s, b->objective, alt->objective), objective_name(s->objective), val, av,
                 alt->slo_met ? "" : "; the alternative misses the SLO");
    }
    /* The runner-up and what it gives up. */
    for (int i = 0; i < r->n && n < max; i++) {
        const plan_cand *c = &r->c[r->order[i]];
        if (r->order[i] == r->best || c->status != PLAN_DONE || !c->allowed) continue;
        char d2[300], v2[96];
        plan_describe(c, d2, sizeof d2);
        objective_value(s, c->objective, v2, sizeof v2);
        /* What it gives up, as a share of the recommendation's value. */
        double lost = b->objective != 0 ? fabs(b->objective - c->objective) / fabs(b->objective) * 100 : 0;
        snprintf(lines[n++], PLAN_LINE, "Runner-up: %.200s gives up %.1f %% of %s (%.60s)%s; its TTFT p99 is %.3f s against %.3f s.",
                 d2, lost, objective_name(s->objective), v2,
                 c->slo_met ? "" : " and misses the SLO", c->m.q[SIM_Q_TTFT].p99, m->q[SIM_Q_TTFT].p99);
        break;
    }
    /* Options that would change the model's outputs are named as such. */
    for (int i = 0; i < r->n && n < max; i++) {
        const plan_cand *c = &r->c[r->order[i]];
        if (c->status != PLAN_DONE || c->allowed) continue;
        char d2[300], v2[96];
        plan_describe(c, d2, sizeof d2);
        objective_value(s, c->objective, v2, sizeof v2);
        if (gain(s, c->objective, b->objective) > 0)
            snprintf(lines[n++], PLAN_LINE, "Not recommended, accuracy risk: %.200s would give %.60s (%+.1f %%) but %s; the "
                     "scenario's quality settings do not accept that.", d2, v2, gain(s, c->objective, b->objective),
                     c->risk_gqa ? "needs a model retrained with fewer KV heads"
                     : c->risk_window ? "drops all but the sink and window tokens from attention"
                     : c->risk_weights ? "quantises the weights"
                                      : "quantises the KV cache");
        break;
    }
    return n;
}
