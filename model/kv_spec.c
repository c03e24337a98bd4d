/* kv_spec.c: speculative decoding's costs (kv_spec.h; docs/cost-model.md, "Speculative
 * decoding"). */
#include "kv_spec.h"
#include "kv_moe_parallel.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LOGIT_BYTES 4.0   /* logits are materialised in fp32 for sampling (kv_capacity.c) */

const scn_spec *kv_spec_get(const scn_scenario *s, int index)
{
    if (index < 0 || index >= SCN_OPT_MAX) return NULL;
    if (s->options.n_spec == 0 && index > 0) return NULL;
    const scn_spec *sp = &s->options.spec[index];
    return sp->method == SCN_SPEC_OFF || sp->k < 1 ? NULL : sp;
}

double kv_spec_expected_tokens(const scn_spec *sp, int k)
{
    double e = 1, p = 1;
    for (int i = 0; i < k && i < SCN_SPEC_K_MAX; i++) {
        p *= sp->accept[i];
        e += p;
    }
    return e;
}

bool kv_spec_proposer_model(const scn_scenario *s, const scn_spec *sp, scn_model *out)
{
    const scn_model *t = &s->model;
    switch (sp->method) {
    case SCN_SPEC_DRAFT:
        *out = sp->draft;
        return true;
    case SCN_SPEC_EAGLE:
        /* One decoder layer in the target's attention shape with a dense MLP (an MoE target's
         * head uses one expert's width when the model has no dense width). */
        *out = *t;
        out->layers = 1;
        out->sliding_layers = 0;
        out->dense_layers = 0;
        if (t->experts > 0) {
            out->intermediate = t->intermediate > 0 ? t->intermediate : t->moe_intermediate;
            out->experts = out->experts_per_token = out->shared_experts = 0;
        }
        return true;
    case SCN_SPEC_MTP:
        /* DeepSeek-V3's MTP module: one transformer block like the target's (MLA + MoE). */
        *out = *t;
        out->layers = 1;
        out->sliding_layers = 0;
        if (t->experts > 0) out->dense_layers = 0;
        return true;
    default:
        return false;
    }
}

bool kv_spec_proposer_scenario(const scn_scenario *s, const scn_spec *sp, scn_scenario *out)
{
    scn_model m;
    if (!kv_spec_proposer_model(s, sp, &m)) return false;
    *out = *s;
    out->model = m;
    return true;
}

double kv_spec_weight_bytes(const scn_scenario *s, const scn_spec *sp)
{
    scn_model m;
    if (!sp || !kv_spec_proposer_model(s, sp, &m)) return 0;
    int tp = s->deployment.tensor_parallel < 1 ? 1 : s->deployment.tensor_parallel;
    kv_weights w = kv_weights_compute(&m, tp);
    /* Under expert parallelism an MTP layer's routed experts are sharded like the target's
     * (kv_moe_weight_bytes); a dense proposer is whole on every GPU of a DP rank. */
    double all = kv_moe_weight_bytes(s, &m);
    if (sp->method == SCN_SPEC_DRAFT) return all;
    /* Heads share the target's embedding and LM head: their layer plus the fc that fuses the
     * token embedding with the target's hidden state (2h -> h). */
    double layer = all - w.params_embedding * w.bytes_per_other / tp;
    return layer + 2.0 * m.hidden * (double)m.hidden * w.bytes_per_linear / tp;
}

double kv_spec_kv_bytes_per_token(const scn_scenario *s, const kv_cache_cfg *c, const scn_spec *sp)
{
    scn_model m;
    if (!sp || !kv_spec_proposer_model(s, sp, &m)) return 0;
    return kv_bytes_per_token_layer_rank(&m, c, s->deployment.tensor_parallel) * m.layers;
}

kv_pool kv_spec_pool_size(const scn_scenario *s, const kv_cache_cfg *c, bool paged, int block_size,
                          const scn_spec *sp)
{
    if (!sp) return kv_pool_size(s, c, paged, block_size);
    int bs = paged ? block_size : 1;
    kv_capacity k = kv_capacity_spec(s, c, bs, 0, sp);
    kv_pool p = {.blocks = paged ? k.capacity_blocks : k.capacity_tokens, .block_size = bs, .kv_budget = k.kv_budget};
    if (p.blocks < 0) p.blocks = 0;
    return p;
}

/* The proposer's device time over `n` rows (no engine CPU: drafting runs inside the step). An
 * MoE proposer (DeepSeek's MTP layer) under expert parallelism runs as the target does: its
 * experts over the EP ranks, joined by the all-to-all (kv_moe_step_time). */
static double proposer_pass(const scn_scenario *ps, const kv_cache_cfg *c, scn_attention attn,
                            const kv_seq_work *w, int n)
{
    if (n <= 0) return 0;
    if (kv_moe_parallel_on(ps)) {
        kv_moe_step st = kv_moe_step_time(ps, c, attn, w, n);
        return st.seconds - st.engine_seconds;
    }
    return kv_step_time(ps, c, attn, w, n).gpu_seconds;
}

kv_spec_step kv_spec_step_time(const scn_scenario *s, const scn_scenario *ps, const scn_spec *sp,
                               const kv_cache_cfg *c, scn_attention attn, const kv_seq_work *seqs,
                               const int *drafts, int n, kv_seq_work *scratch)
{
    kv_spec_step r;
    memset(&r, 0, sizeof r);
    r.verify = kv_step_time_verify(s, c, attn, seqs, drafts, n);
    r.verify_seconds = r.verify.seconds;
    if (kv_moe_parallel_on(s)) {
        /* One attention-DP rank's verify with the experts over the EP ranks (kv_moe_parallel.h). */
        r.moe = kv_moe_step_time_verify(s, c, attn, seqs, drafts, n);
        r.verify_seconds = r.moe.seconds;
    }
    int nv = 0, max_draft = 0;
    for (int i = 0; i < n; i++)
        if (drafts[i] > 0) {
            nv++;
            if (drafts[i] > max_draft) max_draft = drafts[i];
        }
    if (sp->method == SCN_SPEC_NGRAM) {
        /* A prompt lookup per verifying sequence on the CPU, priced as one more scheduled
         * sequence of the engine's per-sequence CPU work. */
        r.proposer_cpu = s->engine.seq_cpu * nv;
    } else if (ps) {
        /* Prefill chunks: the proposer builds its own KV (or features) for the same tokens. */
        int m = 0;
        for (int i = 0; i < n; i++)
            if (drafts[i] <= 0 && seqs[i].new_tokens > 0) scratch[m++] = seqs[i];
        r.draft_seconds += proposer_pass(ps, c, attn, scratch, m);
        /* Drafting: step j proposes token j + 1 for every sequence with more than j drafts. */
        for (int j = 0; j < max_draft; j++) {
            m = 0;
            for (int i = 0; i < n; i++)
                if (drafts[i] > j) scratch[m++] = (kv_seq_work){1, seqs[i].context + j};
            r.draft_seconds += proposer_pass(ps, c, attn, scratch, m);
        }
        if (sp->method != SCN_SPEC_DRAFT && max_draft > 0) {
            /* The heads' 2h -> h input projection, read once per drafting pass. */
            const scn_model *t = &s->model;
            double bw = s->hardware.memory_bandwidth * s->hardware.eff_bandwidth;
            double fc = 2.0 * t->hidden * (double)t->hidden * kv_weight_bytes_per_param(t) /
                        (s->deployment.tensor_parallel < 1 ? 1 : s->deployment.tensor_parallel);
            r.draft_seconds += bw > 0 ? max_draft * fc / bw : 0;
        }
    }
    r.seconds = r.verify_seconds + r.draft_seconds + r.proposer_cpu;
    return r;
}

kv_spec_compare kv_spec_compare_at(const scn_scenario *s, const scn_spec *sp, const kv_cache_cfg *c,
                                   scn_attention attn, int batch, long context)
{
    kv_spec_compare out = {0};
    if (batch < 1) batch = 1;
    kv_seq_work *w = malloc(sizeof *w * (size_t)batch * 2);
    int *d = malloc(sizeof *d * (size_t)batch);
    scn_scenario *ps = malloc(sizeof *ps);
    if (!w || !d || !ps) { free(w); free(d); free(ps); return out; }
    bool has_ps = kv_spec_proposer_scenario(s, sp, ps);
    for (int i = 0; i < batch; i++) w[i] = (kv_seq_work){1, context};
    kv_step_cost plain = kv_step_time(s, c, attn, w, batch);
    out.plain_graph = plain.graph;
    out.plain_token = (kv_moe_parallel_on(s) ? kv_moe_step_time(s, c, attn, w, batch).seconds : plain.seconds) / batch;
    for (int i = 0; i < batch; i++) { w[i] = (kv_seq_work){sp->k + 1, context}; d[i] = sp->k; }
    kv_spec_step st = kv_spec_step_time(s, has_ps ? ps : NULL, sp, c, attn, w, d, batch, w + batch);
    out.spec_graph = st.verify.graph;
    out.verify_rows = (long)(sp->k + 1) * batch;
    out.expected = kv_spec_expected_tokens(sp, sp->k);
    out.spec_token = st.seconds / (batch * out.expected);
    free(w);
    free(d);
    free(ps);
    return out;
}

kv_spec_wins kv_spec_win_ranges(const scn_scenario *s, const scn_spec *sp, const kv_cache_cfg *c,
                                scn_attention attn, long context, int max_batch)
{
    kv_spec_wins w;
    memset(&w, 0, sizeof w);
    if (max_batch < 1) max_batch = 1;
    w.max_batch = max_batch;
    /* Every batch, not a bisection: the sign may change more than once. */
    kv_spec_compare prev = {0};
    bool was = false;
    for (int b = 1; b <= max_batch; b++) {
        kv_spec_compare k = kv_spec_compare_at(s, sp, c, attn, b, context);
        bool win = k.spec_token < k.plain_token;
        if (b > 1 && win != was && w.n_cross < 2 * KV_SPEC_RANGES_MAX) {
            kv_spec_crossing *x = &w.x[w.n_cross++];
            x->batch = b;
            x->wins = win;
            x->verify_rows = k.verify_rows;
            x->spec_graph = k.spec_graph;
            x->plain_graph = k.plain_graph;
            x->why = prev.spec_graph && !k.spec_graph   ? KV_SPEC_WHY_GRAPH_LOST
                     : prev.plain_graph && !k.plain_graph ? KV_SPEC_WHY_GRAPH_PLAIN
                     : win                                ? KV_SPEC_WHY_TILE
                     : KV_SPEC_WHY_COMPUTE;
        }
        if (win && (b == 1 || !was)) {
            if (w.n < KV_SPEC_RANGES_MAX) w.r[w.n++] = (kv_spec_range){b, b};
            else w.truncated = true;
        }
        if (win && w.n > 0 && !w.truncated) w.r[w.n - 1].hi = b;
        was = win;
        prev = k;
    }
    return w;
}

void kv_spec_ranges_text(const kv_spec_wins *w, char *buf, size_t n)
{
    if (n == 0) return;
    buf[0] = 0;
    if (w->n == 0) { snprintf(buf, n, "none"); return; }
    size_t used = 0;
    for (int i = 0; i < w->n && used < n; i++) {
        int len = w->r[i].lo == w->r[i].hi ? snprintf(buf + used, n - used, "%s%d", i ? ", " : "", w->r[i].lo)
                                           : snprintf(buf + used, n - used, "%s%d-%d", i ? ", " : "", w->r[i].lo, w->r[i].hi);
        if (len < 0) return;
        used += (size_t)len;
    }
    if (w->truncated && used < n) snprintf(buf + used, n - used, ", ...");
}

void kv_spec_crossings_text(const kv_spec_wins *w, int k, int max_listed, char *buf, size_t n)
{
    if (n == 0) return;
    buf[0] = 0;
    size_t used = 0;
    for (int i = 0; i < w->n_cross && used < n; i++) {
        if (i == max_listed) {
            int len = snprintf(buf + used, n - used, "; %d more crossing%s", w->n_cross - i, w->n_cross - i > 1 ? "s" : "");
            if (len > 0) used += (size_t)len;
            break;
        }
        const kv_spec_crossing *x = &w->x[i];
        const char *what;
        switch (x->why) {
        case KV_SPEC_WHY_GRAPH_LOST: what = "the verify step's rows pass the largest CUDA-graph capture size, so it launches eagerly"; break;
        case KV_SPEC_WHY_GRAPH_PLAIN: what = "the plain step passes the largest CUDA-graph capture size too"; break;
        case KV_SPEC_WHY_TILE: what = "a GEMM tile or wave step favours the verify rows"; break;
        default:
            what = !x->spec_graph && x->plain_graph
                       ? "the verify step already launches eagerly (its rows exceed the largest CUDA-graph capture size, "
                         "plain decode's do not) and its extra compute or a GEMM tile step tips the balance"
                       : "the verify rows' extra compute (or a GEMM tile step) outweighs the weight reads saved";
            break;
        }
        int len = snprintf(buf + used, n - used, "%sat %d it %s ((k+1) x batch = %d x %d = %ld rows: %s)",
                           i ? "; " : "", x->batch, x->wins ? "pays again" : "stops paying", k + 1, x->batch,
                           x->verify_rows, what);
        if (len < 0) return;
        used += (size_t)len;
    }
}

bool kv_spec_wins_at(const kv_spec_wins *w, int batch)
{
    for (int i = 0; i < w->n; i++)
        if (batch >= w->r[i].lo && batch <= w->r[i].hi) return true;
    return false;
}

int kv_spec_crossover(const scn_scenario *s, const scn_spec *sp, const kv_cache_cfg *c, scn_attention attn,
                      long context, int max_batch)
{
    if (max_batch < 1) max_batch = 1;
    kv_spec_wins w = kv_spec_win_ranges(s, sp, c, attn, context, max_batch);
    if (w.n == 0 || w.r[0].lo != 1) return 0;
    return w.r[0].hi + 1;
}
