/* cli_moe.h: the expert-parallel / attention-DP sections of `memory` and `cost` (cli_moe.c). */
#ifndef KVPLAN_CLI_MOE_H
#define KVPLAN_CLI_MOE_H

#include "out.h"
#include "../model/kv_model.h"

/* Weights per GPU (routed experts and the rest), KV bytes per token per DP rank, the pool. */
void cli_moe_memory(out_doc *d, const scn_scenario *s, const kv_cache_cfg *c, int block_size);
/* One DP rank's step at `batch` decoding sequences of `context`: attention, experts and the
 * all-to-all, and the all-to-all's share of the step. */
void cli_moe_cost(out_doc *d, const scn_scenario *s, const kv_cache_cfg *c, scn_attention attn, long batch,
                  long context, long prefill, long cached);

#endif
