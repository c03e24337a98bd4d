/* test_disagg.c: prefill/decode disaggregation against cases solvable by hand: one request
 * through a 1P1D pair (TTFT = prefill step + hand-off, whole and layerwise), a hand-off that
 * waits for the decode pool's blocks, the transfer's bytes across TP layouts, and the loader's
 * located errors. Step times come from calling the cost model directly; hand-off times are
 * derived here from the link's figures (docs/cost-model.md, "KV transfer (disaggregation)"). */
#include "tests.h"
#include "../model/kv_model.h"
#include "../model/kv_transfer.h"
#include "../model/kv_offload.h"
#include "../planner/plan.h"
#include "../sim/sim.h"

#include <jansson.h>
#include <math.h>
#include <sqlite3.h>
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
    if (n_rows < MAX_ROWS) rows[n_rows] = *r;
    n_rows++;
    return 0;
}

static void load(const char *text)
{
    scn_error e;
    scn_status st = t_load(text, NULL, 0, &s, &e);
    char msg[1500];
    scn_error_format(&e, msg, sizeof msg);
    ck_assert_msg(st == SCN_OK, "%s", msg);
}

/* max_waiting: the waiting bound (sim_run_opts.max_waiting; 0 the default). */
static int run_bounded(long blocks, long max_waiting, sim_metrics *m, char *err)
{
    sim_choice ch = sim_choice_first(&s);
    sim_executor ex;
    ck_assert_int_eq(sim_executor_model(&s, &ch, &ex), 0);
    sim_run_opts o = {.seed = s.seed, .on_request = keep_row, .kv_blocks_override = blocks, .max_waiting = max_waiting};
    n_rows = 0;
    int rc = sim_run(&s, &ch, &ex, &o, m, err, 512);
    ex.free(ex.ctx);
    return rc;
}

static int run(long blocks, sim_metrics *m, char *err) { return run_bounded(blocks, 0, m, err); }

static double step(long new_tokens, long context)
{
    sim_choice c = sim_choice_first(&s);
    kv_cache_cfg cfg = kv_cache_cfg_make(&s, c.kv_dtype, c.sink, c.window);
    kv_seq_work w = {new_tokens, context};
    return kv_step_time(&s, &cfg, c.attention, &w, 1).seconds;
}

/* Llama-3-8B: 32 layers x 8 KV heads x 128 dims x 2 (K and V) x 2 bytes (bf16) = 131072 bytes
 * a token. The link: InfiniBand at 25 GB/s and 10 us a hop, achieving the H100 profile's
 * interconnect efficiency 0.70; kv_p2p_time's fixed part is NCCL's Simple-protocol base
 * latency 8.4 us plus one hop at Simple's 3.4/0.6 times the given latency. */
#define KV_PER_TOKEN 131072.0
#define LINK_BW (25e9 * 0.70)
#define LINK_LAT (8.4e-6 + 10e-6 * 3.4 / 0.6)

static const char *pair(char *buf, size_t n, const char *layerwise, int prompt, int output, int requests,
                        const char *arrival)
{
    snprintf(buf, n,
             "model: llama-3-8b\nhardware: h100-sxm\noptions: {kv_layout: paged, block_size: 16, scheduler: continuous}\n"
             "deployment:\n  disaggregation:\n    prefill: {replicas: 1, tensor_parallel: 1}\n"
             "    decode: {replicas: 1, tensor_parallel: 1}\n"
             "    transfer: {link: infiniband, bandwidth: 25 GB/s, latency: 10 us, layerwise: %s}\n"
             "workload:\n  requests: %d\n  arrival: %s\n  prompt_tokens: %d\n  output_tokens: %d\n",
             layerwise, requests, arrival, prompt, output);
    return buf;
}

/* A prompt with no room for one output token within max_model_len is refused on arrival, before
 * the prefill pool, as in a colocated run (test_workload.c, "too_long"): two clients whose every
 * prompt (2000 tokens) reaches max_model_len 1024 each go on to their next request, so all six
 * are refused; at 1000 tokens all six fit and are served. */
static void pair_within(char *y, size_t n, int prompt)
{
    char buf[1024];
    pair(buf, sizeof buf, "false", prompt, 12, 6, "{process: closed, concurrency: 2}");
    const char *at = strstr(buf, "deployment:\n") + strlen("deployment:\n");
    snprintf(y, n, "%.*s  max_model_len: 1024\n%s", (int)(at - buf), buf, at);
}

START_TEST(too_long_prompts_are_refused_before_the_pools)
{
    char y[1200], err[512] = "";
    sim_metrics m;
    pair_within(y, sizeof y, 2000);
    load(y);
    ck_assert_msg(run(0, &m, err) == SIM_OK, "%s", err);
    ck_assert_int_eq(m.too_long, 6);
    ck_assert_int_eq(m.rejected, 6);
    ck_assert_int_eq(m.requests, 0);
    ck_assert_int_eq(n_rows, 0);
    pair_within(y, sizeof y, 1000);
    load(y);
    ck_assert_msg(run(0, &m, err) == SIM_OK, "%s", err);
    ck_assert_int_eq(m.too_long, 0);
    ck_assert_int_eq(m.requests, 6);
}
END_TEST

/* A full waiting queue rejects an arrival before the prefill pool, and its client goes on as
 * after a too-long prompt (sim_workload_next_rejected). Four two-turn conversations, offline (all
 * first turns at t = 0), a waiting bound of 2 on the one prefill instance: first turns 0 and 1 are
 * taken, 2 and 3 rejected, and their second turns are never sent, so the run's total is
 * 8 - 2 = 6: 4 served (two conversations of two turns) and 2 rejected. A total left at 8 (the
 * defect) ended the run with "2 of 8 requests never finished". Then a closed loop as
 * test_workload.c's closed_loop_client_goes_on_after_a_full_queue: eight clients, 14 requests,
 * think time 10 s; of the eight sent at t = 0 (ids 0, 1, 2, 4, ..., 12) the first two are taken and
 * six rejected, whose clients send 3, 5, ..., 13 at 10 s, of which 3 and 5 are taken: 4 served, 10
 * rejected (a client that stopped at its rejection left 0 and 1 to send the rest: 8 served, 6
 * rejected). */
START_TEST(full_queue_rejections_end_conversations_and_clients_go_on)
{
    char y[1024], err[512] = "";
    sim_metrics m;
    pair(y, sizeof y, "false", 400, 12, 8, "{process: offline}\n  conversation: {turns: 2}");
    load(y);
    ck_assert_msg(run_bounded(0, 2, &m, err) == SIM_OK, "%s", err);
    ck_assert_int_eq(m.rejected, 2);
    ck_assert_int_eq(m.requests, 4);
    ck_assert_int_eq(n_rows, 4);
    for (int i = 0; i < n_rows; i++) ck_assert_int_le(rows[i].id, 5);
    pair(y, sizeof y, "false", 400, 12, 14, "{process: closed, concurrency: 8, think_time: 10 s}");
    load(y);
    ck_assert_msg(run_bounded(0, 2, &m, err) == SIM_OK, "%s", err);
    ck_assert_int_eq(m.requests, 4);
    ck_assert_int_eq(m.rejected, 10);
    ck_assert_int_eq(n_rows, 4);
    static const long id[4] = {0, 1, 3, 5};
    for (int i = 0; i < 4; i++) ck_assert_int_eq(rows[i].id, id[i]);
    /* Think time 0: a rejected client sends again when the prefill instance's scheduler next
     * runs (its step's end, or after its pending kick), not at once to the same full queue
     * (sim/disagg.c, refuse). Before, the six turned away at t = 0 were turned away again and
     * again at t = 0 until the 200 requests were spent: 2 served, 198 rejected. */
    pair(y, sizeof y, "false", 400, 12, 200, "{process: closed, concurrency: 8, think_time: 0 s}");
    load(y);
    ck_assert_msg(run_bounded(0, 2, &m, err) == SIM_OK, "%s", err);
    ck_assert_int_eq(m.requests + m.rejected, 200);
    ck_assert_msg(m.requests >= 100, "served %ld, rejected %ld", m.requests, m.rejected);
}
END_TEST

START_TEST(one_request_whole_handoff)
{
    char y[1024], err[512] = "";
    load(pair(y, sizeof y, "false", 1000, 20, 1, "{process: constant, rate: 1/s}"));
    sim_metrics m;
    ck_assert_msg(run(0, &m, err) == SIM_OK, "%s", err);
    ck_assert_int_eq(n_rows, 1);
    double prefill = step(1000, 0);
    double xfer = LINK_LAT + 1000 * KV_PER_TOKEN / LINK_BW;
    /* TTFT = the prefill step + the whole hand-off (the client's first token comes with it); the
     * front end's tokenising delays every token alike, so it is folded into the prefill here. */
    prefill += kv_frontend_seconds(&s, 1000);
    ck_assert_msg(fabs(rows[0].ttft - (prefill + xfer)) < 1e-12, "ttft %.12g vs %.12g", rows[0].ttft, prefill + xfer);
    /* Then 19 decode steps on the decode instance, at contexts 1000 .. 1018. */
    double decode = 0;
    for (int k = 0; k < 19; k++) decode += step(1, 1000 + k);
    ck_assert_msg(fabs(rows[0].e2e - (prefill + xfer + decode)) < 1e-9, "e2e %.12g vs %.12g", rows[0].e2e,
                  prefill + xfer + decode);
    ck_assert_msg(fabs(rows[0].tpot - decode / 19) < 1e-12, "tpot %.12g vs %.12g", rows[0].tpot, decode / 19);
    ck_assert_msg(m.transfer_bytes == 1000 * KV_PER_TOKEN, "bytes %.0f", m.transfer_bytes);
    ck_assert_msg(fabs(m.transfer_mean - xfer) < 1e-12, "transfer %.12g vs %.12g", m.transfer_mean, xfer);
    ck_assert_msg(m.transfer_wait_max == 0, "wait %g", m.transfer_wait_max);
    ck_assert_int_eq(m.prefill_replicas, 1);
    ck_assert_int_eq(m.decode_replicas, 1);
    ck_assert_int_eq(rows[0].replica, 1);   /* decode instances are numbered after the prefill ones */
}
END_TEST

START_TEST(one_request_layerwise)
{
    char y[1024], err[512] = "";
    load(pair(y, sizeof y, "true", 1000, 20, 1, "{process: constant, rate: 1/s}"));
    sim_metrics m;
    ck_assert_msg(run(0, &m, err) == SIM_OK, "%s", err);
    double prefill = step(1000, 0);
    /* 32 messages, one a layer, each latency + 1/32 of the bytes; layer l is ready at
     * l/32 of the prefill. Only the pipeline's tail is left after the prefill. */
    double L = 32, tau = LINK_LAT + 1000 * KV_PER_TOKEN / LINK_BW / L;
    double tail = fmax(tau, L * tau - (L - 1) * prefill / L);
    prefill += kv_frontend_seconds(&s, 1000);   /* the front end, before the engine sees it */
    ck_assert_msg(fabs(rows[0].ttft - (prefill + tail)) < 1e-12, "ttft %.12g vs %.12g", rows[0].ttft, prefill + tail);
    /* Here a layer's share moves faster than a layer computes: only one layer's share shows. */
    ck_assert_msg(tau < prefill / L, "tau %g, layer compute %g", tau, prefill / L);
    ck_assert_msg(fabs(tail - tau) < 1e-15, "tail %g", tail);
    ck_assert_msg(rows[0].ttft < prefill + LINK_LAT + 1000 * KV_PER_TOKEN / LINK_BW, "layerwise is no faster");
}
END_TEST

/* Two requests at t = 0, a pool of 10 blocks of 16 tokens on each side. A 100-token prompt with
 * its first token's slot takes 7 blocks, so each pool holds one request at a time:
 *   prefill of r0 [0, P]; hand-off of r0 [P, P + X] (decode empty);
 *   r1 cannot be prefilled while the prefill instance holds r0's KV: prefill [P + X, 2P + X];
 *   r0 decodes 19 steps [P + X, P + X + D] holding 7, then 8 blocks, leaving 3, then 2: r1's
 *   hand-off (7 blocks) waits from 2P + X to P + X + D, then takes the whole X (a waiting
 *   hand-off cannot have been pipelined behind the prefill): r1's TTFT = P + 2X + D. */
START_TEST(handoff_waits_for_decode_blocks)
{
    char y[1024], err[512] = "";
    load(pair(y, sizeof y, "true", 100, 20, 2, "{process: offline}"));
    sim_metrics m;
    ck_assert_msg(run(10, &m, err) == SIM_OK, "%s", err);
    ck_assert_int_eq(n_rows, 2);
    double P = step(100, 0), X = LINK_LAT + 100 * KV_PER_TOKEN / LINK_BW, D = 0;
    for (int k = 0; k < 19; k++) D += step(1, 100 + k);
    double L = 32, tau = LINK_LAT + 100 * KV_PER_TOKEN / LINK_BW / L;
    double X0 = fmax(tau, L * tau - (L - 1) * P / L);   /* r0's hand-off ran behind its prefill */
    ck_assert_int_eq(rows[0].id, 0);
    ck_assert_msg(fabs(rows[0].ttft - (P + X0)) < 1e-12, "r0 ttft %.12g vs %.12g", rows[0].ttft, P + X0);
    ck_assert_msg(fabs(rows[0].e2e - (P + X0 + D)) < 1e-9, "r0 e2e %.12g vs %.12g", rows[0].e2e, P + X0 + D);
    ck_assert_int_eq(rows[1].id, 1);
    /* r1 queued for the prefill instance until r0's hand-off freed its blocks. */
    ck_assert_msg(fabs(rows[1].queue - (P + X0)) < 1e-12, "r1 queue %.12g vs %.12g", rows[1].queue, P + X0);
    double wait = (P + X0 + D) - (P + X0 + P);
    ck_assert_msg(fabs(m.transfer_wait_max - wait) < 1e-9, "wait %.12g vs %.12g", m.transfer_wait_max, wait);
    ck_assert_msg(fabs(rows[1].ttft - (P + X0 + D + X)) < 1e-9, "r1 ttft %.12g vs %.12g", rows[1].ttft, P + X0 + D + X);
    ck_assert_msg(fabs(rows[1].e2e - (P + X0 + D + X + D)) < 1e-9, "r1 e2e %.12g", rows[1].e2e);
    ck_assert_msg(fabs(m.transfer_wait_mean - wait / 2) < 1e-9, "mean wait %.12g", m.transfer_wait_mean);
    ck_assert_int_eq(m.preemptions, 0);
}
END_TEST

/* Bytes across TP layouts: each decode rank receives its shard; the prefill ranks send them all. */
START_TEST(transfer_bytes_across_tp)
{
    char y[1024];
    load(pair(y, sizeof y, "false", 100, 2, 1, "{process: offline}"));
    kv_cache_cfg cfg = kv_cache_cfg_make(&s, SCN_DTYPE_BF16, 0, 0);
    scn_disagg *d = &s.deployment.disagg;
    /* TP 1 -> TP 2: 8 KV heads split 4 + 4; the one prefill rank sends both halves. */
    d->prefill.tensor_parallel = 1; d->decode.tensor_parallel = 2;
    kv_transfer_cost c = kv_transfer_time(&s, &cfg, 1000, 0, false);
    ck_assert_msg(c.bytes == 1000 * KV_PER_TOKEN && c.bytes_rank == 1000 * KV_PER_TOKEN, "%g %g", c.bytes, c.bytes_rank);
    /* TP 2 -> TP 2: rank to rank, half each. */
    d->prefill.tensor_parallel = 2;
    c = kv_transfer_time(&s, &cfg, 1000, 0, false);
    ck_assert_msg(c.bytes_rank == 500 * KV_PER_TOKEN, "%g", c.bytes_rank);
    ck_assert_msg(fabs(c.whole - (LINK_LAT + 500 * KV_PER_TOKEN / LINK_BW)) < 1e-15, "%g", c.whole);
    /* TP 16 -> TP 16: 8 KV heads cannot split 16 ways, each rank keeps one head (replicated). */
    d->prefill.tensor_parallel = d->decode.tensor_parallel = 16;
    c = kv_transfer_time(&s, &cfg, 1000, 0, false);
    ck_assert_msg(c.bytes_rank == 1000 * KV_PER_TOKEN / 8 && c.bytes == 2 * 1000 * KV_PER_TOKEN, "%g %g",
                  c.bytes_rank, c.bytes);
    /* fp8 KV halves every byte. */
    d->prefill.tensor_parallel = d->decode.tensor_parallel = 1;
    cfg = kv_cache_cfg_make(&s, SCN_DTYPE_FP8, 0, 0);
    c = kv_transfer_time(&s, &cfg, 1000, 0, false);
    ck_assert_msg(c.bytes == 1000 * KV_PER_TOKEN / 2, "%g", c.bytes);
}
END_TEST

/* The link's figures default to the prefill hardware profile's network. */
START_TEST(transfer_defaults_from_profile)
{
    load("model: llama-3-8b\nhardware: h100-sxm\ndeployment:\n  tensor_parallel: 2\n  disaggregation:\n"
         "    prefill: {replicas: 3}\n    decode: {tensor_parallel: 4, hardware: h200}\n"
         "workload:\n  requests: 1\n  arrival: {process: offline}\n  prompt_tokens: 10\n  output_tokens: 2\n");
    const scn_disagg *d = &s.deployment.disagg;
    ck_assert(d->on);
    ck_assert_int_eq(d->prefill.replicas, 3);
    ck_assert_int_eq(d->prefill.tensor_parallel, 2);   /* the deployment's */
    ck_assert_int_eq(d->decode.replicas, 1);
    ck_assert_int_eq(d->decode.tensor_parallel, 4);
    ck_assert_str_eq(d->prefill.hardware.name, "h100-sxm");
    ck_assert_str_eq(d->decode.hardware.name, "h200");
    ck_assert_int_eq(d->link, SCN_LINK_INFINIBAND);
    ck_assert_msg(d->bandwidth == 50e9 && fabs(d->latency - 5e-6) < 1e-18, "%g %g", d->bandwidth, d->latency);
    ck_assert(d->layerwise);
    /* nvlink names the profile's interconnect (an NVL rack, or both pools in one node). */
    scn_error e;
    const char *sets[] = {"deployment.disaggregation.transfer.link=nvlink"};
    ck_assert_int_eq(t_load("model: llama-3-8b\nhardware: h100-sxm\ndeployment:\n  disaggregation:\n"
                            "    prefill: {}\n    decode: {}\nworkload: {requests: 1, arrival: {process: offline}, prompt_tokens: 10, output_tokens: 2}\n",
                            sets, 1, &s, &e), SCN_OK);
    ck_assert_msg(s.deployment.disagg.bandwidth == 450e9, "%g", s.deployment.disagg.bandwidth);
}
END_TEST

static void expect_fail(const char *text, int line, int col, const char *path, const char *msg_has)
{
    scn_scenario out;
    scn_error err;
    scn_status got = t_load(text, NULL, 0, &out, &err);
    char full[1500];
    scn_error_format(&err, full, sizeof full);
    ck_assert_msg(got == SCN_E_DATA, "status %d (%s)", got, full);
    ck_assert_msg(err.line == line && err.col == col, "at %d:%d, want %d:%d (%s)", err.line, err.col, line, col, full);
    ck_assert_msg(!strcmp(err.path, path), "path '%s', want '%s' (%s)", err.path, path, full);
    ck_assert_msg(strstr(err.msg, msg_has), "message lacks '%s': %s", msg_has, full);
}

#define HEAD "name: t\nmodel: llama-3-8b\nhardware: h100-sxm\ndeployment:\n"   /* lines 1-4 */

START_TEST(loader_errors)
{
    /* Line 6: "    prefill: {tensor_parallel: 3}": the 3 is at column 32. */
    expect_fail(HEAD "  disaggregation:\n    prefill: {tensor_parallel: 3}\n    decode: {}\n", 6, 32,
                "deployment.disaggregation.prefill.tensor_parallel", "divide evenly");
    /* The decode pool is missing: reported at the disaggregation mapping (line 6, column 5). */
    expect_fail(HEAD "  disaggregation:\n    prefill: {}\n", 6, 5, "deployment.disaggregation.decode",
                "missing required field");
    /* A replica count beside the pools is ambiguous (line 5, column 13). */
    expect_fail(HEAD "  replicas: 2\n  disaggregation:\n    prefill: {}\n    decode: {}\n", 5, 13, "deployment.replicas",
                "per pool");
    /* A bandwidth without a unit (line 8, column 27). */
    expect_fail(HEAD "  disaggregation:\n    prefill: {}\n    decode: {}\n    transfer: {bandwidth: 50}\n", 8, 27,
                "deployment.disaggregation.transfer.bandwidth", "");
    /* RoCE is not a link the H100 profile describes: its bandwidth must be given (line 8, col 15). */
    expect_fail(HEAD "  disaggregation:\n    prefill: {}\n    decode: {}\n    transfer: {link: roce}\n", 8, 15,
                "deployment.disaggregation.transfer", "give transfer.bandwidth");
    /* A misspelt key is located and a near one suggested (line 6, column 15). */
    expect_fail(HEAD "  disaggregation:\n    prefill: {replica: 2}\n    decode: {}\n", 6, 15,
                "deployment.disaggregation.prefill.replica", "replicas");
    /* An unknown hardware profile for a pool (line 7, column 24). */
    expect_fail(HEAD "  disaggregation:\n    prefill: {}\n    decode: {hardware: h999}\n", 7, 24,
                "deployment.disaggregation.decode.hardware", "unknown");
}
END_TEST

/* With the offload tiers (sim/kv_tier.h): the prefill pool, which holds the prefix cache, spills
 * evicted documents to host memory and reloads them, so more of the prompts hit than without;
 * the decode pool may swap preempted sequences out instead of recomputing them. */
START_TEST(pools_offload_and_swap)
{
    char path[600], err[512] = "";
    snprintf(path, sizeof path, "%s/archetypes/rag-offload.yaml", getenv("KVPLAN_LIBRARY"));
    const char *sets[] = {"workload.requests=400", "deployment.disaggregation={prefill: {}, decode: {}}",
                          "options.kv_offload=off"};
    scn_error e;
    char msg[1500];
    ck_assert_msg(scn_scenario_load(path, sets, 3, &s, &e) == SCN_OK, "%s", (scn_error_format(&e, msg, sizeof msg), msg));
    sim_metrics off, cpu;
    /* A GPU pool of 2000 blocks (32000 tokens, 8 documents) against 400 documents. */
    ck_assert_msg(run(2000, &off, err) == SIM_OK, "%s", err);
    sets[2] = "options.kv_offload=cpu";
    ck_assert_msg(scn_scenario_load(path, sets, 3, &s, &e) == SCN_OK, "%s", (scn_error_format(&e, msg, sizeof msg), msg));
    ck_assert_msg(run(2000, &cpu, err) == SIM_OK, "%s", err);
    ck_assert_int_eq(off.requests, 400);
    ck_assert_int_eq(cpu.requests, 400);
    ck_assert_msg(off.tier_hit_rate[0] == 0 && cpu.tier_hit_rate[0] > 0, "tier hits %g, %g", off.tier_hit_rate[0],
                  cpu.tier_hit_rate[0]);
    ck_assert_msg(cpu.prefix_hit_rate > off.prefix_hit_rate, "hit rate %g with the host tier, %g without",
                  cpu.prefix_hit_rate, off.prefix_hit_rate);
    ck_assert_msg(cpu.tier_bytes[0] > 0 && cpu.tier_xfer_s[0] > 0, "bytes %g, s %g", cpu.tier_bytes[0], cpu.tier_xfer_s[0]);
    ck_assert_msg(cpu.transfer_bytes == off.transfer_bytes, "hand-offs move whole prompts either way");

    /* Swap in the decode pool: 6 requests of 100 + 200 tokens grow from 7 to 19 blocks each in a
     * pool of 40, so the decode instance must preempt. */
    char y[1024];
    load(pair(y, sizeof y, "false", 100, 200, 6, "{process: offline}"));
    sim_metrics rec, swp;
    ck_assert_msg(run(40, &rec, err) == SIM_OK, "%s", err);
    s.options.n_preempt = 1;
    s.options.preemption[0] = SCN_PREEMPT_SWAP;
    s.options.swap_space = 1e9;
    ck_assert_msg(run(40, &swp, err) == SIM_OK, "%s", err);
    ck_assert_int_eq(rec.requests, 6);
    ck_assert_int_eq(swp.requests, 6);
    ck_assert_msg(rec.preemptions > 0 && rec.swaps == 0, "recompute: %ld preemptions, %ld swaps", rec.preemptions, rec.swaps);
    ck_assert_msg(swp.swaps > 0 && swp.swap_bytes > 0, "swap: %ld swaps, %g bytes", swp.swaps, swp.swap_bytes);
}
END_TEST

/* ---- end to end through the CLI ---- */
static char out_buf[1 << 17], err_buf[1 << 14];

static const char *small_pair(void)
{
    return t_write("dg.yaml", "name: dg-small\nmodel: llama-3-8b\nhardware: h100-sxm\n"
                              "deployment:\n  disaggregation:\n    prefill: {replicas: 2}\n    decode: {replicas: 1}\n"
                              "workload:\n  requests: 60\n  arrival: {process: poisson, rate: 4/s}\n"
                              "  prompt_tokens: {dist: uniform, min: 500, max: 1500}\n  output_tokens: 30\n");
}

/* simulate stores the hand-off metrics; report shows the run as 2P1D on its 3 GPUs. */
START_TEST(cli_simulate_store_report)
{
    char args[2048], dbp[512];
    const char *y = small_pair();
    snprintf(dbp, sizeof dbp, "%s.db", y);
    remove(dbp);
    snprintf(args, sizeof args, "simulate %s --db %s --format json", y, dbp);
    ck_assert_msg(t_run(args, out_buf, sizeof out_buf, err_buf, sizeof err_buf) == 0, "%s", err_buf);
    json_error_t je;
    json_t *j = json_loads(out_buf, 0, &je);
    ck_assert_msg(j != NULL, "not JSON: %s", je.text);
    json_t *dg = json_object_get(j, "disaggregation");
    ck_assert_msg(dg != NULL, "no disaggregation section: %s", out_buf);
    ck_assert_int_eq(json_integer_value(json_object_get(dg, "prefill_replicas")), 2);
    double bytes = json_number_value(json_object_get(dg, "transfer_bytes"));
    json_decref(j);
    /* 60 requests, each handing off its whole prompt: 500..1500 tokens x 131072 bytes. */
    ck_assert_msg(bytes >= 60 * 500 * KV_PER_TOKEN && bytes <= 60 * 1500 * KV_PER_TOKEN, "bytes %g", bytes);
    sqlite3 *h;
    ck_assert_int_eq(sqlite3_open_v2(dbp, &h, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
    sqlite3_stmt *st;
    ck_assert_int_eq(sqlite3_prepare_v2(h, "SELECT value FROM metrics WHERE name = 'transfer_bytes'", -1, &st, NULL), SQLITE_OK);
    ck_assert_int_eq(sqlite3_step(st), SQLITE_ROW);
    ck_assert_msg(sqlite3_column_double(st, 0) == bytes, "stored %g, printed %g", sqlite3_column_double(st, 0), bytes);
    sqlite3_finalize(st);
    ck_assert_int_eq(sqlite3_prepare_v2(h, "SELECT count(*) FROM metrics WHERE name IN ('transfer_mean_s', "
                                           "'transfer_wait_p99_s', 'prefill_busy', 'decode_busy', 'decode_replicas')",
                                        -1, &st, NULL), SQLITE_OK);
    ck_assert_int_eq(sqlite3_step(st), SQLITE_ROW);
    ck_assert_int_eq(sqlite3_column_int(st, 0), 5);
    sqlite3_finalize(st);
    sqlite3_close(h);
    snprintf(args, sizeof args, "report %s --db %s --format json", y, dbp);
    ck_assert_msg(t_run(args, out_buf, sizeof out_buf, err_buf, sizeof err_buf) == 0, "%s", err_buf);
    j = json_loads(out_buf, 0, &je);
    ck_assert_msg(j != NULL, "not JSON: %s", je.text);
    json_t *run0 = json_array_get(json_object_get(j, "runs"), 0);
    ck_assert_msg(run0 != NULL, "no runs: %s", out_buf);
    ck_assert_str_eq(json_string_value(json_object_get(run0, "disaggregation")), "2P1D");
    ck_assert_msg(json_number_value(json_object_get(run0, "gpus")) == 3, "gpus %g",
                  json_number_value(json_object_get(run0, "gpus")));
    json_decref(j);
    remove(dbp);
}
END_TEST

/* A located loader error through the CLI exits 65. */
START_TEST(cli_bad_input_exit_65)
{
    char args[1024];
    const char *y = t_write("dgbad.yaml", "name: t\nmodel: llama-3-8b\nhardware: h100-sxm\ndeployment:\n"
                                          "  disaggregation:\n    prefill: {tensor_parallel: 3}\n    decode: {}\n");
    snprintf(args, sizeof args, "simulate %s --no-db", y);
    ck_assert_int_eq(t_run(args, out_buf, sizeof out_buf, err_buf, sizeof err_buf), 65);
    ck_assert_msg(strstr(err_buf, "dgbad.yaml:6:32: deployment.disaggregation.prefill.tensor_parallel"), "%s", err_buf);
}
END_TEST

/* The archetype: plan sweeps the splits of its 4 GPUs and recommends one, with reasons, only
 * because the simulations show it sustaining more load within the SLO than colocated chunked
 * prefill (the test checks the recommendation agrees with the capacities it prints). */
START_TEST(archetype_plan_recommends_disaggregation)
{
    char args[1024];
    snprintf(args, sizeof args, "plan %s/archetypes/long-prompt-tight-tpot.yaml --no-db --seeds 1 --format json",
             getenv("KVPLAN_LIBRARY"));
    ck_assert_msg(t_run(args, out_buf, sizeof out_buf, err_buf, sizeof err_buf) == 0, "%s", err_buf);
    json_error_t je;
    json_t *j = json_loads(out_buf, 0, &je);
    ck_assert_msg(j != NULL, "not JSON: %s", je.text);
    json_t *layouts = json_object_get(j, "disaggregation");
    ck_assert_msg(json_array_size(layouts) >= 4, "layouts: %s", out_buf);
    json_t *rec = json_object_get(j, "disaggregation_recommendation");
    ck_assert_msg(json_array_size(rec) >= 2, "no reasons");
    const char *first = json_string_value(json_object_get(json_array_get(rec, 0), "reason"));
    ck_assert_msg(first && !strncmp(first, "Disaggregate:", 13), "%s", first ? first : "(none)");
    double a = 0, c = 0;
    const char *sus = strstr(first, "sustains ");
    ck_assert_msg(sus && sscanf(sus, "sustains %lf req/s within the SLO against %lf", &a, &c) == 2, "%s", first);
    ck_assert_msg(a > c * 1.06, "recommended at %g against %g req/s", a, c);
    const char *binds = json_string_value(json_object_get(json_array_get(rec, 1), "reason"));
    ck_assert_msg(binds && strstr(binds, " binds: "), "%s", binds ? binds : "(none)");
    json_t *rule = json_array_get(json_object_get(j, "disaggregation_rule"), 0);
    ck_assert_msg(rule && strstr(json_string_value(json_object_get(rule, "rule")), "DistServe"), "no rule");
    json_decref(j);
}
END_TEST

/* A scenario that gives its own transfer block: `plan` sweeps the splits of its GPUs and every
 * split must hand its KV over that link, not the hardware profile's default network (H100's
 * InfiniBand at 50 GB/s). One 1000-token request over 1.25 GB/s, sent whole: the hand-off is
 * the link's fixed part plus 1000 x 131072 bytes at 1.25 GB/s x 0.70. */
static const char *slow_link(const char *name, const char *decode_hw)
{
    char y[900];
    snprintf(y, sizeof y,
             "name: %.32s\nmodel: llama-3-8b\nhardware: h100-sxm\nobjective: p99_latency\n"
             "options: {kv_layout: paged, block_size: 16, scheduler: continuous}\n"
             "deployment:\n  disaggregation:\n    prefill: {replicas: 1, tensor_parallel: 1}\n"
             "    decode: {replicas: %d, tensor_parallel: 1%s}\n"
             "    transfer: {link: infiniband, bandwidth: 1.25 GB/s, latency: 10 us, layerwise: false}\n"
             "workload:\n  requests: 1\n  arrival: {process: constant, rate: 1/s}\n  prompt_tokens: 1000\n"
             "  output_tokens: 2\n",
             name, decode_hw ? 3 : 1, decode_hw ? decode_hw : "");
    static char path[2][2048];
    int k = decode_hw != NULL;
    snprintf(path[k], sizeof path[k], "%.2000s", t_write(k ? "dgmixed.yaml" : "dgslow.yaml", y));
    return path[k];
}

START_TEST(plan_sweep_keeps_transfer_block)
{
    char args[4096];
    snprintf(args, sizeof args, "plan %.2000s --no-db --seeds 1 --format json", slow_link("slow", NULL));
    ck_assert_msg(t_run(args, out_buf, sizeof out_buf, err_buf, sizeof err_buf) == 0, "%s", err_buf);
    json_error_t je;
    json_t *j = json_loads(out_buf, 0, &je);
    ck_assert_msg(j != NULL, "not JSON: %s", je.text);
    json_t *lay = json_object_get(j, "disaggregation");
    ck_assert_msg(json_array_size(lay) == 2, "layouts: %s", out_buf);   /* colocated tp1 x2, 1P1D */
    json_t *l = json_array_get(lay, 1);
    ck_assert_str_eq(json_string_value(json_object_get(l, "layout")), "1P(tp1)+1D(tp1)");
    double want = LINK_LAT + 1000 * KV_PER_TOKEN / (1.25e9 * 0.70);
    double got = json_number_value(json_object_get(l, "transfer_mean_s"));
    ck_assert_msg(fabs(got - want) < 1e-12, "hand-off %.12g s, the scenario's link gives %.12g s", got, want);
    json_decref(j);
}
END_TEST

/* The candidate table and capacity count both pools' GPUs (1P(tp1) + 3D(tp1) = 4), and price
 * each pool at its own hardware: 1 H100 at $3.35 and 3 L40S at $1.33 an hour (the profiles'
 * prices) = $7.34 an hour, so $/Mtok = 7.34 / 3600 / (output tokens/s) x 1e6. */
START_TEST(plan_capacity_count_both_pools)
{
    char args[4096];
    const char *y = slow_link("mixed", ", hardware: l40s");
    snprintf(args, sizeof args, "plan %s --no-db --seeds 1 --format json", y);
    ck_assert_msg(t_run(args, out_buf, sizeof out_buf, err_buf, sizeof err_buf) == 0, "%s", err_buf);
    json_error_t je;
    json_t *j = json_loads(out_buf, 0, &je);
    ck_assert_msg(j != NULL, "not JSON: %s", je.text);
    json_t *c = json_array_get(json_object_get(j, "candidates"), 0);
    ck_assert_msg(c != NULL, "no candidates: %s", out_buf);
    ck_assert_msg(json_number_value(json_object_get(c, "gpus")) == 4, "gpus %g", json_number_value(json_object_get(c, "gpus")));
    double tok = json_number_value(json_object_get(c, "output_tok_per_s"));
    double want = (1 * 3.35 + 3 * 1.33) / 3600.0 / tok * 1e6;
    double got = json_number_value(json_object_get(c, "usd_per_mtok"));
    ck_assert_msg(fabs(got - want) < 1e-9 * want, "$/Mtok %.12g, want %.12g", got, want);
    json_decref(j);
    snprintf(args, sizeof args, "capacity %s --seeds 1 --top 1 --format json", y);
    ck_assert_msg(t_run(args, out_buf, sizeof out_buf, err_buf, sizeof err_buf) == 0, "%s", err_buf);
    j = json_loads(out_buf, 0, &je);
    ck_assert_msg(j != NULL, "not JSON: %s", je.text);
    json_t *row = NULL;
    const char *key;
    json_t *v;
    json_object_foreach(j, key, v) if (json_is_array(v) && json_object_get(json_array_get(v, 0), "gpus")) row = json_array_get(v, 0);
    ck_assert_msg(row != NULL, "no capacity rows: %s", out_buf);
    ck_assert_msg(json_number_value(json_object_get(row, "gpus")) == 4, "capacity gpus %g: %s",
                  json_number_value(json_object_get(row, "gpus")), out_buf);
    json_decref(j);
}
END_TEST

/* A decode instance batches at most max_num_seqs sequences: with 4 slots and 40 requests
 * arriving at once (100-token prompts, 200 tokens out: a few MiB of KV each, far below the
 * decode instance's blocks), the decode batch reaches 4 and stays there, the 5th hand-off waits
 * for a slot (about 199 decode steps), and "what binds" must name max_num_seqs, not KV. */
START_TEST(binds_decode_max_num_seqs)
{
    const char *y = t_write("dgseqs.yaml",
                            "name: seqs\nmodel: llama-3-8b\nhardware: h100-sxm\nobjective: p99_latency\n"
                            "slo: {tpot_p99: 1 s}\noptions: {kv_layout: paged, block_size: 16, scheduler: continuous}\n"
                            "deployment:\n  max_num_seqs: 4\n  disaggregation:\n    prefill: {replicas: 1, tensor_parallel: 1}\n"
                            "    decode: {replicas: 1, tensor_parallel: 1}\nworkload:\n  requests: 40\n"
                            "  arrival: {process: constant, rate: 1000/s}\n  prompt_tokens: 100\n  output_tokens: 200\n");
    char args[4096];
    snprintf(args, sizeof args, "simulate %.2000s --no-db --format json", y);
    ck_assert_msg(t_run(args, out_buf, sizeof out_buf, err_buf, sizeof err_buf) == 0, "%s", err_buf);
    json_error_t je;
    json_t *j = json_loads(out_buf, 0, &je);
    ck_assert_msg(j != NULL, "not JSON: %s", je.text);
    json_t *dg = json_object_get(j, "disaggregation");
    ck_assert_int_eq(json_integer_value(json_object_get(dg, "decode_batch_max")), 4);
    ck_assert_int_eq(json_integer_value(json_object_get(dg, "decode_max_num_seqs")), 4);
    double dmean = json_number_value(json_object_get(dg, "decode_batch_mean"));
    ck_assert_msg(dmean > 3 && dmean <= 4, "decode batch mean %g", dmean);
    /* The 5th hand-off waits for a slot: at least 150 decode steps of a few ms. */
    ck_assert_msg(json_number_value(json_object_get(dg, "transfer_wait_max_s")) > 150 * 1e-3, "%s", out_buf);
    json_decref(j);
    snprintf(args, sizeof args, "plan %.2000s --no-db --seeds 1 --format json", y);
    ck_assert_msg(t_run(args, out_buf, sizeof out_buf, err_buf, sizeof err_buf) == 0, "%s", err_buf);
    j = json_loads(out_buf, 0, &je);
    ck_assert_msg(j != NULL, "not JSON: %s", je.text);
    const char *why = json_string_value(json_object_get(json_array_get(json_object_get(j, "disaggregation_recommendation"), 1),
                                                        "reason"));
    ck_assert_msg(why && strstr(why, "the decode pool's max_num_seqs binds:") &&
                  strstr(why, "decode batch max 4 of max_num_seqs 4"), "%s", why ? why : "(none)");
    json_decref(j);
}
END_TEST

/* The planner's rules of thumb on a scenario given as text: one seed, the candidates ranked. */
static plan_result pr;
static plan_rule prules[8];

static int plan_rules_of(const char *text, const char *const *sets, int n_sets)
{
    scn_error e;
    char msg[1500];
    scn_status st = t_load(text, sets, n_sets, &s, &e);
    scn_error_format(&e, msg, sizeof msg);
    ck_assert_msg(st == SCN_OK, "%s", msg);
    plan_result_free(&pr);
    memset(&pr, 0, sizeof pr);
    ck_assert_int_eq(plan_enumerate(&s, &pr), 0);
    plan_set_seeds(&pr, 1);
    char err[512];
    ck_assert_int_eq(plan_evaluate(&s, &pr, 2, 0, 1, NULL, NULL, err, sizeof err), 0);
    plan_rank(&s, &pr);
    ck_assert_int_ge(pr.best, 0);
    return plan_rules(&s, &pr, prules, 8);
}

/* 100 shared 8000-token prefixes (500 blocks of 16 each) against one H100's cache for
 * Llama-3-8B: the prefixes need 100 x 500 / kv_blocks of the blocks, more than all of it, so
 * the 40/60 rule fails because no reserve can hold them (a 40 % reserve keeps 40 / that share
 * of them), not because a 40 % reserve is "far more than the prefixes use". */
START_TEST(rule_split_prefixes_outgrow_hbm)
{
    int n = plan_rules_of("name: split\nmodel: llama-3-8b\nhardware: h100-sxm\nobjective: p99_latency\n"
                          "options: {kv_layout: paged, block_size: 16, prefix_cache: on, scheduler: chunked}\n"
                          "workload:\n  requests: 30\n  arrival: {process: offline}\n  prompt_tokens: 50\n"
                          "  output_tokens: 4\n  shared_prefix: {groups: 100, tokens: 8000, share: 1.0}\n", NULL, 0);
    ck_assert_int_ge(n, 2);
    double share = 100.0 * 500 / (double)pr.c[pr.best].m.kv_blocks;
    ck_assert_msg(share > 1, "share %g: the case needs prefixes beyond the cache", share);
    char want[160];
    snprintf(want, sizeof want, "the prefixes need %.1f %% of the blocks", 100 * share);
    ck_assert_msg(!strcmp(prules[1].verdict, "fails") && strstr(prules[1].evidence, want), "%s: %s", prules[1].verdict,
                  prules[1].evidence);
    snprintf(want, sizeof want, "outgrow the whole GPU cache (%.1fx)", share);
    ck_assert_msg(strstr(prules[1].evidence, want), "%s", prules[1].evidence);
    snprintf(want, sizeof want, "keep at most %.0f %% of them", 100 * 0.4 / share);
    ck_assert_msg(strstr(prules[1].evidence, want), "%s", prules[1].evidence);
    ck_assert_msg(!strstr(prules[1].evidence, "far more than the prefixes use"), "%s", prules[1].evidence);
}
END_TEST

/* Multi-turn conversations are the offload rule's reusable prefixes too. 8 closed-loop clients,
 * 4 turns of 1000 + 100 tokens: turn k resends (k - 1) x 1100 tokens, a history averages
 * 4/2 x 1100 = 2200 tokens (2192 in whole 16-token blocks), and 8 conversations sit between
 * turns at once: 8 x 2200 = 17600 tokens. Reloading 2192 tokens (2192 x 131072 bytes a token
 * for Llama-3-8B) from host memory is latency + bytes / (bandwidth x efficiency) of the host
 * link; from NVMe the NVMe link's time is added (staged through host memory). */
START_TEST(rule_offload_conversations_and_disk)
{
    /* A remote store of 10 GB/s at efficiency 1, no latency: its reload adds to the host link's. */
    static const char *const remote_sets[] = {"hardware.remote={capacity: 1 TB, bandwidth: 10 GB/s, efficiency: 1.0}",
                                              "options.kv_offload=cpu+disk+remote"};
    int n = plan_rules_of("name: conv\nmodel: llama-3-8b\nhardware: h100-sxm\nobjective: p99_latency\n"
                          "options: {kv_layout: paged, block_size: 16, prefix_cache: on, scheduler: chunked, "
                          "kv_offload: cpu+disk}\n"
                          "workload:\n  requests: 64\n  arrival: {process: closed, concurrency: 8}\n"
                          "  prompt_tokens: 1000\n  output_tokens: 100\n  conversation: {turns: 4, think_time: 1 s}\n",
                          remote_sets, 2);
    ck_assert_int_ge(n, 5);
    ck_assert_msg(strcmp(prules[4].verdict, "n/a"), "%s", prules[4].evidence);
    ck_assert_msg(strstr(prules[4].evidence, "the histories of about 8 conversations between turns") &&
                  strstr(prules[4].evidence, "hold 17600 tokens") && strstr(prules[4].evidence, "a 2192-token prefix"),
                  "%s", prules[4].evidence);
    double bytes = 2192 * KV_PER_TOKEN;
    const scn_tier *h = &s.hardware.host, *d = &s.hardware.nvme;
    ck_assert_msg(h->bandwidth > 0 && d->bandwidth > 0, "the H100 profile's host and NVMe tiers");
    double host = h->latency + bytes / (h->bandwidth * h->efficiency);
    double disk = d->latency + bytes / (d->bandwidth * d->efficiency) + host;
    char want[200];
    snprintf(want, sizeof want, "from host memory takes %.1f ms", 1e3 * host);
    ck_assert_msg(strstr(prules[4].evidence, want), "%s not in %s", want, prules[4].evidence);
    snprintf(want, sizeof want, "the same reload takes %.1f ms", 1e3 * disk);
    ck_assert_msg(strstr(prules[4].evidence, want), "%s not in %s", want, prules[4].evidence);
    snprintf(want, sizeof want, "from the remote store, staged through host memory, %.1f ms", 1e3 * (bytes / 10e9 + host));
    ck_assert_msg(strstr(prules[4].evidence, want), "%s not in %s", want, prules[4].evidence);
    ck_assert_msg(strstr(prules[4].evidence, "judged as this rule judges"), "%s", prules[4].evidence);
}
END_TEST

/* Swap preemption is recommended only where it pays measurably: two candidates equal but for
 * preemption, swap's objective (higher is better) 0.5 above recompute's. With overlapping 95 %
 * intervals (swap 10.5 in [9, 12], recompute 10 in [8.5, 11.5]) the gate picks recompute; with
 * separate ones (swap 10.5 in [10.3, 10.7], recompute 10 in [9.8, 10.2]) swap stays. */
START_TEST(swap_gate_needs_measurable_gain)
{
    load("model: llama-3-8b\nhardware: h100-sxm\nworkload: {requests: 1, arrival: {process: offline}, prompt_tokens: 10, output_tokens: 2}\n");
    plan_cand c[2];
    memset(c, 0, sizeof c);
    for (int i = 0; i < 2; i++) {
        c[i].status = PLAN_DONE;
        c[i].allowed = true;
        c[i].tp = c[i].replicas = 1;
        c[i].hw = -1;
        c[i].c = sim_choice_first(&s);
    }
    c[0].c.preemption = SCN_PREEMPT_RECOMPUTE;
    c[1].c.preemption = SCN_PREEMPT_SWAP;
    c[0].obj = (plan_interval){10, 8.5, 11.5, 3};
    c[1].obj = (plan_interval){10.5, 9, 12, 3};
    int order[2] = {1, 0};
    plan_result r = {.c = c, .n = 2, .order = order, .best = 1};
    plan_swap_gate(&s, &r);
    ck_assert_int_eq(r.best, 0);
    char line[PLAN_LINE];
    ck_assert_int_eq(plan_swap_explain(&s, &r, line, sizeof line), 1);
    ck_assert_msg(strstr(line, "Swap preemption: not recommended") && strstr(line, "vLLM V1 has no swap preemption"), "%s",
                  line);
    c[0].obj = (plan_interval){10, 9.8, 10.2, 3};
    c[1].obj = (plan_interval){10.5, 10.3, 10.7, 3};
    r.best = 1;
    plan_swap_gate(&s, &r);
    ck_assert_int_eq(r.best, 1);
    ck_assert_int_eq(plan_swap_explain(&s, &r, line, sizeof line), 1);
    ck_assert_msg(strstr(line, "Swap preemption: recommended"), "%s", line);
}
END_TEST

/* A p99-latency objective at the offered load over two seeds, 1 s and 20 s: an arithmetic
 * interval (mean 10.5 s, half width t(1) = 12.706 x 9.5 = 120.7 s) would reach -110 s. The
 * interval is built on ln seconds (docs/planner.md, "Lower is better"): ln 1 = 0, ln 20 = 2.9957,
 * mean 1.4979 (geometric mean sqrt(20) = 4.472 s), half width 12.706 x 2.9957 / 2 = 19.032, so
 * the latency lies in exp(1.4979 -+ 19.032) s, both ends positive. Negated (higher is better),
 * the objective's upper end is -exp(1.4979 - 19.032) < 0: no latency is negative. */
START_TEST(latency_interval_not_negative)
{
    load("model: llama-3-8b\nhardware: h100-sxm\nobjective: p99_latency\n"
         "workload: {requests: 1, arrival: {process: offline}, prompt_tokens: 10, output_tokens: 2}\n");
    plan_cand c;
    memset(&c, 0, sizeof c);
    c.status = PLAN_DONE;
    c.allowed = true;
    c.tp = c.replicas = 1;
    c.gpus = 1;
    c.hw = -1;
    c.n_seeds = 2;
    c.seed_offered[0] = -1;
    c.seed_offered[1] = -20;
    for (int k = 0; k < PLAN_SEEDS_MAX; k++) c.seed_batch[k] = NAN;
    int order[1] = {0};
    plan_result r = {.c = &c, .n = 1, .order = order, .best = 0};
    plan_rank(&s, &r);
    double m = log(20) / 2, half = 12.706 * log(20) / 2;
    ck_assert_msg(c.obj.hi < 0 && fabs(c.obj.hi + exp(m - half)) < 1e-3 * exp(m - half), "upper end %g", c.obj.hi);
    ck_assert_msg(fabs(c.obj.lo + exp(m + half)) < 1e-3 * exp(m + half), "lower end %g, want %g", c.obj.lo, -exp(m + half));
    ck_assert_msg(fabs(c.obj.mean + sqrt(20)) < 1e-9, "mean %g", c.obj.mean);
}
END_TEST

/* Errors found while simulating name the field responsible, located in the file: a
 * tensor_parallel 1 pool cannot hold Llama-3.1-70B's 141 GB of bf16 weights on an 80 GB H100,
 * so the error points at that pool's entry (line 7, its value at column 14). */
START_TEST(pool_errors_located)
{
    char args[4096];
    const char *y = t_write("dgfit.yaml", "name: fit\nmodel: llama-3.1-70b\nhardware: h100-sxm\n"
                                          "deployment:\n  tensor_parallel: 4\n  disaggregation:\n"
                                          "    prefill: {replicas: 1, tensor_parallel: 1}\n"
                                          "    decode: {replicas: 1, tensor_parallel: 4}\n"
                                          "workload: {requests: 1, arrival: {process: offline}, prompt_tokens: 100, "
                                          "output_tokens: 2}\n");
    snprintf(args, sizeof args, "simulate %.2000s --no-db", y);
    ck_assert_int_eq(t_run(args, out_buf, sizeof out_buf, err_buf, sizeof err_buf), 65);
    ck_assert_msg(strstr(err_buf, "dgfit.yaml:7:14: deployment.disaggregation.prefill: the model does not fit the prefill "
                                  "pool"), "%s", err_buf);
    /* What is missing, as a size (review9: "leave -65.71 GiB for the KV cache"). */
    ck_assert_msg(strstr(err_buf, "runtime need ") && strstr(err_buf, "leaving none for the KV cache") &&
                      !strstr(err_buf, " -"),
                  "%s", err_buf);
    /* --set deployment.disaggregation=off: the documented default, accepted. */
    snprintf(args, sizeof args, "memory %.2000s --set deployment.disaggregation=off --format json", y);
    ck_assert_msg(t_run(args, out_buf, sizeof out_buf, err_buf, sizeof err_buf) == 0, "%s", err_buf);
    ck_assert_msg(!strstr(out_buf, "disaggregation_memory"), "%s", out_buf);
    /* memory lists each pool: 70B's weights over TP 1 exceed an H100, over TP 4 they fit. */
    snprintf(args, sizeof args, "memory %.2000s --format json", y);
    ck_assert_msg(t_run(args, out_buf, sizeof out_buf, err_buf, sizeof err_buf) == 0, "%s", err_buf);
    json_error_t je;
    json_t *j = json_loads(out_buf, 0, &je);
    ck_assert_msg(j != NULL, "not JSON: %s", je.text);
    json_t *pools = json_object_get(j, "disaggregation_memory");
    ck_assert_msg(json_array_size(pools) == 2, "%s", out_buf);
    json_t *pp = json_array_get(pools, 0), *dp = json_array_get(pools, 1);
    ck_assert_str_eq(json_string_value(json_object_get(pp, "pool")), "prefill");
    ck_assert_int_eq(json_integer_value(json_object_get(pp, "tensor_parallel")), 1);
    ck_assert_int_eq(json_integer_value(json_object_get(dp, "tensor_parallel")), 4);
    ck_assert_msg(json_number_value(json_object_get(pp, "kv_budget_bytes")) <= 0, "%s", out_buf);
    ck_assert_msg(json_number_value(json_object_get(dp, "kv_budget_bytes")) > 0, "%s", out_buf);
    /* the decode pool's weights are a quarter of the prefill pool's (TP 4 against TP 1) */
    double wp = json_number_value(json_object_get(pp, "weight_bytes")), wd = json_number_value(json_object_get(dp, "weight_bytes"));
    ck_assert_msg(wd < wp / 3.9 && wd > wp / 4.1, "weights %g and %g", wp, wd);
    json_decref(j);
}
END_TEST

/* simulate's Run section names the pools and counts their GPUs (2P + 1D at TP 1: 3 GPUs). */
START_TEST(run_section_names_pools)
{
    char args[4096];
    snprintf(args, sizeof args, "simulate %.2000s --no-db --format json", small_pair());
    ck_assert_msg(t_run(args, out_buf, sizeof out_buf, err_buf, sizeof err_buf) == 0, "%s", err_buf);
    json_error_t je;
    json_t *j = json_loads(out_buf, 0, &je);
    ck_assert_msg(j != NULL, "not JSON: %s", je.text);
    json_t *run = json_object_get(j, "run");
    ck_assert_msg(json_object_get(run, "replicas") == NULL, "%s", out_buf);
    ck_assert_msg(json_number_value(json_object_get(run, "gpus")) == 3, "%s", out_buf);
    const char *pools = json_string_value(json_object_get(run, "pools"));
    ck_assert_msg(pools && strstr(pools, "2P (tp1") && strstr(pools, "1D (tp1"), "%s", pools ? pools : "(none)");
    json_decref(j);
}
END_TEST

/* options.preemption: [swap] with only contiguous layouts can never run: a located error. */
START_TEST(swap_needs_paged_located)
{
    scn_error e;
    scn_status st = t_load("model: llama-3-8b\nhardware: h100-sxm\n"
                           "workload: {requests: 1, arrival: {process: offline}, prompt_tokens: 10, output_tokens: 2}\n"
                           "options:\n  kv_layout: contiguous\n  preemption: [swap]\n", NULL, 0, &s, &e);
    ck_assert_int_eq(st, SCN_E_DATA);
    ck_assert_str_eq(e.path, "options.preemption");
    ck_assert_int_eq(e.line, 6);
    ck_assert_int_eq(e.col, 15);
    ck_assert_msg(strstr(e.msg, "kv_layout paged"), "%s", e.msg);
}
END_TEST

/* A 100000-token prompt hands off 100001 tokens of KV (the prompt and the first token) =
 * ceil(100001 / 16) = 6251 blocks; Llama-3.1-70B at TP 4 on L40S leaves a decode instance far
 * fewer: the error names the decode pool's entry (line 8, its value at column 13). */
START_TEST(decode_fit_error_located)
{
    char args[4096];
    const char *y = t_write("dgdfit.yaml", "name: dfit\nmodel: llama-3.1-70b\nhardware: h100-sxm\ndeployment:\n"
                                           "  tensor_parallel: 4\n  disaggregation:\n"
                                           "    prefill: {replicas: 1, tensor_parallel: 4}\n"
                                           "    decode: {replicas: 1, tensor_parallel: 4, hardware: l40s}\n"
                                           "workload: {requests: 1, arrival: {process: offline}, prompt_tokens: 100000, "
                                           "output_tokens: 2}\n");
    snprintf(args, sizeof args, "simulate %.2000s --no-db", y);
    ck_assert_int_eq(t_run(args, out_buf, sizeof out_buf, err_buf, sizeof err_buf), 65);
    ck_assert_msg(strstr(err_buf, "dgdfit.yaml:8:13: deployment.disaggregation.decode: request 0's KV needs 6251 blocks on "
                                  "a decode instance"), "%s", err_buf);
}
END_TEST

Suite *suite_disagg(void)
{
    Suite *su = suite_create("disagg");
    TCase *tc = tcase_create("disagg");
    tcase_add_test(tc, one_request_whole_handoff);
    tcase_add_test(tc, one_request_layerwise);
    tcase_add_test(tc, handoff_waits_for_decode_blocks);
    tcase_add_test(tc, transfer_bytes_across_tp);
    tcase_add_test(tc, transfer_defaults_from_profile);
    tcase_add_test(tc, loader_errors);
    tcase_add_test(tc, pools_offload_and_swap);
    tcase_add_test(tc, cli_simulate_store_report);
    tcase_add_test(tc, cli_bad_input_exit_65);
    tcase_add_test(tc, archetype_plan_recommends_disaggregation);
    tcase_add_test(tc, plan_sweep_keeps_transfer_block);
    tcase_add_test(tc, plan_capacity_count_both_pools);
    tcase_add_test(tc, binds_decode_max_num_seqs);
    tcase_add_test(tc, rule_split_prefixes_outgrow_hbm);
    tcase_add_test(tc, rule_offload_conversations_and_disk);
    tcase_add_test(tc, swap_gate_needs_measurable_gain);
    tcase_add_test(tc, latency_interval_not_negative);
    tcase_add_test(tc, pool_errors_located);
    tcase_add_test(tc, run_section_names_pools);
    tcase_add_test(tc, swap_needs_paged_located);
    tcase_add_test(tc, decode_fit_error_located);
    tcase_add_test(tc, too_long_prompts_are_refused_before_the_pools);
    tcase_add_test(tc, full_queue_rejections_end_conversations_and_clients_go_on);
    tcase_set_timeout(tc, 120);
    suite_add_tcase(su, tc);
    return su;
}
