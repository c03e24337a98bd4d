/* gemm.cu: GEMMs through cuBLAS in bf16 with fp32 accumulation: out[M x N] (fp32) =
 * x[M x K] (fp32, rounded to bf16) * w[K x N] (bf16). Row-major through column-major cuBLAS:
 * C^T = W^T X^T. Reference: be_cpu_matmul on bf16-rounded operands.
 *
 * cuBLAS is opened here with dlopen when a backend context is made, not linked: libcublasLt alone
 * is over 500 MB, and linking it cost every kvplan command about 200 MiB and up to seconds of
 * start-up. The handle and the function pointers live in the context's workspace. */
#include <cublas_v2.h>
#include <dlfcn.h>
#include <glob.h>
#include <link.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_common.cuh"
#include "cuda_kernels.h"

typedef decltype(&cublasCreate_v2) create_fn;
typedef decltype(&cublasDestroy_v2) destroy_fn;
/* cublasGemmEx's C signature (C++ sees an overload set, so it is spelled out). */
typedef cublasStatus_t (*gemm_ex_fn)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int, const void *,
                                     const void *, cudaDataType, int, const void *, cudaDataType, int, const void *, void *,
                                     cudaDataType, int, cublasComputeType_t, cublasGemmAlgo_t);
/* Checked against the header at compile time. */
static_assert(sizeof(static_cast<gemm_ex_fn>(&cublasGemmEx)) > 0, "cublasGemmEx signature");
typedef const char *(*status_name_fn)(cublasStatus_t);

#define STR2(x) #x
#define STR(x) STR2(x)
#define CUBLAS_SONAME "libcublas.so." STR(CUBLAS_VER_MAJOR)

/* Where libcublas may be, in order: an explicit file ($KVPLAN_CUBLAS; when it does not load,
 * the search below still runs, the failure listed among the places tried); the soname through
 * the loader's search (LD_LIBRARY_PATH, this plugin's RUNPATH to the toolkit it was built with,
 * ldconfig); the toolkit's usual homes; the pip wheels (nvidia-cublas: nvidia/cublas/lib, and
 * nvidia/cu13/lib in CUDA 13's) that PyTorch images carry; conda. Only this soname: another
 * major version is another ABI. */
static void *open_cublas(char *path, size_t n, char *tried, size_t tn)
{
    size_t used = 0;
    auto attempt = [&](const char *p) -> void * {
        void *h = dlopen(p, RTLD_NOW | RTLD_LOCAL);
        if (used < tn) used += (size_t)snprintf(tried + used, tn - used, "%s%s", used ? ", " : "", p);
        if (h) {
            struct link_map *lm = NULL;
            if (dlinfo(h, RTLD_DI_LINKMAP, &lm) == 0 && lm && lm->l_name && lm->l_name[0]) snprintf(path, n, "%.255s", lm->l_name);
            else snprintf(path, n, "%.255s", p);
        }
        return h;
    };
    const char *env = getenv("KVPLAN_CUBLAS");
    void *h = NULL;
    if (env && *env && (h = attempt(env))) return h;
    if ((h = attempt(CUBLAS_SONAME))) return h;
    char buf[600];
    static const char *const homes[][2] = {{"CUDA_HOME", "lib64"}, {"CONDA_PREFIX", "lib"}};
    for (auto &hm : homes) {
        const char *home = getenv(hm[0]);
        if (home && *home) {
            snprintf(buf, sizeof buf, "%s/%s/%s", home, hm[1], CUBLAS_SONAME);
            if ((h = attempt(buf))) return h;
        }
    }
    static const char *const patterns[] = {
        "/usr/local/cuda/lib64/" CUBLAS_SONAME,
        "/usr/local/cuda/targets/x86_64-linux/lib/" CUBLAS_SONAME,
        "/usr/local/cuda-*/lib64/" CUBLAS_SONAME,
        "/usr/local/cuda-*/lib/" CUBLAS_SONAME,
        "/usr/local/cuda-*/targets/x86_64-linux/lib/" CUBLAS_SONAME,
        "/usr/local/lib/python3*/site-packages/nvidia/*/lib/" CUBLAS_SONAME,     /* also nvidia/cu13/lib */
        "/usr/local/lib/python3*/dist-packages/nvidia/*/lib/" CUBLAS_SONAME,
        "/usr/lib/python3/dist-packages/nvidia/*/lib/" CUBLAS_SONAME,
        "/opt/*/.venv/lib/python3*/site-packages/nvidia/*/lib/" CUBLAS_SONAME,
        "/opt/conda/lib/" CUBLAS_SONAME,
        "/opt/conda/envs/*/lib/" CUBLAS_SONAME,
    };
    for (const char *pat : patterns) {
        glob_t g;
        if (glob(pat, 0, NULL, &g) == 0) {
            for (size_t i = 0; i < g.gl_pathc && !h; i++) h = attempt(g.gl_pathv[i]);
            globfree(&g);
            if (h) return h;
        }
    }
    return NULL;
}

extern "C" int be_cuda_ws_init(be_cuda_ws *ws)
{
    memset(ws, 0, sizeof *ws);
    /* Kernel choices; an unknown value is an error, not a silent default. */
    const char *dk = getenv("KVPLAN_CUDA_DECODE"), *pk = getenv("KVPLAN_CUDA_PREFILL");
    if (!dk || !*dk || !strcmp(dk, "v2")) ws->decode_kernel = BE_CUDA_DECODE_V2;
    else if (!strcmp(dk, "v2direct")) ws->decode_kernel = BE_CUDA_DECODE_V2_DIRECT;
    else if (!strcmp(dk, "v1")) ws->decode_kernel = BE_CUDA_DECODE_V1;
    else {
        snprintf(be_cuda_last_error, sizeof be_cuda_last_error, "KVPLAN_CUDA_DECODE must be v2, v2direct or v1 (got '%.60s')", dk);
        return -1;
    }
    if (!pk || !*pk || !strcmp(pk, "fp32")) ws->prefill_kernel = BE_CUDA_PREFILL_FP32;
    else if (!strcmp(pk, "tc")) ws->prefill_kernel = BE_CUDA_PREFILL_TC;
    else {
        snprintf(be_cuda_last_error, sizeof be_cuda_last_error, "KVPLAN_CUDA_PREFILL must be fp32 or tc (got '%.60s')", pk);
        return -1;
    }
    int dev = 0;
    CUDA_CHECK(cudaGetDevice(&dev));
    CUDA_CHECK(cudaDeviceGetAttribute(&ws->num_sms, cudaDevAttrMultiProcessorCount, dev));
    char tried[1024] = "";
    ws->blas_lib = open_cublas(ws->blas_path, sizeof ws->blas_path, tried, sizeof tried);
    if (!ws->blas_lib) {
        snprintf(be_cuda_last_error, sizeof be_cuda_last_error,
                 "cannot open cuBLAS (%s): tried %s; set KVPLAN_CUBLAS to the file or add its folder to LD_LIBRARY_PATH",
                 CUBLAS_SONAME, tried);
        return -1;
    }
    create_fn create = (create_fn)dlsym(ws->blas_lib, "cublasCreate_v2");
    ws->destroy = dlsym(ws->blas_lib, "cublasDestroy_v2");
    ws->gemm_ex = dlsym(ws->blas_lib, "cublasGemmEx");
    ws->status_name = dlsym(ws->blas_lib, "cublasGetStatusName");
    if (!create || !ws->destroy || !ws->gemm_ex) {
        snprintf(be_cuda_last_error, sizeof be_cuda_last_error, "%.255s lacks cublasCreate_v2/cublasDestroy_v2/cublasGemmEx", ws->blas_path);
        be_cuda_ws_free(ws);
        return -1;
    }
    cublasHandle_t h = NULL;
    cublasStatus_t st = create(&h);
    if (st != CUBLAS_STATUS_SUCCESS) {
        snprintf(be_cuda_last_error, sizeof be_cuda_last_error, "cublasCreate failed: %.60s (cuBLAS from %.255s)",
                 ws->status_name ? ((status_name_fn)ws->status_name)(st) : "status", ws->blas_path);
        be_cuda_ws_free(ws);
        return -1;
    }
    ws->blas = h;
    return 0;
}

extern "C" void be_cuda_ws_free(be_cuda_ws *ws)
{
    if (ws->blas && ws->destroy) ((destroy_fn)ws->destroy)((cublasHandle_t)ws->blas);
    if (ws->scratch) cudaFree(ws->scratch);
    if (ws->blas_lib) dlclose(ws->blas_lib);
    int dk = ws->decode_kernel, pk = ws->prefill_kernel;
    memset(ws, 0, sizeof *ws);
    ws->decode_kernel = dk;
    ws->prefill_kernel = pk;
}

__global__ void to_bf16_kernel(__nv_bfloat16 *out, const float *x, size_t n)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        out[i] = __float2bfloat16_rn(x[i]);
}

/* out[M x N] fp32 (= or +=, by beta) a[M x K] * b[K x N], both bf16 and row-major: cuBLAS sees
 * the column-major transpose, so b comes first. The one call every GEMM entry point makes. */
static int gemm_ex(be_cuda_ws *ws, float *out, const void *a_bf16, const void *b_bf16, int M, int N, int K, float beta)
{
    float alpha = 1.0f;
    cublasStatus_t st = ((gemm_ex_fn)ws->gemm_ex)((cublasHandle_t)ws->blas, CUBLAS_OP_N, CUBLAS_OP_N, N, M, K, &alpha, b_bf16,
                                                  CUDA_R_16BF, N, a_bf16, CUDA_R_16BF, K, &beta, out, CUDA_R_32F, N,
                                                  CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    if (st != CUBLAS_STATUS_SUCCESS) {
        snprintf(be_cuda_last_error, sizeof be_cuda_last_error, "cublasGemmEx failed: %s (M %d, N %d, K %d)",
                 ws->status_name ? ((status_name_fn)ws->status_name)(st) : "status", M, N, K);
        return -1;
    }
    return 0;
}

extern "C" int be_cuda_gemm(be_cuda_ws *ws, float *out, const float *x, const void *w_bf16, int M, int N, int K,
                            int accumulate, void *scratch_bf16)
{
    if (!ws->blas) {
        snprintf(be_cuda_last_error, sizeof be_cuda_last_error, "be_cuda_gemm called without a cuBLAS handle");
        return -1;
    }
    size_t n = (size_t)M * K;
    unsigned blocks = (unsigned)((n + 255) / 256 < 4096 ? (n + 255) / 256 : 4096);
    to_bf16_kernel<<<blocks ? blocks : 1, 256>>>((__nv_bfloat16 *)scratch_bf16, x, n);
    LAUNCH_CHECK();
    return gemm_ex(ws, out, scratch_bf16, w_bf16, M, N, K, accumulate ? 1.0f : 0.0f);
}

/* The GEMM alone, operands already bf16: the ceiling kernel-bench and calibration measure,
 * without the fp32->bf16 cast of be_cuda_gemm. out[M x N] fp32 = a[M x K] * b[K x N]. */
extern "C" int be_cuda_gemm_bf16(be_cuda_ws *ws, float *out, const void *a_bf16, const void *b_bf16, int M, int N, int K)
{
    if (!ws->blas) {
        snprintf(be_cuda_last_error, sizeof be_cuda_last_error, "be_cuda_gemm_bf16 called without a cuBLAS handle");
        return -1;
    }
    return gemm_ex(ws, out, a_bf16, b_bf16, M, N, K, 0.0f);
}
