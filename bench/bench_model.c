/* bench_model.c: how fast the loader and the cost model answer, since the simulator evaluates
 * a step time per engine step and the planner loads a scenario per candidate. */
#include "bench.h"
#include "../model/kv_model.h"

#include <stdio.h>
#include <stdlib.h>

void bench_model(void)
{
    char path[1024];
    const char *lib = getenv("KVPLAN_LIBRARY");
    snprintf(path, sizeof path, "%s/chat.yaml", lib ? lib : "scenarios");
    static scn_scenario s;
    scn_error e;
    int loads = 200;
    double t0 = bench_now();
    for (int i = 0; i < loads; i++)
        if (scn_scenario_load(path, NULL, 0, &s, &e) != SCN_OK) { fprintf(stderr, "bench: %s\n", e.msg); return; }
    double t_load = (bench_now() - t0) / loads;

    kv_cache_cfg c = kv_cache_cfg_make(&s, SCN_DTYPE_BF16, 0, 0);
    kv_seq_work w[256];
    for (int i = 0; i < 256; i++) w[i] = (kv_seq_work){1, 500 + 7 * i};
    w[255] = (kv_seq_work){512, 1000};   /* one prefill chunk riding along */
    int steps = 20000;
    double sink = 0;
    t0 = bench_now();
    for (int i = 0; i < steps; i++) sink += kv_step_time(&s, &c, SCN_ATTN_FLASH, w, 64 + i % 192).seconds;
    double t_step = (bench_now() - t0) / steps;
    printf("  scenario load (chat.yaml, 2 library files): %8.1f us each, %8.0f /s\n", t_load * 1e6, 1 / t_load);
    printf("  step time, 64-256 sequences:                %8.2f us each, %8.0f /s (checksum %.6g)\n",
           t_step * 1e6, 1 / t_step, sink);
}
