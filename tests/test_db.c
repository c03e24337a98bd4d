/* test_db.c: the store's schema versions, refusals, and all-or-nothing runs. */
#include "tests.h"
#include "../db/db.h"

#include <math.h>
#include <sqlite3.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

extern const char DB_SCHEMA_SQL[];

static const char *fresh(const char *name)
{
    const char *p = t_write(name, "");
    unlink(p);
    return p;
}

static long count(const char *path, const char *sql)
{
    sqlite3 *h;
    sqlite3_stmt *st;
    long n = -1;
    ck_assert_int_eq(sqlite3_open(path, &h), SQLITE_OK);
    if (sqlite3_prepare_v2(h, sql, -1, &st, NULL) == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW) n = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    sqlite3_close(h);
    return n;
}

static db_run_rec record(const scn_scenario *s, const sim_metric_kv *m, int n)
{
    db_run_rec r = {.scenario = s, .kind = "predicted", .executor = "model", .options_json = "{\"kv_layout\":\"paged\"}",
                    .seed = 1, .started = "2026-11-30T00:00:00.000Z", .finished = "2026-11-30T00:00:01.000Z",
                    .metrics = m, .n_metrics = n};
    return r;
}

START_TEST(creates_at_latest_version)
{
    const char *path = fresh("new.db");
    db_status st;
    char err[512];
    db *d = db_open(path, &st, err, sizeof err);
    ck_assert_msg(d != NULL, "%s", err);
    ck_assert_int_eq(db_schema_version(d), DB_SCHEMA_LATEST);
    db_close(d);
    ck_assert_int_eq(count(path, "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name IN "
                                 "('scenarios', 'runs', 'metrics', 'requests', 'timeseries', 'calibrations')"), 6);
    ck_assert_int_eq(count(path, "SELECT count(*) FROM pragma_table_list WHERE strict = 1 AND name = 'runs'"), 1);
}
END_TEST

START_TEST(migrates_an_older_database)
{
    /* Build a version-1 database by hand from the schema's first section, with a run in it. */
    const char *path = fresh("v1.db");
    const char *a = strstr(DB_SCHEMA_SQL, "-- version 1\n"), *b = strstr(DB_SCHEMA_SQL, "-- version 2\n");
    ck_assert(a && b);
    char v1[4096];
    snprintf(v1, sizeof v1, "%.*s", (int)(b - a), a);
    sqlite3 *h;
    ck_assert_int_eq(sqlite3_open(path, &h), SQLITE_OK);
    ck_assert_int_eq(sqlite3_exec(h, v1, NULL, NULL, NULL), SQLITE_OK);
    ck_assert_int_eq(sqlite3_exec(h, "PRAGMA user_version = 1;"
                                     "INSERT INTO scenarios VALUES (1, 'h', 'old', '{}');"
                                     "INSERT INTO runs VALUES (1, 1, 'predicted', 'model', '{}', 1, 'x', 'y', '0.0.1');"
                                     "INSERT INTO metrics VALUES (1, 'requests', 42);", NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close(h);
    db_status st;
    char err[512];
    db *d = db_open(path, &st, err, sizeof err);
    ck_assert_msg(d != NULL, "%s", err);
    ck_assert_int_eq(db_schema_version(d), DB_SCHEMA_LATEST);
    db_run_info r;
    ck_assert_int_eq(db_run_get(d, 1, &r, err, sizeof err), DB_OK);
    ck_assert_str_eq(r.scenario, "old");
    ck_assert(r.requests == 42);
    db_close(d);
    ck_assert_int_eq(count(path, "SELECT count(*) FROM requests"), 0);       /* the v2 table now exists */
    ck_assert_int_eq(count(path, "SELECT count(*) FROM calibrations"), 0);   /* and the v3 one */
}
END_TEST

START_TEST(refuses_newer_and_foreign_files)
{
    const char *path = fresh("future.db");
    sqlite3 *h;
    ck_assert_int_eq(sqlite3_open(path, &h), SQLITE_OK);
    ck_assert_int_eq(sqlite3_exec(h, "PRAGMA user_version = 99", NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close(h);
    db_status st;
    char err[512];
    ck_assert_ptr_null(db_open(path, &st, err, sizeof err));
    ck_assert_int_eq(st, DB_E_DATA);
    ck_assert_msg(strstr(err, "newer than this kvplan"), "%s", err);
    const char *junk = t_write("junk.db", "this is not a database, just some text that is long enough to have a header....");
    ck_assert_ptr_null(db_open(junk, &st, err, sizeof err));
    ck_assert_int_eq(st, DB_E_DATA);
    ck_assert_msg(strstr(err, "not a kvplan database"), "%s", err);
    ck_assert_ptr_null(db_open("/nonexistent-dir/x.db", &st, err, sizeof err));
    ck_assert_int_eq(st, DB_E_CANTOPEN);
}
END_TEST

START_TEST(a_failed_run_leaves_nothing)
{
    scn_scenario s;
    t_library("llama-3-8b", "h100-sxm", &s);
    const char *path = fresh("atomic.db");
    db_status st;
    char err[512];
    db *d = db_open(path, &st, err, sizeof err);
    ck_assert_ptr_nonnull(d);
    sim_metric_kv good[] = {{"requests", 10, SIM_UNIT_COUNT}, {"ttft_p99_s", 0.5, SIM_UNIT_SECONDS}};
    db_run_rec r = record(&s, good, 2);
    long id;
    ck_assert_int_eq(db_run_insert(d, &r, &id, err, sizeof err), DB_OK);
    /* The second metric repeats a name: the insert fails after the scenario, run and first
     * metric rows were written, and all of them must be rolled back. */
    s.seed = 77;   /* a different scenario hash, so a scenario row would be new */
    sim_metric_kv bad[] = {{"requests", 1, SIM_UNIT_COUNT}, {"requests", 2, SIM_UNIT_COUNT}};
    r = record(&s, bad, 2);
    ck_assert_int_eq(db_run_insert(d, &r, &id, err, sizeof err), DB_E_INTERNAL);
    ck_assert_msg(strstr(err, "UNIQUE"), "%s", err);
    db_close(d);
    ck_assert_int_eq(count(path, "SELECT count(*) FROM runs"), 1);
    ck_assert_int_eq(count(path, "SELECT count(*) FROM scenarios"), 1);
    ck_assert_int_eq(count(path, "SELECT count(*) FROM metrics"), 2);
}
END_TEST

START_TEST(nan_metrics_are_null)
{
    scn_scenario s;
    t_library("llama-3-8b", "h100-sxm", &s);
    const char *path = fresh("nan.db");
    db_status st;
    char err[512];
    db *d = db_open(path, &st, err, sizeof err);
    sim_metric_kv m[] = {{"tpot_mean_s", NAN, SIM_UNIT_SECONDS}};
    db_run_rec r = record(&s, m, 1);
    long id;
    ck_assert_int_eq(db_run_insert(d, &r, &id, err, sizeof err), DB_OK);
    db_close(d);
    ck_assert_int_eq(count(path, "SELECT count(*) FROM metrics WHERE value IS NULL"), 1);
    /* The same scenario twice is stored once. */
    d = db_open(path, &st, err, sizeof err);
    ck_assert_int_eq(db_run_insert(d, &r, &id, err, sizeof err), DB_OK);
    db_close(d);
    ck_assert_int_eq(count(path, "SELECT count(*) FROM scenarios"), 1);
    ck_assert_int_eq(count(path, "SELECT count(*) FROM runs"), 2);
}
END_TEST

Suite *suite_db(void)
{
    Suite *su = suite_create("db");
    TCase *tc = tcase_create("store");
    tcase_add_test(tc, creates_at_latest_version);
    tcase_add_test(tc, migrates_an_older_database);
    tcase_add_test(tc, refuses_newer_and_foreign_files);
    tcase_add_test(tc, a_failed_run_leaves_nothing);
    tcase_add_test(tc, nan_metrics_are_null);
    suite_add_tcase(su, tc);
    return su;
}
