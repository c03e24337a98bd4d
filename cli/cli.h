/* cli.h: what the kvplan subcommands share: exit codes, common flags, scenario loading. */
#ifndef KVPLAN_CLI_H
#define KVPLAN_CLI_H

#include "../loader/scn.h"
#include "out.h"

/* sysexits-style exit codes; docs/cli.md lists them. */
enum { CLI_OK = 0, CLI_EX_USAGE = 64, CLI_EX_DATA = 65, CLI_EX_NOINPUT = 66, CLI_EX_UNAVAILABLE = 69,
       CLI_EX_INTERNAL = 70, CLI_EX_CANTCREAT = 73, CLI_EX_IOERR = 74, CLI_EX_TEMPFAIL = 75 };

#define CLI_MAX_SETS 64

/* Flags every scenario command takes. */
typedef struct {
    out_format format;
    const char *sets[CLI_MAX_SETS];
    int n_sets;
    const char *scenario;   /* the positional SCENARIO */
} cli_common;

typedef struct {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *summary;
    const char *usage;      /* full --help text */
} cli_command;

/* Handles --format, --set and --help for a command; returns 1 if it consumed argv[*i]
 * (and maybe its value), 0 if the flag is not common, or -1 after printing a usage error.
 * `help` is set when --help was seen. */
int cli_common_flag(cli_common *c, int argc, char **argv, int *i, int *help);
/* If argv[*i] is `flag` ("--flag v" or "--flag=v"), returns its value and advances *i past it;
 * else NULL. A flag without its value prints an error and returns a value for which
 * cli_flag_missing_value(v) is true (the value carries that; nothing is kept between calls). */
const char *cli_flag_value(int argc, char **argv, int *i, const char *flag);
int cli_flag_missing_value(const char *v);
/* True for anything that looks like an option ("-x", "--xyz"), so typos are not taken as files. */
int cli_is_flag(const char *arg);
/* A command's --help text. */
const char *cli_usage_of(const char *name);
/* The database path: the --db flag, else $KVPLAN_DB, else kvplan.db in the user's data
 * directory (created; scn_user_dir), else ./kvplan.db. buf holds the default's path. */
const char *cli_db_path(const char *flag, char *buf, size_t n);
/* Maps a db_status to an exit code. */
int cli_exit_for_db(int st);
/* Parses a whole-number flag value; -1 after a usage error naming the flag. */
int cli_parse_long(const char *flag, const char *v, long lo, long hi, long *out);
/* Prints "kvplan CMD: message" and the usage hint; returns CLI_EX_USAGE. */
int cli_usage_error(const char *cmd, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
/* Loads c->scenario with c->sets; prints the error and returns its exit code on failure. */
int cli_load(const cli_common *c, scn_scenario *s);
/* scn_locate_message for an error found after loading, but a field (or a parent of it) that a
 * --set gave is located in that --set ("--set:1:COL", as the loader locates --set values: the
 * column of the value within the flag's argument), the last such --set winning as it does when
 * loading; otherwise in the scenario file. */
void cli_locate_message(const cli_common *c, const char *file, const char *msg, char *out, size_t n);
/* Maps a loader status to an exit code. */
int cli_exit_for(scn_status st);
/* Prints a report to stdout in the chosen format; CLI_EX_INTERNAL if that fails. */
int cli_emit(const out_doc *d, out_format f);
/* Adds a KV budget line: its bytes under `key` when positive; otherwise no negative size but
 * "none: the model does not fit" under `none_key` and what is missing under `short_key`. */
void cli_kv_budget(out_doc *d, double budget, const char *key, const char *label, const char *none_key,
                   const char *short_key);

int cmd_memory(int argc, char **argv);
int cmd_cost(int argc, char **argv);
int cmd_list(int argc, char **argv);
int cmd_simulate(int argc, char **argv);
int cmd_runs(int argc, char **argv);
int cmd_show(int argc, char **argv);
int cmd_run(int argc, char **argv);
int cmd_calibrate(int argc, char **argv);
int cmd_validate(int argc, char **argv);
int cmd_compare(int argc, char **argv);
int cmd_import(int argc, char **argv);
int cmd_validate_published(int argc, char **argv);
int cmd_validate_kernels(int argc, char **argv);
int cmd_plan(int argc, char **argv);
int cmd_capacity(int argc, char **argv);
int cmd_sweep(int argc, char **argv);
int cmd_merge(int argc, char **argv);
int cmd_report(int argc, char **argv);
int cmd_selftest(int argc, char **argv);
int cmd_kernel_bench(int argc, char **argv);

extern const cli_command CLI_COMMANDS[];
extern const int CLI_N_COMMANDS;

#endif
