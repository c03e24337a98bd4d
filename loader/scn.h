/* scn.h: the scenario format's public types and loader.
 *
 * A scenario names a model, a hardware profile, a deployment, a workload, an SLO and the
 * option space the planner may choose among. The loader reads YAML (or JSON) with libyaml,
 * resolves library references, applies --set overrides, parses every unit with PCRE2 and
 * validates every field; on failure it fills a scn_error with file:line:col and the field path.
 * docs/scenarios.md is the reference for the format. */
#ifndef KVPLAN_SCN_H
#define KVPLAN_SCN_H

#include <stdbool.h>
#include <stddef.h>

/* Failure classes; cli/ maps them to sysexits-style exit codes. */
typedef enum {
    SCN_OK = 0,
    SCN_E_DATA,     /* the input is malformed or invalid (exit 65) */
    SCN_E_NOINPUT,  /* a file could not be opened or read (exit 66) */
    SCN_E_USAGE,    /* a command-line override is malformed (exit 64) */
    SCN_E_INTERNAL  /* out of memory or a library failure (exit 70) */
} scn_status;

typedef struct {
    scn_status status;
    char file[512];   /* the file the problem is in, or "--set" */
    int line, col;    /* 1-based; 0 when unknown */
    char path[256];   /* dotted field path, e.g. workload.arrival.rate */
    char msg[512];    /* what was wrong and what was expected */
} scn_error;

/* Formats "file:line:col: path: message" into buf. */
void scn_error_format(const scn_error *e, char *buf, size_t n);

typedef enum { SCN_DTYPE_FP32, SCN_DTYPE_FP16, SCN_DTYPE_BF16, SCN_DTYPE_FP8, SCN_DTYPE_INT8,
               SCN_DTYPE_INT4, SCN_DTYPE_FP4, SCN_DTYPE_COUNT } scn_dtype;
extern const char *const SCN_DTYPE_NAMES[];   /* names, in enum order, NULL-terminated (scn_names.c) */
const char *scn_dtype_name(scn_dtype d);
double scn_dtype_bytes(scn_dtype d);          /* 0.5 for int4 */
int scn_dtype_parse(const char *s, scn_dtype *out);
/* The name of value v in one of the SCN_*_NAMES tables; "?" when out of range. */
const char *scn_enum_name(const char *const *names, int v);

/* How quantised KV stores its scales (docs/cost-model.md, "Quantised KV"). */
typedef enum { SCN_QUANT_PER_TENSOR, SCN_QUANT_PER_TOKEN_HEAD, SCN_QUANT_GROUP } scn_quant_gran;
extern const char *const SCN_QUANT_GRAN_NAMES[];

typedef struct {
    scn_quant_gran granularity;
    int group_size;          /* elements per scale, for SCN_QUANT_GROUP */
    scn_dtype scale_dtype;   /* dtype of each scale (and zero point) */
    bool zero_point;         /* asymmetric quantisation stores a zero point per scale */
} scn_quant;

/* How quantised weights store their scales (docs/cost-model.md, "Quantised weights"). NONE is a
 * plain 16/32-bit checkpoint; the others name the checkpoint layouts engines load. */
typedef enum { SCN_WQ_NONE, SCN_WQ_PER_TENSOR, SCN_WQ_BLOCK, SCN_WQ_PER_CHANNEL, SCN_WQ_AWQ, SCN_WQ_GPTQ,
               SCN_WQ_NVFP4, SCN_WQ_MXFP4, SCN_WQ_COUNT } scn_wquant;
const char *scn_wquant_name(scn_wquant q);

/* A weight format: what a plan option `weight_dtype` names (bf16, fp8, fp8_block, int8, awq,
 * gptq, fp4). */
typedef struct {
    scn_dtype dtype;        /* stored element type */
    scn_wquant quant;       /* scale layout */
    int group_size;         /* elements per scale for group layouts (AWQ/GPTQ 128, NVFP4 16, block 128x128) */
} scn_wformat;
/* Parses a weight-format name; 0 on success. */
int scn_wformat_parse(const char *name, scn_wformat *out);
/* "bf16", "awq", ... */
const char *scn_wformat_name(const scn_wformat *f);

#define SCN_NAME_MAX 64
#define SCN_PATH_MAX 512

typedef struct {
    char name[SCN_NAME_MAX];
    char source[SCN_PATH_MAX]; /* the file it was read from */
    int layers;
    int hidden;               /* hidden size (elements) */
    int heads;                /* query heads */
    int kv_heads;             /* key/value heads (== heads for MHA, 1 for MQA) */
    int head_dim;             /* elements per head */
    int intermediate;         /* dense MLP intermediate size */
    int vocab;
    bool tie_embeddings;
    bool attention_bias;      /* q/k/v projections carry a bias (Qwen2) */
    int norms_per_layer;      /* RMSNorm weight vectors per layer (2 for Llama, 4 for Gemma 2) */
    int max_position;         /* max_position_embeddings (tokens) */
    scn_dtype weight_dtype;   /* stored element type of the linear layers' weights */
    scn_wquant weight_quant;  /* their scale layout (NONE for 16/32-bit) */
    int weight_group;         /* elements per scale for group layouts */
    /* `quantized_layers: experts`: only the routed experts are stored in weight_dtype; attention
     * (and everything else) stays 16-bit, as gpt-oss's MXFP4 checkpoints have it. */
    bool quant_experts_only;
    /* `quantized_layers: mlp`: only the dense MLPs (gate, up, down) are stored in weight_dtype;
     * attention stays 16-bit, as in Meta's fp8_mixed checkpoints (Llama-3.1-405B-FP8). */
    bool quant_mlp_only;
    /* With `mlp`: this many layers at each end of the stack keep their MLPs 16-bit too (Meta's
     * fp8_mixed skips the first and the last layer: 1). */
    int unquantized_end_layers;
    /* Sliding-window attention: `sliding_layers` of the layers attend to at most
     * `sliding_window` tokens (0 = none). */
    int sliding_window;       /* tokens */
    int sliding_layers;       /* count of windowed layers */
    /* Mixture of experts: 0 experts means dense. */
    int experts;              /* routed experts per MoE layer */
    int experts_per_token;
    int moe_intermediate;     /* intermediate size of one routed expert */
    int shared_experts;       /* always-active experts of moe_intermediate size */
    int dense_layers;         /* leading layers that stay dense (DeepSeek first_k_dense_replace) */
    int expert_groups;        /* groups the router first picks among (DeepSeek-V3 n_group); 0 or 1:
                               * plain top-k over all experts */
    /* Multi-head latent attention (DeepSeek-V2/V3): kv_lora_rank > 0 switches it on. */
    int kv_lora_rank;
    int q_lora_rank;          /* 0 = queries projected directly */
    int qk_rope_head_dim;
    int qk_nope_head_dim;
    int v_head_dim;
    /* Multi-token prediction (DeepSeek-V3): prediction modules the checkpoint ships beside the
     * main model (HF num_nextn_predict_layers); speculative method mtp needs at least one. */
    int mtp_layers;
    /* The model's chat format around one user message, in tokens (`chat_template: {prefix,
     * suffix}`): what a chat endpoint renders before the message's text (identical for every
     * request: system and role headers) and after it (the turn's end and the assistant's header).
     * 0 and 0 = not derived for this model. Used by validate-published for rows sent to a chat
     * endpoint (docs/cost-model.md, "Chat endpoints"). `bos`: how many of the prefix's tokens the
     * tokenizer adds to any text it encodes (a BOS), which a benchmark client's own token count of
     * the prompt already holds, so the chat format adds prefix + suffix - bos beyond it. */
    int chat_prefix, chat_suffix, chat_bos;
} scn_model;

typedef enum { SCN_LINK_NONE, SCN_LINK_NVLINK, SCN_LINK_PCIE, SCN_LINK_INFINITY_FABRIC, SCN_LINK_INFINIBAND,
               SCN_LINK_ROCE } scn_link;
extern const char *const SCN_LINK_NAMES[];

/* GPU generation: which attention kernels an engine runs and how well (docs/cost-model.md). */
typedef enum { SCN_ARCH_OTHER, SCN_ARCH_AMPERE, SCN_ARCH_ADA, SCN_ARCH_HOPPER, SCN_ARCH_BLACKWELL, SCN_ARCH_CDNA3,
               SCN_ARCH_CPU } scn_arch;
extern const char *const SCN_ARCH_NAMES[];

/* A memory tier below the GPU's HBM that KV can be offloaded to, as one GPU sees it
 * (docs/cost-model.md, "KV offload tiers"): host DRAM over PCIe or NVLink-C2C, a local NVMe
 * drive, a shared remote store. A capacity of 0 means the profile has no such tier. */
typedef struct {
    char link[32];              /* what joins it to the GPU, for display ("pcie5-x16", "nvlink-c2c") */
    double capacity;            /* bytes per GPU */
    double bandwidth;           /* bytes/s per direction per GPU, datasheet (theoretical) */
    double efficiency;          /* achieved / datasheet bandwidth (derived in docs/cost-model.md) */
    double latency;             /* s added once per transfer */
} scn_tier;

typedef struct {
    char name[SCN_NAME_MAX];
    char source[SCN_PATH_MAX];
    scn_arch arch;
    double memory;              /* bytes of device memory */
    /* bytes of `memory` the driver keeps from CUDA: the total cudaMemGetInfo (torch's
     * mem_get_info) reports, which the engines size their budgets from, is memory less this. */
    double memory_reserved;
    double memory_bandwidth;    /* bytes/s, datasheet peak */
    double flops[SCN_DTYPE_COUNT]; /* dense tensor ops/s per operand dtype; 0 = unsupported */
    scn_link link;
    double link_bandwidth;      /* bytes/s per GPU per direction */
    double link_latency;        /* s per collective step (NCCL's low-latency protocol, one hop) */
    int gpus_per_node;          /* GPUs the link joins all-to-all (an NVSwitch node); 0 = tensor_parallel */
    double oneshot_latency;     /* s: a custom one-shot all-reduce of a tiny message over 2 GPUs */
    double oneshot_latency_peer;/* s added per further peer */
    double twoshot_latency;     /* s: a measured custom two-shot all-reduce's fixed cost; 0 = derived from one-shot's */
    double twoshot_bandwidth;   /* bytes/s its 2 (p - 1)/p of the message move at, as measured; 0 = the link's */
    double nccl_latency;        /* s: a measured small NCCL all-reduce (graph replay); 0 = NCCL's tuning model */
    int nccl_latency_gpus;      /* GPUs that measurement ran on */
    double nccl_bandwidth;      /* bytes/s: NCCL's measured large all-reduce bus bandwidth in a node
                                 * (LL128 and Simple); 0 = bandwidth x eff_link */
    scn_link net;               /* scale-out network between nodes */
    double net_bandwidth;       /* bytes/s per GPU per direction (one NIC per GPU) */
    double net_latency;         /* s per collective step across the network */
    int sm_count;               /* streaming multiprocessors (compute units); 0 = no wave model */
    double l2_cache;            /* bytes of last-level on-chip cache; 0 = no reuse model */
    /* Efficiency factors and overheads: defaults in the library, replaced by calibration. */
    double eff_bandwidth;       /* achieved / peak memory bandwidth */
    double eff_compute;         /* achieved / peak tensor throughput on GEMMs */
    /* efficiency.compute_scale: GEMMs whose math runs in dtype d reach eff_compute x this of
     * flops[d] (a ratio to compute, so a calibration of compute carries to every dtype);
     * 0 = not given, i.e. 1. Read it through kv_compute_share (model/kv_model.h). */
    double eff_compute_scale[SCN_DTYPE_COUNT];
    double eff_attention;       /* achieved / peak tensor throughput in attention (used when calibrated;
                                 * otherwise the engine's kernel family sets it) */
    double eff_link;            /* achieved / peak interconnect bandwidth */
    double kernel_overhead;     /* s per kernel launch (eager); from the engine unless overhead_given */
    double step_overhead;       /* s of CPU scheduling per engine step; likewise */
    bool overhead_given;        /* the profile sets kernel_launch/step itself (a calibrated profile) */
    bool attention_given;       /* the profile sets efficiency.attention itself */
    double runtime_memory;      /* bytes taken by the runtime (context, workspaces, graphs) */
    double usd_per_gpu_hour;    /* list price (price.usd_per_gpu_hour); 0 when the profile gives none */
    bool calibrated;
    scn_tier host;              /* host DRAM (`host:`) */
    scn_tier nvme;              /* local NVMe (`nvme:`) */
    scn_tier remote;            /* remote store (`remote:`): the third tier, simulated per replica */
} scn_hardware;

/* A serving engine's profile (scenarios/engines/NAME.yaml; docs/cost-model.md, "Engine
 * profiles"). */
/* All-reduce implementations: vLLM's custom kernels (CUSTOM), NCCL, and PyTorch's intra-node
 * kernels (INTRANODE: c10d IntraNodeComm under ENABLE_INTRA_NODE_COMM, gpt-fast's TP runs), which
 * size and place themselves by rules of their own (docs/cost-model.md, "Collectives"). */
typedef enum { SCN_AR_CUSTOM, SCN_AR_NCCL, SCN_AR_INTRANODE } scn_allreduce_impl;
/* How the engine runs weight-only quantised GEMMs (`weight_only:`; docs/cost-model.md,
 * "Weight-only kernels"): FUSED kernels stream the weights at the memory roof and compute like
 * a 16-bit GEMM (no figure says otherwise: TensorRT-LLM's); TORCH is a PyTorch-native decoder's:
 * int8 dequantised by a torch.compile'd GEMV that converts every weight to float, int4 by
 * tinygemm (torch._weight_int4pack_mm); MARLIN is vLLM's and SGLang's Marlin kernels on Ampere
 * and Ada (W4A16, and fp8 weights where the GPU has no fp8 math), whose large-batch rate is
 * capped by their 64-row tile. */
typedef enum { SCN_WO_FUSED, SCN_WO_TORCH, SCN_WO_MARLIN, SCN_WO_COUNT } scn_weight_only;
typedef enum { SCN_MX_CHECKPOINT, SCN_MX_MARLIN, SCN_MX_COUNT } scn_mxfp4_layout;
/* KVPLAN: kvplan's own CUDA kernels (backend/cuda: CUDA-core decode, its own prefill tiles).
 * MMHA: TensorRT-LLM before XQA (0.5, 0.6): context FMHA for prefill, the masked multi-head
 * attention kernel for decode, one CUDA-core thread block per sequence and query head. */
typedef enum { SCN_AK_FLASH2, SCN_AK_FLASH3, SCN_AK_FLASHINFER, SCN_AK_TRTLLM, SCN_AK_SDPA, SCN_AK_KVPLAN, SCN_AK_MMHA,
               SCN_AK_COUNT } scn_attn_kernel;
#define SCN_GRAPH_SIZES_MAX 96
#define SCN_MEM_FRACTIONS_MAX 8
#define SCN_BATCH_RULES_MAX 4
#define SCN_BATCH_EXCEPT_MAX 4
/* One of an engine's batch-limit defaults by GPU (`batch_defaults:`): it applies to hardware with
 * at least min_memory bytes whose name contains none of `except` (vLLM's get_batch_defaults). */
typedef struct {
    double min_memory;          /* bytes; 0 = any */
    int n_except;
    char except[SCN_BATCH_EXCEPT_MAX][SCN_NAME_MAX];
    int max_num_seqs;           /* sequences one replica schedules at once */
    int max_num_batched_tokens; /* tokens per step; 0 = the chunked_prefill budget */
} scn_batch_rule;
/* What an engine's memory fraction applies to. TOTAL (vLLM gpu_memory_utilization): the device
 * memory; weights, the profile run's activation peak and non-torch memory come out of it.
 * STATIC (SGLang mem_fraction_static): the memory free at start-up; weights and KV only, the
 * activations and CUDA graphs live in the rest. FREE (TensorRT-LLM
 * kv_cache_free_gpu_memory_fraction): the memory still free after the runtime, weights and
 * activation buffers. DEVICE (vLLM 0.2.5 to 0.3.0): the device memory, out of which comes all
 * the device holds after the profile run (total - free), the CUDA context included. */
typedef enum { SCN_MEM_TOTAL, SCN_MEM_STATIC, SCN_MEM_FREE, SCN_MEM_DEVICE } scn_mem_budget;
/* Where the default memory fraction comes from: the profile's table by TP size (TABLE, the
 * default), or SGLang's reserve rule from 0.5.4 on (SGLANG_RESERVE: the fraction leaves room for
 * an activation and CUDA-graph reserve estimated from the GPU's memory, the chunked-prefill size,
 * the captured batch size and the TP size; docs/cost-model.md, "Memory budget and capacity"). */
typedef enum { SCN_MEM_RULE_TABLE = 0, SCN_MEM_RULE_SGLANG_RESERVE } scn_mem_rule;
/* Prefill rows and decode rows in one step: as the scheduler goes (chunked steps mix, continuous
 * ones prefill alone: vLLM V1 and V0), always (TensorRT-LLM's in-flight batching), or never
 * (SGLang, enable_mixed_chunk off). Zero is the first, so a zeroed profile keeps vLLM's rule. */
typedef enum { SCN_PREFILL_MIX_BY_SCHEDULER = 0, SCN_PREFILL_MIX_ALWAYS, SCN_PREFILL_MIX_NEVER } scn_prefill_mix;

typedef enum { SCN_MOE_KERNEL_KVPLAN = 0, SCN_MOE_KERNEL_TRITON, SCN_MOE_KERNEL_CUTLASS } scn_moe_kernel;
/* The kernel an engine decodes MLA's latent attention with (`mla: {decode: ...}`): `auto` takes it
 * from the attention family (FlashMLA under the FA3-family profile on Hopper), `flashmla`, or FA3's
 * MLA path (`fa3`: SGLang's default MLA backend on Hopper). */
typedef enum { SCN_MLA_DECODE_AUTO = 0, SCN_MLA_DECODE_FLASHMLA, SCN_MLA_DECODE_FA3 } scn_mla_decode;
/* The kernel an engine runs block-scaled fp8 GEMMs with (`block_fp8:`; docs/cost-model.md,
 * "Block-scaled fp8 GEMMs"): NATIVE prices them as per-tensor fp8; TRITON (vLLM's and SGLang's
 * w8a8_block_fp8_matmul) and CUTLASS (the SM90 blockwise kernel) launch one CTA per 64 x 128
 * output block and do not split K; DEEPGEMM (DeepSeek's, and TensorRT-LLM's kernels of its
 * kind) sizes its blocks to the SMs. */
typedef enum { SCN_BF8_NATIVE = 0, SCN_BF8_TRITON, SCN_BF8_CUTLASS, SCN_BF8_DEEPGEMM, SCN_BF8_COUNT } scn_block_fp8;

typedef struct {
    char name[SCN_NAME_MAX];
    char source[SCN_PATH_MAX];
    double step_cpu;            /* s of CPU work per step (scheduling, input prep, sampling, output) */
    double seq_cpu;             /* s of CPU work per scheduled sequence per step */
    double eager_layer;         /* s of host time per model layer of a forward the engine launches
                                 * eagerly from Python (no CUDA graph): the step cannot end before
                                 * its host has launched every layer (kv_host.c) */
    bool async_scheduling;      /* CPU work for step i+1 overlaps the GPU's step i */
    bool extra_decode_step;     /* a finished request runs one more decode step: the next step was
                                 * launched before its stop check (TensorRT-LLM overlap scheduler) */
    bool no_evict;              /* admission reserves every request's blocks to its full length
                                 * (TensorRT-LLM GUARANTEED_NO_EVICT; sim/sched.c) */
    /* SGLang's admission reservation (`admission: {reserve: output, ...}`; sim/sched.c,
     * docs/cost-model.md, "Engine profiles", "Admission"): a request is admitted only when its
     * extend tokens, its own clipped output and a page fit in the free and evictable KV less
     * new_token_ratio x every decoding request's clipped remaining output and what the round
     * already admitted. The ratio starts at adm_init, falls by (adm_init - adm_min) /
     * adm_decay_steps each decode step down to adm_min, is reset on idle and re-estimated from
     * the survivors' progress (adm_retract_steps tokens each ahead) on a decode preemption. */
    bool adm_reserve;
    double adm_init, adm_min;   /* new_token_ratio at start (and after idle), and its floor */
    int adm_decay_steps;        /* decode steps from adm_init to adm_min */
    int adm_clip;               /* tokens: max_new_tokens is counted at most this (CLIP_MAX_NEW_TOKENS) */
    int adm_retract_steps;      /* tokens ahead per survivor in the ratio after a retraction */
    bool async_output;          /* a step's outputs are processed while the next step runs and reach
                                 * the client when it ends (vLLM V0's asynchronous output processor,
                                 * 0.6 to 0.7; docs/cost-model.md, "Engine profiles", "Output one
                                 * step late") */
    bool multi_step;            /* the engine has multi-step scheduling (deployment.scheduler_steps
                                 * > 1: vLLM's V0 engine from 0.6.0, `--num-scheduler-steps`); the
                                 * loader refuses scheduler_steps > 1 on an engine without it */
    bool multi_step_stream;     /* a multi-step run (deployment.scheduler_steps) streams each step's
                                 * tokens (default), or hands the run's tokens over at its end (vLLM
                                 * 0.6.0 to 0.6.2) */
    double kernel_launch;       /* s per kernel launched eagerly */
    bool cuda_graphs;           /* decode-only steps replay a captured graph */
    int n_graph_sizes;          /* captured batch sizes, ascending */
    int graph_sizes[SCN_GRAPH_SIZES_MAX];
    double graph_launch;        /* s to launch one graph */
    double graph_kernel;        /* s between kernels inside a graph */
    bool chunked_prefill;       /* the engine's default scheduler chunks prefills */
    int max_num_batched_tokens; /* its default token budget per step; 0 = the deployment's */
    /* The budget is at least the deployment's max_model_len (`chunked_prefill:
     * {at_least_max_model_len: true}`: vLLM V0 without chunked prefill, max(max_model_len, 2048)). */
    bool budget_covers_context;
    /* vLLM V0 turned chunked prefill on by itself for a model whose max_model_len exceeds
     * `chunk_above_len` tokens (`chunked_prefill: {long_context: {above: 32768,
     * max_num_batched_tokens: 512}}`; 0 = never), with `chunk_long_budget` tokens a step, unless
     * the model has sliding-window layers. scn_engine_chunks applies it. */
    int chunk_above_len;        /* tokens */
    int chunk_long_budget;      /* tokens per step */
    /* An MLA model never chunks and takes the unchunked budget (`chunked_prefill:
     * {unchunked_mla: true}`: vLLM 0.7.1 to 0.7.3, "MLA is enabled; forcing chunked prefill and
     * prefix caching to be disabled"). */
    bool unchunked_mla;
    /* Whether prefill rows share a step with the running sequences' decode tokens
     * (`chunked_prefill: {mixed: ...}`; docs/simulator.md, "Mixed and separate prefill steps"). */
    scn_prefill_mix prefill_mix;
    /* The default batch limits by GPU: the first rule the hardware meets; none = kvplan's own
     * (256 sequences, the budget above). */
    int n_batch_rules;
    scn_batch_rule batch_rules[SCN_BATCH_RULES_MAX];
    scn_allreduce_impl allreduce;
    double oneshot_max;         /* bytes: custom all-reduce runs one-shot up to here (8 GPUs) */
    double custom_max;          /* bytes: and two-shot up to here; NCCL above */
    int allreduce_copies;       /* copy kernels the framework adds to each all-reduce (torch's
                                 * functional all_reduce clones its input) */
    scn_attn_kernel attn_kernel;
    scn_weight_only weight_only;
    bool lm_head_replicated;    /* tensor parallelism leaves the LM head whole on every rank
                                 * (`lm_head: replicated`; gpt-fast), so each reads all of it */
    /* How the engine stores MXFP4 experts on GPUs without fp4 math (`mxfp4: checkpoint|marlin`;
     * docs/cost-model.md, "MXFP4 experts as engines store them"): as the checkpoint has them, or
     * repacked for Marlin with the expert dimensions padded. */
    scn_mxfp4_layout mxfp4_layout;
    /* The sampler's step work (`sampler: {bytes_per_logit, gather}`; docs/cost-model.md,
     * "The sampler in the step"): device-memory bytes per logit of the whole vocabulary per
     * sampled row on every rank (0: kvplan's older rule, the LM head writing its shard's logits
     * in fp32), and whether the ranks all-gather the vocabulary shards first. */
    int sampler_bytes_per_logit;
    bool sampler_gather;
    bool prefix_caching;        /* the engine caches prompt prefixes by default (vLLM V1, SGLang's
                                 * radix cache, TensorRT-LLM's block reuse); read where a workload's
                                 * shared prefix comes from the engine's own chat template */
    scn_block_fp8 block_fp8;
    /* Memory accounting (docs/cost-model.md, "Memory budget and capacity"): what the memory
     * fraction applies to and what the engine takes out of it before sizing the KV cache. */
    bool mem_given;             /* the profile has a memory: section; otherwise kvplan's own rule */
    scn_mem_budget mem_budget;
    double mem_non_torch;       /* bytes per GPU outside PyTorch counted inside the budget (vLLM) */
    /* The profile run's all-reduce buffers that went through torch.distributed stay reserved
     * until the GPU reaches them, and a profiler reading the device's free memory counts them
     * (`memory: {held_allreduce: true}`; docs/cost-model.md, "Memory budget and capacity"). */
    bool mem_held_allreduce;
    scn_mem_rule mem_rule;      /* how the default fraction is found (`memory: {fraction_rule: ...}`) */
    /* The fused-MoE kernel runs at most this many tokens at once, so its per-token working set
     * (each token's k expert outputs) is sized for min(tokens, moe_chunk) in the profile run
     * (`memory: {moe_chunk: 32768}`: vLLM's VLLM_FUSED_MOE_CHUNK_SIZE; 0 = not chunked). */
    int mem_moe_chunk;          /* tokens */
    /* Bytes per logit live at the sampler's peak in the profile run, which samples after the
     * forward pass has freed its activations, so the run peaks at the larger of the two
     * (`memory: {sampler_bytes: 40}`: vLLM V0's top-k/top-p path; docs/cost-model.md, "Memory
     * budget and capacity"). 0: kvplan's 10 B a logit added to the forward pass's peak. */
    int mem_sampler_bytes;
    int n_mem_fraction;         /* default fractions by tensor-parallel size; 0 = the deployment's */
    int mem_fraction_tp[SCN_MEM_FRACTIONS_MAX];     /* ascending: applies from this TP size up */
    double mem_fraction[SCN_MEM_FRACTIONS_MAX];
    /* KV reloads from the offload tiers (`kv_offload: {layerwise: ...}`): loaded layer by layer,
     * overlapping the step's compute (LMCache use_layerwise), or all before the step starts
     * (docs/cost-model.md, "Layerwise reload overlap"). */
    bool kv_layerwise;
    /* How the engine caches an MLA model's keys and values (`mla: {cache: latent|expanded}`;
     * docs/cost-model.md, "MLA as engines cache it"): the compressed latent (vLLM from 0.7.1,
     * SGLang, TensorRT-LLM), or per-head K and V decompressed by kv_b with V padded to the
     * query/key head size (vLLM before 0.7.1, which ran MLA models as ordinary attention). */
    bool mla_expanded;
    /* Whether the engine keeps MLA decode's absorbed products as weights of their own
     * (`mla: {absorbed: materialized}`: W_Q·W_UK and W_UV·W_O per layer beside the raw
     * projections prefill uses, vLLM 0.7.1 to 0.7.3) or applies W_UK and W_UV as separate batched
     * matmuls (`separate`, the default). docs/cost-model.md, "MLA as engines cache it". */
    bool mla_materialized;
    /* The kernel that decodes MLA's latent attention (`mla: {decode: auto|flashmla|fa3}`): its
     * query tile and kernel count on Hopper (docs/cost-model.md, "Attention kernels", MLA). */
    scn_mla_decode mla_decode;
    /* The kernel family of the routed experts' grouped GEMMs (`moe: {kernel: ...}`;
     * docs/cost-model.md, "Fused-MoE kernels"): kvplan's own (none named: the dense GEMM's
     * shape efficiency), Triton's fused_moe (vLLM, SGLang), or CUTLASS grouped GEMMs
     * (TensorRT-LLM), which keep the dense shape efficiency. */
    scn_moe_kernel moe_kernel;
    /* The fused group-limited top-k routing kernels' time per MoE layer (`moe: {grouped_routing:
     * 15 us}`), charged to models whose router picks expert groups first (expert_groups > 1);
     * 0 = routing priced as one kernel boundary like the layer's other small kernels
     * (docs/cost-model.md, "Fused-MoE kernels", routing). */
    double moe_grouped_routing;   /* s per MoE layer */
    /* The serving front end on a request's path to its first token (docs/cost-model.md, "Engine
     * profiles", "Front end"): tokenisation per prompt token, and fixed work per request (HTTP
     * parsing, the hops between the front-end and engine processes, the first token's
     * detokenisation and streaming). Charged to requests that arrive over time (open or closed
     * loop), not to an offline batch handed to the engine in-process. */
    double frontend_request;    /* s per request */
    double frontend_token;      /* s per prompt token */
} scn_engine;
const char *scn_attn_kernel_name(scn_attn_kernel k);
const char *scn_weight_only_name(scn_weight_only w);
const char *scn_block_fp8_name(scn_block_fp8 k);

typedef enum { SCN_ROUTER_ROUND_ROBIN, SCN_ROUTER_LEAST_OUTSTANDING, SCN_ROUTER_PREFIX_AFFINITY } scn_router;
extern const char *const SCN_ROUTER_NAMES[];

/* Prefill/decode disaggregation (deployment.disaggregation; docs/scenarios.md and
 * docs/simulator.md, "Disaggregation"): prompts are computed on a prefill pool, their KV is
 * handed over `link` to a decode pool, which generates the rest. Each pool is its own set of
 * replicas with its own tensor parallelism and hardware. */
typedef struct {
    int replicas;
    int tensor_parallel;
    scn_hardware hardware;         /* the scenario's unless the pool names its own */
} scn_pool;

typedef struct {
    bool on;
    scn_pool prefill, decode;
    scn_link link;                 /* default: the prefill hardware's network */
    double bandwidth;              /* bytes/s per GPU per direction; default: that link's figure in
                                    * the prefill hardware profile */
    double latency;                /* s per message; likewise */
    bool layerwise;                /* each layer's KV is sent as soon as it is computed (default) */
} scn_disagg;

typedef struct {
    int tensor_parallel;
    int replicas;
    scn_router router;             /* how requests are spread over replicas */
    double gpu_memory_utilization; /* fraction of device memory the engine may use */
    bool gpu_memory_utilization_given; /* the scenario set it; otherwise the engine's default applies */
    int max_model_len;             /* tokens; defaults to the model's max_position */
    int max_num_seqs;
    int max_num_batched_tokens;
    /* The scenario set them; otherwise they are its engine's defaults on its hardware (and the
     * planner derives an engine or hardware option's own: plan_enumerate). */
    bool max_num_seqs_given, max_num_batched_tokens_given;
    /* Multi-step scheduling (vLLM 0.6's --num-scheduler-steps; docs/simulator.md, "Multi-step
     * scheduling"): a decode run of this many steps per scheduling decision; 1 = every step. */
    int scheduler_steps;
    /* The engine's bound on waiting requests (SGLang's --max-queued-requests, TensorRT-LLM's
     * ExecutorConfig max_queue_size; vLLM has none): an arrival that finds this many requests
     * waiting on its engine instance (a replica, or one attention-DP rank of it; a prefill
     * instance when disaggregated) is rejected (docs/simulator.md, "Waiting queue bound").
     * 0: not given, unbounded but for the simulator's guard (SIM_MAX_WAITING). */
    int max_queued_requests;
    /* MoE serving DeepSeek-style (docs/cost-model.md, "Expert parallelism and attention data
     * parallelism"): a replica is tensor_parallel x attention_data_parallel GPUs; attention runs
     * on attention_data_parallel ranks of tensor_parallel GPUs, each with its own sequences and
     * KV pool; routed experts are sharded over expert_parallel of the replica's GPUs. */
    int expert_parallel;           /* ranks the routed experts are sharded over; 1 = none */
    int attention_dp;              /* attention data-parallel ranks per replica; 1 = none */
    double expert_skew;            /* Zipf exponent of expert popularity; 0 = uniform routing */
    scn_disagg disagg;             /* prefill/decode disaggregation; off unless given */
} scn_deployment;

/* exponential: the maximum-entropy law on [min, max] with a given mean (a truncated exponential,
 * docs/scenarios.md "Length distributions"), for datasets of which only the mean and the bounds
 * of the clients' filter are published. */
typedef enum { SCN_DIST_FIXED, SCN_DIST_UNIFORM, SCN_DIST_NORMAL, SCN_DIST_LOGNORMAL,
               SCN_DIST_EMPIRICAL, SCN_DIST_EXPONENTIAL } scn_dist_kind;
extern const char *const SCN_DIST_NAMES[];

/* A token-length distribution. */
typedef struct {
    scn_dist_kind kind;
    double mean;        /* tokens (fixed: the value; uniform: (min+max)/2; exponential: the mean
                         * of the truncated law, not of the untruncated one) */
    double sigma;       /* normal: stddev in tokens; lognormal: sigma of the log */
    int min, max;       /* tokens, clamp bounds; max 0 = unbounded */
    char file[SCN_PATH_MAX]; /* empirical: CSV of lengths (and optional weights) */
} scn_dist;

/* Open-loop processes (poisson, gamma, constant, trace) send at times of their own; closed
 * keeps `concurrency` clients each waiting for its reply before sending again (vLLM bench serve
 * --max-concurrency, genai-perf --concurrency); offline has every request waiting at t = 0
 * (MLPerf Offline, vllm bench throughput). */
typedef enum { SCN_ARRIVAL_POISSON, SCN_ARRIVAL_GAMMA, SCN_ARRIVAL_CONSTANT, SCN_ARRIVAL_TRACE,
               SCN_ARRIVAL_CLOSED, SCN_ARRIVAL_OFFLINE } scn_arrival_kind;
extern const char *const SCN_ARRIVAL_NAMES[];

/* True for the processes driven by a request rate (the ones capacity searches may scale). */
static inline bool scn_arrival_has_rate(scn_arrival_kind k)
{
    return k == SCN_ARRIVAL_POISSON || k == SCN_ARRIVAL_GAMMA || k == SCN_ARRIVAL_CONSTANT;
}

typedef struct {
    long requests;
    scn_arrival_kind arrival;
    double rate;                /* requests/s */
    double cv;                  /* gamma: coefficient of variation of inter-arrival times */
    char trace[SCN_PATH_MAX];   /* trace: CSV path */
    scn_dist prompt, output;
    int prefix_groups;          /* shared-prefix groups; 0 = none */
    int prefix_tokens;          /* tokens per shared prefix */
    double prefix_share;        /* fraction of requests that carry a shared prefix */
    double prefix_zipf;         /* Zipf exponent of group popularity; 0 = uniform */
    int turns;                  /* turns per conversation; 1 = single-turn */
    double think_time;          /* s between a reply and the next turn */
    int concurrency;            /* closed: clients, each with one request in flight */
    double client_think_time;   /* closed: s between a client's reply and its next request */
    bool via_server;            /* offline: sent to the server at once (via: server), not handed
                                 * over in-process: the front end prepares them (kv_frontend.c) */
    bool max_tokens_sent;       /* max_tokens: output: the client asks for max_tokens = the
                                 * request's output length, as benchmark clients do, and the engine
                                 * refuses prompt + max_tokens over max_model_len; unset (default):
                                 * the engine generates until the context ends (sim/workload.c, fit) */
    /* The steady-state window the summary metrics cover: requests numbered in creation order
     * are measured when skip_first <= id < total - skip_last. A fraction (frac > 0) stands for
     * that share of the requests; counts and fractions do not mix on one side. */
    long skip_first, skip_last;         /* requests */
    double skip_first_frac, skip_last_frac;
    /* measure.by: time: the window is cut by the run's time instead (docs/simulator.md,
     * "Measurement window by time"): of the span from the first send to the last completion,
     * skip_first_frac is cut from its start and skip_last_frac from its end, and the metrics
     * cover the requests that complete inside what is left (counts are not used). */
    bool measure_by_time;
} scn_workload;

typedef enum { SCN_METRIC_TTFT, SCN_METRIC_TPOT, SCN_METRIC_ITL, SCN_METRIC_E2E,
               SCN_METRIC_COUNT } scn_metric;
extern const char *const SCN_METRIC_NAMES[];

typedef struct {
    scn_metric metric;
    double percentile;   /* 50, 90, 95, 99 */
    double limit;        /* s */
} scn_slo_term;

#define SCN_SLO_MAX 16
typedef struct {
    int n;
    scn_slo_term terms[SCN_SLO_MAX];
} scn_slo;

typedef enum { SCN_LAYOUT_CONTIGUOUS, SCN_LAYOUT_PAGED } scn_layout;
extern const char *const SCN_LAYOUT_NAMES[];
typedef enum { SCN_ATTN_FLASH, SCN_ATTN_NAIVE } scn_attention;
extern const char *const SCN_ATTN_NAMES[];
typedef enum { SCN_SCHED_STATIC, SCN_SCHED_CONTINUOUS, SCN_SCHED_CHUNKED } scn_scheduler;
extern const char *const SCN_SCHED_NAMES[];
/* KV offload (docs/simulator.md, "KV offload tiers"): where evicted prefix-cache blocks go. */
/* The remote store is simulated per replica (each replica has its own share of it), not as one
 * store all replicas read: see docs/simulator.md. */
typedef enum { SCN_OFFLOAD_OFF, SCN_OFFLOAD_CPU, SCN_OFFLOAD_CPU_DISK, SCN_OFFLOAD_CPU_REMOTE,
               SCN_OFFLOAD_CPU_DISK_REMOTE } scn_offload;
extern const char *const SCN_OFFLOAD_NAMES[];
/* Whether choice o spills into the local NVMe tier, and into the remote store. */
bool scn_offload_disk(scn_offload o);
bool scn_offload_remote(scn_offload o);
/* What a running sequence that cannot grow does to its victim: drop its KV and recompute it
 * later (vLLM V1), or copy it to host memory and back (vLLM V0's swap). */
typedef enum { SCN_PREEMPT_RECOMPUTE, SCN_PREEMPT_SWAP } scn_preemption;
extern const char *const SCN_PREEMPT_NAMES[];

/* Speculative decoding (docs/cost-model.md, "Speculative decoding"): a proposer drafts k tokens
 * per sequence, the target verifies k + 1 in one step and keeps the accepted prefix plus one. */
typedef enum { SCN_SPEC_OFF, SCN_SPEC_DRAFT, SCN_SPEC_EAGLE, SCN_SPEC_MTP, SCN_SPEC_NGRAM, SCN_SPEC_COUNT } scn_spec_method;
extern const char *const SCN_SPEC_NAMES[];
#define SCN_SPEC_K_MAX 16
typedef struct {
    scn_spec_method method;
    int k;                          /* draft tokens per verify step */
    double accept[SCN_SPEC_K_MAX];  /* probability draft position i is accepted given 0..i-1 were:
                                     * stated, or acceptance x decay^i (docs/cost-model.md) */
    scn_model draft;                /* method draft: the draft model */
} scn_spec;

#define SCN_OPT_MAX 16
#define SCN_HW_OPT_MAX 8
/* The option space; each list holds at least one entry after loading. */
typedef struct {
    int n_layout;     scn_layout layout[SCN_OPT_MAX];
    int n_block;      int block_size[SCN_OPT_MAX];          /* tokens per block */
    int n_prefix;     bool prefix_cache[SCN_OPT_MAX];
    int n_dtype;      scn_dtype kv_dtype[SCN_OPT_MAX];
    int n_attention;  scn_attention attention[SCN_OPT_MAX];
    int n_sched;      scn_scheduler scheduler[SCN_OPT_MAX];
    bool scheduler_given;   /* listed; otherwise the engine's default (each engine option's own) */
    int n_window;     int sink[SCN_OPT_MAX], window[SCN_OPT_MAX]; /* tokens; window 0 = off */
    scn_quant quant[SCN_DTYPE_COUNT];                        /* per KV dtype */
    /* Deployment choices; empty lists mean the deployment's single value. */
    int n_max_seqs;   int max_num_seqs[SCN_OPT_MAX];
    int n_budget;     int max_num_batched_tokens[SCN_OPT_MAX];
    int n_tp;         int tensor_parallel[SCN_OPT_MAX];
    int n_replicas;   int replicas[SCN_OPT_MAX];
    int n_kv_heads;   int kv_heads[SCN_OPT_MAX];            /* GQA/MQA what-if: needs retraining */
    /* Weight formats and engines; empty lists mean the model's format and the scenario's engine. */
    int n_wformat;    scn_wformat wformat[SCN_OPT_MAX];
    int n_engine;     scn_engine engine[SCN_OPT_MAX];
    int n_hardware;   scn_hardware hardware[SCN_HW_OPT_MAX]; /* hardware profiles to compare; empty: the scenario's */
    int n_spec;       scn_spec spec[SCN_OPT_MAX];           /* speculative decoding; empty or zeroed: off */
    int n_offload;    scn_offload kv_offload[SCN_OPT_MAX];  /* KV offload tiers; default [off] */
    int n_preempt;    scn_preemption preemption[SCN_OPT_MAX]; /* default [recompute] */
    /* Per replica; 0: the hardware's per-GPU figure times tensor_parallel (options.kv_offload_capacity). */
    double offload_cpu_bytes, offload_disk_bytes, offload_remote_bytes;
    double swap_space;                                      /* bytes per GPU for swapped sequences */
    bool disagg_sweep;   /* options.disaggregation lists on: the planner sweeps prefill/decode splits */
} scn_options;

typedef enum { SCN_OBJ_GOODPUT_PER_GPU, SCN_OBJ_THROUGHPUT, SCN_OBJ_P99_LATENCY, SCN_OBJ_COST } scn_objective;
extern const char *const SCN_OBJECTIVE_NAMES[];

/* What the planner may recommend that changes the model's outputs. */
typedef struct {
    bool allow_kv_dtype[SCN_DTYPE_COUNT];   /* quantised KV dtypes accepted */
    bool allow_window;                      /* StreamingLLM sink + window */
    bool allow_gqa;                         /* fewer KV heads than the model has (retraining) */
    bool allow_weight_quant[SCN_WQ_COUNT];  /* quantised weight layouts accepted */
} scn_quality;

typedef struct {
    char name[SCN_NAME_MAX];
    char source[SCN_PATH_MAX];
    scn_model model;
    scn_hardware hardware;
    scn_engine engine;            /* `engine:`, default vllm */
    scn_deployment deployment;
    scn_workload workload;
    scn_slo slo;
    scn_options options;
    scn_objective objective;
    double usd_per_gpu_hour;      /* for objective: cost; 0 when not given */
    scn_quality quality;
    unsigned long long seed;
} scn_scenario;

/* Loads a scenario file, applying `n_sets` overrides of the form "path=value" in order.
 * Returns SCN_OK or fills *err (never partially fills *out on failure). */
scn_status scn_scenario_load(const char *path, const char *const *sets, int n_sets,
                             scn_scenario *out, scn_error *err);

/* ---- Where files live (scn_dirs.c) ---- */
/* The shipped YAML library: $KVPLAN_LIBRARY, else <prefix>/share/kvplan/scenarios beside the
 * installed executable, else the source tree's scenarios/. Fills buf; -1 when none exists (buf
 * still names the build's folder, for messages). */
int scn_library_dir(char *buf, size_t n);
/* The chart libraries for HTML reports (a node_modules folder holding vega, vega-lite and
 * vega-embed): $KVPLAN_ASSETS, else <prefix>/share/kvplan/node_modules, else the source
 * tree's; -1 when none is installed. */
int scn_assets_dir(char *buf, size_t n);
/* The user's data directory for kvplan's output, $XDG_DATA_HOME/kvplan/<sub> or
 * ~/.local/share/kvplan/<sub> (sub may be NULL); -1 when neither variable is usable. The
 * directory may not exist yet. */
int scn_user_dir(const char *sub, char *buf, size_t n);
/* mkdir -p: creates dir and its missing parents; -1 with errno set on failure. */
int scn_mkdirs(const char *dir);

/* Makes `e` the scenario's engine: copies it, and its overheads into the hardware profile unless
 * the profile sets its own (hardware.overhead_given). */
void scn_engine_apply(scn_scenario *s, const scn_engine *e);
/* The memory fraction in force on hardware h: the deployment's when the scenario set it,
 * otherwise the engine's default (its rule on h's memory, or its table for the deployment's
 * tensor-parallel size, e.g. SGLang's mem_fraction_static), otherwise the deployment's default. */
double scn_engine_mem_fraction(const scn_engine *e, const scn_deployment *d, const scn_hardware *h);
/* The engine's default max_num_seqs and max_num_batched_tokens on hardware h: the first of its
 * batch_defaults that h meets; when none does, 256 sequences and the engine's chunked-prefill
 * budget (8192 tokens when it gives none). */
void scn_engine_batch_defaults(const scn_engine *e, const scn_hardware *h, int *max_num_seqs, int *max_num_batched_tokens);
/* Whether the scenario's engine chunks prefills for this model and max_model_len (its
 * chunked_prefill default, long_context and unchunked_mla rules), and the token budget that
 * goes with it: `budget` is the deployment's current default, returned unchanged when
 * `budget_given` (the scenario set max_num_batched_tokens), else the long-context budget when
 * chunking for a long context, else at least max_model_len when not chunking and the profile
 * says at_least_max_model_len. Under multi-step scheduling (`multi_step`) a long context does not
 * split prompts (vLLM's SchedulerConfig, "Multi-step Chunked-Prefill doesn't allow
 * prompt-chunking for now": max(max_model_len, 2048)), which kvplan runs unchunked.
 * docs/cost-model.md, "Engine profiles", "vLLM V0 batch defaults". */
bool scn_engine_chunks(const scn_engine *e, const scn_model *m, int max_model_len, bool multi_step, bool budget_given,
                       int *budget);
/* The device memory the CUDA runtime reports and the engines see: memory - memory_reserved. */
double scn_hw_cuda_memory(const scn_hardware *h);


/* ---- Units (scn_units.c) ---- */
typedef enum { SCN_UNIT_BYTES, SCN_UNIT_BANDWIDTH, SCN_UNIT_COMPUTE, SCN_UNIT_TIME,
               SCN_UNIT_RATE, SCN_UNIT_FRACTION } scn_unit_kind;

/* Parses "80 GiB", "3.35 TB/s", "50 ms", "8/s", "90%" into SI base units (bytes, bytes/s,
 * ops/s, s, 1/s, fraction). A bare number is an error except for SCN_UNIT_FRACTION.
 * On failure writes a message naming what was expected into msg and returns -1. */
int scn_quantity_parse(const char *text, scn_unit_kind kind, double *out, char *msg, size_t n);
const char *scn_unit_kind_name(scn_unit_kind kind);

/* Edit distance, for "did you mean". */
int scn_edit_distance(const char *a, const char *b);

#endif
