/* test_offload.c: KV offload tiers and swap preemption against cases solved by hand, and the
 * loader's located errors for them. Block bytes, transfer times and step times are computed
 * here from the datasheet figures and the cost model directly. */
#include "tests.h"
#include "../model/kv_model.h"
#include "../model/kv_offload.h"
#include "../planner/plan.h"
#include "../sim/sched.h"
#include "../sim/sim.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static scn_scenario s;
enum { MAX_ROWS = 64 };
static sim_request_row rows[MAX_ROWS];
static long n_rows;

static int keep_row(void *ud, const sim_request_row *r)
{
    (void)ud;
    if (r->id < MAX_ROWS) rows[r->id] = *r;
    n_rows++;
    return 0;
}

static void load(const char *text, const char *const *sets, int n)
{
    scn_error e;
    scn_status st = t_load(text, sets, n, &s, &e);
    char msg[1500];
    scn_error_format(&e, msg, sizeof msg);
    ck_assert_msg(st == SCN_OK, "%s", msg);
}

static int run(const sim_choice *c, long blocks, sim_metrics *m)
{
    sim_executor ex;
    ck_assert_int_eq(sim_executor_model(&s, c, &ex), 0);
    sim_run_opts o = {.seed = s.seed, .on_request = keep_row, .kv_blocks_override = blocks};
    n_rows = 0;
    char err[512] = "";
    int rc = sim_run(&s, c, &ex, &o, m, err, sizeof err);
    ex.free(ex.ctx);
    ck_assert_msg(rc == SIM_OK, "%s", err);
    return rc;
}

/* Llama-3-8B in bf16 on one GPU: 2 (K, V) x 32 layers x 8 KV heads x 128 dims x 2 bytes =
 * 128 KiB per token, so a 16-token block is 2 MiB. */
#define BLOCK_BYTES (16.0 * 2 * 32 * 8 * 128 * 2)
/* h100-sxm's host link: PCIe Gen5 x16, 64 GB/s at efficiency 0.90 (no latency given). */
#define HOST_BW (64e9 * 0.90)

/* Four documents of 96 tokens (6 blocks) asked about in turn, A B C D A B ..., one request at a
 * time (100 s apart), each with a 16-token question (one block) and 2 output tokens. A request
 * needs 8 blocks (positions 0..112), and the GPU pool is exactly 8: every request evicts its
 * predecessor's 7 registered blocks (6 of the document, 1 of the question; the partial output
 * block is never registered). The working set, 4 x 6 = 24 blocks, is 3x the pool. */
static void load_documents(int n)
{
    char trace[4096] = "";
    for (int i = 0; i < n; i++) {
        char line[64];
        snprintf(line, sizeof line, "%d,112,2,%d\n", 100 * i, i % 4);
        strcat(trace, line);
    }
    char set[700];
    snprintf(set, sizeof set, "workload={arrival: {process: trace, trace: '%s'}, shared_prefix: {groups: 4, tokens: 96}}",
             t_write("docs.csv", trace));
    const char *sets[] = {set};
    load("model: llama-3-8b\nhardware: h100-sxm\nworkload:\n  requests: 1\n"
         "options: {kv_layout: paged, block_size: 16, prefix_cache: on, kv_offload: [off, cpu],\n"
         "          kv_offload_capacity: {cpu: 2 GiB}}\n", sets, 1);
}

START_TEST(working_set_three_times_the_pool)
{
    enum { N = 20 };
    load_documents(N);
    sim_choice c = sim_choice_first(&s);
    ck_assert_int_eq(c.kv_offload, SCN_OFFLOAD_OFF);
    sim_metrics off, on;
    run(&c, 8, &off);
    /* Without offload every document is evicted before it comes round again: no hit at all. */
    ck_assert_int_eq(off.requests, N);
    ck_assert(off.prefix_hit_rate == 0);
    ck_assert(off.tier_bytes[0] == 0 && off.tier_hit_rate[0] == 0);
    c.kv_offload = SCN_OFFLOAD_CPU;
    run(&c, 8, &on);
    /* With a host tier (2 GiB = 1024 blocks: nothing is ever dropped) the first four requests
     * miss and every later one reloads its document's 6 blocks = 96 tokens from the host. */
    double hit = (double)(N - 4) * 96 / ((double)N * 112);
    ck_assert_msg(fabs(on.tier_hit_rate[0] - hit) < 1e-12, "cpu hit rate %.12g, by hand %.12g", on.tier_hit_rate[0], hit);
    ck_assert(fabs(on.prefix_hit_rate - hit) < 1e-12);
    /* Bytes through the host link: 7 spilled per request after the first, 6 reloaded per warm one. */
    double spilled = 7.0 * (N - 1), reloaded = 6.0 * (N - 4);
    ck_assert_msg(fabs(on.tier_bytes[0] - (spilled + reloaded) * BLOCK_BYTES) < 1,
                  "cpu bytes %.17g, by hand %.17g", on.tier_bytes[0], (spilled + reloaded) * BLOCK_BYTES);
    /* Each warm admission waits for its 6-block reload: 12 MiB at 57.6 GB/s. */
    double reload = 6 * BLOCK_BYTES / HOST_BW;
    ck_assert(fabs(on.tier_xfer_s[0] - (N - 4) * reload) < 1e-12);
    /* A warm request's TTFT is the reload plus the prefill of its 16-token question on 96
     * reloaded tokens; a cold one's the full 112-token prefill. */
    kv_cache_cfg kc = kv_cache_cfg_make(&s, c.kv_dtype, 0, 0);
    kv_seq_work warm = {16, 96}, cold = {112, 0};
    double fe = kv_frontend_seconds(&s, 112);   /* the front end tokenises every prompt in full */
    double t_warm = kv_step_time(&s, &kc, c.attention, &warm, 1).seconds + reload + fe;
    double t_cold = kv_step_time(&s, &kc, c.attention, &cold, 1).seconds + fe;
    ck_assert_msg(fabs(rows[0].ttft - t_cold) < 1e-12, "cold ttft %.12g vs %.12g", rows[0].ttft, t_cold);
    ck_assert_msg(fabs(rows[7].ttft - t_warm) < 1e-12, "warm ttft %.12g vs %.12g", rows[7].ttft, t_warm);
    ck_assert_int_eq(rows[7].cached, 96);
    /* Occupancy: the tier never fills (it holds at most 3 documents and the old questions). */
    ck_assert(on.tier_occupancy[0] > 0 && on.tier_occupancy[0] < (3 * 6.0 + N) / 1024);
    /* The cost model's comparison agrees: reloading 96 tokens beats recomputing them. */
    kv_offload_cmp cmp = kv_offload_compare(&s, &kc, 16, KV_TIER_CPU, 112, 96);
    ck_assert(fabs(cmp.bytes - 6 * BLOCK_BYTES) < 1e-6 && fabs(cmp.reload_s - reload) < 1e-15);
    ck_assert(cmp.recompute_s > 0);
}
END_TEST

START_TEST(disk_tier_takes_what_the_host_drops)
{
    /* A host tier of 7 blocks (14 MiB) holds one predecessor's blocks only; NVMe holds the rest.
     * Spills: request k >= 2 evicts 7 blocks into the host tier, which passes its oldest 7 down
     * once full, so documents come back from NVMe, 6 blocks each, staged through host memory. */
    enum { N = 12 };
    load_documents(N);
    sim_choice c = sim_choice_first(&s);
    c.kv_offload = SCN_OFFLOAD_CPU_DISK;
    s.options.offload_cpu_bytes = 7 * BLOCK_BYTES;
    sim_metrics m;
    run(&c, 8, &m);
    ck_assert(m.tier_hit_rate[0] == 0);
    double hit = (double)(N - 4) * 96 / ((double)N * 112);
    ck_assert_msg(fabs(m.tier_hit_rate[1] - hit) < 1e-12, "disk hit rate %.12g, by hand %.12g", m.tier_hit_rate[1], hit);
    /* NVMe: 7 GB/s at efficiency 1, then the host link. */
    double reload = 6 * BLOCK_BYTES / 7e9 + 6 * BLOCK_BYTES / HOST_BW;
    ck_assert(fabs(m.tier_xfer_s[1] - (N - 4) * reload) < 1e-12);
}
END_TEST

/* The remote store as a third tier (per replica): with a host tier of 7 blocks, a document is
 * pushed out of the host by the next request's blocks. With cpu+remote it goes straight to the
 * remote store (the absent disk is skipped); with cpu+disk+remote and a 7-block disk tier too,
 * by the time the document comes back (three other documents later) host holds the third,
 * NVMe the second and the remote store the document: every warm hit comes from the store,
 * staged through host memory: its link, then the host link. */
START_TEST(remote_tier_below_the_others)
{
    enum { N = 12 };
    const scn_offload how[] = {SCN_OFFLOAD_CPU_REMOTE, SCN_OFFLOAD_CPU_DISK_REMOTE};
    for (int v = 0; v < 2; v++) {
        load_documents(N);
        /* An RDMA store: 200 Gb/s NIC per GPU = 25 GB/s at an illustrative efficiency of 0.8. */
        s.hardware.remote = (scn_tier){.capacity = 1e12, .bandwidth = 25e9, .efficiency = 0.8};
        sim_choice c = sim_choice_first(&s);
        c.kv_offload = how[v];
        s.options.offload_cpu_bytes = 7 * BLOCK_BYTES;
        s.options.offload_disk_bytes = 7 * BLOCK_BYTES;
        sim_metrics m;
        run(&c, 8, &m);
        ck_assert(m.tier_hit_rate[0] == 0 && m.tier_hit_rate[1] == 0);
        double hit = (double)(N - 4) * 96 / ((double)N * 112);
        ck_assert_msg(fabs(m.tier_hit_rate[2] - hit) < 1e-12, "remote hit rate %.12g, by hand %.12g", m.tier_hit_rate[2], hit);
        double reload = 6 * BLOCK_BYTES / (25e9 * 0.8) + 6 * BLOCK_BYTES / HOST_BW;
        ck_assert_msg(fabs(m.tier_xfer_s[2] - (N - 4) * reload) < 1e-12, "remote s %.12g, by hand %.12g", m.tier_xfer_s[2],
                      (N - 4) * reload);
        /* Blocks into the store: every request from the third (cpu+remote) or the fourth on pushes
         * 7 out of the tier above; 6 of each warm request's come back out. */
        double in = 7.0 * (N - (v ? 3 : 2)), out = 6.0 * (N - 4);
        ck_assert_msg(fabs(m.tier_bytes[2] - (in + out) * BLOCK_BYTES) < 1, "remote bytes %.17g, by hand %.17g",
                      m.tier_bytes[2], (in + out) * BLOCK_BYTES);
        ck_assert(fabs(m.tier_bytes[1] - (v ? 7.0 * (N - 2) * BLOCK_BYTES : 0)) < 1);
    }
}
END_TEST

/* Layerwise reload overlap (docs/cost-model.md, "Layerwise reload overlap"): a reload of T split
 * over L layers, layer i + 1 loading while layer i computes, delays a step of compute C by
 * max(T / L, T - C (L - 1) / L). */
START_TEST(layerwise_overlap_by_hand)
{
    /* 8 ms over 4 layers against a 4 ms step: per layer 2 ms loads against 1 ms computes, so
     * loading binds: 4 x 2 + 1 (the last layer's compute) - 4 = 5 ms exposed. */
    ck_assert(fabs(kv_layerwise_exposed_s(8e-3, 4e-3, 4) - 5e-3) < 1e-15);
    /* 2 ms against 4 ms: 0.5 ms loads hide behind 1 ms computes but the first: 0.5 ms. */
    ck_assert(fabs(kv_layerwise_exposed_s(2e-3, 4e-3, 4) - 0.5e-3) < 1e-15);
    ck_assert(kv_layerwise_exposed_s(3e-3, 4e-3, 1) == 3e-3);   /* one layer: nothing to overlap */
    ck_assert(kv_layerwise_exposed_s(0, 4e-3, 4) == 0);
    /* The scheduler's charge: a 1 ms swap-in in full, 6 ms + 2 ms of reloads (host, NVMe) over
     * 4 layers against a 4 ms step: 5 ms, shared 3:1 between the tiers. */
    static scn_scenario x;
    static sim_acc acc;
    memset(&x, 0, sizeof x);
    memset(&acc, 0, sizeof acc);
    x.model.layers = 4;
    x.engine.kv_layerwise = true;
    sim_sched e = {.s = &x, .acc = &acc, .xfer_s = 9e-3, .reload_s = {6e-3, 2e-3, 0}};
    ck_assert(fabs(sim_sched_wait_s(&e, 4e-3) - 6e-3) < 1e-15);
    ck_assert(fabs(acc.tier_xfer_s[0] - 3.75e-3) < 1e-15 && fabs(acc.tier_xfer_s[1] - 1.25e-3) < 1e-15);
    x.engine.kv_layerwise = false;   /* all before the step: 9 ms */
    ck_assert(fabs(sim_sched_wait_s(&e, 4e-3) - 9e-3) < 1e-15);
    /* End to end on the documents: with layerwise loads a warm request's TTFT is its 16-token
     * prefill plus what of the 6-block reload the prefill's 32 layers do not hide. */
    enum { N = 8 };
    load_documents(N);
    s.engine.kv_layerwise = true;
    sim_choice c = sim_choice_first(&s);
    c.kv_offload = SCN_OFFLOAD_CPU;
    sim_metrics m;
    run(&c, 8, &m);
    kv_cache_cfg kc = kv_cache_cfg_make(&s, c.kv_dtype, 0, 0);
    kv_seq_work warm = {16, 96};
    double step = kv_step_time(&s, &kc, c.attention, &warm, 1).seconds, reload = 6 * BLOCK_BYTES / HOST_BW;
    ck_assert_int_eq(s.model.layers, 32);
    double exposed = fmax(reload / 32, reload - step * 31 / 32);
    ck_assert_msg(exposed < reload, "the case must overlap something: %g vs %g", exposed, reload);
    step += kv_frontend_seconds(&s, 112);   /* the front end's tokenising, as above */
    ck_assert_msg(fabs(rows[7].ttft - (step + exposed)) < 1e-12, "warm ttft %.12g vs %.12g", rows[7].ttft, step + exposed);
    ck_assert(fabs(m.tier_xfer_s[0] - (N - 4) * exposed) < 1e-12);
}
END_TEST

/* The profiles that had no tiers now carry their cards' host links (datasheets: PCIe Gen4 x16
 * = 32 GB/s each way, Gen5 x16 = 64 GB/s) and the reference (or default) system's host memory
 * and NVMe per GPU, and offload to host memory and NVMe runs on each. */
START_TEST(profiles_have_host_links)
{
    const struct { const char *hw; double link, host, nvme, nvme_bw; } P[] = {
        {"a100-40g", 32e9, 1e12 / 8, 4 * 3.84e12 / 8, 7e9 / 2},   /* DGX A100 320GB */
        {"h100-pcie", 64e9, 2e12 / 8, 3.84e12, 7e9},                /* DGX H100's per GPU, carried over */
        {"l40s", 32e9, 1e12 / 8, 4 * 3.84e12 / 8, 7e9 / 2},       /* DGX A100's per GPU, carried over */
        {"mi300x", 64e9, 2e12 / 8, 3.84e12, 7e9},
        {"rtx-4090", 32e9, 128e9, 2e12, 7.45e9},                    /* a single-GPU workstation */
    };
    for (size_t i = 0; i < sizeof P / sizeof P[0]; i++) {
        char text[600];
        snprintf(text, sizeof text, "model: llama-3.2-1b\nhardware: %s\nworkload: {requests: 1, arrival: {process: poisson, "
                 "rate: 1/s}, prompt_tokens: 64, output_tokens: 8}\noptions: {prefix_cache: on, kv_offload: cpu+disk}\n", P[i].hw);
        load(text, NULL, 0);
        const scn_hardware *h = &s.hardware;
        ck_assert_msg(h->host.bandwidth == P[i].link && fabs(h->host.capacity - P[i].host) < 1 && h->host.efficiency == 0.90,
                      "%s host %g B/s %g B", P[i].hw, h->host.bandwidth, h->host.capacity);
        ck_assert_msg(fabs(h->nvme.capacity - P[i].nvme) < 1 && fabs(h->nvme.bandwidth - P[i].nvme_bw) < 1, "%s nvme %g B %g B/s",
                      P[i].hw, h->nvme.capacity, h->nvme.bandwidth);
        ck_assert(h->remote.bandwidth == 0);
    }
}
END_TEST

/* Two 16-token prompts arrive together on a pool of 3 blocks, 20 output tokens each. Step 1
 * prefills both (a block each); step 2 needs a second block for each: A takes the last free
 * one, B, the newest, preempts itself. A finishes in 3 blocks; then B comes back. */
static void two_on_three_blocks(scn_preemption how, sim_metrics *m)
{
    char set[600];
    snprintf(set, sizeof set, "workload={arrival: {process: trace, trace: '%s'}}", t_write("two.csv", "0,16,20\n0,16,20\n"));
    const char *sets[] = {set};
    load("model: llama-3-8b\nhardware: h100-sxm\nworkload:\n  requests: 1\n"
         "options: {kv_layout: paged, block_size: 16, preemption: [recompute, swap]}\n", sets, 1);
    sim_choice c = sim_choice_first(&s);
    c.preemption = how;
    run(&c, 3, m);
    ck_assert_int_eq(m->requests, 2);
}

START_TEST(swap_against_recompute_counted_by_hand)
{
    sim_metrics rec, swp;
    two_on_three_blocks(SCN_PREEMPT_RECOMPUTE, &rec);
    double ttft_b = rows[1].ttft;
    ck_assert_int_eq(rec.preemptions, 1);
    ck_assert_int_eq(rec.swaps, 0);
    ck_assert(rec.swap_bytes == 0 && rec.swap_xfer_s == 0);
    two_on_three_blocks(SCN_PREEMPT_SWAP, &swp);
    ck_assert_int_eq(swp.preemptions, 1);
    ck_assert_int_eq(swp.swaps, 1);
    /* B held one block when it was preempted: out to the host and back in, 2 MiB each way. */
    ck_assert(fabs(swp.swap_bytes - 2 * BLOCK_BYTES) < 1e-6);
    ck_assert(fabs(swp.swap_xfer_s - 2 * BLOCK_BYTES / HOST_BW) < 1e-15);
    /* B's first token came out of step 1, before it was preempted: the same either way. */
    ck_assert_int_eq(rows[1].preemptions, 1);
    ck_assert(rows[1].ttft == ttft_b);
}
END_TEST

START_TEST(loader_errors_are_located)
{
    scn_scenario x;
    scn_error e;
    /* The host tier is missing on a profile without host memory: located at the option. */
    scn_status st = t_load("model: tiny-cpu\nhardware: cpu-local\nworkload: {requests: 1, arrival: {process: poisson, rate: 1/s}, prompt_tokens: 64, output_tokens: 8}\n"
                           "options:\n  prefix_cache: on\n  kv_offload: [off, cpu]\n", NULL, 0, &x, &e);
    ck_assert_int_eq(st, SCN_E_DATA);
    ck_assert_str_eq(e.path, "options.kv_offload");
    ck_assert_int_eq(e.line, 6);
    ck_assert_int_eq(e.col, 15);
    ck_assert_msg(strstr(e.msg, "cpu-local") != NULL, "%s", e.msg);
    /* A tier the format does not know. */
    st = t_load("model: llama-3-8b\nhardware: h100-sxm\nworkload: {requests: 1, arrival: {process: poisson, rate: 1/s}, prompt_tokens: 64, output_tokens: 8}\noptions: {kv_offload: [off, gpu]}\n", NULL, 0,
                &x, &e);
    ck_assert_int_eq(st, SCN_E_DATA);
    ck_assert_str_eq(e.path, "options.kv_offload[1]");
    ck_assert_int_eq(e.line, 4);
    /* A capacity without a unit, and a host tier without its efficiency. */
    st = t_load("model: llama-3-8b\nhardware: h100-sxm\nworkload: {requests: 1, arrival: {process: poisson, rate: 1/s}, prompt_tokens: 64, output_tokens: 8}\noptions: {kv_offload_capacity: {cpu: 100}}\n",
                NULL, 0, &x, &e);
    ck_assert_int_eq(st, SCN_E_DATA);
    ck_assert_str_eq(e.path, "options.kv_offload_capacity.cpu");
    st = t_load("model: tiny-cpu\nhardware: {extends: cpu-local, host: {capacity: 1 TB, bandwidth: 64 GB/s}}\n"
                "workload: {requests: 1, arrival: {process: poisson, rate: 1/s}, prompt_tokens: 64, output_tokens: 8}\n", NULL, 0, &x, &e);
    ck_assert_int_eq(st, SCN_E_DATA);
    ck_assert_str_eq(e.path, "hardware.host.efficiency");
    /* The CLI turns it into exit 65 with file:line:col. */
    const char *path = t_write("bad-offload.yaml", "model: tiny-cpu\nhardware: cpu-local\nworkload: {requests: 1, arrival: {process: poisson, rate: 1/s}, prompt_tokens: 64, output_tokens: 8}\n"
                                                   "options:\n  prefix_cache: on\n  preemption: swap\n");
    char cmd[1200], out[4096], err[4096];
    snprintf(cmd, sizeof cmd, "simulate %s --no-db", path);
    ck_assert_int_eq(t_run(cmd, out, sizeof out, err, sizeof err), 65);
    char where[1100];
    snprintf(where, sizeof where, "%s:6:15: options.preemption:", path);
    ck_assert_msg(strstr(err, where) != NULL, "%s", err);
    /* Offload with the prefix cache off in every choice: there is nothing to spill. */
    st = t_load("model: llama-3-8b\nhardware: h100-sxm\nworkload: {requests: 1, arrival: {process: poisson, rate: 1/s}, prompt_tokens: 64, output_tokens: 8}\n"
                "options:\n  prefix_cache: off\n  kv_offload: cpu\n", NULL, 0, &x, &e);
    ck_assert_int_eq(st, SCN_E_DATA);
    ck_assert_str_eq(e.path, "options.kv_offload");
    ck_assert_int_eq(e.line, 6);
    ck_assert_int_eq(e.col, 15);
    /* A remote store the profile lacks. */
    st = t_load("model: llama-3-8b\nhardware: h100-sxm\nworkload: {requests: 1, arrival: {process: poisson, rate: 1/s}, prompt_tokens: 64, output_tokens: 8}\n"
                "options:\n  prefix_cache: on\n  kv_offload: [cpu, cpu+remote]\n", NULL, 0, &x, &e);
    ck_assert_int_eq(st, SCN_E_DATA);
    ck_assert_str_eq(e.path, "options.kv_offload");
    ck_assert_int_eq(e.line, 6);
    ck_assert_msg(strstr(e.msg, "remote store") != NULL, "%s", e.msg);
    /* With a remote store given, it loads, and so does its capacity option. */
    st = t_load("model: llama-3-8b\nhardware: {extends: h100-sxm, remote: {capacity: 2 TB, bandwidth: 25 GB/s, efficiency: 0.8}}\n"
                "workload: {requests: 1, arrival: {process: poisson, rate: 1/s}, prompt_tokens: 64, output_tokens: 8}\n"
                "options:\n  prefix_cache: on\n  kv_offload: cpu+disk+remote\n  kv_offload_capacity: {remote: 1 TB}\n", NULL, 0, &x, &e);
    char em[1500];
    scn_error_format(&e, em, sizeof em);
    ck_assert_msg(st == SCN_OK, "%s", em);
    ck_assert(x.options.kv_offload[0] == SCN_OFFLOAD_CPU_DISK_REMOTE && x.options.offload_remote_bytes == 1e12);
    ck_assert(kv_tier_capacity(&x, KV_TIER_REMOTE) == 1e12);
    /* The engine says how reloads are charged: SGLang's profile loads layer by layer, vLLM's
     * before the step; a value that is not a boolean is located. */
    const char *eng[] = {"sglang", "vllm", "{extends: vllm, kv_offload: {layerwise: yes please}}"};
    for (int i = 0; i < 3; i++) {
        char text[600];
        snprintf(text, sizeof text, "model: llama-3-8b\nhardware: h100-sxm\nengine: %s\n"
                 "workload: {requests: 1, arrival: {process: poisson, rate: 1/s}, prompt_tokens: 64, output_tokens: 8}\n", eng[i]);
        st = t_load(text, NULL, 0, &x, &e);
        if (i < 2) {
            ck_assert_int_eq(st, SCN_OK);
            ck_assert(x.engine.kv_layerwise == (i == 0));
        } else {
            ck_assert_int_eq(st, SCN_E_DATA);
            ck_assert_str_eq(e.path, "engine.kv_offload.layerwise");
            ck_assert_int_eq(e.line, 3);
        }
    }
}
END_TEST

/* End to end: simulate prints and stores the tier metrics, report reads them back. */
START_TEST(simulate_stores_report_shows)
{
    char dbp[700], cmd[2400], scen[1100];
    snprintf(dbp, sizeof dbp, "%s", t_write("offload.db", ""));
    remove(dbp);
    snprintf(scen, sizeof scen, "%s/archetypes/rag-offload.yaml", getenv("KVPLAN_LIBRARY"));
    static char out[1 << 16], err[1 << 14];
    snprintf(cmd, sizeof cmd, "simulate %s --db %s --set workload.requests=300 --set options.kv_offload=cpu --format json", scen, dbp);
    ck_assert_int_eq(t_run(cmd, out, sizeof out, err, sizeof err), 0);
    ck_assert_msg(strstr(out, "\"offload_cpu_hit_rate\"") && strstr(out, "\"offload_cpu_bytes\""), "%s", out);
    snprintf(cmd, sizeof cmd, "report %s --db %s --format json", scen, dbp);
    ck_assert_int_eq(t_run(cmd, out, sizeof out, err, sizeof err), 0);
    ck_assert_msg(strstr(out, "\"offload\": [") && strstr(out, "\"tier\": \"cpu\"") && strstr(out, "\"tier\": \"swap\""),
                  "%.2000s", out);
    /* A run without offload adds no row: the stored key carries no kv_offload. */
    snprintf(cmd, sizeof cmd, "simulate %s --db %s --set workload.requests=100 --set options.kv_offload=off --format json", scen, dbp);
    ck_assert_int_eq(t_run(cmd, out, sizeof out, err, sizeof err), 0);
    snprintf(cmd, sizeof cmd, "report %s --db %s --format json", scen, dbp);
    ck_assert_int_eq(t_run(cmd, out, sizeof out, err, sizeof err), 0);
    int n_tier = 0;
    for (const char *p = out; (p = strstr(p, "\"tier\": ")); p++) n_tier++;
    ck_assert_int_eq(n_tier, 3);   /* cpu, disk and swap of the one offloading run */
}
END_TEST

/* The planner on the RAG archetype: offload is recommended, with its reason and the rule of
 * thumb's numbers; on a workload whose documents fit HBM the gate keeps offload off. */
static void plan_file(const char *file, const char *const *sets, int n, plan_result *r, char lines[][PLAN_LINE], int *nl)
{
    char path[700];
    snprintf(path, sizeof path, "%s/%s", getenv("KVPLAN_LIBRARY"), file);
    scn_error e;
    ck_assert_int_eq(scn_scenario_load(path, sets, n, &s, &e), SCN_OK);
    ck_assert_int_eq(plan_enumerate(&s, r), 0);
    char err[512];
    ck_assert_int_eq(plan_evaluate(&s, r, 2, 0, 1, NULL, NULL, err, sizeof err), 0);
    plan_rank(&s, r);
    *nl = plan_explain(&s, r, lines, 24);
}

START_TEST(planner_recommends_offload_where_it_pays)
{
    static plan_result r;
    static char lines[24][PLAN_LINE];
    int nl;
    const char *sets[] = {"workload.requests=1500"};
    plan_file("archetypes/rag-offload.yaml", sets, 1, &r, lines, &nl);
    ck_assert_int_ge(r.best, 0);
    ck_assert_int_ne(r.c[r.best].c.kv_offload, SCN_OFFLOAD_OFF);
    /* Measurably better than the same candidate without offload (the gate let it through). */
    for (int i = 0; i < r.n; i++)
        if (r.c[i].c.kv_offload == SCN_OFFLOAD_OFF) ck_assert(plan_intervals_separate(r.c[i].obj, r.c[r.best].obj));
    bool reason = false;
    for (int i = 0; i < nl; i++) reason |= strstr(lines[i], "KV offload: recommended") != NULL;
    ck_assert_msg(reason, "%s", nl ? lines[0] : "no lines");
    plan_rule rules[8];
    ck_assert_int_eq(plan_rules(&s, &r, rules, 8), 5);
    ck_assert_msg(!strcmp(rules[4].verdict, "holds") && strstr(rules[4].evidence, "so the rule says offload pays") &&
                  strstr(rules[4].evidence, "it pays"), "%s: %s", rules[4].verdict, rules[4].evidence);
    plan_result_free(&r);
    /* Two 3000-token system prompts fit HBM many times over: nothing is ever evicted, offload
     * changes nothing, and the recommendation keeps it off. */
    const char *fits[] = {"workload.requests=600", "options.kv_layout=paged", "options.prefix_cache=on", "options.kv_dtype=bf16",
                          "options.scheduler=chunked", "options.kv_offload=[off, cpu]"};
    plan_file("archetypes/chat-shared-prompt.yaml", fits, 6, &r, lines, &nl);
    ck_assert_int_ge(r.best, 0);
    ck_assert_int_eq(r.c[r.best].c.kv_offload, SCN_OFFLOAD_OFF);
    reason = false;
    for (int i = 0; i < nl; i++) reason |= strstr(lines[i], "KV offload: not recommended") != NULL;
    ck_assert(reason);
    ck_assert_int_eq(plan_rules(&s, &r, rules, 8), 5);
    ck_assert_msg(!strcmp(rules[4].verdict, "holds") && strstr(rules[4].evidence, "does not pay"), "%s: %s", rules[4].verdict,
                  rules[4].evidence);
    plan_result_free(&r);
}
END_TEST

/* Disaggregated pools keep their own tiers: the prefill pool, where prefix hits happen, reloads
 * from host memory; with offload off nothing moves. */
START_TEST(disaggregated_pools_offload)
{
    load("model: llama-3-8b\nhardware: h100-sxm\n"
         "deployment: {gpu_memory_utilization: 0.3, disaggregation: {prefill: {replicas: 1}, decode: {replicas: 1}}}\n"
         "workload:\n  requests: 200\n  arrival: {process: poisson, rate: 4/s}\n"
         "  prompt_tokens: {dist: uniform, min: 500, max: 1500}\n  output_tokens: {dist: uniform, min: 50, max: 150}\n"
         "  shared_prefix: {groups: 50, tokens: 3000, share: 1.0}\n"
         "options: {prefix_cache: on, kv_offload: [off, cpu]}\n", NULL, 0);
    ck_assert(s.deployment.disagg.on);
    sim_choice c = sim_choice_first(&s);
    sim_metrics off, on;
    run(&c, 0, &off);
    ck_assert(off.tier_bytes[0] == 0 && off.tier_hit_rate[0] == 0);
    c.kv_offload = SCN_OFFLOAD_CPU;
    run(&c, 0, &on);
    ck_assert_msg(on.tier_hit_rate[0] > 0 && on.tier_bytes[0] > 0 && on.tier_xfer_s[0] > 0, "hit %g bytes %g",
                  on.tier_hit_rate[0], on.tier_bytes[0]);
    ck_assert(on.prefix_hit_rate > off.prefix_hit_rate);
}
END_TEST

Suite *suite_offload(void)
{
    Suite *su = suite_create("offload");
    TCase *tc = tcase_create("offload");
    tcase_set_timeout(tc, 240);
    tcase_add_test(tc, working_set_three_times_the_pool);
    tcase_add_test(tc, disk_tier_takes_what_the_host_drops);
    tcase_add_test(tc, remote_tier_below_the_others);
    tcase_add_test(tc, layerwise_overlap_by_hand);
    tcase_add_test(tc, profiles_have_host_links);
    tcase_add_test(tc, swap_against_recompute_counted_by_hand);
    tcase_add_test(tc, loader_errors_are_located);
    tcase_add_test(tc, simulate_stores_report_shows);
    tcase_add_test(tc, planner_recommends_offload_where_it_pays);
    tcase_add_test(tc, disaggregated_pools_offload);
    suite_add_tcase(su, tc);
    return su;
}
