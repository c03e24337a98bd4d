/* bench_main.c: `make bench`: speed figures for the pieces the simulator and planner call in
 * their inner loops. Prints figures, never pass/fail: these machines are shared and noisy. */
#include "bench.h"

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

double bench_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

int main(void)
{
    printf("kvplan benchmarks (one core; figures, not pass/fail)\n");
    bench_model();
    bench_sim();
    return 0;
}
