/* kv_blocks.h: the KV pool a replica gets, in blocks: the one block-count function the
 * simulator, the backends and the planner share (derivation: docs/cost-model.md, "Memory
 * budget and capacity"). A contiguous pool is counted in blocks of one token. */
#ifndef KVPLAN_KV_BLOCKS_H
#define KVPLAN_KV_BLOCKS_H

#include "kv_model.h"

#include <stdbool.h>

typedef struct {
    long blocks;          /* blocks per replica (per tensor-parallel group); 0 when nothing fits */
    int block_size;       /* tokens per block: the paged block size, or 1 for contiguous */
    double kv_budget;     /* bytes per rank left for the KV cache; may be negative */
} kv_pool;

/* The pool kv_capacity_compute() leaves for the KV cache under one cache config and layout. */
kv_pool kv_pool_size(const scn_scenario *s, const kv_cache_cfg *c, bool paged, int block_size);

/* ---- Sequence sizes and reservations ----
 * The one set of rules `kvplan memory`, the simulator's block manager and the planner's capacity
 * search use to size a sequence and what a layout reserves for it (docs/cost-model.md, "Memory
 * budget and capacity"). All counts are tokens. */

typedef struct {
    double prompt;        /* tokens: mean prompt of a request, shared prefix and conversation history included */
    double output;        /* tokens: mean output of a request */
    double held;          /* tokens: mean a sequence holds when it finishes, prompt + output, within max_model_len */
    long output_max;      /* tokens: the most one request may generate */
    bool known;           /* false: lengths come from a trace or a file the model cannot read; the
                           * sizes above then assume max_model_len */
} kv_seq_size;

/* Mean sizes of the scenario's requests: a prompt carries the shared prefix with probability
 * `share`, and turn k of a conversation carries the k earlier messages and replies. */
kv_seq_size kv_seq_size_of(const scn_scenario *s);
/* The most one request may generate: the output distribution's fixed value or max, else
 * max_model_len. */
long kv_output_max(const scn_scenario *s);
/* Tokens of KV a sequence with `positions` positions keeps: all of them, or the StreamingLLM
 * sink + window when that is smaller. */
long kv_seq_held(const kv_cache_cfg *c, long positions);
/* Tokens a contiguous allocator reserves when it admits a request of `prompt` tokens that will
 * generate `output` and already knows `known` tokens (after a preemption): prompt plus the most
 * it may generate, within max_model_len, never less than known + 1, and never more than the
 * window keeps. */
long kv_contiguous_reserve(const scn_scenario *s, const kv_cache_cfg *c, long prompt, long output, long known);

/* ---- Sliding-window layers ----
 * A model whose layers all attend to at most `sliding_window` tokens keeps, in every layer, what
 * a window of that size keeps: kv_cache_fold() turns it into the cache's window (sink 0) unless
 * the cache's own sink + window is smaller. A model that mixes full-attention and windowed layers
 * keeps two layer groups in one pool (vLLM V1's hybrid KV cache manager): the full group holds
 * every position, the windowed group only the blocks covering the last `window` positions. Space
 * is then counted in layer-blocks (block_size tokens of one layer) or layer-tokens
 * (contiguous): a pool of B blocks of every layer holds B * layers of them. */
typedef struct {
    int full;             /* layers that keep every position */
    int win;              /* layers that keep the last `window` positions; 0 for a single group */
    int window;           /* tokens; 0 when win is 0 */
} kv_groups;

/* The cache config with an all-layers model window folded into sink + window. */
kv_cache_cfg kv_cache_fold(const scn_model *m, const kv_cache_cfg *c);
/* The layer groups of a model: one (full = layers) unless it mixes windowed and full layers. */
kv_groups kv_groups_of(const scn_model *m);
/* Blocks of block_size tokens a windowed layer keeps for a sequence of `positions`: those
 * covering its last `window` positions (block j is freed once (j + 1) * block_size <=
 * positions - window). */
long kv_window_blocks(int window, int block_size, long positions);
/* Layer-blocks (paged) or layer-tokens (contiguous: block_size 1) one sequence occupies: the
 * full group's `held` tokens in whole blocks on every full layer, and on each windowed layer the
 * blocks covering its last window of `positions` (no more than the full group's); contiguous,
 * the windowed layers keep a ring of min(held, window). `held` is what the cache config keeps. */
double kv_seq_layer_units(const kv_groups *g, int block_size, bool paged, long held, long positions);

#endif
