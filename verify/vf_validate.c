/* vf_validate.c: validation: calibrate (unless this host already has a calibration for the
 * backend and base profile), predict with the calibrated model on the KV pool the backend
 * really allocated, measure the same workload, store both runs, and compare them. Matching the
 * pool matters: a prediction is comparable to a measurement only at equal KV capacity
 * (DESIGN.md). */
#include "vf.h"
#include "../backend/be_session.h"

#include <stdlib.h>
#include <string.h>

vf_status vf_validate(const vf_validate_req *rq, vf_validate_result *out, char *err, size_t n)
{
    memset(out, 0, sizeof *out);
    char host[256], base[SCN_NAME_MAX], prof[SCN_NAME_MAX + 16];
    vf_hostname(host, sizeof host);
    snprintf(base, sizeof base, "%s", rq->s->hardware.name);
    snprintf(prof, sizeof prof, "%.*s.calibrated", SCN_NAME_MAX - 1, base);
    /* The scenario with the calibrated hardware (the caller's stays as it is). */
    scn_scenario *s = malloc(sizeof *s);
    be_calibration *cal = calloc(1, sizeof *cal);
    if (!s || !cal) { free(s); free(cal); snprintf(err, n, "out of memory"); return VF_E_INTERNAL; }
    *s = *rq->s;
    vf_status st = VF_OK;
    /* 1. The calibration: this host's latest for this backend and profile, or a new one. */
    char *stored = rq->d && !rq->recalibrate ? db_calibration_latest(rq->d, rq->backend, host, base, &out->calibration_id)
                                             : NULL;
    if (!stored || vf_fit_parse(stored, &cal->fit) != 0) {
        out->calibration_id = 0;
        if ((st = vf_calibrate_backend(rq->backend, s, cal, rq->cal_progress, rq->cal_ud, err, n)) ||
            (st = vf_calibration_store(rq->d, prof, base, rq->backend, "microbenchmarks", cal, &out->calibration_id,
                                       err, n))) {
            free(stored);
            free(s);
            free(cal);
            return st;
        }
        out->calibrated_now = 1;
    }
    free(stored);
    be_fit_apply(&cal->fit, &s->hardware);
    free(cal);
    /* 2. The backend, with its real KV pool. */
    be_session bs;
    char why[1024];
    be_status bst = be_session_open(&bs, rq->backend, s, rq->c, why, sizeof why);
    if (bst != BE_OK) { snprintf(err, n, "backend %s: %s", rq->backend, why); free(s); return vf_status_of_be(bst); }
    out->blocks = bs.blocks;
    /* 3. Predict and measure the same workload on the same number of blocks. */
    sim_executor model = {0};
    char sp[32], fp[32], sm[32], fm[32];
    st = VF_E_INTERNAL;
    snprintf(err, n, "out of memory");
    if (sim_executor_model(s, rq->c, &model)) goto out;
    if ((st = vf_execute(s, rq->c, &model, rq->predicting, 0, bs.blocks, &out->predicted, sp, fp, err, n))) goto out;
    if ((st = vf_execute(s, rq->c, &bs.ex, rq->measuring, rq->interval, bs.blocks, &out->measured, sm, fm, err, n)))
        goto out;
    if ((st = vf_store(rq->d, s, rq->c, "predicted", "model", &out->predicted, rq->predicting, sp, fp,
                       &out->predicted_run, err, n)))
        goto out;
    if ((st = vf_store(rq->d, s, rq->c, "measured", rq->backend, &out->measured, rq->measuring, sm, fm,
                       &out->measured_run, err, n)))
        goto out;
    /* 4. The comparison. */
    out->n_rows = vf_compare(&out->predicted, &out->measured, NULL, out->rows, VF_COMPARED_MAX);
    out->key_error = vf_key_error(out->rows, out->n_rows);
    out->worst = vf_worst_row(out->rows, out->n_rows);
    out->measured_overloaded = vf_overloaded(&out->measured);
    out->predicted_overloaded = vf_overloaded(&out->predicted);
out:
    if (model.free) model.free(model.ctx);
    be_session_close(&bs);
    free(s);
    return st;
}
