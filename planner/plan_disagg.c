/* plan_disagg.c: the disaggregation sweep (plan_disagg.h). Every layout spends exactly the
 * colocated recommendation's GPUs; each runs the recommendation's choice at the offered load,
 * the best (SLO met first, then goodput, then TTFT p99) and the colocated reference with chunked
 * prefill are then compared at the highest rate each sustains within the SLO when the objective
 * is judged at capacity. Disaggregation is recommended only when that comparison shows a gain
 * beyond the search's tolerance. docs/planner.md, "Disaggregation". */
#include "plan_disagg.h"
#include "../model/kv_model.h"
#include "../model/kv_transfer.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool plan_disagg_wanted(const scn_scenario *s)
{
    return s->options.disagg_sweep || s->deployment.disagg.on;
}

void plan_disagg_layout_name(const plan_disagg_layout *l, char *buf, size_t n)
{
    snprintf(buf, n, "%dP(tp%d)+%dD(tp%d)", l->x, l->tp_p, l->y, l->tp_d);
}

void plan_disagg_apply(const scn_scenario *s, const scn_hardware *hw, int x, int tp_p, int y, int tp_d, scn_scenario *out)
{
    *out = *s;
    scn_disagg *d = &out->deployment.disagg;
    if (!s->deployment.disagg.on) {
        /* The loader's defaults (loader/scn_bind_disagg.c): the hardware's network, layerwise. */
        d->link = hw->net != SCN_LINK_NONE ? hw->net : hw->link;
        d->bandwidth = hw->net != SCN_LINK_NONE ? hw->net_bandwidth : hw->link_bandwidth;
        d->latency = hw->net != SCN_LINK_NONE ? hw->net_latency : hw->link_latency;
        d->layerwise = true;
    }
    d->on = true;
    d->prefill = (scn_pool){.replicas = x, .tensor_parallel = tp_p, .hardware = *hw};
    d->decode = (scn_pool){.replicas = y, .tensor_parallel = tp_d, .hardware = *hw};
}

/* The layouts' ranking: SLO met first, then goodput, then TTFT p99. */
static bool better(const plan_disagg_layout *a, const plan_disagg_layout *b)
{
    if (a->slo_met != b->slo_met) return a->slo_met;
    if (a->m.goodput != b->m.goodput) return a->m.goodput > b->m.goodput;
    return a->m.q[SIM_Q_TTFT].p99 < b->m.q[SIM_Q_TTFT].p99;
}

static int run(const scn_scenario *s, const plan_cand *c, sim_metrics *m, char *why, size_t n)
{
    scn_scenario *t = malloc(sizeof *t);
    if (!t) { snprintf(why, n, "out of memory"); return SIM_E_INTERNAL; }
    plan_apply(s, c, t);
    int rc = sim_run_predicted(t, &c->c, m, why, n);
    free(t);
    /* A pool's failure leads with the scenario field to locate (sim/disagg.c); a swept layout
     * is not the file's, so the table keeps only the reason. */
    const char *pre = "deployment.disaggregation.", *colon = strstr(why, ": ");
    if (rc != SIM_OK && !strncmp(why, pre, strlen(pre)) && colon) memmove(why, colon + 2, strlen(colon + 2) + 1);
    return rc;
}

int plan_disagg_sweep(const scn_scenario *s, const plan_result *r, plan_disagg_result *out, char *err, size_t n)
{
    memset(out, 0, sizeof *out);
    out->best = -1;
    if (r->best < 0) return 0;
    const plan_cand *best = &r->c[r->best];
    /* The budget: the recommendation's GPUs (colocated replicas x TP, or the given pools). */
    const scn_disagg *given = &s->deployment.disagg;
    int gpus = given->on ? given->prefill.replicas * given->prefill.tensor_parallel +
                               given->decode.replicas * given->decode.tensor_parallel
                         : (int)best->gpus;
    out->gpus = gpus;
    if (gpus < 2) return 0;   /* a split needs two GPUs */
    scn_scenario *off = malloc(sizeof *off), *t = malloc(sizeof *t), *lay = malloc(sizeof *lay);
    if (!off || !t || !lay) { free(off); free(t); free(lay); snprintf(err, n, "out of memory"); return -1; }
    int rc = -1;
    /* The colocated reference runs `off`; every layout is built from `s` itself, so that a
     * transfer block the scenario gives (link, bandwidth, latency, layerwise) is the one each
     * split hands its KV over: plan_disagg_apply only fills in the hardware's defaults when
     * the scenario gives none. */
    *off = *s;
    off->deployment.disagg.on = false;
    /* The colocated reference: the recommendation with chunked prefill on the same GPUs. */
    plan_cand cc = *best;
    cc.seed_m = NULL;
    cc.c.scheduler = SCN_SCHED_CHUNKED;
    if (given->on) { cc.replicas = gpus / (cc.tp > 0 ? cc.tp : 1); if (cc.replicas < 1) cc.replicas = 1; }
    cc.gpus = (double)cc.tp * cc.replicas;
    out->colo = cc;
    char why[256];
    int st = run(off, &cc, &out->colo_m, why, sizeof why);
    if (st == SIM_E_INTERNAL) { snprintf(err, n, "%s", why); goto done; }
    out->colo_slo = st == SIM_OK && plan_slo_met(s, &out->colo_m);
    plan_apply(s, best, t);   /* the hardware the recommendation runs on */
    /* The candidate the layouts run: the recommendation's choice (a continuous or chunked scheduler). */
    plan_cand dc = *best;
    dc.seed_m = NULL;
    if (dc.c.scheduler == SCN_SCHED_STATIC) dc.c.scheduler = SCN_SCHED_CHUNKED;
    static const int TPS[] = {1, 2, 4, 8};
    out->swept = true;
    for (int a = 0; a < 4; a++)
        for (int b = 0; b < 4; b++) {
            int tp_p = TPS[a], tp_d = TPS[b];
            if (s->model.heads % tp_p || s->model.heads % tp_d) continue;
            for (int x = 1; x * tp_p + tp_d <= gpus; x++) {
                if ((gpus - x * tp_p) % tp_d) continue;
                if (out->n == PLAN_DISAGG_MAX) continue;
                plan_disagg_layout *l = &out->l[out->n++];
                *l = (plan_disagg_layout){.x = x, .tp_p = tp_p, .y = (gpus - x * tp_p) / tp_d, .tp_d = tp_d};
                plan_disagg_apply(s, &t->hardware, l->x, tp_p, l->y, tp_d, lay);
                st = run(lay, &dc, &l->m, l->why, sizeof l->why);
                if (st == SIM_E_INTERNAL) { snprintf(err, n, "%s", l->why); goto done; }
                l->ran = st == SIM_OK;
                l->slo_met = l->ran && plan_slo_met(s, &l->m);
                if (l->ran && (out->best < 0 || better(l, &out->l[out->best]))) out->best = (int)(l - out->l);
            }
        }
    if (out->best < 0) { rc = 0; goto done; }
    const plan_disagg_layout *bl = &out->l[out->best];
    out->at_capacity = plan_objective_at_capacity(s);
    double tol = PLAN_CAPACITY_TOL;
    if (out->at_capacity) {
        plan_disagg_apply(s, &t->hardware, bl->x, bl->tp_p, bl->y, bl->tp_d, lay);
        plan_capacity_search(off, &cc, s->seed, cc.replicas, s->workload.rate, 2, tol, NULL, &out->colo_cap);
        plan_capacity_search(lay, &dc, s->seed, dc.replicas, s->workload.rate, 2, tol, NULL, &out->best_cap);
        double a = out->best_cap.rate, c = out->colo_cap.rate;
        out->gain = c > 0 ? a / c - 1 : a > 0 ? INFINITY : 0;
        /* Two searches each stop within tol of their answer: only a larger gap is a gain. */
        out->pays = a > 0 && (c == 0 || a > c * (1 + 2 * tol));
    } else {
        /* Judged at the offered load: goodput (requests within the SLO per second). */
        double a = bl->m.goodput, c = out->colo_m.goodput;
        out->gain = c > 0 ? a / c - 1 : a > 0 ? INFINITY : 0;
        out->pays = (bl->slo_met && !out->colo_slo) || (a > c * (1 + 2 * tol) && bl->slo_met);
    }
    rc = 0;
done:
    free(off); free(t); free(lay);
    return rc;
}

/* What binds a disaggregated layout, from its run: the pressure on each resource as a share.
 * The decode pool is bounded twice: by its KV blocks and by max_num_seqs, the sequences one
 * instance batches. Either full makes finished prefills wait in the hand-off queue. */
static void binding(const scn_scenario *s, const sim_metrics *m, char *buf, size_t n)
{
    double tpot_limit = 0;
    for (int i = 0; i < s->slo.n; i++)
        if (s->slo.terms[i].metric == SCN_METRIC_TPOT) tpot_limit = s->slo.terms[i].limit;
    long seqs = m->decode_max_num_seqs > 0 ? m->decode_max_num_seqs : s->deployment.max_num_seqs;
    double p[5] = {
        m->prefill_busy,                                                       /* prefill compute */
        tpot_limit > 0 ? m->q[SIM_Q_TPOT].p99 / tpot_limit : m->decode_busy,   /* decode bandwidth */
        m->kv_util_peak,                                                       /* decode KV capacity */
        m->q[SIM_Q_TTFT].mean > 0 ? m->transfer_mean / m->q[SIM_Q_TTFT].mean : 0,   /* the hand-off */
        seqs > 0 ? (double)m->decode_batch_max / (double)seqs : 0,            /* decode batch slots */
    };
    static const char *const NAMES[] = {"prefill compute", "decode bandwidth", "decode KV capacity", "transfer bandwidth",
                                        "the decode pool's max_num_seqs"};
    int k = 0;
    for (int i = 1; i < 5; i++) if (p[i] > p[k]) k = i;
    char tpot[96];
    if (tpot_limit > 0) snprintf(tpot, sizeof tpot, "%.2f ms = %.0f %% of its limit", 1e3 * m->q[SIM_Q_TPOT].p99, 100 * p[1]);
    else snprintf(tpot, sizeof tpot, "%.2f ms (no TPOT limit; decode pool busy %.0f %%)", 1e3 * m->q[SIM_Q_TPOT].p99,
                  100 * m->decode_busy);
    snprintf(buf, n, "%s binds: prefill pool busy %.0f %%; decode TPOT p99 %s; decode KV peak %.0f %%; decode batch "
             "max %ld of max_num_seqs %ld (mean %.1f); hand-off queue wait p99 %.2f ms; hand-off %.2f ms = %.1f %% of "
             "the mean TTFT",
             NAMES[k], 100 * m->prefill_busy, tpot, 100 * m->kv_util_peak, m->decode_batch_max, seqs,
             m->decode_batch_mean, 1e3 * m->transfer_wait_p99, 1e3 * m->transfer_mean, 100 * p[3]);
}

int plan_disagg_explain(const scn_scenario *s, const plan_disagg_result *d, char lines[][PLAN_LINE], int max)
{
    int k = 0;
    if (max <= 0) return 0;
    if (!d->swept) {
        snprintf(lines[k++], PLAN_LINE, "Disaggregation was not swept: %s.",
                 d->gpus < 2 ? "the recommendation runs on one GPU, and a split needs two" : "no recommendation to compare with");
        return k;
    }
    char colo[64];
    snprintf(colo, sizeof colo, "colocated tp%d x%d with chunked prefill", d->colo.tp, d->colo.replicas);
    if (d->best < 0) {
        snprintf(lines[k++], PLAN_LINE, "Disaggregation: none of the %d layouts on %d GPUs could run (%s); keep %s.", d->n,
                 d->gpus, d->n ? d->l[0].why : "no split fits", colo);
        return k;
    }
    const plan_disagg_layout *b = &d->l[d->best];
    char name[48];
    plan_disagg_layout_name(b, name, sizeof name);
    if (d->at_capacity)
        snprintf(lines[k++], PLAN_LINE, "%s: of %d xPyD layouts on %d GPUs, %s sustains %.3g req/s within the SLO against "
                 "%.3g req/s %s (%+.0f %%)%s.", d->pays ? "Disaggregate" : "Keep colocated", d->n, d->gpus, name,
                 d->best_cap.rate, d->colo_cap.rate, colo, isfinite(d->gain) ? 100 * d->gain : 0,
                 d->pays ? "" : ": the simulations show no gain beyond the capacity search's tolerance");
    else
        snprintf(lines[k++], PLAN_LINE, "%s: of %d xPyD layouts on %d GPUs, %s has goodput %.3g req/s (SLO %s) against %.3g "
                 "req/s (SLO %s) %s.", d->pays ? "Disaggregate" : "Keep colocated", d->n, d->gpus, name, b->m.goodput,
                 b->slo_met ? "met" : "missed", d->colo_m.goodput, d->colo_slo ? "met" : "missed", colo);
    if (k < max) {
        char why[PLAN_LINE - 64];
        binding(s, d->at_capacity && d->best_cap.rate > 0 ? &d->best_cap.m : &b->m, why, sizeof why);
        snprintf(lines[k++], PLAN_LINE, "In %s %s.", name, why);
    }
    if (k < max) {
        const sim_metrics *c = d->at_capacity && d->colo_cap.rate > 0 ? &d->colo_cap.m : &d->colo_m;
        snprintf(lines[k++], PLAN_LINE, "Colocated, prefill chunks share steps with decodes: TPOT p99 %.2f ms, ITL p99 "
                 "%.2f ms against %.2f ms median, TTFT p99 %.3g s.", 1e3 * c->q[SIM_Q_TPOT].p99, 1e3 * c->q[SIM_Q_ITL].p99,
                 1e3 * c->q[SIM_Q_ITL].p50, c->q[SIM_Q_TTFT].p99);
    }
    return k;
}

void plan_disagg_rule(const scn_scenario *s, const plan_disagg_result *d, plan_rule *out)
{
    memset(out, 0, sizeof *out);
    snprintf(out->rule, sizeof out->rule, "disaggregation pays with long prompts and a tight TPOT, when the KV hand-off "
             "is small against the prefill (DistServe; Splitwise)");
    double tpot_limit = 0;
    for (int i = 0; i < s->slo.n; i++)
        if (s->slo.terms[i].metric == SCN_METRIC_TPOT) tpot_limit = s->slo.terms[i].limit;
    if (!d->swept || d->best < 0) {
        snprintf(out->verdict, sizeof out->verdict, "n/a");
        snprintf(out->evidence, sizeof out->evidence, "no disaggregated layout ran");
        return;
    }
    /* The rule's terms at the mean prompt: its prefill alone on one prefill instance, and its
     * whole hand-off; "long" means that prefill outlasts the TPOT limit, so a decode sharing
     * its step misses it. */
    const plan_disagg_layout *b = &d->l[d->best];
    scn_scenario *t = malloc(sizeof *t);
    if (!t) { snprintf(out->verdict, sizeof out->verdict, "n/a"); return; }
    plan_apply(s, &d->colo, t);
    t->deployment.tensor_parallel = b->tp_p;
    plan_disagg_apply(t, &t->hardware, b->x, b->tp_p, b->y, b->tp_d, t);
    kv_cache_cfg cfg = kv_cache_cfg_make(t, d->colo.c.kv_dtype, d->colo.c.sink, d->colo.c.window);
    long prompt = (long)(s->workload.prompt.mean + 0.5);
    kv_seq_work w = {prompt, 0};
    double prefill = kv_step_time(t, &cfg, d->colo.c.attention, &w, 1).seconds;
    kv_transfer_cost x = kv_transfer_time(t, &cfg, prompt, prefill, false);
    /* "Small": sent layer by layer, a hand-off no longer than the prefill hides behind it (one
     * layer's share shows); sent whole, it adds itself to the TTFT, and kvplan reads "small" as
     * at most a tenth of the prefill. */
    const bool lw = t->deployment.disagg.layerwise;
    bool is_long = tpot_limit > 0 && prefill > tpot_limit, small = x.whole <= (lw ? 1.0 : 0.1) * prefill;
    bool predicts = is_long && small;
    snprintf(out->verdict, sizeof out->verdict, "%s", predicts == d->pays ? "holds" : "fails");
    char lim[32] = "none";
    if (tpot_limit > 0) snprintf(lim, sizeof lim, "%.1f ms", 1e3 * tpot_limit);
    snprintf(out->evidence, sizeof out->evidence,
             "a %ld-token prompt prefills in %.1f ms against a TPOT limit of %s; its KV (%.1f MiB) hands off in %.2f ms, "
             "%.1f %% of that prefill; the rule says %s, the simulations say %s", prompt, 1e3 * prefill, lim,
             x.bytes / 1048576.0, 1e3 * x.whole, 100 * x.whole / prefill, predicts ? "disaggregate" : "stay colocated",
             d->pays ? "it pays" : "it does not pay");
    if (lw) {
        size_t u = strlen(out->evidence);
        snprintf(out->evidence + u, sizeof out->evidence - u, " (sent layer by layer, all but %.2f ms of it hides behind "
                 "the prefill)", 1e3 * kv_transfer_time(t, &cfg, prompt, prefill, true).exposed);
    }
    free(t);
}
