/* be_calibrate.c: micro-benchmarks and the least-squares fit (see be_calibrate.h). */
#include "be_calibrate.h"
#include "be_session.h"
#include "../model/kv_model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define REPEAT 5

void be_fit_apply(const be_fit *f, scn_hardware *hw)
{
    hw->memory_bandwidth = f->memory_bandwidth;
    hw->flops[f->gemm_dtype] = f->gemm_flops;
    hw->eff_bandwidth = f->eff_bandwidth;
    hw->eff_compute = f->eff_compute;
    hw->eff_attention = f->eff_attention;
    hw->kernel_overhead = f->kernel_overhead;
    hw->step_overhead = f->step_overhead;
    hw->calibrated = true;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* ---- the fit ---- */
typedef struct {
    const scn_scenario *s;
    const sim_choice *c;
    be_calibration *cal;
    scn_scenario work;      /* the scenario with candidate coefficients */
    kv_seq_work *w;
} fit_ctx;

static double predict(fit_ctx *f, const be_cal_point *p)
{
    for (int i = 0; i < p->seqs; i++) f->w[i] = (kv_seq_work){p->new_tokens, p->context};
    kv_cache_cfg cfg = kv_cache_cfg_make(&f->work, f->c->kv_dtype, f->c->sink, f->c->window);
    return kv_step_time(&f->work, &cfg, f->c->attention, f->w, p->seqs).seconds;
}

/* The parameters in a space where the search is unbounded-friendly: log of each. */
enum { P_BW, P_C, P_A, P_K, P_S, NP };
static const double LO[NP] = {0.02, 0.01, 0.001, 1e-9, 1e-7}, HI[NP] = {1.0, 1.0, 1.0, 1e-2, 5e-2};

static void set_params(fit_ctx *f, const double *x)
{
    be_fit *b = &f->cal->fit;
    b->eff_bandwidth = x[P_BW];
    b->eff_compute = x[P_C];
    b->eff_attention = x[P_A];
    b->kernel_overhead = x[P_K];
    b->step_overhead = x[P_S];
    f->work = *f->s;
    be_fit_apply(b, &f->work.hardware);
}

static double loss(fit_ctx *f, const double *x)
{
    set_params(f, x);
    double sum = 0;
    for (int i = 0; i < f->cal->n; i++) {
        double e = log(predict(f, &f->cal->pts[i])) - log(f->cal->pts[i].measured);
        sum += e * e;
    }
    return sum;
}

/* Golden-section search of one coordinate, the others fixed (be_calibrate.h). */
void be_golden_coord(be_loss_fn cost, void *ud, double *x, int np, int k, double lo, double hi, int iters)
{
    if (np > BE_FIT_MAX_PARAMS || k < 0 || k >= np) return;
    const double g = 0.6180339887498949;
    double a = log(lo), b = log(hi);
    double c = b - g * (b - a), d = a + g * (b - a);
    double xc[BE_FIT_MAX_PARAMS], xd[BE_FIT_MAX_PARAMS];
    memcpy(xc, x, sizeof *x * (size_t)np);
    memcpy(xd, x, sizeof *x * (size_t)np);
    xc[k] = exp(c);
    xd[k] = exp(d);
    double fc = cost(ud, xc), fd = cost(ud, xd);
    for (int it = 0; it < iters; it++) {
        if (fc < fd) { b = d; d = c; fd = fc; c = b - g * (b - a); xc[k] = exp(c); fc = cost(ud, xc); }
        else { a = c; c = d; fc = fd; d = a + g * (b - a); xd[k] = exp(d); fd = cost(ud, xd); }
    }
    double cand = exp((a + b) / 2), old = x[k];
    x[k] = cand;
    double fnew = cost(ud, x);
    x[k] = old;
    if (fnew <= cost(ud, x)) x[k] = cand;
}

void be_cal_summarise(be_calibration *cal)
{
    double sum = 0, abs_err[BE_CAL_POINTS];
    for (int i = 0; i < cal->n; i++) {
        const be_cal_point *p = &cal->pts[i];
        double e = log(p->predicted) - log(p->measured);
        sum += e * e;
        abs_err[i] = fabs(p->predicted / p->measured - 1);
    }
    cal->rms_log_error = cal->n ? sqrt(sum / cal->n) : NAN;
    cal->median_abs_error = cal->n ? median(abs_err, cal->n) : NAN;
}

static double fit_loss(void *ud, const double *x) { return loss(ud, x); }

void be_fit_points(const scn_scenario *s, const sim_choice *c, be_calibration *cal)
{
    fit_ctx f = {.s = s, .c = c, .cal = cal};
    int maxseq = 1;
    for (int i = 0; i < cal->n; i++) if (cal->pts[i].seqs > maxseq) maxseq = cal->pts[i].seqs;
    f.w = malloc(sizeof *f.w * (size_t)maxseq);
    if (!f.w) return;
    /* Start from the profile's defaults, then sweep the coordinates until the loss settles. */
    double x[NP] = {s->hardware.eff_bandwidth, s->hardware.eff_compute, s->hardware.eff_attention,
                    s->hardware.kernel_overhead > LO[P_K] ? s->hardware.kernel_overhead : 1e-6,
                    s->hardware.step_overhead > LO[P_S] ? s->hardware.step_overhead : 1e-4};
    for (int k = 0; k < NP; k++) x[k] = fmin(fmax(x[k], LO[k]), HI[k]);
    double prev = loss(&f, x);
    for (int sweep = 0; sweep < 12; sweep++) {
        for (int k = 0; k < NP; k++) be_golden_coord(fit_loss, &f, x, NP, k, LO[k], HI[k], 60);
        double now = loss(&f, x);
        if (prev - now < 1e-9 * (1 + prev)) break;
        prev = now;
    }
    set_params(&f, x);
    for (int i = 0; i < cal->n; i++) cal->pts[i].predicted = predict(&f, &cal->pts[i]);
    be_cal_summarise(cal);
    free(f.w);
}

/* ---- measurements ---- */
/* Times one step of `seqs` sequences, each computing new_tokens on `context` cached tokens; each
 * sequence gets its own run of blocks from the start of the pool. Median of REPEAT runs after
 * one warm-up. */
static be_status time_step(be_session *bs, int seqs, int new_tokens, int context, double *out, char *err, size_t n)
{
    long bsz = bs->block_size, per = (context + new_tokens + bsz - 1) / bsz;
    if ((long)seqs * per > bs->blocks) {
        snprintf(err, n, "calibration step of %d x %d tokens needs %ld blocks; the pool has %ld", seqs,
                 context + new_tokens, (long)seqs * per, bs->blocks);
        return BE_E_CONFIG;
    }
    sim_batch_seq *q = calloc((size_t)seqs, sizeof *q);
    int32_t *tables = malloc(sizeof(int32_t) * (size_t)(seqs * per));
    be_status st = BE_E_NOMEM;
    if (!q || !tables) goto out;
    for (int i = 0; i < seqs; i++) {
        int32_t *t = tables + (size_t)i * per;
        for (long j = 0; j < per; j++) t[j] = (int32_t)(i * per + j);
        q[i] = (sim_batch_seq){.req_id = i, .new_tokens = new_tokens, .start = context, .context = context,
                               .blocks = t, .n_blocks = (int)per, .prefix_seed = 1, .body_seed = 100 + (uint64_t)i};
    }
    sim_batch b = {seqs, q, (long)seqs * new_tokens, 0};
    double times[REPEAT];
    for (int r = 0; r <= REPEAT; r++) {
        be_step_out o = {0};
        if ((st = bs->ops->run(bs->ctx, &b, &o, err, n)) != BE_OK) goto out;
        if (r > 0) times[r - 1] = o.seconds;
    }
    *out = median(times, REPEAT);
    st = BE_OK;
out:
    free(q);
    free(tables);
    return st;
}

be_status be_calibrate(const be_ops *ops, const scn_scenario *s, const sim_choice *c, be_calibration *cal,
                       void (*progress)(void *ud, long done, long total), void *ud, char *err, size_t n)
{
    memset(cal, 0, sizeof *cal);
    be_session bs;
    be_status st = be_session_open(&bs, ops->name, s, c, err, n);
    if (st != BE_OK) return st;
    const scn_model *m = &s->model;
    int decode_b[] = {1, 4, 16, 32}, decode_ctx[] = {128, 512, 1536}, prefill_n[] = {64, 256, 1024};
    long total = 2 + 4 * 3 + 3 + 1, done = 0;
    /* Copy bandwidth: bytes read plus bytes written over the median time. */
    double copies[REPEAT];
    size_t bytes = (size_t)256 << 20;
    if (ops->bench_copy) {
        for (int r = 0; r <= REPEAT; r++) {
            double t;
            if ((st = ops->bench_copy(bs.ctx, bytes, &t)) != BE_OK) { snprintf(err, n, "copy benchmark failed"); goto out; }
            if (r) copies[r - 1] = t;
        }
        cal->fit.memory_bandwidth = 2.0 * bytes / median(copies, REPEAT);
    } else {
        cal->fit.memory_bandwidth = s->hardware.memory_bandwidth;
    }
    if (progress) progress(ud, ++done, total);
    /* GEMM ceiling at the model's widest layer shape (the fused gate|up projection). */
    cal->fit.gemm_dtype = m->weight_dtype;
    cal->fit.gemm_flops = s->hardware.flops[m->weight_dtype];
    if (ops->bench_gemm) {
        int ms[8] = {1, 4, 16, 64, 256, 1024, 2048, 4096};
        double best = 0;
        for (int i = 0; i < 8; i++) {
            double t[3];
            for (int r = 0; r < 3; r++)
                if ((st = ops->bench_gemm(bs.ctx, ms[i], 2 * m->intermediate, m->hidden, &t[r])) != BE_OK) {
                    snprintf(err, n, "GEMM benchmark failed");
                    goto out;
                }
            cal->gemm_by_m[i] = 2.0 * ms[i] * 2 * m->intermediate * m->hidden / median(t, 3);
            if (cal->gemm_by_m[i] > best) best = cal->gemm_by_m[i];
        }
        cal->fit.gemm_flops = best;
    }
    if (progress) progress(ud, ++done, total);
    /* Real steps: decode batches over contexts, prefill chunks cold and on a cached prefix. */
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 3; j++) {
            be_cal_point *p = &cal->pts[cal->n];
            *p = (be_cal_point){decode_b[i], 1, decode_ctx[j], 0, 0, ""};
            if (decode_ctx[j] + 1 > s->deployment.max_model_len) continue;
            if ((st = time_step(&bs, p->seqs, 1, p->context, &p->measured, err, n)) != BE_OK) goto out;
            cal->n++;
            if (progress) progress(ud, ++done, total);
        }
    for (int i = 0; i < 3; i++) {
        be_cal_point *p = &cal->pts[cal->n];
        *p = (be_cal_point){1, prefill_n[i], 0, 0, 0, ""};
        if ((st = time_step(&bs, 1, p->new_tokens, 0, &p->measured, err, n)) != BE_OK) goto out;
        cal->n++;
        if (progress) progress(ud, ++done, total);
    }
    be_cal_point *p = &cal->pts[cal->n];
    *p = (be_cal_point){1, 256, 512, 0, 0, ""};
    if ((st = time_step(&bs, 1, 256, 512, &p->measured, err, n)) != BE_OK) goto out;
    cal->n++;
    if (progress) progress(ud, ++done, total);
    be_fit_points(s, c, cal);
out:
    be_session_close(&bs);
    return st;
}
