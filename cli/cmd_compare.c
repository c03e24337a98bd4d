/* cmd_compare.c: `kvplan compare RUN_A RUN_B`: two stored runs' metrics side by side. */
#include "cli_run.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

typedef struct { char name[64]; double v; } kv;
typedef struct { kv m[128]; int n; } metric_set;

static int collect(void *ud, const char *name, double value, int is_null)
{
    metric_set *s = ud;
    if (s->n < 128) { snprintf(s->m[s->n].name, 64, "%s", name); s->m[s->n++].v = is_null ? NAN : value; }
    return 0;
}

int cmd_compare(int argc, char **argv)
{
    cli_common c = {.format = OUT_TABLE};
    const char *db_flag = NULL, *args[2] = {NULL, NULL};
    int help = 0, n_args = 0;
    for (int i = 1; i < argc; i++) {
        int r = cli_common_flag(&c, argc, argv, &i, &help);
        if (r < 0) return CLI_EX_USAGE;
        if (r) continue;
        const char *v;
        if ((v = cli_flag_value(argc, argv, &i, "--db"))) { if (cli_flag_missing_value(v)) return CLI_EX_USAGE; db_flag = v; }
        else if (cli_is_flag(argv[i])) return cli_usage_error("compare", "unknown option '%s'", argv[i]);
        else if (n_args < 2) args[n_args++] = argv[i];
        else return cli_usage_error("compare", "unexpected argument '%s'", argv[i]);
    }
    if (help) { fputs(cli_usage_of("compare"), stdout); return CLI_OK; }
    if (n_args != 2) return cli_usage_error("compare", "needs two runs: RUN_A RUN_B");
    long ids[2];
    for (int i = 0; i < 2; i++) if (cli_parse_long("RUN", args[i], 1, 0x7fffffffffffffffL, &ids[i])) return CLI_EX_USAGE;
    db *d;
    const char *path;
    int rc = cli_open_db_read(db_flag, &d, &path);
    if (rc) return rc;
    metric_set sets[2];
    db_run_info info[2];
    char err[1024];
    for (int i = 0; i < 2; i++) {
        sets[i].n = 0;
        db_status st = db_run_get(d, ids[i], &info[i], err, sizeof err);
        if (st == DB_OK) st = db_run_metrics(d, ids[i], collect, &sets[i], err, sizeof err);
        if (st != DB_OK) { fprintf(stderr, "kvplan: %s: %s\n", path, err); db_close(d); return cli_exit_for_db(st); }
    }
    db_close(d);
    out_doc *doc = out_doc_init();
    if (!doc) return CLI_EX_INTERNAL;
    static const out_col cols[] = {{"metric", "metric", OUT_STR}, {"a", "run A", OUT_NUM}, {"b", "run B", OUT_NUM},
                                   {"b_over_a_minus_1", "B vs A", OUT_FRAC}};
    out_table(doc, "comparison", "", 4, cols);
    /* A's metrics in A's order, then any only B has. */
    for (int pass = 0; pass < 2; pass++)
        for (int i = 0; i < sets[pass].n; i++) {
            const char *name = sets[pass].m[i].name;
            double a = NAN, b = NAN;
            int in_a = 0;
            for (int j = 0; j < sets[0].n; j++) if (!strcmp(sets[0].m[j].name, name)) { a = sets[0].m[j].v; in_a = 1; }
            if (pass == 1 && in_a) continue;
            for (int j = 0; j < sets[1].n; j++) if (!strcmp(sets[1].m[j].name, name)) b = sets[1].m[j].v;
            out_cell_str(doc, name);
            out_cell_num(doc, a);
            out_cell_num(doc, b);
            out_cell_num(doc, vf_error(b, a));   /* B against A, as validation compares */
        }
    for (int i = 0; i < 2; i++) {
        out_section(doc, i ? "run_b" : "run_a", i ? "Run B" : "Run A");
        out_kv_num(doc, "id", "id", (double)info[i].id, OUT_INT);
        out_kv_str(doc, "scenario", "scenario", info[i].scenario);
        out_kv_str(doc, "kind", "kind", info[i].kind);
        out_kv_str(doc, "executor", "executor", info[i].executor);
        out_kv_str(doc, "options", "options", info[i].options);
    }
    rc = cli_emit(doc, c.format);
    out_doc_free(doc);
    return rc;
}
