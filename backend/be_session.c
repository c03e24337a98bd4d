/* be_session.c: a backend opened for a scenario and option choice. The executor owns its KV
 * pools: one backend context per replica, each with the pool the cost model's block count
 * (model/kv_blocks.c) or the caller asks for, wrapped as one engine executor that runs a
 * batch on the replica it names and reports each replica's pool. */
#include "be_session.h"
#include "../model/kv_blocks.h"
#include "cpu/cpu_backend.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define GIB 1073741824.0

double be_machine_memory(void)
{
    double avail = 0;
    FILE *f = fopen("/proc/meminfo", "r");
    if (f) {
        char line[256];
        long kib;
        while (fgets(line, sizeof line, f))
            if (sscanf(line, "MemAvailable: %ld kB", &kib) == 1) { avail = (double)kib * 1024.0; break; }
        fclose(f);
    }
    if (avail <= 0) {
        long pages = sysconf(_SC_AVPHYS_PAGES), page = sysconf(_SC_PAGESIZE);
        if (pages > 0 && page > 0) avail = (double)pages * (double)page;
    }
    /* A cgroup v2 limit ("max" when unlimited) bounds what this process may use. */
    f = fopen("/sys/fs/cgroup/memory.max", "r");
    if (f) {
        double lim;
        if (fscanf(f, "%lf", &lim) == 1 && lim > 0 && (avail <= 0 || lim < avail)) avail = lim;
        fclose(f);
    }
    return avail;
}

typedef struct {
    const be_ops *ops;
    void **ctxs;
    int n;
} session_exec;

static int sx_run(void *p, const sim_batch *b, double *seconds, char *err, size_t n)
{
    session_exec *x = p;
    if (b->replica < 0 || b->replica >= x->n) {
        snprintf(err, n, "a batch for replica %d, but the backend holds %d", b->replica, x->n);
        return -1;
    }
    be_step_out out = {0};
    if (x->ops->run(x->ctxs[b->replica], b, &out, err, n) != BE_OK) return -1;
    *seconds = out.seconds;
    return 0;
}

static long sx_blocks(void *p, int replica)
{
    session_exec *x = p;
    if (replica < 0 || replica >= x->n || !x->ops->kv_blocks) return -1;
    return x->ops->kv_blocks(x->ctxs[replica]);
}

static void sx_free(void *p) { free(p); }

/* What the backend will allocate for the session, in bytes, when it can say before allocating
 * (0 when it cannot). */
static double bytes_needed(const be_ops *ops, const be_config *cfg, long blocks)
{
    if (ops == &BE_CPU) return (double)be_cpu_bytes_needed(cfg, blocks);
    return 0;
}

be_status be_session_open_blocks(be_session *bs, const char *backend, const scn_scenario *s, const sim_choice *c,
                                 long blocks, char *err, size_t n)
{
    memset(bs, 0, sizeof *bs);
    bs->ops = be_find(backend, err, n);
    if (!bs->ops) return BE_E_UNAVAILABLE;
    if (c->layout != SCN_LAYOUT_PAGED) {
        snprintf(err, n, "backends run the paged layout only (set options.kv_layout=paged)");
        return BE_E_CONFIG;
    }
    if (s->deployment.tensor_parallel > 1) {
        /* A list's first value is what ran (plan_first): name the field that set it. */
        snprintf(err, n, "the %s backend runs each replica on one device, so it cannot run tensor_parallel %d "
                         "(set %s)", backend, s->deployment.tensor_parallel,
                 s->options.n_tp > 0 ? "options.tensor_parallel=[1]" : "deployment.tensor_parallel=1");
        return BE_E_UNSUPPORTED;
    }
    /* The backends run the model's own weights (fp32 on the CPU): a weight-format list would be
     * reported as run when it was not. */
    if (s->options.n_wformat > 0) {
        snprintf(err, n, "the %s backend runs the model's own weights, not options.weight_dtype's %s (a planner and "
                         "simulate option); drop the list to run it", backend, scn_wformat_name(&s->options.wformat[0]));
        return BE_E_UNSUPPORTED;
    }
    if (blocks <= 0) {
        kv_cache_cfg kc = kv_cache_cfg_make(s, c->kv_dtype, c->sink, c->window);
        blocks = kv_pool_size(s, &kc, true, c->block_size).blocks;
    }
    if (blocks <= 0) {
        snprintf(err, n, "the model leaves no memory for the KV cache on %s", s->hardware.name);
        return BE_E_CONFIG;
    }
    int reps = s->deployment.replicas > 0 ? s->deployment.replicas : 1;
    be_config cfg = {.model = s->model, .kv_dtype = c->kv_dtype, .block_size = c->block_size, .sink = c->sink,
                     .window = c->window, .seed = s->seed};
    double need = bytes_needed(bs->ops, &cfg, blocks) * reps, have = be_machine_memory();
    if (need > 0 && have > 0 && need > have) {
        snprintf(err, n, "the %s backend needs %.2f GiB (%d replica%s of %s with %ld KV blocks each) and this machine "
                         "has %.2f GiB available; use fewer replicas, a smaller model or --blocks",
                 backend, need / GIB, reps, reps > 1 ? "s" : "", s->model.name, blocks, have / GIB);
        return BE_E_UNAVAILABLE;
    }
    bs->ctxs = calloc((size_t)reps, sizeof *bs->ctxs);
    session_exec *x = malloc(sizeof *x);
    if (!bs->ctxs || !x) { free(x); snprintf(err, n, "out of memory"); be_session_close(bs); return BE_E_NOMEM; }
    be_status st = BE_OK;
    for (int r = 0; r < reps && st == BE_OK; r++) {
        st = bs->ops->create(&bs->ctxs[r], &cfg, err, n);
        if (st == BE_OK) bs->replicas = r + 1;
        if (st == BE_OK) st = bs->ops->alloc_kv(bs->ctxs[r], blocks, err, n);
    }
    if (st != BE_OK) { free(x); be_session_close(bs); return st; }
    bs->ctx = bs->ctxs[0];
    bs->blocks = bs->ops->kv_blocks ? bs->ops->kv_blocks(bs->ctx) : blocks;
    bs->block_size = c->block_size;
    *x = (session_exec){.ops = bs->ops, .ctxs = bs->ctxs, .n = reps};
    bs->ex = (sim_executor){.name = bs->ops->name, .ctx = x, .run = sx_run, .kv_blocks = sx_blocks, .free = sx_free,
                            .measured = true};
    return BE_OK;
}

be_status be_session_open(be_session *bs, const char *backend, const scn_scenario *s, const sim_choice *c,
                          char *err, size_t n)
{
    return be_session_open_blocks(bs, backend, s, c, 0, err, n);
}

void be_session_close(be_session *bs)
{
    if (bs->ex.free) bs->ex.free(bs->ex.ctx);
    for (int r = 0; bs->ctxs && r < bs->replicas; r++)
        if (bs->ctxs[r]) bs->ops->destroy(bs->ctxs[r]);
    free(bs->ctxs);
    memset(bs, 0, sizeof *bs);
}
