/* kv_mla.h: what an engine's way of running MLA (DeepSeek-V2/V3/R1) adds to a GPU's weights.
 * docs/cost-model.md, "MLA as engines cache it". */
#ifndef KV_MLA_H
#define KV_MLA_H

#include "../loader/scn.h"

/* Parameters per layer on one GPU of the two products an engine with `mla: {absorbed:
 * materialized}` keeps for decode: W_Q·W_UK (q_in x H/tp·r) and W_UV·W_O (H/tp·r x h), where q_in
 * is q_lora_rank (or the hidden size without a query LoRA) and r kv_lora_rank. 0 for a model
 * without MLA. */
double kv_mla_absorbed_params(const scn_model *m, int tp);

/* The bytes those products add to each GPU's weights under the scenario's engine: 0 unless the
 * engine materialises them; stored as the checkpoint stores its projections when those are fp8
 * (requantised with the same scale layout) or 16-bit, and in 16-bit otherwise. */
double kv_mla_absorbed_bytes(const scn_scenario *s, const scn_model *m);

/* Kernels an MLA decode (absorbed, over the latent cache) launches per layer for its attention
 * proper, besides the cache write and the W_UK and W_UV batched matmuls: FlashMLA's
 * mha_fwd_kvcache_mla runs its split-KV kernel and then, unconditionally, its combine kernel
 * (deepseek-ai/FlashMLA csrc/flash_api.cpp: run_flash_splitkv_mla_kernel, then
 * run_flash_mla_combine_kernel): 2 where the engine decodes MLA with FlashMLA-class kernels
 * (Hopper, an engine of the FA3 family: kv_mla_decode_tile_rows' gate), else 1 (no figure). */
double kv_mla_decode_kernels(const scn_hardware *hw, const scn_engine *e);

#endif
