/* be_cuda.c: the always-built side of the CUDA probe; it forwards to backend/cuda/ when that
 * was compiled and says plainly that it was not otherwise. */
#include "be_cuda.h"

#include <stdio.h>

#ifdef KVPLAN_CUDA
int be_cuda_probe_devices(char *msg, size_t n);   /* backend/cuda/probe.cu */
int be_cuda_built(void) { return 1; }
int be_cuda_device_count(char *msg, size_t n) { return be_cuda_probe_devices(msg, n); }
#else
int be_cuda_built(void) { return 0; }
int be_cuda_device_count(char *msg, size_t n)
{
    snprintf(msg, n, "this kvplan was built without CUDA (nvcc was not found at build time)");
    return -1;
}
#endif
