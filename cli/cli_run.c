/* cli_run.c: flags, sinks, storage and the report shared by simulate, run and validate. */
#include "cli_run.h"
#include "cli_spec.h"
#include "../model/kv_deploy.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

int cli_run_flag(const char *cmd, cli_run_flags *f, int argc, char **argv, int *i)
{
    static const char *const VALUED[] = {"--seed", "--requests-out", "--timeseries-out", "--sample-interval", "--db",
                                         "--backend", "--blocks", NULL};
    if (!strcmp(argv[*i], "--no-db")) {
        f->no_db = 1;
    } else {
        const char *v = NULL;
        int which = -1;
        for (int k = 0; VALUED[k] && !v; k++)
            if ((v = cli_flag_value(argc, argv, i, VALUED[k]))) which = k;
        if (!v) return 0;
        if (cli_flag_missing_value(v)) return -1;
        char msg[300];
        switch (which) {
        case 0: if (cli_parse_long("--seed", v, 0, 0x7fffffffffffffffL, &f->seed)) return -1; break;
        case 1: f->req_out = v; break;
        case 2: f->ts_out = v; break;
        case 3:
            if (scn_quantity_parse(v, SCN_UNIT_TIME, &f->interval, msg, sizeof msg)) { cli_usage_error(cmd, "--sample-interval: %s", msg); return -1; }
            /* A bound below the engine's time resolution would sample forever without time
             * advancing; 1 ms is finer than any serving engine's metrics (docs/failure-model.md). */
            if (!(f->interval >= 1e-3)) { cli_usage_error(cmd, "--sample-interval must be at least 1 ms, found '%s'", v); return -1; }
            break;
        case 4: f->db_flag = v; break;
        case 5: f->backend = v; break;
        case 6: if (cli_parse_long("--blocks", v, 1, 1L << 40, &f->blocks)) return -1; break;
        }
    }
    if (f->no_db && f->db_flag) { cli_usage_error(cmd, "--db and --no-db contradict each other"); return -1; }
    return 1;
}

int cli_exit_for_vf(vf_status st)
{
    switch (st) {
    case VF_OK: return CLI_OK;
    case VF_E_DATA: return CLI_EX_DATA;
    case VF_E_NOINPUT: return CLI_EX_NOINPUT;
    case VF_E_UNAVAILABLE: return CLI_EX_UNAVAILABLE;
    case VF_E_CANTCREAT: return CLI_EX_CANTCREAT;
    case VF_E_IOERR: return CLI_EX_IOERR;
    case VF_E_TEMPFAIL: return CLI_EX_TEMPFAIL;
    default: return CLI_EX_INTERNAL;
    }
}

int cli_fail_vf(vf_status st, const char *err)
{
    fprintf(stderr, "kvplan: %s\n", err);
    return cli_exit_for_vf(st);
}

int cli_sink_open(cli_sink *k, const cli_run_flags *f, bool keep, const char *label)
{
    char err[1024];
    memset(k, 0, sizeof *k);
    cli_progress_init(&k->bar, label);
    vf_status st = vf_sink_open(&k->v, f->req_out, f->ts_out, keep, err, sizeof err);
    k->v.progress = cli_progress_cb;
    k->v.progress_ud = &k->bar;
    return st ? cli_fail_vf(st, err) : CLI_OK;
}

void cli_sink_close(cli_sink *k) { vf_sink_close(&k->v); }

int cli_execute(const cli_common *cc, const scn_scenario *s, const sim_choice *c, sim_executor *ex,
                const cli_run_flags *f, long blocks, cli_sink *k, sim_metrics *m, char *started, char *finished)
{
    char err[1500], at[1700];
    k->v.per_step = f->per_step;
    /* Located here, where the --set flags are known: a field a --set gave is blamed on the flag,
     * not on the file's line it overrode. */
    k->v.raw_errors = true;
    vf_status st = vf_execute(s, c, ex, &k->v, f->interval, blocks, m, started, finished, err, sizeof err);
    cli_progress_end(&k->bar);
    if (!st) return CLI_OK;
    cli_locate_message(cc, s->source, err, at, sizeof at);
    return cli_fail_vf(st, at);
}

int cli_store(db *d, const char *path, const scn_scenario *s, const sim_choice *c, const char *kind,
              const char *executor, const sim_metrics *m, const cli_sink *k, const char *started,
              const char *finished, long *run_id)
{
    char err[1500];
    vf_status st = vf_store(d, s, c, kind, executor, m, &k->v, started, finished, run_id, err, sizeof err);
    if (st) { fprintf(stderr, "kvplan: %s: %s\n", path, err); return cli_exit_for_vf(st); }
    return CLI_OK;
}

const char *cli_db_path(const char *flag, char *buf, size_t n)
{
    if (flag) return flag;
    const char *env = getenv("KVPLAN_DB");
    if (env && env[0]) return env;
    /* User output belongs to the user's data directory, never the tree kvplan runs in. */
    if (n > 16 && scn_user_dir(NULL, buf, n - 16) == 0 && scn_mkdirs(buf) == 0) {
        strcat(buf, "/kvplan.db");
        return buf;
    }
    return "kvplan.db";
}

int cli_exit_for_db(int st)
{
    switch (st) {
    case DB_E_CANTOPEN: return CLI_EX_CANTCREAT;
    case DB_E_DATA: case DB_E_NOTFOUND: return CLI_EX_DATA;
    case DB_E_NOINPUT: return CLI_EX_NOINPUT;
    case DB_E_IO: return CLI_EX_IOERR;
    case DB_E_BUSY: return CLI_EX_TEMPFAIL;
    default: return CLI_EX_INTERNAL;
    }
}

int cli_open_db(cli_run_flags *f, db **d, const char **path)
{
    *d = NULL;
    *path = cli_db_path(f->db_flag, f->db_default, sizeof f->db_default);
    if (f->no_db) return CLI_OK;
    db_status st;
    char err[1024];
    *d = db_open(*path, &st, err, sizeof err);
    if (!*d) { fprintf(stderr, "kvplan: %s\n", err); return cli_exit_for_db(st); }
    return CLI_OK;
}

int cli_open_db_read(const char *flag, db **d, const char **path)
{
    static char def[4096];   /* *path may point here after return */
    *path = cli_db_path(flag, def, sizeof def);
    db_status st;
    char err[1024];
    *d = db_open_read(*path, &st, err, sizeof err);
    if (!*d) { fprintf(stderr, "kvplan: %s\n", err); return cli_exit_for_db(st); }
    return CLI_OK;
}

/* The report: run facts, latency table (the CSV), throughput and KV sections. */
const char *cli_queue_bound(const scn_scenario *s, char *buf, size_t n)
{
    if (s->deployment.max_queued_requests > 0)
        snprintf(buf, n, "deployment.max_queued_requests: %d a replica", s->deployment.max_queued_requests);
    else
        snprintf(buf, n, "the simulator's bound, %ld requests over the engine", SIM_MAX_WAITING);
    return buf;
}

void cli_report_run(out_doc *d, const scn_scenario *s, const sim_choice *c, const sim_metrics *m, const char *executor,
                    long run_id, const char *db_path)
{
    char choice[256], spec[96];
    sim_choice_describe(c, choice, sizeof choice);
    cli_spec_label(s, c->spec, spec, sizeof spec);   /* plan_describe's spec=... */
    if (spec[0]) snprintf(choice + strlen(choice), sizeof choice - strlen(choice), " spec=%s", spec);
    static const out_col lat[] = {
        {"quantity", "latency", OUT_STR}, {"count", "count", OUT_INT}, {"mean_s", "mean", OUT_SECONDS},
        {"p50_s", "p50", OUT_SECONDS}, {"p90_s", "p90", OUT_SECONDS}, {"p95_s", "p95", OUT_SECONDS},
        {"p99_s", "p99", OUT_SECONDS}, {"max_s", "max", OUT_SECONDS},
    };
    out_table(d, "latency", "Latency", 8, lat);
    for (int q = 0; q < SIM_Q_COUNT; q++) {
        const sim_summary *x = &m->q[q];
        out_cell_str(d, sim_quantity_name((sim_quantity)q));
        out_cell_num(d, (double)x->count);
        out_cell_num(d, x->mean);
        out_cell_num(d, x->p50);
        out_cell_num(d, x->p90);
        out_cell_num(d, x->p95);
        out_cell_num(d, x->p99);
        out_cell_num(d, x->max);
    }
    /* The front end's share of TTFT and E2E (docs/cost-model.md, "Front end"): linear in the
     * prompt, so its mean is its value at the mean prompt. */
    double fe = m->req_per_s > 0 ? kv_frontend_seconds(s, m->input_tok_per_s / m->req_per_s) : 0;
    if (fe > 0) out_note(d, "TTFT and E2E include the engine's front end: %.3g ms a request on average (tokenising the "
                            "prompt, the first token's detokenisation).", fe * 1e3);
    /* Disaggregated pools deliver at once (sim/disagg.c), so neither note applies to them. */
    if (s->engine.async_output && !s->deployment.disagg.on)
        out_note(d, "Engine %s hands a step's tokens to the client when the next step ends (asynchronous output "
                    "processing): TTFT and E2E include that step.", s->engine.name);
    if (s->deployment.scheduler_steps > 1 && !s->engine.multi_step_stream && !s->deployment.disagg.on)
        out_note(d, "Engine %s hands a multi-step run's tokens to the client when the run ends: E2E includes the "
                    "rest of the run after a request's last token.", s->engine.name);
    /* Refusals are counted where served requests are: in the measurement window (sim_acc_reject). */
    const scn_workload *wl = &s->workload;
    bool windowed = wl->measure_by_time || wl->skip_first || wl->skip_last || wl->skip_first_frac > 0 ||
                    wl->skip_last_frac > 0;
    const char *in_window = windowed ? " in the measurement window" : "";
    /* Engines refuse such prompts rather than trim them (sim/workload.c, fit). */
    if (m->too_long > 0) {
        char why[200];
        if (wl->max_tokens_sent)
            snprintf(why, sizeof why, "asked for more tokens than max_model_len (%d) holds (prompt + max_tokens, the "
                     "client sending max_tokens = the output length: workload.max_tokens)", s->deployment.max_model_len);
        else
            snprintf(why, sizeof why, "had prompts of max_model_len (%d tokens) or longer, leaving no room for an "
                     "output token", s->deployment.max_model_len);
        out_note(d, "%ld request(s)%s %s and were rejected, as engines reject them (counted in rejected too).",
                 m->too_long, in_window, why);
    }
    /* A full waiting queue turns arrivals away as the engine does (docs/simulator.md, "Waiting
     * queue bound"); they are not served, so they are in no latency row. */
    if (m->rejected > m->too_long) {
        char bound[96];
        out_note(d, "%ld request(s)%s found the waiting queue full (%s) and were rejected%s (counted in rejected).",
                 m->rejected - m->too_long, in_window, cli_queue_bound(s, bound, sizeof bound),
                 s->deployment.max_queued_requests > 0 ? ", as the engine rejects them" : "");
    }
    /* A window that skips a burst's start leaves its refusals out, as its served requests. */
    if (m->rejected_run > m->rejected)
        out_note(d, "%ld more arrival(s) were rejected outside the measurement window (workload.measure), where they "
                    "are not counted, as the requests served there are not.",
                 m->rejected_run - m->rejected);
    /* A conversation that outgrows the context, or one of whose turns was rejected, sends no
     * further turns (sim/workload.c): say where the workload's other requests went. */
    if (m->unsent > 0)
        out_note(d, "%ld conversation turn(s) of the workload's %ld were never sent: their conversation outgrew "
                    "max_model_len (%d tokens) or one of its turns was rejected (the run's whole span, not its window).",
                 m->unsent, s->workload.requests, s->deployment.max_model_len);
    /* The lists' first values ran (plan_first), over the scenario's own values and any --set of
     * them: say which, so a --set deployment.tensor_parallel=N that a list overrode is not a
     * silent surprise. */
    {
        const scn_options *o = &s->options;
        static const char *const NAMES[] = {"tensor_parallel", "replicas", "max_num_seqs", "max_num_batched_tokens",
                                            "kv_heads", "hardware", "weight_dtype", "engine"};
        const int given[] = {o->n_tp, o->n_replicas, o->n_max_seqs, o->n_budget, o->n_kv_heads, o->n_hardware,
                             o->n_wformat, o->n_engine};
        char lists[200] = "";
        size_t k = 0;
        for (int i = 0; i < 8; i++)
            if (given[i] > 0 && k < sizeof lists)
                k += (size_t)snprintf(lists + k, sizeof lists - k, "%s%s", k ? ", " : "", NAMES[i]);
        if (k)
            out_note(d, "Ran the first value of options %s (the planner's first candidate): a list overrides the "
                        "scenario's single value and any --set of it; pick another with --set options.NAME=[...].",
                     lists);
    }
    out_section(d, "run", "Run");
    out_kv_str(d, "scenario", "scenario", s->name);
    out_kv_str(d, "model", "model", s->model.name);
    out_kv_str(d, "hardware", "hardware", s->hardware.name);
    out_kv_str(d, "engine", "engine", s->engine.name);
    {
        scn_wformat wf = {s->model.weight_dtype, s->model.weight_quant, s->model.weight_group};
        out_kv_str(d, "weights", "weights", scn_wformat_name(&wf));
    }
    if (!s->deployment.disagg.on) {
        out_kv_num(d, "tensor_parallel", "tensor parallel", s->deployment.tensor_parallel, OUT_INT);
        out_kv_num(d, "max_num_seqs", "max sequences a step", s->deployment.max_num_seqs, OUT_INT);
        out_kv_num(d, "max_num_batched_tokens", "max tokens a step", s->deployment.max_num_batched_tokens, OUT_INT);
    }
    if (s->options.n_kv_heads > 0) out_kv_num(d, "kv_heads", "KV heads (what-if)", s->model.kv_heads, OUT_INT);
    out_kv_str(d, "choice", "choice", choice);
    out_kv_str(d, "executor", "executor", executor);
    out_kv_num(d, "seed", "seed", (double)s->seed, OUT_INT);
    if (s->deployment.disagg.on) {
        /* The pools replace the deployment's replicas: say so rather than print its 1. */
        const scn_disagg *g = &s->deployment.disagg;
        char pools[160];
        snprintf(pools, sizeof pools, "%dP (tp%d, %s) + %dD (tp%d, %s)", g->prefill.replicas, g->prefill.tensor_parallel,
                 g->prefill.hardware.name, g->decode.replicas, g->decode.tensor_parallel, g->decode.hardware.name);
        out_kv_str(d, "pools", "pools", pools);
        out_kv_num(d, "gpus", "GPUs", kv_deploy_gpus(&s->deployment), OUT_INT);
    } else {
        out_kv_num(d, "replicas", "replicas", s->deployment.replicas, OUT_INT);
    }
    if (run_id > 0) {
        out_kv_num(d, "run_id", "run id", (double)run_id, OUT_INT);
        out_kv_str(d, "db", "database", db_path);
    }
    out_section(d, "throughput", "Throughput");
    out_kv_num(d, "requests", "requests", (double)m->requests, OUT_INT);
    /* Arrivals turned away, a full waiting queue's and too_long's (the notes above say why):
     * served + rejected = arrivals. */
    out_kv_num(d, "rejected", "rejected", (double)m->rejected, OUT_INT);
    out_kv_num(d, "too_long", "of which too long for the context", (double)m->too_long, OUT_INT);
    out_kv_num(d, "rejected_run", "rejected over the whole run (window or not)", (double)m->rejected_run, OUT_INT);
    out_kv_num(d, "unsent_turns", "conversation turns never sent", (double)m->unsent, OUT_INT);
    out_kv_num(d, "duration_s", "duration", m->duration, OUT_SECONDS);
    out_kv_num(d, "req_per_s", "requests/s", m->req_per_s, OUT_NUM);
    out_kv_num(d, "input_tok_per_s", "input tokens/s", m->input_tok_per_s, OUT_NUM);
    out_kv_num(d, "output_tok_per_s", "output tokens/s", m->output_tok_per_s, OUT_NUM);
    out_kv_num(d, "goodput_req_per_s", "goodput (req/s in SLO)", m->goodput, OUT_NUM);
    out_kv_num(d, "slo_attainment", "SLO attainment", m->slo_attainment, OUT_FRAC);
    out_section(d, "kv", "KV cache and batching");
    /* With attention data parallelism each DP rank holds its own pool (model/kv_moe_parallel.h). */
    out_kv_num(d, "kv_blocks", s->deployment.attention_dp > 1 && s->model.experts > 0 ? "blocks per DP rank" : "blocks per replica",
               (double)m->kv_blocks, OUT_INT);
    out_kv_num(d, "kv_tokens", "token capacity", (double)m->kv_tokens, OUT_INT);
    out_kv_num(d, "kv_util_mean", "KV use (time-weighted)", m->kv_util_mean, OUT_FRAC);
    out_kv_num(d, "kv_util_peak", "KV use (peak)", m->kv_util_peak, OUT_FRAC);
    out_kv_num(d, "fragmentation_mean", "reserved but unused", m->frag_mean, OUT_FRAC);
    out_kv_num(d, "prefix_hit_rate", "prefix hit rate", m->prefix_hit_rate, OUT_FRAC);
    out_kv_num(d, "preemptions", "preemptions", (double)m->preemptions, OUT_INT);
    out_kv_num(d, "batch_mean", "batch size (mean)", m->batch_mean, OUT_NUM);
    out_kv_num(d, "batch_max", "batch size (max)", (double)m->batch_max, OUT_INT);
    out_kv_num(d, "steps", "engine steps", (double)m->steps, OUT_INT);
    cli_report_disagg(d, s, m);
    if (c->kv_offload == SCN_OFFLOAD_OFF && c->preemption == SCN_PREEMPT_RECOMPUTE) return;
    /* KV offload tiers and swap (docs/simulator.md, "KV offload tiers"). */
    out_section(d, "offload", "KV offload tiers");
    if (c->kv_offload != SCN_OFFLOAD_OFF)
        out_kv_str(d, "offload_reload", "reloads", s->engine.kv_layerwise ? "layer by layer, behind the step's compute"
                                                                          : "before the step (charged in full)");
    static const char *const TIER[] = {"cpu", "disk", "remote"};
    for (int k = 0; k < 3; k++) {
        if ((k == 1 && !scn_offload_disk(c->kv_offload)) || (k == 2 && !scn_offload_remote(c->kv_offload))) continue;
        if (c->kv_offload == SCN_OFFLOAD_OFF) break;
        /* One row per tier figure: key suffix, label, value, unit. */
        const struct { const char *key, *label; double v; out_kind unit; } row[] = {
            {"hit_rate", "prompt tokens reloaded", m->tier_hit_rate[k], OUT_FRAC},
            {"bytes", "bytes moved", m->tier_bytes[k], OUT_BYTES},
            {"transfer_s", "reload time charged", m->tier_xfer_s[k], OUT_SECONDS},
            {"occupancy", "occupancy (time-weighted)", m->tier_occupancy[k], OUT_FRAC},
        };
        for (size_t r = 0; r < sizeof row / sizeof row[0]; r++) {
            char key[64], label[64];
            snprintf(key, sizeof key, "offload_%s_%s", TIER[k], row[r].key);
            snprintf(label, sizeof label, "%s: %s", TIER[k], row[r].label);
            out_kv_num(d, key, label, row[r].v, row[r].unit);
        }
    }
    if (c->preemption == SCN_PREEMPT_SWAP) {
        out_kv_num(d, "swaps", "preemptions by swap", (double)m->swaps, OUT_INT);
        out_kv_num(d, "swap_bytes", "swap: bytes moved", m->swap_bytes, OUT_BYTES);
        out_kv_num(d, "swap_transfer_s", "swap: time charged", m->swap_xfer_s, OUT_SECONDS);
    }
}

