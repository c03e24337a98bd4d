/* cmd_cost.c: `kvplan cost`: the roofline time of one engine step, per operation. */
#include "cli.h"
#include "cli_moe.h"
#include "cli_run.h"
#include "cli_spec.h"
#include "../model/kv_blocks.h"
#include "../model/kv_mla.h"
#include "../model/kv_model.h"
#include "../model/kv_moe_grouped.h"
#include "../model/kv_moe_parallel.h"
#include "../model/kv_spec.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int cmd_cost(int argc, char **argv)
{
    cli_common c = {.format = OUT_TABLE};
    int help = 0;
    long batch = -1, context = -1, prefill = 0, cached = 0;
    for (int i = 1; i < argc; i++) {
        int r = cli_common_flag(&c, argc, argv, &i, &help);
        if (r < 0) return CLI_EX_USAGE;
        if (r) continue;
        const char *a = argv[i], *v;
        if ((v = cli_flag_value(argc, argv, &i, "--batch"))) {
            if (cli_parse_long("--batch", v, 0, 1000000, &batch)) return CLI_EX_USAGE;
        } else if ((v = cli_flag_value(argc, argv, &i, "--context"))) {
            if (cli_parse_long("--context", v, 0, 100000000, &context)) return CLI_EX_USAGE;
        } else if ((v = cli_flag_value(argc, argv, &i, "--prefill"))) {
            if (cli_parse_long("--prefill", v, 1, 100000000, &prefill)) return CLI_EX_USAGE;
        } else if ((v = cli_flag_value(argc, argv, &i, "--cached"))) {
            if (cli_parse_long("--cached", v, 0, 100000000, &cached)) return CLI_EX_USAGE;
        } else if (cli_is_flag(a)) {
            return cli_usage_error("cost", "unknown option '%s'", a);
        } else if (!c.scenario) {
            c.scenario = a;
        } else {
            return cli_usage_error("cost", "unexpected argument '%s'", a);
        }
        if (cli_flag_missing_value(v)) return CLI_EX_USAGE;
    }
    if (help) { fputs(cli_usage_of("cost"), stdout); return CLI_OK; }
    if (!c.scenario) return cli_usage_error("cost", "missing SCENARIO");
    if (cached && !prefill) return cli_usage_error("cost", "--cached needs --prefill");
    scn_scenario s;
    /* The first candidate's deployment, hardware, weights and engine (plan_first). */
    int rc = cli_load_first(&c, &s, NULL);
    if (rc) return rc;
    if (batch < 0) batch = prefill ? 0 : 1;
    if (context < 0) {
        /* The mean decode context, sized as `memory` and the simulator size sequences: the
         * prompt with its shared prefix and conversation history, plus half the output. */
        kv_seq_size z = kv_seq_size_of(&s);
        double mean = z.known ? z.prompt + z.output / 2 : s.workload.prompt.mean + s.workload.output.mean / 2;
        context = (long)llround(mean);
        if (context + 1 > s.deployment.max_model_len) context = s.deployment.max_model_len - 1;
        if (context < 0) context = 0;
    }
    if (batch == 0 && !prefill) return cli_usage_error("cost", "nothing to run: --batch 0 without --prefill");
    if (context + 1 > s.deployment.max_model_len || cached + prefill > s.deployment.max_model_len)
        return cli_usage_error("cost", "a sequence would exceed max_model_len (%d tokens)", s.deployment.max_model_len);

    int n = (int)batch + (prefill ? 1 : 0);
    kv_seq_work *w = calloc((size_t)n, sizeof *w);
    if (!w) return CLI_EX_INTERNAL;
    for (int i = 0; i < batch; i++) w[i] = (kv_seq_work){1, context};
    if (prefill) w[n - 1] = (kv_seq_work){prefill, cached};
    const scn_options *o = &s.options;
    kv_cache_cfg cc = kv_cache_cfg_make(&s, o->kv_dtype[0], o->sink[0], o->window[0]);
    kv_step_cost st = kv_step_time(&s, &cc, o->attention[0], w, n);
    /* Expert parallelism / attention DP: the headline is one DP rank's step with its experts
     * over the EP ranks (kv_moe_parallel.h); the op table stays the unsplit step it starts from. */
    bool ep = kv_moe_parallel_on(&s);
    kv_moe_step ms = {0};
    if (ep) ms = kv_moe_step_time(&s, &cc, o->attention[0], w, n);
    free(w);

    out_doc *d = out_doc_init();
    if (!d) return CLI_EX_INTERNAL;
    out_section(d, "step", "Engine step");
    out_kv_str(d, "model", "model", s.model.name);
    out_kv_str(d, "hardware", "hardware", s.hardware.name);
    out_kv_num(d, "tensor_parallel", "tensor parallel", s.deployment.tensor_parallel, OUT_INT);
    if (ep) {
        out_kv_num(d, "attention_data_parallel", "attention DP ranks", kv_moe_dp(&s), OUT_INT);
        out_kv_num(d, "expert_parallel", "expert-parallel ranks", kv_moe_ep(&s), OUT_INT);
    }
    out_kv_str(d, "engine", "engine", s.engine.name);
    scn_wformat wf = {s.model.weight_dtype, s.model.weight_quant, s.model.weight_group};
    kv_weights kw = kv_weights_compute(&s.model, s.deployment.tensor_parallel);
    out_kv_str(d, "weight_format", "weight format", scn_wformat_name(&wf));
    out_kv_num(d, "weight_bytes_per_param", "weight bytes per linear parameter", kw.bytes_per_linear, OUT_NUM);
    out_kv_num(d, "weight_bytes_per_rank", ep ? "weights per GPU (routed experts sharded)" : "weights per GPU",
               kv_moe_weight_bytes(&s, &s.model) + (ep ? 0 : kv_weights_engine_extra(&s)),
               OUT_BYTES);   /* + materialised MLA products (kv_mla.h) and the engine's padded layout */
    out_kv_str(d, "gemm_dtype", "GEMMs run in", scn_dtype_name(st.gemm_dtype));
    /* The GEMM rate's terms (kv_compute_rate): the dtype's peak x compute x its compute_scale. */
    out_kv_num(d, "gemm_peak_per_s", "GEMM peak (per second)", s.hardware.flops[st.gemm_dtype], OUT_FLOPS);
    out_kv_num(d, "gemm_compute_share", "GEMM share of peak",
               kv_compute_share(&s.hardware, st.gemm_dtype), OUT_FRAC);
    out_kv_num(d, "gemm_rate_per_s", "GEMM rate (per second)",
               kv_compute_rate(&s.hardware, st.gemm_dtype), OUT_FLOPS);
    /* Block-scaled fp8 weights run by a kernel family of their own (docs/cost-model.md,
     * "Block-scaled fp8 GEMMs"): the rates above do not apply to the dense GEMMs. */
    if (s.model.weight_quant == SCN_WQ_BLOCK && st.gemm_dtype == SCN_DTYPE_FP8 &&
        kv_block_fp8_applies(&s.hardware, s.engine.block_fp8))
        out_kv_str(d, "block_fp8_kernel", "block-fp8 GEMM kernel (dense layers)", scn_block_fp8_name(s.engine.block_fp8));
    out_kv_str(d, "kv_dtype", "kv dtype", scn_dtype_name(cc.dtype));
    out_kv_str(d, "attention", "attention", o->attention[0] == SCN_ATTN_FLASH ? "flash" : "naive");
    /* vLLM's FlashAttention backend (flash3) runs FlashAttention-2 off Hopper: say which runs. */
    bool fa2_here = s.engine.attn_kernel == SCN_AK_FLASH3 && s.hardware.arch != SCN_ARCH_HOPPER;
    out_kv_str(d, "attention_kernel", "attention kernel family",
               fa2_here ? "flash3 (FlashAttention-2 on this GPU)" : scn_attn_kernel_name(s.engine.attn_kernel));
    out_kv_num(d, "decode_seqs", ep ? "decode sequences (per DP rank)" : "decode sequences", (double)batch, OUT_INT);
    /* A step with no decode sequences has no decode context to show. */
    if (batch > 0) out_kv_num(d, "decode_context", "decode context (tokens)", (double)context, OUT_INT);
    out_kv_num(d, "prefill_tokens", "prefill tokens", (double)prefill, OUT_INT);
    out_kv_num(d, "prefill_cached", "prefill cached context", (double)cached, OUT_INT);
    if (ep) {
        out_kv_num(d, "step_seconds", "step time (one DP rank, experts over EP)", ms.seconds, OUT_SECONDS);
        out_kv_num(d, "tokens_per_second", "tokens/s per DP rank", st.tokens / ms.seconds, OUT_NUM);
        out_kv_num(d, "tokens_per_second_replica", "tokens/s per replica (all DP ranks)",
                   kv_moe_dp(&s) * st.tokens / ms.seconds, OUT_NUM);
        out_kv_num(d, "unsplit_step_seconds", "unsplit step (every expert on this GPU)", st.seconds, OUT_SECONDS);
    } else {
        out_kv_num(d, "step_seconds", "step time", st.seconds, OUT_SECONDS);
        out_kv_num(d, "tokens_per_second", "tokens/s", st.tokens / st.seconds, OUT_NUM);
    }
    /* Under EP the op table, its bound and its GPU time are the unsplit step's; the DP rank's
     * split (attention / experts / all-to-all) is cli_moe_cost's section. */
    out_kv_str(d, "bound", ep ? "bound (unsplit step)" : "bound", kv_bound_name(st.bound));
    out_kv_num(d, "gpu_seconds", ep ? "GPU time (unsplit step)" : "GPU time", st.gpu_seconds, OUT_SECONDS);
    out_kv_num(d, "cpu_seconds", "engine CPU time", st.cpu_seconds, OUT_SECONDS);
    if (st.host_seconds > 0)   /* engines that give cpu.eager_layer, on an eager step (kv_host.c) */
        out_kv_num(d, "host_seconds", "host walk of the eager forward", st.host_seconds, OUT_SECONDS);
    out_kv_str(d, "cpu_overlap", "CPU work", s.engine.async_scheduling ? "overlapped with the GPU (async scheduling)"
                                                                      : "serial with the GPU");
    if (prefill) {
        /* The front end's share of a served request's TTFT (docs/cost-model.md, "Front end"):
         * at an idle engine a lone request's TTFT is it plus this prefill step. */
        double fe = kv_frontend_seconds(&s, (double)prefill);
        out_kv_num(d, "frontend_seconds", "front end (tokenise + per request)", fe, OUT_SECONDS);
        if (!batch && s.engine.async_output) {
            /* Outputs one step late (docs/cost-model.md, "Output one step late"): the first
             * token is seen as the request's next step, its first decode, ends. */
            kv_seq_work nx = {1, cached + prefill};
            double next = kv_step_time(&s, &cc, o->attention[0], &nx, 1).seconds;
            out_kv_num(d, "ttft_lone_seconds", "TTFT of a lone request (front end + step + next step)",
                       fe + st.seconds + next, OUT_SECONDS);
        } else if (!batch)
            out_kv_num(d, "ttft_lone_seconds", "TTFT of a lone request (front end + step)", fe + st.seconds, OUT_SECONDS);
    }
    out_kv_str(d, "cuda_graph", "CUDA graph", st.graph ? "replayed" : "no (eager launches)");
    if (st.graph) out_kv_num(d, "graph_batch", "captured batch size", st.graph_batch, OUT_INT);
    if (st.allreduces) {
        out_kv_str(d, "allreduce_algo", "all-reduce algorithm", kv_coll_algo_name(st.allreduce.algo));
        out_kv_num(d, "allreduce_count", "all-reduces per step", st.allreduces, OUT_INT);
        out_kv_num(d, "allreduce_bytes", "all-reduce message", (st.graph ? st.graph_batch : (double)st.tokens) *
                                                                   s.model.hidden * 2.0, OUT_BYTES);
        out_kv_num(d, "allreduce_latency_s", "all-reduce latency (each)", st.allreduce.latency, OUT_SECONDS);
        out_kv_num(d, "allreduce_transfer_s", "all-reduce transfer (each)", st.allreduce.transfer, OUT_SECONDS);
        if (st.allreduce.copy > 0)
            out_kv_num(d, "allreduce_copy_s", "all-reduce input copy (each)", st.allreduce.copy, OUT_SECONDS);
    }
    if (s.model.kv_lora_rank > 0)
        out_kv_str(d, "mla_decode", "MLA decode",
                   s.engine.mla_expanded ? "ordinary attention over the expanded per-head K/V cache (engine mla.cache)"
                   : st.mla_absorbed     ? "absorbed weights over the latent cache"
                                         : "none in this step");
    /* Which kernel decodes the latent attention, and so its query tile (kv_mla_decode_tile_rows)
     * and kernel count (kv_mla_decode_kernels). */
    if (s.model.kv_lora_rank > 0 && !s.engine.mla_expanded && st.mla_absorbed)
        out_kv_str(d, "mla_decode_kernel", "MLA decode kernel",
                   kv_mla_decode_tile_rows(&s.hardware, &s.engine, 1) == 1
                       ? "no tile figure (heads unpadded)"
                   : kv_mla_decode_kernels(&s.hardware, &s.engine) == 2
                       ? "FlashMLA: 64-row tiles over the rank's heads, split-KV + combine kernels"
                       : "FA3 MLA path: 64-row tiles over the rank's heads");
    if (s.model.experts > 0)
        out_kv_str(d, "moe_kernel", "routed-expert GEMMs",
                   s.engine.moe_kernel == SCN_MOE_KERNEL_TRITON && s.hardware.arch == SCN_ARCH_HOPPER
                       ? "Triton fused-MoE rate (0.437 of the bf16 peak x shape; silu_and_mul, moe_sum alone)"
                   : s.engine.moe_kernel == SCN_MOE_KERNEL_CUTLASS &&
                           (s.hardware.arch == SCN_ARCH_AMPERE || s.hardware.arch == SCN_ARCH_ADA)
                       ? "CUTLASS grouped GEMMs: the rate below x per-expert tiles, weights re-read per row group; "
                         "expand, activation, finalize kernels"
                   : s.engine.moe_kernel == SCN_MOE_KERNEL_CUTLASS
                       ? "CUTLASS grouped GEMMs: the rate below x per-expert tiles; expand, activation, finalize kernels"
                       : "dense GEMM rate x shape");
    /* The rate the CUTLASS family's grouped GEMMs run at per padded flop (block-scaled fp8
     * experts: the block family's, docs/cost-model.md, "Block-scaled fp8 GEMMs"). */
    if (s.model.experts > 0 && s.engine.moe_kernel == SCN_MOE_KERNEL_CUTLASS)
        out_kv_num(d, "moe_grouped_rate_per_s", "routed-expert GEMM rate (per second)",
                   kv_moe_grouped_rate(&s.hardware, &s.engine, &s.model, st.gemm_dtype), OUT_FLOPS);

    static const out_col cols[] = {
        {"op", "op", OUT_STR},
        {"flops", "flops", OUT_FLOPS},
        {"bytes", "bytes", OUT_BYTES},
        {"net_bytes", "network", OUT_BYTES},
        {"t_compute_s", "t compute", OUT_SECONDS},
        {"t_memory_s", "t memory", OUT_SECONDS},
        {"t_network_s", "t network", OUT_SECONDS},
        {"t_overhead_s", "t overhead", OUT_SECONDS},
        {"seconds", "time", OUT_SECONDS},
        {"efficiency", "efficiency", OUT_FRAC},
        {"share", "share", OUT_FRAC},
        {"bound", "bound", OUT_STR},
    };
    out_table(d, "ops", ep ? "Per operation (all layers, one GPU, the unsplit step: every expert local, no all-to-all)"
                          : "Per operation (all layers, one GPU)", (int)(sizeof cols / sizeof cols[0]), cols);
    for (int op = 0; op < KV_OP_COUNT; op++) {
        const kv_op_cost *x = &st.op[op];
        if (x->seconds == 0) continue;
        out_cell_str(d, kv_op_name((kv_op)op));
        out_cell_num(d, x->flops);
        out_cell_num(d, x->bytes);
        out_cell_num(d, x->net_bytes);
        out_cell_num(d, x->t_compute);
        out_cell_num(d, x->t_memory);
        out_cell_num(d, x->t_network);
        out_cell_num(d, x->t_overhead);
        out_cell_num(d, x->seconds);
        out_cell_num(d, x->efficiency);
        out_cell_num(d, x->seconds / st.seconds);
        out_cell_str(d, kv_bound_name(x->bound));
    }
    cli_spec_cost(d, &s, &cc, o->attention[0], batch, context);   /* when options.speculative is on */
    cli_moe_cost(d, &s, &cc, o->attention[0], batch, context, prefill, cached);   /* with EP / attention DP */
    /* A step has a roofline even where the weights cannot be loaded; `memory`, `simulate` and
     * `capacity` refuse such a deployment, so the step says so too (same budget, kv_spec.h). */
    kv_capacity fit = kv_capacity_spec(&s, &cc, o->block_size[0], (double)context, kv_spec_get(&s, 0));
    /* An engine whose fraction applies to what the weights and activations leave free
     * (TensorRT-LLM) has no usable figure once they overflow: set the need against the GPU's
     * memory, as `memory` does. */
    if (fit.kv_budget <= 0) {
        bool of_free = s.engine.mem_given && s.engine.mem_budget == SCN_MEM_FREE;
        out_note(d, "This deployment does not fit: weights, activations and runtime need %.2f GiB of the %.2f GiB "
                    "%s (%skvplan memory), so no engine runs this step.",
                 (fit.weights + fit.activation + fit.runtime) / 1073741824.0,
                 (of_free ? scn_hw_cuda_memory(&s.hardware) : fit.usable) / 1073741824.0,
                 of_free ? "the GPU has" : "usable per GPU", of_free ? "as CUDA reports it; " : "");
    }
    if (s.hardware.calibrated == false)
        out_note(d, "Efficiency factors for %s and the CPU and launch costs of engine %s are kvplan defaults, not "
                    "measurements; docs/cost-model.md says what they mean.", s.hardware.name, s.engine.name);
    out_note(d, "GEMM rate = peak x share of peak (efficiency.compute x compute_scale of the dtype); efficiency: a "
                "GEMM's share of that rate (the LM head's: bf16's) from its shape (tiles and waves over the SMs); "
                "attention's share of the bf16 peak for the engine's kernel family.");
    rc = cli_emit(d, c.format);
    out_doc_free(d);
    return rc;
}
