/* kv_deploy.c: a deployment's GPU count and hourly price (kv_deploy.h). */
#include "kv_deploy.h"

#include <string.h>

double kv_deploy_gpus(const scn_deployment *d)
{
    if (d->disagg.on)
        return (double)d->disagg.prefill.replicas * d->disagg.prefill.tensor_parallel +
               (double)d->disagg.decode.replicas * d->disagg.decode.tensor_parallel;
    return (double)d->tensor_parallel * d->replicas * (d->attention_dp > 1 ? d->attention_dp : 1);
}

static double pool_price(const scn_pool *p, double usd_override, const char *override_name)
{
    if (usd_override > 0 && override_name && !strcmp(p->hardware.name, override_name)) return usd_override;
    return p->hardware.usd_per_gpu_hour;
}

double kv_deploy_disagg_usd_per_hour(const scn_disagg *d, double usd_override, const char *override_name)
{
    if (!d->on) return 0;
    double pp = pool_price(&d->prefill, usd_override, override_name);
    double pd = pool_price(&d->decode, usd_override, override_name);
    if (!(pp > 0) || !(pd > 0)) return 0;
    return pp * d->prefill.replicas * d->prefill.tensor_parallel + pd * d->decode.replicas * d->decode.tensor_parallel;
}
