/* cli_spec.h: the speculative-decoding sections of `memory` and `cost` (cli_spec.c). */
#ifndef KVPLAN_CLI_SPEC_H
#define KVPLAN_CLI_SPEC_H

#include "out.h"
#include "../model/kv_model.h"

/* The proposer's weights and KV per token, and the paged pool with and without it. */
/* "eagle k=4 a=0.80" for options.speculative[index], as plan names a candidate's; "" when off. */
void cli_spec_label(const scn_scenario *s, int index, char *buf, size_t n);
void cli_spec_memory(out_doc *d, const scn_scenario *s, const kv_cache_cfg *c, int block_size);
/* A verify step of `batch` sequences at `context`, the proposer's passes, per-token time
 * against plain decode, and the crossover batch. */
void cli_spec_cost(out_doc *d, const scn_scenario *s, const kv_cache_cfg *c, scn_attention attn, long batch,
                   long context);

#endif
