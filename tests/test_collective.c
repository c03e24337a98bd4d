/* test_collective.c: collectives worked by hand from the formulas in docs/cost-model.md,
 * "Collectives", the engines' size rules, and the tensor-parallel criterion of issue 10 against
 * published all-reduce measurements. */
#include "tests.h"
#include "../model/kv_model.h"

#include <math.h>
#include <string.h>

static scn_scenario s;

static bool near(double a, double b) { return fabs(a - b) <= 1e-9 * fabs(b) + 1e-15; }

START_TEST(custom_allreduce_by_hand)
{
    t_library("llama-3-70b", "h100-sxm", &s);
    const scn_hardware *hw = &s.hardware;
    double bw = 450e9 * 0.70;                           /* NVLink 4 each way x efficiency */
    /* One-shot, 8 GPUs, 16 KiB: 3.7 us for two GPUs + 6 peers x 0.37 us; each GPU reads the
     * 7 peers' 16 KiB. */
    kv_coll_cost c = kv_allreduce_algo(hw, 8, 16384, KV_COLL_ONESHOT);
    ck_assert(near(c.latency, 3.7e-6 + 6 * 0.37e-6));
    ck_assert(near(c.transfer, 7 * 16384 / bw));
    ck_assert(near(c.seconds, 5.92e-6 + 114688 / bw));
    /* Two-shot, 8 GPUs, 1 MiB, H100: the profile's measured 12.6 us and 249 GB/s for the
     * 2 x 7/8 of the message each rank moves. */
    c = kv_allreduce_algo(hw, 8, 1048576, KV_COLL_TWOSHOT);
    ck_assert(near(c.latency, 12.6e-6));
    ck_assert(near(c.transfer, 2.0 * 7 / 8 * 1048576 / 249e9));
    /* A100: H100's measured fixed cost carried over, the bytes at the link's rate (300 GB/s x
     * 0.7), there being no measured rate. */
    t_library("llama-3-70b", "a100-80g", &s);
    c = kv_allreduce_algo(&s.hardware, 8, 1048576, KV_COLL_TWOSHOT);
    ck_assert(near(c.latency, 12.6e-6));
    ck_assert(near(c.transfer, 2.0 * 7 / 8 * 1048576 / (300e9 * 0.7)));
    /* Without any two-shot figure: one-shot's latency and a second barrier (7 x 0.37 us). */
    s.hardware.twoshot_latency = 0;
    c = kv_allreduce_algo(&s.hardware, 8, 1048576, KV_COLL_TWOSHOT);
    ck_assert(near(c.latency, 5.92e-6 + 7 * 0.37e-6));
    t_library("llama-3-70b", "h100-sxm", &s);
    hw = &s.hardware;
    /* NCCL ring, 8 GPUs, 64 MiB: the best of LL (6.6 us + 14 x 0.6 us, half the link's
     * bandwidth), LL128 (14 us + 14 x 1.9 us, 120/128 of NCCL's measured 370 GB/s) and Simple
     * (8.4 us + 14 x 3.4 us, all of it), each with the profile's measured excess: 16.84 us
     * measured less LL's 6.6 + 14 x 0.6 us. */
    double x = 16.84e-6 - (6.6e-6 + 14 * 0.6e-6);
    double m = 64 * MIB, moved = 2.0 * 7 / 8 * m;
    double ll = 6.6e-6 + x + 14 * 0.6e-6 + moved / (bw * 0.5);
    double ll128 = 14e-6 + x + 14 * 1.9e-6 + moved / (370e9 * 120.0 / 128);
    double simple = 8.4e-6 + x + 14 * 3.4e-6 + moved / 370e9;
    c = kv_allreduce_algo(hw, 8, m, KV_COLL_RING);
    ck_assert_msg(near(c.seconds, fmin(ll, fmin(ll128, simple))), "%.9g vs %.9g", c.seconds, fmin(ll, fmin(ll128, simple)));
    /* Small messages: LL wins, the measured 16.84 us for 8 GPUs plus the bytes. */
    c = kv_allreduce_algo(hw, 8, 16384, KV_COLL_RING);
    ck_assert(near(c.seconds, 16.84e-6 + 2.0 * 7 / 8 * 16384 / (bw * 0.5)));
}
END_TEST

START_TEST(engines_choose_by_size)
{
    t_library("llama-3-70b", "h100-sxm", &s);   /* engine vllm: custom, one-shot < 256 KiB on 8 */
    const scn_hardware *hw = &s.hardware;
    ck_assert_int_eq(kv_allreduce_time(hw, &s.engine, 8, 16 * KIB).algo, KV_COLL_ONESHOT);
    ck_assert_int_eq(kv_allreduce_time(hw, &s.engine, 8, 512 * KIB).algo, KV_COLL_TWOSHOT);
    ck_assert_int_eq(kv_allreduce_time(hw, &s.engine, 4, 400 * KIB).algo, KV_COLL_ONESHOT);   /* 512 KiB on 4 */
    ck_assert_int_eq(kv_allreduce_time(hw, &s.engine, 2, 4 * MIB).algo, KV_COLL_ONESHOT);     /* always on 2 */
    ck_assert_int_eq(kv_allreduce_time(hw, &s.engine, 8, 16 * MIB).algo, KV_COLL_RING);       /* past 8 MiB: NCCL */
    /* Both limits are exclusive in vLLM (should_custom_ar: inp_size < max_size; REDUCE_CASE:
     * bytes < 256 KiB on 8 GPUs, < 512 KiB on 4): a message of exactly a limit takes the next. */
    ck_assert_int_eq(kv_allreduce_time(hw, &s.engine, 8, 256 * KIB - 16).algo, KV_COLL_ONESHOT);
    ck_assert_int_eq(kv_allreduce_time(hw, &s.engine, 8, 256 * KIB).algo, KV_COLL_TWOSHOT);
    ck_assert_int_eq(kv_allreduce_time(hw, &s.engine, 4, 512 * KIB).algo, KV_COLL_TWOSHOT);
    ck_assert_int_eq(kv_allreduce_time(hw, &s.engine, 8, 8 * MIB - 16).algo, KV_COLL_TWOSHOT);
    ck_assert_int_eq(kv_allreduce_time(hw, &s.engine, 8, 8 * MIB).algo, KV_COLL_RING);
    ck_assert_int_eq(kv_allreduce_time(hw, &s.engine, 2, 8 * MIB).algo, KV_COLL_RING);
    /* An NCCL-only engine runs rings inside a node. */
    scn_engine nccl = s.engine;
    nccl.allreduce = SCN_AR_NCCL;
    ck_assert_int_eq(kv_allreduce_time(hw, &nccl, 8, 16 * KIB).algo, KV_COLL_RING);
    /* Across two nodes custom all-reduce does not apply; NCCL takes the faster of ring and tree.
     * Tree over 16 GPUs in nodes of 8: 1 network step (5 us) and 7 NVLink steps (0.6 us) each
     * way; LL: 6.8 us + 2 x 9.2 us, and 2 x 16 KiB at half of min(NVLink, 8 NICs of 50 GB/s)
     * x 0.7 (one NIC per GPU, a channel per NIC: 400 x 0.7 = 280 GB/s); both with the profile's
     * measured NCCL excess x (16.84 us less 6.6 + 14 x 0.6 us). */
    double x = 16.84e-6 - (6.6e-6 + 14 * 0.6e-6);
    double node_bw = fmin(450e9, 8 * 50e9) * 0.7;
    kv_coll_cost t = kv_allreduce_algo(hw, 16, 16 * KIB, KV_COLL_TREE);
    ck_assert(near(t.seconds, 6.8e-6 + x + 2 * (5e-6 + 7 * 0.6e-6) + 2 * 16 * KIB / (node_bw * 0.5)));
    kv_coll_cost r = kv_allreduce_algo(hw, 16, 16 * KIB, KV_COLL_RING);
    ck_assert(near(r.seconds, 6.6e-6 + x + 30 * 5e-6 + 2.0 * 15 / 16 * 16 * KIB / (node_bw * 0.5)));
    /* A 1 GiB ring over 2 x 8 H100 streams at the node's 8 NICs, not one: bus bandwidth
     * (2 (p-1)/p x bytes / time) near 280 GB/s. NVIDIA/nccl issue #2409 measured 216.5 and 231
     * GB/s at 1 and 8 GiB on 2 x 8 H100 with 8 x 400G per node, on a cluster it calls
     * misconfigured, and expects about 470 GB/s from other runs (nccl-tests #309); one NIC's
     * rate (35 GB/s) would be 6-13x below both. */
    kv_coll_cost big = kv_allreduce_algo(hw, 16, 1024.0 * MIB, KV_COLL_RING);
    double busbw = 2.0 * 15 / 16 * 1024.0 * MIB / big.seconds;
    ck_assert_msg(busbw > 200e9 && busbw < 470e9, "cross-node ring bus bandwidth %.0f GB/s", busbw / 1e9);
    kv_coll_cost pick = kv_allreduce_time(hw, &s.engine, 16, 16 * KIB);
    ck_assert(pick.algo == KV_COLL_TREE && near(pick.seconds, t.seconds));
    /* Over PCIe with more than two GPUs vLLM's custom all-reduce is off: NCCL. */
    t_library("llama-3-8b", "l40s", &s);
    ck_assert_int_eq(kv_allreduce_time(&s.hardware, &s.engine, 4, 16 * KIB).algo, KV_COLL_RING);
    ck_assert_int_eq(kv_allreduce_time(&s.hardware, &s.engine, 2, 16 * KIB).algo, KV_COLL_ONESHOT);
}
END_TEST

START_TEST(alltoall_and_p2p_by_hand)
{
    t_library("llama-3-70b", "h100-sxm", &s);
    const scn_hardware *hw = &s.hardware;
    /* All-to-all of 8 MiB per rank over 16 GPUs in nodes of 8: 7/16 of it over NVLink, 8/16
     * over the network at the same time; the network share binds. */
    double b = 8 * MIB;
    kv_coll_cost a = kv_alltoall_time(hw, 16, b);
    ck_assert(near(a.transfer, fmax(7.0 / 16 * b / (450e9 * 0.7), 8.0 / 16 * b / (50e9 * 0.7))));
    ck_assert(near(a.latency, 8.4e-6 + 5e-6 * 3.4 / 0.6));
    /* A KV hand-off of 100 MiB between nodes: NCCL Simple latency + bytes over the NIC. */
    kv_coll_cost p = kv_p2p_time(hw, 100 * MIB, false);
    ck_assert(near(p.seconds, 8.4e-6 + 5e-6 * 3.4 / 0.6 + 100 * MIB / (50e9 * 0.7)));
    p = kv_p2p_time(hw, 100 * MIB, true);
    ck_assert(near(p.transfer, 100 * MIB / (450e9 * 0.7)));
}
END_TEST

/* Relative error of a model figure against a published one. */
static double rel(double model, double measured) { return fabs(model - measured) / measured; }

/* NCCL all-reduces against published timings (docs/sources.md, "Collectives"). The profiles
 * carry one measured small all-reduce each (nccl_latency); everything here is another reading:
 * other sizes, other GPU counts, another GPU. Tolerance 15 %: the figures' own spread - the same
 * PyNccl all-reduce of 0.5 MB on 4 H100s reads 17 us in vLLM PR #24111 and 21 us in PR #24532,
 * +-11 % about their mean. Without the measured excess (NCCL's tuning model alone) the 32-128 KiB
 * H200 readings, the 2-GPU A100 one and the 4-GPU H100 one fall 18-23 % short. */
START_TEST(nccl_matches_published_allreduces)
{
    /* 8 H200s, PyNccl replayed from a CUDA graph (sgl-project/sglang PR #22734). */
    static const struct { double bytes, us; } H200[] = {
        {4 * KIB, 16.99}, {8 * KIB, 17.23}, {16 * KIB, 17.75}, {32 * KIB, 19.63}, {64 * KIB, 19.92},
        {128 * KIB, 20.13}, {256 * KIB, 20.31}, {512 * KIB, 20.86}, {1 * MIB, 27.00}};
    t_library("llama-3-70b", "h200", &s);
    for (size_t i = 0; i < sizeof H200 / sizeof H200[0]; i++) {
        kv_coll_cost c = kv_allreduce_algo(&s.hardware, 8, H200[i].bytes, KV_COLL_RING);
        ck_assert_msg(rel(c.seconds, H200[i].us * 1e-6) <= 0.15, "H200 x8 %.0f B: %.2f us vs %.2f us",
                      H200[i].bytes, c.seconds * 1e6, H200[i].us);
    }
    /* The profile's own point by hand: 6.6 us + 14 hops x 0.6 us + the measured 1.84 us excess,
     * plus 2 x 7/8 x 2 KiB at LL's half of 450 GB/s x 0.7. */
    kv_coll_cost c = kv_allreduce_algo(&s.hardware, 8, 2 * KIB, KV_COLL_RING);
    ck_assert(near(c.seconds, 16.84e-6 + 2.0 * 7 / 8 * 2 * KIB / (450e9 * 0.7 * 0.5)));
    /* 4 and 6 H100s, 0.5 MB (32 x 8192 bf16), PyNccl (vLLM PRs #24111 and #24532: 17 and 21 us
     * at 4 GPUs, 23 us at 6): the H200's excess carried over to the H100 profile. */
    t_library("llama-3-70b", "h100-sxm", &s);
    c = kv_allreduce_algo(&s.hardware, 4, 512 * KIB, KV_COLL_RING);
    ck_assert_msg(rel(c.seconds, 19e-6) <= 0.15, "H100 x4 0.5 MB: %.2f us vs 17-21 us", c.seconds * 1e6);
    c = kv_allreduce_algo(&s.hardware, 6, 512 * KIB, KV_COLL_RING);
    ck_assert_msg(rel(c.seconds, 23e-6) <= 0.15, "H100 x6 0.5 MB: %.2f us vs 23 us", c.seconds * 1e6);
    /* Large messages: the bus bandwidth (bytes each rank moves over the time) of a 2 GiB ring
     * on 2 and 8 H100s, 365-370 GB/s in NVIDIA/nccl issue #1455 (the profile's 370 GB/s comes
     * from it and from nccl-tests #212: this checks that the rate is what a large all-reduce
     * sees, latencies and protocol choice included). */
    for (int p = 2; p <= 8; p += 6) {
        kv_coll_cost big = kv_allreduce_algo(&s.hardware, p, 2048.0 * MIB, KV_COLL_RING);
        double busbw = 2.0 * (p - 1) / p * 2048.0 * MIB / big.seconds;
        ck_assert_msg(busbw >= 0.97 * 365e9 && busbw <= 370e9, "H100 x%d 2 GiB: bus bandwidth %.0f GB/s", p, busbw / 1e9);
    }
    /* 2 A100-SXM4-40GB, 32 B, nccl-tests out-of-place (NVIDIA/nccl issue #583): 10.14 us. */
    t_library("llama-3-70b", "a100-40g", &s);
    c = kv_allreduce_algo(&s.hardware, 2, 32, KV_COLL_RING);
    ck_assert_msg(rel(c.seconds, 10.14e-6) <= 0.15, "A100 x2 32 B: %.2f us vs 10.14 us", c.seconds * 1e6);
}
END_TEST

/* Custom one-shot and two-shot all-reduces against published timings. One-shot tolerance 25 %:
 * SGLang PR #2904's own table moves 23 % where nothing should change (4 H100s: 4.8 us at 512 B,
 * 3.7 us at 4 KiB). */
START_TEST(oneshot_matches_published_allreduces)
{
    /* SGLang PR #2904, H100, TensorRT-LLM-derived one-shot kernel: 2 / 4 / 8 GPUs. */
    static const struct { int p; double bytes, us; } SGL[] = {
        {2, 512, 3.7}, {4, 512, 4.8}, {8, 512, 5.9}, {2, 4096, 3.9}, {4, 4096, 3.7}, {8, 4096, 5.7},
        {2, 32768, 4.5}, {4, 32768, 4.8}, {8, 32768, 7.8}};
    t_library("llama-3-70b", "h100-sxm", &s);
    for (size_t i = 0; i < sizeof SGL / sizeof SGL[0]; i++) {
        kv_coll_cost c = kv_allreduce_algo(&s.hardware, SGL[i].p, SGL[i].bytes, KV_COLL_ONESHOT);
        ck_assert_msg(rel(c.seconds, SGL[i].us * 1e-6) <= 0.25, "H100 x%d %.0f B: %.2f us vs %.2f us", SGL[i].p,
                      SGL[i].bytes, c.seconds * 1e6, SGL[i].us);
    }
    /* vLLM's ca_1stage on H100, 0.5 MB (vLLM PR #24111): 7 / 10 / 13 us at 2 / 4 / 6 GPUs. */
    static const struct { int p; double us; } VLLM[] = {{2, 7}, {4, 10}, {6, 13}};
    for (size_t i = 0; i < sizeof VLLM / sizeof VLLM[0]; i++) {
        kv_coll_cost c = kv_allreduce_algo(&s.hardware, VLLM[i].p, 512 * KIB, KV_COLL_ONESHOT);
        ck_assert_msg(rel(c.seconds, VLLM[i].us * 1e-6) <= 0.25, "H100 x%d 0.5 MB: %.2f us vs %.0f us", VLLM[i].p,
                      c.seconds * 1e6, VLLM[i].us);
    }
    /* vLLM's two-shot (ca_2stage) on 4 H100s, 0.5-4 MB (vLLM PR #24532). The profile's line was
     * fitted to PR #24111's readings alone, so these six are out of sample; tolerance 15 %, the
     * NCCL tests' (the two PRs' readings of the same points differ by up to 8 %). */
    static const struct { double mb, us; } TWO[] = {{0.5, 17}, {1, 18}, {1.5, 25}, {2, 26}, {3, 35}, {4, 42}};
    for (size_t i = 0; i < sizeof TWO / sizeof TWO[0]; i++) {
        kv_coll_cost c = kv_allreduce_algo(&s.hardware, 4, TWO[i].mb * MIB, KV_COLL_TWOSHOT);
        ck_assert_msg(rel(c.seconds, TWO[i].us * 1e-6) <= 0.15, "H100 x4 two-shot %.1f MB: %.2f us vs %.0f us",
                      TWO[i].mb, c.seconds * 1e6, TWO[i].us);
    }
    /* MSCCL++'s one-shot on 8 H200s from a CUDA graph, 16 KiB (SGLang PR #22734): 6.37 us. */
    t_library("llama-3-70b", "h200", &s);
    kv_coll_cost c = kv_allreduce_algo(&s.hardware, 8, 16 * KIB, KV_COLL_ONESHOT);
    ck_assert_msg(rel(c.seconds, 6.37e-6) <= 0.25, "H200 x8 16 KiB: %.2f us vs 6.37 us", c.seconds * 1e6);
}
END_TEST

/* torch.distributed's all-reduce launched eagerly, as a step without a CUDA graph prices it: the
 * NCCL kernel plus the op's launch cost. Published: 20.71 us for 16 KiB on 8 H100s
 * (ByteDance-Seed/Triton-distributed issue #57) and 22.43 us on 8 H200s ("torch eager", SGLang
 * PR #22734); tolerance 15 % as above. */
START_TEST(eager_torch_allreduce_in_a_step)
{
    static const struct { const char *hw; double us; } EAGER[] = {{"h100-sxm", 20.71}, {"h200", 22.43}};
    for (size_t i = 0; i < sizeof EAGER / sizeof EAGER[0]; i++) {
        t_library_engine("llama-3-70b", EAGER[i].hw, "bare", &s);
        s.engine.cuda_graphs = false;
        s.engine.allreduce_copies = 0;   /* torch.distributed.all_reduce reduces in place: no clone */
        s.deployment.tensor_parallel = 8;
        kv_cache_cfg c = kv_cache_cfg_make(&s, SCN_DTYPE_BF16, 0, 0);
        kv_seq_work w = {1, 1024};
        kv_step_cost t = kv_step_time(&s, &c, SCN_ATTN_FLASH, &w, 1);
        ck_assert(t.allreduce.algo == KV_COLL_RING);
        double each = t.op[KV_OP_ALLREDUCE].seconds / t.allreduces;
        ck_assert_msg(rel(each, EAGER[i].us * 1e-6) <= 0.15, "%s eager 16 KiB: %.2f us vs %.2f us", EAGER[i].hw,
                      each * 1e6, EAGER[i].us);
    }
}
END_TEST

/* gpt-fast's functional all-reduce clones its input first (torch's _c10d_functional::all_reduce):
 * one more kernel per all-reduce, and the message read and written once more in device memory. */
START_TEST(functional_allreduce_copies_its_input)
{
    t_library_engine("llama-2-70b", "a100-80g", "bare", &s);
    ck_assert_int_eq(s.engine.allreduce_copies, 1);
    s.deployment.tensor_parallel = 8;
    kv_cache_cfg c = kv_cache_cfg_make(&s, SCN_DTYPE_BF16, 0, 0);
    kv_seq_work w = {1, 1024};
    kv_step_cost t = kv_step_time(&s, &c, SCN_ATTN_FLASH, &w, 1);
    double m = 8192 * 2.0;                                   /* one row of 8192 bf16 */
    ck_assert(near(t.allreduce.copy, 2 * m / (2039e9 * 0.80)));
    kv_coll_cost ring = kv_allreduce_algo(&s.hardware, 8, m, KV_COLL_RING);
    ck_assert(near(t.allreduce.seconds, ring.seconds + t.allreduce.copy));
    ck_assert(near(t.op[KV_OP_ALLREDUCE].kernels, 160 * 2));
    /* Without the clone: one kernel an all-reduce, no copy. */
    s.engine.allreduce_copies = 0;
    t = kv_step_time(&s, &c, SCN_ATTN_FLASH, &w, 1);
    ck_assert(t.allreduce.copy == 0 && near(t.op[KV_OP_ALLREDUCE].kernels, 160));
}
END_TEST

/* A measured NCCL latency needs its GPU count, and cannot be below the ring's own steps. */
START_TEST(nccl_latency_is_checked)
{
    scn_error e;
    const char *text = "model: llama-3-70b\nhardware: h100-sxm\n";
    const char *low[] = {"hardware.interconnect.nccl_latency=5 us"};
    ck_assert_int_ne(t_load(text, low, 1, &s, &e), SCN_OK);
    ck_assert_ptr_nonnull(strstr(e.msg, "steps"));
    const char *alone[] = {"hardware=l40s", "hardware.interconnect.nccl_latency=20 us"};
    ck_assert_int_ne(t_load(text, alone, 2, &s, &e), SCN_OK);
    ck_assert_ptr_nonnull(strstr(e.path, "nccl_latency_gpus"));
}
END_TEST

/* Issue 10's criterion: Llama-3-70B batch-1 decode on H100 SXM, context 1024. */
START_TEST(tp8_beats_tp4_with_published_allreduce_share)
{
    t_library("llama-3-70b", "h100-sxm", &s);
    kv_cache_cfg c = kv_cache_cfg_make(&s, SCN_DTYPE_BF16, 0, 0);
    kv_seq_work w = {1, 1024};
    s.deployment.tensor_parallel = 4;
    kv_step_cost t4 = kv_step_time(&s, &c, SCN_ATTN_FLASH, &w, 1);
    s.deployment.tensor_parallel = 8;
    kv_step_cost t8 = kv_step_time(&s, &c, SCN_ATTN_FLASH, &w, 1);
    ck_assert_msg(t8.seconds < 0.8 * t4.seconds, "TP8 %.3f ms vs TP4 %.3f ms", t8.seconds * 1e3, t4.seconds * 1e3);
    /* 160 all-reduces of 1 x 8192 x 2 B = 16 KiB. SGLang PR #2904 measured a custom one-shot
     * all-reduce on 8 H100s at 5.7 us for 4 KiB and 7.8 us for 32 KiB: 16 KiB lies between. */
    ck_assert_int_eq(t8.allreduces, 160);
    ck_assert(t8.allreduce.algo == KV_COLL_ONESHOT);
    ck_assert_msg(t8.allreduce.seconds >= 5.7e-6 && t8.allreduce.seconds <= 7.8e-6, "%.3g us", t8.allreduce.seconds * 1e6);
    double share = t8.op[KV_OP_ALLREDUCE].t_network / t8.seconds;
    double lo = 160 * 5.7e-6 / t8.seconds, hi = 160 * 7.8e-6 / t8.seconds;
    ck_assert_msg(share >= lo && share <= hi, "all-reduce share %.3f outside [%.3f, %.3f]", share, lo, hi);
}
END_TEST

/* An A100's NVLink 3 moves two thirds of an H100's NVLink 4 and its custom kernels are the same
 * code, so the engine's all-reduce on A100 is never faster than on H100, at any size the engine
 * meets (1 KiB to 64 MiB) and any GPU count of a node. The A100 profile once priced its two-shot
 * with the structural latency guess while H100 carried the measured one: 17.2 vs 20.0 us at
 * 1 MiB on 8 GPUs. */
START_TEST(a100_allreduce_never_beats_h100)
{
    static scn_scenario a;
    t_library("llama-3-70b", "a100-80g", &a);
    t_library("llama-3-70b", "h100-sxm", &s);
    static const int P[] = {2, 4, 8};
    for (size_t i = 0; i < sizeof P / sizeof P[0]; i++)
        for (double m = KIB; m <= 64 * MIB; m *= 1.25) {
            double bytes = 16 * floor(m / 16);
            double ta = kv_allreduce_time(&a.hardware, &a.engine, P[i], bytes).seconds;
            double th = kv_allreduce_time(&s.hardware, &s.engine, P[i], bytes).seconds;
            ck_assert_msg(ta >= th, "%d GPUs, %.0f B: A100 %.2f us < H100 %.2f us", P[i], bytes, ta * 1e6, th * 1e6);
        }
}
END_TEST

/* gpt-fast's tensor parallelism shards only the layers (tp.py apply_tp): the bare profile's LM
 * head stays whole on each rank. Llama-2-70B at TP 8, batch 1: the LM head reads all 32000 x
 * 8192 bf16 weights (524.3 MB) on every rank, not an eighth (65.5 MB); a serving engine's
 * (vLLM's) reads the eighth. Weights dominate its bytes (logits and the norm's row are
 * kilobytes), so the replicated head reads between 7.9 and 8 times the split one. */
START_TEST(gpt_fast_lm_head_is_replicated)
{
    t_library_engine("llama-2-70b", "a100-80g", "bare", &s);
    ck_assert(s.engine.lm_head_replicated);
    s.deployment.tensor_parallel = 8;
    kv_cache_cfg c = kv_cache_cfg_make(&s, SCN_DTYPE_BF16, 0, 0);
    kv_seq_work w = {1, 1024};
    kv_step_cost whole = kv_step_time(&s, &c, SCN_ATTN_FLASH, &w, 1);
    double head = 32000.0 * 8192 * 2;
    ck_assert_msg(whole.op[KV_OP_LM_HEAD].bytes >= head && whole.op[KV_OP_LM_HEAD].bytes < head * 1.001, "%g",
                  whole.op[KV_OP_LM_HEAD].bytes);
    s.engine.lm_head_replicated = false;
    kv_step_cost split = kv_step_time(&s, &c, SCN_ATTN_FLASH, &w, 1);
    double r = whole.op[KV_OP_LM_HEAD].bytes / split.op[KV_OP_LM_HEAD].bytes;
    ck_assert_msg(r > 7.9 && r <= 8.0, "%g", r);
    /* And it stores them whole: 7/8 of the embedding and the LM head (2 x 32000 x 8192 x 2 B)
     * more on each rank than a split. */
    s.engine.lm_head_replicated = true;
    ck_assert(near(kv_weights_engine_extra(&s), 2.0 * 32000 * 8192 * 2 * 7 / 8));
    t_library_engine("llama-2-70b", "a100-80g", "vllm", &s);
    ck_assert(!s.engine.lm_head_replicated);
    s.deployment.tensor_parallel = 8;
    ck_assert(kv_weights_engine_extra(&s) == 0);
}
END_TEST

/* gpt-fast's README at a later commit (pytorch-labs/gpt-fast@0f925b5d4ce457b89a7ca6c9ce50f42bf2576945,
 * "Tensor Parallelism", run with ENABLE_INTRA_NODE_COMM=1) timed the same batch-1 decode on the
 * same 8 x A100-80GB machine (330 W, hybrid cube mesh; its TP-1 rows are unchanged) with PyTorch's
 * own intra-node all-reduce instead of NCCL: Llama-2-7B 168.84 / 254.02 / 328.43 tokens/s and
 * Llama-2-70B 21.32 / 38.01 / 62.50 at TP 2 / 4 / 8. That path (pytorch/pytorch
 * torch/csrc/distributed/c10d/intra_node_comm.cu) stages the input into its peer buffer with a
 * cudaMemcpyAsync and runs a one-shot kernel (bf16 up to 256 KiB) on a fully connected group,
 * after funcol's clone: a custom one-shot with two copies. Everything else in the step — the
 * sharded layers, the replicated LM head, the kernel boundaries — is what the NCCL rows
 * (gfast-05..10) also run, so this checks those terms apart from NCCL's price. At TP 8 the
 * machine runs its hybrid-cube-mesh variant (a one-shot over 4 neighbours, then one exchange with
 * a relay neighbour), which the model prices as a one-shot over 8: a floor for that path. The
 * step at context 106 (6 prompt tokens + half of 200) stands for the README's 200-token average. */
START_TEST(gpt_fast_intra_node_comm_matches_readme)
{
    static const struct {
        const char *model;
        int tp;
        double readme;
    } rows[] = {{"llama-2-7b", 2, 168.84},  {"llama-2-7b", 4, 254.02},  {"llama-2-7b", 8, 328.43},
                {"llama-2-70b", 2, 21.32}, {"llama-2-70b", 4, 38.01}, {"llama-2-70b", 8, 62.50}};
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        t_library_engine(rows[i].model, "a100-80g", "bare-intranode", &s);
        s.deployment.tensor_parallel = rows[i].tp;
        ck_assert(s.engine.allreduce == SCN_AR_INTRANODE);
        ck_assert(s.engine.oneshot_max == 256 * KIB);   /* kOneShotThreshBytes */
        ck_assert(s.engine.custom_max == 10 * MIB);     /* kTwoShotThreshBytes */
        ck_assert_int_eq(s.engine.allreduce_copies, 2); /* funcol's clone + the staging cudaMemcpyAsync */
        kv_cache_cfg c = kv_cache_cfg_make(&s, SCN_DTYPE_BF16, 0, 0);
        kv_seq_work w = {1, 106};
        kv_step_cost t = kv_step_time(&s, &c, SCN_ATTN_FLASH, &w, 1);
        ck_assert_int_eq(t.allreduce.algo, KV_COLL_ONESHOT);
        double err = 1.0 / t.seconds / rows[i].readme - 1;
        /* Within 8 %: the model's one-shot step lands 0-7 % slow of every README figure. */
        ck_assert_msg(fabs(err) < 0.08, "%s TP %d: %.2f tok/s vs %.2f (%+.1f %%)", rows[i].model, rows[i].tp,
                      1.0 / t.seconds, rows[i].readme, 100 * err);
    }
}
END_TEST

/* PyTorch's intra-node all-reduce sizes itself by its own rule, not vLLM's (pytorch/pytorch
 * torch/csrc/distributed/c10d/intra_node_comm.cu @1023fda9, selectAllReduceAlgo: one-shot while
 * the message is at most kOneShotThreshBytes = 256 KiB, two-shot at most kTwoShotThreshBytes =
 * 10 MiB, whatever the group size; symm_mem/intra_node_comm.cpp: the rendezvous gives up unless
 * every pair has NVLink, so PCIe GPUs run NCCL; isIntraNodeCommSupported is false on ROCm). */
START_TEST(intranode_allreduce_sizes_like_pytorch)
{
    t_library_engine("llama-2-70b", "a100-80g", "bare-intranode", &s);
    const scn_hardware *hw = &s.hardware;
    const scn_engine *e = &s.engine;
    /* Both limits inclusive: exactly 256 KiB is still one-shot on 8 (vLLM: two-shot). */
    ck_assert_int_eq(kv_allreduce_time(hw, e, 8, 256 * KIB).algo, KV_COLL_ONESHOT);
    ck_assert_int_eq(kv_allreduce_time(hw, e, 8, 256 * KIB + 512).algo, KV_COLL_TWOSHOT);
    ck_assert_int_eq(kv_allreduce_time(hw, e, 8, 10 * MIB).algo, KV_COLL_TWOSHOT);
    ck_assert_int_eq(kv_allreduce_time(hw, e, 8, 10 * MIB + 512).algo, KV_COLL_RING);
    /* The same 256 KiB on 4 and 2 GPUs (vLLM: one-shot to 512 KiB on 4, always on 2). */
    ck_assert_int_eq(kv_allreduce_time(hw, e, 4, 384 * KIB).algo, KV_COLL_TWOSHOT);
    ck_assert_int_eq(kv_allreduce_time(hw, e, 2, 1 * MIB).algo, KV_COLL_TWOSHOT);
    ck_assert_int_eq(kv_allreduce_time(hw, e, 2, 16 * KIB).algo, KV_COLL_ONESHOT);
    /* The price is the shared one-shot/two-shot formula plus the profile's two copies (each
     * reads and writes the message once: 2 x 2 x bytes at the profile's bandwidth share). */
    double bw = hw->memory_bandwidth * hw->eff_bandwidth;
    kv_coll_cost two = kv_allreduce_algo(hw, 2, 1 * MIB, KV_COLL_TWOSHOT);
    ck_assert(near(kv_allreduce_time(hw, e, 2, 1 * MIB).seconds, two.seconds + 2 * 2.0 * MIB / bw));
    ck_assert_int_eq(kv_allreduce_time(hw, e, 2, 1 * MIB).copies, 2);
    /* Past 10 MiB NCCL takes it, in place on funcol's clone: one copy, not the staging one. */
    kv_coll_cost ring = kv_allreduce_algo(hw, 8, 16 * MIB, KV_COLL_RING);
    kv_coll_cost big = kv_allreduce_time(hw, e, 8, 16 * MIB);
    ck_assert_int_eq(big.copies, 1);
    ck_assert(near(big.seconds, ring.seconds + 2.0 * 16 * MIB / bw));
    /* No NVLink, no intra-node kernels: two L40S (PCIe) run NCCL's ring, where vLLM's custom
     * all-reduce would still take a PCIe pair; nor do MI300X ranks (a ROCm build). */
    t_library_engine("llama-2-7b", "l40s", "bare-intranode", &s);
    ck_assert_int_eq(kv_allreduce_time(&s.hardware, &s.engine, 2, 16 * KIB).algo, KV_COLL_RING);
    ck_assert_int_eq(kv_allreduce_time(&s.hardware, &s.engine, 2, 16 * KIB).copies, 1);
    /* and the step counts one copy kernel an all-reduce: 2 per layer x 32 layers x (1 + 1) */
    s.deployment.tensor_parallel = 2;
    kv_cache_cfg cc = kv_cache_cfg_make(&s, SCN_DTYPE_BF16, 0, 0);
    kv_seq_work w = {1, 106};
    kv_step_cost st = kv_step_time(&s, &cc, SCN_ATTN_FLASH, &w, 1);
    ck_assert(near(st.op[KV_OP_ALLREDUCE].kernels, 2.0 * 32 * 2));
    scn_engine v = s.engine;
    v.allreduce = SCN_AR_CUSTOM;
    ck_assert_int_eq(kv_allreduce_time(&s.hardware, &v, 2, 16 * KIB).algo, KV_COLL_ONESHOT);
    t_library_engine("llama-2-7b", "mi300x", "bare-intranode", &s);
    ck_assert_int_eq(kv_allreduce_time(&s.hardware, &s.engine, 2, 16 * KIB).algo, KV_COLL_RING);
}
END_TEST

Suite *suite_collective(void)
{
    Suite *su = suite_create("collective");
    TCase *tc = tcase_create("collective");
    tcase_add_test(tc, custom_allreduce_by_hand);
    tcase_add_test(tc, engines_choose_by_size);
    tcase_add_test(tc, alltoall_and_p2p_by_hand);
    tcase_add_test(tc, tp8_beats_tp4_with_published_allreduce_share);
    tcase_add_test(tc, nccl_matches_published_allreduces);
    tcase_add_test(tc, oneshot_matches_published_allreduces);
    tcase_add_test(tc, eager_torch_allreduce_in_a_step);
    tcase_add_test(tc, nccl_latency_is_checked);
    tcase_add_test(tc, functional_allreduce_copies_its_input);
    tcase_add_test(tc, a100_allreduce_never_beats_h100);
    tcase_add_test(tc, gpt_fast_lm_head_is_replicated);
    tcase_add_test(tc, gpt_fast_intra_node_comm_matches_readme);
    tcase_add_test(tc, intranode_allreduce_sizes_like_pytorch);
    suite_add_tcase(su, tc);
    return su;
}
