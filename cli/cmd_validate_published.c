/* cmd_validate_published.c: `kvplan validate-published FILE`: predicts every row of a table of
 * published measurements with the bundled, uncalibrated library and prints per-row and per-class
 * errors (planner/plan_published.c does the work). Nothing is fitted and nothing is stored. */
#include "cli.h"
#include "../planner/plan_published.h"

#include <math.h>
#include <stdio.h>
#include <string.h>


int cmd_validate_published(int argc, char **argv)
{
    cli_common c = {.format = OUT_TABLE};
    const char *file = NULL;
    int help = 0;
    for (int i = 1; i < argc; i++) {
        int r = cli_common_flag(&c, argc, argv, &i, &help);
        if (r < 0) return CLI_EX_USAGE;
        if (r) continue;
        if (cli_is_flag(argv[i])) return cli_usage_error("validate-published", "unknown option '%s'", argv[i]);
        if (file) return cli_usage_error("validate-published", "unexpected argument '%s'", argv[i]);
        file = argv[i];
    }
    if (help) { fputs(cli_usage_of("validate-published"), stdout); return CLI_OK; }
    if (!file) return cli_usage_error("validate-published", "missing FILE");
    if (c.n_sets) return cli_usage_error("validate-published", "--set does not apply: each row builds its own scenario");
    pub_table t;
    char err[1024];
    int rc = pub_table_read(file, &t, err, sizeof err);
    if (rc) { fprintf(stderr, "kvplan: %s\n", err); return rc == -2 ? CLI_EX_NOINPUT : CLI_EX_DATA; }
    /* Dataset lengths beside the table (FILE's folder/datasets) come before the library's. */
    char datasets[4096];
    snprintf(datasets, sizeof datasets, "%s", file);
    char *slash = strrchr(datasets, '/');
    if (slash) snprintf(slash, sizeof datasets - (size_t)(slash - datasets), "/datasets");
    else snprintf(datasets, sizeof datasets, "datasets");
    for (int i = 0; i < t.n; i++)
        if (pub_row_predict(&t.rows[i], datasets, err, sizeof err)) {
            fprintf(stderr, "kvplan: %s:%ld: %s\n", file, t.rows[i].line, err);
            pub_table_free(&t);
            return CLI_EX_INTERNAL;
        }
    pub_summary sum[PUB_CLASS_COUNT + 1];
    pub_table_summarise(&t, sum);
    out_doc *d = out_doc_init();
    if (!d) { pub_table_free(&t); return CLI_EX_INTERNAL; }
    static const out_col rows[] = {
        {"id", "id", OUT_STR}, {"line", "line", OUT_INT}, {"model", "model", OUT_STR}, {"gpu", "gpu", OUT_STR},
        {"mode", "mode", OUT_STR}, {"load", "load", OUT_NUM}, {"metric", "metric", OUT_STR}, {"unit", "unit", OUT_STR},
        {"measured", "measured", OUT_NUM}, {"predicted", "predicted", OUT_NUM}, {"error", "error", OUT_FRAC},
        {"status", "status", OUT_STR}, {"note", "note", OUT_STR}};
    out_table(d, "rows", "Published measurements: predicted with bundled, uncalibrated profiles", 13, rows);
    static const char *const STATUS[] = {"predicted", "skipped", "failed"};
    for (int i = 0; i < t.n; i++) {
        const pub_row *r = &t.rows[i];
        out_cell_str(d, r->id); out_cell_num(d, (double)r->line); out_cell_str(d, r->model); out_cell_str(d, r->gpu);
        out_cell_str(d, PUB_MODE_NAMES[r->mode]); out_cell_num(d, r->load); out_cell_str(d, r->metric);
        out_cell_str(d, r->unit); out_cell_num(d, r->value); out_cell_num(d, r->predicted); out_cell_num(d, r->error);
        out_cell_str(d, STATUS[r->status]); out_cell_str(d, r->why);
    }
    static const out_col cls[] = {
        {"class", "class", OUT_STR}, {"rows", "rows", OUT_INT}, {"predicted", "predicted", OUT_INT},
        {"failed", "failed", OUT_INT}, {"within_10pct", "within 10 %", OUT_FRAC},
        {"within_20pct", "within 20 %", OUT_FRAC}, {"median_abs_error", "median |error|", OUT_FRAC},
        {"skipped", "skipped", OUT_INT}};
    out_table(d, "classes", "Per metric class (shares of predicted + failed rows; failed rows count as outside)", 8, cls);
    for (int k = 0; k <= PUB_CLASS_COUNT; k++) {
        const pub_summary *s = &sum[k];
        out_cell_str(d, pub_class_name((pub_class)k));
        out_cell_num(d, s->rows); out_cell_num(d, s->predicted); out_cell_num(d, s->failed);
        out_cell_num(d, s->rows ? (double)s->within10 / s->rows : NAN);
        out_cell_num(d, s->rows ? (double)s->within20 / s->rows : NAN);
        out_cell_num(d, s->median_abs); out_cell_num(d, s->skipped);
    }
    if (sum[PUB_CLASS_COUNT].skipped)
        out_note(d, "%d row(s) skipped: the library lacks what they need (see each row's note); they are not counted.",
                 sum[PUB_CLASS_COUNT].skipped);
    rc = cli_emit(d, c.format);
    out_doc_free(d);
    pub_table_free(&t);
    return rc;
}
