/* cmd_memory.c: `kvplan memory`: the memory breakdown and KV capacity for each KV dtype,
 * window and layout the scenario's options name. Sequence sizes and reservations come from the
 * rules the simulator and the capacity search use (model/kv_blocks.c), so the three agree. */
#include "cli.h"
#include "cli_moe.h"
#include "cli_spec.h"
#include "cli_run.h"
#include "../model/kv_moe_parallel.h"
#include "../model/kv_blocks.h"
#include "../model/kv_model.h"
#include "../model/kv_spec.h"
#include "../sim/workload.h"

#include <stdio.h>
#include <string.h>

/* The engine's fraction applies to the memory still free after the runtime, weights and
 * activations (scn_mem_budget FREE), not to the device's. */
static bool free_budget(const scn_scenario *s)
{
    return s->engine.mem_given && s->engine.mem_budget == SCN_MEM_FREE;
}

/* Adds the scenario summary shared by memory and cost. */
static void scenario_section(out_doc *d, const scn_scenario *s)
{
    out_section(d, "scenario", "Scenario");
    out_kv_str(d, "name", "name", s->name);
    out_kv_str(d, "model", "model", s->model.name);
    out_kv_str(d, "hardware", "hardware", s->hardware.name);
    out_kv_num(d, "tensor_parallel", "tensor parallel", s->deployment.tensor_parallel, OUT_INT);
    if (kv_moe_parallel_on(s)) {   /* the figures below are then one DP rank's, experts sharded */
        out_kv_num(d, "attention_data_parallel", "attention DP ranks", kv_moe_dp(s), OUT_INT);
        out_kv_num(d, "expert_parallel", "expert-parallel ranks", kv_moe_ep(s), OUT_INT);
    }
    /* Under a free-memory budget (TensorRT-LLM) the fraction is of what the runtime, weights and
     * activations leave, not of the GPU: trtllm-v0.6's 1 is not "the whole GPU". */
    out_kv_num(d, "gpu_memory_utilization", free_budget(s) ? "KV fraction of free memory" : "gpu memory utilization",
               scn_engine_mem_fraction(&s->engine, &s->deployment, &s->hardware), OUT_FRAC);
    out_kv_num(d, "max_model_len", "max model len (tokens)", s->deployment.max_model_len, OUT_INT);
}

/* A trace's mean prompt + output length: what a sequence holds as it finishes, as the
 * workload's mean does for generated workloads. Prompts too long for max_model_len are left out:
 * engines refuse them, so they hold no KV (sim/workload.c, fit). Prints and returns an exit code
 * on failure. */
static int trace_mean(const scn_scenario *s, double *mean)
{
    int noinput;
    char err[1024];
    sim_workload *w = sim_workload_init(s, s->seed, &noinput, err, sizeof err);
    if (!w) { fprintf(stderr, "kvplan: %s\n", err); return noinput ? CLI_EX_NOINPUT : CLI_EX_DATA; }
    sim_req_spec r;
    double sum = 0;
    long n = 0;
    int rc;
    while ((rc = sim_workload_next(w, &r, err, sizeof err)) == 0)
        if (!r.too_long) { sum += (double)r.prompt + r.output; n++; }
    sim_workload_free(w);
    if (rc < 0) { fprintf(stderr, "kvplan: %s\n", err); return CLI_EX_DATA; }
    if (n == 0) {
        fprintf(stderr, "kvplan: %s: every prompt leaves no room for an output token within max_model_len (%d); "
                        "engines reject them all\n", s->workload.trace, s->deployment.max_model_len);
        return CLI_EX_DATA;
    }
    *mean = sum / (double)n;
    return CLI_OK;
}

int cmd_memory(int argc, char **argv)
{
    cli_common c = {.format = OUT_TABLE};
    int help = 0;
    long context = 0;
    for (int i = 1; i < argc; i++) {
        int r = cli_common_flag(&c, argc, argv, &i, &help);
        if (r < 0) return CLI_EX_USAGE;
        if (r) continue;
        const char *v;
        if ((v = cli_flag_value(argc, argv, &i, "--context"))) {
            if (cli_flag_missing_value(v) || cli_parse_long("--context", v, 1, 100000000, &context)) return CLI_EX_USAGE;
        } else if (cli_is_flag(argv[i])) {
            return cli_usage_error("memory", "unknown option '%s'", argv[i]);
        } else if (!c.scenario) {
            c.scenario = argv[i];
        } else {
            return cli_usage_error("memory", "unexpected argument '%s'", argv[i]);
        }
    }
    if (help) { fputs(cli_usage_of("memory"), stdout); return CLI_OK; }
    if (!c.scenario) return cli_usage_error("memory", "missing SCENARIO");
    scn_scenario s;
    /* The first candidate's deployment, hardware, weights and engine (plan_first). */
    int rc = cli_load_first(&c, &s, NULL);
    if (rc) return rc;
    double mean = (double)context;
    if (!context && s.workload.arrival == SCN_ARRIVAL_TRACE && (rc = trace_mean(&s, &mean))) return rc;

    const scn_options *o = &s.options;
    int tp = s.deployment.tensor_parallel;
    out_doc *d = out_doc_init();
    if (!d) return CLI_EX_INTERNAL;
    scenario_section(d, &s);
    kv_weights w = kv_weights_compute(&s.model, tp);
    kv_cache_cfg c0 = kv_cache_cfg_make(&s, o->kv_dtype[0], 0, 0);
    /* A proposer in the first options.speculative entry sits inside the budget (kv_spec.h). */
    const scn_spec *sp0 = kv_spec_get(&s, 0);
    kv_capacity k0 = kv_capacity_spec(&s, &c0, o->block_size[0], mean, sp0);

    bool ep = kv_moe_parallel_on(&s);
    char title[160];
    if (ep)
        snprintf(title, sizeof title, "Memory per GPU (attention DP %d x TP %d, experts over EP %d: this GPU's share)",
                 kv_moe_dp(&s), tp, kv_moe_ep(&s));
    else
        snprintf(title, sizeof title, "Memory per GPU (TP %d)", tp);
    out_section(d, "memory", title);
    out_kv_num(d, "device_bytes", "device memory", k0.device_memory, OUT_BYTES);
    /* Engines size their budget from the total CUDA reports (hardware memory_reserved). */
    if (s.engine.mem_given && s.hardware.memory_reserved > 0)
        out_kv_num(d, "cuda_bytes", "as CUDA reports it", scn_hw_cuda_memory(&s.hardware), OUT_BYTES);
    out_kv_num(d, "usable_bytes", free_budget(&s) ? "free after runtime, weights, activations (x fraction)" : "usable (x utilization)",
               k0.usable, OUT_BYTES);
    out_kv_num(d, "weight_bytes", sp0 ? "weights (target + speculative proposer)" : "weights", k0.weights, OUT_BYTES);
    out_kv_num(d, "activation_bytes", "activation peak", k0.activation, OUT_BYTES);
    /* Part of that peak as a free-memory profiler sees it (engine memory.held_allreduce). */
    double held_ar = kv_held_allreduce_bytes(&s);
    if (held_ar > 0) out_kv_num(d, "held_allreduce_bytes", "  of which all-reduce messages held", held_ar, OUT_BYTES);
    out_kv_num(d, "runtime_bytes", "runtime overhead", k0.runtime, OUT_BYTES);
    cli_kv_budget(d, k0.kv_budget, "kv_budget_bytes", "KV cache budget", "kv_budget", "kv_shortfall_bytes");
    out_kv_num(d, "params_total", "parameters (total)", w.params_total, OUT_COUNT);
    out_kv_num(d, "params_active", "parameters (active/token)", w.params_active, OUT_COUNT);
    kv_seq_size z = kv_seq_size_of(&s);
    if (!context) {
        out_kv_num(d, "mean_prompt_tokens", "prompt per request (tokens, shared prefix and history included)", z.prompt,
                   OUT_NUM);
        out_kv_num(d, "mean_output_tokens", "output per request (tokens)", z.output, OUT_NUM);
    }
    out_kv_num(d, "mean_tokens", "sequence at its end (tokens)", k0.mean_tokens, OUT_NUM);
    out_kv_num(d, "max_output_tokens", "most a request may generate (tokens)", (double)z.output_max, OUT_INT);

    static const out_col cols[] = {
        {"kv_dtype", "kv dtype", OUT_STR},
        {"window", "window", OUT_STR},
        {"layout", "layout", OUT_STR},
        {"block_size", "block (tokens)", OUT_INT},
        {"kv_bytes_per_token", "KV per token", OUT_BYTES},
        {"reserved_tokens_per_sequence", "per seq (tokens)", OUT_INT},
        {"kv_bytes_per_sequence", "KV per seq", OUT_BYTES},
        {"capacity_tokens", "capacity (tokens)", OUT_INT},
        {"capacity_blocks", "capacity (blocks)", OUT_INT},
        {"max_concurrent_seqs", "max concurrent seqs", OUT_INT},
        {"waste_fraction", "reserved but unused", OUT_FRAC},
    };
    /* Every GPU of a tensor-parallel group holds the same tokens (its share of their bytes), so
     * token and sequence counts are a replica's, or with attention DP one DP rank's. */
    if (ep && kv_moe_dp(&s) > 1)
        snprintf(title, sizeof title, "KV capacity per DP rank (bytes per GPU of its TP %d; %d DP ranks hold separate "
                 "sequences)", tp, kv_moe_dp(&s));
    else
        snprintf(title, sizeof title, "KV capacity per GPU");
    out_table(d, "capacity", title, (int)(sizeof cols / sizeof cols[0]), cols);
    for (int di = 0; di < o->n_dtype; di++)
        for (int wi = 0; wi < o->n_window; wi++)
            for (int li = 0; li < o->n_layout; li++) {
                int nb = o->layout[li] == SCN_LAYOUT_PAGED ? o->n_block : 1;
                for (int bi = 0; bi < nb; bi++) {
                    kv_cache_cfg cc = kv_cache_cfg_make(&s, o->kv_dtype[di], o->sink[wi], o->window[wi]);
                    int bs = o->layout[li] == SCN_LAYOUT_PAGED ? o->block_size[bi] : 1;
                    kv_capacity k = kv_capacity_spec(&s, &cc, bs, mean, sp0);
                    char win[48];
                    if (o->window[wi]) snprintf(win, sizeof win, "%d+%d", o->sink[wi], o->window[wi]);
                    else snprintf(win, sizeof win, "off");
                    bool paged = o->layout[li] == SCN_LAYOUT_PAGED;
                    out_cell_str(d, scn_dtype_name(o->kv_dtype[di]));
                    out_cell_str(d, win);
                    out_cell_str(d, paged ? "paged" : "contiguous");
                    /* What one sequence occupies: its whole blocks, or its reservation (tokens
                     * of the full-attention layers); its bytes count windowed layers at their
                     * window (kv_capacity_compute, model/kv_blocks.c). */
                    kv_cache_cfg cf = kv_cache_fold(&s.model, &cc);
                    long held = kv_seq_held(&cf, k.mean_tokens < 9e15 ? (long)(k.mean_tokens + 0.5) : (long)9e15);
                    long per_seq = paged ? (held + bs - 1) / bs * bs : k.reserve_contiguous;
                    out_cell_num(d, paged ? bs : 0.0 / 0.0);
                    out_cell_num(d, k.kv_bytes_per_token);
                    out_cell_num(d, (double)per_seq);
                    out_cell_num(d, paged ? k.seq_bytes_paged : k.seq_bytes_contiguous);
                    out_cell_num(d, paged ? (double)k.capacity_blocks * bs : (double)k.capacity_tokens);   /* whole blocks */
                    out_cell_num(d, paged ? (double)k.capacity_blocks : 0.0 / 0.0);
                    out_cell_num(d, (double)(paged ? k.max_seqs_paged : k.max_seqs_contiguous));
                    out_cell_num(d, paged ? k.waste_paged : k.waste_contiguous);
                }
            }
    cli_spec_memory(d, &s, &c0, o->block_size[0]);   /* when options.speculative is on */
    cli_moe_memory(d, &s, &c0, o->block_size[0]);    /* with EP / attention DP */
    cli_memory_disagg(d, &s, &c0, o->block_size[0], mean);   /* each pool, when disaggregated */
    /* The held all-reduce messages are whole hidden states of the profile run's tokens on every
     * rank: more ranks do not shrink them, so raising tensor_parallel is no cure when they are
     * what overflows; the run's length is (docs/cost-model.md, "Memory budget and capacity"). */
    if (k0.kv_budget <= 0 && held_ar > 0 && held_ar >= -k0.kv_budget)
        out_note(d, "The model does not fit: weights, activations and runtime need %.2f GiB of the %.2f GiB "
                    "usable, of which %.2f GiB are the profile run's all-reduce messages (max_num_batched_tokens %d "
                    "tokens of the hidden state each), which tensor_parallel does not shrink. Lower "
                    "max_num_batched_tokens%s, or raise gpu_memory_utilization.",
                 (k0.weights + k0.activation + k0.runtime) / 1073741824.0, k0.usable / 1073741824.0,
                 held_ar / 1073741824.0, s.deployment.max_num_batched_tokens,
                 s.engine.budget_covers_context ? " and max_model_len (the engine's step takes at least max_model_len tokens)"
                                                : "");
    else if (k0.kv_budget <= 0 && s.engine.mem_given && s.engine.mem_budget == SCN_MEM_FREE)
        /* A fraction of what is free after the weights and activations (TensorRT-LLM): the
         * usable figure is 0 here, so the need is set against what the GPU has, and no fraction
         * can help. */
        out_note(d, "The model does not fit: weights, activations and runtime need %.2f GiB of the %.2f GiB the GPU "
                    "has (as CUDA reports it; the engine's memory fraction applies to what they leave). Raise "
                    "tensor_parallel.",
                 (k0.weights + k0.activation + k0.runtime) / 1073741824.0, scn_hw_cuda_memory(&s.hardware) / 1073741824.0);
    else if (k0.kv_budget <= 0)
        out_note(d, "The model does not fit: weights, activations and runtime need %.2f GiB of the %.2f GiB "
                    "usable. Raise tensor_parallel or gpu_memory_utilization.",
                 (k0.weights + k0.activation + k0.runtime) / 1073741824.0, k0.usable / 1073741824.0);
    out_note(d, "Contiguous reserves a request's prompt plus the most it may generate (%ld tokens), within max_model_len "
                "(%d tokens); paged allocates blocks as a sequence grows; a window keeps sink + window tokens, and a model's "
                "sliding-window layers keep only their window (KV per seq counts them so). Per-sequence figures assume a sequence of %.0f tokens at its end. The simulator and `capacity` use the same rules.",
             z.output_max, s.deployment.max_model_len, k0.mean_tokens);
    if (!z.known && !context)
        out_note(d, "The request lengths come from a trace or a file, so sequences are assumed to reach max_model_len; "
                    "pass --context TOKENS for another length.");
    rc = cli_emit(d, c.format);
    out_doc_free(d);
    return rc;
}
