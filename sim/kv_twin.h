/* kv_twin.h: the block-size twin report (docs/planner.md, "Block-size twins").
 *
 * A run at block size B watches the few places where the block size can change what the engine
 * does (an allocation or admission that waits for blocks, a prefix-cache hit of whole blocks, a
 * cached block evicted before it is hit again) and proves, for each alternative block size b
 * asked about, that a run at b would make every scheduling decision the same, so that every
 * step, token time and per-request figure is the same. It only ever answers "same" with a
 * proof and declines whenever the proof does not go through (a run that waited for blocks, a
 * window, offload, swap, speculation, ...). The figures counted in blocks (KV use, the
 * fragmentation of partly filled blocks) still differ and are not covered. Internal to sim/. */
#ifndef KVPLAN_SIM_KV_TWIN_H
#define KVPLAN_SIM_KV_TWIN_H

#include "kv_manager.h"
#include "sim.h"

typedef struct sim_kv_twin sim_kv_twin;

/* Gives replica pool `kv` a tracker for the twins asked
 * about in o->twins, when the run is one the proof covers; nothing otherwise (its result is
 * then 0). -1 on out of memory. After sim_kv_set_groups and the tiers. */
int sim_twin_attach(sim_kv *kv, const scn_scenario *s, const sim_choice *c, const sim_executor *ex,
                    const sim_run_opts *o);

/* The tracker's hooks (kv_manager.c and sched.c call them; t may be NULL). */
sim_kv_twin *sim_kv_twin_new(int bs, int n, const int *twin_bs, const long *twin_blocks, long max_seqs, long max_len);
void sim_kv_twin_free(sim_kv_twin *t);
/* The run at B waited for blocks (an admission that did not fit, a growth that failed). */
void sim_kv_twin_blocked(sim_kv_twin *t);
/* A prefix match of q's `prompt` tokens found `hit` tokens (take: the sequence took them).
 * alloc: blocks allocated so far. */
void sim_kv_twin_match(sim_kv_twin *t, sim_kv_seq *q, int prompt, int hit, bool take, long alloc);
/* q's positions [0, computed) hold KV (prefix cache on). */
void sim_kv_twin_commit(sim_kv_twin *t, sim_kv_seq *q, int computed, long alloc, long ref);
/* q released its KV (after the release: ref is the blocks still referenced). */
void sim_kv_twin_release(sim_kv_twin *t, sim_kv_seq *q, long alloc, long ref);
/* Bit i: the run at twin i's block size makes the same decisions as this one (so far), given
 * ref_peak, the most blocks this pool had referenced at once. */
unsigned sim_kv_twin_same(const sim_kv_twin *t, long ref_peak);

#endif
