/* bench_main.c: `make bench`: speed figures for the pieces the simulator and planner call in
 * their inner loops. Prints figures, never pass/fail: these machines are shared and noisy. */
#include "bench.h"
#include "../backend/be.h"
#include "../sim/alloc_policy.h"

#include <stdio.h>
#include <stdlib.h>

/* The one monotonic clock is the backends' (be_now). */
double bench_now(void) { return be_now(); }

int main(void)
{
    sim_alloc_policy();   /* as kvplan's main: the cases' simulations keep their memory as the planner's do */
    printf("kvplan benchmarks (one core; figures, not pass/fail)\n");
    bench_model();
    bench_sim();
    return 0;
}
