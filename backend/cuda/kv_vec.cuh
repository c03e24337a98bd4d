/* kv_vec.cuh: 8 consecutive KV elements of one head vector as floats, one vector load per dtype
 * (16 bytes for fp16/bf16, two for fp32, 8 bytes for fp8/int8), and the factor that turns
 * stored values into real ones. Shared by the decode (attn_decode_v2.cu) and tensor-core
 * prefill (attn_prefill_tc.cu) kernels; the KV layout is cuda_common.cuh's (be_cuda_vec), the
 * reference be_cpu_kv_read. Every pointer given here must be aligned to the load's width
 * (8 elements of T): the launchers check the pool's base, and head_dim is a multiple of 8. */
#ifndef KVPLAN_KV_VEC_CUH
#define KVPLAN_KV_VEC_CUH

#include "cuda_common.cuh"

#define KV_EPT 8   /* elements per vector load */

/* From raw bytes already in registers (a load from global or shared memory). */
__device__ __forceinline__ void unpack8(const uint4 &u, __half, float v[KV_EPT])
{
    const __half2 *h = (const __half2 *)&u;
#pragma unroll
    for (int i = 0; i < 4; i++) { float2 f = __half22float2(h[i]); v[2 * i] = f.x; v[2 * i + 1] = f.y; }
}
__device__ __forceinline__ void unpack8(const uint4 &u, __nv_bfloat16, float v[KV_EPT])
{
    const __nv_bfloat162 *h = (const __nv_bfloat162 *)&u;
#pragma unroll
    for (int i = 0; i < 4; i++) { float2 f = __bfloat1622float2(h[i]); v[2 * i] = f.x; v[2 * i + 1] = f.y; }
}
__device__ __forceinline__ void unpack8(const uint2 &u, __nv_fp8_e4m3, float v[KV_EPT])
{
    const __nv_fp8_e4m3 *b = (const __nv_fp8_e4m3 *)&u;
#pragma unroll
    for (int i = 0; i < KV_EPT; i++) v[i] = float(b[i]);
}
__device__ __forceinline__ void unpack8(const uint2 &u, signed char, float v[KV_EPT])
{
    const signed char *b = (const signed char *)&u;
#pragma unroll
    for (int i = 0; i < KV_EPT; i++) v[i] = (float)b[i];
}

/* From global memory through the read-only path. */
__device__ __forceinline__ void load8(const float *p, float v[KV_EPT])
{
    float4 a = __ldg((const float4 *)p), b = __ldg((const float4 *)p + 1);
    v[0] = a.x; v[1] = a.y; v[2] = a.z; v[3] = a.w; v[4] = b.x; v[5] = b.y; v[6] = b.z; v[7] = b.w;
}
__device__ __forceinline__ void load8(const __half *p, float v[KV_EPT]) { unpack8(__ldg((const uint4 *)p), __half(), v); }
__device__ __forceinline__ void load8(const __nv_bfloat16 *p, float v[KV_EPT]) { unpack8(__ldg((const uint4 *)p), __nv_bfloat16(), v); }
__device__ __forceinline__ void load8(const __nv_fp8_e4m3 *p, float v[KV_EPT]) { unpack8(__ldg((const uint2 *)p), __nv_fp8_e4m3(), v); }
__device__ __forceinline__ void load8(const signed char *p, float v[KV_EPT]) { unpack8(__ldg((const uint2 *)p), (signed char)0, v); }

/* The factor that turns stored values into real ones: 1, fp8's tensor scale, int8's per-vector
 * scale (be_cpu_kv_read multiplies the same way, stored value times scale, in fp32). */
template <typename T> __device__ __forceinline__ float vec_scale(const be_cuda_pool &, size_t) { return 1.0f; }
template <> __device__ __forceinline__ float vec_scale<__nv_fp8_e4m3>(const be_cuda_pool &p, size_t) { return p.fp8_scale; }
template <> __device__ __forceinline__ float vec_scale<signed char>(const be_cuda_pool &p, size_t vec) { return __ldg(p.scales + vec); }

#endif
