/* metrics.h: what a run accumulates while it goes (histograms, time integrals, counters) and
 * how that becomes sim_metrics. Internal to sim/. */
#ifndef KVPLAN_SIM_METRICS_H
#define KVPLAN_SIM_METRICS_H

#include "hist.h"
#include "sim.h"

typedef struct {
    sim_hist h[SIM_Q_COUNT];
    long requests, in_tokens, out_tokens, good;
    long prompt_tokens, hit_tokens;      /* prefix hit rate */
    double t_first_arrival, t_last_finish;
    double used_integral, used_peak;     /* block-seconds referenced, over all replicas */
    double frag_unused, frag_reserved;   /* token-seconds */
    long preemptions, steps, batch_sum, batch_max;
    long rejected;                       /* arrivals refused inside the measurement window */
    long too_long;                       /* of rejected: prompts longer than the context allows */
    long rejected_run;                   /* every refusal of the run, in the window or not */
    /* KV offload tiers and swap (sim/kv_tier.h), index kv_tier_id */
    long tier_hit_tokens[3];
    double tier_xfer_s[3];
    long swaps;
    double swap_blocks, swap_xfer_s;
    /* A window cut by time (workload.measure.by: time): every completion is kept until the run
     * ends, when its span is known and the window can be cut (sim_acc_finish). */
    bool by_time;
    double cut_first, cut_last;          /* shares of the span cut from its start and its end */
    sim_request_row *rows;
    long n_rows, cap_rows;
    bool rows_oom;                       /* a completion could not be kept */
    struct sim_rejection { double t; bool too_long; } *rej;   /* refusals, kept as rows are */
    long n_rej, cap_rej;
    const scn_slo *slo;                  /* the SLO the kept completions are judged by */
} sim_acc;

/* Starts an empty accumulator for the scenario's workload (its measurement window). */
int sim_acc_init(sim_acc *a, const scn_workload *wl);
void sim_acc_free(sim_acc *a);
/* True when a finished request meets every SLO term's limit. */
bool sim_slo_met(const scn_slo *slo, const sim_request_row *r);
void sim_acc_request(sim_acc *a, const scn_slo *slo, const sim_request_row *r);
/* Counts an arrival refused at time t (a full waiting queue, or too_long), in the same window as
 * the served requests: by request index, when the request is measured; cut by time, when t falls
 * inside the window (kept until the run ends, as completions are). */
void sim_acc_reject(sim_acc *a, bool measured, bool too_long, double t);
/* Fills a finished request's row as the client sees it (zeroed first, padding too: sinks may
 * compare or hash whole rows); `output` is the tokens the client asked for. Returns the front-end
 * delay (kv_frontend_seconds) the row's TTFT and E2E include. */
struct sim_req;
double sim_req_row(const scn_scenario *s, const struct sim_req *r, int replica, int output, sim_request_row *row);
/* The summary metrics; -1 when a window cut by time could not keep every completion (out of
 * memory), 0 otherwise. */
int sim_acc_finish(const sim_acc *a, long total_blocks, sim_metrics *m);

#endif
