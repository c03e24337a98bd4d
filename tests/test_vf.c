/* test_vf.c: the verify library in-process: comparison errors and pairing against values worked
 * out by hand, the fit's JSON round trip, the calibrated profile as the loader reads it back,
 * calibrate --from into the user's data directory, and validation on the CPU backend with both
 * runs on the same KV pool. */
#include "tests.h"
#include "../planner/plan.h"
#include "../verify/vf.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static void tiny(scn_scenario *s, int requests)
{
    char path[600], set[64];
    snprintf(path, sizeof path, "%s/tiny-cpu.yaml", getenv("KVPLAN_LIBRARY"));
    snprintf(set, sizeof set, "workload.requests=%d", requests);
    const char *sets[] = {set};
    scn_error e;
    ck_assert_int_eq(scn_scenario_load(path, sets, 1, s, &e), SCN_OK);
}

static db *fresh_db(const char *name)
{
    const char *p = t_write(name, "");
    unlink(p);
    db_status st;
    char err[512];
    db *d = db_open(p, &st, err, sizeof err);
    ck_assert_msg(d != NULL, "%s", err);
    return d;
}

START_TEST(compare_errors_by_hand)
{
    sim_metrics p, m;
    memset(&p, 0, sizeof p);
    memset(&m, 0, sizeof m);
    p.req_per_s = 10;                 /* 10 / 8 - 1 = +25 % */
    m.req_per_s = 8;
    p.q[SIM_Q_TPOT].mean = 0.020;     /* 0.020 / 0.025 - 1 = -20 % */
    m.q[SIM_Q_TPOT].mean = 0.025;
    p.kv_util_peak = 0.5;             /* measured 0: no ratio */
    vf_row rows[VF_COMPARED_MAX];
    int n = vf_compare(&p, &m, NULL, rows, VF_COMPARED_MAX);
    ck_assert_int_eq(n, 11);
    ck_assert_str_eq(rows[0].metric, "throughput_req_per_s");
    ck_assert(fabs(rows[0].error - 0.25) < 1e-12);
    ck_assert_str_eq(rows[4].metric, "tpot_mean_s");
    ck_assert(fabs(rows[4].error + 0.20) < 1e-12);
    ck_assert_str_eq(rows[9].metric, "kv_util_peak");
    ck_assert(isnan(rows[9].error));
    ck_assert_str_eq(rows[10].metric, "preemptions");
    ck_assert(rows[10].error == 0);   /* 0 against 0 is exact */
    ck_assert(fabs(vf_key_error(rows, n) - 0.225) < 1e-12);   /* (0.25 + 0.20) / 2 */
    const char *const two[] = {"ttft_p99_s", "tpot_mean_s", NULL};
    ck_assert_int_eq(vf_compare(&p, &m, two, rows, VF_COMPARED_MAX), 2);
    ck_assert_str_eq(rows[1].metric, "tpot_mean_s");
    ck_assert(isnan(vf_error(1, NAN)) && isnan(vf_error(1, 0)));
}
END_TEST

static void count_pair(void *ud, int i, int j)
{
    int *log = ud;
    log[1 + 2 * log[0]] = i;
    log[2 + 2 * log[0]] = j;
    log[0]++;
}

START_TEST(pairs_by_key_and_seed)
{
    const vf_run_ref runs[] = {
        {1, "predicted", "{\"a\":1}", 7}, {2, "measured", "{\"a\":1}", 7}, {3, "measured", "{\"a\":1}", 8},
        {4, "predicted", "{\"b\":1}", 7}, {5, "measured", "{\"b\":1}", 7}, {6, "measured", "{\"a\":1}", 7},
        {7, "measured", "{\"a\": 1}", 7},   /* a different spelling is a different key */
    };
    int log[1 + 2 * 8] = {0};
    ck_assert_int_eq(vf_pair_runs(runs, 7, count_pair, log), 3);
    ck_assert_int_eq(log[0], 3);
    int want[3][2] = {{0, 1}, {0, 5}, {3, 4}};
    for (int k = 0; k < 3; k++) {
        ck_assert_int_eq(log[1 + 2 * k], want[k][0]);
        ck_assert_int_eq(log[2 + 2 * k], want[k][1]);
    }
}
END_TEST

START_TEST(equal_choices_have_equal_keys)
{
    /* A simulate run stores db_options_json of the scenario's deployment; a plan candidate with
     * the same choice and deployment must store the very same key, so plan can reuse it. */
    scn_scenario s;
    tiny(&s, 10);
    plan_result r;
    ck_assert_int_eq(plan_enumerate(&s, &r), 0);
    ck_assert(r.n >= 1);
    plan_cand *c = &r.c[0];
    sim_choice first = sim_choice_first(&s);
    ck_assert_int_eq(c->tp, s.deployment.tensor_parallel);
    char *a = db_options_json(&first, &s.deployment, 0, NULL), *b = plan_options_json(&s, c);
    ck_assert_ptr_nonnull(a);
    ck_assert_ptr_nonnull(b);
    ck_assert_str_eq(a, b);
    /* And a different choice has a different key. */
    sim_choice other = first;
    other.prefix_cache = !other.prefix_cache;
    char *o = db_options_json(&other, &s.deployment, 0, NULL);
    ck_assert_str_ne(a, o);
    free(a);
    free(b);
    free(o);
    plan_result_free(&r);
}
END_TEST

START_TEST(fit_json_round_trip)
{
    be_fit f = {.memory_bandwidth = 12.5e9, .gemm_dtype = SCN_DTYPE_BF16, .gemm_flops = 3.25e11, .eff_bandwidth = 0.61,
                .eff_compute = 0.43, .eff_attention = 0.17, .kernel_overhead = 4.5e-6, .step_overhead = 1.25e-4};
    char *j = vf_fit_json(&f);
    ck_assert_ptr_nonnull(j);
    be_fit g;
    memset(&g, 0, sizeof g);
    ck_assert_int_eq(vf_fit_parse(j, &g), 0);
    /* 17 significant digits: every double comes back exactly. */
    ck_assert(g.memory_bandwidth == f.memory_bandwidth && g.gemm_dtype == f.gemm_dtype && g.gemm_flops == f.gemm_flops);
    ck_assert(g.eff_bandwidth == f.eff_bandwidth && g.eff_compute == f.eff_compute && g.eff_attention == f.eff_attention);
    ck_assert(g.kernel_overhead == f.kernel_overhead && g.step_overhead == f.step_overhead);
    free(j);
    ck_assert_int_eq(vf_fit_parse("{\"memory_bandwidth\": 1}", &g), -1);
    ck_assert_int_eq(vf_fit_parse("not json", &g), -1);
}
END_TEST

START_TEST(profile_loads_back_as_hardware)
{
    scn_scenario s;
    tiny(&s, 10);
    be_calibration cal;
    memset(&cal, 0, sizeof cal);
    cal.fit = (be_fit){.memory_bandwidth = 12.5e9, .gemm_dtype = s.model.weight_dtype, .gemm_flops = 3.25e11,
                       .eff_bandwidth = 0.61, .eff_compute = 0.43, .eff_attention = 0.17, .kernel_overhead = 4.5e-6,
                       .step_overhead = 1.25e-4};
    const char *path = t_write("prof.yaml", "");
    char err[1024];
    ck_assert_int_eq(vf_profile_write(path, "mine", &s.hardware, &cal, "host", "now", "cpu", err, sizeof err), VF_OK);
    char set[700];
    snprintf(set, sizeof set, "hardware=%s", path);
    const char *sets[] = {set};
    char sc[600];
    snprintf(sc, sizeof sc, "%s/tiny-cpu.yaml", getenv("KVPLAN_LIBRARY"));
    scn_scenario t;
    scn_error e;
    ck_assert_int_eq(scn_scenario_load(sc, sets, 1, &t, &e), SCN_OK);
    ck_assert(t.hardware.calibrated);
    ck_assert_str_eq(t.hardware.name, "mine");
    ck_assert(fabs(t.hardware.memory_bandwidth / 12.5e9 - 1) < 1e-6);
    ck_assert(fabs(t.hardware.flops[s.model.weight_dtype] / 3.25e11 - 1) < 1e-6);
    ck_assert(fabs(t.hardware.eff_bandwidth - 0.61) < 1e-9);
    ck_assert(fabs(t.hardware.eff_compute - 0.43) < 1e-9);
    ck_assert(fabs(t.hardware.step_overhead - 1.25e-4) < 1e-12);
    ck_assert(t.hardware.memory == s.hardware.memory);   /* from the profile it extends */
    /* An unwritable path is refused with the path in the message. */
    ck_assert_int_eq(vf_profile_write("/nonexistent-dir/p.yaml", "x", &s.hardware, &cal, "h", "w", "cpu", err, sizeof err),
                     VF_E_CANTCREAT);
    ck_assert(strstr(err, "/nonexistent-dir/p.yaml"));
}
END_TEST

START_TEST(calibrate_from_runs_into_user_dir)
{
    /* "Measured" runs made by the model itself with known coefficients; the fit from the
     * library's defaults must predict them again, and the profile lands in $XDG_DATA_HOME. */
    char xdg[600];
    snprintf(xdg, sizeof xdg, "%s", t_write("xdg-marker", ""));
    *strrchr(xdg, '/') = 0;
    strcat(xdg, "/xdg");
    setenv("XDG_DATA_HOME", xdg, 1);
    scn_scenario s;
    tiny(&s, 40);
    scn_scenario truth = s;
    truth.hardware.eff_bandwidth = 0.5;
    truth.hardware.step_overhead = 3e-4;
    sim_choice c = sim_choice_first(&s);
    sim_metrics m;
    char err[1500];
    ck_assert_int_eq(sim_run_predicted(&truth, &c, &m, err, sizeof err), SIM_OK);
    db *d = fresh_db("fit.db");
    long measured = 0, predicted = 0;
    ck_assert_int_eq(vf_store(d, &s, &c, "measured", "test", &m, NULL, "a", "b", &measured, err, sizeof err), VF_OK);
    ck_assert_int_eq(vf_store(d, &s, &c, "predicted", "model", &m, NULL, "a", "b", &predicted, err, sizeof err), VF_OK);
    vf_calibrate_req rq = {.s = &s, .runs = &measured, .n_runs = 1, .d = d};
    vf_calibrate_result *r = malloc(sizeof *r);
    ck_assert_int_eq(vf_calibrate(&rq, r, err, sizeof err), VF_OK);
    char want[1400];
    snprintf(want, sizeof want, "%s/kvplan/hardware/%s.calibrated.yaml", xdg, s.hardware.name);
    ck_assert_str_eq(r->path, want);
    ck_assert(access(want, R_OK) == 0);
    ck_assert(r->calibration_id > 0);
    ck_assert_int_eq(r->cal.n, 2);   /* the run's mean TTFT and mean TPOT */
    ck_assert_msg(fabs(r->cal.pts[1].predicted / r->cal.pts[1].measured - 1) < 0.05, "tpot %g vs %g",
                  r->cal.pts[1].predicted, r->cal.pts[1].measured);
    /* The profile is found by name from the user's directory. */
    char set[300], sc[600];
    snprintf(set, sizeof set, "hardware=%s", r->name);
    const char *sets[] = {set};
    snprintf(sc, sizeof sc, "%s/tiny-cpu.yaml", getenv("KVPLAN_LIBRARY"));
    scn_scenario t;
    scn_error e;
    ck_assert_int_eq(scn_scenario_load(sc, sets, 1, &t, &e), SCN_OK);
    ck_assert(t.hardware.calibrated);
    /* A predicted run is refused as data to fit. */
    rq.runs = &predicted;
    ck_assert_int_eq(vf_calibrate(&rq, r, err, sizeof err), VF_E_DATA);
    ck_assert_msg(strstr(err, "is predicted"), "%s", err);
    free(r);
    db_close(d);
}
END_TEST

START_TEST(validate_on_the_cpu_backend)
{
    scn_scenario s;
    tiny(&s, 12);
    sim_choice c = sim_choice_first(&s);
    db *d = fresh_db("validate.db");
    /* A stored calibration for this host: the profile's own figures, so validation skips the
     * micro-benchmarks and uses it. */
    be_calibration cal;
    memset(&cal, 0, sizeof cal);
    cal.fit = (be_fit){.memory_bandwidth = s.hardware.memory_bandwidth, .gemm_dtype = s.model.weight_dtype,
                       .gemm_flops = s.hardware.flops[s.model.weight_dtype], .eff_bandwidth = s.hardware.eff_bandwidth,
                       .eff_compute = s.hardware.eff_compute, .eff_attention = s.hardware.eff_attention,
                       .kernel_overhead = s.hardware.kernel_overhead, .step_overhead = s.hardware.step_overhead};
    long cal_id = 0;
    char err[1500];
    ck_assert_int_eq(vf_calibration_store(d, "x.calibrated", s.hardware.name, "cpu", "test", &cal, &cal_id, err, sizeof err),
                     VF_OK);
    ck_assert(cal_id > 0);
    vf_sink kp, km;
    ck_assert_int_eq(vf_sink_open(&kp, NULL, NULL, false, err, sizeof err), VF_OK);
    ck_assert_int_eq(vf_sink_open(&km, NULL, NULL, true, err, sizeof err), VF_OK);
    vf_validate_req rq = {.s = &s, .c = &c, .backend = "cpu", .d = d, .predicting = &kp, .measuring = &km, .interval = 1};
    vf_validate_result *r = malloc(sizeof *r);
    vf_status st = vf_validate(&rq, r, err, sizeof err);
    ck_assert_msg(st == VF_OK, "%s", err);
    ck_assert_int_eq(r->calibrated_now, 0);
    ck_assert_int_eq(r->calibration_id, cal_id);
    /* Both runs used the pool the backend allocated. */
    ck_assert(r->blocks > 0);
    ck_assert_int_eq(r->predicted.kv_blocks, r->blocks);
    ck_assert_int_eq(r->measured.kv_blocks, r->blocks);
    ck_assert_int_eq(r->predicted.requests, 12);
    ck_assert_int_eq(r->measured.requests, 12);
    ck_assert_int_eq(r->n_rows, 11);
    ck_assert(fabs(r->rows[0].error - (r->predicted.req_per_s / r->measured.req_per_s - 1)) < 1e-12);
    /* Stored as a pair under one options key. */
    db_run_info a, b;
    ck_assert_int_eq(db_run_get(d, r->predicted_run, &a, err, sizeof err), DB_OK);
    ck_assert_int_eq(db_run_get(d, r->measured_run, &b, err, sizeof err), DB_OK);
    ck_assert_str_eq(a.kind, "predicted");
    ck_assert_str_eq(b.kind, "measured");
    ck_assert_str_eq(b.executor, "cpu");
    char *key = db_options_json(&c, &s.deployment, 0, NULL);
    ck_assert_str_eq(a.options, key);
    ck_assert_str_eq(b.options, key);
    free(key);
    vf_run_ref refs[2] = {{a.id, a.kind, a.options, a.seed}, {b.id, b.kind, b.options, b.seed}};
    ck_assert_int_eq(vf_pair_runs(refs, 2, NULL, NULL), 1);
    /* An unknown backend is refused as unavailable, before anything is stored. */
    rq.backend = "nonesuch";
    rq.recalibrate = 1;
    ck_assert_int_eq(vf_validate(&rq, r, err, sizeof err), VF_E_UNAVAILABLE);
    free(r);
    vf_sink_close(&kp);
    vf_sink_close(&km);
    db_close(d);
}
END_TEST

static int table_len(const char *const *t)
{
    int n = 0;
    while (t[n]) n++;
    return n;
}

START_TEST(one_name_table_per_enum)
{
    /* Each table has one name per enum value... */
    ck_assert_int_eq(table_len(SCN_DTYPE_NAMES), SCN_DTYPE_COUNT);
    ck_assert_int_eq(table_len(SCN_METRIC_NAMES), SCN_METRIC_COUNT);
    ck_assert_int_eq(table_len(SCN_LAYOUT_NAMES), SCN_LAYOUT_PAGED + 1);
    ck_assert_int_eq(table_len(SCN_ATTN_NAMES), SCN_ATTN_NAIVE + 1);
    ck_assert_int_eq(table_len(SCN_SCHED_NAMES), SCN_SCHED_CHUNKED + 1);
    ck_assert_int_eq(table_len(SCN_ROUTER_NAMES), SCN_ROUTER_PREFIX_AFFINITY + 1);
    ck_assert_int_eq(table_len(SCN_OBJECTIVE_NAMES), SCN_OBJ_COST + 1);
    ck_assert_str_eq(scn_enum_name(SCN_SCHED_NAMES, SCN_SCHED_CHUNKED), "chunked");
    ck_assert_str_eq(scn_enum_name(SCN_SCHED_NAMES, 99), "?");
    /* ...and the name the loader accepts is the name the options key and the description
     * print: every scheduler and attention value, loaded and written back. */
    char path[600];
    snprintf(path, sizeof path, "%s/tiny-cpu.yaml", getenv("KVPLAN_LIBRARY"));
    for (int k = 0; SCN_SCHED_NAMES[k]; k++)
        for (int a = 0; SCN_ATTN_NAMES[a]; a++) {
            char s1[64], s2[64];
            snprintf(s1, sizeof s1, "options.scheduler=%s", SCN_SCHED_NAMES[k]);
            snprintf(s2, sizeof s2, "options.attention=%s", SCN_ATTN_NAMES[a]);
            const char *sets[] = {s1, s2};
            scn_scenario s;
            scn_error e;
            ck_assert_int_eq(scn_scenario_load(path, sets, 2, &s, &e), SCN_OK);
            sim_choice c = sim_choice_first(&s);
            ck_assert_int_eq(c.scheduler, k);
            ck_assert_int_eq(c.attention, a);
            char *key = db_options_json(&c, &s.deployment, 0, NULL), want[80], desc[200];
            snprintf(want, sizeof want, "\"scheduler\":\"%s\"", SCN_SCHED_NAMES[k]);
            ck_assert_msg(strstr(key, want), "%s", key);
            snprintf(want, sizeof want, "\"attention\":\"%s\"", SCN_ATTN_NAMES[a]);
            ck_assert_msg(strstr(key, want), "%s", key);
            free(key);
            sim_choice_describe(&c, desc, sizeof desc);
            snprintf(want, sizeof want, " %s %s ", SCN_ATTN_NAMES[a], SCN_SCHED_NAMES[k]);
            ck_assert_msg(strstr(desc, want), "%s", desc);
        }
}
END_TEST

START_TEST(where_files_live)
{
    char buf[1024], home[1024] = "", xdg[1024] = "";
    /* Restored at the end, in case the runner does not fork. */
    if (getenv("HOME")) snprintf(home, sizeof home, "%s", getenv("HOME"));
    if (getenv("XDG_DATA_HOME")) snprintf(xdg, sizeof xdg, "%s", getenv("XDG_DATA_HOME"));
    /* User output: XDG_DATA_HOME when absolute, else HOME's .local/share, else nothing. */
    setenv("XDG_DATA_HOME", "/x/data", 1);
    setenv("HOME", "/home/u", 1);
    ck_assert_int_eq(scn_user_dir("hardware", buf, sizeof buf), 0);
    ck_assert_str_eq(buf, "/x/data/kvplan/hardware");
    ck_assert_int_eq(scn_user_dir(NULL, buf, sizeof buf), 0);
    ck_assert_str_eq(buf, "/x/data/kvplan");
    setenv("XDG_DATA_HOME", "relative/dir", 1);   /* the XDG spec: relative paths are ignored */
    ck_assert_int_eq(scn_user_dir("hardware", buf, sizeof buf), 0);
    ck_assert_str_eq(buf, "/home/u/.local/share/kvplan/hardware");
    unsetenv("XDG_DATA_HOME");
    unsetenv("HOME");
    ck_assert_int_eq(scn_user_dir("hardware", buf, sizeof buf), -1);
    ck_assert_int_eq(scn_user_dir("hardware", buf, 8), -1);
    /* Shipped data: the environment first, as given. */
    setenv("KVPLAN_ASSETS", "/opt/charts", 1);
    ck_assert_int_eq(scn_assets_dir(buf, sizeof buf), 0);
    ck_assert_str_eq(buf, "/opt/charts");
    char lib[700];
    snprintf(lib, sizeof lib, "%s", getenv("KVPLAN_LIBRARY"));
    ck_assert_int_eq(scn_library_dir(buf, sizeof buf), 0);
    ck_assert_str_eq(buf, lib);
    /* Without it, the test binary (not installed) finds the source tree's library. */
    unsetenv("KVPLAN_LIBRARY");
    ck_assert_int_eq(scn_library_dir(buf, sizeof buf), 0);
    ck_assert_msg(strlen(buf) > 10 && !strcmp(buf + strlen(buf) - 10, "/scenarios"), "%s", buf);
    setenv("KVPLAN_LIBRARY", lib, 1);
    /* mkdir -p */
    char d[800];
    snprintf(d, sizeof d, "%s", t_write("mk-marker", ""));
    *strrchr(d, '/') = 0;
    strcat(d, "/a/b/c");
    ck_assert_int_eq(scn_mkdirs(d), 0);
    ck_assert_int_eq(scn_mkdirs(d), 0);   /* existing is fine */
    struct stat st;
    ck_assert(stat(d, &st) == 0 && S_ISDIR(st.st_mode));
    ck_assert_int_eq(scn_mkdirs("/proc/no/such"), -1);
    unsetenv("KVPLAN_ASSETS");
    if (home[0]) setenv("HOME", home, 1);
    if (xdg[0]) setenv("XDG_DATA_HOME", xdg, 1);
}
END_TEST

/* Runs tests/layering.sh on root; its exit status, with its output in out. */
static int layering(const char *root, char *out, size_t n)
{
    char cmd[2000];
    snprintf(cmd, sizeof cmd, "bash %s/layering.sh %s 2>&1", getenv("KVPLAN_TESTS"), root);
    FILE *p = popen(cmd, "r");
    ck_assert_ptr_nonnull(p);
    size_t got = fread(out, 1, n - 1, p);
    out[got] = 0;
    int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

START_TEST(layering_holds_and_catches_violations)
{
    char out[8192], root[700], cmd[2000];
    /* The real tree. */
    snprintf(root, sizeof root, "%s/..", getenv("KVPLAN_TESTS"));
    ck_assert_msg(layering(root, out, sizeof out) == 0, "%s", out);
    /* A small tree with one upward include (model -> cli), one sibling include (db -> backend)
     * and code among the data: three violations, each named. */
    snprintf(root, sizeof root, "%s", t_write("layer-marker", ""));
    *strrchr(root, '/') = 0;
    strcat(root, "/layers");
    snprintf(cmd, sizeof cmd,
             "rm -rf %s && mkdir -p %s/model %s/cli %s/db %s/backend %s/scenarios && cd %s && "
             "printf '#include \"../cli/cli.h\"\\n' > model/a.c && printf '/* x */\\n' > cli/cli.h && "
             "printf '#include \"../backend/be.h\"\\n' > db/d.c && printf '\\n' > backend/be.h && "
             "printf '\\n' > scenarios/x.c && printf '#include \"cli.h\"\\n' > cli/ok.c",
             root, root, root, root, root, root, root);
    ck_assert_int_eq(system(cmd), 0);
    ck_assert_int_eq(layering(root, out, sizeof out), 1);
    ck_assert_msg(strstr(out, "model/a.c:1: model/ includes cli/"), "%s", out);
    ck_assert_msg(strstr(out, "db/d.c:1: db/ includes backend/"), "%s", out);
    ck_assert_msg(strstr(out, "scenarios/ is shipped data only"), "%s", out);
    ck_assert_msg(strstr(out, "3 violation(s)"), "%s", out);
}
END_TEST

Suite *suite_vf(void)
{
    Suite *s = suite_create("vf");
    TCase *tc = tcase_create("verify");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, compare_errors_by_hand);
    tcase_add_test(tc, pairs_by_key_and_seed);
    tcase_add_test(tc, equal_choices_have_equal_keys);
    tcase_add_test(tc, fit_json_round_trip);
    tcase_add_test(tc, profile_loads_back_as_hardware);
    tcase_add_test(tc, calibrate_from_runs_into_user_dir);
    tcase_add_test(tc, validate_on_the_cpu_backend);
    tcase_add_test(tc, layering_holds_and_catches_violations);
    tcase_add_test(tc, one_name_table_per_enum);
    tcase_add_test(tc, where_files_live);
    suite_add_tcase(s, tc);
    return s;
}
