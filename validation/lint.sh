#!/bin/sh
# Checks the form of validation/published.tsv: 19 fields per row (the 19th, engine_args, may be empty), unique ids, names that
# exist in the bundled library, known modes and metrics, a positive number in `value`, a
# unit that fits the metric, and a source on every row. It checks the form only: it
# cannot tell whether a value matches its source (that is what the source column is for).
# Usage: sh validation/lint.sh [published.tsv] [library dir]; exit 0 when clean, 65 otherwise.
set -eu
here=$(dirname "$0")
tsv=${1:-$here/published.tsv}
lib=${2:-$here/../scenarios}
[ -r "$tsv" ] || { echo "$tsv: cannot read" >&2; exit 66; }
[ -d "$lib/hardware" ] && [ -d "$lib/models" ] || { echo "$lib: no hardware/ or models/ library" >&2; exit 66; }

gpus=$(ls "$lib/hardware" | sed -n 's/\.yaml$//p' | tr '\n' ' ')
models=$(ls "$lib/models" | sed -n 's/\.yaml$//p' | tr '\n' ' ')

awk -F'\t' -v file="$tsv" -v gpus="$gpus" -v models="$models" '
BEGIN {
    n = split(gpus, a, " "); for (i = 1; i <= n; i++) gpu[a[i]] = 1
    n = split(models, a, " "); for (i = 1; i <= n; i++) model[a[i]] = 1
    split("vllm sglang trtllm gpt-fast", a, " "); for (i in a) engine[a[i]] = 1
    split("closed poisson offline batch capacity", a, " "); for (i in a) mode[a[i]] = 1
    split("ttft_mean_ms ttft_p50_ms ttft_p99_ms tpot_mean_ms tpot_p50_ms itl_mean_ms e2e_mean_ms step_ms", a, " ")
    for (i in a) { metric[a[i]] = 1; timed[a[i]] = 1 }
    split("output_tok_s total_tok_s req_s kv_tokens", a, " "); for (i in a) metric[a[i]] = 1
    header = "id\tgpu\tgpus\ttp\tmodel\tengine\tengine_version\tweight_dtype\tkv_dtype\tmode\tload\tinput_tokens\toutput_tokens\tmetric\tvalue\tunit\tsource\tnotes\tengine_args"
    bad = 0; seen_header = 0; rows = 0
}
function err(col, msg) { printf "%s:%d:%d: %s\n", file, NR, col, msg > "/dev/stderr"; bad++ }
/^#/ && !seen_header { next }
!seen_header {
    if ($0 != header) err(1, "header: expected the 19 documented column names")
    seen_header = 1; next
}
{
    rows++
    if (NF != 19) { err(1, "row has " NF " fields, expected 19"); next }
    if ($1 in id) err(1, "id: duplicate of line " id[$1]); id[$1] = NR
    if (!($2 in gpu)) err(2, "gpu: \"" $2 "\" is not in the hardware library")
    if ($3 !~ /^[1-9][0-9]*$/) err(3, "gpus: not a positive integer")
    if ($4 != "" && $4 !~ /^[1-9][0-9]*$/) err(4, "tp: not a positive integer or empty")
    if ($4 != "" && $3 ~ /^[0-9]+$/ && $4 + 0 > $3 + 0) err(4, "tp: larger than gpus")
    if (!($5 in model)) err(5, "model: \"" $5 "\" is not in the model library")
    if (!($6 in engine)) err(6, "engine: \"" $6 "\" is not vllm, sglang, trtllm or gpt-fast")
    if (!($10 in mode)) err(10, "mode: \"" $10 "\" is not closed, poisson, offline, batch or capacity")
    if ($10 != "capacity" && $11 !~ /^[0-9]+(\.[0-9]+)?$/) err(11, "load: not a number")
    if (!($14 in metric)) err(14, "metric: \"" $14 "\" is not a documented metric")
    if ($15 !~ /^[0-9]+(\.[0-9]+)?$/ || $15 + 0 <= 0) err(15, "value: not a positive number")
    if (($14 in timed) && $16 != "ms") err(16, "unit: a time metric must be in ms")
    if ($14 ~ /_tok_s$/ && $16 !~ /^tok\/s/) err(16, "unit: a token rate must be tok/s...")
    if ($14 == "req_s" && $16 != "req/s") err(16, "unit: req_s must be in req/s")
    if ($14 == "kv_tokens" && ($16 != "tokens" || $10 != "capacity")) err(16, "kv_tokens: unit tokens, mode capacity")
    if (length($17) < 20) err(17, "source: missing or too short to locate the figure")
}
END {
    if (!seen_header) err(1, "no header line")
    if (bad) { printf "%s: %d problem(s) in %d rows\n", file, bad, rows > "/dev/stderr"; exit 65 }
    printf "%s: %d rows, form OK\n", file, rows
}' "$tsv"
