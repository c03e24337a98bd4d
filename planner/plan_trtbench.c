/* plan_trtbench.c: trtllm-bench's engine-build heuristic (see plan_trtbench.h). The quantities
 * are the tool's own estimate, not kvplan's memory model: it counts every parameter at the build's
 * bytes per element, the whole device memory as free, and the KV of every layer (no window). */
#include "plan_trtbench.h"
#include "../model/kv_model.h"

#include <math.h>

plan_trtbench_limits plan_trtbench_finetune(double kv_requests, double isl, double osl, int pp)
{
    plan_trtbench_limits l = {.kv_requests = kv_requests};
    if (pp < 1) pp = 1;
    /* The batch is capped at 4096 (decoder buffers) and the tokens at 32768 (activations). */
    double bs = fmin(kv_requests, 4096) / pp;
    double tok = fmin(bs * (1 + isl / osl), 32768);
    /* Rounded up ("slightly optimistic"): to 32 with a floor of 64 below 256, to 128 below 1024,
     * else to 256; the tokens to 256 with a floor of 2048 below 4096, to 512 below 8192, else
     * to 1024. */
    l.max_batch_size = bs < 256 ? (int)fmax(64, 32 * ceil(bs / 32)) : bs < 1024 ? (int)(128 * ceil(bs / 128))
                                                                               : (int)(256 * ceil(bs / 256));
    l.max_num_tokens = tok < 4096 ? (int)fmax(2048, 256 * ceil(tok / 256)) : tok < 8192 ? (int)(512 * ceil(tok / 512))
                                                                                         : (int)(1024 * ceil(tok / 1024));
    return l;
}

int plan_trtbench_limits_compute(const scn_scenario *s, double isl, double osl, double weight_bytes, double kv_bytes,
                                 plan_trtbench_limits *out)
{
    const scn_model *m = &s->model;
    int tp = s->deployment.tensor_parallel > 0 ? s->deployment.tensor_parallel : 1;
    const double GiB = 1024.0 * 1024.0 * 1024.0;
    /* KV bytes per token of the whole TP group, in GiB: every layer, at least one KV head per rank. */
    int heads = m->kv_heads > tp ? m->kv_heads : tp;
    double per_token = 2.0 * m->layers * heads * m->head_dim * kv_bytes / GiB;
    /* The engine's size: every parameter at the build's bytes per element, in GiB, against the
     * device memory NVML reports, in GiB, times the GPUs. */
    double engine = kv_weights_compute(m, 1).params_total * weight_bytes / GiB;
    double total = s->hardware.memory / GiB * tp;
    double kv_memory = (total - engine) * 0.95;   /* calc_engine_setting's default fraction */
    if (total < engine || per_token <= 0) return -1;
    double requests = kv_memory / per_token / (isl + osl);
    if (requests < 1) return -1;
    *out = plan_trtbench_finetune(requests, isl, osl, 1);
    return 0;
}
