/* be_session.h: a backend opened for one scenario and option choice (see be_session.c). */
#ifndef KVPLAN_BE_SESSION_H
#define KVPLAN_BE_SESSION_H

#include "be.h"

typedef struct {
    const be_ops *ops;
    void *ctx;
    long blocks;          /* KV blocks the backend really allocated */
    int block_size;       /* tokens per block */
    sim_executor ex;      /* the engine's clock: measured step times */
} be_session;

be_status be_session_open(be_session *bs, const char *backend, const scn_scenario *s, const sim_choice *c,
                          char *err, size_t n);
void be_session_close(be_session *bs);

#endif
