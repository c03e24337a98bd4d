/* cmd_sweep.c: `kvplan sweep SCENARIO` (also `kvplan capacity --curve`): latency percentiles and
 * goodput against offered rate for the best candidates, as a table, CSV or JSON, stored for the
 * report's load-curve chart. */
#include "cli_run.h"
#include "../planner/plan.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define SWEEP_POINTS_MAX 64

static void on_progress(void *ud, long done, long total) { cli_progress_update(ud, done, total); }

int cmd_sweep(int argc, char **argv)
{
    cli_common c = {.format = OUT_TABLE};
    cli_run_flags f = {.seed = -1, .interval = 1.0};
    long top = 3, points = 8, seeds = 1, jobs = sysconf(_SC_NPROCESSORS_ONLN);
    double max_rate = 0;
    int help = 0;
    for (int i = 1; i < argc; i++) {
        int r = cli_common_flag(&c, argc, argv, &i, &help);
        if (r == 0) r = cli_run_flag("sweep", &f, argc, argv, &i);
        if (r < 0) return CLI_EX_USAGE;
        if (r) continue;
        const char *v;
        char msg[300] = "";
        if ((v = cli_flag_value(argc, argv, &i, "--top"))) {
            if (cli_flag_missing_value(v) || cli_parse_long("--top", v, 1, 100, &top)) return CLI_EX_USAGE;
        } else if ((v = cli_flag_value(argc, argv, &i, "--points"))) {
            if (cli_flag_missing_value(v) || cli_parse_long("--points", v, 2, SWEEP_POINTS_MAX, &points)) return CLI_EX_USAGE;
        } else if ((v = cli_flag_value(argc, argv, &i, "--seeds"))) {
            if (cli_flag_missing_value(v) || cli_parse_long("--seeds", v, 1, PLAN_SEEDS_MAX, &seeds)) return CLI_EX_USAGE;
        } else if ((v = cli_flag_value(argc, argv, &i, "--jobs"))) {
            if (cli_flag_missing_value(v) || cli_parse_long("--jobs", v, 1, 64, &jobs)) return CLI_EX_USAGE;
        } else if ((v = cli_flag_value(argc, argv, &i, "--max-rate"))) {
            if (cli_flag_missing_value(v)) return CLI_EX_USAGE;
            if (scn_quantity_parse(v, SCN_UNIT_RATE, &max_rate, msg, sizeof msg) || !(max_rate > 0))
                return cli_usage_error("sweep", "--max-rate: %s", msg[0] ? msg : "must be > 0");
        } else if (!strcmp(argv[i], "--curve")) {
            continue;   /* `capacity --curve` passes its flags through */
        } else if (cli_is_flag(argv[i])) {
            return cli_usage_error("sweep", "unknown option '%s'", argv[i]);
        } else if (!c.scenario) {
            c.scenario = argv[i];
        } else {
            return cli_usage_error("sweep", "unexpected argument '%s'", argv[i]);
        }
    }
    if (help) { fputs(cli_usage_of("sweep"), stdout); return CLI_OK; }
    if (!c.scenario) return cli_usage_error("sweep", "missing SCENARIO");
    if (f.backend || f.req_out || f.ts_out || f.blocks) return cli_usage_error("sweep", "sweep takes --db/--no-db and --seed of the engine flags");
    scn_scenario s;
    int rc = cli_load(&c, &s);
    if (rc) return rc;
    if (f.seed >= 0) s.seed = (unsigned long long)f.seed;
    if (s.workload.arrival == SCN_ARRIVAL_TRACE) {
        fprintf(stderr, "kvplan: %s: sweep varies the arrival rate; a trace has none to vary\n", c.scenario);
        return CLI_EX_DATA;
    }
    plan_result r;
    if (plan_enumerate(&s, &r)) { fprintf(stderr, "kvplan: %s: the option space has more than 100000 candidates\n", c.scenario); return CLI_EX_DATA; }
    plan_set_seeds(&r, (int)seeds);
    plan_set_capacity(&r, true);
    plan_skip_disallowed(&r);
    char err[1024], started[32];
    db_now_iso(started, sizeof started);
    cli_progress bar;
    cli_progress_init(&bar, "sweeping");
    plan_curve_point *pts = NULL;
    db *d = NULL;
    const char *db_path = NULL;
    if (plan_evaluate(&s, &r, (int)jobs, 0, 1, on_progress, &bar, err, sizeof err)) {
        cli_progress_end(&bar);
        fprintf(stderr, "kvplan: %s: %s\n", c.scenario, err);
        rc = CLI_EX_INTERNAL;
        goto out;
    }
    plan_rank(&s, &r);
    /* As `plan` and `capacity`: no candidate ran (each skipped, with its reason), so there is
     * no curve to draw; an empty table with exit 0 would read as a sweep. */
    if ((rc = cli_plan_none_ran(c.scenario, &r))) {
        cli_progress_end(&bar);
        goto out;
    }
    int cands[100], nc = 0;
    for (int k = 0; k < r.n && nc < top; k++)
        if (r.c[r.order[k]].status == PLAN_DONE && r.c[r.order[k]].allowed) cands[nc++] = r.order[k];
    double rates[SWEEP_POINTS_MAX];
    int np = plan_curve_rates(&s, &r, cands, nc, max_rate, (int)points, rates);
    pts = calloc((size_t)(nc * np > 0 ? nc * np : 1), sizeof *pts);
    if (!pts) { cli_progress_end(&bar); rc = CLI_EX_INTERNAL; goto out; }
    for (int i = 0; i < nc; i++) {
        if (plan_curve(&s, &r, cands[i], rates, np, pts + (size_t)i * np, err, sizeof err)) {
            cli_progress_end(&bar);
            fprintf(stderr, "kvplan: %s: %s\n", c.scenario, err);
            rc = CLI_EX_INTERNAL;
            goto out;
        }
        cli_progress_update(&bar, i + 1, nc);
    }
    cli_progress_end(&bar);
    if ((rc = cli_open_db(&f, &d, &db_path))) goto out;
    if (d && (rc = plan_store_curve(d, &s, &r, pts, nc * np, started, err, sizeof err))) {
        fprintf(stderr, "kvplan: %s: storing the curves failed: %s\n", db_path, err);
        rc = cli_exit_for_db(rc);
        goto out;
    }
    out_doc *doc = out_doc_init();
    if (!doc) { rc = CLI_EX_INTERNAL; goto out; }
    static const out_col cols[] = {
        {"options", "candidate", OUT_STR}, {"hardware", "hardware", OUT_STR}, {"rate_req_per_s", "offered", OUT_RATE},
        {"ttft_p50_s", "TTFT p50", OUT_SECONDS}, {"ttft_p99_s", "TTFT p99", OUT_SECONDS},
        {"tpot_p50_s", "TPOT p50", OUT_SECONDS}, {"tpot_p99_s", "TPOT p99", OUT_SECONDS},
        {"e2e_p99_s", "E2E p99", OUT_SECONDS}, {"goodput_req_per_s", "goodput", OUT_RATE},
        {"output_tok_per_s", "out tok/s", OUT_NUM}, {"slo", "SLO", OUT_STR},
    };
    out_table(doc, "curves", "Latency and goodput against offered rate (one seed per point)", 11, cols);
    for (int i = 0; i < nc * np; i++) {
        const plan_curve_point *p = &pts[i];
        const plan_cand *x = &r.c[p->cand];
        char desc[300];
        plan_describe(x, desc, sizeof desc);
        out_cell_str(doc, desc);
        out_cell_str(doc, plan_hardware_name(&s, x));
        out_cell_num(doc, p->rate);
        out_cell_num(doc, p->m.q[SIM_Q_TTFT].p50);
        out_cell_num(doc, p->m.q[SIM_Q_TTFT].p99);
        out_cell_num(doc, p->m.q[SIM_Q_TPOT].p50);
        out_cell_num(doc, p->m.q[SIM_Q_TPOT].p99);
        out_cell_num(doc, p->m.q[SIM_Q_E2E].p99);
        out_cell_num(doc, p->m.goodput);
        out_cell_num(doc, p->m.output_tok_per_s);
        out_cell_str(doc, p->slo_met ? "met" : "missed");
    }
    /* Arrivals a full waiting queue turned away are in no latency column, but they miss the SLO
     * (plan_slo_met): say so, or a row within every limit would read "missed" unexplained. */
    int shed = 0;
    long most = 0, of = 0;
    double at = 0;
    for (int i = 0; i < nc * np; i++) {
        const sim_metrics *m = &pts[i].m;
        long turned = m->rejected - m->too_long;
        if (turned <= 0) continue;
        shed++;
        if (turned > most) { most = turned; of = m->requests + m->rejected; at = pts[i].rate; }
    }
    if (shed) {
        char bound[96];
        out_note(doc, "At %d of the points a full waiting queue (%s) turned arrivals away, up to %ld of %ld at %.4g "
                      "req/s: they are in no latency column, and SLO reads missed where they exceed a term's share "
                      "(1 - its percentile), however fast the served were.", shed, cli_queue_bound(&s, bound, sizeof bound),
                 most, of, at);
    }
    /* Requests too long for the context are refused at every rate; the verdicts leave them out
     * (plan_slo_met), which a "met" must not hide. */
    long too = 0, too_of = 0;
    for (int i = 0; i < nc * np; i++)
        if (pts[i].m.too_long > too) too = pts[i].m.too_long, too_of = (long)sim_arrivals(&pts[i].m);
    if (too > 0)
        out_note(doc, "Up to %ld of %ld arrivals at a point were too long for max_model_len (%d tokens) and were "
                      "rejected at every rate: the SLO verdicts leave them out, as no rate changes them "
                      "(raise deployment.max_model_len, or see workload.max_tokens).",
                 too, too_of, s.deployment.max_model_len);
    out_section(doc, "sweep", "Sweep");
    out_kv_str(doc, "scenario", "scenario", s.name);
    out_kv_num(doc, "candidates", "candidates drawn", nc, OUT_INT);
    out_kv_num(doc, "points", "rates per candidate", np, OUT_INT);
    out_kv_num(doc, "max_rate", "highest rate (req/s)", np ? rates[np - 1] : NAN, OUT_NUM);
    if (d) out_note(doc, "Stored in %s: `kvplan report %s --db %s` draws these curves with the SLO lines.", db_path,
                    c.scenario, db_path);
    rc = cli_emit(doc, c.format);
    out_doc_free(doc);
out:
    free(pts);
    db_close(d);
    plan_result_free(&r);
    return rc;
}
