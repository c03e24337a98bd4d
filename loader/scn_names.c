/* scn_names.c: the one name table of each scenario enum, in enum order and NULL-terminated:
 * the spelling the YAML accepts, the database stores and every output prints. Declared in
 * scn.h beside each type, so a new enum value and its name are added together. */
#include "scn.h"

const char *const SCN_DTYPE_NAMES[] = {"fp32", "fp16", "bf16", "fp8", "int8", "int4", "fp4", NULL};
const char *const SCN_QUANT_GRAN_NAMES[] = {"per_tensor", "per_token_head", "group", NULL};
const char *const SCN_LINK_NAMES[] = {"none", "nvlink", "pcie", "infinity_fabric", "infiniband", "roce", NULL};
const char *const SCN_ARCH_NAMES[] = {"other", "ampere", "ada", "hopper", "blackwell", "cdna3", "cpu", NULL};
const char *const SCN_ROUTER_NAMES[] = {"round_robin", "least_outstanding", "prefix_affinity", NULL};
const char *const SCN_DIST_NAMES[] = {"fixed", "uniform", "normal", "lognormal", "empirical", "exponential", NULL};
const char *const SCN_ARRIVAL_NAMES[] = {"poisson", "gamma", "constant", "trace", "closed", "offline", NULL};
const char *const SCN_METRIC_NAMES[] = {"ttft", "tpot", "itl", "e2e", NULL};
const char *const SCN_LAYOUT_NAMES[] = {"contiguous", "paged", NULL};
const char *const SCN_ATTN_NAMES[] = {"flash", "naive", NULL};
const char *const SCN_SCHED_NAMES[] = {"static", "continuous", "chunked", NULL};
const char *const SCN_OFFLOAD_NAMES[] = {"off", "cpu", "cpu+disk", "cpu+remote", "cpu+disk+remote", NULL};
bool scn_offload_disk(scn_offload o) { return o == SCN_OFFLOAD_CPU_DISK || o == SCN_OFFLOAD_CPU_DISK_REMOTE; }
bool scn_offload_remote(scn_offload o) { return o == SCN_OFFLOAD_CPU_REMOTE || o == SCN_OFFLOAD_CPU_DISK_REMOTE; }
const char *const SCN_PREEMPT_NAMES[] = {"recompute", "swap", NULL};
const char *const SCN_OBJECTIVE_NAMES[] = {"goodput_per_gpu", "throughput", "p99_latency", "cost", NULL};

const char *scn_enum_name(const char *const *names, int v)
{
    for (int i = 0; names[i]; i++)
        if (i == v) return names[i];
    return "?";
}
const char *const SCN_SPEC_NAMES[] = {"off", "draft", "eagle", "mtp", "ngram", NULL};
