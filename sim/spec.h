/* spec.h: speculative decoding inside the engine (sim/spec.c). The scheduler asks how many
 * drafts a decoding sequence verifies this step, and after the step how many of them the
 * target accepted; the executor prices the step (model/kv_spec.h). Internal to sim/. */
#ifndef KVPLAN_SIM_SPEC_H
#define KVPLAN_SIM_SPEC_H

#include "request.h"
#include "sim.h"

/* The choice's speculative setting, or NULL when speculation is off. */
const scn_spec *sim_spec_of(const scn_scenario *s, const sim_choice *c);
/* Drafts a decoding request verifies this step: k, but never more than its remaining output
 * less the token the verify step always emits, and within `budget` new tokens. */
int sim_spec_drafts(const scn_spec *sp, const sim_req *r, long budget);
/* Drafts accepted out of `drafts`: position i is accepted with probability accept[i] given the
 * earlier ones were; the first rejection ends the run. The draw is a pure function of (seed,
 * request, tokens generated so far), so runs are bit-identical whatever the step order. */
int sim_spec_accepted(const scn_spec *sp, unsigned long long seed, const sim_req *r, int drafts);

#endif
