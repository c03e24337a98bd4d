/* cmd_capacity.c: `kvplan capacity SCENARIO`: for the best candidates, the highest arrival
 * rate each sustains within the SLO, the fewest GPUs that serve a target rate, and the longest
 * context per request that fits at a given concurrency. */
#include "cli_run.h"
#include "../planner/plan.h"
#include "../sim/workload.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void on_progress(void *ud, long done, long total) { cli_progress_update(ud, done, total); }

/* How many of the workload's requests (the generator's first `cap`, drawn as a run draws them)
 * are too long for max_model_len (sim/workload.c, fit): refused at every rate, so the capacity
 * verdicts leave them out (plan_slo_met) and the output must say so. 0 when none or on error. */
static long too_long_drawn(const scn_scenario *s, long cap, long *drawn)
{
    int noinput;
    char err[256];
    *drawn = 0;
    sim_workload *w = sim_workload_init(s, s->seed, &noinput, err, sizeof err);
    if (!w) return 0;
    sim_req_spec r;
    long n = 0;
    while (*drawn < cap && sim_workload_next(w, &r, err, sizeof err) == 0) {
        (*drawn)++;
        n += r.too_long;
    }
    sim_workload_free(w);
    return n;
}

int cmd_capacity(int argc, char **argv)
{
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--curve")) return cmd_sweep(argc, argv);   /* load curves: sweep takes the flags */
    cli_common c = {.format = OUT_TABLE};
    long top = 3, concurrency = 64, jobs = sysconf(_SC_NPROCESSORS_ONLN), max_replicas = 64, seeds = PLAN_SEEDS_DEFAULT;
    double target = 0;
    int help = 0;
    for (int i = 1; i < argc; i++) {
        int r = cli_common_flag(&c, argc, argv, &i, &help);
        if (r < 0) return CLI_EX_USAGE;
        if (r) continue;
        const char *v;
        char msg[300];
        if ((v = cli_flag_value(argc, argv, &i, "--target-rate"))) {
            if (cli_flag_missing_value(v)) return CLI_EX_USAGE;
            if (scn_quantity_parse(v, SCN_UNIT_RATE, &target, msg, sizeof msg) || target <= 0)
                return cli_usage_error("capacity", "--target-rate: %s", target <= 0 && !msg[0] ? "must be > 0" : msg);
        } else if ((v = cli_flag_value(argc, argv, &i, "--top"))) {
            if (cli_flag_missing_value(v) || cli_parse_long("--top", v, 1, 1000, &top)) return CLI_EX_USAGE;
        } else if ((v = cli_flag_value(argc, argv, &i, "--concurrency"))) {
            if (cli_flag_missing_value(v) || cli_parse_long("--concurrency", v, 1, 10000000, &concurrency)) return CLI_EX_USAGE;
        } else if ((v = cli_flag_value(argc, argv, &i, "--max-replicas"))) {
            if (cli_flag_missing_value(v) || cli_parse_long("--max-replicas", v, 1, 4096, &max_replicas)) return CLI_EX_USAGE;
        } else if ((v = cli_flag_value(argc, argv, &i, "--seeds"))) {
            if (cli_flag_missing_value(v) || cli_parse_long("--seeds", v, 1, PLAN_SEEDS_MAX, &seeds)) return CLI_EX_USAGE;
        } else if ((v = cli_flag_value(argc, argv, &i, "--jobs"))) {
            if (cli_flag_missing_value(v) || cli_parse_long("--jobs", v, 1, 64, &jobs)) return CLI_EX_USAGE;
        } else if (!strcmp(argv[i], "--no-db")) {
            /* Accepted as `plan` accepts it: capacity reads and writes no database anyway. */
        } else if (cli_is_flag(argv[i])) {
            return cli_usage_error("capacity", "unknown option '%s'", argv[i]);
        } else if (!c.scenario) {
            c.scenario = argv[i];
        } else {
            return cli_usage_error("capacity", "unexpected argument '%s'", argv[i]);
        }
    }
    if (help) { fputs(cli_usage_of("capacity"), stdout); return CLI_OK; }
    if (!c.scenario) return cli_usage_error("capacity", "missing SCENARIO");
    scn_scenario s;
    int rc = cli_load(&c, &s);
    if (rc) return rc;
    if (!scn_arrival_has_rate(s.workload.arrival)) {
        /* Located like every loader error: file:line:col of workload.arrival.process (or of the
         * nearest parent the file gives, when it inherits the arrival), or the --set that gave it. */
        char msg[300], where[1200];
        snprintf(msg, sizeof msg, "workload.arrival.process: capacity scales the arrival rate; %s workload has none "
                 "to scale (use poisson, gamma or constant arrivals)",
                 s.workload.arrival == SCN_ARRIVAL_TRACE ? "a trace" : s.workload.arrival == SCN_ARRIVAL_CLOSED ? "a closed-loop" : "an offline");
        cli_locate_message(&c, s.source, msg, where, sizeof where);
        fprintf(stderr, "kvplan: %s\n", where);
        return CLI_EX_DATA;
    }
    plan_result r;
    if (plan_enumerate(&s, &r)) return CLI_EX_DATA;
    plan_set_seeds(&r, (int)seeds);
    plan_set_capacity(&r, true);
    plan_skip_disallowed(&r);
    char err[1024];
    cli_progress bar;
    cli_progress_init(&bar, "searching capacity");
    if (plan_evaluate(&s, &r, (int)jobs, 0, 1, on_progress, &bar, err, sizeof err)) {
        cli_progress_end(&bar);
        fprintf(stderr, "kvplan: %s\n", err);
        plan_result_free(&r);
        return CLI_EX_INTERNAL;
    }
    plan_rank(&s, &r);
    int max = (int)top + SCN_HW_OPT_MAX;
    plan_capacity_row *rows = calloc((size_t)max, sizeof *rows);
    out_doc *doc = rows ? out_doc_init() : NULL;
    if (!doc) { cli_progress_end(&bar); free(rows); plan_result_free(&r); return CLI_EX_INTERNAL; }
    int nr = plan_capacity_rows(&s, &r, (int)top, target, (int)max_replicas, concurrency, rows, max, on_progress, &bar);
    cli_progress_end(&bar);
    if (nr == 0) {
        /* No candidate could run: an empty table with exit 0 would read as "capacity: none"
         * when the scenario is infeasible. Say why each was dropped (the reason `simulate`
         * gives for the same configuration) and exit as simulate does on infeasible data. */
        fprintf(stderr, "kvplan: %s: no candidate can run:\n", c.scenario);
        for (int i = 0; i < r.n; i++) {
            char desc[300];
            plan_describe(&r.c[i], desc, sizeof desc);
            const char *why = r.c[i].status == PLAN_SKIPPED ? r.c[i].why
                            : !r.c[i].allowed ? "a risk it takes is not accepted by the scenario's quality"
                            : "not evaluated";
            fprintf(stderr, "  %s: %s\n", desc, why);
        }
        out_doc_free(doc);
        free(rows);
        plan_result_free(&r);
        return CLI_EX_DATA;
    }
    /* The rate's unit in the headers: conversations/s when the arrival process counts
     * conversations (plan_rate_unit), as `plan` says it. */
    char h_rate[64];
    snprintf(h_rate, sizeof h_rate, "max rate in SLO (%s)", plan_rate_unit(&s));
    const out_col cols[] = {
        {"options", "candidate", OUT_STR}, {"hardware", "hardware", OUT_STR}, {"gpus", "GPUs", OUT_INT},
        {"max_rate_req_per_s", h_rate, OUT_RATE}, {"max_rate_lo", "95% lo", OUT_RATE},
        {"max_rate_hi", "95% hi", OUT_RATE}, {"seeds", "seeds", OUT_INT}, {"max_rate_per_gpu", "per GPU", OUT_RATE},
        {"usd_per_mtok", "$/Mtok", OUT_NUM}, {"gpus_for_target", "GPUs for target", OUT_INT},
        {"max_context_tokens", "max context", OUT_INT}, {"bound", "note", OUT_STR},
    };
    out_table(doc, "capacity", "Capacity of the best candidates (and the best on each hardware profile)", 12, cols);
    for (int i = 0; i < nr; i++) {
        const plan_cand *x = &r.c[rows[i].cand];
        char desc[300];
        plan_describe(x, desc, sizeof desc);
        out_cell_str(doc, desc);
        out_cell_str(doc, plan_hardware_name(&s, x));
        out_cell_num(doc, x->gpus);
        out_cell_num(doc, rows[i].rate.mean);
        out_cell_num(doc, rows[i].rate.lo);
        out_cell_num(doc, rows[i].rate.hi);
        out_cell_num(doc, rows[i].rate.n);
        out_cell_num(doc, rows[i].rate_per_gpu);
        out_cell_num(doc, rows[i].usd_per_mtok);
        out_cell_num(doc, rows[i].gpus_for_target > 0 ? (double)rows[i].gpus_for_target : NAN);
        out_cell_num(doc, (double)rows[i].max_context);
        /* A search that kept up at its top rate found no capacity: its rate is a lower bound. */
        bool misses = !rows[i].unbounded && !(rows[i].rate.mean > 0);
        /* Seeds on the same search step leave no spread: the 95 % interval is then the search's
         * resolution (lo = mean, hi = mean + PLAN_CAPACITY_TOL), which the note must say rather than
         * let it read as seed-to-seed variation. */
        char agreed[200];
        if (rows[i].rate.n > 1)
            snprintf(agreed, sizeof agreed, "the %d seeds agreed within the search resolution (interval: the %.0f %% "
                     "resolution, not seed spread)", rows[i].rate.n, 100 * PLAN_CAPACITY_TOL);
        else
            snprintf(agreed, sizeof agreed, "one seed (interval: the %.0f %% search resolution, not seed spread)",
                     100 * PLAN_CAPACITY_TOL);
        out_cell_str(doc, rows[i].unbounded ? "unbounded within the searched range (max rate: a lower bound)"
                          : misses ? "misses the SLO at every rate tried"
                          : plan_rate_at_resolution(rows[i].rate) ? agreed : "");
    }
    out_section(doc, "question", "Asked");
    out_kv_str(doc, "scenario", "scenario", s.name);
    out_kv_num(doc, "target_rate", "target rate (req/s)", target > 0 ? target : NAN, OUT_NUM);
    out_kv_num(doc, "concurrency", "concurrency for max context", (double)concurrency, OUT_INT);
    out_kv_num(doc, "seeds", "seeds per candidate", r.seeds, OUT_INT);
    long sims = 0;
    for (int i = 0; i < r.n; i++) sims += r.c[i].sims;
    out_kv_num(doc, "simulations", "simulations run for the search", (double)sims, OUT_INT);
    int f = plan_capacity_fewest(rows, nr);
    if (target > 0) {
        char desc[300] = "none up to the replica limit";
        if (f >= 0) plan_describe(&r.c[rows[f].cand], desc, sizeof desc);
        out_kv_str(doc, "fewest_gpus_for_target", "fewest GPUs for the target", desc);
        out_kv_num(doc, "fewest_gpus", "GPUs", f >= 0 ? rows[f].gpus_for_target : NAN, OUT_INT);
        out_kv_str(doc, "fewest_gpus_hardware", "on", f >= 0 ? plan_hardware_name(&s, &r.c[rows[f].cand]) : "-");
    }
    out_note(doc, "Max rate: the highest arrival rate at which the queue stays bounded (p99 wait for admission under "
                  "%.0f s) and the SLO holds, mean and 95 %% interval over seeds (a search galloping from the cost "
                  "model's estimate, then bisection to %.0f %%, trials stopped once their failure is settled, "
                  "a trial: the scenario's requests up to %d, but at least %d times the sequences the deployment runs at once "
                  "(max_num_seqs, or fewer when the KV cache holds fewer of the workload's mean length) and "
                  "%.0f s of arrivals, so a rate more than %.1f %% above capacity grows the wait past the limit; a "
                  "candidate that keeps up at %.0fx its start is unbounded within the searched range). $/Mtok: the hardware's price per GPU-hour over the output tokens/s at that rate. "
                  "GPUs for target: tensor parallel x the fewest replicas that serve it (blank when none up to %ld). "
                  "Max context: the longest sequence of which %ld fit the KV cache together (cost model), at most "
                  "max_model_len.", PLAN_MAX_QUEUE_P99, 100 * PLAN_CAPACITY_TOL, PLAN_CAPACITY_REQUESTS, PLAN_TRIAL_CYCLES,
             PLAN_TRIAL_SPAN_WAITS * PLAN_MAX_QUEUE_P99, 100 / (0.99 * PLAN_TRIAL_SPAN_WAITS), PLAN_CAPACITY_RANGE, max_replicas,
             concurrency);
    long drawn, too = too_long_drawn(&s, PLAN_CAPACITY_REQUESTS, &drawn);
    if (too > 0)
        out_note(doc, "%ld of the workload's first %ld requests (%.1f %%) are too long for max_model_len (%d tokens) and "
                      "are refused at every rate: the max rates leave them out, as no rate or replica count changes "
                      "them (raise deployment.max_model_len, or see workload.max_tokens).",
                 too, drawn, 100.0 * (double)too / (double)drawn, s.deployment.max_model_len);
    if (s.deployment.attention_dp > 1 && s.model.experts > 0)   /* the split every row runs with (kv_moe_parallel.h) */
        out_note(doc, "Every candidate runs attention DP %d x its TP, routed experts over EP %d: GPUs count the whole "
                      "replica, max context is per DP rank (each holds its own sequences and KV).",
                 s.deployment.attention_dp, s.deployment.expert_parallel > 1 ? s.deployment.expert_parallel : 1);
    rc = cli_emit(doc, c.format);
    out_doc_free(doc);
    free(rows);
    plan_result_free(&r);
    return rc;
}
