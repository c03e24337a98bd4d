/* disagg.h: prefill/decode disaggregation: a coordinator that drives a prefill pool and a
 * decode pool of replicas, each run by the ordinary scheduler and KV block manager, with the
 * KV hand-off between them (docs/simulator.md, "Disaggregation"). Internal to sim/: sim_run
 * calls it when the scenario's deployment.disaggregation is on. */
#ifndef KVPLAN_SIM_DISAGG_H
#define KVPLAN_SIM_DISAGG_H

#include "sim.h"

/* Runs the workload through the two pools under one choice, each pool priced by the cost
 * model at its own hardware and tensor parallelism. `ex` is the caller's executor: a measuring
 * one is refused (a backend runs one pool). Return values as sim_run's. */
int sim_disagg_run(const scn_scenario *s, const sim_choice *c, const sim_executor *ex, const sim_run_opts *o,
                   sim_metrics *m, char *err, size_t n);

/* The scenario one pool sees: the scenario with the pool's hardware, tensor parallelism and
 * replicas, and disaggregation off. which: 0 prefill, 1 decode. */
void sim_disagg_pool_scenario(const scn_scenario *s, int which, scn_scenario *out);

#endif
