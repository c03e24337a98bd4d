/* be_cuda.h: what the rest of kvplan may ask of the CUDA backend before it has a device:
 * whether it was built, and how many devices the driver reports. */
#ifndef KVPLAN_BE_CUDA_H
#define KVPLAN_BE_CUDA_H

#include <stddef.h>

/* 1 when this binary was built with nvcc, else 0. */
int be_cuda_built(void);
/* Devices visible to the CUDA runtime; -1 with a reason in msg when none can be used
 * (not built, no driver, no device). */
int be_cuda_device_count(char *msg, size_t n);

#endif
