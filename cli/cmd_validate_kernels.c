/* cmd_validate_kernels.c: `kvplan validate-kernels DIR`: compares the cost model with GPU kernels
 * we measured (GEMMs, attention, decode steps, prefill forwards and their parts, int4 and
 * grouped expert GEMMs; planner/plan_kernels*.c do the work) and prints per-row and per-class
 * errors and each class's largest gaps. Nothing is fitted and nothing is stored. */
#include "cli.h"
#include "../planner/plan_kernels.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

int cmd_validate_kernels(int argc, char **argv)
{
    cli_common c = {.format = OUT_TABLE};
    const char *dir = NULL;
    int help = 0;
    for (int i = 1; i < argc; i++) {
        int r = cli_common_flag(&c, argc, argv, &i, &help);
        if (r < 0) return CLI_EX_USAGE;
        if (r) continue;
        if (cli_is_flag(argv[i])) return cli_usage_error("validate-kernels", "unknown option '%s'", argv[i]);
        if (dir) return cli_usage_error("validate-kernels", "unexpected argument '%s'", argv[i]);
        dir = argv[i];
    }
    if (help) { fputs(cli_usage_of("validate-kernels"), stdout); return CLI_OK; }
    if (!dir) return cli_usage_error("validate-kernels", "missing DIR");
    if (c.n_sets) return cli_usage_error("validate-kernels", "--set does not apply: each row builds its own shape");
    kval_table t;
    char err[1024];
    int rc = kval_table_read(dir, &t, err, sizeof err);
    if (rc) {
        fprintf(stderr, "kvplan: %s\n", err);
        return rc == -2 ? CLI_EX_NOINPUT : rc == -3 ? CLI_EX_INTERNAL : CLI_EX_DATA;
    }
    if (kval_table_predict(&t, NULL, err, sizeof err)) {
        fprintf(stderr, "kvplan: %s\n", err);
        kval_table_free(&t);
        return CLI_EX_INTERNAL;
    }
    kval_summary sum[KVAL_CLASS_COUNT + 1];
    kval_table_summarise(&t, sum);
    out_doc *d = out_doc_init();
    if (!d) { kval_table_free(&t); return CLI_EX_INTERNAL; }
    static const out_col rows[] = {
        {"file", "file", OUT_STR}, {"line", "line", OUT_INT}, {"class", "class", OUT_STR}, {"shape", "shape", OUT_STR},
        {"measured_s", "measured", OUT_SECONDS}, {"reference_s", "compared with", OUT_SECONDS},
        {"predicted_s", "predicted", OUT_SECONDS}, {"error", "error", OUT_FRAC},
        {"bound", "bound", OUT_STR}, {"status", "status", OUT_STR}, {"note", "note", OUT_STR}};
    out_table(d, "rows", "Measured kernels against the cost model (h200, engine bare, uncalibrated)", 11, rows);
    for (int i = 0; i < t.n; i++) {
        const kval_row *r = &t.rows[i];
        out_cell_str(d, KVAL_FILE_NAMES[r->file]); out_cell_num(d, (double)r->line);
        out_cell_str(d, kval_class_name(r->cls)); out_cell_str(d, r->shape);
        out_cell_num(d, r->measured); out_cell_num(d, r->reference); out_cell_num(d, r->predicted); out_cell_num(d, r->error);
        out_cell_str(d, r->bound); out_cell_str(d, KVAL_STATUS_NAMES[r->status]); out_cell_str(d, r->note);
    }
    static const out_col cls[] = {
        {"class", "class", OUT_STR}, {"compared", "compared", OUT_INT}, {"within_10pct", "within 10 %", OUT_FRAC},
        {"within_20pct", "within 20 %", OUT_FRAC}, {"median_abs_error", "median |error|", OUT_FRAC},
        {"median_error", "median error", OUT_FRAC}, {"excluded", "excluded", OUT_INT}, {"skipped", "skipped", OUT_INT}};
    out_table(d, "classes", "Per class (shares of compared rows)", 8, cls);
    for (int k = 0; k <= KVAL_CLASS_COUNT; k++) {
        const kval_summary *s = &sum[k];
        out_cell_str(d, kval_class_name((kval_class)k));
        out_cell_num(d, s->compared);
        out_cell_num(d, s->compared ? (double)s->within10 / s->compared : NAN);
        out_cell_num(d, s->compared ? (double)s->within20 / s->compared : NAN);
        out_cell_num(d, s->median_abs); out_cell_num(d, s->median);
        out_cell_num(d, s->excluded); out_cell_num(d, s->skipped);
    }
    /* The rows behind each class's figures: where the model is furthest off, and which way. */
    static const out_col gaps[] = {
        {"class", "class", OUT_STR}, {"rank", "rank", OUT_INT}, {"file", "file", OUT_STR}, {"line", "line", OUT_INT},
        {"shape", "shape", OUT_STR}, {"reference_s", "compared with", OUT_SECONDS}, {"predicted_s", "predicted", OUT_SECONDS},
        {"error", "error", OUT_FRAC}, {"bound", "bound", OUT_STR}};
    out_table(d, "gaps", "Largest gaps per class (compared rows, largest |error| first)", 9, gaps);
    for (int k = 0; k < KVAL_CLASS_COUNT; k++) {
        int idx[3];
        int m = kval_table_largest(&t, (kval_class)k, idx, 3);
        for (int j = 0; j < m; j++) {
            const kval_row *r = &t.rows[idx[j]];
            out_cell_str(d, kval_class_name((kval_class)k)); out_cell_num(d, j + 1);
            out_cell_str(d, KVAL_FILE_NAMES[r->file]); out_cell_num(d, (double)r->line); out_cell_str(d, r->shape);
            out_cell_num(d, r->reference); out_cell_num(d, r->predicted); out_cell_num(d, r->error); out_cell_str(d, r->bound);
        }
    }
    out_note(d, "error = predicted / compared-with - 1; compared-with is the measurement, except for a prefill forward, "
                "whose unfused elementwise ops are replaced by the model's fused terms for them (the note gives both). Excluded rows are predicted and shown but not counted (each note says "
                "why); docs/validation.md, \"H200 measurements (2026-11-30)\", says how each row is predicted.");
    char absent[256] = "";
    for (int f = KVAL_FILE_FIRST_OPTIONAL; f < KVAL_FILE_COUNT; f++)
        if (t.absent[f])
            snprintf(absent + strlen(absent), sizeof absent - strlen(absent), "%s%s", absent[0] ? ", " : "", KVAL_FILE_NAMES[f]);
    if (absent[0]) out_note(d, "Not in %s, so no rows from them: %s.", dir, absent);
    rc = cli_emit(d, c.format);
    out_doc_free(d);
    kval_table_free(&t);
    return rc;
}
