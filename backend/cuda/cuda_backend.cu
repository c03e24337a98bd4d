/* cuda_backend.cu: the CUDA backend's be_ops table. Creating it probes the device first, so a
 * machine without one gets BE_E_UNAVAILABLE and a plain reason (exit 69 from the CLI). */
#include <cstdio>
#include <cuda_runtime.h>

#include "../be.h"

extern "C" int be_cuda_probe_devices(char *msg, size_t n);

static be_status cuda_create(void **ctx, const be_config *cfg, char *err, size_t n)
{
    (void)ctx;
    (void)cfg;
    char msg[256];
    if (be_cuda_probe_devices(msg, sizeof msg) <= 0) {
        snprintf(err, n, "%s", msg);
        return BE_E_UNAVAILABLE;
    }
    snprintf(err, n, "a CUDA device is present (%s) but this build's CUDA step kernels are not available yet", msg);
    return BE_E_UNAVAILABLE;
}

static be_status cuda_alloc_kv(void *, long, char *err, size_t n) { snprintf(err, n, "no CUDA context"); return BE_E_RUNTIME; }
static be_status cuda_run(void *, const sim_batch *, be_step_out *, char *err, size_t n) { snprintf(err, n, "no CUDA context"); return BE_E_RUNTIME; }
static void cuda_destroy(void *) {}

extern "C" const be_ops BE_CUDA = {
    "cuda", cuda_create, cuda_alloc_kv, cuda_run, cuda_destroy, NULL, NULL, NULL, NULL, NULL,
};
