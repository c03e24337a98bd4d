/* cmd_merge.c: `kvplan merge OUT.db IN.db...`: combines databases (plan shards, runs from
 * several machines) into one; runs OUT already holds are not copied twice. */
#include "cli_run.h"

#include <stdio.h>
#include <string.h>

int cmd_merge(int argc, char **argv)
{
    cli_common c = {.format = OUT_TABLE};
    const char *paths[256];
    int n = 0, help = 0;
    for (int i = 1; i < argc; i++) {
        int r = cli_common_flag(&c, argc, argv, &i, &help);
        if (r < 0) return CLI_EX_USAGE;
        if (r) continue;
        if (cli_is_flag(argv[i])) return cli_usage_error("merge", "unknown option '%s'", argv[i]);
        if (n == 256) return cli_usage_error("merge", "at most 255 inputs");
        paths[n++] = argv[i];
    }
    if (help) { fputs(cli_usage_of("merge"), stdout); return CLI_OK; }
    if (n < 2) return cli_usage_error("merge", "needs OUT.db and at least one IN.db");
    /* Check every input before OUT is created or changed: a missing or foreign input writes nothing. */
    for (int i = 1; i < n; i++) {
        db *in;
        const char *p;
        int orc = cli_open_db_read(paths[i], &in, &p);
        if (orc) return orc;
        db_close(in);
    }
    cli_run_flags f = {.db_flag = paths[0]};
    db *d;
    const char *path;
    int rc = cli_open_db(&f, &d, &path);
    if (rc) return rc;
    out_doc *doc = out_doc_init();
    static const out_col cols[] = {{"input", "input", OUT_STR}, {"runs_copied", "runs copied", OUT_INT}};
    out_table(doc, "merged", "", 2, cols);
    char err[1024];
    for (int i = 1; i < n; i++) {
        long copied = 0;
        db_status st = db_merge(d, paths[i], &copied, err, sizeof err);
        if (st != DB_OK) { fprintf(stderr, "kvplan: merging %s\n", err); out_doc_free(doc); db_close(d); return cli_exit_for_db(st); }
        out_cell_str(doc, paths[i]);
        out_cell_num(doc, (double)copied);
    }
    db_close(d);
    rc = cli_emit(doc, c.format);
    out_doc_free(doc);
    return rc;
}
