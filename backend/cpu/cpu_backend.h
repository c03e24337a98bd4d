/* cpu_backend.h: the CPU reference backend's context, for tests that look inside a step. */
#ifndef KVPLAN_CPU_BACKEND_H
#define KVPLAN_CPU_BACKEND_H

#include "../../sim/sim.h"

#include <stdint.h>

typedef struct cpu_ctx cpu_ctx;

/* Runs one step like BE_CPU.run, and also returns each sequence's final hidden state (after the
 * last norm) of its last new token in last_hidden[n x hidden] when not NULL. */
int cpu_forward(cpu_ctx *c, const sim_batch *b, int32_t *next, float *last_hidden);

#endif
