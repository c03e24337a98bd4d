/* cpu_ops.c: reference kernels (see cpu_ops.h). Straightforward loops: clarity over speed,
 * except the GEMMs, which go to OpenBLAS (opened at run time: cpu_blas.h). */
#include "cpu_ops.h"
#include "cpu_blas.h"
#include "kv_format.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void be_cpu_rmsnorm(float *out, const float *x, const float *w, int T, int h, float eps)
{
    for (int t = 0; t < T; t++) {
        const float *r = x + (size_t)t * h;
        double ss = 0;
        for (int i = 0; i < h; i++) ss += (double)r[i] * r[i];
        float inv = (float)(1.0 / sqrt(ss / h + eps));
        for (int i = 0; i < h; i++) out[(size_t)t * h + i] = r[i] * inv * w[i];
    }
}

void be_cpu_rope(float *x, int T, int heads, int d, const int32_t *pos, float theta)
{
    int half = d / 2;
    for (int t = 0; t < T; t++)
        for (int i = 0; i < half; i++) {
            double freq = pow((double)theta, -2.0 * i / d), ang = pos[t] * freq;
            float c = (float)cos(ang), s = (float)sin(ang);
            for (int hd = 0; hd < heads; hd++) {
                float *v = x + ((size_t)t * heads + hd) * d;
                float a = v[i], b = v[i + half];
                v[i] = a * c - b * s;
                v[i + half] = b * c + a * s;
            }
        }
}

void be_cpu_matmul(float *out, const float *x, const float *w, int M, int N, int K, int accumulate)
{
    /* The CPU backend opened OpenBLAS when it was created (and refused to start without it);
     * other callers (the CUDA plugin's host references) open it here. Should it not load there,
     * the same product is summed in plain loops: slower, never wrong. */
    if (be_cpu_blas_open(NULL, 0) == 0) {
        be_cpu_blas_sgemm(M, N, K, x, w, accumulate ? 1.0f : 0.0f, out);
        return;
    }
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            double s = accumulate ? out[(size_t)i * N + j] : 0.0;
            for (int k = 0; k < K; k++) s += (double)x[(size_t)i * K + k] * w[(size_t)k * N + j];
            out[(size_t)i * N + j] = (float)s;
        }
}

void be_cpu_swiglu(float *out, const float *gu, int T, int inter)
{
    for (int t = 0; t < T; t++)
        for (int i = 0; i < inter; i++) {
            float g = gu[(size_t)t * 2 * inter + i], u = gu[(size_t)t * 2 * inter + inter + i];
            out[(size_t)t * inter + i] = g / (1.0f + expf(-g)) * u;
        }
}

int be_cpu_argmax(const float *v, int n)
{
    int best = 0;
    for (int i = 1; i < n; i++) if (v[i] > v[best]) best = i;
    return best;
}

/* ---- the KV pool ---- */
static size_t elem_bytes(scn_dtype d) { return d == SCN_DTYPE_FP32 ? 4 : d == SCN_DTYPE_FP16 || d == SCN_DTYPE_BF16 ? 2 : 1; }

static size_t vec_index(const be_cpu_kv_pool *p, long block, int slot, int layer, int kv, int head)
{
    return ((((size_t)block * p->layers + layer) * 2 + kv) * p->block_size + slot) * p->kv_heads + head;
}

int be_cpu_kv_pool_init(be_cpu_kv_pool *p, scn_dtype dtype, long blocks, int block_size, int layers, int kv_heads, int d)
{
    memset(p, 0, sizeof *p);
    if (dtype == SCN_DTYPE_INT4) return -1;   /* not stored by the CPU reference */
    p->dtype = dtype;
    p->blocks = blocks;
    p->block_size = block_size;
    p->layers = layers;
    p->kv_heads = kv_heads;
    p->head_dim = d;
    p->fp8_scale = 1.0f;   /* vLLM's default when no scale is calibrated */
    size_t vecs = (size_t)blocks * layers * 2 * block_size * kv_heads;
    p->data = calloc(vecs * d, elem_bytes(dtype));
    if (dtype == SCN_DTYPE_INT8) p->scales = calloc(vecs, sizeof(float));
    if (!p->data || (dtype == SCN_DTYPE_INT8 && !p->scales)) { be_cpu_kv_pool_free(p); return -1; }
    return 0;
}

void be_cpu_kv_pool_free(be_cpu_kv_pool *p)
{
    free(p->data);
    free(p->scales);
    p->data = NULL;
    p->scales = NULL;
}

double be_cpu_kv_pool_size(scn_dtype dtype, long blocks, int block_size, int layers, int kv_heads, int d)
{
    double vecs = (double)blocks * layers * 2 * block_size * kv_heads;
    return vecs * d * (double)elem_bytes(dtype) + (dtype == SCN_DTYPE_INT8 ? vecs * sizeof(float) : 0);
}

size_t be_cpu_kv_pool_bytes(const be_cpu_kv_pool *p)
{
    if (!p->data) return 0;
    return (size_t)be_cpu_kv_pool_size(p->dtype, p->blocks, p->block_size, p->layers, p->kv_heads, p->head_dim);
}

void be_cpu_kv_write(be_cpu_kv_pool *p, long block, int slot, int layer, int kv, int head, const float *vec)
{
    size_t vi = vec_index(p, block, slot, layer, kv, head), d = (size_t)p->head_dim;
    uint8_t *dst = p->data + vi * d * elem_bytes(p->dtype);
    switch (p->dtype) {
    case SCN_DTYPE_FP32: memcpy(dst, vec, d * 4); break;
    case SCN_DTYPE_FP16: for (size_t i = 0; i < d; i++) ((uint16_t *)dst)[i] = be_cpu_f32_to_f16(vec[i]); break;
    case SCN_DTYPE_BF16: for (size_t i = 0; i < d; i++) ((uint16_t *)dst)[i] = be_cpu_f32_to_bf16(vec[i]); break;
    case SCN_DTYPE_FP8: for (size_t i = 0; i < d; i++) dst[i] = be_cpu_f32_to_e4m3(vec[i] / p->fp8_scale); break;
    case SCN_DTYPE_INT8: {
        float amax = 0;
        for (size_t i = 0; i < d; i++) if (fabsf(vec[i]) > amax) amax = fabsf(vec[i]);
        float scale = amax > 0 ? amax / 127.0f : 1.0f;
        p->scales[vi] = scale;
        for (size_t i = 0; i < d; i++) ((int8_t *)dst)[i] = (int8_t)lrintf(vec[i] / scale);
        break;
    }
    default: break;
    }
}

void be_cpu_kv_read(const be_cpu_kv_pool *p, long block, int slot, int layer, int kv, int head, float *vec)
{
    size_t vi = vec_index(p, block, slot, layer, kv, head), d = (size_t)p->head_dim;
    const uint8_t *src = p->data + vi * d * elem_bytes(p->dtype);
    switch (p->dtype) {
    case SCN_DTYPE_FP32: memcpy(vec, src, d * 4); break;
    case SCN_DTYPE_FP16: for (size_t i = 0; i < d; i++) vec[i] = be_cpu_f16_to_f32(((const uint16_t *)src)[i]); break;
    case SCN_DTYPE_BF16: for (size_t i = 0; i < d; i++) vec[i] = be_cpu_bf16_to_f32(((const uint16_t *)src)[i]); break;
    case SCN_DTYPE_FP8: for (size_t i = 0; i < d; i++) vec[i] = be_cpu_e4m3_to_f32(src[i]) * p->fp8_scale; break;
    case SCN_DTYPE_INT8: for (size_t i = 0; i < d; i++) vec[i] = ((const int8_t *)src)[i] * p->scales[vi]; break;
    default: memset(vec, 0, d * 4); break;
    }
}

int be_cpu_attn_visible(const be_cpu_attn_mask *m, long p, long k)
{
    if (k > p) return 0;
    if (m->sliding > 0 && k <= p - m->sliding) return 0;
    if (m->window > 0 && k >= m->sink && k <= p - m->window) return 0;
    return 1;
}

void be_cpu_attention_paged(float *out, const float *q, const be_cpu_kv_pool *pool, int layer, const int32_t *blocks,
                         long start, int n, int H, const be_cpu_attn_mask *mask)
{
    int d = pool->head_dim, Hkv = pool->kv_heads, g = H / Hkv, bs = pool->block_size;
    float scale = 1.0f / sqrtf((float)d);
    long keys = start + n;
    /* Per KV head, each K and V vector is read once and serves the g query heads sharing it. */
    float *scores = malloc(sizeof(float) * (size_t)keys * g);
    float *vec = malloc(sizeof(float) * (size_t)d);
    double *acc = malloc(sizeof(double) * (size_t)d * g), *sum = malloc(sizeof(double) * (size_t)g);
    float *mx = malloc(sizeof(float) * (size_t)g);
    if (!scores || !vec || !acc || !sum || !mx) goto out;
    for (int j = 0; j < n; j++) {
        long p = start + j;
        for (int kh = 0; kh < Hkv; kh++) {
            const float *qv = q + ((size_t)j * H + (size_t)kh * g) * d;
            for (int a = 0; a < g; a++) mx[a] = -INFINITY;
            for (long k = 0; k <= p; k++) {
                float *sc = scores + (size_t)k * g;
                if (!be_cpu_attn_visible(mask, p, k)) { for (int a = 0; a < g; a++) sc[a] = -INFINITY; continue; }
                be_cpu_kv_read(pool, blocks[k / bs], (int)(k % bs), layer, 0, kh, vec);
                for (int a = 0; a < g; a++) {
                    float s = 0;
                    for (int i = 0; i < d; i++) s += qv[(size_t)a * d + i] * vec[i];
                    sc[a] = s * scale;
                    if (sc[a] > mx[a]) mx[a] = sc[a];
                }
            }
            for (int a = 0; a < g; a++) sum[a] = 0;
            for (size_t i = 0; i < (size_t)d * g; i++) acc[i] = 0;
            for (long k = 0; k <= p; k++) {
                float *sc = scores + (size_t)k * g;
                if (sc[0] == -INFINITY) continue;     /* visibility is the same for the whole group */
                be_cpu_kv_read(pool, blocks[k / bs], (int)(k % bs), layer, 1, kh, vec);
                for (int a = 0; a < g; a++) {
                    double w = exp((double)(sc[a] - mx[a]));
                    sum[a] += w;
                    for (int i = 0; i < d; i++) acc[(size_t)a * d + i] += w * vec[i];
                }
            }
            for (int a = 0; a < g; a++) {
                float *o = out + ((size_t)j * H + (size_t)kh * g + a) * d;
                for (int i = 0; i < d; i++) o[i] = (float)(acc[(size_t)a * d + i] / sum[a]);
            }
        }
    }
out:
    free(scores); free(vec); free(acc); free(sum); free(mx);
}
