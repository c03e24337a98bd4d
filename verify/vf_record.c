/* vf_record.c: one engine run recorded: per-request rows and time-series samples to CSV files
 * and (for the database) memory, then stored in one transaction under the choice's options key.
 * simulate, run and validate all record through here. */
#include "vf.h"
#include "../loader/scn_locate.h"
#include "../model/kv_spec.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

vf_status vf_status_of_db(db_status st)
{
    switch (st) {
    case DB_OK: return VF_OK;
    case DB_E_CANTOPEN: return VF_E_CANTCREAT;
    case DB_E_DATA: case DB_E_NOTFOUND: return VF_E_DATA;
    case DB_E_NOINPUT: return VF_E_NOINPUT;
    case DB_E_IO: return VF_E_IOERR;
    case DB_E_BUSY: return VF_E_TEMPFAIL;
    default: return VF_E_INTERNAL;
    }
}

vf_status vf_status_of_be(be_status st)
{
    switch (st) {
    case BE_OK: return VF_OK;
    case BE_E_UNAVAILABLE: return VF_E_UNAVAILABLE;
    case BE_E_CONFIG: return VF_E_DATA;
    default: return VF_E_INTERNAL;
    }
}

vf_status vf_status_of_sim(int sim_rc)
{
    switch (sim_rc) {
    case SIM_OK: return VF_OK;
    case SIM_E_NOINPUT: return VF_E_NOINPUT;
    case SIM_E_DATA: return VF_E_DATA;
    default: return VF_E_INTERNAL;
    }
}

static int on_request(void *ud, const sim_request_row *r)
{
    vf_sink *k = ud;
    if (k->req_csv &&
        fprintf(k->req_csv, "%ld,%d,%.9g,%d,%d,%d,%.9g,%.9g,%.9g,%.9g,%d,%ld,%d\n", r->id, r->replica, r->arrival,
                r->prompt, r->output, r->cached, r->queue, r->ttft, r->tpot, r->e2e, r->preemptions, r->conversation,
                r->turn) < 0)
        return -1;
    /* Rows are kept only when they are asked for as CSV too: a long run's rows are large. */
    if (k->keep && k->req_csv) {
        if (k->n_rows == k->cap_rows) {
            long cap = k->cap_rows ? k->cap_rows * 2 : 1024;
            sim_request_row *nr = realloc(k->rows, sizeof *nr * (size_t)cap);
            if (!nr) return -1;
            k->rows = nr;
            k->cap_rows = cap;
        }
        k->rows[k->n_rows++] = *r;
    }
    return 0;
}

static int on_sample(void *ud, const sim_sample *s)
{
    vf_sink *k = ud;
    if (k->ts_csv && fprintf(k->ts_csv, "%.9g,%.6f,%ld,%ld\n", s->t, s->kv_used, s->waiting, s->running) < 0) return -1;
    if (k->keep) {
        /* Kept samples go to the database in one transaction: bound them (32 bytes each, 160 MB). */
        if (k->n_samples == VF_MAX_SAMPLES) {
            fprintf(stderr, "\nkvplan: more than %ld time-series samples to store; use a larger --sample-interval\n",
                    (long)VF_MAX_SAMPLES);
            return -1;
        }
        if (k->n_samples == k->cap_samples) {
            long cap = k->cap_samples ? k->cap_samples * 2 : 256;
            sim_sample *ns = realloc(k->samples, sizeof *ns * (size_t)cap);
            if (!ns) return -1;
            k->samples = ns;
            k->cap_samples = cap;
        }
        k->samples[k->n_samples++] = *s;
    }
    return 0;
}

static void on_progress(void *ud, long done, long total)
{
    vf_sink *k = ud;
    if (k->progress) k->progress(k->progress_ud, done, total);
}

static FILE *open_out(const char *path, const char *header, char *err, size_t n)
{
    FILE *f = fopen(path, "w");
    if (!f) { snprintf(err, n, "cannot create %s: %s", path, strerror(errno)); return NULL; }
    fputs(header, f);
    return f;
}

vf_status vf_sink_open(vf_sink *k, const char *req_path, const char *ts_path, bool keep, char *err, size_t n)
{
    memset(k, 0, sizeof *k);
    k->keep = keep;
    k->req_path = req_path;
    k->ts_path = ts_path;
    if (req_path && !(k->req_csv = open_out(req_path, "req_id,replica,arrival_s,prompt_tokens,output_tokens,"
                                                      "cached_tokens,queue_s,ttft_s,tpot_s,e2e_s,preemptions,"
                                                      "conversation,turn\n", err, n)))
        return VF_E_CANTCREAT;
    if (ts_path && !(k->ts_csv = open_out(ts_path, "t_s,kv_used,waiting,running\n", err, n))) return VF_E_CANTCREAT;
    return VF_OK;
}

void vf_sink_close(vf_sink *k)
{
    if (k->req_csv) fclose(k->req_csv);
    if (k->ts_csv) fclose(k->ts_csv);
    free(k->rows);
    free(k->samples);
    memset(k, 0, sizeof *k);
}

/* A run that failed leaves no CSV behind: a header with some of the rows would read as a
 * finished run of fewer requests (nothing partial is written, as for the database). */
static void discard_outputs(vf_sink *k)
{
    if (k->req_csv) { fclose(k->req_csv); k->req_csv = NULL; remove(k->req_path); }
    if (k->ts_csv) { fclose(k->ts_csv); k->ts_csv = NULL; remove(k->ts_path); }
}

vf_status vf_execute(const scn_scenario *s, const sim_choice *c, sim_executor *ex, vf_sink *k, double interval,
                     long blocks, sim_metrics *m, char *started, char *finished, char *err, size_t n)
{
    sim_run_opts o = {.seed = s->seed, .sample_interval = k->ts_csv ? interval : 0, .on_request = on_request,
                      .on_sample = on_sample, .on_progress = on_progress, .ud = k, .kv_blocks_override = blocks,
                      .per_step = k->per_step};
    char why[1024];
    db_now_iso(started, 32);
    int sr = sim_run(s, c, ex, &o, m, why, sizeof why);
    db_now_iso(finished, 32);
    if (sr != SIM_OK) {
        if (k->raw_errors) snprintf(err, n, "%s", why);
        else scn_locate_message(s->source, why, err, n);   /* file:line:col when the message names its field */
        discard_outputs(k);
        return vf_status_of_sim(sr);
    }
    if ((k->req_csv && fflush(k->req_csv)) || (k->ts_csv && fflush(k->ts_csv))) {
        snprintf(err, n, "writing the CSV output failed: %s", strerror(errno));
        discard_outputs(k);
        return VF_E_CANTCREAT;
    }
    return VF_OK;
}

vf_status vf_store(db *d, const scn_scenario *s, const sim_choice *c, const char *kind, const char *executor,
                   const sim_metrics *m, const vf_sink *k, const char *started, const char *finished, long *run_id,
                   char *err, size_t n)
{
    *run_id = 0;
    if (!d) return VF_OK;
    sim_metric_kv mv[SIM_METRICS_MAX];
    char *opts = db_options_json(c, &s->deployment, 0, kv_spec_get(s, c->spec)), why[1024];
    if (!opts) { snprintf(err, n, "storing the run failed: out of memory"); return VF_E_INTERNAL; }
    db_run_rec rec = {.scenario = s, .kind = kind, .executor = executor, .options_json = opts, .seed = s->seed,
                      .started = started, .finished = finished, .metrics = mv,
                      .n_metrics = sim_metrics_list(m, mv, SIM_METRICS_MAX), .rows = k ? k->rows : NULL,
                      .n_rows = k ? k->n_rows : 0, .samples = k ? k->samples : NULL, .n_samples = k ? k->n_samples : 0};
    db_status st = db_run_insert(d, &rec, run_id, why, sizeof why);
    free(opts);
    if (st != DB_OK) { snprintf(err, n, "storing the run failed: %s", why); return vf_status_of_db(st); }
    return VF_OK;
}
