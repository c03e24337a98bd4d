/* plan_trtbench.h: the batch limits `trtllm-bench build --dataset` gives the engine it builds
 * (its tuning heuristic, tensorrt_llm/bench/build/tuning.py calc_engine_setting and
 * finetune_setting): a maximum batch size near the number of requests whose whole sequences the
 * KV cache holds, and a token budget to match. docs/cost-model.md, "Engine profiles",
 * "trtllm-bench's engine build", derives it; docs/sources.md names the source. */
#ifndef KVPLAN_PLAN_TRTBENCH_H
#define KVPLAN_PLAN_TRTBENCH_H

#include "../loader/scn.h"

typedef struct {
    double kv_requests;   /* whole requests (input + output tokens) the heuristic's KV estimate holds */
    int max_batch_size;   /* sequences */
    int max_num_tokens;   /* tokens per step */
} plan_trtbench_limits;

/* The limits for a dataset of mean input `isl` and mean output `osl` tokens (both >= 1), on the
 * scenario's model, hardware and tensor-parallel size, with weights of `weight_bytes` (1 for an
 * FP8 build, else 2) and KV elements of `kv_bytes`. 0 on success; -1 when the heuristic itself
 * refuses (the weights exceed the GPUs' memory, or not one request fits). */
int plan_trtbench_limits_compute(const scn_scenario *s, double isl, double osl, double weight_bytes, double kv_bytes,
                                 plan_trtbench_limits *out);

/* The heuristic's rounding alone (finetune_setting): from the requests the KV estimate holds,
 * the mean input and output lengths and the pipeline stages. */
plan_trtbench_limits plan_trtbench_finetune(double kv_requests, double isl, double osl, int pp);

#endif
