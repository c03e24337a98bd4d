/* vf_calibration.c: a calibration as stored: measuring a backend, the fit as JSON (and back),
 * and the database row (fit, points, errors, host). */
#include "vf.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void vf_hostname(char *buf, size_t n)
{
    if (gethostname(buf, n) != 0) snprintf(buf, n, "unknown");
    buf[n - 1] = 0;
}

char *vf_fit_json(const be_fit *f)
{
    json_t *j = json_pack("{s:f, s:s, s:f, s:f, s:f, s:f, s:f, s:f}", "memory_bandwidth", f->memory_bandwidth,
                          "gemm_dtype", scn_dtype_name(f->gemm_dtype), "gemm_flops", f->gemm_flops, "eff_bandwidth",
                          f->eff_bandwidth, "eff_compute", f->eff_compute, "eff_attention", f->eff_attention,
                          "kernel_overhead_s", f->kernel_overhead, "step_overhead_s", f->step_overhead);
    char *s = j ? json_dumps(j, JSON_COMPACT | JSON_REAL_PRECISION(17)) : NULL;
    json_decref(j);
    return s;
}

int vf_fit_parse(const char *text, be_fit *f)
{
    json_t *j = json_loads(text, 0, NULL);
    const char *dt = NULL;
    int rc = -1;
    if (j && json_unpack(j, "{s:F, s:s, s:F, s:F, s:F, s:F, s:F, s:F}", "memory_bandwidth", &f->memory_bandwidth,
                         "gemm_dtype", &dt, "gemm_flops", &f->gemm_flops, "eff_bandwidth", &f->eff_bandwidth,
                         "eff_compute", &f->eff_compute, "eff_attention", &f->eff_attention, "kernel_overhead_s",
                         &f->kernel_overhead, "step_overhead_s", &f->step_overhead) == 0 &&
        scn_dtype_parse(dt, &f->gemm_dtype) == 0)
        rc = 0;
    json_decref(j);
    return rc;
}

static char *points_json(const be_calibration *cal)
{
    json_t *a = json_array();
    for (int i = 0; a && i < cal->n; i++) {
        const be_cal_point *p = &cal->pts[i];
        json_array_append_new(a, json_pack("{s:i, s:i, s:i, s:f, s:f}", "seqs", p->seqs, "new_tokens", p->new_tokens,
                                           "context", p->context, "measured_s", p->measured, "predicted_s", p->predicted));
    }
    char *s = a ? json_dumps(a, JSON_COMPACT | JSON_REAL_PRECISION(17)) : NULL;
    json_decref(a);
    return s;
}

vf_status vf_calibrate_backend(const char *backend, const scn_scenario *s, be_calibration *cal,
                               void (*progress)(void *ud, long done, long total), void *ud, char *err, size_t n)
{
    char why[1024];
    const be_ops *ops = be_find(backend, why, sizeof why);
    if (!ops) { snprintf(err, n, "%s", why); return VF_E_UNAVAILABLE; }
    sim_choice ch = sim_choice_first(s);
    be_status st = be_calibrate(ops, s, &ch, cal, progress, ud, why, sizeof why);
    if (st != BE_OK) { snprintf(err, n, "calibrating %s: %s", backend, why); return vf_status_of_be(st); }
    return VF_OK;
}

vf_status vf_calibration_store(db *d, const char *name, const char *base, const char *backend, const char *source,
                               const be_calibration *cal, long *id, char *err, size_t n)
{
    *id = 0;
    if (!d) return VF_OK;
    char host[256], when[32], why[1024];
    vf_hostname(host, sizeof host);
    db_now_iso(when, sizeof when);
    char *fj = vf_fit_json(&cal->fit), *pj = points_json(cal);
    db_status st = DB_E_INTERNAL;
    snprintf(why, sizeof why, "out of memory");
    if (fj && pj) {
        db_calibration rec = {.name = name, .base = base, .backend = backend, .host = host, .created = when,
                              .source = source, .fit_json = fj, .points_json = pj,
                              .rms_log_error = cal->rms_log_error, .median_abs_error = cal->median_abs_error};
        st = db_calibration_insert(d, &rec, id, why, sizeof why);
    }
    free(fj);
    free(pj);
    if (st != DB_OK) { snprintf(err, n, "storing the calibration failed: %s", why); return vf_status_of_db(st); }
    return VF_OK;
}
