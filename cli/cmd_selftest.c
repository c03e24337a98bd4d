/* cmd_selftest.c: `kvplan selftest --backend cuda`: every CUDA kernel against the CPU reference
 * (backend/cuda/selftest.cu), and `kvplan kernel-bench`. Both open the CUDA plugin; without it or
 * without a device they say so and exit 69. */
#include "cli_run.h"
#include "../backend/be_cuda.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static void bench_row(void *ud, const char *what, const char *shape, double seconds, double rate, const char *unit, double share)
{
    out_doc *d = ud;
    out_cell_str(d, what);
    out_cell_str(d, shape);
    out_cell_num(d, seconds);
    out_cell_num(d, rate);
    out_cell_str(d, unit);
    out_cell_num(d, share);
    fprintf(stderr, "  %-26s %-40s %10.4g %s\n", what, shape, rate, unit);   /* progress on long device work */
}

static void row(void *ud, const char *kernel, const char *shape, double err, double tol, int ok)
{
    out_doc *d = ud;
    out_cell_str(d, kernel);
    out_cell_str(d, shape);
    out_cell_num(d, err);
    out_cell_num(d, tol);
    out_cell_str(d, ok ? "ok" : "FAIL");
    /* Each check also goes to stderr as it finishes: a run cut short by a timeout keeps them. */
    fprintf(stderr, "  %-4s %-22s %-70s %10.3g (tolerance %.3g)\n", ok ? "ok" : "FAIL", kernel, shape, err, tol);
}

/* The plugin, or exit 69 with where it was looked for. */
static const be_cuda_plugin *plugin_or_say(const char *cmd)
{
    char why[1200];
    const be_cuda_plugin *p = be_cuda_plugin_load(why, sizeof why);
    if (!p) fprintf(stderr, "kvplan: %s: %s\n", cmd, why);
    return p;
}

int cmd_selftest(int argc, char **argv)
{
    cli_common c = {.format = OUT_TABLE};
    const char *backend = "cuda";
    int help = 0;
    for (int i = 1; i < argc; i++) {
        int r = cli_common_flag(&c, argc, argv, &i, &help);
        if (r < 0) return CLI_EX_USAGE;
        if (r) continue;
        const char *v;
        if ((v = cli_flag_value(argc, argv, &i, "--backend"))) { if (cli_flag_missing_value(v)) return CLI_EX_USAGE; backend = v; }
        else return cli_usage_error("selftest", "unexpected argument '%s'", argv[i]);
    }
    if (help) { fputs(cli_usage_of("selftest"), stdout); return CLI_OK; }
    if (!strcmp(backend, "cpu")) {
        printf("the cpu backend is the reference the cuda kernels are checked against; `make check` tests it\n");
        return CLI_OK;
    }
    if (strcmp(backend, "cuda")) return cli_usage_error("selftest", "--backend takes cuda (or cpu), not '%s'", backend);
    const be_cuda_plugin *plug = plugin_or_say("selftest");
    if (!plug) return CLI_EX_UNAVAILABLE;
    out_doc *doc = out_doc_init();
    static const out_col cols[] = {{"kernel", "kernel", OUT_STR}, {"shape", "shape", OUT_STR}, {"error", "rel L2 error", OUT_NUM},
                                   {"tolerance", "tolerance", OUT_NUM}, {"result", "result", OUT_STR}};
    out_table(doc, "kernels", "CUDA kernels against the CPU reference", 5, cols);
    char msg[600];
    int failures = plug->selftest(row, doc, msg, sizeof msg);
    if (failures == -2) {
        fprintf(stderr, "kvplan: selftest: %s\n", msg);
        out_doc_free(doc);
        return CLI_EX_UNAVAILABLE;
    }
    /* Every row is printed, the failing ones too: a check that hit a CUDA error is a failing row
     * whose shape names the error, and the checks after it still ran. */
    int rc = cli_emit(doc, c.format);
    out_doc_free(doc);
    if (failures < 0) { fprintf(stderr, "kvplan: selftest: CUDA error: %s\n", msg); return CLI_EX_INTERNAL; }
    if (failures > 0) { fprintf(stderr, "kvplan: selftest: %d check(s) failed\n", failures); return CLI_EX_INTERNAL; }
    return rc;
}

int cmd_kernel_bench(int argc, char **argv)
{
    cli_common c = {.format = OUT_TABLE};
    int help = 0;
    for (int i = 1; i < argc; i++) {
        int r = cli_common_flag(&c, argc, argv, &i, &help);
        if (r < 0) return CLI_EX_USAGE;
        if (!r) return cli_usage_error("kernel-bench", "unexpected argument '%s'", argv[i]);
    }
    if (help) { fputs(cli_usage_of("kernel-bench"), stdout); return CLI_OK; }
    const be_cuda_plugin *plug = plugin_or_say("kernel-bench");
    if (!plug) return CLI_EX_UNAVAILABLE;
    out_doc *doc = out_doc_init();
    static const out_col cols[] = {{"what", "kernel", OUT_STR}, {"shape", "shape", OUT_STR}, {"seconds", "time", OUT_SECONDS},
                                   {"rate", "rate", OUT_NUM}, {"unit", "unit", OUT_STR}, {"share_of_ceiling", "of ceiling", OUT_FRAC}};
    out_table(doc, "kernels", "Device measurements (median of repeats, CUDA events)", 6, cols);
    char msg[600];
    int rc = plug->kernel_bench(bench_row, doc, msg, sizeof msg);
    if (rc == -2) { fprintf(stderr, "kvplan: kernel-bench: %s\n", msg); out_doc_free(doc); return CLI_EX_UNAVAILABLE; }
    /* Rows measured before an error are kept: the table is printed first, then the error. */
    int emitted = cli_emit(doc, c.format);
    out_doc_free(doc);
    if (rc < 0) { fprintf(stderr, "kvplan: kernel-bench: CUDA error: %s\n", msg); return CLI_EX_INTERNAL; }
    return emitted;
}
