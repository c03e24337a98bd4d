/* cpu_backend.h: the CPU reference backend's context, for tests that look inside a step. */
#ifndef KVPLAN_CPU_BACKEND_H
#define KVPLAN_CPU_BACKEND_H

#include "../be.h"

#include <stdint.h>

typedef struct be_cpu_ctx be_cpu_ctx;

/* Runs one step like BE_CPU.run, and also returns each sequence's final hidden state (after the
 * last norm) of its last new token in last_hidden[n x hidden] when not NULL. */
int be_cpu_forward(be_cpu_ctx *c, const sim_batch *b, int32_t *next, float *last_hidden);

/* Bytes one context will hold for the config with a pool of `blocks` blocks: fp32 weights and
 * the KV pool (the scratch of a step is small beside them). Computed before allocating, so a
 * session can refuse a model the machine cannot hold. */
double be_cpu_bytes_needed(const be_config *cfg, long blocks);

/* Where block `block` of the context's pool starts in memory (tests check that replicas'
 * pools are distinct); NULL out of range. */
const void *be_cpu_block_addr(const be_cpu_ctx *c, long block);

#endif
