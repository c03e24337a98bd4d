/* cmd_import.c: `kvplan import FILE`: measurements from a serving system or a benchmark client
 * (vLLM benchmark_serving / bench serve JSON, a vLLM /metrics scrape, genai-perf/aiperf
 * profile exports, SGLang bench_serving JSONL, MLPerf mlperf_log_summary.txt) stored as a
 * measured run. The benchmark's setting (closed loop, rate or offline; request count; mean
 * prompt and output lengths) is applied to --scenario's workload so the stored run can be
 * re-simulated. Bad files store nothing. */
#include "cli_run.h"
#include "../db/db_import.h"

#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The import itself, into the caller's storage (both are large, so on the heap). */
static int import_into(cli_common c, cli_run_flags f, const char *file, db_import *im, scn_scenario *s)
{
    char err[1024];
    int pr = db_import_file(file, im, err, sizeof err);
    if (pr) { fprintf(stderr, "kvplan: %s\n", err); return pr == -2 ? CLI_EX_NOINPUT : CLI_EX_DATA; }
    memset(s, 0, sizeof *s);
    int rc;
    if (c.scenario && (rc = cli_load(&c, s))) return rc;
    if (!c.scenario) {
        char tmp[1024];
        snprintf(tmp, sizeof tmp, "%s", file);
        snprintf(s->name, sizeof s->name, "import %.50s", basename(tmp));
    }
    char how[256] = "";
    if (c.scenario) {
        const char *names[DB_IMPORT_MAX];
        double values[DB_IMPORT_MAX];
        for (int i = 0; i < im->n; i++) { names[i] = im->m[i].name; values[i] = im->m[i].value; }
        vf_setting_apply(names, values, im->n, s, how, sizeof how);
    }
    db *d;
    const char *path;
    if ((rc = cli_open_db(&f, &d, &path))) return rc;
    char when[32], executor[48];
    db_now_iso(when, sizeof when);
    snprintf(executor, sizeof executor, "import:%s", im->format);
    db_run_rec rec = {.scenario = s, .kind = "measured", .executor = executor, .options_json = "{}", .seed = 0,
                      .started = when, .finished = when, .metrics = im->m, .n_metrics = im->n};
    long id = 0;
    db_status st = db_run_insert(d, &rec, &id, err, sizeof err);
    db_close(d);
    if (st != DB_OK) { fprintf(stderr, "kvplan: %s: storing the import failed: %s\n", path, err); return cli_exit_for_db(st); }
    out_doc *doc = out_doc_init();
    if (!doc) return CLI_EX_INTERNAL;
    static const out_col cols[] = {{"name", "metric", OUT_STR}, {"value", "value", OUT_NUM}};
    out_table(doc, "metrics", "Imported (SI units)", 2, cols);
    for (int i = 0; i < im->n; i++) { out_cell_str(doc, im->m[i].name); out_cell_num(doc, im->m[i].value); }
    out_section(doc, "run", "Stored");
    out_kv_num(doc, "run_id", "run id", (double)id, OUT_INT);
    out_kv_str(doc, "format", "format", im->format);
    if (how[0]) out_kv_str(doc, "setting", "scenario workload set to", how);
    out_kv_str(doc, "db", "database", path);
    rc = cli_emit(doc, c.format);
    out_doc_free(doc);
    return rc;
}

int cmd_import(int argc, char **argv)
{
    cli_common c = {.format = OUT_TABLE};
    cli_run_flags f = {0};
    const char *file = NULL;
    int help = 0;
    for (int i = 1; i < argc; i++) {
        int r = cli_common_flag(&c, argc, argv, &i, &help);
        if (r < 0) return CLI_EX_USAGE;
        if (r) continue;
        const char *v;
        if ((v = cli_flag_value(argc, argv, &i, "--db"))) f.db_flag = v;
        else if ((v = cli_flag_value(argc, argv, &i, "--scenario"))) c.scenario = v;
        else if (cli_is_flag(argv[i])) return cli_usage_error("import", "unknown option '%s'", argv[i]);
        else if (!file) file = argv[i];
        else return cli_usage_error("import", "unexpected argument '%s'", argv[i]);
        if (cli_flag_missing_value(v)) return CLI_EX_USAGE;
    }
    if (help) { fputs(cli_usage_of("import"), stdout); return CLI_OK; }
    if (!file) return cli_usage_error("import", "missing FILE");
    db_import *im = malloc(sizeof *im);
    scn_scenario *s = malloc(sizeof *s);
    int rc = im && s ? import_into(c, f, file, im, s) : CLI_EX_INTERNAL;
    if (!im || !s) fprintf(stderr, "kvplan: out of memory\n");
    free(im);
    free(s);
    return rc;
}
