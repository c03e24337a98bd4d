/* cmd_plan.c: `kvplan plan SCENARIO`: every candidate of the option space simulated (reusing
 * runs the database already holds), ranked under the SLO, with the Pareto front, the
 * recommendation and its reasons, and rules of thumb checked against this scenario. */
#include "cli_run.h"
#include "../planner/plan.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void on_progress(void *ud, long done, long total) { cli_progress_update(ud, done, total); }

static const char *risk_label(const plan_cand *c)
{
    if (!c->risk_dtype && !c->risk_window && !c->risk_gqa && !c->risk_weights) return "";
    if (!c->allowed) return c->risk_gqa ? "risk: retraining (not allowed)" : c->risk_window ? "risk: window (not allowed)"
                          : c->risk_weights ? "risk: weight quantisation (not allowed)" : "risk: KV quantisation (not allowed)";
    return c->risk_gqa ? "risk: retraining (accepted)" : c->risk_window ? "risk: window (accepted)"
         : c->risk_weights ? "risk: weight quantisation (accepted)" : "risk: KV quantisation (accepted)";
}

/* Ranks an evaluated plan and adds its report to doc: candidates, recommendation, rules,
 * skipped candidates, summary. Shared with kvplan-mpi. */
void cli_plan_emit(out_doc *doc, const scn_scenario *s, plan_result *r, int no_rules, long top)
{
    plan_rank(s, r);
    bool cap = plan_objective_at_capacity(s);
    static const out_col cols[] = {
        {"rank", "#", OUT_INT}, {"options", "options", OUT_STR}, {"slo", "SLO", OUT_STR}, {"risk", "accuracy", OUT_STR},
        {"objective", "objective", OUT_NUM}, {"objective_lo", "95% lo", OUT_NUM}, {"objective_hi", "95% hi", OUT_NUM},
        {"seeds", "seeds", OUT_INT}, {"judged_at", "judged at", OUT_STR},
        {"max_rate_req_per_s", "max rate in SLO", OUT_RATE}, {"offered_objective", "at offered load", OUT_NUM},
        {"gpus", "GPUs", OUT_INT}, {"hardware", "hardware", OUT_STR}, {"usd_per_mtok", "$/Mtok", OUT_NUM},
        {"goodput_per_gpu", "goodput/GPU", OUT_NUM},
        {"output_tok_per_s", "out tok/s", OUT_NUM}, {"ttft_p99_s", "TTFT p99", OUT_SECONDS},
        {"tpot_p99_s", "TPOT p99", OUT_SECONDS}, {"e2e_p99_s", "E2E p99", OUT_SECONDS}, {"kv_util_peak", "KV peak", OUT_FRAC},
        {"preemptions", "preempt", OUT_INT}, {"rejected_share", "rejected", OUT_FRAC},
        {"pareto", "pareto", OUT_STR}, {"run_id", "run", OUT_INT},
    };
    char title[200];
    snprintf(title, sizeof title, "Candidates, best first (objective: %s%s%s, %s is better; mean of each candidate's seeds; "
             "the other columns: first seed at the offered load)", s->objective == SCN_OBJ_P99_LATENCY ? plan_latency_metric(s) : s->objective == SCN_OBJ_COST ? "$/Mtok" : "",
             s->objective == SCN_OBJ_P99_LATENCY ? " in s " : s->objective == SCN_OBJ_COST ? " " : "", cap ? "at the highest rate within the SLO" : "at the offered load",
             plan_lower_is_better(s) ? "lower" : "higher");
    out_table(doc, "candidates", title, 24, cols);
    int shown = 0;
    for (int k = 0; k < r->n; k++) {
        const plan_cand *x = &r->c[r->order[k]];
        if (x->status != PLAN_DONE) continue;
        if (top && shown >= top) break;
        char desc[300];
        plan_describe(x, desc, sizeof desc);
        out_cell_num(doc, ++shown);
        out_cell_str(doc, desc);
        out_cell_str(doc, s->slo.n ? (x->slo_met ? "met" : "missed") : "-");
        out_cell_str(doc, risk_label(x));
        plan_interval ob = plan_objective_shown(s, x);   /* natural unit: $/Mtok and seconds positive */
        out_cell_num(doc, isfinite(ob.mean) ? ob.mean : NAN);
        out_cell_num(doc, ob.lo);
        out_cell_num(doc, ob.hi);
        out_cell_num(doc, x->obj.n);
        out_cell_str(doc, !x->at_capacity ? "offered load" : x->unbounded ? "capacity: unbounded within the searched range" : "capacity");
        out_cell_num(doc, x->rate.mean);
        out_cell_num(doc, plan_lower_is_better(s) ? -x->offered.mean : x->offered.mean);
        out_cell_num(doc, x->gpus);
        out_cell_str(doc, plan_hardware_name(s, x));
        out_cell_num(doc, x->usd_per_mtok);
        out_cell_num(doc, x->m.goodput / x->gpus);
        out_cell_num(doc, x->m.output_tok_per_s);
        out_cell_num(doc, x->m.q[SIM_Q_TTFT].p99);
        out_cell_num(doc, x->m.q[SIM_Q_TPOT].p99);
        out_cell_num(doc, x->m.q[SIM_Q_E2E].p99);
        out_cell_num(doc, x->m.kv_util_peak);
        out_cell_num(doc, (double)x->m.preemptions);
        /* Arrivals turned away (a full waiting queue, or too long for the context): a share of
         * all arrivals, as the client counts failed requests. */
        out_cell_num(doc, sim_rejected_share(&x->m));
        out_cell_str(doc, x->pareto ? "yes" : "");
        out_cell_num(doc, x->run_id ? (double)x->run_id : NAN);
    }
    /* The reasons and rules live on the heap for this call only (about 34 KiB together). */
    char (*lines)[PLAN_LINE] = malloc(sizeof *lines * 24);
    int nl = lines ? plan_explain(s, r, lines, 24) : 0;
    static const out_col rc_cols[] = {{"reason", "", OUT_STR}};
    out_table(doc, "recommendation", "Recommendation", 1, rc_cols);
    if (nl == 0) out_cell_str(doc, lines ? "No candidate could be evaluated: every one was skipped (see below)."
                                         : "The reasons could not be formed: out of memory.");
    for (int i = 0; i < nl; i++) out_cell_str(doc, lines[i]);
    free(lines);
    plan_rule *rules = !no_rules && r->best >= 0 ? malloc(sizeof *rules * 8) : NULL;
    if (rules) {
        int nr = plan_rules(s, r, rules, 8);
        static const out_col rule_cols[] = {{"rule", "rule of thumb", OUT_STR}, {"verdict", "here", OUT_STR},
                                            {"evidence", "because", OUT_STR}};
        out_table(doc, "rules", "Rules of thumb, tested on this scenario", 3, rule_cols);
        for (int i = 0; i < nr; i++) { out_cell_str(doc, rules[i].rule); out_cell_str(doc, rules[i].verdict); out_cell_str(doc, rules[i].evidence); }
        free(rules);
    }
    static const out_col sk_cols[] = {{"options", "options", OUT_STR}, {"reason", "skipped because", OUT_STR}};
    int skipped = 0;
    for (int i = 0; i < r->n; i++) skipped += r->c[i].status == PLAN_SKIPPED;
    if (skipped) {
        out_table(doc, "skipped", "Skipped candidates", 2, sk_cols);
        for (int i = 0; i < r->n; i++) {
            if (r->c[i].status != PLAN_SKIPPED) continue;
            char desc[300];
            plan_describe(&r->c[i], desc, sizeof desc);
            out_cell_str(doc, desc);
            out_cell_str(doc, r->c[i].why);
        }
    }
    long reused = 0, done = 0, sims = 0;
    for (int i = 0; i < r->n; i++) { reused += r->c[i].reused; done += r->c[i].status == PLAN_DONE; sims += r->c[i].sims; }
    out_section(doc, "plan", "Plan");
    out_kv_str(doc, "scenario", "scenario", s->name);
    out_kv_str(doc, "objective", "objective", scn_enum_name(SCN_OBJECTIVE_NAMES, (int)s->objective));
    out_kv_str(doc, "judged_at", "judged at", cap ? "capacity (highest rate within the SLO)" : "offered load");
    out_kv_num(doc, "seeds", "seeds per candidate", r->seeds, OUT_INT);
    out_kv_num(doc, "candidates", "candidates", r->n, OUT_INT);
    out_kv_num(doc, "evaluated", "evaluated", (double)done, OUT_INT);
    out_kv_num(doc, "reused", "reused from the database", (double)reused, OUT_INT);
    out_kv_num(doc, "skipped", "skipped", skipped, OUT_INT);
    out_kv_num(doc, "simulations", "simulations run (rules of thumb not counted)", (double)sims, OUT_INT);
}

int cli_plan_none_ran(const char *who, const plan_result *r)
{
    for (int i = 0; i < r->n; i++)
        if (r->c[i].status == PLAN_DONE) return CLI_OK;
    /* As `capacity` does: an empty ranking with exit 0 would read as a plan. The scenario's
     * option space holds no deployment that can run, which is a fault of its data. */
    fprintf(stderr, "kvplan: %s: no candidate can run: all %d were skipped:\n", who, r->n);
    for (int i = 0; i < r->n; i++) {
        char desc[300];
        plan_describe(&r->c[i], desc, sizeof desc);
        fprintf(stderr, "  %s: %s\n", desc, r->c[i].why[0] ? r->c[i].why : "not evaluated");
    }
    return CLI_EX_DATA;
}

int cmd_plan(int argc, char **argv)
{
    cli_common c = {.format = OUT_TABLE};
    cli_run_flags f = {.seed = -1, .interval = 1.0};
    long jobs = sysconf(_SC_NPROCESSORS_ONLN), top = 0, shard_i = 0, shard_n = 1, seeds = PLAN_SEEDS_DEFAULT;
    int help = 0, no_rules = 0, fresh = 0, no_bound = 0;
    for (int i = 1; i < argc; i++) {
        int r = cli_common_flag(&c, argc, argv, &i, &help);
        if (r == 0) r = cli_run_flag("plan", &f, argc, argv, &i);
        if (r < 0) return CLI_EX_USAGE;
        if (r) continue;
        const char *v;
        if ((v = cli_flag_value(argc, argv, &i, "--jobs"))) {
            if (cli_flag_missing_value(v) || cli_parse_long("--jobs", v, 1, 64, &jobs)) return CLI_EX_USAGE;
        } else if ((v = cli_flag_value(argc, argv, &i, "--seeds"))) {
            if (cli_flag_missing_value(v) || cli_parse_long("--seeds", v, 1, PLAN_SEEDS_MAX, &seeds)) return CLI_EX_USAGE;
        } else if ((v = cli_flag_value(argc, argv, &i, "--top"))) {
            if (cli_flag_missing_value(v) || cli_parse_long("--top", v, 1, 100000, &top)) return CLI_EX_USAGE;
        } else if ((v = cli_flag_value(argc, argv, &i, "--shard"))) {
            if (cli_flag_missing_value(v)) return CLI_EX_USAGE;
            char tail;
            if (sscanf(v, "%ld/%ld%c", &shard_i, &shard_n, &tail) != 2 || shard_n < 1 || shard_i < 0 || shard_i >= shard_n)
                return cli_usage_error("plan", "--shard takes I/N with 0 <= I < N, e.g. 0/4, not '%s'", v);
        } else if (!strcmp(argv[i], "--no-rules")) {
            no_rules = 1;
        } else if (!strcmp(argv[i], "--no-bound")) {
            no_bound = 1;
        } else if (!strcmp(argv[i], "--fresh")) {
            fresh = 1;
        } else if (cli_is_flag(argv[i])) {
            return cli_usage_error("plan", "unknown option '%s'", argv[i]);
        } else if (!c.scenario) {
            c.scenario = argv[i];
        } else {
            return cli_usage_error("plan", "unexpected argument '%s'", argv[i]);
        }
    }
    if (help) { fputs(cli_usage_of("plan"), stdout); return CLI_OK; }
    if (!c.scenario) return cli_usage_error("plan", "missing SCENARIO");
    if (f.backend || f.req_out || f.ts_out || f.blocks) return cli_usage_error("plan", "plan takes --db/--no-db and --seed of the engine flags");
    if (shard_n > 1 && f.no_db) return cli_usage_error("plan", "--shard writes its results to a database; drop --no-db");
    scn_scenario s;
    int rc = cli_load(&c, &s);
    if (rc) return rc;
    if (f.seed >= 0) s.seed = (unsigned long long)f.seed;
    plan_result r;
    if (plan_enumerate(&s, &r)) { fprintf(stderr, "kvplan: %s: the option space has more than 100000 candidates\n", c.scenario); return CLI_EX_DATA; }
    plan_set_seeds(&r, (int)seeds);
    /* Candidates provably below the best --top (at least 3) need not be simulated. */
    if (!no_bound) plan_set_bound(&r, top > 3 ? (int)top : 3);
    db *d;
    const char *db_path;
    if ((rc = cli_open_db(&f, &d, &db_path))) { plan_result_free(&r); return rc; }
    if (d && !fresh) plan_store_reuse(d, &s, &r);
    char started[32], err[1024];
    db_now_iso(started, sizeof started);
    cli_progress bar;
    cli_progress_init(&bar, "planning");
    int er = plan_evaluate(&s, &r, (int)jobs, (int)shard_i, (int)shard_n, on_progress, &bar, err, sizeof err);
    cli_progress_end(&bar);
    if (er) { fprintf(stderr, "kvplan: %s: %s\n", c.scenario, err); rc = CLI_EX_INTERNAL; goto out; }
    /* Before anything is stored. A shard's candidates are a part of the space: some may run in
     * another shard, so a shard with none that ran is not a failure (the merged plan is judged). */
    if (shard_n == 1 && (rc = cli_plan_none_ran(c.scenario, &r))) goto out;
    if (d) {
        int st = plan_store_save(d, &s, &r, started, err, sizeof err);
        if (st) { fprintf(stderr, "kvplan: %s: storing the plan's runs failed: %s\n", db_path, err); rc = cli_exit_for_db(st); goto out; }
    }
    out_doc *doc = out_doc_init();
    rc = CLI_EX_INTERNAL;
    if (!doc) goto out;
    if (shard_n > 1) {
        long done = 0;
        for (int i = 0; i < r.n; i++) done += r.c[i].status == PLAN_DONE && i % shard_n == shard_i;
        out_section(doc, "shard", "Shard");
        out_kv_num(doc, "shard", "shard", (double)shard_i, OUT_INT);
        out_kv_num(doc, "of", "of", (double)shard_n, OUT_INT);
        out_kv_num(doc, "candidates", "candidates evaluated or reused", (double)done, OUT_INT);
        out_kv_str(doc, "db", "database", db_path);
        out_note(doc, "Merge the shards with `kvplan merge ALL.db SHARD.db...`, then `kvplan plan %s --db ALL.db` ranks "
                      "them without simulating again.", c.scenario);
        rc = cli_emit(doc, c.format);
        out_doc_free(doc);
        goto out;
    }
    cli_plan_emit(doc, &s, &r, no_rules, top);
    if ((rc = cli_plan_disagg(doc, &s, &r, no_rules))) { out_doc_free(doc); goto out; }
    rc = cli_emit(doc, c.format);
    out_doc_free(doc);
out:
    plan_result_free(&r);
    db_close(d);
    return rc;
}
