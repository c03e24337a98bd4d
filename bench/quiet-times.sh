#!/usr/bin/env bash
# quiet-times.sh: issue 11's planner and simulator goals timed on N pinned cores of an otherwise
# idle machine (this project's build machine is shared, so its wall times read high; the device
# machine lent for GPU work has idle cores). Prints wall and CPU seconds of each run, least of
# REPEAT runs (default 2). Uses bash's `time` and taskset (when present), nothing else.
# usage: quiet-times.sh KVPLAN_BINARY [CORES (default 2)]
set -u
bin=$1; cores=${2:-2}; repeat=${REPEAT:-2}
[ -x "$bin" ] || { echo "usage: $0 KVPLAN_BINARY [CORES]" >&2; exit 64; }
pin="" pin1=""
if command -v taskset >/dev/null 2>&1; then pin="taskset -c 0-$((cores - 1))" pin1="taskset -c 0"; fi
echo "# $(date -u +%Y-%m-%dT%H:%M:%SZ) $(nproc) cores here, runs pinned to ${cores} (${pin:-no taskset}), least of ${repeat}"
TIMEFORMAT='%R %U %S'
# one PIN LABEL GOAL ARGS...: the least wall of `repeat` runs, with that run's CPU (user + sys).
one() {
    local p=$1 label=$2 goal=$3 best="" t
    shift 3
    for _ in $(seq "$repeat"); do
        t=$( { time $p "$bin" "$@" >/dev/null 2>&1; } 2>&1 | tail -n 1)
        if [ -z "$best" ] || awk -v a="$t" -v b="$best" 'BEGIN { split(a, x, " "); split(b, y, " "); exit !(x[1] < y[1]) }'; then best=$t; fi
    done
    # One-core goals are CPU time (issue 11: "in under 20 ms of CPU"); the others wall time.
    awk -v l="$label" -v g="$goal" -v t="$best" 'BEGIN { split(t, x, " "); cpu = x[2] + x[3]
        one = index(l, "(1 core)") > 0; v = one ? cpu : x[1]
        printf "%-44s %8.3f s wall %8.3f s CPU   goal < %s s %s: %s\n", l, x[1], cpu, g, one ? "CPU" : "wall",
               (v < g ? "met" : "not met") }'
}
# The simulator goals are on one core; the planner's on `cores`.
one "$pin1" "simulate splitwise 6.45 req/s (1 core)" 0.020 simulate bench/splitwise.yaml --no-db
one "$pin1" "simulate splitwise 3 req/s (1 core)" 0.035 simulate bench/splitwise.yaml --no-db --set workload.arrival.rate=3/s
for f in scenarios/*.yaml scenarios/archetypes/*.yaml; do
    one "$pin" "capacity $(basename "$f" .yaml)" 5 capacity "$f" --format json --jobs "$cores"
done
one "$pin" "plan sweep-500 --seeds 1" 15 plan bench/sweep-500.yaml --no-db --no-rules --top 3 --seeds 1 --format json --jobs "$cores"
one "$pin" "plan sweep-500 (3 seeds)" 15 plan bench/sweep-500.yaml --no-db --no-rules --top 3 --format json --jobs "$cores"
