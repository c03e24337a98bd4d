/* test_cli_sim.c: `kvplan simulate`, `runs` and `show` end to end, with the database. */
#include "tests.h"

#include <jansson.h>
#include <stdarg.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char out[1 << 16], err[1 << 14];

static const char *small(void)
{
    return t_write("small.yaml", "name: small\nmodel: llama-3-8b\nhardware: h100-sxm\noptions: {kv_layout: paged}\n"
                                 "workload:\n  requests: 200\n  arrival: {process: poisson, rate: 5/s}\n"
                                 "  prompt_tokens: {dist: uniform, min: 100, max: 900}\n  output_tokens: 50\n");
}

static int run(const char *fmt, ...)
{
    char args[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(args, sizeof args, fmt, ap);
    va_end(ap);
    return t_run(args, out, sizeof out, err, sizeof err);
}

static long lines(const char *path)
{
    FILE *f = fopen(path, "r");
    long n = 0;
    int c;
    while (f && (c = fgetc(f)) != EOF) n += c == '\n';
    if (f) fclose(f);
    return n;
}

START_TEST(simulate_stores_and_shows)
{
    char sc[600], db[600], req[700], ts[700];
    snprintf(sc, sizeof sc, "%s", small());
    snprintf(db, sizeof db, "%s", t_write("cli.db", ""));
    unlink(db);
    snprintf(req, sizeof req, "%s.req.csv", db);
    snprintf(ts, sizeof ts, "%s.ts.csv", db);
    ck_assert_int_eq(run("simulate %s --db %s --requests-out %s --timeseries-out %s --format json", sc, db, req, ts), 0);
    json_t *root = json_loads(out, 0, NULL);
    ck_assert_ptr_nonnull(root);
    ck_assert_int_eq(json_integer_value(json_object_get(json_object_get(root, "throughput"), "requests")), 200);
    json_int_t id = json_integer_value(json_object_get(json_object_get(root, "run"), "run_id"));
    ck_assert_int_eq(id, 1);
    json_decref(root);
    ck_assert_int_eq(lines(req), 201);                  /* header + one row per request */
    ck_assert_int_gt(lines(ts), 10);
    ck_assert_int_eq(run("runs --db %s --format csv", db), 0);
    ck_assert_msg(strstr(out, "\n1,") && strstr(out, ",small,predicted,model,"), "%s", out);
    ck_assert_int_eq(run("show 1 --db %s", db), 0);
    ck_assert_msg(strstr(out, "ttft_p99_s") && strstr(out, "throughput_req_per_s"), "%s", out);
    ck_assert_int_eq(run("show 99 --db %s", db), 65);
    ck_assert_msg(strstr(err, "no run 99"), "%s", err);
    /* Per-request rows were stored too. */
    sqlite3 *h;
    sqlite3_stmt *st;
    ck_assert_int_eq(sqlite3_open(db, &h), SQLITE_OK);
    ck_assert_int_eq(sqlite3_prepare_v2(h, "SELECT count(*) FROM requests WHERE run_id = 1", -1, &st, NULL), SQLITE_OK);
    ck_assert_int_eq(sqlite3_step(st), SQLITE_ROW);
    ck_assert_int_eq(sqlite3_column_int(st, 0), 200);
    sqlite3_finalize(st);
    sqlite3_close(h);
    /* Same seed, same numbers: the latency CSV of two runs is identical. */
    ck_assert_int_eq(run("simulate %s --no-db --format csv", sc), 0);
    static char first[sizeof out];
    memcpy(first, out, sizeof out);
    ck_assert_int_eq(run("simulate %s --no-db --format csv", sc), 0);
    ck_assert_str_eq(first, out);
    ck_assert_msg(!strncmp(out, "quantity,count,mean_s,p50_s,", 28), "%s", out);
}
END_TEST

START_TEST(concurrent_writers_share_one_database)
{
    char sc[600], db[600];
    snprintf(sc, sizeof sc, "%s", small());
    snprintf(db, sizeof db, "%s", t_write("shared.db", ""));
    unlink(db);
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "for i in 1 2 3 4; do %s simulate %s --db %s --seed $i --format csv >/dev/null & done; wait",
             getenv("KVPLAN_BIN"), sc, db);
    ck_assert_int_eq(system(cmd), 0);
    ck_assert_int_eq(run("runs --db %s --format csv", db), 0);
    int rows = 0;
    for (const char *p = out; (p = strchr(p, '\n')); p++) rows++;
    ck_assert_int_eq(rows, 5);   /* header + 4 runs */
}
END_TEST

START_TEST(an_interrupted_run_leaves_the_database_as_it_was)
{
    char sc[600], big[600], db[600];
    snprintf(sc, sizeof sc, "%s", small());
    snprintf(big, sizeof big, "%s", t_write("big.yaml", "model: llama-3-8b\nhardware: h100-sxm\noptions: {kv_layout: paged}\n"
                                                        "workload:\n  requests: 3000000\n  arrival: {process: poisson, rate: 20/s}\n"
                                                        "  prompt_tokens: 800\n  output_tokens: 250\n"));
    snprintf(db, sizeof db, "%s", t_write("kill.db", ""));
    unlink(db);
    ck_assert_int_eq(run("simulate %s --db %s --format csv", sc, db), 0);
    /* Kill the long run at several points; whatever moment it dies, the stored runs are whole. */
    for (int i = 0; i < 3; i++) {
        char cmd[2048];
        snprintf(cmd, sizeof cmd, "timeout -s KILL 0.%d %s simulate %s --db %s --requests-out /dev/null >/dev/null 2>&1",
                 3 + 3 * i, getenv("KVPLAN_BIN"), big, db);
        int rc = system(cmd);
        (void)rc;
    }
    sqlite3 *h;
    sqlite3_stmt *st;
    ck_assert_int_eq(sqlite3_open(db, &h), SQLITE_OK);
    ck_assert_int_eq(sqlite3_prepare_v2(h, "SELECT (SELECT count(*) FROM runs), (SELECT count(*) FROM metrics), "
                                           "(SELECT count(*) FROM requests), (SELECT integrity_check FROM pragma_integrity_check)",
                                        -1, &st, NULL), SQLITE_OK);
    ck_assert_int_eq(sqlite3_step(st), SQLITE_ROW);
    ck_assert_int_eq(sqlite3_column_int(st, 0), 1);
    int metrics = sqlite3_column_int(st, 1);
    ck_assert_int_gt(metrics, 40);
    ck_assert_int_eq(sqlite3_column_int(st, 2), 0);
    ck_assert_str_eq((const char *)sqlite3_column_text(st, 3), "ok");
    sqlite3_finalize(st);
    sqlite3_close(h);
}
END_TEST

START_TEST(simulate_failures)
{
    char sc[600];
    snprintf(sc, sizeof sc, "%s", small());
    ck_assert_int_eq(run("simulate %s --db /nonexistent-dir/x.db", sc), 73);
    ck_assert_msg(strstr(err, "cannot open database"), "%s", err);
    ck_assert_int_eq(run("simulate %s --no-db --set options.kv_layout=contiguous --set options.prefix_cache=on", sc), 65);
    ck_assert_msg(strstr(err, "needs the paged layout"), "%s", err);
    ck_assert_int_eq(run("simulate %s --no-db --set 'workload={arrival: {process: trace, trace: /nonexistent.csv}}'", sc), 66);
    ck_assert_int_eq(run("simulate %s --no-db --set model=llama-3-70b --set hardware=rtx-4090", sc), 65);
    ck_assert_msg(strstr(err, "does not fit"), "%s", err);
    /* Located at the field a user would change: tensor_parallel's value on line 4 starts at
     * column 31 ("deployment: {tensor_parallel: " is 30 characters). Llama-3-70B's 131 GiB of
     * bf16 weights cannot fit one 80 GB GPU. */
    char nf[600], want[700];
    snprintf(nf, sizeof nf, "%s", t_write("nofit.yaml", "name: nofit\nmodel: llama-3-70b\nhardware: h100-sxm\n"
                                          "deployment: {tensor_parallel: 1}\nworkload:\n  requests: 10\n"
                                          "  arrival: {process: poisson, rate: 1/s}\n  prompt_tokens: 512\n  output_tokens: 64\n"));
    ck_assert_int_eq(run("simulate %s --no-db", nf), 65);
    snprintf(want, sizeof want, "%s:4:31: deployment.tensor_parallel: the model does not fit at tensor_parallel 1 on h100-sxm:",
             nf);
    ck_assert_msg(strstr(err, want), "want '%s' in: %s", want, err);
    /* A tensor_parallel list's first value is what ran (plan_first): located at the list, not at
     * the deployment's 4 (line 5's value starts at column 29: "options: {tensor_parallel: "). */
    char nfl[600];
    snprintf(nfl, sizeof nfl, "%s", t_write("nofit-list.yaml", "name: nofit\nmodel: llama-3-70b\nhardware: h100-sxm\n"
                                           "deployment: {tensor_parallel: 4}\noptions: {tensor_parallel: [1, 4]}\n"
                                           "workload:\n  requests: 10\n  arrival: {process: poisson, rate: 1/s}\n"
                                           "  prompt_tokens: 512\n  output_tokens: 64\n"));
    ck_assert_int_eq(run("simulate %s --no-db", nfl), 65);
    snprintf(want, sizeof want, "%s:5:", nfl);
    ck_assert_msg(strstr(err, want) && strstr(err, "options.tensor_parallel: the model does not fit at tensor_parallel 1"),
                  "%s", err);
    /* What is missing, as a size (review9: "leave -62.xx GiB for the KV cache"). */
    ck_assert_msg(strstr(err, "runtime need ") && strstr(err, "leaving none for the KV cache") && !strstr(err, " -"),
                  "%s", err);
    ck_assert(out[0] == 0);
    /* A field a --set gave is blamed on the flag (its value starts at column 28), not on the
     * file's line it overrode (rev12d). */
    ck_assert_int_eq(run("simulate %s --no-db --set deployment.tensor_parallel=1", nf), 65);
    ck_assert_msg(strstr(err, "--set:1:28: deployment.tensor_parallel: the model does not fit"), "%s", err);
    /* capacity on the same infeasible deployment: not an empty table with exit 0, but the
     * reason simulate gives and its data-error exit code. */
    ck_assert_int_eq(run("capacity %s --no-db --set model=llama-3-70b --set hardware=rtx-4090 "
                         "--set deployment.tensor_parallel=1", sc), 65);
    ck_assert_msg(strstr(err, "no candidate can run") && strstr(err, "does not fit: weights"), "%s", err);
    ck_assert_msg(strstr(err, "GiB"), "%s", err);
    /* Under TensorRT-LLM's free-after-weights budget "usable" is 0: the reason sets the need
     * against the memory CUDA reports (review9: "exceed the 0.0 GiB usable per GPU"). */
    ck_assert_int_eq(run("capacity %s --no-db --set model=llama-3-70b --set hardware=rtx-4090 "
                         "--set deployment.tensor_parallel=1 --set engine=trtllm", sc), 65);
    ck_assert_msg(strstr(err, "GiB that CUDA reports per GPU") && !strstr(err, "0.0 GiB usable"), "%s", err);
    ck_assert_int_eq(run("simulate %s --no-db --requests-out /nonexistent-dir/r.csv", sc), 73);
    ck_assert_int_eq(run("simulate %s --db x.db --no-db", sc), 64);
    ck_assert_int_eq(run("simulate %s --seed", sc), 64);
    ck_assert(out[0] == 0);
}
END_TEST

/* plan when every candidate is skipped (Llama-3-70B's 131 GiB of bf16 weights on one 80 GB
 * H100; the contiguous + prefix-cache pairs are skipped before that): no recommendation can be
 * made, so it is a data error as in `capacity` and `simulate` (exit 65, each candidate's reason
 * on stderr, nothing on stdout) and the database gets no run. */
START_TEST(plan_with_every_candidate_skipped_fails)
{
    char sc[600], db[600];
    snprintf(sc, sizeof sc, "%s", t_write("plan-nofit.yaml", "name: plan-nofit\nmodel: llama-3-70b\nhardware: h100-sxm\n"
                                          "deployment: {tensor_parallel: 1}\nworkload:\n  requests: 20\n"
                                          "  arrival: {process: poisson, rate: 1/s}\n  prompt_tokens: 512\n"
                                          "  output_tokens: 64\n"
                                          "options: {kv_layout: [contiguous, paged], prefix_cache: [off, on]}\n"));
    snprintf(db, sizeof db, "%s", t_write("plan-nofit.db", ""));
    unlink(db);
    ck_assert_int_eq(run("plan %s --db %s", sc, db), 65);
    ck_assert_msg(strstr(err, "no candidate can run: all 4 were skipped") && strstr(err, "does not fit: weights") &&
                      strstr(err, "needs the paged layout"),
                  "%s", err);
    ck_assert_msg(out[0] == 0, "%s", out);
    sqlite3 *h;
    sqlite3_stmt *st;
    ck_assert_int_eq(sqlite3_open(db, &h), SQLITE_OK);
    ck_assert_int_eq(sqlite3_prepare_v2(h, "SELECT count(*) FROM runs", -1, &st, NULL), SQLITE_OK);
    ck_assert_int_eq(sqlite3_step(st), SQLITE_ROW);
    ck_assert_int_eq(sqlite3_column_int(st, 0), 0);
    sqlite3_finalize(st);
    sqlite3_close(h);
    /* sweep on the same option space: every candidate skipped, so no curve: exit 65 with the
     * reasons, nothing on stdout (review9: it printed an empty table and exited 0). */
    ck_assert_int_eq(run("sweep %s --no-db --points 2", sc), 65);
    ck_assert_msg(strstr(err, "no candidate can run: all 4 were skipped") && strstr(err, "does not fit: weights"), "%s",
                  err);
    ck_assert_msg(out[0] == 0, "%s", out);
    /* The same at TP 2, where it fits: a plan, exit 0. */
    ck_assert_int_eq(run("plan %s --no-db --seeds 1 --set deployment.tensor_parallel=2", sc), 0);
    ck_assert_msg(strstr(out, "Recommendation"), "%s", out);
}
END_TEST

/* capacity on a workload with no rate to scale (closed loop, offline) is bad input: the error is
 * located at the workload's arrival process (file:line:col, as loader errors are) and exits 65. */
START_TEST(capacity_without_a_rate_is_located)
{
    const char *kinds[] = {"{process: closed, concurrency: 8}", "{process: offline}"};
    for (int k = 0; k < 2; k++) {
        char body[600], sc[600], want[700];
        /* The arrival sits on line 6, its process value ("closed", "offline") at column 22 (1-based). */
        snprintf(body, sizeof body, "name: nr\nmodel: llama-3-8b\nhardware: h100-sxm\nworkload:\n  requests: 64\n"
                 "  arrival: %s\n  prompt_tokens: {dist: fixed, value: 100}\n  output_tokens: {dist: fixed, value: 10}\n",
                 kinds[k]);
        snprintf(sc, sizeof sc, "%s", t_write(k ? "nr-offline.yaml" : "nr-closed.yaml", body));
        ck_assert_int_eq(run("capacity %s --no-db", sc), 65);
        snprintf(want, sizeof want, "%s:6:22: workload.arrival.process: capacity scales the arrival rate", sc);
        ck_assert_msg(strstr(err, want), "want '%s' in: %s", want, err);
        ck_assert_msg(strstr(err, k ? "an offline workload" : "a closed-loop workload"), "%s", err);
        ck_assert(out[0] == 0);
    }
    /* Given by --set, the process is located in that --set: the value "offline" of
     * "workload.arrival.process=offline" starts at column 26 (25 characters before it); a --set
     * of the parent object is located there too (its value at column 18), the last --set winning. */
    char sc[600], want[700];
    snprintf(sc, sizeof sc, "%s", t_write("nr-rate.yaml", "name: nr\nmodel: llama-3-8b\nhardware: h100-sxm\n"
                                          "workload:\n  requests: 64\n  arrival: {process: poisson, rate: 2/s}\n"
                                          "  prompt_tokens: {dist: fixed, value: 100}\n  output_tokens: {dist: fixed, value: 10}\n"));
    ck_assert_int_eq(run("capacity %s --no-db --set workload.arrival.process=offline", sc), 65);
    snprintf(want, sizeof want, "--set:1:26: workload.arrival.process: capacity scales");
    ck_assert_msg(strstr(err, want), "want '%s' in: %s", want, err);
    ck_assert_int_eq(run("capacity %s --no-db --set workload.arrival.process=offline "
                         "--set 'workload.arrival={process: closed, concurrency: 4}'", sc), 65);
    ck_assert_msg(strstr(err, "--set:1:18: workload.arrival.process:") && strstr(err, "a closed-loop workload"), "%s", err);
    ck_assert(out[0] == 0);
}
END_TEST

/* A plan trace asked for (KVPLAN_PLAN_TRACE) but impossible to open is said on stderr; the plan
 * itself still runs and succeeds. */
START_TEST(plan_trace_unwritable_is_said)
{
    setenv("KVPLAN_PLAN_TRACE", "/nonexistent-dir/trace.tsv", 1);
    char sc[600];
    snprintf(sc, sizeof sc, "%s/../scenarios/tiny-cpu.yaml", getenv("KVPLAN_TESTS"));
    int rc = run("plan %s --no-db --no-rules --seeds 1 --format json", sc);
    unsetenv("KVPLAN_PLAN_TRACE");
    ck_assert_int_eq(rc, 0);
    ck_assert_msg(strstr(err, "KVPLAN_PLAN_TRACE=/nonexistent-dir/trace.tsv") && strstr(err, "no trace written"), "%s", err);
    ck_assert(strstr(out, "\"recommendation\""));
}
END_TEST

/* --per-step turns the fast-forward off; the figures must not change (docs/simulator.md, Fast-forward).
 * Long outputs at a steady rate make most steps fast-forwardable, and the prefix cache, replicas
 * and a CSV of every request cover the paths the fast-forward carries. */
START_TEST(per_step_prints_the_same_run)
{
    char sc[600], a[700], b[700];
    snprintf(sc, sizeof sc, "%s",
             t_write("ff.yaml", "name: ff\nmodel: llama-3-8b\nhardware: h100-sxm\n"
                                "options: {kv_layout: paged, prefix_cache: on}\n"
                                "workload:\n  requests: 300\n  arrival: {process: poisson, rate: 8/s}\n"
                                "  prompt_tokens: {dist: uniform, min: 100, max: 900}\n"
                                "  output_tokens: {dist: uniform, min: 50, max: 400}\n"
                                "  shared_prefix: {tokens: 256, groups: 4, share: 0.8}\n"));
    snprintf(a, sizeof a, "%s.ff.csv", sc);
    snprintf(b, sizeof b, "%s.ps.csv", sc);
    ck_assert_int_eq(run("simulate %s --no-db --format json --requests-out %s", sc, a), 0);
    static char fast[sizeof out];
    memcpy(fast, out, sizeof out);
    ck_assert_msg(strstr(fast, "\"throughput\""), "%s", fast);
    ck_assert_int_eq(run("simulate %s --no-db --format json --per-step --requests-out %s", sc, b), 0);
    ck_assert_str_eq(out, fast);
    char cmd[1600];
    snprintf(cmd, sizeof cmd, "cmp -s %s %s", a, b);
    ck_assert_int_eq(system(cmd), 0);
    ck_assert_int_eq(lines(a), 301);
    /* Only simulate has it. */
    ck_assert_int_eq(run("run %s --no-db --per-step", sc), 64);
    ck_assert_msg(strstr(err, "unknown option '--per-step'"), "%s", err);
}
END_TEST

/* `simulate`, `cost` and `memory` run the first value of every option list, as their help says,
 * deployment values, hardware, engine and weight format included (plan_first): a scenario that
 * lists them runs exactly as one that states those first values outright (once, these lists
 * were silently ignored, and the run used the scenario's own hardware, engine and TP). */
#define FIRST_WL "workload:\n  requests: 60\n  arrival: {process: poisson, rate: 4/s}\n  prompt_tokens: 400\n" \
                 "  output_tokens: 40\n"
START_TEST(simulate_runs_the_first_value_of_every_option_list)
{
    char lists[600], plain[600], awq[600];
    snprintf(lists, sizeof lists, "%s", t_write("first-lists.yaml",
             "name: l\nmodel: llama-3-8b\nhardware: h100-sxm\noptions: {tensor_parallel: [2, 1], "
             "hardware: [a100-80g, h100-sxm], engine: [sglang, vllm], max_num_seqs: [64, 256]}\n" FIRST_WL));
    snprintf(plain, sizeof plain, "%s", t_write("first-plain.yaml",
             "name: l\nmodel: llama-3-8b\nhardware: a100-80g\nengine: sglang\n"
             "deployment: {tensor_parallel: 2, max_num_seqs: 64}\n" FIRST_WL));
    ck_assert_int_eq(run("simulate %s --no-db --format json", lists), 0);
    static char first[sizeof out];
    memcpy(first, out, sizeof out);
    ck_assert_msg(strstr(first, "\"hardware\": \"a100-80g\"") && strstr(first, "\"engine\": \"sglang\"") &&
                  strstr(first, "\"tensor_parallel\": 2,"), "%s", first);
    ck_assert_int_eq(run("simulate %s --no-db --format json", plain), 0);
    /* Everything up to the notes is the same; the list's run also notes which lists it read. */
    const char *na = strstr(first, "\"notes\""), *nb = strstr(out, "\"notes\"");
    ck_assert_msg(na && nb && na - first == nb - out && !memcmp(first, out, (size_t)(na - first)), "%s\n---\n%s", first, out);
    ck_assert_msg(strstr(first, "Ran the first value of options tensor_parallel, max_num_seqs, hardware, engine"), "%s", first);
    ck_assert_msg(!strstr(out, "Ran the first value"), "%s", out);
    /* A weight format list: its first format, in the report and in the cost model's step. */
    snprintf(awq, sizeof awq, "%s", t_write("first-awq.yaml",
             "name: l\nmodel: llama-3-8b\nhardware: h100-sxm\noptions: {weight_dtype: [awq, bf16]}\n" FIRST_WL));
    ck_assert_int_eq(run("simulate %s --no-db --format json", awq), 0);
    ck_assert_msg(strstr(out, "\"weights\": \"awq"), "%s", out);
    ck_assert_int_eq(run("cost %s --format json", awq), 0);
    ck_assert_msg(strstr(out, "\"weight_format\": \"awq"), "%s", out);
    ck_assert_int_eq(run("cost %s --format json", lists), 0);
    ck_assert_msg(strstr(out, "\"tensor_parallel\": 2,") && strstr(out, "\"hardware\": \"a100-80g\""), "%s", out);
}
END_TEST

Suite *suite_cli_sim(void)
{
    Suite *su = suite_create("cli_sim");
    TCase *tc = tcase_create("simulate");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, simulate_stores_and_shows);
    tcase_add_test(tc, simulate_runs_the_first_value_of_every_option_list);
    tcase_add_test(tc, concurrent_writers_share_one_database);
    tcase_add_test(tc, an_interrupted_run_leaves_the_database_as_it_was);
    tcase_add_test(tc, simulate_failures);
    tcase_add_test(tc, capacity_without_a_rate_is_located);
    tcase_add_test(tc, plan_with_every_candidate_skipped_fails);
    tcase_add_test(tc, plan_trace_unwritable_is_said);
    tcase_add_test(tc, per_step_prints_the_same_run);
    suite_add_tcase(su, tc);
    return su;
}

START_TEST(report_renders_in_chromium)
{
    char db[600], html[700], args[4096];
    snprintf(db, sizeof db, "%s", t_write("report.db", ""));
    unlink(db);
    snprintf(html, sizeof html, "%s.html", db);
    char sc[800];
    snprintf(sc, sizeof sc, "%s/tiny-cpu.yaml --set workload.requests=20", getenv("KVPLAN_LIBRARY"));
    snprintf(args, sizeof args, "simulate %s --db %s --timeseries-out /dev/null --format csv", sc, db);
    ck_assert_int_eq(t_run(args, out, sizeof out, err, sizeof err), 0);
    snprintf(args, sizeof args, "run %s --db %s --format csv", sc, db);
    ck_assert_int_eq(t_run(args, out, sizeof out, err, sizeof err), 0);
    snprintf(args, sizeof args, "report %s --db %s --out %s", sc, db, html);
    int rc = t_run(args, out, sizeof out, err, sizeof err);
    char probe[900];
    snprintf(probe, sizeof probe, "%s/../node_modules/vega-embed/build/vega-embed.min.js", getenv("KVPLAN_LIBRARY"));
    if (access(probe, R_OK) != 0) {
        /* Without the chart libraries (npm unreachable at setup) the HTML report is refused,
         * plainly, with exit 69; the data formats below still work. */
        ck_assert_int_eq(rc, 69);
        ck_assert_msg(strstr(err, "chart libraries") && strstr(err, "make setup"), "%s", err);
        goto data_formats;
    }
    ck_assert_int_eq(rc, 0);
    ck_assert_msg(strstr(out, "1 predicted runs") && strstr(out, "4 predicted/measured comparisons"), "%s", out);
    /* The page draws its five charts (load curves among them) with no network: Chromium runs its scripts and we read the
     * DOM it ends with. */
    char cmd[2048];
    size_t cap = (size_t)8 << 20;   /* the DOM carries the inlined libraries: about 1 MB */
    char *dom = malloc(cap);
    ck_assert_ptr_nonnull(dom);
    snprintf(cmd, sizeof cmd, "timeout 120 chromium --headless --no-sandbox --disable-gpu --virtual-time-budget=10000 "
                              "--dump-dom file://%s 2>/dev/null", html);
    FILE *p = popen(cmd, "r");
    ck_assert_ptr_nonnull(p);
    size_t got = fread(dom, 1, cap - 1, p);
    dom[got] = 0;
    pclose(p);
    ck_assert_msg(strstr(dom, "data-charts-drawn=\"5\""), "charts did not all draw: %.300s", dom);
    int svgs = 0;
    for (const char *q = dom; (q = strstr(q, "<svg")); q++) svgs++;
    ck_assert_int_ge(svgs, 4);
    free(dom);
data_formats:
    /* The same data as JSON and CSV. */
    snprintf(args, sizeof args, "report %s --db %s --format json", sc, db);
    ck_assert_int_eq(t_run(args, out, sizeof out, err, sizeof err), 0);
    ck_assert_msg(strstr(out, "\"pareto\"") && strstr(out, "\"memory\"") && strstr(out, "\"timeseries\"") &&
                  strstr(out, "\"validation\""), "%s", out);
    snprintf(args, sizeof args, "report %s --db %s --format csv", sc, db);
    ck_assert_int_eq(t_run(args, out, sizeof out, err, sizeof err), 0);
    ck_assert_msg(!strncmp(out, "run,options,gpus,out_tok_per_gpu,", 33), "%s", out);
}
END_TEST

Suite *suite_report(void)
{
    Suite *su = suite_create("report");
    TCase *tc = tcase_create("html");
    tcase_set_timeout(tc, 180);
    tcase_add_test(tc, report_renders_in_chromium);
    suite_add_tcase(su, tc);
    return su;
}
