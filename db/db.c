/* db.c: opening, migrating and writing the SQLite store (see db.h). Every sqlite3 call that
 * can fail goes through DB_CHECK, which records the statement, function, file and line. */
#include "db.h"

#include <errno.h>
#include <math.h>
#include <sqlite3.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

extern const char DB_SCHEMA_SQL[];   /* db/schema.sql, embedded by the build */
const int DB_SCHEMA_LATEST = 3;

#ifndef KVPLAN_VERSION
#define KVPLAN_VERSION "dev"
#endif

struct db {
    sqlite3 *h;
    int rc;             /* the SQLite result code of the last failure, which says its class */
    char err[512];
};

#define DB_CHECK(d, call)                                                                          \
    do {                                                                                           \
        int rc_ = (call);                                                                          \
        if (rc_ != SQLITE_OK && rc_ != SQLITE_DONE && rc_ != SQLITE_ROW) {                         \
            (d)->rc = rc_;                                                                         \
            snprintf((d)->err, sizeof (d)->err, "sqlite: %s%s (%.160s in %s at %s:%d)", sqlite3_errmsg((d)->h), \
                     hint_for(rc_), #call, __func__, __FILE__, __LINE__);                           \
            goto fail;                                                                             \
        }                                                                                          \
    } while (0)

/* What a failed call means for the user: the class decides the exit code. */
static db_status status_of(int rc)
{
    switch (rc & 0xff) {
    case SQLITE_CORRUPT: case SQLITE_NOTADB: return DB_E_DATA;
    case SQLITE_FULL: case SQLITE_READONLY: case SQLITE_CANTOPEN: case SQLITE_PERM: return DB_E_CANTOPEN;
    case SQLITE_IOERR: return DB_E_IO;
    case SQLITE_BUSY: case SQLITE_LOCKED: return DB_E_BUSY;
    default: return DB_E_INTERNAL;
    }
}

static const char *hint_for(int rc)
{
    switch (rc & 0xff) {
    case SQLITE_CORRUPT: return "; the database file is damaged: restore it from a copy";
    case SQLITE_NOTADB: return "; the file is not an SQLite database";
    case SQLITE_FULL: return "; the disk is full";
    case SQLITE_READONLY: return "; the database or its folder is read-only";
    default: return "";
    }
}

/* The busy handler waits this long for the lock per attempt; the retry loop around each write
 * transaction then backs off and tries again until the deadline. KVPLAN_DB_BUSY_MS and
 * KVPLAN_DB_LOCK_WAIT_S override them (the concurrency test shortens the first to force retries). */
static long env_long(const char *name, long dflt, long lo, long hi)
{
    const char *v = getenv(name);
    char *end;
    long x = v && v[0] ? strtol(v, &end, 10) : dflt;
    return v && v[0] && (*end || x < lo || x > hi) ? dflt : x;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* A seed that differs between processes started together: the pid and the clock's nanoseconds
 * (each taken modulo 2^32, so no conversion can overflow). */
static unsigned jitter_seed(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (unsigned)getpid() * 2654435761u ^ (unsigned)(ts.tv_nsec % 1000000000L);
}

/* Sleeps before retry number `attempt` (0-based): 20 ms doubling to 2 s, with jitter so that
 * writers that collided do not collide again in step. */
static void backoff(int attempt, unsigned *seed)
{
    double base = 0.02 * (double)(1u << (attempt < 7 ? attempt : 7));
    if (base > 2.0) base = 2.0;
    *seed = *seed * 1103515245u + 12345u;
    double s = base * (0.5 + (double)((*seed >> 8) % 1000) / 1000.0);
    struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    nanosleep(&ts, NULL);
}

/* Column text that is never NULL: a NULL column reads as "". */
static const char *col_text(sqlite3_stmt *st, int i)
{
    const char *t = (const char *)sqlite3_column_text(st, i);
    return t ? t : "";
}

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
        if (!sql) { d->rc = SQLITE_ERROR; snprintf(d->err, sizeof d->err, "schema section %d missing", v); goto fail; }
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

/* True when the file holds tables and none of them is kvplan's: another application's database. */
static int foreign_tables(db *d, int version)
{
    sqlite3_stmt *st = NULL;
    int ours = 0, others = 0;
    if (sqlite3_prepare_v2(d->h, "SELECT name FROM sqlite_schema WHERE type = 'table'", -1, &st, NULL) != SQLITE_OK) {
        d->rc = sqlite3_extended_errcode(d->h);
        return -1;
    }
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        const char *t = col_text(st, 0);
        if (!strcmp(t, "runs") || !strcmp(t, "scenarios") || !strcmp(t, "metrics")) ours++;
        else if (strncmp(t, "sqlite_", 7)) others++;
    }
    d->rc = rc;
    sqlite3_finalize(st);
    if (rc != SQLITE_DONE) return -1;
    /* A fresh file has no tables; a kvplan one (version >= 1) has all three of ours. A newer
     * kvplan's file, whatever it holds, is reported as newer. */
    if (version > DB_SCHEMA_LATEST) return others > 0 && ours == 0;
    return version == 0 ? ours + others > 0 : ours < 3;
}

/* The checks both modes share: a database at all, kvplan's, a schema this kvplan knows. */
static int check_ours(db *d, const char *path, int *version, db_status *status, char *err, size_t n)
{
    /* One read transaction, so the version and the tables come from the same snapshot: a writer
     * creating the file may commit between two separate reads. */
    int began = sqlite3_exec(d->h, "BEGIN", NULL, NULL, NULL) == SQLITE_OK;
    int v = db_schema_version(d);
    int rc = v < 0 ? sqlite3_extended_errcode(d->h) : SQLITE_OK;
    int f = v < 0 ? -1 : foreign_tables(d, v);
    if (v >= 0 && f < 0) rc = d->rc;
    char msg[256];
    snprintf(msg, sizeof msg, "%s", sqlite3_errmsg(d->h));   /* before COMMIT replaces it */
    if (began) sqlite3_exec(d->h, "COMMIT", NULL, NULL, NULL);
    if (v < 0 || f < 0) {
        *status = status_of(rc) == DB_E_INTERNAL || status_of(rc) == DB_E_DATA ? DB_E_DATA : status_of(rc);
        snprintf(err, n, "%s: %s (%s%s)", path, *status == DB_E_DATA ? "not a kvplan database" : "cannot read the database",
                 msg, hint_for(rc));
        return -1;
    }
    if (f) {
        *status = DB_E_DATA;
        snprintf(err, n, "%s: not a kvplan database: it holds another application's tables", path);
        return -1;
    }
    if (v > DB_SCHEMA_LATEST) {
        *status = DB_E_DATA;
        snprintf(err, n, "%s: database schema version %d is newer than this kvplan understands (%d); "
                         "use a newer kvplan", path, v, DB_SCHEMA_LATEST);
        return -1;
    }
    *version = v;
    return 0;
}

/* Reads the root pages of every table: a damaged file usually shows here, before any work,
 * rather than after a simulation (a full PRAGMA quick_check would read the whole file on every
 * command). */
static int probe_tables(db *d, const char *path, db_status *status, char *err, size_t n)
{
    int rc = sqlite3_exec(d->h, "SELECT (SELECT max(id) FROM scenarios), (SELECT max(id) FROM runs), "
                                "(SELECT 1 FROM metrics LIMIT 1), (SELECT 1 FROM requests LIMIT 1), "
                                "(SELECT 1 FROM timeseries LIMIT 1), (SELECT max(id) FROM calibrations)", NULL, NULL, NULL);
    if (rc == SQLITE_OK || status_of(rc) == DB_E_BUSY) return 0;
    *status = status_of(rc) == DB_E_INTERNAL ? DB_E_DATA : status_of(rc);
    snprintf(err, n, "%s: %s%s", path, sqlite3_errmsg(d->h), hint_for(rc));
    return -1;
}

static db *open_write_once(const char *path, db_status *status, char *err, size_t n)
{
    db *d = calloc(1, sizeof *d);
    if (!d) { *status = DB_E_INTERNAL; snprintf(err, n, "out of memory"); return NULL; }
    if (sqlite3_open_v2(path, &d->h, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, NULL) != SQLITE_OK) {
        *status = DB_E_CANTOPEN;
        snprintf(err, n, "%s: cannot open database: %s", path, d->h ? sqlite3_errmsg(d->h) : "out of memory");
        goto err;
    }
    /* SQLite falls back to read-only on a write-protected file; a write command must not find
     * that out after its work is done. */
    if (sqlite3_db_readonly(d->h, "main") == 1) {
        *status = DB_E_CANTOPEN;
        snprintf(err, n, "%s: the database file is read-only; kvplan needs to write it (or use --no-db)", path);
        goto err;
    }
    sqlite3_busy_timeout(d->h, (int)env_long("KVPLAN_DB_BUSY_MS", 10000, 1, 3600000));
    int v;
    if (check_ours(d, path, &v, status, err, n)) goto err;
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(d->h, "PRAGMA journal_mode = WAL", -1, &st, NULL);
    if (rc == SQLITE_OK) rc = sqlite3_step(st);
    int wal = rc == SQLITE_ROW && !strcmp(col_text(st, 0), "wal");
    sqlite3_finalize(st);
    if (!wal || sqlite3_exec(d->h, "PRAGMA foreign_keys = ON", NULL, NULL, NULL) != SQLITE_OK) {
        rc = sqlite3_extended_errcode(d->h);
        *status = status_of(rc) == DB_E_INTERNAL ? DB_E_CANTOPEN : status_of(rc);
        snprintf(err, n, "%s: cannot switch the database to WAL mode (its folder must be writable): %s", path,
                 sqlite3_errmsg(d->h));
        goto err;
    }
    if (v < DB_SCHEMA_LATEST) {
        /* Writers that start together on a new file all try to create the tables: one does,
         * the others wait their turn and find nothing left to do. */
        double deadline = now_s() + (double)env_long("KVPLAN_DB_LOCK_WAIT_S", 600, 1, 86400);
        unsigned seed = (unsigned)getpid();
        for (int attempt = 0; migrate(d, v); attempt++) {
            if (status_of(d->rc) != DB_E_BUSY || now_s() > deadline) {
                *status = status_of(d->rc);
                snprintf(err, n, "%s: migrating from schema version %d failed: %s", path, v, d->err);
                goto err;
            }
            backoff(attempt, &seed);
        }
    }
    if (probe_tables(d, path, status, err, n)) goto err;
    /* Take and drop the write lock: a folder where the -wal file cannot be written, or a full
     * disk, shows here, before a simulation spends its time. */
    if (v == DB_SCHEMA_LATEST) {
        /* Without waiting: a lock held by another writer proves nothing either way. */
        sqlite3_busy_timeout(d->h, 0);
        rc = sqlite3_exec(d->h, "BEGIN IMMEDIATE; ROLLBACK;", NULL, NULL, NULL);
        sqlite3_busy_timeout(d->h, (int)env_long("KVPLAN_DB_BUSY_MS", 10000, 1, 3600000));
        if (rc != SQLITE_OK && status_of(rc) != DB_E_BUSY) {
            *status = status_of(rc) == DB_E_INTERNAL ? DB_E_CANTOPEN : status_of(rc);
            snprintf(err, n, "%s: the database cannot be written: %s%s", path, sqlite3_errmsg(d->h), hint_for(rc));
            sqlite3_exec(d->h, "ROLLBACK", NULL, NULL, NULL);
            goto err;
        }
    }
    *status = DB_OK;
    return d;
err:
    db_close(d);
    return NULL;
}

/* True when neither the file nor its folder can be written by this process. */
static bool read_only_place(const char *path)
{
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (slash) { if (slash == dir) slash[1] = 0; else *slash = 0; }
    else snprintf(dir, sizeof dir, ".");
    return access(path, W_OK) != 0 && access(dir, W_OK) != 0;
}

/* "file:PATH?immutable=1" with PATH percent-encoded where a URI needs it (caller frees). */
static char *immutable_uri(const char *path)
{
    size_t len = strlen(path);
    char *u = malloc(3 * len + 32);
    if (!u) return NULL;
    char *o = u + sprintf(u, "file:");
    for (const unsigned char *p = (const unsigned char *)path; *p; p++) {
        if (*p == '%' || *p == '?' || *p == '#' || *p <= ' ' || *p >= 0x7f) o += sprintf(o, "%%%02X", *p);
        else *o++ = (char)*p;
    }
    strcpy(o, "?immutable=1");
    return u;
}

static db *open_read_once(const char *path, db_status *status, char *err, size_t n)
{
    struct stat sb;
    if (stat(path, &sb) != 0) {
        *status = errno == ENOENT ? DB_E_NOINPUT : DB_E_CANTOPEN;
        snprintf(err, n, "%s: no database here (%s); commands that store runs create it", path, strerror(errno));
        return NULL;
    }
    if (S_ISDIR(sb.st_mode)) {
        *status = DB_E_NOINPUT;
        snprintf(err, n, "%s: is a directory, not a database", path);
        return NULL;
    }
    db *d = calloc(1, sizeof *d);
    if (!d) { *status = DB_E_INTERNAL; snprintf(err, n, "out of memory"); return NULL; }
    if (sqlite3_open_v2(path, &d->h, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK) {
        *status = DB_E_CANTOPEN;
        snprintf(err, n, "%s: cannot open database: %s", path, d->h ? sqlite3_errmsg(d->h) : "out of memory");
        goto err;
    }
    sqlite3_busy_timeout(d->h, (int)env_long("KVPLAN_DB_BUSY_MS", 10000, 1, 3600000));
    int v;
    if (db_schema_version(d) < 0 && (sqlite3_extended_errcode(d->h) & 0xff) == SQLITE_READONLY && read_only_place(path)) {
        /* A WAL database whose folder cannot be written has no -shm file to share locks
         * through. Where nobody can write the file (a read-only folder or mount) there is
         * nothing to lock against: read it as immutable. */
        sqlite3_close(d->h);
        d->h = NULL;
        char *uri = immutable_uri(path);
        int rc = uri ? sqlite3_open_v2(uri, &d->h, SQLITE_OPEN_READONLY | SQLITE_OPEN_URI, NULL) : SQLITE_NOMEM;
        free(uri);
        if (rc != SQLITE_OK) {
            *status = DB_E_CANTOPEN;
            snprintf(err, n, "%s: cannot open database: %s", path, d->h ? sqlite3_errmsg(d->h) : "out of memory");
            goto err;
        }
    }
    if (check_ours(d, path, &v, status, err, n)) goto err;
    if (v < DB_SCHEMA_LATEST) {
        /* An older database lacks tables the queries name: migrate it if it may be written. */
        db_close(d);
        d = db_open(path, status, err, n);
        if (!d && *status == DB_E_CANTOPEN)
            snprintf(err + strlen(err), n - strlen(err), " (its schema version %d needs migrating first)", v);
        return d;
    }
    if (probe_tables(d, path, status, err, n)) goto err;
    if (sqlite3_exec(d->h, "PRAGMA foreign_keys = ON", NULL, NULL, NULL) != SQLITE_OK) {
        *status = status_of(sqlite3_extended_errcode(d->h));
        snprintf(err, n, "%s: %s", path, sqlite3_errmsg(d->h));
        goto err;
    }
    *status = DB_OK;
    return d;
err:
    db_close(d);
    return NULL;
}

/* Opening reads the file's header and schema, which a writer creating or migrating the file
 * holds locked for a moment: a busy open is retried like a busy write. */
static db *open_retrying(db *(*once)(const char *, db_status *, char *, size_t), const char *path, db_status *status,
                         char *err, size_t n)
{
    double deadline = now_s() + (double)env_long("KVPLAN_DB_LOCK_WAIT_S", 600, 1, 86400);
    unsigned seed = jitter_seed();
    for (int attempt = 0;; attempt++) {
        db *d = once(path, status, err, n);
        if (d || *status != DB_E_BUSY || now_s() > deadline) return d;
        backoff(attempt, &seed);
    }
}

db *db_open(const char *path, db_status *status, char *err, size_t n)
{
    return open_retrying(open_write_once, path, status, err, n);
}

db *db_open_read(const char *path, db_status *status, char *err, size_t n)
{
    return open_retrying(open_read_once, path, status, err, n);
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

/* Stage: the run's rows go into temporary tables private to this connection. Writing them takes
 * no lock on the database file, however long it lasts. */
static int stage_run(db *d, const db_run_rec *r)
{
    sqlite3_stmt *st = NULL;
    DB_CHECK(d, sqlite3_exec(d->h,
                             "CREATE TEMP TABLE IF NOT EXISTS stage_metrics (name TEXT NOT NULL, value REAL);"
                             "CREATE TEMP TABLE IF NOT EXISTS stage_requests (req_id INTEGER, replica INTEGER, arrival_s REAL, "
                             "prompt_tokens INTEGER, output_tokens INTEGER, cached_tokens INTEGER, queue_s REAL, ttft_s REAL, "
                             "tpot_s REAL, e2e_s REAL, preemptions INTEGER);"
                             "CREATE TEMP TABLE IF NOT EXISTS stage_timeseries (t_s REAL, kv_used REAL, waiting INTEGER, "
                             "running INTEGER);"
                             "BEGIN; DELETE FROM temp.stage_metrics; DELETE FROM temp.stage_requests; "
                             "DELETE FROM temp.stage_timeseries;", NULL, NULL, NULL));
    DB_CHECK(d, sqlite3_prepare_v2(d->h, "INSERT INTO temp.stage_metrics VALUES (?1, ?2)", -1, &st, NULL));
    for (int i = 0; i < r->n_metrics; i++) {
        DB_CHECK(d, sqlite3_bind_text(st, 1, r->metrics[i].name, -1, SQLITE_STATIC));
        DB_CHECK(d, bind_real(st, 2, r->metrics[i].value));
        DB_CHECK(d, sqlite3_step(st));
        DB_CHECK(d, sqlite3_reset(st));
    }
    sqlite3_finalize(st);
    st = NULL;
    if (r->n_rows) {
        DB_CHECK(d, sqlite3_prepare_v2(d->h, "INSERT INTO temp.stage_requests VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, "
                                             "?10, ?11)", -1, &st, NULL));
        for (long i = 0; i < r->n_rows; i++) {
            const sim_request_row *q = &r->rows[i];
            DB_CHECK(d, sqlite3_bind_int64(st, 1, q->id));
            DB_CHECK(d, sqlite3_bind_int(st, 2, q->replica));
            DB_CHECK(d, sqlite3_bind_double(st, 3, q->arrival));
            DB_CHECK(d, sqlite3_bind_int(st, 4, q->prompt));
            DB_CHECK(d, sqlite3_bind_int(st, 5, q->output));
            DB_CHECK(d, sqlite3_bind_int(st, 6, q->cached));
            DB_CHECK(d, sqlite3_bind_double(st, 7, q->queue));
            DB_CHECK(d, sqlite3_bind_double(st, 8, q->ttft));
            DB_CHECK(d, sqlite3_bind_double(st, 9, q->tpot));
            DB_CHECK(d, sqlite3_bind_double(st, 10, q->e2e));
            DB_CHECK(d, sqlite3_bind_int(st, 11, q->preemptions));
            DB_CHECK(d, sqlite3_step(st));
            DB_CHECK(d, sqlite3_reset(st));
        }
        sqlite3_finalize(st);
        st = NULL;
    }
    if (r->n_samples) {
        DB_CHECK(d, sqlite3_prepare_v2(d->h, "INSERT INTO temp.stage_timeseries VALUES (?1, ?2, ?3, ?4)", -1, &st, NULL));
        for (long i = 0; i < r->n_samples; i++) {
            const sim_sample *q = &r->samples[i];
            DB_CHECK(d, sqlite3_bind_double(st, 1, q->t));
            DB_CHECK(d, sqlite3_bind_double(st, 2, q->kv_used));
            DB_CHECK(d, sqlite3_bind_int64(st, 3, q->waiting));
            DB_CHECK(d, sqlite3_bind_int64(st, 4, q->running));
            DB_CHECK(d, sqlite3_step(st));
            DB_CHECK(d, sqlite3_reset(st));
        }
        sqlite3_finalize(st);
        st = NULL;
    }
    DB_CHECK(d, sqlite3_exec(d->h, "COMMIT", NULL, NULL, NULL));
    return 0;
fail:
    sqlite3_finalize(st);
    sqlite3_exec(d->h, "ROLLBACK", NULL, NULL, NULL);
    return -1;
}

/* Commit: one short write transaction copies the staged rows under the new run's id. */
static int commit_run(db *d, const db_run_rec *r, const char *json, const char *hash, long *run_id)
{
    sqlite3_stmt *st = NULL;
    DB_CHECK(d, sqlite3_exec(d->h, "BEGIN IMMEDIATE", NULL, NULL, NULL));
    DB_CHECK(d, sqlite3_prepare_v2(d->h, "INSERT INTO scenarios (hash, name, json) VALUES (?1, ?2, ?3) "
                                         "ON CONFLICT (hash) DO UPDATE SET name = name RETURNING id", -1, &st, NULL));
    DB_CHECK(d, sqlite3_bind_text(st, 1, hash, -1, SQLITE_STATIC));
    DB_CHECK(d, sqlite3_bind_text(st, 2, r->scenario->name, -1, SQLITE_STATIC));
    DB_CHECK(d, sqlite3_bind_text(st, 3, json, -1, SQLITE_STATIC));
    DB_CHECK(d, sqlite3_step(st));
    long scenario_id = (long)sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    st = NULL;

    DB_CHECK(d, sqlite3_prepare_v2(d->h, "INSERT INTO runs (scenario_id, kind, executor, options, seed, started, finished, "
                                         "version) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8) RETURNING id", -1, &st, NULL));
    DB_CHECK(d, sqlite3_bind_int64(st, 1, scenario_id));
    DB_CHECK(d, sqlite3_bind_text(st, 2, r->kind, -1, SQLITE_STATIC));
    DB_CHECK(d, sqlite3_bind_text(st, 3, r->executor, -1, SQLITE_STATIC));
    DB_CHECK(d, sqlite3_bind_text(st, 4, r->options_json, -1, SQLITE_STATIC));
    DB_CHECK(d, sqlite3_bind_int64(st, 5, (sqlite3_int64)r->seed));
    DB_CHECK(d, sqlite3_bind_text(st, 6, r->started, -1, SQLITE_STATIC));
    DB_CHECK(d, sqlite3_bind_text(st, 7, r->finished, -1, SQLITE_STATIC));
    DB_CHECK(d, sqlite3_bind_text(st, 8, KVPLAN_VERSION, -1, SQLITE_STATIC));
    DB_CHECK(d, sqlite3_step(st));
    long id = (long)sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    st = NULL;

    static const char *const COPY[] = {
        "INSERT INTO metrics SELECT ?1, name, value FROM temp.stage_metrics ORDER BY rowid",
        "INSERT INTO requests SELECT ?1, * FROM temp.stage_requests ORDER BY rowid",
        "INSERT INTO timeseries SELECT ?1, * FROM temp.stage_timeseries ORDER BY rowid",
    };
    for (int i = 0; i < 3; i++) {
        DB_CHECK(d, sqlite3_prepare_v2(d->h, COPY[i], -1, &st, NULL));
        DB_CHECK(d, sqlite3_bind_int64(st, 1, id));
        DB_CHECK(d, sqlite3_step(st));
        sqlite3_finalize(st);
        st = NULL;
    }
    DB_CHECK(d, sqlite3_exec(d->h, "COMMIT", NULL, NULL, NULL));
    *run_id = id;
    return 0;
fail:
    sqlite3_finalize(st);
    sqlite3_exec(d->h, "ROLLBACK", NULL, NULL, NULL);
    return -1;
}

db_status db_run_insert(db *d, const db_run_rec *r, long *run_id, char *err, size_t n)
{
    char *json = db_scenario_json(r->scenario);
    char hash[17];
    if (!json) { snprintf(err, n, "out of memory"); return DB_E_INTERNAL; }
    hash_hex(json, hash);
    d->err[0] = 0;
    d->rc = SQLITE_OK;
    db_status st = DB_OK;
    if (stage_run(d, r)) {
        st = status_of(d->rc);
    } else {
        /* A run is never lost to a lock: retry the short commit with backoff until the deadline. */
        double deadline = now_s() + (double)env_long("KVPLAN_DB_LOCK_WAIT_S", 600, 1, 86400);
        unsigned seed = jitter_seed();
        for (int attempt = 0; commit_run(d, r, json, hash, run_id); attempt++) {
            st = status_of(d->rc);
            if (st != DB_E_BUSY || now_s() > deadline) break;
            backoff(attempt, &seed);
            st = DB_OK;
        }
    }
    sqlite3_exec(d->h, "DELETE FROM temp.stage_requests; DELETE FROM temp.stage_timeseries; "
                       "DELETE FROM temp.stage_metrics;", NULL, NULL, NULL);
    free(json);
    if (st != DB_OK) {
        snprintf(err, n, "%s%s", d->err, st == DB_E_BUSY ? "; other writers held the lock past the retry deadline "
                                                            "(KVPLAN_DB_LOCK_WAIT_S)" : "");
        return st;
    }
    return DB_OK;
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
    snprintf(r->scenario, sizeof r->scenario, "%s", col_text(st, 1));
    snprintf(r->kind, sizeof r->kind, "%s", col_text(st, 2));
    snprintf(r->executor, sizeof r->executor, "%s", col_text(st, 3));
    snprintf(r->options, sizeof r->options, "%s", col_text(st, 4));
    r->seed = (unsigned long long)sqlite3_column_int64(st, 5);
    snprintf(r->started, sizeof r->started, "%s", col_text(st, 6));
    snprintf(r->finished, sizeof r->finished, "%s", col_text(st, 7));
    snprintf(r->version, sizeof r->version, "%s", col_text(st, 8));
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
    if (param) DB_CHECK(d, sqlite3_bind_text(st, 1, param, -1, SQLITE_STATIC));
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
    return status_of(d->rc);
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
    DB_CHECK(d, sqlite3_bind_int64(st, 1, id));
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
    return status_of(d->rc);
}

db_status db_run_metrics(db *d, long id, int (*fn)(void *ud, const char *name, double value, int is_null),
                         void *ud, char *err, size_t n)
{
    sqlite3_stmt *st = NULL;
    DB_CHECK(d, sqlite3_prepare_v2(d->h, "SELECT name, value FROM metrics WHERE run_id = ?1 ORDER BY rowid", -1, &st, NULL));
    DB_CHECK(d, sqlite3_bind_int64(st, 1, id));
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        int is_null = sqlite3_column_type(st, 1) == SQLITE_NULL;
        if (fn(ud, col_text(st, 0), is_null ? NAN : sqlite3_column_double(st, 1), is_null)) break;
    }
    DB_CHECK(d, rc);
    sqlite3_finalize(st);
    return DB_OK;
fail:
    sqlite3_finalize(st);
    snprintf(err, n, "%s", d->err);
    return status_of(d->rc);
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
    if (sqlite3_bind_int64(st, 1, id) == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW) {
        const char *t = (const char *)sqlite3_column_text(st, 0);
        size_t len = t ? strlen(t) + 1 : 0;
        out = len ? malloc(len) : NULL;
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
    DB_CHECK(d, sqlite3_bind_text(st, 1, c->name, -1, SQLITE_STATIC));
    DB_CHECK(d, sqlite3_bind_text(st, 2, c->base, -1, SQLITE_STATIC));
    DB_CHECK(d, sqlite3_bind_text(st, 3, c->backend, -1, SQLITE_STATIC));
    DB_CHECK(d, sqlite3_bind_text(st, 4, c->host, -1, SQLITE_STATIC));
    DB_CHECK(d, sqlite3_bind_text(st, 5, c->created, -1, SQLITE_STATIC));
    DB_CHECK(d, sqlite3_bind_text(st, 6, c->source, -1, SQLITE_STATIC));
    DB_CHECK(d, sqlite3_bind_text(st, 7, c->fit_json, -1, SQLITE_STATIC));
    DB_CHECK(d, sqlite3_bind_text(st, 8, c->points_json, -1, SQLITE_STATIC));
    DB_CHECK(d, bind_real(st, 9, c->rms_log_error));
    DB_CHECK(d, bind_real(st, 10, c->median_abs_error));
    DB_CHECK(d, sqlite3_step(st));
    *id = (long)sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    return DB_OK;
fail:
    sqlite3_finalize(st);
    snprintf(err, n, "%s", d->err);
    return status_of(d->rc);
}

char *db_calibration_latest(db *d, const char *backend, const char *host, const char *base, long *id)
{
    sqlite3_stmt *st = NULL;
    char *out = NULL;
    if (sqlite3_prepare_v2(d->h, "SELECT id, fit FROM calibrations WHERE backend = ?1 AND host = ?2 AND base = ?3 "
                                 "ORDER BY id DESC LIMIT 1", -1, &st, NULL) != SQLITE_OK)
        return NULL;
    if (sqlite3_bind_text(st, 1, backend, -1, SQLITE_STATIC) == SQLITE_OK &&
        sqlite3_bind_text(st, 2, host, -1, SQLITE_STATIC) == SQLITE_OK &&
        sqlite3_bind_text(st, 3, base, -1, SQLITE_STATIC) == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW) {
        *id = (long)sqlite3_column_int64(st, 0);
        const char *t = (const char *)sqlite3_column_text(st, 1);
        size_t len = t ? strlen(t) + 1 : 0;
        out = len ? malloc(len) : NULL;
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
    int rc = sqlite3_bind_text(st, 1, hash, -1, SQLITE_STATIC);
    if (rc == SQLITE_OK) rc = sqlite3_bind_text(st, 2, kind, -1, SQLITE_STATIC);
    if (rc == SQLITE_OK) rc = sqlite3_bind_text(st, 3, options_json, -1, SQLITE_STATIC);
    if (rc == SQLITE_OK) rc = sqlite3_bind_int64(st, 4, (sqlite3_int64)seed);
    if (rc == SQLITE_OK) rc = sqlite3_step(st);
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
    /* Read-only: a missing input is an error, never created; an older shard is migrated first
     * when it can be written. */
    db *src = db_open_read(path, &st, err, n);
    if (!src) return st;
    db_close(src);
    sqlite3_stmt *q = NULL, *ins = NULL;
    *copied = 0;
    d->err[0] = 0;
    char *sql = sqlite3_mprintf("ATTACH DATABASE %Q AS src", path);
    int rc = sql ? sqlite3_exec(d->h, sql, NULL, NULL, NULL) : SQLITE_NOMEM;
    sqlite3_free(sql);
    if (rc != SQLITE_OK) { snprintf(err, n, "%s: cannot attach: %s", path, sqlite3_errmsg(d->h)); return status_of(rc) == DB_E_INTERNAL ? DB_E_CANTOPEN : status_of(rc); }
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
        for (int i = 1; i <= 8; i++) DB_CHECK(d, sqlite3_bind_value(ins, i, sqlite3_column_value(q, i)));
        int r2 = sqlite3_step(ins);
        DB_CHECK(d, r2);
        if (r2 == SQLITE_ROW) {
            char map[128];
            snprintf(map, sizeof map, "INSERT INTO run_map VALUES (%lld, %lld)", (long long)sqlite3_column_int64(q, 0),
                     (long long)sqlite3_column_int64(ins, 0));
            DB_CHECK(d, sqlite3_exec(d->h, map, NULL, NULL, NULL));
            (*copied)++;
        }
        DB_CHECK(d, sqlite3_reset(ins));
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
    return status_of(d->rc);
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
    DB_CHECK(d, sqlite3_bind_int64(st, 1, id));
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
    return status_of(d->rc);
}
