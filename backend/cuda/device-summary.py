#!/usr/bin/env python3
"""device-summary.py OUT SECONDS: the markdown summary of a device check, from the files
backend/cuda/device-check.sh left in OUT (CSV and JSON outputs of kvplan). Tested on the CPU
backend's outputs, so a device call does not find its bugs."""
import csv, json, os, sys
out, secs = sys.argv[1], sys.argv[2]
def rows(name):
    p = os.path.join(out, name)
    return list(csv.DictReader(open(p))) if os.path.exists(p) and os.path.getsize(p) else []
lines = ["# H200 device check", "", f"Written by backend/cuda/device-check.sh in {secs} s."]
smi = os.path.join(out, "nvidia-smi.csv")
if os.path.exists(smi): lines += ["", "```", open(smi).read().strip(), "```"]
st = rows("selftest.csv")
bad = [r for r in st if r.get("result") != "ok"]
lines += ["", "## Selftest", "", f"{len(st) - len(bad)} of {len(st)} kernel checks passed."]
for r in bad: lines.append(f"- FAILED {r['kernel']} {r['shape']}: error {r['error']} over {r['tolerance']}")
kb = rows("kernel-bench.csv")
if kb:
    lines += ["", "## Ceilings and kernels", "", "| kernel | shape | rate | of ceiling |", "|---|---|---|---|"]
    for r in kb: lines.append(f"| {r['what']} | {r['shape']} | {float(r['rate']):.4g} {r['unit']} | {100*float(r['share_of_ceiling']):.1f} % |")
cal = rows("calibration.csv")
if cal:
    errs = sorted(abs(float(r["error"])) for r in cal)
    lines += ["", "## Calibration", "", f"{len(cal)} steps fitted; median |error| {100*errs[len(errs)//2]:.1f} %."]
for s in ("gpu-decode", "gpu-prefix"):
    p = os.path.join(out, f"validate-{s}.json")
    if not os.path.exists(p) or not os.path.getsize(p): continue
    v = json.load(open(p))
    lines += ["", f"## Validation: {s}", "", "| metric | predicted | measured | error |", "|---|---|---|---|"]
    for r in v.get("comparison", []):
        e = r.get("error")
        lines.append(f"| {r['metric']} | {r['predicted']:.4g} | {r['measured']:.4g} | {'' if e is None else f'{100*e:+.1f} %'} |")
    lines.append(f"\nMedian |error| (throughput, mean TPOT): {100*v['validation']['median_key_error']:.1f} %.")
open(os.path.join(out, "summary.md"), "w").write("\n".join(lines) + "\n")
print("\n".join(lines))
