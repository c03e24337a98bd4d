/* cmd_simulate.c: `kvplan simulate`: the engine with the cost model as its clock, for the
 * scenario's first option choice; results to stdout and (in one transaction) the database. */
#include "cli.h"
#include "progress.h"
#include "../db/db.h"
#include "../sim/sim.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    FILE *req_csv, *ts_csv;
    sim_request_row *rows;
    long n_rows, cap_rows;
    sim_sample *samples;
    long n_samples, cap_samples;
    bool keep_rows, keep_samples;
    cli_progress bar;
} sink;

static int on_request(void *ud, const sim_request_row *r)
{
    sink *k = ud;
    if (k->req_csv &&
        fprintf(k->req_csv, "%ld,%d,%.9g,%d,%d,%d,%.9g,%.9g,%.9g,%.9g,%d,%ld,%d\n", r->id, r->replica, r->arrival,
                r->prompt, r->output, r->cached, r->queue, r->ttft, r->tpot, r->e2e, r->preemptions, r->conversation,
                r->turn) < 0)
        return -1;
    if (k->keep_rows) {
        if (k->n_rows == k->cap_rows) {
            long cap = k->cap_rows ? k->cap_rows * 2 : 1024;
            sim_request_row *n = realloc(k->rows, sizeof *n * (size_t)cap);
            if (!n) return -1;
            k->rows = n;
            k->cap_rows = cap;
        }
        k->rows[k->n_rows++] = *r;
    }
    return 0;
}

static int on_sample(void *ud, const sim_sample *s)
{
    sink *k = ud;
    if (k->ts_csv && fprintf(k->ts_csv, "%.9g,%.6f,%ld,%ld\n", s->t, s->kv_used, s->waiting, s->running) < 0) return -1;
    if (k->keep_samples) {
        if (k->n_samples == k->cap_samples) {
            long cap = k->cap_samples ? k->cap_samples * 2 : 256;
            sim_sample *n = realloc(k->samples, sizeof *n * (size_t)cap);
            if (!n) return -1;
            k->samples = n;
            k->cap_samples = cap;
        }
        k->samples[k->n_samples++] = *s;
    }
    return 0;
}

static void on_progress(void *ud, long done, long total)
{
    cli_progress_update(&((sink *)ud)->bar, done, total);
}

static FILE *open_out(const char *path, const char *header)
{
    FILE *f = fopen(path, "w");
    if (!f) { fprintf(stderr, "kvplan: cannot create %s: %s\n", path, strerror(errno)); return NULL; }
    fputs(header, f);
    return f;
}

/* The report: run facts, latency table (the CSV), throughput and KV sections. */
static void report(out_doc *d, const scn_scenario *s, const sim_choice *c, const sim_metrics *m, long run_id,
                   const char *db_path)
{
    char choice[160];
    sim_choice_describe(c, choice, sizeof choice);
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
    out_section(d, "run", "Run");
    out_kv_str(d, "scenario", "scenario", s->name);
    out_kv_str(d, "model", "model", s->model.name);
    out_kv_str(d, "hardware", "hardware", s->hardware.name);
    out_kv_str(d, "choice", "choice", choice);
    out_kv_str(d, "executor", "executor", "model (predicted)");
    out_kv_num(d, "seed", "seed", (double)s->seed, OUT_INT);
    out_kv_num(d, "replicas", "replicas", s->deployment.replicas, OUT_INT);
    if (run_id > 0) {
        out_kv_num(d, "run_id", "run id", (double)run_id, OUT_INT);
        out_kv_str(d, "db", "database", db_path);
    }
    out_section(d, "throughput", "Throughput");
    out_kv_num(d, "requests", "requests", (double)m->requests, OUT_INT);
    out_kv_num(d, "duration_s", "duration", m->duration, OUT_SECONDS);
    out_kv_num(d, "req_per_s", "requests/s", m->req_per_s, OUT_NUM);
    out_kv_num(d, "input_tok_per_s", "input tokens/s", m->input_tok_per_s, OUT_NUM);
    out_kv_num(d, "output_tok_per_s", "output tokens/s", m->output_tok_per_s, OUT_NUM);
    out_kv_num(d, "goodput_req_per_s", "goodput (req/s in SLO)", m->goodput, OUT_NUM);
    out_kv_num(d, "slo_attainment", "SLO attainment", m->slo_attainment, OUT_FRAC);
    out_section(d, "kv", "KV cache and batching");
    out_kv_num(d, "kv_blocks", "blocks per replica", (double)m->kv_blocks, OUT_INT);
    out_kv_num(d, "kv_tokens", "token capacity", (double)m->kv_tokens, OUT_INT);
    out_kv_num(d, "kv_util_mean", "KV use (time-weighted)", m->kv_util_mean, OUT_FRAC);
    out_kv_num(d, "kv_util_peak", "KV use (peak)", m->kv_util_peak, OUT_FRAC);
    out_kv_num(d, "fragmentation_mean", "reserved but unused", m->frag_mean, OUT_FRAC);
    out_kv_num(d, "prefix_hit_rate", "prefix hit rate", m->prefix_hit_rate, OUT_FRAC);
    out_kv_num(d, "preemptions", "preemptions", (double)m->preemptions, OUT_INT);
    out_kv_num(d, "batch_mean", "batch size (mean)", m->batch_mean, OUT_NUM);
    out_kv_num(d, "batch_max", "batch size (max)", (double)m->batch_max, OUT_INT);
    out_kv_num(d, "steps", "engine steps", (double)m->steps, OUT_INT);
}

const char *cli_db_path(const char *flag)
{
    if (flag) return flag;
    const char *env = getenv("KVPLAN_DB");
    return env && env[0] ? env : "kvplan.db";
}

int cli_exit_for_db(int st)
{
    switch (st) {
    case DB_E_CANTOPEN: return CLI_EX_CANTCREAT;
    case DB_E_DATA: case DB_E_NOTFOUND: return CLI_EX_DATA;
    default: return CLI_EX_INTERNAL;
    }
}

int cmd_simulate(int argc, char **argv)
{
    cli_common c = {.format = OUT_TABLE};
    int help = 0, no_db = 0;
    long seed = -1;
    double interval = 1.0;
    const char *req_out = NULL, *ts_out = NULL, *db_flag = NULL;
    for (int i = 1; i < argc; i++) {
        int r = cli_common_flag(&c, argc, argv, &i, &help);
        if (r < 0) return CLI_EX_USAGE;
        if (r) continue;
        const char *a = argv[i];
        const char *v;
        if ((v = cli_flag_value(argc, argv, &i, "--seed"))) {
            if (cli_parse_long("--seed", v, 0, 0x7fffffffffffffffL, &seed)) return CLI_EX_USAGE;
        } else if ((v = cli_flag_value(argc, argv, &i, "--requests-out"))) {
            req_out = v;
        } else if ((v = cli_flag_value(argc, argv, &i, "--timeseries-out"))) {
            ts_out = v;
        } else if ((v = cli_flag_value(argc, argv, &i, "--sample-interval"))) {
            char msg[300];
            if (scn_quantity_parse(v, SCN_UNIT_TIME, &interval, msg, sizeof msg) || interval <= 0)
                return cli_usage_error("simulate", "--sample-interval: %s", interval <= 0 ? "must be > 0" : msg);
        } else if ((v = cli_flag_value(argc, argv, &i, "--db"))) {
            db_flag = v;
        } else if (!strcmp(a, "--no-db")) {
            no_db = 1;
        } else if (cli_is_flag(a)) {
            return cli_usage_error("simulate", "unknown option '%s'", a);
        } else if (!c.scenario) {
            c.scenario = a;
        } else {
            return cli_usage_error("simulate", "unexpected argument '%s'", a);
        }
        if (cli_flag_missing_value()) return CLI_EX_USAGE;
    }
    if (help) { fputs(cli_usage_of("simulate"), stdout); return CLI_OK; }
    if (!c.scenario) return cli_usage_error("simulate", "missing SCENARIO");
    if (no_db && db_flag) return cli_usage_error("simulate", "--db and --no-db contradict each other");
    scn_scenario s;
    int rc = cli_load(&c, &s);
    if (rc) return rc;
    if (seed >= 0) s.seed = (unsigned long long)seed;
    sim_choice ch = sim_choice_first(&s);
    char why[256];
    if (sim_choice_check(&ch, why, sizeof why)) {
        fprintf(stderr, "kvplan: %s: options: %s (set options.kv_layout=paged, or prefix_cache=off)\n", c.scenario, why);
        return CLI_EX_DATA;
    }
    /* Open everything that can fail before spending time simulating. */
    const char *db_path = cli_db_path(db_flag);
    db *d = NULL;
    char err[1024];
    if (!no_db) {
        db_status st;
        d = db_open(db_path, &st, err, sizeof err);
        if (!d) { fprintf(stderr, "kvplan: %s\n", err); return cli_exit_for_db(st); }
    }
    sink k = {.keep_rows = d && req_out, .keep_samples = d && ts_out};
    cli_progress_init(&k.bar, "simulating");
    rc = CLI_EX_CANTCREAT;
    if (req_out && !(k.req_csv = open_out(req_out, "req_id,replica,arrival_s,prompt_tokens,output_tokens,cached_tokens,"
                                                   "queue_s,ttft_s,tpot_s,e2e_s,preemptions,conversation,turn\n")))
        goto out;
    if (ts_out && !(k.ts_csv = open_out(ts_out, "t_s,kv_used,waiting,running\n"))) goto out;
    sim_executor ex;
    rc = CLI_EX_INTERNAL;
    if (sim_executor_model(&s, &ch, &ex)) goto out;
    sim_run_opts o = {.seed = s.seed, .sample_interval = ts_out ? interval : 0, .on_request = on_request,
                      .on_sample = on_sample, .on_progress = on_progress, .ud = &k};
    sim_metrics m;
    char started[32], finished[32];
    db_now_iso(started, sizeof started);
    int sr = sim_run(&s, &ch, &ex, &o, &m, err, sizeof err);
    ex.free(ex.ctx);
    cli_progress_end(&k.bar);
    db_now_iso(finished, sizeof finished);
    if (sr != SIM_OK) {
        fprintf(stderr, "kvplan: %s: %s\n", c.scenario, err);
        rc = sr == SIM_E_NOINPUT ? CLI_EX_NOINPUT : sr == SIM_E_DATA ? CLI_EX_DATA : CLI_EX_INTERNAL;
        goto out;
    }
    if ((k.req_csv && fflush(k.req_csv)) || (k.ts_csv && fflush(k.ts_csv))) {
        fprintf(stderr, "kvplan: writing the CSV output failed: %s\n", strerror(errno));
        rc = CLI_EX_CANTCREAT;
        goto out;
    }
    long run_id = 0;
    if (d) {
        sim_metric_kv mv[SIM_METRICS_MAX];
        char *opts = db_choice_json(&ch);
        db_run_rec rec = {.scenario = &s, .kind = "predicted", .executor = "model", .options_json = opts ? opts : "{}",
                          .seed = s.seed, .started = started, .finished = finished, .metrics = mv,
                          .n_metrics = sim_metrics_list(&m, mv, SIM_METRICS_MAX), .rows = k.rows, .n_rows = k.n_rows,
                          .samples = k.samples, .n_samples = k.n_samples};
        db_status st = db_run_insert(d, &rec, &run_id, err, sizeof err);
        free(opts);
        if (st != DB_OK) { fprintf(stderr, "kvplan: %s: storing the run failed: %s\n", db_path, err); rc = cli_exit_for_db(st); goto out; }
    }
    out_doc *doc = out_doc_init();
    if (!doc) goto out;
    report(doc, &s, &ch, &m, run_id, db_path);
    rc = cli_emit(doc, c.format);
    out_doc_free(doc);
out:
    if (k.req_csv) fclose(k.req_csv);
    if (k.ts_csv) fclose(k.ts_csv);
    free(k.rows);
    free(k.samples);
    db_close(d);
    return rc;
}
