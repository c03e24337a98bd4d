/* cmd_simulate.c: `kvplan simulate`: the engine with the cost model as its clock, for the
 * scenario's first option choice; results to stdout and (in one transaction) the database. */
#include "cli_run.h"

#include <stdio.h>

int cmd_simulate(int argc, char **argv)
{
    cli_common c = {.format = OUT_TABLE};
    cli_run_flags f = {.seed = -1, .interval = 1.0};
    int help = 0;
    int rc = cli_parse_engine_cmd("simulate", argc, argv, &c, &f, &help);
    if (rc || help) { if (help) fputs(cli_usage_of("simulate"), stdout); return rc; }
    if (f.backend) return cli_usage_error("simulate", "simulate predicts with the cost model; use `kvplan run --backend %s`", f.backend);
    scn_scenario s;
    sim_choice ch;
    if ((rc = cli_prepare_engine(&c, &f, &s, &ch))) return rc;
    /* Open everything that can fail before spending time simulating. */
    db *d;
    const char *db_path;
    if ((rc = cli_open_db(&f, &d, &db_path))) return rc;
    cli_sink k;
    sim_executor ex = {0};
    sim_metrics m;
    char started[32], finished[32];
    long run_id = 0;
    if ((rc = cli_sink_open(&k, &f, d != NULL, "simulating"))) goto out;
    rc = CLI_EX_INTERNAL;
    if (sim_executor_model(&s, &ch, &ex)) goto out;
    if ((rc = cli_execute(&c, &s, &ch, &ex, &f, f.blocks, &k, &m, started, finished))) goto out;
    if ((rc = cli_store(d, db_path, &s, &ch, "predicted", "model", &m, &k, started, finished, &run_id))) goto out;
    out_doc *doc = out_doc_init();
    rc = CLI_EX_INTERNAL;
    if (!doc) goto out;
    cli_report_run(doc, &s, &ch, &m, "model (predicted)", run_id, db_path);
    rc = cli_emit(doc, c.format);
    out_doc_free(doc);
out:
    if (ex.free) ex.free(ex.ctx);
    cli_sink_close(&k);
    db_close(d);
    return rc;
}
