/* plan_kernels_predict.c: prices each measured kernel with the cost model's own functions
 * (plan_kernels.h; docs/validation.md, "H200 measurements (2026-11-30)", says why each row is
 * priced as it is). */
#include "plan_kernels.h"
#include "../model/kv_model.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define AB 2.0   /* bytes of a 16-bit activation, as the model counts them */

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
    r->error = predicted / r->reference - 1;
    if (r->status != KVAL_EXCLUDED) r->status = KVAL_COMPARED;
}

/* Appends to the row's note. */
static void note(kval_row *r, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
static void note(kval_row *r, const char *fmt, ...)
{
    size_t len = strlen(r->note);
    if (len + 1 >= sizeof r->note) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->note + len, sizeof r->note - len, fmt, ap);
    va_end(ap);
}

/* One GEMM as the model prices each GEMM of a step, inside a graph (the probe replays a graph
 * of back-to-back calls, so each call pays one kernel boundary), its N x K weight at
 * `weight_bytes` a parameter. */
static kv_op_cost predict_gemm(kval_row *r, const scn_scenario *s, scn_dtype dt, double weight_bytes)
{
    const scn_hardware *hw = &s->hardware;
    kv_op_cost o;
    memset(&o, 0, sizeof o);
    if (!(hw->flops[dt] > 0)) {
        r->status = KVAL_SKIPPED;
        note(r, "%s has no %s tensor rate", hw->name, scn_dtype_name(dt));
        return o;
    }
    o = kv_gemm_time(hw, &s->engine, (double)r->M, (double)r->N, (double)r->K, dt, weight_bytes, true);
    compared(r, o.seconds, o.bound);
    note(r, "shape efficiency %.3f", o.efficiency);
    return o;
}

/* A tinygemm int4 row: the model's W4A16 GEMM, i.e. kv_gemm_time at the weight format's bytes a
 * parameter and the dtype its GEMMs run in (kv_weight_bytes_per_param, kv_gemm_dtype) for the
 * library's `int4` format with the row's group size. */
static void predict_int4(kval_row *r, const scn_scenario *base)
{
    scn_model m = base->model;
    scn_wformat f;
    if (scn_wformat_parse("int4", &f)) {   /* the library always has it; never guess a format */
        r->status = KVAL_SKIPPED;
        note(r, "the library has no int4 weight format");
        return;
    }
    f.group_size = (int)r->group;
    kv_model_set_wformat(&m, &f);
    double wb = kv_weight_bytes_per_param(&m);
    scn_dtype dt = kv_gemm_dtype(&m, &base->hardware);
    kv_op_cost o = predict_gemm(r, base, dt, wb);
    if (r->status == KVAL_SKIPPED) return;
    /* tinygemm keeps a bf16 scale and a bf16 zero per group; the model counts AWQ's fp16 scale
     * and packed 4-bit zero. */
    double w = (double)r->N * r->K;
    note(r, "; W4A16 at %.4f B a weight (tinygemm stores %.4f), %s math; weight read at %.0f GB/s measured, "
            "%.0f GB/s predicted", wb, 0.5 + 4.0 / (double)r->group, scn_dtype_name(dt),
         w * (0.5 + 4.0 / (double)r->group) / r->measured / 1e9, w * wb / o.seconds / 1e9);
}

/* A grouped GEMM over E experts of m rows each: the model prices a MoE layer's grouped GEMMs as
 * one kernel reading every touched expert's weight once, with the flops of all rows at the
 * shape efficiency of one expert's m-row GEMM (model/kv_roofline.c, the MoE MLP). Every
 * expert here has m rows, so that is kv_gemm_time's compute and memory terms for one expert
 * times E (the roofline combination scales with both), plus one kernel's boundary. */
static void predict_moe(kval_row *r, const scn_scenario *s)
{
    const scn_hardware *hw = &s->hardware;
    kv_op_cost o = kv_gemm_time(hw, &s->engine, (double)r->M, (double)r->N, (double)r->K, SCN_DTYPE_BF16, 2.0, true);
    double E = (double)r->experts;
    double tc = E * o.t_compute, tm = E * o.t_memory, gpu = kv_roofline_combine(tc, tm);
    kv_bound b = o.t_overhead > gpu ? KV_BOUND_OVERHEAD : tm >= tc ? KV_BOUND_MEMORY : KV_BOUND_COMPUTE;
    compared(r, gpu + o.t_overhead, b);
    double wbytes = E * (double)r->N * r->K * 2.0;
    note(r, "shape efficiency %.3f at %ld rows; weights (%.2f GB) read at %.0f GB/s measured, %.0f GB/s predicted",
         o.efficiency, r->M, wbytes / 1e9, wbytes / r->measured / 1e9, wbytes / r->predicted / 1e9);
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

/* A decode step (step.csv, step_ctx.csv): kv_step_time on the row's model, at the row's batch
 * and context, captured at that batch when it was replayed from a graph. */
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

/* ---- Prefill (prefill.csv) ---- */

/* The N and K of a layer's GEMM part for one tensor-parallel rank of the model. */
static void part_dims(const scn_scenario *s, kval_part p, long *N, long *K)
{
    const scn_model *m = &s->model;
    int tp = s->deployment.tensor_parallel;
    long h = m->hidden, I = m->intermediate / tp, hd = m->head_dim, H = m->heads / tp;
    switch (p) {
    case KVAL_PART_QKV: *N = (H + 2L * kv_heads_per_rank(m, tp)) * hd; *K = h; break;
    case KVAL_PART_O: *N = h; *K = H * hd; break;
    case KVAL_PART_GATE_UP: *N = 2 * I; *K = h; break;
    default: *N = h; *K = I; break;
    }
}

/* The model's prefill of one S-token prompt over an empty cache on s (one rank's step; the
 * shard rows have no all-reduce, so the op is left out of `device`). */
typedef struct {
    kv_step_cost k;
    double device;      /* s: the step's device time less its all-reduces */
    double rest;        /* s: the model's terms for what the probe's `rest` part runs (below) */
    double exposed;     /* s: launch time the model leaves uncovered beyond the kernel boundaries */
} prefill_cost;

static prefill_cost prefill_of(const scn_scenario *s, long S)
{
    prefill_cost p;
    kv_seq_work w = {S, 0};
    kv_cache_cfg c = kv_cache_cfg_make(s, SCN_DTYPE_BF16, 0, 0);
    p.k = kv_step_time(s, &c, SCN_ATTN_FLASH, &w, 1);
    p.device = p.k.gpu_seconds - (s->deployment.tensor_parallel > 1 ? p.k.op[KV_OP_ALLREDUCE].seconds : 0);
    /* The probe's `rest` is RMSNorm twice, rotary on Q and K, two residual adds and SiLU*mul. The
     * model prices the norms with their residual adds as its norm op (fused kernels), and SiLU*mul
     * and rotary as kernels of their own inside the MLP and QKV ops (their serial_bytes). The
     * comparison counts the norm op, SiLU*mul's 3·S·I 16-bit bytes at the model's bandwidth and a
     * kernel boundary each for SiLU*mul and rotary; rotary's own bytes (the QKV op's serial_bytes,
     * under 1 % of a forward) are not counted (docs/validation.md, "H200 measurements"). */
    const scn_hardware *hw = &s->hardware;
    double L = s->model.layers, I = (double)s->model.intermediate / s->deployment.tensor_parallel;
    double bw = hw->memory_bandwidth * hw->eff_bandwidth;
    p.rest = p.k.op[KV_OP_NORM].seconds + L * (3.0 * (double)S * I * AB / bw + 2.0 * s->engine.graph_kernel);
    /* A prefill is never replayed from a graph in the model; its eager launches show only where
     * an op's kernels launch slower than the GPU runs them. */
    p.exposed = 0;
    for (int op = 0; op < KV_OP_COUNT; op++) {
        if (op == KV_OP_STEP || (op == KV_OP_ALLREDUCE && s->deployment.tensor_parallel > 1)) continue;
        double x = p.k.op[op].t_overhead - p.k.op[op].kernels * s->engine.graph_kernel;
        if (x > 0) p.exposed += x;
    }
    return p;
}

/* The graph-timed `layer_rest` row of the same model, dtype and length; NULL when none. */
static const kval_row *rest_row(const kval_table *t, const kval_row *r)
{
    for (int i = 0; i < t->n; i++) {
        const kval_row *q = &t->rows[i];
        if (q->file == KVAL_FILE_PREFILL && q->part == KVAL_PART_REST && q->graph && q->M == r->M &&
            q->dtype == r->dtype && !strcmp(q->label, r->label) && !isnan(q->measured))
            return q;
    }
    return NULL;
}

static void predict_prefill(kval_row *r, const kval_table *t, const scn_scenario *s, const scn_scenario *bf16_8b,
                            scn_scenario *scratch)
{
    const scn_model *m = &s->model;
    int tp = s->deployment.tensor_parallel;
    const char *shard = tp > 1 ? ", less its all-reduces" : "";
    switch (r->part) {
    case KVAL_PART_QKV:
    case KVAL_PART_O:
    case KVAL_PART_GATE_UP:
    case KVAL_PART_DOWN: {
        part_dims(s, r->part, &r->N, &r->K);
        double wb = kv_weight_bytes_per_param(m);
        kv_op_cost o = predict_gemm(r, s, kv_gemm_dtype(m, &s->hardware), wb);
        if (r->status == KVAL_SKIPPED) return;
        note(r, "; %ldx%ldx%ld", r->M, r->N, r->K);
        double wbytes = (double)r->N * r->K * wb;
        if (r->dtype == SCN_DTYPE_FP8)
            note(r, "; the part casts its bf16 input to fp8 first (one more kernel the model does not price for a dense layer)");
        /* The part is replayed three times over one weight copy (not gemm.csv's rotating copies):
         * a weight that fits the L2 can be served from it where the GEMM waits on memory. */
        if (o.bound == KV_BOUND_MEMORY && s->hardware.l2_cache > 0 && wbytes <= s->hardware.l2_cache) {
            r->status = KVAL_EXCLUDED;
            note(r, "; its %.0f MiB weight fits the %.0f MiB L2 and the model reads it from memory: replays of one copy "
                    "can read it from the L2", wbytes / 1048576.0, s->hardware.l2_cache / 1048576.0);
        }
        if (!r->graph) {
            r->status = KVAL_EXCLUDED;
            note(r, "; eager: PyTorch's per-call dispatch");
        }
        return;
    }
    case KVAL_PART_ATTENTION: {
        /* One layer's causal attention over the prompt with the rank's heads, as attn.csv's
         * FlashAttention-2 rows (the `sdpa` family, which the bare engine runs). */
        r->q_len = r->kv_len = r->M;
        r->q_heads = m->heads / tp;
        r->kv_heads = kv_heads_per_rank(m, tp);
        r->head_dim = m->head_dim;
        r->decode = r->cudnn = false;
        if (predict_attn(r, bf16_8b, scratch)) return;
        note(r, "; %ld/%ld heads of %ld", r->q_heads, r->kv_heads, r->head_dim);
        if (!r->graph) { r->status = KVAL_EXCLUDED; note(r, "; eager"); }
        return;
    }
    case KVAL_PART_REST: {
        prefill_cost p = prefill_of(s, r->M);
        r->status = KVAL_EXCLUDED;
        compared(r, p.rest / m->layers, KV_BOUND_MEMORY);
        note(r, "unfused PyTorch ops (norms, rotary, residual adds, SiLU*mul), against one layer of the model's fused "
                "terms for them (its norm op; the SiLU*mul bytes and a boundary each for it and rotary)");
        return;
    }
    case KVAL_PART_FORWARD:
    case KVAL_PART_COUNT: break;
    }
    /* The whole forward: every layer, then the LM head on the last token (the model: one row's
     * logits), on the bare engine (SDPA FlashAttention-2, as the probe). Its measured `rest`
     * parts are replaced by the model's own terms for them, so the comparison is of the GEMMs,
     * attention and what the model counts around them. */
    prefill_cost p = prefill_of(s, r->M);
    const kval_row *q = rest_row(t, r);
    double L = m->layers;
    int len = snprintf(r->note, sizeof r->note, "%s at TP%d, %s weights, engine bare%s", m->name, tp,
                       scn_dtype_name(r->dtype), shard);
    (void)len;
    if (!q) {
        r->status = KVAL_EXCLUDED;
        r->reference = r->measured;
        compared(r, p.device, p.k.bound);
        note(r, "; no graph-timed layer_rest row at this length: the unfused elementwise ops stay in the measurement");
        return;
    }
    r->reference = r->measured - L * q->measured + p.rest;
    compared(r, p.device, p.k.bound);
    note(r, "; %.3f ms less %.0f x %.1f us unfused rest plus the model's %.3f ms: %.3f ms compared (raw error %+.1f %%)",
         r->measured * 1e3, L, q->measured * 1e6, p.rest * 1e3, r->reference * 1e3, (p.device / r->measured - 1) * 100);
    if (p.exposed > 1e-6) note(r, "; eager launches the model leaves exposed: %.0f us", p.exposed * 1e6);
    if (r->dtype == SCN_DTYPE_FP8) note(r, "; 4 fp8 casts a layer unpriced");
    if (!r->graph) {
        r->status = KVAL_EXCLUDED;
        note(r, "; eager: PyTorch's per-call dispatch");
    }
}

/* The probe's models and how the library expresses them. The shard rows are one GPU's shard
 * at TP8 without its all-reduces: the model at tensor_parallel 8 less its all-reduce op. */
static const struct { const char *label, *model; int tp; } MODELS[] = {
    {"llama3-8b", "llama-3-8b", 1}, {"llama3-70b-tp8-shard", "llama-3-70b", 8}};
enum { N_MODELS = sizeof MODELS / sizeof MODELS[0] };

static int model_of(const char *label)
{
    int m = 0;
    while (m < N_MODELS && strcmp(label, MODELS[m].label)) m++;
    return m < N_MODELS ? m : -1;
}

int kval_table_predict(kval_table *t, const char *hardware, char *err, size_t n)
{
    if (!hardware) hardware = "h200";
    int rc = -1;
    /* Scenarios are large: on the heap. [2m] model m with bf16 weights, [2m + 1] the same with
     * fp8 weights (the library's per-tensor fp8 format), [2 N_MODELS] scratch. */
    scn_scenario *s = calloc(2 * N_MODELS + 1, sizeof *s);
    if (!s) { snprintf(err, n, "out of memory"); return -1; }
    scn_wformat fp8;
    if (scn_wformat_parse("fp8", &fp8)) { snprintf(err, n, "the library has no fp8 weight format"); goto out; }
    for (int m = 0; m < N_MODELS; m++) {
        if (load_base(MODELS[m].model, MODELS[m].tp, hardware, &s[2 * m], err, n)) goto out;
        s[2 * m + 1] = s[2 * m];
        kv_model_set_wformat(&s[2 * m + 1].model, &fp8);
    }
    scn_scenario *scratch = &s[2 * N_MODELS];
    for (int i = 0; i < t->n; i++) {
        kval_row *r = &t->rows[i];
        r->status = KVAL_COMPARED;
        r->predicted = r->error = NAN;
        r->reference = r->measured;
        r->bound = "";
        r->note[0] = 0;
        if (isnan(r->measured)) {
            r->status = KVAL_SKIPPED;
            snprintf(r->note, sizeof r->note, "not measured: the probe recorded nan (the kernel failed on the device)");
            continue;
        }
        int pr = 0, m = -1;
        if (r->file == KVAL_FILE_STEP || r->file == KVAL_FILE_STEP_CTX || r->file == KVAL_FILE_PREFILL) {
            m = model_of(r->label);
            if (m < 0) {
                r->status = KVAL_SKIPPED;
                snprintf(r->note, sizeof r->note, "no scenario for model '%.40s' (known: llama3-8b, llama3-70b-tp8-shard)", r->label);
                continue;
            }
        }
        switch (r->file) {
        case KVAL_FILE_GEMM:
        case KVAL_FILE_GEMM_MAP: predict_gemm(r, &s[0], r->dtype, scn_dtype_bytes(r->dtype)); break;
        case KVAL_FILE_ATTN: pr = predict_attn(r, &s[0], scratch); break;
        case KVAL_FILE_STEP:
        case KVAL_FILE_STEP_CTX: pr = predict_step(r, &s[2 * m], scratch); break;
        case KVAL_FILE_PREFILL:
            predict_prefill(r, t, &s[2 * m + (r->dtype == SCN_DTYPE_FP8)], &s[0], scratch);
            break;
        case KVAL_FILE_INT4:
            if (r->int4) predict_int4(r, &s[0]);
            else predict_gemm(r, &s[0], SCN_DTYPE_BF16, 2.0);
            break;
        case KVAL_FILE_MOE: predict_moe(r, &s[0]); break;
        case KVAL_FILE_COUNT: break;
        }
        if (pr) { snprintf(err, n, "out of memory"); goto out; }
    }
    rc = 0;
out:
    free(s);
    return rc;
}
