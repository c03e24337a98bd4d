/* vf_profile.c: the calibrated hardware profile: written as YAML that extends the base profile
 * (so the library stays the source of the uncalibrated facts), and `calibrate` as one call. The
 * profile goes to the user's data directory (scn_user_dir), never into the shipped library. */
#include "vf.h"

#include <errno.h>
#include <string.h>

vf_status vf_profile_write(const char *path, const char *name, const scn_hardware *base, const be_calibration *cal,
                           const char *host, const char *when, const char *backend, char *err, size_t n)
{
    const be_fit *f = &cal->fit;
    FILE *fp = fopen(path, "w");
    if (!fp) { snprintf(err, n, "cannot create %s: %s", path, strerror(errno)); return VF_E_CANTCREAT; }
    fprintf(fp, "# %s: written by `kvplan calibrate --backend %s` on %s, %s.\n", name, backend, host, when);
    fprintf(fp, "# Measured: copy bandwidth %.4g GB/s (bytes read + written), best %s GEMM %.4g TFLOP/s.\n",
            f->memory_bandwidth / 1e9, scn_dtype_name(f->gemm_dtype), f->gemm_flops / 1e12);
    if (cal->n)
        fprintf(fp, "# Fitted over %d measured points: rms log error %.3f, median |error| %.1f %%.\n", cal->n,
                cal->rms_log_error, 100 * cal->median_abs_error);
    fprintf(fp, "extends: %s\nname: %s\n", base->name, name);
    fprintf(fp, "memory_bandwidth: %.6g GB/s\n", f->memory_bandwidth / 1e9);
    fprintf(fp, "compute: {%s: %.6g GFLOPS}\n", scn_dtype_name(f->gemm_dtype), f->gemm_flops / 1e9);
    fprintf(fp, "efficiency: {memory_bandwidth: %.6g, compute: %.6g, attention: %.6g, interconnect: %.6g}\n",
            f->eff_bandwidth, f->eff_compute, f->eff_attention, base->eff_link);
    fprintf(fp, "overhead: {kernel_launch: %.6g us, step: %.6g us, runtime_memory: %.6g MiB}\n", f->kernel_overhead * 1e6,
            f->step_overhead * 1e6, base->runtime_memory / 1048576.0);
    fprintf(fp, "calibrated: true\n");
    if (ferror(fp) | (fclose(fp) != 0)) { snprintf(err, n, "writing %s failed: %s", path, strerror(errno)); return VF_E_CANTCREAT; }
    return VF_OK;
}

vf_status vf_calibrate(const vf_calibrate_req *rq, vf_calibrate_result *out, char *err, size_t n)
{
    const scn_scenario *s = rq->s;
    memset(out, 0, sizeof *out);
    if (!rq->backend == !rq->n_runs) { snprintf(err, n, "measure a backend or fit stored runs: one of the two"); return VF_E_DATA; }
    vf_status st = rq->backend ? vf_calibrate_backend(rq->backend, s, &out->cal, rq->progress, rq->ud, err, n)
                               : vf_fit_runs(rq->d, rq->runs, rq->n_runs, s, &out->cal, err, n);
    if (st != VF_OK) return st;
    if (rq->name) snprintf(out->name, sizeof out->name, "%s", rq->name);
    else snprintf(out->name, sizeof out->name, "%.*s.calibrated", SCN_NAME_MAX - 1, s->hardware.name);
    if (rq->out_path) {
        snprintf(out->path, sizeof out->path, "%s", rq->out_path);
    } else {
        char dir[3800];
        if (scn_user_dir("hardware", dir, sizeof dir)) {
            snprintf(err, n, "no directory for user data: set XDG_DATA_HOME or HOME, or pass --out");
            return VF_E_CANTCREAT;
        }
        if (scn_mkdirs(dir)) { snprintf(err, n, "cannot create %s: %s", dir, strerror(errno)); return VF_E_CANTCREAT; }
        snprintf(out->path, sizeof out->path, "%s/%s.yaml", dir, out->name);
    }
    char source[400] = "microbenchmarks";
    if (rq->n_runs) {
        size_t used = (size_t)snprintf(source, sizeof source, "runs");
        for (int i = 0; i < rq->n_runs && used < sizeof source; i++)
            used += (size_t)snprintf(source + used, sizeof source - used, "%s%ld", i ? "," : " ", rq->runs[i]);
    }
    char host[256], when[32];
    vf_hostname(host, sizeof host);
    db_now_iso(when, sizeof when);
    const char *backend = rq->backend ? rq->backend : "import";
    if ((st = vf_profile_write(out->path, out->name, &s->hardware, &out->cal, host, when, backend, err, n))) return st;
    return vf_calibration_store(rq->d, out->name, s->hardware.name, backend, source, &out->cal, &out->calibration_id,
                                err, n);
}
