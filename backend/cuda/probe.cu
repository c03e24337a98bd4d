/* probe.cu: asks the CUDA runtime how many devices it can use. Compiled by nvcc whenever it is
 * present, so the CUDA build path is exercised on machines without a GPU too. */
#include <cstdio>
#include <cuda_runtime.h>

extern "C" int be_cuda_probe_devices(char *msg, size_t n)
{
    int count = 0;
    cudaError_t st = cudaGetDeviceCount(&count);
    if (st != cudaSuccess) {
        snprintf(msg, n, "no usable CUDA device: %s (%s)", cudaGetErrorString(st), cudaGetErrorName(st));
        return -1;
    }
    if (count == 0) {
        snprintf(msg, n, "no CUDA device found");
        return -1;
    }
    cudaDeviceProp prop;
    st = cudaGetDeviceProperties(&prop, 0);
    if (st != cudaSuccess) {
        snprintf(msg, n, "cudaGetDeviceProperties failed: %s", cudaGetErrorString(st));
        return -1;
    }
    snprintf(msg, n, "%d device(s); device 0: %s, compute capability %d.%d, %.1f GiB", count, prop.name,
             prop.major, prop.minor, (double)prop.totalGlobalMem / (1024.0 * 1024.0 * 1024.0));
    return count;
}
