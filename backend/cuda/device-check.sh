#!/usr/bin/env bash
# device-check.sh: the whole device check in one call on an H200 (issues #5 and #15), built so
# that its one run cannot be wasted:
#   - everything it writes goes into one archive, $OUT/device-check.tar.gz, beside
#     $OUT/summary.md and $OUT/log.txt: three files (the device tool brings back at most 8);
#   - cuBLAS is looked for under exactly the soname the plugin was built for (device-prep.sh
#     records it in .devlibs/cublas-soname) wherever the image may have it (CUDA folders, pip's
#     nvidia/*/lib and nvidia/cu*/lib, conda) and the answer, `ldd` of the binary and the
#     plugin, and `nvidia-smi` are recorded first;
#   - every stage runs under its own timeout, clamped to what is left of a total budget, and the
#     summary and the archive are written whatever happens (an EXIT trap);
#   - a failing stage is recorded with its exit code and the check goes on to the next.
# The budget (default 300 s) is the stage limits below plus 20 s for the summary: selftest 90,
# kernel-bench in two halves (decode 50, prefill 40, each its own stage, so a slow kernel in one
# keeps the other's rows), calibrate 60, one validate 40. docs/cuda.md estimates each stage's
# time on an H200 from its bytes and flops. With a machine start of 1-2 minutes the first
# call takes about 7 of the 15 device minutes, so a rerun still fits (a machine cannot start with
# under 4 minutes left). The second validate (gpu-prefix) is not in the default run; it is a
# separate short call, only if time remains: DC_STAGES=validate DC_VALIDATE=gpu-prefix
# DC_BUDGET=80. docs/cuda.md gives the exact device tool calls.
# Prepare here with backend/cuda/device-prep.sh, then call the device tool with carry
# [".devlibs"], timeout_s 360 and the command `bash backend/cuda/device-check.sh`.
#
# DRY_RUN=1 runs it on a machine without a GPU: every stage, the archive and the summary, with
# the device stages answering 69 at their first device call and calibrate/validate run on the
# cpu backend on a small scenario so the summary is built from real outputs.
# tests/test_cuda_plugin.c runs it so and inspects the archive. DC_BUDGET=seconds overrides the
# total budget and DC_STAGE_LIMIT=seconds caps every stage (the test uses both to reach the
# timeout paths); DC_STAGES (default "selftest kernel-bench-decode kernel-bench-prefill calibrate
# validate"; "kernel-bench" stands for both halves) picks stages,
# DC_VALIDATE the validate scenarios; DC_PLAN=1 prints the budget and the stage limits and exits
# without doing anything (the test checks that they fit).
set -u
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
DRY=${DRY_RUN:-0}
BUDGET=${DC_BUDGET:-300}
SUMMARY_S=20                # kept back from every stage's limit for the summary and the archive
LIM_SELFTEST=90 LIM_BENCH_DECODE=50 LIM_BENCH_PREFILL=40 LIM_CALIBRATE=60 LIM_VALIDATE=40
STAGES=${DC_STAGES:-selftest kernel-bench-decode kernel-bench-prefill calibrate validate}
case " $STAGES " in *" kernel-bench "*) STAGES=" $STAGES "; STAGES="${STAGES/ kernel-bench / kernel-bench-decode kernel-bench-prefill }";; esac
if [ "$DRY" = 1 ]; then VALIDATE=${DC_VALIDATE:-tiny-cpu}; else VALIDATE=${DC_VALIDATE:-gpu-decode}; fi
wants() { case " $STAGES " in *" $1 "*) return 0;; *) return 1;; esac; }
# The plan: each chosen stage and its limit, then the summary's share; they must fit the budget.
plan=""
wants selftest && plan+="selftest $LIM_SELFTEST "
wants kernel-bench-decode && plan+="kernel-bench-decode $LIM_BENCH_DECODE "
wants kernel-bench-prefill && plan+="kernel-bench-prefill $LIM_BENCH_PREFILL "
wants calibrate && plan+="calibrate $LIM_CALIBRATE "
if wants validate; then for s in $VALIDATE; do plan+="validate-$s $LIM_VALIDATE "; done; fi
plan+="summary $SUMMARY_S"
planned=$(echo $plan | awk '{for (i = 2; i <= NF; i += 2) t += $i; print t}')
if [ "${DC_PLAN:-0}" = 1 ]; then
  printf 'budget\t%s\n' "$BUDGET"
  echo $plan | awk '{for (i = 1; i < NF; i += 2) printf "%s\t%s\n", $i, $(i + 1)}'
  exit 0
fi
OUT=${OUT:-$root/device-out}
mkdir -p "$OUT"
W=$(mktemp -d "${TMPDIR:-/tmp}/kvplan-device.XXXXXX")
start=$(date +%s)
export KVPLAN_LIBRARY="$root/scenarios" KVPLAN_DB="$W/kvplan.db"
: >"$OUT/log.txt"
printf 'stage\tseconds\texit\tlimit\n' >"$W/stages.tsv"

say() { echo "== $(date -u +%H:%M:%S) +$(( $(date +%s) - start ))s $*" | tee -a "$OUT/log.txt"; }
left() { echo $(( BUDGET - ($(date +%s) - start) )); }

# stage NAME LIMIT_S OUTFILE CMD...: stdout to $W/OUTFILE, stderr to $W/NAME.err (echoed to the
# log), under min(LIMIT_S, what is left of the budget less 20 s for the summary).
stage() {
  local name=$1 limit=$2 outf=$3; shift 3
  local room=$(( $(left) - SUMMARY_S ))
  [ "$limit" -gt "$room" ] && limit=$room
  [ -n "${DC_STAGE_LIMIT:-}" ] && [ "$limit" -gt "$DC_STAGE_LIMIT" ] && limit=$DC_STAGE_LIMIT
  if [ "$limit" -le 0 ]; then
    say "$name: skipped (no time left in the ${BUDGET} s budget)"
    printf '%s\t0\tskipped\t0\n' "$name" >>"$W/stages.tsv"
    return 124
  fi
  say "$name (limit ${limit} s): $*"
  local t0=$(date +%s) rc
  timeout -k 5 "$limit" "$@" >"$W/$outf" 2>"$W/$name.err"
  rc=$?
  sed 's/^/   | /' "$W/$name.err" | tail -n 40 >>"$OUT/log.txt"
  [ $rc = 124 ] || [ $rc = 137 ] && say "$name: TIMED OUT after ${limit} s"
  printf '%s\t%s\t%s\t%s\n' "$name" "$(( $(date +%s) - t0 ))" "$rc" "$limit" >>"$W/stages.tsv"
  say "$name: exit $rc"
  return $rc
}

finish() {
  local rc=$?
  say "summary and archive (exit so far: $rc)"
  python3 "$root/backend/cuda/device-summary.py" "$W" "$(( $(date +%s) - start ))" >/dev/null 2>"$W/summary.err" ||
    { echo "# Device check: the summary script failed"; echo; echo '```'; cat "$W/summary.err"; echo '```';
      echo; echo '```'; cat "$W/stages.tsv"; echo '```'; } >"$W/summary.md"
  cp "$W/summary.md" "$OUT/summary.md"
  cp "$OUT/log.txt" "$W/log.txt"
  tar -czf "$OUT/device-check.tar.gz" -C "$W" . 2>>"$OUT/log.txt" || say "archive failed"
  say "done in $(( $(date +%s) - start )) s: $OUT/summary.md, $OUT/log.txt, $OUT/device-check.tar.gz"
  rm -rf "$W"
}
trap finish EXIT

say "1. environment"
{ uname -a; date -u; echo "dry run: $DRY"; echo "budget: $BUDGET s (stage limits and summary: $planned s)";
  echo "stages: $STAGES; validate: $VALIDATE"; } >"$W/environment.txt"
[ "$planned" -gt "$BUDGET" ] && say "note: the stage limits ($planned s) exceed the ${BUDGET} s budget; the last stages will be cut"
if command -v nvidia-smi >/dev/null; then
  timeout 10 nvidia-smi >"$W/nvidia-smi.txt" 2>&1
  timeout 10 nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm,clocks.mem,clocks.max.sm --format=csv \
    >"$W/nvidia-smi.csv" 2>&1
else
  echo "nvidia-smi: not found" >"$W/nvidia-smi.txt"
fi

# cuBLAS: the plugin opens it at run time (backend/cuda/gemm.cu); tell it exactly where. Only
# the soname it was built for will do (another major version has another ABI): device-prep.sh
# recorded it; else it is read from the plugin's strings (gemm.cu spells it out).
soname=$(cat .devlibs/cublas-soname 2>/dev/null)
[ -n "$soname" ] || soname=$(grep -aoE 'libcublas\.so\.[0-9]+' "${KVPLAN_CUDA_PLUGIN:-.devlibs/libkvplan-cuda.so}" 2>/dev/null | head -n 1)
[ -n "$soname" ] || soname=$(grep -aoE 'libcublas\.so\.[0-9]+' build/libkvplan-cuda.so 2>/dev/null | head -n 1)
[ -n "$soname" ] || soname=libcublas.so.13        # what CUDA 13, this tree's toolkit, ships
cublas=""
for d in ${CUDA_HOME:+"$CUDA_HOME/lib64"} /usr/local/cuda*/lib64 /usr/local/cuda*/lib /usr/local/cuda*/targets/x86_64-linux/lib \
         /usr/local/lib/python3*/site-packages/nvidia/*/lib /usr/local/lib/python3*/dist-packages/nvidia/*/lib \
         /usr/local/lib/python3*/site-packages/nvidia/cu*/lib /usr/local/lib/python3*/dist-packages/nvidia/cu*/lib \
         /usr/lib/python3/dist-packages/nvidia/*/lib /opt/*/.venv/lib/python3*/site-packages/nvidia/*/lib \
         ${CONDA_PREFIX:+"$CONDA_PREFIX/lib"} /opt/conda/lib /opt/conda/envs/*/lib /usr/lib/x86_64-linux-gnu; do
  [ -z "$cublas" ] && [ -e "$d/$soname" ] && cublas="$d/$soname"
done
if [ -z "$cublas" ]; then
  cublas=$(timeout 15 find / -xdev \( -path /proc -o -path /sys \) -prune -o -name "$soname" -print 2>/dev/null | head -n 1)
fi
{ echo "wanted: $soname (and ${soname/libcublas/libcublasLt} beside it)"; echo "libcublas: ${cublas:-not found}";
  [ -n "$cublas" ] && ls -l "$(dirname "$cublas")"/libcublas* 2>&1; } >"$W/cublas.txt"
if [ -n "$cublas" ]; then
  export KVPLAN_CUBLAS="$cublas"
  export LD_LIBRARY_PATH="$(dirname "$cublas")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi
say "cuBLAS: ${cublas:-not found (the device stages will say so)}"

say "2. the binary and the plugin"
if [ -n "${KVPLAN_BIN:-}" ]; then
  KV="$KVPLAN_BIN"          # a chosen binary (the dry-run test's)
elif [ -x .devlibs/kvplan ]; then
  export LD_LIBRARY_PATH="$root/.devlibs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  export KVPLAN_CUDA_PLUGIN="$root/.devlibs/libkvplan-cuda.so"
  KV="$root/.devlibs/kvplan"
else
  KV="$root/kvplan"
fi
{ echo "== ldd $KV"; ldd "$KV" 2>&1; echo; echo "== ldd ${KVPLAN_CUDA_PLUGIN:-$root/build/libkvplan-cuda.so}";
  ldd "${KVPLAN_CUDA_PLUGIN:-$root/build/libkvplan-cuda.so}" 2>&1; } >"$W/ldd.txt"
if ! "$KV" --version >"$W/version.txt" 2>&1; then
  say "the carried binary does not run here ($(head -c 300 "$W/version.txt")); trying a build"
  stage build 240 build.log make CUDA=1 || { say "no runnable kvplan: stopping"; exit 70; }
  KV="$root/kvplan"
  unset KVPLAN_CUDA_PLUGIN
  "$KV" --version >"$W/version.txt" 2>&1
fi
cat "$W/version.txt" >>"$OUT/log.txt"

if wants selftest; then
  say "3. selftest: every kernel against the CPU reference, and a whole step"
  stage selftest "$LIM_SELFTEST" selftest.csv "$KV" selftest --backend cuda --format csv
  rc=$?
  if [ $rc = 69 ] && [ "$DRY" != 1 ]; then say "no usable CUDA device: stopping at the first device call"; exit 69; fi
fi

# The kernel bench in two halves (KVPLAN_KERNEL_BENCH, backend/cuda/kernel_bench.cu), each with
# the ceiling it is reported against.
if wants kernel-bench-decode; then
  say "4a. copy ceiling and decode attention (v2 cp.async, v2 direct, v1)"
  stage kernel-bench-decode "$LIM_BENCH_DECODE" kernel-bench-decode.csv env KVPLAN_KERNEL_BENCH=decode "$KV" kernel-bench --format csv
fi
if wants kernel-bench-prefill; then
  say "4b. GEMM ceiling and prefill attention (fp32 flash, tensor cores, naive)"
  stage kernel-bench-prefill "$LIM_BENCH_PREFILL" kernel-bench-prefill.csv env KVPLAN_KERNEL_BENCH=prefill "$KV" kernel-bench --format csv
fi

if [ "$DRY" = 1 ]; then
  # The same commands on the cpu backend, small, so the summary reads real outputs.
  backend=cpu; cal=tiny-cpu; extra=(--set workload.requests=12)
else
  backend=cuda; cal=gpu-decode; extra=()
fi
if wants calibrate; then
  say "5. calibrate ($backend) on $cal's shape"
  stage calibrate "$LIM_CALIBRATE" calibration.csv "$KV" calibrate --backend "$backend" --scenario "scenarios/$cal.yaml" \
    --name "h200.calibrated" --out "$W/h200.calibrated.yaml" --format csv
fi
if wants validate; then
  for s in $VALIDATE; do
    say "6. validate $s ($backend)"
    stage "validate-$s" "$LIM_VALIDATE" "validate-$s.json" "$KV" validate "scenarios/$s.yaml" --backend "$backend" "${extra[@]}" --format json
  done
fi
exit 0
