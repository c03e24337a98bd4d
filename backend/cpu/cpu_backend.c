/* cpu_backend.c: the CPU reference backend: a real Llama-architecture decoder step (RMSNorm,
 * QKV, RoPE, paged KV write, attention over block tables, output projection, SwiGLU MLP,
 * residuals, LM head, greedy token) with deterministic random weights, behind the be_ops table.
 * It runs dense models (no MoE, no MLA); fp32 weights and activations. */
#include "../be.h"
#include "../../sim/rng.h"
#include "cpu_backend.h"
#include "cpu_blas.h"
#include "cpu_ops.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ROPE_THETA 10000.0f
#define NORM_EPS 1e-5f

typedef struct {
    float *norm1, *wqkv, *wo, *norm2, *wgu, *wd;
} layer_w;

struct be_cpu_ctx {
    be_config cfg;
    int L, h, H, Hkv, d, inter, V, qkv;
    float *embed, *normf, *lm;
    layer_w *lw;
    be_cpu_attn_mask *mask;       /* per layer */
    be_cpu_kv_pool pool;
    size_t weight_bytes;
    /* scratch, grown to the largest step */
    int cap_T;
    float *X, *Hn, *QKV, *Q, *O, *GU, *A, *logits;
    int cap_logits;            /* rows of logits */
    int32_t *pos, *ids;
    /* micro-benchmark buffers */
    void *copy_src, *copy_dst;
    size_t copy_bytes;
};

static float *rand_matrix(sim_rng *r, size_t n, int fan_in)
{
    float *m = malloc(sizeof(float) * n);
    if (!m) return NULL;
    float a = sqrtf(3.0f / (float)fan_in);   /* uniform(-a, a): variance 1 / fan_in */
    for (size_t i = 0; i < n; i++) m[i] = (float)(2 * sim_rng_uniform(r) - 1) * a;
    return m;
}

static float *ones(size_t n)
{
    float *v = malloc(sizeof(float) * n);
    if (v) for (size_t i = 0; i < n; i++) v[i] = 1.0f;
    return v;
}

static void destroy(void *p)
{
    be_cpu_ctx *c = p;
    if (!c) return;
    for (int l = 0; c->lw && l < c->L; l++) {
        layer_w *w = &c->lw[l];
        free(w->norm1); free(w->wqkv); free(w->wo); free(w->norm2); free(w->wgu); free(w->wd);
    }
    free(c->lw); free(c->mask); free(c->embed); free(c->normf); free(c->lm);
    be_cpu_kv_pool_free(&c->pool);
    free(c->X); free(c->Hn); free(c->QKV); free(c->Q); free(c->O); free(c->GU); free(c->A); free(c->logits);
    free(c->pos); free(c->ids);
    free(c->copy_src); free(c->copy_dst);
    free(c);
}

/* fp32 weights: embeddings and LM head, the final norm, and per layer QKV, output, gate|up,
 * down and two norms. */
static double weight_bytes(const scn_model *m)
{
    double h = m->hidden, V = m->vocab, qkv = (double)(m->heads + 2 * m->kv_heads) * m->head_dim;
    double per_layer = h * (qkv + 2.0 * m->intermediate + 2) + (double)m->heads * m->head_dim * h + (double)m->intermediate * h;
    return sizeof(float) * (V * h * 2 + h + (double)m->layers * per_layer);
}

double be_cpu_bytes_needed(const be_config *cfg, long blocks)
{
    const scn_model *m = &cfg->model;
    return weight_bytes(m) + be_cpu_kv_pool_size(cfg->kv_dtype, blocks, cfg->block_size, m->layers, m->kv_heads, m->head_dim);
}

const void *be_cpu_block_addr(const be_cpu_ctx *c, long block)
{
    const be_cpu_kv_pool *p = &c->pool;
    if (!p->data || block < 0 || block >= p->blocks) return NULL;
    /* Blocks are the pool's outermost index: block b's elements start at b / blocks of the data. */
    size_t data_bytes = be_cpu_kv_pool_bytes(p) - (p->scales ? (size_t)p->blocks * p->layers * 2 * p->block_size * p->kv_heads * sizeof(float) : 0);
    return (const char *)p->data + data_bytes / (size_t)p->blocks * (size_t)block;
}

static be_status create(void **out, const be_config *cfg, char *err, size_t n)
{
    const scn_model *m = &cfg->model;
    if (m->experts || m->kv_lora_rank) {
        snprintf(err, n, "the CPU reference runs dense Llama-architecture models; %s uses %s", m->name,
                 m->experts ? "mixture of experts" : "multi-head latent attention");
        return BE_E_CONFIG;
    }
    if (cfg->kv_dtype == SCN_DTYPE_INT4) {
        snprintf(err, n, "the CPU reference stores KV as fp32, fp16, bf16, fp8 or int8, not int4");
        return BE_E_CONFIG;
    }
    if (be_cpu_blas_open(err, n) != 0) return BE_E_UNAVAILABLE;
    be_cpu_ctx *c = calloc(1, sizeof *c);
    if (!c) return BE_E_NOMEM;
    c->cfg = *cfg;
    /* One thread unless asked: step times then depend on the work, not on thread wake-ups, which
     * is what a calibrated model can predict (and matches `make bench`'s one core). */
    be_cpu_blas_threads(cfg->threads > 0 ? cfg->threads : 1);
    c->L = m->layers; c->h = m->hidden; c->H = m->heads; c->Hkv = m->kv_heads; c->d = m->head_dim;
    c->inter = m->intermediate; c->V = m->vocab;
    c->qkv = (c->H + 2 * c->Hkv) * c->d;
    sim_rng r;
    sim_rng_seed(&r, cfg->seed ^ 0x6370755f77656967ULL);
    c->lw = calloc((size_t)c->L, sizeof *c->lw);
    c->mask = calloc((size_t)c->L, sizeof *c->mask);
    c->embed = rand_matrix(&r, (size_t)c->V * c->h, 3);   /* embeddings ~ U(-1, 1) */
    c->normf = ones((size_t)c->h);
    c->lm = rand_matrix(&r, (size_t)c->h * c->V, c->h);
    if (!c->lw || !c->mask || !c->embed || !c->normf || !c->lm) goto nomem;
    for (int l = 0; l < c->L; l++) {
        layer_w *w = &c->lw[l];
        w->norm1 = ones((size_t)c->h);
        w->wqkv = rand_matrix(&r, (size_t)c->h * c->qkv, c->h);
        w->wo = rand_matrix(&r, (size_t)c->H * c->d * c->h, c->H * c->d);
        w->norm2 = ones((size_t)c->h);
        w->wgu = rand_matrix(&r, (size_t)c->h * 2 * c->inter, c->h);
        w->wd = rand_matrix(&r, (size_t)c->inter * c->h, c->inter);
        if (!w->norm1 || !w->wqkv || !w->wo || !w->norm2 || !w->wgu || !w->wd) goto nomem;
        /* Windowed layers are spread evenly: all of them (Mistral) or every other (Gemma 2). */
        bool sliding = m->sliding_layers > 0 &&
                       (long)l * m->sliding_layers / c->L != (long)(l + 1) * m->sliding_layers / c->L;
        c->mask[l] = (be_cpu_attn_mask){.sink = cfg->sink, .window = cfg->window, .sliding = sliding ? m->sliding_window : 0};
    }
    c->weight_bytes = (size_t)weight_bytes(m);
    *out = c;
    return BE_OK;
nomem:
    destroy(c);
    snprintf(err, n, "out of memory for the model's weights");
    return BE_E_NOMEM;
}

static be_status alloc_kv(void *p, long blocks, char *err, size_t n)
{
    be_cpu_ctx *c = p;
    be_cpu_kv_pool_free(&c->pool);
    if (be_cpu_kv_pool_init(&c->pool, c->cfg.kv_dtype, blocks, c->cfg.block_size, c->L, c->Hkv, c->d)) {
        snprintf(err, n, "out of memory for %ld KV blocks", blocks);
        return BE_E_NOMEM;
    }
    return BE_OK;
}

static int grow(be_cpu_ctx *c, int T)
{
    if (T <= c->cap_T) return 0;
    int cap = c->cap_T ? c->cap_T : 64;
    while (cap < T) cap *= 2;
    float **bufs[] = {&c->X, &c->Hn, &c->QKV, &c->Q, &c->O, &c->GU, &c->A};
    size_t widths[] = {(size_t)c->h, (size_t)c->h, (size_t)c->qkv, (size_t)c->H * c->d, (size_t)c->H * c->d,
                       (size_t)2 * c->inter, (size_t)c->inter};
    for (int i = 0; i < 7; i++) {
        float *nb = realloc(*bufs[i], sizeof(float) * widths[i] * (size_t)cap);
        if (!nb) return -1;
        *bufs[i] = nb;
    }
    int32_t *np = realloc(c->pos, sizeof(int32_t) * (size_t)cap), *ni;
    if (!np) return -1;
    c->pos = np;
    ni = realloc(c->ids, sizeof(int32_t) * (size_t)cap);
    if (!ni) return -1;
    c->ids = ni;
    c->cap_T = cap;
    return 0;
}

int be_cpu_forward(be_cpu_ctx *c, const sim_batch *b, int32_t *next, float *last_hidden)
{
    int T = 0;
    for (int i = 0; i < b->n; i++) T += b->seqs[i].new_tokens;
    if (T == 0) return 0;
    if (grow(c, T)) return -1;
    int h = c->h, H = c->H, Hkv = c->Hkv, d = c->d, bs = c->cfg.block_size;
    /* Token ids and positions, sequence after sequence. */
    for (int i = 0, t = 0; i < b->n; i++) {
        const sim_batch_seq *q = &b->seqs[i];
        for (int j = 0; j < q->new_tokens; j++, t++) {
            c->pos[t] = q->start + j;
            c->ids[t] = (int32_t)(sim_seq_token(q, q->start + j) % (uint32_t)c->V);
            memcpy(c->X + (size_t)t * h, c->embed + (size_t)c->ids[t] * h, sizeof(float) * (size_t)h);
        }
    }
    for (int l = 0; l < c->L; l++) {
        layer_w *w = &c->lw[l];
        be_cpu_rmsnorm(c->Hn, c->X, w->norm1, T, h, NORM_EPS);
        be_cpu_matmul(c->QKV, c->Hn, w->wqkv, T, c->qkv, h, 0);
        /* Split QKV rows into Q (T x H x d) and, in place at the row's tail, K and V. */
        for (int t = 0; t < T; t++) memcpy(c->Q + (size_t)t * H * d, c->QKV + (size_t)t * c->qkv, sizeof(float) * (size_t)H * d);
        be_cpu_rope(c->Q, T, H, d, c->pos, ROPE_THETA);
        for (int t = 0; t < T; t++) {
            float *k = c->QKV + (size_t)t * c->qkv + (size_t)H * d;
            be_cpu_rope(k, 1, Hkv, d, &c->pos[t], ROPE_THETA);
        }
        /* Write the new K and V into the pool, then attend (new keys included). */
        for (int i = 0, t = 0; i < b->n; i++) {
            const sim_batch_seq *q = &b->seqs[i];
            for (int j = 0; j < q->new_tokens; j++, t++) {
                long p = q->start + j, blk = q->blocks[p / bs];
                const float *row = c->QKV + (size_t)t * c->qkv + (size_t)H * d;
                for (int kh = 0; kh < Hkv; kh++) {
                    be_cpu_kv_write(&c->pool, blk, (int)(p % bs), l, 0, kh, row + (size_t)kh * d);
                    be_cpu_kv_write(&c->pool, blk, (int)(p % bs), l, 1, kh, row + (size_t)(Hkv + kh) * d);
                }
            }
        }
        for (int i = 0, t = 0; i < b->n; i++) {
            const sim_batch_seq *q = &b->seqs[i];
            be_cpu_attention_paged(c->O + (size_t)t * H * d, c->Q + (size_t)t * H * d, &c->pool, l, q->blocks, q->start,
                                q->new_tokens, H, &c->mask[l]);
            t += q->new_tokens;
        }
        be_cpu_matmul(c->X, c->O, w->wo, T, h, H * d, 1);            /* residual: X += O Wo */
        be_cpu_rmsnorm(c->Hn, c->X, w->norm2, T, h, NORM_EPS);
        be_cpu_matmul(c->GU, c->Hn, w->wgu, T, 2 * c->inter, h, 0);
        be_cpu_swiglu(c->A, c->GU, T, c->inter);
        be_cpu_matmul(c->X, c->A, w->wd, T, h, c->inter, 1);            /* residual: X += A Wd */
    }
    /* LM head, one GEMM over every sequence's last new token. */
    for (int i = 0, t = 0; i < b->n; i++) {
        t += b->seqs[i].new_tokens;
        memcpy(c->Hn + (size_t)i * h, c->X + (size_t)(t - 1) * h, sizeof(float) * (size_t)h);
    }
    be_cpu_rmsnorm(c->Hn, c->Hn, c->normf, b->n, h, NORM_EPS);   /* in place: row by row */
    if (last_hidden) memcpy(last_hidden, c->Hn, sizeof(float) * (size_t)b->n * h);
    if (b->n > c->cap_logits) {
        float *nl = realloc(c->logits, sizeof(float) * (size_t)b->n * c->V);
        if (!nl) return -1;
        c->logits = nl;
        c->cap_logits = b->n;
    }
    be_cpu_matmul(c->logits, c->Hn, c->lm, b->n, c->V, h, 0);
    for (int i = 0; next && i < b->n; i++) next[i] = be_cpu_argmax(c->logits + (size_t)i * c->V, c->V);
    return 0;
}

static be_status run(void *p, const sim_batch *b, be_step_out *out, char *err, size_t n)
{
    be_cpu_ctx *c = p;
    if (!c->pool.data) { snprintf(err, n, "run before alloc_kv"); return BE_E_RUNTIME; }
    double t0 = be_now();
    if (be_cpu_forward(c, b, out->next_tokens, NULL)) { snprintf(err, n, "out of memory for a %ld-token step", b->tokens); return BE_E_NOMEM; }
    out->seconds = be_now() - t0;
    return BE_OK;
}

static size_t memory_used(void *p)
{
    be_cpu_ctx *c = p;
    size_t scratch = (size_t)c->cap_T * sizeof(float) * ((size_t)2 * c->h + c->qkv + (size_t)2 * c->H * c->d + 3 * (size_t)c->inter);
    return c->weight_bytes + be_cpu_kv_pool_bytes(&c->pool) + scratch;
}

static long kv_blocks(void *p) { return ((be_cpu_ctx *)p)->pool.blocks; }

static be_status bench_copy(void *p, size_t bytes, double *seconds)
{
    be_cpu_ctx *c = p;
    if (bytes != c->copy_bytes) {
        free(c->copy_src); free(c->copy_dst);
        c->copy_src = malloc(bytes);
        c->copy_dst = malloc(bytes);
        c->copy_bytes = bytes;
        if (!c->copy_src || !c->copy_dst) { c->copy_bytes = 0; return BE_E_NOMEM; }
        memset(c->copy_src, 1, bytes);
        memset(c->copy_dst, 2, bytes);   /* touch every page before timing */
    }
    double t0 = be_now();
    memcpy(c->copy_dst, c->copy_src, bytes);
    *seconds = be_now() - t0;
    return ((volatile char *)c->copy_dst)[bytes / 2] == 1 ? BE_OK : BE_E_RUNTIME;
}

static be_status bench_gemm(void *p, int m, int n, int k, double *seconds)
{
    (void)p;
    float *a = malloc(sizeof(float) * (size_t)m * k), *b = malloc(sizeof(float) * (size_t)k * n),
          *o = malloc(sizeof(float) * (size_t)m * n);
    if (!a || !b || !o) { free(a); free(b); free(o); return BE_E_NOMEM; }
    for (size_t i = 0; i < (size_t)m * k; i++) a[i] = (float)((i * 2654435761u) % 1000) / 1000.0f - 0.5f;
    for (size_t i = 0; i < (size_t)k * n; i++) b[i] = (float)((i * 40503u) % 1000) / 1000.0f - 0.5f;
    be_cpu_matmul(o, a, b, m, n, k, 0);           /* warm up */
    double t0 = be_now();
    be_cpu_matmul(o, a, b, m, n, k, 0);
    *seconds = be_now() - t0;
    free(a); free(b); free(o);
    return BE_OK;
}

const be_ops BE_CPU = {
    .name = "cpu", .create = create, .alloc_kv = alloc_kv, .run = run, .destroy = destroy, .sync = NULL,
    .memory_used = memory_used, .kv_blocks = kv_blocks, .bench_copy = bench_copy, .bench_gemm = bench_gemm,
};
