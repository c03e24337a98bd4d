/* cli_spec.c: the speculative-decoding sections `memory` and `cost` print when the scenario's
 * first options.speculative entry is on (docs/cost-model.md, "Speculative decoding"). */
#include "cli.h"
#include "cli_spec.h"
#include "../model/kv_spec.h"

#include <stdio.h>
#include <stdlib.h>

static void name_spec(const scn_spec *sp, char *buf, size_t n)
{
    if (sp->method == SCN_SPEC_DRAFT) snprintf(buf, n, "draft (%s)", sp->draft.name);
    else snprintf(buf, n, "%s", SCN_SPEC_NAMES[sp->method]);
}

void cli_spec_label(const scn_scenario *s, int index, char *buf, size_t n)
{
    const scn_spec *sp = kv_spec_get(s, index);
    if (!sp) { if (n) buf[0] = 0; return; }
    if (sp->method == SCN_SPEC_DRAFT) snprintf(buf, n, "draft(%.24s) k=%d a=%.2f", sp->draft.name, sp->k, sp->accept[0]);
    else snprintf(buf, n, "%s k=%d a=%.2f", SCN_SPEC_NAMES[sp->method], sp->k, sp->accept[0]);
}

/* The first options.speculative entry that is on (its index in *idx), or NULL: a list that
 * starts with `off` is still priced, and the section says which entry it shows. */
static const scn_spec *first_on(const scn_scenario *s, int *idx)
{
    int n = s->options.n_spec > 0 ? s->options.n_spec : 1;
    for (int i = 0; i < n && i < SCN_OPT_MAX; i++) {
        const scn_spec *sp = kv_spec_get(s, i);
        if (sp) { *idx = i; return sp; }
    }
    return NULL;
}

static void section(out_doc *d, const scn_spec *sp, int idx)
{
    char nm[96], title[160];
    name_spec(sp, nm, sizeof nm);
    if (idx == 0) snprintf(title, sizeof title, "Speculative decoding (first options.speculative entry)");
    else snprintf(title, sizeof title, "Speculative decoding (options.speculative[%d], the first entry that is on)", idx);
    out_section(d, "speculative", title);
    out_kv_str(d, "method", "method", nm);
    out_kv_num(d, "spec_index", "options.speculative entry", idx, OUT_INT);
}

void cli_spec_memory(out_doc *d, const scn_scenario *s, const kv_cache_cfg *c, int block_size)
{
    int idx = 0;
    const scn_spec *sp = first_on(s, &idx);
    if (!sp) return;
    kv_pool base = kv_pool_size(s, c, true, block_size);
    kv_pool with = kv_spec_pool_size(s, c, true, block_size, sp);
    section(d, sp, idx);
    out_kv_num(d, "k", "drafts per verify step", sp->k, OUT_INT);
    out_kv_num(d, "proposer_weight_bytes", "proposer weights", kv_spec_weight_bytes(s, sp), OUT_BYTES);
    out_kv_num(d, "proposer_kv_bytes_per_token", "proposer KV/token", kv_spec_kv_bytes_per_token(s, c, sp), OUT_BYTES);
    out_kv_num(d, "blocks_without", "paged blocks without it", (double)base.blocks, OUT_INT);
    out_kv_num(d, "blocks_with", "paged blocks with it", (double)with.blocks, OUT_INT);
}

void cli_spec_cost(out_doc *d, const scn_scenario *s, const kv_cache_cfg *c, scn_attention attn, long batch,
                   long context)
{
    int idx = 0;
    const scn_spec *sp = first_on(s, &idx);
    if (!sp || batch < 1) return;
    kv_seq_work *w = malloc(sizeof *w * (size_t)batch * 2);
    int *dr = malloc(sizeof *dr * (size_t)batch);
    scn_scenario *ps = malloc(sizeof *ps);
    if (!w || !dr || !ps) { free(w); free(dr); free(ps); return; }
    bool has = kv_spec_proposer_scenario(s, sp, ps);
    for (long i = 0; i < batch; i++) { w[i] = (kv_seq_work){sp->k + 1, context}; dr[i] = sp->k; }
    kv_spec_step st = kv_spec_step_time(s, has ? ps : NULL, sp, c, attn, w, dr, (int)batch, w + batch);
    kv_spec_compare k = kv_spec_compare_at(s, sp, c, attn, (int)batch, context);
    int maxb = s->deployment.max_num_seqs;
    kv_spec_wins wr = kv_spec_win_ranges(s, sp, c, attn, context, maxb);
    char ranges[512];
    kv_spec_ranges_text(&wr, ranges, sizeof ranges);
    section(d, sp, idx);
    out_kv_num(d, "k", "drafts per verify step", sp->k, OUT_INT);
    out_kv_num(d, "expected_tokens", "expected tokens per verify step", k.expected, OUT_NUM);
    out_kv_num(d, "verify_seconds", "verify step (k+1 rows per sequence)", st.verify_seconds, OUT_SECONDS);
    out_kv_str(d, "verify_bound", kv_moe_parallel_on(s) ? "verify bound (unsplit step)" : "verify bound",
               kv_bound_name(st.verify.bound));
    out_kv_num(d, "draft_seconds", "proposer passes", st.draft_seconds, OUT_SECONDS);
    out_kv_num(d, "proposer_cpu_seconds", "proposer CPU (n-gram)", st.proposer_cpu, OUT_SECONDS);
    out_kv_num(d, "spec_step_seconds", "speculative step", st.seconds, OUT_SECONDS);
    out_kv_num(d, "plain_seconds_per_token", "plain decode per token", k.plain_token, OUT_SECONDS);
    out_kv_num(d, "spec_seconds_per_token", "speculative per token", k.spec_token, OUT_SECONDS);
    out_kv_str(d, "pays_at_batches", "pays at decode batches", ranges);
    out_kv_num(d, "crossings", "crossings (sign changes)", wr.n_cross, OUT_INT);
    /* The first sign change of the per-token comparison; with none in 1..max_num_seqs there is
     * no batch to name (kv_spec_crossover's max_batch + 1 is not a batch the engine runs). */
    if (wr.n_cross > 0) {
        out_kv_num(d, "crossover_batch", "first crossover batch", (double)wr.x[0].batch, OUT_INT);
    } else {
        char none[64];
        snprintf(none, sizeof none, "none up to max_num_seqs (%d)", maxb);
        out_kv_str(d, "crossover_batch", "first crossover batch", none);
    }
    char why[1024];
    kv_spec_crossings_text(&wr, sp->k, 6, why, sizeof why);
    if (wr.n == 0)
        out_note(d, "Speculation loses at every batch up to max_num_seqs (%d) at %ld tokens of context: the proposer costs "
                    "more than the weight reads it saves.", maxb, context);
    else
        out_note(d, "Speculation beats plain decode per token at decode batches %s (of 1..%d, at %ld tokens of context)%s%s.",
                 ranges, maxb, context, wr.n_cross ? ": " : "", why);
    free(w);
    free(dr);
    free(ps);
}
