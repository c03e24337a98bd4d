/* vf_setting.c: the benchmark setting an imported run carries (setting_* metrics: closed loop,
 * rate or offline, request count, mean lengths; db/import_formats.h) applied to a scenario's
 * workload, so the run can be re-simulated as it was measured: by `import --scenario` when it
 * stores the run, and by `calibrate --from` for each run it fits. */
#include "vf.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static double find(const char *const *names, const double *values, int n, const char *name)
{
    for (int i = 0; i < n; i++) if (!strcmp(names[i], name)) return values[i];
    return NAN;
}

int vf_setting_apply(const char *const *names, const double *values, int n_values, scn_scenario *s, char *desc,
                     size_t n)
{
    scn_workload *w = &s->workload;
    double conc = find(names, values, n_values, "setting_concurrency");
    double rate = find(names, values, n_values, "setting_request_rate_per_s");
    double offline = find(names, values, n_values, "setting_offline");
    double prompts = find(names, values, n_values, "setting_prompts");
    double in = find(names, values, n_values, "setting_input_tokens_mean");
    double out = find(names, values, n_values, "setting_output_tokens_mean");
    double burst = find(names, values, n_values, "setting_burstiness");
    double done = find(names, values, n_values, "requests");
    size_t k = 0;
    int applied = 0;
    if (desc && n) desc[0] = 0;
#define SAY(...) do { if (desc && k < n) k += (size_t)snprintf(desc + k, n - k, __VA_ARGS__); } while (0)
    /* A closed loop wins over a rate when a client gave both (a rate capped by a concurrency
     * limit): with the cap reached the clients, not the rate, pace the requests. */
    if (conc >= 1) {
        w->arrival = SCN_ARRIVAL_CLOSED;
        w->concurrency = (int)lround(conc);
        w->client_think_time = 0;
        SAY("closed loop, %d clients", w->concurrency);
        applied = 1;
    } else if (offline == 1) {
        w->arrival = SCN_ARRIVAL_OFFLINE;
        SAY("offline");
        applied = 1;
    } else if (rate > 0) {
        /* vLLM's burstiness is the gamma shape of the gaps: cv = 1 / sqrt(shape). */
        bool gamma = burst > 0 && burst != 1;
        w->arrival = gamma ? SCN_ARRIVAL_GAMMA : SCN_ARRIVAL_POISSON;
        w->rate = rate;
        w->cv = gamma ? 1 / sqrt(burst) : 1;
        SAY("%s at %.6g req/s", gamma ? "gamma" : "poisson", rate);
        applied = 1;
    }
    if (!applied) return 0;
    double reqs = prompts >= 1 ? prompts : done;
    if (reqs >= 1) {
        w->requests = lround(reqs);
        SAY("%s%ld requests", k ? "; " : "", w->requests);
    }
    if (in >= 1) w->prompt = (scn_dist){.kind = SCN_DIST_FIXED, .mean = lround(in), .min = 1};
    if (out >= 1) w->output = (scn_dist){.kind = SCN_DIST_FIXED, .mean = lround(out), .min = 1};
    if (in >= 1 || out >= 1) {
        char a[32] = "?", b[32] = "?";
        if (in >= 1) snprintf(a, sizeof a, "%.0f", w->prompt.mean);
        if (out >= 1) snprintf(b, sizeof b, "%.0f", w->output.mean);
        SAY("%sprompt %s and output %s tokens (means)", k ? "; " : "", a, b);
    }
#undef SAY
    /* The benchmark measured its whole run: no window. */
    w->skip_first = w->skip_last = 0;
    w->skip_first_frac = w->skip_last_frac = 0;
    w->measure_by_time = false;
    return 1;
}

typedef struct {
    const char *names[64];
    char store[64][48];
    double values[64];
    int n;
} metric_list;

static int keep(void *ud, const char *name, double value, int is_null)
{
    metric_list *l = ud;
    if (is_null || l->n == 64 || strncmp(name, "setting_", 8)) return 0;
    snprintf(l->store[l->n], sizeof l->store[0], "%s", name);
    l->names[l->n] = l->store[l->n];
    l->values[l->n++] = value;
    return 0;
}

vf_status vf_run_setting(db *d, long run, scn_scenario *s, int *applied, char *err, size_t n)
{
    metric_list *l = calloc(1, sizeof *l);
    if (!l) { snprintf(err, n, "out of memory"); return VF_E_INTERNAL; }
    db_status st = db_run_metrics(d, run, keep, l, err, n);
    if (st == DB_OK) *applied = vf_setting_apply(l->names, l->values, l->n, s, NULL, 0);
    free(l);
    return st == DB_OK ? VF_OK : vf_status_of_db(st);
}
