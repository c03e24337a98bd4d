/* kv_moe_grouped.h: the routed experts' grouped GEMMs as one kernel runs them: every expert's
 * rows padded to the CTA tile on their own, the rows each expert receives spread binomially
 * around their mean, and all experts' tiles sharing the waves over the SMs. Derivation:
 * docs/cost-model.md, "Grouped GEMM tiles". */
#ifndef KVPLAN_KV_MOE_GROUPED_H
#define KVPLAN_KV_MOE_GROUPED_H

#include "kv_model.h"

/* E[ceil(X / tile)] for X ~ Binomial(n, q): the expected number of `tile`-row tiles an expert's
 * rows fill when each of n tokens picks it with probability q. Exact summation of the
 * probability mass while the walk's first term stays representable (n min(q, 1 - q) under about
 * 700), the normal law with a continuity correction beyond. */
double kv_binomial_expected_tiles(double n, double q, double tile);

/* Share of the dense tensor rate (kv_compute_rate) a grouped GEMM reaches when `tokens` rows each
 * pick k of E experts uniformly, every expert multiplying its rows by its own N x K weight: the
 * real work tokens·k·N·K over the least padded work among the CTA tiles (each expert's rows
 * padded to the tile separately; the experts' tiles, times ceil(N / tile columns), in waves of
 * one tile per SM; no split-K). The tiles are TensorRT-LLM's for the GPU, the math dtype dt and
 * the weights' stored bytes per parameter (fewer than 2 in 16-bit math: the weight-only set).
 * 1 when a shape is not given. */
double kv_moe_grouped_efficiency(const scn_hardware *hw, double tokens, double experts, double k, double N, double K,
                                 scn_dtype dt, double weight_bytes);

/* DRAM reads of one expert's weight slab (N x K, slab_bytes), as a multiple of one read, when
 * `resident` persistent CTAs walk its m_tiles x n_tiles output tiles row by row: rows in flight
 * together (resident / n_tiles, at least 1) share a read; each further group of rows re-reads the
 * slab, missing the L2 (l2_bytes) with the share of the slab it cannot hold (all of it without an
 * L2 size). docs/cost-model.md, "Weight re-reads of row-major grouped GEMMs". */
double kv_grouped_weight_reads(double m_tiles, double n_tiles, double resident, double slab_bytes, double l2_bytes);

/* One grouped GEMM (or a layer's two) as the CUTLASS family runs it: `efficiency`, the real work
 * over the chosen tile's padded work (the share of the rate reached); `weight_reads`, the touched
 * experts' weight bytes read from memory as a multiple of one read. On Ampere and Ada
 * (TensorRT-LLM's Ampere-style MoE GEMMs, whose tiles run M-row by M-row) the tile is the one
 * whose padded work at `rate` (flop/s per unit of padded work, kv_moe_grouped_rate) and weight
 * reads at the memory bandwidth combine to the least time; elsewhere the least padded tile
 * (kv_moe_grouped_efficiency), its weights read once. */
typedef struct { double efficiency, weight_reads; } kv_moe_grouped_cost;
kv_moe_grouped_cost kv_moe_grouped_gemm(const scn_hardware *hw, double tokens, double experts, double k, double N,
                                        double K, scn_dtype dt, double weight_bytes, double rate);

/* The two grouped GEMMs of a routed-expert layer (gate|up: N = 2I over K = h, two thirds of its
 * flops and weight bytes; down: N = h over K = I, one third): `inverse`, 2/3 / eff(gate|up) +
 * 1/3 / eff(down) (seconds per flop are it / rate; the layer's share of the rate is its inverse);
 * `weight_reads`, the two GEMMs' reads weighted 2 : 1 by their weight bytes. */
typedef struct { double inverse, weight_reads; } kv_moe_grouped_layer_cost;
kv_moe_grouped_layer_cost kv_moe_grouped_layer(const scn_hardware *hw, double tokens, double experts, double k,
                                               double h, double I, scn_dtype dt, double weight_bytes, double rate);

/* The rate (flop/s) per unit of tile-padded work at which the CUTLASS family's grouped GEMMs
 * run model m's routed experts in math dtype dt: the dense tensor rate (kv_compute_rate), except
 * for block-scaled fp8 experts (128 x 128 weight blocks, 1 x 128 activation groups) on a GPU where
 * the engine's block-fp8 family has a published rate (kv_block_fp8_applies): TensorRT-LLM's MoE
 * runs those through its fp8 block-scale grouped GEMM (CutlassFp8BlockScaleGemmRunner::moeGemm,
 * a DeepGEMM-class kernel), priced at that family's large-M share (kv_block_fp8_peak_rate).
 * docs/cost-model.md, "Block-scaled fp8 GEMMs", routed experts. */
double kv_moe_grouped_rate(const scn_hardware *hw, const scn_engine *e, const scn_model *m, scn_dtype dt);

/* Seconds a MoE layer's fused group-limited top-k routing takes (router scores, DeepSeek-V3's
 * bias, the best groups, the top k within them: two kernels), as the engine's profile publishes
 * it (`moe: {grouped_routing}`), for a model whose router picks expert groups first
 * (expert_groups > 1); 0 otherwise (the routing is then one kernel boundary among the layer's). */
double kv_moe_routing_seconds(const scn_engine *e, const scn_model *m);

/* 16-bit activation bytes a fused-MoE layer under the CUTLASS family (TensorRT-LLM's MoE) moves
 * for T tokens each sent to k of E experts of hidden size h and (per GPU) intermediate size I: `gemm`,
 * what the two grouped GEMMs read and write (the router's input included), which streams under
 * their compute; `serial`, what the memory-bound kernels between them move, each running alone:
 * expandInputRows writes each token's k copies before gate|up; gate|up fuses the gated
 * activation in 16-bit math on the Ampere-style kernels (Ampere, Ada, and Hopper when such a tile
 * pads gate|up least), elsewhere an activation kernel reads 2I and writes I per copy;
 * finalizeMoeRouting reads the k copies and writes one row. Under the Triton family
 * (vLLM's and SGLang's fused_experts) gate|up reads each token's row once through the sorted
 * ids, and `serial` is its silu_and_mul (2I in, I out per copy) and moe_sum (k copies in, one
 * row out). Both 0 for kvplan's own family (it streams its total). docs/cost-model.md, "Data
 * movement of a fused-MoE layer". */
typedef struct { double gemm, serial; } kv_moe_movement;
kv_moe_movement kv_moe_movement_bytes(const scn_hardware *hw, const scn_engine *e, scn_dtype gemm_dtype,
                                      double weight_bytes, double T, double E, double k, double h, double I);

#endif
