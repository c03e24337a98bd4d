/* alloc_policy.c: keep freed memory between simulations.
 *
 * A plan or a capacity search runs thousands of simulations in one process, each allocating
 * the same shapes of memory (request arrays, the prefix cache's block table and hash map, which
 * grow by doubling towards the pool's size) and freeing them all at its end. glibc hands a
 * heap's free top back to the kernel once it passes 128 KiB, so the next simulation faulted the
 * same pages in again, zero-filled: on bench/sweep-500.yaml 700,000 minor faults, 4.3 s of
 * system time and about 3 s more of user time on cold pages, a fifth of the plan's CPU.
 *
 * M_TOP_PAD keeps 64 MiB at each heap's top when it trims and asks the kernel for that much
 * more whenever a heap grows, so a large block that fits in it is carved from the top instead
 * of mapped afresh. Measured on the same plan: 13,000 faults, 0.15 s of system time, results
 * unchanged. Resident memory keeps what the largest simulation touched, at most
 * SIM_ALLOC_KEEP_BYTES more per heap (docs/simulator.md, "Memory kept between simulations"). */
#include "alloc_policy.h"

#include <stdlib.h>   /* defines __GLIBC__ on glibc; <malloc.h> is glibc's own */

#if defined(__GLIBC__)
#include <malloc.h>
#endif

int sim_alloc_policy(void)
{
#if defined(__GLIBC__)
    return mallopt(M_TOP_PAD, (int)SIM_ALLOC_KEEP_BYTES) == 1;
#else
    return 0;
#endif
}
