/* plan_rules.c: common rules of thumb tested against the scenario's own numbers. Each gets a
 * verdict (holds, fails, n/a) and the evidence, from simulations of the recommended candidate
 * with one thing changed, or from the cost model. */
#include "plan.h"
#include "../model/kv_model.h"
#include "../model/kv_offload.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* GiB with three significant figures but never an exponent ("1480 GiB", not "1.48e+03 GiB"). */
static const char *gib(double bytes, char *buf, size_t n)
{
    double v = bytes / 1073741824.0;
    snprintf(buf, n, "%.*f GiB", v >= 100 ? 0 : v >= 10 ? 1 : 2, v);
    return buf;
}

#define RULE_REQUESTS 2000

static int simulate_at(const scn_scenario *s, const plan_cand *c, double share, bool prefix, double rate, sim_metrics *m)
{
    scn_scenario *t = malloc(sizeof *t);
    if (!t) return -1;
    plan_apply(s, c, t);
    if (rate > 0) t->workload.rate = rate;
    if (t->workload.requests > RULE_REQUESTS) t->workload.requests = RULE_REQUESTS;
    if (share >= 0) t->workload.prefix_share = share;
    sim_choice ch = c->c;
    ch.prefix_cache = prefix;
    if (!prefix) ch.kv_offload = SCN_OFFLOAD_OFF;   /* offload keeps prefix-cache blocks: none without it */
    char err[256];
    int rc = sim_run_predicted(t, &ch, m, err, sizeof err) == SIM_OK ? 0 : -1;
    free(t);
    return rc;
}

static int simulate(const scn_scenario *s, const plan_cand *c, double share, bool prefix, sim_metrics *m)
{
    return simulate_at(s, c, share, prefix, 0, m);
}

static void set(plan_rule *r, const char *rule, const char *verdict, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void set(plan_rule *r, const char *rule, const char *verdict, const char *fmt, ...)
{
    snprintf(r->rule, sizeof r->rule, "%s", rule);
    snprintf(r->verdict, sizeof r->verdict, "%s", verdict);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->evidence, sizeof r->evidence, fmt, ap);
    va_end(ap);
}

/* "Prefix caching pays only above about 30 % prefix reuse." */
static void rule_prefix(const scn_scenario *s, const plan_cand *b, plan_rule *r)
{
    const char *rule = "prefix caching pays only above about 30 % prefix reuse";
    if (b->c.layout != SCN_LAYOUT_PAGED) {
        set(r, rule, "n/a", "the recommended layout is contiguous, which cannot share blocks");
        return;
    }
    if (s->workload.prefix_groups <= 0 && s->workload.turns > 1) {
        /* Multi-turn conversations: each turn resends the conversation so far, its main use. The
         * reuse is whatever share of prompt tokens the cache serves; test the rule at it, at the
         * load the plan was judged at: far above capacity every turn queues so long that LRU
         * evicts its history first (the edge scenario at 7x its capacity read 0 % hits). */
        double rate = b->at_capacity && !b->unbounded && b->rate.mean > 0 ? b->rate.mean : 0;
        sim_metrics on, off;
        if (simulate_at(s, b, -1, true, rate, &on) || simulate_at(s, b, -1, false, rate, &off)) {
            set(r, rule, "n/a", "simulation failed");
            return;
        }
        char at[96];
        if (rate > 0) snprintf(at, sizeof at, "at the recommendation's capacity (%.3g %s)", rate, plan_rate_unit(s));
        else snprintf(at, sizeof at, "at the offered load");
        double gain = off.q[SIM_Q_TTFT].mean > 0 ? 1 - on.q[SIM_Q_TTFT].mean / off.q[SIM_Q_TTFT].mean : 0;
        bool pays = gain >= 0.05 || on.goodput >= 1.02 * off.goodput, above = on.prefix_hit_rate >= 0.3;
        set(r, rule, pays == above ? "holds" : "fails",
            "%d-turn conversations resend their history: %s, with the prefix cache %.0f %% of prompt tokens come from it "
            "and mean TTFT goes from %.3f s to %.3f s (goodput %.3g to %.3g req/s), so it %s at %s 30 %% reuse",
            s->workload.turns, at, 100 * on.prefix_hit_rate, off.q[SIM_Q_TTFT].mean, on.q[SIM_Q_TTFT].mean, off.goodput,
            on.goodput, pays ? "pays" : "does not pay", above ? "above" : "below");
        return;
    }
    if (s->workload.prefix_groups <= 0) {
        set(r, rule, "n/a", "the workload shares no prefix and has single-turn requests, so there is nothing to reuse");
        return;
    }
    double shares[] = {0.05, 0.1, 0.2, 0.3, 0.5, 0.7, 0.9};
    double pays_from = -1, gain_at[7];
    for (int i = 0; i < 7; i++) {
        sim_metrics on, off;
        if (simulate(s, b, shares[i], true, &on) || simulate(s, b, shares[i], false, &off)) { set(r, rule, "n/a", "simulation failed"); return; }
        /* Paying: a lower mean TTFT by 5 %, or more goodput by 2 %. */
        gain_at[i] = off.q[SIM_Q_TTFT].mean > 0 ? 1 - on.q[SIM_Q_TTFT].mean / off.q[SIM_Q_TTFT].mean : 0;
        bool pays = gain_at[i] >= 0.05 || on.goodput >= 1.02 * off.goodput;
        if (pays && pays_from < 0) pays_from = shares[i];
    }
    double reuse_tokens = s->workload.prefix_tokens / (s->workload.prefix_tokens + s->workload.prompt.mean);
    if (pays_from < 0)
        set(r, rule, "fails", "on this workload it never paid up to 90 %% of requests sharing a prefix (TTFT gain %.0f %% at 90 %%)",
            100 * gain_at[6]);
    else if (pays_from >= 0.2 && pays_from <= 0.4)
        set(r, rule, "holds", "it starts paying at %.0f %% of requests sharing the %d-token prefix (%.0f %% lower mean TTFT there)",
            100 * pays_from, s->workload.prefix_tokens, 100 * gain_at[pays_from == 0.2 ? 2 : pays_from == 0.3 ? 3 : 4]);
    else
        set(r, rule, "fails", "it pays from %.0f %% of requests sharing the prefix: each hit skips %.0f %% of a prompt here, so "
            "the threshold moves with the prefix's share of the prompt", 100 * pays_from, 100 * reuse_tokens);
}

/* "Keep about 40 % of cache memory for the prefix cache and 60 % for active requests." */
static void rule_split(const scn_scenario *s, const plan_cand *b, plan_rule *r)
{
    const char *rule = "keep about 40 % of cache memory for the prefix cache and 60 % for active requests";
    if (s->workload.prefix_groups <= 0 || b->c.layout != SCN_LAYOUT_PAGED) {
        set(r, rule, "n/a", s->workload.turns > 1 && b->c.layout == SCN_LAYOUT_PAGED
                                ? "the cached prefixes are conversation histories, one per live conversation, with no fixed "
                                  "working set to size a reserve by; they share one LRU pool with active requests"
                                : "the workload shares no prefix");
        return;
    }
    sim_metrics on;
    if (simulate(s, b, -1, true, &on)) { set(r, rule, "n/a", "simulation failed"); return; }
    /* The prefix working set (every group's prefix, in whole blocks) and the active peak. */
    double prefix_blocks = (double)s->workload.prefix_groups * (s->workload.prefix_tokens / b->c.block_size);
    double prefix_share = prefix_blocks / on.kv_blocks, active_peak = on.kv_util_peak;
    if (prefix_share <= 0.4 && active_peak <= 0.6) {
        set(r, rule, "holds", "the prefixes need %.1f %% of the blocks and active requests peak at %.0f %%: both fit the split",
            100 * prefix_share, 100 * active_peak);
        return;
    }
    /* Failing, for one of three reasons: the prefixes outgrow the whole cache, they outgrow a
     * 40 % reserve, or active requests need more than 60 %. */
    char why[400];
    if (prefix_share > 1)
        snprintf(why, sizeof why, "the prefixes alone outgrow the whole GPU cache (%.1fx), so no split holds them: a 40 %% "
                 "reserve would keep at most %.0f %% of them, and the rest are recomputed on a miss or come back from a "
                 "lower tier (KV offload)%s", prefix_share, 100 * 0.4 / prefix_share,
                 active_peak > 0.6 ? "; active requests, at their peak, would also not fit the other 60 %" : "");
    else if (prefix_share > 0.4)
        snprintf(why, sizeof why, "the prefixes need more than a 40 %% reserve holds, so the reserve would evict prefixes "
                 "that one shared LRU pool keeps while active requests leave room%s",
                 active_peak > 0.6 ? "; and active requests, at their peak, would not fit the other 60 %" : "");
    else
        snprintf(why, sizeof why, "a fixed 40 %% reserve would starve active requests; one shared LRU pool adapts instead");
    set(r, rule, "fails", "the prefixes need %.1f %% of the blocks and active requests peak at %.0f %%: %s", 100 * prefix_share,
        100 * active_peak, why);
}

/* "PagedAttention gives 2-4x the throughput of contiguous reservation." */
static void rule_paged(const scn_scenario *s, const plan_cand *b, plan_rule *r)
{
    const char *rule = "PagedAttention gives 2-4x the throughput of contiguous reservation";
    if (!scn_arrival_has_rate(s->workload.arrival)) { set(r, rule, "n/a", "the arrival process has no rate to push to capacity"); return; }
    plan_cand paged = *b, contig = *b;
    paged.c.layout = SCN_LAYOUT_PAGED;
    contig.c.layout = SCN_LAYOUT_CONTIGUOUS;
    contig.c.prefix_cache = false;
    paged.c.prefix_cache = false;
    contig.c.kv_offload = paged.c.kv_offload = SCN_OFFLOAD_OFF;   /* offload needs the prefix cache */
    double rp = plan_max_rate(s, &paged, 5), rc = plan_max_rate(s, &contig, 5);
    if (isinf(rc)) {
        set(r, rule, "n/a", "contiguous reservation keeps up at every rate searched (unbounded within the searched range), so "
            "there is no ratio to test");
        return;
    }
    if (!(rc > 0)) {
        set(r, rule, "fails", "contiguous reservation sustains no rate within the SLO here, paged %.3g %s: the gap is unbounded", rp,
            plan_rate_unit(s));
        return;
    }
    /* Whether memory limited contiguous at its best rate decides why the ratio is what it is. */
    scn_scenario t = *s;
    t.workload.rate = rc;
    sim_metrics mc;
    double peak = simulate(&t, &contig, -1, false, &mc) == 0 ? mc.kv_util_peak : NAN;
    double x = rp / rc;
    char why[200] = "";
    if (isinf(rp)) snprintf(why, sizeof why, ": paged's capacity is unbounded within the searched range, so the ratio is a lower bound");
    else if (x < 2 && peak < 0.9)
        snprintf(why, sizeof why, ": at its limit contiguous used %.0f %% of the cache, so memory was not what stopped it", 100 * peak);
    else if (x < 2)
        snprintf(why, sizeof why, ": reservations filled the cache (%.0f %%), but the outputs' spread leaves little to reclaim", 100 * peak);
    else if (x > 4)
        snprintf(why, sizeof why, ": reserving each request's maximum output wastes most of the cache (peak %.0f %%)", 100 * peak);
    /* The baseline matters: the simulator's contiguous allocator reserves prompt + the workload's
     * largest output (kv_contiguous_reserve), a kinder baseline than the systems the vLLM paper
     * measured, which reserve the maximum sequence length (max_model_len). Say which, with the
     * sequences each reservation lets fit (cost model). */
    scn_scenario *t2 = malloc(sizeof *t2);
    char caveat[400] = "";
    if (t2) {
        plan_apply(s, &contig, t2);
        kv_cache_cfg kc = kv_cache_cfg_make(t2, contig.c.kv_dtype, contig.c.sink, contig.c.window);
        kv_capacity k = kv_capacity_compute(t2, &kc, contig.c.block_size, 0);
        long mml = t2->deployment.max_model_len;
        double per_mml = kv_bytes_for_context(&t2->model, &kc, t2->deployment.tensor_parallel, mml);
        long fit_mml = per_mml > 0 && k.kv_budget > 0 ? (long)floor(k.kv_budget / per_mml) : 0;
        if (mml > 0 && k.reserve_contiguous > 0)
            snprintf(caveat, sizeof caveat, ". Caveat: contiguous here reserves prompt + the largest output (%ld tokens for a "
                     "mean prompt; %ld sequences fit), as the simulator does, not max_model_len (%ld tokens; %ld would fit) "
                     "as the systems behind the paper's 2-4x did, so this baseline is the kinder one",
                     k.reserve_contiguous, k.max_seqs_contiguous, mml, fit_mml);
        free(t2);
    }
    set(r, rule, x >= 2 && x <= 4 ? "holds" : "fails", "paged sustains %.3g %s within the SLO, contiguous %.3g: %.1fx%s%s",
        rp, plan_rate_unit(s), rc, x, why, caveat);
}

/* "GQA with 8 query heads per KV head saves 87.5 % of KV memory." */
static void rule_gqa(const scn_scenario *s, plan_rule *r)
{
    const char *rule = "GQA with 8 query heads per KV head saves 87.5 % of KV memory";
    const scn_model *m = &s->model;
    scn_model mha = *m;
    mha.kv_heads = m->heads;
    mha.kv_lora_rank = 0;
    kv_cache_cfg c = kv_cache_cfg_make(s, s->options.kv_dtype[0], 0, 0);
    double saved = 1 - kv_bytes_per_token(m, &c) / kv_bytes_per_token(&mha, &c);
    if (m->kv_lora_rank > 0)
        set(r, rule, "n/a", "%s uses MLA, which caches a shared latent: %.1f %% less than MHA with its %d heads", m->name,
            100 * saved, m->heads);
    else if (m->heads == 8 * m->kv_heads)
        set(r, rule, "holds", "%s groups %d query heads on %d KV heads: its cache is 1/8 of MHA's, %.1f %% saved",
            m->name, m->heads, m->kv_heads, 100 * saved);
    else
        set(r, rule, "n/a", "%s groups %d query heads per KV head, so it saves %.1f %% (1 - %d/%d); the 87.5 %% holds for 8",
            m->name, m->heads / m->kv_heads, 100 * saved, m->kv_heads, m->heads);
}

/* The candidate's run with KV offload set to `off` (SCN_OFFLOAD_*), prefix cache on. */
static int simulate_offload(const scn_scenario *s, const plan_cand *c, scn_offload off, sim_metrics *m)
{
    plan_cand x = *c;
    x.c.prefix_cache = true;
    x.c.kv_offload = off;
    scn_scenario *t = malloc(sizeof *t);
    if (!t) return -1;
    plan_apply(s, &x, t);
    if (t->workload.requests > RULE_REQUESTS) t->workload.requests = RULE_REQUESTS;
    char err[256];
    int rc = sim_run_predicted(t, &x.c, m, err, sizeof err) == SIM_OK ? 0 : -1;
    free(t);
    return rc;
}

/* "KV offload pays when the prefix working set exceeds HBM and reloading a hit is cheaper than
 * recomputing it" (CachedAttention, Gao et al., USENIX ATC 2024; LMCache's documentation):
 * predicted from the cost model (kv_offload_compare: a hit reloaded from host memory, and from
 * local NVMe through host memory where the profile has a disk tier, against the prefill it
 * saves) and the working set against the GPU pool, then checked by simulating the recommended
 * candidate with host offload and without (docs/planner.md, "Rules of thumb"). The reusable
 * prefixes are the shared prefixes, or in multi-turn conversations each conversation's history
 * (CachedAttention's own case). */
static void rule_offload(const scn_scenario *s, const plan_cand *b, plan_rule *r)
{
    const char *rule = "KV offload pays when the prefix working set exceeds HBM and reload beats recompute";
    scn_scenario *t = malloc(sizeof *t);
    if (!t) { set(r, rule, "n/a", "out of memory"); return; }
    plan_apply(s, b, t);
    const scn_workload *w = &t->workload;
    if (b->c.layout != SCN_LAYOUT_PAGED || !(t->hardware.host.bandwidth > 0) || !(kv_tier_capacity(t, KV_TIER_CPU) > 0)) {
        set(r, rule, "n/a", b->c.layout != SCN_LAYOUT_PAGED ? "the recommended layout is contiguous, which caches no blocks"
                                                           : "the hardware profile gives no host memory tier to offload to");
        free(t);
        return;
    }
    bool conv = w->prefix_groups <= 0 && w->turns > 1;
    if (w->prefix_groups <= 0 && !conv) {
        set(r, rule, "n/a", "the workload shares no prefix and has single-turn requests, so no block is worth keeping below "
            "the GPU");
        free(t);
        return;
    }
    int bs = b->c.block_size;
    double hit_tokens, working;
    char what[300];
    if (!conv) {
        hit_tokens = (double)w->prefix_tokens;
        working = (double)w->prefix_groups * floor(hit_tokens / bs) * bs;
        snprintf(what, sizeof what, "the %d shared prefixes", w->prefix_groups);
    } else {
        /* Turn k resends the k - 1 turns before it, (k - 1)(P + O) tokens: over turns 2..T a hit
         * is T/2 (P + O) on average, and between turns a conversation holds k (P + O) for
         * k = 1..T-1, T/2 (P + O) on average too. Conversations between turns: Little's law,
         * starts per second x (T - 1) think times, at most all of them; with no rate, all of
         * them (offline) or one per client (closed). */
        int T = w->turns;
        double per = w->prompt.mean + w->output.mean, total = ceil((double)w->requests / T), live = total;
        if (scn_arrival_has_rate(w->arrival)) live = fmin(total, w->rate * (T - 1) * w->think_time);
        else if (w->arrival == SCN_ARRIVAL_CLOSED) live = fmin(total, (double)w->concurrency);
        if (live < 1) live = 1;
        hit_tokens = T / 2.0 * per;
        working = live * hit_tokens;
        snprintf(what, sizeof what, "the histories of about %.0f conversations between turns (%d turns of %.0f + %.0f "
                 "tokens; a history averages %.0f)", live, T, w->prompt.mean, w->output.mean, hit_tokens);
    }
    long hit = (long)(hit_tokens / bs) * bs;
    long prompt = hit + (long)w->prompt.mean;   /* the hit, then the new tokens */
    kv_cache_cfg kc = kv_cache_cfg_make(t, b->c.kv_dtype, b->c.sink, b->c.window);
    kv_offload_cmp cmp = kv_offload_compare(t, &kc, bs, KV_TIER_CPU, prompt, hit);
    bool has_disk = t->hardware.nvme.bandwidth > 0 && kv_tier_capacity(t, KV_TIER_DISK) > 0;
    kv_offload_cmp dsk = has_disk ? kv_offload_compare(t, &kc, bs, KV_TIER_DISK, prompt, hit) : (kv_offload_cmp){0};
    bool has_remote = t->hardware.remote.bandwidth > 0 && kv_tier_capacity(t, KV_TIER_REMOTE) > 0;
    kv_offload_cmp rem = has_remote ? kv_offload_compare(t, &kc, bs, KV_TIER_REMOTE, prompt, hit) : (kv_offload_cmp){0};
    free(t);
    sim_metrics on, off;
    if (simulate_offload(s, b, SCN_OFFLOAD_CPU, &on) || simulate_offload(s, b, SCN_OFFLOAD_OFF, &off)) {
        set(r, rule, "n/a", "simulation failed");
        return;
    }
    double pool = (double)off.kv_tokens;
    bool predicted = working > pool && cmp.reload_pays;
    double gain = off.q[SIM_Q_TTFT].mean > 0 ? 1 - on.q[SIM_Q_TTFT].mean / off.q[SIM_Q_TTFT].mean : 0;
    bool pays = gain >= 0.05 || on.goodput >= 1.02 * off.goodput;   /* the prefix rule's test of paying */
    char disk[480] = "";
    size_t u = 0;
    if (has_disk)
        u += (size_t)snprintf(disk, sizeof disk, "; from local NVMe, staged through host memory, the same reload takes %.1f "
                              "ms: from a disk tier, reload %s", 1e3 * dsk.reload_s,
                              dsk.reload_pays ? "beats recompute too" : "loses to recompute");
    if (has_remote && u < sizeof disk)
        snprintf(disk + u, sizeof disk - u, "; from the remote store, staged through host memory, %.1f ms: reload %s",
                 1e3 * rem.reload_s, rem.reload_pays ? "beats recompute too" : "loses to recompute");
    set(r, rule, predicted == pays ? "holds" : "fails",
        "%s hold %.0f tokens against %.0f in the GPU pool (%.2gx); reloading a %ld-token prefix from host memory takes %.1f "
        "ms against %.1f ms to recompute it, so the rule says offload %s%s; simulated, host offload serves %.0f %% of prompt "
        "tokens from the host tier and moves mean TTFT from %.3f s to %.3f s (goodput %.3g to %.3g req/s): it %s (judged "
        "as this rule judges, on one run: mean TTFT 5 %% lower or goodput 2 %% higher; the recommendation instead asks the "
        "objective's 95 %% intervals over seeds to separate)",
        what, working, pool, pool > 0 ? working / pool : 0, hit, 1e3 * cmp.reload_s, 1e3 * cmp.recompute_s,
        predicted ? "pays" : "does not pay", disk, 100 * on.tier_hit_rate[KV_TIER_CPU], off.q[SIM_Q_TTFT].mean,
        on.q[SIM_Q_TTFT].mean, off.goodput, on.goodput, pays ? "pays" : "does not pay");
}

/* The candidate equal to c except for KV offload, with offload `want` (or any offload when
 * want is SCN_OFFLOAD_CPU and c has none); -1 when none was evaluated. */
static int offload_twin(const plan_result *r, const plan_cand *c, bool off)
{
    char x[600], y[600];
    plan_describe(c, y, sizeof y);
    for (int i = 0; i < r->n; i++) {
        const plan_cand *d = &r->c[i];
        if (d->status != PLAN_DONE || (d->c.kv_offload == SCN_OFFLOAD_OFF) != off || d->hw != c->hw) continue;
        plan_cand same = *d;
        same.c.kv_offload = c->c.kv_offload;
        plan_describe(&same, x, sizeof x);
        if (!strcmp(x, y)) return i;
    }
    return -1;
}

void plan_offload_gate(const scn_scenario *s, plan_result *r)
{
    (void)s;
    if (r->best < 0 || r->c[r->best].c.kv_offload == SCN_OFFLOAD_OFF) return;
    const plan_cand *b = &r->c[r->best];
    int t = offload_twin(r, b, true);
    if (t < 0 || !r->c[t].allowed) return;
    /* Offload needs host memory and link traffic: recommend it only when its gain is measurable. */
    if (!plan_intervals_separate(r->c[t].obj, b->obj) || r->c[t].obj.mean >= b->obj.mean) r->best = t;
}

int plan_offload_explain(const scn_scenario *s, const plan_result *r, char *line, size_t n)
{
    if (r->best < 0) return 0;
    const plan_cand *b = &r->c[r->best];
    bool on = b->c.kv_offload != SCN_OFFLOAD_OFF;
    int t = offload_twin(r, b, on);
    if (t < 0) return 0;
    char cmp[600];
    plan_compare_text(s, on ? b : &r->c[t], on ? &r->c[t] : b, cmp, sizeof cmp);
    const sim_metrics *m = on ? &b->m : &r->c[t].m;
    char g[32];
    snprintf(line, n, "KV offload: %s; with offload (%s) against without: %s. The host tier served %.1f %% of prompt tokens "
             "(%s through the host link, %.3f s of reloads charged to steps, %.0f %% occupied).",
             on ? "recommended (its objective's 95 % intervals over seeds separate from the same choice without it)"
                : "not recommended, its gain is not measurable (the objective's 95 % intervals over seeds overlap; the rule "
                  "of thumb's verdict judges one run's mean TTFT)", SCN_OFFLOAD_NAMES[on ? b->c.kv_offload
             : r->c[t].c.kv_offload], cmp, 100 * m->tier_hit_rate[0], gib(m->tier_bytes[0], g, sizeof g), m->tier_xfer_s[0],
             100 * m->tier_occupancy[0]);
    return 1;
}

/* The candidate equal to c except for its preemption, with `want`; -1 when none was evaluated. */
static int preempt_twin(const plan_result *r, const plan_cand *c, scn_preemption want)
{
    char x[600], y[600];
    plan_describe(c, y, sizeof y);
    for (int i = 0; i < r->n; i++) {
        const plan_cand *d = &r->c[i];
        if (d->status != PLAN_DONE || d->c.preemption != want || d->hw != c->hw) continue;
        plan_cand same = *d;
        same.c.preemption = c->c.preemption;
        plan_describe(&same, x, sizeof x);
        if (!strcmp(x, y)) return i;
    }
    return -1;
}

void plan_swap_gate(const scn_scenario *s, plan_result *r)
{
    (void)s;
    if (r->best < 0 || r->c[r->best].c.preemption != SCN_PREEMPT_SWAP) return;
    const plan_cand *b = &r->c[r->best];
    int t = preempt_twin(r, b, SCN_PREEMPT_RECOMPUTE);
    if (t < 0 || !r->c[t].allowed) return;
    /* Swap needs host memory, link traffic and an engine that swaps at all: recommend it only
     * when its gain over recomputing is measurable, as plan_offload_gate does for offload. */
    if (!plan_intervals_separate(r->c[t].obj, b->obj) || r->c[t].obj.mean >= b->obj.mean) r->best = t;
}

int plan_swap_explain(const scn_scenario *s, const plan_result *r, char *line, size_t n)
{
    if (r->best < 0) return 0;
    const plan_cand *b = &r->c[r->best];
    bool swap = b->c.preemption == SCN_PREEMPT_SWAP;
    int t = preempt_twin(r, b, swap ? SCN_PREEMPT_RECOMPUTE : SCN_PREEMPT_SWAP);
    if (t < 0) return 0;
    const plan_cand *w = swap ? b : &r->c[t], *o = swap ? &r->c[t] : b;
    char cmp[600];
    plan_compare_text(s, w, o, cmp, sizeof cmp);
    char g[32];
    /* Which engines swap: vLLM V0 could (preemption mode SWAP, its --swap-space); vLLM V1
     * recomputes every preempted request (docs/sources.md, "vLLM V1 preemption"). */
    snprintf(line, n, "Swap preemption: %s; swap against recompute: %s (%ld swaps, %s moved). Only engines that swap can "
             "use it: vLLM V0 did (preemption mode swap, --swap-space); vLLM V1 has no swap preemption and recomputes "
             "preempted requests.",
             swap ? "recommended (its objective's 95 % intervals over seeds separate from recomputing)"
                  : "not recommended, its gain over recomputing is not measurable (the objective's 95 % intervals over seeds "
                    "overlap, or recompute is better)",
             cmp, w->m.swaps, gib(w->m.swap_bytes, g, sizeof g));
    return 1;
}

int plan_rules(const scn_scenario *s, const plan_result *r, plan_rule *out, int max)
{
    if (r->best < 0 || max < 4) return 0;
    const plan_cand *b = &r->c[r->best];
    rule_prefix(s, b, &out[0]);
    rule_split(s, b, &out[1]);
    rule_paged(s, b, &out[2]);
    rule_gqa(s, &out[3]);
    if (max < 5) return 4;
    rule_offload(s, b, &out[4]);
    return 5;
}
