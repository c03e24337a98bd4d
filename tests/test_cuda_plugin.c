/* test_cuda_plugin.c: the CUDA backend as a plugin, on any machine. A fake plugin
 * (tests/plugin/fake_cuda_plugin.c, built by the Makefile beside the binary's build folder) stands
 * in for libkvplan-cuda.so: the loader's search and ABI check, `--version` loading it without
 * starting anything, the CLI keeping rows measured before an error, and exit 69 for a missing
 * plugin. Then the device check's dry run (backend/cuda/device-check.sh), whose archive is
 * inspected, and device-summary.py on partial and null-laden outputs. */
#include "tests.h"
#include "../backend/be_cuda.h"
#include "../backend/cuda/attn_layout.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static char out[1 << 16], err[1 << 14];

/* The binary's build folder (KVPLAN_BIN is <build>/kvplan). */
static const char *build_dir(void)
{
    static char d[1024];
    snprintf(d, sizeof d, "%s", getenv("KVPLAN_BIN"));
    char *slash = strrchr(d, '/');
    if (slash) *slash = 0;
    return d;
}

static int run_env(const char *env, const char *args)
{
    char cmd[3000];
    snprintf(cmd, sizeof cmd, "env %s %s %s", env, getenv("KVPLAN_BIN"), args);
    char o[512], e[512], sh[4200];
    snprintf(o, sizeof o, "%s", t_write("plugin.out", ""));
    snprintf(e, sizeof e, "%s", t_write("plugin.err", ""));
    snprintf(sh, sizeof sh, "%s >%s 2>%s", cmd, o, e);
    int rc = system(sh);
    FILE *f = fopen(o, "r");
    size_t n = f ? fread(out, 1, sizeof out - 1, f) : 0;
    out[n] = 0;
    if (f) fclose(f);
    f = fopen(e, "r");
    n = f ? fread(err, 1, sizeof err - 1, f) : 0;
    err[n] = 0;
    if (f) fclose(f);
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

static int file_has(const char *path, const char *needle)
{
    static char buf[1 << 16];
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = 0;
    fclose(f);
    return strstr(buf, needle) != NULL;
}

START_TEST(version_without_a_plugin)
{
    ck_assert_int_eq(run_env("KVPLAN_CUDA_PLUGIN=/nonexistent/libkvplan-cuda.so", "--version"), 0);
    ck_assert_msg(strstr(out, "backends: cpu\n"), "%s", out);
    ck_assert_msg(strstr(out, "cuda: the CUDA plugin (libkvplan-cuda.so) is not installed; looked in /nonexistent"), "%s", out);
    /* Commands that need it say where it was looked for and exit 69 (EX_UNAVAILABLE). */
    ck_assert_int_eq(run_env("KVPLAN_CUDA_PLUGIN=/nonexistent/libkvplan-cuda.so", "selftest"), 69);
    ck_assert_msg(strstr(err, "not installed; looked in /nonexistent"), "%s", err);
    ck_assert_int_eq(run_env("KVPLAN_CUDA_PLUGIN=/nonexistent/libkvplan-cuda.so", "kernel-bench"), 69);
    char args[1200];
    snprintf(args, sizeof args, "run %s/tiny-cpu.yaml --backend cuda --no-db", getenv("KVPLAN_LIBRARY"));
    ck_assert_int_eq(run_env("KVPLAN_CUDA_PLUGIN=/nonexistent/libkvplan-cuda.so", args), 69);
    /* A file that is not a shared object is found but refused, plainly. */
    char env[1200];
    snprintf(env, sizeof env, "KVPLAN_CUDA_PLUGIN=%s", t_write("not-a-plugin.so", "hello\n"));
    ck_assert_int_eq(run_env(env, "--version"), 0);
    ck_assert_msg(strstr(out, "does not load") && strstr(out, "backends: cpu\n"), "%s", out);
}
END_TEST

START_TEST(fake_plugin_loads_without_starting_cuda)
{
    char so[1200], mark[1200], env[3000];
    snprintf(so, sizeof so, "%s/tests/fake-cuda-plugin.so", build_dir());
    ck_assert_msg(access(so, R_OK) == 0, "%s was not built", so);
    snprintf(mark, sizeof mark, "%s", t_write("plugin.mark", ""));
    unlink(mark);
    snprintf(env, sizeof env, "KVPLAN_CUDA_PLUGIN=%s FAKE_PLUGIN_MARK=%s", so, mark);
    ck_assert_int_eq(run_env(env, "--version"), 0);
    ck_assert_msg(strstr(out, "backends: cpu, cuda\n") && strstr(out, "fake plugin for tests; loads"), "%s", out);
    struct stat st;
    ck_assert_msg(stat(mark, &st) != 0, "--version called into the plugin beyond its table");
    /* The selftest prints every row, the failing one with its error's name, and exits 70. */
    ck_assert_int_eq(run_env(env, "selftest --format csv"), 70);
    ck_assert_msg(strstr(out, "rmsnorm") && strstr(out, "cudaErrorLaunchFailure") && strstr(out, "attn_decode v1"), "%s", out);
    ck_assert_msg(strstr(err, "1 check(s) failed"), "%s", err);
    ck_assert_msg(file_has(mark, "selftest"), "selftest did not reach the plugin");
    /* kernel-bench keeps the row measured before its error. */
    ck_assert_int_eq(run_env(env, "kernel-bench --format csv"), 70);
    ck_assert_msg(strstr(out, "copy,2 GiB device to device") && strstr(out, "4300"), "%s", out);
    ck_assert_msg(strstr(err, "cudaErrorIllegalAddress"), "%s", err);
    /* Without a device: 69 with the plugin's reason; `run --backend cuda` the same. */
    char env2[3200];
    snprintf(env2, sizeof env2, "%s FAKE_PLUGIN_NODEVICE=1", env);
    ck_assert_int_eq(run_env(env2, "selftest"), 69);
    ck_assert_msg(strstr(err, "fake plugin: no device"), "%s", err);
    char args[1200];
    snprintf(args, sizeof args, "run %s/tiny-cpu.yaml --backend cuda --no-db", getenv("KVPLAN_LIBRARY"));
    ck_assert_int_eq(run_env(env, args), 69);
    ck_assert_msg(strstr(err, "fake plugin: no usable CUDA device"), "%s", err);
}
END_TEST

START_TEST(stale_plugin_is_refused)
{
    char so[1200], env[1400];
    snprintf(so, sizeof so, "%s/tests/fake-cuda-plugin-abi1.so", build_dir());
    ck_assert_msg(access(so, R_OK) == 0, "%s was not built", so);
    snprintf(env, sizeof env, "KVPLAN_CUDA_PLUGIN=%s", so);
    ck_assert_int_eq(run_env(env, "--version"), 0);
    ck_assert_msg(strstr(out, "was built for another kvplan (interface 1, expected") && strstr(out, "backends: cpu\n"), "%s", out);
    ck_assert_int_eq(run_env(env, "selftest"), 69);
}
END_TEST

/* The repository root: KVPLAN_TESTS is <root>/tests. */
static const char *root_dir(void)
{
    static char d[1024];
    snprintf(d, sizeof d, "%s/..", getenv("KVPLAN_TESTS"));
    return d;
}

static int sh(const char *fmt, const char *a, const char *b)
{
    char cmd[4000];
    snprintf(cmd, sizeof cmd, fmt, a, b);
    int rc = system(cmd);
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

/* The dry run: every stage runs (the device ones answer 69; calibrate and validate run on the cpu
 * backend and are cut by a 3-second stage limit, reaching the timeout path), and what comes back
 * is three files: the summary, the log and one archive holding everything else. */
START_TEST(device_check_dry_run)
{
    char od[600], list[700];
    snprintf(od, sizeof od, "%s", t_write("dc.keep", ""));
    strcat(od, ".out");
    ck_assert_int_eq(sh("rm -rf %s && mkdir -p %s", od, od), 0);
    char cmd[3000];
    snprintf(cmd, sizeof cmd, "DRY_RUN=1 DC_STAGE_LIMIT=3 OUT=%s bash %s/backend/cuda/device-check.sh >/dev/null 2>&1", od, root_dir());
    int rc = system(cmd);
    ck_assert_int_eq(WIFEXITED(rc) ? WEXITSTATUS(rc) : -1, 0);
    ck_assert_int_eq(sh("test \"$(ls %s | tr '\\n' ' ')\" = 'device-check.tar.gz log.txt summary.md '%s", od, ""), 0);
    snprintf(list, sizeof list, "%s/list.txt", od);
    char tgz[700];
    snprintf(tgz, sizeof tgz, "%s/device-check.tar.gz", od);
    ck_assert_int_eq(sh("tar -tzf %s > %s", tgz, list), 0);
    const char *expect[] = {"./environment.txt", "./nvidia-smi.txt", "./cublas.txt", "./ldd.txt", "./version.txt", "./stages.tsv",
                            "./selftest.csv", "./selftest.err", "./kernel-bench-decode.csv", "./kernel-bench-decode.err",
                            "./kernel-bench-prefill.csv", "./kernel-bench-prefill.err", "./calibration.csv",
                            "./calibrate.err", "./validate-tiny-cpu.err", "./summary.md", "./log.txt"};
    for (size_t i = 0; i < sizeof expect / sizeof *expect; i++) ck_assert_msg(file_has(list, expect[i]), "archive lacks %s", expect[i]);
    /* The stage table: the device stages ended at their first device call (69) unless a GPU is
     * here; calibrate hit its 3-second limit (124); the ldd record names the binary. */
    ck_assert_int_eq(sh("tar -xzf %s -C %s", tgz, od), 0);
    char p[800];
    snprintf(p, sizeof p, "%s/stages.tsv", od);
    ck_assert_msg(file_has(p, "calibrate\t") && file_has(p, "\t124\t3"), "stages: calibrate did not time out at 3 s");
    ck_assert_msg(file_has(p, "selftest\t") && file_has(p, "kernel-bench-decode\t") && file_has(p, "kernel-bench-prefill\t"),
                  "stages lack the device stages (the kernel bench in its two modes)");
    /* Neither half of the kernel bench was refused its mode (with the real plugin built here,
     * a mode it does not know is exit 70 before the device probe; without it, 69). */
    ck_assert_int_eq(sh("awk -F'\t' '$1 ~ /^kernel-bench-/ && $3 == 70 {bad = 1} END {exit bad}' %s%s", p, ""), 0);
    /* Each half of the kernel bench ran the binary in its own mode (KVPLAN_KERNEL_BENCH): the log
     * names both, in order. */
    snprintf(p, sizeof p, "%s/log.txt", od);
    ck_assert_msg(file_has(p, "kernel-bench-decode (limit") && file_has(p, "KVPLAN_KERNEL_BENCH=decode ") &&
                      file_has(p, "kernel-bench-prefill (limit") && file_has(p, "KVPLAN_KERNEL_BENCH=prefill "),
                  "kernel-bench modes in the log");
    snprintf(p, sizeof p, "%s/ldd.txt", od);
    ck_assert_msg(file_has(p, "== ldd "), "no ldd record");
    /* cuBLAS is looked for under one exact soname (libcublas.so.<major>), never a pattern. */
    snprintf(p, sizeof p, "%s/cublas.txt", od);
    ck_assert_msg(file_has(p, "wanted: libcublas.so.") && !file_has(p, "wanted: libcublas.so.1["), "cuBLAS soname record");
    snprintf(p, sizeof p, "%s/summary.md", od);
    ck_assert_msg(file_has(p, "(dry run on a CPU)") && file_has(p, "## Stages") && file_has(p, "| calibrate |"), "summary");
    /* No time left at all: every stage is skipped and the summary is still written. */
    ck_assert_int_eq(sh("rm -rf %s && mkdir -p %s", od, od), 0);
    snprintf(cmd, sizeof cmd, "DRY_RUN=1 DC_BUDGET=5 OUT=%s bash %s/backend/cuda/device-check.sh >/dev/null 2>&1", od, root_dir());
    rc = system(cmd);
    ck_assert_int_eq(WIFEXITED(rc) ? WEXITSTATUS(rc) : -1, 0);
    snprintf(p, sizeof p, "%s/summary.md", od);
    ck_assert_msg(file_has(p, "| selftest | 0 | skipped |"), "summary of a run out of time");
    snprintf(p, sizeof p, "%s/log.txt", od);
    ck_assert_msg(file_has(p, "skipped (no time left"), "log of a run out of time");
}
END_TEST

/* Sums the stage limits (and the summary's share) of a DC_PLAN=1 listing; *budget gets its
 * budget line, *validates the number of validate stages. */
static long plan_total(const char *env, long *budget, int *validates)
{
    char cmd[2000], line[256];
    snprintf(cmd, sizeof cmd, "env %s DC_PLAN=1 bash %s/backend/cuda/device-check.sh", env, root_dir());
    FILE *f = popen(cmd, "r");
    ck_assert_ptr_nonnull(f);
    long total = 0;
    *budget = -1;
    *validates = 0;
    while (fgets(line, sizeof line, f)) {
        char name[128];
        long v;
        ck_assert_msg(sscanf(line, "%127s %ld", name, &v) == 2, "plan line: %s", line);
        if (!strcmp(name, "budget")) *budget = v;
        else total += v;
        if (!strncmp(name, "validate-", 9)) ++*validates;
    }
    ck_assert_int_eq(pclose(f), 0);
    return total;
}

/* The device allowance is 15 minutes with a machine start of 1-2 minutes, and no start with
 * under 4 left: the default check must end within the documented timeout_s of 360 (so the
 * budget is at most 300 s, leaving room for the start-up and the transfers), its stage limits
 * and the summary's 20 s must fit that budget, and it validates one scenario (the second is a
 * separate short rerun whose own plan must fit its 80 s). Independent of the script: the
 * numbers the brief fixed, selftest 90 + kernel-bench 90 (decode 50 + prefill 40, two stages)
 * + calibrate 60 + validate 40 + summary 20 = 300; "kernel-bench" in DC_STAGES means both halves. */
START_TEST(device_check_plan_fits)
{
    long budget;
    int validates;
    long total = plan_total("DRY_RUN=0", &budget, &validates);
    ck_assert_int_eq(budget, 300);
    ck_assert_int_eq(total, 90 + 50 + 40 + 60 + 40 + 20);
    ck_assert_int_le(total, budget);
    ck_assert_int_eq(validates, 1);
    total = plan_total("DRY_RUN=0 DC_STAGES=kernel-bench", &budget, &validates);
    ck_assert_int_eq(total, 50 + 40 + 20);
    total = plan_total("DRY_RUN=0 DC_STAGES=validate DC_VALIDATE=gpu-prefix DC_BUDGET=80", &budget, &validates);
    ck_assert_int_eq(budget, 80);
    ck_assert_int_le(total, budget);
    ck_assert_int_eq(validates, 1);
}
END_TEST

/* device-summary.py on outputs with nulls, empty cells and a truncated JSON file. */
START_TEST(summary_survives_nulls)
{
    char d[600];
    snprintf(d, sizeof d, "%s", t_write("sum.keep", ""));
    strcat(d, ".dir");
    ck_assert_int_eq(sh("rm -rf %s && mkdir -p %s", d, d), 0);
    char p[800];
    snprintf(p, sizeof p, "%s/validate-a.json", d);
    FILE *f = fopen(p, "w");
    fputs("{\"comparison\": [{\"metric\": \"tpot_mean_s\", \"predicted\": null, \"measured\": 0.02, \"error\": null},"
          " null], \"validation\": {\"median_key_error\": null}}", f);
    fclose(f);
    snprintf(p, sizeof p, "%s/validate-b.json", d);
    f = fopen(p, "w");
    fputs("{\"comparison\": [", f);
    fclose(f);
    snprintf(p, sizeof p, "%s/kernel-bench.csv", d);
    f = fopen(p, "w");
    fputs("what,shape,seconds,rate,unit,share_of_ceiling\ncopy,2 GiB,,,GB/s,\n", f);
    fclose(f);
    /* The kernel bench's decode half, with a null share and one that meets the decode target. */
    snprintf(p, sizeof p, "%s/kernel-bench-decode.csv", d);
    f = fopen(p, "w");
    fputs("what,shape,seconds,rate,unit,share_of_ceiling\n"
          "attn_decode v2 bf16 (cp.async),batch 64 x context 4096 (v2 split 256),0.002,3900,GB/s,0.85\n"
          "attn_decode v2 bf16 (direct),batch 128 x context 16384 (v2 split 1024),,,GB/s,\n"
          "attn_decode v2 bf16 (direct),batch 16 x context 16384 (v2 split 1024),0.001,1000,GB/s,0.2\n", f);
    fclose(f);
    snprintf(p, sizeof p, "%s/selftest.csv", d);
    f = fopen(p, "w");
    fputs("kernel,shape,error,tolerance,result\nrmsnorm,T=1,,1e-05,FAIL\n", f);
    fclose(f);
    char cmd[2000];
    snprintf(cmd, sizeof cmd, "python3 %s/backend/cuda/device-summary.py %s 12 >/dev/null", root_dir(), d);
    int rc = system(cmd);
    ck_assert_int_eq(WIFEXITED(rc) ? WEXITSTATUS(rc) : -1, 0);
    snprintf(p, sizeof p, "%s/summary.md", d);
    ck_assert_msg(file_has(p, "| tpot_mean_s | n/a | 0.02 | n/a |"), "null metric row");
    ck_assert_msg(file_has(p, "Median |error| (throughput, mean TPOT): n/a."), "null median");
    ck_assert_msg(file_has(p, "## Validation: b") && file_has(p, "malformed JSON"), "truncated JSON");
    ck_assert_msg(file_has(p, "| copy | 2 GiB | n/a | n/a GB/s | n/a |"), "empty kernel-bench cells");
    /* Both kernel-bench files are read; targets are judged only at batch >= 64 and context >= 4096. */
    ck_assert_msg(file_has(p, "batch 64 x context 4096 (v2 split 256): 85.0 % of copy bandwidth (target 80 %): met"), "decode target met");
    ck_assert_msg(file_has(p, "batch 128 x context 16384 (v2 split 1024): n/a of copy bandwidth (target 80 %): n/a"), "null share");
    ck_assert_msg(!file_has(p, "batch 16 x context 16384 (v2 split 1024): 20.0 %"), "small batch judged against the target");
    ck_assert_msg(file_has(p, "0 of 1 checks passed") && file_has(p, "FAILED rmsnorm T=1: error n/a"), "selftest with an empty error");
}
END_TEST

/* The tensor-core prefill's shared-memory layout, through the very functions the kernel calls
 * (backend/cuda/attn_layout.h), against the PTX ISA's definitions written out here: ldmatrix
 * (lanes 8m..8m+7 give the row addresses of 8x8 matrix m; lane l receives row l/4, elements
 * 2(l%4) and 2(l%4)+1 of each; with .trans, rows 2(l%4) and 2(l%4)+1 of column l/4) and the
 * B operand of mma.m16n8k16 (b0 = k 2t, 2t+1 of column g; b1 = k 2t+8, 2t+9; g = l/4, t = l%4).
 * A tile element is named by its (key, dim); a 16-byte unit's bank group is its index mod 8
 * (rows are multiples of 128 bytes). Checked: staging writes every (key, chunk) once, inside its
 * row; every 8-lane phase of the stores and of each ldmatrix hits 8 distinct bank groups; and
 * each lane's fragments hold exactly the K and V elements the mma needs. */
struct kd { int key, dim; };

static struct kd unit_elem(const int *row_of, const int *chunk_of, int unit, int e)
{
    struct kd x = {row_of[unit], chunk_of[unit] * 8 + e};
    return x;
}

START_TEST(tc_prefill_layout)
{
    static int row_of[ATTN_TC_KEYS * 16], chunk_of[ATTN_TC_KEYS * 16];
    for (int D = 64; D <= 128; D += 64) {
        const int cpr = D / 8, units = ATTN_TC_KEYS * cpr, per = units / ATTN_TC_THREADS;
        for (int i = 0; i < units; i++) row_of[i] = -1;
        for (int tid = 0; tid < ATTN_TC_THREADS; tid++)
            for (int u = 0; u < per; u++) {
                int r = attn_stage_row(D, tid, u), c = attn_stage_chunk(D, tid, u), p = attn_swz(D, r, c);
                ck_assert_msg(r >= 0 && r < ATTN_TC_KEYS && c >= 0 && c < cpr, "D %d: staging leaves the tile", D);
                ck_assert_msg(p / cpr == r, "D %d: chunk (%d, %d) left its row", D, r, c);
                ck_assert_msg(row_of[p] < 0, "D %d: unit %d written twice", D, p);
                row_of[p] = r;
                chunk_of[p] = c;
            }
        for (int u = 0; u < per; u++)
            for (int ph = 0; ph < ATTN_TC_THREADS; ph += 8) {
                int seen = 0;
                for (int tid = ph; tid < ph + 8; tid++)
                    seen |= 1 << (attn_swz(D, attn_stage_row(D, tid, u), attn_stage_chunk(D, tid, u)) % 8);
                ck_assert_msg(seen == 0xff, "D %d: staging stores conflict (u %d, lanes %d..)", D, u, ph);
            }
        /* S = Q K^T: one ldmatrix.x4 per (8-key n-tile nt, pair of 16-dim k-steps kk, kk+1). */
        for (int nt = 0; nt < ATTN_TC_KEYS / 8; nt++)
            for (int kk = 0; kk < D / 16; kk += 2) {
                int addr[32];
                for (int l = 0; l < 32; l++) addr[l] = attn_swz(D, attn_k_row(l, nt), attn_k_chunk(l, kk));
                for (int m = 0; m < 4; m++) {
                    int seen = 0;
                    for (int i = 0; i < 8; i++) seen |= 1 << (addr[8 * m + i] % 8);
                    ck_assert_msg(seen == 0xff, "D %d: K ldmatrix conflicts (nt %d kk %d)", D, nt, kk);
                }
                for (int l = 0; l < 32; l++) {
                    int g = l / 4, t = l % 4;
                    for (int m = 0; m < 4; m++) {
                        /* register m: b0 (m even) or b1 (m odd) of k-step kk + m/2 */
                        int key = nt * 8 + g, dim = 16 * (kk + m / 2) + 8 * (m % 2) + 2 * t;
                        struct kd lo = unit_elem(row_of, chunk_of, addr[8 * m + g], 2 * t);
                        struct kd hi = unit_elem(row_of, chunk_of, addr[8 * m + g], 2 * t + 1);
                        ck_assert_msg(lo.key == key && lo.dim == dim && hi.key == key && hi.dim == dim + 1,
                                      "D %d: K fragment lane %d reg %d holds (%d,%d) not (%d,%d)", D, l, m, lo.key, lo.dim, key, dim);
                    }
                }
            }
        /* O = P V: one ldmatrix.x4.trans per (16-key k-step j, pair of 8-dim n-tiles nd, nd+1). */
        for (int j = 0; j < ATTN_TC_KEYS / 16; j++)
            for (int nd = 0; nd < D / 8; nd += 2) {
                int addr[32];
                for (int l = 0; l < 32; l++) addr[l] = attn_swz(D, attn_v_row(l, j), attn_v_chunk(l, nd));
                for (int m = 0; m < 4; m++) {
                    int seen = 0;
                    for (int i = 0; i < 8; i++) seen |= 1 << (addr[8 * m + i] % 8);
                    ck_assert_msg(seen == 0xff, "D %d: V ldmatrix conflicts (j %d nd %d)", D, j, nd);
                }
                for (int l = 0; l < 32; l++) {
                    int g = l / 4, t = l % 4;
                    for (int m = 0; m < 4; m++) {
                        /* register m: b0 (m even) or b1 (m odd) of n-tile nd + m/2: keys 16j + 8(m%2) + 2t, +1 of dim g */
                        int key = 16 * j + 8 * (m % 2) + 2 * t, dim = 8 * (nd + m / 2) + g;
                        struct kd lo = unit_elem(row_of, chunk_of, addr[8 * m + 2 * t], g);
                        struct kd hi = unit_elem(row_of, chunk_of, addr[8 * m + 2 * t + 1], g);
                        ck_assert_msg(lo.key == key && lo.dim == dim && hi.key == key + 1 && hi.dim == dim,
                                      "D %d: V fragment lane %d reg %d holds (%d,%d) not (%d,%d)", D, l, m, lo.key, lo.dim, key, dim);
                    }
                }
            }
    }
}
END_TEST

/* Decode v2's split size: hand-derived cases, then properties over many shapes. */
START_TEST(decode_split_sizes)
{
    /* 64 sequences x 8 KV heads = 512 blocks >= 2 x 132: one split wanted, 4112 keys clamp to
     * 1024 (five splits), evened to ceil(4112 / 5) = 823. */
    ck_assert_int_eq(attn_decode_split(132, 64, 8, 4112), 823);
    /* 1 x 8 blocks: 33 splits wanted, ceil(16400 / 33) = 497 -> 512 (a multiple of 64); that is
     * ceil(16400 / 512) = 33 splits, evened to ceil(16400 / 33) = 497. */
    ck_assert_int_eq(attn_decode_split(132, 1, 8, 16400), 497);
    /* 100 keys: the 128-key floor. */
    ck_assert_int_eq(attn_decode_split(132, 1, 8, 100), 128);
    long sms_list[] = {1, 78, 132};
    int ns[] = {1, 2, 7, 16, 64, 128, 256}, kvs[] = {1, 8};
    for (size_t a = 0; a < 3; a++)
        for (size_t b = 0; b < sizeof ns / sizeof *ns; b++)
            for (size_t c = 0; c < 2; c++)
                for (int L = 1; L < 40000; L += L < 5000 ? 7 : 331) {
                    int sp = attn_decode_split(sms_list[a], ns[b], kvs[c], L);
                    long nsp = (L + sp - 1) / sp, last = L - (nsp - 1) * sp;
                    ck_assert_msg(sp >= 128 && sp <= 1024, "split %d for L %d", sp, L);
                    ck_assert_msg(last > 0 && last <= sp, "split %d leaves an empty or overfull last split of L %d", sp, L);
                    /* Evened: where there are few splits (the last one then matters), and past
                     * the 128-key floor, the last split is at least half of the others. */
                    if (sp > 128 && nsp <= 8) ck_assert_msg(2 * last >= sp, "split %d: last split %ld of L %d", sp, last, L);
                }
}
END_TEST

Suite *suite_cuda_plugin(void)
{
    Suite *su = suite_create("cuda_plugin");
    TCase *tc = tcase_create("plugin");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, version_without_a_plugin);
    tcase_add_test(tc, fake_plugin_loads_without_starting_cuda);
    tcase_add_test(tc, stale_plugin_is_refused);
    tcase_add_test(tc, device_check_dry_run);
    tcase_add_test(tc, device_check_plan_fits);
    tcase_add_test(tc, summary_survives_nulls);
    suite_add_tcase(su, tc);
    TCase *lay = tcase_create("layout");
    tcase_add_test(lay, tc_prefill_layout);
    tcase_add_test(lay, decode_split_sizes);
    suite_add_tcase(su, lay);
    return su;
}
