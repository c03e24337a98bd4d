/* cmd_capacity.c: `kvplan capacity SCENARIO`: for the best candidates, the highest arrival
 * rate each sustains within the SLO, the fewest GPUs that serve a target rate, and the longest
 * context per request that fits at a given concurrency. */
#include "cli_run.h"
#include "../planner/plan.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int cmd_capacity(int argc, char **argv)
{
    cli_common c = {.format = OUT_TABLE};
    long top = 3, concurrency = 64, jobs = sysconf(_SC_NPROCESSORS_ONLN), max_replicas = 64;
    double target = 0;
    int help = 0;
    for (int i = 1; i < argc; i++) {
        int r = cli_common_flag(&c, argc, argv, &i, &help);
        if (r < 0) return CLI_EX_USAGE;
        if (r) continue;
        const char *v;
        char msg[300];
        if ((v = cli_flag_value(argc, argv, &i, "--target-rate"))) {
            if (cli_flag_missing_value()) return CLI_EX_USAGE;
            if (scn_quantity_parse(v, SCN_UNIT_RATE, &target, msg, sizeof msg) || target <= 0)
                return cli_usage_error("capacity", "--target-rate: %s", target <= 0 && !msg[0] ? "must be > 0" : msg);
        } else if ((v = cli_flag_value(argc, argv, &i, "--top"))) {
            if (cli_flag_missing_value() || cli_parse_long("--top", v, 1, 1000, &top)) return CLI_EX_USAGE;
        } else if ((v = cli_flag_value(argc, argv, &i, "--concurrency"))) {
            if (cli_flag_missing_value() || cli_parse_long("--concurrency", v, 1, 10000000, &concurrency)) return CLI_EX_USAGE;
        } else if ((v = cli_flag_value(argc, argv, &i, "--max-replicas"))) {
            if (cli_flag_missing_value() || cli_parse_long("--max-replicas", v, 1, 4096, &max_replicas)) return CLI_EX_USAGE;
        } else if ((v = cli_flag_value(argc, argv, &i, "--jobs"))) {
            if (cli_flag_missing_value() || cli_parse_long("--jobs", v, 1, 64, &jobs)) return CLI_EX_USAGE;
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
        fprintf(stderr, "kvplan: %s: capacity scales the arrival rate; a trace, closed loop or offline run has none to scale\n", c.scenario);
        return CLI_EX_DATA;
    }
    plan_result r;
    if (plan_enumerate(&s, &r)) return CLI_EX_DATA;
    char err[1024];
    cli_progress bar;
    cli_progress_init(&bar, "ranking");
    if (plan_evaluate(&s, &r, (int)jobs, 0, 1, NULL, NULL, err, sizeof err)) {
        fprintf(stderr, "kvplan: %s\n", err);
        plan_result_free(&r);
        return CLI_EX_INTERNAL;
    }
    plan_rank(&s, &r);
    out_doc *doc = out_doc_init();
    if (!doc) { plan_result_free(&r); return CLI_EX_INTERNAL; }
    static const out_col cols[] = {
        {"options", "candidate", OUT_STR}, {"gpus", "GPUs", OUT_INT}, {"max_rate_req_per_s", "max rate in SLO", OUT_RATE},
        {"max_rate_per_gpu", "per GPU", OUT_RATE}, {"gpus_for_target", "GPUs for target", OUT_INT},
        {"max_context_tokens", "max context", OUT_INT},
    };
    out_table(doc, "capacity", "Capacity of the best candidates", 6, cols);
    int shown = 0;
    long total = top * (target > 0 ? 2 : 1), done = 0;
    for (int k = 0; k < r.n && shown < top; k++) {
        const plan_cand *x = &r.c[r.order[k]];
        if (x->status != PLAN_DONE || !x->allowed) continue;
        shown++;
        char desc[300];
        plan_describe(x, desc, sizeof desc);
        double rate = plan_max_rate(&s, x, 6);
        cli_progress_update(&bar, ++done, total);
        int reps = 0;
        if (target > 0) { reps = plan_min_replicas(&s, x, target, (int)max_replicas); cli_progress_update(&bar, ++done, total); }
        out_cell_str(doc, desc);
        out_cell_num(doc, x->gpus);
        out_cell_num(doc, rate);
        out_cell_num(doc, rate / x->gpus);
        out_cell_num(doc, target > 0 ? (reps ? (double)reps * x->tp : NAN) : NAN);
        out_cell_num(doc, (double)plan_max_context(&s, x, concurrency));
    }
    cli_progress_end(&bar);
    out_section(doc, "question", "Asked");
    out_kv_str(doc, "scenario", "scenario", s.name);
    out_kv_num(doc, "target_rate", "target rate (req/s)", target > 0 ? target : NAN, OUT_NUM);
    out_kv_num(doc, "concurrency", "concurrency for max context", (double)concurrency, OUT_INT);
    out_note(doc, "Max rate: the highest arrival rate at which the queue stays bounded (p99 wait for admission under "
                  "5 s) and the SLO holds, found by doubling then bisection (%d requests a trial). GPUs for target: tensor "
                  "parallel x the fewest replicas that serve it (blank when none up to %ld). Max context: the longest "
                  "sequence of which %ld fit the KV cache together (cost model).", 3000, max_replicas, concurrency);
    rc = cli_emit(doc, c.format);
    out_doc_free(doc);
    plan_result_free(&r);
    return rc;
}
