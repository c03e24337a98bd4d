/* plan_rank.c: scoring candidates against the SLO and objective, the Pareto front, and the
 * recommendation's reasons in terms of the cost model. */
#include "plan.h"
#include "../model/kv_blocks.h"
#include "../model/kv_model.h"
#include "../model/kv_moe_parallel.h"

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
    /* Arrivals a full waiting queue turned away (deployment.max_queued_requests) are in no
     * latency histogram, but their clients got an error: each misses every term. A term at
     * percentile p cannot hold when they alone are more than (1 - p) of the arrivals, however
     * fast the served ones were; else a tight bound would shed load until the served few met
     * the SLO, and capacity would climb with the rejections. Prompts too long for the context
     * (too_long) are refused at any rate: the search cannot change them, so they are left out. */
    long turned = m->rejected - m->too_long;
    double arrivals = sim_arrivals(m);
    for (int i = 0; i < s->slo.n; i++) {
        double v = plan_percentile(m, s->slo.terms[i].metric, s->slo.terms[i].percentile);
        if (!(v <= s->slo.terms[i].limit)) return false;
        double p = s->slo.terms[i].percentile >= 100 ? 1 : s->slo.terms[i].percentile / 100;
        if (turned > 0 && (double)turned > (1 - p) * arrivals) return false;
    }
    return m->requests > 0;
}

/* The latency the objective and the Pareto front use: the first SLO metric's p99, else E2E p99. */
static double latency(const scn_scenario *s, const sim_metrics *m)
{
    return plan_percentile(m, s->slo.n ? s->slo.terms[0].metric : SCN_METRIC_E2E, 99);
}

/* Two-sided 95 % critical values of Student's t for 1..31 degrees of freedom (NIST/SEMATECH
 * e-Handbook of Statistical Methods, table 1.3.6.7.2; docs/sources.md). */
static const double T95[] = {12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201,
                             2.179,  2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074,
                             2.069,  2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042, 2.040};

plan_interval plan_interval_of(const double *x, int n)
{
    plan_interval r = {NAN, NAN, NAN, n};
    if (n < 1) return r;
    double sum = 0;
    for (int i = 0; i < n; i++) sum += x[i];
    r.mean = sum / n;
    if (!isfinite(r.mean) || n == 1) { r.lo = r.hi = r.mean; return r; }
    double ss = 0;
    for (int i = 0; i < n; i++) ss += (x[i] - r.mean) * (x[i] - r.mean);
    int df = n - 1;
    double t = df <= (int)(sizeof T95 / sizeof T95[0]) ? T95[df - 1] : 1.960;
    double half = t * sqrt(ss / df / n);
    r.lo = r.mean - half;
    r.hi = r.mean + half;
    return r;
}

bool plan_rate_at_resolution(plan_interval r)
{
    /* Equal seeds give a zero sum of squares up to rounding in the mean (a few ulps). */
    return r.n >= 1 && r.mean > 0 && isfinite(r.mean) && r.mean - r.lo <= 1e-9 * r.mean;
}

plan_interval plan_interval_log_of(const double *x, int n)
{
    double l[PLAN_SEEDS_MAX];
    bool pos = n >= 1 && n <= PLAN_SEEDS_MAX;
    for (int i = 0; pos && i < n; i++) pos = x[i] > 0 && isfinite(x[i]);
    if (!pos) {
        plan_interval r = plan_interval_of(x, n);
        if (r.lo < 0) r.lo = 0;
        return r;
    }
    for (int i = 0; i < n; i++) l[i] = log(x[i]);
    plan_interval g = plan_interval_of(l, n);
    return (plan_interval){exp(g.mean), exp(g.lo), exp(g.hi), n};
}

bool plan_intervals_separate(plan_interval a, plan_interval b)
{
    if (isnan(a.mean) || isnan(b.mean)) return false;
    return a.lo > b.hi || b.lo > a.hi;
}

/* Allowed and within the SLO first, then allowed, then the rest; each group by objective. */
static int group(const plan_cand *c)
{
    if (c->status != PLAN_DONE) return 4;
    if (c->unbounded) return 3;   /* no capacity found within the searched range: not ranked with the rest */
    return c->allowed ? (c->slo_met ? 0 : 1) : 2;
}

static int by_rank(const plan_result *r, int a, int b)
{
    const plan_cand *x = &r->c[a], *y = &r->c[b];
    int gx = group(x), gy = group(y);
    if (gx != gy) return gx - gy;
    /* Objectives within 0.1 % are a tie: then lower p99 latency, then less KV memory. */
    double scale = fmax(fabs(x->objective), fabs(y->objective));
    if (x->objective != y->objective && !(fabs(x->objective - y->objective) <= 1e-3 * scale))
        return x->objective > y->objective ? -1 : 1;
    if (x->latency_p99 != y->latency_p99) return x->latency_p99 < y->latency_p99 ? -1 : 1;
    if (x->m.kv_util_peak != y->m.kv_util_peak) return x->m.kv_util_peak < y->m.kv_util_peak ? -1 : 1;
    return a - b;   /* stable: enumeration order */
}

/* A merge sort of r->order by by_rank (qsort has no context argument in C11). */
static void sort_order(const plan_result *r, int *a, int *tmp, int n)
{
    if (n < 2) return;
    int h = n / 2;
    sort_order(r, a, tmp, h);
    sort_order(r, a + h, tmp, n - h);
    int i = 0, j = h, k = 0;
    while (i < h && j < n) tmp[k++] = by_rank(r, a[j], a[i]) < 0 ? a[j++] : a[i++];
    while (i < h) tmp[k++] = a[i++];
    while (j < n) tmp[k++] = a[j++];
    memcpy(a, tmp, sizeof *a * (size_t)n);
}

double plan_judged_batch(const plan_cand *c)
{
    return c->at_capacity && c->batch_judged > 0 ? c->batch_judged : c->m.batch_mean;
}

/* The price of a million output tokens at `tok` output tokens/s on the candidate's GPUs. */
static double usd_per_mtok(const plan_cand *c, double tok)
{
    return c->usd_per_gpu_hour > 0 && tok > 0 ? c->usd_per_gpu_hour * c->gpus / 3600.0 / tok * 1e6 : NAN;
}

static int differs_only_in(const plan_cand *a, const plan_cand *b, int dim);
#define DIM_KV_DTYPE 3   /* same_dims' index of the KV dtype */

/* A quantised KV dtype changes the model's outputs: recommend it only when it is measurably
 * better than the same deployment without it (its twin differing only in the KV dtype, one that
 * takes no dtype risk), as plan_offload_gate does for offload (issue 16 re-review: fp8 KV was
 * recommended at 1.42 against 1.35 req/s per GPU with overlapping intervals). */
static void risk_gate(plan_result *r)
{
    r->risk_gated = false;
    if (r->best < 0 || !r->c[r->best].risk_dtype) return;
    const plan_cand *b = &r->c[r->best];
    for (int i = 0; i < r->n; i++) {
        const plan_cand *t = &r->c[r->order[i]];
        if (t->status != PLAN_DONE || !t->allowed || t->risk_dtype || t->slo_met != b->slo_met || t->unbounded ||
            !differs_only_in(b, t, DIM_KV_DTYPE))
            continue;
        if (!plan_intervals_separate(t->obj, b->obj) || t->obj.mean >= b->obj.mean) {
            r->risk_gated = true;
            r->risk_gated_cand = r->best;
            r->best = r->order[i];
        }
        return;
    }
}

void plan_rank(const scn_scenario *s, plan_result *r)
{
    bool cap = plan_objective_at_capacity(s);
    for (int i = 0; i < r->n; i++) {
        plan_cand *c = &r->c[i];
        r->order[i] = i;
        if (c->status != PLAN_DONE) continue;
        int n = c->n_seeds < 1 ? 1 : c->n_seeds, met = 0;
        double rate[PLAN_SEEDS_MAX], tok[PLAN_SEEDS_MAX], batch = 0;
        for (int k = 0; k < n; k++) met += (c->seed_slo >> k) & 1;
        c->slo_met = 2 * met > n;
        /* Latency and cost are stored negated (higher is better); their interval is taken on a
         * log scale of the positive quantity, so it never reaches below zero (issue 16 review:
         * "0.565 s p99 latency (95 % interval -0.334-1.46)"; an arithmetic interval, even clamped
         * at 0, reached -13.5 s with two seeds, t = 12.7). */
        if (plan_lower_is_better(s)) {
            double pos[PLAN_SEEDS_MAX];
            for (int k = 0; k < n && k < PLAN_SEEDS_MAX; k++) pos[k] = -c->seed_offered[k];
            plan_interval g = plan_interval_log_of(pos, n);
            c->offered = (plan_interval){-g.mean, -g.hi, -g.lo, n};
        } else {
            c->offered = plan_interval_of(c->seed_offered, n);
        }
        c->latency_p99 = latency(s, &c->m);
        c->usd_per_gpu_hour = plan_price(s, c);
        unsigned all = n >= 32 ? ~0u : (1u << n) - 1;
        bool searched = (c->cap_done & all) == all;
        c->at_capacity = cap && searched;
        c->unbounded = searched && (c->seed_unbounded & all) != 0;
        /* The batch the judged load ran at: the capacity trials' mean decode batch when judged
         * there (over the seeds that found a rate), else the first seed's offered-load run. */
        int nb = 0;
        for (int k = 0; searched && k < n; k++) if (isfinite(c->seed_batch[k])) { batch += c->seed_batch[k]; nb++; }
        c->batch_judged = c->at_capacity && nb > 0 ? batch / nb : c->m.batch_mean;
        if (searched) {
            for (int k = 0; k < n; k++) { rate[k] = c->seed_rate[k]; tok[k] = c->seed_tok[k]; }
            /* Each seed's rate is known to the search's resolution: the capacity lies between the
             * rate found and PLAN_CAPACITY_TOL above it, so the interval's upper end widens by it.
             * Identical seeds then still leave an interval. A rate is never below 0. */
            c->rate = plan_interval_of(rate, n);
            if (c->rate.lo < 0) c->rate.lo = 0;
            if (isfinite(c->rate.hi)) c->rate.hi *= 1 + PLAN_CAPACITY_TOL;
            /* Output tokens/s on a log scale (plan_interval_log_of), so $ per million tokens, its
             * reciprocal times the price, has both ends positive: an arithmetic interval on $ itself
             * went below zero with two seeds (t = 12.7). */
            plan_interval t = plan_interval_log_of(tok, n);
            if (isfinite(t.hi)) t.hi *= 1 + PLAN_CAPACITY_TOL;
            c->tok_per_gpu = t.mean / c->gpus;
            c->usd_per_mtok = usd_per_mtok(c, t.mean);
            if (c->at_capacity) {
                switch (s->objective) {
                case SCN_OBJ_THROUGHPUT:
                    c->obj = plan_interval_of(tok, n);
                    if (c->obj.lo < 0) c->obj.lo = 0;
                    if (isfinite(c->obj.hi)) c->obj.hi *= 1 + PLAN_CAPACITY_TOL;
                    break;
                case SCN_OBJ_COST: {
                    /* Negated (higher is better); the ends swap under the reciprocal. A seed that
                     * met the SLO at no rate makes the cost unbounded. */
                    double lo = usd_per_mtok(c, t.lo), hi = usd_per_mtok(c, t.hi);
                    bool any_zero = false;
                    for (int k = 0; k < n; k++) any_zero |= !(tok[k] > 0);
                    c->obj = any_zero || !isfinite(c->usd_per_mtok) ? (plan_interval){-INFINITY, -INFINITY, -INFINITY, n}
                                                                    : (plan_interval){-c->usd_per_mtok, -lo, -hi, n};
                    if (c->obj.lo > c->obj.hi) { double x = c->obj.lo; c->obj.lo = c->obj.hi; c->obj.hi = x; }
                    break;
                }
                default:
                    c->obj = c->rate;
                    c->obj.mean /= c->gpus;
                    c->obj.lo /= c->gpus;
                    c->obj.hi /= c->gpus;
                    break;
                }
            }
        } else {
            c->rate = (plan_interval){NAN, NAN, NAN, 0};
            c->tok_per_gpu = c->m.output_tok_per_s / c->gpus;
            c->usd_per_mtok = usd_per_mtok(c, c->m.output_tok_per_s);
        }
        /* An unbounded capacity is no rate: nothing at it (tokens/s, $/Mtok, the objective) is
         * credited (issue 16 review: 20343 tok/s next to "no capacity is credited"). */
        if (c->unbounded) {
            c->tok_per_gpu = NAN;
            c->usd_per_mtok = NAN;
            if (c->at_capacity) c->obj = (plan_interval){NAN, NAN, NAN, n};
        }
        if (!c->at_capacity) c->obj = c->offered;
        c->objective = c->obj.mean;
        if (isnan(c->objective)) c->objective = -INFINITY;
    }
    /* Pareto front of output throughput per GPU (at capacity when the objective is judged
     * there) against p99 latency at the offered load, over evaluated candidates. */
    for (int i = 0; i < r->n; i++) {
        plan_cand *c = &r->c[i];
        if (c->status != PLAN_DONE) continue;
        double ti = c->tok_per_gpu;
        c->pareto = true;
        for (int j = 0; j < r->n && c->pareto; j++) {
            const plan_cand *d = &r->c[j];
            if (j == i || d->status != PLAN_DONE) continue;
            double tj = d->tok_per_gpu;
            if (tj >= ti && d->latency_p99 <= c->latency_p99 && (tj > ti || d->latency_p99 < c->latency_p99)) c->pareto = false;
        }
    }
    int *tmp = malloc(sizeof *tmp * (size_t)(r->n > 0 ? r->n : 1));
    if (tmp) sort_order(r, r->order, tmp, r->n);
    free(tmp);
    r->best = -1;
    r->risk_gated = false;
    for (int i = 0; i < r->n; i++) {
        const plan_cand *c = &r->c[r->order[i]];
        if (c->status == PLAN_DONE && c->allowed) { r->best = r->order[i]; break; }
    }
    /* When the seeds cannot tell a candidate with fewer GPUs from the best, recommend it: the
     * same measured objective for less hardware. */
    if (r->best < 0) return;
    const plan_cand *top = &r->c[r->best];
    for (int i = 0; i < r->n; i++) {
        const plan_cand *c = &r->c[r->order[i]], *b = &r->c[r->best];
        if (c->status != PLAN_DONE || !c->allowed || group(c) != group(top) || c->gpus >= b->gpus) continue;
        if (top->obj.n > 1 && !plan_intervals_separate(c->obj, top->obj)) r->best = r->order[i];
    }
    risk_gate(r);
    plan_spec_gate(s, r);
    plan_offload_gate(s, r);
    plan_swap_gate(s, r);
}

/* ---- reasons ---- */
static const char *objective_name(const scn_scenario *s)
{
    static const char *const N[] = {"goodput per GPU", "output throughput", "p99 latency", "cost per million output tokens"};
    return N[s->objective];
}

/* A number with as many decimals as its size needs (42.2, 0.049, 1234). */
static void fmt_num(double v, char *buf, size_t n)
{
    double a = fabs(v);
    if (!isfinite(v)) snprintf(buf, n, "%s", isnan(v) ? "n/a" : "none");
    else if (a >= 100) snprintf(buf, n, "%.0f", v);
    else if (a >= 10) snprintf(buf, n, "%.1f", v);
    else if (a >= 1) snprintf(buf, n, "%.2f", v);
    else snprintf(buf, n, "%.3g", v);
}

/* The objective as a positive quantity in its unit (latency and cost are stored negated). */
static double shown(const scn_scenario *s, double v)
{
    return s->objective == SCN_OBJ_P99_LATENCY || s->objective == SCN_OBJ_COST ? -v : v;
}

bool plan_lower_is_better(const scn_scenario *s)
{
    return s->objective == SCN_OBJ_P99_LATENCY || s->objective == SCN_OBJ_COST;
}

plan_interval plan_objective_shown(const scn_scenario *s, const plan_cand *c)
{
    plan_interval x = c->obj;
    if (!plan_lower_is_better(s)) return x;
    return (plan_interval){-x.mean, -x.hi, -x.lo, x.n};
}

const char *plan_latency_metric(const scn_scenario *s)
{
    static const char *const L[] = {"TTFT p99", "TPOT p99", "ITL p99", "E2E p99"};
    int m = s->slo.n ? (int)s->slo.terms[0].metric : (int)SCN_METRIC_E2E;
    return m >= 0 && m < (int)(sizeof L / sizeof L[0]) ? L[m] : "E2E p99";
}

static void unit_text(const scn_scenario *s, bool cap, char *buf, size_t n)
{
    switch (s->objective) {
    case SCN_OBJ_THROUGHPUT: snprintf(buf, n, "output tokens/s%s", cap ? " at the highest rate within the SLO" : ""); break;
    case SCN_OBJ_P99_LATENCY: snprintf(buf, n, "s %s", plan_latency_metric(s)); break;
    case SCN_OBJ_COST: snprintf(buf, n, "$ per million output tokens%s", cap ? " at the highest rate within the SLO" : ""); break;
    default:
        /* At capacity the rate is the arrival process's (conversations/s with multi-turn
         * conversations); goodput at the offered load counts completed requests. */
        snprintf(buf, n, "%s per GPU%s", cap ? plan_rate_unit(s) : "req/s", cap ? " within the SLO" : " of goodput");
        break;
    }
}

/* "42.2 req/s per GPU within the SLO" (cost: "$0.120 per million ..."). */
static void value_text(const scn_scenario *s, bool cap, double v, char *buf, size_t n)
{
    char num[32], unit[96];
    fmt_num(shown(s, v), num, sizeof num);
    unit_text(s, cap, unit, sizeof unit);
    if (s->objective == SCN_OBJ_COST) snprintf(buf, n, "$%s%s", num, unit + 1);
    else snprintf(buf, n, "%s %s", num, unit);
}

static void interval_text(const scn_scenario *s, plan_interval x, char *buf, size_t n)
{
    char a[32], b[32];
    if (x.n < 2 || !isfinite(x.mean)) { snprintf(buf, n, "%s", x.n < 2 ? "one seed, no interval" : "every seed"); return; }
    double lo = shown(s, x.lo), hi = shown(s, x.hi);
    fmt_num(fmin(lo, hi), a, sizeof a);
    fmt_num(fmax(lo, hi), b, sizeof b);
    snprintf(buf, n, "%s-%s", a, b);
}

/* True when the candidate met the SLO at no rate on any seed (judged at capacity). */
static bool misses_everywhere(const plan_cand *c)
{
    if (!c->at_capacity) return false;
    for (int k = 0; k < c->n_seeds; k++) if (c->seed_rate[k] > 0) return false;
    return true;
}

/* How a compares with b on the objective, in absolute units first: "42.2 vs 35.2 req/s per
 * GPU within the SLO (95 % intervals 41.9-42.5 and 34.8-35.6 over 3 seeds): 20 % higher,
 * better", or that the difference is not measurable, or that b misses the SLO at every rate. */
void plan_compare_text(const scn_scenario *s, const plan_cand *a, const plan_cand *b, char *buf, size_t n)
{
    bool cap = a->at_capacity;
    char va[32], vb[32], unit[96], ia[64], ib[64];
    fmt_num(shown(s, a->objective), va, sizeof va);
    fmt_num(shown(s, b->objective), vb, sizeof vb);
    unit_text(s, cap, unit, sizeof unit);
    if (a->unbounded || b->unbounded) {
        /* A search that kept up at its top rate found no capacity: a lower bound, not a figure
         * to rank or credit against (issue 16's review: it used to be 2^40 x the start). */
        const plan_cand *u = a->unbounded ? a : b;
        char top[32];
        fmt_num(u->rate.mean, top, sizeof top);
        snprintf(buf, n, "not compared: %s capacity is unbounded within the searched range (it kept up at %s %s, the top "
                 "of the search)", a->unbounded && b->unbounded ? "each one's" : a->unbounded ? "this one's" : "the alternative's",
                 top, plan_rate_unit(s));
        return;
    }
    if (misses_everywhere(a) && misses_everywhere(b)) {
        snprintf(buf, n, "both miss the SLO at every rate tried");
        return;
    }
    if (misses_everywhere(b)) {
        char v[128];
        value_text(s, cap, a->objective, v, sizeof v);
        snprintf(buf, n, "the alternative misses the SLO at every rate tried, this one reaches %s", v);
        return;
    }
    if (misses_everywhere(a)) {
        char v[128];
        value_text(s, cap, b->objective, v, sizeof v);
        snprintf(buf, n, "this one misses the SLO at every rate tried, the alternative reaches %s", v);
        return;
    }
    interval_text(s, a->obj, ia, sizeof ia);
    interval_text(s, b->obj, ib, sizeof ib);
    const char *cur = s->objective == SCN_OBJ_COST ? "$" : "";
    const char *u = s->objective == SCN_OBJ_COST ? unit + 2 : unit;
    if (!plan_intervals_separate(a->obj, b->obj) && a->obj.n > 1) {
        snprintf(buf, n, "no measurable difference at this load (%s%s vs %s%s %s; 95 %% intervals %s and %s over %d seeds overlap)",
                 cur, va, cur, vb, u, ia, ib, a->obj.n);
        return;
    }
    double x = shown(s, a->objective), y = shown(s, b->objective);
    bool better = plan_lower_is_better(s) ? x < y : x > y;
    char rel[96] = "";
    /* A relative change only against a meaningful base: same sign, and the base at least a
     * tenth of the value; otherwise a ratio. */
    if (y > 0 && x > 0 && y >= 0.1 * x && x >= 0.1 * y)
        snprintf(rel, sizeof rel, ": %.0f %% %s, %s", fabs(x - y) / y * 100, x > y ? "higher" : "lower", better ? "better" : "worse");
    else if (y > 0 && x > 0) {
        char ratio[32];
        fmt_num(x > y ? x / y : y / x, ratio, sizeof ratio);
        snprintf(rel, sizeof rel, ": %sx %s, %s", ratio, x > y ? "higher" : "lower", better ? "better" : "worse");
    }
    else
        snprintf(rel, sizeof rel, ": %s", better ? "better" : "worse");
    if (a->obj.n > 1)
        snprintf(buf, n, "%s%s vs %s%s %s (95 %% intervals %s and %s over %d seeds)%s", cur, va, cur, vb, u, ia, ib, a->obj.n, rel);
    else
        snprintf(buf, n, "%s%s vs %s%s %s (one seed)%s", cur, va, cur, vb, u, rel);
}

/* same[d]: a and b agree in option dimension d (plan_enumerate's order). */
static void same_dims(const plan_cand *a, const plan_cand *b, int same[PLAN_DIMS])
{
    int x[PLAN_DIMS] = {
        a->c.layout == b->c.layout, a->c.block_size == b->c.block_size || a->c.layout == SCN_LAYOUT_CONTIGUOUS,
        a->c.prefix_cache == b->c.prefix_cache, a->c.kv_dtype == b->c.kv_dtype, a->c.attention == b->c.attention,
        a->c.scheduler == b->c.scheduler || (a->derived_sched && b->derived_sched),
        a->c.window == b->c.window && a->c.sink == b->c.sink,
        a->max_num_seqs == b->max_num_seqs || (a->derived_seqs && b->derived_seqs),
        a->max_batched == b->max_batched || (a->derived_budget && b->derived_budget), a->tp == b->tp,
        a->replicas == b->replicas, a->kv_heads == b->kv_heads, a->hw == b->hw, a->wformat == b->wformat,
        a->engine == b->engine, a->c.spec == b->c.spec, a->c.kv_offload == b->c.kv_offload,
        a->c.preemption == b->c.preemption};
    memcpy(same, x, sizeof x);
}

/* True when b equals a except in dimension `dim`, where it differs. */
bool plan_option_differs(const plan_cand *a, const plan_cand *b, int dim)
{
    int same[PLAN_DIMS];
    same_dims(a, b, same);
    return dim >= 0 && dim < PLAN_DIMS && !same[dim];
}

bool plan_one_option_apart(const plan_cand *a, const plan_cand *b)
{
    int same[PLAN_DIMS], differ = 0;
    same_dims(a, b, same);
    for (int i = 0; i < PLAN_DIMS; i++) differ += !same[i];
    return differ == 1;
}

static int differs_only_in(const plan_cand *a, const plan_cand *b, int dim)
{
    int same[PLAN_DIMS];
    same_dims(a, b, same);
    if (same[dim]) return 0;
    for (int i = 0; i < PLAN_DIMS; i++) if (i != dim && !same[i]) return 0;
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
    case 11: if (c->kv_heads) snprintf(buf, n, "%d KV heads", c->kv_heads); else snprintf(buf, n, "the model's own KV heads"); break;
    case 12: snprintf(buf, n, "%s", c->hw_name); break;
    case 13: snprintf(buf, n, "%s weights", c->wformat_name); break;
    case 14: snprintf(buf, n, "the %s engine", c->engine_name); break;
    case 16: snprintf(buf, n, "%s", c->c.kv_offload == SCN_OFFLOAD_OFF ? "no KV offload" : c->c.kv_offload == SCN_OFFLOAD_CPU
                                     ? "KV offload to host memory" : c->c.kv_offload == SCN_OFFLOAD_CPU_DISK
                                     ? "KV offload to host memory and NVMe" : c->c.kv_offload == SCN_OFFLOAD_CPU_REMOTE
                                     ? "KV offload to host memory and a remote store"
                                     : "KV offload to host memory, NVMe and a remote store"); break;
    case 17: snprintf(buf, n, "preemption by %s", SCN_PREEMPT_NAMES[c->c.preemption]); break;
    default: if (c->spec_name[0]) snprintf(buf, n, "speculative decoding (%s)", c->spec_name); else snprintf(buf, n, "no speculative decoding"); break;
    }
}

int plan_explain(const scn_scenario *s, const plan_result *r, char lines[][PLAN_LINE], int max)
{
    int n = 0;
    if (r->best < 0 || max <= 0) return 0;
    const plan_cand *b = &r->c[r->best];
    char desc[360], val[160], iv[64];
    plan_describe(b, desc, sizeof desc);
    if (kv_moe_parallel_on(s)) {   /* the replica's split: every figure below is one DP rank's */
        size_t dl = strlen(desc);
        snprintf(desc + dl, sizeof desc - dl, " (attention DP %d x TP %d, experts over EP %d)", kv_moe_dp(s), b->tp,
                 kv_moe_ep(s));
    }
    value_text(s, b->at_capacity, b->objective, val, sizeof val);
    if (plan_lower_is_better(s)) {
        size_t vl = strlen(val);
        snprintf(val + vl, sizeof val - vl, ", lower is better");
    }
    interval_text(s, b->obj, iv, sizeof iv);
    const sim_metrics *m = &b->m;
    if (n < max) {
        char how[200];
        if (b->at_capacity)
            snprintf(how, sizeof how, "judged at capacity (each candidate at its highest arrival rate within the SLO, mean of %d "
                     "seed%s)", b->obj.n, b->obj.n == 1 ? "" : "s");
        else
            snprintf(how, sizeof how, "judged at the offered load (%s, mean of %d seed%s)",
                     !scn_arrival_has_rate(s->workload.arrival) ? "a trace, closed loop or offline run has no rate to raise" : "the objective is a latency",
                     b->obj.n, b->obj.n == 1 ? "" : "s");
        snprintf(lines[n++], PLAN_LINE, "Recommended: %.260s, for %s %.200s: %.160s (95 %% interval %.60s)%s.", desc, objective_name(s), how,
                 val, iv, b->slo_met ? "" : "; no allowed candidate meets the SLO at the offered load, this one comes closest");
    }
    if (n < max && b->unbounded) {
        char r1[32];
        fmt_num(b->rate.mean, r1, sizeof r1);
        snprintf(lines[n++], PLAN_LINE, "Capacity: unbounded within the searched range: it kept up at %s %s, the top of the "
                 "search (%.0fx its start), so no capacity is credited or ranked; every candidate that found one ranks ahead.",
                 r1, plan_rate_unit(s), PLAN_CAPACITY_RANGE);
    } else if (n < max && b->at_capacity && isfinite(b->rate.mean)) {
        char r1[32], r2[32], turns[96] = "";
        fmt_num(b->rate.mean, r1, sizeof r1);
        fmt_num(s->workload.rate, r2, sizeof r2);
        /* Above the offered load it is headroom; below, a shortfall (a review read "0.1x headroom"). */
        double x = s->workload.rate > 0 ? b->rate.mean / s->workload.rate : NAN;
        if (s->workload.turns > 1)
            snprintf(turns, sizeof turns, " (each of up to %d turns, so about %.3g requests/s)", s->workload.turns,
                     b->rate.mean * s->workload.turns);
        snprintf(lines[n++], PLAN_LINE, "Capacity: %s %s%s within the SLO against the %s %s offered (%.1fx: %s)%s.", r1,
                 plan_rate_unit(s), turns, r2, plan_rate_unit(s), x, x >= 1 ? "headroom" : "short of the offered load",
                 b->slo_met ? "" : "; at the offered load it misses the SLO");
    }
    if (n < max && b->usd_per_gpu_hour > 0 && isfinite(b->usd_per_mtok))
        snprintf(lines[n++], PLAN_LINE, "Cost: $%.3f per million output tokens %s, on %.0f GPU%s of %s at $%.2f per GPU-hour.",
                 b->usd_per_mtok, b->at_capacity ? "at the highest rate within the SLO" : "at the offered load", b->gpus,
                 b->gpus == 1 ? "" : "s", plan_hardware_name(s, b), b->usd_per_gpu_hour);
    /* Which cost binds: the cost model's view of a typical decode and prefill step. */
    scn_scenario t;
    plan_apply(s, b, &t);
    kv_cache_cfg kc = kv_cache_cfg_make(&t, b->c.kv_dtype, b->c.sink, b->c.window);
    int batch = (int)lround(m->batch_mean < 1 ? 1 : m->batch_mean);
    if (batch > 4096) batch = 4096;
    /* The mean sequence as `memory` and the simulator size it (kv_seq_size_of): the shared prefix
     * and the conversation history are part of the prompt (the re-review saw 900 tokens where a
     * three-turn conversation holds 1,800 + 100). */
    kv_seq_size sz = kv_seq_size_of(&t);
    long ctx = lround(sz.prompt + sz.output / 2);
    kv_seq_work *w = malloc(sizeof *w * (size_t)batch);
    if (w) {
        for (int i = 0; i < batch; i++) w[i] = (kv_seq_work){1, ctx};
        kv_step_cost dc = kv_step_time(&t, &kc, b->c.attention, w, batch);
        double kv = dc.op[KV_OP_ATTENTION].bytes, total = 0;
        for (int i = 0; i < KV_OP_COUNT; i++) total += dc.op[i].bytes;
        /* The prefill a request needs: its prompt less what the prefix cache served (the first
         * seed's simulated hit rate), attending over the cached part too. */
        long prompt_all = lround(sz.prompt);
        long cached = b->c.prefix_cache && m->prefix_hit_rate > 0 ? lround(sz.prompt * m->prefix_hit_rate) : 0;
        if (cached >= prompt_all) cached = prompt_all > 0 ? prompt_all - 1 : 0;
        kv_seq_work pf = {prompt_all - cached, cached};
        kv_step_cost pc = kv_step_time(&t, &kc, b->c.attention, &pf, 1);
        /* Expert parallelism: the step is one DP rank's with its experts over the EP ranks
         * (kv_moe_parallel.h), not the unsplit replica's with every expert on every GPU. */
        bool ep = kv_moe_parallel_on(&t);
        kv_moe_step md = {0}, mp = {0};
        if (ep) {
            md = kv_moe_step_time(&t, &kc, b->c.attention, w, batch);
            mp = kv_moe_step_time(&t, &kc, b->c.attention, &pf, 1);
            pc.seconds = mp.seconds;
        }
        const char *binding;
        char why[300];
        double queue_share = m->q[SIM_Q_TTFT].mean > 0 ? m->q[SIM_Q_QUEUE].mean / m->q[SIM_Q_TTFT].mean : 0;
        if (m->preemptions > 0 || m->kv_util_peak > 0.95) {
            binding = "KV memory caps concurrency";
            snprintf(why, sizeof why, "the cache peaked at %.0f %% of its %ld blocks with %ld preemptions, so the batch (mean %.1f "
                     "sequences) cannot grow further", 100 * m->kv_util_peak, m->kv_blocks, m->preemptions, m->batch_mean);
        } else if (queue_share > 0.5) {
            binding = "queueing binds";
            snprintf(why, sizeof why, "%.0f %% of the mean TTFT (%.3f s) is waiting for admission", 100 * queue_share,
                     m->q[SIM_Q_TTFT].mean);
        } else if (ep) {
            binding = md.experts >= md.attention && md.experts >= md.alltoall ? "the routed experts on the busiest EP rank bind in decode"
                      : md.alltoall >= md.attention                          ? "the all-to-all binds in decode"
                                                                             : "attention and the rest bind in decode";
            snprintf(why, sizeof why, "a DP rank's decode step of %d sequences at %ld tokens of context takes %.2f ms: routed "
                     "experts %.2f ms, attention and the rest %.2f ms, all-to-all %.2f ms; the cache is at most %.0f %% full",
                     batch, ctx, md.seconds * 1e3, md.experts * 1e3, md.attention * 1e3, md.alltoall * 1e3, 100 * m->kv_util_peak);
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
        char cache_note[160] = "";
        if (cached > 0)
            snprintf(cache_note, sizeof cache_note, " (the uncached part of a %ld-token prompt: the prefix cache serves %ld)",
                     prompt_all, cached);
        if (n < max) snprintf(lines[n++], PLAN_LINE, "What binds (at the offered load): %s: %.300s. A %ld-token prefill%s is %s-bound (%.1f ms%s).",
                              binding, why, pf.new_tokens, cache_note, kv_bound_name(pc.bound), pc.seconds * 1e3,
                              ep ? " on a DP rank, experts over EP" : "");
        free(w);
    }
    /* Arrivals the recommended run turned away: their clients saw errors, and no latency figure
     * above holds them (a review found a plan silent on a tenth of its arrivals refused). */
    if (n < max && m->rejected > 0) {
        long turned = m->rejected - m->too_long;
        char parts[400];
        int k = 0;
        if (turned > 0)
            k += snprintf(parts + k, sizeof parts - (size_t)k, "%ld by a full waiting queue (SLO misses: the verdicts count "
                          "them)", turned);
        if (m->too_long > 0)
            snprintf(parts + k, sizeof parts - (size_t)k, "%s%ld too long for max_model_len (%d tokens; refused at every "
                     "rate, so the verdicts leave them out: raise max_model_len or shorten the requests)", turned > 0 ? ", " : "", m->too_long, t.deployment.max_model_len);
        snprintf(lines[n++], PLAN_LINE, "Rejected (at the offered load, first seed): %ld of %.0f arrivals (%.1f %%), %s; no "
                 "latency figure holds them.", m->rejected, sim_arrivals(m), 100 * sim_rejected_share(m), parts);
    }
    if (n < max && r->risk_gated) {
        const plan_cand *g = &r->c[r->risk_gated_cand];
        char cmp[400];
        plan_compare_text(s, g, b, cmp, sizeof cmp);
        snprintf(lines[n++], PLAN_LINE, "Accuracy: %s KV ranked first but changes the model's outputs, and it is not measurably "
                 "better than the same deployment with %s KV (%.400s), so the one without the risk is recommended.",
                 scn_dtype_name(g->c.kv_dtype), scn_dtype_name(b->c.kv_dtype), cmp);
    }
    if (n < max && plan_spec_explain(s, r, lines[n], PLAN_LINE)) n++;
    if (n < max && plan_moe_explain(s, r, lines[n], PLAN_LINE)) n++;
    if (n < max && plan_offload_explain(s, r, lines[n], PLAN_LINE)) n++;
    if (n < max && plan_swap_explain(s, r, lines[n], PLAN_LINE)) n++;
    /* What each chosen option earns: the best against itself with one option changed, credited
     * only when the seeds' intervals separate. */
    for (int dim = 0; dim < PLAN_DIMS && n < max; dim++) {
        const plan_cand *alt = NULL;
        for (int i = 0; i < r->n; i++) {
            const plan_cand *c = &r->c[r->order[i]];
            if (c->status == PLAN_DONE && differs_only_in(b, c, dim)) { alt = c; break; }
        }
        /* When the one-option alternative could not run (contiguous cannot cache prefixes, a window
         * cannot share them), compare with the best candidate that differs there, and say how else
         * it differs. */
        bool nearest = false;
        for (int i = 0; i < r->n && !alt; i++) {
            const plan_cand *c = &r->c[r->order[i]];
            int same[PLAN_DIMS];
            same_dims(b, c, same);
            if (c->status == PLAN_DONE && !same[dim] && dim != 1) { alt = c; nearest = true; }
        }
        if (!alt) continue;
        char mine[96], theirs[300], cmp[400];
        dim_value(b, dim, mine, sizeof mine);
        dim_value(alt, dim, theirs, sizeof theirs);
        if (nearest) {
            int same[PLAN_DIMS];
            same_dims(b, alt, same);
            size_t u = strlen(theirs);
            const char *sep = " (the best such candidate, with ";
            for (int d = 0; d < PLAN_DIMS && u < sizeof theirs - 100; d++) {
                if (d == dim || same[d] || (d == 1 && (b->c.layout != alt->c.layout))) continue;
                char v[96];
                dim_value(alt, d, v, sizeof v);
                u += (size_t)snprintf(theirs + u, sizeof theirs - u, "%s%s", sep, v);
                sep = ", ";
            }
            if (strcmp(sep, ", ") == 0 && u < sizeof theirs - 2) snprintf(theirs + u, sizeof theirs - u, ")");
        }
        plan_compare_text(s, b, alt, cmp, sizeof cmp);
        snprintf(lines[n++], PLAN_LINE, "%.90s instead of %.300s: %.400s%s%s.", mine, theirs, cmp,
                 alt->slo_met || misses_everywhere(alt) ? "" : "; the alternative misses the SLO at the offered load",
                 alt->allowed ? "" : "; the alternative is not accepted by the scenario's quality settings");
    }
    /* The runner-up and what it gives up. */
    for (int i = 0; i < r->n && n < max; i++) {
        const plan_cand *c = &r->c[r->order[i]];
        if (r->order[i] == r->best || c->status != PLAN_DONE || !c->allowed) continue;
        char d2[300], cmp[400];
        plan_describe(c, d2, sizeof d2);
        plan_compare_text(s, b, c, cmp, sizeof cmp);
        snprintf(lines[n++], PLAN_LINE, "Runner-up: %.200s: recommended against it, %.400s%s; its TTFT p99 at the offered load is "
                 "%.3f s against %.3f s.", d2, cmp, c->slo_met ? "" : " (it misses the SLO at the offered load)",
                 c->m.q[SIM_Q_TTFT].p99, m->q[SIM_Q_TTFT].p99);
        break;
    }
    /* Options that would change the model's outputs are named as such. */
    for (int i = 0; i < r->n && n < max; i++) {
        const plan_cand *c = &r->c[r->order[i]];
        if (c->status != PLAN_DONE || c->allowed) continue;
        char d2[300], cmp[400];
        plan_describe(c, d2, sizeof d2);
        if (plan_intervals_separate(c->obj, b->obj) && c->objective > b->objective) {
            plan_compare_text(s, c, b, cmp, sizeof cmp);
            snprintf(lines[n++], PLAN_LINE, "Not recommended, accuracy risk: %.200s would give %.400s, but %s; the scenario's "
                     "quality settings do not accept that.", d2, cmp,
                     c->risk_gqa ? "it needs a model retrained with fewer KV heads"
                     : c->risk_window ? "it drops all but the sink and window tokens from attention"
                                      : c->risk_weights ? "it quantises the weights"
                                      : "it quantises the KV cache");
        }
        break;
    }
    return n;
}
