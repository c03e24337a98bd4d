/* cli_disagg.c: the "Disaggregation" section of a run's report: the two pools, the KV
 * hand-offs between them and how busy each pool was (docs/simulator.md, "Disaggregation"). */
#include "cli_run.h"

void cli_report_disagg(out_doc *d, const scn_scenario *s, const sim_metrics *m)
{
    if (m->prefill_replicas <= 0) return;   /* a colocated run */
    const scn_disagg *g = &s->deployment.disagg;
    out_section(d, "disaggregation", "Disaggregation");
    out_kv_num(d, "prefill_replicas", "prefill instances", (double)m->prefill_replicas, OUT_INT);
    if (g->on) {
        out_kv_num(d, "prefill_tp", "prefill tensor_parallel", g->prefill.tensor_parallel, OUT_INT);
        out_kv_str(d, "prefill_hardware", "prefill hardware", g->prefill.hardware.name);
    }
    out_kv_num(d, "decode_replicas", "decode instances", (double)m->decode_replicas, OUT_INT);
    if (g->on) {
        out_kv_num(d, "decode_tp", "decode tensor_parallel", g->decode.tensor_parallel, OUT_INT);
        out_kv_str(d, "decode_hardware", "decode hardware", g->decode.hardware.name);
        out_kv_str(d, "transfer_link", "transfer link", SCN_LINK_NAMES[g->link]);
        out_kv_num(d, "transfer_gb_per_s", "link GB/s per GPU", g->bandwidth / 1e9, OUT_NUM);
        out_kv_str(d, "layerwise", "layer-by-layer", g->layerwise ? "yes" : "no");
    }
    out_kv_num(d, "transfer_bytes", "KV handed off", m->transfer_bytes, OUT_BYTES);
    out_kv_num(d, "transfer_mean_s", "hand-off time (mean)", m->transfer_mean, OUT_SECONDS);
    out_kv_num(d, "transfer_p99_s", "hand-off time (p99)", m->transfer_p99, OUT_SECONDS);
    out_kv_num(d, "transfer_wait_mean_s", "hand-off queue wait (mean)", m->transfer_wait_mean, OUT_SECONDS);
    out_kv_num(d, "transfer_wait_p99_s", "hand-off queue wait (p99)", m->transfer_wait_p99, OUT_SECONDS);
    out_kv_num(d, "transfer_wait_max_s", "hand-off queue wait (max)", m->transfer_wait_max, OUT_SECONDS);
    out_kv_num(d, "prefill_busy", "prefill pool busy", m->prefill_busy, OUT_FRAC);
    out_kv_num(d, "decode_busy", "decode pool busy", m->decode_busy, OUT_FRAC);
    out_kv_num(d, "prefill_kv_util_mean", "prefill pool KV use", m->prefill_kv_util_mean, OUT_FRAC);
}
