/* cmd_run.c: `kvplan run SCENARIO --backend cpu|cuda`: the engine with a real backend as its
 * clock; every step's time is the backend's measured wall time. Stored as a measured run.
 * The backend holds one KV pool per replica (--blocks blocks each, or the cost model's count);
 * a deployment it cannot run (tensor_parallel > 1) exits 64, a machine too small for the
 * model and pools exits 69, both before anything is allocated. */
#include "cli_run.h"
#include "../backend/be_session.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int cli_exit_for_be(int st)
{
    switch (st) {
    case BE_E_UNAVAILABLE: return CLI_EX_UNAVAILABLE;
    case BE_E_UNSUPPORTED: return CLI_EX_USAGE;
    case BE_E_CONFIG: return CLI_EX_DATA;
    default: return CLI_EX_INTERNAL;
    }
}

/* Parses the flags of the engine commands that take a backend; 0, or an exit code. */
int cli_parse_engine_cmd(const char *cmd, int argc, char **argv, cli_common *c, cli_run_flags *f, int *help)
{
    for (int i = 1; i < argc; i++) {
        int r = cli_common_flag(c, argc, argv, &i, help);
        if (r == 0) r = cli_run_flag(cmd, f, argc, argv, &i);
        /* Only simulate: a check of the engine's fast-forward, which costs nothing to run there. */
        if (r == 0 && !strcmp(cmd, "simulate") && !strcmp(argv[i], "--per-step")) f->per_step = 1, r = 1;
        if (r < 0) return CLI_EX_USAGE;
        if (r) continue;
        if (cli_is_flag(argv[i])) return cli_usage_error(cmd, "unknown option '%s'", argv[i]);
        if (c->scenario) return cli_usage_error(cmd, "unexpected argument '%s'", argv[i]);
        c->scenario = argv[i];
    }
    if (*help) return CLI_OK;
    if (!c->scenario) return cli_usage_error(cmd, "missing SCENARIO");
    return CLI_OK;
}

int cli_load_first(cli_common *c, scn_scenario *s, sim_choice *ch)
{
    int rc = cli_load(c, s);
    if (rc) return rc;
    scn_scenario *t = malloc(sizeof *t);
    if (!t) return CLI_EX_INTERNAL;
    char why[300];
    rc = plan_first(s, t, ch, why, sizeof why);
    if (rc == 0) *s = *t;
    free(t);
    if (rc < 0) return CLI_EX_INTERNAL;
    if (rc > 0) { fprintf(stderr, "kvplan: %s: options: %s\n", c->scenario, why); return CLI_EX_DATA; }
    return CLI_OK;
}

int cli_prepare_engine(cli_common *c, const cli_run_flags *f, scn_scenario *s, sim_choice *ch)
{
    int rc = cli_load_first(c, s, ch);
    if (rc) return rc;
    if (f->seed >= 0) s->seed = (unsigned long long)f->seed;
    char err[256];
    if (sim_choice_check(ch, err, sizeof err)) {
        fprintf(stderr, "kvplan: %s: options: %s\n", c->scenario, err);
        return CLI_EX_DATA;
    }
    return CLI_OK;
}

int cmd_run(int argc, char **argv)
{
    cli_common c = {.format = OUT_TABLE};
    cli_run_flags f = {.seed = -1, .interval = 1.0, .backend = "cpu"};
    int help = 0;
    int rc = cli_parse_engine_cmd("run", argc, argv, &c, &f, &help);
    if (rc || help) { if (help) fputs(cli_usage_of("run"), stdout); return rc; }
    scn_scenario s;
    sim_choice ch;
    if ((rc = cli_prepare_engine(&c, &f, &s, &ch))) return rc;
    char err[1024];
    be_session bs;
    /* The backend allocates the pools (--blocks, or the cost model's count) and the engine
     * takes each replica's from it. */
    be_status bst = be_session_open_blocks(&bs, f.backend, &s, &ch, f.blocks, err, sizeof err);
    if (bst != BE_OK) { fprintf(stderr, "kvplan: backend %s: %s\n", f.backend, err); return cli_exit_for_be(bst); }
    db *d;
    const char *db_path;
    cli_sink k;
    memset(&k, 0, sizeof k);
    sim_metrics m;
    char started[32], finished[32], label[64];
    long run_id = 0;
    if ((rc = cli_open_db(&f, &d, &db_path))) goto out;
    snprintf(label, sizeof label, "running on %s", f.backend);
    if ((rc = cli_sink_open(&k, &f, d != NULL, label))) goto out;
    if ((rc = cli_execute(&c, &s, &ch, &bs.ex, &f, bs.blocks, &k, &m, started, finished))) goto out;
    if ((rc = cli_store(d, db_path, &s, &ch, "measured", f.backend, &m, &k, started, finished, &run_id))) goto out;
    out_doc *doc = out_doc_init();
    rc = CLI_EX_INTERNAL;
    if (!doc) goto out;
    snprintf(label, sizeof label, "%s (measured)", f.backend);
    cli_report_run(doc, &s, &ch, &m, label, run_id, db_path);
    rc = cli_emit(doc, c.format);
    out_doc_free(doc);
out:
    cli_sink_close(&k);
    db_close(d);
    be_session_close(&bs);
    return rc;
}
