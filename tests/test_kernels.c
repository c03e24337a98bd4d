/* test_kernels.c: the validate-kernels check (planner/plan_kernels*.c): located errors for
 * broken measurement files (each of the eight), GEMM, int4 and grouped expert GEMM rows against
 * hand computations from h200.yaml and the bare engine profile, attention, step and prefill rows
 * against the cost model called on whole library models (the prefill forward's replaced `rest`
 * by hand), the summary and largest-gap arithmetic on errors set by hand, and the command end to
 * end on the H200 measurements in validation/h200-2026-11-30/. */
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
#define PREFILL_HEAD "model,dtype,tokens,part,mode,seconds\n"
#define INT4_HEAD "label,kernel,group,M,N,K,seconds,weight_bytes,weight_gbps\n"
#define MOE_HEAD "label,experts,rows_per_expert,N,K,seconds,weight_gbps,tflops\n"

/* A file that folder_of leaves out (NULL there means: the file with its header only). A
 * writable object, so no compiler can fold it into an equal string literal (clang merged a
 * `static const char[] = ""` with the "" of an empty file's test, which then went missing). */
static char missing_mark[1];
#define MISSING ((const char *)missing_mark)

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

/* A fresh measurement folder with the given files, in KVAL_FILE_NAMES' order: NULL writes the
 * file's header alone, MISSING leaves the file out. */
static const char *folder_of(const char *const text[KVAL_FILE_COUNT])
{
    static const char *const HEADS[KVAL_FILE_COUNT] = {GEMM_HEAD, GEMM_HEAD, ATTN_HEAD, STEP_HEAD,
                                                       PREFILL_HEAD, INT4_HEAD, MOE_HEAD, STEP_HEAD};
    snprintf(set_dir, sizeof set_dir, "/tmp/kvplan-kval-test-XXXXXX");
    ck_assert(mkdtemp(set_dir) != NULL);
    for (int f = 0; f < KVAL_FILE_COUNT; f++) {
        if (text[f] == MISSING) continue;
        write_file(KVAL_FILE_NAMES[f], text[f] ? text[f] : HEADS[f]);
    }
    return set_dir;
}

/* The first four files (NULL: left out), the four later ones with their headers only. */
static const char *folder(const char *gemm, const char *map, const char *attn, const char *step)
{
    const char *text[KVAL_FILE_COUNT] = {gemm ? gemm : MISSING, map ? map : MISSING, attn ? attn : MISSING,
                                         step ? step : MISSING};
    return folder_of(text);
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
static void broken_dir(const char *dir, int want, const char *msg)
{
    kval_table t;
    char err[1024];
    int rc = kval_table_read(dir, &t, err, sizeof err);
    folder_remove();
    ck_assert_msg(rc == want, "rc %d (want %d): %s", rc, want, err);
    ck_assert_msg(strstr(err, msg), "'%s' lacks '%s'", err, msg);
    ck_assert_int_eq(t.n, 0);
    ck_assert(t.rows == NULL);
}

static void broken(const char *gemm, const char *map, const char *attn, const char *step, int want, const char *msg)
{
    broken_dir(folder(gemm, map, attn, step), want, msg);
}

/* One of the four later files broken, the rest well formed (headers only). */
static void broken_new(kval_file f, const char *text, int want, const char *msg)
{
    const char *files[KVAL_FILE_COUNT] = {0};
    files[f] = text;
    broken_dir(folder_of(files), want, msg);
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

    /* The four later files: missing, bad headers and one malformed row each, at its column. */
    /* The four later files may be absent (a folder from the first session, such as edges/):
     * no rows from them, and the table says which. */
    const char *files[KVAL_FILE_COUNT] = {G, G, A, S, MISSING, MISSING, MISSING, MISSING};
    kval_table t;
    char err[1024];
    int rc = kval_table_read(folder_of(files), &t, err, sizeof err);
    folder_remove();
    ck_assert_msg(rc == 0, "%s", err);
    ck_assert_int_eq(t.n, 2);   /* G in gemm.csv and gemm_map.csv */
    ck_assert(!t.absent[KVAL_FILE_GEMM] && t.absent[KVAL_FILE_PREFILL] && t.absent[KVAL_FILE_STEP_CTX]);
    kval_table_free(&t);
    broken_new(KVAL_FILE_PREFILL, PREFILL_HEAD "llama3-8b,bf16,128,layer_x,graph,1e-05\n", -1,
               "prefill.csv:2:20: part: expected forward, layer_qkv, layer_o, layer_gate_up, layer_down, layer_attention or "
               "layer_rest, found 'layer_x'");
    broken_new(KVAL_FILE_PREFILL, PREFILL_HEAD "llama3-8b,int4,128,forward,graph,1e-02\n", -1,
               "prefill.csv:2:11: dtype: expected bf16 or fp8, found 'int4'");
    broken_new(KVAL_FILE_PREFILL, PREFILL_HEAD "llama3-8b,bf16,0,forward,graph,1e-02\n", -1,
               "prefill.csv:2:16: tokens: expected a whole number in 1..16777216, found '0'");
    broken_new(KVAL_FILE_PREFILL, PREFILL_HEAD "llama3-8b,bf16,128,forward,replay,1e-02\n", -1,
               "prefill.csv:2:28: mode: expected graph or eager, found 'replay'");
    broken_new(KVAL_FILE_INT4, "label,kernel,M,N,K,seconds\n", -1, "int4.csv:1:1: header: missing column 'group'");
    broken_new(KVAL_FILE_INT4, INT4_HEAD "q,marlin,128,1,4096,4096,1e-05,,\n", -1,
               "int4.csv:2:3: kernel: expected tinygemm or cublas-bf16, found 'marlin'");
    broken_new(KVAL_FILE_INT4, INT4_HEAD "q,tinygemm,100,1,4096,4096,1e-05,,\n", -1, "int4.csv:2:12: group: must divide K (4096)");
    broken_new(KVAL_FILE_INT4, INT4_HEAD "q,tinygemm,0,1,4096,4096,1e-05,,\n", -1,
               "int4.csv:2:12: group: a tinygemm row needs a group size of at least 1");
    broken_new(KVAL_FILE_INT4, INT4_HEAD "q,cublas-bf16,32,1,4096,4096,1e-05,,\n", -1,
               "int4.csv:2:15: group: expected 0 for cublas-bf16 (no groups), found 32");
    broken_new(KVAL_FILE_INT4, INT4_HEAD "q,tinygemm,32,0,4096,4096,1e-05,,\n", -1,
               "int4.csv:2:15: M: 0 rows with a measured time: expected 1 or more");
    broken_new(KVAL_FILE_MOE, MOE_HEAD "e,0,1,4096,7168,1e-04,,\n", -1,
               "moe.csv:2:3: experts: expected a whole number in 1..65536, found '0'");
    broken_new(KVAL_FILE_MOE, MOE_HEAD "e,32,1,4096,7168,slow,,\n", -1, "moe.csv:2:18: seconds: expected a time in seconds > 0");
    broken_new(KVAL_FILE_MOE, MOE_HEAD "e,32,1,4096,7168,1e-04,,,\n", -1, "moe.csv:2:26: row: expected 8 comma-separated fields");
    broken_new(KVAL_FILE_STEP_CTX, STEP_HEAD "llama3-8b,16,4096,graph\n", -1,
               "step_ctx.csv:2:24: row: expected 5 comma-separated fields as in the header, found 4");
    broken_new(KVAL_FILE_STEP_CTX, STEP_HEAD "llama3-8b,16,4096,replay,0.008\n", -1,
               "step_ctx.csv:2:19: mode: expected graph or eager, found 'replay'");
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

/* Reads and predicts a folder of all eight files (NULL: the header alone). */
static void predicted_of(const char *const files[KVAL_FILE_COUNT], kval_table *t)
{
    char err[1024];
    int rc = kval_table_read(folder_of(files), t, err, sizeof err);
    folder_remove();
    ck_assert_msg(rc == 0, "%s", err);
    ck_assert_msg(kval_table_predict(t, NULL, err, sizeof err) == 0, "%s", err);
}

START_TEST(int4_and_moe_rows_match_hand_computations)
{
    const char *files[KVAL_FILE_COUNT] = {0};
    files[KVAL_FILE_INT4] = INT4_HEAD "llama2-7b o,tinygemm,128,1,4096,4096,6.7621e-06,8912896,1318.1\n"
                                      "llama2-7b gate_up,tinygemm,32,16,22016,4096,1.0377e-04,56360960,543.1\n"
                                      "llama2-7b o,cublas-bf16,0,1,4096,4096,1.3237e-05,33554432,2534.8\n"
                                      "llama2-7b o,tinygemm,32,0,4096,4096,nan,nan,nan  # RuntimeError\n";
    files[KVAL_FILE_MOE] = MOE_HEAD "deepseek-v3 ep8 gate_up,32,1,4096,7168,6.4130e-04,2930.0,2.93\n";
    kval_table t;
    predicted_of(files, &t);
    ck_assert_int_eq(t.n, 5);
    const double bw = 4.8e12 * 0.80, bf16 = 989e12 * 0.75, boundary = 3e-6;
    /* tinygemm int4 at M = 1, groups of 128: the model's W4A16 is the library's int4 format,
     * 0.5 B a weight plus an fp16 scale and a 4-bit zero per 128 (0.5 + 2.5/128 B), in bf16 math.
     * Shape (as the gemm test's): rows pad to 8, 4096 / 128 = 32 column tiles, 4096 / 64 = 64 K
     * stages, split-K min(64, floor(132 / 32)) = 4: 128 units in one wave, 16 stages each:
     * e = 4096·4096 / (132·8·128·64·16) = 4/33. t_m = (4096²·0.51953 + 2·4096·2) B / 3.84 TB/s
     * = 2.274 us, t_c = 0.373 us: 2.305 us, plus the 3 us boundary, which then binds. */
    double e = 4.0 / 33.0, wb = 0.5 + 2.5 / 128;
    double tc = 2.0 * 4096 * 4096 / (bf16 * e), tm = (4096.0 * 4096 * wb + 1.0 * (4096 + 4096) * 2) / bw;
    double want = sqrt(tc * tc + tm * tm) + boundary;   /* 5.305 us */
    ck_assert_msg(fabs(t.rows[0].predicted - want) <= 1e-12 * want, "%.10g vs %.10g", t.rows[0].predicted, want);
    ck_assert_str_eq(t.rows[0].bound, "overhead");
    ck_assert_int_eq(t.rows[0].cls, KVAL_INT4);
    ck_assert_int_eq(t.rows[0].status, KVAL_COMPARED);
    ck_assert_msg(strstr(t.rows[0].note, "W4A16 at 0.5195 B a weight (tinygemm stores 0.5312)"), "%s", t.rows[0].note);
    /* Groups of 32 at M = 16: 0.5 + 2.5/32 B a weight, memory-bound, at the shape's own efficiency. */
    scn_scenario *s = malloc(sizeof *s);
    ck_assert(s != NULL);
    library_scenario("llama-3-8b", 1, s);
    e = kv_gemm_shape_efficiency(&s->hardware, 16, 22016, 4096, SCN_DTYPE_BF16);
    wb = 0.5 + 2.5 / 32;
    tc = 2.0 * 16 * 22016 * 4096 / (bf16 * e);
    tm = (22016.0 * 4096 * wb + 16.0 * (22016 + 4096) * 2) / bw;
    want = sqrt(tc * tc + tm * tm) + boundary;
    ck_assert_msg(fabs(t.rows[1].predicted - want) <= 1e-12 * want, "%.10g vs %.10g", t.rows[1].predicted, want);
    ck_assert_str_eq(t.rows[1].bound, "memory");
    /* The cuBLAS reference row is a bf16 GEMM at 2 B a weight, counted with the bf16 GEMMs. */
    ck_assert_int_eq(t.rows[2].cls, KVAL_GEMM_BF16);
    near(t.rows[2].predicted, kv_gemm_time(&s->hardware, &s->engine, 1, 4096, 4096, SCN_DTYPE_BF16, 2.0, true).seconds,
         "int4.csv bf16 reference");
    /* A row the probe could not run (M = 0, nan) is read and skipped. */
    ck_assert_int_eq(t.rows[3].status, KVAL_SKIPPED);
    /* One grouped GEMM over 32 experts of one row each (DeepSeek-V3's gate_up at EP8): every
     * expert's 4096 x 7168 bf16 weight read once and the flops of all 32 rows at one expert's
     * shape efficiency (32 column tiles, 7168 / 64 = 112 K stages, split-K 4: 128 units of 28
     * stages, e = 4096·7168 / (132·8·128·64·28) = 4/33), in one kernel: one 3 us boundary, not 32.
     * t_m = 32·(4096·7168·2 + (4096 + 7168)·2) B / 3.84 TB/s = 489.4 us. */
    e = 4.0 / 33.0;
    tc = 32 * 2.0 * 4096 * 7168 / (bf16 * e);
    tm = 32 * (4096.0 * 7168 * 2 + 1.0 * (4096 + 7168) * 2) / bw;
    want = sqrt(tc * tc + tm * tm) + boundary;   /* 492.97 us */
    ck_assert_msg(fabs(t.rows[4].predicted - want) <= 1e-12 * want, "%.10g vs %.10g", t.rows[4].predicted, want);
    ck_assert_msg(fabs(t.rows[4].error - (want / 6.4130e-04 - 1)) < 1e-12, "%g", t.rows[4].error);
    ck_assert_int_eq(t.rows[4].cls, KVAL_MOE);
    ck_assert_str_eq(t.rows[4].bound, "memory");
    free(s);
    kval_table_free(&t);
}
END_TEST

START_TEST(prefill_and_long_context_rows_are_the_models_ops)
{
    const char *files[KVAL_FILE_COUNT] = {0};
    files[KVAL_FILE_PREFILL] = PREFILL_HEAD "llama3-8b,bf16,512,forward,graph,1.6793e-02\n"      /* 0 */
                                            "llama3-8b,bf16,512,layer_rest,graph,1.7676e-04\n"   /* 1 */
                                            "llama3-8b,bf16,512,forward,eager,1.8174e-02\n"      /* 2 */
                                            "llama3-70b-tp8-shard,bf16,128,forward,graph,1.4282e-02\n"   /* 3: no rest row */
                                            "llama3-8b,fp8,512,forward,graph,1.2702e-02\n"       /* 4 */
                                            "llama3-8b,fp8,512,layer_rest,graph,1.6991e-04\n"    /* 5 */
                                            "llama3-8b,bf16,512,layer_o,graph,2.7712e-05\n"      /* 6 */
                                            "llama3-8b,bf16,128,layer_o,graph,1.5136e-05\n"      /* 7 */
                                            "llama3-70b-tp8-shard,bf16,2048,layer_qkv,graph,5.8667e-05\n"   /* 8 */
                                            "llama3-8b,fp8,512,layer_gate_up,graph,9.4080e-05\n"   /* 9 */
                                            "llama3-8b,bf16,2048,layer_attention,graph,1.8923e-04\n"   /* 10 */
                                            "mistral-7b,bf16,512,forward,graph,1e-02\n";   /* 11 */
    files[KVAL_FILE_STEP_CTX] = STEP_HEAD "llama3-8b,16,4096,graph,8.2900e-03\n";
    kval_table t;
    predicted_of(files, &t);
    ck_assert_int_eq(t.n, 13);
    scn_scenario *s = malloc(sizeof *s);
    ck_assert(s != NULL);
    library_scenario("llama-3-8b", 1, s);
    /* The forward: the model's device time for one 512-token prompt over an empty cache. The
     * measured forward's 32 unfused `rest` parts are replaced by the model's terms for them: its
     * norm op plus, a layer, SiLU*mul's 3·512·14336 16-bit bytes at 3.84 TB/s and a 3 us boundary
     * each for SiLU*mul and rotary. */
    kv_step_cost k = step_of(s, 1, 512, 0, false);
    double rest = k.op[KV_OP_NORM].seconds + 32 * (3.0 * 512 * 14336 * 2 / (4.8e12 * 0.80) + 2 * 3e-6);
    double ref = 1.6793e-02 - 32 * 1.7676e-04 + rest;
    near(t.rows[0].predicted, k.gpu_seconds, "8b forward");
    near(t.rows[0].reference, ref, "8b forward reference");
    near(t.rows[0].error, k.gpu_seconds / ref - 1, "8b forward error");
    ck_assert_int_eq(t.rows[0].status, KVAL_COMPARED);
    ck_assert_int_eq(t.rows[0].cls, KVAL_PREFILL_FORWARD);
    /* The rest part is shown against one layer of those terms and never counted. */
    near(t.rows[1].predicted, rest / 32, "8b rest");
    ck_assert_int_eq(t.rows[1].status, KVAL_EXCLUDED);
    ck_assert_int_eq(t.rows[1].cls, KVAL_PREFILL_REST);
    /* Eager forwards are shown, not counted. */
    near(t.rows[2].reference, 1.8174e-02 - 32 * 1.7676e-04 + rest, "8b eager reference");
    ck_assert_int_eq(t.rows[2].status, KVAL_EXCLUDED);
    /* A forward without a rest row at its length keeps its measurement, and is not counted. */
    scn_scenario *s70 = malloc(sizeof *s70);
    ck_assert(s70 != NULL);
    library_scenario("llama-3-70b", 8, s70);
    kv_step_cost k70 = step_of(s70, 1, 128, 0, false);
    near(t.rows[3].predicted, k70.gpu_seconds - k70.op[KV_OP_ALLREDUCE].seconds, "70b shard forward");
    near(t.rows[3].reference, 1.4282e-02, "70b shard reference");
    ck_assert_int_eq(t.rows[3].status, KVAL_EXCLUDED);
    /* fp8: the same model with the library's fp8 weights (fp8 GEMMs on the H200), its own rest row. */
    scn_scenario *s8 = malloc(sizeof *s8);
    ck_assert(s8 != NULL);
    *s8 = *s;
    scn_wformat fp8;
    ck_assert_int_eq(scn_wformat_parse("fp8", &fp8), 0);
    kv_model_set_wformat(&s8->model, &fp8);
    kv_step_cost k8 = step_of(s8, 1, 512, 0, false);
    ck_assert(k8.gpu_seconds < k.gpu_seconds);
    near(t.rows[4].predicted, k8.gpu_seconds, "8b fp8 forward");
    near(t.rows[4].reference, 1.2702e-02 - 32 * 1.6991e-04 + k8.op[KV_OP_NORM].seconds +
                                  32 * (3.0 * 512 * 14336 * 2 / (4.8e12 * 0.80) + 2 * 3e-6), "8b fp8 reference");
    /* GEMM parts: kv_gemm_time at the rank's shape of that GEMM (o: 4096 x 4096). */
    ck_assert_int_eq(t.rows[6].N, 4096);
    ck_assert_int_eq(t.rows[6].K, 4096);
    near(t.rows[6].predicted, kv_gemm_time(&s->hardware, &s->engine, 512, 4096, 4096, SCN_DTYPE_BF16, 2.0, true).seconds, "o 512");
    ck_assert_int_eq(t.rows[6].status, KVAL_COMPARED);
    ck_assert_int_eq(t.rows[6].cls, KVAL_PREFILL_GEMM_BF16);
    /* At 128 tokens o is memory-bound and its 32 MiB weight fits the 50 MiB L2 the replays share. */
    ck_assert_str_eq(t.rows[7].bound, "memory");
    ck_assert_int_eq(t.rows[7].status, KVAL_EXCLUDED);
    ck_assert_msg(strstr(t.rows[7].note, "32 MiB weight fits the 50 MiB L2"), "%s", t.rows[7].note);
    /* The 70B shard's QKV: (64/8 + 2·8/8) heads of 128 = 1280 columns over 8192. */
    ck_assert_int_eq(t.rows[8].N, 1280);
    ck_assert_int_eq(t.rows[8].K, 8192);
    /* fp8 gate_up: 2·14336 columns, fp8 math at one byte a weight. */
    near(t.rows[9].predicted, kv_gemm_time(&s->hardware, &s->engine, 512, 28672, 4096, SCN_DTYPE_FP8, 1.0, true).seconds,
         "fp8 gate_up 512");
    ck_assert_int_eq(t.rows[9].cls, KVAL_PREFILL_GEMM_FP8);
    /* Attention: one layer's causal FlashAttention-2 (the sdpa family) with 32 query heads over 8
     * KV heads: the model's attention op over its 32 layers, / 32. */
    s->engine.attn_kernel = SCN_AK_SDPA;
    near(t.rows[10].predicted, step_of(s, 1, 2048, 0, false).op[KV_OP_ATTENTION].seconds / 32, "attention 2048");
    ck_assert_int_eq(t.rows[10].cls, KVAL_PREFILL_ATTN);
    ck_assert_int_eq(t.rows[11].status, KVAL_SKIPPED);
    /* step_ctx.csv: as step.csv, at 4095 cached tokens plus its own, in a graph at batch 16. */
    library_scenario("llama-3-8b", 1, s);
    near(t.rows[12].predicted, step_of(s, 16, 1, 4095, true).gpu_seconds, "step at 4096");
    ck_assert_int_eq(t.rows[12].cls, KVAL_STEP_CTX);
    ck_assert_int_eq(t.rows[12].status, KVAL_COMPARED);
    free(s);
    free(s70);
    free(s8);
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
    kval_table t = {.n = 5, .cap = 5, .rows = r};
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
    /* Largest gaps: by |error|, compared rows only (row 3 is excluded). */
    int idx[3];
    ck_assert_int_eq(kval_table_largest(&t, KVAL_GEMM_BF16, idx, 2), 2);
    ck_assert_int_eq(idx[0], 2);   /* +30 % */
    ck_assert_int_eq(idx[1], 1);   /* -15 % */
    ck_assert_int_eq(kval_table_largest(&t, KVAL_CLASS_COUNT, idx, 3), 3);
    ck_assert_int_eq(idx[0], 2);
    ck_assert_int_eq(idx[1], 4);   /* -25 % */
    ck_assert_int_eq(idx[2], 1);
    ck_assert_int_eq(kval_table_largest(&t, KVAL_GEMM_FP8, idx, 3), 0);
}
END_TEST

START_TEST(cli_end_to_end)
{
    static char out[262144], errs[4096];
    char args[1200];
    /* The H200 measurements themselves: every file reads, every row is predicted. */
    snprintf(args, sizeof args, "validate-kernels '%s/../validation/h200-2026-11-30' --format csv", getenv("KVPLAN_TESTS"));
    ck_assert_int_eq(t_run(args, out, sizeof out, errs, sizeof errs), 0);
    ck_assert_msg(strstr(out, "gemm.csv,2,gemm bf16,llama3-8b qkv 1x6144x4096 bf16,") && strstr(out, "step.csv,19,step (graph)") &&
                  strstr(out, "prefill.csv,92,\"prefill part rest (unfused, not counted)\"") && strstr(out, "int4.csv,49,gemm bf16") &&
                  strstr(out, "moe.csv,37,moe grouped gemm") && strstr(out, "step_ctx.csv,9,step long context (graph)"),
                  "%.2000s", out);
    snprintf(args, sizeof args, "validate-kernels '%s/../validation/h200-2026-11-30'", getenv("KVPLAN_TESTS"));
    ck_assert_int_eq(t_run(args, out, sizeof out, errs, sizeof errs), 0);
    ck_assert_msg(strstr(out, "Per class") && strstr(out, "attn prefill (cuDNN vs FA3-class)"), "%.2000s", out);
    ck_assert_msg(strstr(out, "Largest gaps per class") && strstr(out, "int4 W4A16 (tinygemm)") &&
                  strstr(out, "moe grouped gemm") && strstr(out, "step long context (graph)") &&
                  strstr(out, "prefill forward (graph, rest replaced)"), "%.2000s", out);
    /* Broken input: 65 with the location; a missing folder 66; no folder 64. */
    const char *d = folder(GEMM_HEAD "q,bf16,1,6144,4096,1.5e-05,,\n", GEMM_HEAD, ATTN_HEAD, STEP_HEAD "llama3-8b,1,x,graph,1\n");
    snprintf(args, sizeof args, "validate-kernels '%s'", d);
    int rc = t_run(args, out, sizeof out, errs, sizeof errs);
    folder_remove();
    ck_assert_int_eq(rc, 65);
    ck_assert_msg(strstr(errs, "step.csv:2:13: context: expected a whole number"), "%s", errs);
    /* A folder of the first four files alone: read, and the output says which files it lacks. */
    d = folder(GEMM_HEAD "q,bf16,1,6144,4096,1.5e-05,,\n", GEMM_HEAD, ATTN_HEAD, STEP_HEAD);
    for (int f = KVAL_FILE_FIRST_OPTIONAL; f < KVAL_FILE_COUNT; f++) {
        char p[400];
        snprintf(p, sizeof p, "%s/%s", d, KVAL_FILE_NAMES[f]);
        unlink(p);
    }
    snprintf(args, sizeof args, "validate-kernels '%s'", d);
    rc = t_run(args, out, sizeof out, errs, sizeof errs);
    folder_remove();
    ck_assert_int_eq(rc, 0);
    ck_assert_msg(strstr(out, "so no rows from them: prefill.csv, int4.csv, moe.csv, step_ctx.csv."), "%.3000s", out);
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
    tcase_add_test(tc, int4_and_moe_rows_match_hand_computations);
    tcase_add_test(tc, prefill_and_long_context_rows_are_the_models_ops);
    tcase_add_test(tc, summary_counts_and_medians);
    tcase_add_test(tc, cli_end_to_end);
    suite_add_tcase(s, tc);
    return s;
}
