/* plan_disagg.h: prefill/decode disaggregation as a planner question: for the GPU budget of the
 * recommended colocated deployment, sweep the xPyD split and each pool's tensor parallelism,
 * simulate each layout, compare the best against colocated serving with chunked prefill, say
 * what binds, and test the published rule of thumb (docs/planner.md, "Disaggregation"). */
#ifndef KVPLAN_PLAN_DISAGG_H
#define KVPLAN_PLAN_DISAGG_H

#include "plan.h"

#define PLAN_DISAGG_MAX 64     /* layouts simulated at most */

typedef struct {
    int x, tp_p, y, tp_d;      /* x prefill instances of tp_p GPUs, y decode instances of tp_d */
    bool ran;                  /* simulated (false: it could not run, see why) */
    char why[160];
    sim_metrics m;             /* at the offered load, the recommendation's choice, the scenario's seed */
    bool slo_met;
} plan_disagg_layout;

typedef struct {
    bool swept;                /* a sweep ran (a recommendation existed and the budget allows a split) */
    int gpus;                  /* the budget: the colocated recommendation's GPUs */
    int n;
    plan_disagg_layout l[PLAN_DISAGG_MAX];
    int best;                  /* index into l, -1 when no layout ran */
    plan_cand colo;            /* the colocated recommendation with chunked prefill */
    sim_metrics colo_m;        /* its run at the offered load */
    bool colo_slo;
    bool at_capacity;          /* compared at the highest rate within the SLO (else at the offered load) */
    plan_capacity_result colo_cap, best_cap;
    double gain;               /* best layout / colocated on the comparison's figure, minus 1 */
    bool pays;                 /* the simulations show the best layout beats colocated by more than
                                * the capacity search's tolerance */
} plan_disagg_result;

/* True when the scenario asks for the sweep (options.disaggregation lists on, or the
 * deployment is disaggregated). */
bool plan_disagg_wanted(const scn_scenario *s);
/* The scenario with the layout applied as deployment.disaggregation (pools on `hw`; the
 * scenario's transfer settings, else the loader's defaults for hw). */
void plan_disagg_apply(const scn_scenario *s, const scn_hardware *hw, int x, int tp_p, int y, int tp_d, scn_scenario *out);
/* Runs the sweep for plan r's recommendation (r ranked). 0, or -1 with a message (out of memory). */
int plan_disagg_sweep(const scn_scenario *s, const plan_result *r, plan_disagg_result *out, char *err, size_t n);
/* The sweep's conclusions as sentences (recommendation, what binds, the colocated reference). */
int plan_disagg_explain(const scn_scenario *s, const plan_disagg_result *d, char lines[][PLAN_LINE], int max);
/* The rule of thumb (DistServe, Splitwise) tested on this scenario's numbers. */
void plan_disagg_rule(const scn_scenario *s, const plan_disagg_result *d, plan_rule *out);
/* "2P(tp1)+1D(tp2)" */
void plan_disagg_layout_name(const plan_disagg_layout *l, char *buf, size_t n);

#endif
