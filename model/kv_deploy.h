/* kv_deploy.h: how many GPUs a deployment occupies and what an hour of them costs, colocated
 * or split into prefill and decode pools. The one count every command uses (plan's candidate
 * table, capacity, report), so per-GPU figures and $/Mtok agree everywhere. */
#ifndef KVPLAN_MODEL_KV_DEPLOY_H
#define KVPLAN_MODEL_KV_DEPLOY_H

#include "../loader/scn.h"

/* Colocated: tensor_parallel x replicas x attention data-parallel ranks. Disaggregated: the
 * prefill pool's replicas x its TP plus the decode pool's. */
double kv_deploy_gpus(const scn_deployment *d);

/* The dollars per hour of a disaggregated deployment's GPUs, each pool priced at its own
 * hardware's $/GPU-hour (`usd_override` replaces the price of hardware named `override_name`:
 * the scenario's price.usd_per_gpu_hour is for its own hardware). 0 when a pool's price is
 * unknown, or when disaggregation is off. */
double kv_deploy_disagg_usd_per_hour(const scn_disagg *d, double usd_override, const char *override_name);

#endif
