/* kv_model.h: the analytical cost model. Pure functions: no I/O, no allocation, no globals.
 *
 * Every formula is derived in docs/cost-model.md with worked examples; the function comments
 * here only say what each returns and in which unit. Byte counts are doubles because int4 and
 * per-group scales give fractional bytes per element. */
#ifndef KVPLAN_KV_MODEL_H
#define KVPLAN_KV_MODEL_H

#include "../loader/scn.h"

/* How the KV cache is stored: dtype, scale layout, and the StreamingLLM bound. */
typedef struct {
    scn_dtype dtype;
    scn_quant quant;
    int sink;     /* tokens always kept (StreamingLLM attention sinks) */
    int window;   /* most recent tokens kept; 0 = no StreamingLLM bound */
    /* An MLA model cached as per-head K and V (the engine's `mla: {cache: expanded}`), not as
     * its latent: kv_heads x (qk_nope + qk_rope) each for K and for V (V padded to the key
     * size), split over tensor-parallel ranks like ordinary attention. */
    bool mla_expanded;
} kv_cache_cfg;

/* The cache config for option choices of a scenario. */
kv_cache_cfg kv_cache_cfg_make(const scn_scenario *s, scn_dtype dtype, int sink, int window);

/* ---- KV bytes (kv_bytes.c) ---- */
/* Elements cached per token per layer: 2 * kv_heads * head_dim, or MLA's latent + rope key. */
double kv_elems_per_token_layer(const scn_model *m);
/* Bytes per token per layer for the whole model (all KV heads), including quantisation scales. */
double kv_bytes_per_token_layer(const scn_model *m, const kv_cache_cfg *c);
/* KV heads one tensor-parallel rank holds. */
int kv_heads_per_rank(const scn_model *m, int tp);
/* ... on one tensor-parallel rank (KV heads split across ranks; MLA's latent is replicated). */
double kv_bytes_per_token_layer_rank(const scn_model *m, const kv_cache_cfg *c, int tp);
/* Bytes per token over all layers, ignoring windows (the rate at which a short context grows). */
double kv_bytes_per_token(const scn_model *m, const kv_cache_cfg *c);
/* Tokens a layer holds for a sequence of `tokens`, after sliding-window and sink+window caps. */
long kv_tokens_held(const scn_model *m, const kv_cache_cfg *c, int layer_is_sliding, long tokens);
/* Bytes one sequence of `tokens` occupies on one rank, with every cap applied. */
double kv_bytes_for_context(const scn_model *m, const kv_cache_cfg *c, int tp, long tokens);

/* ---- Weights (kv_weights.c) ---- */
typedef struct {
    double params_total;        /* parameters */
    double params_active;       /* parameters touched per token (MoE: routed top-k + shared) */
    double params_embedding;    /* input embedding (+ LM head when untied) */
    double params_attention;    /* all layers */
    double params_mlp;          /* all layers, all experts */
    double params_norm;         /* norm weights (replicated under TP) */
    double params_linear;       /* parameters of the quantisable linear layers (attention, experts, MLP) */
    double bytes_per_linear;    /* stored bytes per linear parameter, scales and zero points included */
    double bytes_per_other;     /* bytes per embedding, LM-head, norm and router parameter (16-bit
                                 * when the linear layers are quantised) */
    double bytes_total;         /* as the checkpoint stores them */
    double bytes_per_rank;      /* what one tensor-parallel rank stores */
} kv_weights;

kv_weights kv_weights_compute(const scn_model *m, int tp);
/* Bytes per rank the engine's stored layout adds to the checkpoint's (kv_weights_compute):
 * MXFP4 experts repacked for Marlin on GPUs without fp4 math are padded, and an engine that
 * leaves the embedding and LM head whole on every rank (`lm_head: replicated`) keeps the rest of
 * them; 0 otherwise. */
double kv_weights_engine_extra(const scn_scenario *s);
/* Stored bytes per linear-layer parameter for the model's weight format, scales included. */
double kv_weight_bytes_per_param(const scn_model *m);
/* The dtype a GEMM over these weights runs in on this hardware: W4A16 formats dequantise into
 * 16-bit math; fp8/int8/fp4 use their own tensor rate where the hardware has one. */
scn_dtype kv_gemm_dtype(const scn_model *m, const scn_hardware *hw);
/* The model with another weight format (a plan option). */
void kv_model_set_wformat(scn_model *m, const scn_wformat *f);

/* ---- Collectives (kv_collective.c) ---- */
typedef enum { KV_COLL_NONE, KV_COLL_ONESHOT, KV_COLL_TWOSHOT, KV_COLL_RING, KV_COLL_TREE, KV_COLL_ALLTOALL,
               KV_COLL_P2P, KV_COLL_COUNT } kv_coll_algo;
const char *kv_coll_algo_name(kv_coll_algo a);

typedef struct {
    kv_coll_algo algo;
    double latency;      /* s: the fixed part */
    double transfer;     /* s: bytes over bandwidth */
    double copy;         /* s: the framework's copies of the message in device memory (allreduce.copies) */
    int copies;          /* those copies, each a kernel of its own */
    double net_bytes;    /* bytes each rank moves over the link */
    double seconds;      /* latency + transfer + copy */
} kv_coll_cost;

/* An all-reduce of `bytes` over p ranks as the engine runs it (custom one-/two-shot within its
 * size limits, else NCCL's fastest algorithm and protocol). */
kv_coll_cost kv_allreduce_time(const scn_hardware *hw, const scn_engine *e, int p, double bytes);
/* One all-reduce algorithm by itself (ring and tree: the best NCCL protocol). */
kv_coll_cost kv_allreduce_algo(const scn_hardware *hw, int p, double bytes, kv_coll_algo a);
/* NCCL's ring all-gather of a `bytes` result, each of the p ranks holding a 1/p share: p - 1
 * steps, (p - 1)/p of the result into every rank, at the fastest protocol. */
kv_coll_cost kv_allgather_time(const scn_hardware *hw, int p, double bytes);
/* All-to-all where every rank holds `bytes` split evenly over the p ranks. */
kv_coll_cost kv_alltoall_time(const scn_hardware *hw, int p, double bytes);
/* One point-to-point transfer (a KV-cache hand-off), within a node or across the network. */
kv_coll_cost kv_p2p_time(const scn_hardware *hw, double bytes, bool same_node);

/* Kernels a fused-MoE layer adds to quantise the activations of its two grouped GEMMs when they
 * run in 8- or 4-bit math (W8A8, W4A4): 2, else 0 (docs/cost-model.md, "Kernels per layer"). */
double kv_moe_quant_kernels(scn_dtype gemm_dtype);

/* ---- Weight-only kernels of a PyTorch-native decoder (kv_efficiency.c; docs/cost-model.md,
 * "Weight-only kernels") ---- */
/* The SM clock (Hz) the datasheet's fp32 rate implies: fp32 / (2 x SMs x fp32 lanes per SM of the
 * architecture); 0 when the architecture's lane count is not known here. */
double kv_sm_clock(const scn_hardware *hw);
/* Integer-to-float conversions per second: 16 per clock per SM (the CUDA C++ Programming Guide's
 * throughput table, "all other type conversions", compute capability 7.x to 9.0). 0 = unknown. */
double kv_convert_rate(const scn_hardware *hw);
/* Weights per second tinygemm (torch._weight_int4pack_mm) works through on the SMs for M
 * activation rows and int4 groups of `group`: our H200 measurement per SM clock, times this
 * GPU's SMs and clock. 0 = unknown. */
double kv_tinygemm_rate(const scn_hardware *hw, double group, double M);
/* The rate (flop/s) Marlin-family W4A16/W8A16 GEMMs reach once the batch fills their 64-row
 * tile: its measured share of the 16-bit dense peak on A100, and no more than A100's rate per SM
 * per clock (an sm80 kernel: what binds on Hopper). */
double kv_marlin_rate(const scn_hardware *hw);
/* Stored bytes per int4 weight in tinygemm's layout: half a byte plus a bf16 scale and a bf16
 * zero per group. */
double kv_tinygemm_bytes_per_param(double group);

/* ---- Block-scaled fp8 GEMMs (kv_efficiency.c; docs/cost-model.md, "Block-scaled fp8 GEMMs") ---- */
/* The flop rate the engine's block-fp8 kernel family reaches on a large GEMM of shape N x K with
 * M rows, on Hopper: the family's published large-M rate, as a share of the fp8 datasheet rate
 * with the published shape's tile quantisation taken out, times this shape's. 0 = not priced
 * apart (NATIVE, or no published figure for this GPU generation). */
double kv_block_fp8_rate(const scn_hardware *hw, scn_block_fp8 k, double M, double N, double K);
/* kv_block_fp8_rate before any shape's tiles: the family's share of the fp8 datasheet rate (the
 * published rate over the published shape's tile efficiency, at most 1) times that rate, the rate
 * per unit of tile-padded work. 0 where kv_block_fp8_rate is. */
double kv_block_fp8_peak_rate(const scn_hardware *hw, scn_block_fp8 k);
/* Whether kv_block_fp8_rate prices family k on this GPU (a published rate, Hopper, fp8 math). */
bool kv_block_fp8_applies(const scn_hardware *hw, scn_block_fp8 k);
/* The share of the SMs a block-fp8 GEMM's CTAs occupy: ceil(M / 64) x ceil(N / 128) CTAs, K not
 * split, against the SMs (at most 1), for the Triton and CUTLASS families; 1 otherwise. */
double kv_block_fp8_fill(const scn_hardware *hw, scn_block_fp8 k, double M, double N);

/* ---- Efficiency from shapes (kv_efficiency.c) ---- */
/* The share of flops[dt] a large GEMM in dtype dt reaches: eff_compute x efficiency.compute_scale
 * for dt (1 when the profile gives none). docs/cost-model.md, "Efficiency defaults". */
double kv_compute_share(const scn_hardware *hw, scn_dtype dt);
/* The tensor rate every GEMM in dtype dt is priced at before its shape: flops[dt] x
 * kv_compute_share, flops/s. The one place that multiplies the two, so no op can drift. */
double kv_compute_rate(const scn_hardware *hw, scn_dtype dt);
/* Share of kv_compute_rate a GEMM of M x N x K reaches: tile padding in M, N and K and the
 * last partial wave of tiles over the SMs (split-K when tiles are fewer than SMs). */
double kv_gemm_shape_efficiency(const scn_hardware *hw, double M, double N, double K, scn_dtype dt);
/* Achieved / peak bf16 tensor rate of prefill attention for the engine's kernel family. */
double kv_attention_efficiency(const scn_hardware *hw, const scn_engine *e);
/* Achieved / peak bf16 tensor rate of MLA decode's latent attention (absorbed weights): the
 * FlashMLA-class kernel's figure on Hopper, else kv_attention_efficiency's. */
double kv_mla_decode_efficiency(const scn_hardware *hw, const scn_engine *e);
/* Attention's achieved tensor rate, flops/s: the family's share of the peak of the dtype its
 * kernel computes in (over an fp8 cache on Hopper: fp8 for FA3, and for TensorRT-LLM's XQA
 * decode but not its prefill (`prefill`); bf16 otherwise). */
double kv_attention_rate(const scn_hardware *hw, const scn_engine *e, const kv_cache_cfg *c, bool prefill);
/* Whether the attention family's structural terms (decode tile padding, prefill tiles) apply:
 * a supported GPU generation, an engine running one of the families' kernels (not kvplan's
 * own), and no calibrated or given efficiency.attention. */
bool kv_attention_family_applies(const scn_hardware *hw, const scn_engine *e);
/* Query rows a decode kernel computes for one (sequence, KV head) work item that holds `rows`
 * real query rows (`group` query heads per KV head times the new tokens): the engine kernel's
 * tile M for tensor-core kernels that pad, rows itself otherwise. `split`: the batch runs the
 * split-KV kernel (FA2's tile differs). */
double kv_decode_tile_rows(const scn_hardware *hw, const scn_engine *e, const kv_cache_cfg *c, double rows,
                           double head_dim, double group, bool split);
/* Query rows MLA's absorbed decode kernel computes for `rows` real ones (heads per rank times
 * new tokens): FlashMLA's 64-row tile for vLLM on Hopper, rows itself elsewhere. */
double kv_mla_decode_tile_rows(const scn_hardware *hw, const scn_engine *e, double rows);
/* The tiles of one prefill attention launch, in key-block units of the family's tile. */
typedef struct {
    double useful;   /* attended (query, key) pairs / (tile M x tile N) */
    double work;     /* Σ over tiles of key blocks visited + the per-tile prologue */
    double wmax, wmin, tiles;
} kv_prefill_tiles;
/* Adds one sequence of n new tokens over ctx cached ones, `heads` query heads, `pairs` attended
 * pairs per head, a layer holding at most `cap` tokens (0: no cap). */
void kv_prefill_tiles_add(kv_prefill_tiles *t, const scn_hardware *hw, const scn_engine *e, double head_dim,
                          double heads, long ctx, long n, long cap, double pairs);
/* Share of a layer's KV heads whose prefill tiles run at once (their K/V share the L2): FA2
 * launches a head's tiles together, head after head; FA3-class kernels run every head at once. */
double kv_prefill_kv_share(const scn_hardware *hw, const scn_engine *e, double head_dim, double heads, double kv_heads, long n);
/* A tile's Q read and O write, in key blocks of the family's compute. */
double kv_prefill_tile_prologue(const scn_hardware *hw, const scn_engine *e, double head_dim);
/* Share of the family's rate the launch reaches: useful work over the SMs' time until its last
 * tile ends (tail of the last wave, causal imbalance, prologues). */
double kv_prefill_tiles_efficiency(const kv_prefill_tiles *t, const scn_hardware *hw, const scn_engine *e, double head_dim);
/* Share of the streaming bandwidth decode attention reaches with `units` independent
 * (sequence, KV head, split) work items spread over the SMs. */
double kv_wave_efficiency(const scn_hardware *hw, double units);
/* The most splits one decode sequence's keys get in split-KV decode when the step has `items`
 * (sequence, KV head) work items: FlashAttention-2's num_splits_heuristic where FA2 kernels
 * decode (flash2, sdpa, flash3 off Hopper; not MLA's latent decode), else the SMs left per item, floor(SMs / items) (callers clamp to >= 1 and to the row's
 * 128-key blocks: kv_decode_split). */
double kv_decode_splits(const scn_hardware *hw, const scn_engine *e, double items, bool mla);
/* Time of an op that needs t_compute and t_memory: a smooth roofline, (tc^2 + tm^2)^(1/2). */
double kv_roofline_combine(double t_compute, double t_memory);

/* ---- Memory budget and capacity (kv_capacity.c) ---- */
typedef struct {
    double device_memory;       /* bytes per GPU */
    double usable;              /* the engine's memory fraction times what it applies to (kv_mem_split) */
    double weights;             /* bytes per rank */
    double activation;          /* peak activation bytes per rank at max_num_batched_tokens */
    double runtime;             /* runtime overhead bytes */
    double kv_budget;           /* bytes left for the KV cache per rank; may be negative */
    double kv_bytes_per_token;  /* per rank, before window caps */
    long capacity_tokens;       /* floor(kv_budget / kv_bytes_per_token), 0 if it does not fit */
    int block_size;             /* tokens per block */
    long capacity_blocks;       /* floor(kv_budget / (block_size * kv_bytes_per_token)) */
    long reserve_contiguous;    /* tokens a contiguous sequence reserves (kv_contiguous_reserve) */
    long max_seqs_contiguous;   /* sequences that fit when each reserves reserve_contiguous tokens */
    long max_seqs_paged;        /* sequences of `mean_tokens` that fit in blocks */
    double seq_bytes_contiguous; /* per rank: KV one contiguous reservation takes, windowed layers capped */
    double seq_bytes_paged;     /* per rank: KV the blocks of one sequence of `mean_tokens` take */
    double mean_tokens;         /* tokens a sequence holds (kv_seq_size_of: prefix and history included) */
    double waste_contiguous;    /* reserved-but-unused fraction under contiguous reservation */
    double waste_paged;         /* expected unused fraction of the last block, paged */
} kv_capacity;

/* How an engine splits device memory (docs/cost-model.md, "Memory budget and capacity"): the
 * fraction in force, what it applies to, and what comes out of it before the KV cache. One
 * accounting for `memory`, the simulator's pools and the MoE layouts. */
typedef struct {
    double fraction;            /* the memory fraction in force (scn_engine_mem_fraction) */
    double base;                /* bytes the fraction applies to */
    double usable;              /* fraction * base */
    double activation;          /* activation peak bytes the engine counts (0: it lives outside) */
    double runtime;             /* other bytes taken before the KV cache (context, non-torch) */
    double kv_budget;           /* what is left for the KV cache; may be negative */
} kv_mem_split;
kv_mem_split kv_memory_split(const scn_scenario *s, double weights, double activation);
/* Bytes of the profile run's all-reduce messages the allocator still holds for the NCCL stream
 * when a free-memory profiler reads the device (`memory: {held_allreduce: true}`); 0 otherwise. */
double kv_held_allreduce_bytes(const scn_scenario *s);

/* Capacity for a scenario's deployment under one cache config and block size; mean_tokens is
 * the length each sequence holds (<= 0 means the workload's mean prompt + mean output). */
kv_capacity kv_capacity_compute(const scn_scenario *s, const kv_cache_cfg *c, int block_size,
                                double mean_tokens);
/* Peak activation bytes per rank of the engine's profile run: a forward pass over `tokens`
 * tokens and the sampler over `seqs` sequences' logits. */
double kv_activation_bytes(const scn_model *m, int tp, long tokens, long seqs);
/* The same with the routed experts' outputs sized for at most `moe_chunk` tokens (a fused-MoE
 * kernel that works through the tokens in chunks; engine `memory: {moe_chunk: N}`); 0 = one
 * chunk of all the tokens. */
double kv_activation_bytes_chunked(const scn_model *m, int tp, long tokens, long seqs, long moe_chunk);
/* The profile-run peak under the scenario's engine: kv_activation_bytes_chunked, or, where the
 * engine gives `memory: {sampler_bytes: B}`, the larger of the forward pass (without a sampler
 * term) and the hidden states plus seqs x vocab x B of sampler working set. */
double kv_profile_activation_bytes(const scn_scenario *s, const scn_model *m, int tp, long tokens, long seqs,
                                   long moe_chunk);
/* Expected unused tokens in a sequence's last block: (block_size - 1) / 2 for lengths that are
 * uniform modulo the block size. */
double kv_expected_block_waste(int block_size);

/* ---- Step time (kv_roofline.c) ---- */
typedef enum { KV_OP_EMBED, KV_OP_NORM, KV_OP_QKV, KV_OP_ATTENTION, KV_OP_OUT_PROJ, KV_OP_MLP,
               KV_OP_ALLREDUCE, KV_OP_LM_HEAD, KV_OP_STEP, KV_OP_COUNT } kv_op;
const char *kv_op_name(kv_op op);

typedef enum { KV_BOUND_MEMORY, KV_BOUND_COMPUTE, KV_BOUND_NETWORK, KV_BOUND_OVERHEAD } kv_bound;
const char *kv_bound_name(kv_bound b);

/* One sequence's share of a step: `new_tokens` processed on top of `context` cached tokens. */
typedef struct {
    long new_tokens;
    long context;
} kv_seq_work;

typedef struct {
    double flops;        /* per rank, all layers */
    double bytes;        /* device-memory bytes moved per rank, all layers */
    double weight_bytes; /* of bytes, weights a GEMM streams at full bandwidth inside an op whose
                          * kernel runs at a wave efficiency (MLA's absorbed kv_b in attention) */
    double serial_bytes; /* of bytes, those the op's own elementwise kernels move between its GEMMs
                          * (SiLU*mul, rotary): memory time no GEMM's compute hides, added after
                          * the roofline (docs/cost-model.md, "Elementwise kernels") */
    double net_bytes;    /* bytes sent over the interconnect per rank */
    double kernels;      /* kernel launches */
    double t_compute;    /* s: flops / (peak * efficiency) */
    double t_memory;     /* s: bytes / (bandwidth * efficiency) */
    double t_fill;       /* s: of t_memory, the extra time block-fp8 GEMMs stream their weights in
                          * when their CTAs occupy only part of the SMs (kv_block_fp8_fill) */
    double t_network;    /* s */
    double t_latency;    /* s: published kernel time of the op's latency-bound kernels, which move
                          * too little for bytes or flops to price them and run alone (a fused
                          * routing's grouped top-k: docs/cost-model.md, "Fused-MoE kernels") */
    double t_overhead;   /* s: launch cost not hidden behind the GPU, or the step's CPU cost */
    double seconds;      /* max(combine(t_compute, t_memory - t_serial) + t_serial + t_latency,
                          * t_network) + t_overhead, t_serial = serial_bytes / bandwidth */
    double efficiency;   /* GEMMs: shape efficiency; attention: kernel efficiency (0 = n/a) */
    kv_bound bound;
} kv_op_cost;

typedef struct {
    kv_op_cost op[KV_OP_COUNT];
    double seconds;      /* the step: sum over ops */
    long tokens;         /* new tokens in the step */
    kv_bound bound;      /* what binds the step as a whole (largest share of time) */
    /* The terms `kvplan cost` explains. */
    double gpu_seconds;  /* device time: every op but the step's CPU cost */
    double cpu_seconds;  /* the engine's CPU work for the step */
    double host_seconds; /* the host's walk of an eager forward (kv_host.c; 0 under a graph) */
    bool graph;          /* replayed from a CUDA graph */
    int graph_batch;     /* the captured size it ran at (batch padded up to it) */
    scn_dtype gemm_dtype;   /* the dtype GEMMs ran in */
    kv_coll_cost allreduce; /* one all-reduce of the step */
    int allreduces;      /* how many */
    bool mla_absorbed;   /* MLA decode ran over the latent cache with absorbed weights */
} kv_step_cost;

/* The launch and kernel-boundary time of `kernels` kernels whose GPU time is `gpu`: a boundary
 * each in a replayed CUDA graph, and eagerly the CPU's launches where they outrun the GPU
 * (docs/cost-model.md, "Engine profiles"; the rule every op of kv_step_time pays). */
double kv_launch_overhead(double kernels, double gpu, double launch, bool graph, double graph_kernel);

/* Step time of one engine step over n sequences on the scenario's hardware and deployment. */
kv_step_cost kv_step_time(const scn_scenario *s, const kv_cache_cfg *c, scn_attention attn,
                          const kv_seq_work *seqs, int n);
/* The same with speculative verify rows: verify[i] > 0 marks sequence i's new_tokens as
 * drafts + 1 verified at once, run by the decode kernels with logits for every row
 * (model/kv_spec.h). verify may be NULL (none). */
kv_step_cost kv_step_time_verify(const scn_scenario *s, const kv_cache_cfg *c, scn_attention attn,
                                 const kv_seq_work *seqs, const int *verify, int n);
/* One GEMM [M x K] x [K x N] by itself, priced exactly as kv_step_time prices each GEMM of a
 * step: the N x K weight at `weight_bytes` per parameter read once plus M x (N + K) 16-bit
 * activations at bandwidth x eff_bandwidth, 2·M·N·K flops at kv_compute_rate(hw, dt) x
 * kv_gemm_shape_efficiency, the two combined by kv_roofline_combine, plus one kernel's launch or
 * boundary cost under engine e (`graph`: replayed from a CUDA graph). For checking the GEMM
 * pricing against measured kernels (planner/plan_kernels.h). */
kv_op_cost kv_gemm_time(const scn_hardware *hw, const scn_engine *e, double M, double N, double K, scn_dtype dt,
                        double weight_bytes, bool graph);
/* kv_step_time_verify in two parts, for callers that reuse the first: kv_step_shape prices every
 * op but attention (they depend on the batch only through its new-token counts, verify rows and
 * n, not the contexts); kv_step_complete adds attention over the contexts and the totals. Their
 * composition is kv_step_time_verify, bit for bit. */
void kv_step_shape(const scn_scenario *s, const int *verify, const kv_seq_work *seqs, int n, kv_step_cost *out);
kv_step_cost kv_step_complete(const kv_step_cost *shape, const scn_scenario *s, const kv_cache_cfg *c,
                              scn_attention attn, const kv_seq_work *seqs, const int *verify, int n);
/* A plain decode step (every one of n rows computes one new token) from sums over its rows, for
 * callers that keep them current step by step: per layer kind k (0 global, 1 sliding),
 * keys[k] = Σ min(context + 1, kv_decode_cap(k)) and splits[k] = Σ kv_decode_split(that held
 * count, kv_decode_split_cap(n)). kv_step_complete_decode(kv_step_shape of the batch, ...) equals
 * kv_step_complete on the rows bit for bit whenever kv_decode_sums_exact holds for the batch's
 * size and contexts: FlashAttention, no MLA, and every per-row term an integer whose sums stay
 * below 2^53, so that every addition is exact and the order of the rows cannot matter. */
typedef struct { double keys[2], splits[2]; } kv_decode_sums;
bool kv_decode_sums_exact(const scn_scenario *s, const kv_cache_cfg *c, scn_attention attn, int max_n, long max_ctx);
long kv_decode_cap(const scn_scenario *s, const kv_cache_cfg *c, int sliding);   /* 0: none */
double kv_decode_split_cap(const scn_scenario *s, int n);   /* <= 1: every row splits once */
double kv_decode_split(double held, double split_cap);
kv_step_cost kv_step_complete_decode(const kv_step_cost *shape, const scn_scenario *s, const kv_cache_cfg *c,
                                     int n, const kv_decode_sums *d);
/* A step whose first lead.n rows are plain decode rows given by their sums (keys[k] as in
 * kv_decode_sums; each row splits once), followed by n other rows (prefill chunks, prompts):
 * kv_step_complete over all of its rows, bit for bit, when kv_decode_sums_exact holds for the
 * lead's size and contexts and kv_decode_split_cap(s, decode rows of the whole step) <= 1; the
 * shape is kv_step_shape of the whole step. For a mixed step whose decode rows a caller keeps as
 * sums (sim/engine.c's fast-forward). */
typedef struct { int n; double keys[2]; } kv_decode_lead;
kv_step_cost kv_step_complete_led(const kv_step_cost *shape, const scn_scenario *s, const kv_cache_cfg *c,
                                  scn_attention attn, const kv_decode_lead *lead, const kv_seq_work *rows, int n);
/* kv_step_complete_decode(...).seconds with everything but the sums prepared once per batch
 * size n (from kv_step_shape of n decode rows): the same doubles, in a few dozen operations. */
typedef struct {
    const scn_hardware *hw;
    double op_seconds[KV_OP_COUNT];   /* s: the shape's ops (attention and the step's CPU term: 0) */
    bool tokens, graph, async;
    int n;
    double layers[2], fpk, qo_kv, kv_tok, kvh;   /* attention()'s per-row terms */
    double pad;                                  /* computed / real decode rows (kv_decode_tile_rows) */
    double apeak, bw, launch, graph_kernel, graph_launch, cpu, host;
    double wave_units, wave;   /* kv_wave_efficiency at the work items of n rows that split once */
    double pre_attention;      /* Σ op_seconds of the ops before attention, summed in op order */
} kv_decode_plan;
void kv_decode_plan_make(const kv_step_cost *shape, const scn_scenario *s, const kv_cache_cfg *c, int n, kv_decode_plan *p);
double kv_decode_plan_seconds(const kv_decode_plan *p, const kv_decode_sums *d);

/* ---- Prefix caching (kv_prefix.c) ---- */
typedef struct {
    long hit_tokens;       /* tokens served from cache: whole blocks only */
    long blocks_shared;    /* blocks reused instead of allocated */
    double kv_bytes_saved; /* per rank */
    double prefill_flops_saved;   /* per rank */
    double prefill_seconds_saved; /* step time without the hit minus with it */
} kv_prefix_saving;

/* What a prefix-cache hit of `hit_len` tokens saves for a prompt of `prompt` tokens. */
kv_prefix_saving kv_prefix_saving_compute(const scn_scenario *s, const kv_cache_cfg *c,
                                          int block_size, long prompt, long hit_len);

/* ---- The serving front end (kv_frontend.c) ---- */
/* Seconds the engine's front end adds to a request's time to first token, and so to its
 * end-to-end latency: frontend.request + frontend.per_prompt_token x prompt tokens. 0 for an
 * offline workload, whose prompts reach the engine in-process (docs/cost-model.md, "Engine
 * profiles", "Front end"). */
double kv_frontend_seconds(const scn_scenario *s, double prompt_tokens);

/* ---- The host walk of an eager forward (kv_host.c) ---- */
/* Seconds the host takes to launch a forward eagerly from Python: engine cpu.eager_layer x the
 * model's layers; 0 when the step replays a CUDA graph or the engine gives no figure
 * (docs/cost-model.md, "Engine profiles", "Eager forward on the host"). */
double kv_eager_host_seconds(const scn_scenario *s, bool graph);
/* The step's CPU term over a GPU time `gpu`: scheduling work `cpu` and the host walk `host`,
 * serial (cpu + max(0, host - gpu)) or one step ahead (max(0, cpu + host - gpu)). */
double kv_step_host_term(double gpu, double cpu, double host, bool async);

#endif
