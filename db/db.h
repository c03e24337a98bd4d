/* db.h: kvplan's SQLite store: versioned schema (db/schema.sql), one transaction per run,
 * WAL and a busy timeout so several kvplan processes can write one database at once. */
#ifndef KVPLAN_DB_H
#define KVPLAN_DB_H

#include "../loader/scn.h"
#include "../sim/sim.h"

#include <stddef.h>

typedef enum {
    DB_OK = 0,
    DB_E_CANTOPEN,   /* the file cannot be created, opened or written: read-only, disk full (exit 73) */
    DB_E_DATA,       /* not a kvplan database, a damaged one, or a newer schema (exit 65) */
    DB_E_NOTFOUND,   /* no such run (exit 65) */
    DB_E_INTERNAL,   /* SQL failure (exit 70) */
    DB_E_NOINPUT,    /* a database to read does not exist (exit 66) */
    DB_E_BUSY,       /* other writers held the lock past the retry deadline (exit 75) */
    DB_E_IO          /* the operating system reported an I/O error (exit 74) */
} db_status;

typedef struct db db;

/* Opens the database for writing, creating and migrating it as needed, and checks before any
 * work is done that it is a kvplan database and can be written (takes and drops the write
 * lock); NULL with a message on failure. */
db *db_open(const char *path, db_status *st, char *err, size_t n);
/* Opens an existing database read-only: never creates, migrates or changes the file, so it
 * works on read-only files and mounts (DB_E_NOINPUT when it does not exist). */
db *db_open_read(const char *path, db_status *st, char *err, size_t n);
void db_close(db *d);
int db_schema_version(db *d);
extern const int DB_SCHEMA_LATEST;

/* Everything one run stores; inserted in one transaction or not at all. The rows are staged in
 * a private temporary table first, so the write lock is held only for the final copy; a busy
 * lock is retried with backoff (docs/failure-model.md). */
typedef struct {
    const scn_scenario *scenario;
    const char *kind;          /* "predicted" or "measured" */
    const char *executor;
    const char *options_json;  /* the choice, as JSON */
    unsigned long long seed;
    const char *started, *finished;   /* ISO 8601 UTC */
    const sim_metric_kv *metrics;
    int n_metrics;
    const sim_request_row *rows;      /* may be NULL */
    long n_rows;
    const sim_sample *samples;        /* may be NULL */
    long n_samples;
} db_run_rec;

db_status db_run_insert(db *d, const db_run_rec *r, long *run_id, char *err, size_t n);

/* One stored run, as `kvplan runs` and `kvplan show` print it. */
typedef struct {
    long id;
    char scenario[128], kind[16], executor[32], options[512], started[32], finished[32], version[32];
    unsigned long long seed;
    double requests, throughput, ttft_p99, tpot_p99;   /* NaN when absent */
} db_run_info;

/* Calls fn for each run, newest first (at most `limit`, 0 = all). */
db_status db_runs_list(db *d, int limit, int (*fn)(void *ud, const db_run_info *r), void *ud, char *err, size_t n);
db_status db_run_get(db *d, long id, db_run_info *info, char *err, size_t n);
/* Calls fn for each stored metric of a run, in insertion order. */
db_status db_run_metrics(db *d, long id, int (*fn)(void *ud, const char *name, double value, int is_null),
                         void *ud, char *err, size_t n);
/* Calls fn for each run of this scenario (by its canonical hash), oldest first. */
db_status db_scenario_runs(db *d, const scn_scenario *s, int (*fn)(void *ud, const db_run_info *r), void *ud,
                           char *err, size_t n);
/* Calls fn for each time-series sample of a run, in time order. */
db_status db_run_timeseries(db *d, long id, int (*fn)(void *ud, const sim_sample *x), void *ud, char *err, size_t n);
/* Sets the fields of *m that the run's stored metrics name (other fields are left as they are). */
db_status db_run_sim_metrics(db *d, long id, sim_metrics *m, char *err, size_t n);
/* The stored scenario JSON of a run (caller frees). */
char *db_run_scenario_json(db *d, long id);

/* A calibration: what was fitted, on which machine, and how well. */
typedef struct {
    const char *name, *base, *backend, *host, *created, *source;
    const char *fit_json, *points_json;
    double rms_log_error, median_abs_error;
} db_calibration;

db_status db_calibration_insert(db *d, const db_calibration *c, long *id, char *err, size_t n);
/* The newest calibration's fit JSON for (backend, host, base profile), or NULL (caller frees). */
char *db_calibration_latest(db *d, const char *backend, const char *host, const char *base, long *id);

/* The newest stored run of this scenario with these options and seed (0 if none, -1 on error). */
long db_find_run(db *d, const scn_scenario *s, const char *kind, const char *options_json, unsigned long long seed);
/* Copies the runs, scenarios, metrics, requests, time series and calibrations of the database at
 * `path` into d in one transaction, skipping runs d already holds. */
db_status db_merge(db *d, const char *path, long *copied, char *err, size_t n);

/* The resolved scenario as canonical JSON (sorted keys, compact; caller frees). */
char *db_scenario_json(const scn_scenario *s);
/* The options key of a run: choice c on deployment d (kv_heads: an override of the model's, 0
 * for none; sp: the speculative setting c->spec names, NULL when speculation is off), as
 * canonical JSON (caller frees). The one encoder every writer of options uses. */
char *db_options_json(const sim_choice *c, const scn_deployment *d, int kv_heads, const scn_spec *sp);
/* Current UTC time as ISO 8601. */
void db_now_iso(char *buf, size_t n);

#endif
