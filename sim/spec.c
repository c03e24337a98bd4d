/* spec.c: speculative decoding's draws and limits for the scheduler (spec.h). */
#include "spec.h"
#include "rng.h"
#include "../model/kv_spec.h"

const scn_spec *sim_spec_of(const scn_scenario *s, const sim_choice *c)
{
    return kv_spec_get(s, c->spec);
}

int sim_spec_drafts(const scn_spec *sp, const sim_req *r, long budget)
{
    long d = sp->k;
    long left = (long)r->spec.output - r->generated - 1;
    if (d > left) d = left;
    if (d > budget - 1) d = budget - 1;
    return d > 0 ? (int)d : 0;
}

int sim_spec_accepted(const scn_spec *sp, unsigned long long seed, const sim_req *r, int drafts)
{
    uint64_t h = sim_mix64(seed ^ 0x737065632d646563ULL);   /* "spec-dec": a stream of its own */
    h = sim_mix64(h ^ (uint64_t)r->spec.id);
    h = sim_mix64(h ^ (uint64_t)r->generated);
    int j = 0;
    for (; j < drafts; j++) {
        h = sim_mix64(h + 0x9e3779b97f4a7c15ULL);
        double u = (double)(h >> 11) * 0x1.0p-53;   /* uniform on [0, 1) */
        if (!(u < sp->accept[j])) break;
    }
    return j;
}
