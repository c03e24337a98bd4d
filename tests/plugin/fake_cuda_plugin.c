/* fake_cuda_plugin.c: a stand-in for libkvplan-cuda.so that needs no CUDA, so the plugin
 * machinery (search, dlopen, the ABI check, the CLI's handling of rows and errors) is tested on
 * any machine (tests/test_cuda_plugin.c). It behaves like the real plugin on a machine without a
 * GPU, except that its selftest and kernel-bench report a few rows before failing, and every
 * entry that would start CUDA leaves a mark in $FAKE_PLUGIN_MARK, so a test can tell that
 * `kvplan --version` started nothing. Built with -DFAKE_ABI=N it claims another interface. */
#include "../../backend/be_cuda.h"

#include <stdio.h>
#include <stdlib.h>

#ifndef FAKE_ABI
#define FAKE_ABI BE_CUDA_PLUGIN_ABI
#endif

static be_cuda_host host;

static void mark(const char *what)
{
    const char *p = getenv("FAKE_PLUGIN_MARK");
    FILE *f = p ? fopen(p, "a") : NULL;
    if (f) { fprintf(f, "%s\n", what); fclose(f); }
}

static void bind(const be_cuda_host *h) { host = *h; }

static int device_count(char *msg, size_t n)
{
    mark("device_count");
    snprintf(msg, n, "fake plugin: no device (token 0 of stream 1 is %u)", host.token_id ? host.token_id(1, 0) : 0u);
    return -1;
}

static be_status create(void **ctx, const be_config *cfg, char *err, size_t n)
{
    (void)ctx; (void)cfg;
    mark("create");
    snprintf(err, n, "fake plugin: no usable CUDA device");
    return BE_E_UNAVAILABLE;
}
static be_status alloc_kv(void *ctx, long blocks, char *err, size_t n) { (void)ctx; (void)blocks; (void)err; (void)n; return BE_E_RUNTIME; }
static be_status run(void *ctx, const sim_batch *b, be_step_out *out, char *err, size_t n)
{
    (void)ctx; (void)b; (void)out; (void)err; (void)n;
    return BE_E_RUNTIME;
}
static void destroy(void *ctx) { (void)ctx; }

static const be_ops FAKE_OPS = {.name = "cuda", .create = create, .alloc_kv = alloc_kv, .run = run, .destroy = destroy};

/* Two checks, one failing (as a kernel whose launch failed would be reported), then done. */
static int selftest(be_cuda_check_fn report, void *ud, char *msg, size_t n)
{
    mark("selftest");
    if (getenv("FAKE_PLUGIN_NODEVICE")) { snprintf(msg, n, "fake plugin: no device"); return -2; }
    report(ud, "rmsnorm", "T=1 h=64", 1e-7, 1e-5, 1);
    report(ud, "attn_decode v2", "bf16 d=128 [CUDA error cudaErrorLaunchFailure: fake]", 1.0 / 0.0, 0, 0);
    report(ud, "attn_decode v1", "bf16 d=128", 2e-6, 1e-4, 1);
    return 1;
}

/* One measurement, then an error: the row must survive. */
static int kernel_bench(be_cuda_bench_fn report, void *ud, char *msg, size_t n)
{
    mark("kernel_bench");
    report(ud, "copy", "2 GiB device to device", 0.001, 4300.0, "GB/s", 1.0);
    snprintf(msg, n, "fake plugin: cudaErrorIllegalAddress in the GEMM ceiling");
    return -1;
}

__attribute__((visibility("default"))) const be_cuda_plugin kvplan_cuda_plugin = {
    FAKE_ABI, sizeof(be_config), sizeof(sim_batch_seq), "fake plugin for tests", bind, &FAKE_OPS, device_count, selftest, kernel_bench,
};
