/* test_kernels.c: the validate-kernels check (planner/plan_kernels.c): located errors for
 * broken measurement files, GEMM rows against hand computations from h200.yaml and the bare
 * engine profile, attention and step rows against the cost model called on whole library
 * models, the summary arithmetic on errors set by hand, and the command end to end on the
 * H200 measurements in validation/h200-2026-11-30/. */
#include "tests.h"
#include "../model/kv_model.h"
#include "../planner/plan_kernels.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define GEMM_HEAD "label,dtype,M,N,K,seconds,tflops,weight_gbps\n"
#define ATTN_HEAD "kind,backend,batch,q_len,kv_len,q_heads,kv_heads,head_dim,seconds,tflops,kv_gbps\n"
#define STEP_HEAD "model,batch,context,mode,seconds\n"

static char set_dir[256];

static void write_file(const char *name, const char *text)
{
    char p[400];
    snprintf(p, sizeof p, "%s/%s", set_dir, name);
    FILE *f = fopen(p, "w");
    ck_assert_msg(f != NULL, "cannot write %s", p);
    fputs(text, f);
    fclose(f);
}

/* A fresh measurement folder with the given files (NULL: the file is left out). */
static const char *folder(const char *gemm, const char *map, const char *attn, const char *step)
{
    snprintf(set_dir, sizeof set_dir, "/tmp/kvplan-kval-test-XXXXXX");
    ck_assert(mkdtemp(set_dir) != NULL);
    const char *text[] = {gemm, map, attn, step};
    for (int f = 0; f < KVAL_FILE_COUNT; f++) if (text[f]) write_file(KVAL_FILE_NAMES[f], text[f]);
    return set_dir;
}

static void folder_remove(void)
{
    char p[400];
    for (int f = 0; f < KVAL_FILE_COUNT; f++) {
        snprintf(p, sizeof p, "%s/%s", set_dir, KVAL_FILE_NAMES[f]);
        unlink(p);
    }
    rmdir(set_dir);
}

/* Reads a folder that must fail with return code `want`, its message containing `msg`. */
static void broken(const char *gemm, const char *map, const char *attn, const char *step, int want, const char *msg)
{
    kval_table t;
    char err[1024];
    int rc = kval_table_read(folder(gemm, map, attn, step), &t, err, sizeof err);
    folder_remove();
    ck_assert_msg(rc == want, "rc %d (want %d): %s", rc, want, err);
    ck_assert_msg(strstr(err, msg), "'%s' lacks '%s'", err, msg);
    ck_assert_int_eq(t.n, 0);
    ck_assert(t.rows == NULL);
}

START_TEST(broken_files_give_located_errors)
{
    const char *G = GEMM_HEAD "q,bf16,1,6144,4096,1.5e-05,3.3,3305\n", *A = ATTN_HEAD, *S = STEP_HEAD;
    /* A missing file or folder: no input (-2), named. */
    broken(G, G, A, NULL, -2, "/step.csv: cannot open:");
    broken(NULL, G, A, S, -2, "/gemm.csv: cannot open:");
    /* Headers. */
    broken(G, "", A, S, -1, "gemm_map.csv:1:1: header: the file is empty");
    broken("label,dtype,M,N,K,tflops\n", G, A, S, -1, "gemm.csv:1:1: header: missing column 'seconds'");
    broken("label,dtype,M,N,K,seconds,M\n", G, A, S, -1, "gemm.csv:1:27: header: column 'M' appears twice");
    /* Rows: field counts (pointing at the first extra field, or at the end of a short line). */
    broken(G, G, A, STEP_HEAD "llama3-8b,1,1024,graph\n", -1, "step.csv:2:23: row: expected 5 comma-separated fields");
    broken(GEMM_HEAD "q,bf16,1,6144,4096,1.5e-05,3.3,3305,9\n", G, A, S, -1, "gemm.csv:2:37: row: expected 8");
    /* Values, each at its column. */
    broken(GEMM_HEAD "q,bf16,one,6144,4096,1.5e-05,3.3,3305\n", G, A, S, -1,
           "gemm.csv:2:8: M: expected a whole number in 1..10000000, found 'one'");
    broken(GEMM_HEAD "q,bf16,0,6144,4096,1.5e-05,3.3,3305\n", G, A, S, -1, "gemm.csv:2:8: M: expected a whole number");
    broken(GEMM_HEAD "q,int4,1,6144,4096,1.5e-05,3.3,3305\n", G, A, S, -1, "gemm.csv:2:3: dtype: expected bf16 or fp8, found 'int4'");
    broken(G, GEMM_HEAD "map,bf16,1,1024,1024,-2e-06,,\n", A, S, -1, "gemm_map.csv:2:22: seconds: expected a time in seconds > 0");
    broken(GEMM_HEAD ",bf16,1,6144,4096,1.5e-05,3.3,3305\n", G, A, S, -1, "gemm.csv:2:1: label: is empty");
    broken(G, G, ATTN_HEAD "decode,flash,1,2,1024,32,8,128,1e-05,,\n", S, -1,
           "attn.csv:2:16: q_len: a decode row computes one query row per sequence");
    broken(G, G, ATTN_HEAD "verify,flash,1,1,1024,32,8,128,1e-05,,\n", S, -1,
           "attn.csv:2:1: kind: expected decode or prefill, found 'verify'");
    broken(G, G, ATTN_HEAD "prefill,xformers,1,8,8,32,8,128,1e-05,,\n", S, -1,
           "attn.csv:2:9: backend: expected flash or cudnn, found 'xformers'");
    broken(G, G, ATTN_HEAD "prefill,flash,1,1024,512,32,8,128,1e-05,,\n", S, -1, "attn.csv:2:22: kv_len: fewer keys (512) than query rows (1024)");
    broken(G, G, ATTN_HEAD "prefill,flash,1,8,8,32,6,128,1e-05,,\n", S, -1, "attn.csv:2:24: kv_heads: must divide q_heads (32)");
    broken(G, G, ATTN_HEAD "prefill,flash,65536,1000000,1000000,32,8,128,1e-05,,\n", S, -1,
           "attn.csv:2:21: q_len: batch x q_len = 65536000000 query rows: more than 16777216");
    broken(G, G, A, STEP_HEAD "llama3-8b,1,1024,replay,0.005\n", -1, "step.csv:2:18: mode: expected graph or eager, found 'replay'");
    /* Blank lines, comment lines and CRLF endings are not errors; lines count from 1 all the
     * same, so the bad row below is reported on line 4. */
    broken(G, G, A, STEP_HEAD "\r\n# a comment\r\nllama3-8b,1,1024,graph,fast\r\n", -1, "step.csv:4:24: seconds: expected a time");
}
END_TEST

/* Reads and predicts a folder that must be well formed. */
static void predicted(const char *gemm, const char *map, const char *attn, const char *step, kval_table *t)
{
    char err[1024];
    int rc = kval_table_read(folder(gemm, map, attn, step), t, err, sizeof err);
    folder_remove();
    ck_assert_msg(rc == 0, "%s", err);
    ck_assert_msg(kval_table_predict(t, NULL, err, sizeof err) == 0, "%s", err);
}

START_TEST(gemm_rows_match_hand_computations)
{
    kval_table t;
    predicted(GEMM_HEAD "llama3-8b qkv,bf16,1,6144,4096,1.5226e-05,3.31,3305.6\n"
                        "llama3-8b down,fp8,16,4096,14336,2.2711e-05,82.7,2585.6\n",
              GEMM_HEAD, ATTN_HEAD, STEP_HEAD, &t);
    ck_assert_int_eq(t.n, 2);
    /* Llama-3-8B's QKV GEMM at M = 1, bf16, on h200.yaml (4.8 TB/s at efficiency 0.80, 989 TFLOPS
     * bf16 at 0.75, 132 SMs) inside a graph of the bare engine (3 us a kernel boundary), by the
     * formulas of docs/cost-model.md ("Step time", "Efficiency from shapes"). Shape: rows pad to
     * 8, 6144 / 128 = 48 column tiles, 4096 / 64 = 64 K stages; 48 tiles < 132 SMs, so split-K
     * min(64, floor(132 / 48)) = 2: 96 units in one wave, 32 stages each:
     * e = 1·6144·4096 / (132·8·128·64·32) = 1/11. */
    double e = 1.0 / 11.0;
    double tc = 2.0 * 6144 * 4096 / (989e12 * 0.75 * e);
    double tm = (6144.0 * 4096 * 2 + 1.0 * (6144 + 4096) * 2) / (4.8e12 * 0.80);
    double want = sqrt(tc * tc + tm * tm) + 3e-6;   /* about 16.13 us */
    ck_assert_msg(fabs(t.rows[0].predicted - want) <= 1e-12 * want, "%.10g vs %.10g", t.rows[0].predicted, want);
    ck_assert_msg(fabs(t.rows[0].error - (want / 1.5226e-05 - 1)) < 1e-12, "%g", t.rows[0].error);
    ck_assert_str_eq(t.rows[0].bound, "memory");
    ck_assert_int_eq(t.rows[0].status, KVAL_COMPARED);
    ck_assert_int_eq(t.rows[0].cls, KVAL_GEMM_BF16);
    /* The down GEMM at M = 16 in fp8 (1979 TFLOPS at 0.75 x h200.yaml's compute_scale.fp8 of
     * 0.89, one byte a weight, activations counted at 16 bits as the model counts them): rows pad to 16, 4096 / 128 = 32 tiles, K stages of 128
     * fp8 elements: 14336 / 128 = 112; split-K min(112, floor(132 / 32)) = 4: 128 units in one
     * wave of 132, 28 stages each: e = 16·4096·14336 / (132·16·128·128·28) = 32/33. */
    e = 32.0 / 33.0;
    tc = 2.0 * 16 * 4096 * 14336 / (1979e12 * 0.75 * 0.89 * e);
    tm = (4096.0 * 14336 * 1 + 16.0 * (4096 + 14336) * 2) / (4.8e12 * 0.80);
    want = sqrt(tc * tc + tm * tm) + 3e-6;
    ck_assert_msg(fabs(t.rows[1].predicted - want) <= 1e-12 * want, "%.10g vs %.10g", t.rows[1].predicted, want);
    ck_assert_int_eq(t.rows[1].cls, KVAL_GEMM_FP8);
    kval_table_free(&t);
}
END_TEST

static void library_scenario(const char *model, int tp, scn_scenario *s)
{
    char text[600];
    snprintf(text, sizeof text,
             "name: t\nmodel: %s\nhardware: h200\nengine: bare\ndeployment: {tensor_parallel: %d}\n"
             "workload: {requests: 1, arrival: {process: offline}, prompt_tokens: 64, output_tokens: 1}\n"
             "options: {attention: [flash], kv_dtype: [bf16]}\n",
             model, tp);
    scn_error e;
    ck_assert_msg(t_load(text, NULL, 0, s, &e) == SCN_OK, "%s", e.msg);
}

static kv_step_cost step_of(scn_scenario *s, int n, long new_tokens, long context, bool graph)
{
    s->engine.cuda_graphs = graph;
    s->engine.n_graph_sizes = graph ? 1 : 0;
    s->engine.graph_sizes[0] = n;
    kv_seq_work *w = malloc(sizeof *w * (size_t)n);
    ck_assert(w != NULL);
    for (int i = 0; i < n; i++) w[i] = (kv_seq_work){new_tokens, context};
    kv_cache_cfg c = kv_cache_cfg_make(s, SCN_DTYPE_BF16, 0, 0);
    kv_step_cost k = kv_step_time(s, &c, SCN_ATTN_FLASH, w, n);
    free(w);
    return k;
}

static void near(double got, double want, const char *what)
{
    ck_assert_msg(fabs(got - want) <= 1e-9 * fabs(want), "%s: %.12g vs %.12g", what, got, want);
}

START_TEST(attention_and_step_rows_are_the_models_ops)
{
    kval_table t;
    predicted(GEMM_HEAD, GEMM_HEAD,
              ATTN_HEAD "decode,flash,16,1,1024,32,8,128,2.5067e-05,,2677.2\n"
                        "decode,flash,1,1,1024,32,8,128,1.1004e-05,,381.2\n"
                        "prefill,flash,1,4096,4096,32,32,128,5.9814e-04,229.78,\n"
                        "prefill,cudnn,1,4096,4096,32,32,128,2.8354e-04,484.73,\n"
                        "prefill,cudnn,1,8192,8192,32,32,128,nan,nan,nan  # RuntimeError\n",
              STEP_HEAD "llama3-8b,8,1024,graph,6.3015e-03\n"
                        "llama3-70b-tp8-shard,8,1024,graph,1.0202e-02\n"
                        "llama3-8b,8,1024,eager,1.2407e-02\n"
                        "mistral-7b,8,1024,graph,6e-03\n",
              &t);
    ck_assert_int_eq(t.n, 9);
    scn_scenario *s = malloc(sizeof *s);
    ck_assert(s != NULL);
    /* A decode row is one layer of Llama-3-8B's attention (32 query heads over 8 KV heads of
     * 128) at the same batch, each query attending 1024 keys (1023 cached and its own), in a
     * graph captured at that batch: the whole model's attention op over its 32 layers. */
    library_scenario("llama-3-8b", 1, s);
    near(t.rows[0].predicted, step_of(s, 16, 1, 1023, true).op[KV_OP_ATTENTION].seconds / 32, "decode 16 x 1024");
    ck_assert_int_eq(t.rows[0].status, KVAL_COMPARED);
    /* Batch 1 at 1024 keys holds 4 MiB of K/V, which the 50 MiB L2 serves on replay: shown, not counted. */
    near(t.rows[1].predicted, step_of(s, 1, 1, 1023, true).op[KV_OP_ATTENTION].seconds / 32, "decode 1 x 1024");
    ck_assert_int_eq(t.rows[1].status, KVAL_EXCLUDED);
    ck_assert_msg(strstr(t.rows[1].note, "L2"), "%s", t.rows[1].note);
    /* Prefill rows are MHA of 32 heads of 128: Llama-2-7B's attention, one layer of 32, eager,
     * FlashAttention-2 as the sdpa family and cuDNN as the FA3 class. */
    library_scenario("llama-2-7b", 1, s);
    s->engine.attn_kernel = SCN_AK_SDPA;
    near(t.rows[2].predicted, step_of(s, 1, 4096, 0, false).op[KV_OP_ATTENTION].seconds / 32, "prefill flash 4096");
    s->engine.attn_kernel = SCN_AK_FLASH3;
    near(t.rows[3].predicted, step_of(s, 1, 4096, 0, false).op[KV_OP_ATTENTION].seconds / 32, "prefill cudnn 4096");
    ck_assert_int_eq(t.rows[3].cls, KVAL_ATTN_PREFILL_CUDNN);
    ck_assert_int_eq(t.rows[4].status, KVAL_SKIPPED);   /* nan: the backend failed on the device */
    ck_assert(isnan(t.rows[4].predicted));
    /* Step rows: the device time of kv_step_time (no scheduler in the probe) at the captured batch. */
    library_scenario("llama-3-8b", 1, s);
    near(t.rows[5].predicted, step_of(s, 8, 1, 1023, true).gpu_seconds, "llama-3-8b step");
    ck_assert_int_eq(t.rows[5].status, KVAL_COMPARED);
    /* One GPU's shard of Llama-3-70B at TP8 with no all-reduce: the TP8 step less its all-reduces. */
    library_scenario("llama-3-70b", 8, s);
    kv_step_cost k = step_of(s, 8, 1, 1023, true);
    ck_assert(k.op[KV_OP_ALLREDUCE].seconds > 0);
    near(t.rows[6].predicted, k.gpu_seconds - k.op[KV_OP_ALLREDUCE].seconds, "llama-3-70b shard");
    /* Eager rows are predicted without a graph and not counted; an unknown model is skipped. */
    library_scenario("llama-3-8b", 1, s);
    near(t.rows[7].predicted, step_of(s, 8, 1, 1023, false).gpu_seconds, "llama-3-8b eager");
    ck_assert_int_eq(t.rows[7].status, KVAL_EXCLUDED);
    ck_assert_int_eq(t.rows[8].status, KVAL_SKIPPED);
    ck_assert_msg(strstr(t.rows[8].note, "mistral-7b"), "%s", t.rows[8].note);
    free(s);
    kval_table_free(&t);
}
END_TEST

START_TEST(summary_counts_and_medians)
{
    /* Errors set by hand: gemm bf16 +5 %, -15 %, +30 % and one excluded row; step -25 %. */
    kval_row r[5];
    memset(r, 0, sizeof r);
    double err[] = {0.05, -0.15, 0.30, 0.01, -0.25};
    for (int i = 0; i < 5; i++) { r[i].cls = KVAL_GEMM_BF16; r[i].error = err[i]; r[i].status = KVAL_COMPARED; }
    r[3].status = KVAL_EXCLUDED;
    r[4].cls = KVAL_STEP;
    kval_table t = {5, 5, r};
    kval_summary s[KVAL_CLASS_COUNT + 1];
    kval_table_summarise(&t, s);
    const kval_summary *g = &s[KVAL_GEMM_BF16], *a = &s[KVAL_CLASS_COUNT];
    ck_assert_int_eq(g->compared, 3);
    ck_assert_int_eq(g->excluded, 1);
    ck_assert_int_eq(g->within10, 1);
    ck_assert_int_eq(g->within20, 2);
    ck_assert_double_eq_tol(g->median_abs, 0.15, 1e-15);
    ck_assert_double_eq_tol(g->median, 0.05, 1e-15);
    /* all: |errors| 0.05, 0.15, 0.25, 0.30: the median of four is the mean of the middle two. */
    ck_assert_int_eq(a->compared, 4);
    ck_assert_double_eq_tol(a->median_abs, 0.20, 1e-15);
    ck_assert_double_eq_tol(a->median, (-0.15 + 0.05) / 2, 1e-15);
    ck_assert(isnan(s[KVAL_GEMM_FP8].median_abs));
    ck_assert_int_eq(s[KVAL_GEMM_FP8].compared, 0);
}
END_TEST

START_TEST(cli_end_to_end)
{
    static char out[262144], errs[4096];
    char args[1200];
    /* The H200 measurements themselves: every file reads, every row is predicted. */
    snprintf(args, sizeof args, "validate-kernels '%s/../validation/h200-2026-11-30' --format csv", getenv("KVPLAN_TESTS"));
    ck_assert_int_eq(t_run(args, out, sizeof out, errs, sizeof errs), 0);
    ck_assert_msg(strstr(out, "gemm.csv,2,gemm bf16,llama3-8b qkv 1x6144x4096 bf16,") && strstr(out, "step.csv,19,step (graph)"),
                  "%.2000s", out);
    snprintf(args, sizeof args, "validate-kernels '%s/../validation/h200-2026-11-30'", getenv("KVPLAN_TESTS"));
    ck_assert_int_eq(t_run(args, out, sizeof out, errs, sizeof errs), 0);
    ck_assert_msg(strstr(out, "Per class") && strstr(out, "attn prefill (cuDNN vs FA3-class)"), "%.2000s", out);
    /* Broken input: 65 with the location; a missing folder 66; no folder 64. */
    const char *d = folder(GEMM_HEAD "q,bf16,1,6144,4096,1.5e-05,,\n", GEMM_HEAD, ATTN_HEAD, STEP_HEAD "llama3-8b,1,x,graph,1\n");
    snprintf(args, sizeof args, "validate-kernels '%s'", d);
    int rc = t_run(args, out, sizeof out, errs, sizeof errs);
    folder_remove();
    ck_assert_int_eq(rc, 65);
    ck_assert_msg(strstr(errs, "step.csv:2:13: context: expected a whole number"), "%s", errs);
    ck_assert_int_eq(t_run("validate-kernels /nonexistent-kernels", out, sizeof out, errs, sizeof errs), 66);
    ck_assert_msg(strstr(errs, "/nonexistent-kernels/gemm.csv: cannot open"), "%s", errs);
    ck_assert_int_eq(t_run("validate-kernels", out, sizeof out, errs, sizeof errs), 64);
    ck_assert_int_eq(t_run("validate-kernels a b", out, sizeof out, errs, sizeof errs), 64);
}
END_TEST

Suite *suite_kernels(void)
{
    Suite *s = suite_create("kernels");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, broken_files_give_located_errors);
    tcase_add_test(tc, gemm_rows_match_hand_computations);
    tcase_add_test(tc, attention_and_step_rows_are_the_models_ops);
    tcase_add_test(tc, summary_counts_and_medians);
    tcase_add_test(tc, cli_end_to_end);
    suite_add_tcase(s, tc);
    return s;
}
