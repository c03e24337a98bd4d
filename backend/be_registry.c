/* be_registry.c: finds a backend by name (cpu built in, cuda from its plugin) and adapts any
 * backend into an engine executor. */
#include "be.h"
#include "be_cuda.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

double be_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

const be_ops *be_find(const char *name, char *why, size_t n)
{
    if (!strcmp(name, "cpu")) return &BE_CPU;
    if (!strcmp(name, "cuda")) {
        /* The plugin is opened here, by the commands that asked for it, and by no others. */
        const be_cuda_plugin *p = be_cuda_plugin_load(why, n);
        return p ? p->ops : NULL;
    }
    snprintf(why, n, "unknown backend '%s'; expected cpu or cuda", name);
    return NULL;
}

typedef struct {
    const be_ops *ops;
    void *ctx;
} exec_ctx;

static int exec_run(void *p, const sim_batch *b, double *seconds, char *err, size_t n)
{
    exec_ctx *e = p;
    be_step_out out = {0};
    if (e->ops->run(e->ctx, b, &out, err, n) != BE_OK) return -1;
    *seconds = out.seconds;
    return 0;
}

static long exec_blocks(void *p, int replica)
{
    exec_ctx *e = p;
    if (replica != 0) return -1;   /* one context holds one pool */
    return e->ops->kv_blocks ? e->ops->kv_blocks(e->ctx) : -1;
}

static void exec_free(void *p) { free(p); }

int be_executor(const be_ops *ops, void *ctx, sim_executor *out)
{
    exec_ctx *e = malloc(sizeof *e);
    if (!e) return -1;
    e->ops = ops;
    e->ctx = ctx;
    *out = (sim_executor){.name = ops->name, .ctx = e, .run = exec_run, .kv_blocks = exec_blocks, .free = exec_free,
                          .measured = true};
    return 0;
}
