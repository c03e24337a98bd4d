/* cli_run.h: what the commands that execute the engine share (simulate, run, validate):
 * their flags, the per-request and time-series sinks, storing a run, and its report. */
#ifndef KVPLAN_CLI_RUN_H
#define KVPLAN_CLI_RUN_H

#include "cli.h"
#include "progress.h"
#include "../db/db.h"
#include "../model/kv_model.h"
#include "../sim/sim.h"
#include "../verify/vf.h"

#include <stdio.h>

typedef struct {
    long seed;                  /* -1: the scenario's */
    const char *req_out, *ts_out, *db_flag, *backend;
    double interval;            /* s */
    int no_db;
    int per_step;               /* --per-step: no fast-forward (simulate) */
    long blocks;                /* > 0: the KV pool to simulate with (--blocks) */
    char db_default[4096];      /* the default database path, once resolved */
} cli_run_flags;

/* Consumes one engine flag at argv[*i]: 1 if it was one, 0 if not, -1 on a usage error. */
int cli_run_flag(const char *cmd, cli_run_flags *f, int argc, char **argv, int *i);

/* A run's recorder (verify's sink) with a progress bar on stderr. */
typedef struct {
    vf_sink v;
    cli_progress bar;
} cli_sink;

/* Opens the CSV outputs the flags ask for; CLI_EX_CANTCREAT on failure. */
int cli_sink_open(cli_sink *k, const cli_run_flags *f, bool keep, const char *label);
void cli_sink_close(cli_sink *k);

/* The waiting-queue bound in force, for a note on arrivals it turned away: the scenario's
 * deployment.max_queued_requests a replica, else the simulator's guard. Returns buf. */
const char *cli_queue_bound(const scn_scenario *s, char *buf, size_t n);

/* Executes the engine with an executor; prints the failure, located in the file or at the --set
 * of cc that gave its field, and returns its exit code. */
int cli_execute(const cli_common *cc, const scn_scenario *s, const sim_choice *c, sim_executor *ex,
                const cli_run_flags *f, long blocks, cli_sink *k, sim_metrics *m, char *started, char *finished);
/* Stores a finished run in one transaction; prints the failure and returns its exit code. */
int cli_store(db *d, const char *path, const scn_scenario *s, const sim_choice *c, const char *kind,
              const char *executor, const sim_metrics *m, const cli_sink *k, const char *started,
              const char *finished, long *run_id);
/* Opens the database unless --no-db; prints and returns an exit code on failure. */
int cli_open_db(cli_run_flags *f, db **d, const char **path);
/* Opens an existing database read-only for a command that only reads (runs, show, compare,
 * report, merge's inputs): never creates one (exit 66 when missing). */
int cli_open_db_read(const char *flag, db **d, const char **path);
/* The standard run report: latency table, run facts, throughput, KV. */
void cli_report_run(out_doc *d, const scn_scenario *s, const sim_choice *c, const sim_metrics *m, const char *executor,
                    long run_id, const char *db_path);
/* The "Disaggregation" section (cli_disagg.c); nothing for a colocated run. */
void cli_report_disagg(out_doc *d, const scn_scenario *s, const sim_metrics *m);

/* `memory`'s table of each disaggregated pool's memory per GPU (nothing when colocated). */
void cli_memory_disagg(out_doc *d, const scn_scenario *s, const kv_cache_cfg *c0, int block_size, double mean);

/* Parses an engine command's flags (scenario, common and engine flags); 0 or an exit code. */
int cli_parse_engine_cmd(const char *cmd, int argc, char **argv, cli_common *c, cli_run_flags *f, int *help);
/* Ranks an evaluated plan and adds its full report to doc (cmd_plan.c; kvplan-mpi uses it too). */
#include "../planner/plan.h"
void cli_plan_emit(out_doc *doc, const scn_scenario *s, plan_result *r, int no_rules, long top);
/* An evaluated plan none of whose candidates ran (each skipped: does not fit, an option pair
 * that cannot run, ...) has nothing to recommend: prints each candidate's reason to stderr and
 * returns CLI_EX_DATA; CLI_OK when some candidate ran. `who` starts the message. */
int cli_plan_none_ran(const char *who, const plan_result *r);
/* `plan`'s prefill/decode disaggregation sweep and its tables, after the ranked plan
 * (cli_disagg.c); 0, or an exit code. Nothing when the scenario does not ask for it. */
int cli_plan_disagg(out_doc *doc, const scn_scenario *s, const plan_result *r, int no_rules);
/* Loads the scenario, applies --seed, and takes its first option choice, refusing one that
 * cannot run; 0 or an exit code (cmd_run.c). */
int cli_prepare_engine(cli_common *c, const cli_run_flags *f, scn_scenario *s, sim_choice *ch);
/* Loads the scenario (--set applied) as its first candidate runs it: the first value of every
 * option list, deployment values, hardware, weight format and engine included (plan_first), with
 * its KV choice in ch (may be NULL). Prints why and returns an exit code on failure. */
int cli_load_first(cli_common *c, scn_scenario *s, sim_choice *ch);
/* Maps a be_status to an exit code. */
int cli_exit_for_be(int st);
/* Maps a vf_status to an exit code. */
int cli_exit_for_vf(vf_status st);
/* Reports a library failure: prints "kvplan: err" and returns the status's exit code. */
int cli_fail_vf(vf_status st, const char *err);
/* The calibration table and fitted profile (cmd_calibrate.c), shared with validate. */
void cli_report_calibration(out_doc *doc, const be_calibration *cal);

#endif
