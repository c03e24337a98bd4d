/* cmd_runs.c: `kvplan runs` lists stored runs; `kvplan show RUN` prints one. */
#include "cli_run.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int row(void *ud, const db_run_info *r)
{
    out_doc *d = ud;
    out_cell_num(d, (double)r->id);
    out_cell_str(d, r->finished);
    out_cell_str(d, r->scenario);
    out_cell_str(d, r->kind);
    out_cell_str(d, r->executor);
    out_cell_str(d, r->options);
    out_cell_num(d, r->requests);
    out_cell_num(d, r->throughput);
    out_cell_num(d, r->ttft_p99);
    out_cell_num(d, r->tpot_p99);
    return 0;
}

/* Parses the flags runs and show share; returns -1 (usage) or 0. */
static int parse(const char *cmd, int argc, char **argv, cli_common *c, const char **db_flag, long *limit,
                 const char **arg, int *help)
{
    for (int i = 1; i < argc; i++) {
        int r = cli_common_flag(c, argc, argv, &i, help);
        if (r < 0) return -1;
        if (r) continue;
        const char *v;
        if ((v = cli_flag_value(argc, argv, &i, "--db"))) {
            *db_flag = v;
        } else if (limit && (v = cli_flag_value(argc, argv, &i, "--limit"))) {
            if (!cli_flag_missing_value(v) && cli_parse_long("--limit", v, 1, 1000000000, limit)) return -1;
        } else if (cli_is_flag(argv[i])) {
            cli_usage_error(cmd, "unknown option '%s'", argv[i]);
            return -1;
        } else if (arg && !*arg) {
            *arg = argv[i];
        } else {
            cli_usage_error(cmd, "unexpected argument '%s'", argv[i]);
            return -1;
        }
        if (cli_flag_missing_value(v)) return -1;
    }
    if (c->n_sets) { cli_usage_error(cmd, "--set applies to scenarios, not stored runs"); return -1; }
    return 0;
}

int cmd_runs(int argc, char **argv)
{
    cli_common c = {.format = OUT_TABLE};
    int help = 0;
    long limit = 50;
    const char *db_flag = NULL;
    if (parse("runs", argc, argv, &c, &db_flag, &limit, NULL, &help)) return CLI_EX_USAGE;
    if (help) { fputs(cli_usage_of("runs"), stdout); return CLI_OK; }
    char err[1024];
    db_status st;
    const char *path;
    db *d;
    int orc = cli_open_db_read(db_flag, &d, &path);
    if (orc) return orc;
    out_doc *doc = out_doc_init();
    static const out_col cols[] = {
        {"id", "id", OUT_INT}, {"finished", "finished (UTC)", OUT_STR}, {"scenario", "scenario", OUT_STR},
        {"kind", "kind", OUT_STR}, {"executor", "executor", OUT_STR}, {"options", "options", OUT_STR},
        {"requests", "requests", OUT_INT}, {"throughput_req_per_s", "req/s", OUT_NUM},
        {"ttft_p99_s", "TTFT p99", OUT_SECONDS}, {"tpot_p99_s", "TPOT p99", OUT_SECONDS},
    };
    out_table(doc, "runs", "", 10, cols);
    st = db_runs_list(d, (int)limit, row, doc, err, sizeof err);
    int rc = st == DB_OK ? cli_emit(doc, c.format) : cli_exit_for_db(st);
    if (st != DB_OK) fprintf(stderr, "kvplan: %s: %s\n", path, err);
    out_doc_free(doc);
    db_close(d);
    return rc;
}

static int metric(void *ud, const char *name, double value, int is_null)
{
    out_doc *d = ud;
    out_cell_str(d, name);
    out_cell_num(d, is_null ? NAN : value);
    return 0;
}

int cmd_show(int argc, char **argv)
{
    cli_common c = {.format = OUT_TABLE};
    int help = 0;
    const char *db_flag = NULL, *arg = NULL;
    if (parse("show", argc, argv, &c, &db_flag, NULL, &arg, &help)) return CLI_EX_USAGE;
    if (help) { fputs(cli_usage_of("show"), stdout); return CLI_OK; }
    long id;
    if (!arg) return cli_usage_error("show", "missing RUN (an id from `kvplan runs`)");
    if (cli_parse_long("RUN", arg, 1, 0x7fffffffffffffffL, &id)) return CLI_EX_USAGE;
    char err[1024];
    db_status st;
    const char *path;
    db *d;
    int orc = cli_open_db_read(db_flag, &d, &path);
    if (orc) return orc;
    db_run_info r;
    st = db_run_get(d, id, &r, err, sizeof err);
    if (st != DB_OK) { fprintf(stderr, "kvplan: %s: %s\n", path, err); db_close(d); return cli_exit_for_db(st); }
    out_doc *doc = out_doc_init();
    static const out_col cols[] = {{"name", "metric", OUT_STR}, {"value", "value", OUT_NUM}};
    out_table(doc, "metrics", "Metrics (SI units: seconds, fractions, per second)", 2, cols);
    st = db_run_metrics(d, id, metric, doc, err, sizeof err);
    out_section(doc, "run", "Run");
    out_kv_num(doc, "id", "id", (double)r.id, OUT_INT);
    out_kv_str(doc, "scenario", "scenario", r.scenario);
    out_kv_str(doc, "kind", "kind", r.kind);
    out_kv_str(doc, "executor", "executor", r.executor);
    out_kv_str(doc, "options", "options", r.options);
    out_kv_num(doc, "seed", "seed", (double)r.seed, OUT_INT);
    out_kv_str(doc, "started", "started (UTC)", r.started);
    out_kv_str(doc, "finished", "finished (UTC)", r.finished);
    out_kv_str(doc, "version", "kvplan version", r.version);
    int rc = st == DB_OK ? cli_emit(doc, c.format) : cli_exit_for_db(st);
    out_doc_free(doc);
    db_close(d);
    return rc;
}
