/* db.c: opening, migrating and writing the SQLite store (see db.h). Every sqlite3 call that
 * can fail goes through DB_CHECK, which records the statement, function, file and line. */
#include "db.h"

#include <math.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

extern const char DB_SCHEMA_SQL[];   /* db/schema.sql, embedded by the build */
const int DB_SCHEMA_LATEST = 3;

#ifndef KVPLAN_VERSION
#define KVPLAN_VERSION "dev"
#endif

struct db {
    sqlite3 *h;
    char err[512];
};

#define DB_CHECK(d, call)                                                                          \
    do {                                                                                           \
        int rc_ = (call);                                                                          \
        if (rc_ != SQLITE_OK && rc_ != SQLITE_DONE && rc_ != SQLITE_ROW) {                         \
            snprintf((d)->err, sizeof (d)->err, "sqlite: %s (%.160s in %s at %s:%d)", sqlite3_errmsg((d)->h), \
                     #call, __func__, __FILE__, __LINE__);                                         \
            goto fail;                                                                             \
        }                                                                                          \
    } while (0)

int db_schema_version(db *d)
{
    sqlite3_stmt *st;
    int v = -1;
    if (sqlite3_prepare_v2(d->h, "PRAGMA user_version", -1, &st, NULL) == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW)
        v = sqlite3_column_int(st, 0);
    sqlite3_finalize(st);
    return v;
}

/* Copies the "-- version N" section of the schema into a fresh string. */
static char *schema_section(int version)
{
    char mark[32];
    snprintf(mark, sizeof mark, "-- version %d\n", version);
    const char *p = strstr(DB_SCHEMA_SQL, mark);
    if (!p) return NULL;
    p += strlen(mark);
    const char *end = strstr(p, "-- version ");
    size_t len = end ? (size_t)(end - p) : strlen(p);
    char *s = malloc(len + 1);
    if (s) { memcpy(s, p, len); s[len] = 0; }
    return s;
}

static int migrate(db *d, int from)
{
    char *sql = NULL;
    DB_CHECK(d, sqlite3_exec(d->h, "BEGIN IMMEDIATE", NULL, NULL, NULL));
    /* Re-read under the write lock: another process may have migrated meanwhile. */
    from = db_schema_version(d);
    for (int v = from + 1; v <= DB_SCHEMA_LATEST; v++) {
        sql = schema_section(v);
        if (!sql) { snprintf(d->err, sizeof d->err, "schema section %d missing", v); goto fail; }
        DB_CHECK(d, sqlite3_exec(d->h, sql, NULL, NULL, NULL));
        free(sql);
        sql = NULL;
    }
    char pragma[64];
    snprintf(pragma, sizeof pragma, "PRAGMA user_version = %d", DB_SCHEMA_LATEST);
    DB_CHECK(d, sqlite3_exec(d->h, pragma, NULL, NULL, NULL));
    DB_CHECK(d, sqlite3_exec(d->h, "COMMIT", NULL, NULL, NULL));
    return 0;
fail:
    free(sql);
    sqlite3_exec(d->h, "ROLLBACK", NULL, NULL, NULL);
    return -1;
}

db *db_open(const char *path, db_status *status, char *err, size_t n)
{
    db *d = calloc(1, sizeof *d);
    if (!d) { *status = DB_E_INTERNAL; snprintf(err, n, "out of memory"); return NULL; }
    if (sqlite3_open_v2(path, &d->h, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, NULL) != SQLITE_OK) {
        *status = DB_E_CANTOPEN;
        snprintf(err, n, "%s: cannot open database: %s", path, d->h ? sqlite3_errmsg(d->h) : "out of memory");
        goto err;
    }
    sqlite3_busy_timeout(d->h, 10000);
    /* The first statement that reads the file tells a non-database apart. */
    int v = db_schema_version(d);
    if (v < 0) {
        *status = DB_E_DATA;
        snprintf(err, n, "%s: not a kvplan database (%s)", path, sqlite3_errmsg(d->h));
        goto err;
    }
    if (v > DB_SCHEMA_LATEST) {
        *status = DB_E_DATA;
        snprintf(err, n, "%s: database schema version %d is newer than this kvplan understands (%d); "
                         "use a newer kvplan", path, v, DB_SCHEMA_LATEST);
        goto err;
    }
    if (sqlite3_exec(d->h, "PRAGMA journal_mode = WAL; PRAGMA foreign_keys = ON;", NULL, NULL, NULL) != SQLITE_OK) {
        *status = DB_E_CANTOPEN;
        snprintf(err, n, "%s: %s", path, sqlite3_errmsg(d->h));
        goto err;
    }
    if (v < DB_SCHEMA_LATEST && migrate(d, v)) {
        *status = DB_E_INTERNAL;
        snprintf(err, n, "%s: migrating from schema version %d failed: %s", path, v, d->err);
        goto err;
    }
    *status = DB_OK;
    return d;
err:
    db_close(d);
    return NULL;
}

void db_close(db *d)
{
    if (!d) return;
    sqlite3_close(d->h);
    free(d);
}

void db_now_iso(char *buf, size_t n)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    struct tm tm;
    gmtime_r(&ts.tv_sec, &tm);
    char base[32];
    strftime(base, sizeof base, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(buf, n, "%s.%03ldZ", base, ts.tv_nsec / 1000000);
}

/* FNV-1a 64: a stable name for a scenario's canonical JSON. */
static void hash_hex(const char *s, char out[17])
{
    unsigned long long h = 0xcbf29ce484222325ULL;
    for (; *s; s++) { h ^= (unsigned char)*s; h *= 0x100000001b3ULL; }
    snprintf(out, 17, "%016llx", h);
}

static int bind_real(sqlite3_stmt *st, int i, double v)
{
    return isfinite(v) ? sqlite3_bind_double(st, i, v) : sqlite3_bind_null(st, i);
}

db_status db_run_insert(db *d, const db_run_rec *r, long *run_id, char *err, size_t n)
{
    sqlite3_stmt *st = NULL;
    char *json = db_scenario_json(r->scenario);
    char hash[17];
    if (!json) { snprintf(err, n, "out of memory"); return DB_E_INTERNAL; }
    hash_hex(json, hash);
    d->err[0] = 0;
    DB_CHECK(d, sqlite3_exec(d->h, "BEGIN IMMEDIATE", NULL, NULL, NULL));
    DB_CHECK(d, sqlite3_prepare_v2(d->h, "INSERT INTO scenarios (hash, name, json) VALUES (?1, ?2, ?3) "
                                         "ON CONFLICT (hash) DO UPDATE SET name = name RETURNING id", -1, &st, NULL));
    sqlite3_bind_text(st, 1, hash, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, r->scenario->name, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 3, json, -1, SQLITE_STATIC);
    DB_CHECK(d, sqlite3_step(st));
    long scenario_id = (long)sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    st = NULL;

    DB_CHECK(d, sqlite3_prepare_v2(d->h, "INSERT INTO runs (scenario_id, kind, executor, options, seed, started, finished, "
                                         "version) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8) RETURNING id", -1, &st, NULL));
    sqlite3_bind_int64(st, 1, scenario_id);
    sqlite3_bind_text(st, 2, r->kind, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 3, r->executor, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 4, r->options_json, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 5, (sqlite3_int64)r->seed);
    sqlite3_bind_text(st, 6, r->started, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 7, r->finished, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 8, KVPLAN_VERSION, -1, SQLITE_STATIC);
    DB_CHECK(d, sqlite3_step(st));
    long id = (long)sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    st = NULL;

    DB_CHECK(d, sqlite3_prepare_v2(d->h, "INSERT INTO metrics (run_id, name, value) VALUES (?1, ?2, ?3)", -1, &st, NULL));
    for (int i = 0; i < r->n_metrics; i++) {
        sqlite3_bind_int64(st, 1, id);
        sqlite3_bind_text(st, 2, r->metrics[i].name, -1, SQLITE_STATIC);
        bind_real(st, 3, r->metrics[i].value);
        DB_CHECK(d, sqlite3_step(st));
        sqlite3_reset(st);
    }
    sqlite3_finalize(st);
    st = NULL;

    if (r->n_rows) {
        DB_CHECK(d, sqlite3_prepare_v2(d->h, "INSERT INTO requests VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)",
                                       -1, &st, NULL));
        for (long i = 0; i < r->n_rows; i++) {
            const sim_request_row *q = &r->rows[i];
            sqlite3_bind_int64(st, 1, id);
            sqlite3_bind_int64(st, 2, q->id);
            sqlite3_bind_int(st, 3, q->replica);
            sqlite3_bind_double(st, 4, q->arrival);
            sqlite3_bind_int(st, 5, q->prompt);
            sqlite3_bind_int(st, 6, q->output);
            sqlite3_bind_int(st, 7, q->cached);
            sqlite3_bind_double(st, 8, q->queue);
            sqlite3_bind_double(st, 9, q->ttft);
            sqlite3_bind_double(st, 10, q->tpot);
            sqlite3_bind_double(st, 11, q->e2e);
            sqlite3_bind_int(st, 12, q->preemptions);
            DB_CHECK(d, sqlite3_step(st));
            sqlite3_reset(st);
        }
        sqlite3_finalize(st);
        st = NULL;
    }
    if (r->n_samples) {
        DB_CHECK(d, sqlite3_prepare_v2(d->h, "INSERT INTO timeseries VALUES (?1, ?2, ?3, ?4, ?5)", -1, &st, NULL));
        for (long i = 0; i < r->n_samples; i++) {
            const sim_sample *q = &r->samples[i];
            sqlite3_bind_int64(st, 1, id);
            sqlite3_bind_double(st, 2, q->t);
            sqlite3_bind_double(st, 3, q->kv_used);
            sqlite3_bind_int64(st, 4, q->waiting);
            sqlite3_bind_int64(st, 5, q->running);
            DB_CHECK(d, sqlite3_step(st));
            sqlite3_reset(st);
        }
        sqlite3_finalize(st);
        st = NULL;
    }
    DB_CHECK(d, sqlite3_exec(d->h, "COMMIT", NULL, NULL, NULL));
    free(json);
    *run_id = id;
    return DB_OK;
fail:
    sqlite3_finalize(st);
    sqlite3_exec(d->h, "ROLLBACK", NULL, NULL, NULL);
    free(json);
    snprintf(err, n, "%s", d->err);
    return DB_E_INTERNAL;
}

static const char *RUN_SELECT =
    "SELECT r.id, s.name, r.kind, r.executor, r.options, r.seed, r.started, r.finished, r.version, "
    "(SELECT value FROM metrics WHERE run_id = r.id AND name = 'requests'), "
    "(SELECT value FROM metrics WHERE run_id = r.id AND name = 'throughput_req_per_s'), "
    "(SELECT value FROM metrics WHERE run_id = r.id AND name = 'ttft_p99_s'), "
    "(SELECT value FROM metrics WHERE run_id = r.id AND name = 'tpot_p99_s') "
    "FROM runs r JOIN scenarios s ON s.id = r.scenario_id ";

static double col_real(sqlite3_stmt *st, int i)
{
    return sqlite3_column_type(st, i) == SQLITE_NULL ? NAN : sqlite3_column_double(st, i);
}

static void read_info(sqlite3_stmt *st, db_run_info *r)
{
    memset(r, 0, sizeof *r);
    r->id = (long)sqlite3_column_int64(st, 0);
    snprintf(r->scenario, sizeof r->scenario, "%s", (const char *)sqlite3_column_text(st, 1));
    snprintf(r->kind, sizeof r->kind, "%s", (const char *)sqlite3_column_text(st, 2));
    snprintf(r->executor, sizeof r->executor, "%s", (const char *)sqlite3_column_text(st, 3));
    snprintf(r->options, sizeof r->options, "%s", (const char *)sqlite3_column_text(st, 4));
    r->seed = (unsigned long long)sqlite3_column_int64(st, 5);
    snprintf(r->started, sizeof r->started, "%s", (const char *)sqlite3_column_text(st, 6));
    snprintf(r->finished, sizeof r->finished, "%s", (const char *)sqlite3_column_text(st, 7));
    snprintf(r->version, sizeof r->version, "%s", (const char *)sqlite3_column_text(st, 8));
    r->requests = col_real(st, 9);
    r->throughput = col_real(st, 10);
    r->ttft_p99 = col_real(st, 11);
    r->tpot_p99 = col_real(st, 12);
}

/* Runs RUN_SELECT with `tail` (WHERE/ORDER/LIMIT) and an optional text parameter ?1, calling fn
 * for each run. */
static db_status each_run(db *d, const char *tail, const char *param, int (*fn)(void *ud, const db_run_info *r), void *ud,
                          char *err, size_t n)
{
    sqlite3_stmt *st = NULL;
    char sql[1300];
    snprintf(sql, sizeof sql, "%s %s", RUN_SELECT, tail);
    DB_CHECK(d, sqlite3_prepare_v2(d->h, sql, -1, &st, NULL));
    if (param) sqlite3_bind_text(st, 1, param, -1, SQLITE_STATIC);
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        db_run_info r;
        read_info(st, &r);
        if (fn(ud, &r)) break;
    }
    DB_CHECK(d, rc);
    sqlite3_finalize(st);
    return DB_OK;
fail:
    sqlite3_finalize(st);
    snprintf(err, n, "%s", d->err);
    return DB_E_INTERNAL;
}

db_status db_runs_list(db *d, int limit, int (*fn)(void *ud, const db_run_info *r), void *ud, char *err, size_t n)
{
    char tail[64];
    snprintf(tail, sizeof tail, "ORDER BY r.id DESC LIMIT %d", limit > 0 ? limit : -1);
    return each_run(d, tail, NULL, fn, ud, err, n);
}

db_status db_run_get(db *d, long id, db_run_info *info, char *err, size_t n)
{
    sqlite3_stmt *st = NULL;
    char sql[1200];
    snprintf(sql, sizeof sql, "%s WHERE r.id = ?1", RUN_SELECT);
    DB_CHECK(d, sqlite3_prepare_v2(d->h, sql, -1, &st, NULL));
    sqlite3_bind_int64(st, 1, id);
    int rc = sqlite3_step(st);
    DB_CHECK(d, rc);
    if (rc != SQLITE_ROW) {
        sqlite3_finalize(st);
        snprintf(err, n, "no run %ld in this database (`kvplan runs` lists them)", id);
        return DB_E_NOTFOUND;
    }
    read_info(st, info);
    sqlite3_finalize(st);
    return DB_OK;
fail:
    sqlite3_finalize(st);
    snprintf(err, n, "%s", d->err);
    return DB_E_INTERNAL;
}

db_status db_run_metrics(db *d, long id, int (*fn)(void *ud, const char *name, double value, int is_null),
                         void *ud, char *err, size_t n)
{
    sqlite3_stmt *st = NULL;
    DB_CHECK(d, sqlite3_prepare_v2(d->h, "SELECT name, value FROM metrics WHERE run_id = ?1 ORDER BY rowid", -1, &st, NULL));
    sqlite3_bind_int64(st, 1, id);
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        int is_null = sqlite3_column_type(st, 1) == SQLITE_NULL;
        if (fn(ud, (const char *)sqlite3_column_text(st, 0), is_null ? NAN : sqlite3_column_double(st, 1), is_null)) break;
    }
    DB_CHECK(d, rc);
    sqlite3_finalize(st);
    return DB_OK;
fail:
    sqlite3_finalize(st);
    snprintf(err, n, "%s", d->err);
    return DB_E_INTERNAL;
}

static int set_metric(void *ud, const char *name, double value, int is_null)
{
    sim_metrics_set(ud, name, is_null ? NAN : value);
    return 0;
}

db_status db_run_sim_metrics(db *d, long id, sim_metrics *m, char *err, size_t n)
{
    return db_run_metrics(d, id, set_metric, m, err, n);
}

char *db_run_scenario_json(db *d, long id)
{
    sqlite3_stmt *st = NULL;
    char *out = NULL;
    if (sqlite3_prepare_v2(d->h, "SELECT s.json FROM runs r JOIN scenarios s ON s.id = r.scenario_id WHERE r.id = ?1",
                           -1, &st, NULL) != SQLITE_OK)
        return NULL;
    sqlite3_bind_int64(st, 1, id);
    if (sqlite3_step(st) == SQLITE_ROW) {
        const char *t = (const char *)sqlite3_column_text(st, 0);
        size_t len = strlen(t) + 1;
        out = malloc(len);
        if (out) memcpy(out, t, len);
    }
    sqlite3_finalize(st);
    return out;
}

db_status db_calibration_insert(db *d, const db_calibration *c, long *id, char *err, size_t n)
{
    sqlite3_stmt *st = NULL;
    d->err[0] = 0;
    DB_CHECK(d, sqlite3_prepare_v2(d->h, "INSERT INTO calibrations (name, base, backend, host, created, source, fit, "
                                         "points, rms_log_error, median_abs_error) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, "
                                         "?8, ?9, ?10) RETURNING id", -1, &st, NULL));
    sqlite3_bind_text(st, 1, c->name, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, c->base, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 3, c->backend, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 4, c->host, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 5, c->created, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 6, c->source, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 7, c->fit_json, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 8, c->points_json, -1, SQLITE_STATIC);
    bind_real(st, 9, c->rms_log_error);
    bind_real(st, 10, c->median_abs_error);
    DB_CHECK(d, sqlite3_step(st));
    *id = (long)sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    return DB_OK;
fail:
    sqlite3_finalize(st);
    snprintf(err, n, "%s", d->err);
    return DB_E_INTERNAL;
}

char *db_calibration_latest(db *d, const char *backend, const char *host, const char *base, long *id)
{
    sqlite3_stmt *st = NULL;
    char *out = NULL;
    if (sqlite3_prepare_v2(d->h, "SELECT id, fit FROM calibrations WHERE backend = ?1 AND host = ?2 AND base = ?3 "
                                 "ORDER BY id DESC LIMIT 1", -1, &st, NULL) != SQLITE_OK)
        return NULL;
    sqlite3_bind_text(st, 1, backend, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, host, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 3, base, -1, SQLITE_STATIC);
    if (sqlite3_step(st) == SQLITE_ROW) {
        *id = (long)sqlite3_column_int64(st, 0);
        const char *t = (const char *)sqlite3_column_text(st, 1);
        size_t len = strlen(t) + 1;
        out = malloc(len);
        if (out) memcpy(out, t, len);
    }
    sqlite3_finalize(st);
    return out;
}

long db_find_run(db *d, const scn_scenario *s, const char *kind, const char *options_json, unsigned long long seed)
{
    char *json = db_scenario_json(s), hash[17];
    if (!json) return -1;
    hash_hex(json, hash);
    free(json);
    sqlite3_stmt *st = NULL;
    long id = 0;
    if (sqlite3_prepare_v2(d->h, "SELECT r.id FROM runs r JOIN scenarios s ON s.id = r.scenario_id WHERE s.hash = ?1 "
                                 "AND r.kind = ?2 AND r.options = ?3 AND r.seed = ?4 ORDER BY r.id DESC LIMIT 1",
                           -1, &st, NULL) != SQLITE_OK)
        return -1;
    sqlite3_bind_text(st, 1, hash, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, kind, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 3, options_json, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 4, (sqlite3_int64)seed);
    int rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) id = (long)sqlite3_column_int64(st, 0);
    else if (rc != SQLITE_DONE) id = -1;
    sqlite3_finalize(st);
    return id;
}

/* Copies every run (with its scenario, metrics, requests and time series) and calibration of
 * the database at `path` into d, in one transaction; runs d already has are skipped. */
db_status db_merge(db *d, const char *path, long *copied, char *err, size_t n)
{
    db_status st;
    db *src = db_open(path, &st, err, n);   /* migrates an older shard first */
    if (!src) return st;
    db_close(src);
    sqlite3_stmt *q = NULL, *ins = NULL;
    *copied = 0;
    d->err[0] = 0;
    char *sql = sqlite3_mprintf("ATTACH DATABASE %Q AS src", path);
    int rc = sql ? sqlite3_exec(d->h, sql, NULL, NULL, NULL) : SQLITE_NOMEM;
    sqlite3_free(sql);
    if (rc != SQLITE_OK) { snprintf(err, n, "%s: cannot attach: %s", path, sqlite3_errmsg(d->h)); return DB_E_CANTOPEN; }
    DB_CHECK(d, sqlite3_exec(d->h, "BEGIN IMMEDIATE;"
                                   "INSERT OR IGNORE INTO scenarios (hash, name, json) SELECT hash, name, json FROM src.scenarios;"
                                   "CREATE TEMP TABLE IF NOT EXISTS run_map (old INTEGER PRIMARY KEY, new INTEGER);"
                                   "DELETE FROM run_map;", NULL, NULL, NULL));
    DB_CHECK(d, sqlite3_prepare_v2(d->h, "SELECT r.id, s.hash, r.kind, r.executor, r.options, r.seed, r.started, r.finished, "
                                         "r.version FROM src.runs r JOIN src.scenarios s ON s.id = r.scenario_id ORDER BY r.id",
                                   -1, &q, NULL));
    DB_CHECK(d, sqlite3_prepare_v2(d->h, "INSERT INTO runs (scenario_id, kind, executor, options, seed, started, finished, version) "
                                         "SELECT id, ?2, ?3, ?4, ?5, ?6, ?7, ?8 FROM scenarios WHERE hash = ?1 AND NOT EXISTS "
                                         "(SELECT 1 FROM runs r WHERE r.scenario_id = scenarios.id AND r.kind = ?2 AND "
                                         "r.executor = ?3 AND r.options = ?4 AND r.seed = ?5 AND r.started = ?6) RETURNING id",
                                   -1, &ins, NULL));
    while ((rc = sqlite3_step(q)) == SQLITE_ROW) {
        for (int i = 1; i <= 8; i++) sqlite3_bind_value(ins, i, sqlite3_column_value(q, i));
        int r2 = sqlite3_step(ins);
        DB_CHECK(d, r2);
        if (r2 == SQLITE_ROW) {
            char map[128];
            snprintf(map, sizeof map, "INSERT INTO run_map VALUES (%lld, %lld)", (long long)sqlite3_column_int64(q, 0),
                     (long long)sqlite3_column_int64(ins, 0));
            DB_CHECK(d, sqlite3_exec(d->h, map, NULL, NULL, NULL));
            (*copied)++;
        }
        sqlite3_reset(ins);
    }
    DB_CHECK(d, rc);
    sqlite3_finalize(q);
    sqlite3_finalize(ins);
    q = ins = NULL;
    DB_CHECK(d, sqlite3_exec(d->h,
                             "INSERT INTO metrics SELECT m.new, x.name, x.value FROM src.metrics x JOIN run_map m ON m.old = x.run_id;"
                             "INSERT INTO requests SELECT m.new, x.req_id, x.replica, x.arrival_s, x.prompt_tokens, x.output_tokens, "
                             "x.cached_tokens, x.queue_s, x.ttft_s, x.tpot_s, x.e2e_s, x.preemptions FROM src.requests x "
                             "JOIN run_map m ON m.old = x.run_id;"
                             "INSERT INTO timeseries SELECT m.new, x.t_s, x.kv_used, x.waiting, x.running FROM src.timeseries x "
                             "JOIN run_map m ON m.old = x.run_id;"
                             "INSERT INTO calibrations (name, base, backend, host, created, source, fit, points, rms_log_error, "
                             "median_abs_error) SELECT name, base, backend, host, created, source, fit, points, rms_log_error, "
                             "median_abs_error FROM src.calibrations c WHERE NOT EXISTS (SELECT 1 FROM calibrations k WHERE "
                             "k.host = c.host AND k.created = c.created AND k.name = c.name);"
                             "COMMIT;", NULL, NULL, NULL));
    sqlite3_exec(d->h, "DETACH DATABASE src", NULL, NULL, NULL);
    return DB_OK;
fail:
    sqlite3_finalize(q);
    sqlite3_finalize(ins);
    sqlite3_exec(d->h, "ROLLBACK", NULL, NULL, NULL);
    sqlite3_exec(d->h, "DETACH DATABASE src", NULL, NULL, NULL);
    snprintf(err, n, "%s: %s", path, d->err);
    return DB_E_INTERNAL;
}

db_status db_scenario_runs(db *d, const scn_scenario *s, int (*fn)(void *ud, const db_run_info *r), void *ud,
                           char *err, size_t n)
{
    char *json = db_scenario_json(s), hash[17];
    if (!json) { snprintf(err, n, "out of memory"); return DB_E_INTERNAL; }
    hash_hex(json, hash);
    free(json);
    return each_run(d, "WHERE s.hash = ?1 ORDER BY r.id", hash, fn, ud, err, n);
}

db_status db_run_timeseries(db *d, long id, int (*fn)(void *ud, const sim_sample *x), void *ud, char *err, size_t n)
{
    sqlite3_stmt *st = NULL;
    DB_CHECK(d, sqlite3_prepare_v2(d->h, "SELECT t_s, kv_used, waiting, running FROM timeseries WHERE run_id = ?1 ORDER BY t_s",
                                   -1, &st, NULL));
    sqlite3_bind_int64(st, 1, id);
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        sim_sample x = {sqlite3_column_double(st, 0), sqlite3_column_double(st, 1), sqlite3_column_int64(st, 2),
                        sqlite3_column_int64(st, 3)};
        if (fn(ud, &x)) break;
    }
    DB_CHECK(d, rc);
    sqlite3_finalize(st);
    return DB_OK;
fail:
    sqlite3_finalize(st);
    snprintf(err, n, "%s", d->err);
    return DB_E_INTERNAL;
}
