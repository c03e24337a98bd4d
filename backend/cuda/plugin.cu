/* plugin.cu: the plugin's one exported symbol, the table kvplan's be_cuda.c looks up after
 * dlopen (see backend/be_cuda.h). Every other symbol of libkvplan-cuda.so is local (the link's
 * version script, backend/cuda/plugin.map), so the plugin's copies of the CPU reference kernels
 * cannot collide with the binary's. */
#include "../be_cuda.h"

extern "C" const be_ops BE_CUDA;                                          /* cuda_backend.cu */
extern "C" int be_cuda_probe_devices(char *msg, size_t n);                /* probe.cu */
extern "C" int be_cuda_selftest(be_cuda_check_fn report, void *ud, char *msg, size_t n);   /* selftest.cu */
extern "C" int be_cuda_kernel_bench(be_cuda_bench_fn report, void *ud, char *msg, size_t n); /* kernel_bench.cu */

/* The binary's functions the plugin calls, given by bind(). */
static be_cuda_host host;

static void bind(const be_cuda_host *h) { host = *h; }

/* sim_seq_token (sim/sim.h, inline) calls this: the engine's own token stream, from the binary. */
extern "C" uint32_t sim_token_id(uint64_t stream_seed, long pos) { return host.token_id(stream_seed, pos); }

#define STR2(x) #x
#define STR(x) STR2(x)

extern "C" __attribute__((visibility("default"))) const be_cuda_plugin kvplan_cuda_plugin = {
    BE_CUDA_PLUGIN_ABI,
    sizeof(be_config),
    sizeof(sim_batch_seq),
    "nvcc " STR(__CUDACC_VER_MAJOR__) "." STR(__CUDACC_VER_MINOR__) ", sm_90 + PTX",
    bind,
    &BE_CUDA,
    be_cuda_probe_devices,
    be_cuda_selftest,
    be_cuda_kernel_bench,
};
