/* be_session.c: a backend opened for a scenario and option choice: created for the model
 * shape, its KV pool sized by the cost model's block count, and wrapped as an executor. */
#include "be_session.h"
#include "../model/kv_model.h"

#include <stdio.h>
#include <string.h>

be_status be_session_open(be_session *bs, const char *backend, const scn_scenario *s, const sim_choice *c,
                          char *err, size_t n)
{
    memset(bs, 0, sizeof *bs);
    bs->ops = be_find(backend, err, n);
    if (!bs->ops) return BE_E_UNAVAILABLE;
    if (c->layout != SCN_LAYOUT_PAGED) {
        snprintf(err, n, "backends run the paged layout only (set options.kv_layout=paged)");
        return BE_E_CONFIG;
    }
    be_config cfg = {.model = s->model, .kv_dtype = c->kv_dtype, .block_size = c->block_size, .sink = c->sink,
                     .window = c->window, .seed = s->seed};
    be_status st = bs->ops->create(&bs->ctx, &cfg, err, n);
    if (st != BE_OK) return st;
    kv_cache_cfg kc = kv_cache_cfg_make(s, c->kv_dtype, c->sink, c->window);
    long blocks = kv_capacity_compute(s, &kc, c->block_size, 0).capacity_blocks;
    if (blocks <= 0) {
        snprintf(err, n, "the model leaves no memory for the KV cache on %s", s->hardware.name);
        be_session_close(bs);
        return BE_E_CONFIG;
    }
    if ((st = bs->ops->alloc_kv(bs->ctx, blocks, err, n)) != BE_OK) { be_session_close(bs); return st; }
    bs->blocks = bs->ops->kv_blocks ? bs->ops->kv_blocks(bs->ctx) : blocks;
    bs->block_size = c->block_size;
    if (be_executor(bs->ops, bs->ctx, &bs->ex)) { be_session_close(bs); snprintf(err, n, "out of memory"); return BE_E_NOMEM; }
    return BE_OK;
}

void be_session_close(be_session *bs)
{
    if (bs->ex.free) bs->ex.free(bs->ex.ctx);
    if (bs->ops && bs->ctx) bs->ops->destroy(bs->ctx);
    memset(bs, 0, sizeof *bs);
}
