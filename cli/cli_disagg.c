/* cli_disagg.c: the "Disaggregation" section of a run's report: the two pools, the KV
 * hand-offs between them and how busy each pool was (docs/simulator.md, "Disaggregation"). */
#include "cli_run.h"
#include "../planner/plan_disagg.h"
#include "../model/kv_model.h"
#include "../sim/disagg.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

void cli_report_disagg(out_doc *d, const scn_scenario *s, const sim_metrics *m)
{
    if (m->prefill_replicas <= 0) return;   /* a colocated run */
    const scn_disagg *g = &s->deployment.disagg;
    out_section(d, "disaggregation", "Disaggregation");
    out_kv_num(d, "prefill_replicas", "prefill instances", (double)m->prefill_replicas, OUT_INT);
    if (g->on) {
        out_kv_num(d, "prefill_tp", "prefill tensor_parallel", g->prefill.tensor_parallel, OUT_INT);
        out_kv_str(d, "prefill_hardware", "prefill hardware", g->prefill.hardware.name);
    }
    out_kv_num(d, "decode_replicas", "decode instances", (double)m->decode_replicas, OUT_INT);
    if (g->on) {
        out_kv_num(d, "decode_tp", "decode tensor_parallel", g->decode.tensor_parallel, OUT_INT);
        out_kv_str(d, "decode_hardware", "decode hardware", g->decode.hardware.name);
        out_kv_str(d, "transfer_link", "transfer link", SCN_LINK_NAMES[g->link]);
        out_kv_num(d, "transfer_gb_per_s", "link GB/s per GPU", g->bandwidth / 1e9, OUT_NUM);
        out_kv_str(d, "layerwise", "layer-by-layer", g->layerwise ? "yes" : "no");
    }
    out_kv_num(d, "transfer_bytes", "KV handed off", m->transfer_bytes, OUT_BYTES);
    out_kv_num(d, "transfer_mean_s", "hand-off time (mean)", m->transfer_mean, OUT_SECONDS);
    out_kv_num(d, "transfer_p99_s", "hand-off time (p99)", m->transfer_p99, OUT_SECONDS);
    out_kv_num(d, "transfer_wait_mean_s", "hand-off queue wait (mean)", m->transfer_wait_mean, OUT_SECONDS);
    out_kv_num(d, "transfer_wait_p99_s", "hand-off queue wait (p99)", m->transfer_wait_p99, OUT_SECONDS);
    out_kv_num(d, "transfer_wait_max_s", "hand-off queue wait (max)", m->transfer_wait_max, OUT_SECONDS);
    out_kv_num(d, "prefill_busy", "prefill pool busy", m->prefill_busy, OUT_FRAC);
    out_kv_num(d, "decode_busy", "decode pool busy", m->decode_busy, OUT_FRAC);
    out_kv_num(d, "prefill_kv_util_mean", "prefill pool KV use", m->prefill_kv_util_mean, OUT_FRAC);
    out_kv_num(d, "prefill_batch_mean", "prefill batch (mean sequences)", m->prefill_batch_mean, OUT_NUM);
    out_kv_num(d, "decode_batch_mean", "decode batch (mean sequences)", m->decode_batch_mean, OUT_NUM);
    out_kv_num(d, "decode_batch_max", "decode batch (max)", (double)m->decode_batch_max, OUT_INT);
    out_kv_num(d, "decode_max_num_seqs", "decode max_num_seqs", (double)m->decode_max_num_seqs, OUT_INT);
}

void cli_memory_disagg(out_doc *d, const scn_scenario *s, const kv_cache_cfg *c0, int block_size, double mean)
{
    if (!s->deployment.disagg.on) return;
    /* Each pool is its own hardware and tensor parallelism (sim_disagg_pool_scenario): the
     * colocated figures above describe neither. */
    static const out_col cols[] = {{"pool", "pool", OUT_STR}, {"hardware", "hardware", OUT_STR},
                                   {"tensor_parallel", "TP", OUT_INT}, {"replicas", "replicas", OUT_INT},
                                   {"usable_bytes", "usable per GPU", OUT_BYTES}, {"weight_bytes", "weights", OUT_BYTES},
                                   {"activation_bytes", "activations", OUT_BYTES}, {"runtime_bytes", "runtime", OUT_BYTES},
                                   {"kv_budget_bytes", "KV budget", OUT_BYTES}, {"capacity_tokens", "capacity (tokens)", OUT_INT},
                                   {"capacity_blocks", "capacity (blocks)", OUT_INT}, {"max_concurrent_seqs", "max seqs", OUT_INT}};
    out_table(d, "disaggregation_memory", "Memory per GPU of each disaggregated pool (first kv dtype, paged)",
              (int)(sizeof cols / sizeof cols[0]), cols);
    scn_scenario *p = malloc(sizeof *p);
    if (!p) return;
    for (int which = 0; which < 2; which++) {
        sim_disagg_pool_scenario(s, which, p);
        kv_cache_cfg cc = kv_cache_cfg_make(p, c0->dtype, 0, 0);
        kv_capacity k = kv_capacity_compute(p, &cc, block_size, mean);
        out_cell_str(d, which ? "decode" : "prefill");
        out_cell_str(d, p->hardware.name);
        out_cell_num(d, p->deployment.tensor_parallel);
        out_cell_num(d, p->deployment.replicas);
        out_cell_num(d, k.usable);
        out_cell_num(d, k.weights);
        out_cell_num(d, k.activation);
        out_cell_num(d, k.runtime);
        out_cell_num(d, k.kv_budget > 0 ? k.kv_budget : NAN);   /* "-" (null): none, said below */
        out_cell_num(d, k.kv_budget > 0 ? (double)k.capacity_tokens : 0);
        out_cell_num(d, k.kv_budget > 0 ? (double)k.capacity_blocks : 0);
        out_cell_num(d, k.kv_budget > 0 ? (double)k.max_seqs_paged : 0);
        if (k.kv_budget <= 0)
            out_note(d, "The %s pool's model does not fit: weights, activations and runtime need %.2f GiB of the %.2f GiB "
                        "usable per GPU (short by %.2f GiB).",
                     which ? "decode" : "prefill", (k.weights + k.activation + k.runtime) / 1073741824.0,
                     k.usable / 1073741824.0, -k.kv_budget / 1073741824.0);
    }
    free(p);
}

/* `plan`'s disaggregation sweep (planner/plan_disagg.h): its layouts, its conclusions and its
 * rule of thumb, after the colocated plan. Nothing when the scenario does not ask for it. */
int cli_plan_disagg(out_doc *doc, const scn_scenario *s, const plan_result *r, int no_rules)
{
    if (!plan_disagg_wanted(s) || r->best < 0) return 0;
    static plan_disagg_result d;
    char err[512];
    if (plan_disagg_sweep(s, r, &d, err, sizeof err)) {
        fprintf(stderr, "kvplan: %s: the disaggregation sweep failed: %s\n", s->name, err);
        return CLI_EX_INTERNAL;
    }
    static const out_col cols[] = {{"layout", "layout", OUT_STR}, {"gpus", "GPUs", OUT_INT},
                                   {"goodput", "goodput req/s", OUT_NUM}, {"slo", "SLO", OUT_STR},
                                   {"ttft_p99_s", "TTFT p99", OUT_SECONDS}, {"tpot_p99_s", "TPOT p99", OUT_SECONDS},
                                   {"transfer_mean_s", "hand-off", OUT_SECONDS}, {"transfer_wait_p99_s", "hand-off wait p99", OUT_SECONDS},
                                   {"prefill_busy", "prefill busy", OUT_FRAC}, {"decode_kv_peak", "decode KV peak", OUT_FRAC},
                                   {"rejected_share", "rejected", OUT_FRAC}, {"note", "", OUT_STR}};
    out_table(doc, "disaggregation", "Disaggregation: prefill/decode splits on the same GPUs", 12, cols);
    char name[64];
    snprintf(name, sizeof name, "colocated tp%d x%d chunked", d.colo.tp, d.colo.replicas);
    const sim_metrics *c = &d.colo_m;
    out_cell_str(doc, name); out_cell_num(doc, d.colo.gpus); out_cell_num(doc, c->goodput);
    out_cell_str(doc, d.colo_slo ? "met" : "missed"); out_cell_num(doc, c->q[SIM_Q_TTFT].p99);
    out_cell_num(doc, c->q[SIM_Q_TPOT].p99); out_cell_num(doc, NAN); out_cell_num(doc, NAN); out_cell_num(doc, NAN);
    out_cell_num(doc, c->kv_util_peak); out_cell_num(doc, sim_rejected_share(c)); out_cell_str(doc, "reference");
    for (int i = 0; i < d.n; i++) {
        const plan_disagg_layout *l = &d.l[i];
        plan_disagg_layout_name(l, name, sizeof name);
        out_cell_str(doc, name);
        out_cell_num(doc, l->x * l->tp_p + l->y * l->tp_d);
        out_cell_num(doc, l->ran ? l->m.goodput : NAN);
        out_cell_str(doc, !l->ran ? "" : l->slo_met ? "met" : "missed");
        out_cell_num(doc, l->ran ? l->m.q[SIM_Q_TTFT].p99 : NAN);
        out_cell_num(doc, l->ran ? l->m.q[SIM_Q_TPOT].p99 : NAN);
        out_cell_num(doc, l->ran ? l->m.transfer_mean : NAN);
        out_cell_num(doc, l->ran ? l->m.transfer_wait_p99 : NAN);
        out_cell_num(doc, l->ran ? l->m.prefill_busy : NAN);
        out_cell_num(doc, l->ran ? l->m.kv_util_peak : NAN);
        out_cell_num(doc, l->ran ? sim_rejected_share(&l->m) : NAN);
        out_cell_str(doc, !l->ran ? l->why : i == d.best ? "best split" : "");
    }
    static char lines[8][PLAN_LINE];
    int nl = plan_disagg_explain(s, &d, lines, 8);
    static const out_col rc_cols[] = {{"reason", "", OUT_STR}};
    out_table(doc, "disaggregation_recommendation", "Disaggregation: recommendation", 1, rc_cols);
    for (int i = 0; i < nl; i++) out_cell_str(doc, lines[i]);
    if (!no_rules) {
        plan_rule rule;
        plan_disagg_rule(s, &d, &rule);
        static const out_col rule_cols[] = {{"rule", "rule of thumb", OUT_STR}, {"verdict", "here", OUT_STR},
                                            {"evidence", "because", OUT_STR}};
        out_table(doc, "disaggregation_rule", "Disaggregation: rule of thumb, tested on this scenario", 3, rule_cols);
        out_cell_str(doc, rule.rule); out_cell_str(doc, rule.verdict); out_cell_str(doc, rule.evidence);
    }
    return 0;
}
