/* main.c: the kvplan entry point: dispatches to a subcommand, and answers --version and help. */
#include "cli.h"
#include "../backend/be_cuda.h"
#include "../sim/alloc_policy.h"

#include <stdio.h>
#include <string.h>

#ifndef KVPLAN_VERSION
#define KVPLAN_VERSION "dev"
#endif

const cli_command CLI_COMMANDS[] = {
    {"plan", cmd_plan, "which KV-cache optimisations and deployment to choose, and why",
     "usage: kvplan plan SCENARIO [--jobs N] [--top K] [--seeds N] [--shard I/N] [--fresh] [--no-rules] [--no-bound]\n"
     "                            [--seed N] [--db PATH | --no-db] [--set PATH=VALUE]... [--format table|json|csv]\n"
     "\n"
     "Simulates every combination of the scenario's options (KV layout and block size, prefix cache,\n"
     "KV dtype, attention, window, scheduler, max_num_seqs, step budget, tensor parallelism,\n"
     "replicas, KV-head what-ifs, hardware, engines) on all cores over several seeds, ranks them\n"
     "by the scenario's objective under its SLO (throughput, goodput and cost at each candidate's\n"
     "highest rate within the SLO; p99 latency at the offered load), with a 95 % interval per\n"
     "candidate, marks the Pareto front of throughput per GPU against p99 latency, recommends one\n"
     "and explains why in terms of the cost model, and tests rules of thumb on this scenario.\n"
     "Options that change the model's outputs are recommended only where `quality:` accepts them.\n"
     "\n"
     "  --jobs N     parallel simulations (default: all cores)\n"
     "  --top K      show the best K candidates\n"
     "  --seeds N    seeds per candidate (default 3); an option is credited only when the\n"
     "               candidates' 95 % intervals separate\n"
     "  --shard I/N  evaluate only candidates I, I+N, ... into --db (merge shards with kvplan merge)\n"
     "  --fresh      simulate every candidate even if the database holds its run\n"
     "  --no-rules   skip the rules of thumb (they simulate extra variants)\n"
     "  --no-bound   simulate every candidate (by default a candidate whose capacity provably\n"
     "               stays below the best found so far is not simulated, or, with several\n"
     "               seeds, not beyond its first)\n"},
    {"capacity", cmd_capacity, "max rate within the SLO, GPUs for a target rate, longest context",
     "usage: kvplan capacity SCENARIO [--target-rate R] [--concurrency N] [--top K] [--max-replicas N]\n"
     "                                [--seeds N] [--curve] [--jobs N] [--set PATH=VALUE]...\n"
     "                                [--format table|json|csv] [--no-db]\n"
     "\n"
     "Ranks the scenario's candidates by their highest arrival rate within the SLO (mean and 95 %\n"
     "interval over --seeds, default 3), then for the best K (default 3) and the best on each\n"
     "hardware profile: that rate, $ per million output tokens at it (with a price), with\n"
     "--target-rate (e.g. 50/s) the fewest GPUs (tensor parallel x replicas) that serve it, and\n"
     "the longest context per request (at most max_model_len) that fits when --concurrency\n"
     "requests (default 64) share the cache. --curve draws load curves instead (kvplan sweep).\n"},
    {"sweep", cmd_sweep, "latency and goodput against offered rate (load curves)",
     "usage: kvplan sweep SCENARIO [--top K] [--points N] [--max-rate R] [--seeds N] [--jobs N]\n"
     "                             [--seed N] [--db PATH | --no-db] [--set PATH=VALUE]...\n"
     "                             [--format table|json|csv]\n"
     "\n"
     "Ranks the candidates at capacity (over --seeds, default 1), then simulates the best K\n"
     "(default 3) at --points rates (default 8) evenly spaced up to --max-rate (default 1.5x the\n"
     "highest capacity found): TTFT and TPOT percentiles, E2E p99, goodput and output tokens/s at\n"
     "each rate. The points are stored so `kvplan report` draws them with the SLO lines.\n"},
    {"merge", cmd_merge, "combine databases (plan shards, runs from several machines)",
     "usage: kvplan merge OUT.db IN.db [IN.db]... [--format table|json|csv]\n"
     "\n"
     "Copies every run (with its scenario, metrics, requests and time series) and calibration of each\n"
     "input into OUT.db, one transaction per input; runs OUT.db already holds are not copied twice.\n"
     "After `kvplan plan S --shard I/N --db shard-I.db` on N machines, merge the shards and run\n"
     "`kvplan plan S --db OUT.db`: it reuses every stored candidate instead of simulating.\n"},
    {"report", cmd_report, "an offline HTML page of charts from the database (or its data as JSON/CSV)",
     "usage: kvplan report SCENARIO [--db PATH] [--out FILE.html] [--format html|json|csv]\n"
     "                              [--set PATH=VALUE]...\n"
     "\n"
     "From the runs stored for SCENARIO: the Pareto front of output throughput per GPU against p99\n"
     "latency, the memory breakdown per GPU, KV cache use over time (runs with --timeseries-out),\n"
     "and predicted against measured (pairs of runs with the same options and seed). HTML (default,\n"
     "written to --out, default kvplan-report.html) inlines vega, vega-lite and vega-embed, so the\n"
     "page works offline; json prints every dataset, csv the Pareto table.\n"},
    {"memory", cmd_memory, "memory breakdown and KV capacity per KV dtype and layout",
     "usage: kvplan memory SCENARIO [--context T] [--set PATH=VALUE]... [--format table|json|csv]\n"
     "\n"
     "Prints where the GPU memory goes (weights, activations, runtime, KV budget) and, for each\n"
     "KV dtype, StreamingLLM window and layout the scenario's options name, the KV bytes per\n"
     "token and how many tokens, blocks and concurrent sequences fit.\n"
     "\n"
     "  --context T      length each sequence holds, in tokens, for the concurrency columns\n"
     "                   (default: the workload's mean prompt + mean output)\n"
     "  --set PATH=VALUE override a scenario field, e.g. --set deployment.tensor_parallel=2\n"
     "  --format F       table (default), json (everything, numbers exact) or csv (main table)\n"},
    {"cost", cmd_cost, "step-time breakdown per operation, with the bound that binds",
     "usage: kvplan cost SCENARIO [--batch N] [--context T] [--prefill T] [--cached C]\n"
     "                            [--set PATH=VALUE]... [--format table|json|csv]\n"
     "\n"
     "Prints the roofline time of one engine step per operation (projections, attention, MLP or\n"
     "experts, norms, all-reduce, LM head, step overhead): its flops and bytes, and whether\n"
     "memory bandwidth, compute, the interconnect or fixed overhead binds it. The step runs the\n"
     "first KV dtype, attention and window the scenario's options name (use --set to pick).\n"
     "\n"
     "  --batch N        decode sequences in the step (default 1, or 0 with --prefill)\n"
     "  --context T      cached tokens of each decode sequence (default: mean prompt + half the\n"
     "                   mean output)\n"
     "  --prefill T      add one prefill chunk of T new tokens\n"
     "  --cached C       tokens already cached before that chunk (a prefix hit or earlier chunks)\n"
     "  --set PATH=VALUE override a scenario field, e.g. --set options.kv_dtype=fp8\n"
     "  --format F       table (default), json or csv (the per-operation table)\n"},
    {"simulate", cmd_simulate, "simulate serving the scenario's workload; store the predicted run",
     "usage: kvplan simulate SCENARIO [--seed N] [--requests-out FILE.csv] [--timeseries-out FILE.csv]\n"
     "                                [--sample-interval T] [--db PATH | --no-db]\n"
     "                                [--blocks N] [--per-step]\n"
     "                                [--set PATH=VALUE]... [--format table|json|csv]\n"
     "\n"
     "Runs the workload through kvplan's serving engine (vLLM-style scheduling, paged or contiguous\n"
     "KV, prefix cache, preemption, replicas) with the cost model as its clock, under the first\n"
     "value of each option list (use --set options.X=... to pick), and prints throughput, goodput,\n"
     "TTFT/TPOT/ITL/E2E/queueing percentiles and KV behaviour. The run is stored in the database\n"
     "in one transaction.\n"
     "\n"
     "  --seed N              random seed (default: the scenario's seed)\n"
     "  --requests-out FILE   one CSV row per request (also stored in the database)\n"
     "  --timeseries-out FILE KV use, queue and batch sampled every --sample-interval (default 1 s)\n"
     "  --blocks N            simulate with N KV blocks per replica instead of the cost model's count\n"
     "  --per-step            form every engine step through the scheduler instead of fast-forwarding\n"
     "                        steady decode; slower, same results (a check of the fast-forward)\n"
     "  --db PATH             database (default $KVPLAN_DB, else ~/.local/share/kvplan/kvplan.db); --no-db skips it\n"
     "  --format F            table (default), json or csv (the latency table)\n"},
    {"run", cmd_run, "run the scenario for real on a backend; store the measured run",
     "usage: kvplan run SCENARIO [--backend cpu|cuda] [--seed N] [--requests-out FILE.csv]\n"
     "                           [--timeseries-out FILE.csv] [--db PATH | --no-db]\n"
     "                           [--set PATH=VALUE]... [--format table|json|csv]\n"
     "\n"
     "Runs the workload through the same engine as `simulate`, but every step really executes on\n"
     "the backend (cpu: kvplan's C reference transformer with random weights; cuda: the GPU\n"
     "backend) and takes the time it measured. Requests arrive on the scenario's schedule; the\n"
     "KV pool is the cost model's block count for the choice. The run is stored as measured.\n"
     "Backends run the paged layout. Exit 69 when the backend is not built or has no device.\n"},
    {"calibrate", cmd_calibrate, "measure a backend and fit the hardware profile to it",
     "usage: kvplan calibrate --backend cpu|cuda [--scenario SCENARIO] [--name NAME] [--out FILE]\n"
     "       kvplan calibrate --from RUN [--from RUN]... --scenario SCENARIO [--name NAME] [--out FILE]\n"
     "                        [--db PATH | --no-db] [--format table|json|csv]\n"
     "\n"
     "With --backend: measures the copy bandwidth, GEMM throughput at the model's layer shapes,\n"
     "and real decode and prefill steps, then fits the profile's efficiencies and overheads by\n"
     "least squares and reports every step's measured and predicted time. The scenario gives the\n"
     "model shape and the hardware profile to refine (default: tiny-cpu.yaml for cpu).\n"
     "With --from: fits the same coefficients to stored measured runs (e.g. imported from vLLM,\n"
     "SGLang, genai-perf/aiperf or MLPerf) by re-simulating SCENARIO, under each run's imported\n"
     "benchmark setting, until its mean TTFT and TPOT match theirs; with two runs or more, each\n"
     "run is also predicted by a fit to the others and those held-out residuals are printed.\n"
     "Writes the profile as <library>/hardware/NAME.yaml (default NAME: <profile>.calibrated),\n"
     "or --out FILE, and stores the calibration in the database.\n"},
    {"validate", cmd_validate, "predict and run a scenario; print predicted against measured",
     "usage: kvplan validate SCENARIO [--backend cpu|cuda] [--recalibrate] [--seed N]\n"
     "                                [--db PATH | --no-db] [--set PATH=VALUE]... [--format table|json|csv]\n"
     "\n"
     "Calibrates the backend unless this machine already has a calibration for it in the database\n"
     "(--recalibrate forces one), predicts the scenario with the calibrated cost model on exactly\n"
     "the KV blocks the backend allocated, runs it on the backend, stores both runs and prints\n"
     "each metric predicted and measured with the error (predicted / measured - 1).\n"},
    {"compare", cmd_compare, "two stored runs side by side",
     "usage: kvplan compare RUN_A RUN_B [--db PATH] [--format table|json|csv]\n"
     "\n"
     "Prints every metric of both runs and how B differs from A (B / A - 1).\n"},
    {"import", cmd_import, "store measurements from vLLM, SGLang, genai-perf/aiperf or MLPerf",
     "usage: kvplan import FILE [--scenario SCENARIO] [--db PATH] [--format table|json|csv]\n"
     "\n"
     "Reads vLLM's benchmark_serving or `vllm bench serve` result JSON (--save-result), Prometheus\n"
     "text scraped from a vLLM /metrics endpoint, a genai-perf or aiperf profile export JSON, SGLang\n"
     "bench_serving JSONL (the last record) or an MLPerf mlperf_log_summary.txt (Server, Offline),\n"
     "recognised by content, and stores it as a measured run, linked to SCENARIO when given. The\n"
     "benchmark's setting (concurrency, rate or offline, request count, mean prompt and output\n"
     "lengths) is stored with it and applied to SCENARIO's workload, so the run can be\n"
     "re-simulated. A malformed or truncated file is an error (exit 65) and stores nothing.\n"},
    {"validate-published", cmd_validate_published, "predict a table of published measurements; print the errors",
     "usage: kvplan validate-published FILE [--format table|json|csv]\n"
     "\n"
     "Reads a tab-separated table of public measurements (validation/published.tsv; columns in\n"
     "docs/validation.md), builds a scenario per row from the bundled library (model, hardware,\n"
     "engine profile when one is bundled), predicts it uncalibrated (simulation for closed,\n"
     "poisson and offline rows; the cost model for batch and capacity rows) and prints each row's\n"
     "measured and predicted value and error (predicted / measured - 1), then per metric class the\n"
     "share within 10 % and 20 % and the median |error|. Rows whose model, hardware, dataset or\n"
     "dtype the library lacks are listed as skipped with the reason. A malformed row is an error\n"
     "(file:line:col, exit 65). Nothing is fitted to the table and nothing is stored.\n"},
    {"validate-kernels", cmd_validate_kernels, "compare the cost model with measured GPU kernels; print the errors",
     "usage: kvplan validate-kernels DIR [--format table|json|csv]\n"
     "\n"
     "Reads DIR/gemm.csv, gemm_map.csv, attn.csv, step.csv, prefill.csv, int4.csv, moe.csv and\n"
     "step_ctx.csv (the H200 measurements in validation/h200-2026-11-30/; columns in\n"
     "docs/validation.md) and predicts each row with the bundled, uncalibrated h200 profile and\n"
     "the bare engine: a GEMM as the model prices each GEMM of a step, an attention kernel as the\n"
     "attention op of a one-layer model of its heads (SDPA's FlashAttention-2 as the sdpa family,\n"
     "cuDNN against the FA3 class), a CUDA-graph decode step as kv_step_time's device time on a\n"
     "scenario built to match, a prefill forward as kv_step_time's device time against the\n"
     "measurement with its unfused elementwise ops replaced by the model's fused terms, an int4\n"
     "GEMM at the model's W4A16 bytes, a grouped expert GEMM as the MoE layer prices it. Prints\n"
     "each row's measured time, what it is compared with, predicted time, error (predicted /\n"
     "compared - 1) and bound, then per class the share within 10 % and 20 % and the median\n"
     "|error|, and each class's largest gaps. A missing file exits 66, a malformed line 65\n"
     "(file:line:col). Nothing is fitted and nothing is stored.\n"},
    {"selftest", cmd_selftest, "check every CUDA kernel against the CPU reference",
     "usage: kvplan selftest [--backend cuda] [--format table|json|csv]\n"
     "\n"
     "Runs each CUDA kernel (RMSNorm, RoPE, SwiGLU, bf16 GEMM, KV write per dtype, paged decode,\n"
     "prefill and naive attention over block sizes 8/16/32 and every KV dtype) on fresh random\n"
     "inputs, outputs poisoned first, and compares with the CPU reference by relative L2 error.\n"
     "Exit 69 when kvplan was built without CUDA or no device is usable; 70 when a check fails.\n"},
    {"kernel-bench", cmd_kernel_bench, "device ceilings and attention kernel speed (CUDA)",
     "usage: kvplan kernel-bench [--format table|json|csv]\n"
     "\n"
     "Measures the device-to-device copy bandwidth and the bf16 GEMM ceiling, then paged decode\n"
     "attention over batch x context as GB/s against the copy bandwidth, and prefill attention at\n"
     "4096 tokens (flash and naive) as TFLOP/s against the GEMM ceiling. Exit 69 without a device.\n"},
    {"runs", cmd_runs, "list the runs stored in the database",
     "usage: kvplan runs [--db PATH] [--limit N] [--format table|json|csv]\n"
     "\n"
     "Lists stored runs, newest first (default limit 50), with their headline metrics.\n"},
    {"show", cmd_show, "print one stored run",
     "usage: kvplan show RUN [--db PATH] [--format table|json|csv]\n"
     "\n"
     "Prints every metric stored for run RUN (an id from `kvplan runs`) and how it was made.\n"},
    {"list", cmd_list, "list the bundled models, hardware profiles, engines and scenarios",
     "usage: kvplan list [models|hardware|engines|scenarios] [--format table|json|csv]\n"
     "\n"
     "Lists the library entries a scenario can name (from $KVPLAN_LIBRARY or the bundled\n"
     "scenarios/ folder), with their source files.\n"},
};
const int CLI_N_COMMANDS = (int)(sizeof CLI_COMMANDS / sizeof CLI_COMMANDS[0]);

static void print_help(FILE *fp)
{
    fprintf(fp, "kvplan %s: what the KV cache costs, and which optimisation pays.\n\n"
                "usage: kvplan COMMAND [ARGS]\n\ncommands:\n", KVPLAN_VERSION);
    for (int i = 0; i < CLI_N_COMMANDS; i++) fprintf(fp, "  %-13s %s\n", CLI_COMMANDS[i].name, CLI_COMMANDS[i].summary);
    fprintf(fp, "  %-13s %s\n\n", "help", "help COMMAND prints a command's options");
    fprintf(fp, "kvplan --version prints the version and which backends this build has.\n"
                "Exit codes: 0 ok, 64 usage, 65 bad input data, 66 input not found, 69 backend\n"
                "unavailable, 70 internal error, 73 cannot create an output file or database.\n");
}

static const cli_command *find(const char *name)
{
    for (int i = 0; i < CLI_N_COMMANDS; i++)
        if (!strcmp(CLI_COMMANDS[i].name, name)) return &CLI_COMMANDS[i];
    return NULL;
}

static int unknown(const char *name)
{
    const char *best = NULL;
    int bestd = 99;
    for (int i = 0; i < CLI_N_COMMANDS; i++) {
        int d = scn_edit_distance(name, CLI_COMMANDS[i].name);
        if (d < bestd) { bestd = d; best = CLI_COMMANDS[i].name; }
    }
    if (best && bestd <= 2) fprintf(stderr, "kvplan: unknown command '%s'; did you mean '%s'?\n", name, best);
    else fprintf(stderr, "kvplan: unknown command '%s' (see 'kvplan --help')\n", name);
    return CLI_EX_USAGE;
}

int main(int argc, char **argv)
{
    if (argc < 2) { print_help(stderr); return CLI_EX_USAGE; }
    sim_alloc_policy();   /* before any thread: the planner's simulations reuse each other's pages */
    const char *cmd = argv[1];
    if (!strcmp(cmd, "--help") || !strcmp(cmd, "-h")) { print_help(stdout); return CLI_OK; }
    if (!strcmp(cmd, "--version") || !strcmp(cmd, "version")) {
        char msg[1400], lib[4096];
        int cuda = be_cuda_plugin_describe(msg, sizeof msg);   /* dlopen only: CUDA is not started */
        scn_library_dir(lib, sizeof lib);
        printf("kvplan %s\nbackends: cpu%s\ncuda: %s\nlibrary: %s\n", KVPLAN_VERSION, cuda > 0 ? ", cuda" : "", msg, lib);
        return CLI_OK;
    }
    if (!strcmp(cmd, "help")) {
        if (argc < 3) { print_help(stdout); return CLI_OK; }
        const cli_command *c = find(argv[2]);
        if (!c) return unknown(argv[2]);
        fputs(c->usage, stdout);
        return CLI_OK;
    }
    const cli_command *c = find(cmd);
    if (!c) return unknown(cmd);
    return c->run(argc - 1, argv + 1);
}
