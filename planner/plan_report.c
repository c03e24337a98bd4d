/* plan_report.c: the report's data from the database: runs of a scenario by name (so runs made
 * with --set are included), the Pareto front, load curves, SLO lines, KV use over time, and
 * the memory breakdown per GPU. */
#include "plan_report.h"
#include "../model/kv_model.h"
#include "../model/kv_deploy.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    const scn_scenario *s;
    db *d;
    json_t *runs, *curves, *timeseries;
    db_status st;
    char *err;
    size_t nerr;
} gather;

static json_t *num(double v) { return isfinite(v) ? json_real(v) : json_null(); }

typedef struct {
    sim_metrics *m;
    double sweep_rate;
} read_ctx;

static int read_metric(void *ud, const char *name, double value, int is_null)
{
    read_ctx *x = ud;
    if (!strcmp(name, "sweep_rate_req_per_s")) x->sweep_rate = is_null ? NAN : value;
    else sim_metrics_set(x->m, name, is_null ? NAN : value);
    return 0;
}

static int sample_into(void *ud, const sim_sample *x)
{
    json_t **ctx = ud;   /* [0] = array, [1] = label */
    json_array_append_new(ctx[0], json_pack("{s:O, s:f, s:f, s:I}", "run", ctx[1], "t_s", x->t, "kv_used", x->kv_used,
                                            "queue", (json_int_t)x->waiting));
    return 0;
}

static int each_run(void *ud, const db_run_info *r)
{
    gather *g = ud;
    if (strcmp(r->scenario, g->s->name)) return 0;
    sim_metrics m;
    memset(&m, 0, sizeof m);
    for (int q = 0; q < SIM_Q_COUNT; q++) m.q[q].p99 = m.q[q].p50 = m.q[q].mean = NAN;
    read_ctx x = {.m = &m, .sweep_rate = NAN};
    if ((g->st = db_run_metrics(g->d, r->id, read_metric, &x, g->err, g->nerr)) != DB_OK) return 1;
    json_t *opts = json_loads(r->options, 0, NULL);
    json_int_t tp = g->s->deployment.tensor_parallel, reps = g->s->deployment.replicas;
    const char *hw = g->s->hardware.name;
    if (opts) {
        json_t *v;
        if ((v = json_object_get(opts, "tensor_parallel")) && json_is_integer(v)) tp = json_integer_value(v);
        if ((v = json_object_get(opts, "replicas")) && json_is_integer(v)) reps = json_integer_value(v);
        if ((v = json_object_get(opts, "hardware")) && json_is_string(v)) hw = json_string_value(v);
    }
    /* The GPUs, counted as plan and capacity count them (model/kv_deploy.h): a disaggregated
     * run's are its two pools'. */
    scn_deployment dep = {.tensor_parallel = (int)tp, .replicas = (int)reps, .attention_dp = 1};
    json_t *dg = opts ? json_object_get(opts, "disaggregation") : NULL;
    if (dg) {
        dep.disagg.on = true;
        for (int k = 0; k < 2; k++) {
            json_t *pl = json_object_get(dg, k ? "decode" : "prefill");
            scn_pool *p = k ? &dep.disagg.decode : &dep.disagg.prefill;
            p->replicas = (int)json_integer_value(json_object_get(pl, "replicas"));
            p->tensor_parallel = (int)json_integer_value(json_object_get(pl, "tensor_parallel"));
        }
    }
    double gpus = kv_deploy_gpus(&dep);
    if (!(gpus > 0)) gpus = (double)(tp * reps);
    if (isfinite(x.sweep_rate)) {
        /* A load-curve point: one row per plotted metric, so the chart can facet by metric. */
        static const struct { const char *name; sim_quantity q; int p99; } M[] = {
            {"TTFT p50", SIM_Q_TTFT, 0}, {"TTFT p99", SIM_Q_TTFT, 1}, {"TPOT p50", SIM_Q_TPOT, 0}, {"TPOT p99", SIM_Q_TPOT, 1}};
        for (int k = 0; k < 4; k++)
            json_array_append_new(g->curves, json_pack("{s:s, s:s, s:s, s:f, s:o, s:I}", "kind", "curve", "options", r->options,
                                                       "metric", M[k].name, "rate_req_per_s", x.sweep_rate,
                                                       "value", num(M[k].p99 ? m.q[M[k].q].p99 : m.q[M[k].q].p50),
                                                       "run", (json_int_t)r->id));
        json_array_append_new(g->curves, json_pack("{s:s, s:s, s:s, s:f, s:o, s:I}", "kind", "curve", "options", r->options,
                                                   "metric", "goodput (req/s)", "rate_req_per_s", x.sweep_rate,
                                                   "value", num(m.goodput), "run", (json_int_t)r->id));
        json_decref(opts);
        return 0;
    }
    double lat = plan_percentile(&m, g->s->slo.n ? g->s->slo.terms[0].metric : SCN_METRIC_E2E, 99);
    char label[48];
    snprintf(label, sizeof label, "run %ld (%s)", r->id, r->kind);
    json_array_append_new(g->runs, json_pack("{s:I, s:s, s:s, s:s, s:s, s:I, s:f, s:o, s:o, s:o, s:o, s:o, s:o, s:b}",
                                             "run", (json_int_t)r->id, "label", label, "kind", r->kind, "options", r->options,
                                             "hardware", hw, "seed", (json_int_t)r->seed, "gpus", gpus,
                                             "out_tok_per_gpu", num(m.output_tok_per_s / gpus), "latency_p99_s", num(lat),
                                             "ttft_p50_s", num(m.q[SIM_Q_TTFT].p50), "ttft_p99_s", num(m.q[SIM_Q_TTFT].p99),
                                             "tpot_mean_s", num(m.q[SIM_Q_TPOT].mean), "throughput_req_per_s", num(m.req_per_s),
                                             "slo_met", plan_slo_met(g->s, &m)));
    /* KV offload tiers and swap (docs/simulator.md), for runs that used them. */
    if (opts && (json_object_get(opts, "kv_offload") || json_object_get(opts, "preemption")))
        json_object_set_new(json_array_get(g->runs, json_array_size(g->runs) - 1), "offload",
                            json_pack("{s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:I, s:o, s:o}",
                                      "cpu_hit_rate", num(m.tier_hit_rate[0]), "cpu_bytes", num(m.tier_bytes[0]),
                                      "cpu_transfer_s", num(m.tier_xfer_s[0]), "cpu_occupancy", num(m.tier_occupancy[0]),
                                      "disk_hit_rate", num(m.tier_hit_rate[1]), "disk_bytes", num(m.tier_bytes[1]),
                                      "disk_transfer_s", num(m.tier_xfer_s[1]), "disk_occupancy", num(m.tier_occupancy[1]),
                                      "swaps", (json_int_t)m.swaps, "swap_bytes", num(m.swap_bytes),
                                      "swap_transfer_s", num(m.swap_xfer_s)));
    /* The remote store's figures only for runs that used it (report shows a row per key set). */
    const char *ko = opts ? json_string_value(json_object_get(opts, "kv_offload")) : NULL;
    if (ko && strstr(ko, "remote")) {
        json_t *o = json_object_get(json_array_get(g->runs, json_array_size(g->runs) - 1), "offload");
        json_object_set_new(o, "remote_hit_rate", num(m.tier_hit_rate[2]));
        json_object_set_new(o, "remote_bytes", num(m.tier_bytes[2]));
        json_object_set_new(o, "remote_transfer_s", num(m.tier_xfer_s[2]));
        json_object_set_new(o, "remote_occupancy", num(m.tier_occupancy[2]));
    }
    if (m.prefill_replicas > 0) {   /* the hand-offs and the pools of a disaggregated run */
        char xpyd[32];
        snprintf(xpyd, sizeof xpyd, "%ldP%ldD", m.prefill_replicas, m.decode_replicas);
        json_t *row = json_array_get(g->runs, json_array_size(g->runs) - 1);
        json_object_set_new(row, "disaggregation", json_string(xpyd));
        json_object_set_new(row, "transfer_bytes", num(m.transfer_bytes));
        json_object_set_new(row, "transfer_mean_s", num(m.transfer_mean));
        json_object_set_new(row, "transfer_wait_p99_s", num(m.transfer_wait_p99));
        json_object_set_new(row, "prefill_busy", num(m.prefill_busy));
        json_object_set_new(row, "decode_busy", num(m.decode_busy));
    }
    json_t *lab = json_string(label);
    json_t *ctx[2] = {g->timeseries, lab};
    char e2[256];
    db_run_timeseries(g->d, r->id, sample_into, ctx, e2, sizeof e2);
    json_decref(lab);
    json_decref(opts);
    return 0;
}

void plan_report_pareto(json_t *runs)
{
    size_t n = json_array_size(runs);
    for (size_t i = 0; i < n; i++) {
        json_t *a = json_array_get(runs, i);
        double ta = json_number_value(json_object_get(a, "out_tok_per_gpu")), la = json_number_value(json_object_get(a, "latency_p99_s"));
        bool front = json_is_number(json_object_get(a, "latency_p99_s")) && json_is_number(json_object_get(a, "out_tok_per_gpu"));
        for (size_t j = 0; j < n && front; j++) {
            json_t *b = json_array_get(runs, j);
            if (j == i || !json_is_number(json_object_get(b, "latency_p99_s"))) continue;
            double tb = json_number_value(json_object_get(b, "out_tok_per_gpu")), lb = json_number_value(json_object_get(b, "latency_p99_s"));
            if (tb >= ta && lb <= la && (tb > ta || lb < la)) front = false;
        }
        json_object_set_new(a, "pareto", json_boolean(front));
    }
}

/* One option's value as text: true/false as on/off, numbers and strings as written. */
static void value_str(json_t *v, char *buf, size_t n)
{
    if (json_is_boolean(v)) snprintf(buf, n, "%s", json_is_true(v) ? "on" : "off");
    else if (json_is_integer(v)) snprintf(buf, n, "%lld", (long long)json_integer_value(v));
    else if (json_is_real(v)) snprintf(buf, n, "%g", json_real_value(v));
    else if (json_is_string(v)) snprintf(buf, n, "%s", json_string_value(v));
    else snprintf(buf, n, "?");
}

void plan_report_label_curves(json_t *curves)
{
    size_t n = json_array_size(curves);
    /* Each curve row's options parsed once: `parsed` holds them row by row (null where the row is
     * not a curve), `all` the candidates' objects to compare keys across. */
    json_t *all = json_array(), *parsed = json_array();
    for (size_t i = 0; i < n; i++) {
        json_t *row = json_array_get(curves, i);
        const char *kind = json_string_value(json_object_get(row, "kind"));
        const char *o = json_string_value(json_object_get(row, "options"));
        json_t *opts = kind && !strcmp(kind, "curve") && o ? json_loads(o, 0, NULL) : NULL;
        if (json_is_object(opts)) json_array_append(all, opts);
        json_array_append_new(parsed, opts ? opts : json_null());
    }
    for (size_t i = 0; i < n; i++) {
        json_t *row = json_array_get(curves, i);
        const char *kind = json_string_value(json_object_get(row, "kind"));
        const char *o = json_string_value(json_object_get(row, "options"));
        if (!kind || strcmp(kind, "curve") || !o) continue;
        json_t *opts = json_array_get(parsed, i);
        if (!json_is_object(opts)) { json_object_set_new(row, "label", json_string(o)); continue; }
        /* Only the options in which the plotted candidates differ name a line ("kv_dtype=fp8,
         * max_num_seqs=512"); a lone candidate is named by all of its options. */
        char label[600] = "";
        size_t used = 0;
        for (int pass = 0; pass < 2 && !used; pass++) {
            const char *key;
            json_t *v;
            json_object_foreach(opts, key, v) {
                bool differs = pass == 1;
                for (size_t j = 0; j < json_array_size(all) && !differs; j++) {
                    json_t *w = json_object_get(json_array_get(all, j), key);
                    differs = !w || !json_equal(v, w);
                }
                if (!differs || used >= sizeof label - 1) continue;
                char val[96];
                value_str(v, val, sizeof val);
                used += (size_t)snprintf(label + used, sizeof label - used, "%s%s=%s", used ? ", " : "", key, val);
            }
        }
        json_object_set_new(row, "label", json_string(label));
    }
    json_decref(all);
    json_decref(parsed);
}

/* Predicted runs, with the Pareto front marked. (Predicted/measured pairing is verify's:
 * vf_pair_runs over the "runs" dataset.) */
static void derive(json_t *runs, json_t *pareto)
{
    size_t n = json_array_size(runs);
    for (size_t i = 0; i < n; i++) {
        json_t *a = json_array_get(runs, i);
        if (!strcmp(json_string_value(json_object_get(a, "kind")), "predicted")) json_array_append(pareto, a);
    }
    plan_report_pareto(pareto);
}

/* Memory per GPU for each tensor-parallel choice: where the device memory goes. */
static json_t *memory_rows(const scn_scenario *s)
{
    json_t *rows = json_array();
    int n = s->options.n_tp ? s->options.n_tp : 1;
    for (int i = 0; i < n; i++) {
        scn_scenario t = *s;
        t.deployment.tensor_parallel = s->options.n_tp ? s->options.tensor_parallel[i] : s->deployment.tensor_parallel;
        kv_cache_cfg c = kv_cache_cfg_make(&t, s->options.kv_dtype[0], 0, 0);
        kv_capacity k = kv_capacity_compute(&t, &c, s->options.block_size[0], 0);
        char tp[32];
        snprintf(tp, sizeof tp, "tp=%d", t.deployment.tensor_parallel);
        double parts[5] = {k.weights, k.activation, k.runtime, k.kv_budget > 0 ? k.kv_budget : 0, k.device_memory - k.usable};
        static const char *const NAMES[] = {"weights", "activation peak", "runtime", "KV cache", "held back (1 - utilization)"};
        for (int p = 0; p < 5; p++)
            json_array_append_new(rows, json_pack("{s:s, s:s, s:i, s:f}", "deployment", tp, "part", NAMES[p], "order", p, "gib",
                                                  parts[p] / 1073741824.0));
    }
    return rows;
}

/* The SLO terms as horizontal lines on the load curves (rows the chart filters by kind). */
static void slo_lines(const scn_scenario *s, json_t *curves)
{
    static const char *const NAME[] = {"TTFT", "TPOT", "ITL", "E2E"};
    for (int i = 0; i < s->slo.n; i++) {
        const scn_slo_term *t = &s->slo.terms[i];
        char metric[32];
        int p = (int)lround(t->percentile);
        /* The curves plot p50 and p99; a term at another percentile is drawn on the p99 panel. */
        snprintf(metric, sizeof metric, "%s p%d", NAME[t->metric], p <= 50 ? 50 : 99);
        json_array_append_new(curves, json_pack("{s:s, s:s, s:f, s:s}", "kind", "slo", "metric", metric, "value", t->limit,
                                                "options", "SLO"));
    }
}

json_t *plan_report_data(db *d, const scn_scenario *s, db_status *st, char *err, size_t n)
{
    gather g = {.s = s, .d = d, .runs = json_array(), .curves = json_array(), .timeseries = json_array(), .st = DB_OK,
                .err = err, .nerr = n};
    *st = db_runs_list(d, 0, each_run, &g, err, n);
    if (*st == DB_OK) *st = g.st;
    if (*st != DB_OK) {
        json_decref(g.runs);
        json_decref(g.curves);
        json_decref(g.timeseries);
        return NULL;
    }
    json_t *pareto = json_array();
    derive(g.runs, pareto);
    plan_report_label_curves(g.curves);
    slo_lines(s, g.curves);
    return json_pack("{s:o, s:o, s:o, s:o, s:o}", "pareto", pareto, "curves", g.curves, "memory", memory_rows(s),
                     "timeseries", g.timeseries, "runs", g.runs);
}
