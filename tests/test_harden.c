/* test_harden.c: issue 12's reproducers through the kvplan binary, each asserting the exit code,
 * a message that says where and what, and that nothing was written; and concurrent writers that
 * must all keep their runs. Exit codes: docs/failure-model.md. */
#include "tests.h"
#include "../db/db.h"

#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static char out[1 << 16], errtxt[1 << 14];

/* A scenario whose workload is the trace at %s. */
#define HEAD_TRACE "name: t\nmodel: llama-3-8b\nhardware: h100-sxm\nworkload:\n  arrival: {process: trace, trace: %s}\n"

/* Runs kvplan with args; asserts the exit code and that stderr holds `has`. */
static void expect_rc(const char *args, int rc, const char *has)
{
    int got = t_run(args, out, sizeof out, errtxt, sizeof errtxt);
    ck_assert_msg(got == rc, "kvplan %s: exit %d, want %d; stderr: %s", args, got, rc, errtxt);
    if (has) ck_assert_msg(strstr(errtxt, has), "kvplan %s: stderr lacks '%s': %s", args, has, errtxt);
}

/* A file in the test folder (copied out of t_write's rotating slots). */
static const char *put(char *buf, size_t n, const char *name, const char *text)
{
    snprintf(buf, n, "%s", t_write(name, text));
    return buf;
}

static int exists(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0;
}

/* Rows in a table of a database, or -1 when it cannot be read. */
static long rows(const char *path, const char *table)
{
    sqlite3 *h;
    sqlite3_stmt *st;
    char sql[128];
    long n = -1;
    snprintf(sql, sizeof sql, "SELECT count(*) FROM %s", table);
    if (sqlite3_open_v2(path, &h, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK &&
        sqlite3_prepare_v2(h, sql, -1, &st, NULL) == SQLITE_OK) {
        if (sqlite3_step(st) == SQLITE_ROW) n = sqlite3_column_int64(st, 0);
        sqlite3_finalize(st);
    }
    sqlite3_close(h);
    return n;
}

static const char *chat(void)
{
    static char p[600];
    snprintf(p, sizeof p, "%s/chat.yaml", getenv("KVPLAN_LIBRARY"));
    return p;
}

START_TEST(prometheus_cr_at_end_of_file)
{
    /* D1: the last line ends in \r without \n; this looped forever. Now it is read. */
    char f[512], dbp[512], a[1400];
    put(f, sizeof f, "cr.prom", "vllm:gpu_cache_usage_perc 0.5\r");
    put(dbp, sizeof dbp, "cr.db", "");
    unlink(dbp);
    snprintf(a, sizeof a, "import %s --db %s --format csv", f, dbp);
    expect_rc(a, 0, NULL);
    ck_assert_msg(strstr(out, "kv_util_at_scrape,0.5"), "%s", out);
}
END_TEST

START_TEST(deep_nesting_is_an_error)
{
    /* D2: 60000 '[' overflowed the stack. */
    char *y = malloc(60010);
    ck_assert_ptr_nonnull(y);
    memcpy(y, "x: ", 3);
    memset(y + 3, '[', 60000);
    strcpy(y + 60003, "\n");
    char f[512], a[1400];
    put(f, sizeof f, "deep.yaml", y);
    free(y);
    snprintf(a, sizeof a, "memory %s", f);
    expect_rc(a, 65, "deep.yaml:1:67: mappings and lists nest deeper than 64 levels");
    /* Through --set: "workload=" puts the value at col 10; the 65th '[' is at col 74. */
    char set[200] = "workload=";
    memset(set + 9, '[', 100);
    set[109] = 0;
    snprintf(a, sizeof a, "memory %s --set '%s'", chat(), set);
    expect_rc(a, 64, "--set:1:74: workload: mappings and lists nest deeper");
}
END_TEST

START_TEST(recursive_alias_under_extends)
{
    /* D3: exit 139 before. */
    char a[1400], f[512];
    put(f, sizeof f, "b.yaml", "x: &x {y: *x}\n");
    put(f, sizeof f, "a.yaml", "extends: b.yaml\nx: &x {y: *x}\n");
    snprintf(a, sizeof a, "memory %s", f);
    /* a.yaml is read first, and its own line 2 already holds the recursive alias. */
    expect_rc(a, 65, "a.yaml:2:11: alias *x refers to a node that contains it");
    put(f, sizeof f, "a2.yaml", "extends: b.yaml\nx: 1\n");
    snprintf(a, sizeof a, "memory %s", f);
    expect_rc(a, 65, "b.yaml:1:11: alias *x refers to a node that contains it");
}
END_TEST

START_TEST(alias_bomb_under_extends)
{
    /* D4: depth 40 would have taken days to merge; the bound stops it at line 18, col 18
     * (derived in test_errors.c, alias_expansion_is_bounded). */
    char y[4000], a[1400], f[512];
    size_t used = (size_t)snprintf(y, sizeof y, "l0: &l0 [a, b]\n");
    for (int i = 1; i <= 40; i++)
        used += (size_t)snprintf(y + used, sizeof y - used, "l%d: &l%d [*l%d, *l%d]\n", i, i, i - 1, i - 1);
    put(f, sizeof f, "bomb.yaml", y);
    put(f, sizeof f, "bomb-top.yaml", "extends: bomb.yaml\n");
    snprintf(a, sizeof a, "memory %s", f);
    expect_rc(a, 65, "bomb.yaml:18:18: the document expands to more than 1000000 nodes");
}
END_TEST

START_TEST(huge_memory_is_refused_or_saturates)
{
    /* D5: 1e308 TiB was infinity and printed -9223372036854775808 tokens. */
    char a[1400];
    snprintf(a, sizeof a, "memory %s --set 'hardware.memory=1e308 TiB'", chat());
    expect_rc(a, 65, "--set:1:17: hardware.memory: '1e308 TiB' is out of range");
    /* 1e290 TiB is finite: the token count saturates instead of wrapping negative. */
    snprintf(a, sizeof a, "memory %s --set 'hardware.memory=1e290 TiB' --format csv", chat());
    expect_rc(a, 0, NULL);
    ck_assert_msg(!strstr(out, ",-"), "a negative count: %s", out);
    ck_assert_msg(strstr(out, ",9000000000000000,"), "no saturated count: %s", out);
}
END_TEST

START_TEST(trace_workloads)
{
    char tr[512], sc[512], y[1400], a[1400], dbp[512];
    put(dbp, sizeof dbp, "trace.db", "");
    unlink(dbp);
    /* D6: memory on a trace scenario divided by a zero mean length. It now reads the trace:
     * (100 + 20 + 200 + 30) / 2 = 175 tokens; paged, 11 blocks of 16 (176 tokens, 176 x 128 KiB
     * = 23068672 bytes) each. The vLLM engine profile's budget (docs/cost-model.md, "Memory
     * budget and capacity") holds 442440 tokens: 0.9 x (81559 MiB - the 0.43 GiB the driver
     * keeps from CUDA) - 2 x 8030261248 B of weights - 8192 x (4 x 4096 + 3 x 14336) x 2 B -
     * 1024 x 128256 x 10 B of profile-run activations (`vllm serve` runs 1024 sequences on an
     * 80 GB H100, the profile's batch_defaults) - 0.2 GiB of non-torch memory = 57991500070.9 B,
     * / 128 KiB = 442440 tokens, 27652 blocks, which hold floor(27652 / 11) = 2513 sequences;
     * paged capacity is shown in whole blocks, 27652 x 16 = 442432 tokens (what the simulator
     * allocates). */
    put(tr, sizeof tr, "tr.csv", "0.0,100,20\n0.5,200,30\n");
    snprintf(y, sizeof y, HEAD_TRACE, tr);
    put(sc, sizeof sc, "trace.yaml", y);
    snprintf(a, sizeof a, "memory %s --format csv", sc);
    expect_rc(a, 0, NULL);
    ck_assert_msg(!strstr(out, "-9223372036854775808"), "%s", out);
    ck_assert_msg(strstr(out, ",176,23068672,442432,27652,2513,"), "%s", out);
    /* D7: a directory, an empty file and an infinite time, each refused; no run stored. */
    snprintf(y, sizeof y, HEAD_TRACE, "/tmp");
    put(sc, sizeof sc, "trace-dir.yaml", y);
    snprintf(a, sizeof a, "simulate %s --db %s", sc, dbp);
    expect_rc(a, 66, "/tmp: is a directory, not a trace file");
    put(tr, sizeof tr, "empty.csv", "");
    snprintf(y, sizeof y, HEAD_TRACE, tr);
    put(sc, sizeof sc, "trace-empty.yaml", y);
    snprintf(a, sizeof a, "simulate %s --db %s", sc, dbp);
    expect_rc(a, 65, "empty.csv: the trace holds no requests");
    put(tr, sizeof tr, "inf.csv", "0,10,10\ninf,10,10\n");
    snprintf(y, sizeof y, HEAD_TRACE, tr);
    put(sc, sizeof sc, "trace-inf.yaml", y);
    snprintf(a, sizeof a, "simulate %s --db %s", sc, dbp);
    expect_rc(a, 65, "inf.csv:2: expected 'arrival_s,prompt_tokens,output_tokens");
    put(tr, sizeof tr, "junk.csv", "0,10,10xyz\n");
    snprintf(y, sizeof y, HEAD_TRACE, tr);
    put(sc, sizeof sc, "trace-junk.yaml", y);
    snprintf(a, sizeof a, "simulate %s --db %s", sc, dbp);
    expect_rc(a, 65, "junk.csv:1: expected");
    ck_assert_int_eq(rows(dbp, "runs"), 0);
}
END_TEST

START_TEST(sample_interval_is_bounded)
{
    /* D8: 1e-300 s never advanced the clock (hang) and with a database grew 26 MB/s. */
    char a[2000], dbp[512], ts[512];
    put(dbp, sizeof dbp, "si.db", "");
    unlink(dbp);
    put(ts, sizeof ts, "ts.csv", "");
    unlink(ts);
    snprintf(a, sizeof a, "simulate %s --sample-interval 1e-300s --timeseries-out %s --db %s", chat(), ts, dbp);
    expect_rc(a, 64, "--sample-interval must be at least 1 ms");
    ck_assert(!exists(dbp));
    ck_assert(!exists(ts));
}
END_TEST

START_TEST(importers_refuse_nonsense)
{
    /* D9: negative counts and latencies, le="NaN", +Inf counts, a NUL byte. */
    static const struct { const char *name, *text, *msg; } bad[] = {
        {"neg.prom", "vllm:num_preemptions_total -1\n", "neg.prom:1: vllm:num_preemptions_total: '-1' must be a finite number >= 0"},
        {"inf.prom", "vllm:request_success_total +Inf\n", "inf.prom:1: vllm:request_success_total: '+Inf' must be a finite"},
        {"nan.prom", "vllm:e2e_request_latency_seconds_bucket{le=\"NaN\"} 1\n", "nan.prom:1: le=\"NaN\" is not a bucket bound"},
        {"frac.prom", "vllm:gpu_cache_usage_perc 1.5\n", "frac.prom:1: vllm:gpu_cache_usage_perc: '1.5' is a fraction"},
        {"neg.json", "{\"completed\": 10, \"duration\": 5, \"mean_ttft_ms\": -3}", "neg.json: 'mean_ttft_ms' must be >= 0"},
    };
    char f[512], dbp[512], a[1400];
    put(dbp, sizeof dbp, "imp.db", "");
    unlink(dbp);
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        put(f, sizeof f, bad[i].name, bad[i].text);
        snprintf(a, sizeof a, "import %s --db %s", f, dbp);
        expect_rc(a, 65, bad[i].msg);
    }
    /* A NUL byte once ended the text early and silently. */
    put(f, sizeof f, "nul.prom", "");
    FILE *fp = fopen(f, "wb");
    ck_assert_ptr_nonnull(fp);
    fwrite("vllm:num_preemptions_total 1\n\0junk\n", 1, 35, fp);
    fclose(fp);
    snprintf(a, sizeof a, "import %s --db %s", f, dbp);
    expect_rc(a, 65, "nul.prom: byte 30 is NUL");
    ck_assert(!exists(dbp));
}
END_TEST

START_TEST(tiny_bandwidth_is_a_data_error)
{
    /* D10: 1e-300 B/s made every step infinitely long: that is the input's fault (65), not 70. */
    char a[1400], dbp[512];
    put(dbp, sizeof dbp, "bw.db", "");
    unlink(dbp);
    snprintf(a, sizeof a, "simulate %s --set 'hardware.memory_bandwidth=1e-300 B/s' --set workload.requests=5 --db %s",
             chat(), dbp);
    expect_rc(a, 65, "check the hardware's bandwidth and compute figures");
    ck_assert_int_eq(rows(dbp, "runs"), 0);
}
END_TEST

START_TEST(damaged_and_foreign_databases)
{
    char a[1400], dbp[512], o[512];
    put(dbp, sizeof dbp, "bad.db", "");
    unlink(dbp);
    put(o, sizeof o, "merged.db", "");
    unlink(o);
    snprintf(a, sizeof a, "simulate %s --set workload.requests=5 --db %s", chat(), dbp);
    expect_rc(a, 0, NULL);
    /* Overwrite every page after the header page: the tables' roots are gone. */
    FILE *fp = fopen(dbp, "r+b");
    ck_assert_ptr_nonnull(fp);
    fseek(fp, 0, SEEK_END);
    long size = ftell(fp);
    char junk[4096];
    memset(junk, 0xff, sizeof junk);
    for (long pg = 4096; pg + 4096 <= size; pg += 4096) { fseek(fp, pg, SEEK_SET); fwrite(junk, 1, sizeof junk, fp); }
    fclose(fp);
    const char *cmds[] = {"runs --db %s", "show 1 --db %s", "simulate %s --set workload.requests=5 --db %s"};
    for (int i = 0; i < 3; i++) {
        if (i == 2) snprintf(a, sizeof a, cmds[i], chat(), dbp);
        else snprintf(a, sizeof a, cmds[i], dbp);
        expect_rc(a, 65, "the database file is damaged");
    }
    snprintf(a, sizeof a, "merge %s %s", o, dbp);
    expect_rc(a, 65, "the database file is damaged");
    ck_assert(!exists(o));
    /* Another application's SQLite file: refused before the simulation, and left as it was. */
    char f[512];
    put(f, sizeof f, "other.db", "");
    unlink(f);
    sqlite3 *h;
    ck_assert_int_eq(sqlite3_open(f, &h), SQLITE_OK);
    ck_assert_int_eq(sqlite3_exec(h, "CREATE TABLE notes (x)", NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close(h);
    snprintf(a, sizeof a, "simulate %s --set workload.requests=5 --db %s", chat(), f);
    expect_rc(a, 65, "not a kvplan database: it holds another application's tables");
    snprintf(a, sizeof a, "runs --db %s", f);
    expect_rc(a, 65, "not a kvplan database");
    ck_assert_int_eq(rows(f, "runs"), -1);   /* no kvplan table was added */
}
END_TEST

START_TEST(read_commands_create_nothing)
{
    /* D12: runs and merge's inputs created missing databases and exited 0. */
    char a[1400], dbp[512], o[512];
    put(dbp, sizeof dbp, "missing.db", "");
    unlink(dbp);
    put(o, sizeof o, "out.db", "");
    unlink(o);
    snprintf(a, sizeof a, "runs --db %s", dbp);
    expect_rc(a, 66, "missing.db: no database here");
    snprintf(a, sizeof a, "show 1 --db %s", dbp);
    expect_rc(a, 66, "no database here");
    snprintf(a, sizeof a, "compare 1 2 --db %s", dbp);
    expect_rc(a, 66, "no database here");
    snprintf(a, sizeof a, "merge %s %s", o, dbp);
    expect_rc(a, 66, "missing.db: no database here");
    ck_assert(!exists(dbp));
    ck_assert(!exists(o));
}
END_TEST

/* Mounts a small tmpfs at dir (root only, where mounting is allowed); 0 on success. */
static int small_mount(const char *dir, const char *opts)
{
    char a[1400];
    snprintf(a, sizeof a, "mkdir -p %s && mount -t tmpfs -o %s tmpfs %s 2>/dev/null", dir, opts, dir);
    return geteuid() == 0 ? system(a) : -1;
}

START_TEST(full_disk_and_read_only_mount)
{
    /* D10/D11 on real file systems: a full disk is 73 and stores nothing; a read-only mount
     * serves read commands and refuses writers before they work. Needs a tmpfs mount, so it
     * runs as root only where mounting is allowed; elsewhere it says so and passes. */
    char dir[512], dbp[600], a[1400];
    snprintf(dir, sizeof dir, "%s.mnt", t_write("mnt-base", ""));
    if (geteuid() != 0) {
        /* Without root: a read-only file and folder stand in for the mount. */
        char ro[590], b[1400];
        snprintf(ro, sizeof ro, "%s.ro", dir);
        ck_assert_int_eq(mkdir(ro, 0755), 0);
        snprintf(dbp, sizeof dbp, "%s/k.db", ro);
        snprintf(a, sizeof a, "simulate %s --set workload.requests=5 --db %s", chat(), dbp);
        expect_rc(a, 0, NULL);
        ck_assert_int_eq(chmod(dbp, 0444), 0);
        expect_rc(a, 73, "the database file is read-only");
        ck_assert_int_eq(chmod(ro, 0555), 0);
        snprintf(b, sizeof b, "runs --db %s --format csv", dbp);
        expect_rc(b, 0, NULL);
        ck_assert_msg(strstr(out, "\n1,"), "the stored run is not listed: %s", out);
        chmod(ro, 0755);
        return;
    }
    if (small_mount(dir, "size=96k")) { fprintf(stderr, "full_disk_and_read_only_mount: skipped (no tmpfs mount here)\n"); return; }
    snprintf(dbp, sizeof dbp, "%s/k.db", dir);
    snprintf(a, sizeof a, "simulate %s --set workload.requests=5 --db %s", chat(), dbp);
    int first = t_run(a, out, sizeof out, errtxt, sizeof errtxt);
    snprintf(a, sizeof a, "simulate %s --set workload.requests=3000 --requests-out /dev/null --db %s", chat(), dbp);
    int rc = t_run(a, out, sizeof out, errtxt, sizeof errtxt);
    long kept = rows(dbp, "runs");
    snprintf(a, sizeof a, "mount -o remount,ro %s", dir);
    int ro = system(a);
    char b[1400];
    snprintf(b, sizeof b, "runs --db %s", dbp);
    int rrc = ro == 0 ? t_run(b, out, sizeof out, errtxt, sizeof errtxt) : 0;
    snprintf(b, sizeof b, "simulate %s --set workload.requests=5 --db %s", chat(), dbp);
    char werr[1024] = "";
    int wrc = ro == 0 ? t_run(b, out, sizeof out, werr, sizeof werr) : 73;
    snprintf(a, sizeof a, "umount %s", dir);
    ck_assert_int_eq(system(a), 0);
    ck_assert_msg(first == 0 || first == 73, "first run: %d", first);
    ck_assert_msg(rc == 73, "a full disk: exit %d, want 73: %s", rc, errtxt);
    ck_assert_int_eq(kept, first == 0 ? 1 : 0);   /* the failed run left nothing */
    ck_assert_int_eq(rrc, 0);
    ck_assert_msg(wrc == 73, "read-only: exit %d: %s", wrc, werr);
}
END_TEST

/* D13: writers fork and store one run of n rows each at the same moment. The busy handler
 * waits only 1 ms, so writers collide and the retry loop, not the handler, has to keep every run. */
START_TEST(concurrent_writers_keep_every_run)
{
    const char *env = getenv("KVPLAN_HARDEN_ROWS");   /* set by hand to measure 400k-row runs */
    long n = env ? atol(env) : 20000;
    int writers = 16;
    char dbp[512];
    put(dbp, sizeof dbp, "many.db", "");
    unlink(dbp);
    scn_scenario s;
    t_library("llama-3-8b", "h100-sxm", &s);
    db_status st;
    char err[1024];
    /* The file does not exist yet: the writers also race to create its tables. */
    setenv("KVPLAN_DB_BUSY_MS", "1", 0);   /* unless set by hand, to measure with other values */
    pid_t pids[16];
    for (int w = 0; w < writers; w++) {
        pids[w] = fork();
        ck_assert_int_ge(pids[w], 0);
        if (pids[w]) continue;
        sim_request_row *r = calloc((size_t)n, sizeof *r);
        if (!r) _exit(90);
        for (long i = 0; i < n; i++)
            r[i] = (sim_request_row){.id = i, .replica = 0, .arrival = i * 0.01, .prompt = 100, .output = 10,
                                     .queue = 0.001, .ttft = 0.05, .tpot = 0.01, .e2e = 0.15};
        sim_metric_kv m = {"requests", (double)n, SIM_UNIT_COUNT};
        char started[32];
        snprintf(started, sizeof started, "2026-11-30T00:00:%02d.000Z", w);
        db_run_rec rec = {.scenario = &s, .kind = "predicted", .executor = "model", .options_json = "{}", .seed = (unsigned)w,
                          .started = started, .finished = started, .metrics = &m, .n_metrics = 1, .rows = r, .n_rows = n};
        db *c = db_open(dbp, &st, err, sizeof err);
        long id = 0;
        if (c) st = db_run_insert(c, &rec, &id, err, sizeof err);
        if (st != DB_OK) fprintf(stderr, "writer %d: %s\n", w, err);
        db_close(c);
        _exit(st == DB_OK ? 0 : 10 + (int)st);
    }
    int ok = 0;
    for (int w = 0; w < writers; w++) {
        int status;
        ck_assert_int_eq(waitpid(pids[w], &status, 0), pids[w]);
        ok += WIFEXITED(status) && WEXITSTATUS(status) == 0;
    }
    ck_assert_int_eq(ok, writers);
    ck_assert_int_eq(rows(dbp, "runs"), writers);
    ck_assert_int_eq(rows(dbp, "requests"), writers * n);
}
END_TEST

Suite *suite_harden(void)
{
    Suite *s = suite_create("harden");
    TCase *tc = tcase_create("reproducers");
    tcase_add_test(tc, prometheus_cr_at_end_of_file);
    tcase_add_test(tc, deep_nesting_is_an_error);
    tcase_add_test(tc, recursive_alias_under_extends);
    tcase_add_test(tc, alias_bomb_under_extends);
    tcase_add_test(tc, huge_memory_is_refused_or_saturates);
    tcase_add_test(tc, trace_workloads);
    tcase_add_test(tc, sample_interval_is_bounded);
    tcase_add_test(tc, importers_refuse_nonsense);
    tcase_add_test(tc, tiny_bandwidth_is_a_data_error);
    tcase_add_test(tc, damaged_and_foreign_databases);
    tcase_add_test(tc, read_commands_create_nothing);
    tcase_add_test(tc, full_disk_and_read_only_mount);
    /* Each test runs a few short commands; generous for a loaded 2-core machine. */
    tcase_set_timeout(tc, 120);
    suite_add_tcase(s, tc);
    TCase *tw = tcase_create("writers");
    tcase_add_test(tw, concurrent_writers_keep_every_run);
    tcase_set_timeout(tw, 300);
    suite_add_tcase(s, tw);
    return s;
}
