/* plan_capacity.c: capacity questions answered by search over simulations: the highest rate a
 * candidate sustains within the SLO (one search shared by `plan`, `capacity` and `sweep`), the
 * fewest replicas for a target rate, and the longest context that fits at a given concurrency
 * (cost model only). */
#include "plan.h"
#include "../model/kv_model.h"
#include "../model/kv_throughput.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

long plan_trial_requests(const scn_scenario *t)
{
    const scn_deployment *d = &t->deployment;
    long n = t->workload.requests < PLAN_CAPACITY_REQUESTS ? t->workload.requests : PLAN_CAPACITY_REQUESTS;
    /* The floor: the first max_num_seqs x ranks x replicas requests find free slots whatever the
     * rate, and the last as many drain a shrinking batch; PLAN_TRIAL_CYCLES turnovers leave at
     * least half the trial at a full batch with a queue that can grow (docs/planner.md). */
    long slots = (long)(d->max_num_seqs > 0 ? d->max_num_seqs : 1) * (d->attention_dp > 1 ? d->attention_dp : 1) *
                 (d->replicas > 0 ? d->replicas : 1);
    long floor_n = PLAN_TRIAL_CYCLES * slots;
    return n > floor_n ? n : floor_n;
}

const char *plan_rate_unit(const scn_scenario *s)
{
    return s->workload.turns > 1 ? "conversations/s" : "req/s";
}

/* The trial's scenario: the candidate's, at `rate` with `replicas` and `seed`, trial-sized. */
static void trial_of(const scn_scenario *s, const plan_cand *c, unsigned long long seed, double rate, int replicas,
                     scn_scenario *t)
{
    plan_apply(s, c, t);
    t->deployment.replicas = replicas;
    t->workload.rate = rate;
    t->seed = seed;
    t->workload.requests = plan_trial_requests(t);
}

bool plan_sustains(const scn_scenario *s, const plan_cand *c, unsigned long long seed, double rate, int replicas,
                   sim_metrics *m)
{
    scn_scenario *t = malloc(sizeof *t);
    if (!t) return false;
    trial_of(s, c, seed, rate, replicas, t);
    char err[256];
    /* Keeping up: the queue stays bounded (an overloaded engine's queue grows with every
     * request, so its p99 wait climbs past seconds within a trial), and the SLO holds.
     * Completions per second are no test: a short trial's drain tail lowers them. */
    bool ok = sim_run_predicted(t, &c->c, m, err, sizeof err) == SIM_OK && m->q[SIM_Q_QUEUE].p99 <= PLAN_MAX_QUEUE_P99 &&
              plan_slo_met(t, m);
    free(t);
    return ok;
}

/* Output tokens per second in steady state at `rate` arrivals/s: each arrival brings its
 * requests' output tokens, so rate x (output tokens per completed request) x (requests per
 * arrival: the turns a conversation completed, 1 without conversations), as the trial measured
 * them. The trial's own tokens/s would read low by its drain tail. */
static double steady_tokens(const scn_scenario *s, const plan_cand *c, int replicas, double rate, const sim_metrics *m)
{
    if (!(m->req_per_s > 0)) return 0;
    double per_request = m->output_tok_per_s / m->req_per_s, per_arrival = 1;
    int turns = s->workload.turns;
    if (turns > 1) {
        scn_scenario *t = malloc(sizeof *t);
        if (t) {
            trial_of(s, c, s->seed, rate, replicas, t);
            long arrivals = (t->workload.requests + turns - 1) / turns;   /* conversations (sim/workload.c) */
            if (arrivals > 0 && m->requests > 0) per_arrival = (double)m->requests / (double)arrivals;
            free(t);
        }
    }
    return rate * per_request * per_arrival;
}

double plan_capacity_hint(const scn_scenario *s, const plan_cand *c, int replicas)
{
    double fallback = s->workload.rate > 0 ? s->workload.rate : 1;
    scn_scenario *t = malloc(sizeof *t);
    if (!t) return fallback;
    plan_apply(s, c, t);
    t->deployment.replicas = replicas;
    int cap = t->deployment.max_num_seqs > 1 ? t->deployment.max_num_seqs : 1;
    long per_step = t->deployment.max_num_batched_tokens > 0 ? t->deployment.max_num_batched_tokens : 1;
    if (per_step > cap) cap = (int)(per_step < 65536 ? per_step : 65536);
    kv_seq_work *w = malloc(sizeof *w * (size_t)cap);
    double rate = 0;
    if (w) {
        kv_cache_cfg kc = kv_cache_cfg_make(t, c->c.kv_dtype, c->c.sink, c->c.window);
        kv_saturation x = kv_saturation_rate(t, &kc, c->c.attention, c->c.layout == SCN_LAYOUT_PAGED, c->c.block_size, w, cap);
        rate = x.rate;
        /* The estimate counts requests; a conversation arrival brings `turns` of them. */
        if (t->workload.turns > 1) rate /= t->workload.turns;
        free(w);
    }
    free(t);
    return rate > 0 && isfinite(rate) ? rate : fallback;
}

int plan_capacity_search(const scn_scenario *s, const plan_cand *c, unsigned long long seed, int replicas, double hint,
                         double step, double tol, const sim_metrics *at_hint, plan_capacity_result *out)
{
    memset(out, 0, sizeof *out);
    if (!scn_arrival_has_rate(s->workload.arrival)) { out->rate = NAN; return -1; }
    if (!(hint > 0)) hint = plan_capacity_hint(s, c, replicas);
    if (!(step > 1)) step = 2;
    if (!(tol > 0)) tol = PLAN_CAPACITY_TOL;
    sim_metrics m;
    double lo = 0, hi = INFINITY;   /* lo: highest rate known to keep up; hi: lowest known not to */
    bool ok;
    if (at_hint) {
        m = *at_hint;
        ok = m.q[SIM_Q_QUEUE].p99 <= PLAN_MAX_QUEUE_P99 && plan_slo_met(s, &m);
    } else {
        ok = plan_sustains(s, c, seed, hint, replicas, &m);
        out->sims++;
    }
    out->lowest = hint;
    if (ok) {
        lo = hint;
        out->m = m;
        /* Upward until it fails, at most to PLAN_CAPACITY_RANGE x the start: a candidate that
         * still keeps up there has no capacity this search can name (its trial may be too short
         * to load it, or the SLO too loose), and says so instead of returning a huge rate. */
        double top = hint * PLAN_CAPACITY_RANGE;
        while (!isfinite(hi) && lo < top) {
            double r = fmin(lo * step, top);
            out->sims++;
            if (plan_sustains(s, c, seed, r, replicas, &m)) { lo = r; out->m = m; } else hi = r;
        }
        if (!isfinite(hi)) {
            out->rate = lo;
            out->unbounded = true;
            out->out_tok_per_s = steady_tokens(s, c, replicas, lo, &out->m);
            return 0;
        }
    } else {
        /* Downward to 1/256 of the hint, or of the offered rate when that is lower (a warm start
         * from the saturation rate must not stop above where a search from the offered rate
         * would have gone): below that the answer is "misses the SLO at every rate". */
        hi = hint;
        double bottom = fmin(hint, s->workload.rate > 0 ? s->workload.rate : hint) / 256;
        int downs = (int)ceil(log(hint / bottom) / log(step) - 1e-9);
        for (int i = 0; i < downs && lo == 0; i++) {
            double r = hi / step;
            out->sims++;
            out->lowest = r;
            if (plan_sustains(s, c, seed, r, replicas, &m)) { lo = r; out->m = m; } else hi = r;
        }
        if (lo == 0) { memset(&out->m, 0, sizeof out->m); return 0; }
    }
    /* Bisection: stops as soon as the bracket is within tol of its lower end. */
    while (hi / lo - 1 > tol) {
        double mid = (lo + hi) / 2;
        out->sims++;
        if (plan_sustains(s, c, seed, mid, replicas, &m)) { lo = mid; out->m = m; } else hi = mid;
    }
    out->rate = lo;
    out->out_tok_per_s = steady_tokens(s, c, replicas, lo, &out->m);
    return 0;
}

double plan_max_rate(const scn_scenario *s, const plan_cand *c, int iterations)
{
    if (!scn_arrival_has_rate(s->workload.arrival)) return NAN;   /* a trace, closed loop or offline run has no rate to scale */
    plan_capacity_result x;
    /* Doubling brackets [r, 2r]; `iterations` halvings make it 2^-iterations of r wide. */
    plan_capacity_search(s, c, s->seed, c->replicas, 0, 2, ldexp(1.0, -iterations), NULL, &x);
    return x.unbounded ? INFINITY : x.rate;
}

int plan_min_replicas(const scn_scenario *s, const plan_cand *c, double rate, int max)
{
    sim_metrics m;
    int lo = 0, hi = 1;
    while (hi <= max && !plan_sustains(s, c, s->seed, rate, hi, &m)) { lo = hi; hi *= 2; }
    if (hi > max) {
        if (lo < max && plan_sustains(s, c, s->seed, rate, max, &m)) hi = max;
        else return 0;
    }
    while (hi - lo > 1) {
        int mid = (lo + hi) / 2;
        if (plan_sustains(s, c, s->seed, rate, mid, &m)) hi = mid; else lo = mid;
    }
    return hi;
}

long plan_max_context(const scn_scenario *s, const plan_cand *c, long concurrency)
{
    scn_scenario t;
    plan_apply(s, c, &t);
    kv_cache_cfg kc = kv_cache_cfg_make(&t, c->c.kv_dtype, c->c.sink, c->c.window);
    kv_capacity cap = kv_capacity_compute(&t, &kc, c->c.block_size, 0);
    if (cap.kv_budget <= 0 || concurrency < 1) return 0;
    /* No request may be longer than max_model_len, whatever memory is left over. */
    long limit = t.deployment.max_model_len > 0 ? t.deployment.max_model_len : t.model.max_position;
    if (limit <= 0) limit = 100000000L;
    double per = cap.kv_budget / (double)concurrency;
    if (kv_bytes_for_context(&t.model, &kc, t.deployment.tensor_parallel, limit) <= per) return limit;
    long lo = 0, hi = limit;
    while (hi - lo > 1) {
        long mid = lo + (hi - lo) / 2;
        if (kv_bytes_for_context(&t.model, &kc, t.deployment.tensor_parallel, mid) <= per) lo = mid; else hi = mid;
    }
    return lo;
}

int plan_capacity_rows(const scn_scenario *s, const plan_result *r, int top, double target, int max_replicas,
                       long concurrency, plan_capacity_row *rows, int max,
                       void (*progress)(void *ud, long done, long total), void *ud)
{
    int n = 0, ranked = 0;
    unsigned seen_hw = 0;   /* bit h+1: hardware h (or -1, the scenario's) already has a row */
    for (int k = 0; k < r->n && n < max; k++) {
        const plan_cand *x = &r->c[r->order[k]];
        if (x->status != PLAN_DONE || !x->allowed) continue;
        /* The best `top`, and the best of every other hardware profile (fewest GPUs across hardware). */
        unsigned bit = 1u << (x->hw + 1);
        if (ranked >= top && (seen_hw & bit)) continue;
        if (ranked < top) ranked++;
        seen_hw |= bit;
        plan_capacity_row *w = &rows[n++];
        w->cand = r->order[k];
        w->rate = x->rate;   /* plan_rank's: over seeds, widened by the search's resolution */
        w->unbounded = x->unbounded;
        w->rate_per_gpu = w->rate.mean / x->gpus;
        w->usd_per_mtok = x->usd_per_mtok;
        int reps = target > 0 ? plan_min_replicas(s, x, target, max_replicas) : 0;
        /* Colocated, the search scales replicas: each brings gpus/replicas GPUs. Disaggregated,
         * the pools are the scenario's as given (a replica count does not scale them): the
         * target is met on their GPUs or not at all. */
        if (s->deployment.disagg.on) w->gpus_for_target = reps > 0 ? (int)x->gpus : 0;
        else w->gpus_for_target = reps * (int)(x->gpus / (x->replicas > 0 ? x->replicas : 1));
        w->max_context = plan_max_context(s, x, concurrency);
        if (progress) progress(ud, n, max);
    }
    return n;
}

int plan_capacity_fewest(const plan_capacity_row *rows, int n)
{
    int best = -1;
    for (int i = 0; i < n; i++) {
        const plan_capacity_row *a = &rows[i];
        if (a->gpus_for_target <= 0) continue;
        /* An unbounded capacity has no rate to break a tie with; its GPU count still stands. */
        if (best < 0) { best = i; continue; }
        const plan_capacity_row *b = &rows[best];
        if (a->gpus_for_target != b->gpus_for_target) { if (a->gpus_for_target < b->gpus_for_target) best = i; continue; }
        /* Equal GPU counts: the cheaper per token, then the higher rate. */
        if (isfinite(a->usd_per_mtok) && isfinite(b->usd_per_mtok) && a->usd_per_mtok != b->usd_per_mtok) {
            if (a->usd_per_mtok < b->usd_per_mtok) best = i;
        } else if (a->rate.mean > b->rate.mean) best = i;
    }
    return best;
}
