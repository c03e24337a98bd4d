/* bench_sim.c: simulator speed and memory at 10k, 100k and 1M chat requests (about 800 prompt
 * and 250 output tokens each). Each size runs in a child process so its peak RSS is its own. */
#define _DEFAULT_SOURCE   /* wait4 */
#include "bench.h"
#include "../sim/sim.h"

#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

typedef struct { double wall; long events, steps, peak_in_flight, requests; } result;

static int child(long requests, int fd)
{
    char path[1024];
    const char *lib = getenv("KVPLAN_LIBRARY");
    snprintf(path, sizeof path, "%s/chat.yaml", lib ? lib : "scenarios");
    char req[64];
    snprintf(req, sizeof req, "workload.requests=%ld", requests);
    /* 20/s keeps one H100 busy (batch ~100) without an ever-growing queue. */
    const char *sets[] = {req, "workload.arrival.rate=20/s", "workload.shared_prefix.share=0", "options.kv_layout=paged",
                          "options.prefix_cache=off"};
    static scn_scenario s;
    scn_error e;
    if (scn_scenario_load(path, sets, 5, &s, &e) != SCN_OK) { fprintf(stderr, "bench: %s\n", e.msg); return 1; }
    sim_choice c = sim_choice_first(&s);
    sim_executor ex;
    sim_executor_model(&s, &c, &ex);
    sim_run_opts o = {.seed = 1};
    sim_metrics m;
    char err[512];
    double t0 = bench_now();
    if (sim_run(&s, &c, &ex, &o, &m, err, sizeof err) != SIM_OK) { fprintf(stderr, "bench: %s\n", err); return 1; }
    result r = {bench_now() - t0, m.events, m.steps, m.peak_in_flight, m.requests};
    return write(fd, &r, sizeof r) == (ssize_t)sizeof r ? 0 : 1;
}

void bench_sim(void)
{
    long sizes[] = {10000, 100000, 1000000};
    printf("  simulate chat (llama-3-8b, h100-sxm, paged, 20 req/s), one core:\n");
    printf("    %9s %9s %12s %12s %10s %12s %10s\n", "requests", "wall s", "requests/s", "events/s", "steps", "in flight", "peak RSS");
    for (int i = 0; i < 3; i++) {
        int p[2];
        if (pipe(p)) return;
        pid_t pid = fork();
        if (pid == 0) { close(p[0]); _exit(child(sizes[i], p[1])); }
        close(p[1]);
        result r;
        ssize_t got = read(p[0], &r, sizeof r);
        close(p[0]);
        int status;
        struct rusage ru;
        wait4(pid, &status, 0, &ru);
        if (got != (ssize_t)sizeof r || !WIFEXITED(status) || WEXITSTATUS(status)) { printf("    %9ld failed\n", sizes[i]); continue; }
        printf("    %9ld %9.2f %12.0f %12.0f %10ld %12ld %7.1f MiB\n", r.requests, r.wall, r.requests / r.wall,
               r.events / r.wall, r.steps, r.peak_in_flight, ru.ru_maxrss / 1024.0);
    }
    printf("    goal: 1M requests in under 10 s; memory flat in the number of requests\n");
}
