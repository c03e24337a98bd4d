/* test_bounded.c: memory stays bounded where the workload or the pool is huge: an overloaded
 * run rejects arrivals beyond the waiting bound instead of queueing every request; KV
 * bookkeeping grows with the blocks used, not the blocks a pool could hold, so ten thousand
 * replicas or a pool of tens of millions of one-token blocks cost what their few requests use. */
#include "tests.h"
#include "../sim/kv_manager.h"
#include "../sim/sim.h"

#include <stdio.h>
#include <string.h>
#include <sys/resource.h>

static long peak_rss_kib(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_maxrss;
}

static int run(const scn_scenario *s, long max_waiting, sim_metrics *m, char *err)
{
    sim_choice c = sim_choice_first(s);
    sim_executor ex;
    ck_assert_int_eq(sim_executor_model(s, &c, &ex), 0);
    sim_run_opts o = {.seed = 1, .max_waiting = max_waiting};
    int rc = sim_run(s, &c, &ex, &o, m, err, 512);
    ex.free(ex.ctx);
    return rc;
}

#define TINY "model: tiny-cpu\nhardware: cpu-local\n"

START_TEST(overload_rejects_beyond_the_waiting_bound)
{
    static scn_scenario s;
    scn_error e;
    /* A million requests per second against a replica that serves a few hundred. */
    ck_assert_int_eq(t_load(TINY "deployment: {max_num_seqs: 16}\n"
                            "workload: {requests: 200000, arrival: {process: poisson, rate: 1000000/s},\n"
                            "  prompt_tokens: 32, output_tokens: 4}\n", NULL, 0, &s, &e), SCN_OK);
    sim_metrics m;
    char err[512];
    ck_assert_msg(run(&s, 1000, &m, err) == SIM_OK, "%s", err);
    /* Every arrival is either served or rejected; what is alive at once is the waiting bound
     * plus the running batch (and the one arrival in hand). */
    ck_assert_int_eq(m.requests + m.rejected, 200000);
    ck_assert(m.rejected > 100000);
    ck_assert_msg(m.peak_in_flight <= 1000 + 16 + 1, "peak in flight %ld", m.peak_in_flight);
    ck_assert(m.slo_attainment <= (double)m.requests / 200000);
    /* Without a bound given, the default holds it. */
    ck_assert_msg(run(&s, 0, &m, err) == SIM_OK, "%s", err);
    ck_assert_int_eq(m.rejected, 0);   /* 200k never reach the default bound of 262,144 */
    ck_assert(SIM_MAX_WAITING == 262144);
}
END_TEST

START_TEST(kv_bookkeeping_is_lazy)
{
    /* A pool of 300 million one-token blocks with prefix caching: nothing is allocated per block
     * until used (before: 5.5 GB). */
    long before = peak_rss_kib();
    sim_kv *kv = sim_kv_init(300000000L, 1, true, true, 0, 0);
    ck_assert_ptr_nonnull(kv);
    sim_kv_seq q;
    memset(&q, 0, sizeof q);
    q.prefix_seed = 1;
    q.body_seed = 2;
    ck_assert_int_eq(sim_kv_grow(kv, &q, 1000), 0);
    sim_kv_commit(kv, &q, 1000);
    ck_assert_int_eq(sim_kv_referenced(kv), 1000);
    ck_assert_int_eq(sim_kv_cached(kv), 1000);
    ck_assert_int_eq(sim_kv_available(kv), 300000000L - 1000);
    /* Blocks come out lowest id first, as the eager pool gave them. */
    for (int j = 0; j < 1000; j++) ck_assert_int_eq(q.blocks[j], j);
    sim_kv_release(kv, &q);
    sim_kv_seq_free(&q);
    ck_assert_int_eq(sim_kv_available(kv), 300000000L);
    sim_kv_free(kv);
    ck_assert_msg(peak_rss_kib() - before < 64 * 1024, "grew %ld KiB", peak_rss_kib() - before);
}
END_TEST

START_TEST(many_replicas_and_tiny_blocks_stay_small)
{
    static scn_scenario s;
    scn_error e;
    sim_metrics m;
    char err[512];
    long before = peak_rss_kib();
    /* Ten thousand replicas of an H100 pool each, ten requests (before: 2.4 GB). */
    ck_assert_int_eq(t_load("model: llama-3-8b\nhardware: h100-sxm\ndeployment: {replicas: 10000}\n"
                            "workload: {requests: 10, arrival: {process: poisson, rate: 5/s}, prompt_tokens: 300,"
                            " output_tokens: 20}\noptions: {kv_layout: [paged], prefix_cache: [on]}\n", NULL, 0, &s, &e),
                     SCN_OK);
    ck_assert_msg(run(&s, 0, &m, err) == SIM_OK, "%s", err);
    ck_assert_int_eq(m.requests, 10);
    /* One-token blocks with prefix caching on a tiny model: tens of millions of blocks. */
    ck_assert_int_eq(t_load("model: tiny-cpu\nhardware: h100-sxm\ndeployment: {gpu_memory_utilization: 0.9}\n"
                                 "workload: {requests: 5, arrival: {process: poisson, rate: 1/s}, prompt_tokens: 200,"
                                 " output_tokens: 30}\noptions: {kv_layout: [paged], block_size: [1], prefix_cache: [on]}\n",
                            NULL, 0, &s, &e), SCN_OK);
    ck_assert_msg(run(&s, 0, &m, err) == SIM_OK, "%s", err);
    ck_assert(m.kv_blocks > 10000000);
    ck_assert_int_eq(m.requests, 5);
    ck_assert_msg(peak_rss_kib() - before < 256 * 1024, "grew %ld KiB", peak_rss_kib() - before);
}
END_TEST

Suite *suite_bounded(void)
{
    Suite *s = suite_create("bounded");
    TCase *tc = tcase_create("bounded");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, overload_rejects_beyond_the_waiting_bound);
    tcase_add_test(tc, kv_bookkeeping_is_lazy);
    tcase_add_test(tc, many_replicas_and_tiny_blocks_stay_small);
    suite_add_tcase(s, tc);
    return s;
}
