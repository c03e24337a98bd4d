/* cuda_backend.cu: the CUDA backend behind be_ops: the same Llama-architecture step as the CPU
 * reference, on the device. Weights are bf16 (deterministic random, generated on the device);
 * GEMMs go through cuBLAS in bf16 with fp32 accumulation; the residual stream and attention are
 * fp32; KV lives in the paged pool in the chosen dtype. A step is timed with CUDA events.
 * Everything a context launches with (cuBLAS, its handle, the decode partials) is in its
 * workspace (be_cuda_ws), so two contexts never share mutable state. */
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "../be.h"
#include "cuda_common.cuh"
#include "cuda_kernels.h"

extern "C" {
#include "../cpu/cpu_ops.h"
#include "../cpu/kv_format.h"
}

extern "C" int be_cuda_probe_devices(char *msg, size_t n);

struct layer_w { __nv_bfloat16 *wqkv, *wo, *wgu, *wd; float *norm1, *norm2; };

struct cuda_ctx {
    be_config cfg;
    int L, h, H, Hkv, d, inter, V, qkv;
    be_cuda_ws ws;                 /* cuBLAS and the decode partials */
    cudaEvent_t t0, t1;
    float *embed, *normf;
    __nv_bfloat16 *lm;
    std::vector<layer_w> lw;
    std::vector<be_cuda_mask> masks;
    be_cuda_pool pool;
    long blocks;
    size_t weight_bytes, pool_bytes;
    /* scratch, grown to the largest step */
    int cap_T, cap_S, cap_tab;
    float *X, *Hn, *QKV, *Q, *O, *GU, *A, *logits;
    __nv_bfloat16 *xb;             /* bf16 copy of a GEMM's activation input */
    int32_t *d_ids, *d_pos, *d_blk, *d_slot, *d_tab, *d_start, *d_len, *d_row0, *d_next, *d_last;
    void *copy_a, *copy_b;
    size_t copy_bytes;
};

/* ---- device-side deterministic initialisation ---- */
__device__ __forceinline__ float hash_uniform(unsigned long long seed, size_t i)
{
    unsigned long long x = seed ^ (i * 0x9e3779b97f4a7c15ULL);
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    x ^= x >> 31;
    return (float)((x >> 11) * 0x1.0p-53) * 2.0f - 1.0f;   /* U(-1, 1) */
}

__global__ void init_bf16(__nv_bfloat16 *w, size_t n, unsigned long long seed, float a)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        w[i] = __float2bfloat16_rn(hash_uniform(seed, i) * a);
}

__global__ void init_f32(float *w, size_t n, unsigned long long seed, float a)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        w[i] = a == 0 ? 1.0f : hash_uniform(seed, i) * a;
}

/* Bytes 0x00..0x3f: finite and below 2 in every KV format (fp32, fp16, bf16, fp8 E4M3, int8). */
__global__ void fill_pool(unsigned char *p, size_t n, unsigned long long seed)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        p[i] = (unsigned char)((hash_uniform(seed, i) + 1.0f) * 31.99f);
}

static int alloc_bf16(cuda_ctx *c, __nv_bfloat16 **w, size_t n, unsigned long long seed, int fan_in)
{
    CUDA_CHECK(cudaMalloc(w, n * sizeof(__nv_bfloat16)));
    init_bf16<<<1024, 256>>>(*w, n, seed, sqrtf(3.0f / fan_in));   /* variance 1 / fan_in */
    LAUNCH_CHECK();
    c->weight_bytes += n * sizeof(__nv_bfloat16);
    return 0;
}

static int alloc_f32(cuda_ctx *c, float **w, size_t n, unsigned long long seed, float a)
{
    CUDA_CHECK(cudaMalloc(w, n * sizeof(float)));
    init_f32<<<1024, 256>>>(*w, n, seed, a);
    LAUNCH_CHECK();
    c->weight_bytes += n * sizeof(float);
    return 0;
}

static int gemm(cuda_ctx *c, float *out, const float *x, const __nv_bfloat16 *w, int M, int N, int K, int accumulate)
{
    return be_cuda_gemm(&c->ws, out, x, w, M, N, K, accumulate, c->xb);
}

static void destroy(void *p)
{
    cuda_ctx *c = (cuda_ctx *)p;
    if (!c) return;
    for (auto &w : c->lw) { cudaFree(w.wqkv); cudaFree(w.wo); cudaFree(w.wgu); cudaFree(w.wd); cudaFree(w.norm1); cudaFree(w.norm2); }
    cudaFree(c->embed); cudaFree(c->normf); cudaFree(c->lm);
    cudaFree(c->pool.data); cudaFree(c->pool.scales);
    float *bufs[] = {c->X, c->Hn, c->QKV, c->Q, c->O, c->GU, c->A, c->logits};
    for (float *b : bufs) cudaFree(b);
    cudaFree(c->xb);
    int32_t *ib[] = {c->d_ids, c->d_pos, c->d_blk, c->d_slot, c->d_tab, c->d_start, c->d_len, c->d_row0, c->d_next, c->d_last};
    for (int32_t *b : ib) cudaFree(b);
    cudaFree(c->copy_a); cudaFree(c->copy_b);
    be_cuda_ws_free(&c->ws);
    if (c->t0) cudaEventDestroy(c->t0);
    if (c->t1) cudaEventDestroy(c->t1);
    delete c;
}

static int build(cuda_ctx *c)
{
    const scn_model *m = &c->cfg.model;
    if (be_cuda_ws_init(&c->ws)) return -1;
    CUDA_CHECK(cudaEventCreate(&c->t0));
    CUDA_CHECK(cudaEventCreate(&c->t1));
    unsigned long long seed = c->cfg.seed ^ 0x6375646177656967ULL;
    if (alloc_f32(c, &c->embed, (size_t)c->V * c->h, seed + 1, 1.0f) || alloc_f32(c, &c->normf, c->h, 0, 0) ||
        alloc_bf16(c, &c->lm, (size_t)c->h * c->V, seed + 2, c->h))
        return -1;
    c->lw.resize(c->L);
    c->masks.resize(c->L);
    for (int l = 0; l < c->L; l++) {
        layer_w &w = c->lw[l];
        unsigned long long s = seed + 16 + 8 * (unsigned long long)l;
        if (alloc_bf16(c, &w.wqkv, (size_t)c->h * c->qkv, s, c->h) || alloc_bf16(c, &w.wo, (size_t)c->H * c->d * c->h, s + 1, c->H * c->d) ||
            alloc_bf16(c, &w.wgu, (size_t)c->h * 2 * c->inter, s + 2, c->h) || alloc_bf16(c, &w.wd, (size_t)c->inter * c->h, s + 3, c->inter) ||
            alloc_f32(c, &w.norm1, c->h, 0, 0) || alloc_f32(c, &w.norm2, c->h, 0, 0))
            return -1;
        bool sliding = m->sliding_layers > 0 && (long)l * m->sliding_layers / c->L != (long)(l + 1) * m->sliding_layers / c->L;
        c->masks[l] = be_cuda_mask{c->cfg.sink, c->cfg.window, sliding ? m->sliding_window : 0};
    }
    CUDA_CHECK(cudaDeviceSynchronize());
    return 0;
}

static be_status create(void **out, const be_config *cfg, char *err, size_t n)
{
    char msg[256];
    if (be_cuda_probe_devices(msg, sizeof msg) <= 0) { snprintf(err, n, "%s", msg); return BE_E_UNAVAILABLE; }
    const scn_model *m = &cfg->model;
    if (m->experts || m->kv_lora_rank || cfg->kv_dtype == SCN_DTYPE_INT4) {
        snprintf(err, n, "the CUDA backend runs dense Llama-architecture models with fp32/fp16/bf16/fp8/int8 KV");
        return BE_E_CONFIG;
    }
    cuda_ctx *c = new cuda_ctx();
    c->cfg = *cfg;
    c->L = m->layers; c->h = m->hidden; c->H = m->heads; c->Hkv = m->kv_heads; c->d = m->head_dim;
    c->inter = m->intermediate; c->V = m->vocab;
    c->qkv = (c->H + 2 * c->Hkv) * c->d;
    if (build(c)) { snprintf(err, n, "%s", be_cuda_last_error); destroy(c); return BE_E_NOMEM; }
    *out = c;
    return BE_OK;
}

static be_status alloc_kv(void *p, long blocks, char *err, size_t n)
{
    cuda_ctx *c = (cuda_ctx *)p;
    int dt = c->cfg.kv_dtype;   /* scn_dtype: fp32 0, fp16 1, bf16 2, fp8 3, int8 4 (as BE_CUDA_*) */
    size_t elem = dt == BE_CUDA_F32 ? 4 : dt == BE_CUDA_F16 || dt == BE_CUDA_BF16 ? 2 : 1;
    size_t vecs = (size_t)blocks * c->L * 2 * c->cfg.block_size * c->Hkv;
    c->pool = be_cuda_pool{dt, c->cfg.block_size, c->L, c->Hkv, c->d, NULL, NULL, 1.0f};
    if (cudaMalloc(&c->pool.data, vecs * c->d * elem) != cudaSuccess ||
        (dt == BE_CUDA_I8 && cudaMalloc(&c->pool.scales, vecs * sizeof(float)) != cudaSuccess)) {
        snprintf(err, n, "cannot allocate %ld KV blocks (%.2f GiB) on the device", blocks, vecs * c->d * elem / 1073741824.0);
        return BE_E_NOMEM;
    }
    /* Calibration times attention over the whole pool before any request wrote it: fill it with
     * finite, moderate random values (not zeros, which can run faster than real data). */
    fill_pool<<<1024, 256>>>((unsigned char *)c->pool.data, vecs * c->d * elem, c->cfg.seed ^ 0x6b76706f6f6cULL);
    if (dt == BE_CUDA_I8) init_f32<<<1024, 256>>>(c->pool.scales, vecs, c->cfg.seed, 1.0f / 127.0f);
    if (cudaGetLastError() != cudaSuccess || cudaDeviceSynchronize() != cudaSuccess) {
        snprintf(err, n, "filling the KV pool failed");
        return BE_E_RUNTIME;
    }
    c->blocks = blocks;
    c->pool_bytes = vecs * c->d * elem + (dt == BE_CUDA_I8 ? vecs * sizeof(float) : 0);
    return BE_OK;
}

static int grow(cuda_ctx *c, int T, int S, int tab)
{
    if (T > c->cap_T) {
        float **bufs[] = {&c->X, &c->Hn, &c->QKV, &c->Q, &c->O, &c->GU, &c->A};
        size_t w[] = {(size_t)c->h, (size_t)c->h, (size_t)c->qkv, (size_t)c->H * c->d, (size_t)c->H * c->d, (size_t)2 * c->inter, (size_t)c->inter};
        for (int i = 0; i < 7; i++) { cudaFree(*bufs[i]); CUDA_CHECK(cudaMalloc(bufs[i], w[i] * T * sizeof(float))); }
        size_t widest = (size_t)c->inter > (size_t)c->H * c->d ? (size_t)c->inter : (size_t)c->H * c->d;
        if ((size_t)c->h > widest) widest = c->h;
        cudaFree(c->xb);
        CUDA_CHECK(cudaMalloc(&c->xb, widest * T * sizeof(__nv_bfloat16)));
        int32_t **ib[] = {&c->d_ids, &c->d_pos, &c->d_blk, &c->d_slot};
        for (int i = 0; i < 4; i++) { cudaFree(*ib[i]); CUDA_CHECK(cudaMalloc(ib[i], T * sizeof(int32_t))); }
        c->cap_T = T;
    }
    if (S > c->cap_S) {
        cudaFree(c->logits);
        CUDA_CHECK(cudaMalloc(&c->logits, (size_t)S * c->V * sizeof(float)));
        int32_t **ib[] = {&c->d_start, &c->d_len, &c->d_row0, &c->d_next, &c->d_last};
        for (int i = 0; i < 5; i++) { cudaFree(*ib[i]); CUDA_CHECK(cudaMalloc(ib[i], S * sizeof(int32_t))); }
        c->cap_S = S;
    }
    if (tab > c->cap_tab) { cudaFree(c->d_tab); CUDA_CHECK(cudaMalloc(&c->d_tab, (size_t)tab * sizeof(int32_t))); c->cap_tab = tab; }
    return 0;
}

/* Prefill attention for the chunks after the n_dec decode sequences, by the selected kernel. */
static int prefill(cuda_ctx *c, int l, int n_dec, int n, int max_blocks, int max_len)
{
    const int32_t *tab = c->d_tab + (size_t)n_dec * max_blocks;
    if (c->ws.prefill_kernel == BE_CUDA_PREFILL_TC && (c->d == 64 || c->d == 128))
        return be_cuda_attn_prefill_tc(c->O, c->Q, &c->pool, l, tab, max_blocks, c->d_start + n_dec, c->d_len + n_dec,
                                       c->d_row0 + n_dec, n, max_len, c->H, c->masks[l]);
    return be_cuda_attn_prefill(c->O, c->Q, &c->pool, l, tab, max_blocks, c->d_start + n_dec, c->d_len + n_dec, c->d_row0 + n_dec,
                                n, max_len, c->H, c->masks[l]);
}

/* One engine step. Rows are laid out decode sequences first, then prefill chunks. */
static int step(cuda_ctx *c, const sim_batch *b, int32_t *next)
{
    int S = b->n, T = 0, max_blocks = 1, n_dec = 0, max_len = 0;
    for (int i = 0; i < S; i++) {
        T += b->seqs[i].new_tokens;
        if (b->seqs[i].n_blocks > max_blocks) max_blocks = b->seqs[i].n_blocks;
        if (b->seqs[i].new_tokens == 1) n_dec++;
        else if (b->seqs[i].new_tokens > max_len) max_len = b->seqs[i].new_tokens;
    }
    if (grow(c, T, S, S * max_blocks)) return -1;
    std::vector<int> order;                           /* batch index of each device sequence */
    for (int i = 0; i < S; i++) if (b->seqs[i].new_tokens == 1) order.push_back(i);
    for (int i = 0; i < S; i++) if (b->seqs[i].new_tokens != 1) order.push_back(i);
    std::vector<int32_t> ids(T), pos(T), blk(T), slot(T), tab((size_t)S * max_blocks, 0), start(S), len(S), row0(S), last(S);
    int bs = c->cfg.block_size;
    for (int k = 0, t = 0; k < S; k++) {
        const sim_batch_seq *q = &b->seqs[order[k]];
        start[k] = q->start;
        len[k] = q->new_tokens;
        row0[k] = t;
        for (int j = 0; j < q->n_blocks; j++) tab[(size_t)k * max_blocks + j] = q->blocks[j] < 0 ? 0 : q->blocks[j];
        for (int j = 0; j < q->new_tokens; j++, t++) {
            long p = q->start + j;
            pos[t] = (int32_t)p;
            ids[t] = (int32_t)(sim_seq_token(q, p) % (uint32_t)c->V);
            blk[t] = q->blocks[p / bs];
            slot[t] = (int32_t)(p % bs);
        }
        last[k] = t - 1;
    }
    CUDA_CHECK(cudaMemcpy(c->d_ids, ids.data(), T * sizeof(int32_t), cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(c->d_pos, pos.data(), T * sizeof(int32_t), cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(c->d_blk, blk.data(), T * sizeof(int32_t), cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(c->d_slot, slot.data(), T * sizeof(int32_t), cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(c->d_tab, tab.data(), tab.size() * sizeof(int32_t), cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(c->d_start, start.data(), S * sizeof(int32_t), cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(c->d_len, len.data(), S * sizeof(int32_t), cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(c->d_row0, row0.data(), S * sizeof(int32_t), cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(c->d_last, last.data(), S * sizeof(int32_t), cudaMemcpyHostToDevice));
    int h = c->h, H = c->H, Hkv = c->Hkv, d = c->d;
    if (be_cuda_gather_rows(c->X, c->embed, c->d_ids, T, h)) return -1;
    for (int l = 0; l < c->L; l++) {
        layer_w &w = c->lw[l];
        if (be_cuda_rmsnorm(c->Hn, c->X, w.norm1, T, h, 1e-5f) || gemm(c, c->QKV, c->Hn, w.wqkv, T, c->qkv, h, 0) ||
            be_cuda_rope(c->QKV, T, H, d, c->qkv, c->d_pos, 10000.0f) ||
            be_cuda_rope(c->QKV + (size_t)H * d, T, Hkv, d, c->qkv, c->d_pos, 10000.0f))
            return -1;
        CUDA_CHECK(cudaMemcpy2D(c->Q, (size_t)H * d * sizeof(float), c->QKV, (size_t)c->qkv * sizeof(float),
                                (size_t)H * d * sizeof(float), T, cudaMemcpyDeviceToDevice));
        if (be_cuda_kv_write(&c->pool, l, c->QKV + (size_t)H * d, c->QKV + (size_t)(H + Hkv) * d, c->qkv, c->d_blk, c->d_slot, T))
            return -1;
        if (n_dec && be_cuda_attn_decode(&c->ws, c->O, c->Q, &c->pool, l, c->d_tab, max_blocks, c->d_start, n_dec, H, c->masks[l], 0))
            return -1;
        if (S > n_dec && prefill(c, l, n_dec, S - n_dec, max_blocks, max_len)) return -1;
        if (gemm(c, c->X, c->O, w.wo, T, h, H * d, 1) || be_cuda_rmsnorm(c->Hn, c->X, w.norm2, T, h, 1e-5f) ||
            gemm(c, c->GU, c->Hn, w.wgu, T, 2 * c->inter, h, 0) || be_cuda_swiglu(c->A, c->GU, T, c->inter) ||
            gemm(c, c->X, c->A, w.wd, T, h, c->inter, 1))
            return -1;
    }
    /* LM head over each sequence's last token, then greedy tokens. */
    if (be_cuda_gather_rows(c->Hn, c->X, c->d_last, S, h) == 0) { /* rows of X by index */ }
    else return -1;
    if (be_cuda_rmsnorm(c->Hn, c->Hn, c->normf, S, h, 1e-5f) || gemm(c, c->logits, c->Hn, c->lm, S, c->V, h, 0) ||
        be_cuda_argmax(c->d_next, c->logits, S, c->V))
        return -1;
    if (next) {
        std::vector<int32_t> nx(S);
        CUDA_CHECK(cudaMemcpy(nx.data(), c->d_next, S * sizeof(int32_t), cudaMemcpyDeviceToHost));
        for (int k = 0; k < S; k++) next[order[k]] = nx[k];
    }
    return 0;
}

static be_status run(void *p, const sim_batch *b, be_step_out *out, char *err, size_t n)
{
    cuda_ctx *c = (cuda_ctx *)p;
    if (!c->pool.data) { snprintf(err, n, "run before alloc_kv"); return BE_E_RUNTIME; }
    be_cuda_last_error[0] = 0;
    cudaError_t e = cudaEventRecord(c->t0);
    int rc = e == cudaSuccess ? step(c, b, out->next_tokens) : -1;
    if (e == cudaSuccess && rc == 0) e = cudaEventRecord(c->t1);
    if (e == cudaSuccess && rc == 0) e = cudaEventSynchronize(c->t1);
    if (e != cudaSuccess || rc) {
        /* An asynchronous kernel fault surfaces here, at the synchronisation: keep its name. */
        if (e != cudaSuccess)
            snprintf(err, n, "CUDA step failed: %s: %s%s%s", cudaGetErrorName(e), cudaGetErrorString(e),
                     be_cuda_last_error[0] ? "; earlier: " : "", be_cuda_last_error);
        else
            snprintf(err, n, "%s", be_cuda_last_error[0] ? be_cuda_last_error : "CUDA step failed");
        return BE_E_RUNTIME;
    }
    float ms = 0;
    if ((e = cudaEventElapsedTime(&ms, c->t0, c->t1)) != cudaSuccess) {
        snprintf(err, n, "cudaEventElapsedTime: %s", cudaGetErrorName(e));
        return BE_E_RUNTIME;
    }
    out->seconds = ms / 1e3;
    return BE_OK;
}

static void sync_dev(void *) { cudaDeviceSynchronize(); }
static size_t memory_used(void *p) { cuda_ctx *c = (cuda_ctx *)p; return c->weight_bytes + c->pool_bytes; }
static long kv_blocks(void *p) { return ((cuda_ctx *)p)->blocks; }

/* Device-to-device copy; the caller counts bytes read plus written. */
static be_status bench_copy(void *p, size_t bytes, double *seconds)
{
    cuda_ctx *c = (cuda_ctx *)p;
    if (bytes != c->copy_bytes) {
        cudaFree(c->copy_a); cudaFree(c->copy_b);
        c->copy_a = c->copy_b = NULL;
        if (cudaMalloc(&c->copy_a, bytes) != cudaSuccess || cudaMalloc(&c->copy_b, bytes) != cudaSuccess) return BE_E_NOMEM;
        cudaMemset(c->copy_a, 1, bytes);
        c->copy_bytes = bytes;
    }
    float ms = 0;
    if (cudaEventRecord(c->t0) != cudaSuccess || cudaMemcpy(c->copy_b, c->copy_a, bytes, cudaMemcpyDeviceToDevice) != cudaSuccess ||
        cudaEventRecord(c->t1) != cudaSuccess || cudaEventSynchronize(c->t1) != cudaSuccess)
        return BE_E_RUNTIME;
    cudaEventElapsedTime(&ms, c->t0, c->t1);
    *seconds = ms / 1e3;
    return BE_OK;
}

/* The GEMM alone on bf16 operands (the ceiling; the activation cast is not in it). */
static be_status bench_gemm(void *p, int m, int n, int k, double *seconds)
{
    cuda_ctx *c = (cuda_ctx *)p;
    __nv_bfloat16 *a = NULL, *b = NULL;
    float *o = NULL, ms = 0;
    be_status st = BE_E_NOMEM;
    if (cudaMalloc(&a, (size_t)m * k * 2) || cudaMalloc(&b, (size_t)k * n * 2) || cudaMalloc(&o, (size_t)m * n * 4)) goto out;
    /* Random operands: zeros run faster than real data and would flatter the ceiling. */
    init_bf16<<<1024, 256>>>(a, (size_t)m * k, 11, 1.0f);
    init_bf16<<<1024, 256>>>(b, (size_t)k * n, 12, 1.0f);
    st = BE_E_RUNTIME;
    for (int r = 0; r < 2; r++) {   /* the first is the warm-up */
        if (r && cudaEventRecord(c->t0) != cudaSuccess) goto out;
        if (be_cuda_gemm_bf16(&c->ws, o, a, b, m, n, k)) goto out;
    }
    if (cudaEventRecord(c->t1) != cudaSuccess || cudaEventSynchronize(c->t1) != cudaSuccess ||
        cudaEventElapsedTime(&ms, c->t0, c->t1) != cudaSuccess)
        goto out;
    *seconds = ms / 1e3;
    st = BE_OK;
out:
    cudaFree(a); cudaFree(b); cudaFree(o);
    return st;
}

extern "C" const be_ops BE_CUDA = {
    "cuda", create, alloc_kv, run, destroy, sync_dev, memory_used, kv_blocks, bench_copy, bench_gemm,
};

/* ---- the whole-step check (selftest) ----
 * A small two-layer model (GQA 8/2, head_dim 64, a sliding layer, int8 KV: every path of the
 * step) runs two CUDA steps; the same steps run on the host from the device's own weights
 * (downloaded, bf16 -> fp32), with the backend's GEMM rounding (activations to bf16), through the
 * plain-C kernels and a host pool of the same dtype. Step 1 prefills two sequences; step 2 mixes
 * two decodes (reading step 1's KV) with a new prefill. The logits of both steps are compared.
 * Tolerance 2e-2 relative L2: bf16 rounding of activations can fall either side of a rounding
 * boundary after fp32 sums in another order, and such flips compound over layers. */
typedef void (*step_report_fn)(void *ud, const char *kernel, const char *shape, double err, double tol, int ok);

static std::vector<float> down_bf16(const __nv_bfloat16 *d, size_t n)
{
    std::vector<__nv_bfloat16> h(n);
    std::vector<float> f(n, NAN);
    if (cudaMemcpy(h.data(), d, n * sizeof(__nv_bfloat16), cudaMemcpyDeviceToHost) == cudaSuccess)
        for (size_t i = 0; i < n; i++) f[i] = __bfloat162float(h[i]);
    return f;
}

static std::vector<float> down_f32(const float *d, size_t n)
{
    std::vector<float> f(n, NAN);
    cudaMemcpy(f.data(), d, n * sizeof(float), cudaMemcpyDeviceToHost);
    return f;
}

struct host_model {
    int L, h, H, Hkv, d, inter, V, qkv;
    std::vector<float> embed, normf, lm;
    std::vector<std::vector<float>> wqkv, wo, wgu, wd, n1, n2;
};

static void bf16_round(std::vector<float> &x) { for (auto &v : x) v = be_cpu_bf16_to_f32(be_cpu_f32_to_bf16(v)); }

static void host_gemm(float *out, const float *x, const std::vector<float> &w, int M, int N, int K, int acc)
{
    std::vector<float> xr(x, x + (size_t)M * K);
    bf16_round(xr);
    be_cpu_matmul(out, xr.data(), w.data(), M, N, K, acc);
}

/* The plain-C step in the device's row order (decodes first); returns logits [S x V]. */
static std::vector<float> host_step(const host_model &m, be_cpu_kv_pool *pool, const std::vector<be_cuda_mask> &masks,
                                    const sim_batch *b, const std::vector<int> &order, int V)
{
    int S = b->n, T = 0;
    for (int i = 0; i < S; i++) T += b->seqs[i].new_tokens;
    int bs = pool->block_size, h = m.h, H = m.H, Hkv = m.Hkv, d = m.d;
    std::vector<float> X((size_t)T * h), Hn((size_t)T * h), QKV((size_t)T * m.qkv), Q((size_t)T * H * d), O((size_t)T * H * d),
        GU((size_t)T * 2 * m.inter), A((size_t)T * m.inter);
    std::vector<int32_t> pos(T);
    std::vector<int> row0(S), last(S);
    for (int k = 0, t = 0; k < S; k++) {
        const sim_batch_seq *q = &b->seqs[order[k]];
        row0[k] = t;
        for (int j = 0; j < q->new_tokens; j++, t++) {
            pos[t] = q->start + j;
            int id = (int)(sim_seq_token(q, pos[t]) % (uint32_t)V);
            memcpy(&X[(size_t)t * h], &m.embed[(size_t)id * h], h * sizeof(float));
        }
        last[k] = t - 1;
    }
    for (int l = 0; l < m.L; l++) {
        be_cpu_rmsnorm(Hn.data(), X.data(), m.n1[l].data(), T, h, 1e-5f);
        host_gemm(QKV.data(), Hn.data(), m.wqkv[l], T, m.qkv, h, 0);
        for (int t = 0; t < T; t++) {
            float *row = &QKV[(size_t)t * m.qkv];
            be_cpu_rope(row, 1, H, d, &pos[t], 10000.0f);
            be_cpu_rope(row + (size_t)H * d, 1, Hkv, d, &pos[t], 10000.0f);
            memcpy(&Q[(size_t)t * H * d], row, (size_t)H * d * sizeof(float));
        }
        for (int k = 0, t = 0; k < S; k++) {
            const sim_batch_seq *q = &b->seqs[order[k]];
            for (int j = 0; j < q->new_tokens; j++, t++)
                for (int kh = 0; kh < Hkv; kh++) {
                    const float *row = &QKV[(size_t)t * m.qkv];
                    long p = q->start + j;
                    be_cpu_kv_write(pool, q->blocks[p / bs], (int)(p % bs), l, 0, kh, row + (size_t)(H + kh) * d);
                    be_cpu_kv_write(pool, q->blocks[p / bs], (int)(p % bs), l, 1, kh, row + (size_t)(H + Hkv + kh) * d);
                }
        }
        be_cpu_attn_mask cm = {masks[l].sink, masks[l].window, masks[l].sliding};
        for (int k = 0; k < S; k++) {
            const sim_batch_seq *q = &b->seqs[order[k]];
            be_cpu_attention_paged(&O[(size_t)row0[k] * H * d], &Q[(size_t)row0[k] * H * d], pool, l, q->blocks, q->start, q->new_tokens,
                                H, &cm);
        }
        host_gemm(X.data(), O.data(), m.wo[l], T, h, H * d, 1);
        be_cpu_rmsnorm(Hn.data(), X.data(), m.n2[l].data(), T, h, 1e-5f);
        host_gemm(GU.data(), Hn.data(), m.wgu[l], T, 2 * m.inter, h, 0);
        be_cpu_swiglu(A.data(), GU.data(), T, m.inter);
        host_gemm(X.data(), A.data(), m.wd[l], T, h, m.inter, 1);
    }
    std::vector<float> last_rows((size_t)S * h), normed((size_t)S * h), logits((size_t)S * V);
    for (int k = 0; k < S; k++) memcpy(&last_rows[(size_t)k * h], &X[(size_t)last[k] * h], h * sizeof(float));
    be_cpu_rmsnorm(normed.data(), last_rows.data(), m.normf.data(), S, h, 1e-5f);
    host_gemm(logits.data(), normed.data(), m.lm, S, V, h, 0);
    return logits;
}

static double rel_err(const std::vector<float> &got, const std::vector<float> &ref)
{
    double num = 0, den = 0;
    for (size_t i = 0; i < ref.size(); i++) {
        if (!std::isfinite(got[i])) return INFINITY;
        num += ((double)got[i] - ref[i]) * ((double)got[i] - ref[i]);
        den += (double)ref[i] * ref[i];
    }
    return den > 0 ? sqrt(num / den) : sqrt(num);
}

/* One kernel choice (decode dk, prefill pk, named `variant` in the rows): 0, or -1 on a CUDA
 * error (be_cuda_last_error); failing comparisons are counted in *failures. */
static int step_check_variant(step_report_fn report, void *ud, int *failures, int dk, int pk, const char *variant)
{
    be_config cfg;
    memset(&cfg, 0, sizeof cfg);
    scn_model *m = &cfg.model;
    m->layers = 2; m->hidden = 512; m->heads = 8; m->kv_heads = 2; m->head_dim = 64; m->intermediate = 1024; m->vocab = 1000;
    m->sliding_layers = 1; m->sliding_window = 24;
    cfg.kv_dtype = SCN_DTYPE_INT8;
    cfg.block_size = 16;
    cfg.seed = 7;
    void *p = NULL;
    char err[400];
    if (create(&p, &cfg, err, sizeof err) != BE_OK) { snprintf(be_cuda_last_error, sizeof be_cuda_last_error, "step check: %s", err); return -1; }
    cuda_ctx *c = (cuda_ctx *)p;
    c->ws.decode_kernel = dk;
    c->ws.prefill_kernel = pk;
    int rc = -1;
    long blocks = 16;
    be_cpu_kv_pool hp;
    memset(&hp, 0, sizeof hp);
    if (alloc_kv(c, blocks, err, sizeof err) != BE_OK) { snprintf(be_cuda_last_error, sizeof be_cuda_last_error, "step check: %s", err); destroy(c); return -1; }
    if (be_cpu_kv_pool_init(&hp, cfg.kv_dtype, blocks, cfg.block_size, c->L, c->Hkv, c->d)) { destroy(c); return -1; }
    hp.fp8_scale = c->pool.fp8_scale;
    host_model hm;
    hm.L = c->L; hm.h = c->h; hm.H = c->H; hm.Hkv = c->Hkv; hm.d = c->d; hm.inter = c->inter; hm.V = c->V; hm.qkv = c->qkv;
    hm.embed = down_f32(c->embed, (size_t)c->V * c->h);
    hm.normf = down_f32(c->normf, c->h);
    hm.lm = down_bf16(c->lm, (size_t)c->h * c->V);
    for (int l = 0; l < c->L; l++) {
        layer_w &w = c->lw[l];
        hm.wqkv.push_back(down_bf16(w.wqkv, (size_t)c->h * c->qkv));
        hm.wo.push_back(down_bf16(w.wo, (size_t)c->H * c->d * c->h));
        hm.wgu.push_back(down_bf16(w.wgu, (size_t)c->h * 2 * c->inter));
        hm.wd.push_back(down_bf16(w.wd, (size_t)c->inter * c->h));
        hm.n1.push_back(down_f32(w.norm1, c->h));
        hm.n2.push_back(down_f32(w.norm2, c->h));
    }
    /* Block tables: A uses blocks 0..3, B 4..5, C 6..7 (each sequence's blocks scattered). */
    static const int32_t tA[] = {3, 0, 2, 1}, tB[] = {5, 4}, tC[] = {7, 6};
    sim_batch_seq s1[2] = {}, s2[3] = {};
    s1[0].req_id = 1; s1[0].new_tokens = 40; s1[0].start = 0; s1[0].blocks = tA; s1[0].n_blocks = 4; s1[0].body_seed = 11;
    s1[1].req_id = 2; s1[1].new_tokens = 17; s1[1].start = 0; s1[1].blocks = tB; s1[1].n_blocks = 2; s1[1].body_seed = 12;
    s1[1].prefix_seed = 99; s1[1].prefix_len = 8;
    s2[0] = s1[1]; s2[0].start = 17; s2[0].new_tokens = 1; s2[0].context = 17;         /* decode B */
    s2[1].req_id = 3; s2[1].new_tokens = 30; s2[1].start = 0; s2[1].blocks = tC; s2[1].n_blocks = 2; s2[1].body_seed = 13;
    s2[2] = s1[0]; s2[2].start = 40; s2[2].new_tokens = 1; s2[2].context = 40;         /* decode A */
    sim_batch b1 = {2, s1, 57}, b2 = {3, s2, 32};
    const sim_batch *steps[] = {&b1, &b2};
    const char *names[] = {"step 1: prefill 40 + 17 tokens", "step 2: 2 decodes on step 1's KV + prefill 30"};
    for (int k = 0; k < 2; k++) {
        const sim_batch *b = steps[k];
        std::vector<int> order;
        for (int i = 0; i < b->n; i++) if (b->seqs[i].new_tokens == 1) order.push_back(i);
        for (int i = 0; i < b->n; i++) if (b->seqs[i].new_tokens != 1) order.push_back(i);
        be_cuda_last_error[0] = 0;
        if (step(c, b, NULL) || cudaDeviceSynchronize() != cudaSuccess) {
            char shape[700];
            snprintf(shape, sizeof shape, "%s, %s [%s]", names[k], variant,
                     be_cuda_last_error[0] ? be_cuda_last_error : cudaGetErrorName(cudaGetLastError()));
            report(ud, "whole step vs CPU", shape, INFINITY, 2e-2, 0);
            (*failures)++;
            goto out;
        }
        std::vector<float> got = down_f32(c->logits, (size_t)b->n * c->V);
        std::vector<float> ref = host_step(hm, &hp, c->masks, b, order, c->V);
        double e = rel_err(got, ref);
        char shape[300];
        snprintf(shape, sizeof shape, "%s (2 layers, one sliding; GQA 8/2, d 64; int8 KV), %s", names[k], variant);
        report(ud, "whole step vs CPU", shape, e, 2e-2, e <= 2e-2);
        if (!(e <= 2e-2)) (*failures)++;
    }
    rc = 0;
out:
    be_cpu_kv_pool_free(&hp);
    destroy(c);
    return rc;
}

/* The whole step with each attention kernel the backend can run: the defaults (decode v2 with
 * cp.async, fp32 prefill), then decode v2 direct with the tensor-core prefill (bf16 Q, K, V and
 * P inside attention: expected to add a few 1e-3, bf16's 2^-9 relative rounding at scores of
 * about unit spread, under the step's 2e-2), then decode v1. 0, or -1 on an error that stops the selftest. */
extern "C" int be_cuda_step_check(step_report_fn report, void *ud, int *failures)
{
    static const struct { int dk, pk; const char *name; } variants[] = {
        {BE_CUDA_DECODE_V2, BE_CUDA_PREFILL_FP32, "decode v2, prefill fp32"},
        {BE_CUDA_DECODE_V2_DIRECT, BE_CUDA_PREFILL_TC, "decode v2 direct, prefill tensor cores"},
        {BE_CUDA_DECODE_V1, BE_CUDA_PREFILL_FP32, "decode v1, prefill fp32"},
    };
    for (const auto &v : variants)
        if (step_check_variant(report, ud, failures, v.dk, v.pk, v.name)) return -1;
    return 0;
}
