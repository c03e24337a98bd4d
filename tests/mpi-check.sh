#!/usr/bin/env bash
# mpi-check.sh: the MPI planner (kvplan-mpi, `make MPI=1`) on 2 ranks must rank the candidates
# exactly as `kvplan plan --no-db` does. Prints "N passed, N failed".
set -u
bin=${1:?usage: mpi-check.sh BUILD_DIR}
scen="scenarios/chat.yaml --set workload.requests=800 --no-rules --format csv"
pass=0; fail=0
check() { if [ "$2" = ok ]; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL: $1" >&2; fi; }
mpi=$(mpirun --allow-run-as-root --oversubscribe -n 2 "$bin/kvplan-mpi" plan $scen 2>/tmp/mpi-check.err) || true
one=$("$bin/kvplan" plan $scen --no-db --no-bound)   # the MPI planner simulates every candidate
[ -n "$mpi" ] && check "2 ranks produced a plan" ok || check "2 ranks produced a plan ($(tail -3 /tmp/mpi-check.err))" no
[ "$mpi" = "$one" ] && check "2 ranks rank like one process" ok || check "2 ranks rank like one process" no
solo=$(mpirun --allow-run-as-root --oversubscribe -n 1 "$bin/kvplan-mpi" plan $scen 2>/dev/null) || true
[ "$solo" = "$one" ] && check "1 rank ranks like one process" ok || check "1 rank ranks like one process" no
# --seeds reaches every rank: 2 ranks with --seeds 2 rank like `kvplan plan --seeds 2`, and the
# plan says 2 seeds (a rank that ignored it would evaluate 3 and disagree).
mpi2=$(mpirun --allow-run-as-root --oversubscribe -n 2 "$bin/kvplan-mpi" plan $scen --seeds 2 2>/dev/null) || true
one2=$("$bin/kvplan" plan $scen --no-db --seeds 2 --no-bound)
[ -n "$mpi2" ] && [ "$mpi2" = "$one2" ] && check "--seeds 2 on 2 ranks ranks like one process" ok || check "--seeds 2 on 2 ranks ranks like one process" no
echo "$mpi2" | grep -q "^seeds,2$\|seeds per candidate,2\|,2,capacity," && check "--seeds 2 is used" ok || check "--seeds 2 is used" no
mpirun --allow-run-as-root --oversubscribe -n 2 "$bin/kvplan-mpi" plan 2>/dev/null; [ $? -ne 0 ] && check "usage error exits non-zero" ok || check "usage error exits non-zero" no
echo "mpi: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
