#!/usr/bin/env bash
# device-check.sh: issue #5's device work in one call on an H200 (aim: under 8 minutes):
# selftest of every kernel against the CPU reference; copy and GEMM ceilings; decode attention
# GB/s over batch x context and prefill attention TFLOP/s; calibration; `kvplan validate` on two
# GPU scenarios. Results (SQLite database, CSVs, calibrated profile, markdown summary) go under
# $OUT. Prepare with backend/cuda/device-prep.sh here, then call the device with carry [".devlibs"]
# and the command `bash backend/cuda/device-check.sh`. On a machine without a GPU it runs up to
# its first device call (the selftest) and exits 69 there.
set -u
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
OUT=${OUT:-$root/device-out}
mkdir -p "$OUT"
export KVPLAN_LIBRARY="$root/scenarios" KVPLAN_DB="$OUT/kvplan.db"
say() { echo "== $(date -u +%H:%M:%S) $*" | tee -a "$OUT/log.txt"; }
start=$(date +%s)

say "1. the binary"
if [ -x .devlibs/kvplan ] && LD_LIBRARY_PATH="$root/.devlibs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" .devlibs/kvplan --version >/dev/null 2>&1; then
  export LD_LIBRARY_PATH="$root/.devlibs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  KV="$root/.devlibs/kvplan"
else
  say "no carried binary runs here; building"
  make CUDA=1 >"$OUT/build.log" 2>&1 || { say "build failed (see build.log)"; exit 70; }
  KV="$root/kvplan"
fi
"$KV" --version | tee "$OUT/version.txt"
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm,clocks.mem --format=csv \
  >"$OUT/nvidia-smi.csv" 2>&1

say "2. selftest: every kernel against the CPU reference"
"$KV" selftest --backend cuda --format csv >"$OUT/selftest.csv" 2>"$OUT/selftest.err"
rc=$?
cat "$OUT/selftest.err"
if [ $rc = 69 ]; then say "no usable CUDA device: stopping at the first device call"; exit 69; fi
[ $rc = 0 ] || say "selftest FAILED (exit $rc): later numbers measure kernels that are not yet right"

say "3. ceilings and attention kernels"
"$KV" kernel-bench --format csv >"$OUT/kernel-bench.csv" 2>"$OUT/kernel-bench.err" || say "kernel-bench exit $?"

say "4. calibrate the H200 profile on Llama-3-8B's shape"
"$KV" calibrate --backend cuda --scenario scenarios/gpu-decode.yaml --name h200.calibrated --out "$OUT/h200.calibrated.yaml" \
  --format csv >"$OUT/calibration.csv" 2>"$OUT/calibration.err" || say "calibrate exit $?"

for s in gpu-decode gpu-prefix; do
  say "5. validate $s"
  "$KV" validate "scenarios/$s.yaml" --backend cuda --format json >"$OUT/validate-$s.json" 2>"$OUT/validate-$s.err" ||
    say "validate $s exit $?"
done

say "6. summary"
python3 backend/cuda/device-summary.py "$OUT" "$(( $(date +%s) - start ))"
