/* be_cuda.h: the CUDA backend as a plugin. backend/cuda/ is built into a shared object
 * (libkvplan-cuda.so) that the kvplan binary opens with dlopen only when a command asks for it
 * (run/validate/calibrate --backend cuda, selftest, kernel-bench), the way ggml loads its
 * backends: the binary itself links no CUDA or cuBLAS, so commands that never touch a GPU start
 * as fast as the CPU-only build. The plugin exports one symbol, a table of function pointers
 * (be_cuda_plugin); loading it initialises nothing in CUDA: the runtime starts at the first
 * device call, and cuBLAS is opened when a backend context is created. */
#ifndef KVPLAN_BE_CUDA_H
#define KVPLAN_BE_CUDA_H

#include "be.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Raised whenever the table or any type it passes changes shape. */
#define BE_CUDA_PLUGIN_ABI 2
#define BE_CUDA_PLUGIN_SYMBOL "kvplan_cuda_plugin"
#define BE_CUDA_PLUGIN_FILE "libkvplan-cuda.so"

/* One selftest check: relative L2 error against the CPU reference, and its verdict. */
typedef void (*be_cuda_check_fn)(void *ud, const char *kernel, const char *shape, double err, double tol, int ok);
/* One measurement: seconds (median), rate in unit, and the share of the measured ceiling. */
typedef void (*be_cuda_bench_fn)(void *ud, const char *what, const char *shape, double seconds, double rate, const char *unit,
                                 double share_of_ceiling);

/* What the plugin takes from the binary (given once, right after loading): the engine's token
 * stream, so both backends embed the same ids. */
typedef struct be_cuda_host {
    uint32_t (*token_id)(uint64_t stream_seed, long pos);
} be_cuda_host;

typedef struct be_cuda_plugin {
    int abi;                      /* BE_CUDA_PLUGIN_ABI */
    size_t config_size;           /* sizeof(be_config) as the plugin was compiled: a stale plugin is refused */
    size_t batch_size;            /* sizeof(sim_batch_seq) likewise */
    const char *build;            /* compiler and targets, for --version */
    void (*bind)(const be_cuda_host *host);   /* called once by the loader before anything else */
    const be_ops *ops;            /* the backend ("cuda") */
    /* Devices the CUDA runtime can use (this starts the runtime); -1 with the reason in msg. */
    int (*device_count)(char *msg, size_t n);
    /* Every kernel against its CPU reference. Returns the number of failing checks (a CUDA error
     * inside one check is reported as that check failing, with the error's name, and the rest
     * still run), or -2 when there is no usable device (reason in msg). */
    int (*selftest)(be_cuda_check_fn report, void *ud, char *msg, size_t n);
    /* Ceilings and attention kernels; each row is reported as soon as it is measured, so rows
     * measured before an error are kept. 0, -1 on a CUDA error (msg), -2 without a device. */
    int (*kernel_bench)(be_cuda_bench_fn report, void *ud, char *msg, size_t n);
} be_cuda_plugin;

/* The plugin, opened on first use (later calls return the same table); NULL with the reason
 * (where it was looked for, or why it would not load) in why. Search order: $KVPLAN_CUDA_PLUGIN
 * (a file), the binary's directory, <binary's directory>/../lib/kvplan, and the build directory
 * the binary was compiled for. */
const be_cuda_plugin *be_cuda_plugin_load(char *why, size_t n);

/* For --version: where the plugin is and whether it loads, without starting CUDA. Returns 1 when
 * it loads (msg: path and build), 0 when none was found, -1 when one was found but would not load. */
int be_cuda_plugin_describe(char *msg, size_t n);

/* 1 when a plugin loads, else 0 (kept for callers that only ask whether CUDA is there). */
int be_cuda_built(void);
/* Devices visible to the CUDA runtime through the plugin; -1 with a reason in msg when none can
 * be used (no plugin, no driver, no device). Starts the CUDA runtime. */
int be_cuda_device_count(char *msg, size_t n);

#ifdef __cplusplus
}
#endif

#endif
