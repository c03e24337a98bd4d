/* test_attn_kernels.c: attention priced as its kernels run it (docs/cost-model.md, "Attention
 * kernels"): decode tiles padded to the kernel's M, checked against hand arithmetic and against
 * our own H200 measurements (validation/h200-2026-11-30/attn.csv, attn-tiles.csv, step.csv); prefill tile
 * efficiency against a plain list-scheduling reference, the same H200 rows and the FA3 paper's
 * published curves. */
#include "tests.h"
#include "../model/kv_model.h"
#include "../model/kv_mla.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

static scn_scenario s;

static void load(const char *model, const char *hardware, const char *engine)
{
    t_library_engine(model, hardware, engine, &s);
}

/* The rows each family's decode kernel computes, from the sources docs/sources.md names. */
START_TEST(decode_tile_rows_follow_each_kernel)
{
    load("llama-3-8b", "h200", "bare");
    kv_cache_cfg bf = kv_cache_cfg_make(&s, SCN_DTYPE_BF16, 0, 0), f8 = kv_cache_cfg_make(&s, SCN_DTYPE_FP8, 0, 0);
    scn_hardware *hw = &s.hardware;
    scn_engine *e = &s.engine;
    /* FA2 (sdpa, flash2): group folded into the rows; the one-pass kernel's M = 128, the
     * split-KV kernel's 64; rows beyond a tile take whole tiles. A paged cache (flash2, the
     * serving engines') always runs the split-KV kernel. */
    e->attn_kernel = SCN_AK_SDPA;
    ck_assert_double_eq(kv_decode_tile_rows(hw, e, &bf, 4, 128, 4, false), 128);
    ck_assert_double_eq(kv_decode_tile_rows(hw, e, &bf, 4, 128, 4, true), 64);
    ck_assert_double_eq(kv_decode_tile_rows(hw, e, &bf, 130, 128, 4, false), 256);
    e->attn_kernel = SCN_AK_FLASH2;
    ck_assert_double_eq(kv_decode_tile_rows(hw, e, &bf, 4, 128, 4, false), 64);
    e->attn_kernel = SCN_AK_SDPA;
    ck_assert_double_eq(kv_decode_tile_rows(hw, e, &bf, 8, 256, 8, false), 64);   /* H100-class, d 256: 64 x 64 */
    /* FA3 PackGQA on Hopper: tile_size_fwd_sm90's M, 128 for d 128, 192 for d 64. */
    e->attn_kernel = SCN_AK_FLASH3;
    ck_assert_double_eq(kv_decode_tile_rows(hw, e, &bf, 4, 128, 4, false), 128);
    ck_assert_double_eq(kv_decode_tile_rows(hw, e, &bf, 8, 64, 8, true), 192);
    /* FlashInfer under SGLang: CUDA cores (no padding) for a group of 4 in 16 bits; tensor
     * cores for a group above 4 or an fp8 cache, FA2DetermineCtaTileQ's 16 / 64 / 128. */
    e->attn_kernel = SCN_AK_FLASHINFER;
    ck_assert_double_eq(kv_decode_tile_rows(hw, e, &bf, 4, 128, 4, false), 4);
    ck_assert_double_eq(kv_decode_tile_rows(hw, e, &f8, 4, 128, 4, false), 16);
    ck_assert_double_eq(kv_decode_tile_rows(hw, e, &bf, 8, 128, 8, false), 16);
    ck_assert_double_eq(kv_decode_tile_rows(hw, e, &bf, 40, 128, 8, false), 64);   /* verify: 8 heads x 5 tokens */
    ck_assert_double_eq(kv_decode_tile_rows(hw, e, &bf, 80, 128, 8, false), 128);
    /* XQA: the group in the MMA's N, 8 on Hopper; MHA runs the CUDA-core masked MHA. */
    e->attn_kernel = SCN_AK_TRTLLM;
    ck_assert_double_eq(kv_decode_tile_rows(hw, e, &bf, 4, 128, 4, false), 8);
    ck_assert_double_eq(kv_decode_tile_rows(hw, e, &bf, 1, 128, 1, false), 1);
    /* A calibrated or given attention figure already holds the padding: none is added. */
    hw->attention_given = true;
    ck_assert_double_eq(kv_decode_tile_rows(hw, e, &bf, 4, 128, 4, false), 4);
    hw->attention_given = false;
    /* kvplan's own backend decodes on CUDA cores (backend/cuda/attn_decode.cu): no padding,
     * and its prefill keeps the flat family figure. */
    load("llama-3-8b", "h200", "kvplan");
    ck_assert_int_eq(s.engine.attn_kernel, SCN_AK_KVPLAN);
    ck_assert_double_eq(kv_decode_tile_rows(&s.hardware, &s.engine, &bf, 4, 128, 4, false), 4);
    ck_assert(!kv_attention_family_applies(&s.hardware, &s.engine));
    /* Ampere: XQA's HMMA kernel pads to 16; vLLM's flash3 profile runs FA2 there (paged). */
    load("llama-3-8b", "a100-80g", "trtllm");
    ck_assert_double_eq(kv_decode_tile_rows(&s.hardware, &s.engine, &bf, 4, 128, 4, false), 16);
    s.engine.attn_kernel = SCN_AK_FLASH3;
    ck_assert_double_eq(kv_decode_tile_rows(&s.hardware, &s.engine, &bf, 4, 128, 4, false), 64);   /* paged: split-KV */
}
END_TEST

/* Hand arithmetic: Llama-3-8B (32 query heads over 8 KV heads, d 128) decoding 64 sequences
 * at 4096 keys on H200 with SDPA's FA2. 64 x 8 = 512 work items fill the 132 SMs, so the
 * one-pass kernel (M = 128) runs; its 4 real rows per item compute as 128. */
START_TEST(decode_attention_computes_the_padded_rows)
{
    load("llama-3-8b", "h200", "bare");
    kv_cache_cfg c = kv_cache_cfg_make(&s, SCN_DTYPE_BF16, 0, 0);
    kv_seq_work w[64];
    for (int i = 0; i < 64; i++) w[i] = (kv_seq_work){1, 4095};
    kv_step_cost r = kv_step_time(&s, &c, SCN_ATTN_FLASH, w, 64);
    const kv_op_cost *at = &r.op[KV_OP_ATTENTION];
    double real = 32.0 * 64 * 4096 * 32 * 2 * (128 + 128);    /* layers x seqs x keys x heads x 2(dqk + dv) */
    double padded = 32.0 * 64 * 4096 * 8 * 2 * 128 * (128 + 128);   /* ... x KV heads x 2 x 128 rows (dqk + dv) */
    ck_assert_msg(fabs(at->flops / real - 1) < 1e-12, "reported flops are the real rows' %.6g vs %.6g", at->flops, real);
    ck_assert_msg(fabs(at->t_compute / (padded / (989e12 * 0.35)) - 1) < 1e-9, "compute time %.6g vs %.6g", at->t_compute,
                  padded / (989e12 * 0.35));
    /* 32 times the real rows' time: compute now binds (memory: 32 x 1.07 GB at 0.8 x 4.8 TB/s = 8.9 ms). */
    ck_assert_int_eq(at->bound, KV_BOUND_COMPUTE);
    /* The O(1) decode path prices the same step the same way. */
    kv_step_cost shape;
    kv_step_shape(&s, NULL, w, 64, &shape);
    kv_decode_sums d = {{64.0 * 4096, 0}, {64, 0}};
    kv_step_cost q = kv_step_complete_decode(&shape, &s, &c, 64, &d);
    ck_assert_double_eq(q.op[KV_OP_ATTENTION].t_compute, at->t_compute);
    ck_assert_double_eq(q.seconds, r.seconds);
    /* One sequence: 8 items split the keys, so FA2's split-KV kernel (M = 64) runs: 16x. */
    kv_step_cost one = kv_step_time(&s, &c, SCN_ATTN_FLASH, w, 1);
    ck_assert_msg(fabs(one.op[KV_OP_ATTENTION].t_compute / (one.op[KV_OP_ATTENTION].flops * 16 / (989e12 * 0.35)) - 1) < 1e-9,
                  "batch 1 pads 4 rows to 64");
}
END_TEST

/* MLA decode under vLLM on Hopper runs FlashMLA's 64-row tiles over the rank's heads: at TP 8
 * DeepSeek-V3's 16 heads a rank compute as 64, four times their flops; with attention data
 * parallelism (128 heads a rank) nothing is padded. By hand, one sequence at 2000 cached tokens
 * on H200: per layer 2001 latent keys x 2 x 16 x (2 x 512 + 64) flops, x 4, at FlashMLA's
 * 660/989 of the peak, plus the absorption GEMVs (2 x 16 x 512 x (128 + 128)) at FA3's 0.75. */
START_TEST(mla_decode_pads_heads_to_flashmla_tiles)
{
    load("deepseek-v3", "h200", "vllm");
    ck_assert_double_eq(kv_mla_decode_tile_rows(&s.hardware, &s.engine, 16), 64);
    ck_assert_double_eq(kv_mla_decode_tile_rows(&s.hardware, &s.engine, 128), 128);
    ck_assert_double_eq(kv_mla_decode_tile_rows(&s.hardware, &s.engine, 32 * 2), 64);   /* a verify of 2 tokens */
    s.engine.attn_kernel = SCN_AK_FLASHINFER;
    ck_assert_double_eq(kv_mla_decode_tile_rows(&s.hardware, &s.engine, 16), 16);     /* no tile figure: unpadded */
    s.engine.attn_kernel = SCN_AK_FLASH3;
    s.deployment.tensor_parallel = 8;
    kv_cache_cfg c = kv_cache_cfg_make(&s, SCN_DTYPE_BF16, 0, 0);
    kv_seq_work w = {1, 2000};
    kv_step_cost r = kv_step_time(&s, &c, SCN_ATTN_FLASH, &w, 1);
    double latent = 61.0 * 2001 * 2 * 16 * (2 * 512 + 64) * 4, absorb = 61.0 * 2 * 16 * 512 * (128 + 128);
    double want = absorb / (989e12 * 0.75) + latent / (989e12 * 660.0 / 989.0);
    ck_assert_msg(fabs(r.op[KV_OP_ATTENTION].t_compute / want - 1) < 1e-9, "compute %.6g s vs %.6g", r.op[KV_OP_ATTENTION].t_compute, want);
}
END_TEST

/* SGLang decodes MLA on Hopper with FA3's MLA path (`mla: {decode: fa3}` in its profile: its
 * default MLA backend there), whose tile is also 64 rows: the same padding as FlashMLA's, by the
 * same hand arithmetic (one sequence at 2000 cached tokens on H200, TP 8: 16 heads compute as 64),
 * with the absorption GEMVs at the profile's attention figure; FA3 counts one kernel, not
 * FlashMLA's two. A name the loader does not know is refused where it stands. */
START_TEST(mla_decode_pads_heads_to_fa3_tiles_under_sglang)
{
    load("deepseek-v3", "h200", "sglang");
    ck_assert_int_eq(s.engine.mla_decode, SCN_MLA_DECODE_FA3);
    ck_assert_int_eq(s.engine.attn_kernel, SCN_AK_FLASHINFER);
    ck_assert_double_eq(kv_mla_decode_tile_rows(&s.hardware, &s.engine, 16), 64);
    ck_assert_double_eq(kv_mla_decode_tile_rows(&s.hardware, &s.engine, 65), 128);
    ck_assert_double_eq(kv_mla_decode_kernels(&s.hardware, &s.engine), 1);
    s.deployment.tensor_parallel = 8;
    kv_cache_cfg c = kv_cache_cfg_make(&s, SCN_DTYPE_BF16, 0, 0);
    kv_seq_work w = {1, 2000};
    kv_step_cost r = kv_step_time(&s, &c, SCN_ATTN_FLASH, &w, 1);
    double latent = 61.0 * 2001 * 2 * 16 * (2 * 512 + 64) * 4, absorb = 61.0 * 2 * 16 * 512 * (128 + 128);
    double want = absorb / (989e12 * kv_attention_efficiency(&s.hardware, &s.engine)) + latent / (989e12 * 660.0 / 989.0);
    ck_assert_msg(fabs(r.op[KV_OP_ATTENTION].t_compute / want - 1) < 1e-9, "compute %.6g s vs %.6g", r.op[KV_OP_ATTENTION].t_compute, want);
    /* Unpadded, as before the field, the latent flops count once. */
    s.engine.mla_decode = SCN_MLA_DECODE_AUTO;
    kv_step_cost u = kv_step_time(&s, &c, SCN_ATTN_FLASH, &w, 1);
    double want_u = absorb / (989e12 * kv_attention_efficiency(&s.hardware, &s.engine)) + latent / 4 / (989e12 * 660.0 / 989.0);
    ck_assert(fabs(u.op[KV_OP_ATTENTION].t_compute / want_u - 1) < 1e-9);
    /* Named FlashMLA: the tile and both kernels, whatever the attention family. */
    s.engine.mla_decode = SCN_MLA_DECODE_FLASHMLA;
    ck_assert_double_eq(kv_mla_decode_tile_rows(&s.hardware, &s.engine, 16), 64);
    ck_assert_double_eq(kv_mla_decode_kernels(&s.hardware, &s.engine), 2);
    /* Off Hopper no tile figure applies. */
    s.hardware.arch = SCN_ARCH_AMPERE;
    ck_assert_double_eq(kv_mla_decode_tile_rows(&s.hardware, &s.engine, 16), 16);
    scn_scenario *o = malloc(sizeof *o);
    ck_assert_ptr_nonnull(o);
    scn_error e;
    const char *y = "name: t\nmodel: deepseek-v3\nhardware: h200\nengine: {name: x,\n  mla: {decode: flashinfer}}\n"
                    "workload: {requests: 10, arrival: {process: offline}, prompt_tokens: 100, output_tokens: 100}\n";
    ck_assert_int_eq(t_load(y, NULL, 0, o, &e), SCN_E_DATA);
    ck_assert_str_eq(e.path, "engine.mla.decode");
    ck_assert_int_eq(e.line, 5);
    ck_assert(strstr(e.msg, "flashmla") && strstr(e.msg, "fa3"));
    free(o);
}
END_TEST

/* TensorRT-LLM's PyTorch backend decodes DeepSeek-V3/R1's MLA with FlashMLA, "enabled
 * automatically" (its DeepSeek-V3 README): its profile names it (`mla: {decode: flashmla}`) though
 * its attention family is its own, so on Hopper the heads pad to 64 rows and the decode is two
 * kernels; on Blackwell (its trtllm-gen kernels) neither applies. */
START_TEST(trtllm_decodes_mla_with_flashmla)
{
    load("deepseek-r1", "h200", "trtllm");
    ck_assert_int_eq(s.engine.mla_decode, SCN_MLA_DECODE_FLASHMLA);
    ck_assert_int_eq(s.engine.attn_kernel, SCN_AK_TRTLLM);
    ck_assert_double_eq(kv_mla_decode_tile_rows(&s.hardware, &s.engine, 16), 64);
    ck_assert_double_eq(kv_mla_decode_tile_rows(&s.hardware, &s.engine, 128), 128);
    ck_assert_double_eq(kv_mla_decode_kernels(&s.hardware, &s.engine), 2);
    s.hardware.arch = SCN_ARCH_BLACKWELL;
    ck_assert_double_eq(kv_mla_decode_tile_rows(&s.hardware, &s.engine, 16), 16);
    ck_assert_double_eq(kv_mla_decode_kernels(&s.hardware, &s.engine), 1);
}
END_TEST

/* FA2 decode rows (PyTorch SDPA, 32 query heads folded over 8 KV heads, d 128) measured on
 * H200: validation/h200-2026-11-30/attn.csv (graph replay) and attn-tiles.csv (a second
 * session, CUDA events). The batch-1 rows are left out: their 4-16 MiB of K/V are served by the
 * L2 on replay (README). `items_per_sm`: 8 KV heads x batch (x splits) over 132 SMs. */
static const struct { int batch, kv; double seconds; const char *where; } FA2_DECODE[] = {
    {16, 1024, 2.5067e-05, "attn.csv line 16"},       {16, 4096, 7.0220e-05, "attn.csv line 18"},
    {16, 16384, 2.5371e-04, "attn.csv line 20"},      {64, 1024, 1.2565e-04, "attn.csv line 22"},
    {64, 4096, 4.4840e-04, "attn.csv line 24"},       {64, 16384, 1.8063e-03, "attn.csv line 26"},
    {128, 1024, 2.3846e-04, "attn.csv line 28"},      {128, 4096, 8.9380e-04, "attn.csv line 30"},
    {128, 16384, 3.6831e-03, "attn.csv line 32"},     {8, 4096, 4.4759e-05, "attn-tiles.csv line 16"},
    {16, 4096, 7.5787e-05, "attn-tiles.csv line 17"}, {24, 4096, 1.1038e-04, "attn-tiles.csv line 18"},
    {32, 4096, 2.0240e-04, "attn-tiles.csv line 19"}, {48, 4096, 3.2857e-04, "attn-tiles.csv line 20"},
    {64, 4096, 4.1368e-04, "attn-tiles.csv line 21"}};

/* The attention op's GPU time per layer (its launch terms left out: the CSV times the kernel). */
static double decode_attention_seconds(int batch, int kv)
{
    kv_cache_cfg c = kv_cache_cfg_make(&s, SCN_DTYPE_BF16, 0, 0);
    kv_seq_work *w = malloc(sizeof *w * (size_t)batch);
    ck_assert_ptr_nonnull(w);
    for (int i = 0; i < batch; i++) w[i] = (kv_seq_work){1, kv - 1};   /* kv keys with the new one */
    kv_step_cost r = kv_step_time(&s, &c, SCN_ATTN_FLASH, w, batch);
    free(w);
    const kv_op_cost *at = &r.op[KV_OP_ATTENTION];
    return (at->seconds - at->t_overhead) / s.model.layers;
}

START_TEST(decode_matches_the_measured_h200_fa2_rows)
{
    load("llama-3-8b", "h200", "bare");
    for (size_t i = 0; i < sizeof FA2_DECODE / sizeof FA2_DECODE[0]; i++) {
        double t = decode_attention_seconds(FA2_DECODE[i].batch, FA2_DECODE[i].kv), m = FA2_DECODE[i].seconds;
        double err = t / m - 1;
        /* At least two work items per SM (batch >= 32) and the split-KV batch 8: the padded
         * compute binds (or nearly) and the model is within 25 %, the smooth roofline's
         * uncertainty where compute and memory are of one size (docs/cost-model.md, "The
         * ridge"), and about the two sessions' spread. Batch 16 and 24 (one item on most SMs)
         * run faster than the whole-GPU 0.35 says, near the memory time: the model is high there
         * by up to 2x (a known gap, docs/cost-model.md, "Attention kernels"), never low. */
        if (FA2_DECODE[i].batch >= 32 || FA2_DECODE[i].batch <= 8)
            ck_assert_msg(fabs(err) < 0.25, "%s, batch %d kv %d: %.4g s vs measured %.4g (%+.0f %%)", FA2_DECODE[i].where,
                          FA2_DECODE[i].batch, FA2_DECODE[i].kv, t, m, 100 * err);
        else
            ck_assert_msg(err > -0.25 && err < 1.0, "%s, batch %d kv %d: %.4g s vs measured %.4g (%+.0f %%)",
                          FA2_DECODE[i].where, FA2_DECODE[i].batch, FA2_DECODE[i].kv, t, m, 100 * err);
    }
    /* Without the padding the same rows are priced as memory-bound at 0.8 of 4.8 TB/s: batch
     * 64 x 4096 moves 1.07 GB in 0.28 ms against 0.448 ms measured, 37 % short. */
    s.hardware.attention_given = true;
    s.hardware.eff_attention = 0.35;
    double t = decode_attention_seconds(64, 4096);
    ck_assert_msg(t / 4.4840e-04 - 1 < -0.30, "unpadded %.4g s", t);
}
END_TEST

/* Reference: plain greedy list scheduling of the tiles (each to the slot that frees first),
 * in FA2's launch order (a head's m-blocks ascending) or longest first (FA3), returning the
 * useful share of the slots' time. */
static int cmp_desc(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? 1 : x > y ? -1 : 0;
}

static double list_schedule(long S, int batch, int heads, double tm, double tn, int slots, double p, bool lpt)
{
    long nm = (S + (long)tm - 1) / (long)tm, n = nm * batch * heads;
    double *w = malloc(sizeof *w * (size_t)n), *free_at = calloc((size_t)slots, sizeof *free_at);
    ck_assert(w && free_at);
    long k = 0;
    for (int b = 0; b < batch; b++)
        for (int h = 0; h < heads; h++)
            for (long m = 0; m < nm; m++) {
                long last = (m + 1) * (long)tm < S ? (m + 1) * (long)tm : S;
                w[k++] = ceil((double)last / tn) + p;
            }
    if (lpt) qsort(w, (size_t)n, sizeof *w, cmp_desc);
    double mk = 0;
    for (long i = 0; i < n; i++) {
        int best = 0;
        for (int j = 1; j < slots; j++) if (free_at[j] < free_at[best]) best = j;
        free_at[best] += w[i];
        if (free_at[best] > mk) mk = free_at[best];
    }
    free(w);
    free(free_at);
    return (double)batch * heads * ((double)S * (S + 1) / 2) / (tm * tn) / (slots * mk);
}

/* The model's efficiency of one causal prefill launch of `batch` sequences of S tokens. */
static double prefill_eff(long S, int batch, int heads)
{
    kv_prefill_tiles t = {0, 0, 0, 0, 0};
    for (int b = 0; b < batch; b++)
        kv_prefill_tiles_add(&t, &s.hardware, &s.engine, 128, heads, 0, S, 0, (double)S * (S + 1) / 2);
    return kv_prefill_tiles_efficiency(&t, &s.hardware, &s.engine, 128);
}

START_TEST(prefill_tail_formula_matches_list_scheduling)
{
    /* FA2 on H200 (128 x 64 tiles, 2 per SM, launch order) and FA3 on H100 (128 x 128, one
     * persistent CTA per SM, longest first), against the reference schedule: the closed form
     * replaces a per-step schedule (too slow for the simulator's prefill steps) within 6 % for
     * FA2 and 10 % for FA3 (its worst case: a few tiles more than SMs, 300 tokens x 4). */
    const long lens[] = {300, 1024, 3000, 4096, 16384};
    const int batches[] = {1, 4, 16};
    load("llama-3-8b", "h200", "bare");
    double p2 = kv_prefill_tile_prologue(&s.hardware, &s.engine, 128);
    ck_assert_msg(fabs(p2 - 989e12 * 0.35 / (4.8e12 * 0.8 * 64)) < 1e-9, "FA2 prologue %.6g key blocks", p2);
    for (size_t i = 0; i < 5; i++)
        for (size_t j = 0; j < 3; j++) {
            double ref = list_schedule(lens[i], batches[j], 32, 128, 64, 2 * 132, p2, false), got = prefill_eff(lens[i], batches[j], 32);
            ck_assert_msg(fabs(got / ref - 1) < 0.06, "FA2 S %ld batch %d: %.4f vs schedule %.4f", lens[i], batches[j], got, ref);
        }
    load("llama-3-8b", "h100-sxm", "vllm");
    double p3 = kv_prefill_tile_prologue(&s.hardware, &s.engine, 128);
    for (size_t i = 0; i < 5; i++)
        for (size_t j = 0; j < 3; j++) {
            double ref = list_schedule(lens[i], batches[j], 32, 128, 128, 132, p3, true), got = prefill_eff(lens[i], batches[j], 32);
            ck_assert_msg(fabs(got / ref - 1) < 0.10, "FA3 S %ld batch %d: %.4f vs schedule %.4f", lens[i], batches[j], got, ref);
        }
}
END_TEST

START_TEST(prefill_matches_the_measured_h200_fa2_rows)
{
    /* SDPA FA2 causal prefill on H200, 32 heads, d 128 (TFLOP/s counting the causal half):
     * attn.csv lines 2, 4, 6, 8 (batch 1, 1k-16k) and attn-tiles.csv lines 2, 4, 6, 8, 10, 12,
     * 14 (batch 1-16, 1k-4k). Within 15 %, except attn.csv's 1k row, which the second session
     * measured 30 % faster (149 against 105 TFLOP/s; README): the model, at 154, is within 15 %
     * of that session and high by < 60 % against the first. The flat family figure (346) is
     * off by +6 % to +230 % on the same rows. */
    load("llama-3-8b", "h200", "bare");
    static const struct { long S; int batch; double tflops; const char *where; } R[] = {
        {1024, 1, 105.03, "attn.csv line 2"},        {4096, 1, 229.78, "attn.csv line 4"},
        {8192, 1, 312.65, "attn.csv line 6"},        {16384, 1, 340.61, "attn.csv line 8"},
        {1024, 1, 149.44, "attn-tiles.csv line 2"},  {1024, 4, 219.97, "attn-tiles.csv line 4"},
        {1024, 16, 263.86, "attn-tiles.csv line 6"}, {2048, 1, 208.94, "attn-tiles.csv line 8"},
        {2048, 4, 281.17, "attn-tiles.csv line 10"}, {4096, 1, 270.41, "attn-tiles.csv line 12"},
        {4096, 4, 325.77, "attn-tiles.csv line 14"}};
    for (size_t i = 0; i < sizeof R / sizeof R[0]; i++) {
        double got = 989.0 * 0.35 * prefill_eff(R[i].S, R[i].batch, 32), err = got / R[i].tflops - 1;
        bool first_1k = i == 0;
        ck_assert_msg(first_1k ? err > 0 && err < 0.6 : fabs(err) < 0.15, "%s: S %ld batch %d: %.1f vs measured %.1f TFLOP/s (%+.0f %%)",
                      R[i].where, R[i].S, R[i].batch, got, R[i].tflops, 100 * err);
    }
    ck_assert_msg(989.0 * 0.35 / 229.78 - 1 > 0.45, "the flat family figure misses 4k");
}
END_TEST

START_TEST(prefill_shape_follows_the_fa3_paper)
{
    /* FA3 paper (Shah et al. 2024), Figure 5, causal forward, head dim 128, H100 SXM5, batch x
     * seqlen = 16k tokens, 16 heads: FlashAttention-3 292, 423, 521, 579, 602, 616 TFLOP/s at
     * 512 .. 16k; FlashAttention-2 191, 260, 298, 319, 333, 335. The model's curve, each
     * relative to its 16k value, within 12 % (its level is the family figure's). Nothing is
     * fitted to these figures: the prologue is derived, so the tolerance is what the derived
     * mechanism reaches (FA3 at 1k: 0.62 against 0.69, the worst point), not a tuned band. */
    const long S[] = {512, 1024, 2048, 4096, 8192, 16384};
    const double fa3[] = {292, 423, 521, 579, 602, 616}, fa2[] = {191, 260, 298, 319, 333, 335};
    const char *eng[] = {"vllm", "bare"};
    for (int f = 0; f < 2; f++) {
        load("llama-3-8b", "h100-sxm", eng[f]);
        const double *pub = f == 0 ? fa3 : fa2;
        double top = prefill_eff(16384, 1, 16);
        for (int i = 0; i < 6; i++) {
            double rel = prefill_eff(S[i], (int)(16384 / S[i]), 16) / top, want = pub[i] / pub[5];
            ck_assert_msg(fabs(rel / want - 1) < 0.12, "%s S %ld: %.3f of the 16k figure vs published %.3f", eng[f], S[i], rel, want);
        }
    }
}
END_TEST

/* FA2's grid runs a head's m-blocks together, head after head: with 264 slots and 128 tiles a
 * head (16k tokens), 3 query heads are in flight, one KV head of Llama-3-8B's 8, so its 16k keys
 * (8 MiB) stay in the L2 and device memory sees each key once; FA3-class kernels run every
 * head at once (longest tiles first). */
START_TEST(prefill_l2_working_set_follows_the_launch_order)
{
    load("llama-3-8b", "h200", "bare");
    ck_assert_double_eq(kv_prefill_kv_share(&s.hardware, &s.engine, 128, 32, 8, 16384), 1.0 / 8);
    ck_assert_double_eq(kv_prefill_kv_share(&s.hardware, &s.engine, 128, 32, 32, 8192), 5.0 / 32);   /* ceil(264/64) */
    ck_assert_double_eq(kv_prefill_kv_share(&s.hardware, &s.engine, 128, 32, 8, 1024), 1);           /* 33 heads fit */
    kv_cache_cfg c = kv_cache_cfg_make(&s, SCN_DTYPE_BF16, 0, 0);
    kv_seq_work w = {16384, 0};
    kv_step_cost r = kv_step_time(&s, &c, SCN_ATTN_FLASH, &w, 1);
    /* Per layer: Q read and O written (16384 x 32 x 128 x 2 x 2 B), the new K/V written and
     * each key read once (16384 x 4096 B each). */
    double per_layer = 16384.0 * 32 * 128 * 2 * 2 + 2 * 16384.0 * 4096;
    ck_assert_msg(fabs(r.op[KV_OP_ATTENTION].bytes / (32 * per_layer) - 1) < 1e-12, "bytes %.6g vs %.6g",
                  r.op[KV_OP_ATTENTION].bytes, 32 * per_layer);
    load("llama-3-8b", "h200", "vllm");
    ck_assert_double_eq(kv_prefill_kv_share(&s.hardware, &s.engine, 128, 32, 8, 16384), 1);
    /* All 8 KV heads' 16k keys (64 MiB) overflow the 50 MiB L2: later tiles re-read from memory. */
    r = kv_step_time(&s, &c, SCN_ATTN_FLASH, &w, 1);
    ck_assert(r.op[KV_OP_ATTENTION].bytes > 1.5 * 32 * per_layer);
}
END_TEST

START_TEST(decode_step_matches_the_measured_h200_step)
{
    /* validation/h200-2026-11-30/step.csv, graph rows (lines 3, 5, 7, 9, 11, 13): a
     * Llama-3-8B-shaped decode step at 1024 tokens of context, SDPA FA2 with the group folded
     * into the query rows, as the bare engine runs it. Batch 64-256, where attention's padded
     * compute is a third to two thirds of the step: within 15 %. */
    load("llama-3-8b", "h200", "bare");
    kv_cache_cfg c = kv_cache_cfg_make(&s, SCN_DTYPE_BF16, 0, 0);
    const int B[] = {64, 128, 256};
    const double meas[] = {9.8373e-03, 1.4200e-02, 2.4235e-02};
    for (int i = 0; i < 3; i++) {
        kv_seq_work w[256];
        for (int j = 0; j < B[i]; j++) w[j] = (kv_seq_work){1, 1023};
        double t = kv_step_time(&s, &c, SCN_ATTN_FLASH, w, B[i]).seconds;
        ck_assert_msg(fabs(t / meas[i] - 1) < 0.15, "batch %d: %.4g s vs measured %.4g", B[i], t, meas[i]);
    }
}
END_TEST


/* Which attention kernels the vLLM profiles run: FlashAttention-3 entered vLLM with PR #12093
 * (January 2025), after every 0.6.x release, so vllm-0.6 and vllm-0.6.3 (which extends it) run
 * FA2 while vllm-0.7 and the current profile run FA3 (docs/sources.md, "vLLM 0.6.x attention").
 * The profile chain (vllm-0.6.3 -> vllm-0.6 -> vllm-0.7 -> vllm) must carry the override down. */
START_TEST(vllm_06_profiles_run_flashattention_2)
{
    static const struct { const char *engine; scn_attn_kernel want; } cases[] = {
        {"vllm-0.6", SCN_AK_FLASH2}, {"vllm-0.6.3", SCN_AK_FLASH2}, {"vllm-0.7", SCN_AK_FLASH3}, {"vllm", SCN_AK_FLASH3}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char text[512];
        snprintf(text, sizeof text,
                 "model: llama-3-8b\nhardware: h100-sxm\nengine: %s\n"
                 "workload:\n  requests: 10\n  arrival: {process: poisson, rate: 1/s}\n"
                 "  prompt_tokens: 100\n  output_tokens: 10\n", cases[i].engine);
        scn_scenario sc;
        scn_error e;
        ck_assert_msg(t_load(text, NULL, 0, &sc, &e) == SCN_OK, "%s: %s", cases[i].engine, e.msg);
        ck_assert_msg(sc.engine.attn_kernel == cases[i].want, "%s runs %s", cases[i].engine,
                      scn_attn_kernel_name(sc.engine.attn_kernel));
    }
}
END_TEST

Suite *suite_attn_kernels(void)
{
    Suite *su = suite_create("attn_kernels");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, decode_tile_rows_follow_each_kernel);
    tcase_add_test(tc, decode_attention_computes_the_padded_rows);
    tcase_add_test(tc, decode_matches_the_measured_h200_fa2_rows);
    tcase_add_test(tc, mla_decode_pads_heads_to_flashmla_tiles);
    tcase_add_test(tc, mla_decode_pads_heads_to_fa3_tiles_under_sglang);
    tcase_add_test(tc, trtllm_decodes_mla_with_flashmla);
    tcase_add_test(tc, prefill_tail_formula_matches_list_scheduling);
    tcase_add_test(tc, prefill_matches_the_measured_h200_fa2_rows);
    tcase_add_test(tc, prefill_shape_follows_the_fa3_paper);
    tcase_add_test(tc, prefill_l2_working_set_follows_the_launch_order);
    tcase_add_test(tc, decode_step_matches_the_measured_h200_step);
    tcase_add_test(tc, vllm_06_profiles_run_flashattention_2);
    suite_add_tcase(su, tc);
    return su;
}
