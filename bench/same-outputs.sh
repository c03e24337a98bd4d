#!/usr/bin/env bash
# same-outputs.sh: a speed change must leave every result as it was. Runs `kvplan simulate` of a
# reference binary (e.g. main's, built in another worktree) and of this build over the bundled
# scenarios, the speed issue's benchmark cases and option variants that take the engine's other
# paths (prefix cache, contiguous, chunked and static scheduling, per-step, two replicas), and
# compares the JSON summary, the per-request CSV and the time series byte for byte.
# usage: same-outputs.sh REFERENCE_KVPLAN [NEW_KVPLAN (default build/kvplan)]
# Prints one line per case and "all N cases identical", or the differing cases; exit 1 if any.
set -u
ref=$1; new=${2:-build/kvplan}
[ -x "$ref" ] && [ -x "$new" ] || { echo "usage: $0 REFERENCE_KVPLAN [NEW_KVPLAN]" >&2; exit 64; }
export KVPLAN_LIBRARY=${KVPLAN_LIBRARY:-$PWD/scenarios}
tmp=$(mktemp -d) || exit 70
trap 'rm -rf "$tmp"' EXIT
n=0 bad=0
# one LABEL SCENARIO ARGS...: both binaries, three outputs each.
one() {
    local label=$1 f=$2 which out rc
    shift 2
    n=$((n + 1))
    for which in ref new; do
        local bin=$ref; [ $which = new ] && bin=$new
        out="$tmp/$which"
        "$bin" simulate "$f" --no-db --format json --requests-out "$out.req.csv" --timeseries-out "$out.ts.csv" \
            --sample-interval 5s "$@" >"$out.json" 2>"$out.err"
        echo "rc=$?" >>"$out.json"
    done
    for x in json req.csv ts.csv err; do
        if ! cmp -s "$tmp/ref.$x" "$tmp/new.$x"; then
            echo "DIFFERS  $label ($x)"
            bad=$((bad + 1))
            return
        fi
    done
    local rc; rc=$(tail -n 1 "$tmp/new.json")
    if [ "$rc" = rc=0 ]; then echo "same     $label"; else echo "same     $label (both fail, $rc: $(head -c 100 "$tmp/new.err"))"; fi
}
chat="--set workload.arrival.rate=20/s --set workload.shared_prefix.share=0 --set options.kv_layout=paged --set options.prefix_cache=off"
# The speed issue's benchmark cases (bench/bench_sim.c), fast-forward and per step.
one "splitwise 6.45/s" bench/splitwise.yaml
one "splitwise 3/s" bench/splitwise.yaml --set workload.arrival.rate=3/s
one "splitwise 6.45/s per step" bench/splitwise.yaml --per-step
one "splitwise 3/s per step" bench/splitwise.yaml --set workload.arrival.rate=3/s --per-step
# shellcheck disable=SC2086
one "chat 10k bench" scenarios/chat.yaml $chat --set workload.requests=10000
# shellcheck disable=SC2086
one "chat 100k bench" scenarios/chat.yaml $chat --set workload.requests=100000
# shellcheck disable=SC2086
one "chat 10k bench per step" scenarios/chat.yaml $chat --set workload.requests=10000 --per-step
# Every bundled scenario as shipped, and with its other first-choice paths.
for f in scenarios/*.yaml scenarios/archetypes/*.yaml; do
    b=$(basename "$f" .yaml)
    one "$b" "$f"
    one "$b prefix cache on" "$f" --set options.kv_layout=paged --set options.prefix_cache=on
    one "$b contiguous" "$f" --set options.kv_layout=contiguous --set options.prefix_cache=off
    one "$b chunked" "$f" --set options.scheduler=chunked
    one "$b per step" "$f" --per-step
done
# Models whose layers keep a window (the fast-forward's windowed paths), alone and with the
# prefix cache; a mixture of experts; a sink + window.
for m in gemma-2-9b mistral-7b gpt-oss-20b qwen3-30b-a3b; do
    one "chat $m" scenarios/chat.yaml --set model=$m --set workload.requests=2000
    one "chat $m prefix cache on" scenarios/chat.yaml --set model=$m --set workload.requests=2000 \
        --set options.kv_layout=paged --set options.prefix_cache=on
done
one "chat sink + window" scenarios/chat.yaml --set "options.window={sink: 4, window: 512}" --set workload.requests=2000
# A pool too small for the load: preemptions by recompute and by swap.
one "chat preempted" scenarios/chat.yaml --set workload.requests=3000 --blocks 3000 --set options.kv_layout=paged \
    --set options.prefix_cache=off
one "chat preempted, swap" scenarios/chat.yaml --set workload.requests=3000 --blocks 3000 --set options.kv_layout=paged \
    --set options.prefix_cache=off --set options.preemption=swap
one "chat static" scenarios/chat.yaml --set options.scheduler=static
one "chat two replicas" scenarios/chat.yaml --set deployment.replicas=2
one "chat block size 7, 2001-token prefix" scenarios/chat.yaml --set options.block_size=7 --set workload.shared_prefix.tokens=2001 \
    --set options.prefix_cache=on --set options.kv_layout=paged
# capacity: the planner's runs (several rates, seeds, threads) on two scenarios.
for f in scenarios/chat.yaml scenarios/archetypes/long-document.yaml; do
    n=$((n + 1))
    "$ref" capacity "$f" --format json --jobs 2 >"$tmp/ref.cap" 2>&1
    "$new" capacity "$f" --format json --jobs 2 >"$tmp/new.cap" 2>&1
    if cmp -s "$tmp/ref.cap" "$tmp/new.cap"; then echo "same     capacity $(basename "$f" .yaml)"
    else echo "DIFFERS  capacity $(basename "$f" .yaml)"; bad=$((bad + 1)); fi
done
if [ $bad -eq 0 ]; then echo "all $n cases identical"; else echo "$bad of $n cases differ"; exit 1; fi
