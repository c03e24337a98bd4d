/* alloc_policy.h: how a process that runs many simulations asks the C library to keep memory. */
#ifndef KVPLAN_SIM_ALLOC_POLICY_H
#define KVPLAN_SIM_ALLOC_POLICY_H

/* Call once at start, before any thread: glibc keeps up to SIM_ALLOC_KEEP_BYTES of freed memory
 * at each heap's top instead of handing it back to the kernel (docs/simulator.md, "Memory kept
 * between simulations"). Does nothing on other C libraries. Returns 1 when applied. */
#define SIM_ALLOC_KEEP_BYTES (64L << 20)
int sim_alloc_policy(void);

#endif
