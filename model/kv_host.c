/* kv_host.c: the host's share of a step an engine launches eagerly from Python. Without a CUDA
 * graph every kernel of the forward is issued by the Python model code (module calls, custom-op
 * wrappers, attention metadata), so the GPU cannot finish the step before the host has walked
 * every layer; when that walk is slower than the kernels, the step takes the walk's time
 * (docs/cost-model.md, "Engine profiles", "Eager forward on the host"). */
#include "kv_model.h"

#include <math.h>

double kv_eager_host_seconds(const scn_scenario *s, bool graph)
{
    /* A replayed graph issues the whole forward in one launch: no per-layer host walk. */
    if (graph) return 0;
    return s->engine.eager_layer * (double)s->model.layers;
}

double kv_step_host_term(double gpu, double cpu, double host, bool async)
{
    /* Serial: the scheduling work, then the forward, which ends when both the host's launches
     * and the GPU's kernels have. One step ahead (an overlap scheduler): the host schedules and
     * launches step i+1 while the GPU runs step i, so only host work beyond the GPU's shows. */
    return async ? fmax(0, cpu + host - gpu) : cpu + fmax(0, host - gpu);
}
