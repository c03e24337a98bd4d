/* plan_moe.c: the recommendation's sentence on expert parallelism and attention data
 * parallelism: one DP rank's decode step split into attention, the busiest expert rank and the
 * all-to-all (model/kv_moe_parallel.h; docs/cost-model.md). */
#include "plan.h"
#include "../model/kv_moe_parallel.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

int plan_moe_explain(const scn_scenario *s, const plan_result *r, char *line, size_t n)
{
    if (r->best < 0) return 0;
    const plan_cand *b = &r->c[r->best];
    scn_scenario *t = malloc(sizeof *t);
    if (!t) return 0;
    plan_apply(s, b, t);
    if (!kv_moe_parallel_on(t)) { free(t); return 0; }
    kv_cache_cfg kc = kv_cache_cfg_make(t, b->c.kv_dtype, b->c.sink, b->c.window);
    int batch = (int)lround(b->m.batch_mean < 1 ? 1 : b->m.batch_mean);
    if (batch > 4096) batch = 4096;
    long ctx = lround(s->workload.prompt.mean + s->workload.prefix_tokens * s->workload.prefix_share +
                      s->workload.output.mean / 2);
    kv_seq_work *w = malloc(sizeof *w * (size_t)batch);
    if (!w) { free(t); return 0; }
    for (int i = 0; i < batch; i++) w[i] = (kv_seq_work){1, ctx};
    kv_moe_step st = kv_moe_step_time(t, &kc, b->c.attention, w, batch);
    kv_moe_memory mm = kv_moe_memory_compute(t, &kc);
    snprintf(line, n, "Expert parallelism (EP %d, attention DP %d x TP %d): a DP rank's decode step of %d sequences at %ld "
             "tokens of context takes %.2f ms: attention and the rest %.2f ms, routed experts on the busiest rank "
             "(%.1f %% of the assignments) %.2f ms, all-to-all %.2f ms (%.0f %% of the step, %.0f MiB sent per GPU); "
             "KV is %.1f KiB per token per DP rank, weights %.1f GiB per GPU (%.1f GiB routed experts).",
             kv_moe_ep(t), kv_moe_dp(t), t->deployment.tensor_parallel, batch, ctx, st.seconds * 1e3,
             st.attention * 1e3, 100 * st.busiest_share, st.experts * 1e3, st.alltoall * 1e3,
             st.seconds > 0 ? 100 * st.alltoall / st.seconds : 0, st.alltoall_bytes / 1048576.0,
             mm.kv_bytes_per_token / 1024.0, mm.weights / 1073741824.0, mm.expert_weights / 1073741824.0);
    free(w);
    free(t);
    return 1;
}
