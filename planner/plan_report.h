/* plan_report.h: the data behind `kvplan report`: every stored run of a scenario (variants
 * made with --set included), the Pareto front over predicted runs, load curves from `sweep`,
 * the SLO lines, KV use over time and the memory breakdown. Pairing predicted with measured
 * runs is verify's (vf_pair_runs) over the "runs" dataset. */
#ifndef KVPLAN_PLAN_REPORT_H
#define KVPLAN_PLAN_REPORT_H

#include "plan.h"
#include "../db/db.h"

#include <jansson.h>

/* A JSON object {pareto, curves, memory, timeseries, runs} (caller decrefs): runs holds every
 * stored run but load-curve points, as {run, kind, options, seed, metrics...}; NULL
 * with a message in err on a database failure (*st set). */
json_t *plan_report_data(db *d, const scn_scenario *s, db_status *st, char *err, size_t n);

/* Marks "pareto": true on the runs (objects with out_tok_per_gpu and latency_p99_s) that no
 * other run beats on both output tokens/s per GPU (higher) and p99 latency (lower). */
void plan_report_pareto(json_t *runs);

/* Adds "label" to every load-curve row (kind "curve"): the options in which the plotted
 * candidates differ, as "key=value, ..." (true/false as on/off), for the chart's legend; a lone
 * candidate is labelled with all its options. */
void plan_report_label_curves(json_t *curves);

#endif
