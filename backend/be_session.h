/* be_session.h: a backend opened for one scenario and option choice (see be_session.c). */
#ifndef KVPLAN_BE_SESSION_H
#define KVPLAN_BE_SESSION_H

#include "be.h"

typedef struct {
    const be_ops *ops;
    void *ctx;            /* replica 0's context (calibration times steps on it) */
    void **ctxs;          /* one context, with its own KV pool, per replica */
    int replicas;
    long blocks;          /* KV blocks each replica's pool really holds */
    int block_size;       /* tokens per block */
    sim_executor ex;      /* the engine's clock: measured step times, per-replica pools */
} be_session;

/* Opens the backend for the scenario's deployment: one context and KV pool per replica, each of
 * `blocks` blocks (<= 0: the cost model's count, kv_pool_size). Refuses, before allocating
 * anything, what it cannot run: tensor_parallel > 1 (BE_E_UNSUPPORTED), a contiguous layout
 * (BE_E_CONFIG), or more memory than the machine has (BE_E_UNAVAILABLE). */
be_status be_session_open_blocks(be_session *bs, const char *backend, const scn_scenario *s, const sim_choice *c,
                                 long blocks, char *err, size_t n);
/* be_session_open_blocks with the cost model's block count. */
be_status be_session_open(be_session *bs, const char *backend, const scn_scenario *s, const sim_choice *c,
                          char *err, size_t n);
void be_session_close(be_session *bs);

/* Bytes of memory the machine can give this process now: MemAvailable, capped by a cgroup
 * limit when one is set; 0 when unknown. */
double be_machine_memory(void);

#endif
