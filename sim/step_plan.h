/* step_plan.h: the cost model's decode-step time in O(1) per step, for the predicting executor.
 *
 * In a step where every sequence computes one new token and no window caps what a layer holds,
 * kv_step_time's per-operation counts depend on the batch only through n (sequences) and the
 * sum of their positions: attention's flops and bytes are affine in the keys read, and every
 * other operation depends on n alone. The plan takes those constants from kv_step_time itself
 * (attention's per-sequence and per-key counts from two one-sequence probes, the other
 * operations' time per n, memoised) and checks itself against kv_step_time on a mixed batch
 * when built; it declines (and the caller uses kv_step_time) whenever its premise does not hold.
 * docs/simulator.md, "Speed", describes it. Internal to sim/. */
#ifndef KVPLAN_SIM_STEP_PLAN_H
#define KVPLAN_SIM_STEP_PLAN_H

#include "../model/kv_model.h"

#include <stdbool.h>

typedef struct {
    const scn_scenario *s;
    kv_cache_cfg c;
    scn_attention attn;
    bool ok;                 /* the premise holds and the self-check passed */
    double f0, fk;           /* attention flops: per sequence, per key read (all layers) */
    double b0, bk;           /* attention bytes: per sequence, per key read */
    double peak, bw, ov;     /* attention's achievable flops/s and bytes/s, and its fixed seconds */
    double *rest;            /* s: every other operation's time for n sequences; NAN until computed */
    int max_n;
    kv_seq_work *work;       /* max_n entries, for computing rest */
} sim_step_plan;

/* Builds the plan for batches of up to max_n sequences; -1 on out of memory (ok false when it
 * merely does not apply). */
int sim_step_plan_init(sim_step_plan *p, const scn_scenario *s, const kv_cache_cfg *c, scn_attention attn, int max_n);
void sim_step_plan_free(sim_step_plan *p);
/* Seconds of a step in which n sequences each compute one new token at positions whose sum is
 * sum_start; false when the plan does not apply (the caller uses kv_step_time). */
bool sim_step_plan_decode(sim_step_plan *p, long n, long sum_start, double *seconds);

#endif
