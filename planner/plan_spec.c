/* plan_spec.c: where speculative decoding pays. Speculation trades extra compute (a verify
 * step of k + 1 rows per sequence and the proposer's passes) for fewer weight reads per token;
 * that wins while a decode step is bound by reading weights and KV (small batches) and loses
 * once the step is bound by compute (large batches). Between the two the sign can flip more
 * than once: the verify rows leave the engine's largest CUDA-graph capture size at a batch
 * k + 1 times smaller than plain decode does, and GEMM tiles step at multiples of their rows.
 * So the planner scans every batch (kv_spec_win_ranges) and recommends speculation only when
 * the plan's decode batch lies in a range where it pays (docs/cost-model.md, "Where
 * speculation pays"; docs/planner.md). */
#include "plan.h"
#include "../model/kv_spec.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

/* The mean context a decode step reads: the prompt (with its shared prefix) plus half the output. */
static long decode_context(const scn_scenario *s)
{
    const scn_workload *w = &s->workload;
    return lround(w->prompt.mean + w->prefix_tokens * w->prefix_share + w->output.mean / 2);
}

/* The candidate's winning ranges over batches 1..max_num_seqs; false when it does not speculate. */
static bool cand_wins(const scn_scenario *s, const plan_cand *c, kv_spec_wins *out)
{
    const scn_spec *sp = kv_spec_get(s, c->c.spec);
    if (!sp) return false;
    scn_scenario *t = malloc(sizeof *t);
    if (!t) return false;
    plan_apply(s, c, t);
    kv_cache_cfg kc = kv_cache_cfg_make(t, c->c.kv_dtype, c->c.sink, c->c.window);
    *out = kv_spec_win_ranges(t, sp, &kc, c->c.attention, decode_context(s), c->max_num_seqs);
    free(t);
    return true;
}

/* The decode batch the plan's simulation ran at, as the ranges count it. */
static int mean_batch(const plan_cand *c)
{
    long b = lround(plan_judged_batch(c));   /* the batch at the load it was judged at (plan_rank) */
    return b < 1 ? 1 : b > c->max_num_seqs ? c->max_num_seqs : (int)b;
}

int plan_spec_crossover(const scn_scenario *s, const plan_cand *c)
{
    kv_spec_wins w;
    if (!cand_wins(s, c, &w)) return -1;
    return w.n == 0 || w.r[0].lo != 1 ? 0 : w.r[0].hi + 1;
}

/* The candidate that is `c` with speculation off, if it ran and is allowed. */
static int plain_twin(const plan_result *r, const scn_scenario *s, const plan_cand *c)
{
    for (int i = 0; i < r->n; i++) {
        const plan_cand *d = &r->c[i];
        if (d->status != PLAN_DONE || !d->allowed || kv_spec_get(s, d->c.spec)) continue;
        if (d->c.layout == c->c.layout && d->c.block_size == c->c.block_size && d->c.prefix_cache == c->c.prefix_cache &&
            d->c.kv_dtype == c->c.kv_dtype && d->c.attention == c->c.attention && d->c.scheduler == c->c.scheduler &&
            d->c.sink == c->c.sink && d->c.window == c->c.window && d->max_num_seqs == c->max_num_seqs &&
            d->max_batched == c->max_batched && d->tp == c->tp && d->replicas == c->replicas &&
            d->kv_heads == c->kv_heads && d->hw == c->hw && d->wformat == c->wformat && d->engine == c->engine)
            return i;
    }
    return -1;
}

void plan_spec_gate(const scn_scenario *s, plan_result *r)
{
    r->spec_gated = false;
    r->spec_gated_cand = -1;
    if (r->best < 0) return;
    const plan_cand *b = &r->c[r->best];
    kv_spec_wins w;
    if (!cand_wins(s, b, &w) || kv_spec_wins_at(&w, mean_batch(b))) return;
    int twin = plain_twin(r, s, b);
    if (twin < 0) return;
    r->spec_gated = true;
    r->spec_gated_cand = r->best;
    r->best = twin;
}

int plan_spec_explain(const scn_scenario *s, const plan_result *r, char *line, size_t n)
{
    if (r->best < 0) return 0;
    const plan_cand *b = &r->c[r->best];
    /* The speculative candidate to explain: the recommendation's own, the one passed over, or
     * the best-ranked one that ran. */
    const plan_cand *c = kv_spec_get(s, b->c.spec) ? b : r->spec_gated ? &r->c[r->spec_gated_cand] : NULL;
    for (int i = 0; !c && i < r->n; i++) {
        const plan_cand *d = &r->c[r->order[i]];
        if (d->status == PLAN_DONE && kv_spec_get(s, d->c.spec)) c = d;
    }
    if (!c) return 0;
    const scn_spec *sp = kv_spec_get(s, c->c.spec);
    kv_spec_wins w;
    if (!cand_wins(s, c, &w)) return 0;
    scn_scenario *t = malloc(sizeof *t);
    if (!t) return 0;
    plan_apply(s, c, t);
    kv_cache_cfg kc = kv_cache_cfg_make(t, c->c.kv_dtype, c->c.sink, c->c.window);
    long ctx = decode_context(s);
    int at = mean_batch(c);
    kv_spec_compare k1 = kv_spec_compare_at(t, sp, &kc, c->c.attention, 1, ctx);
    kv_spec_compare kb = kv_spec_compare_at(t, sp, &kc, c->c.attention, at, ctx);
    free(t);
    char ranges[160], cross[520], where[1000];
    kv_spec_ranges_text(&w, ranges, sizeof ranges);
    kv_spec_crossings_text(&w, sp->k, 3, cross, sizeof cross);
    if (w.n == 0)
        snprintf(where, sizeof where, "it loses at every decode batch up to max_num_seqs %d (%.3f ms per token against "
                 "%.3f ms plain at one sequence), so the proposer costs more than the weight reads it saves",
                 c->max_num_seqs, k1.spec_token * 1e3, k1.plain_token * 1e3);
    else if (w.n_cross == 0)
        snprintf(where, sizeof where, "it beats plain decode per token at every batch up to max_num_seqs %d (%.3f against "
                 "%.3f ms per token at one sequence): decode stays bound by reading weights and KV",
                 c->max_num_seqs, k1.spec_token * 1e3, k1.plain_token * 1e3);
    else
        snprintf(where, sizeof where, "it pays only at decode batches %.150s of 1..%d (%.3f against %.3f ms per token at one "
                 "sequence); %.500s", ranges, c->max_num_seqs, k1.spec_token * 1e3, k1.plain_token * 1e3, cross);
    const char *verdict;
    char tail[400];
    /* The batch quoted is the one at the load the objective was judged at: at capacity when the
     * candidate is credited there, not the offered load's (issue 16's review). */
    const plan_cand *g = r->spec_gated ? &r->c[r->spec_gated_cand] : c;
    const char *where_judged = g->at_capacity ? "at its highest rate within the SLO" : "at the offered load";
    if (r->spec_gated) {
        verdict = "not recommended";
        snprintf(tail, sizeof tail, "the plan's decode batch averages %.1f %s, where it does not pay (%.3f ms per token "
                 "speculative against %.3f plain there), so the same deployment without speculation is recommended",
                 plan_judged_batch(g), where_judged, kb.spec_token * 1e3, kb.plain_token * 1e3);
    } else if (c == b) {
        verdict = "recommended";
        snprintf(tail, sizeof tail, "the plan's decode batch averages %.1f %s, where it pays (%.3f ms per token against "
                 "%.3f plain there)", plan_judged_batch(b), where_judged, kb.spec_token * 1e3, kb.plain_token * 1e3);
    } else {
        verdict = "not chosen";
        /* by_rank's order (plan_rank.c): objectives within 0.1 % are a tie, broken by lower p99
         * latency, then less peak KV memory, then enumeration order; an exact tie said "ranks
         * higher on the objective" (issue 16 re-review). */
        double scale = fmax(fabs(c->objective), fabs(b->objective));
        bool tie = c->slo_met == b->slo_met && c->allowed == b->allowed &&
                   (c->objective == b->objective || fabs(c->objective - b->objective) <= 1e-3 * scale);
        char why[160];
        if (!tie)
            snprintf(why, sizeof why, "the recommendation ranks higher on the objective");
        else if (b->latency_p99 != c->latency_p99)
            snprintf(why, sizeof why, "the objective is a tie (within 0.1 %%), broken by the lower p99 latency (%.3g s against %.3g s)",
                     b->latency_p99, c->latency_p99);
        else if (b->m.kv_util_peak != c->m.kv_util_peak)
            snprintf(why, sizeof why, "the objective is a tie (within 0.1 %%), broken by the lower peak KV use (%.1f %% against %.1f %%)",
                     100 * b->m.kv_util_peak, 100 * c->m.kv_util_peak);
        else
            snprintf(why, sizeof why, "the objective, p99 latency and peak KV use all tie, broken by the order candidates are listed in");
        snprintf(tail, sizeof tail, "its simulated decode batch averaged %.1f %s; %s", plan_judged_batch(c), where_judged, why);
    }
    int used = snprintf(line, n, "Speculative decoding (%.60s, %.2f tokens per verify step at %ld tokens of context): %.1000s; "
                        "%s: %.390s.", c->spec_name, k1.expected, ctx, where, verdict, tail);
    /* The other speculative settings' ranges, once each, on the same deployment. */
    bool seen[SCN_OPT_MAX] = {false};
    seen[c->c.spec] = true;
    const char *lead = " Where the other settings pay:";
    for (int i = 0; i < r->n && used > 0 && (size_t)used < n; i++) {
        const plan_cand *d = &r->c[r->order[i]];
        if (d->status != PLAN_DONE || !kv_spec_get(s, d->c.spec) || seen[d->c.spec]) continue;
        seen[d->c.spec] = true;
        kv_spec_wins wd;
        if (!cand_wins(s, d, &wd)) continue;
        char rs[160];
        kv_spec_ranges_text(&wd, rs, sizeof rs);
        used += snprintf(line + used, n - (size_t)used, "%s %.60s at %.100s", lead, d->spec_name, rs);
        lead = ";";
    }
    if (used > 0 && (size_t)used < n && lead[0] == ';') snprintf(line + used, n - (size_t)used, ".");
    return 1;
}
