/* plan_kernels.c: the kernel-level check against measured GPU kernels (see plan_kernels.h). */
#include "plan_kernels.h"
#include "plan_reader.h"
#include "../model/kv_model.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

const char *const KVAL_FILE_NAMES[] = {"gemm.csv", "gemm_map.csv", "attn.csv", "step.csv"};
const char *const KVAL_STATUS_NAMES[] = {"compared", "excluded", "skipped"};

const char *kval_class_name(kval_class c)
{
    static const char *const N[] = {"gemm bf16", "gemm fp8", "attn decode (FA2)", "attn prefill (FA2)",
                                    "attn decode (cuDNN vs FA3-class)", "attn prefill (cuDNN vs FA3-class)",
                                    "step (graph)", "all"};
    return c <= KVAL_CLASS_COUNT ? N[c] : "?";
}

/* ---- Reading ---- */

/* The columns each file must have (others are ignored: tflops, weight_gbps and kv_gbps are
 * derived from these). */
enum { MAX_COLS = 9 };
static const char *const COLUMNS[KVAL_FILE_COUNT][MAX_COLS + 1] = {
    [KVAL_FILE_GEMM] = {"label", "dtype", "M", "N", "K", "seconds", NULL},
    [KVAL_FILE_GEMM_MAP] = {"label", "dtype", "M", "N", "K", "seconds", NULL},
    [KVAL_FILE_ATTN] = {"kind", "backend", "batch", "q_len", "kv_len", "q_heads", "kv_heads", "head_dim", "seconds", NULL},
    [KVAL_FILE_STEP] = {"model", "batch", "context", "mode", "seconds", NULL},
};


/* Splits a line at commas in place, trimming spaces around each field; col[i] is the 1-based
 * column where field i's text starts. A '#' ends the line's data (the probe writes a comment
 * after a row a backend could not run). Returns the number of fields (may exceed max: the rest
 * are not stored). */
static int split(char *line, char **f, int *col, int max)
{
    char *hash = strchr(line, '#');
    if (hash) *hash = 0;
    int k = 0;
    char *p = line;
    for (;;) {
        while (*p == ' ' || *p == '\t') p++;
        char *start = p;
        while (*p && *p != ',') p++;
        char *end = p;
        while (end > start && (end[-1] == ' ' || end[-1] == '\t')) end--;
        bool last = !*p;
        *end = 0;
        if (k < max) { f[k] = start; col[k] = (int)(start - line) + 1; }
        k++;
        if (last) break;
        p++;
    }
    return k;
}

static int whole(plan_reader *rd, const char *v, int col, const char *field, long lo, long hi, long *out)
{
    char *end;
    errno = 0;
    long x = strtol(v, &end, 10);
    if (!*v || end == v || *end || errno || x < lo || x > hi)
        return plan_reader_bad(rd, col, field, "expected a whole number in %ld..%ld, found '%.40s'", lo, hi, v);
    *out = x;
    return 0;
}

/* A time in seconds > 0, or "nan": the probe's mark for a kernel that did not run. */
static int seconds(plan_reader *rd, const char *v, int col, double *out)
{
    if (!strcmp(v, "nan")) { *out = NAN; return 0; }
    char *end;
    errno = 0;
    double x = strtod(v, &end);
    if (!*v || end == v || *end || errno || !(x > 0) || !isfinite(x))
        return plan_reader_bad(rd, col, "seconds", "expected a time in seconds > 0 (or nan: not measured), found '%.40s'", v);
    *out = x;
    return 0;
}

static int label(plan_reader *rd, const char *v, int col, const char *field, char *dst, size_t cap)
{
    if (!*v) return plan_reader_bad(rd, col, field, "is empty");
    if (strlen(v) >= cap) return plan_reader_bad(rd, col, field, "longer than %zu characters", cap - 1);
    snprintf(dst, cap, "%s", v);
    return 0;
}

#define DIM_MAX 10000000L   /* no dimension of a measured kernel comes near ten million */

static int parse_gemm(plan_reader *rd, char **g, const int *gc, kval_row *r)
{
    if (label(rd, g[0], gc[0], "label", r->label, sizeof r->label)) return -1;
    if (scn_dtype_parse(g[1], &r->dtype) || (r->dtype != SCN_DTYPE_BF16 && r->dtype != SCN_DTYPE_FP8))
        return plan_reader_bad(rd, gc[1], "dtype", "expected bf16 or fp8, found '%.40s'", g[1]);
    if (whole(rd, g[2], gc[2], "M", 1, DIM_MAX, &r->M) || whole(rd, g[3], gc[3], "N", 1, DIM_MAX, &r->N) ||
        whole(rd, g[4], gc[4], "K", 1, DIM_MAX, &r->K) || seconds(rd, g[5], gc[5], &r->measured))
        return -1;
    r->cls = r->dtype == SCN_DTYPE_FP8 ? KVAL_GEMM_FP8 : KVAL_GEMM_BF16;
    snprintf(r->shape, sizeof r->shape, "%.50s %ldx%ldx%ld %s", r->label, r->M, r->N, r->K, scn_dtype_name(r->dtype));
    return 0;
}

static int parse_attn(plan_reader *rd, char **g, const int *gc, kval_row *r)
{
    if (!strcmp(g[0], "decode")) r->decode = true;
    else if (strcmp(g[0], "prefill")) return plan_reader_bad(rd, gc[0], "kind", "expected decode or prefill, found '%.40s'", g[0]);
    if (!strcmp(g[1], "cudnn")) r->cudnn = true;
    else if (strcmp(g[1], "flash")) return plan_reader_bad(rd, gc[1], "backend", "expected flash or cudnn, found '%.40s'", g[1]);
    snprintf(r->label, sizeof r->label, "%s", g[1]);
    if (whole(rd, g[2], gc[2], "batch", 1, 65536, &r->batch) || whole(rd, g[3], gc[3], "q_len", 1, DIM_MAX, &r->q_len) ||
        whole(rd, g[4], gc[4], "kv_len", 1, DIM_MAX, &r->kv_len) ||
        whole(rd, g[5], gc[5], "q_heads", 1, 4096, &r->q_heads) || whole(rd, g[6], gc[6], "kv_heads", 1, 4096, &r->kv_heads) ||
        whole(rd, g[7], gc[7], "head_dim", 1, 4096, &r->head_dim) || seconds(rd, g[8], gc[8], &r->measured))
        return -1;
    if (r->decode && r->q_len != 1) return plan_reader_bad(rd, gc[3], "q_len", "a decode row computes one query row per sequence: expected 1");
    if (r->kv_len < r->q_len) return plan_reader_bad(rd, gc[4], "kv_len", "fewer keys (%ld) than query rows (%ld)", r->kv_len, r->q_len);
    /* The model walks a prefill's query tiles one by one: bound the work a row can ask for. */
    if ((double)r->batch * (double)r->q_len > 16777216.0)
        return plan_reader_bad(rd, gc[3], "q_len", "batch x q_len = %.0f query rows: more than 16777216", (double)r->batch * (double)r->q_len);
    if (r->q_heads % r->kv_heads) return plan_reader_bad(rd, gc[6], "kv_heads", "must divide q_heads (%ld)", r->q_heads);
    r->cls = r->decode ? (r->cudnn ? KVAL_ATTN_DECODE_CUDNN : KVAL_ATTN_DECODE)
                       : (r->cudnn ? KVAL_ATTN_PREFILL_CUDNN : KVAL_ATTN_PREFILL);
    snprintf(r->shape, sizeof r->shape, "%s %s batch %ld x %ld over %ld keys, %ld/%ld heads of %ld",
             r->decode ? "decode" : "prefill", r->label, r->batch, r->q_len, r->kv_len, r->q_heads, r->kv_heads, r->head_dim);
    return 0;
}

static int parse_step(plan_reader *rd, char **g, const int *gc, kval_row *r)
{
    if (label(rd, g[0], gc[0], "model", r->label, sizeof r->label)) return -1;
    if (whole(rd, g[1], gc[1], "batch", 1, 65536, &r->batch) || whole(rd, g[2], gc[2], "context", 1, DIM_MAX, &r->context))
        return -1;
    if (!strcmp(g[3], "graph")) r->graph = true;
    else if (strcmp(g[3], "eager")) return plan_reader_bad(rd, gc[3], "mode", "expected graph or eager, found '%.40s'", g[3]);
    if (seconds(rd, g[4], gc[4], &r->measured)) return -1;
    r->cls = KVAL_STEP;
    snprintf(r->shape, sizeof r->shape, "%.50s decode batch %ld at %ld, %s", r->label, r->batch, r->context, g[3]);
    return 0;
}

static int push(kval_table *t, const kval_row *r)
{
    if (t->n == t->cap) {
        int cap = t->cap ? t->cap * 2 : 256;
        kval_row *nr = realloc(t->rows, sizeof *nr * (size_t)cap);
        if (!nr) return -1;
        t->rows = nr;
        t->cap = cap;
    }
    t->rows[t->n++] = *r;
    return 0;
}

static int read_file(const char *dir, kval_file which, kval_table *t, char *err, size_t n)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, KVAL_FILE_NAMES[which]);
    FILE *fp = fopen(path, "r");
    if (!fp) { snprintf(err, n, "%s: cannot open: %s", path, strerror(errno)); return -2; }
    plan_reader rd = {path, 0, err, n};
    const char *const *want = COLUMNS[which];
    int need = 0;
    while (want[need]) need++;
    int map[MAX_COLS];
    int file_cols = 0, rc = -1;
    bool header = false;
    char line[4096];
    while (fgets(line, sizeof line, fp)) {
        rd.line++;
        size_t len = strlen(line);
        if (len == sizeof line - 1 && line[len - 1] != '\n') { plan_reader_bad(&rd, 1, "line", "longer than %zu characters", sizeof line - 2); goto out; }
        while (len && (line[len - 1] == '\n' || line[len - 1] == '\r')) line[--len] = 0;
        const char *s = line;
        while (*s == ' ' || *s == '\t') s++;
        if (!*s || *s == '#') continue;
        int data_end = (int)strcspn(line, "#");   /* where the data ends, before split() cuts the line up */
        char *f[64];
        int col[64];
        int k = split(line, f, col, 64);
        if (k > 64) { plan_reader_bad(&rd, 1, header ? "row" : "header", "more than 64 fields"); goto out; }
        if (!header) {
            for (int c = 0; c < need; c++) map[c] = -1;
            for (int i = 0; i < k; i++) {
                int c = 0;
                while (c < need && strcmp(f[i], want[c])) c++;
                if (c == need) continue;   /* a derived column */
                if (map[c] >= 0) { plan_reader_bad(&rd, col[i], "header", "column '%.40s' appears twice", f[i]); goto out; }
                map[c] = i;
            }
            for (int c = 0; c < need; c++)
                if (map[c] < 0) {
                    plan_reader_bad(&rd, 1, "header", "missing column '%s'", want[c]);
                    goto out;
                }
            file_cols = k;
            header = true;
            continue;
        }
        if (k != file_cols) {
            /* Point at the first field too many, or at the end of a line that stops short. */
            plan_reader_bad(&rd, k > file_cols ? col[file_cols] : data_end + 1, "row", "expected %d comma-separated fields as in the header, found %d",
                file_cols, k);
            goto out;
        }
        char *g[MAX_COLS];
        int gc[MAX_COLS];
        for (int c = 0; c < need; c++) { g[c] = f[map[c]]; gc[c] = col[map[c]]; }
        kval_row r;
        memset(&r, 0, sizeof r);
        r.file = which;
        r.line = rd.line;
        r.bound = "";
        int pr = which == KVAL_FILE_ATTN ? parse_attn(&rd, g, gc, &r)
               : which == KVAL_FILE_STEP ? parse_step(&rd, g, gc, &r) : parse_gemm(&rd, g, gc, &r);
        if (pr) goto out;
        if (push(t, &r)) { snprintf(err, n, "out of memory"); rc = -3; goto out; }
    }
    if (ferror(fp)) { snprintf(err, n, "%s: cannot read: %s", path, strerror(errno)); rc = -2; goto out; }
    if (!header) { rd.line = 1; plan_reader_bad(&rd, 1, "header", "the file is empty: expected a header line naming the columns"); goto out; }
    rc = 0;
out:
    fclose(fp);
    return rc;
}

int kval_table_read(const char *dir, kval_table *t, char *err, size_t n)
{
    memset(t, 0, sizeof *t);
    for (int f = 0; f < KVAL_FILE_COUNT; f++) {
        int rc = read_file(dir, (kval_file)f, t, err, n);
        if (rc) { kval_table_free(t); return rc; }
    }
    return 0;
}

void kval_table_free(kval_table *t)
{
    if (!t) return;
    free(t->rows);
    memset(t, 0, sizeof *t);
}

/* ---- Predicting ---- */

/* Loads a scenario of `model` at tensor parallelism tp on `hardware` with the bare engine and
 * FlashAttention through the scenario loader (a private temporary file). -1 with err set when
 * it cannot. */
static int load_base(const char *model, int tp, const char *hardware, scn_scenario *s, char *err, size_t n)
{
    char text[1024];
    snprintf(text, sizeof text,
             "name: kernel-check-%s\nmodel: %s\nhardware: %s\nengine: bare\n"
             "deployment: {tensor_parallel: %d}\n"
             "workload: {requests: 1, arrival: {process: offline}, prompt_tokens: 1024, output_tokens: 1}\n"
             "options: {attention: [flash], kv_dtype: [bf16]}\n",
             model, model, hardware, tp);
    const char *tmp = getenv("TMPDIR");
    char dir[512], file[600];
    snprintf(dir, sizeof dir, "%s/kvplan-kval-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(dir)) { snprintf(err, n, "%s: cannot create a temporary directory: %s", dir, strerror(errno)); return -1; }
    snprintf(file, sizeof file, "%s/base.yaml", dir);
    int rc = -1;
    FILE *f = fopen(file, "w");
    if (!f || fputs(text, f) < 0) { snprintf(err, n, "%s: cannot write: %s", file, strerror(errno)); if (f) fclose(f); goto out; }
    if (fclose(f)) { snprintf(err, n, "%s: cannot write: %s", file, strerror(errno)); goto out; }
    scn_error e;
    if (scn_scenario_load(file, NULL, 0, s, &e) != SCN_OK) {
        snprintf(err, n, "building the %s on %s scenario from the library: %.100s%s%.300s", model, hardware, e.path,
                 e.path[0] ? ": " : "", e.msg);
        goto out;
    }
    rc = 0;
out:
    unlink(file);
    rmdir(dir);
    return rc;
}

/* Decode steps in the probes replay a graph captured at their own batch size; the bare profile
 * captures batch 1 only, so the scenario captures exactly the row's batch (or none: eager). */
static void capture(scn_scenario *s, long batch, bool graph)
{
    s->engine.cuda_graphs = graph;
    s->engine.n_graph_sizes = graph ? 1 : 0;
    s->engine.graph_sizes[0] = graph ? (int)batch : 0;
}

static void compared(kval_row *r, double predicted, kv_bound b)
{
    r->predicted = predicted;
    r->bound = kv_bound_name(b);
    r->error = predicted / r->measured - 1;
    if (r->status != KVAL_EXCLUDED) r->status = KVAL_COMPARED;
}

/* One GEMM as the model prices each GEMM of a step, inside a graph (the probe replays a graph
 * of back-to-back calls, so each call pays one kernel boundary). */
static void predict_gemm(kval_row *r, const scn_scenario *s)
{
    const scn_hardware *hw = &s->hardware;
    if (!(hw->flops[r->dtype] > 0)) {
        r->status = KVAL_SKIPPED;
        snprintf(r->note, sizeof r->note, "%s has no %s tensor rate", hw->name, scn_dtype_name(r->dtype));
        return;
    }
    kv_op_cost o = kv_gemm_time(hw, &s->engine, (double)r->M, (double)r->N, (double)r->K, r->dtype,
                                scn_dtype_bytes(r->dtype), true);
    compared(r, o.seconds, o.bound);
    snprintf(r->note, sizeof r->note, "shape efficiency %.3f", o.efficiency);
}

/* The attention op of a one-layer model of the row's heads, over `batch` sequences: a decode
 * row's query attends kv_len keys (kv_len - 1 cached plus its own), a prefill row's q_len
 * queries attend causally over kv_len - q_len cached keys and their own. */
static int predict_attn(kval_row *r, const scn_scenario *base, scn_scenario *s)
{
    *s = *base;
    s->model.layers = 1;
    s->model.sliding_layers = 0;
    s->model.sliding_window = 0;
    s->model.heads = (int)r->q_heads;
    s->model.kv_heads = (int)r->kv_heads;
    s->model.head_dim = (int)r->head_dim;
    s->engine.attn_kernel = r->cudnn ? SCN_AK_FLASH3 : SCN_AK_SDPA;
    /* Decode rows were timed from graph replays, prefill rows eagerly (plan_kernels.h). */
    capture(s, r->batch, r->decode);
    kv_seq_work *w = malloc(sizeof *w * (size_t)r->batch);
    if (!w) return -1;
    for (long i = 0; i < r->batch; i++) w[i] = (kv_seq_work){r->q_len, r->kv_len - r->q_len};
    kv_cache_cfg c = kv_cache_cfg_make(s, SCN_DTYPE_BF16, 0, 0);
    kv_step_cost k = kv_step_time(s, &c, SCN_ATTN_FLASH, w, (int)r->batch);
    free(w);
    const kv_op_cost *a = &k.op[KV_OP_ATTENTION];
    /* A decode replay whose K/V fit the L2 reads them from the cache, not device memory: the
     * model streams them from device memory, as a real step does (the layers' weights evict
     * them between replays there). */
    double kv_bytes = (double)r->batch * r->kv_len * r->kv_heads * r->head_dim * 2.0 * 2.0;
    int k_len = snprintf(r->note, sizeof r->note, "%s", r->cudnn ? "cuDNN: no family in the model, priced as FA3-class"
                                                                 : "FlashAttention-2: the sdpa family");
    if (r->decode && s->hardware.l2_cache > 0 && kv_bytes <= s->hardware.l2_cache) {
        r->status = KVAL_EXCLUDED;
        snprintf(r->note + k_len, sizeof r->note - (size_t)k_len, "; K/V of %.0f MiB fit the %.0f MiB L2, which serves them on replay",
                 kv_bytes / 1048576.0, s->hardware.l2_cache / 1048576.0);
    }
    compared(r, a->seconds, a->bound);
    return 0;
}

/* Step rows: the probe's models and how the library expresses them. The 70B row is one GPU's
 * shard at TP8 without its all-reduces: kv_step_time at tensor_parallel 8 less its all-reduce op. */
static const struct { const char *label; int base; bool minus_allreduce; } STEP_MODELS[] = {
    {"llama3-8b", 0, false}, {"llama3-70b-tp8-shard", 1, true}};

static int predict_step(kval_row *r, const scn_scenario *base, scn_scenario *s)
{
    *s = *base;
    capture(s, r->batch, r->graph);
    kv_seq_work *w = malloc(sizeof *w * (size_t)r->batch);
    if (!w) return -1;
    /* The probe's query attends `context` cached keys; the model's decode row attends its cached
     * context plus its own new key. */
    for (long i = 0; i < r->batch; i++) w[i] = (kv_seq_work){1, r->context - 1};
    kv_cache_cfg c = kv_cache_cfg_make(s, SCN_DTYPE_BF16, 0, 0);
    kv_step_cost k = kv_step_time(s, &c, SCN_ATTN_FLASH, w, (int)r->batch);
    free(w);
    /* Device time: the probe has no scheduler or sampler, so the engine's CPU term has nothing
     * to match; a graph replay's launch is in gpu_seconds. */
    double t = k.gpu_seconds;
    bool shard = s->deployment.tensor_parallel > 1;
    if (shard) t -= k.op[KV_OP_ALLREDUCE].seconds;
    int len = snprintf(r->note, sizeof r->note, "%s at TP%d on %s, engine bare%s", s->model.name, s->deployment.tensor_parallel,
                       s->hardware.name, shard ? ", less its all-reduces" : "");
    if (!r->graph) {
        r->status = KVAL_EXCLUDED;
        snprintf(r->note + len, sizeof r->note - (size_t)len,
                 "; eager: PyTorch's per-call dispatch from Python, not an engine's launch path");
    }
    compared(r, t, k.bound);
    return 0;
}

int kval_table_predict(kval_table *t, const char *hardware, char *err, size_t n)
{
    if (!hardware) hardware = "h200";
    int rc = -1;
    /* Scenarios are large: on the heap. [0] llama-3-8b, [1] llama-3-70b at TP8, [2] scratch. */
    scn_scenario *s = calloc(3, sizeof *s);
    if (!s) { snprintf(err, n, "out of memory"); return -1; }
    if (load_base("llama-3-8b", 1, hardware, &s[0], err, n) || load_base("llama-3-70b", 8, hardware, &s[1], err, n)) goto out;
    for (int i = 0; i < t->n; i++) {
        kval_row *r = &t->rows[i];
        r->status = KVAL_COMPARED;
        r->predicted = r->error = NAN;
        r->bound = "";
        r->note[0] = 0;
        if (isnan(r->measured)) {
            r->status = KVAL_SKIPPED;
            snprintf(r->note, sizeof r->note, "not measured: the probe recorded nan (the backend failed on the device)");
            continue;
        }
        int pr = 0;
        switch (r->file) {
        case KVAL_FILE_GEMM:
        case KVAL_FILE_GEMM_MAP: predict_gemm(r, &s[0]); break;
        case KVAL_FILE_ATTN: pr = predict_attn(r, &s[0], &s[2]); break;
        default: {
            size_t m = 0, nm = sizeof STEP_MODELS / sizeof STEP_MODELS[0];
            while (m < nm && strcmp(r->label, STEP_MODELS[m].label)) m++;
            if (m == nm) {
                r->status = KVAL_SKIPPED;
                snprintf(r->note, sizeof r->note, "no scenario for model '%.40s' (known: llama3-8b, llama3-70b-tp8-shard)", r->label);
                continue;
            }
            pr = predict_step(r, &s[STEP_MODELS[m].base], &s[2]);
            break;
        }
        case KVAL_FILE_COUNT: break;
        }
        if (pr) { snprintf(err, n, "out of memory"); goto out; }
    }
    rc = 0;
out:
    free(s);
    return rc;
}

/* ---- Summary ---- */

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
    if (n <= 0) return NAN;
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

void kval_table_summarise(const kval_table *t, kval_summary out[KVAL_CLASS_COUNT + 1])
{
    double *abs_e = malloc(sizeof *abs_e * (size_t)(t->n > 0 ? t->n : 1));
    double *sig_e = malloc(sizeof *sig_e * (size_t)(t->n > 0 ? t->n : 1));
    for (int k = 0; k <= KVAL_CLASS_COUNT; k++) {
        kval_summary *s = &out[k];
        memset(s, 0, sizeof *s);
        int m = 0;
        for (int i = 0; i < t->n; i++) {
            const kval_row *r = &t->rows[i];
            if (k < KVAL_CLASS_COUNT && r->cls != (kval_class)k) continue;
            if (r->status == KVAL_SKIPPED) { s->skipped++; continue; }
            if (r->status == KVAL_EXCLUDED) { s->excluded++; continue; }
            s->compared++;
            double a = fabs(r->error);
            s->within10 += a <= 0.10;
            s->within20 += a <= 0.20;
            if (abs_e && sig_e) { abs_e[m] = a; sig_e[m] = r->error; m++; }
        }
        s->median_abs = abs_e && sig_e ? median(abs_e, m) : NAN;
        s->median = abs_e && sig_e ? median(sig_e, m) : NAN;
    }
    free(abs_e);
    free(sig_e);
}
