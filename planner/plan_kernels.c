/* plan_kernels.c: the kernel-level check against measured GPU kernels (see plan_kernels.h). */
#include "plan_kernels.h"
#include "plan_reader.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *const KVAL_FILE_NAMES[] = {"gemm.csv", "gemm_map.csv", "attn.csv", "step.csv",
                                       "prefill.csv", "int4.csv", "moe.csv", "step_ctx.csv"};
const char *const KVAL_STATUS_NAMES[] = {"compared", "excluded", "skipped"};
const char *const KVAL_PART_NAMES[] = {"forward", "layer_qkv", "layer_o", "layer_gate_up", "layer_down",
                                       "layer_attention", "layer_rest"};

const char *kval_class_name(kval_class c)
{
    static const char *const N[] = {"gemm bf16", "gemm fp8", "attn decode (FA2)", "attn prefill (FA2)",
                                    "attn decode (cuDNN vs FA3-class)", "attn prefill (cuDNN vs FA3-class)",
                                    "step (graph)", "prefill part gemm bf16", "prefill part gemm fp8",
                                    "prefill part attention (FA2)", "prefill part rest (unfused, not counted)",
                                    "prefill forward (graph, rest replaced)", "int4 W4A16 (tinygemm)",
                                    "moe grouped gemm", "step long context (graph)", "all"};
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
    [KVAL_FILE_PREFILL] = {"model", "dtype", "tokens", "part", "mode", "seconds", NULL},
    [KVAL_FILE_INT4] = {"label", "kernel", "group", "M", "N", "K", "seconds", NULL},
    [KVAL_FILE_MOE] = {"label", "experts", "rows_per_expert", "N", "K", "seconds", NULL},
    [KVAL_FILE_STEP_CTX] = {"model", "batch", "context", "mode", "seconds", NULL},
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
    r->cls = r->file == KVAL_FILE_STEP_CTX ? KVAL_STEP_CTX : KVAL_STEP;
    snprintf(r->shape, sizeof r->shape, "%.50s decode batch %ld at %ld, %s", r->label, r->batch, r->context, g[3]);
    return 0;
}

/* A prefill.csv row: one prompt of `tokens` through the model (part forward) or one part of one
 * layer at that length. */
static int parse_prefill(plan_reader *rd, char **g, const int *gc, kval_row *r)
{
    if (label(rd, g[0], gc[0], "model", r->label, sizeof r->label)) return -1;
    if (scn_dtype_parse(g[1], &r->dtype) || (r->dtype != SCN_DTYPE_BF16 && r->dtype != SCN_DTYPE_FP8))
        return plan_reader_bad(rd, gc[1], "dtype", "expected bf16 or fp8, found '%.40s'", g[1]);
    /* The attention part walks the prompt's query tiles: the bound attn.csv's rows have. */
    if (whole(rd, g[2], gc[2], "tokens", 1, 16777216, &r->M)) return -1;
    int p = 0;
    while (p < KVAL_PART_COUNT && strcmp(g[3], KVAL_PART_NAMES[p])) p++;
    if (p == KVAL_PART_COUNT)
        return plan_reader_bad(rd, gc[3], "part", "expected forward, layer_qkv, layer_o, layer_gate_up, layer_down, "
                               "layer_attention or layer_rest, found '%.40s'", g[3]);
    r->part = (kval_part)p;
    if (!strcmp(g[4], "graph")) r->graph = true;
    else if (strcmp(g[4], "eager")) return plan_reader_bad(rd, gc[4], "mode", "expected graph or eager, found '%.40s'", g[4]);
    if (seconds(rd, g[5], gc[5], &r->measured)) return -1;
    r->batch = 1;
    r->cls = r->part == KVAL_PART_FORWARD ? KVAL_PREFILL_FORWARD
           : r->part == KVAL_PART_ATTENTION ? KVAL_PREFILL_ATTN
           : r->part == KVAL_PART_REST ? KVAL_PREFILL_REST
           : r->dtype == SCN_DTYPE_FP8 ? KVAL_PREFILL_GEMM_FP8 : KVAL_PREFILL_GEMM_BF16;
    snprintf(r->shape, sizeof r->shape, "%.50s %s prefill of %ld, %s, %s", r->label, scn_dtype_name(r->dtype), r->M,
             KVAL_PART_NAMES[p], g[4]);
    return 0;
}

/* An int4.csv row: a tinygemm int4 GEMM with groups of `group`, or (kernel cublas-bf16, group 0)
 * the bf16 cuBLAS GEMM of the same shape. A row the probe could not run may carry M = 0 and nan. */
static int parse_int4(plan_reader *rd, char **g, const int *gc, kval_row *r)
{
    if (label(rd, g[0], gc[0], "label", r->label, sizeof r->label)) return -1;
    if (!strcmp(g[1], "tinygemm")) r->int4 = true;
    else if (strcmp(g[1], "cublas-bf16")) return plan_reader_bad(rd, gc[1], "kernel", "expected tinygemm or cublas-bf16, found '%.40s'", g[1]);
    if (whole(rd, g[2], gc[2], "group", 0, DIM_MAX, &r->group) || whole(rd, g[3], gc[3], "M", 0, DIM_MAX, &r->M) ||
        whole(rd, g[4], gc[4], "N", 1, DIM_MAX, &r->N) || whole(rd, g[5], gc[5], "K", 1, DIM_MAX, &r->K) ||
        seconds(rd, g[6], gc[6], &r->measured))
        return -1;
    if (r->int4 && r->group == 0) return plan_reader_bad(rd, gc[2], "group", "a tinygemm row needs a group size of at least 1");
    if (!r->int4 && r->group != 0) return plan_reader_bad(rd, gc[2], "group", "expected 0 for cublas-bf16 (no groups), found %ld", r->group);
    if (r->int4 && r->K % r->group) return plan_reader_bad(rd, gc[2], "group", "must divide K (%ld)", r->K);
    if (r->M == 0 && !isnan(r->measured)) return plan_reader_bad(rd, gc[3], "M", "0 rows with a measured time: expected 1 or more");
    r->dtype = SCN_DTYPE_BF16;
    r->cls = r->int4 ? KVAL_INT4 : KVAL_GEMM_BF16;
    if (r->int4)
        snprintf(r->shape, sizeof r->shape, "%.50s %ldx%ldx%ld int4 g%ld (tinygemm)", r->label, r->M, r->N, r->K, r->group);
    else
        snprintf(r->shape, sizeof r->shape, "%.50s %ldx%ldx%ld bf16 (int4.csv reference)", r->label, r->M, r->N, r->K);
    return 0;
}

/* A moe.csv row: one grouped GEMM over `experts` experts, each with rows_per_expert rows. */
static int parse_moe(plan_reader *rd, char **g, const int *gc, kval_row *r)
{
    if (label(rd, g[0], gc[0], "label", r->label, sizeof r->label)) return -1;
    if (whole(rd, g[1], gc[1], "experts", 1, 65536, &r->experts) ||
        whole(rd, g[2], gc[2], "rows_per_expert", 1, DIM_MAX, &r->M) || whole(rd, g[3], gc[3], "N", 1, DIM_MAX, &r->N) ||
        whole(rd, g[4], gc[4], "K", 1, DIM_MAX, &r->K) || seconds(rd, g[5], gc[5], &r->measured))
        return -1;
    r->dtype = SCN_DTYPE_BF16;
    r->cls = KVAL_MOE;
    snprintf(r->shape, sizeof r->shape, "%.50s %ld experts x %ld rows, %ldx%ld bf16", r->label, r->experts, r->M, r->N, r->K);
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
    if (!fp) {
        if (errno == ENOENT && which >= KVAL_FILE_FIRST_OPTIONAL) { t->absent[which] = true; return 0; }
        snprintf(err, n, "%s: cannot open: %s", path, strerror(errno));
        return -2;
    }
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
        int pr;
        switch (which) {
        case KVAL_FILE_ATTN: pr = parse_attn(&rd, g, gc, &r); break;
        case KVAL_FILE_STEP:
        case KVAL_FILE_STEP_CTX: pr = parse_step(&rd, g, gc, &r); break;
        case KVAL_FILE_PREFILL: pr = parse_prefill(&rd, g, gc, &r); break;
        case KVAL_FILE_INT4: pr = parse_int4(&rd, g, gc, &r); break;
        case KVAL_FILE_MOE: pr = parse_moe(&rd, g, gc, &r); break;
        default: pr = parse_gemm(&rd, g, gc, &r); break;
        }
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

int kval_table_largest(const kval_table *t, kval_class c, int *idx, int max)
{
    /* Insertion into a short sorted list: max is a handful and the table a few hundred rows. */
    int k = 0;
    for (int i = 0; i < t->n; i++) {
        const kval_row *r = &t->rows[i];
        if (r->status != KVAL_COMPARED || (c < KVAL_CLASS_COUNT && r->cls != c)) continue;
        double a = fabs(r->error);
        int j = k < max ? k++ : max;
        while (j > 0 && fabs(t->rows[idx[j - 1]].error) < a) {
            if (j < max) idx[j] = idx[j - 1];
            j--;
        }
        if (j < max) idx[j] = i;
    }
    return k;
}
